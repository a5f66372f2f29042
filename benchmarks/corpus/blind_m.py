"""The eighth blind held-out set (issue 26), part M: plain PyTorch trainings of kinds the corpus
did not have yet, each written the way a practitioner of that kind writes it, with the README's
two lines (`register_loss` where the script has a loss module), data generated in-process, fixed
seeds, one CPU thread.

Deep CCA (total canonical correlation through eigh and svdvals), item-based AutoRec on full-batch
Rprop, LSTNet (convolution, GRU, skip-GRU across periods, an autoregressive highway; L1, norm
clipping), ChebNet (K=3 Chebyshev filters) on a stochastic block model in Kipf's train/validate
loop, a dueling double DQN with proportional prioritized replay on a slippery gridworld, the
multi-similarity loss with P x K sampling and a step schedule, InfoGAN (a Q head on the
discriminator, a separate mutual-information step), SincNet speaker identification on raw
waveforms (RMSprop), a pointer-generator summarizer with coverage on Adagrad, a relation network
(5-way 1-shot episodes, MSE to one-hot), CSRNet density-map crowd counting (SGD, sum MSE), a deep
image prior denoiser (fixed noise input with perturbation, exponential averaging), SINDy on
Lorenz data (L1, sequential thresholding), pool-based active learning by entropy with a
warm-started model, class-incremental continual learning with a reservoir replay buffer,
ComplEx-N3 link prediction (reciprocal relations, 1-vs-all cross-entropy, Adagrad), DGCNN
EdgeConv point clouds (label smoothing 0.2, SGD cosine), TSM temporal-shift video recognition
(uint8 clips, gradient clipping at 20, MultiStepLR), multi-label scenes with the asymmetric loss
under bf16 autocast with AdamW, OneCycleLR and an EMA model for evaluation, onsets and frames
piano transcription from an STFT front end (the frame head conditioned on stop-gradient onsets),
VoxelMorph-style unsupervised registration (grid_sample warping, a smoothness penalty), GRU4Rec
with session-parallel mini-batches and the TOP1 loss on Adagrad, Deep CORAL domain adaptation
with a ramped CORAL weight, and a tensor fusion network over text, audio and video features.

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: LSTNet at Adam lr 0.1 (lr_x100), VoxelMorph without `optimizer.zero_grad()`
(no_zero_grad), SincNet's labels read apart from its shuffled file list (shuffled_labels), TSM's
normalization applied to 0-255 frames without the division (inputs_x255), DGCNN returning
softmax probabilities to its cross-entropy (softmax_before_ce), CSRNet's convolutions
initialised with biases of -1 (dead_relu_init), AutoRec made eight sigmoid layers deep
(deep_sigmoid), Deep CORAL's feature extractor frozen by a line left from a linear-probe
baseline, after the optimizer was built (frozen_by_mistake), onsets and frames taking the log of
a magnitude spectrogram of clips with digital silence without a floor (log_zero_nan), ChebNet's
`model.train()` dropped while the per-epoch validation still calls `model.eval()`
(train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
`SPLIT = BLIND7`.
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import BLIND7, buggy, healthy

SPLIT = BLIND7

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 11)


def _glyphs(g: torch.Generator, n: int, size: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 grey images (n, 1, size, size) of six glyphs (an L, a T, a cross, a box, a diagonal,
    two bars) at random offsets and contrast, with their class."""
    s = size
    protos = torch.zeros(6, s, s)
    c = s // 2
    protos[0, 2 : s - 2, 3] = 1
    protos[0, s - 3, 3 : s - 3] = 1
    protos[1, 2, 2 : s - 2] = 1
    protos[1, 2 : s - 2, c] = 1
    protos[2, c, 2 : s - 2] = 1
    protos[2, 2 : s - 2, c] = 1
    protos[3, 3, 3 : s - 3] = 1
    protos[3, s - 4, 3 : s - 3] = 1
    protos[3, 3 : s - 3, 3] = 1
    protos[3, 3 : s - 3, s - 4] = 1
    for i in range(2, s - 2):
        protos[4, i, i] = 1
    protos[5, 3, 2 : s - 2] = 1
    protos[5, s - 4, 2 : s - 2] = 1
    y = torch.randint(0, 6, (n,), generator=g)
    shift = torch.randint(-1, 2, (n, 2), generator=g)
    imgs = torch.stack(
        [torch.roll(protos[int(k)], (int(a), int(b)), (0, 1)) for k, (a, b) in zip(y, shift, strict=True)]
    )
    imgs = imgs * (0.6 + 0.4 * torch.rand(n, 1, 1, generator=g)) + 0.1 * torch.rand(n, s, s, generator=g)
    return (imgs.clamp(0, 1) * 255).round().to(torch.uint8).unsqueeze(1), y


# ----------------------------------------------------------------------------- deep CCA


class DCCA(nn.Module):
    """Two view-specific MLP towers (Andrew et al. 2013) mapped to a shared o-dim space."""

    def __init__(self, d1: int, d2: int, out: int = 4, hidden: int = 128):
        super().__init__()
        self.f1 = nn.Sequential(nn.Linear(d1, hidden), nn.Sigmoid(), nn.Linear(hidden, hidden), nn.Sigmoid(),
                                nn.Linear(hidden, out))  # fmt: skip
        self.f2 = nn.Sequential(nn.Linear(d2, hidden), nn.Sigmoid(), nn.Linear(hidden, hidden), nn.Sigmoid(),
                                nn.Linear(hidden, out))  # fmt: skip

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.f1(x1), self.f2(x2)


def cca_loss(h1: torch.Tensor, h2: torch.Tensor, r: float = 1e-3) -> torch.Tensor:
    """Minus the total canonical correlation: the sum of singular values of
    S11^-1/2 S12 S22^-1/2, with ridge r on the covariances."""
    m = h1.shape[0]
    h1 = h1 - h1.mean(0)
    h2 = h2 - h2.mean(0)
    eye = torch.eye(h1.shape[1])
    s11 = h1.T @ h1 / (m - 1) + r * eye
    s22 = h2.T @ h2 / (m - 1) + r * eye
    s12 = h1.T @ h2 / (m - 1)

    def inv_sqrt(s: torch.Tensor) -> torch.Tensor:
        w, v = torch.linalg.eigh(s)
        return v @ torch.diag(w.clamp_min(1e-9).rsqrt()) @ v.T

    t = inv_sqrt(s11) @ s12 @ inv_sqrt(s22)
    return -torch.linalg.svdvals(t).sum()


