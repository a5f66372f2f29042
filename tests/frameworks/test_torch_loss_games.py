"""Backward passes of one step that reach different parameters are different losses: a GAN
recorded by the two lines (no `register_loss`, the loss read from backward) gives `loss` (the
discriminator's) and `loss/backward1` (the generator's), the adversarial selector sees the
game without labels, and the loss rules stay quiet on it; a diverging GAN is still found.
Gradient accumulation (two micro-batches of one loss) stays one `loss`, and the loss rules
still fire on its stalled and diverging twins."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from tests.rules.conftest import fired
from torch import nn

import mldbg
from mldbg.rules.select import adversarial
from mldbg.rules.view import TrialView
from mldbg.torch import Hook

LOSS_RULES = ["loss_change_point", "loss_not_decreasing", "underfitting", "loss_spike", "loss_divergence"]


def _gan(path, loss: str, steps: int = 300, lr: float = 2e-4, seed: int = 2) -> list[float]:
    """A GAN of two MLPs on 8 Gaussians on a circle: hinge loss with spectral norm, or the
    non-saturating BCE loss; the discriminator's pass, then the generator's, each step."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    gen = nn.Sequential(nn.Linear(4, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU(), nn.Linear(48, 2))
    sn = nn.utils.parametrizations.spectral_norm if loss == "hinge" else (lambda m: m)
    disc = nn.Sequential(sn(nn.Linear(2, 48)), nn.LeakyReLU(0.2), sn(nn.Linear(48, 48)), nn.LeakyReLU(0.2), sn(nn.Linear(48, 1)))  # fmt: skip
    opt_g = torch.optim.Adam(gen.parameters(), lr=lr, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=lr, betas=(0.5, 0.999))
    hook = Hook(str(path))
    hook.register_module(gen, name="generator")
    hook.register_module(disc, name="discriminator")
    out = []
    for _ in range(steps):
        k = torch.randint(0, 8, (128,), generator=g).float() * (2 * math.pi / 8)
        real = torch.stack([torch.cos(k), torch.sin(k)], 1) * 1.4 + 0.1 * torch.randn(128, 2, generator=g)
        fake = gen(torch.randn(128, 4, generator=g))
        opt_d.zero_grad()
        if loss == "hinge":
            d_loss = F.relu(1 - disc(real)).mean() + F.relu(1 + disc(fake.detach())).mean()
        else:
            d_loss = F.binary_cross_entropy_with_logits(
                disc(real), torch.full((128, 1), 0.9)
            ) + F.binary_cross_entropy_with_logits(disc(fake.detach()), torch.zeros(128, 1))
        d_loss.backward()
        opt_d.step()
        opt_g.zero_grad()
        d_fake = disc(fake)
        g_loss = (
            -d_fake.mean()
            if loss == "hinge"
            else F.binary_cross_entropy_with_logits(d_fake, torch.ones(128, 1))
        )
        g_loss.backward()
        opt_g.step()
        out.append(d_loss.item())
    hook.close()
    return out


def _accumulating(path, lr: float, steps: int = 150, micro: int = 2) -> list[float]:
    """A classifier trained with gradient accumulation: `micro` micro-batches of one loss,
    each `loss / micro` given to backward, one optimizer step."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    w = torch.randn(10, 3, generator=g)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    hook = Hook(str(path))
    hook.register_module(model)
    out = []
    for _ in range(steps):
        opt.zero_grad()
        total = 0.0
        for _ in range(micro):
            x = torch.randn(32, 10, generator=g)
            y = (x @ w).argmax(1)
            loss = F.cross_entropy(model(x), y) / micro
            loss.backward()
            total += loss.item()
        opt.step()
        out.append(total)
    hook.close()
    return out


def _series(path) -> dict[str, list[float]]:
    trial = mldbg.create_trial(str(path))
    return {
        n: [float(trial.tensor(n).value(s)) for s in trial.tensor(n).steps()]
        for n in trial.tensor_names(collection="losses")
    }


@pytest.mark.parametrize("kind", ["hinge", "bce"])
def test_a_gan_gives_two_losses_and_is_a_game(tmp_path, kind):
    d_losses = _gan(tmp_path / "run", kind)
    series = _series(tmp_path / "run")
    assert set(series) == {"loss", "loss/backward1"}, series.keys()
    assert len(series["loss"]) == len(series["loss/backward1"]) == 300
    # `loss` is the discriminator's own (the first pass of each step), not a mean of the two
    assert series["loss"] == pytest.approx(d_losses, rel=1e-5, abs=1e-6)
    trial = mldbg.create_trial(str(tmp_path / "run"))
    view = TrialView(trial)
    assert adversarial(view, trial.steps()[-200:])
    assert not mldbg.check(str(tmp_path / "run"), rules=LOSS_RULES)


def test_a_diverging_gan_is_still_found(tmp_path):
    """Learning rates 100x too high with the BCE loss: its losses blow up or go NaN."""
    _gan(tmp_path / "run", "bce", steps=200, lr=0.5)
    found = fired(mldbg.check(str(tmp_path / "run")))
    assert {"loss_divergence", "exploding_tensor", "loss_spike"} & set(found), found


def test_accumulation_stays_one_loss(tmp_path):
    losses = _accumulating(tmp_path / "run", lr=0.1)
    series = _series(tmp_path / "run")
    assert set(series) == {"loss"}
    assert series["loss"] == pytest.approx([v / 2 for v in losses], rel=1e-5)  # the mean of the two passes
    assert not mldbg.check(str(tmp_path / "run"), rules=LOSS_RULES)


def test_accumulation_twins_still_fire(tmp_path):
    """A stalled twin (learning rate 0) and a diverging one (learning rate 1e3)."""
    _accumulating(tmp_path / "stalled", lr=0.0)
    assert set(_series(tmp_path / "stalled")) == {"loss"}
    stalled = fired(mldbg.check(str(tmp_path / "stalled"), rules=LOSS_RULES))
    assert {"loss_not_decreasing", "underfitting"} & set(stalled), stalled
    _accumulating(tmp_path / "diverging", lr=1e3, steps=60)
    diverging = fired(mldbg.check(str(tmp_path / "diverging")))
    assert {"loss_divergence", "exploding_tensor", "loss_spike", "loss_change_point"} & set(diverging), (
        diverging
    )


def _two_tasks(path, lr_b: float, steps: int = 150) -> None:
    """Two classifiers on one hook, each with its own loss, backward pass and optimizer, in
    one step: two losses on different parameters that are no game (each is meant to fall)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    wa, wb = torch.randn(10, 3, generator=g), torch.randn(10, 4, generator=g)
    a = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    b = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
    opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
    opt_b = torch.optim.SGD(b.parameters(), lr=lr_b)
    hook = Hook(str(path))
    hook.register_module(a, name="task_a")
    hook.register_module(b, name="task_b")
    for _ in range(steps):
        x = torch.randn(32, 10, generator=g)
        opt_a.zero_grad()
        F.cross_entropy(a(x), (x @ wa).argmax(1)).backward()
        opt_a.step()
        opt_b.zero_grad()
        F.cross_entropy(b(x), (x @ wb).argmax(1)).backward()
        opt_b.step()
    hook.close()


