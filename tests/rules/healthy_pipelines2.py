"""More small healthy pipelines in the style of PyTorch's examples, each recorded in one of
two configurations: the two lines (`Hook(out_dir)`, `register_module`, `register_loss`, the
defaults) or everything recorded every 5 steps (`dense=True`). The default rule set must
raise nothing on them. They differ from `tests.rules.healthy_pipelines` in what they train:
a GAN, schedulers, gradient clipping, weight tying, label smoothing, a KL-annealed VAE, a
graph network fed the same features every step, bf16 autocast with accumulation, frozen
backbones and teachers, soft targets, multi-label targets, regression far from zero, a
seq2seq, REINFORCE, dropout with evaluation passes, a tiny fine-tuning learning rate, and a
loss that plateaus before it falls. `PIPELINES` maps a name to its function
(path, dense) -> path; each trains in a second or two on synthetic data."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

import mldbg
import mldbg.torch
from tests.tiny import ALL_COLLECTIONS

torch.set_num_threads(1)


def hook(path: str | Path, dense: bool) -> mldbg.torch.Hook:
    """The two lines' hook, or everything every 5 steps."""
    if dense:
        return mldbg.torch.Hook(
            str(path),
            save_config=mldbg.SaveConfig(save_interval=5),
            include_collections=list(ALL_COLLECTIONS),
        )
    return mldbg.torch.Hook(str(path))


# ---------------------------------------------------------------- GAN (two models, one hook)


def dcgan(path: str | Path, dense: bool = False, steps: int = 40) -> str:
    """PyTorch's DCGAN example in small: a generator and a discriminator on one hook, two Adam
    optimizers (betas 0.5, 0.999), BCE with real (1) and fake (0) labels."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    nz = 8
    gen = nn.Sequential(
        nn.ConvTranspose2d(nz, 16, 4, 1, 0, bias=False),  # 4x4
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.ConvTranspose2d(16, 1, 4, 2, 1, bias=False),  # 8x8
        nn.Tanh(),
    )
    disc = nn.Sequential(
        nn.Conv2d(1, 16, 4, 2, 1, bias=False),  # 4x4
        nn.LeakyReLU(0.2),
        nn.Conv2d(16, 32, 4, 2, 1, bias=False),  # 2x2
        nn.BatchNorm2d(32),
        nn.LeakyReLU(0.2),
        nn.Conv2d(32, 1, 2, 1, 0, bias=False),  # 1x1
        nn.Flatten(),
        nn.Sigmoid(),
    )
    for m in [*gen.modules(), *disc.modules()]:  # the example's weights_init
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.normal_(m.weight, 1.0, 0.02)
            nn.init.zeros_(m.bias)
    # "real" images: blurred blobs in [-1, 1]
    yy, xx = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
    loss_fn = nn.BCELoss()
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    with hook(path, dense) as h:
        h.register_module(gen)
        h.register_module(disc)
        h.register_loss(loss_fn)
        for _ in range(steps):
            c = torch.rand(32, 2, 1, 1, generator=g) * 6 + 1
            real = 2 * torch.exp(-((yy - c[:, :1]) ** 2 + (xx - c[:, 1:]) ** 2) / 4) - 1  # (32, 1, 8, 8)
            ones, zeros = torch.ones(32, 1), torch.zeros(32, 1)
            # discriminator: real -> 1, fake -> 0
            opt_d.zero_grad()
            fake = gen(torch.randn(32, nz, 1, 1, generator=g))
            loss_d = loss_fn(disc(real), ones) + loss_fn(disc(fake.detach()), zeros)
            loss_d.backward()
            opt_d.step()
            # generator: make the discriminator say 1
            opt_g.zero_grad()
            loss_g = loss_fn(disc(fake), ones)
            loss_g.backward()
            opt_g.step()
    return str(path)


def mlp_gan(path: str | Path, dense: bool = False, steps: int = 50) -> str:
    """A GAN of two MLPs (PyTorch's default init, LeakyReLU, no normalization) learning a ring
    in 2-D, both registered by name; the generator's loss rises as the discriminator learns."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    gen = nn.Sequential(
        nn.Linear(8, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 2)
    )
    disc = nn.Sequential(
        nn.Linear(2, 64),
        nn.LeakyReLU(0.2),
        nn.Linear(64, 64),
        nn.LeakyReLU(0.2),
        nn.Linear(64, 1),
        nn.Sigmoid(),
    )
    loss_fn = nn.BCELoss()
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    with hook(path, dense) as h:
        h.register_module(gen, name="generator")
        h.register_module(disc, name="discriminator")
        h.register_loss(loss_fn)
        for _ in range(steps):
            angle = torch.rand(64, generator=g) * 2 * math.pi
            real = torch.stack([torch.cos(angle), torch.sin(angle)], 1) + 0.05 * torch.randn(
                64, 2, generator=g
            )
            opt_d.zero_grad()
            fake = gen(torch.randn(64, 8, generator=g))
            loss_d = loss_fn(disc(real), torch.ones(64, 1)) + loss_fn(disc(fake.detach()), torch.zeros(64, 1))
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            loss_g = loss_fn(disc(fake), torch.ones(64, 1))
            loss_g.backward()
            opt_g.step()
    return str(path)


