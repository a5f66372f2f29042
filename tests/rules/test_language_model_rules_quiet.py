"""The language-model rules stay quiet on healthy tiny LMs of every shape the hook sees:
a GRU and a causal transformer layer, Zipf words and text with runs of repeated tokens,
padding given ignore_index, label smoothing, a registered module loss over (B, V, T)
logits, a model returning its loss, a Hugging Face-style model shifting its labels (padded
or not), sequence-first batches; and on a classifier."""

from __future__ import annotations

import pytest

import mldbg
from tests.rules.lm_defects import train_lm

RULES = [
    "labels_not_shifted",
    "labels_shifted_twice",
    "missing_causal_mask",
    "padding_in_loss",
    "softmax_before_cross_entropy",
]
HEALTHY = {
    "gru": {},
    "transformer": {"kind": "transformer"},
    "text": {"data": "text"},
    "text_transformer": {"data": "text", "kind": "transformer", "padding": "ignored"},
    "padding_ignored": {"padding": "ignored"},
    "label_smoothing": {"label_smoothing": 0.1},
    "module_loss": {"loss": "module"},
    "returned_loss": {"loss": "returned"},
    "hf": {"loss": "hf"},
    "hf_padding_ignored": {"loss": "hf", "padding": "ignored"},
    "seq_first": {"seq_first": True},
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_language_models_are_quiet(tmp_path, name):
    train_lm(tmp_path, steps=25, **HEALTHY[name])
    trial = mldbg.create_trial(str(tmp_path))
    assert any(n.startswith("lm/") for n in trial.tensor_names())  # the statistics were recorded
    assert mldbg.check(str(tmp_path), rules=RULES) == []


def test_a_classifier_is_quiet(run):
    for name in ("healthy_relu_sgd", "healthy_cnn_adam"):
        assert mldbg.check(run(name), rules=RULES) == []
