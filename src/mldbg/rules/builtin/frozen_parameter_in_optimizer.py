"""frozen_parameter_in_optimizer: parameters handed to the optimizer to train stay frozen
(`requires_grad` False), with evidence that the freeze is a mistake."""

from __future__ import annotations

import math

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import quiet_until_saved
from mldbg.rules.view import TrialView

PREFIX = "frozen_held/"
SELECTED, AT_INIT, IDLE = 1, 2, 3  # the hook's codes (`mldbg.frameworks.torch_frozen`)
WHY = {
    SELECTED: "the optimizer was given a selection of the model's parameters (other frozen ones are left "
    "out of it), and these frozen ones are in it: chosen to train, then frozen (a freezing loop run "
    "again after new layers were put in?)",
    AT_INIT: "they are still at their default random initialization (uniform draws within "
    "1/sqrt(fan_in); an embedding's fresh N(0, 1) or N(0, 0.02) draws): a layer frozen before it ever "
    "trained (a freeze meant for a warm start, never undone?)",
    IDLE: "the optimizer that holds them stepped with every parameter it holds frozen, so its step changed "
    "nothing (requires_grad toggles meant for another model's update, a GAN's discriminator's, pasted into "
    "this one's?)",
}


@register
class FrozenParameterInOptimizer(Rule):
    """Parameters that an optimizer holds stay frozen (`requires_grad` False) at `patience`
    statistics training steps in a row, with evidence that they were meant to train: the
    optimizer skips a parameter without a gradient, so they never train, and nothing fails.

    Freezing on purpose is healthy and common (fine-tuning, adapters, LoRA, linear probes), and
    many scripts give the optimizer `model.parameters()` frozen parts and all: a frozen
    parameter in the optimizer is no evidence by itself. Reads `frozen_held/<parameter>`, which
    the two-line PyTorch hook records at statistics training steps (`mldbg.frameworks.torch_frozen`)
    for a frozen parameter of the stepping optimizer when (1) the optimizer was given a
    selection of the model's parameters that leaves other frozen ones out, yet holds this one
    (the user chose it to train), or (2) it belongs to a Linear, convolution or recurrent layer
    and is still at PyTorch's default initialization (uniform draws within 1/sqrt(fan_in), or
    1/sqrt(hidden_size)), or is an embedding table still fresh N(0, 1) or N(0, 0.02) draws
    (mean, variance and kurtosis within 5 standard errors of the draws'): nobody freezes a
    layer at its random init in a model that trains; a pretrained frozen part is trained, so
    its values left those bounds and that normal shape; or (3) the optimizer holding it stepped
    with every parameter it holds frozen, its step a no-op (a GAN's `requires_grad` toggles for
    the discriminator's update pasted into the generator's: the generator never trains). A streak counts
    statistics steps and ends at one where the parameter trains again (a freeze for a warm-up,
    undone: Proxy Anchor's warm epoch, a backbone frozen while a new head or the proxies
    settle). A freeze ends only later, so the second and third evidence are judged when the run ends: a
    parameter at its init frozen to the last statistics step (`finish`), the freeze never
    undone; the first (the user chose it to train) at the `patience`-th statistics step. Quiet on what is healthy: frozen parameters no optimizer holds (a backbone left
    out of the optimizer), a pretrained frozen backbone or embedding handed over with
    `model.parameters()`, a frozen normalization at any value, a sinusoidal table. The second evidence is weaker
    (a layer of random features frozen on purpose looks the same): its findings are warnings,
    which a stop action does not act on by default. A parameter counts only where
    it was frozen at every training step since the previous statistics step (its
    `requires_grad` statistic 0) and when the step ended: a GAN's critic frozen for the
    generator's update and trained in the same step is not frozen.
    """

    cause = "parameters_not_updated"
    patience: int = 3

    def reset(self) -> None:
        super().reset()
        self._streak: dict[str, tuple[int, int, int]] = {}  # parameter -> (steps in a row, first step, code)
        self._seen = -1  # the last training step looked at

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading `steps` where `check` does nothing: not a training step, or one where
        no parameter is recorded frozen in the optimizer and none is in a streak."""
        if self._streak:
            return 0
        return quiet_until_saved(trial, trial.names(None, regex="^" + PREFIX), steps)

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        held = trial.names(None, regex="^" + PREFIX, step=step)
        if not held and not self._streak:
            return None
        now: dict[str, int] = {}
        for name in held:
            code = trial.saved_statistic(name, step, "sum")
            param = name[len(PREFIX) :]
            flag = trial.saved_statistic(param, step, "requires_grad")  # frozen since the last one?
            if flag is not None and flag != 0:
                continue  # it trained at some step since (a GAN's critic frozen for the generator's update)
            if code is not None and math.isfinite(code) and int(code) in WHY:
                now[param] = int(code)
        for param in list(self._streak):
            if param not in now and self._judged(trial, param, step, bool(held)):
                del self._streak[param]  # trained (or left the optimizer) at this statistics step
        for param, code in now.items():
            run, first, _ = self._streak.get(param, (0, step, code))
            self._streak[param] = (run + 1, first, code)
        self._seen = step
        return self._report(trial, step, codes=(SELECTED,))  # at init: judged when the run ends

    def finish(self, trial: TrialView) -> Finding | None:
        """A parameter at its random init, or held by an optimizer that steps with nothing to
        train, still frozen at the run's last statistics step: the freeze was never undone (a
        warm-up freeze ends, and is healthy)."""
        if self._seen < 0:
            return None
        return self._report(trial, self._seen, codes=(AT_INIT, IDLE))

    def _report(self, trial: TrialView, step: int, codes: tuple[int, ...]) -> Finding | None:
        due = {p: v for p, v in self._streak.items() if v[0] >= max(1, self.patience) and v[2] in codes}
        for code in sorted({v[2] for v in due.values()}):
            if not self.first(code):
                continue
            params = sorted(p for p, v in due.items() if v[2] == code)
            first = min(due[p][1] for p in params)
            shown = ", ".join(params[:6]) + (f" and {len(params) - 6} more" if len(params) > 6 else "")
            found = self.finding(
                trial, step,
                f"{len(params)} parameters the optimizer holds stayed frozen (requires_grad False) at "
                f"{min(due[p][0] for p in params)} statistics training steps in a row (steps {first}-{step}"
                f"{', to the end of the run' if code in (AT_INIT, IDLE) else ''}): {shown}; "
                f"{WHY[code]}. The optimizer skips them: they never train",
                tensors=params[:20],
                suggestion="If these layers should train, set requires_grad_(True) on them after the freezing "
                "code (freeze only the pretrained part, by name, after the new layers exist); if they are meant "
                "to stay fixed, leave them out of the optimizer.",
            )  # fmt: skip
            if code == AT_INIT:  # a random layer frozen on purpose (random features) looks the same:
                found.severity = "warning"  # said, never a reason to stop the training by default
            return found
        return None

    @staticmethod
    def _judged(trial: TrialView, param: str, step: int, looked: bool) -> bool:
        """At this training step the parameter was not recorded: did the hook judge it (other
        parameters recorded here, or its statistics saved)?"""
        return looked or trial.saved_statistic(param, step, "requires_grad") is not None
