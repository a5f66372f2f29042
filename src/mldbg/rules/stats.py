"""Robust statistics for rules: rank tests, trends, and per-unit activity of layers.

Time-series rules compare windows with rank tests (Mann-Whitney) and test trends with
Mann-Kendall instead of comparing two raw points: a minibatch loss is noisy, and a rule that
cries wolf on noise is worse than none. NumPy only; the windows are small.
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections.abc import Sequence

import numpy as np


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based), ties share their mean rank."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    sx = x[order]
    i = 0
    n = len(x)
    while i < n:
        j = i
        while j + 1 < n and sx[j + 1] == sx[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _norm_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


def binomial_tail(k: int, n: int, q: float, upper: bool = False) -> float:
    """P(X <= k) for X ~ Binomial(n, q), or P(X >= k) with `upper`, summed in log space (no
    overflow of the binomial coefficients, no scipy)."""
    if upper and k <= 0 or not upper and k >= n:
        return 1.0
    if q <= 0 or q >= 1:  # X is 0, or n, for sure
        x = 0 if q <= 0 else n
        return float(x >= k if upper else x <= k)
    lq, l1q = math.log(q), math.log1p(-q)
    span = range(k, n + 1) if upper else range(k + 1)
    terms = [
        math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lq + (n - i) * l1q
        for i in span
    ]
    if not terms:
        return 0.0
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def p_lower(a: Sequence[float], b: Sequence[float]) -> float:
    """One-sided Mann-Whitney p-value that the values of `a` tend to be lower than `b`'s
    (normal approximation with tie correction; continuity corrected). 1.0 when undecidable."""
    xa = np.asarray(a, dtype=np.float64)
    xb = np.asarray(b, dtype=np.float64)
    xa, xb = xa[np.isfinite(xa)], xb[np.isfinite(xb)]
    n1, n2 = len(xa), len(xb)
    if n1 == 0 or n2 == 0:
        return 1.0
    ranks = _ranks(np.concatenate([xa, xb]))
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2  # small when a is lower
    n = n1 + n2
    _, counts = np.unique(np.concatenate([xa, xb]), return_counts=True)
    tie = (counts**3 - counts).sum()
    var = n1 * n2 / 12 * ((n + 1) - tie / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return 1.0
    z = (n1 * n2 / 2 - u - 0.5) / math.sqrt(var)
    return _norm_sf(z)


def trend_z(x: Sequence[float] | np.ndarray) -> float:
    """Mann-Kendall trend statistic as a z-score: clearly negative when the series falls,
    clearly positive when it rises, near 0 for noise around a level."""
    v = np.asarray(x, dtype=np.float64)
    v = v[np.isfinite(v)]
    n = len(v)
    if n < 4:
        return 0.0
    diff = np.sign(v[None, :] - v[:, None])
    s = float(np.triu(diff, 1).sum())
    _, counts = np.unique(v, return_counts=True)
    var = (n * (n - 1) * (2 * n + 5) - (counts * (counts - 1) * (2 * counts + 5)).sum()) / 18
    if var <= 0:
        return 0.0
    if s > 0:
        return (s - 1) / math.sqrt(var)
    if s < 0:
        return (s + 1) / math.sqrt(var)
    return 0.0


def median(x: Sequence[float]) -> float:
    """The median of the finite values of `x` (NaN when there are none). Rules call it on short
    windows at every step: for a list of up to `_SMALL` values, Python's sort beats NumPy's
    per-call overhead several times over, with the same result (the middle value, or the mean
    of the two)."""
    if isinstance(x, (list, tuple)) and len(x) <= _SMALL:
        finite = [v for v in map(float, x) if math.isfinite(v)]
        return statistics.median(finite) if finite else float("nan")
    v = np.asarray(x, dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(np.median(v)) if len(v) else float("nan")


def rel_change(new: float, old: float) -> float:
    """(new - old) / |old|, safe near 0."""
    return (new - old) / max(abs(old), 1e-12)


# layers and units ------------------------------------------------------------------------------
_IO = re.compile(r"_(input|output)_\d+$")


def layer_of(name: str) -> str:
    """`relu1_output_0` -> `relu1`: the layer an activation tensor belongs to."""
    return _IO.sub("", name)


def is_input(name: str) -> bool:
    m = _IO.search(name)
    return bool(m and m.group(1) == "input")


def pick_per_layer(names: Sequence[str], prefer: str = "output") -> dict[str, str]:
    """One tensor per layer: the layer's `prefer` (input or output) tensor when both were saved."""
    chosen: dict[str, str] = {}
    for n in names:
        layer = layer_of(n)
        have = chosen.get(layer)
        if have is None or (is_input(n) == (prefer == "input") and is_input(have) != (prefer == "input")):
            chosen[layer] = n
    return chosen


