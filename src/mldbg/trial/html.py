"""Notebook views: the `_repr_html_` of a Trial, a Tensor, a Finding and a list of findings.

Small and dependency-free: a compact table and, for a curve, an inline SVG sparkline (no
plotly, no JavaScript). Every name that comes from a run (paths, tensor names, messages) is
escaped. A curve reads at most `MAX_POINTS` records, spread evenly over the run, through the
trial's public index API, so a 100,000-step run displays as fast as a small one.
Findings are duck-typed here (`rule`, `step`, `mode`, `severity`, `message`...): trial/ does
not import the rules.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

import numpy as np

from mldbg.config import Mode

if TYPE_CHECKING:
    from mldbg.trial.records import Record, Records
    from mldbg.trial.tensor import Tensor
    from mldbg.trial.trial import Trial

MAX_POINTS = 200
SEVERITY_COLORS = {"error": "#c62828", "warning": "#ef6c00"}
_TABLE = 'style="border-collapse:collapse;font-family:sans-serif;font-size:12px"'
_CELL = 'style="text-align:left;padding:2px 8px;border-bottom:1px solid #ddd;vertical-align:top"'


def sparkline(values: Sequence[float], width: int = 160, height: int = 32, label: str = "") -> str:
    """An inline SVG polyline of `values` (NaN and inf are left out and marked in red below
    the line); an empty string when there is nothing finite to draw."""
    vals = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(vals)
    if not finite.any():
        return ""
    lo, hi = float(vals[finite].min()), float(vals[finite].max())
    span = hi - lo or 1.0
    n = len(vals)
    xs = np.linspace(1, width - 1, n) if n > 1 else np.array([width / 2])
    ys = height - 2 - (vals - lo) / span * (height - 6)
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y, ok in zip(xs, ys, finite, strict=True) if ok)
    marks = "".join(
        f'<circle cx="{x:.1f}" cy="{height - 2}" r="1.5" fill="#c62828"/>'
        for x, ok in zip(xs, finite, strict=True)
        if not ok
    )
    title = f"<title>{escape(label)} {_num(lo)} .. {_num(hi)}</title>" if label else ""
    return (
        f'<svg class="mldbg-sparkline" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">{title}'
        f'<polyline fill="none" stroke="#1565c0" stroke-width="1.2" points="{points}"/>{marks}</svg>'
    )


def _num(x: float) -> str:
    return f"{x:.4g}" if math.isfinite(x) else str(x)


def _rows(rows: Iterable[tuple[str, str]]) -> str:
    """A two-column table; the values are HTML already (escaped by the caller)."""
    body = "".join(f"<tr><th {_CELL}>{escape(k)}</th><td {_CELL}>{v}</td></tr>" for k, v in rows)
    return f"<table {_TABLE}>{body}</table>"


def _sampled(records: Records, limit: int = MAX_POINTS) -> list[Record]:
    """At most `limit` of `records` (first worker's), spread evenly, in step order."""
    n = len(records)
    if n == 0:
        return []
    first_worker = records.worker == records.worker.min()
    positions = np.flatnonzero(first_worker)
    positions = positions[np.argsort(records.step[positions], kind="stable")]
    if len(positions) > limit:
        positions = positions[np.linspace(0, len(positions) - 1, limit).astype(np.int64)]
    return [records[int(p)] for p in positions]


def _curve(trial: Trial, name: str, mode: Mode | None = None) -> tuple[list[float], str]:
    """(values, what they are) of tensor `name`: its value if it holds one number, else its
    l2 norm (saved, or computed from the raw tensor)."""
    values: list[float] = []
    what = "value"
    for rec in _sampled(trial.records(name, mode=mode)):
        size = int(np.prod(rec.shape))
        if size == 1 and rec.has_raw:
            values.append(float(np.asarray(trial.read(rec)).reshape(-1)[0]))
            continue
        what = "l2"
        saved = rec.reductions.get(("l2", False), rec.statistics.get("l2"))
        if saved is not None:
            values.append(float(saved))
        elif rec.has_raw:
            values.append(float(np.sqrt(np.sum(np.square(trial.read(rec), dtype=np.float64)))))
        elif size == 1 and ("mean", False) in rec.reductions:
            values.append(float(rec.reductions[("mean", False)]))
            what = "value"
    return values, what


def trial_html(trial: Trial) -> str:
    """A trial's summary: path, status, steps per mode, workers, counts, the loss curve."""
    steps = trial.steps()
    modes = [(m, len(trial.steps(m))) for m in (Mode.TRAIN, Mode.EVAL, Mode.PREDICT)]
    per_mode = ", ".join(f"{m.name} {n}" for m, n in modes if n) or "none"
    status = "complete" if trial.loaded_all_steps else "being written (or ended without its end marker)"
    lost = trial.lost()
    if lost:
        status += f"; lost {lost}"
    names = trial.tensor_names()
    collections = trial.collections()
    rows = [
        ("run", f"<code>{escape(str(trial.path))}</code>"),
        ("status", escape(status)),
        ("steps", f"{len(steps)}" + (f" ({steps[0]}..{steps[-1]})" if steps else "") + f": {per_mode}"),
        ("workers", escape(", ".join(trial.workers())) or "none yet"),
        ("tensors", str(len(names))),
        (
            "collections",
            f"{len(collections)}: " + escape(", ".join(f"{c} ({len(n)})" for c, n in collections.items())),
        ),
    ]
    losses = sorted(collections.get("losses", []))
    if losses:
        name = losses[0]
        values, _ = _curve(trial, name, Mode.TRAIN if trial.steps(Mode.TRAIN) else None)
        svg = sparkline(values, label=name)
        if svg:
            last = _num(values[-1])
            rows.append((f"loss ({name})", f"{svg} <span>last {escape(last)}</span>"))
    return f'<div class="mldbg-trial"><b>mldbg Trial</b>{_rows(rows)}</div>'


def tensor_html(tensor: Tensor) -> str:
    """A tensor's summary: name, steps, shape and dtype, a sparkline of its value or l2."""
    trial = tensor.trial
    records = trial.records(tensor.name)
    steps = tensor.steps()
    rows = [("tensor", f"<code>{escape(tensor.name)}</code>")]
    per_mode = ", ".join(
        f"{m.name} {len(s)}" for m in (Mode.TRAIN, Mode.EVAL, Mode.PREDICT) if (s := tensor.steps(m))
    )
    rows.append(
        ("steps", f"{len(steps)}" + (f" ({steps[0]}..{steps[-1]})" if steps else "") + f": {per_mode}")
    )
    if len(records):
        last = records[len(records) - 1]
        rows.append(("shape", escape(str(last.shape))))
        rows.append(("dtype", escape(str(last.dtype))))
        rows.append(("saved", "raw tensor" if last.has_raw else "statistics only"))
        workers = sorted({records.workers[w] for w in np.unique(records.worker).tolist()})
        rows.append(("workers", escape(", ".join(workers))))
        values, what = _curve(trial, tensor.name)
        svg = sparkline(values, label=f"{tensor.name} {what}")
        if svg:
            rows.append((what, f"{svg} <span>last {escape(_num(values[-1]))}</span>"))
    return f'<div class="mldbg-tensor"><b>mldbg Tensor</b>{_rows(rows)}</div>'


def _severity(severity: str) -> str:
    color = SEVERITY_COLORS.get(severity, "#555")
    return f'<span style="color:{color};font-weight:bold">{escape(severity)}</span>'


def findings_html(findings: Sequence[Any]) -> str:
    """Findings as a table: severity, rule, step (mode), message, tensors, what to try."""
    if not findings:
        return '<div class="mldbg-findings"><b>No findings</b>: no rule fired.</div>'
    head = "".join(f"<th {_CELL}>{h}</th>" for h in ("severity", "rule", "step", "message", "tensors", "try"))
    body = []
    for f in findings:
        where = f"{f.step}" + (f" ({escape(str(f.mode))})" if getattr(f, "mode", None) else "")
        worker = getattr(f, "worker", None)
        if worker:
            where += f" {escape(str(worker))}"
        tensors = ", ".join(getattr(f, "tensors", ()) or ())
        cells = (
            _severity(getattr(f, "severity", "error")),
            f"<code>{escape(f.rule)}</code>",
            where,
            escape(f.message),
            escape(tensors),
            escape(getattr(f, "suggestion", "") or ""),
        )
        body.append("<tr>" + "".join(f"<td {_CELL}>{c}</td>" for c in cells) + "</tr>")
    n = len(findings)
    title = f"<b>{n} finding{'s' if n != 1 else ''}</b>"
    return f'<div class="mldbg-findings">{title}<table {_TABLE}><tr>{head}</tr>{"".join(body)}</table></div>'
