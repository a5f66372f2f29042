"""The rule engine: specs, the default set, skipped rules, smdebug-style rules, live runs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import mldbg
import mldbg.torch
from mldbg.errors import InvalidConfig
from mldbg.rules import BUILTIN, Finding, Rule, invoke_rule
from mldbg.rules.runner import RuleRunner
from mldbg.rules.specs import load_rule_config, parse_rule_spec, resolve_rules
from tests.tiny import train
from tests.waiting import wait_until


def test_parse_rule_spec_keeps_commas_in_values():
    name, params = parse_rule_spec("nlp_sequence_ratio:token_values=0,1,token_thresholds_percent=50,60")
    assert name == "nlp_sequence_ratio"
    assert params == {"token_values": "0,1", "token_thresholds_percent": "50,60"}


def test_resolve_rules_accepts_names_specs_classes_instances_and_mappings():
    rules = resolve_rules(
        ["dead_relu", "DeadRelu", "loss_not_decreasing:num_steps=20", BUILTIN["all_zero"],
         BUILTIN["overfit"](None, patience=3), {"name": "overtraining", "delta": 0.05}]
    )  # fmt: skip
    assert [r.name for r in rules] == [
        "dead_relu",
        "dead_relu",
        "loss_not_decreasing",
        "all_zero",
        "overfit",
        "overtraining",
    ]
    assert rules[2].num_steps == 20 and rules[4].patience == 3 and rules[5].delta == 0.05


def test_default_set_excludes_rules_that_need_another_run_or_a_clock():
    names = {r.name for r in resolve_rules(None)}
    assert "dead_relu" in names and "loss_not_decreasing" in names
    assert not {"similar_across_runs", "stalled_training"} & names


def test_unknown_rule_and_parameter_are_clear_errors():
    with pytest.raises(InvalidConfig, match="did you mean dead_relu"):
        resolve_rules(["dead_relus"])
    with pytest.raises(InvalidConfig, match="unknown parameter"):
        resolve_rules(["dead_relu:bogus=1"])


def test_rule_config_from_yaml(tmp_path):
    cfg = tmp_path / "rules.yaml"
    cfg.write_text(
        "rules:\n  - dead_relu\n  - name: loss_not_decreasing\n    num_steps: 20\n  - overfit: {patience: 4}\n"
    )
    rules = resolve_rules(load_rule_config(cfg))
    assert [r.name for r in rules] == ["dead_relu", "loss_not_decreasing", "overfit"]
    assert rules[1].num_steps == 20 and rules[2].patience == 4


def test_rule_without_its_data_is_skipped_once_with_a_note(tmp_path):
    path = tmp_path / "run"
    train(path, steps=20, include_collections=None)  # losses, weights, biases, gradients only
    runner = RuleRunner(str(path), ["dead_relu", "vanishing_gradient"])
    assert runner.run_available() + runner.finish() == []
    assert "relu_activations" in runner.skipped["dead_relu"]
    assert "vanishing_gradient" not in runner.skipped


def test_smdebug_style_rule_runs(run):
    trial = mldbg.create_trial(run("negative_bias"))

    class AllDead:  # smdebug style: __init__(base_trial, ...), invoke_at_step(step) -> bool
        def __init__(self, base_trial, layer="relu1_output_0"):
            self.base_trial = base_trial
            self.layer = layer

        def invoke_at_step(self, step):
            t = self.base_trial.tensor(self.layer)
            return bool((t.value(step) <= 0).all())

    findings = invoke_rule(AllDead(trial), end_step=5)
    assert [f.rule for f in findings] == ["all_dead"] * 5  # steps 0..4, each a finding


def test_custom_rule_subclass_with_invoke_at_step(run):
    trial = mldbg.create_trial(run("healthy_relu_sgd"))

    class LossAbove(Rule):
        """The loss is above `limit`."""

        limit: float = 0.5

        def __init__(self, base_trial, limit=0.5):
            super().__init__(base_trial, limit=limit)

        def invoke_at_step(self, step):
            names = self.base_trial.tensor_names(collection="losses", step=step)
            return any(self.base_trial.tensor(n).value(step) > self.limit for n in names)

    found = invoke_rule(LossAbove(trial, limit=0.9), start_step=0, end_step=3)
    assert found and isinstance(found[0], Finding) and found[0].rule == "loss_above"


def test_rule_objects_check_run_after_run_as_fresh_ones(run):
    """The runner resets a rule's state before a run: the same objects, over a run with a defect,
    its healthy twin and the defect again (then other defects), find what fresh objects find."""
    reused = resolve_rules(None) + resolve_rules(["confusion", "overtraining", "saturated_activation"])
    for name in ("negative_bias", "healthy_relu_sgd", "negative_bias", "tanh_huge_init", "imbalanced"):
        fresh = [type(rule)(None, **rule.params()) for rule in reused]
        expected = [f.to_dict() for f in mldbg.check(run(name), rules=fresh)]
        assert [f.to_dict() for f in mldbg.check(run(name), rules=reused)] == expected, name
        assert bool(expected) != name.startswith("healthy"), name


def test_invoke_rule_twice_finds_the_same(run):
    trial = mldbg.create_trial(run("negative_bias"))
    rule = BUILTIN["dead_relu"](trial)
    first = invoke_rule(rule)
    assert first and invoke_rule(rule) == first


def test_live_run_is_checked_as_it_grows(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with torch.no_grad():
        model[0].bias.fill_(-10.0)  # dead ReLUs from the start
    hook = mldbg.torch.Hook(tmp_path / "live", save_config=mldbg.SaveConfig(save_interval=1),
                            include_collections=["relu_activations", "losses"])  # fmt: skip
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    trial = mldbg.create_trial(tmp_path / "live")
    runner = RuleRunner(trial, ["dead_relu", "stalled_training:threshold=0.2"])
    found: list[Finding] = []
    for _ in range(8):
        opt.zero_grad()
        loss_fn(model(torch.randn(16, 4)), torch.randint(0, 2, (16,))).backward()
        opt.step()
        hook.recorder.flush()
        trial.refresh()
        found += runner.run_available()
    assert [f.rule for f in found] == ["dead_relu"]  # found while training
    stalled: list[Finding] = []

    def stalled_found() -> list[Finding]:
        trial.refresh()
        stalled.extend(runner.run_available())
        return stalled

    wait_until(stalled_found, 30, "stalled_training to fire on the paused run")  # no step for > 0.2 s
    assert [f.rule for f in stalled] == ["stalled_training"]
    hook.close()
    assert runner.finish() == []


def test_a_pass_reads_the_run_as_it_was_at_its_start(tmp_path):
    """A rule that asks for a tensor not recorded while the training writes more steps: the
    pass does not read the new steps on its misses (each such read dropped the caches the pass
    reads through: on a run written faster than the rules check it, a pass never ended), and
    the next pass checks them."""
    import numpy as np

    from mldbg.record.recorder import Recorder

    rec = Recorder(tmp_path, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"])

    def write(steps):
        for step in steps:
            rec.start_step(mldbg.Mode.TRAIN)
            rec.save("w", np.full(4, step, dtype=np.float32), rec.plan("w", ("weights",)))
            rec.end_step()
        rec.flush()

    class AsksForMore(Rule):
        """Asks for a tensor never recorded at every step, while the training writes on."""

        needs = ("weights",)

        def reset(self):
            super().reset()
            self.checked: list[int] = []
            self.loaded: list[int] = []  # the steps the trial held at each check

        def check(self, trial, step):
            self.checked.append(step)
            write([self.written.pop()] if self.written else [])
            assert not trial.has_tensor("never_recorded")
            with pytest.raises(mldbg.errors.TensorUnavailable):
                trial.raw("never_recorded", step)
            self.loaded.append(len(self.trial.steps()))
            return None

    try:
        write(range(5))
        trial = mldbg.create_trial(tmp_path)
        rule = AsksForMore(trial)
        runner = RuleRunner(trial, [rule])
        rule.written = list(range(10, 4, -1))  # steps 5..10, one written at each check
        runner.run_available()
        assert rule.checked == [0, 1, 2, 3]  # the newest (4) may still be written
        assert rule.loaded == [5, 5, 5, 5]  # the misses read nothing new
        trial.refresh()
        runner.run_available()
        assert rule.checked[:6] == [0, 1, 2, 3, 4, 5]
    finally:
        rec.close()
