"""loss_divergence: the training loss leaves its starting level at once and stays far above it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from mldbg.rules.base import Finding, register
from mldbg.rules.loss_rule import LossSeriesRule
from mldbg.rules.params import Range
from mldbg.rules.stats import median
from mldbg.rules.view import TrialView


@register
class LossDivergence(LossSeriesRule):
    """A young training loss jumps to more than `factor` x its first value within its first
    `onset` saved values after it, and stays far above it: the last `persist` saved values all
    lie above `hold_factor` x the first. Judged while the series holds at most `horizon` values.

    A learning rate far too high (a tiny GPT-2 at lr 10: 3.9 at step 0, 3,700 at step 1, then
    thousands) diverges at the first update and never comes back, yet stays finite, so
    `exploding_tensor` says nothing, and the other loss rules miss it: `loss_spike` and
    `loss_change_point` judge a value against a recent level after a warm-up of 10 and 30
    values, which the jump itself fills, and `loss_not_decreasing`'s first window already
    holds it. The first saved value is the loss of the untrained model (the same batch
    statistics a healthy run starts from); a healthy run's loss, noisy or not, rarely doubles
    it (at most 1.8x on the project's healthy pipelines, 1.25x held over 3 values; a diverged
    loss that hovers around 10x its start is held by the lower `hold_factor`), and a rise
    by design (a GAN generator's loss as its discriminator learns, an annealed KL term, a
    warmup) builds up over tens of steps, not within `onset` of them. A series whose first
    value is 0 or less, or that took a negative value, is a signed objective (a policy
    gradient's surrogate), not a loss that can diverge upward: it is not judged. NaN and inf
    are `exploding_tensor`'s; each TRAIN series is judged on its own.

    "x its first value" is scale-aware: a ratio to a value near 0 says nothing. The loss's
    own scale at a value k is its first value, or, where the series already moved by more
    than that per step before k, the median of those moves (|v_i - v_i-1|, i < k): the bars
    are `factor` and `hold_factor` x that scale. A signed objective that starts near 0 and
    drifts as the model learns (an actor's -Q in TD3/DDPG: 0.024, 0.083, 0.12, 0.18, 0.23,
    0.28, a steady 0.05 a step) is 11.8x its first value at its fifth step, and 5x its own
    scale: quiet. A divergence leaves its scale at once: 1.1 -> 125,000 (the first value is
    the untrained model's loss, no moves before it), 7.2 -> 18.9 -> 867 (46x the one move
    before it), or doubles at every step (2.3, 4.6, 9.2, 18.4, 36.8, 74: 10.7x the median
    move at the fifth).
    """

    factor: float = 10.0
    hold_factor: float = 5.0
    onset: int = 5
    persist: int = 3
    horizon: int = 20
    bounds: ClassVar[dict[str, Range]] = {
        "factor": Range(1, None),
        "hold_factor": Range(1, None),
        "onset": Range(1, None),
        "persist": Range(1, None),
        "horizon": Range(2, None),
    }
    suggestion = (
        "The training diverged at its first updates: lower the learning rate (10x or more), add a "
        "learning-rate warmup, clip gradients (torch.nn.utils.clip_grad_norm_), and check that the "
        "loss's inputs and targets are on the scale the model expects."
    )

    def _diverged(self, values: Sequence[float], n: int) -> int | None:
        """The index of the first value above `factor` x the first when the first `n` of
        `values` have diverged (judged at the `n`-th); else None."""
        persist = max(1, self.persist)
        if n > self.horizon or n < 1 + persist:
            return None
        start = values[0]
        if not (math.isfinite(start) and start > 0):
            return None
        head = values[:n]
        if any(v < 0 for v in head if math.isfinite(v)):  # a signed objective
            return None
        above = next(
            (
                i
                for i in range(1, min(n, self.onset + 1))
                if math.isfinite(head[i]) and head[i] > self.factor * self._scale(head, i)
            ),
            None,
        )
        if above is None:
            return None
        hold = self.hold_factor * self._scale(head, above)
        last = values[n - persist : n]
        return above if all(math.isfinite(v) and v > hold for v in last) else None

    @staticmethod
    def _scale(values: Sequence[float], k: int) -> float:
        """The loss's own scale before its `k`-th value: its first value, or the median of its
        moves before k where that is larger (a series that starts near 0 and moves steadily)."""
        moves = [
            abs(values[i] - values[i - 1]) for i in range(1, k) if math.isfinite(values[i] - values[i - 1])
        ]
        return max(values[0], median(moves)) if moves else values[0]

    def _may_fire(self, name: str, values: Sequence[float], lengths: np.ndarray) -> np.ndarray:
        """The fast path's screen: `_diverged` at each length (only the first `horizon`
        values of a series are judged)."""
        out = np.zeros(len(lengths), dtype=bool)
        if name in self._fired:
            return out
        for i, n in enumerate(lengths.tolist()):
            if n > self.horizon:
                break
            out[i] = self._diverged(values, n) is not None
        return out

    def _judge(
        self, trial: TrialView, name: str, steps: Sequence[int], values: Sequence[float]
    ) -> list[Finding]:
        n = len(values)
        above = self._diverged(values, n)
        if above is None or not self.first(name):
            return []
        start, jump = values[0], values[above]
        recent = median(values[max(0, n - self.persist) : n])
        scale = self._scale(values, above)
        of = (
            "its first value"
            if scale == start
            else f"its scale before the jump ({scale:.4g}, its moves per step)"
        )
        return [
            self.finding(
                trial, steps[-1],
                f"{name} (TRAIN) diverged at once: {start:.4g} at step {steps[0]}, {jump:.4g} at step "
                f"{steps[above]} ({jump / start:.3g}x), and it stays above {self.hold_factor:g}x {of} "
                f"(median {recent:.4g} over the last {min(n, self.persist)} saved values, to step {steps[-1]}): "
                "the first updates threw the model far from where it started",
                tensors=[name],
            )
        ]  # fmt: skip
