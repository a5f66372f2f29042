"""frozen_layer_updated: a parameter declared frozen changes."""

from __future__ import annotations

import math
import re

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.select import as_list, short_list
from mldbg.rules.view import TrialView


@register
class FrozenLayerUpdated(Rule):
    """A parameter declared frozen changes between two consecutive training steps.

    Declared frozen: `requires_grad=False` when the hook recorded it (the two-line PyTorch
    hook records each parameter's `requires_grad` with its statistics: 0 when it was frozen at
    every training step since the previous statistics step), or a name matching
    `tensor_regex` (for a freeze that did not take: `model.backbone.requires_grad = False`
    sets an attribute and freezes nothing). Classic causes: freezing in the middle of training
    while the optimizer keeps its momentum (SGD momentum, Adam moments) and the gradients are
    zeroed rather than set to None, so the frozen weights keep moving; weight decay or an EMA
    applied to every parameter; a parameter left in the optimizer.

    The change is `delta_l2` (|w - w_prev|, from the hook, or computed from raw weights) between
    two saved training steps with the parameter frozen at both and, by the hook's flag, at
    every step between (so a GAN that freezes its discriminator for the generator's step, and
    trains it the next step, is healthy; a name matched by `tensor_regex` is frozen
    throughout); a change above `atol` + `rtol` * |w| fires. Buffers (BatchNorm's running
    statistics) are not parameters and do not count: a frozen backbone left in training mode
    updates them, which is PyTorch's documented behaviour (see `train_in_eval_mode`).
    """

    needs = ("weights",)
    reads = {"weights": ("delta_l2", "l2", "requires_grad"), "biases": ("delta_l2", "l2", "requires_grad")}
    tensor_regex: list[str] | None = None
    rtol: float = 0.0
    atol: float = 0.0

    def reset(self) -> None:
        super().reset()
        self._last: dict[str, tuple[int, bool]] = {}  # per parameter: (its TRAIN mode step, frozen then)
        self._patterns: list[re.Pattern[str]] | None = None

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        if self._patterns is None:
            self._patterns = [re.compile(r) for r in as_list(self.tensor_regex)]
        mode_step = trial.mode_step(step)
        moved: list[tuple[str, float, float]] = []
        for name in trial.names(("weights", "biases"), step=step):
            declared = any(p.search(name) for p in self._patterns)
            flag = trial.saved_statistic(name, step, "requires_grad")
            if not declared and (flag is None or not math.isfinite(flag)):
                continue  # not known at this step (a fingerprint-only record, a raw run)
            frozen = declared or flag == 0.0
            last = self._last.get(name)
            self._last[name] = (mode_step, frozen)
            if not frozen or last is None or not last[1]:
                continue
            delta = trial.statistic(name, step, "delta_l2")
            size = trial.statistic(name, step, "l2")
            if not isinstance(delta, float) or not math.isfinite(delta):
                continue
            scale = size if isinstance(size, float) and math.isfinite(size) else 0.0
            if delta > self.atol + self.rtol * scale:
                moved.append((name, delta, scale))
        moved = [m for m in moved if self.first(m[0])]
        if not moved:
            return None
        name, delta, scale = max(moved, key=lambda m: m[1] / (m[2] or 1.0))
        why = "matches tensor_regex" if any(p.search(name) for p in self._patterns) else "requires_grad=False"
        return self.finding(
            trial, step,
            f"{len(moved)} frozen parameter{'s' if len(moved) > 1 else ''} changed up to training step "
            f"{step} ({short_list([m[0] for m in moved])}): {name} ({why}) moved by "
            f"|dw| = {delta:.3g} (|w| = {scale:.3g})",
            tensors=[m[0] for m in moved],
            suggestion="Leave frozen parameters out of the optimizer (build it from the parameters with "
            "requires_grad=True, or rebuild it after freezing): momentum, Adam's moments and weight decay "
            "move them even with zero gradients; zero gradients with optimizer.zero_grad(set_to_none=True); "
            "freeze with p.requires_grad_(False) on each parameter, not an attribute on the module.",
        )  # fmt: skip
