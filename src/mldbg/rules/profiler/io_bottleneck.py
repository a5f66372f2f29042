from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from mldbg.profiler.read import ProfilerData
from mldbg.rules.base import Finding, register
from mldbg.rules.profiler import MIN_SAMPLES, ProfilerRule, svg


@register
class IoBottleneck(ProfilerRule):
    """The GPUs wait for storage: in more than `threshold` % of the samples every GPU is idle
    (utilization < `gpu_threshold` %) while the CPUs wait for I/O more than `io_threshold` %
    of their time. Initialization (the first `patience` samples, or up to the first training
    step) is skipped."""

    requires = "gpu"
    order = 30
    threshold: float = 50
    gpu_threshold: float = 10
    io_threshold: float = 50
    patience: int = 1000

    def chart(self, data: ProfilerData, t0: float) -> str:
        """I/O wait against the GPUs' utilization, with both thresholds."""
        return svg.node_timelines(
            data,
            t0,
            lambda node, sys, x: [(f"{node} I/O wait", x, sys.iowait), *svg.gpu_util_lines(node, sys, x)],
            hlines=[(self.io_threshold, "I/O threshold"), (self.gpu_threshold, "GPU idle threshold")],
        )

    def evaluate(self, data: ProfilerData, final: bool) -> Iterable[tuple[Any, Finding]]:
        for node in data.nodes():
            sys = self.after_warmup(data, data.system(node))
            if not sys.gpus or len(sys) < MIN_SAMPLES:
                continue
            gpu_idle = np.nanmax(sys.gpu_util, axis=1) < self.gpu_threshold
            io_wait = sys.iowait > self.io_threshold
            hit = gpu_idle & io_wait
            share = 100.0 * hit.mean()
            if share > self.threshold:
                first = int(np.argmax(hit))
                yield (
                    node,
                    self.make(
                        data,
                        f"I/O bottleneck on {node}: in {share:.0f}% of {len(sys)} samples (> {self.threshold:g}%) "
                        f"the GPUs were idle (< {self.gpu_threshold:g}%) while I/O wait was above "
                        f"{self.io_threshold:g}% (median {np.median(sys.iowait):.0f}%)",
                        t=float(sys.time[first]),
                        series=[
                            f"{node}/iowait_percent",
                            *(f"{node}/gpu{g}_util_percent" for g in range(sys.gpus)),
                        ],
                        suggestion="Read faster: copy the data set to local NVMe or RAM first, use larger "
                        "sharded files (WebDataset, TFRecord, Parquet) instead of many small ones, and "
                        "prefetch with more data-loader workers.",
                    ),
                )
