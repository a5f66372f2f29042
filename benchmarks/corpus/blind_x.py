"""The seventeenth blind held-out set (issue 26), part X: plain PyTorch trainings of kinds the
corpus did not have yet, each written the way a practitioner of that kind writes it, with the
README's two lines (`register_loss` where the script has a loss module), data generated
in-process, fixed seeds, one CPU thread.

EEGNet on motor-imagery-like EEG trials (temporal convolution, depthwise spatial convolution
with a max-norm of 1 re-imposed after each Adam step, separable convolution, ELU, average
pooling, dropout 0.25); ECG beat classification with a residual 1-D CNN (BatchNorm, dropout), a
`WeightedRandomSampler` over rare beat classes, SGD with Nesterov momentum and
`ReduceLROnPlateau` on the validation loss; an unsupervised hidden Markov model fitted by
gradient descent on the log-space forward algorithm (`logsumexp`, Adam), Viterbi-decoded
accuracy under the best state-to-tag mapping; a hypergraph neural network (HGNN: node-to-edge-to-
node propagation through the normalized incidence matrix, two layers, dropout, Adam with weight
decay, full batch with a train mask); DeepWalk (truncated random walks on a community graph,
skip-gram with negative sampling on sparse embeddings, plain SGD with the word2vec linear lr
decay, a linear probe of the embeddings); a multi-class linear SVM on hashed word n-grams
(`MultiMarginLoss`, `ASGD` with weight decay, evaluated on the averaged weights); adversarial
debiasing of an income-style classifier (a predictor and an adversary predicting the sensitive
attribute from the predictor's logit and the label, two Adam optimizers, the predictor's loss
minus alpha times the adversary's, with the projection term of Zhang et al.); masked imputation
of multivariate sensor series with missing values (a bidirectional GRU fed values and the mask,
an MAE on artificially hidden observed entries, NAdam, norm clipping); deep hedging of a short
call under geometric Brownian motion with transaction costs (a strategy MLP of time,
log-moneyness and the previous position, the CVaR of the hedged P&L in its Rockafellar-Uryasev
form with a learnable threshold, fresh paths each step, Adam); a portfolio LSTM trained to
maximize the Sharpe ratio of its softmax allocations (the loss is minus the annualized Sharpe,
negative when it works, RMSprop); protein secondary structure tagging (residue embeddings, a
convolution and a packed BiLSTM, per-residue three-class cross-entropy with `ignore_index` on
padding, AdamW with linear warm-up); Gatys-style texture/style transfer optimizing the pixels of
a canvas module with Adam against Gram matrices of a fixed random convolutional feature net
(content + weighted style loss); learning from crowds with a crowd layer (a glyph CNN whose
softmax goes through one learnable confusion matrix per annotator, initialized to the identity;
cross-entropy on the labels each annotator gave, masked where they gave none); a monotonic
credit-scoring network (weights on the monotone features kept positive by a softplus
`torch.nn.utils.parametrize` parametrization, `BCEWithLogitsLoss` with `pos_weight`, Adagrad);
speech enhancement by an LSTM estimating the ideal ratio mask on log-magnitude STFT frames of
noisy harmonic "speech" (sigmoid mask, MSE to the IRM, Adam with clipping); and molecular
property regression from SMILES-like strings (a character GRU, `HuberLoss`, Adamax, `StepLR`).

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the debiasing predictor's Adam at lr 1e-1 typed for 1e-3 (lr_x100), the imputation loop
without `optimizer.zero_grad()` (no_zero_grad), the SVM's labels read from a copy of the corpus
sorted another way (shuffled_labels), the crowd-layer CNN fed the uint8 glyph bytes as floats
without the division by 255 (inputs_x255), the protein tagger ending in `nn.Softmax` before its
`CrossEntropyLoss` (softmax_before_ce), the HGNN's convolution biases filled with -1 in its
`reset_parameters` (dead_relu_init), the hedging strategy made of eight sigmoid layers
(deep_sigmoid), EEGNet's temporal convolution frozen by a line left from a subject-transfer
variant after the optimizer was built (frozen_by_mistake), the HMM's forward algorithm written in
probability space so the long sequences' likelihoods underflow to zero before the `log`
(log_zero_nan), the ECG CNN never put back in training mode after its first validation
(train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
`SPLIT = BLIND16`.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

from mldbg.torch import Hook

from . import BLIND16, buggy, healthy

SPLIT = BLIND16

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 113)


# ============================================================================= signals


def eegnet_motor_imagery(path: str, epochs: int = 20, seed: int = 0, bug: str | None = None) -> list[float]:
    """EEGNet-8,2 on motor-imagery-like trials: 16 channels x 128 samples, four classes whose
    mu-rhythm (10 Hz) power drops over class-specific channels; standardized per channel on the
    training trials; Adam 1e-3, batch 32, the max-norm of the depthwise filters (1.0) and of the
    classifier (0.25) re-imposed after each step, as in the paper."""
    g = _seed(seed)
    n, chans, t_len, classes = 800, 16, 128, 4
    y = torch.randint(0, classes, (n,), generator=g)
    t = torch.arange(t_len) / 128.0
    phase = torch.rand(n, chans, 1, generator=g) * 2 * math.pi
    amp = torch.ones(n, chans)
    for c in range(classes):
        amp[y == c, 4 * c : 4 * c + 4] = 0.35
    x = amp[:, :, None] * torch.sin(2 * math.pi * 10 * t + phase) + 0.6 * torch.randn(
        n, chans, t_len, generator=g
    )
    x = (x - x[:640].mean((0, 2), keepdim=True)) / x[:640].std((0, 2), keepdim=True)
    x = x.unsqueeze(1)

    class EEGNet(nn.Module):
        def __init__(self, f1: int = 8, d: int = 2, f2: int = 16) -> None:
            super().__init__()
            self.temporal = nn.Sequential(
                nn.Conv2d(1, f1, (1, 32), padding=(0, 16), bias=False), nn.BatchNorm2d(f1)
            )
            self.spatial = nn.Conv2d(f1, f1 * d, (chans, 1), groups=f1, bias=False)
            self.block1 = nn.Sequential(
                nn.BatchNorm2d(f1 * d), nn.ELU(), nn.AvgPool2d((1, 4)), nn.Dropout(0.25)
            )
            self.block2 = nn.Sequential(
                nn.Conv2d(f1 * d, f1 * d, (1, 16), padding=(0, 8), groups=f1 * d, bias=False),
                nn.Conv2d(f1 * d, f2, 1, bias=False), nn.BatchNorm2d(f2), nn.ELU(),
                nn.AvgPool2d((1, 8)), nn.Dropout(0.25),
            )  # fmt: skip
            self.classify = nn.Linear(f2 * 4, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.block2(self.block1(self.spatial(self.temporal(x))))
            return self.classify(h.flatten(1))

    model = EEGNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    if bug == "frozen_by_mistake":  # bug: left from the subject-transfer variant, after the optimizer
        for p in model.temporal.parameters():
            p.requires_grad = False
    loader = DataLoader(TensorDataset(x[:640], y[:640]), batch_size=32, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                model.spatial.weight.data = torch.renorm(model.spatial.weight.data, 2, 0, 1.0)
                model.classify.weight.data = torch.renorm(model.classify.weight.data, 2, 0, 0.25)
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x[640:]).argmax(1) == y[640:]).float().mean()
        if epoch % 5 == 4:
            print(f"epoch {epoch + 1}: loss {np.mean(losses[-20:]):.4f} val acc {acc:.3f}")
    hook.close()
    return losses


def ecg_beats_resnet1d_weighted_sampler(
    path: str, epochs: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """ECG beat classification (normal, supraventricular, ventricular, fusion; 187-sample
    beats, classes 80/10/7/3 %): a residual 1-D CNN with BatchNorm and dropout, a
    `WeightedRandomSampler` with inverse class frequencies, `CrossEntropyLoss`, SGD 0.01 with
    Nesterov momentum, `ReduceLROnPlateau` on the validation loss, batch 64."""
    g = _seed(seed)
    n, length = 3000, 187
    y = torch.multinomial(torch.tensor([0.8, 0.1, 0.07, 0.03]), n, replacement=True, generator=g)
    t = torch.linspace(0, 1, length)
    qrs_width = torch.tensor([0.015, 0.015, 0.05, 0.03])[y][:, None]
    r_pos = torch.tensor([0.3, 0.22, 0.3, 0.28])[y][:, None] + 0.01 * torch.randn(n, 1, generator=g)
    p_amp = torch.tensor([0.15, 0.02, 0.0, 0.1])[y][:, None]
    beat = torch.exp(-(((t - r_pos) / qrs_width) ** 2)) * (1 + 0.1 * torch.randn(n, 1, generator=g))
    beat = beat + p_amp * torch.exp(-(((t - r_pos + 0.12) / 0.03) ** 2))
    beat = (
        beat + 0.3 * torch.exp(-(((t - r_pos - 0.3) / 0.06) ** 2)) * torch.where(y == 2, -1.0, 1.0)[:, None]
    )
    x = (beat + 0.05 * torch.randn(n, length, generator=g)).unsqueeze(1)
    counts = torch.bincount(y[:2400], minlength=4).float()
    sampler = WeightedRandomSampler((1.0 / counts)[y[:2400]], num_samples=2400, replacement=True, generator=g)
    loader = DataLoader(TensorDataset(x[:2400], y[:2400]), batch_size=64, sampler=sampler)

    class Block(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv1d(c, c, 5, padding=2), nn.BatchNorm1d(c), nn.ReLU(), nn.Conv1d(c, c, 5, padding=2),
                nn.BatchNorm1d(c),
            )  # fmt: skip

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.max_pool1d(F.relu(x + self.body(x)), 2)

    model = nn.Sequential(
        nn.Conv1d(1, 16, 5, padding=2), Block(16), Block(16), Block(16), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
        nn.Dropout(0.3), nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4),
    )  # fmt: skip
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        if bug != "train_in_eval_mode" or epoch == 0:  # bug: model.train() only before the first epoch
            model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            out = model(x[2400:])
            val_loss = criterion(out, y[2400:]).item()
            acc = (out.argmax(1) == y[2400:]).float().mean()
        scheduler.step(val_loss)
        if epoch % 3 == 2:
            print(
                f"epoch {epoch + 1}: loss {np.mean(losses[-38:]):.4f} val loss {val_loss:.4f} acc {acc:.3f}"
            )
    hook.close()
    return losses


def hmm_forward_algorithm_adam(
    path: str, steps: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    """An unsupervised hidden Markov model (6 states, 20 symbols) fitted by gradient descent on
    the negative log-likelihood per token from the forward algorithm in log space
    (`logsumexp` over the previous states), parameters as unnormalized logits, Adam 0.05, batches
    of 16 sequences of 120 symbols; Viterbi accuracy under the best state-to-state mapping."""
    g = _seed(seed)
    k, v, length, n = 6, 20, 120, 400
    trans = torch.full((k, k), 0.04) + 0.76 * torch.eye(k)
    trans = trans / trans.sum(1, keepdim=True)
    emit = torch.softmax(3 * torch.randn(k, v, generator=g), 1)
    states = torch.zeros(n, length, dtype=torch.long)
    obs = torch.zeros(n, length, dtype=torch.long)
    states[:, 0] = torch.randint(0, k, (n,), generator=g)
    for i in range(length):
        if i:
            states[:, i] = torch.multinomial(trans[states[:, i - 1]], 1, generator=g).squeeze(1)
        obs[:, i] = torch.multinomial(emit[states[:, i]], 1, generator=g).squeeze(1)

    class HMM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.start_logits = nn.Parameter(torch.zeros(k))
            self.trans_logits = nn.Parameter(0.1 * torch.randn(k, k))
            self.emit_logits = nn.Parameter(0.1 * torch.randn(k, v))

        def forward(self, o: torch.Tensor) -> torch.Tensor:
            log_start = self.start_logits.log_softmax(0)
            log_trans = self.trans_logits.log_softmax(1)
            log_emit = self.emit_logits.log_softmax(1)
            if bug == "log_zero_nan":  # bug: the textbook recursion on probabilities, log at the end
                alpha = log_start.exp() * log_emit.exp()[:, o[:, 0]].T
                for i in range(1, o.size(1)):
                    alpha = (alpha @ log_trans.exp()) * log_emit.exp()[:, o[:, i]].T
                return torch.log(alpha.sum(1))
            alpha = log_start + log_emit[:, o[:, 0]].T
            for i in range(1, o.size(1)):
                alpha = torch.logsumexp(alpha[:, :, None] + log_trans, 1) + log_emit[:, o[:, i]].T
            return torch.logsumexp(alpha, 1)

        def viterbi(self, o: torch.Tensor) -> torch.Tensor:
            log_trans = self.trans_logits.log_softmax(1)
            log_emit = self.emit_logits.log_softmax(1)
            delta = self.start_logits.log_softmax(0) + log_emit[:, o[:, 0]].T
            back = []
            for i in range(1, o.size(1)):
                scores = delta[:, :, None] + log_trans
                delta, arg = scores.max(1)
                delta = delta + log_emit[:, o[:, i]].T
                back.append(arg)
            path_ = [delta.argmax(1)]
            for arg in reversed(back):
                path_.append(arg.gather(1, path_[-1][:, None]).squeeze(1))
            return torch.stack(path_[::-1], 1)

    model = HMM()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for step in range(steps):
        idx = torch.randint(0, 360, (16,), generator=g)
        loss = -model(obs[idx]).mean() / length
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 50 == 49:
            with torch.no_grad():
                pred = model.viterbi(obs[360:])
            conf = torch.zeros(k, k)
            conf.index_put_(
                (pred.flatten(), states[360:].flatten()), torch.ones(pred.numel()), accumulate=True
            )
            print(
                f"step {step + 1}: nll/token {np.mean(losses[-50:]):.4f} mapped acc {conf.max(1).values.sum() / pred.numel():.3f}"
            )
    hook.close()
    return losses


def hypergraph_hgnn_nodes(path: str, epochs: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    """HGNN node classification (Feng et al. 2019): 600 nodes of 5 classes, hyperedges as
    co-membership groups (mostly within a class), node features noisy class prototypes;
    `G = Dv^-1/2 H W De^-1 H^T Dv^-1/2`, two `HGNN_conv` layers with dropout 0.5, Adam 0.01 with
    weight decay 5e-4, full batch, the loss on 120 labelled nodes, accuracy on the rest."""
    g = _seed(seed)
    n, classes, d, n_edges = 600, 5, 64, 300
    y = torch.randint(0, classes, (n,), generator=g)
    protos = torch.randn(classes, d, generator=g)
    x = 0.5 * protos[y] + torch.randn(n, d, generator=g)
    h = torch.zeros(n, n_edges)
    for e in range(n_edges):
        c = int(torch.randint(0, classes, (1,), generator=g))
        pool = (y == c).nonzero().squeeze(1) if torch.rand(1, generator=g) < 0.8 else torch.arange(n)
        members = pool[torch.randperm(len(pool), generator=g)[: int(torch.randint(3, 8, (1,), generator=g))]]
        h[members, e] = 1.0
    h[torch.arange(n), torch.randint(0, n_edges, (n,), generator=g)] = 1.0
    dv = h.sum(1).pow(-0.5)
    de = h.sum(0).pow(-1)
    big_g = dv[:, None] * (h * de) @ h.T * dv[None, :]
    train = torch.zeros(n, dtype=torch.bool)
    train[torch.randperm(n, generator=g)[:120]] = True

    class HGNNConv(nn.Module):
        def __init__(self, din: int, dout: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.empty(din, dout))
            self.bias = nn.Parameter(torch.empty(dout))
            self.reset_parameters()

        def reset_parameters(self) -> None:
            stdv = 1.0 / math.sqrt(self.weight.size(1))
            self.weight.data.uniform_(-stdv, stdv)
            if bug == "dead_relu_init":  # bug: "start sparse"
                self.bias.data.fill_(-1.0)
            else:
                self.bias.data.uniform_(-stdv, stdv)

        def forward(self, x: torch.Tensor, gmat: torch.Tensor) -> torch.Tensor:
            return gmat @ (x @ self.weight + self.bias)

    class HGNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hgc1 = HGNNConv(d, 64)
            self.hgc2 = HGNNConv(64, classes)

        def forward(self, x: torch.Tensor, gmat: torch.Tensor) -> torch.Tensor:
            x = F.dropout(F.relu(self.hgc1(x, gmat)), 0.5, self.training)
            return self.hgc2(x, gmat)

    model = HGNN()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        optimizer.zero_grad()
        loss = criterion(model(x, big_g)[train], y[train])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if epoch % 50 == 49:
            model.eval()
            with torch.no_grad():
                acc = (model(x, big_g).argmax(1)[~train] == y[~train]).float().mean()
            print(f"epoch {epoch + 1}: loss {loss.item():.4f} test acc {acc:.3f}")
    hook.close()
    return losses


def deepwalk_skipgram_sparse_sgd(path: str, epochs: int = 3, seed: int = 0) -> list[float]:
    """DeepWalk: 10 truncated random walks of length 20 from every node of a 4-community graph,
    windows of 4, skip-gram with 5 negatives drawn from the unigram^0.75 distribution, input and
    output `nn.Embedding(sparse=True)`, the loss written with `F.logsigmoid` and summed over the
    batch's pairs (word2vec's per-pair SGD), plain SGD whose lr decays linearly from 0.025 as in
    word2vec, batch 512 (the per-pair mean logged); a logistic-regression probe on the
    learned vectors at the end."""
    g = _seed(seed)
    n, comm, dim = 400, 4, 32
    block = torch.arange(n) % comm
    p = torch.where(block[:, None] == block[None, :], 0.06, 0.004)
    adj = torch.triu((torch.rand(n, n, generator=g) < p).float(), 1)
    adj = adj + adj.T
    adj[torch.arange(n), (torch.arange(n) + comm) % n] = 1.0
    neighbors = [adj[i].nonzero().squeeze(1).tolist() for i in range(n)]
    rng = random.Random(seed)
    walks = []
    for _ in range(10):
        for start in rng.sample(range(n), n):
            walk = [start]
            for _ in range(19):
                walk.append(rng.choice(neighbors[walk[-1]]))
            walks.append(walk)
    pairs = [
        (w[i], w[j]) for w in walks for i in range(20) for j in range(max(0, i - 4), min(20, i + 5)) if i != j
    ]
    pairs_t = torch.tensor(pairs)
    freq = torch.bincount(torch.tensor(walks).flatten(), minlength=n).float() ** 0.75

    class SkipGram(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.u = nn.Embedding(n, dim, sparse=True)
            self.v = nn.Embedding(n, dim, sparse=True)
            nn.init.uniform_(self.u.weight, -0.5 / dim, 0.5 / dim)
            nn.init.zeros_(self.v.weight)

        def forward(self, c: torch.Tensor, o: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
            uc = self.u(c)
            pos = F.logsigmoid((uc * self.v(o)).sum(-1))
            negs = F.logsigmoid(-(self.v(neg) @ uc.unsqueeze(-1)).squeeze(-1)).sum(-1)
            return -(pos + negs).sum()  # summed over pairs, as word2vec's per-pair SGD

    model = SkipGram()
    lr0 = 0.025
    optimizer = torch.optim.SGD(model.parameters(), lr=lr0)
    batch = 512
    total = epochs * math.ceil(len(pairs_t) / batch)
    step_budget = min(total, 400)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    step = 0
    for _ in range(epochs):
        perm = torch.randperm(len(pairs_t), generator=g)
        for i in range(0, len(perm), batch):
            if step >= step_budget:
                break
            b = pairs_t[perm[i : i + batch]]
            neg = torch.multinomial(freq, len(b) * 5, replacement=True, generator=g).view(len(b), 5)
            for group in optimizer.param_groups:
                group["lr"] = max(lr0 * (1 - step / step_budget), lr0 * 1e-4)
            optimizer.zero_grad()
            loss = model(b[:, 0], b[:, 1], neg)
            loss.backward()
            optimizer.step()
            losses.append(loss.item() / len(b))
            step += 1
    emb = model.u.weight.detach()
    probe = nn.Linear(dim, comm)
    popt = torch.optim.Adam(probe.parameters(), lr=0.05)
    for _ in range(100):
        popt.zero_grad()
        F.cross_entropy(probe(emb[:300]), block[:300]).backward()
        popt.step()
    acc = (probe(emb[300:]).argmax(1) == block[300:]).float().mean()
    print(f"loss {losses[0]:.4f} -> {np.mean(losses[-20:]):.4f}, probe acc {acc:.3f}")
    hook.close()
    return losses


# ============================================================================= text and tabular


def linear_svm_hashed_ngrams_asgd(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A multi-class linear SVM on hashed word uni- and bigrams (a HashingVectorizer with 2**12
    buckets, signed, l2-normalized rows): `nn.Linear`, `MultiMarginLoss` (the Weston-Watkins
    hinge), `ASGD` with weight decay 1e-4 (the L2 term), batch 64; evaluated with ASGD's averaged
    weights swapped in."""
    g = _seed(seed)
    classes, vocab, n, buckets = 6, 500, 3000, 2**12
    topic_words = torch.randint(0, vocab, (classes, 25), generator=g)
    docs, labels = [], []
    for i in range(n):
        c = i % classes
        words = torch.randint(0, vocab, (30,), generator=g)
        k = int(torch.randint(4, 9, (1,), generator=g))
        words[:k] = topic_words[c, torch.randint(0, 25, (k,), generator=g)]
        docs.append(words[torch.randperm(30, generator=g)].tolist())
        labels.append(c)
    order = torch.randperm(n, generator=g).tolist()
    docs = [docs[i] for i in order]
    labels = [labels[i] for i in order]
    if bug == "shuffled_labels":  # bug: labels taken from a copy of the corpus sorted by its text
        labels = [lab for _, lab in sorted(zip(docs, labels, strict=True), key=lambda d: d[0])]

    def hash_doc(words: list[int]) -> torch.Tensor:
        vec = torch.zeros(buckets)
        for tok in [*((w,) for w in words), *zip(words[:-1], words[1:], strict=True)]:
            hv = abs(hash(tok))  # a tuple of ints hashes the same in every process
            vec[hv % buckets] += 1.0 if (hv >> 13) & 1 else -1.0
        return vec / vec.norm().clamp(min=1e-12)

    x = torch.stack([hash_doc(d) for d in docs])
    y = torch.tensor(labels)
    model = nn.Linear(buckets, classes)
    criterion = nn.MultiMarginLoss()
    optimizer = torch.optim.ASGD(model.parameters(), lr=0.5, weight_decay=1e-4, t0=200)
    loader = DataLoader(TensorDataset(x[:2500], y[:2500]), batch_size=64, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        with torch.no_grad():
            backup = [p.clone() for p in model.parameters()]
            for p in model.parameters():
                p.copy_(optimizer.state[p]["ax"])
            acc = (model(x[2500:]).argmax(1) == y[2500:]).float().mean()
            for p, b in zip(model.parameters(), backup, strict=True):
                p.copy_(b)
        if epoch % 2 == 1:
            print(f"epoch {epoch + 1}: hinge {np.mean(losses[-40:]):.4f} averaged acc {acc:.3f}")
    hook.close()
    return losses


def adversarial_debiasing_income(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Adversarial debiasing (Zhang, Lemoine & Mitchell 2018) of an income-style classifier:
    the predictor (an MLP) gives a logit; the adversary sees sigmoid(s * logit), the label and
    the logit and predicts the sensitive attribute (equality of odds). Predictor: Adam 1e-3 on
    `BCEWithLogitsLoss` minus alpha = 0.3 times the adversary's loss, with the projection of its
    gradient on the adversary's removed; adversary: Adam 1e-3; one warm-up epoch without the
    adversary; batch 128. The losses are the predictor's task losses."""
    g = _seed(seed)
    n, d = 6000, 12
    a = (torch.rand(n, generator=g) < 0.4).float()  # sensitive attribute
    x = torch.randn(n, d, generator=g)
    x[:, 0] += 0.8 * a  # a proxy of the attribute
    y = (
        torch.rand(n, generator=g)
        < torch.sigmoid(1.2 * x[:, 1] - 0.8 * x[:, 2] + 0.6 * x[:, 0] + 0.3 * x[:, 3])
    ).float()
    loader = DataLoader(
        TensorDataset(x[:5000], y[:5000], a[:5000]), batch_size=128, shuffle=True, generator=g
    )
    predictor = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))

    class Adversary(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c = nn.Parameter(torch.ones(1))
            self.net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1))

        def forward(self, logit: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
            s = torch.sigmoid((1 + self.c.abs()) * logit)
            return self.net(torch.stack([s, s * yb, s * (1 - yb)], 1)).squeeze(1)

    adversary = Adversary()
    criterion = nn.BCEWithLogitsLoss()
    lr = 1e-1 if bug == "lr_x100" else 1e-3  # bug: 1e-1 typed for 1e-3
    opt_p = torch.optim.Adam(predictor.parameters(), lr=lr)
    opt_a = torch.optim.Adam(adversary.parameters(), lr=1e-3)
    alpha = 0.3
    hook = Hook(path)
    hook.register_module(predictor)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        for xb, yb, ab in loader:
            logit = predictor(xb).squeeze(1)
            loss_p = criterion(logit, yb)
            if epoch == 0:
                opt_p.zero_grad()
                loss_p.backward()
                opt_p.step()
            else:
                loss_a = criterion(adversary(logit, yb), ab)
                params = list(predictor.parameters())
                g_p = torch.autograd.grad(loss_p, params, retain_graph=True)
                g_a = torch.autograd.grad(loss_a, params, retain_graph=True)
                opt_p.zero_grad()
                for p, gp, ga in zip(params, g_p, g_a, strict=True):
                    unit = ga / (ga.norm() + 1e-8)
                    p.grad = gp - (gp * unit).sum() * unit - alpha * ga
                opt_p.step()
                opt_a.zero_grad()
                criterion(adversary(logit.detach(), yb), ab).backward()
                opt_a.step()
            losses.append(loss_p.item())
        with torch.no_grad():
            pred = (predictor(x[5000:]).squeeze(1) > 0).float()
            acc = (pred == y[5000:]).float().mean()
            pos = y[5000:] == 1
            gap = (pred[pos & (a[5000:] == 1)].mean() - pred[pos & (a[5000:] == 0)].mean()).abs()
        if epoch % 2 == 1:
            print(f"epoch {epoch + 1}: loss {np.mean(losses[-40:]):.4f} acc {acc:.3f} TPR gap {gap:.3f}")
    hook.close()
    return losses


def bigru_masked_imputation(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """Imputation of multivariate sensor series (8 correlated channels, 48 steps, 20 % missing):
    a bidirectional GRU fed the zero-filled values and the observation mask, a linear head per
    step; in training another 15 % of the observed entries are hidden and the MAE is taken on
    them only (the BRITS/SAITS masked-imputation task), NAdam 2e-3, norm clipping at 1, batch 32;
    the validation MAE on held-out entries each epoch."""
    g = _seed(seed)
    n, steps_t, chans = 800, 48, 8
    t = torch.arange(steps_t).float()
    freq = 0.1 + 0.3 * torch.rand(n, 3, 1, generator=g)
    latent = torch.sin(freq * t + 6 * torch.rand(n, 3, 1, generator=g))
    mix = torch.randn(3, chans, generator=g)
    series = torch.einsum("nkt,kc->ntc", latent, mix) + 0.1 * torch.randn(n, steps_t, chans, generator=g)
    series = (series - series[:640].mean((0, 1))) / series[:640].std((0, 1))
    observed = (torch.rand(n, steps_t, chans, generator=g) > 0.2).float()

    class BiGRUImputer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(2 * chans, 64, batch_first=True, bidirectional=True)
            self.head = nn.Linear(128, chans)

        def forward(self, v: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
            out, _ = self.gru(torch.cat([v * m, m], -1))
            return self.head(out)

    model = BiGRUImputer()
    optimizer = torch.optim.NAdam(model.parameters(), lr=2e-3)
    loader = DataLoader(TensorDataset(series[:640], observed[:640]), batch_size=32, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    val_hide = (torch.rand(160, steps_t, chans, generator=g) < 0.15).float() * observed[640:]
    for epoch in range(epochs):
        model.train()
        for vb, mb in loader:
            hide = (torch.rand(vb.shape, generator=g) < 0.15).float() * mb
            pred = model(vb, mb - hide)
            loss = ((pred - vb).abs() * hide).sum() / hide.sum().clamp(min=1)
            if bug != "no_zero_grad":  # bug: the zero_grad line lost in a refactor
                optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            pred = model(series[640:], observed[640:] - val_hide)
            mae = ((pred - series[640:]).abs() * val_hide).sum() / val_hide.sum()
        if epoch % 2 == 1:
            print(f"epoch {epoch + 1}: train MAE {np.mean(losses[-20:]):.4f} val MAE {mae:.4f}")
    hook.close()
    return losses


def monotonic_credit_scoring(path: str, epochs: int = 10, seed: int = 0) -> list[float]:
    """A credit-default model monotone in debt-to-income, missed payments and utilization: the
    first layer's weights on those three features and the output layer's weights kept positive
    by a softplus parametrization (`torch.nn.utils.parametrize.register_parametrization`), so
    the score rises with them through the ReLUs; free weights on the other features;
    `BCEWithLogitsLoss(pos_weight)` for the 8 % defaults, Adagrad 0.05, batch 256, the
    validation AUC each epoch."""
    from torch.nn.utils import parametrize

    g = _seed(seed)
    n, d_mono, d_free = 10000, 3, 7
    xm = torch.randn(n, d_mono, generator=g)
    xf = torch.randn(n, d_free, generator=g)
    logit = (
        -3.0 + 0.9 * xm[:, 0] + 0.6 * F.softplus(2 * xm[:, 1]) + 0.5 * xm[:, 2] + 0.4 * xf[:, 0] * xf[:, 1]
    )
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()

    class Positive(nn.Module):
        def forward(self, w: torch.Tensor) -> torch.Tensor:
            return F.softplus(w)

    class MonotoneNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mono = nn.Linear(d_mono, 32)
            self.free = nn.Sequential(nn.Linear(d_free, 32), nn.ReLU(), nn.Linear(32, 32))
            self.out = nn.Linear(32, 1)
            parametrize.register_parametrization(self.mono, "weight", Positive())
            parametrize.register_parametrization(self.out, "weight", Positive())

        def forward(self, m: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
            return self.out(F.relu(self.mono(m) + self.free(f))).squeeze(1)

    model = MonotoneNet()
    pos = y[:8000].mean()
    criterion = nn.BCEWithLogitsLoss(pos_weight=(1 - pos) / pos)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
    loader = DataLoader(
        TensorDataset(xm[:8000], xf[:8000], y[:8000]), batch_size=256, shuffle=True, generator=g
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        for mb, fb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(mb, fb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        with torch.no_grad():
            s = model(xm[8000:], xf[8000:])
            yv = y[8000:].bool()
            auc = (s[yv][:, None] > s[~yv][None, :]).float().mean()
        if epoch % 3 == 2:
            print(f"epoch {epoch + 1}: loss {np.mean(losses[-32:]):.4f} val AUC {auc:.3f}")
    hook.close()
    return losses


def protein_secondary_structure_bilstm(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Protein secondary structure (Q3: helix, strand, coil) per residue: amino-acid embeddings,
    a width-7 convolution and a two-layer BiLSTM over `pack_padded_sequence`, a per-residue
    linear head, `CrossEntropyLoss(ignore_index=-100)` on the padded positions, AdamW 1e-3 with a
    linear warm-up over 50 steps (`LambdaLR`), batch 16 of variable-length chains; Q3 accuracy on
    held-out chains."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    g = _seed(seed)
    n, max_len, aa = 500, 100, 20
    helix_pref = torch.rand(aa, generator=g)
    lengths = torch.randint(40, max_len + 1, (n,), generator=g)
    seqs = torch.zeros(n, max_len, dtype=torch.long)
    tags = torch.full((n, max_len), -100, dtype=torch.long)
    for i in range(n):
        seg_tags, pos = [], 0
        while pos < int(lengths[i]):
            s = int(torch.randint(0, 3, (1,), generator=g))
            seg = int(torch.randint(4, 12, (1,), generator=g))
            seg_tags += [s] * seg
            pos += seg
        st = torch.tensor(seg_tags[: int(lengths[i])])
        bias = torch.stack([helix_pref, 1 - helix_pref, torch.full((aa,), 0.5)])[st] * 3
        res = torch.multinomial(
            torch.softmax(bias + torch.randn(len(st), aa, generator=g), 1), 1, generator=g
        )
        seqs[i, : len(st)] = res.squeeze(1) + 1
        tags[i, : len(st)] = st

    class SSPredictor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(aa + 1, 32, padding_idx=0)
            self.conv = nn.Conv1d(32, 64, 7, padding=3)
            self.lstm = nn.LSTM(64, 64, num_layers=2, batch_first=True, bidirectional=True, dropout=0.1)
            head: list[nn.Module] = [nn.Linear(128, 3)]
            if bug == "softmax_before_ce":  # bug: "probabilities per residue" before CrossEntropyLoss
                head.append(nn.Softmax(dim=-1))
            self.head = nn.Sequential(*head)

        def forward(self, s: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
            h = F.relu(self.conv(self.emb(s).transpose(1, 2))).transpose(1, 2)
            packed = pack_padded_sequence(h, lens, batch_first=True, enforce_sorted=False)
            out, _ = self.lstm(packed)
            out, _ = pad_packed_sequence(out, batch_first=True, total_length=s.size(1))
            return self.head(out)

    model = SSPredictor()
    criterion = nn.CrossEntropyLoss(ignore_index=-100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 50))
    loader = DataLoader(
        TensorDataset(seqs[:400], tags[:400], lengths[:400]), batch_size=16, shuffle=True, generator=g
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for sb, tb, lb in loader:
            optimizer.zero_grad()
            loss = criterion(model(sb, lb).reshape(-1, 3), tb.reshape(-1))
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            pred = model(seqs[400:], lengths[400:]).argmax(-1)
            valid = tags[400:] != -100
            q3 = (pred[valid] == tags[400:][valid]).float().mean()
        if epoch % 2 == 1:
            print(f"epoch {epoch + 1}: loss {np.mean(losses[-25:]):.4f} Q3 {q3:.3f}")
    hook.close()
    return losses


def smiles_char_gru_property(path: str, epochs: int = 10, seed: int = 0) -> list[float]:
    """Molecular property regression from SMILES-like strings: a character vocabulary, a
    two-layer GRU over the padded strings with the last valid hidden state gathered, a linear
    head to a standardized solubility-like target, `HuberLoss(delta=1.0)`, Adamax 2e-3,
    `StepLR(4, 0.5)`, batch 64, the validation RMSE each epoch."""
    g = _seed(seed)
    alphabet = list("CNOcnoFCl()=#123[]@H+-")
    chars = {c: i + 1 for i, c in enumerate(alphabet)}
    atoms = ["C", "N", "O", "c", "n", "o", "F", "Cl"]
    weights = torch.tensor([0.4, 0.1, 0.12, 0.2, 0.05, 0.03, 0.05, 0.05])
    n, max_len = 3000, 40
    strings, targets = [], []
    for _ in range(n):
        k = int(torch.randint(5, 14, (1,), generator=g))
        picks = torch.multinomial(weights, k, replacement=True, generator=g).tolist()
        s, polar, rings, branches = "", 0, 0, 0
        for j, a in enumerate(picks):
            s += atoms[a]
            polar += atoms[a] in ("N", "O", "n", "o")
            if torch.rand(1, generator=g) < 0.15 and j < k - 1:
                s += "("
                branches += 1
                s += atoms[int(torch.randint(0, 3, (1,), generator=g))] + ")"
            if torch.rand(1, generator=g) < 0.08:
                s += "="
        if torch.rand(1, generator=g) < 0.3:
            s = "c1" + s + "1"
            rings += 1
        strings.append(s[:max_len])
        targets.append(0.8 * polar - 0.25 * k - 0.6 * rings + 0.2 * branches)
    tokens = torch.zeros(n, max_len, dtype=torch.long)
    lengths = torch.zeros(n, dtype=torch.long)
    for i, s in enumerate(strings):
        ids = [chars[ch] for ch in s]
        tokens[i, : len(ids)] = torch.tensor(ids)
        lengths[i] = len(ids)
    y = torch.tensor(targets) + 0.3 * torch.randn(n, generator=g)
    y = (y - y[:2500].mean()) / y[:2500].std()

    class SmilesGRU(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(len(alphabet) + 1, 32, padding_idx=0)
            self.gru = nn.GRU(32, 64, num_layers=2, batch_first=True)
            self.head = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))

        def forward(self, s: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
            out, _ = self.gru(self.emb(s))
            last = out[torch.arange(len(s)), lens - 1]
            return self.head(last).squeeze(1)

    model = SmilesGRU()
    criterion = nn.HuberLoss(delta=1.0)
    optimizer = torch.optim.Adamax(model.parameters(), lr=2e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 4, 0.5)
    loader = DataLoader(
        TensorDataset(tokens[:2500], lengths[:2500], y[:2500]), batch_size=64, shuffle=True, generator=g
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for sb, lb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(sb, lb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            rmse = (model(tokens[2500:], lengths[2500:]) - y[2500:]).pow(2).mean().sqrt()
        if epoch % 3 == 2:
            print(f"epoch {epoch + 1}: loss {np.mean(losses[-40:]):.4f} val RMSE {rmse:.3f}")
    hook.close()
    return losses


# ============================================================================= finance


def deep_hedging_call_cvar(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """Deep hedging (Buehler et al. 2019) of a short at-the-money call under geometric Brownian
    motion, 20 rebalancing dates, proportional transaction costs of 0.2 %: a strategy MLP of
    (time to maturity, log-moneyness, previous position) to the new position, the P&L of premium
    + hedge gains - costs - payoff, the loss the CVaR at 90 % in its Rockafellar-Uryasev form
    with a learnable threshold w; 1024 fresh paths per step, Adam 5e-3."""
    g = _seed(seed)
    dates, sigma, s0, strike, dt, cost = 20, 0.2, 1.0, 1.0, 1 / 52, 0.002
    d1 = (0.5 * sigma**2 * dates * dt) / (sigma * math.sqrt(dates * dt))
    normal = torch.distributions.Normal(0.0, 1.0)
    premium = float(
        s0 * normal.cdf(torch.tensor(d1))
        - strike * normal.cdf(torch.tensor(d1 - sigma * math.sqrt(dates * dt)))
    )

    if bug == "deep_sigmoid":  # bug: "positions live in [0, 1]", so sigmoids all the way down
        layers: list[nn.Module] = [nn.Linear(3, 32), nn.Sigmoid()]
        for _ in range(7):
            layers += [nn.Linear(32, 32), nn.Sigmoid()]
        layers.append(nn.Linear(32, 1))
        strategy = nn.Sequential(*layers)
    else:
        strategy = nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))

    class Hedger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.strategy = strategy
            self.w = nn.Parameter(torch.zeros(1))

        def forward(self, paths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            pos = torch.zeros(paths.size(0), 1)
            pnl = torch.full((paths.size(0), 1), premium)
            for k in range(dates):
                feats = torch.cat(
                    [torch.full_like(pos, (dates - k) * dt), torch.log(paths[:, k : k + 1] / strike), pos], 1
                )
                new = self.strategy(feats)
                pnl = pnl - cost * (new - pos).abs() * paths[:, k : k + 1]
                pnl = pnl + new * (paths[:, k + 1 : k + 2] - paths[:, k : k + 1])
                pos = new
            pnl = pnl - (paths[:, -1:] - strike).clamp(min=0)
            return pnl.squeeze(1), self.w

    model = Hedger()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for step in range(steps):
        z = torch.randn(1024, dates, generator=g)
        log_s = torch.cumsum(-0.5 * sigma**2 * dt + sigma * math.sqrt(dt) * z, 1)
        paths = s0 * torch.exp(torch.cat([torch.zeros(1024, 1), log_s], 1))
        pnl, w = model(paths)
        loss = w + F.relu(-pnl - w).mean() / (1 - 0.9)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 99:
            print(f"step {step + 1}: CVaR90 {np.mean(losses[-100:]):.4f} mean P&L {pnl.mean().item():.4f}")
    hook.close()
    return losses


def portfolio_lstm_sharpe(path: str, epochs: int = 15, seed: int = 0) -> list[float]:
    """A portfolio LSTM trained end to end on the Sharpe ratio (Zhang, Zohren & Roberts 2020):
    windows of 50 days of returns of 5 assets (a factor model with momentum-like drift), an
    LSTM to softmax long-only weights for the next day, the loss minus the annualized Sharpe of
    the portfolio's next-day returns over a batch of 64 consecutive days, RMSprop 1e-3."""
    g = _seed(seed)
    days, assets, window = 1500, 5, 50
    regime = torch.sin(torch.arange(days) / 60.0)[:, None] * torch.tensor([1.0, -1.0, 0.5, -0.5, 0.0])
    rets = 0.0004 + 0.0015 * regime + 0.01 * torch.randn(days, assets, generator=g)
    rets = rets + 0.006 * torch.randn(days, 1, generator=g)
    xs = torch.stack([rets[i : i + window] for i in range(days - window - 1)]) / 0.01
    nxt = rets[window : days - 1]

    class Allocator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(assets, 32, batch_first=True)
            self.head = nn.Linear(32, assets)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out, _ = self.lstm(x)
            return torch.softmax(self.head(out[:, -1]), -1)

    model = Allocator()
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    n_train = 1100
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for epoch in range(epochs):
        starts = torch.randperm(n_train - 64, generator=g)[:16]
        model.train()
        for s in starts.tolist():
            w = model(xs[s : s + 64])
            port = (w * nxt[s : s + 64]).sum(1)
            loss = -port.mean() / (port.std() + 1e-8) * math.sqrt(252)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            port = (model(xs[n_train:]) * nxt[n_train:]).sum(1)
            sharpe = port.mean() / port.std() * math.sqrt(252)
        if epoch % 5 == 4:
            print(f"epoch {epoch + 1}: train -Sharpe {np.mean(losses[-16:]):.3f} test Sharpe {sharpe:.3f}")
    hook.close()
    return losses


# ============================================================================= vision and audio


def _glyphs(g: torch.Generator, n: int, classes: int, size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 glyph images: one random 4x4 stroke pattern per class, upsampled, shifted and
    noised."""
    protos = (torch.rand(classes, 1, 4, 4, generator=g) < 0.45).float()
    protos = F.interpolate(protos, size=(size - 4, size - 4), mode="nearest")
    y = torch.randint(0, classes, (n,), generator=g)
    img = torch.zeros(n, 1, size, size)
    dx = torch.randint(0, 5, (n,), generator=g)
    dy = torch.randint(0, 5, (n,), generator=g)
    for i in range(n):
        img[i, :, dy[i] : dy[i] + size - 4, dx[i] : dx[i] + size - 4] = protos[y[i]]
    img = (img * 200 + 40 * torch.randn(img.shape, generator=g) + 30).clamp(0, 255)
    return img.to(torch.uint8), y


def crowd_layer_noisy_annotators(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Learning from crowds with a crowd layer (Rodrigues & Pereira 2018): a glyph CNN's softmax
    goes through one learnable 10x10 matrix per annotator (initialized to the identity); five
    annotators of accuracies 0.9 .. 0.35 (the worst confusing classes systematically) each label
    about 60 % of the images; cross-entropy on the given labels only, Adam 1e-3, batch 64;
    evaluation of the bare CNN against the true classes."""
    g = _seed(seed)
    n, classes, annot = 3000, 10, 5
    images, truth = _glyphs(g, n, classes)
    acc_a = torch.tensor([0.9, 0.8, 0.65, 0.5, 0.35])
    labels = torch.full((n, annot), -1, dtype=torch.long)
    for r in range(annot):
        given = torch.rand(n, generator=g) < 0.6
        correct = torch.rand(n, generator=g) < acc_a[r]
        wrong = (truth + 1 + r % 3) % classes if r >= 3 else torch.randint(0, classes, (n,), generator=g)
        labels[:, r] = torch.where(given, torch.where(correct, truth, wrong), -1)
    x = images.float() / 255.0
    if bug == "inputs_x255":  # bug: the uint8 bytes cast to float, the /255 forgotten
        x = images.float()

    class CrowdNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cnn = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
                nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 16, 64), nn.ReLU(), nn.Linear(64, classes),
            )  # fmt: skip
            self.crowd = nn.Parameter(torch.eye(classes).repeat(annot, 1, 1))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            logits = self.cnn(x)
            per_annotator = torch.einsum("bk,rkj->brj", torch.softmax(logits, -1), self.crowd)
            return logits, per_annotator

    model = CrowdNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(x[:2500], labels[:2500]), batch_size=64, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, lb in loader:
            _, out = model(xb)
            loss = F.cross_entropy(out.reshape(-1, classes), lb.reshape(-1), ignore_index=-1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x[2500:])[0].argmax(1) == truth[2500:]).float().mean()
        if epoch % 2 == 1:
            print(f"epoch {epoch + 1}: loss {np.mean(losses[-40:]):.4f} true-label acc {acc:.3f}")
    hook.close()
    return losses


def gatys_style_transfer_canvas(path: str, steps: int = 200, seed: int = 0) -> list[float]:
    """Gatys-style transfer with the image as the trained parameter: a `Canvas` module holding
    the pixels (initialized from the content image), a fixed random VGG-like feature net (random
    shallow features carry texture, Ustyuzhaninov et al. 2016) in eval mode, the content loss on
    one layer's features, the style loss on the Gram matrices of three layers weighted 1e6 (the
    PyTorch tutorial's weights),
    Adam 0.02 on the canvas, pixels clamped to [0, 1] after each step."""
    g = _seed(seed)
    size = 48
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    content = torch.stack([xx, yy, ((xx - 0.5) ** 2 + (yy - 0.5) ** 2 < 0.1).float()])[None]
    style = torch.stack(
        [
            0.5 + 0.5 * torch.sin(20 * xx + 8 * yy),
            0.5 + 0.5 * torch.sin(14 * yy),
            0.5 + 0.5 * torch.cos(10 * (xx + yy)),
        ]
    )[None]
    style = (style + 0.05 * torch.randn(style.shape, generator=g)).clamp(0, 1)
    features = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
    ).eval()  # fmt: skip
    for p in features.parameters():
        p.requires_grad_(False)
    style_layers, content_layer = (1, 6, 9), 6
    mean = torch.tensor([0.485, 0.456, 0.406])[None, :, None, None]
    std = torch.tensor([0.229, 0.224, 0.225])[None, :, None, None]

    def extract(img: torch.Tensor) -> dict[int, torch.Tensor]:
        out, h = {}, (img - mean) / std
        for i, layer in enumerate(features):
            h = layer(h)
            if i in (*style_layers, content_layer):
                out[i] = h
        return out

    def gram(f: torch.Tensor) -> torch.Tensor:
        b, c, hh, ww = f.shape
        f = f.view(c, hh * ww)
        return f @ f.T / (c * hh * ww)

    with torch.no_grad():
        target_c = extract(content)[content_layer]
        target_s = {i: gram(f) for i, f in extract(style).items() if i in style_layers}

    class Canvas(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pixels = nn.Parameter(content.clone())

        def forward(self) -> torch.Tensor:
            return self.pixels

    canvas = Canvas()
    optimizer = torch.optim.Adam(canvas.parameters(), lr=0.02)
    hook = Hook(path)
    hook.register_module(canvas)
    losses: list[float] = []
    for step in range(steps):
        feats = extract(canvas())
        c_loss = F.mse_loss(feats[content_layer], target_c)
        s_loss = sum(F.mse_loss(gram(feats[i]), target_s[i]) for i in style_layers)
        loss = c_loss + 1e6 * s_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            canvas.pixels.clamp_(0, 1)
        losses.append(loss.item())
        if step % 50 == 49:
            print(f"step {step + 1}: content {c_loss.item():.5f} style {float(s_loss.detach()):.8f}")
    hook.close()
    return losses


def speech_enhancement_irm_lstm(path: str, epochs: int = 6, seed: int = 0) -> list[float]:
    """Mask-based speech enhancement: harmonic "voiced" utterances (a gliding pitch with 6
    harmonics under a moving formant envelope) mixed with coloured noise at 0-10 dB; STFT (n_fft
    128, hop 32, Hann), log-magnitude features, a two-layer LSTM to a sigmoid mask per bin
    trained by MSE against the ideal ratio mask; Adam 1e-3, clipping at 5, batch 16; the
    validation SNR improvement of the masked magnitude each epoch."""
    g = _seed(seed)
    n, length, sr = 320, 4096, 8000
    t = torch.arange(length) / sr
    f0 = (
        100
        + 80 * torch.rand(n, 1, generator=g)
        + 30 * torch.sin(2 * math.pi * torch.rand(n, 1, generator=g) * t * 3)
    )
    phase = 2 * math.pi * torch.cumsum(f0 / sr, 1)
    formant = 500 + 1000 * torch.rand(n, 1, generator=g)
    clean = sum(torch.exp(-((((h * f0) - formant) / 600) ** 2)) * torch.sin(h * phase) for h in range(1, 7))
    clean = clean * (0.5 + 0.5 * torch.sin(2 * math.pi * 2 * t + 6 * torch.rand(n, 1, generator=g))).clamp(
        min=0
    )
    noise = torch.randn(n, length, generator=g)
    noise = torch.cumsum(noise, 1) * 0.05 + noise  # low-frequency heavy
    noise = noise - noise.mean(1, keepdim=True)
    snr_db = 10 * torch.rand(n, 1, generator=g)
    noise = noise * clean.norm(dim=1, keepdim=True) / noise.norm(dim=1, keepdim=True) / (10 ** (snr_db / 20))
    window = torch.hann_window(128)

    def spec(w: torch.Tensor) -> torch.Tensor:
        return torch.stft(w, 128, 32, window=window, return_complex=True).abs().transpose(1, 2)

    s_clean, s_noise, s_mix = spec(clean), spec(noise), spec(clean + noise)
    irm = (s_clean**2 / (s_clean**2 + s_noise**2 + 1e-8)).sqrt()
    feats = torch.log(s_mix + 1e-6)
    feats = (feats - feats[:256].mean((0, 1))) / feats[:256].std((0, 1))
    bins = feats.size(-1)

    class MaskLSTM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(bins, 128, num_layers=2, batch_first=True)
            self.out = nn.Linear(128, bins)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h, _ = self.lstm(x)
            return torch.sigmoid(self.out(h))

    model = MaskLSTM()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(feats[:256], irm[:256]), batch_size=16, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, mb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), mb)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            est = model(feats[256:]) * s_mix[256:]
            ref = s_clean[256:]
            snr_out = 10 * torch.log10(ref.pow(2).sum() / (est - ref).pow(2).sum())
            snr_in = 10 * torch.log10(ref.pow(2).sum() / (s_mix[256:] - ref).pow(2).sum())
        if epoch % 2 == 1:
            print(
                f"epoch {epoch + 1}: loss {np.mean(losses[-16:]):.4f} spectral SNR {snr_in:.2f} -> {snr_out:.2f} dB"
            )
    hook.close()
    return losses


# ============================================================================= the pipelines

_eegnet = healthy("eegnet_motor_imagery_maxnorm_adam", "EEGNet on motor-imagery EEG", eegnet_motor_imagery)
_ecg = healthy(
    "ecg_beats_resnet1d_weighted_sampler_nesterov_plateau",
    "ECG beat classification 1-D ResNet",
    ecg_beats_resnet1d_weighted_sampler,
)
_hmm = healthy(
    "hmm_log_space_forward_algorithm_adam",
    "HMM fitted by gradient (forward algorithm)",
    hmm_forward_algorithm_adam,
)
_hgnn = healthy(
    "hypergraph_hgnn_node_classification", "hypergraph neural network (HGNN)", hypergraph_hgnn_nodes
)
_svm = healthy(
    "linear_svm_hashed_ngrams_multimargin_asgd", "linear SVM on hashed n-grams", linear_svm_hashed_ngrams_asgd
)
_debias = healthy(
    "adversarial_debiasing_income_two_adams", "fairness adversarial debiasing", adversarial_debiasing_income
)
_impute = healthy(
    "bigru_masked_imputation_nadam_clip", "masked time-series imputation BiGRU", bigru_masked_imputation
)
_protein = healthy(
    "protein_secondary_structure_packed_bilstm_adamw",
    "protein secondary structure tagger",
    protein_secondary_structure_bilstm,
)
_hedging = healthy(
    "deep_hedging_call_cvar_gbm_costs", "deep hedging of a call (CVaR)", deep_hedging_call_cvar
)
_crowd = healthy(
    "crowd_layer_noisy_annotators_glyph_cnn",
    "learning from crowds (crowd layer)",
    crowd_layer_noisy_annotators,
)

PIPELINES: list[Any] = [
    _eegnet,
    _ecg,
    _hmm,
    _hgnn,
    healthy("deepwalk_skipgram_negative_sampling_sparse_sgd", "DeepWalk node embeddings", deepwalk_skipgram_sparse_sgd),
    _svm,
    _debias,
    _impute,
    healthy("monotonic_credit_scoring_softplus_parametrize_adagrad", "monotonic credit-scoring network", monotonic_credit_scoring),
    _protein,
    healthy("smiles_char_gru_property_huber_adamax", "SMILES character GRU property regression", smiles_char_gru_property),
    _hedging,
    healthy("portfolio_lstm_negative_sharpe_rmsprop", "portfolio LSTM on the Sharpe ratio", portfolio_lstm_sharpe),
    _crowd,
    healthy("gatys_style_transfer_canvas_adam", "Gatys style transfer (pixels optimized)", gatys_style_transfer_canvas),
    healthy("speech_enhancement_irm_mask_lstm", "mask-based speech enhancement LSTM", speech_enhancement_irm_lstm),
    buggy(_debias, "lr_x100"),
    buggy(_impute, "no_zero_grad"),
    buggy(_svm, "shuffled_labels"),
    buggy(_crowd, "inputs_x255"),
    buggy(_protein, "softmax_before_ce"),
    buggy(_hgnn, "dead_relu_init"),
    buggy(_hedging, "deep_sigmoid"),
    buggy(_eegnet, "frozen_by_mistake"),
    buggy(_hmm, "log_zero_nan"),
    buggy(_ecg, "train_in_eval_mode"),
]  # fmt: skip
