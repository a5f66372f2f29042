"""Columnar reads of a run's statistics: a statistic of a tensor over all its steps as one array.

Rules that scan a statistic over steps (`nan_count` of every tensor, `zero_fraction`,
`mean_abs` of the gradients) need one number per record. Building a `Record` per tensor and
step costs microseconds each; decoding the index's sparse reductions columns (`red_row`,
`red_code`, `red_value`, FORMAT.md) once, in NumPy, gives the same numbers as float64 columns
for a tensor's whole run at a time. `Columns` keeps them per tensor and grows them as the trial
loads more (a live run): only the new records are decoded.

The index supplies the per-segment arrays (`RunIndex.statistic_columns`, `RunIndex.stacked`);
the decoding itself is here, in plain NumPy.
"""

from __future__ import annotations

import contextlib
import functools
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from mldbg.errors import CorruptRecord
from mldbg.store.statistics import STATS_PREFIX

if TYPE_CHECKING:
    from mldbg.trial.index import OneNumberRows
    from mldbg.trial.trial import Trial

_EMPTY_I = np.zeros(0, dtype=np.int64)
_EMPTY_B = np.zeros(0, dtype=bool)
_MANY = 64  # tensors, beyond which the small ones' values are read together
_DICT_STEPS = 4096  # a tensor saved at more steps is looked up by binary search (`index`)
_GROUP_ENTRIES = 1 << 20  # saved statistics decoded together (`gather_statistics`): ~20 MB joined
_KEPT_ROWS = 1 << 20  # records of the last `one_number_rows` kept for the next ask (~40 MB at most)


class _BySegment(Protocol):
    """Segment number -> its saved statistics (row, code, value): a list, or a lookup."""

    def __getitem__(self, seg: int, /) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


def scatter_statistics(
    out: dict[str, np.ndarray],
    n: int,
    dest: np.ndarray,
    rows: np.ndarray,
    red_rows: np.ndarray,
    red_codes: np.ndarray,
    red_values: np.ndarray,
    key_of: Callable[[int], str | None],
) -> None:
    """Write the saved statistics of index `rows` of one segment into `out[key][dest]`.

    `red_rows` (sorted), `red_codes`, `red_values` are the segment's sparse reductions
    columns; `out` maps a statistic key to a float64 column of length `n` (created
    NaN-filled when a key is first met). One vectorised pass: no Python per record, a loop
    over the distinct codes only."""
    if not len(rows) or not len(red_rows):
        return
    rows = rows.astype(red_rows.dtype, copy=False)  # searchsorted converts otherwise, per call
    lo = np.searchsorted(red_rows, rows, "left")
    counts = np.searchsorted(red_rows, rows, "right") - lo
    _scatter(out, n, dest, lo, counts, red_codes, red_values, key_of)


def gather_statistics(
    sizes: Sequence[int],
    seg: np.ndarray,
    row: np.ndarray,
    reductions: _BySegment,
    key_ids: Mapping[int, np.ndarray],
    keys: Sequence[str],
    entry_counts: Sequence[int] | None = None,
) -> list[dict[str, np.ndarray]]:
    """The saved scalar statistics of several tensors' records at once, as `scatter_statistics`
    writes them, one dict of columns per tensor.

    The records are `sizes[0]` records of the first tensor, then those of the second...,
    each at (`seg`, `row`), each tensor's in the order of their segments (load order);
    `reductions[s]` is segment `s`'s sparse reductions columns and `key_ids[s]` maps its
    codes to indices into `keys` (-1: not a key). The segments are taken in groups of about
    `_GROUP_ENTRIES` saved statistics: each group's records are located in one pass for every
    tensor together (its columns joined once), then each tensor's records of the group are
    written in one pass. No NumPy call per tensor and segment (which dominated when every
    tensor of a run was decoded), and no copy of the whole run's statistics at once (a run of
    10^6 steps held 16 million entries: 300 MB of joined columns). `entry_counts[s]`, where given,
    is how many statistics segment `s` saved (the groups are formed without reading them)."""
    out: list[dict[str, np.ndarray]] = [{} for _ in sizes]
    if not len(seg):
        return out
    bounds = np.concatenate(([0], np.cumsum(np.asarray(sizes, dtype=np.int64)))).tolist()
    ordered = [
        b - a < 2 or bool((seg[a + 1 : b] >= seg[a : b - 1]).all())
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]
    used = sorted(key_ids)
    counts = entry_counts  # each segment's saved statistics, where known: not read to count them
    groups: list[list[int]] = [[]]
    entries = 0
    for s in used:
        groups[-1].append(s)
        entries += len(reductions[s][0]) if counts is None else counts[s]
        if entries >= _GROUP_ENTRIES:
            groups.append([])
            entries = 0
    for group in groups:
        if group:
            _gather_group(out, sizes, bounds, ordered, seg, row, group, reductions, key_ids, keys)
    for columns in out:
        for key, col in columns.items():
            columns[key] = col.finish() if isinstance(col, _Uniform) else _constant(col)
    return out


