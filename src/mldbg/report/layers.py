"""The per-layer section of the training report: how healthy each layer is over training.

Per layer with weights: the l2 norm of its weights and of their gradient, and the update
ratio |w_t - w_prev| / |w_t|. Per activation layer (the `relu_activations`,
`tanh_activations` and `sigmoid_activations` collections): the share of dead units (ReLU: no
sample of the batch made the unit positive) and of saturated elements (tanh, sigmoid: inputs
outside the bounds of the saturation rules). Each value comes from the statistics the rules
read (`l2`, `delta_l2`, `unit_active`, `unit_outside`) where they were recorded, else from the
saved reductions, else from the raw tensor (the NumPy definitions of `mldbg.store.statistics`).
TRAIN steps only, the first worker's records.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import CorruptRecord
from mldbg.report import html, svg
from mldbg.report.cadence import of_series, with_gaps
from mldbg.report.svg import Series
from mldbg.report.timeline import Timeline, finding_marks
from mldbg.store import statistics as stats
from mldbg.trial import Trial

ACTIVATIONS = {
    "relu_activations": None,
    "tanh_activations": stats.TANH_BOUNDS,
    "sigmoid_activations": stats.SIGMOID_BOUNDS,
}
METRICS = ("weight l2", "gradient l2", "update ratio", "dead units", "saturated")
_EVALUATION = (int(Mode.EVAL), int(Mode.PREDICT))


@dataclass
class LayerHealth:
    """One layer's curves: metric (one of METRICS) -> (global steps, values), and the tensors
    each metric was read from."""

    name: str
    curves: dict[str, tuple[list[int], list[float]]] = field(default_factory=dict)
    tensors: dict[str, str] = field(default_factory=dict)

    def last(self, metric: str) -> float:
        ys = self.curves.get(metric, ([], []))[1]
        return ys[-1] if ys else float("nan")

    def median(self, metric: str) -> float:
        ys = [y for y in self.curves.get(metric, ([], []))[1] if np.isfinite(y)]
        return float(np.median(ys)) if ys else float("nan")

    def peak(self, metric: str) -> float:
        ys = [y for y in self.curves.get(metric, ([], []))[1] if np.isfinite(y)]
        return max(ys) if ys else float("nan")


def layer_name(tensor: str) -> str:
    """`fc1.weight`, `gradient/fc1.weight` -> `fc1`; `relu1_input_0` -> `relu1`."""
    name = re.sub(r"_(input|output)_\d+$", "", tensor.removeprefix("gradient/"))
    return name.rsplit(".", 1)[0] if "." in name else name


def layer_health(trial: Trial, damaged: list[tuple[str, str]] | None = None) -> list[LayerHealth]:
    """Every layer's curves, parameters' layers first, in the order of their names. A curve
    that meets a damaged record (CorruptRecord) is left out and (its message, what was left
    out) appended to `damaged`; without `damaged` it raises."""
    layers: dict[str, LayerHealth] = {}

    def add(tensor: str, metric: str, read: Callable[[], tuple[list[int], list[float]]]) -> None:
        try:
            curve = read()
        except CorruptRecord as e:
            if damaged is None:
                raise
            damaged.append((str(e), f"per-layer health: {metric} of {layer_name(tensor)} not drawn"))
            return
        if curve[0]:
            layer = layers.setdefault(layer_name(tensor), LayerHealth(layer_name(tensor)))
            layer.curves[metric] = curve
            layer.tensors[metric] = tensor

    collections = trial.collections()
    for weight in collections.get("weights", []):
        add(weight, "weight l2", partial(_scalar, trial, weight, "l2", _l2))
        add(weight, "update ratio", partial(_update_ratio, trial, weight))
        gradient = f"gradient/{weight}"
        if trial.has_tensor(gradient):
            add(gradient, "gradient l2", partial(_scalar, trial, gradient, "l2", _l2))
    for collection, bounds in ACTIVATIONS.items():
        for tensor in collections.get(collection, []):
            if bounds is None:
                add(tensor, "dead units", partial(_dead, trial, tensor))
            else:
                add(tensor, "saturated", partial(_saturated, trial, tensor, bounds))
    return sorted(layers.values(), key=lambda h: ("weight l2" not in h.curves, h.name))


def section(
    trial: Trial, timeline: Timeline, found: Sequence[Any], damaged: list[tuple[str, str]] | None = None
) -> html.Section | None:
    """The per-layer section: a chart per metric (one line per layer, findings marked) and a
    table with one row per layer; curves that meet damaged data are left out (see
    `layer_health`)."""
    health = layer_health(trial, damaged)
    if not health:
        return None
    charts = []
    run_steps = _run_train_steps(trial)  # global steps
    span = (float(run_steps[0]), float(run_steps[-1])) if run_steps else None
    said: dict[str, int] = {}  # each curve's cadence in words -> how many curves
    titles = {
        "weight l2": ("Weight norm per layer", "|w|_2", False, None),
        "gradient l2": ("Gradient norm per layer", "|g|_2", True, None),
        "update ratio": ("Update ratio per layer", "|w_t - w_prev| / |w_t|", True, None),
        "dead units": ("Dead ReLU units per layer", "share of units", False, (0.0, 1.0)),
        "saturated": ("Saturated activations per layer", "share of elements", False, (0.0, 1.0)),
    }
    for metric, (title, y_label, log_y, y_range) in titles.items():
        lines = []
        for h in health:
            if metric not in h.curves:
                continue
            xs, ys = h.curves[metric]
            pace = of_series(trial, xs)
            said[pace.text] = said.get(pace.text, 0) + 1
            gx, gy = with_gaps(xs, ys, xs, pace.breaks)
            lines.append(Series(h.name, gx, gy, points=True if pace.sparse else None))
        if not lines:
            continue
        drawn = {h.tensors[metric] for h in health if metric in h.tensors}
        charts.append(
            svg.line_chart(
                lines, title=title, x_label="global step", y_label=y_label, log_y=log_y,
                y_range=y_range, marks=finding_marks(found, drawn, timeline), x_range=span,
            )
        )  # fmt: skip
    rows = [
        [
            h.name,
            _cell(h.last("weight l2")),
            _cell(h.median("gradient l2")),
            _cell(h.median("update ratio")),
            _share(h, "dead units"),
            _share(h, "saturated"),
            max((len(c[0]) for c in h.curves.values()), default=0),
        ]
        for h in health
    ]
    header = ["layer", "weight l2 (last)", "gradient l2 (median)", "update ratio (median)",
              "dead units (last / worst)", "saturated (last / worst)", "steps"]  # fmt: skip
    note = (
        "Train steps, from the statistics the rules read where recorded, else the saved "
        "reductions or raw tensors. Update ratio: the change of the weights since the previous "
        "recorded step over their norm (healthy around 1e-3). Dead: units no sample of the batch "
        "made positive; saturated: tanh/sigmoid inputs outside the saturation rules' bounds. "
        "Dashed red lines: where a rule fired on that layer's tensors."
    )
    if said:
        note = _cadence_note(said, run_steps) + " " + note
    body = html.grid(charts) + html.table(header, rows, numeric=range(1, len(header)))
    return html.Section("layers", "Per-layer health", body, note=note)


def _cadence_note(said: dict[str, int], run_steps: list[int]) -> str:
    """How often the curves were saved, against the run's train steps: "Saved every step to
    19, then every 100th, of 150 train steps (0-149): the line breaks where steps were not
    saved." A chart that stops before the run does is said to."""
    common = max(said, key=lambda t: said[t])
    others = "" if len(said) == 1 else f" (some layers: {'; '.join(t for t in said if t != common)})"
    of = f", of {len(run_steps)} train steps ({run_steps[0]}-{run_steps[-1]})" if run_steps else ""
    return (
        f"Saved {common}{others}{of}: each line breaks where steps were not saved, and a lone "
        "point stands for one saved step between gaps."
    )


