"""Reading the profiler's series back: `ProfilerData(trial_or_path)`.

Series are plain NumPy arrays (no pandas), one object per node (`system(node)`), per worker
process (`process(worker)`) and per worker's steps (`steps(worker)`). `refresh()` reads only
the chunks written since the last call, so rules follow a live run cheaply.
"""

from __future__ import annotations

import json
import logging
import os
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.profiler import layout
from mldbg.profiler.series import StreamReader
from mldbg.profiler.system import PROCESS_COLUMNS, node_columns
from mldbg.profiler.timeline import STEP_COLUMNS
from mldbg.store import Store, open_store

log = logging.getLogger("mldbg")

MB = 1 << 20


def _empty(columns: dict[str, str], width: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    out = {}
    for k, dt in columns.items():
        w = (width or {}).get(k)
        out[k] = np.empty((0, w) if w is not None else 0, dtype=dt)
    return out


@dataclass
class SystemSeries:
    """A node's samples. `cpu` is samples x cores, the GPU arrays samples x GPUs."""

    node: str
    time: np.ndarray
    cpu: np.ndarray
    iowait: np.ndarray
    mem_percent: np.ndarray
    mem_used: np.ndarray
    disk_read: np.ndarray
    disk_write: np.ndarray
    net_recv: np.ndarray
    net_sent: np.ndarray
    gpu_util: np.ndarray
    gpu_mem: np.ndarray
    gpu_mem_used: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.time)

    @property
    def cores(self) -> int:
        return int(self.cpu.shape[1]) if self.cpu.ndim == 2 else 0

    @property
    def gpus(self) -> int:
        return int(self.gpu_util.shape[1]) if self.gpu_util.ndim == 2 else 0

    @property
    def cpu_total(self) -> np.ndarray:
        """Mean busy % over the cores."""
        return self.cpu.mean(axis=1) if self.cores else np.full(len(self), np.nan)

    @property
    def cpu_max_core(self) -> np.ndarray:
        """Busy % of the busiest core at each sample."""
        return self.cpu.max(axis=1) if self.cores else np.full(len(self), np.nan)

    def metrics(self) -> dict[str, np.ndarray]:
        """Name -> 1-D series, in report order (units in the name)."""
        out = {
            "cpu_percent": self.cpu_total,
            "cpu_busiest_core_percent": self.cpu_max_core,
            "iowait_percent": self.iowait.astype(np.float64),
            "memory_percent": self.mem_percent.astype(np.float64),
            "disk_read_mb_s": self.disk_read / MB,
            "disk_write_mb_s": self.disk_write / MB,
            "net_recv_mb_s": self.net_recv / MB,
            "net_sent_mb_s": self.net_sent / MB,
        }
        for g in range(self.gpus):
            out[f"gpu{g}_util_percent"] = self.gpu_util[:, g].astype(np.float64)
            out[f"gpu{g}_memory_percent"] = self.gpu_mem[:, g].astype(np.float64)
        return out

    def where(self, mask: np.ndarray) -> SystemSeries:
        kw = {k: getattr(self, k)[mask] for k in node_columns(0, 0)}
        return SystemSeries(node=self.node, meta=self.meta, **kw)


@dataclass
class ProcessSeries:
    """A worker process: `cpu` is % of one core (the process and its live children)."""

    worker: str
    time: np.ndarray
    cpu: np.ndarray
    rss: np.ndarray
    children_rss: np.ndarray
    children: np.ndarray

    def __len__(self) -> int:
        return len(self.time)


@dataclass
class StepSeries:
    """One row per step: wall-clock `start`/`end` and phase durations in seconds (NaN when
    not observed). `duration` is the time from the end of the previous step to the end of
    this one (data loading included) less `debugger`, the seconds mldbg itself spent in the
    step (its statistics: not the training's time, 0 in runs recorded before it was kept);
    `compute` the time from the first forward to the end, with the same exception."""

    worker: str
    step: np.ndarray
    mode: np.ndarray
    start: np.ndarray
    end: np.ndarray
    data: np.ndarray
    forward: np.ndarray
    backward: np.ndarray
    optimizer: np.ndarray
    debugger: np.ndarray

    def __len__(self) -> int:
        return len(self.step)

    @property
    def compute(self) -> np.ndarray:
        return self.end - self.start - self.debugger

    @property
    def duration(self) -> np.ndarray:
        return self.compute + np.nan_to_num(self.data, nan=0.0)

    @property
    def other(self) -> np.ndarray:
        """Step time not in a phase: loss, zero_grad, clipping, logging, the hook itself."""
        parts = np.nan_to_num(self.forward) + np.nan_to_num(self.backward) + np.nan_to_num(self.optimizer)
        return np.maximum(0.0, self.compute - parts)

    def select(self, mode: Mode | int | str | None) -> StepSeries:
        if mode is None or Mode.parse(mode) == Mode.GLOBAL:
            return self
        m = self.mode == int(Mode.parse(mode))
        return StepSeries(self.worker, *(getattr(self, k)[m] for k in STEP_COLUMNS))

    def modes(self) -> list[Mode]:
        return [Mode(int(m)) for m in np.unique(self.mode)]


