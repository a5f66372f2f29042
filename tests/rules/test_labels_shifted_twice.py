"""labels_shifted_twice: a tiny word LM whose targets are two tokens ahead is found within 5
steps, batch-first and sequence-first, and through a Hugging Face-style model given labels
it shifts again; the fixed twins (shifted once) are quiet."""

from __future__ import annotations

import pytest

import mldbg
from tests.rules.lm_defects import train_lm

RULE = ["labels_shifted_twice"]


@pytest.mark.parametrize(
    "kw", [{}, {"seq_first": True}, {"loss": "hf"}], ids=["batch_first", "seq_first", "hf"]
)
def test_labels_shifted_twice_are_found_within_five_steps(tmp_path, kw):
    train_lm(tmp_path / "bug", shift=2, steps=8, **kw)
    found = mldbg.check(str(tmp_path / "bug"), rules=RULE)
    assert found and found[0].step <= 5, found
    assert "two positions later" in found[0].message
    train_lm(tmp_path / "twin", shift=1, steps=8, **kw)
    assert mldbg.check(str(tmp_path / "twin"), rules=RULE) == []
