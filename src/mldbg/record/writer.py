"""The asynchronous writer: the training thread hands records over and goes on.

A background thread turns host copies into NumPy arrays, computes reductions, merges the
statistics computed on the device into the records of their tensors, batches many
records into one segment (one data file plus one index file) and writes it when the segment
is large enough or before its oldest record is `flush_seconds` old, and at `close()`.
Memory is bounded: records are counted at what they cost (`record_cost`) from submit until
their segment is written; past `max_queue_bytes` the training thread waits (`when_full="block"`)
or the records are dropped and counted (`when_full="drop"`). Store errors never reach training:
a sealed segment is encoded once and retried alone (split once into 1 MiB segments when it is
larger), and while the store refuses writes (a full disk) submits that do not fit drop their
records rather than wait. When the store says it dropped the write itself (`StoreFull`: an
unreachable bucket whose local spill folder is full), the segment is counted in
`store_dropped` and its number reused. A store whose write never returns (a hung network
file system) blocks training at most `block_seconds`: a submit that waited that long drops its
step, and until a write returns the submits that do not fit drop at once (one error line);
`close()` gives such a write as long, then gives up what is left. Everything lost is counted
in `lost`, which the recorder writes into the END marker.
"""

from __future__ import annotations

import bisect
import collections
import functools
import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
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
    retarget_index,
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


class _Abandoned(BaseException):  # noqa: N818 - past `except Exception`: it ends the writer thread
    """close() gave up on the writer while it was in a store call."""


# What a record costs in memory beyond its array's bytes, from submit until its segment is
# written: the Pending and then the Record (objects, dicts, shape tuple), its NumPy array
# object, its slots in the batch and segment lists, and its share of the encoded headers.
# Measured with tracemalloc on a stalled store (tests/record/test_writer_memory.py): about
# 750 bytes for a 1-KiB tensor saved by an adapter, less for a scalar.
RECORD_COST = 800
STATISTICS_COST = 400  # per tensor of a step's statistics, beyond the values' own bytes
FAILING_SEGMENT_BYTES = 1 << 20  # segments stay this small while the store refuses writes
# a step's records below this many bytes (the loss, statistics) do not wake a writer that holds
# records and waits for their segment's deadline: they join that segment when it wakes (one
# wake of the writer thread per segment, not per step: each wake took the training thread's
# CPU and the GIL, ~1% of a 26 ms CPU step)
SMALL_BATCH_BYTES = 1 << 20


def record_cost(p: Pending | PendingStatistics) -> int:
    """The bytes a submitted record is charged against `max_queue_bytes` (see RECORD_COST)."""
    if isinstance(p, Pending):
        return p.nbytes + RECORD_COST + len(p.name)
    return p.nbytes + STATISTICS_COST * max(1, len(p.tensors))


class Lost:
    """What never reached the store: records, and the steps they belonged to (as ranges, so a
    long outage costs a few numbers, not one per step)."""

    def __init__(self) -> None:
        self.records = 0
        self.ranges: list[list[int]] = []  # sorted, disjoint [first, last] step ranges

    def add(self, records: int, steps: Iterable[int]) -> None:
        self.records += records
        for step in sorted(set(steps)):
            r = self.ranges
            if r and r[-1][0] <= step <= r[-1][1] + 1:  # the common case: steps in order
                r[-1][1] = max(r[-1][1], step)
                continue
            i = bisect.bisect_right(r, [step, step])
            if i and r[i - 1][1] + 1 >= step:
                r[i - 1][1] = max(r[i - 1][1], step)
                i -= 1
            else:
                r.insert(i, [step, step])
            while i + 1 < len(r) and r[i + 1][0] <= r[i][1] + 1:  # merge with the next range
                r[i][1] = max(r[i][1], r.pop(i + 1)[1])

    @property
    def steps(self) -> int:
        return sum(b - a + 1 for a, b in self.ranges)

    @property
    def first_step(self) -> int | None:
        return self.ranges[0][0] if self.ranges else None

    @property
    def last_step(self) -> int | None:
        return self.ranges[-1][1] if self.ranges else None

    def describe(self) -> str:
        """`180 records of 45 steps (76..599)`."""
        if not self.records:
            return "no records"
        span = f"{self.first_step}..{self.last_step}" if self.ranges else "?"
        return f"{self.records} records of {self.steps} steps ({span})"


