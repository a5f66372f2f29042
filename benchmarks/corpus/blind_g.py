"""A blind held-out set (issue 26), part G: plain PyTorch trainings of kinds and practices not
yet in the corpus, written without running mldbg's rules on them (`SPLIT = BLIND4`).

DETR-style set prediction with Hungarian matching, Transformer-XL segment memory, TabNet with
sparsemax masks, a JEM-style energy model sampled by SGLD from a replay buffer, an E(n)-equivariant
GNN, a Mamba-style selective scan, an RWKV time-mix language model, Glow (ActNorm, LU-parametrized
invertible 1x1, affine coupling), a hand-written Shampoo with grafting, muP width scaling,
implicit maximum likelihood, a masked (absorbing) discrete diffusion LM, EDM-preconditioned
denoising, IWAE (k=5), planar flows fitted by an annealed reverse KL, supervised contrastive
learning with a kNN monitor, Reptile, APPNP, DLinear, a tiny 2-D NeRF, IQL offline RL, a
decision transformer under bf16 autocast, a Fourier neural operator, DeepONet, a complex-valued
network with modReLU, BinaryConnect, an orthogonally parametrized RNN, NF-ResNet with adaptive
gradient clipping, CenterNet heatmaps, DeepHit, a spiking network with a surrogate gradient, a
Hyena-style FFT long convolution, a least-squares GAN over 1000 steps, and LambdaRank with
Adagrad, gradient accumulation and clipping by value.

Ten buggy twins, one per key of `BUGS`, each injected as a user's mistake: the learning rate
x100 (DLinear), `zero_grad` left out (DeepHit), labels shuffled apart from their rows (TabNet),
8-bit images fed as 0..255 (CenterNet), a softmax before CrossEntropyLoss (BinaryConnect), a
negative-bias init that kills the ReLUs (DeepONet), a deeper sigmoid stack (muP MLP), embeddings
frozen while the optimizer holds them (Transformer-XL), the eps dropped from a log-magnitude of
zero-padded signals (complex-valued net), `model.train()` forgotten after a kNN monitor (SupCon).
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import BLIND4, buggy, healthy

SPLIT = BLIND4

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 41)


def _blob_images(g: torch.Generator, n: int, size: int = 16, max_objs: int = 3):
    """Grey images with 1..max_objs bright squares of 3 classes (size 2, 3, 4). Returns images
    (n, 1, s, s), and per image a list of (class, cx, cy) with centres in [0, 1]."""
    imgs = 0.05 * torch.randn(n, 1, size, size, generator=g)
    targets = []
    for i in range(n):
        k = int(torch.randint(1, max_objs + 1, (1,), generator=g))
        objs = []
        for _ in range(k):
            c = int(torch.randint(0, 3, (1,), generator=g))
            w = c + 2
            x0 = int(torch.randint(0, size - w + 1, (1,), generator=g))
            y0 = int(torch.randint(0, size - w + 1, (1,), generator=g))
            imgs[i, 0, y0 : y0 + w, x0 : x0 + w] += 0.8
            objs.append((c, (x0 + w / 2) / size, (y0 + w / 2) / size))
        targets.append(objs)
    return imgs.clamp(0, 1), targets


# ----------------------------------------------------------------------------- DETR set prediction


class TinyDETR(nn.Module):
    def __init__(self, d: int = 64, queries: int = 5, classes: int = 3):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, d, 3, stride=2, padding=1), nn.ReLU()
        )
        self.pos = nn.Parameter(torch.randn(1, 64, d) * 0.02)
        self.query = nn.Embedding(queries, d)
        self.transformer = nn.Transformer(
            d, nhead=4, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=128, dropout=0.0,
            batch_first=True,
        )  # fmt: skip
        self.cls = nn.Linear(d, classes + 1)  # the last class is "no object"
        self.box = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 2))

    def forward(self, x):
        f = self.backbone(x).flatten(2).transpose(1, 2) + self.pos
        q = self.query.weight.unsqueeze(0).expand(len(x), -1, -1)
        h = self.transformer(f, q)
        return self.cls(h), self.box(h).sigmoid()


def detr_hungarian(path: str, steps: int = 200, seed: int = 0, bug=None) -> list[float]:
    from scipy.optimize import linear_sum_assignment

    g = _seed(seed)
    imgs, targets = _blob_images(g, 512)
    model = TinyDETR()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4 * 3, weight_decay=1e-4)
    empty_weight = torch.ones(4)
    empty_weight[-1] = 0.1  # eos_coef
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(imgs), (32,), generator=g)
        logits, boxes = model(imgs[idx])
        tgt_cls = torch.full((32, 5), 3, dtype=torch.long)
        l_box = torch.zeros(())
        n_obj = 0
        for b, i in enumerate(idx.tolist()):
            t = torch.tensor([[o[1], o[2]] for o in targets[i]])
            c = torch.tensor([o[0] for o in targets[i]])
            with torch.no_grad():
                cost = -logits[b].softmax(-1)[:, c] + 5 * torch.cdist(boxes[b], t, p=1)
            rows, cols = linear_sum_assignment(cost.numpy())
            rows, cols = torch.as_tensor(rows), torch.as_tensor(cols)
            tgt_cls[b, rows] = c[cols]
            l_box = l_box + F.l1_loss(boxes[b, rows], t[cols], reduction="sum")
            n_obj += len(cols)
        loss = (
            F.cross_entropy(logits.reshape(-1, 4), tgt_cls.reshape(-1), weight=empty_weight)
            + 5 * l_box / n_obj
        )
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Transformer-XL


def _markov_tokens(g: torch.Generator, n: int, vocab: int = 32) -> torch.Tensor:
    """A token stream from a sparse random second-order source: long-range structure to learn."""
    table = torch.randint(0, vocab, (vocab, vocab, 3), generator=g)
    out = [0, 1]
    choice = torch.randint(0, 3, (n,), generator=g)
    noise = torch.rand(n, generator=g) < 0.1
    rnd = torch.randint(0, vocab, (n,), generator=g)
    for i in range(n):
        out.append(int(rnd[i]) if noise[i] else int(table[out[-2], out[-1], choice[i]]))
    return torch.tensor(out[2:])


class XLLayer(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mem):
        b, t, d = x.shape
        h = self.ln1(torch.cat([mem, x], 1))
        q, k, v = self.qkv(h).chunk(3, -1)
        q = q[:, -t:]
        m = mem.shape[1]
        split = lambda z: z.reshape(b, -1, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        mask = torch.ones(t, m + t, dtype=torch.bool).tril(m)
        a = F.scaled_dot_product_attention(split(q), split(k), split(v), attn_mask=mask)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.ln2(x))


class TransformerXL(nn.Module):
    def __init__(self, vocab: int = 32, d: int = 64, layers: int = 2, mem_len: int = 32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, 2 * mem_len, d) * 0.02)
        self.layers = nn.ModuleList(XLLayer(d, 4) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.mem_len = mem_len

    def forward(self, x, mems):
        h = self.emb(x)
        h = h + self.pos[:, -h.shape[1] :]
        new_mems = []
        for layer, mem in zip(self.layers, mems, strict=True):
            new_mems.append(torch.cat([mem, h], 1)[:, -self.mem_len :].detach())
            h = layer(h, mem)
        return self.head(self.ln(h)), new_mems


def transformer_xl_memory(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    g = _seed(seed)
    stream = _markov_tokens(g, 16 * 32 * 40 + 1)
    bsz, seg = 16, 32
    data = stream[: bsz * (len(stream) // bsz)].view(bsz, -1)
    model = TransformerXL()
    opt = torch.optim.Adam(model.parameters(), lr=2.5e-4 * 4)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 30) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
    )
    if bug == "frozen_by_mistake":  # meant to freeze only for a warm-up, the unfreeze never written
        model.emb.weight.requires_grad_(False)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    mems = [torch.zeros(bsz, 0, 64) for _ in range(2)]
    pos = 0
    for _ in range(steps):
        if pos + seg + 1 > data.shape[1]:
            pos, mems = 0, [torch.zeros(bsz, 0, 64) for _ in range(2)]
        x, y = data[:, pos : pos + seg], data[:, pos + 1 : pos + seg + 1]
        pos += seg
        logits, mems = model(x, mems)
        loss = F.cross_entropy(logits.reshape(-1, 32), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- TabNet (sparsemax)


def sparsemax(z: torch.Tensor) -> torch.Tensor:
    zs, _ = z.sort(-1, descending=True)
    rng = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    cs = zs.cumsum(-1)
    support = (1 + rng * zs) > cs
    k = support.sum(-1, keepdim=True)
    tau = (cs.gather(-1, k - 1) - 1) / k
    return (z - tau).clamp(min=0)


class GLU(nn.Module):
    def __init__(self, i: int, o: int):
        super().__init__()
        self.fc = nn.Linear(i, 2 * o, bias=False)
        self.bn = nn.BatchNorm1d(2 * o, momentum=0.02)

    def forward(self, x):
        return F.glu(self.bn(self.fc(x)))


class TabNet(nn.Module):
    def __init__(self, d_in: int, n_d: int = 16, steps: int = 3, gamma: float = 1.3, out: int = 3):
        super().__init__()
        self.bn = nn.BatchNorm1d(d_in)
        self.shared = GLU(d_in, 2 * n_d)
        self.steps = nn.ModuleList(GLU(2 * n_d, 2 * n_d) for _ in range(steps + 1))
        self.att = nn.ModuleList(
            nn.Sequential(nn.Linear(n_d, d_in, bias=False), nn.BatchNorm1d(d_in)) for _ in range(steps)
        )
        self.gamma, self.n_d = gamma, n_d
        self.head = nn.Linear(n_d, out)

    def forward(self, x):
        x = self.bn(x)
        prior = torch.ones_like(x)
        h = self.steps[0](self.shared(x))
        out, ent = 0, 0
        for i, att in enumerate(self.att):
            m = sparsemax(att(h[:, self.n_d :]) * prior)
            prior = prior * (self.gamma - m)
            ent = ent + (-m * torch.log(m + 1e-10)).sum(1).mean()
            h = self.steps[i + 1](self.shared(x * m))
            out = out + F.relu(h[:, : self.n_d])
        return self.head(out), ent / len(self.att)


def tabnet_sparsemax(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    g = _seed(seed)
    n, d = 4096, 20
    x = torch.randn(n, d, generator=g)
    score = torch.stack([x[:, 0] * x[:, 1], x[:, 2] - x[:, 3].abs(), torch.sin(2 * x[:, 4])], 1)
    y = score.argmax(1)
    if bug == "shuffled_labels":  # the labels were sorted apart from the rows
        y = y[torch.randperm(n, generator=g)]
    model = TabNet(d)
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100, gamma=0.9)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, n, (256,), generator=g)
        logits, ent = model(x[idx])
        loss = F.cross_entropy(logits, y[idx]) + 1e-3 * ent
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- JEM / SGLD energy model


def _rings(g: torch.Generator, n: int) -> torch.Tensor:
    r = torch.where(torch.rand(n, generator=g) < 0.5, 1.0, 2.0)
    t = torch.rand(n, generator=g) * 2 * math.pi
    return torch.stack([r * t.cos(), r * t.sin()], 1) + 0.08 * torch.randn(n, 2, generator=g)


def ebm_sgld(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    g = _seed(seed)
    energy = nn.Sequential(nn.Linear(2, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(), nn.Linear(128, 1))
    opt = torch.optim.Adam(energy.parameters(), lr=1e-4 * 5, betas=(0.0, 0.999))
    buffer = torch.rand(2000, 2, generator=g) * 6 - 3
    hook = Hook(path)
    hook.register_module(energy)
    losses = []
    for _ in range(steps):
        pos = _rings(g, 128)
        bi = torch.randint(0, len(buffer), (128,), generator=g)
        fresh = torch.rand(128, 1, generator=g) < 0.05
        xs = torch.where(fresh, torch.rand(128, 2, generator=g) * 6 - 3, buffer[bi]).requires_grad_(True)
        for _ in range(20):  # SGLD: step 1, noise 0.01 as in JEM
            e = energy(xs).sum()
            (gx,) = torch.autograd.grad(e, xs)
            xs = (xs - 0.05 * gx + 0.01 * torch.randn(xs.shape, generator=g)).detach().requires_grad_(True)
        xs = xs.detach()
        buffer[bi] = xs
        e_pos, e_neg = energy(pos), energy(xs)
        loss = e_pos.mean() - e_neg.mean() + 0.1 * (e_pos**2 + e_neg**2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- EGNN


class EGCL(nn.Module):
    def __init__(self, h: int):
        super().__init__()
        self.edge = nn.Sequential(nn.Linear(2 * h + 1, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU())
        self.coord = nn.Sequential(nn.Linear(h, h), nn.SiLU(), nn.Linear(h, 1, bias=False))
        self.node = nn.Sequential(nn.Linear(2 * h, h), nn.SiLU(), nn.Linear(h, h))
        nn.init.xavier_uniform_(self.coord[-1].weight, gain=0.001)

    def forward(self, h, x):
        n = h.shape[1]
        diff = x[:, :, None] - x[:, None]
        d2 = (diff**2).sum(-1, keepdim=True)
        hi = h[:, :, None].expand(-1, -1, n, -1)
        hj = h[:, None].expand(-1, n, -1, -1)
        m = self.edge(torch.cat([hi, hj, d2], -1)) * (1 - torch.eye(n))[None, :, :, None]
        x = x + (diff * self.coord(m)).sum(2) / (n - 1)
        h = h + self.node(torch.cat([h, m.sum(2)], -1))
        return h, x


class EGNN(nn.Module):
    def __init__(self, h: int = 32, layers: int = 3):
        super().__init__()
        self.emb = nn.Linear(1, h)
        self.layers = nn.ModuleList(EGCL(h) for _ in range(layers))
        self.out = nn.Sequential(nn.Linear(h, h), nn.SiLU(), nn.Linear(h, 1))

    def forward(self, charge, x):
        h = self.emb(charge)
        for layer in self.layers:
            h, x = layer(h, x)
        return self.out(h).sum((1, 2))


def egnn_nbody_energy(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    g = _seed(seed)
    n, atoms = 2048, 6
    pos = torch.randn(n, atoms, 3, generator=g)
    q = torch.randint(0, 2, (n, atoms, 1), generator=g).float() * 2 - 1
    r = torch.cdist(pos, pos) + torch.eye(atoms)
    pair = (q @ q.transpose(1, 2)) / r * (1 - torch.eye(atoms))
    target = 0.5 * pair.sum((1, 2)) + torch.exp(-r).sum((1, 2))
    target = (target - target.mean()) / target.std()
    model = EGNN()
    opt = torch.optim.Adam(model.parameters(), lr=5e-4, weight_decay=1e-16)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, n, (64,), generator=g)
        loss = F.l1_loss(model(q[idx], pos[idx]), target[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Mamba-style selective scan


class SelectiveSSM(nn.Module):
    """S6 block: input-dependent dt, B, C; diagonal A = -exp(A_log); a causal depthwise conv; a
    SiLU gate; a sequential scan (the reference 'slow path')."""

    def __init__(self, d: int, d_state: int = 8, expand: int = 2):
        super().__init__()
        e = expand * d
        self.in_proj = nn.Linear(d, 2 * e)
        self.conv = nn.Conv1d(e, e, 4, groups=e, padding=3)
        self.x_proj = nn.Linear(e, 1 + 2 * d_state)
        self.dt_proj = nn.Linear(1, e)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1).float()).repeat(e, 1))
        self.D = nn.Parameter(torch.ones(e))
        self.out_proj = nn.Linear(e, d)
        self.norm = nn.RMSNorm(d)
        self.n = d_state

    def forward(self, u):
        b, t, _ = u.shape
        x, z = self.in_proj(self.norm(u)).chunk(2, -1)
        x = F.silu(self.conv(x.transpose(1, 2))[..., :t].transpose(1, 2))
        dt, bm, cm = self.x_proj(x).split([1, self.n, self.n], -1)
        dt = F.softplus(self.dt_proj(dt))
        a = -torch.exp(self.A_log)
        h = torch.zeros(b, x.shape[-1], self.n)
        ys = []
        for i in range(t):
            h = torch.exp(dt[:, i, :, None] * a) * h + dt[:, i, :, None] * bm[:, i, None] * x[:, i, :, None]
            ys.append((h * cm[:, i, None]).sum(-1))
        y = torch.stack(ys, 1) + x * self.D
        return u + self.out_proj(y * F.silu(z))


def mamba_selective_lm(path: str, steps: int = 200, seed: int = 0, bug=None) -> list[float]:
    """Two pre-norm selective-SSM blocks as a token language model on a second-order source."""
    g = _seed(seed)
    stream = _markov_tokens(g, 20000)
    model = nn.Sequential(
        nn.Embedding(32, 32), SelectiveSSM(32), SelectiveSSM(32), nn.RMSNorm(32), nn.Linear(32, 32)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=4e-3, total_steps=steps)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, len(stream) - 25, (16,), generator=g)
        x = torch.stack([stream[j : j + 24] for j in i])
        y = torch.stack([stream[j + 1 : j + 25] for j in i])
        loss = F.cross_entropy(model(x).reshape(-1, 32), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- RWKV time mix


class RWKVBlock(nn.Module):
    def __init__(self, d: int, layer: int, layers: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        ratio = 1 - layer / layers
        self.mix_k = nn.Parameter(torch.linspace(0, 1, d) ** ratio)
        self.mix_v = nn.Parameter(torch.linspace(0, 1, d) ** ratio + 0.3 * (1 - ratio))
        self.mix_r = nn.Parameter(torch.linspace(0, 1, d) ** (0.5 * ratio))
        self.decay = nn.Parameter(-5 + 8 * (torch.arange(d) / (d - 1)) ** (0.7 + 1.3 * ratio))
        self.first = nn.Parameter(torch.full((d,), math.log(0.3)))
        self.key, self.value, self.recept = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.output = nn.Linear(d, d, bias=False)
        self.ffk = nn.Linear(d, 4 * d, bias=False)
        self.ffv = nn.Linear(4 * d, d, bias=False)
        self.ffr = nn.Linear(d, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)
        prev = F.pad(h, (0, 0, 1, -1))
        k = self.key(h * self.mix_k + prev * (1 - self.mix_k))
        v = self.value(h * self.mix_v + prev * (1 - self.mix_v))
        r = torch.sigmoid(self.recept(h * self.mix_r + prev * (1 - self.mix_r)))
        w, u = -torch.exp(self.decay), self.first
        num = torch.zeros(b, d)
        den = torch.zeros(b, d)
        mx = torch.full((b, d), -1e38)
        outs = []
        for i in range(t):  # numerically stable WKV recurrence
            ki, vi = k[:, i], v[:, i]
            ww = u + ki
            p = torch.maximum(mx, ww)
            e1, e2 = torch.exp(mx - p), torch.exp(ww - p)
            outs.append((e1 * num + e2 * vi) / (e1 * den + e2))
            ww = mx + w
            p = torch.maximum(ww, ki)
            e1, e2 = torch.exp(ww - p), torch.exp(ki - p)
            num, den, mx = e1 * num + e2 * vi, e1 * den + e2, p
        x = x + self.output(r * torch.stack(outs, 1))
        h = self.ln2(x)
        return x + torch.sigmoid(self.ffr(h)) * self.ffv(torch.relu(self.ffk(h)) ** 2)


def rwkv_char_lm(path: str, steps: int = 150, seed: int = 0, bug=None) -> list[float]:
    g = _seed(seed)
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "his", "red", "ball"]
    text = " ".join(words[int(i)] for i in torch.randint(0, len(words), (6000,), generator=g))
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text])
    v = len(chars)
    model = nn.Sequential(
        nn.Embedding(v, 64), nn.LayerNorm(64), *(RWKVBlock(64, i, 2) for i in range(2)), nn.LayerNorm(64),
        nn.Linear(64, v, bias=False),
    )  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=6e-4 * 2, betas=(0.9, 0.99), eps=1e-8)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, len(data) - 33, (16,), generator=g)
        x = torch.stack([data[j : j + 32] for j in i])
        y = torch.stack([data[j + 1 : j + 33] for j in i])
        loss = F.cross_entropy(model(x).reshape(-1, v), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Glow


class ActNorm(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(d))
        self.log_scale = nn.Parameter(torch.zeros(d))
        self.register_buffer("initialized", torch.tensor(0))

    def forward(self, x):
        if not self.initialized:  # data-dependent init on the first batch
            with torch.no_grad():
                self.loc.copy_(-x.mean(0))
                self.log_scale.copy_(-torch.log(x.std(0) + 1e-6))
                self.initialized.fill_(1)
        return (x + self.loc) * torch.exp(self.log_scale), self.log_scale.sum().expand(len(x))


class InvLinearLU(nn.Module):
    """Invertible 1x1 convolution on a vector, LU-parametrized."""

    def __init__(self, d: int):
        super().__init__()
        w = torch.linalg.qr(torch.randn(d, d))[0]
        p, lo, up = torch.linalg.lu(w)
        s = torch.diagonal(up)
        self.register_buffer("p", p)
        self.register_buffer("sign", torch.sign(s))
        self.lower = nn.Parameter(lo)
        self.upper = nn.Parameter(torch.triu(up, 1))
        self.log_s = nn.Parameter(torch.log(s.abs()))

    def forward(self, x):
        d = len(self.log_s)
        lo = torch.tril(self.lower, -1) + torch.eye(d)
        up = torch.triu(self.upper, 1) + torch.diag(self.sign * torch.exp(self.log_s))
        return x @ (self.p @ lo @ up).T, self.log_s.sum().expand(len(x))


class AffineCoupling(nn.Module):
    def __init__(self, d: int, hidden: int = 64):
        super().__init__()
        self.h = d // 2
        self.net = nn.Sequential(
            nn.Linear(self.h, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, 2 * (d - self.h)),
        )  # fmt: skip
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x):
        xa, xb = x[:, : self.h], x[:, self.h :]
        log_s, t = self.net(xa).chunk(2, 1)
        s = torch.sigmoid(log_s + 2.0)  # Glow's sigmoid scale
        return torch.cat([xa, (xb + t) * s], 1), torch.log(s).sum(1)


def glow_flow(path: str, steps: int = 400, seed: int = 0, bug=None) -> list[float]:
    g = _seed(seed)
    d = 6
    mix = torch.randn(d, d, generator=g)
    layers = []
    for _ in range(4):
        layers += [ActNorm(d), InvLinearLU(d), AffineCoupling(d)]
    flow = nn.ModuleList(layers)
    opt = torch.optim.Adam(flow.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50))
    hook = Hook(path)
    hook.register_module(flow)
    losses = []
    for _ in range(steps):
        z0 = torch.randn(256, d, generator=g)
        x = torch.cat([torch.tanh(2 * z0[:, :3]), z0[:, 3:] ** 2 * 0.5], 1) @ mix.T
        logdet = torch.zeros(len(x))
        for layer in flow:
            x, ld = layer(x)
            logdet = logdet + ld
        nll = -(-0.5 * (x**2).sum(1) - 0.5 * d * math.log(2 * math.pi) + logdet).mean() / d
        opt.zero_grad()
        nll.backward()
        nn.utils.clip_grad_norm_(flow.parameters(), 50.0)
        opt.step()
        sched.step()
        losses.append(nll.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Shampoo (hand-written)


class ShampooLite(torch.optim.Optimizer):
    """Shampoo for matrices (left/right preconditioners, inverse 4th roots recomputed every few
    steps, grafted onto plain SGD-momentum's norm); vectors fall back to AdaGrad."""

    def __init__(self, params, lr=0.1, momentum=0.9, eps=1e-4, update_every=10):
        super().__init__(params, dict(lr=lr, momentum=momentum, eps=eps, update_every=update_every))

    @staticmethod
    def _inv_root(m: torch.Tensor, eps: float) -> torch.Tensor:
        vals, vecs = torch.linalg.eigh(m + eps * torch.eye(len(m)))
        return vecs @ torch.diag(vals.clamp(min=eps) ** -0.25) @ vecs.T

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                gr, st = p.grad, self.state[p]
                if not st:
                    st["step"] = 0
                    st["buf"] = torch.zeros_like(p)
                    if p.dim() == 2:
                        st["L"] = torch.zeros(p.shape[0], p.shape[0])
                        st["R"] = torch.zeros(p.shape[1], p.shape[1])
                    else:
                        st["acc"] = torch.zeros_like(p)
                st["step"] += 1
                if p.dim() == 2:
                    st["L"] += gr @ gr.T
                    st["R"] += gr.T @ gr
                    if st["step"] % group["update_every"] == 1 or "Li" not in st:
                        st["Li"] = self._inv_root(st["L"], group["eps"])
                        st["Ri"] = self._inv_root(st["R"], group["eps"])
                    d = st["Li"] @ gr @ st["Ri"]
                    d = d * (gr.norm() / (d.norm() + 1e-12))  # grafting
                else:
                    st["acc"] += gr * gr
                    d = gr / (st["acc"].sqrt() + 1e-8) * 0.1
                st["buf"].mul_(group["momentum"]).add_(d)
                p.add_(st["buf"], alpha=-group["lr"])


def shampoo_mlp(path: str, steps: int = 600, seed: int = 0, bug=None) -> list[float]:
    g = _seed(seed)
    x = torch.rand(4096, 8, generator=g) * 2 - 1
    y = (torch.sin(3 * x[:, :1]) * x[:, 1:2] + x[:, 2:3] * x[:, 3:4] - 0.5 * x[:, 4:5] ** 2).squeeze(1)
    model = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
    opt = ShampooLite(model.parameters(), lr=0.05)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(x), (128,), generator=g)
        loss = F.mse_loss(model(x[idx]).squeeze(1), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- muP


class MuMLP(nn.Module):
    """muP (Yang et al. 2022) for an MLP: hidden weights N(0, 1/fan_in), a zero-initialized
    readout scaled by base_width/width, Adam rates of hidden matrices divided by the width ratio."""

    def __init__(self, d_in: int, width: int, out: int, base: int = 64, bug=None):
        super().__init__()
        self.ratio = width / base
        act = nn.Sigmoid if bug == "deep_sigmoid" else nn.ReLU
        self.inp = nn.Linear(d_in, width)
        self.hidden = nn.ModuleList(nn.Linear(width, width) for _ in range(3 if bug != "deep_sigmoid" else 6))
        self.act = act()
        self.readout = nn.Linear(width, out)
        nn.init.normal_(self.inp.weight, std=1 / math.sqrt(d_in))
        for h in self.hidden:
            nn.init.normal_(h.weight, std=1 / math.sqrt(width))
            nn.init.zeros_(h.bias)
        nn.init.zeros_(self.readout.weight)

    def forward(self, x):
        h = self.act(self.inp(x))
        for layer in self.hidden:
            h = self.act(layer(h))
        return self.readout(h) / self.ratio

    def param_groups(self, lr: float):
        matrices = [h.weight for h in self.hidden]
        others = [p for p in self.parameters() if all(p is not m for m in matrices)]
        return [{"params": matrices, "lr": lr / self.ratio}, {"params": others, "lr": lr}]


def mup_width_mlp(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    g = _seed(seed)
    n = 6000
    centers = torch.randn(10, 24, generator=g) * 1.2
    y = torch.randint(0, 10, (n,), generator=g)
    x = centers[y] + torch.randn(n, 24, generator=g)
    model = MuMLP(24, 256, 10, bug=bug)
    opt = torch.optim.Adam(model.param_groups(3e-3))
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.995)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, n, (128,), generator=g)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- implicit MLE


