"""The twenty-third blind held-out set (issue 26), part AD: small trainings of kinds the corpus
did not have yet, plain PyTorch loops with the README's two lines (`register_loss` where the
script has a loss module) and trainings through tools with their one callback or hook, each
written the way its practitioners write it (its reference code's loss, optimizer and loop),
shrunk to tiny models on data generated in-process, fixed seeds, one CPU thread.

Plain PyTorch: GraphSAGE trained on sampled neighbourhoods (fan-outs 10 and 5 drawn with
replacement per seed node, the paper's minibatch algorithm, mean aggregator concatenated with
the self representation) on a stochastic block model with a validation pass at larger
fan-outs; a masked autoregressive flow (five Gaussian MADE layers, orders reversed between
layers) fitted by maximum likelihood to 4-D data; MMoE (shared experts, one softmax gate and one
tower per task) on the paper's synthetic pair of tasks of correlation 0.5; system identification
of a linear-Gaussian state-space model by the Kalman filter's innovation likelihood written in
torch (full batch, log-standard-deviation noise parameters); Stein variational gradient descent
for a Bayesian network (20 particles with Gamma hyper-priors, the RBF kernel with the median
bandwidth, the Stein direction written into `.grad`, RMSprop-style AdaGrad); QR-DQN (32
quantiles, the quantile Huber loss, a target network, a replay buffer, Adam eps 0.01 / 32) on a
hand-written cart-pole; TRADES adversarial training (a KL-ascent attack under `model.eval()`,
clean cross-entropy plus beta 6 times the KL, SGD momentum) on uint8 glyphs; HolE knowledge-graph
embeddings (circular correlation through `torch.fft`, "bern" head-or-tail corruption, 4
negatives per positive, the logistic loss as `nn.SoftMarginLoss`, entity embeddings projected
into the unit ball, AdaGrad); PointNet++ single-scale grouping (farthest point sampling, ball
query, shared MLPs max-pooled per group, a group-all abstraction) on point clouds of four shapes
with `StepLR`; a Shake-Shake ResNet (two branches mixed by random per-image weights forward and
independent ones backward through a custom `autograd.Function`, SGD Nesterov with per-step
cosine); deep kernel learning (an MLP feature extractor under an RBF kernel, the exact GP
marginal likelihood through a Cholesky factorization, full batch, Adam); TS2Vec (random
overlapping crops, timestamp masking, a dilated convolution encoder, the hierarchical
instance-wise and temporal contrastive loss over a max-pooling pyramid, AdamW, a ridge probe);
token-level unlikelihood training of a GRU language model (maximum likelihood plus the
penalty `-log(clamp(1 - p, 1e-5))` on the previous-context candidates).

Through tools: Lightning (`mldbg.lightning.DebuggerCallback`): the Entire Space Multi-task Model
(shared field embeddings, CTR and CVR towers, `BCELoss` on pCTR and on pCTR x pCVR over every
impression, a validation step). Hugging Face `Trainer` (`mldbg.transformers.DebuggerCallback`):
a tiny random `NystromformerForSequenceClassification` (16 landmarks over 128 tokens)
classifying the topic of long token documents, linear decay with warm-up. Keras 3
(`mldbg.keras.Hook`): the keras.io neural decision forest (soft trees with sigmoid routing,
leaf distributions as trainable weights, the forest's averaged probabilities to
`SparseCategoricalCrossentropy`, Adam 0.01).

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the MAF's Adam at 1e-1 typed for 1e-3 (lr_x100), the QR-DQN update without
`optimizer.zero_grad()` (no_zero_grad), MMoE's targets read from a copy of the table sorted on
the first task (shuffled_labels), the TRADES glyphs cast to float without the division by 255
(inputs_x255), the PointNet++ head ending in `nn.Softmax` "for the voting at test time" before
`CrossEntropyLoss` (softmax_before_ce), GraphSAGE under an init helper with std 0.01 weights and
biases of -1 (dead_relu_init), the deep-kernel feature extractor made "deeper" as eight sigmoid
layers (deep_sigmoid), HolE's entity embeddings frozen by a line left from a pretrained-embedding
variant after the optimizer was built (frozen_by_mistake), the state-space model's noise scales
as raw standard deviations initialised by `torch.zeros` and squared, with the initial state taken
as known, so the first innovation variance is exactly 0 and `log(0)` reaches the likelihood
(log_zero_nan), the Shake-Shake net never put back in training mode after its first test pass
(train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND22`.
"""

from __future__ import annotations

import math
import os
import random
import shutil
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from mldbg.torch import Hook

from . import BLIND22, buggy, healthy, installed

SPLIT = BLIND22

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 2201)


# ============================================================================= GraphSAGE, sampled


def _sbm(g: torch.Generator, n: int, k: int, p_in: float, p_out: float, dim: int) -> tuple[Any, ...]:
    """A stochastic block model with `k` communities and noisy community-mean features."""
    y = torch.randint(0, k, (n,), generator=g)
    same = y[:, None] == y[None, :]
    prob = torch.where(same, torch.tensor(p_in), torch.tensor(p_out))
    adj = torch.rand(n, n, generator=g) < prob
    adj = torch.triu(adj, 1)
    adj = adj | adj.T
    means = torch.randn(k, dim, generator=g)
    x = 0.4 * means[y] + torch.randn(n, dim, generator=g)
    neighbours = [torch.nonzero(adj[i]).flatten() for i in range(n)]
    for i in range(n):  # isolated nodes get a self-loop, as samplers do
        if len(neighbours[i]) == 0:
            neighbours[i] = torch.tensor([i])
    return x, y, neighbours


def _sample(
    neighbours: list[torch.Tensor], nodes: torch.Tensor, fanout: int, g: torch.Generator
) -> torch.Tensor:
    """`fanout` neighbours of each node drawn uniformly with replacement: (len(nodes), fanout)."""
    out = torch.empty(len(nodes), fanout, dtype=torch.long)
    for j, v in enumerate(nodes.tolist()):
        nb = neighbours[v]
        out[j] = nb[torch.randint(0, len(nb), (fanout,), generator=g)]
    return out


