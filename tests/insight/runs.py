"""Tiny real PyTorch runs for the insight tests, recorded with `mldbg.torch.Hook`.

- `record_blobs`: a 10-16-16-3 ReLU MLP on three well-separated Gaussian blobs (48 training
  samples, full batch; 24 evaluation samples every 4 steps), with weights, gradients, layer
  outputs, ReLU activations, inputs, labels, predictions, losses, a scalar, and the
  reductions (only) of `gradient/out.weight`.
- `record_images`: a small CNN on 3-channel 8x8 images, recording the input gradient with the
  two lines of the saliency recipe; returns |x.grad| max over channels as PyTorch computed it.
- `record_two_workers`: two ranks (RANK=0/1, include_workers="all") writing one run.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

import mldbg.torch
from mldbg import CollectionConfig, ReductionConfig, SaveConfig
from tests.tiny import SmallCNN, make_data, mlp  # tests.tiny also limits torch to one thread

COLLECTIONS = [
    "weights", "biases", "gradients", "outputs", "relu_activations", "inputs", "labels",
    "predictions", "losses", "scalars",
]  # fmt: skip
REDUCED = "gradient/out.weight"  # saved as reductions only
REDUCTIONS = ReductionConfig(reductions=["mean", "max"], abs_reductions=["mean"], norms=["l2"])
N_TRAIN, N_EVAL, N_CLASSES = 48, 24, 3


def blobs(n: int, seed: int, n_features: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    """Three Gaussian blobs (std 0.5) whose centres lie ~10 apart: trivially separable."""
    centres = torch.randn(N_CLASSES, n_features, generator=torch.Generator().manual_seed(99)) * 2.5
    g = torch.Generator().manual_seed(seed)
    y = torch.randperm(n, generator=g) % N_CLASSES
    return centres[y] + 0.5 * torch.randn(n, n_features, generator=g), y


def record_blobs(out: Path, steps: int = 12, eval_every: int = 4) -> Path:
    torch.manual_seed(0)
    x, y = blobs(N_TRAIN, seed=1)
    x_eval, y_eval = blobs(N_EVAL, seed=2)
    net = mlp(10, N_CLASSES, width=16, depth=2)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    hook = mldbg.torch.Hook(
        out,
        save_config=SaveConfig(save_interval=1),
        include_collections=[*COLLECTIONS, "out_grad_stats"],
        collection_configs=[
            CollectionConfig("out_grad_stats", include_regex=[rf"^{REDUCED}$"], reduction_config=REDUCTIONS)
        ],
    )  # fmt: skip
    hook.register_module(net)
    hook.register_loss(loss_fn)
    for step in range(steps):
        net.train()
        opt.zero_grad()
        logits = net(x)
        loss_fn(logits, y).backward()
        opt.step()
        hook.save_scalar("accuracy", float((logits.argmax(1) == y).float().mean()))
        if (step + 1) % eval_every == 0:
            net.eval()
            with torch.no_grad():
                loss_fn(net(x_eval), y_eval)
    hook.close()
    return out


def record_images(out: Path, steps: int = 3, batch: int = 12) -> dict[int, np.ndarray]:
    """Returns, per global step, |d loss / d x| max over the channels, computed by PyTorch."""
    torch.manual_seed(0)
    x_all, y_all = make_data(
        2 * batch, model="cnn", n_features=0, n_classes=N_CLASSES, channels=3, seed=3, teacher_seed=0,
        imbalance=None, task="classification",
    )  # fmt: skip
    net = SmallCNN(3, N_CLASSES, width=4)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    hook = mldbg.torch.Hook(out, save_config=SaveConfig(save_interval=1), include_collections=COLLECTIONS)
    hook.register_module(net)
    hook.register_loss(loss_fn)
    expected = {}
    for step in range(steps):
        i = (step % 2) * batch
        x = x_all[i : i + batch].clone()
        x.requires_grad_()  # recipe, line 1: before the forward
        opt.zero_grad()
        loss_fn(net(x), y_all[i : i + batch]).backward()
        hook.save_tensor("gradient/model_input_0", x.grad)  # recipe, line 2: after backward
        opt.step()
        assert x.grad is not None
        expected[step] = x.grad.abs().amax(dim=1).numpy().copy()
    hook.close()
    return expected


def record_two_workers(out: Path, steps: int = 3) -> Path:
    """Two ranks of one job, run one after the other in this process (RANK/WORLD_SIZE set as a
    launcher would): each trains on its own shard and writes its own records."""
    saved = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE")}
    try:
        for rank in (0, 1):
            os.environ.update(RANK=str(rank), WORLD_SIZE="2")
            torch.manual_seed(0)  # same initial weights, different data: different gradients
            x, y = blobs(16, seed=10 + rank)
            net = mlp(10, N_CLASSES, width=8, depth=1)
            opt = torch.optim.SGD(net.parameters(), lr=0.05)
            loss_fn = nn.CrossEntropyLoss()
            hook = mldbg.torch.Hook(
                out, save_config=SaveConfig(save_interval=1), include_workers="all",
                include_collections=["weights", "gradients", "losses"],
            )  # fmt: skip
            hook.register_module(net)
            hook.register_loss(loss_fn)
            for _ in range(steps):
                opt.zero_grad()
                loss_fn(net(x), y).backward()
                opt.step()
            hook.close()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return out
