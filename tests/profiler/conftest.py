"""Runs shared by the profiler tests: each tiny training is made once per session."""

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
    train(path, steps=40, data_sleep=0.02)  # every batch takes 20 ms to load, in the main process
    return path


@pytest.fixture(scope="session")
def stalled_steps_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("stalled")
    train(path, steps=60, slow_steps=SLOW_STEPS, slow_seconds=0.12, **BIG)
    return path
