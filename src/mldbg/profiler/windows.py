"""Profiling windows: turn a profiler on for steps `start_step .. start_step + num_steps - 1`.

A window starts at the first forward of its first step and stops when the step after its
last one begins (or when the profiler closes), on the training thread: both cProfile and
torch.profiler profile the thread that starts them. Results go through the store (see
`mldbg.profiler.layout`). cProfile's capture is here; a framework's own (torch.profiler:
`mldbg.frameworks.torch_trace`) is handed to the `Profiler` by that framework's hook.
"""

from __future__ import annotations

import json
import logging
import marshal
from typing import Any, Protocol

from mldbg.profiler import layout
from mldbg.store.base import Store

log = logging.getLogger("mldbg")

TOP = 60  # rows kept in the summaries


class Capture(Protocol):
    kind: str

    def start(self) -> None: ...

    def stop(self, first: int, last: int) -> None: ...


class Window:
    """One window of steps and the capture that runs over it."""

    def __init__(self, start_step: int, num_steps: int, capture: Capture):
        self.start_step = start_step
        self.num_steps = num_steps
        self.capture = capture
        self.running = False
        self.done = False
        self.last_step = start_step

    def on_step(self, step: int) -> None:
        if self.done:
            return
        end = self.start_step + self.num_steps
        if self.running and step >= end:
            self.stop()
        elif not self.running and self.start_step <= step < end:
            try:
                self.capture.start()
                self.running = True
                self.first_step = step
            except Exception as e:  # another profiler is active, ...: note it, train on
                self.done = True
                log.warning("mldbg: cannot start the %s window at step %d: %s", self.capture.kind, step, e)
        if self.running:
            self.last_step = step

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        self.done = True
        try:
            self.capture.stop(self.first_step, self.last_step)
        except Exception as e:
            log.warning(
                "mldbg: the %s window of steps %d-%d was not saved: %s",
                self.capture.kind,
                self.first_step,
                self.last_step,
                e,
            )


class StoreCapture:
    """A capture that writes what it captured, and its summary, through the run's store."""

    kind = ""

    def __init__(self, store: Store, worker: str):
        self.store = store
        self.worker = worker
        self.prof: Any = None  # the running profiler

    def write(self, first: int, last: int, suffix: str, data: bytes) -> None:
        self.store.write(layout.window_key(self.worker, self.kind, first, last, suffix), [data])

    def write_summary(self, first: int, last: int, suffix: str, **fields: Any) -> None:
        """A JSON summary of steps `first`..`last` (its tables cut to their `TOP` rows)."""
        self.write(first, last, suffix, json.dumps({"steps": [first, last], **fields}).encode())


class PythonCapture(StoreCapture):
    """cProfile over the window; writes the stats (`pstats.Stats` reads the .prof file) and a
    JSON table of the top functions by cumulative time."""

    kind = "python"

    def start(self) -> None:
        import cProfile

        self.prof = cProfile.Profile()
        self.prof.enable()

    def stop(self, first: int, last: int) -> None:
        import pstats

        self.prof.disable()
        stats = pstats.Stats(self.prof)
        raw = stats.stats  # type: ignore[attr-defined]  # undocumented attribute: typeshed lacks it
        self.write(first, last, ".prof", marshal.dumps(raw))
        rows = []
        for (file, line, func), (cc, nc, tt, ct, _callers) in raw.items():
            rows.append(
                {
                    "function": func,
                    "file": file,
                    "line": line,
                    "ncalls": nc,
                    "primitive_calls": cc,
                    "tottime": tt,
                    "cumtime": ct,
                }
            )
        rows.sort(key=lambda r: -r["cumtime"])
        total = getattr(stats, "total_tt", None)
        self.write_summary(first, last, ".json", total_seconds=total, functions=rows[:TOP])
        self.prof = None
