"""`StepTimeline`: step and phase timestamps, framework-free.

The training thread only appends `(event, perf_counter())` to a deque (thread-safe, no lock):
a framework adapter calls `forward_start(step, mode)` at the start of each forward of the
model, `mark(FORWARD_END)`, `mark(BACKWARD_START)`, `mark(BACKWARD_END)`,
`mark(OPTIMIZER_START)`, `mark(OPTIMIZER_END)` and `step_end()`. Adapters without forward
hooks (Keras, XGBoost callbacks) call `step_begin(step, mode)` and `step_end()` only. A hook
without a profiler holds a `NoTimeline`, whose marks do nothing: adapters mark unconditionally.

The profiler's thread turns the events into one row per step with `StepParser`:

- `data`: from the end of the previous step (of the same mode) to this step's start: the
  time spent waiting for the next batch (plus anything else the loop does in between);
- `forward`: the model's forward passes (summed when the model runs several times a step);
- `backward`: from the end of the registered loss's forward (the end of the model's forward
  when no loss is registered) to the end of backward;
- `optimizer`: the optimizer's `step()`;
- `start`/`end`: wall-clock times (seconds since the epoch) of the step's first forward and of
  its end (the optimizer step, or the last event seen before the next step began).

A phase that was not observed is NaN.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

STEP_BEGIN = 0
FORWARD_START = 1
FORWARD_END = 2
BACKWARD_START = 3
BACKWARD_END = 4
OPTIMIZER_START = 5
OPTIMIZER_END = 6
STEP_END = 7
DEBUGGER = 8  # mldbg's own work on the training thread (its statistics), with its seconds

STEP_COLUMNS = {
    "step": "int64",
    "mode": "uint8",
    "start": "float64",
    "end": "float64",
    "data": "float64",
    "forward": "float64",
    "backward": "float64",
    "optimizer": "float64",
    # seconds of the step that mldbg itself spent on the training thread (its statistics):
    # not the training's time, so `StepSeries.duration` leaves it out
    "debugger": "float64",
}
PHASES = ("data", "forward", "backward", "optimizer")

_clock = time.perf_counter


class Timeline(Protocol):
    """What an adapter marks; `active` is False where the marks go nowhere."""

    active: bool

    def forward_start(self, step: int, mode: int = 1) -> None: ...

    def step_begin(self, step: int, mode: int = 1) -> None: ...

    def mark(self, event: int) -> None: ...

    def step_end(self) -> None: ...

    def debugger(self, seconds: float) -> None: ...


class NoTimeline:
    """The timeline of a hook without a profiler: each mark is one empty method call."""

    active = False

    def forward_start(self, step: int, mode: int = 1) -> None:
        pass

    def step_begin(self, step: int, mode: int = 1) -> None:
        pass

    def mark(self, event: int) -> None:
        pass

    def step_end(self) -> None:
        pass

    def debugger(self, seconds: float) -> None:
        pass


class StepTimeline:
    """Where the training thread drops its timestamps. Each call is a clock read and an append."""

    active = True

    def __init__(self, on_step: Callable[[int, int], None] | None = None):
        self._events: collections.deque[tuple[Any, ...]] = collections.deque()
        self._step = -1
        self._on_step = on_step  # runs on the training thread at each new step (profiling windows)
        # perf_counter -> wall clock
        self.offset = time.time() - _clock()

    def forward_start(self, step: int, mode: int = 1) -> None:
        """A forward of the model begins; a new `step` number opens a step."""
        t = _clock()
        if step != self._step:
            self._step = step
            self._events.append((STEP_BEGIN, t, step, int(mode)))
            if self._on_step is not None:
                self._on_step(step, int(mode))
        self._events.append((FORWARD_START, t))

    def step_begin(self, step: int, mode: int = 1) -> None:
        """A step begins (for adapters that see steps but not forwards)."""
        t = _clock()
        self._step = step
        self._events.append((STEP_BEGIN, t, step, int(mode)))
        if self._on_step is not None:
            self._on_step(step, int(mode))

    def mark(self, event: int) -> None:
        self._events.append((event, _clock()))

    def step_end(self) -> None:
        self._events.append((STEP_END, _clock()))

    def debugger(self, seconds: float) -> None:
        """mldbg spent `seconds` of this step on the training thread (not the training's time)."""
        self._events.append((DEBUGGER, _clock(), seconds))

    def drain(self) -> list[tuple[Any, ...]]:
        """Take the events recorded so far (called by the profiler's thread)."""
        out = []
        events = self._events
        for _ in range(len(events)):
            out.append(events.popleft())
        return out


class StepParser:
    """Events -> step rows (in `STEP_COLUMNS` order). Keeps the open step across drains."""

    def __init__(self, offset: float):
        self.offset = offset
        self.cur: dict[str, Any] | None = None
        self.prev_end: tuple[int, float] | None = None  # (mode, perf time) of the last closed step
        self.last_t: float | None = None

    def feed(self, events: list[tuple[Any, ...]]) -> list[list[Any]]:
        rows: list[list[Any]] = []
        for ev in events:
            code, t = ev[0], ev[1]
            if code == STEP_BEGIN:
                if self.cur is not None:
                    rows.append(self._close(self.last_t if self.last_t is not None else t))
                self._open(t, ev[2], ev[3])
            elif self.cur is None:
                self.last_t = t
                continue  # events outside a step (a forward the adapter did not attribute)
            else:
                c = self.cur
                if code == FORWARD_START:
                    c["fwd_open"] = t
                elif code == FORWARD_END:
                    if c["fwd_open"] is not None:
                        c["forward"] += t - c["fwd_open"]
                        c["fwd_open"] = None
                        c["seen_fwd"] = True
                    c["fwd_end"] = t
                elif code == BACKWARD_START:
                    c["bwd_open"] = t
                elif code == BACKWARD_END:
                    opened = c["bwd_open"] if c["bwd_open"] is not None else c["fwd_end"]
                    if opened is not None:
                        c["backward"] += t - opened
                        c["seen_bwd"] = True
                    c["bwd_open"] = None
                elif code == OPTIMIZER_START:
                    c["opt_open"] = t
                elif code == OPTIMIZER_END:
                    if c["opt_open"] is not None:
                        c["optimizer"] += t - c["opt_open"]
                        c["opt_open"] = None
                        c["seen_opt"] = True
                elif code == DEBUGGER:  # mldbg's seconds, just ended: not the phase's either
                    c["debugger"] += ev[2]
                    for phase in ("fwd_open", "bwd_open", "opt_open"):
                        if c[phase] is not None:
                            c[phase] += ev[2]
                elif code == STEP_END:
                    rows.append(self._close(t))
            self.last_t = t
        return rows

    def close(self) -> list[list[Any]]:
        """The open step, ended at the last event seen (the profiler is closing)."""
        if self.cur is None or self.last_t is None:
            return []
        return [self._close(self.last_t)]

    def _open(self, t: float, step: int, mode: int) -> None:
        data = math.nan
        if self.prev_end is not None and self.prev_end[0] == mode:
            data = max(0.0, t - self.prev_end[1])
        self.cur = {
            "step": step, "mode": mode, "start": t, "data": data,
            "forward": 0.0, "backward": 0.0, "optimizer": 0.0, "debugger": 0.0,
            "fwd_open": None, "fwd_end": None, "bwd_open": None, "opt_open": None,
            "seen_fwd": False, "seen_bwd": False, "seen_opt": False,
        }  # fmt: skip

    def _close(self, t: float) -> list[Any]:
        c = self.cur
        assert c is not None
        self.cur = None
        self.prev_end = (c["mode"], t)
        return [
            c["step"],
            c["mode"],
            c["start"] + self.offset,
            t + self.offset,
            c["data"],
            c["forward"] if c["seen_fwd"] else math.nan,
            c["backward"] if c["seen_bwd"] else math.nan,
            c["optimizer"] if c["seen_opt"] else math.nan,
            c["debugger"],
        ]
