"""The run's markers (meta.json, END, control/stop, control/stop_at): one codec each, used by
the recorder, the trial, the stop action and the watcher; damage is a CorruptRecord naming the file."""

import json
import time
import uuid

import numpy as np
import pytest

import mldbg
from mldbg.errors import CorruptRecord, TrainingStopped
from mldbg.record.recorder import Recorder
from mldbg.store import MemoryStore, layout, markers
from mldbg.store.format import FORMAT_VERSION
from mldbg.store.markers import End, StopAt, StopRequest, WorkerMeta

EXAMPLES = [
    (
        layout.meta_key("worker_0"),
        WorkerMeta(
            worker="worker_0",
            rank=0,
            world_size=2,
            expected_workers=2,
            framework="torch",
            host="h",
            pid=42,
            started=1700000000.5,
        ),
    ),  # fmt: skip
    (layout.end_key("worker_0"), End(last_step=9, ended=1700000100.25, stopped=True)),
    (
        layout.STOP_REQUEST,
        StopRequest(
            reason="exploding_tensor at step 3: ...",
            rule="exploding_tensor",
            step=3,
            requested=1700000050.0,
            by="mldbg watch",
            findings=({"rule": "exploding_tensor", "step": 3},),
        ),
    ),  # fmt: skip
    (layout.STOP_AT, StopAt(step=12, request=1700000050.0, worker=0)),
]


IDS = [type(m).__name__ for _, m in EXAMPLES]


def store():
    return MemoryStore(f"markers-{uuid.uuid4().hex}")


@pytest.mark.parametrize(("key", "marker"), EXAMPLES, ids=IDS)
def test_round_trip_through_a_store(key, marker):
    s = store()
    assert markers.load(s, key, type(marker)) is None  # absent: None, not an error
    markers.save(s, key, marker)
    assert markers.load(s, key, type(marker)) == marker
    assert isinstance(json.loads(s.read(key)), dict)  # plain JSON, readable from any language


@pytest.mark.parametrize(("key", "marker"), EXAMPLES, ids=IDS)
@pytest.mark.parametrize("damage", [b"", b"{not json", b"[1, 2]", b"\xff\xfe", b'"text"'])
def test_damage_is_a_corrupt_record_naming_the_file(key, marker, damage):
    s = store()
    s.write(key, [damage])
    with pytest.raises(CorruptRecord) as err:
        markers.load(s, key, type(marker))
    assert f"{s.url}/{key}" in str(err.value)


@pytest.mark.parametrize(
    ("kind", "fields", "named"),
    [
        (WorkerMeta, {"rank": "0"}, "rank"),
        (WorkerMeta, {"expected_workers": True}, "expected_workers"),
        (WorkerMeta, {"started": "yesterday"}, "started"),
        (End, {"last_step": 1.5}, "last_step"),
        (End, {"stopped": "yes"}, "stopped"),
        (StopRequest, {"requested": [1]}, "requested"),
        (StopRequest, {"findings": ["not an object"]}, "findings"),
        (StopAt, {"step": "3"}, "step"),
        (StopAt, {"request": 1.0}, "step"),  # no step at all
    ],
)
def test_a_field_of_the_wrong_type_is_named(kind, fields, named):
    with pytest.raises(CorruptRecord) as err:
        kind.decode(json.dumps(fields).encode(), "memory://x/k")
    assert "memory://x/k" in str(err.value)
    assert repr(named) in str(err.value)


def test_missing_fields_take_defaults_and_unknown_ones_are_ignored():
    meta = WorkerMeta.decode(b'{"worker": "worker_3", "future_key": {"a": 1}}', "w")
    assert (meta.worker, meta.expected_workers, meta.format, meta.started) == (
        "worker_3",
        1,
        FORMAT_VERSION,
        None,
    )
    assert End.decode(b"{}", "e") == End()
    request = StopRequest.decode(b'{"requested": 5}', "s")
    assert (request.reason, request.requested) == ("", 5.0)


