"""The statistics of the default rules from host (NumPy) copies, for an adapter whose tensors
reach the host anyway (MXNet's `asnumpy()`), and the fallback of the Keras and TensorFlow
hooks for what their device code does not take (`keras_statistics`); PyTorch, TensorFlow and
JAX compute them on the device instead (`torch_statistics`, `tf_statistics`, `jax_statistics`).

An adapter adds a step's tensors as NumPy copies (`add`, `add_classes`) while the step is
open and calls `finish()` before it ends; the values are computed by the NumPy reference
(`mldbg.store.statistics.compute`, `class_statistics`) later, on the writer thread, so the
training thread pays only the copies. Statistics steps: every step of each mode's first
`warmup` steps (the defects of initialization show at once), then every `every`-th.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from mldbg.errors import InvalidConfig
from mldbg.record.recorder import Recorder
from mldbg.store import statistics as st
from mldbg.store.format import dtype_name

Values = dict[str, dict[str, float | np.ndarray]]
# one path's share of a step: values (called on the writer thread), what each tensor is, bytes
Part = tuple[Callable[[], Values], dict[str, tuple[str, tuple[int, ...], tuple[str, ...]]], int]
WARMUP = 20  # steps of each mode with statistics at every step
EVERY = 10  # then every this many steps of the mode


class _Added(NamedTuple):
    array: np.ndarray
    kinds: tuple[str, ...]
    natural: tuple[str, ...]
    previous: np.ndarray | None  # a parameter's copy at the last statistics step (delta_l2)
    requires_grad: float | None  # a parameter's flag, known to the adapter, not in its values
    unit_axis: int | None = None  # the unit / channel axis (channels-last Keras: -1)


def cadence(warmup: object, every: object) -> tuple[int, int]:
    """A fixed cadence of statistics steps, checked: (warmup, every)."""
    if not (isinstance(warmup, int) and warmup >= 0 and isinstance(every, int) and every >= 1):
        raise InvalidConfig(
            f"statistics_warmup must be a number of steps >= 0 and statistics_every >= 1, "
            f"got {warmup!r} and {every!r}"
        )
    return warmup, every


def fixed_cadence_settings(settings: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[int, int]]:
    """The recorder's settings of a hook whose statistics steps follow a fixed cadence, and
    that cadence: `statistics_warmup` and `statistics_every` are the hook's own, and
    `statistics` None means on for the two lines (no `save_config`, no `include_collections`)."""
    out = dict(settings)
    steps = cadence(out.pop("statistics_warmup", WARMUP), out.pop("statistics_every", EVERY))
    if out.get("statistics") is None:
        out["statistics"] = out["save_config"] is None and out["include_collections"] is None
    return out, steps


class HostStatistics:
    """One step's statistics from host copies, handed to `recorder.save_statistics`."""

    def __init__(self, recorder: Recorder, warmup: int = WARMUP, every: int = EVERY):
        self.recorder = recorder
        self.warmup, self.every = cadence(warmup, every)
        self._added: dict[str, _Added] = {}
        self._classes: list[tuple[str, np.ndarray, str, np.ndarray]] = []
        self._previous: dict[str, np.ndarray] = {}

    def due(self) -> bool:
        """Is the open step a statistics step?"""
        rec = self.recorder
        if not (rec.statistics and rec.enabled and rec.in_step):
            return False
        return rec.mode_step < self.warmup or rec.mode_step % self.every == 0

    def add(
        self,
        name: str,
        array: np.ndarray,
        kinds: tuple[str, ...],
        natural: tuple[str, ...],
        requires_grad: bool | None = None,
        unit_axis: int | None = None,
    ) -> None:
        """Ask for statistics `kinds` of a host copy (its first one in the step). A parameter
        gives its `requires_grad`: its copy is kept for the next step's `delta_l2`; so is a
        gradient's for `sample_change` (the adapter hands a new copy each step). `unit_axis`:
        the axis of units and channels when it is not `statistics.feature_axis`'s (Keras: -1)."""
        if name in self._added or array.dtype.kind not in "biuf":
            return
        previous = None
        if requires_grad is not None or "sample_change" in kinds:
            previous, self._previous[name] = self._previous.get(name), array
        flag = None if requires_grad is None else float(requires_grad)
        self._added[name] = _Added(array, kinds, natural, previous, flag, unit_axis)

    def add_classes(
        self, labels_name: str, labels: np.ndarray, preds_name: str, preds: np.ndarray, samples: bool = True
    ) -> None:
        """Class statistics of a classification loss's labels and predictions (and their
        `samples`, unless another path computes those); both are records of their
        collections, so rules find them by it."""
        self._classes.append((labels_name, labels, preds_name, preds))
        if samples:
            self.add(labels_name, labels, ("samples",), ("labels",))
            self.add(preds_name, preds, ("samples",), ("predictions",))

    def take(self) -> Part | None:
        """The step's part so far (values later, what each tensor is, bytes), now cleared."""
        if not self._added and not self._classes:
            return None
        added, classes = self._added, self._classes
        self._added, self._classes = {}, []
        tensors = {name: (dtype_name(a.array), tuple(a.array.shape), a.natural) for name, a in added.items()}
        nbytes = sum(a.array.nbytes for a in added.values()) + sum(c[1].nbytes + c[3].nbytes for c in classes)
        return functools.partial(_compute, added, classes), tensors, nbytes

    def finish(self) -> None:
        """Hand the step's statistics to the recorder (computed on the writer thread)."""
        part = self.take()
        if part is not None:
            self.recorder.save_statistics(*part)


def merge(parts: list[Part]) -> Part:
    """The parts of one step (device and host paths) as one: the values of a tensor that two
    paths computed (a device's `samples`, the host's class statistics) are joined."""
    if len(parts) == 1:
        return parts[0]

    def values() -> Values:
        out: Values = {}
        for part in parts:
            for name, found in part[0]().items():
                out.setdefault(name, {}).update(found)
        return out

    tensors: dict[str, tuple[str, tuple[int, ...], tuple[str, ...]]] = {}
    for part in parts:
        for name, info in part[1].items():
            tensors.setdefault(name, info)
    return values, tensors, sum(part[2] for part in parts)


def _compute(added: dict[str, _Added], classes: list[tuple[str, np.ndarray, str, np.ndarray]]) -> Values:
    out: Values = {}
    for name, a in added.items():
        values = out[name] = st.compute(a.array, a.kinds, unit_axis=a.unit_axis, previous=a.previous)
        if a.requires_grad is not None and "requires_grad" in values:
            values["requires_grad"] = a.requires_grad
    for labels_name, labels, preds_name, preds in classes:
        on_labels, on_preds = st.class_statistics(labels, preds)
        out.setdefault(labels_name, {}).update(on_labels)
        out.setdefault(preds_name, {}).update(on_preds)
    return out


__all__ = ["EVERY", "WARMUP", "HostStatistics", "Part", "Values", "merge"]
