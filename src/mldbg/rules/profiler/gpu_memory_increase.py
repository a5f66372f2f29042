from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from mldbg.profiler.read import ProfilerData
from mldbg.profiler.stats import windows
from mldbg.rules.base import Finding, register
from mldbg.rules.profiler import ProfilerRule, svg

WARMUP_STEPS = 3  # the allocator and optimizer state grow during the first steps


@register
class GpuMemoryIncrease(ProfilerRule):
    """GPU memory keeps growing: the mean memory use of a window of `window` samples rises
    more than `increase` percentage points above an earlier window's (a jump, or a slow leak
    adding up). The first training steps (the caching allocator and the optimizer state fill
    up then) and the first `patience` samples are skipped."""

    requires = "gpu"
    order = 50
    increase: float = 5
    patience: int = 1000
    window: int = 10

    def chart(self, data: ProfilerData, t0: float) -> str:
        """Each GPU's memory use over time."""
        return svg.node_timelines(data, t0, svg.gpu_memory_lines, y_label="% of GPU memory")

    def evaluate(self, data: ProfilerData, final: bool) -> Iterable[tuple[Any, Finding]]:
        for node in data.nodes():
            sys = self.after_warmup(data, data.system(node), warmup_steps=WARMUP_STEPS)
            for g in range(sys.gpus):
                mem = sys.gpu_mem[:, g].astype(np.float64)
                spans = list(windows(len(mem), self.window, self.window))
                means = np.array(
                    [float(np.nanmean(mem[w])) if np.isfinite(mem[w]).any() else np.nan for w in spans]
                )
                if len(means) < 2:
                    continue
                floor = np.fmin.accumulate(means)  # the lowest window so far
                grown = np.flatnonzero(means[1:] - floor[:-1] > self.increase) + 1
                if not len(grown):
                    continue
                i = int(grown[0])
                base = float(floor[i - 1])
                yield (
                    (node, g),
                    self.make(
                        data,
                        f"GPU {g} memory on {node} grew from {base:.1f}% to {means[i]:.1f}% "
                        f"(+{means[i] - base:.1f} points > {self.increase:g}) by window {i} of {self.window} samples "
                        f"after warm-up, and reached {np.nanmax(means):.1f}% ({len(means)} windows)",
                        t=float(sys.time[spans[i].start]),
                        series=[f"{node}/gpu{g}_memory_percent"],
                        suggestion="Look for tensors kept across steps: losses accumulated without .item() or "
                        ".detach(), growing lists of outputs, caches keyed by step; call "
                        "torch.cuda.memory_summary() to see who holds the memory.",
                    ),
                )
