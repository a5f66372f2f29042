"""frozen_layer_updated: fc1 frozen at step 5 while SGD keeps its momentum and the gradients
are zeroed rather than set to None (fc1 keeps moving), and a freeze that did not take
(`model.fc1.requires_grad = False`) declared with tensor_regex; the twins are quiet."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains
from tests.rules.silent import HEALTHY_SILENT


def test_fires_when_momentum_moves_a_frozen_layer(silent_run):
    found = mldbg.check(silent_run("freeze_with_momentum"), rules=["frozen_layer_updated"])
    assert found
    f = found[0]
    assert f.step == 6, f  # frozen at step 5; the momentum step at the end of step 5 moves it
    assert "fc1.weight" in f.tensors and "requires_grad=False" in f.message
    assert_explains(f)


def test_fires_on_a_declared_freeze_that_did_not_take(silent_run):
    path = silent_run("freeze_attribute")
    assert not mldbg.check(path, rules=["frozen_layer_updated"])  # nothing says fc1 is frozen
    found = mldbg.check(path, rules=["frozen_layer_updated:tensor_regex=^fc1\\."])
    assert found and found[0].step == 1 and "tensor_regex" in found[0].message, found
    assert "fc1.weight" in found[0].tensors  # (fc1.bias feeds BatchNorm: its gradient is ~0)


def test_quiet_on_a_real_freeze_declared_by_regex(silent_run):
    assert not mldbg.check(
        silent_run("healthy_frozen_fc1"), rules=["frozen_layer_updated:tensor_regex=^fc1\\."]
    )


@pytest.mark.parametrize("name", HEALTHY_SILENT)
def test_quiet_on_the_fixed_twins(name, silent_run):
    assert BUILTIN["frozen_layer_updated"].default
    found = [f for f in mldbg.check(silent_run(name)) if f.rule == "frozen_layer_updated"]
    assert not found, "\n".join(map(str, found))


@pytest.mark.parametrize("name", [*HEALTHY, "frozen_optimizer"])
def test_quiet_on_the_catalogue_runs(name, run):
    assert not mldbg.check(run(name), rules=["frozen_layer_updated"])


def test_a_gan_that_freezes_its_discriminator_for_the_generator_step_is_healthy(tmp_path):
    """D frozen (requires_grad False) during G's step, trained at the next: consecutive steps
    never both see D frozen, so D's own update is not a frozen layer changing."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    d = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    g = nn.Linear(2, 4)
    model = nn.ModuleDict({"d": d, "g": g})
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(d)
        for step in range(12):
            train_d = step % 2 == 0
            for p in d.parameters():
                p.requires_grad_(train_d)
            opt.zero_grad()
            fake = g(torch.randn(8, 2))
            score = d(fake.detach() if train_d else fake)
            (score.mean() if train_d else -score.mean()).backward()
            opt.step()
    assert not mldbg.check(str(tmp_path / "run"), rules=["frozen_layer_updated"])


def _sparse_run(path, steps: int, gan: bool) -> None:
    """Statistics steps at train steps 0, 100, 200, ... (no warmup, the sparsest cadence):
    `requires_grad` must say whether the parameter stayed frozen over the steps between."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    # weight decay on zeroed (not None) gradients keeps moving frozen weights, step after step
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=0.0 if gan else 0.01)
    with mldbg.torch.Hook(str(path), statistics_warmup=0, statistics_budget=1e-9) as hook:
        hook.register_module(model)
        for step in range(steps):
            frozen = step % 2 == 0 if gan else step >= 5  # GAN: one layer trained every other step
            for p in model[0].parameters():
                p.requires_grad_(not frozen)
            opt.zero_grad(set_to_none=gan)
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()


def test_frozen_throughout_the_steps_between_sparse_statistics_steps(tmp_path):
    _sparse_run(tmp_path / "gan", 210, gan=True)  # frozen at steps 100 and 200, trained between
    assert not mldbg.check(str(tmp_path / "gan"), rules=["frozen_layer_updated"])
    _sparse_run(tmp_path / "momentum", 302, gan=False)  # frozen from step 5 on, moved by weight decay
    trial = mldbg.create_trial(str(tmp_path / "momentum"))
    flags = {r.step: r.statistics["requires_grad"] for r in trial.records("0.weight")}
    assert flags == {0: 1.0, 100: 1.0, 200: 0.0, 300: 0.0}  # 100: trainable at steps 1-4
    found = mldbg.check(str(tmp_path / "momentum"), rules=["frozen_layer_updated"])
    assert [f.step for f in found] == [300], found  # frozen at 200 and throughout up to 300


def _alternating_gan(path, steps: int = 30, freeze_from: int | None = None) -> None:
    """A tiny GAN trained as CycleGAN's reference does: per iteration the discriminator's
    `requires_grad` off for the generator's update (its optimizer), then on again for the
    discriminator's (its own optimizer): one step of the hook, D frozen at its first forward.
    `freeze_from`: from that iteration D is never thawed, while its Adam (gradients zeroed,
    not set to None) keeps moving it: the defect."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    g = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 4))
    d = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    opt_g = torch.optim.Adam(g.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), lr=2e-3, betas=(0.5, 0.999))
    real = torch.randn(256, 4) * 0.5 + 1.0
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(g, name="G")
        hook.register_module(d, name="D")
        for step in range(steps):
            for p in d.parameters():
                p.requires_grad_(False)
            fake = g(torch.randn(32, 2))
            opt_g.zero_grad()
            (d(fake) - 1).pow(2).mean().backward()
            opt_g.step()
            thaw = freeze_from is None or step < freeze_from
            for p in d.parameters():
                p.requires_grad_(thaw)
            opt_d.zero_grad(set_to_none=False)
            if thaw:
                batch = real[torch.randint(0, 256, (32,))]
                (0.5 * ((d(batch) - 1).pow(2).mean() + d(fake.detach()).pow(2).mean())).backward()
            opt_d.step()


