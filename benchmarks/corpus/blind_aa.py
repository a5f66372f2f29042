"""The twentieth blind held-out set (issue 26), part AA: modern fine-tuning and efficient-training
idioms as 2024-2026 public repositories write them, shrunk to tiny models on data generated
in-process, fixed seeds, one CPU thread. Plain PyTorch loops with the README's two lines
(`register_loss` where the script has a loss module) and trainings through tools with their one
callback. The fine-tunings start from a base trained in the same run before the hook is made,
standing in for a downloaded checkpoint.

Plain PyTorch: DoRA (weight-decomposed low-rank adaptation: a frozen base weight, a learned
magnitude per output and a LoRA direction normalized per row, dropout on the adapter input) on
a frozen MLP, only the adapters and magnitudes in AdamW, an evaluation pass each epoch; BitFit
(bias-only fine-tuning: every weight frozen, the biases, the LayerNorm affine terms and a new
head trained) of an MLP on a shifted task; (IA)^3 on a tiny hand-written transformer (learned
rescaling vectors of the keys, values and feed-forward activations, initialized to ones, with a
new head); LoRA+ (the B matrices at 16 times the lr of the A matrices as two parameter groups)
of a frozen regression MLP under `SmoothL1Loss`; ReLoRA on a context-window character LM (a
full-rank warm start, then LoRA cycles merged into the base every 80 steps, the adapters
re-initialized, the optimizer state reset and a jagged warm-up after each restart); GaLore
(Adam moments kept on gradients projected on the top singular vectors of each weight's gradient,
the projection refreshed every 50 steps, the update projected back and scaled) on a deep MLP;
a tiny causal transformer with QK-norm (LayerNorm on queries and keys per head) and PaLM's
auxiliary z-loss on the log-partition, AdamW betas (0.9, 0.95), warm-up then cosine; the ADOPT
optimizer (2024) written by hand as a `torch.optim.Optimizer` (the second moment of the
previous steps normalizes the gradient before the momentum, clipped at step^0.25) on a tabular
regression; a DDPM epsilon-prediction on 2-D data with the improved cosine schedule (betas
clipped at 0.999), a denoiser conditioned on the log-SNR and the min-SNR-5 loss weighting;
LayerDrop (whole encoder layers skipped at random in training) in a pre-norm
`nn.TransformerEncoder` classifier with a linear warm-up; SimPO (reference-free length-normalized
preference optimization with a target margin) of a GRU language model after a short SFT;
PolyLoss (Poly-1: cross-entropy plus epsilon times one minus the true class's probability) on a
small CNN in `channels_last` memory format, SGD Nesterov and `MultiStepLR`; deep supervision of
a 1-D convolutional time-series classifier (auxiliary heads after the first two blocks, their
weight decayed over training).

Through tools: Lightning (`mldbg.lightning.DebuggerCallback`): LoRA adapters on a frozen
pretrained encoder, `configure_optimizers` over the trainable parameters only with a per-step
`OneCycleLR`; Hugging Face `Trainer` (`mldbg.transformers.DebuggerCallback`): a tiny random
`LlamaForCausalLM` trained as a language model with `gradient_checkpointing=True` and
`lr_scheduler_type="cosine_with_min_lr"`; Keras 3 (`mldbg.keras.Hook`): a Conv1D sequence
classifier under `keras.optimizers.Lion` with a warm-up `CosineDecay`.

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: ADOPT's `lr=1e-1` typed for 1e-3 (lr_x100), the ReLoRA loop without
`optimizer.zero_grad()` (no_zero_grad), the BitFit labels permuted apart from their rows
(shuffled_labels), the PolyLoss CNN's uint8 images missing their `/ 255` (inputs_x255), the
LayerDrop classifier's head ending in `nn.Softmax(-1)` before `CrossEntropyLoss`
(softmax_before_ce), the deep-supervision net's `init_weights` filling the biases with -1 under
std 0.01 weights (dead_relu_init), the GaLore MLP built from eight `nn.Sigmoid` layers
(deep_sigmoid), the (IA)^3 freezing loop run after the vectors were injected, so they are frozen
but still in the optimizer (frozen_by_mistake), the diffusion cosine schedule without its beta
clipping, so the last step's cumulative alpha is exactly 0 and its log-SNR `log(0)`
(log_zero_nan), and the DoRA loop's evaluation `model.eval()` never followed by
`model.train()` (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND19`.
"""

from __future__ import annotations

import math
import os
import random
import shutil
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from mldbg.torch import Hook

from . import BLIND19, buggy, healthy, installed

SPLIT = BLIND19

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 191)


def _teacher_task(g: torch.Generator, n: int, d: int, k: int, shift: float = 0.0) -> tuple[torch.Tensor, ...]:
    """Features and labels from a random two-layer teacher; `shift` mixes in a second teacher,
    a related task for fine-tuning."""
    w1 = torch.randn(d, 32, generator=g) / math.sqrt(d)
    w2 = torch.randn(32, k, generator=g)
    w1b = torch.randn(d, 32, generator=g) / math.sqrt(d)
    x = torch.randn(n, d, generator=g)
    h = torch.tanh(x @ ((1 - shift) * w1 + shift * w1b))
    return x, (h @ w2).argmax(1)


