"""A full disk never hangs training: the writer keeps its backlog in bounded segments encoded
once, drops (and counts) what does not fit while the disk refuses writes, makes progress as
soon as one segment fits again, and the END marker says how much was lost."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from tests.waiting import wait_until

import mldbg
import mldbg.record.writer as writer_module
from mldbg.record.recorder import Recorder
from mldbg.store import LocalStore, layout, markers
from mldbg.store.markers import End


class FullDisk(LocalStore):
    """The real local store on a disk that can fill: while `full` is set every write fails with
    ENOSPC (as `os.write` raises it); `room` (bytes), when not None, lets writes through until
    they have used that much, as a disk with that much free space would."""

    def __init__(self, root):
        super().__init__(root)
        self.full = threading.Event()
        self.room: int | None = None
        self.refused = 0

    def write(self, key, parts):
        size = sum(memoryview(p).nbytes for p in parts)
        if self.full.is_set() and (self.room is None or size > self.room):
            self.refused += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.root / key))
        if self.full.is_set() and self.room is not None:
            self.room -= size
        super().write(key, parts)


def recorder(store, **kw):
    kw.setdefault("flush_seconds", 0.02)
    rec = Recorder(store, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"], **kw)
    assert rec.writer is not None
    rec.writer.retry_seconds = 0.05
    rec.writer.close_seconds = 1.0
    return rec


def step(rec, array):
    t0 = time.perf_counter()
    rec.start_step()
    rec.save("x", array.copy(), rec.plan("x", ()))
    rec.end_step()
    return time.perf_counter() - t0


def test_full_disk_never_blocks_training_and_writes_resume_when_space_returns(tmp_path, caplog):
    store = FullDisk(tmp_path)
    bound = 1 << 20
    rec = recorder(store, max_queue_bytes=bound)  # when_full="block", the default
    w = rec.writer
    big = np.ones(4096, np.float32)  # 16 KiB a step: the bound holds about 60 steps
    with caplog.at_level(logging.INFO, logger="mldbg"):
        for _ in range(10):
            step(rec, big)
        rec.flush()
        store.full.set()  # the disk fills
        slowest, peak = 0.0, 0
        for _ in range(300):
            slowest = max(slowest, step(rec, big))
            peak = max(peak, w._queued_bytes)
        wait_until(lambda: w.dropped > 0, 30, "steps dropped while the disk is full")
        # training went on: no step waited for the disk, memory stayed within the bound
        assert slowest < 1.0 and w.blocked_seconds < 1.0
        assert peak <= bound
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        first = errors[0]  # one clear message naming the place, the error and what is queued
        assert str(tmp_path) in first and "No space left on device" in first
        assert "records" in first and "KiB" in first and "bound 1.0 MiB" in first
        assert len([e for e in errors if "cannot write to" in e]) == 1  # not one per retry
        store.full.clear()  # space comes back: what waited is written, training records again
        wait_until(lambda: w.failed_records == 0 and w._queued_bytes == 0, 30, "the backlog written")
        assert "writing to" in caplog.text and "again" in caplog.text
        for _ in range(20):
            step(rec, big)
        rec.close()
    trial = mldbg.create_trial(tmp_path)
    steps = trial.steps()
    assert steps[:10] == list(range(10)) and steps[-20:] == list(range(310, 330))
    assert len(steps) + w.dropped == 330 and w.unwritten == 0
    # the END marker and the trial say how much was lost, and which steps
    end = markers.load(store, layout.end_key("worker_0"), End)
    assert end is not None and end.lost_records == w.dropped == trial.lost_records
    assert end.lost_steps == w.dropped and end.first_lost_step >= 10 and end.last_lost_step < 310
    assert trial.loaded_all_steps and trial.lost() == w.lost.describe()
    assert set(steps).isdisjoint(range(end.first_lost_step, end.last_lost_step + 1))


def test_backlog_is_encoded_once_and_drains_a_segment_at_a_time(tmp_path, monkeypatch):
    encoded = []
    real = writer_module.encode_index
    monkeypatch.setattr(writer_module, "encode_index", lambda *a: encoded.append(1) or real(*a))
    store = FullDisk(tmp_path)
    rec = recorder(store, max_queue_bytes=8 << 20, flush_seconds=0.01)
    w = rec.writer
    store.full.set()
    array = np.ones(64 * 1024, np.float32)  # 256 KiB a step
    for _ in range(20):
        step(rec, array)
        time.sleep(0.02)  # a few steps per segment
    wait_until(lambda: store.refused >= 10, 30, "retries of the full disk")
    sealed = len(w._sealed)
    assert sealed >= 3 and len(encoded) == sealed  # retries re-encode nothing
    assert max(s.size for s in w._sealed) < 2 << 20  # bounded segments, not one giant backlog
    assert w.written_segments == 0 and w.failed_records == 20
    store.room = 3 * max(s.size for s in w._sealed) // 2  # a little space comes back
    wait_until(lambda: w.written_segments >= 1, 30, "a segment written into the space freed")
    time.sleep(0.3)
    assert 1 <= w.written_segments < sealed  # progress, as far as the space goes
    partial = mldbg.create_trial(tmp_path).steps()
    assert partial and partial == list(range(len(partial)))  # the oldest steps first, no holes
    store.full.clear()
    rec.close()
    assert len(encoded) == sealed  # the rest went out as sealed, none re-encoded
    assert mldbg.create_trial(tmp_path).steps() == list(range(20)) and w.lost_records == 0


def test_disk_still_full_at_exit_gives_up_counted_in_end(tmp_path, caplog):
    store = FullDisk(tmp_path)
    rec = recorder(store)
    for _ in range(5):
        step(rec, np.ones(16, np.float32))
    rec.flush()
    store.full.set()
    store.room = 4096  # room for the small END marker, not for the data
    for _ in range(7):
        step(rec, np.ones(4096, np.float32))
    with caplog.at_level(logging.ERROR, logger="mldbg"):
        t0 = time.monotonic()
        rec.close()
    assert time.monotonic() - t0 < 10  # it gave up after close_seconds, it did not hang
    assert rec.writer.unwritten == 7 and "lost 7 records of 7 steps (5..11)" in caplog.text
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == list(range(5)) and trial.loaded_all_steps
    assert trial.lost_records == 7 and trial.lost() == "7 records of 7 steps (5..11)"
    ls = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "ls", str(tmp_path)], capture_output=True, text=True
    )
    assert ls.returncode == 0, ls.stderr
    assert "finished, 7 records of 7 steps (5..11) lost" in ls.stdout


@pytest.fixture
def small_disk(tmp_path):
    """A real 8 MiB tmpfs (needs mount rights: root in a container that allows it)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    try:
        out = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True, text=True
        )
    except OSError as e:
        pytest.skip(f"cannot run mount: {e}")
    if out.returncode != 0:
        pytest.skip(f"mount of a small tmpfs not permitted here: {out.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_real_small_filesystem_fills_and_recovers(small_disk, caplog):
    run = small_disk / "run"
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (6 << 20))  # 2 MiB left for the run
    rec = recorder(LocalStore(run), max_queue_bytes=2 << 20)
    w = rec.writer
    array = np.arange(32 * 1024, dtype=np.float32)  # 128 KiB a step
    slowest = 0.0
    with caplog.at_level(logging.ERROR, logger="mldbg"):
        for _ in range(60):  # 7.5 MiB: the disk fills around step 15
            slowest = max(slowest, step(rec, array))
        wait_until(lambda: w.failed_records > 0, 30, "the disk full")
        assert slowest < 1.0 and w.blocked_seconds < 1.0 and w.dropped > 0
        assert "No space left on device" in caplog.text and str(run) in caplog.text
        filler.unlink()  # space comes back
        wait_until(lambda: w.failed_records == 0 and w._queued_bytes == 0, 30, "the backlog written")
        for _ in range(5):
            step(rec, array)
        rec.close()
    trial = mldbg.create_trial(run)
    steps = trial.steps()
    assert steps[-5:] == list(range(60, 65)) and len(steps) + trial.lost_records == 65
    assert trial.lost_records == w.dropped > 0
    assert np.array_equal(trial.tensor("x").value(steps[-1]), array)
    assert not [p for p in Path(run).rglob("*") if ".tmp-" in p.name]  # failed writes left no temp file


def test_a_large_segment_the_disk_refuses_is_split_to_fit(tmp_path):
    store = FullDisk(tmp_path)
    rec = recorder(store, max_queue_bytes=64 << 20, flush_seconds=30)  # one 4 MiB segment
    w = rec.writer
    for _ in range(16):
        step(rec, np.ones(64 * 1024, np.float32))  # 256 KiB a step
    store.full.set()
    store.room = 1536 << 10  # 1.5 MiB free: less than the segment
    rec.flush()  # sealed and refused, then split once into segments of at most 1 MiB
    wait_until(lambda: w.written_segments >= 1 and store.refused >= 2, 30, "a split segment written")
    assert max(s.size for s in w._sealed) <= 1 << 20
    partial = mldbg.create_trial(tmp_path).steps()
    assert 2 <= len(partial) < 16 and partial == list(range(len(partial)))
    store.full.clear()
    rec.close()
    assert mldbg.create_trial(tmp_path).steps() == list(range(16)) and w.lost_records == 0
    assert not list((tmp_path / "workers" / "worker_0" / "data").glob("*.tmp-*"))