def _run_train_steps(trial: Trial) -> list[int]:
    """The run's saved TRAIN global steps (all its steps when it records no TRAIN step): the
    x span of the per-layer charts."""
    steps = trial.steps()
    train = [s for s in steps if trial.mode(s) in (Mode.TRAIN, Mode.GLOBAL)]
    return train or list(steps)


# reading ------------------------------------------------------------------------------------
def _train_positions(trial: Trial, name: str) -> np.ndarray:
    """Positions in `records(name)` of the first worker's TRAIN (or GLOBAL) records."""
    recs = trial.records(name)
    if not len(recs):
        return np.zeros(0, dtype=np.int64)
    worker = recs.worker
    keep = ~np.isin(recs.mode, _EVALUATION) & (worker == worker.min())
    positions = np.flatnonzero(keep)
    return positions[np.argsort(recs.step[positions], kind="stable")]


def _scalar(
    trial: Trial, name: str, key: str, from_raw: Callable[[np.ndarray], float]
) -> tuple[list[int], list[float]]:
    """A scalar statistic (or reduction) over the train steps, from the raw value where only
    that was saved."""
    recs = trial.records(name)
    column = trial.statistic_columns(name).get(key)
    xs, ys = [], []
    for i in _train_positions(trial, name).tolist():
        v = float(column[i]) if column is not None else float("nan")
        if np.isnan(v) and recs.has_raw[i]:
            v = from_raw(trial.read(recs[i]))
        if not np.isnan(v):
            xs.append(int(recs.step[i]))
            ys.append(v)
    return xs, ys


