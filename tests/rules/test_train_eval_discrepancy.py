"""train_eval_discrepancy: BatchNorm whose running statistics never follow the data
(momentum 0) on inputs of scale 100: in EVAL the activations are ~50x larger than in TRAIN.
The twin (default momentum, same inputs) is quiet."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains
from tests.rules.silent import HEALTHY_SILENT


def test_fires_on_broken_batchnorm_statistics(silent_run):
    found = mldbg.check(silent_run("bn_momentum_zero"), rules=["train_eval_discrepancy"])
    assert found
    f = found[0]
    assert f.step == 11 and f.mode == "EVAL", f  # the second forward of the first evaluation
    assert "relu1_input_0" in f.tensors and "x" in f.message
    assert_explains(f)


@pytest.mark.parametrize("name", HEALTHY_SILENT)
def test_quiet_on_the_fixed_twins(name, silent_run):
    assert BUILTIN["train_eval_discrepancy"].default
    found = [f for f in mldbg.check(silent_run(name)) if f.rule == "train_eval_discrepancy"]
    assert not found, "\n".join(map(str, found))


@pytest.mark.parametrize("name", ["healthy_cnn_sgd", "healthy_relu_sgd"])
def test_quiet_on_raw_recordings_with_batchnorm(name, run):
    """The catalogue's runs (raw tensors every step): a CNN with BatchNorm, an MLP."""
    assert name in HEALTHY
    assert not mldbg.check(run(name), rules=["train_eval_discrepancy"])
