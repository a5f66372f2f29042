"""A tensor's values over steps: percentile bands (TensorBoard's "distributions") and
histograms at chosen steps (ridge lines or a step slider)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import InvalidConfig
from mldbg.insight.data import RunLike, evenly, open_trial, parse_mode, raw, steps_of
from mldbg.insight.figure import plotly

# TensorBoard's distribution percentiles: min, -1.5σ, -1σ, -0.5σ, median, +0.5σ, +1σ, +1.5σ, max
# of a normal distribution
PERCENTILES = (0.0, 6.68, 15.87, 30.85, 50.0, 69.15, 84.13, 93.32, 100.0)
BANDS = (  # outer first
    (0.0, 100.0, 0.15, "min to max"),
    (6.68, 93.32, 0.25, "±1.5σ (6.7% to 93.3%)"),
    (15.87, 84.13, 0.35, "±1σ (15.9% to 84.1%)"),
    (30.85, 69.15, 0.45, "±0.5σ (30.9% to 69.1%)"),
)
COLOR = "31, 119, 180"
MAX_HISTOGRAMS = 12


def finite_percentiles(value: Any) -> tuple[np.ndarray, int]:
    """The `PERCENTILES` of the finite values of `value` (NaN when it has none) and how many
    values were not finite."""
    v = np.asarray(value, dtype=np.float64).ravel()
    finite = v[np.isfinite(v)]
    bands = np.percentile(finite, PERCENTILES) if finite.size else np.full(len(PERCENTILES), np.nan)
    return bands, int(v.size - finite.size)


def percentiles(
    run: RunLike, name: str, mode: Mode | str | None = None, worker: str | None = None
) -> tuple[list[int], np.ndarray]:
    """(steps, array of shape (steps, len(PERCENTILES))): the `PERCENTILES` of the finite values of `name` at
    every step its raw value was saved (NaN where it had none). Steps are global, or `mode`'s own."""
    trial = open_trial(run)
    m = parse_mode(mode)
    steps, rows = [], []
    for s in steps_of(trial, name, m):
        v = raw(trial, name, s, m, worker)
        if v is None:
            continue  # only reductions at this step
        steps.append(s)
        rows.append(finite_percentiles(v)[0])
    if not steps:
        raise InvalidConfig(
            f"only reductions of {name!r} were saved, no raw values to draw a distribution from; "
            "record it with save_raw_tensor=True in its ReductionConfig"
        )
    return steps, np.vstack(rows)


def distribution(run: RunLike, name: str, mode: Mode | str | None = None, worker: str | None = None) -> Any:
    """A tensor's value distribution over steps: bands between the `PERCENTILES` (min to max,
    ±1.5σ, ±1σ, ±0.5σ of a normal distribution) and the median line, as TensorBoard's
    distributions dashboard shows them.
    Each trace's `meta["percentile"]` says which percentile its y values are."""
    go = plotly()
    m = parse_mode(mode)
    steps, p = percentiles(run, name, m, worker)
    col = {q: p[:, i] for i, q in enumerate(PERCENTILES)}
    fig = go.Figure()
    for low, high, alpha, label in BANDS:
        fig.add_trace(
            go.Scatter(
                x=steps, y=col[low], name=label, meta={"percentile": low}, mode="lines", line={"width": 0},
                legendgroup=label, showlegend=False, hovertemplate=f"p{low:g}: %{{y:.4g}}<extra></extra>",
            )
        )  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=steps, y=col[high], name=label, meta={"percentile": high}, mode="lines", line={"width": 0},
                fill="tonexty", fillcolor=f"rgba({COLOR}, {alpha})", legendgroup=label,
                hovertemplate=f"p{high:g}: %{{y:.4g}}<extra></extra>",
            )
        )  # fmt: skip
    fig.add_trace(
        go.Scatter(
            x=steps, y=col[50], name="median", meta={"percentile": 50}, mode="lines+markers",
            line={"color": f"rgb({COLOR})", "width": 2}, marker={"size": 4},
            hovertemplate="median: %{y:.4g}<extra></extra>",
        )
    )  # fmt: skip
    fig.update_layout(
        title=f"{name}: distribution over steps" + (f" ({worker})" if worker else ""),
        xaxis_title=f"{m.name.lower()} step" if m else "step",
        yaxis_title="value",
        hovermode="x unified",
        template="plotly_white",
        legend={"title": "values"},
    )
    return fig


