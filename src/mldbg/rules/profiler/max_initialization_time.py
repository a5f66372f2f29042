from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from mldbg.config import Mode
from mldbg.profiler.read import ProfilerData
from mldbg.rules.base import Finding, register
from mldbg.rules.profiler import ProfilerRule, fmt_s, svg


@register
class MaxInitializationTime(ProfilerRule):
    """Training takes too long to start: no training step `threshold` minutes after the
    process started (live: the clock is still running; offline: the first step came late or
    never)."""

    requires = "steps"
    order = 80
    threshold: float = 20

    def missing(self, data: ProfilerData) -> str | None:
        if not data.has_data:
            return super().missing(data)
        if all(not data.worker_meta(w).get("config", {}).get("step_phases", True) for w in data.workers()):
            return "no step timeline in this run (ProfilerConfig.step_phases=False)"
        return None

    def chart(self, data: ProfilerData, t0: float) -> str | None:
        """The initialization time beside the threshold."""
        init = data.job_summary().get("initialization")
        if init is None:
            return None
        return svg.stacked_bars(
            [
                ("initialization", [("initialization", init)]),
                ("threshold", [("threshold", self.threshold * 60.0)]),
            ],
            "s",
            {"initialization": "#d97706", "threshold": "#94a3b8"},
        )

    def evaluate(self, data: ProfilerData, final: bool) -> Iterable[tuple[Any, Finding]]:
        limit = self.threshold * 60.0
        for worker in data.workers():
            meta = data.worker_meta(worker)
            begin = meta.get("process_start") or meta.get("started")
            if begin is None:
                continue
            s = data.steps(worker, Mode.TRAIN)
            if len(s):
                waited = float(s.start[0]) - begin
                if waited > limit:
                    yield (
                        worker,
                        self.make(
                            data,
                            f"the first training step on {worker} started {fmt_s(waited)} after the process "
                            f"(> {self.threshold:g} min)",
                            step=int(s.step[0]),
                            mode=int(Mode.TRAIN),
                            worker=worker,
                            series=[f"{worker}/steps"],
                        ),
                    )
                continue
            end = (data.worker_end(worker) or {}).get("ended")
            now = end if end is not None else time.time()
            if now - begin > limit:
                state = "and the job ended without one" if end is not None else "and none has come yet"
                yield (
                    worker,
                    self.make(
                        data,
                        f"no training step on {worker} {fmt_s(now - begin)} after the process started "
                        f"(> {self.threshold:g} min), {state}",
                        step=0,
                        worker=worker,
                        series=[f"{worker}/steps"],
                    ),
                )

    suggestion = (
        "Find what the start-up waits for: downloading or indexing the data set (cache it, stream it), "
        "building the model (load weights once, lazily), torch.compile (try mode='reduce-overhead' "
        "later, or cache compilation), or a rendezvous waiting for other workers."
    )
