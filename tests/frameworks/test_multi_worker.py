"""Two torch.distributed workers (gloo, CPU) write their own records; the trial merges them."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mldbg

SCRIPT = Path(__file__).with_name("ddp_script.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_workers(*argv, cwd=None):
    """Two processes `python *argv`, ranks 0 and 1 of a gloo job on a free port."""
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(
            subprocess.Popen(
                [sys.executable, *argv],
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    return procs


def start_job(out, include_workers, *args):
    return start_workers(str(SCRIPT), str(out), include_workers, *args)


def run_job(out, include_workers):
    outputs = []
    for p in start_job(out, include_workers):
        output, _ = p.communicate(timeout=120)
        assert p.returncode == 0, output
        outputs.append(output)
    return outputs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("ddp")
    run_job(base / "all", "all")
    run_job(base / "one", "one")
    return base


def test_each_worker_writes_its_own_records(runs):
    trial = mldbg.create_trial(runs / "all")
    assert trial.workers() == ["worker_0", "worker_1"]
    assert trial.loaded_all_steps
    assert trial.steps() == [0, 1, 2, 3]
    t = trial.tensor("model_input_0")
    assert t.workers(2) == ["worker_0", "worker_1"]
    a, b = t.value(2, worker="worker_0"), t.value(2, worker="worker_1")
    assert not np.array_equal(a, b)  # different data per worker
    np.testing.assert_array_equal(t.value(2), a)  # no worker given: the first
    # DDP averages gradients: every worker holds the same ones, and the same weights
    g = trial.tensor("gradient/0.weight")
    np.testing.assert_allclose(g.value(3, worker="worker_0"), g.value(3, worker="worker_1"), rtol=1e-6)
    np.testing.assert_array_equal(
        trial.tensor("0.weight").value(3, worker="worker_0"),
        trial.tensor("0.weight").value(3, worker="worker_1"),
    )
    losses = [trial.tensor("CrossEntropyLoss_output_0").value(1, worker=w) for w in trial.workers()]
    assert losses[0] != losses[1]


def test_include_workers_one_records_rank_zero_only(runs):
    trial = mldbg.create_trial(runs / "one")
    assert trial.workers() == ["worker_0"]
    assert trial.loaded_all_steps
    assert trial.steps() == [0, 1, 2, 3]
    with pytest.raises(mldbg.errors.TensorUnavailableForStep, match="worker_1"):
        trial.tensor("0.weight").value(1, worker="worker_1")


def test_every_worker_stops_at_the_same_step(tmp_path):
    """A stop request reaches the two workers between their step ends: both must stop after the
    same step, or the one still training waits forever in its next all-reduce."""
    import json
    import re
    import time

    from mldbg.store import layout, open_store

    run = tmp_path / "run"
    procs = start_job(run, "all", "stop")
    try:
        trial = mldbg.create_trial(run, missing_ok=True)  # the job may not have written yet
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            trial.refresh()
            if len(trial.steps()) >= 5:
                break
            time.sleep(0.05)
        assert len(trial.steps()) >= 5, "the job did not start"
        request = {"reason": "test: stop", "requested": time.time()}
        open_store(str(run)).write(layout.STOP_REQUEST, [json.dumps(request).encode()])
        outputs = [p.communicate(timeout=60)[0] for p in procs]  # a worker left waiting would hang
    finally:
        for p in procs:
            p.kill()
    steps = []
    for p, output in zip(procs, outputs, strict=True):
        found = re.search(r"stopped after step (\d+): mldbg stopped the training", output)
        assert found and p.returncode == 0, output
        steps.append(int(found.group(1)))
    assert steps[0] == steps[1], steps
    trial = mldbg.create_trial(run)
    assert trial.loaded_all_steps and trial.steps()[-1] == steps[0]
    for worker in ("worker_0", "worker_1"):
        assert trial.tensor("0.weight").workers(steps[0]) == ["worker_0", "worker_1"], worker


@pytest.mark.slow  # several jobs of two processes (or CLI runs), each importing torch
def test_the_workers_of_one_job_share_a_run_that_a_second_job_may_not(tmp_path):
    """Two workers write one folder at once (each answers for its own worker folder); a second
    job into it is refused by both, resumes it, or replaces it; a job of one writer replacing
    a job of two removes the second worker's folder too."""
    run = tmp_path / "run"
    run_job(run, "all")
    for p in start_job(run, "all"):
        output, _ = p.communicate(timeout=120)
        assert p.returncode != 0 and "already holds a run" in output, output
    for p in start_job(run, "all", "resume"):
        output, _ = p.communicate(timeout=120)
        assert p.returncode == 0, output
    trial = mldbg.create_trial(run)
    assert trial.loaded_all_steps and trial.workers() == ["worker_0", "worker_1"]
    assert trial.steps() == list(range(8))
    assert trial.tensor("model_input_0").workers(6) == ["worker_0", "worker_1"]
    for p in start_job(run, "one", "overwrite"):
        output, _ = p.communicate(timeout=120)
        assert p.returncode == 0, output
    trial = mldbg.create_trial(run)
    assert trial.loaded_all_steps and trial.workers() == ["worker_0"] and trial.steps() == [0, 1, 2, 3]
