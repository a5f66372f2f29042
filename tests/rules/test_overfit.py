"""overfit: fires on a real training with the defect (16 training samples: the model memorizes them), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("tiny_train_set"), rules=["overfit"])
    assert found, "overfit did not fire on tiny_train_set"
    assert all(f.rule == "overfit" for f in found)
    assert "validation loss" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["overfit"].default:
        found = [f for f in default_findings(name) if f.rule == "overfit"]
    else:
        found = mldbg.check(run(name), rules=["overfit"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["overfit"].__name__ == "Overfit"
