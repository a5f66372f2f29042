"""Runs shared by the profiler tests: each tiny training is made once per session."""

import subprocess
import sys
from pathlib import Path

import pytest
from profiler_runs import SLOW_STEPS, train

# steps of ~25 ms: long enough that a shared machine's scheduling noise stays noise
BIG = dict(hidden=1024, batch=128)


def _train_apart(path: Path, **kwargs) -> None:
    """`train(path, **kwargs)` in a process of its own: its profiler's process start is that
    process's (max_initialization_time judges the time from it to the first step), not the test
    runner's, which may have started 20 minutes before (a long suite, a late xdist worker); and
    no child of pytest (a server or watcher another test started) counts as its data loader."""
    code = f"from profiler_runs import train; train({str(path)!r}, **{kwargs!r})"
    subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parent, check=True, timeout=300)


@pytest.fixture(scope="session")
def healthy_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("healthy")
    _train_apart(path, steps=60, eval_steps=4, **BIG)
    return path


@pytest.fixture(scope="session")
def slow_loader_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("slow_loader")
    _train_apart(path, steps=40, data_sleep=0.02)  # every batch takes 20 ms to load, in the main process
    return path


@pytest.fixture(scope="session")
def stalled_steps_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("stalled")
    train(path, steps=60, slow_steps=SLOW_STEPS, slow_seconds=0.12, **BIG)
    return path
