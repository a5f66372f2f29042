"""weight_update_ratio: fires on a real training with the defect (lr 1e-10: updates ~1e-11 of the weights), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("lr_tiny"), rules=["weight_update_ratio"])
    assert found, "weight_update_ratio did not fire on lr_tiny"
    assert all(f.rule == "weight_update_ratio" for f in found)
    assert "tiny" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["weight_update_ratio"].default:
        found = [f for f in default_findings(name) if f.rule == "weight_update_ratio"]
    else:
        found = mldbg.check(run(name), rules=["weight_update_ratio"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["weight_update_ratio"].__name__ == "WeightUpdateRatio"


def test_a_learning_rate_that_rounds_every_update_away_is_still_reported(tmp_path):
    """With the two-line hook the learning rate is recorded, and an update below float32's
    resolution next to its weight is rounding (`rounds_away`: a weight behind a gate at 0,
    test_vanishing_gradient.py), but only while other weights move: a learning rate of 1e-10
    rounds every update away, and that is the bug."""
    from tests.tiny import train

    run = train(tmp_path / "run", lr=1e-10, default_hook=True)
    found = mldbg.check(run.path, rules=["weight_update_ratio", "unchanged_tensor"])
    assert {f.rule for f in found} == {"weight_update_ratio", "unchanged_tensor"}, found
    assert found[0].step <= 10, found
