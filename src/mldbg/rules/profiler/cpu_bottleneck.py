from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from mldbg.profiler.read import ProfilerData
from mldbg.rules.base import Finding, register
from mldbg.rules.profiler import MIN_SAMPLES, ProfilerRule, svg


@register
class CpuBottleneck(ProfilerRule):
    """The GPUs wait for the CPU: in more than `threshold` % of the samples every GPU is idle
    (utilization < `gpu_threshold` %) while a CPU core is busy (> `cpu_threshold` %).
    Initialization (the first `patience` samples, or up to the first training step) is
    skipped."""

    requires = "gpu"
    order = 20
    threshold: float = 50
    gpu_threshold: float = 10
    cpu_threshold: float = 90
    patience: int = 1000

    def chart(self, data: ProfilerData, t0: float) -> str:
        """The busiest core against the GPUs' utilization, with both thresholds."""
        return svg.node_timelines(
            data,
            t0,
            lambda node, sys, x: [
                (f"{node} busiest core", x, sys.cpu_max_core),
                *svg.gpu_util_lines(node, sys, x),
            ],
            hlines=[(self.cpu_threshold, "CPU threshold"), (self.gpu_threshold, "GPU idle threshold")],
        )

    def evaluate(self, data: ProfilerData, final: bool) -> Iterable[tuple[Any, Finding]]:
        for node in data.nodes():
            sys = self.after_warmup(data, data.system(node))
            if not sys.gpus or len(sys) < MIN_SAMPLES:
                continue
            gpu_idle = np.nanmax(sys.gpu_util, axis=1) < self.gpu_threshold
            cpu_busy = sys.cpu_max_core > self.cpu_threshold
            hit = gpu_idle & cpu_busy
            share = 100.0 * hit.mean()
            if share > self.threshold:
                first = int(np.argmax(hit))
                yield (
                    node,
                    self.make(
                        data,
                        f"CPU bottleneck on {node}: in {share:.0f}% of {len(sys)} samples (> {self.threshold:g}%) "
                        f"the GPUs were idle (< {self.gpu_threshold:g}%) while a CPU core was busy "
                        f"(> {self.cpu_threshold:g}%); median busiest core {np.median(sys.cpu_max_core):.0f}%",
                        t=float(sys.time[first]),
                        series=[
                            f"{node}/cpu_busiest_core_percent",
                            *(f"{node}/gpu{g}_util_percent" for g in range(sys.gpus)),
                        ],
                        suggestion="Move work off the CPU: more data-loader workers (num_workers), decode and "
                        "augment on the GPU (e.g. DALI, torchvision.transforms.v2 on tensors), pre-process the "
                        "data set once, or use an instance with more CPU cores per GPU.",
                    ),
                )
