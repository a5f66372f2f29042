"""tensor_variance: tensors whose variance is out of range."""

from __future__ import annotations

import math

import numpy as np

from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.builtin.vanishing_gradient import loss_scale
from mldbg.rules.columns import Over, quiet_prefix, selected_all
from mldbg.rules.select import gradient_names, needed, selected, short_list
from mldbg.rules.view import TrialView

_DEFAULT = ("weights", "biases", "gradients")


@register
class TensorVariance(Rule):
    """A tensor's variance is above `max_threshold` or below `min_threshold`.

    SageMaker had no defaults (both thresholds had to be given). mldbg defaults to
    `max_threshold=1e6` over weights, biases and gradients: no healthy network has weights or
    gradients with a variance near a million, and a training that diverges crosses it steps
    before the values overflow to inf/NaN, so it warns earlier than `exploding_tensor`.
    `min_threshold` is off by default: small variances are normal for gradients and for
    biases (zero variance is `all_zero`'s or `poor_weight_initialization`'s business).
    Reads the `variance` statistic (saved, or from the raw tensor; a saved std does too).

    A gradient's variance is judged in the run's own unit, the square of its first training
    loss (`vanishing_gradient.loss_scale`): a loss multiplied by 1e4 multiplies every gradient
    by 1e4 and its variance by 1e8, and Adam trains exactly as before.

    Only parameters the optimizer trains are judged among the weights and biases (unless
    `tensor_regex` names tensors): where the run records gradients, a weight without one is
    a layer's state, not a parameter (a Keras `Normalization` layer's `mean`, `variance` and
    `count`, adapted to raw features in the thousands; BatchNorm's moving statistics; a
    counter), or one frozen on purpose: neither is moved by training, so neither can
    diverge.
    """

    needs = _DEFAULT
    reads = {c: ("variance",) for c in _DEFAULT}
    needs_any = True
    collection_names: list[str] | None = None
    tensor_regex: list[str] | None = None
    max_threshold: float | None = 1e6
    min_threshold: float | None = None

    def reset(self) -> None:
        super().reset()
        self._scale: float | None = None  # `loss_scale`, once read
        self._states: tuple[tuple[int, int], set[str]] = ((-1, -1), set())  # `_state`, by name counts

    def needed_collections(self) -> tuple[str, ...]:
        return needed(self.collection_names, self.tensor_regex, _DEFAULT)

    def _state(self, trial: TrialView) -> set[str]:
        """The weights and biases not judged: those without a gradient, where the run
        records gradients (a layer's state, or a frozen parameter); none with `tensor_regex`."""
        if self.tensor_regex or not trial.has_collection("gradients"):
            return set()
        params = trial.names(["weights", "biases"])
        key = (len(params), len(trial.names("gradients")))
        if self._states[0] != key:
            trained = gradient_names(trial)
            self._states = (key, {n for n in params if n not in trained})
        return self._states[1]

    def _unit(self, trial: TrialView, name: str) -> float:
        """The variance unit of a tensor: the first loss squared for a gradient, else 1."""
        if name not in trial.names("gradients"):
            return 1.0
        if self._scale is None:
            self._scale = loss_scale(trial)
        return (self._scale or 1.0) ** 2

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading `steps` where every inspected tensor's saved variance is in range (a
        raw tensor without a saved variance ends them: `check` computes it)."""
        if self.max_threshold is None and self.min_threshold is None:
            return len(steps)
        interesting = np.zeros(len(steps), dtype=bool)
        state = self._state(trial)
        for name in selected_all(trial, self.collection_names, self.tensor_regex, _DEFAULT):
            if name in state:
                continue
            over = Over(trial, name, steps)
            v = over.stat("variance") / self._unit(trial, name)
            hit = over.raw & np.isnan(v)
            if self.max_threshold is not None and (name, "high") not in self._fired:
                hit |= v > self.max_threshold
            if self.min_threshold is not None and (name, "low") not in self._fired:
                hit |= v < self.min_threshold
            interesting |= over.present & hit
        return quiet_prefix(interesting)

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if self.max_threshold is None and self.min_threshold is None:
            return None
        names = selected(trial, step, self.collection_names, self.tensor_regex, _DEFAULT)
        state = self._state(trial) if names else set()
        names = [n for n in names if n not in state]
        high, low = [], []
        for name in names:
            v = self._variance(trial, name, step)
            if v is None or math.isnan(v):
                continue
            v /= self._unit(trial, name)
            if self.max_threshold is not None and v > self.max_threshold and self.first((name, "high")):
                high.append((name, v))
            elif self.min_threshold is not None and v < self.min_threshold and self.first((name, "low")):
                low.append((name, v))
        if not high and not low:
            return None
        parts, tips = [], []
        if high:
            parts.append(
                f"variance above {self.max_threshold:g} in {short_list([n for n, _ in high])} "
                f"(up to {max(v for _, v in high):.3g}; a gradient's in units of the first loss squared)"
            )
            tips.append("lower the learning rate, clip gradients, normalize the inputs")
        if low:
            parts.append(
                f"variance below {self.min_threshold:g} in {short_list([n for n, _ in low])} "
                f"(down to {min(v for _, v in low):.3g})"
            )
            tips.append("check the init (not constant) and that the tensor receives a signal")
        return self.finding(
            trial, step,
            "; ".join(parts) + f" at step {step}",
            tensors=[n for n, _ in high + low],
            suggestion="; ".join(tips).capitalize() + ".",
        )  # fmt: skip

    def _variance(self, trial: TrialView, name: str, step: int) -> float | None:
        raw = trial.raw(name, step)
        if raw is not None and (raw.size == 0 or raw.dtype.kind not in "fc"):
            return None
        v = trial.statistic(name, step, "variance")
        return v if isinstance(v, float) else None
