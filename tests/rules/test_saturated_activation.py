"""saturated_activation: fires on a real training with the defect (the combined rule on a saturated tanh net), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("tanh_huge_init"), rules=["saturated_activation"])
    assert found, "saturated_activation did not fire on tanh_huge_init"
    assert all(f.rule == "saturated_activation" for f in found)
    assert "tanh" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["saturated_activation"].default:
        found = [f for f in default_findings(name) if f.rule == "saturated_activation"]
    else:
        found = mldbg.check(run(name), rules=["saturated_activation"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["saturated_activation"].__name__ == "SaturatedActivation"
