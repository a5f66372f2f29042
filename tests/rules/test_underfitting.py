"""underfitting: fires on a real training with the defect (lr 1e-10: the loss stays high and flat), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("lr_tiny"), rules=["underfitting"])
    assert found, "underfitting did not fire on lr_tiny"
    assert all(f.rule == "underfitting" for f in found)
    assert "still" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["underfitting"].default:
        found = [f for f in default_findings(name) if f.rule == "underfitting"]
    else:
        found = mldbg.check(run(name), rules=["underfitting"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["underfitting"].__name__ == "Underfitting"


def test_batch1_slow_start_is_not_underfitting_live_and_shuffled_twin_is(tmp_path):
    """The live screen of `loss_not_decreasing` (a pace not shown below a material share is
    not a stall) holds here too: quiet on a batch-1 loop that learns slowly, then fast; its
    twin with shuffled labels is caught mid-run."""
    from tests.rules.test_loss_not_decreasing import batch1_slow_start

    assert not mldbg.check(batch1_slow_start(tmp_path / "healthy")[0], rules=["underfitting"])
    found = mldbg.check(
        batch1_slow_start(tmp_path / "shuffled", shuffle_labels=True)[0], rules=["underfitting"]
    )
    assert found and found[0].step < 2999 and "still" in found[0].message
