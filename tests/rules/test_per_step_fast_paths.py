"""The fast paths of the rules that used to be called at every step (they declare no
collection): the language-model rules (`language_model.CountsRule.check_columns`) and
`parameter_without_gradient` give the same findings, skipped and undecided rules through the
columns as through the per-step reference (`columns=False`), on real tiny trainings recorded
with the two lines (statistics every step to 19, then on the budget: steps without counts
after them). And `present_rows`, the steps a tensor has a record at, is `Over(...).present`."""

from __future__ import annotations

import numpy as np
import pytest

import mldbg
from mldbg.rules.columns import Over, present_rows
from mldbg.rules.runner import RuleRunner
from mldbg.rules.view import TrialView
from tests.rules.lm_defects import train_lm
from tests.rules.test_parameter_without_gradient import train_detached
from tests.rules.test_parameter_without_gradient import train_lm as train_checkpointed

LM_RULES = [
    "labels_not_shifted",
    "labels_shifted_twice",
    "padding_in_loss",
    "softmax_before_cross_entropy",
    "missing_causal_mask",
]


def outcome(path, rules, columns: bool) -> tuple:
    runner = RuleRunner(mldbg.create_trial(path), rules, columns=columns)
    findings = runner.run_available() + runner.finish()
    return [f.to_dict() for f in findings], runner.skipped, runner.unchecked, runner.errors


@pytest.mark.parametrize(
    "kwargs",
    [{"shift": 0}, {"shift": 2}, {"softmax": True}, {"padding": "kept"}, {}],
    ids=["not_shifted", "shifted_twice", "softmax", "padding", "healthy"],
)
def test_language_model_rules_the_same_on_both_paths(tmp_path, kwargs):
    train_lm(tmp_path / "run", steps=26, **kwargs)
    reference = outcome(tmp_path / "run", LM_RULES, columns=False)
    assert outcome(tmp_path / "run", LM_RULES, columns=True) == reference
    assert not reference[3]
    assert bool(reference[0]) == bool(kwargs), reference[0]


@pytest.mark.parametrize("which", ["checkpoint", "detached", "healthy"])
def test_parameter_without_gradient_the_same_on_both_paths(tmp_path, which):
    path = tmp_path / "run"
    if which == "checkpoint":
        train_checkpointed(path, reentrant=True, frozen_embeddings=True, steps=24)
    else:
        train_detached(path, cut=which == "detached", steps=24)
    rules = ["parameter_without_gradient"]
    reference = outcome(path, rules, columns=False)
    assert outcome(path, rules, columns=True) == reference
    assert not reference[3]
    assert bool(reference[0]) == (which != "healthy"), reference[0]


def test_present_rows_are_the_steps_with_a_record(tmp_path):
    train_detached(tmp_path / "run", cut=False, steps=30)
    trial = mldbg.create_trial(tmp_path / "run")
    view = TrialView(trial)
    every = np.asarray(trial.steps(), dtype=np.int64)
    checked = 0
    for steps in (every, every[::3], every[5:9], every[:0]):
        for name in trial.tensor_names():
            want = np.flatnonzero(Over(view, name, steps).present)
            assert np.array_equal(present_rows(view, name, steps), want), (name, steps)
            checked += len(want)
    assert np.array_equal(present_rows(view, "no such tensor", every), np.zeros(0, dtype=np.int64))
    assert checked > 100
