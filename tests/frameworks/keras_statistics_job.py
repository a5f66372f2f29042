"""Tiny Keras (TensorFlow backend) and custom TensorFlow loops recorded with the two lines,
for the statistics tests (test_keras_statistics.py); run in a subprocess:
`python keras_statistics_job.py OUT_DIR` (TensorFlow backend: everything), or with
`--backend-smoke` under KERAS_BACKEND=jax or torch (the Keras runs of `BACKEND_SCENARIOS` and
`compare_keras` only).

- `compare_keras`, `compare_mixed` (mixed_bfloat16), `compare_tape_eager`, `compare_tape_graph`:
  statistics together with the raw tensors every step (`statistics=True`), to compare one with
  the other;
- `keras/<scenario>`, `tape_eager/<scenario>`, `tape_graph/<scenario>`: `Hook(out_dir)` and
  nothing else, an injected defect or its healthy twin each.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import mldbg  # noqa: E402
import mldbg.keras  # noqa: E402

ALL = ["weights", "biases", "gradients", "losses", "relu_activations", "tanh_activations",
       "sigmoid_activations", "inputs", "outputs", "labels", "predictions"]  # fmt: skip
# scenario -> keyword arguments of `build` and `data`; the healthy twins have "healthy" in their name
SCENARIOS = {
    "healthy relu": {},
    "exploding (lr 1e12)": {"lr": 1e12},
    "dead relu (bias -10)": {"bias": -10.0},
    "healthy tanh": {"activation": "tanh"},
    "saturated tanh (inputs x100)": {"activation": "tanh", "scale": 100.0},
    "healthy sigmoid": {"activation": "sigmoid", "lr": 0.5},
    "saturated sigmoid (inputs x100)": {"activation": "sigmoid", "scale": 100.0, "lr": 0.5},
}
BACKEND_SCENARIOS = ("healthy relu", "exploding (lr 1e12)", "dead relu (bias -10)")
TAPE_SCENARIOS = (
    "healthy relu",
    "exploding (lr 1e12)",
    "dead relu (bias -10)",
    "saturated tanh (inputs x100)",
)


def data(n: int, scale: float = 1.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 8)).astype("float32")
    y = np.argmax(x @ np.random.default_rng(42).standard_normal((8, 3)), axis=1).astype("int32")
    return x * np.float32(scale), y


def build(activation: str = "relu", bias: float = 0.0, lr: float = 0.1, **_: float) -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(
                32, activation=activation, name="hidden0", bias_initializer=keras.initializers.Constant(bias)
            ),  # fmt: skip
            keras.layers.Dense(
                32, activation=activation, name="hidden1", bias_initializer=keras.initializers.Constant(bias)
            ),  # fmt: skip
            keras.layers.Dense(3, name="logits"),
        ],
        name="tiny",
    )
    model.compile(optimizer=keras.optimizers.SGD(lr),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))  # fmt: skip
    return model


def fit(path: Path, epochs: int = 10, hook_kwargs: dict | None = None, **kw: float) -> None:
    """256 samples, batch 32: 8 steps an epoch, 80 steps; one validation pass per epoch."""
    model = build(**kw)
    x, y = data(256, kw.get("scale", 1.0))
    xv, yv = data(64, kw.get("scale", 1.0), seed=1)
    hook = mldbg.keras.Hook(str(path), **(hook_kwargs or {}))
    model.fit(x, y, batch_size=32, epochs=epochs, shuffle=False, verbose=0, validation_data=(xv, yv),
              callbacks=[hook])  # fmt: skip
    hook.close()


def compare_keras(path: Path, policy: str = "float32") -> None:
    """A conv net (channels-last units) with ReLU, tanh and sigmoid, fit and evaluate."""
    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((6, 6, 2)),
            keras.layers.Conv2D(4, 3, activation="relu", name="conv"),
            keras.layers.Flatten(name="flat"),
            keras.layers.Dense(8, name="dense"),
            keras.layers.Activation("tanh", name="act"),
            keras.layers.Dense(8, activation="sigmoid", name="gate"),
            keras.layers.Dense(4, name="logits"),
        ],
        name="conv_net",
    )
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))  # fmt: skip
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((48, 6, 6, 2)) * [1.0, 5.0] + [0.0, 2.0]).astype("float32")
    y = rng.integers(0, 4, size=48).astype("int32")
    hook = mldbg.keras.Hook(str(path), save_config=mldbg.SaveConfig(save_interval=1), include_collections=ALL,
                            statistics=True, statistics_warmup=2, statistics_every=3)  # fmt: skip
    model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0, callbacks=[hook])
    model.evaluate(x[:32], y[:32], batch_size=16, verbose=0, callbacks=[hook])
    hook.close()
    keras.mixed_precision.set_global_policy("float32")


def tape_loop(path: Path, graph: bool, steps: int, compare: bool = False, **kw: float) -> None:
    """A custom loop with the tape and `register_model`; `compare`: raw tensors every step too,
    and the inputs, labels and predictions given to `hook.record`."""
    import tensorflow as tf

    import mldbg.tensorflow

    model = build(**kw)
    opt = keras.optimizers.SGD(kw.get("lr", 0.1))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x, y = data(256, kw.get("scale", 1.0))
    extra = dict(save_config=mldbg.SaveConfig(save_interval=1), include_collections=ALL, statistics=True)
    hook = mldbg.tensorflow.Hook(str(path), **(extra if compare else {}))
    hook.register_model(model)

    def train_step(xb: Any, yb: Any) -> Any:
        with hook.wrap_tape(tf.GradientTape()) as tape:
            logits = model(xb, training=True)
            loss = loss_fn(yb, logits)
            if compare:
                hook.record(inputs=xb, labels=yb, predictions=logits)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply(grads, model.trainable_variables)
        return loss

    step = tf.function(train_step) if graph else train_step
    for i in range(steps):
        b = slice((i % 8) * 32, (i % 8 + 1) * 32)
        step(tf.constant(x[b]), tf.constant(y[b]))
    hook.close()


def main() -> None:
    out = Path(sys.argv[1])
    t0 = time.perf_counter()
    compare_keras(out / "compare_keras")
    if "--backend-smoke" in sys.argv:
        for name in BACKEND_SCENARIOS:
            fit(out / "keras" / name, **SCENARIOS[name])
        (out / "manifest.json").write_text(json.dumps({"backend": keras.backend.backend()}))
        return
    compare_keras(out / "compare_mixed", policy="mixed_bfloat16")
    tape_loop(out / "compare_tape_eager", graph=False, steps=6, compare=True)
    tape_loop(out / "compare_tape_graph", graph=True, steps=6, compare=True)
    for name, kw in SCENARIOS.items():
        fit(out / "keras" / name, **kw)
    for name in TAPE_SCENARIOS:
        tape_loop(out / "tape_eager" / name, graph=False, steps=60, **SCENARIOS[name])
        tape_loop(out / "tape_graph" / name, graph=True, steps=60, **SCENARIOS[name])
    seconds = time.perf_counter() - t0
    (out / "manifest.json").write_text(json.dumps({"seconds": seconds, "keras": keras.__version__}))


if __name__ == "__main__":
    main()
