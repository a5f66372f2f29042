"""Small static SVG charts for the profiler report: lines over time, histograms, stacked
bars. No JavaScript, no external files: the report stays one self-contained HTML page.

Here, beside the profiler rules, because each rule draws its own chart with them
(`ProfilerRule.chart`); the report (`mldbg.report.profiler`) draws its other sections with
them too. The rules never import the report.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mldbg.profiler.read import ProfilerData, SystemSeries

Line = tuple[str, np.ndarray, np.ndarray]  # label, x, y
Span = tuple[float, float, str]  # x from, x to, colour

PALETTE = (
    "#2563eb",
    "#dc2626",
    "#16a34a",
    "#d97706",
    "#7c3aed",
    "#0891b2",
    "#db2777",
    "#65a30d",
    "#475569",
    "#ea580c",
)
PHASE_COLORS = {
    "data": "#d97706",
    "forward": "#2563eb",
    "backward": "#7c3aed",
    "optimizer": "#16a34a",
    "other": "#94a3b8",
}

W, H = 900, 220
ML, MR, MT, MB = 56, 16, 14, 34  # margins


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else [0.0]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    ticks = []
    v = start
    while v <= hi + 1e-9 * step:
        ticks.append(round(v, 10))
        v += step
    return ticks


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e4 or a < 1e-2:
        return f"{v:.1e}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}".rstrip("0").rstrip(".")
    return f"{v:.2f}".rstrip("0").rstrip(".")


def _downsample(x: np.ndarray, y: np.ndarray, max_points: int = 1200) -> tuple[np.ndarray, np.ndarray]:
    """Keep the shape, peaks included: min and max of each bucket."""
    n = len(x)
    if n <= max_points:
        return x, y
    buckets = max_points // 2
    edges = np.linspace(0, n, buckets + 1).astype(int)
    xs, ys = [], []
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        if b <= a:
            continue
        seg = y[a:b]
        if not np.isfinite(seg).any():
            continue
        i, j = int(np.nanargmin(seg)), int(np.nanargmax(seg))
        for k in sorted({i, j}):
            xs.append(x[a + k])
            ys.append(seg[k])
    return np.asarray(xs), np.asarray(ys)


def _frame(
    x0: float, x1: float, y0: float, y1: float, x_label: str, y_label: str, w: int, h: int
) -> tuple[list[str], tuple[Callable[[float], float], Callable[[float], float]]]:
    pw, ph = w - ML - MR, h - MT - MB

    def sx(v: float) -> float:
        return ML + (v - x0) / (x1 - x0 or 1) * pw

    def sy(v: float) -> float:
        return MT + ph - (v - y0) / (y1 - y0 or 1) * ph

    parts = [f'<rect x="{ML}" y="{MT}" width="{pw}" height="{ph}" fill="#fff" stroke="#cbd5e1"/>']
    for t in _nice_ticks(y0, y1):
        yy = sy(t)
        parts.append(f'<line x1="{ML}" x2="{ML + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#eef2f7"/>')
        parts.append(f'<text x="{ML - 6}" y="{yy + 4:.1f}" text-anchor="end" class="tick">{_fmt(t)}</text>')
    for t in _nice_ticks(x0, x1, 8):
        xx = sx(t)
        parts.append(
            f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{MT + ph}" y2="{MT + ph + 4}" stroke="#94a3b8"/>'
        )
        parts.append(
            f'<text x="{xx:.1f}" y="{MT + ph + 16}" text-anchor="middle" class="tick">{_fmt(t)}</text>'
        )
    parts.append(
        f'<text x="{ML + pw / 2}" y="{h - 4}" text-anchor="middle" class="axis">{escape(x_label)}</text>'
    )
    parts.append(
        f'<text x="12" y="{MT + ph / 2}" text-anchor="middle" class="axis" transform="rotate(-90 12 {MT + ph / 2})">{escape(y_label)}</text>'
    )
    return parts, (sx, sy)


def _legend(labels: Sequence[tuple[str, str]]) -> str:
    items = "".join(
        f'<span class="key"><i style="background:{c}"></i>{escape(label)}</span>' for label, c in labels
    )
    return f'<div class="legend">{items}</div>' if labels else ""


def line_chart(
    series: Sequence[Line],
    x_label: str,
    y_label: str,
    *,
    y_min: float | None = 0.0,
    y_max: float | None = None,
    hlines: Sequence[tuple[float, str]] = (),
    markers: bool = False,
    spans: Sequence[Span] = (),
    w: int = W,
    h: int = H,
) -> str:
    """Lines (label, x, y); `hlines` are dashed thresholds, `spans` shaded x ranges."""
    pts = [(lab, np.asarray(x, float), np.asarray(y, float)) for lab, x, y in series if len(x)]
    if not pts:
        return '<p class="muted">no data</p>'
    xs = np.concatenate([x for _, x, _ in pts])
    ys = np.concatenate([y[np.isfinite(y)] for _, _, y in pts])
    x0, x1 = float(np.nanmin(xs)), float(np.nanmax(xs))
    if x1 <= x0:
        x1 = x0 + 1
    lo = float(ys.min()) if len(ys) else 0.0
    hi = float(ys.max()) if len(ys) else 1.0
    for v, _ in hlines:
        hi = max(hi, v)
    y0 = lo if y_min is None else min(y_min, lo)
    y1 = y_max if y_max is not None else (hi * 1.05 if hi > y0 else y0 + 1)
    parts, (sx, sy) = _frame(x0, x1, y0, y1, x_label, y_label, w, h)
    for a, b, color in spans:
        parts.append(
            f'<rect x="{sx(a):.1f}" y="{MT}" width="{max(1.0, sx(b) - sx(a)):.1f}" height="{h - MT - MB}" fill="{color}" opacity="0.18"/>'
        )
    legend = []
    for k, (label, x, y) in enumerate(pts):
        color = PALETTE[k % len(PALETTE)]
        x, y = _downsample(x, y)
        ok = np.isfinite(y)
        if markers:
            dots = "".join(
                f'<circle cx="{sx(a):.1f}" cy="{sy(min(b, y1)):.1f}" r="1.6"/>'
                for a, b in zip(x[ok], y[ok], strict=True)
            )
            parts.append(f'<g fill="{color}">{dots}</g>')
        else:
            d = " ".join(f"{sx(a):.1f},{sy(min(b, y1)):.1f}" for a, b in zip(x[ok], y[ok], strict=True))
            parts.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="1.3"/>')
        legend.append((label, color))
    for v, label in hlines:
        yy = sy(v)
        parts.append(
            f'<line x1="{ML}" x2="{w - MR}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#dc2626" stroke-dasharray="5,4"/>'
        )
        parts.append(
            f'<text x="{w - MR - 4}" y="{yy - 4:.1f}" text-anchor="end" class="tick" fill="#dc2626">{escape(label)}</text>'
        )
    return f'<svg viewBox="0 0 {w} {h}" class="chart">{"".join(parts)}</svg>' + _legend(legend)


def histogram_chart(
    values: np.ndarray,
    x_label: str,
    *,
    bins: int = 40,
    vline: tuple[float, str] | None = None,
    w: int = W,
    h: int = H,
) -> str:
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if not len(v):
        return '<p class="muted">no data</p>'
    lo, hi = float(v.min()), float(v.max())
    if vline is not None:
        hi = max(hi, vline[0])
    if hi <= lo:
        hi = lo + 1
    counts, edges = np.histogram(v, bins=bins, range=(lo, hi))
    parts, (sx, sy) = _frame(lo, hi, 0, float(counts.max()) * 1.08 or 1, x_label, "steps", w, h)
    for c, a, b in zip(counts, edges[:-1], edges[1:], strict=True):
        if c:
            parts.append(
                f'<rect x="{sx(a) + 0.5:.1f}" y="{sy(c):.1f}" width="{max(1.0, sx(b) - sx(a) - 1):.1f}" height="{sy(0) - sy(c):.1f}" fill="#2563eb"/>'
            )
    if vline is not None:
        xx = sx(vline[0])
        parts.append(
            f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{MT}" y2="{h - MB}" stroke="#dc2626" stroke-dasharray="5,4"/>'
        )
        parts.append(
            f'<text x="{xx + 4:.1f}" y="{MT + 12}" class="tick" fill="#dc2626">{escape(vline[1])}</text>'
        )
    return f'<svg viewBox="0 0 {w} {h}" class="chart">{"".join(parts)}</svg>'


def distribution_chart(
    hists: Sequence[tuple[str, np.ndarray]], x_label: str, top: float = 100.0, w: int = W, h: int = H
) -> str:
    """Several normalized histograms over [0, top] as step lines (load balancing)."""
    series = []
    for label, hist in hists:
        n = len(hist)
        centers = (np.arange(n) + 0.5) * top / n
        series.append((label, centers, 100.0 * np.asarray(hist)))
    return line_chart(series, x_label, "% of samples", w=w, h=h)


def stacked_bars(
    rows: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    unit: str,
    colors: dict[str, str] | None = None,
    w: int = W,
) -> str:
    """Horizontal stacked bars: (row label, [(part, value)])."""
    if not rows:
        return '<p class="muted">no data</p>'
    colors = colors or {}
    bar_h, gap, label_w = 22, 10, 150
    h = MT + len(rows) * (bar_h + gap) + 8
    total_max = max(sum(max(0.0, v) for _, v in parts) for _, parts in rows) or 1.0
    pw = w - label_w - MR - 70
    out = []
    names: list[str] = []
    for r, (label, parts) in enumerate(rows):
        y = MT + r * (bar_h + gap)
        out.append(
            f'<text x="{label_w - 8}" y="{y + bar_h / 2 + 4}" text-anchor="end" class="axis">{escape(label)}</text>'
        )
        x = float(label_w)
        total = 0.0
        for name, v in parts:
            v = max(0.0, float(v)) if math.isfinite(v) else 0.0
            if name not in names:
                names.append(name)
            color = colors.get(name, PALETTE[names.index(name) % len(PALETTE)])
            width = v / total_max * pw
            if width > 0:
                out.append(
                    f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{bar_h}" fill="{color}"><title>{escape(name)}: {_fmt(v)} {escape(unit)}</title></rect>'
                )
                if width > 44:
                    out.append(
                        f'<text x="{x + width / 2:.1f}" y="{y + bar_h / 2 + 4}" text-anchor="middle" class="bar">{_fmt(v)}</text>'
                    )
            x += width
            total += v
        out.append(
            f'<text x="{x + 6:.1f}" y="{y + bar_h / 2 + 4}" class="tick">{_fmt(total)} {escape(unit)}</text>'
        )
    legend = [(n, colors.get(n, PALETTE[i % len(PALETTE)])) for i, n in enumerate(names)]
    return f'<svg viewBox="0 0 {w} {h}" class="chart">{"".join(out)}</svg>' + _legend(legend)


# timelines of a run ---------------------------------------------------------------------
def loop_span(data: ProfilerData, t0: float) -> list[Span]:
    """The training loop, first step start to last step end, as a span to shade on a
    timeline of seconds since `t0` (none while the loop's ends are unknown)."""
    js = data.job_summary()
    if js.get("first_step_start") and js.get("last_step_end"):
        return [(js["first_step_start"] - t0, js["last_step_end"] - t0, "#60a5fa")]
    return []


def node_timelines(
    data: ProfilerData,
    t0: float,
    lines: Callable[[str, SystemSeries, np.ndarray], Sequence[Line]],
    y_label: str = "%",
    hlines: Sequence[tuple[float, str]] = (),
) -> str:
    """One timeline (0-100, the training loop shaded) per node of the lines that
    `lines(node, series, seconds since t0)` picks from the node's system series."""
    spans = loop_span(data, t0)
    charts = []
    for node in data.nodes():
        sys = data.system(node)
        charts.append(
            line_chart(
                lines(node, sys, sys.time - t0),
                "seconds since start",
                y_label,
                y_max=100,
                spans=spans,
                hlines=hlines,
            )
        )
    return "".join(charts)


def gpu_util_lines(node: str, sys: SystemSeries, x: np.ndarray) -> list[Line]:
    """Each GPU's utilization on `node`."""
    return [(f"{node} GPU {g} util", x, sys.gpu_util[:, g]) for g in range(sys.gpus)]


def gpu_memory_lines(node: str, sys: SystemSeries, x: np.ndarray) -> list[Line]:
    """Each GPU's memory use on `node`."""
    return [(f"{node} GPU {g} memory", x, sys.gpu_mem[:, g]) for g in range(sys.gpus)]
