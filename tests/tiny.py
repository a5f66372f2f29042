"""Tiny real PyTorch trainings, recorded with `mldbg.torch.Hook`, with injectable defects.

Shared by every test suite that needs a real run: `train(out_dir, ...)` trains a small MLP or
CNN on synthetic data (a fixed random "teacher" makes the labels learnable), records it, and
returns a `TinyRun` with the path and the losses. Every defect is a keyword:

    train(path)                                   # healthy MLP, ReLU, SGD
    train(path, lr=1e12)                          # explodes: NaN / inf
    train(path, init="negative_bias")             # kills the ReLUs
    train(path, lr=1e-10)                         # tiny updates, loss does not move
    train(path, activation="tanh", init="huge")   # saturated tanh
    train(path, activation="sigmoid", depth=10)   # vanishing gradients
    train(path, input_scale=100, input_shift=50)  # inputs not normalized
    train(path, imbalance=0.97)                   # 97% of the labels are class 0
    train(path, shuffle_labels=True)              # random labels: memorize, overfit
    train(path, n_train=16)                       # tiny train set: overfit
    train(path, frozen_optimizer=True)            # the optimizer never moves the weights
    train(path, freeze=("fc1",))                  # fc1 frozen on purpose (healthy)
    train(path, swap_classes=(0, 1))              # classes 0 and 1 swapped in the training labels
    train(path, missing_zero_grad=True)           # gradients accumulate: no optimizer.zero_grad()
    train(path, spike_at=40)                      # one corrupted batch (inputs x spike_scale)
    train(path, logit_scale="learned")            # an unclamped learnable logit scale (temperature)
    train(path, maximize=True)                    # the optimizer maximizes the loss: logits grow
    train(path, pair_noise={(7, 1): 0.4})         # 40% of class 7 labelled 1 in the training set
    train(path, late_head=True)                   # head replaced after the optimizer was built
    train(path, stop_updating_at=30)              # the optimizer stops stepping at step 30

Layer names are stable (`fc1`, `relu1`, ..., `out`; `conv1`, `bn1`, ...) so tests can name tensors.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

import mldbg.torch
from mldbg import SaveConfig

torch.set_num_threads(1)  # tiny models: threads only contend on a shared 2-core machine

ALL_COLLECTIONS = (
    "weights", "biases", "gradients", "losses", "scalars", "inputs", "outputs", "labels",
    "predictions", "relu_activations", "tanh_activations", "sigmoid_activations",
)  # fmt: skip

ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
    "leaky_relu": nn.LeakyReLU,
}


@dataclass
class TinyRun:
    """What a tiny training produced: where it was recorded and how it went."""

    path: str
    train_losses: list[float] = field(default_factory=list)
    eval_losses: list[float] = field(default_factory=list)  # one per evaluation pass
    eval_accuracy: list[float] = field(default_factory=list)
    steps: int = 0

    def __str__(self) -> str:
        tl = self.train_losses
        return (
            f"TinyRun({self.path}: train loss {tl[0]:.3g} -> {tl[-1]:.3g}"
            + (
                f", eval loss {self.eval_losses[0]:.3g} -> {self.eval_losses[-1]:.3g}"
                if self.eval_losses
                else ""
            )
            + ")"
        )


# models ---------------------------------------------------------------------------------
def mlp(n_in: int, n_out: int, width: int = 32, depth: int = 2, activation: str = "relu") -> nn.Module:
    """`depth` hidden layers `fc{i}` + `{activation}{i}`, then `out`."""
    layers: list[tuple[str, nn.Module]] = []
    d = n_in
    for i in range(1, depth + 1):
        layers.append((f"fc{i}", nn.Linear(d, width)))
        layers.append((f"{activation}{i}", ACTIVATIONS[activation]()))
        d = width
    layers.append(("out", nn.Linear(d, n_out)))
    return nn.Sequential(OrderedDict(layers))


class SmallCNN(nn.Module):
    """conv1-bn1-relu1-pool, conv2-bn2-relu2-pool, fc. Input (N, C, 8, 8)."""

    def __init__(
        self, channels: int, n_out: int, width: int = 8, activation: str = "relu", batchnorm: bool = True
    ):
        super().__init__()
        act = ACTIVATIONS[activation]
        self.conv1 = nn.Conv2d(channels, width, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(width) if batchnorm else nn.Identity()
        setattr(self, f"{activation}1", act())
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(2 * width) if batchnorm else nn.Identity()
        setattr(self, f"{activation}2", act())
        self.pool = nn.MaxPool2d(2)
        self.out = nn.Linear(2 * width * 2 * 2, n_out)
        self._act = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a1, a2 = getattr(self, f"{self._act}1"), getattr(self, f"{self._act}2")
        x = self.pool(a1(self.bn1(self.conv1(x))))
        x = self.pool(a2(self.bn2(self.conv2(x))))
        return self.out(x.flatten(1))


class ScaledLogits(nn.Module):
    """`net(x) * exp(scale)`: a temperature as CLIP learns it. Unclamped, a learned scale
    grows without bound on separable data (CLIP clamps it at log 100)."""

    def __init__(self, net: nn.Module, learned: bool = True):
        super().__init__()
        self.net = net
        self.scale = nn.Parameter(torch.zeros(()), requires_grad=learned)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x) * self.scale.exp()


def apply_init(model: nn.Module, init: str | Callable[[nn.Module], None] | None) -> None:
    """Injected initialization defects (None keeps PyTorch's defaults)."""
    if init is None:
        return
    if callable(init):
        init(model)
        return
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".bn" in f".{name}" or name.startswith("bn"):
                continue  # BatchNorm keeps its own init
            is_bias = name.endswith("bias")
            last = name.startswith("out.")
            if init == "zero":
                p.zero_()
            elif init == "constant":
                p.fill_(0.1)
            elif init == "negative_bias":  # kills every ReLU: pre-activations all < 0
                if is_bias and not last:
                    p.fill_(-10.0)
            elif init == "huge":
                if not is_bias:
                    p.normal_(0.0, 10.0)
            elif init == "tiny":
                if not is_bias:
                    p.normal_(0.0, 1e-5)
            elif init == "xavier":
                if not is_bias and p.dim() >= 2:
                    nn.init.xavier_uniform_(p)
            elif init == "kaiming":
                if not is_bias and p.dim() >= 2:
                    nn.init.kaiming_normal_(p, nonlinearity="relu")
            else:
                raise ValueError(f"unknown init {init!r}")


# data -----------------------------------------------------------------------------------
def make_data(
    n: int,
    *,
    model: str,
    n_features: int,
    n_classes: int,
    channels: int,
    seed: int,
    teacher_seed: int,
    imbalance: float | None,
    task: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Learnable synthetic data: labels come from a fixed random linear teacher."""
    g = torch.Generator().manual_seed(seed)
    tg = torch.Generator().manual_seed(teacher_seed)
    if model == "cnn":  # class c: a wave of its own frequency and orientation, random phase
        y = torch.randint(0, n_classes, (n,), generator=g)
        if imbalance is not None:
            y = torch.where(
                torch.rand(n, generator=g) < imbalance, 0, torch.randint(1, n_classes, (n,), generator=g)
            )
        freqs = torch.tensor(
            [
                [1 + c // 4, 0]
                if c % 4 == 0
                else [0, 1 + c // 4]
                if c % 4 == 1
                else [1 + c // 4, 1 + c // 4]
                if c % 4 == 2
                else [1 + c // 4, -1 - c // 4]
                for c in range(n_classes)
            ],
            dtype=torch.float32,
        )
        i, j = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
        f = freqs[y]
        phase = torch.rand(n, 1, 1, generator=g) * 2 * math.pi
        wave = torch.sin(2 * math.pi * (f[:, 0, None, None] * i + f[:, 1, None, None] * j) / 8 + phase)
        x = 0.8 * torch.randn(n, channels, 8, 8, generator=g) + wave[:, None] * 0.9
        if task == "regression":
            return x, y[:, None].float()
        return x, y
    else:
        x = torch.randn(n, n_features, generator=g)
        w = torch.randn(n_features, n_classes, generator=tg)
        scores = x @ w
    if task == "regression":
        return x, scores[:, :1] + 0.1 * torch.randn(n, 1, generator=g)
    y = scores.argmax(1)
    if imbalance is not None:  # keep a share `imbalance` of class 0, drop the rest to fit
        idx0 = (y == 0).nonzero().flatten()
        rest = (y != 0).nonzero().flatten()
        n0 = min(len(idx0), int(round(imbalance * n)))
        n_rest = max(1, int(round(n0 * (1 - imbalance) / imbalance)))
        keep = torch.cat([idx0[:n0], rest[:n_rest]])
        keep = keep[torch.randperm(len(keep), generator=g)]
        x, y = x[keep], y[keep]
    return x, y


# training -------------------------------------------------------------------------------
def train(
    out_dir: str | Path,
    *,
    model: str = "mlp",
    activation: str = "relu",
    depth: int = 2,
    width: int = 32,
    n_features: int = 10,
    n_classes: int = 3,
    channels: int = 1,
    batchnorm: bool = True,
    task: str = "classification",
    optimizer: str = "sgd",
    lr: float | None = None,
    momentum: float = 0.0,
    steps: int = 100,
    batch_size: int = 32,
    n_train: int = 512,
    n_eval: int = 256,
    eval_every: int | None = 10,
    eval_batch_size: int = 128,
    init: str | Callable[[nn.Module], None] | None = None,
    input_scale: float = 1.0,
    input_shift: float = 0.0,
    imbalance: float | None = None,
    label_noise: float = 0.0,
    shuffle_labels: bool = False,
    swap_classes: tuple[int, int] | None = None,
    freeze: Sequence[str] = (),
    frozen_optimizer: bool = False,
    missing_zero_grad: bool = False,
    spike_at: int | None = None,
    spike_scale: float = 30.0,
    logit_scale: str | None = None,
    pair_noise: dict[tuple[int, int], float] | None = None,
    late_head: bool = False,
    maximize: bool = False,
    stop_updating_at: int | None = None,
    seed: int = 0,
    save_interval: int = 1,
    eval_save_interval: int | None = None,
    include_collections: Sequence[str] | None = ALL_COLLECTIONS,
    reduction_config: Any = None,
    save_scalars: bool = False,
    hook_kwargs: dict[str, Any] | None = None,
    default_hook: bool = False,
) -> TinyRun:
    """Train a tiny model for `steps` optimizer steps, recorded into `out_dir`.

    Healthy by default (a 2-hidden-layer ReLU MLP with SGD, lr 0.1, 3 classes, 512 samples).
    `lr=None` picks a sane rate for the optimizer (SGD 0.1, Adam 1e-2). `default_hook=True`
    records with the two lines of the README, `Hook(out_dir)` (no save config, no collections:
    the default statistics every step), ignoring `save_interval` and `include_collections`.
    """
    torch.manual_seed(seed)
    out_dir = str(out_dir)
    x, y = make_data(
        (n_train + n_eval) * (6 if imbalance is not None else 1), model=model, n_features=n_features, n_classes=n_classes, channels=channels,
        seed=seed + 1, teacher_seed=1234, imbalance=imbalance, task=task,
    )  # fmt: skip
    n_eval = min(n_eval, len(x) // 3)
    x_train, y_train = x[: len(x) - n_eval][:n_train], y[: len(x) - n_eval][:n_train]
    x_eval, y_eval = x[len(x) - n_eval :], y[len(x) - n_eval :]
    g = torch.Generator().manual_seed(seed + 2)
    if task == "classification":
        if shuffle_labels:
            y_train = torch.randint(0, n_classes, y_train.shape, generator=g)
        elif label_noise > 0:
            flip = torch.rand(len(y_train), generator=g) < label_noise
            y_train = torch.where(flip, torch.randint(0, n_classes, y_train.shape, generator=g), y_train)
        for (src, dst), share in (pair_noise or {}).items():  # label noise concentrated on a pair
            flip = (y_train == src) & (torch.rand(len(y_train), generator=g) < share)
            y_train = torch.where(flip, dst, y_train)
        if swap_classes is not None:  # a labelling bug in the training set only
            a, b = swap_classes
            y_train = torch.where(y_train == a, b, torch.where(y_train == b, a, y_train))
    x_train = x_train * input_scale + input_shift
    x_eval = x_eval * input_scale + input_shift

    n_out = 1 if task == "regression" else n_classes
    if model == "mlp":
        net: nn.Module = mlp(n_features, n_out, width, depth, activation)
    elif model == "cnn":
        net = SmallCNN(channels, n_out, width=max(4, width // 4), activation=activation, batchnorm=batchnorm)
    else:
        raise ValueError(f"unknown model {model!r}")
    apply_init(net, init)
    if logit_scale is not None:  # CLIP-style temperature: logits * exp(s), s learned
        net = ScaledLogits(net, learned=logit_scale == "learned")
    for name, p in net.named_parameters():
        if any(name.startswith(prefix) for prefix in freeze):
            p.requires_grad_(False)
    params = [p for p in net.parameters() if p.requires_grad]
    if lr is None:
        lr = 0.1 if optimizer == "sgd" else 1e-2
    if frozen_optimizer:
        lr = 0.0
    if optimizer == "sgd":
        opt: torch.optim.Optimizer = torch.optim.SGD(params, lr=lr, momentum=momentum, maximize=maximize)
    elif optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr, maximize=maximize)
    else:
        raise ValueError(f"unknown optimizer {optimizer!r}")
    if late_head:  # a head attached after the optimizer was built: the optimizer never sees it
        head = net.out if model == "cnn" else net[-1]
        fresh = nn.Linear(head.in_features, head.out_features)
        if model == "cnn":
            net.out = fresh
        else:
            net[-1] = fresh
    loss_fn: nn.Module = nn.MSELoss() if task == "regression" else nn.CrossEntropyLoss()

    save_config = SaveConfig(save_interval=save_interval)
    if eval_save_interval is not None:
        from mldbg import Mode

        save_config = SaveConfig(
            save_interval=save_interval,
            mode_save_configs={Mode.EVAL: SaveConfig(save_interval=eval_save_interval)},
        )
    if default_hook:
        hook = mldbg.torch.Hook(out_dir, reduction_config=reduction_config, **(hook_kwargs or {}))
    else:
        hook = mldbg.torch.Hook(
            out_dir,
            **{
                "save_config": save_config,
                "include_collections": None if include_collections is None else list(include_collections),
                "reduction_config": reduction_config,
                **(hook_kwargs or {}),
            },
        )
    hook.register_module(net)
    hook.register_loss(loss_fn)
    run = TinyRun(out_dir)
    n_batches = max(1, math.ceil(len(x_train) / batch_size))
    order = torch.randperm(len(x_train), generator=g)
    with np.errstate(all="ignore"):
        for step in range(steps):
            b = step % n_batches
            if b == 0 and step > 0:
                order = torch.randperm(len(x_train), generator=g)
            idx = order[b * batch_size : (b + 1) * batch_size]
            net.train()
            if not missing_zero_grad:
                opt.zero_grad()
            xb = x_train[idx] * spike_scale if step == spike_at else x_train[idx]
            loss = loss_fn(net(xb), y_train[idx])
            loss.backward()
            if stop_updating_at is None or step < stop_updating_at:
                opt.step()
            run.train_losses.append(float(loss.detach()))
            if save_scalars:
                hook.save_scalar("train_loss", float(loss.detach()))
            if eval_every and (step + 1) % eval_every == 0:
                net.eval()
                total, correct, count = 0.0, 0, 0
                with torch.no_grad():
                    for i in range(0, len(x_eval), eval_batch_size):
                        xb, yb = x_eval[i : i + eval_batch_size], y_eval[i : i + eval_batch_size]
                        logits = net(xb)
                        total += float(loss_fn(logits, yb)) * len(xb)
                        if task == "classification":
                            correct += int((logits.argmax(1) == yb).sum())
                        count += len(xb)
                run.eval_losses.append(total / max(count, 1))
                run.eval_accuracy.append(correct / max(count, 1))
    hook.close()
    run.steps = steps
    return run


class Tokens(torch.utils.data.Dataset):
    """Random token ids for a tiny language model's classifier (a Hugging Face `Trainer`'s
    dataset: `input_ids` and `labels`); the label is whether the second token is in the upper
    half of the vocabulary (learnable)."""

    def __init__(self, n: int, seed: int = 0, length: int = 12, vocabulary: int = 100):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, vocabulary, (n, length), generator=g)
        self.labels = (self.ids[:, 1] > vocabulary // 2).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}
