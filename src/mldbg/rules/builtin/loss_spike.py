"""loss_spike: the loss jumps far above its recent level."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.rules import detect
from mldbg.rules.base import Finding, register
from mldbg.rules.loss_rule import LossSeriesRule
from mldbg.rules.losses import Evaluation, restarted_between
from mldbg.rules.stats import MAD_SCALE, median, robust_z, sliding_median, trailing_median, trailing_nonfinite
from mldbg.rules.view import TrialView

_TOL = 1e-9  # relative: the screening of the fast path errs towards asking check()
_BLOCK = 50  # the run's noise model is estimated again every this many values
_HISTORY = 1000  # ... from at most this many values before
# the Student-t degrees of freedom the window's own excursions are weighed against, lightest first
_TAILS = (math.inf, 30.0, 10.0, 6.0, 4.0, 3.0, 2.0, 1.5, 1.0)
_MIN_TAIL = 20  # values from which the run's tail is estimated (with a margin that grows as they get fewer)
_RARE = 0.05  # a window's largest excursion beyond the max of its size at this chance: tails heavier


def window_nu(excursions: Sequence[float]) -> float:
    """The lightest Student-t tail (degrees of freedom) under which the largest of the window's
    own excursions (each value's jump over the median of the 5 before it, in robust sigmas)
    is not a rare maximum for as many draws (beyond it with chance `_RARE`): normal noise when
    they are all modest, heavier as they grow (20 draws, largest 7.2: 2)."""
    m = len(excursions)
    top = max(excursions, default=0.0)
    if m < 1 or top <= 0:
        return math.inf
    for nu in _TAILS:
        if detect.quantile(_RARE / m, nu) >= top:
            return nu
    return _TAILS[-1]


class _From(Sequence[float]):
    """`values` from index `start` on, read in place (a long series is not copied)."""

    def __init__(self, values: Sequence[float], start: int) -> None:
        self._values, self._start = values, start

    def __len__(self) -> int:
        return len(self._values) - self._start

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            lo, hi, step = i.indices(len(self))
            return self._values[self._start + lo : self._start + hi : step]
        return self._values[self._start + (i + len(self) if i < 0 else i)]


@register
class LossSpike(LossSeriesRule):
    """A loss value lies far above its recent robust level: more than `min_increase_percent` %
    above the recent level (the median of the last 5), and more robust standard deviations
    above it than a false-alarm budget of 1e-3 per run of up to 10^6 steps allows, and never
    fewer than `threshold`.

    The noise is the larger of the step-to-step noise of the last `window` saved values
    (1.4826 x the median absolute difference of consecutive values, / sqrt 2) and the run's
    own (`mldbg.rules.detect.noise` over up to 1,000 values, re-estimated every 50: correlated
    noise wanders further than its differences say). The bar is the quantile of the run's
    noise at the n-th value's share of the budget (`detect.spend`: 1e-3 / (n (ln 10^6 + 1))),
    under the tails the run shows (Student-t, `detect.quantile`): about 6 for normal noise,
    so `threshold` (20) decides there, and hundreds for Student-t batch noise with 3 degrees
    of freedom, where jumps of 20 robust deviations are a healthy run's everyday noise. The
    run's tail is the heavier of its bulk's (from 20 values on, with a margin that grows as
    the values get fewer: fewer values never mean a lighter tail) and the one its own
    largest excursion so far shows (rare outliers, which the bulk does not show: `_far`).

    Before 50 values (and beside the run's tail after) the window's own values say how heavy
    the tails are:
    each earlier value of the window is the same statistic (its jump over the median of the 5
    before it, in the same robust sigmas), so the largest of them is the largest of m draws
    of the noise. The tail is taken as the lightest Student-t (normal, 30, 10, ... 1 degrees
    of freedom) under which that largest one is not beyond the maximum of m draws at 5%
    (`window_nu`). A series whose window holds only modest excursions (a corrupted batch in
    a smooth loss: the largest earlier one 1.4 sigmas) keeps normal tails and the bar of 20;
    CutMix/MixUp or hard-example batches, whose losses against one of the mixed labels jump
    6-7 sigmas and back within the window, have tails of ~2 degrees of freedom, and their
    next 22-sigma batch is noise, not a spike (the bar at step 37: ~390).

    One bad batch (corrupted samples, wrong labels, extreme inputs), a learning rate too
    high for the current curvature, or the first step of a divergence: a spike is where a
    silent problem first shows. Each series is judged on its own, per mode (TRAIN per saved
    step, EVAL per evaluation pass), after `warmup` saved values (the first steps move
    fast). So that noise on a loss near 0 is not a spike, the jump must also exceed 10% of
    the series' initial level (the median of its first `warmup` values). A healthy run's
    own unstable steps reach z ~ 17 (a CNN without BatchNorm at SGD lr 0.1: 0.55 -> 1.44 and
    back), hence the default of 20; a corrupted batch reaches 23-45. NaN and inf are
    `exploding_tensor`'s. The finding names the step (and the mode's step) whose batch to
    replay. A series that opens at exactly 0 (a penalty weighted 0 until it is switched on,
    a KL to a reference that is the policy itself) has no level or noise to jump from there:
    it is judged as if it began at its first value above 0 (its warm-up, window and noise
    from there on), where the term is switched on. A training value whose window straddles
    a new schedule of the recorded learning rate (`mldbg.rules.losses.schedule_restarts`:
    the next stage of a pipeline, a warm restart) is a new phase's start, not a spike.
    """

    window: int = 20
    threshold: float = 20.0
    min_increase_percent: float = 50.0
    warmup: int = 10
    mode: str | None = None
    suggestion = (
        "Replay the batch of that step (look for corrupted or extreme samples and wrong labels), "
        "lower the learning rate or add a warmup, clip gradients (torch.nn.utils.clip_grad_norm_), "
        "and watch whether the loss recovers or diverges from there."
    )

    def reset(self) -> None:
        super().reset()
        # (name, mode), j -> the noise model of the values before index j and the tail their
        # largest excursions show (they do not change)
        self._models: dict[tuple[tuple[str, str], int], tuple[detect.Noise, float] | None] = {}
        self._heads: dict[tuple[str, str], tuple[int, bool]] = {}  # `_zero_head`: (count, ended)

    def _judges(self, mode: Mode) -> bool:
        return self.mode is None or Mode.parse(self.mode) == mode

    def _closed(self, trial: TrialView, closed: list[tuple[str, Evaluation]]) -> list[Finding]:
        """Each closed evaluation pass judged against the passes before it (its mean)."""
        if not self._judges(Mode.EVAL):
            return []
        out: list[Finding] = []
        for name, _ in closed:
            passes = self._tracker.closed_evals(name)
            out += self._judge_mode(
                trial, name, "EVAL", [e.last_step for e in passes], [e.value for e in passes]
            )
        return out

    def _quiet_close(self, name: str, has_train: bool) -> bool:
        """Closing the open pass of `name` is quiet when its mean is no spike (or reported)."""
        if not self._judges(Mode.EVAL) or (name, "EVAL") in self._fired:
            return True
        passes = self._tracker.evals.get(name, [])
        return self._spike((name, "EVAL"), [e.value for e in passes], len(passes)) is None

    def _spike(
        self, key: tuple[str, str], values: Sequence[float], n: int
    ) -> tuple[float, float, float, float, int, float] | None:
        """The decision: (value, level, z, jump, values the noise came from, the bar z passed)
        when the `n`-th value of the series `key` (name, mode) is a spike after the ones
        before it; else None."""
        head = self._zero_head(key, values, n)
        if head:  # the series began at its first value above 0: judged from there
            if head >= n - 1:
                return None
            values, n = _From(values, head), n - head
        value = values[n - 1]
        if n <= max(1, self.warmup) or not math.isfinite(value):
            return None
        recent = values[max(0, n - 1 - self.window) : n - 1]
        _, level, near = robust_z(value, recent, floor=0.01 * abs(median(recent)))
        start = median(values[: max(1, self.warmup)])
        jump = value - level
        if not (
            math.isfinite(level)
            and jump > self.min_increase_percent / 100 * abs(level)
            and jump > 0.1 * abs(start)
        ):
            return None
        # the window's own excursions, the same statistic as this value's: with few values no
        # tail can be estimated, and normal tails are not assumed where they already show
        # otherwise (CutMix's mixed-label batches: excursions of 6-7 sigmas among 20 values)
        lo = max(5, n - 1 - self.window)
        excursions = [
            (values[i] - median(values[i - 5 : i])) / near
            for i in range(lo, n - 1)
            if math.isfinite(values[i])
        ]
        scale, nu, count = near, window_nu(excursions), len(recent)
        j = (n - 1) // _BLOCK * _BLOCK
        if j >= _BLOCK:
            if (key, j) not in self._models:
                self._models[(key, j)] = self._far(values, j)
            far = self._models[(key, j)]
            if far is not None:  # the run's noise: its tails, and how far correlated noise wanders
                model, seen = far
                scale, nu, count = max(near, model.sigma), min(nu, model.nu, seen), model.n
        z = jump / scale
        bar = max(self.threshold, detect.quantile(detect.spend(n), nu))
        if not z > bar:
            return None
        return value, level, z, jump, count, bar

    def _zero_head(self, key: tuple[str, str], values: Sequence[float], n: int) -> int:
        """How many of the first `n` values of the series `key` open it at exactly 0, before
        its first value that is not (all `n` while none is). Scanned once: the count is kept
        (and where it ends, once a value above 0 came)."""
        count, done = self._heads.get(key, (0, False))
        if done or count >= n:
            return count
        while count < n and values[count] == 0:
            count += 1
        self._heads[key] = (count, count < n)
        return count

    def _far(self, values: Sequence[float], j: int) -> tuple[detect.Noise, float] | None:
        """The run's noise before index `j` (`detect.noise` over up to `_HISTORY` values), and
        the tail its own largest excursions show (`window_nu` over every value of that stretch
        after `warmup`: each one's jump over the median of the 5 before it, in the model's
        sigmas). The model's tail comes from the bulk (a ratio of quantiles of 90% and 50%),
        which rare outliers do not move (hard batches at 0.2-1% of the steps, an LM's outlier
        batches at 0.01%), and from fewer than 100 values it is taken as normal; the largest
        excursion of the stretch is what the run has shown it does: its next jump as large is
        not rarer than that. From 20 values on the bulk's tail is estimated too, with its
        margin (x sqrt(1000 / n): fewer values, a heavier tail taken), so that 50-99 values are
        not taken as lighter-tailed than 100 (`detect.MIN_TAIL`, where the model alone would
        start to estimate it: Student-t noise with 3 degrees of freedom has normal-looking
        stretches of 100 values, and then a 23-sigma batch)."""
        x = np.asarray(values[max(0, j - _HISTORY) : j], dtype=np.float64)
        model = detect.noise(x, min_tail=_MIN_TAIL)
        if model is None:
            return None
        lo = max(5, max(1, self.warmup) - max(0, j - _HISTORY))
        if len(x) <= lo:
            return model, math.inf
        level = trailing_median(x, 5)[lo:]
        jumps = (x[lo:] - level) / model.sigma
        jumps = jumps[np.isfinite(jumps)]
        return model, window_nu(jumps.tolist())

    def _screens(self) -> bool:
        return min(self.window, self.warmup) >= 5  # windows shorter than the level's: check() only

    def _may_fire(self, name: str, values: Sequence[float], lengths: np.ndarray) -> np.ndarray:
        """The fast path's screen: a loss can spike only where it lies `min_increase_percent`
        % above the median of its last 5 values (screened over all lengths at once, then
        judged as `check` judges); a window holding a non-finite loss is judged too."""
        out = np.zeros(len(lengths), dtype=bool)
        if not len(lengths) or (name, "TRAIN") in self._fired:
            return out
        at = self._first_spike(name, values, int(lengths[0]) - 1)
        if at is not None:
            out[lengths == at + 1] = True
        return out

    def _first_spike(self, name: str, values: Sequence[float], start: int) -> int | None:
        """The index of the first of `values[start:]` that `_spike` finds a spike, or None."""
        x = np.asarray(values, dtype=np.float64)
        new = x[start:]
        n = np.arange(start, len(x)) + 1  # values up to and including each
        recent = np.minimum(n - 1, self.window)
        # over the new values only (and those their windows reach back to): the same numbers
        # as over the whole series, which a fast call of a long run recomputed each time
        lo5, low = max(0, start - 5), max(0, start - self.window) if self.window >= 0 else 0
        level = trailing_median(x[lo5:], 5)[start - lo5 :]
        head, w = self._zero_head((name, "TRAIN"), values, len(x)), max(1, self.warmup)  # as `_spike`
        first = median(values[head : head + w]) if len(x) - head >= w else math.nan
        bad = trailing_nonfinite(x[low:], self.window)[start - low :] > 0
        with np.errstate(invalid="ignore"):
            jump = new - level
            slack = _TOL * (np.abs(new) + np.abs(level) + abs(first))
            high = (jump >= self.min_increase_percent / 100 * np.abs(level) - slack) & (
                jump >= 0.1 * abs(first) - slack
            )
        maybe = (n > head + w) & np.isfinite(new) & (recent >= 5) & (bad | np.isnan(level) | high)
        maybe &= bad | ~self._within_noise(x, start, jump, head)
        for i in np.flatnonzero(maybe).tolist():
            if self._spike((name, "TRAIN"), values, start + i + 1) is not None:
                return start + i
        return None

    def _within_noise(self, x: np.ndarray, start: int, jump: np.ndarray, head: int) -> np.ndarray:
        """For each value of `x[start:]` whose full `window` of finite values before it lies
        past the zero head: whether its `jump` is at most `threshold` x the window's own
        step-to-step noise (`robust_z`'s, which the scale `_spike` divides by is at least, as
        its bar is at least `threshold`): no spike, without judging it. A noisy loss whose
        level is near 0 passes the screen's share of its level at most steps."""
        w = self.window
        out = np.zeros(len(x) - start, dtype=bool)
        lo = max(0, start - w)
        seg = x[lo:]
        if w < 3 or len(seg) <= w:
            return out
        sm = sliding_median(np.abs(np.diff(seg)), w - 1)  # sm[k - w]: the window before seg[k]
        k = np.arange(start - lo, len(seg))
        ok = (k >= w) & (k + lo >= head + w)
        noise = np.full(len(k), np.nan)
        noise[ok] = MAD_SCALE * sm[k[ok] - w] / math.sqrt(2)
        with np.errstate(invalid="ignore"):
            out[ok] = jump[ok] <= self.threshold * noise[ok] * (1 - _TOL)
        return out

    def _judge(
        self, trial: TrialView, name: str, steps: Sequence[int], values: Sequence[float]
    ) -> list[Finding]:
        return self._judge_mode(trial, name, "TRAIN", steps, values)

    def _judge_mode(
        self, trial: TrialView, name: str, mode: str, steps: Sequence[int], values: Sequence[float]
    ) -> list[Finding]:
        found = self._spike((name, mode), values, len(values))
        if found is None:
            return []
        n = len(values)
        if mode == Mode.TRAIN.name and restarted_between(
            trial, steps[max(0, n - 2 - self.window)], steps[-1]
        ):
            return []  # a schedule begun anew within the window: a new phase's first values
        if not self.first((name, mode)):
            return []
        value, level, z, jump, recent, bar = found
        step = steps[-1]
        where = f"step {step} (mode step {trial.mode_step(step)})"
        return [
            self.finding(
                trial, step,
                f"{name} ({mode}) jumped to {value:.4g} at {where}, {100 * jump / max(abs(level), 1e-12):.0f}% above "
                f"its recent level {level:.4g} (robust z = {z:.1f} against the noise of {recent} saved values, "
                f"more than {bar:.3g}: at most 1 false alarm in 1,000 healthy runs of 10^6 steps): replay that batch",
                tensors=[name],
                samples=trial.batch_fingerprints(step) if mode == Mode.TRAIN.name else (),
            )
        ]  # fmt: skip
