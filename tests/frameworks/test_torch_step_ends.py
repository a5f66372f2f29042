"""Where a TRAIN step ends: at the optimizer step; with gradient accumulation after the last
micro-batch; with L-BFGS after all the closure's evaluations; and, when an update is skipped
(AMP's GradScaler on overflow, a loop that drops a bad batch), at the next iteration's forward
that finds the gradients reset."""

from __future__ import annotations

import torch
from torch import nn

import mldbg
import mldbg.torch


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def _steps(path) -> int:
    return len(mldbg.create_trial(str(path)).steps())


def test_lbfgs_closure_evaluations_are_one_step(tmp_path):
    net = _net()
    opt = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=5)
    x, y = torch.randn(64, 4), torch.randn(64, 1)

    def closure():
        opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        return loss

    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(net)
        for _ in range(6):
            opt.step(closure)
    assert _steps(tmp_path) == 6


def test_accumulated_micro_batches_are_one_step(tmp_path):
    net = _net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(net)
        for _ in range(5):
            opt.zero_grad()
            for _ in range(4):
                net(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
    assert _steps(tmp_path) == 5


def test_a_skipped_update_still_ends_its_step(tmp_path):
    """Every third batch is dropped after its backward (no optimizer.step): 12 iterations are
    12 steps, and the weights stay the same over a dropped one."""
    net = _net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with mldbg.torch.Hook(str(tmp_path), save_config=mldbg.SaveConfig(save_interval=1)) as hook:
        hook.register_module(net)
        for i in range(12):
            opt.zero_grad()
            net(torch.randn(8, 4)).pow(2).mean().backward()
            if i % 3 != 2:
                opt.step()
    trial = mldbg.create_trial(str(tmp_path))
    assert trial.steps() == list(range(12))
    w = trial.tensor("0.weight")
    assert (w.value(3) == w.value(2)).all() and not (w.value(2) == w.value(1)).all()


class _Gaussian(nn.Module):
    """A model without a forward of its own: its parameters are used by its `nll`."""

    def __init__(self) -> None:
        super().__init__()
        self.mu = nn.Parameter(torch.zeros(3))
        self.log_sigma = nn.Parameter(torch.zeros(3))

    def nll(self, x: torch.Tensor) -> torch.Tensor:
        return (self.log_sigma + 0.5 * ((x - self.mu) / self.log_sigma.exp()) ** 2).mean()


def test_a_model_trained_without_its_forward_opens_its_steps_at_the_optimizer(tmp_path):
    """A model whose training calls no forward (a likelihood method over its parameters) opens
    a step at each optimizer step that follows a backward with no step open: each records its
    loss, its parameters and their gradients; before, the run recorded no step at all. A
    model that runs its forward and steps two optimizers (one per parameter group) is still
    one step per iteration."""
    torch.manual_seed(0)
    model = _Gaussian()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    data = 2.0 + 0.5 * torch.randn(256, 3)
    with mldbg.torch.Hook(str(tmp_path / "nll"), save_config=mldbg.SaveConfig(save_interval=1)) as hook:
        hook.register_module(model)
        losses = []
        for _ in range(30):
            loss = model.nll(data[torch.randint(0, 256, (32,))])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    trial = mldbg.create_trial(str(tmp_path / "nll"))
    assert trial.steps() == list(range(30))
    recorded = [float(trial.tensor("loss").value(s)) for s in trial.steps()]
    assert recorded == [torch.tensor(v).item() for v in losses]
    assert {"mu", "log_sigma", "gradient/mu"} <= set(trial.tensor_names())
    mu = trial.tensor("mu")
    assert not (mu.value(5) == mu.value(4)).all()

    for zero in (True, False):  # with the two-line hook's statistics: whether `.grad` was reset
        torch.manual_seed(0)
        model = _Gaussian()
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        with mldbg.torch.Hook(str(tmp_path / f"zero{zero}")) as hook:
            hook.register_module(model)
            for _ in range(10):
                if zero:
                    opt.zero_grad()
                model.nll(data[torch.randint(0, 256, (32,))]).backward()
                opt.step()
        flags = mldbg.create_trial(str(tmp_path / f"zero{zero}")).tensor("gradient_reset/model")
        assert [flags.reduction_value(s, "sum") for s in range(10)] == [1] + [int(zero)] * 9

    # an ensemble of layers, each member with its own optimizer, called without the container's
    # forward: its first member's calls make its steps (one an iteration), not its optimizers
    members = nn.ModuleList(nn.Linear(3, 1) for _ in range(3))
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in members]
    with mldbg.torch.Hook(str(tmp_path / "ensemble")) as hook:
        hook.register_module(members)
        for _ in range(5):
            for member, member_opt in zip(members, opts, strict=True):
                member_opt.zero_grad()
                member(data[:8]).pow(2).mean().backward()
                member_opt.step()
    assert _steps(tmp_path / "ensemble") == 5

    net = _net()
    first = torch.optim.SGD(net[0].parameters(), lr=0.01)
    second = torch.optim.Adam(net[2].parameters(), lr=1e-3)
    with mldbg.torch.Hook(str(tmp_path / "two")) as hook:
        hook.register_module(net)
        for _ in range(7):
            first.zero_grad()
            second.zero_grad()
            net(torch.randn(8, 4)).pow(2).mean().backward()
            first.step()
            second.step()
    assert _steps(tmp_path / "two") == 7
