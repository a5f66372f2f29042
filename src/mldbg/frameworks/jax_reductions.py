"""The statistics vocabulary of `mldbg.store.statistics` in `jax.numpy`: traceable, so they run
on the device inside `jit`, where XLA fuses them into a few kernels.

Definitions are those of the NumPy reference (`mldbg.store.statistics.compute`,
`class_statistics`): float32 accumulation for fp16/bf16/fp32 (float64 where JAX runs with x64
and the tensor is float64), counts in int32, bounds of `outside`/`unit_outside`/`equal`
compared as the real numbers they are (not rounded to float32), fingerprints of 8-, 16- and
32-bit elements in uint32 arithmetic (JAX has no 64-bit integers unless x64 is on; 64-bit
elements get none). `requires_grad` is not a function of the values (a JAX parameter has no
such flag): not computed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mldbg.store import statistics as st

FINGERPRINTS = ("fingerprint", "sample_fingerprints")


# one tensor ----------------------------------------------------------------------------------
def _acc(x: jax.Array) -> Any:
    """The accumulation dtype: float64 for float64 tensors (x64 on), float32 otherwise."""
    return jnp.float64 if x.dtype == jnp.float64 else jnp.float32


def _below(bound: float, dtype: Any) -> float:
    """The largest value of `dtype` <= bound: x <= bound  <=>  x <= _below(bound) for x of dtype."""
    d = np.dtype(dtype)
    b = d.type(bound)
    if float(b) > bound:
        b = np.nextafter(b, d.type(-np.inf))
    return float(b)


def _above(bound: float, dtype: Any) -> float:
    d = np.dtype(dtype)
    b = d.type(bound)
    if float(b) < bound:
        b = np.nextafter(b, d.type(np.inf))
    return float(b)


def _units(f: jax.Array) -> jax.Array:
    """(samples, units, positions), as `statistics._units`."""
    if f.ndim == 0:
        return f.reshape(1, 1, 1)
    a = st.feature_axis(f.ndim)
    if a is None:
        return f.reshape(f.shape[0], 1, 1)
    moved = jnp.moveaxis(f, a, 1)
    return moved.reshape(moved.shape[0], moved.shape[1], math.prod(moved.shape[2:]))


def _count(mask: jax.Array, axis: Any = None) -> jax.Array:
    return jnp.sum(mask, axis=axis, dtype=jnp.int32)


def tensor_statistics(
    x: jax.Array, kinds: Sequence[str], previous: jax.Array | None = None, valid: jax.Array | None = None
) -> dict[str, jax.Array]:
    """The statistics `kinds` of one tensor (key -> array; counts int32, the rest floats).
    `previous`: its value at the last statistics step (`delta_l2`); `valid`: a traced bool,
    False when there was none (the hook passes the tensor itself then: one compiled function
    for the first step and the others)."""
    x = jnp.asarray(x)
    acc = _acc(x)
    f = x.astype(acc)
    n = f.size
    nan = jnp.asarray(np.nan, acc)
    out: dict[str, jax.Array] = {}
    for stat in st.expand(kinds):
        key, name = stat.key, stat.name
        if name in FINGERPRINTS:
            if name == "fingerprint":
                hashes = _element_hashes(x)
                if hashes is None:
                    continue  # 64-bit elements (x64 on): not computed here
                out[key] = _modsum(hashes.reshape(1, n))[0].astype(jnp.int32)
            else:
                rows = x.reshape(1, 1) if x.ndim == 0 else x.reshape(x.shape[0], math.prod(x.shape[1:]))
                hashes = _element_hashes(rows, positions=True)
                if hashes is None:
                    continue
                out[key] = _modsum(hashes).astype(jnp.int32)
        elif name == "count":
            out[key] = jnp.asarray(n, jnp.int32)
        elif name == "samples":
            out[key] = jnp.asarray(x.shape[0] if x.ndim else 1, jnp.int32)
        elif name == "nan_count":
            out[key] = _count(jnp.isnan(f))
        elif name == "inf_count":
            out[key] = _count(jnp.isinf(f))
        elif name in st.VECTORS:
            out[key] = _vector(stat, f)
        elif n == 0:
            out[key] = nan
        elif name in st.FIXED_CODES and st.FIXED_CODES[name] < 32:
            base, is_abs = st.CODES[st.FIXED_CODES[name]]
            out[key] = _reduce(jnp.abs(f) if is_abs else f, base)
        elif name == "zero_fraction":
            out[key] = _count(f == 0).astype(acc) / n
        elif name == "outside":
            lo, hi = stat.params
            out[key] = _count((f <= _below(lo, acc)) | (f >= _above(hi, acc))).astype(acc) / n
        elif name == "equal":
            v = stat.params[0]
            exact = float(np.dtype(acc).type(v)) == v
            out[key] = _count(f == v).astype(acc) / n if exact else jnp.asarray(0.0, acc)
        elif name == "quantile":
            sample = jnp.sort(f.reshape(-1)[st.subsample_index(n)])
            lo, hi, t = st.quantile_position(sample.size, stat.params[0])
            a, b = sample[lo], sample[hi]
            value = jnp.where(a == b, a, a + (b - a) * t)
            out[key] = jnp.where(jnp.isnan(sample[-1]), nan, value)
        elif name == "delta_l2":
            if previous is None or tuple(previous.shape) != tuple(x.shape):
                out[key] = nan
            else:
                delta = jnp.sqrt(jnp.sum(jnp.square(f - previous.astype(acc))))
                out[key] = delta if valid is None else jnp.where(valid, delta, nan)
        elif name in ("row_range", "col_range"):
            rows = f.reshape(1, 1) if f.ndim == 0 else f.reshape(f.shape[0], -1)
            axis = 1 if name == "row_range" else 0
            if rows.shape[axis] == 0:
                out[key] = nan
            else:
                out[key] = jnp.max(jnp.max(rows, axis=axis) - jnp.min(rows, axis=axis))
        # fingerprints and requires_grad are left out by `kinds_for`
    return out


# fingerprints in uint32 arithmetic (JAX has no 64-bit integers unless x64 is on) -------------
_P = np.uint32(st.P)


def _mod(x: jax.Array) -> jax.Array:
    """x mod P for any uint32 x (2^31 = 1 mod P)."""
    x = (x & _P) + (x >> 31)
    return jnp.where(x >= _P, x - _P, x)


def _mulmod(a: jax.Array, b: jax.Array | int) -> jax.Array:
    """a * b mod P for a, b < P, by 16-bit halves: no product exceeds 32 bits."""
    b = jnp.asarray(b, jnp.uint32)
    ah, al, bh, bl = a >> 16, a & 0xFFFF, b >> 16, b & 0xFFFF
    high = _mod(ah * bh * 2)  # 2^32 = 2 mod P; ah * bh < 2^30
    mid = _mod(ah * bl + al * bh)  # each < 2^31
    mid = _mod((mid >> 15) + ((mid & 0x7FFF) << 16))  # mid * 2^16: 2^31 = 1 mod P
    return _mod(_mod(high + mid) + _mod(al * bl))


def _element_hashes(x: jax.Array, positions: bool = False) -> jax.Array | None:
    """((A w + B) mod P)^2 mod P of each element's bit pattern `w` (as `statistics.fingerprint`),
    None for 64-bit elements; with `positions`, of the (rows, length) `x`, ((A w + B + C j)
    mod P)^2 mod P, j each element's position in its row (as `statistics.sample_fingerprint`)."""
    size = x.dtype.itemsize
    if x.dtype == jnp.bool_:
        words = x.astype(jnp.uint32)
    elif size in (1, 2, 4):
        unsigned = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32}[size]
        words = jax.lax.bitcast_convert_type(x, unsigned).astype(jnp.uint32)
    else:
        return None
    r = _mod(_mulmod(_mod(words), st.A) + np.uint32(st.B))
    if positions:
        j = _mulmod(jnp.arange(x.shape[-1], dtype=jnp.uint32), st.C)  # positions < P
        r = _mod(r + j)
    return _mulmod(r, r)


