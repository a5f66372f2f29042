"""loss_spike: the loss jumps far above its recent level."""

from __future__ import annotations

import math

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import NEVER, give_back, loss_prefix
from mldbg.rules.losses import LossTracker
from mldbg.rules.stats import median, robust_z, trailing_median, trailing_nonfinite
from mldbg.rules.view import TrialView

_TOL = 1e-9  # relative: the screening of the fast path errs towards asking check()
_HORIZON = 512  # steps one call of the fast path looks at


@register
class LossSpike(Rule):
    """A loss value lies far above its recent robust level: more than `threshold` robust
    standard deviations of the step-to-step noise (1.4826 x the median absolute difference of
    consecutive values over the last `window` saved values, / sqrt 2) above the recent level
    (the median of the last 5), and more than `min_increase_percent` % above it.

    One bad batch (corrupted samples, wrong labels, extreme inputs), a learning rate too
    high for the current curvature, or the first step of a divergence: a spike is where a
    silent problem first shows. Each series is judged on its own, per mode (TRAIN per saved
    step, EVAL per evaluation pass), after `warmup` saved values (the first steps move
    fast). So that noise on a loss near 0 is not a spike, the jump must also exceed 10% of
    the series' initial level (the median of its first `warmup` values). A healthy run's
    own unstable steps reach z ~ 17 (a CNN without BatchNorm at SGD lr 0.1: 0.55 -> 1.44 and
    back), hence the default of 20; a corrupted batch reaches 23-45. NaN and inf are
    `exploding_tensor`'s. The finding names the step (and the mode's step) whose batch to
    replay.
    """

    needs = ("losses", "scalars")
    needs_any = True
    window: int = 20
    threshold: float = 20.0
    min_increase_percent: float = 50.0
    warmup: int = 10
    mode: str | None = None
    use_losses_collection: bool = True
    tensor_regex: list[str] | None = None
    suggestion = (
        "Replay the batch of that step (look for corrupted or extreme samples and wrong labels), "
        "lower the learning rate or add a warmup, clip gradients (torch.nn.utils.clip_grad_norm_), "
        "and watch whether the loss recovers or diverges from there."
    )

    def reset(self) -> None:
        super().reset()
        self._tracker = LossTracker(self.use_losses_collection, self.tensor_regex)
        self._evals: dict[str, list[tuple[int, float]]] = {}  # EVAL series: (last step, pass mean)

    def unchecked(self) -> str | None:
        if not self._tracker.seen_any:
            return "no loss values found (losses collection, or scalars named like 'loss')"
        return None

    def check(self, trial: TrialView, step: int) -> list[Finding]:
        mode, names, closed = self._tracker.update(trial, step)
        wanted = Mode.parse(self.mode) if self.mode else None
        out: list[Finding] = []
        if mode == Mode.TRAIN and wanted in (None, Mode.TRAIN):
            for name in names:
                s = self._tracker.train.get(name)
                if s is not None and s.steps and s.steps[-1] == step:
                    out += self._judge(trial, name, "TRAIN", s.steps, s.values)
        if wanted in (None, Mode.EVAL):
            for name, ev in closed:
                series = self._evals.setdefault(name, [])
                series.append((ev.last_step, ev.value))
                out += self._judge(trial, name, "EVAL", [s for s, _ in series], [v for _, v in series])
        return out

    def _spike(self, values: list[float], n: int) -> tuple[float, float, float, float, int] | None:
        """(value, level, z, jump, window length) when the `n`-th value of `values` is a spike
        after the ones before it; else None."""
        value = values[n - 1]
        if n <= max(1, self.warmup) or not math.isfinite(value):
            return None
        recent = values[max(0, n - 1 - self.window) : n - 1]
        z, level, _ = robust_z(value, recent, floor=0.01 * abs(median(recent)))
        start = median(values[: max(1, self.warmup)])
        jump = value - level
        if not (
            math.isfinite(level)
            and z > self.threshold
            and jump > self.min_increase_percent / 100 * abs(level)
            and jump > 0.1 * abs(start)
        ):
            return None
        return value, level, z, jump, len(recent)

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): the leading training steps whose losses are
        no spike, appended to the tracker's series (`loss_prefix`). A loss can spike only where
        it lies `min_increase_percent` % above the median of its last 5 values (screened over
        all steps at once, then judged as `check` judges); those steps, windows holding a
        non-finite loss, and everything `loss_prefix` leaves to `check` (evaluation steps, a
        per-sample loss) end the prefix."""
        if min(self.window, self.warmup) < 5:  # windows shorter than the level's: check() only
            return 0
        steps = steps[:_HORIZON]  # evaluations end the prefix every few steps: look no further
        tracker = self._tracker
        before = {name: len(s.values) for name, s in tracker.train.items()}
        seen = tracker.seen_any
        k = loss_prefix(trial, tracker, steps, 1, NEVER)  # appends every training loss of steps[:k]
        if not k or (self.mode and Mode.parse(self.mode) != Mode.TRAIN):
            return k
        cut = k
        for name, s in tracker.train.items():
            start = before.get(name, 0)
            if len(s.values) > start and (name, "TRAIN") not in self._fired:
                at = self._first_spike(s.values, start)
                if at is not None:
                    cut = min(cut, int(np.searchsorted(steps, s.steps[at])))
        if cut < k:  # give back the values from the spike on: check() appends and judges them
            give_back(tracker, steps, cut, before, seen)
        return cut

    def _first_spike(self, values: list[float], start: int) -> int | None:
        """The index of the first of `values[start:]` that `_spike` finds a spike, or None."""
        x = np.asarray(values, dtype=np.float64)
        new = x[start:]
        n = np.arange(start, len(x)) + 1  # values up to and including each
        recent = np.minimum(n - 1, self.window)
        level = trailing_median(x, 5)[start:]
        first = median(values[: max(1, self.warmup)]) if len(values) >= self.warmup else math.nan
        bad = trailing_nonfinite(x, self.window)[start:] > 0
        with np.errstate(invalid="ignore"):
            jump = new - level
            slack = _TOL * (np.abs(new) + np.abs(level) + abs(first))
            high = (jump >= self.min_increase_percent / 100 * np.abs(level) - slack) & (
                jump >= 0.1 * abs(first) - slack
            )
        maybe = (n > max(1, self.warmup)) & np.isfinite(new) & (recent >= 5) & (bad | np.isnan(level) | high)
        for i in np.flatnonzero(maybe).tolist():
            if self._spike(values, start + i + 1) is not None:
                return start + i
        return None

    def _judge(
        self, trial: TrialView, name: str, mode: str, steps: list[int], values: list[float]
    ) -> list[Finding]:
        found = self._spike(values, len(values))
        if found is None or not self.first((name, mode)):
            return []
        value, level, z, jump, recent = found
        step = steps[-1]
        where = f"step {step} (mode step {trial.mode_step(step)})"
        return [
            self.finding(
                trial, step,
                f"{name} ({mode}) jumped to {value:.4g} at {where}, {100 * jump / max(abs(level), 1e-12):.0f}% above "
                f"its recent level {level:.4g} (robust z = {z:.1f} over the last {recent} saved values, "
                f"more than {self.threshold:g}): replay that batch",
                tensors=[name],
                samples=trial.batch_fingerprints(step) if mode == Mode.TRAIN.name else (),
            )
        ]  # fmt: skip
