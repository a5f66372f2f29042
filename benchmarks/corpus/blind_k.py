"""The seventh blind held-out set (issue 26), first half: plain PyTorch trainings of kinds the
corpus did not have yet, each written the way a practitioner of that kind writes it, with the
README's two lines, data generated in-process, fixed seeds, one CPU thread.

A deep equilibrium model trained with Jacobian-free backprop, a modern Hopfield retrieval layer,
a Conv-TasNet-style separator with permutation-invariant SI-SNR, a FastSpeech-style
duration-regulated mel regressor, a biaffine dependency parser, a ProdLDA topic model, a
sketch-RNN stroke decoder (bivariate Gaussian mixtures + pen states), a ConvLSTM nowcaster, a
spatio-temporal GCN traffic forecaster, an R-GCN entity classifier, DiffPool graph
classification, a GNS-style learned particle simulator, a DNA motif CNN, first-order DARTS, IBP
certified training, adversarial debiasing with gradient projection, a BranchyNet early-exit CNN,
SelectiveNet, an RSSM world model, OpenAI-style evolution strategies, deep supervised hashing,
RotNet rotation prediction, a temporal-fusion-transformer-style quantile forecaster, an echo
state network readout, CREPE pitch estimation, FlowNetS-style optical flow, partial-convolution
inpainting, a SiamFC tracker, a DnCNN denoiser and a neural Turing machine on the copy task.

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the parser's zero_grad dropped, the sketch decoder's standard deviations through a ReLU
(log of zero), the ConvLSTM's encoder frozen by a left-over fine-tuning line, the DNA labels
re-read in another order, the debiasing predictor as eight sigmoid layers, BranchyNet's exits
returning probabilities into CrossEntropyLoss, SelectiveNet's body initialised with a negative
bias, RotNet fed raw uint8 pixels, CREPE left in eval mode after its first validation, DnCNN's
learning rate a hundred times too high.

Written without ever running mldbg's rules on them; health was checked from the losses alone.
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import BLIND6, buggy, healthy

SPLIT = BLIND6

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 7)


def _glyphs(g: torch.Generator, n: int, size: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 grey images (n, 1, size, size) of six asymmetric glyphs (an L, a T, an arrow, a
    wedge, a hook, a bar with a dot) at random offsets and contrast, with their class."""
    s = size
    protos = torch.zeros(6, s, s)
    c = s // 2
    protos[0, 2 : s - 2, 3] = 1
    protos[0, s - 3, 3 : s - 3] = 1  # L
    protos[1, 2, 2 : s - 2] = 1
    protos[1, 2 : s - 2, c] = 1  # T
    for i in range(4):
        protos[2, c - i, 2 + i] = 1
        protos[2, c + i, 2 + i] = 1
    protos[2, c, 2 : s - 2] = 1  # arrow
    for i in range(s - 4):
        protos[3, 2 + i, 2 : 2 + i // 2 + 1] = 1  # wedge
    protos[4, 2 : s - 3, s - 4] = 1
    protos[4, s - 3, 3 : s - 3] = 1
    protos[4, s - 4, 3] = 1  # hook
    protos[5, c - 1 : c + 1, 2 : s - 4] = 1
    protos[5, 2:4, s - 4 : s - 2] = 1  # bar + dot
    y = torch.randint(0, 6, (n,), generator=g)
    shift = torch.randint(-1, 2, (n, 2), generator=g)
    imgs = torch.stack(
        [torch.roll(protos[int(k)], (int(a), int(b)), (0, 1)) for k, (a, b) in zip(y, shift, strict=True)]
    )
    imgs = imgs * (0.6 + 0.4 * torch.rand(n, 1, 1, generator=g)) + 0.1 * torch.rand(n, s, s, generator=g)
    return (imgs.clamp(0, 1) * 255).round().to(torch.uint8).unsqueeze(1), y


def _spirals(g: torch.Generator, n: int, arms: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.randint(0, arms, (n,), generator=g)
    r = torch.rand(n, generator=g)
    t = 4.0 * r + 2 * math.pi * y / arms + 0.2 * torch.randn(n, generator=g)
    x = torch.stack([r * torch.cos(t), r * torch.sin(t)], 1) * 2
    return x, y


# ----------------------------------------------------------------------------- deep equilibrium (JFB)


class DEQ(nn.Module):
    """z* = LayerNorm(relu(W z* + U x)) found by forward iteration without a graph; the backward
    pass goes through one last application of the map (Jacobian-free backprop, Fung et al.)."""

    def __init__(self, d_in: int = 2, width: int = 64, classes: int = 3):
        super().__init__()
        self.inj = nn.Linear(d_in, width)
        self.W = nn.Linear(width, width, bias=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)
        self.iters = 0

    def f(self, z: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return self.norm(F.relu(self.W(z) + u))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = self.inj(x)
        with torch.no_grad():
            z = torch.zeros_like(u)
            for self.iters in range(1, 31):
                z_next = self.f(z, u)
                gap = (z_next - z).norm() / (z_next.norm() + 1e-8)
                z = z_next
                if gap < 1e-3:
                    break
        z = self.f(z, u)
        return self.head(z)


def deq_jfb_spirals(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    g = _seed(seed)
    x, y = _spirals(g, 3000)
    model = DEQ()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, len(x), (128,), generator=g)
        logits = model(x[idx])
        loss = F.cross_entropy(logits, y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f} fixed-point iters {model.iters}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- modern Hopfield retrieval


class HopfieldRetrieval(nn.Module):
    """Ramsauer et al.'s update xi <- softmax(beta * (xi W_q)(Y W_k)^T) Y, two iterations, the
    query a corrupted copy of one stored pattern."""

    def __init__(self, d: int = 32, hidden: int = 64):
        super().__init__()
        self.q = nn.Linear(d, hidden, bias=False)
        self.k = nn.Linear(d, hidden, bias=False)
        self.log_beta = nn.Parameter(torch.tensor(math.log(1 / math.sqrt(hidden))))

    def forward(self, xi: torch.Tensor, stored: torch.Tensor) -> torch.Tensor:
        keys = self.k(stored)
        for _ in range(2):
            att = torch.softmax(self.log_beta.exp() * self.q(xi) @ keys.transpose(1, 2), -1)
            xi = att @ stored  # raw stored patterns as values: a convex combination of memories
        return xi


def hopfield_associative_retrieval(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    g = _seed(seed)
    d, n_stored = 32, 12
    model = HopfieldRetrieval(d)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        stored = torch.sign(torch.randn(64, n_stored, d, generator=g))
        which = torch.randint(0, n_stored, (64,), generator=g)
        target = stored[torch.arange(64), which].unsqueeze(1)
        flip = torch.rand(64, 1, d, generator=g) < 0.25
        query = torch.where(flip, -target, target)
        out = model(query, stored)
        loss = F.mse_loss(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step}: retrieval mse {loss.item():.4f} beta {model.log_beta.exp().item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- source separation


class TasNet(nn.Module):
    """Learned encoder, a small dilated depthwise-separable separator emitting two masks, a
    transposed-conv decoder (Conv-TasNet's shape, much shrunk)."""

    def __init__(self, n: int = 32, L: int = 16, b: int = 32, h: int = 64):  # noqa: N803
        super().__init__()
        self.encoder = nn.Conv1d(1, n, L, stride=L // 2, bias=False)
        self.bottleneck = nn.Sequential(nn.GroupNorm(1, n), nn.Conv1d(n, b, 1))
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.Conv1d(b, h, 1),
                nn.PReLU(),
                nn.GroupNorm(1, h),
                nn.Conv1d(h, h, 3, padding=d, dilation=d, groups=h),
                nn.PReLU(),
                nn.GroupNorm(1, h),
                nn.Conv1d(h, b, 1),
            )  # fmt: skip
            for d in (1, 2, 4, 8)
        )
        self.mask = nn.Sequential(nn.PReLU(), nn.Conv1d(b, 2 * n, 1))
        self.decoder = nn.ConvTranspose1d(n, 1, L, stride=L // 2, bias=False)
        self.n = n

    def forward(self, mix: torch.Tensor) -> torch.Tensor:
        w = F.relu(self.encoder(mix.unsqueeze(1)))
        h = self.bottleneck(w)
        for block in self.blocks:
            h = h + block(h)
        m = torch.sigmoid(self.mask(h)).view(len(mix), 2, self.n, -1)
        out = torch.stack([self.decoder(w * m[:, k]).squeeze(1) for k in range(2)], 1)
        return out[..., : mix.shape[-1]]


def _si_snr(est: torch.Tensor, ref: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    est = est - est.mean(-1, keepdim=True)
    ref = ref - ref.mean(-1, keepdim=True)
    proj = (est * ref).sum(-1, keepdim=True) * ref / (ref.pow(2).sum(-1, keepdim=True) + eps)
    noise = est - proj
    return 10 * torch.log10(proj.pow(2).sum(-1) / (noise.pow(2).sum(-1) + eps) + eps)


def tasnet_pit_si_snr(path: str, steps: int = 150, seed: int = 0) -> list[float]:
    g = _seed(seed)
    T = 256  # noqa: N806
    t = torch.arange(T) / 8000

    def sources(bs: int) -> torch.Tensor:
        f1 = 200 + 300 * torch.rand(bs, 1, generator=g)
        f2 = 700 + 800 * torch.rand(bs, 1, generator=g)
        harm = torch.sin(2 * math.pi * f1 * t) + 0.5 * torch.sin(4 * math.pi * f1 * t)
        saw = 2 * ((f2 * t + torch.rand(bs, 1, generator=g)) % 1) - 1
        gains = 0.5 + torch.rand(bs, 2, 1, generator=g)
        return torch.stack([harm, saw], 1) * gains

    model = TasNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        src = sources(16)
        mix = src.sum(1)
        est = model(mix)
        p1 = _si_snr(est, src).mean(1)
        p2 = _si_snr(est.flip(1), src).mean(1)
        loss = -torch.maximum(p1, p2).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step}: neg SI-SNR {loss.item():.2f} dB")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- FastSpeech-style TTS


class FastSpeechLite(nn.Module):
    def __init__(self, vocab: int = 24, d: int = 64, mels: int = 20):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.pos = nn.Parameter(torch.randn(1, 64, d) * 0.02)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, 2, 128, dropout=0.1, batch_first=True),
            2,
            enable_nested_tensor=False,
        )
        self.duration = nn.Sequential(
            nn.Conv1d(d, d, 3, padding=1),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Conv1d(d, d, 3, padding=1),
            nn.ReLU(),
        )
        self.dur_norm = nn.LayerNorm(d)
        self.dur_out = nn.Linear(d, 1)
        self.decoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, 2, 128, dropout=0.1, batch_first=True),
            2,
            enable_nested_tensor=False,
        )
        self.mel = nn.Linear(d, mels)

    def forward(
        self, tokens: torch.Tensor, durations: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        pad = tokens == 0
        h = self.encoder(self.emb(tokens) + self.pos[:, : tokens.shape[1]], src_key_padding_mask=pad)
        log_dur = self.dur_out(self.dur_norm(self.duration(h.transpose(1, 2)).transpose(1, 2))).squeeze(-1)
        # length regulator with the ground-truth durations (teacher forcing of the alignment)
        frames = [torch.repeat_interleave(h[b], durations[b], dim=0) for b in range(len(tokens))]
        lengths = torch.tensor([len(f) for f in frames])
        expanded = nn.utils.rnn.pad_sequence(frames, batch_first=True)
        frame_pad = torch.arange(expanded.shape[1])[None] >= lengths[:, None]
        out = self.decoder(
            expanded + self.pos[:, : expanded.shape[1]].repeat(1, 1, 1), src_key_padding_mask=frame_pad
        )
        return self.mel(out), log_dur, frame_pad


def fastspeech_duration_mel(path: str, steps: int = 120, seed: int = 0) -> list[float]:
    g = _seed(seed)
    vocab, mels = 24, 20
    templates = torch.rand(vocab, mels, generator=g) * 4 - 2  # each phone's log-mel colour
    phone_dur = torch.randint(1, 5, (vocab,), generator=g)

    def batch(bs: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        lens = torch.randint(4, 9, (bs,), generator=g)
        tokens = torch.zeros(bs, 8, dtype=torch.long)
        durs = torch.zeros(bs, 8, dtype=torch.long)
        mel_list = []
        for b in range(bs):
            tok = torch.randint(1, vocab, (int(lens[b]),), generator=g)
            d = phone_dur[tok] + torch.randint(0, 2, tok.shape, generator=g)
            tokens[b, : len(tok)] = tok
            durs[b, : len(tok)] = d
            m = torch.repeat_interleave(templates[tok], d, dim=0)
            ramp = torch.linspace(-0.3, 0.3, len(m))[:, None]  # a falling intonation over the utterance
            mel_list.append(m + ramp + 0.1 * torch.randn(m.shape, generator=g))
        return tokens, durs, nn.utils.rnn.pad_sequence(mel_list, batch_first=True)

    model = FastSpeechLite(vocab, 64, mels)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    warmup = 400  # the Noam schedule FastSpeech inherits, warm-up shortened for a few hundred steps
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 64**-0.5 * min((s + 1) ** -0.5, (s + 1) * warmup**-1.5)
    )
    mel_loss_fn = nn.L1Loss(reduction="none")
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        tokens, durs, mel = batch(16)
        pred, log_dur, frame_pad = model(tokens, durs)
        keep = (~frame_pad).unsqueeze(-1).float()
        mel_loss = (mel_loss_fn(pred, mel) * keep).sum() / (keep.sum() * mel.shape[-1])
        tok_mask = tokens != 0
        dur_loss = F.mse_loss(log_dur[tok_mask], torch.log(durs[tok_mask].float() + 1))
        loss = mel_loss + dur_loss
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step}: mel l1 {mel_loss.item():.3f} dur mse {dur_loss.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- biaffine dependency parser


def _toy_treebank(g: torch.Generator, n: int, n_tags: int = 12) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Sentences of tag ids whose head is the nearest word (left first) of a strictly higher
    rank (tag % 4); a word of the top rank attaches to the first top-rank word, that one to ROOT.
    Heads index the sentence with ROOT at 0."""
    out = []
    for _ in range(n):
        length = int(torch.randint(5, 15, (1,), generator=g))
        tags = torch.randint(1, n_tags + 1, (length,), generator=g)
        rank = (tags % 4).tolist()
        top = rank.index(max(rank))
        heads = []
        for i in range(length):
            head = None
            for dist in range(1, length):
                for j in (i - dist, i + dist):
                    if 0 <= j < length and rank[j] > rank[i]:
                        head = j
                        break
                if head is not None:
                    break
            heads.append(0 if i == top else (top + 1 if head is None else head + 1))
        out.append((tags, torch.tensor(heads)))
    return out


class BiaffineParser(nn.Module):
    def __init__(self, n_tags: int = 13, emb: int = 50, hidden: int = 100, arc: int = 100):
        super().__init__()
        self.emb = nn.Embedding(n_tags + 1, emb, padding_idx=0)  # index n_tags + 0 = pad, ROOT = its own id
        self.root = nn.Parameter(torch.randn(emb) * 0.1)
        self.lstm = nn.LSTM(emb, hidden, num_layers=2, bidirectional=True, batch_first=True, dropout=0.33)
        self.mlp_dep = nn.Sequential(nn.Linear(2 * hidden, arc), nn.LeakyReLU(0.1), nn.Dropout(0.33))
        self.mlp_head = nn.Sequential(nn.Linear(2 * hidden, arc), nn.LeakyReLU(0.1), nn.Dropout(0.33))
        self.U = nn.Parameter(torch.zeros(arc, arc))
        self.u = nn.Parameter(torch.zeros(arc))

    def forward(self, tags: torch.Tensor) -> torch.Tensor:
        x = self.emb(tags)
        x = torch.cat([self.root.expand(len(tags), 1, -1), x], 1)
        h, _ = self.lstm(x)
        dep, head = self.mlp_dep(h), self.mlp_head(h)
        return dep @ self.U @ head.transpose(1, 2) + (head @ self.u).unsqueeze(1)  # [b, dependent, head]


def biaffine_dependency_parser(
    path: str, steps: int = 120, seed: int = 0, bug: str | None = None
) -> list[float]:
    g = _seed(seed)
    bank = _toy_treebank(g, 1000)
    model = BiaffineParser()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.9))
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, len(bank), (32,), generator=g)
        sents = [bank[int(i)] for i in idx]
        tags = nn.utils.rnn.pad_sequence([s[0] for s in sents], batch_first=True)
        heads = nn.utils.rnn.pad_sequence([s[1] for s in sents], batch_first=True, padding_value=-100)
        scores = model(tags)[:, 1:]  # ROOT is never a dependent
        word_mask = torch.cat([torch.ones(len(tags), 1, dtype=torch.bool), tags != 0], 1)
        scores = scores.masked_fill(~word_mask[:, None, :], float("-inf"))
        loss = F.cross_entropy(scores.reshape(-1, scores.shape[-1]), heads.reshape(-1), ignore_index=-100)
        if bug != "no_zero_grad":
            opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            uas = (scores.argmax(-1) == heads)[heads != -100].float().mean()
            print(f"step {step}: arc loss {loss.item():.3f} UAS {uas.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ProdLDA topic model


class ProdLDA(nn.Module):
    def __init__(self, vocab: int, topics: int, hidden: int = 100, dropout: float = 0.2):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Linear(vocab, hidden),
            nn.Softplus(),
            nn.Linear(hidden, hidden),
            nn.Softplus(),
            nn.Dropout(dropout),
        )
        self.mu = nn.Linear(hidden, topics)
        self.mu_bn = nn.BatchNorm1d(topics, affine=False)
        self.logvar = nn.Linear(hidden, topics)
        self.logvar_bn = nn.BatchNorm1d(topics, affine=False)
        self.drop_theta = nn.Dropout(dropout)
        self.beta = nn.Linear(topics, vocab, bias=False)
        self.beta_bn = nn.BatchNorm1d(vocab, affine=False)
        alpha = torch.full((topics,), 1.0)  # Laplace approximation of a Dirichlet(1) prior
        self.register_buffer("prior_mu", alpha.log() - alpha.log().mean())
        self.register_buffer("prior_var", (1 / alpha) * (1 - 2 / topics) + (1 / alpha).sum() / topics**2)

    def forward(self, bow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.enc(bow)
        mu, logvar = self.mu_bn(self.mu(h)), self.logvar_bn(self.logvar(h))
        z = mu + (0.5 * logvar).exp() * torch.randn_like(mu)
        theta = self.drop_theta(torch.softmax(z, 1))
        recon = torch.softmax(self.beta_bn(self.beta(theta)), 1)
        var = logvar.exp()
        kl = 0.5 * (
            (var / self.prior_var)
            + (mu - self.prior_mu).pow(2) / self.prior_var
            - 1
            + self.prior_var.log()
            - logvar
        ).sum(1)
        return recon, kl


def prodlda_topics(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    g = _seed(seed)
    vocab, topics = 200, 8
    word_topic = torch.full((topics, vocab), 0.02)
    for k in range(topics):
        word_topic[k, k * 25 : (k + 1) * 25] += 1.0
    word_topic /= word_topic.sum(1, keepdim=True)
    theta = torch.distributions.Dirichlet(torch.full((topics,), 0.3)).sample((4000,))
    docs = torch.stack(
        [
            torch.bincount(
                torch.multinomial(th @ word_topic, 60, replacement=True, generator=g), minlength=vocab
            )
            for th in theta
        ]
    ).float()
    model = ProdLDA(vocab, topics)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.99, 0.999))
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        bow = docs[torch.randint(0, len(docs), (200,), generator=g)]
        recon, kl = model(bow)
        nll = -(bow * torch.log(recon + 1e-10)).sum(1)
        loss = (nll + kl).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step}: elbo loss {loss.item():.2f} (kl {kl.mean().item():.2f})")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- sketch-rnn decoder


def _polygon_strokes(g: torch.Generator, n: int, max_len: int = 24) -> torch.Tensor:
    """Stroke-5 sequences (dx, dy, pen_down, pen_up, end) of closed polygons with 3 to 6 sides,
    drawn in 2 or 3 segments per side, random size and rotation; padded with end-of-sketch."""
    out = torch.zeros(n, max_len, 5)
    out[:, :, 4] = 1
    for i in range(n):
        sides = int(torch.randint(3, 7, (1,), generator=g))
        segs = int(torch.randint(2, 4, (1,), generator=g))
        r = 0.5 + torch.rand(1, generator=g).item()
        rot = 2 * math.pi * torch.rand(1, generator=g).item()
        pts = []
        for k in range(sides + 1):
            a = rot + 2 * math.pi * k / sides
            pts.append((r * math.cos(a), r * math.sin(a)))
        rows = []
        for k in range(sides):
            (x0, y0), (x1, y1) = pts[k], pts[k + 1]
            for _ in range(segs):
                rows.append([(x1 - x0) / segs, (y1 - y0) / segs, 1, 0, 0])
        rows = rows[: max_len - 1]
        rows[-1][2:] = [0, 1, 0]
        seq = torch.tensor(rows) + torch.cat(
            [0.02 * torch.randn(len(rows), 2, generator=g), torch.zeros(len(rows), 3)], 1
        )
        out[i, : len(rows)] = seq
    return out


class SketchDecoder(nn.Module):
    def __init__(self, hidden: int = 128, mixtures: int = 5, bug: str | None = None):
        super().__init__()
        self.lstm = nn.LSTM(5, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 6 * mixtures + 3)
        self.m = mixtures
        self.bug = bug

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h, _ = self.lstm(x)
        y = self.out(h)
        pi, mx, my, sx, sy, rho = y[..., : 6 * self.m].split(self.m, -1)
        pen = y[..., 6 * self.m :]
        if self.bug == "log_zero_nan":  # "a standard deviation is positive": a ReLU instead of exp
            sx, sy = F.relu(sx), F.relu(sy)
        else:
            sx, sy = sx.exp(), sy.exp()
        return torch.log_softmax(pi, -1), mx, my, sx, sy, torch.tanh(rho), pen


def sketch_rnn_gmm_decoder(path: str, steps: int = 250, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    data = _polygon_strokes(g, 2000)
    scale = data[..., :2][data[..., 2] + data[..., 3] > 0].std()
    data[..., :2] /= scale
    sos = torch.tensor([0.0, 0, 1, 0, 0])
    model = SketchDecoder(bug=bug)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9999)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        target = data[torch.randint(0, len(data), (32,), generator=g)]
        inp = torch.cat([sos.expand(32, 1, 5), target[:, :-1]], 1)
        log_pi, mx, my, sx, sy, rho, pen = model(inp)
        dx, dy = target[..., 0:1], target[..., 1:2]
        zx, zy = (dx - mx) / sx, (dy - my) / sy
        z = zx**2 + zy**2 - 2 * rho * zx * zy
        log_n = (
            -z / (2 * (1 - rho**2))
            - math.log(2 * math.pi)
            - torch.log(sx)
            - torch.log(sy)
            - 0.5 * torch.log(1 - rho**2)
        )
        drawing = 1 - target[..., 4]
        ls = -(torch.logsumexp(log_pi + log_n, -1) * drawing).sum() / (32 * target.shape[1])
        lp = F.cross_entropy(pen.reshape(-1, 3), target[..., 2:].argmax(-1).reshape(-1))
        loss = ls + lp
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step}: Ls {ls.item():.3f} Lp {lp.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ConvLSTM nowcasting


class ConvLSTMCell(nn.Module):
    def __init__(self, c_in: int, hidden: int, k: int = 3):
        super().__init__()
        self.conv = nn.Conv2d(c_in + hidden, 4 * hidden, k, padding=k // 2)
        self.hidden = hidden

    def forward(
        self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h, c = state
        i, f, o, gg = self.conv(torch.cat([x, h], 1)).chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


class Nowcaster(nn.Module):
    def __init__(self, hidden: int = 12):
        super().__init__()
        self.encoder = ConvLSTMCell(1, hidden)
        self.forecaster = ConvLSTMCell(hidden, hidden)
        self.head = nn.Conv2d(hidden, 1, 1)
        self.hidden = hidden

    def forward(self, frames: torch.Tensor, horizon: int = 2) -> torch.Tensor:
        b, t, _, hh, ww = frames.shape
        s1 = (frames.new_zeros(b, self.hidden, hh, ww), frames.new_zeros(b, self.hidden, hh, ww))
        s2 = s1
        for k in range(t):
            s1 = self.encoder(frames[:, k], s1)
            s2 = self.forecaster(s1[0], s2)
        preds = []
        for _ in range(horizon):
            s2 = self.forecaster(s2[0], s2)
            preds.append(self.head(s2[0]))
        return torch.stack(preds, 1)  # logits


def _moving_blobs(g: torch.Generator, n: int, t: int, size: int = 16) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    pos = torch.rand(n, 2, generator=g) * (size - 6) + 3
    vel = (torch.rand(n, 2, generator=g) - 0.5) * 2.0
    out = []
    for _ in range(t):
        d2 = (yy - pos[:, 0, None, None]) ** 2 + (xx - pos[:, 1, None, None]) ** 2
        out.append(torch.exp(-d2 / 4.0))
        pos = pos + vel
        bounce = (pos < 2) | (pos > size - 3)
        vel = torch.where(bounce, -vel, vel)
        pos = pos.clamp(2, size - 3)
    return torch.stack(out, 1).unsqueeze(2)


def convlstm_nowcasting(path: str, steps: int = 80, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    model = Nowcaster()
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9)
    if bug == "frozen_by_mistake":  # a fine-tuning script's "freeze the encoder" line left in
        for p in model.encoder.parameters():
            p.requires_grad = False
    criterion = nn.BCEWithLogitsLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        seq = _moving_blobs(g, 16, 7, size=12)
        pred = model(seq[:, :5], horizon=2)
        loss = criterion(pred, seq[:, 5:])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 3.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step}: bce {loss.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- STGCN traffic forecasting


class STConvBlock(nn.Module):
    """Gated temporal conv (GLU) -> graph conv with the normalised adjacency -> gated temporal
    conv -> LayerNorm over (nodes, channels), as in Yu et al.'s STGCN."""

    def __init__(self, c_in: int, c_hid: int, c_out: int, n_nodes: int, kt: int = 3):
        super().__init__()
        self.t1 = nn.Conv2d(c_in, 2 * c_hid, (kt, 1))
        self.theta = nn.Linear(c_hid, c_hid)
        self.t2 = nn.Conv2d(c_hid, 2 * c_out, (kt, 1))
        self.norm = nn.LayerNorm([n_nodes, c_out])
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor, a_hat: torch.Tensor) -> torch.Tensor:  # x: [b, c, t, n]
        x = F.glu(self.t1(x), 1)
        x = F.relu(self.theta(torch.einsum("nm,bctm->btnc", a_hat, x))).permute(0, 3, 1, 2)
        x = F.glu(self.t2(x), 1)
        return self.drop(self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2))


