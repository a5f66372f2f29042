"""The statistics of the default rules for the Keras callback and the TensorFlow tape hook.

Both hooks name a step's tensors the same way (`keras_layers`): `model_input_<i>`,
`labels_<i>`, `model_output_<i>` (also in `predictions`), `loss`, `<variable path>` and
`gradient/<variable path>`, and for each ReLU/tanh/sigmoid activation its input
(`<layer>_input_0` of an activation layer, `<layer>/activation_input_0` of a layer with a fused
activation). `StepStatistics` says which of them carry statistics (`wants`, decided once per
name: a compiled step is traced once) and asks `HostStatistics` for those of
`mldbg.store.statistics.DEFAULTS`, as the PyTorch hook records them (docs/statistics.md):

- weights and biases (the variables a layer declares trainable, `requires_grad` = whether they
  are now) and gradients, in TRAIN statistics steps;
- activation inputs, with the units on `channel_axis` (-1: Keras is channels-last);
- model inputs (per channel) and outputs (EVAL and PREDICT: also their `fingerprint`);
- the labels' and predictions' `samples`, and for a classification loss their class statistics.

The values are computed where the tensors live when the adapter gives a `DeviceStatistics`
that takes them (TensorFlow: `tf_statistics`; Keras on PyTorch: `keras_torch`; Keras on JAX:
`keras_jax`, and inside the traced step the adapters hand ready parts to `add_part`), else
from host copies reduced by the NumPy reference on the writer thread (`HostStatistics`).
Tensors are read only at statistics steps (every step of a mode's first `warmup`, then every
`every`-th); the loss is saved raw every step by the recorder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from mldbg.config import Mode
from mldbg.frameworks.host_statistics import EVERY, WARMUP, HostStatistics, Part, merge
from mldbg.record.recorder import Recorder
from mldbg.store import statistics as st

ACTIVATION_COLLECTIONS = ("relu_activations", "tanh_activations", "sigmoid_activations")
# the collections saved every step when statistics are on: a step that saves only these runs
# a lighter recording (the loss alone leaves the compiled step)
EVERY_STEP = frozenset({"losses", "scalars"})


def kinds_of(name: str, natural: tuple[str, ...], mode: Mode) -> tuple[str, ...] | None:
    """The statistics of `DEFAULTS` a tensor of the Keras/TF naming carries, or None."""
    if "gradients" in natural:
        return st.DEFAULTS["gradients"]
    if natural in (("weights",), ("biases",)):
        return st.DEFAULTS[natural[0]]
    for kind in ACTIVATION_COLLECTIONS:
        if natural == (kind,) and name.endswith("_input_0"):  # the activation's input
            return st.DEFAULTS[kind]
    if name.startswith("model_input_") and "inputs" in natural:
        return st.DEFAULTS["inputs"]
    if name.startswith("model_output_") and "outputs" in natural:
        return st.DEFAULTS["outputs"] + (() if mode == Mode.TRAIN else st.EVAL_DEFAULTS["outputs"])
    if name.startswith("labels_") and "labels" in natural:
        return ("samples",)
    return None


def looks_like_classes(labels: np.ndarray, predictions: np.ndarray) -> bool:
    """Without a known loss: integer labels, or 0/1 labels of the predictions' shape (one-hot)
    with more than one column."""
    if labels.dtype.kind in "iub":
        return True
    if labels.shape != predictions.shape or predictions.ndim < 2 or predictions.shape[-1] < 2:
        return False
    return bool(np.all((labels == 0) | (labels == 1)))


def integer(value: Any) -> bool:
    """Are the elements of a NumPy array or a framework tensor integers or booleans (class ids)?"""
    dt = value.dtype
    if hasattr(dt, "is_integer") and hasattr(dt, "is_bool"):  # tf.DType
        return bool(dt.is_integer or dt.is_bool)
    if hasattr(dt, "is_floating_point"):  # torch.dtype
        return not (dt.is_floating_point or dt.is_complex)
    return np.dtype(dt).kind in "iub"


class DeviceStatistics(Protocol):
    """A framework's statistics computed where its tensors live (`tf_statistics.TFStatistics`,
    the torch backend's `StatisticsBatch` behind `keras_backends`): a step's tensors are added,
    then `finish()` computes them in one batch and copies only the packed result."""

    def accepts(self, value: Any) -> bool: ...

    def add(
        self,
        name: str,
        value: Any,
        kinds: tuple[str, ...],
        natural: tuple[str, ...],
        unit_axis: int | None = None,
        requires_grad: bool | None = None,
    ) -> None: ...

    def add_classes(self, labels_name: str, preds_name: str) -> bool: ...

    def pending(self) -> bool: ...

    def finish(self) -> Part: ...


class StepStatistics:
    """One step's statistics of a Keras or TensorFlow hook: on the device when the adapter
    gives a `device` that accepts the tensor, else from host copies (`HostStatistics`).

    `classification()` says whether the model's loss is a classification loss (True/False) or
    is unknown (None: decided from the labels, `looks_like_classes`). `to_host` copies a
    framework tensor to NumPy (the host path). `routes` says, for each tensor of the last
    statistics step, "device" or "host"."""

    def __init__(
        self,
        recorder: Recorder,
        warmup: int = WARMUP,
        every: int = EVERY,
        channel_axis: int = -1,
        classification: Callable[[], bool | None] = lambda: None,
        device: DeviceStatistics | None = None,
        to_host: Callable[[Any], np.ndarray] = np.asarray,
    ):
        self.host = HostStatistics(recorder, warmup, every)
        self.recorder = recorder
        self.channel_axis = channel_axis
        self.classification = classification
        self.device = device
        self.to_host = to_host
        self.routes: dict[str, str] = {}
        self._wants: dict[tuple[str, tuple[str, ...]], bool] = {}
        self._pair: dict[str, Any] = {}  # labels_0 and model_output_0 of the open step
        self._parts: list[Part] = []  # computed inside a traced step (`add_part`)
        recorder.before_step_end.append(self.finish)

    @property
    def on(self) -> bool:
        return self.recorder.statistics and self.recorder.enabled

    def due(self) -> bool:
        """Is the open step a statistics step?"""
        return self.host.due()

    def light(self) -> bool:
        """Does the open step save only the loss and scalars (no statistics, no raw tensor)?"""
        rec = self.recorder
        return not self.due() and rec.collections.active <= EVERY_STEP

    def wants(self, name: str, natural: tuple[str, ...]) -> bool:
        """Could the tensor carry statistics at some step (the same answer every time)?"""
        key = (name, natural)
        known = self._wants.get(key)
        if known is None:
            known = self._wants[key] = self.on and kinds_of(name, natural, Mode.EVAL) is not None
        return known

    def add(self, name: str, natural: tuple[str, ...], value: Any, trainable: bool | None = None) -> None:
        """A tensor seen in the open step (a framework tensor or a host copy); kept when it is a
        statistics tensor and the step a statistics step. A weight or bias counts only in TRAIN
        and with its `trainable` flag (None: not a parameter, e.g. a BatchNorm moving mean)."""
        if not self.wants(name, natural) or not self.due():
            return
        kinds = self.kinds(name, natural, self.recorder.mode, trainable)
        if kinds is None:
            return
        flag = trainable if natural in (("weights",), ("biases",)) else None
        if self.device is not None and not isinstance(value, np.ndarray) and self.device.accepts(value):
            self.device.add(name, value, kinds, natural, self.channel_axis, flag)
            self.routes[name] = "device"
        else:
            array = value if isinstance(value, np.ndarray) else self.to_host(value)
            if array.dtype.name == "bfloat16":  # mixed precision: its float32 values are exact
                array = array.astype(np.float32)
            axis = self.channel_axis if array.ndim > 2 else None
            self.host.add(name, array, kinds, natural, flag, unit_axis=axis)
            self.routes[name] = "host"
            value = array
        if name in ("labels_0", "model_output_0"):
            self._pair[name] = value

    def kinds(
        self, name: str, natural: tuple[str, ...], mode: Mode, trainable: bool | None = None
    ) -> tuple[str, ...] | None:
        """The statistics a tensor carries at a statistics step of `mode`, or None. A weight or
        bias counts only in TRAIN and with its `trainable` flag; a gradient in TRAIN."""
        if not self.wants(name, natural):
            return None
        is_param = natural in (("weights",), ("biases",))
        if is_param and (trainable is None or mode != Mode.TRAIN):
            return None
        if "gradients" in natural and mode != Mode.TRAIN:
            return None
        return kinds_of(name, natural, mode)

    def pair(self, name: str, array: np.ndarray) -> None:
        """The labels (`labels_0`) or predictions (`model_output_0`) of the open step, for class
        statistics decided on the host (their other statistics come from elsewhere)."""
        self._pair[name] = array

    def add_part(self, part: Part) -> None:
        """Statistics computed elsewhere (inside a traced step), for the open step."""
        self._parts.append(part)
        for name in part[1]:
            self.routes[name] = "device"

    def finish(self) -> None:
        """The step ends: class statistics of the labels and predictions, then everything to the
        recorder (in one part: the device's packed values, the host's computed on the writer
        thread)."""
        pair, self._pair = self._pair, {}
        labels, preds = pair.get("labels_0"), pair.get("model_output_0")
        if labels is not None and preds is not None and labels.shape[:1] == preds.shape[:1]:
            classes = self.classification()
            if classes is None:  # integer labels are ids; else read the values (one batch)
                classes = integer(labels) or looks_like_classes(self._array(labels), self._array(preds))
            if classes:
                self._classes(labels, preds)
        parts, self._parts = self._parts, []
        if self.device is not None and self.device.pending():
            parts.append(self.device.finish())
        host = self.host.take()
        if host is not None:
            parts.append(host)
        if parts:
            self.recorder.save_statistics(*merge(parts))

    def _classes(self, labels: Any, preds: Any) -> None:
        on_device = [self.routes.get(n) == "device" for n in ("labels_0", "model_output_0")]
        if (
            all(on_device)
            and self.device is not None
            and self.device.add_classes("labels_0", "model_output_0")
        ):
            return
        self.host.add_classes(
            "labels_0", self._array(labels), "model_output_0", self._array(preds), samples=not any(on_device)
        )

    def _array(self, value: Any) -> np.ndarray:
        array = value if isinstance(value, np.ndarray) else self.to_host(value)
        return array.astype(np.float32) if array.dtype.name == "bfloat16" else array


__all__ = ["DeviceStatistics", "StepStatistics", "kinds_of", "looks_like_classes"]
