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

    def __init__(self, d: int = 32, experts: int = EXPERTS, hidden: int = 64, noise: float = 0.0):
        super().__init__()
        self.noise = noise  # a noisy gate (Shazeer et al.): Gaussian noise on the logits in training
        self.router = nn.Linear(d, experts)
        self.experts = nn.ModuleList(
            [nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, d)) for _ in range(experts)]
        )
        self.aux = torch.zeros(())
        self.logits = torch.zeros(())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.logits = self.router(x)
        if self.training and self.noise:
            self.logits = self.logits + self.noise * torch.randn_like(self.logits)
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
    def __init__(self, d: int = 32, classes: int = 8, experts: int = EXPERTS, noise: float = 0.0):
        super().__init__()
        self.inp = nn.Linear(16, d)
        self.moe = MoE(d, experts, noise=noise)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.inp(x))
        return self.head(h + self.moe(h))


def train_moe(
    path, balance: float, steps: int = 120, save: str = "logits", experts: int = EXPERTS,
    batch: int = 256, noise: float = 0.0, seed: int = 0,
) -> list[float]:  # fmt: skip
    """Train with `balance` x the balancing loss; record with the two-line hook plus a
    `router` collection saved every step. Returns the top expert's share per step."""
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    target = torch.randn(16, 8, generator=g)
    net = Net(experts=experts, noise=noise)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    shares = []
    router = CollectionConfig("router", save_config=SaveConfig(save_interval=1))
    with mldbg.torch.Hook(str(path), collection_configs=[router]) as hook:
        hook.register_module(net)
        hook.register_loss(loss_fn)
        for _ in range(steps):
            x = torch.randn(batch, 16, generator=g)
            y = (x @ target).argmax(1)
            opt.zero_grad()
            loss = loss_fn(net(x), y) + balance * net.moe.aux
            logits = net.moe.logits.detach()
            if save == "logits":
                hook.save_tensor("moe.router", logits, collections=["router"])
            else:
                counts = torch.bincount(logits.argmax(-1), minlength=experts)
                hook.save_tensor("moe.expert_counts", counts, collections=["router"])
            loss.backward()
            opt.step()
            counts = torch.bincount(logits.argmax(-1), minlength=experts)
            shares.append((counts.max() / counts.sum()).item())
    return shares


def test_fires_when_the_router_collapses(tmp_path):
    shares = train_moe(tmp_path / "run", balance=0.0)
    assert shares[0] < 0.5 and min(shares[100:]) > 0.95  # it collapsed on its own, during training
    onset = next(i for i, s in enumerate(shares) if s > 0.9)
    found = mldbg.check(str(tmp_path / "run"), rules=["router_collapse"])
    collapse = [f for f in found if "collapsed onto one expert" in f.message]
    assert collapse, found
    assert onset + 4 <= collapse[0].step <= onset + 10, (onset, collapse[0].step)
    assert_explains(collapse[0])
    assert "moe.router" in collapse[0].tensors and "of 4" in collapse[0].message
    # long before, the concentration (issue 27 item 4): the top expert past twice its fair share
    concentrating = [f for f in found if "concentrating" in f.message]
    assert len(concentrating) == 1 and concentrating[0].step < onset, found
    past_half = next(i for i, s in enumerate(shares) if s >= 0.5)
    assert past_half <= concentrating[0].step <= past_half + 15, (past_half, concentrating[0])
    assert_explains(concentrating[0])


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


def test_concentration_fires_below_the_collapse_bar(tmp_path):
    """A weak balancing loss (0.01): the top expert of 4 climbs to 60-80% and never crosses
    `max_share` for long; the concentration finding names it, with its fair share."""
    shares = train_moe(tmp_path / "run", balance=0.01)
    found = mldbg.check(str(tmp_path / "run"), rules=["router_collapse"])
    assert found and "concentrating" in found[0].message, found
    assert "fair share 25%" in found[0].message
    assert shares[found[0].step] >= 0.5


@pytest.mark.parametrize(
    "kwargs",
    [
        {"balance": 0.1, "noise": 1.0, "steps": 40},  # a noisy gate early in training
        {"balance": 0.1, "experts": 16, "steps": 60},  # many experts, balanced by the loss
        {"balance": 0.1, "experts": 8, "batch": 16, "steps": 80},  # a few tokens a step: noisy loads
        {"balance": 0.0, "experts": 8, "batch": 8, "steps": 40},  # too few tokens to tell
    ],
    ids=["noisy-gate", "16-experts", "16-tokens", "8-tokens"],
)
def test_concentration_quiet_on_healthy_and_noisy_routing(tmp_path, kwargs):
    """Healthy MoEs with a balancing loss, and routing too noisy to judge, stay quiet: the
    busiest quarter's share is judged against a multinomial null for the tokens routed."""
    train_moe(tmp_path / "run", **kwargs)
    assert not mldbg.check(str(tmp_path / "run"), rules=["router_collapse"])


@pytest.mark.parametrize(
    ("counts", "quarter", "fair"),
    [([6, 1, 1, 0], 0.75, 0.25), ([5, 5, 0, 0, 0, 0, 0, 0], 1.0, 0.25), ([1, 3], 0.75, 0.5)],
)
def test_top_quarter(counts, quarter, fair):
    from mldbg.rules.builtin.router_collapse import top_quarter

    _, got_quarter, got_fair = top_quarter(np.array(counts, dtype=float))
    assert got_quarter == pytest.approx(quarter) and got_fair == pytest.approx(fair)


def test_noise_grows_with_the_tokens():
    """The same imbalance is noise for a few tokens and evidence for many."""
    from mldbg.rules.builtin.router_collapse import noise_nats

    assert noise_nats(16, 0.5, 0.25, 8, 2) < 0 < noise_nats(4096, 0.5, 0.25, 8, 2)
    assert noise_nats(256, 0.25, 0.25, 4, 1) == 0.0
