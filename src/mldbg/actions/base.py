"""The extension point for actions: what happens when rules fire.

An action is one small class that overrides `act(findings, context)`. The base class does
the rest, the same way for every action: it keeps only the findings of the rules it cares
about, drops what it already handled (by default one delivery per rule per run), batches
what arrives faster than `min_interval`, and retries a failed delivery with a back-off
instead of letting it reach the watcher. Its memory of what was delivered (`state()`) is
saved by the watcher, so a restarted watcher does not alert twice.

Built-in actions carry `@register_action`, which adds them to `ACTIONS` under their
snake_case name: the `type` a watch config names them by. Other packages add theirs under
the `mldbg.actions` entry point group (see `mldbg.actions.specs`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, overload

if TYPE_CHECKING:
    from mldbg.rules.base import Finding
    from mldbg.store.base import Store

log = logging.getLogger("mldbg")


@dataclass
class Context:
    """What an action may want to know about the run being watched."""

    run: str  # the run's URL (a path, memory://..., s3://...)
    store: Store | None = None
    rules: list[str] = field(default_factory=list)  # names of the rules being checked
    step: int | None = None  # the last step checked
    steps_checked: int = 0
    findings: int = 0  # findings so far in this run
    ended: bool = False  # training has ended and the final pass is done
    stop_requested: str | None = None  # the reason, once a StopTraining action fired
    #: the run as the watcher reads it (a `Trial`), for actions that weigh findings against the
    #: run's facts (`StopTraining` judges diagnoses); None where no watcher gives it
    trial: Any = None


class Action:
    """Base of every action. Override `act`; configure the gate with the keywords below.

    - `rules`: only findings of these rules (names); None means every rule.
    - `once_per_rule`: deliver each rule at most once per run (the default). When False,
      every distinct finding is delivered once (same rule, step, worker and message).
    - `min_interval`: seconds between two deliveries; findings in between are batched.
    - `max_deliveries`: stop delivering after this many (None: no limit).
    - `retries`: how often a failed delivery is retried (with back-off) before it is dropped.
    """

    every_cycle: ClassVar[bool] = False  # True: `act` runs every cycle with every finding, ungated

    def __init__(
        self,
        *,
        rules: Iterable[str] | None = None,
        once_per_rule: bool = True,
        min_interval: float = 0.0,
        max_deliveries: int | None = None,
        retries: int = 3,
    ):
        self.rules = None if rules is None else frozenset(rules)
        self.once_per_rule = once_per_rule
        self.min_interval = float(min_interval)
        self.max_deliveries = max_deliveries
        self.retries = retries
        self.deliveries = 0
        self.dropped = 0
        self._seen: set[str] = set()
        self._pending: list[Finding] = []
        self._pending_keys: list[str] = []
        self._next_at = 0.0
        self._failures = 0

    # the one method to override -------------------------------------------------------
    def act(self, findings: list[Finding], context: Context) -> None:
        """Deliver `findings` (never empty, unless `every_cycle`). Raise on failure: it is retried."""
        raise NotImplementedError

    # identity and lifecycle -----------------------------------------------------------
    def describe(self) -> str:
        """ActionClass short, stable description (no secrets): names the action in state and logs."""
        return type(self).__name__

    def ident(self) -> str:
        """`describe()` plus the gate: names the action's saved state."""
        rules = ",".join(sorted(self.rules)) if self.rules is not None else "*"
        return f"{self.describe()}|{'per-rule' if self.once_per_rule else 'per-finding'}|{rules}"

    def start(self, context: Context) -> None:
        """Called once before the first cycle (open a server, check settings)."""

    def close(self) -> None:
        """Release what `start` opened."""

    def __repr__(self) -> str:
        return f"<{self.describe()}>"

    # the gate -------------------------------------------------------------------------
    def key(self, finding: Finding) -> str:
        """What makes two findings 'the same' for this action."""
        if self.once_per_rule:
            return finding.rule
        return f"{finding.rule}|{finding.step}|{finding.worker or ''}|{finding.message}"

    def __call__(self, findings: Iterable[Finding], context: Context, final: bool = False) -> int:
        """Offer new findings; deliver what passes the gate now. Returns how many were delivered.

        Call it every cycle, also with no findings: batched ones go out when their time comes.
        With `final`, batched findings go out now, whatever `min_interval` says.
        """
        if self.every_cycle:
            self.act(list(findings), context)
            return 0
        for f in findings:
            if self.rules is not None and f.rule not in self.rules:
                continue
            k = self.key(f)
            if k in self._seen or k in self._pending_keys:
                continue
            self._pending.append(f)
            self._pending_keys.append(k)
        return self._deliver(context, final)

    def _deliver(self, context: Context, final: bool) -> int:
        if not self._pending:
            return 0
        now = time.monotonic()
        if now < self._next_at and not final:
            return 0
        if self.max_deliveries is not None and self.deliveries >= self.max_deliveries:
            self.dropped += len(self._pending)
            self._seen.update(self._pending_keys)
            self._pending, self._pending_keys = [], []
            return 0
        batch = self._pending
        try:
            self.act(list(batch), context)
        except Exception as e:
            self._failures += 1
            if self._failures > self.retries:
                log.error("mldbg: %s failed %d times, dropping %d finding(s): %s",
                          self.describe(), self._failures, len(batch), e)  # fmt: skip
                self.dropped += len(batch)
                self._seen.update(self._pending_keys)
                self._pending, self._pending_keys, self._failures = [], [], 0
            else:
                wait = min(60.0, 2.0 ** (self._failures - 1))
                log.warning("mldbg: %s failed (%s); retrying in %.0fs", self.describe(), e, wait)
                self._next_at = now + wait
            return 0
        self._seen.update(self._pending_keys)
        self._pending, self._pending_keys, self._failures = [], [], 0
        self.deliveries += 1
        self._next_at = now + self.min_interval
        return len(batch)

    @property
    def pending(self) -> int:
        """Findings waiting for their delivery (rate limit or retry)."""
        return len(self._pending)

    # persistence ----------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """What was delivered: saved by the watcher so that a restart does not repeat it."""
        return {"seen": sorted(self._seen), "deliveries": self.deliveries}

    def restore(self, state: dict[str, Any]) -> None:
        self._seen = set(state.get("seen", ()))
        self.deliveries = int(state.get("deliveries", 0))


