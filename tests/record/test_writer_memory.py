"""The memory bound counts what records really cost (objects, names, headers), not only tensor
bytes: on a store that stalls, the process grows by about `max_queue_bytes`, whatever is saved."""

from __future__ import annotations

import gc
import threading
import tracemalloc
import warnings

import numpy as np

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.store import LocalStore


class StalledStore(LocalStore):
    """The real local store on a disk that hangs: segment writes wait until `go` is set."""

    def __init__(self, root):
        super().__init__(root)
        self.go = threading.Event()

    def write(self, key, parts):
        if "/data/" in key or "/index/" in key:
            self.go.wait(60)
        super().write(key, parts)


def grow(tmp_path, bound, save_step, steps):
    """Record `steps` steps on a stalled store; the traced growth (current, peak) in bytes."""
    store = StalledStore(tmp_path)
    rec = Recorder(
        store,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        max_queue_bytes=bound,
        when_full="drop",
        flush_seconds=0.05,
    )
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the drop warning: asserted elsewhere
            for i in range(steps):
                rec.start_step()
                save_step(rec, i)
                rec.end_step()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        store.go.set()
        rec.close()
    assert rec.writer is not None and rec.writer.dropped > 0  # the bound was reached
    return current - base, peak - base, rec


def test_scalars_on_a_stalled_store_stay_within_the_bound(tmp_path):
    def save_step(rec, i):
        rec.save_scalar("loss", float(i))
        rec.save_scalar("lr", 0.1)

    bound = 1 << 20
    current, peak, rec = grow(tmp_path, bound, save_step, 10_000)
    # counting 8 bytes a scalar, the old bound let all 20,000 records (6.3 MiB) pile up here
    assert peak < 1.5 * bound, f"{peak / 2**20:.1f} MiB for a bound of 1 MiB"
    assert rec.writer.lost_records == rec.writer.dropped


def test_many_small_tensors_a_step_stay_near_the_bound(tmp_path):
    names = [f"t{j}" for j in range(2000)]

    def save_step(rec, i):
        for name in names:  # 2,000 1-KiB tensors a step
            rec.save(name, np.full(256, i, np.float32), rec.plan(name, ()))

    bound = 8 << 20
    step_batch = 2000 * (1024 + 800)  # one step's records exist before they are handed over
    current, peak, _ = grow(tmp_path, bound, save_step, 20)
    assert current < 1.1 * bound, f"{current / 2**20:.1f} MiB held for a bound of 8 MiB"
    assert peak < 1.1 * bound + step_batch, f"peak {peak / 2**20:.1f} MiB for a bound of 8 MiB"
