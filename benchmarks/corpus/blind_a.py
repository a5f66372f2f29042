"""A blind held-out set (issue 26), part A: vision, generative, scientific and unusual training
loops, none of them a kind the earlier sets hold. Written without running mldbg's rules on them.

Generative: WGAN-GP on a ring of Gaussians (gradient penalty through create_graph), a conditional
DCGAN on 8x8 glyphs, a VQ-VAE (EMA codebook with restarts, straight-through, commitment loss), a
PixelCNN with masked convolutions on binary glyphs, denoising score matching on 2-D data, a
Gumbel-softmax categorical VAE with temperature annealing. Self-supervised: BYOL (EMA target,
predictor) and Barlow Twins. Vision: ArcFace, mixup, CutMix, a MobileNetV2-style inverted-residual
net (ReLU6), an SE-ResNet, a pre-activation ResNet with stochastic depth, FixMatch, a two-head box
+ class detector, keypoint heatmaps, ESPCN super-resolution, colorization, PGD adversarial
training, SAM, Lookahead(RAdam), LARS with a large batch, EMA weights for evaluation, gradient
checkpointing, DANN with a gradient-reversal autograd.Function. Scientific: a PINN for Burgers'
equation, second-order MAML on sines, a hypernetwork, a SIREN image fit, a neural ODE with a
fixed-step RK4 solver, Bayes by backprop, MC-dropout heteroscedastic regression, a deep ensemble,
a sparse (L1) autoencoder. Model compression: iterative magnitude pruning with
torch.nn.utils.prune, eager-mode fake-quant QAT. Other unusual loops: DP-SGD with per-sample
gradients from torch.func.vmap written into p.grad, an RBM trained by CD-1 through the free-energy
difference, a growing neural cellular automaton (a random number of recurrent steps, per-parameter
gradient normalization).

Every script is written the way its kind is usually written (its published defaults, its loop
style), with the README's two lines. `SPLIT = BLIND` puts them all in the `blind` set.
"""

from __future__ import annotations

import copy
import math
import random

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from mldbg.torch import Hook

from . import BLIND, buggy, healthy

SPLIT = BLIND

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 7)


def _glyphs(g: torch.Generator, n: int, size: int = 8, classes: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """Grey glyph images in [0, 1], (n, 1, size, size): a box outline, an X, horizontal bars,
    vertical bars or a disk, shifted a little, with random contrast and pixel noise."""
    c = (size - 1) / 2
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    r = size * 0.3
    cheb = torch.maximum((yy - c).abs(), (xx - c).abs())
    dist = ((yy - c) ** 2 + (xx - c) ** 2).sqrt()
    protos = torch.stack(
        [
            (cheb - r).abs() < 0.6,
            (((yy - xx).abs() < 0.8) | ((yy + xx - 2 * c).abs() < 0.8)) & (dist < r + 1),
            (yy.long() % 3 == 0) & (dist < r + 1.5),
            (xx.long() % 3 == 0) & (dist < r + 1.5),
            dist < r,
        ]
    ).float()[:classes]
    y = torch.randint(0, classes, (n,), generator=g)
    m = max(1, size // 8)
    shift = torch.randint(-m, m + 1, (n, 2), generator=g)
    imgs = torch.stack(
        [torch.roll(protos[int(k)], (int(a), int(b)), (0, 1)) for k, (a, b) in zip(y, shift, strict=True)]
    )
    imgs = imgs * (0.5 + 0.5 * torch.rand(n, 1, 1, generator=g)) + 0.3 * torch.randn(imgs.shape, generator=g)
    return imgs.clamp(0, 1).unsqueeze(1), y


def _batches(n: int, size: int, g: torch.Generator):
    perm = torch.randperm(n, generator=g)
    for i in range(0, n - size + 1, size):
        yield perm[i : i + size]


# ----------------------------------------------------------------------------- WGAN-GP


def _ring_of_gaussians(g: torch.Generator, n: int) -> torch.Tensor:
    k = torch.randint(0, 8, (n,), generator=g).float()
    centers = 2 * torch.stack([torch.cos(k * math.pi / 4), torch.sin(k * math.pi / 4)], 1)
    return (centers + 0.02 * torch.randn(n, 2, generator=g)) / 1.414


def _gradient_penalty(
    critic: nn.Module, real: torch.Tensor, fake: torch.Tensor, g: torch.Generator
) -> torch.Tensor:
    alpha = torch.rand(len(real), 1, generator=g)
    interpolates = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    out = critic(interpolates)
    grads = torch.autograd.grad(
        outputs=out,
        inputs=interpolates,
        grad_outputs=torch.ones_like(out),
        create_graph=True,
        retain_graph=True,
    )[0]
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


def wgan_gp_ring(
    path: str, iters: int = 150, critic_iters: int = 5, lam: float = 0.1, seed: int = 0
) -> list[float]:
    """The toy of Gulrajani et al. (gan_toy.py): 2-D noise, 3 hidden ReLU layers, Adam(1e-4,
    betas (0.5, 0.9)), 5 critic steps per generator step, lambda 0.1 for the toy task."""
    g = _seed(seed)
    dim = 128
    gen = nn.Sequential(
        nn.Linear(2, dim), nn.ReLU(True), nn.Linear(dim, dim), nn.ReLU(True),
        nn.Linear(dim, dim), nn.ReLU(True), nn.Linear(dim, 2),
    )  # fmt: skip
    critic = nn.Sequential(
        nn.Linear(2, dim), nn.ReLU(True), nn.Linear(dim, dim), nn.ReLU(True),
        nn.Linear(dim, dim), nn.ReLU(True), nn.Linear(dim, 1),
    )  # fmt: skip
    opt_d = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.5, 0.9))
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-4, betas=(0.5, 0.9))
    hook = Hook(path)
    hook.register_module(gen, name="generator")
    hook.register_module(critic, name="critic")
    losses = []
    for it in range(iters):
        for p in critic.parameters():
            p.requires_grad = True
        for _ in range(critic_iters):
            real = _ring_of_gaussians(g, 256)
            with torch.no_grad():
                fake = gen(torch.randn(256, 2, generator=g))
            critic.zero_grad()
            d_real = critic(real).mean()
            d_fake = critic(fake).mean()
            d_cost = d_fake - d_real + lam * _gradient_penalty(critic, real, fake, g)
            d_cost.backward()
            opt_d.step()
        for p in critic.parameters():
            p.requires_grad = False
        gen.zero_grad()
        g_cost = -critic(gen(torch.randn(256, 2, generator=g))).mean()
        g_cost.backward()
        opt_g.step()
        losses.append(d_cost.item())
        if it % 50 == 0:
            print(f"iter {it} D {d_cost.item():.4f} G {g_cost.item():.4f} W {(d_real - d_fake).item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- conditional DCGAN


class CondGenerator(nn.Module):
    def __init__(self, nz: int = 16, classes: int = 5):
        super().__init__()
        self.label_emb = nn.Embedding(classes, 8)
        self.fc = nn.Sequential(nn.Linear(nz + 8, 64 * 2 * 2), nn.BatchNorm1d(256), nn.ReLU(True))
        self.net = nn.Sequential(
            nn.ConvTranspose2d(64, 32, 4, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(True),
            nn.ConvTranspose2d(32, 1, 4, 2, 1, bias=False), nn.Tanh(),
        )  # fmt: skip

    def forward(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.net(self.fc(torch.cat([z, self.label_emb(y)], 1)).view(-1, 64, 2, 2))


class CondDiscriminator(nn.Module):
    def __init__(self, classes: int = 5):
        super().__init__()
        self.label_emb = nn.Embedding(classes, 64)
        self.net = nn.Sequential(
            nn.Conv2d(2, 32, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
            nn.Conv2d(32, 64, 4, 2, 1, bias=False), nn.BatchNorm2d(64), nn.LeakyReLU(0.2, True),
            nn.Flatten(), nn.Linear(64 * 2 * 2, 1),
        )  # fmt: skip

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, self.label_emb(y).view(-1, 1, 8, 8)], 1)).view(-1)


def _dcgan_init(m: nn.Module) -> None:
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def cgan_glyphs(path: str, epochs: int = 15, nz: int = 16, seed: int = 0) -> list[float]:
    g = _seed(seed)
    x, y = _glyphs(g, 1280)
    loader = DataLoader(TensorDataset(x * 2 - 1, y), batch_size=64, shuffle=True, generator=g, drop_last=True)
    netG, netD = CondGenerator(nz), CondDiscriminator()  # noqa: N806
    netG.apply(_dcgan_init)
    netD.apply(_dcgan_init)
    criterion = nn.BCEWithLogitsLoss()
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))  # noqa: N806
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))  # noqa: N806
    hook = Hook(path)
    hook.register_module(netG, name="generator")
    hook.register_module(netD, name="discriminator")
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        for real, labels in loader:
            b = len(real)
            # (1) update D: maximize log(D(x|y)) + log(1 - D(G(z|y)|y))
            netD.zero_grad()
            err_real = criterion(netD(real, labels), torch.ones(b))
            fake_labels = torch.randint(0, 5, (b,), generator=g)
            fake = netG(torch.randn(b, nz, generator=g), fake_labels)
            err_fake = criterion(netD(fake.detach(), fake_labels), torch.zeros(b))
            err_d = err_real + err_fake
            err_d.backward()
            optD.step()
            # (2) update G: maximize log(D(G(z|y)|y))
            netG.zero_grad()
            err_g = criterion(netD(fake, fake_labels), torch.ones(b))
            err_g.backward()
            optG.step()
            losses.append(err_d.item())
        print(f"[{epoch}/{epochs}] Loss_D {err_d.item():.4f} Loss_G {err_g.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- VQ-VAE


class VectorQuantizerEMA(nn.Module):
    """The codebook is not trained by gradients but by exponential moving averages of the
    assigned encoder outputs (van den Oord et al., appendix); only the commitment loss remains.
    Codes left unused are restarted on random encoder outputs (as Jukebox does)."""

    def __init__(self, num_embeddings: int = 64, embedding_dim: int = 16, commitment_cost: float = 0.25,
                 decay: float = 0.99, epsilon: float = 1e-5, restart_threshold: float = 0.05):  # fmt: skip
        super().__init__()
        self.embedding_dim = embedding_dim
        self.num_embeddings = num_embeddings
        self.commitment_cost = commitment_cost
        self.decay = decay
        self.epsilon = epsilon
        self.restart_threshold = restart_threshold
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)
        self.embedding.weight.data.normal_()
        self.register_buffer("ema_cluster_size", torch.zeros(num_embeddings))
        self.ema_w = nn.Parameter(torch.Tensor(num_embeddings, embedding_dim))
        self.ema_w.data.normal_()

    def forward(self, inputs: torch.Tensor):
        inputs = inputs.permute(0, 2, 3, 1).contiguous()
        flat = inputs.view(-1, self.embedding_dim)
        distances = (
            flat.pow(2).sum(1, keepdim=True)
            + self.embedding.weight.pow(2).sum(1)
            - 2 * flat @ self.embedding.weight.t()
        )
        idx = distances.argmin(1)
        encodings = F.one_hot(idx, self.num_embeddings).float()
        quantized = (encodings @ self.embedding.weight).view(inputs.shape)
        if self.training:
            with torch.no_grad():
                self.ema_cluster_size.mul_(self.decay).add_((1 - self.decay) * encodings.sum(0))
                n = self.ema_cluster_size.sum()
                self.ema_cluster_size.copy_(
                    (self.ema_cluster_size + self.epsilon) / (n + self.num_embeddings * self.epsilon) * n
                )
                self.ema_w.data.mul_(self.decay).add_((1 - self.decay) * (encodings.t() @ flat))
                self.embedding.weight.data.copy_(self.ema_w / self.ema_cluster_size.unsqueeze(1))
                dead = self.ema_cluster_size < self.restart_threshold  # Jukebox-style random restarts
                if dead.any():
                    pick = flat[torch.randint(0, len(flat), (int(dead.sum()),))].detach()
                    self.embedding.weight.data[dead] = pick
                    self.ema_w.data[dead] = pick
                    self.ema_cluster_size[dead] = 1.0
        e_latent_loss = F.mse_loss(quantized.detach(), inputs)
        loss = self.commitment_cost * e_latent_loss
        quantized = inputs + (quantized - inputs).detach()  # straight-through estimator
        probs = encodings.mean(0)
        perplexity = torch.exp(-torch.sum(probs * torch.log(probs + 1e-10)))
        return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity


class VQVAE(nn.Module):
    def __init__(self, hidden: int = 32, dim: int = 16):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, hidden, 4, 2, 1), nn.ReLU(), nn.Conv2d(hidden, hidden, 3, 1, 1), nn.ReLU(),
        )  # fmt: skip
        self.pre_vq = nn.Conv2d(hidden, dim, 1)
        self.vq = VectorQuantizerEMA(64, dim, 0.25, 0.99)
        self.decoder = nn.Sequential(
            nn.Conv2d(dim, hidden, 3, 1, 1), nn.ReLU(), nn.ConvTranspose2d(hidden, 1, 4, 2, 1),
        )  # fmt: skip

    def forward(self, x: torch.Tensor):
        vq_loss, q, perplexity = self.vq(self.pre_vq(self.encoder(x)))
        return vq_loss, self.decoder(q), perplexity


