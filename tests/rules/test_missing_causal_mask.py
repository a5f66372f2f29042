"""missing_causal_mask: a next-token LM that sees its targets (a bidirectional GRU; a
transformer layer without its causal mask) is found once it has learnt to read the next
token, at the statistics steps the default hook keeps (every step for the first 20, then
spaced); the fixed twins (a GRU; the same layer with the mask) are quiet over as long."""

from __future__ import annotations

import pytest

import mldbg
from tests.rules.lm_defects import train_lm

RULE = ["missing_causal_mask"]
STEPS = 330  # statistics at steps 0-20, then every ~100th: the leak shows by step ~220


@pytest.mark.parametrize("kind", ["gru", "transformer"])
def test_a_language_model_that_sees_the_future_is_found(tmp_path, kind):
    losses = train_lm(tmp_path / "bug", kind=kind, causal=False, steps=STEPS, lr=1e-2)
    found = mldbg.check(str(tmp_path / "bug"), rules=RULE)
    assert found, losses[-5:]
    assert "last position" in found[0].message
    causes = [d.cause for d in mldbg.diagnose(str(tmp_path / "bug"))]
    assert "missing_causal_mask" in causes, causes
    train_lm(tmp_path / "twin", kind=kind, causal=True, steps=STEPS, lr=1e-2)
    assert mldbg.check(str(tmp_path / "twin"), rules=RULE) == []


def test_labels_cut_inside_the_window_are_not_judged(tmp_path):
    """A Hugging Face-style model cuts the labels inside the window: every valid target is
    visible, no position is left to compare with, and the rule says nothing."""
    train_lm(tmp_path, loss="hf", causal=False, steps=40, lr=1e-2)
    assert mldbg.check(str(tmp_path), rules=RULE) == []
