"""Self-contained HTML reports of recorded runs.

`training` builds the training report (`mldbg report`), `profiler` the profiler report
(`mldbg profile-report`: the run's profiler series and the profiler rules' verdicts and
charts); `html` (page, sections, tables, findings) and `svg` (line, bar, histogram, scatter
and heatmap charts) are the training report's pieces. No JavaScript, no CDN: a report opens
offline. `profiler` is imported on use: it loads the rules.
"""

from mldbg.report.training import build_report, write_report

__all__ = ["build_report", "write_report"]
