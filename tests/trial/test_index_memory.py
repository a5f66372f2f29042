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
