"""Small image classifiers on synthetic shape images: CNNs with BatchNorm or GroupNorm,
depthwise-separable convolutions, a residual net, a tiny ViT; augmentation, label smoothing,
evaluation passes; SGD, Adam, AdamW, RMSprop with warm-up, cosine restarts, step decay, OneCycle."""

from __future__ import annotations

import math

import torch
from torch import nn

from mldbg.torch import Hook

from . import _data, buggy, healthy

torch.set_num_threads(1)


def cnn(width: int, classes: int, norm: str, dropout: float) -> nn.Sequential:
    def block(c_in: int, c_out: int) -> list[nn.Module]:
        n = (
            nn.BatchNorm2d(c_out)
            if norm == "batch"
            else nn.GroupNorm(4, c_out)
            if norm == "group"
            else nn.Identity()
        )
        return [nn.Conv2d(c_in, c_out, 3, padding=1), n, nn.ReLU(), nn.MaxPool2d(2)]

    return nn.Sequential(
        *block(1, width), *block(width, 2 * width), nn.Flatten(), nn.Dropout(dropout),
        nn.Linear(2 * width * 9, 64), nn.ReLU(), nn.Linear(64, classes),
    )  # fmt: skip


class SeparableBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.depthwise = nn.Conv2d(c_in, c_in, 3, padding=1, groups=c_in, bias=False)
        self.pointwise = nn.Conv2d(c_in, c_out, 1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        self.act = nn.ReLU6()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.pointwise(self.depthwise(x))))


class ResidualBlock(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        nn.init.zeros_(self.bn2.weight)  # "zero-init the last BN of each block" (Goyal et al.)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(x + self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))))


class PatchViT(nn.Module):
    def __init__(self, classes: int, d: int = 48, patch: int = 3, layers: int = 2):
        super().__init__()
        self.embed = nn.Conv2d(1, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, 17, d) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d, 4, 2 * d, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x).flatten(2).transpose(1, 2)
        h = torch.cat([self.cls.expand(len(h), -1, -1), h], 1) + self.pos
        return self.head(self.norm(self.encoder(h))[:, 0])


def _model(arch: str, classes: int, norm: str, dropout: float, width: int) -> nn.Module:
    if arch == "cnn":
        return cnn(width, classes, norm, dropout)
    if arch == "separable":
        return nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU6(),
            SeparableBlock(width, 2 * width), nn.MaxPool2d(2), SeparableBlock(2 * width, 4 * width),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * width, classes),
        )  # fmt: skip
    if arch == "resnet":
        return nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            ResidualBlock(width), ResidualBlock(width), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, classes),
        )  # fmt: skip
    return PatchViT(classes)


def image_classifier(
    path: str,
    arch: str = "cnn",
    classes: int = 6,
    norm: str = "batch",
    dropout: float = 0.0,
    width: int = 8,
    optimizer: str = "sgd",
    lr: float = 0.05,
    schedule: str = "warmup_cosine",
    label_smoothing: float = 0.0,
    augment: bool = False,
    batch: int = 64,
    epochs: int = 5,
    n: int = 2400,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    x, y = _data.shapes(g, n + 400, classes)
    if bug == "inputs_x255":  # pixels left in 0..255: the normalization forgotten
        x = (x * 0.45 + 0.25).clamp(0, 1) * 255
    xtr, ytr, xva, yva = x[:n], y[:n], x[n:], y[n:]
    model = _model(arch, classes, norm, dropout, width)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=label_smoothing)
    lr = lr * (100 if bug == "lr_x100" else 1)
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
    elif optimizer == "rmsprop":
        opt = torch.optim.RMSprop(model.parameters(), lr=lr, momentum=0.9)
    elif optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    per_epoch = n // batch
    total = epochs * per_epoch
    if schedule == "warmup_cosine":
        warm = per_epoch
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt,
            lambda s: (
                (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / (total - warm)))
            ),
        )
    elif schedule == "restarts":
        sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=per_epoch, T_mult=2)
    elif schedule == "step":
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, [total // 2, 3 * total // 4], 0.1)
    else:
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=total)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(n, generator=g)
        for i in range(per_epoch):
            idx = perm[i * batch : (i + 1) * batch]
            xb, yb = xtr[idx], ytr[idx]
            if augment:
                flip = torch.rand(len(xb), generator=g) < 0.5
                xb = torch.where(flip[:, None, None, None], xb.flip(-1), xb)
            if bug != "no_zero_grad":
                opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            for i in range(0, len(xva), 200):
                loss_fn(model(xva[i : i + 200]), yva[i : i + 200])
    hook.close()
    return losses


_cnn = healthy("cnn_batchnorm_sgd_warmup_cosine", "vision", image_classifier)

PIPELINES = [
    _cnn,
    healthy(
        "cnn_groupnorm_adam_restarts",
        "vision",
        image_classifier,
        norm="group",
        optimizer="adam",
        lr=2e-3,
        schedule="restarts",
        epochs=7,
        seed=1,
    ),
    healthy(
        "cnn_dropout_rmsprop_step",
        "vision",
        image_classifier,
        norm="none",
        dropout=0.3,
        optimizer="rmsprop",
        lr=5e-4,
        schedule="step",
        seed=2,
    ),
    healthy(
        "cnn_augment_label_smoothing_onecycle",
        "vision",
        image_classifier,
        augment=True,
        label_smoothing=0.1,
        schedule="onecycle",
        lr=0.1,
        width=12,
        seed=3,
    ),
    healthy(
        "separable_cnn_adamw_cosine",
        "vision",
        image_classifier,
        arch="separable",
        optimizer="adamw",
        lr=3e-3,
        seed=4,
    ),
    healthy(
        "resnet_zero_init_residual_sgd_step",
        "vision",
        image_classifier,
        arch="resnet",
        lr=0.1,
        schedule="step",
        width=12,
        epochs=4,
        seed=5,
    ),
    healthy(
        "vit_patches_adamw_warmup",
        "vision",
        image_classifier,
        arch="vit",
        optimizer="adamw",
        lr=1e-3,
        classes=4,
        epochs=4,
        n=1600,
        seed=6,
    ),
    buggy(_cnn, "inputs_x255"),
    buggy(_cnn, "lr_x100"),
    buggy(_cnn, "no_zero_grad"),
]
