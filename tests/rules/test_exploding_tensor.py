"""exploding_tensor: fires on a real training with the defect (lr 1e12 blows the weights up to inf/NaN), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("lr_huge"), rules=["exploding_tensor"])
    assert found, "exploding_tensor did not fire on lr_huge"
    assert all(f.rule == "exploding_tensor" for f in found)
    assert any("NaN" in f.message or "inf" in f.message for f in found)
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["exploding_tensor"].default:
        found = [f for f in default_findings(name) if f.rule == "exploding_tensor"]
    else:
        found = mldbg.check(run(name), rules=["exploding_tensor"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["exploding_tensor"].__name__ == "ExplodingTensor"
