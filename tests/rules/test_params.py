"""Rule parameters checked for type and range wherever they are given (a `name:k=v` spec, a
YAML/JSON file, Python), with the allowed range in the message; findings carry a severity."""

from __future__ import annotations

from typing import ClassVar

import pytest

import mldbg
from mldbg.errors import InvalidConfig
from mldbg.rules import BUILTIN, Rule
from mldbg.rules.params import PERCENT, Range, parameter_range
from mldbg.rules.profiler import ProfilerRule
from mldbg.rules.specs import load_rule_config, resolve_rules


def test_every_builtin_default_lies_in_its_range():
    checked = 0
    for name, cls in BUILTIN.items():
        for key, default in cls.parameters().items():
            bound = parameter_range(cls, key)
            if bound is not None and isinstance(default, (int, float)) and not isinstance(default, bool):
                assert default in bound, f"{name}.{key}={default!r} outside {bound}"
                checked += 1
    assert checked > 60  # the numeric parameters of the built-ins are covered


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("loss_not_decreasing:num_steps=-5", "num_steps=-5 is out of range: it must be >= 1 (default 10)"),
        ("loss_not_decreasing:num_steps=0", "it must be >= 1"),
        (
            "dead_relu:threshold_layer=101",
            "threshold_layer=101.0 is out of range: it must be between 0 and 100",
        ),
        ("all_zero:threshold=150", "between 0 and 100"),
        ("vanishing_gradient:threshold=-1e-7", "it must be >= 0"),
        ("confusion:min_diag=1.5", "between 0 and 1"),
        ("class_imbalance:threshold_imbalance=0.5", "it must be >= 1"),
        ("step_outlier:n_outliers=-1", "it must be >= 0"),
        ("loss_not_decreasing:num_steps=2.5", "num_steps='2.5' must be an integer"),
        ("loss_not_decreasing:num_steps=ten", "must be an integer"),
        ("dead_relu:threshold_layer=half", "must be a number"),
        ("vanishing_gradient:include_biases=maybe", "must be true or false"),
    ],
)
def test_out_of_range_and_mistyped_specs_are_refused(spec, expected):
    with pytest.raises(InvalidConfig) as e:
        resolve_rules([spec])
    assert expected in str(e.value)


def test_python_parameters_are_checked_too(tmp_path):
    with pytest.raises(InvalidConfig, match="num_steps=-5 is out of range"):
        BUILTIN["loss_not_decreasing"](num_steps=-5)
    with pytest.raises(InvalidConfig, match="must be an integer"):
        BUILTIN["loss_not_decreasing"](num_steps=2.5)
    with pytest.raises(InvalidConfig, match="must be an integer"):
        BUILTIN["loss_not_decreasing"](num_steps=True)
    with pytest.raises(InvalidConfig, match="did you mean 'num_steps'"):
        BUILTIN["loss_not_decreasing"](num_step=5)
    assert BUILTIN["loss_not_decreasing"](num_steps=5.0).num_steps == 5  # an integral float is fine
    assert BUILTIN["dead_relu"](threshold_layer=75).threshold_layer == 75.0
    # profiler rules skip `patience` samples: 0 is allowed there, not in a model rule
    assert BUILTIN["low_gpu_utilization"](patience=0).patience == 0
    with pytest.raises(InvalidConfig, match="patience=0 is out of range"):
        BUILTIN["dead_relu"](patience=0)
    # and through mldbg.check, before any data is read
    from tests.tiny import train

    train(tmp_path / "run", steps=5, eval_every=None)
    with pytest.raises(InvalidConfig, match="out of range"):
        mldbg.check(tmp_path / "run", rules=[{"name": "loss_not_decreasing", "num_steps": -5}])


def test_rule_files_name_unknown_keys(tmp_path):
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rule:\n  - dead_relu\n")
    with pytest.raises(InvalidConfig, match=r"unknown key 'rule': did you mean 'rules'\?"):
        load_rule_config(cfg)
    cfg.write_text("rules: [dead_relu]\nrulez: [x]\n")
    with pytest.raises(InvalidConfig, match=r"unknown key 'rulez' \(did you mean 'rules'\?\)"):
        load_rule_config(cfg)
    cfg.write_text("dead_relus: {patience: 2}\n")
    with pytest.raises(InvalidConfig, match="did you mean 'dead_relu'"):
        load_rule_config(cfg)
    cfg.write_text("rules:\n  - {name: dead_relu, threshold_layr: 60}\n")
    with pytest.raises(InvalidConfig, match="did you mean 'threshold_layer'"):
        resolve_rules(load_rule_config(cfg))
    cfg.write_text("rules:\n  - {name: dead_relu, threshold_layer: 600}\n")
    with pytest.raises(InvalidConfig, match="between 0 and 100"):
        resolve_rules(load_rule_config(cfg))
    cfg.write_text("rules:\n  dead_relu: {threshold_layer: 60}\n  nlp_sequence_ratio: {token_values: 0}\n")
    rules = resolve_rules(load_rule_config(cfg))
    assert rules[0].threshold_layer == 60.0 and rules[1].token_values == "0"  # YAML's 0 for a str
    cfg.write_text("rules: [dead_relu]\nactions: [{type: log, path: x.jsonl}]\n")  # a watch config
    assert load_rule_config(cfg) == ["dead_relu"]


class _Custom(Rule):
    """A custom rule that declares the range of one of its parameters."""

    name = "custom_with_bounds"
    level: float = 50.0
    count: int = 3
    bounds: ClassVar[dict[str, Range]] = {"level": PERCENT}

    def check(self, trial, step):
        return self.finding(trial, step, f"level {self.level}")


def test_custom_rules_declare_ranges_and_default_to_error(tmp_path):
    with pytest.raises(InvalidConfig, match="level=120.0 is out of range: it must be between 0 and 100"):
        _Custom(level=120)
    assert _Custom(count=0).count == 0  # no range declared for `count`: only its type is checked
    with pytest.raises(InvalidConfig, match="count='many' must be an integer"):
        _Custom(count="many")
    assert _Custom(level=10).severity == "error"

    from tests.tiny import train

    train(tmp_path / "run", steps=3, eval_every=None)
    (found, *_) = mldbg.check(tmp_path / "run", rules=[_Custom(level=10)])
    assert found.severity == "error" and found.to_dict()["severity"] == "error"


def test_profiler_rules_are_warnings_and_model_rules_errors():
    for name, cls in BUILTIN.items():
        expected = "warning" if issubclass(cls, ProfilerRule) else "error"
        assert cls.severity == expected, name
    assert BUILTIN["step_outlier"].severity == "warning" and BUILTIN["cpu_bottleneck"].severity == "warning"


def test_a_rule_with_an_unknown_severity_is_refused_when_defined():
    with pytest.raises(TypeError, match="severity 'info' is not one of"):

        class Chatty(Rule):
            """Says things."""

            severity = "info"
