"""A hook refuses a wrong option when it is built, naming it, the allowed values and the
closest right name: nothing fails later at the first step, silently, or in the watcher's
child process (a new-user audit of issue 15). The checks live below the adapters (the
Session), so every hook has them."""

from __future__ import annotations

import importlib

import pytest

import mldbg
from mldbg.errors import InvalidConfig

HOOKS = ["mldbg.torch", "mldbg.xgboost", "mldbg.jax"]

WRONG = [
    ({"include_collections": ["weigths"]}, "did you mean 'weights'?"),
    ({"save_config": {"save_intervl": 3}}, "did you mean 'save_interval'?"),
    ({"save_config": 5}, "save_config=5 must be a mldbg.SaveConfig(...)"),
    (
        {"save_config": {"save_interval": "often"}},
        "SaveConfig.save_interval must be a whole number >= 1, got 'often'",
    ),
    ({"reduction_config": {"reductions": ["mena"]}}, "did you mean 'mean'?"),
    ({"collection_configs": [{"name": "mine", "include_regx": "fc"}]}, "did you mean 'include_regex'?"),
    ({"collection_configs": "mine"}, "collection_configs must be a list of mldbg.CollectionConfig"),
    ({"overwrite": "yes"}, "overwrite='yes' must be True or False"),
    ({"resume": 1}, "resume=1 must be True or False"),
    ({"profiler_config": 3}, "profiler_config=3 must be a mldbg.ProfilerConfig(...)"),
    ({"profiler_config": {"system_interval": 100}}, "did you mean 'system_interval_ms'?"),
    # rules and their parameters: checked here, not in the watcher's child (a traceback there)
    ({"rules": ["dead_rellu"]}, "unknown rule 'dead_rellu'; did you mean dead_relu?"),
    ({"rules": "dead_rellu"}, "unknown rule 'dead_rellu'"),
    ({"rules": ["loss_not_decreasing:num_steps=-5"]}, "num_steps=-5 is out of range: it must be >= 1"),
    ({"rules": [{"name": "loss_not_decreasing", "num_steps": "abc"}]}, "num_steps='abc' must be an integer"),
    ({"rules": {"loss_not_decreasing": {"num_step": 3}}}, "did you mean 'num_steps'?"),
    ({"actions": ["stpo"]}, "did you mean 'stop'?"),
]


@pytest.mark.parametrize("module", HOOKS)
def test_wrong_options_are_refused_when_the_hook_is_built(module, tmp_path, capfd):
    hook_cls = importlib.import_module(module).Hook
    for i, (options, message) in enumerate(WRONG):
        with pytest.raises(InvalidConfig) as raised:
            hook_cls(tmp_path / f"run{i}", **options)
        assert message in str(raised.value) and "\n" not in str(raised.value), (options, raised.value)
    assert "Traceback" not in capfd.readouterr().err


def test_right_options_in_every_form_are_taken(tmp_path):
    """A mapping of a config's settings (as a JSON config gives it) is built into the config;
    one rule by name, and {name: params}, run in the watcher."""
    from mldbg.torch import Hook

    with Hook(tmp_path / "a", save_config={"save_interval": 2}, reduction_config={"norms": ["l2"]},
              collection_configs=[{"name": "mine", "include_regex": "fc"}]) as hook:  # fmt: skip
        assert hook.recorder.save_config == mldbg.SaveConfig(save_interval=2)
        assert hook.recorder.reduction_config == mldbg.ReductionConfig(norms=("l2",))
    for rules in ("dead_relu", {"loss_not_decreasing": {"num_steps": 3}}):
        with Hook(tmp_path / str(len(str(rules))), rules=rules) as hook:
            assert hook.session.watcher is not None


def test_modes_and_reductions_are_named_with_the_closest_everywhere(tmp_path):
    with pytest.raises(InvalidConfig, match="unknown mode 'evl'.*did you mean 'EVAL'"):
        mldbg.Mode.parse("evl")
    with pytest.raises(InvalidConfig, match="did you mean 'mean'"):
        mldbg.ReductionConfig(abs_reductions=["maen"])
    with pytest.raises(InvalidConfig, match="SaveConfig.end_step must be a whole number >= 0, got -1"):
        mldbg.SaveConfig(end_step=-1)
    with pytest.raises(InvalidConfig, match="save_steps must be a list of steps"):
        mldbg.SaveConfig(save_steps=5)


def test_a_schedule_setting_given_to_the_hook_says_where_it_goes(tmp_path):
    from mldbg.torch import Hook

    with pytest.raises(
        InvalidConfig,
        match=r"save_interval is a setting of the save schedule: save_config=mldbg\.SaveConfig\(save_interval=\.\.\.\)",
    ):
        Hook(tmp_path / "a", save_interval=10)
    with pytest.raises(InvalidConfig, match="did you mean 'save_all'"):
        Hook(tmp_path / "b", save_al=True)
    with pytest.raises(InvalidConfig, match="did you mean 'statistics_budget'"):
        Hook(tmp_path / "c", statistics_budgte=0.1)


@pytest.mark.parametrize("module", ["mldbg.lightning", "mldbg.transformers"])
def test_trainer_callbacks_check_their_options_when_built(module, tmp_path):
    """A trainer's callback builds its hook when the fit starts: its options are checked when
    the callback is made, not after the trainer has set up."""
    callback = importlib.import_module(module).DebuggerCallback
    for options, message in [
        ({"statistics_budgte": 0.1}, "did you mean 'statistics_budget'?"),
        ({"save_interval": 3}, "save_config=mldbg.SaveConfig(save_interval=...)"),
        ({"rules": ["dead_rellu"]}, "did you mean dead_relu?"),
        ({"save_config": {"save_intervl": 3}}, "did you mean 'save_interval'?"),
    ]:
        with pytest.raises(InvalidConfig) as raised:
            callback(tmp_path, **options)
        assert message in str(raised.value), raised.value
    made = callback(tmp_path, statistics_budget=0.1, save_config={"save_interval": 3})
    assert made.hook_options["save_config"] == mldbg.SaveConfig(save_interval=3)
