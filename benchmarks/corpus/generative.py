"""Generative models: GANs (two models on one hook), VAEs and a tiny denoising diffusion model."""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import buggy, healthy

torch.set_num_threads(1)


def _mixture(g: torch.Generator, n: int, kind: str) -> torch.Tensor:
    """2-D toy data: 8 Gaussians on a circle, or a swiss roll, scaled to about unit variance."""
    if kind == "gaussians":
        k = torch.randint(0, 8, (n,), generator=g).float() * (2 * math.pi / 8)
        return torch.stack([torch.cos(k), torch.sin(k)], 1) * 1.4 + 0.1 * torch.randn(n, 2, generator=g)
    t = 1.5 * math.pi * (1 + 2 * torch.rand(n, generator=g))
    return torch.stack([t * torch.cos(t), t * torch.sin(t)], 1) / 7 + 0.05 * torch.randn(n, 2, generator=g)


def gan(
    path: str,
    data: str = "gaussians",
    loss: str = "bce",
    width: int = 64,
    lr_g: float = 1e-3,
    lr_d: float = 1e-3,
    steps: int = 300,
    batch: int = 128,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """A GAN of two MLPs on 2-D data, one hook for both; `bce`: the non-saturating loss with
    one-sided label smoothing; `hinge`: hinge loss with spectral norm in the discriminator."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    z_dim = 4
    gen = nn.Sequential(
        nn.Linear(z_dim, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 2)
    )
    sn = nn.utils.parametrizations.spectral_norm if loss == "hinge" else (lambda m: m)
    disc = nn.Sequential(
        sn(nn.Linear(2, width)),
        nn.LeakyReLU(0.2),
        sn(nn.Linear(width, width)),
        nn.LeakyReLU(0.2),
        sn(nn.Linear(width, 1)),
    )
    bce = nn.BCEWithLogitsLoss()
    scale = 100 if bug == "lr_x100" else 1
    opt_g = torch.optim.Adam(gen.parameters(), lr=lr_g * scale, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=lr_d * scale, betas=(0.5, 0.999))
    hook = Hook(path)
    hook.register_module(gen, name="generator")
    hook.register_module(disc, name="discriminator")
    if loss == "bce":
        hook.register_loss(bce)
    losses = []
    for _ in range(steps):
        real = _mixture(g, batch, data)
        fake = gen(torch.randn(batch, z_dim, generator=g))
        opt_d.zero_grad()
        if loss == "bce":
            d_loss = bce(disc(real), torch.full((batch, 1), 0.9)) + bce(
                disc(fake.detach()), torch.zeros(batch, 1)
            )
        else:
            d_loss = F.relu(1 - disc(real)).mean() + F.relu(1 + disc(fake.detach())).mean()
        d_loss.backward()
        opt_d.step()
        opt_g.zero_grad()
        g_loss = bce(disc(fake), torch.ones(batch, 1)) if loss == "bce" else -disc(fake).mean()
        g_loss.backward()
        opt_g.step()
        losses.append(d_loss.item())
    hook.close()
    return losses


class GaussianVAE(nn.Module):
    def __init__(self, d: int, hidden: int, latent: int, norm: bool):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Linear(d, hidden), nn.LayerNorm(hidden) if norm else nn.Identity(), nn.SiLU()
        )
        self.mu = nn.Linear(hidden, latent)
        self.logvar = nn.Linear(hidden, latent)
        self.dec = nn.Sequential(nn.Linear(latent, hidden), nn.SiLU(), nn.Linear(hidden, d))

    def forward(self, x: torch.Tensor):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.dec(z), mu, logvar


class ELBO(nn.Module):
    """Gaussian likelihood (MSE summed over features) + beta * KL, averaged over the batch;
    `free_bits`: the KL of each latent is not pushed below that many nats."""

    def __init__(self, beta: float, free_bits: float = 0.0):
        super().__init__()
        self.beta, self.free_bits = beta, free_bits

    def forward(self, recon, x, mu, logvar):
        rec = F.mse_loss(recon, x, reduction="none").sum(1).mean()
        kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp())
        kl = kl.mean(0).clamp(min=self.free_bits).sum()
        return rec + self.beta * kl


class BernoulliELBO(nn.Module):
    """Binary data: Bernoulli likelihood written out with log (no BCE helper) + KL."""

    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, p, x, mu, logvar):
        rec = -(x * torch.log(p + self.eps) + (1 - x) * torch.log(1 - p + self.eps)).sum(1).mean()
        return rec - 0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1).mean()


def vae(
    path: str,
    d: int = 24,
    hidden: int = 64,
    latent: int = 4,
    beta: float = 1.0,
    free_bits: float = 0.0,
    norm: bool = False,
    likelihood: str = "gaussian",
    lr: float = 1e-3,
    steps: int = 300,
    batch: int = 64,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """A VAE on data that lies near a 3-D manifold in `d` dimensions (Gaussian) or on binary
    patterns (Bernoulli); Adam, evaluation of the ELBO on held-out data every 100 steps."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    mix = torch.randn(3, d, generator=g)

    def sample(n: int) -> torch.Tensor:
        z = torch.randn(n, 3, generator=g)
        x = torch.tanh(z @ mix) + 0.1 * torch.randn(n, d, generator=g)
        return (x > 0).float() if likelihood == "bernoulli" else x / 0.7

    model = GaussianVAE(d, hidden, latent, norm)
    if likelihood == "bernoulli":
        model.dec.append(nn.Sigmoid())
        loss_fn: nn.Module = BernoulliELBO(1e-7)
    else:
        loss_fn = ELBO(beta, free_bits)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    val = sample(256)
    for step in range(steps):
        model.train()
        x = sample(batch)
        opt.zero_grad()
        recon, mu, logvar = model(x)
        loss = loss_fn(recon, x, mu, logvar)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if (step + 1) % 100 == 0:
            model.eval()
            with torch.no_grad():
                recon, mu, logvar = model(val)
                loss_fn(recon, val, mu, logvar)
    hook.close()
    return losses


class Denoiser(nn.Module):
    """An MLP that predicts the noise of x_t, given t as a sinusoidal embedding."""

    def __init__(self, width: int, temb: int = 16):
        super().__init__()
        self.temb = temb
        self.net = nn.Sequential(
            nn.Linear(2 + temb, width), nn.SiLU(), nn.Linear(width, width), nn.SiLU(), nn.Linear(width, width), nn.SiLU(),
            nn.Linear(width, 2),
        )  # fmt: skip

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        freqs = torch.exp(-math.log(1000) * torch.arange(self.temb // 2) / (self.temb // 2))
        angles = t[:, None].float() * freqs[None]
        return self.net(torch.cat([x, torch.sin(angles), torch.cos(angles)], 1))


def diffusion(
    path: str,
    data: str = "swiss",
    betas: str = "linear",
    timesteps: int = 100,
    width: int = 64,
    lr: float = 2e-3,
    ema: float = 0.99,
    steps: int = 300,
    batch: int = 128,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """DDPM (Ho et al.) on 2-D data: epsilon-prediction with MSE, linear or cosine noise
    schedule, an EMA copy of the weights, a short ancestral sampling at the end."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    if betas == "linear":
        beta = torch.linspace(1e-4, 0.02 * 1000 / timesteps, timesteps)
    else:
        s = torch.arange(timesteps + 1) / timesteps
        f = torch.cos((s + 0.008) / 1.008 * math.pi / 2) ** 2
        beta = (1 - f[1:] / f[:-1]).clamp(max=0.999)
    abar = torch.cumprod(1 - beta, 0)
    model = Denoiser(width)
    ema_model = copy.deepcopy(model).requires_grad_(False)
    loss_fn = nn.MSELoss()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for _ in range(steps):
        x0 = _mixture(g, batch, data)
        t = torch.randint(0, timesteps, (batch,), generator=g)
        eps = torch.randn(x0.shape, generator=g)
        a = abar[t][:, None]
        xt = a.sqrt() * x0 + (1 - a).sqrt() * eps
        if bug != "no_zero_grad":
            opt.zero_grad()
        loss = loss_fn(model(xt, t), eps)
        loss.backward()
        opt.step()
        with torch.no_grad():
            for pe, p in zip(ema_model.parameters(), model.parameters(), strict=True):
                pe.lerp_(p, 1 - ema)
        losses.append(loss.item())
    with torch.no_grad():  # sample with the EMA weights (not the recorded model)
        x = torch.randn(256, 2, generator=g)
        for t in reversed(range(timesteps)):
            e = ema_model(x, torch.full((256,), t))
            x = (x - beta[t] / (1 - abar[t]).sqrt() * e) / (1 - beta[t]).sqrt()
            if t:
                x = x + beta[t].sqrt() * torch.randn(x.shape, generator=g)
    hook.close()
    return losses


_gan = healthy("gan_mlp_bce_gaussians", "GAN", gan)
_diffusion = healthy("ddpm_swiss_linear", "diffusion", diffusion)
_bvae = healthy("vae_bernoulli_patterns", "VAE", vae, likelihood="bernoulli", hidden=96, seed=3)

PIPELINES = [
    _gan,
    healthy("gan_mlp_bce_swiss_ttur", "GAN", gan, data="swiss", lr_g=1e-4, lr_d=4e-4, seed=1),
    healthy("gan_hinge_spectral_norm", "GAN", gan, loss="hinge", lr_g=2e-4, lr_d=2e-4, width=48, seed=2),
    healthy("vae_gaussian_manifold", "VAE", vae),
    healthy("vae_beta4_layernorm", "VAE", vae, beta=4.0, norm=True, latent=6, seed=1),
    healthy("vae_free_bits", "VAE", vae, free_bits=0.25, latent=8, lr=2e-3, seed=2, steps=250),
    _bvae,
    _diffusion,
    healthy(
        "ddpm_gaussians_cosine",
        "diffusion",
        diffusion,
        data="gaussians",
        betas="cosine",
        width=96,
        lr=1e-3,
        seed=1,
    ),
    buggy(_gan, "lr_x100"),
    buggy(_diffusion, "no_zero_grad"),
]
