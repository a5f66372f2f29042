"""labels_not_shifted: a language model's targets are its inputs, not the next tokens."""

from __future__ import annotations

from mldbg.config import Mode
from mldbg.rules import language_model as lm
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.view import TrialView


@register
class LabelsNotShifted(Rule):
    """The targets of a language model's cross-entropy are its input tokens at the same
    position: the labels were not shifted by one (`loss(logits, x)` where `y = x[:, 1:]` was
    meant), so the model learns to copy the token it is given and its loss falls to ~0
    without learning anything about language.

    Reads the `lm/` counts the PyTorch hook records at statistics steps (the two lines, the
    Hugging Face and Lightning callbacks) from the cross-entropy behind the loss and the
    model's token ids (`mldbg.rules.language_model`): fires when at least `share` of the
    valid targets equal the input at the same position and `margin` more than at offsets 1
    and 2 (a stream of repeated tokens aligns everywhere and is not judged), at `patience`
    TRAIN statistics steps in a row. A token autoencoder (a model meant to reproduce its input)
    fires too: turn the rule off for one.
    """

    share: float = lm.SHARE
    margin: float = lm.MARGIN
    patience: int = 2
    cause = "lm_labels_misaligned"
    suggestion = (
        "Shift the labels by one token: predict x[:, t+1] from x[:, :t+1] (logits[:, :-1] against "
        "x[:, 1:], or x = data[i:i+T], y = data[i+1:i+T+1]). Hugging Face models shift labels= "
        "themselves: pass labels=input_ids unshifted there."
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
        self._streak = self._streak + 1 if found is not None and found.offset == 0 else 0
        if self._streak < self.patience or found is None or not self.first():
            return None
        return self.finding(
            trial,
            step,
            f"{found.shares['0']:.0%} of the targets equal the input token at the same position "
            f"({found.describe()}; {self._streak} statistics steps in a row): the labels are the "
            "inputs, not the next tokens, and the model learns to copy its input",
            tensors=[f"{lm.PREFIX}align_0"],
        )
