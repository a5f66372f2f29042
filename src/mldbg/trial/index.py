"""The in-memory index of a run: every segment's columns, grouped by tensor name.

Loading is incremental: `RunIndex.refresh()` lists only index files newer than the last one
seen per worker, so the cost of a refresh grows with what is new, not with the run.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field

import numpy as np

from mldbg.config import Mode
from mldbg.errors import CorruptRecord
from mldbg.store import Store, layout, markers
from mldbg.store.format import SegmentIndex, decode_index
from mldbg.store.markers import End, M, WorkerMeta

log = logging.getLogger("mldbg")


@dataclass
class TensorRows:
    """Where one tensor's records are: (segment, row) chunks, flattened on demand."""

    chunks: list[tuple[int, np.ndarray]] = field(default_factory=list)
    _flat: dict[str, np.ndarray] | None = None
    _by_step: dict[int, list[int]] | None = None
    _by_mode_step: dict[tuple[int, int], list[int]] | None = None

    def add(self, seg_idx: int, rows: np.ndarray) -> None:
        self.chunks.append((seg_idx, rows))
        self._flat = self._by_step = self._by_mode_step = None


class RunIndex:
    def __init__(self, store: Store, on_corrupt: str = "raise", single_worker: bool = False):
        """`single_worker`: the store shows one worker of a job (a WorkerView); it is complete
        when that worker ended, whatever the job's world size."""
        if on_corrupt not in ("raise", "skip"):
            raise ValueError("on_corrupt must be 'raise' or 'skip'")
        self.store = store
        self.on_corrupt = on_corrupt
        self.single_worker = single_worker
        self.segments: list[SegmentIndex] = []
        self.segment_worker: list[int] = []
        self.workers: list[str] = []  # index = worker id
        self.tensors: dict[str, TensorRows] = {}
        self.collections: dict[str, set[str]] = {}
        self.step_info: dict[int, tuple[int, int]] = {}  # global step -> (mode, mode_step)
        self.mode_step_to_step: dict[tuple[int, int], int] = {}
        self.corrupt: list[str] = []
        self.expected_workers = 1
        self.ended: dict[str, End] = {}
        self.version = 0
        self._last_key: dict[str, str] = {}
        self._reductions: dict[int, dict[tuple[int, int], float]] = {}

    @property
    def complete(self) -> bool:
        """Every worker that writes has ended and its last segment has been read."""
        return bool(self.ended) and len(self.ended) >= max(self.expected_workers, len(self.workers))

    def refresh(self) -> int:
        """Load index files written since the last refresh; the number of new records."""
        if self.complete:
            return 0
        new = 0
        for worker in self.store.children(layout.WORKERS):
            if worker in self.ended:
                continue
            if worker not in self.workers:
                self._add_worker(worker)
            ended = self._marker(layout.end_key(worker), End)  # before listing: nothing comes after
            wid = self.workers.index(worker)
            for key in self.store.list(layout.index_prefix(worker), self._last_key.get(worker)):
                self._last_key[worker] = key
                new += self._load_segment(key, wid)
            if ended is not None:
                self.ended[worker] = ended
        if new:
            self.version += 1
        return new

    def _add_worker(self, worker: str) -> None:
        self.workers.append(worker)
        meta = self._marker(layout.meta_key(worker), WorkerMeta)
        if meta is not None and not self.single_worker:
            self.expected_workers = max(self.expected_workers, meta.expected_workers)

    def _marker(self, key: str, kind: type[M]) -> M | None:
        """A worker's marker; None when absent, or damaged and `on_corrupt="skip"`."""
        try:
            return markers.load(self.store, key, kind)
        except CorruptRecord as e:
            self._corrupt(e)
            return None

    def _corrupt(self, err: CorruptRecord) -> None:
        self.corrupt.append(str(err))
        if self.on_corrupt == "raise":
            raise CorruptRecord(
                f"{err} (open the run with create_trial(path, on_corrupt='skip') to read the rest)"
            )
        warnings.warn(f"mldbg: skipping {err}", RuntimeWarning, stacklevel=4)

    def _load_segment(self, key: str, worker_id: int) -> int:
        try:
            seg = decode_index(self.store.read(key), f"{self.store.url}/{key}")
        except FileNotFoundError:
            return 0
        except CorruptRecord as e:
            self._corrupt(e)
            return 0
        seg_idx = len(self.segments)
        self.segments.append(seg)
        self.segment_worker.append(worker_id)
        c = seg.columns
        ids = c["name_id"]
        order = np.argsort(ids, kind="stable")
        uniq, starts = np.unique(ids[order], return_index=True)
        bounds = [*starts[1:], len(order)]
        for lid, a, b in zip(uniq.tolist(), starts.tolist(), bounds, strict=True):
            name = seg.names[lid]
            rows = self.tensors.get(name)
            if rows is None:
                rows = self.tensors[name] = TensorRows()
            rows.add(seg_idx, order[a:b])
        for coll, lids in seg.collections.items():
            self.collections.setdefault(coll, set()).update(seg.names[i] for i in lids)
        steps, first = np.unique(c["step"], return_index=True)
        for s, i in zip(steps.tolist(), first.tolist(), strict=True):
            if s not in self.step_info:
                mode, mstep = int(c["mode"][i]), int(c["mode_step"][i])
                self.step_info[s] = (mode, mstep)
                self.mode_step_to_step[(mode, mstep)] = s
        return len(seg)

    # per-tensor views -------------------------------------------------------------------
    def flat(self, rows: TensorRows) -> dict[str, np.ndarray]:
        if rows._flat is None:
            seg = np.concatenate([np.full(len(r), s, dtype=np.int64) for s, r in rows.chunks])
            row = np.concatenate([r for _, r in rows.chunks])
            cols = {"seg": seg, "row": row}
            for col in ("step", "mode", "mode_step"):
                cols[col] = np.concatenate([self.segments[s].columns[col][r] for s, r in rows.chunks]).astype(
                    np.int64
                )
            cols["worker"] = np.asarray(self.segment_worker, dtype=np.int64)[seg]
            rows._flat = cols
        return rows._flat

    def positions(self, rows: TensorRows, step: int, mode: Mode | None) -> list[int]:
        """Positions (into `flat`) of the records at a global step, or at a mode's step."""
        flat = self.flat(rows)
        if mode is None or mode == Mode.GLOBAL:
            if rows._by_step is None:
                rows._by_step = _group(flat["step"])
            return rows._by_step.get(step, [])
        if rows._by_mode_step is None:
            keys = flat["mode"] * (1 << 40) + flat["mode_step"]
            grouped = _group(keys)
            rows._by_mode_step = {(k >> 40, k & ((1 << 40) - 1)): v for k, v in grouped.items()}
        return rows._by_mode_step.get((int(mode), step), [])

    def reductions_of(self, seg_idx: int) -> dict[tuple[int, int], float]:
        found = self._reductions.get(seg_idx)
        if found is None:
            c = self.segments[seg_idx].columns
            found = self._reductions[seg_idx] = dict(
                zip(
                    zip(c["red_row"].tolist(), c["red_code"].tolist(), strict=False),
                    c["red_value"].tolist(),
                    strict=False,
                )
            )
        return found


def _group(keys: np.ndarray) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for pos, k in enumerate(keys.tolist()):
        out.setdefault(k, []).append(pos)
    return out
