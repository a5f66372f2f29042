"""label_confusion: 30% of the training 7s labelled 1 and 3s labelled 8 (label noise
concentrated on pairs) on a 10-class CNN; the clean twin and a 10-class MLP at ~85% accuracy
(whose errors spread over many pairs) are quiet. Class statistics every step
(`statistics_budget=0`): on a CPU the two-line hook's budget leaves few training steps with
class statistics after the first 20."""

from __future__ import annotations

import mldbg
from tests.rules.conftest import assert_explains, fired
from tests.tiny import train

TEN = {
    "n_classes": 10,
    "optimizer": "adam",
    "n_train": 1024,
    "steps": 150,
    "hook_kwargs": {"statistics_budget": 0},
}


def test_fires_on_label_noise_concentrated_on_pairs(tmp_path):
    run = train(
        tmp_path / "run", default_hook=True, model="cnn", pair_noise={(7, 1): 0.3, (3, 8): 0.3}, **TEN
    )
    found = mldbg.check(run.path, rules=["label_confusion"])
    assert "label_confusion" in fired(found), [str(f) for f in found]
    assert_explains(found[0])
    assert "pair 7 -> 1" in found[0].message or "pair 3 -> 8" in found[0].message, found[0].message


def test_quiet_on_the_clean_twin(tmp_path):
    run = train(tmp_path / "run", default_hook=True, model="cnn", **TEN)
    assert not mldbg.check(run.path, rules=["label_confusion"])


def test_quiet_on_a_10_class_mlp_at_85_percent(tmp_path):
    run = train(tmp_path / "run", default_hook=True, **TEN)
    assert 0.75 <= run.eval_accuracy[-1] <= 0.9, run.eval_accuracy
    assert not mldbg.check(run.path, rules=["label_confusion"])
