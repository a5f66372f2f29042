"""The statistics of the default rules computed by TensorFlow where the tensors live (issue 14).

`TFStatistics` collects a step's tensors (eager `tf.Tensor`s and variables: the TF tape hook,
and Keras on the TensorFlow backend, whose recording step hands its tensors out as outputs of
the compiled function) and `finish()` computes every statistic of them in ONE call of a
`tf.function` (traced once per layout of the step: the same tensors come back every step),
packs every value into one float64 vector and copies only that vector to the host. Nothing is
copied to the host before it is reduced. `graph_statistics` does the same inside a traced step
(the tape hook under `tf.function`), with the previous values behind `delta_l2` and
`sample_change` kept in variables.

Values follow `mldbg.store.statistics` (the NumPy reference): float16/float32 tensors are
reduced in float64 on the device (a bfloat16 tensor as its float32 values, as the host path
does), so they equal the reference on the same values to float64 rounding. The previous value
of a parameter (`delta_l2`) and the previous subsample of a gradient (`sample_change`) stay on
the device. Class statistics need the number of classes from the shapes (float predictions);
integer predictions leave them to the host path (`class_ids` reads it from the data).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from mldbg.store import statistics as st
from mldbg.store.format import dtype_name

Values = dict[str, dict[str, float | np.ndarray]]
NOT_HERE = ("requires_grad",)  # the hook's flag, filled on the host
_NUMERIC = (tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int8, tf.int16, tf.int32, tf.int64,
            tf.uint8, tf.uint16, tf.uint32, tf.bool)  # fmt: skip


class Request(NamedTuple):
    """One tensor's part of a step: static (name, kinds, unit axis, dtype, shape)."""

    name: str
    kinds: tuple[str, ...]
    unit_axis: int | None
    dtype: str  # TensorFlow dtype name
    shape: tuple[int, ...]
    previous: bool  # a previous value is passed (delta_l2)
    sample: bool  # a previous subsample is passed (sample_change)


class Slot(NamedTuple):
    name: str
    key: str
    start: int
    shape: tuple[int, ...]
    vector: str | None  # the storage dtype of a vector statistic, None for a scalar


def usable(value: Any) -> bool:
    """Can the device path take this value (a TF tensor or variable of a known, full shape; a
    Keras variable of the TensorFlow backend through its `tf.Variable`)?"""
    inner = getattr(value, "value", None)
    if isinstance(inner, tf.Variable):
        value = inner
    if not isinstance(value, (tf.Tensor, tf.Variable)) or value.dtype not in _NUMERIC:
        return False
    return value.shape.is_fully_defined()


def stateful(kinds: Sequence[str]) -> tuple[bool, bool]:
    """(wants delta_l2, wants sample_change)."""
    return "delta_l2" in kinds, "sample_change" in kinds


# one tensor ------------------------------------------------------------------------------------
def _nan() -> tf.Tensor:
    return tf.constant(math.nan, tf.float64)


def _count(mask: tf.Tensor, axis: Any = None) -> tf.Tensor:
    return tf.reduce_sum(tf.cast(mask, tf.int64), axis=axis)


