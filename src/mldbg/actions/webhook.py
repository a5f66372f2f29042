"""Webhook: POST the findings as JSON (or as a Slack message) to a URL."""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mldbg.actions.base import Action, Context, register_action, summary
from mldbg.errors import InvalidConfig

if TYPE_CHECKING:
    from mldbg.rules.base import Finding


@register_action
class Webhook(Action):
    """POST the findings to `url`.

    The body is `{"source": "mldbg", "run", "summary", "stop_requested", "findings": [...]}`
    where each finding has the keys of `mldbg check --json`. With `slack=True` it is a Slack
    incoming-webhook message (`{"text", "blocks"}`), which Mattermost and Rocket.Chat accept too.
    Any answer other than 2xx counts as a failure and is retried.
    """

    def __init__(
        self,
        url: str,
        *,
        slack: bool = False,
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        rules: Iterable[str] | None = None,
        **gate: Any,
    ):
        super().__init__(rules=rules, **gate)
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidConfig(f"Webhook: url must be an http(s) URL, got {url!r}")
        self.url, auth = _split_userinfo(url)
        self.slack = slack
        self.headers = dict(headers or {})
        if auth is not None and not any(k.lower() == "authorization" for k in self.headers):
            self.headers["Authorization"] = auth  # urllib would take the userinfo for the host
        # never printed, stored or sent elsewhere: the password of the URL, the header values
        self._secrets = [v for v in (_password(url), *self.headers.values()) if v and len(v) >= 4]
        self.timeout = timeout

    def describe(self) -> str:
        # the URL may hold a secret token (Slack's do): show the host and a digest only
        parts = urllib.parse.urlsplit(self.url)
        digest = hashlib.sha1(self.url.encode()).hexdigest()[:8]
        return f"Webhook{' (Slack)' if self.slack else ''} to {parts.scheme}://{parts.netloc}/... [{digest}]"

    def payload(self, findings: list[Finding], context: Context) -> dict[str, Any]:
        if self.slack:
            return slack_message(findings, context)
        return {
            "source": "mldbg",
            "run": context.run,
            "summary": summary(findings, context.run),
            "stop_requested": context.stop_requested,
            "findings": [_finding_json(f) for f in findings],
        }

    def act(self, findings: list[Finding], context: Context) -> None:
        body = json.dumps(self.payload(findings, context)).encode()
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "mldbg", **self.headers},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 (scheme checked)
                response.read()  # non-2xx answers raise HTTPError
        except Exception as e:  # the error is printed by the retries: no secret in it
            text = str(e)
            if any(secret in text for secret in self._secrets):
                raise OSError(redact(text, self._secrets)) from None
            raise


def _split_userinfo(url: str) -> tuple[str, str | None]:
    """`url` without its `user:password@` part, and that part as a basic-auth header value."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
    auth = "Basic " + base64.b64encode(token.encode()).decode("ascii")
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), auth


def _password(url: str) -> str | None:
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return None
    userinfo = parts.netloc.rsplit("@", 1)[0]
    return userinfo.partition(":")[2] or userinfo


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret (and its URL-quoted form) replaced by `***`."""
    for secret in secrets:
        for form in {secret, urllib.parse.unquote(secret), urllib.parse.quote(secret, safe="")}:
            if form:
                text = text.replace(form, "***")
    return text


def _finding_json(f: Finding) -> dict[str, Any]:
    keys = ("rule", "step", "mode", "message", "tensors", "suggestion")
    out = {k: getattr(f, k) for k in keys}
    if f.worker is not None:
        out["worker"] = f.worker
    return out


def slack_message(findings: list[Finding], context: Context) -> dict[str, Any]:
    """A Slack incoming-webhook payload: a plain `text` fallback and one block per finding."""
    head = f":warning: mldbg: {summary(findings, context.run)}"
    if context.stop_requested:
        head += "\n:octagonal_sign: the training was asked to stop"
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": head}}]
    for f in findings[:20]:  # Slack allows 50 blocks per message
        text = f"*{f.rule}* at step {f.step}" + (f" ({f.mode})" if f.mode else "") + f"\n{f.message}"
        if f.suggestion:
            text += f"\n_Try:_ {f.suggestion}"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text[:2900]}})
    if len(findings) > 20:
        blocks.append(
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"and {len(findings) - 20} more"}]}
        )
    return {"text": head + "\n" + "\n".join(str(f) for f in findings[:20]), "blocks": blocks}
