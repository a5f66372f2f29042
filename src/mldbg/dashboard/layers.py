"""Per-layer health for the dashboard: weight and gradient norms, update ratios, and the dead
and saturated fractions of activation layers, over the recorded steps.

Read from the statistics the hook records (docs/statistics.md: `l2`, `delta_l2`, the
`unit_active` and `unit_outside(lo,hi)` vectors) through the trial's index API, without
touching a data file for the scalars; where a run saved raw tensors only, computed from them
(once per record: `LayerCache` keeps what it computed, and a refresh adds only new records).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import CorruptRecord, TensorUnavailableForStep
from mldbg.store.reductions import REDUCTION_NAMES
from mldbg.trial import Trial

PARAMETER_COLLECTIONS = ("weights", "biases")
REDUCTION_KEYS = frozenset([*REDUCTION_NAMES, *(f"{r}_abs" for r in REDUCTION_NAMES)])
ACTIVATION_KINDS = {"relu_activations": "relu", "tanh_activations": "tanh", "sigmoid_activations": "sigmoid"}
# where tanh and sigmoid are flat (their output within 0.01 of its bound), on their output and input
TANH_OUT, SIGMOID_OUT = 0.99, 0.01
TANH_IN, SIGMOID_IN = math.atanh(TANH_OUT), math.log(0.99 / 0.01)


def _num(x: float) -> float | str | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return x if math.isfinite(x) else ("Infinity" if x > 0 else "-Infinity")


class LayerCache:
    """Values computed from raw tensors (or read from vector statistics), by (tensor, what),
    as step -> value, extended with the records not seen yet."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], dict[int, Any]] = {}
        self.seen: dict[tuple[str, str], int] = {}


def _first_worker(trial: Trial, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions, steps, modes) of `name`'s records of its first worker, one per step."""
    records = trial.records(name)
    steps = np.asarray(records.step)
    workers = np.asarray(records.worker)
    if len(workers) and workers.min() != workers.max():
        keep = np.flatnonzero(workers == workers.min())
    else:
        keep = np.arange(len(steps))
    return keep, steps[keep], np.asarray(records.mode)[keep]


def _each_new(trial: Trial, cache: LayerCache, name: str, what: str, compute: Any) -> dict[int, Any]:
    """step -> compute(value) for the records of `name` not seen yet: their raw values read
    together (one ranged read per segment, `Trial.stacked`), else one by one."""
    key = (name, what)
    values = cache.values.setdefault(key, {})
    records = trial.records(name)
    start = cache.seen.get(key, 0)
    if start < len(records):
        steps = np.asarray(records.step)
        raw = np.asarray(records.has_raw)
        todo = np.array(
            [i for i in range(start, len(records)) if raw[i] and int(steps[i]) not in values], dtype=np.int64
        )
        stacked = trial.stacked(name, todo) if len(todo) > 1 else None
        for j, i in enumerate(todo.tolist()):
            try:
                value = stacked[j] if stacked is not None else trial.read(records[i])
            except (TensorUnavailableForStep, CorruptRecord):
                continue
            values.setdefault(int(steps[i]), compute(value))
    cache.seen[key] = len(records)
    return values


def parameters(trial: Trial, cache: LayerCache, since: int | None) -> list[dict[str, Any]]:
    collections = trial.collections()
    out = []
    for collection in PARAMETER_COLLECTIONS:
        for name in collections.get(collection, []):
            out.append(_parameter(trial, cache, name, collection, since))
    return out


def _parameter(
    trial: Trial, cache: LayerCache, name: str, collection: str, since: int | None
) -> dict[str, Any]:
    positions, steps, modes = _first_worker(trial, name)
    stats = trial.statistic_columns(name)
    l2 = stats.get("l2")
    gradient = f"gradient/{name}" if trial.has_tensor(f"gradient/{name}") else None
    if l2 is not None and np.isfinite(l2[positions]).any():
        # the hook's statistics, or (a run recorded with a ReductionConfig) its saved reductions
        source = "statistics" if set(stats) - REDUCTION_KEYS else "reductions"
        l2 = l2[positions]
        delta = stats.get("delta_l2")
        delta = delta[positions] if delta is not None else np.full(len(positions), np.nan)
        weight = dict(zip(steps.tolist(), l2.tolist(), strict=True))
        ratio = dict(zip(steps.tolist(), (delta / np.where(l2 == 0, np.nan, l2)).tolist(), strict=True))
    else:
        source = "raw"
        raws = _each_new(trial, cache, name, "flat", lambda v: np.asarray(v, dtype=np.float64).ravel())
        weight, ratio = {}, {}
        previous: np.ndarray | None = None
        for step in sorted(raws):
            v: np.ndarray = raws[step]
            norm = float(np.sqrt(np.dot(v, v)))
            weight[step] = norm
            if previous is not None and previous.shape == v.shape and norm:
                ratio[step] = float(np.linalg.norm(v - previous)) / norm
            previous = v
        # keep only the last value per tensor in memory beyond this call: the norms are cached
        cache.values[(name, "flat")] = {s: raws[s] for s in sorted(raws)[-1:]} if raws else {}
        cache.values.setdefault((name, "l2"), {}).update(weight)
        cache.values.setdefault((name, "ratio"), {}).update(ratio)
        weight, ratio = cache.values[(name, "l2")], cache.values[(name, "ratio")]
    grad = _gradient_l2(trial, cache, gradient) if gradient else {}
    shown = [s for s in sorted(set(steps.tolist()) | set(weight)) if since is None or s > since]
    mode_of = dict(zip(steps.tolist(), modes.tolist(), strict=True))
    return {
        "name": name,
        "collection": collection,
        "gradient": gradient,
        "steps": shown,
        "modes": [Mode(mode_of[s]).name if s in mode_of else trial.mode(s).name for s in shown],
        "weight_l2": [_num(weight.get(s, math.nan)) for s in shown],
        "grad_l2": [_num(grad.get(s, math.nan)) for s in shown],
        "update_ratio": [_num(ratio.get(s, math.nan)) for s in shown],
        "source": source,
    }


