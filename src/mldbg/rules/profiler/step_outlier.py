from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.profiler.read import ProfilerData, StepSeries
from mldbg.profiler.stats import robust_sigma
from mldbg.rules.base import Finding, register
from mldbg.rules.profiler import ProfilerRule, fmt_s, svg

MIN_STEPS = 20


def outliers(s: StepSeries, stddev: float, min_ratio: float) -> tuple[np.ndarray, float, float, float]:
    """(indices of outlier steps, median, robust sigma, threshold). The first step of the
    series is left out: it includes compilation and warm-up."""
    d = s.duration[1:]
    med = float(np.median(d))
    sigma = robust_sigma(d)
    limit = max(med + stddev * sigma, min_ratio * med)
    return _above(s.duration, limit), med, sigma, limit


def _above(d: np.ndarray, limit: float) -> np.ndarray:
    idx = np.flatnonzero(d > limit)
    return idx[idx > 0]


@register
class StepOutlier(ProfilerRule):
    """Some steps take much longer than the others: more than `n_outliers` steps last longer
    than the median + `stddev` robust standard deviations (1.4826 x MAD, which the outliers
    cannot inflate) and at least `min_ratio` x the median step. Each mode is judged on its
    own (or only `mode`); the first step of each is warm-up and left out."""

    requires = "steps"
    order = 70
    stddev: float = 3
    mode: Mode | None = None
    n_outliers: int = 10
    min_ratio: float = 1.5

    def chart(self, data: ProfilerData, t0: float) -> str:
        """Each worker's step durations (of `mode`, else TRAIN), with the outlier threshold."""
        charts = []
        for w in data.workers():
            s = data.steps(w, self.mode or Mode.TRAIN)
            if len(s) < 2:
                continue
            hl = []
            if len(s) >= MIN_STEPS:
                _, _, _, limit = outliers(s, self.stddev, self.min_ratio)
                hl = [(limit * 1e3, f"outlier threshold {limit * 1e3:.3g} ms")]
            charts.append(
                svg.line_chart(
                    [(f"{w} step duration", s.step.astype(float), s.duration * 1e3)],
                    "step",
                    "ms",
                    markers=True,
                    hlines=hl,
                )
            )
        return "".join(charts)

    def evaluate(self, data: ProfilerData, final: bool) -> Iterable[tuple[Any, Finding]]:
        for worker in data.workers():
            all_steps = data.steps(worker)
            modes = [Mode.parse(self.mode)] if self.mode is not None else all_steps.modes()
            for mode in modes:
                s = all_steps.select(mode)
                if len(s) < MIN_STEPS:
                    continue
                idx, med, sigma, limit = outliers(s, self.stddev, self.min_ratio)
                if len(idx) <= self.n_outliers:
                    continue
                worst = idx[np.argsort(-s.duration[idx])][:5]
                listed = ", ".join(f"{int(s.step[i])} ({fmt_s(float(s.duration[i]))})" for i in worst)
                data_share = np.nan_to_num(s.data[idx]) / s.duration[idx]
                in_data = int(np.sum(data_share > 0.5))
                cause = (
                    f"; {in_data} of them spent most of it waiting for data"
                    if in_data
                    else "; the time went to compute, not data loading"
                )
                at = idx[self.n_outliers]
                yield (
                    (worker, int(mode)),
                    self.make(
                        data,
                        f"{len(idx)} {mode.name} steps of {len(s)} on {worker} took longer than {fmt_s(limit)} "
                        f"(median {fmt_s(med)} + {self.stddev:g} x robust sigma {fmt_s(sigma)}, and "
                        f">= {self.min_ratio:g} x median): the slowest {listed}{cause}",
                        step=int(s.step[at]),
                        mode=int(mode),
                        worker=worker,
                        series=[f"{worker}/step_duration"],
                        suggestion="Find what those steps do differently: periodic checkpointing or logging "
                        "in the loop, garbage collection, data-loader workers restarting each epoch "
                        "(persistent_workers=True), variable input sizes, or other jobs on the machine.",
                    ),
                )
