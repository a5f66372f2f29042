"""saturated_activation: tanh or sigmoid saturation (SageMaker's combined rule)."""

from __future__ import annotations

from collections.abc import Iterable

from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.saturation import SUGGESTION, SaturationTracker, check_saturation, unit_outside
from mldbg.rules.view import TrialView
from mldbg.store.statistics import SIGMOID_BOUNDS, TANH_BOUNDS


@register
class SaturatedActivation(Rule):
    """Either `tanh_saturation` or `sigmoid_saturation`, with the parameters of both.

    Kept for SageMaker users. Not in the default set, because the two rules it combines are
    (it would report the same layers twice).
    """

    needs = ("tanh_activations", "sigmoid_activations")
    needs_any = True
    reads = {
        "tanh_activations": (unit_outside(TANH_BOUNDS), "count"),
        "sigmoid_activations": (unit_outside(SIGMOID_BOUNDS), "count"),
    }
    default = False
    threshold_tanh_min: float = -9.4999
    threshold_tanh_max: float = 9.4999
    threshold_sigmoid_min: float = -23.0
    threshold_sigmoid_max: float = 16.99999
    threshold_inactivity: float = 50.0
    threshold_layer: float = 50.0
    patience: int = 3
    suggestion = SUGGESTION

    def reset(self) -> None:
        super().reset()
        self._trackers = {
            "tanh": SaturationTracker(
                "tanh", self.threshold_tanh_min, self.threshold_tanh_max, self.patience
            ),
            "sigmoid": SaturationTracker(
                "sigmoid", self.threshold_sigmoid_min, self.threshold_sigmoid_max, self.patience
            ),
        }

    def check(self, trial: TrialView, step: int) -> Iterable[Finding]:
        found = (check_saturation(self, trial, step, t) for t in self._trackers.values())
        return [f for f in found if f is not None]

    def needed_statistics(self) -> dict[str, tuple[str, ...]]:
        return {
            "tanh_activations": (unit_outside((self.threshold_tanh_min, self.threshold_tanh_max)), "count"),
            "sigmoid_activations": (
                unit_outside((self.threshold_sigmoid_min, self.threshold_sigmoid_max)),
                "count",
            ),
        }

    def undecided(self) -> str | None:
        whys = [w for t in self._trackers.values() if (w := t.short())]
        return "; ".join(whys) or None
