"""unchanged_tensor: fires on a real training with the defect (learning rate 0: the optimizer never moves the weights), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("frozen_optimizer"), rules=["unchanged_tensor"])
    assert found, "unchanged_tensor did not fire on frozen_optimizer"
    assert all(f.rule == "unchanged_tensor" for f in found)
    assert "fc1.weight" in found[0].tensors
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["unchanged_tensor"].default:
        found = [f for f in default_findings(name) if f.rule == "unchanged_tensor"]
    else:
        found = mldbg.check(run(name), rules=["unchanged_tensor"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["unchanged_tensor"].__name__ == "UnchangedTensor"


def test_quiet_on_an_expert_that_got_no_tokens(tmp_path):
    """Top-1 routing with the router biased against one expert: an expert that gets no
    token at a step has no gradient, so Adam skips it and its weights stand still until
    tokens come back; at the step they do, the gradient is there but the window's updates
    had nothing to apply. The old rule read the gradient at the window's last step only."""
    from tests.rules.moe import train_moe

    for i, (starve, steps, seed) in enumerate([(2.5, 60, 0), (3.0, 80, 11)]):
        path = tmp_path / f"run{i}"
        losses = train_moe(path, steps=steps, starve=starve, seed=seed, hook_kwargs={"statistics_budget": 0})
        assert losses[-1] < losses[0]
        # weight_update_ratio: the same expert's |update| of 0 is no tiny update either
        found = mldbg.check(str(path), rules=["unchanged_tensor", "weight_update_ratio"])
        assert not found, [str(f) for f in found]


def test_fires_on_an_expert_the_optimizer_does_not_hold(tmp_path):
    from tests.rules.moe import train_moe

    train_moe(tmp_path / "run", steps=40, starve=0.0, forget_expert=1, hook_kwargs={"statistics_budget": 0})
    found = mldbg.check(str(tmp_path / "run"), rules=["unchanged_tensor"])
    assert [f.rule for f in found] == ["unchanged_tensor"], [str(f) for f in found]
    assert "experts.1.weight" in found[0].tensors


def test_a_parameter_at_zero_with_a_tiny_gradient_is_not_stuck(tmp_path):
    """A shift at 0 whose updates are tiny (its group's learning rate is 1e-9, a stand-in for a
    BatchNorm shift that barely moves): they stay under allclose's absolute tolerance, and
    being 0 it has no size to compare them with: not judged."""
    import torch
    from torch import nn

    from mldbg.torch import Hook

    class Shifted(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
            self.shift = nn.Parameter(torch.zeros(3))

        def forward(self, x):
            return self.net(x) + self.shift

    torch.manual_seed(0)
    model = Shifted()
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    opt = torch.optim.SGD([{"params": model.net.parameters()}, {"params": [model.shift], "lr": 1e-9}], lr=0.1)
    for _ in range(12):
        x = torch.randn(32, 8)
        loss = nn.functional.cross_entropy(model(x), x[:, :3].argmax(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    assert not mldbg.check(str(tmp_path), rules=["unchanged_tensor"])
