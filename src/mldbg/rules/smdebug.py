"""smdebug compatibility: rule objects written for smdebug run as they are.

An smdebug rule is any object with `invoke_at_step(step) -> bool` that reads its own
`base_trial` (made with `__init__(self, base_trial, ...)`); True is a finding. `SmdebugRule`
wraps such an object so that the runners treat it as any other rule. (A `Rule` subclass that
defines `invoke_at_step` instead of `check` needs no wrapper: `Rule.check` calls it.)
"""

from __future__ import annotations

import contextlib
from typing import Any

from mldbg.rules.base import Finding, Rule, snake_case
from mldbg.rules.view import TrialView
from mldbg.trial import Trial


def is_smdebug_rule(obj: Any) -> bool:
    """True for an smdebug-style rule object or class (it has `invoke_at_step`)."""
    return callable(getattr(obj, "invoke_at_step", None))


class SmdebugRule(Rule):
    """Runs an smdebug-style rule object: `invoke_at_step(step)` returning True is a finding."""

    default = False
    suggestion = ""

    def __init__(self, obj: Any, trial: Trial | None = None):
        super().__init__(trial)
        self.obj = obj
        self.name = snake_case(type(obj).__name__)  # type: ignore[misc]  # per instance: the wrapped object's name
        if getattr(obj, "base_trial", None) is None:
            with contextlib.suppress(AttributeError):
                obj.base_trial = trial

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if self.obj.invoke_at_step(step):
            message = (
                getattr(self.obj, "message", None)
                or f"{type(self.obj).__name__}: condition met at step {step}"
            )
            return self.finding(trial, step, str(message))
        return None

    def __repr__(self) -> str:
        return f"SmdebugRule({self.obj!r})"
