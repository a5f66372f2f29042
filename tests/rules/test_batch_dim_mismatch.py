"""batch_dim_mismatch: MSELoss of predictions [N, 1] against targets [N] broadcasts to N x N;
the twin with targets [N, 1] is quiet, and so is cross-entropy's (N, C) against (N,)."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from mldbg.rules.builtin.batch_dim_mismatch import class_pattern
from tests.rules.conftest import HEALTHY, assert_explains
from tests.rules.silent import HEALTHY_SILENT


def test_fires_on_a_broadcasting_loss(silent_run):
    found = mldbg.check(silent_run("broadcast"), rules=["batch_dim_mismatch"])
    assert len(found) == 1
    f = found[0]
    assert f.step == 0, f  # from the first step
    assert "[32, 1]" in f.message and "[32]" in f.message and "[32, 32]" in f.message
    assert f.tensors == ["MSELoss_input_0", "MSELoss_input_1"]
    assert_explains(f)


@pytest.mark.parametrize("name", HEALTHY_SILENT)
def test_quiet_on_the_fixed_twins(name, silent_run):
    assert BUILTIN["batch_dim_mismatch"].default
    found = [f for f in mldbg.check(silent_run(name)) if f.rule == "batch_dim_mismatch"]
    assert not found, "\n".join(map(str, found))


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_the_catalogue_runs(name, run):
    assert not mldbg.check(run(name), rules=["batch_dim_mismatch"])


def test_class_scores_against_class_ids_are_not_a_mismatch():
    assert class_pattern((32, 10), (32,))
    assert class_pattern((8, 10, 5), (8, 5))  # (N, C, T) logits, (N, T) targets
    assert class_pattern((8, 5, 10), (8, 5))  # classes last
    assert not class_pattern((32, 1), (32,))  # one score per sample against (N,): a broadcast