def _units(f: tf.Tensor, axis: int | None) -> tf.Tensor:
    """(samples, units, positions), as `statistics._units`."""
    shape = f.shape.as_list()
    if not shape:
        return tf.reshape(f, [1, 1, 1])
    a = st.feature_axis(len(shape), axis)
    if a is None:
        return tf.reshape(f, [shape[0], 1, 1])
    perm = [0, a] + [i for i in range(1, len(shape)) if i != a]
    moved = tf.transpose(f, perm)
    return tf.reshape(moved, [shape[0], shape[a], math.prod(shape[1:]) // shape[a] if shape[a] else 0])


def _hashes(x: tf.Tensor, positions: tf.Tensor | None = None) -> tf.Tensor:
    """((A w + B) mod P)^2 mod P of each 32-bit word of each element, summed per element
    (int64, each < 2 P), shape of `x`: as `statistics.fingerprint`; with `positions` (int64,
    C j mod P per element, broadcast against `x`), ((A w + B + C j) mod P)^2: as
    `statistics.sample_fingerprint`."""
    p = tf.constant(st.P, tf.int64)
    extra = tf.constant(0, tf.int64) if positions is None else positions

    def one(words: tf.Tensor, a: int, b: int) -> tf.Tensor:
        r = tf.math.floormod(words * a + b + extra, p)
        return tf.math.floormod(r * r, p)

    if x.dtype == tf.bool:
        return one(tf.cast(x, tf.int64), st.A, st.B)
    size = x.dtype.size
    if size == 1:
        return one(tf.cast(tf.bitcast(x, tf.uint8) if x.dtype != tf.uint8 else x, tf.int64), st.A, st.B)
    if size == 2:
        return one(tf.cast(tf.bitcast(x, tf.uint16) if x.dtype != tf.uint16 else x, tf.int64), st.A, st.B)
    if size == 4:
        return one(tf.cast(tf.bitcast(x, tf.uint32) if x.dtype != tf.uint32 else x, tf.int64), st.A, st.B)
    words = tf.cast(tf.bitcast(x, tf.uint32), tf.int64)  # (..., 2): low word, high word
    return one(words[..., 0], st.A, st.B) + one(words[..., 1], st.A_HI, st.B_HI)


def _rows(t: tf.Tensor) -> tf.Tensor:
    shape = t.shape.as_list()
    if not shape:
        return tf.reshape(t, [1, 1])
    return tf.reshape(t, [shape[0], math.prod(shape[1:])])


def tensor_statistics(
    x: tf.Tensor,
    kinds: Sequence[str],
    unit_axis: int | None = None,
    previous: tf.Tensor | None = None,
    previous_sample: tf.Tensor | None = None,
) -> tuple[dict[str, tf.Tensor], tf.Tensor | None]:
    """The statistics `kinds` of one tensor (key -> float64 or int64 tensor) and, when
    `sample_change` is asked for, its subsample now (to keep for the next statistics step)."""
    if x.dtype == tf.bfloat16:  # the host path reduces its float32 values (exact)
        x = tf.cast(x, tf.float32)
    f = tf.cast(x, tf.float64)
    n = x.shape.num_elements() or 0
    shape = x.shape.as_list()
    flat = tf.reshape(f, [-1])
    has_nan = tf.reduce_any(tf.math.is_nan(flat)) if n else tf.constant(False)
    out: dict[str, tf.Tensor] = {}
    sample_now = None
    for stat in st.expand(kinds):
        key, name = stat.key, stat.name
        if name in NOT_HERE:
            continue
        if name == "count":
            out[key] = tf.constant(n, tf.int64)
        elif name == "samples":
            out[key] = tf.constant(shape[0] if shape else 1, tf.int64)
        elif name == "nan_count":
            out[key] = _count(tf.math.is_nan(flat))
        elif name == "inf_count":
            out[key] = _count(tf.math.is_inf(flat))
        elif name == "fingerprint":
            total = tf.reduce_sum(tf.reshape(_hashes(x), [-1])) if n else tf.constant(0, tf.int64)
            out[key] = tf.math.floormod(total, st.P)
        elif name in st.VECTORS:
            out[key] = _vector(stat, x, f, unit_axis)
        elif n == 0:
            out[key] = _nan()
        elif name in st.FIXED_CODES and st.FIXED_CODES[name] < 32:
            base, is_abs = st.CODES[st.FIXED_CODES[name]]
            out[key] = _reduce(tf.abs(flat) if is_abs else flat, base, has_nan)
        elif name == "zero_fraction":
            out[key] = tf.cast(_count(tf.equal(flat, 0.0)), tf.float64) / n
        elif name == "outside":
            lo, hi = stat.params
            out[key] = tf.cast(_count((flat <= lo) | (flat >= hi)), tf.float64) / n
        elif name == "equal":
            out[key] = tf.cast(_count(tf.equal(flat, stat.params[0])), tf.float64) / n
        elif name == "quantile":
            sample = tf.gather(flat, st.subsample_index(n))
            lo, hi, t = st.quantile_position(int(sample.shape[0]), stat.params[0])
            ordered = tf.sort(sample)
            a, b = ordered[lo], ordered[hi]
            value = tf.where(tf.equal(a, b), a, a + (b - a) * t)
            out[key] = tf.where(tf.reduce_any(tf.math.is_nan(sample)), _nan(), value)
        elif name == "delta_l2":
            if previous is None or tuple(previous.shape.as_list()) != tuple(shape):
                out[key] = _nan()
            else:
                out[key] = tf.sqrt(tf.reduce_sum(tf.square(f - tf.cast(previous, tf.float64))))
        elif name == "sample_change":
            sample_now = tf.gather(flat, st.subsample_index(n))
            if previous_sample is None or previous_sample.shape != sample_now.shape:
                out[key] = _nan()
            else:
                norm = tf.sqrt(tf.reduce_sum(tf.square(sample_now)))
                change = tf.sqrt(tf.reduce_sum(tf.square(sample_now - previous_sample)))
                out[key] = tf.where(norm > 0, change / tf.where(norm > 0, norm, 1.0), _nan())
        elif name in ("row_range", "col_range"):
            rows = _rows(f)
            axis = 1 if name == "row_range" else 0
            spread = tf.reduce_max(rows, axis=axis) - tf.reduce_min(rows, axis=axis)
            out[key] = tf.where(has_nan, _nan(), tf.reduce_max(spread))
        else:  # pragma: no cover - the vocabulary is closed
            raise ValueError(f"statistic {key!r} is not computed by the TensorFlow adapter")
    return out, sample_now


def _reduce(f: tf.Tensor, name: str, has_nan: tf.Tensor) -> tf.Tensor:
    if name in ("min", "max"):  # NaN propagates, as NumPy's
        value = tf.reduce_min(f) if name == "min" else tf.reduce_max(f)
        return tf.where(has_nan, _nan(), value)
    if name == "mean":
        return tf.reduce_mean(f)
    if name in ("std", "variance"):
        var = tf.reduce_mean(tf.square(f - tf.reduce_mean(f)))  # two passes, as NumPy
        return tf.sqrt(var) if name == "std" else var
    if name == "sum":
        return tf.reduce_sum(f)
    if name == "prod":
        return tf.reduce_prod(f)
    if name == "l1":
        return tf.reduce_sum(tf.abs(f))
    return tf.sqrt(tf.reduce_sum(tf.square(f)))  # l2


def _vector(stat: st.Statistic, x: tf.Tensor, f: tf.Tensor, axis: int | None) -> tf.Tensor:
    name = stat.name
    if name == "sample_fingerprints":
        shape = x.shape.as_list()
        length = math.prod(shape[1:]) if shape else 1
        j = tf.math.floormod(tf.range(length, dtype=tf.int64) * st.C, st.P)
        hashes = _rows(_hashes(x, tf.reshape(j, [1, *shape[1:]]) if shape else j[0]))
        return tf.math.floormod(tf.reduce_sum(hashes, axis=1), st.P)
    u = _units(f, axis)
    if name == "unit_active":  # the max over positions > 0; a NaN position makes the max NaN
        active = tf.reduce_any(u > 0, axis=2) & ~tf.reduce_any(tf.math.is_nan(u), axis=2)
        return _count(active, axis=0)
    if name == "unit_outside":
        lo, hi = stat.params
        return _count((u <= lo) | (u >= hi), axis=(0, 2))
    finite = tf.math.is_finite(u)
    count = _count(finite, axis=(0, 2))
    if name == "channel_count":
        return count
    v = tf.where(finite, u, tf.zeros_like(u))
    mean = tf.reduce_sum(v, axis=(0, 2)) / tf.cast(count, tf.float64)  # NaN where none is finite
    if name == "channel_mean":
        return mean
    centered = tf.where(finite, u - mean[None, :, None], tf.zeros_like(u))
    return tf.sqrt(tf.reduce_sum(centered * centered, axis=(0, 2)) / tf.cast(count, tf.float64))


# classes ---------------------------------------------------------------------------------------
def class_count(labels_shape: Sequence[int], preds_dtype: tf.DType, preds_shape: Sequence[int]) -> int | None:
    """The number of classes told by the shapes (float predictions), or None (host path)."""
    if not preds_dtype.is_floating:
        return None
    ax = st.class_axis(tuple(preds_shape), tuple(labels_shape))
    return int(preds_shape[ax]) if ax is not None else 2


def class_statistics(
    labels: tf.Tensor, predictions: tf.Tensor
) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor]]:
    """`statistics.class_statistics` in TensorFlow, for float predictions (`class_count`)."""
    ls, ps = labels.shape.as_list(), predictions.shape.as_list()
    c = class_count(ls, predictions.dtype, ps)
    if c is None or c > st.MAX_CLASSES:
        return {}, {}
    ax = st.class_axis(tuple(ps), tuple(ls))
    pr = tf.cast(predictions, tf.float32) if predictions.dtype == tf.bfloat16 else predictions
    if ax is not None:
        p = tf.reshape(tf.argmax(pr, axis=ax), [-1])
    else:
        s = tf.reshape(tf.cast(pr, tf.float64), [-1])
        finite = tf.math.is_finite(s)
        lo = tf.reduce_min(tf.where(finite, s, np.inf))
        hi = tf.reduce_max(tf.where(finite, s, -np.inf))
        unit = tf.reduce_any(finite) & (lo >= 0) & (hi <= 1)
        p = tf.cast(s > tf.where(unit, tf.constant(0.5, tf.float64), tf.constant(0.0, tf.float64)), tf.int64)
    lb = tf.cast(labels, tf.float32) if labels.dtype == tf.bfloat16 else labels
    lax = st.class_axis(tuple(ls)) if lb.dtype.is_floating and ls == ps else None
    if lax is not None:
        y = tf.reshape(tf.argmax(lb, axis=lax), [-1])
    elif lb.dtype.is_floating:
        v = tf.reshape(tf.cast(lb, tf.float64), [-1])
        ok = tf.math.is_finite(v) & tf.equal(v, tf.floor(v)) & (tf.abs(v) < 2.0**62)
        y = tf.where(ok, tf.cast(tf.where(ok, v, 0.0), tf.int64), tf.constant(-1, tf.int64))
    else:
        y = tf.reshape(tf.cast(lb, tf.int64), [-1])
    p = tf.cast(p, tf.int64)
    on_labels = {"class_counts": _bucket_counts(y, c)}
    on_preds = {"class_counts": _bucket_counts(p, c)}
    if y.shape[0] == p.shape[0]:
        on_labels["class_correct"] = _bucket_counts(y, c, tf.cast(tf.equal(y, p), tf.int64))
        if c <= st.MAX_CONFUSION_CLASSES:
            ok = (y >= 0) & (y < c) & (p >= 0) & (p < c)
            cell = tf.where(ok, y * c + p, c * c)
            cells = tf.math.unsorted_segment_sum(tf.ones_like(cell), cell, c * c + 1)[: c * c]
            on_labels["confusion"] = tf.reshape(cells, [c, c])
    return on_labels, on_preds


