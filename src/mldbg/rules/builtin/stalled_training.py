"""stalled_training: no new step for a long time."""

from __future__ import annotations

import time

from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.view import TrialView


@register
class StalledTraining(Rule):
    """No new step was written for `threshold` seconds while the run has not ended.

    A job that hangs (a deadlock in the data loader, a stuck collective, a full disk) burns
    its budget doing nothing. It needs a live run (`mldbg watch`): a finished run is never
    stalled, so it is not in the default set of `mldbg check`.
    """

    default = False
    threshold: float = 1800.0
    suggestion = (
        "Look at the training process: a data loader worker deadlock (try num_workers=0), a hung "
        "distributed collective (one rank died), a full disk, or a stuck remote read."
    )

    def reset(self) -> None:
        super().reset()
        self._last_seen: float | None = None  # when a new step was last seen (None: not yet)
        self._last_step = -1

    def check(self, trial: TrialView, step: int) -> None:
        self._last_seen = time.time()
        self._last_step = step
        return None

    def poll(self, trial: TrialView, now: float) -> Finding | None:
        if self._last_seen is None:
            self._last_seen = now
        last = self._last_seen
        if now - last < self.threshold:
            return None
        if trial.loaded_all_steps:
            return None
        self._last_seen = now  # report each stall once per threshold
        step = self._last_step
        return self.finding(
            trial if step >= 0 else None, max(step, 0),
            f"no new step for {now - last:.0f} s (more than {self.threshold:g} s) after step {step}",
        )  # fmt: skip
