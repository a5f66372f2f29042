"""A sweep held in a bucket (a real SeaweedFS on loopback): its runs are the sub-prefixes of
`s3://bucket/prefix/`, listed through the Store interface, and checked on Dask workers that
read the bucket themselves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from distributed import LocalCluster

import mldbg
from mldbg.scale import check_runs, find_runs, reduce_runs
from mldbg.store import open_store
from tests.scale.conftest import STEPS, SWEEP
from tests.store.s3server import s3_prefix
from tests.tiny import train


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with s3_prefix(tmp_path_factory, "sweep") as url:
        yield url


@pytest.fixture(scope="module")
def cluster(s3: str) -> Iterator[LocalCluster]:
    """This module's cluster starts after the S3 environment is set: its workers inherit it,
    as the workers of a real cluster have their own credentials."""
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster


def test_sweep_of_an_s3_prefix(s3, client):
    for name in ("lr_0.1", "lr_1e12"):
        train(f"{s3}/{name}", steps=STEPS, **SWEEP[name])
    store = open_store(s3)
    store.write("notes/readme.txt", [b"not a run"])  # a sibling prefix that holds no run
    store.close()
    result = check_runs(f"{s3}/", client=client)
    assert list(result) == [f"{s3}/lr_0.1", f"{s3}/lr_1e12"] and not result.errors
    for run in result:
        assert result[run] == mldbg.check(run)
    assert not result[f"{s3}/lr_0.1"] and "exploding_tensor" in {f.rule for f in result[f"{s3}/lr_1e12"]}
    assert find_runs(f"{s3}/lr_1*") == ([f"{s3}/lr_1e12"], {})
    df = reduce_runs(f"{s3}/lr_0.*", "CrossEntropyLoss_output_0", mode="TRAIN", client=client)
    assert len(df) == STEPS and set(df.run) == {f"{s3}/lr_0.1"}
