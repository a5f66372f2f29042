"""unchanged_tensor: fires on a real training with the defect (learning rate 0: the optimizer never moves the weights), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("frozen_optimizer"), rules=["unchanged_tensor"])
    assert found, "unchanged_tensor did not fire on frozen_optimizer"
    assert all(f.rule == "unchanged_tensor" for f in found)
    assert "fc1.weight" in found[0].tensors
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["unchanged_tensor"].default:
        found = [f for f in default_findings(name) if f.rule == "unchanged_tensor"]
    else:
        found = mldbg.check(run(name), rules=["unchanged_tensor"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["unchanged_tensor"].__name__ == "UnchangedTensor"
