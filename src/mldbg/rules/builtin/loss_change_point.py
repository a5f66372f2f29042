"""loss_change_point: the training loss shifts upward and stays up, before it diverges."""

from __future__ import annotations

import itertools
import math

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.losses import LossTracker
from mldbg.rules.stats import MAD_SCALE, median
from mldbg.rules.view import TrialView


@register
class LossChangePoint(Rule):
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
    after `warmup` saved values.
    """

    needs = ("losses", "scalars")
    needs_any = True
    window: int = 50
    drift: float = 1.0
    cap: float = 4.0
    threshold: float = 6.0
    min_increase_percent: float = 5.0
    warmup: int = 30
    use_losses_collection: bool = True
    tensor_regex: list[str] | None = None
    suggestion = (
        "The loss is drifting away from where it was: lower the learning rate (or lengthen the "
        "warmup), clip gradients (torch.nn.utils.clip_grad_norm_), and keep a checkpoint from "
        "before the shift to roll back to (mldbg.torch.Guard) if it goes on rising."
    )

    def reset(self) -> None:
        super().reset()
        self._tracker = LossTracker(self.use_losses_collection, self.tensor_regex)
        self._sum: dict[str, float] = {}  # name -> the CUSUM
        self._start: dict[str, int] = {}  # name -> index where the current excursion began

    def unchecked(self) -> str | None:
        if not self._tracker.seen_any:
            return "no loss values found (losses collection, or scalars named like 'loss')"
        return None

    def check(self, trial: TrialView, step: int) -> list[Finding]:
        mode, names, _ = self._tracker.update(trial, step)
        if mode != Mode.TRAIN:
            return []
        out: list[Finding] = []
        for name in names:
            s = self._tracker.train.get(name)
            if s is not None and s.steps and s.steps[-1] == step:
                out += self._judge(trial, name, s.steps, s.values)
        return out

    def _judge(self, trial: TrialView, name: str, steps: list[int], values: list[float]) -> list[Finding]:
        n = len(values)
        value = values[-1]
        if n <= max(2, self.warmup) or not math.isfinite(value):
            return []
        total = self._sum.get(name, 0.0)
        start = self._start.get(name, n - 1) if total > 0 else n - 1
        ref = [v for v in values[max(0, start - self.window) : start] if math.isfinite(v)]
        if len(ref) < 3:
            return []
        level = median(ref)
        noise = MAD_SCALE * median([abs(b - a) for a, b in itertools.pairwise(ref)]) / math.sqrt(2)
        scale = max(noise, 0.01 * abs(level), 1e-12)
        total = max(0.0, total + min((value - level) / scale, self.cap) - self.drift)
        self._sum[name] = total
        self._start[name] = start
        recent = median([v for v in values[-5:] if math.isfinite(v)] or [value])
        rise = recent - level
        if not (total > self.threshold and rise > self.min_increase_percent / 100 * abs(level)):
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
