"""`rules.stats.median` and `robust_z` (Python's sort on short windows, the rules' hot path)
against NumPy's median on the same finite values: the same numbers, to the bit."""

from __future__ import annotations

import math

import numpy as np

from mldbg.rules.stats import MAD_SCALE, median, robust_z


def test_median_and_robust_z_equal_numpy():
    rng = np.random.default_rng(1)
    for n in range(80):
        for _ in range(20):
            x = rng.standard_normal(n) * 10.0 ** rng.integers(-5, 5)
            if n and rng.random() < 0.3:
                x[rng.integers(0, n)] = np.nan
            if n and rng.random() < 0.2:
                x[rng.integers(0, n)] = np.inf
            v = x[np.isfinite(x)]
            want = float(np.median(v)) if len(v) else math.nan
            for given in (list(x), tuple(x), x):
                got = median(given)
                assert got == want or (math.isnan(got) and math.isnan(want)), (n, got, want)
            if len(v):
                noise = MAD_SCALE * float(np.median(np.abs(np.diff(v)))) / math.sqrt(2) if len(v) > 2 else 0.0
                _, level, scale = robust_z(1.5, list(x), floor=1e-3)
                assert level == float(np.median(v[-5:])) and scale == max(noise, 1e-3, 1e-12), n
