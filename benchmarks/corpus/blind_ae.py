"""The twenty-fourth blind held-out set (issue 26), part AE: training loops as people write them
for their own research code and course assignments rather than library tutorials: models
trained through a method other than `forward` (`model.loss(x, y)`, `model.log_prob(x)`,
`model.elbo(x, y)`, `model.neg_log_likelihood(x, tags)`), parameters held as bare
`nn.Parameter` tensors with no submodules, multi-stage scripts (pretraining then fine-tuning
with a fresh optimizer and schedule, prune-rewind-retrain rounds), validation loops and early
stopping written by hand, custom samplers, a curriculum by hand, mixed precision by hand; a few
through Lightning, the Hugging Face `Trainer` and Keras with their one callback. Each is shrunk
to a tiny model on data generated in-process, fixed seeds, one CPU thread.

Plain PyTorch: the CS231n assignment-2 `FullyConnectedNet` (weights and biases as bare
parameters in a `ParameterDict`, `model.loss(X, y)` returning the softmax loss plus the L2
penalty, SGD momentum with a per-epoch learning-rate decay, `check_accuracy` on a subsample);
probabilistic PCA of 64-D data fitted by maximum likelihood through `model.log_prob(x)` written
by hand (covariance `W W^T + sigma^2 I`, its Cholesky factor for the log-determinant and the
Mahalanobis term, bare parameters); a sparse variational
Gaussian process (Hensman et al. 2013, whitened inducing values, 20 inducing inputs, a minibatch
`model.elbo(x, y, n)` with the KL term, Adam); semi-supervised sequence learning in two stages
(Dai and Le 2015: a GRU pretrained as a next-token language model on unlabeled sequences, then
fine-tuned as a classifier on a small labeled set with a fresh AdamW and a warm-up/linear-decay
`LambdaLR`); human-activity recognition from accelerometer windows with a 1-D CNN (batch norm,
dropout), a hand-written validation pass each epoch, early stopping on the validation loss with
patience 3 and the best `state_dict` restored; a GRU classifier over variable-length sequences
fed by a hand-written length-bucketing `BatchSampler` (sorted buckets, shuffled batch order,
`pack_padded_sequence`); a pointer network (Vinyals et al. 2015) learning to sort numbers with
a hand-written length curriculum (5, then 7, then 10 elements) and masked pointer logits to
cross-entropy; mixed precision by hand on a small CNN (an fp16 copy of the model, fp32 master
weights in the optimizer, dynamic loss scaling that skips overflowing steps and halves the
scale, doubling it after 100 clean steps) on uint8 glyphs; a CP (CANDECOMP/PARAFAC) tensor
completion with three bare factor matrices and `model.loss(idx, vals)` over observed entries; a
mixture density network (Bishop 1994) on the inverse of `x = y + 0.3 sin(2 pi y)`, its
`model.log_prob(x, y)` a log-sum-exp over five Gaussian components; a BiLSTM-CRF tagger in the
shape of the PyTorch tutorial (`model.neg_log_likelihood(sentence, tags)`, a batched forward
algorithm and gold-path score, the transition matrix a bare parameter) on BIO spans; NADE
(Larochelle and Murray 2011) on binary 8x8 images, bare parameters `W, V, b, c`, a vectorized
`model.log_prob(x)` by cumulative sums; the lottery-ticket procedure (Frankle and Carbin 2019:
train, prune the 20 % smallest weights of each layer, rewind the survivors to their initial
values, retrain with a fresh optimizer, three rounds, the masks applied after every step).

Through tools: Lightning (`mldbg.lightning.DebuggerCallback`): Barlow Twins on tabular rows
(feature masking and noise as the two views, a batch-normalized projector, the
cross-correlation loss with lambda 5e-3 from a `barlow_loss` method of the module). Hugging
Face `Trainer` (`mldbg.transformers.DebuggerCallback`): a `Trainer` subclass overriding
`_get_train_sampler` with a class-balancing `WeightedRandomSampler` for a tiny random
`FNetForSequenceClassification` on imbalanced token documents. Keras 3 (`mldbg.keras.Hook`):
an ArcFace head (additive angular margin 0.5, scale 16) written as a layer with its own
`add_weight`, the labels fed as a second input, on embeddings of 8 identities.

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the CP factors' Adam at 1.0 typed for 1e-2 (lr_x100), the fine-tuning stage of the
two-stage GRU written without `optimizer.zero_grad()` (the pretraining stage has it)
(no_zero_grad), the bucketed sequences sorted by length in a preprocessing step that left the
labels in their original order (shuffled_labels), the mixed-precision glyphs cast to float
without the division by 255 (inputs_x255), the pointer network returning the softmax over
positions, as the paper's equation writes it, to `CrossEntropyLoss` (softmax_before_ce), the
lottery-ticket MLP under an init helper with std 0.01 weights and biases of -0.5 "to start
sparse" (dead_relu_init), the CS231n net given eight hidden layers of sigmoid units
(deep_sigmoid), the BiLSTM-CRF's embeddings and LSTM frozen by a line left from a
pretrained-embedding variant after the optimizer was built (frozen_by_mistake), the PPCA
log-density written as the formula reads, `torch.log(torch.det(C))` and `torch.inverse(C)`, so
that as the noise variance shrinks the determinant of the 64x64 covariance underflows towards 0
in float32, the log's gradient overflows and the parameters turn NaN (log_zero_nan), the
activity CNN put in
training mode once before the epoch loop, so after the first hand-written validation pass it
trains in eval mode (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND23`.
"""

from __future__ import annotations

import copy
import math
import os
import random
import shutil
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.utils.data import DataLoader, Dataset, Sampler, TensorDataset

from mldbg.torch import Hook

from . import BLIND23, buggy, healthy, installed

SPLIT = BLIND23

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 2301)


def _blobs(g: torch.Generator, n: int, d: int, k: int, spread: float = 1.0) -> tuple[torch.Tensor, ...]:
    """`k` classes in `d` dimensions: two prototypes per class, a fixed random nonlinear warp,
    standardized."""
    y = torch.randint(0, k, (n,), generator=g)
    protos = torch.randn(2 * k, d, generator=g) * spread
    which = 2 * y + torch.randint(0, 2, (n,), generator=g)
    x = protos[which] + torch.randn(n, d, generator=g)
    mix = torch.randn(d, d, generator=g) / math.sqrt(d)
    x = x + 0.5 * torch.tanh(x @ mix)
    return (x - x.mean(0)) / x.std(0), y


# ============================================================================= CS231n FullyConnectedNet


