"""Columns that hold the same numbers are held once (issue 30, a run of 10^6 steps): tensors
saved at the same steps share their step, mode and mode-step columns, a tensor saved at every
step of the run reads the run's step table, a statistic of one value at every record is that
value broadcast, and a segment's own step columns are dropped once its records are gathered.
Each read gives what a column of its own gave."""

from __future__ import annotations

import numpy as np
import pytest

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.trial.columns import Columns

STEPS = 600  # more than the 256 records from which step columns are shared


def write(out: str, tensors: int = 70) -> None:
    """A loss every step; the statistics of `tensors` parameters every 2nd step (a `nan_count`
    of 0 throughout, a `mean` that moves); a segment every 100 steps."""
    rec = Recorder(out, save_config=mldbg.SaveConfig(save_interval=1))
    for step in range(STEPS):
        rec.start_step(mldbg.Mode.TRAIN)
        rec.save_scalar("loss", 1.0 / (1 + step))
        if step % 2 == 0:
            stats = {f"w{i}": {"mean": step + i / 100, "nan_count": 0.0} for i in range(tensors)}
            layout = {f"w{i}": ("F32", (4,), ()) for i in range(tensors)}
            rec.save_statistics(lambda s=stats: s, layout, 16 * tensors)
        rec.end_step()
        if step % 100 == 99:
            rec.flush()
    rec.close()


def test_same_numbers_held_once_and_read_the_same(tmp_path):
    write(str(tmp_path))
    trial = mldbg.create_trial(tmp_path)
    names = [f"w{i}" for i in range(70)]
    columns = Columns.of(trial)
    first = columns.tensor("w0")  # decodes every tensor
    assert first is not None
    even = np.arange(0, STEPS, 2)
    for name in names:
        records = trial.records(name)
        np.testing.assert_array_equal(records.step, even)
        np.testing.assert_array_equal(records.mode_step, even)
        assert records.step.dtype == np.int64 and not records.step.flags.writeable
        assert np.shares_memory(records.step, trial.records("w0").step)  # one copy for all
    loss = trial.records("loss")
    np.testing.assert_array_equal(loss.step, np.arange(STEPS))
    assert loss.step.dtype == np.int64 and not loss.step.flags.writeable
    np.testing.assert_array_equal(trial.steps(), np.arange(STEPS))
    w5 = columns.tensor("w5")
    assert w5 is not None
    np.testing.assert_array_equal(w5.statistic("mean"), even + 0.05)
    zeros = w5.statistic("nan_count")
    assert zeros is not None and zeros.strides == (0,)  # one value, broadcast
    np.testing.assert_array_equal(zeros, np.zeros(len(even)))
    for seg in trial._index._segments:  # gathered: the tensors hold the steps
        assert "step" not in seg.columns and len(seg) == len(seg.columns["nbytes"])
    # what a record says is what was written
    record = trial.records("w3")[10]
    assert (record.step, record.mode_step, record.statistics["mean"]) == (20, 20, 20.03)
    assert trial.read(trial.records("loss")[7]) == np.float32(1.0 / 8)


def test_crc32_of_rows_is_zlibs():
    """The checksums of small records, computed together, are zlib's CRC-32 of each."""
    import zlib

    from mldbg.trial.columns import crc32_rows

    rng = np.random.default_rng(0)
    for size in (0, 1, 2, 4, 7, 8, 16, 33, 64):
        rows = rng.integers(0, 256, size=(40, size), dtype=np.uint8)
        assert crc32_rows(rows).tolist() == [zlib.crc32(r.tobytes()) for r in rows]


def test_a_changed_small_record_is_caught_when_stacked(tmp_path):
    """A loss record whose bytes changed after they were written: `stacked` says which."""
    import pytest

    from mldbg.errors import CorruptRecord

    write(str(tmp_path), tensors=2)
    trial = mldbg.create_trial(tmp_path)
    record = trial.records("loss")[150]
    _, seg, row = record._at
    index = trial._index
    c = index._segments[seg].columns
    offset = int(c["offset"][row])
    path = tmp_path / index._segments[seg].data_key
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecord, match="loss at step 150: checksum mismatch"):
        trial.stacked("loss", np.arange(len(trial.records("loss"))))


