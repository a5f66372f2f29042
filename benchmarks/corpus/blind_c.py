"""A blind held-out set (issue 26), part c: more kinds the earlier sets do not hold, written without
ever running mldbg's rules on them.

Vision and other sensors: MLP-Mixer (bf16 autocast on CPU), a ConvNeXt-style net (layer scale,
drop path, weight-decay groups, LinearLR warm-up into cosine), DenseNet-BC, an R(2+1)D video net,
PointNet with an input T-Net, a RetinaNet-style dense head with sigmoid focal loss, pix2pix with a
PatchGAN. Sets and graphs: Deep Sets, a Set Transformer, a Perceiver, GAT on a dense adjacency
with early stopping. Density models: NICE, MADE, rectified flow, a coordinate MLP with Gaussian
Fourier features. Self-supervised: VICReg. Sequences and text: WaveNet on mu-law audio, a
PatchTST-style forecaster with RevIN and OneCycleLR, GRU-D on irregular series, T5 span
corruption with Adafactor, ELECTRA, a hierarchical attention network, the torchtext EmbeddingBag
text classifier, deep knowledge tracing. Others: attention-based multiple-instance learning,
prototypical networks, GloVe, NeuMF, ListNet, curriculum learning, evidential regression, a
Hamiltonian neural network, LISTA, a neural additive model, DCN-V2, Houlsby adapters on a frozen
(pre-trained in the script) transformer, C51 distributional Q-learning.

Every script is written the way its kind is usually written (its published defaults, its loop
style), with the README's two lines. `SPLIT = BLIND2` puts them all in the `blind2` set.
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

from . import BLIND2, buggy, healthy

SPLIT = BLIND2

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 11)


def _gratings(
    g: torch.Generator, n: int, size: int = 16, classes: int = 4, channels: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 images (n, channels, size, size) of oriented sine gratings: the class is the
    orientation; phase, frequency, colour and contrast are random, with pixel noise."""
    y = torch.randint(0, classes, (n,), generator=g)
    theta = y.float() * math.pi / classes + 0.15 * torch.randn(n, generator=g)
    freq = 0.5 + 0.4 * torch.rand(n, generator=g)
    phase = 2 * math.pi * torch.rand(n, generator=g)
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    proj = xx[None] * torch.cos(theta)[:, None, None] + yy[None] * torch.sin(theta)[:, None, None]
    wave = torch.sin(freq[:, None, None] * proj + phase[:, None, None])
    contrast = 0.5 + 0.5 * torch.rand(n, 1, 1, generator=g)
    color = 0.4 + 0.6 * torch.rand(n, channels, 1, 1, generator=g)
    img = 0.5 + 0.45 * (wave * contrast)[:, None] * color
    img = img + 0.08 * torch.randn(img.shape, generator=g)
    return (img.clamp(0, 1) * 255).round().to(torch.uint8), y


def _token_stream(g: torch.Generator, n: int, length: int, vocab: int) -> torch.Tensor:
    """Token sequences from a sparse random bigram model (each token has 3 likely successors),
    so a model can learn them; ids 0..3 are left free for special tokens."""
    base = 4
    succ = torch.randint(base, vocab, (vocab, 3), generator=g)
    out = torch.empty(n, length, dtype=torch.long)
    cur = torch.randint(base, vocab, (n,), generator=g)
    for t in range(length):
        out[:, t] = cur
        pick = torch.randint(0, 3, (n,), generator=g)
        nxt = succ[cur, pick]
        rnd = torch.randint(base, vocab, (n,), generator=g)
        cur = torch.where(torch.rand(n, generator=g) < 0.1, rnd, nxt)
    return out


