"""A fresh adversarial run against the dashboard's and the metrics endpoint's guards (issue 16,
item 8), over raw HTTP to the real servers: malformed, repeated and missing `Host` headers,
absolute-form request targets, encoded path traversal, hostile `Origin`s on the one POST. The
audit found `[::1]evil` and `localhost:abc` accepted (a malformed Host read as a loopback name)
and a repeated Host on the metrics endpoint judged by its last copy only."""

from __future__ import annotations

import re
import socket
import urllib.parse

from mldbg.access import Access
from mldbg.actions import Metrics
from mldbg.actions.base import Context
from tests.dashboard.helpers import Server


def raw(port: int, request: str) -> tuple[int, bytes]:
    """Send `request` as it is; (status, body) of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(request.encode("latin-1"))
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    found = re.match(rb"HTTP/1\.[01] (\d{3})", data)
    assert found, data[:200]
    return int(found.group(1)), data.partition(b"\r\n\r\n")[2]


def get(port: int, target: str, *headers: str) -> tuple[int, bytes]:
    lines = "".join(f"{h}\r\n" for h in headers)
    return raw(port, f"GET {target} HTTP/1.1\r\n{lines}Connection: close\r\n\r\n")


def test_malformed_hosts_name_no_server():
    access = Access(host="127.0.0.1", port=None)  # any port accepted: only the name counts
    for hostile in ("[::1]evil", "[::1", "localhost:abc", "localhost:99999", "localhost:0", "127.0.0.1:٨٠",
                    "localhost.evil.com", "127.0.0.1.", "[::ffff:127.0.0.1]", "0x7f.1", "2130706433"):  # fmt: skip
        assert access.host_problem(hostile) is not None, hostile
    for good in ("LOCALHOST", "localhost.", "[::1]:8000", "127.0.0.1:8000", "127.0.0.2"):
        assert access.host_problem(good) is None, good
    for two in (
        [("Host", "127.0.0.1"), ("host", "evil.example")],
        [("Host", "evil.example"), ("Host", "127.0.0.1")],
    ):
        status, reason = Access(host="127.0.0.1").check("", Pairs(two))
        assert status == 421 and "2 Host headers" in reason
    assert Access(host="127.0.0.1").check("", Pairs([("Host", "127.0.0.1")])) is None


class Pairs:
    """Headers as a list of pairs, repeated names kept (what the servers hand over)."""

    def __init__(self, pairs):
        self.pairs = pairs

    def items(self):
        return list(self.pairs)


def test_the_dashboard_refuses_hostile_hosts_targets_and_paths(tmp_path):
    with Server(str(tmp_path / "run"), "--no-rules") as server:
        port = urllib.parse.urlsplit(server.url).port
        here = f"Host: 127.0.0.1:{port}"
        for good in (here, f"Host: LOCALHOST:{port}", f"Host: localhost.:{port}", f"Host: [::1]:{port}"):
            assert get(port, "/api/runs", good)[0] == 200, good
        refused = 0
        for hostile in ("[::1]evil", f"[::1]evil:{port}", "localhost:abc", f"localhost.evil.com:{port}",
                        "localhost.evil.com", f"127.0.0.1:{port + 1}", "evil.example", f"127.0.0.1:{port}@evil.example"):  # fmt: skip
            status, body = get(port, "/api/runs", f"Host: {hostile}")
            assert status == 421 and b'"runs"' not in body, (hostile, status, body[:200])
            refused += 1
        # repeated Host headers, no Host, HTTP/1.0 without one: never the runs
        for headers in ([here, "Host: evil.example"], ["Host: evil.example", here], []):
            status, body = get(port, "/api/runs", *headers)
            assert status in (400, 421) and b'"runs"' not in body, (headers, status)
        status, body = raw(port, "GET /api/runs HTTP/1.0\r\n\r\n")
        assert status == 421 and b'"runs"' not in body
        # absolute-form targets: the Host check still holds, an evil authority is not served
        assert get(port, f"http://127.0.0.1:{port}/api/runs", "Host: evil.example")[0] == 421
        status, body = get(port, "http://evil.example/api/runs", here)
        assert status != 200 or b'"runs"' not in body
        # encoded traversal, backslashes, NUL: 404, nothing from outside the package or the runs
        for target in ("/static/..%2f..%2fetc%2fpasswd", "/static/%2e%2e/%2e%2e/etc/passwd",
                       "/static/%252e%252e%252fetc%252fpasswd", "/static/..%5c..%5cetc%5cpasswd",
                       "/static/index.html%00.js", "/api/runs/..%2f..%2fetc/tensors",
                       "/api/runs/%2e%2e/config", "/api/runs/run%00/tensors", "/../../etc/passwd"):  # fmt: skip
            status, body = get(port, target, here)
            assert status == 404 and b"root:" not in body, (target, status)
        # the one POST: hostile origins refused before anything is written
        for origin in (
            "http://evil.example",
            "null",
            "http://localhost.evil.com",
            f"http://127.0.0.1:{port + 1}",
        ):
            status, body = raw(
                port,
                f"POST /api/runs/run/stop HTTP/1.1\r\n{here}\r\nX-Mldbg: 1\r\nOrigin: {origin}\r\n"
                "Content-Length: 0\r\nConnection: close\r\n\r\n",
            )
            assert status == 403, (origin, status, body)
        assert not (tmp_path / "run" / "control").exists()
        assert refused == 8


def test_the_metrics_endpoint_judges_every_host_header():
    metrics = Metrics(0)
    metrics.start(Context(run="run", rules=["loss_not_decreasing"]))
    try:
        port = metrics.port
        here = f"Host: 127.0.0.1:{port}"
        assert get(port, "/metrics", here)[0] == 200
        for headers in ([here, "Host: evil.example"], ["Host: evil.example", here], ["Host: [::1]evil"],
                        ["Host: localhost:abc"], []):  # fmt: skip
            status, body = get(port, "/metrics", *headers)
            assert status in (400, 421) and b"mldbg_" not in body, (headers, status, body[:120])
    finally:
        metrics.close()
