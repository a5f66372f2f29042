"""`mldbg.torch.Guard`: the training side of the recovery actions (SkipBatch, Rollback).

One line changes in the loop: `guard.step(loss)` instead of `optimizer.step()`. The guard
- skips the update of a step whose loss or gradients are not finite (as AMP's GradScaler
  and the one-line NaN guards do), and after `max_skips` such steps in a row rolls back;
- keeps the last good model and optimizer state every `every` steps (`keep` copies, on the
  CPU by default: the memory of `keep` copies of the weights and the optimizer's state);
- acts on the requests of the SkipBatch and Rollback actions, read from the run's store at
  each step, at most every 0.5 s on a remote store (the rules run in the hook's watcher or
  in `mldbg watch`, a few steps behind).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from mldbg.actions.recovery import RecoveryRequest, read_request
from mldbg.errors import InvalidConfig
from mldbg.store import layout, open_store
from mldbg.store.base import Store

log = logging.getLogger("mldbg")


@dataclass(frozen=True)
class Snapshot:
    step: int  # the state before this step's update
    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    lr_scale: float  # the guard's lr_scale when it was kept (its lr has it already)


def _copy(obj: Any, device: str | torch.device | None) -> Any:
    """A deep copy of a state dict, tensors detached and moved to `device` (None: where they are)."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        return t.to(device, copy=True) if device is not None else t.clone()
    if isinstance(obj, dict):
        return {k: _copy(v, device) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_copy(v, device) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_copy(v, device) for v in obj)
    return obj


