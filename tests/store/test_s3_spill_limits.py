"""The spill folder of an unreachable bucket is bounded (`spill_max_bytes`), and a full or
unwritable disk under it is survived: writes past the bound are dropped, counted and reported
(rate-limited) with the folder and the bound; what was spilled before stays and is uploaded;
training never blocks and never raises."""

from __future__ import annotations

import logging
import os
import time
import uuid

import numpy as np
import pytest

import mldbg
from mldbg.errors import InvalidConfig, StoreFull
from mldbg.record.recorder import Recorder
from mldbg.store import layout, open_store
from mldbg.store.s3 import DEFAULT_SPILL_MAX_BYTES, S3Options, S3Store

try:
    from .s3server import BUCKET, point_env_at
except ImportError:
    from s3server import BUCKET, point_env_at

DATA = "workers/worker_0/data/"


def drop_warnings(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "dropping" in r.getMessage()
    ]


def test_the_bound_is_a_setting(monkeypatch, tmp_path):
    monkeypatch.setenv("MLDBG_S3_SPILL_DIR", str(tmp_path))
    monkeypatch.delenv("MLDBG_S3_SPILL_MAX_MB", raising=False)
    assert S3Store("s3://b/run").options.spill_max_bytes == DEFAULT_SPILL_MAX_BYTES == 4 << 30
    assert S3Store("s3://b/run", S3Options(spill_max_bytes=1000)).options.spill_max_bytes == 1000
    assert open_store("s3://b/run", spill_max_bytes=1000).options.spill_max_bytes == 1000
    monkeypatch.setenv("MLDBG_S3_SPILL_MAX_MB", "2.5")
    assert S3Store("s3://b/run").options.spill_max_bytes == int(2.5 * (1 << 20))
    monkeypatch.setenv("MLDBG_S3_SPILL_MAX_MB", "lots")
    with pytest.raises(InvalidConfig, match="MLDBG_S3_SPILL_MAX_MB"):
        S3Store("s3://b/run")
    with pytest.raises(InvalidConfig, match="spill_max_bytes.*not an s3:// URL"):
        open_store(tmp_path / "local", spill_max_bytes=1000)


