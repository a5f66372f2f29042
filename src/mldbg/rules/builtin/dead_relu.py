"""dead_relu: ReLU layers whose units never activate."""

from __future__ import annotations

import numpy as np

from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.stats import UnitWindow, pick_per_layer, unit_fraction
from mldbg.rules.view import TrialView


def _activity(trial: TrialView, name: str, step: int) -> tuple[np.ndarray, int] | None:
    """Per unit, the samples where it is active, and the samples: from the raw tensor (a unit
    per position), else from the saved `unit_active` and `samples` statistics."""
    x = trial.raw(name, step)
    if x is not None:
        return None if x.size == 0 else unit_fraction(np.asarray(x) > 0)
    active = trial.saved_statistic(name, step, "unit_active")
    samples = trial.saved_statistic(name, step, "samples")
    if not isinstance(active, np.ndarray) or not isinstance(samples, float) or samples < 1 or not active.size:
        return None
    return active.astype(np.int64).reshape(-1), int(samples)


@register
class DeadRelu(Rule):
    """More than `threshold_layer` % of a ReLU layer's units are active (> 0) in fewer than
    `threshold_inactivity` % of the samples, over the last `patience` saved steps.

    A dead unit outputs 0 for every input, so its gradient is 0 and it never recovers: the
    layer shrinks. A unit counts as dead only when it stays at zero across the whole batch
    (and the window of steps), not when it is zero for half the samples, which is how a
    healthy ReLU behaves. A "unit" is every coordinate but the batch axis (a neuron, or one
    position of a feature map). Inputs or outputs of the layers in `relu_activations`
    (or `tensor_regex`) are read; x > 0 is "active" for both. Without the raw tensor, the
    `unit_active` statistic (out of `samples`) a two-line hook records every step: there a
    unit of a conv layer is its channel (a dead filter).
    """

    needs = ("relu_activations",)
    reads = {"relu_activations": ("unit_active", "samples")}
    threshold_inactivity: float = 1.0
    threshold_layer: float = 50.0
    patience: int = 3
    tensor_regex: list[str] | None = None
    suggestion = (
        "Initialize biases at 0 or slightly positive (not negative), lower the learning rate, "
        "use LeakyReLU/GELU instead of ReLU, add BatchNorm before the ReLU, and check that "
        "inputs are normalized."
    )

    def reset(self) -> None:
        super().reset()
        self._windows: dict[str, UnitWindow] = {}  # per layer, the last `patience` saved steps
        self._since: dict[str, int] = {}

    def needed_collections(self) -> tuple[str, ...]:
        return () if self.tensor_regex else self.needs

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if self.tensor_regex:
            names = trial.names(None, regex=self.tensor_regex, step=step)
        else:
            names = trial.names("relu_activations", step=step)
        if not names:
            return None
        dead_layers = []
        for layer, name in sorted(pick_per_layer(names, prefer="output").items()):
            got = _activity(trial, name, step)
            if got is None:
                continue
            counts, samples = got
            win = self._windows.setdefault(layer, UnitWindow(self.patience))
            win.add(counts, samples)
            self._since.setdefault(layer, step)
            if not win.full:
                continue
            active = win.fraction() * 100
            dead = active < self.threshold_inactivity
            share = 100.0 * dead.sum() / dead.size
            if share > self.threshold_layer:
                dead_layers.append((layer, name, share, int(dead.sum()), dead.size, sum(win.samples)))
        dead_layers = [d for d in dead_layers if self.first(d[0])]
        if not dead_layers:
            return None
        parts = [
            f"{layer}: {k} of its {n} units ({share:.0f}%) active in < {self.threshold_inactivity:g}% of {samples} samples"
            for layer, _, share, k, n, samples in dead_layers
        ]
        return self.finding(
            trial, step,
            f"dead ReLUs over the last {self.patience} saved steps: {'; '.join(parts)} "
            f"(more than {self.threshold_layer:g}% dead): these units output 0 and get no gradient",
            tensors=[d[1] for d in dead_layers],
        )  # fmt: skip
