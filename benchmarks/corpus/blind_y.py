"""The eighteenth blind held-out set (issue 26), part Y: small trainings of kinds the corpus did
not have yet, plain PyTorch loops with the README's two lines (`register_loss` where the script
has a loss module) and trainings through tools with their one callback. Data generated
in-process, fixed seeds, one CPU thread.

Plain PyTorch: LightGCN on implicit feedback (layer-averaged propagation of user and item
embeddings through the symmetric-normalized bipartite adjacency as a sparse matrix, the BPR loss
on sampled negatives, L2 on the batch's ego embeddings, Adam); a tabular ResNet (Gorishniy et
al. 2021: BatchNorm-Linear-ReLU-Dropout-Linear residual blocks, AdamW); SCARF self-supervised
pre-training of a tabular encoder (features corrupted by draws from their empirical marginals,
InfoNCE at temperature 1, then a linear probe); beta regression of proportions (a mean through a
sigmoid and a precision through a softplus, the Beta negative log-likelihood through `lgamma`,
the Smithson-Verkuilen squeeze of the 0s and 1s); a learned index (the first stage of a
recursive model index fitted by Adam to the CDF of sorted keys, the leaves by least squares, the
worst position error reported); deep label distribution learning for age estimation (a CNN on
uint8 "face" images, Gaussian label distributions over 70 ages, `F.kl_div` with
`batchmean`, the expected age's MAE); NetVLAD place recognition (a convolutional trunk with
BatchNorm, a NetVLAD layer with soft assignment, intra-normalization and L2 normalization,
`TripletMarginLoss`, SGD momentum with weight decay, a recall@1 pass each epoch); an
AlphaZero-style policy-value network on every tic-tac-toe position labelled by minimax
(illegal moves masked, soft-target cross-entropy plus the value MSE, SGD momentum with L2); a
von Mises regression of wind direction (a unit mean vector and a softplus concentration, the
negative log-likelihood through `torch.special.i0e`); FitNets (a wide teacher trained first, a
thin deeper student guided at its middle layer by a convolutional regressor of the teacher's
features, then knowledge distillation at temperature 4); a TiDE forecaster (dense residual
encoder and decoder over the lookback, covariates projected per step, a temporal decoder, a
global linear skip, per-series standardization, Adam on a cosine schedule); and SGC (the
simplified graph convolution: features propagated twice through the normalized adjacency, then
a logistic regression at lr 0.2, full batch with a train mask).

Through tools: Hugging Face `Seq2SeqTrainer` (`mldbg.transformers.DebuggerCallback`) on a
BERT2BERT `EncoderDecoderModel` built from two tiny random `BertConfig`s (a decoder with cross
attention) sorting digit strings; Lightning (`mldbg.lightning.DebuggerCallback`): a WTTE-RNN
(a GRU predicting the Weibull alpha and beta of the time to the next failure at every step, the
discrete censored Weibull log-likelihood, `CosineAnnealingLR`, `gradient_clip_val`); Keras 3 on
TensorFlow (`mldbg.keras.Hook`): a census-style income model with `Discretization` of age and
`HashedCrossing` of education and occupation next to normalized numeric inputs
(`binary_crossentropy`, Adam); XGBoost (`mldbg.xgboost.Hook`): a user-defined log-cosh objective
(gradient `tanh`, hessian `sech^2`) on house prices with outliers, via `xgb.train(obj=...)`.

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the Keras income model's `Adam(learning_rate=0.1)` typed for 1e-3 (lr_x100), LightGCN's
loop without `optimizer.zero_grad()` (no_zero_grad), the XGBoost prices read from a copy of the
table sorted another way (shuffled_labels), the age CNN's normalization applied to the uint8
bytes without the division by 255 (inputs_x255), the policy head returning softmax
probabilities "as MCTS priors" to the cross-entropy (softmax_before_ce), the tabular ResNet's
biases filled with -2 in its init (dead_relu_init), the wind-direction trunk made of eight
sigmoid layers (deep_sigmoid), the FitNets student's lower layers frozen by a line left from the
hint stage after the distillation optimizer was built (frozen_by_mistake), the beta regression
without the squeeze of the exact 0s and 1s, so `log(0)` reaches the likelihood (log_zero_nan),
the NetVLAD model never put back in training mode after its first recall pass
(train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND17`.
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

from . import BLIND17, buggy, healthy, installed

SPLIT = BLIND17

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 171)


# ============================================================================= recommendation, graphs


def lightgcn_bpr(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """LightGCN (He et al. 2020) on implicit feedback: 300 users, 400 items, about 25 clicks per
    user drawn from latent tastes; the symmetric-normalized bipartite adjacency as a sparse
    tensor, three propagation layers averaged with the ego embeddings (dimension 32), the BPR
    loss on (user, clicked item, random unclicked item) triples, L2 1e-4 on the batch's ego
    embeddings, Adam 5e-3, batches of 1024; recall@20 on held-out clicks every 100 steps."""
    g = _seed(seed)
    n_users, n_items, dim = 300, 400, 32
    tu, ti = torch.randn(n_users, 6, generator=g), torch.randn(n_items, 6, generator=g)
    pref = torch.softmax(2.0 * tu @ ti.T / math.sqrt(6), 1)
    clicks = torch.multinomial(pref, 25, replacement=False, generator=g)
    held = clicks[:, -5:]
    train_u = torch.arange(n_users).repeat_interleave(20)
    train_i = clicks[:, :20].reshape(-1)
    seen = torch.zeros(n_users, n_items, dtype=torch.bool)
    seen[train_u, train_i] = True
    n = n_users + n_items
    rows = torch.cat([train_u, train_i + n_users])
    cols = torch.cat([train_i + n_users, train_u])
    deg = torch.bincount(rows, minlength=n).float()
    vals = deg[rows].rsqrt() * deg[cols].rsqrt()
    adj = torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, (n, n)).coalesce()

    class LightGCN(nn.Module):
        def __init__(self, layers: int = 3) -> None:
            super().__init__()
            self.user_emb = nn.Embedding(n_users, dim)
            self.item_emb = nn.Embedding(n_items, dim)
            nn.init.normal_(self.user_emb.weight, std=0.1)
            nn.init.normal_(self.item_emb.weight, std=0.1)
            self.layers = layers

        def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
            e = torch.cat([self.user_emb.weight, self.item_emb.weight])
            out = [e]
            for _ in range(self.layers):
                e = torch.sparse.mm(adj, e)
                out.append(e)
            final = torch.stack(out).mean(0)
            return final[:n_users], final[n_users:]

    model = LightGCN()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for step in range(steps):
        idx = torch.randint(0, len(train_u), (1024,), generator=g)
        u, pos = train_u[idx], train_i[idx]
        neg = torch.randint(0, n_items, (1024,), generator=g)
        users, items = model()
        pos_s = (users[u] * items[pos]).sum(1)
        neg_s = (users[u] * items[neg]).sum(1)
        bpr = -F.logsigmoid(pos_s - neg_s).mean()
        reg = (
            model.user_emb(u).pow(2).sum()
            + model.item_emb(pos).pow(2).sum()
            + model.item_emb(neg).pow(2).sum()
        ) / (2 * len(u))
        loss = bpr + 1e-4 * reg
        if bug != "no_zero_grad":  # bug: the zero_grad line lost when the loop was refactored
            optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                users, items = model()
                scores = (users @ items.T).masked_fill(seen, -1e9)
                top = scores.topk(20, 1).indices
                hit = (top[:, :, None] == held[:, None, :]).any(1).float().mean()
            print(f"step {step + 1}: bpr {np.mean(losses[-50:]):.4f} recall@20 {hit:.3f}")
    hook.close()
    return losses


def sgc_simplified_graph_convolution(path: str, epochs: int = 100, seed: int = 0) -> list[float]:
    """SGC (Wu et al. 2019): on a 4-community stochastic block model of 800 nodes with noisy
    bag-of-words features, the features are propagated K=2 times through the normalized adjacency
    with self-loops once, before training; then a logistic regression (one `nn.Linear`) on 160
    labelled nodes, full batch, `CrossEntropyLoss`, Adam at lr 0.2 with weight decay 5e-5, the
    paper's settings; validation accuracy every 20 epochs."""
    g = _seed(seed)
    n, k, d = 800, 4, 300
    y = torch.randint(0, k, (n,), generator=g)
    p = torch.where(y[:, None] == y[None, :], 0.02, 0.002)
    a = (torch.rand(n, n, generator=g) < p).float().triu(1)
    a = a + a.T + torch.eye(n)
    dinv = a.sum(1).rsqrt()
    s = dinv[:, None] * a * dinv[None, :]
    topic = (torch.rand(k, d, generator=g) < 0.05).float()
    x = (
        (torch.rand(n, d, generator=g) < 0.02).float() + topic[y] * (torch.rand(n, d, generator=g) < 0.3)
    ).clamp(max=1)
    x = x / x.sum(1, keepdim=True).clamp(min=1)
    features = s @ (s @ x)
    train_mask = torch.zeros(n, dtype=torch.bool)
    train_mask[:160] = True
    val = torch.arange(160, 460)
    model = nn.Linear(d, k)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.2, weight_decay=5e-5)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        optimizer.zero_grad()
        loss = criterion(model(features[train_mask]), y[train_mask])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if epoch % 20 == 19:
            model.eval()
            with torch.no_grad():
                acc = (model(features[val]).argmax(1) == y[val]).float().mean()
            print(f"epoch {epoch + 1}: loss {loss.item():.4f} val acc {acc:.3f}")
    hook.close()
    return losses


