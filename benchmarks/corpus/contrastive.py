"""Contrastive learning: SimCLR (NT-Xent over two augmented views) on synthetic images and
signals, and a triplet-margin embedding with in-batch hard negatives."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import _data, buggy, healthy

torch.set_num_threads(1)


class NTXent(nn.Module):
    """SimCLR's normalized-temperature cross-entropy over the 2N views of a batch."""

    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature

    def forward(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        z = F.normalize(torch.cat([z1, z2]), dim=1)
        sim = z @ z.T / self.temperature
        n = z1.size(0)
        sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
        targets = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
        return F.cross_entropy(sim, targets)


def _augment(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Random shifts, horizontal flips, contrast and additive noise on a batch of images."""
    n = x.size(0)
    flip = torch.rand(n, generator=g) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(-1), x)
    dy, dx = torch.randint(-2, 3, (2,), generator=g).tolist()
    x = torch.roll(x, (dy, dx), (2, 3))
    x = x * (0.7 + 0.6 * torch.rand(n, 1, 1, 1, generator=g))
    return x + 0.2 * torch.randn(x.shape, generator=g)


class ConvEncoder(nn.Module):
    def __init__(self, width: int, out: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )  # fmt: skip
        self.projection = nn.Sequential(nn.Linear(2 * width, 2 * width), nn.ReLU(), nn.Linear(2 * width, out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection(self.features(x))


def simclr_images(
    path: str,
    width: int = 16,
    temperature: float = 0.5,
    optimizer: str = "sgd",
    lr: float = 0.1,
    batch: int = 64,
    steps: int = 200,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """SimCLR on shape images: a CNN encoder and an MLP projection head, two augmented views
    per image, NT-Xent; SGD with momentum and cosine decay (or Adam)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    model = ConvEncoder(width, 32)
    loss_fn = NTXent(temperature)
    lr = lr * (100 if bug == "lr_x100" else 1)
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    model.train()
    for _ in range(steps):
        x, _ = _data.shapes(g, batch, classes=6)
        opt.zero_grad()
        loss = loss_fn(model(_augment(x, g)), model(_augment(x, g)))
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


def simclr_signals(
    path: str,
    d: int = 32,
    temperature: float = 0.2,
    lr: float = 1e-3,
    batch: int = 128,
    steps: int = 250,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """SimCLR on 1-D signals (mixtures of a few sinusoids): views by random crop-and-resize,
    masking and jitter; an MLP encoder with LayerNorm, AdamW."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    t = torch.linspace(0, 1, 64)

    def signals(n: int) -> torch.Tensor:
        f = torch.randint(1, 8, (n, 3), generator=g).float()
        ph = torch.rand(n, 3, generator=g) * 6.28
        a = torch.rand(n, 3, generator=g)
        return (a[:, :, None] * torch.sin(6.28 * f[:, :, None] * t + ph[:, :, None])).sum(1)

    def view(x: torch.Tensor) -> torch.Tensor:
        start = int(torch.randint(0, 16, (1,), generator=g))
        x = F.interpolate(x[:, None, start : start + 48], size=64, mode="linear", align_corners=False)[:, 0]
        mask = torch.rand(x.shape, generator=g) < 0.1
        return x.masked_fill(mask, 0.0) + 0.1 * torch.randn(x.shape, generator=g)

    model = nn.Sequential(
        nn.Linear(64, 128), nn.LayerNorm(128), nn.GELU(), nn.Linear(128, 128), nn.LayerNorm(128), nn.GELU(),
        nn.Linear(128, d),
    )  # fmt: skip
    loss_fn = NTXent(temperature)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for _ in range(steps):
        x = signals(batch)
        opt.zero_grad()
        loss = loss_fn(model(view(x)), model(view(x)))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


def triplet(
    path: str,
    margin: float = 0.5,
    lr: float = 1e-3,
    classes: int = 10,
    steps: int = 250,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """Metric learning with nn.TripletMarginLoss: P classes x K samples per batch, the hardest
    positive and negative of each anchor mined in the batch (batch-hard)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    centers = torch.randn(classes, 20, generator=g) * 1.2
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))
    loss_fn = nn.TripletMarginLoss(margin=margin)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for _ in range(steps):
        cls = torch.randperm(classes, generator=g)[:8].repeat_interleave(4)
        x = centers[cls] + torch.randn(len(cls), 20, generator=g)
        opt.zero_grad()
        e = F.normalize(model(x), dim=1)
        with torch.no_grad():
            dist = torch.cdist(e, e)
            same = cls[:, None] == cls[None, :]
            pos = dist.masked_fill(~same, -1).argmax(1)
            neg = dist.masked_fill(same, float("inf")).argmin(1)
        loss = loss_fn(e, e[pos], e[neg])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


_simclr = healthy("simclr_images_sgd_cosine", "contrastive", simclr_images)

PIPELINES = [
    _simclr,
    healthy(
        "simclr_images_adam_t01",
        "contrastive",
        simclr_images,
        optimizer="adam",
        lr=1e-3,
        temperature=0.1,
        width=8,
        seed=1,
    ),
    healthy("simclr_signals_layernorm", "contrastive", simclr_signals),
    healthy("triplet_batch_hard", "contrastive", triplet),
    healthy("triplet_batch_hard_margin02", "contrastive", triplet, margin=0.2, classes=20, lr=3e-4, seed=1),
    buggy(_simclr, "lr_x100"),
]
