"""logit_growth: an optimizer that maximizes the loss (`maximize=True`) drives the output
logits up by orders of magnitude; the healthy twin's logits settle."""

from __future__ import annotations

import mldbg
from tests.rules.conftest import assert_explains, fired
from tests.tiny import train


def test_fires_when_logits_grow_without_bound(tmp_path):
    run = train(tmp_path / "run", default_hook=True, optimizer="adam", steps=60, eval_every=None, maximize=True,
                hook_kwargs={"statistics_budget": 0})  # fmt: skip
    found = mldbg.check(run.path, rules=["logit_growth"])
    assert "logit_growth" in fired(found), [str(f) for f in found]
    assert fired(found)["logit_growth"] <= 50
    assert_explains(found[0])
    assert found[0].tensors == ["model_output_0"]


def test_fires_on_a_cnn_within_the_first_statistics(tmp_path):
    run = train(tmp_path / "run", default_hook=True, model="cnn", steps=30, eval_every=None, maximize=True)
    assert fired(mldbg.check(run.path, rules=["logit_growth"])).get("logit_growth", 99) <= 21


def test_quiet_on_healthy_classifiers(tmp_path):
    for i, kwargs in enumerate([{"optimizer": "adam", "steps": 200}, {"model": "cnn", "optimizer": "adam"}]):
        run = train(tmp_path / f"run{i}", default_hook=True, eval_every=None,
                    hook_kwargs={"statistics_budget": 0}, **{"steps": 60, **kwargs})  # fmt: skip
        assert not mldbg.check(run.path, rules=["logit_growth"]), kwargs


def test_quiet_on_a_regression_output_growing_to_its_targets(tmp_path):
    """A regression output grows to its targets' scale: not logits."""
    run = train(tmp_path / "run", default_hook=True, task="regression", lr=0.02, steps=60, eval_every=None,
                hook_kwargs={"statistics_budget": 0})  # fmt: skip
    assert not mldbg.check(run.path, rules=["logit_growth"])
