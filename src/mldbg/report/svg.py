"""Charts as inline SVG strings: no JavaScript, no CDN, nothing to download.

Each function takes plain numbers and labels and returns one `<svg>` element sized by its
`viewBox`, so it scales with the page. Hovering a point or bar shows its value (an SVG
`<title>`). The training report's (`mldbg report`); the profiler report draws with
`mldbg.rules.profiler.svg`, the charts its rules draw theirs with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import numpy as np

PALETTE = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"


@dataclass
class Series:
    """One line of a line chart (or one group of a bar chart)."""

    name: str
    x: Sequence[float]
    y: Sequence[float]
    color: str | None = None
    dashed: bool = False
    points: bool | None = None  # dots on each value; None: the chart's choice


@dataclass
class Mark:
    """A vertical line at `x` on a line chart: where a rule's finding fired. `label` is drawn
    at its top, `text` shows on hover."""

    x: float
    label: str
    text: str = ""
    color: str = "#b91c1c"


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def fmt(v: float) -> str:
    """A short human label for a tick or a value."""
    if v is None or not math.isfinite(v):
        return str(v)
    a = abs(v)
    if a != 0 and (a >= 1e6 or a < 1e-3):
        return f"{v:.2e}"
    if a >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    if hi <= lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = [round(start, 12)]
    while ticks[-1] < hi - step * 1e-9:  # the last tick covers the largest value
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


class _Frame:
    """A plot area inside an SVG with linear (or log) axes."""

    def __init__(
        self, width: int, height: int, left: int = 64, right: int = 16, top: int = 30, bottom: int = 44
    ):
        self.w, self.h = width, height
        self.x0, self.x1 = left, width - right
        self.y0, self.y1 = height - bottom, top  # y grows downwards in SVG

    def scale(self, xlo: float, xhi: float, ylo: float, yhi: float, log_y: bool = False) -> None:
        self.xt = nice_ticks(xlo, xhi)
        self.log_y = log_y
        if log_y:
            lo, hi = math.floor(math.log10(ylo)), math.ceil(math.log10(yhi))
            hi = hi if hi > lo else lo + 1
            self.yt = [10.0**e for e in range(lo, hi + 1)]
        else:
            self.yt = nice_ticks(ylo, yhi)
        self.xlo, self.xhi = self.xt[0], self.xt[-1]
        self.ylo, self.yhi = self.yt[0], self.yt[-1]

    def px(self, x: float) -> float:
        span = (self.xhi - self.xlo) or 1.0
        return self.x0 + (x - self.xlo) / span * (self.x1 - self.x0)

    def py(self, y: float) -> float:
        if self.log_y:
            lo, hi, y = math.log10(self.ylo), math.log10(self.yhi), math.log10(max(y, self.ylo))
        else:
            lo, hi = self.ylo, self.yhi
        return self.y0 - (y - lo) / ((hi - lo) or 1.0) * (self.y0 - self.y1)

    def axes(self, x_label: str, y_label: str, x_ticks: bool = True) -> list[str]:
        out = []
        for t in self.yt:
            y = self.py(t)
            out.append(f'<line x1="{self.x0}" x2="{self.x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>')
            out.append(
                f'<text x="{self.x0 - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{fmt(t)}</text>'
            )
        if x_ticks:
            for t in self.xt:
                x = self.px(t)
                out.append(
                    f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{self.y0}" y2="{self.y0 + 4}" stroke="#9ca3af"/>'
                )
                out.append(
                    f'<text x="{x:.1f}" y="{self.y0 + 17}" text-anchor="middle" class="tick">{fmt(t)}</text>'
                )
        out.append(f'<line x1="{self.x0}" x2="{self.x1}" y1="{self.y0}" y2="{self.y0}" stroke="#6b7280"/>')
        out.append(f'<line x1="{self.x0}" x2="{self.x0}" y1="{self.y1}" y2="{self.y0}" stroke="#6b7280"/>')
        if x_label:
            out.append(
                f'<text x="{(self.x0 + self.x1) / 2:.1f}" y="{self.h - 8}" text-anchor="middle" class="lab">{escape(x_label)}</text>'
            )
        if y_label:
            cy = (self.y0 + self.y1) / 2
            out.append(
                f'<text transform="translate(14 {cy:.1f}) rotate(-90)" text-anchor="middle" class="lab">{escape(y_label)}</text>'
            )
        return out


def _svg(width: int, height: int, body: list[str], title: str = "") -> str:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" class="chart" '
        f'role="img" style="{FONT};max-width:{width}px">'
        "<style>.tick{font-size:11px;fill:#4b5563}.lab{font-size:12px;fill:#374151}"
        ".ttl{font-size:13px;font-weight:600;fill:#111827}.leg{font-size:11px;fill:#374151}</style>"
    )
    if title:
        body = [
            f'<text x="{width / 2}" y="18" text-anchor="middle" class="ttl">{escape(title)}</text>',
            *body,
        ]
    return head + "".join(body) + "</svg>"


def _legend(names: Sequence[tuple[str, str]], x: float, y: float) -> list[str]:
    out = []
    for i, (name, col) in enumerate(names):
        yy = y + i * 15
        out.append(f'<rect x="{x:.1f}" y="{yy - 8:.1f}" width="10" height="10" fill="{col}" rx="2"/>')
        out.append(f'<text x="{x + 14:.1f}" y="{yy + 1:.1f}" class="leg">{escape(name)}</text>')
    return out


def _legend_width(names: Sequence[str]) -> int:
    """Right margin of a plot: room for a legend when there are several series."""
    if len(names) <= 1:
        return 16
    return min(40 + 7 * max(len(n) for n in names), 240)


def empty(message: str, width: int = 640, height: int = 80) -> str:
    body = [
        f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" class="lab">{escape(message)}</text>'
    ]
    return _svg(width, height, body)


def line_chart(
    series: Sequence[Series],
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    width: int = 640,
    height: int = 300,
    log_y: bool = False,
    points: bool | None = None,
    y_range: tuple[float, float] | None = None,
    diagonal: bool = False,
    marks: Sequence[Mark] = (),
    x_range: tuple[float, float] | None = None,
) -> str:
    """Lines over a shared x axis; a legend when there are several; `marks` as vertical lines
    (findings where they fired). A NaN value is a gap: the line stops there and starts again
    after it (`mldbg.report.cadence.with_gaps`). `x_range` widens the x axis to it (the run's
    steps, where a series stops before the run does)."""
    series = [s for s in series if len(s.x)]
    if not series:
        return empty(f"{title}: no data", width)
    xs = np.concatenate([np.asarray(s.x, dtype=float) for s in series])
    ys = np.concatenate([np.asarray(s.y, dtype=float) for s in series])
    if log_y and not (np.isfinite(ys) & (ys > 0)).any():  # all zero: a flat line, not "no data"
        log_y = False
    ok = np.isfinite(ys) & (ys > 0 if log_y else True)
    if not ok.any():
        return empty(f"{title}: no finite values", width)
    f = _Frame(width, height, right=_legend_width([s.name for s in series]))
    ylo, yhi = (float(ys[ok].min()), float(ys[ok].max())) if y_range is None else y_range
    mark_x = [float(m.x) for m in marks]
    wide = list(x_range) if x_range is not None else []
    f.scale(min([float(xs.min()), *mark_x, *wide]), max([float(xs.max()), *mark_x, *wide]), ylo, yhi, log_y)
    body = f.axes(x_label, y_label)
    body += _marks(f, marks)
    if diagonal:
        lo, hi = max(f.xlo, f.ylo), min(f.xhi, f.yhi)
        body.append(
            f'<line x1="{f.px(lo):.1f}" y1="{f.py(lo):.1f}" x2="{f.px(hi):.1f}" y2="{f.py(hi):.1f}" '
            'stroke="#9ca3af" stroke-dasharray="4 4"/>'
        )
    legend = []
    for i, s in enumerate(series):
        col = s.color or color(i)
        kept = [(float(x), float(y)) for x, y in zip(s.x, s.y, strict=True) if math.isfinite(float(y))]
        if not kept:
            continue
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        for piece in _pieces(s.x, s.y):  # a NaN value breaks the line: a gap, not a measurement
            if len(piece) > 1:
                path = " ".join(f"{f.px(x):.1f},{f.py(y):.1f}" for x, y in piece)
                body.append(f'<polyline points="{path}" fill="none" stroke="{col}" stroke-width="2"{dash}/>')
        dots = s.points if s.points is not None else points
        lone = {p[0] for p in _pieces(s.x, s.y) if len(p) == 1}  # a point between two gaps
        for x, y in kept:
            if dots or (dots is None and len(kept) <= 60) or (x, y) in lone:
                body.append(
                    f'<circle cx="{f.px(x):.1f}" cy="{f.py(y):.1f}" r="2.5" fill="{col}">'
                    f"<title>{escape(s.name)}: {fmt(x)} → {fmt(y)}</title></circle>"
                )
        legend.append((s.name, col))
    if len(series) > 1:
        body += _legend(legend, f.x1 + 12, f.y1 + 8)
    return _svg(width, height, body, title)


def _pieces(xs: Sequence[float], ys: Sequence[float]) -> list[list[tuple[float, float]]]:
    """The finite points of a line, cut at each non-finite value."""
    out: list[list[tuple[float, float]]] = [[]]
    for x, y in zip(xs, ys, strict=True):
        if math.isfinite(float(y)):
            out[-1].append((float(x), float(y)))
        elif out[-1]:
            out.append([])
    return [p for p in out if p]


def _marks(f: _Frame, marks: Sequence[Mark]) -> list[str]:
    """Dashed vertical lines with a short label; marks at one x share a line, labels stack."""
    out: list[str] = []
    by_x: dict[float, list[Mark]] = {}
    for m in marks:
        by_x.setdefault(float(m.x), []).append(m)
    for k, (x, group) in enumerate(sorted(by_x.items())):
        px = f.px(x)
        row = 3 * (k % 2)  # neighbouring marks' labels on different rows
        hover = escape("; ".join(m.text or m.label for m in group))
        col = group[0].color
        out.append(
            f'<g class="mark"><title>{hover}</title><line x1="{px:.1f}" x2="{px:.1f}" y1="{f.y1}" '
            f'y2="{f.y0}" stroke="{col}" stroke-width="1.5" stroke-dasharray="3 3"/>'
        )
        labels = sorted({m.label for m in group})
        for i, lab in enumerate(labels[:3] + ([f"+{len(labels) - 3}"] if len(labels) > 3 else [])):
            out.append(
                f'<text x="{px + 3:.1f}" y="{f.y1 + 10 + 11 * (row + i)}" class="leg" style="fill:{col}">{escape(lab)}</text>'
            )
        out.append("</g>")
    return out


def bar_chart(
    labels: Sequence[str],
    groups: Sequence[Series],
    title: str = "",
    value_label: str = "",
    horizontal: bool = False,
    width: int = 640,
    height: int | None = None,
    percent: bool = False,
) -> str:
    """Bars per label, one bar per group (`Series.y` holds the values, `x` is ignored)."""
    n, g = len(labels), max(len(groups), 1)
    if n == 0 or not groups:
        return empty(f"{title}: no data", width)
    values = np.array([[float(v) for v in s.y] for s in groups])
    vmax = float(np.nanmax(values)) if values.size else 1.0
    vmin = min(0.0, float(np.nanmin(values)))
    shown = (lambda v: f"{v:.1%}") if percent else fmt
    legend_w = _legend_width([s.name for s in groups]) - 16
    body: list[str] = []
    if horizontal:
        left = min(12 + 7 * max(len(lab) for lab in labels), 260)
        height = height or 40 + n * (10 + 12 * g) + 30
        f = _Frame(width, height, left=left, right=16 + legend_w, top=28, bottom=36)
        f.scale(vmin, vmax or 1.0, 0, 1)
        band = (f.y0 - f.y1) / n
        for t in f.xt:
            x = f.px(t)
            body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.y1}" y2="{f.y0}" stroke="#e5e7eb"/>')
            body.append(
                f'<text x="{x:.1f}" y="{f.y0 + 15}" text-anchor="middle" class="tick">{shown(t)}</text>'
            )
        for i, lab in enumerate(labels):
            y = f.y1 + i * band
            body.append(
                f'<text x="{f.x0 - 6}" y="{y + band / 2 + 4:.1f}" text-anchor="end" class="tick">{escape(lab)}</text>'
            )
            bh = (band * 0.8) / g
            for j, s in enumerate(groups):
                v = values[j, i]
                x_a, x_b = sorted((f.px(0), f.px(v)))
                body.append(
                    f'<rect x="{x_a:.1f}" y="{y + band * 0.1 + j * bh:.1f}" width="{max(x_b - x_a, 0.5):.1f}" '
                    f'height="{bh:.1f}" fill="{s.color or color(j)}"><title>{escape(lab)} ({escape(s.name)}): '
                    f"{shown(v)}</title></rect>"
                )
        body.append(f'<line x1="{f.x0}" x2="{f.x0}" y1="{f.y1}" y2="{f.y0}" stroke="#6b7280"/>')
        if value_label:
            body.append(
                f'<text x="{(f.x0 + f.x1) / 2:.1f}" y="{height - 6}" text-anchor="middle" class="lab">{escape(value_label)}</text>'
            )
    else:
        height = height or 300
        f = _Frame(width, height, right=16 + legend_w)
        f.scale(0, 1, vmin, vmax or 1.0)
        f.xt = []
        body += f.axes("", value_label, x_ticks=False)
        band = (f.x1 - f.x0) / n
        bw = (band * 0.8) / g
        step = max(1, math.ceil(n / 30))
        for i, lab in enumerate(labels):
            x = f.x0 + i * band
            if i % step == 0:
                body.append(
                    f'<text x="{x + band / 2:.1f}" y="{f.y0 + 15}" text-anchor="middle" class="tick">{escape(lab)}</text>'
                )
            for j, s in enumerate(groups):
                v = values[j, i]
                y_a, y_b = sorted((f.py(0), f.py(v)))
                body.append(
                    f'<rect x="{x + band * 0.1 + j * bw:.1f}" y="{y_a:.1f}" width="{bw:.1f}" '
                    f'height="{max(y_b - y_a, 0.5):.1f}" fill="{s.color or color(j)}"><title>{escape(lab)} '
                    f"({escape(s.name)}): {shown(v)}</title></rect>"
                )
    if g > 1:
        body += _legend(
            [(s.name, s.color or color(j)) for j, s in enumerate(groups)], width - legend_w + 8, 40
        )
    return _svg(width, height, body, title)


def histogram(
    groups: Sequence[tuple[str, np.ndarray]],
    title: str = "",
    x_label: str = "",
    bins: int = 30,
    width: int = 640,
    height: int = 280,
    density: bool = True,
) -> str:
    """Distributions of values, overlaid as step outlines with a light fill."""
    groups = [(n, np.asarray(v, dtype=float)[np.isfinite(v)]) for n, v in groups]
    groups = [(n, v) for n, v in groups if v.size]
    if not groups:
        return empty(f"{title}: no data", width)
    allv = np.concatenate([v for _, v in groups])
    edges = np.histogram_bin_edges(allv, bins=bins)
    counts = [np.histogram(v, bins=edges, density=density)[0] for _, v in groups]
    f = _Frame(width, height, right=_legend_width([n for n, _ in groups]))
    f.scale(float(edges[0]), float(edges[-1]), 0, float(max(c.max() for c in counts)) or 1.0)
    body = f.axes(x_label, "density" if density else "count")
    legend = []
    for i, ((name, _), c) in enumerate(zip(groups, counts, strict=True)):
        col = color(i)
        pts = [f"{f.px(float(edges[0])):.1f},{f.py(0):.1f}"]
        for k, h in enumerate(c):
            pts += [
                f"{f.px(float(edges[k])):.1f},{f.py(float(h)):.1f}",
                f"{f.px(float(edges[k + 1])):.1f},{f.py(float(h)):.1f}",
            ]
        pts.append(f"{f.px(float(edges[-1])):.1f},{f.py(0):.1f}")
        body.append(
            f'<polygon points="{" ".join(pts)}" fill="{col}" fill-opacity="0.25" stroke="{col}" stroke-width="1.5">'
            f"<title>{escape(name)}: {len(groups[i][1])} values</title></polygon>"
        )
        legend.append((name, col))
    if len(groups) > 1:
        body += _legend(legend, f.x1 + 12, f.y1 + 8)
    return _svg(width, height, body, title)


def scatter(
    x: np.ndarray,
    y: np.ndarray,
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    width: int = 640,
    height: int = 300,
    diagonal: bool = False,
    max_points: int = 2000,
) -> str:
    """Points (a deterministic subsample beyond `max_points`), optionally with y = x."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size == 0:
        return empty(f"{title}: no data", width)
    if x.size > max_points:
        keep = np.linspace(0, x.size - 1, max_points).astype(int)
        x, y = x[keep], y[keep]
    f = _Frame(width, height)
    lo, hi = (min(x.min(), y.min()), max(x.max(), y.max())) if diagonal else (y.min(), y.max())
    f.scale(float(lo if diagonal else x.min()), float(hi if diagonal else x.max()), float(lo), float(hi))
    body = f.axes(x_label, y_label)
    if diagonal:
        a, b = max(f.xlo, f.ylo), min(f.xhi, f.yhi)
        body.append(
            f'<line x1="{f.px(a):.1f}" y1="{f.py(a):.1f}" x2="{f.px(b):.1f}" y2="{f.py(b):.1f}" '
            'stroke="#9ca3af" stroke-dasharray="4 4"/>'
        )
    body += [
        f'<circle cx="{f.px(a):.1f}" cy="{f.py(b):.1f}" r="2" fill="{PALETTE[0]}" fill-opacity="0.5"/>'
        for a, b in zip(x, y, strict=True)
    ]
    return _svg(width, height, body, title)


