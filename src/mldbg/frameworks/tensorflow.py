"""TensorFlow adapter for custom training loops: `mldbg.tensorflow.Hook`.

Two lines: make the hook, and wrap the tape.

    hook = mldbg.tensorflow.Hook(out_dir)
    with hook.wrap_tape(tf.GradientTape()) as tape:      # a step starts here
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)  # recorded here; the step ends

`tape.gradient` records its target as `loss`, its sources as weights (by variable path) and
the gradients as `gradient/<weight>`. After `hook.register_model(model)` the outputs and
activations of the model's Keras layers in the step are recorded too. Works eagerly and
inside `tf.function`: there the host is asked once per step what it saves (a
`tf.numpy_function` returning four bools: the loss, the host's tensors, the raw tensors, the
statistics) and the tensors leave the graph only under `tf.cond`.

The two lines (no `save_config`, no `include_collections`) also record the statistics the
default rules read (`keras_statistics`: weights, biases, gradients, the loss every step; with
`register_model` the inputs of ReLU/tanh/sigmoid activations; with `hook.record(inputs=...,
labels=..., predictions=...)` those too), computed by TensorFlow where the tensors live
(`tf_statistics`: eagerly one compiled call per step, inside `tf.function` in the traced step;
one packed vector reaches the host): every
step of each mode's first `statistics_warmup` steps (20), then every `statistics_every`-th (10).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from mldbg.config import Mode
from mldbg.frameworks import tf_statistics
from mldbg.frameworks.base import Adapter
from mldbg.frameworks.host import array_source
from mldbg.frameworks.host_statistics import fixed_cadence_settings
from mldbg.frameworks.keras_layers import host_array, tap_layers, variable_name
from mldbg.frameworks.keras_statistics import EVERY_STEP, StepStatistics
from mldbg.frameworks.session import Worker
from mldbg.frameworks.tf_statistics import TFStatistics


class Hook(Adapter):
    """Records a custom TensorFlow loop: `hook.wrap_tape(tape)`, or `with hook.step(mode):`.

    Besides the keywords of every hook (API.md): `statistics` (None: on for the two lines;
    True: added to any configuration; False: off), `statistics_warmup` (20) and
    `statistics_every` (10): the steps of each mode whose statistics are recorded."""

    def _worker(self) -> Worker:
        return Worker.from_environment(f"tensorflow-{tf.__version__}")

    def _setup(self) -> None:
        self._model: Any = None
        self._state: str | None = None  # "eager" or "graph" while a step is open
        self._graph: list[tuple[str, tuple[str, ...], Any, bool]] = []  # tensors of a traced step, raw wanted
        self._graph_state = tf_statistics.GraphState()  # previous values of traced statistics
        self._mode = Mode.TRAIN
        self._saving: Any = None  # the traced "does this step save" bools: (the loss, everything)
        self._layers: contextlib.ExitStack | None = None

    def _recording(self) -> dict[str, Any]:
        settings, self._cadence = fixed_cadence_settings(self._settings)
        return settings

    def _open_run(self, out_dir: Any) -> None:
        super()._open_run(out_dir)
        self._stats = StepStatistics(self.recorder, *self._cadence, device=TFStatistics(), to_host=host_array)

    def register_model(self, model: Any) -> None:
        """Name weights by their path in `model`, and record its layers' outputs in each step."""
        self._model = model

    def wrap_tape(self, tape: tf.GradientTape) -> RecordingTape:
        """A tape whose `with` block starts a TRAIN step and whose `gradient` records and ends it."""
        return RecordingTape(self, tape)

    @contextlib.contextmanager
    def step(self, mode: Mode | str = Mode.TRAIN) -> Iterator[Hook]:
        """One step of `mode` (for eval or predict loops, or a loop without a tape)."""
        self.begin(Mode.parse(mode))
        try:
            yield self
        finally:
            self.end()

    # steps ------------------------------------------------------------------------------
    def begin(self, mode: Mode = Mode.TRAIN) -> None:
        self.end()
        if tf.executing_eagerly():
            self._state = "eager"
            if not (self._begin_host(mode) or self._stats.due()):
                return
        else:  # traced once; runs every call
            self._state, self._graph, self._mode = "graph", [], mode
            self._saving = tf.numpy_function(
                lambda: self._begin_graph(mode), [], [tf.bool] * 4, stateful=True
            )
        if self._model is not None and self._wants_layers():
            self._layers = contextlib.ExitStack()
            tap_layers(self._layers, self._model, self.put)

    def end(self) -> None:
        self._unpatch()
        state, self._state = self._state, None
        if state == "eager":
            self._end_host()
        if state != "graph":
            return
        graph, self._graph = self._graph, []
        every_step = [(n, c, t) for n, c, t, _ in graph if set(c) & EVERY_STEP]
        device, host = self._split([e for e in graph if not set(e[1]) & EVERY_STEP])
        raw = [(n, c, t) for n, c, t, wanted in graph if wanted and n in device and not set(c) & EVERY_STEP]
        done = [
            self._leave(every_step, self._saving[0]),
            self._leave(host, self._saving[1]),  # host statistics or raw
            self._leave(raw, self._saving[2], stats=False),  # raw only: their statistics are below
            self._statistics(device, self._saving[3]),
        ]
        with tf.control_dependencies(done):
            tf.numpy_function(self._end_host, [], tf.bool, stateful=True)

    def _split(
        self, graph: list[tuple[str, tuple[str, ...], Any, bool]]
    ) -> tuple[
        dict[str, tuple[tuple[str, ...], tuple[str, ...], Any]], list[tuple[str, tuple[str, ...], Any]]
    ]:
        """The traced tensors whose statistics the step computes on the device ({name: (natural,
        kinds, tensor)}), and the others (they leave for the host: raw, or host statistics).
        Labels and predictions whose class statistics need the host (float labels, integer
        predictions) stay together on the host path."""
        device: dict[str, tuple[tuple[str, ...], tuple[str, ...], Any]] = {}
        host = []
        mode = self._mode
        pair = {n: t for n, _, t, _ in graph if n in ("labels_0", "model_output_0")}
        classes_on_host = len(pair) == 2 and not (
            pair["labels_0"].dtype.is_integer
            and tf_statistics.class_count(
                pair["labels_0"].shape.as_list(),
                pair["model_output_0"].dtype,
                pair["model_output_0"].shape.as_list(),
            )
            is not None
        )
        for name, natural, t, _ in graph:
            trainable = True if natural in (("weights",), ("biases",)) else None
            kinds = self._stats.kinds(name, natural, mode, trainable) if self._stats.on else None
            if kinds is None or not tf_statistics.usable(t) or (classes_on_host and name in pair):
                host.append((name, natural, t))
            else:
                device[name] = (natural, kinds, t)
        return device, host

    @tf.autograph.experimental.do_not_convert
    def _statistics(self, device: dict[str, tuple[tuple[str, ...], tuple[str, ...], Any]], when: Any) -> Any:
        """The statistics of `device` computed inside the step where `when` holds at run time:
        one packed vector leaves the graph."""
        if not device:
            return tf.constant(True)
        pair = ("labels_0", "model_output_0")
        classes = pair if all(n in device for n in pair) else None
        entries = [(name, kinds, t) for name, (_, kinds, t) in device.items()]
        slots: list[Any] = []  # the layout, known once traced
        info = {
            name: (tf_statistics.described_name(t.dtype.name), tuple(t.shape.as_list()), natural)
            for name, (natural, _, t) in device.items()
        }
        flags = {name: 1.0 for name, (natural, kinds, _) in device.items() if "requires_grad" in kinds}

        def deliver(packed: np.ndarray) -> np.bool_:
            def values() -> dict[str, dict[str, Any]]:
                out = tf_statistics.unpack(packed, slots[0])
                for name, flag in flags.items():
                    out.setdefault(name, {})["requires_grad"] = flag  # a source of the tape: trains
                return out

            self._stats.add_part((values, info, packed.nbytes))
            return np.bool_(True)

        def compute() -> Any:
            packed, layout = tf_statistics.graph_statistics(entries, self._graph_state, None, classes)
            slots[:] = [layout]
            return tf.numpy_function(deliver, [packed], tf.bool, stateful=True)

        with tf.control_dependencies([t for _, _, t in entries]):
            return tf.cond(tf.reshape(when, []), compute, lambda: tf.constant(True))

    def _leave(self, graph: list[tuple[str, tuple[str, ...], Any]], when: Any, stats: bool = True) -> Any:
        """The traced tensors go to the host, where `when` holds at run time (`stats`: also to
        the host statistics)."""
        meta = [(n, c) for n, c, _ in graph]
        tensors = [t for _, _, t in graph]
        if not tensors:
            return tf.constant(True)

        def save(*values: Any) -> np.bool_:
            for (name, natural), value in zip(meta, values, strict=True):
                self._save_host(name, natural, value, stats)
            return np.bool_(True)

        with tf.control_dependencies(tensors):
            return tf.cond(
                tf.reshape(when, []),
                lambda: tf.numpy_function(save, tensors, tf.bool, stateful=True),
                lambda: tf.constant(True),
            )

    def _begin_graph(self, mode: Mode) -> tuple[np.bool_, ...]:
        """At the step beginning now: does the loss leave the graph, do the host's tensors (raw
        or host statistics), do the raw tensors with device statistics, are statistics due."""
        saving = self._begin_host(mode)
        due = self._stats.due()
        raw = saving and not self.recorder.collections.active <= EVERY_STEP
        return np.bool_(saving), np.bool_(due or raw), np.bool_(raw), np.bool_(due)

    def _begin_host(self, mode: Mode) -> bool:
        saving = self.recorder.start_step(mode)
        self.timeline.step_begin(self.recorder.step, int(mode))
        return saving

    def _end_host(self) -> np.bool_:
        self.timeline.step_end()
        self.recorder.end_step()
        return np.bool_(True)

    def record(self, variables: Any = None, grads: Any = None, loss: Any = None, **named: Any) -> None:
        """Record tensors in the open step: weights, their gradients, the loss, and
        `inputs`, `labels`, `predictions` (any other keyword: under its own name)."""
        var_list = tf.nest.flatten(variables) if variables is not None else []
        for v in var_list:
            own: tuple[str, ...] = ("biases",) if self._name(v).endswith(("bias", "beta")) else ("weights",)
            self.put(self._name(v), v, own)
        for v, g in zip(var_list, tf.nest.flatten(grads) if grads is not None else [], strict=False):
            self.put(f"gradient/{self._name(v)}", g, ("gradients",))
        if loss is not None:
            self.put("loss", loss, ("losses",))
        kinds = {"inputs": ("model_input", ("inputs",)), "labels": ("labels", ("labels",)),
                 "predictions": ("model_output", ("outputs", "predictions"))}  # fmt: skip
        for key, value in named.items():
            prefix, natural = kinds.get(key, (key, ()))
            flat = tf.nest.flatten(value)
            for i, t in enumerate(flat):
                self.put(key if key not in kinds and len(flat) == 1 else f"{prefix}_{i}", t, natural)

    def put(self, name: str, value: Any, natural: tuple[str, ...]) -> None:
        """Save one tensor in the open step (eagerly now; traced: under the step's tf.cond)."""
        if value is None or self._state is None:
            return
        if self._state == "eager":
            if self.recorder.saving or self._stats.due():
                self._save_host(name, natural, value)
            return
        cols = self.recorder.collections
        wanted = any(c.name in cols.included for c in cols.members(name, natural)) or self._stats.wants(
            name, natural
        )
        if wanted and not any(e[0] == name for e in self._graph):
            value = tf.convert_to_tensor(value.value() if isinstance(value, tf.Variable) else value)
            raw = any(c.name in cols.included for c in cols.members(name, natural))
            self._graph.append((name, natural, value, raw))

    # helpers ----------------------------------------------------------------------------
    def _save_host(self, name: str, natural: tuple[str, ...], value: Any, stats: bool = True) -> None:
        """Save a tensor raw where its collections say so, and hand it to the statistics (a
        weight or bias is a source of the tape: trainable)."""
        rec = self.recorder
        plan = None if rec.has(name) else rec.plan(name, natural)
        stats = stats and self._stats.wants(name, natural) and self._stats.due()
        if plan is None and not stats:
            return
        if isinstance(value, tf.IndexedSlices):
            value = tf.convert_to_tensor(value)
        if stats:  # on the device when the tensor is there (eager), else from a host copy
            self._stats.add(name, natural, value, trainable=natural in (("weights",), ("biases",)) or None)
        if plan is not None:
            array = value if isinstance(value, np.ndarray) else host_array(value)
            source = array_source(array)
            if source is not None:
                rec.save(name, source[0], plan, source[1])

    def _name(self, v: Any) -> str:
        if self._model is not None and hasattr(v, "path"):
            return variable_name(v, self._model.name)
        name = str(getattr(v, "path", None) or getattr(v, "name", None) or "tensor")
        return name[:-2] if name.endswith(":0") else name

    def _wants_layers(self) -> bool:
        if self._stats.on:
            return True
        return any(self.recorder.collections.may_save(c) for c in
                   ("outputs", "relu_activations", "tanh_activations", "sigmoid_activations"))  # fmt: skip

    def _unpatch(self) -> None:
        if self._layers is not None:
            self._layers.close()
            self._layers = None

    def _release(self) -> None:
        self._unpatch()


class RecordingTape:
    """A `tf.GradientTape` that opens a step on entry and records in `gradient`."""

    def __init__(self, hook: Hook, tape: tf.GradientTape):
        self._hook = hook
        self._tape = tape

    def __enter__(self) -> RecordingTape:
        self._hook.begin(Mode.TRAIN)
        self._tape.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        self._hook._unpatch()  # the forward pass is over
        return self._tape.__exit__(*exc)

    def gradient(self, target: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
        grads = self._tape.gradient(target, sources, *args, **kwargs)
        scalar = isinstance(target, (tf.Tensor, tf.Variable)) and target.shape.num_elements() == 1
        self._hook.record(variables=sources, grads=grads, loss=target if scalar else None)
        self._hook.end()
        return grads

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tape, name)


__all__ = ["Hook", "RecordingTape"]