def test_quiet_on_a_discriminator_frozen_for_the_generator_update_in_each_step(tmp_path):
    """blind5's CycleGAN alarmed: D frozen at its first forward of every step (the
    generator's update), thawed and trained by its own optimizer in the same step."""
    _alternating_gan(tmp_path / "run")
    assert not mldbg.check(str(tmp_path / "run"), rules=["frozen_layer_updated"])


def test_fires_on_a_discriminator_frozen_for_good_that_adam_keeps_moving(tmp_path):
    _alternating_gan(tmp_path / "run", freeze_from=10)
    found = mldbg.check(str(tmp_path / "run"), rules=["frozen_layer_updated"])
    assert found and any(t.startswith("D.") for t in found[0].tensors), [str(f) for f in found]
    assert found[0].step >= 10, found[0]


def _merged_adapter_run(path, hold_frozen: bool) -> None:
    """ReLoRA's recipe, tiny: a Linear frozen after a warm-up, a rank-2 adapter beside it trained
    by its own AdamW and merged into the frozen weight every 10 steps (then re-initialized).
    `hold_frozen`: the first optimizer, SGD with momentum over every parameter, goes on, with
    gradients zeroed rather than set to None, so its momentum keeps moving the frozen base."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)

    class Adapted(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.base = nn.Linear(8, 8)
            self.a = nn.Parameter(torch.randn(2, 8) * 0.1)
            self.b = nn.Parameter(torch.zeros(8, 2))
            self.head = nn.Linear(8, 1)

        def forward(self, x):
            return self.head(torch.relu(self.base(x) + x @ self.a.t() @ self.b.t()))

    model = Adapted()
    x, y = torch.randn(256, 8), torch.randn(256, 1)
    with mldbg.torch.Hook(path) as hook:
        hook.register_module(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        for step in range(60):
            if step == 5:
                model.base.requires_grad_(False)
                if not hold_frozen:  # the optimizer rebuilt from the trainable parameters only
                    opt = torch.optim.AdamW([model.a, model.b, *model.head.parameters()], 1e-2)
            if step > 5 and step % 10 == 0 and not hold_frozen:
                with torch.no_grad():  # merge and restart
                    model.base.weight += model.b @ model.a
                    model.b.zero_()
                    model.a.normal_(0, 0.1)
            b = torch.randint(0, 256, (32,))
            loss = ((model(x[b]) - y[b]) ** 2).mean()
            opt.zero_grad(set_to_none=not hold_frozen)
            loss.backward()
            opt.step()


def test_a_frozen_base_the_script_merges_adapters_into_is_not_a_frozen_layer_updated(tmp_path):
    """No optimizer holds the frozen base (`optimizer_frozen/model` is 0 at every statistics
    step): its changes at the merges are the script's own writes. The twin whose SGD holds the
    frozen base and keeps its momentum is reported."""
    quiet, moved = str(tmp_path / "merge"), str(tmp_path / "held")
    _merged_adapter_run(quiet, hold_frozen=False)
    _merged_adapter_run(moved, hold_frozen=True)
    for path in (quiet, moved):  # both reference and fast path
        for columns in (True, False):
            from mldbg.rules.runner import RuleRunner

            runner = RuleRunner(path, rules=["frozen_layer_updated"], columns=columns)
            found = runner.run_available() + runner.finish()
            if path == quiet:
                assert not found, found
            else:
                assert found and "base.weight" in found[0].tensors, found
    t = mldbg.create_trial(quiet)
    held = [
        t.tensor("optimizer_frozen/model").reduction_value(s, "sum")
        for s in t.tensor("optimizer_frozen/model").steps()
    ]
    assert held and max(held) == 0.0, held
