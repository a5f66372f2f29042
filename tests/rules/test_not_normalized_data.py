"""not_normalized_data: fires on a real training with the defect (inputs x100 + 50), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains
from tests.tiny import train


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


@pytest.mark.parametrize(
    ("scale", "shift", "fires"),
    [(0.15, 0.3, False), (0.001, 0.0, True)],
    ids=["[0, 1]-like inputs (ToTensor images)", "inputs divided by 255 twice"],
)
def test_small_spread(tmp_path, scale, shift, fires):
    """Inputs with a typical std near 0.15 around 0.3 train fine; a std of 0.001 does not."""
    train(tmp_path, input_scale=scale, input_shift=shift, steps=40, default_hook=True)
    found = mldbg.check(str(tmp_path), rules=["not_normalized_data"])
    assert bool(found) == fires, "\n".join(map(str, found))
    if fires:
        assert "typical feature has std" in found[0].message


def test_class_name():
    assert BUILTIN["not_normalized_data"].__name__ == "NotNormalizedData"
