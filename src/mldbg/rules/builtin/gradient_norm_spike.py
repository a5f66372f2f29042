"""gradient_norm_spike: the global or a layer's gradient norm jumps far above its recent level."""

from __future__ import annotations

import math

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.select import short_list
from mldbg.rules.stats import robust_z
from mldbg.rules.view import TrialView

GLOBAL = "global gradient norm"


@register
class GradientNormSpike(Rule):
    """The global gradient norm (over every gradient saved at the step) or a weight's gradient
    norm lies far above its recent level: more than `threshold` robust standard deviations
    of its step-to-step noise over the last `window` saved training steps above the recent
    level (the median of the last 5), more than `min_ratio` times that level, and more than
    `min_jump` times the previous saved value: under the two-line hook's sparse cadence the
    last 5 saved steps may span a hundred steps, and a norm that rises steadily (a layer's
    gradient grows 7x over 80 steps of healthy sigmoid training) is not a spike, and a healthy
    CNN without BatchNorm has transients of 8.5x its level (a 3-step ramp, seen at once).

    A gradient spike is what a loss spike does to the weights: one bad batch, a learning
    rate too high for the curvature, an attention or output logit that blew up. The step
    after it carries an update `min_ratio` times too large, which may throw the model off
    for good. Reads the `l2` statistic of the gradients (saved by the two-line hook, or from
    raw gradients); a series is judged after `warmup` saved steps (a layer's gradient
    norm swings 3-4x in the first steps of healthy training).
    """

    needs = ("gradients",)
    reads = {"gradients": ("l2",)}
    window: int = 20
    threshold: float = 10.0
    min_ratio: float = 10.0
    min_jump: float = 2.0
    warmup: int = 10
    tensor_regex: list[str] | None = None
    suggestion = (
        "Replay the batch of that step (corrupted or extreme samples, wrong labels), clip gradients "
        "(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)), lower the learning rate or "
        "add a warmup, and look for logit_growth or loss_spike findings around it."
    )

    def reset(self) -> None:
        super().reset()
        self._series: dict[str, list[float]] = {}

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        names = trial.names("gradients", regex=self.tensor_regex, step=step)
        norms = {n: v for n in names if isinstance(v := trial.statistic(n, step, "l2"), float)}
        if not norms:
            return None
        values = dict(norms)
        if all(math.isfinite(v) for v in norms.values()):
            values[GLOBAL] = math.sqrt(sum(v * v for v in norms.values()))
        spiked: list[tuple[str, float, float, float]] = []
        for name, value in values.items():
            series = self._series.setdefault(name, [])
            judge = len(series) >= max(1, self.warmup) and math.isfinite(value)
            if judge and (name == GLOBAL or "bias" not in name.lower()):
                z, level, _ = robust_z(value, series[-self.window :], floor=0.01 * abs(series[-1]))
                jumped = value > self.min_ratio * level and value > self.min_jump * abs(series[-1])
                if z > self.threshold and jumped and level > 0:
                    spiked.append((name, value, level, z))
            series.append(value)
            del series[: -self.window - 1]
        spiked = [s for s in spiked if self.first((s[0], step))]
        if not spiked:
            return None
        spiked.sort(key=lambda s: (s[0] != GLOBAL, -s[1] / s[2]))
        name, value, level, z = spiked[0]
        where = f"step {step} (mode step {trial.mode_step(step)})"
        layers = [s[0] for s in spiked if s[0] != GLOBAL]
        return self.finding(
            trial, step,
            f"{name} jumped to {value:.4g} at {where}, {value / level:.1f}x its recent level {level:.4g} "
            f"(robust z = {z:.1f}, more than {self.threshold:g}; more than {self.min_ratio:g}x)"
            + (f"; {len(layers)} layer(s) spiked: {short_list(layers)}" if layers else "")
            + ": replay that batch",
            tensors=layers or list(norms),
            samples=trial.batch_fingerprints(step),
        )  # fmt: skip