def _pretrain(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, g: torch.Generator, steps: int = 300
) -> None:
    """The base's own training, before the fine-tuning script loads it."""
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for _ in range(steps):
        b = torch.randint(0, len(x), (64,), generator=g)
        loss = F.cross_entropy(model(x[b]), y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()


def _markov(g: torch.Generator, vocab: int, n: int, length: int, sharp: float = 3.0) -> torch.Tensor:
    """Token sequences from a random sparse Markov chain: each token has a few likely successors."""
    logits = torch.randn(vocab, vocab, generator=g) * sharp
    probs = torch.softmax(logits, 1)
    seq = torch.empty(n, length, dtype=torch.long)
    seq[:, 0] = torch.randint(0, vocab, (n,), generator=g)
    for t in range(1, length):
        seq[:, t] = torch.multinomial(probs[seq[:, t - 1]], 1, generator=g).squeeze(1)
    return seq


# ============================================================================= adapters


class DoRALinear(nn.Module):
    """DoRA: W = m * (W0 + s B A) / ||W0 + s B A||_row, W0 frozen, m initialized to ||W0||_row."""

    def __init__(self, base: nn.Linear, r: int = 4, alpha: float = 8.0, dropout: float = 0.1) -> None:
        super().__init__()
        self.base = base
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.magnitude = nn.Parameter(base.weight.detach().norm(dim=1).clone())
        self.scale = alpha / r
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # as PEFT computes it: the norm detached (the paper's memory trick), dropout on the input
        # of the adapter and of the base weight's rescaled copy
        x_d = self.drop(x)
        w = self.base.weight + self.scale * self.lora_B @ self.lora_A
        mag_norm_scale = self.magnitude / w.norm(dim=1).detach()
        lora = self.scale * F.linear(F.linear(x_d, self.lora_A), self.lora_B)
        dora = (mag_norm_scale - 1) * F.linear(x_d, self.base.weight) + mag_norm_scale * lora
        return self.base(x) + dora


def dora_finetune_mlp(path: str, epochs: int = 14, seed: int = 0, bug: str | None = None) -> list[float]:
    """DoRA fine-tuning of a frozen 24-128-128-8 MLP (pretrained on a related task) on a shifted
    task: each Linear wrapped in a `DoRALinear` (rank 4, alpha 8, dropout 0.1 on the adapter
    input), the head adapted the same way; AdamW 5e-3 over the adapters and magnitudes only, weight
    decay 0, batch 64, `CrossEntropyLoss`; a held-out accuracy under `model.eval()` each epoch."""
    g = _seed(seed)
    xa, ya = _teacher_task(torch.Generator().manual_seed(seed + 5), 3000, 24, 8)
    xb, yb = _teacher_task(torch.Generator().manual_seed(seed + 5), 1800, 24, 8, shift=0.5)
    model = nn.Sequential(nn.Linear(24, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 8))
    _pretrain(model, xa, ya, g)
    model.requires_grad_(False)
    for i in (0, 2, 4):
        model[i] = DoRALinear(model[i])
    trainable = [p for n, p in model.named_parameters() if "lora_" in n or "magnitude" in n]
    optimizer = torch.optim.AdamW(trainable, lr=5e-3, weight_decay=0.0)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    xtr, ytr, xva, yva = xb[:1500], yb[:1500], xb[1500:], yb[1500:]
    losses: list[float] = []
    for epoch in range(epochs):
        if bug != "train_in_eval_mode":  # bug: the evaluation's model.eval() is never undone
            model.train()
        perm = torch.randperm(1500, generator=g)
        for i in range(0, 1500, 64):
            b = perm[i : i + 64]
            loss = criterion(model(xtr[b]), ytr[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(xva).argmax(1) == yva).float().mean().item()
        print(f"epoch {epoch}: val acc {acc:.3f}")
    hook.close()
    return losses


def bitfit_bias_only(path: str, epochs: int = 15, seed: int = 0, bug: str | None = None) -> list[float]:
    """BitFit: a 32-96-96-6 MLP with LayerNorm after each hidden Linear, pretrained on one task;
    for the new task (a shifted teacher, 10 classes) every weight is frozen, the biases, the
    LayerNorm weights and a new head are trained with Adam 1e-2, batch 48, a `StepLR` halving
    every 5 epochs, `CrossEntropyLoss`."""
    g = _seed(seed)
    xa, ya = _teacher_task(torch.Generator().manual_seed(seed + 9), 3000, 32, 6)
    xb, yb = _teacher_task(torch.Generator().manual_seed(seed + 9), 1440, 32, 10, shift=0.4)
    if bug == "shuffled_labels":  # bug: the labels shuffled on their own, not with their rows
        yb = yb[torch.randperm(len(yb), generator=g)]
    body = nn.Sequential(
        nn.Linear(32, 96), nn.LayerNorm(96), nn.GELU(), nn.Linear(96, 96), nn.LayerNorm(96), nn.GELU()
    )
    _pretrain(nn.Sequential(body, nn.Linear(96, 6)), xa, ya, g)
    model = nn.Sequential(body, nn.Linear(96, 10))
    for name, p in model.named_parameters():
        p.requires_grad = (
            name.endswith("bias") or name.startswith("1.") or name in ("0.1.weight", "0.4.weight")
        )
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(len(xb), generator=g)
        for i in range(0, len(xb), 48):
            b = perm[i : i + 48]
            loss = criterion(model(xb[b]), yb[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
    hook.close()
    return losses


class _IA3Block(nn.Module):
    """A pre-norm transformer block, hand-written, with (IA)^3 vectors on keys, values and the
    feed-forward activation (ones: the identity until trained)."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.ia3_k: nn.Parameter | None = None
        self.ia3_v: nn.Parameter | None = None
        self.ia3_ff: nn.Parameter | None = None

    def inject_ia3(self) -> None:
        d = self.proj.in_features
        self.ia3_k = nn.Parameter(torch.ones(d))
        self.ia3_v = nn.Parameter(torch.ones(d))
        self.ia3_ff = nn.Parameter(torch.ones(self.fc1.out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, -1)
        if self.ia3_k is not None and self.ia3_v is not None:
            k, v = k * self.ia3_k, v * self.ia3_v
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        h = F.gelu(self.fc1(self.ln2(x)))
        if self.ia3_ff is not None:
            h = h * self.ia3_ff
        return x + self.fc2(h)


class _TinyEncoder(nn.Module):
    def __init__(self, vocab: int, d: int, length: int, k: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(length, d) * 0.02)
        self.blocks = nn.ModuleList([_IA3Block(d, 4) for _ in range(2)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, k)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x).mean(1))


def ia3_tiny_transformer(path: str, steps: int = 260, seed: int = 0, bug: str | None = None) -> list[float]:
    """(IA)^3 fine-tuning of a tiny two-block transformer encoder (d 48, 4 heads) pretrained to
    tell which of tokens 1..4 is the most frequent in a sequence of 24; the new task asks which
    of tokens 5..8; the base frozen, the (IA)^3 vectors and a new head trained with Adam 3e-3,
    batch 32, `CrossEntropyLoss` with label smoothing 0.05."""
    g = _seed(seed)
    vocab, length = 16, 24

    def task(n: int, first: int) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.randint(9, vocab, (n, length), generator=g)
        y = torch.randint(0, 4, (n,), generator=g)
        for i in range(n):
            counts = torch.randint(1, 4, (4,), generator=g)
            counts[y[i]] = 5
            toks = torch.repeat_interleave(torch.arange(first, first + 4), counts)
            pos = torch.randperm(length, generator=g)[: len(toks)]
            ids[i, pos] = toks
        return ids, y

    xa, ya = task(2000, 1)
    xb, yb = task(1200, 5)
    model = _TinyEncoder(vocab, 48, length, 4)
    _pretrain(model, xa, ya, g, steps=250)
    model.head = nn.Linear(48, 4)
    if bug != "frozen_by_mistake":
        model.requires_grad_(False)
        model.head.requires_grad_(True)
    for blk in model.blocks:
        blk.inject_ia3()
    if bug == "frozen_by_mistake":  # bug: the freezing loop runs after the vectors were injected
        for n, p in model.named_parameters():
            if not n.startswith("head"):
                p.requires_grad = False
    params = [p for n, p in model.named_parameters() if "ia3_" in n or n.startswith("head")]
    optimizer = torch.optim.Adam(params, lr=3e-3)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.05)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    model.train()
    for _ in range(steps):
        b = torch.randint(0, 1000, (32,), generator=g)
        loss = criterion(model(xb[b]), yb[b])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        print("val acc", (model(xb[1000:]).argmax(1) == yb[1000:]).float().mean().item())
    hook.close()
    return losses


class LoRALinear(nn.Module):
    """y = W0 x + (alpha / r) B A x, W0 frozen, B initialized to zeros."""

    def __init__(self, base: nn.Linear, r: int = 8, alpha: float = 16.0) -> None:
        super().__init__()
        self.base = base
        self.lora_A = nn.Parameter(torch.randn(r, base.in_features) / math.sqrt(base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        self.scale = alpha / r

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.scale * (x @ self.lora_A.T) @ self.lora_B.T

    @torch.no_grad()
    def merge_and_reinit(self) -> None:
        self.base.weight += self.scale * self.lora_B @ self.lora_A
        self.lora_A.copy_(torch.randn_like(self.lora_A) / math.sqrt(self.lora_A.shape[1]))
        self.lora_B.zero_()


def lora_plus_regression(path: str, epochs: int = 30, seed: int = 0) -> list[float]:
    """LoRA+ on a frozen 16-128-128-3 regression MLP (SiLU) pretrained on one target map and
    adapted to a shifted one: rank-8 LoRA on every Linear; two AdamW parameter groups, the A
    matrices at 1e-3 and the B matrices at 16 times that (the LoRA+ ratio), weight decay 0.01;
    `SmoothL1Loss`, batch 64, `CosineAnnealingLR` per epoch."""
    g = _seed(seed)
    x = torch.randn(2200, 16, generator=g)
    wa = torch.randn(16, 3, generator=g) / 4
    wb = wa + 0.5 * torch.randn(16, 3, generator=g) / 4
    ya = torch.sin(2 * x @ wa) + 0.3 * (x[:, :3] ** 2)
    yb = torch.sin(2 * x @ wb) + 0.3 * (x[:, 3:6] ** 2) + 0.05 * torch.randn(2200, 3, generator=g)
    model = nn.Sequential(nn.Linear(16, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(), nn.Linear(128, 3))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for _ in range(400):
        b = torch.randint(0, 2200, (64,), generator=g)
        pre = F.mse_loss(model(x[b]), ya[b])
        opt.zero_grad()
        pre.backward()
        opt.step()
    model.requires_grad_(False)
    for i in (0, 2, 4):
        model[i] = LoRALinear(model[i])
    groups = [
        {"params": [p for n, p in model.named_parameters() if "lora_A" in n], "lr": 1e-3},
        {"params": [p for n, p in model.named_parameters() if "lora_B" in n], "lr": 16e-3},
    ]
    optimizer = torch.optim.AdamW(groups, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    criterion = nn.SmoothL1Loss(beta=0.5)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for _ in range(epochs):
        perm = torch.randperm(1800, generator=g)
        for i in range(0, 1800, 64):
            b = perm[i : i + 64]
            loss = criterion(model(x[b]), yb[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
    with torch.no_grad():
        print("val", criterion(model(x[1800:]), yb[1800:]).item())
    hook.close()
    return losses


def relora_char_lm(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """ReLoRA on a context-window language model (the previous 6 tokens embedded in 24
    dimensions, concatenated, a 144-192-192 GELU MLP, a 32-token softmax) on a Markov chain:
    80 full-rank warm-up steps with AdamW 3e-3, then the hidden Linears wrapped in rank-8 LoRA
    and every 80 steps the adapters merged into the base, re-initialized, the optimizer rebuilt
    (its state reset) and the lr warmed up again over 10 steps (the jagged schedule)."""
    g = _seed(seed)
    vocab, ctx = 32, 6
    seq = _markov(g, vocab, 400, 40)
    xs = torch.stack([seq[:, i : i + ctx] for i in range(40 - ctx)], 1).reshape(-1, ctx)
    ys = seq[:, ctx:].reshape(-1)
    model = nn.Sequential(
        nn.Embedding(vocab, 24), nn.Flatten(), nn.Linear(ctx * 24, 192), nn.GELU(), nn.Linear(192, 192), nn.GELU(),
        nn.Linear(192, vocab),
    )  # fmt: skip
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses: list[float] = []
    warm, cycle = 80, 80
    for step in range(steps):
        if step == warm:
            model.requires_grad_(False)
            for i in (2, 4):
                model[i] = LoRALinear(model[i], r=8, alpha=16)
            model[6].requires_grad_(True)
        if step >= warm and (step - warm) % cycle == 0:
            if step > warm:
                for i in (2, 4):
                    model[i].merge_and_reinit()
            optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
        if step >= warm:
            for group in optimizer.param_groups:
                group["lr"] = 3e-3 * min(1.0, ((step - warm) % cycle + 1) / 10)
        b = torch.randint(0, len(xs), (128,), generator=g)
        loss = criterion(model(xs[b]), ys[b])
        if bug != "no_zero_grad":  # bug: the hand-written loop forgets to clear the gradients
            optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ============================================================================= optimizers


class GaLoreAdam(torch.optim.Optimizer):
    """Adam whose moments live in a low-rank projection of each matrix's gradient (GaLore): the
    projector is the top-`rank` left singular vectors of the gradient, refreshed every `gap`
    steps; the normalized update is projected back and scaled by `alpha`. Vectors get Adam."""

    def __init__(
        self, params: Any, lr: float = 1e-3, rank: int = 8, gap: int = 50, alpha: float = 0.25
    ) -> None:
        super().__init__(params, {"lr": lr, "rank": rank, "gap": gap, "alpha": alpha, "betas": (0.9, 0.999)})

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad, state = p.grad, self.state[p]
                t = state["t"] = state.get("t", 0) + 1
                low_rank = p.ndim == 2 and min(p.shape) > group["rank"]
                if low_rank:
                    if (t - 1) % group["gap"] == 0:
                        u, _, _ = torch.linalg.svd(grad, full_matrices=False)
                        state["P"] = u[:, : group["rank"]].clone()
                    grad = state["P"].T @ grad
                if "m" not in state or state["m"].shape != grad.shape:
                    state["m"], state["v"] = torch.zeros_like(grad), torch.zeros_like(grad)
                m, v = state["m"], state["v"]
                m.mul_(b1).add_(grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
                update = (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + 1e-8)
                if low_rank:
                    update = group["alpha"] * (state["P"] @ update)
                p.add_(update, alpha=-group["lr"])


def galore_deep_mlp(path: str, epochs: int = 14, seed: int = 0, bug: str | None = None) -> list[float]:
    """GaLore training of a deep 20-96x5-6 ReLU MLP (six hidden Linears) on teacher labels:
    rank 8, the projector refreshed every 50 steps, scale 0.25, lr 1e-2 (GaLore's larger lr),
    batch 64, `CrossEntropyLoss`."""
    g = _seed(seed)
    x, y = _teacher_task(g, 2400, 20, 6)
    if bug == "deep_sigmoid":  # bug: eight Sigmoid layers, the activation of the old tutorials
        layers: list[nn.Module] = [nn.Linear(20, 96), nn.Sigmoid()]
        for _ in range(7):
            layers += [nn.Linear(96, 96), nn.Sigmoid()]
    else:
        layers = [nn.Linear(20, 96), nn.ReLU()]
        for _ in range(5):
            layers += [nn.Linear(96, 96), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(96, 6))
    optimizer = GaLoreAdam(model.parameters(), lr=1e-2, rank=8, gap=50, alpha=0.25)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for _ in range(epochs):
        perm = torch.randperm(2000, generator=g)
        for i in range(0, 2000, 64):
            b = perm[i : i + 64]
            loss = criterion(model(x[b]), y[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    with torch.no_grad():
        print("val acc", (model(x[2000:]).argmax(1) == y[2000:]).float().mean().item())
    hook.close()
    return losses


class ADOPT(torch.optim.Optimizer):
    """ADOPT (Taniguchi et al., 2024): v from the previous steps normalizes the gradient before
    the momentum (clipped at step^0.25), v is updated after; the first step only sets v."""

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.9999), eps: float = 1e-6,
                 weight_decay: float = 0.0) -> None:  # fmt: skip
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad, state = p.grad, self.state[p]
                if not state:
                    state["t"], state["v"], state["m"] = 0, grad * grad, torch.zeros_like(grad)
                    continue
                state["t"] += 1
                if group["weight_decay"]:
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                normed = grad / state["v"].sqrt().clamp_min(group["eps"])
                clip = state["t"] ** 0.25
                state["m"].mul_(b1).add_(normed.clamp(-clip, clip), alpha=1 - b1)
                p.add_(state["m"], alpha=-group["lr"])
                state["v"].mul_(b2).addcmul_(grad, grad, value=1 - b2)


def adopt_tabular_regression(
    path: str, epochs: int = 25, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A tabular regression (12 standardized features, a nonlinear target) by a 12-64-64-1 Tanh
    MLP under a hand-written ADOPT, lr 1e-3, decoupled weight decay 1e-4, batch 32, `MSELoss`,
    a held-out MSE each epoch."""
    g = _seed(seed)
    x = torch.randn(1600, 12, generator=g)
    y = (x[:, 0] * x[:, 1] + torch.sin(2 * x[:, 2]) + 0.5 * x[:, 3:6].sum(1) - 0.3 * x[:, 6] ** 2).unsqueeze(
        1
    )
    y = y + 0.1 * torch.randn(1600, 1, generator=g)
    y = (y - y[:1300].mean()) / y[:1300].std()
    model = nn.Sequential(nn.Linear(12, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
    lr = 1e-1 if bug == "lr_x100" else 1e-3  # bug: 1e-1 typed for 1e-3
    optimizer = ADOPT(model.parameters(), lr=lr, weight_decay=1e-4)
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(1300, generator=g)
        for i in range(0, 1300, 32):
            b = perm[i : i + 32]
            loss = criterion(model(x[b]), y[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 5 == 4:
            with torch.no_grad():
                print(f"epoch {epoch}: val mse {criterion(model(x[1300:]), y[1300:]).item():.4f}")
    hook.close()
    return losses


# ============================================================================= language models


class _QKNormBlock(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.q_norm, self.k_norm = nn.LayerNorm(self.hd), nn.LayerNorm(self.hd)
        self.proj = nn.Linear(d, d, bias=False)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (
            z.view(b, t, self.heads, self.hd).transpose(1, 2) for z in self.qkv(self.ln1(x)).chunk(3, -1)
        )
        q, k = self.q_norm(q), self.k_norm(k)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def zloss_qknorm_transformer_lm(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """A tiny decoder-only transformer (2 blocks, d 64, 4 heads, QK-norm, learned positions,
    tied embeddings initialized at std 0.02) on Markov-chain tokens, context 32: cross-entropy plus PaLM's z-loss
    1e-4 * logsumexp(logits)^2; AdamW 2e-3 betas (0.9, 0.95) weight decay 0.1, 30 warm-up
    steps then cosine to a tenth, clipping at 1.0, batch 32."""
    g = _seed(seed)
    vocab, length, d = 40, 32, 64
    data = _markov(g, vocab, 600, length + 1)

    class LM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(length, d) * 0.02)
            self.blocks = nn.ModuleList([_QKNormBlock(d, 4) for _ in range(2)])
            self.norm = nn.LayerNorm(d)
            nn.init.normal_(self.emb.weight, std=0.02)  # GPT-2's init of the tied embedding

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.emb(ids) + self.pos[: ids.shape[1]]
            for blk in self.blocks:
                x = blk(x)
            return self.norm(x) @ self.emb.weight.T

    model = LM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.95), weight_decay=0.1)

    def lr_at(step: int) -> float:
        if step < 30:
            return (step + 1) / 30
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - 30) / (steps - 30)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for _ in range(steps):
        b = torch.randint(0, 560, (32,), generator=g)
        logits = model(data[b, :-1])
        ce = F.cross_entropy(logits.reshape(-1, vocab), data[b, 1:].reshape(-1))
        z = torch.logsumexp(logits, -1).pow(2).mean()
        loss = ce + 1e-4 * z
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    hook.close()
    return losses


def simpo_gru_preference(path: str, steps: int = 250, seed: int = 0) -> list[float]:
    """SimPO after a short SFT: a GRU language model (embedding 32, hidden 64) first trained by
    next-token cross-entropy on sequences of two Markov chains mixed, then tuned on preference
    pairs (chosen from the first chain, rejected from the second, same first token) with the
    reference-free SimPO loss -logsigmoid(beta * (mean logp chosen - mean logp rejected) -
    gamma), beta 2.0, gamma 0.5; Adam 5e-4, batch 32."""
    g = _seed(seed)
    vocab, length = 24, 20
    good = _markov(g, vocab, 800, length)
    bad = _markov(g, vocab, 800, length)
    bad[:, 0] = good[:, 0]

    class GRULM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, 32)
            self.rnn = nn.GRU(32, 64, batch_first=True)
            self.out = nn.Linear(64, vocab)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.out(self.rnn(self.emb(ids))[0])

    model = GRULM()
    sft_opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    both = torch.cat([good, bad])
    for _ in range(150):
        b = torch.randint(0, len(both), (64,), generator=g)
        sft = F.cross_entropy(model(both[b, :-1]).reshape(-1, vocab), both[b, 1:].reshape(-1))
        sft_opt.zero_grad()
        sft.backward()
        sft_opt.step()

    def mean_logp(ids: torch.Tensor) -> torch.Tensor:
        logp = F.log_softmax(model(ids[:, :-1]), -1).gather(2, ids[:, 1:, None]).squeeze(2)
        return logp.mean(1)

    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for _ in range(steps):
        b = torch.randint(0, 700, (32,), generator=g)
        margin = 2.0 * (mean_logp(good[b]) - mean_logp(bad[b])) - 0.5
        loss = -F.logsigmoid(margin).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        print("held-out win rate", (mean_logp(good[700:]) > mean_logp(bad[700:])).float().mean().item())
    hook.close()
    return losses


# ============================================================================= generative


def min_snr_diffusion_2d(path: str, steps: int = 500, seed: int = 0, bug: str | None = None) -> list[float]:
    """DDPM epsilon-prediction on a 2-D ring of eight Gaussians: the improved cosine schedule
    (Nichol & Dhariwal) over 200 steps, betas clipped at 0.999; an MLP denoiser (2 + 1 inputs,
    three SiLU layers of 128) conditioned on the log-SNR of the step; the min-SNR-5 weighting
    min(SNR, 5) / SNR of the per-sample MSE; AdamW 1e-3, batch 256, an EMA of the weights kept
    for sampling."""
    g = _seed(seed)
    n_t = 200
    s = 0.008
    ts = torch.arange(n_t + 1, dtype=torch.float64) / n_t
    f = torch.cos((ts + s) / (1 + s) * math.pi / 2) ** 2
    betas = (1 - f[1:] / f[:-1]).float()
    if bug != "log_zero_nan":  # bug: the clipping left out, the last beta is 1
        betas = betas.clamp(max=0.999)
    alphas_cumprod = torch.cumprod(1 - betas, 0)
    log_snr = torch.log(alphas_cumprod) - torch.log(1 - alphas_cumprod)
    snr = alphas_cumprod / (1 - alphas_cumprod)
    angles = torch.randint(0, 8, (4000,), generator=g).float() * (2 * math.pi / 8)
    data = torch.stack([torch.cos(angles), torch.sin(angles)], 1) * 2 + 0.1 * torch.randn(
        4000, 2, generator=g
    )
    model = nn.Sequential(
        nn.Linear(3, 128),
        nn.SiLU(),
        nn.Linear(128, 128),
        nn.SiLU(),
        nn.Linear(128, 128),
        nn.SiLU(),
        nn.Linear(128, 2),
    )
    ema = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for _ in range(steps):
        x0 = data[torch.randint(0, 4000, (256,), generator=g)]
        t = torch.randint(0, n_t, (256,), generator=g)
        noise = torch.randn(256, 2, generator=g)
        ab = alphas_cumprod[t][:, None]
        xt = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
        pred = model(torch.cat([xt, log_snr[t][:, None] / 10], 1))
        weight = snr[t].clamp(max=5.0) / snr[t]
        loss = (weight * ((pred - noise) ** 2).mean(1)).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for e, p in zip(ema, model.parameters(), strict=True):
                e.lerp_(p, 0.01)
        losses.append(loss.item())
    hook.close()
    return losses


# ============================================================================= classifiers


class _LayerDropEncoder(nn.Module):
    def __init__(self, vocab: int, d: int, length: int, k: int, layerdrop: float, softmax_head: bool) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(length, d) * 0.02)
        self.layers = nn.ModuleList(
            [
                nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.1, batch_first=True, norm_first=True)
                for _ in range(4)
            ]
        )
        self.layerdrop = layerdrop
        self.norm = nn.LayerNorm(d)
        head: list[nn.Module] = [nn.Linear(d, k)]
        if softmax_head:  # bug: probabilities handed to CrossEntropyLoss
            head.append(nn.Softmax(-1))
        self.head = nn.Sequential(*head)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids) + self.pos
        for layer in self.layers:
            if self.training and torch.rand(()) < self.layerdrop:
                continue  # LayerDrop: the whole layer skipped for this batch
            x = layer(x)
        return self.head(self.norm(x[:, 0]))


def layerdrop_encoder_classifier(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """LayerDrop (p 0.2) in a four-layer pre-norm `nn.TransformerEncoder` stack (d 48, 4 heads)
    classifying token sequences of 16 by whether the pair (3, 7) appears in order and which of
    two marker tokens opens them (4 classes, read from a [CLS] position); AdamW 1e-3 with a
    linear warm-up of 40 steps then constant, batch 32, `CrossEntropyLoss`."""
    g = _seed(seed)
    vocab, length, n = 20, 16, 2400
    ids = torch.randint(8, vocab, (n, length), generator=g)
    marker = torch.randint(0, 2, (n,), generator=g)
    has = torch.randint(0, 2, (n,), generator=g)
    ids[:, 1] = 1 + marker
    for i in range(n):
        if has[i]:
            a = int(torch.randint(2, length - 1, (1,), generator=g))
            c = int(torch.randint(a + 1, length, (1,), generator=g))
            ids[i, a], ids[i, c] = 3, 7
    ids[:, 0] = 0
    y = 2 * marker + has
    model = _LayerDropEncoder(vocab, 48, length, 4, 0.2, softmax_head=bug == "softmax_before_ce")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 40))
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    model.train()
    for _ in range(steps):
        b = torch.randint(0, 2000, (32,), generator=g)
        loss = criterion(model(ids[b]), y[b])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        print("val acc", (model(ids[2000:]).argmax(1) == y[2000:]).float().mean().item())
    hook.close()
    return losses


def _shape_images(
    g: torch.Generator, n: int, k: int = 6, size: int = 16
) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 RGB images: each class a smooth random template in its own colour, shifted and noisy."""
    templates = F.avg_pool2d(torch.rand(k, 3, size + 4, size + 4, generator=g), 5, 1)  # k, 3, size, size
    templates = (templates - templates.mean((1, 2, 3), keepdim=True)) * 6
    y = torch.randint(0, k, (n,), generator=g)
    imgs = templates[y]
    shifts = torch.randint(-2, 3, (n, 2), generator=g)
    imgs = torch.stack(
        [torch.roll(im, (int(a), int(b)), (1, 2)) for im, (a, b) in zip(imgs, shifts, strict=True)]
    )
    imgs = 0.5 + 0.25 * imgs + 0.15 * torch.randn(imgs.shape, generator=g)
    return (imgs.clamp(0, 1) * 255).round().to(torch.uint8), y


class _ImageSet(Dataset):
    def __init__(self, imgs: torch.Tensor, y: torch.Tensor, scale: bool) -> None:
        self.imgs, self.y, self.scale = imgs, y, scale

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.imgs[i].float()
        if self.scale:
            x = (x / 255.0 - 0.5) / 0.25
        return x, self.y[i]


def polyloss_channels_last_cnn(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Poly-1 loss (cross-entropy + 1.0 * (1 - p_true)) on a small CNN (two Conv-BatchNorm-ReLU
    blocks with max pooling, global average pooling, Linear) run in `channels_last` memory
    format on 16x16 RGB uint8 images scaled to [0, 1] and normalized in the `Dataset`; SGD 0.05
    Nesterov momentum 0.9 weight decay 5e-4, `MultiStepLR` at epochs 5 and 7, batch 64."""
    g = _seed(seed)
    imgs, y = _shape_images(g, 1600)
    loader = DataLoader(
        _ImageSet(imgs[:1400], y[:1400], scale=bug != "inputs_x255"),  # bug: the / 255 left out
        batch_size=64, shuffle=True, generator=g,
    )  # fmt: skip
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 6),
    ).to(memory_format=torch.channels_last)  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[5, 7], gamma=0.1)

    def poly1(logits: torch.Tensor, target: torch.Tensor, epsilon: float = 1.0) -> torch.Tensor:
        pt = F.softmax(logits, -1).gather(1, target[:, None]).squeeze(1)
        return (F.cross_entropy(logits, target, reduction="none") + epsilon * (1 - pt)).mean()

    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for _ in range(epochs):
        model.train()
        for xb, yb in loader:
            xb = xb.contiguous(memory_format=torch.channels_last)
            loss = poly1(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
    model.eval()
    with torch.no_grad():
        xv = torch.stack([_ImageSet(imgs, y, bug != "inputs_x255")[i][0] for i in range(1400, 1600)])
        print(
            "val acc",
            (model(xv.contiguous(memory_format=torch.channels_last)).argmax(1) == y[1400:]).float().mean(),
        )
    hook.close()
    return losses


class _DeepSupervisedNet(nn.Module):
    def __init__(self, k: int) -> None:
        super().__init__()
        self.b1 = nn.Sequential(
            nn.Conv1d(1, 16, 7, padding=3), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(2)
        )
        self.b2 = nn.Sequential(
            nn.Conv1d(16, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(2)
        )
        self.b3 = nn.Sequential(nn.Conv1d(32, 64, 3, padding=1), nn.BatchNorm1d(64), nn.ReLU())
        self.aux1, self.aux2, self.head = nn.Linear(16, k), nn.Linear(32, k), nn.Linear(64, k)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h1 = self.b1(x)
        h2 = self.b2(h1)
        h3 = self.b3(h2)
        return self.head(h3.mean(2)), self.aux1(h1.mean(2)), self.aux2(h2.mean(2))


def deep_supervision_conv1d(
    path: str, epochs: int = 12, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Deep supervision of a 1-D CNN time-series classifier (three Conv-BatchNorm-ReLU blocks on
    series of 64 steps, 5 classes of waveform): auxiliary linear heads on the pooled features of
    blocks 1 and 2, the total loss main + w * (aux1 + aux2) with w decayed linearly from 0.4 to
    0 over training, one `CrossEntropyLoss`; RMSprop 1e-3, batch 50."""
    g = _seed(seed)
    n, length = 1500, 64
    t = torch.linspace(0, 1, length)
    y = torch.randint(0, 5, (n,), generator=g)
    freq = 2 + 2 * torch.rand(n, 1, generator=g)
    phase = 2 * math.pi * torch.rand(n, 1, generator=g)
    base = torch.sin(2 * math.pi * freq * t + phase)
    waves = torch.stack(
        [base, torch.sign(base), 2 * ((freq * t + phase / 6.28) % 1) - 1, base * t * 2, base.abs() * 2 - 1], 1
    )
    x = waves[torch.arange(n), y] + 0.3 * torch.randn(n, length, generator=g)
    x = x.unsqueeze(1)
    model = _DeepSupervisedNet(5)
    if bug == "dead_relu_init":  # bug: a custom init with the biases at -1 and tiny weights

        def init_weights(m: nn.Module) -> None:
            if isinstance(m, (nn.Conv1d, nn.Linear)):
                nn.init.normal_(m.weight, std=0.01)
                nn.init.constant_(m.bias, -1.0)
            if isinstance(m, nn.BatchNorm1d):
                nn.init.constant_(m.bias, -1.0)

        model.apply(init_weights)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    total = epochs * (1300 // 50)
    step = 0
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(1300, generator=g)
        for i in range(0, 1300, 50):
            b = perm[i : i + 50]
            main, a1, a2 = model(x[b])
            w = 0.4 * (1 - step / total)
            loss = criterion(main, y[b]) + w * (criterion(a1, y[b]) + criterion(a2, y[b]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            step += 1
    model.eval()
    with torch.no_grad():
        print("val acc", (model(x[1300:])[0].argmax(1) == y[1300:]).float().mean().item())
    hook.close()
    return losses


# ============================================================================= Lightning


def lit_lora_frozen_encoder(path: str, max_epochs: int = 8, seed: int = 0) -> list[float]:
    """LoRA in Lightning: a 28-128-128 GELU encoder pretrained on one teacher task, frozen and
    wrapped with rank-8 `LoRALinear`s, a new 7-class head; `configure_optimizers` returns AdamW
    2e-3 over `filter(lambda p: p.requires_grad, ...)` with a `OneCycleLR` stepped per batch
    (`"interval": "step"`), batch 64, a validation loss each epoch."""
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    xa, ya = _teacher_task(torch.Generator().manual_seed(seed + 13), 3000, 28, 7)
    xb, yb = _teacher_task(torch.Generator().manual_seed(seed + 13), 1600, 28, 7, shift=0.5)
    encoder = nn.Sequential(nn.Linear(28, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU())
    _pretrain(nn.Sequential(encoder, nn.Linear(128, 7)), xa, ya, g)
    encoder.requires_grad_(False)
    encoder[0], encoder[2] = LoRALinear(encoder[0]), LoRALinear(encoder[2])
    train = DataLoader(TensorDataset(xb[:1344], yb[:1344]), batch_size=64, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(xb[1344:], yb[1344:]), batch_size=128)

    class LoRAClassifier(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder
            self.head = nn.Linear(128, 7)
            self.loss_fn = nn.CrossEntropyLoss()

        def forward(self, v: torch.Tensor) -> torch.Tensor:
            return self.head(self.encoder(v))

        def training_step(self, batch: Any, idx: int) -> torch.Tensor:
            v, t = batch
            loss = self.loss_fn(self(v), t)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, idx: int) -> None:
            v, t = batch
            self.log("val_loss", self.loss_fn(self(v), t))

        def configure_optimizers(self) -> Any:
            opt = torch.optim.AdamW(filter(lambda p: p.requires_grad, self.parameters()), lr=2e-3)
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=max_epochs * len(train))
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    history = LossHistory()
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=path, logger=False, max_epochs=max_epochs, callbacks=[DebuggerCallback(path), history],
    )  # fmt: skip
    trainer.fit(LoRAClassifier(), train, val)
    print("val_loss", float(trainer.callback_metrics.get("val_loss", float("nan"))))
    return history.losses


# ============================================================================= Hugging Face


class _Examples(Dataset):
    """A list of feature dicts, as `datasets.Dataset` hands them to the Trainer."""

    def __init__(self, **columns: Any) -> None:
        self.columns = columns
        self.n = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: v[i] for k, v in self.columns.items()}


def hf_llama_checkpointing_min_lr(path: str, seed: int = 0) -> list[float]:
    """Causal language modelling with the Hugging Face `Trainer` on a tiny random
    `LlamaForCausalLM` (2 layers, hidden 64, 4 heads, 2 key-value heads, no download) on
    Markov-chain token sequences of 32: `gradient_checkpointing=True`, lr 3e-3,
    `lr_scheduler_type="cosine_with_min_lr"` with `min_lr_rate=0.1` and 8 warm-up steps (5%), batch 16,
    3 epochs, weight decay 0.1, `max_grad_norm=1.0`, an evaluation per epoch."""
    from transformers import LlamaConfig, LlamaForCausalLM, PrinterCallback, Trainer, TrainingArguments

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    ids = _markov(g, 64, 1000, 32)
    config = LlamaConfig(
        vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    args = TrainingArguments(
        output_dir=os.path.join(path, "trainer"), logging_steps=1, report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=seed, save_strategy="no", eval_strategy="epoch", learning_rate=3e-3,
        lr_scheduler_type="cosine_with_min_lr", lr_scheduler_kwargs={"min_lr_rate": 0.1}, warmup_steps=8,
        per_device_train_batch_size=16, num_train_epochs=3, weight_decay=0.1, max_grad_norm=1.0,
        gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False},
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args,
        train_dataset=_Examples(input_ids=ids[:880], labels=ids[:880]),
        eval_dataset=_Examples(input_ids=ids[880:], labels=ids[880:]),
        callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(args.output_dir, ignore_errors=True)
    print("eval losses", [round(e["eval_loss"], 4) for e in trainer.state.log_history if "eval_loss" in e])
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


# ============================================================================= Keras


def keras_conv1d_lion_cosine(path: str, seed: int = 0) -> list[float]:
    """A Keras 3 Conv1D sequence classifier (three waveform classes amid noise, 48 steps):
    `Sequential([Input((48, 1)), Conv1D(16, 5, relu), MaxPooling1D, Conv1D(32, 3, relu),
    GlobalAveragePooling1D, Dense(3)])`, `keras.optimizers.Lion` with a `CosineDecay` from 0
    warmed up to 1e-3 over 40 steps, weight decay 0.01, sparse categorical cross-entropy on
    logits, batch 32, 10 epochs, `validation_split=0.2`."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 3)
    n, length = 1500, 48
    t = np.linspace(0, 1, length, dtype="float32")
    y = rng.integers(0, 3, n)
    f = rng.uniform(2, 4, (n, 1)).astype("float32")
    ph = rng.uniform(0, 6.28, (n, 1)).astype("float32")
    s = np.sin(2 * np.pi * f * t + ph)
    waves = np.stack([s, np.sign(s), np.abs(s) * 2 - 1], 1)
    x = (waves[np.arange(n), y] + rng.normal(0, 0.4, (n, length))).astype("float32")[:, :, None]
    model = keras.Sequential(
        [
            keras.Input((length, 1)),
            layers.Conv1D(16, 5, activation="relu"),
            layers.MaxPooling1D(2),
            layers.Conv1D(32, 3, activation="relu"),
            layers.GlobalAveragePooling1D(),
            layers.Dense(3),
        ]
    )
    steps = 10 * math.ceil(1200 / 32)
    schedule = keras.optimizers.schedules.CosineDecay(0.0, steps - 40, warmup_target=1e-3, warmup_steps=40)
    model.compile(
        optimizer=keras.optimizers.Lion(learning_rate=schedule, weight_decay=0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )

    class BatchLosses(keras.callbacks.Callback):
        """Each batch's own loss from Keras's running epoch mean."""

        def __init__(self) -> None:
            super().__init__()
            self.losses: list[float] = []
            self.prev = 0.0

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.prev = 0.0

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            mean = float(logs["loss"])
            self.losses.append((batch + 1) * mean - batch * self.prev)
            self.prev = mean

    history = BatchLosses()
    fit = model.fit(
        x, y, batch_size=32, epochs=10, validation_split=0.2, verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    print("val loss", [round(v, 4) for v in fit.history["val_loss"]])
    return history.losses


_dora = healthy("dora_weight_decomposed_adapters_mlp", "DoRA fine-tuning", dora_finetune_mlp)
_bitfit = healthy("bitfit_bias_only_layernorm_mlp", "BitFit bias-only fine-tuning", bitfit_bias_only)
_ia3 = healthy("ia3_rescaling_vectors_tiny_transformer", "(IA)^3 fine-tuning", ia3_tiny_transformer)
_relora = healthy("relora_merge_restart_context_lm", "ReLoRA merge-and-restart", relora_char_lm)
_galore = healthy("galore_projected_adam_deep_mlp", "GaLore low-rank gradient projection", galore_deep_mlp)
_adopt = healthy("adopt_optimizer_tabular_regression", "ADOPT optimizer by hand", adopt_tabular_regression)
_diff = healthy("min_snr_weighted_ddpm_2d_logsnr", "min-SNR weighted diffusion", min_snr_diffusion_2d)
_ldrop = healthy(
    "layerdrop_prenorm_encoder_classifier", "LayerDrop transformer classifier", layerdrop_encoder_classifier
)
_poly = healthy("poly1_loss_channels_last_cnn", "PolyLoss channels_last CNN", polyloss_channels_last_cnn)
_deepsup = healthy(
    "deep_supervision_aux_heads_conv1d", "deep supervision auxiliary heads", deep_supervision_conv1d
)

PIPELINES: list[Any] = [
    _dora,
    _bitfit,
    _ia3,
    healthy("lora_plus_two_lr_groups_regression", "LoRA+ B/A learning-rate ratio", lora_plus_regression),
    _relora,
    _galore,
    healthy("zloss_qk_norm_decoder_lm", "z-loss with QK-norm language model", zloss_qknorm_transformer_lm),
    _adopt,
    healthy("simpo_gru_preference_after_sft", "SimPO preference optimization", simpo_gru_preference),
    _diff,
    _ldrop,
    _poly,
    _deepsup,
    buggy(_adopt, "lr_x100"),
    buggy(_relora, "no_zero_grad"),
    buggy(_bitfit, "shuffled_labels"),
    buggy(_poly, "inputs_x255"),
    buggy(_ldrop, "softmax_before_ce"),
    buggy(_deepsup, "dead_relu_init"),
    buggy(_galore, "deep_sigmoid"),
    buggy(_ia3, "frozen_by_mistake"),
    buggy(_diff, "log_zero_nan"),
    buggy(_dora, "train_in_eval_mode"),
]  # fmt: skip

if installed("lightning"):
    PIPELINES += [
        healthy(
            "lightning_lora_frozen_encoder_onecycle", "Lightning LoRA fine-tuning", lit_lora_frozen_encoder
        )
    ]

if installed("transformers"):
    PIPELINES += [
        healthy(
            "hf_llama_gradient_checkpointing_cosine_min_lr",
            "HF Trainer tiny Llama causal LM",
            hf_llama_checkpointing_min_lr,
        )
    ]

if installed("keras", "tensorflow"):
    PIPELINES += [
        healthy("keras_conv1d_lion_warmup_cosine", "Keras Lion Conv1D classifier", keras_conv1d_lion_cosine)
    ]