def _update_ratio(trial: Trial, name: str) -> tuple[list[int], list[float]]:
    """|w_t - w_prev| / |w_t| over the train steps: the `delta_l2` and `l2` statistics, or the
    raw values of consecutive saved steps."""
    recs = trial.records(name)
    cols = trial.statistic_columns(name)
    delta, norm = cols.get("delta_l2"), cols.get("l2")
    xs, ys = [], []
    previous: np.ndarray | None = None
    for i in _train_positions(trial, name).tolist():
        v = float(delta[i] / norm[i]) if delta is not None and norm is not None and norm[i] > 0 else np.nan
        raw = np.asarray(trial.read(recs[i]), dtype=np.float64) if recs.has_raw[i] else None
        if np.isnan(v) and raw is not None and previous is not None and previous.shape == raw.shape:
            v = _l2(raw - previous) / max(_l2(raw), 1e-30)
        previous = raw if raw is not None else previous
        if not np.isnan(v):
            xs.append(int(recs.step[i]))
            ys.append(v)
    return xs, ys


def _vector_by_step(trial: Trial, tensor: str, key: str) -> dict[int, np.ndarray]:
    name = trial.vector_statistics(tensor).get(key)
    if name is None:
        return {}
    recs = trial.records(name)
    return {
        int(recs.step[i]): np.asarray(trial.read(recs[i])) for i in _train_positions(trial, name).tolist()
    }


def _raw_by_step(trial: Trial, tensor: str) -> dict[int, np.ndarray]:
    recs = trial.records(tensor)
    return {
        int(recs.step[i]): np.asarray(trial.read(recs[i]))
        for i in _train_positions(trial, tensor).tolist()
        if recs.has_raw[i]
    }


def _dead(trial: Trial, tensor: str) -> tuple[list[int], list[float]]:
    """Share of units no sample made positive: `unit_active` == 0."""
    active = _vector_by_step(trial, tensor, "unit_active")
    for step, raw in _raw_by_step(trial, tensor).items():
        if step not in active and raw.ndim >= 2:
            active[step] = np.asarray(stats.compute(raw, ["unit_active"])["unit_active"])
    steps = sorted(s for s in active if active[s].size)
    return steps, [float(np.mean(active[s] == 0)) for s in steps]


def _saturated(trial: Trial, tensor: str, bounds: tuple[float, float]) -> tuple[list[int], list[float]]:
    """Share of elements outside the bounds: the recorded `unit_outside(lo,hi)` over `count`."""
    recorded = [k for k in trial.vector_statistics(tensor) if k.startswith("unit_outside(")]
    key = recorded[0] if recorded else f"unit_outside({bounds[0]!r},{bounds[1]!r})"
    outside = {s: float(v.sum()) for s, v in _vector_by_step(trial, tensor, key).items()}
    counts = dict(zip(*_scalar(trial, tensor, "count", lambda x: float(x.size)), strict=True))
    shares = {s: outside[s] / counts[s] for s in outside if counts.get(s)}
    for step, raw in _raw_by_step(trial, tensor).items():
        if step not in shares and raw.size:
            shares[step] = float(np.asarray(stats.compute(raw, [key])[key]).sum()) / raw.size
    steps = sorted(shares)
    return steps, [shares[s] for s in steps]


def _l2(x: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(x, dtype=np.float64).ravel()))


def _cell(v: float) -> str:
    return svg.fmt(v) if np.isfinite(v) else ""


def _share(h: LayerHealth, metric: str) -> str:
    if metric not in h.curves:
        return ""
    return f"{h.last(metric):.1%} / {h.peak(metric):.1%}"