def heatmap(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    title: str = "",
    row_title: str = "",
    col_title: str = "",
    width: int = 460,
) -> str:
    """A matrix as colored cells with their values (a confusion matrix: rows are labels)."""
    m = np.asarray(matrix, dtype=float)
    if m.size == 0:
        return empty(f"{title}: no data", width)
    rows, cols = m.shape
    left = min(30 + 7 * max(len(s) for s in row_labels), 160)
    top, cell = 56, max(min((width - left - 16) / cols, 80), 14)
    height = int(top + rows * cell + 20)
    width = max(int(left + cols * cell + 16), 320)
    peak = m.max() or 1.0
    body = []
    if col_title:
        body.append(
            f'<text x="{left + cols * cell / 2:.1f}" y="34" text-anchor="middle" class="lab">{escape(col_title)}</text>'
        )
    if row_title:
        body.append(
            f'<text transform="translate(12 {top + rows * cell / 2:.1f}) rotate(-90)" text-anchor="middle" class="lab">{escape(row_title)}</text>'
        )
    show_text = cell >= 22
    for j, lab in enumerate(col_labels):
        body.append(
            f'<text x="{left + (j + 0.5) * cell:.1f}" y="{top - 6}" text-anchor="middle" class="tick">{escape(lab)}</text>'
        )
    for i, lab in enumerate(row_labels):
        y = top + i * cell
        body.append(
            f'<text x="{left - 6}" y="{y + cell / 2 + 4:.1f}" text-anchor="end" class="tick">{escape(lab)}</text>'
        )
        for j in range(cols):
            v = m[i, j]
            shade = v / peak
            fill = _blend("#ffffff", "#1d4ed8" if i == j else "#b91c1c", shade)
            body.append(
                f'<rect x="{left + j * cell:.1f}" y="{y:.1f}" width="{cell:.1f}" height="{cell:.1f}" fill="{fill}" '
                f'stroke="#ffffff"><title>{escape(row_labels[i])} → {escape(col_labels[j])}: {fmt(v)}</title></rect>'
            )
            if show_text:
                ink = "#ffffff" if shade > 0.55 else "#111827"
                body.append(
                    f'<text x="{left + (j + 0.5) * cell:.1f}" y="{y + cell / 2 + 4:.1f}" text-anchor="middle" '
                    f'style="font-size:11px;fill:{ink}">{fmt(v)}</text>'
                )
    return _svg(width, height, body, title)


def _blend(a: str, b: str, t: float) -> str:
    t = min(max(float(t), 0.0), 1.0)
    ca = [int(a[i : i + 2], 16) for i in (1, 3, 5)]
    cb = [int(b[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(ca, cb, strict=True))
