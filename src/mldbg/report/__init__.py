"""Self-contained HTML reports of recorded runs.

`training` builds the training report (`mldbg report`); `html` (page, sections, tables,
findings) and `svg` (line, bar, histogram, scatter and heatmap charts) are the small pieces
any report can share. No JavaScript, no CDN: a report opens offline.
"""

from mldbg.report.training import build_report, write_report

__all__ = ["build_report", "write_report"]
