"""router_collapse: a tiny mixture-of-experts classifier trained without a load-balancing
loss collapses onto one expert (rich get richer: all tokens by step ~90); its twin with the
Switch Transformer's balancing loss keeps the experts in use and stays quiet."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

import mldbg
import mldbg.torch
from mldbg import CollectionConfig, SaveConfig
from mldbg.rules.builtin.router_collapse import expert_counts
from tests.rules.conftest import assert_explains, fired

EXPERTS = 4


class MoE(nn.Module):
    """Top-1 (Switch) routing over `experts` small FFNs; keeps the balancing loss of its last
    forward in `aux` (n_experts x sum over experts of token share x mean router probability)."""

    def __init__(self, d: int = 32, experts: int = EXPERTS, hidden: int = 64):
        super().__init__()
        self.router = nn.Linear(d, experts)
        self.experts = nn.ModuleList(
            [nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, d)) for _ in range(experts)]
        )
        self.aux = torch.zeros(())
        self.logits = torch.zeros(())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.logits = self.router(x)
        p = self.logits.softmax(-1)
        top = p.argmax(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            m = top == e
            if m.any():
                out[m] = expert(x[m]) * p[m, e : e + 1]
        share = torch.bincount(top, minlength=len(self.experts)).float() / len(top)
        self.aux = len(self.experts) * (share * p.mean(0)).sum()
        return out


class Net(nn.Module):
    def __init__(self, d: int = 32, classes: int = 8):
        super().__init__()
        self.inp = nn.Linear(16, d)
        self.moe = MoE(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.inp(x))
        return self.head(h + self.moe(h))


def train_moe(path, balance: float, steps: int = 120, save: str = "logits") -> list[float]:
    """Train with `balance` x the balancing loss; record with the two-line hook plus a
    `router` collection saved every step. Returns the top expert's share per step."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    target = torch.randn(16, 8, generator=g)
    net = Net()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    shares = []
    router = CollectionConfig("router", save_config=SaveConfig(save_interval=1))
    with mldbg.torch.Hook(str(path), collection_configs=[router]) as hook:
        hook.register_module(net)
        hook.register_loss(loss_fn)
        for _ in range(steps):
            x = torch.randn(256, 16, generator=g)
            y = (x @ target).argmax(1)
            opt.zero_grad()
            loss = loss_fn(net(x), y) + balance * net.moe.aux
            logits = net.moe.logits.detach()
            if save == "logits":
                hook.save_tensor("moe.router", logits, collections=["router"])
            else:
                counts = torch.bincount(logits.argmax(-1), minlength=EXPERTS)
                hook.save_tensor("moe.expert_counts", counts, collections=["router"])
            loss.backward()
            opt.step()
            counts = torch.bincount(logits.argmax(-1), minlength=EXPERTS)
            shares.append((counts.max() / counts.sum()).item())
    return shares


def test_fires_when_the_router_collapses(tmp_path):
    shares = train_moe(tmp_path / "run", balance=0.0)
    assert shares[0] < 0.5 and min(shares[100:]) > 0.95  # it collapsed on its own, during training
    onset = next(i for i, s in enumerate(shares) if s > 0.9)
    found = mldbg.check(str(tmp_path / "run"), rules=["router_collapse"])
    step = fired(found)["router_collapse"]
    assert onset + 4 <= step <= onset + 10, (onset, step)
    assert_explains(found[0])
    assert "moe.router" in found[0].tensors and "of 4" in found[0].message


def test_quiet_with_a_balancing_loss(tmp_path):
    shares = train_moe(tmp_path / "run", balance=0.1)
    assert max(shares) < 0.75
    assert not mldbg.check(str(tmp_path / "run"), rules=["router_collapse"])


def test_in_the_default_set_and_from_counts(tmp_path):
    train_moe(tmp_path / "a", balance=0.0, save="counts")
    assert "router_collapse" in fired(mldbg.check(str(tmp_path / "a")))
    train_moe(tmp_path / "b", balance=0.1, save="counts")
    assert "router_collapse" not in fired(mldbg.check(str(tmp_path / "b")))


def test_skipped_without_router_outputs(tmp_path):
    from tests.tiny import train

    run = train(tmp_path / "run", default_hook=True, steps=20, eval_every=None)
    from mldbg.rules.runner import RuleRunner

    runner = RuleRunner(run.path, ["router_collapse"])
    assert not runner.run_available() + runner.finish()
    assert "router" in runner.skipped["router_collapse"]


@pytest.mark.parametrize(
    ("value", "counts"),
    [
        (np.array([3, 0, 1]), [3, 0, 1]),
        (np.array([[2.0, 1.0], [0.0, 5.0], [np.nan, 1.0]]), [1, 1]),
        (np.zeros((2, 3, 4)), [6, 0, 0, 0]),
    ],
)
def test_expert_counts(value, counts):
    assert expert_counts(value).tolist() == counts


def test_max_share_is_a_parameter(tmp_path):
    train_moe(tmp_path / "run", balance=0.1)
    assert mldbg.check(str(tmp_path / "run"), rules=["router_collapse:max_share=0.3"])
