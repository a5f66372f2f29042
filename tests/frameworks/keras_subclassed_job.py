"""Subclassed Keras models (the layers called in `call()`) trained with and without
`mldbg.keras.Hook`, for test_keras_subclassed.py; run in a subprocess per backend:
`KERAS_BACKEND=... python keras_subclassed_job.py OUT_DIR`.

- `bigru`: a sequence tagger, `Embedding(mask_zero=True)`, `Bidirectional(GRU)`, a per-token
  softmax `Dense`;
- `conv`: the same tagger with a `Conv1D` (relu) in place of the recurrent layer;
- `custom_step`: the Conv1D tagger with its own `train_step` (a `GradientTape` on TensorFlow,
  `stateless_call` on JAX, `loss.backward()` on PyTorch);
- `loop`: a `Dense` applied in a `keras.ops.fori_loop` (on TensorFlow a `tf.while_loop` the
  traced step cannot read from: its outputs are skipped, with one warning).

Each model trains from the same seed twice, with the two lines (`Hook(out_dir)`) and with a plain
callback in its place; the manifest holds both runs' per-batch losses and final weights' sums,
and the warnings the hook gave.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import keras
import numpy as np

import mldbg.keras

VOCAB, LENGTH, TAGS, BATCH, STEPS = 20, 6, 3, 8, 4


class Tagger(keras.Model):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.embed = keras.layers.Embedding(VOCAB, 8, mask_zero=True, name="embed")
        if kind == "bigru":
            self.mid = keras.layers.Bidirectional(keras.layers.GRU(4, return_sequences=True), name="mid")
        else:
            self.mid = keras.layers.Conv1D(8, 3, padding="same", activation="relu", name="mid")
        self.out = keras.layers.Dense(TAGS, activation="softmax", name="out")

    def call(self, inputs: Any, training: Any = None) -> Any:
        return self.out(self.mid(self.embed(inputs)))


class CustomStep(Tagger):
    """A custom `train_step` per backend, as the Keras guides write it."""

    def train_step(self, *args: Any) -> Any:
        backend = keras.backend.backend()
        if backend == "jax":
            return self._jax_step(*args)
        x, y = args[-1]
        if backend == "tensorflow":
            import tensorflow as tf

            with tf.GradientTape() as tape:
                loss = self.compute_loss(x=x, y=y, y_pred=self(x, training=True))
            grads = tape.gradient(loss, self.trainable_weights)
        else:
            self.zero_grad()
            loss = self.compute_loss(x=x, y=y, y_pred=self(x, training=True))
            loss.backward()
            grads = [v.value.grad for v in self.trainable_weights]
            import torch

            with torch.no_grad():
                self.optimizer.apply(grads, self.trainable_weights)
            return {"loss": loss}
        self.optimizer.apply(grads, self.trainable_weights)
        return {"loss": loss}

    def _jax_step(self, state: Any, data: Any) -> Any:
        import jax

        trainable, non_trainable, opt_vars, metric_vars = state
        x, y = data

        def loss_fn(tv: Any) -> Any:
            y_pred, ntv = self.stateless_call(tv, non_trainable, x, training=True)
            return keras.losses.sparse_categorical_crossentropy(y, y_pred).mean(), ntv

        (loss, non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(trainable)
        trainable, opt_vars = self.optimizer.stateless_apply(opt_vars, grads, trainable)
        return {"loss": loss}, (trainable, non_trainable, opt_vars, metric_vars)


class Loop(keras.Model):
    """A `Dense` applied three times in a `fori_loop`, only ever called inside the loop."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = keras.layers.Embedding(VOCAB, 8, name="embed")
        self.step = keras.layers.Dense(8, activation="tanh", name="step")
        self.out = keras.layers.Dense(TAGS, activation="softmax", name="out")

    def build(self, input_shape: Any) -> None:
        self.embed.build(input_shape)
        self.step.build((*input_shape, 8))
        self.out.build((*input_shape, 8))

    def call(self, inputs: Any, training: Any = None) -> Any:
        h = self.embed(inputs)
        h = keras.ops.fori_loop(0, 3, lambda i, h: self.step(h), h)
        return self.out(h)


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.integers(1, VOCAB, (BATCH * STEPS, LENGTH)).astype("int32")
    x[::2, LENGTH - 2 :] = 0  # padding
    y = ((x + np.roll(x, 1, axis=1)) % TAGS).astype("int32")  # learnable from a token and its left neighbour
    return x, y


class Losses(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.losses: list[float] = []

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.losses.append(float(logs["loss"]))


def train(kind: str, path: Path | None) -> dict[str, Any]:
    keras.utils.set_random_seed(0)
    model = Loop() if kind == "loop" else CustomStep("conv") if kind == "custom_step" else Tagger(kind)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy")
    x, y = data()
    losses = Losses()
    callbacks: list[Any] = [losses] + ([mldbg.keras.Hook(str(path))] if path is not None else [])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=callbacks)
    ours = [str(w.message) for w in caught if str(w.message).startswith("mldbg")]
    if path is not None:
        callbacks[1].close()
    weights = [float(np.sum(keras.ops.convert_to_numpy(v.value), dtype=np.float64)) for v in model.weights]
    return {"losses": losses.losses, "weights": weights, "warnings": ours}


def main() -> None:
    out = Path(sys.argv[1])
    manifest: dict[str, Any] = {"backend": keras.backend.backend()}
    for kind in ("bigru", "conv", "custom_step", "loop"):
        manifest[kind] = {"hook": train(kind, out / kind), "plain": train(kind, None)}
    (out / "manifest.json").write_text(json.dumps(manifest))


if __name__ == "__main__":
    main()
