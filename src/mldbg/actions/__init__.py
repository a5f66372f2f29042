"""Actions: what happens when a rule fires (stop the job, tell people, export metrics).

Each action is one class over `Action` (see `mldbg.actions.base`). `from_config` builds them
from plain dicts such as `{"type": "email", "to": "me@example.com"}` (watch config files).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mldbg.actions.base import Action, Context
from mldbg.actions.email import Email
from mldbg.actions.log import Log
from mldbg.actions.metrics import Metrics
from mldbg.actions.stop import StopTraining
from mldbg.actions.webhook import Webhook
from mldbg.errors import InvalidConfig

KINDS: dict[str, type[Action]] = {
    "stop": StopTraining,
    "stop_training": StopTraining,
    "email": Email,
    "webhook": Webhook,
    "log": Log,
    "metrics": Metrics,
}


def from_config(specs: Iterable[Mapping[str, Any]]) -> list[Action]:
    """Actions from dicts with a `type` (stop, email, webhook, log, metrics) and its settings."""
    out = []
    for i, spec in enumerate(specs):
        if not isinstance(spec, Mapping) or "type" not in spec:
            raise InvalidConfig(
                f"action #{i + 1}: expected an object with a 'type' of {', '.join(sorted(KINDS))}"
            )
        kwargs = dict(spec)
        kind = str(kwargs.pop("type")).lower()
        if kind not in KINDS:
            raise InvalidConfig(
                f"action #{i + 1}: unknown type {kind!r}; choose from {', '.join(sorted(KINDS))}"
            )
        try:
            out.append(KINDS[kind](**kwargs))
        except TypeError as e:
            raise InvalidConfig(f"action #{i + 1} ({kind}): {e}") from None
    return out


__all__ = ["KINDS", "Action", "Context", "Email", "Log", "Metrics", "StopTraining", "Webhook", "from_config"]
