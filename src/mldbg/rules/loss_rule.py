"""`LossSeriesRule`: the frame of a rule that judges each training-loss series on its own.

`loss_spike`, `loss_change_point` and `loss_divergence` read the losses through a
`LossTracker` (the `losses` collection and scalars named like "loss", or `tensor_regex`),
judge the series of each TRAIN loss tensor at each new value, and skip the quiet values in
their fast path with `loss_prefix` (`mldbg.rules.columns`). The frame is here; a rule keeps
only its judgement: `_judge` (the per-step path, at the series' newest value) and
`_may_fire` (the fast path's screen: every series length at which `_judge` may report).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule
from mldbg.rules.columns import loss_prefix
from mldbg.rules.losses import Evaluation, LossTracker, SharedColumn, opposed
from mldbg.rules.view import TrialView

_HORIZON = 512  # steps one call of the fast path looks at, at least


class LossSeriesRule(Rule):
    """Base of a rule judging each training-loss series at each of its new values.

    A subclass defines `_judge(trial, name, steps, values)` (the findings when the newest of
    `values` fires) and `_may_fire(name, values, lengths)` (a bool per length: True wherever
    `_judge` over `values[:length]` may report, from the rule's state as it stands; a rule
    with state to carry through the quiet values keeps it in `_kept`). Evaluation passes
    go to `_closed` as they close (none judged unless a rule says so, and then `_quiet_close`
    says when closing one is quiet, for the fast path)."""

    needs = ("losses", "scalars")
    needs_any = True
    use_losses_collection: bool = True
    tensor_regex: list[str] | None = None

    def reset(self) -> None:
        super().reset()
        self._tracker = LossTracker(self.use_losses_collection, self.tensor_regex)

    def unchecked(self) -> str | None:
        if not self._tracker.seen_any:
            return "no loss values found (losses collection, or scalars named like 'loss')"
        return None

    def check(self, trial: TrialView, step: int) -> list[Finding]:
        mode, names, closed = self._tracker.update(trial, step)
        out: list[Finding] = []
        if mode == Mode.TRAIN and self._judges(Mode.TRAIN):
            for name in names:
                s = self._tracker.train.get(name)
                if s is not None and s.steps and s.steps[-1] == step:
                    out += self._judge(trial, name, s.steps, s.values)
        return out + self._closed(trial, closed)

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): the leading steps at which no series may
        fire (`_may_fire`, over all new values at once) and no evaluation pass closes that a
        rule judges (`_quiet_close`), their losses appended to the tracker (`loss_prefix`)."""
        if not self._screens():
            return 0
        # a call reads the whole series (`_may_fire`): look at more steps the longer it is,
        # so that a run of 10^6 steps is a few dozen calls, not one per `_HORIZON`
        longest = max((len(s.values) for s in self._tracker.train.values()), default=0)
        horizon = max(_HORIZON, longest // 2)
        k = loss_prefix(
            trial, self._tracker, steps[:horizon], 1, 1, screen=self._screen, quiet_close=self._quiet_close
        )
        self._kept()
        return k

    def _screen(self, name: str, values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        if not self._judges(Mode.TRAIN):
            return np.zeros(len(lengths), dtype=bool)
        # read as `check` reads a series (`SharedColumn`: an index a Python float, a slice a
        # typed array, `np.asarray` no copy), not as a list of 10^6 floats made per call
        return self._may_fire(name, SharedColumn.over(values), lengths)

    def _game(self, name: str) -> bool:
        """Whether the training loss `name` moves against another training loss of the run
        (`mldbg.rules.losses.opposed`): a GAN's player, whose loss is not meant to fall."""
        s = self._tracker.train.get(name)
        return s is not None and any(
            other != name and opposed(s.values, o.values) for other, o in self._tracker.train.items()
        )

    # what a rule defines ----------------------------------------------------------------
    def _judge(
        self, trial: TrialView, name: str, steps: Sequence[int], values: Sequence[float]
    ) -> list[Finding]:
        raise NotImplementedError

    def _may_fire(self, name: str, values: Sequence[float], lengths: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _judges(self, mode: Mode) -> bool:
        """Whether the rule judges the losses of `mode` (TRAIN only, by default)."""
        return mode == Mode.TRAIN

    def _screens(self) -> bool:
        """Whether the fast path's screen holds for these parameters (else: `check` only)."""
        return True

    def _closed(self, trial: TrialView, closed: list[tuple[str, Evaluation]]) -> list[Finding]:
        """The findings on the evaluation passes `check`'s step closed (none by default)."""
        return []

    def _quiet_close(self, name: str, has_train: bool) -> bool:
        """Whether closing `name`'s open evaluation pass reports nothing (the fast path)."""
        return True

    def _kept(self) -> None:
        """After the fast path took its values: bring the rule's own state up to date."""


__all__ = ["LossSeriesRule"]
