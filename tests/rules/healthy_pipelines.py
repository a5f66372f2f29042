"""Small healthy pipelines in the style of PyTorch's examples, recorded with the two lines
(`mldbg.torch.Hook(out_dir)`, `register_module`, `register_loss`, defaults): the default rule
set must raise nothing on them. Each trains a few dozen steps on synthetic data in a second
or two; `PIPELINES` maps a name to its function (path -> path)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

import mldbg.torch

torch.set_num_threads(1)


def _zipf_tokens(g: torch.Generator, n: int, length: int, vocab: int) -> torch.Tensor:
    """Token sequences of a Markov chain whose unigram frequencies follow Zipf's law: token
    t+1 is (token t + 1) mod vocab half of the time, else a Zipf draw. Learnable and skewed,
    as text is."""
    ranks = torch.arange(1, vocab + 1, dtype=torch.float64)
    zipf = (1.0 / ranks) / (1.0 / ranks).sum()
    draws = torch.multinomial(zipf, n * length, replacement=True, generator=g).view(n, length)
    follow = torch.rand(n, length, generator=g) < 0.5
    seq = draws.clone()
    for t in range(1, length):
        seq[:, t] = torch.where(follow[:, t], (seq[:, t - 1] + 1) % vocab, draws[:, t])
    return seq


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab: int = 200, emb: int = 32, hidden: int = 64):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, batch_first=True)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.embed(x))
        return self.decoder(h)


class TransformerLanguageModel(nn.Module):
    def __init__(self, vocab: int = 200, d: int = 32, length: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(length, d) * 0.02)
        self.block = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.norm = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        h = self.block(self.embed(x) + self.pos[:t], src_mask=mask, is_causal=True)
        return self.lm_head(self.norm(h))


def _language_model(
    path: str | Path, net: nn.Module, steps: int = 40, vocab: int = 200, flatten: bool = True
) -> str:
    """Next-token training; `flatten`: (N*T, V) logits and (N*T,) targets, else (N, V, T)
    logits and (N, T) targets (CrossEntropyLoss takes both)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    data = _zipf_tokens(g, 512, 17, vocab)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(net)
        hook.register_loss(loss_fn)
        for step in range(steps):
            batch = data[(step * 16) % 512 :][:16]
            x, y = batch[:, :-1], batch[:, 1:]
            opt.zero_grad()
            logits = net(x)
            if flatten:
                loss = loss_fn(logits.reshape(-1, vocab), y.reshape(-1))  # token targets
            else:
                loss = loss_fn(logits.transpose(1, 2), y)  # sequences of token targets
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
    return str(path)


def lstm_language_model(path: str | Path) -> str:
    torch.manual_seed(0)
    return _language_model(path, LSTMLanguageModel())


def transformer_language_model(path: str | Path) -> str:
    torch.manual_seed(0)
    return _language_model(path, TransformerLanguageModel())


class SiameseNet(nn.Module):
    """PyTorch's siamese example: a shared CNN embeds both images, a head scores the pair."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.fc1 = nn.Linear(64, 32)
        self.relu3 = nn.ReLU()
        self.head = nn.Linear(64, 1)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(self.relu2(self.conv2(self.relu1(self.conv1(x)))))
        return self.relu3(self.fc1(h.flatten(1)))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.head(torch.cat([self.embed(a), self.embed(b)], dim=1)))


def transformer_small_vocabulary(path: str | Path) -> str:
    """A 50-token vocabulary (under class_imbalance's `max_classes`), (N, T) targets."""
    torch.manual_seed(0)
    return _language_model(path, TransformerLanguageModel(vocab=50), vocab=50, flatten=False)


def siamese(path: str | Path, steps: int = 40) -> str:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    protos = torch.randn(5, 1, 8, 8, generator=g)  # 5 classes of noisy 8x8 images
    net = SiameseNet()
    loss_fn = nn.BCELoss()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(net)
        hook.register_loss(loss_fn)
        for _ in range(steps):
            ca = torch.randint(0, 5, (32,), generator=g)
            same = torch.rand(32, generator=g) < 0.5
            cb = torch.where(same, ca, (ca + torch.randint(1, 5, (32,), generator=g)) % 5)
            a = protos[ca] + 0.5 * torch.randn(32, 1, 8, 8, generator=g)
            b = protos[cb] + 0.5 * torch.randn(32, 1, 8, 8, generator=g)
            opt.zero_grad()
            loss = loss_fn(net(a, b).squeeze(1), same.float())
            loss.backward()
            opt.step()
    return str(path)


class VAE(nn.Module):
    def __init__(self, d: int = 64, hidden: int = 32, z: int = 4):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.relu1 = nn.ReLU()
        self.mu = nn.Linear(hidden, z)
        self.logvar = nn.Linear(hidden, z)
        self.fc2 = nn.Linear(z, hidden)
        self.relu2 = nn.ReLU()
        self.fc3 = nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.relu1(self.fc1(x))
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return torch.sigmoid(self.fc3(self.relu2(self.fc2(z)))), mu, logvar


class VAELoss(nn.Module):
    """PyTorch's VAE example: reconstruction BCE + KL divergence, summed over the batch."""

    def forward(
        self, recon: torch.Tensor, x: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor
    ) -> torch.Tensor:
        bce = F.binary_cross_entropy(recon, x, reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return (bce + kld) / len(x)


def vae(path: str | Path, steps: int = 40) -> str:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    basis = torch.rand(4, 64, generator=g)
    net, loss_fn = VAE(), VAELoss()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(net)
        hook.register_loss(loss_fn)
        for _ in range(steps):
            w = torch.softmax(torch.randn(32, 4, generator=g) * 2, dim=1)
            x = torch.bernoulli(w @ basis, generator=g)  # binarized images of 4 patterns
            opt.zero_grad()
            recon, mu, logvar = net(x)
            loss = loss_fn(recon, x, mu, logvar)
            loss.backward()
            opt.step()
    return str(path)


def lbfgs(path: str | Path, steps: int = 20) -> str:
    """Full-batch L-BFGS on a small regression (PyTorch's time-sequence example uses it)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    y = torch.sin(x[:, :1]) + 0.5 * x[:, 1:2] + 0.05 * torch.randn(256, 1, generator=g)
    net = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    loss_fn = nn.MSELoss()
    opt = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=5)
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(net)
        hook.register_loss(loss_fn)
        for _ in range(steps):

            def closure() -> torch.Tensor:
                opt.zero_grad()
                loss = loss_fn(net(x), y)
                loss.backward()
                return loss

            opt.step(closure)
    return str(path)


PIPELINES: dict[str, Callable[[str | Path], str]] = {
    "lstm_language_model": lstm_language_model,
    "transformer_language_model": transformer_language_model,
    "transformer_small_vocabulary": transformer_small_vocabulary,
    "siamese": siamese,
    "vae": vae,
    "lbfgs": lbfgs,
}
