"""loss_spike: the loss jumps far above its recent level."""

from __future__ import annotations

import math

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.losses import LossTracker
from mldbg.rules.stats import median, robust_z
from mldbg.rules.view import TrialView


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

    def _judge(
        self, trial: TrialView, name: str, mode: str, steps: list[int], values: list[float]
    ) -> list[Finding]:
        n = len(values)
        value = values[-1]
        if n <= max(1, self.warmup) or not math.isfinite(value):
            return []
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
            return []
        if not self.first((name, mode)):
            return []
        step = steps[-1]
        where = f"step {step} (mode step {trial.mode_step(step)})"
        return [
            self.finding(
                trial, step,
                f"{name} ({mode}) jumped to {value:.4g} at {where}, {100 * jump / max(abs(level), 1e-12):.0f}% above "
                f"its recent level {level:.4g} (robust z = {z:.1f} over the last {len(recent)} saved values, "
                f"more than {self.threshold:g}): replay that batch",
                tensors=[name],
                samples=trial.batch_fingerprints(step) if mode == Mode.TRAIN.name else (),
            )
        ]  # fmt: skip
