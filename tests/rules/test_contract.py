"""Contract over the whole registry: every rule documents itself, its parameters round-trip
through JSON, its needs are known collections, and it runs on a real trial without failing."""

from __future__ import annotations

import importlib
import json
import pkgutil

import pytest

from mldbg.record.collections import DEFAULT_COLLECTIONS
from mldbg.rules import BUILTIN, Rule
from mldbg.rules.base import snake_case
from mldbg.rules.runner import RuleRunner
from mldbg.store.statistics import Statistic

# every rule of a model, data or training: the built-in rules outside the profiler's, from the
# registry (a new rule is one file and its test, with no list here to edit)
MODEL_RULES = sorted(n for n, c in BUILTIN.items() if c.__module__.startswith("mldbg.rules.builtin."))
# XGBoost's and the PyTorch hook's own (nn.Embedding weights; one sample's attention logits),
# and the ones a rule asks the user to save
KNOWN = set(DEFAULT_COLLECTIONS) | {
    "metrics",
    "feature_importance",
    "trees",
    "embeddings",
    "attention_logits",
    "router",  # the PyTorch hook's routers, or what the user saves (docs/rules.md, router_collapse)
}


def test_every_rule_module_registers_its_rule():
    """One file per rule: each module of `mldbg.rules.builtin` registers the rule it is named for,
    and the catalogue's model rules are all there."""
    package = importlib.import_module("mldbg.rules.builtin")
    modules = sorted(info.name for info in pkgutil.iter_modules(package.__path__))
    assert modules == MODEL_RULES
    for name in modules:
        assert BUILTIN[name].__module__ == f"mldbg.rules.builtin.{name}"
    catalogue = {"all_zero", "class_imbalance", "confusion", "dead_relu", "exploding_tensor",
                 "loss_not_decreasing", "overfit", "poor_weight_initialization", "tensor_variance",
                 "unchanged_tensor", "underfitting", "vanishing_gradient", "weight_update_ratio"}  # fmt: skip
    assert catalogue <= set(MODEL_RULES)


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_rule_contract(name):
    cls = BUILTIN[name]
    assert issubclass(cls, Rule)
    assert cls.name == name == snake_case(cls.__name__)
    assert cls.__doc__ and len(cls.__doc__.strip()) > 40
    params = cls.parameters()
    again = json.loads(json.dumps(params))
    rule = cls(None, **again)
    assert json.loads(json.dumps(rule.params())) == again
    if name in MODEL_RULES:
        assert set(rule.needed_collections()) <= KNOWN, rule.needed_collections()
    for collection, keys in rule.needed_statistics().items():  # what the docs and the hook list
        assert collection in KNOWN, collection
        assert all(Statistic.parse(k).key == k for k in keys), keys


@pytest.mark.parametrize("name", MODEL_RULES)
def test_runs_on_a_real_trial_without_errors(name, run):
    params = {"other_trials": run("healthy_relu_sgd")} if name == "similar_across_runs" else {}
    runner = RuleRunner(run("healthy_tanh_sgd"), [BUILTIN[name](None, **params)])
    runner.run_available()
    runner.finish()
    assert not runner.errors


@pytest.mark.parametrize("name", MODEL_RULES)
def test_state_is_declared_in_reset(name, run):
    """A rule makes no attribute while it runs: its state is all declared (and reset) in reset()."""
    params = {"other_trials": run("healthy_relu_sgd")} if name == "similar_across_runs" else {}
    rule = BUILTIN[name](None, **params)
    declared = set(vars(rule))
    for scenario in ("healthy_relu_sgd", "healthy_tanh_sgd", "healthy_sigmoid_adam", "imbalanced"):
        runner = RuleRunner(run(scenario), [rule])
        runner.run_available()
        runner.finish()
        assert not runner.errors
        assert set(vars(rule)) == declared, f"{scenario}: made on first use: {set(vars(rule)) - declared}"


@pytest.mark.parametrize(
    "name", sorted(n for n, c in BUILTIN.items() if c.__module__.startswith("mldbg.rules.builtin"))
)
def test_rule_methods_read_a_trial_view(name):
    """check, finish and poll are typed with what the runner hands them: a TrialView."""
    cls = BUILTIN[name]
    for method in (cls.check, cls.finish, cls.poll):
        assert method.__annotations__["trial"] == "TrialView", (name, method.__qualname__)


def test_string_parameters_are_converted_by_annotation():
    rule = BUILTIN["loss_not_decreasing"](None, num_steps="20", diff_percent="0.5", tensor_regex="a,b")
    assert rule.num_steps == 20 and rule.diff_percent == 0.5 and rule.tensor_regex == ["a", "b"]
