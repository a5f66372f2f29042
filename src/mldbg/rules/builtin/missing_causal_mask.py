"""missing_causal_mask: a next-token language model sees the tokens it predicts."""

from __future__ import annotations

import math
from typing import Any

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
    (`mldbg.rules.language_model`); the targets must be the inputs shifted by one (along the
    axis found, batch- or sequence-first: only a next-token model is judged, not a masked or
    bidirectional encoder, nor a seq2seq decoder). Two signs, `patience` TRAIN statistics
    steps in a row:

    - the causal probe (`mldbg.frameworks.torch_lm`, the first statistics steps and a few
      later): the gradient of the other positions' log-likelihood with respect to the last
      token's embedding, whose norm is exactly 0 in a causal model. It fires when that norm
      is at least `leak` times the root mean square of the same gradient at a position
      (`leak=0.001`; a model without its mask shows 0.01-1 from the first step, since every
      position reads every token). Found at the second step of training.
    - where the probe did not run (a model whose embedding is not in the graph), the loss:
      the mean loss at the last position at least `ratio` times the mean loss at the other
      positions and `gap` nats above it. It needs the model to have learnt to copy the visible
      future (tens of steps, then the spacing of the hook's later statistics steps), and
      windows whose last target lies beyond the input (nanoGPT's x = data[i:i+T],
      y = data[i+1:i+T+1]); labels cut inside the window, as Hugging Face models do, leave no
      position to compare for this sign.
    """

    leak: float = 0.001
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

    def judge(self, c: dict[str, float]) -> tuple[Any, ...] | bool | None:
        if "eligible_0" not in c:
            return None
        found = lm.alignment(c)
        if found is None or found.offset != 1 or found.axis is None:
            return False
        a = found.axis
        own, positions = c.get(f"own_{a}", 0.0), c.get(f"positions_{a}", 0.0)
        if f"leak_{a}" in c and own > 0 and positions > 0:
            seen = math.sqrt(c[f"leak_{a}"] / (own / positions))
            return ("probe", a, seen) if seen >= self.leak else False
        last_n, rest_n = c.get(f"last_{a}", 0.0), c.get(f"rest_{a}", 0.0)
        if last_n < self.min_last or rest_n < lm.MIN_TARGETS:
            return None  # nothing to compare (the last targets cut or ignored): not judged
        if f"last_loss_{a}" not in c or f"rest_loss_{a}" not in c:
            return None  # a loss sum that is not finite (`lm.counts` keeps finite ones): a diverged step
        last = c[f"last_loss_{a}"] / last_n
        rest = c[f"rest_loss_{a}"] / rest_n
        leaks = last >= self.ratio * rest and last - rest >= self.gap
        return (a, last, rest) if leaks else False

    def describe(self, step: int, c: dict[str, float], evidence: tuple[Any, ...]) -> tuple[str, list[str]]:
        if evidence[0] == "probe":
            _, a, seen = evidence
            return (
                "the predictions before the last position depend on the last input token (the "
                f"gradient of their log-likelihood with respect to its embedding is {seen:.3g} times "
                f"a position's own, where a causal model has exactly 0; {self._streak} statistics "
                "steps in a row), while the targets are the next input tokens: each position can "
                "see its target, so the model is not causal",
                [f"{lm.PREFIX}leak_{a}", f"{lm.PREFIX}own_{a}"],
            )
        a, last, rest = evidence
        return (
            f"the loss at the last position is {last:.3g} but {rest:.3g} at the others "
            f"({last / max(rest, 1e-12):.1f}x, {self._streak} statistics steps in a row), while the "
            "targets are the next input tokens: every position but the last can see its target, "
            "so the model is not causal",
            [f"{lm.PREFIX}last_loss_{a}", f"{lm.PREFIX}rest_loss_{a}"],
        )
