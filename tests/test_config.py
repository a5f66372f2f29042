"""Configuration at the boundary: JSON/YAML files, clear errors."""

import json

import pytest
import torch
from torch import nn

import mldbg
from mldbg import Mode, SaveConfig
from mldbg.errors import InvalidConfig
from mldbg.torch import Hook


def train(hook, model, steps):
    """`steps` SGD steps of `model` on random batches, recorded by `hook`, which is closed."""
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(4, 3)).sum().backward()
        opt.step()
    hook.close()


def test_hook_from_json(tmp_path):
    cfg = {
        "out_dir": str(tmp_path / "run"),
        "save_config": {"save_interval": 2, "mode_save_configs": {"eval": {"save_steps": [0]}}},
        "include_collections": ["weights", "mine"],
        "collection_configs": [
            {"name": "mine", "include_regex": ["^0\\."], "reduction_config": {"reductions": ["mean"]}}
        ],
    }
    path = tmp_path / "hook.json"
    path.write_text(json.dumps(cfg))
    hook = Hook.from_json(path)
    model = nn.Sequential(nn.Linear(3, 2))
    train(hook, model, steps=3)
    trial = mldbg.create_trial(tmp_path / "run")
    assert trial.steps() == [0, 2]
    assert trial.tensor_names(collection="mine") == ["0.bias", "0.weight"]
    # 0.weight is in `weights` (raw) and `mine` (mean): the collection's reductions apply
    assert trial.tensor("0.bias").reduction_value(2, "mean") == pytest.approx(
        float(model[0].bias.detach().mean()), abs=1
    )


@pytest.mark.parametrize(
    "cfg, message",
    [
        ({"out_dir": "x", "save_config": {"save_intervall": 3}}, "save_intervall"),
        ({"out_dir": "x", "bogus": 1}, "bogus"),
        ({"save_all": True}, "out_dir"),
        ({"out_dir": "x", "reduction_config": {"reductions": ["median"]}}, "median"),
        ({"out_dir": "x", "save_config": {"mode_save_configs": {"test": {}}}}, "unknown mode"),
    ],
)
def test_bad_config_names_the_setting(tmp_path, cfg, message):
    path = tmp_path / "hook.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(InvalidConfig, match=message):
        Hook.from_json(path)


def test_the_statistics_settings_come_from_json_too(tmp_path):
    """`MLDBG_CONFIG` users set the two-line hook's cadence the same way."""
    path = tmp_path / "hook.json"
    path.write_text(
        json.dumps({"out_dir": str(tmp_path / "run"), "statistics_budget": 0, "statistics_warmup": 3})
    )
    train(Hook.from_json(path), nn.Sequential(nn.Linear(3, 2), nn.ReLU()), steps=5)
    trial = mldbg.create_trial(tmp_path / "run")
    steps = trial.records("0.weight").step.tolist()
    assert steps == [0, 1, 2, 3, 4]  # budget 0: statistics at every step
    assert "l2" in trial.record("0.weight", 4).statistics


def test_bad_json_names_file_and_line(tmp_path):
    path = tmp_path / "hook.json"
    path.write_text('{"out_dir": "x",\n "save_all": tru}')
    with pytest.raises(InvalidConfig, match=r"hook.json: invalid JSON at line 2"):
        Hook.from_json(path)


def test_save_config_schedules():
    cfg = SaveConfig(save_interval=5, start_step=10, end_step=30)
    assert [s for s in range(40) if cfg.should_save(Mode.TRAIN, s)] == [10, 15, 20, 25]
    assert [s for s in range(10) if SaveConfig(save_steps=[1, 7]).should_save(Mode.EVAL, s)] == [1, 7]
    with pytest.raises(InvalidConfig):
        SaveConfig(save_interval=0)
