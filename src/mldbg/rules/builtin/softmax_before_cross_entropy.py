"""softmax_before_cross_entropy: probabilities are fed to a cross-entropy that wants logits."""

from __future__ import annotations

from mldbg.rules import language_model as lm
from mldbg.rules.base import register


@register
class SoftmaxBeforeCrossEntropy(lm.CountsRule):
    """The cross-entropy is given probabilities instead of logits: a softmax before
    `nn.CrossEntropyLoss` / `F.cross_entropy` (which applies its own log-softmax), or
    probabilities given to `F.nll_loss`, which wants log-probabilities. With a softmax in
    front, the logits the loss sees lie in [0, 1], so the loss can never fall below
    log(1 + (V - 1) / e) for V classes and the gradients shrink; `nll_loss` on probabilities
    is negative and minimized by nothing sensible.

    Reads the `lm/` counts the PyTorch hook records at statistics steps from the loss's
    autograd graph, for any cross-entropy (a classifier's too): a `SoftmaxBackward0` right
    before the log-softmax (only reshapes between), or rows of `nll_loss`'s input that are
    probabilities. Fires when at least `share` of the rows read are probabilities (in [0, 1],
    summing to 1), at `patience` TRAIN statistics steps in a row. A log-softmax applied twice,
    and log(softmax(x)) given to `nll_loss`, are correct and not flagged.
    """

    share: float = 0.99
    cause = "softmax_before_cross_entropy"
    suggestion = (
        "Give the loss raw logits: drop the softmax at the end of the model (nn.CrossEntropyLoss "
        "and F.cross_entropy apply log-softmax themselves), or use F.log_softmax with F.nll_loss; "
        "apply softmax only to read probabilities at inference."
    )

    def judge(self, c: dict[str, float]) -> bool | None:
        total = c.get("prob_total", 0.0)
        if total < 1:
            return None
        return c.get("prob_rows", 0.0) >= self.share * total

    def describe(self, step: int, c: dict[str, float], evidence: bool) -> tuple[str, list[str]]:
        if c.get("prob_softmax", 0.0) == 1:
            what = "a softmax feeds the cross-entropy, which applies its own log-softmax"
        else:
            what = "nll_loss is given probabilities, not log-probabilities"
        return (
            f"{int(c.get('prob_rows', 0))} of {int(c['prob_total'])} rows given to the loss are probabilities "
            f"(in [0, 1], summing to 1), {self._streak} statistics steps in a row: {what}",
            [f"{lm.PREFIX}prob_rows"],
        )
