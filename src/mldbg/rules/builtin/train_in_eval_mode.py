"""train_in_eval_mode: the model (or part of it) trains in eval mode."""

from __future__ import annotations

import math

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.view import TrialView

KINDS = {"dropout": "Dropout", "norm": "BatchNorm/InstanceNorm"}


@register
class TrainInEvalMode(Rule):
    """Training steps run with the model, or some of its Dropout / BatchNorm modules, in eval
    mode (`model.eval()` left on after validation): dropout is off and BatchNorm normalizes
    with its running statistics instead of the batch's, so the model trains as it would be
    evaluated and its running statistics stop following the data.

    Reads what the PyTorch two-line hook records at statistics steps: `module_training/dropout`
    and `module_training/norm` (`sum`: modules in training mode, `count`: modules), counting
    only modules with trainable parameters around them (a frozen backbone kept in eval on
    purpose is left out), and `optimizer_step` at steps recorded as EVAL or PREDICT: the hook
    follows `model.training`, so an optimizer that steps while the model is in eval mode shows
    up there, when the model has such modules to train (a model without any, or a linear
    probe whose Dropout and BatchNorm sit in a frozen backbone, trains the same in eval mode).
    Fires after `patience` such steps in a row; more than `threshold` (a share) of the modules
    must be in eval mode.
    """

    patience: int = 2
    threshold: float = 0.0

    def reset(self) -> None:
        super().reset()
        self._streak = 0  # TRAIN statistics steps in a row with modules in eval mode
        self._outside = 0  # EVAL/PREDICT steps in a row in which an optimizer stepped
        self._first: int | None = None

    def check(self, trial: TrialView, step: int) -> Finding | None:
        mode = trial.mode(step)
        if mode == Mode.TRAIN:
            self._outside = 0
            off: list[str] = []
            total = in_eval = 0
            for kind, label in KINDS.items():
                name = f"module_training/{kind}"
                on = trial.saved_statistic(name, step, "sum")
                count = trial.saved_statistic(name, step, "count")
                if on is None or count is None or not (math.isfinite(on) and math.isfinite(count)):
                    continue
                total += int(count)
                if count - on > 0:
                    in_eval += int(count - on)
                    off.append(f"{int(count - on)} of {int(count)} {label}")
            if not total:
                return None
            if in_eval / total > self.threshold:
                self._streak += 1
                self._first = step if self._streak == 1 else self._first
            else:
                self._streak = 0
            if self._streak < self.patience or not self.first("modules"):
                return None
            return self.finding(
                trial, step,
                f"{', '.join(off)} modules were in eval mode at {self._streak} training steps in a row "
                f"(steps {self._first}-{step}): dropout off, BatchNorm on running statistics while training",
                tensors=[f"module_training/{k}" for k in KINDS if trial.has_tensor(f"module_training/{k}")],
                suggestion="Call model.train() at the start of every training epoch (after validation "
                "switched the model to eval); to keep a part of the model in eval on purpose, freeze its "
                "parameters (requires_grad=False) too.",
            )  # fmt: skip
        stepped = trial.saved_statistic("optimizer_step", step, "sum")
        relevant = sum(trial.saved_statistic(f"module_training/{k}", step, "count") or 0.0 for k in KINDS)
        if stepped is None or not stepped > 0 or not relevant > 0:
            self._outside = 0  # (without Dropout or BatchNorm to train, eval mode changes nothing)
            return None
        self._outside += 1
        self._first = step if self._outside == 1 else self._first
        if self._outside < self.patience or not self.first("optimizer"):
            return None
        return self.finding(
            trial, step,
            f"the optimizer stepped at {self._outside} steps in a row recorded as {mode.name} (steps "
            f"{self._first}-{step}): the model was in eval mode (model.training False) while it trained",
            tensors=["optimizer_step"],
            suggestion="Call model.train() before the training loop resumes after validation (eval mode "
            "turns dropout off and freezes BatchNorm's statistics), or hook.set_mode(mldbg.Mode.TRAIN) if "
            "eval mode during training is intended.",
        )  # fmt: skip
