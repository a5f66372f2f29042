"""Several models on one PyTorch hook: a tiny GAN's generator and discriminator, recorded under
distinct names, one step per iteration (the discriminator's update, then the generator's), and
checked by the default rules."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import mldbg
from mldbg import Mode
from mldbg.errors import InvalidConfig
from mldbg.torch import Hook


class Discriminator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(2, 16)
        self.act = nn.LeakyReLU(0.2)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def gan(out, iterations: int, name: str | None = "discriminator", **options) -> Hook:
    """The DCGAN loop on 2-D points: the discriminator steps, then the generator."""
    torch.manual_seed(0)
    generator = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    discriminator = Discriminator()
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    g = torch.Generator().manual_seed(1)
    with Hook(out, **options) as hook:
        hook.register_module(generator)
        hook.register_module(discriminator, name=name)
        hook.register_loss(bce)
        for _ in range(iterations):
            real = torch.randn(32, 2, generator=g) * 0.5 + torch.tensor([0.5, -0.5])
            z = torch.randn(32, 4, generator=g)
            opt_d.zero_grad()
            fake = generator(z)
            loss_d = bce(discriminator(real), torch.ones(32, 1)) + bce(
                discriminator(fake.detach()), torch.zeros(32, 1)
            )
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            bce(discriminator(fake), torch.ones(32, 1)).backward()
            opt_g.step()
        generator.eval()
        with torch.no_grad():
            generator(torch.randn(8, 4, generator=g))  # sampling: an EVAL step
    return hook


def test_a_gan_records_both_models_under_distinct_names(tmp_path):
    collections = ["weights", "biases", "gradients", "losses", "inputs", "outputs"]
    gan(tmp_path, 4, save_config=mldbg.SaveConfig(save_interval=1), include_collections=collections)
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps(Mode.TRAIN) == [0, 1, 2, 3] and trial.steps(Mode.EVAL) == [0]  # one step an iteration
    weights = trial.tensor_names(collection="weights")
    assert weights == ["0.weight", "2.weight", "discriminator.fc1.weight", "discriminator.fc2.weight"]
    params = sorted([*weights, *trial.tensor_names(collection="biases")])
    grads = trial.tensor_names(collection="gradients")
    assert grads == [f"gradient/{p}" for p in params]
    for name in (*params, *grads):
        assert trial.tensor(name).steps(Mode.TRAIN) == [0, 1, 2, 3], name
    # each model's weights change from one step to the next: every step updates both
    for name in ("0.weight", "discriminator.fc1.weight"):
        w = trial.tensor(name)
        assert not (w.value(1) == w.value(2)).all()
    names = set(trial.tensor_names())
    assert {"model_input_0", "discriminator.model_input_0", "discriminator.model_output_0"} <= names
    assert {"0_output_0", "discriminator.fc1_output_0", "discriminator.act_output_0"} <= names
    # the discriminator's gradients are those its optimizer saw, not the generator step's
    g = trial.tensor("gradient/discriminator.fc1.weight").value(3)
    assert g.shape == (16, 2) and (g != 0).any()


def test_the_default_rules_run_on_a_gan(tmp_path):
    gan(tmp_path, 30)  # the two lines: statistics for the default rules
    trial = mldbg.create_trial(tmp_path)
    assert len(trial.steps(Mode.TRAIN)) == 30
    assert "gradient/discriminator.fc2.weight" in trial.tensor_names()
    findings = mldbg.check(tmp_path)
    assert not [f for f in findings if f.severity == "error"], "\n".join(map(str, findings))


def test_names_never_collide(tmp_path):
    with Hook(tmp_path) as hook:
        first = nn.Sequential(nn.Linear(2, 2))
        first.add_module("head", nn.Linear(2, 2))
        hook.register_module(first)
        with pytest.raises(InvalidConfig, match="name='head'.*already recorded"):
            hook.register_module(nn.Linear(2, 2), name="head")
        with pytest.raises(InvalidConfig, match="without '/'"):
            hook.register_module(nn.Linear(2, 2), name="a/b")
        a, b = Discriminator(), Discriminator()
        hook.register_module(a)
        hook.register_module(b)
        with pytest.raises(InvalidConfig, match="name='Discriminator'"):
            hook.register_module(nn.Linear(2, 2), name="Discriminator")
    names = [n for m in hook._models for n, _, _ in m.params]
    assert len(names) == len(set(names))
    assert "Discriminator.fc1.weight" in names and "Discriminator_2.fc1.weight" in names
    assert "head.weight" in names and "0.weight" in names


def _critic_then_generator(out, iterations: int, n_critic: int) -> int:
    """WGAN's loop: `n_critic` critic updates on fresh fakes, then one generator update.
    Returns the training steps recorded."""
    torch.manual_seed(0)
    generator = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    critic = Discriminator()
    opt_g = torch.optim.RMSprop(generator.parameters(), lr=5e-4)
    opt_c = torch.optim.RMSprop(critic.parameters(), lr=5e-4)
    with Hook(out) as hook:
        hook.register_module(generator)
        hook.register_module(critic, name="critic")
        for _ in range(iterations):
            for _ in range(n_critic):
                opt_c.zero_grad()
                fake = generator(torch.randn(32, 4)).detach()
                (critic(fake).mean() - critic(torch.randn(32, 2)).mean()).backward()
                opt_c.step()
            opt_g.zero_grad()
            (-critic(generator(torch.randn(32, 4))).mean()).backward()
            opt_g.step()
    return len(mldbg.create_trial(str(out)).steps(mode=Mode.TRAIN))


def test_a_critic_updated_five_times_a_generator_update_is_one_step(tmp_path):
    assert _critic_then_generator(tmp_path / "run", iterations=12, n_critic=5) == 12


def test_each_fold_of_a_k_fold_loop_is_recorded(tmp_path):
    """k-fold cross-validation in one run: a fresh model and optimizer per fold, each
    registered; the previous fold's model is never updated again. Before, every step after the
    first fold waited for that model's update and none ended: one fold was recorded. Now a
    model that ran no forward while another was updated twice is no longer waited for (the
    fold's first two iterations share a step)."""
    loss_fn = nn.CrossEntropyLoss()
    with Hook(str(tmp_path / "run")) as hook:
        hook.register_loss(loss_fn)
        for _ in range(3):
            model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
            hook.register_module(model)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(30):
                loss = loss_fn(model(torch.randn(8, 4)), torch.randint(0, 3, (8,)))
                opt.zero_grad()
                loss.backward()
                opt.step()
    trial = mldbg.create_trial(str(tmp_path / "run"))
    assert len(trial.steps(mode=Mode.TRAIN)) == 88  # 90 iterations, 2 fold starts sharing a step
    assert len(trial.tensor("CrossEntropyLoss_output_0").steps()) == 88


def test_a_gan_trained_generator_first_is_one_step_an_iteration(tmp_path):
    """PyTorch-GAN's loops train the generator first: its loss runs back through the
    discriminator, whose `zero_grad()` then resets those gradients before its own update.
    That reset is no skipped update (the generator was updated in the step): each iteration
    is one step, and each backward keeps its name, `loss` the generator's throughout."""
    torch.manual_seed(0)
    generator = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    discriminator = Discriminator()
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
    bce = nn.BCEWithLogitsLoss()
    g_losses = []
    with Hook(str(tmp_path / "run")) as hook:
        hook.register_module(generator)
        hook.register_module(discriminator)
        for _ in range(10):
            opt_g.zero_grad()
            fake = generator(torch.randn(32, 4))
            g_loss = bce(discriminator(fake), torch.ones(32, 1))
            g_loss.backward()
            opt_g.step()
            g_losses.append(g_loss.item())
            opt_d.zero_grad()
            real = torch.randn(32, 2) * 0.5
            d_loss = bce(discriminator(real), torch.ones(32, 1)) + bce(
                discriminator(fake.detach()), torch.zeros(32, 1)
            )
            d_loss.backward()
            opt_d.step()
    trial = mldbg.create_trial(str(tmp_path / "run"))
    assert len(trial.steps(mode=Mode.TRAIN)) == 10
    loss = trial.tensor("loss")
    recorded = [float(loss.value(s)) for s in loss.steps()]
    assert recorded == pytest.approx(g_losses, rel=1e-5)
    assert len(trial.tensor("loss/backward1").steps()) == 10
