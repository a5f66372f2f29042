"""train_eval_discrepancy: BatchNorm whose running statistics never follow the data
(momentum 0) on inputs of scale 100: in EVAL the activations are ~50x larger than in TRAIN.
The twin (default momentum, same inputs) is quiet, and so is a BatchNorm whose running
statistics still lag behind activations of small variance at the first evaluations."""

from __future__ import annotations

import numpy as np
import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains
from tests.rules.silent import HEALTHY_SILENT, train_silent


def test_fires_on_broken_batchnorm_statistics(silent_run):
    found = mldbg.check(silent_run("bn_momentum_zero"), rules=["train_eval_discrepancy"])
    assert found
    f = found[0]
    # the first forward of the second evaluation pass (every 10 training steps, 2 batches each):
    # one pass's batches share one set of running statistics, a second pass confirms them stuck
    assert f.step == 22 and f.mode == "EVAL", f
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


def test_running_statistics_that_lag_and_converge_are_not_a_discrepancy(tmp_path):
    """Inputs of scale 0.01: BatchNorm's running variance starts at 1 against a batch variance
    of ~1e-4 and follows it at PyTorch's momentum 0.1 (a time constant of 10 steps; Keras'
    and Flax's 0.99: 100), so an early evaluation pass sees activations >10x smaller than
    training; the next ones less so (a lag catching up): quiet."""
    train_silent(tmp_path / "run", input_scale=0.01, steps=60)
    trial = mldbg.create_trial(str(tmp_path / "run"))
    name = "relu1_input_0"
    cols = trial.statistic_columns(name)
    steps = trial.tensor(name).steps()
    rms = dict(zip(steps, np.sqrt(np.maximum(cols["variance"], 0.0) + cols["mean"] ** 2), strict=True))
    off = [
        s
        for s in steps
        if trial.mode(s).name == "EVAL"
        and rms[s] * 10 < rms[max(t for t in steps if t < s and trial.mode(t).name == "TRAIN")]
    ]
    assert off  # an evaluation step more than 10x off the training step before it
    assert not mldbg.check(str(tmp_path / "run"), rules=["train_eval_discrepancy"])