def test_writes_past_the_bound_are_dropped_and_the_rest_uploaded(
    own_s3_server, monkeypatch, tmp_path, caplog
):
    point_env_at(own_s3_server, monkeypatch, str(tmp_path / "spill"))
    url = f"s3://{BUCKET}/bound-{uuid.uuid4().hex[:8]}"
    store = S3Store(url, S3Options(block_seconds=0.3, spill_max_bytes=10_000))
    own_s3_server.stop()
    kept, dropped = [], []
    with caplog.at_level(logging.WARNING, logger="mldbg"):
        waited = []  # seconds each dropped write took
        for i in range(1, 11):
            key = f"{DATA}{i:010d}.safetensors"
            t0 = time.monotonic()
            try:
                store.write(key, [bytes([i]) * 3000])
                kept.append(key)
            except StoreFull as e:
                waited.append(time.monotonic() - t0)
                assert str(store.spill_dir) in str(e) and "9.8 KiB" in str(e)
                dropped.append(key)
        store.write("workers/worker_0/END", [b"{}"])  # the run's markers are kept past the bound
        # nobody waits on a full spill folder: a drop is answered at once, not after
        # block_seconds (0.3 s) of waiting (the median: a loaded machine may delay one)
        assert sorted(waited)[len(waited) // 2] < 0.1, waited
        assert len(kept) == 3 and len(dropped) == 7
        assert store.dropped == 7 and store.dropped_bytes == 7 * 3000
        assert sum(p.stat().st_size for p in store.spill_dir.glob("*.obj")) <= 10_000 + 2
        warned = drop_warnings(caplog)
        assert len(warned) == 1, warned  # rate-limited: one for the seven
        assert url in warned[0] and str(store.spill_dir) in warned[0] and "bound of 9.8 KiB" in warned[0]
        assert "1 so far" in warned[0]
        store.uploader.drops.warn_every = 0.0
        with pytest.raises(StoreFull):
            store.write(f"{DATA}{11:010d}.safetensors", [b"x" * 3000])
        assert "8 so far" in drop_warnings(caplog)[-1]  # counted

        own_s3_server.start()
        assert store.drain(30)
        store.close()
    reader = open_store(url)
    assert reader.list(DATA) == kept
    assert [reader.read(k) for k in kept] == [bytes([i]) * 3000 for i in (1, 2, 3)]
    assert reader.read("workers/worker_0/END") == b"{}"
    assert "8 writes" in caplog.records[-1].getMessage()  # and once more at close
    # the bucket is back: writes go through again
    store.write(f"{DATA}{12:010d}.safetensors", [b"y"])
    assert reader.read(f"{DATA}{12:010d}.safetensors") == b"y"


# block_seconds: a step that waited on the bucket takes at least this long, far above a step's own
# time on a loaded machine
STEP_BOUND = 1.5


def record_steps(rec: Recorder, steps: range, pause: float = 0.0) -> float:
    """One 16 KiB tensor a step, a segment each; the slowest step."""
    slowest = 0.0
    for step in steps:
        t0 = time.perf_counter()
        rec.start_step()
        rec.save("x", np.full(4096, step, dtype=np.float32), rec.plan("x", ()))
        rec.end_step()
        slowest = max(slowest, time.perf_counter() - t0)
        rec.flush()
        time.sleep(pause)
    return slowest


def test_training_goes_on_past_the_bound(own_s3_server, monkeypatch, tmp_path, caplog):
    point_env_at(own_s3_server, monkeypatch, str(tmp_path / "spill"))
    monkeypatch.setenv("MLDBG_S3_BLOCK_SECONDS", str(STEP_BOUND))
    url = f"s3://{BUCKET}/bound-training-{uuid.uuid4().hex[:8]}"
    own_s3_server.stop()
    with caplog.at_level(logging.WARNING, logger="mldbg"):
        rec = Recorder(
            open_store(url, spill_max_bytes=64 << 10), save_config=mldbg.SaveConfig(save_interval=1),
            include_collections=["all"],
        )  # fmt: skip
        slowest = record_steps(rec, range(20))
        assert rec.writer.store_dropped >= 15 and rec.writer.blocked_seconds == 0
        assert slowest < STEP_BOUND
        assert rec.store.options.spill_max_bytes == 64 << 10
        assert rec.store.dropped > 0 and rec.store.pending > 0
        own_s3_server.start()
        assert rec.store.drain(30)
        record_steps(rec, range(20, 23))  # the bucket answers: nothing is dropped any more
        rec.close()
    assert rec.writer.store_dropped == 20 - (rec.writer.written_segments - 3)
    warned = drop_warnings(caplog)
    assert len(warned) == 1 and "bound of 64.0 KiB" in warned[0]
    trial = mldbg.create_trial(url)
    kept = 20 - rec.writer.store_dropped
    assert trial.steps() == [*range(kept), 20, 21, 22]  # the first steps, then the ones after the outage
    for step in trial.steps():
        np.testing.assert_array_equal(trial.tensor("x").value(step), np.full(4096, step, np.float32))
    # segments stay numbered without gaps: a dropped segment's number is used again
    keys = open_store(url).list(layout.index_prefix("worker_0"))
    assert keys == [layout.index_key("worker_0", i) for i in range(1, kept + 4)]


def test_an_unwritable_spill_folder_never_stops_training(own_s3_server, monkeypatch, tmp_path, caplog):
    blocker = tmp_path / "spill"
    blocker.write_text("a file where the spill folder should be")
    point_env_at(own_s3_server, monkeypatch, str(blocker))
    monkeypatch.setenv("MLDBG_S3_BLOCK_SECONDS", str(STEP_BOUND))
    url = f"s3://{BUCKET}/unwritable-{uuid.uuid4().hex[:8]}"
    own_s3_server.stop()
    with caplog.at_level(logging.WARNING, logger="mldbg"):
        rec = Recorder(url, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"])
        slowest = record_steps(rec, range(5))
        assert slowest < STEP_BOUND and rec.writer.blocked_seconds == 0
        assert rec.writer.store_dropped == 5 and rec.store.pending == 0
        own_s3_server.start()
        record_steps(rec, range(5, 15), pause=0.15)  # over a second: the store probes the bucket again
        rec.close()
    warned = drop_warnings(caplog)
    assert len(warned) == 1, warned
    assert str(blocker) in warned[0] and "cannot be written" in warned[0] and url in warned[0]
    steps = mldbg.create_trial(url).steps()
    assert steps[-1] == 14 and len(steps) == 15 - rec.writer.store_dropped
    assert 0 not in steps


def test_a_full_disk_keeps_what_was_spilled(own_s3_server, monkeypatch, tmp_path, caplog):
    """ENOSPC from the kernel: the next spill files are links to /dev/full."""
    point_env_at(own_s3_server, monkeypatch, str(tmp_path / "spill"))
    url = f"s3://{BUCKET}/full-{uuid.uuid4().hex[:8]}"
    store = S3Store(url, S3Options(block_seconds=0.3))
    own_s3_server.stop()
    store.write(f"{DATA}{1:010d}.safetensors", [b"first"])
    full = [store.spill_dir / f"{seq:012d}.obj" for seq in range(2, 6)]
    for link in full:
        os.symlink("/dev/full", link)
    with caplog.at_level(logging.WARNING, logger="mldbg"):
        for i in range(2, 6):
            with pytest.raises(StoreFull, match="No space left on device"):
                store.write(f"{DATA}{i:010d}.safetensors", [b"lost"])
    warned = drop_warnings(caplog)
    assert len(warned) == 1 and str(store.spill_dir) in warned[0] and "No space left" in warned[0]
    assert store.dropped == 4 and store.pending == 1
    assert not any(p.is_symlink() for p in full)  # nothing half-written is left behind
    store.write(f"{DATA}{6:010d}.safetensors", [b"after"])  # the disk has room again
    own_s3_server.start()
    assert store.drain(30)
    store.close()
    reader = open_store(url)
    assert reader.list(DATA) == [f"{DATA}{1:010d}.safetensors", f"{DATA}{6:010d}.safetensors"]
    assert reader.read(f"{DATA}{6:010d}.safetensors") == b"after"
