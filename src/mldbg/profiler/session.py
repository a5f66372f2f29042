"""`Profiler`: one worker's profiling session: the sampler thread, the step timeline and the
profiling windows, all written through the run's store.

A hook makes one when given `profiler_config=` and closes it with itself; it hands over the
profiling windows its framework can capture (`captures={"torch": ...}`: the profiler imports no
framework). Without a hook:

```
prof = Profiler("runs/x", ProfilerConfig())
for step, batch in enumerate(loader):
    prof.timeline.step_begin(step)
    ...
    prof.timeline.step_end()
prof.close()
```

The thread wakes every `system_interval_ms` to sample and every `flush_seconds` to turn the
timeline's events into step rows and write what it buffered. Nothing it does can raise into
training: a failing store is retried, a failing sampler is logged once and dropped.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from mldbg.closing import close_at_exit
from mldbg.profiler import layout
from mldbg.profiler.config import ProfilerConfig
from mldbg.profiler.series import ChunkWriter
from mldbg.profiler.timeline import STEP_COLUMNS, NoTimeline, StepParser, StepTimeline, Timeline
from mldbg.profiler.windows import Capture, PythonCapture, Window
from mldbg.store import Store, open_store

log = logging.getLogger("mldbg")

FINAL_RETRY_SECONDS = 5.0  # close(): how long a failing store is retried before rows are given up

CaptureFactory = Callable[[Store, str], Capture]  # (store, worker) -> a window's capture


class Profiler:
    def __init__(
        self,
        out_dir: str | os.PathLike[str] | Store,
        config: ProfilerConfig | None = None,
        *,
        rank: int = 0,
        worker: str | None = None,
        node: str | None = None,
        framework: str = "",
        captures: Mapping[str, CaptureFactory] | None = None,
    ):
        """`captures`: the framework's window captures by kind (`"torch"` for `torch_profiler`)."""
        self.config = config = config or ProfilerConfig()
        self.store = open_store(out_dir)
        self.worker = worker or f"worker_{rank}"
        self.node = layout.safe_name(node or os.environ.get("MLDBG_NODE") or socket.gethostname())
        self.notes: list[str] = []
        self.started = time.time()
        self.samples = 0
        self.sampler_cpu_seconds = 0.0
        self._closed = False
        self._stop = threading.Event()

        self.windows: list[Window] = []
        if config.python_profiler:
            self.windows.append(Window(*config.python_profiler, PythonCapture(self.store, self.worker)))
        if config.torch_profiler:
            torch_capture = (captures or {}).get("torch")
            if torch_capture is not None:
                self.windows.append(Window(*config.torch_profiler, torch_capture(self.store, self.worker)))
            else:
                self.notes.append("torch_profiler window ignored: only the PyTorch hook captures it")
        self.timeline: Timeline = NoTimeline()  # what the training thread marks
        self._events: StepTimeline | None = None  # the same timeline, where it records
        self._parser: StepParser | None = None
        self._steps: ChunkWriter | None = None
        if config.step_phases or self.windows:
            self.timeline = self._events = StepTimeline(on_step=self._on_step if self.windows else None)
            self._parser = StepParser(self._events.offset)
        if config.step_phases:
            self._steps = ChunkWriter(
                self.store,
                layout.worker_stream(self.worker, layout.STEPS),
                STEP_COLUMNS,
                {"stream": "steps", "worker": self.worker},
            )

        self._node_sampler: Any = None
        self._process_sampler: Any = None
        self._node_writer: ChunkWriter | None = None
        self._process_writer: ChunkWriter | None = None
        process_start = None
        cores = os.cpu_count() or 1
        if config.system_interval_ms:
            process_start, cores = self._start_samplers(config)
        else:
            process_start = _process_start()
        meta = {
            "worker": self.worker,
            "rank": rank,
            "node": self.node,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "process_start": process_start,
            "started": self.started,
            "framework": framework,
            "cores": cores,
            "node_metrics": self._node_sampler is not None,
            "config": config.to_dict(),
            "notes": self.notes,
        }
        self.store.write(layout.worker_meta_key(self.worker), [json.dumps(meta).encode()])
        self.store.delete(layout.worker_end_key(self.worker))
        self._thread = threading.Thread(target=self._run, name=f"mldbg-profiler-{self.worker}", daemon=True)
        self._thread.start()
        close_at_exit(self)

    def _start_samplers(self, config: ProfilerConfig) -> tuple[float | None, int]:
        try:  # psutil is imported by the samplers, when one is made
            from mldbg.profiler.system import NodeSampler, ProcessSampler, node_writer, process_writer

            proc = ProcessSampler()
        except ImportError as e:
            self.notes.append(f"no system metrics: {e.name} is not installed (pip install 'mldbg[profiler]')")
            log.warning("mldbg: %s", self.notes[-1])
            return _process_start(), os.cpu_count() or 1
        self._process_sampler = proc
        self._process_writer = process_writer(self.store, self.worker)
        cores = os.cpu_count() or 1
        sample_node = config.node_metrics
        if sample_node is None:
            sample_node = os.environ.get("LOCAL_RANK", "0") == "0"
        if sample_node:
            node = NodeSampler()
            cores = node.cores
            if node.gpus.note:
                self.notes.append(node.gpus.note)
            self._node_sampler = node
            self._node_writer = node_writer(
                self.store,
                self.node,
                node.cores,
                node.gpus.count,
                {"host": socket.gethostname(), "interval_ms": config.system_interval_ms, "sampled_by": self.worker,
                 "gpu_info": node.gpus.info, "notes": [node.gpus.note] if node.gpus.note else []},
            )  # fmt: skip
        return proc.create_time, cores

    # the training thread ------------------------------------------------------------------
    def _on_step(self, step: int, mode: int) -> None:
        for w in self.windows:
            w.on_step(step)

    # the profiler thread ------------------------------------------------------------------
    def _run(self) -> None:
        interval = self.config.interval_seconds
        flush = self.config.flush_seconds
        now = time.monotonic()
        next_sample = now + interval if interval else None
        next_flush = now + flush
        while True:
            wake = next_flush if next_sample is None else min(next_sample, next_flush)
            if self._stop.wait(max(0.0, wake - time.monotonic())):
                return
            c0 = time.thread_time()
            now = time.monotonic()
            if next_sample is not None and interval and now >= next_sample:
                self._sample()
                next_sample += interval
                if next_sample <= now:  # we fell behind (suspended?): skip, do not burst
                    next_sample = now + interval
            if now >= next_flush:
                self._flush()
                next_flush = now + flush
            self.sampler_cpu_seconds += time.thread_time() - c0

    def _sample(self) -> None:
        for attr, writer in (
            ("_node_sampler", self._node_writer),
            ("_process_sampler", self._process_writer),
        ):
            sampler = getattr(self, attr)
            if sampler is None or writer is None:
                continue
            try:
                row = sampler.sample()
            except Exception as e:  # never into training: drop this sampler
                log.error("mldbg: profiler sampler %s failed and is stopped: %s", attr.strip("_"), e)
                self.notes.append(f"{attr.strip('_')} stopped after an error: {e}")
                setattr(self, attr, None)
                continue
            if row is not None:
                writer.append(row)
        self.samples += 1

    def _flush(self, final: bool = False) -> None:
        if self._events is not None and self._parser is not None:
            rows = self._parser.feed(self._events.drain())
            if final:
                rows += self._parser.close()
            if self._steps is not None:
                for r in rows:
                    self._steps.append(r)
        for w in (self._node_writer, self._process_writer, self._steps):
            if w is None:
                continue
            # the last flush retries a failing store for a while: nothing comes after it
            deadline, delay = time.monotonic() + (FINAL_RETRY_SECONDS if final else 0.0), 0.05
            while not w.flush() and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(2 * delay, 1.0)
            if final and w.rows:
                log.error(
                    "mldbg: %d profiler rows for %s/%s could not be written",
                    len(w.rows),
                    w.store.url,
                    w.prefix,
                )

    # closing ------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the thread, write what is buffered and the END marker. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for w in self.windows:
            w.stop()
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        c0 = time.thread_time()
        self._flush(final=True)
        self.sampler_cpu_seconds += time.thread_time() - c0
        if self._node_sampler is not None:
            self._node_sampler.close()
        end = {
            "ended": time.time(),
            "samples": self.samples,
            "sampler_cpu_seconds": self.sampler_cpu_seconds,
            "notes": self.notes,
        }
        try:
            self.store.write(layout.worker_end_key(self.worker), [json.dumps(end).encode()])
        except Exception as e:
            log.error("mldbg: cannot write the profiler end marker to %s: %s", self.store.url, e)

    def __enter__(self) -> Profiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _process_start() -> float | None:
    try:
        import psutil

        return float(psutil.Process().create_time())
    except Exception:
        return None
