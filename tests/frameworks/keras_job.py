"""Tiny Keras trainings recorded with `mldbg.keras.Hook`, run in a subprocess per backend.

Keras picks its backend from KERAS_BACKEND when it is first imported, so each backend runs in
its own process: `python keras_job.py OUT_DIR [--api tf.keras]`. Writes one run per scenario
under OUT_DIR and, for the round trip, the values taken straight from Keras in `reference.npz`.
"""

from __future__ import annotations

import inspect
import json
import sys
import time
from pathlib import Path

import numpy as np

if "--api" in sys.argv and sys.argv[sys.argv.index("--api") + 1] == "tf.keras":
    import tensorflow as tf

    keras = tf.keras
else:
    import keras

import mldbg
import mldbg.keras
import mldbg.torch  # only for its signature: every hook takes the same arguments

RULE_COLLECTIONS = ["weights", "biases", "gradients", "losses", "scalars", "relu_activations",
                    "tanh_activations", "sigmoid_activations"]  # fmt: skip
ALL = RULE_COLLECTIONS + ["inputs", "outputs", "labels", "predictions", "optimizer_variables"]
LR = 0.1

# every defect is a keyword of `train`; the healthy twin has none
SCENARIOS = {
    "healthy": {},
    "exploding": {"lr": 1e12},
    "vanishing": {"activation": "sigmoid", "depth": 10},
    "dead_relu": {"bias": -20.0},
    "stalled": {"lr": 1e-10},
}


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Normalized inputs, labels from a fixed random teacher (learnable, balanced enough)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 8)).astype("float32")
    teacher = np.random.default_rng(42).standard_normal((8, 3))
    return x, np.argmax(x @ teacher, axis=1).astype("int32")


def build(depth: int = 1, activation: str = "relu", bias: float = 0.0, lr: float = LR):
    keras.utils.set_random_seed(0)
    layers = [keras.Input((8,))]
    for i in range(depth):
        init = keras.initializers.Constant(bias)
        layers.append(keras.layers.Dense(16, activation=activation, bias_initializer=init, name=f"hidden{i}"))
    layers.append(keras.layers.Dense(3, name="logits"))
    model = keras.Sequential(layers, name="tiny")
    model.compile(
        optimizer=keras.optimizers.SGD(lr),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


class Reference(keras.callbacks.Callback):
    """Weights straight from Keras before every training batch (and at the end)."""

    def __init__(self):
        super().__init__()
        self.weights: list[list[np.ndarray]] = []

    def on_train_batch_begin(self, batch, logs=None):
        self.weights.append(self._read())

    def on_train_end(self, logs=None):
        self.weights.append(self._read())

    def _read(self) -> list[np.ndarray]:
        return [np.array(keras.ops.convert_to_numpy(v.value)) for v in self.model.weights]


def roundtrip(out: Path) -> dict:
    model = build()
    x, y = data(64)
    xv, yv = data(32, seed=1)
    hook = mldbg.keras.Hook(str(out / "roundtrip"), save_config=mldbg.SaveConfig(save_interval=1),
                            include_collections=ALL, profiler_config=mldbg.ProfilerConfig())  # fmt: skip
    ref = Reference()
    model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0, validation_data=(xv, yv),
              callbacks=[hook, ref])  # fmt: skip
    predictions = model.predict(xv, batch_size=16, verbose=0, callbacks=[hook])
    hook.close()
    arrays = {"x": x, "y": y, "xv": xv, "predictions": np.asarray(predictions)}
    for step, weights in enumerate(ref.weights):
        for i, w in enumerate(weights):
            arrays[f"w{step}_{i}"] = w
    np.savez(out / "reference.npz", **arrays)
    return {"weight_names": [w.path.split("/", 1)[1] for w in model.weights], "steps": len(ref.weights) - 1}


def train(path: Path, lr: float = LR, **defect) -> list[float]:
    model = build(lr=lr, **defect)
    x, y = data(256)
    hook = mldbg.keras.Hook(str(path), save_config=mldbg.SaveConfig(save_interval=1),
                            include_collections=RULE_COLLECTIONS)  # fmt: skip
    history = model.fit(x, y, batch_size=32, epochs=8, shuffle=False, verbose=0, callbacks=[hook])
    hook.close()
    return [float(v) for v in history.history["loss"]]


def lstm(path: Path) -> list[float]:
    """A sentiment-style Embedding + LSTM classifier with the two lines (`Hook(path)`): an
    LSTM's `activation` is a read-only property (its cell's), which the hook must leave alone."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 50, size=(256, 12))
    y = (ids[:, :3] > 25).sum(axis=1) >= 2
    model = keras.Sequential(
        [keras.Input((12,)), keras.layers.Embedding(50, 8), keras.layers.LSTM(8), keras.layers.Dense(1)]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.01), loss=keras.losses.BinaryCrossentropy(from_logits=True)
    )
    hook = mldbg.keras.Hook(str(path))
    history = model.fit(ids, y.astype("float32"), batch_size=32, epochs=2, verbose=0, callbacks=[hook])
    hook.close()
    return [float(v) for v in history.history["loss"]]


def teacher_student(path: Path) -> dict:
    """The Keras distillation example's shape with the two lines: a teacher fit on the task,
    then a student fit to the teacher's logits (an MSE, another scale), one `Hook(path)` passed
    to both fits. The teacher's Adam follows a cosine decay; the student's runs at a constant
    rate and accumulates its gradients over 2 batches, under `EarlyStopping`. Returns the models' names and the
    rates Keras computes for the teacher's steps."""
    keras.utils.set_random_seed(0)
    x, y = data(256)
    schedule = keras.optimizers.schedules.CosineDecay(0.01, decay_steps=16)
    teacher = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)], name="teacher"
    )
    teacher.compile(optimizer=keras.optimizers.Adam(schedule),
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))  # fmt: skip
    student = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)], name="student")
    student.compile(optimizer=keras.optimizers.Adam(1e-3, gradient_accumulation_steps=2), loss="mse")
    hook = mldbg.keras.Hook(str(path))
    teacher.fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=[hook])
    logits = teacher.predict(x, verbose=0)
    stop = keras.callbacks.EarlyStopping(monitor="loss", patience=100)  # the student's fit stops early
    student.fit(x, logits, batch_size=32, epochs=2, verbose=0, callbacks=[hook, stop])
    hook.close()
    rates = [float(keras.ops.convert_to_numpy(schedule(i))) for i in range(16)]
    return {"teacher": teacher.name, "student": student.name, "rates": rates}


def main() -> None:
    out = Path(sys.argv[1])
    t0 = time.perf_counter()
    manifest = {"backend": keras.backend.backend(), "keras": keras.__version__}
    manifest["signature"] = list(inspect.signature(mldbg.keras.Hook.__init__).parameters)
    manifest["torch_signature"] = list(inspect.signature(mldbg.torch.Hook.__init__).parameters)
    manifest["is_callback"] = isinstance(mldbg.keras.Hook(str(out / "unused")), keras.callbacks.Callback)
    manifest["roundtrip"] = roundtrip(out)
    manifest["losses"] = {name: train(out / name, **kw) for name, kw in SCENARIOS.items()}
    manifest["lstm"] = lstm(out / "lstm")
    manifest["teacher_student"] = teacher_student(out / "teacher_student")
    manifest["seconds"] = time.perf_counter() - t0
    (out / "manifest.json").write_text(json.dumps(manifest))


if __name__ == "__main__":
    main()
