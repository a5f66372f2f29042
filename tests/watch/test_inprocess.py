"""`start_watcher`: the watcher as a child of the training process (what `Hook(rules=...)` uses)."""

import json
import time

import numpy as np
import pytest
from watch_helpers import recorder

import mldbg
from mldbg.actions import Log, StopTraining
from mldbg.watch.inprocess import start_watcher


def test_child_watcher_stops_the_training_and_ends_with_it(tmp_path):
    run, log = tmp_path / "run", tmp_path / "findings.jsonl"
    watcher = start_watcher(run, ["exploding_tensor"], [StopTraining(), Log(log)], poll_seconds=0.05)
    rec = recorder(run)
    bad_at, stopped_at = 5, None
    try:
        for i in range(400):
            rec.start_step(mldbg.Mode.TRAIN)
            rec.save_tensor(
                "fc.weight", np.full((4,), np.nan if i >= bad_at else 0.5, np.float32), ("weights",)
            )
            rec.end_step()
            time.sleep(0.02)
    except mldbg.TrainingStopped:
        stopped_at = rec.step - 1
    assert stopped_at is not None and stopped_at < bad_at + 100
    assert watcher.stop(timeout=20) == 0  # it made its final pass and ended by itself
    assert not watcher.alive
    (row,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert row["rule"] == "exploding_tensor" and row["step"] == bad_at
    trial = mldbg.create_trial(run)
    assert trial.loaded_all_steps and trial.steps() == list(range(stopped_at + 1))


def test_child_watcher_ends_when_the_training_process_is_gone(tmp_path):
    import subprocess
    import sys
    import textwrap

    run = tmp_path / "run"
    script = textwrap.dedent(f"""
        import os, time
        import numpy as np
        import mldbg
        from mldbg.record.recorder import Recorder
        from mldbg.watch.inprocess import start_watcher
        w = start_watcher({str(run)!r}, ["exploding_tensor"], poll_seconds=0.05)
        print(w.pid, flush=True)
        rec = Recorder({str(run)!r}, save_config=mldbg.SaveConfig(save_interval=1), flush_seconds=0.05)
        for i in range(3):
            rec.start_step(mldbg.Mode.TRAIN)
            rec.save_tensor("w", np.ones(2, np.float32), ("weights",))
            rec.end_step()
        rec.flush()
        os._exit(9)  # dies without closing the run, without stopping its watcher
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 9
    pid = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    assert not _alive(pid), "the orphaned watcher is still running"


def _alive(pid):
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not reaped yet) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_unpicklable_actions_are_refused_with_a_reason(tmp_path):
    class Local(Log):  # a class defined in a function cannot be pickled
        pass

    with pytest.raises(mldbg.errors.InvalidConfig, match="picklable"):
        start_watcher(tmp_path, ["exploding_tensor"], [Local()])


def test_a_wrong_action_name_is_refused_before_the_child_starts(tmp_path):
    with pytest.raises(mldbg.errors.InvalidConfig, match="unknown type 'pager'"):
        start_watcher(tmp_path, ["exploding_tensor"], ["stop", {"type": "pager"}])


def test_hook_rules_and_actions_in_one_line(tmp_path):
    """`Hook(..., rules=, actions=)`: a watcher child checks the rules live and stops a run whose
    weights explode; the hook ends it on close."""
    import torch
    from torch import nn

    import mldbg
    from mldbg.actions import StopTraining
    from mldbg.torch import Hook

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=1e12)
    hook = Hook(
        tmp_path,
        save_config=mldbg.SaveConfig(save_interval=1),
        flush_seconds=0.05,
        rules=["exploding_tensor", "tensor_variance"],
        actions=[StopTraining()],
    )
    hook.register_module(model)
    hook.register_loss(loss_fn)
    stopped = None
    for step in range(2000):
        opt.zero_grad()
        loss_fn(model(torch.randn(16, 8)), torch.randint(0, 2, (16,))).backward()
        try:
            opt.step()
        except mldbg.TrainingStopped:
            stopped = step
            break
        time.sleep(0.01)
    hook.close()
    assert stopped is not None and stopped < 1500
    assert hook.session.watcher is None  # ended with the hook
    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps and trial.steps()[-1] == stopped
