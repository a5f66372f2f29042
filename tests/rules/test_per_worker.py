"""Per-worker checking of a run written by a real two-process gloo job in which rank 1 explodes.

The rules read each step from its first worker (worker_0), so `mldbg.check(run)` misses rank
1; `per_worker=True` checks every worker on its own, through `create_trial(run, worker=...)`.
Each rank trains its own replica with the tiny model of tests/tiny.py (rank 1 with lr=1e12, as
the two-worker run of tests/scale): with DDP's gradient averaging a NaN gradient would reach
every rank, whereas a rank's own data, activations and loss stay its own either way.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import mldbg
from mldbg.cli.check import check as check_cli
from mldbg.cli.watch import watch as watch_cli
from mldbg.errors import InvalidConfig, RunNotFound, StoreError, TensorUnavailableForStep
from mldbg.rules.builtin.exploding_tensor import ExplodingTensor
from mldbg.watch.watcher import Watcher
from tests.frameworks.test_multi_worker import start_workers

ROOT = Path(__file__).resolve().parents[2]
STEPS = 25
WORKER = """
import sys
import torch.distributed as dist
from tests.tiny import train

dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
train(sys.argv[1], steps=int(sys.argv[2]), seed=rank, lr=1e12 if rank == 1 else 0.1,
      hook_kwargs={"include_workers": "all"})
dist.barrier()
dist.destroy_process_group()
print("worker done", flush=True)
import os
os._exit(0)  # no interpreter finalization: see the end of tests/frameworks/ddp_script.py
"""


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The run of a two-process gloo job, each rank recording its own records."""
    out = tmp_path_factory.mktemp("per_worker") / "ddp"
    procs = start_workers("-c", WORKER, str(out), str(STEPS), cwd=ROOT)
    for p in procs:
        output, _ = p.communicate(timeout=120)
        assert p.returncode == 0, output
    return str(out)


def test_check_per_worker_finds_the_rank_that_exploded(job):
    assert mldbg.create_trial(job).workers() == ["worker_0", "worker_1"]
    assert mldbg.check(job) == []  # each step read from worker_0, which is healthy
    split = mldbg.check(job, per_worker=True)
    exploded = [f for f in split if f.rule == "exploding_tensor"]
    assert exploded and {f.worker for f in exploded} == {"worker_1"}
    assert {f.worker for f in split} == {"worker_1"}  # and worker_0 alone is still healthy
    # a rule sensitive enough to fire on the healthy rank (1% of a layer dead, blamed on the init
    # or on training alike): the whole run is its first worker
    sensitive = ["dead_relu:threshold_layer=1,threshold_collapse=1"]
    whole = mldbg.check(job, rules=sensitive)
    both = mldbg.check(job, rules=sensitive, per_worker=True)
    assert whole and {f.worker for f in both} == {"worker_0", "worker_1"}
    assert [replace(f, worker=None) for f in both if f.worker == "worker_0"] == whole
    assert [f for f in both if f.worker == "worker_1"] != [replace(f, worker="worker_1") for f in whole]
    assert mldbg.check(mldbg.create_trial(job), per_worker=True) == split  # a Trial, or a path
    one = mldbg.check(mldbg.create_trial(job, worker="worker_1"), rules=["exploding_tensor"])
    assert one == exploded


def test_a_single_worker_run_is_checked_as_before(run):
    path = run("lr_huge")
    assert mldbg.check(path, per_worker=True) == mldbg.check(path)
    assert all(f.worker is None for f in mldbg.check(path, per_worker=True))


def test_rules_are_built_anew_for_each_worker(job):
    unbound = ExplodingTensor(None)
    found = mldbg.check(job, rules=[unbound], per_worker=True)
    assert found and {f.worker for f in found} == {"worker_1"}
    bound = ExplodingTensor(mldbg.create_trial(job))  # it would read the whole run
    with pytest.raises(InvalidConfig, match="bound to a trial"):
        mldbg.check(job, rules=[bound], per_worker=True)


