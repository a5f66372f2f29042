"""Per-step cost of the default statistics on TensorFlow, computed on the device
(`mldbg.frameworks.tf_statistics`, one compiled call per step) against host copies reduced by
NumPy on the writer thread (the previous path, still the fallback), issue 14.

    python benchmarks/tf_statistics_cost.py [--rounds 5] [--steps 60]

Two trainings, statistics at every step (`statistics_warmup` above the step count):
- `keras-cnn`: Keras 3 (TensorFlow backend) `fit`, a small CNN on 32x32x3 images, batch 32
  (Conv 16 - Conv 32 - pool - Dense 64 - Dense 10, 0.55 M parameters);
- `tape-mlp`: a custom loop with `tf.GradientTape`, eager, 784-512-512-10, batch 64.
Three variants in the same process, alternating in each round: no hook, the two-line hook
(device path), the same hook with its device statistics switched off (host copies). For each:
ms per step of the timed steps (after one untimed warm-up pass with the hook attached), and
the time `hook.close()` takes to drain the writer (the host path's NumPy work happens there).
Medians over rounds, min-max in brackets.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import mldbg.keras  # noqa: E402
import mldbg.tensorflow  # noqa: E402

VARIANTS = ("none", "device", "host")


def keras_cnn() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((32, 32, 3)),
        keras.layers.Conv2D(16, 3, activation="relu", name="conv1"),
        keras.layers.Conv2D(32, 3, activation="relu", name="conv2"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu", name="fc"),
        keras.layers.Dense(10, name="logits"),
    ])  # fmt: skip
    model.compile(optimizer=keras.optimizers.SGD(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))  # fmt: skip
    return model


def hook_for(kind: str, variant: str, steps: int) -> mldbg.keras.Hook | mldbg.tensorflow.Hook | None:
    if variant == "none":
        return None
    cls = mldbg.keras.Hook if kind == "keras-cnn" else mldbg.tensorflow.Hook
    hook = cls(tempfile.mkdtemp(prefix="tfstat-"), statistics_warmup=10 * steps)
    if variant == "host":
        hook._stats.device = None  # every statistics tensor takes the host path
    return hook


def run_keras(variant: str, steps: int) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32 * steps, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 10, 32 * steps).astype("int32")
    model = keras_cnn()
    hook = hook_for("keras-cnn", variant, steps)
    callbacks = [hook] if hook else []
    model.fit(x[:320], y[:320], batch_size=32, epochs=1, verbose=0, callbacks=callbacks)  # warm-up: traces
    t0 = time.perf_counter()
    model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=callbacks, shuffle=False)
    per_step = (time.perf_counter() - t0) / steps
    t1 = time.perf_counter()
    if hook:
        hook.close()
    return per_step, time.perf_counter() - t1


def run_tape(variant: str, steps: int) -> tuple[float, float]:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(512, activation="relu", name="h1"),
                              keras.layers.Dense(512, activation="relu", name="h2"),
                              keras.layers.Dense(10, name="logits")])  # fmt: skip
    opt = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((64, 784)).astype("float32"))
    y = tf.constant(rng.integers(0, 10, 64).astype("int32"))
    hook = hook_for("tape-mlp", variant, steps)
    if hook:
        hook.register_model(model)

    def step() -> None:
        tape_cm = hook.wrap_tape(tf.GradientTape()) if hook else tf.GradientTape()
        with tape_cm as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
            if hook:
                hook.record(inputs=x, labels=y, predictions=logits)
        opt.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)

    for _ in range(10):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    per_step = (time.perf_counter() - t0) / steps
    t1 = time.perf_counter()
    if hook:
        hook.close()
    return per_step, time.perf_counter() - t1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    print(f"tensorflow {tf.__version__}, keras {keras.__version__}, devices: "
          f"{[d.device_type for d in tf.config.list_physical_devices()]}")  # fmt: skip
    for kind, run in (("keras-cnn", run_keras), ("tape-mlp", run_tape)):
        times: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
        for r in range(args.rounds):
            order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
            for variant in order:
                times[variant].append(run(variant, args.steps))
        base = statistics.median(t for t, _ in times["none"])
        for variant in VARIANTS:
            steps_ms = [1e3 * t for t, _ in times[variant]]
            close_ms = [1e3 * c for _, c in times[variant]]
            med = statistics.median(steps_ms)
            extra = "" if variant == "none" else f"  +{med - 1e3 * base:.2f} ms/step over none"
            print(f"{kind:10s} {variant:7s} {med:7.2f} ms/step [{min(steps_ms):.2f}-{max(steps_ms):.2f}]"
                  f"  close {statistics.median(close_ms):7.1f} ms{extra}")  # fmt: skip
        sys.stdout.flush()


if __name__ == "__main__":
    main()