class ProfilerData:
    """The profiler's series of a run: a Trial, a Store or a path (also while it is written)."""

    def __init__(self, source: Any):
        if isinstance(source, (str, os.PathLike, Store)):
            self.store = open_store(source)
        else:  # a Trial
            self.store = source.store
        self.path = self.store.url
        self._nodes: dict[str, StreamReader] = {}
        self._node_meta: dict[str, dict[str, Any]] = {}
        self._process: dict[str, StreamReader] = {}
        self._steps: dict[str, StreamReader] = {}
        self._worker_meta: dict[str, dict[str, Any]] = {}
        self._ended: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.refresh()

    def __repr__(self) -> str:
        return f"ProfilerData({self.path!r}, nodes={self.nodes()}, workers={self.workers()})"

    # loading ------------------------------------------------------------------------------
    def refresh(self) -> int:
        """Read the chunks written since the last call; the number of new chunks."""
        self.refreshed_at = time.monotonic()
        new = 0
        for node in self.store.children(layout.NODES):
            if node not in self._nodes:
                self._nodes[node] = StreamReader(self.store, layout.node_stream(node))
                self._node_meta[node] = self._json(layout.node_meta_key(node)) or {"node": node}
            new += self._nodes[node].refresh()
        for worker in self.store.children(layout.WORKERS):
            if worker in self._ended:
                continue
            if worker not in self._worker_meta:
                self._worker_meta[worker] = self._json(layout.worker_meta_key(worker)) or {"worker": worker}
                self._process[worker] = StreamReader(self.store, layout.worker_stream(worker, layout.PROCESS))
                self._steps[worker] = StreamReader(self.store, layout.worker_stream(worker, layout.STEPS))
            ended = self._json(layout.worker_end_key(worker))  # before reading: nothing comes after
            new += self._process[worker].refresh() + self._steps[worker].refresh()
            if ended is not None:
                self._ended[worker] = ended
        if new:
            self.version += 1
        return new

    def _json(self, key: str) -> dict[str, Any] | None:
        try:
            return json.loads(self.store.read(key))
        except FileNotFoundError:
            return None
        except (ValueError, UnicodeDecodeError) as e:
            log.warning("mldbg: %s/%s is not valid JSON: %s", self.store.url, key, e)
            return None

    # what is there ------------------------------------------------------------------------
    def nodes(self) -> list[str]:
        return sorted(self._nodes)

    def workers(self) -> list[str]:
        return sorted(self._worker_meta)

    @property
    def has_data(self) -> bool:
        return bool(self._nodes or self._worker_meta)

    @property
    def has_system(self) -> bool:
        return any(len(self.system(n)) for n in self._nodes)

    @property
    def has_gpus(self) -> bool:
        return any(self.system(n).gpus for n in self._nodes)

    @property
    def has_steps(self) -> bool:
        return any(len(self._steps[w].columns().get("step", ())) for w in self._steps)

    @property
    def complete(self) -> bool:
        """Every worker's profiler has closed."""
        return bool(self._worker_meta) and set(self._ended) >= set(self._worker_meta)

    def node_meta(self, node: str) -> dict[str, Any]:
        return self._node_meta.get(node, {})

    def worker_meta(self, worker: str) -> dict[str, Any]:
        return self._worker_meta.get(worker, {})

    def worker_end(self, worker: str) -> dict[str, Any] | None:
        return self._ended.get(worker)

    def notes(self) -> list[str]:
        seen: list[str] = []
        for meta in [*self._node_meta.values(), *self._worker_meta.values(), *self._ended.values()]:
            for n in meta.get("notes", []):
                if n not in seen:
                    seen.append(n)
        return seen

    # series -------------------------------------------------------------------------------
    def system(self, node: str | None = None) -> SystemSeries:
        if node is None:
            node = self.nodes()[0] if self._nodes else ""
        reader = self._nodes.get(node)
        meta = self._node_meta.get(node, {})
        cores, gpus = int(meta.get("cores", 0)), int(meta.get("gpus", 0))
        cols = reader.columns() if reader is not None else {}
        if not cols:
            cols = _empty(
                node_columns(cores, gpus),
                {"cpu": cores, "gpu_util": gpus, "gpu_mem": gpus, "gpu_mem_used": gpus},
            )
        return SystemSeries(node=node, meta=meta, **{k: cols[k] for k in node_columns(0, 0)})

    def process(self, worker: str) -> ProcessSeries:
        reader = self._process.get(worker)
        cols = reader.columns() if reader is not None else {}
        if not cols:
            cols = _empty(PROCESS_COLUMNS)
        return ProcessSeries(worker, **{k: cols[k] for k in PROCESS_COLUMNS})

    def steps(self, worker: str | None = None, mode: Mode | int | str | None = None) -> StepSeries:
        """A worker's steps (the first worker's when None), in order; only `mode`'s if given."""
        if worker is None:
            worker = self.workers()[0] if self._worker_meta else ""
        reader = self._steps.get(worker)
        cols = reader.columns() if reader is not None else {}
        if not cols:
            cols = _empty(STEP_COLUMNS)
        if "debugger" not in cols:  # recorded before mldbg kept its own time apart
            cols = {**cols, "debugger": np.zeros(len(cols["step"]))}
        series = StepSeries(worker, *(cols[k] for k in STEP_COLUMNS))
        return series.select(mode)

    # windows ------------------------------------------------------------------------------
    def windows(self, kind: str = "torch") -> list[dict[str, Any]]:
        """Captured windows ('torch' or 'python'): their summary with `worker` and `key`s."""
        out = []
        for worker in self.workers():
            prefix = f"{layout.WORKERS}{worker}/{kind}/"
            for key in self.store.list(prefix):
                if not key.endswith(".ops.json" if kind == "torch" else ".json"):
                    continue
                summary = self._json(key) or {}
                base = key[: -len(".ops.json")] if kind == "torch" else key[: -len(".json")]
                summary.update(
                    {
                        "worker": worker,
                        "key": key,
                        "data_key": base + (".trace.json.gz" if kind == "torch" else ".prof"),
                    }
                )
                out.append(summary)
        return out

    # the job ------------------------------------------------------------------------------
    def step_at(self, t: float, worker: str | None = None) -> tuple[int, int | None]:
        """(global step, mode) running at wall-clock time `t` (the last one started before it)."""
        s = self.steps(worker)
        if not len(s):
            return 0, None
        i = int(np.searchsorted(s.start, t, side="right")) - 1
        i = min(max(i, 0), len(s) - 1)
        return int(s.step[i]), int(s.mode[i])

    def training_start(self, warmup_steps: int = 0) -> float | None:
        """Wall-clock end of the first `warmup_steps` training steps (their start with 0): the
        earliest time after which utilization reflects the training loop."""
        starts = []
        for w in self.workers():
            s = self.steps(w, Mode.TRAIN)
            if len(s):
                i = min(warmup_steps, len(s)) - 1
                starts.append(float(s.start[0]) if i < 0 else float(s.end[i]))
        return min(starts) if starts else None

    def job_summary(self) -> dict[str, Any]:
        """Initialization, training loop and finalization times (seconds), from the first
        worker that recorded steps: process start -> first step -> last step -> profiler end."""
        out: dict[str, Any] = {"workers": len(self.workers()), "nodes": len(self.nodes())}
        for w in self.workers():
            meta = self._worker_meta[w]
            s = self.steps(w)
            begin = meta.get("process_start") or meta.get("started")
            end = (self._ended.get(w) or {}).get("ended")
            out.update({"worker": w, "process_start": begin, "ended": end, "steps": len(s)})
            if len(s):
                first, last = float(s.start[0]), float(np.nanmax(s.end))
                out["first_step_start"], out["last_step_end"] = first, last
                out["initialization"] = first - begin if begin else None
                out["training_loop"] = last - first
                out["finalization"] = end - last if end else None
            if end and begin:
                out["total"] = end - begin
            if len(s):
                break
        return out


_SHARED: weakref.WeakKeyDictionary[Any, ProfilerData] = weakref.WeakKeyDictionary()


def profiler_data(trial: Any, max_age: float = 1.0) -> ProfilerData:
    """The ProfilerData of a Trial, shared by the rules that run over it; refreshed when the
    last refresh is older than `max_age` seconds (ten rules called at every step would
    otherwise list the store ten times a step)."""
    data = _SHARED.get(trial)
    if data is None:
        data = _SHARED[trial] = ProfilerData(trial)
    elif time.monotonic() - data.refreshed_at >= max_age:
        data.refresh()
    return data
