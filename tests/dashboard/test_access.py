"""Who may read the dashboard (issue 16, item 8): a `Host` header that does not name the
server is refused (DNS rebinding), and a dashboard bound to a non-loopback address needs its
token on every request. The real server in its own process, over real HTTP."""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse

from tests.dashboard.helpers import Server


def request(url: str, path: str = "/api/runs", host: str | None = None, headers: dict | None = None):
    """(status, headers, decoded JSON or None) of a GET sending `host` as the Host header."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host if host is not None else parts.netloc)
        for key, value in (headers or {}).items():
            conn.putheader(key, value)
        conn.endheaders()
        response = conn.getresponse()
        body = response.read()
        try:
            decoded = json.loads(body)
        except ValueError:
            decoded = None
        return response.status, response.headers, decoded
    finally:
        conn.close()


def test_hostile_host_headers_are_answered_421(tmp_path):
    with Server(str(tmp_path / "run"), "--no-rules") as server:
        port = urllib.parse.urlsplit(server.url).port
        assert "token=" not in server.banner  # loopback: no token
        for good in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost"):
            status, _, body = request(server.url, host=good)
            assert status == 200 and body["runs"], good
        hostile = ["evil.example", f"evil.example:{port}", f"attacker.test:{port}", f"127.0.0.1.nip.io:{port}",
                   f"10.1.2.3:{port}", f"localhost:{port + 1}", f"localhost.evil.example:{port}", ""]  # fmt: skip
        for host in hostile:
            for path in ("/api/runs", "/", "/static/dashboard.js", "/api/findings"):
                status, _, body = request(server.url, path, host=host)
                assert status == 421, (host, path, status)
                assert "refused" in body["detail"] and "Host" in body["detail"] or host == "", body
        assert server.proc.poll() is None  # still serving


def test_a_non_loopback_bind_needs_its_token(tmp_path):
    with Server(str(tmp_path / "run"), "--no-rules", "--host", "0.0.0.0") as server:
        found = re.search(r"\?token=([A-Za-z0-9_\-]+)", server.banner)
        assert found, server.banner  # generated and shown in the printed URL
        token = found.group(1)
        assert len(token) >= 16
        # without the token, or with a wrong one: refused
        for path in ("/api/runs", "/", "/api/runs?token=wrong-token-123", "/static/plotly.min.js"):
            status, _, body = request(server.url, path)
            assert status == 401, (path, status)
            assert "access token" in body["detail"]
        status, _, _ = request(server.url, headers={"Authorization": "Bearer wrong-token-123"})
        assert status == 401
        # with the token: in the URL once (which sets a cookie), then the cookie alone
        status, headers, _ = request(server.url, f"/?token={token}")
        assert status == 200
        cookie = headers["Set-Cookie"]
        assert (
            cookie.startswith(f"mldbg_token={token}") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        )
        status, _, body = request(server.url, headers={"Cookie": f"mldbg_token={token}"})
        assert status == 200 and body["runs"]
        status, _, body = request(server.url, headers={"Authorization": f"Bearer {token}"})
        assert status == 200
        # the token does not open the door to a rebinding name
        status, _, _ = request(server.url, host="evil.example", headers={"Authorization": f"Bearer {token}"})
        assert status == 421


def test_a_given_token_is_required_on_loopback_too(tmp_path):
    with Server(str(tmp_path / "run"), "--no-rules", "--token", "given-token-1234") as server:
        assert "?token=given-token-1234" in server.banner
        assert request(server.url)[0] == 401
        assert request(server.url, "/api/runs?token=given-token-1234")[0] == 200
