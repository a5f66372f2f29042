"""`stats.sliding_median` of wide windows (`_order_statistics`, a wavelet matrix over the
values' ranks) gives `np.median`'s numbers over each window: odd and even widths, ties,
NaN (a window holding one is NaN) and infinities, runs of equal values."""

from __future__ import annotations

import numpy as np
import pytest

from mldbg.rules import stats


def reference(x: np.ndarray, width: int) -> np.ndarray:
    windows = np.lib.stride_tricks.sliding_window_view(x, width)
    return np.concatenate([np.median(windows[a : a + 2000], axis=1) for a in range(0, len(windows), 2000)])


def series(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "normal":
        return rng.standard_normal(n)
    if kind == "rounded":  # many ties
        return np.round(rng.standard_normal(n), 1)
    if kind == "walk":
        return np.cumsum(rng.standard_normal(n))
    x = np.repeat(rng.standard_normal(n // 40 + 1), 40)[:n]  # runs of one value
    x[rng.integers(0, n, 6)] = np.nan
    x[rng.integers(0, n, 4)] = np.inf
    x[rng.integers(0, n, 4)] = -np.inf
    return x


@pytest.mark.parametrize("kind", ["normal", "rounded", "walk", "nonfinite"])
@pytest.mark.parametrize("width", [64, 65, 200, 201])
def test_wide_windows_give_np_median(kind, width):
    rng = np.random.default_rng(width)
    x = series(kind, 70_000 + width, rng)  # more than one chunk of 2^16 windows
    assert len(x) - width + 1 >= 16 * width  # the wide path
    got = stats.sliding_median(x, width)
    want = reference(x, width)
    assert got.dtype == want.dtype == np.float64
    np.testing.assert_array_equal(got, want)  # NaN where NaN


def test_trailing_median_of_a_long_series():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(5_000)
    got = stats.trailing_median(x, 100)
    assert np.isnan(got[:100]).all()
    np.testing.assert_array_equal(got[100:], reference(x[:-1], 100))
