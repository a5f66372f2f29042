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
