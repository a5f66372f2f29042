"""confusion: fires on a real training with the defect (classes 0 and 1 swapped in the training labels), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("swapped_classes"), rules=["confusion"])
    assert found, "confusion did not fire on swapped_classes"
    assert all(f.rule == "confusion" for f in found)
    assert "taken for class" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["confusion"].default:
        found = [f for f in default_findings(name) if f.rule == "confusion"]
    else:
        found = mldbg.check(run(name), rules=["confusion"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["confusion"].__name__ == "Confusion"
