"""System samplers: the node (per-core CPU, I/O wait, memory, disk, network, GPUs) and one
worker process (its CPU with its children, e.g. data-loader workers, and memory).

psutil and NVML (`nvidia-ml-py`) are imported here only, when a sampler is made. No GPU, no
driver or no `nvidia-ml-py` means no GPU columns and a note in the node's meta, never an error.
Rates (disk, network) and utilizations are over the interval since the previous sample.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

from mldbg.profiler import layout
from mldbg.profiler.series import ChunkWriter
from mldbg.store.base import Store

log = logging.getLogger("mldbg")

NAN = float("nan")


def node_columns(cores: int, gpus: int) -> dict[str, str]:
    return {
        "time": "float64",  # seconds since the epoch
        "cpu": "float32",  # samples x cores, busy % per core
        "iowait": "float32",  # % of CPU time waiting for I/O, whole node
        "mem_percent": "float32",
        "mem_used": "float64",  # bytes
        "disk_read": "float64",  # bytes/s
        "disk_write": "float64",
        "net_recv": "float64",  # bytes/s
        "net_sent": "float64",
        "gpu_util": "float32",  # samples x gpus, %
        "gpu_mem": "float32",  # samples x gpus, % of the GPU's memory in use
        "gpu_mem_used": "float64",  # samples x gpus, bytes
    }


PROCESS_COLUMNS = {
    "time": "float64",
    "cpu": "float32",  # % of one core: the process and its live children
    "rss": "float64",  # bytes, the process
    "children_rss": "float64",  # bytes, its live children
    "children": "int32",  # number of live child processes (data-loader workers, ...)
}


def node_writer(
    store: Store, node: str, cores: int, gpus: int, meta: dict[str, Any] | None = None
) -> ChunkWriter:
    """The writer of a node's system stream; also writes the node's meta.json.

    Real samplers use it; so can tests and importers of foreign traces (rows in the order of
    `node_columns`, 2-D columns as sequences of `cores` or `gpus` values).
    """
    info = {"node": node, "cores": cores, "gpus": gpus, **(meta or {})}
    store.write(layout.node_meta_key(node), [json.dumps(info).encode()])
    return ChunkWriter(
        store, layout.node_stream(node), node_columns(cores, gpus), {"stream": "system", "node": node}
    )


def process_writer(store: Store, worker: str) -> ChunkWriter:
    return ChunkWriter(
        store,
        layout.worker_stream(worker, layout.PROCESS),
        PROCESS_COLUMNS,
        {"stream": "process", "worker": worker},
    )


class GPUs:
    """NVML devices; `count == 0` and a `note` when there are none."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.info: list[dict[str, Any]] = []
        self.note = ""
        self._nvml: Any = None
        try:
            import pynvml
        except ImportError:
            self.note = "no GPU metrics: nvidia-ml-py is not installed (pip install 'mldbg[profiler]')"
            return
        try:
            pynvml.nvmlInit()
            n = pynvml.nvmlDeviceGetCount()
        except Exception as e:  # no driver, no device: a CPU machine
            self.note = f"no GPU metrics: NVML unavailable ({type(e).__name__}: {e})"
            return
        self._nvml = pynvml
        for i in range(n):
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                name = pynvml.nvmlDeviceGetName(h)
                mem = pynvml.nvmlDeviceGetMemoryInfo(h)
                self.handles.append(h)
                self.info.append(
                    {
                        "index": i,
                        "name": name if isinstance(name, str) else name.decode(),
                        "memory_total": int(mem.total),
                    }
                )
            except Exception as e:
                log.warning("mldbg: GPU %d is not readable through NVML: %s", i, e)
        if not self.handles:
            self.note = "no GPU metrics: NVML sees no GPU"

    @property
    def count(self) -> int:
        return len(self.handles)

    def sample(self) -> tuple[list[float], list[float], list[float]]:
        util, mem, used = [], [], []
        nvml = self._nvml
        for h in self.handles:
            try:
                u = nvml.nvmlDeviceGetUtilizationRates(h)
                m = nvml.nvmlDeviceGetMemoryInfo(h)
                util.append(float(u.gpu))
                mem.append(100.0 * m.used / m.total if m.total else NAN)
                used.append(float(m.used))
            except Exception:
                util.append(NAN)
                mem.append(NAN)
                used.append(NAN)
        return util, mem, used

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
            self._nvml = None


