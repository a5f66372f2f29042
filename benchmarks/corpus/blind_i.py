"""Part I of the sixth blind set (issue 26), `blind5`: kinds not yet in the corpus, written
without ever running mldbg's rules on them. A sparse MoE with expert-choice routing, a RetNet
retention LM, consistency training, SimSiam, a mixture-of-softmaxes LSTM LM, an end-to-end memory
network, the Muon optimizer, schedule-free AdamW, a Swin transformer,
SigLIP, DLRM, a graph transformer with Laplacian positional encodings, slot attention, discrete
CQL, proxy-anchor metric learning, 2-D Gaussian splatting, a binary Tree-LSTM, FSQ, NODE
(oblivious trees), Dragonnet, NALU, a VGAE, a p4 group-equivariant CNN, I-JEPA, co-teaching, EWC,
FedAvg, ColBERT, a GFlowNet with trajectory balance, PonderNet, CycleGAN and Matryoshka heads.

Each is written the way its practitioners write it, with its published default
hyper-parameters scaled to a tiny model, data generated in-process, and the README's two lines.
"""

from __future__ import annotations

import copy
import math
import random

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import BLIND5, buggy, healthy

SPLIT = BLIND5

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 1000)


def _shapes8(g: torch.Generator, n: int, classes: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """8x8 grey images in [0, 1] of up to 8 shapes (square, ring, plus, diagonal, anti-diagonal,
    horizontal bar, vertical bar, corners) at a random offset, with noise."""
    yy, xx = torch.meshgrid(torch.arange(8), torch.arange(8), indexing="ij")
    cy, cx = yy - 3.5, xx - 3.5
    protos = torch.stack(
        [
            (cy.abs() < 2) & (cx.abs() < 2),
            ((cy**2 + cx**2).sqrt() - 2.5).abs() < 0.8,
            (cy.abs() < 1) | (cx.abs() < 1),
            (yy - xx).abs() < 1,
            (yy + xx - 7).abs() < 1,
            (cy.abs() < 1) & (cx.abs() < 3),
            (cx.abs() < 1) & (cy.abs() < 3),
            (cy.abs() > 2) & (cx.abs() > 2),
        ]
    ).float()[:classes]
    y = torch.randint(0, classes, (n,), generator=g)
    shift = torch.randint(-1, 2, (n, 2), generator=g)
    imgs = torch.stack(
        [torch.roll(protos[c], (int(a), int(b)), (0, 1)) for c, (a, b) in zip(y, shift, strict=True)]
    )
    imgs = imgs * (0.6 + 0.4 * torch.rand(n, 1, 1, generator=g)) + 0.1 * torch.randn(imgs.shape, generator=g)
    return imgs.clamp(0, 1).unsqueeze(1), y


def _markov_text(g: torch.Generator, n_tokens: int, vocab: int = 16) -> torch.Tensor:
    """A token stream from a random sparse second-order Markov chain (each context has a few
    likely successors)."""
    logits = torch.randn(vocab, vocab, vocab, generator=g) * 4.0
    probs = torch.softmax(logits, -1)
    out = torch.empty(n_tokens, dtype=torch.long)
    out[0], out[1] = 0, 1
    u = torch.rand(n_tokens, generator=g)
    cdf = probs.cumsum(-1)
    for i in range(2, n_tokens):
        out[i] = min(int(torch.searchsorted(cdf[out[i - 2], out[i - 1]], u[i])), vocab - 1)
    return out


# ----------------------------------------------------------------------------- MoE, expert choice


class ExpertChoiceMoE(nn.Module):
    """Zhou et al. 2022: each expert takes its top-k tokens by router score, k = n * c / E."""

    def __init__(self, d: int, hidden: int, experts: int = 4, capacity: float = 2.0):
        super().__init__()
        self.experts, self.capacity = experts, capacity
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, hidden) * d**-0.5)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, d) * hidden**-0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        tokens = x.reshape(-1, d)
        n = tokens.shape[0]
        k = int(n * self.capacity / self.experts)
        scores = torch.softmax(self.router(tokens), dim=-1)  # (n, E)
        gate, idx = torch.topk(scores.t(), k, dim=-1)  # (E, k)
        xin = tokens[idx]  # (E, k, d)
        h = F.gelu(torch.bmm(xin, self.w1))
        yout = torch.bmm(h, self.w2) * gate.unsqueeze(-1)
        out = torch.zeros_like(tokens).index_add_(0, idx.reshape(-1), yout.reshape(-1, d))
        return out.reshape(b, t, d)


class MoEBlockLM(nn.Module):
    def __init__(self, vocab: int, d: int = 64, ctx: int = 32):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.moe = ExpertChoiceMoE(d, 2 * d)
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t))
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        x = x + self.moe(self.ln2(x))
        return self.head(self.lnf(x))


def expert_choice_moe_lm(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    vocab, ctx, bs = 16, 32, 16
    data = _markov_text(g, 20000, vocab)
    model = MoEBlockLM(vocab, ctx=ctx)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 30) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        ix = torch.randint(0, len(data) - ctx - 1, (bs,), generator=g)
        x = torch.stack([data[i : i + ctx] for i in ix])
        y = torch.stack([data[i + 1 : i + ctx + 1] for i in ix])
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, vocab), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- RetNet


class MultiScaleRetention(nn.Module):
    """Sun et al. 2023, parallel form: (Q K^T * D) V with D[n, m] = gamma^(n-m), a per-head
    decay gamma = 1 - 2^(-5-h), GroupNorm over heads and a swish gate."""

    def __init__(self, d: int, heads: int = 4):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.norm = nn.GroupNorm(heads, d)
        self.register_buffer("gamma", 1 - 2.0 ** (-5 - torch.arange(heads, dtype=torch.float)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q = self.q(x).view(b, t, self.h, self.dk).transpose(1, 2)
        k = self.k(x).view(b, t, self.h, self.dk).transpose(1, 2) * self.dk**-0.5
        v = self.v(x).view(b, t, self.h, self.dk).transpose(1, 2)
        n = torch.arange(t)
        diff = (n[:, None] - n[None, :]).float()
        decay = self.gamma.view(-1, 1, 1) ** diff.clamp(min=0) * (diff >= 0)
        decay = decay / decay.sum(-1, keepdim=True).sqrt()
        ret = (q @ k.transpose(-1, -2)) * decay
        y = (ret @ v).transpose(1, 2).reshape(b * t, d)
        y = self.norm(y).view(b, t, d)
        return self.out(F.silu(self.gate(x)) * y)


class RetNetLM(nn.Module):
    def __init__(self, vocab: int, d: int = 64, layers: int = 2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(
                nn.ModuleDict(
                    {
                        "ln1": nn.LayerNorm(d),
                        "msr": MultiScaleRetention(d),
                        "ln2": nn.LayerNorm(d),
                        "ffn": nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d)),
                    }
                )
            )
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.emb(idx)
        for blk in self.blocks:
            x = x + blk["msr"](blk["ln1"](x))
            x = x + blk["ffn"](blk["ln2"](x))
        return self.head(self.lnf(x))


def retnet_lm(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    vocab, ctx, bs = 16, 32, 12
    data = _markov_text(g, 20000, vocab)
    model = RetNetLM(vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.98), weight_decay=0.05)
    warm = 40
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, 1.0) * max(0.0, 1 - s / steps) + 1e-3
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        ix = torch.randint(0, len(data) - ctx - 1, (bs,), generator=g)
        x = torch.stack([data[i : i + ctx] for i in ix])
        y = torch.stack([data[i + 1 : i + ctx + 1] for i in ix])
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- consistency training


def _two_moons(g: torch.Generator, n: int) -> torch.Tensor:
    t = torch.rand(n, generator=g) * math.pi
    which = torch.rand(n, generator=g) < 0.5
    x = torch.where(which, torch.cos(t), 1 - torch.cos(t))
    y = torch.where(which, torch.sin(t), 0.5 - torch.sin(t))
    pts = torch.stack([x - 0.5, y - 0.25], 1) * 1.6
    return pts + 0.05 * torch.randn(pts.shape, generator=g)


class ConsistencyMLP(nn.Module):
    """F_theta(x, sigma) with the EDM parameterisation f = c_skip x + c_out F."""

    def __init__(self, hidden: int = 128, sigma_min: float = 0.002, sigma_data: float = 0.5):
        super().__init__()
        self.sigma_min, self.sigma_data = sigma_min, sigma_data
        self.net = nn.Sequential(
            nn.Linear(2 + 16, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 2),
        )  # fmt: skip

    def forward(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        sd, sm = self.sigma_data, self.sigma_min
        c_skip = sd**2 / ((sigma - sm) ** 2 + sd**2)
        c_out = sd * (sigma - sm) / (sigma**2 + sd**2).sqrt()
        c_in = 1 / (sigma**2 + sd**2).sqrt()
        freqs = torch.exp(torch.linspace(0, math.log(100), 8))
        tt = 0.25 * torch.log(sigma)
        emb = torch.cat([torch.sin(tt * freqs), torch.cos(tt * freqs)], 1)
        return c_skip * x + c_out * self.net(torch.cat([c_in * x, emb], 1))


def consistency_training(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """Song et al. 2023 (CT): N(k) grows from s0=2 to s1=150, target EMA mu(k) =
    exp(s0 log mu0 / N(k)) with mu0 = 0.9, Karras sigmas with rho = 7, squared L2 metric."""
    g = _seed(seed)
    data = _two_moons(g, 4096)
    model = ConsistencyMLP()
    target = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=4e-4)
    s0, s1, mu0, rho, smin, smax = 2, 150, 0.9, 7.0, 0.002, 80.0
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for k in range(steps):
        n_k = math.ceil(math.sqrt(k / steps * ((s1 + 1) ** 2 - s0**2) + s0**2) - 1) + 1
        mu = math.exp(s0 * math.log(mu0) / n_k)
        i = torch.arange(n_k, dtype=torch.float)
        sig = (smin ** (1 / rho) + i / (n_k - 1) * (smax ** (1 / rho) - smin ** (1 / rho))) ** rho
        x = data[torch.randint(0, len(data), (256,), generator=g)]
        n = torch.randint(0, n_k - 1, (256,), generator=g)
        z = torch.randn(x.shape, generator=g)
        s_lo, s_hi = sig[n].unsqueeze(1), sig[n + 1].unsqueeze(1)
        pred = model(x + s_hi * z, s_hi)
        with torch.no_grad():
            tgt = target(x + s_lo * z, s_lo)
        loss = ((pred - tgt) ** 2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for pt, p in zip(target.parameters(), model.parameters(), strict=True):
                pt.mul_(mu).add_(p, alpha=1 - mu)
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SimSiam


class SimSiam(nn.Module):
    def __init__(self, dim: int = 128, pred_dim: int = 32):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )  # fmt: skip
        self.projector = nn.Sequential(
            nn.Linear(64, dim, bias=False), nn.BatchNorm1d(dim), nn.ReLU(),
            nn.Linear(dim, dim, bias=False), nn.BatchNorm1d(dim), nn.ReLU(),
            nn.Linear(dim, dim, bias=False), nn.BatchNorm1d(dim, affine=False),
        )  # fmt: skip
        self.predictor = nn.Sequential(
            nn.Linear(dim, pred_dim, bias=False),
            nn.BatchNorm1d(pred_dim),
            nn.ReLU(),
            nn.Linear(pred_dim, dim),
        )

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, ...]:
        z1, z2 = self.projector(self.backbone(x1)), self.projector(self.backbone(x2))
        return self.predictor(z1), self.predictor(z2), z1.detach(), z2.detach()


