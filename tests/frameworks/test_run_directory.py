"""One run per run directory: a second run into a folder that holds one is refused with an
error naming it and the ways out; `overwrite=True` replaces the run (and only the run's files);
`resume=True` continues its global and mode steps. Local folders, `memory://`, the JSON config
and every hook; S3 in tests/store/test_s3_run_directory.py, `mldbg run` in tests/watch."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import mldbg
from mldbg import Mode
from mldbg.errors import InvalidConfig
from mldbg.store import layout, markers, open_store
from mldbg.store.format import retarget_index
from mldbg.store.markers import End, StopRequest
from mldbg.torch import Hook


def train(out, steps: int = 3, evals: int = 1, **options) -> None:
    """`steps` SGD steps of a 4-8-3 MLP, then `evals` eval forwards; every step saved."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
    with Hook(out, save_config=mldbg.SaveConfig(save_interval=1), **options) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for _ in range(steps):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for _ in range(evals):
                loss_fn(model(x), y)


def test_a_second_run_is_refused_with_the_folder_and_the_ways_out(tmp_path):
    run = tmp_path / "run"
    train(run)
    with pytest.raises(InvalidConfig) as err:
        Hook(run)
    message = str(err.value)
    assert str(run) in message and "\n" not in message
    assert "new directory" in message and "overwrite=True" in message and "resume=True" in message
    assert "finished at step 3" in message
    trial = mldbg.create_trial(run)  # untouched
    assert trial.steps() == [0, 1, 2, 3] and trial.loaded_all_steps
    with pytest.raises(InvalidConfig, match="not both"):
        Hook(run, overwrite=True, resume=True)


