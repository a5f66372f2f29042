"""The asynchronous writer: the training thread hands records over and goes on.

A background thread turns host copies into NumPy arrays, computes reductions, merges the
statistics computed on the device into the records of their tensors, batches many
records into one segment (one data file plus one index file) and writes it when the segment
is large enough or `flush_seconds` old. Memory is bounded: past `max_queue_bytes` the
training thread waits (`when_full="block"`) or the records are dropped and counted
(`when_full="drop"`). Store errors never reach training: the segment is kept and retried,
except when the store says it dropped the write (`StoreFull`: an unreachable bucket whose local
spill folder is full), where the segment is counted in `store_dropped` and its number reused.
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mldbg.errors import MldbgError, StoreFull
from mldbg.store import layout
from mldbg.store.base import Store
from mldbg.store.format import (
    FORMAT_VERSION,
    Record,
    dtype_name,
    encode_index,
    encode_safetensors,
    numpy_dtype,
    to_numpy_value,
)
from mldbg.store.reductions import reduce_all
from mldbg.store.statistics import Statistic, vector_name

log = logging.getLogger("mldbg")

HostArray = np.ndarray | Callable[[], tuple[np.ndarray, str]]


@dataclass
class Pending:
    """A record whose array may still be a device-to-host copy in flight."""

    name: str
    step: int
    mode: int
    mode_step: int
    source: Any  # np.ndarray, or a callable returning (array, dtype name)
    nbytes: int
    raw: bool
    reductions: tuple[tuple[str, bool], ...]
    collections: tuple[str, ...]

    def materialize(self) -> Record:
        if callable(self.source):
            array, dt = self.source()
        else:
            array = np.asarray(self.source)
            dt = dtype_name(array)
        reds = reduce_all(to_numpy_value(array, dt), self.reductions) if self.reductions else {}
        return Record(
            name=self.name,
            step=self.step,
            mode=self.mode,
            mode_step=self.mode_step,
            array=np.ascontiguousarray(array) if self.raw else None,
            dtype=dt,
            shape=tuple(array.shape),
            reductions=reds,
            collections=self.collections,
        )


@dataclass(frozen=True)
class TensorInfo:
    """What a record of a tensor known only by its statistics says of it."""

    dtype: str  # safetensors dtype name
    shape: tuple[int, ...]
    collections: tuple[str, ...]


StatisticsValues = Mapping[str, Mapping[str, float | np.ndarray]]  # tensor -> key -> value


@dataclass
class PendingStatistics:
    """The statistics of one step's tensors, maybe still being computed on a device: `values()`
    gives {tensor: {key: value}} (it waits for the device copy), called on the writer thread."""

    step: int
    mode: int
    mode_step: int
    values: Callable[[], StatisticsValues]
    tensors: Mapping[str, TensorInfo]
    nbytes: int

    def merge(self, records: dict[str, Record]) -> list[Record]:
        """Scalar statistics join the step's record of their tensor (`records`: the step's
        records by name; a reductions-only record is made where there is none); each vector
        statistic becomes a record `stats/<tensor>/<key>` (or replaces the step's one). Returns
        the records to add; `records` gets them too."""
        new: list[Record] = []
        for name, values in self.values().items():
            scalars: dict[str, float] = {}
            for key, value in values.items():
                dtype = _vector_dtype(key)
                if dtype is None:
                    scalars[key] = float(value)
                    continue
                array = np.ascontiguousarray(value, dtype=numpy_dtype(dtype))
                vname = vector_name(name, key)
                if vname in records:  # asked twice in one step: one record, the last value
                    records[vname].array, records[vname].shape = array, tuple(array.shape)
                    continue
                records[vname] = Record(
                    vname, self.step, self.mode, self.mode_step, array, dtype, array.shape
                )
                new.append(records[vname])
            if not scalars:
                continue
            record = records.get(name)
            if record is None:
                info = self.tensors.get(name)
                if info is None:
                    log.debug("mldbg: statistics of %r at step %d: unknown tensor, dropped", name, self.step)
                    continue
                record = Record(
                    name, self.step, self.mode, self.mode_step, None, info.dtype, info.shape,
                    collections=info.collections,
                )  # fmt: skip
                records[name] = record
                new.append(record)
            record.statistics.update(scalars)
        return new


@functools.lru_cache(maxsize=4096)
def _vector_dtype(key: str) -> str | None:
    """The storage dtype of a vector statistic, None for a scalar one."""
    stat = Statistic.parse(key)
    return stat.dtype if stat.is_vector else None


def materialize(batch: list[Pending | PendingStatistics]) -> list[Record]:
    """One submitted batch (one step) as records: host copies turned into arrays, reductions
    computed, statistics merged into the records of their tensors. A tensor that fails is
    logged and left out; the others are kept."""
    out: list[Record] = []
    by_step: dict[int, dict[str, Record]] = {}
    for p in batch:
        if isinstance(p, Pending):
            try:
                record = p.materialize()
            except Exception as e:  # a bad tensor must not stop the others
                log.error("mldbg: cannot record %r at step %d: %s", p.name, p.step, e)
                continue
            out.append(record)
            by_step.setdefault(record.step, {}).setdefault(record.name, record)
    for p in batch:
        if isinstance(p, PendingStatistics):
            try:
                out.extend(p.merge(by_step.setdefault(p.step, {})))
            except Exception as e:
                log.error("mldbg: cannot record the statistics of step %d: %s", p.step, e)
    return out


class WriterClosed(MldbgError):
    pass


_FLUSH = object()


class Writer:
    def __init__(
        self,
        store: Store,
        worker: str,
        *,
        flush_seconds: float = 0.5,
        segment_bytes: int = 64 << 20,
        max_queue_bytes: int = 512 << 20,
        when_full: str = "block",
        retry_seconds: float = 1.0,
    ):
        if when_full not in ("block", "drop"):
            raise ValueError(f"when_full must be 'block' or 'drop', got {when_full!r}")
        self.store = store
        self.worker = worker
        self.flush_seconds = flush_seconds
        self.max_queue_bytes = max_queue_bytes
        self.segment_bytes = min(segment_bytes, max(1, max_queue_bytes // 2))
        self.when_full = when_full
        self.retry_seconds = retry_seconds
        self.dropped = 0  # records dropped because the queue was full (when_full="drop")
        self.store_dropped = 0  # records the store could not keep (StoreFull)
        self.written_records = 0
        self.written_segments = 0
        self.blocked_seconds = 0.0
        self._queue: collections.deque[Any] = collections.deque()
        self._queued_bytes = 0
        self._cond = threading.Condition()
        self._closed = False
        self._seq = self._next_seq()
        self.failed_records = 0  # records of a segment that could not be written yet
        self._last_error = ""
        self._thread = threading.Thread(target=self._run, name=f"mldbg-writer-{worker}", daemon=True)
        self._thread.start()

    def _next_seq(self) -> int:
        """Continue after the segments already in the store (a resumed job appends). An S3 store
        that cannot list yet numbers them itself once the bucket answers."""
        return self.store.next_segment(self.worker)

    # training thread -------------------------------------------------------------------
    def submit(self, batch: list[Pending | PendingStatistics]) -> bool:
        """Queue a step's records. False when they were dropped (queue full, `when_full="drop"`)."""
        if not batch:
            return True
        nbytes = sum(p.nbytes for p in batch)
        with self._cond:
            if self._closed:
                raise WriterClosed("the hook is closed; nothing more is recorded")
            if self._backlog() and self._backlog() + nbytes > self.max_queue_bytes:
                if self.when_full == "drop":
                    self.dropped += len(batch)
                    if self.dropped == len(batch) or self.dropped % 1000 < len(batch):
                        warnings.warn(
                            f"mldbg: writer for {self.store.url} is behind; {self.dropped} records "
                            "dropped so far (when_full='drop'). Save less often or use reductions.",
                            RuntimeWarning,
                            stacklevel=3,
                        )
                    return False
                t0 = time.perf_counter()
                while self._backlog() and self._backlog() + nbytes > self.max_queue_bytes:
                    if self._closed:
                        raise WriterClosed("the hook was closed while waiting for the writer")
                    self._cond.wait(1.0)
                self.blocked_seconds += time.perf_counter() - t0
            self._queue.append(batch)
            self._queued_bytes += nbytes
            self._cond.notify_all()
        return True

    def _backlog(self) -> int:
        return self._queued_bytes

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything submitted so far is written (or has failed and is kept)."""
        done = threading.Event()
        with self._cond:
            if not self._thread.is_alive():
                return
            self._queue.append((_FLUSH, done))
            self._cond.notify_all()
        done.wait(timeout)

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        if self.failed_records:
            log.error(
                "mldbg: %d records could not be written to %s: %s",
                self.failed_records,
                self.store.url,
                self._last_error,
            )

    # writer thread ---------------------------------------------------------------------
    def _run(self) -> None:
        """Batch records into segments. Bytes stay counted against `max_queue_bytes` from
        `submit` until their segment is written, so memory is bounded end to end."""
        pending: list[Record] = []
        held = 0  # bytes of `pending`, as counted by submit
        deadline: float | None = None
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                    if wait == 0.0:
                        break
                    self._cond.wait(wait)
                item = self._queue.popleft() if self._queue else None
                if item is None and self._closed:
                    self._write(pending, held)
                    return
            flush_now = item is None or (isinstance(item, tuple) and item[0] is _FLUSH)
            if item is not None and not flush_now:
                held += sum(p.nbytes for p in item)
                pending.extend(materialize(item))
                if deadline is None:
                    deadline = time.monotonic() + self.flush_seconds
                flush_now = held >= self.segment_bytes or time.monotonic() >= deadline
            if flush_now:
                if self._write(pending, held):
                    pending, held, deadline = [], 0, None
                else:  # keep them (still counted) and retry later
                    deadline = time.monotonic() + self.retry_seconds
                if isinstance(item, tuple):
                    item[1].set()

    def _write(self, records: list[Record], nbytes: int) -> bool:
        """Write one segment: the data file, then the index that makes it visible."""
        if not records:
            return True
        data_key = layout.data_key(self.worker, self._seq)
        index_key = layout.index_key(self.worker, self._seq)
        raw = [r for r in records if r.array is not None]
        tensors = [(f"{r.step}/{r.name}", r.dtype, r.shape, r.array) for r in raw]
        try:
            offsets_raw: list[int] = []
            if raw:
                parts, offsets_raw = encode_safetensors(
                    tensors, {"mldbg_format": str(FORMAT_VERSION), "worker": self.worker}
                )
                self.store.write(data_key, parts)
            it = iter(offsets_raw)
            offsets = [next(it) if r.array is not None else -1 for r in records]
            self.store.write(index_key, encode_index(records, offsets, self.worker, data_key))
        except StoreFull as e:  # the store reported it (rate-limited); keeping them would only block
            log.debug("mldbg: %d records dropped: %s", len(records), e)
            self.store_dropped += len(records)
            self.failed_records = 0
            with self._cond:
                self._queued_bytes -= nbytes
                self._cond.notify_all()
            return True
        except Exception as e:
            msg = f"{type(e).__name__}: {e}"
            if msg != self._last_error:
                log.error("mldbg: writing %s failed, will retry: %s", index_key, msg)
            self._last_error = msg
            self.failed_records = len(records)
            return False
        self._seq += 1
        self.written_records += len(records)
        self.written_segments += 1
        self.failed_records = 0
        with self._cond:
            self._queued_bytes -= nbytes
            self._cond.notify_all()
        return True
