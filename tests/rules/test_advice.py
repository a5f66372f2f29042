"""Advice that fits the evidence: a diverging run is not told to raise the learning rate, a
net whose ReLUs died is not told to use ReLUs, a missing zero_grad() is named."""

from __future__ import annotations

import mldbg
from tests.tiny import train

DIVERGING = {"n_classes": 10, "lr": 1.0, "momentum": 0.9, "steps": 100}  # loss 2.1 -> 2.3, rising


def _by_rule(path: str) -> dict[str, list[mldbg.Finding]]:
    out: dict[str, list[mldbg.Finding]] = {}
    for f in mldbg.check(path):
        out.setdefault(f.rule, []).append(f)
    return out


def test_a_diverging_run_is_told_to_lower_the_learning_rate(tmp_path):
    run = train(tmp_path / "run", default_hook=True, **DIVERGING)
    found = _by_rule(run.path)
    (under,) = found["underfitting"]
    assert "diverges" in under.message
    assert "lower the learning rate" in under.suggestion and "raise the learning rate" not in under.suggestion
    for f in found.get("loss_not_decreasing", []):
        assert "raise the learning rate" not in f.suggestion, f


def test_a_stalled_run_is_still_told_to_raise_it(tmp_path):
    run = train(tmp_path / "run", default_hook=True, lr=1e-10, steps=60)
    (under,) = _by_rule(run.path)["underfitting"]
    assert "not fitting" in under.message and "raise the learning rate" in under.suggestion


def test_dead_relus_are_not_told_to_use_relus(tmp_path):
    run = train(tmp_path / "run", default_hook=True, init="negative_bias", steps=30)
    (vanishing,) = _by_rule(run.path)["vanishing_gradient"]
    assert "ReLUs are dead" in vanishing.message
    assert "Use ReLU-family" not in vanishing.suggestion
    assert "learning rate" in vanishing.suggestion and "init" in vanishing.suggestion


def test_deep_sigmoid_is_told_to_use_relus(tmp_path):
    run = train(tmp_path / "run", default_hook=True, activation="sigmoid", depth=8, steps=30)
    (vanishing,) = _by_rule(run.path)["vanishing_gradient"]
    assert "ReLU-family" in vanishing.suggestion


def test_a_missing_zero_grad_is_named(tmp_path):
    run = train(tmp_path / "run", default_hook=True, missing_zero_grad=True, steps=60)
    found = _by_rule(run.path)
    assert "optimizer.zero_grad()" in found["gradient_not_reset"][0].suggestion