# ---------------------------------------------------------------- language models


def _zipf_tokens(g: torch.Generator, n: int, length: int, vocab: int) -> torch.Tensor:
    """A Markov chain over a Zipf vocabulary: token t+1 is (2 * token t + 3) mod vocab 60% of the
    time, else a Zipf draw."""
    ranks = torch.arange(1, vocab + 1, dtype=torch.float64)
    zipf = (1.0 / ranks**1.1) / (1.0 / ranks**1.1).sum()
    draws = torch.multinomial(zipf, n * length, replacement=True, generator=g).view(n, length)
    follow = torch.rand(n, length, generator=g) < 0.6
    seq = draws.clone()
    for t in range(1, length):
        seq[:, t] = torch.where(follow[:, t], (2 * seq[:, t - 1] + 3) % vocab, draws[:, t])
    return seq


class LSTMWordLM(nn.Module):
    """PyTorch's word_language_model, RNN flavour: embedding, dropout, 2-layer LSTM, decoder."""

    def __init__(self, vocab: int, emb: int = 24, hidden: int = 48):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.drop = nn.Dropout(0.2)
        self.lstm = nn.LSTM(emb, hidden, num_layers=2, dropout=0.2, batch_first=True)
        self.decoder = nn.Linear(hidden, vocab)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)  # the example's init_weights
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.drop(self.embed(x)))
        return self.decoder(self.drop(h))


def lstm_lm_clip_steplr(path: str | Path, dense: bool = False, steps: int = 50) -> str:
    """The word LM with plain SGD at lr 5 (the example's default 20 is for its larger model),
    gradient clipping at 0.25 and a StepLR that halves the rate every 20 steps."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    vocab = 300
    data = _zipf_tokens(g, 256, 13, vocab)
    net = LSTMWordLM(vocab)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=5.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=20, gamma=0.5)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for step in range(steps):
            batch = data[(step * 16) % 256 :][:16]
            x, y = batch[:, :-1], batch[:, 1:]
            net.zero_grad()
            loss = loss_fn(net(x).reshape(-1, vocab), y.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 0.25)
            opt.step()
            sched.step()
    return str(path)


class RNNModel(nn.Module):
    """PyTorch's word_language_model RNNModel: (length, batch) layout, a recurrent state
    carried across batches, log-softmax out; `tie`: the decoder shares the embedding."""

    def __init__(self, kind: str, vocab: int, d: int = 32, layers: int = 2, tie: bool = False):
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(vocab, d)
        self.rnn = getattr(nn, kind)(d, d, layers, dropout=0.2)
        self.decoder = nn.Linear(d, vocab)
        if tie:
            self.decoder.weight = self.encoder.weight
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, x: torch.Tensor, hidden: object) -> tuple[torch.Tensor, object]:
        out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return F.log_softmax(self.decoder(self.drop(out)), dim=-1), hidden


def word_lm_example(path: str | Path, dense: bool = False, steps: int = 50, kind: str = "GRU") -> str:
    """The example's train(): a stream batchified into 20 columns, bptt 12, the hidden state
    detached between batches, NLLLoss, clipping at 0.25 and a hand-written SGD step at lr 20;
    a tied GRU."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    vocab = 300
    stream = _zipf_tokens(g, 1, 20 * 12 * 20 + 1, vocab).view(-1)
    columns = (len(stream) - 1) // 20
    source = stream[: columns * 20].view(20, columns).t().contiguous()  # (length, batch)
    net = RNNModel(kind, vocab, tie=True)
    loss_fn = nn.NLLLoss()
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        hidden = None
        for step in range(steps):
            i = (step * 12) % (columns - 13)
            x, y = source[i : i + 12], source[i + 1 : i + 13].reshape(-1)
            if hidden is not None:
                hidden = tuple(t.detach() for t in hidden) if isinstance(hidden, tuple) else hidden.detach()
            net.zero_grad()
            out, hidden = net(x, hidden)
            loss = loss_fn(out.view(-1, vocab), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 0.25)
            for p in net.parameters():
                p.data.add_(p.grad, alpha=-20.0)
    return str(path)


