"""The recorder's writer: back-pressure with bounded memory, and a store that fails."""

import logging
import time

import numpy as np
import pytest
from tests.waiting import wait_until

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.store import LocalStore


class SlowStore(LocalStore):
    """A real local store on a slow disk: each write takes `delay` seconds."""

    def __init__(self, root, delay):
        super().__init__(root)
        self.delay = delay

    def write(self, key, parts):
        if "/data/" in key:
            time.sleep(self.delay)
        super().write(key, parts)


def test_backpressure_blocks_with_bounded_memory(tmp_path):
    store = SlowStore(tmp_path, 0.2)
    rec = Recorder(
        store,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        max_queue_bytes=1 << 20,
        flush_seconds=0.01,
    )
    big = np.ones(128 * 1024, dtype=np.float32)  # 512 KiB
    peak = 0
    for _ in range(12):
        rec.start_step()
        rec.save("x", big.copy(), rec.plan("x", ()))
        rec.end_step()
        peak = max(peak, rec.writer._queued_bytes)
    rec.close()
    assert peak <= 1 << 20
    assert rec.writer.blocked_seconds > 0
    assert mldbg.create_trial(tmp_path).steps() == list(range(12))  # blocking loses nothing


def test_backpressure_drop_counts_and_warns(tmp_path):
    store = SlowStore(tmp_path, 0.3)
    rec = Recorder(
        store,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        max_queue_bytes=1 << 20,
        when_full="drop",
        flush_seconds=0.01,
    )
    big = np.ones(128 * 1024, dtype=np.float32)
    with pytest.warns(RuntimeWarning, match="dropped"):
        for _ in range(12):
            rec.start_step()
            rec.save("x", big.copy(), rec.plan("x", ()))
            rec.end_step()
    rec.close()
    assert rec.writer.dropped > 0
    assert len(mldbg.create_trial(tmp_path).steps()) == 12 - rec.writer.dropped


def test_unwritable_store_never_breaks_training(tmp_path, caplog):
    rec = Recorder(
        tmp_path,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        flush_seconds=0.01,
    )
    rec.writer.retry_seconds = 0.05
    blocker = tmp_path / "workers" / "worker_0" / "data"
    blocker.write_text("a file where a folder should be: every data write fails")
    with caplog.at_level(logging.ERROR, logger="mldbg"):
        for _ in range(3):
            rec.start_step()
            rec.save("x", np.ones(4), rec.plan("x", ()))
            rec.end_step()
        wait_until(lambda: "will retry" in caplog.text, 30, "the writer's report of the failed write")
        assert "data" in caplog.text
        blocker.unlink()  # the disk comes back
        rec.close()
    assert mldbg.create_trial(tmp_path).steps() == [0, 1, 2]