# ============================================================================= tabular


def _tabular(g: torch.Generator, n: int, d: int) -> torch.Tensor:
    cov = torch.randn(d, d, generator=g) / math.sqrt(d)
    return torch.randn(n, d, generator=g) @ (torch.eye(d) + 0.5 * cov)


def tabular_resnet(path: str, epochs: int = 15, seed: int = 0, bug: str | None = None) -> list[float]:
    """The tabular ResNet baseline of "Revisiting Deep Learning Models for Tabular Data": a
    linear stem to 128, three residual blocks BatchNorm -> Linear(128, 256) -> ReLU -> Dropout
    0.2 -> Linear(256, 128) -> Dropout added to the input, a BatchNorm-ReLU-Linear head; three
    classes from a nonlinear rule of 20 standardized features, AdamW 1e-3 with weight decay 1e-5,
    batch 256, a validation pass per epoch."""
    g = _seed(seed)
    n, d = 4800, 20
    x = _tabular(g, n, d)
    score = torch.stack(
        [
            x[:, 0] * x[:, 1] + x[:, 2],
            torch.sin(2 * x[:, 3]) + x[:, 4].abs(),
            0.8 * x[:, 5] - x[:, 6] * x[:, 7],
        ],
        1,
    )
    y = (score + 0.3 * torch.randn(n, 3, generator=g)).argmax(1)
    x = (x - x[:4000].mean(0)) / x[:4000].std(0)

    class Block(nn.Module):
        def __init__(self, width: int = 128, hidden: int = 256) -> None:
            super().__init__()
            self.norm = nn.BatchNorm1d(width)
            self.linear1 = nn.Linear(width, hidden)
            self.linear2 = nn.Linear(hidden, width)
            self.drop_hidden = nn.Dropout(0.2)
            self.drop_out = nn.Dropout(0.0)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.drop_hidden(F.relu(self.linear1(self.norm(x))))
            return x + self.drop_out(self.linear2(h))

    class TabResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Linear(d, 128)
            self.blocks = nn.Sequential(Block(), Block(), Block())
            self.head = nn.Sequential(nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 3))
            if bug == "dead_relu_init":  # bug: "start sparse", copied from a sparse-coding script
                for m in self.modules():
                    if isinstance(m, nn.Linear):
                        nn.init.constant_(m.bias, -2.0)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.blocks(self.stem(x)))

    model = TabResNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-5)
    loader = DataLoader(TensorDataset(x[:4000], y[:4000]), batch_size=256, shuffle=True, generator=g)
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
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x[4000:]).argmax(1) == y[4000:]).float().mean()
        if epoch % 5 == 4:
            print(f"epoch {epoch + 1}: loss {np.mean(losses[-16:]):.4f} val acc {acc:.3f}")
    hook.close()
    return losses


def scarf_tabular_pretraining(path: str, epochs: int = 8, seed: int = 0) -> list[float]:
    """SCARF (Bahri et al. 2022): each row's view corrupts 60 % of its features by replacing
    them with the same feature of random other rows (draws from the empirical marginals); a
    four-layer ReLU encoder of width 256 and a two-layer projection head; InfoNCE between a row
    and its corrupted view at temperature 1.0 over batches of 128; Adam 1e-3; then a linear
    probe (logistic regression) on the frozen embeddings against a label unseen in
    pre-training."""
    g = _seed(seed)
    n, d = 3200, 16
    latent = torch.randn(n, 4, generator=g)
    mix = torch.randn(4, d, generator=g)
    x = torch.tanh(latent @ mix) + 0.2 * torch.randn(n, d, generator=g)
    label = (latent[:, 0] + latent[:, 1] > 0).long()
    x = (x - x.mean(0)) / x.std(0)

    def mlp(sizes: list[int]) -> nn.Sequential:
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:], strict=True):
            layers += [nn.Linear(a, b), nn.ReLU()]
        return nn.Sequential(*layers[:-1])

    class Scarf(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Sequential(mlp([d, 256, 256, 256, 256]), nn.ReLU())
            self.head = mlp([256, 256, 128])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.encoder(x))

    model = Scarf()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(x[:2560]), batch_size=128, shuffle=True, generator=g, drop_last=True)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for (xb,) in loader:
            mask = torch.rand(xb.shape, generator=g) < 0.6
            donors = x[:2560][torch.randint(0, 2560, xb.shape, generator=g), torch.arange(d)]
            view = torch.where(mask, donors, xb)
            z1 = F.normalize(model(xb), dim=1)
            z2 = F.normalize(model(view), dim=1)
            logits = z1 @ z2.T / 1.0
            loss = F.cross_entropy(logits, torch.arange(len(xb)))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 2 == 1:
            print(f"epoch {epoch + 1}: InfoNCE {np.mean(losses[-20:]):.4f}")
    hook.close()
    model.eval()
    with torch.no_grad():
        emb = model.encoder(x)
    probe = nn.Linear(256, 2)
    popt = torch.optim.LBFGS(probe.parameters(), max_iter=100)

    def closure() -> torch.Tensor:
        popt.zero_grad()
        out = F.cross_entropy(probe(emb[:2560]), label[:2560])
        out.backward()
        return out

    popt.step(closure)
    with torch.no_grad():
        print("probe acc", float((probe(emb[2560:]).argmax(1) == label[2560:]).float().mean()))
    return losses