class TiedTransformerLM(nn.Module):
    """A word-level transformer LM whose decoder weight is the embedding weight."""

    def __init__(self, vocab: int, d: int = 32, length: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        nn.init.normal_(self.embed.weight, 0.0, 0.02)
        self.pos = nn.Parameter(torch.zeros(length, d))
        layer = nn.TransformerEncoderLayer(
            d, nhead=4, dim_feedforward=64, dropout=0.1, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.decoder = nn.Linear(d, vocab, bias=False)
        self.decoder.weight = self.embed.weight  # weight tying

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        h = self.blocks(self.embed(x) + self.pos[:t], mask=mask, is_causal=True)
        return self.decoder(self.norm(h))


def tied_transformer_lm(path: str | Path, dense: bool = False, steps: int = 50) -> str:
    """AdamW (weight decay 0.1), linear warmup over 10 steps then cosine decay, label smoothing
    0.1, tied embedding and decoder."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    vocab = 250
    data = _zipf_tokens(g, 256, 17, vocab)
    net = TiedTransformerLM(vocab)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=0.1)
    warmup = 10

    def schedule(s: int) -> float:
        if s < warmup:
            return (s + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for step in range(steps):
            batch = data[(step * 16) % 256 :][:16]
            x, y = batch[:, :-1], batch[:, 1:]
            opt.zero_grad()
            loss = loss_fn(net(x).reshape(-1, vocab), y.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sched.step()
    return str(path)


# ---------------------------------------------------------------- VAE with KL annealing


class ConvVAE(nn.Module):
    def __init__(self, z: int = 6):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(1, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU(), nn.Flatten()
        )
        self.mu = nn.Linear(64, z)
        self.logvar = nn.Linear(64, z)
        self.dec = nn.Sequential(nn.Linear(z, 64), nn.ReLU(), nn.Linear(64, 64))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.dec(z).view(-1, 1, 8, 8), mu, logvar


class AnnealedVAELoss(nn.Module):
    """Reconstruction (BCE with logits, summed) + beta * KL; beta rises from 0 to 1."""

    def __init__(self):
        super().__init__()
        self.beta = 0.0

    def forward(
        self, logits: torch.Tensor, x: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor
    ) -> torch.Tensor:
        rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return (rec + self.beta * kl) / len(x)


def vae_kl_annealing(path: str | Path, dense: bool = False, steps: int = 50) -> str:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    protos = (torch.rand(6, 1, 8, 8, generator=g) > 0.6).float()
    net, loss_fn = ConvVAE(), AnnealedVAELoss()
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for step in range(steps):
            loss_fn.beta = min(1.0, step / 30)
            k = torch.randint(0, 6, (32,), generator=g)
            x = (protos[k] + (torch.rand(32, 1, 8, 8, generator=g) < 0.05).float()).clamp(max=1)
            opt.zero_grad()
            logits, mu, logvar = net(x)
            loss = loss_fn(logits, x, mu, logvar)
            loss.backward()
            opt.step()
    return str(path)


# ---------------------------------------------------------------- GCN


class GraphConv(nn.Module):
    """PyTorch's gcn example: H' = A_hat H W (+ b), W Xavier-normal, b zeros."""

    def __init__(self, d_in: int, d_out: int, bias: bool):
        super().__init__()
        self.kernel = nn.Parameter(torch.empty(d_in, d_out))
        nn.init.xavier_normal_(self.kernel)
        self.bias = nn.Parameter(torch.zeros(d_out)) if bias else None

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        out = torch.spmm(adj, torch.mm(x, self.kernel)) if adj.is_sparse else adj @ (x @ self.kernel)
        return out if self.bias is None else out + self.bias


class GCN(nn.Module):
    """Kipf and Welling's two-layer GCN as PyTorch's example writes it: (features, adjacency)
    in, F.relu, dropout, log-softmax out (NLLLoss)."""

    def __init__(self, d_in: int, hidden: int, n_classes: int, bias: bool):
        super().__init__()
        self.gc1 = GraphConv(d_in, hidden, bias)
        self.gc2 = GraphConv(hidden, n_classes, bias)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        h = self.dropout(F.relu(self.gc1(x, adj)))
        return F.log_softmax(self.gc2(h, adj), dim=1)


def gcn(
    path: str | Path, dense: bool = False, steps: int = 40, sparse: bool = True, bias: bool = True
) -> str:
    """Node classification on a stochastic block graph (4 communities of 50 nodes), the
    example's recipe: row-normalized bag-of-words features and the renormalized adjacency as
    sparse tensors, the same every step (full batch), a train mask, Adam with weight decay
    5e-4, and after each step an evaluation (model.eval(), no_grad) of the train and
    validation nodes."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    n, k, d = 200, 4, 64
    y = torch.arange(n) % k
    same = y[:, None] == y[None, :]
    a = torch.rand(n, n, generator=g) < torch.where(same, torch.tensor(0.1), torch.tensor(0.01))
    a = torch.triu(a, 1)
    a = (a | a.T).float() + torch.eye(n)
    deg = a.sum(1)
    adj = a / torch.sqrt(deg[:, None] * deg[None, :])
    topic = torch.rand(k, d, generator=g) < 0.2
    x = ((torch.rand(n, d, generator=g) < 0.05) | (topic[y] & (torch.rand(n, d, generator=g) < 0.5))).float()
    x = x / x.sum(1, keepdim=True).clamp(min=1)  # row-normalized features, as in the example
    if sparse:
        x, adj = x.to_sparse(), adj.to_sparse()
    idx = torch.randperm(n, generator=g)
    train, val = idx[:80], idx[80:140]
    net = GCN(d, 16, k, bias)
    loss_fn = nn.NLLLoss()
    opt = torch.optim.Adam(net.parameters(), lr=0.01, weight_decay=5e-4)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for _ in range(steps):
            net.train()
            opt.zero_grad()
            loss = loss_fn(net(x, adj)[train], y[train])
            loss.backward()
            opt.step()
            net.eval()
            with torch.no_grad():
                out = net(x, adj)
                loss_fn(out[train], y[train])
                loss_fn(out[val], y[val])
    return str(path)


def gcn_dense_nobias(path: str | Path, dense: bool = False) -> str:
    """The same GCN with dense tensors and no bias (the example's default)."""
    return gcn(path, dense, sparse=False, bias=False)


# ---------------------------------------------------------------- L-BFGS


def lbfgs_polynomial(path: str | Path, dense: bool = False, steps: int = 15) -> str:
    """PyTorch's regression example fitted with L-BFGS and a strong-Wolfe line search: a
    linear model on polynomial features."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    t = torch.rand(128, 1, generator=g) * 2 - 1
    x = torch.cat([t**i for i in range(1, 5)], 1)
    y = 0.5 + 2 * t - 1.5 * t**2 + 0.8 * t**4 + 0.02 * torch.randn(128, 1, generator=g)
    net = nn.Linear(4, 1)
    loss_fn = nn.SmoothL1Loss()
    opt = torch.optim.LBFGS(net.parameters(), lr=1, max_iter=4, line_search_fn="strong_wolfe")
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for _ in range(steps):

            def closure() -> torch.Tensor:
                opt.zero_grad()
                loss = loss_fn(net(x), y)
                loss.backward()
                return loss

            opt.step(closure)
    return str(path)


# ---------------------------------------------------------------- bf16 + accumulation


def bf16_accumulation(path: str | Path, dense: bool = False, steps: int = 30) -> str:
    """A CNN classifier under CPU bf16 autocast, gradients accumulated over 4 micro-batches
    (the loss divided by 4), AdamW."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    protos = torch.randn(4, 3, 8, 8, generator=g)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 4),
    )
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for _ in range(steps):
            opt.zero_grad()
            for _ in range(4):
                y = torch.randint(0, 4, (16,), generator=g)
                x = protos[y] + 0.8 * torch.randn(16, 3, 8, 8, generator=g)
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = loss_fn(net(x), y) / 4
                loss.backward()
            opt.step()
    return str(path)


# ---------------------------------------------------------------- frozen backbone


def frozen_backbone(path: str | Path, dense: bool = False, steps: int = 40) -> str:
    """Transfer learning: a "pretrained" CNN backbone (trained briefly, then frozen with
    requires_grad False and kept in eval mode for its BatchNorm) and a new linear head, the
    only parameters the optimizer sees."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    protos = torch.randn(5, 1, 8, 8, generator=g)

    def batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, 5, (n,), generator=g)
        return protos[y] + 0.7 * torch.randn(n, 1, 8, 8, generator=g), y

    backbone = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, padding=1, stride=2),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )
    pre_head = nn.Linear(16, 5)
    pre_opt = torch.optim.Adam([*backbone.parameters(), *pre_head.parameters()], lr=1e-2)
    for _ in range(30):  # "pretraining", not recorded
        x, y = batch(32)
        pre_opt.zero_grad()
        F.cross_entropy(pre_head(backbone(x)), y).backward()
        pre_opt.step()
    for p in backbone.parameters():
        p.requires_grad_(False)

    class Finetune(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = backbone
            self.head = nn.Linear(16, 5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.backbone(x))

    net = Finetune()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.head.parameters(), lr=0.05, momentum=0.9)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for _ in range(steps):
            net.train()
            net.backbone.eval()
            x, y = batch(32)
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
    return str(path)


# ---------------------------------------------------------------- siamese / contrastive


class ContrastiveLoss(nn.Module):
    """Hadsell et al.: similar pairs pulled together, dissimilar pushed beyond `margin`."""

    def __init__(self, margin: float = 1.0):
        super().__init__()
        self.margin = margin

    def forward(self, a: torch.Tensor, b: torch.Tensor, same: torch.Tensor) -> torch.Tensor:
        d = F.pairwise_distance(a, b)
        return torch.mean(same * d.pow(2) + (1 - same) * F.relu(self.margin - d).pow(2)) / 2


class Embedder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 8))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.net(a), self.net(b)


def siamese_contrastive(path: str | Path, dense: bool = False, steps: int = 40) -> str:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    centers = torch.randn(6, 20, generator=g) * 1.5  # clustered features, each of std ~1.8
    net = Embedder()
    loss_fn = ContrastiveLoss(margin=2.0)
    opt = torch.optim.RMSprop(net.parameters(), lr=1e-3)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for _ in range(steps):
            ca = torch.randint(0, 6, (64,), generator=g)
            same = torch.rand(64, generator=g) < 0.5
            cb = torch.where(same, ca, (ca + torch.randint(1, 6, (64,), generator=g)) % 6)
            a = centers[ca] + torch.randn(64, 20, generator=g)
            b = centers[cb] + torch.randn(64, 20, generator=g)
            opt.zero_grad()
            ea, eb = net(a, b)
            loss = loss_fn(ea, eb, same.float())
            loss.backward()
            opt.step()
    return str(path)


# ---------------------------------------------------------------- ResNet-ish + OneCycleLR


class Block(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.relu2 = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu2(x + self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x))))))


class TinyResNet(nn.Module):
    def __init__(self, n_classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.block1 = Block(16)
        self.down = nn.Sequential(
            nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU()
        )
        self.block2 = Block(32)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.block2(self.down(self.block1(self.stem(x))))).flatten(1))


def _images(g: torch.Generator, protos: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.randint(0, len(protos), (n,), generator=g)
    return protos[y] + 0.8 * torch.randn(n, *protos.shape[1:], generator=g), y


def resnet_onecycle(path: str | Path, dense: bool = False, steps: int = 40) -> str:
    """CIFAR-style recipe: BatchNorm, SGD with Nesterov momentum 0.9 and weight decay 5e-4,
    OneCycleLR up to 0.2."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    protos = torch.randn(10, 3, 8, 8, generator=g)
    net = TinyResNet()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.02, momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=steps)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for _ in range(steps):
            x, y = _images(g, protos, 32)
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            sched.step()
    return str(path)


