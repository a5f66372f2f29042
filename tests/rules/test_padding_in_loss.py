"""padding_in_loss: a tiny word LM whose padded rows keep the pad id in their labels is found
within 5 steps (the pad id is a frequent word, so it must be told by its place at the ends of
the rows); the fixed twin (-100 at the padded positions) is quiet, so is a run whose text
repeats tokens in runs."""

from __future__ import annotations

import pytest

import mldbg
from tests.rules.lm_defects import train_lm

RULE = ["padding_in_loss"]


@pytest.mark.parametrize("loss", ["functional", "hf"])
def test_padding_kept_in_the_labels_is_found_within_five_steps(tmp_path, loss):
    train_lm(tmp_path / "bug", padding="kept", loss=loss, steps=8)
    found = mldbg.check(str(tmp_path / "bug"), rules=RULE)
    assert found and found[0].step <= 5, found
    assert "token 1 pads" in found[0].message, found[0].message
    train_lm(tmp_path / "twin", padding="ignored", loss=loss, steps=8)
    assert mldbg.check(str(tmp_path / "twin"), rules=RULE) == []
    causes = [d.cause for d in mldbg.diagnose(str(tmp_path / "bug"))]
    assert "padding_in_loss" in causes, causes


def test_runs_of_repeated_tokens_are_not_padding(tmp_path):
    train_lm(tmp_path, data="text", steps=20)
    assert mldbg.check(str(tmp_path), rules=RULE) == []


def _set_prediction(path, weighted: bool, steps: int = 8) -> None:
    """DETR's classification term on 12 object queries per image: 1-3 of them matched to a
    box of one of 4 classes (the first queries: the ones whose boxes settled on objects), the
    others to "no object" (id 4), one
    cross-entropy over (N, 5, 12) logits; `weighted`: with DETR's `empty_weight`, 0.1 for
    "no object" (`eos_coef`), as Hugging Face's DETR and YOLOS compute it."""
    import torch

    from mldbg.torch import Hook

    torch.manual_seed(0)
    model = torch.nn.Linear(16, 12 * 5)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    empty_weight = torch.ones(5)
    empty_weight[-1] = 0.1
    with Hook(str(path)) as hook:
        hook.register_module(model)
        for _ in range(steps):
            x = torch.randn(32, 16)
            target = torch.full((32, 12), 4)
            for row in target:
                k = int(torch.randint(1, 4, ()))
                row[:k] = torch.randint(0, 4, (k,))
            logits = model(x).view(32, 12, 5)
            weight = empty_weight if weighted else None
            loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, weight)
            opt.zero_grad()
            loss.backward()
            opt.step()


def test_a_class_the_loss_weighs_down_is_not_padding(tmp_path):
    """A set-prediction loss whose "no object" class fills most queries, the ends of the rows
    included, looks like padding kept in the labels; weighted 0.1 against the classes (DETR's
    `empty_weight`), it is the script's own choice, not padding left in by mistake."""
    _set_prediction(tmp_path / "weighted", weighted=True)
    assert mldbg.check(str(tmp_path / "weighted"), rules=RULE) == []
    _set_prediction(tmp_path / "unweighted", weighted=False)
    found = mldbg.check(str(tmp_path / "unweighted"), rules=RULE)
    assert found and "token 4 pads" in found[0].message, found


def _tag_forms(path, padded_labels: int, steps: int = 8) -> None:
    """Token classification of forms, as a LayoutLM or BERT tagger is fine-tuned: each row
    `[CLS]` words `[SEP]` then padding (input id 0), a label per word, -100 on `[CLS]` and
    `[SEP]`: the fields' words tagged 1-4, and every form ends with a footer of two to four
    words labelled 0, the "O" class ("page 1 of 2"). `padded_labels`: the label of the padded positions
    (-100 as the collators give it, or 0, the tokenizer's pad id, by mistake)."""
    import torch
    from torch import nn

    from mldbg.torch import Hook

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    vocab, tags, length, batch = 40, 5, 24, 16

    class Tagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, 32)
            self.rnn = nn.GRU(32, 32, batch_first=True, bidirectional=True)
            self.head = nn.Linear(64, tags)

        def forward(self, ids):
            return self.head(self.rnn(self.embed(ids))[0])

    model = Tagger()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    with Hook(str(path)) as hook:
        hook.register_module(model)
        for _ in range(steps):
            ids = torch.zeros(batch, length, dtype=torch.long)
            labels = torch.full((batch, length), padded_labels)
            for row in range(batch):
                words = int(torch.randint(6, length - 6, (1,), generator=g))
                footer = int(torch.randint(2, 5, (1,), generator=g))
                ids[row, 0], ids[row, words + footer + 1] = 2, 3  # [CLS], [SEP]
                ids[row, 1 : words + footer + 1] = torch.randint(4, vocab, (words + footer,), generator=g)
                labels[row, 0] = labels[row, words + footer + 1] = -100
                labels[row, 1 : words + 1] = torch.randint(1, tags, (words,), generator=g)
                labels[row, words + 1 : words + footer + 1] = 0  # the footer's words: "O"
            loss = nn.functional.cross_entropy(model(ids).transpose(1, 2), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()


def test_a_tagger_whose_rows_end_in_words_of_one_class_before_the_ignored_padding(tmp_path):
    """The rows' valid targets end in a run of the "O" class (a form's footer), more often
    than "O" ends a run by chance, yet the padding after them is ignored: the run is the
    forms' content, not padding (LayoutLM through the Hugging Face Trainer). Padding kept in
    the labels reaches the end of the row: found."""
    _tag_forms(tmp_path / "healthy", padded_labels=-100)
    assert mldbg.check(str(tmp_path / "healthy"), rules=RULE) == []
    _tag_forms(tmp_path / "kept", padded_labels=0)
    found = mldbg.check(str(tmp_path / "kept"), rules=RULE)
    assert found and "token 0 pads" in found[0].message, found
