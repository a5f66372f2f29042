"""loss_scale_collapse on a real torch.amp.GradScaler: a contrastive loss whose distance is
sqrt(sum of squares) has a NaN gradient on identical pairs (d = 0), so with such a pair in
every batch every step overflows, the scaler halves its scale and skips the step; the fixed
twin adds an eps under the square root.

The torch hook ends a TRAIN step at `optimizer.step()`, which a scaler that overflows never
calls; a skipped update still ends its step, at the next forward that finds the gradients
reset by `zero_grad()`. So the run is recorded as it trains, one step per iteration, and the
default set also sees that the weights never move. `record_scales` replays a scale sequence
into a run, for the parameters' tests."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import mldbg
import mldbg.rules
import mldbg.torch
from tests.rules.conftest import assert_explains, fired
from tests.tiny import mlp

torch.set_num_threads(1)


class Contrastive(nn.Module):
    """Hadsell et al.'s loss: d^2 for similar pairs, max(0, margin - d)^2 for the others."""

    def __init__(self, eps: float = 0.0, margin: float = 1.0):
        super().__init__()
        self.eps, self.margin = eps, margin

    def forward(self, a: torch.Tensor, b: torch.Tensor, same: torch.Tensor) -> torch.Tensor:
        d = torch.sqrt(((a - b) ** 2).sum(dim=1) + self.eps)
        return (same * d**2 + (1 - same) * torch.relu(self.margin - d) ** 2).mean()


def train_amp(path, eps: float, steps: int = 40) -> list[float]:
    """Train with a real GradScaler, recorded with the two-line hook; the scales it used."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    net = mlp(8, 4, width=16)
    loss_fn = Contrastive(eps)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu")
    scales = []
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(net)
        hook.register_loss(loss_fn)
        for _ in range(steps):
            x = torch.randn(32, 8, generator=g)
            other = torch.randn(32, 8, generator=g)
            same = (torch.rand(32, generator=g) < 0.5).float()
            y = torch.where(same[:, None] > 0, x, other)  # similar pairs: the same sample twice
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                a, b = net(x), net(y)
            loss = loss_fn(a.float(), b.float(), same)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            hook.save_scalar("loss_scale", scaler.get_scale())
            scales.append(scaler.get_scale())
    return scales


def record_scales(path, scales: list[float]) -> str:
    """A run whose only data is a scale sequence, saved as a scaler's would be."""
    net = mlp(2, 2, width=4)
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(net)
        for s in scales or [None] * 5:
            out = net(torch.zeros(1, 2)).sum()
            if s is not None:
                hook.save_scalar("loss_scale", s)  # in the open step, which the backward ends
            out.backward()
    return str(path)


def test_fires_when_every_step_overflows(tmp_path):
    scales = train_amp(tmp_path / "run", eps=0.0)
    assert scales[-1] < 1e-3, scales  # the real scaler collapsed: it halved at every step
    trial = mldbg.create_trial(str(tmp_path / "run"))
    assert len(trial.steps()) == len(scales)  # every skipped update ended its step
    found = mldbg.check(str(tmp_path / "run"), rules=["loss_scale_collapse"])
    assert found, "loss_scale_collapse did not fire"
    assert fired(found)["loss_scale_collapse"] <= 10, found  # 10 falls in a row after the first value
    assert_explains(found[0])
    assert "loss_scale" in found[0].tensors
    assert {"loss_scale_collapse", "unchanged_tensor"} <= {f.rule for f in mldbg.check(str(tmp_path / "run"))}


def test_the_fixed_twin_raises_nothing_in_the_default_set(tmp_path):
    """Its last bias gets no gradient (a contrastive loss of a - b cancels it): not a defect."""
    train_amp(tmp_path / "run", eps=1e-12)
    assert not mldbg.check(str(tmp_path / "run"))


def test_quiet_on_the_fixed_twin(tmp_path):
    scales = train_amp(tmp_path / "run", eps=1e-12)
    assert scales[-1] == scales[0], scales
    trial = mldbg.create_trial(str(tmp_path / "run"))
    assert len(trial.tensor("loss_scale").steps()) == len(scales)  # one value per step
    assert not mldbg.check(str(tmp_path / "run"), rules=["loss_scale_collapse"])


def test_a_few_halvings_at_the_start_are_healthy(tmp_path):
    path = record_scales(tmp_path / "run", [65536.0 / 2**i for i in range(5)] + [4096.0] * 30)
    assert not mldbg.check(path, rules=["loss_scale_collapse"])


@pytest.mark.parametrize("patience", [3])
def test_patience_is_a_parameter(tmp_path, patience):
    path = record_scales(tmp_path / "run", [65536.0 / 2**i for i in range(5)] + [4096.0] * 30)
    found = mldbg.check(path, rules=[f"loss_scale_collapse:patience={patience}"])
    assert [f.step for f in found] == [3]


def test_in_the_default_set_and_quiet_without_a_scale(tmp_path):
    path = record_scales(tmp_path / "run", [])
    assert "loss_scale_collapse" in mldbg.rules.BUILTIN and mldbg.rules.BUILTIN["loss_scale_collapse"].default
    assert not [f for f in mldbg.check(path) if f.rule == "loss_scale_collapse"]
