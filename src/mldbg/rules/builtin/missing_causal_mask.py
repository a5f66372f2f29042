"""missing_causal_mask: a next-token language model sees the tokens it predicts."""

from __future__ import annotations

from mldbg.rules import language_model as lm
from mldbg.rules.base import register


@register
class MissingCausalMask(lm.CountsRule):
    """A next-token language model predicts the tokens it can already see: a decoder without
    its causal mask (`nn.TransformerEncoder` called without `mask=`, `is_causal=False`), or a
    bidirectional RNN. Its loss falls towards 0 everywhere except at the last position, whose
    target (the token after the window) is not in the input: no causal model does that, since
    the last position has the most context of all.

    Reads the `lm/` counts the PyTorch hook records at statistics steps
    (`mldbg.rules.language_model`): the targets must be the inputs shifted by one (along the
    axis found, batch- or sequence-first), and the mean loss at the last position must be at
    least `ratio` times the mean loss at the other positions and `gap` nats above it, at
    `patience` TRAIN statistics steps in a row. It needs the model to have learnt to copy
    the visible future (tens of steps at the hook's every-step statistics, then the spacing
    of its later statistics steps), and windows whose last target lies beyond the input
    (nanoGPT's x = data[i:i+T], y = data[i+1:i+T+1]); labels cut inside the window, as
    Hugging Face models do, leave no position to compare and are not judged.
    """

    ratio: float = 4.0
    gap: float = 1.0
    min_last: int = 4  # targets at the last position (one per sequence)
    cause = "missing_causal_mask"
    suggestion = (
        "Mask the future in every self-attention of the decoder: nn.TransformerEncoder(..., "
        "mask=nn.Transformer.generate_square_subsequent_mask(T), is_causal=True), "
        "F.scaled_dot_product_attention(q, k, v, is_causal=True), or a lower-triangular mask added "
        "to the attention logits; use a unidirectional RNN for a language model."
    )

    def judge(self, c: dict[str, float]) -> tuple[int, float, float] | bool | None:
        if "eligible_0" not in c:
            return None
        found = lm.alignment(c)
        if found is None or found.offset != 1 or found.axis is None:
            return False
        a = found.axis
        last_n, rest_n = c.get(f"last_{a}", 0.0), c.get(f"rest_{a}", 0.0)
        if last_n < self.min_last or rest_n < lm.MIN_TARGETS:
            return None  # nothing to compare (the last targets cut or ignored): not judged
        last = c[f"last_loss_{a}"] / last_n
        rest = c[f"rest_loss_{a}"] / rest_n
        leaks = last >= self.ratio * rest and last - rest >= self.gap
        return (a, last, rest) if leaks else False

    def describe(
        self, step: int, c: dict[str, float], evidence: tuple[int, float, float]
    ) -> tuple[str, list[str]]:
        a, last, rest = evidence
        return (
            f"the loss at the last position is {last:.3g} but {rest:.3g} at the others "
            f"({last / max(rest, 1e-12):.1f}x, {self._streak} statistics steps in a row), while the "
            "targets are the next input tokens: every position but the last can see its target, "
            "so the model is not causal",
            [f"{lm.PREFIX}last_loss_{a}", f"{lm.PREFIX}rest_loss_{a}"],
        )