class NodeSampler:
    """One sample of the whole node per call (the first call only primes the counters)."""

    def __init__(self) -> None:
        import psutil

        self.psutil = psutil
        self.cores = psutil.cpu_count(logical=True) or 1
        self.gpus = GPUs()
        self._cpu = psutil.cpu_times(percpu=True)
        self._disk = _safe(psutil.disk_io_counters)
        self._net = _safe(psutil.net_io_counters)
        self._t = time.time()

    def sample(self) -> list[Any] | None:
        ps = self.psutil
        now = time.time()
        dt = now - self._t
        if dt <= 0:
            return None
        cpu_now = ps.cpu_times(percpu=True)
        per_core, iowait = _cpu_busy(self._cpu, cpu_now)
        self._cpu = cpu_now
        vm = ps.virtual_memory()
        disk = _safe(ps.disk_io_counters)
        net = _safe(ps.net_io_counters)
        dr = dw = nr = ns = NAN
        if disk is not None and self._disk is not None:
            dr = max(0.0, (disk.read_bytes - self._disk.read_bytes) / dt)
            dw = max(0.0, (disk.write_bytes - self._disk.write_bytes) / dt)
        if net is not None and self._net is not None:
            nr = max(0.0, (net.bytes_recv - self._net.bytes_recv) / dt)
            ns = max(0.0, (net.bytes_sent - self._net.bytes_sent) / dt)
        self._disk, self._net, self._t = disk, net, now
        gu, gm, gb = self.gpus.sample() if self.gpus.count else ([], [], [])
        return [now, per_core, iowait, float(vm.percent), float(vm.used), dr, dw, nr, ns, gu, gm, gb]

    def close(self) -> None:
        self.gpus.close()


class ProcessSampler:
    """The worker process and its children that run the same program (data-loader and compile
    workers; a server or a shell the job started is not one of its loaders), re-listed every
    `children_seconds`: listing scans /proc, too slow to do every 500 ms on a busy node."""

    def __init__(self, pid: int | None = None, children_seconds: float = 5.0):
        import psutil

        self.psutil = psutil
        self.proc = psutil.Process(pid or os.getpid())
        self.create_time = self.proc.create_time()
        self.children_seconds = children_seconds
        self._children: list[Any] = []
        self._next_list = 0.0
        self._prev: dict[int, float] = {}
        self._t = time.time()
        self._prev[self.proc.pid] = _cpu_seconds(self.proc)
        self._exe = _exe(self.proc)
        self._started = (
            time.time() - 1.0
        )  # create times are rounded: a child started with the profiler counts

    def _refresh_children(self, now: float) -> None:
        if now < self._next_list:
            return
        self._next_list = now + self.children_seconds
        try:
            children = self.proc.children(recursive=True)
        except self.psutil.Error:
            children = []
        self._children = [c for c in children if self._ours(c)]

    def _ours(self, child: Any) -> bool:
        """A child that works for the training: the same Python, started after the profiler
        (a server or pool the process ran before, a test runner's leftovers, are not its data
        loaders), and not one of multiprocessing's own helpers (the resource tracker and fork
        server that any spawn-started pool leaves behind)."""
        try:
            if self._exe is not None and _exe(child) != self._exe:
                return False
            if child.create_time() < self._started:
                return False
            line = " ".join(child.cmdline())
        except self.psutil.Error:
            return False
        return not any(helper in line for helper in _HELPERS)

    def sample(self) -> list[Any] | None:
        now = time.time()
        dt = now - self._t
        if dt <= 0:
            return None
        self._refresh_children(now)
        busy = 0.0
        seen: dict[int, float] = {}
        rss = children_rss = 0.0
        live = 0
        for p in [self.proc, *self._children]:
            try:
                with p.oneshot():
                    secs = _cpu_seconds(p)
                    mem = float(p.memory_info().rss)
            except self.psutil.Error:  # a child that exited
                continue
            seen[p.pid] = secs
            prev = self._prev.get(p.pid)
            busy += secs - prev if prev is not None else 0.0
            if p is self.proc:
                rss = mem
            else:
                children_rss += mem
                live += 1
        self._prev, self._t = seen, now
        return [now, max(0.0, 100.0 * busy / dt), rss, children_rss, live]


#: the command lines of multiprocessing's helper processes (not data loaders)
_HELPERS = (
    "multiprocessing.resource_tracker",
    "multiprocessing.forkserver",
    "multiprocessing.semaphore_tracker",
)


def _exe(p: Any) -> str | None:
    """The program a process runs, or None when the system will not say."""
    try:
        return str(p.exe()) or None
    except Exception:  # psutil.Error: gone, or not ours to inspect
        return None


def _cpu_seconds(p: Any) -> float:
    t = p.cpu_times()
    return float(t.user + t.system)


def _cpu_busy(before: Sequence[Any], after: Sequence[Any]) -> tuple[list[float], float]:
    """Per-core busy % and the node's I/O-wait % between two `cpu_times(percpu=True)`."""
    per_core = []
    wait_total = all_total = 0.0
    for a, b in zip(before, after, strict=False):
        total = _total(b) - _total(a)
        idle = (b.idle - a.idle) + (getattr(b, "iowait", 0.0) - getattr(a, "iowait", 0.0))
        wait = getattr(b, "iowait", 0.0) - getattr(a, "iowait", 0.0)
        if total <= 0:
            per_core.append(0.0)
            continue
        per_core.append(min(100.0, max(0.0, 100.0 * (1.0 - idle / total))))
        wait_total += max(0.0, wait)
        all_total += total
    iowait = 100.0 * wait_total / all_total if all_total > 0 else 0.0
    return per_core, iowait


def _total(t: Any) -> float:
    """All CPU time of a core; guest time is already counted in user time on Linux."""
    return sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)


def _safe(fn: Any) -> Any:
    try:
        return fn()
    except Exception:  # containers without /proc/diskstats and the like
        return None
