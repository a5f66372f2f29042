"""labels_shifted_twice: a language model's targets are the tokens two positions ahead."""

from __future__ import annotations

from mldbg.rules import language_model as lm
from mldbg.rules.base import register


@register
class LabelsShiftedTwice(lm.MisalignedLabels):
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

    offset = 2
    suggestion = (
        "Shift the labels once: predict x[:, t+1] at position t. Hugging Face models shift labels= "
        "themselves, so pass labels=input_ids (padding set to -100) without shifting them; in your "
        "own loop, shift either the data (y = data[i+1:i+T+1]) or the logits (logits[:, :-1] "
        "against x[:, 1:]), not both."
    )

    def explain(self, found: lm.Alignment) -> str:
        return (
            f"of the targets equal the input token two positions later {self._streak_text(found)}: "
            "the labels are shifted twice, and the model is trained to predict the token after next"
        )
