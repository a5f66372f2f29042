"""Email: received by a real SMTP server (aiosmtpd) on 127.0.0.1, started by the test."""

import email
import shutil
import socket
import ssl
import subprocess

import aiosmtpd.controller as aiosmtpd
import pytest
from action_helpers import finding
from aiosmtpd.smtp import AuthResult

from mldbg.actions import Email
from mldbg.errors import InvalidConfig


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's naming)
        self.messages.append((envelope.rcpt_tos, email.message_from_bytes(envelope.content), session))
        return "250 OK"


@pytest.fixture
def smtp():
    inbox = Inbox()
    controller = aiosmtpd.Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield inbox, controller.port
    controller.stop()


def test_email_arrives_once_per_rule(smtp, context):
    inbox, port = smtp
    action = Email(["ml@example.com", "oncall@example.com"], host="127.0.0.1", port=port, sender="mldbg@test")
    context.stop_requested = "exploding_tensor at step 3: gradient/fc1.weight holds NaN"
    assert action([finding(step=3), finding(step=4)], context) == 1
    assert action([finding(step=5)], context, final=True) == 0  # the same rule: no second email
    assert len(inbox.messages) == 1
    rcpt, msg, _ = inbox.messages[0]
    assert rcpt == ["ml@example.com", "oncall@example.com"]
    assert "exploding_tensor" in msg["Subject"] and context.run in msg["Subject"]
    body = msg.get_payload(decode=True).decode()
    assert "gradient/fc1.weight holds NaN" in body and "Lower the learning rate" in body
    assert "asked to stop" in body
    assert "step 4" not in body  # once per rule: the rule's first finding stands for it
    # a new rule later in the run gets its own email, at the end at the latest (rate limit)
    action([finding("loss_not_decreasing", 20, "loss 0.69 did not drop over 10 steps")], context, final=True)
    assert len(inbox.messages) == 2
    assert "loss_not_decreasing" in inbox.messages[1][1]["Subject"]


def test_settings_and_credentials_from_the_environment(monkeypatch, context):
    seen = {}

    def authenticator(server, session, envelope, mechanism, auth_data):
        seen["login"] = (auth_data.login, auth_data.password)
        return AuthResult(success=auth_data.password == b"s3cret")

    inbox = Inbox()
    port = free_port()
    controller = aiosmtpd.Controller(
        inbox, hostname="127.0.0.1", port=port, authenticator=authenticator, auth_require_tls=False
    )
    controller.start()
    try:
        monkeypatch.setenv("MLDBG_SMTP_HOST", "127.0.0.1")
        monkeypatch.setenv("MLDBG_SMTP_PORT", str(port))
        monkeypatch.setenv("MLDBG_SMTP_USER", "bot")
        monkeypatch.setenv("MLDBG_SMTP_PASSWORD", "s3cret")
        monkeypatch.setenv("MLDBG_SMTP_FROM", "debugger@example.com")
        action = Email("ml@example.com")
        assert action([finding()], context) == 1
        assert seen["login"] == (b"bot", b"s3cret")
        assert inbox.messages[0][1]["From"] == "debugger@example.com"

        wrong = Email("ml@example.com", password="nope", retries=0, timeout=1)
        assert wrong([finding()], context) == 0  # refused: logged and dropped, never raised
        assert wrong.dropped == 1 and len(inbox.messages) == 1
    finally:
        controller.stop()


@pytest.mark.skipif(
    shutil.which("openssl") is None, reason="needs the openssl command for a test certificate"
)
def test_starttls(tmp_path, monkeypatch, context):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    inbox = Inbox()
    controller = aiosmtpd.Controller(
        inbox, hostname="127.0.0.1", port=free_port(), tls_context=server_tls, require_starttls=True
    )
    controller.start()
    try:
        monkeypatch.setenv("MLDBG_SMTP_CA_FILE", str(cert))
        action = Email("ml@example.com", host="127.0.0.1", port=controller.port, tls="starttls")
        assert action([finding()], context) == 1
        assert len(inbox.messages) == 1
        assert inbox.messages[0][2].ssl is not None  # the session was encrypted
    finally:
        controller.stop()


def test_bad_settings_say_what_is_wrong():
    with pytest.raises(InvalidConfig, match="tls must be one of"):
        Email("a@b.c", tls="maybe")
    with pytest.raises(InvalidConfig, match="email addresses"):
        Email("nobody")
