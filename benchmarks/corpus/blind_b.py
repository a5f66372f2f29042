"""A blind held-out set (issue 26), part b: sequences, text, tabular, recommendation, RL and
fine-tuning, of kinds not in the earlier sets. Written without ever running mldbg's rules on them.

Sequences and text: a BERT-style masked LM, a llama-style LM (RoPE, RMSNorm, SwiGLU), a gated
linear recurrence LM, CTC on synthetic speech frames, a BiLSTM-CRF tagger, a Kim text CNN with
frozen embeddings, an adaptive-softmax word LM, word2vec CBOW with hierarchical softmax, a
Performer (FAVOR+) classifier, keyword spotting on MFCC-like frames, unsupervised SimCSE, a
pointer network. Fine-tuning and preference learning: LoRA, prompt tuning, a Bradley-Terry
reward model, DPO, a tiny CLIP. Tabular and
recommendation: FT-Transformer, DeepFM, wide & deep with sparse EmbeddingBag + SparseAdam, a
factorization machine, DeepSurv (Cox), CORAL ordinal regression, 50-label BCE, TransE, SASRec,
a two-tower retrieval model, N-BEATS, DeepAR, an autoencoder anomaly detector, gradient
checkpointing.
RL: SAC, TD3, behaviour cloning.

Every script is written the way its kind is usually written, with the README's two lines.
`SPLIT = BLIND` puts them all in the `blind` set.
"""

from __future__ import annotations

import copy
import heapq
import math
import random

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, TensorDataset

from mldbg.torch import Hook

from . import BLIND, buggy, healthy

SPLIT = BLIND

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 7)


def _markov_tokens(
    rng: np.random.Generator, vocab: int, n: int, alpha: float = 0.1, order2: bool = False
) -> np.ndarray:
    """A token stream from a random sparse Markov chain (first or second order)."""
    states = vocab * vocab if order2 else vocab
    cum = rng.dirichlet(alpha * np.ones(vocab), size=states).cumsum(1)
    u = rng.random(n)
    out = np.zeros(n, dtype=np.int64)
    out[1] = rng.integers(vocab)
    for i in range(2, n):
        s = out[i - 2] * vocab + out[i - 1] if order2 else out[i - 1]
        out[i] = min(int(np.searchsorted(cum[s], u[i])), vocab - 1)
    return out


def _hmm_zipf_tokens(
    rng: np.random.Generator, vocab: int, n: int, states: int = 12, topical: float = 0.5, stay: float = 0.0
) -> np.ndarray:
    """Words from a hidden Markov chain: each hidden state emits from its own permutation of a
    Zipf law over the vocabulary (a long tail, like words), mixed with the shared Zipf law
    (weight 1 - topical); `stay` makes the states sticky (topics)."""
    trans = ((1 - stay) * rng.dirichlet(0.3 * np.ones(states), size=states) + stay * np.eye(states)).cumsum(1)
    zipf = 1.0 / np.arange(1, vocab + 1) ** 1.1
    zipf /= zipf.sum()
    emit = np.stack([zipf[rng.permutation(vocab)] if k else zipf for k in range(states)])
    emit = topical * emit + (1 - topical) * zipf  # frequent words are frequent everywhere
    emit_cum = emit.cumsum(1)
    h = np.zeros(n, dtype=np.int64)
    u = rng.random(n)
    for i in range(1, n):
        h[i] = min(int(np.searchsorted(trans[h[i - 1]], u[i])), states - 1)
    v = rng.random(n)
    words = np.array([np.searchsorted(emit_cum[h[i]], v[i]) for i in range(n)])
    return np.minimum(words, vocab - 1)


# ----------------------------------------------------------------------------- BERT-style MLM


class TinyBert(nn.Module):
    def __init__(self, vocab: int, d: int = 64, layers: int = 2, heads: int = 4, max_len: int = 64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.emb_norm = nn.LayerNorm(d)
        self.drop = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.mlm_dense = nn.Linear(d, d)
        self.mlm_norm = nn.LayerNorm(d)
        self.mlm_bias = nn.Parameter(torch.zeros(vocab))
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1])
        h = self.drop(self.emb_norm(self.tok(ids) + self.pos(pos)))
        h = self.encoder(h)
        h = self.mlm_norm(F.gelu(self.mlm_dense(h)))
        return h @ self.tok.weight.T + self.mlm_bias  # decoder tied to the input embeddings


def bert_mlm(path: str, steps: int = 250, seed: int = 0, bug: str | None = None) -> list[float]:
    """Masked language modelling: 15% of the positions chosen, of those 80% [MASK], 10% a random
    token, 10% unchanged; labels -100 elsewhere. AdamW with linear warm-up and linear decay."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    vocab, mask_id, seq = 60, 60, 32
    stream = torch.tensor(_markov_tokens(rng, vocab, 60_000, alpha=0.02))
    model = TinyBert(vocab + 1)
    criterion = nn.CrossEntropyLoss()  # ignore_index=-100 by default
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=2e-3 * (100 if bug == "lr_x100" else 1),
    )
    warmup = steps // 10
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: s / warmup if s < warmup else max(0.0, (steps - s) / (steps - warmup))
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        starts = torch.randint(0, len(stream) - seq, (32,), generator=g)
        ids = torch.stack([stream[s : s + seq] for s in starts])
        labels = ids.clone()
        chosen = torch.rand(ids.shape, generator=g) < 0.15
        labels[~chosen] = -100
        r = torch.rand(ids.shape, generator=g)
        inputs = ids.clone()
        inputs[chosen & (r < 0.8)] = mask_id
        rand_pos = chosen & (r >= 0.8) & (r < 0.9)
        inputs[rand_pos] = torch.randint(0, vocab, (int(rand_pos.sum()),), generator=g)
        logits = model(inputs)
        loss = criterion(logits.view(-1, logits.shape[-1]), labels.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step} mlm loss {loss.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- llama-style LM


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rope(seq: int, head_dim: int, theta: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(seq).float(), freqs)
    return angles.cos(), angles.sin()


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)
    return out.flatten(-2)


class LlamaBlock(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.attn_norm = RMSNorm(d)
        self.wq = nn.Linear(d, d, bias=False)
        self.wk = nn.Linear(d, d, bias=False)
        self.wv = nn.Linear(d, d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        hidden = 16 * ((int(2 * 4 * d / 3) + 15) // 16)
        self.ffn_norm = RMSNorm(d)
        self.w1 = nn.Linear(d, hidden, bias=False)
        self.w3 = nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.attn_norm(x)
        q, k, v = (w(h).view(b, t, self.heads, -1).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        q, k = _apply_rope(q, cos, sin), _apply_rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, t, d))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class TinyLlama(nn.Module):
    def __init__(self, vocab: int, d: int = 64, layers: int = 2, heads: int = 4, max_len: int = 64):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(LlamaBlock(d, heads) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.output = nn.Linear(d, vocab, bias=False)
        cos, sin = _rope(max_len, d // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for n, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if n.endswith(("wo.weight", "w2.weight")) else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        t = idx.shape[1]
        h = self.tok_embeddings(idx)
        for layer in self.layers:
            h = layer(h, self.cos[:t], self.sin[:t])
        logits = self.output(self.norm(h))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def llama_lm(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """A llama-style causal LM: AdamW betas (0.9, 0.95), weight decay 0.1 on matrices only,
    linear warm-up then cosine decay to 10%, gradient clipping at 1.0, nanoGPT's loop."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    vocab, block, batch = 48, 64, 16
    data = torch.tensor(_markov_tokens(rng, vocab, 60_000, alpha=0.05))
    n_val = 6000
    train_data, val_data = data[:-n_val], data[-n_val:]

    def get_batch(split: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(split) - block - 1, (batch,), generator=g)
        x = torch.stack([split[i : i + block] for i in ix])
        y = torch.stack([split[i + 1 : i + 1 + block] for i in ix])
        return x, y

    model = TinyLlama(vocab)
    max_lr = 1e-3
    min_lr, warmup = max_lr / 10, 30
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=max_lr, betas=(0.9, 0.95), eps=1e-8)

    def get_lr(it: int) -> float:
        if it < warmup:
            return max_lr * (it + 1) / warmup
        ratio = (it - warmup) / (steps - warmup)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)

    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for it in range(steps):
        for group in opt.param_groups:
            group["lr"] = get_lr(it)
        if it % 100 == 0 or it == steps - 1:
            model.eval()
            with torch.no_grad():
                val = np.mean([model(*get_batch(val_data))[1].item() for _ in range(4)])
            model.train()
            print(f"iter {it}: val loss {val:.4f}")
        x, y = get_batch(train_data)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- gated linear recurrence