def _augment8(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    n = x.shape[0]
    pad = F.pad(x, (1, 1, 1, 1), mode="replicate")
    oy, ox = torch.randint(0, 3, (2,), generator=g).tolist()
    out = pad[:, :, oy : oy + 8, ox : ox + 8]
    flip = torch.rand(n, generator=g) < 0.5
    out = torch.where(flip.view(-1, 1, 1, 1), out.flip(3), out)
    scale = 0.6 + 0.8 * torch.rand(n, 1, 1, 1, generator=g)
    return out * scale + 0.1 * torch.randn(out.shape, generator=g)


def simsiam(path: str, steps: int = 250, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    imgs, _ = _shapes8(g, 4096, classes=8)
    images_u8 = (imgs * 255).round().to(torch.uint8)
    bs = 128
    model = SimSiam()
    init_lr = 0.05 * bs / 256
    optim_params = [
        {"params": model.backbone.parameters(), "fix_lr": False},
        {"params": model.projector.parameters(), "fix_lr": False},
        {"params": model.predictor.parameters(), "fix_lr": True},
    ]
    opt = torch.optim.SGD(optim_params, lr=init_lr, momentum=0.9, weight_decay=1e-4)
    criterion = nn.CosineSimilarity(dim=1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        cur = init_lr * 0.5 * (1 + math.cos(math.pi * step / steps))
        for pg in opt.param_groups:
            pg["lr"] = init_lr if pg["fix_lr"] else cur
        batch = images_u8[torch.randint(0, len(images_u8), (bs,), generator=g)].float()
        if bug != "inputs_x255":
            batch = batch / 255.0
        p1, p2, z1, z2 = model(_augment8(batch, g), _augment8(batch, g))
        loss = -(criterion(p1, z2).mean() + criterion(p2, z1).mean()) * 0.5
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- mixture of softmaxes


class MoSLSTM(nn.Module):
    """Yang et al. 2018: the output distribution is a mixture of K softmaxes, each from its own
    tanh projection of the LSTM state, with a prior over the components."""

    def __init__(self, vocab: int, emb: int = 48, hidden: int = 96, k: int = 3):
        super().__init__()
        self.k, self.emb = k, emb
        self.encoder = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, num_layers=2, dropout=0.25, batch_first=True)
        self.prior = nn.Linear(hidden, k, bias=False)
        self.latent = nn.Sequential(nn.Linear(hidden, k * emb), nn.Tanh())
        self.decoder = nn.Linear(emb, vocab)
        self.decoder.weight = self.encoder.weight
        self.drop = nn.Dropout(0.3)

    def forward(self, x: torch.Tensor, state=None):  # noqa: ANN001
        out, state = self.rnn(self.drop(self.encoder(x)), state)
        out = self.drop(out)
        b, t, _ = out.shape
        prior_logit = self.prior(out).view(-1, self.k)
        latent = self.drop(self.latent(out)).view(-1, self.emb)
        log_prob = F.log_softmax(self.decoder(latent), -1).view(b * t, self.k, -1)
        log_prior = F.log_softmax(prior_logit, -1).unsqueeze(-1)
        return torch.logsumexp(log_prior + log_prob, 1), state


def mos_lstm_lm(path: str, steps: int = 250, seed: int = 0, bug: str | None = None) -> list[float]:
    """AWD-LSTM-MoS training: plain SGD (lr 5 at this size), gradient clipping at 0.25, truncated BPTT with
    the hidden state carried (detached) between batches."""
    g = _seed(seed)
    vocab, bptt, bs = 16, 35, 12
    stream = _markov_text(g, bs * (bptt * steps // 2 + 1) + 1, vocab)
    cols = (len(stream) - 1) // bs
    data = stream[: bs * cols].view(bs, cols)
    target = stream[1 : bs * cols + 1].view(bs, cols)
    model = MoSLSTM(vocab)
    opt = torch.optim.SGD(model.parameters(), lr=5.0, weight_decay=1.2e-6)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    state = None
    pos = 0
    model.train()
    for _ in range(steps):
        if pos + bptt > cols:
            pos, state = 0, None
        x, y = data[:, pos : pos + bptt], target[:, pos : pos + bptt]
        pos += bptt
        if state is not None:
            state = tuple(s.detach() for s in state)
        log_prob, state = model(x, state)
        loss = F.nll_loss(log_prob, y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- end-to-end memory network


def _babi_where(g: torch.Generator, n: int, people: int = 6, places: int = 6, facts: int = 6):  # noqa: ANN202
    """bAbI task 1 shape: "person moved to place" facts, "where is person" with the last place
    that person moved to as the answer. Words: 0 pad, 1 moved, 2 where, people, then places."""
    p0, l0 = 3, 3 + people
    story = torch.zeros(n, facts, 3, dtype=torch.long)
    query = torch.zeros(n, 2, dtype=torch.long)
    answer = torch.zeros(n, dtype=torch.long)
    for i in range(n):
        who = torch.randint(0, people, (facts,), generator=g)
        where = torch.randint(0, places, (facts,), generator=g)
        story[i, :, 0], story[i, :, 1], story[i, :, 2] = p0 + who, 1, l0 + where
        q = int(who[torch.randint(0, facts, (1,), generator=g)])
        query[i] = torch.tensor([2, p0 + q])
        last = max(j for j in range(facts) if int(who[j]) == q)
        answer[i] = int(where[last])
    return story, query, answer, l0 + places


class MemN2N(nn.Module):
    """Sukhbaatar et al. 2015: 3 hops, adjacent weight tying, position encoding, temporal
    encoding, answer from W (u_K + o_K)."""

    def __init__(self, vocab: int, answers: int, d: int = 32, hops: int = 3, facts: int = 6):
        super().__init__()
        self.hops = hops
        self.A = nn.ModuleList([nn.Embedding(vocab, d, padding_idx=0) for _ in range(hops + 1)])
        for emb in self.A:
            nn.init.normal_(emb.weight, std=0.1)
        self.TA = nn.Parameter(torch.randn(hops + 1, facts, d) * 0.1)
        self.W = nn.Linear(d, answers, bias=False)

    @staticmethod
    def _pe(j: int, d: int) -> torch.Tensor:
        jj = torch.arange(1, j + 1, dtype=torch.float).unsqueeze(1)
        kk = torch.arange(1, d + 1, dtype=torch.float).unsqueeze(0)
        return (1 - jj / j) - (kk / d) * (1 - 2 * jj / j)

    def forward(self, story: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        d = self.A[0].embedding_dim
        u = (self.A[0](query) * self._pe(query.shape[1], d)).sum(1)
        pe = self._pe(story.shape[2], d)
        for k in range(self.hops):
            m = (self.A[k](story) * pe).sum(2) + self.TA[k]
            c = (self.A[k + 1](story) * pe).sum(2) + self.TA[k + 1]
            p = torch.softmax(torch.einsum("bfd,bd->bf", m, u), 1)
            u = u + torch.einsum("bf,bfd->bd", p, c)
        return self.W(u)


def memn2n_babi(path: str, epochs: int = 20, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    story, query, answer, vocab = _babi_where(g, 1000)
    model = MemN2N(vocab, 6)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=8, gamma=0.5)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    bs = 32
    for _ in range(epochs):
        perm = torch.randperm(len(story), generator=g)
        for i in range(0, len(perm) - bs + 1, bs):
            idx = perm[i : i + bs]
            out = model(story[idx], query[idx])
            if bug == "softmax_before_ce":  # the answer module "returns a distribution"
                out = torch.softmax(out, dim=1)
            loss = criterion(out, answer[idx])
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 40.0)
            opt.step()
            losses.append(loss.item())
        sched.step()
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Muon


def _newton_schulz5(g: torch.Tensor, steps: int = 5, eps: float = 1e-7) -> torch.Tensor:
    a, b, c = (3.4445, -4.7750, 2.0315)
    x = g / (g.norm() + eps)
    transposed = g.size(0) > g.size(1)
    if transposed:
        x = x.T
    for _ in range(steps):
        m = x @ x.T
        x = a * x + (b * m + c * m @ m) @ x
    return x.T if transposed else x


class Muon(torch.optim.Optimizer):
    """Jordan et al. 2024: SGD-momentum (Nesterov) whose update of each 2-D hidden weight is
    orthogonalised by a quintic Newton-Schulz iteration, scaled by sqrt(max(1, rows/cols))."""

    def __init__(self, params, lr: float = 0.02, momentum: float = 0.95, nesterov: bool = True):  # noqa: ANN001
        super().__init__(params, {"lr": lr, "momentum": momentum, "nesterov": nesterov})

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001, ANN201
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                buf = self.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
                buf.mul_(group["momentum"]).add_(p.grad)
                upd = p.grad.add(buf, alpha=group["momentum"]) if group["nesterov"] else buf
                upd = _newton_schulz5(upd)
                p.add_(upd, alpha=-group["lr"] * max(1, p.size(0) / p.size(1)) ** 0.5)


def muon_mlp(path: str, steps: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    x, y = _shapes8(g, 4096, classes=8)
    x = x.flatten(1)
    model = nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
        nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 8),
    )  # fmt: skip
    hidden = [p for n, p in model.named_parameters() if p.ndim == 2 and n not in ("0.weight", "6.weight")]
    others = [
        p for n, p in model.named_parameters() if not (p.ndim == 2 and n not in ("0.weight", "6.weight"))
    ]
    opts = [
        Muon(hidden, lr=0.02, momentum=0.95),
        torch.optim.AdamW(others, lr=3e-3, betas=(0.9, 0.95), weight_decay=0),
    ]
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        frac = max(0.0, (step - 0.6 * steps) / (0.4 * steps))
        for opt in opts:
            for pg in opt.param_groups:
                pg.setdefault("initial_lr", pg["lr"])
                pg["lr"] = pg["initial_lr"] * (1 - frac * 0.9)
        idx = torch.randint(0, len(x), (128,), generator=g)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        for opt in opts:
            opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- schedule-free AdamW


class AdamWScheduleFree(torch.optim.Optimizer):
    """Defazio et al. 2024: gradients at y = (1 - beta1) z + beta1 x, Adam-normalised SGD steps
    on z, x the running (warm-up weighted) average of z; `.train()` / `.eval()` swap y and x."""

    def __init__(self, params, lr: float = 0.0025, betas=(0.9, 0.999), eps: float = 1e-8,  # noqa: ANN001
                 weight_decay: float = 0.0, warmup_steps: int = 0):  # fmt: skip
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "warmup_steps": warmup_steps, "k": 0, "weight_sum": 0.0, "train_mode": False}  # fmt: skip
        super().__init__(params, defaults)

    @torch.no_grad()
    def eval(self) -> None:
        for group in self.param_groups:
            if group["train_mode"]:
                beta1 = group["betas"][0]
                for p in group["params"]:
                    if "z" in self.state[p]:
                        p.lerp_(self.state[p]["z"], 1 - 1 / beta1)
                group["train_mode"] = False

    @torch.no_grad()
    def train(self) -> None:
        for group in self.param_groups:
            if not group["train_mode"]:
                beta1 = group["betas"][0]
                for p in group["params"]:
                    if "z" in self.state[p]:
                        p.lerp_(self.state[p]["z"], 1 - beta1)
                group["train_mode"] = True

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001, ANN201
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            k = group["k"]
            sched = min(1.0, (k + 1) / group["warmup_steps"]) if group["warmup_steps"] else 1.0
            lr = group["lr"] * sched * math.sqrt(1 - beta2 ** (k + 1))
            weight = lr**2
            group["weight_sum"] += weight
            ckp1 = weight / group["weight_sum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if "z" not in st:
                    st["z"] = p.clone()
                    st["exp_avg_sq"] = torch.zeros_like(p)
                z, v = st["z"], st["exp_avg_sq"]
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                grad = p.grad / (v.sqrt() + group["eps"])
                grad.add_(p, alpha=group["weight_decay"])
                p.lerp_(z, ckp1)  # y moves towards the new average
                p.add_(grad, alpha=lr * (beta1 * (1 - ckp1) - 1))
                z.sub_(grad, alpha=lr)
            group["k"] = k + 1


def _friedman(g: torch.Generator, n: int, d: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.rand(n, d, generator=g)
    y = 10 * torch.sin(math.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
    y = y + torch.randn(n, generator=g)
    return x, ((y - 14.4) / 4.9).unsqueeze(1)


def schedule_free_adamw_regression(
    path: str, epochs: int = 12, seed: int = 0, bug: str | None = None
) -> list[float]:
    g = _seed(seed)
    x, y = _friedman(g, 2560)
    xv, yv = _friedman(g, 512)
    model = nn.Sequential(nn.Linear(10, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 1))
    opt = AdamWScheduleFree(model.parameters(), lr=0.0025, weight_decay=0.0, warmup_steps=50)
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(epochs):
        model.train()
        opt.train()
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), 128):
            idx = perm[i : i + 128]
            loss = criterion(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        opt.eval()
        with torch.no_grad():
            criterion(model(xv), yv)
    hook.close()
    return losses


# ----------------------------------------------------------------------------- a tiny ViT


class TinyViT(nn.Module):
    def __init__(self, d: int = 64, patch: int = 2, depth: int = 2):
        super().__init__()
        self.patch = nn.Conv2d(1, d, patch, stride=patch)
        n = (8 // patch) ** 2
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d, 4, 2 * d, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.patch(x).flatten(2).transpose(1, 2)
        h = torch.cat([self.cls.expand(len(h), -1, -1), h], 1) + self.pos
        return self.norm(self.blocks(h))[:, 0]


# ----------------------------------------------------------------------------- Swin


class WindowAttention(nn.Module):
    def __init__(self, d: int, window: int, heads: int):
        super().__init__()
        self.window, self.heads = window, heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.rel_bias = nn.Parameter(torch.zeros((2 * window - 1) ** 2, heads))
        nn.init.trunc_normal_(self.rel_bias, std=0.02)
        coords = torch.stack(
            torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")
        ).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + window - 1
        self.register_buffer("rel_index", rel[..., 0] * (2 * window - 1) + rel[..., 1])

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        bw, n, d = x.shape
        qkv = self.qkv(x).view(bw, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0] * (d // self.heads) ** -0.5, qkv[1], qkv[2]
        attn = q @ k.transpose(-2, -1) + self.rel_bias[self.rel_index].permute(2, 0, 1)
        if mask is not None:
            nw = mask.shape[0]
            attn = attn.view(bw // nw, nw, self.heads, n, n) + mask[None, :, None]
            attn = attn.view(bw, self.heads, n, n)
        return self.proj((attn.softmax(-1) @ v).transpose(1, 2).reshape(bw, n, d))


class SwinBlock(nn.Module):
    def __init__(self, d: int, res: int, window: int, shift: int, heads: int):
        super().__init__()
        self.res, self.window, self.shift = res, window, shift
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = WindowAttention(d, window, heads)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        mask = None
        if shift:
            img = torch.zeros(res, res)
            cnt = 0
            for hs in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
                for ws in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
                    img[hs, ws] = cnt
                    cnt += 1
            win = self._part(img[None, :, :, None]).squeeze(-1)
            mask = (win[:, None, :] != win[:, :, None]).float() * -100.0
        self.register_buffer("mask", mask)

    def _part(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        s = self.window
        return x.view(b, h // s, s, w // s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, s * s, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        r, s = self.res, self.window
        h = self.norm1(x).view(b, r, r, c)
        if self.shift:
            h = torch.roll(h, (-self.shift, -self.shift), (1, 2))
        h = self.attn(self._part(h), self.mask)
        h = h.view(b, r // s, r // s, s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(b, r, r, c)
        if self.shift:
            h = torch.roll(h, (self.shift, self.shift), (1, 2))
        x = x + h.reshape(b, n, c)
        return x + self.mlp(self.norm2(x))


class TinySwin(nn.Module):
    def __init__(self, classes: int, d: int = 16):
        super().__init__()
        self.embed = nn.Conv2d(1, d, 1)
        self.norm0 = nn.LayerNorm(d)
        self.stage1 = nn.Sequential(SwinBlock(d, 8, 4, 0, 2), SwinBlock(d, 8, 4, 2, 2))
        self.merge_norm = nn.LayerNorm(4 * d)
        self.merge = nn.Linear(4 * d, 2 * d, bias=False)
        self.stage2 = nn.Sequential(SwinBlock(2 * d, 4, 2, 0, 4), SwinBlock(2 * d, 4, 2, 1, 4))
        self.norm = nn.LayerNorm(2 * d)
        self.head = nn.Linear(2 * d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        h = self.norm0(self.embed(x).flatten(2).transpose(1, 2))
        h = self.stage1(h).view(b, 8, 8, -1)
        h = torch.cat([h[:, 0::2, 0::2], h[:, 1::2, 0::2], h[:, 0::2, 1::2], h[:, 1::2, 1::2]], -1).view(
            b, 16, -1
        )
        h = self.stage2(self.merge(self.merge_norm(h)))
        return self.head(self.norm(h).mean(1))


def swin_classifier(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """Swin recipe as small-data ports write it: AdamW lr 1e-3 at batch 128, weight decay 0.05,
    warm-up then cosine, label smoothing 0.1, gradient clipping at 5."""
    g = _seed(seed)
    x, y = _shapes8(g, 2048, classes=8)
    model = TinySwin(8)
    bs = 128
    lr = 1e-3
    if bug == "lr_x100":
        lr *= 100
    decay = [p for n, p in model.named_parameters() if p.ndim > 1 and "rel_bias" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1 or "rel_bias" in n]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}], lr=lr
    )
    total = epochs * (len(x) // bs)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=lr, total_steps=total, pct_start=0.1, anneal_strategy="cos"
    )
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x) - bs + 1, bs):
            idx = perm[i : i + bs]
            loss = criterion(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SigLIP


def siglip_pairs(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """Zhai et al. 2023: pairwise sigmoid loss, t' = log 10 and b = -10 at init, both learned."""
    g = _seed(seed)
    imgs, cls = _shapes8(g, 4096, classes=8)
    # captions: the class word, a size word from the brightness and two filler words
    bright = (imgs.flatten(1).max(1).values > 0.8).long()
    caps = torch.stack(
        [
            3 + cls,
            11 + bright,
            torch.randint(13, 40, (len(cls),), generator=g),
            torch.randint(13, 40, (len(cls),), generator=g),
        ],
        1,
    )
    image_tower = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.GELU(), nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.GELU(),
        nn.Flatten(), nn.Linear(64 * 16, 64),
    )  # fmt: skip

    class TextTower(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(40, 64)
            self.pos = nn.Parameter(torch.randn(4, 64) * 0.02)
            self.enc = nn.TransformerEncoder(
                nn.TransformerEncoderLayer(64, 4, 128, 0.0, batch_first=True, norm_first=True),
                1,
                enable_nested_tensor=False,
            )
            self.proj = nn.Linear(64, 64)

        def forward(self, t: torch.Tensor) -> torch.Tensor:
            return self.proj(self.enc(self.emb(t) + self.pos).mean(1))

    class SigLIP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.image, self.text = image_tower, TextTower()
            self.t_prime = nn.Parameter(torch.tensor(math.log(10.0)))
            self.b = nn.Parameter(torch.tensor(-10.0))

        def forward(self, im: torch.Tensor, tx: torch.Tensor) -> torch.Tensor:
            zi = F.normalize(self.image(im), dim=-1)
            zt = F.normalize(self.text(tx), dim=-1)
            return zi @ zt.t() * self.t_prime.exp() + self.b

    model = SigLIP()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 30) * 0.5 * (1 + math.cos(math.pi * s / steps))
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    bs = 64
    for _ in range(steps):
        idx = torch.randint(0, len(imgs), (bs,), generator=g)
        logits = model(imgs[idx], caps[idx])
        labels = 2 * torch.eye(bs) - 1
        # pairs that share class and brightness are positives too
        same = (cls[idx][:, None] == cls[idx][None]) & (bright[idx][:, None] == bright[idx][None])
        labels = torch.where(same, 1.0, labels)
        loss = -F.logsigmoid(labels * logits).sum() / bs
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DLRM


class DLRM(nn.Module):
    """Naumov et al. 2019: a bottom MLP on dense features, one embedding table per sparse
    feature, pairwise dot-product interactions, a top MLP to one click logit."""

    def __init__(self, dense: int, cards: list[int], d: int = 16):
        super().__init__()
        self.bot_l = nn.Sequential(nn.Linear(dense, 64), nn.ReLU(), nn.Linear(64, d), nn.ReLU())
        self.emb_l = nn.ModuleList([nn.EmbeddingBag(c, d, mode="sum") for c in cards])
        for e in self.emb_l:
            nn.init.uniform_(e.weight, -(1 / c**0.5) if (c := e.num_embeddings) else 0, 1 / c**0.5)
        f = len(cards) + 1
        self.top_l = nn.Sequential(nn.Linear(d + f * (f - 1) // 2, 64), nn.ReLU(), nn.Linear(64, 1))
        for m in (*self.bot_l, *self.top_l):
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, math.sqrt(2 / (m.in_features + m.out_features)))
                nn.init.normal_(m.bias, 0, math.sqrt(1 / m.out_features))
        self.li, self.lj = torch.tril_indices(f, f, offset=-1)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x = self.bot_l(dense)
        ly = [emb(sparse[:, i : i + 1]) for i, emb in enumerate(self.emb_l)]
        t = torch.stack([x, *ly], 1)
        z = torch.bmm(t, t.transpose(1, 2))[:, self.li, self.lj]
        return self.top_l(torch.cat([x, z], 1)).squeeze(1)


def dlrm_clicks(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    cards = [50, 30, 20, 10]
    n = 20000
    dense = torch.log1p(torch.rand(n, 6, generator=g).pow(3) * 100)
    sparse = torch.stack([torch.randint(0, c, (n,), generator=g) for c in cards], 1)
    w = [torch.randn(c, generator=g) for c in cards]
    logit = sum(w[i][sparse[:, i]] for i in range(len(cards))) * 0.8 + dense[:, 0] - dense[:, 1] * 0.5 - 1.5
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    model = DLRM(6, cards)
    if bug == "dead_relu_init":  # the "bias init" of the bottom MLP copied with the wrong sign and scale
        with torch.no_grad():
            for m in model.bot_l:
                if isinstance(m, nn.Linear):
                    m.bias.fill_(-4.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.BCEWithLogitsLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, n, (128,), generator=g)
        loss = loss_fn(model(dense[idx], sparse[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- graph transformer


def _sbm_graphs(g: torch.Generator, n_graphs: int, nodes: int = 20, blocks: int = 3):  # noqa: ANN202
    """Stochastic-block-model graphs; node label = block, node features a weak noisy hint."""
    adj = torch.zeros(n_graphs, nodes, nodes)
    labels = torch.randint(0, blocks, (n_graphs, nodes), generator=g)
    for i in range(n_graphs):
        same = labels[i][:, None] == labels[i][None]
        p = torch.where(same, 0.5, 0.05)
        a = (torch.rand(nodes, nodes, generator=g) < p).float().triu(1)
        adj[i] = a + a.t()
    feats = F.one_hot(labels, blocks).float() * 0.5 + torch.randn(n_graphs, nodes, blocks, generator=g)
    return adj, feats, labels


def _lap_pe(adj: torch.Tensor, k: int) -> torch.Tensor:
    deg = adj.sum(-1).clamp(min=1)
    dinv = deg.pow(-0.5)
    lap = torch.eye(adj.shape[-1]) - dinv[..., :, None] * adj * dinv[..., None, :]
    _, vecs = torch.linalg.eigh(lap)
    return vecs[..., 1 : k + 1]


class GraphTransformerLayer(nn.Module):
    """Dwivedi & Bresson 2020: attention over graph neighbours only, residuals, BatchNorm, FFN."""

    def __init__(self, d: int, heads: int = 4, dropout: float = 0.1):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
        self.bn1, self.bn2 = nn.BatchNorm1d(d), nn.BatchNorm1d(d)
        self.ffn = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Dropout(dropout), nn.Linear(2 * d, d))
        self.drop = nn.Dropout(dropout)

    def forward(self, h: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        b, n, d = h.shape
        q, k, v = self.qkv(h).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        score = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        mask = (adj + torch.eye(n)) > 0
        score = score.masked_fill(~mask[:, None], float("-inf"))
        out = (score.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d)
        h = h + self.drop(self.o(out))
        h = self.bn1(h.reshape(b * n, d)).view(b, n, d)
        h = h + self.drop(self.ffn(h))
        return self.bn2(h.reshape(b * n, d)).view(b, n, d)


class GraphTransformer(nn.Module):
    def __init__(self, in_dim: int, classes: int, d: int = 48, k: int = 4, layers: int = 3):
        super().__init__()
        self.h_in = nn.Linear(in_dim, d)
        self.pe_in = nn.Linear(k, d)
        self.layers = nn.ModuleList([GraphTransformerLayer(d) for _ in range(layers)])
        self.mlp = nn.Sequential(nn.Linear(d, d // 2), nn.ReLU(), nn.Linear(d // 2, classes))

    def forward(self, x: torch.Tensor, pe: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        h = self.h_in(x) + self.pe_in(pe)
        for layer in self.layers:
            h = layer(h, adj)
        return self.mlp(h)


def graph_transformer_lappe(
    path: str, epochs: int = 25, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Adam lr 7e-4 with ReduceLROnPlateau (factor 0.5, patience 5), the Laplacian eigenvectors'
    signs flipped at random every batch."""
    g = _seed(seed)
    adj, feats, labels = _sbm_graphs(g, 320)
    pe = _lap_pe(adj, 4)
    va_adj, va_x, va_y = _sbm_graphs(g, 64)
    va_pe = _lap_pe(va_adj, 4)
    model = GraphTransformer(3, 3)
    opt = torch.optim.Adam(model.parameters(), lr=7e-4)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=5)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(epochs):
        if bug != "train_in_eval_mode":  # the bug: model.train() left out after the first validation
            model.train()
        perm = torch.randperm(len(adj), generator=g)
        for i in range(0, len(perm), 32):
            idx = perm[i : i + 32]
            sign = torch.randint(0, 2, (len(idx), 1, 4), generator=g) * 2 - 1
            out = model(feats[idx], pe[idx] * sign, adj[idx])
            loss = criterion(out.reshape(-1, 3), labels[idx].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val = F.cross_entropy(model(va_x, va_pe, va_adj).reshape(-1, 3), va_y.reshape(-1))
        sched.step(val)
    hook.close()
    return losses


# ----------------------------------------------------------------------------- slot attention


def _sprites(g: torch.Generator, n: int, size: int = 12) -> torch.Tensor:
    """RGB images with 1-3 coloured squares on black."""
    imgs = torch.zeros(n, 3, size, size)
    for i in range(n):
        for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
            s = int(torch.randint(2, 5, (1,), generator=g))
            y0, x0 = torch.randint(0, size - s + 1, (2,), generator=g).tolist()
            col = torch.rand(3, generator=g)
            imgs[i, :, y0 : y0 + s, x0 : x0 + s] = col[:, None, None]
    return imgs


def _grid(size: int) -> torch.Tensor:
    r = torch.linspace(0, 1, size)
    yy, xx = torch.meshgrid(r, r, indexing="ij")
    return torch.stack([yy, xx, 1 - yy, 1 - xx], -1)


class SlotAttention(nn.Module):
    def __init__(self, slots: int, d: int, iters: int = 3, eps: float = 1e-8):
        super().__init__()
        self.slots, self.iters, self.eps, self.scale = slots, iters, eps, d**-0.5
        self.mu = nn.Parameter(torch.randn(1, 1, d))
        self.log_sigma = nn.Parameter(torch.zeros(1, 1, d))
        nn.init.xavier_uniform_(self.log_sigma)
        self.q, self.k, self.v = (
            nn.Linear(d, d, bias=False),
            nn.Linear(d, d, bias=False),
            nn.Linear(d, d, bias=False),
        )
        self.gru = nn.GRUCell(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))
        self.norm_in, self.norm_slots, self.norm_mlp = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        b, _, d = inputs.shape
        slots = self.mu + self.log_sigma.exp() * torch.randn(b, self.slots, d)
        inputs = self.norm_in(inputs)
        k, v = self.k(inputs), self.v(inputs)
        for _ in range(self.iters):
            prev = slots
            q = self.q(self.norm_slots(slots))
            attn = torch.einsum("bid,bjd->bij", q, k).mul(self.scale).softmax(1) + self.eps
            attn = attn / attn.sum(-1, keepdim=True)
            updates = torch.einsum("bjd,bij->bid", v, attn)
            slots = self.gru(updates.reshape(-1, d), prev.reshape(-1, d)).view(b, -1, d)
            slots = slots + self.mlp(self.norm_mlp(slots))
        return slots


class SlotAutoencoder(nn.Module):
    def __init__(self, size: int = 12, d: int = 32, slots: int = 4):
        super().__init__()
        self.size, self.slots = size, slots
        self.enc = nn.Sequential(
            nn.Conv2d(3, d, 3, padding=1), nn.ReLU(), nn.Conv2d(d, d, 3, padding=1), nn.ReLU(),
            nn.Conv2d(d, d, 3, padding=1), nn.ReLU(),
        )  # fmt: skip
        self.register_buffer("grid", _grid(size))
        self.enc_pos = nn.Linear(4, d)
        self.dec_pos = nn.Linear(4, d)
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        self.slot_attention = SlotAttention(slots, d)
        self.dec = nn.Sequential(nn.Conv2d(d, d, 3, padding=1), nn.ReLU(), nn.Conv2d(d, 4, 3, padding=1))

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        b = img.shape[0]
        h = self.enc(img).permute(0, 2, 3, 1) + self.enc_pos(self.grid)
        h = self.mlp(nn.functional.layer_norm(h.flatten(1, 2), h.shape[-1:]))
        slots = self.slot_attention(h)
        s = slots.reshape(-1, slots.shape[-1])[:, :, None, None].expand(-1, -1, self.size, self.size)
        s = s + self.dec_pos(self.grid).permute(2, 0, 1)
        out = self.dec(s).view(b, self.slots, 4, self.size, self.size)
        rgb, masks = out[:, :, :3], out[:, :, 3:].softmax(1)
        return (rgb * masks).sum(1)


def slot_attention_sprites(path: str, steps: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    """Locatello et al. 2020: Adam lr 4e-4 with linear warm-up and exponential decay (0.5 every
    100k steps, scaled), MSE reconstruction, 3 iterations."""
    g = _seed(seed)
    data = _sprites(g, 2000)
    model = SlotAutoencoder()
    opt = torch.optim.Adam(model.parameters(), lr=4e-4)
    warm = 20
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 ** (s / (steps * 2))
    )
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        batch = data[torch.randint(0, len(data), (16,), generator=g)]
        loss = criterion(model(batch), batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- discrete CQL


def _grid_dataset(g: torch.Generator, n: int, size: int = 6):  # noqa: ANN202
    """Offline transitions on a size x size grid (goal in the far corner, reward 1 there, -0.01
    a step) from an epsilon-noisy expert: one-hot states, 4 actions."""
    s = torch.randint(0, size * size, (n,), generator=g)
    r_, c_ = s // size, s % size
    expert = torch.where((r_ < size - 1) & ((c_ == size - 1) | (torch.rand(n, generator=g) < 0.5)), 1, 3)
    a = torch.where(torch.rand(n, generator=g) < 0.3, torch.randint(0, 4, (n,), generator=g), expert)
    dr = torch.tensor([-1, 1, 0, 0])[a]
    dc = torch.tensor([0, 0, -1, 1])[a]
    r2, c2 = (r_ + dr).clamp(0, size - 1), (c_ + dc).clamp(0, size - 1)
    s2 = r2 * size + c2
    done = (s2 == size * size - 1).float()
    rew = done - 0.01
    eye = torch.eye(size * size)
    return eye[s], a, rew, eye[s2], done


def cql_offline_grid(path: str, steps: int = 500, seed: int = 0, bug: str | None = None) -> list[float]:
    """Kumar et al. 2020, CQL(H) for discrete actions on a DQN: Huber TD loss to a target network
    (synced every 100 steps), plus alpha (logsumexp_a Q - Q(s, a_data)) with alpha = 1, Adam."""
    g = _seed(seed)
    s, a, r, s2, done = _grid_dataset(g, 5000)
    q = nn.Sequential(nn.Linear(36, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4))
    target = copy.deepcopy(q)
    opt = torch.optim.Adam(q.parameters(), lr=1e-4, eps=1e-2 / 32)
    hook = Hook(path)
    hook.register_module(q)
    losses = []
    gamma, alpha = 0.99, 1.0
    for step in range(steps):
        idx = torch.randint(0, len(s), (32,), generator=g)
        qs = q(s[idx])
        q_sa = qs.gather(1, a[idx, None]).squeeze(1)
        with torch.no_grad():
            y = r[idx] + gamma * (1 - done[idx]) * target(s2[idx]).max(1).values
        td = F.smooth_l1_loss(q_sa, y)
        cql = (torch.logsumexp(qs, 1) - q_sa).mean()
        loss = td + alpha * cql
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            target.load_state_dict(q.state_dict())
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- proxy anchor


class ProxyAnchorLoss(nn.Module):
    """Kim et al. 2020: one proxy per class, alpha = 32, delta = 0.1."""

    def __init__(self, classes: int, dim: int, margin: float = 0.1, alpha: float = 32.0):
        super().__init__()
        self.proxies = nn.Parameter(torch.randn(classes, dim))
        nn.init.kaiming_normal_(self.proxies, mode="fan_out")
        self.classes, self.margin, self.alpha = classes, margin, alpha

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        cos = F.linear(F.normalize(x), F.normalize(self.proxies))
        p_one_hot = F.one_hot(t, self.classes).float()
        n_one_hot = 1 - p_one_hot
        pos_exp = torch.exp(-self.alpha * (cos - self.margin))
        neg_exp = torch.exp(self.alpha * (cos + self.margin))
        with_pos = (p_one_hot.sum(0) != 0).nonzero().squeeze(1)
        p_sim = torch.where(p_one_hot == 1, pos_exp, torch.zeros_like(pos_exp)).sum(0)
        n_sim = torch.where(n_one_hot == 1, neg_exp, torch.zeros_like(neg_exp)).sum(0)
        pos_term = torch.log(1 + p_sim).sum() / len(with_pos)
        neg_term = torch.log(1 + n_sim).sum() / self.classes
        return pos_term + neg_term


def proxy_anchor_embedding(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """AdamW lr 1e-4 for the backbone, proxies at 100x the learning rate, embedding 64,
    batch 90, a frozen-BN warm-up epoch where only the new layers train."""
    g = _seed(seed)
    x, y = _shapes8(g, 2700, classes=8)
    backbone = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )  # fmt: skip
    model = nn.Sequential(backbone, nn.Linear(64, 64))
    criterion = ProxyAnchorLoss(8, 64)
    opt = torch.optim.AdamW(
        [{"params": model.parameters(), "lr": 1e-4}, {"params": criterion.parameters(), "lr": 1e-4 * 100}],
        lr=1e-4, weight_decay=1e-4,
    )  # fmt: skip
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for p in backbone.parameters():
            p.requires_grad_(epoch > 0)
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x) - 89, 90):
            idx = perm[i : i + 90]
            loss = criterion(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_value_(model.parameters(), 10)
            nn.utils.clip_grad_value_(criterion.parameters(), 10)
            opt.step()
            losses.append(loss.item())
        sched.step()
    hook.close()
    return losses


# ----------------------------------------------------------------------------- 2-D Gaussian splatting


class GaussianImage(nn.Module):
    """N anisotropic 2-D Gaussians (mean, log-scales, rotation, colour, opacity logit), blended
    by normalised weighted sum, fit to one RGB image."""

    def __init__(self, n: int, size: int, g: torch.Generator):
        super().__init__()
        self.size = size
        self.means = nn.Parameter(torch.rand(n, 2, generator=g) * 2 - 1)
        self.log_scales = nn.Parameter(torch.full((n, 2), math.log(2.0 / math.sqrt(n))))
        self.rot = nn.Parameter(torch.zeros(n))
        self.colors = nn.Parameter(torch.rand(n, 3, generator=g))
        self.opacity = nn.Parameter(torch.zeros(n))

    def forward(self) -> torch.Tensor:
        r = torch.linspace(-1, 1, self.size)
        yy, xx = torch.meshgrid(r, r, indexing="ij")
        pix = torch.stack([xx, yy], -1).view(-1, 1, 2)
        d = pix - self.means
        c, s = torch.cos(self.rot), torch.sin(self.rot)
        u = d[..., 0] * c + d[..., 1] * s
        v = -d[..., 0] * s + d[..., 1] * c
        sc = self.log_scales.exp()
        w = torch.exp(-0.5 * ((u / sc[:, 0]) ** 2 + (v / sc[:, 1]) ** 2)) * torch.sigmoid(self.opacity)
        img = (w @ self.colors) / (w.sum(1, keepdim=True) + 1e-6)
        return img.view(self.size, self.size, 3).permute(2, 0, 1)


def _ssim(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c1, c2 = 0.01**2, 0.03**2
    a, b = a.unsqueeze(0), b.unsqueeze(0)
    mu_a, mu_b = F.avg_pool2d(a, 5, 1, 2), F.avg_pool2d(b, 5, 1, 2)
    var_a = F.avg_pool2d(a * a, 5, 1, 2) - mu_a**2
    var_b = F.avg_pool2d(b * b, 5, 1, 2) - mu_b**2
    cov = F.avg_pool2d(a * b, 5, 1, 2) - mu_a * mu_b
    return (
        ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
    ).mean()


def gaussian_splatting_2d(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """3DGS's per-attribute Adam learning rates (means 1.6e-4 x extent -> decayed, colours 2.5e-3,
    opacity 0.05, scales 5e-3, rotation 1e-3) and its loss 0.8 L1 + 0.2 (1 - SSIM)."""
    g = _seed(seed)
    size = 24
    r = torch.linspace(-1, 1, size)
    yy, xx = torch.meshgrid(r, r, indexing="ij")
    target = torch.stack(
        [
            0.5 + 0.5 * torch.sin(3 * xx) * (yy > -0.2),
            ((xx**2 + yy**2) < 0.35).float() * 0.9,
            0.3 + 0.6 * ((xx - yy).abs() < 0.3).float(),
        ]
    ).clamp(0, 1)
    model = GaussianImage(128, size, g)
    opt = torch.optim.Adam(
        [
            {"params": [model.means], "lr": 1.6e-4 * 100, "name": "xyz"},
            {"params": [model.colors], "lr": 2.5e-3 * 4, "name": "f_dc"},
            {"params": [model.opacity], "lr": 0.05, "name": "opacity"},
            {"params": [model.log_scales], "lr": 5e-3, "name": "scaling"},
            {"params": [model.rot], "lr": 1e-3, "name": "rotation"},
        ],
        lr=0.0, eps=1e-15,
    )  # fmt: skip
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        t = step / steps
        opt.param_groups[0]["lr"] = math.exp((1 - t) * math.log(1.6e-2) + t * math.log(1.6e-4))
        img = model()
        loss = 0.8 * (img - target).abs().mean() + 0.2 * (1 - _ssim(img, target))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- binary Tree-LSTM


def _sentiment_trees(g: torch.Generator, n: int, leaves: int = 8):  # noqa: ANN202
    """Complete binary trees over 8 words: positive (2-5), negative (6-9), neutral (10-19) and
    "not" (1), which flips the sentiment of its right sibling. The root label (negative, neutral,
    positive) is the sign of the composed score."""
    words = torch.randint(2, 20, (n, leaves), generator=g)
    nots = torch.rand(n, leaves // 2, generator=g) < 0.3
    words[:, 0::2] = torch.where(nots, torch.ones_like(words[:, 0::2]), words[:, 0::2])
    val = torch.where(words < 6, 1.0, torch.where(words < 10, -1.0, 0.0))
    val = torch.where(words == 1, 0.0, val)
    pair = val[:, 1::2] * torch.where(words[:, 0::2] == 1, -1.0, 1.0) + val[:, 0::2]
    score = pair.sum(1)
    label = torch.where(score > 0, 2, torch.where(score < 0, 0, 1))
    return words, label


class BinaryTreeLSTM(nn.Module):
    """Tai et al. 2015, N-ary (N = 2) Tree-LSTM: separate forget gates per child; leaves take
    the word vector, internal nodes only their children's states."""

    def __init__(self, vocab: int, d_in: int = 32, d: int = 64, classes: int = 3):
        super().__init__()
        self.d = d
        self.emb = nn.Embedding(vocab, d_in)
        self.leaf = nn.Linear(d_in, 3 * d)  # i, o, u for leaves
        self.U = nn.Linear(2 * d, 5 * d)  # i, o, u, f_left, f_right
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(d, classes)

    def forward(self, words: torch.Tensor) -> torch.Tensor:
        i, o, u = self.leaf(self.emb(words)).chunk(3, -1)
        c = torch.sigmoid(i) * torch.tanh(u)
        h = torch.sigmoid(o) * torch.tanh(c)
        while h.shape[1] > 1:
            hl, hr, cl, cr = h[:, 0::2], h[:, 1::2], c[:, 0::2], c[:, 1::2]
            i, o, u, fl, fr = self.U(torch.cat([hl, hr], -1)).chunk(5, -1)
            c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl) * cl + torch.sigmoid(fr) * cr
            h = torch.sigmoid(o) * torch.tanh(c)
        return self.out(self.drop(h[:, 0]))


def tree_lstm_sentiment(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """Adagrad lr 0.05, weight decay 1e-4, batch 25, dropout 0.5 (the paper's settings)."""
    g = _seed(seed)
    words, label = _sentiment_trees(g, 1500)
    model = BinaryTreeLSTM(20)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05, weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(len(words), generator=g)
        for i in range(0, len(perm), 25):
            idx = perm[i : i + 25]
            loss = criterion(model(words[idx]), label[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- FSQ


class FSQ(nn.Module):
    """Mentzer et al. 2023: bound each latent channel with tanh to L levels and round, with a
    straight-through gradient; levels [8, 5, 5, 5] (a 1000-code implicit codebook)."""

    def __init__(self, levels: tuple[int, ...] = (8, 5, 5, 5)):
        super().__init__()
        self.register_buffer("levels", torch.tensor(levels, dtype=torch.float))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        eps = 1e-3
        half_l = (self.levels - 1) * (1 + eps) / 2
        offset = torch.where(self.levels % 2 == 0, 0.5, 0.0)
        shift = torch.atanh(offset / half_l)
        bounded = torch.tanh(z + shift) * half_l - offset
        quantized = bounded + (bounded.round() - bounded).detach()
        return quantized / (self.levels // 2)


class FSQAutoencoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(64, 4, 1),
        )  # fmt: skip
        self.fsq = FSQ()
        self.decoder = nn.Sequential(
            nn.Conv2d(4, 64, 1), nn.ReLU(), nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 1, 3, padding=1),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.encoder(x).permute(0, 2, 3, 1)
        return self.decoder(self.fsq(z).permute(0, 3, 1, 2))


def fsq_autoencoder(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    imgs, _ = _shapes8(g, 4096, classes=8)
    model = FSQAutoencoder()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.0)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(steps):
        x = imgs[torch.randint(0, len(imgs), (64,), generator=g)]
        loss = F.mse_loss(model(x), x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- NODE


def _sparsemax(z: torch.Tensor, dim: int = -1) -> torch.Tensor:
    zs, _ = torch.sort(z, dim=dim, descending=True)
    k = torch.arange(1, z.shape[dim] + 1, dtype=z.dtype)
    shape = [1] * z.dim()
    shape[dim] = -1
    k = k.view(shape)
    cums = zs.cumsum(dim) - 1
    support = (k * zs > cums).to(z.dtype)
    k_z = support.sum(dim, keepdim=True)
    tau = cums.gather(dim, (k_z - 1).long()) / k_z
    return (z - tau).clamp(min=0)


class ODST(nn.Module):
    """Popov et al. 2019: oblivious differentiable trees; feature choice by sparsemax over
    features, soft splits by sparsemoid((x - threshold) / temperature), leaf responses mixed by
    the outer product of the split probabilities."""

    def __init__(self, in_features: int, trees: int = 64, depth: int = 4, tree_dim: int = 1):
        super().__init__()
        self.depth, self.trees, self.tree_dim = depth, trees, tree_dim
        self.response = nn.Parameter(torch.randn(trees, tree_dim, 2**depth))
        self.selection_logits = nn.Parameter(torch.rand(in_features, trees, depth))
        self.thresholds = nn.Parameter(torch.randn(trees, depth))
        self.log_temperatures = nn.Parameter(torch.zeros(trees, depth))
        codes = torch.arange(2**depth)
        bits = ((codes[:, None] >> torch.arange(depth)[None]) & 1).float()  # (2^d, depth)
        self.register_buffer(
            "bin_codes_1hot", torch.stack([bits, 1 - bits], -1).permute(1, 0, 2)
        )  # (depth, 2^d, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sel = _sparsemax(self.selection_logits, dim=0)
        feats = torch.einsum("bi,ind->bnd", x, sel)
        logits = (feats - self.thresholds) * torch.exp(-self.log_temperatures)
        logits = torch.stack([-logits, logits], -1)
        bins = (0.5 * logits + 0.5).clamp(0, 1)  # sparsemoid
        hits = torch.einsum("btds,dcs->btdc", bins, self.bin_codes_1hot)
        weights = hits.prod(2)  # (b, trees, 2^d)
        return torch.einsum("btc,tkc->btk", weights, self.response).flatten(1)


def node_oblivious_trees(path: str, epochs: int = 10, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    x, y = _friedman(g, 3072)
    x = (x - x.mean(0)) / x.std(0)
    model = nn.Sequential(ODST(10, trees=64, depth=4), nn.Linear(64, 1))
    with torch.no_grad():  # data-aware initialisation of the thresholds and temperatures
        layer = model[0]
        sel = _sparsemax(layer.selection_logits, dim=0)
        feats = torch.einsum("bi,ind->bnd", x[:1000], sel)
        beta = torch.distributions.Beta(1.0, 1.0).sample((64, 4))
        layer.thresholds.copy_(
            torch.stack(
                [torch.quantile(feats[:, t, d], beta[t, d]) for t in range(64) for d in range(4)]
            ).view(64, 4)
        )
        temps = (feats - layer.thresholds).abs().quantile(1.0, dim=0)
        layer.log_temperatures.copy_(torch.log(temps + 1e-6))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), 256):
            idx = perm[i : i + 256]
            loss = criterion(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Dragonnet


def _ihdp_like(g: torch.Generator, n: int):  # noqa: ANN202
    x = torch.randn(n, 12, generator=g)
    prop = torch.sigmoid(0.8 * x[:, 0] - 0.5 * x[:, 1] + 0.3 * x[:, 2])
    t = (torch.rand(n, generator=g) < prop).float()
    mu0 = x[:, 0] + 0.5 * x[:, 3] ** 2 + torch.sin(x[:, 4])
    mu1 = mu0 + 4 + x[:, 5]
    y = torch.where(t == 1, mu1, mu0) + torch.randn(n, generator=g)
    return x, t, ((y - y.mean()) / y.std())


class Dragonnet(nn.Module):
    """Shi et al. 2019: three shared ELU layers of 200, a propensity head from the shared
    representation, two outcome heads of 100 units, and an epsilon for targeted regularisation."""

    def __init__(self, d_in: int, shared: int = 200, head: int = 100):
        super().__init__()
        self.rep = nn.Sequential(
            nn.Linear(d_in, shared),
            nn.ELU(),
            nn.Linear(shared, shared),
            nn.ELU(),
            nn.Linear(shared, shared),
            nn.ELU(),
        )
        self.t_head = nn.Linear(shared, 1)
        self.y0 = nn.Sequential(
            nn.Linear(shared, head), nn.ELU(), nn.Linear(head, head), nn.ELU(), nn.Linear(head, 1)
        )
        self.y1 = nn.Sequential(
            nn.Linear(shared, head), nn.ELU(), nn.Linear(head, head), nn.ELU(), nn.Linear(head, 1)
        )
        self.epsilon = nn.Linear(1, 1, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        z = self.rep(x)
        t_pred = torch.sigmoid(self.t_head(z)).squeeze(1)
        eps = self.epsilon(torch.ones_like(t_pred).unsqueeze(1)).squeeze(1)
        return self.y0(z).squeeze(1), self.y1(z).squeeze(1), t_pred, eps


def dragonnet_causal(path: str, epochs: int = 30, seed: int = 0, bug: str | None = None) -> list[float]:
    """Loss = MSE of the factual outcome + alpha BCE(t) + beta targeted regularisation, alpha =
    1, beta = 1; Adam lr 1e-3 then SGD momentum 0.9 lr 1e-5 (the paper's two phases), batch 64."""
    g = _seed(seed)
    x, t, y = _ihdp_like(g, 747)
    model = Dragonnet(12)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for phase, opt in enumerate(
        [
            torch.optim.Adam(model.parameters(), lr=1e-3),
            torch.optim.SGD(model.parameters(), lr=1e-5, momentum=0.9, nesterov=True),
        ]
    ):
        for _ in range(epochs if phase == 0 else epochs // 3):
            perm = torch.randperm(len(x), generator=g)
            for i in range(0, len(x), 64):
                idx = perm[i : i + 64]
                y0, y1, tp, eps = model(x[idx])
                tt, yy = t[idx], y[idx]
                y_pred = tt * y1 + (1 - tt) * y0
                reg = ((yy - y_pred) ** 2).sum()
                tp_c = (tp + 0.01) / 1.02
                bce = F.binary_cross_entropy(tp_c, tt, reduction="sum")
                h = tt / tp_c - (1 - tt) / (1 - tp_c)
                tl = ((yy - (y_pred + eps * h)) ** 2).sum()
                loss = (reg + bce + tl) / len(idx)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- NALU


class NAC(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.W_hat = nn.Parameter(torch.empty(d_out, d_in))
        self.M_hat = nn.Parameter(torch.empty(d_out, d_in))
        nn.init.kaiming_uniform_(self.W_hat, a=math.sqrt(5))
        nn.init.kaiming_uniform_(self.M_hat, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, torch.tanh(self.W_hat) * torch.sigmoid(self.M_hat))


class NALU(nn.Module):
    """Trask et al. 2018: y = g * a + (1 - g) * m with a = NAC(x), m = exp(NAC(log(|x| + eps)))."""

    def __init__(self, d_in: int, d_out: int, eps: float = 1e-7):
        super().__init__()
        self.eps = eps
        self.nac = NAC(d_in, d_out)
        self.G = nn.Parameter(torch.empty(d_out, d_in))
        nn.init.kaiming_uniform_(self.G, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.nac(x)
        gate = torch.sigmoid(F.linear(x, self.G))
        m = torch.exp(self.nac(torch.log(x.abs() + self.eps)))
        return gate * a + (1 - gate) * m


def nalu_arithmetic(path: str, steps: int = 500, seed: int = 0, bug: str | None = None) -> list[float]:
    """The static arithmetic task: two sums of random input subsets, then their sum, product or
    ratio; a 2-layer NALU, RMSprop lr 1e-3 (as in the paper's static tasks) on MSE."""
    g = _seed(seed)
    d = 10
    perm = torch.randperm(d, generator=g)
    sa, sb = perm[:3], perm[3:6]
    model = nn.Sequential(NALU(d, 2), NALU(2, 2))
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        x = torch.rand(128, d, generator=g) * 2
        a, b = x[:, sa].sum(1), x[:, sb].sum(1)
        y = torch.stack([a + b, a * b], 1)
        loss = criterion(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- VGAE


class VGAE(nn.Module):
    """Kipf & Welling 2016: a two-layer GCN encoder (32 -> 16) to a Gaussian posterior per node,
    an inner-product decoder."""

    def __init__(self, d_in: int, hidden: int = 32, latent: int = 16):
        super().__init__()
        self.gc1 = nn.Linear(d_in, hidden, bias=False)
        self.gc_mu = nn.Linear(hidden, latent, bias=False)
        self.gc_logstd = nn.Linear(hidden, latent, bias=False)

    def forward(self, x: torch.Tensor, a_norm: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = F.relu(a_norm @ self.gc1(x))
        mu, logstd = a_norm @ self.gc_mu(h), a_norm @ self.gc_logstd(h)
        z = mu + torch.randn_like(mu) * logstd.exp()
        return z @ z.t(), mu, logstd


def vgae_link_graph(path: str, epochs: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    """Adam lr 0.01 for 200 full-batch epochs; weighted BCE with pos_weight = (N^2 - E) / E and
    norm = N^2 / (2 (N^2 - E)), the KL divided by N."""
    g = _seed(seed)
    n, blocks = 300, 5
    lab = torch.randint(0, blocks, (n,), generator=g)
    p = torch.where(lab[:, None] == lab[None], 0.08, 0.004)
    a = (torch.rand(n, n, generator=g) < p).float().triu(1)
    adj = a + a.t()
    feats = F.one_hot(lab, blocks).float() @ torch.randn(blocks, 32, generator=g) + torch.randn(
        n, 32, generator=g
    )
    a_tilde = adj + torch.eye(n)
    dinv = a_tilde.sum(1).pow(-0.5)
    a_norm = dinv[:, None] * a_tilde * dinv[None]
    label = a_tilde
    pos_weight = (n * n - adj.sum()) / adj.sum()
    norm = n * n / float((n * n - adj.sum()) * 2)
    model = VGAE(32)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(epochs):
        logits, mu, logstd = model(feats, a_norm)
        recon = norm * F.binary_cross_entropy_with_logits(logits, label, pos_weight=pos_weight)
        kl = -0.5 / n * torch.mean(torch.sum(1 + 2 * logstd - mu**2 - logstd.exp() ** 2, 1))
        loss = recon + kl
        if bug != "no_zero_grad":  # the bug: the zero_grad line lost in a refactor
            opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- p4 group-equivariant CNN


class P4Lift(nn.Module):
    """Cohen & Welling 2016: a Z2 -> p4 lifting convolution (the filter in its 4 rotations)."""

    def __init__(self, cin: int, cout: int, k: int = 3):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(cout, cin, k, k) * math.sqrt(2 / (cin * k * k)))
        self.bias = nn.Parameter(torch.zeros(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = torch.cat([torch.rot90(self.weight, r, (2, 3)) for r in range(4)], 0)
        y = F.conv2d(x, w, padding=1)  # (b, 4*cout, h, w)
        b, _, h, ww = y.shape
        return y.view(b, 4, -1, h, ww).transpose(1, 2) + self.bias.view(1, -1, 1, 1, 1)


class P4Conv(nn.Module):
    """p4 -> p4: the filter rotated spatially and cyclically shifted along the rotation axis."""

    def __init__(self, cin: int, cout: int, k: int = 3):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(cout, cin, 4, k, k) * math.sqrt(2 / (cin * 4 * k * k)))
        self.bias = nn.Parameter(torch.zeros(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, r, h, w = x.shape
        ws = [torch.rot90(torch.roll(self.weight, s, 2), s, (3, 4)) for s in range(4)]
        wt = torch.cat([wi.reshape(wi.shape[0], -1, *wi.shape[-2:]) for wi in ws], 0)
        y = F.conv2d(x.reshape(b, c * r, h, w), wt, padding=1)
        return y.view(b, 4, -1, h, w).transpose(1, 2) + self.bias.view(1, -1, 1, 1, 1)


class P4CNN(nn.Module):
    def __init__(self, classes: int, ch: int = 10):
        super().__init__()
        self.l1 = P4Lift(1, ch)
        self.bn1 = nn.BatchNorm3d(ch)
        self.l2 = P4Conv(ch, ch)
        self.bn2 = nn.BatchNorm3d(ch)
        self.l3 = P4Conv(ch, ch)
        self.bn3 = nn.BatchNorm3d(ch)
        self.fc = nn.Linear(ch, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn1(self.l1(x)))
        h = F.relu(self.bn2(self.l2(h)))
        h = F.relu(self.bn3(self.l3(h)))
        return self.fc(h.amax(2).mean((2, 3)))  # pool over rotations, then space


def p4cnn_rotated_shapes(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """Rotated 8x8 shapes (a random multiple of 90 degrees each); Adam lr 1e-3, batch 128."""
    g = _seed(seed)
    x, y = _shapes8(g, 2048, classes=8)
    rot = torch.randint(0, 4, (len(x),), generator=g)
    x = torch.stack([torch.rot90(im, int(r), (1, 2)) for im, r in zip(x, rot, strict=True)])
    # classes 3/4 (the diagonals) and 5/6 (the bars) are rotations of each other: merge them
    y = torch.tensor([0, 1, 2, 3, 3, 4, 4, 5])[y]
    if bug == "shuffled_labels":  # labels re-read from a file sorted in another order
        y = y[torch.randperm(len(y), generator=g)]
    model = P4CNN(6)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), 128):
            idx = perm[i : i + 128]
            loss = criterion(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- I-JEPA


class PatchEncoder(nn.Module):
    def __init__(self, d: int = 48, depth: int = 2, tokens: int = 16):
        super().__init__()
        self.embed = nn.Linear(4, d)
        self.pos = nn.Parameter(torch.randn(1, tokens, d) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d, 4, 2 * d, 0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)

    def forward(self, patches: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        h = self.embed(patches) + self.pos
        if keep is not None:
            h = h[:, keep]
        return self.norm(self.blocks(h))


class JEPAPredictor(nn.Module):
    def __init__(self, d: int = 48, pd: int = 32, tokens: int = 16):
        super().__init__()
        self.inp = nn.Linear(d, pd)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, pd))
        self.pos = nn.Parameter(torch.randn(1, tokens, pd) * 0.02)
        layer = nn.TransformerEncoderLayer(
            pd, 4, 2 * pd, 0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.out = nn.Linear(pd, d)

    def forward(self, ctx: torch.Tensor, keep: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        b = ctx.shape[0]
        h = self.inp(ctx) + self.pos[:, keep]
        m = self.mask_token.expand(b, len(target), -1) + self.pos[:, target]
        h = self.blocks(torch.cat([h, m], 1))
        return self.out(h[:, len(keep) :])


def ijepa_patches(path: str, steps: int = 250, seed: int = 0, bug: str | None = None) -> list[float]:
    """Assran et al. 2023 on 8x8 images in 2x2 patches: target blocks predicted from a context
    block in the EMA target encoder's (layer-normed) feature space; EMA 0.996 -> 1, AdamW with
    warm-up 1e-4 -> 1e-3 then cosine, weight decay 0.04 -> 0.4, L2 loss."""
    g = _seed(seed)
    imgs, _ = _shapes8(g, 4096, classes=8)
    patches = imgs.view(-1, 4, 2, 4, 2).permute(0, 1, 3, 2, 4).reshape(-1, 16, 4)
    encoder, predictor = PatchEncoder(), JEPAPredictor()
    target_encoder = copy.deepcopy(encoder).requires_grad_(False)
    params = list(encoder.parameters()) + list(predictor.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.04)
    hook = Hook(path)
    hook.register_module(encoder, name="encoder")
    hook.register_module(predictor, name="predictor")
    losses = []
    warm = steps // 8
    grid = torch.arange(16).view(4, 4)
    for step in range(steps):
        lr = (
            1e-4 + (1e-3 - 1e-4) * step / warm
            if step < warm
            else 1e-6 + (1e-3 - 1e-6) * 0.5 * (1 + math.cos(math.pi * (step - warm) / (steps - warm)))
        )
        wd = 0.04 + (0.4 - 0.04) * 0.5 * (1 - math.cos(math.pi * step / steps))
        for pg in opt.param_groups:
            pg["lr"], pg["weight_decay"] = lr, wd
        r0, c0 = torch.randint(0, 3, (2,), generator=g).tolist()
        target = grid[r0 : r0 + 2, c0 : c0 + 2].reshape(-1)
        keep = torch.tensor([i for i in range(16) if i not in set(target.tolist())])
        x = patches[torch.randint(0, len(patches), (64,), generator=g)]
        with torch.no_grad():
            h = F.layer_norm(target_encoder(x), (48,))[:, target]
        pred = predictor(encoder(x, keep), keep, target)
        loss = F.mse_loss(pred, h)
        opt.zero_grad()
        loss.backward()
        opt.step()
        m = 0.996 + (1 - 0.996) * step / steps
        with torch.no_grad():
            for pq, pk in zip(encoder.parameters(), target_encoder.parameters(), strict=True):
                pk.mul_(m).add_((1 - m) * pq.detach())
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- co-teaching


def co_teaching_noisy_labels(
    path: str, epochs: int = 12, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Han et al. 2018: two networks, 40% symmetric label noise, each updated on the small-loss
    samples its peer selects; the forget rate ramps to the noise rate over T_k = 10 epochs;
    Adam lr 1e-3 with the paper's momentum (beta1) decay in the last epochs."""
    g = _seed(seed)
    x, y = _shapes8(g, 2000, classes=8)
    noise = 0.4
    flip = torch.rand(len(y), generator=g) < noise
    y_noisy = torch.where(flip, torch.randint(0, 8, (len(y),), generator=g), y)

    def cnn() -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.LeakyReLU(0.01),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.LeakyReLU(0.01),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.25), nn.Linear(64, 8),
        )  # fmt: skip

    model1, model2 = cnn(), cnn()
    opt1 = torch.optim.Adam(model1.parameters(), lr=1e-3)
    opt2 = torch.optim.Adam(model2.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model1, name="net1")
    hook.register_module(model2, name="net2")
    losses = []
    for epoch in range(epochs):
        forget = min(epoch / 10, 1.0) * noise
        if epoch >= epochs - 4:
            for opt in (opt1, opt2):
                for pg in opt.param_groups:
                    pg["lr"] = 1e-3 * (epochs - epoch) / 4
                    pg["betas"] = (0.1, 0.999)
        model1.train()
        model2.train()
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), 128):
            idx = perm[i : i + 128]
            out1, out2 = model1(x[idx]), model2(x[idx])
            l1 = F.cross_entropy(out1, y_noisy[idx], reduction="none")
            l2 = F.cross_entropy(out2, y_noisy[idx], reduction="none")
            keep = max(1, int((1 - forget) * len(idx)))
            sel1 = torch.argsort(l1.detach())[:keep]
            sel2 = torch.argsort(l2.detach())[:keep]
            loss1 = F.cross_entropy(out1[sel2], y_noisy[idx][sel2])
            loss2 = F.cross_entropy(out2[sel1], y_noisy[idx][sel1])
            opt1.zero_grad()
            loss1.backward()
            opt1.step()
            opt2.zero_grad()
            loss2.backward()
            opt2.step()
            losses.append(loss1.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- EWC


def ewc_permuted_tasks(
    path: str, epochs_per_task: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Kirkpatrick et al. 2017 on permuted-pixel tasks: after each task the diagonal empirical
    Fisher and the weights are stored, later tasks add (lambda / 2) sum F (theta - theta*)^2;
    SGD lr 0.05, lambda = 20."""
    g = _seed(seed)
    x, y = _shapes8(g, 3000, classes=8)
    x = x.flatten(1)
    perms = [torch.arange(64)] + [torch.randperm(64, generator=g) for _ in range(2)]
    if bug == "deep_sigmoid":  # "smoother" activations, and twice as deep
        layers: list[nn.Module] = [nn.Linear(64, 100), nn.Sigmoid()]
        for _ in range(5):
            layers += [nn.Linear(100, 100), nn.Sigmoid()]
        model = nn.Sequential(*layers, nn.Linear(100, 8))
    else:
        model = nn.Sequential(
            nn.Linear(64, 100), nn.ReLU(), nn.Linear(100, 100), nn.ReLU(), nn.Linear(100, 8)
        )
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    fishers: list[dict[str, torch.Tensor]] = []
    anchors: list[dict[str, torch.Tensor]] = []
    lam = 20.0
    for perm in perms:
        xt = x[:, perm]
        for _ in range(epochs_per_task):
            order = torch.randperm(len(xt), generator=g)
            for i in range(0, len(xt), 64):
                idx = order[i : i + 64]
                loss = criterion(model(xt[idx]), y[idx])
                for fisher, anchor in zip(fishers, anchors, strict=True):
                    for n, p in model.named_parameters():
                        loss = loss + lam / 2 * (fisher[n] * (p - anchor[n]) ** 2).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        fisher = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
        for i in range(200):
            model.zero_grad()
            out = F.log_softmax(model(xt[i : i + 1]), 1)
            out[0, int(y[i])].backward()
            for n, p in model.named_parameters():
                fisher[n] += p.grad.detach() ** 2 / 200
        fishers.append(fisher)
        anchors.append({n: p.detach().clone() for n, p in model.named_parameters()})
    hook.close()
    return losses


# ----------------------------------------------------------------------------- FedAvg


def fedavg_non_iid_clients(path: str, rounds: int = 15, seed: int = 0, bug: str | None = None) -> list[float]:
    """McMahan et al. 2017: 10 clients with 2 classes each (non-IID), C = 0.5 of them a round,
    E = 1 local epoch of SGD (lr 0.05, B = 10), the server averages weighted by client size.
    One local model object is loaded with the global weights for each client."""
    g = _seed(seed)
    x, y = _shapes8(g, 2000, classes=8)
    order = torch.argsort(y * 10000 + torch.randperm(len(y), generator=g))
    shards = order.view(20, -1)
    shard_perm = torch.randperm(20, generator=g)
    clients = [torch.cat([shards[shard_perm[2 * c]], shards[shard_perm[2 * c + 1]]]) for c in range(10)]

    def cnn() -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(32 * 4, 64), nn.ReLU(), nn.Linear(64, 8),
        )  # fmt: skip

    global_model = cnn()
    local = cnn()
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(local)
    hook.register_loss(criterion)
    losses = []
    for _ in range(rounds):
        chosen = torch.randperm(10, generator=g)[:5].tolist()
        states, sizes = [], []
        for c in chosen:
            local.load_state_dict(global_model.state_dict())
            local.train()
            opt = torch.optim.SGD(local.parameters(), lr=0.05)
            data = clients[c][torch.randperm(len(clients[c]), generator=g)]
            for i in range(0, len(data), 10):
                idx = data[i : i + 10]
                loss = criterion(local(x[idx]), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
            states.append(copy.deepcopy(local.state_dict()))
            sizes.append(len(data))
        total = sum(sizes)
        avg = {k: sum(s[k] * (n / total) for s, n in zip(states, sizes, strict=True)) for k in states[0]}
        global_model.load_state_dict(avg)
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ColBERT


class ColBERTEncoder(nn.Module):
    """Khattab & Zaharia 2020, tiny: a transformer encoder, a linear projection to 32 dims,
    L2-normalised token embeddings; score = sum over query tokens of the max similarity."""

    def __init__(self, vocab: int, d: int = 64, dim: int = 32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.pos = nn.Parameter(torch.randn(1, 16, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, 4, 2 * d, 0.1, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.linear = nn.Linear(d, dim, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.emb(ids) + self.pos[:, : ids.shape[1]], src_key_padding_mask=ids == 0)
        return F.normalize(self.linear(h), dim=-1) * (ids != 0).unsqueeze(-1)

    def score(self, q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        return torch.einsum("qid,qjd->qij", q, d).max(2).values.sum(1)


def colbert_triples(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """(query, positive, negative) triples, pairwise softmax cross-entropy over the two scores,
    Adam lr 3e-4 (a from-scratch encoder), batch 32, query length 8 (with [MASK] padding
    augmentation), document length 16."""
    g = _seed(seed)
    vocab, topics = 200, 20
    topic_words = torch.randint(4, vocab, (topics, 12), generator=g)

    def doc(t: torch.Tensor, length: int) -> torch.Tensor:
        own = topic_words[t][
            torch.arange(len(t))[:, None], torch.randint(0, 12, (len(t), length), generator=g)
        ]
        noise = torch.randint(4, vocab, (len(t), length), generator=g)
        return torch.where(torch.rand(len(t), length, generator=g) < 0.7, own, noise)

    model = ColBERTEncoder(vocab)
    if bug == "frozen_by_mistake":  # the projection was meant to be frozen only while warming up
        for p in model.linear.parameters():
            p.requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(steps):
        t = torch.randint(0, topics, (32,), generator=g)
        t_neg = (t + torch.randint(1, topics, (32,), generator=g)) % topics
        q = doc(t, 5)
        q = torch.cat([torch.full((32, 1), 1), q, torch.full((32, 2), 3)], 1)  # [Q] ... [MASK] [MASK]
        dp = torch.cat([torch.full((32, 1), 2), doc(t, 15)], 1)
        dn = torch.cat([torch.full((32, 1), 2), doc(t_neg, 15)], 1)
        qe = model(q)
        de = model(torch.cat([dp, dn]))
        scores = torch.stack([model.score(qe, de[:32]), model.score(qe, de[32:])], 1)
        loss = criterion(scores, torch.zeros(32, dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- GFlowNet


def gflownet_hypergrid(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """Malkin et al. 2022, trajectory balance on the 8 x 8 hypergrid (R0 = 0.001, R1 = 0.5,
    R2 = 2): an MLP forward policy over (right, up, stop), a learned log Z at lr 0.1, the policy
    at lr 1e-3, batch 16 trajectories, a uniform backward policy over the valid parents."""
    g = _seed(seed)
    h, dim = 8, 2

    def reward(s: torch.Tensor) -> torch.Tensor:
        ax = (s / (h - 1) - 0.5).abs()
        return 1e-3 + 0.5 * (ax > 0.25).all(-1).float() + 2.0 * ((ax > 0.3) & (ax < 0.4)).all(-1).float()

    class Policy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(h * dim, 256),
                nn.LeakyReLU(),
                nn.Linear(256, 256),
                nn.LeakyReLU(),
                nn.Linear(256, dim + 1),
            )
            self.log_z = nn.Parameter(torch.zeros(1))

        def forward(self, s: torch.Tensor) -> torch.Tensor:
            return self.net(F.one_hot(s, h).float().flatten(1))

    model = Policy()
    opt = torch.optim.Adam(
        [{"params": model.net.parameters(), "lr": 1e-3}, {"params": [model.log_z], "lr": 0.1}]
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    bs = 16
    for _ in range(steps):
        s = torch.zeros(bs, dim, dtype=torch.long)
        done = torch.zeros(bs, dtype=torch.bool)
        log_pf = torch.zeros(bs)
        log_pb = torch.zeros(bs)
        while not done.all():
            logits = model(s)
            valid = torch.cat([s < h - 1, torch.ones(bs, 1, dtype=torch.bool)], 1)
            if bug == "log_zero_nan":  # probabilities masked by multiplying, then logged
                probs = torch.softmax(logits, 1) * valid
                logp = torch.log(probs / probs.sum(1, keepdim=True))
            else:
                logp = torch.log_softmax(logits.masked_fill(~valid, -1e9), 1)
            with torch.no_grad():
                a = torch.multinomial(logp.exp().nan_to_num(1.0 / (dim + 1)), 1, generator=g).squeeze(1)
            active = ~done
            log_pf = log_pf + torch.where(active, logp.gather(1, a[:, None]).squeeze(1), 0.0)
            stop = a == dim
            move = active & ~stop
            s = (s + F.one_hot(a.clamp(max=dim - 1), dim) * move[:, None]).clamp(max=h - 1)
            n_parents = (s > 0).sum(1).clamp(min=1).float()
            log_pb = log_pb + torch.where(move, -torch.log(n_parents), 0.0)
            done = done | (active & stop)
        loss = ((model.log_z + log_pf - torch.log(reward(s)) - log_pb) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- PonderNet


class PonderGRU(nn.Module):
    """Banino et al. 2021: a GRU cell stepped up to N times on the same input, a halting
    probability lambda_n per step, an output per step."""

    def __init__(self, d_in: int, hidden: int = 64, max_steps: int = 12):
        super().__init__()
        self.max_steps = max_steps
        self.cell = nn.GRUCell(d_in, hidden)
        self.out = nn.Linear(hidden, 1)
        self.halt = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b = x.shape[0]
        h = torch.zeros(b, self.cell.hidden_size)
        un_halted = torch.ones(b)
        ys, ps = [], []
        for n in range(self.max_steps):
            h = self.cell(x, h)
            lam = torch.sigmoid(self.halt(h)).squeeze(1) if n < self.max_steps - 1 else torch.ones(b)
            ps.append(un_halted * lam)
            un_halted = un_halted * (1 - lam)
            ys.append(self.out(h).squeeze(1))
        return torch.stack(ys, 1), torch.stack(ps, 1)


def pondernet_parity(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """The parity task (vectors of 0 / +-1, label the parity of the non-zeros); loss = sum_n p_n
    BCE(y_n) + beta KL(p || Geometric(lambda_p)), beta = 0.01, lambda_p = 0.2; Adam (lr 1e-3 at
    this size)."""
    g = _seed(seed)
    d, n_max = 4, 12
    model = PonderGRU(d, max_steps=n_max)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    lam_p = 0.2
    prior = lam_p * (1 - lam_p) ** torch.arange(n_max, dtype=torch.float)
    prior = prior / prior.sum()
    bce = nn.BCEWithLogitsLoss(reduction="none")
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(bce)
    losses = []
    for _ in range(steps):
        k = torch.randint(1, d + 1, (128, 1), generator=g)
        nonzero = torch.rand(128, d, generator=g).argsort(1) < k
        x = (torch.randint(0, 2, (128, d), generator=g).float() * 2 - 1) * nonzero
        y = ((x == 1).sum(1) % 2).float()
        ys, ps = model(x)
        rec = (ps * bce(ys, y[:, None].expand_as(ys))).sum(1).mean()
        reg = F.kl_div(torch.log(prior).expand_as(ps), ps, reduction="batchmean")
        loss = rec + 0.01 * reg
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- CycleGAN


def _stripes8(g: torch.Generator, n: int) -> torch.Tensor:
    """Domain B: 8x8 images of horizontal or vertical stripes with random phase and contrast."""
    yy, xx = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
    phase = torch.rand(n, 1, 1, generator=g) * 6.28
    vertical = torch.rand(n, 1, 1, generator=g) < 0.5
    coord = torch.where(vertical, xx, yy)
    img = 0.5 + 0.4 * torch.sin(coord * 1.6 + phase) * (0.6 + 0.4 * torch.rand(n, 1, 1, generator=g))
    return img.unsqueeze(1)


class ResnetGenerator8(nn.Module):
    def __init__(self, ch: int = 16, blocks: int = 2):
        super().__init__()
        self.inp = nn.Sequential(
            nn.Conv2d(1, ch, 3, padding=1, padding_mode="reflect"), nn.InstanceNorm2d(ch), nn.ReLU(True)
        )
        self.blocks = nn.ModuleList(
            [
                nn.Sequential(
                    nn.Conv2d(ch, ch, 3, padding=1, padding_mode="reflect"),
                    nn.InstanceNorm2d(ch),
                    nn.ReLU(True),
                    nn.Conv2d(ch, ch, 3, padding=1, padding_mode="reflect"),
                    nn.InstanceNorm2d(ch),
                )  # fmt: skip
                for _ in range(blocks)
            ]
        )
        self.out = nn.Conv2d(ch, 1, 3, padding=1, padding_mode="reflect")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for blk in self.blocks:
            h = h + blk(h)
        return torch.tanh(self.out(h))


def _patch_d() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 32, 4, stride=2, padding=1), nn.LeakyReLU(0.2, True),
        nn.Conv2d(32, 64, 3, padding=1), nn.InstanceNorm2d(64), nn.LeakyReLU(0.2, True),
        nn.Conv2d(64, 1, 3, padding=1),
    )  # fmt: skip


def cyclegan_shapes_stripes(
    path: str, steps: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Zhu et al. 2017: two ResNet generators, two PatchGAN discriminators, least-squares GAN
    loss, lambda_cycle = 10, lambda_identity = 0.5 x 10, Adam lr 2e-4 betas (0.5, 0.999),
    discriminators on a 50-image history pool, their loss halved, images in [-1, 1]."""
    g = _seed(seed)
    a_imgs = _shapes8(g, 1000, classes=4)[0] * 2 - 1
    b_imgs = _stripes8(g, 1000) * 2 - 1
    g_ab, g_ba = ResnetGenerator8(), ResnetGenerator8()
    d_a, d_b = _patch_d(), _patch_d()
    for net in (g_ab, g_ba, d_a, d_b):
        for m in net.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, 0.0, 0.02)
                nn.init.zeros_(m.bias)
    opt_g = torch.optim.Adam(list(g_ab.parameters()) + list(g_ba.parameters()), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(list(d_a.parameters()) + list(d_b.parameters()), lr=2e-4, betas=(0.5, 0.999))
    gan_loss, l1 = nn.MSELoss(), nn.L1Loss()
    hook = Hook(path)
    hook.register_module(g_ab, name="G_AB")
    hook.register_module(g_ba, name="G_BA")
    hook.register_module(d_a, name="D_A")
    hook.register_module(d_b, name="D_B")
    hook.register_loss(gan_loss)
    pools: dict[str, list[torch.Tensor]] = {"A": [], "B": []}

    def from_pool(key: str, imgs: torch.Tensor) -> torch.Tensor:
        out = []
        for im in imgs.detach():
            pool = pools[key]
            if len(pool) < 50:
                pool.append(im)
                out.append(im)
            elif random.random() > 0.5:
                j = random.randrange(50)
                out.append(pool[j].clone())
                pool[j] = im
            else:
                out.append(im)
        return torch.stack(out)

    losses = []
    for _ in range(steps):
        ra = a_imgs[torch.randint(0, len(a_imgs), (8,), generator=g)]
        rb = b_imgs[torch.randint(0, len(b_imgs), (8,), generator=g)]
        for p in (*d_a.parameters(), *d_b.parameters()):
            p.requires_grad_(False)
        fake_b, fake_a = g_ab(ra), g_ba(rb)
        pred_b, pred_a = d_b(fake_b), d_a(fake_a)
        loss_g = (
            gan_loss(pred_b, torch.ones_like(pred_b)) + gan_loss(pred_a, torch.ones_like(pred_a))
            + 10 * (l1(g_ba(fake_b), ra) + l1(g_ab(fake_a), rb))
            + 5 * (l1(g_ab(rb), rb) + l1(g_ba(ra), ra))
        )  # fmt: skip
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        for p in (*d_a.parameters(), *d_b.parameters()):
            p.requires_grad_(True)
        opt_d.zero_grad()
        loss_d = 0.0
        for d, real, fake in ((d_a, ra, from_pool("A", fake_a)), (d_b, rb, from_pool("B", fake_b))):
            pr, pf = d(real), d(fake)
            ld = 0.5 * (gan_loss(pr, torch.ones_like(pr)) + gan_loss(pf, torch.zeros_like(pf)))
            ld.backward()
            loss_d = loss_d + ld.item()
        opt_d.step()
        losses.append(loss_g.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Matryoshka


class MatryoshkaHeads(nn.Module):
    """Kusupati et al. 2022 (MRL): one classifier per nested prefix of the embedding."""

    def __init__(self, dims: tuple[int, ...], classes: int):
        super().__init__()
        self.dims = dims
        self.heads = nn.ModuleList([nn.Linear(d, classes) for d in dims])

    def forward(self, z: torch.Tensor) -> list[torch.Tensor]:
        return [head(z[:, :d]) for d, head in zip(self.dims, self.heads, strict=True)]


def matryoshka_representation(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Nested dims (4, 8, 16, 32, 64), equal loss weights, label smoothing 0.1, SGD momentum 0.9
    with nesterov, lr 0.1 (batch 128 scaling), weight decay 5e-5, one-cycle-style schedule."""
    g = _seed(seed)
    x, y = _shapes8(g, 2560, classes=8)
    backbone = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )  # fmt: skip
    model = nn.Sequential(backbone, MatryoshkaHeads((4, 8, 16, 32, 64), 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-5)
    total = epochs * (len(x) // 128)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=total, pct_start=0.25)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x) - 127, 128):
            idx = perm[i : i + 128]
            outs = model(x[idx])
            loss = sum(criterion(o, y[idx]) for o in outs)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- registry

_swin = healthy("swin_shifted_windows_relpos_label_smoothing", "vision (Swin)", swin_classifier)
_vgae = healthy("vgae_inner_product_decoder_sbm", "graph autoencoder (VGAE)", vgae_link_graph)
_p4 = healthy("p4_group_equivariant_cnn_rotated_shapes", "group-equivariant CNN (p4)", p4cnn_rotated_shapes)
_simsiam = healthy("simsiam_stop_gradient_predictor_fixed_lr", "self-supervised (SimSiam)", simsiam)
_memn2n = healthy("memn2n_three_hops_position_encoding", "memory network (MemN2N)", memn2n_babi)
_dlrm = healthy("dlrm_dot_interaction_embedding_tables", "recommender (DLRM)", dlrm_clicks)
_ewc = healthy("ewc_fisher_penalty_permuted_tasks", "continual learning (EWC)", ewc_permuted_tasks)
_colbert = healthy(
    "colbert_late_interaction_maxsim_triples", "retrieval (ColBERT late interaction)", colbert_triples
)
_gflownet = healthy(
    "gflownet_trajectory_balance_hypergrid", "GFlowNet (trajectory balance)", gflownet_hypergrid
)
_graph_tf = healthy(
    "graph_transformer_laplacian_pe_batchnorm", "graph transformer (Laplacian PE)", graph_transformer_lappe
)

PIPELINES = [
    healthy("moe_expert_choice_routing_lm", "MoE (expert-choice routing)", expert_choice_moe_lm),
    healthy("retnet_multiscale_retention_lm", "language model (RetNet retention)", retnet_lm),
    healthy("consistency_training_karras_ema_moons", "consistency model (CT)", consistency_training),
    healthy("mixture_of_softmaxes_lstm_bptt", "language model (mixture of softmaxes)", mos_lstm_lm),
    healthy("muon_newton_schulz_hidden_adamw_rest", "optimizer (Muon)", muon_mlp),
    healthy(
        "schedule_free_adamw_friedman_mlp", "optimizer (schedule-free AdamW)", schedule_free_adamw_regression
    ),
    healthy("siglip_sigmoid_pairwise_loss", "multimodal (SigLIP)", siglip_pairs),
    healthy("slot_attention_sprites_autoencoder", "object-centric (slot attention)", slot_attention_sprites),
    healthy("cql_discrete_offline_gridworld", "offline RL (CQL)", cql_offline_grid),
    healthy(
        "proxy_anchor_metric_learning_warm_epoch", "metric learning (Proxy Anchor)", proxy_anchor_embedding
    ),
    healthy("gaussian_splatting_2d_image_fit", "2-D Gaussian splatting", gaussian_splatting_2d),
    healthy("binary_tree_lstm_negation_sentiment", "Tree-LSTM", tree_lstm_sentiment),
    healthy("fsq_autoencoder_levels_8555", "finite scalar quantization (FSQ)", fsq_autoencoder),
    healthy("node_oblivious_trees_sparsemax", "tabular (NODE)", node_oblivious_trees),
    healthy("nalu_static_arithmetic_rmsprop", "neural arithmetic (NALU)", nalu_arithmetic),
    healthy("dragonnet_targeted_regularization_two_phase", "causal inference (Dragonnet)", dragonnet_causal),
    healthy("ijepa_ema_target_block_prediction", "self-supervised (I-JEPA)", ijepa_patches),
    healthy("co_teaching_small_loss_exchange", "noisy labels (co-teaching)", co_teaching_noisy_labels),
    healthy("fedavg_non_iid_clients_local_sgd", "federated learning (FedAvg)", fedavg_non_iid_clients),
    healthy("pondernet_parity_geometric_prior", "adaptive computation (PonderNet)", pondernet_parity),
    healthy(
        "cyclegan_lsgan_cycle_identity_pool", "unpaired image translation (CycleGAN)", cyclegan_shapes_stripes
    ),
    healthy(
        "matryoshka_nested_heads_label_smoothing",
        "representation learning (Matryoshka)",
        matryoshka_representation,
    ),
    _swin,
    _vgae,
    _p4,
    _simsiam,
    _memn2n,
    _dlrm,
    _ewc,
    _colbert,
    _gflownet,
    _graph_tf,
    buggy(_swin, "lr_x100"),
    buggy(_vgae, "no_zero_grad"),
    buggy(_p4, "shuffled_labels"),
    buggy(_simsiam, "inputs_x255"),
    buggy(_memn2n, "softmax_before_ce"),
    buggy(_dlrm, "dead_relu_init"),
    buggy(_ewc, "deep_sigmoid"),
    buggy(_colbert, "frozen_by_mistake"),
    buggy(_gflownet, "log_zero_nan"),
    buggy(_graph_tf, "train_in_eval_mode"),
]