def test_a_trial_of_one_worker(job, tmp_path):
    whole = mldbg.create_trial(job)
    one = mldbg.create_trial(job, worker="worker_1")
    assert one.worker == "worker_1" and whole.worker is None
    assert one.workers() == ["worker_1"] and one.loaded_all_steps
    assert one.steps() == whole.steps() and one.tensor_names() == whole.tensor_names()
    for name in ("fc1.weight", "gradient/fc1.weight", "CrossEntropyLoss_output_0", "model_input_0"):
        for step in (0, 5, whole.steps()[-1]):
            expected = whole.tensor(name).value(step, worker="worker_1")
            np.testing.assert_array_equal(one.tensor(name).value(step), expected)
            assert one.tensor(name).workers(step) == ["worker_1"]
    assert not np.isfinite(one.tensor("fc1.weight").value(whole.steps()[-1])).all()
    assert np.isfinite(whole.tensor("fc1.weight").value(whole.steps()[-1])).all()
    with pytest.raises(TensorUnavailableForStep, match="worker_0"):
        one.tensor("fc1.weight").value(0, worker="worker_0")
    with pytest.raises(StoreError, match="read-only"):
        one.store.write("control/stop", [b"{}"])
    with pytest.raises(InvalidConfig, match="worker_0, worker_1"):
        mldbg.create_trial(job, worker="worker_7")
    not_yet = tmp_path / "not_yet"
    assert mldbg.create_trial(not_yet, worker="worker_1", missing_ok=True).steps() == []  # may come
    with pytest.raises(RunNotFound, match="does not exist"):  # without missing_ok: a wrong path
        mldbg.create_trial(not_yet, worker="worker_1")


def test_a_worker_is_complete_when_it_ended(job, tmp_path):
    """The job expects two workers: the run is complete once both ended, one worker's trial
    once that worker did."""
    copy = tmp_path / "worker_0_running"
    shutil.copytree(job, copy)
    (copy / "workers" / "worker_0" / "END").unlink()
    assert not mldbg.create_trial(copy).loaded_all_steps
    assert not mldbg.create_trial(copy, worker="worker_0").loaded_all_steps
    assert mldbg.create_trial(copy, worker="worker_1").loaded_all_steps


def test_cli_check_per_worker(job):
    args = [job, "--json", "--rule", "exploding_tensor"]
    res = CliRunner().invoke(check_cli, args)
    assert res.exit_code == 0 and not res.stdout.strip(), res.output
    res = CliRunner().invoke(check_cli, [*args, "--per-worker", "--findings"])
    assert res.exit_code == 1, res.output
    found = [json.loads(line) for line in res.stdout.splitlines()]
    assert found and {(f["worker"], f["rule"]) for f in found} == {("worker_1", "exploding_tensor")}
    # grouped into diagnoses (the default), each finding inside still names its worker
    res = CliRunner().invoke(check_cli, [*args, "--per-worker"])
    inner = [f for line in res.stdout.splitlines() for f in json.loads(line)["findings"]]
    assert inner and {(f["worker"], f["rule"]) for f in inner} == {("worker_1", "exploding_tensor")}
    res = CliRunner().invoke(check_cli, [job, "--rule", "exploding_tensor", "--per-worker", "--findings"])
    assert res.exit_code == 1 and res.stdout.startswith("worker_1: [exploding_tensor] step ")
    res = CliRunner().invoke(check_cli, [job, "--rule", "exploding_tensor", "--per-worker"])
    assert res.exit_code == 1 and "      worker_1: [exploding_tensor] step " in res.stdout
    assert "2 workers, each on its own" in res.stderr


def test_watch_per_worker(job):
    assert Watcher(job, ["exploding_tensor"], state=False).run() == []
    found = Watcher(job, ["exploding_tensor"], state=False, per_worker=True).run()
    assert found and {f.worker for f in found} == {"worker_1"}
    args = [job, "--rule", "exploding_tensor", "--no-state", "--quiet", "--json", "--per-worker"]
    res = CliRunner().invoke(watch_cli, args)
    assert res.exit_code == 1, res.output
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert lines and {line["worker"] for line in lines} == {"worker_1"}