class Guard:
    """Skip bad updates and roll back to the last good state; see the module docstring and
    docs/recovery.md.

    `hook`: the run's `mldbg.torch.Hook`, whose store the recovery requests arrive in and
    whose global step numbers them (without it, `out_dir` names the run's store, or the guard
    counts its own steps and acts on non-finite steps only). `lr_factor` multiplies the
    learning rate at a rollback the guard starts itself (after `max_skips`); a Rollback
    action brings its own. `lr_scale` is the product of all factors so far: a loop that sets
    the learning rate itself (a schedule) should multiply by it."""

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        *,
        every: int = 50,
        keep: int = 2,
        hook: Any = None,
        out_dir: str | None = None,
        skip_nonfinite: bool = True,
        max_skips: int = 3,
        lr_factor: float = 0.5,
        device: str | torch.device | None = "cpu",
    ):
        if every < 1 or keep < 1 or max_skips < 1:
            raise InvalidConfig(
                f"Guard: every, keep and max_skips must be >= 1, got {every}, {keep}, {max_skips}"
            )
        if not 0 < lr_factor <= 1:
            raise InvalidConfig(f"Guard: lr_factor must be in (0, 1], got {lr_factor!r}")
        self.model, self.optimizer, self.hook = model, optimizer, hook
        self.every, self.keep, self.max_skips = every, keep, max_skips
        self.skip_nonfinite, self.lr_factor, self.device = skip_nonfinite, lr_factor, device
        self.store: Store | None = None
        if hook is not None and getattr(hook, "session", None) is not None:
            self.store = hook.session.store
        elif out_dir is not None:
            self.store = open_store(out_dir)
        self.lr_scale = 1.0
        self.skipped: list[int] = []  # steps whose update was not applied
        self.rollbacks: list[tuple[int, int, str]] = []  # (at step, back to the state before step, why)
        self._snapshots: list[Snapshot] = []
        self._in_a_row = 0
        self._count = 0  # steps seen, when there is no hook
        self._started = time.time()
        self._handled = self._started  # requests up to this time are handled (or stale)
        self._skip_steps: set[int] = set()
        # a request is looked for at every step on a local disk (one stat), at most every
        # 0.5 s on a remote store (as the recorder looks for a stop request)
        self._poll_seconds = 0.5 if self.store is not None and getattr(self.store, "remote", False) else 0.0
        self._polled = 0.0

    # the one call in the loop ----------------------------------------------------------
    def step(self, loss: torch.Tensor | float | None = None) -> bool:
        """In place of `optimizer.step()`: apply the update unless it is bad or a recovery
        asks otherwise. Returns True when the update was applied."""
        step = self._step()
        if (
            step % self.every == 0
            and self._in_a_row == 0  # the last update was good
            and (not self._snapshots or self._snapshots[-1].step < step)
        ):
            self._keep(step)
        try:
            request = self._request()
            if request is not None and self._handle(request, step):
                return self._skip(step)
            if step in self._skip_steps:
                self._skip_steps.discard(step)
                return self._skip(step, "a SkipBatch action flagged it")
            if self.skip_nonfinite and not self._finite(loss):
                self._in_a_row += 1
                if self._in_a_row >= self.max_skips:
                    self.rollback(step, None, self.lr_factor, f"{self._in_a_row} non-finite steps in a row")
                    self._in_a_row = 0
                return self._skip(step, "its loss or gradients are not finite")
            self._in_a_row = 0
            self.optimizer.step()
            return True
        finally:
            self._count += 1

    # what the actions ask ----------------------------------------------------------------
    def rollback(self, step: int, before: int | None, lr_factor: float = 1.0, why: str = "") -> bool:
        """Restore the newest kept state taken at or before `before` (None: the newest), and
        multiply the learning rate by `lr_factor`. False when no state was kept yet."""
        if not self._snapshots:
            log.warning("mldbg: Guard cannot roll back at step %d (%s): no state kept yet", step, why)
            return False
        fit = [s for s in self._snapshots if before is None or s.step <= before]
        if not fit:
            log.warning(
                "mldbg: Guard: no state kept before step %s; rolling back to the oldest, step %d "
                "(keep more copies, or keep them more often: Guard(keep=..., every=...))",
                before, self._snapshots[0].step,
            )  # fmt: skip
        snap = fit[-1] if fit else self._snapshots[0]
        self.model.load_state_dict(snap.model)
        self.optimizer.load_state_dict(_copy(snap.optimizer, None))
        self._snapshots = [s for s in self._snapshots if s.step <= snap.step]  # newer ones may be bad
        self.lr_scale *= lr_factor
        for group in self.optimizer.param_groups:
            group["lr"] *= self.lr_scale / snap.lr_scale  # the factors since the snapshot
        self.rollbacks.append((step, snap.step, why))
        log.warning(
            "mldbg: Guard rolled back at step %d to the state before step %d (%s); lr x%g",
            step, snap.step, why, self.lr_scale,
        )  # fmt: skip
        return True

    # internals -------------------------------------------------------------------------
    def _step(self) -> int:
        recorder = getattr(self.hook, "recorder", None)
        return int(recorder.step) if recorder is not None else self._count

    def _keep(self, step: int) -> None:
        model, optimizer = self.model.state_dict(), self.optimizer.state_dict()
        snap = Snapshot(step, _copy(model, self.device), _copy(optimizer, self.device), self.lr_scale)
        self._snapshots = [*self._snapshots, snap][-self.keep :]

    def _skip(self, step: int, why: str = "") -> bool:
        """No update: the gradients are dropped; `optimizer.step()` still runs over no
        gradient, so the hook's step ends as usual."""
        self.optimizer.zero_grad(set_to_none=True)
        self.optimizer.step()
        self.skipped.append(step)
        if why:
            log.info("mldbg: Guard skipped the update of step %d: %s", step, why)
        return False

    def _finite(self, loss: torch.Tensor | float | None) -> bool:
        value = loss.detach() if isinstance(loss, torch.Tensor) else loss
        if value is not None and not math.isfinite(float(value)):
            return False
        grads = [
            p.grad for group in self.optimizer.param_groups for p in group["params"] if p.grad is not None
        ]
        if not grads:
            return True
        norms = torch._foreach_norm(grads)  # one fused pass; NaN or inf shows in the norms
        return bool(torch.isfinite(torch.stack(norms)).all())

    def _request(self) -> RecoveryRequest | None:
        if self.store is None:
            return None
        now = time.monotonic()
        if now - self._polled < self._poll_seconds:
            return None
        self._polled = now
        try:
            if not self.store.exists(layout.RECOVERY_REQUEST):
                return None
        except Exception:  # an unreachable store must not stop the training
            return None
        request = read_request(self.store)
        if request is None or request.requested <= self._handled:
            return None
        self._handled = request.requested
        return request

    def _handle(self, request: RecoveryRequest, step: int) -> bool:
        """Act on a request; True when the current update must be dropped (the weights were
        just restored, the gradients belong to the old ones)."""
        flagged = request.step if request.step is not None else step
        done = self.rollbacks[-1][0] if self.rollbacks else -1
        if flagged < done:
            return False  # flagged before the last rollback: that state is gone already
        why = f"{request.kind} asked: {request.reason}"
        if request.kind == "skip" and flagged >= step:
            if flagged == step:
                return True
            self._skip_steps.add(flagged)
            return False
        factor = request.lr_factor if request.kind == "rollback" else 1.0
        return self.rollback(step, flagged, factor, why)

    def states(self) -> Iterable[int]:
        """The steps whose state is kept (the state before that step's update)."""
        return [s.step for s in self._snapshots]
