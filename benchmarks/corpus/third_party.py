"""Trainings shaped like the public scripts new users start from, with the README's two lines:
pytorch/examples' mnist (two convs, dropout, `F.nll_loss` on `log_softmax`, Adadelta lr 1.0,
StepLR gamma 0.7, a test pass per epoch) and word_language_model (an LSTM trained by hand:
`model.zero_grad()`, clip 0.25, `p.data.add_(p.grad, alpha=-lr)` at lr 20, BPTT 35 with a
detached hidden state, lr / 4 when the validation loss does not improve), nanoGPT (the model
returns `(logits, loss)`, AdamW betas (0.9, 0.95) with weight decay on matrices only, warm-up +
cosine, gradient accumulation, clip 1.0, an estimate of the losses under `model.eval()` every
so often) and a Lightning-README-style autoencoder (Linear-ReLU-Linear, MSE, Adam 1e-3).

The data are synthetic (this machine downloads nothing): 28x28 "digits" from ten smooth random
prototypes, shifted and noised; a word stream from the corpus's Zipf generator; a character
stream for the GPT. Each pipeline keeps its script's hyper-parameters, scaled down in size.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import _data, buggy, healthy

torch.set_num_threads(1)


def _digits(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 1, 28, 28) images as MNIST's: strokes on a black background (about 15% of the
    pixels lit, mean near 0.13), shifted by up to 2 pixels, each stroke's ink varied; normalized
    with MNIST's mean and std as pytorch/examples does. And their labels."""
    protos = F.avg_pool2d(torch.rand(10, 1, 28, 28, generator=torch.Generator().manual_seed(7)), 5, 1, 2)
    cut = protos.flatten(1).quantile(0.85, dim=1).view(10, 1, 1, 1)
    protos = ((protos - cut) * 60).sigmoid()
    y = torch.randint(0, 10, (n,), generator=g)
    shift = torch.randint(-2, 3, (n, 2), generator=g)
    x = torch.stack(
        [torch.roll(protos[c], (int(a), int(b)), (1, 2)) for c, (a, b) in zip(y, shift, strict=True)]
    )
    x = x * (0.6 + 0.4 * torch.rand(n, 1, 1, 1, generator=g)) * (0.8 + 0.2 * torch.rand(x.shape, generator=g))
    return (x.clamp(0, 1) - 0.1307) / 0.3081, y


class MnistNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(16 * 12 * 12, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = self.dropout2(F.relu(self.fc1(torch.flatten(x, 1))))
        return F.log_softmax(self.fc2(x), dim=1)


def mnist_example(path: str, epochs: int = 3, seed: int = 1, bug: str | None = None) -> list[float]:
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    x, y = _digits(g, 1920)
    xt, yt = _digits(g, 256)
    if bug == "shuffled_labels":
        y = y[torch.randperm(len(y), generator=g)]
    model = MnistNet()
    hook = Hook(path)
    hook.register_module(model)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0 * (100 if bug == "lr_x100" else 1))
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    for _epoch in range(epochs):
        model.train()
        for i in torch.randperm(len(x), generator=g).split(64):
            optimizer.zero_grad()
            loss = F.nll_loss(model(x[i]), y[i])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            F.nll_loss(model(xt), yt, reduction="sum").item()
        scheduler.step()
    hook.close()
    return losses


class RNNModel(nn.Module):
    """word_language_model's RNNModel: encoder, LSTM, dropout, decoder, optionally tied."""

    def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int, dropout: float = 0.2) -> None:
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, inp: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]):
        output, hidden = self.rnn(self.drop(self.encoder(inp)), hidden)
        return F.log_softmax(self.decoder(self.drop(output)), dim=-1), hidden

    def init_hidden(self, bsz: int) -> tuple[torch.Tensor, torch.Tensor]:
        w = next(self.parameters())
        return w.new_zeros(self.nlayers, bsz, self.nhid), w.new_zeros(self.nlayers, bsz, self.nhid)


def _batchify(data: torch.Tensor, bsz: int) -> torch.Tensor:
    nbatch = data.size(0) // bsz
    return data[: nbatch * bsz].view(bsz, -1).t().contiguous()