def _gradient_l2(trial: Trial, cache: LayerCache, name: str) -> dict[int, float]:
    positions, steps, _ = _first_worker(trial, name)
    l2 = trial.statistic_columns(name).get("l2")
    if l2 is not None and np.isfinite(l2[positions]).any():
        return dict(zip(steps.tolist(), l2[positions].tolist(), strict=True))
    return _each_new(
        trial, cache, name, "l2", lambda v: float(np.linalg.norm(np.asarray(v, dtype=np.float64)))
    )


def activations(trial: Trial, cache: LayerCache, since: int | None) -> list[dict[str, Any]]:
    collections = trial.collections()
    kind_of: dict[str, str] = {}
    for collection, kind in ACTIVATION_KINDS.items():
        for name in collections.get(collection, []):
            kind_of.setdefault(name, kind)
    out = []
    for name in trial.tensor_names():
        if name.startswith("stats/"):
            continue
        vectors = trial.vector_statistics(name)
        outside = next((k for k in vectors if k.startswith("unit_outside(")), None)
        if "unit_active" not in vectors and outside is None and name not in kind_of:
            continue
        kind = kind_of.get(name, "relu" if "unit_active" in vectors else "activation")
        dead: dict[int, float] | None = None
        saturated: dict[int, float] | None = None
        units = None
        source = "statistics"
        if "unit_active" in vectors:
            dead = _each_new(trial, cache, vectors["unit_active"], "dead", lambda v: float(np.mean(v == 0)))
            units = _units(trial, vectors["unit_active"])
        if outside is not None:
            count = trial.statistic_columns(name).get("count")
            positions, steps, _ = _first_worker(trial, name)
            counts = (
                dict(zip(steps.tolist(), count[positions].tolist(), strict=True)) if count is not None else {}
            )
            per = _each_new(trial, cache, vectors[outside], "outside", lambda v: float(np.sum(v)))
            saturated = {s: per[s] / counts[s] for s in per if counts.get(s)}
            units = units or _units(trial, vectors[outside])
        if dead is None and saturated is None:
            source = "raw"
            raw_input = "_input_" in name
            if kind == "relu":
                dead = _each_new(trial, cache, name, "dead", _dead_fraction)
            elif kind in ("tanh", "sigmoid"):
                saturated = _each_new(trial, cache, name, "saturated", _saturation(kind, raw_input))
            else:
                continue
            if not dead and not saturated:
                continue
        shown = sorted(set(dead or {}) | set(saturated or {}))
        shown = [s for s in shown if since is None or s > since]
        out.append(
            {
                "name": name,
                "kind": kind,
                "steps": shown,
                "modes": [trial.mode(s).name for s in shown],
                "units": units,
                "dead_fraction": None if dead is None else [_num(dead.get(s, math.nan)) for s in shown],
                "saturated_fraction": None
                if saturated is None
                else [_num(saturated.get(s, math.nan)) for s in shown],
                "source": source,
            }
        )
    return out


def _units(trial: Trial, vector: str) -> int | None:
    records = trial.records(vector)
    return int(records[len(records) - 1].shape[0]) if len(records) else None


def _unit_axis(v: np.ndarray) -> int:
    """The unit (feature, channel) axis, as docs/statistics.md defines it."""
    return 1 if v.ndim == 2 or v.ndim >= 4 else v.ndim - 1


def _dead_fraction(v: np.ndarray) -> float:
    """Share of units above 0 for no sample of the batch (dead_relu's measure)."""
    v = np.asarray(v)
    if v.ndim < 2 or v.size == 0:
        return math.nan
    axis = _unit_axis(v)
    alive = np.moveaxis(v > 0, axis, 0).reshape(v.shape[axis], -1).any(axis=1)
    return float(1.0 - alive.mean())


def _saturation(kind: str, on_input: bool) -> Any:
    def fraction(v: np.ndarray) -> float:
        v = np.asarray(v, dtype=np.float64)
        if v.size == 0:
            return math.nan
        if kind == "tanh":
            flat = np.abs(v) >= (TANH_IN if on_input else TANH_OUT)
        elif on_input:
            flat = np.abs(v) >= SIGMOID_IN
        else:
            flat = (v <= SIGMOID_OUT) | (v >= 1 - SIGMOID_OUT)
        return float(flat.mean())

    return fraction
