"""The statistics of the default rules computed with `jax.numpy`, on the device, inside `jit`.

`build(entries, mode)` runs at trace time (inside the hook's jitted function, or inside the
user's jitted train step through `mldbg.jax.statistics`): it asks, for each tensor, for the
statistics of its collection (`mldbg.store.statistics.DEFAULTS`), computes them with
`jax.numpy` reductions that XLA fuses into a few kernels, and packs every result into ONE
uint32 vector (float bits and int32 counts side by side), so the host fetches one small
array per step. What each word means (the layout) is known at trace time and travels as the
static part of a `Statistics` pytree, so a `Statistics` can be returned from a jitted step.

Definitions are those of the NumPy reference (`mldbg.store.statistics.compute`): float32
accumulation for fp16/bf16/fp32 (float64 where JAX runs with x64 and the tensor is float64),
counts in int32, bounds of `outside`/`unit_outside`/`equal` compared as the real numbers
they are (not rounded to float32). Not computed here: `fingerprint`, `sample_fingerprints`
of 64-bit elements (the 32-bit words are hashed in uint32
arithmetic: JAX has no 64-bit integers unless x64 is on) and `requires_grad` (a JAX
parameter has no such flag); `delta_l2` needs the tensor's value at the previous statistics
step, which the hook keeps on the device (`previous`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mldbg.config import Mode
from mldbg.store import statistics as st
from mldbg.store.format import dtype_name

NOT_HERE = ("requires_grad",)  # see the module docstring
FINGERPRINTS = ("fingerprint", "sample_fingerprints")
PARAMETERS = ("weights", "biases")


class Entry(NamedTuple):
    """One tensor handed over: its name, natural collections and value (a leaf)."""

    name: str
    natural: tuple[str, ...]
    leaf: Any


class Slot(NamedTuple):
    """Where one statistic lies in the packed vector: words [start, start + size)."""

    name: str
    key: str
    kind: str  # "f": float bits (2 words each for float64), "i": int32
    start: int
    shape: tuple[int, ...]


class Layout(NamedTuple):
    """The static part of a step's statistics: the slots, the float dtype, and what each tensor
    is (dtype name, shape, natural collections) for the record of a tensor known only by its
    statistics."""

    slots: tuple[Slot, ...]
    float_dtype: str
    words: int
    tensors: tuple[tuple[str, str, tuple[int, ...], tuple[str, ...]], ...]


# which statistics ---------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def kinds_for(natural: tuple[str, ...], mode: Mode = Mode.TRAIN) -> tuple[str, ...]:
    """The statistics a tensor of the natural collections `natural` gets at a statistics step
    of `mode` (parameters only in TRAIN: weights do not change in EVAL); `delta_l2` of the
    parameters is the hook's (it needs the previous value)."""
    kinds: list[str] = []
    for c in natural:
        if c in PARAMETERS and mode != Mode.TRAIN:
            continue
        if c == "gradients" and mode != Mode.TRAIN:
            continue
        if c in ("labels", "predictions"):
            kinds.append("samples")  # the class statistics come from `classes`
        kinds.extend(st.DEFAULTS.get(c, ()))
        if c == "outputs" and mode != Mode.TRAIN:
            kinds.extend(st.EVAL_DEFAULTS.get(c, ()))
    out = [k for k in dict.fromkeys(kinds) if st.Statistic.parse(k).name not in NOT_HERE]
    return tuple(k for k in out if k != "delta_l2")


def select(entries: Sequence[Entry], mode: Mode) -> list[tuple[Entry, tuple[str, ...]]]:
    """The entries that get statistics, with their kinds. Of an activation given as
    `(pre_activation, output)` only the input is measured (as the PyTorch hook does: x > 0 on
    the input is x > 0 on a ReLU's output, and saturation is read on the input)."""
    names = {e.name for e in entries}
    out = []
    for e in entries:
        kinds = kinds_for(e.natural, mode)
        if not kinds or not _usable(e.leaf):
            continue
        paired = e.name.endswith("_output_0") and e.name[: -len("_output_0")] + "_input_0" in names
        if paired and any(c.endswith("_activations") for c in e.natural):
            continue
        out.append((e, kinds))
    return out


def _usable(leaf: Any) -> bool:
    dtype = getattr(leaf, "dtype", None)
    if dtype is None:
        return False
    return bool(
        jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer) or dtype == jnp.bool_
    )


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
            hashes = _element_hashes(x)
            if hashes is None:
                continue  # 64-bit elements (x64 on): not computed here
            if name == "fingerprint":
                out[key] = _modsum(hashes.reshape(1, n))[0].astype(jnp.int32)
            else:
                rows = (
                    hashes.reshape(1, 1)
                    if x.ndim == 0
                    else hashes.reshape(x.shape[0], math.prod(x.shape[1:]))
                )
                out[key] = _modsum(rows).astype(jnp.int32)
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


def _element_hashes(x: jax.Array) -> jax.Array | None:
    """((A w + B) mod P)^2 mod P of each element's bit pattern `w` (as `statistics.fingerprint`),
    None for 64-bit elements."""
    size = x.dtype.itemsize
    if x.dtype == jnp.bool_:
        words = x.astype(jnp.uint32)
    elif size in (1, 2, 4):
        unsigned = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32}[size]
        words = jax.lax.bitcast_convert_type(x, unsigned).astype(jnp.uint32)
    else:
        return None
    r = _mod(_mulmod(_mod(words), st.A) + np.uint32(st.B))
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