def _constant(col: np.ndarray) -> np.ndarray:
    """`col`, or where every value is the same (a `nan_count` or `inf_count` of zeros, a
    `requires_grad` of ones, all NaN) that value broadcast to its length: a read-only view that
    holds one number (a 10^6-step run's statistics held 54 MB of such columns). The decoded
    columns are read-only for their readers in any case."""
    if len(col) < 64 or col.dtype != np.float64:
        return col
    bits = col.view(np.int64)  # the same bits: a NaN as a NaN, -0.0 apart from 0.0
    same = bool((bits == bits[0]).all())
    return np.broadcast_to(col[:1].copy(), col.shape) if same else col


def _gather_group(
    out: list[dict[str, np.ndarray]],
    sizes: Sequence[int],
    bounds: Sequence[int],
    ordered: Sequence[bool],
    seg: np.ndarray,
    row: np.ndarray,
    used: Sequence[int],
    reductions: _BySegment,
    key_ids: Mapping[int, np.ndarray],
    keys: Sequence[str],
) -> None:
    """`gather_statistics` of the records in segments `used` (sorted)."""
    # every row of the segments met: where its entries begin in the joined columns
    row_base = np.zeros(used[-1] + 1, dtype=np.int64)
    starts, codes, values = [], [], []
    rows_before = entries_before = 0
    for s in used:
        red_rows, red_codes, red_values = reductions[s]
        nrows = int(red_rows[-1]) + 1 if len(red_rows) else 0
        row_base[s] = rows_before
        starts.append(np.searchsorted(red_rows, np.arange(nrows, dtype=red_rows.dtype)) + entries_before)
        codes.append(key_ids[s][red_codes])
        values.append(red_values)
        rows_before += nrows
        entries_before += len(red_rows)
    if not entries_before:
        return
    starts.append(np.asarray([entries_before], dtype=np.int64))
    begin = np.concatenate(starts)
    all_codes, all_values = np.concatenate(codes), np.concatenate(values)
    nrows_of = np.diff(np.append(row_base[used], rows_before))
    first, last = used[0], used[-1]

    def key_of(kid: int) -> str | None:
        return keys[kid] if kid >= 0 else None

    used_at = np.asarray(used, dtype=np.int64)
    for i, n in enumerate(sizes):
        if not n:
            continue
        a, b = bounds[i], bounds[i + 1]
        tseg = seg[a:b]
        dest: slice | np.ndarray
        if ordered[i]:  # the usual case, segments in load order: the group's records are a slice
            lo_i = int(np.searchsorted(tseg, first, "left"))
            hi_i = int(np.searchsorted(tseg, last, "right"))
            if lo_i == hi_i:
                continue
            dest = slice(lo_i, hi_i)
        else:
            dest = np.flatnonzero((tseg >= first) & (tseg <= last))  # every segment there is in `used`
            if not len(dest):
                continue
        gseg, grow = tseg[dest], row[a:b][dest]
        at = row_base[gseg] + grow
        inside = grow < nrows_of[np.searchsorted(used_at, gseg)]
        lo = np.where(inside, begin[np.minimum(at, len(begin) - 1)], 0)
        counts = np.where(inside, begin[np.minimum(at + 1, len(begin) - 1)] - lo, 0)
        _scatter(out[i], n, dest, lo, counts, all_codes, all_values, key_of, lazy=True)


