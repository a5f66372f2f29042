"""underfitting: the loss stays high and flat."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import loss_prefix
from mldbg.rules.losses import LossTracker
from mldbg.rules.select import adversarial
from mldbg.rules.stats import median, trend_z
from mldbg.rules.view import TrialView

_Z = -2.0  # a Mann-Kendall z below this is a real downward trend


def _quiet(name: str, has_train: bool) -> bool:
    """Closing an evaluation pass judges nothing here (`check` reads the closed passes when a
    training window closes)."""
    return True


@register
class Underfitting(Rule):
    """The model does not fit even the training data: after `patience` windows of `window`
    training losses, the loss is still above `threshold_percent` % of where it started (the
    median of the first window), it shows no downward trend over the last `patience`
    windows (Mann-Kendall), and the validation loss, when there is one, has not improved by
    more than 100 - `threshold_percent` % either.

    This is whole-run: a loss that fell a lot and then levelled off has learned, and a slow
    but steady fall is learning too. Too small a model, a learning rate far too low,
    over-regularization, or labels unrelated to the inputs cause it. A loss that rose
    (its last window above its first, or a clear upward trend, z > 2) is diverging: the
    finding says so and suggests lowering the learning rate, never raising it. A GAN on one
    hook (two models trained, a loss whose every batch of targets is one class: "real" for the
    generator's pass) plays a game whose loss is not meant to fall: it is not judged.
    """

    needs = ("losses", "scalars")
    needs_any = True
    window: int = 10
    patience: int = 5
    threshold_percent: float = 90.0
    use_losses_collection: bool = True
    tensor_regex: list[str] | None = None
    diverging_suggestion: ClassVar[str] = (
        "The loss is rising, not stalled: lower the learning rate (10x), clip gradients "
        "(torch.nn.utils.clip_grad_norm_), add a warmup, and check for bad batches and for "
        "gradients that accumulate (a missing optimizer.zero_grad())."
    )
    suggestion = (
        "Train longer or raise the learning rate, use a bigger model (more units or layers), remove "
        "excess regularization (weight decay, dropout), and check the data pipeline: do the labels "
        "belong to the inputs?"
    )

    def reset(self) -> None:
        super().reset()
        self._tracker = LossTracker(self.use_losses_collection, self.tensor_regex)

    def undecided(self) -> str | None:
        why = self._tracker.shortfall(self.patience * max(2, self.window))
        return None if why is None else f"{why}: patience={self.patience} windows of window={self.window}"

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading training `steps` at which no loss window closes: their losses join the
        series from the columns; `check` judges the steps that close one."""
        w = max(2, self.window)
        return loss_prefix(
            trial, self._tracker, steps, w, self.patience * w, screen=self._may_report, quiet_close=_quiet
        )

    def _may_report(self, name: str, values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The fast path's screen (`loss_prefix`): for each series length of `lengths` (a
        window of `values` closes there), False only where `check` surely finds nothing: the
        windows it reads finite, and the last window's median at most `threshold_percent` % of
        the first's, or a Mann-Kendall z (taken without the tie correction, which only moves
        it further from 0) below -2. Margins make it err towards asking `check`."""
        if name in self._fired:
            return np.zeros(len(lengths), dtype=bool)
        w, m = max(2, self.window), self.patience * max(2, self.window)
        start = float(np.median(values[:w]))
        ends = lengths.astype(np.int64)
        last = values[ends[:, None] - w + np.arange(w)[None, :]]
        now = np.median(last, axis=1)
        ok = bool(np.isfinite(values[:w]).all()) & np.isfinite(last).all(axis=1) & (start != 0)
        level = 100.0 * now / (start if start else 1.0)
        quiet = ok & (level < self.threshold_percent - 1e-9 * (1 + abs(self.threshold_percent)))
        rest = np.flatnonzero(ok & ~quiet)
        if len(rest) and m >= 4:
            trend = values[ends[rest, None] - m + np.arange(m)[None, :]]
            fine = np.isfinite(trend).all(axis=1)
            s = np.triu(np.sign(trend[:, None, :] - trend[:, :, None]), 1).sum(axis=(1, 2))
            z = (s + 1) / math.sqrt(m * (m - 1) * (2 * m + 5) / 18)
            quiet[rest] = fine & (s < 0) & (z < _Z - 1e-9)
        return ~quiet

    def check(self, trial: TrialView, step: int) -> Finding | None:
        mode, names, _ = self._tracker.update(trial, step)
        if mode != Mode.TRAIN:
            return None
        found = []
        for name in names:
            s = self._tracker.train.get(name)
            if s is None or not s.steps or s.steps[-1] != step:
                continue
            w, n = max(2, self.window), len(s.values)
            if n % w or n < self.patience * w:
                continue
            start, now = median(s.values[:w]), median(s.values[-w:])
            if not (math.isfinite(start) and math.isfinite(now)):
                continue
            level = 100.0 * now / start if start else 100.0
            z = trend_z(s.values[-self.patience * w :])
            if level <= self.threshold_percent or z < _Z:
                continue
            evals = [e.value for e in self._tracker.closed_evals(name) if math.isfinite(e.value)]
            if len(evals) >= 2 and 100.0 * min(evals[1:]) / evals[0] <= self.threshold_percent:
                continue
            if adversarial(trial, s.steps[-self.patience * w :]):
                continue  # an adversarial game (a GAN): its loss is not meant to fall
            if self.first(name):
                found.append((name, start, now, level, z, n, evals))
        if not found:
            return None
        name, start, now, level, z, n, evals = found[0]
        val = f"; validation loss {evals[0]:.4g} -> {evals[-1]:.4g}" if len(evals) >= 2 else ""
        rising = level > 110.0 or z > -_Z  # above its start, or a clear upward trend
        what = (
            "it is rising: the training diverges" if rising else "the model is not fitting the training data"
        )
        return self.finding(
            trial, step,
            f"{name}: after {n} saved training steps the loss is still {level:.0f}% of where it started "
            f"({start:.4g} -> {now:.4g}, more than {self.threshold_percent:g}%) with no downward trend over the "
            f"last {self.patience * max(2, self.window)} (Mann-Kendall z = {z:.1f}){val}: {what}",
            tensors=[f[0] for f in found],
            suggestion=self.diverging_suggestion if rising else self.suggestion,
        )  # fmt: skip
