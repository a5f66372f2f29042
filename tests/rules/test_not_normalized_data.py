"""not_normalized_data: fires on a real training with the defect (inputs x100 + 50), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("unnormalized"), rules=["not_normalized_data"])
    assert found, "not_normalized_data did not fire on unnormalized"
    assert all(f.rule == "not_normalized_data" for f in found)
    assert "model_input_0" in found[0].tensors and "mean" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["not_normalized_data"].default:
        found = [f for f in default_findings(name) if f.rule == "not_normalized_data"]
    else:
        found = mldbg.check(run(name), rules=["not_normalized_data"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["not_normalized_data"].__name__ == "NotNormalizedData"
