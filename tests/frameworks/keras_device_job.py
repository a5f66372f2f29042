"""The two lines on a model with a large weight, counting what reaches the host, for
test_keras_device_statistics.py; run in a subprocess: `python keras_device_job.py OUT_DIR`
under KERAS_BACKEND=tensorflow (Keras, the tape eagerly and under tf.function), jax or torch
(Keras).

A *host copy* is a tensor of at least `BIG` elements copied by the hook (`host_array`) or
handed to the hook's host side as a NumPy array (out of a `tf.numpy_function` or a
`jax.debug.callback`), recorded with the step it happened in.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import mldbg  # noqa: E402
import mldbg.frameworks.keras as keras_adapter  # noqa: E402
import mldbg.keras  # noqa: E402

WIDTH = 256
BIG = WIDTH * WIDTH  # elements of the large kernel
STEPS = 25  # 20 warmup statistics steps, then every 10th: steps 0-19 and 20


def count_copies(module: Any, hook_class: Any, log: list[tuple[int, int]], hook_of: list[Any]) -> Any:
    """Record (step, elements) of every large host copy the adapter makes or receives; returns
    what undoes it."""
    original = module.host_array

    def host_array(value: Any) -> np.ndarray:
        array = original(value)
        if array.size >= BIG:
            log.append((hook_of[0].recorder.step, int(array.size)))
        return array

    module.host_array = host_array
    save_host = hook_class._save_host

    def _save_host(self: Any, name: str, natural: Any, value: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(value, np.ndarray) and value.size >= BIG:
            log.append((self.recorder.step, int(value.size)))
        save_host(self, name, natural, value, *args, **kwargs)

    hook_class._save_host = _save_host

    def undo() -> None:
        module.host_array, hook_class._save_host = original, save_host

    return undo


def build() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((WIDTH,)),
            keras.layers.Dense(WIDTH, activation="relu", name="wide"),
            keras.layers.Dense(WIDTH, activation="relu", name="big"),
            keras.layers.Dense(3, name="logits"),
        ],
        name="device",
    )
    model.compile(optimizer=keras.optimizers.SGD(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))  # fmt: skip
    return model


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((STEPS * 8, WIDTH)).astype("float32"), rng.integers(0, 3, STEPS * 8).astype(
        "int32"
    )


def keras_run(path: Path) -> dict[str, Any]:
    log: list[tuple[int, int]] = []
    hook = mldbg.keras.Hook(str(path))
    undo = count_copies(keras_adapter, mldbg.keras.Hook, log, [hook])
    model = build()
    x, y = data()
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0, callbacks=[hook])
    routes = dict(hook._stats.routes)
    hook.close()
    undo()
    return {"copies": log, "routes": routes}


def tape_run(path: Path, graph: bool) -> dict[str, Any]:
    import tensorflow as tf

    import mldbg.frameworks.tensorflow as tf_adapter
    import mldbg.tensorflow

    log: list[tuple[int, int]] = []
    hook = mldbg.tensorflow.Hook(str(path))
    undo = count_copies(tf_adapter, mldbg.tensorflow.Hook, log, [hook])
    model = build()
    hook.register_model(model)
    opt = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x, y = data()

    def train_step(xb: Any, yb: Any) -> Any:
        with hook.wrap_tape(tf.GradientTape()) as tape:
            logits = model(xb, training=True)
            loss = loss_fn(yb, logits)
            hook.record(inputs=xb, labels=yb, predictions=logits)
        opt.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    step = tf.function(train_step) if graph else train_step
    for i in range(STEPS):
        step(tf.constant(x[i * 8 : (i + 1) * 8]), tf.constant(y[i * 8 : (i + 1) * 8]))
    routes = dict(hook._stats.routes)
    hook.close()
    undo()
    return {"copies": log, "routes": routes}


def main() -> None:
    out = Path(sys.argv[1])
    backend = keras.backend.backend()
    runs = {"keras": keras_run(out / "keras")}
    if backend == "tensorflow":
        runs["tape_eager"] = tape_run(out / "tape_eager", graph=False)
        runs["tape_graph"] = tape_run(out / "tape_graph", graph=True)
    (out / "manifest.json").write_text(json.dumps({"backend": backend, "runs": runs}))


if __name__ == "__main__":
    main()