def beta_regression_proportions(
    path: str, epochs: int = 12, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Beta regression of proportions (the share of a household budget spent on food) from ten
    features: an MLP whose heads give the mean through a sigmoid and the precision through a
    softplus, the Beta negative log-likelihood written with `torch.lgamma`; the recorded shares
    hold exact 0s and 1s, squeezed into (0, 1) by Smithson and Verkuilen's (y (n - 1) + 0.5) / n
    first, as the beta-regression literature does; Adam 3e-3, batch 128."""
    g = _seed(seed)
    n, d = 3000, 10
    x = _tabular(g, n, d)
    mu = torch.sigmoid(0.8 * x[:, 0] - 0.6 * x[:, 1] + 0.4 * x[:, 2] * x[:, 3])
    phi = 8.0
    share = torch.distributions.Beta(mu * phi, (1 - mu) * phi).sample()
    share = torch.where(share < 0.01, torch.zeros_like(share), share)  # recorded as 0 %
    share = torch.where(share > 0.99, torch.ones_like(share), share)  # and 100 %
    y = share if bug == "log_zero_nan" else (share * (n - 1) + 0.5) / n  # bug: the squeeze left out
    x = (x - x[:2500].mean(0)) / x[:2500].std(0)

    class BetaNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
            self.mean_head = nn.Linear(64, 1)
            self.precision_head = nn.Linear(64, 1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.body(x)
            return torch.sigmoid(self.mean_head(h)).squeeze(1), F.softplus(self.precision_head(h)).squeeze(
                1
            ) + 1e-3

    def beta_nll(m: torch.Tensor, p: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        a, b = m * p, (1 - m) * p
        ll = (
            torch.lgamma(p)
            - torch.lgamma(a)
            - torch.lgamma(b)
            + (a - 1) * torch.log(t)
            + (b - 1) * torch.log(1 - t)
        )
        return -ll.mean()

    model = BetaNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loader = DataLoader(TensorDataset(x[:2500], y[:2500]), batch_size=128, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            m, p = model(xb)
            loss = beta_nll(m, p, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 3 == 2:
            model.eval()
            with torch.no_grad():
                m, p = model(x[2500:])
                mae = (m - share[2500:]).abs().mean()
            print(
                f"epoch {epoch + 1}: nll {np.mean(losses[-20:]):.4f} val MAE {mae:.4f} precision {p.mean():.2f}"
            )
    hook.close()
    return losses


def learned_index_rmi(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """A learned index (Kraska et al. 2018): 20 000 sorted keys from a log-normal mixture, the
    first stage of a two-stage recursive model index (a 1-16-16-1 ReLU MLP from the standardized
    key to its relative position) fitted by Adam 1e-2 on the MSE over batches of 512, then 64
    linear leaves fitted by least squares on the keys each routes to; the worst and mean position
    errors reported."""
    g = _seed(seed)
    n = 20000
    comp = torch.rand(n, generator=g) < 0.7
    keys = torch.where(
        comp, torch.randn(n, generator=g) * 0.5 + 2.0, torch.randn(n, generator=g) * 0.3 + 4.0
    ).exp()
    keys = keys.sort().values
    pos = torch.arange(n, dtype=torch.float32) / n
    xk = ((keys.log() - keys.log().mean()) / keys.log().std())[:, None]
    stage1 = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(stage1.parameters(), lr=1e-2)
    hook = Hook(path)
    hook.register_module(stage1)
    hook.register_loss(criterion)
    losses: list[float] = []
    for _ in range(steps):
        idx = torch.randint(0, n, (512,), generator=g)
        loss = criterion(stage1(xk[idx]).squeeze(1), pos[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    hook.close()
    with torch.no_grad():
        leaf = (stage1(xk).squeeze(1).clamp(0, 0.9999) * 64).long()
        pred = torch.zeros(n)
        for j in range(64):
            sel = leaf == j
            if sel.sum() < 2:
                pred[sel] = pos[sel]
                continue
            a = torch.stack([keys[sel], torch.ones(int(sel.sum()))], 1).double()
            coef = torch.linalg.lstsq(a, pos[sel].double()[:, None]).solution
            pred[sel] = (a @ coef).squeeze(1).float()
        err = ((pred - pos) * n).abs()
    print(
        f"stage-1 mse {losses[0]:.4f} -> {losses[-1]:.6f}; position error max {err.max():.0f} mean {err.mean():.1f}"
    )
    return losses


def von_mises_wind_direction(
    path: str, epochs: int = 12, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Circular regression of the wind direction from twelve weather features (pressure
    gradients, temperature differences, hour of day as sin/cos): an MLP gives a mean direction as
    a normalized 2-vector and a concentration through a softplus; the von Mises negative
    log-likelihood -kappa cos(y - mu) + log(2 pi I0(kappa)), with log I0 through the scaled
    `torch.special.i0e`; Adam 1e-3, batch 64; the mean angular error on a validation split."""
    g = _seed(seed)
    n, d = 2400, 12
    x = _tabular(g, n, d)
    hour = torch.rand(n, generator=g) * 24
    x[:, -2], x[:, -1] = torch.sin(2 * math.pi * hour / 24), torch.cos(2 * math.pi * hour / 24)
    u = 1.5 * x[:, 0] - 0.5 * x[:, 2] + 0.8 * x[:, -2]
    v = 1.5 * x[:, 1] + 0.6 * x[:, 3] * x[:, 4] + 0.4
    kappa_true = 1.0 + 3.0 * torch.sigmoid(x[:, 5])
    angle = torch.atan2(v, u) + torch.distributions.VonMises(torch.zeros(n), kappa_true).sample()
    angle = torch.remainder(angle + math.pi, 2 * math.pi) - math.pi
    x = (x - x[:2000].mean(0)) / x[:2000].std(0)

    if bug == "deep_sigmoid":  # bug: "deeper is better", with the sigmoid of the textbook's MLP
        sizes = [d] + [64] * 8
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:], strict=True):
            layers += [nn.Linear(a, b), nn.Sigmoid()]
        trunk = nn.Sequential(*layers)
    else:
        trunk = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())

    class VonMisesNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.trunk = trunk
            self.direction = nn.Linear(64, 2)
            self.concentration = nn.Linear(64, 1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.trunk(x)
            vec = F.normalize(self.direction(h), dim=1)
            return torch.atan2(vec[:, 1], vec[:, 0]), F.softplus(self.concentration(h)).squeeze(1) + 1e-4

    def von_mises_nll(mu: torch.Tensor, kappa: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        log_i0 = torch.log(torch.special.i0e(kappa)) + kappa
        return (-kappa * torch.cos(y - mu) + math.log(2 * math.pi) + log_i0).mean()

    model = VonMisesNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(x[:2000], angle[:2000]), batch_size=64, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            mu, kappa = model(xb)
            loss = von_mises_nll(mu, kappa, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 4 == 3:
            model.eval()
            with torch.no_grad():
                mu, kappa = model(x[2000:])
                err = torch.remainder(mu - angle[2000:] + math.pi, 2 * math.pi) - math.pi
            print(
                f"epoch {epoch + 1}: nll {np.mean(losses[-32:]):.4f} angular MAE {err.abs().mean():.3f} rad"
            )
    hook.close()
    return losses


def tide_forecaster(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """TiDE (Das et al. 2023) on 24 hourly demand series: each window of 96 lookback hours is
    standardized by its own mean and std; the covariates (hour and weekday as sin/cos, a holiday
    flag) are projected per step to 4 dims; a dense encoder of two residual blocks (Linear-ReLU-
    Linear, dropout 0.1, a linear skip, LayerNorm) over the flattened lookback and covariates, a
    dense decoder to 24 x 8, a temporal decoder per horizon step on its slice and its projected
    covariates, plus a global linear skip from the lookback; MSE on the 24-hour horizon, Adam 1e-3
    on a cosine schedule, batches of 64."""
    g = _seed(seed)
    series, length, look, horizon = 24, 2400, 96, 24
    t = torch.arange(length, dtype=torch.float32)
    hour, day = t % 24, (t // 24) % 7
    holiday = ((t // 24) % 17 == 0).float()
    cov = torch.stack(
        [torch.sin(2 * math.pi * hour / 24), torch.cos(2 * math.pi * hour / 24), torch.sin(2 * math.pi * day / 7),
         torch.cos(2 * math.pi * day / 7), holiday], 1,
    )  # fmt: skip
    level = 5 + 3 * torch.rand(series, 1, generator=g)
    daily = torch.sin(2 * math.pi * (hour - 6 - 3 * torch.rand(series, 1, generator=g)) / 24)
    y = level * (1 + 0.3 * daily + 0.1 * torch.sin(2 * math.pi * day / 7) - 0.3 * holiday)
    y = (
        y
        + 0.4 * torch.randn(series, length, generator=g).cumsum(1) / 20
        + 0.2 * torch.randn(series, length, generator=g)
    )
    n_cov, p_cov, hid, dec = cov.size(1), 4, 128, 8

    class Residual(nn.Module):
        def __init__(self, i: int, o: int, h: int) -> None:
            super().__init__()
            self.dense = nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o), nn.Dropout(0.1))
            self.skip = nn.Linear(i, o)
            self.norm = nn.LayerNorm(o)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.norm(self.dense(x) + self.skip(x))

    class TiDE(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.feature_proj = Residual(n_cov, p_cov, 32)
            self.encoder = nn.Sequential(
                Residual(look + (look + horizon) * p_cov, hid, hid), Residual(hid, hid, hid)
            )
            self.decoder = nn.Sequential(Residual(hid, hid, hid), Residual(hid, horizon * dec, hid))
            self.temporal = Residual(dec + p_cov, 1, 32)
            self.global_skip = nn.Linear(look, horizon)

        def forward(self, past: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
            pc = self.feature_proj(c)
            h = self.encoder(torch.cat([past, pc.flatten(1)], 1))
            dcd = self.decoder(h).view(-1, horizon, dec)
            out = self.temporal(torch.cat([dcd, pc[:, look:]], -1)).squeeze(-1)
            return out + self.global_skip(past)

    def batch(lo: int, hi: int, size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s = torch.randint(0, series, (size,), generator=g)
        start = torch.randint(lo, hi - look - horizon, (size,), generator=g)
        idx = start[:, None] + torch.arange(look + horizon)
        w = y[s[:, None], idx]
        mean, std = w[:, :look].mean(1, keepdim=True), w[:, :look].std(1, keepdim=True)
        w = (w - mean) / std
        return w[:, :look], cov[idx], w[:, look:]

    model = TiDE()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for step in range(steps):
        model.train()
        past, c, fut = batch(0, 2000, 64)
        loss = criterion(model(past, c), fut)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                past, c, fut = batch(2000 - look, length, 256)
                val = criterion(model(past, c), fut)
            print(f"step {step + 1}: mse {np.mean(losses[-50:]):.4f} val {val:.4f}")
    hook.close()
    return losses


# ============================================================================= vision


def _uint8_images(
    g: torch.Generator, n: int, classes: int, size: int = 16, channels: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 glyphs: one random 4x4 stroke pattern per class (per channel), upsampled, shifted and
    noised."""
    protos = (torch.rand(classes, channels, 4, 4, generator=g) < 0.45).float()
    protos = F.interpolate(protos, size=(size - 4, size - 4), mode="nearest")
    y = torch.randint(0, classes, (n,), generator=g)
    img = torch.zeros(n, channels, size, size)
    dx = torch.randint(0, 5, (n,), generator=g)
    dy = torch.randint(0, 5, (n,), generator=g)
    for i in range(n):
        img[i, :, dy[i] : dy[i] + size - 4, dx[i] : dx[i] + size - 4] = protos[y[i]]
    img = (img * 200 + 40 * torch.randn(img.shape, generator=g) + 30).clamp(0, 255)
    return img.to(torch.uint8), y


def dldl_age_estimation(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """Deep label distribution learning for age estimation (Gao et al. 2017): uint8 grayscale
    "faces" (a bright oval whose brightness falls and whose horizontal "wrinkle" stripes sharpen
    with age, noise); each age 0-69 becomes a Gaussian distribution (sigma 2) over the 70 ages;
    a small CNN, `F.kl_div(log_softmax, target, reduction="batchmean")`; images scaled by 1/255
    and normalized with mean and std 0.5; Adam 1e-3, batch 64; the MAE of the expected age."""
    g = _seed(seed)
    n, size, ages = 3000, 24, 70
    age = torch.randint(0, ages, (n,), generator=g)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
    cx = 0.15 * torch.randn(n, 1, 1, generator=g)
    oval = ((((xx - cx) / 0.6) ** 2 + (yy / 0.8) ** 2) < 1).float()
    a = (age.float() / ages)[:, None, None]
    stripes = 0.5 + 0.5 * torch.sin(2 * math.pi * (4 + 6 * a) * yy + torch.rand(n, 1, 1, generator=g) * 6)
    img = oval * (200 - 80 * a - 60 * a * stripes) + 40 * (1 - oval)
    img = (img + 15 * torch.randn(img.shape, generator=g)).clamp(0, 255).to(torch.uint8).unsqueeze(1)
    target = torch.exp(-((torch.arange(ages).float() - age[:, None].float()) ** 2) / (2 * 2.0**2))
    target = target / target.sum(1, keepdim=True)
    scaled = img.float() / 255.0
    if bug == "inputs_x255":  # bug: ToTensor's division by 255 lost when the dataset was rewritten
        scaled = img.float()
    x = (scaled - 0.5) / 0.5

    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(64, ages),
    )  # fmt: skip
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(x[:2500], target[:2500]), batch_size=64, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, tb in loader:
            loss = F.kl_div(F.log_softmax(model(xb), 1), tb, reduction="batchmean")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            expected = (torch.softmax(model(x[2500:]), 1) * torch.arange(ages)).sum(1)
            mae = (expected - age[2500:]).abs().mean()
        if epoch % 2 == 1:
            print(f"epoch {epoch + 1}: kl {np.mean(losses[-40:]):.4f} age MAE {mae:.2f}")
    hook.close()
    return losses


def netvlad_place_recognition(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """NetVLAD place recognition (Arandjelovic et al. 2016) shrunk: 40 "places" (smooth random RGB
    scenes), queries are views of a place (random crop shift, brightness, noise); a conv-BN-ReLU
    trunk, a NetVLAD layer (8 clusters, soft assignment by a 1x1 convolution, residuals to the
    centroids, intra-normalization, then L2 normalization), `TripletMarginLoss(margin=0.1)` on
    (query, view of the same place, view of another place), SGD 0.01 with momentum 0.9 and weight
    decay 1e-3, batch 32; recall@1 of held-out queries against one database view per place after
    each epoch."""
    g = _seed(seed)
    places, size, crop = 40, 32, 24
    scenes = F.interpolate(torch.rand(places, 3, 6, 6, generator=g), size=(size, size), mode="bicubic").clamp(
        0, 1
    )

    def view(p: torch.Tensor) -> torch.Tensor:
        ox = torch.randint(0, size - crop + 1, (len(p),), generator=g)
        oy = torch.randint(0, size - crop + 1, (len(p),), generator=g)
        out = torch.stack(
            [scenes[q, :, a : a + crop, b : b + crop] for q, a, b in zip(p, oy, ox, strict=True)]
        )
        out = out * (0.8 + 0.4 * torch.rand(len(p), 1, 1, 1, generator=g))
        return (out + 0.05 * torch.randn(out.shape, generator=g) - 0.5) / 0.25

    class NetVLAD(nn.Module):
        def __init__(self, clusters: int = 8, dim: int = 32) -> None:
            super().__init__()
            self.assign = nn.Conv2d(dim, clusters, 1)
            self.centroids = nn.Parameter(torch.rand(clusters, dim))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = F.normalize(x, dim=1)
            soft = torch.softmax(self.assign(x).flatten(2), 1)  # (b, k, hw)
            feats = x.flatten(2)  # (b, c, hw)
            vlad = torch.einsum("bkn,bcn->bkc", soft, feats) - soft.sum(2)[:, :, None] * self.centroids
            vlad = F.normalize(vlad, dim=2)
            return F.normalize(vlad.flatten(1), dim=1)

    class PlaceNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.trunk = nn.Sequential(
                nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.Dropout2d(0.1),
                nn.Conv2d(32, 32, 3, padding=1),
            )  # fmt: skip
            self.pool = NetVLAD()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.pool(self.trunk(x))

    model = PlaceNet()
    criterion = nn.TripletMarginLoss(margin=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        if bug != "train_in_eval_mode" or epoch == 0:  # bug: model.train() only before the first epoch
            model.train()
        for _ in range(40):
            anchor_p = torch.randint(0, places, (32,), generator=g)
            neg_p = (anchor_p + torch.randint(1, places, (32,), generator=g)) % places
            loss = criterion(model(view(anchor_p)), model(view(anchor_p)), model(view(neg_p)))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            db = model(view(torch.arange(places)))
            q_p = torch.randint(0, places, (200,), generator=g)
            recall = ((model(view(q_p)) @ db.T).argmax(1) == q_p).float().mean()
        print(f"epoch {epoch + 1}: triplet {np.mean(losses[-40:]):.4f} recall@1 {recall:.3f}")
    hook.close()
    return losses


def fitnets_hint_then_kd(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """FitNets (Romero et al. 2015): a wide teacher CNN trained first on glyphs (not recorded);
    a thin, deeper student; stage 1 trains the student's lower layers so that a convolutional
    regressor of its middle features matches the teacher's middle features (MSE, Adam 1e-3);
    stage 2 trains the whole student by knowledge distillation (temperature 4, KL scaled by T^2
    with weight 0.9, plus 0.1 of the cross-entropy), Adam 1e-3 again; the student's test accuracy
    after each stage."""
    g = _seed(seed)
    images, y = _uint8_images(g, 2600, 10)
    x = images.float() / 255.0
    xtr, ytr, xte, yte = x[:2200], y[:2200], x[2200:], y[2200:]

    teacher_lower = nn.Sequential(
        nn.Conv2d(1, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU()
    )
    teacher_upper = nn.Sequential(
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 16, 128), nn.ReLU(), nn.Linear(128, 10)
    )
    teacher = nn.Sequential(teacher_lower, teacher_upper)
    topt = torch.optim.Adam(teacher.parameters(), lr=1e-3)
    for _ in range(4):
        for idx in torch.randperm(2200, generator=g).split(64):
            topt.zero_grad()
            F.cross_entropy(teacher(xtr[idx]), ytr[idx]).backward()
            topt.step()
    teacher.eval()

    class Student(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lower = nn.Sequential(
                nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
            )  # fmt: skip
            self.upper = nn.Sequential(
                nn.Conv2d(16, 16, 3, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Flatten(),
                nn.Linear(16 * 16, 10),
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.upper(self.lower(x))

    student = Student()
    regressor = nn.Conv2d(16, 64, 3, padding=1)
    hook = Hook(path)
    hook.register_module(student)
    losses: list[float] = []
    hint_opt = torch.optim.Adam([*student.lower.parameters(), *regressor.parameters()], lr=1e-3)
    for _ in range(3):
        for idx in torch.randperm(2200, generator=g).split(64):
            with torch.no_grad():
                hint = teacher_lower(xtr[idx])
            loss = F.mse_loss(regressor(student.lower(xtr[idx])), hint)
            hint_opt.zero_grad()
            loss.backward()
            hint_opt.step()
            losses.append(loss.item())
    kd_opt = torch.optim.Adam(student.parameters(), lr=1e-3)
    if bug == "frozen_by_mistake":  # bug: the hint stage's "keep the guided layers" line, left in
        for p in student.lower.parameters():
            p.requires_grad = False
    temp = 4.0
    for epoch in range(6):
        student.train()
        for idx in torch.randperm(2200, generator=g).split(64):
            with torch.no_grad():
                t_logits = teacher(xtr[idx])
            s_logits = student(xtr[idx])
            kd = F.kl_div(
                F.log_softmax(s_logits / temp, 1), F.softmax(t_logits / temp, 1), reduction="batchmean"
            ) * (temp**2)
            loss = 0.9 * kd + 0.1 * F.cross_entropy(s_logits, ytr[idx])
            kd_opt.zero_grad()
            loss.backward()
            kd_opt.step()
            losses.append(loss.item())
        if epoch % 2 == 1:
            student.eval()
            with torch.no_grad():
                acc = (student(xte).argmax(1) == yte).float().mean()
                t_acc = (teacher(xte).argmax(1) == yte).float().mean()
            print(
                f"kd epoch {epoch + 1}: loss {np.mean(losses[-35:]):.4f} student acc {acc:.3f} teacher {t_acc:.3f}"
            )
    hook.close()
    return losses


# ============================================================================= games


def _tictactoe_positions() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every position reachable in tic-tac-toe with the game not over, from the side to move:
    planes (own stones, opponent's stones, legal moves), the minimax-optimal moves as a uniform
    policy target, the game value for the side to move, and the legal-move mask."""
    lines = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
    memo: dict[tuple[int, ...], int] = {}

    def winner(b: tuple[int, ...]) -> int:
        for a, c, e in lines:
            if b[a] != 0 and b[a] == b[c] == b[e]:
                return b[a]
        return 0

    def value(b: tuple[int, ...], player: int) -> int:  # for `player`, who is to move
        if b in memo:
            return memo[b]
        w = winner(b)
        if w:
            v = 1 if w == player else -1
        elif 0 not in b:
            v = 0
        else:
            v = max(-value(b[:i] + (player,) + b[i + 1 :], -player) for i in range(9) if b[i] == 0)
        memo[b] = v
        return v

    planes, policies, values, legal = [], [], [], []
    seen: set[tuple[int, ...]] = set()
    stack: list[tuple[tuple[int, ...], int]] = [((0,) * 9, 1)]
    while stack:
        b, player = stack.pop()
        if b in seen or winner(b) or 0 not in b:
            continue
        seen.add(b)
        children = {i: -value(b[:i] + (player,) + b[i + 1 :], -player) for i in range(9) if b[i] == 0}
        best = max(children.values())
        arr = np.array(b)
        planes.append(np.stack([arr == player, arr == -player, arr == 0]).astype("float32").reshape(3, 3, 3))
        pol = np.array([1.0 if children.get(i) == best else 0.0 for i in range(9)], "float32")
        policies.append(pol / pol.sum())
        values.append(float(best))
        legal.append(arr == 0)
        for i in children:
            stack.append((b[:i] + (player,) + b[i + 1 :], -player))
    return (
        torch.tensor(np.stack(planes)),
        torch.tensor(np.stack(policies)),
        torch.tensor(values),
        torch.tensor(np.stack(legal)),
    )


def alphazero_tictactoe_policy_value(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """An AlphaZero-style policy-value network trained on every tic-tac-toe position labelled
    by minimax (the optimal moves as the policy target, the game value as the value target): a
    residual convolutional trunk (64 channels, BatchNorm), a policy head whose illegal moves are
    masked to -1e9, a tanh value head; the loss (z - v)^2 plus the soft-target cross-entropy of
    the policy; SGD 0.05 with momentum 0.9 and L2 1e-4, batch 128; the share of positions whose
    chosen move is optimal."""
    g = _seed(seed)
    planes, policy, value, legal = _tictactoe_positions()
    n = len(planes)
    perm = torch.randperm(n, generator=g)
    planes, policy, value, legal = planes[perm], policy[perm], value[perm], legal[perm]
    split = int(0.9 * n)

    class Res(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
            self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))

    class PolicyValueNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU()
            )
            self.trunk = nn.Sequential(Res(64), Res(64))
            self.policy_head = nn.Sequential(
                nn.Conv2d(64, 2, 1), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(18, 9)
            )
            self.value_head = nn.Sequential(
                nn.Conv2d(64, 1, 1), nn.BatchNorm2d(1), nn.ReLU(), nn.Flatten(), nn.Linear(9, 32), nn.ReLU(),
                nn.Linear(32, 1), nn.Tanh(),
            )  # fmt: skip

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.trunk(self.stem(x))
            logits = self.policy_head(h).masked_fill(~mask, -1e9)
            if bug == "softmax_before_ce":  # bug: priors returned as probabilities for the MCTS
                logits = torch.softmax(logits, 1)
            return logits, self.value_head(h).squeeze(1)

    model = PolicyValueNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for idx in torch.randperm(split, generator=g).split(128):
            p_out, v_out = model(planes[idx], legal[idx])
            loss = F.mse_loss(v_out, value[idx]) + F.cross_entropy(p_out, policy[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 2 == 1:
            model.eval()
            with torch.no_grad():
                p_out, v_out = model(planes[split:], legal[split:])
                optimal = policy[split:].gather(1, p_out.argmax(1, keepdim=True)).squeeze(1) > 0
                v_err = (v_out - value[split:]).abs().mean()
            print(
                f"epoch {epoch + 1}: loss {np.mean(losses[-30:]):.4f} optimal moves {optimal.float().mean():.3f} "
                f"value MAE {v_err:.3f}"
            )
    hook.close()
    return losses


# ============================================================================= Hugging Face


class _Examples(Dataset):
    """A list of feature dicts, as `datasets.Dataset` hands them to the Trainer."""

    def __init__(self, **columns: Any) -> None:
        self.columns = columns
        self.n = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: v[i] for k, v in self.columns.items()}


def hf_bert2bert_encoder_decoder_sorting(path: str, seed: int = 0) -> list[float]:
    """A BERT2BERT `EncoderDecoderModel` (Rothe et al. 2020, the transformers docs' recipe) built
    from two tiny random `BertConfig`s (the decoder with `is_decoder=True` and
    `add_cross_attention=True`), `decoder_start_token_id` set to [CLS] and `pad_token_id` on the
    model config, trained with `Seq2SeqTrainer` to sort strings of 4-10 digits; labels padded with
    -100, lr 1e-3 with linear warm-up, batch 32, 4 epochs, the exact-match rate by greedy
    generation."""
    from transformers import (
        BertConfig,
        EncoderDecoderConfig,
        EncoderDecoderModel,
        PrinterCallback,
        Seq2SeqTrainer,
        Seq2SeqTrainingArguments,
    )

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    pad, cls, sep, vocab, max_len = 0, 1, 2, 14, 12
    n = 1400
    ids = torch.full((n, max_len), pad)
    labels = torch.full((n, max_len), -100)
    for i in range(n):
        k = int(torch.randint(4, 11, (1,), generator=g))
        digits = torch.randint(4, 14, (k,), generator=g)
        ids[i, : k + 2] = torch.cat([torch.tensor([cls]), digits, torch.tensor([sep])])
        labels[i, : k + 1] = torch.cat([digits.sort().values, torch.tensor([sep])])
    mask = (ids != pad).long()
    common = {
        "vocab_size": vocab, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 128, "max_position_embeddings": 32, "pad_token_id": pad,
    }  # fmt: skip
    config = EncoderDecoderConfig.from_encoder_decoder_configs(
        BertConfig(**common), BertConfig(**common, is_decoder=True, add_cross_attention=True)
    )
    model = EncoderDecoderModel(config=config)
    model.config.decoder_start_token_id = cls
    model.config.pad_token_id = pad
    model.config.eos_token_id = sep
    model.generation_config.decoder_start_token_id = cls
    model.generation_config.pad_token_id = pad
    model.generation_config.eos_token_id = sep
    args = Seq2SeqTrainingArguments(
        output_dir=os.path.join(path, "trainer"), logging_steps=1, report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=0, save_strategy="no", learning_rate=1e-3, warmup_steps=20,
        per_device_train_batch_size=32, num_train_epochs=4, weight_decay=0.01,
    )  # fmt: skip
    trainer = Seq2SeqTrainer(
        model=model, args=args,
        train_dataset=_Examples(input_ids=ids[:1280], attention_mask=mask[:1280], labels=labels[:1280]),
        callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(args.output_dir, ignore_errors=True)
    losses = [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]
    model.eval()
    with torch.no_grad():
        out = model.generate(
            input_ids=ids[1280:1344], attention_mask=mask[1280:1344], max_new_tokens=max_len, do_sample=False
        )
    exact = 0
    for row, lab in zip(out[:, 1:].tolist(), labels[1280:1344].tolist(), strict=True):
        want = [t for t in lab if t != -100]
        exact += row[: len(want)] == want
    print("exact sorts", exact, "/ 64")
    return losses


# ============================================================================= Lightning


def lit_wtte_rnn_weibull(path: str, max_epochs: int = 10, seed: int = 0) -> list[float]:
    """A WTTE-RNN (Martinsson 2016) in Lightning: machines whose sensor drift grows before each
    failure; at every step a GRU predicts the Weibull alpha (exp of a linear output times the
    mean time to event) and beta (softplus) of the time to the next failure; the discrete
    Weibull log-likelihood with right-censoring after the last observed failure
    (u log(exp(h1 - h0) - 1) - h1, h = ((t + eps) / alpha)^beta); Adam 3e-3 on a per-epoch
    `CosineAnnealingLR`, `gradient_clip_val=1.0`, batches of 16 machines, a validation loss."""
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    machines, length = 160, 200
    feats = torch.zeros(machines, length, 4)
    tte = torch.zeros(machines, length)
    observed = torch.zeros(machines, length)
    for m in range(machines):
        life = 15 + 25 * torch.rand(1, generator=g).item()
        fails, t = [], 0.0
        while t < length + 80:
            t += life * (0.6 + 0.8 * torch.rand(1, generator=g).item())
            fails.append(int(t))
        fails_t = torch.tensor(fails)
        steps = torch.arange(length)
        nxt = fails_t[torch.searchsorted(fails_t, steps, right=False)]
        prev = torch.cat([torch.tensor([0]), fails_t])[torch.searchsorted(fails_t, steps, right=False)]
        age = (steps - prev).float() / (nxt - prev).clamp(min=1).float()
        feats[m, :, 0] = age**2 + 0.1 * torch.randn(length, generator=g)
        feats[m, :, 1] = (age > 0.7).float() * torch.randn(length, generator=g).abs()
        feats[m, :, 2] = life / 40 + 0.05 * torch.randn(length, generator=g)
        feats[m, :, 3] = torch.randn(length, generator=g)
        tte[m] = (nxt - steps).float()
        observed[m] = (nxt < length).float()  # failures after the window are censored
        tte[m] = torch.where(observed[m] > 0, tte[m], (length - steps).float())
    mean_tte = float(tte.mean())

    class WTTE(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(4, 32, batch_first=True)
            self.out = nn.Linear(32, 2)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h, _ = self.gru(x)
            a, b = self.out(h).unbind(-1)
            return mean_tte * torch.exp(a.clamp(max=5)), F.softplus(b) + 0.1

        def loglik(self, batch: Any) -> torch.Tensor:
            x, t, u = batch
            alpha, beta = self(x)
            h0 = ((t + 1e-9) / alpha) ** beta
            h1 = ((t + 1.0) / alpha) ** beta
            return (u * torch.log(torch.expm1(h1 - h0) + 1e-9) - h1).mean()

        def training_step(self, batch: Any, idx: int) -> torch.Tensor:
            loss = -self.loglik(batch)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, idx: int) -> None:
            self.log("val_loss", -self.loglik(batch))

        def configure_optimizers(self) -> Any:
            opt = torch.optim.Adam(self.parameters(), lr=3e-3)
            return [opt], [torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max_epochs)]

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
        default_root_dir=path, logger=False, max_epochs=max_epochs, gradient_clip_val=1.0,
        callbacks=[DebuggerCallback(path), history],
    )  # fmt: skip
    train = DataLoader(
        TensorDataset(feats[:128], tte[:128], observed[:128]), batch_size=16, shuffle=True, generator=g
    )
    val = DataLoader(TensorDataset(feats[128:], tte[128:], observed[128:]), batch_size=32)
    trainer.fit(WTTE(), train, val)
    print("val_loss", float(trainer.callback_metrics.get("val_loss", float("nan"))))
    return history.losses


# ============================================================================= Keras


def keras_census_hashed_crossing(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A census-style income classifier in Keras 3 on TensorFlow with preprocessing layers inside
    the model (the keras.io structured-data examples): age bucketed by `Discretization`,
    education x occupation crossed by `HashedCrossing(num_bins=64, output_mode="one_hot")`, each
    categorical one-hot encoded by `CategoryEncoding`, hours and capital gain through a
    `Normalization` adapted on the training split; Dense 64-32 ReLU with dropout 0.2 to a
    sigmoid, `binary_crossentropy`, Adam 1e-3, batch 64, 10 epochs, `validation_split=0.1`."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 31)
    n = 6000
    age = rng.integers(17, 80, n).astype("float32")
    education = rng.integers(0, 16, n).astype("int64")
    occupation = rng.integers(0, 14, n).astype("int64")
    hours = np.clip(rng.normal(40, 12, n), 1, 99).astype("float32")
    gain = (rng.exponential(1.0, n) * (rng.random(n) < 0.1) * 5000).astype("float32")
    boost = np.sin(education * 0.7 + occupation * 1.3)
    logit = (
        -1.5 + 0.05 * (age - 40) - 0.0008 * (age - 45) ** 2 * 10 + 0.15 * education - 1.0
        + 1.2 * boost + 0.03 * (hours - 40) + gain / 4000
    )  # fmt: skip
    income = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype("float32")
    numeric = np.stack([hours, gain], 1)

    age_in = keras.Input((1,), name="age")
    edu_in = keras.Input((1,), name="education", dtype="int64")
    occ_in = keras.Input((1,), name="occupation", dtype="int64")
    num_in = keras.Input((2,), name="numeric")
    age_bins = layers.Discretization(bin_boundaries=[25.0, 30.0, 35.0, 40.0, 45.0, 50.0, 55.0, 60.0, 65.0])(
        age_in
    )
    age_hot = layers.CategoryEncoding(num_tokens=10, output_mode="one_hot")(age_bins)
    edu_hot = layers.CategoryEncoding(num_tokens=16, output_mode="one_hot")(edu_in)
    occ_hot = layers.CategoryEncoding(num_tokens=14, output_mode="one_hot")(occ_in)
    cross = layers.HashedCrossing(num_bins=64, output_mode="one_hot")((edu_in, occ_in))
    norm = layers.Normalization()
    norm.adapt(numeric[:5400])
    h = layers.Concatenate()([age_hot, edu_hot, occ_hot, cross, norm(num_in)])
    h = layers.Dropout(0.2)(layers.Dense(64, activation="relu")(h))
    h = layers.Dense(32, activation="relu")(h)
    out = layers.Dense(1, activation="sigmoid")(h)
    model = keras.Model([age_in, edu_in, occ_in, num_in], out)
    lr = 1e-1 if bug == "lr_x100" else 1e-3  # bug: 1e-1 typed for 1e-3
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=lr), loss="binary_crossentropy", metrics=["accuracy"]
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
    inputs = {
        "age": age[:, None],
        "education": education[:, None],
        "occupation": occupation[:, None],
        "numeric": numeric,
    }
    fit = model.fit(
        inputs, income[:, None], batch_size=64, epochs=10, validation_split=0.1, verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    print("val accuracy", [round(v, 3) for v in fit.history["val_accuracy"]])
    return history.losses


# ============================================================================= XGBoost


def xgb_custom_logcosh_objective(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A user-defined objective for `xgb.train(obj=...)` (the XGBoost "custom objective" tutorial
    shape): log-cosh of the residual, gradient `tanh(pred - y)` and hessian `1 - tanh^2`, robust
    to the 3 % of listings whose price was mis-keyed; log prices of houses from size, rooms, age,
    location scores; eta 0.1, depth 5, subsample 0.8, base score the training median, the MAE
    on train and validation as `custom_metric`, early stopping after 30 rounds."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed + 41)
    n = 5000
    size = rng.lognormal(4.5, 0.4, n)
    rooms = np.clip(np.round(size / 25 + rng.normal(0, 1, n)), 1, 10)
    age = rng.uniform(0, 100, n)
    loc = rng.normal(0, 1, (n, 3))
    log_price = (
        10 + 0.9 * np.log(size) + 0.05 * rooms - 0.004 * age + 0.3 * loc[:, 0] + 0.15 * np.tanh(loc[:, 1])
    )
    log_price = log_price + 0.1 * rng.normal(size=n)
    miskeyed = rng.random(n) < 0.03
    log_price[miskeyed] += rng.choice([-2.3, 2.3], miskeyed.sum())
    x = np.column_stack([size, rooms, age, loc]).astype("float32")
    y = log_price.astype("float32")
    if bug == "shuffled_labels":  # bug: the prices taken from a copy of the table sorted by listing date
        y = y[rng.permutation(n)]
    dtrain = xgb.DMatrix(x[:4000], label=y[:4000])
    dvalid = xgb.DMatrix(x[4000:], label=y[4000:])

    def logcosh(pred: np.ndarray, dmat: Any) -> tuple[np.ndarray, np.ndarray]:
        r = np.tanh(pred - dmat.get_label())
        return r, np.maximum(1.0 - r**2, 1e-6)

    def mae(pred: np.ndarray, dmat: Any) -> tuple[str, float]:
        return "mae", float(np.abs(pred - dmat.get_label()).mean())

    params = {
        "eta": 0.1, "max_depth": 5, "subsample": 0.8, "base_score": float(np.median(y[:4000])),
        "tree_method": "hist", "nthread": 1, "seed": seed, "disable_default_eval_metric": 1,
    }  # fmt: skip
    result: dict[str, Any] = {}
    xgb.train(
        params, dtrain, num_boost_round=300, obj=logcosh, custom_metric=mae,
        evals=[(dtrain, "train"), (dvalid, "valid")], evals_result=result, early_stopping_rounds=30,
        verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    print(f"valid mae {result['valid']['mae'][0]:.4f} -> {min(result['valid']['mae']):.4f}")
    return [float(v) for v in result["train"]["mae"]]


# ============================================================================= the pipelines

_lightgcn = healthy(
    "lightgcn_implicit_feedback_bpr_sparse_adam", "LightGCN recommendation (BPR)", lightgcn_bpr
)
_tabresnet = healthy("tabular_resnet_batchnorm_blocks_adamw", "tabular ResNet", tabular_resnet)
_beta = healthy(
    "beta_regression_proportions_lgamma_nll", "beta regression of proportions", beta_regression_proportions
)
_dldl = healthy(
    "dldl_age_label_distribution_kl_cnn", "label distribution learning (age)", dldl_age_estimation
)
_netvlad = healthy(
    "netvlad_place_recognition_triplet_sgd", "NetVLAD place recognition", netvlad_place_recognition
)
_fitnets = healthy(
    "fitnets_hint_regressor_then_kd", "FitNets hint training + distillation", fitnets_hint_then_kd
)
_alphazero = healthy(
    "alphazero_tictactoe_policy_value_minimax",
    "AlphaZero-style policy-value net",
    alphazero_tictactoe_policy_value,
)
_vonmises = healthy(
    "von_mises_wind_direction_i0e_nll", "von Mises circular regression", von_mises_wind_direction
)

PIPELINES: list[Any] = [
    _lightgcn,
    healthy("sgc_simplified_graph_convolution_k2_logreg", "SGC simplified graph convolution", sgc_simplified_graph_convolution),
    _tabresnet,
    healthy("scarf_tabular_contrastive_pretraining", "SCARF tabular contrastive pre-training", scarf_tabular_pretraining),
    _beta,
    healthy("learned_index_rmi_stage1_mlp", "learned index (RMI)", learned_index_rmi),
    _dldl,
    _netvlad,
    _fitnets,
    _alphazero,
    _vonmises,
    healthy("tide_dense_encoder_forecaster_cosine", "TiDE forecaster", tide_forecaster),
    buggy(_lightgcn, "no_zero_grad"),
    buggy(_dldl, "inputs_x255"),
    buggy(_alphazero, "softmax_before_ce"),
    buggy(_tabresnet, "dead_relu_init"),
    buggy(_vonmises, "deep_sigmoid"),
    buggy(_fitnets, "frozen_by_mistake"),
    buggy(_beta, "log_zero_nan"),
    buggy(_netvlad, "train_in_eval_mode"),
]  # fmt: skip

if installed("transformers"):
    PIPELINES += [
        healthy(
            "hf_bert2bert_encoder_decoder_seq2seq_trainer_sorting",
            "HF Seq2SeqTrainer BERT2BERT EncoderDecoderModel",
            hf_bert2bert_encoder_decoder_sorting,
        )
    ]

if installed("lightning"):
    PIPELINES += [
        healthy("lightning_wtte_rnn_weibull_censored", "Lightning WTTE-RNN (Weibull)", lit_wtte_rnn_weibull)
    ]

if installed("keras", "tensorflow"):
    _keras_census = healthy(
        "keras_census_discretization_hashed_crossing",
        "Keras structured data with HashedCrossing",
        keras_census_hashed_crossing,
    )
    PIPELINES += [_keras_census, buggy(_keras_census, "lr_x100")]

if installed("xgboost"):
    _xgb_logcosh = healthy(
        "xgboost_custom_logcosh_objective_prices",
        "XGBoost custom log-cosh objective",
        xgb_custom_logcosh_objective,
    )
    PIPELINES += [_xgb_logcosh, buggy(_xgb_logcosh, "shuffled_labels")]
