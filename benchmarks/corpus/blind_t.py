"""The thirteenth blind held-out set (issue 26), part T: small trainings of kinds the corpus did
not have yet, plain PyTorch loops with the README's two lines (`register_loss` where the script
has a loss module) and trainings through tools with their one callback or hook. Data generated
in-process, fixed seeds, one CPU thread.

Plain PyTorch: multi-token prediction (a shared causal trunk and four head blocks predicting the
next one to four tokens through one unembedding, the mean of their cross-entropies), a BitNet
b1.58 language model (BitLinear: ternary absmean weights and 8-bit absmax activations through
straight-through estimators; the two-stage schedule that halves the peak lr and drops weight
decay at mid-training), KTO alignment on unpaired desirable and undesirable answers (the
Kahneman-Tversky value of the log-ratio to a frozen reference against a batch KL estimate, on
RMSprop), SwAV (Sinkhorn-Knopp codes, swapped prediction, prototypes re-normalised and frozen at
first), MaskGIT (a bidirectional transformer on grids of codes, cosine mask-ratio schedule,
iterative confidence-based decoding in evaluation passes), an Instant-NGP multiresolution hash
encoding fitting an image (Adam eps 1e-15), direct feedback alignment (hidden layers trained by
the output error through fixed random matrices, two custom autograd Functions), a CfC
(closed-form continuous-time, "liquid") RNN on irregularly sampled series, a hand-written
Sophia-G optimizer on a tiny GPT (a Gauss-Newton-Bartlett Hessian refresh every ten steps from
labels sampled from the model), a neural spline flow (rational-quadratic coupling layers), a
Flamingo-style captioner (a frozen pre-trained LM and vision encoder, a resampler, GATED
XATTN-DENSE layers with tanh gates starting at 0), SchNet (continuous-filter convolutions on
radial bases, ReduceLROnPlateau on the validation MAE), the Deep Interest Network for
click-through prediction (a local activation unit over the behaviour history, Dice), and
hindsight experience replay with a goal-conditioned DQN on bit flipping (Polyak target, clipped
targets, Huber loss).

Through tools: Lightning (`mldbg.lightning.DebuggerCallback`): PCGrad gradient surgery across
three tasks under manual optimization (per-task `torch.autograd.grad` on the shared trunk,
projections written into `.grad` after `manual_backward`). Keras 3 (`mldbg.keras.Hook`): a gMLP
image classifier after the keras.io example (spatial gating units, `Rescaling(1/255)` on uint8
images, AdamW with `ReduceLROnPlateau`).

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the spline flow's Adam at 1e-1 typed for 1e-3 (lr_x100), the Sophia loop without the
`zero_grad` after each step, so gradients pile up between Hessian refreshes (no_zero_grad), the
DIN click labels read from a copy of the log sorted another way (shuffled_labels), SwAV's uint8
images cast to float and normalized without the division by 255 (inputs_x255), the
multi-token model returning the heads' probabilities "for self-speculative decoding" to
`nn.CrossEntropyLoss` (softmax_before_ce), the Lightning PCGrad trunk's biases set to -2 by an
init copied from a sparse-coding script (dead_relu_init), the HER Q-network as a deeper tower of
eight sigmoid layers (deep_sigmoid), the Flamingo cross-attention layers frozen after the
optimizer was built by a line meant to keep all but the resampler frozen (frozen_by_mistake),
the CfC's log-gap feature taken with `log` where `log1p` was meant, the first gap being 0
(log_zero_nan), MaskGIT never put back in training mode after its first sampling pass
(train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND12`.
"""

from __future__ import annotations

import copy
import math
import random
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import BLIND12, buggy, healthy, installed

SPLIT = BLIND12

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 53)


def _markov_tokens(g: torch.Generator, n: int, length: int, vocab: int, proto_seed: int = 71) -> torch.Tensor:
    """(n, length) token sequences from a random second-order Markov chain over `vocab` tokens:
    strong bigram preferences refined by the token before, a small language with structure."""
    pg = torch.Generator().manual_seed(proto_seed)
    logits = 3.0 * torch.randn(1, vocab, vocab, generator=pg) + 1.5 * torch.randn(
        vocab, vocab, vocab, generator=pg
    )
    probs = torch.softmax(logits, -1)
    seqs = torch.zeros(n, length, dtype=torch.long)
    seqs[:, 0] = torch.randint(0, vocab, (n,), generator=g)
    seqs[:, 1] = torch.randint(0, vocab, (n,), generator=g)
    for t in range(2, length):
        seqs[:, t] = torch.multinomial(probs[seqs[:, t - 2], seqs[:, t - 1]], 1, generator=g).squeeze(1)
    return seqs


