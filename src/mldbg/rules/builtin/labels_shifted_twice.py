"""labels_shifted_twice: a language model's targets are the tokens two positions ahead."""

from __future__ import annotations

from mldbg.config import Mode
from mldbg.rules import language_model as lm
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.view import TrialView


@register
class LabelsShiftedTwice(Rule):
    """The targets of a language model's cross-entropy are the input tokens two positions
    ahead, not one: the labels were shifted twice (most often `labels=input_ids[:, 1:]` given
    to a Hugging Face model, which shifts them again), so the model is trained to predict the
    token after next and its loss stays far above what next-token prediction reaches.

    Reads the `lm/` counts the PyTorch hook records at statistics steps (the two lines, the
    Hugging Face and Lightning callbacks) from the cross-entropy behind the loss and the
    model's token ids (`mldbg.rules.language_model`): fires when at least `share` of the
    valid targets equal the input two positions later and `margin` more than at offsets 0
    and 1, at `patience` TRAIN statistics steps in a row.
    """

    share: float = lm.SHARE
    margin: float = lm.MARGIN
    patience: int = 2
    cause = "lm_labels_misaligned"
    suggestion = (
        "Shift the labels once: predict x[:, t+1] at position t. Hugging Face models shift labels= "
        "themselves, so pass labels=input_ids (padding set to -100) without shifting them; in your "
        "own loop, shift either the data (y = data[i+1:i+T+1]) or the logits (logits[:, :-1] "
        "against x[:, 1:]), not both."
    )

    def reset(self) -> None:
        super().reset()
        self._streak = 0

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        c = lm.counts(trial, step)
        if "eligible_0" not in c:
            return None
        found = lm.alignment(c, self.share, self.margin)
        self._streak = self._streak + 1 if found is not None and found.offset == 2 else 0
        if self._streak < self.patience or found is None or not self.first():
            return None
        return self.finding(
            trial,
            step,
            f"{found.shares['2']:.0%} of the targets equal the input token two positions later "
            f"({found.describe()}; {self._streak} statistics steps in a row): the labels are shifted "
            "twice, and the model is trained to predict the token after next",
            tensors=[f"{lm.PREFIX}align_2_{found.axis}"],
        )
