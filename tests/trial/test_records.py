"""The trial's public index API: `Trial.records`, `Trial.record`, `Trial.read`, `Record`.

Runs are written by the real Recorder (two workers where it matters) and read back through
the API; Tensor, the rules' view and the TensorBoard export read the index only this way.
"""

import json
import struct

import numpy as np
import pytest

import mldbg
from mldbg.config import Mode
from mldbg.errors import InvalidConfig, StepUnavailable, TensorUnavailable, TensorUnavailableForStep
from mldbg.record.recorder import Recorder
from mldbg.rules.view import TrialView
from mldbg.store import layout
from mldbg.store.format import reseal_index
from mldbg.store.reductions import reduce
from mldbg.trial import Record, Records

REDUCED = mldbg.ReductionConfig(reductions=["mean", "max"], abs_reductions=["mean"], norms=["l2"])


def value(name, step, rank=0):
    return np.arange(6, dtype=np.float32).reshape(2, 3) * (step + 1) - len(name) + 10 * rank


def write(out, steps=6, rank=0, world_size=1, eval_every=3, close=True):
    """`w` raw every step; `r` only reductions; an EVAL step after every `eval_every` TRAIN steps."""
    rec = Recorder(
        out,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["raw", "reduced"],
        collection_configs=[
            mldbg.CollectionConfig("raw", include_regex=["^w$"]),
            mldbg.CollectionConfig("reduced", include_regex=["^r$"], reduction_config=REDUCED),
        ],
        include_workers="all",
        rank=rank,
        world_size=world_size,
    )
    for s in range(steps):
        mode = Mode.EVAL if (s + 1) % (eval_every + 1) == 0 else Mode.TRAIN
        rec.start_step(mode)
        for name in ("w", "r"):
            rec.save(name, value(name, s, rank), rec.plan(name, ()))
        rec.end_step()
    if close:
        rec.close()
    return rec


@pytest.fixture
def run(tmp_path):
    write(str(tmp_path))
    return mldbg.create_trial(str(tmp_path))


def test_records_are_numpy_columns_of_every_saved_record(run):
    records = run.records("w")
    assert isinstance(records, Records) and len(records) == 6
    assert records.step.tolist() == [0, 1, 2, 3, 4, 5]
    assert records.mode.tolist() == [1, 1, 1, 2, 1, 1]
    assert records.mode_step.tolist() == [0, 1, 2, 0, 3, 4]
    assert [records.workers[w] for w in records.worker.tolist()] == ["worker_0"] * 6
    assert records.has_raw.all() and not run.records("r").has_raw.any()
    with pytest.raises(ValueError):
        records.step[0] = 99  # read-only: they are the trial's own columns


def test_selecting_a_step_a_mode_or_a_worker(run):
    assert run.records("w", step=3).mode.tolist() == [int(Mode.EVAL)]
    assert run.records("w", step=0, mode=Mode.EVAL).step.tolist() == [3]  # EVAL's own step 0
    assert run.records("w", mode=Mode.TRAIN).mode_step.tolist() == [0, 1, 2, 3, 4]
    assert run.records("w", mode=Mode.GLOBAL).step.tolist() == run.records("w").step.tolist()
    assert len(run.records("w", worker="worker_0")) == 6
    assert len(run.records("w", worker="worker_9")) == 0
    assert len(run.records("w", step=99)) == 0
    with pytest.raises(TensorUnavailable, match="no tensor 'nope'"):
        run.records("nope")


def test_a_record_says_where_it_is_and_what_was_saved(run):
    rec = run.records("r")[-1]
    assert isinstance(rec, Record)
    assert (rec.name, rec.step, rec.mode, rec.mode_step, rec.worker, rec.has_raw) == (
        "r",
        5,
        Mode.TRAIN,
        4,
        "worker_0",
        False,
    )
    x = value("r", 5)
    assert set(rec.reductions) == {("mean", False), ("max", False), ("mean", True), ("l2", False)}
    for (name, is_abs), saved in rec.reductions.items():
        assert saved == pytest.approx(reduce(x, name, is_abs))
    keys = run.store.list(layout.index_prefix("worker_0"))
    assert rec.index_file in [f"{run.store.url}/{k}" for k in keys]
    assert run.records("w")[0].reductions == {}
    with pytest.raises(IndexError):
        run.records("r")[6]


def test_read_gives_the_saved_value_and_refuses_what_it_cannot(run, tmp_path):
    for rec in run.records("w"):
        np.testing.assert_array_equal(run.read(rec), value("w", rec.step))
        np.testing.assert_array_equal(run.read(rec), run.tensor("w").value(rec.step))
    with pytest.raises(TensorUnavailableForStep, match="only reductions of 'r'"):
        run.read(run.records("r")[0])
    other = mldbg.create_trial(str(tmp_path))
    with pytest.raises(InvalidConfig, match="another trial"):
        other.read(run.records("w")[0])


