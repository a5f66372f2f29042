"""A reader in another process sees steps while training runs; kill -9 loses nothing written."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import mldbg
from mldbg.errors import NoMoreData, StepNotYetAvailable, StepUnavailable

SCRIPT = Path(__file__).with_name("train_script.py")


def start(out, steps, sleep, stdout=subprocess.DEVNULL):
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(out), str(steps), str(sleep)], stdout=stdout, text=True
    )


def test_reader_sees_steps_appear_while_training(tmp_path):
    proc = start(tmp_path, 40, 0.05)
    trial = mldbg.create_trial(tmp_path)  # may open before anything is written
    seen_counts = []
    try:
        trial.wait_for_steps([3], timeout=60)
        while not trial.loaded_all_steps:
            trial.refresh()
            seen_counts.append(len(trial.steps()))
            time.sleep(0.1)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert trial.steps() == list(range(40))
    # it grew in several increments, not all at once at the end
    assert len(set(seen_counts)) >= 3
    assert seen_counts[0] < 40
    with pytest.raises(NoMoreData):
        trial.wait_for_steps([40], timeout=1)
    with pytest.raises(StepUnavailable):
        trial.tensor("0.weight").value(99)


def test_kill_9_keeps_every_completed_record(tmp_path):
    proc = start(tmp_path, 10_000, 0.01, stdout=subprocess.PIPE)
    for printed, _line in enumerate(proc.stdout, 1):  # let it train for a while
        if printed >= 60:
            break
    mldbg.create_trial(tmp_path).wait_for_steps([54], timeout=30)  # written, in a reader's sight
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    trial = mldbg.create_trial(tmp_path)
    steps = trial.steps()
    assert len(steps) >= 55
    assert steps == list(range(len(steps)))  # no holes
    assert not trial.loaded_all_steps  # no end marker: it did not finish
    for s in steps:
        assert trial.tensor("0.weight").value(s).shape == (16, 8)
        assert np.isfinite(trial.tensor("CrossEntropyLoss_output_0").value(s))
    with pytest.raises(StepNotYetAvailable):
        trial.tensor("0.weight").value(steps[-1] + 1)
    # no temporary files left visible to readers
    assert not [
        p for p in tmp_path.rglob("*") if p.is_file() and ".tmp-" in p.name and p.suffix == ".safetensors"
    ]


def test_interpreter_exit_flushes_and_ends_the_run(tmp_path):
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), "7", "0", "noclose"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps
    assert trial.steps() == list(range(7))