def imle_generator(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    """IMLE (Li & Malik): every data point pulls its nearest of many generated samples; the
    latent pool is refreshed every few steps."""
    g = _seed(seed)
    angles = torch.arange(8) * (2 * math.pi / 8)
    data_centres = torch.stack([2 * angles.cos(), 2 * angles.sin()], 1)
    gen = nn.Sequential(nn.Linear(8, 128), nn.Mish(), nn.Linear(128, 128), nn.Mish(), nn.Linear(128, 2))
    opt = torch.optim.Adam(gen.parameters(), lr=1e-3, betas=(0.5, 0.999))
    hook = Hook(path)
    hook.register_module(gen)
    losses = []
    for step in range(steps):
        if step % 10 == 0:
            data = data_centres[torch.randint(0, 8, (256,), generator=g)] + 0.05 * torch.randn(
                256, 2, generator=g
            )
            pool = torch.randn(2560, 8, generator=g)
            with torch.no_grad():
                nearest = torch.cdist(data, gen(pool)).argmin(1)
            z = pool[nearest]
        loss = ((gen(z) - data) ** 2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- masked diffusion LM


def masked_diffusion_lm(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    """An absorbing-state discrete diffusion (MDLM-style): mask each token with probability t,
    predict the originals, weight the cross entropy by 1/t (the continuous-time ELBO)."""
    g = _seed(seed)
    stream = _markov_tokens(g, 30000)
    vocab, mask_id, length = 32, 32, 32
    layer = nn.TransformerEncoderLayer(
        64, 4, 128, dropout=0.1, activation="gelu", batch_first=True, norm_first=True
    )
    model = nn.ModuleDict(
        dict(
            emb=nn.Embedding(vocab + 1, 64),
            pos=nn.Embedding(length, 64),
            enc=nn.TransformerEncoder(layer, 2, enable_nested_tensor=False),
            out=nn.Linear(64, vocab),
        )
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4 * 3, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LinearLR(opt, 0.01, 1.0, total_iters=50)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, len(stream) - length, (32,), generator=g)
        x0 = torch.stack([stream[j : j + length] for j in i])
        t = torch.rand(32, 1, generator=g) * 0.98 + 0.02
        masked = torch.rand(x0.shape, generator=g) < t
        xt = torch.where(masked, mask_id, x0)
        h = model["enc"](model["emb"](xt) + model["pos"].weight)
        ce = F.cross_entropy(model["out"](h).transpose(1, 2), x0, reduction="none")
        loss = (ce * masked / t).sum() / masked.numel()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- EDM denoiser


def edm_denoiser(path: str, steps: int = 600, seed: int = 0, bug=None) -> list[float]:
    """Karras et al. 2022: log-normal sigma (P_mean -1.2, P_std 1.2), c_skip/c_out/c_in
    preconditioning, the lambda(sigma) weighting; 2-D points from a ring of 8 Gaussians."""
    g = _seed(seed)
    sd = 0.5
    net = nn.Sequential(
        nn.Linear(3, 128),
        nn.SiLU(),
        nn.Linear(128, 128),
        nn.SiLU(),
        nn.Linear(128, 128),
        nn.SiLU(),
        nn.Linear(128, 2),
    )
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(net)
    losses = []
    for _ in range(steps):
        th = torch.randint(0, 8, (256,), generator=g) * (2 * math.pi / 8)
        x = torch.stack([th.cos(), th.sin()], 1) + 0.03 * torch.randn(256, 2, generator=g)
        sigma = torch.exp(-1.2 + 1.2 * torch.randn(256, 1, generator=g))
        n = torch.randn(x.shape, generator=g) * sigma
        c_skip = sd**2 / (sigma**2 + sd**2)
        c_out = sigma * sd / (sigma**2 + sd**2).sqrt()
        c_in = 1 / (sigma**2 + sd**2).sqrt()
        f = net(torch.cat([c_in * (x + n), sigma.log() / 4], 1))
        denoised = c_skip * (x + n) + c_out * f
        weight = (sigma**2 + sd**2) / (sigma * sd) ** 2
        loss = (weight * (denoised - x) ** 2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- IWAE


def _binary_patterns(g: torch.Generator, n: int) -> torch.Tensor:
    """8x8 binary images: a random horizontal and a vertical bar plus flipped pixels."""
    img = torch.zeros(n, 8, 8)
    r = torch.randint(0, 8, (n,), generator=g)
    c = torch.randint(0, 8, (n,), generator=g)
    img[torch.arange(n), r, :] = 1
    img[torch.arange(n), :, c] = 1
    flip = torch.rand(n, 8, 8, generator=g) < 0.03
    return torch.where(flip, 1 - img, img).view(n, 64)


def iwae_k5(path: str, steps: int = 400, seed: int = 0, bug=None) -> list[float]:
    g = _seed(seed)
    data = _binary_patterns(g, 4096)
    k = 5
    enc = nn.Sequential(nn.Linear(64, 100), nn.Tanh(), nn.Linear(100, 100), nn.Tanh(), nn.Linear(100, 2 * 10))
    dec = nn.Sequential(nn.Linear(10, 100), nn.Tanh(), nn.Linear(100, 100), nn.Tanh(), nn.Linear(100, 64))
    model = nn.ModuleDict(dict(enc=enc, dec=dec))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        x = data[torch.randint(0, len(data), (64,), generator=g)]
        mu, logvar = enc(x).chunk(2, 1)
        std = torch.exp(0.5 * logvar)
        eps = torch.randn(k, *mu.shape, generator=g)
        z = mu + std * eps
        logits = dec(z)
        log_px = -F.binary_cross_entropy_with_logits(logits, x.expand(k, -1, -1), reduction="none").sum(-1)
        log_pz = (-0.5 * z**2 - 0.5 * math.log(2 * math.pi)).sum(-1)
        log_qz = (-0.5 * eps**2 - 0.5 * math.log(2 * math.pi) - 0.5 * logvar).sum(-1)
        bound = torch.logsumexp(log_px + log_pz - log_qz, 0) - math.log(k)
        loss = -bound.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- planar flows (VI)


class PlanarFlow(nn.Module):
    def __init__(self, d: int = 2):
        super().__init__()
        self.u = nn.Parameter(torch.randn(d) * 0.01)
        self.w = nn.Parameter(torch.randn(d) * 0.01)
        self.b = nn.Parameter(torch.zeros(1))

    def forward(self, z):
        wu = self.w @ self.u
        u_hat = self.u + (-1 + F.softplus(wu) - wu) * self.w / (self.w @ self.w)  # invertibility
        lin = z @ self.w + self.b
        z = z + u_hat * torch.tanh(lin)[:, None]
        psi = (1 - torch.tanh(lin) ** 2)[:, None] * self.w
        return z, torch.log((1 + psi @ u_hat).abs() + 1e-8)


def planar_flow_vi(path: str, steps: int = 500, seed: int = 0, bug=None) -> list[float]:
    """Rezende & Mohamed 2015: 16 planar flows fitted to the unnormalized 'U2'-like energy by
    the reverse KL, with an annealed inverse temperature, RMSprop."""
    g = _seed(seed)
    flows = nn.ModuleList(PlanarFlow() for _ in range(16))
    opt = torch.optim.RMSprop(flows.parameters(), lr=1e-3 * 2, momentum=0.9)

    def energy(z):
        w1 = torch.sin(2 * math.pi * z[:, 0] / 4)
        return 0.5 * ((z[:, 1] - w1) / 0.4) ** 2 + 0.1 * z[:, 0] ** 2

    hook = Hook(path)
    hook.register_module(flows)
    losses = []
    for step in range(steps):
        z0 = torch.randn(256, 2, generator=g)
        log_q = (-0.5 * z0**2 - 0.5 * math.log(2 * math.pi)).sum(1)
        z = z0
        for f in flows:
            z, ld = f(z)
            log_q = log_q - ld
        beta = min(1.0, 0.01 + step / 300)
        loss = (log_q + beta * energy(z)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


def _two_views(g: torch.Generator, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    def aug(v):
        v = torch.roll(v, int(torch.randint(-2, 3, (1,), generator=g)), dims=-1)
        v = v * (0.7 + 0.6 * torch.rand(len(v), 1, 1, 1, generator=g))
        return v + 0.1 * torch.randn(v.shape, generator=g)

    return aug(x), aug(x)


def _glyph_images(g: torch.Generator, n: int, classes: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    imgs, targets = _blob_images(g, n, size=12, max_objs=1)
    y = torch.tensor([t[0][0] for t in targets])
    # add a class-coloured stripe pattern so 5 classes are separable
    y5 = (y + 3 * torch.randint(0, 2, (n,), generator=g)).clamp(max=classes - 1)
    stripes = (torch.arange(12)[None, :] % (y5[:, None] + 2) == 0).float()
    return (imgs + 0.3 * stripes[:, None, None, :]).clamp(0, 1), y5


class SmallConvNet(nn.Module):
    def __init__(self, out: int, width: int = 32, act=nn.GELU):
        super().__init__()
        self.f = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), act(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), act(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * width, out),
        )  # fmt: skip

    def forward(self, x):
        return self.f(x)


# ----------------------------------------------------------------------------- SupCon


def supcon_loss(feats: torch.Tensor, labels: torch.Tensor, temperature: float = 0.1) -> torch.Tensor:
    n = len(feats)
    sim = feats @ feats.T / temperature
    self_mask = torch.eye(n, dtype=torch.bool)
    sim = sim.masked_fill(self_mask, -1e9)
    pos = (labels[:, None] == labels[None]) & ~self_mask
    log_prob = sim - torch.logsumexp(sim, 1, keepdim=True)
    return -((log_prob * pos).sum(1) / pos.sum(1).clamp(min=1)).mean()


def supcon_two_views(path: str, steps: int = 150, seed: int = 0, bug=None) -> list[float]:
    g = _seed(seed)
    x, y = _glyph_images(g, 2048)
    model = nn.Sequential(SmallConvNet(64, act=nn.ReLU), nn.ReLU(), nn.Linear(64, 32))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, len(x), (64,), generator=g)
        a, b = _two_views(g, x[idx])
        feats = F.normalize(model(torch.cat([a, b])), dim=1)
        loss = supcon_loss(feats, torch.cat([y[idx], y[idx]]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 49:  # a kNN monitor on held-out embeddings
            model.eval()
            with torch.no_grad():
                e = F.normalize(model(x[:256]), dim=1)
                acc = (y[:256][(e @ e.T).fill_diagonal_(-2).argmax(1)] == y[:256]).float().mean()
            if bug != "train_in_eval_mode":  # the bug: model.train() forgotten after the monitor
                model.train()
            print(f"step {step + 1} loss {loss.item():.3f} knn {acc:.2f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Reptile


def reptile_sines(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    """Reptile (Nichol et al. 2018): k inner Adam steps on a sampled sine task, then move the
    meta-weights toward the adapted ones with an outer rate annealed to zero."""
    g = _seed(seed)
    model = nn.Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for it in range(steps):
        amp = 0.1 + 4.9 * torch.rand(1, generator=g)
        phase = math.pi * torch.rand(1, generator=g)
        xs = torch.rand(50, 1, generator=g) * 10 - 5
        ys = amp * torch.sin(xs + phase)
        fast = __import__("copy").deepcopy(model)
        inner = torch.optim.Adam(fast.parameters(), lr=0.02, betas=(0.0, 0.999))
        for _ in range(5):
            idx = torch.randint(0, 50, (10,), generator=g)
            loss = F.mse_loss(fast(xs[idx]), ys[idx])
            inner.zero_grad()
            loss.backward()
            inner.step()
        with torch.no_grad():
            post = F.mse_loss(fast(xs), ys)
            eps = 1.0 * (1 - it / steps)
            for p, q in zip(model.parameters(), fast.parameters(), strict=True):
                p.add_(q - p, alpha=eps)
        losses.append(post.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- APPNP


def _sbm_graph(g: torch.Generator, n: int = 600, k: int = 4, d: int = 32):
    y = torch.randint(0, k, (n,), generator=g)
    p = torch.where(y[:, None] == y[None], 0.04, 0.004)
    adj = (torch.rand(n, n, generator=g) < p).float().triu(1)
    adj = adj + adj.T
    feats = torch.randn(k, d, generator=g)[y] * 0.5 + torch.randn(n, d, generator=g)
    return adj, feats, y


def appnp_pagerank(path: str, steps: int = 200, seed: int = 0, bug=None) -> list[float]:
    """APPNP (Klicpera et al. 2019): an MLP predicts, 10 steps of personalized PageRank
    (alpha 0.1) propagate; 20 labels per class, dropout 0.5, Adam 0.01, L2 5e-3 on the first layer."""
    g = _seed(seed)
    adj, x, y = _sbm_graph(g)
    a = adj + torch.eye(len(adj))
    dinv = a.sum(1).rsqrt()
    a_hat = dinv[:, None] * a * dinv[None]
    train = torch.cat([torch.nonzero(y == c).squeeze(1)[:20] for c in range(4)])
    mlp = nn.Sequential(nn.Dropout(0.5), nn.Linear(32, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 4))
    opt = torch.optim.Adam(
        [{"params": mlp[1].parameters(), "weight_decay": 5e-3}, {"params": mlp[4].parameters()}], lr=0.01
    )
    hook = Hook(path)
    hook.register_module(mlp)
    losses = []
    for _ in range(steps):
        h0 = mlp(x)
        h = h0
        for _ in range(10):
            h = 0.9 * (a_hat @ h) + 0.1 * h0
        loss = F.cross_entropy(h[train], y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DLinear


def dlinear_forecast(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    """DLinear (Zeng et al. 2023): a moving-average trend / remainder split, one linear map each
    from 96 past steps to 24 future ones, channel-independent, SGD as users often start."""
    g = _seed(seed)
    t = torch.arange(6000).float()
    chans = torch.stack(
        [
            torch.sin(2 * math.pi * t / 24 + i) + 0.002 * t * (i % 2) + 0.3 * torch.randn(6000, generator=g)
            for i in range(4)
        ],
        1,
    )
    chans = (chans - chans[:4000].mean(0)) / chans[:4000].std(0)
    lookback, horizon = 96, 24

    class DLinear(nn.Module):
        def __init__(self):
            super().__init__()
            self.avg = nn.AvgPool1d(25, stride=1)
            self.trend = nn.Linear(lookback, horizon)
            self.season = nn.Linear(lookback, horizon)

        def forward(self, x):  # (b, L, c)
            xc = x.transpose(1, 2)
            padded = torch.cat([xc[..., :1].expand(-1, -1, 12), xc, xc[..., -1:].expand(-1, -1, 12)], -1)
            trend = self.avg(padded)
            return (self.trend(trend) + self.season(xc - trend)).transpose(1, 2)

    model = DLinear()
    lr = 0.05 * (100 if bug == "lr_x100" else 1)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [150, 250], 0.5)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, 4000 - lookback - horizon, (32,), generator=g)
        x = torch.stack([chans[j : j + lookback] for j in i])
        y = torch.stack([chans[j + lookback : j + lookback + horizon] for j in i])
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- tiny 2-D NeRF


def nerf_2d_rays(path: str, steps: int = 150, seed: int = 0, bug=None) -> list[float]:
    """A 2-D NeRF: a flat scene of coloured discs, seen by 1-D cameras around it; positional
    encoding (6 octaves), 32 stratified samples per ray, alpha compositing."""
    g = _seed(seed)
    discs = torch.tensor([[0.3, 0.2, 0.25], [-0.3, -0.1, 0.3], [0.1, -0.4, 0.15]])
    colours = torch.tensor([[1.0, 0.2, 0.2], [0.2, 1.0, 0.3], [0.2, 0.3, 1.0]])

    def scene(p):
        d = torch.cdist(p, discs[:, :2]) - discs[:, 2]
        inside = (d < 0).float()
        return inside.sum(-1, keepdim=True) * 20, (inside @ colours).clamp(max=1)

    def render(field, origins, dirs, gen):
        t = torch.linspace(0, 2.4, 24)[None] + 2.4 / 24 * torch.rand(len(origins), 24, generator=gen)
        pts = origins[:, None] + t[..., None] * dirs[:, None]
        sigma, rgb = field(pts)
        alpha = 1 - torch.exp(-sigma.squeeze(-1) * 2.4 / 24)
        trans = torch.cumprod(torch.cat([torch.ones(len(alpha), 1), 1 - alpha + 1e-10], 1), 1)[:, :-1]
        return ((alpha * trans)[..., None] * rgb).sum(1)

    class Field(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(2 + 24, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4)
            )

        def forward(self, p):
            freqs = 2.0 ** torch.arange(6) * math.pi
            enc = torch.cat(
                [p, torch.sin(p[..., None] * freqs).flatten(-2), torch.cos(p[..., None] * freqs).flatten(-2)],
                -1,
            )
            out = self.net(enc)
            return F.relu(out[..., :1]), torch.sigmoid(out[..., 1:])

    field = Field()
    opt = torch.optim.Adam(field.parameters(), lr=5e-4)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.1 ** (1 / 1000))
    hook = Hook(path)
    hook.register_module(field)
    losses = []
    for _ in range(steps):
        ang = torch.rand(128, generator=g) * 2 * math.pi
        origins = 1.2 * torch.stack([ang.cos(), ang.sin()], 1)
        look = -origins / 1.2
        spread = (torch.rand(128, generator=g) - 0.5) * 1.0
        dirs = torch.stack(
            [
                look[:, 0] * spread.cos() - look[:, 1] * spread.sin(),
                look[:, 0] * spread.sin() + look[:, 1] * spread.cos(),
            ],
            1,
        )
        with torch.no_grad():
            target = render(scene, origins, dirs, torch.Generator().manual_seed(0))
        loss = F.mse_loss(render(field, origins, dirs, g), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- IQL


def iql_offline(path: str, steps: int = 800, seed: int = 0, bug=None) -> list[float]:
    """Implicit Q-learning on a fixed dataset of a 1-D reach task: expectile regression of V
    (tau 0.7), TD for Q with a Polyak target, advantage-weighted regression for the policy."""
    g = _seed(seed)
    n = 20000
    s = torch.rand(n, 2, generator=g) * 2 - 1  # position, goal
    a = torch.rand(n, 1, generator=g) * 2 - 1
    a = torch.where(torch.rand(n, 1, generator=g) < 0.3, (s[:, 1:] - s[:, :1]).clamp(-1, 1), a)
    s2 = torch.cat([(s[:, :1] + 0.3 * a).clamp(-1, 1), s[:, 1:]], 1)
    r = -(s2[:, 0] - s2[:, 1]).abs()

    def mlp(i: int, o: int) -> nn.Sequential:
        return nn.Sequential(nn.Linear(i, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, o))

    agent = nn.ModuleDict(dict(q=mlp(3, 1), v=mlp(2, 1), pi=mlp(2, 1)))
    q_target = __import__("copy").deepcopy(agent["q"]).requires_grad_(False)
    opt = torch.optim.Adam(agent.parameters(), lr=3e-4)
    hook = Hook(path)
    hook.register_module(agent)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, n, (256,), generator=g)
        si, ai, ri, s2i = s[i], a[i], r[i], s2[i]
        with torch.no_grad():
            tq = q_target(torch.cat([si, ai], 1)).squeeze(1)
            target = ri + 0.9 * agent["v"](s2i).squeeze(1)
        v = agent["v"](si).squeeze(1)
        diff = tq - v
        v_loss = (torch.where(diff > 0, 0.7, 0.3) * diff**2).mean()
        q_loss = F.mse_loss(agent["q"](torch.cat([si, ai], 1)).squeeze(1), target)
        w = torch.exp(3.0 * diff.detach()).clamp(max=100)
        pi_loss = (w * ((agent["pi"](si) - ai) ** 2).squeeze(1)).mean()
        loss = v_loss + q_loss + pi_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for p, pt in zip(agent["q"].parameters(), q_target.parameters(), strict=True):
                pt.lerp_(p, 0.005)
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- FNO


class SpectralConv1d(nn.Module):
    def __init__(self, ch: int, modes: int):
        super().__init__()
        self.modes = modes
        self.w = nn.Parameter(torch.randn(ch, ch, modes, dtype=torch.cfloat) / (ch * ch))

    def forward(self, x):
        xf = torch.fft.rfft(x)
        out = torch.zeros(x.shape[0], x.shape[1], xf.shape[-1], dtype=torch.cfloat)
        out[..., : self.modes] = torch.einsum("bix,iox->box", xf[..., : self.modes], self.w)
        return torch.fft.irfft(out, n=x.shape[-1])


def fno_heat_1d(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    """A Fourier neural operator learning the heat equation's solution map u(0) -> u(T) on a
    periodic grid of 64 points: 12 modes, width 32, 3 Fourier layers, GELU, Adam + StepLR."""
    g = _seed(seed)
    n, grid = 1000, 64
    k = torch.arange(grid // 2 + 1)
    coef = torch.randn(n, grid // 2 + 1, dtype=torch.cfloat, generator=g) / (1 + k) ** 2
    u0 = torch.fft.irfft(coef, n=grid) * grid
    uT = torch.fft.irfft(coef * torch.exp(-0.02 * (2 * math.pi * k) ** 2 * 0.05), n=grid) * grid
    scale = u0.std()
    u0, uT = u0 / scale, uT / scale

    class FNO(nn.Module):
        def __init__(self):
            super().__init__()
            self.lift = nn.Conv1d(2, 32, 1)
            self.spec = nn.ModuleList(SpectralConv1d(32, 12) for _ in range(3))
            self.local = nn.ModuleList(nn.Conv1d(32, 32, 1) for _ in range(3))
            self.proj = nn.Sequential(nn.Conv1d(32, 64, 1), nn.GELU(), nn.Conv1d(64, 1, 1))

        def forward(self, u):
            xs = torch.linspace(0, 1, grid).expand(len(u), 1, grid)
            h = self.lift(torch.cat([u[:, None], xs], 1))
            for i, (s, w) in enumerate(zip(self.spec, self.local, strict=True)):
                h = s(h) + w(h)
                h = F.gelu(h) if i < 2 else h
            return self.proj(h).squeeze(1)

    model = FNO()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, 100, 0.5)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, n, (20,), generator=g)
        pred = model(u0[i])
        loss = ((pred - uT[i]).norm(dim=1) / uT[i].norm(dim=1)).mean()  # relative L2
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DeepONet


def deeponet_antiderivative(path: str, steps: int = 400, seed: int = 0, bug=None) -> list[float]:
    """DeepONet (Lu et al. 2021): learn G(u)(y) = int_0^y u, branch net on u at 50 sensors,
    trunk net on y, their dot product plus a bias."""
    g = _seed(seed)
    m = 50
    xs = torch.linspace(0, 1, m)
    freqs = torch.arange(1, 6).float()

    def sample(b):
        a = torch.randn(b, 5, generator=g) / freqs
        u = (a[:, :, None] * torch.sin(math.pi * freqs[None, :, None] * xs)).sum(1)
        y = torch.rand(b, 1, generator=g)
        gy = (a * (1 - torch.cos(math.pi * freqs * y)) / (math.pi * freqs)).sum(1, keepdim=True)
        return u, y, gy

    class DeepONet(nn.Module):
        def __init__(self):
            super().__init__()
            self.branch = nn.Sequential(
                nn.Linear(m, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(), nn.Linear(40, 40)
            )
            self.trunk = nn.Sequential(
                nn.Linear(1, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(), nn.Linear(40, 40)
            )
            self.bias = nn.Parameter(torch.zeros(1))
            if bug == "dead_relu_init":  # a 'shift the pre-activations' init from a blog post
                for lin in [*self.branch[:-1], *self.trunk[:-1]]:  # the layers before a ReLU
                    if isinstance(lin, nn.Linear):
                        nn.init.constant_(lin.bias, -3.0)

        def forward(self, u, y):
            return (self.branch(u) * self.trunk(y)).sum(1, keepdim=True) + self.bias

    model = DeepONet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        u, y, gy = sample(128)
        loss = F.mse_loss(model(u, y), gy)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- complex-valued net


class ComplexLinear(nn.Module):
    def __init__(self, i: int, o: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(o, i, dtype=torch.cfloat) / math.sqrt(2 * i))
        self.bias = nn.Parameter(torch.zeros(o, dtype=torch.cfloat))

    def forward(self, z):
        return z @ self.weight.T + self.bias


def complex_spectrum_classifier(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    """Classify zero-padded tone bursts from their complex spectrum with complex weights and a
    modReLU; log-magnitude features as a second real input."""
    g = _seed(seed)
    n, length = 3000, 64
    y = torch.randint(0, 4, (n,), generator=g)
    t = torch.arange(40).float()
    f0 = 3 + 4 * y.float()[:, None] + torch.randn(n, 1, generator=g) * 0.3
    burst = torch.sin(2 * math.pi * f0 * t / 64 + torch.rand(n, 1, generator=g) * 6) + 0.2 * torch.randn(
        n, 40, generator=g
    )
    sig = F.pad(burst, (0, length - 40))  # silence after the burst
    spec = torch.fft.rfft(sig)  # (n, 33)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = ComplexLinear(33, 32)
            self.b1 = nn.Parameter(torch.zeros(32))
            self.c2 = ComplexLinear(32, 16)
            self.mag = nn.Linear(length, 16)
            self.out = nn.Linear(32, 4)

        def forward(self, z, logmag):
            h = self.c1(z)
            h = F.relu(h.abs() + self.b1) * h / (h.abs() + 1e-6)  # modReLU
            h = self.c2(h).abs()
            return self.out(torch.cat([h, torch.tanh(self.mag(logmag))], 1))

    eps = 0.0 if bug == "log_zero_nan" else 1e-3  # the bug: the eps dropped, log(0) on the padding
    logmag = torch.log(sig.abs() + eps)
    model = Net()
    opt = torch.optim.NAdam(model.parameters(), lr=2e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, n, (64,), generator=g)
        loss = F.cross_entropy(model(spec[i], logmag[i]), y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- BinaryConnect


class BinaryLinear(nn.Linear):
    """Sign weights in the forward pass, the straight-through estimator backward, real-valued
    latent weights clipped to [-1, 1] after each step (Courbariaux et al. 2015)."""

    def forward(self, x):
        wb = self.weight + (torch.sign(self.weight) - self.weight).detach()
        return F.linear(x, wb, self.bias)


def binaryconnect_mlp(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    g = _seed(seed)
    x, y = _glyph_images(g, 3000)
    x = x.flatten(1) * 2 - 1
    layers = [nn.Flatten()]
    for i, o in [(144, 256), (256, 256)]:
        layers += [BinaryLinear(i, o), nn.BatchNorm1d(o), nn.Hardtanh()]
    layers += [BinaryLinear(256, 5), nn.BatchNorm1d(5)]
    if bug == "softmax_before_ce":  # a softmax 'to get probabilities' before CrossEntropyLoss
        layers.append(nn.Softmax(dim=1))
    model = nn.Sequential(*layers)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.99)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, len(x), (100,), generator=g)
        loss = criterion(model(x[i]), y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            for m in model:
                if isinstance(m, BinaryLinear):
                    m.weight.clamp_(-1, 1)
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- orthogonal RNN


def orthogonal_rnn_adding(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    """The adding problem (length 50) with a vanilla tanh RNN whose recurrent matrix is kept
    orthogonal by torch.nn.utils.parametrizations.orthogonal; RMSprop."""
    from torch.nn.utils import parametrizations

    g = _seed(seed)
    rnn = nn.RNN(2, 64, batch_first=True, nonlinearity="tanh")
    parametrizations.orthogonal(rnn, "weight_hh_l0")
    model = nn.ModuleDict(dict(rnn=rnn, head=nn.Linear(64, 1)))
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        vals = torch.rand(64, 50, generator=g)
        marks = torch.zeros(64, 50)
        a = torch.randint(0, 25, (64,), generator=g)
        b = torch.randint(25, 50, (64,), generator=g)
        marks[torch.arange(64), a] = 1
        marks[torch.arange(64), b] = 1
        target = (vals * marks).sum(1)
        out, _ = model["rnn"](torch.stack([vals, marks], -1))
        loss = F.mse_loss(model["head"](out[:, -1]).squeeze(1), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- NF-ResNet + AGC


class WSConv2d(nn.Conv2d):
    """Scaled weight standardization with a learnable gain (Brock et al. 2021)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.gain = nn.Parameter(torch.ones(self.out_channels, 1, 1, 1))

    def forward(self, x):
        w = self.weight
        fan_in = w[0].numel()
        w = (w - w.mean((1, 2, 3), keepdim=True)) / (w.var((1, 2, 3), keepdim=True) * fan_in + 1e-4).sqrt()
        return F.conv2d(x, w * self.gain * 1.7139, self.bias, self.stride, self.padding)  # gamma for ReLU


class NFBlock(nn.Module):
    def __init__(self, ch: int, beta: float, alpha: float = 0.2):
        super().__init__()
        self.beta, self.alpha = beta, alpha
        self.c1 = WSConv2d(ch, ch, 3, padding=1)
        self.c2 = WSConv2d(ch, ch, 3, padding=1)
        self.skip_gain = nn.Parameter(torch.zeros(()))

    def forward(self, x):
        h = self.c2(F.relu(self.c1(F.relu(x) / self.beta)))
        return x + self.alpha * self.skip_gain * h


def _agc(params, clip: float = 0.01, eps: float = 1e-3) -> None:
    for p in params:
        if p.grad is None:
            continue
        dims = tuple(range(1, p.dim())) if p.dim() > 1 else None  # unit-wise for matrices
        pn = torch.linalg.vector_norm(p.detach(), dim=dims, keepdim=True).clamp(min=eps)
        gn = torch.linalg.vector_norm(p.grad, dim=dims, keepdim=True)
        p.grad.mul_(torch.where(gn > clip * pn, clip * pn / gn.clamp(min=1e-6), 1.0))


def nf_resnet_agc(path: str, steps: int = 200, seed: int = 0, bug=None) -> list[float]:
    g = _seed(seed)
    x, y = _glyph_images(g, 3000)
    blocks, var = [], 1.0
    for _ in range(4):
        blocks.append(NFBlock(16, beta=math.sqrt(var)))
        var += 0.2**2
    model = nn.Sequential(
        WSConv2d(1, 16, 3, padding=1),
        *blocks,
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 5),
    )
    nn.init.zeros_(model[-1].weight)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-5)
    sched = torch.optim.lr_scheduler.SequentialLR(
        opt,
        [
            torch.optim.lr_scheduler.LinearLR(opt, 0.1, 1.0, 20),
            torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps - 20),
        ],
        [20],
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, len(x), (32,), generator=g)
        loss = F.cross_entropy(model(x[i]), y[i])
        opt.zero_grad()
        loss.backward()
        _agc([p for n, p in model.named_parameters() if not n.startswith(str(len(model) - 1))])
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- CenterNet


def centernet_heatmaps(path: str, steps: int = 250, seed: int = 0, bug=None) -> list[float]:
    """CenterNet (Zhou et al. 2019): per-class Gaussian centre heatmaps with the penalty-reduced
    focal loss (alpha 2, beta 4), a size head with L1 at centres, the head bias at -2.19."""
    g = _seed(seed)
    imgs, targets = _blob_images(g, 800)
    size = 16
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    heat = torch.zeros(len(imgs), 3, size, size)
    wh = torch.zeros(len(imgs), 1, size, size)
    centre = torch.zeros(len(imgs), 1, size, size)
    for i, objs in enumerate(targets):
        for c, cx, cy in objs:
            px, py = cx * size - 0.5, cy * size - 0.5
            heat[i, c] = torch.maximum(
                heat[i, c], torch.exp(-((xx - px) ** 2 + (yy - py) ** 2) / (2 * 1.0**2))
            )
            ix, iy = round(px), round(py)
            heat[i, c, iy, ix] = 1.0
            wh[i, 0, iy, ix] = (c + 2) / 4
            centre[i, 0, iy, ix] = 1
    if bug == "inputs_x255":  # the 8-bit images fed as 0..255 (the /255 left in a comment)
        imgs = (imgs * 255).round()
    backbone = nn.Sequential(
        nn.Conv2d(1, 24, 3, padding=1), nn.BatchNorm2d(24), nn.ReLU(),
        nn.Conv2d(24, 24, 3, padding=2, dilation=2), nn.BatchNorm2d(24), nn.ReLU(),
        nn.Conv2d(24, 24, 3, padding=1), nn.BatchNorm2d(24), nn.ReLU(),
    )  # fmt: skip
    hm_head = nn.Sequential(nn.Conv2d(24, 24, 3, padding=1), nn.ReLU(), nn.Conv2d(24, 3, 1))
    nn.init.constant_(hm_head[-1].bias, -2.19)
    wh_head = nn.Sequential(nn.Conv2d(24, 24, 3, padding=1), nn.ReLU(), nn.Conv2d(24, 1, 1))
    model = nn.ModuleDict(dict(backbone=backbone, hm=hm_head, wh=wh_head))
    opt = torch.optim.Adam(model.parameters(), lr=1.25e-4 * 4)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, len(imgs), (16,), generator=g)
        f = backbone(imgs[i])
        p = torch.sigmoid(hm_head(f)).clamp(1e-4, 1 - 1e-4)
        gt = heat[i]
        pos = gt.eq(1).float()
        pos_loss = (torch.log(p) * (1 - p) ** 2 * pos).sum()
        neg_loss = (torch.log(1 - p) * p**2 * (1 - gt) ** 4 * (1 - pos)).sum()
        num = pos.sum().clamp(min=1)
        focal = -(pos_loss + neg_loss) / num
        size_loss = (F.l1_loss(wh_head(f), wh[i], reduction="none") * centre[i]).sum() / num
        loss = focal + 0.1 * size_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DeepHit


def deephit_discrete_survival(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    """DeepHit (Lee et al. 2018), one risk: a softmax over 20 time bins plus 'beyond', the
    likelihood for events and censored rows, and the ranking loss (sigma 0.1, alpha 0.5)."""
    g = _seed(seed)
    n, d, bins = 3000, 10, 20
    x = torch.randn(n, d, generator=g)
    risk = x[:, 0] + 0.5 * x[:, 1] ** 2 - 0.5 * x[:, 2]
    t_event = torch.distributions.Exponential(torch.exp(risk) * 0.3).sample()
    t_cens = torch.rand(n, generator=g) * 8
    time = torch.minimum(t_event, t_cens)
    event = (t_event <= t_cens).float()
    tb = (time / 8 * bins).long().clamp(max=bins - 1)
    model = nn.Sequential(
        nn.Linear(d, 64), nn.ReLU6(), nn.Dropout(0.1), nn.Linear(64, 64), nn.ReLU6(), nn.Linear(64, bins + 1)
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, n, (128,), generator=g)
        pmf = F.softmax(model(x[i]), 1)
        cif = pmf.cumsum(1)
        b, e = tb[i], event[i]
        p_event = pmf.gather(1, b[:, None]).squeeze(1)
        surv = 1 - cif.gather(1, b[:, None]).squeeze(1)
        nll = -(e * torch.log(p_event + 1e-7) + (1 - e) * torch.log(surv + 1e-7)).mean()
        cif_at = cif[:, b]  # F_j(T_i) for all j, i
        own = cif.gather(1, b[:, None])  # F_i(T_i)
        acceptable = (e[:, None] == 1) & (b[:, None] < b[None])
        rank = (acceptable * torch.exp(-(own - cif_at.T) / 0.1)).sum() / acceptable.sum().clamp(min=1)
        loss = 0.5 * nll + 0.5 * rank
        if bug != "no_zero_grad":  # the bug: zero_grad left out of the loop
            opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- spiking network


class SpikeFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v):
        ctx.save_for_backward(v)
        return (v > 0).float()

    @staticmethod
    def backward(ctx, grad):
        (v,) = ctx.saved_tensors
        return grad / (1 + 10 * v.abs()) ** 2  # fast-sigmoid surrogate (SuperSpike)


def snn_surrogate_gradient(path: str, steps: int = 200, seed: int = 0, bug=None) -> list[float]:
    """A two-layer leaky integrate-and-fire network unrolled over 25 steps on rate-coded
    inputs, trained through a surrogate gradient, cross entropy on the output spike counts."""
    g = _seed(seed)
    x, y = _glyph_images(g, 2000)
    x = x.flatten(1)
    fc1, fc2 = nn.Linear(144, 128), nn.Linear(128, 5)
    model = nn.Sequential(fc1, fc2)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4 * 4, betas=(0.9, 0.999))
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, len(x), (64,), generator=g)
        v1 = torch.zeros(64, 128)
        v2 = torch.zeros(64, 5)
        count = torch.zeros(64, 5)
        for _ in range(25):
            spikes_in = (torch.rand(64, 144, generator=g) < x[i]).float()
            v1 = 0.9 * v1 + fc1(spikes_in)
            s1 = SpikeFn.apply(v1 - 1.0)
            v1 = v1 - s1.detach()  # soft reset
            v2 = 0.9 * v2 + fc2(s1)
            s2 = SpikeFn.apply(v2 - 1.0)
            v2 = v2 - s2.detach()
            count = count + s2
        loss = F.cross_entropy(count, y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Hyena-style FFT conv


class HyenaOperator(nn.Module):
    """Order-2 Hyena: projections, short depthwise convs, implicit long filters from an MLP on
    positional features with an exponential decay window, causal FFT convolution, gating."""

    def __init__(self, d: int, length: int):
        super().__init__()
        self.length = length
        self.in_proj = nn.Linear(d, 3 * d)
        self.short = nn.Conv1d(3 * d, 3 * d, 3, padding=2, groups=3 * d)
        self.filter = nn.Sequential(nn.Linear(9, 32), Sin(), nn.Linear(32, 32), Sin(), nn.Linear(32, d))
        self.out_proj = nn.Linear(d, d)
        self.register_buffer("decay", torch.exp(-torch.linspace(0, 4, length))[:, None])

    def forward(self, u):
        b, t, d = u.shape
        z = self.short(self.in_proj(u).transpose(1, 2))[..., :t]
        x1, x2, v = z.chunk(3, 1)
        pos = torch.linspace(0, 1, t)[:, None]
        feats = torch.cat(
            [
                pos,
                *(torch.sin(k * math.pi * pos) for k in range(1, 5)),
                *(torch.cos(k * math.pi * pos) for k in range(1, 5)),
            ],
            1,
        )
        h = (self.filter(feats) * self.decay[:t]).T  # (d, t)
        y = torch.fft.irfft(torch.fft.rfft(v * x2, n=2 * t) * torch.fft.rfft(h, n=2 * t), n=2 * t)[..., :t]
        return u + self.out_proj((y * x1).transpose(1, 2))


class Sin(nn.Module):
    def forward(self, x):
        return torch.sin(x)


def hyena_fft_conv_lm(path: str, steps: int = 200, seed: int = 0, bug=None) -> list[float]:
    g = _seed(seed)
    stream = _markov_tokens(g, 30000)
    model = nn.Sequential(
        nn.Embedding(32, 64), HyenaOperator(64, 48), nn.LayerNorm(64), HyenaOperator(64, 48), nn.LayerNorm(64),
        nn.Linear(64, 32),
    )  # fmt: skip
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4 * 2, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps, eta_min=1e-5)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, len(stream) - 49, (16,), generator=g)
        x = torch.stack([stream[j : j + 48] for j in i])
        y = torch.stack([stream[j + 1 : j + 49] for j in i])
        loss = F.cross_entropy(model(x).reshape(-1, 32), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- LSGAN


def lsgan_mixture_1000_steps(path: str, steps: int = 1000, seed: int = 0, bug=None) -> list[float]:
    """Least-squares GAN (Mao et al. 2017) with a-b-c = 0-1-1 on a 2-D grid of 9 Gaussians:
    1000 small steps, Adam(2e-4, beta1 0.5); the loss returned is D's plus G's."""
    g = _seed(seed)
    grid = torch.stack(
        torch.meshgrid(torch.arange(-1, 2).float(), torch.arange(-1, 2).float(), indexing="ij"), -1
    ).view(-1, 2)
    gen = nn.Sequential(
        nn.Linear(4, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 2)
    )
    disc = nn.Sequential(
        nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1)
    )
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    hook = Hook(path)
    hook.register_module(gen)
    hook.register_module(disc)
    losses = []
    for _ in range(steps):
        real = grid[torch.randint(0, 9, (64,), generator=g)] + 0.05 * torch.randn(64, 2, generator=g)
        fake = gen(torch.randn(64, 4, generator=g))
        d_loss = 0.5 * ((disc(real) - 1) ** 2).mean() + 0.5 * (disc(fake.detach()) ** 2).mean()
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = 0.5 * ((disc(fake) - 1) ** 2).mean()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        losses.append(d_loss.item() + g_loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- LambdaRank


def lambdarank_ndcg(path: str, steps: int = 300, seed: int = 0, bug=None) -> list[float]:
    """LambdaRank-style training: pairwise RankNet losses weighted by |delta NDCG| of swapping
    the pair, gradients accumulated over 8 queries per update, Adagrad, clipped by value."""
    g = _seed(seed)
    d, docs = 16, 30
    w_true = torch.randn(d, generator=g)
    model = nn.Sequential(nn.Linear(d, 64), nn.PReLU(), nn.Linear(64, 32), nn.PReLU(), nn.Linear(32, 1))
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        total = 0.0
        for _ in range(8):
            x = torch.randn(docs, d, generator=g)
            rel = (x @ w_true + 0.5 * torch.randn(docs, generator=g)).div(2).round().clamp(0, 4)
            s = model(x).squeeze(1)
            with torch.no_grad():
                rank = torch.empty(docs)
                rank[s.argsort(descending=True)] = torch.arange(docs).float()
                disc = 1 / torch.log2(rank + 2)
                gain = 2**rel - 1
                ideal = (gain.sort(descending=True).values / torch.log2(torch.arange(docs).float() + 2)).sum()
                delta = ((gain[:, None] - gain[None]) * (disc[:, None] - disc[None])).abs() / ideal.clamp(
                    min=1e-6
                )
                pair = (rel[:, None] > rel[None]).float()
            loss = (delta * pair * F.softplus(-(s[:, None] - s[None]))).sum() / pair.sum().clamp(min=1)
            (loss / 8).backward()
            total += loss.item() / 8
        nn.utils.clip_grad_value_(model.parameters(), 1.0)
        opt.step()
        losses.append(total)
    hook.close()
    return losses


# ----------------------------------------------------------------------------- decision transformer


def decision_transformer_bf16(path: str, steps: int = 200, seed: int = 0, bug=None) -> list[float]:
    """Decision Transformer (Chen et al. 2021) on offline trajectories of a noisy 1-D reach task:
    (return-to-go, state, action) tokens, a causal GPT, action MSE, under bf16 autocast; AdamW
    1e-4 x 5 with linear warm-up, grad-norm clip 0.25."""
    g = _seed(seed)
    n_traj, horizon, k = 400, 20, 10
    states, actions, rtg = [], [], []
    for _ in range(n_traj):
        pos, goal, skill = (
            torch.rand(1, generator=g) * 2 - 1,
            torch.rand(1, generator=g) * 2 - 1,
            torch.rand(1, generator=g),
        )
        ss, aa, rr = [], [], []
        for _ in range(horizon):
            a = (skill * (goal - pos) + (1 - skill) * (torch.rand(1, generator=g) * 2 - 1)).clamp(-1, 1)
            ss.append(torch.cat([pos, goal]))
            aa.append(a)
            pos = (pos + 0.3 * a).clamp(-1, 1)
            rr.append(-(pos - goal).abs())
        r = torch.cat(rr)
        states.append(torch.stack(ss))
        actions.append(torch.stack(aa))
        rtg.append(r.flip(0).cumsum(0).flip(0)[:, None])
    states, actions, rtg = torch.stack(states), torch.stack(actions), torch.stack(rtg) / 10

    class DT(nn.Module):
        def __init__(self, d: int = 64):
            super().__init__()
            self.e_r, self.e_s, self.e_a = nn.Linear(1, d), nn.Linear(2, d), nn.Linear(1, d)
            self.e_t = nn.Embedding(horizon, d)
            self.ln = nn.LayerNorm(d)
            layer = nn.TransformerEncoderLayer(
                d, 2, 4 * d, dropout=0.1, activation="gelu", batch_first=True, norm_first=True
            )
            self.gpt = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Sequential(nn.Linear(d, 1), nn.Tanh())

        def forward(self, r, s, a, t):
            te = self.e_t(t)
            h = torch.stack([self.e_r(r) + te, self.e_s(s) + te, self.e_a(a) + te], 2).flatten(1, 2)
            mask = nn.Transformer.generate_square_subsequent_mask(h.shape[1])
            h = self.gpt(self.ln(h), mask=mask, is_causal=True)
            return self.head(h[:, 1::3])  # predict a_t from the state token

    model = DT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4 * 5, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50))
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        i = torch.randint(0, n_traj, (32,), generator=g)
        t0 = int(torch.randint(0, horizon - k + 1, (1,), generator=g))
        sl = slice(t0, t0 + k)
        t = torch.arange(t0, t0 + k).expand(32, -1)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pred = model(rtg[i, sl], states[i, sl], actions[i, sl], t)
        loss = F.mse_loss(pred.float(), actions[i, sl])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


_txl = healthy(
    "transformer_xl_segment_memory_lm", "language model (Transformer-XL memory)", transformer_xl_memory
)
_tabnet = healthy("tabnet_sparsemax_attentive_masks", "tabular (TabNet)", tabnet_sparsemax)
_mup = healthy("mup_width256_readout_zero_adam", "muP-scaled MLP", mup_width_mlp)
_supcon = healthy("supcon_two_views_sgd_cosine_knn_monitor", "supervised contrastive", supcon_two_views)
_dlinear = healthy("dlinear_trend_seasonal_sgd_multistep", "linear forecasting (DLinear)", dlinear_forecast)
_deeponet = healthy(
    "deeponet_antiderivative_operator", "operator learning (DeepONet)", deeponet_antiderivative
)
_complex = healthy(
    "complex_valued_modrelu_spectra_nadam", "complex-valued network", complex_spectrum_classifier
)
_binary = healthy("binaryconnect_ste_sign_weights_bn", "binarized network (STE)", binaryconnect_mlp)
_centernet = healthy("centernet_heatmap_focal_size_head", "detection (CenterNet)", centernet_heatmaps)
_deephit = healthy("deephit_discrete_time_rank_loss", "survival (DeepHit)", deephit_discrete_survival)

PIPELINES = [
    healthy("detr_hungarian_set_prediction", "set prediction (DETR)", detr_hungarian),
    healthy("jem_style_ebm_sgld_replay_buffer", "energy-based model (SGLD)", ebm_sgld),
    healthy("egnn_equivariant_pairwise_energy", "E(n)-equivariant GNN", egnn_nbody_energy),
    healthy("mamba_selective_scan_rmsnorm_onecycle", "state-space (selective scan)", mamba_selective_lm),
    healthy("rwkv_wkv_time_mix_char_lm", "RWKV language model", rwkv_char_lm),
    healthy("glow_actnorm_lu_invconv_coupling", "normalizing flow (Glow)", glow_flow),
    healthy("shampoo_handwritten_grafted_600_steps", "optimizer (Shampoo)", shampoo_mlp),
    healthy("imle_nearest_sample_generator_mish", "implicit MLE generator", imle_generator),
    healthy("masked_diffusion_lm_absorbing_elbo", "discrete diffusion LM", masked_diffusion_lm),
    healthy("edm_karras_preconditioned_denoiser", "diffusion (EDM)", edm_denoiser),
    healthy("iwae_k5_binary_patterns", "importance-weighted autoencoder", iwae_k5),
    healthy("planar_flows_reverse_kl_annealed", "variational inference (planar flows)", planar_flow_vi),
    healthy("reptile_first_order_sine_tasks", "meta-learning (Reptile)", reptile_sines),
    healthy("appnp_personalized_pagerank_sbm", "GNN (APPNP)", appnp_pagerank),
    healthy("tiny_nerf_2d_alpha_compositing", "neural radiance field", nerf_2d_rays),
    healthy("iql_expectile_offline_reach_800_steps", "offline RL (IQL)", iql_offline),
    healthy("fno_heat_equation_relative_l2", "operator learning (FNO)", fno_heat_1d),
    healthy("orthogonal_rnn_adding_problem_rmsprop", "orthogonal RNN", orthogonal_rnn_adding),
    healthy("nf_resnet_ws_agc_nesterov", "normalizer-free ResNet (AGC)", nf_resnet_agc),
    healthy("lif_snn_surrogate_gradient_rate_coded", "spiking network", snn_surrogate_gradient),
    healthy("hyena_implicit_fft_long_conv_lm", "long convolution LM (Hyena)", hyena_fft_conv_lm),
    healthy("lsgan_nine_gaussians_1000_steps", "GAN (least squares)", lsgan_mixture_1000_steps),
    healthy("lambdarank_delta_ndcg_adagrad_accum8", "learning to rank (LambdaRank)", lambdarank_ndcg),
    healthy(
        "decision_transformer_bf16_autocast", "offline RL (decision transformer)", decision_transformer_bf16
    ),
    _txl,
    _tabnet,
    _mup,
    _supcon,
    _dlinear,
    _deeponet,
    _complex,
    _binary,
    _centernet,
    _deephit,
    buggy(_dlinear, "lr_x100"),
    buggy(_deephit, "no_zero_grad"),
    buggy(_tabnet, "shuffled_labels"),
    buggy(_centernet, "inputs_x255"),
    buggy(_binary, "softmax_before_ce"),
    buggy(_deeponet, "dead_relu_init"),
    buggy(_mup, "deep_sigmoid"),
    buggy(_txl, "frozen_by_mistake"),
    buggy(_complex, "log_zero_nan"),
    buggy(_supcon, "train_in_eval_mode"),
]