def _scatter(
    out: dict[str, np.ndarray],
    n: int,
    dest: np.ndarray | slice,
    lo: np.ndarray,
    counts: np.ndarray,
    codes: np.ndarray,
    values: np.ndarray,
    key_of: Callable[[int], str | None],
    lazy: bool = False,
) -> None:
    """Write the entries `lo[i]`..`lo[i] + counts[i]` of (`codes`, `values`) of each record
    `i` into `out[key_of(code)][dest[i]]` (a float64 column of length `n`, NaN-filled when a
    key is first met; `lazy`: a `_Uniform` while its values are all the same)."""
    if not len(lo):
        return
    c = int(counts[0])
    if c and bool((counts == c).all()):
        pos2 = lo[:, None] + np.arange(c)[None, :]
        codes2 = codes[pos2]
        if bool((codes2 == codes2[0]).all()):  # the usual case: every record saved the same
            values2 = values[pos2]  # statistics in the same order: one column each
            first = codes2[0].tolist()
            twice = len(set(first)) < len(first)
            for j, code in enumerate(first):
                key = key_of(int(code))
                if key is None:
                    continue
                col = out.get(key)
                if col is None:
                    held = _Uniform.of(n, dest, values2[:, j]) if lazy and not twice else None
                    if held is not None:
                        out[key] = held  # type: ignore[assignment]  # (`gather_statistics` finishes it)
                        continue
                    col = out[key] = np.full(n, np.nan)
                elif isinstance(col, _Uniform):
                    col = col.add(out, key, dest, values2[:, j], twice)
                    if col is None:
                        continue
                col[dest] = values2[:, j]  # a code twice in a record: the last wins, as below
            return
    total = int(counts.sum())
    if not total:
        return
    # records that saved other statistics (an evaluation's, a raw step's): every entry written
    # at once into a (code, record) table, then one row per statistic key
    first = np.cumsum(counts) - counts
    pos = np.repeat(lo, counts) + (np.arange(total) - np.repeat(first, counts))
    where = np.repeat(np.arange(len(lo)), counts)  # each entry's record
    codes1 = codes[pos]
    values1 = values[pos]
    if int(codes1.min()) < 0:  # not a key (`gather_statistics`' -1)
        keep = codes1 >= 0
        codes1, values1, where = codes1[keep], values1[keep], where[keep]
        if not len(codes1):
            return
    present = np.flatnonzero(np.bincount(codes1))
    slot = np.zeros(int(present[-1]) + 1, dtype=np.int64)
    slot[present] = np.arange(len(present))
    table = np.full((len(present), len(lo)), np.nan)
    table[slot[codes1], where] = values1  # a code twice in a record: the last wins
    whole = isinstance(dest, slice) and len(lo) == n
    for j, code in enumerate(present.tolist()):
        key = key_of(int(code))
        if key is None:
            continue
        col = out.get(key)
        if col is None and whole:
            out[key] = table[j]
            continue
        if col is None:
            col = out[key] = np.full(n, np.nan)
        elif isinstance(col, _Uniform):
            col = col.add(out, key, dest, table[j], True)
            assert col is not None
        col[dest] = table[j]


class _Uniform:
    """A decoded statistic column (`gather_statistics`) while every value written to it is
    the same (the same bits): that value and where it was written, not a column of `n`
    floats. Most such columns stay so to the end (a `nan_count` or `inf_count` of zeros, a
    `requires_grad` of ones: 54 MB of a 10^6-step run's 134 MB), and are then that value
    broadcast (`_constant`'s result) without ever being written out; the first other value
    makes it the column it stands for (`add`)."""

    __slots__ = ("bits", "dests", "n", "written")

    def __init__(self, n: int, bits: np.ndarray):
        self.n, self.bits = n, bits
        self.dests: list[np.ndarray | slice] = []
        self.written = 0

    @classmethod
    def of(cls, n: int, dest: np.ndarray | slice, values: np.ndarray) -> _Uniform | None:
        """`values` written at `dest` of a new column of `n`: held as one value where they
        are all the same (None: write them out)."""
        if not len(values):
            return None
        held = cls(n, np.ascontiguousarray(values[:1], dtype=np.float64).copy())
        if not held._same(values):
            return None
        held.dests.append(dest)
        held.written = len(values)
        return held

    def _same(self, values: np.ndarray) -> bool:
        v = np.ascontiguousarray(values, dtype=np.float64)
        return bool(len(v)) and bool((v.view(np.int64) == self.bits.view(np.int64)[0]).all())

    def add(
        self, out: dict, key: str, dest: np.ndarray | slice, values: np.ndarray, other: bool
    ) -> np.ndarray | None:
        """Note `values` written at `dest`; where they differ from the value held (or
        `other`: written otherwise), the column as written so far (in `out[key]`), for the
        caller to write them to; None when they were noted."""
        if not other and self._same(values):
            self.dests.append(dest)
            self.written += len(values)
            return None
        col = out[key] = self.column()
        return col

    def column(self) -> np.ndarray:
        col = np.full(self.n, np.nan)
        for dest in self.dests:
            col[dest] = self.bits[0]
        return col

    def finish(self) -> np.ndarray:
        """The column: `_constant`'s result for it."""
        if self.written == self.n and self.n >= 64:
            return np.broadcast_to(self.bits, (self.n,))
        return _constant(self.column())


