"""What is not a regular file in a run's place (a FIFO, a link to /dev/zero, a folder, a
1 TiB sparse file) is a CorruptRecord naming it, at once: before the audit of issue 16 a FIFO
hung `create_trial` for good, /dev/zero and a sparse file ran out of memory (MemoryError), and
a folder in place of a data file escaped `mldbg check`'s rule runner as IsADirectoryError."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import warnings

import pytest
from tests.store.test_fuzz import time_bound, write_run

import mldbg
from mldbg.errors import CorruptRecord
from mldbg.store import LocalStore

FILES = [
    "workers/worker_0/meta.json",
    "workers/worker_1/END",
    "workers/worker_0/index/0000000002.safetensors",
]
DATA = "workers/worker_1/data/0000000002.safetensors"


@pytest.fixture(scope="module")
def intact(tmp_path_factory):
    run = tmp_path_factory.mktemp("special") / "intact"
    write_run(run)
    return run


def replace(path, kind):
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "/dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:  # a sparse file of 1 TiB: no disk used, but no whole read either
        with open(path, "wb") as f:
            f.truncate(1 << 40)


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "folder", "sparse"])
@pytest.mark.parametrize("key", FILES + [DATA])
def test_a_special_file_in_a_run_is_a_corrupt_record_at_once(intact, tmp_path, key, kind):
    run = tmp_path / "run"
    shutil.copytree(intact, run)
    replace(run / key, kind)
    t0 = time.monotonic()
    with time_bound(10, f"{key} as {kind}"):
        if key == DATA:  # the index is whole: the run opens; reading a value of it is refused
            trial = mldbg.create_trial(run)
            rec = next(r for r in trial.records("w") if r.worker == "worker_1" and r.step == 2)
            with pytest.raises(CorruptRecord, match="0000000002.safetensors"):  # sparse: zeros, checksum
                trial.read(rec)
        else:
            with pytest.raises(CorruptRecord, match=os.path.basename(key)) as err:
                mldbg.create_trial(run)
            assert "\n" not in str(err.value)
            with warnings.catch_warnings(record=True):
                warnings.simplefilter("always")
                trial = mldbg.create_trial(run, on_corrupt="skip")
            assert trial.steps()
    assert time.monotonic() - t0 < 5


def test_local_store_reads_only_regular_files(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    with open(tmp_path / "sparse", "wb") as f:
        f.truncate(1 << 40)
    store = LocalStore(tmp_path)
    for key in ("fifo", "zero"):
        with pytest.raises(OSError, match="not a regular file"):
            store.read(key)
        with pytest.raises(OSError, match="not a regular file"):
            store.read(key, 0, 8)
    with pytest.raises(OSError, match="more than any file of a run"):
        store.read("sparse")
    assert store.read("sparse", 1 << 39, 4) == b"\0\0\0\0"  # a ranged read is fine


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_mldbg_check_reads_around_a_data_file_that_is_not_a_file(intact, tmp_path, kind):
    run = tmp_path / "run"
    shutil.copytree(intact, run)
    replace(run / "workers/worker_0/data/0000000002.safetensors", kind)  # the worker rules read
    proc = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "check", str(run)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr  # read around, and said: the findings miss steps
    assert "failed" not in proc.stderr and "Traceback" not in proc.stderr
    assert "skipped step 2" in proc.stderr and "cannot be read" in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("mldbg check: error:")]
    assert "data/0000000002.safetensors" in line and "more damaged" not in line  # one file
