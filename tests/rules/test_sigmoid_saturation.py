"""sigmoid_saturation: fires on a real training with the defect (inputs x100 push sigmoid inputs into the flat tails), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("sigmoid_inputs_x100"), rules=["sigmoid_saturation"])
    assert found, "sigmoid_saturation did not fire on sigmoid_inputs_x100"
    assert all(f.rule == "sigmoid_saturation" for f in found)
    assert "sigmoid1" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["sigmoid_saturation"].default:
        found = [f for f in default_findings(name) if f.rule == "sigmoid_saturation"]
    else:
        found = mldbg.check(run(name), rules=["sigmoid_saturation"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["sigmoid_saturation"].__name__ == "SigmoidSaturation"
