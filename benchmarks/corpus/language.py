"""Language models: char-level and word-level, LSTM, GRU and a tiny causal transformer; random
windows, truncated BPTT with a carried hidden state, padded sentences with `ignore_index`."""

from __future__ import annotations

import math

import torch
from torch import nn

from mldbg.torch import Hook

from . import _data, buggy, healthy

torch.set_num_threads(1)


class CharRNN(nn.Module):
    def __init__(self, vocab: int, hidden: int, layers: int, cell: str, dropout: float, tied: bool = False):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(hidden, hidden, layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, vocab)
        if tied:
            self.head.weight = self.embed.weight

    def forward(self, x: torch.Tensor, state=None):
        h, state = self.rnn(self.drop(self.embed(x)), state)
        return self.head(self.drop(h)), state


def _optimizer(name: str, params, lr: float):
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, alpha=0.95)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr)
    return torch.optim.SGD(params, lr=lr, momentum=0.9)


def char_rnn(
    path: str,
    cell: str = "lstm",
    hidden: int = 64,
    layers: int = 1,
    optimizer: str = "adam",
    lr: float = 3e-3,
    clip: float | None = 1.0,
    schedule: str | None = None,
    batch: int = 16,
    seq: int = 32,
    steps: int = 250,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """Char-level LM on random windows of a text, next-character cross-entropy."""
    torch.manual_seed(seed)
    txt = _data.text(seed, 30_000)
    chars = sorted(set(txt))
    data = torch.tensor([chars.index(c) for c in txt])
    model = CharRNN(len(chars), hidden, layers, cell, dropout=0.1)
    loss_fn = nn.CrossEntropyLoss()
    opt = _optimizer(optimizer, model.parameters(), lr * (100 if bug == "lr_x100" else 1))
    sched = None
    if schedule == "step":
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=80, gamma=0.5)
    elif schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    g = torch.Generator().manual_seed(seed + 1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    model.train()
    for _ in range(steps):
        starts = torch.randint(0, len(data) - seq - 1, (batch,), generator=g)
        x = torch.stack([data[s : s + seq] for s in starts])
        y = torch.stack([data[s + 1 : s + seq + 1] for s in starts])
        if bug == "shuffled_labels":
            y = y[torch.randperm(batch, generator=g)]
        if bug != "no_zero_grad":
            opt.zero_grad()
        logits, _ = model(x)
        loss = loss_fn(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        if clip:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if sched:
            sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


def word_bptt(
    path: str,
    cell: str = "lstm",
    hidden: int = 64,
    layers: int = 2,
    lr: float = 2e-3,
    optimizer: str = "adam",
    bptt: int = 20,
    batch: int = 16,
    steps: int = 250,
    tied: bool = True,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """Word-level LM over one long stream batchified into columns, truncated BPTT with the
    hidden state carried (detached) from one chunk to the next, tied embedding and decoder,
    an evaluation pass on held-out text every 100 steps."""
    torch.manual_seed(seed)
    vocab = 200
    stream = torch.from_numpy(_data.word_stream(seed, 60_000, vocab))
    train, val = stream[:50_000], stream[50_000:]
    cols = train[: len(train) // batch * batch].view(batch, -1)
    vcols = val[: len(val) // batch * batch].view(batch, -1)
    model = CharRNN(vocab, hidden, layers, cell, dropout=0.2, tied=tied)
    loss_fn = nn.CrossEntropyLoss()
    opt = _optimizer(optimizer, model.parameters(), lr)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses, state, pos = [], None, 0
    for step in range(steps):
        model.train()
        if pos + bptt + 1 > cols.size(1):
            pos, state = 0, None
        x, y = cols[:, pos : pos + bptt], cols[:, pos + 1 : pos + bptt + 1]
        pos += bptt
        if state is not None:
            state = tuple(s.detach() for s in state) if isinstance(state, tuple) else state.detach()
        opt.zero_grad()
        logits, state = model(x, state)
        loss = loss_fn(logits.reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        losses.append(loss.item())
        if (step + 1) % 100 == 0:
            model.eval()
            with torch.no_grad():
                vs = None
                for p in range(0, 3 * bptt, bptt):
                    out, vs = model(vcols[:, p : p + bptt], vs)
                    loss_fn(out.reshape(-1, vocab), vcols[:, p + 1 : p + bptt + 1].reshape(-1))
    hook.close()
    return losses


class CausalTransformer(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, layers: int, ctx: int, norm_first: bool):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        layer = nn.TransformerEncoderLayer(
            d, heads, 4 * d, dropout=0.1, batch_first=True, norm_first=norm_first
        )
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, x: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        t = x.size(1)
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        h = self.tok(x) + self.pos(torch.arange(t))
        h = self.blocks(h, mask=mask, is_causal=True, src_key_padding_mask=pad_mask)
        return self.head(self.norm(h))


def causal_transformer(
    path: str,
    level: str = "char",
    d: int = 48,
    heads: int = 4,
    layers: int = 2,
    lr: float = 1e-3,
    warmup: int = 30,
    steps: int = 250,
    batch: int = 16,
    ctx: int = 32,
    norm_first: bool = True,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """GPT-style next-token training with a causal mask, AdamW, linear warm-up then cosine decay."""
    torch.manual_seed(seed)
    if level == "char":
        txt = _data.text(seed, 30_000)
        chars = sorted(set(txt))
        data, vocab = torch.tensor([chars.index(c) for c in txt]), len(chars)
    else:
        vocab = 150
        data = torch.from_numpy(_data.word_stream(seed, 30_000, vocab))
    model = CausalTransformer(vocab, d, heads, layers, ctx, norm_first)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(
        model.parameters(), lr=lr * (100 if bug == "lr_x100" else 1), betas=(0.9, 0.95), weight_decay=0.1
    )
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            (s + 1) / warmup
            if s < warmup
            else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup)))
        ),
    )
    g = torch.Generator().manual_seed(seed + 1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    model.train()
    for _ in range(steps):
        starts = torch.randint(0, len(data) - ctx - 1, (batch,), generator=g)
        x = torch.stack([data[s : s + ctx] for s in starts])
        y = torch.stack([data[s + 1 : s + ctx + 1] for s in starts])
        if bug == "shuffled_labels":
            y = y[torch.randperm(batch, generator=g)]
        if bug != "no_zero_grad":
            opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x).view(-1, vocab), y.view(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


class PaddedLM(nn.Module):
    def __init__(self, vocab: int, d: int, cell: str):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        self.rnn = (nn.GRU if cell == "gru" else nn.LSTM)(d, d, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embed(x), lengths, batch_first=True, enforce_sorted=False
        )
        h, _ = self.rnn(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=x.size(1))
        return self.out(h)


def padded_sentences(
    path: str,
    cell: str = "gru",
    d: int = 64,
    optimizer: str = "adam",
    lr: float = 3e-3,
    batch: int = 24,
    steps: int = 250,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """Sentence-level LM: sentences of 4-16 words padded to the batch's longest, packed for
    the RNN, the padded targets ignored by CrossEntropyLoss(ignore_index=0)."""
    torch.manual_seed(seed)
    vocab = 120
    sents = _data.sentences(seed, 4000, vocab)
    model = PaddedLM(vocab, d, cell)
    loss_fn = nn.CrossEntropyLoss(ignore_index=0)
    opt = _optimizer(optimizer, model.parameters(), lr)
    g = torch.Generator().manual_seed(seed + 1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(sents), (batch,), generator=g).tolist()
        seqs = [torch.tensor([1, *sents[i], 2]) for i in idx]
        lengths = torch.tensor([len(s) - 1 for s in seqs])
        padded = nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=0)
        x, y = padded[:, :-1], padded[:, 1:]
        opt.zero_grad()
        logits = model(x, lengths)
        loss = loss_fn(logits.reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


_char_lstm = healthy("char_lstm_adam_clip", "language model", char_rnn)
_char_gru = healthy(
    "char_gru_sgd_step",
    "language model",
    char_rnn,
    cell="gru",
    optimizer="sgd",
    lr=0.5,
    schedule="step",
    clip=5.0,
    seed=1,
)
_gpt = healthy("char_gpt_warmup_cosine", "language model", causal_transformer)

PIPELINES = [
    _char_lstm,
    _char_gru,
    healthy(
        "char_lstm_2layer_rmsprop_cosine",
        "language model",
        char_rnn,
        layers=2,
        hidden=48,
        optimizer="rmsprop",
        lr=2e-3,
        schedule="cosine",
        seed=2,
    ),
    healthy(
        "char_gru_adagrad_noclip",
        "language model",
        char_rnn,
        cell="gru",
        optimizer="adagrad",
        lr=0.05,
        clip=None,
        seed=3,
        batch=32,
        seq=24,
    ),
    healthy("word_lstm_bptt_tied", "language model", word_bptt),
    healthy(
        "word_gru_bptt_sgd",
        "language model",
        word_bptt,
        cell="gru",
        layers=1,
        optimizer="sgd",
        lr=0.5,
        tied=False,
        seed=1,
    ),
    _gpt,
    healthy(
        "word_gpt_postnorm",
        "language model",
        causal_transformer,
        level="word",
        norm_first=False,
        lr=5e-4,
        warmup=50,
        seed=1,
    ),
    healthy(
        "char_gpt_3layer_small_batch",
        "language model",
        causal_transformer,
        layers=3,
        d=32,
        batch=8,
        seed=2,
        steps=300,
    ),
    healthy("padded_gru_ignore_index", "language model", padded_sentences),
    healthy(
        "padded_lstm_adamw",
        "language model",
        padded_sentences,
        cell="lstm",
        optimizer="adamw",
        lr=2e-3,
        seed=1,
    ),
    buggy(_char_lstm, "lr_x100"),
    buggy(_char_lstm, "shuffled_labels"),
    buggy(_gpt, "no_zero_grad"),
    buggy(_gpt, "shuffled_labels"),
]
