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
