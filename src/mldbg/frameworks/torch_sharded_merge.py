"""The arithmetic of sharded statistics (issue 31): the partial statistics one rank's piece of a
sharded tensor reduces to, how the ranks' partials merge into the global tensor's, and the
statistics read from the merged values. NumPy only: where the pieces come from and how the
partials travel between the ranks is `torch_sharded`'s.

Partials (`PARTIALS`, one row per rank): count, sum, centered sum of squares (M2), sum of
squares, sum of |x| and its M2, min, max, min and max of |x|, product, NaN, inf and zero counts,
fingerprint, the squared change since the last statistics step, the largest row range, and the
NaN and inf of the rank's own piece (replicas included: the per-rank view, `rank_nonfinite`).
A rank whose piece does not count (a replica, an empty piece) sends the neutral row (`NEUTRAL`).

`merge`: sums add, extremes take the extreme, the variance by Chan's formula over (count, mean,
M2), fingerprints add modulo P. `statistic_value`: one key of `mldbg.store.statistics` from the
merged values; None for the keys that do not merge: `outside(...)`, `equal(...)`, `col_range`,
the vectors (activations', never a parameter's), `quantile(q)` and `sample_change` of a weight
(only gradients carry the subsample), and `row_range` of a tensor sharded along a dimension
other than 0 (a row is split).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mldbg.store import statistics as st
from mldbg.store.statistics import Statistic, Value

# the partial statistics of one rank's piece, in this order
PARTIALS = (
    "count", "sum", "m2", "sum_sq", "sum_abs", "m2_abs", "min", "max", "min_abs", "max_abs",
    "prod", "nan_count", "inf_count", "zero_count", "fingerprint", "delta_sq", "row_range",
    "local_nonfinite",
)  # fmt: skip
INDEX = {name: i for i, name in enumerate(PARTIALS)}
NEUTRAL = {"min": math.inf, "max": -math.inf, "min_abs": math.inf, "max_abs": -math.inf, "prod": 1.0,
            "row_range": -math.inf}  # fmt: skip


@dataclass
class Summary:
    """The merged partials of one sharded tensor at one step."""

    shape: tuple[int, ...]
    merged: dict[str, float]
    local_fingerprint: float
    replicated: bool
    whole_rows: bool
    sample: np.ndarray | None = None  # the global subsample (gradients)
    sample_change: float = math.nan
    # per global rank, the NaN and inf elements of that rank's own piece (replicas included);
    # None when no piece holds one (the per-rank view: `rank_nonfinite`)
    by_rank: np.ndarray | None = None
    world: int = 1  # ranks in the job (the length of `rank_nonfinite`)


def merge(rows: np.ndarray) -> dict[str, float]:
    """The partials of every rank (rows, in `PARTIALS` order) -> the global partials."""
    with np.errstate(all="ignore"):  # inf and NaN merge as NumPy's reductions of the whole would give
        return _merge(rows)


def _merge(rows: np.ndarray) -> dict[str, float]:
    counted = rows[rows[:, INDEX["count"]] > 0]
    n = float(counted[:, INDEX["count"]].sum())
    out = {"count": n}
    for name in ("sum", "sum_sq", "sum_abs", "nan_count", "inf_count", "zero_count", "delta_sq"):
        out[name] = float(rows[:, INDEX[name]].sum())
    out["prod"] = float(np.prod(counted[:, INDEX["prod"]])) if len(counted) else math.nan
    for name, pick in (("min", np.min), ("max", np.max), ("min_abs", np.min), ("max_abs", np.max),
                       ("row_range", np.max)):  # fmt: skip
        column = rows[:, INDEX[name]]
        out[name] = math.nan if np.isnan(column).any() else float(pick(column))
    out["fingerprint"] = float(int(rows[:, INDEX["fingerprint"]].astype(np.int64).sum()) % st.P)
    for m2, total in (("m2", "sum"), ("m2_abs", "sum_abs")):  # Chan et al.: exact in float64
        if n == 0:
            out[m2] = math.nan
            continue
        mean = out[total] / n
        with np.errstate(invalid="ignore", over="ignore"):
            parts = (
                counted[:, INDEX[m2]]
                + counted[:, INDEX["count"]]
                * (counted[:, INDEX[total]] / counted[:, INDEX["count"]] - mean) ** 2
            )
        out[m2] = float(parts.sum())
    return out


def statistic_value(s: Statistic, summary: Summary, requires_grad: bool) -> Value | None:
    """One statistic of a sharded tensor from its merged partials (None: does not merge)."""
    m, name, shape = summary.merged, s.name, summary.shape
    numel = math.prod(shape)
    if name == "count":
        return float(numel)
    if name == "samples":
        return float(shape[0]) if shape else 1.0
    if name == "requires_grad":
        return float(requires_grad)
    if name == "fingerprint":
        return summary.local_fingerprint if summary.replicated else m["fingerprint"]
    if name == "rank_nonfinite":
        return summary.by_rank if summary.by_rank is not None else np.zeros(summary.world, dtype=np.int32)
    if name not in st.MERGES:
        return None
    if name in ("nan_count", "inf_count"):
        return m[name]
    if numel == 0:
        return math.nan
    if name == "zero_fraction":
        return m["zero_count"] / m["count"]
    if name == "delta_l2":
        return math.sqrt(m["delta_sq"]) if m["delta_sq"] >= 0 else math.nan
    if name == "row_range":
        return None if not summary.whole_rows else (m["row_range"] if len(shape) else 0.0)
    if name == "quantile":
        if summary.sample is None:
            return None
        sample = np.sort(summary.sample)
        if not sample.size or np.isnan(sample[-1]):
            return math.nan
        lo, hi, t = st.quantile_position(sample.size, s.params[0])
        return float(st.interpolate(float(sample[lo]), float(sample[hi]), t))
    if name == "sample_change":
        return summary.sample_change if summary.sample is not None else None
    base, absolute = (name[:-4], True) if name.endswith("_abs") else (name, False)
    n = m["count"]
    total, m2 = (m["sum_abs"], m["m2_abs"]) if absolute else (m["sum"], m["m2"])
    if base == "sum":
        return total
    if base == "mean":
        return total / n
    if base == "variance":
        return m2 / n
    if base == "std":
        return math.sqrt(m2 / n) if m2 / n >= 0 else math.nan
    if base == "l1":
        return m["sum_abs"]
    if base == "l2":
        return math.sqrt(m["sum_sq"])
    if base == "prod":
        return None if absolute else m["prod"]
    if base in ("min", "max"):
        return m[f"{base}_abs" if absolute else base]
    return None


def by_rank(counts: np.ndarray, ranks: list[int], world: int) -> np.ndarray | None:
    """`rank_nonfinite`: per global rank of the job, the NaN and inf elements of its piece
    (0 for a rank outside the mesh); None when no piece holds one (nothing recorded)."""
    if not (counts > 0).any():
        return None
    out = np.zeros(max(world, max(ranks) + 1), dtype=np.int32)
    out[np.asarray(ranks)] = np.minimum(counts, np.iinfo(np.int32).max).astype(np.int32)
    return out


def sample_change(sample: np.ndarray, before: np.ndarray | None) -> float:
    """`sample_change` from the global subsample now and at the last statistics step."""
    if before is None or before.shape != sample.shape:
        return math.nan
    norm = float(np.sqrt(np.sum(np.square(sample))))
    return float(np.sqrt(np.sum(np.square(sample - before)))) / norm if norm > 0 else math.nan


def positions(
    shape: tuple[int, ...], box: tuple[tuple[int, ...], tuple[int, ...]]
) -> tuple[np.ndarray, np.ndarray]:
    """(indices into the global subsample, flat indices into the local piece) of the subsample
    positions that lie in this rank's box (global offset, local shape)."""
    n = math.prod(shape)
    index = st.subsample_index(n)
    if not shape:
        return np.arange(index.size), index
    coords = np.unravel_index(index, shape)
    offset, local_shape = box
    inside = np.ones(index.size, dtype=bool)
    for c, o, s in zip(coords, offset, local_shape, strict=True):
        inside &= (c >= o) & (c < o + s)
    where = np.nonzero(inside)[0]
    local = np.ravel_multi_index(
        tuple(c[where] - o for c, o in zip(coords, offset, strict=True)), local_shape
    ) if where.size else np.zeros(0, dtype=np.int64)  # fmt: skip
    return where, np.asarray(local, dtype=np.int64)


def flat_positions(n: int, run: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """`positions` of a piece that is one run of the flattened global tensor of `n` elements,
    (first element, elements): a DeepSpeed ZeRO partition."""
    index = st.subsample_index(n)
    start, count = run
    where = np.nonzero((index >= start) & (index < start + count))[0]
    return where, (index[where] - start).astype(np.int64)
