"""SkipBatch and Rollback: ask the training to recover instead of stopping.

Both write a `RecoveryRequest` into the run's store (`control/recover`), the way StopTraining
writes its stop request, so they work from the hook's own watcher (`Hook(rules=...,
actions=["rollback"])`) and from `mldbg watch` in another process alike. The training side
is `mldbg.torch.Guard` (docs/recovery.md): it reads the request at its next step and acts
on it. Without a guard in the training loop the request is written and nothing happens.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from mldbg.actions.base import Action, Context, register_action
from mldbg.errors import CorruptRecord, InvalidConfig
from mldbg.store import layout, open_store

if TYPE_CHECKING:
    from mldbg.rules.base import Finding
    from mldbg.store.base import Store

log = logging.getLogger("mldbg")

KINDS = ("skip", "rollback")


@dataclass(frozen=True)
class RecoveryRequest:
    """What a recovery action asks of the training's Guard. `kind`: "skip" (undo the update
    of the flagged `step`) or "rollback" (back to the last good state kept before `step`,
    the learning rate times `lr_factor`). `requested` (unix time) orders requests and tells
    one for this run from one an earlier run left behind."""

    kind: str = "rollback"
    rule: str = ""
    step: int | None = None
    lr_factor: float = 1.0
    reason: str = ""
    requested: float = 0.0
    by: str = ""

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, blob: bytes, where: str) -> RecoveryRequest:
        try:
            d = json.loads(blob)
        except ValueError as e:
            raise CorruptRecord(
                f"{where}: not JSON ({e}); delete it, a recovery action writes it again"
            ) from None
        if not isinstance(d, dict) or d.get("kind") not in KINDS:
            raise CorruptRecord(f"{where}: not a recovery request (kind must be one of {', '.join(KINDS)})")
        step = d.get("step")
        return cls(
            kind=d["kind"],
            rule=str(d.get("rule", "")),
            step=step if isinstance(step, int) else None,
            lr_factor=float(d.get("lr_factor", 1.0)),
            reason=str(d.get("reason", "")),
            requested=float(d.get("requested", 0.0)),
            by=str(d.get("by", "")),
        )


def read_request(store: Store) -> RecoveryRequest | None:
    """The recovery request in `store`, if any (a damaged one is logged and ignored: it must
    not stop the training)."""
    try:
        blob = store.read(layout.RECOVERY_REQUEST)
    except (FileNotFoundError, OSError):
        return None
    try:
        return RecoveryRequest.decode(blob, f"{store.url}/{layout.RECOVERY_REQUEST}")
    except CorruptRecord as e:
        log.warning("mldbg: %s", e)
        return None


class _Recover(Action):
    kind = "rollback"

    def __init__(self, *, rules: Iterable[str] | None = None, lr_factor: float = 1.0, **gate: Any):
        gate.setdefault("once_per_rule", False)  # a run may need to recover more than once
        super().__init__(rules=rules, **gate)
        if not 0 < float(lr_factor) <= 1:
            raise InvalidConfig(f"{type(self).__name__}: lr_factor must be in (0, 1], got {lr_factor!r}")
        self.lr_factor = float(lr_factor)

    def act(self, findings: list[Finding], context: Context) -> None:
        if context.ended:
            return  # found in the final pass: the training is over
        first = min(findings, key=lambda f: f.step)
        request = RecoveryRequest(
            kind=self.kind,
            rule=first.rule,
            step=first.step,
            lr_factor=self.lr_factor,
            reason=f"{first.rule} at step {first.step}: {first.message}",
            requested=time.time(),
            by=f"mldbg watch (pid {os.getpid()} on {socket.gethostname()})",
        )
        store = context.store or open_store(context.run)
        store.write(layout.RECOVERY_REQUEST, [request.encode()])  # one atomic write
        log.info("mldbg: asked the training to %s: %s", self.kind, request.reason)


@register_action(aliases=("skip",))
class SkipBatch(_Recover):
    """Ask the training's Guard to undo the update of the flagged step: a step it has not
    applied yet is skipped; one already applied (the watcher reads the run a few steps
    behind) is undone by going back to the last good state kept before it, learning rate
    unchanged. The next batches go on."""

    kind = "skip"


@register_action
class Rollback(_Recover):
    """Ask the training's Guard to go back to the last good model and optimizer state it kept
    before the flagged step, and to multiply the learning rate by `lr_factor` (1: unchanged;
    0.5 halves it, for a run diverging at the edge of stability)."""

    kind = "rollback"

    def __init__(self, *, rules: Iterable[str] | None = None, lr_factor: float = 0.5, **gate: Any):
        super().__init__(rules=rules, lr_factor=lr_factor, **gate)

    def describe(self) -> str:
        return f"Rollback lr x{self.lr_factor:g}"