def word_language_model(path: str, epochs: int = 3, seed: int = 1, bug: str | None = None) -> list[float]:
    torch.manual_seed(seed)
    words = torch.as_tensor(_data.word_stream(seed, 24_000, vocab=200), dtype=torch.long)
    train, val = _batchify(words[:20_000], 20), _batchify(words[20_000:], 10)
    ntokens, bptt, clip = 200, 35, 0.25
    lr = 20.0 * (100 if bug == "lr_x100" else 1)
    model = RNNModel(ntokens, 64, 64, 2)
    criterion = nn.NLLLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    best_val = None
    for _epoch in range(epochs):
        model.train()
        hidden = model.init_hidden(20)
        for i in range(0, train.size(0) - 1, bptt):
            n = min(bptt, len(train) - 1 - i)
            data, targets = train[i : i + n], train[i + 1 : i + 1 + n].reshape(-1)
            if bug != "no_zero_grad":
                model.zero_grad()
            hidden = tuple(h.detach() for h in hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output.view(-1, ntokens), targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.item())
        model.eval()
        total, hidden = 0.0, model.init_hidden(10)
        with torch.no_grad():
            for i in range(0, val.size(0) - 1, bptt):
                n = min(bptt, len(val) - 1 - i)
                output, hidden = model(val[i : i + n], hidden)
                total += n * criterion(output.view(-1, ntokens), val[i + 1 : i + 1 + n].reshape(-1)).item()
        val_loss = total / (len(val) - 1)
        if best_val is None or val_loss < best_val:
            best_val = val_loss
        else:
            lr /= 4.0
    hook.close()
    return losses


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(0.0))
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, block: int, d: int = 64, layers: int = 2, heads: int = 4) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.wte.weight = self.lm_head.weight
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def nanogpt_shape(path: str, max_iters: int = 200, seed: int = 1, bug: str | None = None) -> list[float]:
    torch.manual_seed(seed)
    text = _data.text(seed, 40_000)
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
    train, val = data[:36_000], data[36_000:]
    block, batch, accum = 32, 12, 2
    learning_rate, min_lr, warmup = 1e-3 * (100 if bug == "lr_x100" else 1), 1e-4, 20

    def get_batch(split: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(split) - block - 1, (batch,))
        return torch.stack([split[i : i + block] for i in ix]), torch.stack(
            [split[i + 1 : i + 1 + block] for i in ix]
        )

    def get_lr(it: int) -> float:
        if it < warmup:
            return learning_rate * (it + 1) / (warmup + 1)
        ratio = (it - warmup) / (max_iters - warmup)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)

    model = GPT(len(chars), block)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=learning_rate, betas=(0.9, 0.95),
    )  # fmt: skip
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    x, y = get_batch(train)
    for it in range(max_iters):
        for group in optimizer.param_groups:
            group["lr"] = get_lr(it)
        if it % 50 == 0:
            model.eval()
            with torch.no_grad():
                for split in (train, val):
                    model(*get_batch(split))
            model.train()
        total = 0.0
        for _micro in range(accum):
            _, loss = model(x, y)
            loss = loss / accum
            x, y = get_batch(train)
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if bug != "no_zero_grad":
            optimizer.zero_grad(set_to_none=True)
        losses.append(total)
    hook.close()
    return losses


def lightning_readme_autoencoder(path: str, epochs: int = 4, seed: int = 1) -> list[float]:
    """The Lightning README's LitAutoEncoder as a plain loop: 28*28 -> 64 -> 3 -> 64 -> 28*28."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    x, _ = _digits(g, 1536)
    x = x.view(len(x), -1) * 0.3081 + 0.1307  # ToTensor's [0, 1] images, as the README feeds them
    encoder = nn.Sequential(nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 3))
    decoder = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, 28 * 28))
    hook = Hook(path)
    hook.register_module(encoder)
    hook.register_module(decoder)
    optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-3)
    losses = []
    for _epoch in range(epochs):
        for i in torch.randperm(len(x), generator=g).split(32):
            loss = F.mse_loss(decoder(encoder(x[i])), x[i])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    hook.close()
    return losses


_mnist = healthy("pytorch_examples_mnist_adadelta_steplr", "vision", mnist_example)
_wlm = healthy("pytorch_examples_word_lm_manual_sgd", "language model", word_language_model)
_gpt = healthy("nanogpt_shape_char_accumulate", "language model", nanogpt_shape)

PIPELINES = [
    _mnist,
    _wlm,
    _gpt,
    healthy("lightning_readme_autoencoder", "autoencoder", lightning_readme_autoencoder),
    buggy(_mnist, "lr_x100"),
    buggy(_mnist, "shuffled_labels"),
    buggy(_wlm, "no_zero_grad"),
    buggy(_gpt, "lr_x100"),
    buggy(_gpt, "no_zero_grad"),
]
