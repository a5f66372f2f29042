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
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial
from typing import Any

import keras
import numpy as np

from mldbg.config import Mode
from mldbg.frameworks.base import Adapter
from mldbg.frameworks.keras_layers import host_source, patched, put_each, tap, tap_layers, variable_name
from mldbg.frameworks.session import Worker

MODES = {"train": Mode.TRAIN, "test": Mode.EVAL, "predict": Mode.PREDICT}


class Hook(Adapter, keras.callbacks.Callback):
    """Records a Keras model in `fit`, `evaluate` and `predict`: pass it in `callbacks=[hook]`."""

    def _worker(self) -> Worker:
        return Worker.from_environment(f"keras-{keras.__version__}-{keras.backend.backend()}")

    def _setup(self) -> None:
        self.backend = keras.backend.backend()
        self._variants: dict[str, Callable[..., Any]] = {}  # kind -> recording function
        self._seen: set[str] | None = None  # names captured in the step being traced or run
        self._natural: dict[str, tuple[str, ...]] = {}
        self._extras: dict[str, Any] = {}  # TensorFlow: tensors that leave the traced step
        self._wanted: dict[tuple[str, tuple[str, ...]], bool] = {}

    # fit/evaluate/predict made their compiled function just before these events
    def on_train_begin(self, logs: Any = None) -> None:
        self._attach("train")

    def on_test_begin(self, logs: Any = None) -> None:
        self._attach("test")

    def on_predict_begin(self, logs: Any = None) -> None:
        self._attach("predict")

    def on_train_end(self, logs: Any = None) -> None:
        self.recorder.flush()

    def _to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(keras.ops.convert_to_numpy(value))

    # steps ------------------------------------------------------------------------------
    def _attach(self, kind: str) -> None:
        model = self._model  # not self.model: on JAX that forces a state sync
        normal = getattr(model, f"{kind}_function", None)
        if normal is None or getattr(normal, "_mldbg_hook", None) is self:
            return
        self._variants.pop(kind, None)  # a new compiled function: its variant is stale
        mode, timeline = MODES[kind], self.timeline

        def function(*args: Any) -> Any:
            rec = self.recorder
            rec.start_step(mode)
            timeline.step_begin(rec.step, int(mode))
            out = self._record(kind, args) if rec.saving else normal(*args)
            timeline.step_end()
            rec.end_step()
            return out

        function._mldbg_hook = self  # type: ignore[attr-defined]
        setattr(model, f"{kind}_function", function)

    def _record(self, kind: str, args: tuple[Any, ...]) -> Any:
        model = self._model
        self._save_variables(kind, args)
        variant = self._variants.get(kind)
        if variant is None:  # the backend compiles the wrapped step, once
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
                variant = self._variants[kind] = getattr(model, f"{kind}_function")
            setattr(model, f"{kind}_function", dispatcher)
        self._seen = set()
        try:
            with contextlib.ExitStack() as stack:  # traced now (TF, JAX) or run now (torch)
                stack.enter_context(
                    patched(model, f"{kind}_step", self._step(kind, getattr(model, f"{kind}_step")))
                )
                tap(
                    stack,
                    model,
                    "call",
                    lambda a, out: put_each(self._put, "model_output", out, ("outputs", "predictions")),
                )
                tap_layers(stack, model, self._put)
                if kind != "predict":
                    loss_attr = "_compute_loss" if hasattr(model, "_compute_loss") else "compute_loss"
                    tap(stack, model, loss_attr, lambda a, loss: self._put("loss", loss, ("losses",)))
                if kind == "train" and getattr(model, "optimizer", None) is not None:
                    opt = getattr(model.optimizer, "inner_optimizer", model.optimizer)  # unscaled gradients
                    tap(stack, opt, "apply", partial(self._gradients, opt))
                out = variant(*args)
            if self.backend == "tensorflow":
                out, extras = out
                for name, value in extras.items():
                    self._save_host(name, self._natural[name], value)
            elif self.backend == "jax":
                import jax

                jax.block_until_ready(out)
                jax.effects_barrier()  # every debug callback of the step has run
        finally:
            self._seen = None
        self._save_logs(kind, out)
        return out

    def _step(self, kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any) -> Any:
            if self._seen is None:
                return original(*args)
            self._seen, self._extras = set(), {}  # tf.function may trace a step twice
            x, y, _ = keras.utils.unpack_x_y_sample_weight(args[-1])
            put_each(self._put, "model_input", x, ("inputs",))
            if kind != "predict":
                put_each(self._put, "labels", y, ("labels",))
            out = original(*args)
            return (out, self._extras) if self.backend == "tensorflow" else out

        return step

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
        wanted = self._wanted.get((name, natural))
        if wanted is None:  # could it be saved at any step? the variant is compiled once
            cols = self.recorder.collections
            wanted = self._wanted[(name, natural)] = any(
                c.name in cols.included for c in cols.members(name, natural)
            )
        if not wanted:
            return
        seen.add(name)
        self._natural[name] = natural
        if self.backend == "tensorflow":
            self._extras[name] = value
        elif self.backend == "jax":
            import jax

            jax.debug.callback(partial(self._save_host, name, natural), value)
        else:
            self._save_host(name, natural, value)

    def _save_host(self, name: str, natural: tuple[str, ...], value: Any) -> None:
        rec = self.recorder
        plan = rec.plan(name, natural)
        if plan is not None and not rec.has(name):
            source = host_source(value)
            if source is not None:
                rec.save(name, source[0], plan, source[1])

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
        for variables, values in groups:
            for v, value in zip(variables, values, strict=True):
                natural = ("biases",) if v.name in ("bias", "beta") else ("weights",)
                self._save_host(variable_name(v, model.name), natural, value)
        if optimizer is not None:
            for v, value in zip(*optimizer, strict=True):
                self._save_host(f"optimizer/{v.path}", ("optimizer_variables",), value)

    def _save_logs(self, kind: str, out: Any) -> None:
        """Keras' own logs (running means over the epoch) as `metrics/<name>` scalars."""
        logs = out[0] if self.backend == "jax" else out
        if kind == "predict" or not isinstance(logs, dict):
            return
        for key, value in logs.items():
            plan = self.recorder.plan(f"metrics/{key}", ("scalars",))
            if plan is not None and np.size(keras.ops.convert_to_numpy(value)) == 1:
                scalar = np.asarray(keras.ops.convert_to_numpy(value), dtype=np.float64).reshape(())
                self.recorder.save(f"metrics/{key}", scalar, plan)


__all__ = ["Hook"]
