"""`mldbg run --out DIR` into a folder that holds a run: refused (exit 2, naming the folder and
the flags), `--resume` continues its steps with the watcher seeing it live, `--overwrite`
replaces it."""

from __future__ import annotations

import sys

import pytest

import mldbg
from mldbg import Mode
from mldbg.store import layout, markers, open_store
from mldbg.store.markers import End

try:
    from .test_run import PLAIN, mldbg_run, script
except ImportError:
    from test_run import PLAIN, mldbg_run, script


@pytest.mark.slow  # several jobs of two processes (or CLI runs), each importing torch
def test_run_refuses_resumes_and_overwrites(tmp_path):
    out = tmp_path / "run"
    train = script(tmp_path, "train.py", PLAIN)
    first = mldbg_run("--out", str(out), "--no-watch", "--", sys.executable, train, "0.1", "5")
    assert first.returncode == 0, first.stderr
    refused = mldbg_run("--out", str(out), "--", sys.executable, train, "0.1", "5")
    assert refused.returncode == 2
    assert str(out) in refused.stderr and "--overwrite" in refused.stderr and "--resume" in refused.stderr
    assert "trained" not in refused.stdout  # the script never started
    both = mldbg_run("--out", str(out), "--overwrite", "--resume", "--", sys.executable, train, "0.1", "5")
    assert both.returncode == 2 and "give one of them" in both.stderr

    resumed = mldbg_run("--out", str(out), "--resume", "--rule", "exploding_tensor", "--",
                        sys.executable, train, "0.1", "3")  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "8 checked" in resumed.stderr  # the watcher followed the resumed run to its new end
    trial = mldbg.create_trial(out)
    assert (
        trial.loaded_all_steps
        and trial.steps() == list(range(8))
        and trial.steps(Mode.TRAIN) == list(range(8))
    )
    assert markers.load(open_store(out), layout.end_key("worker_0"), End).last_step == 7

    replaced = mldbg_run(
        "--out", str(out), "--overwrite", "--no-watch", "--", sys.executable, train, "0.1", "2"
    )
    assert replaced.returncode == 0, replaced.stderr
    trial = mldbg.create_trial(out)
    assert trial.loaded_all_steps and trial.steps() == [0, 1]