def test_record_is_the_one_a_read_uses(run):
    assert run.record("w", 3).mode == Mode.EVAL
    assert run.record("w", 0, mode=Mode.EVAL).step == 3
    with pytest.raises(StepUnavailable):  # training ended without it
        run.record("w", 2, mode=Mode.EVAL)
    with pytest.raises(TensorUnavailableForStep, match="not saved by worker 'worker_1'"):
        run.record("w", 1, worker="worker_1")


def test_the_first_worker_by_name_unless_one_is_asked_for(tmp_path):
    write(str(tmp_path), steps=3, rank=1, world_size=2)
    write(str(tmp_path), steps=3, rank=0, world_size=2)
    trial = mldbg.create_trial(str(tmp_path))
    records = trial.records("w", step=2)
    assert sorted(records.workers[w] for w in records.worker.tolist()) == ["worker_0", "worker_1"]
    assert trial.record("w", 2).worker == "worker_0"
    np.testing.assert_array_equal(trial.read(trial.record("w", 2, worker="worker_1")), value("w", 2, rank=1))
    assert len(trial.records("w", worker="worker_1")) == 3
    assert trial.tensor("w").workers(2) == ["worker_0", "worker_1"]


def test_records_only_grow_so_a_count_is_a_cursor(tmp_path):
    rec = write(str(tmp_path), steps=2, close=False)
    rec.flush()
    trial = mldbg.create_trial(str(tmp_path))
    first = trial.records("w")
    seen, loaded = len(first), trial.loaded_records
    assert seen == 2 and loaded == 4  # w and r at two steps
    for s in range(2, 5):
        rec.start_step(Mode.TRAIN)
        rec.save("w", value("w", s), rec.plan("w", ()))
        rec.end_step()
    rec.close()
    trial.refresh()
    now = trial.records("w")
    assert trial.loaded_records == loaded + 3
    assert now.step[:seen].tolist() == first.step.tolist()  # what was there stays in place
    assert now.step[seen:].tolist() == [2, 3, 4]
    assert [r.step for r in (now[i] for i in range(seen, len(now)))] == [2, 3, 4]
    assert len(first) == 2  # a Records already handed out does not change under its reader


def test_reduction_codes_of_a_newer_writer_are_ignored(tmp_path):
    write(str(tmp_path), steps=1)
    key = next(iter(mldbg.create_trial(str(tmp_path)).store.list(layout.index_prefix("worker_0"))))
    path = tmp_path / key
    blob = bytearray(path.read_bytes())
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    start, end = header["red_code"]["data_offsets"]
    assert end > start
    blob[8 + n + start] = 15  # a code this version does not know
    path.write_bytes(reseal_index(bytes(blob)))  # a newer writer's file has a valid checksum
    rec = mldbg.create_trial(str(tmp_path)).records("r")[0]
    assert len(rec.reductions) == 3  # the other three are read


def test_the_rules_view_reads_through_the_api(tmp_path):
    write(str(tmp_path), steps=4, rank=1, world_size=2)
    write(str(tmp_path), steps=4, rank=0, world_size=2)
    trial = mldbg.create_trial(str(tmp_path))
    view = TrialView(trial)
    view.refreshed()
    for step in trial.steps():
        view.begin(step)
        assert view.names(step=step) == ["r", "w"]
        first = trial.record("r", step)
        assert view.saved_reductions("r", step) == dict(first.reductions)
        assert view.reduce("r", step, "max") == first.reductions[("max", False)]
        assert view.raw("r", step) is None  # only reductions were saved
        np.testing.assert_array_equal(view.raw("w", step), value("w", step, rank=0))
        assert view.reduce("w", step, "l1") == pytest.approx(reduce(value("w", step), "l1"))
    assert view.saved_reductions("w", 99) == {}


def test_a_record_knows_its_dtype_and_shape_without_raw_bytes(tmp_path):
    """A reductions-only record keeps its tensor's dtype and shape in the index (the rules ask
    whether inputs are float or token ids before trusting their statistics)."""
    write(tmp_path / "run", steps=2, eval_every=10)
    trial = mldbg.create_trial(tmp_path / "run")
    raw, reduced = trial.record("w", 0), trial.record("r", 0)
    assert raw.has_raw and not reduced.has_raw
    for rec in (raw, reduced):
        assert rec.dtype == np.float32 and rec.shape == (2, 3)
    assert trial.read(raw).shape == raw.shape and trial.read(raw).dtype == raw.dtype
