from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from mldbg.profiler.read import MB, ProfilerData
from mldbg.profiler.stats import summary
from mldbg.rules.base import Finding, register
from mldbg.rules.profiler import ProfilerRule


@register
class OverallSystemUsage(ProfilerRule):
    """Statistics for the profiler report (p50, p95, p99 and max of every system metric per
    node and of every worker process); never fires."""

    requires = "system"
    order = 100
    fires = False
    default: ClassVar[bool] = False  # nothing to find: the report shows its statistics

    def chart(self, data: ProfilerData, t0: float) -> str:
        """The statistics have a section of their own in the report."""
        return '<p class="muted small">The statistics are in <a href="#system">System usage</a>.</p>'

    def evaluate(self, data: ProfilerData, final: bool) -> Iterable[tuple[Any, Finding]]:
        return ()

    def statistics(self, data: ProfilerData) -> list[dict[str, Any]]:
        """Rows of {where, metric, p50, p95, p99, max, mean, n}."""
        rows = []
        for node in data.nodes():
            sys = data.system(node)
            for metric, values in sys.metrics().items():
                rows.append({"where": node, "metric": metric, **summary(values)})
        for worker in data.workers():
            p = data.process(worker)
            if len(p):
                rows.append({"where": worker, "metric": "process_cpu_percent", **summary(p.cpu)})
                rows.append({"where": worker, "metric": "process_rss_mb", **summary(p.rss / MB)})
                rows.append({"where": worker, "metric": "children_rss_mb", **summary(p.children_rss / MB)})
        return rows
