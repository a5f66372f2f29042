"""sigmoid_saturation: sigmoid layers stuck at 0 or 1."""

from __future__ import annotations

from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.saturation import SUGGESTION, SaturationTracker, check_saturation, unit_outside
from mldbg.rules.view import TrialView
from mldbg.store.statistics import SIGMOID_BOUNDS


@register
class SigmoidSaturation(Rule):
    """More than `threshold_layer` % of a sigmoid layer's units are saturated: their input lies
    below `threshold_sigmoid_min` or above `threshold_sigmoid_max` in all but
    `threshold_inactivity` % of the samples, over the last `patience` saved steps.

    There the sigmoid is flat (0 or 1 in float32): no gradient passes and the units stop
    learning. Huge weights or unnormalized inputs cause it. Default `threshold_inactivity` is
    50, not SageMaker's 1, for the reason given in `tanh_saturation`.
    """

    needs = ("sigmoid_activations",)
    reads = {"sigmoid_activations": (unit_outside(SIGMOID_BOUNDS), "count")}
    threshold_sigmoid_min: float = -23.0
    threshold_sigmoid_max: float = 16.99999
    threshold_inactivity: float = 50.0
    threshold_layer: float = 50.0
    patience: int = 3
    suggestion = SUGGESTION

    def reset(self) -> None:
        super().reset()
        self._tracker = SaturationTracker(
            "sigmoid", self.threshold_sigmoid_min, self.threshold_sigmoid_max, self.patience
        )

    def check(self, trial: TrialView, step: int) -> Finding | None:
        return check_saturation(self, trial, step, self._tracker)

    def needed_statistics(self) -> dict[str, tuple[str, ...]]:
        return {
            "sigmoid_activations": (
                unit_outside((self.threshold_sigmoid_min, self.threshold_sigmoid_max)),
                "count",
            )
        }

    def undecided(self) -> str | None:
        return self._tracker.short()
