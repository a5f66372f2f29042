"""The twenty-first blind held-out set (issue 26), part AB: half the trainings through frameworks
other than plain PyTorch, each recorded the way the README says for that framework, half plain
PyTorch from scientific and industrial fields the corpus did not have yet, written in the shapes
of those communities' public repositories and tutorials, shrunk to small models on data generated
in-process, fixed seeds, one CPU thread.

Plain PyTorch (the README's two lines, `register_loss` where the script has a loss module): a CNN
surrogate of 2-D Darcy flow (piecewise-constant permeability to pressure, solved in-process by
Jacobi iterations; the grid coordinates as input channels, a Gaussian normalizer on the output,
the neural-operator repositories' relative L2 loss, Adam with `StepLR`); a learned time-stepper
for the 1-D wave equation (circular-padded 1-D CNN predicting the increment from two past states,
a 4-step autoregressive rollout loss backpropagated through the unroll, training noise, AdamW with
warm-up and cosine through `LambdaLR`, gradient clipping); a crystal graph convolutional network
(CGCNN's gated convolutions with BatchNorm on hand-built periodic cells with Gaussian-expanded
distances, a `Normalizer`, SGD momentum with `MultiStepLR`, a custom collate of graphs); PhaseNet
seismic P/S phase picking (a 1-D U-Net on per-trace normalized three-component records, the
cross-entropy against soft Gaussian pick labels, `ExponentialLR`); accelerated MRI reconstruction
with an unrolled network (MoDL-style shared residual denoiser and hard k-space data consistency
through `torch.fft`, the magnitude L1 loss, RMSprop with `CosineAnnealingLR`, a validation PSNR
each epoch); hyperspectral pixel classification (reflectance to absorbance `-log10(R)`, a 1-D
spectral CNN with tanh, SGD momentum with `CosineAnnealingWarmRestarts` stepped per batch, label
smoothing); a variational autoregressive network for the 2-D Ising model (a MADE sampling spin
configurations, the variational free energy minimized by the score-function gradient with a
baseline; the losses are the free energy per site); NeuMF neural collaborative filtering on
implicit feedback (GMF and MLP branches, 4 sampled negatives per positive each epoch,
`BCEWithLogitsLoss`, a leave-one-out hit rate).

Through tools: Keras 3 (`mldbg.keras.Hook`): a functional-API electricity load forecaster with
three inputs, calendar `Embedding`s and a shared `Sequential` trunk, `Huber` on `Adamax` with
`InverseTimeDecay`; TensorFlow (`mldbg.tensorflow.Hook`, `hook.wrap_tape` under `@tf.function`):
radar range-Doppler target classification, a Keras CNN called with `training=True`,
`tf.nn.sparse_softmax_cross_entropy_with_logits`, SGD momentum on `PiecewiseConstantDecay`, a
repeating `tf.data` pipeline; JAX (`mldbg.jax.Hook`): a universal differential equation for
Lotka-Volterra in plain JAX (a tanh MLP for the interaction terms inside RK4 in `lax.scan`,
gradients accumulated over two micro-batches with `jax.tree.map`, `optax.adam` on a cosine
decay), a Flax Linen U-Net masking clouds in uint8 4-band satellite tiles (binary cross-entropy
plus soft Dice, `optax.lamb` with warm-up and cosine, `hook.record` inside the jitted step), a
Flax NNX MLP nowcasting solar irradiance (`optax.yogi`, `optax.huber_loss`, `nnx.Dropout`,
`model.train()` / `model.eval()`); XGBoost (`mldbg.xgboost.Hook`): transformer fault diagnosis
from dissolved-gas analysis (gas ratios and Duval shares, `multi:softmax`, row and per-node
column subsampling); Lightning (`mldbg.lightning.DebuggerCallback`): DistMult knowledge-graph
completion with 1-vs-all scoring, label smoothing, an N3 regularizer and Adagrad, a filtered MRR
in `validation_step`; Hugging Face `Trainer` (`mldbg.transformers.DebuggerCallback`): protein
property regression (hydropathy and charge) with a tiny random `EsmForSequenceClassification`
(`problem_type="regression"`, rotary positions), the `polynomial` schedule with warm-up.

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the Darcy surrogate's `learning_rate: 0.1` for 0.001 (lr_x100); the JAX UDE's gradient
accumulator made once before the loop and never reset to zeros (no_zero_grad); CGCNN's targets
read from a re-sorted id_prop table, not the cells' own (shuffled_labels); the Flax cloud
tiles' digital numbers cast to float without `/ 255.0` (inputs_x255); the TensorFlow radar CNN's
`Dense(4, activation="softmax")` head fed to `sparse_softmax_cross_entropy_with_logits`
(softmax_before_ce); PhaseNet's init helper filling every bias, BatchNorm's too, with -1
(dead_relu_init); the NNX irradiance MLP's hidden stack as eight `nnx.sigmoid` layers
(deep_sigmoid); the Keras forecaster's `trunk.trainable = False` (a transfer-learning cell's
freeze) run after `compile` (frozen_by_mistake); the hyperspectral absorbance taken without the
clip, so the dead absorption bands read `log10(0)` (log_zero_nan); the MRI loop's validation
`model.eval()` never followed by `model.train()` (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND20`.
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

from . import BLIND20, buggy, healthy, installed

SPLIT = BLIND20

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 203)


# ============================================================================= PDE surrogates


def _darcy_fields(g: torch.Generator, n: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Piecewise-constant permeability (12 where a smoothed Gaussian field is positive, else 3, as
    in the FNO Darcy data) and the pressure solving -div(k grad u) = 1, u = 0 on the boundary, by
    Jacobi iterations on the five-point stencil with face-averaged permeabilities."""
    noise = torch.randn(n, 1, size, size, generator=g)
    kernel = torch.exp(-(torch.arange(-3, 4.0) ** 2) / 4.0)
    kernel = (kernel[:, None] * kernel[None]) / kernel.sum() ** 2
    smooth = F.conv2d(F.pad(noise, (3, 3, 3, 3), mode="circular"), kernel[None, None])
    k = torch.where(smooth > 0, 12.0, 3.0)
    kp = F.pad(k, (1, 1, 1, 1), mode="replicate")
    ke = 0.5 * (kp[..., 1:-1, 2:] + k)
    kw = 0.5 * (kp[..., 1:-1, :-2] + k)
    kn = 0.5 * (kp[..., :-2, 1:-1] + k)
    ks = 0.5 * (kp[..., 2:, 1:-1] + k)
    h2 = (1.0 / (size + 1)) ** 2
    u = torch.zeros_like(k)
    for _ in range(900):
        up = F.pad(u, (1, 1, 1, 1))
        u = (
            h2
            + ke * up[..., 1:-1, 2:]
            + kw * up[..., 1:-1, :-2]
            + kn * up[..., :-2, 1:-1]
            + ks * up[..., 2:, 1:-1]
        ) / (ke + kw + kn + ks)
    return k, u