def test_meta_of_a_newer_format_is_refused_with_what_to_do():
    blob = json.dumps({"format": FORMAT_VERSION + 1, "worker": "worker_0"}).encode()
    with pytest.raises(CorruptRecord, match="upgrade mldbg"):
        WorkerMeta.decode(blob, "memory://run/workers/worker_0/meta.json")


def record_steps(out, steps=3):
    rec = Recorder(  # stop requests looked for at every step end (the default: every 0.1 s)
        out, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"], stop_check_seconds=0
    )
    for _ in range(steps):
        rec.start_step(mldbg.Mode.TRAIN)
        rec.save("a", np.ones(3, np.float32), rec.plan("a", ()))
        rec.end_step()
    return rec


def test_the_recorder_writes_both_worker_markers_through_the_codecs(tmp_path):
    rec = record_steps(str(tmp_path))
    s = rec.store
    meta = markers.load(s, layout.meta_key("worker_0"), WorkerMeta)
    assert meta is not None
    assert (meta.format, meta.worker, meta.expected_workers) == (FORMAT_VERSION, "worker_0", 1)
    assert markers.load(s, layout.end_key("worker_0"), End) is None  # still training
    rec.close()
    end = markers.load(s, layout.end_key("worker_0"), End)
    assert end == End(last_step=2, ended=end.ended, stopped=False, last_segment=1)
    # the files keep the documented keys (FORMAT.md)
    assert set(json.loads(s.read(layout.end_key("worker_0")))) == {
        "last_step",
        "ended",
        "stopped",
        "last_segment",
        "mode_steps",  # each mode's steps seen (mldbg ls), written by the recorder
    }
    assert json.loads(s.read(layout.meta_key("worker_0")))["format"] == FORMAT_VERSION


def test_a_damaged_end_names_the_file_or_is_skipped(tmp_path):
    record_steps(str(tmp_path)).close()
    (tmp_path / layout.end_key("worker_0")).write_bytes(b'{"last_step": ')
    with pytest.raises(CorruptRecord, match="worker_0/END"):
        mldbg.create_trial(str(tmp_path))
    with pytest.warns(RuntimeWarning, match="worker_0/END"):
        trial = mldbg.create_trial(str(tmp_path), on_corrupt="skip")
        assert trial.steps() == [0, 1, 2]
        assert not trial.loaded_all_steps  # the end could not be read: the run is not known complete


def test_a_damaged_stop_request_still_stops_the_training(tmp_path):
    rec = record_steps(str(tmp_path), steps=1)
    rec.store.write(layout.STOP_REQUEST, [b"{damaged"])
    rec.start_step(mldbg.Mode.TRAIN)
    with pytest.raises(TrainingStopped, match="damaged stop request"):
        rec.end_step()
    assert markers.load(rec.store, layout.end_key("worker_0"), End).stopped


def test_a_damaged_stop_request_left_before_the_start_is_removed(tmp_path):
    s = MemoryStore(f"markers-{uuid.uuid4().hex}")
    s.write(layout.STOP_REQUEST, [b"[]"])
    rec = record_steps(s, steps=2)  # trains on: the request was not for this run
    assert not s.exists(layout.STOP_REQUEST)
    rec.close()


def test_an_old_request_is_removed_and_a_new_one_stops(tmp_path):
    s = MemoryStore(f"markers-{uuid.uuid4().hex}")
    markers.save(s, layout.STOP_REQUEST, StopRequest(reason="old", requested=1.0))
    rec = record_steps(s, steps=2)
    assert not s.exists(layout.STOP_REQUEST)
    markers.save(s, layout.STOP_REQUEST, StopRequest(reason="now", requested=time.time()))
    rec.start_step(mldbg.Mode.TRAIN)
    with pytest.raises(TrainingStopped, match="now"):
        rec.end_step()
