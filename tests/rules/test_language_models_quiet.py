"""Healthy tiny language models (tests/rules/language_models.py) against the rules that
misread them: `class_imbalance` took a Zipf vocabulary counted over 512 flattened targets
for an imbalanced label set (56 to 1 at step 3), `duplicate_batches` took rows of random
windows of a short corpus that recur by chance for samples served twice."""

from __future__ import annotations

import pytest

import mldbg
from tests.rules.language_models import train_lm

RULES = ["class_imbalance", "duplicate_batches", "gradient_norm_spike", "gradient_not_reset"]
EVERY_STEP = {"statistics_budget": 0}


@pytest.mark.parametrize(
    "kwargs",
    [
        {},  # an LSTM, BPTT windows, flattened targets over a 64-token vocabulary
        {"kind": "transformer"},
        {"kind": "transformer", "flat": False},
        {"windows": "overlap"},
        # nanoGPT's random windows of a corpus of 640 tokens: rows recur by chance
        {"windows": "random", "batch": 4, "corpus_windows": 10, "steps": 150},
    ],
)  # fmt: skip
def test_quiet_on_healthy_language_models(tmp_path, kwargs):
    losses = train_lm(tmp_path / "run", hook_kwargs=EVERY_STEP, **kwargs)
    assert losses[-1] < losses[0]  # it learns
    found = mldbg.check(str(tmp_path / "run"), rules=RULES)
    assert not found, [str(f) for f in found]


def test_an_imbalanced_classifier_is_still_judged(tmp_path):
    """The token exemption is for labels per position of an integer input: 97% of a 3-class
    classifier's labels in one class still fires (tests/defects.py)."""
    from tests.tiny import train

    run = train(tmp_path / "run", imbalance=0.97, steps=30, eval_every=None)
    assert [f.rule for f in mldbg.check(run.path, rules=["class_imbalance"])] == ["class_imbalance"]
