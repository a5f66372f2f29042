"""poor_weight_initialization: fires on a real training with the defect (all-zero weights: identical neurons, no gradient), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("zero_init"), rules=["poor_weight_initialization"])
    assert found, "poor_weight_initialization did not fire on zero_init"
    assert all(f.rule == "poor_weight_initialization" for f in found)
    assert "identical" in found[0].message or "degenerate" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["poor_weight_initialization"].default:
        found = [f for f in default_findings(name) if f.rule == "poor_weight_initialization"]
    else:
        found = mldbg.check(run(name), rules=["poor_weight_initialization"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["poor_weight_initialization"].__name__ == "PoorWeightInitialization"
