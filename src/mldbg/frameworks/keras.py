"""Keras 3 adapter: `mldbg.keras.Hook`, a `keras.callbacks.Callback` for every backend.

A step is one call of the model's compiled train, test or predict function: one batch of
`fit`, `evaluate` or `predict` (with `steps_per_execution=k`, the last of k batches). On steps
that save nothing the model's own function runs untouched. On saving steps the hook runs a
recording variant of it, compiled once by the backend from the model's own
`train_step`/`test_step`/`predict_step` with the layers, `compute_loss` and `optimizer.apply`
wrapped while it is traced. Weights are read before the step (from the variables, or from
the JAX state); gradients come from `optimizer.apply`, the loss from `compute_loss`, layer
outputs from each layer's `call`. They leave the compiled step as extra outputs
(TensorFlow), through `jax.debug.callback` (JAX), or directly (PyTorch runs eagerly).

The two lines (`Hook(out_dir)` as a callback, no `save_config`, no `include_collections`)
also record the statistics the default rules read (`keras_statistics`), computed by the
backend where the tensors live (`device_statistics`; only packed results reach the host): every step of each mode's first `statistics_warmup` steps (20),
then every `statistics_every`-th (10). The loss is saved every step; a step that saves only
the loss runs a lighter recording variant from which nothing else leaves the compiled step.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import keras
import numpy as np

from mldbg.config import Mode
from mldbg.frameworks.base import Adapter
from mldbg.frameworks.host import array_source
from mldbg.frameworks.host_statistics import fixed_cadence_settings
from mldbg.frameworks.keras_layers import (
    host_array,
    input_rescaling,
    patched,
    put_each,
    tap,
    tap_layers,
    variable_name,
)
from mldbg.frameworks.keras_statistics import EVERY_STEP, DeviceStatistics, StepStatistics
from mldbg.frameworks.session import Worker

MODES = {"train": Mode.TRAIN, "test": Mode.EVAL, "predict": Mode.PREDICT}
CLASSIFICATION_LOSSES = ("sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy",
                         "categorical_focal_crossentropy", "binary_focal_crossentropy", "categorical_hinge",
                         "hinge", "squared_hinge")  # fmt: skip


def device_statistics(backend: str) -> DeviceStatistics | None:
    """The statistics of the backend's own tensors where they live: TensorFlow's compiled
    `tf_statistics`, PyTorch's batched `torch_statistics`, JAX's `jax_reductions` (for the
    weights read before the step; the traced tensors: `keras_jax.traced_statistics`)."""
    if backend == "tensorflow":
        from mldbg.frameworks.tf_statistics import TFStatistics

        return TFStatistics()
    if backend == "torch":
        from mldbg.frameworks.keras_torch import TorchStatistics

        return TorchStatistics()
    if backend == "jax":
        from mldbg.frameworks.keras_jax import JaxStatistics

        return JaxStatistics()
    return None


INPUTS_RESCALED = "inputs_rescaled/"  # a model rescales its raw input first (`input_rescaling`)


def _keeps_best(callbacks: Any) -> bool:
    """Whether the `CallbackList` that runs the hook (Keras hands a callback no other way to
    its siblings) stops the fit early (`EarlyStopping`) or keeps the best model by a monitored
    metric (`ModelCheckpoint(save_best_only=True)`). False where it cannot be told."""
    siblings = getattr(callbacks, "callbacks", None)
    if not isinstance(siblings, list):
        return False
    return any(
        isinstance(c, keras.callbacks.EarlyStopping)
        or (isinstance(c, keras.callbacks.ModelCheckpoint) and getattr(c, "save_best_only", False))
        for c in siblings
    )


class Hook(Adapter, keras.callbacks.Callback):
    """Records a Keras model in `fit`, `evaluate` and `predict`: pass it in `callbacks=[hook]`.

    Besides the keywords of every hook (API.md): `statistics` (None: on for the two lines;
    True: added to any configuration; False: off), `statistics_warmup` (20) and
    `statistics_every` (10): the steps of each mode whose statistics are recorded."""

    def _worker(self) -> Worker:
        return Worker.from_environment(f"keras-{keras.__version__}-{keras.backend.backend()}")

    def _setup(self) -> None:
        self.backend = keras.backend.backend()
        self._variants: dict[tuple[str, bool], Callable[..., Any]] = {}  # (kind, light) -> recording function
        self._light = False  # the variant traced or run now records the loss and scalars only
        self._seen: set[str] | None = None  # names captured in the step being traced or run
        self._natural: dict[str, tuple[str, ...]] = {}
        self._extras: dict[str, Any] = {}  # TensorFlow: tensors that leave the traced step
        self._wanted: dict[tuple[str, tuple[str, ...], bool], bool] = {}
        self._parameters: dict[int, bool] = {}  # id of a variable a layer declares trainable -> trainable now
        self._traced_labels: dict[str, Any] = {}  # JAX: the step's traced labels (class statistics)
        self._kind = "train"
        self._raw: Any = None  # JAX: the traced "does this step save raw tensors"
        self._logs: dict[str, dict[str, Any]] = {}  # kind -> Keras' logs of its last recorded step
        self._graph: Any = None  # TensorFlow: the graph the recording step is traced in
        self._unreachable: set[str] = set()  # TensorFlow: names seen only in a graph the step cannot read
        self._known: set[int] = set()  # ids of the model's variables that existed before the step
        self._pre_saved: set[str] = set()  # the variables read before the step being run
        self._flags: dict[str, bool | None] = {}  # TensorFlow: weights read in the step -> trainable
        self._rescaling: tuple[float, float] | None = None  # `input_rescaling`, once read
        self._rescaling_read = False
        self._early_stopping = False  # the fit stops early or keeps its best model (`_keeps_best`)

    def _recording(self) -> dict[str, Any]:
        settings, self._cadence = fixed_cadence_settings(self._settings)
        return settings

    def _open_run(self, out_dir: Any) -> None:
        super()._open_run(out_dir)
        axis = -1 if keras.config.image_data_format() == "channels_last" else 1
        self._stats = StepStatistics(self.recorder, *self._cadence, channel_axis=axis,
                                     classification=self._classification, device=device_statistics(self.backend),
                                     to_host=host_array)  # fmt: skip

    # fit/evaluate/predict made their compiled function just before these events
    def on_train_begin(self, logs: Any = None) -> None:
        self._early_stopping = _keeps_best(sys._getframe(1).f_locals.get("self"))
        self._attach("train")

    def on_test_begin(self, logs: Any = None) -> None:
        self._save_logs("train")  # fit's validation: the epoch's TRAIN steps are over
        self._attach("test")

    def on_test_end(self, logs: Any = None) -> None:
        self._save_logs("test")

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self._save_logs("train")

    def on_predict_begin(self, logs: Any = None) -> None:
        self._attach("predict")

    def on_train_end(self, logs: Any = None) -> None:
        self._save_logs("train")
        self.recorder.flush()

    def _to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(keras.ops.convert_to_numpy(value))

    # steps ------------------------------------------------------------------------------
    def _attach(self, kind: str) -> None:
        model = self._model  # not self.model: on JAX that forces a state sync
        normal = getattr(model, f"{kind}_function", None)
        if normal is None or getattr(normal, "_mldbg_hook", None) is self:
            return
        self._variants.pop((kind, False), None)  # a new compiled function: its variants are stale
        self._variants.pop((kind, True), None)
        mode, timeline = MODES[kind], self.timeline

        def function(*args: Any) -> Any:
            rec = self.recorder
            rec.start_step(mode)
            timeline.step_begin(rec.step, int(mode))
            stats = self._stats.due()
            out = self._record(kind, args, self._stats.light()) if rec.saving or stats else normal(*args)
            timeline.step_end()
            rec.end_step()
            return out

        function._mldbg_hook = self  # type: ignore[attr-defined]
        setattr(model, f"{kind}_function", function)

    def _record(self, kind: str, args: tuple[Any, ...], light: bool = False) -> Any:
        model = self._model
        self._light = light
        self._pre_saved = set()
        if not light:
            self._save_variables(kind, args)
        variant = self._variants.get((kind, light))
        if variant is None:  # the backend compiles the wrapped step, once per flavour
            dispatcher = getattr(model, f"{kind}_function")
            with contextlib.ExitStack() as stack:
                stack.enter_context(
                    patched(model, f"{kind}_step", self._step(kind, getattr(model, f"{kind}_step")))
                )
                if (
                    self.backend == "torch"
                ):  # the wrappers run eagerly: torch.compile would recompile each step
                    stack.enter_context(patched(model, "_jit_compile", False))
                getattr(model, f"make_{kind}_function")(force=True)
                variant = self._variants[(kind, light)] = getattr(model, f"{kind}_function")
            setattr(model, f"{kind}_function", dispatcher)
        self._seen = set()
        try:
            # the taps go on inside the step (`_step`): when the backend traces it (TF, JAX:
            # once per flavour and input signature) or runs it (torch); a run of a traced
            # variant touches no layer
            with patched(model, f"{kind}_step", self._step(kind, getattr(model, f"{kind}_step"))):
                out = variant(*args)
            if self.backend == "tensorflow":
                out, extras = out
                for name, value in extras.items():
                    if name not in self._pre_saved:  # else read before the step already
                        self._save_host(name, self._natural[name], value, self._flags.get(name))
            elif self.backend == "jax":
                import jax

                jax.block_until_ready(out)
                jax.effects_barrier()  # every debug callback of the step has run
        finally:
            self._seen = None
        logs = out[0] if self.backend == "jax" else out
        if kind != "predict" and isinstance(logs, dict):
            self._logs[kind] = logs
        return out

    def _step(self, kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any) -> Any:
            if self._seen is None:
                return original(*args)
            self._seen, self._extras, self._traced_labels = (
                set(),
                {},
                {},
            )  # tf.function may trace a step twice
            self._kind, self._raw = kind, None
            if self.backend == "tensorflow":
                import tensorflow as tf

                self._graph = tf.compat.v1.get_default_graph()
            elif self.backend == "jax":  # does the step save raw tensors: asked at run time
                import jax

                self._raw = jax.pure_callback(
                    lambda: np.bool_(self.recorder.saving), jax.ShapeDtypeStruct((), np.bool_)
                )
            data = args[-1]
            if isinstance(data, (list, tuple)) and len(data) > 3:  # a custom step's own layout
                data = (data[0],)
            x, y, _ = keras.utils.unpack_x_y_sample_weight(data)
            put_each(self._put, "model_input", x, ("inputs",))
            if kind != "predict" and y is not None:
                put_each(self._put, "labels", y, ("labels",))
            with contextlib.ExitStack() as stack:
                self._tap_step(stack, kind)
                out = original(*args)
            return (out, self._extras) if self.backend == "tensorflow" else out

        return step

    def _tap_step(self, stack: contextlib.ExitStack, kind: str) -> None:
        """The taps of a step being traced or run: the model's output, every layer, the loss,
        the optimizer's gradients (and, on TensorFlow, the variables the step creates)."""
        model = self._model
        tap(
            stack,
            model,
            "call",
            lambda a, out: put_each(self._put, "model_output", out, ("outputs", "predictions")),
        )
        tap_layers(stack, model, self._put)
        if kind != "predict":
            # `compute_loss` itself: Keras' `_compute_loss` calls it, and so does a custom `train_step`
            tap(stack, model, "compute_loss", lambda a, loss: self._put("loss", loss, ("losses",)))
        if kind == "train" and getattr(model, "optimizer", None) is not None:
            opt = getattr(model.optimizer, "inner_optimizer", model.optimizer)  # unscaled gradients
            tap(stack, opt, "apply", partial(self._gradients, opt))
            if self.backend == "tensorflow":
                self._read_new_weights_first(stack, opt)

    def _read_new_weights_first(self, stack: contextlib.ExitStack, opt: Any) -> None:
        """TensorFlow builds a subclassed model while it traces the first step, after the hook
        read the weights before the step: the variables it creates are read inside the step,
        before the optimizer writes them, and leave it as extra outputs (ignored on the later
        steps, whose weights are read before the step)."""
        apply = opt.apply

        def read_then_apply(*args: Any, **kwargs: Any) -> Any:
            if self._seen is not None:
                import tensorflow as tf

                model, parameters = self._model, None
                for v in model.weights:
                    if id(v) in self._known:
                        continue
                    parameters = self._declared_trainable() if parameters is None else parameters
                    name = variable_name(v, model.name)
                    self._flags[name] = parameters.get(id(v))
                    natural = ("biases",) if v.name in ("bias", "beta") else ("weights",)
                    self._put(name, tf.identity(v.value), natural)
            return apply(*args, **kwargs)

        stack.enter_context(patched(opt, "apply", read_then_apply))

    def _gradients(self, opt: Any, args: tuple[Any, ...], out: Any) -> None:
        grads = args[0]
        variables = args[1] if len(args) > 1 and args[1] is not None else opt._trainable_variables
        for g, v in zip(grads, variables, strict=False):
            self._put(f"gradient/{variable_name(v, self._model.name)}", g, ("gradients",))

    # saving -----------------------------------------------------------------------------
    def _put(self, name: str, value: Any, natural: tuple[str, ...]) -> None:
        """A tensor seen inside the recording step (at trace time on TF and JAX)."""
        seen = self._seen
        if seen is None or value is None or name in seen or isinstance(value, keras.KerasTensor):
            return
        light = self._light
        wanted = self._wanted.get((name, natural, light))
        if wanted is None:  # could it be saved at any step? the variant is compiled once
            cols = self.recorder.collections
            included = [c.name for c in cols.members(name, natural) if c.name in cols.included]
            wanted = self._wanted[(name, natural, light)] = (
                any(c in EVERY_STEP for c in included)
                if light
                else bool(included) or self._stats.wants(name, natural)
            )
        if not wanted:
            return
        if self.backend == "tensorflow" and not self._reachable(name, value):
            return
        seen.add(name)
        self._natural[name] = natural
        if self.backend == "tensorflow":
            self._extras[name] = value
        elif self.backend == "jax":
            self._put_jax(name, natural, value)
        else:
            self._save_host(name, natural, value)

    def _reachable(self, name: str, value: Any) -> bool:
        """Can the traced step hand this TensorFlow tensor out? Not one made in a graph nested
        in the step's (a `tf.while_loop` or `tf.cond` body: a layer called inside a loop, such
        as a recurrent cell after its first time step, or inside a nested `tf.function`): the
        step could not read it and TensorFlow would raise `InaccessibleTensorError`. Such a
        tensor is skipped, with one warning per hook naming it; its name stays free for a
        later call the step can read (an eager tensor has no graph and is always fine)."""
        graph = getattr(value, "graph", None)
        if graph is None or self._graph is None:
            return True
        outer = self._graph
        while outer is not None:  # the step's graph, or one it is traced inside
            if graph is outer:
                return True
            outer = getattr(outer, "outer_graph", None)
        if not self._unreachable:
            warnings.warn(
                f"mldbg: {name} is not recorded: it is computed inside a graph nested in the traced "
                f"Keras step ({getattr(graph, 'name', graph)}), which the step cannot read; any other "
                "such tensor is skipped too. The training is unchanged.",
                UserWarning,
                stacklevel=2,
            )
        self._unreachable.add(name)
        return False

    def _put_jax(self, name: str, natural: tuple[str, ...], value: Any) -> None:
        """A traced JAX tensor: its statistics are computed where it is seen, inside the step
        (often inside the gradient's trace, which it cannot leave), and only their packed
        vector goes to the host; the tensor leaves raw only when its collections may save it,
        under a `lax.cond` on the host's answer (`_raw`)."""
        import jax

        from mldbg.frameworks import keras_jax

        cols = self.recorder.collections
        raw = any(c.name in cols.included for c in cols.members(name, natural))
        kinds = self._stats.kinds(name, natural, MODES[self._kind]) if not self._light else None
        if kinds is not None and keras_jax.usable(value):
            entries = [(name, natural, kinds, value)]
            classes = None
            if name == "model_output_0" and "labels_0" in self._traced_labels:
                labels = self._traced_labels["labels_0"]
                if self._jax_classes(labels, value):
                    entries.append(("labels_0", ("labels",), (), labels))
                    classes = ("labels_0", "model_output_0")
                elif (
                    self._classification() is not False
                ):  # float labels, integer predictions: the host decides
                    jax.debug.callback(self._host_pair, labels, value)
            if name == "labels_0":
                self._traced_labels[name] = value
            packed, layout = keras_jax.traced_statistics(entries, self._stats.channel_axis, classes)

            def deliver(words: Any) -> None:
                if self._stats.due():
                    self._stats.add_part(keras_jax.part(words, layout))

            jax.debug.callback(deliver, packed)
            if not raw:
                return
            save = partial(self._save_host, name, natural, stats=False)
        else:
            save = partial(self._save_host, name, natural)
        if self._raw is None:
            jax.debug.callback(save, value)
        else:
            jax.lax.cond(self._raw, lambda v: jax.debug.callback(save, v), lambda v: None, value)

    def _jax_classes(self, labels: Any, preds: Any) -> bool:
        """Class statistics inside the step: integer labels, float predictions, a
        classification loss (or an unknown one)."""
        import jax.numpy as jnp

        if self._classification() is False:
            return False
        return bool(jnp.issubdtype(labels.dtype, jnp.integer) and jnp.issubdtype(preds.dtype, jnp.floating))

    def _host_pair(self, labels: Any, preds: Any) -> None:
        if self._stats.due():
            self._stats.pair("labels_0", host_array(labels))
            self._stats.pair("model_output_0", host_array(preds))

    def _save_host(
        self,
        name: str,
        natural: tuple[str, ...],
        value: Any,
        trainable: bool | None = None,
        stats: bool = True,
        kinds: tuple[str, ...] | None = None,
    ) -> None:
        """Save a tensor raw where its collections say so, and hand it to the statistics
        (`kinds`: these statistics of a host array, whatever its collections)."""
        rec = self.recorder
        plan = rec.plan(name, natural)
        if rec.has(name):
            plan = None
        wanted = self._stats.on if kinds is not None else self._stats.wants(name, natural)
        stats = stats and wanted and self._stats.due()
        if plan is None and not stats:
            return
        if stats and kinds is not None:
            self._stats.host.add(name, value, kinds, natural)
        elif stats:  # on the device when the backend's statistics take the tensor, else a host copy
            self._stats.add(name, natural, value, trainable)
        if plan is not None:
            array = host_array(value)
            source = array_source(array)
            if source is not None:
                rec.save(name, source[0], plan, source[1])

    def _classification(self) -> bool | None:
        """Is the compiled loss a classification loss? None when it cannot be told."""
        loss = getattr(self._model, "loss", None)
        if isinstance(loss, (list, tuple, dict)):
            return None
        name = loss if isinstance(loss, str) else getattr(loss, "name", None)
        if name is None:
            fn = getattr(loss, "fn", None)
            name = getattr(fn, "__name__", None)
        if not isinstance(name, str):
            return None
        return name in CLASSIFICATION_LOSSES

    def _save_variables(self, kind: str, args: tuple[Any, ...]) -> None:
        """Weights and optimizer state as the step's forward pass sees them."""
        model, opt = self._model, getattr(self._model, "optimizer", None)
        if self.backend == "jax":  # the values live in the state argument (donated: copy now)
            state = args[0]
            groups = [(model.trainable_variables, state[0]), (model.non_trainable_variables, state[1])]
            optimizer = (opt.variables, state[2]) if kind == "train" and opt is not None else None
        else:
            groups = [(model.weights, [v.value for v in model.weights])]
            optimizer = (opt.variables, [v.value for v in opt.variables]) if kind == "train" and opt else None
        parameters = self._declared_trainable()
        self._known = {id(v) for v in model.weights}
        for variables, values in groups:
            for v, value in zip(variables, values, strict=True):
                natural = ("biases",) if v.name in ("bias", "beta") else ("weights",)
                name = variable_name(v, model.name)
                self._pre_saved.add(name)
                self._save_host(name, natural, value, parameters.get(id(v)))
        if optimizer is not None:
            for v, value in zip(*optimizer, strict=True):
                self._save_host(f"optimizer/{v.path}", ("optimizer_variables",), value)
        if kind == "train" and self._stats.due():
            self._save_rescaling()
            if optimizer is not None:
                self._save_learning_rate(opt, dict(zip(map(id, optimizer[0]), optimizer[1], strict=True)))
            if self._early_stopping:  # the rule `overfit` reads it
                self._save_host("early_stopping", (), np.ones(1, dtype=np.float32), kinds=("sum",))

    def _save_learning_rate(self, opt: Any, values: dict[int, Any]) -> None:
        """`learning_rate/<model's name>` (`sum`: the number) at TRAIN statistics steps where
        the optimizer applies its update, as the PyTorch hook records each model's: the loss
        rules read a warm-up from it, and a new phase where a model is first trained after
        another (a student after its teacher, the next fold's model: Keras names each model
        apart). The value as Keras computes it (`_get_current_learning_rate`): the rate's
        variable, or its schedule at the iteration counter, both as the step reads them
        (`values`: the optimizer's variables by id, JAX's from the step's state). A micro-step
        of `gradient_accumulation_steps` applies no update and records none."""
        inner = getattr(opt, "inner_optimizer", opt)  # a LossScaleOptimizer's rate is its inner one's
        counter = getattr(inner, "_iterations", None)
        source = getattr(inner, "_learning_rate", None)
        if counter is None or source is None:
            return
        if id(counter) not in values or (isinstance(source, keras.Variable) and id(source) not in values):
            return  # not a variable of the optimizer's: its value in this step is not known
        iterations = int(np.asarray(keras.ops.convert_to_numpy(values[id(counter)])))
        every = getattr(inner, "gradient_accumulation_steps", None)
        if every and (iterations + 1) % every:
            return
        if isinstance(source, keras.Variable):
            rate: Any = values[id(source)]
        elif isinstance(source, keras.optimizers.schedules.LearningRateSchedule):
            rate = source(iterations)
        else:  # a callable of no arguments
            rate = source()
        array = np.asarray(keras.ops.convert_to_numpy(rate), dtype=np.float64)
        if array.size == 1:
            name = f"learning_rate/{self._model.name}"
            self._save_host(name, (), array.reshape(1).astype(np.float32), kinds=("sum",))

    def _save_rescaling(self) -> None:
        """`inputs_rescaled/model/scale` and `.../offset` (`sum`: the number) at TRAIN statistics
        steps, where what the model's first learned layer sees of its input is known
        (`input_rescaling`: `Rescaling(1 / 255)` on pixels, or nothing that changes its scale):
        `not_normalized_data` judges the input as that layer sees it."""
        if not self._rescaling_read:  # once: the model is built by its first step
            self._rescaling, self._rescaling_read = input_rescaling(self._model), True
        if self._rescaling is not None:
            for part, value in zip(("scale", "offset"), self._rescaling, strict=True):
                self._save_host(f"{INPUTS_RESCALED}model/{part}", (), np.array([value]), kinds=("sum",))

    def _declared_trainable(self) -> dict[int, bool]:
        """The variables the layers declare trainable (kernels, biases; not a BatchNorm's moving
        statistics), by id, with whether they are trainable now (a frozen layer: False)."""
        out: dict[int, bool] = {}
        for layer in self._model._flatten_layers(include_self=True, recursive=True):
            for v in getattr(layer, "_trainable_variables", ()):
                out[id(v)] = bool(v.trainable) and bool(layer.trainable)
        return out

    def _save_logs(self, kind: str) -> None:
        """Keras' own logs as `metrics/<name>` scalars, once an epoch or an evaluation pass
        is over, at its last step: the means over it, as the progress bar ends. Saved at each
        step, these running means restart every epoch and the loss rules, which read scalars
        named like "loss", would judge that sawtooth as a loss series (the per-batch loss is
        `loss`)."""
        logs = self._logs.pop(kind, None)
        if not logs or self.recorder.in_step:
            return
        for key, value in logs.items():
            array = keras.ops.convert_to_numpy(value)
            if np.size(array) == 1:
                self.recorder.save_scalar(
                    f"metrics/{key}", float(np.asarray(array, dtype=np.float64).reshape(()))
                )


__all__ = ["Hook"]
