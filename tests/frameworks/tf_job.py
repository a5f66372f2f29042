"""Tiny custom TensorFlow loops recorded with `mldbg.tensorflow.Hook` (eager and inside
`tf.function`), and a `tf.keras` fit recorded with `mldbg.keras.Hook`; run in a subprocess.

`python tf_job.py OUT_DIR` writes the runs, `reference.npz` with values straight from
TensorFlow, and `manifest.json`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

import mldbg
import mldbg.keras
import mldbg.tensorflow

LR = 0.1
keras = tf.keras  # the tf.keras namespace (Keras 3 with TF >= 2.16)


def data(n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 8)).astype("float32")
    return x, np.argmax(x @ np.random.default_rng(42).standard_normal((8, 3)), axis=1).astype("int32")


def build(name: str):
    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="tanh", name="hidden"),
            keras.layers.Dense(3, name="logits"),
        ],
        name=name,
    )


def read(model) -> list[np.ndarray]:
    return [v.numpy().copy() for v in model.trainable_variables]


def custom_loop(out: Path, graph: bool, arrays: dict) -> None:
    """Four training steps with a wrapped tape, then one eval step, weights kept before each."""
    model = build("loop")
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    opt = keras.optimizers.SGD(LR)
    hook = mldbg.tensorflow.Hook(str(out), save_config=mldbg.SaveConfig(save_interval=1),
                                 include_collections=["weights", "biases", "gradients", "losses", "outputs",
                                                      "tanh_activations", "inputs", "labels", "predictions"])  # fmt: skip
    hook.register_model(model)

    def train_step(x, y):
        with hook.wrap_tape(tf.GradientTape()) as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    def eval_step(x, y):
        with hook.step(mldbg.Mode.EVAL):
            logits = model(x, training=False)
            hook.record(loss=loss_fn(y, logits), inputs=x, labels=y, predictions=logits)
        return logits

    if graph:
        train_step, eval_step = tf.function(train_step), tf.function(eval_step)
    x, y = data()
    tag = "graph" if graph else "eager"
    for s in range(4):
        batch = slice(s * 16, (s + 1) * 16)
        for i, w in enumerate(read(model)):
            arrays[f"{tag}_w{s}_{i}"] = w
        arrays[f"{tag}_loss{s}"] = train_step(x[batch], y[batch]).numpy()
    for i, w in enumerate(read(model)):
        arrays[f"{tag}_w4_{i}"] = w
    arrays[f"{tag}_eval_logits"] = eval_step(x[:16], y[:16]).numpy()
    hook.close()


def keras_fit(out: Path, arrays: dict) -> None:
    model = build("fit")
    model.compile(
        optimizer=keras.optimizers.SGD(LR), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    hook = mldbg.keras.Hook(str(out), save_config=mldbg.SaveConfig(save_interval=1))
    weights = []

    class Reference(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            weights.append(read(self.model))

        def on_train_end(self, logs=None):
            weights.append(read(self.model))

    x, y = data()
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[hook, Reference()])
    hook.close()
    for s, ws in enumerate(weights):
        for i, w in enumerate(ws):
            arrays[f"fit_w{s}_{i}"] = w


def main() -> None:
    out = Path(sys.argv[1])
    arrays: dict[str, np.ndarray] = {}
    x, y = data()
    arrays["x"], arrays["y"] = x, y
    custom_loop(out / "eager", graph=False, arrays=arrays)
    custom_loop(out / "graph", graph=True, arrays=arrays)
    keras_fit(out / "tf_keras", arrays)
    np.savez(out / "reference.npz", **arrays)
    (out / "manifest.json").write_text(json.dumps({"tensorflow": tf.__version__, "tf_keras": keras.__name__}))


if __name__ == "__main__":
    main()
