"""tanh_saturation: fires on a real training with the defect (weights drawn with std 10 push tanh inputs far beyond +-9.5), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("tanh_huge_init"), rules=["tanh_saturation"])
    assert found, "tanh_saturation did not fire on tanh_huge_init"
    assert all(f.rule == "tanh_saturation" for f in found)
    assert "tanh" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["tanh_saturation"].default:
        found = [f for f in default_findings(name) if f.rule == "tanh_saturation"]
    else:
        found = mldbg.check(run(name), rules=["tanh_saturation"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["tanh_saturation"].__name__ == "TanhSaturation"