class STGCN(nn.Module):
    def __init__(self, n_nodes: int, t_in: int = 12, horizon: int = 3):
        super().__init__()
        self.b1 = STConvBlock(1, 16, 32, n_nodes)
        self.b2 = STConvBlock(32, 16, 32, n_nodes)
        t_left = t_in - 8
        self.out = nn.Sequential(nn.Conv2d(32, 32, (t_left, 1)), nn.ReLU(), nn.Conv2d(32, horizon, 1))

    def forward(self, x: torch.Tensor, a_hat: torch.Tensor) -> torch.Tensor:
        return self.out(self.b2(self.b1(x, a_hat), a_hat)).squeeze(2)  # [b, horizon, n]


def stgcn_traffic_speeds(path: str, steps: int = 200, seed: int = 0) -> list[float]:
    g = _seed(seed)
    n = 16
    adj = torch.zeros(n, n)
    for i in range(n):
        adj[i, (i + 1) % n] = adj[(i + 1) % n, i] = 1
    for i, j in ((0, 8), (4, 12), (2, 10)):
        adj[i, j] = adj[j, i] = 1
    a = adj + torch.eye(n)
    d = a.sum(1).rsqrt()
    a_hat = d[:, None] * a * d[None]
    # speeds: a daily profile per sensor plus congestion that diffuses along the road graph
    T = 3000  # noqa: N806
    tt = torch.arange(T).float()
    daily = 60 - 15 * torch.relu(torch.sin(2 * math.pi * tt / 288))[:, None] * (
        0.5 + torch.rand(1, n, generator=g)
    )
    cong = torch.zeros(T, n)
    for k in range(1, T):
        shock = (torch.rand(n, generator=g) < 0.01).float() * 20
        cong[k] = 0.9 * (a_hat @ cong[k - 1]) + shock
    speed = daily - cong + torch.randn(T, n, generator=g)
    mean, std = speed.mean(), speed.std()
    z = (speed - mean) / std
    model = STGCN(n)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100, gamma=0.7)
    criterion = nn.L1Loss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        starts = torch.randint(0, T - 15, (32,), generator=g)
        x = torch.stack([z[s : s + 12] for s in starts]).unsqueeze(1)
        y = torch.stack([z[s + 12 : s + 15] for s in starts])
        loss = criterion(model(x, a_hat), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step}: MAE {loss.item() * std.item():.2f} km/h")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- R-GCN entity classification


