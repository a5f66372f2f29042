from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from mldbg.profiler.read import ProfilerData
from mldbg.profiler.stats import histogram, js_distance
from mldbg.rules.base import Finding, register
from mldbg.rules.profiler import MIN_SAMPLES, ProfilerRule, svg

BINS = 20


@register
class LoadBalancing(ProfilerRule):
    """Work is unevenly spread: the utilization histograms of two GPUs (on any node) differ by
    a Jensen-Shannon distance above `threshold` (0: identical, 1: disjoint). Without GPUs the
    workers' CPU utilization is compared. The first `patience` samples, or those before the
    first training step, are skipped."""

    requires = "system"
    order = 60
    threshold: float = 0.5
    patience: int = 1000

    def chart(self, data: ProfilerData, t0: float) -> str:
        """The utilization distributions it compares: the GPUs', or without GPUs the
        workers' process CPU."""
        hists = []
        for node in data.nodes():
            sys = data.system(node)
            hists += [(f"{node}/gpu{g}", histogram(sys.gpu_util[:, g])) for g in range(sys.gpus)]
        if hists:
            return svg.distribution_chart(hists, "GPU utilization %")
        top = 100.0 * max((int(data.worker_meta(w).get("cores", 1)) for w in data.workers()), default=1)
        hists = [(w, histogram(data.process(w).cpu, 20, top)) for w in data.workers() if len(data.process(w))]
        return svg.distribution_chart(hists, "worker CPU %, of one core", top) if hists else ""

    def evaluate(self, data: ProfilerData, final: bool) -> Iterable[tuple[Any, Finding]]:
        hists: list[tuple[str, np.ndarray, float, float]] = []  # label, histogram, p50, first time
        for node in data.nodes():
            sys = self.after_warmup(data, data.system(node))
            if len(sys) < MIN_SAMPLES:
                continue
            for g in range(sys.gpus):
                u = sys.gpu_util[:, g]
                hists.append(
                    (f"{node}/gpu{g}", histogram(u, BINS), float(np.nanmedian(u)), float(sys.time[0]))
                )
        kind = "GPU utilization"
        if not hists:  # no GPU: compare the workers' processes
            kind = "worker CPU utilization"
            top = 100.0 * max((int(data.worker_meta(w).get("cores", 1)) for w in data.workers()), default=1)
            start = data.training_start() or -np.inf
            for w in data.workers():
                p = data.process(w)
                cpu = p.cpu[p.time >= start]
                if len(cpu) >= MIN_SAMPLES:
                    hists.append(
                        (
                            w,
                            histogram(cpu, BINS, top),
                            float(np.median(cpu)),
                            float(p.time[p.time >= start][0]),
                        )
                    )
        if len(hists) < 2:
            return
        worst = (0.0, 0, 0)
        for i in range(len(hists)):
            for j in range(i + 1, len(hists)):
                d = js_distance(hists[i][1], hists[j][1])
                if d > worst[0]:
                    worst = (d, i, j)
        d, i, j = worst
        if d > self.threshold:
            a, b = hists[i], hists[j]
            yield (
                "imbalance",
                self.make(
                    data,
                    f"Unbalanced {kind}: {a[0]} (median {a[2]:.0f}%) and {b[0]} (median {b[2]:.0f}%) differ "
                    f"by a Jensen-Shannon distance of {d:.2f} > {self.threshold:g} ({len(hists)} compared)",
                    t=max(a[3], b[3]),
                    series=[a[0], b[0]],
                    suggestion="Check that every device gets the same share: equal shards per worker "
                    "(DistributedSampler), no rank doing extra work (logging, evaluation, checkpointing) "
                    "inside the loop, and the same batch size everywhere.",
                ),
            )
