"""tensor_variance: fires on a real training with the defect (lr 1e12: weight variance explodes before it overflows), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("lr_huge"), rules=["tensor_variance"])
    assert found, "tensor_variance did not fire on lr_huge"
    assert all(f.rule == "tensor_variance" for f in found)
    assert "variance above" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["tensor_variance"].default:
        found = [f for f in default_findings(name) if f.rule == "tensor_variance"]
    else:
        found = mldbg.check(run(name), rules=["tensor_variance"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["tensor_variance"].__name__ == "TensorVariance"