class _DarcyNet(nn.Module):
    """A small encoder-decoder CNN on the permeability and the grid coordinates."""

    def __init__(self, width: int = 24) -> None:
        super().__init__()
        self.enc1 = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.GELU(), nn.Conv2d(width, width, 3, padding=1), nn.GELU()
        )
        self.enc2 = nn.Sequential(
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1),
            nn.GELU(),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1),
            nn.GELU(),
        )
        self.up = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv2d(2 * width, width, 3, padding=1), nn.GELU(), nn.Conv2d(width, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h1 = self.enc1(x)
        h2 = self.enc2(h1)
        return self.dec(torch.cat([self.up(h2), h1], 1))


def darcy_flow_cnn_surrogate(
    path: str, epochs: int = 16, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A CNN surrogate of 2-D Darcy flow (permeability -> pressure on a 16 x 16 grid), as the
    neural-operator repositories train theirs: the input the normalized permeability with the
    grid's x and y coordinates as channels, a `UnitGaussianNormalizer` on the pressure, the
    relative L2 loss (`LpLoss`), Adam 1e-3 with weight decay 1e-4, `StepLR(step_size=5,
    gamma=0.5)` per epoch, batch 20, a test relative error each epoch."""
    g = _seed(seed)
    size = 16
    k, u = _darcy_fields(g, 440, size)
    grid = torch.stack(torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij"))
    a = (k - k[:400].mean()) / k[:400].std()
    x = torch.cat([a, grid.expand(len(a), 2, size, size)], 1)
    u_mean, u_std = u[:400].mean(0), u[:400].std(0) + 1e-6
    y = (u - u_mean) / u_std
    model = _DarcyNet()
    lr = 1e-1 if bug == "lr_x100" else 1e-3  # bug: `learning_rate: 0.1` in the config for 0.001
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)

    def lp_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        diff = (pred - target).flatten(1).norm(dim=1)
        return (diff / target.flatten(1).norm(dim=1)).mean()

    hook = Hook(path)
    hook.register_module(model)
    loader = DataLoader(TensorDataset(x[:400], y[:400]), batch_size=20, shuffle=True, generator=g)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            out = model(xb) * u_std + u_mean  # decoded, the loss on the physical pressure
            loss = lp_loss(out, yb * u_std + u_mean)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            test = lp_loss(model(x[400:]) * u_std + u_mean, u[400:]).item()
        print(f"epoch {epoch}: test rel L2 {test:.4f}")
    hook.close()
    return losses


def _wave_trajectories(g: torch.Generator, n: int, nx: int, steps: int) -> torch.Tensor:
    """1-D wave equation u_tt = c^2 u_xx on a periodic grid, leapfrog (CFL 0.5), from Gaussian
    bumps at rest; every 4th time step kept."""
    x = torch.linspace(0, 1, nx + 1)[:-1]
    centers = torch.rand(n, 3, 1, generator=g)
    amps = torch.randn(n, 3, 1, generator=g) * 0.5
    width = 0.03 + 0.05 * torch.rand(n, 3, 1, generator=g)
    d = torch.remainder(x - centers + 0.5, 1.0) - 0.5
    u0 = (amps * torch.exp(-(d**2) / (2 * width**2))).sum(1)
    r2 = 0.25
    prev, cur = u0, u0 + 0.5 * r2 * (torch.roll(u0, 1, -1) - 2 * u0 + torch.roll(u0, -1, -1))
    out = [u0]
    for t in range(1, 4 * steps):
        nxt = 2 * cur - prev + r2 * (torch.roll(cur, 1, -1) - 2 * cur + torch.roll(cur, -1, -1))
        prev, cur = cur, nxt
        if t % 4 == 0:
            out.append(prev)
    return torch.stack(out, 1)  # (n, steps, nx)


def wave_equation_rollout_stepper(path: str, steps: int = 320, seed: int = 0) -> list[float]:
    """A learned time-stepper for the 1-D wave equation (learned-simulator style): a circular-padded
    1-D CNN maps the two last states (u_t, u_{t-1}) to the increment u_{t+1} - u_t; trained on a
    4-step autoregressive rollout (the loss summed over the unrolled steps, backpropagated through
    all of them), Gaussian training noise on the starting states, AdamW 2e-3 with a linear warm-up
    into a cosine decay through `LambdaLR`, gradient clipping at norm 1, batch 32."""
    g = _seed(seed)
    traj = _wave_trajectories(g, 300, 64, 24)
    scale = traj.std()
    traj = traj / scale
    train, test = traj[:260], traj[260:]
    model = nn.Sequential(
        nn.Conv1d(2, 32, 5, padding=2, padding_mode="circular"), nn.SiLU(),
        nn.Conv1d(32, 32, 5, padding=2, padding_mode="circular"), nn.SiLU(),
        nn.Conv1d(32, 1, 5, padding=2, padding_mode="circular"),
    )  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    warm = 20
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / (steps - warm))),
    )
    hook = Hook(path)
    hook.register_module(model)
    unroll = 4
    losses: list[float] = []
    for _ in range(steps):
        model.train()
        b = torch.randint(0, len(train), (32,), generator=g)
        t0 = torch.randint(1, train.shape[1] - unroll, (32,), generator=g)
        cur, prev = train[b, t0], train[b, t0 - 1]
        noise = 0.01 * torch.randn(cur.shape, generator=g)
        cur, prev = cur + noise, prev + noise
        loss = torch.zeros(())
        for k in range(unroll):
            nxt = cur + model(torch.stack([cur, prev], 1)).squeeze(1)
            loss = loss + F.mse_loss(nxt, train[b, t0 + k + 1])
            prev, cur = cur, nxt
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        cur, prev = test[:, 1], test[:, 0]
        for _t in range(2, 12):
            prev, cur = cur, cur + model(torch.stack([cur, prev], 1)).squeeze(1)
        print("10-step rollout mse", F.mse_loss(cur, test[:, 11]).item())
    hook.close()
    return losses


# ============================================================================= materials and molecules


def _crystals(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    """Random cubic cells of 4-10 atoms of 5 species; the energy per atom from species references
    plus a Morse-like pair term under the minimum-image convention; edges to the neighbours within
    4 A, distances expanded on 40 Gaussians (CGCNN's featurizer)."""
    ref = np.array([-1.0, -2.5, -0.5, -3.2, -1.8])
    depth = rng.uniform(0.2, 1.2, (5, 5))
    depth = (depth + depth.T) / 2
    r0 = rng.uniform(2.0, 3.0, (5, 5))
    r0 = (r0 + r0.T) / 2
    centers = np.linspace(0, 4, 40)
    out = []
    for _ in range(n):
        m = int(rng.integers(4, 11))
        cell = 2.6 * m ** (1 / 3)
        z = rng.integers(0, 5, m)
        pos = rng.uniform(0, cell, (m, 3))
        d = pos[:, None] - pos[None]
        d -= cell * np.round(d / cell)
        r = np.linalg.norm(d, axis=-1)
        np.fill_diagonal(r, np.inf)
        a = 1.2
        pair = depth[z[:, None], z[None]] * ((1 - np.exp(-a * (r - r0[z[:, None], z[None]]))) ** 2 - 1)
        pair[~np.isfinite(r)] = 0.0
        energy = (ref[z].sum() + 0.5 * np.clip(pair, -5, 5)[r < 4.0].sum()) / m
        src, dst = np.nonzero(r < 4.0)
        feat = np.exp(-((r[src, dst][:, None] - centers) ** 2) / 0.2**2)
        out.append({"z": z, "src": src, "dst": dst, "edge": feat.astype("float32"), "y": energy})
    return out


def _collate_crystals(batch: list[dict[str, Any]]) -> tuple[torch.Tensor, ...]:
    zs, srcs, dsts, edges, graph, ys = [], [], [], [], [], []
    offset = 0
    for i, c in enumerate(batch):
        zs.append(torch.as_tensor(c["z"]))
        srcs.append(torch.as_tensor(c["src"]) + offset)
        dsts.append(torch.as_tensor(c["dst"]) + offset)
        edges.append(torch.as_tensor(c["edge"]))
        graph.append(torch.full((len(c["z"]),), i))
        ys.append(float(c["y"]))
        offset += len(c["z"])
    return (
        torch.cat(zs), torch.cat(srcs), torch.cat(dsts), torch.cat(edges), torch.cat(graph),
        torch.tensor(ys, dtype=torch.float32)[:, None],
    )  # fmt: skip


class _CGConv(nn.Module):
    """CGCNN's convolution: v_i += sum_j sigmoid(z_ij W_f) * softplus(z_ij W_s), z_ij = v_i | v_j | e_ij."""

    def __init__(self, atom: int, edge: int) -> None:
        super().__init__()
        self.fc_full = nn.Linear(2 * atom + edge, 2 * atom)
        self.bn1 = nn.BatchNorm1d(2 * atom)
        self.bn2 = nn.BatchNorm1d(atom)

    def forward(self, v: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        z = self.bn1(self.fc_full(torch.cat([v[src], v[dst], e], 1)))
        gate, core = z.chunk(2, 1)
        msg = torch.sigmoid(gate) * F.softplus(core)
        agg = torch.zeros_like(v).index_add_(0, src, msg)
        return F.softplus(v + self.bn2(agg))


class _CGCNN(nn.Module):
    def __init__(self, atom: int = 32, edge: int = 40) -> None:
        super().__init__()
        self.embedding = nn.Embedding(5, atom)
        self.convs = nn.ModuleList([_CGConv(atom, edge) for _ in range(3)])
        self.conv_to_fc = nn.Linear(atom, 64)
        self.fc_out = nn.Linear(64, 1)

    def forward(
        self, z: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, e: torch.Tensor, graph: torch.Tensor
    ) -> torch.Tensor:
        v = self.embedding(z)
        for conv in self.convs:
            v = conv(v, src, dst, e)
        n = int(graph.max()) + 1
        pooled = (
            torch.zeros(n, v.shape[1]).index_add_(0, graph, v) / torch.bincount(graph, minlength=n)[:, None]
        )
        return self.fc_out(F.softplus(self.conv_to_fc(F.softplus(pooled))))


def cgcnn_crystal_formation_energy(
    path: str, epochs: int = 14, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A crystal graph convolutional network (CGCNN, Xie & Grossman 2018, shaped as its
    `main.py`) regressing the energy per atom of hand-built periodic cells: atom embeddings, three
    gated `CGConv`s with BatchNorm, mean pooling per crystal, softplus MLP head; the target
    standardized by a `Normalizer`, `MSELoss`, SGD lr 0.01 momentum 0.9, `MultiStepLR([10])`,
    batch 32 graphs through a custom `collate_pool`; validation MAE each epoch."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 41)
    data = _crystals(rng, 700)
    if bug == "shuffled_labels":  # bug: targets read from a re-sorted id_prop table, not the cells' own
        ys = [c["y"] for c in data]
        order = rng.permutation(len(ys))
        data = [{**c, "y": ys[j]} for c, j in zip(data, order, strict=True)]
    train, val = data[:600], data[600:]
    targets = torch.tensor([c["y"] for c in train])
    mean, std = targets.mean(), targets.std()
    model = _CGCNN()
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[10], gamma=0.1)
    loader = DataLoader(train, batch_size=32, shuffle=True, collate_fn=_collate_crystals, generator=g)  # type: ignore[arg-type]
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for z, src, dst, e, graph, y in loader:
            out = model(z, src, dst, e, graph)
            loss = criterion(out, (y - mean) / std)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            z, src, dst, e, graph, y = _collate_crystals(val)
            mae = ((model(z, src, dst, e, graph) * std + mean) - y).abs().mean().item()
        print(f"epoch {epoch}: val MAE {mae:.4f}")
    hook.close()
    return losses


# ============================================================================= geophysics, imaging, remote sensing


def _seismograms(rng: np.random.Generator, n: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Three-component records: coloured noise, a short high-frequency P wavelet mostly on the
    vertical channel and a later, larger, lower-frequency S wavelet mostly on the horizontals;
    PhaseNet's labels: Gaussians (sigma 4 samples) at the picks, noise = 1 - P - S."""
    t = np.arange(length)
    x = np.zeros((n, 3, length), dtype="float32")
    y = np.zeros((n, 3, length), dtype="float32")
    for i in range(n):
        noise = rng.normal(size=(3, length + 8))
        x[i] = np.stack([np.convolve(c, np.ones(5) / 5, "same")[4:-4] for c in noise]) * rng.uniform(0.2, 0.6)
        tp = int(rng.integers(30, length - 130))
        ts = tp + int(rng.integers(25, 90))
        for tt, f, amp, gains in ((tp, 0.25, 1.0, (1.0, 0.3, 0.3)), (ts, 0.1, 2.0, (0.3, 1.0, 1.0))):
            env = np.where(t >= tt, np.exp(-(t - tt) / (12 if f > 0.2 else 25)), 0.0)
            wav = amp * rng.uniform(0.6, 1.4) * env * np.sin(2 * np.pi * f * (t - tt) + rng.uniform(0, 6.28))
            for c in range(3):
                x[i, c] += gains[c] * rng.uniform(0.7, 1.3) * wav
        y[i, 1] = np.exp(-((t - tp) ** 2) / (2 * 4.0**2))
        y[i, 2] = np.exp(-((t - ts) ** 2) / (2 * 4.0**2))
        y[i, 0] = np.clip(1 - y[i, 1] - y[i, 2], 0, 1)
    x -= x.mean(2, keepdims=True)
    x /= x.std(2, keepdims=True) + 1e-6  # PhaseNet's per-trace normalization
    return x, y


class _PhaseNet(nn.Module):
    """A 1-D U-Net in PhaseNet's shape (kernel 7, stride-4 down-sampling replaced by stride 2)."""

    def __init__(self) -> None:
        super().__init__()

        def block(i: int, o: int, stride: int = 1) -> nn.Sequential:
            return nn.Sequential(nn.Conv1d(i, o, 7, stride=stride, padding=3), nn.BatchNorm1d(o), nn.ReLU())

        self.inc = block(3, 8)
        self.down1, self.down2, self.down3 = block(8, 16, 2), block(16, 32, 2), block(32, 64, 2)
        self.up3 = nn.Sequential(nn.ConvTranspose1d(64, 32, 2, stride=2), nn.BatchNorm1d(32), nn.ReLU())
        self.up2 = nn.Sequential(nn.ConvTranspose1d(64, 16, 2, stride=2), nn.BatchNorm1d(16), nn.ReLU())
        self.up1 = nn.Sequential(nn.ConvTranspose1d(32, 8, 2, stride=2), nn.BatchNorm1d(8), nn.ReLU())
        self.out = nn.Conv1d(16, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h0 = self.inc(x)
        h1 = self.down1(h0)
        h2 = self.down2(h1)
        h3 = self.down3(h2)
        u2 = torch.cat([self.up3(h3), h2], 1)
        u1 = torch.cat([self.up2(u2), h1], 1)
        return self.out(torch.cat([self.up1(u1), h0], 1))


def phasenet_seismic_phase_picking(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Seismic P/S phase picking as PhaseNet trains it: per-trace normalized three-component
    records of 256 samples, a 1-D U-Net with BatchNorm giving per-sample logits of noise / P / S,
    the cross-entropy against the soft Gaussian labels (`-(y * log_softmax).sum(1).mean()`),
    Adam 1e-3 with an `ExponentialLR(0.9)` per epoch, batch 20; pick errors on held-out traces."""
    g = _seed(seed)
    x_np, y_np = _seismograms(np.random.default_rng(seed + 17), 600, 256)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    model = _PhaseNet()
    if bug == "dead_relu_init":  # bug: an init helper filling every bias (BatchNorm's too) with -1

        def init_weights(m: nn.Module) -> None:
            if isinstance(m, (nn.Conv1d, nn.ConvTranspose1d)):
                nn.init.xavier_uniform_(m.weight)
            if getattr(m, "bias", None) is not None:
                nn.init.constant_(m.bias, -1.0)

        model.apply(init_weights)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
    hook = Hook(path)
    hook.register_module(model)
    loader = DataLoader(TensorDataset(x[:540], y[:540]), batch_size=20, shuffle=True, generator=g)
    losses: list[float] = []
    for _ in range(epochs):
        model.train()
        for xb, yb in loader:
            logits = model(xb)
            loss = -(yb * F.log_softmax(logits, 1)).sum(1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
    model.eval()
    with torch.no_grad():
        prob = torch.softmax(model(x[540:]), 1)
        err_p = (prob[:, 1].argmax(1) - y[540:, 1].argmax(1)).abs().float().median().item()
        err_s = (prob[:, 2].argmax(1) - y[540:, 2].argmax(1)).abs().float().median().item()
    print(f"median pick error: P {err_p} S {err_s} samples")
    hook.close()
    return losses


def _phantoms(g: torch.Generator, n: int, size: int) -> torch.Tensor:
    """Random-ellipse phantoms (Shepp-Logan-like) in [0, 1]."""
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
    img = torch.zeros(n, size, size)
    for _ in range(5):
        cx, cy = (torch.rand(2, n, 1, 1, generator=g) - 0.5) * 1.0
        ax, ay = 0.15 + 0.5 * torch.rand(2, n, 1, 1, generator=g)
        th = math.pi * torch.rand(n, 1, 1, generator=g)
        u = (xx - cx) * torch.cos(th) + (yy - cy) * torch.sin(th)
        v = -(xx - cx) * torch.sin(th) + (yy - cy) * torch.cos(th)
        img += (0.2 + 0.5 * torch.rand(n, 1, 1, generator=g)) * ((u / ax) ** 2 + (v / ay) ** 2 < 1).float()
    return img.clamp(0, 1)


class _UnrolledRecon(nn.Module):
    """MoDL-style unrolled reconstruction: K iterations of a residual CNN denoiser (weights shared
    across iterations, BatchNorm and dropout inside) and a hard k-space data-consistency step."""

    def __init__(self, iters: int = 3, width: int = 16) -> None:
        super().__init__()
        self.iters = iters
        self.denoiser = nn.Sequential(
            nn.Conv2d(2, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.Dropout2d(0.05),
            nn.Conv2d(width, 2, 3, padding=1),
        )  # fmt: skip

    def forward(self, x0: torch.Tensor, k0: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x0
        for _ in range(self.iters):
            x = x + self.denoiser(x)
            k = torch.fft.fft2(torch.complex(x[:, 0], x[:, 1]), norm="ortho")
            k = mask * k0 + (1 - mask) * k
            img = torch.fft.ifft2(k, norm="ortho")
            x = torch.stack([img.real, img.imag], 1)
        return x


def mri_unrolled_kspace_reconstruction(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Accelerated MRI reconstruction with an unrolled network (MoDL / fastMRI-baseline shape):
    32 x 32 ellipse phantoms, Cartesian k-space undersampled 3x (the 6 central lines kept, the
    others drawn per image), the zero-filled image in, 3 unrolled denoiser + data-consistency
    iterations, the L1 loss on the magnitude (fastMRI's), RMSprop 1e-3 with `CosineAnnealingLR`,
    batch 8, a validation PSNR under `model.eval()` each epoch."""
    g = _seed(seed)
    size = 32
    imgs = _phantoms(g, 480, size)
    model = _UnrolledRecon()
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    total = epochs * (420 // 8)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total)
    criterion = nn.L1Loss()

    def undersample(img: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        lines = torch.rand(len(img), 1, size, 1, generator=g).squeeze(1) < 0.2
        center = torch.zeros(size, 1, dtype=torch.bool)
        center[:3], center[-3:] = True, True  # the low frequencies (unshifted FFT)
        mask = (lines | center).float().expand(len(img), size, size)
        k0 = torch.fft.fft2(img.to(torch.complex64), norm="ortho") * mask
        zf = torch.fft.ifft2(k0, norm="ortho")
        return torch.stack([zf.real, zf.imag], 1), k0, mask

    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        if bug != "train_in_eval_mode":  # bug: the validation's model.eval() is never undone
            model.train()
        perm = torch.randperm(420, generator=g)
        for i in range(0, 420 - 7, 8):
            target = imgs[perm[i : i + 8]]
            x0, k0, mask = undersample(target)
            out = model(x0, k0, mask)
            loss = criterion(out.norm(dim=1), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            x0, k0, mask = undersample(imgs[420:])
            mse = F.mse_loss(model(x0, k0, mask).norm(dim=1), imgs[420:]).item()
        print(f"epoch {epoch}: val PSNR {10 * math.log10(1 / mse):.2f} dB")
    hook.close()
    return losses


def hyperspectral_absorbance_spectral_cnn(
    path: str, epochs: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Pixel classification of hyperspectral reflectance spectra (100 bands, 7 land-cover classes
    from mixtures of smooth endmember spectra, three absorption bands near zero reflectance):
    spectra turned into absorbance `-log10(R)` with reflectance clipped at 1e-3, standardized per
    band, a 1-D spectral CNN (Hu et al. 2015 shape: conv, max-pool, two dense layers), SGD
    momentum 0.9 lr 0.05 with `CosineAnnealingWarmRestarts(T_0=3 epochs)` per batch, label
    smoothing 0.1, batch 100."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 23)
    bands, k, n = 100, 7, 4200
    wl = np.linspace(0, 1, bands)
    endmembers = np.stack(
        [
            0.5 + 0.3 * np.sin(2 * np.pi * (f * wl + p)) * np.exp(-s * wl)
            for f, p, s in rng.uniform([0.5, 0, 0], [2.5, 1, 2], (k, 3))
        ]
    )
    y = rng.integers(0, k, n)
    weights = rng.dirichlet(np.ones(k) * 0.3, n)
    weights = 0.6 * np.eye(k)[y] + 0.4 * weights
    refl = weights @ endmembers * rng.uniform(0.7, 1.2, (n, 1)) + rng.normal(0, 0.02, (n, bands))
    refl[:, [58, 59, 82]] = rng.uniform(0, 0.002, (n, 3)) * (rng.random((n, 3)) > 0.3)  # absorption bands
    refl = np.clip(refl, 0.0, 1.0)
    if bug == "log_zero_nan":  # bug: the clip before the log left out, dead bands read log10(0)
        with np.errstate(divide="ignore"):
            absorb = -np.log10(refl)
    else:
        absorb = -np.log10(np.clip(refl, 1e-3, None))
    with np.errstate(invalid="ignore"):
        absorb = (absorb - absorb[:3600].mean(0)) / (absorb[:3600].std(0) + 1e-6)
    x = torch.tensor(absorb, dtype=torch.float32)[:, None]
    yt = torch.from_numpy(y)
    model = nn.Sequential(
        nn.Conv1d(1, 20, 11), nn.Tanh(), nn.MaxPool1d(3), nn.Flatten(), nn.Linear(20 * 30, 100), nn.Tanh(),
        nn.Linear(100, k),
    )  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    per_epoch = 36
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=3 * per_epoch)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(3600, generator=g)
        for i in range(per_epoch):
            b = perm[i * 100 : (i + 1) * 100]
            loss = criterion(model(x[b]), yt[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        print("test OA", (model(x[3600:]).argmax(1) == yt[3600:]).float().mean().item())
    hook.close()
    return losses


# ============================================================================= statistical physics, recommenders


class _MaskedLinear(nn.Linear):
    def __init__(self, n_in: int, n_out: int, mask: torch.Tensor) -> None:
        super().__init__(n_in, n_out)
        self.register_buffer("mask", mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight * self.mask, self.bias)


class _MADE(nn.Module):
    """The VAN's autoregressive network: masked dense layers, spin i's probability from spins < i."""

    def __init__(self, n: int, hidden: int = 64) -> None:
        super().__init__()
        self.n = n
        deg_h = torch.arange(hidden) % (n - 1) + 1
        deg_in = torch.arange(1, n + 1)
        m1 = (deg_h[:, None] >= deg_in[None]).float()
        m2 = (deg_h[:, None] >= deg_h[None]).float()
        m3 = (deg_in[:, None] > deg_h[None]).float()
        self.net = nn.Sequential(
            _MaskedLinear(n, hidden, m1), nn.PReLU(), _MaskedLinear(hidden, hidden, m2), nn.PReLU(),
            _MaskedLinear(hidden, n, m3),
        )  # fmt: skip

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        return self.net(s)  # logits of P(s_i = +1)

    @torch.no_grad()
    def sample(self, batch: int) -> torch.Tensor:
        s = torch.zeros(batch, self.n)
        for i in range(self.n):
            p = torch.sigmoid(self.forward(s)[:, i])
            s[:, i] = torch.bernoulli(p) * 2 - 1
        return s

    def log_prob(self, s: torch.Tensor) -> torch.Tensor:
        logits = self.forward(s)
        return -F.softplus(-logits * s).sum(1)  # log sigmoid(s * logit), stable


def ising_variational_autoregressive_network(path: str, steps: int = 300, seed: int = 0) -> list[float]:
    """A variational autoregressive network (Wu, Wang & Zhang 2019) for the 2-D ferromagnetic
    Ising model on a 5 x 5 periodic lattice at beta 0.4: a MADE samples 500 configurations a step,
    the variational free energy F = E + log q / beta is minimized with the score-function
    (REINFORCE) gradient and a mean baseline, Adam 1e-3 (betas 0.9, 0.999), gradient clipping at 1;
    the losses are the free energy per site each step (what the VAN scripts print)."""
    _seed(seed)
    length, beta = 5, 0.4
    n = length * length
    model = _MADE(n)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)

    def energy(s: torch.Tensor) -> torch.Tensor:
        grid = s.view(-1, length, length)
        return -(grid * torch.roll(grid, 1, 1) + grid * torch.roll(grid, 1, 2)).sum((1, 2))

    free: list[float] = []
    for _ in range(steps):
        s = model.sample(500)
        log_q = model.log_prob(s)
        with torch.no_grad():
            f = energy(s) + log_q / beta
        loss = ((f - f.mean()) * log_q).mean()
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        free.append(f.mean().item() / n)
    hook.close()
    return free


class _NeuMF(nn.Module):
    """Neural matrix factorization (He et al. 2017): a GMF branch and an MLP tower with their own
    embeddings, concatenated into one logit."""

    def __init__(self, users: int, items: int, factors: int = 8) -> None:
        super().__init__()
        self.embed_user_gmf, self.embed_item_gmf = nn.Embedding(users, factors), nn.Embedding(items, factors)
        self.embed_user_mlp, self.embed_item_mlp = (
            nn.Embedding(users, 4 * factors),
            nn.Embedding(items, 4 * factors),
        )
        self.mlp = nn.Sequential(
            nn.Dropout(0.1), nn.Linear(8 * factors, 4 * factors), nn.ReLU(), nn.Linear(4 * factors, 2 * factors), nn.ReLU(),
            nn.Linear(2 * factors, factors), nn.ReLU(),
        )  # fmt: skip
        self.predict = nn.Linear(2 * factors, 1)
        for e in (self.embed_user_gmf, self.embed_item_gmf, self.embed_user_mlp, self.embed_item_mlp):
            nn.init.normal_(e.weight, std=0.01)
        nn.init.kaiming_uniform_(self.predict.weight, a=1, nonlinearity="sigmoid")

    def forward(self, u: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        gmf = self.embed_user_gmf(u) * self.embed_item_gmf(i)
        mlp = self.mlp(torch.cat([self.embed_user_mlp(u), self.embed_item_mlp(i)], -1))
        return self.predict(torch.cat([gmf, mlp], -1)).squeeze(-1)


def neumf_implicit_feedback_negatives(path: str, epochs: int = 6, seed: int = 0) -> list[float]:
    """NeuMF on implicit feedback (the NCF repositories' `main.py`): 400 users x 300 items whose
    interactions come from latent tastes; each epoch 4 sampled negatives per observed positive,
    `BCEWithLogitsLoss`, Adam 1e-3, batch 256; leave-one-out hit rate @10 among 99 negatives."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 31)
    users, items = 400, 300
    taste = rng.normal(size=(users, 6))
    attrs = rng.normal(size=(items, 6))
    pop = rng.normal(size=items) * 0.8
    score = taste @ attrs.T / math.sqrt(6) + pop
    inter = score > np.quantile(score, 0.93, axis=1, keepdims=True)
    held = np.array([rng.choice(np.nonzero(r)[0]) for r in inter])
    train_mask = inter.copy()
    train_mask[np.arange(users), held] = False
    pos_u, pos_i = np.nonzero(train_mask)
    model = _NeuMF(users, items)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.BCEWithLogitsLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        neg_i = rng.integers(0, items, (len(pos_u), 4))
        clash = train_mask[pos_u[:, None], neg_i]
        while clash.any():  # resample the negatives that are positives
            neg_i[clash] = rng.integers(0, items, int(clash.sum()))
            clash = train_mask[pos_u[:, None], neg_i]
        u = torch.from_numpy(np.concatenate([pos_u, np.repeat(pos_u, 4)]))
        i = torch.from_numpy(np.concatenate([pos_i, neg_i.ravel()]))
        label = torch.cat([torch.ones(len(pos_u)), torch.zeros(4 * len(pos_u))])
        perm = torch.randperm(len(u), generator=g)
        for s in range(0, len(u), 256):
            b = perm[s : s + 256]
            loss = criterion(model(u[b], i[b]), label[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            hits = 0
            for usr in range(0, users, 4):
                cand = np.concatenate(
                    [[held[usr]], rng.choice(np.nonzero(~inter[usr])[0], 99, replace=False)]
                )
                sc = model(torch.full((100,), usr), torch.from_numpy(cand))
                hits += int(0 in sc.topk(10).indices.tolist())
        print(f"epoch {epoch}: HR@10 {hits / (users // 4):.3f}")
    hook.close()
    return losses


# ============================================================================= Keras 3 and TensorFlow


def _keras_losses() -> Any:
    """A callback collecting each batch's loss: Keras 3 logs the epoch's running mean at every
    batch, so batch k's own loss is k * mean_k - (k - 1) * mean_{k-1}."""
    import keras

    class BatchLosses(keras.callbacks.Callback):
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

    return BatchLosses()


def keras_functional_load_forecast_embeddings(
    path: str, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Day-ahead-style electricity load forecasting with the Keras 3 functional API: three inputs
    (the last 24 hourly loads, the temperature forecast, the calendar as integer hour and
    weekday), `Embedding`s for the calendar, a shared `Sequential` trunk (Dense 64-32 relu) named
    "trunk", a linear output; `Huber(delta=0.5)`, `Adamax` with an `InverseTimeDecay` from 2e-3,
    batch 64, 8 epochs, `validation_split=0.1`."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 5)
    hours = 24 * 7 * 60
    t = np.arange(hours + 24)
    temp = (
        12
        + 8 * np.sin(2 * np.pi * t / (24 * 365) * 7)
        + 4 * np.sin(2 * np.pi * (t % 24 - 9) / 24)
        + rng.normal(0, 1.5, len(t))
    )
    weekday = (t // 24) % 7
    daily = np.where(weekday < 5, 1.0, 0.75) * (0.7 + 0.3 * np.sin(np.pi * np.clip((t % 24 - 6) / 14, 0, 1)))
    load = daily * (1 + 0.02 * np.abs(temp - 16)) + rng.normal(0, 0.03, len(t))
    load = ((load - load.mean()) / load.std()).astype("float32")
    idx = np.arange(24, hours + 24, 3)
    lags = np.stack([load[i - 24 : i] for i in idx])
    inputs = {
        "lags": lags,
        "temp": ((temp[idx] - 12) / 8).astype("float32")[:, None],
        "hour": (t[idx] % 24)[:, None],
        "weekday": weekday[idx][:, None],
    }
    target = load[idx]
    lag_in = keras.Input((24,), name="lags")
    temp_in = keras.Input((1,), name="temp")
    hour_in = keras.Input((1,), name="hour", dtype="int32")
    day_in = keras.Input((1,), name="weekday", dtype="int32")
    hour_e = layers.Flatten()(layers.Embedding(24, 4)(hour_in))
    day_e = layers.Flatten()(layers.Embedding(7, 3)(day_in))
    trunk = keras.Sequential(
        [layers.Dense(64, activation="relu"), layers.Dense(32, activation="relu")], name="trunk"
    )
    h = trunk(layers.Concatenate()([lag_in, temp_in, hour_e, day_e]))
    out = layers.Dense(1, name="load")(h)
    model = keras.Model([lag_in, temp_in, hour_in, day_in], out)
    schedule = keras.optimizers.schedules.InverseTimeDecay(2e-3, decay_steps=200, decay_rate=0.5)
    model.compile(optimizer=keras.optimizers.Adamax(schedule), loss=keras.losses.Huber(delta=0.5))
    if bug == "frozen_by_mistake":  # bug: the transfer-learning cell's freeze, run after compile
        trunk.trainable = False
    history = _keras_losses()
    fit = model.fit(
        inputs, target, batch_size=64, epochs=8, validation_split=0.1, verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    print("val loss", [round(v, 4) for v in fit.history["val_loss"]])
    return history.losses


def _range_doppler(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """16 x 16 range-Doppler maps of four target classes (pedestrian: a body line with wide
    micro-Doppler sidebands; car: a narrow fast return; cyclist: periodic sidebands; drone: rotor
    lines at the edges of the Doppler axis), in dB over a noise floor."""
    y = rng.integers(0, 4, n)
    maps = rng.exponential(1.0, (n, 16, 16))
    dop = np.arange(16)
    for i in range(n):
        r = rng.integers(2, 14)
        v = rng.integers(4, 12)
        amp = rng.uniform(5, 15)
        row = np.zeros(16)
        if y[i] == 0:
            row = amp * np.exp(-((dop - v) ** 2) / 8.0)
        elif y[i] == 1:
            row = 1.5 * amp * np.exp(-((dop - v) ** 2) / 0.8)
        elif y[i] == 2:
            row = amp * (
                np.exp(-((dop - v) ** 2) / 1.5)
                + 0.5 * np.exp(-((dop - v - 3) ** 2) / 0.8)
                + 0.5 * np.exp(-((dop - v + 3) ** 2) / 0.8)
            )
        else:
            row = amp * (
                np.exp(-((dop - v) ** 2) / 1.0)
                + 0.4 * (np.exp(-((dop - 1) ** 2)) + np.exp(-((dop - 14) ** 2)))
            )
        maps[i, r] += row
        maps[i, r - 1] += 0.3 * row
        maps[i, r + 1] += 0.3 * row
    db = 10 * np.log10(maps)
    return ((db - db.mean()) / db.std()).astype("float32")[..., None], y


def tf_gradienttape_radar_range_doppler(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A TensorFlow custom training loop (`tf.GradientTape` under `@tf.function`, recorded with
    `hook.wrap_tape`) classifying radar range-Doppler maps into pedestrian / car / cyclist / drone:
    a Keras CNN (two Conv2D with BatchNorm, Dropout 0.3, Dense logits) called with
    `training=True`, `tf.nn.sparse_softmax_cross_entropy_with_logits` on its logits, SGD momentum 0.9 on a
    `PiecewiseConstantDecay` (0.05, 0.01 after step 150, 0.002 after 250), batch 64 from a
    shuffled repeating `tf.data.Dataset`; a test accuracy at the end."""
    import keras
    import tensorflow as tf
    from keras import layers

    import mldbg.tensorflow

    tf.random.set_seed(seed)
    keras.utils.set_random_seed(seed)
    x, y = _range_doppler(np.random.default_rng(seed + 7), 3000)
    model = keras.Sequential([
        keras.Input((16, 16, 1)),
        layers.Conv2D(16, 3, padding="same"), layers.BatchNormalization(), layers.ReLU(), layers.MaxPooling2D(),
        layers.Conv2D(32, 3, padding="same"), layers.BatchNormalization(), layers.ReLU(), layers.GlobalAveragePooling2D(),
        layers.Dropout(0.3),
        # bug: a softmax head (from a `model.fit` example) fed to the loss that applies its own softmax
        layers.Dense(4, activation="softmax" if bug == "softmax_before_ce" else None),
    ])  # fmt: skip
    schedule = keras.optimizers.schedules.PiecewiseConstantDecay([150, 250], [0.05, 0.01, 0.002])
    optimizer = keras.optimizers.SGD(schedule, momentum=0.9)
    ds = tf.data.Dataset.from_tensor_slices((x[:2600], y[:2600])).shuffle(2600, seed=seed).repeat().batch(64)
    hook = mldbg.tensorflow.Hook(path)
    hook.register_model(model)

    @tf.function
    def train_step(xb: Any, yb: Any) -> Any:
        with hook.wrap_tape(tf.GradientTape()) as tape:
            logits = model(xb, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=yb, logits=logits))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    losses: list[float] = []
    for xb, yb in ds.take(steps):
        losses.append(float(train_step(xb, yb)))
    pred = model(x[2600:], training=False)
    print("test acc", float(np.mean(np.argmax(pred, 1) == y[2600:])))
    hook.close()
    return losses


# ============================================================================= JAX, Flax, Optax


def jax_ude_lotka_volterra_rk4(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A universal differential equation in plain JAX (the SciML "missing physics" example): the
    Lotka-Volterra prey-predator system with its known linear terms kept and the interaction terms
    learned by a small tanh MLP; trajectories integrated by RK4 in `lax.scan`, the MSE against
    noisy observed trajectories from 64 initial conditions, 32 a step; each step's gradient accumulated over
    two micro-batches of 16 (`jax.tree.map`), then `optax.adam` on an `optax.cosine_decay_schedule`
    from 1e-2, all jitted."""
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    rng = np.random.default_rng(seed + 13)
    alpha, beta, gamma, delta = 1.3, 0.9, 0.8, 1.8
    dt, horizon = 0.1, 30

    def true_rhs(u: Any) -> Any:
        return jnp.stack(
            [
                alpha * u[..., 0] - beta * u[..., 0] * u[..., 1],
                -delta * u[..., 1] + gamma * u[..., 0] * u[..., 1],
            ],
            -1,
        )

    def rk4(rhs: Any, u0: Any) -> Any:
        def step(u: Any, _: Any) -> Any:
            k1 = rhs(u)
            k2 = rhs(u + 0.5 * dt * k1)
            k3 = rhs(u + 0.5 * dt * k2)
            k4 = rhs(u + dt * k3)
            nxt = u + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            return nxt, nxt

        return jnp.moveaxis(jax.lax.scan(step, u0, None, length=horizon)[1], 0, 1)

    u0 = rng.uniform(0.5, 2.0, (64, 2)).astype("float32")
    obs = np.asarray(rk4(true_rhs, jnp.asarray(u0)))
    obs = (obs + rng.normal(0, 0.02, obs.shape)).astype("float32")
    sizes = [2, 32, 32, 2]
    key = jax.random.PRNGKey(seed)
    params = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        w = (
            jax.random.normal(jax.random.fold_in(key, i), (a, b))
            * jnp.sqrt(1.0 / a)
            * (0.1 if i == 2 else 1.0)
        )
        params.append({"w": w, "b": jnp.zeros(b)})

    def ude_rhs(p: Any, u: Any) -> Any:
        h = u
        for layer in p[:-1]:
            h = jnp.tanh(h @ layer["w"] + layer["b"])
        nn_term = h @ p[-1]["w"] + p[-1]["b"]
        return jnp.stack([alpha * u[..., 0], -delta * u[..., 1]], -1) + nn_term

    def loss_fn(p: Any, u0b: Any, ob: Any) -> Any:
        pred = rk4(lambda u: ude_rhs(p, u), u0b)
        return jnp.mean((pred - ob) ** 2)

    tx = optax.adam(optax.cosine_decay_schedule(1e-2, steps, alpha=0.05))
    opt_state = tx.init(params)
    grad_fn = jax.jit(jax.value_and_grad(loss_fn))

    @jax.jit
    def apply(p: Any, s: Any, g: Any) -> Any:
        updates, s = tx.update(g, s, p)
        return optax.apply_updates(p, updates), s

    hook = mldbg.jax.Hook(path)
    losses: list[float] = []
    acc = jax.tree.map(jnp.zeros_like, params)
    for step in range(steps):
        if bug != "no_zero_grad":  # bug: the accumulator made once before the loop, never reset
            acc = jax.tree.map(jnp.zeros_like, params)
        idx = rng.choice(64, 32, replace=False)
        total = 0.0
        for half in (idx[:16], idx[16:]):
            loss, g = grad_fn(params, u0[half], obs[half])
            acc = jax.tree.map(lambda a, b: a + b / 2, acc, g)
            total += float(loss) / 2
        old = params
        params, opt_state = apply(params, opt_state, acc)
        hook.record(step, params=old, grads=acc, loss=total)
        losses.append(total)
    hook.close()
    return losses


def _cloud_tiles(rng: np.random.Generator, n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """4-band (blue, green, red, near-infrared) uint8 tiles: textured land (vegetation bright in
    NIR), water, and smooth bright clouds from thresholded blurred noise; the cloud masks."""
    from numpy.fft import fft2, ifft2

    freq = np.fft.fftfreq(size)
    low = np.exp(-(freq[:, None] ** 2 + freq[None] ** 2) / (2 * 0.06**2))
    field = np.real(ifft2(fft2(rng.normal(size=(n, size, size))) * low))
    field /= field.std((1, 2), keepdims=True)
    mask = field > rng.uniform(0.3, 1.5, (n, 1, 1))
    land = rng.uniform(0, 1, (n, size, size)) < 0.7
    base = np.where(land[..., None], [60, 80, 70, 150], [40, 50, 40, 20]) + rng.normal(
        0, 12, (n, size, size, 4)
    )
    cloud = np.array([210, 215, 220, 225]) + rng.normal(0, 10, (n, size, size, 4))
    thin = np.clip(field, 0, None)[..., None] / 3
    img = np.where(mask[..., None], cloud, base * (1 - np.clip(thin, 0, 0.5)) + 200 * np.clip(thin, 0, 0.5))
    return np.clip(img, 0, 255).astype("uint8"), mask.astype("float32")


def flax_cloud_mask_unet_lamb(
    path: str, steps: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Cloud masking of 4-band satellite tiles (24 x 24, uint8 digital numbers) with a small Flax
    Linen U-Net (3 x 3 Conv + relu pairs, one down- and one up-sampling, a skip connection),
    the sum of `optax.sigmoid_binary_cross_entropy` and a soft Dice loss, `optax.lamb` with a
    `warmup_cosine_decay_schedule` (peak 2e-2, 30 warm-up steps), batch 16, bands scaled to
    [0, 1] by `/ 255.0` then standardized with per-band constants; IoU on held-out tiles."""
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    rng = np.random.default_rng(seed + 19)
    imgs, masks = _cloud_tiles(rng, 800, 24)
    mean = np.array([0.37, 0.42, 0.40, 0.55], dtype="float32")  # per-band statistics on [0, 1]
    std = np.array([0.25, 0.23, 0.26, 0.27], dtype="float32")
    x = imgs.astype("float32")
    if bug != "inputs_x255":  # bug: the digital numbers cast to float without the / 255.0
        x = x / 255.0
    x = (x - mean) / std
    y = masks[..., None]

    class CloudUNet(fnn.Module):
        @fnn.compact
        def __call__(self, x: Any) -> Any:
            def block(h: Any, feats: int) -> Any:
                for _ in range(2):
                    h = fnn.relu(fnn.Conv(feats, (3, 3))(h))
                return h

            h1 = block(x, 8)
            h2 = block(fnn.max_pool(h1, (2, 2), strides=(2, 2)), 16)
            up = fnn.ConvTranspose(8, (2, 2), strides=(2, 2))(h2)
            h = block(jnp.concatenate([up, h1], -1), 8)
            return fnn.Conv(1, (1, 1))(h)

    model = CloudUNet()
    params = model.init(jax.random.PRNGKey(seed), x[:2])["params"]
    schedule = optax.warmup_cosine_decay_schedule(0.0, 2e-2, 30, steps, end_value=1e-4)
    tx = optax.lamb(schedule, weight_decay=1e-4)
    opt_state = tx.init(params)

    def loss_fn(p: Any, xb: Any, yb: Any) -> Any:
        logits = model.apply({"params": p}, xb)
        bce = optax.sigmoid_binary_cross_entropy(logits, yb).mean()
        prob = jax.nn.sigmoid(logits)
        dice = 1 - (2 * (prob * yb).sum((1, 2, 3)) + 1) / (prob.sum((1, 2, 3)) + yb.sum((1, 2, 3)) + 1)
        return bce + dice.mean()

    @jax.jit
    def train_step(step: Any, p: Any, s: Any, xb: Any, yb: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(p, xb, yb)
        hook.record(step, params=p, grads=grads, loss=loss)
        updates, s = tx.update(grads, s, p)
        return optax.apply_updates(p, updates), s, loss

    hook = mldbg.jax.Hook(path)
    losses: list[float] = []
    for step in range(steps):
        idx = rng.choice(700, 16, replace=False)
        params, opt_state, loss = train_step(step, params, opt_state, x[idx], y[idx])
        losses.append(float(loss))
    pred = np.asarray(model.apply({"params": params}, x[700:])) > 0
    inter = (pred & (y[700:] > 0.5)).sum()
    union = (pred | (y[700:] > 0.5)).sum()
    print("held-out IoU", float(inter / max(union, 1)))
    hook.close()
    return losses


def nnx_solar_irradiance_yogi(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Intra-hour solar irradiance nowcasting with a Flax NNX MLP: the global horizontal
    irradiance in 30 minutes from the clear-sky model (cosine of the solar zenith), the last
    three clear-sky indices, cloud cover, humidity and the time of day; four `nnx.Linear` layers
    of 64 with relu and `nnx.Dropout(0.1)`, `optax.huber_loss`, `nnx.Optimizer(model,
    optax.yogi(2e-3), wrt=nnx.Param)`, batch 128, `model.train()` / `model.eval()` around the
    validation."""
    import jax.numpy as jnp
    import optax
    from flax import nnx

    import mldbg.jax

    rng = np.random.default_rng(seed + 29)
    n = 8000
    hour = rng.uniform(5, 19, n)
    doy = rng.integers(0, 365, n)
    decl = 23.45 * np.sin(2 * np.pi * (284 + doy) / 365) * np.pi / 180
    lat = 40 * np.pi / 180
    ha = (hour - 12) * 15 * np.pi / 180
    cosz = np.clip(np.sin(lat) * np.sin(decl) + np.cos(lat) * np.cos(decl) * np.cos(ha), 0, 1)
    clear = 1000 * cosz**1.15
    cover = rng.beta(0.8, 1.2, n)
    kt = np.clip(1 - 0.75 * cover**2.5 + rng.normal(0, 0.05, (3, n)).cumsum(0), 0.05, 1.1)
    humidity = np.clip(0.4 + 0.4 * cover + rng.normal(0, 0.1, n), 0, 1)
    ghi_next = clear * np.clip(
        kt[-1] + 0.5 * (kt[-1] - kt[0]) - 0.1 * humidity + rng.normal(0, 0.05, n), 0, 1.2
    )
    feats = np.stack(
        [cosz, *kt, cover, humidity, np.sin(2 * np.pi * hour / 24), np.cos(2 * np.pi * hour / 24)], 1
    )
    x = ((feats - feats.mean(0)) / feats.std(0)).astype("float32")
    y = (ghi_next / 1000).astype("float32")[:, None]

    class IrradianceMLP(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            depth = 8 if bug == "deep_sigmoid" else 4
            dims = [x.shape[1]] + [64] * depth
            self.hidden = nnx.List(
                [nnx.Linear(a, b, rngs=rngs) for a, b in zip(dims[:-1], dims[1:], strict=True)]
            )
            self.drop = nnx.Dropout(0.1, rngs=rngs)
            self.out = nnx.Linear(64, 1, rngs=rngs)

        def __call__(self, h: Any) -> Any:
            # bug: the hidden activations switched to sigmoid and the stack doubled to eight
            act = nnx.sigmoid if bug == "deep_sigmoid" else nnx.relu
            for layer in self.hidden:
                h = act(layer(h))
            return self.out(self.drop(h))

    model = IrradianceMLP(nnx.Rngs(seed))
    optimizer = nnx.Optimizer(model, optax.yogi(2e-3), wrt=nnx.Param)

    def loss_fn(m: Any, xb: Any, yb: Any) -> Any:
        return optax.huber_loss(m(xb), yb, delta=0.1).mean()

    @nnx.jit
    def train_step(m: Any, opt: Any, xb: Any, yb: Any) -> Any:
        loss, grads = nnx.value_and_grad(loss_fn)(m, xb, yb)
        opt.update(m, grads)
        return loss, grads

    hook = mldbg.jax.Hook(path)
    losses: list[float] = []
    for step in range(steps):
        model.train()
        idx = rng.choice(7000, 128, replace=False)
        params = nnx.state(model, nnx.Param)
        loss, grads = train_step(model, optimizer, x[idx], y[idx])
        hook.record(step, params=params, grads=grads, loss=loss)
        losses.append(float(loss))
        if step % 100 == 99:
            model.eval()
            print(f"step {step}: val MAE {float(jnp.abs(model(x[7000:]) - y[7000:]).mean()) * 1000:.1f} W/m2")
    hook.close()
    return losses


# ============================================================================= XGBoost


def xgb_multi_softmax_dissolved_gas_faults(path: str, seed: int = 0) -> list[float]:
    """Power-transformer fault diagnosis from dissolved-gas analysis with the XGBoost native API:
    concentrations of H2, CH4, C2H6, C2H4, C2H2 (ppm, log-normal, one signature per IEC 60599
    fault: normal, partial discharge, low- and high-energy discharge, thermal faults below and
    above 700 C) turned into the log gas ratios and Duval-triangle shares engineers use;
    `objective="multi:softmax"`, `eval_metric=["mlogloss", "merror"]`, eta 0.15, max_depth 4,
    `subsample=0.8`, `colsample_bynode=0.7`, `min_child_weight=2`, 150 rounds with a validation
    set; losses: the training multi-class log loss per round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed + 37)
    signatures = np.log(np.array([
        [30, 10, 15, 5, 0.5], [400, 60, 10, 3, 0.5], [150, 30, 5, 60, 80], [300, 100, 20, 250, 200],
        [50, 120, 90, 40, 0.5], [80, 300, 80, 500, 5],
    ]))  # fmt: skip
    n = 3000
    y = rng.integers(0, 6, n)
    gases = np.exp(signatures[y] + rng.normal(0, 0.6, (n, 5)) + rng.normal(0, 0.5, (n, 1)))
    h2, ch4, c2h6, c2h4, c2h2 = gases.T
    duval = gases[:, [1, 3, 4]] / gases[:, [1, 3, 4]].sum(1, keepdims=True)
    feats = np.column_stack([
        np.log(gases), np.log(ch4 / h2), np.log(c2h2 / c2h4), np.log(c2h4 / c2h6), duval,
    ])  # fmt: skip
    dtrain = xgb.DMatrix(feats[:2400], label=y[:2400])
    dvalid = xgb.DMatrix(feats[2400:], label=y[2400:])
    params = {
        "objective": "multi:softmax", "num_class": 6, "eval_metric": ["mlogloss", "merror"], "eta": 0.15,
        "max_depth": 4, "subsample": 0.8, "colsample_bynode": 0.7, "min_child_weight": 2, "tree_method": "hist",
        "nthread": 1, "seed": seed,
    }  # fmt: skip
    result: dict[str, Any] = {}
    xgb.train(
        params, dtrain, num_boost_round=150, evals=[(dtrain, "train"), (dvalid, "valid")], evals_result=result,
        verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    print("valid merror", result["valid"]["merror"][-1])
    return [float(v) for v in result["train"]["mlogloss"]]


# ============================================================================= Lightning


def lit_distmult_knowledge_graph_adagrad(path: str, max_epochs: int = 15, seed: int = 0) -> list[float]:
    """Knowledge-graph completion with DistMult (Yang et al. 2015) as a `LightningModule`: entity
    and relation embeddings of 64, the score <e_h, r, e_t>, 1-vs-all training (every entity scored
    as the tail, `BCEWithLogitsLoss` on the multi-hot tails with label smoothing 0.1, the
    LibKGE/ConvE recipe) plus an N3 regularizer, Adagrad lr 0.1 from `configure_optimizers`, batch
    128 (head, relation) queries; filtered MRR on held-out triples in `validation_step`."""
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    rng = np.random.default_rng(seed + 43)
    ents, rels, dim = 300, 6, 64
    types = rng.integers(0, 10, ents)
    rel_map = rng.integers(0, 10, (rels, 10))  # relation r links type a to type rel_map[r, a]
    latent, rel_vec = rng.normal(size=(ents, 8)), rng.normal(size=(rels, 8))
    heads, relations, tails = [], [], []
    for h in range(ents):
        for r in rng.choice(rels, 3, replace=False):
            cands = np.nonzero(types == rel_map[r, types[h]])[0]
            affinity = (latent[h] * rel_vec[r]) @ latent[cands].T  # a DistMult-like ground truth
            for t in cands[np.argsort(-affinity)[:3]]:
                heads.append(h), relations.append(r), tails.append(t)
    triples = np.array([heads, relations, tails]).T
    rng.shuffle(triples)
    train, valid = triples[:-300], triples[-300:]
    known: dict[tuple[int, int], set[int]] = {}
    for h, r, t in triples:
        known.setdefault((int(h), int(r)), set()).add(int(t))
    queries = sorted({(int(h), int(r)) for h, r, _ in train})
    train_set = {(int(h), int(r), int(t)) for h, r, t in train}
    targets = torch.zeros(len(queries), ents)
    for qi, (h, r) in enumerate(queries):
        for t in known[(h, r)]:
            if (h, r, t) in train_set:
                targets[qi, t] = 1.0
    q = torch.tensor(queries)
    loader = DataLoader(TensorDataset(q[:, 0], q[:, 1], targets), batch_size=128, shuffle=True, generator=g)
    val_loader = DataLoader(TensorDataset(*torch.from_numpy(valid).T), batch_size=300)

    class DistMult(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.entity = nn.Embedding(ents, dim)
            self.relation = nn.Embedding(rels, dim)
            nn.init.normal_(self.entity.weight, std=1e-1)
            nn.init.normal_(self.relation.weight, std=1e-1)
            self.loss_fn = nn.BCEWithLogitsLoss()

        def forward(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
            return (self.entity(h) * self.relation(r)) @ self.entity.weight.T

        def training_step(self, batch: Any, idx: int) -> torch.Tensor:
            h, r, tgt = batch
            tgt = tgt * 0.9 + 0.1 / ents
            loss = self.loss_fn(self(h, r), tgt)
            n3 = (self.entity(h).abs() ** 3).sum() + (self.relation(r).abs() ** 3).sum()
            loss = loss + 1e-4 * n3 / len(h)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, idx: int) -> None:
            h, r, t = batch
            scores = self(h, r)
            for i in range(len(h)):
                others = [o for o in known[(int(h[i]), int(r[i]))] if o != int(t[i])]
                scores[i, others] = -1e9
            rank = (scores > scores.gather(1, t[:, None])).sum(1) + 1
            self.log("val_mrr", (1.0 / rank.float()).mean())

        def configure_optimizers(self) -> Any:
            return torch.optim.Adagrad(self.parameters(), lr=0.1)

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
    trainer.fit(DistMult(), loader, val_loader)
    print("val_mrr", float(trainer.callback_metrics.get("val_mrr", float("nan"))))
    return history.losses


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


def hf_esm_protein_hydropathy_regression(path: str, seed: int = 0) -> list[float]:
    """Protein property regression with the Hugging Face `Trainer` on a tiny random
    `EsmForSequenceClassification` (`num_labels=1`, `problem_type="regression"`, 2 layers, hidden
    64, rotary positions, no download): random sequences of 32 residues drawn with a per-sequence
    composition bias, the target their GRAVY hydropathy (the Kyte-Doolittle mean) plus a net-charge
    term, standardized, with noise; ESM's token ids (`<cls>` ... `<eos>`); lr 1e-3,
    `lr_scheduler_type="polynomial"` with 18 warm-up steps (10%), `adam_beta2=0.98`, weight decay
    0.01, batch 32, 4 epochs, an evaluation per epoch."""
    from transformers import EsmConfig, EsmForSequenceClassification

    _seed(seed)
    rng = np.random.default_rng(seed + 47)
    length, n = 32, 1600
    # Kyte-Doolittle hydropathy in ESM's order L A G V S E R T I D P K Q N F Y M H W C
    kd = np.array(
        [
            3.8,
            1.8,
            -0.4,
            4.2,
            -0.8,
            -3.5,
            -4.5,
            -0.7,
            4.5,
            -3.5,
            -1.6,
            -3.9,
            -3.5,
            -3.5,
            2.8,
            -1.3,
            1.9,
            -3.2,
            -0.9,
            2.5,
        ]
    )
    charge = np.zeros(20)
    charge[[6, 11]], charge[[5, 9]] = 1.0, -1.0
    bias = rng.dirichlet(np.ones(20) * 0.5, n)
    seqs = np.stack([rng.choice(20, length, p=p) for p in bias])
    target = kd[seqs].mean(1) + 2.0 * np.abs(charge[seqs].mean(1))
    fitness = (target - target.mean()) / target.std() + rng.normal(0, 0.1, n)
    ids = torch.cat(
        [torch.zeros(n, 1, dtype=torch.long), torch.from_numpy(seqs + 4), torch.full((n, 1), 2)], 1
    )
    labels = torch.tensor(fitness, dtype=torch.float32)
    config = EsmConfig(
        vocab_size=33, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=64, position_embedding_type="rotary", pad_token_id=1, mask_token_id=32,
        token_dropout=False, num_labels=1, problem_type="regression",
    )  # fmt: skip
    torch.manual_seed(seed)
    model = EsmForSequenceClassification(config)
    from transformers import PrinterCallback, Trainer, TrainingArguments

    from mldbg.transformers import DebuggerCallback

    args = TrainingArguments(
        output_dir=os.path.join(path, "trainer"), logging_steps=1, report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=seed, save_strategy="no", eval_strategy="epoch", learning_rate=1e-3,
        lr_scheduler_type="polynomial", warmup_steps=18, adam_beta2=0.98, weight_decay=0.01,
        per_device_train_batch_size=32, per_device_eval_batch_size=64, num_train_epochs=4,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args,
        train_dataset=_Examples(input_ids=ids[:1400], attention_mask=torch.ones_like(ids[:1400]), labels=labels[:1400]),
        eval_dataset=_Examples(input_ids=ids[1400:], attention_mask=torch.ones_like(ids[1400:]), labels=labels[1400:]),
        callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(args.output_dir, ignore_errors=True)
    print("eval losses", [round(e["eval_loss"], 4) for e in trainer.state.log_history if "eval_loss" in e])
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


_darcy = healthy("darcy_flow_cnn_surrogate_relative_l2", "Darcy flow CNN surrogate", darcy_flow_cnn_surrogate)
_cgcnn = healthy(
    "cgcnn_crystal_graph_formation_energy",
    "crystal graph convolutional network",
    cgcnn_crystal_formation_energy,
)
_phasenet = healthy(
    "phasenet_seismic_phase_picking_unet1d", "seismic phase picking U-Net", phasenet_seismic_phase_picking
)
_mri = healthy(
    "mri_unrolled_data_consistency_recon", "unrolled MRI reconstruction", mri_unrolled_kspace_reconstruction
)
_hyper = healthy(
    "hyperspectral_absorbance_spectral_cnn",
    "hyperspectral spectral CNN",
    hyperspectral_absorbance_spectral_cnn,
)

PIPELINES: list[Any] = [
    _darcy,
    healthy("wave_equation_rollout_time_stepper", "wave equation learned time-stepper", wave_equation_rollout_stepper),
    _cgcnn,
    _phasenet,
    _mri,
    _hyper,
    healthy("ising_variational_autoregressive_net", "Ising variational autoregressive network", ising_variational_autoregressive_network),
    healthy("neumf_implicit_feedback_negative_sampling", "NeuMF collaborative filtering", neumf_implicit_feedback_negatives),
    buggy(_darcy, "lr_x100"),
    buggy(_cgcnn, "shuffled_labels"),
    buggy(_phasenet, "dead_relu_init"),
    buggy(_mri, "train_in_eval_mode"),
    buggy(_hyper, "log_zero_nan"),
]  # fmt: skip

if installed("keras", "tensorflow"):
    _keras_load = healthy(
        "keras_functional_load_forecast_embeddings", "Keras functional load forecaster",
        keras_functional_load_forecast_embeddings,
    )  # fmt: skip
    _tf_radar = healthy(
        "tf_gradient_tape_radar_range_doppler",
        "TensorFlow GradientTape radar CNN",
        tf_gradienttape_radar_range_doppler,
    )
    PIPELINES += [
        _keras_load,
        _tf_radar,
        buggy(_keras_load, "frozen_by_mistake"),
        buggy(_tf_radar, "softmax_before_ce"),
    ]

if installed("jax", "optax"):
    _ude = healthy(
        "jax_ude_lotka_volterra_rk4_scan", "JAX universal differential equation", jax_ude_lotka_volterra_rk4
    )
    PIPELINES += [_ude, buggy(_ude, "no_zero_grad")]

if installed("jax", "flax", "optax"):
    _cloud = healthy(
        "flax_cloud_mask_unet_lamb_dice", "Flax Linen cloud-mask U-Net", flax_cloud_mask_unet_lamb
    )
    _solar = healthy(
        "nnx_solar_irradiance_nowcast_yogi", "Flax NNX irradiance nowcaster", nnx_solar_irradiance_yogi
    )
    PIPELINES += [_cloud, _solar, buggy(_cloud, "inputs_x255"), buggy(_solar, "deep_sigmoid")]

if installed("xgboost"):
    PIPELINES += [
        healthy(
            "xgb_multi_softmax_dissolved_gas_faults", "XGBoost dissolved-gas fault diagnosis",
            xgb_multi_softmax_dissolved_gas_faults,
        )
    ]  # fmt: skip

if installed("lightning"):
    PIPELINES += [
        healthy(
            "lightning_distmult_knowledge_graph_adagrad", "Lightning DistMult knowledge graph",
            lit_distmult_knowledge_graph_adagrad,
        )
    ]  # fmt: skip

if installed("transformers"):
    PIPELINES += [
        healthy(
            "hf_esm_protein_property_regression",
            "HF Trainer ESM protein regression",
            hf_esm_protein_hydropathy_regression,
        )
    ]