def _bucket_counts(ids: tf.Tensor, c: int, weights: tf.Tensor | None = None) -> tf.Tensor:
    bucket = tf.where((ids >= 0) & (ids < c), ids, c)
    data = tf.ones_like(bucket) if weights is None else weights
    return tf.math.unsorted_segment_sum(data, bucket, c + 1)


# a step ----------------------------------------------------------------------------------------
def _layout(values: dict[str, dict[str, tf.Tensor]]) -> tuple[list[tf.Tensor], tuple[Slot, ...]]:
    parts, slots, pos = [], [], 0
    for name, vs in values.items():
        for key, v in vs.items():
            stat = st.Statistic.parse(key)
            shape = tuple(v.shape.as_list())
            parts.append(tf.reshape(tf.cast(v, tf.float64), [-1]))
            slots.append(Slot(name, key, pos, shape, stat.dtype if stat.is_vector else None))
            pos += math.prod(shape)
    return parts, tuple(slots)


def compute(
    requests: Sequence[Request],
    tensors: Sequence[tf.Tensor],
    previous: Sequence[tf.Tensor | None],
    samples: Sequence[tf.Tensor | None],
    classes: tuple[int, int] | None,
    valid: Sequence[tf.Tensor | None] | None = None,
    statistics: Callable[..., Any] = tensor_statistics,
) -> tuple[tf.Tensor, tuple[Slot, ...], list[tf.Tensor | None]]:
    """Every statistic of a step packed in one float64 vector, where each lies, and the
    subsamples to keep (`sample_change`). `classes`: the indices of the labels and predictions
    among `requests` whose class statistics are wanted. `valid`: per request, a traced bool
    saying whether its previous values are real (False: `delta_l2`, `sample_change` are NaN).
    `statistics`: `tensor_statistics` or a function of the same arguments and values."""
    values: dict[str, dict[str, tf.Tensor]] = {}
    kept: list[tf.Tensor | None] = []
    for i, (r, x, prev, sample) in enumerate(zip(requests, tensors, previous, samples, strict=True)):
        values[r.name], now = statistics(x, r.kinds, r.unit_axis, prev, sample)
        ok = None if valid is None else valid[i]
        if ok is not None:
            for key in ("delta_l2", "sample_change"):
                if key in values[r.name]:
                    values[r.name][key] = tf.where(ok, values[r.name][key], _nan())
        kept.append(now)
    if classes is not None:
        li, pi = classes
        on_labels, on_preds = class_statistics(tensors[li], tensors[pi])
        values[requests[li].name].update(on_labels)
        values[requests[pi].name].update(on_preds)
    parts, slots = _layout(values)
    packed = tf.concat(parts, axis=0) if parts else tf.zeros([0], tf.float64)
    return packed, slots, kept


