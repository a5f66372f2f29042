"""Metrics: the Prometheus endpoint scraped over HTTP, and the textfile."""

import urllib.request

import prometheus_client.parser as parser
from action_helpers import finding

from mldbg.actions import Metrics


def samples(text):
    """{(metric, rule or None): value}, parsed by Prometheus' own parser."""
    out = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, s.labels.get("rule"))] = s.value
    return out


def test_endpoint_scraped_over_http(context):
    metrics = Metrics(0)
    metrics.start(context)
    try:
        assert metrics.port and metrics.port > 0
        before = samples(urllib.request.urlopen(metrics.url, timeout=5).read().decode())
        assert before[("mldbg_rule_issues_found", "exploding_tensor")] == 0
        assert before[("mldbg_rule_issues_found", "loss_not_decreasing")] == 0
        assert before[("mldbg_last_step", None)] == 7

        metrics([finding(step=3), finding(step=4)], context)  # ungated: every finding counts
        context.step, context.steps_checked = 9, 10
        context.stop_requested = "exploding_tensor at step 3"
        metrics([finding(step=9)], context)
        with urllib.request.urlopen(metrics.url, timeout=5) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            after = samples(response.read().decode())
        assert after[("mldbg_rule_issues_found", "exploding_tensor")] == 1
        assert after[("mldbg_rule_issues_found", "loss_not_decreasing")] == 0
        assert after[("mldbg_findings_total", "exploding_tensor")] == 3
        assert after[("mldbg_findings_total", "loss_not_decreasing")] == 0
        assert after[("mldbg_rule_last_finding_step", "exploding_tensor")] == 9
        assert after[("mldbg_steps_checked_total", None)] == 10
        assert after[("mldbg_stop_requested", None)] == 1
        assert after[("mldbg_training_ended", None)] == 0
    finally:
        metrics.close()


def test_textfile(tmp_path, context):
    path = tmp_path / "prom" / "mldbg.prom"
    metrics = Metrics(textfile=path)
    metrics.start(context)
    metrics([finding("loss_not_decreasing", 5)], context)
    got = samples(path.read_text())
    assert got[("mldbg_rule_issues_found", "loss_not_decreasing")] == 1
    assert got[("mldbg_findings_total", "loss_not_decreasing")] == 1
    assert list(path.parent.iterdir()) == [path]  # written atomically: no temp file left


def test_label_values_are_escaped(context):
    context.run = 'runs/a "quoted"\\path'
    metrics = Metrics()
    metrics.start(context)
    got = list(parser.text_string_to_metric_families(metrics.text()))
    assert got[0].samples[0].labels["run"] == context.run


# who may read the metrics (issue 16, item 8) -----------------------------------------------
def _get(port, path="/metrics", host=None, headers=None):
    """(status, body) of a GET to 127.0.0.1:port sending `host` as the Host header."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host if host is not None else f"127.0.0.1:{port}")
        for key, value in (headers or {}).items():
            conn.putheader(key, value)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def test_hostile_host_headers_are_refused(context):
    metrics = Metrics(0)
    metrics.start(context)
    try:
        port = metrics.port
        assert metrics.token is None  # loopback: no token needed
        for good in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost"):
            assert _get(port, host=good)[0] == 200, good
        for hostile in ("evil.example", f"evil.example:{port}", f"127.0.0.1.nip.io:{port}",
                        f"10.0.0.1:{port}", f"localhost:{port + 1}", ""):  # fmt: skip
            status, body = _get(port, host=hostile)
            assert status == 421, (hostile, status)
            assert "mldbg_" not in body
    finally:
        metrics.close()


def test_a_non_loopback_bind_needs_the_token(context):
    import base64

    metrics = Metrics(0, host="0.0.0.0")
    metrics.start(context)
    try:
        port, token = metrics.port, metrics.token
        assert token and len(token) >= 16  # generated at start
        assert metrics.url == f"http://127.0.0.1:{port}/metrics?token={token}"
        assert _get(port)[0] == 401
        assert _get(port, headers={"Authorization": "Bearer not-the-token"})[0] == 401
        assert _get(port, path="/metrics?token=wrong-token")[0] == 401
        assert _get(port, headers={"Authorization": f"Bearer {token}"})[0] == 200
        basic = base64.b64encode(f"prometheus:{token}".encode()).decode()
        assert _get(port, headers={"Authorization": f"Basic {basic}"})[0] == 200
        status, body = _get(port, path=f"/metrics?token={token}")
        assert status == 200 and "mldbg_last_step" in body
        assert samples(urllib.request.urlopen(metrics.url, timeout=5).read().decode())
        # the token does not open the door to a rebinding name
        assert _get(port, host=f"evil.example:{port}", headers={"Authorization": f"Bearer {token}"})[0] == 421
    finally:
        metrics.close()


def test_a_given_token_is_required_even_on_loopback(context):
    metrics = Metrics(0, token="s3cret-token-for-test")
    metrics.start(context)
    try:
        assert _get(metrics.port)[0] == 401
        assert _get(metrics.port, headers={"Authorization": "Bearer s3cret-token-for-test"})[0] == 200
    finally:
        metrics.close()