def _shape_images(
    g: torch.Generator, n: int, size: int = 16, classes: int = 6, proto_seed: int = 613
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


class _CausalBlock(nn.Module):
    """A pre-LN GPT block: causal multi-head attention and a GELU MLP."""

    def __init__(self, d: int, heads: int, dropout: float = 0.0, linear: Any = nn.Linear) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = linear(d, 4 * d), linear(4 * d, d)
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


def _warmup_cosine(opt: torch.optim.Optimizer, warmup: int, total: int, floor: float = 0.1) -> Any:
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


# ============================================================================= plain PyTorch


def multi_token_prediction_lm(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Multi-token prediction (Gloeckle et al. 2024): a shared causal trunk of two transformer
    blocks and n = 4 independent head blocks, head k predicting the token k + 1 places ahead
    through one shared unembedding; the loss is the mean of the four cross-entropies. AdamW
    betas (0.9, 0.95), weight decay 0.1, lr 1e-3 with a warm-up and cosine decay, clipping at
    1.0, batch 32 windows of a Markov "language"; a next-token validation pass every 100 steps."""
    g = _seed(seed)
    vocab, length, n_future, d = 48, 52, 4, 64
    data = _markov_tokens(g, 3000, length, vocab, proto_seed=201)

    class MultiTokenLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(length, d)
            self.trunk = nn.ModuleList([_CausalBlock(d, 4) for _ in range(2)])
            self.heads = nn.ModuleList([_CausalBlock(d, 4) for _ in range(n_future)])
            self.ln_f = nn.LayerNorm(d)
            self.unembed = nn.Linear(d, vocab, bias=False)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            for block in self.trunk:
                x = block(x)
            logits = torch.stack([self.unembed(self.ln_f(head(x))) for head in self.heads])
            if bug == "softmax_before_ce":
                return logits.softmax(-1)  # bug: probabilities "for self-speculative decoding"
            return logits

    model = MultiTokenLM()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    sched = _warmup_cosine(opt, 20, steps)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    t_in = length - n_future
    losses = []
    for step in range(steps):
        xb = data[torch.randint(0, 2700, (32,), generator=g)]
        out = model(xb[:, :t_in])
        loss = (
            sum(
                criterion(out[k].flatten(0, 1), xb[:, k + 1 : k + 1 + t_in].flatten())
                for k in range(n_future)
            )
            / n_future
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                xv = data[2700:]
                val = criterion(model(xv[:, :t_in])[0].flatten(0, 1), xv[:, 1 : 1 + t_in].flatten()).item()
            model.train()
            print(f"step {step + 1}: loss {loss.item():.4f} next-token val {val:.4f}")
    hook.close()
    return losses


class _BitLinear(nn.Linear):
    """BitNet b1.58's BitLinear: the input RMS-normalised and quantized to 8 bits per token by
    absmax, the weight to ternary {-1, 0, 1} by absmean, both through the straight-through
    estimator; the latent weights stay in full precision."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        xs = 127.0 / x.abs().amax(-1, keepdim=True).clamp(min=1e-5)
        xq = x + ((x * xs).round().clamp(-128, 127) / xs - x).detach()
        w = self.weight
        ws = 1.0 / w.abs().mean().clamp(min=1e-5)
        wq = w + ((w * ws).round().clamp(-1, 1) / ws - w).detach()
        return F.linear(xq, wq, self.bias)


def bitnet_b158_ternary_lm(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """A BitNet b1.58 language model: every projection of the attention and MLP is a BitLinear
    (ternary absmean weights, 8-bit absmax activations, straight-through gradients, no biases),
    embeddings and the output head in full precision. The b1.58 two-stage recipe: a high peak
    lr (3e-3) with warm-up and cosine decay, lowered at mid-training, weight decay 0.1 switched
    off for the second stage; Adam betas (0.9, 0.95), batch 32."""
    g = _seed(seed)
    vocab, length = 40, 49
    data = _markov_tokens(g, 3000, length, vocab, proto_seed=223)

    def bitlinear(i: int, o: int) -> nn.Module:
        return _BitLinear(i, o, bias=False)

    model = _TinyGPT(vocab, d=64, layers=2, heads=4, ctx=length)
    model.blocks = nn.ModuleList([_CausalBlock(64, 4, linear=bitlinear) for _ in range(2)])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    sched = _warmup_cosine(opt, 25, steps)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        if step == steps // 2:  # stage two: a lower peak, no weight decay
            for group in opt.param_groups:
                group["weight_decay"] = 0.0
                group["initial_lr"] = group["initial_lr"] * 0.5
            sched.base_lrs = [b * 0.5 for b in sched.base_lrs]
        xb = data[torch.randint(0, 2700, (32,), generator=g)]
        loss = F.cross_entropy(model(xb[:, :-1]).flatten(0, 1), xb[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                xv = data[2700:]
                val = F.cross_entropy(model(xv[:, :-1]).flatten(0, 1), xv[:, 1:].flatten()).item()
            print(f"step {step + 1}: loss {loss.item():.4f} val {val:.4f}")
    hook.close()
    return losses


def _answer_logp(model: nn.Module, seqs: torch.Tensor, start: int) -> torch.Tensor:
    """The summed log-probability of each sequence's tokens from position `start` on."""
    logits = model(seqs[:, :-1])
    logp = torch.log_softmax(logits, -1).gather(-1, seqs[:, 1:, None]).squeeze(-1)
    return logp[:, start - 1 :].sum(1)


def kto_unpaired_preference(path: str, steps: int = 250, seed: int = 0) -> list[float]:
    """KTO (Ethayarajh et al. 2024) on unpaired feedback: a tiny GPT fine-tuned by SFT on a mix of
    right and wrong answers (not recorded) reads five digits and a separator and answers with them
    reversed; each example is a single answer marked desirable (the reversal) or undesirable (one
    digit wrong), never a pair. The loss: lambda_D (1 - sigmoid(beta (r - z0))) on desirable and
    lambda_U (1 - sigmoid(beta (z0 - r))) on undesirable answers, r the log-ratio to a frozen
    reference copy, z0 the batch's KL estimate on mismatched prompt/answer pairs (clamped at 0,
    no gradient); beta 0.1, lambda_D = lambda_U = 1, RMSprop lr 5e-4 with a linear warm-up, batch
    16 + 16."""
    g = _seed(seed)
    sep, n_digits = 10, 5
    prompts = torch.randint(0, 10, (6000, n_digits), generator=g)
    good = prompts.flip(1)
    bad = good.clone()
    pos = torch.randint(0, n_digits, (6000,), generator=g)
    bad[torch.arange(6000), pos] = (
        bad[torch.arange(6000), pos] + torch.randint(1, 10, (6000,), generator=g)
    ) % 10
    sepcol = torch.full((6000, 1), sep)
    good_seq = torch.cat([prompts, sepcol, good], 1)
    bad_seq = torch.cat([prompts, sepcol, bad], 1)
    start = n_digits + 1

    policy = _TinyGPT(11, d=48, layers=2, heads=4, ctx=2 * n_digits + 1)
    sft = torch.optim.AdamW(policy.parameters(), lr=3e-3)
    for _ in range(300):  # the SFT checkpoint: trained on a mix of right (60 %) and wrong answers
        idx = torch.randint(0, 4000, (32,), generator=g)
        pick = torch.rand(32, 1, generator=g) < 0.6
        xb = torch.where(pick, good_seq[idx], bad_seq[idx])
        loss = -_answer_logp(policy, xb, start).mean() / n_digits
        sft.zero_grad()
        loss.backward()
        sft.step()
    reference = copy.deepcopy(policy).eval().requires_grad_(False)

    beta, lam_d, lam_u = 0.1, 1.0, 1.0
    opt = torch.optim.RMSprop(policy.parameters(), lr=5e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    hook = Hook(path)
    hook.register_module(policy)
    losses = []
    for step in range(steps):
        d_idx = torch.randint(4000, 6000, (16,), generator=g)
        u_idx = torch.randint(4000, 6000, (16,), generator=g)
        seqs = torch.cat([good_seq[d_idx], bad_seq[u_idx]])
        mismatched = torch.cat([seqs[:, :start], seqs.roll(1, 0)[:, start:]], 1)
        logp = _answer_logp(policy, seqs, start)
        with torch.no_grad():
            ref_logp = _answer_logp(reference, seqs, start)
            kl = (_answer_logp(policy, mismatched, start) - _answer_logp(reference, mismatched, start)).mean()
            z0 = kl.clamp(min=0)
        r = logp - ref_logp
        loss = torch.cat(
            [
                lam_d * (1 - torch.sigmoid(beta * (r[:16] - z0))),
                lam_u * (1 - torch.sigmoid(beta * (z0 - r[16:]))),
            ]
        ).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 49:
            with torch.no_grad():
                test = torch.cat([prompts[:500], sepcol[:500]], 1)
                for _ in range(n_digits):
                    test = torch.cat([test, policy(test)[:, -1].argmax(-1, keepdim=True)], 1)
                acc = (test[:, start:] == good[:500]).all(1).float().mean().item()
            print(
                f"step {step + 1}: loss {loss.item():.4f} r_D {r[:16].mean():.2f} r_U {r[16:].mean():.2f} exact {acc:.3f}"
            )
    hook.close()
    return losses


def _sinkhorn(scores: torch.Tensor, eps: float = 0.05, iters: int = 3) -> torch.Tensor:
    """SwAV's Sinkhorn-Knopp: soft codes with equal mass on every prototype over the batch."""
    q = torch.exp(scores / eps).T
    q = q / q.sum()
    k, b = q.shape
    for _ in range(iters):
        q = q / q.sum(1, keepdim=True) / k
        q = q / q.sum(0, keepdim=True) / b
    return (q * b).T


def swav_sinkhorn_prototypes(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """SwAV (Caron et al. 2020): two augmented views of 16x16 RGB shape images (random shifts,
    horizontal flips, brightness jitter, noise), a small CNN with BatchNorm and a 2-layer
    projector to 32-d unit vectors, 30 prototypes re-normalised before every step and frozen for
    the first 60 steps; codes from three Sinkhorn-Knopp iterations (eps 0.05) on each view, the
    swapped prediction loss at temperature 0.1. SGD momentum 0.9, lr 0.1 with a linear warm-up
    and cosine decay, weight decay 1e-6, batch 128; a nearest-centroid probe at the end."""
    g = _seed(seed)
    images, labels = _shape_images(g, 3200, classes=6, proto_seed=617)

    def augment(xb: torch.Tensor) -> torch.Tensor:
        b = xb.shape[0]
        shift = torch.randint(-3, 4, (2,), generator=g)
        xb = torch.roll(xb, (int(shift[0]), int(shift[1])), (2, 3))
        flip = torch.rand(b, 1, 1, 1, generator=g) < 0.5
        xb = torch.where(flip, xb.flip(3), xb)
        xb = xb * (0.7 + 0.6 * torch.rand(b, 1, 1, 1, generator=g))
        return xb + 0.05 * xb.abs().mean() * torch.randn(xb.shape, generator=g)

    def load(idx: torch.Tensor) -> torch.Tensor:
        x = images[idx].float()
        if bug != "inputs_x255":
            x = x / 255.0  # bug: the uint8 bytes go in as 0..255
        return (x - 0.45) / 0.25

    encoder = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )  # fmt: skip
    projector = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 32))
    prototypes = nn.Linear(32, 30, bias=False)
    model = nn.ModuleDict({"encoder": encoder, "projector": projector, "prototypes": prototypes})
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-6)
    sched = _warmup_cosine(opt, 30, steps, floor=0.01)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        with torch.no_grad():
            prototypes.weight.copy_(F.normalize(prototypes.weight, dim=1))
        x = load(torch.randint(0, 3000, (128,), generator=g))
        views = [augment(x), augment(x)]
        z = [F.normalize(projector(encoder(v)), dim=1) for v in views]
        scores = [prototypes(zi) for zi in z]
        with torch.no_grad():
            codes = [_sinkhorn(s.detach()) for s in scores]
        loss = -0.5 * sum(
            (codes[i] * F.log_softmax(scores[1 - i] / 0.1, dim=1)).sum(1).mean() for i in range(2)
        )
        opt.zero_grad()
        loss.backward()
        if step < 60:
            prototypes.weight.grad = None
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            print(f"step {step + 1}: loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        feats = F.normalize(encoder(load(torch.arange(3200))), dim=1)
        centroids = torch.stack([feats[:3000][labels[:3000] == c].mean(0) for c in range(6)])
        acc = ((feats[3000:] @ centroids.T).argmax(1) == labels[3000:]).float().mean().item()
    print(f"nearest-centroid probe acc {acc:.3f}")
    hook.close()
    return losses


def _token_grids(
    g: torch.Generator, n: int, side: int = 8, codes: int = 8
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, side * side) grids of "VQ codes" of simple scenes: a background code and a rectangle
    (2 to 5 cells a side) of an object code, 5 % of the codes replaced at random; the class
    (4) is the object code's pair (code // 2)."""
    background = torch.randint(0, codes, (n,), generator=g)
    obj = (background + torch.randint(1, codes, (n,), generator=g)) % codes
    h, w = torch.randint(2, 6, (2, n), generator=g)
    top = (torch.rand(n, generator=g) * (side - h + 1)).long()
    left = (torch.rand(n, generator=g) * (side - w + 1)).long()
    r = torch.arange(side)
    rows = (r[None] >= top[:, None]) & (r[None] < (top + h)[:, None])
    cols = (r[None] >= left[:, None]) & (r[None] < (left + w)[:, None])
    inside = rows[:, :, None] & cols[:, None, :]
    tokens = torch.where(inside, obj[:, None, None], background[:, None, None])
    noise = torch.rand(n, side, side, generator=g) < 0.05
    tokens = torch.where(noise, torch.randint(0, codes, (n, side, side), generator=g), tokens)
    return tokens.flatten(1), obj // 2


def maskgit_masked_token_generation(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """MaskGIT (Chang et al. 2022) on 8x8 grids of 8 VQ-style codes (a rectangle on a
    background): a 2-layer bidirectional transformer (class token prepended, dropout 0.1)
    predicts the masked codes; a mask ratio drawn from the cosine schedule each batch, the loss
    on masked positions only with label smoothing 0.1; AdamW betas (0.9, 0.96), weight decay
    0.045, lr 1e-3 after a linear warm-up, clipping at 1.0, batch 64. Every 100 steps,
    class-conditional samples by 8 steps of confidence-based iterative decoding in
    `model.eval()`."""
    g = _seed(seed)
    side, codes, d = 8, 8, 64
    n_tok = side * side
    mask_id = codes
    tokens, cls = _token_grids(g, 4000, side, codes)

    class BidirectionalTransformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(codes + 1, d)
            self.cls = nn.Embedding(4, d)
            self.pos = nn.Parameter(0.02 * torch.randn(n_tok + 1, d))
            layer = nn.TransformerEncoderLayer(d, 4, 128, dropout=0.1, batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, codes)

        def forward(self, idx: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
            x = torch.cat([self.cls(c)[:, None], self.tok(idx)], 1) + self.pos
            return self.head(self.ln(self.encoder(x)))[:, 1:]

    model = BidirectionalTransformer()
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.96), weight_decay=0.045)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 30))
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)

    @torch.no_grad()
    def sample(c: torch.Tensor, iters: int = 8) -> torch.Tensor:
        idx = torch.full((len(c), n_tok), mask_id)
        for i in range(iters):
            logits = model(idx, c)
            probs = logits.softmax(-1)
            pred = torch.multinomial(probs.flatten(0, 1), 1, generator=g).view(len(c), n_tok)
            conf = probs.gather(-1, pred[..., None]).squeeze(-1)
            masked = idx == mask_id
            conf = torch.where(masked, conf, torch.tensor(float("inf")))
            keep_masked = int(n_tok * math.cos(math.pi / 2 * (i + 1) / iters))
            idx = torch.where(masked, pred, idx)
            if keep_masked > 0:
                lowest = conf.topk(keep_masked, dim=1, largest=False).indices
                idx.scatter_(1, lowest, mask_id)
        return idx

    losses = []
    model.train()
    for step in range(steps):
        bi = torch.randint(0, 3600, (64,), generator=g)
        xb, cb = tokens[bi], cls[bi]
        ratio = torch.cos(math.pi / 2 * torch.rand(64, 1, generator=g))
        n_mask = (ratio * n_tok).ceil().clamp(min=1)
        rank = torch.rand(64, n_tok, generator=g).argsort(1).argsort(1)
        mask = rank < n_mask
        logits = model(torch.where(mask, torch.full_like(xb, mask_id), xb), cb)
        loss = criterion(logits[mask], xb[mask])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            samples = sample(torch.arange(4).repeat(4))
            counts = F.one_hot(samples, codes).sum(1)
            two_codes = (counts.topk(2, dim=1).values.sum(1) / n_tok).mean().item()  # scenes are two codes
            if bug != "train_in_eval_mode":
                model.train()  # bug: left out, the rest of training runs without dropout
            print(
                f"step {step + 1}: loss {loss.item():.4f} share of the two main codes in samples {two_codes:.3f}"
            )
    hook.close()
    return losses


class _HashGrid(nn.Module):
    """Instant-NGP's multiresolution hash encoding in 2-D: L levels of resolutions growing
    geometrically from `base` to `finest`, each a table of T feature vectors (F = 2) indexed
    densely when the level's grid fits, else by the spatial hash x * 1 xor y * 2654435761 mod T;
    bilinear interpolation of the four corners."""

    def __init__(
        self, levels: int = 8, table: int = 2**12, feats: int = 2, base: int = 8, finest: int = 128
    ) -> None:
        super().__init__()
        growth = math.exp((math.log(finest) - math.log(base)) / (levels - 1))
        self.res = [int(base * growth**lvl) for lvl in range(levels)]
        self.table = table
        self.embeddings = nn.Parameter(torch.empty(levels, table, feats).uniform_(-1e-4, 1e-4))

    def forward(self, xy: torch.Tensor) -> torch.Tensor:
        out = []
        for lvl, res in enumerate(self.res):
            pos = xy * res
            p0 = pos.floor().long()
            w = pos - p0
            feat = 0.0
            for dx in (0, 1):
                for dy in (0, 1):
                    cx, cy = p0[:, 0] + dx, p0[:, 1] + dy
                    if (res + 1) ** 2 <= self.table:
                        index = cx * (res + 1) + cy
                    else:
                        index = (cx ^ (cy * 2654435761)) % self.table
                    wx = w[:, 0] if dx else 1 - w[:, 0]
                    wy = w[:, 1] if dy else 1 - w[:, 1]
                    feat = feat + (wx * wy)[:, None] * self.embeddings[lvl, index]
            out.append(feat)
        return torch.cat(out, 1)


def instant_ngp_hash_grid_image(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """Instant-NGP (Mueller et al. 2022) fitting a 128x128 RGB image (soft discs, stripes and a
    fine checker texture): the multiresolution hash encoding (8 levels, 2^12 entries of 2
    features, resolutions 8..128) into a 64-wide 2-hidden-layer ReLU MLP with a sigmoid output;
    Adam betas (0.9, 0.99), eps 1e-15, lr 1e-2 (weight decay 1e-6 on the MLP only), batches of
    4096 random pixels, L2 loss; the PSNR of the whole image every 100 steps."""
    g = _seed(seed)
    side = 128
    r = (torch.arange(side).float() + 0.5) / side
    yy, xx = torch.meshgrid(r, r, indexing="ij")
    img = torch.stack([0.5 + 0.3 * torch.sin(9 * xx), 0.4 + 0.3 * torch.cos(7 * yy), 0.3 + 0.2 * xx * yy])
    for _ in range(6):
        cx, cy, rad = torch.rand(3, generator=g)
        disc = ((xx - cx) ** 2 + (yy - cy) ** 2).sqrt() < 0.08 + 0.15 * rad
        img = torch.where(disc, torch.rand(3, 1, 1, generator=g), img)
    checker = ((xx * 32).floor() + (yy * 32).floor()) % 2
    img = (img + 0.15 * checker * (xx > 0.5)).clamp(0, 1)
    coords = torch.stack([xx.flatten(), yy.flatten()], 1)
    target = img.flatten(1).T

    encoding = _HashGrid()
    mlp = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3))
    model = nn.Sequential(encoding, mlp)
    criterion = nn.MSELoss()
    opt = torch.optim.Adam(
        [{"params": encoding.parameters()}, {"params": mlp.parameters(), "weight_decay": 1e-6}],
        lr=1e-2, betas=(0.9, 0.99), eps=1e-15,
    )  # fmt: skip
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, side * side, (4096,), generator=g)
        loss = criterion(torch.sigmoid(model(coords[idx])), target[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                mse = F.mse_loss(torch.sigmoid(model(coords)), target).item()
            print(f"step {step + 1}: loss {loss.item():.5f} PSNR {-10 * math.log10(mse):.2f} dB")
    hook.close()
    return losses


class _ErrorTap(torch.autograd.Function):
    """Identity at the network's output whose backward keeps the global error e = dL/dy."""

    @staticmethod
    def forward(ctx: Any, y: torch.Tensor, store: dict[str, torch.Tensor]) -> torch.Tensor:
        ctx.store = store
        return y.view_as(y)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        ctx.store["e"] = grad
        return grad, None


class _DirectFeedback(torch.autograd.Function):
    """Identity after a hidden activation whose backward replaces the back-propagated gradient
    by the global error projected through a fixed random matrix: B_i e."""

    @staticmethod
    def forward(
        ctx: Any, h: torch.Tensor, feedback: torch.Tensor, store: dict[str, torch.Tensor]
    ) -> torch.Tensor:
        ctx.feedback, ctx.store = feedback, store
        return h.view_as(h)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        return ctx.store["e"] @ ctx.feedback, None, None


def dfa_direct_feedback_alignment(path: str, steps: int = 400, seed: int = 0) -> list[float]:
    """Direct feedback alignment (Noekland 2016): a 3x256 tanh MLP on flattened RGB shape images
    whose hidden layers learn from the output error sent straight to them through fixed random
    feedback matrices (two autograd Functions: a tap at the output storing dL/dy, an identity
    after each hidden activation whose backward returns B_i e), the last layer from its true
    gradient; cross-entropy, Adam 5e-4, batch 64, test accuracy every 100 steps."""
    g = _seed(seed)
    images, labels = _shape_images(g, 5000, classes=10, proto_seed=631)
    x_all = (images.float() / 255.0 - 0.5).flatten(1) / 0.25
    hidden, classes = 256, 10
    store: dict[str, torch.Tensor] = {}
    feedback = [torch.randn(classes, hidden, generator=g) / math.sqrt(classes) for _ in range(3)]

    class DFANet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(
                [nn.Linear(768, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)]
            )
            self.out = nn.Linear(hidden, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer, b in zip(self.layers, feedback, strict=True):
                x = _DirectFeedback.apply(torch.tanh(layer(x)), b, store)
            return _ErrorTap.apply(self.out(x), store)

    model = DFANet()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, 4500, (64,), generator=g)
        loss = criterion(model(x_all[idx]), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                acc = (model(x_all[4500:]).argmax(1) == labels[4500:]).float().mean().item()
            print(f"step {step + 1}: loss {loss.item():.4f} test acc {acc:.3f}")
    hook.close()
    return losses


class _CfCCell(nn.Module):
    """A closed-form continuous-time (CfC) cell (Hasani et al. 2022): a LeCun-tanh backbone on
    [x, h], two tanh heads f1 and f2 blended by a time gate sigmoid(t_a * dt + t_b) that depends
    on the elapsed time dt."""

    def __init__(self, n_in: int, hidden: int, backbone: int = 64) -> None:
        super().__init__()
        self.backbone = nn.Linear(n_in + hidden, backbone)
        self.ff1, self.ff2 = nn.Linear(backbone, hidden), nn.Linear(backbone, hidden)
        self.time_a, self.time_b = nn.Linear(backbone, hidden), nn.Linear(backbone, hidden)

    def forward(self, x: torch.Tensor, h: torch.Tensor, dt: torch.Tensor) -> torch.Tensor:
        z = 1.7159 * torch.tanh(0.666 * self.backbone(torch.cat([x, h], 1)))
        gate = torch.sigmoid(self.time_a(z) * dt[:, None] + self.time_b(z))
        return torch.tanh(self.ff1(z)) * (1 - gate) + gate * torch.tanh(self.ff2(z))


def cfc_irregular_series(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """A CfC (liquid) recurrent classifier of irregularly sampled series: three kinds of signal
    (a damped oscillation, a slow sawtooth, a noisy step) observed at 32 random times with
    exponential gaps; each observation is the value and the log of the time since the previous
    one (0 for the first), the gap also driving the CfC's time gate; hidden 32, Adam 3e-3 with
    ExponentialLR(0.8) per epoch, clipping at 1.0, batch 64, a test pass each epoch."""
    g = _seed(seed)
    n, length = 2600, 32
    gaps = torch.distributions.Exponential(torch.tensor(2.0)).sample((n, length))
    gaps[:, 0] = 0.0
    t = gaps.cumsum(1)
    kind = torch.randint(0, 3, (n,), generator=g)
    freq = 1.0 + torch.rand(n, 1, generator=g)
    phase = 2 * math.pi * torch.rand(n, 1, generator=g)
    damped = torch.exp(-0.1 * t) * torch.sin(freq * t + phase)
    saw = ((0.3 * freq * t + phase) % 2.0) - 1.0
    step = torch.where(t > 4 + 8 * torch.rand(n, 1, generator=g), 0.8, -0.8)
    value = torch.stack([damped, saw, step], 1)[torch.arange(n), kind] + 0.15 * torch.randn(
        n, length, generator=g
    )
    # bug: the log of the gaps, the first of which is 0, where log1p was meant
    log_gap = torch.log(gaps) if bug == "log_zero_nan" else torch.log1p(gaps)
    x_all = torch.stack([value, log_gap], 2)

    class CfCClassifier(nn.Module):
        def __init__(self, hidden: int = 32) -> None:
            super().__init__()
            self.hidden = hidden
            self.cell = _CfCCell(2, hidden)
            self.head = nn.Linear(hidden, 3)

        def forward(self, x: torch.Tensor, dt: torch.Tensor) -> torch.Tensor:
            h = x.new_zeros(x.shape[0], self.hidden)
            for i in range(x.shape[1]):
                h = self.cell(x[:, i], h, dt[:, i])
            return self.head(h)

    model = CfCClassifier()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.8)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(2200, generator=g)
        for i in range(0, 2200, 64):
            idx = perm[i : i + 64]
            loss = criterion(model(x_all[idx], gaps[idx]), kind[idx])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
        sched.step()
        model.eval()
        with torch.no_grad():
            acc = (model(x_all[2200:], gaps[2200:]).argmax(1) == kind[2200:]).float().mean().item()
        print(f"epoch {epoch + 1}: loss {np.mean(losses[-34:]):.4f} test acc {acc:.3f}")
    hook.close()
    return losses


class _SophiaG(torch.optim.Optimizer):
    """Sophia-G (Liu et al. 2023) as its repository writes it: an EMA of gradients, an EMA of
    the diagonal Gauss-Newton-Bartlett Hessian estimate refreshed by `update_hessian()` from the
    gradient of a loss on labels sampled from the model, and the clipped pre-conditioned update
    p -= lr * sign(m) * min(|m| / (rho * bs * h + 1e-15), 1) with decoupled weight decay."""

    def __init__(
        self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.965, 0.99), rho: float = 0.04,
        weight_decay: float = 0.1,
    ) -> None:  # fmt: skip
        super().__init__(params, {"lr": lr, "betas": betas, "rho": rho, "weight_decay": weight_decay})

    @torch.no_grad()
    def update_hessian(self) -> None:
        for group in self.param_groups:
            beta2 = group["betas"][1]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "hessian" not in state:
                    state["hessian"] = torch.zeros_like(p)
                state["hessian"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)

    @torch.no_grad()
    def step(self, closure: Any = None, bs: int = 1) -> None:  # type: ignore[override]
        for group in self.param_groups:
            beta1 = group["betas"][0]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "exp_avg" not in state:
                    state["exp_avg"] = torch.zeros_like(p)
                    state.setdefault("hessian", torch.zeros_like(p))
                p.mul_(1 - group["lr"] * group["weight_decay"])
                m = state["exp_avg"].mul_(beta1).add_(p.grad, alpha=1 - beta1)
                ratio = (m.abs() / (group["rho"] * bs * state["hessian"] + 1e-15)).clamp(max=1.0)
                p.addcmul_(m.sign(), ratio, value=-group["lr"])


def sophia_gpt_char_lm(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """A tiny GPT trained with Sophia-G in the loop of the Sophia repository's nanoGPT fork: a
    step on the batch loss (bs = batch x block tokens in the clipping threshold), and every
    k = 10 steps a Hessian refresh from the cross-entropy against labels sampled from the
    model's own softmax; lr 1e-3 with warm-up and cosine decay, betas (0.965, 0.99), rho 0.04,
    weight decay 0.1, clipping at 1.0, batch 24 of 40 tokens."""
    g = _seed(seed)
    vocab, length = 36, 41
    data = _markov_tokens(g, 3000, length, vocab, proto_seed=241)
    model = _TinyGPT(vocab, d=64, layers=2, heads=4, ctx=length)
    opt = _SophiaG(model.parameters(), lr=1e-3)
    sched = _warmup_cosine(opt, 20, steps)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    batch, k = 24, 10
    opt.zero_grad(set_to_none=True)
    for step in range(steps):
        xb = data[torch.randint(0, 2700, (batch,), generator=g)]
        loss = F.cross_entropy(model(xb[:, :-1]).flatten(0, 1), xb[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(bs=batch * (length - 1))
        if bug != "no_zero_grad":
            opt.zero_grad(set_to_none=True)  # bug: left out, gradients pile up between Hessian refreshes
        sched.step()
        losses.append(loss.item())
        if step % k == k - 1:
            logits = model(xb[:, :-1])
            sampled = torch.distributions.Categorical(logits=logits).sample()
            F.cross_entropy(logits.flatten(0, 1), sampled.flatten()).backward()
            opt.update_hessian()
            opt.zero_grad(set_to_none=True)
        if step % 100 == 99:
            with torch.no_grad():
                xv = data[2700:]
                val = F.cross_entropy(model(xv[:, :-1]).flatten(0, 1), xv[:, 1:].flatten()).item()
            print(f"step {step + 1}: loss {loss.item():.4f} val {val:.4f}")
    hook.close()
    return losses


def _rq_spline(
    x: torch.Tensor,
    w: torch.Tensor,
    h: torch.Tensor,
    d: torch.Tensor,
    bound: float = 3.0,
    min_bin: float = 1e-3,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The monotone rational-quadratic spline of neural spline flows on [-bound, bound] (K bins
    from unnormalised widths w, heights h and K - 1 interior derivatives d), the identity
    outside; returns y and log |dy/dx|."""
    k = w.shape[-1]
    inside = (x > -bound) & (x < bound)
    xi = x.clamp(-bound + 1e-6, bound - 1e-6)
    widths = min_bin + (1 - min_bin * k) * torch.softmax(w, -1)
    heights = min_bin + (1 - min_bin * k) * torch.softmax(h, -1)
    cw = F.pad(widths.cumsum(-1), (1, 0)) * 2 * bound - bound
    ch = F.pad(heights.cumsum(-1), (1, 0)) * 2 * bound - bound
    derivs = F.pad(min_bin + F.softplus(d), (1, 1), value=1.0)
    b = torch.searchsorted(cw[..., 1:-1].contiguous(), xi[..., None]).clamp(max=k - 1)
    x_k, y_k = cw.gather(-1, b).squeeze(-1), ch.gather(-1, b).squeeze(-1)
    w_k = (cw[..., 1:] - cw[..., :-1]).gather(-1, b).squeeze(-1)
    h_k = (ch[..., 1:] - ch[..., :-1]).gather(-1, b).squeeze(-1)
    d_k, d_k1 = derivs.gather(-1, b).squeeze(-1), derivs.gather(-1, b + 1).squeeze(-1)
    s = h_k / w_k
    theta = (xi - x_k) / w_k
    t1m = theta * (1 - theta)
    denom = s + (d_k1 + d_k - 2 * s) * t1m
    y = y_k + h_k * (s * theta**2 + d_k * t1m) / denom
    dnum = s**2 * (d_k1 * theta**2 + 2 * s * t1m + d_k * (1 - theta) ** 2)
    logdet = torch.log(dnum) - 2 * torch.log(denom)
    return torch.where(inside, y, x), torch.where(inside, logdet, torch.zeros_like(x))


def neural_spline_flow_moons(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A neural spline flow (Durkan et al. 2019) on noisy two moons: four rational-quadratic
    coupling layers (8 bins on [-3, 3], linear tails) alternating which coordinate conditions
    the other through a 2x64 ReLU conditioner, a standard normal base; the negative
    log-likelihood on Adam lr 1e-3 with cosine annealing, batch 256, a held-out NLL every 100
    steps."""
    g = _seed(seed)
    n, bins = 12000, 8
    theta = math.pi * torch.rand(n, generator=g)
    upper = torch.rand(n, generator=g) < 0.5
    x_all = torch.where(
        upper[:, None],
        torch.stack([torch.cos(theta), torch.sin(theta)], 1),
        torch.stack([1 - torch.cos(theta), 0.5 - torch.sin(theta)], 1),
    )
    x_all = (x_all - torch.tensor([0.5, 0.25])) * 1.5 + 0.08 * torch.randn(n, 2, generator=g)

    class Coupling(nn.Module):
        def __init__(self, flip: bool) -> None:
            super().__init__()
            self.flip = flip
            self.net = nn.Sequential(
                nn.Linear(1, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3 * bins - 1)
            )
            nn.init.zeros_(self.net[-1].weight)
            nn.init.zeros_(self.net[-1].bias)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            cond, moved = (x[:, 1:], x[:, :1]) if self.flip else (x[:, :1], x[:, 1:])
            p = self.net(cond)
            y, logdet = _rq_spline(moved[:, 0], p[:, :bins], p[:, bins : 2 * bins], p[:, 2 * bins :])
            out = torch.stack([y, cond[:, 0]], 1) if self.flip else torch.stack([cond[:, 0], y], 1)
            return out, logdet

    model = nn.ModuleList([Coupling(i % 2 == 1) for i in range(4)])
    base = torch.distributions.Normal(0.0, 1.0)

    def nll(x: torch.Tensor) -> torch.Tensor:
        total = torch.zeros(x.shape[0])
        for layer in model:
            x, logdet = layer(x)
            total = total + logdet
        return -(base.log_prob(x).sum(1) + total).mean()

    lr = 1e-1 if bug == "lr_x100" else 1e-3  # bug: 1e-1 typed for 1e-3
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        loss = nll(x_all[torch.randint(0, 10000, (256,), generator=g)])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                val = nll(x_all[10000:]).item()
            print(f"step {step + 1}: loss {loss.item():.4f} held-out NLL {val:.4f}")
    hook.close()
    return losses


class _GatedXAttnDense(nn.Module):
    """Flamingo's GATED XATTN-DENSE layer: cross-attention from the text to the visual tokens
    and a feed-forward, each added through tanh of a gate initialised at 0, so that the frozen
    LM starts unchanged."""

    def __init__(self, d: int, heads: int = 4) -> None:
        super().__init__()
        self.ln_attn, self.ln_ff = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.attn_gate = nn.Parameter(torch.zeros(1))
        self.ff_gate = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor, visual: torch.Tensor) -> torch.Tensor:
        h = self.ln_attn(x)
        x = x + torch.tanh(self.attn_gate) * self.attn(h, visual, visual, need_weights=False)[0]
        return x + torch.tanh(self.ff_gate) * self.ff(self.ln_ff(x))


def _caption_scenes(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(n, 3, 16, 16) float images of one coloured shape (4 shapes, 4 colours) at the left, centre
    or right on noise; their captions "<bos> a <colour> <shape> on the <side> <eos>" as token ids;
    and the shape labels."""
    masks = torch.zeros(4, 6, 6)
    masks[0] = 1.0  # square
    yy, xx = torch.meshgrid(torch.arange(6.0), torch.arange(6.0), indexing="ij")
    masks[1] = (((yy - 2.5) ** 2 + (xx - 2.5) ** 2) < 7).float()  # disc
    masks[2, 2:4, :] = 1.0
    masks[2, :, 2:4] = 1.0  # cross
    masks[3, :, 2:4] = 1.0  # bar
    palette = torch.tensor([[0.9, 0.1, 0.1], [0.1, 0.8, 0.2], [0.2, 0.3, 0.9], [0.9, 0.8, 0.1]])
    shape = torch.randint(0, 4, (n,), generator=g)
    colour = torch.randint(0, 4, (n,), generator=g)
    side = torch.randint(0, 3, (n,), generator=g)
    row = torch.randint(0, 10, (n,), generator=g)
    img = 0.25 * torch.rand(n, 3, 16, 16, generator=g)
    for i in range(n):
        c0 = int(side[i]) * 5
        patch = masks[shape[i]] * palette[colour[i]][:, None, None]
        r0 = int(row[i])
        img[i, :, r0 : r0 + 6, c0 : c0 + 6] = torch.maximum(img[i, :, r0 : r0 + 6, c0 : c0 + 6], patch)
    # vocabulary: 0 <bos> 1 <eos> 2 a 3 on 4 the, 5-8 colours, 9-12 shapes, 13-15 sides
    captions = torch.stack(
        [torch.zeros(n, dtype=torch.long), torch.full((n,), 2), 5 + colour, 9 + shape, torch.full((n,), 3),
         torch.full((n,), 4), 13 + side, torch.ones(n, dtype=torch.long)], 1,
    )  # fmt: skip
    return img, captions, shape


def flamingo_gated_xattn_captioning(
    path: str, steps: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Flamingo-style captioning (Alayrac et al. 2022): a tiny GPT pre-trained on the captions'
    text alone and a small CNN pre-trained to classify the shapes (neither recorded) are both
    frozen; a Perceiver-style resampler (4 learned latents cross-attending to the CNN's 16 patch
    features) and a GATED XATTN-DENSE layer before each LM block (tanh gates initialised at 0)
    are trained on next-token prediction of the captions; AdamW lr 1e-3, weight decay 0.1, a
    20-step warm-up, clipping at 1.0, batch 32; the caption tokens' accuracy every 50 steps."""
    g = _seed(seed)
    images, captions, shapes = _caption_scenes(g, 2400)
    d = 48

    lm = _TinyGPT(16, d=d, layers=2, heads=4, ctx=captions.shape[1])
    lm_opt = torch.optim.AdamW(lm.parameters(), lr=3e-3)
    for _ in range(200):  # text-only pre-training of the LM
        cb = captions[torch.randint(0, 2000, (64,), generator=g)]
        loss = F.cross_entropy(lm(cb[:, :-1]).flatten(0, 1), cb[:, 1:].flatten())
        lm_opt.zero_grad()
        loss.backward()
        lm_opt.step()
    vision = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, d, 3, stride=2, padding=1), nn.ReLU(),
                           nn.Conv2d(d, d, 3, stride=2, padding=1))  # fmt: skip
    probe = nn.Linear(d, 4)
    v_opt = torch.optim.Adam([*vision.parameters(), *probe.parameters()], lr=2e-3)
    for _ in range(150):  # the vision encoder's pre-training (shape classification)
        idx = torch.randint(0, 2000, (64,), generator=g)
        loss = F.cross_entropy(probe(vision(images[idx]).mean((2, 3))), shapes[idx])
        v_opt.zero_grad()
        loss.backward()
        v_opt.step()

    class Flamingo(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.vision, self.lm = vision, lm
            self.latents = nn.Parameter(0.02 * torch.randn(4, d))
            self.resampler = nn.MultiheadAttention(d, 4, batch_first=True)
            self.resampler_ln = nn.LayerNorm(d)
            self.xattn = nn.ModuleList([_GatedXAttnDense(d) for _ in lm.blocks])

        def forward(self, img: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
            patches = self.vision(img).flatten(2).transpose(1, 2)
            lat = self.latents.expand(img.shape[0], -1, -1)
            visual = self.resampler_ln(lat + self.resampler(lat, patches, patches, need_weights=False)[0])
            x = self.lm.tok(idx) + self.lm.pos(torch.arange(idx.shape[1]))
            for xattn, block in zip(self.xattn, self.lm.blocks, strict=True):
                x = block(xattn(x, visual))
            return self.lm.head(self.lm.ln_f(x))

    model = Flamingo()
    for p in [*model.vision.parameters(), *model.lm.parameters()]:
        p.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-3, weight_decay=0.1)
    if bug == "frozen_by_mistake":
        # bug: a line "to make sure only the new modules train", matching the resampler's name
        # only, freezes the gated cross-attention layers too
        for name, p in model.named_parameters():
            if not name.startswith(("resampler", "latents")):
                p.requires_grad_(False)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, 2000, (32,), generator=g)
        logits = model(images[idx], captions[idx, :-1])
        loss = criterion(logits.flatten(0, 1), captions[idx, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 49:
            with torch.no_grad():
                pred = model(images[2000:], captions[2000:, :-1]).argmax(-1)
                acc = (pred[:, [1, 2, 5]] == captions[2000:, [2, 3, 6]]).float().mean().item()
            print(f"step {step + 1}: loss {loss.item():.4f} colour/shape/side acc {acc:.3f}")
    hook.close()
    return losses


def _ssp(x: torch.Tensor) -> torch.Tensor:
    """SchNet's shifted softplus, ln(0.5 e^x + 0.5)."""
    return F.softplus(x) - math.log(2.0)


class _SSP(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ssp(x)


class _Interaction(nn.Module):
    """A SchNet interaction block: a filter-generating network on the radial basis expansion
    of the distances (times a cosine cutoff), a continuous-filter convolution over the
    neighbours, an atom-wise update added to the atom features."""

    def __init__(self, d: int, n_rbf: int) -> None:
        super().__init__()
        self.filter = nn.Sequential(nn.Linear(n_rbf, d), _SSP(), nn.Linear(d, d))
        self.in2f = nn.Linear(d, d, bias=False)
        self.f2out = nn.Sequential(nn.Linear(d, d), _SSP(), nn.Linear(d, d))

    def forward(self, x: torch.Tensor, rbf: torch.Tensor, cutoff: torch.Tensor) -> torch.Tensor:
        w = self.filter(rbf) * cutoff[..., None]  # (b, n, n, d)
        msg = (w * self.in2f(x)[:, None, :, :]).sum(2)
        return x + self.f2out(msg)


def schnet_molecular_energies(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """SchNet (Schuett et al. 2017) regressing the energies of 12-atom "molecules" (4 atom types
    on a jittered lattice, a pairwise Morse potential with type-dependent depths and equilibrium
    distances): type embeddings, 32 Gaussian radial bases up to a 5 A cosine cutoff, three
    interaction blocks with shifted-softplus filter networks, an atom-wise output network summed
    over atoms; MSE on standardised energies, Adam 1e-3, batch 32, ReduceLROnPlateau on the
    validation MAE checked every 50 steps (schnetpack's defaults, scaled down)."""
    g = _seed(seed)
    n_mol, n_atom, d, n_rbf = 2400, 12, 64, 32
    lattice = torch.stack(
        torch.meshgrid(torch.arange(3.0), torch.arange(2.0), torch.arange(2.0), indexing="ij"), -1
    )
    pos = 1.6 * lattice.view(1, n_atom, 3) + 0.35 * torch.randn(n_mol, n_atom, 3, generator=g)
    pos = pos @ torch.linalg.qr(torch.randn(n_mol, 3, 3, generator=g))[0]  # random orientations
    types = torch.randint(0, 4, (n_mol, n_atom), generator=g)
    depth = torch.tensor([1.0, 0.6, 1.4, 0.8])
    r0 = torch.tensor([1.2, 1.5, 1.4, 1.8])
    dist = torch.cdist(pos, pos)
    dd = torch.sqrt(depth[types][:, :, None] * depth[types][:, None, :])
    rr = 0.5 * (r0[types][:, :, None] + r0[types][:, None, :])
    pair = dd * ((1 - torch.exp(-1.5 * (dist - rr))) ** 2 - 1)
    off = ~torch.eye(n_atom, dtype=torch.bool)
    energy = 0.5 * (pair * off).sum((1, 2))
    mean, std = energy[:2000].mean(), energy[:2000].std()
    target = (energy - mean) / std
    centers = torch.linspace(0, 5, n_rbf)

    class SchNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(4, d)
            self.interactions = nn.ModuleList([_Interaction(d, n_rbf) for _ in range(3)])
            self.out = nn.Sequential(nn.Linear(d, d // 2), _SSP(), nn.Linear(d // 2, 1))

        def forward(self, z: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
            dij = torch.cdist(r, r)
            rbf = torch.exp(-10.0 * (dij[..., None] - centers) ** 2)
            cutoff = 0.5 * (torch.cos(dij * math.pi / 5.0) + 1) * (dij < 5.0) * off
            x = self.embedding(z)
            for block in self.interactions:
                x = block(x, rbf, cutoff)
            return self.out(x).sum((1, 2))

    model = SchNet()
    criterion = nn.MSELoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, 2000, (32,), generator=g)
        loss = criterion(model(types[idx], pos[idx]), target[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 49:
            with torch.no_grad():
                mae = (model(types[2000:], pos[2000:]) - target[2000:]).abs().mean().item() * float(std)
            plateau.step(mae)
            print(f"step {step + 1}: loss {loss.item():.4f} val MAE {mae:.3f} (energy std {float(std):.2f})")
    hook.close()
    return losses


class _Dice(nn.Module):
    """DIN's data-adaptive activation: p = sigmoid(BN(x)) gates x against alpha x."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(d, affine=False, eps=1e-8)
        self.alpha = nn.Parameter(torch.zeros(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        p = torch.sigmoid(self.bn(x.reshape(-1, shape[-1]))).view(shape)
        return p * x + (1 - p) * self.alpha * x


def din_deep_interest_ctr(path: str, epochs: int = 3, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Deep Interest Network (Zhou et al. 2018) for click-through prediction: each user's
    history of up to 20 clicked items (item and category embeddings, padded), a local activation
    unit (an MLP with Dice on [h, c, h - c, h * c]) weighting each past item against the
    candidate, the weights not softmax-normalised, sum pooling under the padding mask; a
    200-80-1 Dice MLP on [interest, candidate, user profile]; BCE with logits, Adam 1e-3,
    batch 256, three epochs over 36 000 impressions (half of them interest-matched
    candidates), a test AUC each epoch."""
    g = _seed(seed)
    n, items, cats, hist = 40000, 600, 24, 20
    item_cat = (torch.arange(items) - 1) % (cats - 1) + 1  # categories 1..23, item 0 and category 0 pad
    item_cat[0] = 0
    taste = torch.randn(4000, cats - 1, generator=g)  # each user's affinity for each category
    user = torch.randint(0, 4000, (n,), generator=g)
    lengths = torch.randint(4, hist + 1, (n,), generator=g)
    hcat = torch.multinomial(torch.softmax(2.0 * taste[user], -1), hist, replacement=True, generator=g) + 1
    history = hcat + (cats - 1) * torch.randint(0, (items - 1) // (cats - 1), (n, hist), generator=g)
    mask = torch.arange(hist)[None] < lengths[:, None]
    history = history * mask
    cand = torch.randint(1, items, (n,), generator=g)
    # half the impressions come from the retrieval stage's interest-matched candidates
    matched = hcat[:, 0] + (cats - 1) * torch.randint(0, (items - 1) // (cats - 1), (n,), generator=g)
    cand = torch.where(torch.rand(n, generator=g) < 0.5, matched, cand)
    overlap = ((item_cat[history] == item_cat[cand][:, None]) & mask).float().sum(1) / lengths
    logit = -2.5 + 6.0 * overlap + 0.3 * torch.randn(n, generator=g)
    clicks = torch.bernoulli(torch.sigmoid(logit), generator=g)
    if bug == "shuffled_labels":
        clicks = clicks[
            torch.randperm(n, generator=g)
        ]  # bug: labels from a copy of the log sorted another way
    profile = torch.randint(0, 8, (4000,), generator=g)[user]  # an age bucket

    class DIN(nn.Module):
        def __init__(self, di: int = 16, dc: int = 8) -> None:
            super().__init__()
            self.item = nn.Embedding(items, di, padding_idx=0)
            self.cat = nn.Embedding(cats, dc, padding_idx=0)
            self.age = nn.Embedding(8, 4)
            e = di + dc
            self.att = nn.Sequential(nn.Linear(4 * e, 36), _Dice(36), nn.Linear(36, 1))
            self.mlp = nn.Sequential(
                nn.Linear(2 * e + 4, 200), _Dice(200), nn.Linear(200, 80), _Dice(80), nn.Linear(80, 1)
            )

        def embed(self, i: torch.Tensor) -> torch.Tensor:
            return torch.cat([self.item(i), self.cat(item_cat[i])], -1)

        def forward(
            self, hist_items: torch.Tensor, m: torch.Tensor, c: torch.Tensor, age: torch.Tensor
        ) -> torch.Tensor:
            h, q = self.embed(hist_items), self.embed(c)[:, None].expand(-1, hist_items.shape[1], -1)
            w = self.att(torch.cat([h, q, h - q, h * q], -1)).squeeze(-1) * m
            interest = (w[..., None] * h).sum(1)
            return self.mlp(torch.cat([interest, q[:, 0], self.age(age)], -1)).squeeze(-1)

    def auc(score: torch.Tensor, y: torch.Tensor) -> float:
        rank = score.argsort().argsort().float() + 1
        pos = y.bool()
        return float((rank[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum()))

    model = DIN()
    criterion = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(36000, generator=g)
        for i in range(0, 36000, 256):
            idx = perm[i : i + 256]
            loss = criterion(model(history[idx], mask[idx], cand[idx], profile[idx]), clicks[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            score = model(history[36000:], mask[36000:], cand[36000:], profile[36000:])
        print(
            f"epoch {epoch + 1}: loss {np.mean(losses[-100:]):.4f} test AUC {auc(score, clicks[36000:]):.3f}"
        )
    hook.close()
    return losses


def her_dqn_bit_flipping(
    path: str, episodes: int = 240, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Hindsight experience replay (Andrychowicz et al. 2017) with a goal-conditioned DQN on the
    bit-flipping task (n = 8 bits, reward -1 until the state equals the goal, episodes of n
    steps): epsilon-greedy (0.2) episodes, each transition stored with its own goal and with
    k = 4 goals achieved later in the episode ("future"), four optimisation steps per episode on
    batches of 128 from the replay buffer, targets clipped to [-1 / (1 - gamma), 0], a Polyak
    target network (0.95), Adam 1e-3, Huber loss; the success rate of the greedy policy every
    100 episodes."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    n_bits, gamma, k_future = 8, 0.98, 4

    def q_network() -> nn.Module:
        if bug == "deep_sigmoid":  # bug: a deeper tower of sigmoid layers
            layers: list[nn.Module] = [nn.Linear(2 * n_bits, 128), nn.Sigmoid()]
            for _ in range(7):
                layers += [nn.Linear(128, 128), nn.Sigmoid()]
            return nn.Sequential(*layers, nn.Linear(128, n_bits))
        return nn.Sequential(nn.Linear(2 * n_bits, 256), nn.ReLU(), nn.Linear(256, n_bits))

    qnet = q_network()
    target = copy.deepcopy(qnet).requires_grad_(False)
    criterion = nn.SmoothL1Loss()
    opt = torch.optim.Adam(qnet.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(qnet)
    hook.register_loss(criterion)
    buffer: list[tuple[np.ndarray, int, float, np.ndarray, np.ndarray, float]] = []

    def act(state: np.ndarray, goal: np.ndarray, eps: float) -> int:
        if rng.random() < eps:
            return int(rng.integers(n_bits))
        with torch.no_grad():
            return int(qnet(torch.tensor(np.concatenate([state, goal]), dtype=torch.float32)).argmax())

    def success_rate(trials: int = 50) -> float:
        wins = 0
        for _ in range(trials):
            s, goal = rng.integers(0, 2, n_bits), rng.integers(0, 2, n_bits)
            for _ in range(n_bits):
                s = s.copy()
                s[act(s, goal, 0.0)] ^= 1
                if (s == goal).all():
                    wins += 1
                    break
        return wins / trials

    losses = []
    for episode in range(episodes):
        state, goal = rng.integers(0, 2, n_bits), rng.integers(0, 2, n_bits)
        trajectory = []
        for _ in range(n_bits):
            a = act(state, goal, 0.2)
            nxt = state.copy()
            nxt[a] ^= 1
            trajectory.append((state, a, nxt))
            state = nxt
            if (state == goal).all():
                break
        for t, (s, a, s2) in enumerate(trajectory):
            goals = [goal] + [trajectory[f][2] for f in rng.integers(t, len(trajectory), k_future)]
            for gl in goals:
                done = float((s2 == gl).all())
                buffer.append((s, a, -1.0 + done, s2, gl, done))
        buffer = buffer[-50000:]
        for _ in range(4):
            batch = [buffer[i] for i in rng.integers(0, len(buffer), 128)]
            s = torch.tensor(np.array([np.concatenate([b[0], b[4]]) for b in batch]), dtype=torch.float32)
            s2 = torch.tensor(np.array([np.concatenate([b[3], b[4]]) for b in batch]), dtype=torch.float32)
            a_t = torch.tensor([b[1] for b in batch])
            r_t = torch.tensor([b[2] for b in batch])
            done_t = torch.tensor([b[5] for b in batch])
            with torch.no_grad():
                y = r_t + gamma * (1 - done_t) * target(s2).max(1).values
                y = y.clamp(-1 / (1 - gamma), 0.0)
            q = qnet(s).gather(1, a_t[:, None]).squeeze(1)
            loss = criterion(q, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        with torch.no_grad():
            for p, tp in zip(qnet.parameters(), target.parameters(), strict=True):
                tp.mul_(0.95).add_(0.05 * p)
        if episode % 100 == 99:
            print(f"episode {episode + 1}: loss {np.mean(losses[-40:]):.4f} success {success_rate():.2f}")
    hook.close()
    return losses


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
    """A callback keeping each training batch's loss (`outputs["loss"]` or the returned tensor)."""
    import lightning.pytorch as pl

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    return LossHistory()


def lit_pcgrad_multitask(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """PCGrad gradient surgery (Yu et al. 2020) under Lightning's manual optimization: a shared
    2x128 ReLU trunk with three heads (a regression, a binary and a 5-way task drawn from one
    latent with partly conflicting directions); each task's gradient on the trunk by
    `torch.autograd.grad`, projected off the others' normal planes when they conflict (in a
    random order), summed and written into the trunk's `.grad` after `manual_backward` of the
    summed losses filled the heads'; Adam 1e-3, batch 128, a validation pass each epoch."""
    import lightning.pytorch as pl
    from torch.utils.data import DataLoader, TensorDataset

    g = _seed(seed)
    n, d = 5000, 20
    pg = torch.Generator().manual_seed(151)
    w_lat = torch.randn(d, 8, generator=pg) / math.sqrt(d)
    a, b, c = torch.randn(8, generator=pg), torch.randn(8, generator=pg), torch.randn(8, 5, generator=pg)
    b = b - 0.8 * a  # the binary task partly opposes the regression
    x = torch.randn(n, d, generator=g)
    z = torch.tanh(2 * x @ w_lat)
    y_reg = z @ a + 0.1 * torch.randn(n, generator=g)
    y_bin = ((z @ b + 0.3 * torch.randn(n, generator=g)) > 0).float()
    y_cls = (2 * z @ c - torch.log(-torch.log(torch.rand(n, 5, generator=g)))).argmax(1)

    class PCGradMTL(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.trunk = nn.Sequential(nn.Linear(d, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
            if bug == "dead_relu_init":
                for m in self.trunk:
                    if isinstance(m, nn.Linear):
                        nn.init.constant_(m.bias, -2.0)  # bug: a bias init copied from a sparse-coding script
            self.heads = nn.ModuleDict(
                {"reg": nn.Linear(128, 1), "bin": nn.Linear(128, 1), "cls": nn.Linear(128, 5)}
            )

        def task_losses(self, batch: Any) -> list[torch.Tensor]:
            xb, yr, yb, yc = batch
            h = self.trunk(xb)
            return [
                F.mse_loss(self.heads["reg"](h).squeeze(-1), yr),
                F.binary_cross_entropy_with_logits(self.heads["bin"](h).squeeze(-1), yb),
                F.cross_entropy(self.heads["cls"](h), yc),
            ]

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            opt = self.optimizers()
            losses = self.task_losses(batch)
            shared = list(self.trunk.parameters())
            flat = [
                torch.cat([gr.flatten() for gr in torch.autograd.grad(loss, shared, retain_graph=True)])
                for loss in losses
            ]
            projected = []
            for i, gi in enumerate(flat):
                gi = gi.clone()
                for j in torch.randperm(len(flat)).tolist():
                    if j != i and (dot := gi @ flat[j]) < 0:
                        gi = gi - dot / (flat[j].pow(2).sum() + 1e-12) * flat[j]
                projected.append(gi)
            merged = torch.stack(projected).sum(0)
            total = sum(losses)
            opt.zero_grad()
            self.manual_backward(total)
            offset = 0
            for p in shared:
                p.grad.copy_(merged[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
            opt.step()
            self.log("train_loss", total.detach())
            return total.detach()

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            reg, bce, ce = self.task_losses(batch)
            self.log_dict({"val_mse": reg, "val_bce": bce, "val_ce": ce})

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    data = TensorDataset(x, y_reg, y_bin, y_cls)
    train = DataLoader(torch.utils.data.Subset(data, range(4500)), batch_size=128, shuffle=True, generator=g)
    val = DataLoader(torch.utils.data.Subset(data, range(4500, n)), batch_size=500)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(PCGradMTL(), train, val)
    print({k: round(float(v), 4) for k, v in trainer.callback_metrics.items()})
    return history.losses


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


def keras_gmlp_image_classifier(path: str, seed: int = 0) -> list[float]:
    """gMLP (Liu et al. 2021) image classification in Keras 3, after the keras.io "modern MLP
    models" example: 4x4 patches (`keras.ops.image.extract_patches`) embedded by a `Dense`, two
    gMLP blocks (a GELU channel projection to 2d, the spatial gating unit: half the channels
    layer-normed and projected across the patches by a `Dense` with `bias_initializer="Ones"`,
    multiplying the other half), average pooling, dropout and a 6-way `Dense` of logits; uint8
    16x16 RGB images through `Rescaling(1/255)`; AdamW 3e-3 with weight decay 1e-4,
    `ReduceLROnPlateau(factor=0.5, patience=2)`, batch 128, 8 epochs, `validation_split=0.1`."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, labels = _shape_images(g, 3000, classes=6, proto_seed=641)
    x, y = images.permute(0, 2, 3, 1).numpy(), labels.numpy()
    num_patches, patch, d = 16, 4, 64

    class Patches(layers.Layer):
        def call(self, inputs: Any) -> Any:
            patches = keras.ops.image.extract_patches(inputs, patch)
            return keras.ops.reshape(patches, (-1, num_patches, patch * patch * 3))

    class GMLPLayer(layers.Layer):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            self.channel_projection1 = keras.Sequential(
                [layers.Dense(2 * d, activation="gelu"), layers.Dropout(0.1)]
            )
            self.channel_projection2 = layers.Dense(d)
            self.spatial_projection = layers.Dense(num_patches, bias_initializer="Ones")
            self.normalize1 = layers.LayerNormalization(epsilon=1e-6)
            self.normalize2 = layers.LayerNormalization(epsilon=1e-6)

        def spatial_gating_unit(self, x: Any) -> Any:
            u, v = keras.ops.split(x, 2, axis=2)
            v = self.normalize2(v)
            v = keras.ops.transpose(self.spatial_projection(keras.ops.transpose(v, (0, 2, 1))), (0, 2, 1))
            return u * v

        def call(self, inputs: Any) -> Any:
            x = self.channel_projection1(self.normalize1(inputs))
            return inputs + self.channel_projection2(self.spatial_gating_unit(x))

    inputs = keras.Input(shape=(16, 16, 3))
    h = layers.Rescaling(1.0 / 255)(inputs)
    h = layers.Dense(d)(Patches()(h))
    h = GMLPLayer()(h)
    h = GMLPLayer()(h)
    h = layers.GlobalAveragePooling1D()(h)
    h = layers.Dropout(0.2)(h)
    model = keras.Model(inputs, layers.Dense(6)(h))
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=3e-3, weight_decay=1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    history = _keras_losses()
    fit = model.fit(
        x.astype("float32"), y, batch_size=128, epochs=8, validation_split=0.1, verbose=0,
        callbacks=[keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=2),
                   mldbg.keras.Hook(path), history],
    )  # fmt: skip
    print({k: round(float(v[-1]), 4) for k, v in fit.history.items()})
    return history.losses


# ============================================================================= the pipelines

_mtp = healthy("multi_token_prediction_four_heads_lm", "multi-token prediction LM", multi_token_prediction_lm)
_swav = healthy(
    "swav_sinkhorn_swapped_prototypes", "SwAV (Sinkhorn-Knopp prototypes)", swav_sinkhorn_prototypes
)
_maskgit = healthy(
    "maskgit_cosine_mask_token_generation",
    "MaskGIT masked generative transformer",
    maskgit_masked_token_generation,
)
_cfc = healthy(
    "cfc_liquid_irregular_time_series", "CfC (closed-form continuous-time) RNN", cfc_irregular_series
)
_sophia = healthy("sophia_g_hessian_clipped_gpt", "Sophia-G second-order optimizer LM", sophia_gpt_char_lm)
_nsf = healthy(
    "neural_spline_flow_rq_coupling_moons",
    "neural spline flow (rational-quadratic)",
    neural_spline_flow_moons,
)
_flamingo = healthy(
    "flamingo_gated_xattn_frozen_lm_captions", "Flamingo gated cross-attention captioning",
    flamingo_gated_xattn_captioning,
)  # fmt: skip
_din = healthy("din_deep_interest_network_ctr", "Deep Interest Network click-through", din_deep_interest_ctr)
_her = healthy("her_goal_dqn_bit_flipping", "hindsight experience replay (goal DQN)", her_dqn_bit_flipping)

PIPELINES: list[Any] = [
    _mtp,
    healthy("bitnet_b158_ternary_weights_lm", "BitNet b1.58 ternary LM", bitnet_b158_ternary_lm),
    healthy("kto_unpaired_desirable_undesirable", "KTO preference alignment", kto_unpaired_preference),
    _swav,
    _maskgit,
    healthy(
        "instant_ngp_multires_hash_grid_image", "Instant-NGP hash-grid image fit", instant_ngp_hash_grid_image
    ),
    healthy("direct_feedback_alignment_tanh_mlp", "direct feedback alignment", dfa_direct_feedback_alignment),
    _cfc,
    _sophia,
    _nsf,
    _flamingo,
    healthy("schnet_continuous_filter_energies", "SchNet molecular energies", schnet_molecular_energies),
    _din,
    _her,
    buggy(_nsf, "lr_x100"),
    buggy(_sophia, "no_zero_grad"),
    buggy(_din, "shuffled_labels"),
    buggy(_swav, "inputs_x255"),
    buggy(_mtp, "softmax_before_ce"),
    buggy(_her, "deep_sigmoid"),
    buggy(_flamingo, "frozen_by_mistake"),
    buggy(_cfc, "log_zero_nan"),
    buggy(_maskgit, "train_in_eval_mode"),
]

if installed("lightning"):
    _lit_pcgrad = healthy(
        "lightning_pcgrad_manual_multitask", "Lightning PCGrad multi-task", lit_pcgrad_multitask
    )
    PIPELINES += [_lit_pcgrad, buggy(_lit_pcgrad, "dead_relu_init")]

if installed("keras", "tensorflow"):
    PIPELINES += [
        healthy(
            "keras_gmlp_spatial_gating_images", "Keras gMLP image classifier", keras_gmlp_image_classifier
        )
    ]
