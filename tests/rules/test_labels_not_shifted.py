"""labels_not_shifted: a tiny word LM trained on its own inputs as targets (the labels not
shifted) is found within 5 steps, through a functional loss, a registered module loss, a
model that returns its loss, and a functional loss plus an auxiliary term the model returns; its fixed twin (labels shifted by one) is quiet."""

from __future__ import annotations

import pytest

import mldbg
from tests.rules.lm_defects import train_lm

RULE = ["labels_not_shifted"]


@pytest.mark.parametrize("loss", ["functional", "module", "returned", "aux"])
def test_unshifted_labels_are_found_within_five_steps(tmp_path, loss):
    train_lm(tmp_path / "bug", shift=0, loss=loss, steps=8)
    found = mldbg.check(str(tmp_path / "bug"), rules=RULE)
    assert found and found[0].step <= 5, found
    assert "copy" in found[0].message and "offset 0: 100%" in found[0].message, found[0].message
    train_lm(tmp_path / "twin", shift=1, loss=loss, steps=8)
    assert mldbg.check(str(tmp_path / "twin"), rules=RULE) == []


def test_the_diagnosis_is_the_label_shift(tmp_path):
    train_lm(tmp_path, shift=0, steps=8)
    causes = [d.cause for d in mldbg.diagnose(str(tmp_path))]
    assert "lm_labels_misaligned" in causes, causes


def test_sequence_first_batches_are_found(tmp_path):
    """PyTorch's word_language_model layout: (T, B) batches."""
    train_lm(tmp_path, shift=0, seq_first=True, steps=8)
    found = mldbg.check(str(tmp_path), rules=RULE)
    assert found and found[0].step <= 5, found
