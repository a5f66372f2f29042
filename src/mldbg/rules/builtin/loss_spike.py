"""loss_spike: the loss jumps far above its recent level."""

from __future__ import annotations

import math

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, register
from mldbg.rules.loss_rule import LossSeriesRule
from mldbg.rules.losses import Evaluation
from mldbg.rules.stats import median, robust_z, trailing_median, trailing_nonfinite
from mldbg.rules.view import TrialView

_TOL = 1e-9  # relative: the screening of the fast path errs towards asking check()


@register
class LossSpike(LossSeriesRule):
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
        return self._spike([e.value for e in passes], len(passes)) is None

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

    def _screens(self) -> bool:
        return min(self.window, self.warmup) >= 5  # windows shorter than the level's: check() only

    def _may_fire(self, name: str, values: list[float], lengths: np.ndarray) -> np.ndarray:
        """The fast path's screen: a loss can spike only where it lies `min_increase_percent`
        % above the median of its last 5 values (screened over all lengths at once, then
        judged as `check` judges); a window holding a non-finite loss is judged too."""
        out = np.zeros(len(lengths), dtype=bool)
        if not len(lengths) or (name, "TRAIN") in self._fired:
            return out
        at = self._first_spike(values, int(lengths[0]) - 1)
        if at is not None:
            out[lengths == at + 1] = True
        return out

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

    def _judge(self, trial: TrialView, name: str, steps: list[int], values: list[float]) -> list[Finding]:
        return self._judge_mode(trial, name, "TRAIN", steps, values)

    def _judge_mode(
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
