"""vanishing_gradient: fires on a real training with the defect (8 sigmoid layers: the first layers' gradients fall below 1e-7), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("deep_sigmoid"), rules=["vanishing_gradient"])
    assert found, "vanishing_gradient did not fire on deep_sigmoid"
    assert all(f.rule == "vanishing_gradient" for f in found)
    assert "gradient/fc1.weight" in found[0].tensors and "gradient/out.weight" not in found[0].tensors
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["vanishing_gradient"].default:
        found = [f for f in default_findings(name) if f.rule == "vanishing_gradient"]
    else:
        found = mldbg.check(run(name), rules=["vanishing_gradient"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["vanishing_gradient"].__name__ == "VanishingGradient"
