"""Reductions of a tensor, computed with NumPy exactly as NumPy would."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

_FUNCS: dict[str, Callable[[np.ndarray], float]] = {
    "min": lambda x: np.min(x),
    "max": lambda x: np.max(x),
    "mean": lambda x: np.mean(x),
    "std": lambda x: np.std(x),
    "variance": lambda x: np.var(x),
    "sum": lambda x: np.sum(x),
    "prod": lambda x: np.prod(x),
    "l1": lambda x: np.sum(np.abs(x)),
    "l2": lambda x: np.sqrt(np.sum(np.square(x, dtype=np.float64))),
}


def reduce(array: np.ndarray, name: str, abs: bool = False) -> float:
    """One reduction of `array` (of |array| when `abs`); NaN for an empty array."""
    if array.size == 0:
        return float("nan")
    x = np.abs(array) if abs else array
    if x.dtype == np.bool_:
        x = x.astype(np.int64)
    return float(_FUNCS[name](x))


def reduce_all(array: np.ndarray, wanted: Iterable[tuple[str, bool]]) -> dict[tuple[str, bool], float]:
    return {(name, is_abs): reduce(array, name, is_abs) for name, is_abs in wanted}
