"""The statistics of the default rules of a JAX step, on the device, inside `jit` too.

`statistics(params, grads, loss, ...)` runs at trace time (inside the hook's jitted function,
or inside the user's jitted train step): it asks, for each tensor, for the statistics of its
collection (`mldbg.store.statistics.DEFAULTS`), computes them with `jax_reductions` and packs
every result into ONE uint32 vector (float bits and int32 counts side by side), so the host
fetches one small array per step. What each word means (the `Layout`) is known at trace time
and travels as the static part of a `Statistics` pytree, so a `Statistics` can be returned
from a jitted step and handed to `hook.record(step, statistics=...)`.

`delta_l2` needs the parameters' values at the previous statistics step: the hook keeps them on
the device (`eager_statistics` computes it in the same jitted function, `deltas` for
parameters a `Statistics` kept).
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
from mldbg.frameworks.jax_names import named_tensors
from mldbg.frameworks.jax_reductions import class_statistics, tensor_statistics
from mldbg.store import statistics as st
from mldbg.store.format import dtype_name

# requires_grad: a parameter's flag, not a function of its values: JAX has none; sample_change:
# what gradient_not_reset reads for a missing zero_grad(), which functional gradients cannot miss
NOT_HERE = ("requires_grad", "sample_change")
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


@jax.tree_util.register_pytree_node_class
class Statistics:
    """One step's statistics as `mldbg.jax.statistics` returns them: a pytree that a jitted
    step returns and `hook.record(step, statistics=...)` takes.

    Its leaves are one uint32 vector (every statistic, packed), the raw one-number values
    (the loss, scalars) and, unless `keep_params=False`, the parameters themselves (device
    arrays, for `delta_l2`: the hook keeps the ones of the last statistics step on the device).
    What the words mean travels as the static part of the pytree."""

    def __init__(
        self,
        packed: Any,
        layout: Layout,
        raw: dict[str, Any],
        raw_natural: tuple[tuple[str, tuple[str, ...]], ...],
        params: dict[str, Any],
        mode: Mode,
    ):
        self.packed, self.layout, self.raw, self.params, self.mode = packed, layout, raw, params, mode
        self.raw_natural = raw_natural

    def tree_flatten(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        return (self.packed, self.raw, self.params), (self.layout, self.raw_natural, self.mode)

    @classmethod
    def tree_unflatten(cls, aux: tuple[Any, ...], children: tuple[Any, ...]) -> Statistics:
        packed, raw, params = children
        layout, raw_natural, mode = aux
        return cls(packed, layout, raw, raw_natural, params, mode)

    def values(self) -> dict[str, dict[str, float | np.ndarray]]:
        """{tensor: {key: value}} on the host (one transfer of the packed vector)."""
        return unpack(np.asarray(self.packed), self.layout)


def _class_names(entries: Sequence[Entry]) -> tuple[str, str] | None:
    """The labels and predictions whose class statistics are taken: one leaf each."""
    labels = [e.name for e in entries if "labels" in e.natural]
    preds = [e.name for e in entries if "predictions" in e.natural]
    return (labels[0], preds[0]) if len(labels) == 1 and len(preds) == 1 else None


def one_number(e: Entry) -> bool:
    return any(c in ("losses", "scalars") for c in e.natural)


def build(entries: Sequence[Entry], mode: Mode, previous: dict[str, Any] | None) -> tuple[Any, Layout]:
    """The packed statistics of a step's entries (traced) and their layout."""
    values, tensors = compute(entries, mode, previous, _class_names(entries))
    return pack(values, tensors)


