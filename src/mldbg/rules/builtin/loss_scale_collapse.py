"""loss_scale_collapse: the AMP loss scale keeps falling (an overflow at every step)."""

from __future__ import annotations

import math

from mldbg.config import Mode
from mldbg.errors import MldbgError
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.view import TrialView

SCALE_REGEX = r"(?i)(loss|grad)[_ ]?scale|^(amp_)?scale$|scaler"


@register
class LossScaleCollapse(Rule):
    """The mixed-precision loss scale keeps falling: it fell at `patience` consecutive
    saved training steps, or fell below `min_scale`.

    A dynamic loss scaler (torch.amp.GradScaler, DeepSpeed, Apex) halves the scale and skips
    the optimizer step whenever a gradient holds inf or NaN. A few halvings at the start are
    how it finds its level; halving at every step means every step overflows: the optimizer
    skips them all and the model silently stops training, while the loss looks plausible.

    Reads the scale as a scalar you save each step, named like `loss_scale` (the convention;
    `grad_scale`, `scale`, `amp_scale` and names with `scaler` match too: `tensor_regex`):
    `hook.save_scalar("loss_scale", scaler.get_scale())` after `scaler.update()`.
    """

    needs = ("scalars",)
    patience: int = 10
    min_scale: float = 1.0
    tensor_regex: str = SCALE_REGEX
    suggestion = (
        "Find what overflows in every step: gradients of a NaN-producing op (x / x.norm() on an "
        "all-zero row, log(0), sqrt(0)), a loss computed in fp16 (compute it in fp32 outside "
        "autocast), or an fp16 activation beyond 65504; use bf16, torch.nn.functional.normalize "
        "(it has an eps), and check for inf/NaN in the inputs."
    )

    def reset(self) -> None:
        super().reset()
        self._last: dict[str, tuple[int, float]] = {}  # name -> (step, value) last saved
        self._falls: dict[str, list[int]] = {}  # name -> steps of the current run of falls
        self._first: dict[str, float] = {}  # name -> the first value seen
        self._seen = False

    def unchecked(self) -> str | None:
        if not self._seen:
            return f"no loss-scale scalar (scalars matching {self.tensor_regex!r}; save it with hook.save_scalar('loss_scale', scaler.get_scale()))"
        return None

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        for name in trial.names("scalars", regex=self.tensor_regex, step=step):
            try:
                value = float(trial.reduce(name, step, "mean"))
            except MldbgError:
                continue
            if not math.isfinite(value):
                continue
            self._seen = True
            self._first.setdefault(name, value)
            prev = self._last.get(name)
            self._last[name] = (step, value)
            falls = self._falls.setdefault(name, [])
            if prev is None:
                continue
            if value < prev[1]:
                falls.append(step)
            else:
                falls.clear()
            low = value < self.min_scale <= prev[1]
            if (len(falls) >= self.patience or low) and self.first(name):
                why = (
                    f"fell at {len(falls)} consecutive saved steps (since step {falls[0]})"
                    if len(falls) >= self.patience
                    else f"fell below {self.min_scale:g}"
                )
                return self.finding(
                    trial, step,
                    f"the loss scale {name} {why}: {self._first[name]:.4g} at first, {value:.4g} now "
                    f"(patience {self.patience}): gradients overflow (inf/NaN) at every step, and the "
                    "scaler skips every optimizer step: the model is not training",
                    tensors=[name],
                )  # fmt: skip
        return None
