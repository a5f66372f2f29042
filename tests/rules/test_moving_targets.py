"""A TD loss chasing targets that grow with the values it learns is not a divergence
(`mldbg.rules.select.moving_targets`), and a regression on fixed targets whose loss climbs
still is."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import mldbg
from mldbg.torch import Hook

LOSS_RULES = {"loss_change_point", "loss_not_decreasing", "underfitting"}


def _chasing(path: str, steps: int = 1500, seed: int = 0) -> list[float]:
    """A value regression whose targets grow as it trains, as a DQN's bootstrapped targets
    r + gamma max Q_target(s') grow with the values it learns (the PyTorch DQN tutorial's TD
    loss rises tenfold on CartPole): here the returns to fit are scaled by a factor that grows
    1.5 per mille a step (x9.5 over the run); the model keeps up, and its loss rises with the
    targets' variance."""
    torch.manual_seed(seed)
    x = torch.randn(4096, 8)
    value = torch.tanh(x @ torch.randn(8, 4)) @ torch.randn(4)
    model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.SmoothL1Loss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        i = torch.randint(0, 4096, (128,))
        scale = 1.0015**step
        y = scale * (value[i] + 0.3 * torch.randn(128))
        loss = criterion(model(x[i]).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


def _regression(path: str, steps: int = 1500, seed: int = 0) -> list[float]:
    """Fixed targets, a learning rate that a mistaken schedule keeps raising: the loss falls,
    then climbs away."""
    torch.manual_seed(seed)
    x = torch.randn(2048, 10)
    y = x @ torch.randn(10) + 0.1 * torch.randn(2048)
    model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.005**t)
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, 2048, (64,))
        loss = criterion(model(x[i]).squeeze(1), y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if not np.isfinite(losses[-1]):
            break
    hook.close()
    return losses


def _rules(path: str) -> set[str]:
    return {f.rule for f in mldbg.check(path)}


def test_loss_rising_with_its_targets_is_quiet(tmp_path):
    losses = np.asarray(_chasing(str(tmp_path)))
    assert np.median(losses[-200:]) > 4 * np.median(losses[:200])  # the loss did rise, several-fold
    assert not _rules(str(tmp_path)) & LOSS_RULES


def test_regression_on_fixed_targets_climbing_is_caught(tmp_path):
    losses = np.asarray(_regression(str(tmp_path)))
    assert not np.isfinite(losses[-1]) or losses[-1] > 10 * np.min(losses)  # it did climb away
    assert _rules(str(tmp_path)) & LOSS_RULES  # caught as a climb, not only once it is NaN
