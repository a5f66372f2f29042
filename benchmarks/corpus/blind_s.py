"""The twelfth blind held-out set (issue 26), part S: small trainings of kinds the corpus did
not have yet, chosen among what practitioners train in 2024-2026, plain PyTorch loops with the
README's two lines (`register_loss` where the script has a loss module) and trainings through
tools with their one callback or hook. Data generated in-process, fixed seeds, one CPU thread.

Plain PyTorch: QLoRA (a tiny GPT pre-trained in the script, its projections quantized to 4-bit
NormalFloat with blockwise absmax and frozen, LoRA adapters on all of them, the QLoRA recipe of
a constant schedule, clipping at 0.3 and two micro-batches), ORPO preference alignment (the NLL
of the chosen answer plus an odds-ratio term through `log1mexp`, no reference model, warm-up
then inverse-square-root decay), a diffusion transformer (DiT blocks with adaLN-Zero) trained
with v-prediction on a zero-terminal-SNR schedule, Min-SNR-gamma weighting, log-SNR
conditioning, classifier-free-guidance label dropout and an EMA copy, a Differential
Transformer (the difference of two softmax attention maps with a re-parameterised lambda, a
per-head RMSNorm) on retrieval amid distractors with noisy labels on the warmup-stable-decay
(WSD) schedule, a TopK sparse autoencoder on activations in superposition (unit-norm decoder
rows with their gradient projected, the AuxK loss for dead latents), GRPO (group-standardised
rewards, a clipped surrogate, the k3 KL to a frozen reference; a loss near zero while the
reward rises) on two-digit addition, a DeepSeekMoE-style layer (a shared expert, fine-grained
routed experts on sigmoid affinities, auxiliary-loss-free balancing by a bias nudged outside
the gradient, a tiny sequence-wise balance loss), an xLSTM of mLSTM blocks (matrix memory,
exponential gating with a max stabiliser) as a language model, nGPT (every matrix
re-normalised onto the hypersphere after each Adam step, eigen learning rates, a learned logit
scale, no weight decay nor warm-up), and a vision transformer with register tokens and
LayerScale evaluated with test-time augmentation.

Through tools: Keras 3 (`mldbg.keras.Hook`): FNet text classification (a 2-D Fourier transform
in place of attention through `keras.ops.fft2`) on AdamW with a warm-up `CosineDecay`.
Lightning (`mldbg.lightning.DebuggerCallback`): a speculative-decoding draft model distilled
from a frozen target held inside the module (DistillSpec: the total variation distance on the
target's own samples, the acceptance rate as the validation metric); TabM-mini, an implicit
ensemble of eight members sharing one MLP (random-sign input adapters, per-member heads, the
mean of the members' losses). Hugging Face `Trainer` (`mldbg.transformers.DebuggerCallback`, a
tiny random config): ModernBERT masked-LM pre-training with 30 % masking on
`lr_scheduler_type="warmup_stable_decay"`. JAX (`mldbg.jax.Hook`): a Soft MoE classifier in
Flax NNX (dispatch and combine softmaxes over tokens and slots) on `optax.contrib.ademamix`.
XGBoost (`mldbg.xgboost.Hook`): `reg:logistic` on fractional click-through rates weighted by
impressions.

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: QLoRA's adapters at 1e-1 typed for 1e-3 (lr_x100), the xLSTM without
`optimizer.zero_grad()` (no_zero_grad), the DeepSeekMoE topics read from a copy of the table
sorted another way (shuffled_labels), the ViT's uint8 images cast to float and normalized without
the division by 255 (inputs_x255), the Lightning TabM's `forward` returning the members'
probabilities "since the prediction averages them" to `F.cross_entropy` (softmax_before_ce), the
Keras FNet's feed-forward ReLU layers built with `bias_initializer=Constant(-2.0)` "to keep them
sparse" (dead_relu_init), the GRPO policy's trunk as eight sigmoid layers (deep_sigmoid), ORPO's
token embedding frozen by a line left from an SFT configuration after the optimizer was built
(frozen_by_mistake), the DiT's log-SNR taken straight from the zero-terminal-SNR schedule, whose
last step has alpha-bar 0 (log_zero_nan), the Differential Transformer never put back in training
mode after its first validation pass (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND11`.
"""

from __future__ import annotations

import copy
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

from . import BLIND11, buggy, healthy, installed

SPLIT = BLIND11

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 47)


def _markov_tokens(
    g: torch.Generator, n: int, length: int, vocab: int, proto_seed: int = 71, drift: float = 0.0
) -> torch.Tensor:
    """(n, length) token sequences from a random second-order Markov chain over `vocab` tokens:
    strong bigram preferences (each token allows a few likely successors) refined by the token
    before, a small language with real structure. `drift` perturbs the chain's logits (a related
    "dialect" of the same language)."""
    pg = torch.Generator().manual_seed(proto_seed)
    bigram = 3.0 * torch.randn(1, vocab, vocab, generator=pg)
    logits = bigram + 1.5 * torch.randn(vocab, vocab, vocab, generator=pg)
    if drift:
        logits = logits + drift * torch.randn(
            vocab, vocab, vocab, generator=torch.Generator().manual_seed(proto_seed + 1)
        )
    probs = torch.softmax(logits, -1)
    seqs = torch.zeros(n, length, dtype=torch.long)
    seqs[:, 0] = torch.randint(0, vocab, (n,), generator=g)
    seqs[:, 1] = torch.randint(0, vocab, (n,), generator=g)
    for t in range(2, length):
        seqs[:, t] = torch.multinomial(probs[seqs[:, t - 2], seqs[:, t - 1]], 1, generator=g).squeeze(1)
    return seqs


