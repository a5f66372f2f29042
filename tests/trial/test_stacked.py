"""`Trial.stacked`: a small tensor's values over many steps in one array, read with one read
of their span (records close together) or one read each (records scattered among large
ones), every record's CRC-32 verified on both ways, as `Trial.read` verifies it."""

from __future__ import annotations

import numpy as np
import pytest

import mldbg
from mldbg.errors import CorruptRecord
from mldbg.record.recorder import Recorder


def write(out: str, big: int, steps: int = 4) -> None:
    """A 3-value tensor `s` every step beside a tensor `b` of `big` float32 values."""
    rec = Recorder(
        out,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        collection_configs=[mldbg.CollectionConfig("all", include_regex=["^[sb]$"])],
    )
    for step in range(steps):
        rec.start_step(mldbg.Mode.TRAIN)
        rec.save("s", np.asarray([step, step + 0.5, -step], dtype=np.float32), rec.plan("s", ()))
        rec.save("b", np.full(big, step, dtype=np.float32), rec.plan("b", ()))
        rec.end_step()
    rec.close()


def flip(run, value: np.ndarray) -> None:
    """Flip one bit of the only copy of `value`'s bytes in the run's data files."""
    want = value.tobytes()
    hits = []
    for path in (run / "workers" / "worker_0" / "data").iterdir():
        blob = path.read_bytes()
        if blob.count(want) == 1:
            hits.append((path, blob, blob.index(want)))
    assert len(hits) == 1, "the value's bytes were not found once"
    path, blob, at = hits[0]
    damaged = bytearray(blob)
    damaged[at + 1] ^= 0x10
    path.write_bytes(bytes(damaged))


# 1,000 values: the span of `s` is read at once; 400,000 (1.6 MB a step): `s` read record by record
@pytest.mark.parametrize("big", [1_000, 400_000])
def test_stacked_values_equal_the_reads_and_a_flipped_bit_is_a_corrupt_record(tmp_path, big):
    write(str(tmp_path), big)
    trial = mldbg.create_trial(tmp_path)
    positions = np.arange(len(trial.records("s")))
    stacked = trial.stacked("s", positions)
    assert stacked is not None and stacked.shape == (4, 3)
    expected = np.stack([trial.tensor("s").value(step) for step in trial.tensor("s").steps()])
    np.testing.assert_array_equal(stacked, expected)
    flip(tmp_path, expected[2])
    damaged = mldbg.create_trial(tmp_path)
    with pytest.raises(CorruptRecord, match=r"s at step 2: checksum mismatch"):
        damaged.stacked("s", positions)
    with pytest.raises(CorruptRecord):
        damaged.tensor("s").value(2)  # the per-record read says the same
    np.testing.assert_array_equal(damaged.stacked("s", positions[:2]), expected[:2])  # the others read
