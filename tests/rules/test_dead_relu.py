"""dead_relu: fires on a real training with the defect (biases initialized at -10 silence every ReLU unit), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("negative_bias"), rules=["dead_relu"])
    assert found, "dead_relu did not fire on negative_bias"
    assert all(f.rule == "dead_relu" for f in found)
    assert "relu1" in found[0].message and "100%" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["dead_relu"].default:
        found = [f for f in default_findings(name) if f.rule == "dead_relu"]
    else:
        found = mldbg.check(run(name), rules=["dead_relu"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["dead_relu"].__name__ == "DeadRelu"