def gather_fixed(blob: bytes, base: int, offsets: np.ndarray, nbytes: int) -> list[bytes]:
    """The `nbytes` bytes at each of `offsets` (absolute; `blob` starts at `base`), one piece
    per record: records of one shape and dtype read with one read of their span, then cut
    (a slice per record costs less than a fancy index over every byte)."""
    return [blob[o : o + nbytes] for o in (offsets - base).tolist()]


@functools.cache
def _crc_table() -> np.ndarray:
    """The CRC-32 byte table of zlib's polynomial (reflected 0xEDB88320)."""
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0xEDB88320), table >> 1).astype(np.uint32)
    return table


def crc32_rows(rows: np.ndarray) -> np.ndarray:
    """`zlib.crc32` of each row of a 2-D uint8 array (records of one size), computed for all
    rows together a byte position at a time: the same numbers, no Python per record (a loss
    of 10^6 records of 4 bytes is four passes, where a call per record took ~0.3 s)."""
    table = _crc_table()
    crc = np.full(len(rows), 0xFFFFFFFF, dtype=np.uint32)
    for k in range(rows.shape[1]):
        crc = table[(crc ^ rows[:, k]) & 0xFF] ^ (crc >> 8)
    return crc ^ np.uint32(0xFFFFFFFF)


def bad_checksums(pieces: Sequence[bytes], expected: np.ndarray) -> np.ndarray:
    """The indices of the `pieces` (one record's bytes each) whose CRC-32
    (`mldbg.store.format.checksum`) differs from `expected`: every record verified."""
    # zlib.crc32 itself (what `checksum` calls), without a Python frame per record
    found = np.fromiter(map(zlib.crc32, pieces), dtype=np.uint32, count=len(pieces))
    return np.flatnonzero(found != expected)


