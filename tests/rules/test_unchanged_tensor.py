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


def _train_accumulating(path, every=4, steps=48, lr=3e-3, stop_at=None, forget_head=False):
    """A JAX MLP trained with optax.MultiSteps (gradient accumulation: the update applied at
    every `every`-th call, exactly 0 at the others) inside jit, the hook recording every call
    (`mldbg.jax.statistics` in the jitted step), its output layer zero-initialized (weight and
    bias: a common trick for a regression head). `stop_at`: the parameters kept from that
    call on (the optimizer stops stepping); `forget_head`: the head's updates masked to 0."""
    jax = pytest.importorskip("jax")
    optax = pytest.importorskip("optax")
    import jax.numpy as jnp
    import numpy as np

    import mldbg.jax

    k = jax.random.split(jax.random.PRNGKey(0), 2)
    params = {
        "w1": jax.random.normal(k[0], (8, 32)) / np.sqrt(8),
        "b1": jnp.zeros(32),
        "w_out": jnp.zeros((32, 1)),
        "b_out": jnp.zeros(1),
    }

    def loss_fn(params, x, y):
        h = jnp.tanh(x @ params["w1"] + params["b1"])
        return jnp.mean((h @ params["w_out"] + params["b_out"] - y) ** 2)

    inner = optax.adam(lr)
    if forget_head:
        head = {"w1": False, "b1": False, "w_out": True, "b_out": True}
        inner = optax.chain(inner, optax.masked(optax.set_to_zero(), head))
    tx = optax.MultiSteps(inner, every_k_schedule=every)
    state = tx.init(params)

    @jax.jit
    def train_step(params, state, x, y, due):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        stats = mldbg.jax.statistics(params, grads, loss, when=due)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state, stats

    rng = np.random.default_rng(1)
    w = rng.normal(size=(8, 1))
    hook = mldbg.jax.Hook(str(path))
    for step in range(steps):
        x = rng.normal(size=(16, 8)).astype(np.float32)
        y = np.sin(x @ w).astype(np.float32)
        new, new_state, stats = train_step(params, state, x, y, hook.statistics_due(step))
        if stop_at is None or step < stop_at:
            params, state = new, new_state
        hook.record(step, statistics=stats)
    hook.close()


_ACCUMULATION_RULES = ["unchanged_tensor", "weight_update_ratio", "all_zero"]


@pytest.mark.parametrize("every", [2, 4, 8])
def test_quiet_on_gradient_accumulation(tmp_path, every):
    """Gradient accumulation (the blind corpus's optax.MultiSteps run alarmed all three rules):
    the parameters stand still at k - 1 of every k steps by design, and a head initialized at
    0 stays 0 until the first update. Judged over the accumulation period (the steps that
    apply an update), nothing is stuck, tiny or zero: quiet. (PyTorch's hook counts optimizer
    steps, so a PyTorch loop that accumulates shows no still steps; a JAX step function is
    recorded per call.)"""
    _train_accumulating(tmp_path / "run", every=every)
    found = mldbg.check(str(tmp_path / "run"), rules=_ACCUMULATION_RULES)
    assert not found, [str(f) for f in found]


@pytest.mark.parametrize(
    ("kwargs", "rule", "tensor"),
    [
        ({"stop_at": 20}, "unchanged_tensor", "w_out"),  # the optimizer stops stepping
        ({"lr": 0.0}, "weight_update_ratio", "w1"),  # a learning rate of 0 from the start
        ({"forget_head": True}, "all_zero", "w_out"),  # the head left out: it stays at its zero init
    ],
)
def test_accumulating_runs_still_report_what_does_not_move(tmp_path, kwargs, rule, tensor):
    """The same accumulating run with its defects: they outlast the accumulation period."""
    _train_accumulating(tmp_path / "run", every=4, **kwargs)
    found = [f for f in mldbg.check(str(tmp_path / "run"), rules=_ACCUMULATION_RULES) if f.rule == rule]
    assert found and tensor in found[0].tensors, [str(f) for f in found]


def _train_then_fisher(path, fisher_steps=40, lr_after=None, after=10, stop=False):
    """A tiny PyTorch MLP trained 30 steps with SGD, then (EWC's diagonal Fisher after a task)
    `fisher_steps` TRAIN forwards and backwards that no optimizer step follows, then 10 more
    training steps. `lr_after`: instead of the Fisher loop, the optimizer keeps stepping with
    this learning rate (0: the defect, an optimizer that no longer moves the weights)."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    x, y = torch.randn(256, 8), torch.randint(0, 3, (256,))
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    hook = mldbg.torch.Hook(str(path), statistics_every=5)  # statistics every 5th step after 20
    hook.register_module(model)
    criterion = nn.CrossEntropyLoss()
    hook.register_loss(criterion)  # the training loss (the Fisher loop's log-likelihoods are not it)

    def train(n):
        for _ in range(n):
            idx = torch.randint(0, 256, (32,))
            loss = criterion(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()

    train(30)
    if stop:  # the defect: the loop goes on, optimizer.step() is no longer called
        for _ in range(fisher_steps):
            idx = torch.randint(0, 256, (32,))
            opt.zero_grad()
            criterion(model(x[idx]), y[idx]).backward()
    elif lr_after is None:
        for i in range(fisher_steps):  # per-sample log-likelihood gradients: no update
            model.zero_grad()
            out = nn.functional.log_softmax(model(x[i : i + 1]), 1)
            out[0, int(y[i])].backward()
    else:
        for g in opt.param_groups:
            g["lr"] = lr_after
        train(fisher_steps)
    train(after)
    hook.close()


@pytest.mark.parametrize("after", [10, 0], ids=["between-tasks", "at-the-end"])
def test_quiet_on_gradients_taken_without_an_update(tmp_path, after):
    """EWC's Fisher estimate (blind5's ewc_fisher_penalty_permuted_tasks alarmed): TRAIN
    forwards and backwards between tasks (or after the last) that no optimizer step follows
    are steps of the hook that apply no update; the weights standing still there are not
    stuck. The script computes no training loss there (its criterion is not called)."""
    _train_then_fisher(tmp_path / "run", after=after)
    found = mldbg.check(str(tmp_path / "run"), rules=_ACCUMULATION_RULES)
    assert not found, [str(f) for f in found]


def test_fires_when_the_optimizer_steps_with_a_learning_rate_of_0(tmp_path):
    _train_then_fisher(tmp_path / "run", lr_after=0.0)
    found = mldbg.check(str(tmp_path / "run"), rules=["unchanged_tensor"])
    assert found and "0.weight" in found[0].tensors, [str(f) for f in found]


def test_fires_when_the_loop_stops_calling_the_optimizer(tmp_path):
    """The loop goes on computing and backpropagating its loss, optimizer.step() no longer
    called: the run ends in steps without updates, the training loss computed at each."""
    _train_then_fisher(tmp_path / "run", stop=True, after=0)
    found = mldbg.check(str(tmp_path / "run"), rules=["unchanged_tensor"])
    assert found and "0.weight" in found[0].tensors and found[0].step >= 30, [str(f) for f in found]
    assert_explains(found[0])
