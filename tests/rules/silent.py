"""Tiny real trainings with silent bugs (issue 17), recorded with the two lines of the README
(`mldbg.torch.Hook(out_dir)`: the statistics of the default rules), and their fixed twins.

`train_silent(out, bug=...)` trains a small MLP (fc1 - bn1 - relu1 - dropout - out) on
learnable synthetic data for `steps` optimizer steps, evaluating every `eval_every` steps.
The `silent_run` fixture trains each scenario of `SCENARIOS` once per session.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mldbg
import mldbg.torch

torch.set_num_threads(1)


class Net(nn.Module):
    def __init__(self, n_out: int = 3, functional_dropout: bool = False, bn_momentum: float | None = 0.1):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.bn1 = nn.BatchNorm1d(32, momentum=bn_momentum)
        self.relu1 = nn.ReLU()
        self.drop = nn.Dropout(0.2)
        self.out = nn.Linear(32, n_out)
        self.functional_dropout = functional_dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.relu1(self.bn1(self.fc1(x)))
        h = F.dropout(h, 0.2) if self.functional_dropout else self.drop(h)  # F.dropout: training=True
        return self.out(h)


def train_silent(
    out_dir: str | Path,
    *,
    bug: str | None = None,
    steps: int = 30,
    batch: int = 32,
    n_train: int = 256,
    eval_every: int = 10,
    eval_repeat: int = 1,
    input_scale: float = 1.0,
    regression: bool = False,
    set_mode: bool = False,
    momentum: float = 0.0,
    freeze_at: int | None = None,
    set_to_none: bool = True,
    seed: int = 0,
) -> None:
    """bugs: `eval_left_on` (no model.train() after the first evaluation), `functional_dropout`
    (F.dropout active in eval), `bn_momentum_zero` (BatchNorm's running statistics never
    follow the data), `broadcast` (MSELoss of pred [N, 1] against target [N]),
    `duplicated_loader` (every batch served twice in a row), `same_batch` (the first batch
    every step), `freeze_attribute` (`model.fc1.requires_grad = False`: freezes nothing),
    `eval_in_train_mode` (the evaluation forgets `model.eval()`: dropout and BatchNorm active)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(n_train + 128, 10, generator=g)
    scores = x @ torch.randn(10, 3, generator=torch.Generator().manual_seed(1234))
    y = scores[:, :1] if regression else scores.argmax(1)
    x = x * input_scale
    x_train, y_train, x_eval, y_eval = x[:n_train], y[:n_train], x[n_train:], y[n_train:]
    if regression and bug == "broadcast":
        y_train, y_eval = y_train[:, 0], y_eval[:, 0]  # target [N] against pred [N, 1]
    model = Net(
        1 if regression else 3, bug == "functional_dropout", 0.0 if bug == "bn_momentum_zero" else 0.1
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=momentum)
    loss_fn: nn.Module = nn.MSELoss() if regression else nn.CrossEntropyLoss()
    hook = mldbg.torch.Hook(str(out_dir))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    if bug == "freeze_attribute":
        model.fc1.requires_grad = False  # an attribute on the module: freezes nothing
    per_epoch = n_train // batch
    order = torch.randperm(n_train, generator=g)
    train_mode = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # MSELoss warns about the broadcast bug
        for step in range(steps):
            if freeze_at is not None and step == freeze_at:
                for p in model.fc1.parameters():
                    p.requires_grad_(False)
            b = step // 2 if bug == "duplicated_loader" else 0 if bug == "same_batch" else step
            if b % per_epoch == 0 and b > 0 and bug != "duplicated_loader":
                order = torch.randperm(n_train, generator=g)
            idx = order[(b % per_epoch) * batch : (b % per_epoch + 1) * batch]
            if train_mode:
                model.train()
            if set_mode:
                hook.set_mode(mldbg.Mode.TRAIN)
            opt.zero_grad(set_to_none=set_to_none)
            loss_fn(model(x_train[idx]), y_train[idx]).backward()
            opt.step()
            if (step + 1) % eval_every == 0:
                model.train() if bug == "eval_in_train_mode" else model.eval()  # forgot model.eval()
                if set_mode:
                    hook.set_mode(mldbg.Mode.EVAL)
                with torch.no_grad():
                    for _ in range(eval_repeat):  # e.g. one pass for the loss, one for the accuracy
                        for i in range(0, len(x_eval), 64):
                            loss_fn(model(x_eval[i : i + 64]), y_eval[i : i + 64])
                train_mode = bug != "eval_left_on"
    hook.close()


SCENARIOS: dict[str, dict[str, Any]] = {
    "healthy": {"eval_repeat": 2},
    "eval_left_on": {"bug": "eval_left_on"},
    "eval_left_on_set_mode": {"bug": "eval_left_on", "set_mode": True},
    "healthy_set_mode": {"set_mode": True},
    "functional_dropout": {"bug": "functional_dropout", "eval_repeat": 2},
    "eval_in_train_mode": {"bug": "eval_in_train_mode"},
    "bn_momentum_zero": {"bug": "bn_momentum_zero", "input_scale": 100.0},
    "healthy_scaled_inputs": {"input_scale": 100.0},
    "broadcast": {"bug": "broadcast", "regression": True},
    "healthy_regression": {"regression": True},
    "duplicated_loader": {"bug": "duplicated_loader"},
    "same_batch": {"bug": "same_batch"},
    "freeze_with_momentum": {"momentum": 0.9, "freeze_at": 5, "set_to_none": False},
    "healthy_freeze_with_momentum": {"momentum": 0.9, "freeze_at": 5, "set_to_none": True},
    "freeze_attribute": {"bug": "freeze_attribute"},
    "healthy_frozen_fc1": {"freeze_at": 0},
}
HEALTHY_SILENT = [n for n in SCENARIOS if n.startswith("healthy")]


@pytest.fixture(scope="session")
def silent_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], str]:
    """silent_run(name) -> path of the two-line recording of scenario `name` (trained once)."""
    root = tmp_path_factory.mktemp("silent_runs")
    done: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in done:
            path = root / name
            train_silent(path, **SCENARIOS[name])
            done[name] = str(path)
        return done[name]

    return get
