"""logit_growth: output or attention logits grow without bound."""

from __future__ import annotations

import math

from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.stats import median, trend_z
from mldbg.rules.view import TrialView

_Z = 2.5  # Mann-Kendall z of the last window: still clearly rising


@register
class LogitGrowth(Rule):
    """Logits grow without bound: the scale of a logit tensor (its max |x| when the tensor
    is saved raw or that statistic was saved, else its standard deviation from the saved
    `variance`) is more than `factor` times its early level (the median of its first
    `window` saved values), above `min_value` (where a softmax saturates), and still
    clearly rising over the last `window` saved values (Mann-Kendall z > 2.5).

    Logits that keep growing saturate the softmax: gradients vanish for the examples it is
    sure of and explode for the others, and a loss spike or NaN follows. Attention logits
    grow the same way in a transformer trained with too high a learning rate (no QK-norm, a
    missing 1/sqrt(d) scale), output logits under a learned temperature without a clamp, a
    loss maximized by mistake, or no weight decay on a separable task. Read: the model's
    outputs (`outputs`) and the classification loss's `predictions` when the labels are
    class ids (a regression output may grow to its targets' scale), and any tensor matching
    `tensor_regex` (attention logits you save, e.g. `attn_scores`). Per mode.
    """

    needs = ("outputs", "predictions")
    needs_any = True
    reads = {"outputs": ("variance",), "predictions": ("variance",)}
    window: int = 10
    factor: float = 100.0
    min_value: float = 10.0
    tensor_regex: list[str] | None = None
    suggestion = (
        "Lower the learning rate, clamp a learned temperature or logit scale (CLIP clamps it at 100), "
        "add weight decay or a z-loss on the logits, normalize queries and keys (QK-norm) or check "
        "the 1/sqrt(d) scale of attention, and check that the loss is minimized (not maximize=True, "
        "not a flipped sign)."
    )

    def reset(self) -> None:
        super().reset()
        self._series: dict[tuple[str, str], list[tuple[int, float]]] = {}
        self._keys: dict[str, str] = {}  # tensor -> the statistic its scale is read from
        self._classes: bool | None = None  # are the labels class ids? (None: not known yet)

    def needed_collections(self) -> tuple[str, ...]:
        return () if self.tensor_regex else self.needs

    def _is_classification(self, trial: TrialView, step: int) -> bool:
        if self._classes is None:
            labels = trial.names("labels", step=step)
            if labels:
                preds = trial.names("predictions", step=step)
                stats = trial.class_statistics(labels[0], preds[0] if preds else None, step)
                self._classes = stats is not None
        return bool(self._classes)

    def _scale(self, trial: TrialView, name: str, step: int) -> float | None:
        key = self._keys.get(name)
        if key is None:
            if isinstance(trial.saved_statistic(name, step, "max_abs"), float):
                key = "max_abs"
            elif isinstance(trial.saved_statistic(name, step, "variance"), float):
                key = "variance"
            elif isinstance(trial.statistic(name, step, "max_abs"), float):
                key = "max_abs"
            else:
                return None
            self._keys[name] = key
        value = trial.statistic(name, step, key)
        if not isinstance(value, float) or not math.isfinite(value):
            return None
        return math.sqrt(max(value, 0.0)) if key == "variance" else value

    def check(self, trial: TrialView, step: int) -> Finding | None:
        names: list[str] = []
        if self.tensor_regex:
            names += trial.names(None, regex=self.tensor_regex, step=step)
        if self._is_classification(trial, step):
            names += trial.names(("outputs", "predictions"), step=step)
        mode = trial.mode(step).name
        grown = []
        for name in sorted(set(names)):
            value = self._scale(trial, name, step)
            if value is None:
                continue
            series = self._series.setdefault((name, mode), [])
            series.append((step, value))
            w = max(3, self.window)
            if len(series) < 2 * w:
                continue
            early = median([v for _, v in series[:w]])
            last = [v for _, v in series[-w:]]
            z = trend_z(last)
            grew = early > 0 and value > self.factor * early and value > self.min_value
            if grew and z > _Z and self.first((name, mode)):
                grown.append((name, early, value, z, series[0][0]))
        if not grown:
            return None
        name, early, value, z, since = grown[0]
        what = "max |x|" if self._keys[name] == "max_abs" else "std"
        return self.finding(
            trial, step,
            f"the logits of {name} ({mode}) grew {value / early:.3g}x: {what} {early:.3g} in its first "
            f"{max(3, self.window)} saved steps (from step {since}), {value:.3g} now (more than {self.factor:g}x "
            f"and {self.min_value:g}), still rising (Mann-Kendall z = {z:.1f} over the last {max(3, self.window)}): "
            "they grow without bound",
            tensors=[g[0] for g in grown],
        )  # fmt: skip