class GatedLinearRecurrence(nn.Module):
    """h_t = a_t * h_{t-1} + (1 - a_t) * (W x_t), a_t = sigmoid(W_a x_t + b): a diagonal,
    input-gated linear recurrence (HGRN / minGRU-like), its output gated by SiLU(W_g x_t)."""

    def __init__(self, d: int, expand: int = 2):
        super().__init__()
        inner = expand * d
        self.norm = nn.LayerNorm(d)
        self.in_proj = nn.Linear(d, 3 * inner)
        self.out_proj = nn.Linear(inner, d)
        with torch.no_grad():  # forget gates start near 1 (long memory), as in LRU / HGRN
            self.in_proj.bias[inner : 2 * inner].uniform_(1.0, 4.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u, a, gate = self.in_proj(self.norm(x)).chunk(3, -1)
        a = torch.sigmoid(a)
        h = torch.zeros_like(u[:, 0])
        outs = []
        for t in range(x.shape[1]):
            h = a[:, t] * h + (1 - a[:, t]) * u[:, t]
            outs.append(h)
        y = torch.stack(outs, 1) * F.silu(gate)
        return x + self.out_proj(y)


class RecurrentLM(nn.Module):
    def __init__(self, vocab: int, d: int = 64, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.mixers = nn.ModuleList(GatedLinearRecurrence(d) for _ in range(layers))
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
            for _ in range(layers)
        )
        self.norm_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.embed.weight
        nn.init.normal_(self.embed.weight, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for mixer, mlp in zip(self.mixers, self.mlps, strict=True):
            h = mixer(h)
            h = h + mlp(h)
        return self.lm_head(self.norm_f(h))


def gated_recurrence_lm(path: str, steps: int = 250, seed: int = 0) -> list[float]:
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    vocab, seq = 40, 32
    data = torch.tensor(_markov_tokens(rng, vocab, 40_000, alpha=0.1, order2=True))
    model = RecurrentLM(vocab)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=1e-4)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        ix = torch.randint(0, len(data) - seq - 1, (24,), generator=g)
        chunk = torch.stack([data[i : i + seq + 1] for i in ix])
        logits = model(chunk[:, :-1])
        loss = criterion(logits.reshape(-1, vocab), chunk[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f} ppl {math.exp(loss.item()):.1f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- CTC speech


def _speech_batch(
    g: torch.Generator, protos: torch.Tensor, n: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Utterances of 3-6 'phonemes' (1..P), each 2-5 frames of its prototype feature vector plus
    noise, with silence (the blank prototype) between some of them. Returns (T, N, F) padded
    frames, their lengths, concatenated targets and target lengths, as nn.CTCLoss takes them."""
    n_ph, feat = protos.shape[0] - 1, protos.shape[1]
    utts, targets, in_lens, tgt_lens = [], [], [], []
    for _ in range(n):
        k = int(torch.randint(3, 7, (1,), generator=g))
        labels = torch.randint(1, n_ph + 1, (k,), generator=g)
        frames = [protos[0].expand(int(torch.randint(1, 4, (1,), generator=g)), feat)]
        for lab in labels:
            frames.append(protos[lab].expand(int(torch.randint(2, 6, (1,), generator=g)), feat))
            if torch.rand(1, generator=g) < 0.5:
                frames.append(protos[0].expand(int(torch.randint(1, 3, (1,), generator=g)), feat))
        x = torch.cat(frames)
        utts.append(x + 0.6 * torch.randn(x.shape, generator=g))
        targets.append(labels)
        in_lens.append(len(x))
        tgt_lens.append(k)
    x = nn.utils.rnn.pad_sequence(utts)  # (T, N, F)
    return x, torch.tensor(in_lens), torch.cat(targets), torch.tensor(tgt_lens)


class CTCAcousticModel(nn.Module):
    def __init__(self, feat: int, classes: int, hidden: int = 64):
        super().__init__()
        self.rnn = nn.GRU(feat, hidden, num_layers=2, bidirectional=True, dropout=0.1)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out)
        return self.fc(out).log_softmax(-1)  # (T, N, C)


def ctc_speech(path: str, steps: int = 200, seed: int = 0) -> list[float]:
    g = _seed(seed)
    n_ph, feat = 12, 20
    protos = torch.randn(n_ph + 1, feat, generator=g)
    protos[0] *= 0.3  # silence is quiet
    model = CTCAcousticModel(feat, n_ph + 1)
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(ctc)
    losses = []
    for step in range(steps):
        x, in_lens, targets, tgt_lens = _speech_batch(g, protos, 32)
        log_probs = model(x, in_lens)
        loss = ctc(log_probs, targets, in_lens, tgt_lens)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            greedy = log_probs.argmax(-1)[:, 0].unique_consecutive()
            print(f"step {step} ctc {loss.item():.3f} decoded {greedy[greedy > 0].tolist()}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- BiLSTM-CRF tagger

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def _ner_sentences(rng: np.random.Generator, n: int, length: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    """Words 0..59 are ordinary, 60..89 person names, 90..119 place names; 'in' (5) and 'at' (6)
    usually precede a place, 'mr' (7) a person. Names span 1-3 words; tags in BIO."""
    words = np.zeros((n, length), dtype=np.int64)
    tags = np.zeros((n, length), dtype=np.int64)
    for i in range(n):
        j = 0
        while j < length:
            r = rng.random()
            if r < 0.12 and j < length - 2:
                kind = rng.integers(2)
                if rng.random() < 0.7:
                    words[i, j] = 7 if kind == 0 else rng.choice([5, 6])
                    j += 1
                span = min(int(rng.integers(1, 4)), length - j)
                lo = 60 if kind == 0 else 90
                words[i, j : j + span] = rng.integers(lo, lo + 30, span)
                if rng.random() < 0.15:  # an ambiguous name: also an ordinary word
                    words[i, j] = rng.integers(8, 60)
                tags[i, j] = 1 + 2 * kind
                tags[i, j + 1 : j + span] = 2 + 2 * kind
                j += span
            else:
                words[i, j] = rng.integers(8, 60) if rng.random() < 0.9 else rng.integers(5, 8)
                j += 1
    return torch.tensor(words), torch.tensor(tags)


class BiLSTMCRF(nn.Module):
    def __init__(self, vocab: int, tags: int, emb: int = 32, hidden: int = 64):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden // 2, bidirectional=True, batch_first=True)
        self.hidden2tag = nn.Linear(hidden, tags)
        self.transitions = nn.Parameter(torch.randn(tags, tags) * 0.1)  # [to, from]
        self.start = nn.Parameter(torch.zeros(tags))
        self.end = nn.Parameter(torch.zeros(tags))

    def emissions(self, words: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embedding(words))
        return self.hidden2tag(out)

    def neg_log_likelihood(self, words: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
        em = self.emissions(words)  # (B, T, K)
        b, t, _ = em.shape
        # the forward algorithm: log of the partition function
        alpha = self.start + em[:, 0]
        for i in range(1, t):
            alpha = torch.logsumexp(alpha.unsqueeze(1) + self.transitions.unsqueeze(0), dim=2) + em[:, i]
        log_z = torch.logsumexp(alpha + self.end, dim=1)
        # the score of the gold path
        rows = torch.arange(b)
        gold = self.start[tags[:, 0]] + em[rows, 0, tags[:, 0]]
        for i in range(1, t):
            gold = gold + self.transitions[tags[:, i], tags[:, i - 1]] + em[rows, i, tags[:, i]]
        gold = gold + self.end[tags[:, -1]]
        return (log_z - gold).mean()

    def viterbi(self, words: torch.Tensor) -> torch.Tensor:
        em = self.emissions(words)
        score, back = self.start + em[:, 0], []
        for i in range(1, em.shape[1]):
            s = score.unsqueeze(1) + self.transitions.unsqueeze(0)
            score, idx = s.max(2)
            score = score + em[:, i]
            back.append(idx)
        best = [(score + self.end).argmax(1)]
        for idx in reversed(back):
            best.append(idx.gather(1, best[-1].unsqueeze(1)).squeeze(1))
        return torch.stack(best[::-1], 1)


def bilstm_crf_tagger(path: str, epochs: int = 4, seed: int = 0, bug: str | None = None) -> list[float]:
    """Lample et al. (2016): a BiLSTM over word embeddings, a linear-chain CRF on top (written by
    hand), SGD with momentum and gradient clipping at 5, Viterbi decoding on a dev set."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    words, tags = _ner_sentences(rng, 1800)
    dev_w, dev_t = _ner_sentences(rng, 200)
    loader = DataLoader(TensorDataset(words, tags), batch_size=32, shuffle=True, generator=g)
    model = BiLSTMCRF(120, len(TAGS))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        for w, t in loader:
            if bug != "no_zero_grad":
                model.zero_grad()
            loss = model.neg_log_likelihood(w, t)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            pred = model.viterbi(dev_w)
        ent = dev_t > 0
        print(
            f"epoch {epoch} nll {np.mean(losses[-50:]):.3f} entity-token acc {(pred[ent] == dev_t[ent]).float().mean():.3f}"
        )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Kim text CNN


def _sentiment_corpus(rng: np.random.Generator, n: int, vocab: int = 400, length: int = 40):
    """Reviews: mostly neutral words, a few positive (words 1..40) or negative (41..80) ones,
    'not' (81) flips the next sentiment word. The label: the sign of the summed sentiment.
    Padding is word 0. Returns word ids, labels and 'pretrained' word vectors (word2vec-like:
    sentiment words share a direction, neutral words are random)."""
    x = rng.integers(82, vocab, (n, length))
    lens = rng.integers(15, length + 1, n)
    y = np.zeros(n, dtype=np.int64)
    for i in range(n):
        k = rng.integers(2, 7)
        pos = rng.choice(lens[i], k, replace=False)
        score = 0
        for p in pos:
            positive = rng.random() < 0.5
            x[i, p] = rng.integers(1, 41) if positive else rng.integers(41, 81)
            sign = 1 if positive else -1
            if p > 0 and rng.random() < 0.2:
                x[i, p - 1] = 81
                sign = -sign
            score += sign
        y[i] = int(score > 0) if score != 0 else int(rng.integers(2))
        x[i, lens[i] :] = 0
    dim = 50
    vectors = rng.standard_normal((vocab, dim)).astype(np.float32) * 0.5
    direction = rng.standard_normal(dim).astype(np.float32)
    vectors[1:41] += direction
    vectors[41:81] -= direction
    vectors[0] = 0
    return torch.tensor(x), torch.tensor(y), torch.tensor(vectors)


class KimCNN(nn.Module):
    def __init__(self, vectors: torch.Tensor, classes: int = 2, filters: int = 100):
        super().__init__()
        self.embedding = nn.Embedding.from_pretrained(vectors, freeze=True, padding_idx=0)
        dim = vectors.shape[1]
        self.convs = nn.ModuleList(nn.Conv1d(dim, filters, k) for k in (3, 4, 5))
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(3 * filters, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.embedding(x).transpose(1, 2)
        pooled = [F.relu(conv(e)).max(dim=2).values for conv in self.convs]
        return self.fc(self.dropout(torch.cat(pooled, 1)))


def kim_text_cnn(path: str, epochs: int = 5, seed: int = 0, bug: str | None = None) -> list[float]:
    """Kim (2014) CNN-static: frozen pretrained vectors, filter widths 3/4/5 x 100, max-over-time
    pooling, dropout 0.5, Adadelta (rho 0.95), max-norm 3 on the output weights, batch 50."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    x, y, vectors = _sentiment_corpus(rng, 2500)
    n_tr = 2000
    loader = DataLoader(TensorDataset(x[:n_tr], y[:n_tr]), batch_size=50, shuffle=True, generator=g)
    model = KimCNN(vectors)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adadelta([p for p in model.parameters() if p.requires_grad], lr=1.0, rho=0.95)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            logits = model(xb)
            if bug == "softmax_before_ce":
                logits = F.softmax(logits, dim=1)
            loss = criterion(logits, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                w = model.fc.weight
                norms = w.norm(dim=1, keepdim=True).clamp(min=3.0)
                w.mul_(3.0 / norms)
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x[n_tr:]).argmax(1) == y[n_tr:]).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-40:]):.3f} dev acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- adaptive softmax LM


class AdaptiveLSTMLM(nn.Module):
    def __init__(self, vocab: int, emb: int = 64, hidden: int = 128):
        super().__init__()
        self.encoder = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, batch_first=True)
        self.drop = nn.Dropout(0.2)
        self.asm = nn.AdaptiveLogSoftmaxWithLoss(hidden, vocab, cutoffs=[100, 600], div_value=4.0)

    def forward(self, x, targets, state=None):
        out, state = self.rnn(self.drop(self.encoder(x)), state)
        result = self.asm(self.drop(out).reshape(-1, out.shape[-1]), targets.reshape(-1))
        return result.loss, state


def adaptive_softmax_lm(path: str, epochs: int = 2, seed: int = 0) -> list[float]:
    """A word-level LSTM LM over a Zipfian vocabulary of 3000 words with an adaptive softmax
    (cutoffs 100/600), truncated BPTT of 35 with the hidden state carried (and detached) across
    batches, Adam, clipping at 0.25."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    vocab, bptt, batch = 3000, 35, 20
    stream = torch.tensor(_hmm_zipf_tokens(rng, vocab, 2 * 20 * 35 * 50))
    data = stream[: len(stream) // batch * batch].view(batch, -1)
    model = AdaptiveLSTMLM(vocab)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        state = None
        for i in range(0, data.shape[1] - 1 - bptt, bptt):
            x, y = data[:, i : i + bptt], data[:, i + 1 : i + 1 + bptt]
            if state is not None:
                state = tuple(s.detach() for s in state)
            loss, state = model(x, y, state)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            opt.step()
            losses.append(loss.item())
        print(f"epoch {epoch} loss {np.mean(losses[-20:]):.3f} ppl {math.exp(np.mean(losses[-20:])):.0f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- word2vec CBOW + HS


def _huffman(counts: np.ndarray) -> tuple[list[list[int]], list[list[int]]]:
    """word2vec's Huffman tree: for each word, the inner nodes on its path and the binary code."""
    heap = [(int(c), i) for i, c in enumerate(counts)]
    heapq.heapify(heap)
    parent, bit, nxt = {}, {}, len(counts)
    while len(heap) > 1:
        c1, a = heapq.heappop(heap)
        c2, b = heapq.heappop(heap)
        parent[a], bit[a], parent[b], bit[b] = nxt, 0, nxt, 1
        heapq.heappush(heap, (c1 + c2, nxt))
        nxt += 1
    root = heap[0][1]
    paths, codes = [], []
    for w in range(len(counts)):
        p, c, node = [], [], w
        while node != root:
            p.append(parent[node] - len(counts))
            c.append(bit[node])
            node = parent[node]
        paths.append(p[::-1])
        codes.append(c[::-1])
    return paths, codes


class CBOWHierarchical(nn.Module):
    def __init__(self, vocab: int, dim: int, paths: list[list[int]], codes: list[list[int]]):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, sparse=True)
        self.nodes = nn.Embedding(vocab - 1, dim, sparse=True)
        nn.init.uniform_(self.emb.weight, -0.5 / dim, 0.5 / dim)
        nn.init.zeros_(self.nodes.weight)
        depth = max(map(len, paths))
        self.register_buffer("path", torch.tensor([p + [0] * (depth - len(p)) for p in paths]))
        self.register_buffer("code", torch.tensor([c + [0] * (depth - len(c)) for c in codes]).float())
        self.register_buffer(
            "valid", torch.tensor([[1] * len(p) + [0] * (depth - len(p)) for p in paths]).float()
        )

    def forward(self, context: torch.Tensor, center: torch.Tensor) -> torch.Tensor:
        h = self.emb(context).mean(1)  # (B, D)
        node_vecs = self.nodes(self.path[center])  # (B, L, D)
        logits = torch.einsum("bd,bld->bl", h, node_vecs)
        # word2vec's convention: code bit 1 -> the left branch, p = 1 - sigmoid
        nll = F.binary_cross_entropy_with_logits(logits, 1 - self.code[center], reduction="none")
        return (nll * self.valid[center]).sum(1)  # per word


def cbow_hierarchical_softmax(path: str, epochs: int = 5, seed: int = 0) -> list[float]:
    """word2vec CBOW (window 4) with hierarchical softmax over a Huffman tree, sparse embeddings,
    plain SGD with word2vec's linearly decaying learning rate (0.05 -> 0.0001 x)."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    vocab, window, dim = 800, 4, 50
    corpus = _hmm_zipf_tokens(rng, vocab, 40_000, states=20, topical=0.9, stay=0.8)
    counts = np.bincount(corpus, minlength=vocab) + 1
    paths, codes = _huffman(counts)
    corpus_t = torch.tensor(corpus)
    centers = torch.arange(window, len(corpus) - window)
    offsets = torch.cat([torch.arange(-window, 0), torch.arange(1, window + 1)])
    model = CBOWHierarchical(vocab, dim, paths, codes)
    lr0, batch = 0.05, 256
    opt = torch.optim.SGD(model.parameters(), lr=lr0)
    total = epochs * (len(centers) // batch)
    hook = Hook(path)
    hook.register_module(model)
    losses, it = [], 0
    for _ in range(epochs):
        order = centers[torch.randperm(len(centers), generator=g)]
        for i in range(0, len(order) - batch + 1, batch):
            c = order[i : i + batch]
            ctx = corpus_t[c[:, None] + offsets]
            for group in opt.param_groups:
                group["lr"] = lr0 * max(1e-4, 1 - it / total)
            loss = model(ctx, corpus_t[c]).sum()  # per-word updates, as word2vec's C code
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item() / batch)
            it += 1
            if it % 50 == 0:
                print(f"words {it * batch} loss {np.mean(losses[-100:]):.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Performer (FAVOR+)


def _orthogonal_features(m: int, d: int, g: torch.Generator) -> torch.Tensor:
    blocks = []
    for _ in range(math.ceil(m / d)):
        q, _ = torch.linalg.qr(torch.randn(d, d, generator=g))
        blocks.append(q.T)
    w = torch.cat(blocks)[:m]
    return w * torch.randn(m, d, generator=g).norm(dim=1, keepdim=True)


class FavorAttention(nn.Module):
    """Performer self-attention: softmax kernel approximated with positive orthogonal random
    features, linear in the sequence length (non-causal); features redrawn every 100 calls."""

    def __init__(self, d: int, heads: int, features: int, g: torch.Generator):
        super().__init__()
        self.heads, self.dh, self.m, self.g = heads, d // heads, features, g
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.register_buffer("proj", _orthogonal_features(features, self.dh, g))
        self.calls = 0

    def _phi(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.dh**-0.25
        wx = x @ self.proj.T
        sq = x.pow(2).sum(-1, keepdim=True) / 2
        return torch.exp(wx - sq - wx.amax(-1, keepdim=True).detach()) / math.sqrt(self.m) + 1e-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.calls += 1
            if self.calls % 100 == 0:
                self.proj.copy_(_orthogonal_features(self.m, self.dh, self.g))
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.dh).permute(2, 0, 3, 1, 4)
        q, k = self._phi(q), self._phi(k)
        kv = torch.einsum("bhtm,bhtd->bhmd", k, v)
        norm = torch.einsum("bhtm,bhm->bht", q, k.sum(2))
        out = torch.einsum("bhtm,bhmd->bhtd", q, kv) / norm.unsqueeze(-1)
        return self.out(out.transpose(1, 2).reshape(b, t, d))


class Performer(nn.Module):
    def __init__(
        self, vocab: int, classes: int, g: torch.Generator, d: int = 64, layers: int = 2, seq: int = 256
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.02)
        self.attn = nn.ModuleList(FavorAttention(d, 4, 32, g) for _ in range(layers))
        self.ln1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.ln2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.ff = nn.ModuleList(
            nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Dropout(0.1), nn.Linear(2 * d, d))
            for _ in range(layers)
        )
        self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, classes))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids) + self.pos[:, : ids.shape[1]]
        for attn, ln1, ln2, ff in zip(self.attn, self.ln1, self.ln2, self.ff, strict=True):
            h = h + attn(ln1(h))
            h = h + ff(ln2(h))
        return self.head(h.mean(1))


def performer_long_sequences(path: str, steps: int = 120, seed: int = 0) -> list[float]:
    """Long-sequence classification (length 128, LRA-like): which of 4 marker tokens occurs most
    often among noise tokens. A Performer encoder, AdamW, warm-up then linear decay."""
    g = _seed(seed)
    seq, vocab = 128, 32

    def batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randint(4, vocab, (n, seq), generator=g)
        counts = torch.randint(1, 8, (n, 4), generator=g)
        y = counts.argmax(1)
        counts[torch.arange(n), y] += 2
        for i in range(n):
            marks = torch.cat([torch.full((int(c),), k) for k, c in enumerate(counts[i])])
            x[i, torch.randperm(seq, generator=g)[: len(marks)]] = marks
        return x, y

    model = Performer(vocab, 4, g, seq=seq)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / 20, (steps - s) / (steps - 20)))
    x_val, y_val = batch(200)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        model.train()
        xb, yb = batch(16)
        loss = criterion(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                acc = (model(x_val).argmax(1) == y_val).float().mean().item()
            print(f"step {step} loss {np.mean(losses[-50:]):.3f} val acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- a small pretrained GPT
# (the fine-tuning pipelines below start from a "checkpoint": a tiny GPT pretrained in-process on a
# mixture of 4 token domains before the hook is attached, as a downloaded base model would be)


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (
            p(x).view(b, t, self.heads, -1).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out_proj(y.transpose(1, 2).reshape(b, t, d))


class GPTBlock(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads)
        self.ln_2 = nn.LayerNorm(d)
        self.fc_in = nn.Linear(d, 4 * d)
        self.fc_out = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.fc_out(F.gelu(self.fc_in(self.ln_2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int, d: int = 48, layers: int = 2, heads: int = 4, max_len: int = 64):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(max_len, d)
        self.h = nn.ModuleList(GPTBlock(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        self.apply(
            lambda m: (
                nn.init.normal_(m.weight, std=0.02) if isinstance(m, (nn.Linear, nn.Embedding)) else None
            )
        )

    def hidden(self, ids: torch.Tensor | None = None, embeds: torch.Tensor | None = None) -> torch.Tensor:
        x = self.wte(ids) if embeds is None else embeds
        x = x + self.wpe(torch.arange(x.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)

    def forward(self, ids: torch.Tensor | None = None, embeds: torch.Tensor | None = None) -> torch.Tensor:
        return self.lm_head(self.hidden(ids, embeds))


GPT_VOCAB = 32


def _domains(seed: int, k: int = 5) -> list[np.ndarray]:
    """k token domains: the cumulative transition matrices of k sparse Markov chains."""
    rng = np.random.default_rng(1000 + seed)
    return [rng.dirichlet(0.1 * np.ones(GPT_VOCAB), size=GPT_VOCAB).cumsum(1) for _ in range(k)]


def _sample_domain(rng: np.random.Generator, cum: np.ndarray, n: int, length: int) -> torch.Tensor:
    out = np.zeros((n, length), dtype=np.int64)
    out[:, 0] = rng.integers(GPT_VOCAB, size=n)
    u = rng.random((n, length))
    for t in range(1, length):
        out[:, t] = np.minimum((cum[out[:, t - 1]] < u[:, t : t + 1]).sum(1), GPT_VOCAB - 1)
    return torch.tensor(out)


def _pretrained_gpt(seed: int, steps: int = 150, length: int = 32) -> TinyGPT:
    """The 'base checkpoint': a TinyGPT trained on an even mixture of domains 0-3."""
    torch.manual_seed(500 + seed)
    rng = np.random.default_rng(500 + seed)
    domains = _domains(seed)[:4]
    model = TinyGPT(GPT_VOCAB)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    for _ in range(steps):
        x = torch.cat([_sample_domain(rng, cum, 8, length + 1) for cum in domains])
        loss = F.cross_entropy(model(x[:, :-1]).reshape(-1, GPT_VOCAB), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return model


# ----------------------------------------------------------------------------- LoRA


class LoRALinear(nn.Module):
    """A frozen nn.Linear plus a trainable low-rank update B @ A, scaled by alpha / r (the peft
    default initialisation: A Kaiming-uniform, B zero)."""

    def __init__(self, base: nn.Linear, r: int = 8, alpha: int = 16, dropout: float = 0.05):
        super().__init__()
        self.base = base
        self.base.weight.requires_grad_(False)
        if self.base.bias is not None:
            self.base.bias.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = alpha / r
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (self.dropout(x) @ self.lora_A.T @ self.lora_B.T) * self.scaling


def _inject_lora(model: nn.Module, targets: tuple[str, ...], **kw) -> None:
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if name in targets and isinstance(child, nn.Linear):
                setattr(module, name, LoRALinear(child, **kw))


def lora_domain_adaptation(path: str, steps: int = 200, seed: int = 0) -> list[float]:
    """Adapt the pretrained GPT to an unseen domain with LoRA (r 8, alpha 16, dropout 0.05) on
    every linear layer of the blocks; the base weights, embeddings and norms stay frozen."""
    model = _pretrained_gpt(seed)
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    target = _domains(seed)[4]
    for p in model.parameters():
        p.requires_grad_(False)
    _inject_lora(model, ("q_proj", "k_proj", "v_proj", "out_proj", "fc_in", "fc_out"))
    trainable = [p for p in model.parameters() if p.requires_grad]
    print(
        f"trainable params {sum(p.numel() for p in trainable)} of {sum(p.numel() for p in model.parameters())}"
    )
    opt = torch.optim.AdamW(trainable, lr=2e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 25) * max(0.0, 1 - s / steps))
    data = _sample_domain(rng, target, 4000, 33)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    model.train()
    for step in range(steps):
        x = data[torch.randint(0, len(data), (32,), generator=g)]
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, GPT_VOCAB), x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- prompt tuning


class SoftPrompt(nn.Module):
    """Lester et al. (2021): n trainable prompt vectors prepended to the frozen model's input
    embeddings, initialised from the embeddings of sampled vocabulary tokens."""

    def __init__(self, model: TinyGPT, n: int = 8):
        super().__init__()
        self.model = model
        idx = torch.randint(0, model.wte.num_embeddings, (n,))
        self.prompt = nn.Parameter(model.wte.weight[idx].detach().clone())

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        emb = self.model.wte(ids)
        prompt = self.prompt.unsqueeze(0).expand(len(ids), -1, -1)
        logits = self.model(embeds=torch.cat([prompt, emb], 1))
        return logits[:, self.prompt.shape[0] :]


def prompt_tuning(path: str, steps: int = 200, seed: int = 0) -> list[float]:
    base = _pretrained_gpt(seed)
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    for p in base.parameters():
        p.requires_grad_(False)
    model = SoftPrompt(base)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam([model.prompt], lr=0.05)
    data = _sample_domain(rng, _domains(seed)[2], 3000, 25)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        x = data[torch.randint(0, len(data), (32,), generator=g)]
        logits = model(x[:, :-1])
        loss = criterion(logits.reshape(-1, GPT_VOCAB), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- preferences


def _quality(x: torch.Tensor) -> torch.Tensor:
    """The hidden human preference: tokens 0-5 are 'good', 26-31 'bad'."""
    return (x < 6).float().sum(1) - (x >= 26).float().sum(1)


def _preference_pairs(rng: np.random.Generator, seed: int, n: int, length: int = 24):
    """Pairs of responses from the pretraining domains; the preferred one drawn by Bradley-Terry
    from the hidden quality. Returns (chosen, rejected)."""
    domains = _domains(seed)[:4]
    a = torch.cat([_sample_domain(rng, cum, n // 4, length) for cum in domains])
    b = torch.cat([_sample_domain(rng, cum, n // 4, length) for cum in domains])
    b = b[torch.randperm(len(b))]
    p_a = torch.sigmoid(0.7 * (_quality(a) - _quality(b)))
    a_wins = torch.tensor(rng.random(len(a)) < p_a.numpy())
    chosen = torch.where(a_wins[:, None], a, b)
    rejected = torch.where(a_wins[:, None], b, a)
    return chosen, rejected


class RewardModel(nn.Module):
    def __init__(self, backbone: TinyGPT):
        super().__init__()
        self.backbone = backbone
        self.score = nn.Linear(backbone.ln_f.normalized_shape[0], 1, bias=False)
        nn.init.normal_(self.score.weight, std=1 / math.sqrt(backbone.ln_f.normalized_shape[0] + 1))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.score(self.backbone.hidden(ids)[:, -1]).squeeze(-1)  # the last token's reward


def reward_model_bradley_terry(path: str, epochs: int = 2, seed: int = 0) -> list[float]:
    """A reward model initialised from the pretrained GPT with a scalar head on the last token,
    trained on preference pairs with the Bradley-Terry loss -log sigmoid(r_chosen - r_rejected)."""
    backbone = _pretrained_gpt(seed)
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    chosen, rejected = _preference_pairs(rng, seed, 3200)
    n_tr = 2800
    loader = DataLoader(
        TensorDataset(chosen[:n_tr], rejected[:n_tr]), batch_size=32, shuffle=True, generator=g
    )
    model = RewardModel(backbone)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.0)
    total = epochs * len(loader)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1 - s / total))
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        for c, r in loader:
            rewards = model(torch.cat([c, r]))
            r_c, r_r = rewards.chunk(2)
            loss = -F.logsigmoid(r_c - r_r).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(chosen[n_tr:]) > model(rejected[n_tr:])).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-30:]):.3f} pairwise accuracy {acc:.3f}")
    hook.close()
    return losses


def _sequence_logps(model: nn.Module, ids: torch.Tensor, prompt_len: int) -> torch.Tensor:
    logits = model(ids[:, :-1])
    logps = torch.gather(logits.log_softmax(-1), 2, ids[:, 1:].unsqueeze(2)).squeeze(2)
    return logps[:, prompt_len - 1 :].sum(1)  # the response tokens only


def dpo_frozen_reference(path: str, steps: int = 150, beta: float = 0.1, seed: int = 0) -> list[float]:
    """Direct preference optimisation (Rafailov et al. 2023): the policy and a frozen reference,
    both the pretrained GPT; loss -log sigmoid(beta * (policy - reference log-ratio margin));
    RMSprop with linear warm-up, as the reference implementation; prompts are 8 tokens."""
    policy = _pretrained_gpt(seed)
    reference = copy.deepcopy(policy)
    reference.requires_grad_(False)
    reference.eval()
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    chosen, rejected = _preference_pairs(rng, seed, 2400, length=24)
    rejected[:, :8] = chosen[:, :8]  # both responses continue the same prompt
    opt = torch.optim.RMSprop(policy.parameters(), lr=2e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 15))
    hook = Hook(path)
    hook.register_module(policy)
    losses = []
    policy.train()
    for step in range(steps):
        idx = torch.randint(0, len(chosen), (32,), generator=g)
        c, r = chosen[idx], rejected[idx]
        pi = _sequence_logps(policy, torch.cat([c, r]), 8)
        with torch.no_grad():
            ref = _sequence_logps(reference, torch.cat([c, r]), 8)
        pi_c, pi_r = pi.chunk(2)
        ref_c, ref_r = ref.chunk(2)
        margin = beta * ((pi_c - ref_c) - (pi_r - ref_r))
        loss = -F.logsigmoid(margin).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(policy.parameters(), 10.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 25 == 0:
            print(f"step {step} loss {loss.item():.3f} reward acc {(margin > 0).float().mean():.2f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- tiny CLIP


def _captioned_images(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 RGB 12x12 images of a shape (square, cross, ring, bar) of a colour (red, green, blue,
    yellow) in a quadrant, and their 3-word captions (shape, colour, place: vocabulary of 12)."""
    yy, xx = torch.meshgrid(torch.arange(6), torch.arange(6), indexing="ij")
    shapes = torch.stack(
        [
            ((yy - 2.5).abs() < 2) & ((xx - 2.5).abs() < 2),
            ((yy - 2.5).abs() < 1) | ((xx - 2.5).abs() < 1),
            (((yy - 2.5) ** 2 + (xx - 2.5) ** 2).sqrt() - 2).abs() < 0.7,
            (xx - 2.5).abs() < 1,
        ]
    ).float()
    colours = torch.tensor([[1.0, 0.1, 0.1], [0.1, 1.0, 0.1], [0.1, 0.2, 1.0], [1.0, 1.0, 0.1]])
    s, c, q = (torch.randint(0, 4, (n,), generator=g) for _ in range(3))
    img = torch.zeros(n, 3, 12, 12)
    for i in range(n):
        r0, c0 = 6 * (int(q[i]) // 2), 6 * (int(q[i]) % 2)
        img[i, :, r0 : r0 + 6, c0 : c0 + 6] = shapes[s[i]] * colours[c[i]][:, None, None]
    img = img * (0.8 + 0.2 * torch.rand(n, 1, 1, 1, generator=g)) + 0.05 * torch.rand(img.shape, generator=g)
    images = (img.clamp(0, 1) * 255).to(torch.uint8)
    captions = torch.stack([s, 4 + c, 8 + q], 1)
    return images, captions


class TinyCLIP(nn.Module):
    def __init__(self, embed: int = 32):
        super().__init__()
        self.visual = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.GELU(), nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.GELU(), nn.Flatten(), nn.Linear(64 * 9, embed),
        )  # fmt: skip
        self.token_embedding = nn.Embedding(12, 32)
        self.positional = nn.Parameter(torch.randn(3, 32) * 0.01)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=True)
        self.text = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.ln_final = nn.LayerNorm(32)
        self.text_projection = nn.Linear(32, embed, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def encode_image(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.visual(x), dim=-1)

    def encode_text(self, t: torch.Tensor) -> torch.Tensor:
        h = self.ln_final(self.text(self.token_embedding(t) + self.positional))
        return F.normalize(self.text_projection(h.mean(1)), dim=-1)

    def forward(self, images: torch.Tensor, texts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits_per_image = self.logit_scale.exp() * self.encode_image(images) @ self.encode_text(texts).T
        return logits_per_image, logits_per_image.T


def tiny_clip(path: str, steps: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    """CLIP: an image tower and a text tower, the symmetric InfoNCE loss over the batch, a
    learnable temperature (initialised to 1/0.07, clamped at 100), AdamW as in the paper
    (betas 0.9/0.98, eps 1e-6, weight decay 0.2 except gains, biases and the temperature)."""
    g = _seed(seed)
    images, captions = _captioned_images(g, 4096)
    mean = torch.tensor([0.3, 0.3, 0.2]).view(1, 3, 1, 1)
    std = torch.tensor([0.3, 0.3, 0.3]).view(1, 3, 1, 1)

    def preprocess(x: torch.Tensor) -> torch.Tensor:
        x = x.float() if bug == "inputs_x255" else x.float() / 255.0
        return (x - mean) / std

    model = TinyCLIP()
    criterion = nn.CrossEntropyLoss()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "positional" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "positional" not in n)]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.2}, {"params": rest, "weight_decay": 0.0}],
        lr=1e-3, betas=(0.9, 0.98), eps=1e-6,
    )  # fmt: skip
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / 20 if s < 20 else 0.5 * (1 + math.cos(math.pi * (s - 20) / (steps - 20)))
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    labels = torch.arange(64)
    for step in range(steps):
        idx = torch.randint(0, len(images), (64,), generator=g)
        logits_i, logits_t = model(preprocess(images[idx]), captions[idx])
        loss = (criterion(logits_i, labels) + criterion(logits_t, labels)) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f} scale {model.logit_scale.exp().item():.1f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- FT-Transformer


def _tabular_mixed(rng: np.random.Generator, n: int, classes: int = 3):
    """8 numeric features (skewed, different scales) and 4 categorical ones; the class from a
    nonlinear score with feature interactions."""
    num = np.column_stack(
        [rng.lognormal(0, 1, n), rng.normal(50, 10, n), rng.exponential(3, n), rng.uniform(-1, 1, n)]
        + [rng.normal(0, 1, n) for _ in range(4)]
    )
    cards = [5, 12, 3, 30]
    cat = np.column_stack([rng.integers(0, c, n) for c in cards])
    effects = [rng.normal(0, 1, c) for c in cards]
    score = (
        np.log(num[:, 0]) * 0.8 + (num[:, 1] - 50) / 10 * num[:, 3] + np.sin(num[:, 2]) + num[:, 4] * num[:, 5]
        + sum(e[cat[:, j]] for j, e in enumerate(effects)) + 0.3 * rng.standard_normal(n)
    )  # fmt: skip
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    return num.astype(np.float32), cat, cards, y


class FTTransformer(nn.Module):
    """Gorishniy et al. (2021): every feature a token (numeric: x * w_j + b_j; categorical: an
    embedding + bias), a [CLS] token, pre-norm transformer blocks with ReGLU feed-forward."""

    def __init__(self, n_num: int, cards: list[int], classes: int, d: int = 32, blocks: int = 2):
        super().__init__()
        self.num_weight = nn.Parameter(torch.empty(n_num, d))
        self.num_bias = nn.Parameter(torch.empty(n_num, d))
        for p in (self.num_weight, self.num_bias):
            nn.init.uniform_(p, -1 / math.sqrt(d), 1 / math.sqrt(d))
        self.cat_embeddings = nn.ModuleList(nn.Embedding(c, d) for c in cards)
        self.cls = nn.Parameter(torch.empty(1, 1, d).uniform_(-1 / math.sqrt(d), 1 / math.sqrt(d)))
        self.blocks = nn.ModuleList()
        for _ in range(blocks):
            self.blocks.append(
                nn.ModuleDict(
                    {
                        "attn_norm": nn.LayerNorm(d),
                        "attn": nn.MultiheadAttention(d, 8, dropout=0.2, batch_first=True),
                        "ffn_norm": nn.LayerNorm(d),
                        "ffn_in": nn.Linear(d, 2 * int(d * 4 / 3)),
                        "ffn_out": nn.Linear(int(d * 4 / 3), d),
                        "drop": nn.Dropout(0.1),
                    }
                )
            )
        self.head = nn.Sequential(nn.LayerNorm(d), nn.ReLU(), nn.Linear(d, classes))

    def forward(self, x_num: torch.Tensor, x_cat: torch.Tensor) -> torch.Tensor:
        tokens = [x_num.unsqueeze(-1) * self.num_weight + self.num_bias]
        tokens.append(torch.stack([emb(x_cat[:, j]) for j, emb in enumerate(self.cat_embeddings)], 1))
        x = torch.cat([self.cls.expand(len(x_num), -1, -1), *tokens], 1)
        for i, blk in enumerate(self.blocks):
            h = blk["attn_norm"](x) if i > 0 else x  # the first block has no attention norm
            x = x + blk["drop"](blk["attn"](h, h, h, need_weights=False)[0])
            a, b = blk["ffn_in"](blk["ffn_norm"](x)).chunk(2, -1)
            x = x + blk["drop"](blk["ffn_out"](a * F.relu(b)))
        return self.head(x[:, 0])


def ft_transformer(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """FT-Transformer on mixed tabular data: quantile-transformed numeric features, AdamW
    (lr 1e-4 x 10 for this small width, weight decay 1e-5 except tokenizer/norms/biases),
    batch 128, early stopping on validation accuracy."""
    from sklearn.preprocessing import QuantileTransformer

    g = _seed(seed)
    rng = np.random.default_rng(seed)
    num, cat, cards, y = _tabular_mixed(rng, 3000)
    n_tr = 2400
    qt = QuantileTransformer(n_quantiles=500, output_distribution="normal", random_state=seed)
    num = np.concatenate([qt.fit_transform(num[:n_tr]), qt.transform(num[n_tr:])]).astype(np.float32)
    x_num, x_cat, yt = torch.tensor(num), torch.tensor(cat), torch.tensor(y)
    loader = DataLoader(
        TensorDataset(x_num[:n_tr], x_cat[:n_tr], yt[:n_tr]), batch_size=128, shuffle=True, generator=g
    )
    model = FTTransformer(8, cards, 3)
    no_decay = {"num_weight", "num_bias", "cls"}
    groups = [
        {"params": [p for n, p in model.named_parameters() if n in no_decay or "norm" in n or n.endswith(".bias")],
         "weight_decay": 0.0},
        {"params": [p for n, p in model.named_parameters() if not (n in no_decay or "norm" in n or n.endswith(".bias"))],
         "weight_decay": 1e-5},
    ]  # fmt: skip
    opt = torch.optim.AdamW(groups, lr=1e-3)
    if bug == "frozen_by_mistake":  # a "freeze the embeddings" line meant for a pretrained model
        for emb in model.cat_embeddings:
            emb.weight.requires_grad = False
        model.num_weight.requires_grad = False
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses, best, best_state = [], 0.0, None
    for epoch in range(epochs):
        model.train()
        for xn, xc, yb in loader:
            opt.zero_grad()
            loss = criterion(model(xn, xc), yb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x_num[n_tr:], x_cat[n_tr:]).argmax(1) == yt[n_tr:]).float().mean().item()
        if acc > best:
            best, best_state = acc, copy.deepcopy(model.state_dict())
        print(f"epoch {epoch} loss {np.mean(losses[-19:]):.3f} val acc {acc:.3f} (best {best:.3f})")
    model.load_state_dict(best_state)
    hook.close()
    return losses


# ----------------------------------------------------------------------------- CTR: DeepFM


def _ctr_logs(rng: np.random.Generator, n: int, cards: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Click logs: categorical fields with power-law value frequencies; the click from a hidden
    logistic model with first-order and pairwise field effects (mean CTR about 25%)."""
    fields = []
    for c in cards:
        p = 1.0 / np.arange(1, c + 1) ** 1.05
        fields.append(rng.choice(c, n, p=p / p.sum()))
    x = np.column_stack(fields)
    k = 4
    v = [rng.normal(0, 0.5, (c, k)) for c in cards]
    w = [rng.normal(0, 0.5, c) for c in cards]
    logit = -1.2 + sum(w[j][x[:, j]] for j in range(len(cards)))
    for a in range(len(cards)):
        for b in range(a + 1, len(cards)):
            logit += (v[a][x[:, a]] * v[b][x[:, b]]).sum(1) * 0.5
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    return x, y


class DeepFM(nn.Module):
    def __init__(self, cards: list[int], k: int = 8, hidden: tuple[int, ...] = (64, 64)):
        super().__init__()
        self.offsets = torch.tensor(np.concatenate([[0], np.cumsum(cards)[:-1]]))
        total = int(sum(cards))
        self.linear = nn.Embedding(total, 1)
        self.embedding = nn.Embedding(total, k)
        self.bias = nn.Parameter(torch.zeros(1))
        nn.init.xavier_uniform_(self.embedding.weight)
        nn.init.zeros_(self.linear.weight)
        layers, d = [], len(cards) * k
        for h in hidden:
            layers += [nn.Linear(d, h), nn.BatchNorm1d(h), nn.ReLU(), nn.Dropout(0.2)]
            d = h
        self.mlp = nn.Sequential(*layers, nn.Linear(d, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.offsets
        first = self.linear(x).sum(1).squeeze(1) + self.bias
        e = self.embedding(x)  # (B, F, k)
        second = 0.5 * (e.sum(1).pow(2) - e.pow(2).sum(1)).sum(1)
        deep = self.mlp(e.flatten(1)).squeeze(1)
        return first + second + deep


def deepfm_ctr(path: str, epochs: int = 3, seed: int = 0) -> list[float]:
    from sklearn.metrics import roc_auc_score

    g = _seed(seed)
    rng = np.random.default_rng(seed)
    cards = [20, 50, 8, 100, 12, 30, 5, 60]
    x, y = _ctr_logs(rng, 24_000, cards)
    n_tr = 20_000
    xt, yt = torch.tensor(x), torch.tensor(y)
    loader = DataLoader(TensorDataset(xt[:n_tr], yt[:n_tr]), batch_size=256, shuffle=True, generator=g)
    model = DeepFM(cards)
    criterion = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-6)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            opt.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            auc = roc_auc_score(y[n_tr:], torch.sigmoid(model(xt[n_tr:])).numpy())
        print(f"epoch {epoch} logloss {np.mean(losses[-78:]):.4f} val auc {auc:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- CTR: wide & deep, sparse


class WideAndDeep(nn.Module):
    """Wide: hashed cross features in a 1-d EmbeddingBag (a sparse linear model). Deep: multi-hot
    bags (a user's recent items) and single ids through EmbeddingBags (sparse=True) into an MLP."""

    def __init__(self, n_items: int, n_users: int, n_cross: int, dim: int = 16):
        super().__init__()
        self.wide = nn.EmbeddingBag(n_cross, 1, mode="sum", sparse=True)
        self.item_bag = nn.EmbeddingBag(n_items, dim, mode="mean", sparse=True)
        self.user = nn.EmbeddingBag(n_users, dim, mode="sum", sparse=True)
        self.target_item = nn.EmbeddingBag(n_items, dim, mode="sum", sparse=True)
        self.deep = nn.Sequential(
            nn.Linear(3 * dim, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1)
        )
        nn.init.zeros_(self.wide.weight)

    def forward(self, cross, cross_off, hist, hist_off, user, item):
        wide = self.wide(cross, cross_off).squeeze(1)
        h = torch.cat(
            [self.item_bag(hist, hist_off), self.user(user.view(-1, 1)), self.target_item(item.view(-1, 1))],
            1,
        )
        return wide + self.deep(h).squeeze(1)


def wide_deep_sparse(path: str, steps: int = 250, seed: int = 0) -> list[float]:
    """Wide & deep for click prediction with sparse embedding gradients: SparseAdam for the
    embedding bags, Adam for the dense MLP (two optimizers), variable-length history bags given
    as a flat index tensor plus offsets."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    n_users, n_items, n_cross, n_topics = 500, 400, 2**12, 8
    item_topic = rng.integers(0, n_topics, n_items)
    user_topic = rng.integers(0, n_topics, n_users)
    item_pop = rng.normal(0, 0.7, n_items)

    def sample(n: int):
        users = rng.integers(0, n_users, n)
        items = rng.integers(0, n_items, n)
        lens = rng.integers(1, 12, n)
        hist = [np.where(rng.random(k) < 0.7,
                         rng.choice(np.flatnonzero(item_topic == user_topic[u]), k),
                         rng.integers(0, n_items, k)) for u, k in zip(users, lens, strict=True)]  # fmt: skip
        logit = -1.0 + 1.6 * (item_topic[items] == user_topic[users]) + item_pop[items]
        y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
        cross = [(u * 31 + item_topic[i]) % n_cross for u, i in zip(users, items, strict=True)]
        cross2 = [(item_topic[h[-1]] * 97 + i) % n_cross for h, i in zip(hist, items, strict=True)]
        flat_hist = torch.tensor(np.concatenate(hist))
        hist_off = torch.tensor(np.concatenate([[0], np.cumsum(lens)[:-1]]))
        cross_t = torch.tensor(np.stack([cross, cross2], 1).reshape(-1))
        cross_off = torch.arange(0, 2 * n, 2)
        return (
            cross_t,
            cross_off,
            flat_hist,
            hist_off,
            torch.tensor(users),
            torch.tensor(items),
            torch.tensor(y),
        )

    model = WideAndDeep(n_items, n_users, n_cross)
    sparse_params = [p for m in model.modules() if isinstance(m, nn.EmbeddingBag) for p in m.parameters()]
    dense_params = list(model.deep.parameters())
    sparse_opt = torch.optim.SparseAdam(sparse_params, lr=1e-2)
    dense_opt = torch.optim.Adam(dense_params, lr=1e-3)
    criterion = nn.BCEWithLogitsLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    val = sample(2000)
    for step in range(steps):
        *inputs, y = sample(256)
        loss = criterion(model(*inputs), y)
        sparse_opt.zero_grad()
        dense_opt.zero_grad()
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        losses.append(loss.item())
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                vloss = criterion(model(*val[:-1]), val[-1]).item()
            model.train()
            print(f"step {step} train {np.mean(losses[-50:]):.4f} val {vloss:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- factorization machine


class FactorizationMachine(nn.Module):
    """Rendle (2010) on one-hot inputs given as indices: w0 + sum w_i + sum_{i<j} <v_i, v_j>."""

    def __init__(self, n_features: int, k: int = 10):
        super().__init__()
        self.w0 = nn.Parameter(torch.zeros(1))
        self.w = nn.Embedding(n_features, 1)
        self.v = nn.Embedding(n_features, k)
        nn.init.zeros_(self.w.weight)
        nn.init.normal_(self.v.weight, std=0.1)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        v = self.v(idx)
        inter = 0.5 * (v.sum(1).pow(2) - v.pow(2).sum(1)).sum(1)
        return self.w0 + self.w(idx).sum((1, 2)) + inter


def factorization_machine_ratings(path: str, epochs: int = 6, seed: int = 0) -> list[float]:
    """Explicit ratings 1-5 (user, item, the user's age group, the item's genre, the weekday
    one-hot), an FM regressor, MSE with L2 on the factors, Adagrad; validation RMSE per epoch."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    n_users, n_items, k = 300, 200, 4
    pu, qi = rng.normal(0, 0.6, (n_users, k)), rng.normal(0, 0.6, (n_items, k))
    bu, bi = rng.normal(0, 0.4, n_users), rng.normal(0, 0.5, n_items)
    age, genre = rng.integers(0, 5, n_users), rng.integers(0, 8, n_items)
    n = 20_000
    u, i, day = rng.integers(0, n_users, n), rng.integers(0, n_items, n), rng.integers(0, 7, n)
    r = 3.5 + bu[u] + bi[i] + (pu[u] * qi[i]).sum(1) + 0.2 * (day >= 5) + 0.4 * rng.standard_normal(n)
    r = np.clip(np.round(r), 1, 5).astype(np.float32)
    offs = np.cumsum([0, n_users, n_items, 5, 8])
    idx = np.stack([u, offs[1] + i, offs[2] + age[u], offs[3] + genre[i], offs[4] + day], 1)
    x, y = torch.tensor(idx), torch.tensor(r)
    n_tr = 17_000
    loader = DataLoader(TensorDataset(x[:n_tr], y[:n_tr]), batch_size=128, shuffle=True, generator=g)
    model = FactorizationMachine(int(offs[-1]) + 7)
    with torch.no_grad():
        model.w0.fill_(float(y[:n_tr].mean()))
    criterion = nn.MSELoss()
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            pred = model(xb)
            loss = criterion(pred, yb)
            reg = 1e-4 * model.v(xb).pow(2).sum() / len(xb)
            opt.zero_grad()
            (loss + reg).backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            rmse = criterion(model(x[n_tr:]).clamp(1, 5), y[n_tr:]).sqrt().item()
        print(f"epoch {epoch} train mse {np.mean(losses[-133:]):.3f} val rmse {rmse:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DeepSurv (Cox)


def _cox_partial_likelihood(risk: torch.Tensor, time: torch.Tensor, event: torch.Tensor) -> torch.Tensor:
    """The negative Cox partial log-likelihood (Breslow ties), averaged over the events."""
    order = torch.argsort(time, descending=True)
    risk, event = risk[order], event[order]
    log_risk_set = torch.logcumsumexp(risk, 0)  # everyone still at risk at each time
    return -((risk - log_risk_set) * event).sum() / event.sum().clamp(min=1)


def _concordance(risk: np.ndarray, time: np.ndarray, event: np.ndarray) -> float:
    ok = (time[:, None] < time[None, :]) & (event[:, None] == 1)
    return float(((risk[:, None] > risk[None, :]) & ok).sum() / max(ok.sum(), 1))


def deepsurv_cox(path: str, epochs: int = 30, seed: int = 0) -> list[float]:
    """DeepSurv (Katzman et al. 2018): an MLP risk score trained with the Cox partial likelihood
    on right-censored survival times; SELU + alpha-dropout, Adam, L2, C-index on a held-out set."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    n, d = 2000, 10
    x = rng.standard_normal((n, d)).astype(np.float32)
    log_hazard = 0.8 * x[:, 0] - 0.6 * x[:, 1] + 0.8 * np.tanh(2 * x[:, 2]) * x[:, 3] + 0.4 * x[:, 4] ** 2
    t_event = rng.exponential(1 / np.exp(log_hazard))
    t_censor = rng.exponential(np.median(t_event) * 2, n)
    time = np.minimum(t_event, t_censor).astype(np.float32)
    event = (t_event <= t_censor).astype(np.float32)
    n_tr = 1600
    xt, tt, et = torch.tensor(x), torch.tensor(time), torch.tensor(event)
    loader = DataLoader(
        TensorDataset(xt[:n_tr], tt[:n_tr], et[:n_tr]), batch_size=256, shuffle=True, generator=g
    )
    model = nn.Sequential(
        nn.Linear(d, 32), nn.SELU(), nn.AlphaDropout(0.1), nn.Linear(32, 32), nn.SELU(), nn.AlphaDropout(0.1),
        nn.Linear(32, 1, bias=False),
    )  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, tb, eb in loader:
            loss = _cox_partial_likelihood(model(xb).squeeze(1), tb, eb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if epoch % 5 == 4:
            model.eval()
            with torch.no_grad():
                risk = model(xt[n_tr:]).squeeze(1).numpy()
            print(
                f"epoch {epoch} loss {np.mean(losses[-7:]):.3f} c-index {_concordance(risk, time[n_tr:], event[n_tr:]):.3f}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- CORAL ordinal


class CoralLayer(nn.Module):
    """Cao et al. (2020): one shared weight vector, K-1 ordered biases -> K-1 binary logits."""

    def __init__(self, d: int, classes: int):
        super().__init__()
        self.fc = nn.Linear(d, 1, bias=False)
        self.biases = nn.Parameter(torch.arange(classes - 1, 0, -1).float() / (classes - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + self.biases


def coral_ordinal(path: str, epochs: int = 10, seed: int = 0, bug: str | None = None) -> list[float]:
    """Ordinal regression of a 6-level grade from 12 features (a noisy latent score cut at
    thresholds): CORAL with the extended binary labels y > k, Adam; MAE of the predicted rank."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    classes, d, n = 6, 12, 4000
    x = rng.standard_normal((n, d)).astype(np.float32)
    w = rng.standard_normal(d)
    latent = x @ w + 0.5 * np.sin(3 * x[:, 0]) + 0.5 * rng.standard_normal(n)
    y = np.digitize(latent, np.quantile(latent, [0.1, 0.3, 0.55, 0.75, 0.9]))
    xt, yt = torch.tensor(x), torch.tensor(y)
    n_tr = 3400
    loader = DataLoader(TensorDataset(xt[:n_tr], yt[:n_tr]), batch_size=64, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), CoralLayer(32, classes))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    thresholds = torch.arange(classes - 1)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            logits = model(xb)
            levels = (yb[:, None] > thresholds).float()
            if bug == "log_zero_nan":  # the loss written out from the paper's formula
                p = torch.sigmoid(logits)
                loss = -(levels * torch.log(p) + (1 - levels) * torch.log(1 - p)).sum(1).mean()
            else:
                loss = (
                    -(levels * F.logsigmoid(logits) + (1 - levels) * (F.logsigmoid(logits) - logits))
                    .sum(1)
                    .mean()
                )
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            rank = (torch.sigmoid(model(xt[n_tr:])) > 0.5).sum(1)
        print(
            f"epoch {epoch} loss {np.mean(losses[-54:]):.3f} val MAE {(rank - yt[n_tr:]).abs().float().mean():.3f}"
        )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- multi-label, 50 labels


def multilabel_50(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """Tagging documents (bag-of-words TF-IDF-like vectors, 300 terms) with any of 50 tags drawn
    from 10 latent topics: an MLP with BCEWithLogitsLoss over the 50 outputs, AdamW, step decay;
    micro-F1 at threshold 0.5 on a validation set."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    n, terms, tags, topics = 5000, 300, 50, 10
    topic_terms = rng.dirichlet(0.05 * np.ones(terms), topics)
    topic_tags = (rng.random((topics, tags)) < 0.12).astype(np.float32)
    mix = rng.dirichlet(0.3 * np.ones(topics), n)
    counts = np.stack([rng.multinomial(60, m @ topic_terms) for m in mix]).astype(np.float32)
    x = np.log1p(counts) * np.log(n / (1 + (counts > 0).sum(0)))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    p_tag = 1 - np.prod(1 - np.clip(mix[:, :, None] * 1.5, 0, 1) * topic_tags[None], axis=1)
    y = (rng.random((n, tags)) < p_tag).astype(np.float32)
    xt, yt = torch.tensor(x), torch.tensor(y)
    n_tr = 4200
    y_train = yt[:n_tr][torch.randperm(n_tr, generator=g)] if bug == "shuffled_labels" else yt[:n_tr]
    loader = DataLoader(TensorDataset(xt[:n_tr], y_train), batch_size=64, shuffle=True, generator=g)
    model = nn.Sequential(
        nn.Linear(terms, 256), nn.ReLU(), nn.Dropout(0.3), nn.Linear(256, 128), nn.ReLU(), nn.Dropout(0.3),
        nn.Linear(128, tags),
    )  # fmt: skip
    criterion = nn.BCEWithLogitsLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            opt.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        sched.step()
        model.eval()
        with torch.no_grad():
            pred = (torch.sigmoid(model(xt[n_tr:])) > 0.5).float()
        tp = (pred * yt[n_tr:]).sum()
        f1 = 2 * tp / (pred.sum() + yt[n_tr:].sum()).clamp(min=1)
        print(f"epoch {epoch} loss {np.mean(losses[-66:]):.4f} val micro-F1 {f1:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- TransE


def transe_knowledge_graph(path: str, epochs: int = 40, seed: int = 0) -> list[float]:
    """TransE (Bordes et al. 2013): h + r ~ t, L1 distance, margin ranking loss (margin 1)
    against corrupted heads or tails, entity embeddings renormalised to unit length before each
    batch, plain SGD with OpenKE's large learning rate (0.5); raw mean rank of the true tail on held-out triples."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    n_ent, n_rel, dim = 300, 12, 32
    # a hidden geometry: entities on a grid of 'places', relations as fixed moves
    coords = rng.integers(0, 12, (n_ent, 2))
    moves = rng.integers(-3, 4, (n_rel, 2))
    triples = []
    for h in range(n_ent):
        for r in rng.choice(n_rel, 4, replace=False):
            target = coords[h] + moves[r]
            dist = np.abs(coords - target).sum(1)
            dist[h] = 99
            t = int(np.argmin(dist + rng.random(n_ent) * 0.5))
            triples.append((h, r, t))
    triples = torch.tensor(triples)
    perm = torch.randperm(len(triples), generator=g)
    train, test = triples[perm[:-100]], triples[perm[-100:]]
    ent = nn.Embedding(n_ent, dim)
    rel = nn.Embedding(n_rel, dim)
    bound = 6 / math.sqrt(dim)
    nn.init.uniform_(ent.weight, -bound, bound)
    nn.init.uniform_(rel.weight, -bound, bound)
    with torch.no_grad():
        rel.weight.div_(rel.weight.norm(dim=1, keepdim=True))
    model = nn.ModuleDict({"entities": ent, "relations": rel})
    criterion = nn.MarginRankingLoss(margin=1.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)

    def score(h, r, t):
        return (ent(h) + rel(r) - ent(t)).abs().sum(1)

    losses = []
    for epoch in range(epochs):
        order = torch.randperm(len(train), generator=g)
        for i in range(0, len(train), 128):
            h, r, t = train[order[i : i + 128]].T
            with torch.no_grad():
                ent.weight.div_(ent.weight.norm(dim=1, keepdim=True))
            corrupt_head = torch.rand(len(h), generator=g) < 0.5
            rand_ent = torch.randint(0, n_ent, (len(h),), generator=g)
            h2, t2 = torch.where(corrupt_head, rand_ent, h), torch.where(corrupt_head, t, rand_ent)
            pos, neg = score(h, r, t), score(h2, r, t2)
            loss = criterion(neg, pos, torch.ones_like(pos))  # want neg > pos + margin
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if epoch % 10 == 9:
            with torch.no_grad():
                h, r, t = test.T
                d_all = (ent(h)[:, None] + rel(r)[:, None] - ent.weight[None]).abs().sum(2)
                rank = (d_all < d_all.gather(1, t[:, None])).sum(1).float().mean() + 1
            print(f"epoch {epoch} loss {np.mean(losses[-10:]):.3f} mean rank {rank:.1f} of {n_ent}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SASRec


def _sessions(rng: np.random.Generator, n_users: int, n_items: int, length: int) -> np.ndarray:
    """Item sequences (ids 1..n_items, 0 pads): users drift through item 'neighbourhoods' (each
    item's next item is usually one of a few successors), with some random clicks."""
    succ = rng.integers(1, n_items + 1, (n_items + 1, 4))
    seqs = np.zeros((n_users, length), dtype=np.int64)
    for u in range(n_users):
        k = int(rng.integers(length // 2, length + 1))
        s = [int(rng.integers(1, n_items + 1))]
        for _ in range(k - 1):
            s.append(
                int(succ[s[-1], rng.integers(4)]) if rng.random() < 0.8 else int(rng.integers(1, n_items + 1))
            )
        seqs[u, length - k :] = s  # left-padded
    return seqs


class SASRec(nn.Module):
    def __init__(self, n_items: int, maxlen: int, d: int = 48, blocks: int = 2, heads: int = 1):
        super().__init__()
        self.item_emb = nn.Embedding(n_items + 1, d, padding_idx=0)
        self.pos_emb = nn.Embedding(maxlen, d)
        self.drop = nn.Dropout(0.2)
        self.attn_norms = nn.ModuleList(nn.LayerNorm(d, eps=1e-8) for _ in range(blocks))
        self.attns = nn.ModuleList(
            nn.MultiheadAttention(d, heads, dropout=0.2, batch_first=True) for _ in range(blocks)
        )
        self.ffn_norms = nn.ModuleList(nn.LayerNorm(d, eps=1e-8) for _ in range(blocks))
        self.ffns = nn.ModuleList(
            nn.Sequential(nn.Conv1d(d, d, 1), nn.Dropout(0.2), nn.ReLU(), nn.Conv1d(d, d, 1), nn.Dropout(0.2))
            for _ in range(blocks)
        )
        self.last_norm = nn.LayerNorm(d, eps=1e-8)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_normal_(p)

    def features(self, seq: torch.Tensor) -> torch.Tensor:
        x = self.item_emb(seq) * self.item_emb.embedding_dim**0.5 + self.pos_emb(torch.arange(seq.shape[1]))
        x = self.drop(x) * (seq > 0).unsqueeze(-1)
        t = seq.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        for an, attn, fn, ffn in zip(self.attn_norms, self.attns, self.ffn_norms, self.ffns, strict=True):
            q = an(x)
            x = q + attn(q, x, x, attn_mask=causal, need_weights=False)[0]
            x = fn(x)
            x = x + ffn(x.transpose(1, 2)).transpose(1, 2)
            x = x * (seq > 0).unsqueeze(-1)
        return self.last_norm(x)

    def forward(self, seq, pos, neg):
        h = self.features(seq)
        return (h * self.item_emb(pos)).sum(-1), (h * self.item_emb(neg)).sum(-1)


def sasrec_next_item(path: str, epochs: int = 8, seed: int = 0) -> list[float]:
    """SASRec (Kang & McAuley 2018): causal self-attention over a user's item sequence, the
    binary cross-entropy of the next item against one sampled negative at every position
    (padding masked), Adam betas (0.9, 0.98); HR@10 among 100 sampled items on a held-out last item."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    n_users, n_items, maxlen = 800, 300, 30
    seqs = torch.tensor(_sessions(rng, n_users, n_items, maxlen + 2))
    train_seq, train_pos = seqs[:, :-2][:, :maxlen], seqs[:, 1:-1][:, :maxlen]
    model = SASRec(n_items, maxlen)
    criterion = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98))
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(n_users, generator=g)
        for i in range(0, n_users, 64):
            idx = order[i : i + 64]
            seq, pos = train_seq[idx], train_pos[idx]
            neg = torch.randint(1, n_items + 1, pos.shape, generator=g)
            pos_logits, neg_logits = model(seq, pos, neg)
            mask = pos > 0
            loss = criterion(pos_logits[mask], torch.ones_like(pos_logits[mask])) + criterion(
                neg_logits[mask], torch.zeros_like(neg_logits[mask])
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            h = model.features(seqs[:, 1:-1][:, :maxlen])[:, -1]
            cands = torch.cat([seqs[:, -1:], torch.randint(1, n_items + 1, (n_users, 99), generator=g)], 1)
            scores = (h.unsqueeze(1) * model.item_emb(cands)).sum(-1)
            hr = ((scores > scores[:, :1]).sum(1) < 10).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-13:]):.3f} HR@10 {hr:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- two-tower retrieval


def two_tower_inbatch(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """A two-tower retrieval model (YouTube / Yi et al. 2019): user tower over the user id and
    their history bag, item tower over the item id and its category, in-batch softmax negatives
    with the logQ correction for item popularity, temperature 0.05, Adagrad."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    n_users, n_items, n_cats, dim = 600, 500, 20, 32
    cat = rng.integers(0, n_cats, n_items)
    taste = rng.dirichlet(0.2 * np.ones(n_cats), n_users)
    pop = 1.0 / np.arange(1, n_items + 1) ** 0.8
    pop = pop[rng.permutation(n_items)]
    affinity = taste[:, cat] * pop  # P(item | user) up to normalisation
    affinity /= affinity.sum(1, keepdims=True)
    cum = affinity.cumsum(1)
    history = torch.tensor(
        np.stack([np.minimum((cum[u] < rng.random((10, 1))).sum(1), n_items - 1) for u in range(n_users)])
    )
    item_freq = torch.tensor(affinity.mean(0), dtype=torch.float32)

    class UserTower(nn.Module):
        def __init__(self):
            super().__init__()
            self.user = nn.Embedding(n_users, dim)
            self.hist = nn.EmbeddingBag(n_items, dim, mode="mean")
            self.mlp = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, dim))

        def forward(self, u):
            return F.normalize(self.mlp(torch.cat([self.user(u), self.hist(history[u])], 1)), dim=-1)

    class ItemTower(nn.Module):
        def __init__(self):
            super().__init__()
            self.item = nn.Embedding(n_items, dim)
            self.cat = nn.Embedding(n_cats, dim)
            self.mlp = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, dim))

        def forward(self, i):
            return F.normalize(
                self.mlp(torch.cat([self.item(i), self.cat(torch.as_tensor(cat)[i])], 1)), dim=-1
            )

    model = nn.ModuleDict({"user_tower": UserTower(), "item_tower": ItemTower()})
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        users = torch.randint(0, n_users, (256,), generator=g)
        u_np = users.numpy()
        items = torch.tensor(np.minimum((cum[u_np] < rng.random((256, 1))).sum(1), n_items - 1))
        logits = model["user_tower"](users) @ model["item_tower"](items).T / 0.05
        logits = logits - torch.log(item_freq[items])[None, :]  # logQ correction
        loss = criterion(logits, torch.arange(256))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step} in-batch softmax loss {loss.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- N-BEATS


class NBeatsBlock(nn.Module):
    def __init__(self, backcast: int, forecast: int, width: int = 128, layers: int = 4):
        super().__init__()
        fc = [nn.Linear(backcast, width), nn.ReLU()]
        for _ in range(layers - 1):
            fc += [nn.Linear(width, width), nn.ReLU()]
        self.fc = nn.Sequential(*fc)
        self.theta = nn.Linear(width, backcast + forecast)
        self.backcast = backcast

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        theta = self.theta(self.fc(x))
        return theta[:, : self.backcast], theta[:, self.backcast :]


class NBeats(nn.Module):
    """The generic N-BEATS: doubly residual stacking, each block removes its backcast from the
    input and adds its forecast to the output."""

    def __init__(self, backcast: int, forecast: int, blocks: int = 6):
        super().__init__()
        self.blocks = nn.ModuleList(NBeatsBlock(backcast, forecast) for _ in range(blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual, forecast = x.flip(1), 0
        for block in self.blocks:
            b, f = block(residual)
            residual = residual - b
            forecast = forecast + f
        return forecast


def nbeats_forecast(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """N-BEATS on many short seasonal series with trends and level shifts (M4-like): lookback
    5H for horizon H = 8, inputs scaled by the window's last value, MASE loss (sMAPE reported),
    Adam 1e-3,
    batch 128 of windows sampled from the recent history of each series."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    n_series, length, horizon = 400, 120, 8
    lookback = 5 * horizon
    t = np.arange(length)
    period = rng.choice([4, 6, 12], n_series)
    series = (
        50 + rng.uniform(-0.2, 0.5, (n_series, 1)) * t
        + rng.uniform(3, 15, (n_series, 1)) * np.sin(2 * np.pi * t / period[:, None] + rng.uniform(0, 6, (n_series, 1)))
        + np.cumsum(rng.normal(0, 1, (n_series, length)), 1)
    )  # fmt: skip
    series = np.maximum(series, 1.0).astype(np.float32)
    data = torch.tensor(series)
    model = NBeats(lookback, horizon)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def smape(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return 2 * ((pred - target).abs() / (pred.abs() + target.abs()).clamp(min=1e-8)).mean()

    def mase(x: torch.Tensor, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        naive = (x[:, 1:] - x[:, :-1]).abs().mean(1, keepdim=True).clamp(min=1e-3)
        return ((pred - target).abs() / naive).mean()

    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        s = torch.randint(0, n_series, (128,), generator=g)
        end = torch.randint(lookback, length - 2 * horizon + 1, (128,), generator=g)
        idx = end[:, None] + torch.arange(-lookback, horizon)
        window = data[s[:, None], idx]
        scale = window[:, lookback - 1 : lookback]
        x, y = window[:, :lookback] / scale, window[:, lookback:] / scale
        loss = mase(x, model(x), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                win = data[:, -lookback - horizon :]
                sc = win[:, lookback - 1 : lookback]
                val = smape(model(win[:, :lookback] / sc) * sc, win[:, lookback:]).item()
            model.train()
            print(f"step {step} train MASE {np.mean(losses[-50:]):.4f} holdout sMAPE {val:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- autoencoder anomalies


def autoencoder_anomaly(path: str, epochs: int = 12, seed: int = 0, bug: str | None = None) -> list[float]:
    """Anomaly detection on 24 sensor channels that normally lie near a 4-d manifold: an
    undercomplete autoencoder trained on normal data only (standardised), MSE, Adam; the
    threshold at the 99th percentile of validation reconstruction error, AUROC on a test mix."""
    from sklearn.metrics import roc_auc_score

    g = _seed(seed)
    rng = np.random.default_rng(seed)
    mix = rng.standard_normal((4, 24))

    def normal(n: int) -> np.ndarray:
        z = rng.standard_normal((n, 4))
        return np.tanh(z @ mix) + 0.05 * rng.standard_normal((n, 24))

    x_tr, x_val = normal(4000), normal(500)
    x_anom = normal(100) + rng.standard_normal((100, 24)) * 0.5 * (rng.random((100, 24)) < 0.3)
    mu, sd = x_tr.mean(0), x_tr.std(0)
    norm = lambda a: torch.tensor((a - mu) / sd, dtype=torch.float32)  # noqa: E731
    xt, xv = norm(x_tr), norm(x_val)
    x_test = torch.cat([norm(normal(400)), norm(x_anom)])
    y_test = np.r_[np.zeros(400), np.ones(100)]
    model = nn.Sequential(
        nn.Linear(24, 16),
        nn.ReLU(),
        nn.Linear(16, 6),
        nn.ReLU(),
        nn.Linear(6, 16),
        nn.ReLU(),
        nn.Linear(16, 24),
    )
    if bug == "dead_relu_init":  # "start sparse": a negative bias meant to gate the code units
        nn.init.constant_(model[0].bias, -6.0)
        nn.init.constant_(model[2].bias, -6.0)
    criterion = nn.MSELoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(xt), batch_size=64, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for (xb,) in loader:
            opt.zero_grad()
            loss = criterion(model(xb), xb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if epoch % 4 == 3:
            model.eval()
            with torch.no_grad():
                thr = np.quantile(((model(xv) - xv) ** 2).mean(1).numpy(), 0.99)
                err = ((model(x_test) - x_test) ** 2).mean(1).numpy()
            print(f"epoch {epoch} loss {np.mean(losses[-63:]):.4f} AUROC {roc_auc_score(y_test, err):.3f} "
                  f"recall@thr {(err[400:] > thr).mean():.2f}")  # fmt: skip
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SAC


class PointMass:
    """A 2-d point mass pushed by a bounded force towards a random goal; reward minus the
    distance, a small action cost; 40-step episodes."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def reset(self) -> np.ndarray:
        self.pos = self.rng.uniform(-1, 1, 2)
        self.vel = np.zeros(2)
        self.goal = self.rng.uniform(-1, 1, 2)
        self.t = 0
        return self._obs()

    def _obs(self) -> np.ndarray:
        return np.concatenate([self.pos, self.vel, self.goal - self.pos]).astype(np.float32)

    def step(self, a: np.ndarray) -> tuple[np.ndarray, float, bool]:
        a = np.clip(a, -1, 1)
        self.vel = 0.85 * self.vel + 0.1 * a
        self.pos = np.clip(self.pos + self.vel, -1.5, 1.5)
        self.t += 1
        reward = -float(np.linalg.norm(self.goal - self.pos)) - 0.01 * float(a @ a)
        return self._obs(), reward, self.t >= 40


class ReplayBuffer:
    def __init__(self, obs_dim: int, act_dim: int, size: int = 100_000):
        self.o = np.zeros((size, obs_dim), np.float32)
        self.a = np.zeros((size, act_dim), np.float32)
        self.r = np.zeros(size, np.float32)
        self.o2 = np.zeros((size, obs_dim), np.float32)
        self.d = np.zeros(size, np.float32)
        self.n, self.i, self.size = 0, 0, size

    def add(self, o, a, r, o2, d) -> None:
        self.o[self.i], self.a[self.i], self.r[self.i], self.o2[self.i], self.d[self.i] = o, a, r, o2, d
        self.i = (self.i + 1) % self.size
        self.n = min(self.n + 1, self.size)

    def sample(self, rng: np.random.Generator, batch: int) -> tuple[torch.Tensor, ...]:
        idx = rng.integers(0, self.n, batch)
        return tuple(torch.as_tensor(v[idx]) for v in (self.o, self.a, self.r, self.o2, self.d))


def _mlp(inp: int, out: int, hidden: int = 64) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, out)
    )


class SquashedGaussianActor(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int):
        super().__init__()
        self.net = _mlp(obs_dim, 2 * act_dim)

    def forward(self, o: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        mu, log_std = self.net(o).chunk(2, -1)
        std = log_std.clamp(-20, 2).exp()
        u = mu if deterministic else mu + std * torch.randn_like(mu)
        logp = torch.distributions.Normal(mu, std).log_prob(u).sum(-1)
        logp = logp - (2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)  # tanh correction
        return torch.tanh(u), logp


class TwinQ(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int):
        super().__init__()
        self.q1 = _mlp(obs_dim + act_dim, 1)
        self.q2 = _mlp(obs_dim + act_dim, 1)

    def forward(self, o: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.cat([o, a], -1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)


def sac_point_mass(path: str, env_steps: int = 1000, seed: int = 0) -> list[float]:
    """Soft actor-critic (Haarnoja et al. 2018, v2): a tanh-squashed Gaussian actor, twin Q
    critics with Polyak-averaged targets (tau 0.005), automatic entropy tuning (target -|A|),
    three Adam optimizers at 3e-4, a replay buffer, one update per environment step after 200
    random steps. Returns the critic loss of each update."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    env = PointMass(rng)
    obs_dim, act_dim, gamma, tau = 6, 2, 0.99, 0.005
    actor, critic = SquashedGaussianActor(obs_dim, act_dim), TwinQ(obs_dim, act_dim)
    critic_targ = copy.deepcopy(critic)
    critic_targ.requires_grad_(False)
    log_alpha = torch.zeros(1, requires_grad=True)
    pi_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
    q_opt = torch.optim.Adam(critic.parameters(), lr=3e-4)
    alpha_opt = torch.optim.Adam([log_alpha], lr=3e-4)
    buf = ReplayBuffer(obs_dim, act_dim)
    hook = Hook(path)
    hook.register_module(actor, name="actor")
    hook.register_module(critic, name="critic")
    losses, ep_ret, o = [], 0.0, env.reset()
    for t in range(env_steps):
        if t < 200:
            a = rng.uniform(-1, 1, act_dim).astype(np.float32)
        else:
            with torch.no_grad():
                a = actor(torch.as_tensor(o).unsqueeze(0))[0][0].numpy()
        o2, r, done = env.step(a)
        buf.add(o, a, r, o2, 0.0)  # time-limit ends are not terminal
        ep_ret += r
        o = o2
        if done:
            if (t + 1) % 200 == 0:
                print(f"step {t + 1} episode return {ep_ret:.1f}")
            o, ep_ret = env.reset(), 0.0
        if t < 200:
            continue
        ob, ab, rb, o2b, db = buf.sample(rng, 128)
        alpha = log_alpha.exp().detach()
        with torch.no_grad():
            a2, logp2 = actor(o2b)
            q_targ = torch.min(*critic_targ(o2b, a2)) - alpha * logp2
            backup = rb + gamma * (1 - db) * q_targ
        q1, q2 = critic(ob, ab)
        q_loss = ((q1 - backup) ** 2).mean() + ((q2 - backup) ** 2).mean()
        q_opt.zero_grad()
        q_loss.backward()
        q_opt.step()
        for p in critic.parameters():
            p.requires_grad_(False)
        a_pi, logp = actor(ob)
        pi_loss = (alpha * logp - torch.min(*critic(ob, a_pi))).mean()
        pi_opt.zero_grad()
        pi_loss.backward()
        pi_opt.step()
        for p in critic.parameters():
            p.requires_grad_(True)
        alpha_loss = -(log_alpha * (logp.detach() - act_dim)).mean()
        alpha_opt.zero_grad()
        alpha_loss.backward()
        alpha_opt.step()
        with torch.no_grad():
            for p, pt in zip(critic.parameters(), critic_targ.parameters(), strict=True):
                pt.mul_(1 - tau).add_(tau * p)
        losses.append(q_loss.item())
    hook.close()
    return losses


# ----------------------------------------------------------------------------- TD3


class Pendulum:
    """Gym's Pendulum-v1 dynamics written out: torque in [-2, 2], 100-step episodes."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def reset(self) -> np.ndarray:
        self.th, self.thdot, self.t = self.rng.uniform(-np.pi, np.pi), self.rng.uniform(-1, 1), 0
        return self._obs()

    def _obs(self) -> np.ndarray:
        return np.array([np.cos(self.th), np.sin(self.th), self.thdot], np.float32)

    def step(self, u: np.ndarray) -> tuple[np.ndarray, float, bool]:
        u = float(np.clip(u[0], -2, 2))
        norm_th = ((self.th + np.pi) % (2 * np.pi)) - np.pi
        cost = norm_th**2 + 0.1 * self.thdot**2 + 0.001 * u**2
        self.thdot = np.clip(self.thdot + (3 * 10 / 2 * np.sin(self.th) + 3.0 * u) * 0.05, -8, 8)
        self.th = self.th + self.thdot * 0.05
        self.t += 1
        return self._obs(), -cost, self.t >= 100


def td3_pendulum(path: str, env_steps: int = 1500, seed: int = 0) -> list[float]:
    """TD3 (Fujimoto et al. 2018): a deterministic actor, twin critics, target policy smoothing
    (noise 0.2 clipped at 0.5), delayed actor and target updates (every 2 critic updates),
    Gaussian exploration noise 0.1, batch 100, Adam 3e-4. Returns the critic loss per update."""
    _seed(seed)
    rng = np.random.default_rng(seed)
    env = Pendulum(rng)
    obs_dim, act_dim, max_a, gamma, tau = 3, 1, 2.0, 0.99, 0.005
    actor = nn.Sequential(_mlp(obs_dim, act_dim, 128), nn.Tanh())
    critic = TwinQ(obs_dim, act_dim)
    actor_targ, critic_targ = copy.deepcopy(actor), copy.deepcopy(critic)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
    critic_opt = torch.optim.Adam(critic.parameters(), lr=3e-4)
    buf = ReplayBuffer(obs_dim, act_dim)
    hook = Hook(path)
    hook.register_module(actor, name="actor")
    hook.register_module(critic, name="critic")
    losses, o, ep_ret, it = [], env.reset(), 0.0, 0
    for t in range(env_steps):
        if t < 300:
            a = rng.uniform(-max_a, max_a, act_dim).astype(np.float32)
        else:
            with torch.no_grad():
                a = max_a * actor(torch.as_tensor(o)).numpy()
            a = np.clip(a + rng.normal(0, 0.1 * max_a, act_dim), -max_a, max_a).astype(np.float32)
        o2, r, done = env.step(a)
        buf.add(o, a / max_a, r, o2, 0.0)
        o, ep_ret = o2, ep_ret + r
        if done:
            print(f"step {t + 1} episode return {ep_ret:.1f}")
            o, ep_ret = env.reset(), 0.0
        if t < 300:
            continue
        it += 1
        ob, ab, rb, o2b, db = buf.sample(rng, 100)
        with torch.no_grad():
            noise = (torch.randn_like(ab) * 0.2).clamp(-0.5, 0.5)
            a2 = (actor_targ(o2b) + noise).clamp(-1, 1)
            target = rb + gamma * (1 - db) * torch.min(*critic_targ(o2b, a2))
        q1, q2 = critic(ob, ab)
        critic_loss = F.mse_loss(q1, target) + F.mse_loss(q2, target)
        critic_opt.zero_grad()
        critic_loss.backward()
        critic_opt.step()
        losses.append(critic_loss.item())
        if it % 2 == 0:
            actor_loss = -critic(ob, actor(ob))[0].mean()
            actor_opt.zero_grad()
            actor_loss.backward()
            actor_opt.step()
            with torch.no_grad():
                for net, targ in ((actor, actor_targ), (critic, critic_targ)):
                    for p, pt in zip(net.parameters(), targ.parameters(), strict=True):
                        pt.lerp_(p, tau)
    hook.close()
    return losses


# ----------------------------------------------------------------------------- behaviour cloning

_MAZE = [
    "#########",
    "#.......#",
    "#.###.#.#",
    "#...#.#.#",
    "###.#.#.#",
    "#...#...#",
    "#.#####.#",
    "#.......#",
    "#########",
]
_MOVES = [(-1, 0), (1, 0), (0, -1), (0, 1)]


def _expert_actions(goal: tuple[int, int]) -> dict[tuple[int, int], int]:
    """The scripted expert: a breadth-first search from the goal, the first move of a shortest path."""
    dist, frontier = {goal: 0}, [goal]
    while frontier:
        nxt = []
        for r, c in frontier:
            for dr, dc in _MOVES:
                p = (r + dr, c + dc)
                if _MAZE[p[0]][p[1]] == "." and p not in dist:
                    dist[p] = dist[(r, c)] + 1
                    nxt.append(p)
        frontier = nxt
    policy = {}
    for (r, c), d in dist.items():
        if d > 0:
            policy[(r, c)] = min(range(4), key=lambda a: dist.get((r + _MOVES[a][0], c + _MOVES[a][1]), 99))
    return policy


def behaviour_cloning_maze(path: str, epochs: int = 15, seed: int = 0) -> list[float]:
    """Behaviour cloning of a scripted shortest-path expert in a 9x9 maze: (position, goal)
    one-hot observations, the expert's action as the class, an MLP with cross-entropy, Adam;
    the success rate of the cloned policy measured by rollouts after each few epochs."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    free = [(r, c) for r in range(9) for c in range(9) if _MAZE[r][c] == "."]
    experts = {goal: _expert_actions(goal) for goal in free}

    def obs(pos, goal) -> torch.Tensor:
        o = torch.zeros(162)
        o[pos[0] * 9 + pos[1]] = 1
        o[81 + goal[0] * 9 + goal[1]] = 1
        return o

    xs, ys = [], []
    for _ in range(400):  # expert demonstrations
        goal, pos = free[rng.integers(len(free))], free[rng.integers(len(free))]
        while pos != goal:
            a = experts[goal][pos]
            xs.append(obs(pos, goal))
            ys.append(a)
            pos = (pos[0] + _MOVES[a][0], pos[1] + _MOVES[a][1])
    x, y = torch.stack(xs), torch.tensor(ys)
    print(f"{len(x)} expert transitions")
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, generator=g)
    policy = nn.Sequential(nn.Linear(162, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4))
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(policy)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        policy.train()
        for xb, yb in loader:
            opt.zero_grad()
            loss = criterion(policy(xb), yb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if epoch % 5 == 4:
            policy.eval()
            wins = 0
            with torch.no_grad():
                for _ in range(50):
                    goal, pos = free[rng.integers(len(free))], free[rng.integers(len(free))]
                    for _ in range(40):
                        if pos == goal:
                            wins += 1
                            break
                        dr, dc = _MOVES[int(policy(obs(pos, goal)).argmax())]
                        if _MAZE[pos[0] + dr][pos[1] + dc] == ".":
                            pos = (pos[0] + dr, pos[1] + dc)
            print(f"epoch {epoch} loss {np.mean(losses[-50:]):.3f} success {wins / 50:.2f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- keyword spotting


def _keyword_clips(rng: np.random.Generator, n: int, words: int = 10, coeffs: int = 40, frames: int = 49):
    """MFCC-like clips (coefficients x frames): each keyword a smooth spectral trajectory,
    time-stretched, shifted and scaled by the speaker, in background noise; class `words` is
    'unknown' (a trajectory of no keyword), class `words` + 1 'silence'."""
    knots = rng.standard_normal((words + 20, coeffs, 6)) * np.linspace(2.0, 0.3, coeffs)[None, :, None]
    x = np.zeros((n, coeffs, frames), np.float32)
    y = rng.integers(0, words + 2, n)
    for i in range(n):
        noise = 1.0 * rng.standard_normal((coeffs, frames))
        if y[i] == words + 1:
            x[i] = noise
            continue
        proto = knots[y[i]] if y[i] < words else knots[words + rng.integers(20)]
        dur = int(rng.integers(25, 40))
        start = int(rng.integers(0, frames - dur))
        t = np.linspace(0, 5, dur)
        traj = np.stack([np.interp(t, np.arange(6), proto[c]) for c in range(coeffs)])
        x[i] = noise
        x[i, :, start : start + dur] += traj * rng.uniform(0.3, 0.8)
    return torch.tensor(x), torch.tensor(y)


class KeywordNet(nn.Module):
    """A TC-ResNet-like temporal CNN: MFCC coefficients as channels, 1-D convolutions over time."""

    def __init__(self, coeffs: int, classes: int):
        super().__init__()
        self.stem = nn.Conv1d(coeffs, 48, 3, padding=1, bias=False)
        self.blocks = nn.ModuleList()
        for c_in, c_out in ((48, 48), (48, 64), (64, 96)):
            self.blocks.append(
                nn.ModuleDict(
                    {
                        "conv1": nn.Conv1d(c_in, c_out, 7, stride=2, padding=3, bias=False),
                        "bn1": nn.BatchNorm1d(c_out),
                        "conv2": nn.Conv1d(c_out, c_out, 7, padding=3, bias=False),
                        "bn2": nn.BatchNorm1d(c_out),
                        "skip": nn.Sequential(
                            nn.Conv1d(c_in, c_out, 1, stride=2, bias=False), nn.BatchNorm1d(c_out)
                        ),
                    }
                )
            )
        self.dropout = nn.Dropout(0.3)
        self.fc = nn.Linear(96, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for b in self.blocks:
            out = F.relu(b["bn1"](b["conv1"](h)))
            h = F.relu(b["bn2"](b["conv2"](out)) + b["skip"](h))
        return self.fc(self.dropout(h.mean(2)))


def keyword_spotting(path: str, epochs: int = 4, seed: int = 0, bug: str | None = None) -> list[float]:
    """Speech-commands-like keyword spotting (10 words + unknown + silence) on MFCC-like input:
    SpecAugment masks on the fly, SGD nesterov momentum 0.9, lr 0.1 with cosine annealing,
    weight decay 1e-3, per-epoch validation under model.eval() / torch.no_grad()."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    x, y = _keyword_clips(rng, 2400)
    mean, std = x[:2000].mean((0, 2), keepdim=True), x[:2000].std((0, 2), keepdim=True)
    x = (x - mean) / std
    loader = DataLoader(
        TensorDataset(x[:2000], y[:2000]), batch_size=64, shuffle=True, generator=g, drop_last=True
    )
    model = KeywordNet(40, 12)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * len(loader))
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for epoch in range(epochs):
        if bug != "train_in_eval_mode":
            model.train()
        for xb, yb in loader:
            xb = xb.clone()
            for i in range(len(xb)):  # SpecAugment: one frequency and one time mask
                f0, t0 = (
                    int(torch.randint(0, 32, (1,), generator=g)),
                    int(torch.randint(0, 40, (1,), generator=g)),
                )
                xb[i, f0 : f0 + int(torch.randint(0, 8, (1,), generator=g))] = 0
                xb[i, :, t0 : t0 + int(torch.randint(0, 9, (1,), generator=g))] = 0
            opt.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x[2000:]).argmax(1) == y[2000:]).float().mean().item()
        print(f"epoch {epoch} loss {np.mean(losses[-31:]):.3f} val acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- gradient checkpointing


class ResidualBlock(nn.Module):
    def __init__(self, d: int, plain_sigmoid: bool = False):
        super().__init__()
        self.plain = plain_sigmoid
        if plain_sigmoid:
            self.net = nn.Sequential(nn.Linear(d, d), nn.Sigmoid())
        else:
            self.net = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x) if self.plain else x + self.net(x)


class DeepCheckpointedMLP(nn.Module):
    def __init__(self, inp: int, out: int, d: int = 48, depth: int = 12, plain_sigmoid: bool = False):
        super().__init__()
        self.inp = nn.Linear(inp, d)
        self.blocks = nn.ModuleList(ResidualBlock(d, plain_sigmoid) for _ in range(depth))
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for block in self.blocks:
            # in training, recompute the block's activations in backward instead of storing them
            h = checkpoint(block, h, use_reentrant=False) if self.training else block(h)
        return self.out(self.norm(h))


def checkpointed_deep_mlp(
    path: str, updates: int = 120, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A 12-block residual MLP regressor with activation checkpointing per block
    (use_reentrant=False), CPU bf16 autocast, micro-batches of 32 accumulated 2 times, AdamW
    with warm-up + cosine, gradient clipping; the target a smooth random function of 32 inputs."""
    g = _seed(seed)
    d_in = 32
    teacher = nn.Sequential(nn.Linear(d_in, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 4))
    x = torch.randn(6000, d_in, generator=g)
    with torch.no_grad():
        y = teacher(x)
        y = (y - y.mean(0)) / y.std(0)
    model = DeepCheckpointedMLP(d_in, 4, plain_sigmoid=bug == "deep_sigmoid")
    criterion = nn.MSELoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / 15 if s < 15 else 0.5 * (1 + math.cos(math.pi * (s - 15) / (updates - 15)))
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    accum, losses = 2, []
    model.train()
    for update in range(updates):
        opt.zero_grad(set_to_none=True)
        for _ in range(accum):
            idx = torch.randint(0, 5000, (32,), generator=g)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x[idx])
            loss = criterion(pred.float(), y[idx])
            (loss / accum).backward()
            losses.append(loss.item())
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if update % 40 == 39:
            model.eval()
            with torch.no_grad():
                val = criterion(model(x[5000:]), y[5000:]).item()
            model.train()
            print(f"update {update} train {np.mean(losses[-100:]):.4f} val {val:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DeepAR


class DeepAR(nn.Module):
    """Salinas et al. (2020): an autoregressive LSTM fed the previous (scaled) value and time
    covariates, emitting the mean and scale of a Gaussian for the next value."""

    def __init__(self, covariates: int, hidden: int = 40, layers: int = 2):
        super().__init__()
        self.rnn = nn.LSTM(1 + covariates, hidden, layers, batch_first=True, dropout=0.1)
        self.mu = nn.Linear(hidden, 1)
        self.sigma = nn.Linear(hidden, 1)

    def forward(self, prev: torch.Tensor, cov: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, _ = self.rnn(torch.cat([prev.unsqueeze(-1), cov], -1))
        return self.mu(h).squeeze(-1), F.softplus(self.sigma(h)).squeeze(-1) + 1e-4


def deepar_gaussian(path: str, steps: int = 200, seed: int = 0) -> list[float]:
    """DeepAR on many related daily series (weekly seasonality, per-series level and trend):
    windows of 56 days, values divided by the window's mean level (DeepAR's scaling), day-of-week
    covariates, the Gaussian negative log-likelihood (nn.GaussianNLLLoss, the variance the
    squared scale), Adam 1e-3, clipping at 10."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    n_series, length, window = 300, 400, 56
    t = np.arange(length)
    level = rng.lognormal(2, 1, (n_series, 1))
    weekly = rng.uniform(0.1, 0.5, (n_series, 1)) * np.sin(
        2 * np.pi * t / 7 + rng.uniform(0, 6, (n_series, 1))
    )
    trend = 1 + rng.uniform(-0.0005, 0.001, (n_series, 1)) * t
    noise = 1 + 0.1 * rng.standard_normal((n_series, length))
    series = torch.tensor(level * trend * (1 + weekly) * noise, dtype=torch.float32)
    dow = F.one_hot(torch.tensor(t % 7), 7).float()
    model = DeepAR(covariates=7)
    criterion = nn.GaussianNLLLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        s = torch.randint(0, n_series, (64,), generator=g)
        start = torch.randint(0, length - window - 40, (64,), generator=g)
        idx = start[:, None] + torch.arange(window + 1)
        z = series[s[:, None], idx]
        scale = 1 + z[:, :-1].mean(1, keepdim=True)
        z = z / scale
        mu, sigma = model(z[:, :-1], dow[idx[:, 1:]])
        loss = criterion(mu, z[:, 1:], sigma**2)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():  # one-step-ahead error on the last 40 days
                z = series[:, -41:] / (1 + series[:, -97:-41].mean(1, keepdim=True))
                mu, _ = model(z[:, :-1], dow[length - 40 :].expand(n_series, -1, -1))
                mae = (mu - z[:, 1:]).abs().mean().item()
            model.train()
            print(f"step {step} nll {np.mean(losses[-50:]):.3f} holdout one-step MAE {mae:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SimCSE


def simcse_unsupervised(path: str, steps: int = 150, seed: int = 0) -> list[float]:
    """Unsupervised SimCSE (Gao et al. 2021): each sentence encoded twice by the same encoder,
    the two dropout masks the only augmentation, in-batch InfoNCE at temperature 0.05 on the
    [CLS] vectors; a small transformer encoder, AdamW 3e-4 (a BERT checkpoint would take 3e-5),
    alignment / uniformity printed on held-out sentences."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    vocab, seq = 200, 16
    sentences = (
        torch.tensor(_hmm_zipf_tokens(rng, vocab - 1, 2000 * seq, states=16, topical=0.8, stay=0.9)) + 1
    )
    sentences = sentences.view(-1, seq)
    sentences = torch.cat([torch.zeros(len(sentences), 1, dtype=torch.long), sentences], 1)  # [CLS] = 0

    class Encoder(nn.Module):
        def __init__(self, d: int = 48):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(seq + 1, d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, activation="gelu", batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.pooler = nn.Sequential(nn.Linear(d, d), nn.Tanh())  # the MLP over [CLS] used in training

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.pooler(self.encoder(self.tok(ids) + self.pos)[:, 0])

    model = Encoder()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    held_out = sentences[-256:]
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        model.train()
        batch = sentences[torch.randint(0, len(sentences) - 256, (32,), generator=g)]
        z = F.normalize(model(torch.cat([batch, batch])), dim=-1)  # two dropout masks
        z1, z2 = z.chunk(2)
        loss = criterion(z1 @ z2.T / 0.05, torch.arange(32))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                e = F.normalize(model(held_out), dim=-1)
                uniform = torch.pdist(e).pow(2).mul(-2).exp().mean().log().item()
            print(f"step {step} loss {np.mean(losses[-50:]):.3f} uniformity {uniform:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- pointer network


class PointerNet(nn.Module):
    """Vinyals et al. (2015): an LSTM encoder over the inputs, an LSTM decoder whose additive
    attention over the encoder states is the output distribution (a pointer to an input)."""

    def __init__(self, hidden: int = 64):
        super().__init__()
        self.embed = nn.Linear(1, hidden)
        self.encoder = nn.LSTM(hidden, hidden, batch_first=True)
        self.decoder = nn.LSTMCell(hidden, hidden)
        self.w_enc = nn.Linear(hidden, hidden, bias=False)
        self.w_dec = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, 1, bias=False)
        self.start = nn.Parameter(torch.zeros(hidden))

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        emb = self.embed(x.unsqueeze(-1))
        enc, (h, c) = self.encoder(emb)
        h, c = h[0], c[0]
        inp = self.start.expand(len(x), -1)
        mask = torch.zeros(x.shape, dtype=torch.bool)
        keys = self.w_enc(enc)
        logits_all = []
        for i in range(x.shape[1]):
            h, c = self.decoder(inp, (h, c))
            logits = self.v(torch.tanh(keys + self.w_dec(h).unsqueeze(1))).squeeze(-1)
            logits = logits.masked_fill(mask, -1e9)  # each input is pointed at once
            logits_all.append(logits)
            choice = targets[:, i] if targets is not None else logits.argmax(1)  # teacher forcing
            mask = mask | F.one_hot(choice, x.shape[1]).bool()
            inp = emb[torch.arange(len(x)), choice]
        return torch.stack(logits_all, 1)


def pointer_network_sort(path: str, steps: int = 250, seed: int = 0) -> list[float]:
    """A pointer network learning to sort 10 numbers: cross-entropy of the pointer at each output
    step under teacher forcing, Adam 1e-3, clipping at 2; greedy decoding accuracy on held-out sets."""
    g = _seed(seed)
    n = 10
    model = PointerNet()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_val = torch.rand(200, n, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        model.train()
        x = torch.rand(64, n, generator=g)
        target = x.argsort(1)
        logits = model(x, target)
        loss = criterion(logits.reshape(-1, n), target.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                pred = model(x_val).argmax(-1)
            acc = (pred == x_val.argsort(1)).float().mean().item()
            print(f"step {step} loss {np.mean(losses[-50:]):.3f} pointer accuracy {acc:.3f}")
    hook.close()
    return losses


_bert = healthy("bert_mlm_15pct_masking_tied_decoder", "masked LM", bert_mlm)
_kim = healthy("kim_cnn_static_frozen_vectors_adadelta", "text classification", kim_text_cnn)
_crf = healthy("bilstm_crf_ner_sgd_clip", "sequence tagging", bilstm_crf_tagger)
_clip = healthy("clip_two_towers_learnable_temperature", "multimodal", tiny_clip)
_multilabel = healthy("multilabel_bce_50_tags_tfidf", "multi-label", multilabel_50)
_ftt = healthy("ft_transformer_quantile_cls_token", "tabular", ft_transformer)
_kws = healthy("keyword_spotting_tcresnet_specaugment", "audio", keyword_spotting)
_ckpt = healthy("checkpointed_residual_mlp_bf16_accum2", "memory", checkpointed_deep_mlp)
_coral = healthy("coral_ordinal_regression_grades", "ordinal regression", coral_ordinal)
_anomaly = healthy("autoencoder_anomaly_detection_sensors", "anomaly detection", autoencoder_anomaly)

PIPELINES = [
    healthy("llama_rope_rmsnorm_swiglu_adamw", "language model", llama_lm),
    healthy("gated_linear_recurrence_lm", "state-space", gated_recurrence_lm),
    healthy("ctc_bigru_speech_frames", "speech", ctc_speech),
    healthy("adaptive_softmax_lstm_zipf_bptt", "language model", adaptive_softmax_lm),
    healthy("cbow_hierarchical_softmax_huffman", "embeddings", cbow_hierarchical_softmax),
    healthy("performer_favor_long_sequences", "transformer", performer_long_sequences),
    healthy("lora_all_linear_domain_adaptation", "fine-tuning", lora_domain_adaptation),
    healthy("prompt_tuning_soft_prompt_frozen_gpt", "fine-tuning", prompt_tuning),
    healthy("reward_model_bradley_terry_pairs", "RLHF", reward_model_bradley_terry),
    healthy("dpo_frozen_reference_rmsprop", "RLHF", dpo_frozen_reference),
    healthy("deepfm_ctr_fields_batchnorm", "CTR", deepfm_ctr),
    healthy("wide_deep_sparse_embeddingbag_sparseadam", "CTR", wide_deep_sparse),
    healthy("factorization_machine_ratings_adagrad", "recommender", factorization_machine_ratings),
    healthy("deepsurv_cox_partial_likelihood", "survival", deepsurv_cox),
    healthy("transe_margin_ranking_kg", "knowledge graph", transe_knowledge_graph),
    healthy("sasrec_next_item_bce_negatives", "recommender", sasrec_next_item),
    healthy("two_tower_inbatch_softmax_logq", "retrieval", two_tower_inbatch),
    healthy("nbeats_generic_mase", "time series", nbeats_forecast),
    healthy("sac_point_mass_auto_entropy", "RL", sac_point_mass),
    healthy("td3_pendulum_delayed_policy", "RL", td3_pendulum),
    healthy("behaviour_cloning_maze_expert", "imitation", behaviour_cloning_maze),
    healthy("deepar_gaussian_nll_lstm", "time series", deepar_gaussian),
    healthy("simcse_dropout_positives_inbatch", "sentence embeddings", simcse_unsupervised),
    healthy("pointer_network_sort_teacher_forcing", "seq2seq", pointer_network_sort),
    _bert,
    _kim,
    _crf,
    _clip,
    _multilabel,
    _ftt,
    _kws,
    _ckpt,
    _coral,
    _anomaly,
    buggy(_bert, "lr_x100"),
    buggy(_kim, "softmax_before_ce"),
    buggy(_crf, "no_zero_grad"),
    buggy(_clip, "inputs_x255"),
    buggy(_multilabel, "shuffled_labels"),
    buggy(_ftt, "frozen_by_mistake"),
    buggy(_kws, "train_in_eval_mode"),
    buggy(_ckpt, "deep_sigmoid"),
    buggy(_coral, "log_zero_nan"),
    buggy(_anomaly, "dead_relu_init"),
]