class RGCNLayer(nn.Module):
    """Schlichtkrull et al.'s relational graph conv with basis decomposition and a self-loop."""

    def __init__(self, d_in: int, d_out: int, n_rel: int, n_bases: int = 2):
        super().__init__()
        self.bases = nn.Parameter(torch.empty(n_bases, d_in, d_out))
        self.coef = nn.Parameter(torch.empty(n_rel, n_bases))
        self.self_loop = nn.Linear(d_in, d_out)
        nn.init.xavier_uniform_(self.bases)
        nn.init.xavier_uniform_(self.coef)

    def forward(
        self, h: torch.Tensor, adjs: torch.Tensor
    ) -> torch.Tensor:  # adjs: [rel, n, n] row-normalised
        w = torch.einsum("rb,bio->rio", self.coef, self.bases)
        return self.self_loop(h) + torch.einsum("rnm,mi,rio->no", adjs, h, w)


def rgcn_entity_classification(path: str, epochs: int = 100, seed: int = 0) -> list[float]:
    g = _seed(seed)
    n, classes = 400, 4
    y = torch.randint(0, classes, (n,), generator=g)
    rels = []
    for r in range(3):
        src = torch.randint(0, n, (1200,), generator=g)
        if r == 0:  # works_with: same class
            pool = [torch.nonzero(y == c).squeeze(1) for c in range(classes)]
            dst = torch.stack(
                [pool[int(y[s])][torch.randint(0, len(pool[int(y[s])]), (1,), generator=g)][0] for s in src]
            )
        elif r == 1:  # reports_to: the next class up
            pool = [torch.nonzero(y == c).squeeze(1) for c in range(classes)]
            dst = torch.stack(
                [
                    pool[(int(y[s]) + 1) % classes][
                        torch.randint(0, len(pool[(int(y[s]) + 1) % classes]), (1,), generator=g)
                    ][0]
                    for s in src
                ]
            )
        else:  # mentions: noise
            dst = torch.randint(0, n, (1200,), generator=g)
        a = torch.zeros(n, n)
        a[dst, src] = 1.0
        rels += [a, a.t().contiguous()]  # each relation and its inverse
    adjs = torch.stack(rels)
    adjs = adjs / adjs.sum(2, keepdim=True).clamp(min=1)
    x = torch.eye(n)  # featureless entities, as in the paper
    train = torch.rand(n, generator=g) < 0.3
    l1, l2 = RGCNLayer(n, 16, 6), RGCNLayer(16, classes, 6)
    model = nn.ModuleDict({"l1": l1, "l2": l2})
    opt = torch.optim.Adam(
        [{"params": l1.parameters(), "weight_decay": 5e-4}, {"params": l2.parameters()}], lr=1e-2
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        h = F.dropout(F.relu(l1(x, adjs)), 0.2, model.training)
        logits = l2(h, adjs)
        loss = F.cross_entropy(logits[train], y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if epoch % 25 == 0:
            acc = (logits[~train].argmax(1) == y[~train]).float().mean()
            print(f"epoch {epoch}: loss {loss.item():.4f} test acc {acc.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DiffPool graph classification


class DenseSAGE(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.lin = nn.Linear(2 * d_in, d_out)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        agg = adj @ x / adj.sum(-1, keepdim=True).clamp(min=1)
        return F.normalize(F.relu(self.lin(torch.cat([x, agg], -1))), dim=-1)


class DiffPoolNet(nn.Module):
    def __init__(self, d_in: int, hidden: int = 32, clusters: int = 5, classes: int = 3):
        super().__init__()
        self.embed = nn.ModuleList([DenseSAGE(d_in, hidden), DenseSAGE(hidden, hidden)])
        self.assign = nn.ModuleList([DenseSAGE(d_in, hidden), DenseSAGE(hidden, clusters)])
        self.after = nn.ModuleList([DenseSAGE(hidden, hidden), DenseSAGE(hidden, hidden)])
        self.bn = nn.BatchNorm1d(2 * hidden)
        self.readout = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        z, s = x, x
        for layer in self.embed:
            z = layer(z, adj)
        for layer in self.assign:
            s = layer(s, adj)
        s = torch.softmax(s, -1)
        x2 = s.transpose(1, 2) @ z
        a2 = s.transpose(1, 2) @ adj @ s
        link = (adj - s @ s.transpose(1, 2)).norm(dim=(1, 2)).mean() / adj.shape[1] ** 2
        ent = (-s * torch.log(s + 1e-15)).sum(-1).mean()
        for layer in self.after:
            x2 = layer(x2, a2)
        pooled = torch.cat([z.max(1).values, x2.max(1).values], -1)
        return self.readout(self.bn(pooled)), link, ent


def _graph_batch(g: torch.Generator, bs: int, n: int = 20) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three classes: two dense communities, a ring lattice with chords, a star of cliques."""
    y = torch.randint(0, 3, (bs,), generator=g)
    adj = torch.zeros(bs, n, n)
    for b in range(bs):
        r = torch.rand(n, n, generator=g)
        if y[b] == 0:
            same = (torch.arange(n)[:, None] < n // 2) == (torch.arange(n)[None] < n // 2)
            a = (r < torch.where(same, 0.5, 0.03)).float()
        elif y[b] == 1:
            d = (torch.arange(n)[:, None] - torch.arange(n)[None]).abs()
            a = ((d == 1) | (d == 2) | (d == n - 1) | (r < 0.04)).float()
        else:
            grp = torch.arange(n) // 5
            a = ((grp[:, None] == grp[None]) & (r < 0.8)).float()
            a[0, ::5] = a[::5, 0] = 1.0
        a = torch.triu(a, 1)
        adj[b] = a + a.t()
    deg = adj.sum(-1, keepdim=True)
    x = torch.cat([deg / 10, torch.ones_like(deg), torch.randn(bs, n, 2, generator=g) * 0.1], -1)
    return x, adj, y


def diffpool_graph_classification(path: str, steps: int = 200, seed: int = 0) -> list[float]:
    g = _seed(seed)
    model = DiffPoolNet(4)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        x, adj, y = _graph_batch(g, 20)
        logits, link, ent = model(x, adj)
        loss = F.cross_entropy(logits, y) + link + ent
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.4f} (link {link.item():.4f} entropy {ent.item():.3f})")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- GNS-style learned simulator


def _mlp_ln(d_in: int, d_out: int, hidden: int = 64, norm: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Linear(d_in, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, d_out),
    ]
    if norm:
        layers.append(nn.LayerNorm(d_out))
    return nn.Sequential(*layers)


class GNSimulator(nn.Module):
    """Encode-process-decode (Sanchez-Gonzalez et al.): node MLP from the last velocities, edge
    MLP from relative displacement, three residual interaction steps, an acceleration decoder."""

    def __init__(self, history: int = 3, latent: int = 64, steps: int = 3):
        super().__init__()
        self.node_enc = _mlp_ln(2 * history + 4, latent)
        self.edge_enc = _mlp_ln(3, latent)
        self.edge_fns = nn.ModuleList(_mlp_ln(3 * latent, latent) for _ in range(steps))
        self.node_fns = nn.ModuleList(_mlp_ln(2 * latent, latent) for _ in range(steps))
        self.decoder = _mlp_ln(latent, 2, norm=False)

    def forward(self, pos_hist: torch.Tensor, radius: float) -> torch.Tensor:  # [b, t, n, 2]
        pos = pos_hist[:, -1]
        vel = pos_hist[:, 1:] - pos_hist[:, :-1]
        b, n = pos.shape[:2]
        walls = torch.cat([pos + 1, 1 - pos], -1).clamp(max=radius) / radius  # distance to the box walls
        nodes = self.node_enc(torch.cat([vel.permute(0, 2, 1, 3).reshape(b, n, -1) / 0.05, walls], -1))
        rel = (pos[:, :, None] - pos[:, None]) / radius
        dist = rel.norm(dim=-1, keepdim=True)
        mask = ((dist < 1) & ~torch.eye(n, dtype=torch.bool)[None, :, :, None]).float()
        edges = self.edge_enc(torch.cat([rel, dist], -1))
        for fe, fn in zip(self.edge_fns, self.node_fns, strict=True):
            pair = torch.cat(
                [edges, nodes[:, :, None].expand(-1, -1, n, -1), nodes[:, None].expand(-1, n, -1, -1)], -1
            )
            edges = edges + fe(pair)
            nodes = nodes + fn(torch.cat([nodes, (edges * mask).sum(2)], -1))
        return self.decoder(nodes)


def _particles(g: torch.Generator, n_traj: int, t: int, n: int = 10) -> torch.Tensor:
    """Soft balls in a [-1, 1] box: short-range repulsion, gravity, damped wall bounces."""
    pos = torch.rand(n_traj, n, 2, generator=g) * 1.6 - 0.8
    vel = torch.randn(n_traj, n, 2, generator=g) * 0.02
    out = []
    for _ in range(t):
        rel = pos[:, :, None] - pos[:, None]
        d = rel.norm(dim=-1, keepdim=True) + 1e-6
        push = (rel / d * torch.relu(0.3 - d) * 0.05).sum(2)
        vel = 0.98 * vel + push + torch.tensor([0.0, -0.002])
        pos = pos + vel
        hit = pos.abs() > 1
        vel = torch.where(hit, -0.5 * vel, vel)
        pos = pos.clamp(-1, 1)
        out.append(pos)
    return torch.stack(out, 1)


def gns_particle_simulator(path: str, steps: int = 150, seed: int = 0) -> list[float]:
    g = _seed(seed)
    traj = _particles(g, 64, 60)
    acc = traj[:, 2:] - 2 * traj[:, 1:-1] + traj[:, :-2]
    acc_mean, acc_std = acc.mean((0, 1, 2)), acc.std((0, 1, 2))
    model = GNSimulator()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (1e-6 / 1e-4 + (1 - 1e-6 / 1e-4) * 0.1 ** (s / 5e6)) * 1.0
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        b = torch.randint(0, 64, (8,), generator=g)
        t0 = torch.randint(0, 60 - 5, (8,), generator=g)
        window = torch.stack([traj[i, t : t + 5] for i, t in zip(b, t0, strict=True)])  # 4 inputs + target
        noise = torch.cumsum(
            torch.randn(window[:, :4].shape, generator=g) * (3e-4 / 2), 1
        )  # random-walk noise
        hist = window[:, :4] + noise
        target_acc = window[:, 4] - 2 * hist[:, 3] + hist[:, 2]  # the acceleration that undoes the noise
        pred = model(hist, radius=0.3)
        loss = F.mse_loss(pred, (target_acc - acc_mean) / acc_std)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step}: normalised acceleration mse {loss.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DeepSEA-style motif CNN


def deepsea_motif_cnn(path: str, epochs: int = 4, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    n, length, n_feat = 2000, 100, 6
    seqs = torch.randint(0, 4, (n, length), generator=g)
    motifs = torch.randint(0, 4, (n_feat, 6), generator=g)
    labels = (torch.rand(n, n_feat, generator=g) < 0.25).float()
    for i in range(n):
        for f in torch.nonzero(labels[i]).squeeze(1).tolist():
            at = int(torch.randint(0, length - 6, (1,), generator=g))
            seqs[i, at : at + 6] = motifs[f]
    x = F.one_hot(seqs, 4).permute(0, 2, 1).float()
    if bug == "shuffled_labels":  # labels re-read from a table sorted differently from the sequences
        labels = labels[torch.randperm(n, generator=g)]
    model = nn.Sequential(
        nn.Conv1d(4, 64, 9, padding=4), nn.BatchNorm1d(64), nn.ReLU(), nn.MaxPool1d(4), nn.Dropout(0.2),
        nn.Conv1d(64, 96, 5, padding=2), nn.BatchNorm1d(96), nn.ReLU(), nn.AdaptiveMaxPool1d(1),
        nn.Flatten(), nn.Linear(96, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, n_feat),
    )  # fmt: skip
    criterion = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, labels), batch_size=32, shuffle=True
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            loss = criterion(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: loss {np.mean(losses[-len(loader) :]):.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- first-order DARTS


_OPS = {
    "none": lambda c: _Zero(),
    "skip": lambda c: nn.Identity(),
    "avg_pool": lambda c: nn.AvgPool2d(3, 1, 1, count_include_pad=False),
    "max_pool": lambda c: nn.MaxPool2d(3, 1, 1),
    "conv3": lambda c: nn.Sequential(nn.ReLU(), nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c, affine=False)),
    "dil_conv3": lambda c: nn.Sequential(
        nn.ReLU(), nn.Conv2d(c, c, 3, padding=2, dilation=2, groups=c, bias=False), nn.Conv2d(c, c, 1, bias=False),
        nn.BatchNorm2d(c, affine=False),
    ),
}  # fmt: skip


class _Zero(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.0


class MixedOp(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.ops = nn.ModuleList(make(c) for make in _OPS.values())

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return sum(wi * op(x) for wi, op in zip(w, self.ops, strict=True))


class SuperNet(nn.Module):
    """Two cells of three mixed edges (in -> n1, in -> n2, n1 -> n2), architecture weights
    alpha kept apart from the network weights, as in Liu et al."""

    def __init__(self, c: int = 16, classes: int = 6):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))
        self.cells = nn.ModuleList(nn.ModuleList(MixedOp(c) for _ in range(3)) for _ in range(2))
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(c, classes)
        self.alphas = nn.Parameter(1e-3 * torch.randn(2, 3, len(_OPS)))

    def weights(self) -> list[nn.Parameter]:
        return [p for name, p in self.named_parameters() if name != "alphas"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for ci, cell in enumerate(self.cells):
            w = torch.softmax(self.alphas[ci], -1)
            n1 = cell[0](h, w[0])
            n2 = cell[1](h, w[1]) + cell[2](n1, w[2])
            h = self.pool(n1 + n2)
        return self.head(h.mean((2, 3)))


def darts_first_order_search(path: str, steps: int = 50, seed: int = 0) -> list[float]:
    g = _seed(seed)
    imgs, y = _glyphs(g, 2000)
    x = imgs.float() / 255
    x = (x - x.mean()) / x.std()
    train_idx, val_idx = torch.arange(0, 1000), torch.arange(1000, 2000)
    model = SuperNet(c=12)
    w_opt = torch.optim.SGD(model.weights(), lr=0.025, momentum=0.9, weight_decay=3e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(w_opt, steps, eta_min=1e-3)
    a_opt = torch.optim.Adam([model.alphas], lr=3e-4, betas=(0.5, 0.999), weight_decay=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        vb = val_idx[torch.randint(0, 1000, (32,), generator=g)]
        a_opt.zero_grad()
        F.cross_entropy(model(x[vb]), y[vb]).backward()
        a_opt.step()
        tb = train_idx[torch.randint(0, 1000, (32,), generator=g)]
        w_opt.zero_grad()
        loss = F.cross_entropy(model(x[tb]), y[tb])
        loss.backward()
        nn.utils.clip_grad_norm_(model.weights(), 5.0)
        w_opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 20 == 0:
            best = [list(_OPS)[int(i)] for i in model.alphas.argmax(-1).flatten()]
            print(f"step {step}: loss {loss.item():.4f} genotype {best}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- IBP certified training


def _ibp(layers: nn.Sequential, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    for layer in layers:
        if isinstance(layer, nn.Linear):
            mid, rad = (hi + lo) / 2, (hi - lo) / 2
            mid = layer(mid)
            rad = rad @ layer.weight.abs().t()
            lo, hi = mid - rad, mid + rad
        elif isinstance(layer, nn.Flatten):
            lo, hi = layer(lo), layer(hi)
        else:  # monotone activations
            lo, hi = layer(lo), layer(hi)
    return lo, hi


def ibp_certified_training(path: str, steps: int = 400, seed: int = 0) -> list[float]:
    g = _seed(seed)
    imgs, y = _glyphs(g, 4000)
    x = imgs.float() / 255
    model = nn.Sequential(
        nn.Flatten(), nn.Linear(144, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 6)
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    eps_max, ramp = 0.05, (50, 300)  # Gowal et al.: eps and kappa ramped linearly after a warm-up
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        frac = min(max((step - ramp[0]) / (ramp[1] - ramp[0]), 0.0), 1.0)
        eps, kappa = eps_max * frac, 1.0 - 0.5 * frac
        idx = torch.randint(0, len(x), (100,), generator=g)
        xb, yb = x[idx], y[idx]
        logits = model(xb)
        lo, hi = _ibp(model, (xb - eps).clamp(0, 1), (xb + eps).clamp(0, 1))
        worst = torch.where(F.one_hot(yb, 6).bool(), lo, hi)
        loss = kappa * F.cross_entropy(logits, yb) + (1 - kappa) * F.cross_entropy(worst, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0:
            verified = (worst.argmax(1) == yb).float().mean()
            print(f"step {step}: eps {eps:.3f} loss {loss.item():.4f} verified {verified.item():.2f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- adversarial debiasing


def adversarial_debiasing_income(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Zhang, Lemoine & Mitchell (2018) as AIF360 writes it: the predictor's gradient has its
    projection on the adversary's gradient removed and the adversary's gradient subtracted."""
    g = _seed(seed)
    n = 6000
    z = (torch.rand(n, generator=g) < 0.4).float()  # protected attribute
    x = torch.randn(n, 10, generator=g)
    x[:, 0] += 1.0 * z  # a proxy of the protected attribute
    x[:, 1] += 0.5 * z
    logit = 1.5 * x[:, 2] - x[:, 3] + 0.8 * x[:, 4] * x[:, 5] + 0.7 * x[:, 0]
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    x = (x - x.mean(0)) / x.std(0)
    if bug == "deep_sigmoid":  # "a smooth predictor, the deeper the better"
        layers: list[nn.Module] = []
        for i in range(8):
            layers += [nn.Linear(10 if i == 0 else 64, 64), nn.Sigmoid()]
        predictor = nn.Sequential(*layers, nn.Linear(64, 1))
    else:
        predictor = nn.Sequential(nn.Linear(10, 100), nn.ReLU(), nn.Dropout(0.2), nn.Linear(100, 1))
    adversary = nn.Sequential(nn.Linear(3, 1))  # sees sigmoid((1 + |c|) * logit), its products with y
    c = nn.Parameter(torch.ones(1))
    p_opt = torch.optim.Adam(predictor.parameters(), lr=1e-3)
    a_opt = torch.optim.Adam([*adversary.parameters(), c], lr=1e-3)
    sched = torch.optim.lr_scheduler.ExponentialLR(p_opt, 0.96 ** (1 / 1000))
    alpha = 0.1
    hook = Hook(path)
    hook.register_module(predictor)
    hook.register_module(adversary)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, n, (128,), generator=g)
        xb, yb, zb = x[idx], y[idx], z[idx]
        p_logit = predictor(xb).squeeze(1)
        p_loss = F.binary_cross_entropy_with_logits(p_logit, yb)
        s = torch.sigmoid((1 + c.abs()) * p_logit)
        a_logit = adversary(torch.stack([s, s * yb, s * (1 - yb)], 1)).squeeze(1)
        a_loss = F.binary_cross_entropy_with_logits(a_logit, zb)
        params = list(predictor.parameters())
        grad_p = torch.autograd.grad(p_loss, params, retain_graph=True)
        grad_a = torch.autograd.grad(a_loss, params, retain_graph=True, allow_unused=True)
        p_opt.zero_grad()
        for p, gp, ga in zip(params, grad_p, grad_a, strict=True):
            ga = torch.zeros_like(gp) if ga is None else ga
            unit = ga / (ga.norm() + 1e-8)
            p.grad = gp - (gp * unit).sum() * unit - alpha * ga
        p_opt.step()
        sched.step()
        a_opt.zero_grad()
        a_loss.backward(inputs=[*adversary.parameters(), c])
        a_opt.step()
        losses.append(p_loss.item())
        if step % 100 == 0:
            print(f"step {step}: predictor {p_loss.item():.4f} adversary {a_loss.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- BranchyNet early exits


class BranchyCNN(nn.Module):
    """A CNN with a side exit after its first block; inference stops at the first exit whose
    softmax entropy is under a threshold, training sums the weighted exit losses."""

    def __init__(self, classes: int = 6, bug: str | None = None):
        super().__init__()
        self.block1 = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2)
        )
        self.exit1 = nn.Sequential(nn.Flatten(), nn.Linear(16 * 36, classes))
        self.block2 = nn.Sequential(
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        self.exit2 = nn.Sequential(nn.Flatten(), nn.Linear(32 * 9, 64), nn.ReLU(), nn.Linear(64, classes))
        if bug == "softmax_before_ce":  # the exits return probabilities, for the entropy test at inference
            self.exit1.append(nn.Softmax(dim=1))
            self.exit2.append(nn.Softmax(dim=1))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        h = self.block1(x)
        return [self.exit1(h), self.exit2(self.block2(h))]


def branchynet_early_exit(path: str, epochs: int = 3, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    imgs, y = _glyphs(g, 3000)
    x = (imgs.float() / 255 - 0.2) / 0.3
    model = BranchyCNN(bug=bug)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    weights = (1.0, 0.3)  # early exit weighted up, as BranchyNet's experiments do
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64, shuffle=True)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            outs = model(xb)
            loss = sum(w * criterion(o, yb) for w, o in zip(weights, outs, strict=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: loss {np.mean(losses[-len(loader) :]):.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SelectiveNet


class SelectiveNet(nn.Module):
    def __init__(self, d_in: int, classes: int, hidden: int = 256, bug: str | None = None):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(d_in, hidden), nn.ReLU(), nn.Dropout(0.3), nn.Linear(hidden, hidden), nn.ReLU()
        )
        self.f = nn.Linear(hidden, classes)
        self.g = nn.Sequential(
            nn.Linear(hidden, 128), nn.ReLU(), nn.BatchNorm1d(128), nn.Linear(128, 1), nn.Sigmoid()
        )
        self.h = nn.Linear(hidden, classes)
        for m in self.body:
            if isinstance(m, nn.Linear):
                if bug == "dead_relu_init":  # "small weights, negative bias keeps activations sparse"
                    nn.init.normal_(m.weight, 0.0, 0.01)
                    nn.init.constant_(m.bias, -1.0)
                else:
                    nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                    nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        z = self.body(x)
        return self.f(z), self.g(z).squeeze(1), self.h(z)


def selectivenet_coverage(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    n, d, classes = 4000, 20, 5
    centers = torch.randn(classes, d, generator=g) * 1.2
    y = torch.randint(0, classes, (n,), generator=g)
    hard = torch.rand(n, generator=g) < 0.2  # a fifth of the inputs lie between classes
    x = centers[y] + torch.randn(n, d, generator=g) * torch.where(hard, 2.5, 0.8)[:, None]
    model = SelectiveNet(d, classes, bug=bug)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [4, 6], 0.5)
    coverage, lam, alpha = 0.8, 32.0, 0.5
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=128, shuffle=True)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            f_out, sel, h_out = model(xb)
            ce = F.cross_entropy(f_out, yb, reduction="none")
            emp_cov = sel.mean()
            risk = (ce * sel).mean() / emp_cov
            sel_loss = risk + lam * torch.clamp(coverage - emp_cov, min=0) ** 2
            loss = alpha * sel_loss + (1 - alpha) * F.cross_entropy(h_out, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        sched.step()
        print(f"epoch {epoch}: loss {np.mean(losses[-len(loader) :]):.4f} coverage {emp_cov.item():.2f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- RSSM world model


class RSSM(nn.Module):
    """Deterministic GRU state plus a diagonal-Gaussian stochastic state; the posterior sees the
    observation embedding, the prior does not (PlaNet/Dreamer's recurrent state-space model)."""

    def __init__(self, obs: int = 24, act: int = 3, emb: int = 32, det: int = 64, stoch: int = 8):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(obs, 64), nn.ELU(), nn.Linear(64, emb), nn.ELU())
        self.pre = nn.Sequential(nn.Linear(stoch + act, det), nn.ELU())
        self.cell = nn.GRUCell(det, det)
        self.prior = nn.Sequential(nn.Linear(det, 64), nn.ELU(), nn.Linear(64, 2 * stoch))
        self.post = nn.Sequential(nn.Linear(det + emb, 64), nn.ELU(), nn.Linear(64, 2 * stoch))
        self.decoder = nn.Sequential(nn.Linear(det + stoch, 64), nn.ELU(), nn.Linear(64, obs))
        self.reward = nn.Sequential(nn.Linear(det + stoch, 64), nn.ELU(), nn.Linear(64, 1))
        self.det, self.stoch = det, stoch

    @staticmethod
    def _dist(stats: torch.Tensor) -> torch.distributions.Normal:
        mean, std = stats.chunk(2, -1)
        return torch.distributions.Normal(mean, F.softplus(std) + 0.1)

    def forward(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t, _ = obs.shape
        h = obs.new_zeros(b, self.det)
        s = obs.new_zeros(b, self.stoch)
        emb = self.encoder(obs)
        feats, kls = [], []
        for k in range(t):
            h = self.cell(self.pre(torch.cat([s, actions[:, k]], -1)), h)
            prior = self._dist(self.prior(h))
            post = self._dist(self.post(torch.cat([h, emb[:, k]], -1)))
            s = post.rsample()
            feats.append(torch.cat([h, s], -1))
            kls.append(torch.distributions.kl_divergence(post, prior).sum(-1))
        feat = torch.stack(feats, 1)
        return self.decoder(feat), self.reward(feat).squeeze(-1), torch.stack(kls, 1)


def _cart_episodes(g: torch.Generator, n: int, t: int, width: int = 24) -> tuple[torch.Tensor, ...]:
    """A cart on a 1-D track under random pushes, rendered as a Gaussian bump on 24 pixels;
    reward for staying near the centre."""
    pos = torch.rand(n, generator=g) * (width - 4) + 2
    vel = torch.zeros(n)
    grid = torch.arange(width).float()
    obs, acts, rews = [], [], []
    a = torch.randint(0, 3, (n,), generator=g)
    for _ in range(t):
        change = torch.rand(n, generator=g) < 0.3
        a = torch.where(change, torch.randint(0, 3, (n,), generator=g), a)
        vel = 0.8 * vel + 0.5 * (a.float() - 1)
        pos = (pos + vel).clamp(0, width - 1)
        obs.append(torch.exp(-((grid - pos[:, None]) ** 2) / 2) + 0.05 * torch.randn(n, width, generator=g))
        acts.append(F.one_hot(a, 3).float())
        rews.append(1 - (pos - width / 2).abs() / (width / 2))
    return torch.stack(obs, 1), torch.stack(acts, 1), torch.stack(rews, 1)


def rssm_world_model(path: str, steps: int = 120, seed: int = 0) -> list[float]:
    g = _seed(seed)
    obs, acts, rews = _cart_episodes(g, 400, 50)
    model = RSSM()
    opt = torch.optim.Adam(model.parameters(), lr=6e-4, eps=1e-4)
    free_nats = 3.0
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        i = torch.randint(0, 400, (16,), generator=g)
        t0 = int(torch.randint(0, 50 - 16, (1,), generator=g))
        o, a, r = obs[i, t0 : t0 + 16], acts[i, t0 : t0 + 16], rews[i, t0 : t0 + 16]
        recon, r_pred, kl = model(o, a)
        obs_loss = 0.5 * (recon - o).pow(2).sum(-1).mean()
        rew_loss = 0.5 * (r_pred - r).pow(2).mean()
        kl_loss = torch.clamp(kl.mean(), min=free_nats)
        loss = obs_loss + rew_loss + kl_loss
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 100.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(
                f"step {step}: obs {obs_loss.item():.3f} reward {rew_loss.item():.4f} kl {kl.mean().item():.3f}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- evolution strategies


def _reach_return(policy: nn.Module, g: torch.Generator, episodes: int = 8, horizon: int = 25) -> float:
    """A point mass pushed towards a random goal; the return is minus the mean distance."""
    with torch.no_grad():
        pos = torch.zeros(episodes, 2)
        vel = torch.zeros(episodes, 2)
        goal = torch.rand(episodes, 2, generator=g) * 2 - 1
        total = 0.0
        for _ in range(horizon):
            force = policy(torch.cat([pos, vel, goal - pos], 1))
            vel = 0.9 * vel + 0.1 * force
            pos = pos + 0.1 * vel
            total -= (goal - pos).norm(dim=1).mean().item()
    return total / horizon


def openai_es_point_reach(path: str, iterations: int = 50, seed: int = 0) -> list[float]:
    """Salimans et al.: antithetic Gaussian perturbations, centred-rank fitness shaping, the
    estimated gradient handed to Adam through .grad, no backward pass at all."""
    g = _seed(seed)
    policy = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 2), nn.Tanh())
    params = list(policy.parameters())
    flat = nn.utils.parameters_to_vector(params).detach()
    opt = torch.optim.Adam(params, lr=0.03)
    sigma, pairs = 0.1, 10
    hook = Hook(path)
    hook.register_module(policy)
    losses = []
    for it in range(iterations):
        flat = nn.utils.parameters_to_vector(params).detach()
        eps = torch.randn(pairs, flat.numel(), generator=g)
        env_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=g))
        returns = torch.zeros(2 * pairs)
        for k in range(2 * pairs):
            nn.utils.vector_to_parameters(
                flat + sigma * (eps[k // 2] if k % 2 == 0 else -eps[k // 2]), params
            )
            returns[k] = _reach_return(policy, torch.Generator().manual_seed(env_seed))
        ranks = torch.empty(2 * pairs)
        ranks[returns.argsort()] = torch.arange(2 * pairs).float()
        shaped = ranks / (2 * pairs - 1) - 0.5
        grad = ((shaped[0::2] - shaped[1::2])[:, None] * eps).sum(0) / (2 * pairs * sigma)
        nn.utils.vector_to_parameters(flat, params)
        opt.zero_grad()
        offset = 0
        for p in params:
            p.grad = -grad[offset : offset + p.numel()].view_as(p) + 0.005 * p.detach()  # ascent, l2 decay
            offset += p.numel()
        opt.step()
        loss = -_reach_return(policy, torch.Generator().manual_seed(env_seed))
        losses.append(loss)
        if it % 10 == 0:
            print(f"iteration {it}: mean distance {loss:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- deep supervised hashing


def dsh_pairwise_hashing(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """Liu et al.'s deep supervised hashing: relaxed real-valued codes, a contrastive pairwise
    loss with margin 2k, and a regulariser pulling every entry to +-1."""
    g = _seed(seed)
    imgs, y = _glyphs(g, 3000)
    x = (imgs.float() / 255 - 0.2) / 0.3
    bits = 12
    net = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 9, 128), nn.ReLU(), nn.Linear(128, bits),
    )  # fmt: skip
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=4e-3)
    margin, alpha = 2 * bits, 0.01
    hook = Hook(path)
    hook.register_module(net)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, len(x), (64,), generator=g)
        codes = net(x[idx])
        dist = torch.cdist(codes, codes).pow(2)
        similar = (y[idx][:, None] == y[idx][None]).float()
        pair = 0.5 * similar * dist + 0.5 * (1 - similar) * torch.clamp(margin - dist, min=0)
        off_diag = 1 - torch.eye(64)
        loss = (pair * off_diag).sum() / off_diag.sum() + alpha * (codes.abs() - 1).abs().sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step}: dsh loss {loss.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- RotNet


def rotnet_rotation_pretext(path: str, epochs: int = 2, seed: int = 0, bug: str | None = None) -> list[float]:
    """Gidaris et al.: every image shown at 0, 90, 180 and 270 degrees, the network classifies
    the rotation; SGD with Nesterov momentum and step decay, as in the paper."""
    g = _seed(seed)
    imgs, _ = _glyphs(g, 1500)  # uint8, as images come off disk
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, 4),
    )  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [1], 0.2)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(imgs), batch_size=32, shuffle=True)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        for (xb,) in loader:
            xb = xb.float() if bug == "inputs_x255" else (xb.float() / 255 - 0.25) / 0.3
            rotated = torch.cat([torch.rot90(xb, k, (2, 3)) for k in range(4)])
            target = torch.arange(4).repeat_interleave(len(xb))
            loss = F.cross_entropy(model(rotated), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        sched.step()
        print(f"epoch {epoch}: rotation loss {np.mean(losses[-len(loader) :]):.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- TFT-style quantile forecaster


class GRN(nn.Module):
    """Gated residual network of the Temporal Fusion Transformer."""

    def __init__(self, d_in: int, d: int, d_out: int | None = None, dropout: float = 0.1):
        super().__init__()
        d_out = d_out or d
        self.skip = nn.Linear(d_in, d_out) if d_in != d_out else nn.Identity()
        self.fc1 = nn.Linear(d_in, d)
        self.fc2 = nn.Linear(d, d)
        self.gate = nn.Linear(d, 2 * d_out)
        self.drop = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc2(F.elu(self.fc1(x)))
        return self.norm(self.skip(x) + F.glu(self.gate(self.drop(h)), -1))


class TFTLite(nn.Module):
    def __init__(self, n_vars: int = 4, d: int = 16, quantiles: int = 3, horizon: int = 6):
        super().__init__()
        self.var_embed = nn.ModuleList(nn.Linear(1, d) for _ in range(n_vars))
        self.var_grns = nn.ModuleList(GRN(d, d) for _ in range(n_vars))
        self.selection = GRN(n_vars * d, d, n_vars)
        self.lstm = nn.LSTM(d, d, batch_first=True)
        self.post_lstm = GRN(d, d)
        self.attn = nn.MultiheadAttention(d, 2, dropout=0.1, batch_first=True)
        self.post_attn = GRN(d, d)
        self.out = nn.Linear(d, horizon * quantiles)
        self.horizon, self.q = horizon, quantiles

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [b, t, vars]
        embs = [emb(x[..., i : i + 1]) for i, emb in enumerate(self.var_embed)]
        weights = torch.softmax(self.selection(torch.cat(embs, -1)), -1)
        processed = torch.stack([grn(e) for grn, e in zip(self.var_grns, embs, strict=True)], -1)
        h = (processed * weights.unsqueeze(2)).sum(-1)
        lstm_out, _ = self.lstm(h)
        h = self.post_lstm(lstm_out + h)
        t = h.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        a, _ = self.attn(h, h, h, attn_mask=causal)
        h = self.post_attn(a + h)
        return self.out(h[:, -1]).view(-1, self.horizon, self.q)


def tft_quantile_forecast(path: str, steps: int = 150, seed: int = 0) -> list[float]:
    g = _seed(seed)
    T = 4000  # noqa: N806
    t = torch.arange(T).float()
    temp = torch.sin(2 * math.pi * t / 24) + 0.3 * torch.randn(T, generator=g)
    holiday = (torch.rand(T, generator=g) < 0.05).float()
    price = torch.cumsum(0.05 * torch.randn(T, generator=g), 0)
    load = 2 + torch.sin(2 * math.pi * (t - 3) / 24) + 0.5 * temp.roll(2) - 0.8 * holiday - 0.1 * price
    load = load + 0.2 * torch.randn(T, generator=g)
    feats = torch.stack([load, temp, holiday, price], 1)
    feats = (feats - feats.mean(0)) / feats.std(0)
    qs = torch.tensor([0.1, 0.5, 0.9])
    model = TFTLite()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        s = torch.randint(0, T - 30, (32,), generator=g)
        x = torch.stack([feats[i : i + 24] for i in s])
        y = torch.stack([feats[i + 24 : i + 30, 0] for i in s])
        pred = model(x)
        err = y.unsqueeze(-1) - pred
        loss = torch.maximum(qs * err, (qs - 1) * err).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.01)  # the electricity configuration's max norm
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step}: quantile loss {loss.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- echo state network


def esn_mackey_glass_readout(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """A fixed random reservoir (spectral radius 0.9, leaky tanh units) driven by the Mackey-Glass
    series; only the linear readout is trained (here with Adam instead of ridge regression)."""
    g = _seed(seed)
    n = 3000
    tau, series = 17, [1.2] * 18
    for _ in range(n + 200):
        xt, xlag = series[-1], series[-1 - tau]
        series.append(xt + 0.2 * xlag / (1 + xlag**10) - 0.1 * xt)
    s = torch.tensor(series[218:], dtype=torch.float32)
    s = (s - s.mean()) / s.std()
    units = 200
    w_in = (torch.rand(units, 1, generator=g) * 2 - 1) * 0.5
    w = torch.rand(units, units, generator=g) * 2 - 1
    w[torch.rand(units, units, generator=g) > 0.1] = 0
    w *= 0.9 / torch.linalg.eigvals(w).abs().max()
    states = torch.zeros(n, units)
    h = torch.zeros(units)
    leak = 0.3
    for k in range(n - 1):
        h = (1 - leak) * h + leak * torch.tanh(w_in[:, 0] * s[k] + w @ h)
        states[k] = h
    washout = 100
    x, y = states[washout : n - 1], s[washout + 1 : n]
    readout = nn.Linear(units, 1)
    opt = torch.optim.Adam(readout.parameters(), lr=1e-2)
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(readout)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, len(x), (128,), generator=g)
        loss = criterion(readout(x[idx]).squeeze(1), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step}: one-step-ahead mse {loss.item():.5f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- CREPE pitch estimation


def crepe_pitch_bins(path: str, steps: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    """Kim et al.'s CREPE shrunk: raw 256-sample frames, strided convs with batch norm, max
    pooling and dropout 0.25, 60 pitch bins of 20 cents trained with binary cross-entropy against
    Gaussian-blurred targets (std 25 cents), Adam at 2e-4."""
    g = _seed(seed)
    sr, frame, n_bins = 8000, 256, 60
    cents = 20 * torch.arange(n_bins).float()  # bins above 220 Hz
    t = torch.arange(frame) / sr

    def batch(bs: int) -> tuple[torch.Tensor, torch.Tensor]:
        c = torch.rand(bs, generator=g) * cents[-1]
        f0 = 220 * 2 ** (c / 1200)
        phase = torch.rand(bs, 1, generator=g) * 2 * math.pi
        amps = torch.rand(bs, 3, generator=g) * torch.tensor([1.0, 0.5, 0.3])
        wave = sum(
            amps[:, k : k + 1] * torch.sin(2 * math.pi * (k + 1) * f0[:, None] * t + phase) for k in range(3)
        )
        wave = wave + 0.05 * torch.randn(bs, frame, generator=g)
        wave = (wave - wave.mean(1, keepdim=True)) / (wave.std(1, keepdim=True) + 1e-8)  # CREPE's frame norm
        target = torch.exp(-((cents[None] - c[:, None]) ** 2) / (2 * 25.0**2))
        return wave.unsqueeze(1), target

    def block(c_in: int, c_out: int, k: int, stride: int = 1) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv1d(c_in, c_out, k, stride=stride, padding=k // 2), nn.ReLU(), nn.BatchNorm1d(c_out),
            nn.MaxPool1d(2), nn.Dropout(0.25),
        )  # fmt: skip

    model = nn.Sequential(
        block(1, 32, 64, stride=4), block(32, 16, 16), block(16, 16, 16), block(16, 32, 16),
        nn.Flatten(), nn.Linear(32 * 4, n_bins),
    )  # fmt: skip
    criterion = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), lr=2e-4)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        if step % 50 == 0 and step > 0:  # a held-out check every 50 steps
            model.eval()
            with torch.no_grad():
                xv, tv = batch(128)
                err = (cents[model(xv).argmax(1)] - cents[tv.argmax(1)]).abs().mean()
            print(f"step {step}: val raw pitch error {err.item():.1f} cents")
            if bug != "train_in_eval_mode":
                model.train()
        x, target = batch(32)
        loss = criterion(model(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- FlowNetS optical flow


class FlowNetS(nn.Module):
    """The two frames stacked on channels, a strided encoder, a decoder with skip connections and
    a flow prediction at each of two scales (multi-scale EPE loss)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Sequential(nn.Conv2d(2, 32, 5, stride=2, padding=2), nn.LeakyReLU(0.1))
        self.c2 = nn.Sequential(nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.LeakyReLU(0.1))
        self.c3 = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.LeakyReLU(0.1))
        self.flow2 = nn.Conv2d(64, 2, 3, padding=1)
        self.up2 = nn.Sequential(nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), nn.LeakyReLU(0.1))
        self.up_flow = nn.ConvTranspose2d(2, 2, 4, stride=2, padding=1)
        self.flow1 = nn.Conv2d(32 + 32 + 2, 2, 3, padding=1)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor]:
        x1 = self.c1(torch.cat([a, b], 1))
        x3 = self.c3(self.c2(x1))
        f2 = self.flow2(x3)
        f1 = self.flow1(torch.cat([x1, self.up2(x3), self.up_flow(f2)], 1))
        return [f1, f2]  # at 1/2 and 1/4 resolution


def _flow_pairs(
    g: torch.Generator, n: int, size: int = 24
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Smooth random textures warped by an affine flow (translation + small rotation/zoom)."""
    tex = F.avg_pool2d(torch.rand(n, 1, size + 8, size + 8, generator=g), 5, 1, 2)[:, :, 4:-4, 4:-4]
    tex = (tex - tex.mean((2, 3), keepdim=True)) / (tex.std((2, 3), keepdim=True) + 1e-6)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
    shift = (torch.rand(n, 2, generator=g) * 2 - 1) * 0.2
    rot = (torch.rand(n, generator=g) * 2 - 1) * 0.1
    zoom = (torch.rand(n, generator=g) * 2 - 1) * 0.05
    fx = shift[:, 0, None, None] - rot[:, None, None] * yy + zoom[:, None, None] * xx
    fy = shift[:, 1, None, None] + rot[:, None, None] * xx + zoom[:, None, None] * yy
    grid = torch.stack([xx + fx, yy + fy], -1)
    second = F.grid_sample(tex, grid, align_corners=True, padding_mode="border")
    flow = torch.stack([fx, fy], 1) * (size - 1) / 2  # in pixels, backward flow: frame2(p) = frame1(p + flow)
    return tex, second, flow


def flownet_simple_epe(path: str, steps: int = 200, seed: int = 0) -> list[float]:
    g = _seed(seed)
    model = FlowNetS()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.999), weight_decay=4e-4)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [150], 0.5)
    scale_weights = (0.005 * 64, 0.01 * 64)  # FlowNet's weights, finest first, with flow divided by 20
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        a, b, flow = _flow_pairs(g, 16)
        target = flow / 20.0
        preds = model(b, a)
        loss = 0.0
        for w, pred in zip(scale_weights, preds, strict=True):
            t = F.adaptive_avg_pool2d(target, pred.shape[-2:])
            loss = loss + w * (pred - t).norm(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0:
            epe = 20 * (F.interpolate(preds[0], scale_factor=2, mode="bilinear") - target).norm(dim=1).mean()
            print(f"step {step}: loss {loss.item():.4f} EPE {epe.item():.3f} px")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- partial-convolution inpainting


class PartialConv(nn.Module):
    """Liu et al.'s partial convolution: convolve the masked image, renormalise by the fraction
    of valid pixels under the window, update the mask."""

    def __init__(self, c_in: int, c_out: int, k: int, stride: int = 1):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k, stride, k // 2)
        self.register_buffer("ones", torch.ones(1, 1, k, k))
        self.stride, self.pad, self.k = stride, k // 2, k

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            valid = F.conv2d(mask, self.ones, stride=self.stride, padding=self.pad)
            ratio = self.k * self.k / valid.clamp(min=1)
            new_mask = (valid > 0).float()
        out = self.conv(x * mask)
        bias = self.conv.bias.view(1, -1, 1, 1)
        out = ((out - bias) * ratio + bias) * new_mask
        return out, new_mask


class PConvUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.e1 = PartialConv(1, 32, 5, 2)
        self.e2 = PartialConv(32, 64, 3, 2)
        self.bn2 = nn.BatchNorm2d(64)
        self.d2 = PartialConv(64 + 32, 32, 3)
        self.bn_d2 = nn.BatchNorm2d(32)
        self.d1 = PartialConv(32 + 1, 1, 3)

    def forward(self, img: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h1, m1 = self.e1(img, mask)
        h1 = F.relu(h1)
        h2, m2 = self.e2(h1, m1)
        h2 = F.relu(self.bn2(h2))
        u2 = F.interpolate(h2, scale_factor=2)
        um2 = F.interpolate(m2, scale_factor=2)
        h, m = self.d2(torch.cat([u2, h1], 1), torch.max(um2, m1).expand(-1, 1, -1, -1))
        h = F.leaky_relu(self.bn_d2(h), 0.2)
        u1 = F.interpolate(h, scale_factor=2)
        um1 = F.interpolate(m, scale_factor=2)
        out, _ = self.d1(torch.cat([u1, img], 1), torch.max(um1, mask))
        return out


def pconv_inpainting(path: str, steps: int = 200, seed: int = 0) -> list[float]:
    g = _seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, 16), torch.linspace(-1, 1, 16), indexing="ij")

    def batch(bs: int) -> tuple[torch.Tensor, torch.Tensor]:
        fx, fy = torch.rand(2, bs, 1, 1, generator=g) * 3 + 1
        ph = torch.rand(bs, 1, 1, generator=g) * 6.28
        img = (
            0.5
            + 0.25 * torch.sin(fx * 3 * xx + ph) * torch.cos(fy * 3 * yy)
            + 0.2 * xx * torch.rand(bs, 1, 1, generator=g)
        )
        mask = torch.ones(bs, 1, 16, 16)
        for b in range(bs):  # one or two random rectangular holes
            for _ in range(int(torch.randint(1, 3, (1,), generator=g))):
                y0, x0 = (int(v) for v in torch.randint(0, 11, (2,), generator=g))
                h, w = (int(v) for v in torch.randint(3, 6, (2,), generator=g))
                mask[b, 0, y0 : y0 + h, x0 : x0 + w] = 0
        return img.unsqueeze(1), mask

    model = PConvUNet()
    opt = torch.optim.Adam(model.parameters(), lr=2e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        img, mask = batch(16)
        out = model(img * mask, mask)
        comp = mask * img + (1 - mask) * out
        l_valid = F.l1_loss(mask * out, mask * img)
        l_hole = F.l1_loss((1 - mask) * out, (1 - mask) * img)
        tv = (comp[..., 1:, :] - comp[..., :-1, :]).abs().mean() + (
            comp[..., :, 1:] - comp[..., :, :-1]
        ).abs().mean()
        loss = l_valid + 6 * l_hole + 0.1 * tv
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step}: valid {l_valid.item():.4f} hole {l_hole.item():.4f} tv {tv.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SiamFC tracking


def siamfc_tracker(path: str, steps: int = 120, seed: int = 0) -> list[float]:
    """Bertinetto et al.: a shared fully-convolutional embedding of an exemplar crop and a larger
    search region, their cross-correlation a response map trained with a logistic loss against
    positives within a radius of the target's true offset; SGD with momentum, exponential decay."""
    g = _seed(seed)
    embed = nn.Sequential(
        nn.Conv2d(1, 16, 3), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 32, 3),
    )  # fmt: skip
    adjust = nn.BatchNorm2d(1)  # SiamFC v2's scaling of the response
    model = nn.ModuleDict({"embed": embed, "adjust": adjust})
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, (1e-4 / 1e-2) ** (1 / 1000))
    yy, xx = torch.meshgrid(torch.arange(24).float(), torch.arange(24).float(), indexing="ij")
    resp = 24 - 10 + 1  # response map side: valid convs shrink both by the same amount
    ry, rx = torch.meshgrid(torch.arange(resp).float(), torch.arange(resp).float(), indexing="ij")
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        bs = 16
        cy, cx = (torch.randint(7, 17, (2, bs), generator=g)).float()
        ang = torch.rand(bs, generator=g) * math.pi
        # an oriented bar with a blob (the target) plus distractor blobs, on noise
        dy, dx = yy[None] - cy[:, None, None], xx[None] - cx[:, None, None]
        along = dx * torch.cos(ang)[:, None, None] + dy * torch.sin(ang)[:, None, None]
        across = -dx * torch.sin(ang)[:, None, None] + dy * torch.cos(ang)[:, None, None]
        target = torch.exp(-(along**2) / 8 - across**2 / 0.8) + torch.exp(
            -((dy - 1) ** 2 + (dx + 1) ** 2) / 1.5
        )
        dcy, dcx = torch.rand(2, bs, generator=g) * 24
        distract = torch.exp(
            -((yy[None] - dcy[:, None, None]) ** 2 + (xx[None] - dcx[:, None, None]) ** 2) / 3
        )
        search = target + 0.7 * distract + 0.1 * torch.randn(bs, 24, 24, generator=g)
        exemplar = torch.stack([
            F.pad(target[b], (5, 5, 5, 5))[int(cy[b]) : int(cy[b]) + 10, int(cx[b]) : int(cx[b]) + 10] for b in range(bs)
        ])  # fmt: skip
        exemplar = exemplar + 0.1 * torch.randn(exemplar.shape, generator=g)
        z = embed(exemplar.unsqueeze(1))  # [b, c, 4, 4]
        x = embed(search.unsqueeze(1))  # [b, c, 18, 18]
        score = F.conv2d(x.reshape(1, -1, *x.shape[-2:]), z, groups=bs).view(bs, 1, resp, resp)
        score = adjust(score).squeeze(1)
        # the exemplar centred on (cy, cx) matches at response position (cy - 5, cx - 5)
        dist = ((ry[None] - (cy - 5)[:, None, None]) ** 2 + (rx[None] - (cx - 5)[:, None, None]) ** 2).sqrt()
        label = (dist <= 2).float()
        pos_w = 0.5 / label.sum((1, 2), keepdim=True)
        neg_w = 0.5 / (1 - label).sum((1, 2), keepdim=True)
        weight = torch.where(label > 0, pos_w, neg_w)
        loss = F.binary_cross_entropy_with_logits(score, label, weight=weight, reduction="sum") / bs
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step}: balanced logistic loss {loss.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DnCNN denoising


def dncnn_residual_denoiser(
    path: str, steps: int = 150, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Zhang et al.'s DnCNN: conv-ReLU, (conv-BN-ReLU) x depth, conv; it predicts the noise
    (residual learning), loss half the summed squared error per patch, Adam from 1e-3."""
    g = _seed(seed)
    imgs, _ = _glyphs(g, 2000)
    clean_all = F.avg_pool2d(imgs.float() / 255, 3, 1, 1)  # smoother "natural" patches
    layers: list[nn.Module] = [nn.Conv2d(1, 24, 3, padding=1), nn.ReLU()]
    for _ in range(4):
        layers += [
            nn.Conv2d(24, 24, 3, padding=1, bias=False),
            nn.BatchNorm2d(24, eps=1e-4, momentum=0.95),
            nn.ReLU(),
        ]
    layers.append(nn.Conv2d(24, 1, 3, padding=1))
    model = nn.Sequential(*layers)
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.orthogonal_(m.weight)
    lr = 1e-3 * (100 if bug == "lr_x100" else 1)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [100], 0.1)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        clean = clean_all[torch.randint(0, len(clean_all), (16,), generator=g)]
        noise = torch.randn(clean.shape, generator=g) * (25 / 255)
        noisy = clean + noise
        residual = model(noisy)
        loss = F.mse_loss(residual, noise, reduction="sum") / (2 * len(clean))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0:
            psnr = 10 * torch.log10(1 / F.mse_loss(noisy - residual, clean))
            print(f"step {step}: loss {loss.item():.4f} PSNR {psnr.item():.2f} dB")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- neural Turing machine


class NTM(nn.Module):
    """Graves et al.'s NTM with an LSTM controller, one read and one write head, content
    addressing, interpolation with the last weighting, a circular shift of -1/0/+1, sharpening."""

    def __init__(self, bits: int = 6, hidden: int = 64, slots: int = 16, width: int = 10):
        super().__init__()
        self.controller = nn.LSTMCell(bits + 2 + width, hidden)
        self.read_head = nn.Linear(hidden, width + 1 + 1 + 3 + 1)  # key, beta, gate, shift, gamma
        self.write_head = nn.Linear(hidden, width + 1 + 1 + 3 + 1 + 2 * width)  # + erase, add
        self.out = nn.Linear(hidden + width, bits)
        self.slots, self.width, self.hidden = slots, width, hidden

    def _address(self, params: torch.Tensor, memory: torch.Tensor, w_prev: torch.Tensor) -> torch.Tensor:
        m = self.width
        key, beta, gate = torch.tanh(params[:, :m]), F.softplus(params[:, m]), torch.sigmoid(params[:, m + 1])
        shift, gamma = torch.softmax(params[:, m + 2 : m + 5], 1), 1 + F.softplus(params[:, m + 5])
        sim = F.cosine_similarity(memory + 1e-16, key[:, None], dim=-1)
        w = torch.softmax(beta[:, None] * sim, 1)
        w = gate[:, None] * w + (1 - gate[:, None]) * w_prev
        w = shift[:, 0:1] * w.roll(-1, 1) + shift[:, 1:2] * w + shift[:, 2:3] * w.roll(1, 1)
        w = w ** gamma[:, None]
        return w / (w.sum(1, keepdim=True) + 1e-16)

    def forward(self, seq: torch.Tensor) -> torch.Tensor:  # [t, b, bits + 2]
        t, b, _ = seq.shape
        memory = torch.full((b, self.slots, self.width), 1e-6)
        h = c = seq.new_zeros(b, self.hidden)
        r = seq.new_zeros(b, self.width)
        w_r = w_w = F.one_hot(torch.zeros(b, dtype=torch.long), self.slots).float()
        outs = []
        for k in range(t):
            h, c = self.controller(torch.cat([seq[k], r], 1), (h, c))
            wp = self.write_head(h)
            w_w = self._address(wp, memory, w_w)
            erase, add = torch.sigmoid(wp[:, -2 * self.width : -self.width]), torch.tanh(wp[:, -self.width :])
            memory = memory * (1 - w_w[..., None] * erase[:, None]) + w_w[..., None] * add[:, None]
            w_r = self._address(self.read_head(h), memory, w_r)
            r = (w_r[..., None] * memory).sum(1)
            outs.append(self.out(torch.cat([h, r], 1)))
        return torch.stack(outs)


def ntm_copy_task(path: str, steps: int = 200, seed: int = 0) -> list[float]:
    g = _seed(seed)
    bits = 6
    model = NTM(bits)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-4, momentum=0.9, alpha=0.95)
    criterion = nn.BCEWithLogitsLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        length = int(torch.randint(1, 5, (1,), generator=g))
        pattern = (torch.rand(length, 8, bits, generator=g) < 0.5).float()
        inp = torch.zeros(2 * length + 1, 8, bits + 2)
        inp[:length, :, :bits] = pattern
        inp[length, :, bits] = 1.0  # delimiter
        out = model(inp)[length + 1 :]
        loss = criterion(out, pattern)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 10.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step}: copy bce {loss.item():.4f} (length {length})")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- registry

_parser = healthy(
    "biaffine_dependency_parser_adam_beta09", "dependency parsing (biaffine)", biaffine_dependency_parser
)
_sketch = healthy(
    "sketch_rnn_gmm_pen_decoder", "stroke generation (sketch-RNN decoder)", sketch_rnn_gmm_decoder
)
_convlstm = healthy(
    "convlstm_nowcasting_rmsprop_bce", "spatiotemporal forecasting (ConvLSTM)", convlstm_nowcasting
)
_deepsea = healthy("dna_motif_cnn_multilabel_bce", "genomics (DNA motif CNN)", deepsea_motif_cnn)
_debias = healthy(
    "adversarial_debiasing_projection", "fairness (adversarial debiasing)", adversarial_debiasing_income
)
_branchy = healthy("branchynet_two_exits_weighted", "early-exit network (BranchyNet)", branchynet_early_exit)
_selective = healthy(
    "selectivenet_coverage_08_sgd", "selective classification (SelectiveNet)", selectivenet_coverage
)
_rotnet = healthy(
    "rotnet_rotation_pretext_nesterov", "self-supervised pretext (RotNet)", rotnet_rotation_pretext
)
_crepe = healthy("crepe_pitch_bins_blurred_bce", "pitch estimation (CREPE)", crepe_pitch_bins)
_dncnn = healthy("dncnn_residual_noise_orthogonal_init", "image denoising (DnCNN)", dncnn_residual_denoiser)

PIPELINES = [
    healthy("deq_jacobian_free_backprop_spirals", "deep equilibrium model (JFB)", deq_jfb_spirals),
    healthy("modern_hopfield_associative_retrieval", "modern Hopfield layer", hopfield_associative_retrieval),
    healthy("tasnet_pit_si_snr_separation", "source separation (Conv-TasNet, PIT)", tasnet_pit_si_snr),
    healthy(
        "fastspeech_length_regulator_noam", "text-to-speech (FastSpeech durations)", fastspeech_duration_mel
    ),
    _parser,
    healthy("prodlda_logistic_normal_topics", "neural topic model (ProdLDA)", prodlda_topics),
    _sketch,
    _convlstm,
    healthy("stgcn_gated_temporal_graph_conv", "traffic forecasting (STGCN)", stgcn_traffic_speeds),
    healthy("rgcn_basis_decomposition_entities", "relational graph conv (R-GCN)", rgcn_entity_classification),
    healthy(
        "diffpool_link_entropy_aux", "hierarchical graph pooling (DiffPool)", diffpool_graph_classification
    ),
    healthy("gns_encode_process_decode_particles", "learned simulator (GNS)", gns_particle_simulator),
    _deepsea,
    healthy("darts_first_order_bilevel", "architecture search (DARTS)", darts_first_order_search),
    healthy("ibp_certified_eps_kappa_ramp", "certified training (IBP)", ibp_certified_training),
    _debias,
    _branchy,
    _selective,
    healthy("rssm_world_model_free_nats", "world model (RSSM)", rssm_world_model),
    healthy("openai_es_antithetic_rank_shaping", "evolution strategies", openai_es_point_reach),
    healthy("dsh_pairwise_margin_hashing", "deep hashing (DSH)", dsh_pairwise_hashing),
    _rotnet,
    healthy(
        "tft_grn_variable_selection_quantiles",
        "temporal fusion transformer (quantiles)",
        tft_quantile_forecast,
    ),
    healthy(
        "esn_reservoir_trained_readout", "reservoir computing (echo state network)", esn_mackey_glass_readout
    ),
    _crepe,
    healthy("flownet_simple_multiscale_epe", "optical flow (FlowNetS)", flownet_simple_epe),
    healthy("partial_conv_inpainting_hole_tv", "image inpainting (partial conv)", pconv_inpainting),
    healthy("siamfc_cross_correlation_tracker", "visual tracking (SiamFC)", siamfc_tracker),
    _dncnn,
    healthy("ntm_copy_task_rmsprop", "neural Turing machine (copy)", ntm_copy_task),
    buggy(_parser, "no_zero_grad"),
    buggy(_sketch, "log_zero_nan"),
    buggy(_convlstm, "frozen_by_mistake"),
    buggy(_deepsea, "shuffled_labels"),
    buggy(_debias, "deep_sigmoid"),
    buggy(_branchy, "softmax_before_ce"),
    buggy(_selective, "dead_relu_init"),
    buggy(_rotnet, "inputs_x255"),
    buggy(_crepe, "train_in_eval_mode"),
    buggy(_dncnn, "lr_x100"),
]
