"""More silent bugs (issue 17): new variants of each class of `tests/rules/silent.py`, on other
architectures (an MLP with Dropout, a CNN with BatchNorm, a tiny transformer encoder), other
optimizers and other places where the bug happens, each with its fixed twin.

`train_bug(out, config, arch=..., bug=..., ...)` trains one variant for `steps` optimizer steps
(evaluation every `eval_every`) and records it in one of the two configurations the issue
measures:
- `"two"`: the README's two lines, `mldbg.torch.Hook(out_dir)` + `register_module` +
  `register_loss`, defaults (the statistics of the default rules);
- `"dense"`: everything recorded every 5 steps (`save_all=True`,
  `SaveConfig(save_interval=5)`): raw tensors, no statistics of the hook.

`VARIANTS` maps a name to its keyword arguments and the rules any of which must fire (an
empty tuple: a fixed twin, nothing may fire).
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

import mldbg
import mldbg.torch
from mldbg import SaveConfig

torch.set_num_threads(1)

CONFIGS = ("two", "dense")


class MLP(nn.Module):
    def __init__(self, n_in: int = 10, n_out: int = 3, dropout: float = 0.3, bn_momentum: float = 0.1):
        super().__init__()
        self.fc1 = nn.Linear(n_in, 32)
        self.bn1 = nn.BatchNorm1d(32, momentum=bn_momentum)
        self.relu1 = nn.ReLU()
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(32, 32)
        self.relu2 = nn.ReLU()
        self.out = nn.Linear(32, n_out)

    def body(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu2(self.fc2(self.drop(self.relu1(self.bn1(self.fc1(x))))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(x))


class CNN(nn.Module):
    """conv-bn-relu-pool x2, dropout, linear head; input (N, 1, 8, 8)."""

    def __init__(self, n_out: int = 3, bn_momentum: float = 0.1):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8, momentum=bn_momentum)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16, momentum=bn_momentum)
        self.relu2 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.drop = nn.Dropout(0.3)
        self.out = nn.Linear(16 * 2 * 2, n_out)

    def body(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu1(self.bn1(self.conv1(x))))
        return self.drop(self.pool(self.relu2(self.bn2(self.conv2(x)))).flatten(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(x))


class Encoder(nn.Module):
    """Token embedding + position embedding, one post-LN transformer layer, mean pool, head."""

    def __init__(self, vocab: int = 50, length: int = 12, n_out: int = 3, d: int = 32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(length, d) * 0.1)
        self.layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.1, batch_first=True)
        self.out = nn.Linear(d, n_out)

    def body(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(self.emb(x) + self.pos).mean(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(x))


def make_data(arch: str, n: int, n_classes: int, regression: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Learnable synthetic data: a fixed random teacher makes the labels."""
    g = torch.Generator().manual_seed(1)
    tg = torch.Generator().manual_seed(1234)
    if arch == "encoder":
        x = torch.randint(0, 50, (n, 12), generator=g)
        counts = torch.stack([((x >= 17 * c) & (x < 17 * (c + 1))).sum(1) for c in range(3)], 1).float()
        return x, (counts[:, :1] - 4.0) / 2.0 if regression else counts.argmax(1)
    if arch == "cnn":
        x = torch.randn(n, 1, 8, 8, generator=g)
        scores = x.flatten(1) @ torch.randn(64, n_classes, generator=tg) / 8
    else:
        x = torch.randn(n, 10, generator=g)
        scores = x @ torch.randn(10, n_classes, generator=tg)
    return x, scores[:, :1] if regression else scores.argmax(1)