def vqvae_glyphs(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    x, _ = _glyphs(g, 2000)
    x = x - 0.5
    data_variance = x.var().item()
    model = VQVAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, amsgrad=False)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    model.train()
    for i in range(steps):
        data = x[torch.randint(0, len(x), (64,), generator=g)]
        if bug != "no_zero_grad":
            optimizer.zero_grad()
        vq_loss, data_recon, perplexity = model(data)
        recon_error = F.mse_loss(data_recon, data) / data_variance
        loss = recon_error + vq_loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if (i + 1) % 100 == 0:
            print(
                f"{i + 1} iterations: recon_error {recon_error.item():.3f} perplexity {perplexity.item():.3f}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- PixelCNN


class MaskedConv2d(nn.Conv2d):
    def __init__(self, mask_type: str, *args, **kwargs):
        super().__init__(*args, **kwargs)
        assert mask_type in ("A", "B")
        self.register_buffer("mask", self.weight.data.clone())
        _, _, h, w = self.weight.size()
        self.mask.fill_(1)
        self.mask[:, :, h // 2, w // 2 + (mask_type == "B") :] = 0
        self.mask[:, :, h // 2 + 1 :] = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.weight.data *= self.mask
        return super().forward(x)


def pixelcnn_binary(path: str, epochs: int = 4, fm: int = 32, seed: int = 0) -> list[float]:
    g = _seed(seed)
    x, _ = _glyphs(g, 1600)
    x = (x > 0.4).float()
    train, test = x[:1440], x[1440:]
    net = nn.Sequential(
        MaskedConv2d("A", 1, fm, 5, 1, 2, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
        MaskedConv2d("B", fm, fm, 3, 1, 1, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
        MaskedConv2d("B", fm, fm, 3, 1, 1, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
        MaskedConv2d("B", fm, fm, 3, 1, 1, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
        nn.Conv2d(fm, 1, 1),
    )  # fmt: skip
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(train), batch_size=32, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(net)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        net.train()
        for (inp,) in loader:
            loss = criterion(net(inp), inp)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        net.eval()
        with torch.no_grad():
            nll = F.binary_cross_entropy_with_logits(net(test), test, reduction="sum").item() / len(test)
        print(f"epoch {epoch}: train {np.mean(losses[-45:]):.4f} test nll {nll:.2f} nats/image")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- score matching


class ScoreNet(nn.Module):
    """s(x, sigma) = net(x, log sigma) / sigma (the NCSNv2 parameterization)."""

    def __init__(self, hidden: int = 128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(3, hidden),
            nn.Softplus(),
            nn.Linear(hidden, hidden),
            nn.Softplus(),
            nn.Linear(hidden, 2),
        )

    def forward(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, sigma.log()], 1)) / sigma


def _checkerboard(g: torch.Generator, n: int) -> torch.Tensor:
    x1 = torch.rand(n, generator=g) * 4 - 2
    x2 = torch.rand(n, generator=g) - torch.randint(0, 2, (n,), generator=g).float() * 2
    x2 = x2 + torch.floor(x1) % 2
    return torch.stack([x1, x2], 1) * 1.5


def score_matching_2d(path: str, steps: int = 500, n_sigmas: int = 10, seed: int = 0) -> list[float]:
    """Denoising score matching over a geometric ladder of noise levels (Song & Ermon), loss
    weighted by sigma^2, on a 2-D checkerboard; Langevin sampling at the end."""
    g = _seed(seed)
    data = _checkerboard(g, 20000)
    sigmas = torch.tensor(np.exp(np.linspace(np.log(1.0), np.log(0.01), n_sigmas)), dtype=torch.float32)
    model = ScoreNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        x = data[torch.randint(0, len(data), (128,), generator=g)]
        sigma = sigmas[torch.randint(0, n_sigmas, (128,), generator=g)].view(-1, 1)
        z = torch.randn(x.shape, generator=g)
        perturbed = x + sigma * z
        target = -z / sigma
        scores = model(perturbed, sigma)
        loss = 0.5 * ((scores - target) ** 2 * sigma**2).sum(1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step} dsm loss {loss.item():.4f}")
    with torch.no_grad():  # annealed Langevin dynamics, a few steps per level
        xs = torch.rand(256, 2, generator=g) * 6 - 3
        for s in sigmas:
            eps = 2e-5 * (s / sigmas[-1]) ** 2
            for _ in range(5):
                xs = (
                    xs
                    + eps / 2 * model(xs, s.expand(256, 1))
                    + eps.sqrt() * torch.randn(xs.shape, generator=g)
                )
    print("sample spread", xs.std(0).tolist())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- augmentations


def _random_crop(x: torch.Tensor, g: torch.Generator, pad: int = 1) -> torch.Tensor:
    """Pad by `pad` (zeros) and crop back at a random offset per image."""
    b, c, h, w = x.shape
    xp = F.pad(x, (pad, pad, pad, pad))
    i = torch.randint(0, 2 * pad + 1, (b, 1, 1, 1), generator=g)
    j = torch.randint(0, 2 * pad + 1, (b, 1, 1, 1), generator=g)
    rows = (i + torch.arange(h).view(1, 1, h, 1)).expand(b, c, h, w)
    cols = (j + torch.arange(w).view(1, 1, 1, w)).expand(b, c, h, w)
    return xp[torch.arange(b).view(b, 1, 1, 1), torch.arange(c).view(1, c, 1, 1), rows, cols]


def _hflip(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    flip = torch.rand(len(x), generator=g) < 0.5
    return torch.where(flip.view(-1, 1, 1, 1), x.flip(3), x)


def _weak(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    return _random_crop(_hflip(x, g), g)


def _strong(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Weak + random contrast + noise + a 3x3 cutout."""
    x = _weak(x, g)
    b, _, h, w = x.shape
    mean = x.mean((1, 2, 3), keepdim=True)
    x = (x - mean) * (0.5 + torch.rand(b, 1, 1, 1, generator=g)) + mean
    x = x + 0.15 * torch.randn(x.shape, generator=g)
    cy = torch.randint(0, h, (b, 1, 1, 1), generator=g)
    cx = torch.randint(0, w, (b, 1, 1, 1), generator=g)
    yy, xx = torch.arange(h).view(1, 1, h, 1), torch.arange(w).view(1, 1, 1, w)
    hole = ((yy - cy).abs() <= 1) & ((xx - cx).abs() <= 1)
    return x.masked_fill(hole, 0.0)


# ----------------------------------------------------------------------------- BYOL


def _mlp_head(d_in: int, hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(d_in, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True), nn.Linear(hidden, d_out)
    )


class BYOLOnline(nn.Module):
    def __init__(self, feat: int = 64, proj: int = 32, hidden: int = 128):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.Conv2d(32, feat, 3, 2, 1), nn.BatchNorm2d(feat), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )  # fmt: skip
        self.projector = _mlp_head(feat, hidden, proj)
        self.predictor = _mlp_head(proj, hidden, proj)


def _byol_loss(p: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    p = F.normalize(p, dim=-1, p=2)
    z = F.normalize(z, dim=-1, p=2)
    return 2 - 2 * (p * z).sum(dim=-1)


def byol_glyphs(
    path: str, steps: int = 250, tau_base: float = 0.99, seed: int = 0, bug: str | None = None
) -> list[float]:
    """BYOL (Grill et al.): an online network with a predictor regresses the projection of an EMA
    target network on the other view; no negatives. tau follows the cosine ramp to 1."""
    g = _seed(seed)
    imgs, labels = _glyphs(g, 2048)
    online = BYOLOnline()
    target_encoder = copy.deepcopy(online.encoder)
    # the buggy twin meant to copy the projector and shares it instead
    target_projector = online.projector if bug == "frozen_by_mistake" else copy.deepcopy(online.projector)
    for p in [*target_encoder.parameters(), *target_projector.parameters()]:
        p.requires_grad = False
    optimizer = torch.optim.Adam(online.parameters(), lr=3e-4)
    hook = Hook(path)
    hook.register_module(online)
    losses = []
    for k in range(steps):
        x = imgs[torch.randint(0, len(imgs), (64,), generator=g)]
        v1, v2 = _strong(x, g), _strong(x, g)
        p1 = online.predictor(online.projector(online.encoder(v1)))
        p2 = online.predictor(online.projector(online.encoder(v2)))
        with torch.no_grad():
            z1 = target_projector(target_encoder(v1))
            z2 = target_projector(target_encoder(v2))
        loss = (_byol_loss(p1, z2) + _byol_loss(p2, z1)).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tau = 1 - (1 - tau_base) * (math.cos(math.pi * k / steps) + 1) / 2
        with torch.no_grad():
            for online_net, target_net in (
                (online.encoder, target_encoder),
                (online.projector, target_projector),
            ):
                for po, pt in zip(online_net.parameters(), target_net.parameters(), strict=True):
                    pt.data.mul_(tau).add_(po.data, alpha=1 - tau)
        losses.append(loss.item())
        if k % 100 == 0:
            print(f"step {k} byol loss {loss.item():.4f} tau {tau:.4f}")
    online.eval()
    with torch.no_grad():  # nearest-centroid probe on the frozen features
        f = F.normalize(online.encoder(imgs), dim=1)
        cent = F.normalize(torch.stack([f[labels == c].mean(0) for c in range(5)]), dim=1)
        print("centroid probe acc", ((f @ cent.t()).argmax(1) == labels).float().mean().item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Barlow Twins


def _waveforms(g: torch.Generator, n: int, length: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Sine, square, sawtooth or chirp at a random frequency, phase and amplitude, plus noise."""
    y = torch.randint(0, 4, (n,), generator=g)
    t = torch.linspace(0, 1, length).unsqueeze(0)
    f = 2 + 4 * torch.rand(n, 1, generator=g)
    ph = 2 * math.pi * torch.rand(n, 1, generator=g)
    a = 0.5 + torch.rand(n, 1, generator=g)
    arg = 2 * math.pi * f * t + ph
    waves = torch.stack(
        [torch.sin(arg), torch.sign(torch.sin(arg)), 2 * ((arg / (2 * math.pi)) % 1) - 1,
         torch.sin(2 * math.pi * f * t * (1 + 2 * t) + ph)]
    )  # fmt: skip
    x = a * waves[y, torch.arange(n)] + 0.1 * torch.randn(n, length, generator=g)
    return x.unsqueeze(1), y


def _signal_views(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    b, _, length = x.shape
    scale = 0.8 + 0.4 * torch.rand(b, 1, 1, generator=g)
    shift = torch.randint(-8, 9, (b,), generator=g)
    idx = (torch.arange(length).view(1, -1) - shift.view(-1, 1)) % length
    x = torch.gather(x, 2, idx.unsqueeze(1)) * scale
    start = torch.randint(0, length - 12, (b, 1, 1), generator=g)
    t = torch.arange(length).view(1, 1, -1)
    x = x.masked_fill((t >= start) & (t < start + 12), 0.0)
    return x + 0.1 * torch.randn(x.shape, generator=g)


class BarlowTwins(nn.Module):
    def __init__(self, lambd: float = 5e-3, proj: int = 128):
        super().__init__()
        self.lambd = lambd
        self.backbone = nn.Sequential(
            nn.Conv1d(1, 32, 5, 1, 2), nn.BatchNorm1d(32), nn.ReLU(inplace=True),
            nn.Conv1d(32, 64, 5, 2, 2), nn.BatchNorm1d(64), nn.ReLU(inplace=True),
            nn.Conv1d(64, 64, 3, 2, 1), nn.BatchNorm1d(64), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(),
        )  # fmt: skip
        self.projector = nn.Sequential(
            nn.Linear(64, proj, bias=False), nn.BatchNorm1d(proj), nn.ReLU(inplace=True),
            nn.Linear(proj, proj, bias=False), nn.BatchNorm1d(proj), nn.ReLU(inplace=True),
            nn.Linear(proj, proj, bias=False),
        )  # fmt: skip
        self.bn = nn.BatchNorm1d(proj, affine=False)

    def forward(self, y1: torch.Tensor, y2: torch.Tensor) -> torch.Tensor:
        z1 = self.projector(self.backbone(y1))
        z2 = self.projector(self.backbone(y2))
        c = self.bn(z1).T @ self.bn(z2) / len(y1)
        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        n = c.shape[0]
        off_diag = c.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten().pow_(2).sum()
        return on_diag + self.lambd * off_diag


def barlow_twins_signals(path: str, epochs: int = 6, seed: int = 0) -> list[float]:
    g = _seed(seed)
    x, y = _waveforms(g, 2048)
    loader = DataLoader(TensorDataset(x), batch_size=128, shuffle=True, generator=g, drop_last=True)
    model = BarlowTwins()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-6)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        for (xb,) in loader:
            loss = model(_signal_views(xb, g), _signal_views(xb, g))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            f = F.normalize(model.backbone(x), dim=1)
            cent = F.normalize(torch.stack([f[y == c].mean(0) for c in range(4)]), dim=1)
            acc = ((f @ cent.t()).argmax(1) == y).float().mean().item()
        print(f"epoch {epoch} loss {losses[-1]:.2f} centroid acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ArcFace


class ArcMarginProduct(nn.Module):
    """Additive angular margin (Deng et al.): s * cos(theta + m) for the true class."""

    def __init__(
        self, in_features: int, out_features: int, s: float = 30.0, m: float = 0.50, easy_margin: bool = False
    ):
        super().__init__()
        self.s, self.m, self.easy_margin = s, m, easy_margin
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        nn.init.xavier_uniform_(self.weight)
        self.cos_m, self.sin_m = math.cos(m), math.sin(m)
        self.th = math.cos(math.pi - m)
        self.mm = math.sin(math.pi - m) * m

    def forward(self, x: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        cosine = F.linear(F.normalize(x), F.normalize(self.weight))
        sine = torch.sqrt((1.0 - torch.pow(cosine, 2)).clamp(0, 1))
        phi = cosine * self.cos_m - sine * self.sin_m
        phi = (
            torch.where(cosine > 0, phi, cosine)
            if self.easy_margin
            else torch.where(cosine > self.th, phi, cosine - self.mm)
        )
        one_hot = torch.zeros_like(cosine).scatter_(1, label.view(-1, 1), 1)
        return self.s * (one_hot * phi + (1.0 - one_hot) * cosine)


class FaceNet(nn.Module):
    def __init__(self, emb: int = 64, classes: int = 5):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(1, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.PReLU(32), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.PReLU(64), nn.MaxPool2d(2),
            nn.Flatten(), nn.Dropout(0.2), nn.Linear(64 * 4, emb), nn.BatchNorm1d(emb),
        )  # fmt: skip
        self.metric_fc = ArcMarginProduct(emb, classes, s=30.0, m=0.5)

    def forward(self, x: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        return self.metric_fc(self.backbone(x), label)


def arcface_glyphs(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    x, y = _glyphs(g, 2500)
    x = (x - 0.3) / 0.35
    xtr, ytr, xva, yva = x[:2000], y[:2000], x[2000:], y[2000:]
    if bug == "shuffled_labels":
        ytr = ytr[torch.randperm(len(ytr), generator=g)]
    model = FaceNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[5, 7], gamma=0.1)
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size=64, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for data, label in loader:
            output = model(data, label)
            loss = criterion(output, label)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            cos = F.linear(F.normalize(model.backbone(xva)), F.normalize(model.metric_fc.weight))
            acc = (cos.argmax(1) == yva).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-32:]):.3f} val acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- mixup


def _vgg_small(classes: int = 5) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 4, classes),
    )  # fmt: skip


def mixup_data(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0):
    lam = np.random.beta(alpha, alpha) if alpha > 0 else 1.0
    index = torch.randperm(x.size(0))
    return lam * x + (1 - lam) * x[index], y, y[index], lam


def mixup_cnn(
    path: str, epochs: int = 6, alpha: float = 1.0, seed: int = 0, bug: str | None = None
) -> list[float]:
    """mixup (Zhang et al.) the way the reference CIFAR script trains: SGD 0.1, momentum 0.9,
    weight decay 1e-4, step decay; the images arrive as uint8 and are scaled and normalized."""
    g = _seed(seed)
    x, y = _glyphs(g, 2500)
    images_u8 = (x * 255).round().to(torch.uint8)
    # the buggy twin dropped the ToTensor()/255 + Normalize step from its pipeline
    xs = images_u8.float() if bug == "inputs_x255" else (images_u8.float() / 255 - 0.3) / 0.35
    xtr, ytr, xte, yte = xs[:2000], y[:2000], xs[2000:], y[2000:]
    net = _vgg_small()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    trainloader = DataLoader(TensorDataset(xtr, ytr), batch_size=64, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(net)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        lr = 0.1 * (0.1 ** (epoch >= 4))
        for group in optimizer.param_groups:
            group["lr"] = lr
        net.train()
        for inputs, targets in trainloader:
            inputs, targets_a, targets_b, lam = mixup_data(inputs, targets, alpha)
            outputs = net(inputs)
            loss = lam * criterion(outputs, targets_a) + (1 - lam) * criterion(outputs, targets_b)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        net.eval()
        with torch.no_grad():
            acc = (net(xte).argmax(1) == yte).float().mean().item()
        print(f"epoch {epoch} lr {lr} train loss {np.mean(losses[-32:]):.3f} test acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- CutMix


def rand_bbox(size: torch.Size, lam: float) -> tuple[int, int, int, int]:
    W, H = size[2], size[3]  # noqa: N806
    cut_rat = np.sqrt(1.0 - lam)
    cut_w, cut_h = int(W * cut_rat), int(H * cut_rat)
    cx, cy = np.random.randint(W), np.random.randint(H)
    bbx1 = int(np.clip(cx - cut_w // 2, 0, W))
    bby1 = int(np.clip(cy - cut_h // 2, 0, H))
    bbx2 = int(np.clip(cx + cut_w // 2, 0, W))
    bby2 = int(np.clip(cy + cut_h // 2, 0, H))
    return bbx1, bby1, bbx2, bby2


def cutmix_cnn(path: str, epochs: int = 4, beta: float = 1.0, cutmix_prob: float = 0.5, seed: int = 0,
               bug: str | None = None) -> list[float]:  # fmt: skip
    g = _seed(seed)
    x, y = _glyphs(g, 2000, size=16)
    x = (x - x.mean()) / x.std()
    xtr, ytr, xte, yte = x[:1600], y[:1600], x[1600:], y[1600:]
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.Conv2d(32, 64, 3, 2, 1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 5),
    )  # fmt: skip
    if bug == "softmax_before_ce":
        model.append(nn.Softmax(dim=1))
    criterion = nn.CrossEntropyLoss()
    train_loader = DataLoader(TensorDataset(xtr, ytr), batch_size=32, shuffle=True, generator=g)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4, nesterov=True)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(train_loader))
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for inp, target in train_loader:
            r = np.random.rand(1)
            if beta > 0 and r < cutmix_prob:
                lam = np.random.beta(beta, beta)
                rand_index = torch.randperm(inp.size(0))
                target_a, target_b = target, target[rand_index]
                bbx1, bby1, bbx2, bby2 = rand_bbox(inp.size(), lam)
                inp[:, :, bbx1:bbx2, bby1:bby2] = inp[rand_index, :, bbx1:bbx2, bby1:bby2]
                lam = 1 - ((bbx2 - bbx1) * (bby2 - bby1) / (inp.size()[-1] * inp.size()[-2]))
                output = model(inp)
                loss = criterion(output, target_a) * lam + criterion(output, target_b) * (1.0 - lam)
            else:
                output = model(inp)
                loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-50:]):.3f} top1 {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- MobileNetV2-style


class InvertedResidual(nn.Module):
    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int):
        super().__init__()
        hidden_dim = inp * expand_ratio
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers += [
                nn.Conv2d(inp, hidden_dim, 1, bias=False),
                nn.BatchNorm2d(hidden_dim),
                nn.ReLU6(inplace=True),
            ]
        layers += [
            nn.Conv2d(hidden_dim, hidden_dim, 3, stride, 1, groups=hidden_dim, bias=False),  # depthwise
            nn.BatchNorm2d(hidden_dim), nn.ReLU6(inplace=True),
            nn.Conv2d(hidden_dim, oup, 1, bias=False), nn.BatchNorm2d(oup),  # linear bottleneck
        ]  # fmt: skip
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class TinyMobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 5, width: float = 1.0):
        super().__init__()
        setting = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 2, 2)]  # t, c, n, s
        c_in = int(16 * width)
        features: list[nn.Module] = [
            nn.Conv2d(1, c_in, 3, 1, 1, bias=False),
            nn.BatchNorm2d(c_in),
            nn.ReLU6(inplace=True),
        ]
        for t, c, n, s in setting:
            c_out = int(c * width)
            for i in range(n):
                features.append(InvertedResidual(c_in, c_out, s if i == 0 else 1, t))
                c_in = c_out
        features += [nn.Conv2d(c_in, 128, 1, bias=False), nn.BatchNorm2d(128), nn.ReLU6(inplace=True)]
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(128, num_classes))
        for m in self.modules():  # torchvision's initialization
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v2_glyphs(path: str, epochs: int = 4, seed: int = 0) -> list[float]:
    """torchvision's MobileNetV2 recipe, scaled down: SGD lr 0.036, momentum 0.9, weight decay
    4e-5, StepLR(1, 0.98) per epoch, 16x16 inputs."""
    g = _seed(seed)
    x, y = _glyphs(g, 1344, size=16)
    x = (x - 0.25) / 0.3
    train_ds, val_ds = TensorDataset(x[:1024], y[:1024]), TensorDataset(x[1024:], y[1024:])
    data_loader = DataLoader(train_ds, batch_size=32, shuffle=True, generator=g)
    val_loader = DataLoader(val_ds, batch_size=100)
    model = TinyMobileNetV2(width=0.75)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.036, momentum=0.9, weight_decay=4e-5)
    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.98)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for image, target in data_loader:
            output = model(image)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        lr_scheduler.step()
        model.eval()
        correct = 0
        with torch.inference_mode():
            for image, target in val_loader:
                correct += (model(image).argmax(1) == target).sum().item()
        print(f"Epoch {epoch}: loss {np.mean(losses[-50:]):.4f} Acc@1 {correct / len(val_ds):.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SE-ResNet


class SELayer(nn.Module):
    def __init__(self, channel: int, reduction: int = 4):
        super().__init__()
        self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Sequential(
            nn.Linear(channel, channel // reduction, bias=False), nn.ReLU(inplace=True),
            nn.Linear(channel // reduction, channel, bias=False), nn.Sigmoid(),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, _, _ = x.size()
        y = self.fc(self.avg_pool(x).view(b, c)).view(b, c, 1, 1)
        return x * y.expand_as(x)


class SEBasicBlock(nn.Module):
    def __init__(self, inplanes: int, planes: int, stride: int = 1, reduction: int = 4):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.se = SELayer(planes, reduction)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.se(self.bn2(self.conv2(out)))
        return self.relu(out + residual)


class SEResNet(nn.Module):
    def __init__(self, num_classes: int = 5):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = SEBasicBlock(16, 16)
        self.layer2 = SEBasicBlock(16, 32, 2)
        self.layer3 = SEBasicBlock(32, 64, 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer3(self.layer2(self.layer1(self.relu(self.bn1(self.conv1(x))))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _evaluate(model: nn.Module, loader: DataLoader, criterion: nn.Module) -> tuple[float, float]:
    model.eval()
    total, correct, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for xb, yb in loader:
            out = model(xb)
            loss_sum += criterion(out, yb).item() * len(xb)
            correct += (out.argmax(1) == yb).sum().item()
            total += len(xb)
    return loss_sum / total, correct / total


def se_resnet_glyphs(path: str, epochs: int = 5, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    x, y = _glyphs(g, 2500)
    x = (x - 0.25) / 0.3
    train_loader = DataLoader(TensorDataset(x[:2000], y[:2000]), batch_size=64, shuffle=True, generator=g)
    val_loader = DataLoader(TensorDataset(x[2000:], y[2000:]), batch_size=250)
    model = SEResNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[3, 4], gamma=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    if bug == "train_in_eval_mode":
        model.train()  # set once, before the loop; the validation below leaves it in eval mode
    for epoch in range(epochs):
        if bug != "train_in_eval_mode":
            model.train()
        for data, target in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(data), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        val_loss, val_acc = _evaluate(model, val_loader, criterion)
        print(f"epoch {epoch} train {np.mean(losses[-32:]):.3f} val {val_loss:.3f} acc {val_acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- pre-act ResNet, stochastic depth


def drop_path(x: torch.Tensor, drop_prob: float, training: bool) -> torch.Tensor:
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep_prob)
    return x * mask / keep_prob


class PreActBlock(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int = 1, drop_prob: float = 0.0):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.drop_prob = drop_prob
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(x))
        shortcut = self.shortcut(out) if hasattr(self, "shortcut") else x
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        return drop_path(out, self.drop_prob, self.training) + shortcut


class PreActResNet(nn.Module):
    def __init__(
        self, num_blocks: tuple[int, ...] = (2, 2, 2), num_classes: int = 5, drop_path_rate: float = 0.5
    ):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
        total = sum(num_blocks)
        blocks, in_planes, k = [], 16, 0
        for stage, (n, planes) in enumerate(zip(num_blocks, (16, 32, 64), strict=True)):
            for i in range(n):
                stride = 2 if (i == 0 and stage > 0) else 1
                blocks.append(PreActBlock(in_planes, planes, stride, drop_path_rate * k / (total - 1)))
                in_planes, k = planes, k + 1
        self.layers = nn.Sequential(*blocks)
        self.bn = nn.BatchNorm2d(64)
        self.linear = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn(self.layers(self.conv1(x))))
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))


def preact_resnet_stochastic_depth(
    path: str, epochs: int = 8, warmup: int = 20, seed: int = 0
) -> list[float]:
    """Linear decay of the survival probability down to 0.5 at the last block (Huang et al.),
    SGD + Nesterov, per-step warm-up then cosine decay, gradient-norm clipping."""
    g = _seed(seed)
    x, y = _glyphs(g, 2000)
    x = (x - 0.25) / 0.3
    loader = DataLoader(TensorDataset(x[:1536], y[:1536]), batch_size=64, shuffle=True, generator=g)
    xte, yte = x[1536:], y[1536:]
    model = PreActResNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    total = epochs * len(loader)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (
            (s + 1) / warmup
            if s < warmup
            else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (total - warmup)))
        ),
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        if epoch % 3 == 2 or epoch == epochs - 1:
            model.eval()
            with torch.no_grad():
                acc = (model(xte).argmax(1) == yte).float().mean().item()
            print(f"epoch {epoch} loss {loss.item():.3f} test acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- FixMatch


def fixmatch_glyphs(path: str, steps: int = 200, mu: int = 7, batch: int = 12, threshold: float = 0.95,
                    lambda_u: float = 1.0, seed: int = 0) -> list[float]:  # fmt: skip
    """FixMatch (Sohn et al.): 20 labels per class; pseudo-labels from the weak view above a 0.95
    confidence train the strong view; SGD 0.03 Nesterov, cosine 7/16 pi decay, EMA for test."""
    g = _seed(seed)
    x, y = _glyphs(g, 2600)
    x_test, y_test = x[2100:], y[2100:]
    labeled = torch.cat([torch.nonzero(y[:2100] == c).squeeze(1)[:20] for c in range(5)])
    unlabeled = torch.arange(2100)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32, momentum=0.001), nn.LeakyReLU(0.1),
        nn.Conv2d(32, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32, momentum=0.001), nn.LeakyReLU(0.1),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64, momentum=0.001), nn.LeakyReLU(0.1),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 5),
    )  # fmt: skip
    grouped = [  # no weight decay on biases and BN parameters
        {"params": [p for p in model.parameters() if p.ndim > 1], "weight_decay": 5e-4},
        {"params": [p for p in model.parameters() if p.ndim <= 1], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.SGD(grouped, lr=0.03, momentum=0.9, nesterov=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: max(0.0, math.cos(7 * math.pi * s / (16 * steps)))
    )
    ema_model = torch.optim.swa_utils.AveragedModel(
        model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.999), use_buffers=True
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    model.train()
    for step in range(steps):
        li = labeled[torch.randint(0, len(labeled), (batch,), generator=g)]
        ui = unlabeled[torch.randint(0, len(unlabeled), (batch * mu,), generator=g)]
        inputs_x, targets_x = _weak(x[li], g), y[li]
        inputs_u_w, inputs_u_s = _weak(x[ui], g), _strong(x[ui], g)
        logits = model(torch.cat((inputs_x, inputs_u_w, inputs_u_s)))
        logits_x = logits[:batch]
        logits_u_w, logits_u_s = logits[batch:].chunk(2)
        Lx = F.cross_entropy(logits_x, targets_x, reduction="mean")  # noqa: N806
        pseudo_label = torch.softmax(logits_u_w.detach(), dim=-1)
        max_probs, targets_u = torch.max(pseudo_label, dim=-1)
        mask = max_probs.ge(threshold).float()
        Lu = (F.cross_entropy(logits_u_s, targets_u, reduction="none") * mask).mean()  # noqa: N806
        loss = Lx + lambda_u * Lu
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        ema_model.update_parameters(model)
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step} Lx {Lx.item():.3f} Lu {Lu.item():.3f} mask {mask.mean().item():.2f}")
    model.eval()
    ema_model.eval()
    with torch.no_grad():
        acc = (model(x_test).argmax(1) == y_test).float().mean().item()
        ema_acc = (ema_model(x_test).argmax(1) == y_test).float().mean().item()
    print(f"test acc {acc:.3f} (EMA {ema_acc:.3f})")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- box + class detector


def _shapes_with_boxes(g: torch.Generator, n: int, size: int = 16):
    """One object per image: a filled rectangle, a filled ellipse or a hollow frame; the box is
    (cx, cy, w, h) normalized by the image size."""
    yy, xx = torch.meshgrid(torch.arange(size).float() + 0.5, torch.arange(size).float() + 0.5, indexing="ij")
    cls = torch.randint(0, 3, (n,), generator=g)
    wh = 4 + torch.rand(n, 2, generator=g) * 7
    c = wh / 2 + torch.rand(n, 2, generator=g) * (size - wh)
    cx, cy, w, h = (t.view(n, 1, 1) for t in (c[:, 0], c[:, 1], wh[:, 0], wh[:, 1]))
    dx, dy = (xx - cx).abs() / (w / 2), (yy - cy).abs() / (h / 2)
    rect = (dx <= 1) & (dy <= 1)
    ellipse = dx**2 + dy**2 <= 1
    frame = rect & ((dx >= 1 - 2 / w) | (dy >= 1 - 2 / h))
    shape = torch.where(
        cls.view(n, 1, 1) == 0, rect, torch.where(cls.view(n, 1, 1) == 1, ellipse, frame)
    ).float()
    img = shape * (0.6 + 0.4 * torch.rand(n, 1, 1, generator=g)) + 0.15 * torch.randn(
        n, size, size, generator=g
    )
    boxes = torch.stack([c[:, 0], c[:, 1], wh[:, 0], wh[:, 1]], 1) / size
    return img.unsqueeze(1), cls, boxes


def box_cxcywh_to_xyxy(b: torch.Tensor) -> torch.Tensor:
    cx, cy, w, h = b.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], -1)


def generalized_iou(p: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Elementwise GIoU of matching boxes in xyxy form."""
    area_p = (p[:, 2] - p[:, 0]) * (p[:, 3] - p[:, 1])
    area_t = (t[:, 2] - t[:, 0]) * (t[:, 3] - t[:, 1])
    wh = (torch.min(p[:, 2:], t[:, 2:]) - torch.max(p[:, :2], t[:, :2])).clamp(min=0)
    inter = wh[:, 0] * wh[:, 1]
    union = area_p + area_t - inter
    iou = inter / union
    wh_c = (torch.max(p[:, 2:], t[:, 2:]) - torch.min(p[:, :2], t[:, :2])).clamp(min=0)
    area_c = wh_c[:, 0] * wh_c[:, 1]
    return iou - (area_c - union) / area_c


class TinyDetector(nn.Module):
    """A YOLOv1-flavoured backbone (conv + LeakyReLU, no normalization) and two heads."""

    def __init__(self, classes: int = 3, act: type[nn.Module] = nn.LeakyReLU):
        super().__init__()

        def a() -> nn.Module:
            return nn.LeakyReLU(0.1) if act is nn.LeakyReLU else act()

        self.backbone = nn.Sequential(
            nn.Conv2d(1, 16, 3, 1, 1), a(), nn.Conv2d(16, 16, 3, 1, 1), a(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, 1, 1), a(), nn.Conv2d(32, 32, 3, 1, 1), a(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, 1, 1), a(), nn.Conv2d(64, 64, 3, 1, 1), a(),
            nn.Flatten(), nn.Linear(64 * 16, 128), a(),
        )  # fmt: skip
        self.cls_head = nn.Linear(128, classes)
        self.box_head = nn.Linear(128, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.backbone(x)
        return self.cls_head(h), self.box_head(h).sigmoid()


def box_detector(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """Class + box regression with DETR's loss weights: CE + 5 L1 + 2 (1 - GIoU); AdamW 1e-3 with
    weight decay 1e-4 and gradient clipping at 0.1 (DETR's max_norm)."""
    g = _seed(seed)
    img, cls, boxes = _shapes_with_boxes(g, 1480)
    img = (img - img.mean()) / img.std()
    loader = DataLoader(
        TensorDataset(img[:1280], cls[:1280], boxes[:1280]), batch_size=32, shuffle=True, generator=g
    )
    model = TinyDetector(act=nn.Sigmoid if bug == "deep_sigmoid" else nn.LeakyReLU)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.1)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, cb, bb in loader:
            logits, pred = model(xb)
            loss_ce = F.cross_entropy(logits, cb)
            loss_bbox = F.l1_loss(pred, bb)
            loss_giou = (1 - generalized_iou(box_cxcywh_to_xyxy(pred), box_cxcywh_to_xyxy(bb))).mean()
            loss = loss_ce + 5 * loss_bbox + 2 * loss_giou
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            logits, pred = model(img[1280:])
            acc = (logits.argmax(1) == cls[1280:]).float().mean().item()
            miou = generalized_iou(box_cxcywh_to_xyxy(pred), box_cxcywh_to_xyxy(boxes[1280:])).mean().item()
        print(f"epoch {epoch}: loss {np.mean(losses[-60:]):.3f} cls acc {acc:.3f} mean GIoU {miou:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- keypoint heatmaps


def _segments(g: torch.Generator, n: int, size: int = 16):
    """A bright line segment per image; its two ends (the left one first) are the keypoints."""
    p = 2 + torch.rand(n, 2, 2, generator=g) * (size - 4)  # (n, point, xy)
    order = p[:, 0, 0] > p[:, 1, 0]
    p = torch.where(order.view(n, 1, 1), p.flip(1), p)
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    pix = torch.stack([xx, yy], -1).view(1, size, size, 2)
    a, b = p[:, 0].view(n, 1, 1, 2), p[:, 1].view(n, 1, 1, 2)
    ab = b - a
    t = (((pix - a) * ab).sum(-1) / (ab * ab).sum(-1).clamp(min=1e-6)).clamp(0, 1)
    d2 = ((pix - (a + t.unsqueeze(-1) * ab)) ** 2).sum(-1)
    img = torch.exp(-d2 / 0.5) + 0.1 * torch.randn(n, size, size, generator=g)
    return img.unsqueeze(1), p


def _heatmaps(p: torch.Tensor, size: int = 16, sigma: float = 1.0) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    dx = xx.view(1, 1, size, size) - p[..., 0].view(*p.shape[:2], 1, 1)
    dy = yy.view(1, 1, size, size) - p[..., 1].view(*p.shape[:2], 1, 1)
    return torch.exp(-(dx**2 + dy**2) / (2 * sigma**2))


class JointsMSELoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.criterion = nn.MSELoss(reduction="mean")

    def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        num_joints = output.size(1)
        loss = 0.0
        for j in range(num_joints):
            loss = loss + 0.5 * self.criterion(output[:, j], target[:, j])
        return loss / num_joints


class SimpleBaseline(nn.Module):
    """Strided conv encoder, then deconvolutions back to the input resolution (Xiao et al.)."""

    def __init__(self, joints: int = 2):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(1, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 3, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, 3, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        )  # fmt: skip
        self.deconv_layers = nn.Sequential(
            nn.ConvTranspose2d(64, 32, 4, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.ConvTranspose2d(32, 32, 4, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        )  # fmt: skip
        self.final_layer = nn.Conv2d(32, joints, 1)
        nn.init.normal_(self.final_layer.weight, std=0.001)
        nn.init.zeros_(self.final_layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.final_layer(self.deconv_layers(self.backbone(x)))


def keypoint_heatmaps(path: str, epochs: int = 5, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    img, pts = _segments(g, 1320)
    target = _heatmaps(pts)
    train_loader = DataLoader(
        TensorDataset(img[:1120], target[:1120]), batch_size=32, shuffle=True, generator=g
    )
    model = SimpleBaseline()
    criterion = JointsMSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    if bug == "frozen_by_mistake":  # "freeze the backbone for warm-up" applied to the deconv head
        for p in model.deconv_layers.parameters():
            p.requires_grad = False
    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [3, 4], 0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for inp, tgt in train_loader:
            output = model(inp)
            loss = criterion(output, tgt)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        lr_scheduler.step()
        model.eval()
        with torch.no_grad():
            hm = model(img[1120:])
            idx = hm.flatten(2).argmax(2)
            pred = torch.stack([idx % 16, idx // 16], -1).float()
            err = (pred - pts[1120:]).norm(dim=-1).mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-44:]):.6f} mean keypoint error {err:.2f} px")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ESPCN super-resolution


def _textures(g: torch.Generator, n: int, size: int = 16) -> torch.Tensor:
    """Smooth random images: Gaussian blobs plus an oriented sinusoid, in [0, 1]."""
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    img = torch.zeros(n, size, size)
    for _ in range(3):
        c = torch.rand(n, 2, 1, 1, generator=g)
        s = 0.08 + 0.2 * torch.rand(n, 1, 1, generator=g)
        img += torch.rand(n, 1, 1, generator=g) * torch.exp(
            -((xx - c[:, 0]) ** 2 + (yy - c[:, 1]) ** 2) / (2 * s**2)
        )
    theta = math.pi * torch.rand(n, 1, 1, generator=g)
    freq = 2 + 5 * torch.rand(n, 1, 1, generator=g)
    img += 0.3 * torch.sin(2 * math.pi * freq * (xx * torch.cos(theta) + yy * torch.sin(theta)))
    img = img - img.amin((1, 2), keepdim=True)
    return (img / img.amax((1, 2), keepdim=True)).unsqueeze(1)


class ESPCN(nn.Module):
    """pytorch/examples' super_resolution Net: ReLU convolutions, a sub-pixel convolution."""

    def __init__(self, upscale_factor: int = 2):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 64, 5, 1, 2)
        self.conv2 = nn.Conv2d(64, 64, 3, 1, 1)
        self.conv3 = nn.Conv2d(64, 32, 3, 1, 1)
        self.conv4 = nn.Conv2d(32, upscale_factor**2, 3, 1, 1)
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        nn.init.orthogonal_(self.conv1.weight, nn.init.calculate_gain("relu"))
        nn.init.orthogonal_(self.conv2.weight, nn.init.calculate_gain("relu"))
        nn.init.orthogonal_(self.conv3.weight, nn.init.calculate_gain("relu"))
        nn.init.orthogonal_(self.conv4.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))


def espcn_super_resolution(path: str, epochs: int = 5, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    hr = _textures(g, 1100)
    lr_img = F.avg_pool2d(hr, 2)
    training_data_loader = DataLoader(
        TensorDataset(lr_img[:1000], hr[:1000]), batch_size=16, shuffle=True, generator=g
    )
    model = ESPCN(2)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3 * (100 if bug == "lr_x100" else 1))
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(1, epochs + 1):
        model.train()
        for inp, target in training_data_loader:
            optimizer.zero_grad()
            loss = criterion(model(inp), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            mse = criterion(model(lr_img[1000:]), hr[1000:]).item()
        print(
            f"===> Epoch {epoch} Avg. Loss: {np.mean(losses[-63:]):.5f} Avg. PSNR: {10 * math.log10(1 / mse):.2f} dB"
        )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- colorization


def _color_glyphs(g: torch.Generator, n: int, size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Each glyph class has its own hue on a grey background of random brightness; returns the
    luminance (n, 1, s, s) and the RGB image (n, 3, s, s)."""
    shapes, y = _glyphs(g, n, size)
    palette = torch.tensor(
        [[0.9, 0.2, 0.2], [0.2, 0.8, 0.3], [0.2, 0.3, 0.9], [0.9, 0.8, 0.2], [0.7, 0.3, 0.8]]
    )
    bg = 0.2 + 0.5 * torch.rand(n, 1, 1, 1, generator=g)
    fg = palette[y].view(n, 3, 1, 1) * (0.8 + 0.2 * torch.rand(n, 1, 1, 1, generator=g))
    alpha = shapes.clamp(0, 1)
    rgb = alpha * fg + (1 - alpha) * bg
    luma = (0.299 * rgb[:, 0] + 0.587 * rgb[:, 1] + 0.114 * rgb[:, 2]).unsqueeze(1)
    return luma, rgb


class ColorNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down1 = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(True))
        self.down2 = nn.Sequential(nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU(True))
        self.mid = nn.Sequential(nn.Conv2d(32, 32, 3, 1, 2, dilation=2), nn.BatchNorm2d(32), nn.ReLU(True))
        self.up = nn.Sequential(
            nn.Upsample(scale_factor=2, mode="bilinear"), nn.Conv2d(32, 16, 3, 1, 1), nn.ReLU(True)
        )
        self.out = nn.Conv2d(32, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(x)
        u = self.up(self.mid(self.down2(d1)))
        return torch.sigmoid(self.out(torch.cat([u, d1], 1)))


def colorization_l1(path: str, epochs: int = 5, seed: int = 0) -> list[float]:
    g = _seed(seed)
    luma, rgb = _color_glyphs(g, 1400)
    train = DataLoader(TensorDataset(luma[:1200], rgb[:1200]), batch_size=32, shuffle=True, generator=g)
    model = ColorNet()
    criterion = nn.L1Loss()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.5, 0.999))
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.7)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for gray, color in train:
            optimizer.zero_grad()
            loss = criterion(model(gray), color)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            val = criterion(model(luma[1200:]), rgb[1200:]).item()
        print(f"epoch {epoch} train L1 {np.mean(losses[-38:]):.4f} val L1 {val:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- PGD adversarial training


class Normalize(nn.Module):
    def __init__(self, mean: float, std: float):
        super().__init__()
        self.mean, self.std = mean, std

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


def pgd_attack(model: nn.Module, x: torch.Tensor, y: torch.Tensor, eps: float, alpha: float, steps: int,
               g: torch.Generator) -> torch.Tensor:  # fmt: skip
    delta = (torch.rand(x.shape, generator=g) * 2 - 1) * eps
    delta = ((x + delta).clamp(0, 1) - x).requires_grad_(True)
    for _ in range(steps):
        loss = F.cross_entropy(model(x + delta), y)
        grad = torch.autograd.grad(loss, delta)[0]
        delta = (delta + alpha * grad.sign()).clamp(-eps, eps)
        delta = ((x + delta).clamp(0, 1) - x).detach().requires_grad_(True)
    return (x + delta).detach()


def pgd_adversarial_training(path: str, epochs: int = 6, eps: float = 0.1, alpha: float = 0.025, attack_steps: int = 7,
                             seed: int = 0) -> list[float]:  # fmt: skip
    """Madry et al.: train on PGD examples (random start, 7 steps of size eps/4) generated with
    the model in eval mode; SGD 0.1, momentum 0.9, weight decay 5e-4, step decay."""
    g = _seed(seed)
    x, y = _glyphs(g, 2000)
    loader = DataLoader(TensorDataset(x[:1600], y[:1600]), batch_size=128, shuffle=True, generator=g)
    model = nn.Sequential(
        Normalize(0.25, 0.3),
        nn.Conv2d(1, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 4, 64), nn.ReLU(), nn.Linear(64, 5),
    )  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [4, 5], 0.1)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        for data, target in loader:
            model.eval()
            x_adv = pgd_attack(model, data, target, eps, alpha, attack_steps, g)
            model.train()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x_adv), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        xt, yt = x[1600:], y[1600:]
        with torch.no_grad():
            clean = (model(xt).argmax(1) == yt).float().mean().item()
        print(f"epoch {epoch} adv loss {np.mean(losses[-13:]):.3f} clean acc {clean:.3f}")
    x_adv = pgd_attack(model, xt, yt, eps, alpha, attack_steps, g)
    with torch.no_grad():
        print("robust acc", (model(x_adv).argmax(1) == yt).float().mean().item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SAM


class SAM(torch.optim.Optimizer):
    """Sharpness-aware minimization (Foret et al.), as in davda54/sam."""

    def __init__(self, params, base_optimizer, rho: float = 0.05, adaptive: bool = False, **kwargs):
        defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
        super().__init__(params, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)

    @torch.no_grad()
    def first_step(self, zero_grad: bool = False) -> None:
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.data.clone()
                e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                p.add_(e_w)
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad: bool = False) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.data = self.state[p]["old_p"]
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()

    def _grad_norm(self) -> torch.Tensor:
        return torch.norm(
            torch.stack(
                [
                    ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2)
                    for group in self.param_groups
                    for p in group["params"]
                    if p.grad is not None
                ]
            ),
            p=2,
        )


def disable_running_stats(model: nn.Module) -> None:
    """davda54's bypass_bn: the second forward pass leaves the BN running statistics alone."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.backup_momentum = m.momentum
            m.momentum = 0


def enable_running_stats(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d) and hasattr(m, "backup_momentum"):
            m.momentum = m.backup_momentum


def smooth_crossentropy(pred: torch.Tensor, gold: torch.Tensor, smoothing: float = 0.1) -> torch.Tensor:
    n_class = pred.size(1)
    one_hot = torch.full_like(pred, fill_value=smoothing / (n_class - 1))
    one_hot.scatter_(dim=1, index=gold.unsqueeze(1), value=1.0 - smoothing)
    return F.kl_div(input=F.log_softmax(pred, dim=1), target=one_hot, reduction="none").sum(-1)


def sam_wide_cnn(path: str, epochs: int = 6, rho: float = 0.05, seed: int = 0) -> list[float]:
    g = _seed(seed)
    x, y = _glyphs(g, 2000)
    x = (x - 0.25) / 0.3
    loader = DataLoader(TensorDataset(x[:1600], y[:1600]), batch_size=64, shuffle=True, generator=g)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 5),
    )  # fmt: skip
    optimizer = SAM(model.parameters(), torch.optim.SGD, rho=rho, lr=0.1, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer.base_optimizer, step_size=4, gamma=0.2)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        for inputs, targets in loader:
            enable_running_stats(model)
            loss = smooth_crossentropy(model(inputs), targets).mean()
            loss.backward()
            optimizer.first_step(zero_grad=True)
            disable_running_stats(model)
            smooth_crossentropy(model(inputs), targets).mean().backward()
            optimizer.second_step(zero_grad=True)
            losses.append(loss.item())
        enable_running_stats(model)
        scheduler.step()
        model.eval()
        with torch.no_grad():
            acc = (model(x[1600:]).argmax(1) == y[1600:]).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-25:]):.4f} acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Lookahead(RAdam), ConvMixer


class Lookahead:
    """Lookahead (Zhang et al.): every k steps the slow weights move alpha of the way to the fast
    weights, and the fast weights restart from them."""

    def __init__(self, optimizer: torch.optim.Optimizer, k: int = 5, alpha: float = 0.5):
        self.optimizer, self.k, self.alpha = optimizer, k, alpha
        self.param_groups = optimizer.param_groups
        self.slow_weights = [[p.detach().clone() for p in group["params"]] for group in self.param_groups]
        self.counter = 0

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        self.optimizer.step()
        self.counter += 1
        if self.counter % self.k == 0:
            with torch.no_grad():
                for group, slow in zip(self.param_groups, self.slow_weights, strict=True):
                    for p, q in zip(group["params"], slow, strict=True):
                        q.add_(p - q, alpha=self.alpha)
                        p.copy_(q)


class Residual(nn.Module):
    def __init__(self, fn: nn.Module):
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x) + x


def conv_mixer(
    dim: int, depth: int, kernel_size: int = 3, patch_size: int = 2, n_classes: int = 5
) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, dim, kernel_size=patch_size, stride=patch_size), nn.GELU(), nn.BatchNorm2d(dim),
        *[
            nn.Sequential(
                Residual(nn.Sequential(
                    nn.Conv2d(dim, dim, kernel_size, groups=dim, padding="same"), nn.GELU(), nn.BatchNorm2d(dim),
                )),
                nn.Conv2d(dim, dim, kernel_size=1), nn.GELU(), nn.BatchNorm2d(dim),
            )
            for _ in range(depth)
        ],
        nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(dim, n_classes),
    )  # fmt: skip


