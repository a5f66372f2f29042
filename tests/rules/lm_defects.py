"""Tiny real language-model trainings with the mistakes of public issues, and their fixed
twins, for the language-model rules (labels_not_shifted, labels_shifted_twice,
missing_causal_mask, padding_in_loss, softmax_before_cross_entropy).

One function, `train_lm`: a word-level LM (embedding + GRU, or one transformer layer) on a
Zipf token stream of `tests.rules.language_models` (or a text-like stream with runs of
repeated tokens), trained with Adam, recorded with the two-line PyTorch hook. The knobs:
`shift` (1: next token, 0: not shifted, 2: shifted twice), `causal` (the transformer's mask,
or a bidirectional GRU when False), `padding` (variable-length rows padded with a pad id:
"ignored" sets the labels there to -100, "kept" leaves the pad id in the labels), `softmax`
(a softmax before the cross-entropy), `loss` ("functional" F.cross_entropy over flat logits,
"module" a registered nn.CrossEntropyLoss over (B, V, T) logits, "returned" a nanoGPT-style
model(x, y) -> (logits, loss), "aux" a mixture of experts' shape, model(x) -> (logits, aux) with
the script's F.cross_entropy(logits, y) + 0.01 * aux given to backward, "hf" a model called with input_ids= and labels= that shifts
the labels itself, as Hugging Face models do; "written" the cross-entropy in plain torch ops,
-log_softmax(logits).gather(1, y).mean()), `label_smoothing`, `seq_first` (PyTorch's
word_language_model layout: (T, B) batches).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import mldbg.torch
from tests.rules.language_models import zipf_stream

torch.set_num_threads(1)  # tiny models: one thread is fastest, and the tests share the machine

PAD = 1  # a Zipf-frequent id (the second most common token): padding must be told by its place


class LM(nn.Module):
    def __init__(
        self,
        vocabulary: int,
        width: int = 32,
        kind: str = "gru",
        causal: bool = True,
        seq_first: bool = False,
    ):
        super().__init__()
        self.kind, self.causal, self.seq_first = kind, causal, seq_first
        self.aux = False  # return (logits, an auxiliary scalar) when called without labels
        self.emb = nn.Embedding(vocabulary, width)
        self.pos = nn.Embedding(64, width)
        if kind == "gru":
            self.rnn: nn.Module = nn.GRU(width, width, batch_first=True, bidirectional=not causal)
            out = width * (1 if causal else 2)
        else:
            self.rnn = nn.TransformerEncoderLayer(width, 2, 2 * width, dropout=0.0, batch_first=True)
            out = width
        self.head = nn.Linear(out, vocabulary)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        if self.seq_first:  # (T, B) ids in, (T, B, V) logits out
            return self._logits(x.t()).transpose(0, 1)
        return self._logits(x)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        h = self.emb(x)
        if self.kind == "gru":
            h, _ = self.rnn(h)
        else:
            t = x.shape[1]
            h = h + self.pos(torch.arange(t))
            mask = nn.Transformer.generate_square_subsequent_mask(t) if self.causal else None
            h = self.rnn(h, src_mask=mask, is_causal=self.causal)
        return self.head(h)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> Any:
        logits = self.logits(input_ids)
        if labels is None:
            return (logits, logits.float().logsumexp(-1).pow(2).mean()) if self.aux else logits
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


class HFStyle(LM):
    """A Hugging Face causal LM's contract: model(input_ids=, labels=) shifts the labels itself
    (pads them with -100 on the right and drops the first) and returns an object with `.loss`."""

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> Any:  # type: ignore[override]
        logits = self.logits(input_ids)
        out = {"logits": logits}
        if labels is not None:
            shifted = F.pad(labels, (0, 1), value=-100)[:, 1:]
            out["loss"] = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), shifted.reshape(-1))
        return out


def text_stream(n: int, vocabulary: int, seed: int) -> torch.Tensor:
    """Text-like tokens: Zipf words, each repeated 1-4 times in a row (runs of one character,
    'aaa', '!!!', spaces), so the stream aligns with itself at every offset often."""
    g = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocabulary + 1)
    out: list[int] = []
    while len(out) < n:
        out.extend([int(g.choice(vocabulary, p=p / p.sum()))] * int(g.integers(1, 5)))
    return torch.tensor(out[:n])


def train_lm(
    path: str | Path,
    *,
    steps: int = 30,
    shift: int = 1,
    causal: bool = True,
    kind: str = "gru",
    padding: str | None = None,
    softmax: bool = False,
    loss: str = "functional",
    label_smoothing: float = 0.0,
    seq_first: bool = False,
    data: str = "zipf",
    vocabulary: int = 48,
    length: int = 16,
    batch: int = 8,
    lr: float = 3e-3,
    seed: int = 0,
) -> list[float]:
    """Train; returns the losses (see the module docstring for the knobs)."""
    torch.manual_seed(seed)
    make = zipf_stream if data == "zipf" else text_stream
    stream = make(batch * (length + 2) * 50, vocabulary, seed)
    g = torch.Generator().manual_seed(seed)
    model = (HFStyle if loss == "hf" else LM)(vocabulary, kind=kind, causal=causal, seq_first=seq_first)
    model.aux = loss == "aux"
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=label_smoothing)
    offset = shift - 1 if loss == "hf" else shift  # the Hugging Face-style model shifts once itself
    losses = []
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        if loss == "module":
            hook.register_loss(loss_fn)
        for _ in range(steps):
            at = torch.randint(len(stream) - length - 3, (batch,), generator=g).tolist()
            x = torch.stack([stream[j : j + length] for j in at])
            y = torch.stack([stream[j + offset : j + offset + length] for j in at])
            if padding is not None:
                lengths = torch.randint(length // 3, length + 1, (batch,), generator=g)
                lengths[0] = length
                pad = torch.arange(length)[None, :] >= lengths[:, None]
                x = x.masked_fill(pad, PAD)
                y = y.masked_fill(pad, -100 if padding == "ignored" else PAD)
            if seq_first:
                x, y = x.t().contiguous(), y.t().contiguous()
            opt.zero_grad()
            if loss == "hf":
                value = model(input_ids=x, labels=y)["loss"]
            elif loss == "returned":
                _, value = model(x, y)
            elif loss == "aux":  # a z-loss-like term the model returns, added by the script
                logits, aux = model(x)
                value = F.cross_entropy(logits.reshape(-1, vocabulary), y.reshape(-1)) + 0.01 * aux
            else:
                logits = model(x)
                if softmax:
                    logits = logits.softmax(-1)
                if loss == "written":  # the cross-entropy in plain torch ops
                    logp = F.log_softmax(logits.reshape(-1, vocabulary), 1)
                    value = -logp.gather(1, y.reshape(-1, 1)).mean()
                elif loss == "module":
                    value = (
                        loss_fn(logits.transpose(1, 2), y)
                        if not seq_first
                        else loss_fn(logits.reshape(-1, vocabulary), y.reshape(-1))
                    )
                else:
                    value = F.cross_entropy(
                        logits.reshape(-1, vocabulary), y.reshape(-1), label_smoothing=label_smoothing
                    )
            value.backward()
            opt.step()
            losses.append(float(value.detach()))
    return losses