def train_bug(
    out_dir: str | Path,
    config: str = "two",
    *,
    arch: str = "mlp",
    bug: str | None = None,
    optimizer: str = "sgd",
    lr: float | None = None,
    steps: int = 40,
    batch: int = 32,
    n_train: int = 512,
    eval_every: int = 10,
    eval_repeat: int = 1,
    regression: bool = False,
    n_classes: int = 3,
    input_scale: float = 1.0,
    freeze_at: int | None = None,
    weight_decay: float = 0.0,
    set_mode: bool = False,
    seed: int = 0,
) -> list[float]:
    """Train one variant; returns the training losses. Bugs:
    `no_zero_grad`, `zero_grad_every_other` (gradients accumulate), `late_head` (the head
    replaced after the optimizer was built), `stale_model` (the optimizer was built on a copy
    of the model: `copy.deepcopy` after `optim.X(model.parameters())`), `lr_to_zero` (a
    LambdaLR whose decay ends after 5 steps: lr 0 from then on), `freeze_set_to_none_false`
    (with `freeze_at`: `zero_grad(set_to_none=False)` keeps zero gradients on the frozen
    layer, so AdamW's weight decay and momentum still move it), `eval_left_on` (no
    `model.train()` after the first evaluation), `train_in_eval` (`model.train()` before the
    evaluation: dropout active, two passes), `bn_momentum_zero`, `eval_not_normalized` (the
    evaluation reads raw inputs, training normalized ones), `broadcast` (MSE of pred [N]
    against target [N, 1]), `same_batch` (`x, y = next(iter(loader))` outside the loop),
    `full_batch` (healthy: the whole training set every step), `shuffled_labels` (labels
    permuted against their inputs in every batch), `clip_tiny` (`clip_grad_norm_` with
    max_norm 1e-8), `loss_times_zero` (`(0 * loss).backward()`), `detached_loss` (backward
    on `loss.detach().requires_grad_()`: no gradient reaches the model)."""
    torch.manual_seed(seed)
    x, y = make_data(arch, n_train + 256, n_classes, regression)
    if input_scale != 1.0:  # raw features far from zero mean, unit variance
        x = x * input_scale + 3.0
    x_train, y_train, x_eval, y_eval = x[:n_train], y[:n_train], x[n_train:], y[n_train:]
    if input_scale != 1.0 and bug not in ("bn_momentum_zero", "raw_inputs"):
        mean, std = x_train.mean(0), x_train.std(0)
        x_train = (x_train - mean) / std  # normalized for training
        if bug != "eval_not_normalized":
            x_eval = (x_eval - mean) / std  # the fixed twin normalizes the evaluation too
    if regression and bug == "broadcast":
        y_train, y_eval = y_train[:, :1], y_eval[:, :1]  # target [N, 1] against pred [N]
    n_out = 1 if regression else n_classes
    momentum = 0.0 if bug == "bn_momentum_zero" else 0.1
    if arch == "mlp":
        model: nn.Module = MLP(n_out=n_out, bn_momentum=momentum)
    elif arch == "cnn":
        model = CNN(n_out=n_out, bn_momentum=momentum)
    elif arch == "encoder":
        model = Encoder(n_out=n_out)
    else:
        raise ValueError(f"unknown arch {arch!r}")
    if lr is None:
        lr = 0.05 if optimizer == "sgd" else 3e-3
    params = model.parameters()
    if optimizer == "sgd":
        opt: torch.optim.Optimizer = torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)
    elif optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    elif optimizer == "adamw":
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay or 0.1)
    else:
        raise ValueError(f"unknown optimizer {optimizer!r}")
    if bug == "stale_model":
        model = copy.deepcopy(model)  # the optimizer holds the original's parameters
    if bug == "late_head":
        model.out = nn.Linear(model.out.in_features, model.out.out_features)  # type: ignore[assignment]
    total = 5 if bug == "lr_to_zero" else 10 * steps
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / total))
    loss_fn: nn.Module = nn.MSELoss() if regression else nn.CrossEntropyLoss()
    if config == "two":
        hook = mldbg.torch.Hook(str(out_dir))
    elif config == "dense":
        hook = mldbg.torch.Hook(str(out_dir), save_config=SaveConfig(save_interval=5), save_all=True)
    else:
        raise ValueError(f"unknown config {config!r}")
    hook.register_module(model)
    hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(seed + 2)
    per_epoch = n_train // batch
    order = torch.randperm(n_train, generator=g)
    first = order[:batch]  # `x, y = next(iter(loader))` outside the loop
    train_mode = True
    losses: list[float] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # MSELoss warns about the broadcast bug
        for step in range(steps):
            if freeze_at is not None and step == freeze_at:
                for p in model.fc1.parameters():  # type: ignore[union-attr]
                    p.requires_grad_(False)
            b = step % per_epoch
            if b == 0 and step > 0:
                order = torch.randperm(n_train, generator=g)
            idx = order[b * batch : (b + 1) * batch]
            if bug == "same_batch":
                idx = first
            elif bug == "full_batch":
                idx = torch.arange(n_train)
            xb, yb = x_train[idx], y_train[idx]
            if bug == "shuffled_labels":
                yb = yb[torch.randperm(len(yb), generator=g)]
            if train_mode:
                model.train()
            if set_mode:
                hook.set_mode(mldbg.Mode.TRAIN)
            if bug == "no_zero_grad" or (bug == "zero_grad_every_other" and step % 2):
                pass
            else:
                opt.zero_grad(set_to_none=bug != "freeze_set_to_none_false")
            pred = model(xb)
            if regression and bug == "broadcast":
                pred = pred[:, 0]
            loss = loss_fn(pred, yb)
            if bug == "loss_times_zero":
                (0 * loss).backward()
            elif bug == "detached_loss":
                loss.detach().requires_grad_().backward()
            else:
                loss.backward()
            if bug == "clip_tiny":
                nn.utils.clip_grad_norm_(model.parameters(), 1e-8)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            if (step + 1) % eval_every == 0:
                model.train() if bug == "train_in_eval" else model.eval()
                if set_mode:
                    hook.set_mode(mldbg.Mode.EVAL)
                with torch.no_grad():
                    for _ in range(eval_repeat):
                        for i in range(0, len(x_eval), 128):
                            p = model(x_eval[i : i + 128])
                            loss_fn(p[:, 0] if regression and bug == "broadcast" else p, y_eval[i : i + 128])
                train_mode = bug != "eval_left_on"
    hook.close()
    return losses


