"""Sequence to sequence: a GRU encoder-decoder with attention and teacher forcing, and a small
nn.Transformer encoder-decoder with label smoothing and the inverse-square-root schedule."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import buggy, healthy

torch.set_num_threads(1)

PAD, BOS, EOS = 0, 1, 2


def _task(g: torch.Generator, batch: int, vocab: int, task: str, lo: int = 3, hi: int = 10):
    """Variable-length source sequences and their targets (reversed, sorted or each token
    shifted by one), padded; targets framed by BOS ... EOS."""
    lengths = torch.randint(lo, hi + 1, (batch,), generator=g)
    src = torch.full((batch, hi), PAD)
    tgt = torch.full((batch, hi + 2), PAD)
    for i, n in enumerate(lengths.tolist()):
        s = torch.randint(3, vocab, (n,), generator=g)
        t = (
            s.flip(0)
            if task == "reverse"
            else s.sort().values
            if task == "sort"
            else (s - 3 + 1) % (vocab - 3) + 3
        )
        src[i, :n] = s
        tgt[i, 0], tgt[i, 1 : n + 1], tgt[i, n + 1] = BOS, t, EOS
    return src, tgt


class Encoder(nn.Module):
    def __init__(self, vocab: int, d: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=PAD)
        self.rnn = nn.GRU(d, d, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(2 * d, d)

    def forward(self, src: torch.Tensor):
        h, last = self.rnn(self.embed(src))
        return self.proj(h), torch.tanh(self.proj(torch.cat([last[0], last[1]], -1)))


class AttnDecoder(nn.Module):
    def __init__(self, vocab: int, d: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=PAD)
        self.cell = nn.GRUCell(2 * d, d)
        self.out = nn.Linear(2 * d, vocab)

    def forward(
        self, tokens: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor, h: torch.Tensor
    ) -> torch.Tensor:
        logits = []
        ctx = torch.zeros_like(h)
        for t in range(tokens.size(1)):
            h = self.cell(torch.cat([self.embed(tokens[:, t]), ctx], -1), h)
            scores = (memory @ h.unsqueeze(-1)).squeeze(-1).masked_fill(mask, float("-inf"))
            ctx = (F.softmax(scores, -1).unsqueeze(-1) * memory).sum(1)
            logits.append(self.out(torch.cat([h, ctx], -1)))
        return torch.stack(logits, 1)


class Seq2SeqAttention(nn.Module):
    def __init__(self, vocab: int, d: int):
        super().__init__()
        self.encoder = Encoder(vocab, d)
        self.decoder = AttnDecoder(vocab, d)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, h = self.encoder(src)
        return self.decoder(tgt_in, memory, src == PAD, h)


def gru_attention(
    path: str,
    task: str = "reverse",
    d: int = 48,
    lr: float = 2e-3,
    optimizer: str = "adam",
    steps: int = 200,
    batch: int = 32,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    torch.manual_seed(seed)
    vocab = 16
    model = Seq2SeqAttention(vocab, d)
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD)
    if optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True)
    g = torch.Generator().manual_seed(seed + 1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for step in range(steps):
        model.train()
        src, tgt = _task(g, batch, vocab, task)
        if bug == "shuffled_labels":
            tgt = tgt[torch.randperm(batch, generator=g)]
        opt.zero_grad()
        logits = model(src, tgt[:, :-1])
        loss = loss_fn(logits.reshape(-1, vocab), tgt[:, 1:].reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if (step + 1) % 50 == 0:  # greedy decoding of a few validation sequences
            model.eval()
            with torch.no_grad():
                src, tgt = _task(g, 8, vocab, task)
                memory, h = model.encoder(src)
                tokens = tgt[:, :1]
                for _ in range(tgt.size(1) - 1):
                    nxt = model.decoder(tokens, memory, src == PAD, h)[:, -1].argmax(-1, keepdim=True)
                    tokens = torch.cat([tokens, nxt], 1)
    hook.close()
    return losses


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=PAD)
        self.pos = nn.Parameter(torch.randn(1, 16, d) * 0.02)
        self.core = nn.Transformer(d, 4, layers, layers, 2 * d, dropout=0.1, batch_first=True)
        self.out = nn.Linear(d, vocab)
        self.d = d

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        s = self.embed(src) * self.d**0.5 + self.pos[:, : src.size(1)]
        t = self.embed(tgt) * self.d**0.5 + self.pos[:, : tgt.size(1)]
        mask = torch.triu(torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool), 1)
        h = self.core(
            s, t, tgt_mask=mask, tgt_is_causal=True, src_key_padding_mask=src == PAD,
            tgt_key_padding_mask=tgt == PAD, memory_key_padding_mask=src == PAD,
        )  # fmt: skip
        return self.out(h)


def transformer_seq2seq(
    path: str,
    task: str = "sort",
    d: int = 32,
    layers: int = 1,
    warmup: int = 40,
    steps: int = 200,
    batch: int = 32,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """ "Attention is all you need" in small: Adam(0.9, 0.98), lr d^-0.5 * min(s^-0.5, s warmup^-1.5),
    label smoothing 0.1."""
    torch.manual_seed(seed)
    vocab = 14
    model = TinyTransformer(vocab, d, layers)
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: d**-0.5 * min((s + 1) ** -0.5, (s + 1) * warmup**-1.5)
    )
    g = torch.Generator().manual_seed(seed + 1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    model.train()
    for _ in range(steps):
        src, tgt = _task(g, batch, vocab, task, hi=8)
        opt.zero_grad()
        logits = model(src, tgt[:, :-1])
        loss = loss_fn(logits.reshape(-1, vocab), tgt[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


_gru = healthy("seq2seq_gru_attention_reverse", "seq2seq", gru_attention)

PIPELINES = [
    _gru,
    healthy(
        "seq2seq_gru_attention_shift_sgd",
        "seq2seq",
        gru_attention,
        task="shift",
        optimizer="sgd",
        lr=0.05,
        seed=1,
    ),
    healthy("seq2seq_transformer_sort", "seq2seq", transformer_seq2seq),
    healthy(
        "seq2seq_transformer_reverse_2layer",
        "seq2seq",
        transformer_seq2seq,
        task="reverse",
        layers=2,
        steps=300,
        seed=1,
    ),
    buggy(_gru, "shuffled_labels"),
]
