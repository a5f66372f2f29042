"""Tiny real Gluon trainings for the MXNet tests, with injectable defects.

    train(path)                       # healthy MLP 10-32-32-3, ReLU, SGD
    train(path, lr=1e12)              # explodes: NaN / inf
    train(path, bias_init=-10.0)      # the ReLUs are dead from the start
    train(path, hybridize=True)       # the same net, hybridized before it is registered
    train(path, activation="tanh", input_scale=100.0)  # unnormalized inputs: saturated tanh

Layers: `0` (Dense, with a fused ReLU `0.act`), `1` (Dense), `2` (Activation, relu), `3` (Dense).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd
from mxnet.gluon import nn

import mldbg.mxnet

N_FEATURES, N_CLASSES = 10, 3


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Inputs N(0, 1) and labels from a fixed random linear teacher: learnable, balanced."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, N_FEATURES)).astype("float32")
    teacher = np.random.default_rng(42).standard_normal((N_FEATURES, N_CLASSES))
    return x, np.argmax(x @ teacher, axis=1).astype("float32")


def mlp(bias_init: float = 0.0, activation: str = "relu", width: int = 32) -> nn.HybridSequential:
    net = nn.HybridSequential()
    net.add(nn.Dense(width, activation=activation), nn.Dense(width), nn.Activation(activation))
    net.add(nn.Dense(N_CLASSES))
    mx.random.seed(0)
    net.initialize(mx.init.Xavier())
    net(nd.zeros((1, N_FEATURES)))  # shapes known now: the biases can be set
    if bias_init:
        for name, p in net._collect_params_with_prefix().items():
            if name.endswith("bias") and not name.startswith("3"):
                p.set_data(nd.full(p.shape, bias_init))
    return net


def train(
    out_dir: str | Path,
    *,
    lr: float = 0.1,
    bias_init: float = 0.0,
    activation: str = "relu",
    hybridize: bool = False,
    input_scale: float = 1.0,
    steps: int = 60,
    batch_size: int = 32,
    eval_every: int | None = 20,
    **hook_options: Any,
) -> mldbg.mxnet.Hook:
    """Train the tiny MLP for `steps` steps (an evaluation pass of 2 batches every
    `eval_every`), recorded by a hook with `hook_options`; returns the closed hook."""
    x, y = data(steps * batch_size)
    xv, yv = data(256, seed=1)
    x, xv = x * input_scale, xv * input_scale
    net = mlp(bias_init, activation)
    if hybridize:
        net.hybridize()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    with mldbg.mxnet.Hook(out_dir, **hook_options) as hook:
        hook.register_block(net)
        hook.register_loss(loss_fn)
        for step in range(steps):
            xb = nd.array(x[step * batch_size : (step + 1) * batch_size])
            yb = nd.array(y[step * batch_size : (step + 1) * batch_size])
            with autograd.record():
                loss = loss_fn(net(xb), yb)
            loss.backward()
            trainer.step(batch_size)
            if eval_every and (step + 1) % eval_every == 0:
                for i in range(2):
                    loss_fn(net(nd.array(xv[i * 128 : (i + 1) * 128])), nd.array(yv[i * 128 : (i + 1) * 128]))
    return hook
