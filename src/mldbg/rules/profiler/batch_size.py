from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mldbg.profiler.read import ProfilerData
from mldbg.profiler.stats import percentile, windows
from mldbg.rules.base import Finding, register
from mldbg.rules.profiler import MIN_SAMPLES, ProfilerRule, fmt_pct, svg


@register
class BatchSize(ProfilerRule):
    """The batch could be larger: over a window of `window` samples the p95 of CPU
    utilization, GPU utilization and GPU memory are all under their thresholds. GPUs that
    hold almost no memory (< 1%: not used by the job) are left to low_gpu_utilization."""

    requires = "gpu"
    order = 40
    cpu_threshold_p95: float = 70
    gpu_threshold_p95: float = 70
    gpu_memory_threshold_p95: float = 70
    patience: int = 1000
    window: int = 500

    def chart(self, data: ProfilerData, t0: float) -> str:
        """CPU, GPU utilization and GPU memory over time, with the p95 threshold."""
        return svg.node_timelines(
            data,
            t0,
            lambda node, sys, x: [
                (f"{node} CPU", x, sys.cpu_total),
                *svg.gpu_util_lines(node, sys, x),
                *svg.gpu_memory_lines(node, sys, x),
            ],
            hlines=[(self.gpu_threshold_p95, "p95 thresholds")],
        )

    def evaluate(self, data: ProfilerData, final: bool) -> Iterable[tuple[Any, Finding]]:
        for node in data.nodes():
            sys = self.after_warmup(data, data.system(node))
            cpu = sys.cpu_total
            for g in range(sys.gpus):
                if percentile(sys.gpu_mem[:, g], 95) < 1:
                    continue
                hits = []
                spans = list(windows(len(sys), self.window, MIN_SAMPLES if final else self.window))
                for w in spans:
                    c, u, m = (
                        percentile(cpu[w], 95),
                        percentile(sys.gpu_util[w, g], 95),
                        percentile(sys.gpu_mem[w, g], 95),
                    )
                    if (
                        c < self.cpu_threshold_p95
                        and u < self.gpu_threshold_p95
                        and m < self.gpu_memory_threshold_p95
                    ):
                        hits.append((w, c, u, m))
                if hits:
                    w, c, u, m = hits[0]
                    yield (
                        (node, g),
                        self.make(
                            data,
                            f"GPU {g} on {node} has room for a larger batch: p95 CPU {fmt_pct(c)} < {self.cpu_threshold_p95:g}%, "
                            f"p95 GPU utilization {fmt_pct(u)} < {self.gpu_threshold_p95:g}%, p95 GPU memory {fmt_pct(m)} "
                            f"< {self.gpu_memory_threshold_p95:g}% in {len(hits)} of {len(spans)} windows",
                            t=float(sys.time[w.start]),
                            series=[
                                f"{node}/cpu_percent",
                                f"{node}/gpu{g}_util_percent",
                                f"{node}/gpu{g}_memory_percent",
                            ],
                            suggestion="Increase the batch size (scale the learning rate with it), or train on a "
                            "smaller, cheaper GPU.",
                        ),
                    )