# ---------------------------------------------------------------- mixup / CutMix


def mixup_cutmix(path: str | Path, dense: bool = False, steps: int = 40) -> str:
    """Soft targets: every other batch mixup, the others CutMix, both with Beta(1, 1) mixing;
    CrossEntropyLoss with class-probability targets."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    protos = torch.randn(5, 3, 8, 8, generator=g)
    net = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 5),
    )
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    beta = torch.distributions.Beta(1.0, 1.0)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for step in range(steps):
            x, y = _images(g, protos, 32)
            onehot = F.one_hot(y, 5).float()
            perm = torch.randperm(32, generator=g)
            lam = float(beta.sample())
            if step % 2 == 0:
                x = lam * x + (1 - lam) * x[perm]
            else:
                side = int(round(8 * math.sqrt(1 - lam)))
                i, j = torch.randint(0, 8 - side + 1, (2,), generator=g).tolist()
                x = x.clone()
                x[:, :, i : i + side, j : j + side] = x[perm, :, i : i + side, j : j + side]
                lam = 1 - side * side / 64
            target = lam * onehot + (1 - lam) * onehot[perm]
            opt.zero_grad()
            loss = loss_fn(net(x), target)
            loss.backward()
            opt.step()
    return str(path)


# ---------------------------------------------------------------- knowledge distillation


class DistillationLoss(nn.Module):
    """Hinton et al.: KL between softened student and teacher distributions (T^2 scaled),
    plus cross-entropy on the hard labels."""

    def __init__(self, temperature: float = 4.0, alpha: float = 0.7):
        super().__init__()
        self.t, self.alpha = temperature, alpha

    def forward(self, student: torch.Tensor, teacher: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        kd = F.kl_div(
            F.log_softmax(student / self.t, 1),
            F.log_softmax(teacher / self.t, 1),
            reduction="batchmean",
            log_target=True,
        )
        return self.alpha * self.t**2 * kd + (1 - self.alpha) * F.cross_entropy(student, y)


def distillation(
    path: str | Path, dense: bool = False, steps: int = 40, register_teacher: bool = True
) -> str:
    """A wide teacher (trained, then frozen and in eval mode) distilled into a narrow student;
    the teacher is registered on the hook too unless `register_teacher` is False."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    w = torch.randn(16, 6, generator=g)

    def batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, 16, generator=g)
        return x, (x @ w + 0.5 * torch.randn(n, 6, generator=g)).argmax(1)

    teacher = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 6))
    t_opt = torch.optim.Adam(teacher.parameters(), lr=1e-2)
    for _ in range(60):  # not recorded
        x, y = batch(64)
        t_opt.zero_grad()
        F.cross_entropy(teacher(x), y).backward()
        t_opt.step()
    teacher.eval()
    teacher.requires_grad_(False)
    student = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 6))
    loss_fn = DistillationLoss()
    opt = torch.optim.Adam(student.parameters(), lr=5e-3)
    with hook(path, dense) as h:
        h.register_module(student)
        if register_teacher:
            h.register_module(teacher)
        h.register_loss(loss_fn)
        for _ in range(steps):
            x, y = batch(64)
            with torch.no_grad():
                t_logits = teacher(x)
            opt.zero_grad()
            loss = loss_fn(student(x), t_logits, y)
            loss.backward()
            opt.step()
    return str(path)


