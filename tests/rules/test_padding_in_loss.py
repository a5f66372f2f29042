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
