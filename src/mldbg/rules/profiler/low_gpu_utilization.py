from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mldbg.profiler.read import ProfilerData
from mldbg.profiler.stats import percentile, windows
from mldbg.rules.base import Finding, register
from mldbg.rules.profiler import MIN_SAMPLES, ProfilerRule, fmt_pct, svg

IDLE = 5.0  # p95 below this: nothing runs on the GPU


@register
class LowGpuUtilization(ProfilerRule):
    """A GPU is under-used: its p95 utilization over a window of `window` samples stays under
    `threshold_p95` %, or it fluctuates (p95 high but p5 under `threshold_p5` %: it waits
    between bursts). The first `patience` samples, or those before the first training step
    if that comes sooner, are initialization and are skipped."""

    requires = "gpu"
    order = 10
    threshold_p95: float = 70
    threshold_p5: float = 10
    window: int = 500
    patience: int = 1000

    def chart(self, data: ProfilerData, t0: float) -> str:
        """Each GPU's utilization over time, with both thresholds."""
        return svg.node_timelines(
            data,
            t0,
            svg.gpu_util_lines,
            hlines=[
                (self.threshold_p95, f"p95 threshold {self.threshold_p95:g}%"),
                (self.threshold_p5, f"p5 threshold {self.threshold_p5:g}%"),
            ],
        )

    def evaluate(self, data: ProfilerData, final: bool) -> Iterable[tuple[Any, Finding]]:
        for node in data.nodes():
            sys = self.after_warmup(data, data.system(node))
            for g in range(sys.gpus):
                util = sys.gpu_util[:, g]
                low, fluct = [], []
                for w in windows(len(util), self.window, MIN_SAMPLES if final else self.window):
                    p95, p5, p50 = percentile(util[w], 95), percentile(util[w], 5), percentile(util[w], 50)
                    if p95 < self.threshold_p95:
                        low.append((w, p95, p50))
                    elif p5 < self.threshold_p5:
                        fluct.append((w, p95, p5))
                n = len(list(windows(len(util), self.window, MIN_SAMPLES if final else self.window)))
                series = [f"{node}/gpu{g}_util_percent"]
                if low:
                    w, p95, p50 = low[0]
                    idle = p95 < IDLE
                    what = "is idle" if idle else "is under-used"
                    yield (
                        (node, g, "low"),
                        self.make(
                            data,
                            f"GPU {g} on {node} {what}: p95 utilization {fmt_pct(p95)} < {self.threshold_p95:g}% "
                            f"(p50 {fmt_pct(p50)}) in {len(low)} of {n} windows of up to {self.window} samples",
                            t=float(sys.time[w.start]),
                            series=series,
                            suggestion=(
                                "Nothing runs on this GPU: check the device placement, or train on fewer GPUs."
                                if idle
                                else "Give the GPU more work: a larger batch size, more data-loader workers, fewer "
                                "host-device synchronizations (.item(), .cpu()); or use a smaller, cheaper GPU."
                            ),
                        ),
                    )
                if fluct:
                    w, p95, p5 = fluct[0]
                    yield (
                        (node, g, "fluctuating"),
                        self.make(
                            data,
                            f"GPU {g} on {node} fluctuates: p95 utilization {fmt_pct(p95)} but p5 {fmt_pct(p5)} "
                            f"< {self.threshold_p5:g}% in {len(fluct)} of {n} windows: it waits between bursts of work",
                            t=float(sys.time[w.start]),
                            series=series,
                            suggestion="Look for data-loading stalls (see the dataloader and cpu_bottleneck rules), "
                            "host-device synchronization (.item(), .cpu() in the loop), pin_memory and prefetching.",
                        ),
                    )
