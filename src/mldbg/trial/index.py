"""The in-memory index of a run: every segment's columns, grouped by tensor name.

Loading is incremental: `RunIndex.refresh()` lists only index files newer than the last one
seen per worker, so the cost of a refresh grows with what is new, not with the run. Each
tensor's records are kept as NumPy columns that only grow; the trial hands them out through
its public index API (`Records`, `Record`, see trial/records.py). Everything here but that
API and the run-wide tables the Trial answers from is private.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import types
import warnings
import zlib
from collections import OrderedDict
from collections.abc import Callable, KeysView, Mapping, Sequence
from functools import partial
from typing import NamedTuple

import numpy as np

from mldbg.config import Mode
from mldbg.errors import CorruptRecord, InvalidConfig, TensorUnavailableForStep
from mldbg.store import Store, layout, markers
from mldbg.store.format import DTYPES, SegmentIndex, checksum, decode_index, numpy_dtype, to_numpy_value
from mldbg.store.markers import End, M, WorkerMeta
from mldbg.store.reductions import CODES
from mldbg.store.statistics import FIXED_CODES
from mldbg.trial.columns import bad_checksums, crc32_rows, gather_fixed, gather_statistics, scatter_statistics
from mldbg.trial.records import Record, Records

log = logging.getLogger("mldbg")

_NO_REDUCTIONS: Mapping[tuple[str, bool], float] = types.MappingProxyType({})
_NO_STATISTICS: Mapping[str, float] = types.MappingProxyType({})
_EMPTY = np.zeros(0, dtype=np.int64)
_COLUMNS = ("seg", "row", "step", "mode", "mode_step", "worker", "raw")
_SEG_ROW = np.int32  # a record's segment and row (private columns): 4 bytes each, not 8
_MODES = {int(m): m for m in Mode}
_FIXED_KEYS = {code: key for key, code in FIXED_CODES.items()}  # reductions and fixed statistics
# a segment's saved statistics, decoded: where each row's entries start, their statistic keys,
# their (reduction, abs) for the codes that are reductions (else None), values
_ReductionTable = tuple[list[int], list[str], list[tuple[str, bool] | None], list[float]]
_NO_TABLE: _ReductionTable = ([], [], [], [])
_Reductions = tuple[np.ndarray, np.ndarray, np.ndarray]  # a segment's saved (row, code, value)
# segments whose saved statistics are read again from their index file, once released, kept
_RELOADED = 8
_RELEASE_BYTES = 32 << 20  # saved statistics held beyond which decoded ones are released
# records of a segment built one row at a time before its whole table is decoded
_ROWS_BEFORE_TABLE = 64
# a tensor of more records than this is looked up by mode step in sorted arrays, not a dict
_MODE_TABLE_MAX = 4096
# a read this large first checks that the data file holds it (one `size` per segment)
_CHECKED_READ_BYTES = 64 << 20
# records of at most this many bytes are stacked and checksummed as rows of one array
_ROW_BYTES = 64
# safetensors dtype name -> the NumPy kind of the value read (bfloat16 reads as float32)
_KINDS = {name: "f" if name == "BF16" else numpy_dtype(name).kind for name in DTYPES}


class OneNumberRows(NamedTuple):
    """Records of many tensors read as one number each (`RunIndex.one_number_rows`)."""

    starts: np.ndarray  # per name: where its records begin in the per-record columns
    sizes: np.ndarray  # per name: how many records it has
    step: np.ndarray  # per record: its global step (int64)
    value: np.ndarray  # per record: its value as float64 (NaN where it did not read cleanly)
    dtype: np.ndarray  # per record: an index into `DTYPES`
    ndim: np.ndarray  # per record: its number of dimensions (each of size 1)
    whole: np.ndarray  # per name: every record read cleanly as one number, one a step, in order


class _TensorColumns:
    """One tensor's records as NumPy columns in load order: (segment, row) chunks are appended
    as segments load and gathered into the columns on the next query, into buffers that grow
    by doubling, so a refresh costs what is new. Step lookups grow the same way."""

    __slots__ = (
        "_bufs",
        "_by_mode_step",
        "_by_mode_step_upto",
        "_mode_sorted",
        "_by_step",
        "_by_step_upto",
        "_chunks",
        "_frozen",
        "_lazy",
        "_n",
        "_ordered",
        "_ordered_upto",
        "_view",
    )

    def __init__(self) -> None:
        self._chunks: list[tuple[int, np.ndarray]] = []  # loaded, not yet in the columns
        self._frozen = False  # the buffers are read-only and of the columns' length: the view
        self._bufs: dict[str, np.ndarray] = {}
        # (a gather, this tensor's place in it): its first columns, not yet sliced out of the
        # gather's arrays (`_Gathered`: 100,000 names are not seven slices each until asked)
        self._lazy: tuple[_Gathered, int] | None = None
        self._n = 0
        self._view: dict[str, np.ndarray] | None = None
        self._by_step: dict[int, list[int]] = {}
        self._by_step_upto = 0
        self._ordered = True  # the step column is in load order (sorted)
        self._ordered_upto = 0  # ... as checked over this many records
        self._by_mode_step: dict[tuple[int, int], list[int]] = {}
        self._by_mode_step_upto = 0
        self._mode_sorted: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None

    def add(self, seg_idx: int, rows: np.ndarray) -> None:
        self._chunks.append((seg_idx, rows))

    @property
    def _buffers(self) -> dict[str, np.ndarray]:
        if self._lazy is not None:  # the first records, sliced out of their gather when asked
            gathered, i = self._lazy
            self._lazy = None
            self._bufs = gathered.view(i)
            self._frozen = True
            self._view = None
        return self._bufs

    @_buffers.setter
    def _buffers(self, value: dict[str, np.ndarray]) -> None:
        self._lazy = None
        self._bufs = value

    def columns(self, index: RunIndex) -> dict[str, np.ndarray]:
        """Read-only views of the columns, every loaded record included."""
        if self._chunks:
            index._gather_pending(self)
        if self._view is None and self._frozen:  # the buffers are the view
            self._view = dict(self._buffers)
        if self._view is None:
            view = {}
            for key, buf in self._buffers.items():
                v = buf[: self._n]
                v.flags.writeable = False
                view[key] = v
            self._view = view
        return self._view

    def _append(self, index: RunIndex) -> None:
        chunks, self._chunks = self._chunks, []
        seg = np.concatenate([np.full(len(r), s, dtype=_SEG_ROW) for s, r in chunks])
        row = np.concatenate([r for _, r in chunks]).astype(_SEG_ROW)
        segments = index._segments
        new = {"seg": seg, "row": row}
        for col in ("step", "mode", "mode_step"):
            new[col] = np.concatenate([segments[s].columns[col][r] for s, r in chunks]).astype(np.int64)
        new["worker"] = _workers_of(index._segment_worker, seg)
        new["raw"] = np.concatenate([segments[s].columns["offset"][r] >= 0 for s, r in chunks])
        self._take(new)
        done: dict[int, int] = {}
        for s, r in chunks:
            done[s] = done.get(s, 0) + len(r)
        index._gathered(done)

    def _take(self, new: dict[str, np.ndarray], frozen: bool = False) -> None:
        """Append gathered columns (`_COLUMNS`, one length) to this tensor's; `frozen`: they
        are read-only already (`_gather_pending`'s slices)."""
        n, m = self._n, len(new["seg"])
        if not m:
            return
        if not n and not self._buffers:  # the first records: the gathered arrays are the buffers
            self._buffers = dict(new)
            self._n = m
            # read-only already (`_gather_pending`'s): they are the view too (100,000 names:
            # no seven slices per name when each is first asked); a later append copies them
            # into new buffers, never writes into these
            self._view = None
            self._frozen = frozen
            return
        if not self._buffers or n + m > len(self._buffers["seg"]):
            capacity = max(2 * (n + m), 64)
            for key in _COLUMNS:
                buf = np.empty(capacity, dtype=new[key].dtype)
                if n:
                    buf[:n] = self._buffers[key][:n]
                self._buffers[key] = buf
            self._frozen = False
        for key in _COLUMNS:
            self._buffers[key][n : n + m] = new[key]
        self._n = n + m
        self._view = None

    def at_step(self, index: RunIndex, step: int) -> tuple[int, ...]:
        """The positions of the records at a global step, in load order: two binary searches
        while the steps are in load order (one worker, written in order: the usual run), the
        `by_step` table otherwise (built once, grown as records load)."""
        cols = self.columns(index)
        if self._ordered_upto != self._n:
            steps = cols["step"]
            self._ordered = bool((steps[1:] >= steps[:-1]).all())
            self._ordered_upto = self._n
        if not self._ordered:
            return tuple(self.by_step(index).get(step, ()))
        steps = cols["step"]
        lo = int(steps.searchsorted(step, "left"))
        if lo == self._n or steps.item(lo) != step:
            return ()
        return tuple(range(lo, int(steps.searchsorted(step, "right"))))

    def by_step(self, index: RunIndex) -> dict[int, list[int]]:
        """Global step -> positions of its records."""
        cols = self.columns(index)
        if self._by_step_upto < self._n:
            start = self._by_step_upto
            for pos, s in enumerate(cols["step"][start:].tolist(), start):
                self._by_step.setdefault(s, []).append(pos)
            self._by_step_upto = self._n
        return self._by_step

    def at_mode_step(self, index: RunIndex, mode: int, step: int) -> tuple[int, ...]:
        """The positions of the records at (mode, mode step), in load order: `by_mode_step`'s
        table for a tensor of few records; for many, its records ordered by (mode, mode step)
        (a stable sort: load order among equals) and two binary searches, where the table of
        a loss saved at 10^6 steps held ~150 MB of Python objects (`mldbg check`'s diagnosis
        of a finding reads a few of its values by mode step)."""
        cols = self.columns(index)
        if self._n <= _MODE_TABLE_MAX:
            return tuple(self.by_mode_step(index).get((mode, step), ()))
        if self._mode_sorted is None or self._mode_sorted[0] != self._n:
            order = np.lexsort((cols["mode_step"], cols["mode"]))
            self._mode_sorted = (self._n, order, cols["mode"][order], cols["mode_step"][order])
        _, order, modes, msteps = self._mode_sorted
        lo, hi = int(modes.searchsorted(mode, "left")), int(modes.searchsorted(mode, "right"))
        a = lo + int(msteps[lo:hi].searchsorted(step, "left"))
        b = lo + int(msteps[lo:hi].searchsorted(step, "right"))
        return tuple(order[a:b].tolist())

    def by_mode_step(self, index: RunIndex) -> dict[tuple[int, int], list[int]]:
        """(mode, mode_step) -> positions of its records."""
        cols = self.columns(index)
        if self._by_mode_step_upto < self._n:
            start = self._by_mode_step_upto
            modes, steps = cols["mode"][start:].tolist(), cols["mode_step"][start:].tolist()
            for pos, key in enumerate(zip(modes, steps, strict=True), start):
                self._by_mode_step.setdefault(key, []).append(pos)
            self._by_mode_step_upto = self._n
        return self._by_mode_step


def _workers_of(segment_worker: list[int], seg: np.ndarray) -> np.ndarray:
    """The worker id (int64) of each record of segments `seg`. A run of one worker (id 0):
    zeros from `np.zeros`, whose pages the system maps only when written (a column of 3 * 10^6
    records is 24 MB never touched, where a gather wrote all of it)."""
    if not any(segment_worker):
        return np.zeros(len(seg), dtype=np.int64)
    return np.asarray(segment_worker, dtype=np.int64)[seg]


_SHARED_STEPS = 256  # a tensor of this many records or more may share another's step columns


def _same_steps(columns: Mapping[str, np.ndarray], sizes: np.ndarray, firsts: np.ndarray) -> np.ndarray:
    """For each tensor (`sizes[i]` records from `firsts[i]` in `columns`' step, mode and mode
    step), an earlier tensor whose three columns are the same, or -1. Only tensors of
    `_SHARED_STEPS` records or more are compared: their length, first and last step and the
    sum of their steps first, then every value."""
    same = np.full(len(sizes), -1, dtype=np.int64)
    big = np.flatnonzero(sizes >= _SHARED_STEPS)
    if len(big) < 2:
        return same
    step = columns["step"]
    sums = np.concatenate(([0], np.cumsum(step, dtype=np.int64)))
    seen: dict[tuple[int, int, int, int], int] = {}
    for i in big.tolist():
        a, n = int(firsts[i]), int(sizes[i])
        key = (n, int(step[a]), int(step[a + n - 1]), int(sums[a + n] - sums[a]))
        j = seen.get(key)
        if j is None:
            seen[key] = i
            continue
        b = int(firsts[j])
        if all(np.array_equal(v[a : a + n], v[b : b + n]) for v in columns.values()):
            same[i] = j
    return same


def _reductions_of(seg: SegmentIndex) -> _Reductions:
    """A segment's saved statistics as (row, code, value) arrays of their own, sorted by row,
    the codes it does not know (a newer writer's) left out (FORMAT.md, Compatibility)."""
    c = seg.columns
    rows, codes, values = c["red_row"], c["red_code"], c["red_value"]
    table = np.zeros(256, dtype=bool)  # a lookup per code (np.isin sorts every code)
    table[np.asarray([*_FIXED_KEYS, *map(int, seg.codes.metadata())], dtype=np.int64)] = True
    known = table[codes]
    if not known.all():
        rows, codes, values = rows[known], codes[known], values[known]
    if len(rows) > 1 and bool(np.any(rows[1:] < rows[:-1])):  # our writer's are sorted
        order = np.argsort(rows, kind="stable")
        rows, codes, values = rows[order], codes[order], values[order]
    return _own(rows), _own(codes), _own(values)


def _own(a: np.ndarray) -> np.ndarray:
    """`a`, or a copy where it is a view into other memory (an index file's bytes)."""
    return a if a.base is None else a.copy()


def _compact(a: np.ndarray) -> np.ndarray:
    """An index column of its own, int64 stored as int32 where its values fit (steps, sizes,
    offsets, shapes: the readers widen them or take them as Python ints)."""
    if a.dtype == np.int64 and len(a) and int(a.min()) >= -(2**31) and int(a.max()) < 2**31:
        return a.astype(np.int32)
    return _own(a)


@contextlib.contextmanager
def no_collection():
    """The cyclic garbage collector held off while a bulk of long-lived objects is built (a
    run's index: per tensor its columns, per segment its tables): each full collection walks
    every object built so far and finds nothing to free (0.8 of the 3.6 s of `mldbg ls` of
    100,000 names). Reference counting still frees what is dropped."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Gathered:
    """One `_gather_pending`'s columns, joined: tensor i's records are `cols[k][firsts[i] :
    firsts[i] + sizes[i]]`, its step, mode and mode step columns `wide[k][where[i] : ...]`
    (or the run's step table's arrays whole, where `whole[i]`). Read-only."""

    __slots__ = ("cols", "firsts", "of_table", "sizes", "where", "whole", "wide")

    def __init__(
        self,
        cols: dict[str, np.ndarray],
        wide: dict[str, np.ndarray],
        of_table: dict[str, np.ndarray],
        firsts: np.ndarray,
        sizes: np.ndarray,
        where: np.ndarray,
        whole: np.ndarray,
    ) -> None:
        self.cols, self.wide, self.of_table = cols, wide, of_table
        self.firsts, self.sizes, self.where, self.whole = firsts, sizes, where, whole

    def view(self, i: int) -> dict[str, np.ndarray]:
        """Tensor i's columns (read-only slices)."""
        start, size = self.firsts.item(i), self.sizes.item(i)
        view = {k: v[start : start + size] for k, v in self.cols.items()}
        if self.whole.item(i):
            view.update(self.of_table)
        else:
            w = self.where.item(i)
            for k, v in self.wide.items():
                view[k] = v[w : w + size]
        return view

    def joined(self, idx: np.ndarray, keys: Sequence[str]) -> dict[str, np.ndarray] | None:
        """The columns `keys` of tensors `idx` (in that order), joined: what concatenating
        each one's view gives, by one gather per column. None where a tensor reads the step
        table whole (join those one by one)."""
        sizes = self.sizes[idx]
        total = int(sizes.sum())
        rel = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        out: dict[str, np.ndarray] = {}
        for k in keys:
            if k in self.cols:
                out[k] = self.cols[k][np.repeat(self.firsts[idx], sizes) + rel]
            else:
                if bool(self.whole[idx].any()):
                    return None
                out[k] = self.wide[k][np.repeat(self.where[idx], sizes) + rel]
        return out


class RunReplaced(Exception):
    """The run being read was replaced by a new one (a restart with `overwrite=True`): its
    worker's `meta.json` names another process and its first segment changed. The Trial
    starts over on the new run (`Trial.refresh`)."""


class _Lazy:
    """seg -> its saved statistics, looked up when indexed (`gather_statistics`' argument)."""

    def __init__(self, get: Callable[[int], _Reductions]) -> None:
        self._get = get

    def __getitem__(self, seg: int) -> _Reductions:
        return self._get(seg)


def _identity(meta: WorkerMeta | None) -> tuple[object, ...] | None:
    if meta is None:
        return None
    return (meta.host, meta.pid, meta.started, meta.process)


class RunIndex:
    """A run's index, as loaded so far. The Trial answers from its run-wide tables
    (`workers`, `step_table`, `global_step`, `collections`, `expected_workers`, `ended`,
    `corrupt`, `loaded_records`) and locates and reads records (`records`, `positions`,
    `record`, `read`); the rest is private."""

    def __init__(self, store: Store, on_corrupt: str = "raise", single_worker: bool = False):
        """`single_worker`: the store shows one worker of a job (a WorkerView); it is complete
        when that worker ended, whatever the job's world size."""
        if on_corrupt not in ("raise", "skip"):
            raise ValueError("on_corrupt must be 'raise' or 'skip'")
        self.store = store
        self.on_corrupt = on_corrupt
        self.single_worker = single_worker
        self.workers: list[str] = []  # index = worker id
        self.collections: dict[str, set[str]] = {}
        # the run's steps (`step_table`): sorted global steps, each one's mode and mode step (as
        # the first segment that saved it tells them) and the order it was met in, as NumPy
        # arrays (Python dicts of 10^6 steps took ~250 MB); segments add chunks, folded in
        # when the table is next asked
        self._steps = _EMPTY
        self._step_modes = _EMPTY
        self._step_msteps = _EMPTY
        self._step_seq = _EMPTY
        self._step_chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._step_seq_next = 0
        self._by_mode: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # see `_mode_table`
        self.corrupt: list[str] = []
        self.expected_workers = 1
        self.ended: dict[str, End] = {}
        self.loaded_records = 0  # only grows
        self._segments: list[SegmentIndex] = []
        self._segment_worker: list[int] = []
        self._segment_keys: list[str] = []  # each segment's index file, a key of the store
        # per segment: its records not yet gathered into their tensor's columns; at 0 its own
        # step, mode and mode step columns are dropped (the tensors' hold them: `_gathered`)
        self._ungathered: list[int] = []
        # per segment: its saved reductions (row, code, value), sorted by row; None once
        # released (`release_statistics`): read again from its index file when asked
        self._segment_reductions: list[_Reductions | None] = []
        self._segment_entries: list[int] = []  # per segment: how many statistics it saved
        self._held_bytes = 0  # of saved statistics kept as loaded (`_load_segment`)
        self._reloaded: OrderedDict[int, _Reductions] = OrderedDict()
        self._reduction_tables: OrderedDict[int, _ReductionTable] = OrderedDict()
        self._rows_asked: dict[int, int] = {}  # segment -> records built before its table
        # statistic keys met so far, run-wide (`statistic_columns_of`), and each segment's
        # code -> key id table, built when its statistics are first gathered
        self._stat_keys: list[str] = []
        self._stat_key_ids: dict[str, int] = {}
        self._segment_key_ids: dict[int, np.ndarray] = {}
        self._tensors: dict[str, _TensorColumns] = {}
        self._name_strings: dict[str, str] = {}  # each name's one string (`_load_segment`)
        # the last segment's names (interned), tensor per name id, collections (`_load_segment`)
        self._last_names: tuple[list[str], list[_TensorColumns | None], dict[str, list[int]]] | None = None
        self._last_key: dict[str, str] = {}
        self._next_seq: dict[str, int] = {}  # per worker: the segment number expected next
        self._data_size: dict[int, int] = {}  # segment -> its data file's size, once asked
        # per worker: who wrote it (`_identity` of its meta.json) and the CRC of its first
        # index segment, to tell a resumed run (same first segment) from a replaced one
        self._writer: dict[str, tuple[object, ...] | None] = {}
        self._first_crc: dict[str, int] = {}

    @property
    def complete(self) -> bool:
        """Every worker that writes has ended and its last segment has been read."""
        return bool(self.ended) and len(self.ended) >= max(self.expected_workers, len(self.workers))

    @property
    def names(self) -> KeysView[str]:
        """The names of the tensors recorded so far."""
        return self._tensors.keys()

    def _gathered(self, counts: Mapping[int, int]) -> None:
        """`counts[s]` more records of segment `s` are in their tensors' columns: a segment
        whose records all are drops its step, mode and mode step columns, read only to gather
        them (a 10^6-step run held 27 MB of them twice)."""
        for s, n in counts.items():
            left = self._ungathered[s] = self._ungathered[s] - n
            if left <= 0:
                columns = self._segments[s].columns
                for name in ("step", "mode", "mode_step"):
                    columns.pop(name, None)

    def _gather_pending(self, asked: _TensorColumns) -> None:
        with no_collection():  # a run of many names: tens of thousands of objects made here
            self._gather(asked)

    def _gather(self, asked: _TensorColumns) -> None:
        """Gather the loaded records of `asked` into its columns, and with it those of every
        other tensor with records loaded and not yet gathered, in one pass per segment: a run
        of 100,000 tensors is a few NumPy calls per segment and a slice per tensor, where one
        tensor at a time took about ten NumPy calls per tensor (`ls`, the dashboard's
        scalars, the rules over every tensor: seconds per 10,000 names)."""
        todo = [t for t in self._tensors.values() if t._chunks] if len(self._tensors) > 64 else [asked]
        if asked not in todo:
            todo.append(asked)
        if len(todo) <= 8:
            for t in todo:
                t._append(self)
            return
        segs: list[int] = []
        rows: list[np.ndarray] = []
        sizes: list[int] = []
        for t in todo:
            chunks, t._chunks = t._chunks, []
            size = 0
            for s, r in chunks:
                segs.append(s)
                rows.append(r)
                size += len(r)
            sizes.append(size)
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        seg = np.repeat(np.asarray(segs, dtype=_SEG_ROW), lengths)
        row = np.concatenate(rows).astype(_SEG_ROW)
        cols: dict[str, np.ndarray] = {"seg": seg, "row": row}
        # each record's place in the segments' columns joined (those of the segments met): one
        # gather per column, where a pass per segment over every record was quadratic (3 s
        # for the 722 segments of a 10^6-step run)
        used = np.flatnonzero(np.bincount(seg)).tolist()  # the segments met (no sort of every record)
        lens = np.fromiter((len(self._segments[s]) for s in used), dtype=np.int64, count=len(used))
        base = np.zeros(used[-1] + 1, dtype=np.int64)
        base[used] = np.cumsum(lens) - lens
        at = base[seg] + row
        narrow = {  # in the segments' own (narrow) types first
            name: np.concatenate([self._segments[s].columns[name] for s in used])[at]
            for name in ("step", "mode", "mode_step")
        }
        cols["raw"] = np.concatenate([self._segments[s].columns["offset"] for s in used])[at] >= 0
        cols["worker"] = _workers_of(self._segment_worker, seg)
        del at
        met = np.bincount(seg)
        self._gathered(dict(zip(used, met[used].tolist(), strict=True)))
        counts = np.asarray(sizes, dtype=np.int64)
        firsts = np.cumsum(counts) - counts
        # tensors saved at the same steps (the statistics of every parameter of a model, on
        # one schedule) share one copy of their step, mode and mode step columns (read-only):
        # 207 tensors of 10^4 records held 50 MB of the same three columns
        same = _same_steps(narrow, counts, firsts)
        own = same < 0
        # a tensor saved at every step of the run (a loss) holds what the run's step table
        # holds: it reads those arrays (read-only views), no copy of its own
        table = self.step_table()
        whole = np.zeros(len(counts), dtype=bool)
        if len(table[0]) > _SHARED_STEPS:
            for i in np.flatnonzero(own & (counts == len(table[0]))).tolist():
                a, n = int(firsts[i]), int(counts[i])
                whole[i] = all(
                    np.array_equal(narrow[k][a : a + n], t) for k, t in zip(narrow, table, strict=True)
                )
        whole |= ~own & whole[np.maximum(same, 0)]
        own &= ~whole
        kept = np.repeat(own, counts)
        wide = {name: v[kept].astype(np.int64) for name, v in narrow.items()}
        del narrow, kept
        packed = np.zeros(len(counts), dtype=np.int64)  # where a tensor's own steps begin in `wide`
        packed[own] = np.cumsum(counts[own]) - counts[own]
        where = np.where(own, packed, packed[np.maximum(same, 0)]).tolist()
        of_table = dict(zip(wide, table, strict=True))
        for k, v in of_table.items():
            of_table[k] = v = v.view()
            v.flags.writeable = False
        for v in (*cols.values(), *wide.values()):
            v.flags.writeable = False  # each tensor's columns are slices of these: its view
        gathered = _Gathered(cols, wide, of_table, firsts, counts, np.asarray(where, dtype=np.int64), whole)
        for i, t in enumerate(todo):
            if not t._n and not t._bufs and t._lazy is None and sizes[i]:
                # its first records: its columns are slices of the gather's, made when asked
                t._lazy = (gathered, i)
                t._n = sizes[i]
                t._frozen = True
                t._view = None
            else:
                t._take(gathered.view(i), frozen=True)

    # the public index API, through Trial --------------------------------------------------
    def records(
        self, name: str, step: int | None = None, mode: Mode | None = None, worker: str | None = None
    ) -> Records:
        """The records of a known tensor `name`: all, or those at `step` (the mode's own step
        when `mode` is given), of `mode`, of `worker`."""
        cols = self._tensors[name].columns(self)
        positions: tuple[int, ...] | np.ndarray | None = None
        of_mode = None if mode is None or mode == Mode.GLOBAL else int(mode)  # GLOBAL: every mode
        if step is not None:
            positions = self.positions(name, step, mode)
        elif of_mode is not None:
            positions = np.flatnonzero(cols["mode"] == of_mode)
        if worker is not None:
            wid = self.workers.index(worker) if worker in self.workers else -1
            if positions is None:
                positions = np.flatnonzero(cols["worker"] == wid)
            else:
                positions = tuple(p for p in positions if cols["worker"][p] == wid)
        return Records(name, cols, positions, self.workers, lambda p: self._record_at(name, cols, p))

    def record_columns_of(self, names: list[str]) -> list[dict[str, np.ndarray]]:
        """The read-only columns of each known tensor of `names` (what `records(name)` holds),
        every loaded record included, gathered together for all of them."""
        tensors = [self._tensors[n] for n in names]
        pending = next((t for t in tensors if t._chunks), None)
        if pending is not None:
            self._gather_pending(pending)
        return [t.columns(self) for t in tensors]

    def step_counts(self, names: list[str]) -> np.ndarray:
        """How many distinct global steps each known tensor of `names` has records at (what
        `len(Tensor.steps())` says), for all of them in one pass over their step columns
        joined: `mldbg ls` of 100,000 names, where a `Records` and a sort per name cost
        tens of microseconds each."""
        tensors = [self._tensors[n] for n in names]
        pending = next((t for t in tensors if t._chunks), None)
        if pending is not None:
            self._gather_pending(pending)  # every pending tensor of a run of many names
            for t in tensors:
                if t._chunks:
                    t.columns(self)
        sizes = np.fromiter((t._n for t in tensors), dtype=np.int64, count=len(tensors))
        counts = np.zeros(len(tensors), dtype=np.int64)
        if not int(sizes.sum()):
            return counts
        steps = self._joined([t for t in tensors if t._n], ("step",))["step"]
        owner = np.repeat(np.arange(len(tensors), dtype=np.int64), sizes)
        if len(steps) > 1 and not bool(np.all((steps[1:] > steps[:-1]) | (owner[1:] != owner[:-1]))):
            order = np.lexsort((steps, owner))  # some tensor's steps out of order or repeated
            steps, owner = steps[order], owner[order]
        first = np.ones(len(steps), dtype=bool)
        first[1:] = (steps[1:] != steps[:-1]) | (owner[1:] != owner[:-1])
        counts += np.bincount(owner[first], minlength=len(tensors))
        return counts

    def _joined(self, tensors: list[_TensorColumns], keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The columns `keys` of `tensors` (gathered), joined in that order: from the gather
        they all came from in one pass (`_Gathered.joined`) when they did, none sliced out."""
        lazies = [t._lazy for t in tensors]
        first = lazies[0] if lazies else None
        if first is not None:
            gathered = first[0]
            if all(lazy is not None and lazy[0] is gathered for lazy in lazies):
                idx = np.fromiter(
                    (lazy[1] for lazy in lazies if lazy is not None), dtype=np.int64, count=len(lazies)
                )
                found = gathered.joined(idx, keys)
                if found is not None:
                    return found
        held = [t for t in tensors if t._n]
        if not held:
            return {k: np.zeros(0, dtype=np.int64) for k in keys}
        return {k: np.concatenate([t._buffers[k][: t._n] for t in held]) for k in keys}

    def _columns_of(self, names: list[str]) -> list[_TensorColumns]:
        """The known tensors of `names`, their pending records gathered into columns."""
        tensors = [self._tensors[n] for n in names]
        pending = next((t for t in tensors if t._chunks), None)
        if pending is not None:
            self._gather_pending(pending)
            for t in tensors:
                if t._chunks:
                    t.columns(self)
        return tensors

    def steps_of(self, names: list[str]) -> np.ndarray:
        """The global steps (sorted, int64, without repeats) at which some known tensor of
        `names` has a loaded record: for all of them in one pass over their step columns
        joined (the rule runner's visits of a collection of 100,000 names, where the steps of
        each name were asked one by one)."""
        tensors = self._columns_of(names)
        if not any(t._n for t in tensors):
            return np.zeros(0, dtype=np.int64)
        return np.unique(self._joined(tensors, ("step",))["step"].astype(np.int64, copy=False))

    def one_number_rows(self, names: list[str]) -> OneNumberRows:
        """The records of the known tensors of `names` as one table, read together:
        (`starts`, `sizes`: where each name's records lie in the other columns, in its load
        order; `step`, `value` (float64), `dtype` (an index into `DTYPES`), `ndim` (its
        shape is that many 1s): per record;
        `whole`: per name, whether every one of its records read cleanly as one number, one
        record a step, its steps in load order). A name not `whole` is to be read step by
        step, which says what is wrong (several records a step, a vector, only reductions
        saved, a record scattered among large ones, a short read or a checksum that
        differs); its values here are not to be used. A run of 100,000 scalar names is a few
        reads and no Python per record."""
        tensors = self._columns_of(names)
        sizes = np.fromiter((t._n for t in tensors), dtype=np.int64, count=len(tensors))
        starts = np.cumsum(sizes) - sizes
        whole = sizes > 0
        held = [t for t in tensors if t._n]
        if not held:
            empty_i, empty_f = np.zeros(0, dtype=np.int64), np.zeros(0)
            return OneNumberRows(starts, sizes, empty_i, empty_f, empty_i, empty_i, whole)
        cols = self._joined(held, ("seg", "row", "step", "raw"))
        seg, row, step = cols["seg"], cols["row"], cols["step"].astype(np.int64, copy=False)
        owner = np.repeat(np.arange(len(tensors), dtype=np.int64), sizes)
        ok = cols["raw"].copy()  # per record: reads cleanly as one number
        if len(step) > 1:
            later = np.ones(len(step), dtype=bool)
            later[1:] = (step[1:] > step[:-1]) | (owner[1:] != owner[:-1])
            ok &= later
        dtype = np.zeros(len(row), dtype=np.int64)
        ndim = np.zeros(len(row), dtype=np.int64)
        offset = np.zeros(len(row), dtype=np.int64)
        nbytes = np.zeros(len(row), dtype=np.int64)
        values = np.full(len(row), np.nan)
        itemsize = np.asarray([numpy_dtype(d).itemsize for d in DTYPES], dtype=np.int64)
        for s in np.unique(seg).tolist():
            at = np.flatnonzero(seg == s)
            c, r = self._segments[s].columns, row[at]
            dtype[at], offset[at], nbytes[at] = c["dtype"][r], c["offset"][r], c["nbytes"][r]
            ndim[at] = c["ndim"][r]
            ok[at] &= nbytes[at] == itemsize[dtype[at]]
            at = at[ok[at]]
            if not len(at):
                continue
            base, end = int(offset[at].min()), int((offset[at] + nbytes[at]).max())
            if end - base > max(8 * int(nbytes[at].sum()), 1 << 20):
                ok[at] = False  # scattered among larger records: read step by step
                continue
            key = self._segments[s].data_key
            try:
                blob = self.store.read(key, base, end - base)
            except OSError:
                ok[at] = False
                continue
            if len(blob) != end - base:
                ok[at] = False
                continue
            raw = np.frombuffer(blob, dtype=np.uint8)
            crc = c.get("crc")
            for width in np.unique(nbytes[at]).tolist():
                these = at[nbytes[at] == width]
                # each record's bytes, a row of one width: its values and its checksum read
                # for all of them at once
                rows = raw[(offset[these] - base)[:, None] + np.arange(width)]
                if crc is not None:  # format 3: every record's bytes verified, as read() does
                    bad = crc32_rows(rows) != crc[row[these]]
                    if bad.any():
                        ok[these[bad]] = False
                        these, rows = these[~bad], rows[~bad]
                for code in np.unique(dtype[these]).tolist():
                    pick = dtype[these] == code
                    name = DTYPES[code]
                    got = np.ascontiguousarray(rows[pick]).reshape(-1).view(numpy_dtype(name))
                    values[these[pick]] = to_numpy_value(got, name).astype(np.float64)
        whole[sizes > 0] = np.logical_and.reduceat(ok, starts[sizes > 0])
        return OneNumberRows(starts, sizes, step, values, dtype, ndim, whole)

    def one_number_series(self, names: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """name -> (its global steps, its values as float64) for each known tensor of `names`
        saved as one number (one element, raw) at one record a step, its steps in load order:
        what reading it step by step (`read` of the record at each step) gives, read for all of
        them together (`one_number_rows`). A tensor that does not read cleanly so is left out:
        read it step by step, which says what is wrong."""
        starts, sizes, step, values, _, _, whole = self.one_number_rows(names)
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for name, a, n, good in zip(names, starts.tolist(), sizes.tolist(), whole.tolist(), strict=True):
            if good:
                out[name] = (step[a : a + n], values[a : a + n])
        return out

    def positions(self, name: str, step: int, mode: Mode | None = None) -> tuple[int, ...]:
        """Positions of the records of a known tensor `name` at `step` (the mode's step when
        `mode` is given): what `records()` selects, without building it (Trial.record's path)."""
        tensor = self._tensors[name]
        if mode is None or mode == Mode.GLOBAL:
            return tensor.at_step(self, step)
        return tensor.at_mode_step(self, int(mode), step)

    def record(self, name: str, position: int) -> Record:
        """The record of a known tensor `name` at `position` of its columns."""
        return self._record_at(name, self._tensors[name].columns(self), position)

    def layout(self, record: Record) -> tuple[np.dtype, tuple[int, ...]]:
        """The NumPy dtype of a record's value (bfloat16 reads as float32) and its shape, from
        the index: known for a record saved with statistics only, too."""
        _, seg_idx, row = record._at
        name, shape = self._described(seg_idx, row)
        return (np.dtype(np.float32) if name == "BF16" else numpy_dtype(name)), shape

    def _described(self, seg_idx: int, row: int) -> tuple[str, tuple[int, ...]]:
        """A record's dtype (safetensors name) and shape, as its index row says."""
        c = self._segments[seg_idx].columns
        start = c["shape_start"].item(row)
        return DTYPES[c["dtype"].item(row)], tuple(c["shapes"][start : start + c["ndim"].item(row)].tolist())

    def read(self, record: Record) -> np.ndarray:
        """The value of a record this index located: one ranged read of its data file."""
        owner, seg_idx, row = record._at
        if owner is not self:
            raise InvalidConfig(
                f"record of {record.name!r} at step {record.step} was located by another trial; "
                "read it with that trial's read()"
            )
        if not record.has_raw:
            raise TensorUnavailableForStep(
                f"only reductions of {record.name!r} were saved at step {record.step}: use "
                "reduction_value(), or save_raw_tensor=True in its ReductionConfig"
            )
        seg = self._segments[seg_idx]
        c = seg.columns
        offset, nbytes = c["offset"].item(row), c["nbytes"].item(row)
        dt, shape = self._described(seg_idx, row)
        where = f"{self.store.url}/{seg.data_key}"
        what = f"{record.name!r} at step {record.step}"
        try:
            if nbytes >= _CHECKED_READ_BYTES:
                size = self._data_size.get(seg_idx)
                if size is None:
                    size = self._data_size[seg_idx] = self.store.size(seg.data_key)
                if offset + nbytes > size:
                    raise CorruptRecord(
                        f"{where}: {what} needs bytes {offset}..{offset + nbytes} but the file has "
                        f"{size} (truncated)"
                    )
            blob = self.store.read(seg.data_key, offset, nbytes)
        except FileNotFoundError:
            raise CorruptRecord(f"{where}: missing, but its index {seg.key} refers to it") from None
        except OSError as e:  # a folder where the file should be, an unreadable file
            raise CorruptRecord(f"{where}: cannot be read ({e.strerror or e}); {what} is in it") from None
        if len(blob) != nbytes:
            raise CorruptRecord(
                f"{where}: {what} needs bytes {offset}..{offset + nbytes} "
                f"but the file ends at {offset + len(blob)} (truncated)"
            )
        crc = c.get("crc")
        if crc is not None and checksum(blob) != crc.item(row):
            raise CorruptRecord(
                f"{where}: {what}: checksum mismatch, the bytes at {offset}..{offset + nbytes} "
                f"changed after they were written (index {seg.key})"
            )
        raw = np.frombuffer(blob, dtype=numpy_dtype(dt)).reshape(shape)
        return to_numpy_value(raw, dt)

    def statistic_columns(self, name: str, start: int = 0) -> dict[str, np.ndarray]:
        """The saved scalar statistics of a known tensor's records from position `start` on
        (load order), as float64 columns by key (NaN where a record has none): one NumPy pass
        per segment (`mldbg.trial.columns`), for readers that scan a statistic over steps."""
        cols = self._tensors[name].columns(self)
        seg, row = cols["seg"][start:], cols["row"][start:]
        out: dict[str, np.ndarray] = {}
        for s in np.unique(seg).tolist():
            red_rows, red_codes, red_values = self._reductions(s)
            dest = np.flatnonzero(seg == s)
            scatter_statistics(
                out, len(seg), dest, row[dest], red_rows, red_codes, red_values, self._key_of(s)
            )
        return out

    def statistic_columns_of(self, starts: Mapping[str, int]) -> dict[str, dict[str, np.ndarray]]:
        """`statistic_columns` of several known tensors (name -> start) at once: each segment's
        saved statistics are located for all of them together (`gather_statistics`), so the
        cost is a pass per segment, not per tensor and segment."""
        if not any(self._segment_entries):
            return {name: {} for name in starts}  # no statistics saved (a run of scalars)
        picked = {name: self._tensors[name].columns(self) for name in starts}
        seg = np.concatenate([picked[n]["seg"][s:] for n, s in starts.items()] or [_EMPTY])
        row = np.concatenate([picked[n]["row"][s:] for n, s in starts.items()] or [_EMPTY])
        sizes = [max(0, len(picked[n]["seg"]) - s) for n, s in starts.items()]
        luts = {s: self._key_ids(s) for s in np.unique(seg).tolist()}
        return dict(
            zip(
                starts,
                gather_statistics(
                    sizes, seg, row, _Lazy(self._reductions), luts, self._stat_keys, self._segment_entries
                ),
                strict=True,
            )
        )

    def _reductions(self, seg: int) -> _Reductions:
        """A segment's saved statistics (row, code, value): as loaded, or, once released, read
        again from its index file (the last few kept)."""
        found = self._segment_reductions[seg]
        if found is not None:
            return found
        found = self._reloaded.get(seg)
        if found is not None:
            self._reloaded.move_to_end(seg)
            return found
        old, key = self._segments[seg], self._segment_keys[seg]
        where = f"{self.store.url}/{key}"
        try:
            again = decode_index(self.store.read(key), where)
        except OSError as e:
            raise CorruptRecord(f"{where}: cannot be read again ({e.strerror or e})") from None
        if len(again) != len(old) or again.data_key != old.data_key:
            raise CorruptRecord(f"{where}: changed since it was read (index files are written once)")
        found = self._reloaded[seg] = _reductions_of(again)
        while len(self._reloaded) > _RELOADED:
            self._reloaded.popitem(last=False)
        return found

    def release_statistics(self) -> None:
        """Drop the saved statistics of the segments loaded so far, where they hold more than
        `_RELEASE_BYTES` or some were dropped as they loaded already (their scalar statistics are decoded into columns already:
        `mldbg.trial.columns.Columns`; a 10^6-step run held ~240 MB of them). A record's
        statistics asked later are read again from its segment's index file."""
        held = [r for r in self._segment_reductions if r is not None]
        released = len(held) < len(self._segment_reductions)  # some dropped as they loaded
        if not released and sum(a.nbytes for r in held for a in r) < _RELEASE_BYTES:
            return  # a small run: kept (no index file read twice)
        for seg, found in enumerate(self._segment_reductions):
            if found is not None and seg not in self._segment_key_ids:
                self._key_ids(seg)  # the segment's key table, built while its codes are here
            self._segment_reductions[seg] = None

    def _key_ids(self, seg: int) -> np.ndarray:
        """A segment's statistic code (0-255) -> a run-wide key id (`_stat_keys`), -1 for a
        code it does not know (codes 64-255 through the segment's own table)."""
        found = self._segment_key_ids.get(seg)
        if found is None:
            key_of = self._key_of(seg)
            found = np.full(256, -1, dtype=np.int32)  # ids joined per entry: 4 bytes each
            for code in np.flatnonzero(np.bincount(self._reductions(seg)[1])).tolist():
                key = key_of(int(code))
                if key is None:
                    continue
                kid = self._stat_key_ids.get(key)
                if kid is None:
                    kid = self._stat_key_ids[key] = len(self._stat_keys)
                    self._stat_keys.append(key)
                found[code] = kid
            self._segment_key_ids[seg] = found
        return found

    def layouts(self, name: str, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The NumPy dtype kind ('f', 'i', 'u', 'b') and number of dimensions of a known
        tensor's records from position `start` on (load order), from the index columns."""
        cols = self._tensors[name].columns(self)
        seg, row = cols["seg"][start:], cols["row"][start:]
        kinds = np.empty(len(seg), dtype="<U1")
        ndim = np.empty(len(seg), dtype=np.int64)
        for s in np.unique(seg).tolist():
            at = np.flatnonzero(seg == s)
            c = self._segments[s].columns
            codes = c["dtype"][row[at]]
            kinds[at] = np.asarray([_KINDS[DTYPES[k]] for k in range(len(DTYPES))])[codes]
            ndim[at] = c["ndim"][row[at]]
        return kinds, ndim

    def layout_at(self, name: str, position: int) -> tuple[str, tuple[int, ...]]:
        """The dtype kind and shape of a known tensor's record at `position` (load order),
        from the index columns: `layout` of that record, with no `Record` built."""
        cols = self._tensors[name].columns(self)
        dtype, shape = self._described(cols["seg"].item(position), cols["row"].item(position))
        return _KINDS[dtype], shape

    def shapes(self, name: str, start: int = 0) -> list[tuple[int, ...]]:
        """The shape of each of a known tensor's records from position `start` on (load
        order), from the index columns: no `Record` built."""
        cols = self._tensors[name].columns(self)
        seg, row = cols["seg"][start:].tolist(), cols["row"][start:].tolist()
        out = []
        for s, r in zip(seg, row, strict=True):
            c = self._segments[s].columns
            first = c["shape_start"].item(r)
            out.append(tuple(c["shapes"][first : first + c["ndim"].item(r)].tolist()))
        return out

    def _key_of(self, seg: int) -> Callable[[int], str | None]:
        """A segment's statistic code -> its key (codes 64-255 through its own table)."""
        table = self._segments[seg].codes
        return lambda code: _FIXED_KEYS.get(code) or table.key(code)

    def stacked(self, name: str, positions: np.ndarray) -> np.ndarray | None:
        """The values of a known tensor's records at `positions`, stacked (one row each), read
        with one ranged read per segment (one per record where they lie scattered among larger
        ones); None when a record has no raw value or the shapes or dtypes differ."""
        cols = self._tensors[name].columns(self)
        seg, row = cols["seg"][positions], cols["row"][positions]
        if not len(seg) or not bool(cols["raw"][positions].all()):
            return None
        dt, shape = self._described(int(seg[0]), int(row[0]))
        out = []
        for s in np.unique(seg).tolist():
            rows = row[seg == s]
            c = self._segments[s].columns
            dtypes, sizes = c["dtype"][rows], c["nbytes"][rows]
            if bool((dtypes != dtypes[0]).any()) or bool((sizes != sizes[0]).any()):
                return None
            if self._described(s, int(rows[0])) != (dt, shape):
                return None
            if bool((c["ndim"][rows] != len(shape)).any()):
                return None
            first = c["shape_start"][rows].astype(np.int64)
            if any(bool((c["shapes"][first + d] != size).any()) for d, size in enumerate(shape)):
                return None  # the same size in another shape: not one array of rows
            offsets, nbytes = c["offset"][rows].astype(np.int64), int(c["nbytes"][rows[0]])
            base, end = int(offsets.min()), int(offsets.max()) + nbytes
            key = self._segments[s].data_key
            table: np.ndarray | None = None  # small records' bytes, a row each (`crc32_rows`)
            try:
                if end - base <= max(8 * nbytes * len(rows), 1 << 20):  # one read of the span
                    blob = self.store.read(key, base, end - base)
                    short = len(blob) != end - base
                    small = not short and nbytes <= _ROW_BYTES
                    pieces = [] if short or small else gather_fixed(blob, base, offsets, nbytes)
                    if small:
                        spots = (offsets - base)[:, None] + np.arange(nbytes, dtype=np.int64)
                        table = np.frombuffer(blob, dtype=np.uint8)[spots]
                else:  # scattered among larger records: one read each, not the span
                    pieces = [self.store.read(key, o, nbytes) for o in offsets.tolist()]
                    short = any(len(b) != nbytes for b in pieces)
            except FileNotFoundError:
                raise CorruptRecord(f"{self.store.url}/{key}: missing, but its index refers to it") from None
            except OSError as e:  # a folder, a FIFO or a device where the data file should be
                raise CorruptRecord(f"{self.store.url}/{key}: cannot be read ({e.strerror or e})") from None
            if short:
                raise CorruptRecord(f"{self.store.url}/{key}: truncated (needs bytes {base}..{end})")
            crc = c.get("crc")
            if crc is not None:  # format 3: every record's bytes verified, as read() does
                if table is not None:
                    bad = np.flatnonzero(crc32_rows(table) != crc[rows])
                else:
                    bad = bad_checksums(pieces, crc[rows])
                if len(bad):
                    at_step = int(cols["step"][positions][np.flatnonzero(seg == s)[bad[0]]])
                    raise CorruptRecord(
                        f"{self.store.url}/{key}: {name} at step {at_step}: "
                        f"checksum mismatch, its bytes changed after they were written "
                        f"(index {self._segments[s].key})"
                    )
            got = table.reshape(-1) if table is not None else np.frombuffer(b"".join(pieces), dtype=np.uint8)
            raw = got.view(numpy_dtype(dt))
            out.append((np.flatnonzero(seg == s), to_numpy_value(raw, dt).reshape(len(rows), *shape)))
        stacked = np.empty((len(seg), *shape), dtype=out[0][1].dtype)
        for where, values in out:
            stacked[where] = values
        stacked.flags.writeable = False  # rows are handed out as values: read-only, as read()'s
        return stacked

    def stacked_many(self, requests: Mapping[str, np.ndarray], max_bytes: int) -> dict[str, np.ndarray]:
        """`stacked` for many small tensors at once (`requests`: name -> positions): one read
        per segment for all of them, then a slice per record. Only what reads cleanly comes
        back: a tensor whose records are not all raw, differ in dtype, size or shape, are
        larger than `max_bytes` each, or fail their checksum or a read is left out (its own
        `stacked` then says what is wrong). A run of 100,000 scalar names is a few reads,
        not 100,000."""
        if not requests:
            return {}
        # every tensor's records located at once: the columns of the tensors asked, joined,
        # and the positions asked shifted into them (no NumPy call per tensor)
        asked = list(requests)
        tensors = [self._tensors[name] for name in asked]
        pending = next((t for t in tensors if t._chunks), None)
        if pending is not None:
            self._gather_pending(pending)
        cols_of = [t.columns(self) for t in tensors]
        wanted = [np.asarray(requests[name], dtype=np.int64) for name in asked]
        counts = np.fromiter(map(len, wanted), dtype=np.int64, count=len(wanted))
        held = np.fromiter((len(c["seg"]) for c in cols_of), dtype=np.int64, count=len(cols_of))
        at_all = np.concatenate(wanted)
        limit = np.repeat(held, counts)
        at_all = np.where(at_all < 0, at_all + limit, at_all)  # from the end, as an index reads it
        if bool(((at_all < 0) | (at_all >= limit)).any()):
            raise IndexError("a position outside a tensor's records")
        at_all += np.repeat(np.cumsum(held) - held, counts)
        raw_all = np.concatenate([c["raw"] for c in cols_of])[at_all]
        # a tensor is asked when it has positions and each of them holds a raw value
        missing = np.bincount(np.repeat(np.arange(len(asked)), counts)[~raw_all], minlength=len(asked))
        take = (counts > 0) & (missing == 0)
        if not take.any():
            return {}
        chosen = np.repeat(take, counts)
        at_all = at_all[chosen]
        seg = np.concatenate([c["seg"] for c in cols_of])[at_all]
        row = np.concatenate([c["row"] for c in cols_of])[at_all]
        kept = np.flatnonzero(take).tolist()
        names = [asked[i] for i in kept]
        sizes = counts[take].tolist()
        offset = np.empty(len(row), dtype=np.int64)
        nbytes = np.empty(len(row), dtype=np.int64)
        dtype = np.empty(len(row), dtype=np.int64)
        crc: np.ndarray | None = np.empty(len(row), dtype=np.uint32)
        pieces: list[bytes] = [b""] * len(row)
        failed = np.zeros(len(row), dtype=bool)
        for s in np.unique(seg).tolist():
            at = np.flatnonzero(seg == s)
            c, r = self._segments[s].columns, row[at]
            offset[at], nbytes[at], dtype[at] = c["offset"][r], c["nbytes"][r], c["dtype"][r]
            if crc is not None:
                if c.get("crc") is None:
                    crc = None
                else:
                    crc[at] = c["crc"][r]
            small = nbytes[at] <= max_bytes
            failed[at[~small]] = True
            at = at[small]
            if not len(at):
                continue
            base, end = int(offset[at].min()), int((offset[at] + nbytes[at]).max())
            if end - base > max(8 * int(nbytes[at].sum()), 1 << 20):
                failed[at] = True  # scattered among larger records: one tensor at a time
                continue
            try:
                blob = self.store.read(self._segments[s].data_key, base, end - base)
            except OSError:
                failed[at] = True
                continue
            if len(blob) != end - base:
                failed[at] = True
                continue
            for i, o, n in zip(at.tolist(), (offset[at] - base).tolist(), nbytes[at].tolist(), strict=True):
                pieces[i] = blob[o : o + n]
        if crc is not None:
            ok = np.flatnonzero(~failed)
            failed[ok[bad_checksums([pieces[i] for i in ok.tolist()], crc[ok])]] = True
        # a tensor is stacked when each of its records reads cleanly and has the dtype, size
        # and shape of its first: compared for every record at once, then a flag per tensor
        ndim = np.zeros(len(row), dtype=np.int64)
        width = 0
        for s in np.unique(seg).tolist():
            at = np.flatnonzero(seg == s)
            ndim[at] = self._segments[s].columns["ndim"][row[at]]
        width = int(ndim.max()) if len(ndim) else 0
        shape = np.full((len(row), width), -1, dtype=np.int64)
        for s in np.unique(seg).tolist():
            at = np.flatnonzero(seg == s)
            c = self._segments[s].columns
            first = c["shape_start"][row[at]].astype(np.int64)
            for d in range(width):
                has = ndim[at] > d
                shape[at[has], d] = c["shapes"][first[has] + d]
        starts = np.cumsum([0, *sizes[:-1]]).astype(np.int64)
        lead = np.repeat(starts, sizes)  # each record's tensor's first record
        same = ~failed & (nbytes == nbytes[lead]) & (dtype == dtype[lead]) & (ndim == ndim[lead])
        if width:
            same &= (shape == shape[lead]).all(axis=1)
        whole = np.logical_and.reduceat(same, starts)
        out: dict[str, np.ndarray] = {}
        good = np.flatnonzero(whole)
        if not len(good):
            return out
        # the tensors stacked, grouped by dtype and shape: each group's bytes joined and
        # decoded once, each tensor a slice of it (read-only, as `stacked`'s)
        layout = np.column_stack([dtype[starts[good]], ndim[starts[good]], shape[starts[good]]])
        kinds, group = np.unique(layout, axis=0, return_inverse=True)
        group = group.reshape(-1)
        sizes_at = np.asarray(sizes, dtype=np.int64)
        for g, kind in enumerate(kinds.tolist()):
            members = good[group == g]
            dt = DTYPES[int(kind[0])]
            dims = tuple(kind[2 : 2 + int(kind[1])])
            counts_g = sizes_at[members]
            firsts = starts[members]
            total = int(counts_g.sum())
            shift = firsts - (np.cumsum(counts_g) - counts_g)
            records = np.arange(total, dtype=np.int64) + np.repeat(shift, counts_g)
            joined = b"".join(map(pieces.__getitem__, records.tolist()))
            raw = np.frombuffer(joined, dtype=np.uint8).view(numpy_dtype(dt))
            value = to_numpy_value(raw, dt).reshape(total, *dims)
            value.flags.writeable = False
            ends = np.cumsum(counts_g).tolist()
            begin = 0
            for i, end in zip(members.tolist(), ends, strict=True):
                out[names[i]] = value[begin:end]
                begin = end
        return {name: out[name] for name in names if name in out}  # in the order asked

    def _record_at(self, name: str, cols: Mapping[str, np.ndarray], p: int) -> Record:
        # .item(): a Python scalar with no NumPy scalar in between, and the fields by position:
        # rules build a Record for every tensor at every step
        seg, row = cols["seg"].item(p), cols["row"].item(p)
        return Record(
            name,
            cols["step"].item(p),
            _MODES[cols["mode"].item(p)],
            cols["mode_step"].item(p),
            self.workers[cols["worker"].item(p)],
            cols["raw"].item(p),
            *self._statistics_at(seg, row),
            self._segments[seg].key,
            (self, seg, row),
        )

    def _statistics_at(
        self, seg: int, row: int
    ) -> tuple[Mapping[tuple[str, bool], float], Mapping[str, float]]:
        """(saved reductions by (reduction, abs), saved scalar statistics by key) of a row."""
        table = self._reduction_tables.get(seg)
        if table is None:
            asked = self._rows_asked.get(seg, 0)
            if asked < _ROWS_BEFORE_TABLE:  # a few records of this segment: decode their rows
                self._rows_asked[seg] = asked + 1
                return self._row_statistics(seg, row)
            table = self._reduction_tables[seg] = self._reduction_table(seg)
            while len(self._reduction_tables) > _RELOADED:  # Python lists: ~7 MB a segment
                self._reduction_tables.popitem(last=False)
        if table is _NO_TABLE:
            return _NO_REDUCTIONS, _NO_STATISTICS
        starts, keys, reductions, values = table
        lo, hi = starts[row], starts[row + 1]
        if lo == hi:
            return _NO_REDUCTIONS, _NO_STATISTICS
        vals = values[lo:hi]
        # equal slices, no check: hot path
        stats = dict(zip(keys[lo:hi], vals, strict=False))
        reds = {r: v for r, v in zip(reductions[lo:hi], vals, strict=False) if r is not None}
        return reds, stats

    def _row_statistics(
        self, seg: int, row: int
    ) -> tuple[Mapping[tuple[str, bool], float], Mapping[str, float]]:
        """`_statistics_at` of one row, from the segment's NumPy columns (two binary searches):
        what a segment of which only a few records are built costs, instead of its whole
        table (a reader of the columns builds a Record at a raw step now and then)."""
        rows, codes, values = self._reductions(seg)
        lo = int(rows.searchsorted(row, "left"))
        hi = int(rows.searchsorted(row, "right"))
        if lo == hi:
            return _NO_REDUCTIONS, _NO_STATISTICS
        table = self._segments[seg].codes
        code_list = codes[lo:hi].tolist()
        vals = values[lo:hi].tolist()
        stats = {_FIXED_KEYS.get(c) or table.key(c): v for c, v in zip(code_list, vals, strict=True)}
        reds = {r: v for r, v in zip(map(CODES.get, code_list), vals, strict=True) if r is not None}
        return reds, stats

    def _reduction_table(self, seg: int) -> _ReductionTable:
        """A segment's saved statistics as Python lists, decoded once, the first time a record
        of it is asked for (codes 64-255 through the segment's own code table)."""
        rows, codes, values = self._reductions(seg)
        if not len(rows):
            return _NO_TABLE
        starts = np.searchsorted(rows, np.arange(len(self._segments[seg]) + 1, dtype=rows.dtype))
        table = self._segments[seg].codes
        code_list = codes.tolist()
        key_of = {code: _FIXED_KEYS.get(code) or table.key(code) for code in set(code_list)}
        keys = [key_of[code] for code in code_list]
        reductions = [CODES.get(code) for code in code_list]
        return starts.tolist(), keys, reductions, values.tolist()

    # loading ----------------------------------------------------------------------------
    def refresh(self) -> int:
        """Load index files written since the last refresh; the number of new records.

        Segments are numbered from 1 without gaps (FORMAT.md): a missing number is a damaged
        run, reported like a damaged file (raised, or with `on_corrupt="skip"` warned about and
        read around). With "raise" a damaged segment stays unread: the next refresh raises again."""
        if self.complete:
            return 0
        with no_collection():
            return self._refresh()

    def _refresh(self) -> int:
        new = 0
        for worker in self._listed(layout.WORKERS, partial(self.store.children, layout.WORKERS)):
            if worker in self.ended:
                continue
            known = worker in self.workers
            if not known:
                self._add_worker(worker)
            # before listing: nothing comes after it. A damaged END, when skipped, leaves the
            # worker not known to have ended (warned about once)
            ended = self._marker(layout.end_key(worker), End)
            wid = self.workers.index(worker)
            prefix = layout.index_prefix(worker)
            listed = self._listed(prefix, partial(self.store.list, prefix, self._last_key.get(worker)))
            if known and (ended is not None or listed):  # written to since: by the same run?
                self._check_same_run(worker)
            for key in listed:
                parsed = layout.parse_segment_key(key)
                if parsed is None or parsed[1] != "index" or parsed[0] != worker:
                    continue  # not a segment: no file of ours
                seq, expected = parsed[2], self._next_seq.get(worker, 1)
                if seq > expected:
                    self._gap(worker, expected, seq)
                new += self._load_segment(key, wid, seq)
                self._last_key[worker], self._next_seq[worker] = key, seq + 1
            if ended is not None:
                last = self._next_seq.get(worker, 1) - 1
                if ended.last_segment is not None and last < ended.last_segment:
                    self._gap(worker, last + 1, ended.last_segment + 1, ended=True)
                self.ended[worker] = ended
        return new

    def _listed(self, prefix: str, lister: Callable[[], list[str]]) -> list[str]:
        """A listing of the run; a file where a folder of the run should be (or a folder that
        cannot be listed) is a damaged run. A path that is no folder at all is no run: that
        error is the caller's (create_trial names the path)."""
        try:
            return lister()
        except FileNotFoundError:  # removed while listed
            return []
        except OSError as e:
            if isinstance(e, NotADirectoryError) and not self.store.exists(prefix.rstrip("/")):
                raise  # the run's own path is a file
            what = "not a folder" if isinstance(e, NotADirectoryError) else "cannot be listed"
            self._corrupt(CorruptRecord(f"{self.store.url}/{prefix}: {what} ({e.strerror or e})"))
            return []

    def _gap(self, worker: str, expected: int, found: int, ended: bool = False) -> None:
        """Segments `expected`..`found - 1` of `worker` are missing: a gap before segment
        `found`, or (`ended`) the newest ones, which its END counts."""
        missing = layout.index_key(worker, expected)
        more = f" (and {found - expected - 1} more)" if found - expected > 1 else ""
        why = (
            f"its END says segment {found - 1} is the last of {worker}"
            if ended
            else f"segment {found} follows segment {expected - 1} of {worker}"
        )
        self._corrupt(
            CorruptRecord(
                f"{self.store.url}/{missing}: missing{more}; {why} (segments are numbered without gaps)"
            )
        )

    def _add_worker(self, worker: str) -> None:
        meta = self._marker(layout.meta_key(worker), WorkerMeta)  # raises before it is added
        self.workers.append(worker)
        self._writer[worker] = _identity(meta)
        if meta is not None and not self.single_worker:
            self.expected_workers = max(self.expected_workers, meta.expected_workers)

    def _check_same_run(self, worker: str) -> None:
        """Raise `RunReplaced` when `worker`'s folder now holds another run than the one read
        so far: its meta.json names another writer and its first segment is not the one read
        (a resumed run keeps its first segment and goes on: not a replacement)."""
        try:
            meta = markers.load(self.store, layout.meta_key(worker), WorkerMeta)
        except CorruptRecord:
            return  # reported where the run is opened; a damaged marker proves nothing here
        now = _identity(meta)
        if now == self._writer.get(worker):
            return
        if self._writer.get(worker) is None or worker not in self._first_crc:
            # its meta.json was not there yet when the worker was found (a writer starting), or
            # nothing of it was read yet: no run of another writer can be mixed in
            self._writer[worker] = now
            return
        if worker in self._first_crc:
            try:
                first = zlib.crc32(self.store.read(layout.index_key(worker, 1)))
            except OSError:  # removed: the earlier run is gone
                first = None
            if first == self._first_crc[worker]:
                self._writer[worker] = now  # resumed: the same run goes on
                return
        raise RunReplaced(
            f"{self.store.url}: {worker} was replaced by a new run while it was read "
            f"(its meta.json now names pid {getattr(meta, 'pid', None)}, started {getattr(meta, 'started', None)})"
        )

    def _marker(self, key: str, kind: type[M]) -> M | None:
        """A worker's marker; None when absent, or damaged and `on_corrupt="skip"`."""
        try:
            return markers.load(self.store, key, kind)
        except CorruptRecord as e:
            self._corrupt(e)
            return None

    def _corrupt(self, err: CorruptRecord) -> None:
        """A damaged file or a missing segment: raised, or with "skip" warned about once."""
        text = str(err)
        first = text not in self.corrupt
        if first:
            self.corrupt.append(text)
        if self.on_corrupt == "raise":
            raise CorruptRecord(
                f"{text} (open the run with create_trial(path, on_corrupt='skip') to read the rest)"
            )
        if first:
            warnings.warn(f"mldbg: skipping {text}", RuntimeWarning, stacklevel=4)

    def _load_segment(self, key: str, worker_id: int, seq: int) -> int:
        where = f"{self.store.url}/{key}"
        try:
            blob = self.store.read(key)
            seg = decode_index(blob, where)
            if seq == 1:
                self._first_crc[self.workers[worker_id]] = zlib.crc32(blob)
            expected = layout.data_key(self.workers[worker_id], seq)
            if seg.data_key != expected:
                raise CorruptRecord(
                    f"{where}: points into {seg.data_key!r}, not its own data file {expected!r}"
                )
        except FileNotFoundError:  # removed since the listing
            return 0
        except OSError as e:  # a folder where the file should be, an unreadable file
            self._corrupt(CorruptRecord(f"{where}: cannot be read ({e.strerror or e})"))
            return 0
        except CorruptRecord as e:
            self._corrupt(e)
            return 0
        seg_idx = len(self._segments)
        self._segments.append(seg)
        self._segment_worker.append(worker_id)
        self._segment_keys.append(key)
        self._ungathered.append(len(seg))
        self.loaded_records += len(seg)
        c = seg.columns
        # the saved statistics: kept as loaded up to `_RELEASE_BYTES` in all; beyond, read
        # again from the index file when they are decoded into columns (`Columns`) or a
        # record's are asked (`_reductions`): a run of 10^6 steps held ~220 MB of them from
        # its opening until they were decoded, the peak of `mldbg check`'s memory
        reds = _reductions_of(seg)
        size = sum(a.nbytes for a in reds)
        self._segment_entries.append(len(reds[0]))
        self._segment_reductions.append(reds)
        if len(reds[0]):
            self._key_ids(seg_idx)  # the segment's key table, built while its codes are here
            if self._held_bytes + size > _RELEASE_BYTES:
                self._segment_reductions[seg_idx] = None
            else:
                self._held_bytes += size
        ids = c["name_id"]
        order = np.argsort(ids, kind="stable")
        uniq, starts = np.unique(ids[order], return_index=True)
        starts = starts.tolist()
        bounds = [*starts[1:], len(order)] if len(order) else []  # an empty segment: zero rows
        names, tensors = seg.names, self._tensors  # a pass per name: locals (100,000 names)
        # every segment of a run usually names the same tensors, in the same order: the
        # previous segment's tensor of each name id, interned names and collections serve
        last = self._last_names
        same = last is not None and last[0] == names
        by_lid = last[1] if same and last is not None else [tensors.get(n) for n in names]
        # each name's rows: one record per name (many scalar names) as rows of one, no slicing
        pieces = (
            order.reshape(-1, 1)
            if len(uniq) == len(order)
            else (order[a:b] for a, b in zip(starts, bounds, strict=True))
        )
        for lid, rows in zip(uniq.tolist(), pieces, strict=True):
            tensor = by_lid[lid]
            if tensor is None:
                tensor = by_lid[lid] = tensors[names[lid]] = _TensorColumns()
            tensor._chunks.append((seg_idx, rows))
        if same and last is not None:
            seg.names = last[0]
        else:
            # the segment's names as the strings met first (every segment of a run names the
            # same tensors: 514 segments held 107,000 copies of 208 names)
            known = self._name_strings
            seg.names = [known.setdefault(n, n) for n in names]
        if not same or last is None or seg.collections != last[2]:  # else: in them already
            for coll, lids in seg.collections.items():
                self.collections.setdefault(coll, set()).update(map(seg.names.__getitem__, lids))
        self._last_names = (seg.names, by_lid, seg.collections)
        steps, first = np.unique(c["step"], return_index=True)
        if len(steps):
            met = np.arange(self._step_seq_next, self._step_seq_next + len(steps), dtype=np.int64)
            self._step_seq_next += len(steps)
            self._step_chunks.append(
                (
                    steps.astype(np.int64),
                    c["mode"][first].astype(np.int64),
                    c["mode_step"][first].astype(np.int64),
                    met,
                )
            )
        # the columns kept, as arrays of their own (no view into the file's bytes, which are
        # dropped: a 10^6-step run held 380 MB of them), in the narrowest integer type that
        # holds their values; the names' ids and the reductions (above) are not needed again
        seg.columns = {k: _compact(v) for k, v in c.items() if k != "name_id" and not k.startswith("red_")}
        return len(seg)

    # the run's steps ------------------------------------------------------------------------
    def step_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The run's global steps with saved data, sorted, and each one's mode value and mode
        step (int64 arrays, shared: not to be written to). A step met again in a later segment
        keeps what the first one said of it."""
        if self._step_chunks:
            chunks, self._step_chunks = self._step_chunks, []
            old = (self._steps, self._step_modes, self._step_msteps, self._step_seq)
            parts = [np.concatenate([o, *(c[i] for c in chunks)]) for i, o in enumerate(old)]
            steps = parts[0]
            if len(steps) > 1 and bool(np.all(steps[1:] > steps[:-1])):  # new steps only, in order
                keep = None
            else:  # the first met of each step: the table's own, then the segments' in order
                _, keep = np.unique(steps, return_index=True)
            if keep is not None:
                parts = [p[keep] for p in parts]
            self._steps, self._step_modes, self._step_msteps, self._step_seq = parts
            self._by_mode = None
        return self._steps, self._step_modes, self._step_msteps

    @property
    def step_count(self) -> int:
        """How many global steps have saved data (it only grows)."""
        return len(self.step_table()[0])

    def step_info(self, step: int) -> tuple[int, int] | None:
        """(mode value, mode step) of global step `step`, or None when it has no saved data."""
        steps, modes, msteps = self.step_table()
        n = len(steps)
        if n and isinstance(step, (int, np.integer)) and steps.item(n - 1) - steps.item(0) == n - 1:
            i = int(step) - steps.item(0)  # every step of a stretch: an offset, no search
            i = i if 0 <= i < n else n
        else:
            i = int(np.searchsorted(steps, step))
        if i < len(steps) and int(steps[i]) == step:
            return int(modes[i]), int(msteps[i])
        return None

    def _mode_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The steps ordered by (mode, mode step, order met): (modes, mode steps, global steps)."""
        self.step_table()
        if self._by_mode is None:
            order = np.lexsort((self._step_seq, self._step_msteps, self._step_modes))
            if bool(np.all(order[1:] > order[:-1])):  # in that order already (one mode): shared
                self._by_mode = (self._step_modes, self._step_msteps, self._steps)
            else:
                self._by_mode = (self._step_modes[order], self._step_msteps[order], self._steps[order])
        return self._by_mode

    def mode_steps(self, mode: int) -> np.ndarray:
        """The mode steps of mode value `mode` with saved data, sorted, without repeats."""
        modes, msteps, _ = self._mode_table()
        lo, hi = np.searchsorted(modes, [mode, mode + 1])
        ms = msteps[lo:hi]
        if len(ms) > 1:
            ms = ms[np.concatenate(([True], ms[1:] != ms[:-1]))]
        return ms

    def global_step(self, mode: int, mode_step: int) -> int | None:
        """The global step of `mode`'s step `mode_step` (of two steps that claim it, the one
        met last), or None when it has no saved data."""
        modes, msteps, steps = self._mode_table()
        lo, hi = (int(i) for i in np.searchsorted(modes, [mode, mode + 1]))
        j = lo + int(np.searchsorted(msteps[lo:hi], mode_step, side="right")) - 1
        if j >= lo and int(msteps[j]) == mode_step:
            return int(steps[j])
        return None