@dataclass
class Segment:
    """A sealed segment: encoded once, then written as it is (retried as it is, never merged
    with what came after it)."""

    data: list[Any]  # the data file's parts (header and the arrays themselves); [] if none
    index: bytes  # the index file, pointing into data_key(seq)
    seq: int  # the number its index names; the writer retargets it when numbers moved
    records: int
    steps: list[int]
    charge: int  # bytes counted against max_queue_bytes until it is written or dropped
    size: int  # bytes it writes
    oldest: float  # when its oldest record was submitted (time.monotonic())
    # the records themselves, kept while the segment is larger than FAILING_SEGMENT_BYTES: a
    # full disk may have less room than that, and the writer then splits it (once)
    held: list[Record] | None = None
    data_written: bool = False  # the data file is in the store; only the index is left


_FLUSH = object()


def _estimate(old: float, sample: float) -> float:
    """A duration to plan with: up at once to a slower sample, down slowly (a moving average)."""
    return sample if sample > old else 0.9 * old + 0.1 * sample


def _size(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n / 1024:.1f} KiB"


class Writer:
    """The background writer of one worker's records (see the module docstring).

    Records are batched into segments of at most `segment_bytes` (or `flush_seconds` worth of
    steps); a segment is encoded once when sealed and written as it is. When the store fails
    (a full disk), sealed segments wait in order, each retried alone every `retry_seconds`, so
    the writer makes progress as soon as one segment fits (a refused segment larger than 1 MiB
    is split once); while it fails, new segments are sealed at 1 MiB and submits that would pass `max_queue_bytes` drop their records
    (counted in `lost`) instead of blocking training. At `close()` the writer keeps trying for
    `close_seconds`, then gives the rest up (counted too: the END marker says how much).

    `block_seconds` bounds every wait on the store. A store that takes a write and never
    answers (no error to act on: a hung NFS mount) stalls the writer; a submit that waited that
    long (`when_full="block"`) drops its step and says so once, and until a write returns the
    submits that do not fit drop at once. `close()` gives a write in progress as long, then
    gives up what the writer holds (counted).
    """

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
        close_seconds: float = 10.0,
        block_seconds: float = 60.0,
    ):
        if when_full not in ("block", "drop"):
            raise ValueError(f"when_full must be 'block' or 'drop', got {when_full!r}")
        if not block_seconds > 0:
            raise ValueError(f"block_seconds must be > 0, got {block_seconds!r}")
        self.store = store
        self.worker = worker
        self.flush_seconds = flush_seconds
        self.max_queue_bytes = max_queue_bytes
        self.segment_bytes = min(segment_bytes, max(1, max_queue_bytes // 2))
        self.when_full = when_full
        self.retry_seconds = retry_seconds
        self.close_seconds = close_seconds
        self.block_seconds = block_seconds
        self.dropped = 0  # records dropped at submit: queue full (when_full="drop") or store failing
        self.store_dropped = 0  # records the store could not keep (StoreFull)
        self.unwritten = 0  # records given up at close: the store still refused them
        self.lost = Lost()  # all of the above, with their steps
        self.written_records = 0
        self.written_segments = 0
        self.blocked_seconds = 0.0
        self.failures = 0  # failed segment writes
        self._queue: collections.deque[Any] = collections.deque()
        self._queued_bytes = 0
        self._cond = threading.Condition()
        self._closed = False
        self._seq = self._next_seq()
        self._sealed: collections.deque[Segment] = collections.deque()
        self._failing = ""  # the store's error while writes fail, else ""
        # a submit waited block_seconds and no store write returned since: the store hangs
        self._stalled = False
        self._writing_since: float | None = None  # a store write in progress since (monotonic)
        self._abandoned = False  # close() gave up on a writer stuck in a write; it counted the rest
        self._open: list[Record] = []  # the records of the segment being filled (writer thread)
        self._last_error = ""
        self._lost_at_failure = 0
        # how long sealing (encoding) and writing a segment take, and materializing one submitted
        # step: estimates that rise at once with a slow sample and decay slowly (`_estimate`)
        self._seal_seconds = flush_seconds / 8  # a guess, until the first segment tells
        self._write_seconds = flush_seconds / 8
        self._step_seconds = 0.0
        self._deadline: float | None = None  # the writer waits for this segment deadline (monotonic)
        self._thread = threading.Thread(target=self._run, name=f"mldbg-writer-{worker}", daemon=True)
        self._thread.start()

    def _next_seq(self) -> int:
        """Continue after the segments already in the store (a resumed job appends). An S3 store
        that cannot list yet numbers them itself once the bucket answers."""
        return self.store.next_segment(self.worker)

    @property
    def last_segment(self) -> int | None:
        """The number of the last segment written so far (the earlier run's last one for a
        resumed run that wrote nothing yet); None before any and where the store numbers
        segments itself (S3), where this writer's numbers are not final."""
        if self.store.numbers_segments_itself or self._seq <= 1:
            return None
        return self._seq - 1

    @property
    def lost_records(self) -> int:
        return self.lost.records

    @property
    def failed_records(self) -> int:
        """Records sealed but not written because the store refuses writes (0 while it takes them)."""
        if not self._failing:
            return 0
        return sum(s.records for s in list(self._sealed))

    # training thread -------------------------------------------------------------------
    def submit(self, batch: list[Pending | PendingStatistics]) -> bool:
        """Queue a step's records. False when they were dropped: the queue was full and
        `when_full="drop"`, or the store refuses writes (a full disk), where waiting could last
        forever."""
        if not batch:
            return True
        nbytes = sum(record_cost(p) for p in batch)
        with self._cond:
            if self._closed:
                raise WriterClosed("the hook is closed; nothing more is recorded")
            if self._queued_bytes and self._queued_bytes + nbytes > self.max_queue_bytes:
                if self.when_full == "block" and not self._failing and not self._stalled:
                    t0 = time.perf_counter()
                    deadline = time.monotonic() + self.block_seconds
                    while (
                        self._queued_bytes
                        and self._queued_bytes + nbytes > self.max_queue_bytes
                        and not self._failing
                    ):
                        if self._closed:
                            raise WriterClosed("the hook was closed while waiting for the writer")
                        self._cond.notify_all()  # the writer may be waiting for a deadline
                        left = deadline - time.monotonic()
                        if left <= 0:
                            self._stall()
                            break
                        self._cond.wait(min(1.0, left))
                    self.blocked_seconds += time.perf_counter() - t0
                if self._queued_bytes and self._queued_bytes + nbytes > self.max_queue_bytes:
                    self._drop(batch)
                    return False
            self._queue.append((time.monotonic(), batch))
            self._queued_bytes += nbytes
            if self._deadline is None or not self._small(nbytes):
                self._cond.notify_all()  # else it joins the segment the writer seals at its deadline
        return True

    def _small(self, nbytes: int) -> bool:
        """A batch that may wait in the queue for the writer's segment deadline."""
        return nbytes < SMALL_BATCH_BYTES and self._queued_bytes * 4 < self.max_queue_bytes

    def _stall(self) -> None:
        """A submit waited `block_seconds` (called holding the lock): the writer has not got on
        for that long. Say so once per stall; drop what does not fit until a write returns."""
        self._stalled = True
        since = self._writing_since
        doing = (
            f"a write to {self.store.url} has not returned for {time.monotonic() - since:.0f}s"
            if since is not None
            else f"the writer of {self.store.url} has not freed room for {self.block_seconds:g}s"
        )
        log.error(
            "mldbg: %s (block_seconds=%g; a hung network file system or bucket?): %s of records "
            "wait in memory (bound %s, max_queue_bytes); training goes on, and the steps that do not "
            "fit are dropped and counted (the END marker says how many) until the store answers.",
            doing, self.block_seconds, _size(self._queued_bytes), _size(self.max_queue_bytes),
        )  # fmt: skip

    def _drop(self, batch: list[Pending | PendingStatistics]) -> None:
        """Count a batch that does not fit (called holding the lock) and say so, now and then."""
        n = sum(len(p.tensors) if isinstance(p, PendingStatistics) else 1 for p in batch)
        first = self.dropped == 0
        self.dropped += n
        self.lost.add(n, (p.step for p in batch))
        if not (first or self.dropped % 1000 < n):
            return
        if self._stalled and not self._failing:
            if not first:
                log.error(
                    "mldbg: %s still does not answer: %d records dropped so far", self.store.url, self.dropped
                )
        elif self._failing:
            log.error(
                "mldbg: %s refuses writes (%s) and %s of records wait in memory (the bound, "
                "max_queue_bytes): %d records dropped so far. Free space there, or record less.",
                self.store.url, self._failing, _size(self._queued_bytes), self.dropped,
            )  # fmt: skip
        else:
            warnings.warn(
                f"mldbg: writer for {self.store.url} is behind; {self.dropped} records "
                "dropped so far (when_full='drop'). Save less often or use reductions.",
                RuntimeWarning,
                stacklevel=4,
            )

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything submitted so far is written (or has failed and is kept)."""
        done = threading.Event()
        with self._cond:
            if not self._thread.is_alive():
                return
            self._queue.append((_FLUSH, done))
            self._cond.notify_all()
        # a store write that does not return for block_seconds ends the wait (what is held stays
        # queued; close() decides what is lost)
        end = None if timeout is None else time.monotonic() + timeout
        while not done.wait(0.2 if end is None else max(0.0, min(0.2, end - time.monotonic()))):
            since = self._writing_since
            if (end is not None and time.monotonic() >= end) or (
                since is not None and time.monotonic() - since > self.block_seconds
            ):
                return

    def close(self) -> None:
        """Write everything; a store that still refuses writes gets `close_seconds` more, then
        what is left is given up and counted (`unwritten`, `lost`)."""
        if self._closed:
            return
        with self._cond:
            self._queue.append((_FLUSH, threading.Event()))  # everything submitted is sealed
            self._closed = True
            self._cond.notify_all()
        # a writer that gets on is waited for (then `_finish` gives a failing store
        # close_seconds); one stuck in a store write for block_seconds is given up on
        while self._thread.is_alive():
            self._thread.join(0.2)
            since = self._writing_since
            if since is not None and time.monotonic() - since > self.block_seconds and self._abandon():
                break
        if self.lost.records:
            log.error(
                "mldbg: %s lost %s: %s",
                self.store.url,
                self.lost.describe(),
                self._last_error or "the queue was full (when_full='drop')",
            )

    def _abandon(self) -> bool:
        """close() gives up on a writer stuck in a store write: everything it holds is counted
        lost, and the writer thread touches nothing more if the write ever returns. False when
        the write returned meanwhile."""
        with self._cond:
            if self._writing_since is None:
                return False
            self._abandoned = True
            for item in self._queue:
                if item[0] is not _FLUSH:
                    self._count_unwritten(
                        sum(len(p.tensors) if isinstance(p, PendingStatistics) else 1 for p in item[1]),
                        [p.step for p in item[1]],
                    )
            self._queue.clear()
            for seg in self._sealed:
                self._count_unwritten(seg.records, seg.steps)
            self._sealed.clear()
            self._count_unwritten(len(self._open), [r.step for r in self._open])
            self._open = []
            self._queued_bytes = 0
            self._last_error = f"a write did not return within {self.block_seconds:g}s (block_seconds)"
            self._cond.notify_all()
        log.error(
            "mldbg: a write to %s has not returned for %gs (block_seconds): the writer is given up "
            "at close, with what it held",
            self.store.url, self.block_seconds,
        )  # fmt: skip
        return True

    def _count_unwritten(self, records: int, steps: Iterable[int]) -> None:
        if records:
            self.unwritten += records
            self.lost.add(records, steps)

    def _store_call(self, fn: Callable[..., Any], *args: Any) -> None:
        """One store write, timed for `close()` and the stall check; raises `_Abandoned` when
        close() gave up on this writer while it was in the call."""
        with self._cond:
            self._writing_since = time.monotonic()
        try:
            fn(*args)
        finally:
            with self._cond:
                self._writing_since = None
                abandoned = self._abandoned
                if self._stalled and not abandoned:
                    self._stalled = False
                    self._cond.notify_all()
                    log.warning("mldbg: %s answers writes again", self.store.url)
            if abandoned:
                raise _Abandoned

    # writer thread ---------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        except _Abandoned:  # close() counted everything and returned: touch nothing
            return

    def _loop(self) -> None:
        """Materialize submitted steps into the open segment, seal it when it is large enough
        or its oldest record is close to `flush_seconds` old, write sealed segments in order.
        Bytes stay counted against `max_queue_bytes` from `submit` until their segment is
        written (or dropped), so memory is bounded end to end."""
        self._clean_temp()
        records: list[Record] = []
        self._open = records
        charge = 0  # bytes of `records`, as counted by submit
        oldest: float | None = None  # submit time of the oldest record in `records`
        # since when the writer has had no open segment, after it wrote one: the next segment
        # is sealed by this time's deadline (earlier than its records' own), so the small steps
        # submitted meanwhile need not wake the writer: one wake per segment, not two. None:
        # idle for longer than that (the next submit wakes it, as the first one does)
        idle: float | None = None
        retry_at = 0.0
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    now = time.monotonic()
                    wake = []
                    if oldest is not None:
                        wake.append(self._flush_at(oldest))
                    elif idle is not None:
                        if self._flush_at(idle) <= now:
                            idle = None  # nothing came: wait for a submit
                        else:
                            wake.append(self._flush_at(idle))
                    if self._sealed:
                        wake.append(retry_at)
                    if wake and min(wake) <= now:
                        break
                    # a segment's deadline: small submits need not wake the writer before it
                    self._deadline = min(wake) if oldest is not None or idle is not None else None
                    self._cond.wait(min(wake) - now if wake else None)
                    self._deadline = None
                item = self._queue.popleft() if self._queue else None
                if item is not None and oldest is None and idle is not None and item[0] is not _FLUSH:
                    # the segment opens at the idle time: its deadline comes no later than its records'
                    # (one submitted after that deadline opens it at its own time)
                    oldest = min(idle, item[0]) if item[0] <= self._flush_at(idle) else item[0]
                    idle = None
                # a small step submitted before the open segment's deadline joins it
                joins = self._joins(item, oldest)
                closing = item is None and self._closed
            flush = closing or (item is not None and item[0] is _FLUSH)
            if item is not None and not flush:
                submitted, batch = item
                if (
                    records
                    and oldest is not None
                    and not joins
                    and time.monotonic() + self._step_seconds >= self._flush_at(oldest)
                ):
                    # its deadline comes before this step is ready: seal what is there first
                    self._seal(records, charge, oldest)
                    records, charge, oldest = [], 0, None
                self._open = records
                t0 = time.monotonic()
                records.extend(materialize(batch))
                self._step_seconds = _estimate(self._step_seconds, time.monotonic() - t0)
                charge += sum(record_cost(p) for p in batch)
                oldest = submitted if oldest is None else oldest
            limit = min(self.segment_bytes, FAILING_SEGMENT_BYTES) if self._failing else self.segment_bytes
            # only the writer takes from the queue: its head stays while we look at it
            after = self._joins(self._queue[0] if self._queue else None, oldest)
            due_now = time.monotonic() >= self._flush_at(oldest or 0.0) and not after
            if records and (flush or charge >= limit or due_now):
                self._seal(records, charge, oldest or 0.0)
                records, charge, oldest = [], 0, None
                self._open = records
                idle = None if flush else time.monotonic()
            due = self._sealed and (flush or time.monotonic() >= retry_at)
            if due and not self._write_sealed():
                retry_at = time.monotonic() + self.retry_seconds
            if item is not None and item[0] is _FLUSH:
                item[1].set()
            if closing:
                self._finish()
                return

    def _joins(self, item: Any, oldest: float | None) -> bool:
        """Is `item` (a queued step) small and submitted before the deadline of the open
        segment, whose oldest record was submitted at `oldest`? It then goes into that segment."""
        if item is None or oldest is None or item[0] is _FLUSH:
            return False
        submitted, batch = item
        return submitted <= self._flush_at(oldest) and sum(record_cost(p) for p in batch) < SMALL_BATCH_BYTES

    def _clean_temp(self) -> None:
        """Remove the temp files an earlier writer of this worker left when it was killed."""
        try:
            removed = self.store.clean_temp(layout.worker_prefix(self.worker))
        except Exception as e:  # a cleanup must never stop the recording
            log.warning("mldbg: cannot clean temp files in %s: %s", self.store.url, e)
            return
        if removed:
            log.info("mldbg: removed %d temp files a killed writer left in %s", len(removed), self.store.url)

    def _flush_at(self, oldest: float) -> float:
        """When to start writing a segment whose oldest record was submitted at `oldest`: early
        enough that the write ends before it is `flush_seconds` old: the estimated seal and
        write (x1.5), and a quarter of `flush_seconds` for a busy machine, where the writer
        thread gets the CPU late (at load 9-11 on 2 cores it woke up to ~30 ms late)."""
        spend = 1.5 * (self._seal_seconds + self._write_seconds) + 0.25 * self.flush_seconds
        return oldest + max(0.0, self.flush_seconds - spend)

    def _seal(self, records: list[Record], charge: int, oldest: float) -> None:
        """Encode `records` as one segment, once, and queue it for writing."""
        if not records:
            return
        t0 = time.monotonic()
        self._sealed.append(self._encode(records, self._seq + len(self._sealed), charge, oldest))
        self._seal_seconds = _estimate(self._seal_seconds, time.monotonic() - t0)

    def _encode(self, records: list[Record], seq: int, charge: int, oldest: float) -> Segment:
        data_key = layout.data_key(self.worker, seq)
        raw = [r for r in records if r.array is not None]
        data: list[Any] = []
        offsets_raw: list[int] = []
        if raw:
            tensors = [(f"{r.step}/{r.name}", r.dtype, r.shape, r.array) for r in raw]
            data, offsets_raw = encode_safetensors(
                tensors, {"mldbg_format": str(FORMAT_VERSION), "worker": self.worker}
            )
        it = iter(offsets_raw)
        offsets = [next(it) if r.array is not None else -1 for r in records]
        index = b"".join(bytes(p) for p in encode_index(records, offsets, self.worker, data_key))
        size = sum(memoryview(p).nbytes for p in data) + len(index)
        steps = sorted({r.step for r in records})
        held = records if size > FAILING_SEGMENT_BYTES and len(records) > 1 else None
        return Segment(data, index, seq, len(records), steps, charge, size, oldest, held)

    def _split_head(self) -> None:
        """The head segment did not fit: re-encode it (once) as segments of at most
        FAILING_SEGMENT_BYTES, so that the writer goes on as soon as that much space is free."""
        seg = self._sealed[0]
        if seg.held is None:
            return
        if seg.data_written:  # its data file, without an index, only takes the space
            try:
                self.store.delete(layout.data_key(self.worker, seg.seq))
            except Exception as e:
                log.debug("mldbg: cannot remove %s: %s", layout.data_key(self.worker, seg.seq), e)
        chunks: list[list[Record]] = [[]]
        size = 0
        for r in seg.held:
            n = r.array.nbytes if r.array is not None else 0
            if chunks[-1] and size + n > FAILING_SEGMENT_BYTES // 2:
                chunks.append([])
                size = 0
            chunks[-1].append(r)
            size += n
        pieces, given = [], 0
        for i, chunk in enumerate(chunks):
            charge = seg.charge - given if i == len(chunks) - 1 else seg.charge * len(chunk) // seg.records
            given += charge
            piece = self._encode(chunk, seg.seq + i, charge, seg.oldest)
            piece.held = None
            pieces.append(piece)
        self._sealed.popleft()
        self._sealed.extendleft(reversed(pieces))

    def _write_sealed(self) -> bool:
        """Write sealed segments in order until one fails; False when one did."""
        while self._sealed:
            if not self._write(self._sealed[0]):
                self._split_head()
                return False
            self._release(self._sealed.popleft())
        return True

    def _release(self, seg: Segment) -> None:
        with self._cond:
            self._queued_bytes -= seg.charge
            self._cond.notify_all()

    def _write(self, seg: Segment) -> bool:
        """Write one segment: the data file, then the index that makes it visible. True when it
        is done with (written, or dropped by the store: `StoreFull`)."""
        data_key = layout.data_key(self.worker, self._seq)
        index_key = layout.index_key(self.worker, self._seq)
        if seg.seq != self._seq:  # an earlier segment was dropped: take its number (no gaps)
            seg.index = retarget_index(seg.index, data_key, index_key)
            seg.seq = self._seq
        t0 = time.monotonic()
        try:
            if seg.data and not seg.data_written:
                self._store_call(self.store.write, data_key, seg.data)
                seg.data_written = True
            self._store_call(self.store.write, index_key, [seg.index])
        except StoreFull as e:  # the store reported it (rate-limited); keeping them would only block
            log.debug("mldbg: %d records dropped: %s", seg.records, e)
            self.store_dropped += seg.records
            self.lost.add(seg.records, seg.steps)
            self._recovered()
            return True
        except Exception as e:
            self._failed(seg, f"{type(e).__name__}: {e}")
            return False
        self._write_seconds = _estimate(self._write_seconds, time.monotonic() - t0)
        seg.held = None
        self._seq += 1
        self.written_records += seg.records
        self.written_segments += 1
        self._recovered()
        return True

    def _failed(self, seg: Segment, msg: str) -> None:
        self.failures += 1
        first = not self._failing
        self._last_error = msg
        if first:
            queued = sum(s.records for s in self._sealed)
            with self._cond:  # blocked submits wake up and drop instead of waiting
                self._failing = msg
                backlog = self._queued_bytes
                self._cond.notify_all()
            self._lost_at_failure = self.lost.records
            log.error(
                "mldbg: cannot write to %s (%s): %d records (%s) wait in memory, bound %s "
                "(max_queue_bytes); will retry every %gs, one segment of at most %s at a time, "
                "and drop (and count) the steps that do not fit meanwhile. Free space there.",
                self.store.url, msg, queued, _size(backlog), _size(self.max_queue_bytes),
                self.retry_seconds, _size(min(self.segment_bytes, FAILING_SEGMENT_BYTES)),
            )  # fmt: skip
        elif msg != self._failing:
            log.error("mldbg: writing to %s still fails: %s", self.store.url, msg)
            with self._cond:
                self._failing = msg

    def _recovered(self) -> None:
        if not self._failing:
            return
        with self._cond:
            self._failing = ""
            self._cond.notify_all()
        log.warning(
            "mldbg: writing to %s again; %d records lost while it failed",
            self.store.url,
            self.lost.records - self._lost_at_failure,
        )

    def _finish(self) -> None:
        """At close: retry what is left for `close_seconds`, then give it up, counted."""
        deadline = time.monotonic() + self.close_seconds
        while self._sealed and not self._write_sealed() and time.monotonic() < deadline:
            time.sleep(min(self.retry_seconds, max(0.0, deadline - time.monotonic())))
        while self._sealed:
            seg = self._sealed.popleft()
            self.unwritten += seg.records
            self.lost.add(seg.records, seg.steps)
            self._release(seg)
