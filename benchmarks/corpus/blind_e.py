"""A blind held-out set (issue 26), part E: plain PyTorch trainings of kinds and practices not yet
in the corpus, written without running mldbg's rules on them.

Optimizers written by hand (Lion, LAMB, Riemannian SGD), Adagrad on hashed click features,
RMSprop on Tweedie claims; schedules: polynomial (DeepLab), cyclic triangular2, warm restarts,
cosine with warm-up; a capsule network with dynamic routing, a ReZero transformer, a
Kolmogorov-Arnold network with RBF bases, a Gaussian process fitted by its marginal
likelihood, a Gaussian mixture fitted by SGD, center loss, an edge-conditioned MPNN on
molecule-like graphs, a conditional neural process, zero-inflated negative binomial counts,
contrastive predictive coding with weight norm, a masked autoencoder in bf16 autocast, Deep SVDD,
generalized cross entropy on noisy labels, logit adjustment on long-tailed classes, a tied-weight
autoencoder, a 20-layer highway network, FiLM conditioning, linear-probe-then-fine-tune at a tiny
learning rate, GE2E speaker verification, a Sinkhorn-divergence generator, CNN-LSTM captioning
with tied embeddings, scale-invariant depth with GroupNorm, an SDF with an eikonal term,
Poincare embeddings, InceptionTime with gradient accumulation, a neural temporal point process,
modular addition with weight decay 1, a contractive autoencoder, SNGP (spectral norm and a
random-feature GP head), and uncertainty-weighted multi-task losses.

Every script is written the way its kind is usually written, with the README's two lines.
Ten buggy twins, one per key of `BUGS`, each injected as a user's mistake: softmax before the
cross entropy (char-CNN), a negative-bias init (LAMB MLP), the learning rate x100 (Tweedie),
`model.train()` forgotten after validation (center loss), a 5-layer sigmoid stack (GCE),
`zero_grad` dropped (highway), the encoder never unfrozen after the linear probe (LP-FT), the
valid-depth mask left out so log(0) reaches the loss (SILog), images fed as 0..255 bytes
(captioning), labels shuffled apart from their windows (InceptionTime). `SPLIT = BLIND3`.
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import BLIND3, buggy, healthy

SPLIT = BLIND3

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 23)


def _glyphs(
    g: torch.Generator, n: int, size: int = 12, classes: int = 6
) -> tuple[torch.Tensor, torch.Tensor]:
    """Grey size x size images in [0, 1] of one of `classes` shapes (square, ring, plus, cross,
    bar, triangle, dot, frame) at a random offset and contrast, with noise. (n, 1, s, s), labels."""
    c = (size - 1) / 2
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    r = size / 4
    protos = torch.stack(
        [
            ((yy - c).abs() < r) & ((xx - c).abs() < r),
            (((yy - c) ** 2 + (xx - c) ** 2).sqrt() - r).abs() < 0.9,
            ((yy - c).abs() < 1) | ((xx - c).abs() < 1),
            ((yy - xx).abs() < 1) | ((yy + xx - 2 * c).abs() < 1),
            (yy - c).abs() < 1.5,
            (yy - c > -r) & ((xx - c).abs() < (yy - c + r) / 2),
            ((yy - c) ** 2 + (xx - c) ** 2) < (r / 2) ** 2,
            (((yy - c).abs() - r).abs() < 0.8) & ((xx - c).abs() <= r)
            | (((xx - c).abs() - r).abs() < 0.8) & ((yy - c).abs() <= r),
        ]
    ).float()[:classes]
    y = torch.randint(0, classes, (n,), generator=g)
    shift = torch.randint(-2, 3, (n, 2), generator=g)
    imgs = torch.stack(
        [torch.roll(protos[k], (int(a), int(b)), (0, 1)) for k, (a, b) in zip(y, shift, strict=True)]
    )
    imgs = imgs * (0.6 + 0.4 * torch.rand(n, 1, 1, generator=g)) + 0.1 * torch.randn(imgs.shape, generator=g)
    return imgs.clamp(0, 1).unsqueeze(1), y


# ----------------------------------------------------------------------------- char-CNN + Lion

_TOPICS = [
    "goal match team coach league score player season win referee striker keeper",
    "recipe oven flour butter sugar bake dinner spicy sauce garlic salad taste",
    "laptop phone battery chip software update screen cloud app server code bug",
    "election vote senate policy minister law budget party tax court debate reform",
]
_FILLER = [
    "the",
    "a",
    "and",
    "of",
    "to",
    "in",
    "is",
    "it",
    "was",
    "for",
    "on",
    "with",
    "this",
    "that",
    "very",
    "really",
    "just",
    "so",
]
_CHARS = "abcdefghijklmnopqrstuvwxyz "


def _topic_texts(g: torch.Generator, n: int, length: int = 96) -> tuple[torch.Tensor, torch.Tensor]:
    """Short noisy 'posts' about one of four topics, as character ids (0 = padding)."""
    y = torch.randint(0, len(_TOPICS), (n,), generator=g)
    words = [t.split() for t in _TOPICS]
    out = torch.zeros(n, length, dtype=torch.long)
    for i in range(n):
        toks = []
        while len(" ".join(toks)) < length:
            u = float(torch.rand((), generator=g))
            pool = (
                words[int(y[i])]
                if u < 0.35
                else words[int(torch.randint(0, 4, (), generator=g))]
                if u < 0.45
                else _FILLER
            )
            toks.append(pool[int(torch.randint(0, len(pool), (), generator=g))])
        text = " ".join(toks)[:length]
        out[i] = torch.tensor([_CHARS.index(ch) + 1 for ch in text])
    return out, y


class Lion(torch.optim.Optimizer):
    """Lion (Chen et al., 2023): the sign of an interpolated momentum, decoupled weight decay."""

    def __init__(
        self, params, lr: float = 1e-4, betas: tuple[float, float] = (0.9, 0.99), weight_decay: float = 0.0
    ):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[override]
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                m = state["exp_avg"]
                p.mul_(1 - group["lr"] * group["weight_decay"])
                update = m.mul(b1).add(p.grad, alpha=1 - b1).sign_()
                p.add_(update, alpha=-group["lr"])
                m.mul_(b2).add_(p.grad, alpha=1 - b2)


class CharCNN(nn.Module):
    """Zhang et al.'s character CNN, shrunk: embedding, conv 7 / pool 3, conv 3, global max, FC."""

    def __init__(self, vocab: int, classes: int, bug: str | None = None):
        super().__init__()
        self.embed = nn.Embedding(vocab, 16, padding_idx=0)
        self.conv = nn.Sequential(
            nn.Conv1d(16, 64, 7),
            nn.ReLU(),
            nn.MaxPool1d(3),
            nn.Conv1d(64, 64, 3),
            nn.ReLU(),
            nn.Conv1d(64, 64, 3),
            nn.ReLU(),
        )
        self.fc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, classes))
        self.softmax = nn.Softmax(dim=1) if bug == "softmax_before_ce" else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(self.embed(x).transpose(1, 2)).amax(2)
        return self.softmax(self.fc(h))


