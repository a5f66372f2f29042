"""The injected defects of tests/defects.py, and their healthy twins, trained through every
adapter other than PyTorch with the two lines each documents (docs/frameworks.md), for
`benchmarks/adapter_defects.py` and `test_adapter_defects.py`. Run in a subprocess (Keras
picks its backend at import):

    python adapter_defects_job.py OUT_DIR --group tensorflow|keras-jax|keras-torch|jax [--only NAME...]

writes `OUT_DIR/<adapter>/<scenario>` runs and `OUT_DIR/manifest.json` ({adapter: {scenario:
seconds}}). The adapters of a group:

- `keras-tensorflow` / `keras-jax` / `keras-torch`: `model.fit(..., callbacks=[mldbg.keras.Hook(out)])`
  with validation data (one evaluation an epoch of 16 steps);
- `tape-eager`, `tape-graph` (group tensorflow): a custom loop with `mldbg.tensorflow.Hook`,
  `register_model`, `wrap_tape`, `hook.record(inputs=, labels=, predictions=)` in the step, and
  an evaluation every 10 steps in `with hook.step("eval")`;
- `jax-eager` (`hook.record(step, params=, grads=, loss=, inputs=, labels=, predictions=,
  relu_activations=...)` outside the jitted step), `jax-jit` (the same call inside it),
  `jax-statistics` (`mldbg.jax.statistics(..., when=hook.statistics_due(step))` inside the
  step, `hook.record(step, statistics=stats)` outside): group jax; evaluation every 10 steps.

The data are the tiny.py kind: an MLP on 10 Gaussian features labelled by a fixed random
linear teacher (3 classes), or a CNN on 8x8 single-channel waves of one frequency per class;
batches of 32 from 512 training samples, 256 for evaluation.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

# name -> (training keyword arguments, rules any of which must fire; () for a healthy twin: none may)
SCENARIOS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "healthy MLP ReLU, SGD": ({}, ()),
    "healthy MLP tanh, SGD": ({"activation": "tanh"}, ()),
    "healthy MLP sigmoid, Adam": ({"activation": "sigmoid", "optimizer": "adam"}, ()),
    "healthy MLP ReLU, Adam": ({"optimizer": "adam"}, ()),
    "healthy MLP ReLU, SGD momentum": ({"momentum": 0.9, "lr": 0.02}, ()),
    "healthy CNN, SGD": ({"model": "cnn"}, ()),
    "healthy CNN tanh, Adam": ({"model": "cnn", "activation": "tanh", "optimizer": "adam"}, ()),
    "healthy regression (MSE)": ({"task": "regression", "lr": 0.02}, ()),
    "lr 1e12 (explodes)": ({"lr": 1e12}, ("exploding_tensor", "tensor_variance")),
    "bias init -10 (kills ReLUs)": ({"init": "negative_bias"}, ("dead_relu",)),
    "zero init": ({"init": "zero"}, ("poor_weight_initialization", "all_zero", "dead_relu")),
    "constant init": ({"init": "constant"}, ("poor_weight_initialization",)),
    "tiny init std 1e-5": ({"init": "tiny"}, ("poor_weight_initialization",)),
    "lr 1e-10": ({"lr": 1e-10}, ("weight_update_ratio", "loss_not_decreasing")),
    "optimizer frozen (lr 0)": ({"lr": 0.0}, ("unchanged_tensor",)),
    "tanh, init std 10": ({"activation": "tanh", "init": "huge"}, ("tanh_saturation",)),
    "sigmoid, inputs x100": ({"activation": "sigmoid", "input_scale": 100.0}, ("sigmoid_saturation",)),
    "tanh, inputs x100": ({"activation": "tanh", "input_scale": 100.0}, ("tanh_saturation",)),
    # PyTorch's default init, as tiny.py's row: under Keras' Glorot init fc1's mean |g| stays
    # near 3e-7, above vanishing_gradient's 1e-7 (the loss rules and poor_weight_initialization fire)
    "sigmoid, 8 layers": ({"activation": "sigmoid", "depth": 8, "init": "torch"}, ("vanishing_gradient",)),
    "inputs x100 + 50": ({"input_scale": 100.0, "input_shift": 50.0, "lr": 1e-5}, ("not_normalized_data",)),
    "CNN, inputs x255": (
        {"model": "cnn", "input_scale": 255.0, "input_shift": 128.0, "lr": 1e-4},
        ("not_normalized_data",),
    ),
    "97% of labels one class": ({"imbalance": 0.97}, ("class_imbalance",)),
    "random labels, Adam": (
        {"shuffle_labels": True, "optimizer": "adam", "steps": 300, "width": 64},
        ("overfit",),
    ),
    "16 training samples, Adam": ({"n_train": 16, "optimizer": "adam", "steps": 300}, ("overfit",)),
    # inputs x30 alone leave this data's loss low (a ReLU net is nearly homogeneous and the
    # teacher linear: the logits grow, the classes stay right); wrong labels make it a spike
    "one corrupted batch (inputs x30, wrong labels), Adam": (
        {"spike_at": 30, "optimizer": "adam"},
        ("loss_spike",),
    ),
    "diverging: 10 classes, SGD lr 1 momentum 0.9": (
        {"n_classes": 10, "lr": 1.0, "momentum": 0.9},
        ("underfitting", "loss_not_decreasing"),
    ),
    "gradients accumulated by hand, never reset": ({"accumulate": True}, ("gradient_not_reset",)),
}
# model rules outside the default set, run by name too (marked * in the table)
EXTRA = ("confusion", "overtraining", "saturated_activation", "check_input_images")
GROUPS = {
    "tensorflow": ("keras-tensorflow", "tape-eager", "tape-graph"),
    "keras-jax": ("keras-jax",),
    "keras-torch": ("keras-torch",),
    "jax": ("jax-eager", "jax-jit", "jax-statistics"),
}
# scenario -> (adapters it is not run through, why)
NOT_HERE: dict[str, tuple[tuple[str, ...], str]] = {
    "gradients accumulated by hand, never reset": (
        ("keras-tensorflow", "keras-jax", "keras-torch", "tape-eager", "tape-graph"),
        "`model.fit` has no gradient buffer to forget to reset; the tape hook records what "
        "`tape.gradient` returns, never the sum the loop keeps outside the tape and applies",
    ),
}


def applies(adapter: str, scenario: str) -> bool:
    return adapter not in NOT_HERE.get(scenario, ((), ""))[0]


# rows whose defect alone may show as a suspicion, by design (tests/defects.py `SUSPICIONS`):
# a lone loss spike is below the reporting bar; counted here from `mldbg.diagnose(...).unconfirmed`
SUSPICIONS = {"one corrupted batch (inputs x30, wrong labels), Adam"}


def as_expected(fired: set[str], expected: tuple[str, ...]) -> bool:
    """A defect: one of its rules fired; a healthy twin: no rule of the default set fired."""
    return bool(fired & set(expected)) if expected else not (fired - set(EXTRA))


# data -------------------------------------------------------------------------------------
class Data:
    """Training and evaluation arrays (channels-last images for the CNN), and the batches."""

    def __init__(
        self,
        *,
        model: str = "mlp",
        n_classes: int = 3,
        task: str = "classification",
        n_train: int = 512,
        n_eval: int = 256,
        imbalance: float | None = None,
        shuffle_labels: bool = False,
        input_scale: float = 1.0,
        input_shift: float = 0.0,
        spike_at: int | None = None,
        seed: int = 0,
        **_: Any,
    ):
        rng = np.random.default_rng(seed + 1)
        n = (n_train + n_eval) * (6 if imbalance is not None else 1)
        if model == "cnn":
            y = rng.integers(0, n_classes, n)
            if imbalance is not None:
                y = np.where(rng.random(n) < imbalance, 0, rng.integers(1, n_classes, n))
            k = [1 + c // 4 for c in range(n_classes)]
            f = np.array(
                [[(k[c], 0), (0, k[c]), (k[c], k[c]), (k[c], -k[c])][c % 4] for c in range(n_classes)]
            )
            i, j = np.meshgrid(np.arange(8.0), np.arange(8.0), indexing="ij")
            phase = rng.random((n, 1, 1)) * 2 * np.pi
            wave = np.sin(2 * np.pi * (f[y, 0, None, None] * i + f[y, 1, None, None] * j) / 8 + phase)
            x = (0.8 * rng.standard_normal((n, 8, 8, 1)) + 0.9 * wave[..., None]).astype("float32")
        else:
            x = rng.standard_normal((n, 10)).astype("float32")
            scores = x @ np.random.default_rng(1234).standard_normal((10, n_classes))
            y = scores.argmax(1)
            if task == "regression":
                y = scores[:, :1] + 0.1 * rng.standard_normal((n, 1))
            elif imbalance is not None:  # keep a share `imbalance` of class 0
                idx0, rest = np.flatnonzero(y == 0), np.flatnonzero(y != 0)
                n0 = min(len(idx0), int(round(imbalance * n)))
                keep = np.concatenate(
                    [idx0[:n0], rest[: max(1, int(round(n0 * (1 - imbalance) / imbalance)))]]
                )
                keep = keep[rng.permutation(len(keep))]
                x, y = x[keep], y[keep]
        n_eval = min(n_eval, len(x) // 3)
        y = y.astype("float32" if task == "regression" else "int32")
        self.x_train, self.y_train = x[: len(x) - n_eval][:n_train], y[: len(x) - n_eval][:n_train]
        self.x_eval, self.y_eval = x[len(x) - n_eval :], y[len(x) - n_eval :]
        g = np.random.default_rng(seed + 2)
        if shuffle_labels:
            self.y_train = g.integers(0, n_classes, self.y_train.shape).astype("int32")
        self.x_train = (self.x_train * input_scale + input_shift).astype("float32")
        self.x_eval = (self.x_eval * input_scale + input_shift).astype("float32")
        self.spike_at, self.n_classes, self._g = spike_at, n_classes, g

    def batches(self, steps: int, batch_size: int = 32) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        n_batches = max(1, math.ceil(len(self.x_train) / batch_size))
        order = self._g.permutation(len(self.x_train))
        for step in range(steps):
            b = step % n_batches
            if b == 0 and step > 0:
                order = self._g.permutation(len(self.x_train))
            idx = order[b * batch_size : (b + 1) * batch_size]
            x, y = self.x_train[idx], self.y_train[idx]
            if step == self.spike_at:  # a corrupted batch: inputs x30, labels shifted by one class
                x, y = x * np.float32(30.0), ((y + 1) % self.n_classes).astype(y.dtype)
            yield x, y

    def eval_batches(self, batch_size: int = 128) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for i in range(0, len(self.x_eval), batch_size):
            yield self.x_eval[i : i + batch_size], self.y_eval[i : i + batch_size]


def initial(
    name: str, value: np.ndarray, init: str | None, last: bool, rng: np.random.Generator, fan_in: int
) -> np.ndarray:
    """tiny.py's injected initializations, on one parameter's array (`fan_in`: its layer's)."""
    is_bias = value.ndim == 1
    if init is None:
        return value
    if init == "torch":  # PyTorch's default for Linear/Conv: uniform +-1/sqrt(fan_in), biases too
        bound = 1 / math.sqrt(fan_in)
        return rng.uniform(-bound, bound, value.shape).astype(value.dtype)
    if init == "zero":
        return np.zeros_like(value)
    if init == "constant":
        return np.full_like(value, 0.1)
    if init == "negative_bias":
        return np.full_like(value, -10.0) if is_bias and not last else value
    if init in ("huge", "tiny"):
        std = 10.0 if init == "huge" else 1e-5
        return value if is_bias else (rng.standard_normal(value.shape) * std).astype(value.dtype)
    raise ValueError(f"unknown init {init!r} for {name}")


def lr_of(optimizer: str = "sgd", lr: float | None = None, **_: Any) -> float:
    return (0.1 if optimizer == "sgd" else 1e-2) if lr is None else lr


# Keras (model.fit) and TensorFlow (GradientTape) ----------------------------------------------
def keras_model(
    *,
    model: str = "mlp",
    activation: str = "relu",
    depth: int = 2,
    width: int = 32,
    n_classes: int = 3,
    task: str = "classification",
    init: str | None = None,
    seed: int = 0,
    **_: Any,
) -> Any:
    """An MLP of `Dense(width, activation=...)` layers `fc1`..., or a CNN of Conv2D +
    Activation layers; the head `out`."""
    import keras

    keras.utils.set_random_seed(seed)
    n_out = 1 if task == "regression" else n_classes
    if model == "cnn":
        w = max(4, width // 4)
        layers = [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(w, 3, padding="same", name="conv1"),
            keras.layers.Activation(activation, name=f"{activation}1"),
            keras.layers.MaxPooling2D(2, name="pool1"),
            keras.layers.Conv2D(2 * w, 3, padding="same", name="conv2"),
            keras.layers.Activation(activation, name=f"{activation}2"),
            keras.layers.MaxPooling2D(2, name="pool2"),
            keras.layers.Flatten(name="flat"),
        ]
    else:
        layers = [keras.Input((10,))]
        layers += [
            keras.layers.Dense(width, activation=activation, name=f"fc{i}") for i in range(1, depth + 1)
        ]
    net = keras.Sequential([*layers, keras.layers.Dense(n_out, name="out")], name="tiny")
    rng = np.random.default_rng(seed + 3)
    for layer in net.layers:
        if layer.weights:
            fan_in = int(np.prod(layer.weights[0].shape[:-1]))
            layer.set_weights(
                [
                    initial(v.path, np.asarray(v), init, layer.name == "out", rng, fan_in)
                    for v in layer.weights
                ]
            )
    return net


def keras_optimizer(optimizer: str = "sgd", momentum: float = 0.0, **kw: Any) -> Any:
    import keras

    lr = lr_of(optimizer, **kw)
    return keras.optimizers.SGD(lr, momentum=momentum) if optimizer == "sgd" else keras.optimizers.Adam(lr)


def keras_loss(task: str = "classification", **_: Any) -> Any:
    import keras

    if task == "regression":
        return keras.losses.MeanSquaredError()
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def train_keras(path: Path, steps: int = 100, **kw: Any) -> None:
    """`mldbg.keras.Hook(out_dir)` as the callback of `fit` (a generator of batches, 16 steps an
    epoch, `steps` rounded up to whole epochs; validation data evaluated at the end of each)."""
    import mldbg.keras

    data = Data(**kw)
    net = keras_model(**kw)
    net.compile(optimizer=keras_optimizer(**kw), loss=keras_loss(**kw))
    hook = mldbg.keras.Hook(str(path))
    epochs = math.ceil(steps / 16)
    net.fit(
        data.batches(16 * epochs), steps_per_epoch=16, epochs=epochs, verbose=0, shuffle=False,
        validation_data=(data.x_eval, data.y_eval), validation_batch_size=128, callbacks=[hook],
    )  # fmt: skip
    hook.close()


def train_tape(path: Path, graph: bool, steps: int = 100, **kw: Any) -> None:
    """`mldbg.tensorflow.Hook(out_dir)`, `register_model`, `wrap_tape`; the step hands its
    inputs, labels and predictions to `hook.record`; an evaluation every 10 steps."""
    import tensorflow as tf

    import mldbg.tensorflow

    data = Data(**kw)
    net, opt, loss_fn = keras_model(**kw), keras_optimizer(**kw), keras_loss(**kw)
    hook = mldbg.tensorflow.Hook(str(path))
    hook.register_model(net)
    opt.build(net.trainable_variables)

    def train_step(x: Any, y: Any) -> Any:
        with hook.wrap_tape(tf.GradientTape()) as tape:
            logits = net(x, training=True)
            loss = loss_fn(y, logits)
            hook.record(inputs=x, labels=y, predictions=logits)
        grads = tape.gradient(loss, net.trainable_variables)
        opt.apply(grads, net.trainable_variables)
        return loss

    step_fn = tf.function(train_step) if graph else train_step
    for step, (x, y) in enumerate(data.batches(steps)):
        step_fn(tf.constant(x), tf.constant(y))
        if (step + 1) % 10 == 0:
            for xe, ye in data.eval_batches():
                with hook.step("eval"):
                    logits = net(xe, training=False)
                    hook.record(loss=loss_fn(ye, logits), inputs=xe, labels=ye, predictions=logits)
    hook.close()


# JAX ----------------------------------------------------------------------------------------
def jax_model(
    *,
    model: str = "mlp",
    activation: str = "relu",
    depth: int = 2,
    width: int = 32,
    n_classes: int = 3,
    task: str = "classification",
    init: str | None = None,
    seed: int = 0,
    **_: Any,
) -> tuple[dict, Callable]:
    """(params, apply): `apply(params, x) -> (logits, {layer: (pre_activation, output)})`;
    PyTorch's default initialization (uniform +-1/sqrt(fan_in)), then the injected one."""
    import jax
    import jax.numpy as jnp

    act = {"relu": jax.nn.relu, "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid}[activation]
    rng = np.random.default_rng(seed + 3)
    n_out = 1 if task == "regression" else n_classes

    def layer(shape: tuple[int, ...], fan_in: int, last: bool = False) -> dict:
        bound = 1 / math.sqrt(fan_in)
        kernel = rng.uniform(-bound, bound, shape).astype("float32")
        bias = rng.uniform(-bound, bound, shape[-1:]).astype("float32")
        return {
            "kernel": jnp.asarray(initial("kernel", kernel, init, last, rng, fan_in)),
            "bias": jnp.asarray(initial("bias", bias, init, last, rng, fan_in)),
        }

    if model == "cnn":
        w = max(4, width // 4)
        params = {"conv1": layer((3, 3, 1, w), 9), "conv2": layer((3, 3, w, 2 * w), 9 * w),
                  "out": layer((8 * w, n_out), 8 * w, last=True)}  # fmt: skip

        def apply(p: dict, x: Any) -> tuple[Any, dict]:
            acts = {}
            for i in (1, 2):
                pre = jax.lax.conv_general_dilated(
                    x, p[f"conv{i}"]["kernel"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
                ) + p[f"conv{i}"]["bias"]  # fmt: skip
                acts[f"{activation}{i}"] = (pre, act(pre))
                x = jax.lax.reduce_window(acts[f"{activation}{i}"][1], -jnp.inf, jax.lax.max,
                                          (1, 2, 2, 1), (1, 2, 2, 1), "VALID")  # fmt: skip
            x = x.reshape(x.shape[0], -1)
            return x @ p["out"]["kernel"] + p["out"]["bias"], acts

    else:
        params, d = {}, 10
        for i in range(1, depth + 1):
            params[f"fc{i}"] = layer((d, width), d)
            d = width
        params["out"] = layer((d, n_out), d, last=True)

        def apply(p: dict, x: Any) -> tuple[Any, dict]:
            acts = {}
            for i in range(1, depth + 1):
                pre = x @ p[f"fc{i}"]["kernel"] + p[f"fc{i}"]["bias"]
                x = act(pre)
                acts[f"{activation}{i}"] = (pre, x)
            return x @ p["out"]["kernel"] + p["out"]["bias"], acts

    return params, apply


def train_jax(path: Path, way: str, steps: int = 100, accumulate: bool = False, **kw: Any) -> None:
    """`way`: "eager" (`hook.record` outside the jitted step), "jit" (inside it), "statistics"
    (`mldbg.jax.statistics` inside it, handed to `hook.record(step, statistics=...)`)."""
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    data = Data(**kw)
    params, apply = jax_model(**kw)
    lr, optimizer = lr_of(**kw), kw.get("optimizer", "sgd")
    tx = optax.sgd(lr, momentum=kw.get("momentum") or None) if optimizer == "sgd" else optax.adam(lr)
    regression = kw.get("task") == "regression"
    act_key = f"{kw.get('activation', 'relu')}_activations"
    hook = mldbg.jax.Hook(str(path))

    def loss_fn(p: dict, x: Any, y: Any) -> tuple[Any, tuple[Any, dict]]:
        logits, acts = apply(p, x)
        if regression:
            return jnp.mean((logits - y) ** 2), (logits, acts)
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1)), (logits, acts)

    def train_step(step: Any, p: dict, opt_state: Any, sums: Any, x: Any, y: Any, due: Any) -> tuple:
        (loss, (logits, acts)), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, x, y)
        if accumulate:  # the bug: a running sum of gradients that is never reset
            grads = sums = jax.tree_util.tree_map(jnp.add, sums, grads)
        seen = {"inputs": x, "labels": y, "predictions": logits, act_key: acts}
        out: Any = None
        if way == "jit":
            hook.record(step, params=p, grads=grads, loss=loss, **seen)
        elif way == "statistics":
            out = mldbg.jax.statistics(p, grads, loss, when=due, **seen)
        else:
            out = (grads, loss, seen)
        updates, opt_state = tx.update(grads, opt_state, p)
        return optax.apply_updates(p, updates), opt_state, sums, out

    def eval_step(p: dict, x: Any, y: Any) -> tuple:
        loss, (logits, acts) = loss_fn(p, x, y)
        return loss, logits, acts

    step_fn, eval_fn = jax.jit(train_step), jax.jit(eval_step)
    opt_state = tx.init(params)
    sums = jax.tree_util.tree_map(jnp.zeros_like, params)
    eval_step_count = 0
    for step, (x, y) in enumerate(data.batches(steps)):
        before = params
        params, opt_state, sums, out = step_fn(step, params, opt_state, sums, x, y, hook.statistics_due(step))
        if way == "eager":
            grads, loss, seen = out
            hook.record(step, params=before, grads=grads, loss=loss, **seen)
        elif way == "statistics":
            hook.record(step, statistics=out)
        if (step + 1) % 10 == 0:
            for xe, ye in data.eval_batches():
                loss, logits, acts = eval_fn(params, xe, ye)
                hook.record(eval_step_count, params=params, loss=loss, inputs=xe, labels=ye,
                            predictions=logits, mode="eval", **{act_key: acts})  # fmt: skip
                eval_step_count += 1
    hook.close()


TRAINERS: dict[str, Callable[..., None]] = {
    "keras-tensorflow": train_keras,
    "keras-jax": train_keras,
    "keras-torch": train_keras,
    "tape-eager": lambda path, **kw: train_tape(path, graph=False, **kw),
    "tape-graph": lambda path, **kw: train_tape(path, graph=True, **kw),
    "jax-eager": lambda path, **kw: train_jax(path, "eager", **kw),
    "jax-jit": lambda path, **kw: train_jax(path, "jit", **kw),
    "jax-statistics": lambda path, **kw: train_jax(path, "statistics", **kw),
}


def run_dir(out: Path, adapter: str, scenario: str) -> Path:
    safe = scenario.replace(" ", "_").replace(",", "").replace("/", "_").replace(":", "")
    return out / adapter / safe


def main() -> None:
    out = Path(sys.argv[1])
    args = sys.argv[2:]
    group = args[args.index("--group") + 1]
    only = args[args.index("--only") + 1 :] if "--only" in args else []
    adapters = [a for a in GROUPS[group] if "--adapters" not in args or a in args]
    if group.startswith("keras-"):
        os.environ["KERAS_BACKEND"] = group.split("-", 1)[1]
    elif group == "tensorflow":
        os.environ["KERAS_BACKEND"] = "tensorflow"
    seconds: dict[str, dict[str, float]] = {}
    for adapter in adapters:
        for name, (kwargs, _) in SCENARIOS.items():
            if (only and name not in only) or not applies(adapter, name):
                continue
            t = time.perf_counter()
            with np.errstate(all="ignore"):
                TRAINERS[adapter](run_dir(out, adapter, name), **kwargs)
            seconds.setdefault(adapter, {})[name] = time.perf_counter() - t
    (out / "manifest.json").write_text(json.dumps(seconds))


if __name__ == "__main__":
    main()
