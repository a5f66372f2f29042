"""Robust statistics for the profiler rules and report: percentiles that ignore NaN,
windows of samples, histograms and the Jensen-Shannon distance."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

QUANTILES = (50, 95, 99)


def finite(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x[np.isfinite(x)]


def percentile(x: np.ndarray, q: float) -> float:
    """The q-th percentile of the finite values; NaN when there are none."""
    v = finite(x)
    return float(np.percentile(v, q)) if len(v) else float("nan")


def summary(x: np.ndarray) -> dict[str, float]:
    """p50, p95, p99, max, mean and the number of finite samples."""
    v = finite(x)
    if not len(v):
        return {
            "p50": float("nan"),
            "p95": float("nan"),
            "p99": float("nan"),
            "max": float("nan"),
            "mean": float("nan"),
            "n": 0,
        }
    p50, p95, p99 = np.percentile(v, QUANTILES)
    return {
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "max": float(v.max()),
        "mean": float(v.mean()),
        "n": len(v),
    }


def windows(n: int, size: int, min_size: int) -> Iterator[slice]:
    """Consecutive windows of `size` samples over `n`; a shorter last window (or a single
    window when `n < size`) only if it holds at least `min_size` samples."""
    size = max(1, int(size))
    start = 0
    while start < n:
        stop = min(n, start + size)
        if stop - start >= min(size, max(1, min_size)):
            yield slice(start, stop)
        start = stop


def robust_sigma(x: np.ndarray) -> float:
    """1.4826 x the median absolute deviation: the standard deviation of the bulk of the
    values, unmoved by the outliers themselves."""
    v = finite(x)
    if not len(v):
        return float("nan")
    return float(1.4826 * np.median(np.abs(v - np.median(v))))


def histogram(x: np.ndarray, bins: int = 20, top: float = 100.0) -> np.ndarray:
    """Normalized histogram of `x` over [0, top] (values above `top` land in the last bin)."""
    v = np.clip(finite(x), 0.0, top)
    h, _ = np.histogram(v, bins=bins, range=(0.0, top))
    total = h.sum()
    return h / total if total else h.astype(np.float64)


def js_distance(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon distance (base 2, in [0, 1]) between two normalized histograms."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    m = 0.5 * (p + q)

    def kl(a: np.ndarray, b: np.ndarray) -> float:
        nz = a > 0
        return float(np.sum(a[nz] * np.log2(a[nz] / b[nz])))

    div = 0.5 * kl(p, m) + 0.5 * kl(q, m)
    return float(np.sqrt(max(0.0, div)))