def test_an_empty_folder_or_one_without_records_is_fine(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    Hook(tmp_path).close()  # opened, recorded nothing: nothing to mix with
    train(tmp_path)
    assert mldbg.create_trial(tmp_path).steps() == [0, 1, 2, 3]


def test_overwrite_replaces_the_run_and_leaves_other_files(tmp_path):
    run = tmp_path / "run"
    train(run, steps=6, evals=2, profiler_config=mldbg.ProfilerConfig(system_interval_ms=None))
    store = open_store(run)
    markers.save(store, layout.STOP_REQUEST, StopRequest(reason="old", requested=1.0))
    store.write("watch/abc.json", [b"{}"])
    (run / "notes.txt").write_text("mine")
    (run / "workers" / "worker_0" / "mine.txt").write_text("mine too")
    (run / "workers" / "worker_0" / "data" / "0000000009.safetensors.tmp-1234abcd").write_text("crash")
    assert store.list(layout.PROFILER)
    train(run, steps=2, evals=1, overwrite=True)
    trial = mldbg.create_trial(run)
    assert trial.loaded_all_steps and trial.steps() == [0, 1, 2]
    assert trial.steps(Mode.TRAIN) == [0, 1] and trial.steps(Mode.EVAL) == [0] and trial.mode(2) == Mode.EVAL
    assert markers.load(store, layout.end_key("worker_0"), End).last_step == 2
    assert not store.exists(layout.STOP_REQUEST) and not store.list(layout.WATCH)
    assert not store.list(layout.PROFILER)
    assert (run / "notes.txt").read_text() == "mine"
    assert (run / "workers" / "worker_0" / "mine.txt").read_text() == "mine too"
    assert not list((run / "workers" / "worker_0" / "data").glob("*.tmp-*"))


def test_overwrite_removes_workers_an_earlier_job_had(tmp_path):
    """A worker folder this job will not write belongs to the earlier run: worker 0 removes it."""
    train(tmp_path)
    store = open_store(tmp_path)
    for key in store.list(layout.worker_prefix("worker_0")):  # as if an earlier job had two workers
        blob, copy = store.read(key), key.replace("worker_0", "worker_1")
        if "/index/" in key:  # an index names its own worker's data file
            blob = retarget_index(blob, copy.replace("/index/", "/data/"), copy)
        store.write(copy, [blob])
    assert mldbg.create_trial(tmp_path).workers() == ["worker_0", "worker_1"]
    with pytest.raises(InvalidConfig, match="worker_0: finished at step 3; worker_1: finished at step 3"):
        train(tmp_path)
    train(tmp_path, steps=1, evals=0, overwrite=True)
    trial = mldbg.create_trial(tmp_path)
    assert trial.workers() == ["worker_0"] and trial.steps() == [0]
    assert not (tmp_path / "workers" / "worker_1").exists()


def test_resume_continues_the_global_and_mode_steps(tmp_path):
    train(tmp_path, steps=3, evals=1)  # TRAIN 0-2, EVAL 3
    train(tmp_path, steps=2, evals=2, resume=True)  # TRAIN 4-5, EVAL 6-7
    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps and trial.steps() == list(range(8))
    assert trial.steps(Mode.TRAIN) == [0, 1, 2, 3, 4] and trial.steps(Mode.EVAL) == [0, 1, 2]
    assert [trial.mode(s) for s in (3, 4, 5, 6)] == [Mode.EVAL, Mode.TRAIN, Mode.TRAIN, Mode.EVAL]
    assert [trial.mode_step(s) for s in (4, 5, 6, 7)] == [3, 4, 1, 2]
    loss = trial.tensor("CrossEntropyLoss_output_0")
    assert loss.steps(Mode.TRAIN) == [0, 1, 2, 3, 4]
    assert markers.load(open_store(tmp_path), layout.end_key("worker_0"), End).last_step == 7


def test_a_resumed_run_reads_live_then_finished(tmp_path):
    train(tmp_path, steps=2, evals=0)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = Hook(tmp_path, save_config=mldbg.SaveConfig(save_interval=1), resume=True)
    hook.register_module(model)
    opt.zero_grad()
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    hook.recorder.flush()
    live = mldbg.create_trial(tmp_path)
    assert not live.loaded_all_steps and live.steps() == [0, 1, 2]  # the earlier END is gone
    hook.close()
    live.refresh()
    assert live.loaded_all_steps


CRASH = """
import os, sys, torch
import mldbg
from mldbg.torch import Hook
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
hook = Hook(sys.argv[1], save_config=mldbg.SaveConfig(save_interval=1), resume=sys.argv[2] == "resume")
hook.register_module(model)
for _ in range(int(sys.argv[3])):
    opt.zero_grad()
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
hook.recorder.flush()
if sys.argv[4] == "crash":
    os._exit(0)  # killed: no end marker
hook.close()
"""


def test_resume_after_a_crash_continues_after_the_last_recorded_step(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(CRASH))
    run = tmp_path / "run"

    def job(*args):
        done = subprocess.run([sys.executable, str(script), str(run), *args], capture_output=True, text=True)
        return done

    assert job("new", "5", "crash").returncode == 0
    with pytest.raises(InvalidConfig, match="worker_0: no end marker, still running or crashed"):
        Hook(run)
    resumed = job("resume", "3", "close")
    assert resumed.returncode == 0, resumed.stderr
    trial = mldbg.create_trial(run)
    assert trial.loaded_all_steps and trial.steps() == list(range(8))


def test_memory_runs_are_claimed_too():
    url = "memory://run-directory-test"
    train(url, steps=2, evals=0)
    with pytest.raises(InvalidConfig, match="memory://run-directory-test already holds a run"):
        Hook(url)
    train(url, steps=1, evals=0, resume=True)
    assert mldbg.create_trial(url).steps() == [0, 1, 2]
    train(url, steps=1, evals=0, overwrite=True)
    assert mldbg.create_trial(url).steps() == [0]


def test_the_json_config_takes_overwrite_and_resume(tmp_path):
    run = tmp_path / "run"
    train(run, steps=2, evals=0)
    config = tmp_path / "hook.json"
    for key, first_step in (("resume", 2), ("overwrite", 0)):
        config.write_text(json.dumps({"out_dir": str(run), key: True}))
        with Hook.from_json(config) as hook:
            assert hook.recorder.step == first_step
    config.write_text(json.dumps({"out_dir": str(run), "overwrite": "yes"}))
    with pytest.raises(InvalidConfig, match="'overwrite' must be true or false"):
        Hook.from_json(config)


def test_every_hook_takes_overwrite_and_resume(tmp_path):
    """The check lives below the adapters (the recorder): each hook refuses, resumes, replaces."""
    from mldbg.jax import Hook as JaxHook
    from mldbg.keras import Hook as KerasHook
    from mldbg.tensorflow import Hook as TensorFlowHook
    from mldbg.xgboost import Hook as XGBoostHook

    train(tmp_path, steps=3, evals=0)
    for cls in (Hook, KerasHook, TensorFlowHook, JaxHook, XGBoostHook):
        with pytest.raises(InvalidConfig, match="already holds a run"):
            cls(tmp_path)
        with cls(tmp_path, resume=True) as hook:
            assert hook.recorder.step == 3 and hook.recorder.mode_steps[Mode.TRAIN] == 3
        with cls(tmp_path / cls.__module__, overwrite=True) as hook:  # every hook: a context manager
            assert hook.recorder.step == 0
            hook.save_scalar("x", 1.0)
        assert hook._closed and open_store(tmp_path / cls.__module__).exists(layout.end_key("worker_0"))


def test_the_demo_replaces_its_own_run(tmp_path):
    """`mldbg demo` twice: the demo's own folder is replaced (overwrite=True), not refused."""
    from mldbg.frameworks.torch_demo import train_digits

    for _ in range(2):
        run = train_digits(tmp_path / "healthy", epochs=1, live_rules=False)
    trial = mldbg.create_trial(run.path)
    assert trial.loaded_all_steps and trial.steps(Mode.TRAIN) == list(range(0, run.steps, 5))  # one run


LIVE = """
import sys, torch
import mldbg
from mldbg.torch import Hook
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
hook = Hook(sys.argv[1], save_config=mldbg.SaveConfig(save_interval=1), overwrite=True)
hook.register_module(model)
for _ in range(int(sys.argv[2])):
    opt.zero_grad()
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
hook.recorder.flush()
print("recording", flush=True)
sys.stdin.readline()  # still recording until told to finish
hook.close()
"""


@pytest.mark.parametrize("steps", [0, 2], ids=["nothing-flushed-yet", "steps-recorded"])
def test_a_folder_a_live_process_records_is_refused_whatever_the_options(tmp_path, steps):
    """Another process still records the folder (its meta.json names it, alive, holding the file
    open): a hook is refused even with overwrite=True or resume=True, and so is `mldbg run`,
    naming the pid, the host and what to do; once that process ends, overwrite works."""
    import os
    import socket

    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(LIVE))
    run = tmp_path / "run"
    writer = subprocess.Popen(
        [sys.executable, str(script), str(run), str(steps)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "recording"
        line = f"is being recorded right now by another process \\(pid {writer.pid} on {socket.gethostname()}, worker_0"
        for options in ({}, {"overwrite": True}, {"resume": True}):
            with pytest.raises(InvalidConfig, match=line + ".*mldbg watch .* --stop, or kill"):
                Hook(run, **options)
        train_py = tmp_path / "train.py"
        train_py.write_text("print('should not run')\n")
        done = subprocess.run(
            [sys.executable, "-m", "mldbg.cli.main", "run", "--overwrite", "--out", str(run), "--", sys.executable, str(train_py)],
            capture_output=True, text=True, timeout=120, env={**os.environ},
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        err = done.stderr.strip()
        assert err.startswith("mldbg run: error: ") and "\n" not in err and f"pid {writer.pid}" in err
        assert "should not run" not in done.stdout and "--overwrite or --resume" in err
        assert open_store(run).exists(layout.meta_key("worker_0"))  # nothing of the live run removed
    finally:
        writer.communicate("done\n", timeout=60)
    assert writer.returncode == 0
    assert mldbg.create_trial(run).steps() == list(range(steps))
    with Hook(run, overwrite=True) as hook:  # it ended: its run may be replaced
        assert hook.recorder.step == 0
    assert mldbg.create_trial(run).steps() == []
