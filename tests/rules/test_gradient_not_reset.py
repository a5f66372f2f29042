"""gradient_not_reset: no `optimizer.zero_grad()`, so `.grad` sums every gradient since the
start and its norm grows step after step; the healthy twin (zero_grad at every step) is quiet."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import mldbg
import mldbg.torch
from mldbg.rules.runner import RuleRunner
from tests.rules.conftest import assert_explains, fired
from tests.rules.healthy_pipelines2 import gcn_dense_nobias
from tests.tiny import train


# The MLPs show the fast, near-linear growth of the norm; the CNNs (BatchNorm or not) only a
# slow rise, which a healthy language model shows too: there `sample_change` tells (the
# summed gradient barely changes from step to step, a mini-batch gradient does).
@pytest.mark.parametrize(
    ("kwargs", "by"),
    [
        ({}, 8), ({"optimizer": "adam"}, 8), ({"width": 64, "depth": 3}, 8),
        ({"model": "cnn"}, 14), ({"model": "cnn", "optimizer": "adam"}, 14),
        ({"model": "cnn", "batchnorm": False}, 14),
        # full batch (the same samples every step): the change of a sum falls as 1/t, below
        # the 20% that repeated inputs are judged against
        ({"model": "cnn", "n_train": 64, "batch_size": 64}, 16),
        ({"model": "cnn", "n_train": 64, "batch_size": 64, "batchnorm": False}, 16),
    ],
)  # fmt: skip
def test_fires_when_zero_grad_is_missing(tmp_path, kwargs, by):
    run = train(
        tmp_path / "run", default_hook=True, steps=30, eval_every=None, missing_zero_grad=True, **kwargs
    )
    found = mldbg.check(run.path, rules=["gradient_not_reset"])
    assert fired(found).get("gradient_not_reset", 10**9) < by, [str(f) for f in found]
    assert_explains(found[0])
    assert "optimizer.zero_grad()" in found[0].suggestion


@pytest.mark.parametrize(
    "kwargs",
    [
        {}, {"optimizer": "adam"}, {"model": "cnn"}, {"momentum": 0.9, "lr": 0.02},
        {"model": "cnn", "optimizer": "adam", "batchnorm": False},
        # full batch: the gradient changes little from step to step, yet it is reset
        {"n_train": 32, "batch_size": 32}, {"n_train": 32, "batch_size": 32, "optimizer": "adam"},
        {"model": "cnn", "n_train": 64, "batch_size": 64},
    ],
)  # fmt: skip
def test_quiet_on_the_healthy_twin(tmp_path, kwargs):
    run = train(tmp_path / "run", default_hook=True, steps=60, eval_every=None, **kwargs)
    assert not mldbg.check(run.path, rules=["gradient_not_reset"])


def test_the_default_set_says_zero_grad(tmp_path):
    """The hint reaches the user through `mldbg.check` with the default set."""
    run = train(tmp_path / "run", default_hook=True, steps=30, eval_every=None, missing_zero_grad=True)
    found = [f for f in mldbg.check(run.path) if f.rule == "gradient_not_reset"]
    assert found and "zero_grad" in found[0].message


def test_full_batch_gradients_that_change_little_are_not_a_sum(tmp_path):
    """A full-batch GCN (the same nodes every step, recorded with the two lines): its
    gradient changes by 30-50% from one statistics step to the next while its norm rises
    1.5x as the fit sharpens. The input fingerprints say the samples repeat, so the change is
    judged against 20%, not 40%: quiet, on both paths."""
    path = gcn_dense_nobias(tmp_path / "run")
    trial = mldbg.create_trial(path)
    a, b = (trial.tensor("stats/model_input_0/sample_fingerprints").value(s) for s in (0, 2))
    assert sorted(a.tolist()) == sorted(b.tolist())  # the same samples
    assert not mldbg.check(path, rules=["gradient_not_reset"])
    runner = RuleRunner(mldbg.create_trial(path), ["gradient_not_reset"], columns=False)
    assert not runner.run_available() + runner.finish()


def _gan(path, steps: int = 30) -> str:
    """A small DCGAN whose discriminator has no BatchNorm, on one hook: early on the
    discriminator learns one direction (real against fake) whatever the batch."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    gen = nn.Sequential(
        nn.ConvTranspose2d(8, 16, 4, 1, 0, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.ConvTranspose2d(16, 1, 4, 2, 1, bias=False), nn.Tanh(),
    )  # fmt: skip
    disc = nn.Sequential(
        nn.Conv2d(1, 16, 4, 2, 1, bias=False), nn.LeakyReLU(0.2),
        nn.Conv2d(16, 32, 4, 2, 1, bias=False), nn.LeakyReLU(0.2),
        nn.Conv2d(32, 1, 2, 1, 0, bias=False), nn.Flatten(), nn.Sigmoid(),
    )  # fmt: skip
    for m in [*gen.modules(), *disc.modules()]:
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(m.weight, 0.0, 0.02)
    yy, xx = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
    loss_fn = nn.BCELoss()
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    with mldbg.torch.Hook(str(path)) as h:
        h.register_module(gen)
        h.register_module(disc)
        h.register_loss(loss_fn)
        for _ in range(steps):
            c = torch.rand(32, 2, 1, 1, generator=g) * 6 + 1
            real = 2 * torch.exp(-((yy - c[:, :1]) ** 2 + (xx - c[:, 1:]) ** 2) / 4) - 1
            opt_d.zero_grad()
            fake = gen(torch.randn(32, 8, 1, 1, generator=g))
            loss_d = loss_fn(disc(real), torch.ones(32, 1)) + loss_fn(disc(fake.detach()), torch.zeros(32, 1))
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            loss_fn(disc(fake), torch.ones(32, 1)).backward()
            opt_g.step()
    return str(path)


def test_a_gan_is_not_a_stale_sum(tmp_path):
    """The GAN's fresh gradients change by ~20% a step while their norm rises 1.6x (it fired
    at step 12): a game (`mldbg.rules.select.adversarial`), not judged by sample_change."""
    path = _gan(tmp_path / "run")
    assert not mldbg.check(path, rules=["gradient_not_reset"])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"task": "regression", "lr": 0.02, "batch_size": 512},
        {"task": "regression", "lr": 0.02, "batch_size": 512, "seed": 1},
        {"task": "regression", "lr": 0.02, "batch_size": 128},
        {"task": "regression", "optimizer": "adam", "batch_size": 16},
    ],
)  # fmt: skip
def test_quiet_on_healthy_regressions_whose_gradient_barely_moves(tmp_path, kwargs):
    """A full-batch MLP regression: its gradient changes 6-9% a step while its norm rises
    1.6x as the fit sharpens - what a stale sum looks like by `sample_change` and norm alone.
    If gradients accumulated, the change at steps 1-3 would be one fresh gradient, about
    the size of the first (0.5-1.8x in every missing-zero_grad run); here it is 8% of it, so
    the sum is refuted (`min_fresh_change`)."""
    run = train(tmp_path / "run", default_hook=True, steps=40, eval_every=None,
                hook_kwargs={"statistics_budget": 0}, **kwargs)  # fmt: skip
    found = mldbg.check(run.path, rules=["gradient_not_reset"])
    assert not found, [str(f) for f in found]
