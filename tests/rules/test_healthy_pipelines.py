"""The default rule set raises nothing on small healthy pipelines of today's training
(language models with token targets, PyTorch's default LSTM init, a siamese net, a VAE,
L-BFGS), recorded with the two-line hook. A GAN (two models on one hook) is tested with the
hook that accepts several models."""

from __future__ import annotations

import pytest

import mldbg
from tests.rules.healthy_pipelines import PIPELINES


@pytest.mark.parametrize("name", list(PIPELINES))
def test_default_set_raises_nothing(tmp_path, name):
    path = PIPELINES[name](tmp_path / "run")
    errors = [f for f in mldbg.check(path) if getattr(f, "severity", "error") == "error"]
    assert not errors, f"{name}: " + "\n".join(map(str, errors))


def test_token_targets_are_left_out_by_vocabulary_size(tmp_path):
    """The quiet above is class_imbalance judging token targets and leaving them out, not a
    run without labels: with the guards off (the vocabulary size, and the targets one per
    position of the integer input), Zipf frequencies are far beyond 10:1 (significantly so
    over 4096 tokens: 512 are too few for the 200 classes' smallest count to bound it)."""
    from mldbg.rules.builtin.class_imbalance import ClassImbalance

    class Unguarded(ClassImbalance):
        """class_imbalance judging every label set as classes."""

        def _tokens(self, *args: object) -> bool:
            return False

    path = PIPELINES["lstm_language_model"](tmp_path / "run")
    assert not mldbg.check(path, rules=["class_imbalance"])
    # unguarded, it counts the tokens as classes: significantly beyond 10:1 (it reports only
    # with a model that ignores the rare ones, which this LM's predictions decide)
    rule = Unguarded(max_classes=10**6, samples=4096)
    mldbg.check(path, rules=[rule])
    counts = sorted(rule._counts.values())
    assert rule.ratio_bound(counts[-1], counts[0], len(counts)) > rule.threshold_imbalance


def test_token_targets_are_left_out_as_sequences(tmp_path):
    """50 tokens (under max_classes), but (batch, length) targets of (batch, vocab, length)
    logits: a sequence of words."""
    path = PIPELINES["transformer_small_vocabulary"](tmp_path / "run")
    trial = mldbg.create_trial(path)
    (labels,) = trial.tensor_names(collection="labels")
    assert len(trial.records(labels)[0].shape) == 2
    assert not mldbg.check(path, rules=["class_imbalance"])
