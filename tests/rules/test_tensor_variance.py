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


def test_a_layers_state_is_not_a_weight_to_judge(tmp_path):
    """A Keras `Normalization` layer adapted on raw features keeps their means and
    variances (up to 1e4, a variance across features near 1e7) as non-trainable state in the
    weights: no gradient, never moved by training, so it cannot diverge (the rule fired on
    it at step 0 before). A trained weight's variance is still judged (test_fires_on_defect)."""
    from tests.rules.test_not_normalized_data import train_keras_normalization

    path = train_keras_normalization(tmp_path / "run", normalize=True)
    trial = mldbg.create_trial(path)
    assert float(trial.tensor("normalization/variance").value(0).var()) > 1e6  # the case judged before
    found = mldbg.check(path, rules=["tensor_variance"])
    assert not found, "\n".join(map(str, found))