def histograms(
    run: RunLike,
    name: str,
    steps: list[int] | None = None,
    mode: Mode | str | None = None,
    worker: str | None = None,
    bins: int = 40,
    style: str = "ridge",
) -> Any:
    """Histograms of a tensor at chosen steps (default: up to 12 spread over the run), on shared
    bins. `style="ridge"` stacks them (the latest in front, like TensorBoard's offset view);
    `style="slider"` shows one at a time with a step slider. Each trace's `customdata` holds
    the counts per bin."""
    if style not in ("ridge", "slider"):
        raise InvalidConfig(f"histograms style must be 'ridge' or 'slider', got {style!r}")
    if bins < 1:
        raise InvalidConfig(f"bins must be at least 1, got {bins}")
    go = plotly()
    trial = open_trial(run)
    m = parse_mode(mode)
    saved = steps_of(trial, name, m)
    if steps is None:
        steps = evenly(saved, MAX_HISTOGRAMS)
    else:
        missing = [s for s in steps if s not in set(saved)]
        if missing:
            raise InvalidConfig(
                f"tensor {name!r} was not saved at step(s) {missing}"
                + (f" of mode {m.name}" if m else "")
                + f"; it was at {saved[:8]}{' ...' if len(saved) > 8 else ''}"
            )
    values: dict[int, np.ndarray] = {}
    for s in steps:
        v = raw(trial, name, s, m, worker)
        if v is not None:
            v = np.asarray(v, dtype=np.float64).ravel()
            values[s] = v[np.isfinite(v)]
    if not values or not any(v.size for v in values.values()):
        raise InvalidConfig(f"no finite raw values of {name!r} at steps {steps} to draw histograms from")
    edges = shared_edges(list(values.values()), bins)
    counts = {s: np.histogram(v, bins=edges)[0] for s, v in values.items()}
    x_title = f"{m.name.lower()} step" if m else "step"
    fig = go.Figure()
    (_ridge if style == "ridge" else _slider)(go, fig, name, edges, counts, x_title)
    fig.update_layout(
        title=f"{name}: histograms" + (f" ({worker})" if worker else ""),
        xaxis_title="value",
        template="plotly_white",
    )
    return fig


def _ridge(
    go: Any, fig: Any, name: str, edges: np.ndarray, counts: dict[int, np.ndarray], x_title: str
) -> None:
    """Stacked outlines, the earliest step at the top (drawn first, behind), the latest in front."""
    centers = (edges[:-1] + edges[1:]) / 2
    order = sorted(counts)
    peak = max(int(c.max()) for c in counts.values()) or 1
    n = len(order)
    for i, s in enumerate(order):  # earliest first: drawn behind, at the top
        offset = float(n - 1 - i)
        h = counts[s] / peak * 1.6
        fig.add_trace(
            go.Scatter(
                x=np.r_[edges[0], centers, edges[-1]], y=np.r_[offset, offset + h, offset],
                customdata=np.r_[0, counts[s], 0], name=f"{x_title} {s}", mode="lines", fill="toself",
                line={"width": 1, "color": _shade(i, n)}, fillcolor=_shade(i, n, 0.55),
                hovertemplate=f"{x_title} {s}<br>value %{{x:.4g}}<br>count %{{customdata}}<extra></extra>",
            )
        )  # fmt: skip
    fig.update_yaxes(
        tickvals=[float(n - 1 - i) for i in range(n)], ticktext=[str(s) for s in order], title=x_title
    )
    fig.update_layout(showlegend=False)


def _slider(
    go: Any, fig: Any, name: str, edges: np.ndarray, counts: dict[int, np.ndarray], x_title: str
) -> None:
    """One bar chart per step, the latest shown, a slider to pick another."""
    centers = (edges[:-1] + edges[1:]) / 2
    order = sorted(counts)
    for i, s in enumerate(order):
        fig.add_trace(
            go.Bar(
                x=centers, y=counts[s], customdata=counts[s], width=np.diff(edges), name=f"{x_title} {s}",
                visible=i == len(order) - 1, marker={"color": f"rgb({COLOR})"},
                hovertemplate="value %{x:.4g}<br>count %{y}<extra></extra>",
            )
        )  # fmt: skip
    slider = [
        {"label": str(s), "method": "update",
         "args": [{"visible": [j == i for j in range(len(order))]}, {"title": f"{name} at {x_title} {s}"}]}
        for i, s in enumerate(order)
    ]  # fmt: skip
    fig.update_layout(
        sliders=[
            {
                "active": len(order) - 1,
                "steps": slider,
                "pad": {"t": 60},
                "currentvalue": {"prefix": f"{x_title}: "},
            }
        ],
        yaxis_title="count",
        bargap=0,
    )


def shared_edges(values: list[np.ndarray], bins: int) -> np.ndarray:
    """Bin edges spanning every array's finite values, so that steps compare bin for bin."""
    nonempty = [v for v in values if v.size]
    lo = min(float(v.min()) for v in nonempty)
    hi = max(float(v.max()) for v in nonempty)
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, bins + 1)


def _shade(i: int, n: int, alpha: float = 1.0) -> str:
    """Older steps lighter, the latest darkest."""
    t = 0.35 + 0.65 * (i / max(n - 1, 1))
    r, g, b = (int(255 - (255 - int(c)) * t) for c in COLOR.split(","))
    return f"rgba({r}, {g}, {b}, {alpha})"
