"""padding_in_loss: padding tokens are targets of the loss (no ignore_index on them)."""

from __future__ import annotations

from mldbg.rules import language_model as lm
from mldbg.rules.base import register


@register
class PaddingInLoss(lm.CountsRule):
    """Padding is kept in the labels of a sequence loss: the targets hold a pad token at the
    end of the sequences instead of the loss's `ignore_index` (-100), so a large share of the
    loss (and of the gradient) teaches the model to predict padding after padding.

    Reads the `lm/` counts the PyTorch hook records at statistics steps
    (`mldbg.rules.language_model`): the pad-like id is the one that most often ends a
    sequence's valid targets in a run of two or more, among the rows whose targets reach as far
    as the longest row's (a row whose targets end earlier, before an ignored tail of its own,
    ignores its padding: a tagger's forms ending in "O" words before `[SEP]`). It is padding
    when it ends at least `min_rows` of the sequences that way, and `excess` times more of them than its share f of
    the targets before those runs (a token that is not padding ends a sequence at most as
    often as it occurs: about f of the sequences, f^2 for a run of two, whatever the text,
    runs of repeated characters included), and it makes up at least `threshold` of the valid
    targets; at `patience` TRAIN statistics steps in a row. Padding given `ignore_index` is
    not a target and is not counted. Nor is an id the loss's class `weight=` weighs down to
    below `weighted_down` of the median class (`pad_weight`): the script weighs that class
    itself, as DETR and YOLOS weigh their "no object" class 0.1 for the object queries that
    match no box (most of them, at the end of each image's row).
    """

    threshold: float = 0.1
    min_rows: float = 0.25
    excess: float = 3.0
    weighted_down: float = 0.5
    cause = "padding_in_loss"
    suggestion = (
        "Set the padded positions of the labels to the loss's ignore_index (-100: "
        "labels[attention_mask == 0] = -100, or DataCollatorForLanguageModeling(mlm=False), or "
        "CrossEntropyLoss(ignore_index=pad_id)); with GPT-2-style tokenizers whose pad token is "
        "the EOS token, mask by the attention mask, not by the token id."
    )

    def judge(self, c: dict[str, float]) -> bool | None:
        if "rows" not in c:
            return None
        found = lm.alignment(c)
        if found is not None and found.axis == 0:
            return None  # sequence-first (T, B) targets: rows are not sequences
        rows, valid = c["rows"], c.get("valid", 0.0)
        pad_rows, pad_all, trailing = (
            c.get("pad_rows", 0.0),
            c.get("pad_all", 0.0),
            c.get("pad_trailing", 0.0),
        )
        inside = (pad_all - trailing) / (valid - trailing) if valid > trailing else 0.0  # f
        if c.get("pad_weight", 1.0) < self.weighted_down:
            return False  # a class the loss weighs down on purpose ("no object")
        return (
            rows >= 2
            and valid >= lm.MIN_TARGETS
            and pad_rows >= max(2.0, self.min_rows * rows, self.excess * inside * rows)
            and pad_all >= self.threshold * valid
        )

    def describe(self, step: int, c: dict[str, float], evidence: bool) -> tuple[str, list[str]]:
        rows, valid, pad_rows, pad_all = (
            c["rows"],
            c.get("valid", 0.0),
            c.get("pad_rows", 0.0),
            c.get("pad_all", 0.0),
        )
        loss_share = c.get("pad_loss", 0.0) / c["loss_sum"] if c.get("loss_sum", 0.0) > 0 else float("nan")
        return (
            f"token {int(c.get('pad_id', -1))} pads {int(pad_rows)} of {int(rows)} sequences and is "
            f"{pad_all / valid:.0%} of the targets ({loss_share:.0%} of the loss) at step {step}, "
            f"{self._streak} statistics steps in a row: padding is in the labels, not ignored",
            [f"{lm.PREFIX}pad_all"],
        )