def distillation_teacher_unregistered(path: str | Path, dense: bool = False) -> str:
    return distillation(path, dense, register_teacher=False)


# ---------------------------------------------------------------- multi-label


def multilabel_imbalanced(path: str | Path, dense: bool = False, steps: int = 40) -> str:
    """12 tags, each present in 2% to 40% of the samples (tag frequencies fall off as in real
    multi-label data), BCEWithLogitsLoss with pos_weight."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    n_tags, d = 12, 24
    rates = torch.linspace(0.4, 0.02, n_tags)
    w = torch.randn(d, n_tags, generator=g)
    bias = torch.logit(rates) - 0.0
    net = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, n_tags))
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=((1 - rates) / rates).sqrt())
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for _ in range(steps):
            x = torch.randn(64, d, generator=g)
            y = (torch.rand(64, n_tags, generator=g) < torch.sigmoid(x @ w * 0.7 + bias)).float()
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
    return str(path)


# ---------------------------------------------------------------- regression far from zero


def regression_offset_targets(path: str | Path, dense: bool = False, steps: int = 50) -> str:
    """House-price style: standardized features, targets around 300 with spread 50, MSE; the
    output bias is set to the targets' mean (as a careful practitioner does)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    w = torch.randn(10, 1, generator=g)
    net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    with torch.no_grad():
        net[-1].bias.fill_(300.0)
    loss_fn = nn.MSELoss()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for _ in range(steps):
            x = torch.randn(32, 10, generator=g)
            y = 300 + 15 * (x @ w) + 5 * torch.randn(32, 1, generator=g)
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
    return str(path)