def _located(known: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """For each of `steps`, the index of the first of `known` (sorted, distinct) not below
    it, clipped to the last (0 when `known` is empty): where it is, when it is there. Steps
    saved at every step of a stretch (a loss, a run's table of 10^6 steps) are a range:
    then an offset, not a binary search of each."""
    n = len(known)
    if n > _DICT_STEPS and known.item(n - 1) - known.item(0) == n - 1:  # a long range
        return np.clip(np.asarray(steps, dtype=np.int64) - known.item(0), 0, n - 1)
    return np.minimum(np.searchsorted(known, steps), max(0, n - 1))  # few: a search costs less


def _increasing(steps: np.ndarray) -> bool:
    """Are `steps` strictly increasing?"""
    return len(steps) < 2 or bool((steps[1:] > steps[:-1]).all())


class TensorColumns:
    """One tensor's records over steps: for each global step that has one, the first worker's
    record (by worker name, as reads do). `steps` is sorted; `statistic(key)` and `has_raw`
    align with it."""

    def __init__(self, name: str):
        self.name = name
        self.steps: np.ndarray = _EMPTY_I
        self.mode: np.ndarray = _EMPTY_I
        self.has_raw: np.ndarray = _EMPTY_B
        # load-order columns (every record of every worker), grown as records load
        self._n = 0
        self._step = _EMPTY_I
        self._mode = _EMPTY_I
        self._worker = _EMPTY_I
        self._raw = _EMPTY_B
        self._stats: dict[str, np.ndarray] = {}
        self._picked: np.ndarray | None = None  # `_pick`, where it is not every position in order
        self._identity = True  # `_pick` is every position in order (the columns need no gather)
        self._cache: dict[str, np.ndarray] = {}
        self._positions: dict[int, int] | None = None  # step -> index into `steps`
        self._layouts: tuple[np.ndarray, np.ndarray] | None = None  # per load-order record
        self._shapes: list[tuple[int, ...]] = []  # per load-order record, grown
        self._vectors: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}

    @property
    def _pick(self) -> np.ndarray:
        """The load-order position of each entry of `steps` (made when asked where it is every
        position in order: 8 MB per 10^6 records not held)."""
        if self._picked is None:
            return np.arange(len(self.steps), dtype=np.int64)
        return self._picked

    def statistic(self, key: str) -> np.ndarray | None:
        """The saved scalar statistic `key` at each of `steps` (NaN where that record has none);
        None when no record of the tensor has it. A `variance` also comes from a saved `std`
        (and the other way round), as `TrialView.saved_statistic` does."""
        found = self._cache.get(key)
        if found is not None:
            return found
        col = self._stats.get(key)
        if col is not None:
            found = col if self._identity else col[self._pick]
            if key in ("variance", "std"):
                other = self._stats.get("std" if key == "variance" else "variance")
                if other is not None:
                    alt = other if self._identity else other[self._pick]
                    alt = alt * alt if key == "variance" else np.sqrt(alt)
                    found = np.where(np.isnan(found), alt, found)
        elif key in ("variance", "std"):
            other = self._stats.get("std" if key == "variance" else "variance")
            if other is None:
                return None
            alt = other if self._identity else other[self._pick]
            found = alt * alt if key == "variance" else np.sqrt(alt)
        else:
            return None
        found.flags.writeable = False
        self._cache[key] = found
        return found

    def index(self, step: int) -> int:
        """The index of a global step in `steps`; -1 when the tensor has no record there."""
        if len(self.steps) > _DICT_STEPS:  # a dict of 10^6 steps held ~100 MB: binary search
            n, first = len(self.steps), self.steps.item(0)
            if isinstance(step, (int, np.integer)) and self.steps.item(n - 1) - first == n - 1:
                i = int(step) - first  # every step of a stretch: an offset, no search
                return i if 0 <= i < n else -1
            i = int(self.steps.searchsorted(step))
            return i if i < n and self.steps.item(i) == step else -1
        pos = self._positions
        if pos is None:
            pos = self._positions = dict(zip(self.steps.tolist(), range(len(self.steps)), strict=True))
        return pos.get(step, -1)

    def position(self, i: int) -> int:
        """The position in `Trial.records(name)` of the record at `steps[i]`."""
        return i if self._identity else int(self._pick[i])

    def value(self, key: str, step: int) -> float:
        """The saved scalar statistic `key` at one global step; NaN when it has none there (or
        it is NaN: ask the record then)."""
        col = self.statistic(key)
        if col is None:
            return float("nan")
        i = self.index(step)
        return float("nan") if i < 0 else col.item(i)

    @property
    def has_statistics(self) -> bool:
        """True when some record of the tensor has a saved scalar statistic."""
        return bool(self._stats)

    def layouts(self, trial: Trial) -> tuple[np.ndarray, np.ndarray]:
        """(dtype kind, number of dimensions) of the record at each of `steps`."""
        if self._layouts is None or len(self._layouts[0]) != self._n:
            self._layouts = trial.layouts(self.name)
        kinds, ndim = self._layouts
        return kinds[self._pick], ndim[self._pick]

    def shapes(self, trial: Trial) -> list[tuple[int, ...]]:
        """The shape of the record at each of `steps`, from the index (no `Record` built)."""
        if len(self._shapes) != self._n:
            self._shapes += trial.shapes(self.name, len(self._shapes))
        return [self._shapes[p] for p in self._pick.tolist()]

    def keys(self) -> list[str]:
        """The scalar statistics saved for this tensor (at any step)."""
        return sorted(self._stats)

    def at(self, steps: np.ndarray) -> np.ndarray:
        """For each of `steps` (sorted, distinct), its index into this tensor's `steps`, or -1
        where the tensor has no record at that step. A tensor saved on few of them (the
        statistics of a long run: 10^4 of 10^6 steps) is placed among them, not they among
        its: time in its number of steps, plus one fill."""
        if not len(self.steps):
            return np.full(len(steps), -1, dtype=np.int64)
        if len(self.steps) * 8 < len(steps):
            pos = np.searchsorted(steps, self.steps)
            inside = pos < len(steps)
            hit = np.zeros(len(self.steps), dtype=bool)
            hit[inside] = steps[pos[inside]] == self.steps[inside]
            out = np.full(len(steps), -1, dtype=np.int64)
            out[pos[hit]] = np.flatnonzero(hit)
            return out
        i = _located(self.steps, steps)
        return np.where(self.steps[i] == steps, i, -1)

    @property
    def loaded(self) -> int:
        """How many of the tensor's records (`Trial.records`, load order) are in the columns."""
        return self._n

    def _grow(self, trial: Trial, new: dict[str, np.ndarray] | None = None) -> bool:
        """Take in the records loaded since the last call; `new`: their scalar statistics,
        decoded already (`Trial.statistic_columns` of them from position `loaded`)."""
        records = trial.records(self.name)
        n = len(records)
        if n == self._n:
            return False
        start = self._n
        if start:
            self._step = np.concatenate([self._step, records.step[start:]])
            self._mode = np.concatenate([self._mode, records.mode[start:]])
            self._worker = np.concatenate([self._worker, records.worker[start:]])
            self._raw = np.concatenate([self._raw, records.has_raw[start:]])
        else:  # the index's own read-only columns (they only grow): no copy
            self._step, self._mode = records.step, records.mode
            self._worker, self._raw = records.worker, records.has_raw
        # a vector statistic's records (`stats/...`) carry no scalar statistics of their own
        if new is None:
            new = {} if self.name.startswith(STATS_PREFIX) else trial.statistic_columns(self.name, start)
        grown: dict[str, np.ndarray] = {}
        for key in set(self._stats) | set(new):
            old = self._stats.get(key)
            add = new.get(key)
            if old is None and add is not None and not start and len(add) == n:
                grown[key] = add  # the decoded column itself (a run read whole: no copy)
                continue
            grown[key] = np.concatenate(
                [
                    np.full(start, np.nan) if old is None else old,
                    np.full(n - start, np.nan) if add is None else add,
                ]
            )
        self._stats = grown
        self._n = n
        step = self._step
        if _increasing(step):
            # each step once, in order (a run written by one process): every record is picked
            # (of any worker: one record a step), and the columns are their own step-aligned views
            self._picked = None
            self._identity = True
            self.steps, self.mode, self.has_raw = step, self._mode, self._raw
        else:
            if len(set(self._worker.tolist())) <= 1:
                order = np.argsort(step, kind="stable")
            else:  # several workers: per step, the first by worker name
                rank = np.argsort(np.argsort(np.asarray(records.workers, dtype=object)))
                order = np.lexsort((rank[self._worker], step))
            steps = step[order]
            keep = np.ones(len(order), dtype=bool)
            keep[1:] = steps[1:] != steps[:-1]
            self._picked = order[keep]
            self._identity = False
            self.steps = steps[keep]
            self.mode = self._mode[self._picked]
            self.has_raw = self._raw[self._picked]
        self._cache.clear()
        self._positions = None
        self._vectors.clear()
        return True