def dcca_two_views(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    g = _seed(seed)
    n = 4000
    z = torch.randn(n, 4, generator=g)
    a1, a2 = torch.randn(4, 24, generator=g), torch.randn(4, 16, generator=g)
    x1 = torch.tanh(z @ a1) + 0.3 * torch.randn(n, 24, generator=g)
    x2 = torch.sin(z @ a2) + 0.3 * torch.randn(n, 16, generator=g)
    model = DCCA(24, 16)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-5)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, n, (400,), generator=g)  # large batches: the covariances need them
        h1, h2 = model(x1[idx], x2[idx])
        loss = cca_loss(h1, h2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step}: total correlation {-loss.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- I-AutoRec


class AutoRec(nn.Module):
    """Item-based AutoRec (Sedhain et al. 2015): an item's vector of user ratings through one
    sigmoid hidden layer and an identity output."""

    def __init__(self, n_users: int, hidden: int = 100, bug: str | None = None):
        super().__init__()
        if bug == "deep_sigmoid":  # "a deeper autoencoder learns better representations"
            layers: list[nn.Module] = [nn.Linear(n_users, hidden), nn.Sigmoid()]
            for _ in range(7):
                layers += [nn.Linear(hidden, hidden), nn.Sigmoid()]
            self.encoder = nn.Sequential(*layers)
        else:
            self.encoder = nn.Sequential(nn.Linear(n_users, hidden), nn.Sigmoid())
        self.decoder = nn.Linear(hidden, n_users)

    def forward(self, r: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(r))


def autorec_item_ratings(path: str, epochs: int = 150, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    n_users, n_items, rank = 300, 400, 5
    u, v = torch.randn(n_users, rank, generator=g), torch.randn(n_items, rank, generator=g)
    full = (
        (3 + (u @ v.T) / math.sqrt(rank) + 0.3 * torch.randn(n_users, n_items, generator=g))
        .round()
        .clamp(1, 5)
    )
    observed = torch.rand(n_users, n_items, generator=g) < 0.15
    test = observed & (torch.rand(n_users, n_items, generator=g) < 0.1)
    train = observed & ~test
    r_train = (full * train).T  # items x users, 0 where unobserved
    m_train, m_test = train.T.float(), test.T.float()
    model = AutoRec(n_users, bug=bug)
    lam = 1.0
    opt = torch.optim.Rprop(model.parameters(), lr=1e-3)  # full-batch Rprop, as the paper's code
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        pred = model(r_train)
        mse = ((pred - r_train) ** 2 * m_train).sum()
        reg = lam / 2 * sum((p**2).sum() for n, p in model.named_parameters() if "weight" in n)
        loss = (mse + reg) / m_train.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if epoch % 25 == 0:
            model.eval()
            with torch.no_grad():
                p = model(r_train).clamp(1, 5)
                rmse = (((p - full.T) ** 2 * m_test).sum() / m_test.sum()).sqrt()
            print(f"epoch {epoch}: train {loss.item():.4f} test RMSE {rmse.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- LSTNet


class LSTNet(nn.Module):
    """Lai et al. 2018: a convolution over the window, a GRU, a skip-GRU across periods, and a
    linear autoregressive highway added to the output."""

    def __init__(self, m: int, window: int = 72, hid_c: int = 32, hid_r: int = 32, hid_s: int = 8,
                 k: int = 6, skip: int = 24, hw: int = 24):  # fmt: skip
        super().__init__()
        self.window, self.k, self.skip, self.hw = window, k, skip, hw
        self.pt = (window - k) // skip
        self.conv = nn.Conv2d(1, hid_c, (k, m))
        self.gru = nn.GRU(hid_c, hid_r)
        self.gru_skip = nn.GRU(hid_c, hid_s)
        self.drop = nn.Dropout(0.2)
        self.out = nn.Linear(hid_r + skip * hid_s, m)
        self.ar = nn.Linear(hw, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, m = x.shape
        c = self.drop(F.relu(self.conv(x.unsqueeze(1))).squeeze(3))  # b, hid_c, T'
        _, r = self.gru(c.permute(2, 0, 1))
        r = self.drop(r.squeeze(0))
        s = c[:, :, -self.pt * self.skip :].reshape(b, c.shape[1], self.pt, self.skip)
        s = s.permute(2, 0, 3, 1).reshape(self.pt, b * self.skip, c.shape[1])
        _, s = self.gru_skip(s)
        s = self.drop(s.reshape(b, -1))
        res = self.out(torch.cat([r, s], 1))
        z = x[:, -self.hw :, :].permute(0, 2, 1).reshape(-1, self.hw)
        return res + self.ar(z).view(b, m)


def lstnet_electricity(path: str, steps: int = 250, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    m, length, window = 8, 3000, 72
    t = torch.arange(length).float()
    phase = torch.rand(m, generator=g) * 6
    amp = 0.5 + torch.rand(m, generator=g)
    series = (amp[:, None] * torch.sin(2 * math.pi * t / 24 + phase[:, None])
              + 0.4 * torch.sin(2 * math.pi * t / 168 + phase[:, None])
              + 0.15 * torch.randn(m, length, generator=g)).T  # fmt: skip
    series = (series - series[:2000].mean(0)) / series[:2000].std(0)
    model = LSTNet(m, window)
    criterion = nn.L1Loss()
    lr = 1e-3 * (100 if bug == "lr_x100" else 1)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        starts = torch.randint(0, 2000 - window - 1, (64,), generator=g)
        xb = torch.stack([series[s : s + window] for s in starts.tolist()])
        yb = torch.stack([series[s + window] for s in starts.tolist()])
        model.train()
        loss = criterion(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            model.eval()
            with torch.no_grad():
                vs = torch.arange(2000, length - window - 1, 7)
                xv = torch.stack([series[s : s + window] for s in vs.tolist()])
                yv = torch.stack([series[s + window] for s in vs.tolist()])
                rse = ((model(xv) - yv) ** 2).sum().sqrt() / ((yv - yv.mean()) ** 2).sum().sqrt()
            print(f"step {step}: L1 {loss.item():.4f} valid RSE {rse.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ChebNet


def _sbm(g: torch.Generator, n: int = 600, k: int = 4, p_in: float = 0.04, p_out: float = 0.004,
         d: int = 32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    y = torch.randint(0, k, (n,), generator=g)
    same = y[:, None] == y[None, :]
    probs = torch.where(same, torch.tensor(p_in), torch.tensor(p_out))
    a = (torch.rand(n, n, generator=g) < probs).float().triu(1)
    a = a + a.T
    means = torch.randn(k, d, generator=g) * 0.5
    x = means[y] + torch.randn(n, d, generator=g)
    return a, x, y


class ChebConv(nn.Module):
    """Defferrard et al. 2016: sum_k theta_k T_k(L~) x, Chebyshev polynomials of the rescaled
    Laplacian (lambda_max taken as 2)."""

    def __init__(self, d_in: int, d_out: int, k: int = 3):
        super().__init__()
        self.lins = nn.ModuleList([nn.Linear(d_in, d_out, bias=False) for _ in range(k)])
        self.bias = nn.Parameter(torch.zeros(d_out))

    def forward(self, x: torch.Tensor, lap: torch.Tensor) -> torch.Tensor:
        t0, t1 = x, lap @ x
        out = self.lins[0](t0) + self.lins[1](t1)
        for lin in self.lins[2:]:
            t0, t1 = t1, 2 * (lap @ t1) - t0
            out = out + lin(t1)
        return out + self.bias


class ChebNet(nn.Module):
    def __init__(self, d_in: int, classes: int, hidden: int = 16):
        super().__init__()
        self.c1, self.c2 = ChebConv(d_in, hidden), ChebConv(hidden, classes)

    def forward(self, x: torch.Tensor, lap: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, 0.5, self.training)
        x = F.relu(self.c1(x, lap))
        x = F.dropout(x, 0.5, self.training)
        return F.log_softmax(self.c2(x, lap), dim=1)


def chebnet_node_classification(
    path: str, epochs: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    g = _seed(seed)
    a, x, y = _sbm(g)
    n = len(y)
    deg = a.sum(1).clamp_min(1)
    lap = -(deg.rsqrt()[:, None] * a * deg.rsqrt()[None, :])  # L~ = L - I = -D^-1/2 A D^-1/2
    perm = torch.randperm(n, generator=g)
    idx_train, idx_val = perm[:80], perm[80:280]
    model = ChebNet(x.shape[1], 4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        if bug != "train_in_eval_mode":
            model.train()
        opt.zero_grad()
        out = model(x, lap)
        loss = F.nll_loss(out[idx_train], y[idx_train])
        loss.backward()
        opt.step()
        losses.append(loss.item())
        model.eval()  # the validation below, as in Kipf's train(epoch)
        with torch.no_grad():
            out = model(x, lap)
            val_loss = F.nll_loss(out[idx_val], y[idx_val])
            acc = (out[idx_val].argmax(1) == y[idx_val]).float().mean()
        if epoch % 40 == 0:
            print(f"epoch {epoch}: train {loss.item():.4f} val {val_loss.item():.4f} acc {acc.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- dueling double DQN + PER


class GridWorld:
    """A 6x6 grid, start in a corner, the goal in the opposite one, two walls of lava (-1, end);
    -0.01 a move, +1 at the goal, 50 moves at most."""

    def __init__(self, rng: np.random.Generator, size: int = 6):
        self.size, self.rng = size, rng
        self.lava = {(2, 1), (2, 2), (3, 4), (4, 4)}

    def reset(self) -> np.ndarray:
        self.pos, self.t = (0, 0), 0
        return self._obs()

    def _obs(self) -> np.ndarray:
        o = np.zeros(self.size * self.size, dtype=np.float32)
        o[self.pos[0] * self.size + self.pos[1]] = 1
        return o

    def step(self, a: int) -> tuple[np.ndarray, float, bool]:
        if self.rng.random() < 0.1:  # slippery
            a = int(self.rng.integers(4))
        dr, dc = ((-1, 0), (1, 0), (0, -1), (0, 1))[a]
        r, c = self.pos
        self.pos = (min(max(r + dr, 0), self.size - 1), min(max(c + dc, 0), self.size - 1))
        self.t += 1
        if self.pos == (self.size - 1, self.size - 1):
            return self._obs(), 1.0, True
        if self.pos in self.lava:
            return self._obs(), -1.0, True
        return self._obs(), -0.01, self.t >= 50


class DuelingQ(nn.Module):
    def __init__(self, d: int, actions: int, hidden: int = 64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, hidden), nn.ReLU())
        self.value = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.adv = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, actions))

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        h = self.body(s)
        a = self.adv(h)
        return self.value(h) + a - a.mean(1, keepdim=True)


class PrioritizedReplay:
    """Proportional prioritized replay (Schaul et al. 2016) on a flat array (small buffer)."""

    def __init__(self, capacity: int, alpha: float = 0.6):
        self.capacity, self.alpha = capacity, alpha
        self.data: list[tuple] = []
        self.prio = np.zeros(capacity, dtype=np.float64)
        self.pos = 0

    def add(self, item: tuple) -> None:
        p = self.prio.max() if self.data else 1.0
        if len(self.data) < self.capacity:
            self.data.append(item)
        else:
            self.data[self.pos] = item
        self.prio[self.pos] = p
        self.pos = (self.pos + 1) % self.capacity

    def sample(self, rng: np.random.Generator, k: int, beta: float) -> tuple[list, np.ndarray, np.ndarray]:
        pr = self.prio[: len(self.data)] ** self.alpha
        probs = pr / pr.sum()
        idx = rng.choice(len(self.data), k, p=probs)
        w = (len(self.data) * probs[idx]) ** -beta
        return [self.data[i] for i in idx], idx, (w / w.max()).astype(np.float32)

    def update(self, idx: np.ndarray, td: np.ndarray) -> None:
        self.prio[idx] = np.abs(td) + 1e-5


def dueling_ddqn_per_gridworld(path: str, env_steps: int = 1500, seed: int = 0) -> list[float]:
    _seed(seed)
    rng = np.random.default_rng(seed)
    env = GridWorld(rng)
    q, q_target = DuelingQ(36, 4), DuelingQ(36, 4)
    q_target.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=5e-4)
    buffer = PrioritizedReplay(5000)
    gamma, batch = 0.97, 32
    hook = Hook(path)
    hook.register_module(q)
    losses, returns, ep_ret = [], [], 0.0
    s = env.reset()
    for t in range(env_steps):
        eps = max(0.05, 1.0 - t / 800)
        if rng.random() < eps:
            a = int(rng.integers(4))
        else:
            with torch.no_grad():
                a = int(q(torch.from_numpy(s)[None]).argmax())
        s2, r, done = env.step(a)
        buffer.add((s, a, r, s2, float(done and r != -0.01)))
        ep_ret += r
        s = s2
        if done:
            returns.append(ep_ret)
            s, ep_ret = env.reset(), 0.0
        if t >= 200:
            beta = min(1.0, 0.4 + 0.6 * t / env_steps)
            items, idx, w = buffer.sample(rng, batch, beta)
            sb, ab, rb, s2b, db = (torch.as_tensor(np.array(z)) for z in zip(*items, strict=True))
            with torch.no_grad():  # double DQN: the online net picks, the target net evaluates
                a2 = q(s2b).argmax(1, keepdim=True)
                target = rb.float() + gamma * (1 - db.float()) * q_target(s2b).gather(1, a2).squeeze(1)
            pred = q(sb).gather(1, ab.long()[:, None]).squeeze(1)
            td = target - pred
            loss = (torch.from_numpy(w) * F.smooth_l1_loss(pred, target, reduction="none")).mean()
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(q.parameters(), 10.0)
            opt.step()
            buffer.update(idx, td.detach().numpy())
            losses.append(loss.item())
            if t % 250 == 0:
                q_target.load_state_dict(q.state_dict())
                print(f"t {t}: loss {loss.item():.4f} mean return {np.mean(returns[-20:]):.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- multi-similarity loss


class MultiSimilarityLoss(nn.Module):
    """Wang et al. 2019: pairs mined by the hardest opposite-sign pair (margin eps), weighted by
    soft-plus style log-sum-exp terms with alpha (positives), beta (negatives) around lambda."""

    def __init__(self, alpha: float = 2.0, beta: float = 50.0, lam: float = 0.5, eps: float = 0.1):
        super().__init__()
        self.alpha, self.beta, self.lam, self.eps = alpha, beta, lam, eps

    def forward(self, emb: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        sim = emb @ emb.T
        terms = []
        for i in range(len(labels)):
            pos_mask = labels == labels[i]
            pos_mask[i] = False
            pos, neg = sim[i][pos_mask], sim[i][labels != labels[i]]
            neg_kept = neg[neg + self.eps > pos.min()]
            pos_kept = pos[pos - self.eps < neg.max()]
            if len(neg_kept) == 0 or len(pos_kept) == 0:
                continue
            pl = torch.log1p(torch.exp(-self.alpha * (pos_kept - self.lam)).sum()) / self.alpha
            nl = torch.log1p(torch.exp(self.beta * (neg_kept - self.lam)).sum()) / self.beta
            terms.append(pl + nl)
        if not terms:
            return sim.sum() * 0
        return torch.stack(terms).mean()


def multi_similarity_retrieval(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    g = _seed(seed)
    n_classes, d = 40, 32
    centers = torch.randn(n_classes, 12, generator=g)
    mix = torch.linalg.qr(torch.randn(d, d, generator=g))[0]

    def sample(classes: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """12 class-bearing dimensions and 20 of nuisance (pose, lighting), rotated together."""
        y = classes.repeat_interleave(k)
        signal = centers[y] + 0.4 * torch.randn(len(y), 12, generator=g)
        nuisance = 2.0 * torch.randn(len(y), d - 12, generator=g)
        return torch.tanh(torch.cat([signal, nuisance], 1) @ mix), y

    model = nn.Sequential(nn.Linear(d, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 128),
                          nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 64))  # fmt: skip
    criterion = MultiSimilarityLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[200], gamma=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    xq, yq = sample(torch.arange(30, 40), 20)  # unseen classes for Recall@1
    losses = []
    for step in range(steps):
        classes = torch.randperm(30, generator=g)[:8]  # P x K sampling: 8 classes x 5
        xb, yb = sample(classes, 5)
        model.train()
        loss = criterion(F.normalize(model(xb), dim=1), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 75 == 0:
            model.eval()
            with torch.no_grad():
                e = F.normalize(model(xq), dim=1)
                s = e @ e.T - 2 * torch.eye(len(e))
                r1 = (yq[s.argmax(1)] == yq).float().mean()
            print(f"step {step}: MS loss {loss.item():.4f} Recall@1 {r1.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- InfoGAN


class InfoD(nn.Module):
    """A shared body with the discriminator head and the Q head (categorical logits, and the mean
    and log-std of the continuous codes)."""

    def __init__(self, d: int = 144, n_cat: int = 6, n_cont: int = 2):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(d, 256), nn.LeakyReLU(0.1), nn.Linear(256, 128), nn.LeakyReLU(0.1)
        )
        self.d_head = nn.Linear(128, 1)
        self.q = nn.Sequential(nn.Linear(128, 64), nn.LeakyReLU(0.1), nn.Linear(64, n_cat + 2 * n_cont))
        self.n_cat = n_cat

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.body(x)
        return self.d_head(h).squeeze(1), self.q(h)


def infogan_categorical_codes(path: str, steps: int = 400, seed: int = 0) -> list[float]:
    g = _seed(seed)
    imgs, _ = _glyphs(g, 4000)
    data = (imgs.float() / 127.5 - 1).flatten(1)
    n_cat, n_cont, nz = 6, 2, 16
    gen = nn.Sequential(nn.Linear(nz + n_cat + n_cont, 128), nn.BatchNorm1d(128), nn.ReLU(),
                        nn.Linear(128, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 144), nn.Tanh())  # fmt: skip
    disc = InfoD()
    bce = nn.BCEWithLogitsLoss()
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3, betas=(0.5, 0.999))
    opt_info = torch.optim.Adam([*gen.parameters(), *disc.parameters()], lr=2e-4, betas=(0.5, 0.999))
    hook = Hook(path)
    hook.register_module(gen, name="generator")
    hook.register_module(disc, name="discriminator")
    hook.register_loss(bce)
    losses = []
    for step in range(steps):
        real = data[torch.randint(0, len(data), (64,), generator=g)]
        c_idx = torch.randint(0, n_cat, (64,), generator=g)
        c_cont = torch.rand(64, n_cont, generator=g) * 2 - 1
        z = torch.cat([torch.randn(64, nz, generator=g), F.one_hot(c_idx, n_cat).float(), c_cont], 1)
        fake = gen(z)
        d_real, _ = disc(real)
        d_fake, _ = disc(fake.detach())
        loss_d = bce(d_real, torch.ones_like(d_real)) + bce(d_fake, torch.zeros_like(d_fake))
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        d_out, _ = disc(fake)
        loss_g = bce(d_out, torch.ones_like(d_out))
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        # the mutual-information step: G and Q (on the discriminator's body) together
        _, q_out = disc(gen(z))
        mu, log_std = q_out[:, n_cat : n_cat + n_cont], q_out[:, n_cat + n_cont :].clamp(-3, 2)
        info_cat = F.cross_entropy(q_out[:, :n_cat], c_idx)
        info_cont = (log_std + 0.5 * ((c_cont - mu) / log_std.exp()) ** 2).mean()
        info = info_cat + 0.1 * info_cont
        opt_info.zero_grad()
        info.backward()
        opt_info.step()
        losses.append(loss_g.item() + info.item())
        if step % 100 == 0:
            print(f"step {step}: D {loss_d.item():.3f} G {loss_g.item():.3f} info-cat {info_cat.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SincNet


class SincConv(nn.Module):
    """Ravanelli & Bengio 2018: band-pass filters parametrized by learnable low cut-offs and
    bandwidths (Hz), a Hamming window, mel-spaced initialisation."""

    def __init__(self, n_filters: int = 16, kernel: int = 101, sr: int = 8000):
        super().__init__()
        mel = np.linspace(
            2595 * np.log10(1 + 30 / 700), 2595 * np.log10(1 + (sr / 2 - 100) / 700), n_filters + 1
        )
        hz = 700 * (10 ** (mel / 2595) - 1)
        self.low_hz = nn.Parameter(torch.tensor(hz[:-1], dtype=torch.float32).view(-1, 1))
        self.band_hz = nn.Parameter(torch.tensor(np.diff(hz), dtype=torch.float32).view(-1, 1))
        n = (kernel - 1) / 2
        self.register_buffer("n_", 2 * math.pi * torch.arange(-n, 0).view(1, -1) / sr)
        self.register_buffer("window", torch.hamming_window(kernel, periodic=False)[: int(n)])
        self.sr, self.kernel = sr, kernel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        low = 50 + self.low_hz.abs()
        high = (low + 50 + self.band_hz.abs()).clamp(50, self.sr / 2)
        band = (high - low)[:, 0]
        left = (torch.sin(high @ self.n_) - torch.sin(low @ self.n_)) / (self.n_ / 2) * self.window
        center = 2 * band.view(-1, 1)
        filters = torch.cat([left, center, left.flip(1)], 1) / (2 * band[:, None])
        return F.conv1d(x, filters.view(-1, 1, self.kernel))


class SincNet(nn.Module):
    def __init__(self, speakers: int):
        super().__init__()
        self.in_norm = nn.LayerNorm(1600)
        self.sinc = SincConv()
        self.n1 = nn.LayerNorm([16, 500])
        self.conv2 = nn.Conv1d(16, 32, 5)
        self.n2 = nn.LayerNorm([32, 165])
        self.mlp = nn.Sequential(nn.Linear(32 * 165, 256), nn.BatchNorm1d(256), nn.LeakyReLU(0.2), nn.Dropout(0.2),
                                 nn.Linear(256, speakers), nn.LogSoftmax(dim=1))  # fmt: skip

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        x = self.in_norm(wav).unsqueeze(1)
        x = F.leaky_relu(self.n1(F.max_pool1d(self.sinc(x).abs(), 3)), 0.2)
        x = F.leaky_relu(self.n2(F.max_pool1d(self.conv2(x), 3)), 0.2)
        return self.mlp(x.flatten(1))


def sincnet_speaker_id(path: str, steps: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    speakers, sr, n = 10, 8000, 1200
    f0 = 90 + 160 * torch.rand(speakers, generator=g)
    timbre = torch.rand(speakers, 8, generator=g) ** 2
    labels = torch.randint(0, speakers, (n,), generator=g)
    t = torch.arange(1600) / sr
    jitter = 1 + 0.05 * torch.randn(n, 1, generator=g)
    wavs = sum(timbre[labels, h : h + 1] * torch.sin(2 * math.pi * (h + 1) * f0[labels, None] * jitter * t
               + 6 * torch.rand(n, 1, generator=g)) for h in range(8))  # fmt: skip
    wavs = wavs + 0.05 * torch.randn(n, 1600, generator=g)
    if bug == "shuffled_labels":  # the file list was shuffled, the label list read separately
        labels = labels[torch.randperm(n, generator=g)]
    model = SincNet(speakers)
    criterion = nn.NLLLoss()
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.95, eps=1e-8)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, 1000, (32,), generator=g)
        model.train()
        loss = criterion(model(wavs[idx] * (0.8 + 0.4 * torch.rand(32, 1, generator=g))), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            model.eval()
            with torch.no_grad():
                err = (model(wavs[1000:]).argmax(1) != labels[1000:]).float().mean()
            print(f"step {step}: NLL {loss.item():.4f} chunk error {err.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- pointer-generator


class PointerGenerator(nn.Module):
    """See et al. 2017: a BiLSTM encoder, an LSTM decoder with additive attention over the
    source, p_gen mixing the vocabulary distribution with the copy distribution over the
    extended vocabulary, and a coverage vector fed to the attention."""

    def __init__(self, vocab: int, ext: int, emb: int = 32, hidden: int = 64):
        super().__init__()
        self.vocab, self.ext = vocab, ext
        self.embed = nn.Embedding(vocab, emb)
        self.enc = nn.LSTM(emb, hidden, batch_first=True, bidirectional=True)
        self.reduce_h, self.reduce_c = nn.Linear(2 * hidden, hidden), nn.Linear(2 * hidden, hidden)
        self.dec = nn.LSTMCell(emb + 2 * hidden, hidden)
        self.w_h = nn.Linear(2 * hidden, hidden, bias=False)
        self.w_s = nn.Linear(hidden, hidden)
        self.w_c = nn.Linear(1, hidden, bias=False)
        self.v = nn.Linear(hidden, 1, bias=False)
        self.p_gen = nn.Linear(4 * hidden + emb, 1)
        self.out = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.Linear(hidden, vocab))

    def forward(self, src_ext: torch.Tensor, src_in: torch.Tensor, dec_in: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        b, n = src_in.shape
        enc, (h, c) = self.enc(self.embed(src_in))
        h = torch.relu(self.reduce_h(torch.cat([h[0], h[1]], 1)))
        c = torch.relu(self.reduce_c(torch.cat([c[0], c[1]], 1)))
        enc_feat = self.w_h(enc)
        ctx = enc.new_zeros(b, enc.shape[2])
        coverage = enc.new_zeros(b, n)
        dists, cov_losses = [], []
        for t in range(dec_in.shape[1]):
            x = self.embed(dec_in[:, t])
            h, c = self.dec(torch.cat([x, ctx], 1), (h, c))
            e = self.v(torch.tanh(enc_feat + self.w_s(h)[:, None] + self.w_c(coverage[..., None]))).squeeze(2)
            attn = torch.softmax(e, 1)
            cov_losses.append(torch.minimum(attn, coverage).sum(1))
            coverage = coverage + attn
            ctx = (attn[..., None] * enc).sum(1)
            p_vocab = torch.softmax(self.out(torch.cat([h, ctx], 1)), 1)
            p_gen = torch.sigmoid(self.p_gen(torch.cat([ctx, h, c, x], 1)))
            dist = torch.cat([p_gen * p_vocab, p_vocab.new_zeros(b, self.ext - self.vocab)], 1)
            dists.append(dist.scatter_add(1, src_ext, (1 - p_gen) * attn))
        return torch.stack(dists, 1), torch.stack(cov_losses, 1)


def pointer_generator_coverage(path: str, steps: int = 450, seed: int = 0) -> list[float]:
    g = _seed(seed)
    bos, eos, unk, vocab, ext, n = 0, 1, 2, 30, 40, 12
    model = PointerGenerator(vocab, ext)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.15, initial_accumulator_value=0.1)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        src = torch.randint(3, ext, (32, n), generator=g)  # ids >= 30 are out of vocabulary
        tgt = torch.cat([src[:, ::2], torch.full((32, 1), eos)], 1)  # the "summary": every other word
        src_in = torch.where(src >= vocab, unk, src)
        dec_in = torch.cat([torch.full((32, 1), bos), tgt[:, :-1]], 1)
        dec_in = torch.where(dec_in >= vocab, unk, dec_in)
        dists, cov = model(src, src_in, dec_in)
        nll = -torch.log(dists.gather(2, tgt[..., None]).squeeze(2) + 1e-12)
        cov_weight = (
            0.0 if step < 2 * steps // 3 else 1.0
        )  # coverage switched on for the last phase, as in the paper
        loss = (nll + cov_weight * cov).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            acc = (dists.argmax(2) == tgt).float().mean()
            print(
                f"step {step}: loss {loss.item():.4f} nll {nll.mean().item():.4f} token acc {acc.item():.3f}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- relation network


def _stroke_classes(g: torch.Generator, n_classes: int, size: int = 14) -> torch.Tensor:
    """n_classes prototype images of three random straight strokes each (an Omniglot stand-in)."""
    protos = torch.zeros(n_classes, size, size)
    for k in range(n_classes):
        for _ in range(3):
            p0 = torch.randint(2, size - 2, (2,), generator=g).float()
            p1 = torch.randint(2, size - 2, (2,), generator=g).float()
            for s in torch.linspace(0, 1, 20):
                r, c = (p0 + s * (p1 - p0)).round().long().tolist()
                protos[k, r, c] = 1
    return protos


def _distort(g: torch.Generator, protos: torch.Tensor) -> torch.Tensor:
    shift = torch.randint(-1, 2, (len(protos), 2), generator=g)
    out = torch.stack(
        [torch.roll(p, (int(a), int(b)), (0, 1)) for p, (a, b) in zip(protos, shift, strict=True)]
    )
    drop = torch.rand(out.shape, generator=g) < 0.1
    return (out * ~drop + 0.1 * torch.rand(out.shape, generator=g)).unsqueeze(1)


class RelationNet(nn.Module):
    """Sung et al. 2018: an embedding CNN and a learned relation module scoring each
    (query, class) pair of concatenated feature maps in [0, 1]."""

    def __init__(self, c: int = 32):
        super().__init__()

        def block(i: int, o: int, pool: bool) -> nn.Sequential:
            layers: list[nn.Module] = [nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU()]
            return nn.Sequential(*layers, *([nn.MaxPool2d(2)] if pool else []))

        self.embed = nn.Sequential(block(1, c, True), block(c, c, True), block(c, c, False))
        self.relation = nn.Sequential(block(2 * c, c, True), nn.Flatten(), nn.Linear(c * 1 * 1, 8), nn.ReLU(),
                                      nn.Linear(8, 1), nn.Sigmoid())  # fmt: skip

    def forward(self, support: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        s, q = self.embed(support), self.embed(query)
        ns, nq = len(s), len(q)
        pairs = torch.cat([s[None].expand(nq, -1, -1, -1, -1), q[:, None].expand(-1, ns, -1, -1, -1)], 2)
        return self.relation(pairs.flatten(0, 1)).view(nq, ns)


def relation_network_few_shot(path: str, episodes: int = 300, seed: int = 0) -> list[float]:
    g = _seed(seed)
    protos = _stroke_classes(g, 80)
    model = RelationNet()
    criterion = nn.MSELoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100, gamma=0.5)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    way, queries = 5, 5
    for ep in range(episodes):
        classes = torch.randperm(60, generator=g)[:way]  # 60 training classes, 20 held out
        support = _distort(g, protos[classes])
        q_lab = torch.arange(way).repeat_interleave(queries)
        query = _distort(g, protos[classes[q_lab]])
        model.train()
        scores = model(support, query)
        loss = criterion(scores, F.one_hot(q_lab, way).float())
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if ep % 75 == 0:
            model.eval()
            with torch.no_grad():
                test_cls = 60 + torch.randperm(20, generator=g)[:way]
                s = model(_distort(g, protos[test_cls]), _distort(g, protos[test_cls[q_lab]]))
                acc = (s.argmax(1) == q_lab).float().mean()
            print(f"episode {ep}: MSE {loss.item():.4f} 5-way 1-shot test acc {acc.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- CSRNet crowd counting


def _crowd(g: torch.Generator, n: int, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """Grey scenes with 0..40 blob "heads" on a textured background, and their density maps
    (a Gaussian of sigma 1.5 per head, integrating to the count)."""
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    imgs, dens = [], []
    for _ in range(n):
        k = int(torch.randint(0, 41, (1,), generator=g))
        pts = torch.rand(k, 2, generator=g) * (size - 4) + 2
        d2 = (yy[None] - pts[:, 0, None, None]) ** 2 + (xx[None] - pts[:, 1, None, None]) ** 2
        heads = torch.exp(-d2 / (2 * 1.0**2)).sum(0)
        gauss = torch.exp(-d2 / (2 * 1.5**2))
        gauss = gauss / gauss.sum((1, 2), keepdim=True).clamp_min(1e-8)
        dens.append(gauss.sum(0))
        background = 0.3 + 0.1 * torch.sin(xx / 3 + float(torch.rand(1, generator=g)) * 6)
        imgs.append(background + 0.6 * heads.clamp(max=1) + 0.05 * torch.randn(size, size, generator=g))
    return torch.stack(imgs)[:, None], torch.stack(dens)[:, None]


class CSRNet(nn.Module):
    """Li et al. 2018 shrunk: a VGG-style front end (two pools, 1/4 resolution) and a back end of
    dilated 3x3 convolutions (dilation 2), a 1x1 output; Gaussian(0, 0.01) initialisation."""

    def __init__(self, bug: str | None = None):
        super().__init__()
        self.frontend = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        self.backend = nn.Sequential(
            nn.Conv2d(32, 32, 3, padding=2, dilation=2), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=2, dilation=2), nn.ReLU(),
            nn.Conv2d(32, 16, 3, padding=2, dilation=2), nn.ReLU(),
        )  # fmt: skip
        self.output = nn.Conv2d(16, 1, 1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(
                    m.weight, std=0.01 if m is self.output else math.sqrt(2 / (9 * m.out_channels))
                )
                # "a small negative bias keeps the density map sparse where there is no one"
                nn.init.constant_(m.bias, -1.0 if bug == "dead_relu_init" else 0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.backend(self.frontend(x)))


def csrnet_crowd_density(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    imgs, dens = _crowd(g, 600)
    target = F.avg_pool2d(dens, 4) * 16  # the density at 1/4 resolution, same count
    model = CSRNet(bug=bug)
    criterion = nn.MSELoss(reduction="sum")
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.95, weight_decay=5e-4)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, 500, (8,), generator=g)
        model.train()
        loss = criterion(model(imgs[idx]), target[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 75 == 0:
            model.eval()
            with torch.no_grad():
                mae = (model(imgs[500:]).sum((1, 2, 3)) - dens[500:].sum((1, 2, 3))).abs().mean()
            print(f"step {step}: loss {loss.item():.4f} count MAE {mae.item():.2f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- deep image prior


class Hourglass(nn.Module):
    """Ulyanov et al.'s skip network, shrunk: two strided-conv downsamplings, bilinear
    upsamplings, 4-channel skips, BatchNorm and LeakyReLU, a sigmoid output."""

    def __init__(self, c_in: int = 16, c: int = 32, skip: int = 4):
        super().__init__()

        def cbl(i: int, o: int, stride: int = 1) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(i, o, 3, stride, 1, padding_mode="reflect"), nn.BatchNorm2d(o),
                                 nn.LeakyReLU(0.2))  # fmt: skip

        self.down1, self.down2 = (
            nn.Sequential(cbl(c_in, c, 2), cbl(c, c)),
            nn.Sequential(cbl(c, c, 2), cbl(c, c)),
        )
        self.skip0, self.skip1 = cbl(c_in, skip), cbl(c, skip)
        self.up2, self.up1 = cbl(c + skip, c), cbl(c + skip, c)
        self.out = nn.Conv2d(c, 3, 1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(z)
        d2 = self.down2(d1)
        u = F.interpolate(d2, scale_factor=2, mode="bilinear", align_corners=False)
        u = self.up2(torch.cat([u, self.skip1(d1)], 1))
        u = F.interpolate(u, scale_factor=2, mode="bilinear", align_corners=False)
        u = self.up1(torch.cat([u, self.skip0(z)], 1))
        return torch.sigmoid(self.out(u))


def deep_image_prior_denoise(path: str, iters: int = 400, seed: int = 0) -> list[float]:
    g = _seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(0, 1, 32), torch.linspace(0, 1, 32), indexing="ij")
    clean = torch.stack([0.2 + 0.6 * xx, 0.5 + 0.3 * torch.sin(6 * yy), 0.3 + 0.4 * (xx * yy)])
    clean[:, 8:20, 10:22] = torch.tensor([0.9, 0.2, 0.1])[:, None, None]
    clean[:, ((yy - 0.7) ** 2 + (xx - 0.3) ** 2) < 0.02] = 0.95
    noisy = (clean + 25 / 255 * torch.randn(3, 32, 32, generator=g)).clamp(0, 1)[None]
    z = 0.1 * torch.rand(1, 16, 32, 32, generator=g)
    model = Hourglass()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    hook = Hook(path)
    hook.register_module(model)
    losses, avg = [], None
    for it in range(iters):
        out = model(z + torch.randn(z.shape, generator=g) / 30)  # reg_noise_std = 1/30
        loss = F.mse_loss(out, noisy)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        avg = out.detach() if avg is None else 0.99 * avg + 0.01 * out.detach()  # exponential average
        if it % 100 == 0:
            psnr = -10 * torch.log10(F.mse_loss(avg[0], clean))
            print(f"iter {it}: loss {loss.item():.5f} PSNR(avg, clean) {psnr.item():.2f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- SINDy


def _lorenz(n: int = 4000, dt: float = 0.005) -> np.ndarray:
    def f(s: np.ndarray) -> np.ndarray:
        x, y, z = s
        return np.array([10 * (y - x), x * (28 - z) - y, x * y - 8 / 3 * z])

    s, out = np.array([-8.0, 7.0, 27.0]), []
    for _ in range(n):
        k1 = f(s)
        k2 = f(s + dt / 2 * k1)
        k3 = f(s + dt / 2 * k2)
        k4 = f(s + dt * k3)
        s = s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(s)
    return np.array(out)


class SINDy(nn.Module):
    """Brunton et al. 2016: dX/dt = Theta(X) Xi over a polynomial library (degree 2), Xi fitted
    by gradient descent with an L1 penalty and sequential thresholding (a fixed mask)."""

    def __init__(self, n_terms: int = 10, dims: int = 3):
        super().__init__()
        self.xi = nn.Parameter(torch.zeros(n_terms, dims))
        self.register_buffer("mask", torch.ones(n_terms, dims))

    @staticmethod
    def library(x: torch.Tensor) -> torch.Tensor:
        a, b, c = x.unbind(1)
        return torch.stack([torch.ones_like(a), a, b, c, a * a, a * b, a * c, b * b, b * c, c * c], 1)

    def forward(self, theta: torch.Tensor) -> torch.Tensor:
        return theta @ (self.xi * self.mask)


def sindy_lorenz_sparse(path: str, steps: int = 1500, seed: int = 0) -> list[float]:
    g = _seed(seed)
    dt = 0.005
    traj = _lorenz(dt=dt)
    x = torch.tensor(traj, dtype=torch.float32)
    x = x + 0.01 * torch.randn(x.shape, generator=g)
    dx = (x[2:] - x[:-2]) / (2 * dt)  # central differences
    x = x[1:-1]
    scale = dx.std(0)
    theta = SINDy.library(x)
    col = theta.std(0).clamp_min(1.0)  # the constant column kept at 1
    theta = theta / col  # a library with columns of unit scale, as the SINDy autoencoder's
    model = SINDy()
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, len(x), (256,), generator=g)
        fit = F.mse_loss(model(theta[idx]), dx[idx] / scale)
        loss = fit + 1e-4 * model.xi.abs().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step in (steps // 2, 3 * steps // 4):  # sequential thresholding, on the physical coefficients
            with torch.no_grad():
                model.mask *= ((model.xi * scale / col[:, None]).abs() > 0.1).float()
        if step % 150 == 0:
            print(f"step {step}: loss {loss.item():.5f} active terms {int(model.mask.sum())}")
    print("xi:", (model.xi * model.mask * scale / col[:, None]).detach().T.numpy().round(2))
    hook.close()
    return losses


# ----------------------------------------------------------------------------- active learning


def _moons(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.randint(0, 2, (n,), generator=g)
    t = torch.rand(n, generator=g) * math.pi
    x = torch.stack([torch.cos(t) + y * 1.0, torch.sin(t) * (1 - 2 * y) + y * 0.4], 1)
    return x + 0.12 * torch.randn(n, 2, generator=g), y


def active_learning_entropy(path: str, rounds: int = 8, seed: int = 0) -> list[float]:
    g = _seed(seed)
    x_pool, y_pool = _moons(g, 3000)
    x_test, y_test = _moons(g, 1000)
    labeled = torch.zeros(3000, dtype=torch.bool)
    labeled[torch.randperm(3000, generator=g)[:20]] = True
    model = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 64), nn.ReLU(),
                          nn.Dropout(0.1), nn.Linear(64, 2))  # fmt: skip
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for rnd in range(rounds):
        xl, yl = x_pool[labeled], y_pool[labeled]
        model.train()
        for _ in range(60):  # warm-started: the model keeps training on the grown labeled set
            idx = torch.randint(0, len(xl), (min(32, len(xl)),), generator=g)
            loss = criterion(model(xl[idx]), yl[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x_test).argmax(1) == y_test).float().mean()
            p = torch.softmax(model(x_pool), 1)
            entropy = -(p * p.clamp_min(1e-12).log()).sum(1)
            entropy[labeled] = -1
            labeled[entropy.topk(20).indices] = True  # query the 20 most uncertain points
        print(
            f"round {rnd}: {int(labeled.sum()) - 20} labels, loss {loss.item():.4f} test acc {acc.item():.3f}"
        )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- experience replay


def experience_replay_class_incremental(path: str, steps_per_task: int = 80, seed: int = 0) -> list[float]:
    g = _seed(seed)
    protos = _stroke_classes(g, 10)
    model = nn.Sequential(nn.Flatten(), nn.Linear(196, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10))  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    hook = Hook(path)
    hook.register_module(model)
    buffer_x: list[torch.Tensor] = []
    buffer_y: list[int] = []
    seen, capacity = 0, 200
    losses = []
    for task in range(5):  # five tasks of two new classes each, one shared head
        classes = torch.tensor([2 * task, 2 * task + 1])
        for _ in range(steps_per_task):
            y = classes[torch.randint(0, 2, (10,), generator=g)]
            x = _distort(g, protos[y])
            loss = F.cross_entropy(model(x), y)
            if buffer_x:
                ridx = torch.randint(0, len(buffer_x), (10,), generator=g)
                loss = loss + F.cross_entropy(model(torch.stack([buffer_x[i] for i in ridx.tolist()])),
                                              torch.tensor([buffer_y[i] for i in ridx.tolist()]))  # fmt: skip
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            for xi, yi in zip(x, y.tolist(), strict=True):  # reservoir sampling
                seen += 1
                if len(buffer_x) < capacity:
                    buffer_x.append(xi)
                    buffer_y.append(yi)
                else:
                    j = int(torch.randint(0, seen, (1,), generator=g))
                    if j < capacity:
                        buffer_x[j], buffer_y[j] = xi, yi
        with torch.no_grad():
            yt = torch.arange(2 * task + 2).repeat(20)
            acc = (model(_distort(g, protos[yt])).argmax(1) == yt).float().mean()
        print(f"task {task}: loss {loss.item():.4f} accuracy on all seen classes {acc.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ComplEx + N3


class ComplEx(nn.Module):
    """Trouillon et al. 2016 with reciprocal relations and 1-vs-all scoring (Lacroix et al. 2018)."""

    def __init__(self, n_ent: int, n_rel: int, rank: int = 32):
        super().__init__()
        self.rank = rank
        self.ent = nn.Embedding(n_ent, 2 * rank)
        self.rel = nn.Embedding(2 * n_rel, 2 * rank)
        with torch.no_grad():
            self.ent.weight.mul_(1e-3)
            self.rel.weight.mul_(1e-3)

    def forward(self, h: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        k = self.rank
        lhs, rel, all_e = self.ent(h), self.rel(r), self.ent.weight
        lr_, li = lhs[:, :k], lhs[:, k:]
        rr, ri = rel[:, :k], rel[:, k:]
        q_re, q_im = lr_ * rr - li * ri, lr_ * ri + li * rr
        scores = q_re @ all_e[:, :k].T + q_im @ all_e[:, k:].T
        factors = ((lr_**2 + li**2).sqrt(), (rr**2 + ri**2).sqrt())
        return scores, factors


def complex_n3_link_prediction(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    g = _seed(seed)
    n_ent, n_rel, n_clusters = 300, 8, 10
    cluster = torch.randint(0, n_clusters, (n_ent,), generator=g)
    triples = []
    for r in range(n_rel):
        target_cluster = torch.randperm(n_clusters, generator=g)
        ok = cluster[None, :] == target_cluster[cluster][:, None]
        keep = ok & (torch.rand(n_ent, n_ent, generator=g) < 0.12)
        h, t = keep.nonzero(as_tuple=True)
        triples.append(torch.stack([h, torch.full_like(h, r), t], 1))
    all_triples = torch.cat(triples)
    all_triples = all_triples[torch.randperm(len(all_triples), generator=g)]
    test, train = all_triples[:500], all_triples[500:]
    inverse = torch.stack([train[:, 2], train[:, 1] + n_rel, train[:, 0]], 1)
    train = torch.cat([train, inverse])  # reciprocal relations
    model = ComplEx(n_ent, n_rel)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        b = train[torch.randint(0, len(train), (500,), generator=g)]
        scores, factors = model(b[:, 0], b[:, 1])
        tail = model.ent(b[:, 2])
        tail_mod = (tail[:, : model.rank] ** 2 + tail[:, model.rank :] ** 2).sqrt()
        n3 = sum((f.abs() ** 3).sum() for f in (*factors, tail_mod)) / len(b)
        loss = criterion(scores, b[:, 2]) + 5e-3 * n3
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 75 == 0:
            with torch.no_grad():
                s, _ = model(test[:, 0], test[:, 1])
                rank = (s > s.gather(1, test[:, 2:3])).sum(1) + 1
            print(f"step {step}: loss {loss.item():.4f} raw MRR {(1 / rank.float()).mean().item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DGCNN


def _point_shapes(g: torch.Generator, n: int, points: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Point clouds of six surfaces (sphere, cube, cylinder, cone, torus, plane), randomly scaled
    and rotated about z, jittered."""
    y = torch.randint(0, 6, (n,), generator=g)
    clouds = []
    for k in y.tolist():
        u, v = torch.rand(points, generator=g), torch.rand(points, generator=g)
        a = 2 * math.pi * u
        if k == 0:
            z = 2 * v - 1
            r = (1 - z**2).sqrt()
            p = torch.stack([r * torch.cos(a), r * torch.sin(a), z], 1)
        elif k == 1:
            p = torch.rand(points, 3, generator=g) * 2 - 1
            face = torch.randint(0, 3, (points,), generator=g)
            p[torch.arange(points), face] = torch.sign(p[torch.arange(points), face])
        elif k == 2:
            p = torch.stack([torch.cos(a), torch.sin(a), 2 * v - 1], 1)
        elif k == 3:
            p = torch.stack([(1 - v) * torch.cos(a), (1 - v) * torch.sin(a), 2 * v - 1], 1)
        elif k == 4:
            b = 2 * math.pi * v
            p = torch.stack([(1 + 0.35 * torch.cos(b)) * torch.cos(a), (1 + 0.35 * torch.cos(b)) * torch.sin(a),
                             0.35 * torch.sin(b)], 1)  # fmt: skip
        else:
            p = torch.stack([2 * u - 1, 2 * v - 1, 0.05 * torch.randn(points, generator=g)], 1)
        th = float(torch.rand(1, generator=g)) * 2 * math.pi
        rot = torch.tensor([[math.cos(th), -math.sin(th), 0], [math.sin(th), math.cos(th), 0], [0, 0, 1.0]])
        scale = 0.8 + 0.4 * torch.rand(3, generator=g)
        clouds.append((p @ rot.T) * scale + 0.02 * torch.randn(points, 3, generator=g))
    return torch.stack(clouds).transpose(1, 2), y  # (n, 3, points)


def _edge_features(x: torch.Tensor, k: int) -> torch.Tensor:
    """(B, C, N) -> (B, 2C, N, k): [x_j - x_i, x_i] over the k nearest neighbours in feature space."""
    d = -2 * x.transpose(1, 2) @ x + (x**2).sum(1, keepdim=True) + (x**2).sum(1, keepdim=True).transpose(1, 2)
    idx = d.topk(k, dim=-1, largest=False).indices  # (B, N, k)
    b, c, n = x.shape
    xt = x.transpose(1, 2)
    neigh = xt.gather(1, idx.reshape(b, n * k, 1).expand(-1, -1, c)).view(b, n, k, c)
    center = xt[:, :, None].expand(-1, -1, k, -1)
    return torch.cat([neigh - center, center], 3).permute(0, 3, 1, 2)


class DGCNN(nn.Module):
    """Wang et al. 2019: EdgeConv layers on a k-NN graph recomputed in feature space each layer,
    global max + mean pooling, an MLP head with dropout."""

    def __init__(self, classes: int = 6, k: int = 10, bug: str | None = None):
        super().__init__()
        self.k, self.bug = k, bug
        self.e1 = nn.Sequential(nn.Conv2d(6, 32, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2))
        self.e2 = nn.Sequential(nn.Conv2d(64, 32, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2))
        self.conv = nn.Sequential(nn.Conv1d(64, 128, 1, bias=False), nn.BatchNorm1d(128), nn.LeakyReLU(0.2))
        self.head = nn.Sequential(nn.Linear(256, 128, bias=False), nn.BatchNorm1d(128), nn.LeakyReLU(0.2),
                                  nn.Dropout(0.5), nn.Linear(128, classes))  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.e1(_edge_features(x, self.k)).max(-1).values
        x2 = self.e2(_edge_features(x1, self.k)).max(-1).values
        h = self.conv(torch.cat([x1, x2], 1))
        logits = self.head(torch.cat([h.max(-1).values, h.mean(-1)], 1))
        if self.bug == "softmax_before_ce":  # class probabilities, for the voting at test time
            return F.softmax(logits, dim=1)
        return logits


def dgcnn_point_cloud(path: str, steps: int = 150, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    x, y = _point_shapes(g, 900)
    model = DGCNN(bug=bug)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.2)  # DGCNN's cal_loss(smoothing=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps, eta_min=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, 800, (16,), generator=g)
        pts = x[idx] * (0.67 + 0.83 * torch.rand(16, 3, 1, generator=g))  # anisotropic scaling
        pts = pts + 0.2 * torch.rand(16, 3, 1, generator=g) - 0.1  # translation
        model.train()
        loss = criterion(model(pts), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0:
            model.eval()
            with torch.no_grad():
                acc = (model(x[800:]).argmax(1) == y[800:]).float().mean()
            print(f"step {step}: loss {loss.item():.4f} test acc {acc.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- TSM video


def _motion_clips(
    g: torch.Generator, n: int, frames: int = 8, size: int = 16
) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 clips (n, frames, 1, size, size) of a bright square moving left, right, up or down,
    or growing, over a noisy background; the class is the motion."""
    y = torch.randint(0, 5, (n,), generator=g)
    clips = torch.zeros(n, frames, size, size)
    for i, k in enumerate(y.tolist()):
        r, c = (int(v) for v in torch.randint(5, size - 5, (2,), generator=g))
        for t in range(frames):
            dr, dc, half = {0: (0, -1, 1), 1: (0, 1, 1), 2: (-1, 0, 1), 3: (1, 0, 1), 4: (0, 0, 0)}[k]
            rr, cc = r + dr * (t - frames // 2) // 2, c + dc * (t - frames // 2) // 2
            s = half + 1 if k != 4 else 1 + t // 3
            clips[i, t, max(rr - s, 0) : rr + s, max(cc - s, 0) : cc + s] = 0.8
    clips = clips + 0.15 * torch.rand(clips.shape, generator=g)
    return (clips.clamp(0, 1) * 255).to(torch.uint8).unsqueeze(2), y


class TemporalShift(nn.Module):
    """Lin et al. 2019: shift 1/8 of the channels one frame back, 1/8 one frame forward (zero
    padded), inside the residual branch."""

    def __init__(self, net: nn.Module, frames: int, fold_div: int = 8):
        super().__init__()
        self.net, self.frames, self.fold_div = net, frames, fold_div

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nt, c, h, w = x.shape
        x5 = x.view(nt // self.frames, self.frames, c, h, w)
        fold = c // self.fold_div
        out = torch.zeros_like(x5)
        out[:, :-1, :fold] = x5[:, 1:, :fold]
        out[:, 1:, fold : 2 * fold] = x5[:, :-1, fold : 2 * fold]
        out[:, :, 2 * fold :] = x5[:, :, 2 * fold :]
        return self.net(out.view(nt, c, h, w))


class TSMNet(nn.Module):
    def __init__(self, frames: int = 8, classes: int = 5, c: int = 32):
        super().__init__()
        self.frames = frames
        self.stem = nn.Sequential(nn.Conv2d(1, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        self.blocks = nn.ModuleList(
            [TemporalShift(nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                                         nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)), frames)
             for _ in range(2)]
        )  # fmt: skip
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(c, classes)

    def forward(self, clips: torch.Tensor) -> torch.Tensor:
        b, t = clips.shape[:2]
        x = self.stem(clips.flatten(0, 1))
        for i, block in enumerate(self.blocks):
            x = F.relu(x + block(x))
            if i == 0:
                x = F.max_pool2d(x, 2)
        logits = self.fc(self.drop(x.mean((2, 3))))
        return logits.view(b, t, -1).mean(1)  # the average consensus over frames


def tsm_temporal_shift_video(
    path: str, steps: int = 100, seed: int = 0, bug: str | None = None
) -> list[float]:
    g = _seed(seed)
    clips, y = _motion_clips(g, 700)
    model = TSMNet()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[70, 90], gamma=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)

    def normalize(v: torch.Tensor) -> torch.Tensor:
        if bug == "inputs_x255":  # the GroupNormalize transform without the ToTorchFormatTensor(div=True)
            return (v.float() - 0.45) / 0.225
        return (v.float() / 255 - 0.45) / 0.225

    losses = []
    for step in range(steps):
        idx = torch.randint(0, 600, (8,), generator=g)
        xb = normalize(clips[idx])
        if torch.rand(1, generator=g) < 0.5:
            xb = xb.flip(-2)  # vertical flip swaps up and down: labels follow
            yb = torch.tensor([{2: 3, 3: 2}.get(int(v), int(v)) for v in y[idx]])
        else:
            yb = y[idx]
        model.train()
        loss = criterion(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 20)  # TSM's --clip-gradient 20
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 40 == 0:
            model.eval()
            with torch.no_grad():
                acc = (model(normalize(clips[600:])).argmax(1) == y[600:]).float().mean()
            print(f"step {step}: loss {loss.item():.4f} val acc {acc.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ASL multi-label


class AsymmetricLoss(nn.Module):
    """Ridnik et al. 2021: focusing gamma_neg on negatives, gamma_pos on positives, and a
    probability margin (clip) shifting easy negatives to zero."""

    def __init__(self, gamma_neg: float = 4, gamma_pos: float = 0, clip: float = 0.05, eps: float = 1e-8):
        super().__init__()
        self.gamma_neg, self.gamma_pos, self.clip, self.eps = gamma_neg, gamma_pos, clip, eps

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        p = torch.sigmoid(logits.float())
        p_neg = (1 - p + self.clip).clamp(max=1)
        loss = y * torch.log(p.clamp(min=self.eps)) + (1 - y) * torch.log(p_neg.clamp(min=self.eps))
        pt = p * y + p_neg * (1 - y)
        gamma = self.gamma_pos * y + self.gamma_neg * (1 - y)
        with torch.no_grad():  # disable_torch_grad_focal_loss=True, as in the reference
            w = torch.pow(1 - pt, gamma)
        return -(loss * w).sum() / len(y)


def _multi_label_scenes(
    g: torch.Generator, n: int, size: int = 16, k: int = 8
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scenes holding 1..3 of k small 4x4 textures at random places, and their multi-hot labels."""
    patterns = (torch.rand(k, 4, 4, generator=g) > 0.5).float()
    imgs, labels = torch.zeros(n, 1, size, size), torch.zeros(n, k)
    for i in range(n):
        for obj in torch.randperm(k, generator=g)[: int(torch.randint(1, 4, (1,), generator=g))].tolist():
            r, c = (int(v) for v in torch.randint(0, size - 4, (2,), generator=g))
            imgs[i, 0, r : r + 4, c : c + 4] = torch.maximum(imgs[i, 0, r : r + 4, c : c + 4], patterns[obj])
            labels[i, obj] = 1
    return imgs + 0.1 * torch.randn(imgs.shape, generator=g), labels


def asl_multilabel_bf16_ema(path: str, steps: int = 150, seed: int = 0) -> list[float]:
    g = _seed(seed)
    x, y = _multi_label_scenes(g, 1200)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(64, 8),
    )  # fmt: skip
    ema = torch.optim.swa_utils.AveragedModel(
        model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.99)
    )
    criterion = AsymmetricLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=steps, pct_start=0.2)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, 1000, (32,), generator=g)
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x[idx])
        loss = criterion(logits, y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        ema.update_parameters(model)
        losses.append(loss.item())
        if step % 50 == 0 or step == steps - 1:
            ema.eval()
            with torch.no_grad():
                s = ema(x[1000:])
            ap = []
            for j in range(8):  # mean average precision over classes
                order = s[:, j].argsort(descending=True)
                hits = y[1000:, j][order]
                prec = hits.cumsum(0) / torch.arange(1, len(hits) + 1)
                ap.append((prec * hits).sum() / hits.sum().clamp_min(1))
            print(f"step {step}: ASL {loss.item():.4f} EMA mAP {torch.stack(ap).mean().item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- onsets and frames


def _piano(g: torch.Generator, n: int, pitches: int = 12, sr: int = 4000, seconds: float = 1.0
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """Clips of decaying harmonic notes (pitches 220 Hz upwards in whole tones) with silence around
    them, and their frame (note sounding) and onset rolls at hop 64."""
    length, hop = int(sr * seconds), 64
    frames = length // hop + 1
    t = torch.arange(length) / sr
    wav = torch.zeros(n, length)
    frame_roll, onset_roll = torch.zeros(n, frames, pitches), torch.zeros(n, frames, pitches)
    for i in range(n):
        for _ in range(int(torch.randint(1, 5, (1,), generator=g))):
            p = int(torch.randint(0, pitches, (1,), generator=g))
            on = float(torch.rand(1, generator=g)) * 0.6 + 0.05
            dur = 0.1 + float(torch.rand(1, generator=g)) * 0.25
            f = 220 * 2 ** (2 * p / 12)  # a whole-tone scale, resolvable at n_fft 512
            active = (t >= on) & (t < on + dur)
            env = torch.exp(-(t - on) * 6) * active
            wav[i] += env * (torch.sin(2 * math.pi * f * t) + 0.5 * torch.sin(4 * math.pi * f * t))
            a, b = int(on * sr) // hop, int((on + dur) * sr) // hop
            frame_roll[i, a : b + 1, p] = 1
            onset_roll[i, a : a + 2, p] = 1
    return wav, frame_roll, onset_roll


class OnsetsAndFrames(nn.Module):
    """Hawthorne et al. 2018, shrunk: an onset stack (conv + BiLSTM) and a frame stack (conv)
    whose output layer also sees the onset predictions, with the gradient stopped between them."""

    def __init__(self, pitches: int = 12, n_fft: int = 512, bug: str | None = None):
        super().__init__()
        self.n_fft, self.bug = n_fft, bug
        bins = n_fft // 2 + 1

        def acoustic() -> nn.Sequential:
            return nn.Sequential(nn.Conv1d(bins, 64, 3, padding=1), nn.BatchNorm1d(64), nn.ReLU(),
                                 nn.Conv1d(64, 64, 3, padding=1), nn.BatchNorm1d(64), nn.ReLU())  # fmt: skip

        self.onset_conv, self.frame_conv = acoustic(), acoustic()
        self.onset_rnn = nn.LSTM(64, 32, batch_first=True, bidirectional=True)
        self.onset_fc = nn.Linear(64, pitches)
        self.frame_fc = nn.Linear(64 + pitches, pitches)

    def forward(self, wav: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        spec = torch.stft(
            wav, self.n_fft, hop_length=64, window=torch.hann_window(self.n_fft), return_complex=True
        ).abs()
        # the bug: no floor under the magnitude of clips that begin and end in digital silence
        eps = 0.0 if self.bug == "log_zero_nan" else 1e-6
        logspec = torch.log(spec + eps)
        onset_h, _ = self.onset_rnn(self.onset_conv(logspec).transpose(1, 2))
        onset = self.onset_fc(onset_h)
        frame_h = self.frame_conv(logspec).transpose(1, 2)
        return onset, self.frame_fc(torch.cat([frame_h, torch.sigmoid(onset).detach()], 2))


def onsets_frames_transcription(
    path: str, steps: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    g = _seed(seed)
    wav, frame_roll, onset_roll = _piano(g, 300)
    model = OnsetsAndFrames(bug=bug)
    criterion = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100, gamma=0.98)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, 260, (8,), generator=g)
        model.train()
        onset, frame = model(wav[idx])
        loss = criterion(onset, onset_roll[idx]) + criterion(frame, frame_roll[idx])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 3.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0:
            model.eval()
            with torch.no_grad():
                _, fr = model(wav[260:])
                pred = fr > 0
                tp = (pred & (frame_roll[260:] > 0)).sum()
                f1 = 2 * tp / (pred.sum() + (frame_roll[260:] > 0).sum()).clamp_min(1)
            print(f"step {step}: loss {loss.item():.4f} frame F1 {f1.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- VoxelMorph (2-D)


def _smooth_field(g: torch.Generator, n: int, size: int, amp: float) -> torch.Tensor:
    coarse = torch.randn(n, 2, 4, 4, generator=g) * amp
    return F.interpolate(coarse, size=(size, size), mode="bicubic", align_corners=True)


def _warp(img: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
    """VoxelMorph's SpatialTransformer: sample img at identity + flow (flow in pixels)."""
    n, _, h, w = img.shape
    yy, xx = torch.meshgrid(torch.arange(h).float(), torch.arange(w).float(), indexing="ij")
    y = (yy + flow[:, 0]) / (h - 1) * 2 - 1
    x = (xx + flow[:, 1]) / (w - 1) * 2 - 1
    return F.grid_sample(img, torch.stack([x, y], 3), align_corners=True)


class RegUNet(nn.Module):
    def __init__(self, c: int = 16):
        super().__init__()

        def conv(i: int, o: int, stride: int = 1) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(i, o, 3, stride, 1), nn.LeakyReLU(0.2))

        self.e1, self.e2, self.e3 = conv(2, c, 2), conv(c, c, 2), conv(c, c, 2)
        self.d3, self.d2, self.d1 = conv(c, c), conv(2 * c, c), conv(2 * c, c)
        self.d0 = conv(c + 2, c)
        self.flow = nn.Conv2d(c, 2, 3, padding=1)
        nn.init.normal_(self.flow.weight, std=1e-5)  # VoxelMorph: a near-zero initial flow
        nn.init.zeros_(self.flow.bias)

    def forward(self, moving: torch.Tensor, fixed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x0 = torch.cat([moving, fixed], 1)
        x1 = self.e1(x0)
        x2 = self.e2(x1)
        x3 = self.e3(x2)
        u = F.interpolate(self.d3(x3), scale_factor=2)
        u = F.interpolate(self.d2(torch.cat([u, x2], 1)), scale_factor=2)
        u = F.interpolate(self.d1(torch.cat([u, x1], 1)), scale_factor=2)
        flow = self.flow(self.d0(torch.cat([u, x0], 1)))
        return _warp(moving, flow), flow


def voxelmorph_registration(
    path: str, steps: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    g = _seed(seed)
    size = 32
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
    n = 400
    ax = 0.5 + 0.2 * torch.rand(n, 1, 1, generator=g)
    ay = 0.5 + 0.2 * torch.rand(n, 1, 1, generator=g)
    outer = ((xx / ax) ** 2 + (yy / ay) ** 2 < 1).float()
    inner = (((xx - 0.15) / (ax / 2.5)) ** 2 + (yy / (ay / 2)) ** 2 < 1).float()
    atlas_like = (0.6 * outer + 0.4 * inner)[:, None]  # "brain" outlines with a ventricle
    fixed = F.avg_pool2d(atlas_like, 3, 1, 1)
    moving = _warp(fixed, _smooth_field(g, n, size, 1.5))
    model = RegUNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    lam = 0.01

    def grad_l2(flow: torch.Tensor) -> torch.Tensor:
        dy = flow[:, :, 1:, :] - flow[:, :, :-1, :]
        dx = flow[:, :, :, 1:] - flow[:, :, :, :-1]
        return ((dx**2).mean() + (dy**2).mean()) / 2

    losses = []
    for step in range(steps):
        idx = torch.randint(0, 350, (8,), generator=g)
        warped, flow = model(moving[idx], fixed[idx])
        loss = F.mse_loss(warped, fixed[idx]) + lam * grad_l2(flow)
        if bug != "no_zero_grad":
            opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            with torch.no_grad():
                w, _ = model(moving[350:], fixed[350:])
                before = F.mse_loss(moving[350:], fixed[350:])
                after = F.mse_loss(w, fixed[350:])
            print(f"step {step}: loss {loss.item():.5f} val MSE {before.item():.5f} -> {after.item():.5f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- GRU4Rec


class GRU4Rec(nn.Module):
    def __init__(self, n_items: int, hidden: int = 64):
        super().__init__()
        self.embed = nn.Embedding(n_items, hidden)
        self.gru = nn.GRUCell(hidden, hidden)
        self.drop = nn.Dropout(0.25)
        self.out = nn.Embedding(n_items, hidden)
        self.out_bias = nn.Embedding(n_items, 1)

    def forward(
        self, items: torch.Tensor, h: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.gru(self.embed(items), h)
        # scores of the in-batch targets only: the other sessions' next items are the negatives
        return self.drop(h) @ self.out(targets).T + self.out_bias(targets).T, h


def top1_loss(scores: torch.Tensor) -> torch.Tensor:
    """Hidasi et al. 2016's TOP1: sigmoid(r_j - r_i) + sigmoid(r_j^2), averaged over negatives."""
    pos = scores.diag()[:, None]
    return (torch.sigmoid(scores - pos) + torch.sigmoid(scores**2)).mean()


def gru4rec_session_parallel(path: str, steps: int = 400, seed: int = 0) -> list[float]:
    g = _seed(seed)
    n_items = 300
    successors = torch.randint(0, n_items, (n_items, 3), generator=g)

    def session() -> list[int]:
        s = [int(torch.randint(0, n_items, (1,), generator=g))]
        for _ in range(int(torch.randint(3, 15, (1,), generator=g))):
            nxt = successors[s[-1], int(torch.randint(0, 3, (1,), generator=g))]
            s.append(
                int(nxt)
                if torch.rand(1, generator=g) < 0.8
                else int(torch.randint(0, n_items, (1,), generator=g))
            )
        return s

    model = GRU4Rec(n_items)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    hook = Hook(path)
    hook.register_module(model)
    batch = 32
    sessions = [session() for _ in range(batch)]
    pos = [0] * batch
    h = torch.zeros(batch, 64)
    losses = []
    for step in range(steps):
        for i in range(batch):  # session-parallel mini-batches: a finished session is replaced
            if pos[i] + 1 >= len(sessions[i]):
                sessions[i], pos[i] = session(), 0
                h[i] = 0  # its hidden state reset
        items = torch.tensor([s[p] for s, p in zip(sessions, pos, strict=True)])
        targets = torch.tensor([s[p + 1] for s, p in zip(sessions, pos, strict=True)])
        pos = [p + 1 for p in pos]
        model.train()
        scores, h = model(items, h.detach(), targets)
        loss = top1_loss(scores)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0:
            model.eval()
            with torch.no_grad():
                test = [session() for _ in range(100)]
                hits = 0
                for s in test:
                    ht = torch.zeros(1, 64)
                    for a, b in zip(s[:-1], s[1:], strict=True):
                        ht = model.gru(model.embed(torch.tensor([a])), ht)
                        sc = ht @ model.out.weight.T + model.out_bias.weight.T
                        hits += int(b in sc.topk(20).indices[0].tolist())
                recall = hits / sum(len(s) - 1 for s in test)
            print(f"step {step}: TOP1 {loss.item():.4f} Recall@20 {recall:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Deep CORAL


def coral_loss(source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Sun & Saenko 2016: the squared Frobenius distance of the feature covariances / 4d^2."""
    d = source.shape[1]

    def cov(x: torch.Tensor) -> torch.Tensor:
        x = x - x.mean(0, keepdim=True)
        return x.T @ x / (len(x) - 1)

    return ((cov(source) - cov(target)) ** 2).sum() / (4 * d * d)


class CoralNet(nn.Module):
    def __init__(self, classes: int = 6):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        )  # fmt: skip
        self.fc = nn.Sequential(nn.Linear(64 * 9, 128), nn.ReLU(), nn.Dropout(0.5))
        self.classifier = nn.Linear(128, classes)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.fc(self.features(x))
        return self.classifier(h), h


def deep_coral_adaptation(path: str, steps: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    g = _seed(seed)
    xs, ys = _glyphs(g, 1500)
    xt, yt = _glyphs(g, 1500)
    src = xs.float() / 255
    # the target domain: another sensor, blurred, with less contrast, a raised black level and noise
    tgt = F.avg_pool2d(xt.float() / 255, 3, 1, 1) * 0.6 + 0.25 + 0.1 * torch.randn(xt.shape, generator=g)
    model = CoralNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    if bug == "frozen_by_mistake":  # left from the source-only linear-probe baseline above it
        for p in model.features.parameters():
            p.requires_grad = False
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        lam = 2 / (1 + math.exp(-10 * step / steps)) - 1  # the CORAL weight ramped up
        i_s = torch.randint(0, 1500, (32,), generator=g)
        i_t = torch.randint(0, 1200, (32,), generator=g)
        model.train()
        logits_s, h_s = model(src[i_s])
        _, h_t = model(tgt[i_t])
        cls = F.cross_entropy(logits_s, ys[i_s])
        loss = cls + 10 * lam * coral_loss(h_s, h_t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0 or step == steps - 1:
            model.eval()
            with torch.no_grad():
                acc = (model(tgt[1200:])[0].argmax(1) == yt[1200:]).float().mean()
            print(f"step {step}: CE {cls.item():.4f} total {loss.item():.4f} target acc {acc.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- tensor fusion network


class TensorFusion(nn.Module):
    """Zadeh et al. 2017: modality sub-networks (an LSTM over words, MLPs over the averaged
    acoustic and visual features), the 3-fold outer product of [h; 1] vectors, an MLP."""

    def __init__(self, d_word: int = 16, d_audio: int = 12, d_video: int = 20, h_t: int = 32, h_a: int = 8,
                 h_v: int = 8):  # fmt: skip
        super().__init__()
        self.text = nn.LSTM(d_word, h_t, batch_first=True)
        self.audio = nn.Sequential(nn.BatchNorm1d(d_audio), nn.Linear(d_audio, h_a), nn.ReLU(), nn.Dropout(0.2),
                                   nn.Linear(h_a, h_a), nn.ReLU())  # fmt: skip
        self.video = nn.Sequential(nn.BatchNorm1d(d_video), nn.Linear(d_video, h_v), nn.ReLU(), nn.Dropout(0.2),
                                   nn.Linear(h_v, h_v), nn.ReLU())  # fmt: skip
        fused = (h_t + 1) * (h_a + 1) * (h_v + 1)
        self.post = nn.Sequential(nn.Dropout(0.2), nn.Linear(fused, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                                  nn.Linear(64, 1))  # fmt: skip

    def forward(self, words: torch.Tensor, audio: torch.Tensor, video: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.text(words)
        one = words.new_ones(len(words), 1)
        zt, za, zv = (
            torch.cat([h[0], one], 1),
            torch.cat([self.audio(audio), one], 1),
            torch.cat([self.video(video), one], 1),
        )
        fusion = torch.einsum("bi,bj,bk->bijk", zt, za, zv).flatten(1)
        return self.post(fusion).squeeze(1) * 3  # sentiment in [-3, 3] scale, as the MOSI head


def tensor_fusion_sentiment(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    g = _seed(seed)
    n = 2000
    w_text, w_audio, w_video = (
        torch.randn(16, generator=g),
        torch.randn(12, generator=g),
        torch.randn(20, generator=g),
    )
    words = torch.randn(n, 10, 16, generator=g)
    audio = torch.randn(n, 12, generator=g) * 3 + 1
    video = torch.randn(n, 20, generator=g) * 0.5
    polarity = torch.tanh(words.mean(1) @ w_text)
    arousal = torch.sigmoid(audio @ w_audio / 6)
    smile = torch.tanh(video @ w_video)
    label = (2.5 * polarity * (0.5 + arousal) + 0.5 * smile + 0.2 * torch.randn(n, generator=g)).clamp(-3, 3)
    model = TensorFusion()
    criterion = nn.L1Loss()
    opt = torch.optim.Adam(model.parameters(), lr=5e-4, weight_decay=1e-5)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, 1700, (32,), generator=g)
        model.train()
        loss = criterion(model(words[idx], audio[idx], video[idx]), label[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 75 == 0:
            model.eval()
            with torch.no_grad():
                pred = model(words[1700:], audio[1700:], video[1700:])
                mae = (pred - label[1700:]).abs().mean()
                acc2 = ((pred > 0) == (label[1700:] > 0)).float().mean()
            print(
                f"step {step}: L1 {loss.item():.4f} valid MAE {mae.item():.3f} binary acc {acc2.item():.3f}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- the pipelines

_autorec = healthy("autorec_item_based_rprop", "autoencoder recommender (I-AutoRec)", autorec_item_ratings)
_lstnet = healthy("lstnet_skip_gru_ar_highway", "multivariate forecasting (LSTNet)", lstnet_electricity)
_cheb = healthy(
    "chebnet_chebyshev_k3_sbm", "spectral graph convolution (ChebNet)", chebnet_node_classification
)
_sincnet = healthy("sincnet_raw_waveform_speaker_id", "speaker identification (SincNet)", sincnet_speaker_id)
_csrnet = healthy("csrnet_dilated_density_counting", "crowd counting (CSRNet)", csrnet_crowd_density)
_dgcnn = healthy("dgcnn_edgeconv_label_smoothing", "point cloud classification (DGCNN)", dgcnn_point_cloud)
_tsm = healthy("tsm_temporal_shift_clips", "video action recognition (TSM)", tsm_temporal_shift_video)
_onsets = healthy(
    "onsets_and_frames_piano_transcription",
    "music transcription (onsets and frames)",
    onsets_frames_transcription,
)
_voxelmorph = healthy(
    "voxelmorph_unsupervised_registration", "image registration (VoxelMorph)", voxelmorph_registration
)
_coral = healthy("deep_coral_domain_adaptation", "domain adaptation (Deep CORAL)", deep_coral_adaptation)

PIPELINES = [
    healthy("dcca_eigh_total_correlation", "deep canonical correlation analysis", dcca_two_views),
    _autorec,
    _lstnet,
    _cheb,
    healthy(
        "dueling_double_dqn_prioritized_replay",
        "value-based RL (dueling double DQN, prioritized replay)",
        dueling_ddqn_per_gridworld,
    ),
    healthy(
        "multi_similarity_pk_sampling", "metric learning (multi-similarity loss)", multi_similarity_retrieval
    ),
    healthy("infogan_mutual_info_codes", "GAN with latent codes (InfoGAN)", infogan_categorical_codes),
    _sincnet,
    healthy(
        "pointer_generator_coverage_adagrad",
        "abstractive summarization (pointer-generator)",
        pointer_generator_coverage,
    ),
    healthy("relation_network_5way_1shot", "few-shot learning (relation network)", relation_network_few_shot),
    _csrnet,
    healthy("deep_image_prior_denoising", "deep image prior", deep_image_prior_denoise),
    healthy("sindy_lorenz_sequential_threshold", "sparse equation discovery (SINDy)", sindy_lorenz_sparse),
    healthy(
        "active_learning_entropy_queries", "active learning (uncertainty sampling)", active_learning_entropy
    ),
    healthy(
        "experience_replay_reservoir_incremental",
        "continual learning (experience replay)",
        experience_replay_class_incremental,
    ),
    healthy(
        "complex_n3_reciprocal_1vsall", "knowledge-graph completion (ComplEx-N3)", complex_n3_link_prediction
    ),
    _dgcnn,
    _tsm,
    healthy(
        "asl_multilabel_bf16_ema", "multi-label classification (asymmetric loss)", asl_multilabel_bf16_ema
    ),
    _onsets,
    _voxelmorph,
    healthy(
        "gru4rec_session_parallel_top1", "session-based recommendation (GRU4Rec)", gru4rec_session_parallel
    ),
    _coral,
    healthy(
        "tensor_fusion_multimodal_sentiment",
        "multimodal fusion (tensor fusion network)",
        tensor_fusion_sentiment,
    ),
    buggy(_lstnet, "lr_x100"),
    buggy(_voxelmorph, "no_zero_grad"),
    buggy(_sincnet, "shuffled_labels"),
    buggy(_tsm, "inputs_x255"),
    buggy(_dgcnn, "softmax_before_ce"),
    buggy(_csrnet, "dead_relu_init"),
    buggy(_autorec, "deep_sigmoid"),
    buggy(_coral, "frozen_by_mistake"),
    buggy(_onsets, "log_zero_nan"),
    buggy(_cheb, "train_in_eval_mode"),
]
