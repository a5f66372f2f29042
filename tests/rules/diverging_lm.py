"""A tiny GPT-style language model that diverges on its own: no injected bug, only a learning
rate slightly too high (SGD with momentum 0.9, a linear warmup over 100 steps to a peak of
3.5; 2.5 trains to the end, 3.0 diverges at step 206, 3.5 at step 158, 4.0 at step 96). After
the warmup the loss sits near 2.9 for ~50 steps, then creeps up from step ~148 and explodes
ten steps later: the edge of stability, as large models reach it.

Recorded with the two-line hook (`Hook(out_dir)`, `register_module`, `register_loss`) and
statistics every step (`statistics_every=1`, a reproducible cadence). Seeded, CPU, one
thread: the same losses on every run. `DIVERGES_AT` is where the loss first exceeds twice
its running minimum (or is not finite); `python -m benchmarks.early_warning` measures the
leads of docs/rules.md on it."""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

import mldbg.torch
from tests.rules.healthy_pipelines import _zipf_tokens

VOCAB = 200
LENGTH = 32
PEAK_LR = 3.5
WARMUP = 100


class Block(nn.Module):
    """Pre-LayerNorm block: causal multi-head attention, then a GELU MLP."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, 2))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(
        self, vocab: int = VOCAB, d: int = 64, layers: int = 2, heads: int = 4, length: int = LENGTH
    ):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(length, d) * 0.02)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.emb(x) + self.pos[: x.shape[1]]
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln(h))


def diverged_at(losses: list[float], factor: float = 2.0, after: int = 20) -> int | None:
    """The first step whose loss is not finite or above `factor` x its running minimum
    (ignoring the first `after` steps, where the loss falls from its initial level)."""
    low = math.inf
    for step, value in enumerate(losses):
        if not math.isfinite(value) or (step > after and value > factor * low):
            return step
        low = min(low, value)
    return None


def train_lm(
    path: str | Path | None,
    peak_lr: float = PEAK_LR,
    steps: int = 200,
    hook_kwargs: dict | None = None,
    guard: dict | None = None,
    step_seconds: float = 0.0,
    paced_from: int = WARMUP,
) -> list[float]:
    """Train (recording into `path` with the two-line hook; `path=None`: no hook) and return
    the losses, one per step; training stops at the first non-finite loss, as a user's loop
    would. `guard`: keywords of a `mldbg.torch.Guard` that steps the optimizer (the schedule
    is multiplied by its `lr_scale`; a non-finite loss does not stop the loop then).
    `step_seconds`: each step from `paced_from` (the end of the warmup by default) takes at
    least that long (a bigger model's pace, so that the hook's watcher keeps up), until the
    guard rolled back."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    data = _zipf_tokens(g, 2048, LENGTH + 1, VOCAB)
    net = TinyGPT()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=peak_lr, momentum=0.9)
    losses: list[float] = []
    hook = None
    if path is not None:
        hook = mldbg.torch.Hook(str(path), **{"statistics_every": 1, **(hook_kwargs or {})})
        hook.register_module(net)
        hook.register_loss(loss_fn)
    g_ = mldbg.torch.Guard(net, opt, hook=hook, **guard) if guard is not None else None
    try:
        for step in range(steps):
            for group in opt.param_groups:
                group["lr"] = peak_lr * min(1.0, (step + 1) / WARMUP) * (g_.lr_scale if g_ else 1.0)
            began = time.perf_counter()
            batch = data[(step * 32) % 2048 :][:32]
            x, y = batch[:, :-1], batch[:, 1:]
            opt.zero_grad()
            loss = loss_fn(net(x).reshape(-1, VOCAB), y.reshape(-1))
            loss.backward()
            if g_ is None:
                opt.step()
            else:
                g_.step(loss)
            losses.append(loss.item())
            if step_seconds and step >= paced_from and not (g_ is not None and g_.rollbacks):
                time.sleep(max(0.0, step_seconds - (time.perf_counter() - began)))
            if not math.isfinite(losses[-1]) and g_ is None:
                break
    finally:
        if hook is not None:
            hook.close()
    return losses


DIVERGES_AT = 158  # diverged_at(train_lm(None)); a test checks it