# the registry ---------------------------------------------------------------------------
ACTIONS: dict[str, type[Action]] = {}
ActionClass = TypeVar("ActionClass", bound=type[Action])


@overload
def register_action(cls: ActionClass, /) -> ActionClass: ...
@overload
def register_action(*, aliases: Iterable[str] = ()) -> Callable[[ActionClass], ActionClass]: ...
def register_action(
    cls: ActionClass | None = None, /, *, aliases: Iterable[str] = ()
) -> ActionClass | Callable[[ActionClass], ActionClass]:
    """Class decorator: add a built-in action to `ACTIONS` under its snake_case name
    (`StopTraining` -> `stop_training`) and any `aliases` (`@register_action(aliases=("stop",))`)."""
    names = tuple(aliases)

    def add(klass: ActionClass) -> ActionClass:
        if not (isinstance(klass, type) and issubclass(klass, Action)):
            raise TypeError(f"{klass!r} is not a subclass of mldbg.actions.Action")
        for name in (action_name(klass), *names):
            ACTIONS[name] = klass
        return klass

    return add if cls is None else add(cls)


def action_name(cls: type[Action]) -> str:
    """The snake_case name of an action class."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", cls.__name__).lower()


def summary(findings: list[Finding], run: str) -> str:
    """One line: which rules fired on which run."""
    rules = list(dict.fromkeys(f.rule for f in findings))
    if len(rules) == 1:
        return f"{rules[0]} fired on {run} at step {findings[0].step}"
    return f"{len(rules)} rules fired on {run}: {', '.join(rules)}"


def details(findings: list[Finding], context: Context) -> str:
    """The findings as plain text, with the run and whether the training was asked to stop."""
    lines = [f"Run: {context.run}"]
    if context.step is not None:
        lines.append(f"Last step checked: {context.step}")
    if context.stop_requested:
        lines.append(f"The training was asked to stop: {context.stop_requested}")
    lines.append("")
    lines.extend(str(f) for f in findings)
    return "\n".join(lines) + "\n"
