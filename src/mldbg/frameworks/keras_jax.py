"""Keras on the JAX backend: the default statistics computed by the JAX hook's device code
(`jax_reductions`, packed by `jax_statistics.pack`) where the arrays live.

Two places: the tensors of the compiled step (activations, gradients, inputs, outputs,
labels) inside the trace (`traced_statistics`: one packed vector leaves the step through one
`jax.debug.callback`), and the weights, which the hook reads from the step's state before the
step (`JaxStatistics`, a `keras_statistics.DeviceStatistics`: one jitted call per statistics
step, the previous values behind `delta_l2` kept on the device). Units are channels-last
(the channel axis moves to axis 1, where `jax_reductions` reads units). `sample_change` is not
computed (functional gradients cannot miss a reset: `jax_statistics.NOT_HERE`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mldbg.frameworks.host_statistics import Part, Values
from mldbg.frameworks.jax_reductions import class_statistics, tensor_statistics
from mldbg.frameworks.jax_statistics import Layout, pack, unpack
from mldbg.store import statistics as st
from mldbg.store.format import dtype_name

Entry = tuple[str, tuple[str, ...], tuple[str, ...], Any]  # name, natural, kinds, array
NOT_HERE = ("requires_grad", "sample_change")


def usable(value: Any) -> bool:
    dtype = getattr(value, "dtype", None)
    return dtype is not None and (
        jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer) or dtype == jnp.bool_
    )


def _described(x: Any) -> str:
    if x.dtype == jnp.bfloat16:
        return "F32"  # reduced as its float32 values, as the host path does
    return dtype_name(np.empty(0, np.dtype(x.dtype)))


def _one(x: Any, kinds: tuple[str, ...], unit_axis: int | None, previous: Any = None) -> dict[str, Any]:
    if x.dtype == jnp.bfloat16:
        x = x.astype(jnp.float32)
    wanted = tuple(k for k in kinds if st.Statistic.parse(k).name not in NOT_HERE)
    vectors = any(st.Statistic.parse(k).name in ("unit_active", "unit_outside", "channel_count",
                                                  "channel_mean", "channel_std") for k in wanted)  # fmt: skip
    if vectors and unit_axis is not None and x.ndim >= 4:  # channels-last: units on axis 1
        # a sample's fingerprint hashes its elements where they are: taken before the move
        hashed = tuple(k for k in wanted if st.Statistic.parse(k).name == "sample_fingerprints")
        out = tensor_statistics(x, hashed) if hashed else {}
        moved = jnp.moveaxis(x, unit_axis, 1)
        return {**tensor_statistics(moved, tuple(k for k in wanted if k not in hashed), previous), **out}
    return tensor_statistics(x, wanted, previous)


def traced_statistics(
    entries: Sequence[Entry], unit_axis: int | None, classes: tuple[str, str] | None
) -> tuple[Any, Layout]:
    """Inside the traced step: every statistic of `entries` packed in one uint32 vector."""
    values: dict[str, dict[str, Any]] = {}
    tensors: dict[str, tuple[str, tuple[int, ...], tuple[str, ...]]] = {}
    by_name = {}
    for name, natural, kinds, x in entries:
        values[name] = _one(x, kinds, unit_axis)
        tensors[name] = (_described(x), tuple(x.shape), natural)
        by_name[name] = x
    if classes is not None and all(n in by_name for n in classes):
        on_labels, on_preds = class_statistics(by_name[classes[0]], by_name[classes[1]])
        values[classes[0]].update(on_labels)
        values[classes[1]].update(on_preds)
    return pack(values, tensors)


def part(words: Any, layout: Layout, flags: dict[str, float] | None = None) -> Part:
    """A `Part` of a step from the packed words (already on the host: a few hundred)."""
    host = np.asarray(words)

    def values() -> Values:
        out = unpack(host, layout)
        for name, flag in (flags or {}).items():
            out.setdefault(name, {})["requires_grad"] = flag
        return out

    info = {name: (dtype, tuple(shape), natural) for name, dtype, shape, natural in layout.tensors}
    return values, info, host.nbytes


class JaxStatistics:
    """`DeviceStatistics` for concrete JAX arrays (the weights the Keras hook reads from the
    step's state): one jitted call per statistics step."""

    def __init__(self) -> None:
        self._entries: list[tuple[str, tuple[str, ...], int | None, Any, Any]] = []
        self._natural: dict[str, tuple[str, ...]] = {}
        self._flags: dict[str, float] = {}
        self._previous: dict[str, Any] = {}
        self._functions: dict[Any, Any] = {}
        self._layouts: dict[Any, Layout] = {}

    def accepts(self, value: Any) -> bool:
        return isinstance(value, jax.Array) and not isinstance(value, jax.core.Tracer) and usable(value)

    def add(
        self,
        name: str,
        value: Any,
        kinds: tuple[str, ...],
        natural: tuple[str, ...],
        unit_axis: int | None = None,
        requires_grad: bool | None = None,
    ) -> None:
        if name in self._natural:
            return
        x = jnp.copy(value)  # on the device: the step donates its state buffers
        prev = self._previous.get(name) if "delta_l2" in kinds else None
        if prev is not None and prev.shape != x.shape:
            prev = None
        if "delta_l2" in kinds:
            self._previous[name] = x
        self._entries.append((name, kinds, unit_axis, x, prev))
        self._natural[name] = natural
        if requires_grad is not None and "requires_grad" in kinds:
            self._flags[name] = float(requires_grad)

    def _compute(self, spec: tuple[Any, ...], leaves: list[Any], previous: list[Any]) -> Any:
        values, tensors = {}, {}
        for (name, kinds, axis, *_), x, prev in zip(spec, leaves, previous, strict=True):
            values[name] = _one(x, kinds, axis, prev)
            tensors[name] = (_described(x), tuple(x.shape), ())
        packed, self._layouts[spec] = pack(values, tensors)
        return packed

    def add_classes(self, labels_name: str, preds_name: str) -> bool:
        return False  # labels and predictions live in the traced step (`traced_statistics`)

    def pending(self) -> bool:
        return bool(self._entries)

    def finish(self) -> Part:
        entries, natural, flags = self._entries, self._natural, self._flags
        self._entries, self._natural, self._flags = [], {}, {}
        spec = tuple(
            (name, kinds, axis, x.shape, str(x.dtype), prev is not None)
            for name, kinds, axis, x, prev in entries
        )
        fn = self._functions.get(spec)
        if fn is None:
            fn = self._functions[spec] = jax.jit(functools.partial(self._compute, spec))
        packed = fn([e[3] for e in entries], [e[4] for e in entries])
        values, info, nbytes = part(packed, self._layouts[spec], flags)
        return values, {name: (d, s, natural[name]) for name, (d, s, _) in info.items()}, nbytes


__all__ = ["JaxStatistics", "part", "traced_statistics", "usable"]