def unpack(packed: np.ndarray, slots: Sequence[Slot]) -> Values:
    """The host side of `compute`: {tensor: {key: float or ndarray}}."""
    out: Values = {}
    for s in slots:
        arr = packed[s.start : s.start + math.prod(s.shape)]
        if s.vector is None:
            out.setdefault(s.name, {})[s.key] = float(arr[0])
        else:
            dtype = np.int32 if s.vector == "I32" else np.float64
            out.setdefault(s.name, {})[s.key] = arr.reshape(s.shape).astype(dtype)
    return out


class TFStatistics:
    """One hook's device statistics: `add` a step's tensors, then `finish()`.

    Long-lived: it keeps the compiled functions (one per layout of a step), the previous
    values of parameters (`delta_l2`) and the previous subsamples of gradients
    (`sample_change`), all on the device."""

    def __init__(self) -> None:
        self._requests: list[Request] = []
        self._tensors: list[tf.Tensor] = []
        self._before: list[tf.Tensor | None] = []  # the previous values of this step's requests
        self._natural: dict[str, tuple[str, ...]] = {}
        self._flags: dict[str, float] = {}
        self._classes: tuple[str, str] | None = None
        self._previous: dict[str, tf.Tensor] = {}
        self._samples: dict[str, tf.Tensor] = {}
        self._functions: dict[tuple[Any, ...], Callable[..., Any]] = {}
        self._slots: dict[tuple[Any, ...], tuple[Slot, ...]] = {}
        self._per_signature: dict[tuple[Any, ...], Callable[..., Any]] = {}
        self.calls = 0  # compiled calls made (one per statistics step)
        self.traces = 0  # times a step's function was traced

    def accepts(self, value: Any) -> bool:
        """An eager TF tensor or variable of a full shape (inside a trace: `graph_statistics`)."""
        return usable(value) and tf.executing_eagerly()

    def add(
        self,
        name: str,
        value: Any,
        kinds: tuple[str, ...],
        natural: tuple[str, ...],
        unit_axis: int | None = None,
        requires_grad: bool | None = None,
    ) -> None:
        """A tensor of the open step (an eager `tf.Tensor` or variable: `usable`)."""
        if name in self._natural:
            return
        t = tf.convert_to_tensor(value)  # a variable's value now: a snapshot (copy on write)
        delta, change = stateful(kinds)
        prev = self._previous.get(name) if delta else None
        sample = self._samples.get(name) if change else None
        axis = unit_axis if t.shape.rank and t.shape.rank > 2 else None
        self._requests.append(
            Request(
                name,
                kinds,
                axis,
                t.dtype.name,
                tuple(t.shape.as_list()),
                prev is not None,
                sample is not None,
            )
        )
        self._tensors.append(t)
        self._before.append(prev)
        self._natural[name] = natural
        if requires_grad is not None and "requires_grad" in kinds:
            self._flags[name] = float(requires_grad)
        if delta:
            self._previous[name] = t

    def add_classes(self, labels_name: str, preds_name: str) -> bool:
        """Class statistics of two added tensors; False when the shapes do not tell the number
        of classes (the host path does them)."""
        names = [r.name for r in self._requests]
        if labels_name not in names or preds_name not in names:
            return False
        labels, preds = self._tensors[names.index(labels_name)], self._tensors[names.index(preds_name)]
        c = class_count(labels.shape.as_list(), preds.dtype, preds.shape.as_list())
        if c is None or c > st.MAX_CLASSES:
            return c is not None  # too many classes: none anywhere
        self._classes = (labels_name, preds_name)
        return True

    def pending(self) -> bool:
        return bool(self._requests)

    def finish(
        self,
    ) -> tuple[Callable[[], Values], dict[str, tuple[str, tuple[int, ...], tuple[str, ...]]], int]:
        """Compute the step's statistics in one compiled call; (values later, what each
        tensor is, bytes in flight). The packed vector is the only host copy."""
        requests, tensors, previous, flags = self._requests, self._tensors, self._before, self._flags
        natural, classes = self._natural, self._classes
        self._requests, self._tensors, self._before, self._flags, self._natural = [], [], [], {}, {}
        self._classes = None
        names = [r.name for r in requests]
        pair = None if classes is None else (names.index(classes[0]), names.index(classes[1]))
        key = (tuple(requests), pair)
        samples = [self._samples.get(r.name) if r.sample else None for r in requests]
        fn = self._functions.get(key)
        if fn is None:  # traced once per layout; later steps call the concrete function, which
            # skips tf.function's per-call signature matching (milliseconds for hundreds of tensors)
            traced: Any = self._function(key)
            fn = self._functions[key] = traced.get_concrete_function(tensors, previous, samples)
        packed, kept = fn(tensors, previous, samples)
        self.calls += 1
        for r, now in zip(requests, kept, strict=True):
            if now is not None:
                self._samples[r.name] = now
        slots = self._slots[key]
        host = packed.numpy()  # the one copy: a few hundred numbers

        def values() -> Values:
            out = unpack(host, slots)
            for name, flag in flags.items():
                out.setdefault(name, {})["requires_grad"] = flag
            return out

        info = {r.name: (described_name(r.dtype), r.shape, natural[r.name]) for r in requests}
        return values, info, host.nbytes

    def _function(self, key: tuple[Any, ...]) -> Callable[..., Any]:
        requests, pair = key

        def step(tensors: list[tf.Tensor], previous: list[Any], samples: list[Any]) -> Any:
            self.traces += 1
            packed, slots, kept = compute(
                requests, tensors, previous, samples, pair, statistics=self._statistics
            )
            self._slots[key] = slots
            return packed, kept

        return tf.function(step, reduce_retracing=True, autograph=False)

    def _statistics(
        self, x: tf.Tensor, kinds: tuple[str, ...], unit_axis: int | None, previous: Any, sample: Any
    ) -> tuple[dict[str, tf.Tensor], tf.Tensor | None]:
        """`tensor_statistics` inside a step's trace, through one `tf.function` per tensor
        signature (kinds, axis, dtype, shape, which previous values): a model of many
        same-shaped layers traces each signature once, for every layout of the step (the
        first step without previous values, a last partial batch, EVAL), not once per tensor
        and layout. TensorFlow inlines the calls when it optimizes the step's graph."""
        key = (kinds, unit_axis, x.dtype.name, tuple(x.shape.as_list()), previous is None, sample is None)
        fn = self._per_signature.get(key)
        if fn is None:

            def one(x: tf.Tensor, previous: Any, sample: Any) -> Any:
                return tensor_statistics(x, kinds, unit_axis, previous, sample)

            fn = self._per_signature[key] = tf.function(one, autograph=False)
        return fn(x, previous, sample)


