"""What the reading side keeps of a run (issue 30): the index's columns are arrays of their own
(no index file's bytes held once a segment is loaded), the statistics columns are decoded once
per trial and shared by its readers, and `stacked_many` stacks a tensor only when every record
has its first record's dtype, size and shape."""

from __future__ import annotations

import numpy as np

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.rules.view import TrialView
from mldbg.trial.columns import Columns


def write(out: str, steps: int = 6) -> None:
    """`s` (3 values) every step, `m` (6 values, shape (2, 3) at even steps, (3, 2) at odd
    ones) and statistics of `w`; a segment every two steps."""
    rec = Recorder(
        out,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        collection_configs=[mldbg.CollectionConfig("all", include_regex=["^[sm]$"])],
    )
    for step in range(steps):
        rec.start_step(mldbg.Mode.TRAIN)
        rec.save("s", np.asarray([step, step + 0.5, -step], dtype=np.float32), rec.plan("s", ()))
        shape = (2, 3) if step % 2 == 0 else (3, 2)
        rec.save("m", np.arange(6, dtype=np.float32).reshape(shape) + step, rec.plan("m", ()))
        stats = {"w": {"mean": step + 0.25, "l2": 2.0 * step}}
        rec.save_statistics(lambda s=stats: s, {"w": ("F32", (4,), ())}, 16)
        rec.end_step()
        if step % 2 == 1:
            rec.flush()
    rec.close()


def test_the_index_holds_no_file_bytes_and_reads_the_same(tmp_path):
    write(str(tmp_path))
    trial = mldbg.create_trial(tmp_path)
    index = trial._index
    assert len(index._segments) >= 3
    for seg in index._segments:
        for key, column in seg.columns.items():
            assert column.base is None, key  # its own memory, not a view into the file's bytes
        assert "name_id" not in seg.columns
    for reductions in index._segment_reductions:
        assert all(a.base is None for a in reductions)
    # what is read through the compact columns: the values, shapes and statistics written
    for i, record in enumerate(trial.records("s")):
        np.testing.assert_array_equal(trial.read(record), np.asarray([i, i + 0.5, -i], dtype=np.float32))
    assert [r.shape for r in trial.records("m")] == [(2, 3) if i % 2 == 0 else (3, 2) for i in range(6)]
    assert [r.statistics["mean"] for r in trial.records("w")] == [i + 0.25 for i in range(6)]
    np.testing.assert_array_equal(trial.statistic_columns("w")["l2"], 2.0 * np.arange(6))


def test_stacked_many_leaves_out_a_tensor_whose_shape_changes(tmp_path):
    write(str(tmp_path))
    trial = mldbg.create_trial(tmp_path)
    asked = {n: np.arange(len(trial.records(n))) for n in ("s", "m")}
    got = trial.stacked_many(asked, 1024)
    assert sorted(got) == ["s"]  # `m`: same size and dtype, another shape at odd steps
    np.testing.assert_array_equal(got["s"], [[i, i + 0.5, -i] for i in range(6)])
    assert trial.stacked("m", asked["m"]) is None  # as `stacked` says of it


def test_the_readers_of_a_trial_share_its_columns(tmp_path):
    write(str(tmp_path))
    trial = mldbg.create_trial(tmp_path)
    first, second = TrialView(trial), TrialView(trial)
    assert first.columns is second.columns is Columns.of(trial)
    w = first.columns.tensor("w")
    assert w is not None and w.has_statistics
    np.testing.assert_array_equal(w.statistic("mean"), np.arange(6) + 0.25)
    assert Columns.of(mldbg.create_trial(tmp_path)) is not first.columns  # another trial: its own