def char_cnn_lion(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    x, y = _topic_texts(g, 3000)
    model = CharCNN(len(_CHARS) + 1, 4, bug)
    criterion = nn.CrossEntropyLoss()
    opt = Lion(model.parameters(), lr=3e-4, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * s / steps))
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(x), (64,), generator=g)
        loss = criterion(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- LAMB, batch 1024


class LAMB(torch.optim.Optimizer):
    """LAMB (You et al., 2020): Adam's step with decoupled weight decay, rescaled per tensor by
    the trust ratio ||w|| / ||update||."""

    def __init__(
        self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6, weight_decay: float = 0.01
    ):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[override]
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["t"], st["m"], st["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                st["t"] += 1
                st["m"].mul_(b1).add_(p.grad, alpha=1 - b1)
                st["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                mhat = st["m"] / (1 - b1 ** st["t"])
                vhat = st["v"] / (1 - b2 ** st["t"])
                update = mhat / (vhat.sqrt() + group["eps"])
                if p.ndim > 1:  # no decay and no trust ratio on biases and norms
                    update = update + group["weight_decay"] * p
                    w_norm, u_norm = p.norm(), update.norm()
                    trust = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones(()))
                else:
                    trust = torch.ones(())
                p.add_(update * trust, alpha=-group["lr"])


def _forest_cover(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Covertype-like rows: 10 continuous measurements (skewed, different units) and two
    one-hot fields (4 areas, 40 soil types); 7 classes from a random teacher, unbalanced."""
    cont = torch.randn(n, 10, generator=g)
    cont[:, 0] = 2500 + 300 * cont[:, 0]  # elevation in metres
    cont[:, 1] = torch.rand(n, generator=g) * 360  # aspect in degrees
    cont[:, 3:6] = cont[:, 3:6].abs() * 200  # distances
    area = torch.randint(0, 4, (n,), generator=g)
    soil = torch.randint(0, 40, (n,), generator=g)
    z = (cont - cont.mean(0)) / cont.std(0)
    teacher = torch.randn(10 + 4 + 40, 7, generator=g)
    feats = torch.cat([z, F.one_hot(area, 4).float(), F.one_hot(soil, 40).float()], 1)
    logits = torch.tanh(feats @ teacher) * 3 + torch.tensor([1.5, 1.5, 0.5, -1.0, -0.5, 0.0, 0.3])
    y = torch.distributions.Categorical(logits=logits).sample()
    return torch.cat([cont, F.one_hot(area, 4).float(), F.one_hot(soil, 40).float()], 1), y


def lamb_large_batch_tabular(
    path: str, steps: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    g = _seed(seed)
    x, y = _forest_cover(g, 40000)
    mean, std = x[:, :10].mean(0), x[:, :10].std(0)
    x[:, :10] = (x[:, :10] - mean) / std
    layers = []
    for d_in, d_out in [(54, 256), (256, 256), (256, 128)]:
        lin = nn.Linear(d_in, d_out)
        if bug == "dead_relu_init":  # a 'positive-only' init copied from a forum post
            nn.init.constant_(lin.bias, -1.0)
            nn.init.uniform_(lin.weight, -0.01, 0.01)
        layers += [lin, nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(128, 7))
    criterion = nn.CrossEntropyLoss()
    opt = LAMB(model.parameters(), lr=5e-3, weight_decay=0.01)
    warm = 20
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else (1 - (s - warm) / (steps - warm)) ** 1.0
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(x), (1024,), generator=g)
        loss = criterion(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- hashed logistic regression, Adagrad


def hashed_clicks_adagrad(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """Online click prediction: 12 categorical fields hashed into 2**14 buckets (the hashing
    trick), a logistic regression as an EmbeddingBag of weights, Adagrad, each batch seen once."""
    g = _seed(seed)
    buckets, fields = 2**14, 12
    cards = torch.tensor([3, 7, 24, 50, 100, 300, 1000, 5, 12, 2000, 40, 8])
    true_w = [torch.randn(int(c), generator=g) * (0.8 if i < 6 else 0.3) for i, c in enumerate(cards)]

    def batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        u = torch.rand(n, fields, generator=g)
        vals = (u**2 * cards).long()  # popular values are frequent, a long tail of rare ones
        score = sum(true_w[f][vals[:, f]] for f in range(fields)) - 3.2
        click = (torch.rand(n, generator=g) < torch.sigmoid(score)).float()
        ids = (vals * 1000003 + torch.arange(fields) * 7919) % buckets
        return ids, click

    class HashedLogReg(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.EmbeddingBag(buckets, 1, mode="sum")
            nn.init.zeros_(self.w.weight)
            self.bias = nn.Parameter(torch.zeros(1))

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.w(ids).squeeze(1) + self.bias

    model = HashedLogReg()
    criterion = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        ids, click = batch(256)
        loss = criterion(model(ids), click)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- dilated FCN, poly LR


def _shape_scenes(g: torch.Generator, n: int, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """RGB scenes with a disc, a box and a bar of random colours on a textured background;
    per-pixel labels 0 background, 1 disc, 2 box, 3 bar, and 255 (ignore) on a one-pixel
    border around each object, the way VOC marks its boundaries."""
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    imgs = 0.3 * torch.rand(n, 3, 1, 1, generator=g) + 0.1 * torch.randn(n, 3, size, size, generator=g)
    labels = torch.zeros(n, size, size, dtype=torch.long)
    for i in range(n):
        c = torch.randint(6, size - 6, (3, 2), generator=g).float()
        r = 3 + 3 * torch.rand(3, generator=g)
        masks = [
            ((yy - c[0, 0]) ** 2 + (xx - c[0, 1]) ** 2).sqrt() - r[0],
            torch.maximum((yy - c[1, 0]).abs(), (xx - c[1, 1]).abs()) - r[1],
            torch.maximum((yy - c[2, 0]).abs() * 3, (xx - c[2, 1]).abs()) - r[2] * 1.5,
        ]
        for k, dist in enumerate(masks, 1):
            colour = torch.rand(3, 1, 1, generator=g) * 0.7 + 0.3
            imgs[i] = torch.where(dist < 0, colour.expand(3, size, size), imgs[i])
            labels[i][dist.abs() < 0.7] = 255
            labels[i][dist < -0.7] = k
    return imgs.clamp(0, 1), labels


class DilatedFCN(nn.Module):
    """A DeepLab-v1-shaped net: stride-4 stem, dilated 3x3 blocks (rates 2, 4, 8), a 1x1
    classifier, bilinear upsampling to the input size."""

    def __init__(self, classes: int = 4, ch: int = 32):
        super().__init__()

        def block(cin: int, cout: int, stride: int = 1, dil: int = 1) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, padding=dil, dilation=dil, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
            )

        self.stem = nn.Sequential(block(3, ch // 2, 2), block(ch // 2, ch, 2))
        self.dilated = nn.Sequential(block(ch, ch, dil=2), block(ch, ch, dil=4), block(ch, ch, dil=8))
        self.classifier = nn.Conv2d(ch, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.classifier(self.dilated(self.stem(x)))
        return F.interpolate(out, size=x.shape[-2:], mode="bilinear", align_corners=False)


def dilated_fcn_poly_lr(path: str, steps: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    imgs, labels = _shape_scenes(g, 600)
    mean, std = imgs.mean((0, 2, 3), keepdim=True), imgs.std((0, 2, 3), keepdim=True)
    model = DilatedFCN()
    criterion = nn.CrossEntropyLoss(ignore_index=255)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=steps, power=0.9)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, len(imgs), (16,), generator=g)
        x, t = imgs[idx], labels[idx]
        if torch.rand((), generator=g) < 0.5:  # random horizontal flip
            x, t = x.flip(-1), t.flip(-1)
        loss = criterion(model((x - mean) / std), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- capsule network


def _squash(s: torch.Tensor, dim: int = -1) -> torch.Tensor:
    n2 = (s**2).sum(dim, keepdim=True)
    return n2 / (1 + n2) * s / (n2 + 1e-8).sqrt()


class CapsNet(nn.Module):
    """Sabour et al.'s CapsNet, shrunk to 16x16 glyphs: conv, primary capsules, class capsules
    by three iterations of routing-by-agreement, and a reconstruction decoder on the true
    class's capsule."""

    def __init__(self, classes: int = 6, prim_caps: int = 8, prim_dim: int = 8, caps_dim: int = 12):
        super().__init__()
        self.classes, self.prim_dim = classes, prim_dim
        self.conv1 = nn.Conv2d(1, 32, 5)  # 16 -> 12
        self.primary = nn.Conv2d(32, prim_caps * prim_dim, 5, stride=2)  # 12 -> 4
        n_prim = prim_caps * 4 * 4
        self.W = nn.Parameter(0.05 * torch.randn(1, n_prim, classes, caps_dim, prim_dim))
        self.decoder = nn.Sequential(
            nn.Linear(classes * caps_dim, 128),
            nn.ReLU(),
            nn.Linear(128, 256),
            nn.ReLU(),
            nn.Linear(256, 256),
            nn.Sigmoid(),
        )

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.relu(self.conv1(x))
        u = self.primary(h)
        b = u.shape[0]
        u = _squash(u.view(b, -1, self.prim_dim, 4 * 4).permute(0, 1, 3, 2).reshape(b, -1, self.prim_dim))
        u_hat = (self.W @ u[:, :, None, :, None]).squeeze(-1)  # (b, n_prim, classes, caps_dim)
        logits = torch.zeros(b, u_hat.shape[1], self.classes)
        for it in range(3):
            c = logits.softmax(2)
            v = _squash((c[..., None] * u_hat).sum(1))  # (b, classes, caps_dim)
            if it < 2:
                logits = logits + (u_hat * v[:, None]).sum(-1)
        lengths = v.norm(dim=-1)
        masked = (v * F.one_hot(y, self.classes)[..., None]).flatten(1)
        return lengths, self.decoder(masked)


def capsnet_dynamic_routing(
    path: str, steps: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    g = _seed(seed)
    imgs, y = _glyphs(g, 3000, size=16, classes=6)
    model = CapsNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.96)  # per 'epoch' of 50 batches
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, len(imgs), (32,), generator=g)
        x, t = imgs[idx], y[idx]
        lengths, recon = model(x, t)
        onehot = F.one_hot(t, 6).float()
        margin = onehot * F.relu(0.9 - lengths) ** 2 + 0.5 * (1 - onehot) * F.relu(lengths - 0.1) ** 2
        loss = margin.sum(1).mean() + 0.0005 * ((recon - x.flatten(1)) ** 2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % 50 == 0:
            sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ReZero transformer


class ReZeroLayer(nn.Module):
    """x + alpha * f(x) with alpha a learned scalar starting at 0, and no LayerNorm (ReZero)."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.alpha = nn.Parameter(torch.zeros(1))
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.alpha * self.drop(self.attn(x, x, x, need_weights=False)[0])
        return x + self.alpha * self.drop(self.ff(x))


class ReZeroClassifier(nn.Module):
    def __init__(self, vocab: int, classes: int, d: int = 48, layers: int = 3, max_len: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(0.02 * torch.randn(1, max_len, d))
        self.layers = nn.ModuleList(ReZeroLayer(d, 4) for _ in range(layers))
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.pos[:, : x.shape[1]]
        for layer in self.layers:
            h = layer(h)
        return self.head(h.mean(1))


def rezero_transformer(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """Which of the tokens 1, 2, 3 occurs most often among 24 tokens of a vocabulary of 16."""
    g = _seed(seed)
    n = 6000
    mix = torch.distributions.Dirichlet(torch.ones(3)).sample((n,)) * 0.5
    probs = torch.cat([mix, torch.full((n, 12), 0.5 / 12)], 1)
    x = torch.multinomial(probs, 24, replacement=True, generator=g)
    x = x + 1  # tokens 1..15; 1, 2 and 3 are the ones counted
    counts = torch.stack([(x == k).sum(1) for k in (1, 2, 3)], 1).float()
    y = (counts + 0.1 * torch.tensor([0.3, 0.2, 0.1])).argmax(1)  # ties to the smaller token
    model = ReZeroClassifier(16, 3)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, n, (32,), generator=g)
        loss = criterion(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- KAN (RBF bases)


class FastKANLayer(nn.Module):
    """A Kolmogorov-Arnold layer in the FastKAN form: LayerNorm, each input expanded on G
    Gaussian radial bases on a fixed grid, a learned spline weight per (output, input, basis),
    plus a SiLU base branch."""

    def __init__(self, d_in: int, d_out: int, grid: int = 8, lo: float = -2.0, hi: float = 2.0):
        super().__init__()
        self.norm = nn.LayerNorm(d_in)
        self.register_buffer("centers", torch.linspace(lo, hi, grid))
        self.h = (hi - lo) / (grid - 1)
        self.spline = nn.Linear(d_in * grid, d_out, bias=False)
        nn.init.trunc_normal_(self.spline.weight, std=0.1)
        self.base = nn.Linear(d_in, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.norm(x)
        phi = torch.exp(-(((z[..., None] - self.centers) / self.h) ** 2))
        return self.spline(phi.flatten(-2)) + self.base(F.silu(x))


def kan_rbf_symbolic_regression(
    path: str, steps: int = 600, seed: int = 0, bug: str | None = None
) -> list[float]:
    """f(x, y) = exp(sin(pi x) + y^2) on [-1, 1]^2, the KAN paper's toy example, with noise."""
    g = _seed(seed)
    x = torch.rand(3000, 2, generator=g) * 2 - 1
    y = torch.exp(torch.sin(math.pi * x[:, :1]) + x[:, 1:] ** 2) + 0.05 * torch.randn(3000, 1, generator=g)
    model = nn.Sequential(FastKANLayer(2, 8), FastKANLayer(8, 1))
    criterion = nn.MSELoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(x), (256,), generator=g)
        loss = criterion(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Gaussian process


class ExactGP(nn.Module):
    """A zero-mean GP with an RBF kernel plus a periodic kernel; hyper-parameters are positive
    through softplus; the loss is the negative log marginal likelihood per point."""

    def __init__(self, period: float):
        super().__init__()
        self.raw_len = nn.Parameter(torch.tensor(0.0))
        self.raw_scale = nn.Parameter(torch.tensor(0.0))
        self.raw_per_len = nn.Parameter(torch.tensor(0.0))
        self.raw_period = nn.Parameter(torch.tensor(math.log(math.expm1(period))))  # softplus^-1
        self.raw_per_scale = nn.Parameter(torch.tensor(0.0))
        self.raw_noise = nn.Parameter(torch.tensor(-1.0))

    def kernel(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        d = a[:, None] - b[None, :]
        rbf = F.softplus(self.raw_scale) * torch.exp(-0.5 * d**2 / F.softplus(self.raw_len) ** 2)
        per = torch.sin(math.pi * d.abs() / F.softplus(self.raw_period)) ** 2
        return rbf + F.softplus(self.raw_per_scale) * torch.exp(-2 * per / F.softplus(self.raw_per_len) ** 2)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        n = len(x)
        k = self.kernel(x, x) + (F.softplus(self.raw_noise) + 1e-4) * torch.eye(n)
        chol = torch.linalg.cholesky(k)
        alpha = torch.cholesky_solve(y[:, None], chol)
        nll = 0.5 * (y[:, None] * alpha).sum() + chol.diagonal().log().sum() + 0.5 * n * math.log(2 * math.pi)
        return nll / n


def gp_marginal_likelihood(path: str, steps: int = 150, seed: int = 0, bug: str | None = None) -> list[float]:
    """Monthly-CO2-like series: a trend, a yearly cycle and noise, standardised; the kernel's
    hyper-parameters fitted by Adam on the exact marginal likelihood (full batch)."""
    g = _seed(seed)
    t = torch.sort(torch.rand(300, generator=g) * 10).values
    y = 0.4 * t + 1.5 * torch.sin(2 * math.pi * t) + 0.3 * torch.randn(300, generator=g)
    y = (y - y.mean()) / y.std()
    x = (t - t.mean()) / t.std()
    model = ExactGP(period=1.0 / t.std().item())  # start the period at a year, as one knows it
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Gaussian mixture by SGD


class GaussianMixture(nn.Module):
    """K full-covariance components: mixture logits, means and Cholesky factors with a
    softplus diagonal; log-likelihood by logsumexp over components."""

    def __init__(self, init_means: torch.Tensor):
        super().__init__()
        k, d = init_means.shape
        self.logits = nn.Parameter(torch.zeros(k))
        self.means = nn.Parameter(init_means.clone())
        self.raw_diag = nn.Parameter(torch.zeros(k, d))
        self.offdiag = nn.Parameter(torch.zeros(k, d, d))

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        scale_tril = torch.tril(self.offdiag, -1) + torch.diag_embed(F.softplus(self.raw_diag) + 1e-3)
        comp = torch.distributions.MultivariateNormal(self.means, scale_tril=scale_tril)
        return torch.logsumexp(comp.log_prob(x[:, None, :]) + self.logits.log_softmax(0), dim=1)


def gmm_sgd_density(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    centers = torch.tensor([[0.0, 0.0], [3.0, 3.0], [-3.0, 2.0], [2.0, -3.0], [-2.5, -2.5]])
    rot = torch.randn(5, 2, 2, generator=g) * 0.5
    comp = torch.randint(0, 5, (8000,), generator=g, dtype=torch.long)
    comp = torch.where(torch.rand(8000, generator=g) < 0.4, torch.zeros_like(comp), comp)  # unequal weights
    data = centers[comp] + (rot[comp] @ torch.randn(8000, 2, 1, generator=g)).squeeze(-1)
    model = GaussianMixture(data[torch.randperm(len(data), generator=g)[:8]])
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        x = data[torch.randint(0, len(data), (256,), generator=g)]
        loss = -model.log_prob(x).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- center loss


class CenterLoss(nn.Module):
    """Wen et al.'s center loss: half the squared distance of each feature to its class center;
    the centers are parameters of the loss, moved by their own SGD."""

    def __init__(self, classes: int, dim: int):
        super().__init__()
        self.centers = nn.Parameter(torch.randn(classes, dim))

    def forward(self, feats: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return 0.5 * ((feats - self.centers[labels]) ** 2).sum(1).mean()


class FaceNet(nn.Module):
    def __init__(self, d_in: int, classes: int, emb: int = 16):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(d_in, 128),
            nn.BatchNorm1d(128),
            nn.PReLU(),
            nn.Dropout(0.2),
            nn.Linear(128, 128),
            nn.BatchNorm1d(128),
            nn.PReLU(),
            nn.Linear(128, emb),
        )
        self.fc = nn.Linear(emb, classes)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = self.body(x)
        return f, self.fc(f)


def center_loss_face_embeddings(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """20 identities, 64-d 'face descriptors': an identity prototype mixed with pose and
    lighting nuisances shared across identities, plus noise; CE + 0.01 * center loss."""
    g = _seed(seed)
    ids, d = 20, 64
    proto = torch.randn(ids, d, generator=g)
    nuisance = torch.randn(6, d, generator=g) * 1.5

    def sample(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, ids, (n,), generator=g)
        x = proto[y] + torch.randn(n, 6, generator=g) @ nuisance + 0.8 * torch.randn(n, d, generator=g)
        return x, y

    x_train, y_train = sample(4000)
    x_val, y_val = sample(500)
    model = FaceNet(d, ids)
    center_loss = CenterLoss(ids, 16)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    opt_center = torch.optim.SGD(center_loss.parameters(), lr=0.5)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[150, 250], gamma=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        if step % 50 == 0:
            model.eval()
            with torch.no_grad():
                acc = (model(x_val)[1].argmax(1) == y_val).float().mean().item()
            print(f"step {step} val acc {acc:.3f}")
            if bug != "train_in_eval_mode":  # the bug: model.train() forgotten after validation
                model.train()
        idx = torch.randint(0, len(x_train), (128,), generator=g)
        feats, logits = model(x_train[idx])
        loss = criterion(logits, y_train[idx]) + 0.01 * center_loss(feats, y_train[idx])
        opt.zero_grad()
        opt_center.zero_grad()
        loss.backward()
        for p in center_loss.parameters():  # the centers' own rate alpha, independent of lambda
            p.grad.data *= 1.0 / 0.01
        opt.step()
        opt_center.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- MPNN on molecule-like graphs


def _molecule_batches(g: torch.Generator, batches: int, per_batch: int) -> list[tuple[torch.Tensor, ...]]:
    """Random 'molecules' of 6 to 14 atoms (4 atom types) on a random tree plus a few ring
    bonds (3 bond types); the target is a sum of per-bond energies, a per-atom term and a ring
    correction, plus noise. Each batch is already collated: atoms, edges (both directions),
    bond types, graph index, targets."""
    bond_energy = torch.randn(4, 4, 3, generator=g)
    atom_energy = torch.randn(4, generator=g)
    out = []
    for _ in range(batches):
        atoms, src, dst, bonds, graph, targets = [], [], [], [], [], []
        offset = 0
        for m in range(per_batch):
            n = int(torch.randint(6, 15, (), generator=g))
            a = torch.randint(0, 4, (n,), generator=g)
            e = [(i, int(torch.randint(0, i, (), generator=g))) for i in range(1, n)]
            rings = int(torch.randint(0, 3, (), generator=g))
            for _ in range(rings):
                i, j = torch.randint(0, n, (2,), generator=g).tolist()
                if i != j:
                    e.append((i, j))
            b = torch.randint(0, 3, (len(e),), generator=g)
            ei = torch.tensor(e)
            y = bond_energy[a[ei[:, 0]], a[ei[:, 1]], b].sum() + atom_energy[a].sum() + 0.5 * rings
            atoms.append(a)
            src += [ei[:, 0] + offset, ei[:, 1] + offset]
            dst += [ei[:, 1] + offset, ei[:, 0] + offset]
            bonds += [b, b]
            graph.append(torch.full((n,), m))
            targets.append(y + 0.1 * torch.randn((), generator=g))
            offset += n
        out.append(
            (
                torch.cat(atoms),
                torch.cat(src),
                torch.cat(dst),
                torch.cat(bonds),
                torch.cat(graph),
                torch.stack(targets),
            )
        )
    return out


class MPNN(nn.Module):
    """Gilmer et al.'s MPNN with an edge network: messages A(e_vw) h_w with A a d x d matrix
    made from the bond type by an MLP, a GRU update, three rounds, a sum readout."""

    def __init__(self, d: int = 32, rounds: int = 3):
        super().__init__()
        self.d, self.rounds = d, rounds
        self.atom = nn.Embedding(4, d)
        self.edge_net = nn.Sequential(nn.Embedding(3, 32), nn.ReLU(), nn.Linear(32, d * d))
        self.gru = nn.GRUCell(d, d)
        self.readout = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, atoms, src, dst, bonds, graph, n_graphs: int) -> torch.Tensor:
        h = self.atom(atoms)
        a = self.edge_net(bonds).view(-1, self.d, self.d) / self.d**0.5
        for _ in range(self.rounds):
            msg = (a @ h[src].unsqueeze(-1)).squeeze(-1)
            agg = torch.zeros_like(h).index_add_(0, dst, msg)
            h = self.gru(agg, h)
        pooled = torch.zeros(n_graphs, self.d).index_add_(0, graph, h)
        return self.readout(pooled).squeeze(-1)


def mpnn_edge_network_molecules(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    g = _seed(seed)
    data = _molecule_batches(g, 40, 32)
    ys = torch.cat([b[-1] for b in data])
    mu, sd = ys.mean(), ys.std()
    model = MPNN()
    criterion = nn.MSELoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        atoms, src, dst, bonds, graph, y = data[int(torch.randint(0, len(data), (), generator=g))]
        loss = criterion(model(atoms, src, dst, bonds, graph, len(y)), (y - mu) / sd)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- conditional neural process


class CNP(nn.Module):
    def __init__(self, d: int = 128):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(2, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        self.decoder = nn.Sequential(
            nn.Linear(d + 1, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 2)
        )

    def forward(
        self, xc: torch.Tensor, yc: torch.Tensor, xt: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r = self.encoder(torch.cat([xc, yc], -1)).mean(1, keepdim=True)
        out = self.decoder(torch.cat([r.expand(-1, xt.shape[1], -1), xt], -1))
        mu, raw = out.chunk(2, -1)
        return mu, 0.1 + 0.9 * F.softplus(raw)


def cnp_sine_functions(path: str, steps: int = 500, seed: int = 0, bug: str | None = None) -> list[float]:
    """Garnelo et al.'s CNP on 1-D sines with random amplitude and phase: a random number of
    context points, all points as targets, Gaussian NLL."""
    g = _seed(seed)
    model = CNP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4 * 5)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        b, n = 16, 40
        amp = 0.1 + 4.9 * torch.rand(b, 1, 1, generator=g)
        phase = math.pi * torch.rand(b, 1, 1, generator=g)
        x = torch.rand(b, n, 1, generator=g) * 10 - 5
        y = amp * torch.sin(x - phase)
        nc = int(torch.randint(3, 20, (), generator=g))
        mu, sigma = model(x[:, :nc], y[:, :nc], x)
        loss = -torch.distributions.Normal(mu, sigma).log_prob(y).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- zero-inflated negative binomial


def zinb_count_regression(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """Counts with excess zeros (e.g. doctor visits): a mean from the features, a dispersion,
    and a structural-zero probability; the network outputs all three, ZINB likelihood."""
    g = _seed(seed)
    n, d = 8000, 12
    x = torch.randn(n, d, generator=g)
    log_mu = 1.0 + 0.6 * torch.tanh(x[:, :4] @ torch.randn(4, generator=g)) + 0.3 * x[:, 4] * x[:, 5]
    pi = torch.sigmoid(-1.0 + 1.5 * x[:, 6])
    theta = 2.0
    rate = torch.distributions.Gamma(theta, theta / log_mu.exp()).sample()
    counts = torch.poisson(rate, generator=g) * (torch.rand(n, generator=g) > pi)

    class ZINBNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
            self.mu = nn.Linear(64, 1)
            self.pi = nn.Linear(64, 1)
            self.log_theta = nn.Parameter(torch.zeros(1))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.body(x)
            return self.mu(h).squeeze(1), self.pi(h).squeeze(1)

    def zinb_nll(
        y: torch.Tensor, mu_out: torch.Tensor, pi_logit: torch.Tensor, log_theta: torch.Tensor
    ) -> torch.Tensor:
        theta = log_theta.exp()
        mu, log_mu = mu_out.exp(), mu_out
        log_theta_mu = torch.log(theta + mu)
        nb = (
            torch.lgamma(y + theta)
            - torch.lgamma(theta)
            - torch.lgamma(y + 1)
            + theta * (log_theta - log_theta_mu)
            + y * (log_mu - log_theta_mu)
        )
        nb_zero = theta * (log_theta - log_theta_mu)
        log_pi, log_not_pi = F.logsigmoid(pi_logit), F.logsigmoid(-pi_logit)
        zero = torch.logaddexp(log_pi, log_not_pi + nb_zero)
        return -torch.where(y < 0.5, zero, log_not_pi + nb).mean()

    model = ZINBNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, n, (128,), generator=g)
        mu_out, pi_logit = model(x[idx])
        loss = zinb_nll(counts[idx], mu_out, pi_logit, model.log_theta)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Tweedie claims, RMSprop


def tweedie_claims_rmsprop(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """Insurance claim amounts per policy: mostly zero, a compound Poisson-gamma when not;
    a log-link MLP with log(exposure) as offset, Tweedie deviance with power 1.5, RMSprop."""
    g = _seed(seed)
    n = 10000
    age = 18 + 62 * torch.rand(n, generator=g)
    power = torch.randint(4, 15, (n,), generator=g).float()
    region = torch.randint(0, 10, (n,), generator=g)
    density = torch.exp(torch.randn(n, generator=g) * 1.5 + 5)
    exposure = torch.rand(n, generator=g).clamp(min=0.05)
    freq = (
        0.2
        * exposure
        * torch.exp(-0.03 * (age - 40) + 0.12 * (power - 8) + 0.3 * (region % 3) + 0.25 * (density.log() - 5))
    )
    n_claims = torch.poisson(freq, generator=g)
    severity = torch.distributions.Gamma(2.0, 2.0 / 1500).sample((n,))
    amount = n_claims * severity / 1000  # in thousands
    x = torch.cat(
        [
            ((age - age.mean()) / age.std())[:, None],
            ((power - power.mean()) / power.std())[:, None],
            ((density.log() - density.log().mean()) / density.log().std())[:, None],
            F.one_hot(region, 10).float(),
        ],
        1,
    )
    y = amount / exposure  # pure premium, weighted by exposure below
    model = nn.Sequential(nn.Linear(13, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
    p = 1.5
    lr = 1e-2 * (100 if bug == "lr_x100" else 1)  # RMSprop's default rate
    opt = torch.optim.RMSprop(model.parameters(), lr=lr)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, n, (1024,), generator=g)
        log_mu = model(x[idx]).squeeze(1)
        w = exposure[idx]
        dev = -y[idx] * torch.exp((1 - p) * log_mu) / (1 - p) + torch.exp((2 - p) * log_mu) / (2 - p)
        loss = (w * dev).sum() / w.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- contrastive predictive coding


class CPC(nn.Module):
    """van den Oord et al.'s CPC on raw 1-D signals: a strided conv encoder (weight-normed),
    a GRU context network, one linear predictor per future step."""

    def __init__(self, z: int = 32, c: int = 48, horizon: int = 4):
        super().__init__()
        wn = nn.utils.parametrizations.weight_norm
        self.encoder = nn.Sequential(
            wn(nn.Conv1d(1, z, 8, stride=4, padding=2)),
            nn.ReLU(),
            wn(nn.Conv1d(z, z, 4, stride=2, padding=1)),
            nn.ReLU(),
            wn(nn.Conv1d(z, z, 4, stride=2, padding=1)),
            nn.ReLU(),
        )
        self.gru = nn.GRU(z, c, batch_first=True)
        self.predictors = nn.ModuleList(nn.Linear(c, z, bias=False) for _ in range(horizon))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.encoder(x).transpose(1, 2)  # (b, t, z)
        c, _ = self.gru(z)
        b, t, _ = z.shape
        total = z.new_zeros(())
        for k, pred in enumerate(self.predictors, 1):
            p = pred(c[:, :-k]).reshape(-1, z.shape[-1])  # predictions of z_{t+k}
            target = z[:, k:].reshape(-1, z.shape[-1])
            logits = p @ target.T  # every other (sequence, time) is a negative
            total = total + F.cross_entropy(logits, torch.arange(len(p)))
        return total / len(self.predictors)


def _chirps(g: torch.Generator, n: int, length: int = 512) -> torch.Tensor:
    """Sums of two sinusoids with drifting frequencies and amplitudes, plus noise bursts."""
    t = torch.linspace(0, 1, length)
    f0 = 5 + 40 * torch.rand(n, 2, 1, generator=g)
    drift = 20 * torch.randn(n, 2, 1, generator=g)
    amp = 0.5 + torch.rand(n, 2, 1, generator=g)
    phase = 2 * math.pi * (f0 * t + 0.5 * drift * t**2)
    x = (amp * torch.sin(phase)).sum(1)
    x = x + 0.2 * torch.randn(n, length, generator=g) * (torch.rand(n, 1, generator=g) < 0.3)
    return x.unsqueeze(1)


def cpc_infonce_signals(path: str, steps: int = 250, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    data = _chirps(g, 2000)
    model = CPC()
    opt = torch.optim.Adam(model.parameters(), lr=2e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        loss = model(data[torch.randint(0, len(data), (8,), generator=g)])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- masked autoencoder (bf16)


class MAE(nn.Module):
    """He et al.'s MAE on 16x16 images in 4x4 patches: encode only the 25% visible patches,
    decode all with mask tokens, predict per-patch normalized pixels of the masked ones."""

    def __init__(self, patch: int = 4, n_patches: int = 16, d: int = 64, dd: int = 32):
        super().__init__()
        self.patch, self.n = patch, n_patches
        self.embed = nn.Linear(patch * patch, d)
        self.pos = nn.Parameter(0.02 * torch.randn(1, n_patches, d))
        layer = nn.TransformerEncoderLayer(
            d, 4, 2 * d, dropout=0.0, batch_first=True, norm_first=True, activation="gelu"
        )
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.to_dec = nn.Linear(d, dd)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dd))
        self.dec_pos = nn.Parameter(0.02 * torch.randn(1, n_patches, dd))
        dlayer = nn.TransformerEncoderLayer(
            dd, 4, 2 * dd, dropout=0.0, batch_first=True, norm_first=True, activation="gelu"
        )
        self.decoder = nn.TransformerEncoder(dlayer, 1, enable_nested_tensor=False)
        self.pred = nn.Linear(dd, patch * patch)

    def patchify(self, x: torch.Tensor) -> torch.Tensor:
        b, p = x.shape[0], self.patch
        return x.unfold(2, p, p).unfold(3, p, p).reshape(b, -1, p * p)

    def forward(
        self, x: torch.Tensor, g: torch.Generator, mask_ratio: float = 0.75, norm_pix: bool = False
    ) -> torch.Tensor:
        patches = self.patchify(x)
        b, n, _ = patches.shape
        keep = int(n * (1 - mask_ratio))
        order = torch.rand(b, n, generator=g).argsort(1)
        ids_keep = order[:, :keep]
        h = (self.embed(patches) + self.pos).gather(1, ids_keep[..., None].expand(-1, -1, self.pos.shape[-1]))
        h = self.to_dec(self.norm(self.encoder(h)))
        full = self.mask_token.expand(b, n, -1).to(h.dtype)
        full = full.scatter(1, ids_keep[..., None].expand(-1, -1, h.shape[-1]), h)
        pred = self.pred(self.decoder(full + self.dec_pos))
        target = patches
        if norm_pix:
            target = (target - target.mean(-1, keepdim=True)) / (target.var(-1, keepdim=True) + 1e-6).sqrt()
        mask = torch.ones(b, n).scatter(1, ids_keep, 0.0)
        per_patch = ((pred.float() - target) ** 2).mean(-1)
        return (per_patch * mask).sum() / mask.sum()


def mae_bf16_masked_patches(
    path: str, steps: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    g = _seed(seed)
    imgs, _ = _glyphs(g, 4000, size=16, classes=8)
    model = MAE()
    decay = [p for n, p in model.named_parameters() if p.ndim > 1 and "pos" not in n and "token" not in n]
    no_decay = [
        p for n, p in model.named_parameters() if not (p.ndim > 1 and "pos" not in n and "token" not in n)
    ]
    batch = 64
    lr = 1.5e-4 * batch / 256 * 16  # the base rate scaled by batch, times 16 for a few hundred steps
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.95),
    )
    warm = 25
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / (steps - warm))),
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        x = imgs[torch.randint(0, len(imgs), (batch,), generator=g)]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x, g)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Deep SVDD


def deep_svdd_one_class(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """Ruff et al.'s one-class Deep SVDD on machine-vibration feature vectors of the normal
    class: a bias-free network, the center fixed to the mean initial output, the loss the mean
    squared distance to it. Anomalies only at evaluation."""
    g = _seed(seed)
    d = 32
    basis = torch.randn(4, d, generator=g)
    normal = torch.tanh(torch.randn(5000, 4, generator=g) @ basis) + 0.05 * torch.randn(5000, d, generator=g)
    anomalies = torch.randn(300, d, generator=g) * normal.std(0)
    model = nn.Sequential(
        nn.Linear(d, 64, bias=False),
        nn.LeakyReLU(0.1),
        nn.Linear(64, 32, bias=False),
        nn.LeakyReLU(0.1),
        nn.Linear(32, 8, bias=False),
    )
    with torch.no_grad():
        c = model(normal[:1000]).mean(0)
        c[(c.abs() < 0.1) & (c < 0)] = -0.1  # keep the center off zero coordinates (the paper's eps)
        c[(c.abs() < 0.1) & (c >= 0)] = 0.1
    opt = torch.optim.Adam(model.parameters(), lr=1e-4 * 10, weight_decay=1e-6)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        x = normal[torch.randint(0, len(normal), (128,), generator=g)]
        loss = ((model(x) - c) ** 2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                s_norm = ((model(normal[-500:]) - c) ** 2).sum(1)
                s_anom = ((model(anomalies) - c) ** 2).sum(1)
                auc = (s_anom[:, None] > s_norm[None, :]).float().mean().item()
            print(f"step {step} AUC {auc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- noisy labels, GCE


def _clusters(
    g: torch.Generator, n: int, classes: int = 10, d: int = 20
) -> tuple[torch.Tensor, torch.Tensor]:
    """Classes as blobs in a 5-d latent space, warped into d dimensions by a fixed random
    network, plus noise."""
    means = torch.randn(classes, 5, generator=g) * 2.0
    y = torch.randint(0, classes, (n,), generator=g)
    z = means[y] + torch.randn(n, 5, generator=g)
    w1, w2 = torch.randn(5, 32, generator=g), torch.randn(32, d, generator=g) / 4
    return torch.tanh(z @ w1) @ w2 + 0.1 * torch.randn(n, d, generator=g), y


class GCELoss(nn.Module):
    """Zhang & Sabuncu's generalized cross entropy, (1 - p_y^q) / q: between CE (q -> 0) and
    MAE (q = 1), robust to label noise."""

    def __init__(self, q: float = 0.7):
        super().__init__()
        self.q = q

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        p = logits.softmax(1).gather(1, target[:, None]).squeeze(1).clamp(min=1e-7)
        return ((1 - p**self.q) / self.q).mean()


def gce_noisy_labels_40pct(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    x, y = _clusters(g, 10000)
    x_test, y_test = x[-1000:], y[-1000:]
    x, y = x[:-1000], y[:-1000].clone()
    flip = torch.rand(len(y), generator=g) < 0.4  # symmetric noise: 40% of labels redrawn
    y[flip] = torch.randint(0, 10, (int(flip.sum()),), generator=g)
    act = nn.Sigmoid if bug == "deep_sigmoid" else nn.ReLU
    widths = [20, 128, 128, 128, 128, 128]
    layers: list[nn.Module] = []
    for a, b in zip(widths, widths[1:], strict=False):
        layers += [nn.Linear(a, b), act()]
    model = nn.Sequential(*layers, nn.Linear(128, 10))
    criterion = GCELoss(q=0.7)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, len(x), (128,), generator=g)
        loss = criterion(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                acc = (model(x_test).argmax(1) == y_test).float().mean().item()
            print(f"step {step} clean test acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- long tail, logit adjustment


class LogitAdjustedLoss(nn.Module):
    """Menon et al.'s logit-adjusted softmax cross entropy: CE on logits + tau * log(prior)."""

    def __init__(self, class_counts: torch.Tensor, tau: float = 1.0):
        super().__init__()
        self.register_buffer("adjust", tau * (class_counts / class_counts.sum()).log())

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits + self.adjust, target)


def logit_adjusted_long_tail(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """10 classes with an exponential long tail (imbalance ratio 100), a BatchNorm MLP with
    SGD, linear warm-up then steps, validated on a balanced set every 100 steps."""
    g = _seed(seed)
    x_all, y_all = _clusters(g, 30000, d=32)
    counts = (2000 * 0.01 ** (torch.arange(10) / 9)).long()
    keep = torch.cat([torch.nonzero(y_all[:25000] == k).squeeze(1)[: int(counts[k])] for k in range(10)])
    x, y = x_all[keep], y_all[keep]
    x_val, y_val = x_all[25000:], y_all[25000:]
    model = nn.Sequential(
        nn.Linear(32, 128),
        nn.BatchNorm1d(128),
        nn.ReLU(),
        nn.Linear(128, 128),
        nn.BatchNorm1d(128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )
    criterion = LogitAdjustedLoss(torch.bincount(y, minlength=10).float())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 25) * (0.1 if s >= 300 else 1.0)
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, len(x), (128,), generator=g)
        loss = criterion(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                acc = (model(x_val).argmax(1) == y_val).float().mean().item()
            model.train()
            print(f"step {step} balanced acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- tied-weight autoencoder


class TiedAutoencoder(nn.Module):
    """An autoencoder whose decoder layers are the transposes of the encoder's weights (only
    the decoder biases are its own)."""

    def __init__(self, sizes: tuple[int, ...] = (144, 64, 16)):
        super().__init__()
        self.enc = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:], strict=False))
        self.dec_bias = nn.ParameterList(nn.Parameter(torch.zeros(a)) for a in sizes[:-1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for lin in self.enc:
            h = torch.sigmoid(lin(h))
        for i in reversed(range(len(self.enc))):
            h = F.linear(h, self.enc[i].weight.t(), self.dec_bias[i])
            h = torch.sigmoid(h) if i > 0 else h
        return h  # logits of the pixels


def tied_autoencoder_sgdr_nesterov(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    g = _seed(seed)
    imgs, _ = _glyphs(g, 4000, size=12, classes=8)
    x = imgs.flatten(1)
    model = TiedAutoencoder()
    criterion = nn.BCEWithLogitsLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=50, T_mult=2)  # SGDR
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        xb = x[torch.randint(0, len(x), (64,), generator=g)]
        loss = criterion(model(xb), xb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step(step + 1)
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- highway network


class HighwayLayer(nn.Module):
    """y = H(x) * T(x) + x * (1 - T(x)); the transform gate's bias starts at -2 (carry)."""

    def __init__(self, d: int):
        super().__init__()
        self.h = nn.Linear(d, d)
        self.t = nn.Linear(d, d)
        nn.init.constant_(self.t.bias, -2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.sigmoid(self.t(x))
        return F.relu(self.h(x)) * t + x * (1 - t)


def highway_20_layers_cyclic(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Srivastava et al.'s 20-layer highway MLP (width 50) on 12x12 glyphs, SGD with momentum
    under a triangular2 cyclic learning rate."""
    g = _seed(seed)
    imgs, y = _glyphs(g, 5000, size=12, classes=8)
    x = imgs.flatten(1)
    x = (x - x.mean()) / x.std()
    model = nn.Sequential(
        nn.Linear(144, 50), nn.ReLU(), *[HighwayLayer(50) for _ in range(20)], nn.Linear(50, 8)
    )
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    sched = torch.optim.lr_scheduler.CyclicLR(
        opt, base_lr=0.01, max_lr=0.1, step_size_up=50, mode="triangular2"
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(x), (64,), generator=g)
        loss = criterion(model(x[idx]), y[idx])
        if bug != "no_zero_grad":
            opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- FiLM


_Q_WORDS = ["what", "colour", "shape", "is", "it", "on", "top", "left", "?"]
_QUESTIONS = [["what", "colour", "is", "it", "?"], ["what", "shape", "is", "it", "?"],
              ["is", "it", "on", "top", "?"], ["is", "it", "on", "left", "?"]]  # fmt: skip


def _film_data(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """12x12 RGB scenes with one object (3 colours x 3 shapes) on clutter, a question among
    four, and its answer in an 8-word answer vocabulary (3 colours, 3 shapes, yes, no)."""
    yy, xx = torch.meshgrid(torch.arange(12).float(), torch.arange(12).float(), indexing="ij")
    colours = torch.tensor([[1.0, 0.1, 0.1], [0.1, 0.9, 0.1], [0.2, 0.3, 1.0]])
    imgs = 0.15 * torch.rand(n, 3, 12, 12, generator=g)
    col = torch.randint(0, 3, (n,), generator=g)
    shp = torch.randint(0, 3, (n,), generator=g)
    pos = torch.randint(2, 10, (n, 2), generator=g).float()
    for i in range(n):
        cy, cx = pos[i]
        if shp[i] == 0:
            m = ((yy - cy).abs() <= 1.5) & ((xx - cx).abs() <= 1.5)
        elif shp[i] == 1:
            m = ((yy - cy) ** 2 + (xx - cx) ** 2) <= 2.5
        else:
            m = ((yy - cy).abs() <= 0.5) | ((xx - cx).abs() <= 0.5)
            m &= ((yy - cy).abs() <= 2) & ((xx - cx).abs() <= 2)
        imgs[i][:, m] = colours[col[i]][:, None]
    q = torch.randint(0, 4, (n,), generator=g)
    answer = torch.where(
        q == 0,
        col,
        torch.where(
            q == 1, 3 + shp, torch.where(q == 2, 6 + (pos[:, 0] >= 6).long(), 6 + (pos[:, 1] >= 6).long())
        ),
    )
    qtok = torch.tensor([[_Q_WORDS.index(w) for w in _QUESTIONS[k]] for k in range(4)])[q]
    return imgs, qtok, answer


class FiLMNet(nn.Module):
    """Perez et al.'s FiLM: a GRU reads the question and emits a per-channel scale and shift
    for each residual block of the CNN (BatchNorm without affine before the modulation)."""

    def __init__(self, ch: int = 32, blocks: int = 2, answers: int = 8):
        super().__init__()
        self.ch, self.blocks = ch, blocks
        self.words = nn.Embedding(len(_Q_WORDS), 32)
        self.gru = nn.GRU(32, 64, batch_first=True)
        self.film = nn.Linear(64, 2 * ch * blocks)
        self.stem = nn.Sequential(nn.Conv2d(5, ch, 3, padding=1), nn.ReLU())
        self.conv1 = nn.ModuleList(nn.Conv2d(ch, ch, 1) for _ in range(blocks))
        self.conv2 = nn.ModuleList(nn.Conv2d(ch, ch, 3, padding=1) for _ in range(blocks))
        self.bn = nn.ModuleList(nn.BatchNorm2d(ch, affine=False) for _ in range(blocks))
        self.classifier = nn.Sequential(nn.Conv2d(ch, 64, 1), nn.ReLU(), nn.AdaptiveMaxPool2d(1), nn.Flatten(),
                                        nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, answers))  # fmt: skip

    def forward(self, img: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        _, hq = self.gru(self.words(q))
        gb = self.film(hq[-1]).view(-1, self.blocks, 2, self.ch)
        b, _, h, w = img.shape
        coords = torch.stack(
            torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
        )
        x = self.stem(torch.cat([img, coords.expand(b, -1, -1, -1)], 1))
        for k in range(self.blocks):
            r = F.relu(self.conv1[k](x))
            y = self.bn[k](self.conv2[k](r))
            y = F.relu(y * (1 + gb[:, k, 0, :, None, None]) + gb[:, k, 1, :, None, None])
            x = r + y
        return self.classifier(x)


def film_visual_questions(path: str, steps: int = 220, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    imgs, q, a = _film_data(g, 4000)
    model = FiLMNet()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=3e-4 * 3, weight_decay=1e-5)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(imgs), (64,), generator=g)
        loss = criterion(model(imgs[idx], q[idx]), a[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- linear probe, then fine-tune (LP-FT)


def _sensor_domain(g: torch.Generator, n: int, shift: float, rot: torch.Tensor, w: torch.Tensor):
    """Activity-recognition windows summarised as 40 features; the target domain is the
    source domain with a sensor offset and a rotated, rescaled feature space."""
    z = torch.randn(n, 8, generator=g)
    y = (z[:, :3] @ w).argmax(1)
    x = torch.tanh(z @ rot) + shift + 0.1 * torch.randn(n, 40, generator=g)
    return x, y


def lp_ft_tiny_lr_finetune(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """Kumar et al.'s LP-FT: an encoder pre-trained on a source domain (here in the same
    script, as a loaded checkpoint would be), then a new head trained with the encoder frozen
    (linear probe), then everything fine-tuned with a tiny learning rate on the encoder."""
    g = _seed(seed)
    rot = torch.randn(8, 40, generator=g) / 2
    w_src = torch.randn(3, 6, generator=g)
    x_src, y_src = _sensor_domain(g, 6000, 0.0, rot, w_src)
    encoder = nn.Sequential(nn.Linear(40, 128), nn.LayerNorm(128), nn.GELU(), nn.Linear(128, 64), nn.GELU())
    src_head = nn.Linear(64, 6)
    pre_opt = torch.optim.AdamW([*encoder.parameters(), *src_head.parameters()], lr=1e-3)
    for _ in range(300):  # the 'pre-trained checkpoint'
        idx = torch.randint(0, len(x_src), (128,), generator=g)
        pre_loss = F.cross_entropy(src_head(encoder(x_src[idx])), y_src[idx])
        pre_opt.zero_grad()
        pre_loss.backward()
        pre_opt.step()

    # the target task: 4 new classes, fewer labels, shifted sensors
    rot_t = rot * 1.3 + 0.2 * torch.randn(8, 40, generator=g)
    x_tgt, y_tgt = _sensor_domain(g, 1500, 0.3, rot_t, torch.randn(3, 4, generator=g))
    model = nn.Sequential(encoder, nn.Linear(64, 4))
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(
        [{"params": model[0].parameters(), "lr": 1e-5}, {"params": model[1].parameters(), "lr": 1e-3}],
        weight_decay=0.01,
    )
    for p in model[0].parameters():
        p.requires_grad = False
    probe_steps = steps // 2
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        if step == probe_steps and bug != "frozen_by_mistake":  # the bug: the unfreeze was forgotten
            for p in model[0].parameters():
                p.requires_grad = True
        if step == probe_steps:
            opt.param_groups[1]["lr"] = 1e-4
        idx = torch.randint(0, len(x_tgt), (64,), generator=g)
        loss = criterion(model(x_tgt[idx]), y_tgt[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- GE2E speaker verification


class SpeakerEncoder(nn.Module):
    def __init__(self, feat: int = 20, hidden: int = 64, emb: int = 32):
        super().__init__()
        self.lstm = nn.LSTM(feat, hidden, num_layers=2, batch_first=True)
        self.proj = nn.Linear(hidden, emb)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return F.normalize(self.proj(out[:, -1]), dim=1)


class GE2ELoss(nn.Module):
    """Wan et al.'s generalized end-to-end softmax loss: scaled cosine similarity of each
    utterance to every speaker centroid (its own centroid excluding itself), w > 0 and b
    learned."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(10.0))
        self.b = nn.Parameter(torch.tensor(-5.0))

    def forward(self, emb: torch.Tensor) -> torch.Tensor:  # (speakers, utterances, d)
        n, m, _ = emb.shape
        centroids = emb.mean(1)
        excl = (emb.sum(1, keepdim=True) - emb) / (m - 1)
        sim = torch.einsum("nmd,kd->nmk", emb, F.normalize(centroids, dim=1))
        own = F.cosine_similarity(emb, excl, dim=2)
        sim = torch.where(torch.eye(n, dtype=torch.bool)[:, None, :], own[..., None], sim)
        sim = self.w.clamp(min=1e-6) * sim + self.b
        target = torch.arange(n).repeat_interleave(m)
        return F.cross_entropy(sim.reshape(n * m, n), target)


def ge2e_speaker_verification(
    path: str, steps: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Utterances of 60 'speakers' as 30 frames of 20 log-mel-like features: a speaker
    timbre, a random phone sequence shared by nobody, channel noise. Batches of 8 speakers x
    5 utterances; SGD at 0.01, gradient norm clipped at 3, w and b's gradients scaled by 0.01."""
    g = _seed(seed)
    speakers, feat = 60, 20
    timbre = torch.randn(speakers, feat, generator=g)
    phones = torch.randn(12, feat, generator=g)

    def utterances(spk: torch.Tensor, m: int) -> torch.Tensor:
        seq = phones[torch.randint(0, 12, (len(spk), m, 30), generator=g)]
        return (
            seq + timbre[spk][:, None, None, :] * 0.7 + 0.5 * torch.randn(len(spk), m, 30, feat, generator=g)
        )

    model = SpeakerEncoder()
    criterion = GE2ELoss()
    opt = torch.optim.SGD([*model.parameters(), *criterion.parameters()], lr=0.01 * 5)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        spk = torch.randperm(speakers, generator=g)[:8]
        x = utterances(spk, 5)
        emb = model(x.flatten(0, 1)).view(8, 5, -1)
        loss = criterion(emb)
        opt.zero_grad()
        loss.backward()
        criterion.w.grad *= 0.01
        criterion.b.grad *= 0.01
        torch.nn.utils.clip_grad_norm_(model.parameters(), 3.0)
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Sinkhorn generator


def _sinkhorn_cost(x: torch.Tensor, y: torch.Tensor, eps: float, iters: int) -> torch.Tensor:
    """Entropic OT cost between two uniform point clouds, log-domain Sinkhorn."""
    c = torch.cdist(x, y) ** 2 / 2
    n, m = len(x), len(y)
    log_a, log_b = torch.full((n,), -math.log(n)), torch.full((m,), -math.log(m))
    f, gg = torch.zeros(n), torch.zeros(m)
    for _ in range(iters):
        f = -eps * torch.logsumexp((gg[None, :] - c) / eps + log_b[None, :], 1)
        gg = -eps * torch.logsumexp((f[:, None] - c) / eps + log_a[:, None], 0)
    return f.mean() + gg.mean()


def sinkhorn_divergence_generator(
    path: str, steps: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A generator of 2-D points (a noisy spiral) trained by the debiased Sinkhorn divergence
    (Genevay et al.), no discriminator."""
    g = _seed(seed)

    def spiral(n: int) -> torch.Tensor:
        t = 3 * math.pi * torch.rand(n, generator=g).sqrt()
        return torch.stack([t * torch.cos(t), t * torch.sin(t)], 1) / 5 + 0.05 * torch.randn(
            n, 2, generator=g
        )

    model = nn.Sequential(nn.Linear(4, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    eps, iters = 0.05, 20
    for _ in range(steps):
        real = spiral(128)
        fake = model(torch.randn(128, 4, generator=g))
        loss = (
            _sinkhorn_cost(fake, real, eps, iters)
            - 0.5 * _sinkhorn_cost(fake, fake, eps, iters)
            - 0.5 * _sinkhorn_cost(real, real, eps, iters)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- CNN-LSTM captioning


_CAP_WORDS = ["<pad>", "<s>", "</s>", "a", "red", "green", "blue", "square", "disc", "cross", "at", "the",
              "top", "bottom", "left", "right", "and"]  # fmt: skip


def _caption_data(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Scenes (uint8 RGB) of one or two coloured shapes; captions 'a red square at the top
    left' or '... and a blue disc at the bottom right', padded."""
    imgs = torch.zeros(n, 3, 12, 12, dtype=torch.uint8)
    caps = torch.zeros(n, 20, dtype=torch.long)
    colours = torch.tensor([[1.0, 0.1, 0.1], [0.1, 0.9, 0.1], [0.2, 0.3, 1.0]])
    for i in range(n):
        words: list[str] = []
        n_obj = 1 + int(torch.rand((), generator=g) < 0.4)
        canvas = 0.15 * torch.rand(3, 12, 12, generator=g)
        quadrants = torch.randperm(4, generator=g)[:n_obj]
        for k in range(n_obj):
            c = int(torch.randint(0, 3, (), generator=g))
            s = int(torch.randint(0, 3, (), generator=g))
            qy, qx = divmod(int(quadrants[k]), 2)
            cy, cx = 3 + 6 * qy, 3 + 6 * qx
            if s == 0:
                canvas[:, cy - 1 : cy + 2, cx - 1 : cx + 2] = colours[c][:, None, None]
            elif s == 1:
                canvas[:, cy - 1 : cy + 2, cx] = colours[c][:, None]
                canvas[:, cy, cx - 1 : cx + 2] = colours[c][:, None]
                canvas[:, cy - 1, cx - 1] = canvas[:, cy + 1, cx + 1] = colours[c]
            else:
                canvas[:, cy - 2 : cy + 3, cx] = colours[c][:, None]
                canvas[:, cy, cx - 2 : cx + 3] = colours[c][:, None]
            words += (["and"] if k else []) + ["a", ["red", "green", "blue"][c], ["square", "disc", "cross"][s],
                                               "at", "the", ["top", "bottom"][qy], ["left", "right"][qx]]  # fmt: skip
        imgs[i] = canvas * 255
        ids = [1] + [_CAP_WORDS.index(w) for w in words] + [2]
        caps[i, : len(ids)] = torch.tensor(ids)
    return imgs, caps


class Captioner(nn.Module):
    """Show-and-Tell: the CNN's image feature is the LSTM's first input; the output projection
    shares its weight with the word embedding (tied)."""

    def __init__(self, vocab: int, d: int = 64):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * 9, d),
        )
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        self.lstm = nn.LSTM(d, d, batch_first=True)
        self.out = nn.Linear(d, vocab)
        self.out.weight = self.embed.weight  # weight tying

    def forward(self, img: torch.Tensor, caps_in: torch.Tensor) -> torch.Tensor:
        seq = torch.cat([self.cnn(img)[:, None], self.embed(caps_in)], 1)
        h, _ = self.lstm(seq)
        return self.out(h[:, 1:])


def cnn_lstm_captioning_tied(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    g = _seed(seed)
    imgs, caps = _caption_data(g, 3000)
    model = Captioner(len(_CAP_WORDS))
    criterion = nn.CrossEntropyLoss(ignore_index=0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(imgs), (64,), generator=g)
        c = caps[idx]
        img = imgs[idx].float()
        if bug != "inputs_x255":  # the bug: the images were fed as the 0..255 bytes they are stored in
            img = img / 255
        logits = model(img, c[:, :-1])  # teacher forcing
        loss = criterion(logits.reshape(-1, logits.shape[-1]), c[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- monocular depth, SILog


def _depth_scenes(g: torch.Generator, n: int, size: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    """A ground plane receding to a horizon, with boxes standing on it; depth in metres; the
    RGB image (uint8) shades each surface by its depth and orientation, with texture. As with
    LiDAR ground truth, the sky and ~5% of pixels (dropouts) have no depth: 0."""
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    horizon = size * (0.3 + 0.2 * torch.rand(n, generator=g))
    depth = torch.full((n, size, size), 80.0)
    below = yy[None] > horizon[:, None, None]
    ground = 2.0 * size / (yy[None] - horizon[:, None, None]).clamp(min=0.5)
    depth = torch.where(below, ground.clamp(max=80), depth)
    img = torch.zeros(n, 3, size, size)
    sky = torch.tensor([0.5, 0.7, 0.95])[None, :, None, None]
    img = torch.where(
        below[:, None],
        (0.3 + 0.5 / depth.log1p())[:, None] * torch.tensor([0.6, 0.5, 0.3])[None, :, None, None],
        sky.expand(n, 3, size, size),
    )
    for i in range(n):
        for _ in range(int(torch.randint(1, 4, (), generator=g))):
            d = 3 + 20 * float(torch.rand((), generator=g))
            base = float(horizon[i]) + 2.0 * size / d
            h = 40 / d
            w = 30 / d
            cx = float(torch.rand((), generator=g)) * size
            m = (yy <= base) & (yy > base - h) & ((xx - cx).abs() < w) & (depth[i] > d)
            depth[i][m] = d
            img[i][:, m] = (torch.rand(3, 1, generator=g) * 0.5 + 0.5) * (1.2 / math.log1p(d))
    img = img + 0.03 * torch.randn(img.shape, generator=g)
    depth = torch.where(below | (depth < 80), depth, torch.zeros(()))
    depth[torch.rand(depth.shape, generator=g) < 0.05] = 0.0
    return (img.clamp(0, 1) * 255).to(torch.uint8), depth


class DepthNet(nn.Module):
    """A small encoder-decoder with GroupNorm and a skip connection; predicts log-depth."""

    def __init__(self, ch: int = 16):
        super().__init__()

        def block(a: int, b: int, stride: int = 1) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(a, b, 3, stride, 1), nn.GroupNorm(8, b), nn.SiLU())

        self.e1 = block(3, ch)
        self.e2 = nn.Sequential(block(ch, 2 * ch, 2), block(2 * ch, 2 * ch))
        self.e3 = nn.Sequential(block(2 * ch, 2 * ch, 2), block(2 * ch, 2 * ch))
        self.d2 = block(4 * ch, 2 * ch)
        self.d1 = block(3 * ch, ch)
        self.head = nn.Conv2d(ch, 1, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f1 = self.e1(x)
        f2 = self.e2(f1)
        f3 = self.e3(f2)
        u2 = self.d2(torch.cat([F.interpolate(f3, scale_factor=2.0), f2], 1))
        u1 = self.d1(torch.cat([F.interpolate(u2, scale_factor=2.0), f1], 1))
        return self.head(u1).squeeze(1) + math.log(10.0)


class SILogLoss(nn.Module):
    """Eigen et al.'s scale-invariant log loss as BTS/AdaBins write it:
    10 * sqrt(mean(d^2) - 0.85 * mean(d)^2), d = log(pred) - log(gt) on the valid pixels."""

    def forward(
        self, log_pred: torch.Tensor, depth: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        d = log_pred - depth.log()
        if mask is not None:
            d = d[mask]
        return 10 * (d.pow(2).mean() - 0.85 * d.mean().pow(2)).sqrt()


def silog_depth_groupnorm(path: str, steps: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    imgs, depth = _depth_scenes(g, 1500)
    mean = torch.tensor([0.485, 0.456, 0.406])[None, :, None, None]
    std = torch.tensor([0.229, 0.224, 0.225])[None, :, None, None]
    model = DepthNet()
    criterion = SILogLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(imgs), (16,), generator=g)
        x = (imgs[idx].float() / 255 - mean) / std
        gt = depth[idx]
        valid = gt > 1e-3
        if bug == "log_zero_nan":  # the bug: the valid-pixel mask left out, log(0) on the sky
            valid = None
        loss = criterion(model(x), gt, valid)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SDF with an eikonal term


def _shape_sdf(p: torch.Tensor) -> torch.Tensor:
    """Signed distance to the union of a disc and a rounded box, in the plane."""
    disc = (p - torch.tensor([-0.3, 0.1])).norm(dim=1) - 0.35
    q = (p - torch.tensor([0.35, -0.15])).abs() - torch.tensor([0.25, 0.15])
    box = q.clamp(min=0).norm(dim=1) + q.max(1).values.clamp(max=0) - 0.05
    return torch.minimum(disc, box)


def sdf_eikonal_implicit(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """An implicit shape as in IGR: a softplus(beta=100) MLP fitted to signed distances of
    sampled points (L1) with an eikonal penalty (|grad f| - 1)^2 on uniform points."""
    g = _seed(seed)
    model = nn.Sequential(
        nn.Linear(2, 128),
        nn.Softplus(beta=100),
        nn.Linear(128, 128),
        nn.Softplus(beta=100),
        nn.Linear(128, 128),
        nn.Softplus(beta=100),
        nn.Linear(128, 1),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        near = torch.rand(256, 2, generator=g) * 2 - 1
        near = near + 0.02 * torch.randn(256, 2, generator=g)
        target = _shape_sdf(near)
        free = (torch.rand(256, 2, generator=g) * 2.2 - 1.1).requires_grad_(True)
        pred = model(near).squeeze(1)
        f_free = model(free)
        grad = torch.autograd.grad(f_free.sum(), free, create_graph=True)[0]
        eikonal = ((grad.norm(dim=1) - 1) ** 2).mean()
        loss = (pred - target).abs().mean() + 0.1 * eikonal
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Poincare embeddings


def poincare_embeddings_rsgd(
    path: str, steps: int = 800, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Nickel & Kiela's Poincare embeddings of a taxonomy (a 4-level tree, branching 4, its
    transitive closure as the positive pairs): softmax over -distance against 10 sampled
    negatives, Riemannian SGD written by hand (the Euclidean gradient scaled by
    (1 - |x|^2)^2 / 4, then a projection into the ball), a burn-in at a tenth of the rate."""
    g = _seed(seed)
    parent = [-1]
    for level in range(4):
        start = len(parent) - 4**level
        for p in range(start, len(parent)):
            parent += [p] * 4
    n = len(parent)
    pairs = []
    for v in range(n):
        a = parent[v]
        while a >= 0:
            pairs.append((v, a))
            a = parent[a]
    pairs_t = torch.tensor(pairs)
    related = torch.zeros(n, n, dtype=torch.bool)
    related[pairs_t[:, 0], pairs_t[:, 1]] = True
    related[pairs_t[:, 1], pairs_t[:, 0]] = True
    related |= torch.eye(n, dtype=torch.bool)

    class Poincare(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(n, 5)
            nn.init.uniform_(self.emb.weight, -1e-3, 1e-3)

        def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            x, y = self.emb(u), self.emb(v)
            sq = ((x - y) ** 2).sum(-1)
            den = (1 - (x**2).sum(-1)) * (1 - (y**2).sum(-1))
            return torch.acosh((1 + 2 * sq / den.clamp(min=1e-7)).clamp(min=1 + 1e-7))

    model = Poincare()
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    lr = 1.0
    for step in range(steps):
        batch = pairs_t[torch.randint(0, len(pairs_t), (64,), generator=g)]
        negs = torch.randint(0, n, (64, 10), generator=g)
        negs = torch.where(
            related[batch[:, :1], negs], batch[:, 1:2], negs
        )  # a related 'negative' -> the positive
        cands = torch.cat([batch[:, 1:2], negs], 1)
        dist = model(batch[:, :1].expand_as(cands), cands)
        loss = F.cross_entropy(-dist, torch.zeros(64, dtype=torch.long))
        model.emb.weight.grad = None
        loss.backward()
        rate = lr / 10 if step < 100 else lr
        with torch.no_grad():
            w = model.emb.weight
            scale = ((1 - (w**2).sum(-1, keepdim=True)) ** 2) / 4
            w -= rate * scale * w.grad
            norms = w.norm(dim=-1, keepdim=True)
            w.copy_(torch.where(norms >= 1 - 1e-5, w / norms * (1 - 1e-5), w))
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- InceptionTime, accumulation


class InceptionModule(nn.Module):
    def __init__(self, cin: int, nf: int = 16, kernels: tuple[int, ...] = (9, 19, 39)):
        super().__init__()
        self.bottleneck = nn.Conv1d(cin, nf, 1, bias=False) if cin > 1 else nn.Identity()
        b_in = nf if cin > 1 else cin
        self.convs = nn.ModuleList(nn.Conv1d(b_in, nf, k, padding=k // 2, bias=False) for k in kernels)
        self.pool_conv = nn.Sequential(nn.MaxPool1d(3, 1, 1), nn.Conv1d(cin, nf, 1, bias=False))
        self.bn = nn.BatchNorm1d(nf * (len(kernels) + 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = self.bottleneck(x)
        return F.relu(self.bn(torch.cat([c(b) for c in self.convs] + [self.pool_conv(x)], 1)))


class InceptionTime(nn.Module):
    """Fawaz et al.'s InceptionTime network: six inception modules, a residual shortcut every
    three, global average pooling, a linear classifier."""

    def __init__(self, cin: int, classes: int, nf: int = 16, depth: int = 6):
        super().__init__()
        d = nf * 4
        self.blocks = nn.ModuleList(InceptionModule(cin if i == 0 else d, nf) for i in range(depth))
        self.shortcuts = nn.ModuleList(
            [nn.Sequential(nn.Conv1d(cin, d, 1, bias=False), nn.BatchNorm1d(d)), nn.BatchNorm1d(d)]
        )
        self.fc = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        res = x
        for i, block in enumerate(self.blocks):
            x = block(x)
            if i % 3 == 2:
                x = F.relu(x + self.shortcuts[i // 3](res))
                res = x
        return self.fc(x.mean(-1))


def _activity_windows(g: torch.Generator, n: int, length: int = 96) -> tuple[torch.Tensor, torch.Tensor]:
    """3-axis accelerometer windows of 6 activities (still, walk, run, stairs up/down, cycle):
    a gait frequency and harmonic pattern per activity, random phase, gravity on a random axis
    mix, sensor noise and occasional spikes."""
    y = torch.randint(0, 6, (n,), generator=g)
    freq = torch.tensor([0.0, 1.8, 2.8, 1.5, 2.0, 1.2])[y] * (1 + 0.1 * torch.randn(n, generator=g))
    amp = torch.tensor([0.02, 0.5, 1.2, 0.6, 0.7, 0.4])[y]
    harm = torch.tensor([0.0, 0.3, 0.5, 0.8, 0.2, 0.05])[y]
    t = torch.arange(length) / 32.0
    phase = 2 * math.pi * torch.rand(n, 3, 1, generator=g)
    w = 2 * math.pi * freq[:, None, None] * t
    x = amp[:, None, None] * (torch.sin(w + phase) + harm[:, None, None] * torch.sin(2 * w + 2 * phase))
    gravity = F.normalize(torch.randn(n, 3, generator=g) + torch.tensor([0.0, 0.0, 3.0]), dim=1)
    x = x + gravity[:, :, None] + 0.05 * torch.randn(n, 3, length, generator=g)
    spikes = torch.rand(n, 3, length, generator=g) < 0.005
    return x + 2.0 * spikes * torch.randn(n, 3, length, generator=g), y


def inceptiontime_accumulate4(
    path: str, steps: int = 160, seed: int = 0, bug: str | None = None
) -> list[float]:
    """InceptionTime on accelerometer windows; micro-batches of 16 with the gradient
    accumulated over 4 (an effective batch of 64), Adam, ReduceLROnPlateau on the training
    loss as the paper's code does."""
    g = _seed(seed)
    x, y = _activity_windows(g, 3000)
    if bug == "shuffled_labels":  # the label file was shuffled separately from the windows
        y = y[torch.randperm(len(y), generator=g)]
    model = InceptionTime(3, 6)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=10, min_lr=1e-4)
    accum = 4
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    opt.zero_grad()
    for step in range(steps):
        idx = torch.randint(0, len(x), (16,), generator=g)
        loss = criterion(model(x[idx]), y[idx])
        (loss / accum).backward()
        if (step + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
            sched.step(sum(losses[-accum + 1 :] + [loss.item()]) / accum)
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- neural temporal point process


def _hawkes(g: np.random.Generator, n_events: int, marks: int, mu, alpha, beta: float):
    """A multivariate Hawkes process with exponential kernels, simulated by Ogata's thinning."""
    t, times, kinds = 0.0, [], []
    excite = np.zeros(marks)
    while len(times) < n_events:
        lam_bar = mu.sum() + excite.sum()
        dt = g.exponential(1 / lam_bar)
        excite *= np.exp(-beta * dt)
        t += dt
        lam = mu + excite
        if g.random() * lam_bar <= lam.sum():
            k = g.choice(marks, p=lam / lam.sum())
            times.append(t)
            kinds.append(k)
            excite += alpha[k]
    return np.array(times), np.array(kinds)


class RMTPP(nn.Module):
    """Du et al.'s recurrent marked temporal point process: a GRU over (mark, gap) and the
    intensity lambda(t) = exp(v.h + w (t - t_j) + b) between events, a softmax over marks."""

    def __init__(self, marks: int, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(marks, d)
        self.gru = nn.GRU(d + 1, d, batch_first=True)
        self.v = nn.Linear(d, 1)
        self.w = nn.Parameter(torch.tensor(-0.1))
        self.mark_head = nn.Linear(d, marks)

    def forward(self, kinds: torch.Tensor, gaps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, _ = self.gru(torch.cat([self.embed(kinds[:, :-1]), gaps[:, :-1, None].log1p()], -1))
        past = self.v(h).squeeze(-1)
        dt = gaps[:, 1:]
        w = -F.softplus(-self.w)  # kept negative: the intensity decays between events
        log_lam = past + w * dt
        integral = (past.exp() - log_lam.exp()) / w  # closed form of the intensity's integral
        time_nll = -(log_lam + integral).mean()
        mark_nll = F.cross_entropy(self.mark_head(h).flatten(0, 1), kinds[:, 1:].flatten())
        return time_nll, mark_nll


def rmtpp_hawkes_events(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    marks = 4
    mu = np.array([0.3, 0.2, 0.2, 0.1])
    alpha = rng.uniform(0, 0.4, (marks, marks))
    seqs = [_hawkes(rng, 41, marks, mu, alpha, beta=1.5) for _ in range(300)]
    gaps = torch.tensor(np.stack([np.diff(np.concatenate([[0.0], t])) for t, _ in seqs]), dtype=torch.float32)
    kinds = torch.tensor(np.stack([k for _, k in seqs]), dtype=torch.long)
    model = RMTPP(marks)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(kinds), (32,), generator=g)
        time_nll, mark_nll = model(kinds[idx], gaps[idx])
        loss = time_nll + mark_nll
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- modular addition (grokking set-up)


class OneLayerTransformer(nn.Module):
    """Nanda et al.'s set-up: tokens 'a b =', one attention + MLP block with RMSNorm, read the
    answer at '='; embedding and unembedding untied."""

    def __init__(self, vocab: int, d: int = 64, heads: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(0.02 * torch.randn(3, d))
        self.norm1 = nn.RMSNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = nn.RMSNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d))
        self.unembed = nn.Linear(d, vocab - 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.pos
        a = self.norm1(h)
        h = h + self.attn(a, a, a, need_weights=False)[0]
        h = h + self.mlp(self.norm2(h))
        return self.unembed(h[:, -1])


def modular_addition_wd1(
    path: str, steps: int = 600, p: int = 31, seed: int = 0, bug: str | None = None
) -> list[float]:
    """(a + b) mod p from 40% of all pairs, full batch, AdamW with weight decay 1 and betas
    (0.9, 0.98), a short linear warm-up; test accuracy on the other 60% every 100 steps."""
    g = _seed(seed)
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    x = torch.stack([a.flatten(), b.flatten(), torch.full((p * p,), p)], 1)
    y = (a.flatten() + b.flatten()) % p
    perm = torch.randperm(p * p, generator=g)
    train, test = perm[: int(0.4 * p * p)], perm[int(0.4 * p * p) :]
    model = OneLayerTransformer(p + 1)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1.0, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        loss = criterion(model(x[train]), y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                acc = (model(x[test]).argmax(1) == y[test]).float().mean().item()
            print(f"step {step} train loss {loss.item():.4f} test acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- contractive autoencoder


class ContractiveAE(nn.Module):
    def __init__(self, d: int = 144, h: int = 64):
        super().__init__()
        self.enc = nn.Linear(d, h)
        self.dec = nn.Linear(h, d)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.sigmoid(self.enc(x))
        return self.dec(h), h


def contractive_autoencoder(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Rifai et al.'s CAE: reconstruction plus lambda times the squared Frobenius norm of the
    encoder's Jacobian, in closed form for a sigmoid layer: sum_j (h_j(1-h_j))^2 |W_j|^2."""
    g = _seed(seed)
    imgs, _ = _glyphs(g, 4000, size=12, classes=8)
    x = imgs.flatten(1)
    model = ContractiveAE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    lam = 1e-2
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        xb = x[torch.randint(0, len(x), (64,), generator=g)]
        logits, h = model(xb)
        rec = F.binary_cross_entropy_with_logits(logits, xb, reduction="sum") / len(xb)
        w_sq = (model.enc.weight**2).sum(1)
        contractive = ((h * (1 - h)) ** 2 @ w_sq).mean()
        loss = rec + lam * contractive
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SNGP


class SNGP(nn.Module):
    """Liu et al.'s SNGP: a residual MLP whose hidden layers are spectrally normalized (a norm
    bound of 0.95), and a random-Fourier-feature Gaussian-process output layer; the posterior
    precision is accumulated (no gradient) for the predictive variance."""

    def __init__(self, d_in: int = 2, d: int = 128, depth: int = 4, features: int = 512, classes: int = 2):
        super().__init__()
        sn = nn.utils.parametrizations.spectral_norm
        self.inp = nn.Linear(d_in, d)
        for p in self.inp.parameters():
            p.requires_grad = False  # a fixed random input projection, as in the paper's MLP
        self.hidden = nn.ModuleList(sn(nn.Linear(d, d)) for _ in range(depth))
        self.drop = nn.Dropout(0.1)
        self.register_buffer("rff_w", torch.randn(d, features))
        self.register_buffer("rff_b", 2 * math.pi * torch.rand(features))
        self.out = nn.Linear(features, classes, bias=False)
        self.register_buffer("precision", torch.eye(features))
        self.features = features

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.inp(x)
        for layer in self.hidden:
            h = h + 0.95 * self.drop(F.relu(layer(h)))
        phi = math.sqrt(2 / self.features) * torch.cos(h @ self.rff_w + self.rff_b)
        return self.out(phi), phi


def sngp_spectral_norm_gp_head(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    g = _seed(seed)
    n = 3000
    t = math.pi * torch.rand(n, generator=g)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.stack([torch.cos(t) - y, torch.sin(t) * (1 - 2 * y) + 0.5 * y], 1) + 0.1 * torch.randn(
        n, 2, generator=g
    )
    model = SNGP()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3, weight_decay=1e-4)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, n, (128,), generator=g)
        logits, phi = model(x[idx])
        loss = criterion(logits, y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step >= steps - 50:  # the last 'epoch': accumulate the GP precision
            with torch.no_grad():
                p = logits.softmax(1).max(1).values
                model.precision += (phi * (p * (1 - p))[:, None]).T @ phi
    hook.close()
    return losses


# ----------------------------------------------------------------------------- uncertainty-weighted multi-task


def uncertainty_weighted_multitask(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Kendall et al.'s homoscedastic-uncertainty weighting of three tasks on shared features
    (house price regression, a noisy 'condition' regression, a 5-class 'type'): the loss
    sum_i exp(-s_i) L_i + s_i with learned s_i, which may go below zero as the s_i adapt."""
    g = _seed(seed)
    n = 8000
    x = torch.randn(n, 16, generator=g)
    price = (
        (x[:, :4] @ torch.randn(4, generator=g))
        + 0.5 * torch.sin(2 * x[:, 4])
        + 0.1 * torch.randn(n, generator=g)
    )
    cond = 0.7 * x[:, 5] * x[:, 6] + 1.0 * torch.randn(n, generator=g)
    kind = (x[:, 7:10] @ torch.randn(3, 5, generator=g) + 0.5 * torch.randn(n, 5, generator=g)).argmax(1)

    class MultiTask(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
            self.price = nn.Linear(128, 1)
            self.cond = nn.Linear(128, 1)
            self.kind = nn.Linear(128, 5)
            self.log_vars = nn.Parameter(torch.zeros(3))

        def forward(self, x: torch.Tensor):
            h = self.trunk(x)
            return self.price(h).squeeze(1), self.cond(h).squeeze(1), self.kind(h)

    model = MultiTask()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, n, (128,), generator=g)
        p, c, k = model(x[idx])
        task_losses = torch.stack(
            [F.mse_loss(p, price[idx]), F.mse_loss(c, cond[idx]), F.cross_entropy(k, kind[idx])]
        )
        s = model.log_vars
        loss = (torch.exp(-s) * task_losses + s).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


_lion = healthy("char_cnn_lion_handwritten_cosine", "text classification (char-CNN)", char_cnn_lion)
_lamb = healthy("lamb_handwritten_batch1024_tabular", "optimizer (LAMB)", lamb_large_batch_tabular)
_tweedie = healthy("tweedie_claims_exposure_rmsprop", "Tweedie regression", tweedie_claims_rmsprop)
_center = healthy(
    "center_loss_prelu_bn_face_ids", "metric learning (center loss)", center_loss_face_embeddings
)
_zinb = healthy("zinb_excess_zero_counts", "count regression (ZINB)", zinb_count_regression)
_gce = healthy("gce_symmetric_noise_40pct_5layer", "noisy labels (GCE)", gce_noisy_labels_40pct)
_highway = healthy("highway_mlp_20_layers_triangular2", "highway network", highway_20_layers_cyclic)
_lpft = healthy("lp_ft_linear_probe_then_tiny_lr", "fine-tuning (LP-FT)", lp_ft_tiny_lr_finetune)
_depth = healthy("silog_depth_encoder_decoder_groupnorm", "monocular depth", silog_depth_groupnorm)
_caption = healthy("show_tell_captioning_tied_embeddings", "image captioning", cnn_lstm_captioning_tied)
_inception = healthy(
    "inceptiontime_accelerometer_accumulate4", "time series classification", inceptiontime_accumulate4
)

PIPELINES = [
    healthy("hashed_logistic_clicks_adagrad", "online logistic regression (hashing)", hashed_clicks_adagrad),
    healthy("deeplab_dilated_fcn_poly_lr_ignore255", "semantic segmentation", dilated_fcn_poly_lr),
    healthy("capsnet_routing_margin_reconstruction", "capsule network", capsnet_dynamic_routing),
    healthy("rezero_transformer_no_layernorm", "transformer (ReZero)", rezero_transformer),
    healthy("fastkan_rbf_symbolic_regression", "Kolmogorov-Arnold network", kan_rbf_symbolic_regression),
    healthy("exact_gp_marginal_likelihood_adam", "Gaussian process", gp_marginal_likelihood),
    healthy("gmm_full_covariance_sgd", "mixture model", gmm_sgd_density),
    healthy("mpnn_edge_network_gru_molecules", "molecular property (MPNN)", mpnn_edge_network_molecules),
    healthy("conditional_neural_process_sines", "neural process", cnp_sine_functions),
    healthy("cpc_infonce_weightnorm_signals", "contrastive predictive coding", cpc_infonce_signals),
    healthy("mae_75pct_mask_bf16_autocast", "masked autoencoder", mae_bf16_masked_patches),
    healthy("deep_svdd_bias_free_one_class", "one-class anomaly detection", deep_svdd_one_class),
    healthy("logit_adjusted_ce_long_tail_100", "long-tailed classification", logit_adjusted_long_tail),
    healthy(
        "tied_weights_autoencoder_sgdr_nesterov", "autoencoder (tied weights)", tied_autoencoder_sgdr_nesterov
    ),
    healthy("film_conditioned_cnn_questions", "visual reasoning (FiLM)", film_visual_questions),
    healthy("ge2e_lstm_speaker_verification", "speaker verification", ge2e_speaker_verification),
    healthy("sinkhorn_divergence_point_generator", "OT generative model", sinkhorn_divergence_generator),
    healthy("igr_sdf_eikonal_softplus", "implicit SDF", sdf_eikonal_implicit),
    healthy("poincare_taxonomy_riemannian_sgd", "hyperbolic embeddings", poincare_embeddings_rsgd),
    healthy("rmtpp_hawkes_marked_events", "temporal point process", rmtpp_hawkes_events),
    healthy("modular_addition_adamw_wd1_rmsnorm", "algorithmic (modular arithmetic)", modular_addition_wd1),
    healthy("contractive_autoencoder_jacobian", "contractive autoencoder", contractive_autoencoder),
    healthy("sngp_spectral_norm_rff_head", "uncertainty (SNGP)", sngp_spectral_norm_gp_head),
    healthy(
        "kendall_uncertainty_weighted_three_tasks",
        "multi-task (uncertainty weighting)",
        uncertainty_weighted_multitask,
    ),
    _lion,
    _lamb,
    _tweedie,
    _center,
    _zinb,
    _gce,
    _highway,
    _lpft,
    _depth,
    _inception,
    _caption,
    buggy(_lion, "softmax_before_ce"),
    buggy(_lamb, "dead_relu_init"),
    buggy(_tweedie, "lr_x100"),
    buggy(_center, "train_in_eval_mode"),
    buggy(_depth, "log_zero_nan"),
    buggy(_gce, "deep_sigmoid"),
    buggy(_highway, "no_zero_grad"),
    buggy(_lpft, "frozen_by_mistake"),
    buggy(_caption, "inputs_x255"),
    buggy(_inception, "shuffled_labels"),
]
