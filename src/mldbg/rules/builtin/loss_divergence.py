"""loss_divergence: the training loss leaves its starting level at once and stays far above it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from mldbg.rules import detect
from mldbg.rules.base import Finding, register
from mldbg.rules.loss_rule import LossSeriesRule
from mldbg.rules.losses import floor_of
from mldbg.rules.params import Range
from mldbg.rules.stats import binomial_tail, median, sliding_median
from mldbg.rules.view import TrialView

_HALF = 10  # a value's local level: the median of the 2 x 10 + 1 values centred on it
_RECENT = 50  # the values whose share beyond `factor` x their local level is tested
_HISTORY = 1000  # ... against the run's own rate of such values over as many before them
_ABOVE = 0.99  # a swing grows: its far values' median lies above this quantile of those values before


def far_flags(x: np.ndarray, factor: float = 10.0, floor: float = 0.0) -> np.ndarray:
    """For each value of `x` with `_HALF` values on either side, whether it lies beyond
    `factor` x its local level, the median of the 21 values centred on it (a level at or
    below 0: no); the first and last `_HALF` values are False. A spike that shifts the loss
    for a while moves the centred median with it; an oscillation of a period up to ~10 values
    does not: its median stays at the level its swings go both ways from. A value at or
    below `floor` (`floor_of`) is not far, whatever its ratio."""
    out = np.zeros(len(x), dtype=bool)
    w = 2 * _HALF + 1
    if len(x) < w:
        return out
    level = sliding_median(x, w)
    mid = x[_HALF : len(x) - _HALF]
    with np.errstate(invalid="ignore"):
        out[_HALF : len(x) - _HALF] = np.isfinite(mid) & (level > 0) & (mid > factor * level) & (mid > floor)
    return out


def swings(
    values: Sequence[float] | np.ndarray, n: int, flags: np.ndarray | None = None, factor: float = 10.0
) -> tuple[int, int, float, float] | None:
    """The decision of a divergence that swings: (values beyond 10x their local level among the
    last `_RECENT` judged, of how many, the run's own rate of them, the chance) when, at the
    series length `n`, the newly judged value (index n - 1 - `_HALF`) is one (`far_flags`) and
    that many among the last `_RECENT` are improbable under the run's own rate of them over
    the `_HISTORY` values before (Laplace: (k + 1) / (m + 2)): the binomial upper tail below
    the n-th value's share of a 1e-3-per-run budget (`detect.spend`); else None. A loss that
    oscillates with a growing swing (the edge of stability crossed) keeps its median while
    half its values leave for 10^2-10^4 x it; a run's rare outlier batches (a few in 10^4) are
    its own rate, and a spike or a schedule's rise moves the local level with it. The far
    values must come in two excursions or more (values between them back near the level): a
    swing goes up and down, while a loss thrown far up once and falling back over a few steps
    (Bayes by Backprop's graded KL weight, 2^(M - i) / (2^M - 1) for the i-th of an epoch's M
    batches, puts half the KL on each epoch's first batch) is one burst. And the swing must
    grow: the far values' median lies above the 99th percentile of the `_HISTORY` values
    before them, in the loss's own units. Losses of several tasks logged in turn under one
    name (XLM's denoising steps, weighted by a lambda falling to 0, between its
    back-translation steps) put half the values 10x below the others as the weight falls:
    far from a centred median of the mixture, at a rising rate, yet the high values are the
    back-translation losses, falling as before, not a swing that reaches higher."""
    i = n - 1 - _HALF
    lo = i + 1 - _RECENT
    if lo - _HISTORY // 10 < 0:  # too few values before to know the run's own rate
        return None
    if flags is None:
        start = max(0, lo - _HISTORY - _HALF)
        seg = np.asarray(values[start:n], dtype=np.float64)
        got = far_flags(seg, factor, floor_of(values[:n]))
        flags = np.zeros(n, dtype=bool)
        flags[start:n] = got
    if not flags[i]:
        return None
    recent = flags[lo : i + 1]
    if int(recent[0]) + int(np.count_nonzero(recent[1:] & ~recent[:-1])) < 2:
        return None  # one burst, no swing: a loss thrown up once that falls back (a graded KL's epoch start)
    before = flags[max(0, lo - _HISTORY) : lo]
    rate = (float(before.sum()) + 1) / (len(before) + 2)
    k = int(recent.sum())
    chance = binomial_tail(k, _RECENT, rate, upper=True)
    if chance >= detect.spend(n):
        return None
    high = np.asarray(values[lo : i + 1], dtype=np.float64)[recent]
    past = np.asarray(values[max(0, lo - _HISTORY) : lo], dtype=np.float64)
    past = past[np.isfinite(past)]
    if past.size and float(np.median(high)) <= float(np.quantile(past, _ABOVE)):
        return None  # the low values fell away from the high ones, which rise no higher than before
    return k, _RECENT, rate, chance


_SWING_ADVICE = (
    "The loss oscillates with a growing swing: the learning rate is past the edge of stability "
    "for the current curvature. Lower it (or decay it sooner), clip gradients "
    "(torch.nn.utils.clip_grad_norm_), and roll back to a checkpoint from before the swings grew."
)


@register
class LossDivergence(LossSeriesRule):
    """Two tests. *Swings*, at any length: the values beyond `factor` x their local level
    (`far_flags`) among the last 50 are too many for the run's own rate of them (`swings`: a
    binomial test at the n-th value's share of a 1e-3-per-run budget): a loss oscillating
    with a growing swing around an unchanged median, past the edge of stability. A swing must
    also reach 0.2 of the loss's starting level (`floor_of`): a divergence undoes the
    training; a converged loss that flickers far below where it began has lost nothing. A
    series that took a negative value is a signed objective (PPO's clipped surrogate,
    hovering around 0): its swings are not judged, as *at once* does not judge it.

    *At once*: a young training loss jumps to more than `factor` x its first value within its first
    `onset` saved values after it, and stays far above it: the last `persist` saved values all
    lie above `hold_factor` x the first; or it falls back from the jump but never gets back to
    where it started (`_unrecovered`): none of the `recover` or more values after the jump
    reaches it again, and their median lies above every value before the jump (the first,
    the untrained model's loss, where the jump is the second value). Adam at 100x its rate on
    a weight-normed TCN: 1.15, 2,041, then 0.88 rising to 2.5 over 20 steps (its ReLUs dead, the head's bias relearned) and 0.9 for good, where its
    twin reaches 0.14. Judged while the series holds at most `horizon` values.

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
    recover: int = 10
    bounds: ClassVar[dict[str, Range]] = {
        "factor": Range(1, None),
        "hold_factor": Range(1, None),
        "onset": Range(1, None),
        "persist": Range(1, None),
        "horizon": Range(2, None),
        "recover": Range(1, None),
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
        if all(math.isfinite(v) and v > hold for v in last):
            return above
        return above if self._unrecovered(head, above) else None

    def _unrecovered(self, values: Sequence[float], above: int) -> bool:
        """After the jump at index `above`, the loss never got back to where it started:
        the median of the (at least `recover`) values after it lies above every value before
        the jump (the first, the untrained model's loss, where the jump is the second value; a
        noisy batch loss starts anywhere in its spread, and a model thrown off stays above all
        of it: a first value that happened to be low, then a rare batch, is the series' own
        spread), and none of them reaches the jump again (it was a throw, not the series' own
        noise: a per-sample loss whose first value happened to be low has later values as high
        as its "jump"). A jump that threw the model off and left it worse than untrained over as
        many values (its units dead, a constant output
        relearned) is the damage done, even once the loss has fallen back from its peak."""
        after = list(values[above + 1 :])
        if len(after) < max(1, self.recover) or not all(math.isfinite(v) for v in after):
            return False
        return max(after) < values[above] and median(after) > max(values[:above])

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
        if name not in self._fired:
            for i, n in enumerate(lengths.tolist()):
                if n > self.horizon:
                    break
                out[i] = self._diverged(values, n) is not None
        if (
            (name, "swings") not in self._fired
            and len(lengths)
            and not self._signed(name, values, int(lengths.min()))
        ):
            x = np.asarray(values, dtype=np.float64)
            top = int(lengths.max())
            start = max(0, int(lengths.min()) - 1 - _HALF - _RECENT - _HISTORY - _HALF)
            flags = np.zeros(top, dtype=bool)
            flags[start:top] = far_flags(x[start:top], self.factor, floor_of(x))
            at = np.asarray(lengths, dtype=np.int64) - 1 - _HALF
            cand = np.flatnonzero((at >= 0) & flags[np.clip(at, 0, top - 1)])
            for k in cand.tolist():  # only where a newly judged value swings far: `swings`
                if swings(x, int(lengths[k]), flags, self.factor) is not None:
                    out[k] = True
                    break
        return out

    def _judge(
        self, trial: TrialView, name: str, steps: Sequence[int], values: Sequence[float]
    ) -> list[Finding]:
        return self._at_once(trial, name, steps, values) + self._swinging(trial, name, steps, values)

    def reset(self) -> None:
        super().reset()
        self._negative: dict[str, tuple[int, bool]] = {}  # `_signed`: (values read, one negative)

    def _signed(self, name: str, values: Sequence[float], n: int) -> bool:
        """Whether the series took a negative value among its first `n`: a signed objective
        (PPO's clipped surrogate, a policy gradient's term), as `_at_once` reads one, whose
        swings around a level near 0 are no divergence (read incrementally)."""
        seen, negative = self._negative.get(name, (0, False))
        if not negative and n > seen:
            negative = bool((np.asarray(values[seen:n], dtype=np.float64) < 0).any())
            self._negative[name] = (n, negative)
        return negative

    def _swinging(
        self, trial: TrialView, name: str, steps: Sequence[int], values: Sequence[float]
    ) -> list[Finding]:
        n = len(values)
        if (name, "swings") in self._fired or n <= 2 * _HALF or self._signed(name, values, n):
            return []
        i = n - 1 - _HALF
        mid = values[i]
        level = median(values[i - _HALF : n])
        if not (math.isfinite(mid) and level > 0 and mid > max(self.factor * level, floor_of(values))):
            return []  # the newly judged value is no swing: nothing to test (as `swings`)
        found = swings(values, n, factor=self.factor)
        if found is None or not self.first((name, "swings")):
            return []
        k, m, rate, chance = found
        return [
            self.finding(
                trial, steps[-1],
                f"{name} (TRAIN) swings far above its level: {k} of its last {m} values to step {steps[i]} "
                f"lie beyond {self.factor:g}x the median of the {2 * _HALF + 1} values around each (up to "
                f"{max(values[i + 1 - m : i + 1]):.4g}, the level {level:.4g}), where this run had such "
                f"values at a rate of {rate:.2g} (chance {chance:.2g}, below the bar of 1e-3 false alarms "
                "per run): an oscillation that grows, the first sign of a divergence (the edge of stability)",
                tensors=[name],
                suggestion=_SWING_ADVICE,
            )
        ]  # fmt: skip

    def _at_once(
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
        held = all(math.isfinite(v) and v > self.hold_factor * scale for v in values[n - self.persist : n])
        if held:
            after = (
                f"it stays above {self.hold_factor:g}x {of} (median {recent:.4g} over the last "
                f"{min(n, self.persist)} saved values, to step {steps[-1]})"
            )
        else:
            after = (
                f"it never got back below its start: the median of the {n - above - 1} saved values "
                f"since, to step {steps[-1]}, is {median(values[above + 1 : n]):.4g}, above the untrained "
                "model's loss"
            )
        return [
            self.finding(
                trial, steps[-1],
                f"{name} (TRAIN) diverged at once: {start:.4g} at step {steps[0]}, {jump:.4g} at step "
                f"{steps[above]} ({jump / start:.3g}x), and {after}: "
                "the first updates threw the model far from where it started",
                tensors=[name],
            )
        ]  # fmt: skip