def unit_fraction(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """Per unit (every coordinate but the batch axis), the count of samples where `mask` holds,
    and the number of samples. A 0-d or 1-d tensor is one sample of its elements."""
    m = np.asarray(mask)
    if m.ndim <= 1:
        return m.reshape(-1).astype(np.int64), 1
    flat = m.reshape(m.shape[0], -1)
    return flat.sum(axis=0, dtype=np.int64), m.shape[0]


class UnitWindow:
    """Per-unit counts over the last `size` saved steps of one layer, and further back until
    they hold `min_samples` samples (a share below 1% cannot be told from a handful)."""

    def __init__(self, size: int, min_samples: int = 0):
        self.size = max(1, size)
        self.min_samples = min_samples
        self.counts: list[np.ndarray] = []
        self.samples: list[int] = []
        self.steps: list[int] = []  # the step of each entry (-1: not given)

    def add(self, counts: np.ndarray, samples: int, step: int = -1) -> None:
        if self.counts and self.counts[-1].shape != counts.shape:
            self.counts, self.samples, self.steps = [], [], []  # the layer changed shape
        self.counts.append(counts)
        self.samples.append(samples)
        self.steps.append(step)
        while len(self.counts) > self.size and sum(self.samples) - self.samples[0] >= self.min_samples:
            self.counts.pop(0)
            self.samples.pop(0)
            self.steps.pop(0)

    @property
    def full(self) -> bool:
        return len(self.counts) >= self.size and sum(self.samples) >= self.min_samples

    def fraction(self) -> np.ndarray:
        """Per unit, the share of samples (over the window) where the condition held."""
        return np.sum(self.counts, axis=0) / max(1, sum(self.samples))


# spikes ----------------------------------------------------------------------------------------
_SMALL = 64  # below this many values, `median` sorts in Python
MAD_SCALE = 1.4826  # MAD x this estimates the standard deviation of normal noise


def robust_z(
    value: float, window: Sequence[float], floor: float = 0.0, recent: int = 5
) -> tuple[float, float, float]:
    """(z, level, scale): how far `value` lies above the recent level of `window` (the median
    of its last `recent` values), in robust standard deviations of its step-to-step noise
    (1.4826 x the median absolute first difference, / sqrt 2). Differences, not deviations
    from one median, so that a series that falls or rises steadily (a loss early in
    training) is not counted as noise. The scale is floored at `floor` (a flat series has
    no noise: any change would be infinitely many deviations)."""
    v = [x for x in map(float, window) if math.isfinite(x)]
    if not v:
        return 0.0, float("nan"), float("nan")
    level = median(v[-max(1, recent) :])
    noise = (
        MAD_SCALE * median([abs(b - a) for a, b in itertools.pairwise(v)]) / math.sqrt(2)
        if len(v) > 2
        else 0.0
    )
    scale = max(noise, floor, 1e-12)
    return (value - level) / scale, level, scale


def rising_share(x: Sequence[float]) -> float:
    """The share of consecutive pairs of `x` that increase (0 for fewer than two values)."""
    v = np.asarray(x, dtype=np.float64)
    if len(v) < 2:
        return 0.0
    return float(np.mean(np.diff(v) > 0))


# the same over whole series at once, for the rules' fast path (`check_columns`) ---------------
_MEDIAN_BLOCK = 1 << 20  # values `sliding_median` sorts at a time (8 MB)
_WIDE = 64  # windows at least this wide: `_order_statistics` (time independent of the width)
_CHUNK = 1 << 16  # windows `_order_statistics` ranks together (~5 MB of tables)


def sliding_median(x: np.ndarray, width: int) -> np.ndarray:
    """The median of each run of `width` consecutive values of `x` (len(x) - width + 1 of
    them): `np.median` over a sliding window view, a block of windows at a time (the median
    copies what it sorts: all of 10^6 windows of 200 at once would be 1.6 GB); for wide
    windows, the same numbers from `_order_statistics` (the middle values, exactly; NaN where
    a window holds a NaN, as `np.median` gives)."""
    if width >= _WIDE and len(x) - width + 1 >= 16 * width and x.dtype == np.float64:
        middle = [(width - 1) // 2] if width % 2 else [width // 2 - 1, width // 2]
        found = _order_statistics(x, width, middle)
        out = found[0] if len(found) == 1 else (found[0] + found[1]) / 2  # np.median's mean of two
        nan = np.concatenate(([0], np.cumsum(np.isnan(x))))
        out[nan[width:] > nan[:-width]] = np.nan
        return out
    windows = np.lib.stride_tricks.sliding_window_view(x, width)
    block = max(1, _MEDIAN_BLOCK // width)
    if len(windows) <= block:
        return window_medians(windows)
    return np.concatenate([window_medians(windows[a : a + block]) for a in range(0, len(windows), block)])


def window_medians(windows: np.ndarray) -> np.ndarray:
    """`np.median(windows, axis=1)`, the same numbers, in about half its time: a partition at
    the middle position(s) only (`np.median` also partitions at the last, to find a NaN, and
    averages through `np.mean`); a window holding a NaN is NaN, as `np.median` gives, and an
    even width takes the mean of the two middle values, (a + b) / 2, as `np.mean` of two does."""
    n, width = windows.shape
    if not n or not width or windows.dtype != np.float64:
        return np.median(windows, axis=1)
    h = width // 2
    if width % 2:
        out = np.partition(windows, h, axis=1)[:, h]
    else:
        part = np.partition(windows, [h - 1, h], axis=1)
        out = (part[:, h - 1] + part[:, h]) / 2
    nan = np.isnan(windows).any(axis=1)
    if nan.any():
        out[nan] = np.nan
    return out


def _order_statistics(x: np.ndarray, width: int, ks: Sequence[int]) -> list[np.ndarray]:
    """For each k of `ks`, the k-th smallest value (0-based) of each run of `width`
    consecutive values of `x`: a wavelet matrix over the values' ranks, queried for every
    window at once (about 17 levels of a few array operations per chunk of 2^16 windows), in
    place of a partial sort of each window (`np.median`'s time grows with the width: 2.6 s
    for 10^6 windows of 200, against ~0.6 s here). The values themselves are returned, so a
    window's k-th value is the one a sort of it puts at k (NaN sorts last: mask the windows
    that hold one)."""
    m = len(x) - width + 1
    out = [np.empty(m) for _ in ks]
    for a in range(0, m, max(_CHUNK, 4 * width)):
        b = min(m, a + max(_CHUNK, 4 * width))
        seg = x[a : b + width - 1]
        size = len(seg)
        order = np.argsort(seg, kind="stable")
        rank = np.empty(size, dtype=np.int32)
        rank[order] = np.arange(size, dtype=np.int32)
        bits = max(1, (size - 1).bit_length())
        zeros_before = []  # per level (high bit first): how many 0 bits precede each position
        cur = rank
        for bit in range(bits - 1, -1, -1):
            one = ((cur >> bit) & 1).astype(bool)
            zc = np.empty(size + 1, dtype=np.int32)
            zc[0] = 0
            np.cumsum(~one, out=zc[1:])
            zeros_before.append(zc)
            cur = np.concatenate((cur[~one], cur[one]))  # stable: 0 bits first
        for j, k in enumerate(ks):
            lo = np.arange(b - a, dtype=np.int32)
            hi = lo + width
            kk = np.full(b - a, k, dtype=np.int32)
            found = np.zeros(b - a, dtype=np.int32)
            for level, bit in enumerate(range(bits - 1, -1, -1)):
                zc = zeros_before[level]
                nz = zc[-1]
                zl, zr = zc[lo], zc[hi]
                zeros = zr - zl
                right = kk >= zeros  # the k-th has this bit set: among the ones
                kk = np.where(right, kk - zeros, kk)
                lo = np.where(right, lo - zl + nz, zl)
                hi = np.where(right, hi - zr + nz, zr)
                found |= right.astype(np.int32) << bit
            out[j][a:b] = seg[order[found]]
    return out


def trailing_median(x: np.ndarray, width: int) -> np.ndarray:
    """For each index i of `x`, the median of the `width` values before it (`x[i-width:i]`);
    NaN where fewer precede it (`sliding_median`): the screening side of a rule's rolling
    median (its `check` uses `median` on the same values)."""
    out = np.full(len(x), np.nan)
    if width >= 1 and len(x) > width:
        out[width:] = sliding_median(x[:-1], width)
    return out


def trailing_nonfinite(x: np.ndarray, width: int) -> np.ndarray:
    """For each index i of `x`, how many of the (up to) `width` values before it are NaN or
    infinite: where a rolling statistic drops values and a vectorised one would not."""
    bad = np.concatenate([[0], np.cumsum(~np.isfinite(x))])
    i = np.arange(len(x))
    return bad[i] - bad[np.maximum(0, i - width)]
