"""parameter_without_gradient: parameters an optimizer trains get no gradient, though
`requires_grad` is True (a reentrant checkpoint over frozen inputs, a branch cut by `.detach()`)."""

from __future__ import annotations

import math

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import quiet_until_saved
from mldbg.rules.view import TrialView

PREFIX = "gradient_cut/"
CHECKPOINT, DETACHED = 1, 2  # the hook's codes (`mldbg.frameworks.torch_gradient_flow`)
WHY = {
    CHECKPOINT: (
        "their layers ran inside a reentrant torch.utils.checkpoint (use_reentrant=True) whose inputs "
        "need no gradient (frozen embeddings below it), so backward never recomputed them",
        "Use torch.utils.checkpoint.checkpoint(..., use_reentrant=False), or make the checkpoint's "
        "input require a gradient (Hugging Face: model.enable_input_require_grads(), or "
        "gradient_checkpointing_kwargs={'use_reentrant': False}).",
    ),
    DETACHED: (
        "the output of their layer reached the next layer detached (.detach() or .data cut the graph)",
        "Remove the .detach() (or .data) between the layers if they should train; if they are meant to "
        "stay fixed, set requires_grad_(False) on them and leave them out of the optimizer.",
    ),
}


@register
class ParameterWithoutGradient(Rule):
    """Parameters that an optimizer holds, with `requires_grad` True, receive no gradient in
    backward at `patience` statistics training steps in a row, for a reason the hook saw: the
    optimizer skips them (a `.grad` of None), so they never train, and nothing fails.

    Reads `gradient_cut/<parameter>`, which the two-line PyTorch hook records at statistics
    training steps (`mldbg.frameworks.torch_gradient_flow`) for a parameter of the stepping
    optimizer that got no gradient in the step's backward while (1) its layer ran inside a
    reentrant `torch.utils.checkpoint` with gradients off, the checkpoint's inputs needing no
    gradient (frozen embeddings below it: the classic `use_reentrant=True` trap), or (2) its
    layer's output was given to another layer detached (`.detach()`, `.data`). A streak counts
    statistics steps, and resets at one where the parameter got its gradient. Quiet on what is
    healthy: frozen parameters (`requires_grad` False), parameters no optimizer holds, layers
    that did not run (an expert that got no token), outputs nobody used, a feature extractor run
    under `torch.no_grad()`, unused embedding rows (a parameter is a whole tensor), tied
    weights. First finding at the `patience`-th training step (step 2 with the default).
    """

    cause = "gradients_interrupted"
    patience: int = 3

    def reset(self) -> None:
        super().reset()
        self._streak: dict[str, tuple[int, int, int]] = {}  # parameter -> (steps in a row, first step, code)

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading `steps` where `check` does nothing: not a training step, or one where
        no parameter was cut and none of those in a streak had its gradient saved."""
        if self._streak and any(
            run >= max(1, self.patience) and code not in self._fired for run, _, code in self._streak.values()
        ):
            return 0  # a second reason due at the same step is reported at the next
        names = [*trial.names(None, regex="^" + PREFIX), *(f"gradient/{param}" for param in self._streak)]
        return quiet_until_saved(trial, names, steps)

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        cut = trial.names(None, regex="^" + PREFIX, step=step)
        if not cut and not self._streak:
            return None
        now: dict[str, int] = {}
        for name in cut:
            code = trial.saved_statistic(name, step, "sum")
            if code is not None and math.isfinite(code) and int(code) in WHY:
                now[name[len(PREFIX) :]] = int(code)
        for param in list(self._streak):
            if param not in now and self._got_gradient(trial, param, step, bool(cut)):
                del self._streak[param]
        for param, code in now.items():
            run, first, _ = self._streak.get(param, (0, step, code))
            self._streak[param] = (run + 1, first, code)
        due = {p: v for p, v in self._streak.items() if v[0] >= max(1, self.patience)}
        codes = sorted({v[2] for v in due.values()})
        for code in codes:
            if not self.first(code):
                continue
            params = sorted(p for p, v in due.items() if v[2] == code)
            first = min(due[p][1] for p in params)
            why, advice = WHY[code]
            shown = ", ".join(params[:6]) + (f" and {len(params) - 6} more" if len(params) > 6 else "")
            return self.finding(
                trial, step,
                f"{len(params)} parameters the optimizer updates got no gradient at {max(1, self.patience)} "
                f"training steps in a row (steps {first}-{step}) though requires_grad is True: {shown}; "
                f"{why}. The optimizer skips them: they never train",
                tensors=params[:20],
                suggestion=advice,
            )  # fmt: skip
        return None

    @staticmethod
    def _got_gradient(trial: TrialView, param: str, step: int, looked: bool) -> bool:
        """At this training step the parameter was not cut: did the hook see it otherwise
        (its gradient saved, or other parameters' cut judged here)?"""
        return (
            looked
            or trial.has_tensor(f"gradient/{param}")
            and trial.saved_statistic(f"gradient/{param}", step, "l2") is not None
        )