def _take_fresh(
    todo: Sequence[TensorColumns], records: Sequence[Mapping[str, np.ndarray]], decoded: Mapping[str, dict]
) -> None:
    """`TensorColumns._grow` of many tensors grown for the first time, at once: whether each
    tensor's steps increase is found for all of them in one pass over their steps joined,
    then each takes its record columns (the index's own, read-only) and decoded statistics
    as they are. What `_grow` does for such a tensor, without its per-tensor NumPy calls (a
    run of 100,000 scalar names spent seconds there). A tensor whose steps do not increase
    (several workers, records out of order) is left to `_grow`."""
    sizes = np.fromiter((len(r["step"]) for r in records), dtype=np.int64, count=len(records))
    if not int(sizes.sum()):
        return
    steps = np.concatenate([r["step"] for r in records])
    owner = np.repeat(np.arange(len(records), dtype=np.int64), sizes)
    bad = np.zeros(len(records), dtype=bool)
    if len(steps) > 1:
        down = (steps[1:] <= steps[:-1]) & (owner[1:] == owner[:-1])  # within one tensor
        bad[owner[1:][down]] = True
    for cols, cols_of, no, n in zip(todo, records, bad.tolist(), sizes.tolist(), strict=True):
        if no or not n or cols.name.startswith(STATS_PREFIX):
            continue
        new = decoded.get(cols.name) or {}
        if any(len(v) != n for v in new.values()):
            continue  # not the whole tensor: `_grow` takes it
        cols._step, cols._mode = cols_of["step"], cols_of["mode"]
        cols._worker, cols._raw = cols_of["worker"], cols_of["raw"]
        cols._stats = dict(new)
        cols._n = n
        cols._picked = None
        cols._identity = True
        cols.steps, cols.mode, cols.has_raw = cols._step, cols._mode, cols._raw


