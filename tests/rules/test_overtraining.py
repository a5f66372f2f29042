"""overtraining: fires on a real training with the defect (random labels: training goes on, validation gets worse), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("random_labels"), rules=["overtraining"])
    assert found, "overtraining did not fire on random_labels"
    assert all(f.rule == "overtraining" for f in found)
    assert "best point to stop" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["overtraining"].default:
        found = [f for f in default_findings(name) if f.rule == "overtraining"]
    else:
        found = mldbg.check(run(name), rules=["overtraining"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["overtraining"].__name__ == "Overtraining"
