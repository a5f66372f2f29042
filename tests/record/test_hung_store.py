"""A store whose writes never return (a hung NFS mount, a stalled bucket) blocks training at
most `block_seconds`, even with `when_full="block"`: the step that waited that long is dropped
and counted with one clear line, later steps that do not fit drop at once until a write
returns, and `close()` and the END marker are bounded too; END counts every step lost."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest
from tests.waiting import wait_until

import mldbg
from mldbg.errors import StoreError
from mldbg.record.recorder import Recorder
from mldbg.store import LocalStore


class HungStore(LocalStore):
    """The real local store, but while `hang` is set a write of a segment (and, with
    `hang_markers`, of a marker) waits until `gate` opens, as a write to a hung mount does."""

    def __init__(self, root, hang_markers=False):
        super().__init__(root)
        self.hang = threading.Event()
        self.gate = threading.Event()
        self.hang_markers = hang_markers
        self.waiting = 0

    def write(self, key, parts):
        segment = "/data/" in key or "/index/" in key
        if self.hang.is_set() and (segment or self.hang_markers):
            self.waiting += 1
            self.gate.wait()
        super().write(key, parts)


def recorder(store, **kw):
    return Recorder(
        store,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        flush_seconds=0.02,
        max_queue_bytes=1 << 18,  # 256 KiB: about 15 steps of 16 KiB
        **kw,
    )


def step(rec, i):
    t0 = time.perf_counter()
    rec.start_step()
    rec.save("x", np.full(4096, i, np.float32), rec.plan("x", ()))
    rec.end_step()
    return time.perf_counter() - t0


def test_a_store_that_never_answers_blocks_training_at_most_block_seconds(tmp_path, caplog):
    store = HungStore(tmp_path)
    rec = recorder(store, block_seconds=0.5)  # when_full="block", the default
    w = rec.writer
    with caplog.at_level(logging.INFO, logger="mldbg"):
        for i in range(10):
            step(rec, i)
        rec.flush()
        store.hang.set()  # the mount hangs: the next segment write never returns
        t0 = time.perf_counter()
        times = [step(rec, i) for i in range(10, 200)]
        total = time.perf_counter() - t0
        # one submit waited the bound; after it, nothing waits while the store does not answer
        assert max(times) < 0.5 + 1.0, max(times)
        assert sorted(times)[-2] < 0.2, sorted(times)[-3:]
        assert total < 0.5 + 3.0, total
        assert w.dropped > 0 and w.blocked_seconds < 1.5
        stalls = [r for r in caplog.records if "has not returned for" in r.getMessage()]
        assert len(stalls) == 1, [r.getMessage() for r in stalls]
        line = stalls[0].getMessage()
        assert str(tmp_path) in line and "block_seconds" in line and "\n" not in line

        store.gate.set()  # the mount answers again: the writer gets on, training waits again
        wait_until(lambda: not w._stalled, 10, "the writer noticed the store answers")
        for i in range(200, 230):
            step(rec, i)
        rec.close()
    assert any("answers writes again" in r.getMessage() for r in caplog.records)

    trial = mldbg.create_trial(tmp_path)
    steps = trial.steps()
    assert set(range(10)) <= set(steps) and set(range(200, 230)) <= set(steps)
    # every step is either read back, with its own value, or counted lost in END: none both
    lost = {s for a, b in w.lost.ranges for s in range(a, b + 1)}
    assert not lost & set(steps)
    assert set(steps) | lost == set(range(230))
    assert trial.lost_records == w.lost.records == len(lost)
    for s in steps:
        assert float(trial.tensor("x").value(s)[0]) == s


@pytest.mark.parametrize("markers_hang", [False, True], ids=["segments hang", "END hangs too"])
def test_close_on_a_store_that_never_answers_is_bounded_and_counts_the_loss(tmp_path, caplog, markers_hang):
    store = HungStore(tmp_path, hang_markers=markers_hang)
    rec = recorder(store, block_seconds=0.5)
    for i in range(5):
        step(rec, i)
    rec.flush()
    store.hang.set()
    for i in range(5, 40):
        step(rec, i)
    t0 = time.perf_counter()
    with caplog.at_level(logging.INFO, logger="mldbg"):
        rec.close()
    took = time.perf_counter() - t0
    assert took < 0.5 * 2 + 4.0, took  # the bound twice, and a loaded machine's delays
    w = rec.writer
    assert w.lost.records == 35 and w.lost.first_step == 5 and w.lost.last_step == 39
    assert any("given up at close" in r.getMessage() for r in caplog.records)
    trial = mldbg.create_trial(tmp_path)
    assert set(range(5)) <= set(trial.steps())
    if markers_hang:  # END could not be written either: said in one line, the run is not "finished"
        assert any("cannot write the end marker" in r.getMessage() for r in caplog.records)
        assert not trial.loaded_all_steps
    else:
        assert trial.loaded_all_steps and trial.lost_records == 35
    store.gate.set()  # the abandoned writer thread's write returns: it touches nothing more
    time.sleep(0.3)
    assert w.lost.records == 35


def test_block_seconds_is_a_hook_option_and_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="block_seconds"):
        recorder(LocalStore(tmp_path / "a"), block_seconds=0)
    rec = recorder(LocalStore(tmp_path / "b"), block_seconds=3.5)
    assert rec.writer.block_seconds == 3.5
    rec.close()


class HungMetaStore(LocalStore):
    """The real local store, but while `hang` is set a write of `meta.json` waits until `gate`
    opens (a mount that hangs as the hook starts); `log` keeps the order of marker writes."""

    def __init__(self, root):
        super().__init__(root)
        self.hang = threading.Event()
        self.gate = threading.Event()
        self.log = []

    def write(self, key, parts):
        if self.hang.is_set() and key.endswith("meta.json"):
            self.gate.wait()
        super().write(key, parts)
        self.log.append(("write", key))

    def delete(self, key):
        super().delete(key)
        self.log.append(("delete", key))


@pytest.mark.parametrize("answers", ["while training", "after close"])
def test_a_meta_write_that_hangs_does_not_hold_the_hook(tmp_path, caplog, answers):
    """The hook starts after `block_seconds` at most, with one line naming the store; training
    records; meta.json is written when the store answers, and a late start never removes the
    END that close() wrote (the run reads as finished, every step there)."""
    store = HungMetaStore(tmp_path)
    store.hang.set()
    t0 = time.perf_counter()
    with caplog.at_level(logging.INFO, logger="mldbg"):
        rec = recorder(store, block_seconds=0.5)
    took = time.perf_counter() - t0
    assert 0.4 < took < 0.5 + 3.0, took  # the bound, and a loaded machine's delays
    lines = [r.getMessage() for r in caplog.records if "did not answer" in r.getMessage()]
    assert len(lines) == 1 and str(tmp_path) in lines[0] and "block_seconds" in lines[0], lines
    assert "meta.json" in lines[0] and "\n" not in lines[0]
    meta = tmp_path / "workers" / "worker_0" / "meta.json"
    assert not meta.exists()
    times = [step(rec, i) for i in range(20)]
    assert max(times) < 0.2, max(times)  # training is not held
    rec.flush()
    if answers == "while training":
        store.gate.set()
        wait_until(lambda: meta.exists() and not rec._markers_thread.is_alive(), timeout=10)
        times = [step(rec, i) for i in range(20, 30)]
        rec.close()
    else:
        rec.close()
        assert (tmp_path / "workers" / "worker_0" / "END").exists()
        store.gate.set()  # the start markers land now: meta.json, then END removed and rewritten
        wait_until(lambda: not rec._markers_thread.is_alive(), timeout=10)
        assert meta.exists()
        keys = [(op, k.rsplit("/", 1)[-1]) for op, k in store.log if k.endswith(("END", "meta.json"))]
        assert keys[-3:] == [("write", "meta.json"), ("delete", "END"), ("write", "END")], keys
    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps and trial.lost_records == 0
    assert trial.steps() == list(range(30 if answers == "while training" else 20))
    assert rec._holding is None  # the proof of the process is released with the run


def test_a_meta_write_that_fails_at_once_still_raises(tmp_path):
    """Within the bound, an error of the store is the hook's error, as before."""
    (tmp_path / "workers" / "worker_0").mkdir(parents=True)
    (tmp_path / "workers" / "worker_0" / "meta.json").mkdir()  # a folder where the file goes
    with pytest.raises(StoreError, match="meta.json: Is a directory"):
        recorder(LocalStore(tmp_path), block_seconds=5)
