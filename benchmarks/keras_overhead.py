"""Training-step overhead of `mldbg.keras.Hook` on each Keras backend, as ratios to an
uninstrumented `model.fit` of the same model measured in the same run, in interleaved
rounds (base a b c d base a b c d ...).

    python benchmarks/keras_overhead.py [--backends tensorflow,jax,torch] [--steps 300] [--rounds 3]
    python benchmarks/keras_overhead.py --jax-record     # mldbg.jax.Hook.record, in and out of jit
    python benchmarks/keras_overhead.py --model grn --backends tensorflow --scenarios base,default

The model (`--model`): `mlp`, a small MLP for 28x28 inputs (784-256-128-10, ReLU, Adam, batch
64), on random data; or `grn`, many small layers: the keras.io "Gated Residual and Variable
Selection Networks" tabular classifier (6 features encoded to 16 units, a GRN per feature and
one over their concatenation, ~50 Dense/LayerNorm/Dropout layers, sigmoid output, Adam,
binary cross-entropy, batch 128), on random data.
Scenarios:
  default  the default configuration (losses, scalars, weights, biases, gradients every 500 steps)
  w10      weights, biases and gradients every 10 steps
  all10    every collection (layer outputs, activations, inputs, labels...) every 10 steps
  all1     every collection at every step (the worst case)

Each measurement is a fresh worker process (`--worker BACKEND SCENARIO`): it builds the model,
runs `--warmup` steps untimed (compilation of the model's step and of the hook's recording
variant), then times one `fit` of `--steps` steps and, separately, `hook.close()`. Next to
wall time it reports the process CPU time (all threads, so the writer's work counts).
Every backend computes on one thread (ONE_THREAD), for stable figures on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

MODEL = "mlp"  # --model
PROFILE = 0  # --profile N: the worker prints cProfile's N top functions of the timed fit

SCENARIOS = {
    "base": "no hook",
    "default": "default configuration (the two lines: loss every step, statistics)",
    "w10": "weights, biases, gradients every 10 steps",
    "all10": "every collection every 10 steps",
    "all1": "every collection every step",
}
# one compute thread per backend: on a shared 2-core machine extra threads only add noise
ONE_THREAD = {
    "OMP_NUM_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
}
ALL = ["weights", "biases", "gradients", "losses", "scalars", "inputs", "outputs", "labels", "predictions",
       "relu_activations", "optimizer_variables"]  # fmt: skip


def worker(backend: str, scenario: str, steps: int, warmup: int) -> dict:
    os.environ["KERAS_BACKEND"] = backend
    import keras
    import numpy as np

    import mldbg
    import mldbg.keras

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    if MODEL == "grn":
        model, x, y, batch = grn_model(keras, rng, steps)
    else:
        model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(256, activation="relu"),
                                  keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)])  # fmt: skip
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        x = rng.standard_normal((64 * steps, 784)).astype("float32")
        y = rng.integers(0, 10, 64 * steps).astype("int32")
        batch = 64
    out = tempfile.mkdtemp(prefix="mldbg-bench-")
    callbacks, hook = [], None
    if scenario != "base":
        kwargs = {
            "default": {},
            "w10": {"save_config": mldbg.SaveConfig(save_interval=10)},
            "all10": {"save_config": mldbg.SaveConfig(save_interval=10), "include_collections": ALL},
            "all1": {"save_config": mldbg.SaveConfig(save_interval=1), "include_collections": ALL},
        }[scenario]
        hook = mldbg.keras.Hook(out, **kwargs)
        callbacks = [hook]
    head = (
        (lambda a: [c[: batch * warmup] for c in a])
        if isinstance(x, list)
        else (lambda a: a[: batch * warmup])
    )
    model.fit(head(x), y[: batch * warmup], batch_size=batch, epochs=1, verbose=0, callbacks=callbacks)
    if PROFILE:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    c0, t0 = time.process_time(), time.perf_counter()
    model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0, callbacks=callbacks)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if PROFILE:
        import pstats

        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats(
            os.environ.get("MLDBG_BENCH_SORT", "cumulative")
        ).print_stats(PROFILE)
    t1 = time.perf_counter()
    if hook is not None:
        hook.close()
    close = time.perf_counter() - t1
    shutil.rmtree(out, ignore_errors=True)
    return {"backend": backend, "scenario": scenario, "ms_per_step": 1000 * wall / steps,
            "cpu_ms_per_step": 1000 * cpu / steps, "close_s": close}  # fmt: skip


def grn_model(keras, rng, steps: int) -> tuple[Any, list[Any], Any, int]:
    """The keras.io GRN/VSN tabular classifier (many small layers) and `steps` batches of 128."""
    from keras import layers, ops

    class GatedLinearUnit(layers.Layer):
        def __init__(self, units: int) -> None:
            super().__init__()
            self.linear = layers.Dense(units)
            self.sigmoid = layers.Dense(units, activation="sigmoid")

        def call(self, inputs: Any) -> Any:
            return self.linear(inputs) * self.sigmoid(inputs)

    class GatedResidualNetwork(layers.Layer):
        def __init__(self, units: int, dropout_rate: float) -> None:
            super().__init__()
            self.units = units
            self.elu_dense = layers.Dense(units, activation="elu")
            self.linear_dense = layers.Dense(units)
            self.dropout = layers.Dropout(dropout_rate)
            self.gated_linear_unit = GatedLinearUnit(units)
            self.layer_norm = layers.LayerNormalization()
            self.project = layers.Dense(units)

        def call(self, inputs: Any) -> Any:
            x = self.dropout(self.linear_dense(self.elu_dense(inputs)))
            if inputs.shape[-1] != self.units:
                inputs = self.project(inputs)
            return self.layer_norm(inputs + self.gated_linear_unit(x))

    class VariableSelection(layers.Layer):
        def __init__(self, num_features: int, units: int, dropout_rate: float) -> None:
            super().__init__()
            self.grns = [GatedResidualNetwork(units, dropout_rate) for _ in range(num_features)]
            self.grn_concat = GatedResidualNetwork(units, dropout_rate)
            self.softmax = layers.Dense(units=num_features, activation="softmax")

        def call(self, inputs: list[Any]) -> Any:
            v = ops.expand_dims(self.softmax(self.grn_concat(layers.concatenate(inputs))), axis=-1)
            x = ops.stack([self.grns[i](inp) for i, inp in enumerate(inputs)], axis=1)
            return ops.squeeze(ops.matmul(ops.transpose(v, axes=[0, 2, 1]), x), axis=1)

    n, cards = 128 * steps, (12, 5)
    num_inputs = [keras.Input(shape=(1,), name=f"num_{i}") for i in range(4)]
    cat_inputs = [keras.Input(shape=(), dtype="int32", name=f"cat_{i}") for i in range(len(cards))]
    encoded = [layers.Dense(16)(inp) for inp in num_inputs]
    encoded += [layers.Embedding(card, 16)(inp) for inp, card in zip(cat_inputs, cards, strict=True)]
    outputs = layers.Dense(1, activation="sigmoid")(VariableSelection(len(encoded), 16, 0.15)(encoded))
    model = keras.Model(inputs=num_inputs + cat_inputs, outputs=outputs)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss=keras.losses.BinaryCrossentropy(),
                  metrics=[keras.metrics.BinaryAccuracy(name="accuracy")])  # fmt: skip
    x = [rng.standard_normal((n, 1)).astype("float32") for _ in range(4)]
    x += [rng.integers(0, card, n).astype("int32") for card in cards]
    y = (rng.random(n) < 0.3).astype("float32")
    return model, x, y, 128


def jax_record(steps: int, rounds: int) -> None:
    """`mldbg.jax.Hook.record` on steps that save nothing: inside `jax.jit` (host asked each
    step) and outside it, next to the same jitted step without it (a 784-256-10 MLP, batch 64)."""
    for key, value in ONE_THREAD.items():
        os.environ.setdefault(key, value)
    import jax
    import jax.numpy as jnp

    import mldbg
    import mldbg.jax

    out = tempfile.mkdtemp(prefix="mldbg-bench-")
    hook = mldbg.jax.Hook(out, save_config=mldbg.SaveConfig(save_steps=[-1]))  # never saves
    k = jax.random.split(jax.random.key(0), 3)
    params = {"a": {"kernel": jax.random.normal(k[0], (784, 256)) * 0.05, "bias": jnp.zeros(256)},
              "b": {"kernel": jax.random.normal(k[1], (256, 10)) * 0.05, "bias": jnp.zeros(10)}}  # fmt: skip
    x, y = jax.random.normal(k[2], (64, 784)), jnp.arange(64) % 10

    def loss_fn(p):
        h = jax.nn.relu(x @ p["a"]["kernel"] + p["a"]["bias"])
        return -jnp.mean(jax.nn.log_softmax(h @ p["b"]["kernel"] + p["b"]["bias"])[jnp.arange(64), y])

    def make(record: bool):
        def step(i, p):
            loss, grads = jax.value_and_grad(loss_fn)(p)
            if record:
                hook.record(i, params=p, grads=grads, loss=loss)
            return jax.tree_util.tree_map(lambda w, g: w - 0.01 * g, p, grads), loss, grads

        return jax.jit(step)

    def timed(fn) -> float:
        p = params
        jax.block_until_ready(fn(0, p))
        runs = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for i in range(steps):
                p = fn(i, p)
            jax.block_until_ready(p)
            runs.append(1e6 * (time.perf_counter() - t0) / steps)
        return statistics.median(runs)

    plain, inside = make(False), make(True)

    def outside(i, p):
        p, loss, grads = plain(i, p)
        hook.record(i, params=p, grads=grads, loss=loss)
        return p, loss, grads

    base = timed(lambda i, p: plain(i, p[0] if isinstance(p, tuple) else p))
    t_in = timed(lambda i, p: inside(i, p[0] if isinstance(p, tuple) else p))
    t_out = timed(lambda i, p: outside(i, p[0] if isinstance(p, tuple) else p))
    hook.close()
    shutil.rmtree(out, ignore_errors=True)
    print("| JAX step (784-256-10 MLP, batch 64) | us/step (median) | ratio |")
    print("| --- | --- | --- |")
    for what, us in (
        ("jitted, no hook", base),
        ("record() inside jax.jit", t_in),
        ("record() after the jitted step", t_out),
    ):
        print(f"| {what} | {us:.0f} | {us / base:.2f} |")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--backends", default="tensorflow,jax,torch")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--worker", nargs=2, metavar=("BACKEND", "SCENARIO"))
    p.add_argument("--jax-record", action="store_true")
    p.add_argument("--model", default="mlp", choices=("mlp", "grn"))
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--profile", type=int, default=0)
    args = p.parse_args()
    global MODEL, PROFILE
    MODEL, PROFILE = args.model, args.profile
    if args.jax_record:
        jax_record(args.steps, args.rounds)
        return
    if args.worker:
        print(json.dumps(worker(*args.worker, args.steps, args.warmup)))
        return
    env = {**os.environ, **ONE_THREAD, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    results: dict[tuple[str, str], list[dict]] = {}
    scenarios = ["base"] + [s for s in args.scenarios.split(",") if s in SCENARIOS and s != "base"]
    for r in range(args.rounds):
        for backend in args.backends.split(","):
            for scenario in scenarios:
                cmd = [sys.executable, __file__, "--worker", backend, scenario, "--model", args.model,
                       "--steps", str(args.steps), "--warmup", str(args.warmup)]  # fmt: skip
                line = (
                    subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                    .stdout.strip()
                    .splitlines()[-1]
                )
                res = json.loads(line)
                results.setdefault((backend, scenario), []).append(res)
                print(
                    f"round {r} {backend:10} {scenario:8} {res['ms_per_step']:.2f} ms/step", file=sys.stderr
                )
    print("| backend | scenario | ms/step (median) | wall ratio | CPU ratio | close() s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for backend in args.backends.split(","):
        base = results[(backend, "base")]
        for scenario in scenarios:
            what = SCENARIOS[scenario]
            rows = results[(backend, scenario)]
            ratios = [a["ms_per_step"] / b["ms_per_step"] for a, b in zip(rows, base, strict=True)]
            cpu = [a["cpu_ms_per_step"] / b["cpu_ms_per_step"] for a, b in zip(rows, base, strict=True)]
            print(f"| {backend} | {scenario}: {what} | {statistics.median(r['ms_per_step'] for r in rows):.2f} | "
                  f"{statistics.median(ratios):.3f} | {statistics.median(cpu):.3f} | "
                  f"{statistics.median(r['close_s'] for r in rows):.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
