"""Email: tell people by SMTP when a rule fires."""

from __future__ import annotations

import os
import smtplib
import socket
import ssl
from collections.abc import Iterable, Sequence
from email.message import EmailMessage
from typing import TYPE_CHECKING, Any

from mldbg.actions.base import Action, Context, details, register_action, summary
from mldbg.errors import InvalidConfig

if TYPE_CHECKING:
    from mldbg.rules.base import Finding

SECURITY = ("none", "starttls", "ssl")
DEFAULT_PORT = {"none": 25, "starttls": 587, "ssl": 465}


@register_action
class Email(Action):
    """Send the findings to `to` (one address or several) by SMTP.

    Settings not given here come from the environment: `MLDBG_SMTP_HOST` (default
    localhost), `MLDBG_SMTP_PORT` (25, 587 with STARTTLS, 465 with SSL), `MLDBG_SMTP_TLS`
    (`none`, `starttls` or `ssl`), `MLDBG_SMTP_USER`, `MLDBG_SMTP_PASSWORD` and
    `MLDBG_SMTP_FROM`; `MLDBG_SMTP_CA_FILE` names the CA bundle that signed a private
    server's certificate (default: the system's). By default each rule is emailed once per run; findings that come
    within `min_interval` seconds of the last email go out together in the next one.
    """

    def __init__(
        self,
        to: str | Sequence[str],
        *,
        sender: str | None = None,
        host: str | None = None,
        port: int | None = None,
        tls: str | None = None,
        username: str | None = None,
        password: str | None = None,
        ca_file: str | None = None,
        subject_prefix: str = "[mldbg]",
        timeout: float = 10.0,
        rules: Iterable[str] | None = None,
        **gate: Any,
    ):
        gate.setdefault("min_interval", 60.0)
        super().__init__(rules=rules, **gate)
        env = os.environ.get
        self.to = [to] if isinstance(to, str) else list(to)
        if not self.to or not all("@" in a for a in self.to):
            raise InvalidConfig(f"Email: 'to' needs email addresses, got {to!r}")
        self.host = host or env("MLDBG_SMTP_HOST") or "localhost"
        self.tls = (tls or env("MLDBG_SMTP_TLS") or "none").lower()
        if self.tls not in SECURITY:
            raise InvalidConfig(
                f"Email: tls must be one of {', '.join(SECURITY)}, got {self.tls!r} (MLDBG_SMTP_TLS)"
            )
        port_text = port if port is not None else env("MLDBG_SMTP_PORT")
        try:
            self.port = int(port_text) if port_text not in (None, "") else DEFAULT_PORT[self.tls]
        except ValueError:
            raise InvalidConfig(
                f"Email: port must be a number, got {port_text!r} (MLDBG_SMTP_PORT)"
            ) from None
        self.username = username if username is not None else env("MLDBG_SMTP_USER")
        self.password = password if password is not None else env("MLDBG_SMTP_PASSWORD")
        self.sender = sender or env("MLDBG_SMTP_FROM") or f"mldbg@{socket.gethostname()}"
        self.ca_file = ca_file or env("MLDBG_SMTP_CA_FILE") or None
        self.subject_prefix = subject_prefix
        self.timeout = timeout

    def describe(self) -> str:
        return f"Email to {', '.join(self.to)} via {self.host}:{self.port}"

    def message(self, findings: list[Finding], context: Context) -> EmailMessage:
        msg = EmailMessage()
        msg["Subject"] = f"{self.subject_prefix} {summary(findings, context.run)}".strip()
        msg["From"] = self.sender
        msg["To"] = ", ".join(self.to)
        msg.set_content(details(findings, context))
        return msg

    def act(self, findings: list[Finding], context: Context) -> None:
        msg = self.message(findings, context)
        tls_context = ssl.create_default_context(cafile=self.ca_file)
        if self.tls == "ssl":
            smtp: smtplib.SMTP = smtplib.SMTP_SSL(
                self.host, self.port, timeout=self.timeout, context=tls_context
            )
        else:
            smtp = smtplib.SMTP(self.host, self.port, timeout=self.timeout)
        with smtp:
            if self.tls == "starttls":
                smtp.starttls(context=tls_context)
            if self.username:
                smtp.login(self.username, self.password or "")
            smtp.send_message(msg)
