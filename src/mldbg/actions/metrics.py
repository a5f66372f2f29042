"""Metrics: rule states and finding counts for Prometheus (the paper's CloudWatch metrics).

Served over HTTP in the Prometheus text format (`/metrics`) and/or written to a textfile
for node_exporter's textfile collector. No dependency: the exposition format is plain text.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mldbg.access import Access
from mldbg.actions.base import Action, Context, register_action
from mldbg.errors import InvalidConfig

if TYPE_CHECKING:
    from mldbg.rules.base import Finding

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@register_action
class Metrics(Action):
    """Expose, per run: `mldbg_rule_issues_found{rule}` (0/1 gauge: 1 once the rule fired),
    `mldbg_findings_total{rule}` (counter), `mldbg_rule_last_finding_step{rule}`,
    `mldbg_last_step`, `mldbg_steps_checked_total`, `mldbg_stop_requested` and
    `mldbg_training_ended`.

    `port` serves them at http://host:port/metrics (port 0 picks a free port: read `.port`
    after `start`); `textfile` rewrites that file atomically at every change. The server
    refuses a `Host` header that does not name it (421: DNS rebinding), and, bound to a
    non-loopback `host` (or given a `token`), a request without the token (401): send it as
    `Authorization: Bearer <token>`, basic auth with the token as password, or `?token=`. A
    token not given is generated at `start` (`.token`; `.url` carries it). Counters count
    every finding, ungated, so a restarted watcher counts the whole run again (as Prometheus
    expects of a restarted exporter).
    """

    every_cycle = True

    def __init__(
        self,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        token: str | None = None,
        allowed_hosts: Iterable[str] = (),
        textfile: str | os.PathLike[str] | None = None,
        rules: Iterable[str] | None = None,
        **gate: Any,
    ):
        super().__init__(rules=rules, **gate)
        self.host = host
        self.port = port
        if token is not None and len(token) < 8:
            raise InvalidConfig(
                "Metrics: a token must have at least 8 characters: use a longer --metrics-token"
            )
        self.token = token
        self.allowed_hosts = tuple(allowed_hosts)
        self._access: Access | None = None
        self.textfile = None if textfile is None else Path(textfile)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._text = ""
        self._run = ""
        self._rules: list[str] = []
        self._counts: dict[str, int] = {}
        self._last_finding: dict[str, int] = {}
        self._step: int | None = None
        self._steps_checked = 0
        self._stop = False
        self._ended = False

    def describe(self) -> str:
        where = [f"http://{self.host}:{self.port}/metrics"] if self.port is not None else []
        where += [str(self.textfile)] if self.textfile else []
        return f"Metrics at {', '.join(where) or 'nowhere'}"

    @property
    def url(self) -> str:
        """Where the metrics are, with the token when one is needed."""
        shown = "127.0.0.1" if self.host in ("", "0.0.0.0") else "[::1]" if self.host == "::" else self.host
        base = f"http://{shown}:{self.port}/metrics"
        return base if self.token is None else f"{base}?token={self.token}"

    # lifecycle --------------------------------------------------------------------------
    def start(self, context: Context) -> None:
        self._update(context)
        if self.port is not None and self._server is None:
            server_class = _V6Server if ":" in self.host else ThreadingHTTPServer
            self._server = server_class((self.host, self.port), _handler(self))
            self._server.daemon_threads = True
            self.port = self._server.server_address[1]
            self._access = Access(self.host, self.port, self.token, self.allowed_hosts)
            self.token = self._access.token
            threading.Thread(target=self._server.serve_forever, name="mldbg-metrics", daemon=True).start()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __getstate__(self) -> dict[str, Any]:  # picklable for the in-process watcher
        state = dict(self.__dict__)
        state["_lock"], state["_server"], state["_access"] = None, None, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # updates ----------------------------------------------------------------------------
    def act(self, findings: list[Finding], context: Context) -> None:
        for f in findings:
            if self.rules is None or f.rule in self.rules:
                self._counts[f.rule] = self._counts.get(f.rule, 0) + 1
                self._last_finding[f.rule] = max(f.step, self._last_finding.get(f.rule, f.step))
        self._update(context)

    def _update(self, context: Context) -> None:
        self._run = context.run
        self._rules = [r for r in context.rules if self.rules is None or r in self.rules]
        self._step = context.step
        self._steps_checked = context.steps_checked
        self._stop = context.stop_requested is not None
        self._ended = context.ended
        text = self.render()
        with self._lock:
            changed, self._text = text != self._text, text
        if changed and self.textfile is not None:
            self._write_textfile(text)

    def render(self) -> str:
        """The metrics in the Prometheus text exposition format 0.0.4."""
        run = f'run="{_escape(self._run)}"'
        rules = sorted(set(self._rules) | set(self._counts))
        out = [
            "# HELP mldbg_rule_issues_found 1 once the rule has found an issue in this run, else 0.",
            "# TYPE mldbg_rule_issues_found gauge",
        ]
        out += [
            f'mldbg_rule_issues_found{{{run},rule="{_escape(r)}"}} {int(r in self._counts)}' for r in rules
        ]
        out += [
            "# HELP mldbg_findings_total Findings reported by the rule in this run.",
            "# TYPE mldbg_findings_total counter",
        ]
        out += [f'mldbg_findings_total{{{run},rule="{_escape(r)}"}} {self._counts.get(r, 0)}' for r in rules]
        if self._last_finding:
            out += [
                "# HELP mldbg_rule_last_finding_step Step of the rule's latest finding.",
                "# TYPE mldbg_rule_last_finding_step gauge",
            ]
            out += [
                f'mldbg_rule_last_finding_step{{{run},rule="{_escape(r)}"}} {s}'
                for r, s in sorted(self._last_finding.items())
            ]
        out += [
            "# HELP mldbg_last_step The last training step checked by the rules.",
            "# TYPE mldbg_last_step gauge",
            f"mldbg_last_step{{{run}}} {-1 if self._step is None else self._step}",
            "# HELP mldbg_steps_checked_total Steps checked by the rules.",
            "# TYPE mldbg_steps_checked_total counter",
            f"mldbg_steps_checked_total{{{run}}} {self._steps_checked}",
            "# HELP mldbg_stop_requested 1 once a rule asked the training to stop.",
            "# TYPE mldbg_stop_requested gauge",
            f"mldbg_stop_requested{{{run}}} {int(self._stop)}",
            "# HELP mldbg_training_ended 1 once training ended and the final pass is done.",
            "# TYPE mldbg_training_ended gauge",
            f"mldbg_training_ended{{{run}}} {int(self._ended)}",
        ]
        return "\n".join(out) + "\n"

    def text(self) -> str:
        with self._lock:
            return self._text

    def _write_textfile(self, text: str) -> None:
        assert self.textfile is not None
        self.textfile.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.textfile.with_name(f".{self.textfile.name}.{uuid.uuid4().hex[:8]}")
        tmp.write_text(text)
        os.replace(tmp, self.textfile)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _V6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def _handler(metrics: Metrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            path, _, query = self.path.partition("?")
            access = metrics._access
            refused = (
                None if access is None else access.check(query, self.headers)
            )  # every Host, repeated ones too
            if refused is not None:
                status, reason = refused
                body = f"{reason}\n".encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                if status == 401:
                    self.send_header("WWW-Authenticate", 'Bearer realm="mldbg metrics"')
                self.end_headers()
                self.wfile.write(body)
                return
            if path not in ("/metrics", "/"):
                self.send_error(404, "mldbg serves /metrics")
                return
            body = metrics.text().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # no access log on stderr
            pass

    return Handler
