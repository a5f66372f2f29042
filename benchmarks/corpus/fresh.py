"""A fresh held-out set (issue 26), written after the `heldout` figure had been looked at and
measured once: generative models (a DDPM on 8x8 images, a RealNVP flow, a KL-annealed conv VAE,
a denoising autoencoder, a mixture density network), a U-Net segmentation, a GCN written with
index_add_, a MoCo queue, a siamese pair loss, matrix factorization with BPR, skip-gram with
negative sampling, a DQN with a target network and a PPO agent on hand-written environments,
knowledge distillation, a two-headed multi-task model, a pre-LN transformer classifier with
warm-up, an LSTM seq2seq with teacher forcing, a dilated TCN forecaster, a 1-D CNN on signals,
full-batch L-BFGS, SWA with a cyclic schedule, bf16 autocast with accumulation, ReduceLROnPlateau.

Every script is written the way its kind is usually written (its own data generator, its own
loop style), with the README's two lines. `SPLIT = "fresh"` puts them all in the `fresh` set.
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from mldbg.torch import Hook

from . import FRESH, buggy, healthy

SPLIT = FRESH

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 100)


def _blobs8(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """8x8 grey images in [0, 1]: a filled square, a ring, a plus or a diagonal, at a random
    offset, blurred a little by noise. Returns images (n, 1, 8, 8) and their class."""
    yy, xx = torch.meshgrid(torch.arange(8), torch.arange(8), indexing="ij")
    protos = torch.stack(
        [
            ((yy - 3.5).abs() < 2) & ((xx - 3.5).abs() < 2),
            (((yy - 3.5) ** 2 + (xx - 3.5) ** 2).sqrt() - 2.5).abs() < 0.8,
            ((yy - 3.5).abs() < 1) | ((xx - 3.5).abs() < 1),
            (yy - xx).abs() < 1,
        ]
    ).float()
    y = torch.randint(0, 4, (n,), generator=g)
    imgs = protos[y]
    shift = torch.randint(-1, 2, (n, 2), generator=g)
    imgs = torch.stack(
        [torch.roll(im, (int(a), int(b)), (0, 1)) for im, (a, b) in zip(imgs, shift, strict=True)]
    )
    imgs = imgs * (0.7 + 0.3 * torch.rand(n, 1, 1, generator=g)) + 0.08 * torch.randn(imgs.shape, generator=g)
    return imgs.clamp(0, 1).unsqueeze(1), y


# ----------------------------------------------------------------------------- diffusion (8x8)


class EpsNet(nn.Module):
    """A small conv noise predictor with a sinusoidal time embedding added per channel."""

    def __init__(self, ch: int = 32):
        super().__init__()
        self.ch = ch
        self.time = nn.Sequential(nn.Linear(ch, ch), nn.SiLU(), nn.Linear(ch, ch))
        self.inp = nn.Conv2d(1, ch, 3, padding=1)
        self.mid = nn.Sequential(nn.GroupNorm(8, ch), nn.SiLU(), nn.Conv2d(ch, ch, 3, padding=1))
        self.mid2 = nn.Sequential(nn.GroupNorm(8, ch), nn.SiLU(), nn.Conv2d(ch, ch, 3, padding=1))
        self.out = nn.Conv2d(ch, 1, 3, padding=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        half = self.ch // 2
        freqs = torch.exp(-math.log(1000) * torch.arange(half) / half)
        emb = torch.cat([torch.sin(t[:, None] * freqs), torch.cos(t[:, None] * freqs)], 1)
        h = self.inp(x) + self.time(emb)[:, :, None, None]
        h = h + self.mid(h)
        h = h + self.mid2(h)
        return self.out(h)


def ddpm_images(path: str, steps: int = 300, T: int = 100, lr: float = 2e-3, seed: int = 0) -> list[float]:  # noqa: N803
    g = _seed(seed)
    data, _ = _blobs8(g, 2048)
    data = data * 2 - 1
    betas = torch.linspace(1e-4, 0.05, T)
    abar = torch.cumprod(1 - betas, 0)
    model = EpsNet()
    ema = torch.optim.swa_utils.AveragedModel(
        model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.99)
    )
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        x0 = data[torch.randint(0, len(data), (64,), generator=g)]
        t = torch.randint(0, T, (64,), generator=g)
        noise = torch.randn(x0.shape, generator=g)
        a = abar[t].view(-1, 1, 1, 1)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        loss = F.mse_loss(model(xt, t.float()), noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        ema.update_parameters(model)
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- RealNVP flow


class Coupling(nn.Module):
    def __init__(self, mask: torch.Tensor, hidden: int):
        super().__init__()
        self.register_buffer("mask", mask)
        d = mask.numel()
        self.net = nn.Sequential(
            nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2 * d)
        )
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        xm = x * self.mask
        s, t = self.net(xm).chunk(2, dim=1)
        s = torch.tanh(s) * (1 - self.mask)
        t = t * (1 - self.mask)
        y = xm + (1 - self.mask) * (x * torch.exp(s) + t)
        return y, s.sum(1)


class RealNVP(nn.Module):
    def __init__(self, layers: int = 6, hidden: int = 64):
        super().__init__()
        masks = [torch.tensor([1.0, 0.0]) if i % 2 == 0 else torch.tensor([0.0, 1.0]) for i in range(layers)]
        self.layers = nn.ModuleList(Coupling(m, hidden) for m in masks)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logdet = torch.zeros(len(x))
        for layer in self.layers:
            x, ld = layer(x)
            logdet = logdet + ld
        return x, logdet


def _moons(n: int, rng: np.random.Generator) -> torch.Tensor:
    t = rng.uniform(0, math.pi, n)
    upper = rng.random(n) < 0.5
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    pts = np.stack([x, y], 1) + 0.06 * rng.standard_normal((n, 2))
    return torch.tensor((pts - pts.mean(0)) / pts.std(0), dtype=torch.float32)


def realnvp_moons(path: str, steps: int = 400, lr: float = 1e-3, seed: int = 0) -> list[float]:
    _seed(seed)
    rng = np.random.default_rng(seed)
    flow = RealNVP()
    opt = torch.optim.Adam(flow.parameters(), lr=lr)
    base = torch.distributions.Normal(0.0, 1.0)
    hook = Hook(path)
    hook.register_module(flow)
    losses = []
    for it in range(steps):
        x = _moons(256, rng)
        z, logdet = flow(x)
        nll = -(base.log_prob(z).sum(1) + logdet).mean()
        opt.zero_grad()
        nll.backward()
        torch.nn.utils.clip_grad_norm_(flow.parameters(), 5.0)
        opt.step()
        losses.append(nll.item())
        if it % 100 == 0:
            print(f"it {it}: nll {nll.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- KL-annealed VAE


class ConvVAE(nn.Module):
    def __init__(self, z: int = 8):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.LeakyReLU(0.2), nn.Flatten(),
        )  # fmt: skip
        self.mu = nn.Linear(32 * 4, z)
        self.logvar = nn.Linear(32 * 4, z)
        self.dec_in = nn.Linear(z, 32 * 4)
        self.dec = nn.Sequential(
            nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
            nn.ConvTranspose2d(16, 1, 4, stride=2, padding=1),
        )  # fmt: skip

    def forward(self, x: torch.Tensor):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.dec(self.dec_in(z).view(-1, 32, 2, 2)), mu, logvar


def vae_kl_annealing(path: str, epochs: int = 10, anneal_steps: int = 150, seed: int = 0) -> list[float]:
    g = _seed(seed)
    x, _ = _blobs8(g, 1536)
    loader = DataLoader(TensorDataset(x), batch_size=64, shuffle=True, generator=g)
    model = ConvVAE()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses, step = [], 0
    for epoch in range(epochs):
        for (xb,) in loader:
            logits, mu, logvar = model(xb)
            rec = F.binary_cross_entropy_with_logits(logits, xb, reduction="sum") / len(xb)
            kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / len(xb)
            beta = min(1.0, step / anneal_steps)
            loss = rec + beta * kl
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            step += 1
        print(f"epoch {epoch}: rec {rec.item():.2f} kl {kl.item():.2f} beta {beta:.2f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- denoising AE


def denoising_autoencoder(path: str, epochs: int = 15, seed: int = 0) -> list[float]:
    g = _seed(seed)
    x, _ = _blobs8(g, 1200)
    x = x.flatten(1)
    encoder = nn.Sequential(nn.Linear(64, 48), nn.ELU(), nn.Linear(48, 12))
    decoder = nn.Sequential(nn.Linear(12, 48), nn.ELU(), nn.Linear(48, 64), nn.Sigmoid())
    model = nn.Sequential(encoder, decoder)
    criterion = nn.MSELoss()
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), 50):
            clean = x[perm[i : i + 50]]
            noisy = (clean + 0.3 * torch.randn(clean.shape, generator=g)).clamp(0, 1)
            opt.zero_grad()
            loss = criterion(model(noisy), clean)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        print(f"epoch {epoch} mse {sum(losses[-24:]) / 24:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- MDN


class MDN(nn.Module):
    def __init__(self, k: int = 5, hidden: int = 48):
        super().__init__()
        self.k = k
        self.body = nn.Sequential(nn.Linear(1, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.pi = nn.Linear(hidden, k)
        self.mu = nn.Linear(hidden, k)
        self.log_sigma = nn.Linear(hidden, k)

    def forward(self, x: torch.Tensor):
        h = self.body(x)
        return self.pi(h), self.mu(h), self.log_sigma(h).clamp(-5, 3)


class MDNLoss(nn.Module):
    def forward(self, out, y: torch.Tensor) -> torch.Tensor:
        logit_pi, mu, log_sigma = out
        log_n = -0.5 * ((y - mu) / log_sigma.exp()) ** 2 - log_sigma - 0.5 * math.log(2 * math.pi)
        return -torch.logsumexp(F.log_softmax(logit_pi, 1) + log_n, dim=1).mean()


def mdn_inverse_sine(path: str, steps: int = 500, seed: int = 0) -> list[float]:
    """Bishop's inverse problem: x = y + 0.3 sin(2 pi y) + noise, predict y from x (multimodal)."""
    _seed(seed)
    yy = torch.rand(3000, 1)
    xx = yy + 0.3 * torch.sin(2 * math.pi * yy) + 0.05 * torch.randn(3000, 1)
    model = MDN()
    loss_fn = MDNLoss()
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, 3000, (128,))
        loss = loss_fn(model(xx[idx]), yy[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(step, round(loss.item(), 3))
    hook.close()
    return losses


# ----------------------------------------------------------------------------- U-Net segmentation


class TinyUNet(nn.Module):
    def __init__(self, c: int = 12):
        super().__init__()

        def conv(i: int, o: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True))

        self.d1 = conv(1, c)
        self.d2 = conv(c, 2 * c)
        self.pool = nn.MaxPool2d(2)
        self.bott = conv(2 * c, 2 * c)
        self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.u1 = conv(2 * c, c)
        self.head = nn.Conv2d(c, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s1 = self.d1(x)
        b = self.bott(self.d2(self.pool(s1)))
        return self.head(self.u1(torch.cat([self.up(b), s1], 1)))


class DiceBCE(nn.Module):
    def __init__(self):
        super().__init__()
        self.bce = nn.BCEWithLogitsLoss()

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        p = torch.sigmoid(logits)
        inter = (p * target).sum((1, 2, 3))
        dice = 1 - (2 * inter + 1) / (p.sum((1, 2, 3)) + target.sum((1, 2, 3)) + 1)
        return self.bce(logits, target) + dice.mean()


def _disks(g: torch.Generator, n: int, size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    cy, cx = (torch.rand(2, n, 1, 1, generator=g) * (size - 6) + 3).unbind(0)
    r = torch.rand(n, 1, 1, generator=g) * 2.5 + 1.5
    mask = (((yy - cy) ** 2 + (xx - cx) ** 2) < r**2).float()
    img = mask * 0.6 + 0.2 + 0.25 * torch.randn(mask.shape, generator=g)
    return img.unsqueeze(1), mask.unsqueeze(1)


def unet_segmentation(path: str, epochs: int = 4, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    img, mask = _disks(g, 960)
    img = (img.clamp(0, 1) * 255).round() if bug == "inputs_x255" else (img - img.mean()) / img.std()
    model = TinyUNet()
    criterion = DiceBCE()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(800, generator=g)
        for i in range(0, 800, 16):
            idx = perm[i : i + 16]
            opt.zero_grad()
            loss = criterion(model(img[idx]), mask[idx])
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            pred = model(img[800:]) > 0
            iou = ((pred & (mask[800:] > 0)).sum() / (pred | (mask[800:] > 0)).sum()).item()
        print(f"epoch {epoch}: loss {losses[-1]:.3f} val IoU {iou:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- GCN with index_add_


class GCNLayer(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.lin = nn.Linear(d_in, d_out, bias=False)
        self.bias = nn.Parameter(torch.zeros(d_out))

    def forward(
        self, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, norm: torch.Tensor
    ) -> torch.Tensor:
        h = self.lin(x)
        out = torch.zeros_like(h).index_add_(0, dst, h[src] * norm[:, None])
        return out + self.bias


class GCN(nn.Module):
    def __init__(self, d_in: int, hidden: int, classes: int):
        super().__init__()
        self.conv1 = GCNLayer(d_in, hidden)
        self.conv2 = GCNLayer(hidden, classes)
        self.drop = nn.Dropout(0.5)

    def forward(self, x, src, dst, norm):
        h = self.drop(F.relu(self.conv1(self.drop(x), src, dst, norm)))
        return self.conv2(h, src, dst, norm)


def gcn_sbm(path: str, epochs: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    """Kipf & Welling's GCN, full batch, on a stochastic block model with noisy features and 10%
    of the nodes labelled; symmetric normalization with self-loops."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    n, k = 600, 4
    y = torch.tensor(rng.integers(0, k, n))
    same = (y[:, None] == y[None, :]).numpy()
    prob = np.where(same, 0.04, 0.004)
    adj = np.triu(rng.random((n, n)) < prob, 1)
    src, dst = np.nonzero(adj | adj.T)
    loops = np.arange(n)
    src = torch.tensor(np.concatenate([src, loops]))
    dst = torch.tensor(np.concatenate([dst, loops]))
    deg = torch.zeros(n).index_add_(0, dst, torch.ones(len(dst)))
    norm = deg[src].rsqrt() * deg[dst].rsqrt()
    x = F.one_hot(y, k).float() @ torch.randn(k, 32) * 0.6 + torch.randn(n, 32)
    train = torch.zeros(n, dtype=torch.bool)
    train[torch.randperm(n)[:60]] = True
    labels = y[torch.randperm(n)] if bug == "shuffled_labels" else y
    model = GCN(32, 32, k)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        opt.zero_grad()
        out = model(x, src, dst, norm)
        loss = F.cross_entropy(out[train], labels[train])
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if epoch % 50 == 0 or epoch == epochs - 1:
            model.eval()
            with torch.no_grad():
                acc = (model(x, src, dst, norm).argmax(1)[~train] == y[~train]).float().mean().item()
            print(f"epoch {epoch} loss {loss.item():.3f} test acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- MoCo with a queue


def _views(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    x = x + 0.15 * torch.randn(x.shape, generator=g)
    drop = (torch.rand(x.shape, generator=g) > 0.1).float()
    return x * drop * (0.8 + 0.4 * torch.rand(len(x), 1, generator=g))


def moco_queue(path: str, steps: int = 500, queue_size: int = 1024, seed: int = 0) -> list[float]:
    """MoCo v2 on vectors from 10 latent clusters: a momentum key encoder, a FIFO queue of
    negatives, InfoNCE at temperature 0.2."""
    g = _seed(seed)
    centers = torch.randn(10, 24) * 2

    def encoder() -> nn.Module:
        return nn.Sequential(nn.Linear(24, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 32))

    q_enc, k_enc = encoder(), encoder()
    k_enc.load_state_dict(q_enc.state_dict())
    for p in k_enc.parameters():
        p.requires_grad = False
    queue = F.normalize(torch.randn(queue_size, 32), dim=1)
    ptr = 0
    opt = torch.optim.SGD(q_enc.parameters(), lr=0.06, momentum=0.9, weight_decay=1e-4)
    hook = Hook(path)
    hook.register_module(q_enc)
    losses = []
    for step in range(steps):
        x = centers[torch.randint(0, 10, (128,), generator=g)] + 0.5 * torch.randn(128, 24, generator=g)
        q = F.normalize(q_enc(_views(x, g)), dim=1)
        with torch.no_grad():
            for pq, pk in zip(q_enc.parameters(), k_enc.parameters(), strict=True):
                pk.mul_(0.99).add_(pq.detach(), alpha=0.01)
            k = F.normalize(k_enc(_views(x, g)), dim=1)
        logits = torch.cat([(q * k).sum(1, keepdim=True), q @ queue.T], 1) / 0.2
        loss = F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()
        queue[ptr : ptr + len(k)] = k
        ptr = (ptr + len(k)) % queue_size
        losses.append(loss.item())
        if step % 100 == 0:
            print(step, loss.item())
    q_enc.eval()
    with torch.no_grad():  # 1-nearest-neighbour accuracy of the features on the latent clusters
        c = torch.randint(0, 10, (600,), generator=g)
        f = F.normalize(q_enc(centers[c] + 0.5 * torch.randn(600, 24, generator=g)), dim=1)
        sim = (f[300:] @ f[:300].T).argmax(1)
        print("kNN accuracy", (c[:300][sim] == c[300:]).float().mean().item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- siamese pairs


class ContrastivePairLoss(nn.Module):
    """Hadsell et al. 2006: pull similar pairs together, push dissimilar ones beyond a margin."""

    def __init__(self, margin: float = 1.0):
        super().__init__()
        self.margin = margin

    def forward(self, e1: torch.Tensor, e2: torch.Tensor, same: torch.Tensor) -> torch.Tensor:
        d = F.pairwise_distance(e1, e2)
        return (same * d.pow(2) + (1 - same) * F.relu(self.margin - d).pow(2)).mean() / 2


def siamese_pairs(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    imgs, labels = _blobs8(g, 2000)
    imgs = (imgs - 0.3) / 0.4
    by_class = [torch.nonzero(labels == c).squeeze(1) for c in range(4)]
    net = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 16, 32), nn.ReLU(), nn.Linear(32, 8),
    )  # fmt: skip
    if bug == "dead_relu_init":  # a "fix" for exploding embeddings gone wrong
        nn.init.constant_(net[0].bias, -8.0)
        nn.init.constant_(net[6].bias, -8.0)
    criterion = ContrastivePairLoss()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(net)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        i = torch.randint(0, 2000, (64,), generator=g)
        j = torch.randint(0, 2000, (64,), generator=g)
        for a in range(32):  # half the pairs from the same class
            same_class = by_class[int(labels[i[a]])]
            j[a] = same_class[torch.randint(0, len(same_class), (1,), generator=g)]
        same = (labels[i] == labels[j]).float()
        opt.zero_grad()
        loss = criterion(net(imgs[i]), net(imgs[j]), same)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(step, f"{loss.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- recommender (BPR)


class MF(nn.Module):
    def __init__(self, users: int, items: int, d: int = 16):
        super().__init__()
        self.user = nn.Embedding(users, d)
        self.item = nn.Embedding(items, d)
        self.item_bias = nn.Embedding(items, 1)
        nn.init.normal_(self.user.weight, std=0.1)
        nn.init.normal_(self.item.weight, std=0.1)
        nn.init.zeros_(self.item_bias.weight)

    def forward(self, u: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return (self.user(u) * self.item(i)).sum(-1) + self.item_bias(i).squeeze(-1)


def bpr_matrix_factorization(path: str, epochs: int = 5, seed: int = 0) -> list[float]:
    """Implicit-feedback matrix factorization with the BPR pairwise loss: a positive item should
    score above a sampled negative. Users and items from 6 latent tastes."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    users, items = 300, 200
    ut = rng.integers(0, 6, users)
    it = rng.integers(0, 6, items)
    liked = [np.flatnonzero((it == ut[u]) | (rng.random(items) < 0.02)) for u in range(users)]
    pairs = np.array([(u, i) for u in range(users) for i in liked[u]])
    model = MF(users, items)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        rng.shuffle(pairs)
        for b in range(0, len(pairs), 256):
            u = torch.tensor(pairs[b : b + 256, 0])
            pos = torch.tensor(pairs[b : b + 256, 1])
            neg = torch.tensor(rng.integers(0, items, len(u)))
            diff = model(u, pos) - model(u, neg)
            loss = -F.logsigmoid(diff).mean() + 1e-4 * (model.user(u).pow(2).sum() / len(u))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: bpr {np.mean(losses[-20:]):.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- skip-gram


class SkipGram(nn.Module):
    def __init__(self, vocab: int, d: int = 24):
        super().__init__()
        self.inp = nn.Embedding(vocab, d)
        self.out = nn.Embedding(vocab, d)
        nn.init.uniform_(self.inp.weight, -0.5 / d, 0.5 / d)
        nn.init.zeros_(self.out.weight)

    def forward(self, center, context, negatives):
        v = self.inp(center)
        pos = (v * self.out(context)).sum(-1)
        neg = torch.bmm(self.out(negatives), v.unsqueeze(2)).squeeze(2)
        return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(1)).mean()


def skipgram_negative_sampling(path: str, steps: int = 800, seed: int = 0) -> list[float]:
    """word2vec on a synthetic corpus of 8 topics (Zipf words within a topic), window 2, 5
    negatives from the unigram^0.75 distribution, SGD with linear decay."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    vocab, topics = 400, 8
    words = []
    for _ in range(600):
        t = rng.integers(0, topics)
        ranks = np.minimum(rng.zipf(1.3, 20), vocab // topics) - 1
        words.extend((t * (vocab // topics) + ranks).tolist())
    corpus = np.array(words)
    counts = np.bincount(corpus, minlength=vocab).astype(float) ** 0.75
    noise = torch.tensor(counts / counts.sum())
    centers, contexts = [], []
    for off in (-2, -1, 1, 2):
        centers.append(corpus[max(0, -off) : len(corpus) - max(0, off)])
        contexts.append(corpus[max(0, off) : len(corpus) - max(0, -off)])
    centers_t = torch.tensor(np.concatenate(centers))
    contexts_t = torch.tensor(np.concatenate(contexts))
    model = SkipGram(vocab)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.LinearLR(opt, 1.0, 0.05, total_iters=steps)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, len(centers_t), (256,))
        neg = torch.multinomial(noise, 256 * 5, replacement=True).view(256, 5)
        loss = model(centers_t[idx], contexts_t[idx], neg)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(step, loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DQN


class Corridor:
    """A 1-D corridor of 10 cells: start in the middle, +1 at the right end, -0.1 at the left
    end, -0.01 per move, 30 moves at most. Observation: one-hot position."""

    def __init__(self, rng: random.Random, n: int = 10):
        self.rng, self.n = rng, n

    def reset(self) -> np.ndarray:
        self.pos, self.t = self.n // 2 + self.rng.randint(-2, 2), 0
        return self._obs()

    def _obs(self) -> np.ndarray:
        o = np.zeros(self.n, dtype=np.float32)
        o[self.pos] = 1
        return o

    def step(self, a: int):
        self.pos += 1 if a == 1 else -1
        self.t += 1
        if self.pos >= self.n - 1:
            return self._obs(), 1.0, True
        if self.pos <= 0:
            return self._obs(), -0.1, True
        return self._obs(), -0.01, self.t >= 30


def dqn_corridor(path: str, steps: int = 1500, seed: int = 0) -> list[float]:
    _seed(seed)
    rng = random.Random(seed)
    env = Corridor(rng)
    q = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    target = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    target.load_state_dict(q.state_dict())
    huber = nn.SmoothL1Loss()
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    buffer: list[tuple] = []
    hook = Hook(path)
    hook.register_module(q)
    hook.register_loss(huber)
    losses, returns, ep_ret = [], [], 0.0
    obs = env.reset()
    for t in range(steps):
        eps = max(0.05, 1 - t / 800)
        if rng.random() < eps:
            a = rng.randint(0, 1)
        else:
            with torch.no_grad():
                a = int(q(torch.from_numpy(obs)).argmax())
        nxt, r, done = env.step(a)
        buffer.append((obs, a, r, nxt, done))
        buffer = buffer[-5000:]
        ep_ret += r
        obs = nxt
        if done:
            returns.append(ep_ret)
            obs, ep_ret = env.reset(), 0.0
        if len(buffer) >= 200 and t % 2 == 0:
            batch = rng.sample(buffer, 64)
            o, a_, r_, n_, d_ = (torch.tensor(np.array(v)) for v in zip(*batch, strict=True))
            with torch.no_grad():
                y = r_.float() + 0.95 * target(n_).max(1).values * (1 - d_.float())
            loss = huber(q(o).gather(1, a_.long()[:, None]).squeeze(1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if t % 100 == 0:
            target.load_state_dict(q.state_dict())
    print("mean return first 20 episodes", np.mean(returns[:20]), "last 20", np.mean(returns[-20:]))
    hook.close()
    return losses


# ----------------------------------------------------------------------------- PPO


class TargetReach:
    """Move a point on a 2-D plane towards a random target with 4 actions; reward: the decrease
    of the distance; 20 moves per episode. Observation: the offset to the target."""

    moves = np.array([[0.1, 0], [-0.1, 0], [0, 0.1], [0, -0.1]], dtype=np.float32)

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def reset(self) -> np.ndarray:
        self.offset, self.t = self.rng.uniform(-1, 1, 2).astype(np.float32), 0
        return self.offset.copy()

    def step(self, a: int):
        before = np.linalg.norm(self.offset)
        self.offset = self.offset - self.moves[a]
        self.t += 1
        return self.offset.copy(), float(before - np.linalg.norm(self.offset)), self.t >= 20


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())
        self.pi = nn.Linear(64, 4)
        self.v = nn.Linear(64, 1)

    def forward(self, x):
        h = self.body(x)
        return self.pi(h), self.v(h).squeeze(-1)


def ppo_target_reach(path: str, iterations: int = 25, seed: int = 0) -> list[float]:
    """PPO-clip with GAE(0.95), 8 environments x 20 steps per rollout, 4 epochs of minibatches."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    envs = [TargetReach(rng) for _ in range(8)]
    model = ActorCritic()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, eps=1e-5)
    hook = Hook(path)
    hook.register_module(model)
    losses, ep_returns = [], []
    for it in range(iterations):
        obs = np.stack([e.reset() for e in envs])
        buf_o, buf_a, buf_lp, buf_r, buf_v = [], [], [], [], []
        for _ in range(20):
            with torch.no_grad():
                logits, v = model(torch.from_numpy(obs))
                dist = torch.distributions.Categorical(logits=logits)
                a = dist.sample()
            steps = [e.step(int(ai)) for e, ai in zip(envs, a, strict=True)]
            buf_o.append(torch.from_numpy(obs))
            buf_a.append(a)
            buf_lp.append(dist.log_prob(a))
            buf_v.append(v)
            buf_r.append(torch.tensor([s[1] for s in steps], dtype=torch.float32))
            obs = np.stack([s[0] for s in steps])
        rewards = torch.stack(buf_r)
        values = torch.stack(buf_v)
        adv = torch.zeros_like(rewards)
        last = torch.zeros(8)
        for t in reversed(range(20)):
            nxt = values[t + 1] if t < 19 else torch.zeros(8)
            delta = rewards[t] + 0.99 * nxt - values[t]
            last = delta + 0.99 * 0.95 * last
            adv[t] = last
        ret = (adv + values).flatten()
        o, a_, lp_old = torch.cat(buf_o), torch.cat(buf_a), torch.cat(buf_lp)
        adv = adv.flatten()
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        ep_returns.append(rewards.sum(0).mean().item())
        for _ in range(4):
            perm = torch.randperm(160)
            for mb in perm.split(40):
                logits, v = model(o[mb])
                dist = torch.distributions.Categorical(logits=logits)
                ratio = (dist.log_prob(a_[mb]) - lp_old[mb]).exp()
                pg = -torch.min(ratio * adv[mb], ratio.clamp(0.8, 1.2) * adv[mb]).mean()
                loss = pg + 0.5 * F.mse_loss(v, ret[mb]) - 0.01 * dist.entropy().mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                opt.step()
                losses.append(loss.item())
        if it % 5 == 0:
            print(f"iter {it}: mean episode return {ep_returns[-1]:.3f}")
    print("return first 3 iters", np.mean(ep_returns[:3]), "last 3", np.mean(ep_returns[-3:]))
    hook.close()
    return losses


# ----------------------------------------------------------------------------- distillation


def _spirals(rng: np.random.Generator, n: int, k: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    y = rng.integers(0, k, n)
    r = rng.uniform(0.1, 1.0, n)
    theta = y * 2 * np.pi / k + r * 3.5 + 0.15 * rng.standard_normal(n)
    x = np.stack([r * np.cos(theta), r * np.sin(theta)], 1) * 2
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y)


class DistillLoss(nn.Module):
    def __init__(self, temperature: float = 4.0, alpha: float = 0.7):
        super().__init__()
        self.t, self.alpha = temperature, alpha

    def forward(self, student_logits, teacher_logits, y):
        soft = F.kl_div(
            F.log_softmax(student_logits / self.t, 1),
            F.softmax(teacher_logits / self.t, 1),
            reduction="batchmean",
        )
        return self.alpha * soft * self.t**2 + (1 - self.alpha) * F.cross_entropy(student_logits, y)


def distillation_student(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """A big teacher is trained first (not recorded), then a small student learns from its
    temperature-softened outputs plus the labels (Hinton et al.)."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    x, y = _spirals(rng, 3000)
    teacher = nn.Sequential(nn.Linear(2, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 3))
    t_opt = torch.optim.Adam(teacher.parameters(), lr=3e-3)
    for _ in range(300):
        idx = torch.randint(0, 3000, (128,))
        t_loss = F.cross_entropy(teacher(x[idx]), y[idx])
        t_opt.zero_grad()
        t_loss.backward()
        t_opt.step()
    teacher.eval()
    print("teacher loss", t_loss.item())
    student = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3))
    if bug == "softmax_before_ce":
        student.append(nn.Softmax(dim=1))
    criterion = DistillLoss()
    opt = torch.optim.Adam(student.parameters(), lr=3e-3)
    hook = Hook(path)
    hook.register_module(student)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, 3000, (128,))
        with torch.no_grad():
            t_logits = teacher(x[idx])
        loss = criterion(student(x[idx]), t_logits, y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0:
            with torch.no_grad():
                acc = (student(x).argmax(1) == y).float().mean().item()
            print(f"step {step} loss {loss.item():.3f} acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- multi-task


class TwoHeads(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.cls_head = nn.Linear(64, 3)
        self.reg_head = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x):
        h = self.trunk(x)
        return self.cls_head(h), self.reg_head(h).squeeze(-1)


def multitask_two_heads(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    _seed(seed)
    rng = np.random.default_rng(seed)
    n, d = 3000, 12
    x = rng.standard_normal((n, d)).astype(np.float32)
    w = rng.standard_normal((d, 3))
    cls = (x @ w + 0.5 * rng.standard_normal((n, 3))).argmax(1)
    reg = (np.sin(x[:, 0]) + x[:, 1] * x[:, 2] + 0.1 * rng.standard_normal(n)).astype(np.float32)
    ds = TensorDataset(torch.tensor(x), torch.tensor(cls), torch.tensor(reg))
    loader = DataLoader(ds, batch_size=64, shuffle=True)
    model = TwoHeads(d)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-2)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        for xb, cb, rb in loader:
            if bug != "no_zero_grad":
                opt.zero_grad()
            logits, pred = model(xb)
            loss = F.cross_entropy(logits, cb) + 0.5 * F.mse_loss(pred, rb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        print(f"epoch {epoch} loss {np.mean(losses[-47:]):.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- transformer classifier


class EncoderClassifier(nn.Module):
    def __init__(self, vocab: int, d: int = 64, layers: int = 2, classes: int = 3, max_len: int = 32):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, classes)

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(x.size(1)))
        return self.fc(self.norm(self.encoder(h)).mean(1))


def transformer_encoder_classifier(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Which of three marker tokens occurs most often in a sequence of 24 random tokens: a pre-LN
    encoder, mean pooling, AdamW with linear warm-up then inverse square-root decay."""
    g = _seed(seed)
    vocab, length = 20, 24

    def batch(n):
        x = torch.randint(3, vocab, (n, length), generator=g)
        rates = 0.05 + 0.12 * torch.rand(n, 3, generator=g)
        rates[torch.arange(n), torch.randint(0, 3, (n,), generator=g)] += 0.12
        edges = rates.cumsum(1)
        u = torch.rand(n, length, generator=g)
        for k in range(3):
            lo = edges[:, k - 1 : k] if k else torch.zeros(n, 1)
            x[(u >= lo) & (u < edges[:, k : k + 1])] = k
        y = torch.stack([(x == k).sum(1) for k in range(3)], 1).argmax(1)
        return x, y

    model = EncoderClassifier(vocab)
    criterion = nn.CrossEntropyLoss()
    lr = 1e-3 * (100 if bug == "lr_x100" else 1)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = 40
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, math.sqrt(warmup / (s + 1)))
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        xb, yb = batch(32)
        opt.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step} lr {sched.get_last_lr()[0]:.2e} loss {loss.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- LSTM seq2seq


class Seq2Seq(nn.Module):
    def __init__(self, vocab: int, d: int = 64):
        super().__init__()
        self.emb = nn.Embedding(vocab + 1, d)  # + the start token
        self.encoder = nn.LSTM(d, d, batch_first=True)
        self.decoder = nn.LSTM(d, d, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def forward(self, src, tgt, teacher_forcing: float):
        _, state = self.encoder(self.emb(src))
        inp = torch.full((src.size(0), 1), self.out.out_features, dtype=torch.long)
        outs = []
        for t in range(tgt.size(1)):
            o, state = self.decoder(self.emb(inp), state)
            logits = self.out(o)
            outs.append(logits)
            use_truth = random.random() < teacher_forcing
            inp = tgt[:, t : t + 1] if use_truth else logits.argmax(-1)
        return torch.cat(outs, 1)


def lstm_seq2seq_teacher_forcing(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """Reverse a sequence of 7 digits; an LSTM encoder-decoder without attention, teacher forcing
    decayed from 1.0 to 0.5, gradient clipping at 1."""
    g = _seed(seed)
    vocab = 10
    model = Seq2Seq(vocab)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        src = torch.randint(0, vocab, (48, 7), generator=g)
        tgt = src.flip(1)
        tf = 1.0 - 0.5 * step / steps
        logits = model(src, tgt, tf)
        loss = criterion(logits.reshape(-1, vocab), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(step, f"tf={tf:.2f}", round(loss.item(), 3))
    hook.close()
    return losses


# ----------------------------------------------------------------------------- TCN forecaster


class CausalConv(nn.Module):
    def __init__(self, c_in: int, c_out: int, dilation: int):
        super().__init__()
        self.pad = 2 * dilation
        self.conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(c_in, c_out, 3, dilation=dilation))

    def forward(self, x):
        return self.conv(F.pad(x, (self.pad, 0)))


class TCN(nn.Module):
    def __init__(self, c: int = 24):
        super().__init__()
        self.inp = nn.Conv1d(1, c, 1)
        self.blocks = nn.ModuleList(CausalConv(c, c, d) for d in (1, 2, 4, 8))
        self.head = nn.Conv1d(c, 1, 1)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = h + F.relu(b(h))
        return self.head(h)


def tcn_forecast(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """One-step-ahead forecasting of noisy sums of sines with a dilated causal TCN (weight norm),
    L1 loss, Adam with an exponential decay."""
    g = _seed(seed)
    model = TCN()
    criterion = nn.L1Loss()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    if bug == "frozen_by_mistake":  # the model rebuilt after the optimizer (a config reload)
        model = TCN()
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.995)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    t = torch.arange(65).float()
    for step in range(steps):
        f = 0.05 + 0.25 * torch.rand(32, 2, 1, generator=g)
        ph = 6.28 * torch.rand(32, 2, 1, generator=g)
        series = torch.sin(f[:, 0] * t + ph[:, 0]) + 0.5 * torch.sin(f[:, 1] * t + ph[:, 1])
        series = series + 0.05 * torch.randn(series.shape, generator=g)
        x, y = series[:, None, :-1], series[:, None, 1:]
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(step, loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- 1-D CNN on signals


def ecg_like(g: torch.Generator, n: int, length: int = 96) -> tuple[torch.Tensor, torch.Tensor]:
    """Periodic spike trains: class 0 regular, class 1 irregular intervals, class 2 wide spikes."""
    y = torch.randint(0, 3, (n,), generator=g)
    x = 0.15 * torch.randn(n, length, generator=g)
    t = torch.arange(length).float()
    for b in range(n):
        pos = float(torch.rand(1, generator=g) * 10)
        while pos < length:
            width = 3.0 if y[b] == 2 else 1.0
            x[b] += torch.exp(-((t - pos) ** 2) / (2 * width**2))
            step = 14 + (float(torch.randn(1, generator=g)) * 5 if y[b] == 1 else 0.0)
            pos += max(6.0, step)
    return x.unsqueeze(1), y


def signal_cnn1d(path: str, epochs: int = 5, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    x, y = ecg_like(g, 1600)
    xtr, ytr, xva, yva = x[:1280], y[:1280], x[1280:], y[1280:]
    model = nn.Sequential(
        nn.Conv1d(1, 16, 7, padding=3), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(2),
        nn.Conv1d(16, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(2),
        nn.Conv1d(32, 32, 3, padding=1), nn.BatchNorm1d(32), nn.ReLU(), nn.AdaptiveMaxPool1d(1),
        nn.Flatten(), nn.Dropout(0.3), nn.Linear(32, 3),
    )  # fmt: skip
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size=32, shuffle=True, generator=g)
    for epoch in range(epochs):
        if bug == "train_in_eval_mode":
            model.eval()  # left in eval mode by the validation below, never switched back
        else:
            model.train()
        for xb, yb in loader:
            opt.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(xva).argmax(1) == yva).float().mean().item()
        print(f"epoch {epoch} train loss {np.mean(losses[-40:]):.3f} val acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- L-BFGS


def lbfgs_logistic(path: str, iterations: int = 40, seed: int = 0) -> list[float]:
    """Full-batch L-BFGS with a closure (strong Wolfe line search) on a small polynomial-feature
    logistic regression with an L2 penalty: the classic scipy-like style."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((800, 2))
    y = ((x[:, 0] ** 2 + 0.8 * x[:, 1] ** 2 + 0.3 * rng.standard_normal(800)) > 1.0).astype(np.float32)
    feats = np.concatenate([x, x**2, x[:, :1] * x[:, 1:]], 1)
    xt, yt = torch.tensor(feats, dtype=torch.float32), torch.tensor(y)
    model = nn.Linear(5, 1)
    criterion = nn.BCEWithLogitsLoss()
    opt = torch.optim.LBFGS(
        model.parameters(), lr=1.0, max_iter=5, history_size=10, line_search_fn="strong_wolfe"
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []

    def closure():
        opt.zero_grad()
        loss = criterion(model(xt).squeeze(1), yt) + 1e-3 * model.weight.pow(2).sum()
        loss.backward()
        return loss

    for it in range(iterations):
        loss = opt.step(closure)
        losses.append(loss.item())
        if it % 10 == 0:
            print(it, loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SWA + cyclic LR


def swa_cyclic(path: str, epochs: int = 8, swa_start: int = 5, seed: int = 0) -> list[float]:
    """SGD with a triangular cyclic learning rate, then stochastic weight averaging over the
    last epochs (SWALR), BatchNorm statistics recomputed for the averaged model at the end."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    x, y = _spirals(rng, 2400, k=4)
    x = torch.cat([x, torch.randn(len(x), 6) * 0.3], 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = nn.Sequential(
        nn.Linear(8, 96),
        nn.BatchNorm1d(96),
        nn.ReLU(),
        nn.Linear(96, 96),
        nn.BatchNorm1d(96),
        nn.ReLU(),
        nn.Linear(96, 4),
    )
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    cyc = torch.optim.lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=37)
    swa_model = torch.optim.swa_utils.AveragedModel(model)
    swa_sched = torch.optim.swa_utils.SWALR(opt, swa_lr=0.02)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            opt.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            opt.step()
            if epoch < swa_start:
                cyc.step()
            losses.append(loss.item())
        if epoch >= swa_start:
            swa_model.update_parameters(model)
            swa_sched.step()
        print(f"epoch {epoch} loss {np.mean(losses[-37:]):.3f}")
    torch.optim.swa_utils.update_bn(loader, swa_model)
    hook.close()
    return losses


# ----------------------------------------------------------------------------- bf16 + accumulation


def bf16_accumulate4_cnn(path: str, updates: int = 120, seed: int = 0, bug: str | None = None) -> list[float]:
    """A CNN on 8x8 images under CPU bf16 autocast, micro-batches of 16 accumulated 4 times,
    gradient clipping, OneCycleLR per optimizer update."""
    g = _seed(seed)
    x, y = _blobs8(g, 4000)
    x = (x - 0.3) / 0.4
    if bug == "shuffled_labels":
        y = y[torch.randperm(len(y), generator=g)]
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.ReLU(),
        nn.Flatten(), nn.Linear(32 * 16, 64), nn.ReLU(), nn.Linear(64, 4),
    )  # fmt: skip
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=updates)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    accum, losses, micro = 4, [], 0
    opt.zero_grad()
    while len(losses) < updates * accum:
        idx = torch.randint(0, len(x), (16,), generator=g)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = criterion(model(x[idx]), y[idx])
        (loss / accum).backward()
        losses.append(loss.item())
        micro += 1
        if micro % accum == 0:
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
        if micro % 100 == 0:
            print(micro, np.mean(losses[-100:]))
    hook.close()
    return losses


# ----------------------------------------------------------------------------- LSTM + plateau


def lstm_forecast_plateau(path: str, epochs: int = 12, seed: int = 0) -> list[float]:
    """Multi-step (12 ahead) forecasting of a seasonal series with trend from 48 past values: a
    2-layer LSTM, MSE, Adam with ReduceLROnPlateau on the validation loss."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    t = np.arange(6000)
    s = (
        np.sin(2 * np.pi * t / 24)
        + 0.5 * np.sin(2 * np.pi * t / 168)
        + 0.0002 * t
        + 0.2 * rng.standard_normal(len(t))
    )
    s = (s - s.mean()) / s.std()
    win = np.lib.stride_tricks.sliding_window_view(s, 60)[::5].astype(np.float32)
    x, y = torch.tensor(win[:, :48, None]), torch.tensor(win[:, 48:])
    n_tr = int(0.85 * len(x))

    class Forecaster(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(1, 32, num_layers=2, batch_first=True, dropout=0.1)
            self.head = nn.Linear(32, 12)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.head(out[:, -1])

    model = Forecaster()
    criterion = nn.MSELoss()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(n_tr)
        for i in range(0, n_tr, 64):
            idx = perm[i : i + 64]
            opt.zero_grad()
            loss = criterion(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val = criterion(model(x[n_tr:]), y[n_tr:]).item()
        plateau.step(val)
        print(
            f"epoch {epoch} train {np.mean(losses[-16:]):.4f} val {val:.4f} lr {opt.param_groups[0]['lr']:.1e}"
        )
    hook.close()
    return losses


_unet = healthy("unet_disks_dice_bce_adam", "segmentation", unet_segmentation)
_gcn = healthy("gcn_index_add_sbm_semi_supervised", "GNN", gcn_sbm)
_siamese = healthy("siamese_contrastive_pairs_8x8", "metric learning", siamese_pairs)
_distill = healthy("distillation_kl_student_spirals", "distillation", distillation_student)
_multitask = healthy("multitask_cls_reg_two_heads_adamw", "multi-task", multitask_two_heads)
_encoder = healthy("transformer_encoder_preln_warmup_invsqrt", "transformer", transformer_encoder_classifier)
_tcn = healthy("tcn_weightnorm_l1_forecast", "time series", tcn_forecast)
_signal = healthy("cnn1d_spike_trains_dropout_bn", "time series", signal_cnn1d)
_bf16 = healthy("bf16_autocast_accumulate4_onecycle_cnn", "precision", bf16_accumulate4_cnn)

PIPELINES = [
    healthy("ddpm_8x8_images_ema", "diffusion", ddpm_images),
    healthy("realnvp_flow_moons", "flow", realnvp_moons),
    healthy("conv_vae_kl_annealing", "VAE", vae_kl_annealing),
    healthy("denoising_autoencoder_rmsprop", "autoencoder", denoising_autoencoder),
    healthy("mdn_inverse_sine", "regression", mdn_inverse_sine),
    healthy("moco_queue_momentum_encoder", "contrastive", moco_queue),
    healthy("bpr_matrix_factorization", "recommender", bpr_matrix_factorization),
    healthy("skipgram_negative_sampling", "embeddings", skipgram_negative_sampling),
    healthy("dqn_corridor_target_network", "RL", dqn_corridor),
    healthy("ppo_clip_gae_target_reach", "RL", ppo_target_reach),
    healthy("lstm_seq2seq_teacher_forcing_decay", "seq2seq", lstm_seq2seq_teacher_forcing),
    healthy("lbfgs_logistic_polynomial", "tabular", lbfgs_logistic),
    healthy("swa_cyclic_lr_bn_mlp", "tabular", swa_cyclic),
    healthy("lstm_forecast_reduce_on_plateau", "time series", lstm_forecast_plateau),
    _unet,
    _gcn,
    _siamese,
    _distill,
    _multitask,
    _encoder,
    _tcn,
    _signal,
    _bf16,
    buggy(_unet, "inputs_x255"),
    buggy(_gcn, "shuffled_labels"),
    buggy(_siamese, "dead_relu_init"),
    buggy(_distill, "softmax_before_ce"),
    buggy(_multitask, "no_zero_grad"),
    buggy(_encoder, "lr_x100"),
    buggy(_tcn, "frozen_by_mistake"),
    buggy(_signal, "train_in_eval_mode"),
    buggy(_bf16, "shuffled_labels"),
]