def lookahead_radam_convmixer(path: str, epochs: int = 5, accum: int = 2, seed: int = 0) -> list[float]:
    """A ConvMixer trained with Lookahead(RAdam) ("Ranger"-style), micro-batches of 32 with the
    gradient accumulated over 2 of them; the loss is recorded per micro-batch."""
    g = _seed(seed)
    x, y = _glyphs(g, 2000)
    x = (x - 0.25) / 0.3
    loader = DataLoader(TensorDataset(x[:1600], y[:1600]), batch_size=32, shuffle=True, generator=g)
    model = conv_mixer(64, 4)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = Lookahead(torch.optim.RAdam(model.parameters(), lr=1e-3, weight_decay=1e-4), k=6, alpha=0.5)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        optimizer.zero_grad()
        for i, (xb, yb) in enumerate(loader):
            loss = criterion(model(xb), yb)
            (loss / accum).backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x[1600:]).argmax(1) == y[1600:]).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-50:]):.3f} acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- LARS, large batch


class LARS(torch.optim.Optimizer):
    """LARS as in facebookresearch/barlowtwins: layer-wise trust ratio eta * |w| / |g|, biases
    and norm weights excluded from weight decay and from the adaptation."""

    def __init__(self, params, lr: float, weight_decay: float = 0, momentum: float = 0.9, eta: float = 0.001):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, eta=eta))

    @torch.no_grad()
    def step(self, closure=None):
        for g in self.param_groups:
            for p in g["params"]:
                dp = p.grad
                if dp is None:
                    continue
                if p.ndim != 1:
                    dp = dp.add(p, alpha=g["weight_decay"])
                    param_norm, update_norm = torch.norm(p), torch.norm(dp)
                    one = torch.ones_like(param_norm)
                    q = torch.where(
                        param_norm > 0.0,
                        torch.where(update_norm > 0, (g["eta"] * param_norm / update_norm), one),
                        one,
                    )
                    dp = dp.mul(q)
                param_state = self.state[p]
                if "mu" not in param_state:
                    param_state["mu"] = torch.zeros_like(p)
                mu = param_state["mu"]
                mu.mul_(g["momentum"]).add_(dp)
                p.add_(mu, alpha=-g["lr"])


