"""all_zero: fires on a real training with the defect (zero init: weights, gradients and ReLU outputs all zero), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("zero_init"), rules=["all_zero"])
    assert found, "all_zero did not fire on zero_init"
    assert all(f.rule == "all_zero" for f in found)
    assert found[0].tensors
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["all_zero"].default:
        found = [f for f in default_findings(name) if f.rule == "all_zero"]
    else:
        found = mldbg.check(run(name), rules=["all_zero"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["all_zero"].__name__ == "AllZero"


def free_nats_run(out, bug: str | None = None, steps: int = 30) -> None:
    """A tiny latent model trained as Dreamer trains its world model: a posterior from the
    observation (a ReLU trunk), a learned prior from a context (its own small net), a decoder,
    and the KL clamped at a free-nats floor (`torch.clamp(kl, min=free_nats)`) that it never
    leaves here: the prior gets exactly zero gradient, by design, while the rest learns. A
    frozen positional table of zeros (ViT-MAE's fixed embedding as some transformers versions
    leave it) is added to the observation. `bug`: "dead_relu" (the trunk's biases at -10: its
    ReLUs silent, its gradients 0 as a dead network's are), "loss_times_zero" (`(0 * loss)
    .backward()`: no gradient anywhere)."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = nn.Parameter(torch.zeros(1, 8), requires_grad=False)
            self.trunk = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 8))
            self.prior = nn.Sequential(nn.Linear(4, 32), nn.ELU(), nn.Linear(32, 8))
            self.decoder = nn.Linear(4, 8)
            if bug == "dead_relu":
                nn.init.constant_(self.trunk[0].bias, -10.0)

        def forward(self, x, c):
            mq, sq = self.trunk(x + self.pos).chunk(2, -1)
            mp, sp = self.prior(c).chunk(2, -1)
            q = torch.distributions.Normal(mq, nn.functional.softplus(sq) + 0.1)
            p = torch.distributions.Normal(mp, nn.functional.softplus(sp) + 0.1)
            return self.decoder(q.rsample()), torch.distributions.kl_divergence(q, p).sum(-1).mean()

    model = Model()
    hook = mldbg.torch.Hook(str(out))
    hook.register_module(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    free_nats = 100.0
    for _ in range(steps):
        x, c = torch.randn(32, 8), torch.randn(32, 4)
        recon, kl = model(x, c)
        assert kl.item() < free_nats  # the premise: the floor holds, the prior gets no gradient
        loss = (recon - x).pow(2).mean() + torch.clamp(kl, min=free_nats)
        opt.zero_grad()
        (0 * loss if bug == "loss_times_zero" else loss).backward()
        opt.step()
    hook.close()


def test_quiet_on_a_gradient_cut_by_design_and_a_frozen_zero_table(tmp_path):
    """The prior behind a KL under its free-nats floor gets exactly 0 (its weights' and its
    biases' gradients), the rest of the model learns, nothing is dead: the path to the loss is
    cut by design (the old rule fired on gradient/prior.*); the frozen zero table never learns."""
    free_nats_run(tmp_path)
    found = mldbg.check(str(tmp_path), rules=["all_zero"])
    assert not found, "\n".join(map(str, found))


@pytest.mark.parametrize("bug", ["dead_relu", "loss_times_zero"])
def test_fires_on_zero_gradients_of_a_dead_network(tmp_path, bug):
    """The same model with its trunk's ReLUs killed at init (the layer above them gets a weight
    gradient of 0 beside a bias gradient that is not: its input is dead), or with no gradient
    anywhere: the zero gradients are reported."""
    free_nats_run(tmp_path, bug=bug)
    found = mldbg.check(str(tmp_path), rules=["all_zero"])
    assert found, f"all_zero did not fire on {bug}"
    assert "gradient/trunk.0.weight" in found[0].tensors, found[0]
    assert_explains(found[0])


def fixup_run(out, all_zero_init: bool = False, steps: int = 12) -> None:
    """A tiny Fixup-initialized residual MLP (Zhang et al. 2019): no normalization, each
    residual branch's last layer and the classifier initialized to zero, scalar biases
    (`bias1a`, `bias2a`: parameters the hook files with the weights) at 0 before each layer
    of the branch. Gradients reach the parameters behind a zero layer only once that layer has
    moved: the classifier at the first update, the branches' last layers at the second, the
    scalar biases before them at the third. `all_zero_init`: every weight and bias of the
    model at zero (no signal anywhere: only the classifier's bias ever moves)."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.bias1a, self.bias2a = nn.Parameter(torch.zeros(1)), nn.Parameter(torch.zeros(1))
            self.fc1, self.fc2 = nn.Linear(16, 16, bias=False), nn.Linear(16, 16, bias=False)
            nn.init.zeros_(self.fc2.weight)

        def forward(self, x):
            return torch.relu(x + self.fc2(torch.relu(self.fc1(x + self.bias1a)) + self.bias2a))

    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), Block(), Block(), nn.Linear(16, 4))
    nn.init.zeros_(model[4].weight)
    nn.init.zeros_(model[4].bias)
    if all_zero_init:
        for p in model.parameters():
            nn.init.zeros_(p)
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(256, 8, generator=g), torch.randn(8, 4, generator=g)
    y = (x @ w).argmax(1)
    hook = mldbg.torch.Hook(str(out))
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(steps):
        idx = torch.randint(0, 256, (32,), generator=g)
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()


def test_quiet_on_a_chain_of_zero_initialized_layers_that_training_moves(tmp_path):
    """Fixup's zero layers hold the parameters behind them at 0 for one step per link (three
    here); once a gradient reaches a zero weight it moves: an init, not a dead network (the
    old rule fired on the scalar biases at step 2)."""
    fixup_run(tmp_path)
    trial = mldbg.create_trial(str(tmp_path))
    zero = [s for s in (0, 1, 2) if trial.record("2.bias1a", s).statistics["zero_fraction"] == 1.0]
    assert zero == [0, 1, 2]  # the premise: 0 for three saved steps, then it moves
    assert trial.record("2.bias1a", 3).statistics["zero_fraction"] == 0.0
    found = mldbg.check(str(tmp_path), rules=["all_zero"])
    assert not found, "\n".join(map(str, found))


def test_fires_on_a_network_initialized_all_at_zero(tmp_path):
    fixup_run(tmp_path, all_zero_init=True)
    found = mldbg.check(str(tmp_path), rules=["all_zero"])
    assert found and "0.weight" in found[0].tensors, "\n".join(map(str, found))
