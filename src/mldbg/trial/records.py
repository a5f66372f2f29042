"""The trial's public index API: where each saved record of a tensor is, without reading it.

`Trial.records(name, step=None, mode=None, worker=None)` gives a tensor's records as NumPy
columns (`Records`), in the order the trial loaded them: a later refresh only appends, so a
reader that remembers how many it has seen picks up exactly the new ones. Indexing gives one
`Record` (its step, mode, worker, whether the raw tensor was saved, the saved reductions),
and `Trial.read(record)` reads its value with one ranged read. Rules, the TensorBoard export
and `Tensor` itself read the index through this; nothing reaches into the index's internals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from mldbg.config import Mode

if TYPE_CHECKING:
    from mldbg.trial.index import RunIndex


@dataclass(slots=True)
class Record:
    """One saved record of a tensor: one step of one worker. A value: read it, do not change it.

    `step` is the global step, `mode_step` the step count of its `mode`. `has_raw` is False
    when only reductions were saved (`Trial.read` then raises). `reductions` holds the saved
    ones, `{(reduction, abs): value}`, `statistics` every saved scalar statistic by key (vector
    statistics are records of their own, `mldbg.store.statistics.vector_name`); a reduction not saved is computed from the raw tensor
    by `Tensor.reduction_value`. `index_file` is where the index file that lists it is (a
    path or URL), for a message or a look with any safetensors reader.

    Not a frozen dataclass: rules build one per tensor and step, and a frozen one costs four
    times as much to build.
    """

    name: str
    step: int
    mode: Mode
    mode_step: int
    worker: str
    has_raw: bool
    reductions: Mapping[tuple[str, bool], float]
    # every saved scalar statistic by key (`mldbg.store.statistics`): `mean`, `mean_abs`, `l2`,
    # `nan_count`, `quantile(5.0)`... the reductions included; a format-1 run has the
    # `ReductionConfig` reductions only
    statistics: Mapping[str, float]
    index_file: str
    # (the index that located it, segment, row): only that trial reads it
    _at: tuple[object, int, int] = field(repr=False, compare=False)

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the tensor's value (bfloat16 reads as float32), from the index:
        known when only statistics were saved, too."""
        return self._layout()[0]

    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's shape, from the index (also for a statistics-only record)."""
        return self._layout()[1]

    def _layout(self) -> tuple[np.dtype, tuple[int, ...]]:
        return cast("RunIndex", self._at[0]).layout(self)  # the index that located it


class Records:
    """A tensor's records as read-only NumPy columns, one entry per record, in load order.

    Columns: `step` (global, int64), `mode` (the `Mode` value, int64), `mode_step` (int64),
    `worker` (int64, an index into `workers`) and `has_raw` (bool). `records[i]` is the i-th
    `Record`. Selecting (a step, a mode, a worker) only keeps positions: a column is gathered
    when it is asked for.
    """

    __slots__ = ("_columns", "_positions", "_record_at", "name", "workers")

    def __init__(
        self,
        name: str,
        columns: Mapping[str, np.ndarray],
        positions: tuple[int, ...] | np.ndarray | None,
        workers: list[str],
        record_at: Callable[[int], Record],
    ):
        self.name = name
        self.workers = workers  # worker names by id (shared with the trial: it only grows)
        self._columns = columns
        self._positions = positions  # None: every record, else the selected positions in `columns`
        self._record_at = record_at

    def _column(self, key: str) -> np.ndarray:
        col = self._columns[key]
        if self._positions is None:
            return col
        return col[np.asarray(self._positions, dtype=np.int64)]

    @property
    def step(self) -> np.ndarray:
        return self._column("step")

    @property
    def mode(self) -> np.ndarray:
        return self._column("mode")

    @property
    def mode_step(self) -> np.ndarray:
        return self._column("mode_step")

    @property
    def worker(self) -> np.ndarray:
        return self._column("worker")

    @property
    def has_raw(self) -> np.ndarray:
        return self._column("raw")

    def __len__(self) -> int:
        return len(self._columns["step"]) if self._positions is None else len(self._positions)

    def __getitem__(self, i: int) -> Record:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"record {i} of {n} records of {self.name!r}")
        if self._positions is None:
            return self._record_at(i % n)
        return self._record_at(int(self._positions[i]))

    def __iter__(self) -> Iterator[Record]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"Records({self.name!r}, {len(self)} records)"
