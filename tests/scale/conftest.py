"""A sweep of six tiny real trainings (three healthy learning rates, three defects a default
rule catches), recorded once per session, and a real Dask LocalCluster of processes per module."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from tests.tiny import TinyRun, train

STEPS = 25
# run name -> train() keyword arguments
SWEEP: dict[str, dict] = {
    "lr_0.05": {"lr": 0.05},
    "lr_0.1": {"lr": 0.1},
    "lr_0.2": {"lr": 0.2},
    "lr_1e12": {"lr": 1e12},  # explodes: NaN and inf
    "negative_bias": {"init": "negative_bias"},  # every ReLU dead
    "deep_sigmoid": {"activation": "sigmoid", "depth": 8},  # vanishing gradients
}
HEALTHY = ("lr_0.05", "lr_0.1", "lr_0.2")


@dataclass
class Sweep:
    root: Path
    runs: dict[str, TinyRun]  # name -> what the training produced

    def path(self, name: str) -> str:
        return str(self.root / name)


@pytest.fixture(scope="session")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    root = tmp_path_factory.mktemp("sweep")
    return Sweep(root, {name: train(root / name, steps=STEPS, **kw) for name, kw in SWEEP.items()})


@pytest.fixture(scope="session")
def two_worker_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One run written by two workers, as the ranks of a data-parallel job write it (each its
    own records, `include_workers="all"`), each rank seeing its own data; rank 1 explodes."""
    path = tmp_path_factory.mktemp("multi") / "two_workers"
    for rank in (0, 1):
        with pytest.MonkeyPatch.context() as env:
            env.setenv("RANK", str(rank))
            env.setenv("WORLD_SIZE", "2")
            lr = 1e12 if rank == 1 else 0.1
            train(path, steps=STEPS, seed=rank, lr=lr, hook_kwargs={"include_workers": "all"})
    return str(path)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """Two worker processes of one thread each, as `check_runs` starts on a 2-core machine."""
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(cluster: LocalCluster) -> Iterator[Client]:
    with Client(cluster, set_as_default=False) as client:
        yield client
