"""Runs shared by the profiler tests: each tiny training is made once per session."""

import subprocess
import sys
from pathlib import Path

import pytest
from profiler_runs import SLOW_STEPS, train

# steps of ~25 ms: long enough that a shared machine's scheduling noise stays noise
BIG = dict(hidden=1024, batch=128)


@pytest.fixture(scope="session")
def healthy_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("healthy")
    train(path, steps=60, eval_steps=4, **BIG)
    return path


@pytest.fixture(scope="session")
def slow_loader_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("slow_loader")
    # every batch takes 20 ms to load, in the main process; in a process of its own, so that no
    # child of pytest (a server or watcher another test started) counts as its data loader
    code = f"from profiler_runs import train; train({str(path)!r}, steps=40, data_sleep=0.02)"
    subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parent, check=True, timeout=300)
    return path


@pytest.fixture(scope="session")
def stalled_steps_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("stalled")
    train(path, steps=60, slow_steps=SLOW_STEPS, slow_seconds=0.12, **BIG)
    return path
