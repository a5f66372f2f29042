"""What every hook shares (`mldbg.frameworks.base.Adapter`), shown on the PyTorch and XGBoost
hooks: the documented signature, the context manager, one close (also at interpreter exit)
that closes the recorder, the profiler and the watcher, the no-op timeline without a
profiler, and S3 options that reach the store, not the recorder."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from torch import nn

import mldbg
from mldbg.errors import InvalidConfig
from mldbg.profiler import layout as profiler_layout
from mldbg.profiler.timeline import NoTimeline
from mldbg.store import layout, open_store
from mldbg.torch import Hook

DOCUMENTED = [
    "out_dir", "save_config", "include_collections", "include_regex", "reduction_config", "save_all",
    "include_workers", "collection_configs", "profiler_config", "rules", "actions", "overwrite", "resume", "options",
]  # fmt: skip


def train(hook: Hook, steps: int = 3) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(model(torch.randn(6, 4)), torch.randint(0, 2, (6,))).backward()
        opt.step()


def test_every_hook_keeps_its_documented_keywords():
    from mldbg.xgboost import Hook as XGBoostHook

    assert list(inspect.signature(Hook).parameters) == DOCUMENTED
    assert Hook.__init__.__defaults__ == (
        None, None, None, None, False, "one", None, None, None, None, False, False,
    )  # fmt: skip
    own = [p for p in inspect.signature(XGBoostHook).parameters.values() if p.kind == p.KEYWORD_ONLY]
    assert [p.name for p in own] == [
        "train_data", "validation_data", "hyperparameters", "predictions_interval", "shap_steps", "loss_metrics",
    ]  # fmt: skip


def test_context_manager_closes_once(tmp_path):
    with Hook(tmp_path, save_config=mldbg.SaveConfig(save_interval=1)) as hook:
        train(hook)
        hook.save_scalar("lr", torch.tensor(0.1, dtype=torch.bfloat16))
        hook.save_tensor("mask", torch.ones(3, dtype=torch.bool), collections=["all"])
    hook.close()  # a second close does nothing
    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps and trial.steps() == [0, 1, 2]
    assert trial.tensor("lr").value(2) == pytest.approx(0.1, rel=1e-2)
    np.testing.assert_array_equal(trial.tensor("mask").value(2), np.ones(3, dtype=bool))


def test_without_profiler_config_the_marks_go_nowhere(tmp_path):
    with Hook(tmp_path) as hook:
        assert hook.profiler is None and isinstance(hook.timeline, NoTimeline)
        train(hook, steps=1)
    with Hook(tmp_path / "profiled", profiler_config=mldbg.ProfilerConfig(system_interval_ms=None)) as hook:
        assert hook.profiler is not None and hook.timeline is hook.profiler.timeline and hook.timeline.active


def test_s3_options_go_to_the_store(tmp_path):
    with pytest.raises(InvalidConfig, match="spill_max_bytes.*not an s3:// URL"):
        Hook(tmp_path, spill_max_bytes=1000)
    with Hook(tmp_path, flush_seconds=0.05) as hook:  # the writer's options go to the recorder
        assert hook.recorder.writer is not None and hook.recorder.writer.flush_seconds == 0.05


@pytest.mark.parametrize(
    ("typo", "meant"), [("flush_second", "flush_seconds"), ("spill_max_byte", "spill_max_bytes")]
)
def test_a_misspelled_option_is_named_with_the_closest_one(tmp_path, typo, meant):
    with pytest.raises(InvalidConfig, match=f"unknown hook option '{typo}'; did you mean '{meant}'"):
        Hook(tmp_path, **{typo: 1})
    assert not (tmp_path / "workers").exists()  # refused before anything was written


def test_from_json_builds_each_hook(tmp_path):
    from mldbg.xgboost import Hook as XGBoostHook

    config = tmp_path / "hook.json"
    config.write_text(json.dumps({"out_dir": str(tmp_path / "run"), "save_config": {"save_interval": 2}}))
    for cls in (Hook, XGBoostHook):
        with cls.from_json(config) as hook:
            assert type(hook) is cls and hook.recorder.save_config.save_interval == 2


def test_an_open_hook_closes_at_interpreter_exit(tmp_path):
    """The end markers of the run and of its profiler, written with no close() in the script;
    the profiler and the recorder are closed by the hook, once."""
    script = textwrap.dedent(f"""
        import torch
        from torch import nn
        import mldbg
        from mldbg.torch import Hook

        model = nn.Linear(3, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        hook = Hook({str(tmp_path)!r}, save_config=mldbg.SaveConfig(save_interval=1),
                    profiler_config=mldbg.ProfilerConfig(system_interval_ms=None))
        hook.register_module(model)
        for _ in range(4):
            opt.zero_grad()
            model(torch.randn(5, 3)).sum().backward()
            opt.step()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "failed" not in done.stderr
    store = open_store(tmp_path)
    assert json.loads(store.read(layout.end_key("worker_0")))["last_step"] == 3
    assert store.exists(profiler_layout.worker_end_key("worker_0"))
    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps and trial.steps() == [0, 1, 2, 3]