def _shape_images(
    g: torch.Generator, n: int, size: int = 16, classes: int = 6, proto_seed: int = 611
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 3, size, size) uint8 images: each class a smooth random silhouette of its own colour,
    shifted a few pixels, on a noisy grey background; and the labels."""
    pg = torch.Generator().manual_seed(proto_seed)
    shapes = F.avg_pool2d(torch.rand(classes, 1, size, size, generator=pg), 5, 1, 2)
    cut = shapes.flatten(1).quantile(0.6, dim=1).view(classes, 1, 1, 1)
    shapes = ((shapes - cut) * 30).sigmoid()
    colour = 0.25 + 0.75 * torch.rand(classes, 3, 1, 1, generator=pg)
    y = torch.randint(0, classes, (n,), generator=g)
    shift = torch.randint(-2, 3, (n, 2), generator=g)
    obj = torch.stack(
        [torch.roll(shapes[c], (int(a), int(b)), (1, 2)) for c, (a, b) in zip(y, shift, strict=True)]
    )
    grey = 0.5 * torch.rand(n, 1, 1, 1, generator=g)
    x = grey * (1 - obj) + obj * colour[y] + 0.3 * torch.randn(n, 3, size, size, generator=g)
    return (x.clamp(0, 1) * 255).round().to(torch.uint8), y


class _RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class _CausalBlock(nn.Module):
    """A pre-LN GPT block: causal multi-head attention and a GELU MLP, plain `nn.Linear`s."""

    def __init__(self, d: int, heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.ln1(x)
        q, k, v = (p(h).view(b, t, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.o(a.transpose(1, 2).reshape(b, t, d)))
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))


class _TinyGPT(nn.Module):
    def __init__(self, vocab: int, d: int = 64, layers: int = 2, heads: int = 4, ctx: int = 64) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList([_CausalBlock(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def _pretrain_lm(
    model: nn.Module, data: torch.Tensor, steps: int, g: torch.Generator, lr: float = 3e-3
) -> None:
    """The "pre-trained checkpoint": next-token training, not recorded."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    for _ in range(steps):
        xb = data[torch.randint(0, len(data), (32,), generator=g)]
        loss = F.cross_entropy(model(xb[:, :-1]).flatten(0, 1), xb[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()


# ============================================================================= plain PyTorch

# the 16 levels of the 4-bit NormalFloat data type (Dettmers et al. 2023)
_NF4 = torch.tensor(
    [-1.0, -0.6961928, -0.5250731, -0.3949175, -0.2844414, -0.1847734, -0.0910500, 0.0,
     0.0795803, 0.1609302, 0.2461123, 0.3379152, 0.4407098, 0.5626170, 0.7229568, 1.0]
)  # fmt: skip


class _LoraNF4Linear(nn.Module):
    """A frozen base weight stored as 4-bit NF4 codes with one absmax per block of 64 values,
    dequantized on the fly, plus a trainable LoRA pair: y = W_nf4 x + b + (alpha / r) B A drop(x),
    A Kaiming-uniform, B zero."""

    def __init__(
        self, base: nn.Linear, r: int = 8, alpha: int = 16, dropout: float = 0.05, block: int = 64
    ) -> None:
        super().__init__()
        w = base.weight.detach()
        self.shape = w.shape
        flat = w.flatten().view(-1, block)
        absmax = flat.abs().amax(1, keepdim=True)
        codes = ((flat / absmax).unsqueeze(-1) - _NF4).abs().argmin(-1).to(torch.uint8)
        self.register_buffer("codes", codes)
        self.register_buffer("absmax", absmax)
        self.register_buffer("bias", base.bias.detach().clone() if base.bias is not None else None)
        self.lora_A = nn.Parameter(torch.empty(r, w.shape[1]))
        self.lora_B = nn.Parameter(torch.zeros(w.shape[0], r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = alpha / r
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = (_NF4[self.codes.long()] * self.absmax).view(self.shape)
        return F.linear(x, w, self.bias) + self.scaling * (self.drop(x) @ self.lora_A.T @ self.lora_B.T)


def qlora_nf4_lm_adaptation(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """QLoRA (Dettmers et al. 2023) on a tiny GPT: a model pre-trained on one Markov "language"
    (not recorded) has every attention and MLP projection quantized to 4-bit NormalFloat (block
    size 64, absmax scaling) and frozen, with LoRA adapters (r 8, alpha 16, dropout 0.05) on all
    of them; fine-tuned on a shifted "dialect" with the QLoRA recipe (AdamW on a constant schedule
    after a 3 % warm-up; lr 1e-3, the upper end used for small models; `max_grad_norm` 0.3; batch
    16 as two micro-batches of 8)."""
    g = _seed(seed)
    vocab, length = 32, 33
    base_data = _markov_tokens(g, 4000, length, vocab, proto_seed=71)
    target_data = _markov_tokens(g, 4000, length, vocab, proto_seed=71, drift=1.5)
    model = _TinyGPT(vocab, d=64, layers=2, heads=4, ctx=length)
    _pretrain_lm(model, base_data, 400, g)
    for p in model.parameters():
        p.requires_grad_(False)
    for block in model.blocks:
        for name in ("q", "k", "v", "o", "fc1", "fc2"):
            setattr(block, name, _LoraNF4Linear(getattr(block, name)))
    trainable = [p for n, p in model.named_parameters() if "lora_" in n]
    lr = 1e-1 if bug == "lr_x100" else 1e-3  # bug: 1e-1 typed for 1e-3
    opt = torch.optim.AdamW(trainable, lr=lr, weight_decay=0.0)
    warmup = max(1, int(0.03 * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    model.train()
    for step in range(steps):
        opt.zero_grad()
        total = 0.0
        for _ in range(2):
            xb = target_data[torch.randint(0, 3500, (8,), generator=g)]
            loss = F.cross_entropy(model(xb[:, :-1]).flatten(0, 1), xb[:, 1:].flatten()) / 2
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(trainable, 0.3)
        opt.step()
        sched.step()
        losses.append(total)
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                xv = target_data[3500:]
                val = F.cross_entropy(model(xv[:, :-1]).flatten(0, 1), xv[:, 1:].flatten()).item()
            model.train()
            print(f"step {step + 1}: loss {total:.4f} val {val:.4f}")
    hook.close()
    return losses


def orpo_sorting_preferences(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """ORPO (Hong et al. 2024), preference alignment with no reference model: a tiny GPT reads a
    prompt of six tokens and a separator and answers; each prompt has a chosen answer (the tokens
    sorted) and a rejected near miss (sorted with two neighbours swapped, or one token wrong).
    The loss is the chosen answer's NLL plus lambda = 0.1 times -log sigmoid of the log odds
    ratio, log odds(y) = log p - log(1 - p) with p the answer's mean per-token likelihood
    (computed as `log1mexp`); AdamW 1e-3, a linear warm-up of 40 steps then inverse-square-root
    decay, batch 32, clipping at 1.0."""
    g = _seed(seed)
    sep, n = 1, 5000
    prompts = torch.randint(3, 24, (n, 6), generator=g)
    chosen = prompts.sort(1).values
    rejected = chosen.clone()
    pos = torch.randint(0, 5, (n,), generator=g)
    swap = torch.rand(n, generator=g) < 0.5
    rows = torch.arange(n)
    a, b = rejected[rows, pos].clone(), rejected[rows, pos + 1].clone()
    rejected[rows, pos] = torch.where(swap, b, a)
    rejected[rows, pos + 1] = torch.where(swap, a, torch.randint(3, 24, (n,), generator=g))
    same = (rejected == chosen).all(1)  # a swap of equal tokens: make it a wrong token instead
    rejected[same, 5] = 3 + (chosen[same, 5] - 3 + 1) % 21
    sep_col = torch.full((n, 1), sep)
    seq_c = torch.cat([prompts, sep_col, chosen], 1)
    seq_r = torch.cat([prompts, sep_col, rejected], 1)
    model = _TinyGPT(24, d=64, layers=2, heads=4, ctx=13)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.01)
    if bug == "frozen_by_mistake":  # left from the SFT config that kept the embeddings frozen
        model.tok.weight.requires_grad_(False)
    warmup = 40
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warmup if s < warmup else math.sqrt(warmup / (s + 1))
    )

    def answer_logp(seq: torch.Tensor) -> torch.Tensor:
        logits = model(seq[:, :-1])[:, 6:]  # the predictions of the answer's six tokens
        logp = torch.log_softmax(logits, -1).gather(-1, seq[:, 7:, None]).squeeze(-1)
        return logp.mean(1)

    def log1mexp(x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > -0.693, torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))

    hook = Hook(path)
    hook.register_module(model)
    losses = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, 4500, (32,), generator=g)
        lp_c, lp_r = answer_logp(seq_c[idx]), answer_logp(seq_r[idx])
        nll = -lp_c.mean()
        log_odds = (lp_c - log1mexp(lp_c)) - (lp_r - log1mexp(lp_r))
        ratio_loss = -F.logsigmoid(log_odds).mean()
        loss = nll + 0.1 * ratio_loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                win = (answer_logp(seq_c[4500:]) > answer_logp(seq_r[4500:])).float().mean().item()
            model.train()
            print(f"step {step + 1}: loss {loss.item():.4f} nll {nll.item():.4f} pref acc {win:.3f}")
    hook.close()
    return losses


def _glyphs(
    g: torch.Generator, n: int, classes: int = 4, size: int = 8, proto_seed: int = 81
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 1, size, size) glyphs in [-1, 1]: each class a blurred random binary stroke pattern,
    shifted by one pixel at most, with a little noise; and the labels."""
    pg = torch.Generator().manual_seed(proto_seed)
    protos = (F.avg_pool2d(torch.rand(classes, 1, size, size, generator=pg), 3, 1, 1) > 0.5).float()
    y = torch.randint(0, classes, (n,), generator=g)
    shift = torch.randint(-1, 2, (n, 2), generator=g)
    x = torch.stack(
        [torch.roll(protos[c], (int(a), int(b)), (1, 2)) for c, (a, b) in zip(y, shift, strict=True)]
    )
    x = F.avg_pool2d(F.pad(x, (1, 1, 1, 1), mode="replicate"), 3, 1) + 0.05 * torch.randn(
        n, 1, size, size, generator=g
    )
    return (2 * x - 1).clamp(-1, 1), y


class _DiTBlock(nn.Module):
    """A DiT block with adaLN-Zero: shift, scale and gate of both sub-layers regressed from the
    conditioning vector by a zero-initialised linear layer, so every block starts as the identity."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.norm2 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))
        nn.init.zeros_(self.ada[1].weight)
        nn.init.zeros_(self.ada[1].bias)

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        s1, sc1, g1, s2, sc2, g2 = self.ada(c).unsqueeze(1).chunk(6, -1)
        h = self.norm1(x) * (1 + sc1) + s1
        x = x + g1 * self.attn(h, h, h, need_weights=False)[0]
        return x + g2 * self.mlp(self.norm2(x) * (1 + sc2) + s2)


def dit_vpred_zero_snr_min_snr(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A class-conditional diffusion transformer (DiT, Peebles & Xie 2023: patch size 2,
    adaLN-Zero blocks, a zero-initialised final layer) on 8x8 glyphs, trained the way recent
    diffusion fine-tuning scripts train: the scaled-linear beta schedule rescaled to zero terminal
    SNR (Lin et al. 2024), v-prediction, Min-SNR-gamma loss weighting (gamma 5, min(SNR, 5) /
    (SNR + 1) for v), the network conditioned on the log-SNR (Fourier features), 10 % of labels
    dropped to a null class for classifier-free guidance; AdamW 3e-4 without weight decay,
    clipping at 1, batch 64, an EMA copy (0.999) for evaluation."""
    g = _seed(seed)
    x_all, y_all = _glyphs(g, 4000)
    T = 1000
    betas = torch.linspace(0.00085**0.5, 0.012**0.5, T, dtype=torch.float64) ** 2
    sqrt_ab = torch.cumprod(1 - betas, 0).sqrt()
    first, last = sqrt_ab[0].clone(), sqrt_ab[-1].clone()
    sqrt_ab = (sqrt_ab - last) * first / (first - last)  # zero terminal SNR
    alpha_bar = (sqrt_ab**2).float()

    class DiT(nn.Module):
        def __init__(self, d: int = 64, depth: int = 3, heads: int = 4, classes: int = 4) -> None:
            super().__init__()
            self.patch = nn.Conv2d(1, d, 2, 2)
            self.pos = nn.Parameter(0.02 * torch.randn(1, 16, d))
            self.register_buffer("freqs", torch.exp(torch.linspace(0, math.log(100), d // 2)))
            self.t_mlp = nn.Sequential(nn.Linear(d, d), nn.SiLU(), nn.Linear(d, d))
            self.y_emb = nn.Embedding(classes + 1, d)  # the last one is the null class
            self.blocks = nn.ModuleList([_DiTBlock(d, heads) for _ in range(depth)])
            self.norm = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
            self.ada = nn.Sequential(nn.SiLU(), nn.Linear(d, 2 * d))
            self.out = nn.Linear(d, 4)
            for m in (self.ada[1], self.out):
                nn.init.zeros_(m.weight)
                nn.init.zeros_(m.bias)

        def forward(self, x: torch.Tensor, log_snr: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            h = self.patch(x).flatten(2).transpose(1, 2) + self.pos
            arg = log_snr[:, None] / 8 * self.freqs
            c = self.t_mlp(torch.cat([arg.sin(), arg.cos()], -1)) + self.y_emb(y)
            for block in self.blocks:
                h = block(h, c)
            shift, scale = self.ada(c).unsqueeze(1).chunk(2, -1)
            h = self.out(self.norm(h) * (1 + scale) + shift)  # (b, 16, 4) patches of 2x2
            return h.view(-1, 4, 4, 2, 2).permute(0, 1, 3, 2, 4).reshape(-1, 1, 8, 8)

    model = DiT()
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)
    hook = Hook(path)
    hook.register_module(model)
    losses = []

    def diffusion_loss(net: nn.Module, x0: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        t = torch.randint(0, T, (len(x0),), generator=g)
        ab = alpha_bar[t]
        if bug == "log_zero_nan":  # log-SNR straight from the schedule, whose last step is 0
            log_snr = torch.log(ab / (1 - ab))
        else:
            log_snr = torch.log(ab.clamp(min=1e-10)) - torch.log1p(-ab)
        noise = torch.randn(x0.shape, generator=g)
        a, s = ab.sqrt().view(-1, 1, 1, 1), (1 - ab).sqrt().view(-1, 1, 1, 1)
        v_target = a * noise - s * x0
        snr = ab / (1 - ab)
        weight = snr.clamp(max=5.0) / (snr + 1)
        mse = (net(a * x0 + s * noise, log_snr, y) - v_target).pow(2).mean((1, 2, 3))
        return (weight * mse).mean()

    model.train()
    for step in range(steps):
        idx = torch.randint(0, 3500, (64,), generator=g)
        y = torch.where(torch.rand(64, generator=g) < 0.1, torch.full((64,), 4), y_all[idx])
        loss = diffusion_loss(model, x_all[idx], y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), model.parameters(), strict=True):
                pe.lerp_(pm, 0.001)
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                val = diffusion_loss(ema, x_all[3500:], y_all[3500:]).item()
            print(f"step {step + 1}: loss {loss.item():.4f} ema val {val:.4f}")
    hook.close()
    return losses


class _DiffAttention(nn.Module):
    """Differential attention (Ye et al. 2024): the difference of two softmax attention maps,
    lambda re-parameterised as exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init, each head's output
    RMS-normalised and scaled by (1 - lambda_init)."""

    def __init__(self, d: int, heads: int, layer: int) -> None:
        super().__init__()
        self.heads, self.hd = heads, d // heads // 2
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * layer)
        self.lq1, self.lk1, self.lq2, self.lk2 = (nn.Parameter(0.1 * torch.randn(self.hd)) for _ in range(4))
        self.sub_norm = _RMSNorm(2 * self.hd, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, -1)
        q = q.view(b, t, 2 * self.heads, self.hd).transpose(1, 2)
        k = k.view(b, t, 2 * self.heads, self.hd).transpose(1, 2)
        v = v.view(b, t, self.heads, 2 * self.hd).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.hd), -1).view(b, self.heads, 2, t, t)
        lam = (
            torch.exp((self.lq1 * self.lk1).sum()) - torch.exp((self.lq2 * self.lk2).sum()) + self.lambda_init
        )
        out = (att[:, :, 0] - lam * att[:, :, 1]) @ v
        out = self.sub_norm(out) * (1 - self.lambda_init)
        return self.o(out.transpose(1, 2).reshape(b, t, d))


def diff_transformer_wsd_retrieval(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Differential Transformer encoder (two layers, RMSNorm pre-norm, SwiGLU, dropout 0.1, a
    [CLS] token) on a retrieval task amid distractors: 32 tokens, a key token appears once and
    the label is the value written just after it (8 classes), other tokens random, 10 % of the
    training labels replaced at random (annotation noise); AdamW
    betas (0.9, 0.95) with weight decay 0.1 on matrices only, the warmup-stable-decay (WSD)
    schedule (5 % linear warm-up, a constant stretch, the last 20 % decayed linearly to zero),
    batch 48, a validation pass every 75 steps."""
    g = _seed(seed)
    n, length, vocab, key = 6000, 24, 40, 1
    tokens = torch.randint(10, vocab, (n, length), generator=g)
    where = torch.randint(1, length - 1, (n,), generator=g)
    labels = torch.randint(0, 8, (n,), generator=g)
    rows = torch.arange(n)
    tokens[rows, where] = key
    tokens[rows, where + 1] = 2 + labels
    cls = torch.zeros(n, 1, dtype=torch.long)  # token 0: [CLS]
    tokens = torch.cat([cls, tokens], 1)
    noisy = labels.clone()
    flip = torch.rand(n, generator=g) < 0.1
    noisy[flip] = torch.randint(0, 8, (int(flip.sum()),), generator=g)

    class Block(nn.Module):
        def __init__(self, d: int, layer: int) -> None:
            super().__init__()
            self.n1, self.n2 = _RMSNorm(d), _RMSNorm(d)
            self.attn = _DiffAttention(d, 2, layer)
            self.w1, self.w3 = nn.Linear(d, 2 * d, bias=False), nn.Linear(d, 2 * d, bias=False)
            self.w2 = nn.Linear(2 * d, d, bias=False)
            self.drop = nn.Dropout(0.1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.drop(self.attn(self.n1(x)))
            h = self.n2(x)
            return x + self.drop(self.w2(F.silu(self.w1(h)) * self.w3(h)))

    class DiffEncoder(nn.Module):
        def __init__(self, d: int = 64) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(length + 1, d)
            self.blocks = nn.ModuleList([Block(d, i + 1) for i in range(2)])
            self.norm = _RMSNorm(d)
            self.head = nn.Linear(d, 8)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            h = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            for block in self.blocks:
                h = block(h)
            return self.head(self.norm(h[:, 0]))

    model = DiffEncoder()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-3,
        betas=(0.9, 0.95),
    )
    warmup, decay_start = int(0.05 * steps), int(0.8 * steps)

    def wsd(s: int) -> float:
        if s < warmup:
            return (s + 1) / warmup
        if s < decay_start:
            return 1.0
        return max(0.0, (steps - s) / (steps - decay_start))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, wsd)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, 5000, (48,), generator=g)
        loss = criterion(model(tokens[idx]), noisy[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 75 == 74:
            model.eval()
            with torch.no_grad():
                acc = (model(tokens[5000:]).argmax(1) == labels[5000:]).float().mean().item()
            if bug != "train_in_eval_mode":  # bug: never switched back to training mode
                model.train()
            print(f"step {step + 1}: loss {loss.item():.4f} val acc {acc:.3f}")
    hook.close()
    return losses


def topk_sparse_autoencoder(path: str, steps: int = 500, seed: int = 0) -> list[float]:
    """A TopK sparse autoencoder (Gao et al. 2024) as used for interpretability, on synthetic
    "residual-stream activations": 64-dimensional vectors in superposition, each a sparse sum of
    a few of 256 ground-truth feature directions with exponential magnitudes, plus an offset
    and noise. 512 latents, k = 16 (ReLU after TopK), a pre-encoder bias initialised to the
    data's mean, the encoder initialised as the decoder's transpose, decoder rows kept at unit
    norm (their gradient's parallel component removed before each step), the normalized MSE
    plus the AuxK loss (1/32) reconstructing the residual from the top 128 dead latents (no
    activation in the last 4096 examples); Adam 1e-3 with eps 6.25e-10, batch 256."""
    g = _seed(seed)
    d, features, latents, k = 64, 256, 512, 16
    pg = torch.Generator().manual_seed(91)
    directions = F.normalize(torch.randn(features, d, generator=pg), dim=1)
    offset = 0.5 * torch.randn(d, generator=pg)
    freq = 0.02 * torch.rand(features, generator=pg) ** 2 + 0.002

    def activations(n: int) -> torch.Tensor:
        active = torch.rand(n, features, generator=g) < freq
        mags = -torch.log(torch.rand(n, features, generator=g)) * active
        return mags @ directions + offset + 0.05 * torch.randn(n, d, generator=g)

    class TopKSAE(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.b_pre = nn.Parameter(torch.zeros(d))
            self.encoder = nn.Linear(d, latents)
            self.W_dec = nn.Parameter(F.normalize(torch.randn(latents, d), dim=1))
            with torch.no_grad():
                self.encoder.weight.copy_(self.W_dec)  # W_enc = W_dec^T (rows are latents here)
                self.encoder.bias.zero_()

        def encode_pre(self, x: torch.Tensor) -> torch.Tensor:
            return self.encoder(x - self.b_pre)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            pre = self.encode_pre(x)
            vals, idx = pre.topk(k, -1)
            z = torch.zeros_like(pre).scatter(-1, idx, F.relu(vals))
            return z @ self.W_dec + self.b_pre, z, pre

    sae = TopKSAE()
    with torch.no_grad():
        sae.b_pre.copy_(activations(4096).mean(0))
    opt = torch.optim.Adam(sae.parameters(), lr=1e-3, eps=6.25e-10)
    since_fired = torch.zeros(latents)
    hook = Hook(path)
    hook.register_module(sae)
    losses = []
    for step in range(steps):
        x = activations(256)
        recon, z, pre = sae(x)
        var = (x - x.mean(0)).pow(2).sum(1).mean()
        nmse = (recon - x).pow(2).sum(1).mean() / var
        since_fired += len(x)
        since_fired[(z > 0).any(0)] = 0
        dead = since_fired > 4096
        aux = torch.zeros(())
        if dead.any():
            residual = (x - recon).detach()
            k_aux = min(128, int(dead.sum()))
            vals, idx = pre.masked_fill(~dead, float("-inf")).topk(k_aux, -1)
            z_aux = torch.zeros_like(pre).scatter(-1, idx, F.relu(vals))
            aux = (z_aux @ sae.W_dec - residual).pow(2).sum(1).mean() / var
        loss = nmse + aux / 32
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():
            w, gw = sae.W_dec, sae.W_dec.grad
            gw -= (gw * w).sum(1, keepdim=True) * w
        opt.step()
        with torch.no_grad():
            sae.W_dec.copy_(F.normalize(sae.W_dec, dim=1))
        losses.append(loss.item())
        if step % 100 == 99:
            print(f"step {step + 1}: nmse {nmse.item():.4f} aux {float(aux):.4f} dead {int(dead.sum())}")
    hook.close()
    return losses


def grpo_digit_addition_policy(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Group relative policy optimization (GRPO, Shao et al. 2024) on a toy reasoning task: a
    policy reads two digits a and b and writes the two digits of a + b, one token after the
    other; eight answers are sampled per prompt, the reward is the fraction of right digits, the
    advantage is the reward standardised within its group (no critic), and the loss is the
    clipped surrogate (epsilon 0.2, two gradient steps per batch of samples) plus beta = 0.04
    times the k3 estimate of KL to the frozen initial policy; Adam 1e-3, 32 prompts a batch.
    The loss hovers near zero by construction; the reward is what rises."""
    g = _seed(seed)

    class Policy(nn.Module):
        def __init__(self, d: int = 64) -> None:
            super().__init__()
            self.digit = nn.Embedding(11, d)  # 10 digits and a "start" token
            if bug == "deep_sigmoid":  # the trunk written as a deep stack of sigmoid layers
                layers: list[nn.Module] = []
                for i in range(8):
                    layers += [nn.Linear(3 * d if i == 0 else 128, 128), nn.Sigmoid()]
                self.trunk = nn.Sequential(*layers)
            else:
                self.trunk = nn.Sequential(nn.Linear(3 * d, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
            self.head = nn.Linear(128, 10)

        def forward(self, a: torch.Tensor, b: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
            return self.head(self.trunk(torch.cat([self.digit(a), self.digit(b), self.digit(prev)], -1)))

        def logprobs(self, a: torch.Tensor, b: torch.Tensor, answer: torch.Tensor) -> torch.Tensor:
            start = torch.full_like(a, 10)
            lp1 = torch.log_softmax(self(a, b, start), -1).gather(-1, answer[:, :1]).squeeze(-1)
            lp2 = torch.log_softmax(self(a, b, answer[:, 0]), -1).gather(-1, answer[:, 1:]).squeeze(-1)
            return torch.stack([lp1, lp2], 1)

    policy = Policy()
    reference = copy.deepcopy(policy).requires_grad_(False)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    group, prompts, eps, beta = 8, 32, 0.2, 0.04
    hook = Hook(path)
    hook.register_module(policy)
    losses, rewards = [], []
    for step in range(steps):
        a = torch.randint(0, 10, (prompts,), generator=g).repeat_interleave(group)
        b = torch.randint(0, 10, (prompts,), generator=g).repeat_interleave(group)
        truth = torch.stack([(a + b) // 10, (a + b) % 10], 1)
        with torch.no_grad():
            d1 = torch.multinomial(torch.softmax(policy(a, b, torch.full_like(a, 10)), -1), 1, generator=g)
            d2 = torch.multinomial(torch.softmax(policy(a, b, d1.squeeze(1)), -1), 1, generator=g)
            answer = torch.cat([d1, d2], 1)
            old_lp = policy.logprobs(a, b, answer)
            ref_lp = reference.logprobs(a, b, answer)
        reward = (answer == truth).float().mean(1)
        grouped = reward.view(prompts, group)
        adv = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)).view(-1, 1)
        for _ in range(2):
            lp = policy.logprobs(a, b, answer)
            ratio = torch.exp(lp - old_lp)
            surrogate = torch.min(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
            kl = torch.exp(ref_lp - lp) - (ref_lp - lp) - 1
            loss = -(surrogate - beta * kl).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses.append(loss.item())
        rewards.append(reward.mean().item())
        if step % 100 == 99:
            print(f"step {step + 1}: loss {loss.item():.4f} mean reward {np.mean(rewards[-20:]):.3f}")
    hook.close()
    print(f"reward {np.mean(rewards[:20]):.3f} -> {np.mean(rewards[-20:]):.3f}")
    return losses


def deepseek_moe_aux_free_balancing(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A DeepSeekMoE-style layer (Dai et al. 2024; DeepSeek-V3's balancing) in a token-mixing
    topic classifier: one always-on shared expert plus eight fine-grained routed experts, top-2
    routing on sigmoid affinities normalised over the chosen experts, auxiliary-loss-free load
    balancing (a per-expert bias added to the affinities for the choice only, nudged by 1e-3
    times the sign of the load error after every step, outside the gradient) and a small
    sequence-wise balance loss (alpha 1e-3). Documents of 24 tokens, the topic (6 classes)
    drawn from topic-specific word distributions; AdamW 1e-3 with cosine decay, batch 64."""
    g = _seed(seed)
    n, length, vocab, topics, experts, top = 6000, 24, 120, 6, 8, 2
    pg = torch.Generator().manual_seed(93)
    word_dist = torch.softmax(1.5 * torch.randn(topics, vocab, generator=pg), -1)
    labels = torch.randint(0, topics, (n,), generator=g)
    mix = torch.rand(n, 1, generator=g) * 0.25 + 0.1  # most of each document is generic words
    dist = mix * word_dist[labels] + (1 - mix) / vocab
    docs = torch.multinomial(dist, length, replacement=True, generator=g)
    y_train = labels[:5000]
    if bug == "shuffled_labels":  # the topic column read from a copy sorted in another order
        y_train = y_train[torch.randperm(5000, generator=g)]

    class Expert(nn.Module):
        def __init__(self, d: int, hidden: int) -> None:
            super().__init__()
            self.w1, self.w3 = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
            self.w2 = nn.Linear(hidden, d, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class MoELayer(nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.shared = Expert(d, 64)
            self.routed = nn.ModuleList([Expert(d, 32) for _ in range(experts)])
            self.centroids = nn.Parameter(0.02 * torch.randn(experts, d))
            self.register_buffer("bias", torch.zeros(experts))
            self.load = torch.zeros(experts)
            self.balance = torch.zeros(())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, d = x.shape
            flat = x.reshape(-1, d)
            scores = torch.sigmoid(flat @ self.centroids.T)
            chosen = (scores + self.bias).topk(top, -1).indices  # the bias steers the choice only
            gates = scores.gather(-1, chosen)
            gates = gates / gates.sum(-1, keepdim=True)
            out = torch.zeros_like(flat)
            for e, expert in enumerate(self.routed):
                hit = (chosen == e).any(-1)
                if hit.any():
                    w = (gates * (chosen == e)).sum(-1, keepdim=True)[hit]
                    out[hit] += w * expert(flat[hit])
            counts = F.one_hot(chosen, experts).sum(1).float()  # (tokens, experts)
            self.load = counts.sum(0).detach()
            f = counts.view(b, t, experts).mean(1) * experts / top
            p = (scores / scores.sum(-1, keepdim=True)).view(b, t, experts).mean(1)
            self.balance = (f * p).sum(-1).mean()
            return x + (self.shared(flat) + out).view(b, t, d)

    class TopicMoE(nn.Module):
        def __init__(self, d: int = 48) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.mix = nn.Conv1d(d, d, 3, padding=1, groups=d)
            self.norm = nn.LayerNorm(d)
            self.moe = MoELayer(d)
            self.head = nn.Linear(d, topics)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            h = self.emb(idx)
            h = h + self.mix(h.transpose(1, 2)).transpose(1, 2)
            h = self.moe(self.norm(h))
            return self.head(h.mean(1))

    model = TopicMoE()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, 5000, (64,), generator=g)
        ce = criterion(model(docs[idx]), y_train[idx])
        loss = ce + 1e-3 * model.moe.balance
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():  # auxiliary-loss-free balancing: raise the bias of underloaded experts
            load = model.moe.load
            model.moe.bias += 1e-3 * torch.sign(load.mean() - load)
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                acc = (model(docs[5000:]).argmax(1) == labels[5000:]).float().mean().item()
            model.train()
            share = (load / load.sum()).tolist()
            print(
                f"step {step + 1}: loss {loss.item():.4f} val acc {acc:.3f} "
                f"load {[round(s, 2) for s in share]}"
            )
    hook.close()
    return losses


class _MLSTMLayer(nn.Module):
    """An mLSTM layer (xLSTM, Beck et al. 2024) in its recurrent form: a matrix memory
    C_t = f_t C_{t-1} + i_t v_t k_t^T and normaliser n_t, an exponential input gate and a sigmoid
    forget gate stabilised by the running max m_t, h_t = o_t * C_t q_t / max(|n_t . q_t|, 1),
    inside a pre-LN block with an up-projection and a gated (SiLU) output projection."""

    def __init__(self, d: int, heads: int = 2) -> None:
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 2 * d)
        self.qkv = nn.Linear(d, 3 * d)
        self.gates = nn.Linear(d, 2 * heads)
        nn.init.constant_(self.gates.bias[heads:], 3.0)  # forget gates start open
        self.o_gate = nn.Linear(d, d)
        self.out_norm = nn.GroupNorm(heads, d)
        self.down = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        inner, z = self.up(self.norm(x)).chunk(2, -1)
        q, k, v = self.qkv(inner).view(b, t, 3, self.heads, self.hd).unbind(2)
        k = k / math.sqrt(self.hd)
        i_pre, f_pre = self.gates(inner).chunk(2, -1)  # (b, t, heads)
        log_f = F.logsigmoid(f_pre)
        c = torch.zeros(b, self.heads, self.hd, self.hd)
        n = torch.zeros(b, self.heads, self.hd)
        m = torch.zeros(b, self.heads)
        hs = []
        for s in range(t):
            m_new = torch.maximum(log_f[:, s] + m, i_pre[:, s])
            i_g = torch.exp(i_pre[:, s] - m_new)[..., None]
            f_g = torch.exp(log_f[:, s] + m - m_new)[..., None]
            c = f_g[..., None] * c + i_g[..., None] * v[:, s, :, :, None] * k[:, s, :, None, :]
            n = f_g * n + i_g * k[:, s]
            num = (c @ q[:, s, :, :, None]).squeeze(-1)
            den = torch.maximum((n * q[:, s]).sum(-1, keepdim=True).abs(), torch.exp(-m_new)[..., None])
            hs.append(num / den)
            m = m_new
        h = torch.stack(hs, 1).reshape(b, t, d)
        h = self.out_norm(h.transpose(1, 2)).transpose(1, 2) * torch.sigmoid(self.o_gate(inner))
        return x + self.down(h * F.silu(z))


def xlstm_mlstm_char_lm(path: str, steps: int = 250, seed: int = 0, bug: str | None = None) -> list[float]:
    """A small xLSTM language model of two mLSTM blocks on sequences of a Markov "language" (24
    tokens, windows of 32), next-token cross-entropy; AdamW 2e-3 with weight decay 0.1, a linear
    warm-up of 25 steps into cosine decay, clipping at 1.0, batch 16, a validation pass every
    50 steps."""
    g = _seed(seed)
    vocab, length = 24, 33
    data = _markov_tokens(g, 3000, length, vocab, proto_seed=97)

    class XLSTMLM(nn.Module):
        def __init__(self, d: int = 48) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.blocks = nn.Sequential(_MLSTMLayer(d), _MLSTMLayer(d))
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            return self.head(self.norm(self.blocks(self.emb(idx))))

    model = XLSTMLM()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.1)
    warmup = 25
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            (s + 1) / warmup
            if s < warmup
            else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup)))
        ),
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        xb = data[torch.randint(0, 2800, (16,), generator=g)]
        loss = criterion(model(xb[:, :-1]).flatten(0, 1), xb[:, 1:].flatten())
        if bug != "no_zero_grad":
            opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                xv = data[2800:]
                val = criterion(model(xv[:, :-1]).flatten(0, 1), xv[:, 1:].flatten()).item()
            model.train()
            print(f"step {step + 1}: loss {loss.item():.4f} val {val:.4f}")
    hook.close()
    return losses


def ngpt_normalized_transformer_lm(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """nGPT (Loshchilov et al. 2024), the normalized Transformer: every embedding and every
    weight matrix kept at unit norm along the embedding dimension (re-normalised after each
    optimizer step), hidden states on the hypersphere updated by learned "eigen learning rates"
    h <- norm(h + alpha (norm(block(h)) - h)), rotary queries and keys normalised with a
    learned scaling, the attention softmax scaled by sqrt(d_k), SwiGLU with learned u/v scalings, logits
    scaled by a learned s_z; Adam 2e-3 with no weight decay and no warm-up, as the paper
    recommends, batch 32, windows of 32 tokens of a Markov "language"."""
    g = _seed(seed)
    vocab, length, d, heads = 32, 33, 64, 4
    data = _markov_tokens(g, 4000, length, vocab, proto_seed=101)

    def norm(x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1)

    def rope(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        angle = torch.arange(x.shape[-2])[:, None] / 10000 ** (torch.arange(half)[None] / half)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], -1)

    class Scale(nn.Module):
        """A learned per-dimension scaling s = s_param * (init / scale), as nGPT parametrises it."""

        def __init__(self, dim: int, init: float, scale: float) -> None:
            super().__init__()
            self.init, self.scale = init, scale
            self.param = nn.Parameter(torch.full((dim,), scale))

        def forward(self) -> torch.Tensor:
            return self.param * (self.init / self.scale)

    class NBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.o = nn.Linear(d, d, bias=False)
            self.up = nn.Linear(d, 4 * d, bias=False)
            self.down = nn.Linear(2 * d, d, bias=False)
            self.alpha_a = Scale(d, 0.05, 1 / math.sqrt(d))
            self.alpha_m = Scale(d, 0.05, 1 / math.sqrt(d))
            self.s_qk = Scale(d // heads, 1.0, 1 / math.sqrt(d))
            self.s_uv = Scale(4 * d, 1.0, 1.0)

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            b, t, _ = h.shape
            q, k, v = (x.view(b, t, heads, -1).transpose(1, 2) for x in self.qkv(h).chunk(3, -1))
            q, k = norm(rope(q)) * self.s_qk(), norm(rope(k)) * self.s_qk()
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=math.sqrt(d // heads))
            h_a = norm(self.o(a.transpose(1, 2).reshape(b, t, d)))
            h = norm(h + self.alpha_a().abs() * (h_a - h))
            uv = self.up(h) * self.s_uv()
            u, v2 = uv.chunk(2, -1)
            h_m = norm(self.down(u * F.silu(v2 * math.sqrt(d))))
            return norm(h + self.alpha_m().abs() * (h_m - h))

    class NGPT(nn.Module):
        def __init__(self, layers: int = 2) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.blocks = nn.ModuleList([NBlock() for _ in range(layers)])
            self.unemb = nn.Linear(d, vocab, bias=False)
            self.s_z = Scale(vocab, 1.0, 1 / math.sqrt(d))

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            h = self.emb(idx)  # positions enter through rotary embeddings of queries and keys
            for block in self.blocks:
                h = block(h)
            return self.unemb(h) * self.s_z()

        @torch.no_grad()
        def normalize_matrices(self) -> None:
            self.emb.weight.copy_(norm(self.emb.weight))
            self.unemb.weight.copy_(norm(self.unemb.weight))
            for block in self.blocks:
                for lin in (block.qkv, block.up):  # (out, in): each row along the embedding dim
                    lin.weight.copy_(norm(lin.weight))
                for lin in (block.o, block.down):  # (d, in): each column lives in the embedding space
                    lin.weight.copy_(F.normalize(lin.weight, dim=0))

    model = NGPT()
    model.normalize_matrices()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.95))
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        xb = data[torch.randint(0, 3600, (32,), generator=g)]
        loss = criterion(model(xb[:, :-1]).flatten(0, 1), xb[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.normalize_matrices()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                xv = data[3600:]
                val = criterion(model(xv[:, :-1]).flatten(0, 1), xv[:, 1:].flatten()).item()
            print(f"step {step + 1}: loss {loss.item():.4f} val {val:.4f}")
    hook.close()
    return losses


def vit_registers_layerscale_tta(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A small vision transformer with register tokens (Darcet et al. 2024: four extra learned
    tokens, discarded at the output) and LayerScale (per-channel residual scales initialised to
    1e-4, as DeiT III / CaiT), patch size 4 on 16x16 RGB images of shapes, [CLS] pooling; random
    flips and crops-by-shift as augmentation, label smoothing 0.1, AdamW 1e-3 with weight decay
    0.05, 20 warm-up steps into cosine, batch 64; evaluated with test-time augmentation (the
    softmax averaged over the image and its mirror)."""
    g = _seed(seed)
    images, labels = _shape_images(g, 4000)
    mean, std = (
        torch.tensor([0.5, 0.5, 0.5]).view(1, 3, 1, 1),
        torch.tensor([0.25, 0.25, 0.25]).view(1, 3, 1, 1),
    )
    # bug: the uint8 images cast to float without the division by 255
    pixels = images.float() if bug == "inputs_x255" else images.float() / 255
    x = (pixels - mean) / std

    class LSBlock(nn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            self.ls1 = nn.Parameter(1e-4 * torch.ones(d))
            self.ls2 = nn.Parameter(1e-4 * torch.ones(d))

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            a = self.n1(h)
            h = h + self.ls1 * self.attn(a, a, a, need_weights=False)[0]
            return h + self.ls2 * self.mlp(self.n2(h))

    class ViTReg(nn.Module):
        def __init__(self, d: int = 64, depth: int = 3, registers: int = 4) -> None:
            super().__init__()
            self.patch = nn.Conv2d(3, d, 4, 4)
            self.cls = nn.Parameter(torch.zeros(1, 1, d))
            self.reg = nn.Parameter(0.02 * torch.randn(1, registers, d))
            self.pos = nn.Parameter(0.02 * torch.randn(1, 17, d))
            self.blocks = nn.Sequential(*[LSBlock(d, 4) for _ in range(depth)])
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, 6)
            self.registers = registers

        def forward(self, xb: torch.Tensor) -> torch.Tensor:
            h = self.patch(xb).flatten(2).transpose(1, 2)
            h = torch.cat([self.cls.expand(len(h), -1, -1), h], 1) + self.pos
            h = torch.cat([h, self.reg.expand(len(h), -1, -1)], 1)  # registers carry no position
            h = self.norm(self.blocks(h))
            return self.head(h[:, 0])

    model = ViTReg()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and n not in ("cls", "reg", "pos")]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and n not in ("cls", "reg", "pos"))]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": rest, "weight_decay": 0.0}], lr=1e-3
    )
    warmup = 20
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            (s + 1) / warmup
            if s < warmup
            else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup)))
        ),
    )
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, 3500, (64,), generator=g)
        xb = x[idx]
        flip = torch.rand(64, generator=g) < 0.5
        xb = torch.where(flip.view(-1, 1, 1, 1), xb.flip(3), xb)
        dy, dx = (int(v) for v in torch.randint(-2, 3, (2,), generator=g))
        xb = torch.roll(xb, (dy, dx), (2, 3))
        loss = criterion(model(xb), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                xv = x[3500:]
                probs = (model(xv).softmax(1) + model(xv.flip(3)).softmax(1)) / 2
                acc = (probs.argmax(1) == labels[3500:]).float().mean().item()
            model.train()
            print(f"step {step + 1}: loss {loss.item():.4f} val acc (TTA) {acc:.3f}")
    hook.close()
    return losses


# ============================================================================= Keras 3


def _keras_losses(key: str = "loss") -> Any:
    """A callback collecting each batch's loss: Keras 3 logs the epoch's running mean at every
    batch, so batch k's own loss is k * mean_k - (k - 1) * mean_{k-1}."""
    import keras

    class BatchLosses(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.losses: list[float] = []
            self.prev = 0.0

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.prev = 0.0

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            mean = float(logs[key])
            self.losses.append((batch + 1) * mean - batch * self.prev)
            self.prev = mean

    return BatchLosses()


def keras_fnet_text_classifier(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """FNet (Lee-Thorp et al. 2022) text classification in Keras 3, after the keras.io FNet
    example: token and position embeddings, two encoder blocks whose attention is replaced by
    the real part of a 2-D Fourier transform over the sequence and hidden axes
    (`keras.ops.fft2`), each followed by a ReLU feed-forward and layer norms, average pooling,
    dropout and a 2-way `Dense` of logits on `SparseCategoricalCrossentropy(from_logits=True)`;
    AdamW 1e-3 on `CosineDecay` with a warm-up, batch 32, 4 epochs, `validation_split=0.1`.
    Reviews are synthetic: 40 tokens (padded), a sentiment lexicon and negators that flip the
    next word."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    n, length, vocab = 2400, 40, 300
    polarity = np.zeros(vocab)
    polarity[3:60] = rng.uniform(0.5, 1.5, 57)
    polarity[60:117] = -rng.uniform(0.5, 1.5, 57)
    x = rng.integers(3, vocab, size=(n, length))
    negate = rng.random((n, length)) < 0.08
    x[negate] = 2  # "not"
    for i, cut in enumerate(rng.integers(20, length + 1, n)):
        x[i, cut:] = 0  # padding
    sign = np.where(np.roll(x == 2, 1, axis=1), -1.0, 1.0)
    score = (polarity[x] * sign).sum(1)
    y = (score > 0).astype("int32")

    class FNetEncoder(layers.Layer):
        def __init__(self, embed_dim: int, dense_dim: int, **kw: Any) -> None:
            super().__init__(**kw)
            # bug: the ReLU layer's biases started at -2 "to keep the feed-forward units sparse"
            bias = keras.initializers.Constant(-2.0) if bug == "dead_relu_init" else "zeros"
            self.dense_proj = keras.Sequential(
                [layers.Dense(dense_dim, activation="relu", bias_initializer=bias), layers.Dense(embed_dim)]
            )
            self.layernorm_1 = layers.LayerNormalization()
            self.layernorm_2 = layers.LayerNormalization()

        def call(self, inputs: Any) -> Any:
            real, _ = keras.ops.fft2((inputs, keras.ops.zeros_like(inputs)))
            proj_input = self.layernorm_1(inputs + real)
            return self.layernorm_2(proj_input + self.dense_proj(proj_input))

    class PositionalEmbedding(layers.Layer):
        def __init__(self, sequence_length: int, vocab_size: int, embed_dim: int, **kw: Any) -> None:
            super().__init__(**kw)
            self.token_embeddings = layers.Embedding(vocab_size, embed_dim)
            self.position_embeddings = layers.Embedding(sequence_length, embed_dim)

        def call(self, inputs: Any) -> Any:
            positions = keras.ops.arange(0, keras.ops.shape(inputs)[-1])
            return self.token_embeddings(inputs) + self.position_embeddings(positions)

    inputs = keras.Input(shape=(length,), dtype="int32")
    h = PositionalEmbedding(length, vocab, 64)(inputs)
    h = FNetEncoder(64, 128)(h)
    h = FNetEncoder(64, 128)(h)
    h = layers.GlobalAveragePooling1D()(h)
    h = layers.Dropout(0.1)(h)
    outputs = layers.Dense(2)(h)
    model = keras.Model(inputs, outputs)
    steps = 4 * int(np.ceil(0.9 * n / 32))
    schedule = keras.optimizers.schedules.CosineDecay(
        1e-4, decay_steps=steps - 30, warmup_target=1e-3, warmup_steps=30
    )
    model.compile(
        optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    history = _keras_losses()
    fit = model.fit(
        x, y, batch_size=32, epochs=4, validation_split=0.1, verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    print({k: round(v[-1], 4) for k, v in fit.history.items()})
    return history.losses


# ============================================================================= Lightning


def _pl_trainer(path: str, callbacks: list[Any], **kw: Any) -> Any:
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=path,
        callbacks=[DebuggerCallback(path), *callbacks],
        **kw,
    )


def _pl_losses() -> Any:
    """A callback keeping each training batch's loss (`outputs["loss"]`)."""
    import lightning.pytorch as pl

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    return LossHistory()


def lit_distillspec_draft_model(path: str, epochs: int = 6, seed: int = 0) -> list[float]:
    """Training the draft model of speculative decoding by distillation (DistillSpec, Zhou et al.
    2024) as a LightningModule: a frozen target GPT (pre-trained in the script, held in the
    module in eval mode with `requires_grad_(False)`) generates the training sequences
    on-policy, and a much smaller one-layer draft GPT is trained on the total variation distance
    between the two next-token distributions, the quantity that sets the acceptance rate
    (validated as the mean of sum_v min(p, q)); AdamW 1e-3, per-step warm-up and cosine,
    `gradient_clip_val=1.0`, batch 32."""
    import lightning.pytorch as pl

    g = _seed(seed)
    vocab, length = 32, 33
    corpus = _markov_tokens(g, 4000, length, vocab, proto_seed=107)
    target = _TinyGPT(vocab, d=64, layers=2, heads=4, ctx=length)
    _pretrain_lm(target, corpus, 400, g)
    target.eval().requires_grad_(False)
    with torch.no_grad():  # the target's own samples, from two-token prompts
        seqs = corpus[:2200, :2].clone()
        for _ in range(length - 2):
            probs = torch.softmax(target(seqs)[:, -1], -1)
            seqs = torch.cat([seqs, torch.multinomial(probs, 1, generator=g)], 1)
    total_steps = epochs * (2000 // 32)

    class DraftDistillation(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.target = target
            self.draft = _TinyGPT(vocab, d=32, layers=1, heads=2, ctx=length)

        def tvd(self, seq: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                p = torch.softmax(self.target(seq[:, :-1]), -1)
            q = torch.softmax(self.draft(seq[:, :-1]), -1)
            return 0.5 * (p - q).abs().sum(-1).mean()

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = self.tvd(batch[0])
            self.log("train_tvd", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("val_acceptance", 1 - self.tvd(batch[0]))

        def configure_optimizers(self) -> Any:
            opt = torch.optim.AdamW(self.draft.parameters(), lr=1e-3, weight_decay=0.01)

            def warmup_cosine(step: int) -> float:
                if step < 30:
                    return (step + 1) / 30
                return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - 30) / (total_steps - 30))))

            sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    train = DataLoader(TensorDataset(seqs[:2000]), batch_size=32, shuffle=True, drop_last=True, generator=g)
    val = DataLoader(TensorDataset(seqs[2000:]), batch_size=100)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs, gradient_clip_val=1.0)
    trainer.fit(DraftDistillation(), train, val)
    print(f"val acceptance {float(trainer.callback_metrics['val_acceptance']):.3f}")
    return history.losses


def lit_tabm_mini_ensemble(path: str, epochs: int = 10, seed: int = 0, bug: str | None = None) -> list[float]:
    """TabM-mini (Gorishniy et al. 2025) as a LightningModule: one MLP shared by k = 8 implicit
    ensemble members that differ by a multiplicative adapter on the input (initialised to random
    signs) and by their own output heads; the training loss is the mean of the members'
    cross-entropies, the prediction the mean of their probabilities. Tabular data: 16 numeric
    features (some log-normal, standardised), 4 classes, 8000 rows; AdamW 2e-3 with weight decay
    3e-4, batch 256, dropout 0.1, a validation pass each epoch."""
    import lightning.pytorch as pl

    g = _seed(seed)
    n, d, classes, k = 9000, 16, 4, 8
    pg = torch.Generator().manual_seed(109)
    w1 = torch.randn(d, 24, generator=pg)
    w2 = torch.randn(24, classes, generator=pg)
    z = torch.randn(n, d, generator=g)
    score = torch.tanh(z @ w1 / 3) @ w2
    labels = torch.distributions.Categorical(logits=2 * score).sample()
    raw = z.clone()
    raw[:, :5] = torch.exp(z[:, :5])  # skewed columns, as read from the table
    x = raw.clone()
    x[:, :5] = torch.log(raw[:, :5])  # the user's preprocessing: log1p-free log of positive columns
    x = (x - x[:8000].mean(0)) / x[:8000].std(0)

    class TabMMini(pl.LightningModule):
        def __init__(self, hidden: int = 256) -> None:
            super().__init__()
            self.adapter = nn.Parameter(torch.randint(0, 2, (k, d), generator=pg).float() * 2 - 1)
            self.backbone = nn.Sequential(
                nn.Linear(d, hidden),
                nn.ReLU(),
                nn.Dropout(0.1),
                nn.Linear(hidden, hidden),
                nn.ReLU(),
                nn.Dropout(0.1),
            )
            self.head_w = nn.Parameter(
                torch.empty(k, hidden, classes).uniform_(-(hidden**-0.5), hidden**-0.5)
            )
            self.head_b = nn.Parameter(torch.zeros(k, classes))

        def forward(self, xb: torch.Tensor) -> torch.Tensor:
            h = self.backbone(xb[:, None, :] * self.adapter)  # (batch, k, hidden)
            out = torch.einsum("bkh,khc->bkc", h, self.head_w) + self.head_b
            if bug == "softmax_before_ce":  # "the members' probabilities, since we average them"
                return out.softmax(-1)
            return out

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            logits = self(xb)
            loss = F.cross_entropy(logits.flatten(0, 1), yb.repeat_interleave(k))
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            out = self(xb)
            probs = (out if bug == "softmax_before_ce" else out.softmax(-1)).mean(1)
            self.log("val_acc", (probs.argmax(1) == yb).float().mean())

        def configure_optimizers(self) -> Any:
            return torch.optim.AdamW(self.parameters(), lr=2e-3, weight_decay=3e-4)

    train = DataLoader(TensorDataset(x[:8000], labels[:8000]), batch_size=256, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(x[8000:], labels[8000:]), batch_size=1000)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(TabMMini(), train, val)
    print(f"val acc {float(trainer.callback_metrics['val_acc']):.3f}")
    return history.losses


# ============================================================================= Hugging Face Trainer


class _Examples(Dataset):
    """A list of feature dicts, as a `datasets.Dataset` after `.map(...)` gives them."""

    def __init__(self, **columns: Any) -> None:
        self.columns = columns
        self.n = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: v[i] for k, v in self.columns.items()}


def _hf_train(
    path: str, model: Any, train: Dataset, val: Dataset | None, collator: Any = None, **args: Any
) -> list[float]:
    """`Trainer(model, TrainingArguments(...), callbacks=[DebuggerCallback(path)]).train()`; the
    per-step training losses from `trainer.state.log_history` (`logging_steps=1`)."""
    from transformers import PrinterCallback, Trainer, TrainingArguments

    from mldbg.transformers import DebuggerCallback

    targs = TrainingArguments(
        output_dir=os.path.join(path, "trainer"),
        save_strategy="no",
        eval_strategy="epoch" if val is not None else "no",
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
        **args,
    )
    trainer = Trainer(
        model=model, args=targs, train_dataset=train, eval_dataset=val, data_collator=collator,
        callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    if val is not None:
        print({k: round(v, 4) for k, v in trainer.evaluate().items() if isinstance(v, float)})
    shutil.rmtree(targs.output_dir, ignore_errors=True)
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


def hf_modernbert_mlm_wsd(path: str, seed: int = 0) -> list[float]:
    """Masked-LM pre-training of a tiny random `ModernBertForMaskedLM` (RoPE, GeGLU, alternating
    local (window 16) and global attention, no biases) the way ModernBERT was trained: 30 %
    masking (80/10/10) by the user's own collator, AdamW betas (0.9, 0.98) with weight decay
    1e-5, lr 3e-3 (8e-4 at ModernBERT's size) on the warmup-stable-decay schedule
    (`lr_scheduler_type="warmup_stable_decay"`: 30 warm-up steps, a plateau, the last 25 %
    decayed), batch 16, 4 epochs, evaluation each epoch, on sequences of a Markov "language"
    framed by [CLS] and [SEP]."""
    from transformers import ModernBertConfig, ModernBertForMaskedLM

    g = _seed(seed)
    pad, cls, sep, mask, vocab = 0, 1, 2, 3, 64
    body = _markov_tokens(g, 1400, 62, vocab - 4, proto_seed=113) + 4
    ids = torch.cat([torch.full((1400, 1), cls), body, torch.full((1400, 1), sep)], 1)

    def collate(examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        input_ids = torch.stack([e["input_ids"] for e in examples]).clone()
        labels = input_ids.clone()
        special = input_ids < 4
        chosen = (torch.rand(input_ids.shape, generator=g) < 0.3) & ~special
        labels[~chosen] = -100
        roll = torch.rand(input_ids.shape, generator=g)
        input_ids[chosen & (roll < 0.8)] = mask
        swap = chosen & (roll >= 0.8) & (roll < 0.9)
        input_ids[swap] = torch.randint(4, vocab, (int(swap.sum()),), generator=g)
        return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels}

    config = ModernBertConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
        max_position_embeddings=64, local_attention=16, global_attn_every_n_layers=2, pad_token_id=pad,
        bos_token_id=cls, eos_token_id=sep, cls_token_id=cls, sep_token_id=sep, mask_token_id=mask,
    )  # fmt: skip
    model = ModernBertForMaskedLM(config)
    steps = 4 * (1200 // 16)
    return _hf_train(
        path, model, _Examples(input_ids=ids[:1200]), _Examples(input_ids=ids[1200:]), collate,
        num_train_epochs=4, per_device_train_batch_size=16, per_device_eval_batch_size=50, learning_rate=3e-3,
        adam_beta2=0.98, weight_decay=1e-5, lr_scheduler_type="warmup_stable_decay", warmup_steps=30,
        lr_scheduler_kwargs={"num_decay_steps": steps // 4, "num_stable_steps": steps - steps // 4 - 30},
        remove_unused_columns=False,
    )  # fmt: skip


# ============================================================================= JAX


def flax_nnx_soft_moe_ademamix(path: str, steps: int = 400, seed: int = 0) -> list[float]:
    """A Soft MoE (Puigcerver et al. 2024) classifier in Flax NNX on noisy 8x8 glyphs cut into
    2x2 patches: every slot is a softmax-weighted mix of all tokens (dispatch over tokens),
    every token a softmax-weighted mix of all slot outputs (combine over slots), with
    L2-normalised tokens and slot parameters and a learned scale; four experts of two slots
    each, a pre-norm residual; trained on `optax.contrib.ademamix` (a fast and a slow EMA of
    the gradients, alpha 5, b3 0.999) under `warmup_cosine_decay_schedule`, batch 128, a jitted
    step returning the gradients for the hook."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    import mldbg.jax

    g = _seed(seed)
    images, labels_t = _glyphs(g, 6000, classes=8, proto_seed=127)
    images = images + 0.4 * torch.randn(images.shape, generator=g)
    patches = images.view(6000, 4, 2, 4, 2).permute(0, 1, 3, 2, 4).reshape(6000, 16, 4)
    x_all, y_all = patches.numpy(), labels_t.numpy()
    experts, slots = 4, 2

    class SoftMoE(nnx.Module):
        def __init__(self, d: int, rngs: nnx.Rngs) -> None:
            self.phi = nnx.Param(jax.random.normal(rngs.params(), (d, experts * slots)) / jnp.sqrt(d))
            self.scale = nnx.Param(jnp.ones(()))
            self.up_w = nnx.Param(  # the experts' weights, one slice per expert
                jax.random.normal(rngs.params(), (experts, d, 2 * d)) / jnp.sqrt(d)
            )
            self.down_w = nnx.Param(jax.random.normal(rngs.params(), (experts, 2 * d, d)) / jnp.sqrt(2 * d))

        def __call__(self, x: Any) -> Any:
            logits = self.scale[...] * jnp.einsum(
                "bnd,ds->bns", x / jnp.linalg.norm(x, axis=-1, keepdims=True),
                self.phi[...] / jnp.linalg.norm(self.phi[...], axis=0, keepdims=True),
            )  # fmt: skip
            dispatch = jax.nn.softmax(logits, axis=1)
            combine = jax.nn.softmax(logits, axis=2)
            slot_in = jnp.einsum("bns,bnd->bsd", dispatch, x).reshape(x.shape[0], experts, slots, -1)
            hidden = jax.nn.gelu(jnp.einsum("besd,edh->besh", slot_in, self.up_w[...]))
            slot_out = jnp.einsum("besh,ehd->besd", hidden, self.down_w[...]).reshape(
                x.shape[0], experts * slots, -1
            )
            return jnp.einsum("bns,bsd->bnd", combine, slot_out)

    class Classifier(nnx.Module):
        def __init__(self, d: int, rngs: nnx.Rngs) -> None:
            self.embed = nnx.Linear(4, d, rngs=rngs)
            self.pos = nnx.Param(0.02 * jax.random.normal(rngs.params(), (16, d)))
            self.norm1, self.norm2 = nnx.LayerNorm(d, rngs=rngs), nnx.LayerNorm(d, rngs=rngs)
            self.moe = SoftMoE(d, rngs)
            self.head = nnx.Linear(d, 8, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            h = self.embed(x) + self.pos[...]
            h = h + self.moe(self.norm1(h))
            return self.head(self.norm2(h).mean(1))

    model = Classifier(32, nnx.Rngs(seed))
    schedule = optax.warmup_cosine_decay_schedule(0.0, 3e-3, 40, steps)
    optimizer = nnx.Optimizer(model, optax.contrib.ademamix(schedule, b3=0.999, alpha=5.0), wrt=nnx.Param)

    def loss_fn(model: Any, xb: Any, yb: Any) -> Any:
        return optax.softmax_cross_entropy_with_integer_labels(model(xb), yb).mean()

    @nnx.jit
    def train_step(model: Any, optimizer: Any, xb: Any, yb: Any) -> Any:
        loss, grads = nnx.value_and_grad(loss_fn)(model, xb, yb)
        optimizer.update(model, grads)
        return loss, grads

    @nnx.jit
    def accuracy(model: Any, xb: Any, yb: Any) -> Any:
        return (model(xb).argmax(-1) == yb).mean()

    rng = np.random.default_rng(seed)
    hook = mldbg.jax.Hook(path)
    losses = []
    for step in range(steps):
        idx = rng.choice(5000, 128, replace=False)
        params = nnx.state(model, nnx.Param)
        loss, grads = train_step(model, optimizer, x_all[idx], y_all[idx])
        hook.record(step, params=params, grads=grads, loss=loss)
        losses.append(float(loss))
        if step % 100 == 99:
            print(
                f"step {step + 1}: loss {np.mean(losses[-20:]):.4f} "
                f"val acc {float(accuracy(model, x_all[5000:], y_all[5000:])):.3f}"
            )
    hook.close()
    return losses


# ============================================================================= XGBoost


def xgb_logistic_click_rates(path: str, seed: int = 0) -> list[float]:
    """Click-through rates of aggregated ad impressions regressed with `objective="reg:logistic"`
    on fractional labels (clicks / impressions), each row weighted by its impressions, the way
    aggregated logs are fitted instead of one row per impression: position, hour, device,
    category and ad-quality features, a logistic true CTR around 3 %; `eta=0.05`,
    `max_depth=5`, `subsample=0.8`, `colsample_bytree=0.8`, 300 rounds with a validation set;
    losses: the weighted training log-loss per round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n = 6000
    position = rng.integers(1, 11, n)
    hour = rng.integers(0, 24, n)
    device = rng.integers(0, 3, n)
    category = rng.integers(0, 12, n)
    quality = rng.normal(size=n)
    noise_feats = rng.normal(size=(n, 3))
    logit = (
        -3.3 - 0.25 * (position - 1) + 0.4 * np.sin(2 * np.pi * hour / 24) + 0.3 * (device == 1)
        + 0.15 * ((category * 7) % 5 - 2) + 0.6 * quality
    )  # fmt: skip
    impressions = np.maximum(1, rng.lognormal(5.0, 1.0, n).astype(int))
    clicks = rng.binomial(impressions, 1 / (1 + np.exp(-logit)))
    rate = clicks / impressions
    x = np.column_stack([position, hour, device, category, quality, noise_feats]).astype("float32")
    dtrain = xgb.DMatrix(x[:5000], label=rate[:5000], weight=impressions[:5000])
    dvalid = xgb.DMatrix(x[5000:], label=rate[5000:], weight=impressions[5000:])
    params = {
        "objective": "reg:logistic", "eval_metric": "logloss", "eta": 0.05, "max_depth": 5, "subsample": 0.8,
        "colsample_bytree": 0.8, "tree_method": "hist", "nthread": 1, "seed": seed,
    }  # fmt: skip
    result: dict[str, Any] = {}
    xgb.train(
        params, dtrain, num_boost_round=300, evals=[(dtrain, "train"), (dvalid, "valid")], evals_result=result,
        verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    print(f"valid logloss {result['valid']['logloss'][0]:.4f} -> {result['valid']['logloss'][-1]:.4f}")
    return [float(v) for v in result["train"]["logloss"]]


# ============================================================================= the pipelines

_qlora = healthy(
    "qlora_nf4_lora_adapters_tiny_gpt", "QLoRA (4-bit NF4 base, LoRA adapters)", qlora_nf4_lm_adaptation
)
_orpo = healthy("orpo_odds_ratio_preference_sorting", "ORPO preference alignment", orpo_sorting_preferences)
_dit = healthy(
    "dit_adaln_zero_vpred_zero_terminal_snr",
    "diffusion transformer (v-prediction, zero terminal SNR, Min-SNR)",
    dit_vpred_zero_snr_min_snr,
)
_difft = healthy(
    "differential_transformer_wsd_noisy_retrieval",
    "Differential Transformer on the WSD schedule",
    diff_transformer_wsd_retrieval,
)
_grpo = healthy(
    "grpo_group_relative_policy_digit_addition", "GRPO policy optimization", grpo_digit_addition_policy
)
_dsmoe = healthy(
    "deepseek_moe_shared_expert_aux_loss_free",
    "DeepSeekMoE (shared expert, auxiliary-loss-free balancing)",
    deepseek_moe_aux_free_balancing,
)
_xlstm = healthy("xlstm_mlstm_matrix_memory_lm", "xLSTM (mLSTM) language model", xlstm_mlstm_char_lm)
_vitreg = healthy(
    "vit_register_tokens_layerscale_tta",
    "ViT with registers and LayerScale, TTA",
    vit_registers_layerscale_tta,
)

PIPELINES: list[Any] = [
    _qlora,
    _orpo,
    _dit,
    _difft,
    healthy(
        "topk_sparse_autoencoder_auxk_superposition",
        "TopK sparse autoencoder (AuxK)",
        topk_sparse_autoencoder,
    ),
    _grpo,
    _dsmoe,
    _xlstm,
    healthy(
        "ngpt_hypersphere_normalized_transformer",
        "nGPT (normalized Transformer)",
        ngpt_normalized_transformer_lm,
    ),
    _vitreg,
    buggy(_qlora, "lr_x100"),
    buggy(_xlstm, "no_zero_grad"),
    buggy(_dsmoe, "shuffled_labels"),
    buggy(_vitreg, "inputs_x255"),
    buggy(_grpo, "deep_sigmoid"),
    buggy(_orpo, "frozen_by_mistake"),
    buggy(_dit, "log_zero_nan"),
    buggy(_difft, "train_in_eval_mode"),
]

if installed("keras", "tensorflow"):
    _keras_fnet = healthy(
        "keras_fnet_fourier_text_classifier", "Keras FNet text classification", keras_fnet_text_classifier
    )
    PIPELINES += [_keras_fnet, buggy(_keras_fnet, "dead_relu_init")]

if installed("lightning"):
    _lit_tabm = healthy(
        "lightning_tabm_mini_implicit_ensemble",
        "Lightning TabM-mini (tabular ensemble)",
        lit_tabm_mini_ensemble,
    )
    PIPELINES += [
        healthy(
            "lightning_distillspec_draft_model_tvd",
            "Lightning speculative-decoding draft distillation",
            lit_distillspec_draft_model,
        ),
        _lit_tabm,
        buggy(_lit_tabm, "softmax_before_ce"),
    ]

if installed("transformers"):
    PIPELINES += [
        healthy(
            "hf_trainer_modernbert_mlm_wsd", "HF Trainer ModernBERT masked LM (WSD)", hf_modernbert_mlm_wsd
        )
    ]

if installed("jax", "optax", "flax"):
    PIPELINES += [
        healthy("flax_nnx_soft_moe_ademamix", "Flax NNX Soft MoE on AdEMAMix", flax_nnx_soft_moe_ademamix)
    ]

if installed("xgboost"):
    _xgb_ctr = healthy(
        "xgboost_logistic_fractional_click_rates",
        "XGBoost reg:logistic on click rates",
        xgb_logistic_click_rates,
    )
    PIPELINES += [_xgb_ctr]