class _FullyConnectedNet(nn.Module):
    """The CS231n assignment's fully-connected net with bare parameters `W1, b1, ...`; `loss(X,
    y)` runs the forward pass itself and returns the softmax loss plus `0.5 * reg * sum W^2`."""

    def __init__(
        self, hidden_dims: list[int], input_dim: int, num_classes: int, weight_scale: float, reg: float,
        activation: str = "relu",
    ) -> None:  # fmt: skip
        super().__init__()
        self.reg = reg
        self.activation = activation
        self.num_layers = len(hidden_dims) + 1
        dims = [input_dim, *hidden_dims, num_classes]
        self.params = nn.ParameterDict()
        for i in range(self.num_layers):
            self.params[f"W{i + 1}"] = nn.Parameter(weight_scale * torch.randn(dims[i], dims[i + 1]))
            self.params[f"b{i + 1}"] = nn.Parameter(torch.zeros(dims[i + 1]))

    def scores(self, X: torch.Tensor) -> torch.Tensor:  # noqa: N803
        h = X
        for i in range(1, self.num_layers):
            h = h @ self.params[f"W{i}"] + self.params[f"b{i}"]
            h = torch.sigmoid(h) if self.activation == "sigmoid" else torch.clamp(h, min=0)
        return h @ self.params[f"W{self.num_layers}"] + self.params[f"b{self.num_layers}"]

    def loss(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # noqa: N803
        scores = self.scores(X)
        shifted = scores - scores.max(1, keepdim=True).values
        log_probs = shifted - shifted.exp().sum(1, keepdim=True).log()
        data_loss = -log_probs[torch.arange(len(y)), y].mean()
        reg_loss = sum((self.params[f"W{i + 1}"] ** 2).sum() for i in range(self.num_layers))
        return data_loss + 0.5 * self.reg * reg_loss


def cs231n_fully_connected_net(
    path: str, epochs: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The CS231n assignment-2 solver loop on its `FullyConnectedNet`: two hidden layers of 100
    ReLU units as bare parameters (weight scale 5e-2, L2 reg 1e-3 inside `model.loss`), SGD
    momentum 0.9 at 1e-2 with `lr_decay` 0.95 applied by hand after each epoch, batches of 100,
    and `check_accuracy` on 500 training rows and on the validation set after every epoch; on
    64-feature rows of 8 classes."""
    g = _seed(seed)
    x, y = _blobs(g, 3000, 64, 8, spread=0.6)
    xtr, ytr, xva, yva = x[:2500], y[:2500], x[2500:], y[2500:]
    if bug == "deep_sigmoid":  # bug: "deeper" as eight layers of sigmoid units
        model = _FullyConnectedNet([100] * 8, 64, 8, 5e-2, 1e-3, activation="sigmoid")
    else:
        model = _FullyConnectedNet([100, 100], 64, 8, 5e-2, 1e-3)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    hook = Hook(path)
    hook.register_module(model)

    def check_accuracy(X: torch.Tensor, y: torch.Tensor) -> float:  # noqa: N803
        with torch.no_grad():
            return (model.scores(X).argmax(1) == y).float().mean().item()

    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(len(xtr), generator=g)
        for i in range(0, len(xtr), 100):
            idx = perm[i : i + 100]
            loss = model.loss(xtr[idx], ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        for group in opt.param_groups:
            group["lr"] *= 0.95
        sub = torch.randperm(len(xtr), generator=g)[:500]
        print(
            f"(Epoch {epoch + 1} / {epochs}) train acc: {check_accuracy(xtr[sub], ytr[sub]):.3f}; "
            f"val_acc: {check_accuracy(xva, yva):.3f}; loss {losses[-1]:.4f}"
        )
    hook.close()
    return losses


# ============================================================================= probabilistic PCA


class _PPCA(nn.Module):
    """Probabilistic PCA (Tipping and Bishop 1999): x ~ N(mu, W W^T + sigma^2 I), its
    log-density written out by hand."""

    def __init__(self, d: int, q: int, naive_logdet: bool = False) -> None:
        super().__init__()
        self.W = nn.Parameter(0.1 * torch.randn(d, q))
        self.mu = nn.Parameter(torch.zeros(d))
        self.log_sigma2 = nn.Parameter(torch.zeros(()))
        self.naive = naive_logdet

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        d = len(self.mu)
        cov = self.W @ self.W.T + torch.exp(self.log_sigma2) * torch.eye(d)
        diff = x - self.mu
        if self.naive:  # bug: log(det(C)) and inv(C), as the formula reads
            logdet = torch.log(torch.det(cov))
            quad = ((diff @ torch.inverse(cov)) * diff).sum(1)
        else:
            chol = torch.linalg.cholesky(cov)
            logdet = 2 * torch.log(chol.diagonal()).sum()
            quad = torch.linalg.solve_triangular(chol, diff.T, upper=False).pow(2).sum(0)
        return -0.5 * (d * math.log(2 * math.pi) + logdet + quad)


def ppca_maximum_likelihood(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Probabilistic PCA fitted by gradient ascent on its marginal likelihood through
    `model.log_prob(x)` written by hand (a Cholesky factor for the log-determinant and the
    Mahalanobis term): 64-D data from 3 latent factors with noise 0.3, a 3-column loading
    matrix, mean and log noise variance as bare parameters, Adam 0.02, batches of 256; the loss
    is the NLL per dimension; the closed-form noise variance printed for comparison."""
    g = _seed(seed)
    d, q, n = 64, 3, 6000
    w_true = torch.randn(d, q, generator=g)
    data = torch.randn(n, q, generator=g) @ w_true.T + 0.3 * torch.randn(n, d, generator=g) + 1.5
    model = _PPCA(d, q, naive_logdet=bug == "log_zero_nan")
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for step in range(steps):
        batch = data[torch.randint(0, n, (256,), generator=g)]
        loss = -model.log_prob(batch).mean() / d
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            print(f"step {step} nll/dim {loss.item():.4f} sigma2 {model.log_sigma2.exp().item():.4f}")
    evals = torch.linalg.eigvalsh(torch.cov(data.T))
    print("closed-form sigma2", evals[: d - q].mean().item())
    hook.close()
    return losses


# ============================================================================= SVGP


class _SVGP(nn.Module):
    """A sparse variational GP with whitened inducing values: u = L v, q(v) = N(m, S S^T)."""

    def __init__(self, z: torch.Tensor) -> None:
        super().__init__()
        m = len(z)
        self.Z = nn.Parameter(z.clone())
        self.q_mu = nn.Parameter(torch.zeros(m))
        self.q_sqrt = nn.Parameter(torch.eye(m))
        self.log_lengthscale = nn.Parameter(torch.zeros(()))
        self.log_variance = nn.Parameter(torch.zeros(()))
        self.log_noise = nn.Parameter(torch.tensor(-1.0))

    def kernel(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        d2 = (a[:, None, :] - b[None, :, :]).pow(2).sum(-1)
        return self.log_variance.exp() * torch.exp(-0.5 * d2 / self.log_lengthscale.exp() ** 2)

    def predict(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        m = len(self.Z)
        kmm = self.kernel(self.Z, self.Z) + 1e-5 * torch.eye(m)
        chol = torch.linalg.cholesky(kmm)
        a = torch.linalg.solve_triangular(chol, self.kernel(self.Z, x), upper=False)  # (M, N)
        s = torch.tril(self.q_sqrt)
        mean = a.T @ self.q_mu
        var = self.log_variance.exp() - a.pow(2).sum(0) + (a.T @ s).pow(2).sum(1)
        return mean, var.clamp(min=1e-8)

    def elbo(self, x: torch.Tensor, y: torch.Tensor, n: int) -> torch.Tensor:
        mean, var = self.predict(x)
        noise = self.log_noise.exp() ** 2
        ell = -0.5 * torch.log(2 * math.pi * noise) - 0.5 * ((y - mean) ** 2 + var) / noise
        s = torch.tril(self.q_sqrt)
        kl = 0.5 * (
            s.pow(2).sum() + self.q_mu.pow(2).sum() - len(self.Z) - 2 * torch.log(s.diagonal().abs()).sum()
        )
        return n / len(x) * ell.sum() - kl


def svgp_minibatch_elbo(path: str, steps: int = 400, seed: int = 0) -> list[float]:
    """A sparse variational Gaussian process (SVGP, Hensman et al. 2013) for 1-D regression
    (`sin(3x) + 0.3 x^2` plus noise 0.2 on 2000 points): 20 inducing inputs initialized on a
    grid, whitened variational mean and lower-triangular square root, an RBF kernel with log
    lengthscale and variance, a Gaussian likelihood, all bare parameters; minibatches of 128,
    `-model.elbo(x, y, n) / n` minimized by Adam 0.01; a test RMSE every 100 steps."""
    g = _seed(seed)
    n = 2000
    x = torch.rand(n, 1, generator=g) * 6 - 3
    f = torch.sin(3 * x[:, 0]) + 0.3 * x[:, 0] ** 2
    y = f + 0.2 * torch.randn(n, generator=g)
    xt = torch.linspace(-3, 3, 200)[:, None]
    ft = torch.sin(3 * xt[:, 0]) + 0.3 * xt[:, 0] ** 2
    model = _SVGP(torch.linspace(-3, 3, 20)[:, None])
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for step in range(steps):
        idx = torch.randint(0, n, (128,), generator=g)
        loss = -model.elbo(x[idx], y[idx], n) / n
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                rmse = (model.predict(xt)[0] - ft).pow(2).mean().sqrt().item()
            print(f"step {step} -elbo/n {loss.item():.4f} test rmse {rmse:.4f}")
    hook.close()
    return losses


# ============================================================================= LM pretraining then fine-tuning


class _SeqModel(nn.Module):
    def __init__(self, vocab: int, classes: int, dim: int = 64) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, vocab)
        self.clf_head = nn.Sequential(nn.Dropout(0.2), nn.Linear(dim, classes))

    def lm_logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.rnn(self.emb(x))[0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.clf_head(self.rnn(self.emb(x))[0][:, -1])


def _markov_sequences(
    g: torch.Generator, chains: torch.Tensor, n: int, length: int
) -> tuple[torch.Tensor, ...]:
    """`n` sequences, each from one of the Markov chains `chains` (K, V, V): its label."""
    k, v, _ = chains.shape
    labels = torch.randint(0, k, (n,), generator=g)
    seqs = torch.empty(n, length, dtype=torch.long)
    seqs[:, 0] = torch.randint(0, v, (n,), generator=g)
    for t in range(1, length):
        probs = chains[labels, seqs[:, t - 1]]
        seqs[:, t] = torch.multinomial(probs, 1, generator=g).squeeze(1)
    return seqs, labels


def pretrain_then_finetune_gru(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Semi-supervised sequence learning in two stages (Dai and Le 2015): a GRU pretrained as a
    next-token language model on 4000 unlabeled sequences (Adam 2e-3, 200 steps of 64), then fine-tuned with its classifier head on 300 labeled sequences (which of three
    Markov chains wrote them) with a fresh AdamW at 1e-3, weight decay 0.01 and a `LambdaLR`
    warm-up of 20 steps then linear decay over 200 steps, clipping at 1 in both stages; a
    validation accuracy every 50 fine-tuning steps. The losses of both stages, in order."""
    g = _seed(seed)
    vocab, length = 16, 30
    chains = torch.softmax(2.0 * torch.randn(3, vocab, vocab, generator=g), -1)
    unlabeled, _ = _markov_sequences(g, chains, 4000, length)
    labeled, labels = _markov_sequences(g, chains, 800, length)
    xtr, ytr, xva, yva = labeled[:300], labels[:300], labeled[300:], labels[300:]
    model = _SeqModel(vocab, 3)
    loss_fn = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []

    # stage 1: language-model pretraining
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    model.train()
    for _ in range(200):
        batch = unlabeled[torch.randint(0, len(unlabeled), (64,), generator=g)]
        logits = model.lm_logits(batch[:, :-1])
        loss = loss_fn(logits.reshape(-1, vocab), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    print(f"pretraining done, lm loss {losses[-1]:.4f}")

    # stage 2: fine-tuning, fresh optimizer and schedule
    total, warmup = 200, 20
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (total - s) / (total - warmup))
    )
    for step in range(total):
        model.train()
        idx = torch.randint(0, len(xtr), (32,), generator=g)
        loss = loss_fn(model(xtr[idx]), ytr[idx])
        if bug != "no_zero_grad":  # bug: the fine-tuning loop written without it
            opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                acc = (model(xva).argmax(1) == yva).float().mean().item()
            print(f"finetune step {step} loss {loss.item():.4f} val acc {acc:.3f}")
    hook.close()
    return losses


# ============================================================================= HAR 1-D CNN, early stopping


def _activity_windows(g: torch.Generator, n: int, length: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Tri-axial accelerometer windows of six activities: each a gait frequency band, an
    amplitude per axis, a gravity direction, plus noise and random phase."""
    y = torch.randint(0, 6, (n,), generator=g)
    freq = torch.tensor([0.0, 0.0, 1.6, 2.0, 2.6, 1.2])[y] + 0.3 * torch.rand(n, generator=g)
    amp = torch.tensor(
        [
            [0.05, 0.05, 0.05],
            [0.05, 0.05, 0.05],
            [0.6, 0.3, 0.4],
            [0.7, 0.5, 0.3],
            [1.0, 0.4, 0.8],
            [0.5, 0.6, 0.2],
        ]
    )[y]
    gravity = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])[y]  # fmt: skip
    t = torch.arange(length) / 20.0
    phase = 2 * math.pi * torch.rand(n, 3, 1, generator=g)
    wave = torch.sin(2 * math.pi * freq[:, None, None] * t + phase)
    x = gravity[:, :, None] + amp[:, :, None] * wave + 0.35 * torch.randn(n, 3, length, generator=g)
    return x, y


def har_cnn_hand_early_stopping(
    path: str, max_epochs: int = 15, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Human-activity recognition from tri-axial accelerometer windows (64 samples, six
    activities) with a 1-D CNN (two conv-BN-ReLU blocks, max pooling, global average pooling,
    dropout 0.5), Adam 1e-3, batches of 64; a hand-written validation pass each epoch under
    `model.eval()`, early stopping on the validation loss with patience 3, the best `state_dict`
    kept by `copy.deepcopy` and restored for the test accuracy."""
    g = _seed(seed)
    x, y = _activity_windows(g, 3000)
    train = TensorDataset(x[:2000], y[:2000])
    xva, yva, xte, yte = x[2000:2500], y[2000:2500], x[2500:], y[2500:]
    model = nn.Sequential(
        nn.Conv1d(3, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(2),
        nn.Conv1d(32, 64, 5, padding=2), nn.BatchNorm1d(64), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Dropout(0.5), nn.Linear(64, 6),
    )  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    loader = DataLoader(train, batch_size=64, shuffle=True, generator=g)
    best, best_state, bad = float("inf"), copy.deepcopy(model.state_dict()), 0
    losses: list[float] = []
    if bug == "train_in_eval_mode":  # bug: put in training mode once, before the loop
        model.train()
    for epoch in range(max_epochs):
        if bug != "train_in_eval_mode":
            model.train()
        for xb, yb in loader:
            loss = criterion(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val_loss = criterion(model(xva), yva).item()
        print(f"epoch {epoch} train {losses[-1]:.4f} val {val_loss:.4f}")
        if val_loss < best - 1e-4:
            best, best_state, bad = val_loss, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
            if bad >= 3:
                print("early stopping")
                break
    model.load_state_dict(best_state)
    model.eval()
    with torch.no_grad():
        print("test acc", (model(xte).argmax(1) == yte).float().mean().item())
    hook.close()
    return losses


# ============================================================================= bucketed batch sampler


class _BucketBatchSampler(Sampler[list[int]]):
    """Batches of indices of similar length: sort by length, chunk, shuffle the chunks."""

    def __init__(self, lengths: list[int], batch_size: int, generator: torch.Generator) -> None:
        self.order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        self.batch_size = batch_size
        self.generator = generator

    def __iter__(self) -> Any:
        batches = [self.order[i : i + self.batch_size] for i in range(0, len(self.order), self.batch_size)]
        for j in torch.randperm(len(batches), generator=self.generator).tolist():
            yield batches[j]

    def __len__(self) -> int:
        return (len(self.order) + self.batch_size - 1) // self.batch_size


class _Sequences(Dataset):
    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor) -> None:
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.seqs)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.seqs[i], self.labels[i]


def _pad_collate(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, ...]:
    seqs, labels = zip(*batch, strict=True)
    lengths = torch.tensor([len(s) for s in seqs])
    return nn.utils.rnn.pad_sequence(list(seqs), batch_first=True), lengths, torch.stack(labels)


class _GRUClassifier(nn.Module):
    def __init__(self, vocab: int, classes: int, dim: int = 48) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=0)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(
            self.emb(x), lengths, batch_first=True, enforce_sorted=False
        )
        _, h = self.rnn(packed)
        return self.out(h[-1])


def bucketed_sampler_gru(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """A GRU classifier over variable-length token sequences (5 to 60 tokens; the label is which
    of three marker tokens the writer over-used) fed by a hand-written `BatchSampler` that buckets
    by length (sorted, chunked into batches of 32, the batch order shuffled each epoch), padded by
    a collate function and packed with `pack_padded_sequence`; Adam 3e-3, clipping at 1, a
    validation accuracy per epoch."""
    g = _seed(seed)
    n, vocab = 2400, 20
    labels = torch.randint(0, 3, (n,), generator=g)
    seqs = []
    for i in range(n):
        length = int(torch.randint(5, 61, (1,), generator=g))
        probs = torch.ones(vocab - 1)
        probs[labels[i]] += 2.0  # markers are tokens 1, 2, 3 (index 0..2 of tokens 1..19)
        seqs.append(torch.multinomial(probs, length, replacement=True, generator=g) + 1)
    if bug == "shuffled_labels":  # bug: sorted by length in preprocessing, labels left in place
        order = sorted(range(n), key=lambda i: len(seqs[i]))
        seqs = [seqs[i] for i in order]
    train = _Sequences(seqs[:2000], labels[:2000])
    val = _Sequences(seqs[2000:], labels[2000:])
    loader = DataLoader(
        train, batch_sampler=_BucketBatchSampler([len(s) for s in train.seqs], 32, g), collate_fn=_pad_collate
    )
    val_loader = DataLoader(val, batch_size=100, collate_fn=_pad_collate)
    model = _GRUClassifier(vocab, 3)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for x, lengths, yb in loader:
            loss = criterion(model(x, lengths), yb)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, lengths, yb in val_loader:
                correct += (model(x, lengths).argmax(1) == yb).sum().item()
        print(f"epoch {epoch} loss {losses[-1]:.4f} val acc {correct / len(val):.3f}")
    hook.close()
    return losses


# ============================================================================= pointer network, curriculum


class _PointerNet(nn.Module):
    """A pointer network: an LSTM encoder, an LSTM-cell decoder fed the previously pointed input,
    additive attention whose scores over the input positions are the output."""

    def __init__(self, hidden: int = 64, softmax_out: bool = False) -> None:
        super().__init__()
        self.embed = nn.Linear(1, hidden)
        self.encoder = nn.LSTM(hidden, hidden, batch_first=True)
        self.decoder = nn.LSTMCell(hidden, hidden)
        self.w1 = nn.Linear(hidden, hidden, bias=False)
        self.w2 = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, 1, bias=False)
        self.start = nn.Parameter(torch.zeros(hidden))
        self.softmax_out = softmax_out

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """x: (B, n) numbers; targets: (B, n) the positions in sorted order (teacher forcing).
        Returns (B, n, n) pointer scores, already chosen positions masked."""
        b, n = x.shape
        e = self.embed(x[..., None])
        enc, (h, c) = self.encoder(e)
        h, c = h[0], c[0]
        inp = self.start.expand(b, -1)
        mask = torch.zeros(b, n, dtype=torch.bool)
        proj = self.w1(enc)
        outs = []
        for t in range(n):
            h, c = self.decoder(inp, (h, c))
            scores = self.v(torch.tanh(proj + self.w2(h)[:, None])).squeeze(-1)
            scores = scores.masked_fill(mask, -1e9)
            if self.softmax_out:  # bug: p(C_i | ...) = softmax(u_i), as the paper writes it
                scores = F.softmax(scores, -1)
            outs.append(scores)
            chosen = targets[:, t]
            mask = mask | F.one_hot(chosen, n).bool()
            inp = e[torch.arange(b), chosen]
        return torch.stack(outs, 1)


def pointer_net_sort_curriculum(
    path: str, steps: int = 450, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A pointer network (Vinyals et al. 2015) learning to sort uniform numbers, trained with a
    length curriculum written by hand (5 numbers for 150 steps, then 7, then 10), teacher
    forcing, cross-entropy on the pointer scores, Adam 1e-3, clipping at 2, batches of 64; the
    teacher-forced exact-match accuracy of the batch at each curriculum stage's end."""
    g = _seed(seed)
    model = _PointerNet(64, softmax_out=bug == "softmax_before_ce")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for step in range(steps):
        n = 5 if step < 150 else 7 if step < 300 else 10
        x = torch.rand(64, n, generator=g)
        targets = x.argsort(1)
        scores = model(x, targets)
        loss = criterion(scores.reshape(-1, n), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        losses.append(loss.item())
        if step % 150 == 149:
            with torch.no_grad():
                acc = (scores.argmax(-1) == targets).all(1).float().mean().item()
            print(f"step {step} length {n} loss {loss.item():.4f} sequence acc (teacher-forced) {acc:.3f}")
    hook.close()
    return losses


# ============================================================================= mixed precision by hand


def _glyphs(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 12x12 images of four shapes (bar, cross, ring, diagonal) at random offsets."""
    y = torch.randint(0, 4, (n,), generator=g)
    yy, xx = torch.meshgrid(torch.arange(12), torch.arange(12), indexing="ij")
    imgs = torch.zeros(n, 1, 12, 12)
    dx = torch.randint(-2, 3, (n,), generator=g)
    dy = torch.randint(-2, 3, (n,), generator=g)
    for i in range(n):
        cx, cy = 6 + dx[i].item(), 6 + dy[i].item()
        k = y[i].item()
        if k == 0:
            m = (abs(xx - cx) <= 1) & (abs(yy - cy) <= 4)
        elif k == 1:
            m = ((abs(xx - cx) <= 0) & (abs(yy - cy) <= 3)) | ((abs(yy - cy) <= 0) & (abs(xx - cx) <= 3))
        elif k == 2:
            r = ((xx - cx) ** 2 + (yy - cy) ** 2).float().sqrt()
            m = (r > 2) & (r < 3.6)
        else:
            m = (abs((xx - cx) - (yy - cy)) <= 1) & (abs(xx - cx) <= 3)
        imgs[i, 0] = m.float()
    imgs = imgs * (0.3 + 0.4 * torch.rand(n, 1, 1, 1, generator=g)) + 0.7 * torch.rand(
        n, 1, 12, 12, generator=g
    )
    return (imgs.clamp(0, 1) * 255).to(torch.uint8), y


def manual_mixed_precision_cnn(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Mixed precision by hand (Micikevicius et al. 2018) on a small CNN: the model run in fp16,
    fp32 master copies of its weights held by the optimizer (SGD momentum 0.9 at 0.05), the loss
    computed in fp32 and multiplied by a dynamic loss scale (2^16 at start) before backward, the
    fp16 gradients unscaled into the master copies, a step with an overflow skipped and the
    scale halved, the scale doubled after 100 clean steps, the master weights copied back into
    the fp16 model; batches of 64 uint8 glyphs scaled to [0, 1]."""
    g = _seed(seed)
    images, labels = _glyphs(g, 2400)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 9, 64), nn.ReLU(), nn.Linear(64, 4),
    )  # fmt: skip
    model = model.half()
    master = [p.detach().clone().float().requires_grad_(True) for p in model.parameters()]
    opt = torch.optim.SGD(master, lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    scale, clean = 2.0**16, 0
    losses: list[float] = []
    for step in range(steps):
        idx = torch.randint(0, 2000, (64,), generator=g)
        x = images[idx].float()
        if bug != "inputs_x255":  # bug: cast to float without the division by 255
            x = x / 255
        logits = model(x.half())
        loss = criterion(logits.float(), labels[idx])
        model.zero_grad(set_to_none=True)
        (loss * scale).backward()
        overflow = False
        for p, m in zip(model.parameters(), master, strict=True):
            grad = p.grad.float() / scale if p.grad is not None else torch.zeros_like(m)
            if not torch.isfinite(grad).all():
                overflow = True
            m.grad = grad
        losses.append(loss.item())
        if overflow:
            scale /= 2
            clean = 0
            continue
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for p, m in zip(model.parameters(), master, strict=True):
                p.copy_(m.half())
        clean += 1
        if clean % 100 == 0:
            scale *= 2
        if step % 100 == 99:
            with torch.no_grad():
                xv = images[2000:].float() if bug == "inputs_x255" else images[2000:].float() / 255
                acc = (model(xv.half()).argmax(1) == labels[2000:]).float().mean().item()
            print(f"step {step} loss {loss.item():.4f} scale {scale:.0f} val acc {acc:.3f}")
    hook.close()
    return losses


# ============================================================================= CP tensor completion


class _CPDecomposition(nn.Module):
    """A rank-R CP decomposition T[i, j, k] = sum_r A[i, r] B[j, r] C[k, r], bare factors."""

    def __init__(self, shape: tuple[int, int, int], rank: int, reg: float) -> None:
        super().__init__()
        self.A = nn.Parameter(0.3 * torch.randn(shape[0], rank))
        self.B = nn.Parameter(0.3 * torch.randn(shape[1], rank))
        self.C = nn.Parameter(0.3 * torch.randn(shape[2], rank))
        self.reg = reg

    def predict(self, idx: torch.Tensor) -> torch.Tensor:
        return (self.A[idx[:, 0]] * self.B[idx[:, 1]] * self.C[idx[:, 2]]).sum(1)

    def loss(self, idx: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
        a, b, c = self.A[idx[:, 0]], self.B[idx[:, 1]], self.C[idx[:, 2]]
        mse = ((a * b * c).sum(1) - vals).pow(2).mean()
        return mse + self.reg * (a.pow(2).sum(1) + b.pow(2).sum(1) + c.pow(2).sum(1)).mean()


def cp_tensor_completion(path: str, steps: int = 500, seed: int = 0, bug: str | None = None) -> list[float]:
    """Low-rank tensor completion by CP decomposition: a 30x30x30 tensor of rank 4 plus noise,
    20 % of its entries observed, rank-6 factor matrices as bare parameters, `model.loss(idx,
    vals)` the squared error on a minibatch of 512 observed entries plus an L2 penalty on the
    factor rows it touches (1e-3), Adam 1e-2; the held-out RMSE every 100 steps."""
    g = _seed(seed)
    shape = (30, 30, 30)
    fa, fb, fc = (torch.randn(s, 4, generator=g) for s in shape)
    full = torch.einsum("ir,jr,kr->ijk", fa, fb, fc)
    full = full / full.std() + 0.1 * torch.randn(shape, generator=g)
    idx = torch.cartesian_prod(*(torch.arange(s) for s in shape))
    perm = torch.randperm(len(idx), generator=g)
    obs, held = idx[perm[:5400]], idx[perm[5400:7400]]
    vals = full[obs[:, 0], obs[:, 1], obs[:, 2]]
    held_vals = full[held[:, 0], held[:, 1], held[:, 2]]
    model = _CPDecomposition(shape, 6, 1e-3)
    lr = 1.0 if bug == "lr_x100" else 1e-2  # bug: 1.0 typed for 1e-2
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for step in range(steps):
        b = torch.randint(0, len(obs), (512,), generator=g)
        loss = model.loss(obs[b], vals[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                rmse = (model.predict(held) - held_vals).pow(2).mean().sqrt().item()
            print(f"step {step} loss {loss.item():.4f} held-out rmse {rmse:.4f}")
    hook.close()
    return losses


# ============================================================================= mixture density network


class _MDN(nn.Module):
    """A mixture density network: a tanh MLP giving mixing logits, means and log-scales of K
    Gaussians over y given x."""

    def __init__(self, k: int = 5, hidden: int = 64) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.pi = nn.Linear(hidden, k)
        self.mu = nn.Linear(hidden, k)
        self.log_sigma = nn.Linear(hidden, k)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.body(x)
        return F.log_softmax(self.pi(h), -1), self.mu(h), self.log_sigma(h).clamp(-7, 5)

    def log_prob(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        log_pi, mu, log_sigma = self(x)
        comp = torch.distributions.Normal(mu, log_sigma.exp()).log_prob(y)
        return torch.logsumexp(log_pi + comp, -1)


def mixture_density_network_inverse(path: str, steps: int = 1500, seed: int = 0) -> list[float]:
    """A mixture density network (Bishop 1994) on the inverse of `x = y + 0.3 sin(2 pi y)` plus
    uniform noise (three branches of y for middle x), five Gaussian components from two tanh
    layers of 64, `-model.log_prob(x, y).mean()` minimized by Adam 1e-3 on batches of 256 of
    3000 points."""
    g = _seed(seed)
    n = 3000
    y = torch.rand(n, 1, generator=g)
    x = y + 0.3 * torch.sin(2 * math.pi * y) + 0.2 * (torch.rand(n, 1, generator=g) - 0.5)
    x = (x - x.mean()) / x.std()
    model = _MDN(5, 64)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for step in range(steps):
        idx = torch.randint(0, n, (256,), generator=g)
        loss = -model.log_prob(x[idx], y[idx]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 300 == 299:
            print(f"step {step} nll {loss.item():.4f}")
    hook.close()
    return losses


# ============================================================================= BiLSTM-CRF


def _log_sum_exp(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.logsumexp(x, dim)


class _BiLSTMCRF(nn.Module):
    """The PyTorch tutorial's BiLSTM-CRF, batched: emissions from a BiLSTM, a transition matrix
    `transitions[i, j]` (score of moving to tag i from tag j) as a bare parameter, START/STOP
    tags."""

    def __init__(self, vocab: int, tags: int, emb: int = 32, hidden: int = 64) -> None:
        super().__init__()
        self.tagset_size = tags + 2
        self.start, self.stop = tags, tags + 1
        self.word_embeds = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden // 2, bidirectional=True, batch_first=True)
        self.hidden2tag = nn.Linear(hidden, self.tagset_size)
        self.transitions = nn.Parameter(torch.randn(self.tagset_size, self.tagset_size))
        with torch.no_grad():
            self.transitions[self.start, :] = -10000
            self.transitions[:, self.stop] = -10000

    def _features(self, sentence: torch.Tensor) -> torch.Tensor:
        return self.hidden2tag(self.lstm(self.word_embeds(sentence))[0])

    def _forward_alg(self, feats: torch.Tensor) -> torch.Tensor:
        b, t_len, k = feats.shape
        alpha = torch.full((b, k), -10000.0)
        alpha[:, self.start] = 0.0
        for t in range(t_len):
            alpha = _log_sum_exp(alpha[:, None, :] + self.transitions[None], 2) + feats[:, t]
        return _log_sum_exp(alpha + self.transitions[self.stop][None], 1)

    def _score_sentence(self, feats: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
        b, t_len, _ = feats.shape
        tags = torch.cat([torch.full((b, 1), self.start, dtype=torch.long), tags], 1)
        score = torch.zeros(b)
        for t in range(t_len):
            score = (
                score
                + self.transitions[tags[:, t + 1], tags[:, t]]
                + feats[torch.arange(b), t, tags[:, t + 1]]
            )
        return score + self.transitions[self.stop, tags[:, -1]]

    def neg_log_likelihood(self, sentence: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
        feats = self._features(sentence)
        return (self._forward_alg(feats) - self._score_sentence(feats, tags)).mean()

    def forward(self, sentence: torch.Tensor) -> torch.Tensor:
        """Viterbi decoding: the best tag sequence per sentence."""
        feats = self._features(sentence)
        b, t_len, k = feats.shape
        score = torch.full((b, k), -10000.0)
        score[:, self.start] = 0.0
        back = []
        for t in range(t_len):
            total = score[:, None, :] + self.transitions[None]
            score, best = total.max(2)
            score = score + feats[:, t]
            back.append(best)
        score = score + self.transitions[self.stop][None]
        last = score.argmax(1)
        path = [last]
        for best in reversed(back[1:]):
            last = best[torch.arange(b), last]
            path.append(last)
        return torch.stack(path[::-1], 1)


def _bio_sentences(g: torch.Generator, n: int, length: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    """Token sentences with PER and LOC spans: tags O=0, B-PER=1, I-PER=2, B-LOC=3, I-LOC=4.
    Span words come from their type's vocabulary (which overlaps a little with common words);
    a span starts after a trigger word ("mr" for PER, "in" for LOC) most of the time."""
    words = torch.randint(10, 60, (n, length), generator=g)
    tags = torch.zeros(n, length, dtype=torch.long)
    for i in range(n):
        t = 1
        while t < length - 3:
            if torch.rand(1, generator=g).item() < 0.2:
                kind = int(torch.randint(0, 2, (1,), generator=g))
                span = int(torch.randint(1, 4, (1,), generator=g))
                if torch.rand(1, generator=g).item() < 0.8:
                    words[i, t - 1] = 1 + kind  # trigger word
                base = 60 if kind == 0 else 80
                words[i, t : t + span] = base + torch.randint(0, 25, (span,), generator=g)
                tags[i, t] = 1 + 2 * kind
                tags[i, t + 1 : t + span] = 2 + 2 * kind
                t += span + 2
            else:
                t += 1
    return words, tags


def bilstm_crf_tagger(path: str, steps: int = 250, seed: int = 0, bug: str | None = None) -> list[float]:
    """A BiLSTM-CRF named-entity tagger in the shape of the PyTorch tutorial: the training loop
    calls `model.neg_log_likelihood(sentence, tags)` (the forward algorithm's log partition
    minus the gold path's score, batched), `forward` is Viterbi decoding; SGD at 0.05 with
    momentum 0.9 and weight decay 1e-4, batches of 32 sentences of 20 tokens, clipping at 5, a
    validation token accuracy every 50 steps."""
    g = _seed(seed)
    words, tags = _bio_sentences(g, 1400)
    xtr, ttr, xva, tva = words[:1200], tags[:1200], words[1200:], tags[1200:]
    model = _BiLSTMCRF(110, 5)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    if bug == "frozen_by_mistake":  # bug: a line left from the pretrained-embedding variant
        for p in [*model.word_embeds.parameters(), *model.lstm.parameters()]:
            p.requires_grad_(False)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for step in range(steps):
        model.train()
        idx = torch.randint(0, len(xtr), (32,), generator=g)
        loss = model.neg_log_likelihood(xtr[idx], ttr[idx])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                acc = (model(xva) == tva).float().mean().item()
            print(f"step {step} nll {loss.item():.4f} val token acc {acc:.3f}")
    hook.close()
    return losses


# ============================================================================= NADE


class _NADE(nn.Module):
    """NADE with bare parameters: h_d = sigmoid(c + W[:, <d] x_<d), p(x_d = 1) = sigmoid(b_d +
    V_d . h_d)."""

    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.W = nn.Parameter(torch.randn(h, d) * 0.05)
        self.c = nn.Parameter(torch.zeros(h))
        self.V = nn.Parameter(torch.randn(d, h) * 0.05)
        self.b = nn.Parameter(torch.zeros(d))

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        contrib = x[:, None, :] * self.W[None]  # (B, H, D)
        a = torch.cumsum(contrib, 2) - contrib + self.c[None, :, None]  # only dims < d
        h = torch.sigmoid(a)
        logits = self.b + torch.einsum("dh,bhd->bd", self.V, h)
        return -F.binary_cross_entropy_with_logits(logits, x, reduction="none").sum(1)


def nade_binary_images(path: str, steps: int = 500, seed: int = 0) -> list[float]:
    """NADE (Larochelle and Murray 2011) on binary 8x8 images (ten prototype patterns of
    strokes, 5 % of pixels flipped), 64 hidden units, bare parameters `W, c, V, b`, the
    autoregressive log-likelihood computed at once by cumulative sums in `model.log_prob(x)`,
    Adam 3e-3 on batches of 100; the loss is the NLL in nats per image, a test NLL every 100
    steps."""
    g = _seed(seed)
    protos = torch.zeros(10, 8, 8)
    for k in range(10):
        for _ in range(3):
            if torch.rand(1, generator=g).item() < 0.5:
                r = int(torch.randint(0, 8, (1,), generator=g))
                protos[k, r, :] = 1
            else:
                c = int(torch.randint(0, 8, (1,), generator=g))
                protos[k, :, c] = 1
    which = torch.randint(0, 10, (5000,), generator=g)
    flip = (torch.rand(5000, 8, 8, generator=g) < 0.05).float()
    data = (protos[which] - flip).abs().view(5000, 64)
    train, test = data[:4500], data[4500:]
    model = _NADE(64, 64)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for step in range(steps):
        batch = train[torch.randint(0, len(train), (100,), generator=g)]
        loss = -model.log_prob(batch).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                print(f"step {step} nll {loss.item():.3f} test nll {-model.log_prob(test).mean().item():.3f}")
    hook.close()
    return losses


# ============================================================================= lottery ticket


def lottery_ticket_imp_rewind(
    path: str, rounds: int = 3, steps: int = 150, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The lottery-ticket procedure (Frankle and Carbin 2019) on an MLP (64-200-100-8): train
    for 150 steps, prune the 20 % smallest-magnitude surviving weights of each layer, rewind the
    survivors to their initial values, retrain with a fresh Adam at 1.2e-3; the original and
    three pruned rounds, the masks applied to the weights after every step, a validation
    accuracy at each round's end. The losses of all rounds, in order."""
    g = _seed(seed)
    x, y = _blobs(g, 3000, 64, 8, spread=0.6)
    xtr, ytr, xva, yva = x[:2500], y[:2500], x[2500:], y[2500:]
    model = nn.Sequential(nn.Linear(64, 200), nn.ReLU(), nn.Linear(200, 100), nn.ReLU(), nn.Linear(100, 8))
    if bug == "dead_relu_init":  # bug: an init helper with tiny weights and negative biases "to start sparse"

        def init_weights(m: nn.Module) -> None:
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.01)
                nn.init.constant_(m.bias, -0.5)

        model.apply(init_weights)
    init_state = copy.deepcopy(model.state_dict())
    layers = [m for m in model if isinstance(m, nn.Linear)]
    masks = [torch.ones_like(m.weight) for m in layers]
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for rnd in range(rounds + 1):
        opt = torch.optim.Adam(model.parameters(), lr=1.2e-3)
        for _ in range(steps):
            model.train()
            idx = torch.randint(0, len(xtr), (64,), generator=g)
            loss = criterion(model(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                for m, mask in zip(layers, masks, strict=True):
                    m.weight.mul_(mask)
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(xva).argmax(1) == yva).float().mean().item()
        density = sum(mk.sum().item() for mk in masks) / sum(mk.numel() for mk in masks)
        print(f"round {rnd} density {density:.3f} loss {losses[-1]:.4f} val acc {acc:.3f}")
        if rnd == rounds:
            break
        with torch.no_grad():  # prune 20 % of the surviving weights per layer, then rewind
            for i, m in enumerate(layers):
                alive = m.weight[masks[i].bool()].abs()
                threshold = alive.kthvalue(max(1, int(0.2 * alive.numel()))).values
                masks[i] = masks[i] * (m.weight.abs() > threshold).float()
            model.load_state_dict(init_state)
            for m, mask in zip(layers, masks, strict=True):
                m.weight.mul_(mask)
    hook.close()
    return losses


# ============================================================================= Lightning: Barlow Twins


def lit_barlow_twins_tabular(path: str, max_epochs: int = 5, seed: int = 0) -> list[float]:
    """Barlow Twins (Zbontar et al. 2021) as a `LightningModule` on tabular rows: two views by
    random feature masking (30 %) and Gaussian noise, an MLP encoder and a batch-normalized
    projector to 64 dimensions, `barlow_loss` the sum over the cross-correlation matrix of
    `(1 - c_ii)^2` plus lambda 5e-3 times the off-diagonal `c_ij^2`, AdamW 1e-3 with weight
    decay 1e-4 from `configure_optimizers`, batches of 256; `mldbg.lightning.DebuggerCallback`
    in the `Trainer`."""
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    x, _ = _blobs(g, 5120, 24, 6, spread=0.8)

    class BarlowTwins(pl.LightningModule):
        def __init__(self, lambd: float = 5e-3) -> None:
            super().__init__()
            self.lambd = lambd
            self.encoder = nn.Sequential(nn.Linear(24, 128), nn.ReLU(), nn.Linear(128, 64))
            self.projector = nn.Sequential(
                nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 64, bias=False)
            )
            self.bn = nn.BatchNorm1d(64, affine=False)

        def augment(self, x: torch.Tensor) -> torch.Tensor:
            keep = (torch.rand_like(x) > 0.3).float()
            return x * keep + 0.2 * torch.randn_like(x)

        def barlow_loss(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
            c = self.bn(z1).T @ self.bn(z2) / len(z1)
            on_diag = (torch.diagonal(c) - 1).pow(2).sum()
            off_diag = (c - torch.diag(torch.diagonal(c))).pow(2).sum()
            return on_diag + self.lambd * off_diag

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            (x,) = batch
            z1 = self.projector(self.encoder(self.augment(x)))
            z2 = self.projector(self.encoder(self.augment(x)))
            loss = self.barlow_loss(z1, z2)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.AdamW(self.parameters(), lr=1e-3, weight_decay=1e-4)

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    history = LossHistory()
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=path, logger=False, max_epochs=max_epochs, callbacks=[DebuggerCallback(path), history],
    )  # fmt: skip
    trainer.fit(
        BarlowTwins(), DataLoader(TensorDataset(x), batch_size=256, shuffle=True, drop_last=True, generator=g)
    )
    return history.losses


# ============================================================================= HF Trainer: weighted sampler


class _Examples(Dataset):
    """A list of feature dicts, as `datasets.Dataset` hands them to the Trainer."""

    def __init__(self, **columns: Any) -> None:
        self.columns = columns
        self.n = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: v[i] for k, v in self.columns.items()}


def hf_fnet_weighted_sampler(path: str, seed: int = 0) -> list[float]:
    """Imbalanced document classification (85 % / 15 %) with a `Trainer` subclass overriding
    `_get_train_sampler` to return a `WeightedRandomSampler` with inverse class-frequency
    weights, on a tiny random `FNetForSequenceClassification` (Fourier token mixing, 2 layers,
    hidden 64, no download), 64-token documents, lr 3e-4, linear decay after 10 % warm-up,
    batch 32, 3 epochs, an evaluation per epoch."""
    from transformers import (
        FNetConfig,
        FNetForSequenceClassification,
        PrinterCallback,
        Trainer,
        TrainingArguments,
    )

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    n, length, vocab = 1200, 64, 50
    labels = (torch.rand(n, generator=g) < 0.15).long()
    filler = torch.randint(5, vocab, (n, length), generator=g)
    topical = torch.where(labels[:, None] == 0, 5, 15) + torch.randint(0, 8, (n, length), generator=g)
    ids = torch.where(torch.rand(n, length, generator=g) < 0.2, topical, filler)
    ids[:, 0] = 1
    config = FNetConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, intermediate_size=128,
        max_position_embeddings=length, type_vocab_size=2, num_labels=2, pad_token_id=0,
    )  # fmt: skip
    model = FNetForSequenceClassification(config)
    train_labels = labels[:1000]

    class BalancedTrainer(Trainer):
        def _get_train_sampler(self, train_dataset: Any = None) -> Any:
            counts = torch.bincount(train_labels, minlength=2).float()
            weights = (1.0 / counts)[train_labels]
            return torch.utils.data.WeightedRandomSampler(
                weights, len(weights), replacement=True, generator=g
            )

    args = TrainingArguments(
        output_dir=os.path.join(path, "trainer"), logging_steps=1, report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=seed, save_strategy="no", eval_strategy="epoch", learning_rate=3e-4,
        lr_scheduler_type="linear", warmup_steps=10, per_device_train_batch_size=32, num_train_epochs=3,
    )  # fmt: skip
    trainer = BalancedTrainer(
        model=model, args=args,
        train_dataset=_Examples(input_ids=ids[:1000], labels=train_labels),
        eval_dataset=_Examples(input_ids=ids[1000:], labels=labels[1000:]),
        callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(args.output_dir, ignore_errors=True)
    print("eval losses", [round(e["eval_loss"], 4) for e in trainer.state.log_history if "eval_loss" in e])
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


# ============================================================================= Keras: ArcFace


def keras_arcface_margin_head(path: str, seed: int = 0) -> list[float]:
    """An ArcFace head (Deng et al. 2019) in Keras 3 as people add it to their own face or
    speaker models: an `ArcMarginProduct` layer holding its class centres by `add_weight`,
    L2-normalizing embeddings and centres, adding the angular margin 0.5 to the target class's
    angle (the easy-margin-free form with the `th`/`mm` correction) and scaling by 16, the labels
    fed as a second model input; `SparseCategoricalCrossentropy(from_logits=True)`, Adam 1e-3,
    batch 128, 6 epochs, on 32-D feature vectors of 8 identities."""
    import keras
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 23)
    n, d, classes = 4000, 32, 8
    centres = rng.normal(size=(classes, d))
    y = rng.integers(0, classes, n)
    x = (centres[y] * rng.uniform(0.5, 1.5, (n, 1)) + rng.normal(0, 1.2, (n, d))).astype("float32")

    class ArcMarginProduct(layers.Layer):
        def __init__(self, n_classes: int, s: float = 16.0, m: float = 0.5, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.n_classes, self.s, self.m = n_classes, s, m
            self.cos_m, self.sin_m = math.cos(m), math.sin(m)
            self.th, self.mm = math.cos(math.pi - m), math.sin(math.pi - m) * m

        def build(self, input_shape: Any) -> None:
            self.W = self.add_weight(
                shape=(input_shape[0][-1], self.n_classes),
                initializer="glorot_uniform",
                trainable=True,
                name="W",
            )

        def call(self, inputs: Any) -> Any:
            x, label = inputs
            x = x / ops.sqrt(ops.sum(ops.square(x), axis=1, keepdims=True) + 1e-7)
            w = self.W / ops.sqrt(ops.sum(ops.square(self.W), axis=0, keepdims=True) + 1e-7)
            cosine = ops.matmul(x, w)
            sine = ops.sqrt(ops.clip(1.0 - ops.square(cosine), 1e-7, 1.0))
            phi = cosine * self.cos_m - sine * self.sin_m
            phi = ops.where(cosine > self.th, phi, cosine - self.mm)
            one_hot = ops.one_hot(ops.cast(ops.reshape(label, (-1,)), "int32"), self.n_classes)
            return self.s * (one_hot * phi + (1.0 - one_hot) * cosine)

    features = keras.Input((d,), name="features")
    label = keras.Input((1,), name="label", dtype="int32")
    h = layers.Dense(128, activation="relu")(features)
    h = layers.BatchNormalization()(h)
    emb = layers.Dense(64)(h)
    logits = ArcMarginProduct(classes)([emb, label])
    model = keras.Model([features, label], logits)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
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
        [x[:3200], y[:3200]], y[:3200], batch_size=128, epochs=6, validation_data=([x[3200:], y[3200:]], y[3200:]),
        verbose=0, callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    print("val loss", [round(v, 4) for v in fit.history["val_loss"]])
    return history.losses


_cs231n = healthy(
    "cs231n_fully_connected_net_param_dict",
    "CS231n FullyConnectedNet (bare parameters, model.loss)",
    cs231n_fully_connected_net,
)
_two_stage = healthy(
    "gru_lm_pretrain_then_finetune_two_stage",
    "semi-supervised sequence learning (LM pretraining then fine-tuning)",
    pretrain_then_finetune_gru,
)
_har = healthy(
    "har_cnn_hand_written_early_stopping",
    "activity recognition 1-D CNN with hand-written early stopping",
    har_cnn_hand_early_stopping,
)
_bucket = healthy(
    "gru_length_bucketed_batch_sampler", "length-bucketing batch sampler (packed GRU)", bucketed_sampler_gru
)
_pointer = healthy(
    "pointer_net_sorting_length_curriculum",
    "pointer network with a length curriculum",
    pointer_net_sort_curriculum,
)
_amp = healthy(
    "manual_fp16_master_weights_loss_scaling",
    "mixed precision by hand (fp32 master weights, dynamic loss scale)",
    manual_mixed_precision_cnn,
)
_cp = healthy(
    "cp_decomposition_tensor_completion", "CP tensor completion (bare factor matrices)", cp_tensor_completion
)
_ppca = healthy(
    "ppca_marginal_likelihood_log_prob", "probabilistic PCA by maximum likelihood", ppca_maximum_likelihood
)
_crf = healthy(
    "bilstm_crf_neg_log_likelihood_bio", "BiLSTM-CRF tagger (model.neg_log_likelihood)", bilstm_crf_tagger
)
_lottery = healthy(
    "lottery_ticket_prune_rewind_rounds",
    "lottery ticket (iterative magnitude pruning with rewinding)",
    lottery_ticket_imp_rewind,
)

PIPELINES: list[Any] = [
    _cs231n,
    _ppca,
    healthy("svgp_whitened_inducing_minibatch_elbo", "sparse variational GP (minibatch ELBO)", svgp_minibatch_elbo),
    _two_stage,
    _har,
    _bucket,
    _pointer,
    _amp,
    _cp,
    healthy("mixture_density_network_inverse_sine", "mixture density network", mixture_density_network_inverse),
    _crf,
    healthy("nade_binary_images_cumsum", "NADE autoregressive density (bare parameters)", nade_binary_images),
    _lottery,
    buggy(_cp, "lr_x100"),
    buggy(_two_stage, "no_zero_grad"),
    buggy(_bucket, "shuffled_labels"),
    buggy(_amp, "inputs_x255"),
    buggy(_pointer, "softmax_before_ce"),
    buggy(_lottery, "dead_relu_init"),
    buggy(_cs231n, "deep_sigmoid"),
    buggy(_crf, "frozen_by_mistake"),
    buggy(_ppca, "log_zero_nan"),
    buggy(_har, "train_in_eval_mode"),
]  # fmt: skip

if installed("lightning"):
    PIPELINES += [
        healthy("lightning_barlow_twins_tabular_views", "Lightning Barlow Twins", lit_barlow_twins_tabular)
    ]

if installed("transformers"):
    PIPELINES += [
        healthy(
            "hf_fnet_weighted_random_sampler_override",
            "HF Trainer with an overridden train sampler (FNet)",
            hf_fnet_weighted_sampler,
        )
    ]

if installed("keras", "tensorflow"):
    PIPELINES += [
        healthy(
            "keras_arcface_additive_angular_margin", "Keras ArcFace margin head", keras_arcface_margin_head
        )
    ]
