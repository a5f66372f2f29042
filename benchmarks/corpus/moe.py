"""Mixture of experts: top-k routing with a load-balancing auxiliary loss (Switch / GShard
style), noisy gating, expert capacity with dropped tokens, and an MoE transformer block."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import _data, buggy, healthy

torch.set_num_threads(1)


class MoE(nn.Module):
    """`experts` two-layer MLPs; each token goes to its top-k experts, outputs weighted by the
    renormalized gate probabilities. `aux` after a forward: the load-balancing loss
    E * sum_i f_i * P_i (f: share of tokens routed to expert i, P: mean gate probability)."""

    def __init__(
        self, d: int, hidden: int, experts: int, k: int, noisy: bool = False, capacity: float | None = None
    ):
        super().__init__()
        self.gate = nn.Linear(d, experts, bias=False)
        self.noise = nn.Linear(d, experts, bias=False) if noisy else None
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d)) for _ in range(experts)
        )
        self.k, self.capacity = k, capacity
        self.aux = torch.tensor(0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        logits = self.gate(x)
        if self.noise is not None and self.training:
            logits = logits + torch.randn_like(logits) * F.softplus(self.noise(x))
        probs = logits.softmax(-1)
        topv, topi = probs.topk(self.k, -1)
        topv = topv / topv.sum(-1, keepdim=True)
        n_exp = len(self.experts)
        f = F.one_hot(topi[:, 0], n_exp).float().mean(0)
        self.aux = n_exp * (f * probs.mean(0)).sum()
        out = torch.zeros_like(x)
        cap = int(self.capacity * len(x) * self.k / n_exp) if self.capacity else len(x)
        for e, expert in enumerate(self.experts):
            tok, slot = (topi == e).nonzero(as_tuple=True)
            tok, slot = tok[:cap], slot[:cap]  # tokens beyond the capacity are dropped (residual only)
            if len(tok):
                out.index_add_(0, tok, topv[tok, slot, None] * expert(x[tok]))
        return out.reshape(shape)


class MoEClassifier(nn.Module):
    def __init__(self, d_in: int, d: int, classes: int, **moe):
        super().__init__()
        self.inp = nn.Linear(d_in, d)
        self.norm = nn.LayerNorm(d)
        self.moe = MoE(d, 2 * d, **moe)
        self.out = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        h = h + self.moe(self.norm(h))
        return self.out(h)


class MoELoss(nn.Module):
    """Cross-entropy + alpha * the router's load-balancing loss."""

    def __init__(self, moe: MoE, alpha: float):
        super().__init__()
        self.moe_aux = lambda: moe.aux  # not a submodule: the loss holds no parameters
        self.alpha = alpha

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, y) + self.alpha * self.moe_aux()


def moe_classifier(
    path: str,
    experts: int = 4,
    k: int = 2,
    noisy: bool = False,
    capacity: float | None = None,
    alpha: float = 0.01,
    lr: float = 2e-3,
    steps: int = 250,
    batch: int = 128,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    x, y = _data.teacher_classes(g, 6000, 16, 8)
    model = MoEClassifier(16, 32, 8, experts=experts, k=k, noisy=noisy, capacity=capacity)
    loss_fn = MoELoss(model.moe, alpha)
    opt = torch.optim.Adam(model.parameters(), lr=lr * (100 if bug == "lr_x100" else 1))
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, len(x), (batch,), generator=g)
        opt.zero_grad()
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


class MoEBlock(nn.Module):
    def __init__(self, d: int, experts: int, k: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.moe = MoE(d, 2 * d, experts, k)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.moe(self.ln2(x))


class MoELM(nn.Module):
    def __init__(self, vocab: int, d: int, ctx: int, experts: int, k: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.block = MoEBlock(d, experts, k)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.size(1)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        return self.head(self.ln(self.block(self.tok(x) + self.pos(torch.arange(t)), mask)))


def moe_lm(
    path: str,
    experts: int = 8,
    k: int = 1,
    alpha: float = 0.01,
    steps: int = 200,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """A one-block transformer LM whose feed-forward is a top-1 (Switch) MoE of 8 experts,
    word-level, AdamW with warm-up."""
    torch.manual_seed(seed)
    vocab, ctx, batch = 120, 24, 16
    data = torch.from_numpy(_data.word_stream(seed, 20_000, vocab))
    model = MoELM(vocab, 32, ctx, experts, k)
    loss_fn = MoELoss(model.block.moe, alpha)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    g = torch.Generator().manual_seed(seed + 1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    model.train()
    for _ in range(steps):
        starts = torch.randint(0, len(data) - ctx - 1, (batch,), generator=g)
        xb = torch.stack([data[s : s + ctx] for s in starts])
        yb = torch.stack([data[s + 1 : s + ctx + 1] for s in starts])
        opt.zero_grad()
        loss = loss_fn(model(xb).reshape(-1, vocab), yb.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


_moe = healthy("moe_top2_load_balancing", "MoE", moe_classifier)

PIPELINES = [
    _moe,
    healthy(
        "moe_top1_capacity_noisy_gate",
        "MoE",
        moe_classifier,
        experts=8,
        k=1,
        noisy=True,
        capacity=1.25,
        alpha=0.02,
        seed=1,
    ),
    healthy("moe_transformer_lm_switch", "MoE", moe_lm),
    buggy(_moe, "lr_x100"),
]
