"""all_zero: fires on a real training with the defect (zero init: weights, gradients and ReLU outputs all zero), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("zero_init"), rules=["all_zero"])
    assert found, "all_zero did not fire on zero_init"
    assert all(f.rule == "all_zero" for f in found)
    assert found[0].tensors
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["all_zero"].default:
        found = [f for f in default_findings(name) if f.rule == "all_zero"]
    else:
        found = mldbg.check(run(name), rules=["all_zero"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["all_zero"].__name__ == "AllZero"
