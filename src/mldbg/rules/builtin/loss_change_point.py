"""loss_change_point: the training loss shifts upward and stays up, before it diverges."""

from __future__ import annotations

import itertools
import math

import numpy as np

from mldbg.rules.base import Finding, register
from mldbg.rules.loss_rule import LossSeriesRule
from mldbg.rules.stats import MAD_SCALE, median, trailing_median, trailing_nonfinite
from mldbg.rules.view import TrialView

_TOL = 1e-9  # relative: the screening of the fast path errs towards the exact update


@register
class LossChangePoint(LossSeriesRule):
    """The training loss moved up to a new level and stays there: a one-sided robust CUSUM
    (Page's test) of the loss against its reference level crosses `threshold`, and the median
    of the last 5 values is more than `min_increase_percent` % above that level.

    The reference is the `window` saved values before the current excursion began (the median
    and the robust noise of its step-to-step differences, 1.4826 x median |diff| / sqrt 2);
    each new value adds its excess over the reference in noise units, less the allowance
    `drift`, capped at `cap` (one bad batch is loss_spike's, not a change of level), and the
    sum resets to 0 when the loss comes back. A loss creeping upward at the edge of stability
    (a learning rate slightly too high) crosses it several steps before the loss doubles
    (docs/rules.md, "Early warning": 6 steps before the divergence of a tiny GPT, where
    loss_spike fires one step after it). A falling or noisy healthy loss gives negative or
    scattered excesses that the allowance absorbs. TRAIN losses only, each series on its own,
    after `warmup` saved values. A reference level at or below 0 is not judged: such a series
    is a signed surrogate objective (a policy gradient's -log pi x normalized return, which
    rises toward 0 as the policy becomes sure), not a loss that diverges upward.
    """

    window: int = 50
    drift: float = 1.0
    cap: float = 4.0
    threshold: float = 6.0
    min_increase_percent: float = 5.0
    warmup: int = 30
    suggestion = (
        "The loss is drifting away from where it was: lower the learning rate (or lengthen the "
        "warmup), clip gradients (torch.nn.utils.clip_grad_norm_), and keep a checkpoint from "
        "before the shift to roll back to (mldbg.torch.Guard) if it goes on rising."
    )

    def reset(self) -> None:
        super().reset()
        self._sum: dict[str, float] = {}  # name -> the CUSUM
        self._start: dict[str, int] = {}  # name -> index where the current excursion began
        self._pending: dict[str, list[tuple[int, float, int]]] = {}  # the fast path's updates, to keep

    def _screens(self) -> bool:
        return self.window >= 4 and self.threshold >= 0  # no screening for these: check() only

    def _may_fire(self, name: str, values: list[float], lengths: np.ndarray) -> np.ndarray:
        """The fast path's screen: the CUSUM over the new values, from the rule's state. While
        the sum is 0 a value leaves it at 0 when it lies at most `drift` noise units above the
        median of the `window` values before it: screened over all the new values at once
        (rolling medians), the others (a sum above 0, a non-finite value in the window, the
        first values) updated as `check` updates them. The updates wait in `_pending` for
        `_kept`; True at the first value that fires."""
        out = np.zeros(len(lengths), dtype=bool)
        if not len(lengths):
            return out
        self._pending[name], at = self._run(name, values, int(lengths[0]) - 1)
        if at is not None:
            out[lengths == at + 1] = True
        return out

    def _kept(self) -> None:
        """The CUSUM updates of the values the fast path took."""
        for name, done in self._pending.items():
            s = self._tracker.train.get(name)
            taken = len(s.values) if s is not None else 0
            for i, total, start in done:
                if i >= taken:
                    break
                self._sum[name], self._start[name] = total, start
        self._pending = {}

    def _run(
        self, name: str, values: list[float], first: int
    ) -> tuple[list[tuple[int, float, int]], int | None]:
        """The CUSUM over `values[first:]` from the rule's state: the (index, sum, start) of
        each update, and the index of the first value that fires (None when none does)."""
        w = self.window
        base = max(0, first - w)  # the windows of values[first:] lie in values[base:]
        x = np.asarray(values[base:], dtype=np.float64)
        level = trailing_median(x, w)
        diffs = np.abs(np.diff(x))
        noise = np.full(len(x), np.nan)
        noise[1:] = trailing_median(diffs, w - 1)  # the diffs within x[i-w:i]
        bad = trailing_nonfinite(x, w) > 0
        with np.errstate(invalid="ignore"):
            scale = np.maximum(np.maximum(MAD_SCALE * noise / math.sqrt(2), 0.01 * np.abs(level)), 1e-12)
            slack = _TOL * (np.abs(x) + np.abs(level) + scale)
            flat = ~bad & np.isfinite(level) & np.isfinite(x) & (x - level <= self.drift * scale - slack)
        n = np.arange(base, len(values)) + 1  # values up to and including each
        flat &= n > max(2, self.warmup)
        total = self._sum.get(name, 0.0)
        start = self._start.get(name, first)
        done: list[tuple[int, float, int]] = []
        fired = name in self._fired
        cache: dict[int, tuple[float, float] | tuple[()]] = {}  # the values before `first` do not change
        for i in range(first, len(values)):
            if flat[i - base] and not total > 0:
                total, start = 0.0, i
                done.append((i, total, start))
                continue
            found = self._advance(values, i + 1, total, start, cache)
            if found is None:
                continue
            total, start, level_i, recent = found
            if not fired and self._fires(total, level_i, recent):
                return done, i
            done.append((i, total, start))
        return done, None

    def _reference(self, values: list[float], start: int) -> tuple[float, float] | tuple[()]:
        """(level, noise scale) of the `window` values before index `start`; () when fewer
        than 3 of them are finite."""
        ref = [v for v in values[max(0, start - self.window) : start] if math.isfinite(v)]
        if len(ref) < 3:
            return ()
        level = median(ref)
        noise = MAD_SCALE * median([abs(b - a) for a, b in itertools.pairwise(ref)]) / math.sqrt(2)
        return level, max(noise, 0.01 * abs(level), 1e-12)

    def _advance(
        self,
        values: list[float],
        n: int,
        total: float,
        start: int,
        cache: dict[int, tuple[float, float] | tuple[()]] | None = None,
    ) -> tuple[float, int, float, float] | None:
        """The CUSUM after the `n`-th value of `values` (those after it are ignored), from the
        sum `total` and the excursion's `start` before it: (sum, start, reference level,
        median of the last 5); None when that value leaves the state as it is (warmup, not
        finite, too short a reference). `cache`: start -> its reference, over one pass."""
        value = values[n - 1]
        if n <= max(2, self.warmup) or not math.isfinite(value):
            return None
        if not total > 0:
            start = n - 1
        reference = None if cache is None else cache.get(start)
        if reference is None:
            reference = self._reference(values, start)
            if cache is not None:
                cache[start] = reference
        if not reference:
            return None
        level, scale = reference
        total = max(0.0, total + min((value - level) / scale, self.cap) - self.drift)
        recent = median([v for v in values[max(0, n - 5) : n] if math.isfinite(v)] or [value])
        return total, start, level, recent

    def _fires(self, total: float, level: float, recent: float) -> bool:
        # a level at or below 0 is a signed surrogate (REINFORCE's -log pi x advantage rises to 0
        # from below as the policy grows sure), not a loss whose rise is a divergence
        return (
            level > 0
            and total > self.threshold
            and recent - level > self.min_increase_percent / 100 * abs(level)
        )

    def _judge(self, trial: TrialView, name: str, steps: list[int], values: list[float]) -> list[Finding]:
        n = len(values)
        total = self._sum.get(name, 0.0)
        found = self._advance(values, n, total, self._start.get(name, n - 1))
        if found is None:
            return []
        total, start, level, recent = found
        self._sum[name] = total
        self._start[name] = start
        rise = recent - level
        if not self._fires(total, level, recent):
            return []
        if not self.first(name):
            return []
        since = steps[start]
        return [
            self.finding(
                trial, steps[-1],
                f"{name} (TRAIN) shifted up since step {since}: median {recent:.4g} over the last 5 saved "
                f"values, {100 * rise / max(abs(level), 1e-12):.0f}% above its level {level:.4g} before "
                f"(CUSUM {total:.1f} noise units, more than {self.threshold:g}): the loss is drifting away, "
                "a divergence often follows",
                tensors=[name],
            )
        ]  # fmt: skip