class _SAGELayer(nn.Module):
    """GraphSAGE-mean: the node's own representation and the mean of its sampled neighbours',
    concatenated, through one linear map."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.lin = nn.Linear(2 * d_in, d_out)

    def forward(self, h_self: torch.Tensor, h_neigh: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.cat([h_self, h_neigh.mean(-2)], -1))


class _SAGE(nn.Module):
    def __init__(self, d_in: int, hidden: int, classes: int, dropout: float = 0.5) -> None:
        super().__init__()
        self.l1 = _SAGELayer(d_in, hidden)
        self.l2 = _SAGELayer(hidden, classes)
        self.drop = nn.Dropout(dropout)

    def forward(self, x0: torch.Tensor, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        """x0: seeds (B, d); x1: their sampled neighbours (B, f1, d); x2: the neighbours'
        neighbours (B, f1, f2, d). The minibatch algorithm of Hamilton et al. (2017)."""
        h0 = self.drop(F.relu(self.l1(x0, x1)))
        h1 = self.drop(F.relu(self.l1(x1, x2)))
        return self.l2(h0, h1)


def graphsage_neighbor_sampling(
    path: str, epochs: int = 30, seed: int = 0, bug: str | None = None
) -> list[float]:
    """GraphSAGE node classification trained on sampled neighbourhoods (fan-outs 10 then 5 drawn
    with replacement per seed node, the paper's minibatch algorithm), mean aggregator with the
    self representation concatenated, dropout 0.5, Adam 0.01 with weight decay 5e-4, batches of
    64 training nodes, on a 4-community stochastic block model of 800 nodes; each epoch an
    evaluation on the validation nodes with larger fan-outs under `model.eval()`."""
    g = _seed(seed)
    x, y, neighbours = _sbm(g, 800, 4, 0.03, 0.003, 16)
    perm = torch.randperm(800, generator=g)
    train_idx, val_idx = perm[:480], perm[480:]
    model = _SAGE(16, 64, 4)
    if bug == "dead_relu_init":  # bug: an init helper with tiny weights and biases of -1
        for m in model.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.01)
                nn.init.constant_(m.bias, -1.0)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)

    def gather(seeds: torch.Tensor, f1: int, f2: int) -> tuple[torch.Tensor, ...]:
        n1 = _sample(neighbours, seeds, f1, g)
        n2 = _sample(neighbours, n1.flatten(), f2, g).view(len(seeds), f1, f2)
        return x[seeds], x[n1], x[n2]

    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        order = train_idx[torch.randperm(len(train_idx), generator=g)]
        for i in range(0, len(order), 64):
            seeds = order[i : i + 64]
            out = model(*gather(seeds, 10, 5))
            loss = loss_fn(out, y[seeds])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(*gather(val_idx, 20, 10)).argmax(1) == y[val_idx]).float().mean().item()
        print(f"epoch {epoch} loss {losses[-1]:.4f} val acc {acc:.3f}")
    hook.close()
    return losses


# ============================================================================= MAF


class _MaskedLinear(nn.Linear):
    def __init__(self, d_in: int, d_out: int, mask: torch.Tensor) -> None:
        super().__init__(d_in, d_out)
        self.register_buffer("mask", mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight * self.mask, self.bias)


class _MADE(nn.Module):
    """A Gaussian MADE: the mean and log-scale of each dimension given the previous ones in
    `order` (Germain et al. 2015), as one layer of a masked autoregressive flow."""

    def __init__(self, dim: int, hidden: int, order: torch.Tensor) -> None:
        super().__init__()
        deg_in = order
        deg_h = torch.arange(hidden) % max(dim - 1, 1) + 1
        m1 = (deg_h[:, None] >= deg_in[None, :]).float()
        m2 = (deg_h[:, None] >= deg_h[None, :]).float()
        m3 = (deg_in[:, None] > deg_h[None, :]).float()
        self.net = nn.ModuleList(
            [
                _MaskedLinear(dim, hidden, m1),
                _MaskedLinear(hidden, hidden, m2),
                _MaskedLinear(hidden, 2 * dim, m3.repeat(2, 1)),
            ]
        )

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.relu(self.net[0](x))
        h = F.relu(self.net[1](h))
        mu, alpha = self.net[2](h).chunk(2, -1)
        u = (x - mu) * torch.exp(-alpha)
        return u, -alpha.sum(-1)


class _MAF(nn.Module):
    def __init__(self, dim: int, hidden: int, layers: int) -> None:
        super().__init__()
        orders = [torch.arange(1, dim + 1) if i % 2 == 0 else torch.arange(dim, 0, -1) for i in range(layers)]
        self.layers = nn.ModuleList([_MADE(dim, hidden, o) for o in orders])

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        logdet = torch.zeros(len(x))
        for layer in self.layers:
            x, ld = layer(x)
            logdet = logdet + ld
        base = -0.5 * (x**2).sum(-1) - 0.5 * x.shape[-1] * math.log(2 * math.pi)
        return base + logdet


def maf_masked_autoregressive_flow(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A masked autoregressive flow (Papamakarios et al. 2017): five Gaussian MADE layers with
    two hidden layers of 64, the variable order reversed between layers, the density of 4-D data
    (two moons and two dimensions that depend on them nonlinearly) by maximum likelihood, Adam at
    1e-3 with weight decay 1e-6, batches of 128, gradient clipping at 5; the loss is the negative
    log-likelihood per dimension, a held-out NLL every 100 steps."""
    g = _seed(seed)
    n = 6000
    t = torch.rand(n, generator=g) * math.pi
    side = torch.randint(0, 2, (n,), generator=g).float()
    a = torch.where(side > 0, torch.cos(t), 1 - torch.cos(t))
    b = torch.where(side > 0, torch.sin(t), 0.5 - torch.sin(t))
    a, b = a + 0.08 * torch.randn(n, generator=g), b + 0.08 * torch.randn(n, generator=g)
    c = a * b + 0.1 * torch.randn(n, generator=g)
    d = torch.sin(2 * a) + 0.1 * torch.randn(n, generator=g)
    data = torch.stack([a, b, c, d], 1)
    data = (data - data.mean(0)) / data.std(0)
    train, val = data[:5000], data[5000:]
    flow = _MAF(4, 64, 5)
    lr = 1e-1 if bug == "lr_x100" else 1e-3  # bug: 1e-1 typed for 1e-3
    opt = torch.optim.Adam(flow.parameters(), lr=lr, weight_decay=1e-6)
    hook = Hook(path)
    hook.register_module(flow)
    losses: list[float] = []
    for step in range(steps):
        batch = train[torch.randint(0, len(train), (128,), generator=g)]
        loss = -flow.log_prob(batch).mean() / 4
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(flow.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                print(
                    f"step {step} train {loss.item():.4f} val {(-flow.log_prob(val).mean() / 4).item():.4f}"
                )
    hook.close()
    return losses


# ============================================================================= MMoE


class _MMoE(nn.Module):
    """Multi-gate mixture-of-experts (Ma et al. 2018): shared experts, one softmax gate and one
    tower per task."""

    def __init__(self, d_in: int, experts: int, d_expert: int, tasks: int) -> None:
        super().__init__()
        self.experts = nn.ModuleList(
            [nn.Sequential(nn.Linear(d_in, d_expert), nn.ReLU()) for _ in range(experts)]
        )
        self.gates = nn.ModuleList([nn.Linear(d_in, experts) for _ in range(tasks)])
        self.towers = nn.ModuleList(
            [nn.Sequential(nn.Linear(d_expert, 8), nn.ReLU(), nn.Linear(8, 1)) for _ in range(tasks)]
        )

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        e = torch.stack([exp(x) for exp in self.experts], 1)  # (B, E, d)
        outs = []
        for gate, tower in zip(self.gates, self.towers, strict=True):
            w = torch.softmax(gate(x), -1).unsqueeze(-1)
            outs.append(tower((w * e).sum(1)).squeeze(-1))
        return outs


def mmoe_synthetic_task_correlation(
    path: str, steps: int = 500, seed: int = 0, bug: str | None = None
) -> list[float]:
    """MMoE on the paper's synthetic benchmark: two regression tasks built from unit weight
    vectors with a chosen correlation (0.5), each target `w.x + sum_i sin(a_i w.x + b_i)` plus
    noise, 8 experts of 16 ReLU units, one softmax gate and a 8-unit tower per task, the sum of
    the two MSEs, Adam 1e-3, batches of 128; a validation MSE per task every 100 steps."""
    g = _seed(seed)
    d, n, rho = 100, 8000, 0.5
    u1, u2 = torch.linalg.qr(torch.randn(d, 2, generator=g))[0].T
    w1 = u1
    w2 = rho * u1 + math.sqrt(1 - rho**2) * u2
    alpha = torch.randn(10, generator=g)
    beta = torch.randn(10, generator=g)
    x = torch.randn(n, d, generator=g)

    def target(w: torch.Tensor) -> torch.Tensor:
        z = 3 * x @ w
        return z + torch.sin(alpha[None] * z[:, None] + beta[None]).sum(1) + 0.1 * torch.randn(n, generator=g)

    y = torch.stack([target(w1), target(w2)], 1)
    y = (y - y.mean(0)) / y.std(0)
    if bug == "shuffled_labels":  # bug: the targets read from a copy of the table sorted on the first task
        y = y[torch.argsort(y[:, 0])]
    xtr, ytr, xva, yva = x[:7000], y[:7000], x[7000:], y[7000:]
    model = _MMoE(d, 8, 16, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for step in range(steps):
        idx = torch.randint(0, len(xtr), (128,), generator=g)
        out = model(xtr[idx])
        loss = loss_fn(out[0], ytr[idx, 0]) + loss_fn(out[1], ytr[idx, 1])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                o = model(xva)
                print(step, [round(loss_fn(o[k], yva[:, k]).item(), 4) for k in range(2)])
    hook.close()
    return losses


# ============================================================================= Kalman


class _LinearGaussianSSM(nn.Module):
    """A linear-Gaussian state-space model whose parameters are fitted by maximizing the Kalman
    filter's prediction-error likelihood."""

    def __init__(self, k: int, bug: str | None = None) -> None:
        super().__init__()
        self.A = nn.Parameter(0.9 * torch.eye(k))
        self.H = nn.Parameter(torch.ones(1, k) / k)
        self.bug = bug
        if bug == "log_zero_nan":  # bug: noise scales as raw stds from torch.zeros, squared
            self.q_std = nn.Parameter(torch.zeros(k))
            self.r_std = nn.Parameter(torch.zeros(1))
        else:
            self.log_q = nn.Parameter(torch.zeros(k))
            self.log_r = nn.Parameter(torch.zeros(1))

    def nll(self, y: torch.Tensor) -> torch.Tensor:
        """The negative log-likelihood per observation of series `y` (B, T)."""
        b, t_len = y.shape
        k = self.A.shape[0]
        if self.bug == "log_zero_nan":
            q, r = torch.diag(self.q_std**2), self.r_std**2
            p = torch.zeros(b, k, k)  # the initial state taken as known
        else:
            q, r = torch.diag(torch.exp(2 * self.log_q)), torch.exp(2 * self.log_r)
            p = torch.eye(k).expand(b, k, k)
        m = torch.zeros(b, k)
        total = torch.zeros(())
        for t in range(t_len):
            m = m @ self.A.T
            p = self.A @ p @ self.A.T + q
            s = (self.H @ p @ self.H.T).view(b) + r
            v = y[:, t] - (m @ self.H.T).view(b)
            total = total + 0.5 * (torch.log(2 * math.pi * s) + v**2 / s).sum()
            gain = (p @ self.H.T).view(b, k) / s[:, None]
            m = m + gain * v[:, None]
            p = p - gain[:, :, None] * (self.H @ p)
        return total / (b * t_len)


def kalman_filter_mle_ssm(path: str, steps: int = 150, seed: int = 0, bug: str | None = None) -> list[float]:
    """System identification by maximum likelihood: a 3-state linear-Gaussian state-space model
    (transition matrix, observation row, diagonal process noise and observation noise through
    log-standard-deviations) fitted to 32 noisy series from a damped oscillator plus a slow
    level, by the Kalman filter's innovation likelihood written in torch, full batch, Adam 0.02;
    the loss is the NLL per observation."""
    g = _seed(seed)
    b, t_len = 32, 60
    theta = 0.35
    a_true = torch.tensor([[0.95 * math.cos(theta), -0.95 * math.sin(theta), 0.0],
                           [0.95 * math.sin(theta), 0.95 * math.cos(theta), 0.0], [0.0, 0.0, 0.995]])  # fmt: skip
    z = torch.randn(b, 3, generator=g)
    ys = []
    for _ in range(t_len):
        z = z @ a_true.T + torch.tensor([0.3, 0.3, 0.05]) * torch.randn(b, 3, generator=g)
        ys.append(z[:, 0] + z[:, 2] + 0.3 * torch.randn(b, generator=g))
    y = torch.stack(ys, 1)
    model = _LinearGaussianSSM(3, bug)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for step in range(steps):
        loss = model.nll(y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(step, loss.item())
    hook.close()
    return losses


# ============================================================================= SVGD


class _Particles(nn.Module):
    """The particles of Stein variational gradient descent: one row per posterior sample of a
    one-hidden-layer Bayesian network's weights, log noise precision and log weight precision."""

    def __init__(self, m: int, d_in: int, hidden: int) -> None:
        super().__init__()
        self.d_in, self.hidden = d_in, hidden
        n_w = d_in * hidden + hidden + hidden + 1
        w = torch.randn(m, n_w) / math.sqrt(d_in + 1)
        self.theta = nn.Parameter(torch.cat([w, torch.full((m, 1), math.log(10.0)), torch.zeros(m, 1)], 1))

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        d, h = self.d_in, self.hidden
        th = self.theta
        w1 = th[:, : d * h].view(-1, d, h)
        b1 = th[:, d * h : d * h + h]
        w2 = th[:, d * h + h : d * h + 2 * h]
        b2 = th[:, d * h + 2 * h]
        hid = F.relu(torch.einsum("nd,mdh->mnh", x, w1) + b1[:, None])
        return (hid * w2[:, None]).sum(-1) + b2[:, None]  # (M, N)


def svgd_bayesian_nn_regression(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """Stein variational gradient descent for a Bayesian neural network (Liu and Wang 2016's
    `bayesian_nn.py`): 20 particles of a 50-unit ReLU regression net with Gamma priors on the
    noise and weight precisions, the gradient of each particle's log posterior (minibatch
    log-likelihood scaled by N / B) from autograd, the RBF kernel with the median-trick bandwidth,
    the Stein direction written into `.grad` (negated) and an RMSprop-style "AdaGrad with
    momentum" (alpha 0.9); the loss is the particles' mean negative log-likelihood per point."""
    g = _seed(seed)
    n, d = 600, 6
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, generator=g)
    y = torch.tanh(x @ w) * 2 + 0.5 * x[:, 0] * x[:, 1] + 0.2 * torch.randn(n, generator=g)
    y = (y - y.mean()) / y.std()
    model = _Particles(20, d, 50)
    opt = torch.optim.RMSprop(model.parameters(), lr=3e-3, alpha=0.9, eps=1e-6)
    hook = Hook(path)
    hook.register_module(model)
    a0, b0 = 1.0, 0.1
    losses: list[float] = []
    for step in range(steps):
        idx = torch.randint(0, n, (100,), generator=g)
        th = model.theta
        pred = model.predict(x[idx])
        log_gamma, log_lambda = th[:, -2], th[:, -1]
        ws = th[:, :-2]
        sq = ((pred - y[idx][None]) ** 2).sum(1)
        log_lik = 0.5 * 100 * (log_gamma - math.log(2 * math.pi)) - 0.5 * torch.exp(log_gamma) * sq
        log_prior_w = 0.5 * ws.shape[1] * (log_lambda - math.log(2 * math.pi)) - 0.5 * torch.exp(
            log_lambda
        ) * (ws**2).sum(1)
        log_prior_h = (a0 - 1) * log_gamma - b0 * torch.exp(log_gamma) + log_gamma
        log_prior_h = log_prior_h + (a0 - 1) * log_lambda - b0 * torch.exp(log_lambda) + log_lambda
        log_post = log_lik * (n / 100) + log_prior_w + log_prior_h
        dlnprob = torch.autograd.grad(log_post.sum(), th)[0]
        with torch.no_grad():
            t = th.detach()
            sqd = torch.cdist(t, t) ** 2
            h = sqd.median() / math.log(len(t) + 1)
            kxy = torch.exp(-sqd / h)
            dxkxy = (t * kxy.sum(1, keepdim=True) - kxy @ t) * (2 / h)
            phi = (kxy @ dlnprob + dxkxy) / len(t)
        opt.zero_grad()
        th.grad = -phi
        opt.step()
        with torch.no_grad():
            nll = 0.5 * (math.log(2 * math.pi) - log_gamma) + 0.5 * torch.exp(log_gamma) * sq / 100
        losses.append(nll.mean().item())
        if step % 50 == 0:
            rmse = ((model.predict(x).mean(0) - y) ** 2).mean().sqrt().item()
            print(f"step {step} nll {losses[-1]:.4f} rmse {rmse:.4f}")
    hook.close()
    return losses


# ============================================================================= QR-DQN


class _CartPole:
    """The classic cart-pole (Barto et al. 1983), Euler steps of 0.02 s, 200 steps at most."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.s = np.zeros(4)
        self.t = 0

    def reset(self) -> np.ndarray:
        self.s = self.rng.uniform(-0.05, 0.05, 4)
        self.t = 0
        return self.s.astype(np.float32)

    def step(self, a: int) -> tuple[np.ndarray, float, bool]:
        x, xd, th, thd = self.s
        force = 10.0 if a == 1 else -10.0
        ct, st = math.cos(th), math.sin(th)
        temp = (force + 0.05 * thd**2 * st) / 1.1
        thacc = (9.8 * st - ct * temp) / (0.5 * (4.0 / 3.0 - 0.1 * ct**2 / 1.1))
        xacc = temp - 0.05 * thacc * ct / 1.1
        self.s = np.array([x + 0.02 * xd, xd + 0.02 * xacc, th + 0.02 * thd, thd + 0.02 * thacc])
        self.t += 1
        done = abs(self.s[0]) > 2.4 or abs(self.s[2]) > 0.2095 or self.t >= 200
        return self.s.astype(np.float32), 1.0, bool(done)


def qr_dqn_quantile_huber_cartpole(
    path: str, env_steps: int = 4000, seed: int = 0, bug: str | None = None
) -> list[float]:
    """QR-DQN (Dabney et al. 2018) on a hand-written cart-pole: 32 quantiles per action, the
    quantile Huber loss (kappa 1) at midpoints tau_hat = (2i + 1) / 2N against the target
    network's quantiles at the greedy action of their mean, a replay buffer of 10000, Adam at
    5e-4 with eps 0.01 / 32, a target copy every 200 steps, epsilon decayed linearly from 1 to
    0.05, a gradient step every second environment step after 300 warm-up steps."""
    g = _seed(seed)
    rng = np.random.default_rng(seed)
    n_q = 32
    net = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2 * n_q))
    target = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2 * n_q))
    target.load_state_dict(net.state_dict())
    opt = torch.optim.Adam(net.parameters(), lr=5e-4, eps=0.01 / 32)
    tau_hat = (torch.arange(n_q, dtype=torch.float32) * 2 + 1) / (2 * n_q)
    env = _CartPole(rng)
    buf_s = np.zeros((10000, 4), np.float32)
    buf_a = np.zeros(10000, np.int64)
    buf_r = np.zeros(10000, np.float32)
    buf_s2 = np.zeros((10000, 4), np.float32)
    buf_d = np.zeros(10000, np.float32)
    size = 0
    hook = Hook(path)
    hook.register_module(net)
    s = env.reset()
    ret, returns, losses = 0.0, [], []
    for t in range(env_steps):
        eps = max(0.05, 1.0 - t / (0.5 * env_steps))
        if rng.random() < eps:
            a = int(rng.integers(2))
        else:
            with torch.no_grad():
                a = int(net(torch.from_numpy(s)).view(2, n_q).mean(1).argmax())
        s2, r, done = env.step(a)
        i = t % 10000
        buf_s[i], buf_a[i], buf_r[i], buf_s2[i] = s, a, r, s2
        buf_d[i] = float(done and env.t < 200)
        size = t + 1
        ret += r
        s = s2
        if done:
            returns.append(ret)
            ret, s = 0.0, env.reset()
        if t >= 300 and t % 2 == 0:
            idx = torch.randint(0, min(size, 10000), (32,), generator=g).numpy()
            bs, ba = torch.from_numpy(buf_s[idx]), torch.from_numpy(buf_a[idx])
            br, bs2, bd = (
                torch.from_numpy(buf_r[idx]),
                torch.from_numpy(buf_s2[idx]),
                torch.from_numpy(buf_d[idx]),
            )
            theta = net(bs).view(-1, 2, n_q)[torch.arange(32), ba]  # (B, N)
            with torch.no_grad():
                nxt = target(bs2).view(-1, 2, n_q)
                a2 = nxt.mean(2).argmax(1)
                tz = br[:, None] + 0.99 * (1 - bd[:, None]) * nxt[torch.arange(32), a2]
            u = tz[:, None, :] - theta[:, :, None]  # (B, N_theta, N_target)
            huber = torch.where(u.abs() <= 1.0, 0.5 * u**2, u.abs() - 0.5)
            loss = ((tau_hat[None, :, None] - (u.detach() < 0).float()).abs() * huber).mean(2).sum(1).mean()
            if bug != "no_zero_grad":  # bug: the zero_grad line dropped
                opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if t % 200 == 0:
            target.load_state_dict(net.state_dict())
        if t % 600 == 599:
            print(f"t {t} mean return (last 10) {np.mean(returns[-10:]) if returns else 0:.1f}")
    hook.close()
    return losses


# ============================================================================= TRADES


def _glyphs_u8(g: torch.Generator, n: int, size: int = 14) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 grey glyphs of four classes (a bar, a cross, a box, a diagonal) at random
    positions and thickness, with noise."""
    y = torch.randint(0, 4, (n,), generator=g)
    img = torch.zeros(n, 1, size, size)
    for i in range(n):
        c = int(y[i])
        r0, c0 = torch.randint(2, size - 10, (2,), generator=g).tolist()
        L = int(torch.randint(6, 9, (1,), generator=g))
        if c == 0:
            img[i, 0, r0 + L // 2, c0 : c0 + L] = 1
        elif c == 1:
            img[i, 0, r0 + L // 2, c0 : c0 + L] = 1
            img[i, 0, r0 : r0 + L, c0 + L // 2] = 1
        elif c == 2:
            img[i, 0, r0, c0 : c0 + L] = img[i, 0, r0 + L - 1, c0 : c0 + L] = 1
            img[i, 0, r0 : r0 + L, c0] = img[i, 0, r0 : r0 + L, c0 + L - 1] = 1
        else:
            for k in range(L):
                img[i, 0, r0 + k, c0 + k] = 1
    img = (img * 150 + 100 * torch.rand(n, 1, size, size, generator=g)).clamp(0, 255)
    return img.to(torch.uint8), y


class _SmallCNN(nn.Module):
    def __init__(self, c_in: int = 1, classes: int = 4) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(c_in, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(32 * 3 * 3, 64), nn.ReLU(), nn.Linear(64, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def trades_adversarial_training(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """TRADES (Zhang et al. 2019) as its reference `trades_loss` writes it: the adversarial
    example from a small random start by 4 steps of signed gradient ascent on
    `KLDivLoss(reduction="sum")` between the model's log-probabilities there and its clean
    probabilities under `model.eval()`, projected on the epsilon ball and clamped to [0, 1],
    then `model.train()`, the loss cross-entropy on clean images plus beta 6 times the batch KL;
    SGD momentum 0.9 at 0.05 with weight decay 2e-4, batch 64, on uint8 glyph images divided by
    255; a clean accuracy per epoch."""
    g = _seed(seed)
    img, y = _glyphs_u8(g, 1800)
    x = img.float() if bug == "inputs_x255" else img.float() / 255.0  # bug: the / 255 dropped
    xtr, ytr, xte, yte = x[:1500], y[:1500], x[1500:], y[1500:]
    model = _SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=2e-4)
    ce = nn.CrossEntropyLoss()
    kl = nn.KLDivLoss(reduction="sum")
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(ce)
    eps, step_size, beta = 0.1, 0.03, 6.0
    losses: list[float] = []
    for epoch in range(epochs):
        order = torch.randperm(len(xtr), generator=g)
        for i in range(0, len(order), 64):
            xb, yb = xtr[order[i : i + 64]], ytr[order[i : i + 64]]
            model.eval()
            x_adv = xb.detach() + 0.001 * torch.randn(xb.shape, generator=g)
            with torch.no_grad():
                p_nat = F.softmax(model(xb), 1)
            for _ in range(4):
                x_adv.requires_grad_()
                loss_kl = kl(F.log_softmax(model(x_adv), 1), p_nat)
                grad = torch.autograd.grad(loss_kl, [x_adv])[0]
                x_adv = x_adv.detach() + step_size * torch.sign(grad.detach())
                x_adv = torch.min(torch.max(x_adv, xb - eps), xb + eps).clamp(0.0, 1.0)
            model.train()
            opt.zero_grad()
            logits = model(xb)
            loss_natural = ce(logits, yb)
            loss_robust = kl(F.log_softmax(model(x_adv.detach()), 1), F.softmax(logits, 1)) / len(xb)
            loss = loss_natural + beta * loss_robust
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        print(f"epoch {epoch} loss {losses[-1]:.4f} clean acc {acc:.3f}")
    hook.close()
    return losses


# ============================================================================= HolE


class _HolE(nn.Module):
    """Holographic embeddings (Nickel et al. 2016): the score of (h, r, t) is
    `r . (h star t)`, the circular correlation of the head and tail computed through the FFT."""

    def __init__(self, n_ent: int, n_rel: int, dim: int = 64) -> None:
        super().__init__()
        self.ent = nn.Embedding(n_ent, dim)
        self.rel = nn.Embedding(n_rel, dim)
        nn.init.uniform_(self.ent.weight, -0.5 / math.sqrt(dim), 0.5 / math.sqrt(dim))
        nn.init.uniform_(self.rel.weight, -0.5 / math.sqrt(dim), 0.5 / math.sqrt(dim))

    def forward(self, h: torch.Tensor, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        eh, et = self.ent(h), self.ent(t)
        corr = torch.fft.irfft(
            torch.conj(torch.fft.rfft(eh, dim=-1)) * torch.fft.rfft(et, dim=-1), n=eh.shape[-1], dim=-1
        )
        return (self.rel(r) * corr).sum(-1)


def hole_negative_sampling_link_prediction(
    path: str, epochs: int = 30, seed: int = 0, bug: str | None = None
) -> list[float]:
    """HolE link prediction trained as its reference code trains it: each training triple
    against corrupted ones (the head or the tail replaced at random, Bernoulli "bern" choice per
    relation from its tails-per-head and heads-per-tail), 4 negatives per positive, the
    logistic loss (`nn.SoftMarginLoss` on the scores with labels +1 / -1), entity embeddings
    re-normalized into the unit ball after each step, AdaGrad 0.1, batches of 256, on a
    synthetic knowledge graph (300 entities in 6 types, 8 relations mapping each type to
    another with a cyclic shift, a second tail for some heads); a raw MRR on held-out triples
    every 10 epochs."""
    g = _seed(seed)
    n_ent, n_rel, n_types = 300, 8, 6
    per = n_ent // n_types
    shift = torch.randint(1, n_types, (n_rel,), generator=g)
    off = torch.randint(0, per, (n_rel,), generator=g)
    triples = []
    for r in range(n_rel):
        for h in range(n_ent):
            ty, k = divmod(h, per)
            tail = ((ty + int(shift[r])) % n_types) * per + (k + int(off[r])) % per
            triples.append((h, r, tail))
            if torch.rand(1, generator=g) < 0.3:  # a second, noisier tail of the right type
                triples.append((h, r, ((ty + int(shift[r])) % n_types) * per + (k + 1) % per))
    tri = torch.tensor(triples)
    tri = tri[torch.randperm(len(tri), generator=g)]
    test, train = tri[:300], tri[300:]
    tph = torch.zeros(n_rel)
    hpt = torch.zeros(n_rel)
    for r in range(n_rel):
        sub = train[train[:, 1] == r]
        tph[r] = len(sub) / len(torch.unique(sub[:, 0]))
        hpt[r] = len(sub) / len(torch.unique(sub[:, 2]))
    p_head = tph / (tph + hpt)
    model = _HolE(n_ent, n_rel)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    if bug == "frozen_by_mistake":  # bug: a line from the pretrained-embedding variant, after the optimizer
        model.ent.weight.requires_grad = False
    loss_fn = nn.SoftMarginLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    neg = 4
    for epoch in range(epochs):
        order = torch.randperm(len(train), generator=g)
        for i in range(0, len(order), 256):
            pos = train[order[i : i + 256]]
            rep = pos.repeat(neg, 1)
            corrupt_head = torch.rand(len(rep), generator=g) < p_head[rep[:, 1]]
            rand_ent = torch.randint(0, n_ent, (len(rep),), generator=g)
            nh = torch.where(corrupt_head, rand_ent, rep[:, 0])
            nt = torch.where(corrupt_head, rep[:, 2], rand_ent)
            scores = model(
                torch.cat([pos[:, 0], nh]), torch.cat([pos[:, 1], rep[:, 1]]), torch.cat([pos[:, 2], nt])
            )
            labels = torch.cat([torch.ones(len(pos)), -torch.ones(len(rep))])
            loss = loss_fn(scores, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                norms = model.ent.weight.norm(dim=1, keepdim=True).clamp(min=1.0)
                model.ent.weight.div_(norms)
            losses.append(loss.item())
        if epoch % 10 == 9:
            with torch.no_grad():
                all_t = torch.arange(n_ent)
                scores = torch.stack([model(h.expand(n_ent), r.expand(n_ent), all_t) for h, r, _ in test])
                rank = (scores > scores.gather(1, test[:, 2:3])).sum(1) + 1
            print(f"epoch {epoch} loss {losses[-1]:.4f} raw MRR {(1.0 / rank.float()).mean().item():.3f}")
    hook.close()
    return losses


# ============================================================================= PointNet++


def _point_clouds(g: torch.Generator, n: int, pts: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Surfaces of four shapes (sphere, cube, cylinder, cone), random scale and rotation about
    z, jitter, centred and scaled into the unit sphere as the ModelNet loaders do."""
    y = torch.randint(0, 4, (n,), generator=g)
    out = torch.zeros(n, pts, 3)
    for i in range(n):
        c = int(y[i])
        u = torch.rand(pts, generator=g) * 2 * math.pi
        v = torch.rand(pts, generator=g)
        if c == 0:
            p = torch.randn(pts, 3, generator=g)
            p = p / p.norm(dim=1, keepdim=True)
        elif c == 1:
            p = torch.rand(pts, 3, generator=g) * 2 - 1
            face = torch.randint(0, 3, (pts,), generator=g)
            p[torch.arange(pts), face] = torch.sign(torch.randn(pts, generator=g))
        elif c == 2:
            p = torch.stack([torch.cos(u), torch.sin(u), v * 2 - 1], 1)
        else:
            p = torch.stack([(1 - v) * torch.cos(u), (1 - v) * torch.sin(u), v * 2 - 1], 1)
        p = p * (0.6 + 0.8 * torch.rand(3, generator=g))
        a = float(torch.rand(1, generator=g)) * 2 * math.pi
        rot = torch.tensor(
            [[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0], [0.0, 0.0, 1.0]]
        )
        p = p @ rot.T + 0.02 * torch.randn(pts, 3, generator=g)
        p = p - p.mean(0)
        out[i] = p / p.norm(dim=1).max()
    return out, y


def _farthest_point_sample(xyz: torch.Tensor, npoint: int) -> torch.Tensor:
    b, n, _ = xyz.shape
    idx = torch.zeros(b, npoint, dtype=torch.long)
    dist = torch.full((b, n), 1e10)
    farthest = torch.zeros(b, dtype=torch.long)
    ar = torch.arange(b)
    for i in range(npoint):
        idx[:, i] = farthest
        centroid = xyz[ar, farthest].unsqueeze(1)
        dist = torch.minimum(dist, ((xyz - centroid) ** 2).sum(-1))
        farthest = dist.argmax(-1)
    return idx


def _ball_query(radius: float, nsample: int, xyz: torch.Tensor, new_xyz: torch.Tensor) -> torch.Tensor:
    b, n, _ = xyz.shape
    sqd = torch.cdist(new_xyz, xyz) ** 2
    group = torch.arange(n).expand(b, new_xyz.shape[1], n).clone()
    group[sqd > radius**2] = n
    group = group.sort(-1)[0][:, :, :nsample]
    first = group[:, :, :1].expand_as(group)
    return torch.where(group == n, first, group)


class _SetAbstraction(nn.Module):
    def __init__(self, npoint: int | None, radius: float, nsample: int, c_in: int, mlp: list[int]) -> None:
        super().__init__()
        self.npoint, self.radius, self.nsample = npoint, radius, nsample
        layers: list[nn.Module] = []
        last = c_in + 3
        for c in mlp:
            layers += [nn.Conv2d(last, c, 1), nn.BatchNorm2d(c), nn.ReLU()]
            last = c
        self.mlp = nn.Sequential(*layers)

    def forward(self, xyz: torch.Tensor, feats: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        b = xyz.shape[0]
        if self.npoint is None:  # group all
            new_xyz = torch.zeros(b, 1, 3)
            grouped = xyz.unsqueeze(1)
            if feats is not None:
                grouped = torch.cat([grouped, feats.unsqueeze(1)], -1)
        else:
            new_xyz = xyz[torch.arange(b)[:, None], _farthest_point_sample(xyz, self.npoint)]
            idx = _ball_query(self.radius, self.nsample, xyz, new_xyz)
            bi = torch.arange(b)[:, None, None]
            grouped = xyz[bi, idx] - new_xyz.unsqueeze(2)
            if feats is not None:
                grouped = torch.cat([grouped, feats[bi, idx]], -1)
        h = self.mlp(grouped.permute(0, 3, 2, 1))  # (B, C, nsample, npoint)
        return new_xyz, h.max(2)[0].transpose(1, 2)


class _PointNet2(nn.Module):
    def __init__(self, classes: int, bug: str | None = None) -> None:
        super().__init__()
        self.sa1 = _SetAbstraction(32, 0.35, 16, 0, [32, 32, 64])
        self.sa2 = _SetAbstraction(None, 0.0, 0, 64, [64, 128])
        head: list[nn.Module] = [
            nn.Linear(128, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.4), nn.Linear(64, classes),
        ]  # fmt: skip
        if bug == "softmax_before_ce":  # bug: class probabilities "for the voting at test time"
            head.append(nn.Softmax(-1))
        self.head = nn.Sequential(*head)

    def forward(self, xyz: torch.Tensor) -> torch.Tensor:
        l1_xyz, l1_f = self.sa1(xyz, None)
        _, l2_f = self.sa2(l1_xyz, l1_f)
        return self.head(l2_f.squeeze(1))


def pointnet2_ssg_point_clouds(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """PointNet++ single-scale grouping classification: farthest point sampling of 32
    centroids, ball query (radius 0.35, 16 neighbours, padded with the first), a shared MLP on
    the relative coordinates max-pooled per group, a group-all abstraction, a BatchNorm / dropout
    0.4 head; random scaling and jitter augmentation, `CrossEntropyLoss`, Adam 1e-3 with weight
    decay 1e-4 and `StepLR(step_size=4, gamma=0.7)`, batch 24, a test accuracy per epoch."""
    g = _seed(seed)
    pts, y = _point_clouds(g, 720)
    ptr, ytr, pte, yte = pts[:600], y[:600], pts[600:], y[600:]
    model = _PointNet2(4, bug)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.7)
    loss_fn = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(ptr), generator=g)
        for i in range(0, len(order), 24):
            b = order[i : i + 24]
            xb = ptr[b] * (0.8 + 0.45 * torch.rand(len(b), 1, 3, generator=g))
            xb = xb + (0.01 * torch.randn(xb.shape, generator=g)).clamp(-0.05, 0.05)
            loss = loss_fn(model(xb), ytr[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        sched.step()
        model.eval()
        with torch.no_grad():
            acc = (model(pte).argmax(1) == yte).float().mean().item()
        print(f"epoch {epoch} loss {losses[-1]:.4f} test acc {acc:.3f}")
    hook.close()
    return losses


# ============================================================================= Shake-Shake


class _ShakeShake(torch.autograd.Function):
    """Forward with one random convex weight per example, backward with another (Gastaldi 2017)."""

    @staticmethod
    def forward(ctx: Any, x1: torch.Tensor, x2: torch.Tensor, training: bool) -> torch.Tensor:
        shape = (x1.shape[0], 1, 1, 1)
        alpha = torch.rand(shape) if training else torch.full(shape, 0.5)
        return alpha * x1 + (1 - alpha) * x2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        beta = torch.rand(grad.shape[0], 1, 1, 1)
        return beta * grad, (1 - beta) * grad, None


class _ShakeBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()

        def branch() -> nn.Sequential:
            return nn.Sequential(
                nn.ReLU(), nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out),
                nn.ReLU(), nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out),
            )  # fmt: skip

        self.b1, self.b2 = branch(), branch()
        self.short = (
            nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
            if (c_in != c_out or stride != 1)
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.short(x) + _ShakeShake.apply(self.b1(x), self.b2(x), self.training)


def _shapes_rgb(g: torch.Generator, n: int, size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Float RGB images in [0, 1] of four classes: a disc, a square, a horizontal and a vertical
    stripe pattern, random colours over a random background."""
    y = torch.randint(0, 4, (n,), generator=g)
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    imgs = torch.zeros(n, 3, size, size)
    for i in range(n):
        c = int(y[i])
        cy, cx = (torch.rand(2, generator=g) * (size - 8) + 4).tolist()
        r = float(torch.rand(1, generator=g)) * 2 + 3
        if c == 0:
            m = ((yy - cy) ** 2 + (xx - cx) ** 2) < r**2
        elif c == 1:
            m = ((yy - cy).abs() < r) & ((xx - cx).abs() < r)
        elif c == 2:
            m = (yy.long() // 2) % 2 == 0
        else:
            m = (xx.long() // 2) % 2 == 0
        fg, bg = torch.rand(3, generator=g), torch.rand(3, generator=g) * 0.5
        imgs[i] = torch.where(m, fg[:, None, None], bg[:, None, None])
    return (imgs + 0.08 * torch.randn(imgs.shape, generator=g)).clamp(0, 1), y


def shake_shake_resnet(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """A Shake-Shake ResNet (2 x 16d, "Shake-Shake-Image"): two residual branches per block
    mixed by a per-image random weight forward and an independent one backward through a custom
    `autograd.Function`, 0.5 at test time; SGD Nesterov momentum 0.9 at 0.1 with weight decay
    1e-4, cosine annealing per step without restarts, batch 64, RGB shape images normalized per
    channel, random flips; a test pass per epoch under `model.eval()`."""
    g = _seed(seed)
    x, y = _shapes_rgb(g, 1400)
    mean, std = x[:1200].mean((0, 2, 3), keepdim=True), x[:1200].std((0, 2, 3), keepdim=True)
    x = (x - mean) / std
    xtr, ytr, xte, yte = x[:1200], y[:1200], x[1200:], y[1200:]
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
        _ShakeBlock(16, 16, 1), _ShakeBlock(16, 32, 2), _ShakeBlock(32, 32, 1),
        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 4),
    )  # fmt: skip
    steps = epochs * math.ceil(1200 / 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    loss_fn = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    model.train()
    for epoch in range(epochs):
        if bug != "train_in_eval_mode":  # bug: `model.train()` never called again after the test pass
            model.train()
        order = torch.randperm(len(xtr), generator=g)
        for i in range(0, len(order), 64):
            b = order[i : i + 64]
            xb = xtr[b]
            flip = torch.rand(len(b), generator=g) < 0.5
            xb = torch.where(flip[:, None, None, None], xb.flip(3), xb)
            loss = loss_fn(model(xb), ytr[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        print(f"epoch {epoch} loss {losses[-1]:.4f} test acc {acc:.3f}")
    hook.close()
    return losses


# ============================================================================= deep kernel learning


class _DKL(nn.Module):
    """Deep kernel learning (Wilson et al. 2016): an MLP feature extractor under an RBF kernel
    with a scale, fitted with the exact GP marginal likelihood."""

    def __init__(self, d_in: int, bug: str | None = None) -> None:
        super().__init__()
        if bug == "deep_sigmoid":  # bug: a "deeper" extractor of eight sigmoid layers
            layers: list[nn.Module] = [nn.Linear(d_in, 64), nn.Sigmoid()]
            for _ in range(7):
                layers += [nn.Linear(64, 64), nn.Sigmoid()]
            layers.append(nn.Linear(64, 2))
            self.features = nn.Sequential(*layers)
        else:
            self.features = nn.Sequential(
                nn.Linear(d_in, 100), nn.ReLU(), nn.Linear(100, 50), nn.ReLU(), nn.Linear(50, 2)
            )
        self.raw_lengthscale = nn.Parameter(torch.zeros(()))
        self.raw_outputscale = nn.Parameter(torch.zeros(()))
        self.raw_noise = nn.Parameter(torch.zeros(()))

    def kernel(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ls = F.softplus(self.raw_lengthscale)
        return F.softplus(self.raw_outputscale) * torch.exp(-0.5 * torch.cdist(a / ls, b / ls) ** 2)

    def neg_mll(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = self.features(x)
        z = (z - z.mean(0)) / (z.std(0) + 1e-6)
        k = self.kernel(z, z) + (F.softplus(self.raw_noise) + 1e-4) * torch.eye(len(x))
        chol = torch.linalg.cholesky(k)
        alpha = torch.cholesky_solve(y[:, None], chol)
        nmll = 0.5 * (y[:, None] * alpha).sum() + torch.log(torch.diagonal(chol)).sum()
        return nmll / len(x) + 0.5 * math.log(2 * math.pi)


def deep_kernel_learning_gp(
    path: str, steps: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Deep kernel learning as the GPyTorch tutorial trains it: an exact GP regression on 400
    points of a 6-D function whose structure lives in a 2-D projection, the features of a
    100-50-2 MLP (scaled per dimension), an RBF kernel with an output scale and a Gaussian
    likelihood (softplus-constrained hyperparameters), full batch, the negative exact marginal
    log-likelihood per point through a Cholesky factorization, Adam 0.01 on every parameter."""
    g = _seed(seed)
    n, d = 400, 6
    x = torch.rand(n, d, generator=g) * 2 - 1
    proj = torch.randn(d, 2, generator=g)
    z = x @ proj
    y = torch.sin(2 * z[:, 0]) * torch.cos(z[:, 1]) + 0.3 * z[:, 1] + 0.05 * torch.randn(n, generator=g)
    y = (y - y.mean()) / y.std()
    model = _DKL(d, bug)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for step in range(steps):
        loss = model.neg_mll(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"iter {step} loss {loss.item():.4f} noise {F.softplus(model.raw_noise).item():.4f}")
    hook.close()
    return losses


# ============================================================================= TS2Vec


class _DilatedConvEncoder(nn.Module):
    def __init__(self, c_in: int, hidden: int, out: int, depth: int = 4) -> None:
        super().__init__()
        self.input_fc = nn.Linear(c_in, hidden)
        self.blocks = nn.ModuleList()
        for i in range(depth):
            self.blocks.append(
                nn.ModuleList(
                    [
                        nn.Conv1d(hidden, hidden, 3, padding=2**i, dilation=2**i),
                        nn.Conv1d(hidden, hidden, 3, padding=2**i, dilation=2**i),
                    ]
                )
            )
        self.out = nn.Conv1d(hidden, out, 1)
        self.repr_dropout = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        h = self.input_fc(x)  # (B, T, H)
        if mask is not None:  # timestamp masking on the projected input
            h = h * mask[:, :, None]
        h = h.transpose(1, 2)
        for c1, c2 in self.blocks:
            h = h + c2(F.gelu(c1(F.gelu(h))))
        return self.repr_dropout(self.out(h)).transpose(1, 2)


def _instance_contrastive(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    b, t = z1.shape[:2]
    if b == 1:
        return z1.new_tensor(0.0)
    z = torch.cat([z1, z2], 0).transpose(0, 1)  # T x 2B x C
    sim = z @ z.transpose(1, 2)
    logits = torch.tril(sim, -1)[:, :, :-1] + torch.triu(sim, 1)[:, :, 1:]
    logits = -F.log_softmax(logits, -1)
    i = torch.arange(b)
    return (logits[:, i, b + i - 1].mean() + logits[:, b + i, i].mean()) / 2


def _temporal_contrastive(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    b, t = z1.shape[:2]
    if t == 1:
        return z1.new_tensor(0.0)
    z = torch.cat([z1, z2], 1)  # B x 2T x C
    sim = z @ z.transpose(1, 2)
    logits = torch.tril(sim, -1)[:, :, :-1] + torch.triu(sim, 1)[:, :, 1:]
    logits = -F.log_softmax(logits, -1)
    i = torch.arange(t)
    return (logits[:, i, t + i - 1].mean() + logits[:, t + i, i].mean()) / 2


def _hierarchical_contrastive(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    loss = z1.new_tensor(0.0)
    d = 0
    while z1.size(1) > 1:
        loss = loss + 0.5 * _instance_contrastive(z1, z2) + 0.5 * _temporal_contrastive(z1, z2)
        d += 1
        z1 = F.max_pool1d(z1.transpose(1, 2), 2).transpose(1, 2)
        z2 = F.max_pool1d(z2.transpose(1, 2), 2).transpose(1, 2)
    if z1.size(1) == 1:
        loss = loss + 0.5 * _instance_contrastive(z1, z2)
        d += 1
    return loss / d


def ts2vec_hierarchical_contrastive(path: str, iters: int = 200, seed: int = 0) -> list[float]:
    """TS2Vec (Yue et al. 2022) as its `fit` loop trains it: two random overlapping crops of each
    series, timestamp masking (Bernoulli 0.5) on the projected inputs, a dilated residual
    convolution encoder (GELU, dilations 1 to 8, representation dropout 0.1), the hierarchical
    contrastive loss (instance-wise and temporal contrast at every scale of a max-pooling
    pyramid), AdamW 1e-3, batch 8 of 3-channel series of 96 steps with regime changes; then a
    ridge probe of pooled representations on the regime label."""
    g = _seed(seed)
    n, t_len = 240, 96
    tt = torch.arange(t_len).float()
    label = torch.randint(0, 3, (n,), generator=g)
    freq = torch.tensor([0.05, 0.12, 0.25])[label][:, None] * (1 + 0.2 * torch.rand(n, 1, generator=g))
    phase = torch.rand(n, 1, generator=g) * 6.28
    base = torch.sin(2 * math.pi * freq * tt + phase)
    series = torch.stack(
        [
            base,
            torch.sign(base) * 0.5 + 0.1 * tt / t_len,
            torch.cumsum(0.1 * torch.randn(n, t_len, generator=g), 1),
        ],
        -1,
    ) + 0.1 * torch.randn(n, t_len, 3, generator=g)
    series = (series - series.mean((0, 1))) / series.std((0, 1))
    model = _DilatedConvEncoder(3, 32, 64)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for _ in range(iters):
        x = series[torch.randint(0, n, (8,), generator=g)]
        crop_l = int(torch.randint(2, t_len + 1, (1,), generator=g))
        crop_left = int(torch.randint(0, t_len - crop_l + 1, (1,), generator=g))
        crop_right = crop_left + crop_l
        crop_eleft = int(torch.randint(0, crop_left + 1, (1,), generator=g))
        crop_eright = int(torch.randint(crop_right, t_len + 1, (1,), generator=g))
        m1 = (torch.rand(8, crop_right - crop_eleft, generator=g) < 0.5).float()
        m2 = (torch.rand(8, crop_eright - crop_left, generator=g) < 0.5).float()
        out1 = model(x[:, crop_eleft:crop_right], m1)[:, -crop_l:]
        out2 = model(x[:, crop_left:crop_eright], m2)[:, :crop_l]
        loss = _hierarchical_contrastive(out1, out2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        rep = model(series, None).max(1)[0]
    onehot = F.one_hot(label, 3).float()
    w = torch.linalg.solve(rep[:200].T @ rep[:200] + torch.eye(64), rep[:200].T @ onehot[:200])
    acc = ((rep[200:] @ w).argmax(1) == label[200:]).float().mean().item()
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}, ridge probe acc {acc:.3f}")
    hook.close()
    return losses


# ============================================================================= unlikelihood


class _GRULM(nn.Module):
    def __init__(self, vocab: int, dim: int = 64) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, 128, batch_first=True)
        self.out = nn.Linear(128, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.rnn(self.emb(x))[0])


def unlikelihood_token_level_lm(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """Token-level unlikelihood training (Welleck et al. 2020) of a GRU language model: the
    maximum-likelihood loss plus alpha 1.0 times `-log(clamp(1 - p(c), min=1e-5))` summed over
    the negative candidates (the tokens of the previous context that are not the target), as the
    reference `CandidatePenaltyCrossEntropyCriterion` builds them, normalized by the number of
    target tokens; Adam 1e-3, clipping at 1.0, batches of 32 windows of 48 tokens from a
    repetition-prone Markov source."""
    g = _seed(seed)
    vocab = 50
    trans = torch.softmax(torch.randn(vocab, vocab, generator=g) * 2.5, -1)
    n_seq, length = 400, 49
    seqs = torch.zeros(n_seq, length, dtype=torch.long)
    seqs[:, 0] = torch.randint(0, vocab, (n_seq,), generator=g)
    for t in range(1, length):
        seqs[:, t] = torch.multinomial(trans[seqs[:, t - 1]], 1, generator=g).squeeze(1)
    model = _GRULM(vocab)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for step in range(steps):
        batch = seqs[torch.randint(0, n_seq, (32,), generator=g)]
        inp, target = batch[:, :-1], batch[:, 1:]
        logits = model(inp)
        lprobs = F.log_softmax(logits, -1)
        mle = F.nll_loss(lprobs.reshape(-1, vocab), target.reshape(-1), reduction="sum")
        t_len = target.shape[1]
        ctx = target.unsqueeze(1).expand(-1, t_len, t_len)
        ctx = torch.where(
            torch.ones(t_len, t_len, dtype=torch.bool).tril(-1), ctx, torch.full_like(ctx, vocab)
        )
        ctx = torch.where(ctx == target.unsqueeze(2), torch.full_like(ctx, vocab), ctx)
        negative = torch.zeros(32, t_len, vocab + 1).scatter_(2, ctx, 1.0)[:, :, :vocab]
        one_minus = torch.clamp(1.0 - lprobs.exp(), min=1e-5)
        custom = -(torch.log(one_minus) * negative).sum()
        loss = (mle + 1.0 * custom) / target.numel()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f} mle {mle.item() / target.numel():.4f}")
    hook.close()
    return losses


# ============================================================================= Lightning: ESMM


def _impressions(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Impression logs: user, item, item category and hour ids; a click with a logistic model of
    user and item affinities, a conversion after a click with a model that shares part of them."""
    users, items, cats, hours = 200, 150, 12, 24
    u = torch.randint(0, users, (n,), generator=g)
    i = torch.randint(0, items, (n,), generator=g)
    item_cat = torch.randint(0, cats, (items,), generator=g)
    h = torch.randint(0, hours, (n,), generator=g)
    eu, ei = torch.randn(users, 4, generator=g), torch.randn(items, 4, generator=g)
    hour_bias = 0.5 * torch.sin(torch.arange(hours) / 24 * 2 * math.pi)
    ctr_logit = (eu[u] * ei[i]).sum(1) - 1.5 + hour_bias[h]
    click = (torch.rand(n, generator=g) < torch.sigmoid(ctr_logit)).float()
    cvr_logit = (eu[u, :2] * ei[i, :2]).sum(1) + 0.5 * ei[i, 3] - 0.5
    conv = click * (torch.rand(n, generator=g) < torch.sigmoid(cvr_logit)).float()
    return torch.stack([u, i, item_cat[i], h], 1), click, conv


def lit_esmm_entire_space_multitask(path: str, max_epochs: int = 6, seed: int = 0) -> list[float]:
    """The Entire Space Multi-task Model (Ma et al. 2018) as a `LightningModule`: shared field
    embeddings (user, item, category, hour), a CTR tower and a CVR tower, pCTCVR = pCTR x pCVR,
    the loss `BCELoss(pCTR, click) + BCELoss(pCTCVR, click and conversion)` over every
    impression (no sample selection bias), Adam 1e-3 with weight decay 1e-6 from
    `configure_optimizers`, batch 256, a validation step logging both losses;
    `mldbg.lightning.DebuggerCallback` in the `Trainer`."""
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    feats, click, conv = _impressions(g, 12000)
    cards = [200, 150, 12, 24]

    class ESMM(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.embs = nn.ModuleList([nn.Embedding(c, 8) for c in cards])

            def tower() -> nn.Sequential:
                return nn.Sequential(
                    nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1)
                )

            self.ctr, self.cvr = tower(), tower()
            self.bce = nn.BCELoss()

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            e = torch.cat([emb(x[:, k]) for k, emb in enumerate(self.embs)], 1)
            p_ctr = torch.sigmoid(self.ctr(e)).squeeze(1)
            p_cvr = torch.sigmoid(self.cvr(e)).squeeze(1)
            return p_ctr, p_ctr * p_cvr

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, yc, yv = batch
            p_ctr, p_ctcvr = self(x)
            loss = self.bce(p_ctr, yc) + self.bce(p_ctcvr, yv)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, yc, yv = batch
            p_ctr, p_ctcvr = self(x)
            self.log("val_ctr_loss", self.bce(p_ctr, yc))
            self.log("val_ctcvr_loss", self.bce(p_ctcvr, yv))

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.Adam(self.parameters(), lr=1e-3, weight_decay=1e-6)

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    train = TensorDataset(feats[:10000], click[:10000], conv[:10000])
    val = TensorDataset(feats[10000:], click[10000:], conv[10000:])
    history = LossHistory()
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=path, logger=False, max_epochs=max_epochs, callbacks=[DebuggerCallback(path), history],
    )  # fmt: skip
    trainer.fit(
        ESMM(), DataLoader(train, batch_size=256, shuffle=True, generator=g), DataLoader(val, batch_size=1000)
    )
    print({k: round(float(v), 4) for k, v in trainer.callback_metrics.items()})
    return history.losses


# ============================================================================= HF Trainer: Nystromformer


class _Examples(Dataset):
    """A list of feature dicts, as `datasets.Dataset` hands them to the Trainer."""

    def __init__(self, **columns: Any) -> None:
        self.columns = columns
        self.n = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: v[i] for k, v in self.columns.items()}


def hf_nystromformer_long_sequence_classification(path: str, seed: int = 0) -> list[float]:
    """Long-sequence classification with the Hugging Face `Trainer` on a tiny random
    `NystromformerForSequenceClassification` (Nystrom-approximated self-attention with 16
    landmarks over 128 tokens, the depthwise convolution skip on the values; 2 layers, hidden 64,
    no download): the topic of 128-token documents, a quarter of whose tokens come from a
    topic's own seven words amid uniform filler; lr 5e-4, linear decay after 10 warm-up steps
    (10 %), batch 32, 4 epochs, weight decay
    0.01, an evaluation per epoch."""
    from transformers import (
        NystromformerConfig,
        NystromformerForSequenceClassification,
        PrinterCallback,
        Trainer,
        TrainingArguments,
    )

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    n, length, vocab = 1000, 128, 40
    labels = torch.randint(0, 2, (n,), generator=g)
    filler = torch.randint(5, vocab, (n, length), generator=g)
    topical = torch.where(labels[:, None] == 0, 5, 12) + torch.randint(0, 7, (n, length), generator=g)
    ids = torch.where(torch.rand(n, length, generator=g) < 0.25, topical, filler)
    ids[:, 0] = 1
    config = NystromformerConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=length + 2, segment_means_seq_len=length, num_landmarks=16, conv_kernel_size=33,
        num_labels=2, pad_token_id=0,
    )  # fmt: skip
    model = NystromformerForSequenceClassification(config)
    args = TrainingArguments(
        output_dir=os.path.join(path, "trainer"), logging_steps=1, report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=seed, save_strategy="no", eval_strategy="epoch", learning_rate=5e-4,
        lr_scheduler_type="linear", warmup_steps=10, per_device_train_batch_size=32, num_train_epochs=4,
        weight_decay=0.01,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args,
        train_dataset=_Examples(input_ids=ids[:800], labels=labels[:800]),
        eval_dataset=_Examples(input_ids=ids[800:], labels=labels[800:]),
        callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(args.output_dir, ignore_errors=True)
    print("eval losses", [round(e["eval_loss"], 4) for e in trainer.state.log_history if "eval_loss" in e])
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


# ============================================================================= Keras: neural decision forest


def keras_neural_decision_forest(path: str, seed: int = 0) -> list[float]:
    """The keras.io "Classification with Neural Decision Forests" example in Keras 3: a forest
    of 10 soft decision trees of depth 5, each on a random half of the features (a fixed mask),
    a `Dense` of sigmoid routing probabilities per internal node, leaf class distributions `pi`
    as trainable weights through a softmax, the routing products computed level by level, the
    forest averaging its trees' class probabilities; `SparseCategoricalCrossentropy` on those
    probabilities, Adam 0.01, batch 128, 6 epochs, on standardized tabular rows of 3 classes."""
    import keras
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 7)
    n, d, classes = 4000, 12, 3
    x = rng.normal(size=(n, d)).astype("float32")
    score = np.stack(
        [x[:, 0] + x[:, 1] * x[:, 2], np.sin(2 * x[:, 3]) + x[:, 4], 0.8 * np.abs(x[:, 5]) - x[:, 0]], 1
    )
    y = (score + rng.normal(0, 0.3, score.shape)).argmax(1)

    class NeuralDecisionTree(keras.Model):
        def __init__(
            self, depth: int, num_features: int, used_features_rate: float, num_classes: int
        ) -> None:
            super().__init__()
            self.depth = depth
            self.num_leaves = 2**depth
            self.num_classes = num_classes
            num_used = int(num_features * used_features_rate)
            one_hot = np.eye(num_features)
            sampled = rng.choice(np.arange(num_features), num_used, replace=False)
            self.used_features_mask = ops.convert_to_tensor(one_hot[sampled], dtype="float32")
            self.pi = self.add_weight(
                initializer="random_normal", shape=[self.num_leaves, self.num_classes], dtype="float32",
                trainable=True,
            )  # fmt: skip
            self.decision_fn = layers.Dense(units=self.num_leaves, activation="sigmoid", name="decision")

        def call(self, features: Any) -> Any:
            batch_size = ops.shape(features)[0]
            features = ops.matmul(features, ops.transpose(self.used_features_mask))
            decisions = ops.expand_dims(self.decision_fn(features), axis=2)
            decisions = layers.concatenate([decisions, 1 - decisions], axis=2)
            mu = ops.ones([batch_size, 1, 1])
            begin_idx, end_idx = 1, 2
            for level in range(self.depth):
                mu = ops.reshape(mu, [batch_size, -1, 1])
                mu = ops.tile(mu, (1, 1, 2))
                level_decisions = decisions[:, begin_idx:end_idx, :]
                mu = mu * level_decisions
                begin_idx = end_idx
                end_idx = begin_idx + 2 ** (level + 1)
            mu = ops.reshape(mu, [batch_size, self.num_leaves])
            probabilities = keras.activations.softmax(self.pi)
            return ops.matmul(mu, probabilities)

    class NeuralDecisionForest(keras.Model):
        def __init__(
            self, num_trees: int, depth: int, num_features: int, rate: float, num_classes: int
        ) -> None:
            super().__init__()
            self.ensemble = [
                NeuralDecisionTree(depth, num_features, rate, num_classes) for _ in range(num_trees)
            ]

        def call(self, inputs: Any) -> Any:
            outputs = self.ensemble[0](inputs)
            for tree in self.ensemble[1:]:
                outputs = outputs + tree(inputs)
            return outputs / len(self.ensemble)

    inputs = keras.Input((d,))
    features = layers.BatchNormalization()(inputs)
    outputs = NeuralDecisionForest(10, 5, d, 0.5, classes)(features)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )

    class BatchLosses(keras.callbacks.Callback):
        """Each batch's own loss from Keras's running epoch mean."""

        def __init__(self) -> None:
            super().__init__()
            self.losses: list[float] = []
            self.prev = 0.0

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.prev = 0.0

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            mean = float(logs["loss"])
            self.losses.append((batch + 1) * mean - batch * self.prev)
            self.prev = mean

    history = BatchLosses()
    fit = model.fit(
        x[:3200], y[:3200], batch_size=128, epochs=6, validation_data=(x[3200:], y[3200:]), verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    print("val acc", [round(v, 4) for v in fit.history["val_sparse_categorical_accuracy"]])
    return history.losses


_sage = healthy(
    "graphsage_sampled_fanout_minibatch_sbm", "GraphSAGE neighbour sampling", graphsage_neighbor_sampling
)
_maf = healthy(
    "maf_made_reversed_orders_4d_density", "masked autoregressive flow", maf_masked_autoregressive_flow
)
_mmoe = healthy("mmoe_multigate_experts_synthetic_tasks", "MMoE multi-task", mmoe_synthetic_task_correlation)
_kalman = healthy(
    "kalman_filter_mle_state_space", "Kalman-filter likelihood state-space model", kalman_filter_mle_ssm
)
_qrdqn = healthy("qr_dqn_quantile_huber_cartpole", "QR-DQN distributional RL", qr_dqn_quantile_huber_cartpole)
_trades = healthy(
    "trades_kl_adversarial_training_glyphs", "TRADES adversarial training", trades_adversarial_training
)
_hole = healthy(
    "hole_circular_correlation_negative_sampling",
    "HolE knowledge-graph embeddings",
    hole_negative_sampling_link_prediction,
)
_pn2 = healthy("pointnet2_ssg_fps_ball_query", "PointNet++ set abstraction", pointnet2_ssg_point_clouds)
_shake = healthy("shake_shake_resnet_custom_backward", "Shake-Shake regularization", shake_shake_resnet)
_dkl = healthy("deep_kernel_learning_exact_gp", "deep kernel learning", deep_kernel_learning_gp)

PIPELINES: list[Any] = [
    _sage,
    _maf,
    _mmoe,
    _kalman,
    healthy("svgd_bayesian_nn_particles_rbf", "Stein variational gradient descent", svgd_bayesian_nn_regression),
    _qrdqn,
    _trades,
    _hole,
    _pn2,
    _shake,
    _dkl,
    healthy(
        "ts2vec_hierarchical_contrastive_series", "TS2Vec contrastive time series", ts2vec_hierarchical_contrastive
    ),
    healthy("unlikelihood_token_level_gru_lm", "unlikelihood training", unlikelihood_token_level_lm),
    buggy(_maf, "lr_x100"),
    buggy(_qrdqn, "no_zero_grad"),
    buggy(_mmoe, "shuffled_labels"),
    buggy(_trades, "inputs_x255"),
    buggy(_pn2, "softmax_before_ce"),
    buggy(_sage, "dead_relu_init"),
    buggy(_dkl, "deep_sigmoid"),
    buggy(_hole, "frozen_by_mistake"),
    buggy(_kalman, "log_zero_nan"),
    buggy(_shake, "train_in_eval_mode"),
]  # fmt: skip

if installed("lightning"):
    PIPELINES += [
        healthy(
            "lightning_esmm_ctr_ctcvr_multitask", "Lightning ESMM multi-task", lit_esmm_entire_space_multitask
        )
    ]

if installed("transformers"):
    PIPELINES += [
        healthy(
            "hf_nystromformer_landmark_attention_topics",
            "HF Trainer Nystromformer classifier",
            hf_nystromformer_long_sequence_classification,
        )
    ]

if installed("keras", "tensorflow"):
    PIPELINES += [
        healthy(
            "keras_neural_decision_forest_soft_trees",
            "Keras neural decision forest",
            keras_neural_decision_forest,
        )
    ]