# ---------------------------------------------------------------- seq2seq


class Seq2Seq(nn.Module):
    """GRU encoder-decoder (PyTorch's translation tutorial without attention): reverse a
    sequence of tokens, teacher forcing half of the time."""

    def __init__(self, vocab: int = 12, hidden: int = 32):
        super().__init__()
        self.src_embed = nn.Embedding(vocab, hidden)
        self.encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.tgt_embed = nn.Embedding(vocab, hidden)
        self.decoder = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, teacher_forcing: bool) -> torch.Tensor:
        _, h = self.encoder(self.src_embed(src))
        token = torch.zeros(len(src), 1, dtype=torch.long)  # start of sequence
        logits = []
        for t in range(tgt.shape[1]):
            o, h = self.decoder(self.tgt_embed(token), h)
            step_logits = self.out(o)
            logits.append(step_logits)
            token = tgt[:, t : t + 1] if teacher_forcing else step_logits.argmax(-1).detach()
        return torch.cat(logits, 1)


def seq2seq(path: str | Path, dense: bool = False, steps: int = 40) -> str:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    net = Seq2Seq()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for _ in range(steps):
            src = torch.randint(1, 12, (32, 6), generator=g)
            tgt = src.flip(1)
            forcing = bool(torch.rand(1, generator=g) < 0.5)
            opt.zero_grad()
            logits = net(src, tgt, forcing)
            loss = loss_fn(logits.reshape(-1, 12), tgt.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
    return str(path)


# ---------------------------------------------------------------- REINFORCE


class PolicyLoss(nn.Module):
    """REINFORCE: -sum(log pi(a|s) * normalized return)."""

    def forward(self, log_probs: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
        return -(log_probs * returns).sum()


def reinforce(path: str | Path, dense: bool = False, steps: int = 40, seed: int = 0) -> str:
    """PyTorch's reinforce example on a toy corridor: 8 cells, start in the middle, reward 1
    on reaching the right end, episodes of at most 12 moves, gamma 0.95, returns normalized."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(1 + seed)
    policy = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 2))
    loss_fn = PolicyLoss()
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    with hook(path, dense) as h:
        h.register_module(policy)
        h.register_loss(loss_fn)
        for _ in range(steps):
            log_probs, rewards = [], []
            for _episode in range(4):
                pos = 4
                ep_rewards = []
                for _t in range(12):
                    state = F.one_hot(torch.tensor([pos]), 8).float()
                    probs = torch.softmax(policy(state), -1)[0]
                    action = int(torch.multinomial(probs, 1, generator=g))
                    log_probs.append(torch.log(probs[action]))
                    pos = max(0, min(7, pos + (1 if action == 1 else -1)))
                    ep_rewards.append(1.0 if pos == 7 else 0.0)
                    if pos == 7:
                        break
                ret, returns = 0.0, []
                for r in reversed(ep_rewards):
                    ret = r + 0.95 * ret
                    returns.insert(0, ret)
                rewards.extend(returns)
            ret_t = torch.tensor(rewards)
            ret_t = (ret_t - ret_t.mean()) / (ret_t.std() + 1e-6)
            opt.zero_grad()
            loss = loss_fn(torch.stack(log_probs), ret_t)
            loss.backward()
            opt.step()
    return str(path)


# ---------------------------------------------------------------- dropout + eval passes


def dropout_with_eval(path: str | Path, dense: bool = False, steps: int = 60) -> str:
    """An MLP with Dropout(0.3), evaluated (model.eval(), no_grad) on a held-out set every 10
    steps, as PyTorch's MNIST example does after each epoch."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    w = torch.randn(20, 4, generator=g)

    def batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, 20, generator=g)
        return x, (x @ w).argmax(1)

    x_eval, y_eval = batch(128)
    net = nn.Sequential(
        nn.Linear(20, 64),
        nn.ReLU(),
        nn.Dropout(0.3),
        nn.Linear(64, 64),
        nn.ReLU(),
        nn.Dropout(0.3),
        nn.Linear(64, 4),
    )
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for step in range(steps):
            net.train()
            x, y = batch(32)
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            if (step + 1) % 10 == 0:
                net.eval()
                with torch.no_grad():
                    for i in range(0, 128, 64):
                        loss_fn(net(x_eval[i : i + 64]), y_eval[i : i + 64])
    return str(path)


# ---------------------------------------------------------------- fine-tuning at lr 1e-5


def finetune_tiny_lr(path: str | Path, dense: bool = False, steps: int = 40) -> str:
    """Fine-tuning a "pretrained" MLP (trained on a related task first, not recorded) with
    AdamW at lr 1e-5: each update moves a weight by about 1e-5, by design."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    w = torch.randn(16, 5, generator=g)

    def batch(n: int, shift: float) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, 16, generator=g)
        return x, (x @ w + shift * x[:, :5]).argmax(1)

    net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5))
    pre = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(60):
        x, y = batch(64, 0.0)
        pre.zero_grad()
        F.cross_entropy(net(x), y).backward()
        pre.step()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-5, weight_decay=0.01)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for _ in range(steps):
            x, y = batch(32, 0.5)
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
    return str(path)


# ---------------------------------------------------------------- plateau, then descent


def plateau_then_descent(path: str | Path, dense: bool = False, steps: int = 80) -> str:
    """Modular addition with an MLP on one-hot pairs and weight decay: the loss sits near ln(p)
    for a while, then falls (a grokking-like warm start)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    p = 11
    a = torch.arange(p).repeat_interleave(p)
    b = torch.arange(p).repeat(p)
    x_all = torch.cat([F.one_hot(a, p), F.one_hot(b, p)], 1).float()
    y_all = (a + b) % p
    net = nn.Sequential(nn.Linear(2 * p, 64), nn.ReLU(), nn.Linear(64, p))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=0.1)
    with hook(path, dense) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for _ in range(steps):
            idx = torch.randint(0, p * p, (64,), generator=g)
            opt.zero_grad()
            loss = loss_fn(net(x_all[idx]), y_all[idx])
            loss.backward()
            opt.step()
    return str(path)


PIPELINES: dict[str, Callable[..., str]] = {
    "dcgan": dcgan,
    "mlp_gan": mlp_gan,
    "lstm_lm_clip_steplr": lstm_lm_clip_steplr,
    "word_lm_example": word_lm_example,
    "tied_transformer_lm": tied_transformer_lm,
    "vae_kl_annealing": vae_kl_annealing,
    "gcn": gcn,
    "gcn_dense_nobias": gcn_dense_nobias,
    "lbfgs_polynomial": lbfgs_polynomial,
    "bf16_accumulation": bf16_accumulation,
    "frozen_backbone": frozen_backbone,
    "siamese_contrastive": siamese_contrastive,
    "resnet_onecycle": resnet_onecycle,
    "mixup_cutmix": mixup_cutmix,
    "distillation": distillation,
    "distillation_teacher_unregistered": distillation_teacher_unregistered,
    "multilabel_imbalanced": multilabel_imbalanced,
    "regression_offset_targets": regression_offset_targets,
    "seq2seq": seq2seq,
    "reinforce": reinforce,
    "dropout_with_eval": dropout_with_eval,
    "finetune_tiny_lr": finetune_tiny_lr,
    "plateau_then_descent": plateau_then_descent,
}