def lars_large_batch(
    path: str, epochs: int = 20, batch_size: int = 512, base_lr: float = 0.2, seed: int = 0
) -> list[float]:
    """Large-batch training with LARS: lr = base_lr * batch / 256, linear warm-up over 2 epochs,
    then cosine decay to 0.1% of it (the barlowtwins schedule)."""
    g = _seed(seed)
    x, y = _glyphs(g, 4608)
    x = (x - 0.25) / 0.3
    loader = DataLoader(
        TensorDataset(x[:4096], y[:4096]), batch_size=batch_size, shuffle=True, generator=g, drop_last=True
    )
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.Conv2d(32, 64, 3, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.Conv2d(64, 64, 3, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 5),
    )  # fmt: skip
    optimizer = LARS(model.parameters(), lr=0, weight_decay=1.5e-6)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    max_steps = epochs * len(loader)
    warmup_steps = 2 * len(loader)
    lr_max = base_lr * batch_size / 256
    step = 0
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            if step < warmup_steps:
                lr = lr_max * step / warmup_steps
            else:
                q = 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / (max_steps - warmup_steps)))
                lr = lr_max * (q * (1 - 0.001) + 0.001)
            optimizer.param_groups[0]["lr"] = lr
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            step += 1
        if epoch % 5 == 4:
            model.eval()
            with torch.no_grad():
                acc = (model(x[4096:]).argmax(1) == y[4096:]).float().mean().item()
            print(f"epoch {epoch} lr {lr:.3f} loss {loss.item():.3f} acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- EMA of weights for evaluation


class ModelEmaV2(nn.Module):
    """timm's ModelEmaV2: an EMA copy of the whole state dict, buffers included, kept in eval."""

    def __init__(self, model: nn.Module, decay: float = 0.9999):
        super().__init__()
        self.module = copy.deepcopy(model)
        self.module.eval()
        self.decay = decay

    def _update(self, model: nn.Module, update_fn) -> None:
        with torch.no_grad():
            for ema_v, model_v in zip(
                self.module.state_dict().values(), model.state_dict().values(), strict=True
            ):
                ema_v.copy_(update_fn(ema_v, model_v))

    def update(self, model: nn.Module) -> None:
        self._update(model, update_fn=lambda e, m: self.decay * e + (1.0 - self.decay) * m)


def ema_eval_color_cnn(path: str, epochs: int = 5, seed: int = 0) -> list[float]:
    """RGB 16x16 glyphs in random colours; a conv-BN-SiLU net, AdamW (wd 0.05), linear warm-up
    then cosine, gradient clipping at 1.0, and an EMA of the weights used for evaluation."""
    g = _seed(seed)
    shapes, y = _glyphs(g, 1500, size=16)
    fg = torch.rand(1500, 3, 1, 1, generator=g)
    bg = torch.rand(1500, 3, 1, 1, generator=g) * 0.5
    x = shapes * fg + (1 - shapes) * bg
    mean, std = x.mean((0, 2, 3), keepdim=True), x.std((0, 2, 3), keepdim=True)
    x = (x - mean) / std
    loader = DataLoader(TensorDataset(x[:1200], y[:1200]), batch_size=48, shuffle=True, generator=g)
    model = nn.Sequential(
        nn.Conv2d(3, 24, 3, 1, 1, bias=False), nn.BatchNorm2d(24), nn.SiLU(),
        nn.Conv2d(24, 48, 3, 2, 1, bias=False), nn.BatchNorm2d(48), nn.SiLU(),
        nn.Conv2d(48, 64, 3, 2, 1, bias=False), nn.BatchNorm2d(64), nn.SiLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1), nn.Linear(64, 5),
    )  # fmt: skip
    model_ema = ModelEmaV2(model, decay=0.99)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
    total = epochs * len(loader)
    scheduler = torch.optim.lr_scheduler.SequentialLR(
        optimizer,
        [torch.optim.lr_scheduler.LinearLR(optimizer, 0.01, 1.0, total_iters=15),
         torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total - 15)],
        milestones=[15],
    )  # fmt: skip
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            loss = criterion(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            model_ema.update(model)
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x[1200:]).argmax(1) == y[1200:]).float().mean().item()
            ema_acc = (model_ema.module(x[1200:]).argmax(1) == y[1200:]).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-25:]):.3f} acc {acc:.3f} ema acc {ema_acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- gradient checkpointing


class ResMLPBlock(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class CheckpointedResMLP(nn.Module):
    def __init__(self, d_in: int = 64, dim: int = 96, depth: int = 8, classes: int = 4):
        super().__init__()
        self.embed = nn.Linear(d_in, dim)
        self.blocks = nn.ModuleList(ResMLPBlock(dim, 2 * dim) for _ in range(depth))
        self.head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, classes))
        self.gradient_checkpointing = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            if self.gradient_checkpointing and self.training:
                h = torch.utils.checkpoint.checkpoint(block, h, use_reentrant=False)
            else:
                h = block(h)
        return self.head(h)