# name -> (train_bug keyword arguments, rules any of which must fire; () for a fixed twin)
VARIANTS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    # gradients never reset
    "no_zero_grad mlp adam": ({"bug": "no_zero_grad", "optimizer": "adam"}, ("gradient_not_reset",)),
    "no_zero_grad cnn sgd": ({"arch": "cnn", "bug": "no_zero_grad"}, ("gradient_not_reset",)),
    "no_zero_grad encoder adam": (
        {"arch": "encoder", "bug": "no_zero_grad", "optimizer": "adam"},
        ("gradient_not_reset",),
    ),
    "zero_grad every other step mlp sgd": ({"bug": "zero_grad_every_other"}, ("gradient_not_reset",)),
    "twin mlp adam": ({"optimizer": "adam"}, ()),
    "twin cnn sgd": ({"arch": "cnn"}, ()),
    "twin encoder adam": ({"arch": "encoder", "optimizer": "adam"}, ()),
    # parameters no optimizer updates
    "late head cnn adam": ({"arch": "cnn", "bug": "late_head", "optimizer": "adam"}, ("unchanged_tensor",)),
    "stale model mlp sgd": ({"bug": "stale_model"}, ("unchanged_tensor",)),
    "lr to zero (LambdaLR) mlp sgd": (
        {"bug": "lr_to_zero", "steps": 60},
        ("unchanged_tensor", "loss_not_decreasing"),
    ),
    "twin mlp sgd": ({}, ()),
    "twin mlp sgd 60 steps": ({"steps": 60}, ()),
    # a frozen layer still updated
    "adamw frozen fc1, set_to_none False": (
        {"bug": "freeze_set_to_none_false", "optimizer": "adamw", "freeze_at": 5},
        ("frozen_layer_updated",),
    ),
    "twin adamw frozen fc1": ({"optimizer": "adamw", "freeze_at": 5}, ()),
    # modes
    "eval left on cnn": ({"arch": "cnn", "bug": "eval_left_on"}, ("train_in_eval_mode",)),
    "model.train() in eval mlp": ({"bug": "train_in_eval", "eval_repeat": 2}, ("nondeterministic_eval",)),
    "model.train() in eval, hook.set_mode(EVAL), cnn": (
        {"arch": "cnn", "bug": "train_in_eval", "eval_repeat": 2, "set_mode": True},
        ("nondeterministic_eval",),
    ),
    "twin mlp two eval passes": ({"eval_repeat": 2}, ()),
    "twin cnn set_mode two eval passes": ({"arch": "cnn", "eval_repeat": 2, "set_mode": True}, ()),
    "bn momentum 0 mlp, raw inputs": (
        {"bug": "bn_momentum_zero", "input_scale": 50.0},
        ("train_eval_discrepancy",),
    ),
    "twin bn momentum 0.1, raw inputs": (
        {"bug": "raw_inputs", "input_scale": 50.0},
        ("not_normalized_data",),
    ),
    "eval not normalized mlp": (
        {"bug": "eval_not_normalized", "input_scale": 50.0},
        ("train_eval_discrepancy", "not_normalized_data"),
    ),
    "twin normalized inputs": ({"input_scale": 50.0}, ()),
    # shapes
    "broadcast pred [N] target [N,1] cnn": (
        {"arch": "cnn", "bug": "broadcast", "regression": True, "lr": 0.01},
        ("batch_dim_mismatch",),
    ),
    "twin regression cnn": ({"arch": "cnn", "regression": True, "lr": 0.01}, ()),
    # data
    "same batch every step": ({"bug": "same_batch"}, ("duplicate_batches",)),
    "twin full batch": ({"bug": "full_batch", "n_train": 256}, ()),
    "twin same batch: a new batch every step": ({}, ()),
    "shuffled labels mlp": ({"bug": "shuffled_labels", "steps": 60}, ("loss_not_decreasing", "underfitting")),
    # updates that vanish
    "clip max_norm 1e-8": ({"bug": "clip_tiny"}, ("unchanged_tensor", "weight_update_ratio")),
    "loss times zero encoder": (
        {"arch": "encoder", "bug": "loss_times_zero", "optimizer": "adam"},
        ("unchanged_tensor", "vanishing_gradient", "all_zero"),
    ),
    "detached loss cnn": ({"arch": "cnn", "bug": "detached_loss"}, ("unchanged_tensor",)),
}

# (variant, configuration) -> why it is not caught (docs/rules.md, "Silent bugs: more variants")
MISSED: dict[tuple[str, str], str] = {
    ("zero_grad every other step mlp sgd", "dense"): "every 5th step's gradient alone: the sawtooth "
    "of period 2 is not seen (sample_change of consecutive steps needs the statistics)",
    ("shuffled labels mlp", "dense"): "the loss saved every 5th step: 12 values in 60 steps, "
    "loss_not_decreasing judges 5 windows of 10 saved values",
}
