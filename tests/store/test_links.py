"""No store reads through a symbolic link (issue 28, item 1): a run whose data file, index,
marker or folder is a link to something outside the run (a sweep folder another local user can
write, served by a dashboard without a token) must not hand out the bytes the link names. A
format-2 index has no checksums, so before the fix every byte of the linked file came back."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import mldbg
from mldbg.errors import CorruptRecord
from mldbg.store import LocalStore

FORMAT2 = Path(__file__).parent.parent / "trial" / "data" / "format2_run"
DATA = "workers/worker_0/data/0000000001.safetensors"


def _raw_record(trial):
    for name in trial.tensor_names():
        for step in trial.steps():
            try:
                record = trial.record(name, step)
            except KeyError:
                continue
            if record.has_raw:
                return record
    raise AssertionError("the format-2 run holds no raw value")


@pytest.fixture
def secret(tmp_path):
    """A file outside the run with the very bytes the run's index expects (the attacker knows
    the layout; a checksum would not help either)."""
    path = tmp_path / "outside" / "secret.bin"
    path.parent.mkdir()
    path.write_bytes((FORMAT2 / DATA).read_bytes())
    return path


def test_a_data_file_linked_out_of_the_run_is_not_read(tmp_path, secret):
    run = tmp_path / "run"
    shutil.copytree(FORMAT2, run)
    (run / DATA).unlink()
    (run / DATA).symlink_to(secret)
    trial = mldbg.create_trial(str(run))
    record = _raw_record(trial)
    with pytest.raises(CorruptRecord, match="symbolic link"):
        trial.read(record)
    store = LocalStore(run)
    for read in (lambda: store.read(DATA), lambda: store.read(DATA, 0, 8), lambda: store.size(DATA)):
        with pytest.raises(OSError, match="symbolic link"):
            read()


def test_a_data_folder_linked_out_of_the_run_is_not_read(tmp_path, secret):
    run = tmp_path / "run"
    shutil.copytree(FORMAT2, run)
    data = run / "workers/worker_0/data"
    shutil.rmtree(data)
    data.symlink_to(secret.parent)
    (secret.parent / "0000000001.safetensors").write_bytes(secret.read_bytes())
    trial = mldbg.create_trial(str(run))
    with pytest.raises(CorruptRecord, match="symbolic link"):
        trial.read(_raw_record(trial))


def test_an_index_or_marker_linked_out_of_the_run_is_a_corrupt_record(tmp_path):
    for key in ("workers/worker_0/index/0000000001.safetensors", "workers/worker_0/meta.json"):
        run = tmp_path / key.replace("/", "_")
        shutil.copytree(FORMAT2, run)
        outside = tmp_path / (run.name + ".outside")
        outside.write_bytes((run / key).read_bytes())
        (run / key).unlink()
        (run / key).symlink_to(outside)
        with pytest.raises(CorruptRecord, match="symbolic link"):
            mldbg.create_trial(str(run))


def test_a_run_reached_through_a_linked_root_still_reads(tmp_path):
    """The run's own path may be a link (the user's choice); only links inside it are refused."""
    run = tmp_path / "run"
    shutil.copytree(FORMAT2, run)
    os.symlink(run, tmp_path / "alias")
    trial = mldbg.create_trial(str(tmp_path / "alias"))
    assert np.all(np.isfinite(trial.read(_raw_record(trial)).astype(np.float64)))


def test_the_dashboard_api_does_not_serve_a_file_linked_out_of_the_run(tmp_path, secret):
    """A loopback dashboard has no token: whoever can put a folder in the sweep folder it
    serves must not read the dashboard user's files through its JSON API."""
    from tests.dashboard.helpers import Server, run_url

    sweep = tmp_path / "sweep"
    shutil.copytree(FORMAT2, sweep / "run")
    trial = mldbg.create_trial(str(sweep / "run"))
    record = _raw_record(trial)
    (sweep / "run" / DATA).unlink()
    (sweep / "run" / DATA).symlink_to(secret)
    server = Server(str(sweep), "--no-rules")
    try:
        status, body = server.get(run_url("run") + "/histogram", tensor=record.name, step=record.step)
    finally:
        server.stop()
    assert status != 200 and "symbolic link" in str(body), (status, body)
