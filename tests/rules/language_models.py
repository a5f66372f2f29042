"""Tiny healthy language models for the rules' healthy twins: an LSTM or a causal transformer
layer on a Zipf token stream (a Markov chain over a vocabulary whose frequencies fall as
1/rank), trained with Adam on BPTT windows, recorded with the two-line hook.

`windows`: "bptt" (consecutive windows of the batchified stream, as PyTorch's
word_language_model reads it), "overlap" (windows that advance by half their length: every
batch shares half its tokens with the one before), "random" (nanoGPT's `get_batch`: each row
a window at a random offset of a short corpus, drawn with replacement, so rows recur by
chance). `flat`: the loss on `logits.view(-1, vocabulary)` against flattened targets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

import mldbg.torch


class TinyLM(nn.Module):
    def __init__(self, vocabulary: int, width: int = 32, kind: str = "lstm"):
        super().__init__()
        self.emb = nn.Embedding(vocabulary, width)
        self.kind = kind
        if kind == "lstm":
            self.rnn: nn.Module = nn.LSTM(width, width, batch_first=True)
        else:
            self.rnn = nn.TransformerEncoderLayer(width, 2, 2 * width, dropout=0.0, batch_first=True)
        self.head = nn.Linear(width, vocabulary)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.emb(x)
        if self.kind == "lstm":
            h, _ = self.rnn(h)
        else:
            t = x.shape[1]
            h = self.rnn(h, src_mask=torch.triu(torch.full((t, t), float("-inf")), 1))
        return self.head(h)


def zipf_stream(n: int, vocabulary: int, seed: int) -> torch.Tensor:
    """`n` tokens: Zipf-distributed, and half of them follow the previous token by a fixed map."""
    g = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocabulary + 1)
    tokens = g.choice(vocabulary, size=n, p=p / p.sum())
    follow = g.permutation(vocabulary)
    chained = g.random(n) < 0.5
    for i in range(1, n):
        if chained[i]:
            tokens[i] = follow[tokens[i - 1]]
    return torch.from_numpy(tokens.astype(np.int64))


def train_lm(
    path: str | Path,
    *,
    vocabulary: int = 64,
    kind: str = "lstm",
    steps: int = 60,
    length: int = 16,
    batch: int = 8,
    windows: str = "bptt",
    flat: bool = True,
    corpus_windows: int = 40,
    seed: int = 0,
    hook_kwargs: dict[str, Any] | None = None,
) -> list[float]:
    """Train it; returns the training losses."""
    torch.manual_seed(seed)
    data = zipf_stream(batch * length * corpus_windows + 1, vocabulary, seed)
    n = (len(data) - 1) // batch
    src, tgt = data[: n * batch].view(batch, n), data[1 : n * batch + 1].view(batch, n)
    model = TinyLM(vocabulary, kind=kind)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    hook = mldbg.torch.Hook(str(path), **(hook_kwargs or {}))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(seed)
    losses = []
    for step in range(steps):
        if windows == "random":
            at = torch.randint(len(data) - length - 1, (batch,), generator=g).tolist()
            x = torch.stack([data[j : j + length] for j in at])
            y = torch.stack([data[j + 1 : j + length + 1] for j in at])
        else:
            i = (step * (length // 2 if windows == "overlap" else length)) % (n - length)
            x, y = src[:, i : i + length], tgt[:, i : i + length]
        opt.zero_grad()
        out = model(x)
        loss = (
            loss_fn(out.reshape(-1, vocabulary), y.reshape(-1)) if flat else loss_fn(out.transpose(1, 2), y)
        )
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    hook.close()
    return losses
