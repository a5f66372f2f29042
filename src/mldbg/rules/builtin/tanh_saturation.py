"""tanh_saturation: tanh layers stuck at +-1."""

from __future__ import annotations

from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.saturation import SUGGESTION, SaturationTracker, check_saturation, unit_outside
from mldbg.rules.view import TrialView
from mldbg.store.statistics import TANH_BOUNDS


@register
class TanhSaturation(Rule):
    """More than `threshold_layer` % of a tanh layer's units are saturated: their input lies
    outside [`threshold_tanh_min`, `threshold_tanh_max`] in all but `threshold_inactivity` %
    of the samples, over the last `patience` saved steps.

    There tanh is flat (its slope at 9.5 is 2e-8): no gradient passes and the units stop
    learning. Huge weights or unnormalized inputs cause it. Default `threshold_inactivity` is
    50, not SageMaker's 1: a unit's input w.x spreads around 0 across samples, so even with
    init std 10 or inputs x100 a unit lands in the linear range for a few percent of the
    samples, and a 1% rule never fires; 50 means "saturated for most samples".
    """

    needs = ("tanh_activations",)
    reads = {"tanh_activations": (unit_outside(TANH_BOUNDS), "count")}
    threshold_tanh_min: float = -9.4999
    threshold_tanh_max: float = 9.4999
    threshold_inactivity: float = 50.0
    threshold_layer: float = 50.0
    patience: int = 3
    suggestion = SUGGESTION

    def reset(self) -> None:
        super().reset()
        self._tracker = SaturationTracker(
            "tanh", self.threshold_tanh_min, self.threshold_tanh_max, self.patience
        )

    def check(self, trial: TrialView, step: int) -> Finding | None:
        return check_saturation(self, trial, step, self._tracker)

    def needed_statistics(self) -> dict[str, tuple[str, ...]]:
        return {
            "tanh_activations": (unit_outside((self.threshold_tanh_min, self.threshold_tanh_max)), "count")
        }

    def undecided(self) -> str | None:
        return self._tracker.short()