class GraphState:
    """The previous values of a traced step's tensors (`delta_l2`, `sample_change`), in
    variables made once per name (outside the trace), with a flag saying they hold a value."""

    def __init__(self) -> None:
        self._previous: dict[str, tf.Variable] = {}
        self._samples: dict[str, tf.Variable] = {}
        self._valid: dict[str, tf.Variable] = {}

    def _variable(
        self, store: dict[str, tf.Variable], name: str, shape: list[int], dtype: tf.DType
    ) -> tf.Variable:
        v = store.get(name)
        if v is None or v.shape.as_list() != shape or v.dtype != dtype:
            with tf.init_scope():
                v = store[name] = tf.Variable(tf.zeros(shape, dtype), trainable=False)
        return v

    def inputs(self, r: Request, x: tf.Tensor) -> tuple[Any, Any, Any]:
        """(previous value, previous subsample, valid flag) of a request (traced reads)."""
        if not (r.previous or r.sample):
            return None, None, None
        valid = self._variable(self._valid, r.name, [], tf.bool)
        prev = self._variable(self._previous, r.name, x.shape.as_list(), x.dtype) if r.previous else None
        n = x.shape.num_elements() or 0
        size = min(n, st.QUANTILE_SAMPLE)
        sample = self._variable(self._samples, r.name, [size], tf.float64) if r.sample else None
        return (
            None if prev is None else prev.read_value(),
            None if sample is None else sample.read_value(),
            valid.read_value(),
        )

    def updates(self, r: Request, x: tf.Tensor, kept: tf.Tensor | None) -> list[Any]:
        """The assignments that keep this step's values for the next statistics step."""
        ops = []
        if r.previous:
            ops.append(self._previous[r.name].assign(x))
        if r.sample and kept is not None:
            ops.append(self._samples[r.name].assign(kept))
        if r.previous or r.sample:
            ops.append(self._valid[r.name].assign(True))
        return ops


