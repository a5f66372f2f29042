"""labels_not_shifted: a language model's targets are its inputs, not the next tokens."""

from __future__ import annotations

from mldbg.rules import language_model as lm
from mldbg.rules.base import register


@register
class LabelsNotShifted(lm.MisalignedLabels):
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

    offset = 0
    suggestion = (
        "Shift the labels by one token: predict x[:, t+1] from x[:, :t+1] (logits[:, :-1] against "
        "x[:, 1:], or x = data[i:i+T], y = data[i+1:i+T+1]). Hugging Face models shift labels= "
        "themselves: pass labels=input_ids unshifted there."
    )

    def explain(self, found: lm.Alignment) -> str:
        return (
            f"of the targets equal the input token at the same position {self._streak_text(found)}: "
            "the labels are the inputs, not the next tokens, and the model learns to copy its input"
        )
