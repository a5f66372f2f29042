"""A real HTTP server on 127.0.0.1 that records what is POSTed to it (webhook tests)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Sink:
    def __init__(self, fail_first: int = 0):
        self.bodies = []
        self.headers = []
        self.fail_first = fail_first
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if sink.fail_first:
                    sink.fail_first -= 1
                    self.send_response(503)
                    self.end_headers()
                    return
                sink.bodies.append(json.loads(body))
                sink.headers.append(dict(self.headers))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
