"""Calibrated sequential tests over a series: the decisions of the loss rules.

A rule that tests a training series at every step with a fixed threshold fires on noise
sooner or later: the chance of a false alarm per *run* grows with the run's length. The
tests here are set from a **false-alarm budget per run** instead: at most `ALPHA` (1e-3)
false alarms per rule per healthy run of up to `HORIZON` (10^6) tested values, whatever
the run's length, against a noise model estimated from the run itself.

The noise model (`noise`)
    Over a stretch of the series (at most the last `HISTORY` values), with `d1`, `d2` the
    differences at lag 1 and 2, less their running median over 21 values (the local slope:
    a falling loss, fast at first and then slowly, is not noise):
    - level: the median;
    - lag-1 autocorrelation rho: for AR(1) noise, var(d2) / var(d1) = 1 + rho, so
      rho = (s(d2) / s(d1))^2 - 1, clipped to [0, 0.98], s a robust standard deviation (the
      mean absolute deviation of the 90% closest values, which ties do not collapse as they
      do the MAD: a loss rounded to bf16);
    - scale: the marginal standard deviation, robustly, sigma = s(d1) / sqrt(2 (1 - rho))
      (var(d1) = 2 sigma^2 (1 - rho)); correlated noise wanders further than its
      step-to-step differences say, and this is what it wanders;
    - effective sample size of m consecutive values: m (1 - rho) / (1 + rho);
    - heavy tails: the innovations e_t = r_t - rho r_(t-1), r the residuals from a running
      median of 11 (less their median), give the
      ratio q90(|e|) / q50(|e|): 2.73 for normal noise, 3.31 for Student-t with 3 degrees of
      freedom, 6.4 for Cauchy (as measured by this estimator on simulated series). Its Student-t degrees of freedom nu (interpolated on that
      ratio plus its spread, 0.15 x sqrt(1000 / n), so that a tail is not taken for lighter
      than it is; from fewer than `MIN_TAIL` values: normal) give the quantiles
      (`quantile`), in units of the robust sigma, from a table computed once with
      scipy.stats.t.isf (scipy is not a dependency).

The budget (`spend`)
    Alpha spending over the tests of a run: the k-th test (k = 1, 2, ...) may err with
    probability alpha / (k H), H = ln(HORIZON) + 1 > sum_(k <= HORIZON) 1/k, so a run of up
    to HORIZON tests spends at most alpha in all (a union bound: no independence needed).
    Early tests get more of the budget than late ones: a bug in the first steps is still
    caught fast, and a long run does not pile up false alarms.

Slow structure (`long_run`)
    An oscillation (a GAN's players taking turns), a sawtooth or noise correlated beyond one
    lag moves the means of L consecutive innovations more than 1 / sqrt(L): the factor phi
    (the long-run variance over the innovations' variance, from the changes of consecutive
    block means, for L = 5 ... 50) scales the noise of a sequential test, as a CUSUM for
    dependent data uses the long-run variance.

Sequential change (`cusum_threshold`)
    Page's one-sided CUSUM S_t = max(0, S_(t-1) + min(z_t, cap) - drift) over standardized
    values z_t fires at S_t > h. With theta > 0 the root of E exp(theta (min(z, cap) - drift))
    = 1 (the Lundberg exponent, computed for the run's own tail: Student-t with the noise
    model's nu), exp(theta S) is a martingale while S > 0, so an excursion starting at a given
    step reaches h with probability at most exp(-theta h) (Wald). At most one excursion
    starts per step: over a run of N <= HORIZON steps the false-alarm probability is at most
    N exp(-theta h) <= alpha for h = ln(HORIZON / alpha) / theta. Heavy tails lower theta
    and so raise h; the cap bounds what one bad batch adds.

Everything here is a pure function of the values it is given, so a rule's step path and its
fast columnar path call the same function and cannot disagree. NumPy only.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from mldbg.rules.stats import sliding_median, window_medians

ALPHA = 1e-3  # false alarms per rule per healthy run
HORIZON = 1_000_000  # the longest run (tests) the budget covers
HISTORY = 1000  # the most values a noise model is estimated from
MIN_TAIL = 100  # fewer values than this: tails taken as normal
TAIL_MARGIN = 0.15  # the spread of the tail ratio measured on HISTORY values (simulated)
MAD_SCALE = 1.4826  # MAD x this estimates the standard deviation of normal noise
_SLOPE = 21  # values over which the local slope of a series is taken as constant

# Student-t upper quantiles in units of the distribution's robust sigma (1.4826 MAD), for
# p = 1e-2 ... 1e-12 (rows: degrees of freedom), from scipy.stats.t.isf(p, nu) / (1.4826 t.isf(0.25, nu)),
# and the ratio q90 / q50 that `noise` measures on each (|innovations| about a running median:
# the median over 200 simulated series of 1000 values; its spread is about 0.12-0.2 there).
_NU = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 10.0, 30.0, math.inf)
_RATIO = (6.407, 4.3914, 3.7906, 3.3129, 3.1249, 2.947, 2.8482, 2.7744, 2.7279)
_LOG_P = tuple(range(-2, -13, -1))
_Q = np.log(
    np.array(
        [
            [21.46, 214.7, 2147.0, 21470.0, 214700.0, 2.147e6, 2.147e7, 2.147e8, 2.147e9, 2.147e10, 2.147e11],
            [8.655, 40.34, 187.3, 869.2, 4035.0, 18730.0, 86920.0, 403500.0, 1.873e6, 8.692e6, 4.035e7],
            [5.753, 18.44, 58.4, 184.7, 584.1, 1847.0, 5841.0, 18470.0, 58410.0, 184700.0, 584100.0],
            [4.004, 9.007, 19.58, 42.26, 91.09, 196.3, 422.9, 911.0, 1963.0, 4229.0, 9110.0],
            [3.412, 6.532, 11.87, 21.25, 37.86, 67.37, 119.8, 213.1, 379.0, 673.9, 1198.0],
            [2.954, 4.895, 7.543, 11.31, 16.76, 24.71, 36.34, 53.39, 78.4, 115.1, 169.0],
            [2.664, 3.994, 5.488, 7.255, 9.399, 12.04, 15.32, 19.42, 24.54, 30.98, 39.07],
            [2.428, 3.344, 4.183, 4.993, 5.8, 6.62, 7.465, 8.344, 9.264, 10.23, 11.26],
            [2.326, 3.09, 3.719, 4.265, 4.753, 5.199, 5.612, 5.998, 6.361, 6.706, 7.034],
        ]
    )
)


def spend(k: int, alpha: float = ALPHA, horizon: int = HORIZON) -> float:
    """The false-alarm probability the `k`-th test of a run may spend (k >= 1): alpha /
    (k (ln horizon + 1)); summed over k <= horizon, at most alpha."""
    return alpha / (max(1, k) * (math.log(horizon) + 1.0))


def z_normal(p: float) -> float:
    """The upper `p` quantile of the standard normal (Acklam's approximation and one Newton
    step: relative error below 1e-9)."""
    p = min(max(p, 1e-300), 1 - 1e-16)
    q = p if p < 0.5 else 1 - p
    t = math.sqrt(-2 * math.log(q))
    c = (2.515517, 0.802853, 0.010328)
    d = (1.432788, 0.189269, 0.001308)
    z = t - (c[0] + c[1] * t + c[2] * t * t) / (1 + d[0] * t + d[1] * t * t + d[2] * t**3)
    for _ in range(3):  # Newton on sf(z) = q
        err = 0.5 * math.erfc(z / math.sqrt(2)) - q
        z += err / (math.exp(-z * z / 2) / math.sqrt(2 * math.pi))
    return z if p < 0.5 else -z


def t_quantile(p: float, nu: int) -> float:
    """The upper `p` quantile of Student's t with `nu` degrees of freedom, in units of its
    standard deviation's scale (Cornish-Fisher from the normal's: within 1% from 5 degrees of
    freedom on, 5% at 2): the bound of a t test on `nu + 1` values."""
    z = z_normal(p)
    return z + (z**3 + z) / (4 * nu) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * nu**2)


def nu_of(ratio: float) -> float:
    """The Student-t degrees of freedom for which `noise` measures the tail ratio `ratio`
    (interpolated in 1/nu; normal below 2.73, Cauchy above 6.4)."""
    if not math.isfinite(ratio) or ratio >= _RATIO[0]:
        return _NU[0]
    if ratio <= _RATIO[-1]:
        return math.inf
    inv = [1 / v for v in _NU]
    r = list(reversed(_RATIO))
    x = float(np.interp(ratio, r, list(reversed(inv))))
    return math.inf if x <= 0 else 1 / x


_INV_NU = [1 / v for v in _NU]


def _nus_of(ratios: np.ndarray) -> np.ndarray:
    """`nu_of` of each of `ratios` (the same numbers: one `np.interp` over them all)."""
    out = np.full(len(ratios), math.inf)
    finite = np.isfinite(ratios)
    x = np.interp(np.where(finite, ratios, 0.0), list(reversed(_RATIO)), list(reversed(_INV_NU)))
    with np.errstate(divide="ignore"):
        inner = np.where(x <= 0, math.inf, 1 / np.where(x <= 0, 1.0, x))
    out = np.where(ratios <= _RATIO[-1], math.inf, inner)
    return np.where(~finite | (ratios >= _RATIO[0]), _NU[0], out)


def _row_medians(a: np.ndarray) -> np.ndarray:
    """`np.median(a, axis=1)`, the same numbers (a partition at the middle only)."""
    return window_medians(a)


def quantile(p: float, nu: float = math.inf) -> float:
    """The upper `p` quantile of Student-t noise with `nu` degrees of freedom, in units of its
    robust sigma (normal: `z_normal`). Interpolated in log p and 1/nu; p below 1e-12 is
    extrapolated along the last decade."""
    if math.isinf(nu) and p >= 1e-12:
        return z_normal(p)
    lp = math.log10(max(p, 1e-300))
    inv = 0.0 if math.isinf(nu) else 1 / max(nu, 1.0)
    invs = [0.0 if math.isinf(v) else 1 / v for v in _NU]
    # along p, per row (log quantile is near linear in log p for the t rows)
    rows = []
    for i in range(len(_NU)):
        if lp >= _LOG_P[0]:
            rows.append(_Q[i, 0])
        elif lp < _LOG_P[-1]:
            slope = _Q[i, -1] - _Q[i, -2]
            rows.append(_Q[i, -1] + slope * (_LOG_P[-1] - lp))
        else:
            rows.append(float(np.interp(-lp, [-v for v in _LOG_P], _Q[i])))
    return float(math.exp(np.interp(inv, list(reversed(invs)), list(reversed(rows)))))


@dataclass(frozen=True)
class Noise:
    """A noise model of a stretch of a series (see the module's docstring)."""

    level: float  # median
    sigma: float  # robust marginal standard deviation
    rho: float  # lag-1 autocorrelation
    nu: float  # Student-t degrees of freedom of the innovations (inf: normal)
    n: int  # values it was estimated from

    def n_eff(self, m: int) -> float:
        """The effective sample size of `m` consecutive values."""
        return max(1.0, m * (1 - self.rho) / (1 + self.rho))

    def se_median(self, m: int) -> float:
        """The standard error of the median of `m` consecutive values."""
        return 1.2533 * self.sigma / math.sqrt(self.n_eff(m))

    def quantile(self, p: float) -> float:
        """The upper `p` quantile of one value's deviation from the level, in sigmas."""
        return quantile(p, self.nu)


def _spread(x: np.ndarray) -> float:
    """A robust standard deviation: the mean absolute deviation from the median of the 90%
    closest values, / 0.6573 (its value for normal noise). Unlike the MAD it does not fall to
    0 when most values tie (a loss rounded to bf16, a batch that repeats)."""
    if not len(x):
        return 0.0
    a = np.sort(np.abs(x - np.median(x)))
    return float(a[: max(1, int(math.ceil(0.9 * len(a))))].mean()) / 0.6573


def step_spread(x: np.ndarray) -> float:
    """The standard deviation of a series' noise from its successive differences: MAD_SCALE x
    their median absolute value / sqrt(2), the differences that are not finite left out (0
    when none is). A trend or a fall at the start barely moves it."""
    with np.errstate(all="ignore"):  # inf - inf in a stretch that overflowed
        d = np.abs(np.diff(np.asarray(x, dtype=np.float64)))
    d = d[np.isfinite(d)]
    return MAD_SCALE * float(np.median(d)) / math.sqrt(2) if len(d) else 0.0


def _mad(x: np.ndarray) -> float:
    return float(np.median(np.abs(x - np.median(x)))) if len(x) else 0.0


def _local_level(x: np.ndarray, width: int = 11) -> np.ndarray:
    """The centred running median of `x` (the ends: the nearest full window's)."""
    if len(x) <= width:
        return np.full(len(x), float(np.median(x)))
    med = np.median(np.lib.stride_tricks.sliding_window_view(x, width), axis=1)
    half = width // 2
    return np.concatenate([np.full(half, med[0]), med, np.full(len(x) - len(med) - half, med[-1])])


def noise(
    values: np.ndarray | list[float],
    floor: float = 0.0,
    tail_margin: float = TAIL_MARGIN,
    min_tail: int = MIN_TAIL,
) -> Noise | None:
    """The noise model of the finite values of `values` (at most the last `HISTORY`); None
    when fewer than 4. `floor`: the least sigma (a flat series has none, and any change would
    be infinitely many sigmas: a rule floors it at a share of the level). `tail_margin`: how
    many spreads heavier than measured the tail is taken (0 for a test whose bound has slack
    of its own: the CUSUM's). `min_tail`: from fewer values the tail is taken as normal (a
    test that must not take a short stretch for lighter-tailed than a longer one lowers it:
    the margin, x sqrt(1000 / n), grows as the values get fewer)."""
    x = np.asarray(values, dtype=np.float64)[-HISTORY:]
    x = x[np.isfinite(x)]
    if len(x) < 4:
        return None
    d1 = np.diff(x)
    d2 = x[2:] - x[:-2]
    if len(x) > 2 * _SLOPE:  # the local slope taken out: a loss that falls fast, then slowly, is not noise
        d1, d2 = d1 - _local_level(d1, _SLOPE), d2 - _local_level(d2, _SLOPE)
    m1, m2 = _spread(d1), _spread(d2)
    rho = min(max((m2 / m1) ** 2 - 1, 0.0), 0.98) if m1 > 0 else 0.0
    sigma = m1 / math.sqrt(2 * (1 - rho))
    nu = math.inf
    if len(x) >= max(4, min_tail) and sigma > 0:
        r = x - _local_level(x)
        e = r[1:] - rho * r[:-1]
        a = np.abs(e - np.median(e))
        q50 = float(np.quantile(a, 0.5))
        if q50 > 0:
            # one spread of the estimate heavier than measured: the tail is what a bar rests on
            nu = nu_of(float(np.quantile(a, 0.9)) / q50 + tail_margin * math.sqrt(HISTORY / len(x)))
    return Noise(float(np.median(x)), max(sigma, floor, 1e-12), rho, nu, len(x))


def long_run(
    values: np.ndarray | list[float], model: Noise, spans: tuple[int, ...] = (5, 10, 25, 50)
) -> float:
    """The long-run variance factor phi >= 1 of a stretch of a series under `model`: how much
    more the means of L consecutive innovations (x_t - level) - rho (x_(t-1) - level), in
    units of the innovations' scale, vary than 1 / sqrt(L) says, for the spans L given (the
    largest; a span counts when the stretch holds 8 blocks of it). Measured on the changes
    of consecutive block means (1.4826 MAD / sqrt 2), so a trend does not count. Slow
    structure that the lag-1 model misses (an oscillation, a sawtooth, correlated noise
    beyond one lag) gives phi > 1; a sequential test scales its noise by sqrt(phi), as a
    CUSUM for dependent data uses the long-run variance (the spectral density at zero)."""
    x = np.asarray(values, dtype=np.float64)[-HISTORY:]
    x = x[np.isfinite(x)]
    scale = model.sigma * math.sqrt(1 - model.rho**2)
    if len(x) < 16 or scale <= 0:
        return 1.0
    r = x - model.level
    z = (r[1:] - model.rho * r[:-1]) / scale
    phi = 1.0
    for span in spans:
        nb = len(z) // span
        if nb < 8:
            continue
        means = z[len(z) - nb * span :].reshape(nb, span).mean(axis=1)
        spread = MAD_SCALE * _mad(np.diff(means)) / math.sqrt(2)
        phi = max(phi, spread**2 * span)
    return phi


def _ends_level(med: np.ndarray, starts: np.ndarray, size: int, width: int) -> np.ndarray:
    """`_local_level` of each window of `size` values starting at `starts`, from `med`, the
    running median (width `width`) of the whole series the windows are cut from: a window's
    own running medians are the series' (the same values, in the same order), its ends
    padded with the nearest full window's."""
    half, inner = width // 2, size - width + 1
    cols = np.clip(np.arange(size) - half, 0, inner - 1)
    return med[starts[:, None] + cols[None, :]]


def _spreads(d: np.ndarray) -> np.ndarray:
    """`_spread` of each row of `d` (before its division by 0.6573)."""
    a = np.sort(np.abs(d - _row_medians(d)[:, None]), axis=1)
    return a[:, : max(1, int(math.ceil(0.9 * d.shape[1])))].mean(axis=1)


def noise_windows(
    x: np.ndarray, ends: np.ndarray, size: int, floor_share: float, tail_margin: float = TAIL_MARGIN
) -> list[tuple[Noise, float]]:
    """For each window `x[e - size : e]` (e in `ends`), (`noise` of it, floored at
    `floor_share` x |its median|, and `long_run` of it under that model): the same numbers as
    those functions give one window at a time, computed over all windows at once (the
    running medians of the whole stretch once, the sorts and quantiles row by row). Every
    window must be finite, with `2 _SLOPE < size <= HISTORY` and `size >= MIN_TAIL`."""
    if not (2 * _SLOPE < size <= HISTORY and size >= MIN_TAIL):
        raise ValueError(f"window of {size} values: use noise()")
    out: list[tuple[Noise, float]] = []
    ends = np.asarray(ends, dtype=np.int64)
    for c in range(0, len(ends), 128):  # 128 windows at a time: bounded memory
        chunk = ends[c : c + 128]
        lo = int(chunk[0]) - size
        seg = np.asarray(x[lo : int(chunk[-1])], dtype=np.float64)
        starts = chunk - size - lo
        rows = starts[:, None] + np.arange(size)[None, :]
        xs = seg[rows]
        d1g, d2g = np.diff(seg), seg[2:] - seg[:-2]
        d1 = d1g[rows[:, :-1]] - _ends_level(sliding_median(d1g, _SLOPE), starts, size - 1, _SLOPE)
        d2 = d2g[rows[:, :-2]] - _ends_level(sliding_median(d2g, _SLOPE), starts, size - 2, _SLOPE)
        s1, s2 = _spreads(d1), _spreads(d2)
        levels = _row_medians(xs)
        r = xs - _ends_level(sliding_median(seg, 11), starts, size, 11)
        models: list[Noise] = []
        rhos = np.zeros(len(chunk))
        for i in range(len(chunk)):
            m1, m2 = float(s1[i]) / 0.6573, float(s2[i]) / 0.6573
            rho = min(max((m2 / m1) ** 2 - 1, 0.0), 0.98) if m1 > 0 else 0.0
            rhos[i] = rho
            models.append(Noise(float(levels[i]), m1 / math.sqrt(2 * (1 - rho)), rho, math.inf, size))
        e = r[:, 1:] - rhos[:, None] * r[:, :-1]
        a = np.abs(e - _row_medians(e)[:, None])
        q50s, q90s = np.quantile(a, [0.5, 0.9], axis=1)  # one partition for both: the same values
        margin = tail_margin * math.sqrt(HISTORY / size)
        with np.errstate(divide="ignore", invalid="ignore"):
            nus = _nus_of(q90s / q50s + margin)
        scales = np.ones(len(chunk))
        for i, model in enumerate(models):
            nu = math.inf
            if model.sigma > 0 and float(q50s[i]) > 0:
                nu = float(nus[i])
            floor = floor_share * abs(model.level)
            models[i] = Noise(model.level, max(model.sigma, floor, 1e-12), model.rho, nu, size)
            scales[i] = models[i].sigma * math.sqrt(1 - models[i].rho ** 2)
        # long_run: the innovations in units of their scale, block means over each span
        r0 = xs - levels[:, None]
        z = (r0[:, 1:] - rhos[:, None] * r0[:, :-1]) / scales[:, None]
        phis = [1.0] * len(chunk)
        if size >= 16:
            for span in (5, 10, 25, 50):
                nb = (size - 1) // span
                if nb < 8:
                    continue
                means = z[:, size - 1 - nb * span :].reshape(len(chunk), nb, span).mean(axis=2)
                d = np.diff(means, axis=1)
                mads = _row_medians(np.abs(d - _row_medians(d)[:, None]))
                for i in range(len(chunk)):
                    spread = MAD_SCALE * float(mads[i]) / math.sqrt(2)
                    phis[i] = max(phis[i], spread**2 * span)
        for i, model in enumerate(models):
            scale = model.sigma * math.sqrt(1 - model.rho**2)
            out.append((model, phis[i] if scale > 0 else 1.0))
    return out


# sequential change: Page's CUSUM ------------------------------------------------------------------
_GRID = np.linspace(-60, 60, 24001)


@functools.lru_cache(maxsize=64)
def _theta_of(drift: float, cap: float, nu: float) -> float:
    """The Lundberg exponent of min(z, cap) - drift for Student-t(`nu`) noise in units of its
    robust sigma (normal for nu = inf), by quadrature on a grid."""
    g = _GRID
    dens = np.exp(-(g**2) / 2) if math.isinf(nu) else (1 + g**2 / nu) ** (-(nu + 1) / 2)
    dens = dens / dens.sum()
    cdf = np.cumsum(dens)
    robust = MAD_SCALE * float(np.interp(0.75, cdf, g))  # 1.4826 x MAD: the unit of z
    y = np.minimum(g / robust, cap) - drift
    lo, hi = 0.0, 64.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if float(np.sum(dens * np.exp(np.minimum(mid * y, 700)))) < 1:
            lo = mid
        else:
            hi = mid
    return lo


def cusum_threshold(
    drift: float,
    cap: float,
    nu: float = math.inf,
    alpha: float = ALPHA,
    horizon: int = HORIZON,
) -> float:
    """The CUSUM threshold h whose false-alarm probability over a run of up to `horizon`
    steps is at most `alpha`: ln(horizon / alpha) / theta, theta the Lundberg exponent of
    min(z, cap) - drift for z Student-t noise with `nu` degrees of freedom in robust sigmas
    (the normal's for nu = inf; nu is rounded down to a table row, the heavier side)."""
    rows = [v for v in _NU if v <= nu] or [_NU[0]]
    theta = _theta_of(float(drift), float(cap), rows[-1])
    if theta <= 0:
        return math.inf
    return math.log(horizon / alpha) / theta


# windows ------------------------------------------------------------------------------------------
def shift_z(before: np.ndarray, after: np.ndarray, model: Noise) -> float:
    """How far the median of `after` lies above the median of `before`, in standard errors of
    that difference under `model` (each median's error from its effective sample size)."""
    a = np.asarray(before, dtype=np.float64)
    b = np.asarray(after, dtype=np.float64)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if not len(a) or not len(b):
        return 0.0
    se = math.hypot(model.se_median(len(a)), model.se_median(len(b)))
    return (float(np.median(b)) - float(np.median(a))) / max(se, 1e-300)


__all__ = [
    "ALPHA",
    "HISTORY",
    "HORIZON",
    "Noise",
    "cusum_threshold",
    "long_run",
    "noise",
    "noise_windows",
    "nu_of",
    "quantile",
    "shift_z",
    "spend",
    "z_normal",
]