# a step --------------------------------------------------------------------------------------
def compute(
    entries: Sequence[Entry],
    mode: Mode,
    previous: Mapping[str, tuple[jax.Array, jax.Array | None] | None] | None = None,
    classes: tuple[str, str] | None = None,
) -> tuple[dict[str, dict[str, jax.Array]], dict[str, tuple[str, tuple[int, ...], tuple[str, ...]]]]:
    """{tensor: {key: value}} of a step's entries (traced), and what each tensor is. `previous`:
    parameters' values at the previous statistics step and whether they are valid (their
    `delta_l2`; None: NaN); `classes`: the
    names of the labels and predictions entries whose class statistics are wanted."""
    values: dict[str, dict[str, jax.Array]] = {}
    tensors: dict[str, tuple[str, tuple[int, ...], tuple[str, ...]]] = {}
    by_name = {e.name: e for e in entries}
    for e, kinds in select(entries, mode):
        prev = valid = None
        if previous is not None and e.name in previous:
            kinds = (*kinds, "delta_l2")
            prev, valid = previous[e.name] or (None, None)
        values[e.name] = tensor_statistics(e.leaf, kinds, prev, valid)
        tensors[e.name] = (_dtype(e.leaf), tuple(jnp.shape(e.leaf)), e.natural)
    if classes is not None and classes[0] in by_name and classes[1] in by_name:
        lname, pname = classes
        on_labels, on_preds = class_statistics(by_name[lname].leaf, by_name[pname].leaf)
        for name, found in ((lname, on_labels), (pname, on_preds)):
            if found:
                values.setdefault(name, {}).update(found)
                tensors.setdefault(
                    name,
                    (_dtype(by_name[name].leaf), tuple(jnp.shape(by_name[name].leaf)), by_name[name].natural),
                )
    return values, tensors


def _dtype(leaf: Any) -> str:
    dt = np.dtype(leaf.dtype)
    if dt.name == "bfloat16":
        return "BF16"
    try:
        return dtype_name(np.empty(0, dt))
    except TypeError:
        return "F32"


def pack(
    values: Mapping[str, Mapping[str, jax.Array]], tensors: Mapping[str, Any]
) -> tuple[jax.Array, Layout]:
    """Every value in one uint32 vector (traced) and its layout (static)."""
    floats: list[jax.Array] = []
    ints: list[jax.Array] = []
    fslots: list[tuple[str, str, tuple[int, ...], int]] = []
    islots: list[tuple[str, str, tuple[int, ...], int]] = []
    fdtype = jnp.float32
    for vs in values.values():
        for v in vs.values():
            if v.dtype == jnp.float64:
                fdtype = jnp.float64
    fpos = ipos = 0
    for name, vs in values.items():
        for key, v in vs.items():
            flat = jnp.ravel(v)
            if jnp.issubdtype(v.dtype, jnp.floating):
                floats.append(flat.astype(fdtype))
                fslots.append((name, key, tuple(v.shape), fpos))
                fpos += flat.size
            else:
                ints.append(flat.astype(jnp.int32))
                islots.append((name, key, tuple(v.shape), ipos))
                ipos += flat.size
    per = 2 if fdtype == jnp.float64 else 1
    parts = []
    if floats:
        fbits = jax.lax.bitcast_convert_type(jnp.concatenate(floats), jnp.uint32)
        parts.append(fbits.reshape(-1))
    if ints:
        parts.append(jax.lax.bitcast_convert_type(jnp.concatenate(ints), jnp.uint32))
    packed = jnp.concatenate(parts) if parts else jnp.zeros(0, jnp.uint32)
    slots = [Slot(n, k, "f", per * s, shape) for n, k, shape, s in fslots]
    slots += [Slot(n, k, "i", per * fpos + s, shape) for n, k, shape, s in islots]
    described = tuple((name, *tensors[name]) for name in tensors)
    return packed, Layout(tuple(slots), np.dtype(fdtype).name, int(packed.size), described)


def unpack(words: np.ndarray, layout: Layout) -> dict[str, dict[str, float | np.ndarray]]:
    """The host side of `pack`: {tensor: {key: float or ndarray}} in float64 / int32."""
    words = np.ascontiguousarray(words, dtype=np.uint32)
    fd = np.dtype(layout.float_dtype)
    per = fd.itemsize // 4
    out: dict[str, dict[str, float | np.ndarray]] = {}
    for s in layout.slots:
        size = math.prod(s.shape)
        if s.kind == "f":
            arr = words[s.start : s.start + per * size].view(fd).astype(np.float64)
        else:
            arr = words[s.start : s.start + size].view(np.int32)
        vector = st.Statistic.parse(s.key).is_vector
        value: float | np.ndarray = arr.reshape(s.shape).copy() if vector else float(arr[0])
        out.setdefault(s.name, {})[s.key] = value
    return out


__all__ = [
    "Entry",
    "Layout",
    "class_statistics",
    "compute",
    "kinds_for",
    "pack",
    "tensor_statistics",
    "unpack",
]