def test_statistics_released_once_decoded_are_read_again_the_same(tmp_path, monkeypatch):
    """Once every tensor's statistics are decoded into columns, the index drops its copy of
    them (where they are large: here any size) and reads a segment's again from its index
    file when a record's statistics are asked: the same numbers, the same columns."""
    from mldbg.trial import index as index_module

    write(str(tmp_path))
    kept = mldbg.create_trial(tmp_path)
    want = [(r.step, dict(r.statistics), dict(r.reductions)) for r in kept.records("w")]
    want_columns = kept.statistic_columns("w")

    monkeypatch.setattr(index_module, "_RELEASE_BYTES", 0)
    monkeypatch.setattr(index_module, "_RELOADED", 1)  # read again at each change of segment
    trial = mldbg.create_trial(tmp_path)
    columns = TrialView(trial).columns.tensor("w")
    assert columns is not None and columns.statistic("mean") is not None
    index = trial._index
    assert all(r is None for r in index._segment_reductions)  # released
    got = [(r.step, dict(r.statistics), dict(r.reductions)) for r in trial.records("w")]
    assert got == want
    assert len(index._reloaded) <= 1
    again = trial.statistic_columns("w")
    assert again.keys() == want_columns.keys()
    for key, col in want_columns.items():
        np.testing.assert_array_equal(again[key], col)
    np.testing.assert_array_equal(columns.statistic("mean"), want_columns["mean"])


def test_a_small_run_keeps_its_statistics(tmp_path):
    write(str(tmp_path))
    trial = mldbg.create_trial(tmp_path)
    assert TrialView(trial).columns.tensor("w") is not None
    assert all(r is not None for r in trial._index._segment_reductions)


def test_large_saved_statistics_are_not_held_from_the_opening(tmp_path, monkeypatch):
    """Beyond `_RELEASE_BYTES` the index does not keep a segment's saved statistics as it
    loads it (a run of 10^6 steps held ~220 MB of them until they were decoded): decoding
    reads them again from the index file, and gives the same columns and records."""
    from mldbg.trial import index as index_module

    write(str(tmp_path))
    kept = mldbg.create_trial(tmp_path)
    want = [(r.step, dict(r.statistics), dict(r.reductions)) for r in kept.records("w")]
    want_columns = kept.statistic_columns("w")

    monkeypatch.setattr(index_module, "_RELEASE_BYTES", 0)
    trial = mldbg.create_trial(tmp_path)
    index = trial._index
    assert any(index._segment_entries) and all(r is None for r in index._segment_reductions)
    columns = TrialView(trial).columns.tensor("w")
    assert columns is not None
    for key, col in want_columns.items():
        np.testing.assert_array_equal(columns.statistic(key), col)
    assert [(r.step, dict(r.statistics), dict(r.reductions)) for r in trial.records("w")] == want


def _write_workers(out: str, rank: int, world_size: int, names: int) -> None:
    rec = Recorder(
        out,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_workers="all",
        rank=rank,
        world_size=world_size,
    )
    for step in range(3):
        rec.start_step(mldbg.Mode.TRAIN)
        for i in range(names):
            rec.save_scalar(f"m{i:02d}", float(step + rank))
        rec.end_step()
    rec.close()


def test_the_worker_column_of_one_worker_and_of_two(tmp_path):
    """Each record's worker id, gathered one tensor at a time (few tensors) or for all of them
    together (many): zeros for a run of one worker (not gathered), the writer's id for a run
    of two, written one after the other."""
    for names in (3, 20):  # `_append`, `_gather_pending`
        one = str(tmp_path / f"one{names}")
        _write_workers(one, 0, 1, names)
        trial = mldbg.create_trial(one)
        for i in range(names):
            records = trial.records(f"m{i:02d}")
            assert records.worker.dtype == np.int64 and records.worker.tolist() == [0, 0, 0]
        two = str(tmp_path / f"two{names}")
        _write_workers(two, 1, 2, names)  # worker_1 first
        _write_workers(two, 0, 2, names)
        trial = mldbg.create_trial(two)
        for i in range(names):
            records = trial.records(f"m{i:02d}")
            got = [
                (records.workers[w], float(trial.read(records[k])))
                for k, w in enumerate(records.worker.tolist())
            ]
            assert sorted(got) == sorted((f"worker_{r}", float(s + r)) for r in (0, 1) for s in range(3))