def grad_checkpoint_resmlp(path: str, steps: int = 250, seed: int = 0) -> list[float]:
    """A deep pre-norm residual MLP on waveforms with activation checkpointing per block (the
    forward of every block runs again during backward); Adam with a linear decay."""
    g = _seed(seed)
    x, y = _waveforms(g, 3000)
    x = x.squeeze(1)
    model = CheckpointedResMLP()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.1, total_iters=steps)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        model.train()
        idx = torch.randint(0, 2500, (64,), generator=g)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                acc = (model(x[2500:]).argmax(1) == y[2500:]).float().mean().item()
            print(f"step {step} loss {loss.item():.3f} val acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- PINN (Burgers)


class PINN(nn.Module):
    def __init__(self, layers: tuple[int, ...] = (2, 32, 32, 32, 32, 1)):
        super().__init__()
        mods: list[nn.Module] = []
        for i in range(len(layers) - 1):
            lin = nn.Linear(layers[i], layers[i + 1])
            nn.init.xavier_normal_(lin.weight)
            nn.init.zeros_(lin.bias)
            mods.append(lin)
            if i < len(layers) - 2:
                mods.append(nn.Tanh())
        self.net = nn.Sequential(*mods)

    def forward(self, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([t, x], 1))


def pinn_burgers(
    path: str, iters: int = 400, n_f: int = 2000, n_u: int = 100, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Raissi et al.'s viscous Burgers equation u_t + u u_x = (0.01/pi) u_xx on [0,1] x [-1,1],
    u(0,x) = -sin(pi x), u(t,+-1) = 0: the residual by autograd with create_graph, Adam."""
    _seed(seed)
    nu = 0.01 / math.pi
    t_f = torch.rand(n_f, 1)
    x_f = torch.rand(n_f, 1) * 2 - 1
    x0 = torch.rand(n_u, 1) * 2 - 1
    tb = torch.rand(n_u, 1)
    xb = torch.where(torch.rand(n_u, 1) < 0.5, -1.0, 1.0)
    t_u = torch.cat([torch.zeros(n_u, 1), tb])
    x_u = torch.cat([x0, xb])
    u_u = torch.cat([-torch.sin(math.pi * x0), torch.zeros(n_u, 1)])
    model = PINN()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3 * (100 if bug == "lr_x100" else 1))
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    t_f.requires_grad_(True)
    x_f.requires_grad_(True)
    for it in range(iters):
        u = model(t_f, x_f)
        u_t = torch.autograd.grad(u, t_f, grad_outputs=torch.ones_like(u), create_graph=True)[0]
        u_x = torch.autograd.grad(u, x_f, grad_outputs=torch.ones_like(u), create_graph=True)[0]
        u_xx = torch.autograd.grad(u_x, x_f, grad_outputs=torch.ones_like(u_x), create_graph=True)[0]
        f = u_t + u * u_x - nu * u_xx
        loss = torch.mean((model(t_u, x_u) - u_u) ** 2) + torch.mean(f**2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if it % 100 == 0:
            print(f"It {it}: loss {loss.item():.3e} residual {torch.mean(f**2).item():.3e}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- MAML


def _sine_task(rng: np.random.Generator, k: int) -> tuple[torch.Tensor, ...]:
    amp, phase = rng.uniform(0.1, 5.0), rng.uniform(0, np.pi)
    xs = rng.uniform(-5, 5, (2 * k, 1))
    ys = amp * np.sin(xs - phase)
    t = torch.tensor(np.concatenate([xs, ys], 1), dtype=torch.float32)
    return t[:k, :1], t[:k, 1:], t[k:, :1], t[k:, 1:]


def maml_sine(
    path: str, iters: int = 250, meta_batch: int = 25, k: int = 10, inner_lr: float = 0.01, seed: int = 0
) -> list[float]:
    """Second-order MAML (Finn et al.) on sine regression: 1 inner SGD step (alpha 0.01) through
    torch.func.functional_call with create_graph, meta-batch 25, K=10, meta Adam 1e-3."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(1, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(), nn.Linear(40, 1))
    meta_opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for it in range(iters):
        meta_opt.zero_grad()
        meta_loss = 0.0
        for _ in range(meta_batch):
            x_s, y_s, x_q, y_q = _sine_task(rng, k)
            params = dict(model.named_parameters())
            inner_loss = F.mse_loss(torch.func.functional_call(model, params, (x_s,)), y_s)
            grads = torch.autograd.grad(inner_loss, list(params.values()), create_graph=True)
            fast = {name: p - inner_lr * gr for (name, p), gr in zip(params.items(), grads, strict=True)}
            outer_loss = F.mse_loss(torch.func.functional_call(model, fast, (x_q,)), y_q)
            (outer_loss / meta_batch).backward()
            meta_loss += outer_loss.item() / meta_batch
        meta_opt.step()
        losses.append(meta_loss)
        if it % 50 == 0:
            print(f"meta iter {it}: post-update query mse {meta_loss:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- hypernetwork


class HyperNet(nn.Module):
    """Generates every weight of a 1-16-16-1 target MLP from a task descriptor; each generated
    layer is scaled by 1/sqrt(fan_in) so that the target starts at a sane scale."""

    shapes = ((16, 1), (16,), (16, 16), (16,), (1, 16), (1,))

    def __init__(self, d_task: int = 3, hidden: int = 64):
        super().__init__()
        self.n_out = sum(math.prod(s) for s in self.shapes)
        self.net = nn.Sequential(nn.Linear(d_task, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, self.n_out)

    def forward(self, task: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        flat = self.head(self.net(task))  # (tasks, n_out)
        chunks, i = [], 0
        for s in self.shapes:
            n = math.prod(s)
            fan_in = s[1] if len(s) == 2 else 1
            chunks.append(flat[:, i : i + n].view(-1, *s) / math.sqrt(fan_in))
            i += n
        w1, b1, w2, b2, w3, b3 = chunks
        h = torch.relu(torch.baddbmm(b1.unsqueeze(1), x, w1.transpose(1, 2)))
        h = torch.relu(torch.baddbmm(b2.unsqueeze(1), h, w2.transpose(1, 2)))
        return torch.baddbmm(b3.unsqueeze(1), h, w3.transpose(1, 2))


def hypernetwork_sines(
    path: str, steps: int = 400, tasks: int = 16, points: int = 32, seed: int = 0
) -> list[float]:
    g = _seed(seed)
    model = HyperNet()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        amp = 0.5 + 1.5 * torch.rand(tasks, 1, generator=g)
        freq = 0.5 + 1.5 * torch.rand(tasks, 1, generator=g)
        phase = math.pi * torch.rand(tasks, 1, generator=g)
        x = torch.rand(tasks, points, 1, generator=g) * 6 - 3
        y = amp.unsqueeze(1) * torch.sin(freq.unsqueeze(1) * x + phase.unsqueeze(1))
        task = torch.cat([amp, freq, phase], 1)
        loss = criterion(model(task, x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step} mse {loss.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SIREN


class SineLayer(nn.Module):
    def __init__(self, in_features: int, out_features: int, is_first: bool = False, omega_0: float = 30.0):
        super().__init__()
        self.omega_0, self.is_first = omega_0, is_first
        self.linear = nn.Linear(in_features, out_features)
        with torch.no_grad():
            bound = 1 / in_features if is_first else math.sqrt(6 / in_features) / omega_0
            self.linear.weight.uniform_(-bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(self.omega_0 * self.linear(x))


class Siren(nn.Module):
    def __init__(self, hidden: int = 64, layers: int = 3, omega: float = 30.0):
        super().__init__()
        net: list[nn.Module] = [SineLayer(2, hidden, is_first=True, omega_0=omega)]
        net += [SineLayer(hidden, hidden, omega_0=omega) for _ in range(layers)]
        final = nn.Linear(hidden, 1)
        with torch.no_grad():
            bound = math.sqrt(6 / hidden) / omega
            final.weight.uniform_(-bound, bound)
        net.append(final)
        self.net = nn.Sequential(*net)

    def forward(self, coords: torch.Tensor) -> torch.Tensor:
        return self.net(coords)


def siren_image_fit(path: str, steps: int = 400, size: int = 32, seed: int = 0) -> list[float]:
    """Fit one 32x32 grey image as a function of its pixel coordinates (Sitzmann et al.): full
    batch, Adam 1e-4, the image in [-1, 1]."""
    g = _seed(seed)
    img = _textures(g, 1, size)[0, 0]
    glyph, _ = _glyphs(g, 1, size)
    img = (0.6 * img + 0.4 * glyph[0, 0]) * 2 - 1
    lin = torch.linspace(-1, 1, size)
    coords = torch.stack(torch.meshgrid(lin, lin, indexing="ij"), -1).view(-1, 2)
    pixels = img.reshape(-1, 1)
    model = Siren()
    optim = torch.optim.Adam(lr=1e-4, params=model.parameters())
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        model_output = model(coords)
        loss = ((model_output - pixels) ** 2).mean()
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"Step {step}, Total loss {loss.item():.6f}, PSNR {10 * math.log10(4 / loss.item()):.2f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- neural ODE, RK4


def odeint_rk4(func: nn.Module, y0: torch.Tensor, t: torch.Tensor, substeps: int = 1) -> torch.Tensor:
    """Classic fixed-step Runge-Kutta 4 from t[0] through every t[i]; returns (len(t), *y0.shape)."""
    ys, y = [y0], y0
    for i in range(len(t) - 1):
        dt = (t[i + 1] - t[i]) / substeps
        tt = t[i]
        for _ in range(substeps):
            k1 = func(tt, y)
            k2 = func(tt + dt / 2, y + dt / 2 * k1)
            k3 = func(tt + dt / 2, y + dt / 2 * k2)
            k4 = func(tt + dt, y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            tt = tt + dt
        ys.append(y)
    return torch.stack(ys)


class Lambda(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("true_A", torch.tensor([[-0.1, 2.0], [-2.0, -0.1]]))

    def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.mm(y**3, self.true_A)


class ODEFunc(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 50), nn.Tanh(), nn.Linear(50, 2))
        for m in self.net.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0, std=0.1)
                nn.init.constant_(m.bias, val=0)

    def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.net(y**3)


def neural_ode_spiral(path: str, niters: int = 300, data_size: int = 1000, batch_time: int = 10, batch_size: int = 20,
                      seed: int = 0) -> list[float]:  # fmt: skip
    """torchdiffeq's ode_demo with a hand-written fixed-step RK4 in place of odeint: RMSprop 1e-3,
    random windows of 10 time points from 20 starting states, L1 loss."""
    _seed(seed)
    true_y0 = torch.tensor([[2.0, 0.0]])
    t = torch.linspace(0.0, 25.0, data_size)
    with torch.no_grad():
        true_y = odeint_rk4(Lambda(), true_y0, t, substeps=2)

    def get_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s = torch.from_numpy(
            np.random.choice(np.arange(data_size - batch_time, dtype=np.int64), batch_size, replace=False)
        )
        batch_y0 = true_y[s]  # (M, 1, D)
        batch_t = t[:batch_time]
        batch_y = torch.stack([true_y[s + i] for i in range(batch_time)], dim=0)  # (T, M, 1, D)
        return batch_y0, batch_t, batch_y

    func = ODEFunc()
    optimizer = torch.optim.RMSprop(func.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(func)
    losses = []
    for itr in range(1, niters + 1):
        optimizer.zero_grad()
        batch_y0, batch_t, batch_y = get_batch()
        pred_y = odeint_rk4(func, batch_y0.squeeze(1), batch_t).unsqueeze(2)
        loss = torch.mean(torch.abs(pred_y - batch_y))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if itr % 100 == 0:
            with torch.no_grad():
                pred_y = odeint_rk4(func, true_y0, t[:200])
                print(
                    f"Iter {itr:04d} | Total Loss {torch.mean(torch.abs(pred_y - true_y[:200])).item():.6f}"
                )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Bayes by backprop


class BayesLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int, prior_sigma: float = 1.0):
        super().__init__()
        self.prior_sigma = prior_sigma
        self.w_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-0.2, 0.2))
        self.w_rho = nn.Parameter(torch.full((out_features, in_features), -5.0))
        self.b_mu = nn.Parameter(torch.empty(out_features).uniform_(-0.2, 0.2))
        self.b_rho = nn.Parameter(torch.full((out_features,), -5.0))

    def _kl(self, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        p = self.prior_sigma
        return (torch.log(p / sigma) + (sigma**2 + mu**2) / (2 * p**2) - 0.5).sum()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w_sigma, b_sigma = F.softplus(self.w_rho), F.softplus(self.b_rho)
        w = self.w_mu + w_sigma * torch.randn_like(w_sigma)  # the reparameterization trick
        b = self.b_mu + b_sigma * torch.randn_like(b_sigma)
        self.kl = self._kl(self.w_mu, w_sigma) + self._kl(self.b_mu, b_sigma)
        return F.linear(x, w, b)


class BayesMLP(nn.Module):
    def __init__(self, hidden: int = 64):
        super().__init__()
        self.l1, self.l2, self.l3 = (
            BayesLinear(1, hidden),
            BayesLinear(hidden, hidden),
            BayesLinear(hidden, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l3(F.relu(self.l2(F.relu(self.l1(x)))))

    def kl(self) -> torch.Tensor:
        return self.l1.kl + self.l2.kl + self.l3.kl


def bayes_by_backprop_cubic(path: str, epochs: int = 40, seed: int = 0) -> list[float]:
    """Blundell et al.'s variational weights on the x^3 toy of Hernandez-Lobato & Adams: the loss
    is the minibatch ELBO, mean Gaussian NLL + KL / N."""
    g = _seed(seed)
    x = torch.rand(400, 1, generator=g) * 8 - 4
    y = x**3 + 3 * torch.randn(400, 1, generator=g)
    y_scale = y.std()
    x_n, y_n = x / 4, y / y_scale
    noise = 3 / y_scale
    loader = DataLoader(TensorDataset(x_n, y_n), batch_size=40, shuffle=True, generator=g)
    model = BayesMLP()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        for xb, yb in loader:
            pred = model(xb)
            nll = (0.5 * ((yb - pred) / noise) ** 2 + torch.log(noise) + 0.5 * math.log(2 * math.pi)).mean()
            loss = nll + model.kl() / len(x_n)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 10 == 9:
            with torch.no_grad():
                preds = torch.stack([model(x_n) for _ in range(20)])
                rmse = ((preds.mean(0) - y_n) ** 2).mean().sqrt().item()
            print(
                f"epoch {epoch} elbo loss {loss.item():.3f} kl/N {model.kl().item() / 400:.3f} rmse {rmse:.3f}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- MC dropout, heteroscedastic


class HeteroscedasticNet(nn.Module):
    def __init__(self, hidden: int = 64, p: float = 0.1, bug: str | None = None):
        super().__init__()
        self.bug = bug
        self.trunk = nn.Sequential(
            nn.Linear(1, hidden),
            nn.ReLU(),
            nn.Dropout(p),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Dropout(p),
        )
        self.mean = nn.Linear(hidden, 1)
        self.var = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(x)
        if self.bug == "log_zero_nan":  # "the variance must be non-negative": a ReLU
            return self.mean(h), F.relu(self.var(h))
        return self.mean(h), F.softplus(self.var(h)) + 1e-6


class GaussianNLL(nn.Module):
    def forward(self, out: tuple[torch.Tensor, torch.Tensor], y: torch.Tensor) -> torch.Tensor:
        mu, var = out
        return (0.5 * torch.log(var) + 0.5 * (y - mu) ** 2 / var).mean()


def mc_dropout_regression(path: str, epochs: int = 12, seed: int = 0, bug: str | None = None) -> list[float]:
    """Gal & Ghahramani: dropout kept on at test time for T=50 stochastic passes, a mean and a
    variance head trained by the Gaussian NLL (heteroscedastic noise), Adam with weight decay."""
    g = _seed(seed)
    x = torch.rand(1000, 1, generator=g) * 6 - 3
    y = torch.sin(2 * x) + 0.3 * x + (0.05 + 0.25 * x.abs() / 3) * torch.randn(1000, 1, generator=g)
    loader = DataLoader(TensorDataset(x[:900], y[:900]), batch_size=64, shuffle=True, generator=g)
    model = HeteroscedasticNet(bug=bug)
    criterion = GaussianNLL()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 4 == 3:
            model.train()  # MC dropout: dropout stays on for the predictive samples
            with torch.no_grad():
                samples = torch.stack([model(x[900:])[0] for _ in range(50)])
            rmse = ((samples.mean(0) - y[900:]) ** 2).mean().sqrt().item()
            print(
                f"epoch {epoch} nll {np.mean(losses[-15:]):.3f} MC rmse {rmse:.3f} epistemic sd {samples.std(0).mean().item():.3f}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- sparse autoencoder


class SparseAutoencoder(nn.Module):
    """A dictionary-learning SAE: f = ReLU(W_enc (x - b_dec) + b_enc), x_hat = W_dec f + b_dec,
    decoder columns kept at unit norm."""

    def __init__(self, d: int = 32, n_features: int = 128):
        super().__init__()
        self.W_enc = nn.Parameter(nn.init.kaiming_uniform_(torch.empty(d, n_features)))
        self.b_enc = nn.Parameter(torch.zeros(n_features))
        self.W_dec = nn.Parameter(self.W_enc.data.t().clone())
        self.b_dec = nn.Parameter(torch.zeros(d))
        self.normalize_decoder()

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        self.W_dec.data /= self.W_dec.data.norm(dim=1, keepdim=True)

    @torch.no_grad()
    def remove_parallel_grad(self) -> None:
        if self.W_dec.grad is not None:
            w = self.W_dec.data
            self.W_dec.grad -= (self.W_dec.grad * w).sum(1, keepdim=True) * w

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = F.relu((x - self.b_dec) @ self.W_enc + self.b_enc)
        return f @ self.W_dec + self.b_dec, f


def sparse_autoencoder(
    path: str, steps: int = 400, l1_coeff: float = 1e-2, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Data in superposition: each sample is a sparse mix of 64 unit directions in 32 dims; the
    SAE (128 features) learns them with an L1 penalty on its activations; Adam 1e-3."""
    g = _seed(seed)
    true_dict = F.normalize(torch.randn(64, 32, generator=g), dim=1)
    active = torch.rand(8192, 64, generator=g) < 3 / 64
    codes = active * torch.rand(8192, 64, generator=g) * 2
    data = codes @ true_dict + 0.01 * torch.randn(8192, 32, generator=g)
    sae = SparseAutoencoder()
    if bug == "dead_relu_init":  # a large negative threshold meant to start the features sparse
        nn.init.constant_(sae.b_enc, -4.0)
    optimizer = torch.optim.Adam(sae.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(sae)
    losses = []
    for step in range(steps):
        x = data[torch.randint(0, len(data), (256,), generator=g)]
        x_hat, f = sae(x)
        mse = (x_hat - x).pow(2).sum(-1).mean()
        l1 = f.abs().sum(-1).mean()
        loss = mse + l1_coeff * l1
        optimizer.zero_grad()
        loss.backward()
        sae.remove_parallel_grad()
        optimizer.step()
        sae.normalize_decoder()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step} mse {mse.item():.4f} L0 {(f > 0).float().sum(-1).mean().item():.1f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- magnitude pruning


def iterative_pruning_lenet(
    path: str, epochs: int = 6, rounds: int = 4, amount: float = 0.3, seed: int = 0
) -> list[float]:
    """Train dense for 2 epochs, then prune 30% of the remaining weights globally by L1 magnitude
    (torch.nn.utils.prune) before each of the next epochs, fine-tuning in between; remove the
    re-parametrization at the end."""
    import torch.nn.utils.prune as prune

    g = _seed(seed)
    x, y = _glyphs(g, 2000)
    x = (x - 0.25) / 0.3
    loader = DataLoader(TensorDataset(x[:1600], y[:1600]), batch_size=64, shuffle=True, generator=g)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 4, 64), nn.ReLU(), nn.Linear(64, 5),
    )  # fmt: skip
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    to_prune = [(m, "weight") for m in model if isinstance(m, (nn.Conv2d, nn.Linear))]
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        if 2 <= epoch < 2 + rounds:
            prune.global_unstructured(to_prune, pruning_method=prune.L1Unstructured, amount=amount)
            zeros = sum(int((m.weight == 0).sum()) for m, _ in to_prune)
            total = sum(m.weight.numel() for m, _ in to_prune)
            print(f"epoch {epoch}: global sparsity {zeros / total:.2%}")
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x[1600:]).argmax(1) == y[1600:]).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-25:]):.3f} acc {acc:.3f}")
    for m, name in to_prune:
        prune.remove(m, name)
    hook.close()
    return losses


# ----------------------------------------------------------------------------- QAT fake-quant


class QATNet(nn.Module):
    def __init__(self):
        super().__init__()
        from torch.ao.quantization import DeQuantStub, QuantStub

        self.quant = QuantStub()
        self.conv1, self.bn1, self.relu1 = (
            nn.Conv2d(1, 16, 3, 1, 1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
        )
        self.conv2, self.bn2, self.relu2 = (
            nn.Conv2d(16, 32, 3, 2, 1, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 5)
        self.dequant = DeQuantStub()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.quant(x)
        x = self.relu2(self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x))))))
        x = self.fc(torch.flatten(self.pool(x), 1))
        return self.dequant(x)


def qat_fake_quant_cnn(path: str, epochs: int = 6, seed: int = 0) -> list[float]:
    """Eager-mode quantization-aware training as in the PyTorch tutorial: fuse conv-bn-relu,
    prepare_qat with the x86 QAT qconfig (fake-quantized weights and activations), freeze the
    observers after 4 epochs and the BN statistics after 3, convert to int8 at the end."""
    from torch.ao import quantization as tq
    from torch.ao.nn.intrinsic import qat as nniqat

    g = _seed(seed)
    x, y = _glyphs(g, 2000)
    x = (x - 0.25) / 0.3
    loader = DataLoader(TensorDataset(x[:1600], y[:1600]), batch_size=64, shuffle=True, generator=g)
    model = QATNet()
    model.train()
    tq.fuse_modules_qat(model, [["conv1", "bn1", "relu1"], ["conv2", "bn2", "relu2"]], inplace=True)
    model.qconfig = tq.get_default_qat_qconfig("x86")
    tq.prepare_qat(model, inplace=True)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch >= 3:
            model.apply(tq.disable_observer)
        if epoch >= 2:
            model.apply(nniqat.freeze_bn_stats)
        model.eval()
        with torch.no_grad():
            acc = (model(x[1600:]).argmax(1) == y[1600:]).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-25:]):.3f} fake-quant acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DP-SGD with torch.func


def dp_sgd_per_sample_clipping(
    path: str,
    steps: int = 250,
    batch: int = 128,
    clip: float = 1.0,
    noise_multiplier: float = 1.0,
    seed: int = 0,
) -> list[float]:
    """DP-SGD (Abadi et al.) by hand: per-example gradients with vmap(grad(...)) over
    functional_call, each clipped to norm C, summed, Gaussian noise of std sigma*C added, the
    average written into p.grad; plain SGD lr 0.1 as in Opacus' MNIST example; tanh MLP."""
    from torch.func import functional_call, grad, vmap

    g = _seed(seed)
    x, y = _glyphs(g, 3000)
    x = ((x - 0.25) / 0.3).flatten(1)
    model = nn.Sequential(nn.Linear(64, 128), nn.Tanh(), nn.Linear(128, 64), nn.Tanh(), nn.Linear(64, 5))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def compute_loss(params, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, params, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    per_sample_grads = vmap(grad(compute_loss), in_dims=(None, 0, 0))
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, 2500, (batch,), generator=g)
        xb, yb = x[idx], y[idx]
        loss = criterion(model(xb), yb)  # for logging only; the update uses the private gradient
        params = {k: v.detach() for k, v in model.named_parameters()}
        grads = per_sample_grads(params, xb, yb)
        norms = torch.sqrt(sum(gr.flatten(1).pow(2).sum(1) for gr in grads.values()))
        factor = (clip / (norms + 1e-6)).clamp(max=1.0)
        for name, p in model.named_parameters():
            gsum = torch.einsum("b,b...->...", factor, grads[name])
            noise = torch.randn(gsum.shape, generator=g) * noise_multiplier * clip
            p.grad = (gsum + noise) / batch
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        if step % 50 == 49:
            with torch.no_grad():
                acc = (model(x[2500:]).argmax(1) == y[2500:]).float().mean().item()
            print(
                f"step {step} loss {loss.item():.3f} clipped {(norms > clip).float().mean():.2f} acc {acc:.3f}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DANN, gradient reversal


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, alpha: float) -> torch.Tensor:
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        return grad_output.neg() * ctx.alpha, None


class DANN(nn.Module):
    def __init__(self, classes: int = 5):
        super().__init__()
        self.feature = nn.Sequential(
            nn.Conv2d(1, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(True), nn.MaxPool2d(2),
            nn.Conv2d(32, 48, 3, 1, 1), nn.BatchNorm2d(48), nn.Dropout2d(0.2), nn.ReLU(True), nn.MaxPool2d(2),
            nn.Flatten(),
        )  # fmt: skip
        self.class_classifier = nn.Sequential(
            nn.Linear(48 * 4, 100), nn.BatchNorm1d(100), nn.ReLU(True), nn.Linear(100, classes)
        )
        self.domain_classifier = nn.Sequential(
            nn.Linear(48 * 4, 100), nn.BatchNorm1d(100), nn.ReLU(True), nn.Linear(100, 2)
        )

    def forward(self, x: torch.Tensor, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
        feature = self.feature(x)
        return self.class_classifier(feature), self.domain_classifier(GradReverse.apply(feature, alpha))


def dann_domain_adaptation(path: str, epochs: int = 6, seed: int = 0) -> list[float]:
    """Ganin & Lempitsky: labelled source glyphs, unlabelled target glyphs (inverted contrast on a
    gradient background); the domain head trains through a gradient reversal layer; alpha and
    the learning rate follow the paper's schedules (SGD, momentum 0.9)."""
    g = _seed(seed)
    xs, ys = _glyphs(g, 1600)
    xt, yt = _glyphs(g, 1600)
    ramp = torch.linspace(0, 0.5, 8).view(1, 1, 1, 8)
    xt = (1 - xt) * 0.7 + ramp
    xs, xt = (xs - 0.25) / 0.3, (xt - xt.mean()) / xt.std()
    src = DataLoader(TensorDataset(xs, ys), batch_size=64, shuffle=True, generator=g, drop_last=True)
    tgt = DataLoader(TensorDataset(xt), batch_size=64, shuffle=True, generator=g, drop_last=True)
    model = DANN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_class = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    total = epochs * len(src)
    i = 0
    for epoch in range(epochs):
        model.train()
        for (s_img, s_label), (t_img,) in zip(src, tgt, strict=False):
            p = i / total
            alpha = 2.0 / (1.0 + math.exp(-10 * p)) - 1
            for group in optimizer.param_groups:
                group["lr"] = 0.01 / (1 + 10 * p) ** 0.75
            class_out, domain_out = model(s_img, alpha)
            err_s_label = loss_class(class_out, s_label)
            err_s_domain = F.cross_entropy(domain_out, torch.zeros(len(s_img), dtype=torch.long))
            _, domain_out_t = model(t_img, alpha)
            err_t_domain = F.cross_entropy(domain_out_t, torch.ones(len(t_img), dtype=torch.long))
            err = err_s_label + err_s_domain + err_t_domain
            optimizer.zero_grad()
            err.backward()
            optimizer.step()
            losses.append(err.item())
            i += 1
        model.eval()
        with torch.no_grad():
            acc_t = (model(xt, 0.0)[0].argmax(1) == yt).float().mean().item()
        print(
            f"epoch {epoch} label {err_s_label.item():.3f} domain {(err_s_domain + err_t_domain).item():.3f} target acc {acc_t:.3f}"
        )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- RBM, contrastive divergence


class RBM(nn.Module):
    def __init__(self, n_vis: int = 64, n_hid: int = 48, k: int = 1):
        super().__init__()
        self.W = nn.Parameter(torch.randn(n_hid, n_vis) * 0.01)
        self.v_bias = nn.Parameter(torch.zeros(n_vis))
        self.h_bias = nn.Parameter(torch.zeros(n_hid))
        self.k = k

    def v_to_h(self, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        p_h = torch.sigmoid(F.linear(v, self.W, self.h_bias))
        return p_h, torch.bernoulli(p_h)

    def h_to_v(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        p_v = torch.sigmoid(F.linear(h, self.W.t(), self.v_bias))
        return p_v, torch.bernoulli(p_v)

    def forward(self, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _, h = self.v_to_h(v)
        for _ in range(self.k):
            p_v, v_ = self.h_to_v(h)
            _, h = self.v_to_h(v_)
        return v_, p_v

    def free_energy(self, v: torch.Tensor) -> torch.Tensor:
        return -(v @ self.v_bias) - F.softplus(F.linear(v, self.W, self.h_bias)).sum(1)


def rbm_contrastive_divergence(path: str, epochs: int = 10, seed: int = 0) -> list[float]:
    """A Bernoulli RBM trained by CD-1 through the free-energy difference (its gradient is the
    CD update), SGD with momentum and weight decay (Hinton's guide); the reported per-step
    loss is the reconstruction error, what RBM scripts monitor."""
    g = _seed(seed)
    x, _ = _glyphs(g, 2000)
    v_data = (x > 0.4).float().flatten(1)
    loader = DataLoader(TensorDataset(v_data), batch_size=64, shuffle=True, generator=g)
    rbm = RBM()
    optimizer = torch.optim.SGD(rbm.parameters(), lr=0.1, momentum=0.5, weight_decay=2e-4)
    hook = Hook(path)
    hook.register_module(rbm)
    losses = []
    for epoch in range(epochs):
        if epoch == 5:
            for group in optimizer.param_groups:
                group["momentum"] = 0.9
        for (v,) in loader:
            v1, p_v1 = rbm(v)
            loss = rbm.free_energy(v).mean() - rbm.free_energy(v1.detach()).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(F.mse_loss(p_v1, v).item())
        print(f"epoch {epoch} recon {np.mean(losses[-32:]):.4f} cd {loss.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- neural cellular automata


class CAModel(nn.Module):
    """Growing NCA (Mordvintsev et al.): fixed Sobel perception, a 1x1 update network with a
    zero-initialized output, stochastic cell updates, alive masking on the alpha channel."""

    def __init__(self, channel_n: int = 12, hidden: int = 64, fire_rate: float = 0.5):
        super().__init__()
        self.channel_n, self.fire_rate = channel_n, fire_rate
        sobel = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]) / 8
        ident = torch.zeros(3, 3)
        ident[1, 1] = 1.0
        kernel = torch.stack([ident, sobel, sobel.t()]).repeat(channel_n, 1, 1).unsqueeze(1)
        self.register_buffer("kernel", kernel)
        self.fc0 = nn.Conv2d(3 * channel_n, hidden, 1)
        self.fc1 = nn.Conv2d(hidden, channel_n, 1, bias=False)
        nn.init.zeros_(self.fc1.weight)

    def alive(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(x[:, 3:4], 3, 1, 1) > 0.1

    def forward(self, x: torch.Tensor, steps: int, g: torch.Generator) -> torch.Tensor:
        for _ in range(steps):
            pre = self.alive(x)
            y = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="circular"), self.kernel, groups=self.channel_n)
            dx = self.fc1(F.relu(self.fc0(y)))
            fire = (torch.rand(x[:, :1].shape, generator=g) <= self.fire_rate).float()
            x = x + dx * fire
            x = x * (pre & self.alive(x)).float()
        return x


def neural_cellular_automata(
    path: str, iters: int = 120, batch: int = 8, size: int = 16, seed: int = 0
) -> list[float]:
    g = _seed(seed)
    shape, _ = _glyphs(g, 1, size)
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    d = ((yy - 7.5) ** 2 + (xx - 7.5) ** 2).sqrt()
    alpha = ((d < 6).float() * (0.3 + 0.7 * (shape[0, 0] > 0.4).float())).clamp(0, 1)
    rgb = torch.stack([0.9 - d / 12, 0.3 + d / 20, 0.6 * (yy / 15)]).clamp(0, 1) * alpha
    target = torch.cat([rgb, alpha.unsqueeze(0)]).unsqueeze(0)  # premultiplied RGBA
    ca = CAModel()
    seed_state = torch.zeros(1, ca.channel_n, size, size)
    seed_state[:, 3:, size // 2, size // 2] = 1.0
    optimizer = torch.optim.Adam(ca.parameters(), lr=2e-3)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [80], 0.1)
    hook = Hook(path)
    hook.register_module(ca)
    losses = []
    for i in range(iters):
        x0 = seed_state.repeat(batch, 1, 1, 1)
        n_steps = int(torch.randint(16, 32, (1,), generator=g))
        x = ca(x0, n_steps, g)
        loss = F.mse_loss(x[:, :4], target.expand(batch, -1, -1, -1))
        optimizer.zero_grad()
        loss.backward()
        for p in ca.parameters():  # per-parameter gradient normalization, as in the paper
            if p.grad is not None:
                p.grad /= p.grad.norm() + 1e-8
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if i % 40 == 0:
            print(f"{i} loss {loss.item():.5f} steps {n_steps}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Gumbel-softmax VAE


class GumbelVAE(nn.Module):
    def __init__(self, latent: int = 8, categories: int = 6):
        super().__init__()
        self.latent, self.categories = latent, categories
        self.encoder = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, latent * categories))
        self.decoder = nn.Sequential(nn.Linear(latent * categories, 128), nn.ReLU(), nn.Linear(128, 64))

    def forward(self, x: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.encoder(x).view(-1, self.latent, self.categories)
        z = F.gumbel_softmax(logits, tau=tau, hard=False, dim=-1)
        return self.decoder(z.flatten(1)), logits


def gumbel_softmax_vae(path: str, epochs: int = 20, seed: int = 0) -> list[float]:
    """A categorical-latent VAE (Jang et al.): 8 variables of 6 classes relaxed by Gumbel-softmax,
    the temperature annealed as tau = max(0.5, exp(-r t)) every 100 steps, KL to the uniform
    prior, Bernoulli likelihood, Adam 1e-3."""
    g = _seed(seed)
    x, _ = _glyphs(g, 2000)
    x = (x > 0.4).float().flatten(1)
    loader = DataLoader(TensorDataset(x), batch_size=100, shuffle=True, generator=g)
    model = GumbelVAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses, step, tau = [], 0, 1.0
    for epoch in range(epochs):
        for (xb,) in loader:
            recon_logits, logits = model(xb, tau)
            bce = F.binary_cross_entropy_with_logits(recon_logits, xb, reduction="sum") / len(xb)
            q = F.softmax(logits, dim=-1)
            kld = torch.sum(q * torch.log(q * model.categories + 1e-20)) / len(xb)
            loss = bce + kld
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            step += 1
            if step % 100 == 0:
                tau = max(0.5, math.exp(-3e-3 * step))
        if epoch % 5 == 4:
            print(f"epoch {epoch} loss {np.mean(losses[-20:]):.2f} tau {tau:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- deep ensemble


def deep_ensemble_regression(path: str, members: int = 5, epochs: int = 30, seed: int = 0) -> list[float]:
    """Lakshminarayanan et al.: independently initialised mean-variance networks, each with its own
    optimizer and its own shuffling, trained side by side; the ensemble is a mixture at test."""
    g = _seed(seed)
    x = torch.rand(600, 1, generator=g) * 8 - 4
    y = torch.sin(x) * 2 + 0.2 * x**2 / 4 + (0.1 + 0.1 * (x > 0).float()) * torch.randn(600, 1, generator=g)
    y = (y - y.mean()) / y.std()
    x = x / 4
    ensemble = nn.ModuleList(
        nn.Sequential(nn.Linear(1, 50), nn.ReLU(), nn.Linear(50, 50), nn.ReLU(), nn.Linear(50, 2))
        for _ in range(members)
    )
    optimizers = [torch.optim.Adam(m.parameters(), lr=1e-2 / 2) for m in ensemble]
    loaders = [
        DataLoader(
            TensorDataset(x[:500], y[:500]),
            batch_size=100,
            shuffle=True,
            generator=torch.Generator().manual_seed(seed + k),
        )
        for k in range(members)
    ]
    nll = nn.GaussianNLLLoss()
    hook = Hook(path)
    hook.register_module(ensemble)
    hook.register_loss(nll)
    losses = []
    for epoch in range(epochs):
        for batches in zip(*loaders, strict=True):
            step_losses = []
            for model, opt, (xb, yb) in zip(ensemble, optimizers, batches, strict=True):
                out = model(xb)
                loss = nll(out[:, :1], yb, F.softplus(out[:, 1:]) + 1e-6)
                opt.zero_grad()
                loss.backward()
                opt.step()
                step_losses.append(loss.item())
            losses.append(float(np.mean(step_losses)))
        if epoch % 10 == 9:
            with torch.no_grad():
                outs = torch.stack([m(x[500:]) for m in ensemble])
                mu = outs[..., :1].mean(0)
                print(
                    f"epoch {epoch} nll {losses[-1]:.3f} ensemble rmse {((mu - y[500:]) ** 2).mean().sqrt().item():.3f}"
                )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- the set

_vqvae = healthy("vqvae_ema_codebook_restarts_8x8", "VQ-VAE", vqvae_glyphs)
_byol = healthy("byol_ema_target_predictor_8x8", "self-supervised", byol_glyphs)
_arcface = healthy("arcface_margin_sgd_multistep", "metric learning", arcface_glyphs)
_mixup = healthy("mixup_vgg_sgd_uint8_pipeline", "vision", mixup_cnn)
_cutmix = healthy("cutmix_cnn_nesterov_cosine_16px", "vision", cutmix_cnn)
_se_resnet = healthy("se_resnet_nesterov_multistep_eval", "vision", se_resnet_glyphs)
_detector = healthy("box_class_detector_giou_adamw_clip", "detection", box_detector)
_keypoints = healthy("keypoint_heatmaps_simple_baseline", "pose", keypoint_heatmaps)
_espcn = healthy("espcn_pixel_shuffle_super_resolution", "super-resolution", espcn_super_resolution)
_pinn = healthy("pinn_burgers_autograd_residual_adam", "PINN", pinn_burgers)
_mc_dropout = healthy("mc_dropout_heteroscedastic_nll", "uncertainty", mc_dropout_regression)
_sae = healthy("sparse_autoencoder_l1_unit_decoder", "dictionary learning", sparse_autoencoder)

PIPELINES = [
    healthy("wgan_gp_ring_of_gaussians_5_critic", "GAN", wgan_gp_ring),
    healthy("conditional_dcgan_glyphs_8x8", "GAN", cgan_glyphs),
    healthy("pixelcnn_masked_conv_binary_8x8", "autoregressive", pixelcnn_binary),
    healthy("denoising_score_matching_checkerboard", "score model", score_matching_2d),
    healthy("barlow_twins_waveforms_adamw", "self-supervised", barlow_twins_signals),
    healthy("mobilenet_v2_inverted_residual_relu6", "vision", mobilenet_v2_glyphs),
    healthy("preact_resnet_stochastic_depth_warmup", "vision", preact_resnet_stochastic_depth),
    healthy("fixmatch_pseudo_labels_ema", "semi-supervised", fixmatch_glyphs),
    healthy("colorization_skip_net_l1", "image-to-image", colorization_l1),
    healthy("pgd_adversarial_training_madry", "adversarial", pgd_adversarial_training),
    healthy("sam_two_pass_sgd_label_smoothing", "optimizer", sam_wide_cnn),
    healthy("convmixer_lookahead_radam_accumulate2", "optimizer", lookahead_radam_convmixer),
    healthy("lars_batch512_warmup_cosine", "optimizer", lars_large_batch),
    healthy("model_ema_eval_rgb_cnn_adamw", "vision", ema_eval_color_cnn),
    healthy("gradient_checkpointing_deep_resmlp", "memory", grad_checkpoint_resmlp),
    healthy("maml_second_order_sine", "meta-learning", maml_sine),
    healthy("hypernetwork_generated_mlp_sines", "hypernetwork", hypernetwork_sines),
    healthy("siren_implicit_image_32px", "implicit representation", siren_image_fit),
    healthy("neural_ode_rk4_spiral_rmsprop", "neural ODE", neural_ode_spiral),
    healthy("bayes_by_backprop_cubic_elbo", "Bayesian NN", bayes_by_backprop_cubic),
    healthy("iterative_magnitude_pruning_lenet", "compression", iterative_pruning_lenet),
    healthy("qat_fake_quant_fused_cnn", "compression", qat_fake_quant_cnn),
    healthy("dp_sgd_vmap_per_sample_clipping", "differential privacy", dp_sgd_per_sample_clipping),
    healthy("dann_gradient_reversal_glyphs", "domain adaptation", dann_domain_adaptation),
    healthy("rbm_cd1_free_energy_momentum", "energy-based", rbm_contrastive_divergence),
    healthy("neural_cellular_automata_growing", "cellular automata", neural_cellular_automata),
    healthy("gumbel_softmax_categorical_vae", "VAE", gumbel_softmax_vae),
    healthy("deep_ensemble_five_mean_variance_nets", "uncertainty", deep_ensemble_regression),
    _vqvae,
    _byol,
    _arcface,
    _mixup,
    _cutmix,
    _se_resnet,
    _detector,
    _keypoints,
    _espcn,
    _pinn,
    _mc_dropout,
    _sae,
    buggy(_vqvae, "no_zero_grad"),
    buggy(_byol, "frozen_by_mistake"),
    buggy(_arcface, "shuffled_labels"),
    buggy(_mixup, "inputs_x255"),
    buggy(_cutmix, "softmax_before_ce"),
    buggy(_se_resnet, "train_in_eval_mode"),
    buggy(_detector, "deep_sigmoid"),
    buggy(_keypoints, "frozen_by_mistake"),
    buggy(_espcn, "lr_x100"),
    buggy(_pinn, "lr_x100"),
    buggy(_mc_dropout, "log_zero_nan"),
    buggy(_sae, "dead_relu_init"),
]