class Columns:
    """A trial's statistics as columns, tensor by tensor, decoded on first use and grown
    (new records only) when the trial has loaded more."""

    def __init__(self, trial: Trial):
        self.trial = trial
        self._tensors: dict[str, TensorColumns] = {}
        self._seen: dict[str, int] = {}  # tensor -> the trial's loaded_records when last grown
        # the last `one_number_rows` (loaded_records, names asked, known, table): asked again
        # for the same names at the same load (`exploding_tensor`'s screening, then its check)
        self._rows: tuple[int, list[str], list[str], OneNumberRows] | None = None

    @classmethod
    def of(cls, trial: Trial) -> Columns:
        """The trial's columns, shared by every reader of it (the rules' views, the skipped
        rules' report): decoded once per trial, not once per reader (each decoding of a
        10^6-step run's statistics took seconds and hundreds of MB). A new set when the trial
        started over on a replaced run."""
        index = getattr(trial, "_index", None)
        found = getattr(trial, "_shared_columns", None)
        if found is not None and found[0] is index:
            return found[1]
        columns = cls(trial)
        with contextlib.suppress(AttributeError):  # a trial that takes no attributes: one per reader
            trial._shared_columns = (index, columns)  # type: ignore[attr-defined]
        return columns

    def tensor(self, name: str) -> TensorColumns | None:
        """The columns of a recorded tensor; None for a name the trial does not know."""
        found = self._tensors.get(name)
        if found is not None and self._seen.get(name) == self.trial.loaded_records:
            return found  # grown through what the trial loaded (asked per tensor and call)
        if not self.trial.has_tensor(name):
            return None
        found = self._tensors.get(name)
        if found is None:
            found = self._tensors[name] = TensorColumns(name)
        loaded = self.trial.loaded_records
        if self._seen.get(name) != loaded:
            if name.startswith(STATS_PREFIX):  # a vector statistic: no scalar statistics
                found._grow(self.trial, {})
                self._seen[name] = loaded
            else:
                self._grow_tensors(loaded, name)
        return found

    def steps_of(self, names: Iterable[str]) -> np.ndarray:
        """The global steps (sorted, int64) at which some recorded tensor of `names` has a
        record: the union of their `tensor(name).steps`, found for all of them at once (no
        columns of each grown). Names the trial does not know are left out."""
        return self.trial.steps_of(self._known(names))

    def one_number_rows(self, names: Sequence[str]) -> tuple[list[str], OneNumberRows]:
        """The recorded tensors of `names` (those the trial knows, in order) and their
        records read as one number each, together (`Trial.one_number_rows`): what `values`
        gives of a tensor of one-number records, for 100,000 names with no columns grown.
        The table is read-only: the same one is handed again for the same names until the
        trial loads more."""
        loaded = self.trial.loaded_records
        last = self._rows
        if last is not None and last[0] == loaded and last[1] == names:
            return list(last[2]), last[3]
        self._rows = None
        known = self._known(names)
        rows = self.trial.one_number_rows(known)
        for column in rows:
            column.flags.writeable = False
        if len(rows.step) <= _KEPT_ROWS:
            self._rows = (loaded, list(names), known, rows)
        return known, rows

    def _known(self, names: Iterable[str]) -> list[str]:
        """`names` the trial knows, in order: all of them usually, found by one set test (the
        trial's own check of each name follows), not a `has_tensor` call per name."""
        names = list(names)
        if set(names) <= set(self.trial.tensor_names()):  # vector statistics aside: asked one by one
            return names
        return [n for n in names if self.trial.has_tensor(n)]

    def _grow_tensors(self, loaded: int, asked: str) -> None:
        """Grow every recorded tensor (vector statistics aside) with the records loaded since
        it was last grown, their statistics decoded together (`Trial.statistic_columns_of`):
        one pass over each segment's statistics for all tensors, a few ms for a run whose
        tensors one by one took tens (most rules, and the default set, read most tensors)."""
        todo = []
        for name in dict.fromkeys([asked, *self.trial.tensor_names()]):
            if self._seen.get(name) != loaded:
                cols = self._tensors.get(name)
                if cols is None:
                    cols = self._tensors[name] = TensorColumns(name)
                todo.append(cols)
        decoded = self.trial.statistic_columns_of({c.name: c.loaded for c in todo})
        fresh = [c for c in todo if not c.loaded] if len(todo) > _MANY else []
        if fresh:  # many tensors grown the first time: their columns taken together
            _take_fresh(fresh, self.trial.record_columns_of([c.name for c in fresh]), decoded)
        for cols in todo:
            if cols.loaded and self._seen.get(cols.name) is None:
                self._seen[cols.name] = loaded  # just taken in by `_take_fresh`
                continue
            cols._grow(self.trial, decoded[cols.name])
            self._seen[cols.name] = loaded
        release = getattr(self.trial, "_statistics_decoded", None)
        if release is not None and self.trial.loaded_records == loaded:
            release()  # every tensor's statistics loaded so far are in the columns now

    def steps(self) -> np.ndarray:
        """The run's global steps with saved data (`Trial.steps()`), sorted, as the trial's
        own int64 array (shared: not to be written to)."""
        return self.trial._step_table()[0]

    def modes(self, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The mode value (`Mode`) and the mode's own step of each of `steps` (global steps of
        the run), as `Trial.mode` and `Trial.mode_step` give them, from the run's table of its
        steps (NumPy arrays, shared with the trial: nothing copied per call)."""
        for _ in range(2):
            known, modes, mode_steps = self.trial._step_table()
            i = _located(known, steps)
            if len(known) and bool((known[i] == steps).all()):
                return modes[i], mode_steps[i]
            missing = steps[known[i] != steps] if len(known) else steps
            self.trial.mode(int(missing[0]))  # raises the trial's error for a step it does not have
        known, modes, mode_steps = self.trial._step_table()  # loaded by that refresh
        return modes[_located(known, steps)], mode_steps[_located(known, steps)]

    def values(self, name: str, max_elements: int = 1024) -> tuple[np.ndarray, np.ndarray] | None:
        """The saved values of a small tensor (a loss, a vector statistic record
        `stats/<tensor>/<key>`) over its steps: (its steps, an array with one row per step);
        None when one of its records has no raw value, the shape changed over the run, or a
        value has more than `max_elements` elements (read those one by one)."""
        cols = self.tensor(name)
        if cols is None or not len(cols.steps):
            return None
        key = str(max_elements)
        if key in cols._vectors:
            return cols._vectors[key]
        if len(self._tensors) > _MANY:
            self._prefetch(key, max_elements)
            if key in cols._vectors:
                return cols._vectors[key]
        found = None
        if bool(cols.has_raw.all()):
            first = self.trial.records(name)[cols.position(0)]
            if int(np.prod(first.shape)) <= max_elements:
                try:
                    stacked = self.trial.stacked(name, cols._pick)
                except CorruptRecord:  # a damaged data file: read record by record, each says
                    stacked = None
                found = None if stacked is None else (cols.steps, stacked)
        cols._vectors[key] = found  # None too: asked again only when the tensor grew
        return found

    def _prefetch(self, key: str, max_elements: int) -> None:
        """`values` of every small tensor whose records all hold their raw value, read
        together (`Trial.stacked_many`: one read per segment): a run of many scalar names
        reads them in a few reads, not one (or more) per name. What does not read cleanly
        that way is left to `values`, one tensor at a time."""
        items = [
            (name, cols)
            for name, cols in self._tensors.items()
            if key not in cols._vectors and len(cols.steps)
        ]
        if len(items) <= _MANY:
            return
        # which hold a raw value at every step: for all of them in one pass
        sizes = np.fromiter((len(cols.has_raw) for _, cols in items), dtype=np.int64, count=len(items))
        flags = np.concatenate([cols.has_raw for _, cols in items])
        every = np.logical_and.reduceat(flags, np.cumsum(sizes) - sizes).tolist()
        upto = np.arange(int(sizes.max()), dtype=np.int64)  # `_pick` of a tensor in order: a slice
        asked = {
            name: (upto[: len(cols.steps)] if cols._identity else cols._pick)
            for (name, cols), ok in zip(items, every, strict=True)
            if ok
        }
        if len(asked) <= _MANY:
            return
        for name, stacked in self.trial.stacked_many(asked, 8 * max_elements).items():
            if stacked[0].size <= max_elements:
                cols = self._tensors[name]
                cols._vectors[key] = (cols.steps, stacked)

    def values_at(self, name: str, steps: np.ndarray, max_elements: int = 1024) -> np.ndarray | None:
        """The saved values of a small tensor at `steps` (sorted global steps), one row per
        step, read together (`Trial.stacked`): for a tensor whose shape changes over the run
        (training and evaluation batches of other sizes) where `values` declines. None when
        a step has no raw record of it, the shapes or dtypes differ among those steps, a value
        has more than `max_elements` elements, or a data file is damaged (read those one by
        one: each read says what is wrong)."""
        cols = self.tensor(name)
        if cols is None or not len(cols.steps) or not len(steps):
            return None
        at = cols.at(steps)
        if (at < 0).any() or not bool(cols.has_raw[at].all()):
            return None
        positions = at if cols._identity else cols._pick[at]
        if int(np.prod(self.trial.records(name)[int(positions[0])].shape)) > max_elements:
            return None
        try:
            return self.trial.stacked(name, positions)
        except CorruptRecord:
            return None


__all__ = [
    "Columns",
    "TensorColumns",
    "bad_checksums",
    "crc32_rows",
    "gather_fixed",
    "gather_statistics",
    "scatter_statistics",
]
