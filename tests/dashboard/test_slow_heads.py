"""The dashboard bounds the time to send a request head (issue 28: slowloris). Before the fix
connections that never finished their head were kept for good (1,500 held open after 20 s in
the adversarial run), so one client could exhaust the server's file descriptors. The real
server, raw sockets."""

from __future__ import annotations

import socket
import time
import urllib.parse

from mldbg.dashboard.server import HEAD_SECONDS
from tests.dashboard.helpers import Server


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_connections_that_never_finish_their_head_are_closed(tmp_path, monkeypatch):
    assert HEAD_SECONDS <= 15  # the default bound
    monkeypatch.setenv("MLDBG_DASHBOARD_HEAD_SECONDS", "1")
    server = Server(str(tmp_path / "run"), "--no-rules")
    try:
        parts = urllib.parse.urlsplit(server.url)
        address = (parts.hostname, parts.port)
        slow = []
        for i in range(40):
            sock = socket.create_connection(address, timeout=10)
            if i % 4 == 1:  # half a head
                sock.sendall(b"GET /api/runs HTTP/1.1\r\nHost: " + parts.netloc.encode() + b"\r\nX-A: ")
            elif i % 4 == 2:  # a head sent a byte at a time, then stopped
                for byte in b"GET / HT":
                    sock.send(bytes([byte]))
            elif i % 4 == 3:  # a full request, then half of a second one on the same connection
                sock.sendall(b"GET /api/runs HTTP/1.1\r\nHost: " + parts.netloc.encode() + b"\r\n\r\nGET /")
            slow.append(sock)  # i % 4 == 0: nothing at all
        started = time.monotonic()
        # the bound is 1 s; 30 s leave room for a loaded machine (without the bound none closes)
        closed = [_closed_by_server(s, within=max(0.1, 30 - (time.monotonic() - started))) for s in slow]
        assert all(closed), f"{closed.count(False)} of {len(slow)} connections still open after 30 s"
        assert server.json("api/runs") is not None  # the server still answers
    finally:
        for sock in slow:
            sock.close()
        server.stop()