# ----------------------------------------------------------------------------- MLP-Mixer


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, dim: int, token_hidden: int, channel_hidden: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.token_mlp = nn.Sequential(
            nn.Linear(tokens, token_hidden), nn.GELU(), nn.Linear(token_hidden, tokens)
        )
        self.norm2 = nn.LayerNorm(dim)
        self.channel_mlp = nn.Sequential(
            nn.Linear(dim, channel_hidden), nn.GELU(), nn.Linear(channel_hidden, dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class MlpMixer(nn.Module):
    def __init__(self, image: int = 16, patch: int = 4, dim: int = 64, depth: int = 4, classes: int = 4):
        super().__init__()
        tokens = (image // patch) ** 2
        self.stem = nn.Conv2d(1, dim, patch, patch)
        self.blocks = nn.Sequential(*[MixerBlock(tokens, dim, 32, 4 * dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x).flatten(2).transpose(1, 2)
        x = self.norm(self.blocks(x))
        return self.head(x.mean(1))


def mlp_mixer_bf16(path: str, epochs: int = 7, seed: int = 0, bug: str | None = None) -> list[float]:
    """Mixer-S-style recipe scaled down: AdamW(1e-3, wd 0.05), linear warm-up then cosine per
    step, label smoothing 0.1, clip 1.0, bf16 autocast on CPU, zero-init head."""
    g = _seed(seed)
    x, y = _gratings(g, 1536 + 512)
    x = (x.float() / 255 - 0.5) / 0.25
    train = DataLoader(TensorDataset(x[:1536], y[:1536]), batch_size=64, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(x[1536:], y[1536:]), batch_size=256)
    model = MlpMixer()
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    total = epochs * len(train)
    warmup = total // 10
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
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = criterion(model(xb), yb)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        model.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            for xb, yb in val:
                correct += (model(xb).argmax(1) == yb).sum().item()
        print(f"epoch {epoch} loss {losses[-1]:.3f} val acc {correct / 512:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ConvNeXt


class DropPath(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)


class LayerNorm2d(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int, drop_path: float, layer_scale: float = 1e-6):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(layer_scale * torch.ones(dim))
        self.drop_path = DropPath(drop_path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dwconv(x).permute(0, 2, 3, 1)
        h = self.pwconv2(self.act(self.pwconv1(self.norm(h)))) * self.gamma
        return x + self.drop_path(h.permute(0, 3, 1, 2))


class TinyConvNeXt(nn.Module):
    def __init__(self, dims: tuple[int, int] = (32, 64), depths: tuple[int, int] = (2, 2), classes: int = 4):
        super().__init__()
        rates = torch.linspace(0, 0.1, sum(depths)).tolist()
        self.stem = nn.Sequential(nn.Conv2d(3, dims[0], 2, 2), LayerNorm2d(dims[0], eps=1e-6))
        self.stage1 = nn.Sequential(*[ConvNeXtBlock(dims[0], rates[i]) for i in range(depths[0])])
        self.down = nn.Sequential(LayerNorm2d(dims[0], eps=1e-6), nn.Conv2d(dims[0], dims[1], 2, 2))
        self.stage2 = nn.Sequential(*[ConvNeXtBlock(dims[1], rates[depths[0] + i]) for i in range(depths[1])])
        self.norm = nn.LayerNorm(dims[1], eps=1e-6)
        self.head = nn.Linear(dims[1], classes)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.trunc_normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stage2(self.down(self.stage1(self.stem(x))))
        return self.head(self.norm(x.mean((2, 3))))


def convnext_warmup_cosine(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """ConvNeXt recipe: AdamW(wd 0.05, none on norms/biases/layer scale), LinearLR warm-up
    chained into CosineAnnealingLR by SequentialLR, label smoothing 0.1, drop path 0.1."""
    g = _seed(seed)
    x, y = _gratings(g, 1024 + 256, size=12, channels=3)
    x = x.float() / 255
    mean, std = x[:1024].mean((0, 2, 3), keepdim=True), x[:1024].std((0, 2, 3), keepdim=True)
    x = (x - mean) / std
    train = DataLoader(TensorDataset(x[:1024], y[:1024]), batch_size=32, shuffle=True, generator=g)
    model = TinyConvNeXt()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 or name.endswith("gamma") else decay).append(p)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}], lr=2e-3
    )
    total = epochs * len(train)
    warm = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=total // 8)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total - total // 8, eta_min=1e-5)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warm, cos], milestones=[total // 8])
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            loss = criterion(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x[1024:]).argmax(1) == y[1024:]).float().mean().item()
        print(f"epoch {epoch} train loss {np.mean(losses[-len(train) :]):.3f} val acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DenseNet-BC


class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.BatchNorm2d(cin), nn.ReLU(inplace=True), nn.Conv2d(cin, 4 * growth, 1, bias=False),
            nn.BatchNorm2d(4 * growth), nn.ReLU(inplace=True), nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.net(x)], 1)


class DenseNetBC(nn.Module):
    def __init__(self, growth: int = 8, layers: int = 3, blocks: int = 2, classes: int = 4):
        super().__init__()
        c = 2 * growth
        mods: list[nn.Module] = [nn.Conv2d(1, c, 3, padding=1, bias=False)]
        for b in range(blocks):
            for _ in range(layers):
                mods.append(DenseLayer(c, growth))
                c += growth
            if b < blocks - 1:
                out = c // 2  # compression 0.5
                mods += [
                    nn.BatchNorm2d(c),
                    nn.ReLU(inplace=True),
                    nn.Conv2d(c, out, 1, bias=False),
                    nn.AvgPool2d(2),
                ]
                c = out
        mods += [nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.features = nn.Sequential(*mods)
        self.classifier = nn.Linear(c, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def densenet_bc_nesterov(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """DenseNet-BC recipe (growth 8 here): SGD(0.1, momentum 0.9, nesterov, wd 1e-4), lr / 10 at 50% and
    75% of training. The images arrive as uint8 and are scaled and normalized in the loop."""
    g = _seed(seed)
    images, labels = _gratings(g, 1024 + 256, size=12)
    train = DataLoader(TensorDataset(images[:1024], labels[:1024]), batch_size=32, shuffle=True, generator=g)
    model = DenseNetBC()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [epochs // 2, epochs * 3 // 4], gamma=0.1)
    criterion = nn.CrossEntropyLoss()

    def prep(u8: torch.Tensor) -> torch.Tensor:
        xf = u8.float() if bug == "inputs_x255" else u8.float() / 255
        return (xf - 0.5) / 0.25

    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            optimizer.zero_grad()
            loss = criterion(model(prep(xb)), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            acc = (model(prep(images[1024:])).argmax(1) == labels[1024:]).float().mean().item()
        print(f"epoch {epoch} loss {losses[-1]:.3f} acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- R(2+1)D video


def _moving_blobs(
    g: torch.Generator, n: int, frames: int = 8, size: int = 16
) -> tuple[torch.Tensor, torch.Tensor]:
    """Clips (n, 1, frames, size, size) of a Gaussian blob moving right, left, down or up."""
    y = torch.randint(0, 4, (n,), generator=g)
    step = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])[y]
    speed = 0.8 + 0.6 * torch.rand(n, 1, generator=g)
    start = size / 4 + size / 2 * torch.rand(n, 2, generator=g) - step * speed * frames / 2 + step * size / 4
    t = torch.arange(frames).float()
    pos = start[:, None] + step[:, None] * speed[:, None] * t[None, :, None]  # n, T, 2
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    d2 = (xx - pos[..., 0, None, None]) ** 2 + (yy - pos[..., 1, None, None]) ** 2
    clips = torch.exp(-d2 / 4.0) + 0.1 * torch.randn(n, frames, size, size, generator=g)
    return clips[:, None], y


class R2Plus1D(nn.Module):
    def __init__(self, classes: int = 4):
        super().__init__()

        def block(cin: int, cout: int, mid: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv3d(cin, mid, (1, 3, 3), padding=(0, 1, 1), bias=False), nn.BatchNorm3d(mid), nn.ReLU(inplace=True),
                nn.Conv3d(mid, cout, (3, 1, 1), padding=(1, 0, 0), bias=False), nn.BatchNorm3d(cout), nn.ReLU(inplace=True),
            )  # fmt: skip

        self.features = nn.Sequential(
            block(1, 16, 12), nn.MaxPool3d((1, 2, 2)), block(16, 32, 24), nn.MaxPool3d(2), block(32, 32, 32),
            nn.AdaptiveAvgPool3d(1), nn.Flatten(),
        )  # fmt: skip
        self.fc = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


def r2plus1d_video(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    clips, y = _moving_blobs(g, 832 + 128, frames=6, size=12)
    train = DataLoader(TensorDataset(clips[:832], y[:832]), batch_size=32, shuffle=True, generator=g)
    model = R2Plus1D()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-5)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            acc = (model(clips[832:]).argmax(1) == y[832:]).float().mean().item()
        print(f"epoch {epoch} loss {losses[-1]:.3f} val acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- PointNet


def _point_clouds(g: torch.Generator, n: int, points: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 3, points): samples on a sphere, a cube's surface, a cylinder or a cone, randomly
    rotated about z, scaled and jittered."""
    y = torch.randint(0, 4, (n,), generator=g)
    u = torch.rand(n, points, generator=g)
    v = torch.rand(n, points, generator=g)
    phi = 2 * math.pi * u
    sphere = torch.stack(
        [
            torch.sqrt(1 - (2 * v - 1) ** 2) * torch.cos(phi),
            torch.sqrt(1 - (2 * v - 1) ** 2) * torch.sin(phi),
            2 * v - 1,
        ],
        -1,
    )
    face = torch.randint(0, 6, (n, points), generator=g)
    a, b = 2 * u - 1, 2 * v - 1
    sign = torch.where(face % 2 == 0, 1.0, -1.0)
    axis = face // 2
    cube = torch.stack(
        [torch.where(axis == 0, sign, a), torch.where(axis == 1, sign, torch.where(axis == 0, a, b)),
         torch.where(axis == 2, sign, b)], -1,
    )  # fmt: skip
    cylinder = torch.stack([torch.cos(phi), torch.sin(phi), 2 * v - 1], -1)
    cone = torch.stack([(1 - v) * torch.cos(phi), (1 - v) * torch.sin(phi), 2 * v - 1], -1)
    shapes = torch.stack([sphere, cube, cylinder, cone], 1)[torch.arange(n), y]
    ang = 2 * math.pi * torch.rand(n, generator=g)
    c, s = torch.cos(ang), torch.sin(ang)
    rot = torch.zeros(n, 3, 3)
    rot[:, 0, 0], rot[:, 0, 1], rot[:, 1, 0], rot[:, 1, 1], rot[:, 2, 2] = c, -s, s, c, 1
    pts = shapes @ rot.transpose(1, 2) * (0.8 + 0.4 * torch.rand(n, 1, 1, generator=g))
    pts = pts + 0.02 * torch.randn(pts.shape, generator=g)
    return pts.transpose(1, 2).contiguous(), y


class TNet(nn.Module):
    def __init__(self, k: int = 3):
        super().__init__()
        self.k = k
        self.conv = nn.Sequential(
            nn.Conv1d(k, 32, 1),
            nn.BatchNorm1d(32),
            nn.ReLU(),
            nn.Conv1d(32, 64, 1),
            nn.BatchNorm1d(64),
            nn.ReLU(),
        )
        self.fc = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, k * k))
        nn.init.zeros_(self.fc[-1].weight)
        nn.init.zeros_(self.fc[-1].bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.fc(self.conv(x).max(2).values).view(-1, self.k, self.k)
        return m + torch.eye(self.k)


class PointNet(nn.Module):
    def __init__(self, classes: int = 4):
        super().__init__()
        self.tnet = TNet(3)
        self.mlp = nn.Sequential(
            nn.Conv1d(3, 32, 1), nn.BatchNorm1d(32), nn.ReLU(), nn.Conv1d(32, 64, 1), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Conv1d(64, 128, 1), nn.BatchNorm1d(128), nn.ReLU(),
        )  # fmt: skip
        self.head = nn.Sequential(
            nn.Linear(128, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, classes)
        )

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        trans = self.tnet(x)
        x = torch.bmm(trans, x)
        return self.head(self.mlp(x).max(2).values), trans


def pointnet_tnet(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """PointNet classification recipe: Adam(1e-3), StepLR halving, dropout 0.3, NLL of
    log-softmax plus 0.001 x the transform's orthogonality regularizer."""
    g = _seed(seed)
    pts, y = _point_clouds(g, 1024 + 256)
    train = DataLoader(
        TensorDataset(pts[:1024], y[:1024]), batch_size=32, shuffle=True, generator=g, drop_last=True
    )
    model = PointNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999))
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            if bug != "no_zero_grad":
                optimizer.zero_grad()
            logits, trans = model(xb)
            reg = (trans @ trans.transpose(1, 2) - torch.eye(3)).norm(dim=(1, 2)).mean()
            loss = F.nll_loss(F.log_softmax(logits, 1), yb) + 0.001 * reg
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            acc = (model(pts[1024:])[0].argmax(1) == y[1024:]).float().mean().item()
        print(f"epoch {epoch} loss {losses[-1]:.3f} test acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Deep Sets


class DeepSets(nn.Module):
    def __init__(self, d_in: int = 10, hidden: int = 64, dead_init: bool = False):
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.rho = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        if dead_init:  # "start the set features sparse": a large negative bias on phi's layers
            for m in self.phi:
                if isinstance(m, nn.Linear):
                    nn.init.constant_(m.bias, -4.0)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.phi(x) * mask[..., None]
        return self.rho(h.sum(1)).squeeze(-1)


def deep_sets_digit_sum(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """Deep Sets' digit-sum task on noisy one-hot 'digits': sets of 2-10 elements, sum pooling,
    L1 loss, Adam(1e-3)."""
    g = _seed(seed)
    model = DeepSets(dead_init=bug == "dead_relu_init")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.L1Loss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        digits = torch.randint(0, 10, (64, 10), generator=g)
        sizes = torch.randint(2, 11, (64,), generator=g)
        mask = (torch.arange(10)[None] < sizes[:, None]).float()
        x = F.one_hot(digits, 10).float() + 0.1 * torch.randn(64, 10, 10, generator=g)
        target = (digits.float() * mask).sum(1)
        optimizer.zero_grad()
        loss = criterion(model(x, mask), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step} L1 {loss.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Set Transformer


class MAB(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln0 = nn.LayerNorm(dim)
        self.ln1 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))

    def forward(self, q: torch.Tensor, k: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
        h = self.ln0(q + self.attn(q, k, k, key_padding_mask=pad, need_weights=False)[0])
        return self.ln1(h + self.ff(h))


class SetTransformer(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4, inducing: int = 8):
        super().__init__()
        self.embed = nn.Linear(1, dim)
        self.inducing = nn.Parameter(torch.randn(1, inducing, dim) * dim**-0.5)
        self.isab_a = MAB(dim, heads)
        self.isab_b = MAB(dim, heads)
        self.seed = nn.Parameter(torch.randn(1, 1, dim) * dim**-0.5)
        self.pma = MAB(dim, heads)
        self.out = nn.Linear(dim, 1)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        ind = self.isab_a(
            self.inducing.expand(len(x), -1, -1), h, pad
        )  # ISAB: inducing points attend to the set
        h = self.isab_b(h, ind)  # and the set attends back to them
        return self.out(self.pma(self.seed.expand(len(x), -1, -1), h, pad)).view(-1)


def set_transformer_max(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Set Transformer's max-regression toy with an ISAB encoder and PMA pooling, L1 loss,
    Adam(1e-3), padded sets of 4-16 reals."""
    g = _seed(seed)
    model = SetTransformer()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        sizes = torch.randint(4, 17, (64,), generator=g)
        pad = torch.arange(16)[None] >= sizes[:, None]
        x = torch.rand(64, 16, 1, generator=g) * 10
        target = x.squeeze(-1).masked_fill(pad, -1.0).max(1).values
        optimizer.zero_grad()
        loss = F.l1_loss(model(x, pad), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step} L1 {loss.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- GAT


def _sbm_graph(g: torch.Generator, n: int = 160, k: int = 4, d: int = 32) -> tuple[torch.Tensor, ...]:
    y = torch.arange(n) % k
    same = y[:, None] == y[None]
    prob = torch.where(same, torch.tensor(0.1), torch.tensor(0.01))
    adj = (torch.rand(n, n, generator=g) < prob).float().triu(1)
    adj = adj + adj.T + torch.eye(n)
    centers = torch.randn(k, d, generator=g)
    feats = (0.35 * centers[y] + torch.randn(n, d, generator=g) > 0.6).float()  # sparse binary bag of words
    feats = feats / feats.sum(1, keepdim=True).clamp(min=1)
    return adj, feats, y


class GraphAttentionLayer(nn.Module):
    def __init__(self, cin: int, cout: int, heads: int, dropout: float, concat: bool = True):
        super().__init__()
        self.heads, self.cout, self.concat, self.dropout = heads, cout, concat, dropout
        self.W = nn.Linear(cin, heads * cout, bias=False)
        self.a_src = nn.Parameter(torch.empty(heads, cout))
        self.a_dst = nn.Parameter(torch.empty(heads, cout))
        nn.init.xavier_uniform_(self.W.weight, gain=1.414)
        nn.init.xavier_uniform_(self.a_src, gain=1.414)
        nn.init.xavier_uniform_(self.a_dst, gain=1.414)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        h = self.W(x).view(-1, self.heads, self.cout)  # N, H, C
        e = (h * self.a_dst).sum(-1).T[:, :, None] + (h * self.a_src).sum(-1).T[:, None, :]  # H, N, N
        e = F.leaky_relu(e, 0.2).masked_fill(adj[None] == 0, float("-inf"))
        att = F.dropout(torch.softmax(e, -1), self.dropout, self.training)
        out = torch.einsum("hij,jhc->ihc", att, h)
        return out.reshape(len(x), -1) if self.concat else out.mean(1)


class GAT(nn.Module):
    def __init__(self, cin: int, classes: int, hidden: int = 8, heads: int = 8, dropout: float = 0.6):
        super().__init__()
        self.dropout = dropout
        self.gat1 = GraphAttentionLayer(cin, hidden, heads, dropout)
        self.gat2 = GraphAttentionLayer(hidden * heads, classes, 1, dropout, concat=False)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, self.dropout, self.training)
        x = F.elu(self.gat1(x, adj))
        x = F.dropout(x, self.dropout, self.training)
        return F.log_softmax(self.gat2(x, adj), 1)


def gat_dense_early_stopping(
    path: str, epochs: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    """pyGAT's recipe: 8 heads x 8 hidden, ELU, dropout 0.6, Adam(5e-3, wd 5e-4), full batch,
    validation loss each epoch, early stopping with patience 100."""
    g = _seed(seed)
    adj, feats, y = _sbm_graph(g)
    idx = torch.randperm(len(y), generator=g)
    idx_train, idx_val = idx[:60], idx[60:120]
    model = GAT(feats.shape[1], int(y.max()) + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=5e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    best, bad, patience = float("inf"), 0, 100
    if bug == "train_in_eval_mode":
        model.train()  # once, before the loop; the validation below leaves the model in eval mode
    for epoch in range(epochs):
        if bug != "train_in_eval_mode":
            model.train()
        optimizer.zero_grad()
        out = model(feats, adj)
        loss = F.nll_loss(out[idx_train], y[idx_train])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            out = model(feats, adj)
            val = F.nll_loss(out[idx_val], y[idx_val]).item()
            acc = (out[idx_val].argmax(1) == y[idx_val]).float().mean().item()
        if epoch % 50 == 0:
            print(f"epoch {epoch} loss {loss.item():.4f} val loss {val:.4f} val acc {acc:.3f}")
        if val < best:
            best, bad = val, 0
        else:
            bad += 1
            if bad == patience:
                break
    hook.close()
    return losses


# ----------------------------------------------------------------------------- NICE


def _binary_patterns(g: torch.Generator, n: int, side: int = 8) -> torch.Tensor:
    """(n, side*side) binary images: one of six stroke patterns, shifted, with 5% pixel flips."""
    yy, xx = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    protos = torch.stack(
        [
            xx == 2,
            yy == 3,
            xx == yy,
            xx + yy == side - 1,
            (xx - 3) ** 2 + (yy - 3) ** 2 <= 5,
            (xx < 4) & (yy < 4),
        ]
    ).float()
    k = torch.randint(0, len(protos), (n,), generator=g)
    imgs = torch.stack(
        [
            torch.roll(protos[int(i)], int(s), 1)
            for i, s in zip(k, torch.randint(-1, 2, (n,), generator=g), strict=True)
        ]
    )
    flip = torch.rand(imgs.shape, generator=g) < 0.05
    return torch.where(flip, 1 - imgs, imgs).flatten(1)


class AdditiveCoupling(nn.Module):
    def __init__(self, dim: int, hidden: int, parity: int):
        super().__init__()
        self.parity = parity
        self.m = nn.Sequential(
            nn.Linear(dim // 2, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, dim // 2),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = (x[:, 0::2], x[:, 1::2]) if self.parity == 0 else (x[:, 1::2], x[:, 0::2])
        b = b + self.m(a)
        out = torch.empty_like(x)
        if self.parity == 0:
            out[:, 0::2], out[:, 1::2] = a, b
        else:
            out[:, 1::2], out[:, 0::2] = a, b
        return out


class NICE(nn.Module):
    def __init__(self, dim: int = 64, hidden: int = 128, couplings: int = 4):
        super().__init__()
        self.couplings = nn.ModuleList([AdditiveCoupling(dim, hidden, i % 2) for i in range(couplings)])
        self.log_scale = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for c in self.couplings:
            x = c(x)
        z = x * torch.exp(self.log_scale)
        log_prior = -(F.softplus(z) + F.softplus(-z)).sum(1)  # standard logistic
        return -(log_prior + self.log_scale.sum())  # NLL per example, in nats


def nice_logistic_prior(path: str, epochs: int = 10, seed: int = 0, bug: str | None = None) -> list[float]:
    """NICE: four additive couplings, a diagonal scaling, a logistic prior, uniform dequantization,
    Adam(1e-3, betas (0.9, 0.01), eps 1e-4) as in the paper."""
    g = _seed(seed)
    data = _binary_patterns(g, 2048)
    loader = DataLoader(TensorDataset(data), batch_size=64, shuffle=True, generator=g)
    model = NICE()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.01), eps=1e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        for (xb,) in loader:
            x = (xb * 255 + torch.rand(xb.shape, generator=g)) / 256  # dequantize
            loss = model(x).mean() / x.shape[1]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch} nll/dim {np.mean(losses[-len(loader) :]):.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- MADE


class MaskedLinear(nn.Linear):
    def __init__(self, cin: int, cout: int):
        super().__init__(cin, cout)
        self.register_buffer("mask", torch.ones(cout, cin))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight * self.mask, self.bias)


class MADE(nn.Module):
    def __init__(self, dim: int = 64, hidden: int = 256, seed: int = 0):
        super().__init__()
        self.net = nn.Sequential(
            MaskedLinear(dim, hidden),
            nn.ReLU(),
            MaskedLinear(hidden, hidden),
            nn.ReLU(),
            MaskedLinear(hidden, dim),
        )
        rng = np.random.RandomState(seed)
        m = [np.arange(dim)]
        for _ in range(2):
            m.append(rng.randint(m[-1].min(), dim - 1, size=hidden))
        layers = [lay for lay in self.net if isinstance(lay, MaskedLinear)]
        for lay, (a, b) in zip(layers[:-1], zip(m[:-1], m[1:], strict=True), strict=True):
            lay.mask.copy_(torch.from_numpy((b[:, None] >= a[None]).astype(np.float32)))
        layers[-1].mask.copy_(torch.from_numpy((m[0][:, None] > m[-1][None]).astype(np.float32)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def made_binary_patterns(path: str, epochs: int = 10, seed: int = 0, bug: str | None = None) -> list[float]:
    """MADE on binarized 8x8 patterns: two masked hidden layers of 256, natural ordering,
    summed BCE-with-logits per image, Adam(1e-3), test NLL each epoch."""
    g = _seed(seed)
    data = _binary_patterns(g, 2048 + 256)
    loader = DataLoader(TensorDataset(data[:2048]), batch_size=64, shuffle=True, generator=g)
    model = MADE()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.BCEWithLogitsLoss(reduction="sum")
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for (xb,) in loader:
            loss = criterion(model(xb), xb) / len(xb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            test = F.binary_cross_entropy_with_logits(model(data[2048:]), data[2048:], reduction="sum") / 256
        print(f"epoch {epoch} train nll {losses[-1]:.2f} test nll {test.item():.2f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- rectified flow


def _two_moons(g: torch.Generator, n: int) -> torch.Tensor:
    t = math.pi * torch.rand(n, generator=g)
    upper = torch.rand(n, generator=g) < 0.5
    x = torch.where(upper, torch.cos(t), 1 - torch.cos(t))
    y = torch.where(upper, torch.sin(t), 0.5 - torch.sin(t))
    return (torch.stack([x, y], 1) - torch.tensor([0.5, 0.25])) * 2 + 0.1 * torch.randn(n, 2, generator=g)


class VelocityField(nn.Module):
    def __init__(self, hidden: int = 128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(3, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 2),
        )  # fmt: skip

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, t[:, None]], 1))


def rectified_flow_moons(path: str, steps: int = 600, seed: int = 0, bug: str | None = None) -> list[float]:
    """Rectified flow / flow matching: x_t = t x1 + (1-t) x0, regress v(x_t, t) on x1 - x0 with
    MSE; AdamW(1e-3), an EMA copy of the weights for sampling with Euler steps."""
    g = _seed(seed)
    model = VelocityField()
    ema = copy.deepcopy(model).requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        x1 = _two_moons(g, 256)
        x0 = torch.randn(256, 2, generator=g)
        t = torch.rand(256, generator=g)
        xt = t[:, None] * x1 + (1 - t[:, None]) * x0
        loss = F.mse_loss(model(xt, t), x1 - x0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), model.parameters(), strict=True):
                pe.lerp_(pm, 1 - 0.999)
        losses.append(loss.item())
        if step % 200 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    with torch.no_grad():
        z = torch.randn(512, 2, generator=g)
        for i in range(50):
            z = z + ema(z, torch.full((512,), i / 50)) / 50
    print(f"sample mean {z.mean(0).tolist()} std {z.std(0).tolist()}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Fourier features


class FourierFeatureMLP(nn.Module):
    def __init__(self, mapping: int = 128, scale: float = 10.0, hidden: int = 128):
        super().__init__()
        self.register_buffer("B", torch.randn(2, mapping) * scale)
        self.net = nn.Sequential(
            nn.Linear(2 * mapping, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1), nn.Sigmoid(),
        )  # fmt: skip

    def forward(self, coords: torch.Tensor) -> torch.Tensor:
        proj = 2 * math.pi * coords @ self.B
        return self.net(torch.cat([torch.sin(proj), torch.cos(proj)], -1))


def fourier_features_image(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """Tancik et al.'s 2-D image regression: Gaussian Fourier features (sigma 10, 128 features),
    a 4-layer ReLU MLP with a sigmoid output, MSE, Adam(1e-4) as in their notebook, the training
    pixels on a 2x subsampled grid, PSNR on all pixels."""
    _seed(seed)
    side = 32
    yy, xx = torch.meshgrid(torch.linspace(0, 1, side), torch.linspace(0, 1, side), indexing="ij")
    img = (
        0.5
        + 0.3 * torch.sin(12 * xx + 4 * yy) * torch.cos(9 * yy)
        + 0.2 * (((xx - 0.6) ** 2 + (yy - 0.4) ** 2) < 0.05)
    )
    coords = torch.stack([xx, yy], -1)
    model = FourierFeatureMLP()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    train_x, train_y = coords[::2, ::2].reshape(-1, 2), img[::2, ::2].reshape(-1, 1)
    losses = []
    for step in range(steps):
        optimizer.zero_grad()
        loss = criterion(model(train_x), train_y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 0:
            with torch.no_grad():
                mse = F.mse_loss(model(coords.reshape(-1, 2)), img.reshape(-1, 1))
            print(f"step {step} train loss {loss.item():.5f} test psnr {-10 * math.log10(mse.item()):.2f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- evidential regression


class NormalInverseGamma(nn.Module):
    def __init__(self, cin: int, relu_evidence: bool = False):
        super().__init__()
        self.linear = nn.Linear(cin, 4)
        self.relu_evidence = relu_evidence

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        gamma, lognu, logalpha, logbeta = self.linear(x).unbind(-1)
        evidence = F.relu if self.relu_evidence else F.softplus  # the bug: evidence may be exactly 0
        return gamma, evidence(lognu), evidence(logalpha) + 1, evidence(logbeta)


def _nig_nll(
    y: torch.Tensor, gamma: torch.Tensor, nu: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor
) -> torch.Tensor:
    omega = 2 * beta * (1 + nu)
    return (
        0.5 * torch.log(math.pi / nu) - alpha * torch.log(omega) + (alpha + 0.5) * torch.log(nu * (y - gamma) ** 2 + omega)
        + torch.lgamma(alpha) - torch.lgamma(alpha + 0.5)
    )  # fmt: skip


def evidential_regression_cubic(
    path: str, epochs: int = 40, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Deep evidential regression (Amini et al.) on y = x^3 + eps: a Normal-Inverse-Gamma head,
    NIG NLL + 0.01 x evidence regularizer, Adam(5e-4), batch 128, early stopping on a held-out
    split (patience 10)."""
    g = _seed(seed)
    x = torch.rand(1280, 1, generator=g) * 8 - 4
    y = (x**3 + 3 * torch.randn(1280, 1, generator=g)).squeeze(1) / 20
    train = DataLoader(TensorDataset(x[:1024], y[:1024]), batch_size=128, shuffle=True, generator=g)
    model = nn.Sequential(
        nn.Linear(1, 64),
        nn.ReLU(),
        nn.Linear(64, 64),
        nn.ReLU(),
        NormalInverseGamma(64, relu_evidence=bug == "log_zero_nan"),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    best, bad = float("inf"), 0
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            gamma, nu, alpha, beta = model(xb)
            reg = ((yb - gamma).abs() * (2 * nu + alpha)).mean()
            loss = _nig_nll(yb, gamma, nu, alpha, beta).mean() + 0.01 * reg
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val = _nig_nll(y[1024:], *model(x[1024:])).mean().item()
        if epoch % 10 == 0:
            print(f"epoch {epoch} loss {losses[-1]:.4f} val nll {val:.4f}")
        if val < best - 1e-4:
            best, bad = val, 0
        else:
            bad += 1
            if bad >= 10:
                print(f"early stop at epoch {epoch}")
                break
    hook.close()
    return losses


# ----------------------------------------------------------------------------- attention MIL


class GatedAttentionMIL(nn.Module):
    def __init__(self, d: int = 24, hidden: int = 64, att: int = 32):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.V = nn.Sequential(nn.Linear(hidden, att), nn.Tanh())
        self.U = nn.Sequential(nn.Linear(hidden, att), nn.Sigmoid())
        self.w = nn.Linear(att, 1)
        self.classifier = nn.Linear(hidden, 1)

    def forward(self, bag: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.features(bag)  # K, hidden
        a = torch.softmax(self.w(self.V(h) * self.U(h)).T, dim=1)  # 1, K
        return self.classifier(a @ h).view(1), a


def attention_mil_bags(path: str, bags: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """Ilse et al.'s gated-attention MIL: one bag per step (batch size 1), Adam(5e-4, betas
    (0.9, 0.999), wd 1e-4), BCE on the bag label; a bag is positive when it holds one instance of
    the key pattern."""
    g = _seed(seed)
    protos = torch.randn(6, 24, generator=g)
    model = GatedAttentionMIL()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.999), weight_decay=1e-4)
    criterion = nn.BCEWithLogitsLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(bags):
        k = int(torch.randint(5, 15, (1,), generator=g))
        kinds = torch.randint(1, 6, (k,), generator=g)
        label = float(torch.rand(1, generator=g) < 0.5)
        if label:
            kinds[torch.randint(0, k, (1,), generator=g)] = 0
        bag = protos[kinds] + 0.8 * torch.randn(k, 24, generator=g)
        optimizer.zero_grad()
        logit, _ = model(bag)
        loss = criterion(logit, torch.tensor([label]))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 99:
            print(f"bag {step + 1} mean loss {np.mean(losses[-100:]):.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- prototypical networks


def protonet_episodes(path: str, episodes: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """Prototypical networks, 5-way 5-shot with 5 queries per class: squared Euclidean distance
    to class means, Adam(1e-3) halved every 100 episodes, validation episodes on held-out
    classes."""
    g = _seed(seed)
    latent = torch.randn(80, 16, generator=g)
    mix = torch.randn(16, 48, generator=g) / 4

    def sample(classes: torch.Tensor, per: int) -> torch.Tensor:
        z = latent[classes].repeat_interleave(per, 0) + 1.0 * torch.randn(len(classes) * per, 16, generator=g)
        return torch.tanh(z @ mix) + 0.1 * torch.randn(len(classes) * per, 48, generator=g)

    encoder = nn.Sequential(
        nn.Linear(48, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(),
        nn.Linear(64, 32),
    )  # fmt: skip
    optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=100, gamma=0.5)
    hook = Hook(path)
    hook.register_module(encoder)
    way, shot, query = 5, 5, 5
    target = torch.arange(way).repeat_interleave(query)

    def episode(pool: int, offset: int) -> torch.Tensor:
        classes = torch.randperm(pool, generator=g)[:way] + offset
        support = encoder(sample(classes, shot)).view(way, shot, -1).mean(1)
        q = encoder(sample(classes, query))
        return F.cross_entropy(-(torch.cdist(q, support) ** 2), target)

    losses = []
    for ep in range(episodes):
        encoder.train()
        optimizer.zero_grad()
        loss = episode(64, 0)
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if ep % 50 == 49:
            encoder.eval()
            with torch.no_grad():
                val = np.mean([episode(16, 64).item() for _ in range(5)])
            print(f"episode {ep + 1} train {np.mean(losses[-50:]):.4f} val {val:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- GloVe


class GloVe(nn.Module):
    def __init__(self, vocab: int, dim: int = 32):
        super().__init__()
        self.w = nn.Embedding(vocab, dim)
        self.c = nn.Embedding(vocab, dim)
        self.bw = nn.Embedding(vocab, 1)
        self.bc = nn.Embedding(vocab, 1)
        for e in (self.w, self.c):
            nn.init.uniform_(e.weight, -0.5 / dim, 0.5 / dim)
        nn.init.zeros_(self.bw.weight)
        nn.init.zeros_(self.bc.weight)

    def forward(self, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        return (self.w(i) * self.c(j)).sum(1) + self.bw(i).squeeze(1) + self.bc(j).squeeze(1)


def glove_cooccurrence_adagrad(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """GloVe: weighted least squares on log co-occurrence counts of a synthetic topic corpus,
    f(x) = min(1, (x / 100)^0.75), Adagrad(0.05) on shuffled batches of nonzero cells."""
    g = _seed(seed)
    vocab, topics = 300, 6
    topic_of = torch.randint(0, topics, (vocab,), generator=g)
    zipf = 1.0 / torch.arange(1, vocab + 1).float()
    counts = torch.zeros(vocab, vocab)
    for _ in range(300):  # documents
        t = int(torch.randint(0, topics, (1,), generator=g))
        p = zipf * torch.where(topic_of == t, 8.0, 1.0)
        doc = torch.multinomial(p / p.sum(), 200, replacement=True, generator=g)
        for off in (1, 2, 3):  # window 3, weighted 1/d
            a, b = doc[:-off], doc[off:]
            counts.index_put_((a, b), torch.full((len(a),), 1.0 / off), accumulate=True)
            counts.index_put_((b, a), torch.full((len(a),), 1.0 / off), accumulate=True)
    i, j = counts.nonzero(as_tuple=True)
    xij = counts[i, j]
    weight = (xij / 100).pow(0.75).clamp(max=1.0)
    loader = DataLoader(TensorDataset(i, j, xij.log(), weight), batch_size=1024, shuffle=True, generator=g)
    model = GloVe(vocab)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        for bi, bj, logx, wt in loader:
            loss = (wt * (model(bi, bj) - logx) ** 2).sum() / len(bi)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch} cost {np.mean(losses[-len(loader) :]):.4f} ({len(loader)} batches)")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- NeuMF


class NeuMF(nn.Module):
    def __init__(self, users: int, items: int, mf_dim: int = 8, layers: tuple[int, ...] = (32, 16, 8)):
        super().__init__()
        self.mf_user, self.mf_item = nn.Embedding(users, mf_dim), nn.Embedding(items, mf_dim)
        self.mlp_user, self.mlp_item = (
            nn.Embedding(users, layers[0] // 2),
            nn.Embedding(items, layers[0] // 2),
        )
        mlp: list[nn.Module] = []
        for a, b in zip(layers[:-1], layers[1:], strict=True):
            mlp += [nn.Linear(a, b), nn.ReLU()]
        self.mlp = nn.Sequential(*mlp)
        self.predict = nn.Linear(mf_dim + layers[-1], 1)
        for e in (self.mf_user, self.mf_item, self.mlp_user, self.mlp_item):
            nn.init.normal_(e.weight, std=0.01)

    def forward(self, u: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        gmf = self.mf_user(u) * self.mf_item(i)
        mlp = self.mlp(torch.cat([self.mlp_user(u), self.mlp_item(i)], 1))
        return self.predict(torch.cat([gmf, mlp], 1)).squeeze(1)


def neumf_negative_sampling(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """NeuMF (He et al.): GMF + MLP towers, 4 sampled negatives per positive resampled every
    epoch, BCE, Adam(1e-3), batch 256, leave-one-out HR@10 each epoch."""
    g = _seed(seed)
    users, items = 200, 150
    pu, pi = torch.randn(users, 6, generator=g), torch.randn(items, 6, generator=g)
    score = pu @ pi.T + 0.5 * torch.randn(users, items, generator=g)
    inter = score > score.quantile(0.9, dim=1, keepdim=True)  # each user's top 10% are interactions
    u_pos, i_pos = inter.nonzero(as_tuple=True)
    held = torch.stack([inter[u].nonzero()[0, 0] for u in range(users)])  # one held-out item per user
    keep = i_pos != held[u_pos]
    u_pos, i_pos = u_pos[keep], i_pos[keep]
    model = NeuMF(users, items)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.BCEWithLogitsLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        u_neg = u_pos.repeat(4)
        i_neg = torch.randint(0, items, (len(u_neg),), generator=g)
        uu, ii = torch.cat([u_pos, u_neg]), torch.cat([i_pos, i_neg])
        lab = torch.cat([torch.ones(len(u_pos)), inter[u_neg, i_neg].float()])
        for bu, bi, bl in DataLoader(TensorDataset(uu, ii, lab), batch_size=256, shuffle=True, generator=g):
            optimizer.zero_grad()
            loss = criterion(model(bu, bi), bl)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            s = model(torch.arange(users).repeat_interleave(items), torch.arange(items).repeat(users)).view(
                users, items
            )
            s = s.masked_fill(inter & (torch.arange(items)[None] != held[:, None]), float("-inf"))
            hr = (s.topk(10, 1).indices == held[:, None]).any(1).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-50:]):.4f} HR@10 {hr:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ListNet


def listnet_ranking(path: str, epochs: int = 15, seed: int = 0, bug: str | None = None) -> list[float]:
    """ListNet top-one loss: cross-entropy between softmax of graded relevance (0-4) and softmax
    of scores over each query's 20 documents; an MLP scorer, Adam(1e-3), NDCG@10 on test
    queries each epoch."""
    g = _seed(seed)
    q, docs, d = 400, 20, 16
    feats = torch.randn(q, docs, d, generator=g)
    w = torch.randn(d, generator=g)
    raw = feats @ w + 0.5 * (feats[..., 0] * feats[..., 1]) + 0.5 * torch.randn(q, docs, generator=g)
    rel = torch.bucketize(raw, torch.tensor([-1.0, 0.5, 1.5, 2.5])).float()  # grades 0..4
    model = nn.Sequential(
        nn.Linear(d, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1)
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train = DataLoader(TensorDataset(feats[:320], rel[:320]), batch_size=16, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    discount = 1 / torch.log2(torch.arange(docs).float() + 2)

    def ndcg(scores: torch.Tensor, r: torch.Tensor, k: int = 10) -> float:
        gains = 2**r - 1
        dcg = (gains.gather(1, scores.argsort(1, descending=True)) * discount)[:, :k].sum(1)
        ideal = (gains.sort(1, descending=True).values * discount)[:, :k].sum(1)
        return (dcg / ideal.clamp(min=1e-9)).mean().item()

    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, rb in train:
            scores = model(xb).squeeze(-1)
            loss = -(torch.softmax(rb, 1) * torch.log_softmax(scores, 1)).sum(1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            print(
                f"epoch {epoch} loss {losses[-1]:.4f} test NDCG@10 {ndcg(model(feats[320:]).squeeze(-1), rel[320:]):.3f}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- curriculum learning


def curriculum_pacing_mlp(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """Curriculum learning with a linear pacing function: examples ranked by difficulty (a
    teacher's margin), the pool grows from the easiest 20% to all of them over the first 60% of
    training; a 5-hidden-layer MLP, SGD(0.05, momentum 0.9, wd 5e-4) with cosine annealing."""
    g = _seed(seed)
    n, d = 4000, 10
    x = torch.randn(n, d, generator=g)
    logits = torch.stack(
        [x[:, 0] + x[:, 1] * x[:, 2], x[:, 3] - x[:, 4] ** 2 + 1, torch.sin(2 * x[:, 5]) + x[:, 6]], 1
    )
    y = (logits + 0.3 * torch.randn(n, 3, generator=g)).argmax(1)
    top2 = logits.topk(2, 1).values
    order = (top2[:, 0] - top2[:, 1]).argsort(descending=True)  # largest margin = easiest first
    act = nn.Sigmoid if bug == "deep_sigmoid" else nn.ReLU
    layers: list[nn.Module] = []
    width = [d, 64, 64, 64, 64, 64]
    for a, b in zip(width[:-1], width[1:], strict=True):
        layers += [nn.Linear(a, b), act()]
    model = nn.Sequential(*layers, nn.Linear(64, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        frac = min(1.0, 0.2 + 0.8 * step / (0.6 * steps))
        pool = order[: int(frac * n)]
        idx = pool[torch.randint(0, len(pool), (64,), generator=g)]
        optimizer.zero_grad()
        loss = criterion(model(x[idx]), y[idx])
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step % 100 == 0:
            with torch.no_grad():
                acc = (model(x).argmax(1) == y).float().mean().item()
            print(f"step {step} pool {len(pool)} loss {loss.item():.4f} acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Hamiltonian NN


def hamiltonian_nn_spring(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """Greydanus et al.'s HNN on the ideal mass-spring: an MLP H(q, p) (tanh, 200 units), the
    symplectic gradient (dH/dp, -dH/dq) through autograd with create_graph, MSE against the
    noisy time derivatives, Adam(1e-3), full batch."""
    g = _seed(seed)
    n = 500
    energy = 0.1 + 0.9 * torch.rand(n, generator=g)
    phase = 2 * math.pi * torch.rand(n, generator=g)
    q, p = energy.sqrt() * torch.cos(phase), energy.sqrt() * torch.sin(phase)
    x = torch.stack([q, p], 1) + 0.05 * torch.randn(n, 2, generator=g)
    dx = torch.stack([p, -q], 1) + 0.05 * torch.randn(n, 2, generator=g)  # dq/dt = p, dp/dt = -q
    model = nn.Sequential(nn.Linear(2, 200), nn.Tanh(), nn.Linear(200, 200), nn.Tanh(), nn.Linear(200, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        xb = x.clone().requires_grad_(True)
        h = model(xb).sum()
        dh = torch.autograd.grad(h, xb, create_graph=True)[0]
        pred = torch.stack([dh[:, 1], -dh[:, 0]], 1)
        loss = F.mse_loss(pred, dx)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.5f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- LISTA


class LISTA(nn.Module):
    def __init__(self, dictionary: torch.Tensor, layers: int = 8, lam: float = 0.1):
        super().__init__()
        m, n = dictionary.shape
        step = 1.0 / torch.linalg.matrix_norm(dictionary, 2) ** 2
        self.layers = layers
        self.We = nn.Linear(m, n, bias=False)  # initialised at the ISTA values
        self.S = nn.Linear(n, n, bias=False)
        with torch.no_grad():
            self.We.weight.copy_(step * dictionary.T)
            self.S.weight.copy_(torch.eye(n) - step * dictionary.T @ dictionary)
        self.theta = nn.Parameter(torch.full((layers,), float(lam * step)))

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        b = self.We(y)
        z = torch.sign(b) * F.relu(b.abs() - self.theta[0])
        for t in range(1, self.layers):
            c = b + self.S(z)
            z = torch.sign(c) * F.relu(c.abs() - self.theta[t])
        return z


def lista_sparse_coding(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """LISTA (Gregor & LeCun): 8 unrolled ISTA iterations with learned We, S and thresholds,
    initialised at ISTA, trained on MSE to the true sparse codes; RMSprop(1e-3)."""
    g = _seed(seed)
    m, n = 20, 50
    dictionary = torch.randn(m, n, generator=g)
    dictionary = dictionary / dictionary.norm(dim=0, keepdim=True)
    model = LISTA(dictionary)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        support = torch.rand(128, n, generator=g) < 0.06
        codes = support * torch.randn(128, n, generator=g)
        y = codes @ dictionary.T + 0.01 * torch.randn(128, m, generator=g)
        optimizer.zero_grad()
        loss = criterion(model(y), codes)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step} mse {loss.item():.5f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- neural additive model


class ExU(nn.Module):
    """Exp-centred unit: h = relu_n(exp(w) * (x - b)), n = 1, w ~ N(4, 0.5)."""

    def __init__(self, cout: int):
        super().__init__()
        self.weight = nn.Parameter(torch.normal(4.0, 0.5, (1, cout)))
        self.bias = nn.Parameter(torch.empty(cout).normal_(0, 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp((x - self.bias) * torch.exp(self.weight), 0, 1)


class NAM(nn.Module):
    def __init__(self, features: int, units: int = 64, dropout: float = 0.1, feature_dropout: float = 0.1):
        super().__init__()
        self.nets = nn.ModuleList(
            nn.Sequential(
                ExU(units),
                nn.Dropout(dropout),
                nn.Linear(units, 32),
                nn.ReLU(),
                nn.Dropout(dropout),
                nn.Linear(32, 1),
            )
            for _ in range(features)
        )
        self.feature_dropout = nn.Dropout(feature_dropout)
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        contrib = torch.cat([net(x[:, i : i + 1]) for i, net in enumerate(self.nets)], 1)
        return self.feature_dropout(contrib).sum(1) + self.bias, contrib


def nam_exu_tabular(path: str, epochs: int = 10, seed: int = 0, bug: str | None = None) -> list[float]:
    """Neural additive model (Agarwal et al.): one ExU subnet per feature, dropout and feature
    dropout 0.1, output penalty 1e-3, Adam(0.02, wd 1e-5) with a 0.995 per-epoch ExponentialLR,
    BCE on a binary target that is additive in the features."""
    g = _seed(seed)
    n, d = 3000, 6
    x = torch.rand(n, d, generator=g) * 2 - 1
    f = torch.stack(
        [
            2 * x[:, 0],
            torch.sin(3 * x[:, 1]),
            2 * x[:, 2] ** 2 - 0.6,
            (x[:, 3] > 0.3).float() * 1.5 - 0.5,
            torch.exp(x[:, 4]) - 1.2,
            0 * x[:, 5],
        ],
        1,
    )
    y = (torch.rand(n, generator=g) < torch.sigmoid(2 * f.sum(1))).float()
    model = NAM(d)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=1e-5)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.995)
    criterion = nn.BCEWithLogitsLoss()
    train = DataLoader(TensorDataset(x[:2560], y[:2560]), batch_size=128, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            logits, contrib = model(xb)
            loss = criterion(logits, yb) + 1e-3 * contrib.pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            val = F.binary_cross_entropy_with_logits(model(x[2560:])[0], y[2560:]).item()
        print(f"epoch {epoch} train {np.mean(losses[-len(train) :]):.4f} val {val:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DCN-V2


class CrossLayer(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, x0: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return x0 * self.linear(x) + x


class DCNv2(nn.Module):
    def __init__(self, vocab: int, fields: int, dense: int, emb: int = 8, cross: int = 3):
        super().__init__()
        self.embedding = nn.Embedding(vocab * fields, emb)
        self.register_buffer("offsets", torch.arange(fields) * vocab)
        dim = fields * emb + dense
        self.cross = nn.ModuleList(CrossLayer(dim) for _ in range(cross))
        self.deep = nn.Sequential(
            nn.Linear(dim, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 128), nn.ReLU()
        )
        self.out = nn.Linear(dim + 128, 1)

    def forward(self, cat: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        x0 = torch.cat([self.embedding(cat + self.offsets).flatten(1), num], 1)
        xc = x0
        for layer in self.cross:
            xc = layer(x0, xc)
        return self.out(torch.cat([xc, self.deep(x0)], 1)).squeeze(1)


def dcn_v2_ctr(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """DCN-V2 (Wang et al. 2021): 3 full-rank cross layers in parallel with a 2x128 deep tower,
    8-d field embeddings, BCE, Adam(1e-3), batch 256, AUC-like accuracy on a validation split."""
    g = _seed(seed)
    n, fields, vocab, dense = 14000, 8, 40, 4
    cat = torch.randint(0, vocab, (n, fields), generator=g)
    num = torch.randn(n, dense, generator=g)
    tables = torch.randn(fields, vocab, generator=g) * 0.6
    pair = torch.randn(vocab, vocab, generator=g) * 0.8
    logit = (
        tables[torch.arange(fields), cat].sum(1)
        + pair[cat[:, 0], cat[:, 1]]
        + 0.5 * num[:, 0] * num[:, 1]
        - 1.0
    )
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    train = DataLoader(
        TensorDataset(cat[:12800], num[:12800], y[:12800]), batch_size=256, shuffle=True, generator=g
    )
    model = DCNv2(vocab, fields, dense)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3 * (100 if bug == "lr_x100" else 1))
    criterion = nn.BCEWithLogitsLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for cb, nb, yb in train:
            optimizer.zero_grad()
            loss = criterion(model(cb, nb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val = criterion(model(cat[12800:], num[12800:]), y[12800:]).item()
        print(f"epoch {epoch} train logloss {np.mean(losses[-len(train) :]):.4f} val logloss {val:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- EmbeddingBag text classifier


def _topic_documents(
    g: torch.Generator, n: int, classes: int = 4, vocab: int = 500
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Variable-length token lists whose class shows in which words (and word pairs) they use."""
    y = torch.randint(0, classes, (n,), generator=g)
    zipf = 1.0 / torch.arange(1, vocab + 1).float() ** 0.8
    topic_words = torch.randint(0, vocab, (classes, 30), generator=g)
    docs = []
    for c in y.tolist():
        length = int(torch.randint(15, 60, (1,), generator=g))
        words = torch.multinomial(zipf, length, replacement=True, generator=g)
        k = max(1, length // 4)
        pos = torch.randint(0, length, (k,), generator=g)
        words[pos] = topic_words[c][torch.randint(0, 30, (k,), generator=g)]
        docs.append(words)
    return docs, y


def _with_bigrams(words: torch.Tensor, vocab: int, buckets: int) -> torch.Tensor:
    bigrams = vocab + (words[:-1] * 7919 + words[1:]) % buckets
    return torch.cat([words, bigrams])


def embeddingbag_text_classifier(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The PyTorch text-classification tutorial's model (AG_NEWS): EmbeddingBag(mean) + Linear,
    uniform(-0.5, 0.5) init, SGD(lr 5), clip_grad_norm 0.1, StepLR(1, 0.1) stepped only when
    validation accuracy stops improving, batch 64 via offsets; unigrams + hashed bigrams."""
    g = _seed(seed)
    vocab, buckets = 500, 2000
    docs, labels = _topic_documents(g, 3000)
    if bug == "shuffled_labels":  # labels re-read from a shuffled frame, no longer aligned with the texts
        labels = labels[torch.randperm(len(labels), generator=g)]
    docs = [_with_bigrams(d, vocab, buckets) for d in docs]

    class TextClassificationModel(nn.Module):
        def __init__(self, vocab_size: int, embed_dim: int, num_class: int):
            super().__init__()
            self.embedding = nn.EmbeddingBag(vocab_size, embed_dim)
            self.fc = nn.Linear(embed_dim, num_class)
            self.embedding.weight.data.uniform_(-0.5, 0.5)
            self.fc.weight.data.uniform_(-0.5, 0.5)
            self.fc.bias.data.zero_()

        def forward(self, text: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
            return self.fc(self.embedding(text, offsets))

    def collate(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, ...]:
        texts = [b[0] for b in batch]
        offsets = torch.tensor([0] + [len(t) for t in texts[:-1]]).cumsum(0)
        return torch.cat(texts), offsets, torch.stack([b[1] for b in batch])

    data = list(zip(docs, labels, strict=True))
    train = DataLoader(data[:2560], batch_size=64, shuffle=True, collate_fn=collate, generator=g)
    valid = DataLoader(data[2560:], batch_size=64, collate_fn=collate)
    model = TextClassificationModel(vocab + buckets, 64, 4)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    total_accu = None
    for epoch in range(epochs):
        model.train()
        for text, offsets, label in train:
            optimizer.zero_grad()
            loss = criterion(model(text, offsets), label)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        correct = count = 0
        with torch.no_grad():
            for text, offsets, label in valid:
                correct += (model(text, offsets).argmax(1) == label).sum().item()
                count += len(label)
        accu_val = correct / count
        if total_accu is not None and total_accu > accu_val:
            scheduler.step()
        else:
            total_accu = accu_val
        print(f"epoch {epoch} valid accuracy {accu_val:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- HAN


class AttentionPool(nn.Module):
    def __init__(self, dim: int, att: int):
        super().__init__()
        self.proj = nn.Linear(dim, att)
        self.context = nn.Linear(att, 1, bias=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        a = torch.softmax(self.context(torch.tanh(self.proj(h))), dim=1)
        return (a * h).sum(1)


class HAN(nn.Module):
    def __init__(self, vocab: int, classes: int, emb: int = 32, hidden: int = 25, softmax_out: bool = False):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.word_gru = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.word_att = AttentionPool(2 * hidden, 2 * hidden)
        self.sent_gru = nn.GRU(2 * hidden, hidden, batch_first=True, bidirectional=True)
        self.sent_att = AttentionPool(2 * hidden, 2 * hidden)
        self.fc = nn.Linear(2 * hidden, classes)
        self.softmax_out = softmax_out

    def forward(self, docs: torch.Tensor) -> torch.Tensor:
        b, s, w = docs.shape
        words, _ = self.word_gru(self.embedding(docs.view(b * s, w)))
        sents, _ = self.sent_gru(self.word_att(words).view(b, s, -1))
        out = self.fc(self.sent_att(sents))
        return torch.softmax(out, 1) if self.softmax_out else out


def han_document_classification(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Hierarchical attention network (Yang et al.): word GRU + attention, sentence GRU +
    attention, bidirectional 25-unit GRUs, SGD(0.05, momentum 0.9), clip 5; documents of 6
    sentences x 10 words whose class shows in some of their sentences."""
    g = _seed(seed)
    vocab, classes, n = 400, 3, 1200
    docs_flat, y = _topic_documents(g, n, classes=classes, vocab=vocab)
    docs = torch.stack([d.repeat(4)[:60].view(6, 10) for d in docs_flat])
    train = DataLoader(TensorDataset(docs[:1024], y[:1024]), batch_size=32, shuffle=True, generator=g)
    model = HAN(vocab, classes, softmax_out=bug == "softmax_before_ce")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(docs[1024:]).argmax(1) == y[1024:]).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-len(train) :]):.4f} val acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- deep knowledge tracing


def _student_responses(
    g: torch.Generator, n: int, length: int, skills: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Simulated students (BKT-like): per-skill mastery that is learned with practice;
    the answer is right with p = 0.85 if mastered else 0.25 (guess)."""
    ability = torch.randn(n, generator=g)
    difficulty = torch.randn(skills, generator=g)
    mastered = torch.rand(n, skills, generator=g) < torch.sigmoid(ability[:, None] - difficulty[None] - 1)
    skill = torch.randint(0, skills, (n, length), generator=g)
    correct = torch.zeros(n, length)
    for t in range(length):
        m = mastered[torch.arange(n), skill[:, t]]
        p = torch.where(m, 0.85, 0.25)
        correct[:, t] = (torch.rand(n, generator=g) < p).float()
        learn = torch.rand(n, generator=g) < torch.sigmoid(ability - difficulty[skill[:, t]] - 0.5) * 0.4
        mastered[torch.arange(n), skill[:, t]] = m | learn
    return skill, correct


def dkt_lstm_students(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """Deep knowledge tracing (Piech et al.): one-hot (skill, correct) inputs, an LSTM, a sigmoid
    per skill; BCE on the next question's skill only; Adam(1e-3), clip 1."""
    g = _seed(seed)
    skills, length = 12, 40
    skill, correct = _student_responses(g, 1280, length, skills)
    x = F.one_hot(skill + skills * correct.long(), 2 * skills).float()

    class DKT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(2 * skills, 64, batch_first=True)
            self.dropout = nn.Dropout(0.2)
            self.out = nn.Linear(64, skills)

        def forward(self, inp: torch.Tensor) -> torch.Tensor:
            h, _ = self.lstm(inp)
            return self.out(self.dropout(h))

    model = DKT()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.BCEWithLogitsLoss()
    train = DataLoader(
        TensorDataset(x[:1024], skill[:1024], correct[:1024]), batch_size=32, shuffle=True, generator=g
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)

    def next_logits(inp: torch.Tensor, sk: torch.Tensor) -> torch.Tensor:
        return model(inp[:, :-1]).gather(2, sk[:, 1:, None]).squeeze(2)

    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, sb, cb in train:
            optimizer.zero_grad()
            loss = criterion(next_logits(xb, sb), cb[:, 1:])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (
                ((next_logits(x[1024:], skill[1024:]) > 0).float() == correct[1024:, 1:])
                .float()
                .mean()
                .item()
            )
        print(f"epoch {epoch} loss {np.mean(losses[-len(train) :]):.4f} next-answer acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- WaveNet


def _mu_law(x: torch.Tensor, q: int = 64) -> torch.Tensor:
    mu = q - 1
    y = torch.sign(x) * torch.log1p(mu * x.abs()) / math.log1p(mu)
    return ((y + 1) / 2 * mu + 0.5).long().clamp(0, mu)


class WaveNet(nn.Module):
    def __init__(
        self, q: int = 64, res: int = 32, skip: int = 64, dilations: tuple[int, ...] = (1, 2, 4, 8) * 2
    ):
        super().__init__()
        self.dilations = dilations
        self.causal = nn.Conv1d(q, res, 2)
        self.filters = nn.ModuleList(nn.Conv1d(res, res, 2, dilation=d) for d in dilations)
        self.gates = nn.ModuleList(nn.Conv1d(res, res, 2, dilation=d) for d in dilations)
        self.residual = nn.ModuleList(nn.Conv1d(res, res, 1) for _ in dilations)
        self.skip = nn.ModuleList(nn.Conv1d(res, skip, 1) for _ in dilations)
        self.end = nn.Sequential(nn.ReLU(), nn.Conv1d(skip, skip, 1), nn.ReLU(), nn.Conv1d(skip, q, 1))
        self.receptive_field = 1 + sum(dilations) + 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.causal(F.pad(x, (1, 0)))
        skips = 0
        for d, f, gt, r, s in zip(
            self.dilations, self.filters, self.gates, self.residual, self.skip, strict=True
        ):
            hp = F.pad(h, (d, 0))
            z = torch.tanh(f(hp)) * torch.sigmoid(gt(hp))
            skips = skips + s(z)
            h = h + r(z)
        return self.end(skips)


def wavenet_mu_law(path: str, steps: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    """WaveNet: 64-level mu-law one-hot input, causal dilated convs (1..8, two stacks), gated
    tanh x sigmoid units, residual and skip 1x1s, softmax over the next sample's level; cross
    entropy after the receptive field, Adam(1e-3). Audio: random chords with decaying notes."""
    g = _seed(seed)
    q, length, batch = 64, 128, 8
    model = WaveNet(q)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    t = torch.arange(length + 1).float()
    losses = []
    for step in range(steps):
        f0 = 0.05 + 0.1 * torch.rand(batch, 3, 1, generator=g)
        amp = 0.3 * torch.rand(batch, 3, 1, generator=g)
        wave = (amp * torch.sin(2 * math.pi * f0 * t + 6.28 * torch.rand(batch, 3, 1, generator=g))).sum(1)
        decay = torch.exp(-t / (100 + 100 * torch.rand(batch, 1, generator=g)))
        wave = wave * decay + 0.01 * torch.randn(batch, length + 1, generator=g)
        codes = _mu_law(wave.clamp(-1, 1), q)
        x = F.one_hot(codes[:, :-1], q).float().transpose(1, 2)
        rf = model.receptive_field
        optimizer.zero_grad()
        loss = criterion(model(x)[:, :, rf:], codes[:, 1 + rf :])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- PatchTST-style forecaster


class RevIN(nn.Module):
    def __init__(self, channels: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def norm(self, x: torch.Tensor) -> torch.Tensor:  # x: B, L, C
        self.mean = x.mean(1, keepdim=True).detach()
        self.std = (x.var(1, keepdim=True, unbiased=False) + self.eps).sqrt().detach()
        return (x - self.mean) / self.std * self.weight + self.bias

    def denorm(self, y: torch.Tensor) -> torch.Tensor:
        return (y - self.bias) / (self.weight + self.eps**2) * self.std + self.mean


class PatchTST(nn.Module):
    def __init__(
        self, channels: int, lookback: int, horizon: int, patch: int = 16, stride: int = 8, d: int = 32
    ):
        super().__init__()
        self.patch, self.stride = patch, stride
        n_patches = (lookback - patch) // stride + 2  # + 1 for the end padding
        self.revin = RevIN(channels)
        self.embed = nn.Linear(patch, d)
        self.pos = nn.Parameter(torch.empty(n_patches, d).uniform_(-0.02, 0.02))
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.2, batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.Flatten(-2), nn.Dropout(0.0), nn.Linear(n_patches * d, horizon))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B, L, C -> B, H, C
        b, _, c = x.shape
        x = self.revin.norm(x).transpose(1, 2)  # channel independence: B, C, L
        x = F.pad(x, (0, self.stride), mode="replicate").unfold(-1, self.patch, self.stride)  # B, C, N, P
        h = self.encoder(self.embed(x).reshape(b * c, -1, self.pos.shape[1]) + self.pos)
        y = self.head(h.reshape(b, c, *h.shape[1:])).transpose(1, 2)
        return self.revin.denorm(y)


def patchtst_onecycle(path: str, epochs: int = 7, seed: int = 0, bug: str | None = None) -> list[float]:
    """PatchTST/42 recipe scaled down: RevIN, channel independence, patches of 16 with stride 8,
    a 2-layer post-norm encoder with dropout 0.2, MSE, Adam(1e-3 peak) under OneCycleLR
    (pct_start 0.3) stepped per batch; lookback 96, horizon 24; validation MSE each epoch."""
    g = _seed(seed)
    channels, lookback, horizon = 3, 96, 24
    t = torch.arange(3000).float()
    series = torch.stack(
        [torch.sin(2 * math.pi * t / 24) + 0.5 * torch.sin(2 * math.pi * t / 168), torch.cos(2 * math.pi * t / 12) + 0.002 * t,
         torch.sin(2 * math.pi * t / 48) * (1 + 0.3 * torch.sin(2 * math.pi * t / 500))], 1,
    ) + 0.15 * torch.randn(3000, channels, generator=g)  # fmt: skip
    starts = torch.arange(0, 3000 - lookback - horizon, 3)
    windows = torch.stack([series[s : s + lookback + horizon] for s in starts])
    x, y = windows[:, :lookback], windows[:, lookback:]
    n_train = int(0.8 * len(x))
    train = DataLoader(TensorDataset(x[:n_train], y[:n_train]), batch_size=32, shuffle=True, generator=g)
    model = PatchTST(channels, lookback, horizon)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=1e-3, steps_per_epoch=len(train), epochs=epochs, pct_start=0.3
    )
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val = criterion(model(x[n_train:]), y[n_train:]).item()
        print(f"epoch {epoch} train mse {np.mean(losses[-len(train) :]):.4f} val mse {val:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- GRU-D


class GRUD(nn.Module):
    """GRU-D (Che et al.): input decay towards the empirical mean and hidden-state decay, both
    driven by the time since each variable was last observed; the mask is an input too."""

    def __init__(self, d: int, hidden: int, x_mean: torch.Tensor):
        super().__init__()
        self.register_buffer("x_mean", x_mean)
        self.gamma_x = nn.Linear(d, d)
        self.gamma_h = nn.Linear(d, hidden)
        self.cell = nn.GRUCell(2 * d, hidden)
        self.out = nn.Linear(hidden, 1)
        self.hidden = hidden

    def forward(self, x: torch.Tensor, mask: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        b, steps, _ = x.shape
        h = x.new_zeros(b, self.hidden)
        last = self.x_mean.expand(b, -1)
        for t in range(steps):
            m, dt = mask[:, t], delta[:, t]
            gx = torch.exp(-F.relu(self.gamma_x(dt)))
            last = torch.where(m > 0, x[:, t], last)
            x_hat = m * x[:, t] + (1 - m) * (gx * last + (1 - gx) * self.x_mean)
            h = torch.exp(-F.relu(self.gamma_h(dt))) * h
            h = self.cell(torch.cat([x_hat, m], 1), h)
        return self.out(h).squeeze(1)


def grud_irregular_series(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """GRU-D on sparsely observed multivariate series (70% missing): classify whether the
    latent trajectory ends above where it started; BCE, Adam(1e-3), clip 1, validation each epoch."""
    g = _seed(seed)
    n, steps, d = 1024, 24, 4
    drift = torch.randn(n, 1, generator=g) * 0.15
    latent = (drift + 0.2 * torch.randn(n, steps, generator=g)).cumsum(1)
    x = latent[..., None] * torch.tensor([1.0, -0.5, 0.8, 0.3]) + 0.3 * torch.randn(n, steps, d, generator=g)
    y = (latent[:, -1] > latent[:, 0]).float()
    mask = (torch.rand(n, steps, d, generator=g) > 0.7).float()
    delta = torch.zeros(n, steps, d)
    for t in range(1, steps):
        delta[:, t] = torch.where(mask[:, t - 1] > 0, 1.0, delta[:, t - 1] + 1.0)
    x = x * mask
    x_mean = x[:896].sum((0, 1)) / mask[:896].sum((0, 1)).clamp(min=1)
    model = GRUD(d, 32, x_mean)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.BCEWithLogitsLoss()
    train = DataLoader(
        TensorDataset(x[:896], mask[:896], delta[:896], y[:896]), batch_size=32, shuffle=True, generator=g
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, mb, db, yb in train:
            optimizer.zero_grad()
            loss = criterion(model(xb, mb, db), yb)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = ((model(x[896:], mask[896:], delta[896:]) > 0).float() == y[896:]).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-len(train) :]):.4f} val acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- T5 span corruption


def _span_corrupt(
    tokens: torch.Tensor, g: torch.Generator, rate: float = 0.15, mean_span: int = 3
) -> tuple[list[int], list[int]]:
    """T5's objective on one sequence: drop ~15% of the tokens in spans of mean length 3, each
    span replaced by a sentinel in the input; the target lists sentinel + dropped tokens."""
    n = len(tokens)
    n_spans = max(1, round(n * rate / mean_span))
    starts = sorted(torch.randperm(n - mean_span, generator=g)[: n_spans * 2].tolist())
    chosen: list[int] = []
    for s in starts:
        if len(chosen) == n_spans:
            break
        if not chosen or s >= chosen[-1] + mean_span + 1:
            chosen.append(s)
    inp: list[int] = []
    tgt: list[int] = []
    i = 0
    for k, s in enumerate(chosen):
        sentinel = 3 - k if k < 2 else 1  # ids 3, 2, 1 are sentinels; 0 is padding
        inp += tokens[i:s].tolist() + [sentinel]
        tgt += [sentinel] + tokens[s : s + mean_span].tolist()
        i = s + mean_span
    inp += tokens[i:].tolist()
    return inp, tgt


class TinyT5(nn.Module):
    def __init__(self, vocab: int, d: int = 64, layers: int = 2, max_len: int = 64):
        super().__init__()
        self.shared = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        enc = nn.TransformerEncoderLayer(d, 4, 128, dropout=0.1, batch_first=True, norm_first=True)
        dec = nn.TransformerDecoderLayer(d, 4, 128, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(enc, layers, norm=nn.LayerNorm(d), enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec, layers, norm=nn.LayerNorm(d))
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(
        self, src: torch.Tensor, tgt_in: torch.Tensor, tgt: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        pos_s, pos_t = torch.arange(src.shape[1]), torch.arange(tgt_in.shape[1])
        causal = torch.ones(len(pos_t), len(pos_t), dtype=torch.bool).triu(1)
        memory = self.encoder(self.shared(src) + self.pos(pos_s), src_key_padding_mask=src == 0)
        h = self.decoder(
            self.shared(tgt_in) + self.pos(pos_t),
            memory,
            tgt_mask=causal,
            tgt_is_causal=True,
            memory_key_padding_mask=src == 0,
        )
        logits = self.lm_head(h)
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=0)


def t5_span_corruption_adafactor(
    path: str, steps: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    """T5 pre-training objective on a synthetic bigram language: span corruption (15%, mean
    span 3, sentinels), a pre-norm encoder-decoder, the model returns (logits, loss) like HF's,
    torch.optim.Adafactor at its default lr 1e-2 with relative step decay."""
    g = _seed(seed)
    vocab, length = 64, 32
    corpus = _token_stream(g, 2000, length, vocab)
    model = TinyT5(vocab)
    optimizer = torch.optim.Adafactor(model.parameters(), lr=1e-2)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, len(corpus), (24,), generator=g)
        pairs = [_span_corrupt(corpus[i], g) for i in idx.tolist()]
        src = nn.utils.rnn.pad_sequence([torch.tensor(a) for a, _ in pairs], batch_first=True)
        tgt = nn.utils.rnn.pad_sequence([torch.tensor(b + [0]) for _, b in pairs], batch_first=True)
        tgt_in = torch.cat(
            [torch.zeros(len(tgt), 1, dtype=torch.long), tgt[:, :-1]], 1
        )  # decoder start = pad id
        _, loss = model(src, tgt_in, tgt)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ELECTRA


class TinyEncoder(nn.Module):
    def __init__(self, embedding: nn.Embedding, d: int, layers: int, heads: int, out: int, max_len: int = 64):
        super().__init__()
        self.embedding = embedding  # shared with the other network (ELECTRA ties the embeddings)
        self.proj = nn.Linear(embedding.embedding_dim, d)
        self.pos = nn.Embedding(max_len, d)
        self.norm = nn.LayerNorm(d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, out)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.proj(self.embedding(ids)) + self.pos(torch.arange(ids.shape[1])))
        return self.head(self.encoder(h))


class Electra(nn.Module):
    def __init__(self, vocab: int, emb: int = 32):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.generator = TinyEncoder(self.embedding, 32, 1, 2, vocab)
        self.discriminator = TinyEncoder(self.embedding, 48, 2, 4, 1)


def electra_replaced_token_detection(
    path: str, steps: int = 240, seed: int = 0, bug: str | None = None
) -> list[float]:
    """ELECTRA: a small MLM generator fills 15% masked positions by sampling; the discriminator
    tells replaced tokens from originals; loss = MLM + 50 x RTD; AdamW(5e-4, wd 0.01, none on
    biases and LayerNorms), linear warm-up 10% then linear decay, clip 1."""
    g = _seed(seed)
    vocab, length, mask_id = 64, 32, 1
    corpus = _token_stream(g, 2000, length, vocab)
    model = Electra(vocab)
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "norm" in n]
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "norm" in n)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=5e-4
    )
    warmup = steps // 10
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: s / warmup if s < warmup else max(0.0, (steps - s) / (steps - warmup))
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    model.train()
    for step in range(steps):
        ids = corpus[torch.randint(0, len(corpus), (16,), generator=g)]
        masked = torch.rand(ids.shape, generator=g) < 0.15
        gen_logits = model.generator(ids.masked_fill(masked, mask_id))
        mlm = F.cross_entropy(gen_logits[masked], ids[masked])
        with torch.no_grad():
            sampled = torch.distributions.Categorical(logits=gen_logits[masked]).sample()
        corrupted = ids.clone()
        corrupted[masked] = sampled
        replaced = (corrupted != ids).float()
        rtd = F.binary_cross_entropy_with_logits(model.discriminator(corrupted).squeeze(-1), replaced)
        loss = mlm + 50 * rtd
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(
                f"step {step} mlm {mlm.item():.3f} rtd {rtd.item():.4f} replaced {replaced.mean().item():.3f}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- adapters


class Adapter(nn.Module):
    def __init__(self, d: int, bottleneck: int = 8):
        super().__init__()
        self.down = nn.Linear(d, bottleneck)
        self.up = nn.Linear(bottleneck, d)
        nn.init.normal_(self.down.weight, std=1e-2)
        nn.init.zeros_(self.down.bias)
        nn.init.normal_(self.up.weight, std=1e-2)  # near-identity at the start
        nn.init.zeros_(self.up.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.up(F.gelu(self.down(x)))


class AdapterBlock(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.adapter1: nn.Module = nn.Identity()
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.adapter2: nn.Module = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.adapter1(self.attn(h, h, h, need_weights=False)[0])
        return x + self.adapter2(self.mlp(self.ln2(x)))


class SeqClassifier(nn.Module):
    def __init__(self, vocab: int, classes: int, d: int = 48, layers: int = 2, max_len: int = 32):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(AdapterBlock(d, 4) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embedding(ids) + self.pos(torch.arange(ids.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x).mean(1))


def _pattern_task(
    g: torch.Generator, n: int, vocab: int, length: int, keys: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Classify a sequence by which of the key tokens occurs most often in it."""
    ids = torch.randint(4, vocab, (n, length), generator=g)
    y = torch.randint(0, len(keys), (n,), generator=g)
    for _ in range(4):
        pos = torch.randint(0, length, (n,), generator=g)
        ids[torch.arange(n), pos] = keys[y]
    return ids, y


def adapter_tuning_frozen_transformer(
    path: str, steps: int = 240, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Houlsby adapters: a transformer classifier is first trained on task A (in the script,
    unrecorded), then adapters (bottleneck 8, near-identity) go after attention and MLP, the
    backbone is frozen except the LayerNorms, a new head is trained with the adapters on task B;
    AdamW(1e-3) over the trainable parameters, validation each 40 steps."""
    g = _seed(seed)
    vocab, length = 80, 24
    model = SeqClassifier(vocab, 4)
    opt_a = torch.optim.AdamW(model.parameters(), lr=1e-3)
    xa, ya = _pattern_task(g, 4000, vocab, length, torch.tensor([10, 20, 30, 40]))
    for _ in range(150):  # pre-training on task A
        idx = torch.randint(0, len(xa), (32,), generator=g)
        opt_a.zero_grad()
        F.cross_entropy(model(xa[idx]), ya[idx]).backward()
        opt_a.step()
    xb, yb = _pattern_task(g, 3000, vocab, length, torch.tensor([50, 55, 60, 65, 70]))
    model.head = nn.Linear(48, 5)
    for p in model.parameters():
        p.requires_grad = False
    for blk in model.blocks:
        blk.adapter1, blk.adapter2 = Adapter(48), Adapter(48)
    trainable = [
        p for n, p in model.named_parameters() if "adapter" in n or "ln" in n or "norm" in n or "head" in n
    ]
    for p in trainable:
        p.requires_grad = True
    if bug == "frozen_by_mistake":  # the freezing loop re-run after the adapters were inserted
        for n, p in model.named_parameters():
            if "head" not in n and "ln" not in n and "norm" not in n:
                p.requires_grad = False
    optimizer = torch.optim.AdamW(trainable, lr=1e-3, weight_decay=0.01)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        model.train()
        idx = torch.randint(0, 2600, (32,), generator=g)
        optimizer.zero_grad()
        loss = criterion(model(xb[idx]), yb[idx])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 40 == 39:
            model.eval()
            with torch.no_grad():
                acc = (model(xb[2600:]).argmax(1) == yb[2600:]).float().mean().item()
            print(f"step {step + 1} loss {np.mean(losses[-40:]):.4f} val acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- VICReg


def _augment(x: torch.Tensor, g: torch.Generator, crop: int | None = None) -> torch.Tensor:
    """Random crop (resized back), brightness/contrast jitter and Gaussian noise, per image."""
    n, _, h, w = x.shape
    if crop is not None:
        i = int(torch.randint(0, h - crop + 1, (1,), generator=g))
        j = int(torch.randint(0, w - crop + 1, (1,), generator=g))
        x = F.interpolate(
            x[:, :, i : i + crop, j : j + crop], size=(h, w), mode="bilinear", align_corners=False
        )
    shift = torch.randint(-2, 3, (2,), generator=g)
    x = torch.roll(x, (int(shift[0]), int(shift[1])), (2, 3))
    c = 0.6 + 0.8 * torch.rand(n, 1, 1, 1, generator=g)
    b = 0.2 * torch.randn(n, 1, 1, 1, generator=g)
    return (
        (x - x.mean((2, 3), keepdim=True)) * c
        + x.mean((2, 3), keepdim=True)
        + b
        + 0.1 * torch.randn(x.shape, generator=g)
    )


def _small_convnet(out: int = 64) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(32, out, 3, padding=1), nn.BatchNorm2d(out), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )  # fmt: skip


def _off_diagonal(m: torch.Tensor) -> torch.Tensor:
    n = m.shape[0]
    return m.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


def vicreg_expander(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """VICReg (Bardes et al.): two augmented views, a 3-layer expander with BatchNorm, loss =
    25 x invariance (MSE) + 25 x variance hinge (std >= 1) + 1 x covariance; AdamW(1e-3, wd 1e-6)
    with cosine decay; a linear probe on frozen features at the end."""
    g = _seed(seed)
    images, labels = _gratings(g, 1536)
    x = (images.float() / 255 - 0.5) / 0.25
    loader = DataLoader(TensorDataset(x), batch_size=64, shuffle=True, generator=g, drop_last=True)

    class VICReg(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = _small_convnet(64)
            self.projector = nn.Sequential(
                nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(True), nn.Linear(128, 128), nn.BatchNorm1d(128),
                nn.ReLU(True), nn.Linear(128, 128, bias=False),
            )  # fmt: skip

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            za, zb = self.projector(self.backbone(a)), self.projector(self.backbone(b))
            inv = F.mse_loss(za, zb)
            za, zb = za - za.mean(0), zb - zb.mean(0)
            std_a, std_b = torch.sqrt(za.var(0) + 1e-4), torch.sqrt(zb.var(0) + 1e-4)
            var = (F.relu(1 - std_a).mean() + F.relu(1 - std_b).mean()) / 2
            cov_a, cov_b = za.T @ za / (len(za) - 1), zb.T @ zb / (len(zb) - 1)
            cov = (
                _off_diagonal(cov_a).pow(2).sum() / za.shape[1]
                + _off_diagonal(cov_b).pow(2).sum() / zb.shape[1]
            )
            return 25 * inv + 25 * var + cov

    model = VICReg()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-6)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(loader))
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        for (xb,) in loader:
            loss = model(_augment(xb, g, crop=12), _augment(xb, g, crop=12))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        print(f"epoch {epoch} loss {np.mean(losses[-len(loader) :]):.4f}")
    model.eval()
    with torch.no_grad():
        feats = model.backbone(x)
    probe = torch.linalg.lstsq(
        torch.cat([feats, torch.ones(len(x), 1)], 1), F.one_hot(labels, 4).float()
    ).solution
    acc = ((torch.cat([feats, torch.ones(len(x), 1)], 1) @ probe).argmax(1) == labels).float().mean().item()
    print(f"linear probe acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- pix2pix


class UNetG(nn.Module):
    def __init__(self, cin: int = 3, cout: int = 1, nf: int = 16):
        super().__init__()
        self.d1 = nn.Sequential(nn.Conv2d(cin, nf, 4, 2, 1), nn.LeakyReLU(0.2, True))
        self.d2 = nn.Sequential(
            nn.Conv2d(nf, 2 * nf, 4, 2, 1), nn.InstanceNorm2d(2 * nf), nn.LeakyReLU(0.2, True)
        )
        self.d3 = nn.Sequential(nn.Conv2d(2 * nf, 4 * nf, 4, 2, 1), nn.ReLU(True))
        self.u3 = nn.Sequential(
            nn.ConvTranspose2d(4 * nf, 2 * nf, 4, 2, 1),
            nn.InstanceNorm2d(2 * nf),
            nn.Dropout(0.5),
            nn.ReLU(True),
        )
        self.u2 = nn.Sequential(nn.ConvTranspose2d(4 * nf, nf, 4, 2, 1), nn.InstanceNorm2d(nf), nn.ReLU(True))
        self.u1 = nn.Sequential(nn.ConvTranspose2d(2 * nf, cout, 4, 2, 1), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.d1(x)
        e2 = self.d2(e1)
        h = self.u3(self.d3(e2))
        h = self.u2(torch.cat([h, e2], 1))
        return self.u1(torch.cat([h, e1], 1))


class PatchD(nn.Module):
    def __init__(self, cin: int = 4, nf: int = 16):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(cin, nf, 4, 2, 1), nn.LeakyReLU(0.2, True),
            nn.Conv2d(nf, 2 * nf, 4, 2, 1), nn.InstanceNorm2d(2 * nf), nn.LeakyReLU(0.2, True),
            nn.Conv2d(2 * nf, 1, 3, 1, 1),
        )  # fmt: skip

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([a, b], 1))


def _label_maps(g: torch.Generator, n: int, size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """One-hot label maps (background / disk / bar) and the textured image they render to."""
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    c = torch.rand(n, 2, generator=g) * (size - 6) + 3
    disk = ((xx - c[:, 0, None, None]) ** 2 + (yy - c[:, 1, None, None]) ** 2) < 9
    row = torch.randint(0, size - 3, (n,), generator=g)
    bar = ((yy >= row[:, None, None]) & (yy < row[:, None, None] + 3)) & ~disk
    label = torch.stack([~(disk | bar), disk, bar], 1).float()
    img = 0.2 * torch.sin(xx)[None] * label[:, 0] + 0.8 * label[:, 1] * (
        1 - ((xx - c[:, 0, None, None]) ** 2 + (yy - c[:, 1, None, None]) ** 2) / 12
    )
    img = img - 0.6 * label[:, 2] * torch.cos(0.8 * xx)[None].abs()
    return label, img.clamp(-1, 1)[:, None]


def pix2pix_patchgan(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """pix2pix (Isola et al.): U-Net generator with dropout, a PatchGAN discriminator on
    (input, output) pairs, instance norm, BCE-with-logits GAN loss + 100 x L1, Adam(2e-4,
    betas (0.5, 0.999)) for both, the discriminator loss halved; returns the generator's loss."""
    g = _seed(seed)
    labels, images = _label_maps(g, 1024)
    loader = DataLoader(TensorDataset(labels, images), batch_size=32, shuffle=True, generator=g)
    net_g, net_d = UNetG(), PatchD()
    for m in list(net_g.modules()) + list(net_d.modules()):
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(m.weight, 0.0, 0.02)
            nn.init.zeros_(m.bias)
    opt_g = torch.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    criterion_gan = nn.BCEWithLogitsLoss()
    criterion_l1 = nn.L1Loss()
    hook = Hook(path)
    hook.register_module(net_g, name="generator")
    hook.register_module(net_d, name="discriminator")
    hook.register_loss(criterion_l1)
    losses = []
    for epoch in range(epochs):
        for real_a, real_b in loader:
            fake_b = net_g(real_a)
            opt_d.zero_grad()
            pred_fake = net_d(real_a, fake_b.detach())
            pred_real = net_d(real_a, real_b)
            loss_d = 0.5 * (
                criterion_gan(pred_fake, torch.zeros_like(pred_fake))
                + criterion_gan(pred_real, torch.ones_like(pred_real))
            )
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            pred_fake = net_d(real_a, fake_b)
            loss_g = criterion_gan(pred_fake, torch.ones_like(pred_fake)) + 100 * criterion_l1(fake_b, real_b)
            loss_g.backward()
            opt_g.step()
            losses.append(loss_g.item())
        print(f"epoch {epoch} G {np.mean(losses[-len(loader) :]):.3f} D {loss_d.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- C51


class Chain:
    """A noisy chain: move left/right over 10 states; the right end pays a random reward
    (+1 with p 0.8, else -1) and restarts; every step costs 0.01; 30-step episodes."""

    def __init__(self, g: torch.Generator, n: int = 10):
        self.g, self.n = g, n
        self.reset()

    def reset(self) -> torch.Tensor:
        self.s, self.t = 0, 0
        return self.obs()

    def obs(self) -> torch.Tensor:
        return F.one_hot(torch.tensor(self.s), self.n).float()

    def step(self, a: int) -> tuple[torch.Tensor, float, bool]:
        self.t += 1
        self.s = max(0, min(self.n - 1, self.s + (1 if a == 1 else -1)))
        r = -0.01
        if self.s == self.n - 1:
            r += 1.0 if float(torch.rand(1, generator=self.g)) < 0.8 else -1.0
            self.s = 0
        return self.obs(), r, self.t >= 30


def c51_distributional_dqn(path: str, steps: int = 600, seed: int = 0, bug: str | None = None) -> list[float]:
    """C51 (Bellemare et al.): 51 atoms on [-10, 10], the projected Bellman target, cross-entropy
    loss; replay buffer, target network synced every 100 steps, epsilon 1 -> 0.05, Adam(2.5e-4,
    eps 0.01/32) as in the paper, gamma 0.99, batch 32."""
    g = _seed(seed)
    atoms, vmin, vmax, gamma = 51, -10.0, 10.0, 0.99
    support = torch.linspace(vmin, vmax, atoms)
    dz = (vmax - vmin) / (atoms - 1)
    net = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2 * atoms))
    target = copy.deepcopy(net)
    optimizer = torch.optim.Adam(net.parameters(), lr=2.5e-4, eps=0.01 / 32)
    env = Chain(g)
    buffer: list[tuple[torch.Tensor, int, float, torch.Tensor, bool]] = []
    hook = Hook(path)
    hook.register_module(net)
    losses: list[float] = []
    obs, ret, returns = env.reset(), 0.0, []
    for step in range(steps + 200):
        eps = max(0.05, 1 - step / 400)
        if float(torch.rand(1, generator=g)) < eps:
            a = int(torch.randint(0, 2, (1,), generator=g))
        else:
            with torch.no_grad():
                a = int((torch.softmax(net(obs).view(2, atoms), -1) * support).sum(-1).argmax())
        nxt, r, done = env.step(a)
        buffer.append((obs, a, r, nxt, done))
        buffer = buffer[-5000:]
        ret += r
        obs = nxt
        if done:
            returns.append(ret)
            obs, ret = env.reset(), 0.0
        if step < 200:  # learning starts after 200 transitions
            continue
        batch = [buffer[int(i)] for i in torch.randint(0, len(buffer), (32,), generator=g)]
        s = torch.stack([b[0] for b in batch])
        act = torch.tensor([b[1] for b in batch])
        rew = torch.tensor([b[2] for b in batch])
        s2 = torch.stack([b[3] for b in batch])
        dn = torch.tensor([float(b[4]) for b in batch])
        with torch.no_grad():
            p2 = torch.softmax(target(s2).view(-1, 2, atoms), -1)
            a2 = (p2 * support).sum(-1).argmax(1)
            p2 = p2[torch.arange(32), a2]
            tz = (rew[:, None] + gamma * (1 - dn[:, None]) * support[None]).clamp(vmin, vmax)
            bpos = (tz - vmin) / dz
            lo, hi = bpos.floor().long(), bpos.ceil().long()
            m = torch.zeros(32, atoms)
            m.scatter_add_(1, lo, p2 * (hi.float() - bpos + (lo == hi).float()))
            m.scatter_add_(1, hi, p2 * (bpos - lo.float()))
        logp = F.log_softmax(net(s).view(-1, 2, atoms), -1)[torch.arange(32), act]
        loss = -(m * logp).sum(1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 0:
            target.load_state_dict(net.state_dict())
            print(
                f"step {step} loss {loss.item():.4f} mean return {np.mean(returns[-10:]) if returns else 0:.3f}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- dense detection with focal loss


def _objects_scene(g: torch.Generator, n: int, size: int = 16, stride: int = 4) -> tuple[torch.Tensor, ...]:
    """Images with 1-3 objects (filled squares = class 0, crosses = class 1) and their dense
    targets on the stride-4 grid: per-cell class (-1 background), centre offset and log size."""
    cells = size // stride
    imgs = 0.1 * torch.randn(n, 1, size, size, generator=g)
    cls = torch.full((n, cells, cells), -1, dtype=torch.long)
    box = torch.zeros(n, 4, cells, cells)
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    for i in range(n):
        for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
            cy, cx = (torch.rand(2, generator=g) * (size - 4) + 2).tolist()
            half = float(1.0 + 1.5 * torch.rand(1, generator=g))
            k = int(torch.randint(0, 2, (1,), generator=g))
            inside = ((yy - cy).abs() <= half) & ((xx - cx).abs() <= half)
            shape = inside if k == 0 else inside & (((yy - cy).abs() < 0.7) | ((xx - cx).abs() < 0.7))
            imgs[i, 0] += shape.float()
            gy, gx = int(cy // stride), int(cx // stride)
            cls[i, gy, gx] = k
            box[i, :, gy, gx] = torch.tensor(
                [cy / stride - gy - 0.5, cx / stride - gx - 0.5, math.log(half), math.log(half)]
            )
    return imgs, cls, box


class DenseDetector(nn.Module):
    def __init__(self, classes: int = 2, prior: float = 0.01):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(True),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(True),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(True),
        )  # fmt: skip

        def head(out: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(32, 32, 3, padding=1), nn.GroupNorm(8, 32), nn.ReLU(True),
                nn.Conv2d(32, 32, 3, padding=1), nn.GroupNorm(8, 32), nn.ReLU(True), nn.Conv2d(32, out, 3, padding=1),
            )  # fmt: skip

        self.cls_head, self.box_head = head(classes), head(4)
        for m in list(self.cls_head.modules()) + list(self.box_head.modules()):
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, std=0.01)
                nn.init.zeros_(m.bias)
        nn.init.constant_(self.cls_head[-1].bias, -math.log((1 - prior) / prior))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = self.backbone(x)
        return self.cls_head(f), self.box_head(f)


def _sigmoid_focal_loss(
    logits: torch.Tensor, targets: torch.Tensor, alpha: float = 0.25, gamma: float = 2.0
) -> torch.Tensor:
    p = torch.sigmoid(logits)
    ce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    return (alpha * targets + (1 - alpha) * (1 - targets)) * ce * (1 - p_t) ** gamma


def focal_loss_dense_detector(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A RetinaNet-style one-stage detector on a stride-4 grid: prior-probability bias init 0.01,
    sigmoid focal loss (alpha 0.25, gamma 2) normalized by the number of positives plus smooth L1
    (beta 1/9) on positive cells; SGD(0.01, momentum 0.9, wd 1e-4), LinearLR warm-up from 0.001
    over 50 iterations, then x0.1 at 2/3 and 8/9 of training."""
    g = _seed(seed)
    model = DenseDetector()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    warm = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.001, total_iters=50)
    steps_lr = torch.optim.lr_scheduler.MultiStepLR(
        optimizer, [steps * 2 // 3 - 50, steps * 8 // 9 - 50], gamma=0.1
    )
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warm, steps_lr], milestones=[50])
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    model.train()
    for step in range(steps):
        imgs, cls, box = _objects_scene(g, 16)
        cls_logits, box_pred = model(imgs)
        pos = cls >= 0
        onehot = F.one_hot(cls.clamp(min=0), 2).permute(0, 3, 1, 2).float() * pos[:, None]
        num_pos = max(1.0, float(pos.sum()))
        loss_cls = _sigmoid_focal_loss(cls_logits, onehot).sum() / num_pos
        loss_box = (
            F.smooth_l1_loss(
                box_pred.permute(0, 2, 3, 1)[pos], box.permute(0, 2, 3, 1)[pos], beta=1 / 9, reduction="sum"
            )
            / num_pos
        )
        loss = loss_cls + loss_box
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(
                f"iter {step} loss_cls {loss_cls.item():.4f} loss_box {loss_box.item():.4f} lr {scheduler.get_last_lr()[0]:.5f}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Perceiver


def _waveforms(g: torch.Generator, n: int, length: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Sine, square, sawtooth or triangle waves at random frequency/phase/amplitude, noisy."""
    y = torch.randint(0, 4, (n,), generator=g)
    t = torch.arange(length).float()
    freq = 0.04 + 0.08 * torch.rand(n, 1, generator=g)
    ph = torch.rand(n, 1, generator=g)
    frac = (freq * t + ph) % 1.0
    waves = torch.stack(
        [torch.sin(2 * math.pi * frac), torch.sign(frac - 0.5), 2 * frac - 1, 4 * (frac - 0.5).abs() - 1], 1
    )
    x = waves[torch.arange(n), y] * (0.5 + torch.rand(n, 1, generator=g)) + 0.2 * torch.randn(
        n, length, generator=g
    )
    return x, y


class PerceiverClassifier(nn.Module):
    def __init__(
        self,
        length: int = 64,
        bands: int = 6,
        latents: int = 16,
        d: int = 64,
        classes: int = 4,
        repeats: int = 2,
    ):
        super().__init__()
        pos = torch.linspace(-1, 1, length)[:, None]
        freqs = torch.linspace(1.0, 10 / 2, bands)[None]  # max_freq 10, as in perceiver-pytorch
        self.register_buffer(
            "pos_enc", torch.cat([pos, torch.sin(math.pi * pos * freqs), torch.cos(math.pi * pos * freqs)], 1)
        )
        cin = 1 + self.pos_enc.shape[1]
        self.latents = nn.Parameter(torch.randn(latents, d) * 0.02)
        self.kv_norm = nn.LayerNorm(cin)
        self.q_norm = nn.LayerNorm(d)
        self.cross = nn.MultiheadAttention(d, 1, kdim=cin, vdim=cin, batch_first=True)
        self.cross_mlp = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))
        layer = nn.TransformerEncoderLayer(
            d, 4, 2 * d, dropout=0.1, activation="gelu", batch_first=True, norm_first=True
        )
        self.latent_tf = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.repeats = repeats  # the cross-attend + latent block is applied again with shared weights
        self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kv = self.kv_norm(torch.cat([x[..., None], self.pos_enc.expand(len(x), -1, -1)], -1))
        z = self.latents.expand(len(x), -1, -1)
        for _ in range(self.repeats):
            z = z + self.cross(self.q_norm(z), kv, kv, need_weights=False)[0]
            z = z + self.cross_mlp(z)
            z = self.latent_tf(z)
        return self.head(z.mean(1))


def perceiver_accumulate2(
    path: str, steps: int = 200, accum: int = 2, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Perceiver on raw 1-D waveforms: Fourier position features (6 bands, max frequency 10), 16 latents,
    cross-attention and a 2-layer latent transformer repeated twice with shared weights;
    AdamW(1e-3, wd 0.1), cosine with warm-up, gradient accumulation over 2 micro-batches of 16,
    clip 1.0; the loss returned is each optimizer step's mean."""
    g = _seed(seed)
    x, y = _waveforms(g, 4000 + 400)
    model = PerceiverClassifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    warmup = 20
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (
            (s + 1) / warmup
            if s < warmup
            else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup)))
        ),
    )
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        model.train()
        optimizer.zero_grad()
        total = 0.0
        for _ in range(accum):
            idx = torch.randint(0, 4000, (16,), generator=g)
            loss = criterion(model(x[idx]), y[idx]) / accum
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(total)
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                acc = (model(x[4000:]).argmax(1) == y[4000:]).float().mean().item()
            print(f"step {step + 1} loss {np.mean(losses[-50:]):.4f} val acc {acc:.3f}")
    hook.close()
    return losses


_densenet = healthy("densenet_bc_nesterov_multistep_uint8", "DenseNet", densenet_bc_nesterov)
_pointnet = healthy("pointnet_tnet_orthogonal_reg", "point cloud", pointnet_tnet)
_deep_sets = healthy("deep_sets_digit_sum_l1", "set learning", deep_sets_digit_sum)
_gat = healthy("gat_dense_adjacency_early_stopping", "graph attention", gat_dense_early_stopping)
_evidential = healthy(
    "evidential_regression_nig_early_stop", "evidential regression", evidential_regression_cubic
)
_curriculum = healthy("curriculum_linear_pacing_mlp", "curriculum learning", curriculum_pacing_mlp)
_dcn = healthy("dcn_v2_cross_network_ctr", "CTR cross network", dcn_v2_ctr)
_ebag = healthy(
    "embeddingbag_text_sgd_lr5_bigrams", "text classification (bag of n-grams)", embeddingbag_text_classifier
)
_han = healthy("han_hierarchical_attention_docs", "document classification", han_document_classification)
_adapters = healthy("houlsby_adapters_frozen_backbone", "adapter tuning", adapter_tuning_frozen_transformer)

PIPELINES = [
    healthy("mlp_mixer_bf16_autocast_label_smoothing", "MLP-Mixer", mlp_mixer_bf16),
    healthy("convnext_layer_scale_drop_path_warmup", "ConvNeXt", convnext_warmup_cosine),
    healthy("r2plus1d_video_direction_steplr", "video", r2plus1d_video),
    healthy("set_transformer_isab_pma_max", "set learning", set_transformer_max),
    healthy("nice_additive_coupling_logistic_prior", "normalizing flow", nice_logistic_prior),
    healthy("made_masked_autoencoder_binary", "density estimation", made_binary_patterns),
    healthy("rectified_flow_moons_ema", "flow matching", rectified_flow_moons),
    healthy("fourier_features_coordinate_mlp", "coordinate MLP", fourier_features_image),
    healthy("gated_attention_mil_bag_per_step", "multiple-instance learning", attention_mil_bags),
    healthy("prototypical_networks_5way_5shot", "few-shot", protonet_episodes),
    healthy("glove_weighted_least_squares_adagrad", "word vectors", glove_cooccurrence_adagrad),
    healthy("neumf_gmf_mlp_negative_sampling", "collaborative filtering", neumf_negative_sampling),
    healthy("listnet_top_one_ranking", "learning to rank", listnet_ranking),
    healthy("hamiltonian_nn_mass_spring", "physics-informed", hamiltonian_nn_spring),
    healthy("lista_unrolled_sparse_coding_rmsprop", "unrolled optimization", lista_sparse_coding),
    healthy("neural_additive_model_exu", "interpretable tabular", nam_exu_tabular),
    healthy("dkt_knowledge_tracing_lstm", "knowledge tracing", dkt_lstm_students),
    healthy("wavenet_mu_law_gated_dilated", "audio generation", wavenet_mu_law),
    healthy("patchtst_revin_onecycle", "transformer forecasting", patchtst_onecycle),
    healthy("gru_d_irregular_missing_values", "irregular time series", grud_irregular_series),
    healthy("t5_span_corruption_adafactor", "span corruption", t5_span_corruption_adafactor),
    healthy("electra_replaced_token_detection", "ELECTRA", electra_replaced_token_detection),
    healthy("vicreg_variance_invariance_covariance", "self-supervised (VICReg)", vicreg_expander),
    healthy("pix2pix_unet_patchgan_l1", "image-to-image GAN", pix2pix_patchgan),
    healthy("c51_distributional_chain", "distributional RL", c51_distributional_dqn),
    healthy("retinanet_focal_loss_dense_head", "dense detection", focal_loss_dense_detector),
    healthy("perceiver_fourier_latents_accumulate2", "Perceiver", perceiver_accumulate2),
    _densenet,
    _pointnet,
    _deep_sets,
    _gat,
    _evidential,
    _curriculum,
    _dcn,
    _ebag,
    _han,
    _adapters,
    buggy(_dcn, "lr_x100"),
    buggy(_pointnet, "no_zero_grad"),
    buggy(_ebag, "shuffled_labels"),
    buggy(_densenet, "inputs_x255"),
    buggy(_han, "softmax_before_ce"),
    buggy(_deep_sets, "dead_relu_init"),
    buggy(_curriculum, "deep_sigmoid"),
    buggy(_adapters, "frozen_by_mistake"),
    buggy(_evidential, "log_zero_nan"),
    buggy(_gat, "train_in_eval_mode"),
]
