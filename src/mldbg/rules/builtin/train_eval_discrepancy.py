"""train_eval_discrepancy: the same weights give outputs of very different scale in TRAIN and EVAL."""

from __future__ import annotations

import math
from collections import deque

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.stats import median
from mldbg.rules.view import TrialView

COLLECTIONS = ("relu_activations", "tanh_activations", "sigmoid_activations", "outputs")


@register
class TrainEvalDiscrepancy(Rule):
    """With the same weights, TRAIN and EVAL forwards differ in scale by orders of magnitude:
    the RMS (sqrt(variance + mean^2)) of a layer's activations, or of the model's output, in an
    EVAL step is more than `threshold` times (or less than 1/`threshold` of) its median over the
    last `window` TRAIN statistics steps. Mode-dependent layers do it: BatchNorm whose running
    statistics are broken (momentum 0, reset, never updated, computed on other data) normalizes
    evaluation inputs with the wrong scale; hand-written dropout that scales at evaluation. A
    healthy dropout changes the scale by at most 1 / (1 - p).

    Compares only after `min_train_steps` TRAIN steps (BatchNorm's running statistics need a
    few steps to follow the data), and fires after `patience` EVAL steps in a row. Reads the
    `mean` and `variance` statistics the two-line PyTorch hook records for activation inputs
    and model outputs in both modes (or raw tensors).
    """

    needs = COLLECTIONS
    needs_any = True
    reads = {c: ("mean", "variance") for c in COLLECTIONS}
    threshold: float = 10.0
    window: int = 5
    min_train_steps: int = 10
    patience: int = 2

    def reset(self) -> None:
        super().reset()
        self._train: dict[str, deque[float]] = {}  # per tensor, its last TRAIN scales
        self._train_steps = 0
        self._streak = 0

    def _scale(self, trial: TrialView, name: str, step: int) -> float | None:
        var, mean = trial.statistic(name, step, "variance"), trial.statistic(name, step, "mean")
        if not isinstance(var, float) or not isinstance(mean, float):
            return None
        rms = math.sqrt(max(var, 0.0) + mean * mean)
        return rms if math.isfinite(rms) else None

    def check(self, trial: TrialView, step: int) -> Finding | None:
        mode = trial.mode(step)
        names = trial.names(COLLECTIONS, step=step)
        if mode == Mode.TRAIN:
            self._train_steps += 1
            for name in names:
                scale = self._scale(trial, name, step)
                if scale is not None:
                    self._train.setdefault(name, deque(maxlen=self.window)).append(scale)
            return None
        if mode != Mode.EVAL or self._train_steps < self.min_train_steps:
            return None
        worst: tuple[float, str, float, float] | None = None
        off: list[str] = []
        for name in names:
            history = self._train.get(name)
            scale = self._scale(trial, name, step) if history else None
            if scale is None or history is None or len(history) < min(3, self.window):
                continue
            ref = median(list(history))
            if not ref > 1e-8 or not math.isfinite(ref):
                continue
            ratio = max(scale, 1e-30) / ref
            factor = max(ratio, 1 / ratio)
            if factor > self.threshold:
                off.append(name)
                if worst is None or factor > worst[0]:
                    worst = (factor, name, scale, ref)
        self._streak = self._streak + 1 if off else 0
        if worst is None or self._streak < self.patience or not self.first("scale"):
            return None
        factor, name, scale, ref = worst
        return self.finding(
            trial, step,
            f"in EVAL the scale (RMS) of {len(off)} tensor{'s' if len(off) > 1 else ''} is off by more than "
            f"{self.threshold:g}x from TRAIN at {self._streak} evaluation steps in a row: {name} has RMS "
            f"{scale:.3g} in EVAL against {ref:.3g} in the last TRAIN steps ({factor:.3g}x)",
            tensors=off,
            suggestion="Check the mode-dependent layers: BatchNorm's running statistics (momentum, "
            "track_running_stats, a reset or a load that skipped them, statistics computed on other data), "
            "dropout that scales at evaluation instead of training, and that training and evaluation inputs "
            "are preprocessed the same way.",
        )  # fmt: skip