def statistics(
    params: Any = None,
    grads: Any = None,
    loss: Any = None,
    *,
    mode: Mode | str = Mode.TRAIN,
    keep_params: bool = True,
    when: Any = None,
    **named: Any,
) -> Statistics:
    """The statistics of the default rules of one step, computed with `jax.numpy` where the
    arrays live; call it inside your jitted train step and return the result, then hand it to
    `hook.record(step, statistics=stats)`. Same keywords as `Hook.record`. `keep_params`:
    keep the parameters for `delta_l2` (the hook compares them with the last statistics
    step's on the device; without them no `delta_l2`, so `weight_update_ratio` has nothing).
    `when`: a bool (traced: pass `hook.statistics_due(step)` into your step) under which the
    statistics are computed (`lax.cond`); on other steps they cost nothing and the hook,
    which asks the same question, reads nothing."""
    mode = Mode.parse(mode)
    entries = [Entry(*t) for t in named_tensors(params, grads, loss, named)]
    packed, layout = _gated(entries, mode, when)
    raw = {e.name: jnp.asarray(e.leaf) for e in entries if one_number(e) and _usable_raw(e.leaf)}
    raw_natural = tuple((e.name, e.natural) for e in entries if e.name in raw)
    kept = {}
    if keep_params and mode == Mode.TRAIN:
        kept = {e.name: e.leaf for e in entries if is_param(e) and kinds_for(e.natural, mode)}
    return Statistics(packed, layout, raw, raw_natural, kept, mode)


def _gated(entries: Sequence[Entry], mode: Mode, when: Any) -> tuple[Any, Layout]:
    """`build` under `lax.cond(when, ...)` (zeros otherwise); unconditional when `when` is None."""
    if when is None:
        return build(entries, mode, None)
    layouts: list[Layout] = []

    def compute() -> Any:
        packed, layout = build(entries, mode, None)
        layouts.append(layout)
        return packed

    shape = jax.eval_shape(compute)
    packed = jax.lax.cond(jnp.asarray(when, bool), compute, lambda: jnp.zeros(shape.shape, shape.dtype))
    return packed, layouts[0]


def is_param(e: Entry) -> bool:
    return any(c in PARAMETERS for c in e.natural)


def _usable_raw(leaf: Any) -> bool:
    return hasattr(leaf, "dtype") or isinstance(leaf, (int, float))


@functools.partial(jax.jit, static_argnames=("spec", "mode"))
def eager_statistics(
    leaves: list[Any], previous: dict[str, Any], spec: tuple[tuple[str, tuple[str, ...]], ...], mode: Mode
) -> tuple[Statistics, dict[str, Any]]:
    """The hook's one jitted function per statistics step: every statistic, `delta_l2` against
    the parameters of the last statistics step, and the copies that become the next ones."""
    entries = [Entry(name, natural, leaf) for (name, natural), leaf in zip(spec, leaves, strict=True)]
    packed, layout = build(entries, mode, previous)
    snapshot = {e.name: jnp.copy(e.leaf) for e in entries if e.name in previous}
    return Statistics(packed, layout, {}, (), {}, mode), snapshot


@jax.jit
def deltas(current: dict[str, Any], previous: dict[str, tuple[Any, Any]]) -> Statistics:
    """`delta_l2` of the parameters a `Statistics` kept, against those of the last statistics
    step (the hook's second small jitted function, for statistics computed in the user's jit)."""
    values = {name: tensor_statistics(leaf, ("delta_l2",), *previous[name]) for name, leaf in current.items()}
    tensors = {name: (_dtype(leaf), tuple(leaf.shape), ()) for name, leaf in current.items()}
    packed, layout = pack(values, tensors)
    return Statistics(packed, layout, {}, (), {}, Mode.TRAIN)


def merge(parts: list[Statistics]) -> dict[str, dict[str, float | np.ndarray]]:
    out: dict[str, dict[str, float | np.ndarray]] = {}
    for part in parts:
        for name, values in part.values().items():
            out.setdefault(name, {}).update(values)
    return out


__all__ = [
    "Entry", "Layout", "Statistics", "compute", "deltas", "eager_statistics", "kinds_for", "merge", "pack",
    "statistics", "unpack",
]  # fmt: skip