@pytest.mark.parametrize("slow", [False, True])
def test_statistics_held_as_one_value_until_one_differs(monkeypatch, slow):
    """`gather_statistics` holds a column as one value while every value written to it is
    the same bits (`_Uniform`), and writes it out when one differs, in a later group of
    segments too: the columns are what writing every entry into a NaN column gives (then
    broadcast where all its values are the same bits), for a column the same throughout, one
    that changes in its last segment, 0.0 next to -0.0, and (`slow`) a segment whose records
    saved different statistics (one written at some records only: `_scatter`'s table)."""
    from mldbg.trial import columns as C

    monkeypatch.setattr(C, "_GROUP_ENTRIES", 200)  # several groups of segments
    keys = ["same", "late", "some", "zero"]
    segments, rows_per = 6, 40
    reductions, key_ids = {}, {}
    for s in range(segments):
        rows, codes, values = [], [], []
        for r in range(rows_per):
            for code, key in enumerate(keys):
                if key == "some" and (not slow or s != 2 or r % 3):
                    continue
                v = {"same": 0.0, "late": 1.0 if s < segments - 1 else 2.0, "some": 5.0}.get(key)
                if key == "zero":
                    v = -0.0 if (s == 3 and r == 7) else 0.0
                rows.append(r)
                codes.append(code)
                values.append(v)
        reductions[s] = (np.asarray(rows), np.asarray(codes), np.asarray(values, dtype=np.float64))
        key_ids[s] = np.arange(len(keys))
    # two tensors: the even rows of every segment, and the odd rows (load order)
    picks = [[(s, r) for s in range(segments) for r in range(p, rows_per, 2)] for p in (0, 1)]
    seg = np.asarray([s for pick in picks for s, _ in pick])
    row = np.asarray([r for pick in picks for _, r in pick])
    got = C.gather_statistics([len(p) for p in picks], seg, row, reductions, key_ids, keys)
    for pick, cols in zip(picks, got, strict=True):
        want: dict[str, np.ndarray] = {}
        for i, (s, r) in enumerate(pick):
            rows, codes, values = reductions[s]
            for code, value in zip(codes[rows == r].tolist(), values[rows == r].tolist(), strict=True):
                want.setdefault(keys[code], np.full(len(pick), np.nan))[i] = value
        assert sorted(cols) == sorted(want)
        for key, col in want.items():
            expect = C._constant(col)
            assert np.array_equal(cols[key].view(np.int64), expect.view(np.int64)), key
            assert (cols[key].strides == (0,)) == (expect.strides == (0,)), key
    assert got[0]["same"].strides == (0,) and got[0]["late"].strides != (0,)
    assert not slow or got[0]["some"].strides != (0,)  # NaN where not written


def test_the_layout_of_a_statistics_only_record_from_the_index(tmp_path):
    """`TrialView.layout` of a record saved with statistics only reads its dtype kind and
    shape from the index's columns (`Trial.layout_at`, no `Record` built): what the record
    says, as the reference path (`columns=False`) reads it."""
    from mldbg.rules.view import TrialView

    rec = Recorder(str(tmp_path), save_config=mldbg.SaveConfig(save_interval=1))
    layouts = {"a": ("F32", (4,), ()), "b": ("I64", (2, 3), ()), "c": ("BF16", (5,), ()), "d": ("U8", (), ())}
    for step in range(6):
        rec.start_step(mldbg.Mode.TRAIN)
        stats = {name: {"mean": float(step)} for name in layouts}
        rec.save_statistics(lambda s=stats: s, layouts, 64)
        rec.end_step()
    rec.close()
    trial = mldbg.create_trial(tmp_path)
    fast, reference = TrialView(trial), TrialView(trial, columns=False)
    for name in layouts:
        for step in range(6):
            rec_ = trial.records(name, step)[0]
            want = (rec_.dtype.kind, rec_.shape)
            assert fast.layout(name, step) == want == reference.layout(name, step), (name, step)
    assert fast.layout("a", 99) is None