def _modsum(v: jax.Array) -> jax.Array:
    """Sum mod P along the last axis of (rows, m) values < P: chunks of 2^16, each summed by
    16-bit halves (no overflow), then the chunks' sums the same way."""
    if v.shape[-1] == 0:
        return jnp.zeros(v.shape[:-1], jnp.uint32)
    chunk = 1 << 16
    while v.shape[-1] > 1:
        m = v.shape[-1]
        k = -(-m // chunk)
        if k * chunk != m and k > 1:
            v = jnp.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, k * chunk - m)])
        v = v.reshape(*v.shape[:-1], k, v.shape[-1] // k)
        high = jnp.sum(v >> 16, axis=-1, dtype=jnp.uint32)
        low = jnp.sum(v & 0xFFFF, axis=-1, dtype=jnp.uint32)
        v = _mod(_mulmod(_mod(high), 1 << 16) + _mod(low))
    return v[..., 0]


def _reduce(f: jax.Array, name: str) -> jax.Array:
    if name == "min":
        return jnp.min(f)
    if name == "max":
        return jnp.max(f)
    if name == "mean":
        return jnp.mean(f)
    if name in ("std", "variance"):
        var = jnp.mean(jnp.square(f - jnp.mean(f)))  # two passes, as NumPy
        return jnp.sqrt(var) if name == "std" else var
    if name == "sum":
        return jnp.sum(f)
    if name == "prod":
        return jnp.prod(f)
    if name == "l1":
        return jnp.sum(jnp.abs(f))
    return jnp.sqrt(jnp.sum(jnp.square(f)))  # l2


def _vector(stat: st.Statistic, f: jax.Array) -> jax.Array:
    name, acc = stat.name, f.dtype
    u = _units(f)
    if name == "unit_active":
        if u.size == 0:
            return jnp.zeros(u.shape[1], jnp.int32)
        return _count(jnp.max(u, axis=2) > 0, axis=0)
    if name == "unit_outside":
        lo, hi = stat.params
        return _count((u <= _below(lo, acc)) | (u >= _above(hi, acc)), axis=(0, 2))
    if name in ("channel_count", "channel_mean", "channel_std"):
        finite = jnp.isfinite(u)
        count = _count(finite, axis=(0, 2))
        if name == "channel_count":
            return count
        v = jnp.where(finite, u, 0)
        mean = jnp.sum(v, axis=(0, 2)) / count
        if name == "channel_mean":
            return mean
        centered = jnp.where(finite, u - mean[None, :, None], 0)
        return jnp.sqrt(jnp.sum(centered * centered, axis=(0, 2)) / count)
    raise ValueError(f"statistic {stat.key!r} is not computed by the JAX adapter")  # pragma: no cover


# classes -------------------------------------------------------------------------------------
def class_statistics(
    labels: jax.Array | None, predictions: jax.Array | None
) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
    """`statistics.class_statistics` in jax.numpy: (of the labels, of the predictions). The
    number of classes must be known from the shapes (a class axis of float predictions, or a
    single score: 2); integer predictions and labels alone give nothing (their largest id is
    data, not shape)."""
    y = p = None
    c: int | None = None
    if predictions is not None:
        pr = jnp.asarray(predictions)
        if jnp.issubdtype(pr.dtype, jnp.floating):
            ax = st.class_axis(pr.shape, None if labels is None else jnp.shape(labels))
            if ax is not None:
                p, c = jnp.argmax(pr, axis=ax).reshape(-1), pr.shape[ax]
            else:
                s = pr.reshape(-1).astype(jnp.float32)
                finite = jnp.isfinite(s)
                lo = jnp.min(jnp.where(finite, s, jnp.inf), initial=jnp.inf)
                hi = jnp.max(jnp.where(finite, s, -jnp.inf), initial=-jnp.inf)
                unit = jnp.any(finite) & (lo >= 0) & (hi <= 1)
                p, c = (s > jnp.where(unit, 0.5, 0.0)).astype(jnp.int32), 2
        else:
            p = pr.reshape(-1).astype(jnp.int32)
    if c is None or c > st.MAX_CLASSES:
        return {}, {}
    if labels is not None:
        lb = jnp.asarray(labels)
        if jnp.issubdtype(lb.dtype, jnp.floating):
            ax = (
                st.class_axis(lb.shape)
                if predictions is not None and lb.shape == jnp.shape(predictions)
                else None
            )
            if ax is not None:
                y = jnp.argmax(lb, axis=ax).reshape(-1)
            else:
                v = lb.reshape(-1)
                ok = jnp.isfinite(v) & (v == jnp.floor(v)) & (jnp.abs(v) < 2.0**31)
                y = jnp.where(ok, jnp.where(ok, v, 0).astype(jnp.int32), -1)
        else:
            y = lb.reshape(-1).astype(jnp.int32)
    on_labels: dict[str, jax.Array] = {}
    on_preds: dict[str, jax.Array] = {}
    if y is not None:
        on_labels["class_counts"] = _bincount(y, c)
    if p is not None:
        on_preds["class_counts"] = _bincount(p, c)
    if y is not None and p is not None and y.size == p.size:
        on_labels["class_correct"] = _bincount(y, c, (y == p).astype(jnp.int32))
        if c <= st.MAX_CONFUSION_CLASSES:
            ok = (y >= 0) & (y < c) & (p >= 0) & (p < c)
            cells = jnp.bincount(jnp.where(ok, y * c + p, c * c), length=c * c + 1)[: c * c]
            on_labels["confusion"] = cells.reshape(c, c).astype(jnp.int32)
    return on_labels, on_preds


def _bincount(ids: jax.Array, c: int, weights: jax.Array | None = None) -> jax.Array:
    bucket = jnp.where((ids >= 0) & (ids < c), ids, c)
    return jnp.bincount(bucket, weights=weights, length=c + 1).astype(jnp.int32)


__all__ = ["FINGERPRINTS", "class_statistics", "tensor_statistics"]
