"""The reductions a run can save, in one table: name, index code and the NumPy function.

The writer computes them (`reduce_all`), the index stores them by code (FORMAT.md), readers
decode the codes and compute the same reductions from raw tensors (`reduce`), and
`ReductionConfig` checks names against it: all from this table, so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Reduction:
    """One reduction: its name, its code in the index, how NumPy computes it, and whether it
    is a norm (`ReductionConfig` lists norms apart from the other statistics)."""

    name: str
    code: int
    func: Callable[[np.ndarray], Any]
    norm: bool = False


TABLE: tuple[Reduction, ...] = (
    Reduction("min", 0, np.min),
    Reduction("max", 1, np.max),
    Reduction("mean", 2, np.mean),
    Reduction("std", 3, np.std),
    Reduction("variance", 4, np.var),
    Reduction("sum", 5, np.sum),
    Reduction("prod", 6, np.prod),
    Reduction("l1", 7, lambda x: np.sum(np.abs(x)), norm=True),
    Reduction("l2", 8, lambda x: np.sqrt(np.sum(np.square(x, dtype=np.float64))), norm=True),
)
ABS = 16  # added to a code for the same reduction of |x|

REDUCTION_NAMES: tuple[str, ...] = tuple(r.name for r in TABLE)
STATISTICS: tuple[str, ...] = tuple(r.name for r in TABLE if not r.norm)
NORMS: tuple[str, ...] = tuple(r.name for r in TABLE if r.norm)

# every code this version knows -> (name, abs); readers skip other codes (a newer writer's),
# as FORMAT.md's compatibility rule says
CODES: dict[int, tuple[str, bool]] = {
    r.code + (ABS if a else 0): (r.name, a) for r in TABLE for a in (False, True)
}

_BY_NAME = {r.name: r for r in TABLE}


def reduction_code(name: str, abs: bool = False) -> int:
    """The index code of reduction `name` (of |x| when `abs`). KeyError for an unknown name."""
    return _BY_NAME[name].code + (ABS if abs else 0)


def reduce(array: np.ndarray, name: str, abs: bool = False) -> float:
    """One reduction of `array` (of |array| when `abs`); NaN for an empty array."""
    if array.size == 0:
        return float("nan")
    x = np.abs(array) if abs else array
    if x.dtype == np.bool_:
        x = x.astype(np.int64)
    return float(_BY_NAME[name].func(x))


def reduce_all(array: np.ndarray, wanted: Iterable[tuple[str, bool]]) -> dict[tuple[str, bool], float]:
    """Every (name, abs) reduction of `wanted`, as the writer saves them."""
    return {(name, is_abs): reduce(array, name, is_abs) for name, is_abs in wanted}
