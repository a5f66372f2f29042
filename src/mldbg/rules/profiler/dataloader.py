from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.profiler.read import ProfilerData
from mldbg.rules.base import Finding, register
from mldbg.rules.profiler import ProfilerRule, fmt_s, svg

MIN_STEPS = 5


@register
class Dataloader(ProfilerRule):
    """Data loading holds training back or is misconfigured: the median training step waits
    for its batch more than `data_threshold` % of its time (worst when the parallel loaders,
    the worker process's children, are fewer than `min_threshold` % of the cores: starved),
    or there are more loaders than `max_threshold` % of the cores (oversubscribed). Few
    loaders alone are not a finding: a fast data set needs none."""

    requires = "steps"
    order = 90
    min_threshold: float = 70
    max_threshold: float = 200
    data_threshold: float = 30

    def chart(self, data: ProfilerData, t0: float) -> str:
        """Each worker's wait for data against its compute per training step, and its
        number of data-loader processes."""
        charts = []
        for w in data.workers():
            s = data.steps(w, Mode.TRAIN)
            if len(s):
                charts.append(
                    svg.line_chart(
                        [
                            (f"{w} waiting for data", s.step.astype(float), s.data * 1e3),
                            (
                                f"{w} compute (first forward to step end)",
                                s.step.astype(float),
                                s.compute * 1e3,
                            ),
                        ],
                        "step",
                        "ms",
                        markers=True,
                    )
                )
            p = data.process(w)
            if len(p):
                charts.append(
                    f"<p class='muted small'>{escape(w)}: up to {int(p.children.max())} child (data-loader) "
                    f"processes, {data.worker_meta(w).get('cores', '?')} cores.</p>"
                )
        return "".join(charts)

    def evaluate(self, data: ProfilerData, final: bool) -> Iterable[tuple[Any, Finding]]:
        for worker in data.workers():
            cores = int(data.worker_meta(worker).get("cores") or 1)
            proc = data.process(worker)
            loaders = int(proc.children.max()) if len(proc) else None
            s = data.steps(worker, Mode.TRAIN)
            series = [f"{worker}/step_data", f"{worker}/step_duration"]
            if loaders is not None and loaders > cores * self.max_threshold / 100.0:
                yield (
                    (worker, "oversubscribed"),
                    self.make(
                        data,
                        f"oversubscribed: {loaders} data-loader processes on {worker} for {cores} cores "
                        f"(> {self.max_threshold:g}% of the cores) compete with training for the CPU",
                        t=float(proc.time[int(np.argmax(proc.children))]),
                        worker=worker,
                        series=[f"{worker}/children"],
                        suggestion=f"Use at most about {cores} data-loader workers in all (num_workers per "
                        "process x processes per node).",
                    ),
                )
            ok = np.isfinite(s.data)
            if int(ok.sum()) < MIN_STEPS:
                continue
            wait = s.data[ok]
            total = s.duration[ok]
            share = 100.0 * float(np.median(wait / np.maximum(total, 1e-12)))
            if share <= self.data_threshold:
                continue
            loaders_text = "unknown number of" if loaders is None else str(loaders)
            starved = loaders is not None and loaders < cores * self.min_threshold / 100.0
            detail = (
                f"; only {loaders_text} data-loader processes for {cores} cores (< {self.min_threshold:g}%): loading is starved"
                if starved
                else f"; {loaders_text} data-loader processes for {cores} cores"
            )
            first = int(np.flatnonzero(ok)[0])
            yield (
                (worker, "data"),
                self.make(
                    data,
                    f"training steps on {worker} wait for data {share:.0f}% of the time (median "
                    f"{fmt_s(float(np.median(wait)))} of a {fmt_s(float(np.median(total)))} step, over {len(wait)} steps; "
                    f"> {self.data_threshold:g}%){detail}",
                    step=int(s.step[first]),
                    mode=int(Mode.TRAIN),
                    worker=worker,
                    series=series,
                    suggestion=(
                        f"Load in parallel: DataLoader(num_workers={max(1, cores - 1)}, pin_memory=True, "
                        "persistent_workers=True, prefetch_factor=4)."
                        if starved
                        else "Make each sample cheaper: decode, resize and augment once and cache the result, "
                        "read larger files, or move transforms to the GPU; more workers only help while cores are free."
                    ),
                ),
            )
