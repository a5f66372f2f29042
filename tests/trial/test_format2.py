"""A run recorded in format 2 (statistics, no checksums) still reads, value for value, under
format 3 (issue 16: checksums on data and index).

`data/format2_run` was recorded by the format-2 writer (tests/tiny.py's MLP, 3 steps, the
default statistics of `Hook(out_dir)`); `data/format2_run.json` holds what that version's reader
returned for it: steps, names, collections, and per record its statistics, dtype, shape and the
sum of its value."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import mldbg
from mldbg.errors import CorruptRecord
from mldbg.store.format import FORMAT_VERSION

DATA = Path(__file__).parent / "data"


def test_a_format_2_run_reads_as_it_did() -> None:
    expected = json.loads((DATA / "format2_run.json").read_text())
    meta = json.loads((DATA / "format2_run/workers/worker_0/meta.json").read_text())
    assert meta["format"] == 2 < FORMAT_VERSION
    trial = mldbg.create_trial(str(DATA / "format2_run"))
    assert trial.steps() == expected["steps"]
    assert trial.tensor_names() == expected["names"]
    assert trial.collections() == expected["collections"]
    assert {n: trial.vector_statistics(n) for n in trial.tensor_names()} == expected["vector_statistics"]
    assert trial.loaded_all_steps
    for key, want in expected["values"].items():
        step, name = key.split("/", 1)
        record = trial.record(name, int(step))
        assert record.has_raw == want["has_raw"]
        assert json.dumps(dict(record.statistics), sort_keys=True) == json.dumps(
            want["statistics"], sort_keys=True
        )  # NaN too
        assert list(record.shape) == want["shape"] and str(record.dtype) == want["dtype"]
        if want["has_raw"]:
            assert float(np.sum(trial.read(record).astype(np.float64))) == want["sum"]


def test_a_format_2_index_with_a_bad_offset_is_still_refused(tmp_path) -> None:
    """No checksum to verify in format 2, but its values are checked as in format 3."""
    run = tmp_path / "run"
    shutil.copytree(DATA / "format2_run", run)
    index = run / "workers/worker_0/index/0000000001.safetensors"
    blob = bytearray(index.read_bytes())
    n = int.from_bytes(blob[:8], "little")
    start, _ = json.loads(blob[8 : 8 + n])["nbytes"]["data_offsets"]
    blob[8 + n + start] ^= 0x10  # the first record's length, 16 bytes off
    index.write_bytes(bytes(blob))
    with pytest.raises(CorruptRecord, match=r"index/0000000001\.safetensors: row 0: .* bytes do not hold"):
        mldbg.create_trial(str(run))