def graph_statistics(
    entries: Sequence[tuple[str, tuple[str, ...], tf.Tensor]],
    state: GraphState,
    unit_axis: int | None,
    classes: tuple[str, str] | None,
) -> tuple[tf.Tensor, tuple[Slot, ...]]:
    """Inside a traced step: every statistic of `entries` (name, kinds, tensor) packed in one
    float64 vector, with the previous values read from and written to `state` (run this under
    the `tf.cond` of a statistics step)."""
    requests, tensors, previous, samples, valid = [], [], [], [], []
    for name, kinds, value in entries:
        x = tf.convert_to_tensor(value)
        delta, change = stateful(kinds)
        axis = unit_axis if x.shape.rank and x.shape.rank > 2 else None
        r = Request(name, kinds, axis, x.dtype.name, tuple(x.shape.as_list()), delta, change)
        prev, sample, ok = state.inputs(r, tf.cast(x, tf.float32) if x.dtype == tf.bfloat16 else x)
        requests.append(r)
        tensors.append(x)
        previous.append(prev)
        samples.append(sample)
        valid.append(ok)
    names = [r.name for r in requests]
    pair = None if classes is None else (names.index(classes[0]), names.index(classes[1]))
    packed, slots, kept = compute(requests, tensors, previous, samples, pair, valid)
    updates = []
    for r, x, now in zip(requests, tensors, kept, strict=True):
        updates += state.updates(r, tf.cast(x, tf.float32) if x.dtype == tf.bfloat16 else x, now)
    with tf.control_dependencies(updates):
        packed = tf.identity(packed)
    return packed, slots


def described_name(dtype: str) -> str:
    """The safetensors name of a TensorFlow dtype name (bfloat16: F32, reduced as float32)."""
    if dtype == "bfloat16":
        return "F32"
    return dtype_name(np.empty(0, tf.as_dtype(dtype).as_numpy_dtype))


__all__ = [
    "GraphState",
    "TFStatistics",
    "graph_statistics",
    "class_statistics",
    "compute",
    "tensor_statistics",
    "unpack",
    "usable",
]