def test_two_tasks_are_two_losses_and_no_game(tmp_path):
    """Both learn: two series, falling together, not a game; task B's optimizer at learning
    rate 0: its loss stalls, and the loss rules say so on `loss/backward1`."""
    _two_tasks(tmp_path / "healthy", lr_b=0.1)
    assert set(_series(tmp_path / "healthy")) == {"loss", "loss/backward1"}
    trial = mldbg.create_trial(str(tmp_path / "healthy"))
    assert not adversarial(TrialView(trial), trial.steps()[-150:])
    _two_tasks(tmp_path / "stalled", lr_b=0.0)
    found = mldbg.check(str(tmp_path / "stalled"), rules=LOSS_RULES)
    assert {"loss_not_decreasing", "underfitting"} & {f.rule for f in found}, found
    assert all(f.tensors == ["loss/backward1"] for f in found), [(f.rule, f.tensors) for f in found]


def _alternating(path, blocks: int = 6) -> tuple[list[float], list[float]]:
    """Two models of one hook trained in turns, as GAIL trains its discriminator and its policy:
    a block of 12 updates of a classifier, then a block of 4 of a regressor, each update one
    backward pass of its own model's loss."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    w = torch.randn(8, 3, generator=g)
    classifier = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    regressor = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    opt_c = torch.optim.Adam(classifier.parameters(), lr=3e-3)
    opt_r = torch.optim.Adam(regressor.parameters(), lr=3e-3)
    hook = Hook(str(path))
    hook.register_module(classifier, name="classifier")
    hook.register_module(regressor, name="regressor")
    losses_c, losses_r = [], []
    for _ in range(blocks):
        for _ in range(12):
            x = torch.randn(64, 8, generator=g)
            loss = F.cross_entropy(classifier(x), (x @ w).argmax(1))
            opt_c.zero_grad()
            loss.backward()
            opt_c.step()
            losses_c.append(loss.item())
        for _ in range(4):
            x = torch.randn(64, 8, generator=g)
            loss = 0.01 * F.mse_loss(regressor(x).squeeze(1), x[:, 0] * x[:, 1])
            opt_r.zero_grad()
            loss.backward()
            opt_r.step()
            losses_r.append(loss.item())
    hook.close()
    return losses_c, losses_r


def test_models_updated_in_turns_give_a_loss_each(tmp_path):
    """Steps of one backward pass that update different models (GAIL's discriminator and
    policy, in blocks) are two series: neither holds the other's values."""
    losses_c, losses_r = _alternating(tmp_path / "run")
    series = _series(tmp_path / "run")
    assert set(series) == {"loss", "loss/backward1"}, series.keys()
    # each series holds values of its own model's losses only (a step may average several updates)
    lo_c, hi_c = min(losses_c), max(losses_c)
    assert all(lo_c - 1e-6 <= v <= hi_c + 1e-6 for v in series["loss"]), series["loss"]
    assert max(series["loss/backward1"]) <= max(losses_r) + 1e-6 < lo_c
    assert len(series["loss"]) >= 6 and len(series["loss/backward1"]) >= 6
