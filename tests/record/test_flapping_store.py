"""A store that fails and recovers many times, with different errors (ENOSPC, EDQUOT, EIO,
EROFS) at different moments (the data file, the index that makes it visible, both): training
is never blocked past the bound, every step is either read back with its own value or counted
lost in END (never both, never neither), and the segments stay numbered without gaps."""

from __future__ import annotations

import errno
import os
import random
import threading
import time

import numpy as np
import pytest

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.store import LocalStore


class FlappingStore(LocalStore):
    """While `failing` is set, writes of the keys `which` picks fail with `code`."""

    def __init__(self, root, code, which):
        super().__init__(root)
        self.code = code
        self.which = which
        self.failing = threading.Event()
        self.refused = 0

    def write(self, key, parts):
        if self.failing.is_set() and self.which(key):
            self.refused += 1
            raise OSError(self.code, os.strerror(self.code), str(self.root / key))
        super().write(key, parts)


WHICH = {
    "data": lambda key: "/data/" in key,
    "index": lambda key: "/index/" in key,
    "both": lambda key: "/data/" in key or "/index/" in key,
}


@pytest.mark.parametrize(
    ("code", "which"),
    [(errno.ENOSPC, "index"), (errno.EDQUOT, "data"), (errno.EIO, "both"), (errno.EROFS, "index")],
    ids=["ENOSPC-index", "EDQUOT-data", "EIO-both", "EROFS-index"],
)
def test_a_store_failing_and_recovering_many_times_loses_nothing_silently(tmp_path, code, which):
    store = FlappingStore(tmp_path, code, WHICH[which])
    rec = Recorder(
        store,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        flush_seconds=0.01,
        max_queue_bytes=1 << 17,  # 128 KiB: about 30 steps of 4 KiB
        block_seconds=1.0,
    )
    w = rec.writer
    w.retry_seconds = 0.01
    w.close_seconds = 2.0
    rng = random.Random(code)
    slowest, steps = 0.0, 400
    for i in range(steps):
        if i % 25 == 0:  # 16 outages of a random length, the store answering between them
            store.failing.set() if rng.random() < 0.6 else store.failing.clear()
        t0 = time.perf_counter()
        rec.start_step()
        rec.save("x", np.full(1024, i, np.float32), rec.plan("x", ()))
        rec.end_step()
        slowest = max(slowest, time.perf_counter() - t0)
        time.sleep(0.001)
    store.failing.clear()
    rec.close()
    assert store.refused > 0 and w.failures > 0
    assert slowest < 1.0 + 0.5, slowest  # never blocked past block_seconds

    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps
    read = set(trial.steps())
    lost = {s for a, b in w.lost.ranges for s in range(a, b + 1)}
    assert not read & lost, sorted(read & lost)[:5]
    assert read | lost == set(range(steps)), sorted(set(range(steps)) - read - lost)[:5]
    assert trial.lost_records == len(lost)
    for s in read:
        assert float(trial.tensor("x").value(s)[0]) == s
    index = sorted(os.listdir(tmp_path / "workers/worker_0/index"))
    assert [int(n.split(".")[0]) for n in index] == list(range(1, len(index) + 1))
    assert not [p for p in tmp_path.rglob("*") if ".tmp-" in p.name]
