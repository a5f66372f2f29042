"""The twenty-seventh blind held-out set (issue 26), part AH: trainings of kinds the corpus did not
have yet, from learned compression, quantum many-body physics, stereo vision, implicit shape
models, imitation learning, test-time adaptation, uncertainty estimation, time-series language
models and in-context learning, each written in the shape of the public code its practitioners
train it with (its loop, loss, optimizer, schedule and evaluation habits), shrunk to a tiny
model on data generated in-process, fixed seeds, one CPU thread. Plain PyTorch loops with the
README's two lines (`register_loss` where the script has one loss module) and one training each
through Lightning, the Hugging Face `Trainer` and Keras 3 with their one callback.

Plain PyTorch: CompressAI's `examples/train.py` with the `bmshj2018-hyperprior` scale
hyperprior (GDN analysis and synthesis transforms, a hyper-analysis of `|y|`, the factorized
entropy bottleneck on `z` with its `quantiles` fitted by an auxiliary loss on a second Adam,
additive uniform noise in training and rounding in evaluation, the Gaussian conditional on `y`
with its scale and likelihood lower bounds, the rate-distortion loss `lmbda * 255^2 * MSE + bpp`,
clipping, `ReduceLROnPlateau` on the test loss); variational Monte Carlo of two electrons in a
2-D harmonic trap with a neural Jastrow factor (Metropolis-Hastings walkers, the local energy's
Laplacian by autograd, the energy gradient through the `(E_L - <E_L>) log psi` surrogate with
FermiNet's clipping; the losses are the energy estimates, falling towards the exact 3 hartree
with spikes); timbmg's Sentence-VAE (a GRU encoder and decoder, logistic KL annealing, word
dropout, the summed token cross-entropy; the loss flattens as the KL weight grows); NRI's neural
relational inference on its springs simulation (an MLP encoder's Gumbel-softmax edge samples, an
MLP decoder unrolled 10 steps, the Gaussian NLL with variance 5e-5 (from 10^5 down to about 1500), the KL to a
uniform edge prior, BatchNorm in the encoder, `train()` running the training and then the
validation batches); Deep Graph Infomax (a PReLU GCN, row-shuffled features as the corruption, a
bilinear discriminator against the sigmoid of the mean, `BCEWithLogitsLoss`, early stopping on
the training loss with patience 20, a linear probe); GAIL with PPO as pytorch-a2c-ppo-acktr-gail
runs it on a hand-written cart-pole (a discriminator with a gradient penalty, its reward
replacing the environment's, GAE; the losses are the discriminator's, hovering near 2 log 2 as
the policy reaches the expert's 200 steps); PSMNet's `basic` stereo model (a concatenation cost
volume, 3-D convolutions, the soft argmin, smooth L1 on the valid disparities, images and
disparities read by file name from KITTI-style folders); Tent's test-time adaptation (a BatchNorm
CNN trained on clean glyphs before the hook, then only its BatchNorm affine parameters adapted
online by entropy minimization over six corruptions with a reset before each; the losses are
entropies, falling within each corruption); Chronos's training recipe (KernelSynth Gaussian-
process series with TSMixup, the mean-scale uniform-bin tokenizer, a small causal transformer's
cross-entropy on the future tokens, AdamW with a linear decay); rosinality's StyleGAN2 (a mapping
network, modulated and demodulated convolutions with noise, skip ToRGBs, a residual
discriminator with minibatch standard deviation, the non-saturating logistic losses, the lazy R1
penalty every 16 steps, the lazy-regularization Adam ratios, `requires_grad` toggled between the
two steps, `g_ema`); DeepSDF's auto-decoder (a latent code per shape in an `nn.Embedding`
trained with a weight-normalized ReLU decoder under SAL's geometric initialization, the clamped
L1, the code regularization, separate learning rates and a step schedule); DUQ on two moons (RBF
kernels to class centroids kept as moving averages outside the gradient, the BCE on kernel
values plus a two-sided input-gradient penalty, SGD); a prior-data fitted network in the way of
TabPFN (a fresh batch of synthetic classification datasets every step, training points with
their labels and test points attended through a mask, the cross-entropy at the test points,
warm-up and cosine); RepVGG's three-branch blocks (3x3, 1x1 and identity BatchNorm branches,
label smoothing, SGD with warm-up and cosine), folded into plain 3x3 convolutions after
training and checked against the trained model.

Through tools: Lightning (`mldbg.lightning.DebuggerCallback`): Autoformer as Time-Series-
Library trains it on an ETTh1-like table (series decomposition, the FFT auto-correlation with
top-k time-delay aggregation, `lradj type1` as a per-epoch `StepLR`, `EarlyStopping` and
`ModelCheckpoint` on the validation loss, `trainer.test(ckpt_path="best")`). Hugging Face
`Trainer` (`mldbg.transformers.DebuggerCallback`): VideoMAE pre-training of a tiny random
`VideoMAEForPreTraining` on clips of moving shapes (a collator drawing tube masks,
`remove_unused_columns=False`, the normalized-pixel loss on the masked tubes, a cosine schedule;
the loss starts near 1 and falls slowly). Keras 3 (`mldbg.keras.Hook`): keras.io's denoising
diffusion implicit models (a `keras.Model` with its own `compile`, `train_step` under a
`tf.GradientTape` and `test_step` on the EMA network, a residual U-Net on the noise variance's
sinusoidal embedding, the mean absolute error of the noise tracked as `n_loss`, no `loss` key).

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: Tent's config `LR: 1e-1` typed for 1e-3, which drives the entropy to near zero as the
predictions grow overconfident (lr_x100); DGI's loop rewritten without `optimiser.zero_grad()`
(no_zero_grad); PSMNet's disparity maps listed from their own folder, whose directory listing
comes in another order than the images' (shuffled_labels); RepVGG's uint8 glyphs cast with
`.float()` where `ToTensor` divided by 255, before the `Normalize` (inputs_x255);
Sentence-VAE's decoder returning softmax probabilities "so inference can sample from them" to the
`CrossEntropyLoss` (softmax_before_ce); DeepSDF's geometric initialization with the last layer's
bias line dedented out of its `if`, so every ReLU layer starts with a bias of -0.4
(dead_relu_init); DUQ's feature extractor made "deeper" as eight sigmoid layers (deep_sigmoid);
StyleGAN2's generator step with its two `requires_grad` toggles pasted from the discriminator
step, so the generator stays frozen while its optimizer holds it (frozen_by_mistake); the scale
hyperprior's Gaussian conditional written by hand from the paper's formula without CompressAI's
lower bounds, so the hyper-synthesis' ReLU scales of 0 give bins of probability 0 and the rate
`log(0)` (log_zero_nan); NRI's `encoder.train(); decoder.train()` set once before the epochs
while `train()` still puts both in eval mode for its validation batches (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND26`.
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
from torch.utils.data import DataLoader, TensorDataset

from mldbg.torch import Hook

from . import BLIND26, buggy, healthy, installed
from .blind_af import _CartPole  # the classic cart-pole, numpy only
from .blind_ag import _rgb_glyphs  # uint8 RGB glyphs of k classes

SPLIT = BLIND26

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 2601)


# ============================================================================= CompressAI: scale-hyperprior image codec


def _photos(g: torch.Generator, n: int, size: int = 48) -> torch.Tensor:
    """`n` uint8 RGB "photos" (n, size, size, 3): a smooth two-colour sky-to-ground gradient, 3 to
    6 rectangles and ellipses of flat or striped colour, a soft shadow, and sensor noise."""
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    out = torch.zeros(n, size, size, 3)
    for b in range(n):
        top, bottom = torch.rand(3, generator=g), torch.rand(3, generator=g)
        img = top + (bottom - top) * yy[..., None]
        for _ in range(int(torch.randint(3, 7, (1,), generator=g))):
            cx, cy, w, h = torch.rand(4, generator=g).tolist()
            w, h = 0.1 + 0.3 * w, 0.1 + 0.3 * h
            if torch.rand(1, generator=g) < 0.5:
                inside = ((xx - cx).abs() < w) & ((yy - cy).abs() < h)
            else:
                inside = ((xx - cx) / w) ** 2 + ((yy - cy) / h) ** 2 < 1
            colour = torch.rand(3, generator=g)
            if torch.rand(1, generator=g) < 0.3:
                freq = 8 + 24 * float(torch.rand(1, generator=g))
                colour = colour * (0.75 + 0.25 * torch.sin(freq * (xx + yy)))[..., None]
                img = torch.where(inside[..., None], colour, img)
            else:
                img = torch.where(inside[..., None], colour.expand(size, size, 3), img)
            img = (
                img
                * (1 - 0.15 * torch.exp(-(((xx - cx - 0.05) / w) ** 2 + ((yy - cy - 0.05) / h) ** 2)))[
                    ..., None
                ]
            )
        out[b] = img + 0.015 * torch.randn(size, size, 3, generator=g)
    return (out.clamp(0, 1) * 255).round().to(torch.uint8)


class _NonNegativeParametrizer(nn.Module):
    """CompressAI's `NonNegativeParametrizer`: a parameter stored as its square root plus a
    pedestal, bounded below, so it stays non-negative with a usable gradient near zero."""

    def __init__(self, minimum: float = 0.0, reparam_offset: float = 2**-18) -> None:
        super().__init__()
        self.pedestal = reparam_offset**2
        self.bound = (minimum + self.pedestal) ** 0.5

    def init(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(torch.clamp(x + self.pedestal, min=self.pedestal))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, min=self.bound) ** 2 - self.pedestal


class _GDN(nn.Module):
    """Generalized divisive normalization (Balle et al. 2016), CompressAI's `GDN`:
    `y = x / sqrt(beta + conv(x^2, gamma))`, its inverse for the synthesis transform."""

    def __init__(
        self, in_channels: int, inverse: bool = False, beta_min: float = 1e-6, gamma_init: float = 0.1
    ):
        super().__init__()
        self.inverse = inverse
        self.beta_reparam = _NonNegativeParametrizer(minimum=beta_min)
        self.beta = nn.Parameter(self.beta_reparam.init(torch.ones(in_channels)))
        self.gamma_reparam = _NonNegativeParametrizer()
        self.gamma = nn.Parameter(self.gamma_reparam.init(gamma_init * torch.eye(in_channels)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = x.size(1)
        beta = self.beta_reparam(self.beta)
        gamma = self.gamma_reparam(self.gamma).reshape(c, c, 1, 1)
        norm = F.conv2d(x**2, gamma, beta)
        return x * (torch.sqrt(norm) if self.inverse else torch.rsqrt(norm))


class _EntropyBottleneck(nn.Module):
    """CompressAI's `EntropyBottleneck` (Balle et al. 2018, the factorized prior): a learned
    cumulative density per channel (softplus matrices, biases and tanh factors over filters
    (3, 3, 3)), additive uniform noise in training and rounding around the medians in
    evaluation, the likelihood of each latent's quantization bin, bounded below by 1e-9; the
    `quantiles` are fitted apart by the auxiliary loss."""

    def __init__(
        self,
        channels: int,
        tail_mass: float = 1e-9,
        init_scale: float = 10.0,
        filters: tuple[int, ...] = (3, 3, 3),
    ) -> None:
        super().__init__()
        self.filters = filters
        dims = (1, *filters, 1)
        scale = init_scale ** (1 / (len(filters) + 1))
        self.matrices, self.biases, self.factors = nn.ParameterList(), nn.ParameterList(), nn.ParameterList()
        for i in range(len(filters) + 1):
            init = math.log(math.expm1(1 / scale / dims[i + 1]))
            self.matrices.append(nn.Parameter(torch.full((channels, dims[i + 1], dims[i]), init)))
            self.biases.append(nn.Parameter(torch.rand(channels, dims[i + 1], 1) - 0.5))
            if i < len(filters):
                self.factors.append(nn.Parameter(torch.zeros(channels, dims[i + 1], 1)))
        self.quantiles = nn.Parameter(torch.tensor([-init_scale, 0.0, init_scale]).repeat(channels, 1, 1))
        target = math.log(2 / tail_mass - 1)
        self.register_buffer("target", torch.tensor([-target, 0.0, target]))

    def _logits_cumulative(self, inputs: torch.Tensor, stop_gradient: bool) -> torch.Tensor:
        logits = inputs
        for i in range(len(self.filters) + 1):
            matrix, bias = self.matrices[i], self.biases[i]
            if stop_gradient:
                matrix, bias = matrix.detach(), bias.detach()
            logits = torch.matmul(F.softplus(matrix), logits) + bias
            if i < len(self.factors):
                factor = self.factors[i].detach() if stop_gradient else self.factors[i]
                logits = logits + torch.tanh(factor) * torch.tanh(logits)
        return logits

    def loss(self) -> torch.Tensor:
        logits = self._logits_cumulative(self.quantiles, stop_gradient=True)
        return torch.abs(logits - self.target).sum()

    def _likelihood(self, inputs: torch.Tensor) -> torch.Tensor:
        lower = self._logits_cumulative(inputs - 0.5, stop_gradient=False)
        upper = self._logits_cumulative(inputs + 0.5, stop_gradient=False)
        sign = -torch.sign(lower + upper).detach()
        likelihood = torch.abs(torch.sigmoid(sign * upper) - torch.sigmoid(sign * lower))
        return torch.clamp(likelihood, min=1e-9)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = x.size(1)
        values = x.transpose(0, 1).reshape(c, 1, -1)
        if self.training:
            outputs = values + torch.empty_like(values).uniform_(-0.5, 0.5)
        else:
            medians = self.quantiles[:, :, 1:2].detach()
            outputs = torch.round(values - medians) + medians
        likelihood = self._likelihood(outputs)
        shape = (c, x.size(0), *x.shape[2:])
        return (
            outputs.reshape(shape).transpose(0, 1).contiguous(),
            likelihood.reshape(shape).transpose(0, 1).contiguous(),
        )


class _GaussianConditional(nn.Module):
    """CompressAI's `GaussianConditional` for the scale hyperprior: the likelihood of each
    latent's quantization bin under a zero-mean Gaussian whose scale the hyper-synthesis
    predicts, the scales bounded below at 0.11 and the likelihood at 1e-9."""

    def __init__(self, scale_bound: float = 0.11, stable: bool = True) -> None:
        super().__init__()
        self.scale_bound, self.stable = scale_bound, stable

    @staticmethod
    def _standardized_cumulative(x: torch.Tensor) -> torch.Tensor:
        return 0.5 * torch.erfc(-(2**-0.5) * x)

    def forward(self, x: torch.Tensor, scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        outputs = x + torch.empty_like(x).uniform_(-0.5, 0.5) if self.training else torch.round(x)
        values = torch.abs(outputs)
        if self.stable:
            scales = torch.clamp(scales, min=self.scale_bound)
        upper = self._standardized_cumulative((0.5 - values) / scales)
        lower = self._standardized_cumulative((-0.5 - values) / scales)
        likelihood = upper - lower
        if self.stable:
            likelihood = torch.clamp(likelihood, min=1e-9)
        return outputs, likelihood


class _ScaleHyperprior(nn.Module):
    """CompressAI's `ScaleHyperprior` (`bmshj2018-hyperprior`, Balle et al. 2018): an analysis
    transform of 5x5 stride-2 convolutions with GDN, a hyper-analysis of `|y|` (ReLU
    convolutions down to the side information `z`), the factorized entropy bottleneck on `z`, a
    hyper-synthesis ending in a ReLU that predicts the scales of the Gaussian conditional on
    `y`, a synthesis transform of transposed convolutions with inverse GDN."""

    def __init__(self, n: int = 32, m: int = 48, stable: bool = True) -> None:
        super().__init__()

        def conv(cin: int, cout: int, k: int = 5, s: int = 2) -> nn.Conv2d:
            return nn.Conv2d(cin, cout, k, stride=s, padding=k // 2)

        def deconv(cin: int, cout: int) -> nn.ConvTranspose2d:
            return nn.ConvTranspose2d(cin, cout, 5, stride=2, padding=2, output_padding=1)

        self.entropy_bottleneck = _EntropyBottleneck(n)
        self.g_a = nn.Sequential(conv(3, n), _GDN(n), conv(n, n), _GDN(n), conv(n, m))
        self.g_s = nn.Sequential(
            deconv(m, n), _GDN(n, inverse=True), deconv(n, n), _GDN(n, inverse=True), deconv(n, 3)
        )
        self.h_a = nn.Sequential(
            conv(m, n, 3, 1), nn.ReLU(inplace=True), conv(n, n), nn.ReLU(inplace=True), conv(n, n)
        )
        self.h_s = nn.Sequential(
            deconv(n, n),
            nn.ReLU(inplace=True),
            deconv(n, n),
            nn.ReLU(inplace=True),
            conv(n, m, 3, 1),
            nn.ReLU(inplace=True),
        )
        # bug (stable=False): the user's own Gaussian conditional, written from the paper's
        # formula, without CompressAI's lower bounds on the scales and on the likelihoods
        self.gaussian_conditional = _GaussianConditional(stable=stable)

    def forward(self, x: torch.Tensor) -> dict[str, Any]:
        y = self.g_a(x)
        z = self.h_a(torch.abs(y))
        z_hat, z_likelihoods = self.entropy_bottleneck(z)
        scales_hat = self.h_s(z_hat)
        y_hat, y_likelihoods = self.gaussian_conditional(y, scales_hat)
        return {"x_hat": self.g_s(y_hat), "likelihoods": {"y": y_likelihoods, "z": z_likelihoods}}

    def aux_loss(self) -> torch.Tensor:
        return self.entropy_bottleneck.loss()


class _RateDistortionLoss(nn.Module):
    """CompressAI's `RateDistortionLoss`: bits per pixel of the latents plus `lmbda * 255^2`
    times the MSE of the reconstruction."""

    def __init__(self, lmbda: float = 1e-2) -> None:
        super().__init__()
        self.mse = nn.MSELoss()
        self.lmbda = lmbda

    def forward(self, output: dict[str, Any], target: torch.Tensor) -> dict[str, torch.Tensor]:
        n, _, h, w = target.size()
        num_pixels = n * h * w
        out = {
            "bpp_loss": sum(
                torch.log(lk).sum() / (-math.log(2) * num_pixels) for lk in output["likelihoods"].values()
            ),
            "mse_loss": self.mse(output["x_hat"], target),
        }
        out["loss"] = self.lmbda * 255**2 * out["mse_loss"] + out["bpp_loss"]
        return out


def compressai_scale_hyperprior(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """CompressAI's `examples/train.py` (Balle et al. 2018, `bmshj2018-hyperprior`) on small
    synthetic photos: random 32x32 crops through `ToTensor` for training, centre crops for the
    test set, `ScaleHyperprior(N=32, M=48)` shrunk to three stages, `RateDistortionLoss(lmbda=1e-2)`
    (the bits per pixel of `y` and `z` plus `lmbda * 255^2` times the MSE), `configure_optimizers`
    splitting the `quantiles` into an auxiliary Adam at 1e-3 from the main Adam (1e-4 in the
    script, 1e-3 here for a run of six epochs), batches of 16, `clip_max_norm` 1.0, the auxiliary
    loss backpropagated after each main step, `test_epoch` in `model.eval()` (rounded latents)
    each epoch and `ReduceLROnPlateau` on its loss."""
    g = _seed(seed)
    photos = _photos(g, 464)
    train_imgs, test_imgs = photos[:384], photos[384:]

    def to_tensor(img: torch.Tensor) -> torch.Tensor:
        return img.permute(0, 3, 1, 2).float() / 255.0

    net = _ScaleHyperprior(stable=bug != "log_zero_nan")
    criterion = _RateDistortionLoss(lmbda=1e-2)
    parameters = [p for n, p in net.named_parameters() if not n.endswith(".quantiles")]
    aux_parameters = [p for n, p in net.named_parameters() if n.endswith(".quantiles")]
    optimizer = torch.optim.Adam(parameters, lr=1e-3)
    aux_optimizer = torch.optim.Adam(aux_parameters, lr=1e-3)
    lr_scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, "min")
    hook = Hook(path)
    hook.register_module(net)
    test_x = to_tensor(test_imgs[:, 8:40, 8:40])
    losses: list[float] = []
    for epoch in range(epochs):
        net.train()
        perm = torch.randperm(len(train_imgs), generator=g)
        for i in range(0, len(perm), 16):
            crops = []
            for k in perm[i : i + 16].tolist():
                oy, ox = torch.randint(0, 17, (2,), generator=g).tolist()
                crops.append(train_imgs[k, oy : oy + 32, ox : ox + 32])
            d = to_tensor(torch.stack(crops))
            optimizer.zero_grad()
            aux_optimizer.zero_grad()
            out_net = net(d)
            out_criterion = criterion(out_net, d)
            out_criterion["loss"].backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            optimizer.step()
            aux_loss = net.aux_loss()
            aux_loss.backward()
            aux_optimizer.step()
            losses.append(out_criterion["loss"].item())
        net.eval()
        with torch.no_grad():
            out = criterion(net(test_x), test_x)
        lr_scheduler.step(out["loss"].item())
        psnr = 10 * math.log10(1 / max(out["mse_loss"].item(), 1e-12))
        print(f"Train epoch {epoch}: Loss {np.mean(losses[-30:]):.3f} | Test: Loss {out['loss'].item():.3f} | "
              f"MSE {out['mse_loss'].item():.5f} (PSNR {psnr:.2f}) | Bpp {out['bpp_loss'].item():.3f} | "
              f"Aux {aux_loss.item():.1f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= variational Monte Carlo: a quantum dot


class _PairWavefunction(nn.Module):
    """A neural-network wavefunction for two opposite-spin electrons in a 2-D harmonic trap:
    `log psi = -(r1^2 + r2^2) / 2 + f(r1, r2, r12) + f(r2, r1, r12)`, the Gaussian envelope of
    the trap times the exponential of an MLP (tanh, 32 units) symmetrized over the exchange of
    the two electrons, so the spatial part is symmetric as a singlet's is."""

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.jastrow = nn.Sequential(
            nn.Linear(5, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r1, r2 = x[:, :2], x[:, 2:]
        r12 = (r1 - r2).pow(2).sum(1, keepdim=True).add(1e-12).sqrt()
        f12 = self.jastrow(torch.cat([r1, r2, r12], 1))
        f21 = self.jastrow(torch.cat([r2, r1, r12], 1))
        return -0.5 * x.pow(2).sum(1) + (f12 + f21).squeeze(1)


def vmc_quantum_dot_neural_wavefunction(path: str, iterations: int = 300, seed: int = 0) -> list[float]:
    """Variational Monte Carlo of two electrons in a 2-D isotropic harmonic trap (omega 1, a
    Coulomb repulsion; the exact ground-state energy is 3 hartree) with a neural-network
    wavefunction, as PyTorch VMC codes in the NetKet / FermiNet style write it: 512 walkers
    sampled from `|psi|^2` by Metropolis-Hastings (10 Gaussian moves an iteration, the step
    size adapted towards half acceptance, 200 burn-in moves), the local energy
    `-(lap log psi + |grad log psi|^2) / 2 + V` by autograd (a Laplacian coordinate by
    coordinate), the gradient of the energy through the surrogate `2 mean((E_L - mean E_L) log psi)`
    with the local energies clipped at five mean absolute deviations around their median as
    FermiNet clips them, Adam 1e-3. The returned losses are the energy estimates (the unclipped
    means), falling towards 3 with spikes where a walker comes close to the other electron."""
    g = _seed(seed)
    psi = _PairWavefunction()
    optimizer = torch.optim.Adam(psi.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(psi)
    walkers = torch.randn(512, 4, generator=g)
    step_size = 0.5

    def metropolis(x: torch.Tensor, n_steps: int, step: float) -> tuple[torch.Tensor, float]:
        with torch.no_grad():
            logp = 2 * psi(x)
            accepted = 0.0
            for _ in range(n_steps):
                proposal = x + step * torch.randn(x.shape, generator=g)
                logp_new = 2 * psi(proposal)
                accept = torch.rand(len(x), generator=g).log() < logp_new - logp
                x = torch.where(accept[:, None], proposal, x)
                logp = torch.where(accept, logp_new, logp)
                accepted += accept.float().mean().item()
        return x, accepted / n_steps

    def local_energy(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = x.clone().requires_grad_(True)
        log_psi = psi(x)
        grad = torch.autograd.grad(log_psi.sum(), x, create_graph=True)[0]
        lap = torch.zeros(len(x))
        for k in range(x.shape[1]):
            lap = lap + torch.autograd.grad(grad[:, k].sum(), x, retain_graph=True)[0][:, k]
        r12 = (x[:, :2] - x[:, 2:]).norm(dim=1)
        potential = 0.5 * x.pow(2).sum(1) + 1.0 / r12
        e_loc = -0.5 * (lap + grad.pow(2).sum(1)) + potential
        return e_loc.detach(), log_psi

    walkers, _ = metropolis(walkers, 200, step_size)
    losses: list[float] = []
    for it in range(iterations):
        walkers, acceptance = metropolis(walkers, 10, step_size)
        step_size *= 1.1 if acceptance > 0.55 else (0.9 if acceptance < 0.45 else 1.0)
        e_loc, log_psi = local_energy(walkers)
        median = e_loc.median()
        spread = (e_loc - median).abs().mean()
        e_clip = e_loc.clamp(median - 5 * spread, median + 5 * spread)
        loss = 2 * ((e_clip - e_clip.mean()) * log_psi).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(e_loc.mean().item())
        if it % 50 == 49:
            print(f"iter {it + 1} E = {np.mean(losses[-50:]):.4f} +- {e_loc.std().item() / math.sqrt(len(e_loc)):.4f} "
                  f"var {e_loc.var().item():.4f} acceptance {acceptance:.2f} step {step_size:.2f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= Sentence-VAE: KL annealing, word dropout


def _grammar_sentences(g: torch.Generator, n: int) -> tuple[list[list[str]], list[str]]:
    """`n` sentences of a small English-like grammar (noun phrases with optional adjectives and
    prepositional phrases, transitive and intransitive verbs, adverbs, conjunctions), 3 to
    about 20 words, with a topic (animals, kitchen, city) that biases the nouns and verbs of a
    whole sentence, so a sentence-level latent has something to carry."""
    topics = {
        "animals": (["dog", "cat", "bird", "horse", "fox", "mouse", "cow", "fish"],
                    ["chases", "sees", "bites", "follows", "hears"], ["sleeps", "runs", "barks", "sings"]),
        "kitchen": (["cook", "knife", "pot", "bread", "soup", "table", "oven", "cup"],
                    ["cuts", "fills", "bakes", "cleans", "holds"], ["boils", "cools", "breaks", "shines"]),
        "city": (["car", "bus", "street", "tower", "driver", "shop", "bridge", "train"],
                 ["passes", "blocks", "crosses", "leaves", "reaches"], ["stops", "waits", "opens", "moves"]),
    }  # fmt: skip
    dets, adjs = ["the", "a", "every", "some"], ["big", "small", "old", "red", "quiet", "fast", "new", "dark"]
    preps, advs = ["near", "under", "behind", "with"], ["slowly", "again", "today", "quietly"]
    names = list(topics)

    def pick(words: list[str]) -> str:
        return words[int(torch.randint(0, len(words), (1,), generator=g))]

    def noun_phrase(nouns: list[str], depth: int = 0) -> list[str]:
        words = [pick(dets)]
        if torch.rand(1, generator=g) < 0.5:
            words.append(pick(adjs))
        words.append(pick(nouns))
        if depth == 0 and torch.rand(1, generator=g) < 0.3:
            words += [pick(preps), *noun_phrase(nouns, 1)]
        return words

    def clause(topic: str) -> list[str]:
        nouns, trans, intrans = topics[topic]
        if torch.rand(1, generator=g) < 0.6:
            words = noun_phrase(nouns) + [pick(trans)] + noun_phrase(nouns)
        else:
            words = noun_phrase(nouns) + [pick(intrans)]
        if torch.rand(1, generator=g) < 0.3:
            words.append(pick(advs))
        return words

    sentences = []
    for _ in range(n):
        topic = pick(names)
        words = clause(topic)
        if torch.rand(1, generator=g) < 0.25:
            words += ["and", *clause(topic)]
        sentences.append(words + ["."])
    vocab = sorted(
        {w for t in topics.values() for ws in t for w in ws} | set(dets + adjs + preps + advs + ["and", "."])
    )
    return sentences, vocab


class _SentenceVAE(nn.Module):
    """timbmg/Sentence-VAE's `SentenceVAE` (Bowman et al. 2016): an embedding with dropout, a GRU
    encoder whose last hidden state gives the mean and log-variance of a 16-D latent, the
    latent mapped to the decoder GRU's initial state, word dropout on the decoder's inputs
    (tokens replaced by `<unk>`), the decoder's outputs projected to the vocabulary."""

    def __init__(
        self, vocab_size: int, sos_idx: int, pad_idx: int, unk_idx: int, word_dropout_rate: float = 0.25,
        probs_out: bool = False,
    ) -> None:  # fmt: skip
        super().__init__()
        self.sos_idx, self.pad_idx, self.unk_idx = sos_idx, pad_idx, unk_idx
        self.word_dropout_rate, self.probs_out = word_dropout_rate, probs_out
        self.embedding = nn.Embedding(vocab_size, 64)
        self.embedding_dropout = nn.Dropout(p=0.5)
        self.encoder_rnn = nn.GRU(64, 96, batch_first=True)
        self.decoder_rnn = nn.GRU(64, 96, batch_first=True)
        self.hidden2mean = nn.Linear(96, 16)
        self.hidden2logv = nn.Linear(96, 16)
        self.latent2hidden = nn.Linear(16, 96)
        self.outputs2vocab = nn.Linear(96, vocab_size)

    def forward(self, input_sequence: torch.Tensor, length: torch.Tensor) -> tuple[torch.Tensor, ...]:
        batch_size = input_sequence.size(0)
        input_embedding = self.embedding(input_sequence)
        packed_input = nn.utils.rnn.pack_padded_sequence(
            input_embedding, length, batch_first=True, enforce_sorted=False
        )
        _, hidden = self.encoder_rnn(packed_input)
        hidden = hidden.squeeze(0)
        mean = self.hidden2mean(hidden)
        logv = self.hidden2logv(hidden)
        std = torch.exp(0.5 * logv)
        z = torch.randn([batch_size, 16]) * std + mean
        hidden = self.latent2hidden(z).unsqueeze(0)
        if self.word_dropout_rate > 0 and self.training:
            prob = torch.rand(input_sequence.size())
            prob[(input_sequence.data - self.sos_idx) * (input_sequence.data - self.pad_idx) == 0] = 1
            decoder_input_sequence = input_sequence.clone()
            decoder_input_sequence[prob < self.word_dropout_rate] = self.unk_idx
            input_embedding = self.embedding(decoder_input_sequence)
        input_embedding = self.embedding_dropout(input_embedding)
        packed_input = nn.utils.rnn.pack_padded_sequence(
            input_embedding, length, batch_first=True, enforce_sorted=False
        )
        outputs, _ = self.decoder_rnn(packed_input, hidden)
        padded_outputs = nn.utils.rnn.pad_packed_sequence(
            outputs, batch_first=True, total_length=input_sequence.size(1)
        )[0]
        logits = self.outputs2vocab(padded_outputs)
        if self.probs_out:
            # bug: the decoder returns probabilities "so `inference` can sample from them", while
            # the loss below still takes them for scores
            return F.softmax(logits, dim=-1), mean, logv, z
        return logits, mean, logv, z


def sentence_vae_kl_annealing(
    path: str, epochs: int = 3, seed: int = 0, bug: str | None = None
) -> list[float]:
    """timbmg/Sentence-VAE's `train.py` on sentences of a small grammar: `<sos>` and `<eos>`
    added, batches of 32 padded with `<pad>`, the summed token cross-entropy ignoring the
    padding plus the KL divergence to the standard normal weighted by the logistic annealing
    `1 / (1 + exp(-k (step - x0)))` (k 0.025, x0 110 for this short run), divided by the batch
    size, Adam 1e-3, a validation split each epoch in `model.eval()` with its NLL and KL. The
    loss falls, then flattens or rises a little as the KL weight grows."""
    g = _seed(seed)
    sentences, words = _grammar_sentences(g, 2200)
    itos = ["<pad>", "<unk>", "<sos>", "<eos>", *words]
    stoi = {w: i for i, w in enumerate(itos)}
    pad_idx, unk_idx, sos_idx, eos_idx = 0, 1, 2, 3

    def encode(batch: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        length = torch.tensor([len(s) + 1 for s in batch])
        inputs = torch.full((len(batch), int(length.max())), pad_idx)
        targets = torch.full((len(batch), int(length.max())), pad_idx)
        for i, s in enumerate(batch):
            ids = [stoi[w] for w in s]
            inputs[i, : len(ids) + 1] = torch.tensor([sos_idx, *ids])
            targets[i, : len(ids) + 1] = torch.tensor([*ids, eos_idx])
        return inputs, targets, length

    train, valid = sentences[:2000], sentences[2000:]
    model = _SentenceVAE(len(itos), sos_idx, pad_idx, unk_idx, probs_out=bug == "softmax_before_ce")
    nll_loss = nn.CrossEntropyLoss(ignore_index=pad_idx, reduction="sum")
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(nll_loss)
    k, x0 = 0.025, 110

    def loss_fn(logp: torch.Tensor, target: torch.Tensor, mean: torch.Tensor, logv: torch.Tensor, step: int):
        nll = nll_loss(logp.reshape(-1, logp.size(2)), target.reshape(-1))
        kl = -0.5 * torch.sum(1 + logv - mean.pow(2) - logv.exp())
        return nll, kl, float(1 / (1 + np.exp(-k * (step - x0))))

    losses: list[float] = []
    step = 0
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(train), generator=g).tolist()
        for i in range(0, len(order), 32):
            inputs, targets, length = encode([train[j] for j in order[i : i + 32]])
            logp, mean, logv, _ = model(inputs, length)
            nll, kl, kl_weight = loss_fn(logp, targets, mean, logv, step)
            loss = (nll + kl_weight * kl) / inputs.size(0)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            inputs, targets, length = encode(valid)
            logp, mean, logv, _ = model(inputs, length)
            nll, kl, kl_weight = loss_fn(logp, targets, mean, logv, step)
        print(f"Epoch {epoch:02d}/{epochs}, train ELBO {np.mean(losses[-63:]):9.4f}, valid ELBO "
              f"{(nll + kl_weight * kl).item() / len(valid):9.4f}, NLL {nll.item() / len(valid):9.4f}, "
              f"KL {kl.item() / len(valid):7.4f}, KL weight {kl_weight:.3f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= NRI: neural relational inference on springs


def _springs(
    rng: np.random.Generator, n_sims: int, n_balls: int = 5, timesteps: int = 20, sample_freq: int = 100
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NRI's `SpringSim` (`data/synthetic_sim.py`), vectorized over simulations: five balls in a
    box of size 5 with elastic walls, each pair joined by a spring with probability 1/2
    (interaction strength 0.1), random initial positions (std 0.5) and velocities (norm 0.5),
    leapfrog steps of 0.001 sampled every 100; returns positions and velocities (sims, T, 2,
    balls) and the symmetric edge matrices."""
    box, dt, strength = 5.0, 0.001, 0.1
    edges = rng.choice([0.0, 1.0], size=(n_sims, n_balls, n_balls))
    edges = np.tril(edges) + np.transpose(np.tril(edges, -1), (0, 2, 1))
    edges[:, np.arange(n_balls), np.arange(n_balls)] = 0
    loc = rng.standard_normal((n_sims, 2, n_balls)) * 0.5
    vel = rng.standard_normal((n_sims, 2, n_balls))
    vel = vel * 0.5 / np.sqrt((vel**2).sum(1, keepdims=True))
    locs, vels = np.zeros((n_sims, timesteps, 2, n_balls)), np.zeros((n_sims, timesteps, 2, n_balls))

    def force(x: np.ndarray) -> np.ndarray:
        diff = x[:, :, :, None] - x[:, :, None, :]  # (sims, 2, i, j): x_i - x_j
        return -strength * (edges[:, None] * diff).sum(3)

    def clamp(x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        over, under = x > box, x < -box
        x = np.where(over, 2 * box - x, np.where(under, -2 * box - x, x))
        v = np.where(over | under, -np.abs(v) * np.sign(x), v)
        return x, v

    f = force(loc)
    for i in range(timesteps * sample_freq):
        if i % sample_freq == 0:
            locs[:, i // sample_freq], vels[:, i // sample_freq] = loc, vel
        vel = vel + dt * f
        loc = loc + dt * vel
        loc, vel = clamp(loc, vel)
        f = force(loc)
    return locs, vels, edges


class _NRIMLP(nn.Module):
    """NRI's `MLP` block: two ELU layers and batch norm, Xavier-normal weights, biases of 0.1."""

    def __init__(self, n_in: int, n_hid: int, n_out: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(n_in, n_hid), nn.Linear(n_hid, n_out)
        self.bn = nn.BatchNorm1d(n_out)
        for m in (self.fc1, self.fc2):
            nn.init.xavier_normal_(m.weight)
            m.bias.data.fill_(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.elu(self.fc2(F.elu(self.fc1(x))))
        return self.bn(x.reshape(-1, x.size(-1))).reshape(x.shape)


class _NRIEncoder(nn.Module):
    """NRI's `MLPEncoder` with the factor graph: each ball's whole trajectory embedded, then
    node-to-edge, edge-to-node and node-to-edge passes with a skip connection, and the logits of
    the two edge types."""

    def __init__(self, n_in: int, n_hid: int, n_out: int) -> None:
        super().__init__()
        self.mlp1, self.mlp2 = _NRIMLP(n_in, n_hid, n_hid), _NRIMLP(2 * n_hid, n_hid, n_hid)
        self.mlp3, self.mlp4 = _NRIMLP(n_hid, n_hid, n_hid), _NRIMLP(3 * n_hid, n_hid, n_hid)
        self.fc_out = nn.Linear(n_hid, n_out)
        nn.init.xavier_normal_(self.fc_out.weight)
        self.fc_out.bias.data.fill_(0.1)

    def forward(self, inputs: torch.Tensor, rel_rec: torch.Tensor, rel_send: torch.Tensor) -> torch.Tensor:
        x = self.mlp1(inputs.reshape(inputs.size(0), inputs.size(1), -1))
        x = self.mlp2(torch.cat([rel_send @ x, rel_rec @ x], 2))
        x_skip = x
        x = self.mlp3(rel_rec.t() @ x / x.size(1))
        x = self.mlp4(torch.cat([rel_send @ x, rel_rec @ x, x_skip], 2))
        return self.fc_out(x)


class _NRIDecoder(nn.Module):
    """NRI's `MLPDecoder`: one message MLP per edge type weighted by the sampled edge
    probabilities, messages summed at the receivers, an output MLP predicting the change of each
    ball's state; unrolled for `pred_steps` steps from every `pred_steps`-th ground-truth state."""

    def __init__(self, n_in: int, edge_types: int, msg_hid: int, n_hid: int) -> None:
        super().__init__()
        self.msg_fc1 = nn.ModuleList([nn.Linear(2 * n_in, msg_hid) for _ in range(edge_types)])
        self.msg_fc2 = nn.ModuleList([nn.Linear(msg_hid, msg_hid) for _ in range(edge_types)])
        self.out_fc1, self.out_fc2 = nn.Linear(n_in + msg_hid, n_hid), nn.Linear(n_hid, n_hid)
        self.out_fc3 = nn.Linear(n_hid, n_in)

    def single_step_forward(self, inputs: torch.Tensor, rel_rec: torch.Tensor, rel_send: torch.Tensor,
                            rel_type: torch.Tensor) -> torch.Tensor:  # fmt: skip
        pre_msg = torch.cat([rel_send @ inputs, rel_rec @ inputs], -1)
        all_msgs = torch.zeros(*pre_msg.shape[:-1], self.msg_fc2[0].out_features)
        for i in range(len(self.msg_fc1)):
            msg = F.relu(self.msg_fc2[i](F.relu(self.msg_fc1[i](pre_msg))))
            all_msgs = all_msgs + msg * rel_type[..., i : i + 1]
        agg_msgs = (all_msgs.transpose(-2, -1) @ rel_rec).transpose(-2, -1)
        pred = F.relu(self.out_fc2(F.relu(self.out_fc1(torch.cat([inputs, agg_msgs], -1)))))
        return inputs + self.out_fc3(pred)

    def forward(self, inputs: torch.Tensor, rel_type: torch.Tensor, rel_rec: torch.Tensor, rel_send: torch.Tensor,
                pred_steps: int) -> torch.Tensor:  # fmt: skip
        inputs = inputs.transpose(1, 2).contiguous()
        timesteps = inputs.size(1)
        rel_type = rel_type.unsqueeze(1).expand(-1, timesteps, -1, -1)
        last_pred, curr_rel_type = inputs[:, 0::pred_steps], rel_type[:, 0::pred_steps]
        preds = []
        for _ in range(pred_steps):
            last_pred = self.single_step_forward(last_pred, rel_rec, rel_send, curr_rel_type)
            preds.append(last_pred)
        output = torch.zeros(inputs.size(0), preds[0].size(1) * pred_steps, *inputs.shape[2:])
        for i in range(pred_steps):
            output[:, i::pred_steps] = preds[i]
        return output[:, : timesteps - 1].transpose(1, 2).contiguous()


def nri_springs_relational_inference(
    path: str, epochs: int = 12, seed: int = 0, bug: str | None = None
) -> list[float]:
    """ethanfetaya/NRI's `train.py` (Kipf et al. 2018) on its springs simulation: positions and
    velocities scaled to [-1, 1] by the training set's extremes, the MLP encoder's edge logits,
    `gumbel_softmax` samples at tau 0.5 (soft in training, hard in validation), the MLP decoder
    unrolled 10 steps, `nll_gaussian` with variance 5e-5 plus `kl_categorical_uniform`, Adam 5e-4
    with `StepLR` (halving every 6 epochs here, 200 in the script), batches of 32 simulations of
    20 steps, hidden layers of 32; `train(epoch)` puts both models in training mode, runs the
    training batches, then the validation batches in eval mode with the edge accuracy (near
    chance in so short a run: the decoder's NLL falls first, as it does in NRI's first epochs)."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 2604)
    n_atoms, edge_types = 5, 2
    locs, vels, edges = _springs(rng, 512)
    loc_max, loc_min, vel_max, vel_min = (
        locs[:448].max(),
        locs[:448].min(),
        vels[:448].max(),
        vels[:448].min(),
    )
    locs = (locs - loc_min) * 2 / (loc_max - loc_min) - 1
    vels = (vels - vel_min) * 2 / (vel_max - vel_min) - 1
    feats = torch.tensor(np.concatenate([locs, vels], 2), dtype=torch.float32).permute(
        0, 3, 1, 2
    )  # (sims, N, T, 4)
    off_diag = ~np.eye(n_atoms, dtype=bool)
    relations = torch.tensor(edges[:, off_diag], dtype=torch.long)
    recv, send = np.where(off_diag)
    rel_rec = torch.tensor(np.eye(n_atoms)[recv], dtype=torch.float32)
    rel_send = torch.tensor(np.eye(n_atoms)[send], dtype=torch.float32)
    train_data, val_data = feats[:448], feats[448:]
    train_rel, val_rel = relations[:448], relations[448:]
    timesteps = feats.size(2)
    encoder = _NRIEncoder(timesteps * 4, 32, edge_types)
    decoder = _NRIDecoder(4, edge_types, 32, 32)
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=0.0005)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=6, gamma=0.5)
    hook = Hook(path)
    hook.register_module(encoder, name="encoder")
    hook.register_module(decoder, name="decoder")

    def nll_gaussian(preds: torch.Tensor, target: torch.Tensor, variance: float = 5e-5) -> torch.Tensor:
        return ((preds - target) ** 2 / (2 * variance)).sum() / (target.size(0) * target.size(1))

    def kl_categorical_uniform(preds: torch.Tensor) -> torch.Tensor:
        return (preds * torch.log(preds + 1e-16)).sum() / (n_atoms * preds.size(0))

    def edge_accuracy(logits: torch.Tensor, rel: torch.Tensor) -> float:
        acc = (logits.argmax(-1) == rel).float().mean().item()
        return max(acc, 1 - acc)  # the two edge types can swap roles

    losses: list[float] = []
    if bug == "train_in_eval_mode":
        # bug: `encoder.train(); decoder.train()` set once with the setup, not at the top of train()
        encoder.train()
        decoder.train()

    def train(epoch: int) -> None:
        if bug != "train_in_eval_mode":
            encoder.train()
            decoder.train()
        perm = torch.randperm(len(train_data), generator=g)
        nll_train, acc_train = [], []
        for i in range(0, len(perm), 32):
            data, rel = train_data[perm[i : i + 32]], train_rel[perm[i : i + 32]]
            optimizer.zero_grad()
            logits = encoder(data, rel_rec, rel_send)
            edges_soft = F.gumbel_softmax(logits, tau=0.5, hard=False)
            prob = F.softmax(logits, -1)
            output = decoder(data, edges_soft, rel_rec, rel_send, 10)
            target = data[:, :, 1:, :]
            loss_nll = nll_gaussian(output, target)
            loss = loss_nll + kl_categorical_uniform(prob)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            nll_train.append(loss_nll.item())
            acc_train.append(edge_accuracy(logits, rel))
        scheduler.step()
        encoder.eval()
        decoder.eval()
        with torch.no_grad():
            logits = encoder(val_data, rel_rec, rel_send)
            output = decoder(val_data, F.gumbel_softmax(logits, tau=0.5, hard=True), rel_rec, rel_send, 10)
            nll_val = nll_gaussian(output, val_data[:, :, 1:, :]).item()
        print(f"Epoch: {epoch:04d} nll_train: {np.mean(nll_train):.2f} acc_train: {np.mean(acc_train):.3f} "
              f"nll_val: {nll_val:.2f} acc_val: {edge_accuracy(logits, val_rel):.3f}")  # fmt: skip

    for epoch in range(epochs):
        train(epoch)
    hook.close()
    return losses


# ============================================================================= DGI: deep graph infomax


def _citation_graph(
    g: torch.Generator, n: int = 560, classes: int = 7, words: int = 240
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A Cora-like citation graph: a stochastic block model of `classes` topics (about 3.2 links
    inside the topic and 0.8 across per node), binary bag-of-words features of about 18 words
    drawn from the topic's own word distribution mixed with a common one; returns the dense
    adjacency (no self loops), the features and the labels."""
    y = torch.arange(n) % classes
    y = y[torch.randperm(n, generator=g)]
    same = y[:, None] == y[None, :]
    prob = torch.where(same, 3.2 / (n / classes), 0.8 / (n - n / classes))
    upper = torch.triu((torch.rand(n, n, generator=g) < prob).float(), 1)
    adj = upper + upper.T
    topic = torch.distributions.Dirichlet(torch.full((words,), 0.1)).sample((classes,))
    common = torch.full((words,), 1.0 / words)
    feats = torch.zeros(n, words)
    for i in range(n):
        dist = 0.7 * topic[y[i]] + 0.3 * common
        feats[i, torch.multinomial(dist, 18, replacement=True, generator=g)] = 1.0
    return adj, feats, y


class _DGI(nn.Module):
    """PetarV-/DGI's model: a one-layer GCN (`fc` without bias, Xavier-uniform, `bmm` with the
    normalized adjacency, a bias, PReLU), the average readout through a sigmoid as the summary,
    a bilinear discriminator scoring each node's patch against the summary for the real graph
    and for the corrupted one."""

    def __init__(self, n_in: int, n_h: int) -> None:
        super().__init__()
        self.fc = nn.Linear(n_in, n_h, bias=False)
        nn.init.xavier_uniform_(self.fc.weight)
        self.bias = nn.Parameter(torch.zeros(n_h))
        self.act = nn.PReLU()
        self.f_k = nn.Bilinear(n_h, n_h, 1)
        nn.init.xavier_uniform_(self.f_k.weight)
        self.f_k.bias.data.fill_(0.0)

    def gcn(self, seq: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        return self.act(torch.bmm(adj, self.fc(seq)) + self.bias)

    def forward(self, seq1: torch.Tensor, seq2: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        h_1 = self.gcn(seq1, adj)
        c = torch.sigmoid(h_1.mean(1))
        h_2 = self.gcn(seq2, adj)
        c_x = c.unsqueeze(1).expand_as(h_1)
        sc_1 = self.f_k(h_1, c_x).squeeze(2)
        sc_2 = self.f_k(h_2, c_x).squeeze(2)
        return torch.cat((sc_1, sc_2), 1)

    def embed(self, seq: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        return self.gcn(seq, adj).detach()


def dgi_graph_infomax(path: str, nb_epochs: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """PetarV-/DGI's `execute.py` (Velickovic et al. 2019) on a Cora-like graph:
    `preprocess_features` (rows normalized), `normalize_adj` of the adjacency with self loops,
    the corruption a row permutation of the features, labels of ones for the real nodes and zeros
    for the corrupted ones, `BCEWithLogitsLoss`, Adam 1e-3, full batch, at most 300 epochs here, the
    best model kept and training stopped after 20 epochs without a better loss; then the frozen
    embeddings probed by a logistic regression (`LogReg`, Adam 0.01, 100 epochs) on 20 labelled
    nodes per class, its test accuracy."""
    g = _seed(seed)
    adj, features, labels = _citation_graph(g)
    nb_nodes, ft_size, nb_classes = features.shape[0], features.shape[1], int(labels.max()) + 1
    features = features / features.sum(1, keepdim=True).clamp(min=1)
    adj = adj + torch.eye(nb_nodes)
    d_inv_sqrt = adj.sum(1).pow(-0.5)
    adj = (d_inv_sqrt[:, None] * adj * d_inv_sqrt[None, :])[None]
    features = features[None]
    idx_train = torch.cat([torch.where(labels == c)[0][:20] for c in range(nb_classes)])
    idx_test = torch.tensor([i for i in range(nb_nodes) if i not in set(idx_train.tolist())])
    model = _DGI(ft_size, 64)
    optimiser = torch.optim.Adam(model.parameters(), lr=0.001, weight_decay=0.0)
    b_xent = nn.BCEWithLogitsLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(b_xent)
    lbl = torch.cat((torch.ones(1, nb_nodes), torch.zeros(1, nb_nodes)), 1)
    best, best_t, cnt_wait, patience = 1e9, 0, 0, 20
    best_state = copy.deepcopy(model.state_dict())
    losses: list[float] = []
    for epoch in range(nb_epochs):
        model.train()
        if bug != "no_zero_grad":  # bug: the loop rewritten without `optimiser.zero_grad()`
            optimiser.zero_grad()
        idx = torch.randperm(nb_nodes, generator=g)
        shuf_fts = features[:, idx, :]
        logits = model(features, shuf_fts, adj)
        loss = b_xent(logits, lbl)
        losses.append(loss.item())
        if epoch % 25 == 0:
            print("Loss:", round(loss.item(), 4))
        if loss.item() < best:
            best, best_t, cnt_wait = loss.item(), epoch, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            cnt_wait += 1
        if cnt_wait == patience:
            print("Early stopping!")
            break
        loss.backward()
        optimiser.step()
    hook.close()
    print(f"Loading {best_t}th epoch")
    model.load_state_dict(best_state)
    embeds = model.embed(features, adj)[0]
    log = nn.Linear(64, nb_classes)
    opt = torch.optim.Adam(log.parameters(), lr=0.01, weight_decay=0.0)
    for _ in range(100):
        opt.zero_grad()
        F.cross_entropy(log(embeds[idx_train]), labels[idx_train]).backward()
        opt.step()
    acc = (log(embeds[idx_test]).argmax(1) == labels[idx_test]).float().mean().item()
    print(f"Test accuracy of the linear probe: {acc:.3f} (majority class {1 / nb_classes:.3f})")
    return losses


# ============================================================================= GAIL: adversarial imitation with PPO


class _ActorCritic(nn.Module):
    """pytorch-a2c-ppo-acktr-gail's `MLPBase` policy: separate actor and critic trunks of two
    tanh layers of 64 with orthogonal initialization (gain sqrt 2), a linear critic head and a
    categorical head with gain 0.01."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: int = 64) -> None:
        super().__init__()

        def init(m: nn.Linear, gain: float = math.sqrt(2)) -> nn.Linear:
            nn.init.orthogonal_(m.weight, gain)
            nn.init.zeros_(m.bias)
            return m

        self.actor = nn.Sequential(
            init(nn.Linear(obs_dim, hidden)), nn.Tanh(), init(nn.Linear(hidden, hidden)), nn.Tanh()
        )
        self.critic = nn.Sequential(
            init(nn.Linear(obs_dim, hidden)), nn.Tanh(), init(nn.Linear(hidden, hidden)), nn.Tanh()
        )
        self.critic_linear = init(nn.Linear(hidden, 1), 1.0)
        self.dist = init(nn.Linear(hidden, n_actions), 0.01)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.distributions.Categorical]:
        return self.critic_linear(self.critic(obs)).squeeze(-1), torch.distributions.Categorical(
            logits=self.dist(self.actor(obs))
        )


class _Discriminator(nn.Module):
    """pytorch-a2c-ppo-acktr-gail's GAIL `Discriminator`: a tanh MLP on (state, one-hot action),
    trained with expert pairs as ones and policy pairs as zeros plus the gradient penalty (10)
    on mixtures of the two; the reward the GAIL paper's `-log(1 - D)` (the repository takes
    `log D - log(1 - D)`, whose negative values teach a cart-pole to fall early) scaled by the
    running standard deviation of its discounted returns."""

    def __init__(self, input_dim: int, hidden_dim: int = 64) -> None:
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(input_dim, hidden_dim),
            nn.Tanh(),
            nn.Linear(hidden_dim, hidden_dim),
            nn.Tanh(),
            nn.Linear(hidden_dim, 1),
        )
        self.returns: torch.Tensor | None = None
        self.ret_var, self.ret_mean, self.ret_count = 1.0, 0.0, 1e-4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.trunk(x)

    def compute_grad_pen(
        self, expert_data: torch.Tensor, policy_data: torch.Tensor, lambda_: float = 10
    ) -> torch.Tensor:
        alpha = torch.rand(expert_data.size(0), 1).expand_as(expert_data)
        mixup_data = (alpha * expert_data + (1 - alpha) * policy_data).requires_grad_(True)
        disc = self.trunk(mixup_data)
        grad = torch.autograd.grad(
            disc, mixup_data, torch.ones(disc.size()), create_graph=True, retain_graph=True
        )[0]
        return lambda_ * (grad.norm(2, dim=1) - 1).pow(2).mean()

    def predict_reward(self, data: torch.Tensor, gamma: float, masks: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.eval()
            s = torch.sigmoid(self.trunk(data)).squeeze(-1)
            reward = -(1 - s).log()
            rets = []
            for r, m in zip(reward, masks, strict=True):  # the discounted returns' running variance
                self.returns = r if self.returns is None else self.returns * m * gamma + r
                rets.append(float(self.returns))
            batch_mean, batch_var, batch_count = float(np.mean(rets)), float(np.var(rets)), len(rets)
            delta, total = batch_mean - self.ret_mean, self.ret_count + batch_count
            m2 = (
                self.ret_var * self.ret_count
                + batch_var * batch_count
                + delta**2 * self.ret_count * batch_count / total
            )
            self.ret_mean, self.ret_var, self.ret_count = (
                self.ret_mean + delta * batch_count / total,
                m2 / total,
                total,
            )
            return reward / math.sqrt(self.ret_var + 1e-8)


def gail_ppo_cartpole_imitation(path: str, num_updates: int = 12, seed: int = 0) -> list[float]:
    """GAIL (Ho and Ermon 2016) as ikostrikov's pytorch-a2c-ppo-acktr-gail runs it (`main.py
    --algo ppo --gail`), on a hand-written cart-pole with 10 expert trajectories of a hand-tuned
    linear controller (200 steps each), observations normalized by a `VecNormalize`-style filter
    (here frozen at the expert data's statistics) for the policy and the discriminator alike;
    each update 512 environment steps of the policy, the
    discriminator (Adam defaults) trained on the rollout against expert batches of 128 (5 epochs,
    25 in the first update as the script's warm-up does), the environment's reward replaced by the
    discriminator's, GAE (gamma 0.99, lambda 0.95), PPO (clip 0.2, 4 epochs of 4 mini-batches,
    clipped value loss with coefficient 0.5, Adam eps 1e-5 at 1e-3 here, clipping at 0.5). The returned
    losses are the discriminator's (its two BCE terms plus the gradient penalty): high for a
    fresh network (the penalty), then hovering between 1 and 1.4 (2 log 2 at chance) as the
    policy, reaching the expert's 200 steps, and the discriminator chase each other."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 2606)
    env = _CartPole(rng)

    def expert_action(o: np.ndarray) -> int:
        return int(0.05 * o[0] + 0.1 * o[1] + 1.0 * o[2] + 0.3 * o[3] > 0)

    expert_s, expert_a = [], []
    for _ in range(10):
        o, done = env.reset(), False
        while not done:
            a = expert_action(o)
            expert_s.append(o)
            expert_a.append(a)
            o, _, terminated, truncated = env.step(a)
            done = terminated or truncated
    obs_mean, obs_std = np.mean(expert_s, 0), np.std(expert_s, 0) + 1e-8

    def obfilt(x: np.ndarray) -> np.ndarray:  # VecNormalize's filter, its statistics frozen
        return np.clip((x - obs_mean) / obs_std, -10.0, 10.0).astype(np.float32)

    expert_data = torch.cat(
        [torch.tensor(obfilt(np.array(expert_s))), F.one_hot(torch.tensor(expert_a), 2).float()], 1
    )
    actor_critic = _ActorCritic(4, 2)
    discr = _Discriminator(4 + 2)
    optimizer = torch.optim.Adam(actor_critic.parameters(), lr=1e-3, eps=1e-5)
    d_optimizer = torch.optim.Adam(discr.parameters())
    hook = Hook(path)
    hook.register_module(actor_critic, name="policy")
    hook.register_module(discr, name="discriminator")
    num_steps, gamma, gae_lambda, clip_param = 512, 0.99, 0.95, 0.2
    losses: list[float] = []
    o, ep_ret, ep_rets = env.reset(), 0.0, []
    for j in range(num_updates):
        obs, acts, logps, vals, masks = [], [], [], [], []
        for _ in range(num_steps):
            with torch.no_grad():
                value, dist = actor_critic(torch.as_tensor(obfilt(o))[None])
                action = dist.sample()
            obs.append(obfilt(o))
            acts.append(int(action))
            logps.append(float(dist.log_prob(action)))
            vals.append(float(value))
            o, r, terminated, truncated = env.step(int(action))
            ep_ret += r
            masks.append(0.0 if terminated or truncated else 1.0)
            if terminated or truncated:
                ep_rets.append(ep_ret)
                o, ep_ret = env.reset(), 0.0
        with torch.no_grad():
            next_value = float(actor_critic(torch.as_tensor(obfilt(o))[None])[0])
        obs_t, act_t = torch.tensor(np.array(obs)), torch.tensor(acts)
        policy_data = torch.cat([obs_t, F.one_hot(act_t, 2).float()], 1)
        masks_t = torch.tensor(masks)

        discr.train()
        for _ in range(25 if j < 1 else 5):
            perm_e = torch.randint(0, len(expert_data), (num_steps,), generator=g)
            perm_p = torch.randperm(num_steps, generator=g)
            for i in range(0, num_steps, 128):
                expert_batch, policy_batch = (
                    expert_data[perm_e[i : i + 128]],
                    policy_data[perm_p[i : i + 128]],
                )
                expert_d, policy_d = discr(expert_batch), discr(policy_batch)
                expert_loss = F.binary_cross_entropy_with_logits(expert_d, torch.ones(expert_d.size()))
                policy_loss = F.binary_cross_entropy_with_logits(policy_d, torch.zeros(policy_d.size()))
                gail_loss = expert_loss + policy_loss
                grad_pen = discr.compute_grad_pen(expert_batch, policy_batch)
                d_optimizer.zero_grad()
                (gail_loss + grad_pen).backward()
                d_optimizer.step()
                losses.append((gail_loss + grad_pen).item())
        rewards = discr.predict_reward(policy_data, gamma, masks_t)

        values = torch.tensor([*vals, next_value])
        returns, gae = torch.zeros(num_steps), 0.0
        for t in reversed(range(num_steps)):
            delta = rewards[t] + gamma * values[t + 1] * masks_t[t] - values[t]
            gae = delta + gamma * gae_lambda * masks_t[t] * gae
            returns[t] = gae + values[t]
        advantages = returns - values[:-1]
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-5)
        old_logp, old_values = torch.tensor(logps), values[:-1]
        for _ in range(4):
            perm = torch.randperm(num_steps, generator=g)
            for i in range(0, num_steps, 128):
                idx = perm[i : i + 128]
                value, dist = actor_critic(obs_t[idx])
                ratio = torch.exp(dist.log_prob(act_t[idx]) - old_logp[idx])
                surr1 = ratio * advantages[idx]
                surr2 = torch.clamp(ratio, 1.0 - clip_param, 1.0 + clip_param) * advantages[idx]
                action_loss = -torch.min(surr1, surr2).mean()
                value_pred_clipped = old_values[idx] + (value - old_values[idx]).clamp(
                    -clip_param, clip_param
                )
                value_loss = (
                    0.5
                    * torch.max(
                        (value - returns[idx]).pow(2), (value_pred_clipped - returns[idx]).pow(2)
                    ).mean()
                )
                optimizer.zero_grad()
                (value_loss * 0.5 + action_loss - dist.entropy().mean() * 0.0).backward()
                nn.utils.clip_grad_norm_(actor_critic.parameters(), 0.5)
                optimizer.step()
        recent = ep_rets[-10:] if ep_rets else [0.0]
        print(f"Update {j + 1}, mean/min/max episode return {np.mean(recent):.1f}/{min(recent):.0f}/{max(recent):.0f}, "
              f"discriminator loss {np.mean(losses[-4:]):.3f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= PSMNet: stereo matching by a 3-D cost volume


def _stereo_scenes(
    g: torch.Generator, n: int, h: int = 16, w: int = 40
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`n` rectified stereo pairs (uint8, (n, h, w, 3)) of layered scenes and the left view's
    disparity: a textured ground plane whose disparity grows from 2 to 6 pixels down the image,
    and two or three textured fronto-parallel objects (rectangles, ellipses) at 6 to 14 pixels,
    nearer ones drawn over farther ones; the right view sees each layer shifted left by its
    disparity. Textures are smooth colour noise with a fine grain, so every surface can be
    matched."""
    yy, xx = torch.meshgrid(torch.arange(h).float(), torch.arange(w + 16).float(), indexing="ij")

    def texture() -> torch.Tensor:
        coarse = F.interpolate(
            torch.rand(1, 3, h // 4 + 1, (w + 16) // 4 + 1, generator=g), size=(h, w + 16), mode="bilinear"
        )
        return (0.2 + 0.6 * coarse[0] + 0.25 * torch.rand(3, h, w + 16, generator=g)).clamp(0, 1)

    lefts, rights, disps = torch.zeros(n, h, w, 3), torch.zeros(n, h, w, 3), torch.zeros(n, h, w)
    cols = torch.arange(w).float()
    for b in range(n):
        layers = [(texture(), torch.ones(h, w + 16, dtype=torch.bool), (2 + 4 * yy[:, 0] / (h - 1)).round())]
        for _ in range(int(torch.randint(2, 4, (1,), generator=g))):
            cx, cy = (
                float(torch.randint(4, w + 12, (1,), generator=g)),
                float(torch.randint(2, h - 2, (1,), generator=g)),
            )
            rx, ry = (3 + 6 * torch.rand(2, generator=g)).tolist()
            if torch.rand(1, generator=g) < 0.5:
                mask = ((xx - cx).abs() < rx) & ((yy - cy).abs() < ry)
            else:
                mask = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 < 1
            layers.append((texture(), mask, torch.full((h,), float(torch.randint(6, 15, (1,), generator=g)))))
        layers.sort(key=lambda layer: float(layer[2].mean()))  # far to near
        for tex, mask, d in layers:
            cover = mask[:, :w]
            lefts[b][cover] = tex[:, :, :w].permute(1, 2, 0)[cover]
            disps[b][cover] = d[:, None].expand(h, w)[cover]
            src = (cols[None, :] + d[:, None]).long()  # the right view at x sees the left view's x + d
            rmask = torch.gather(mask, 1, src)
            rtex = torch.stack([torch.gather(tex[c], 1, src) for c in range(3)], -1)
            rights[b][rmask] = rtex[rmask]

    def to_uint8(x: torch.Tensor) -> torch.Tensor:
        return ((x + 0.02 * torch.randn(x.shape, generator=g)).clamp(0, 1) * 255).round().to(torch.uint8)

    return to_uint8(lefts), to_uint8(rights), disps


class _PSMNetBasic(nn.Module):
    """PSMNet's `basic` model (Chang and Chen 2018) shrunk: a feature extractor (a stride-2
    convolution and two residual blocks with BatchNorm, 8 channels at half resolution) shared by
    both views, the cost volume of concatenated left and shifted right features over 8
    half-resolution disparities, 3-D convolutions with BatchNorm and a residual, trilinear
    upsampling to full resolution, a softmax over disparities and the soft argmin
    (`disparityregression`)."""

    def __init__(self, maxdisp: int = 16, c: int = 8) -> None:
        super().__init__()
        self.maxdisp = maxdisp

        def convbn(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout))

        def convbn_3d(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv3d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm3d(cout))

        self.firstconv = nn.Sequential(
            convbn(3, c, 2), nn.ReLU(inplace=True), convbn(c, c), nn.ReLU(inplace=True)
        )
        self.res1 = nn.Sequential(convbn(c, c), nn.ReLU(inplace=True), convbn(c, c))
        self.res2 = nn.Sequential(convbn(c, c), nn.ReLU(inplace=True), convbn(c, c))
        self.lastconv = nn.Conv2d(c, c, 1, bias=False)
        self.dres0 = nn.Sequential(convbn_3d(2 * c, 8), nn.ReLU(inplace=True))
        self.dres1 = nn.Sequential(convbn_3d(8, 8), nn.ReLU(inplace=True), convbn_3d(8, 8))
        self.classify = nn.Sequential(
            convbn_3d(8, 8), nn.ReLU(inplace=True), nn.Conv3d(8, 1, 3, 1, 1, bias=False)
        )

    def feature_extraction(self, x: torch.Tensor) -> torch.Tensor:
        x = self.firstconv(x)
        x = F.relu(x + self.res1(x))
        x = F.relu(x + self.res2(x))
        return self.lastconv(x)

    def forward(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        refimg_fea, targetimg_fea = self.feature_extraction(left), self.feature_extraction(right)
        b, c, h, w = refimg_fea.shape
        cost = torch.zeros(b, 2 * c, self.maxdisp // 2, h, w)
        for i in range(self.maxdisp // 2):
            if i > 0:
                cost[:, :c, i, :, i:] = refimg_fea[:, :, :, i:]
                cost[:, c:, i, :, i:] = targetimg_fea[:, :, :, :-i]
            else:
                cost[:, :c, i] = refimg_fea
                cost[:, c:, i] = targetimg_fea
        cost0 = self.dres0(cost)
        cost0 = self.dres1(cost0) + cost0
        cost = self.classify(cost0)
        cost = F.interpolate(
            cost, [self.maxdisp, left.size(2), left.size(3)], mode="trilinear", align_corners=False
        )
        pred = F.softmax(cost.squeeze(1), dim=1)
        return (pred * torch.arange(self.maxdisp, dtype=torch.float32)[None, :, None, None]).sum(1)


def psmnet_stereo_cost_volume(
    path: str, epochs: int = 3, seed: int = 0, bug: str | None = None
) -> list[float]:
    """PSMNet's `finetune.py` loop (the `basic` model) on synthetic rectified pairs read the way
    its KITTI loader reads them: file names listed from the `image_2` folder and used for the
    `image_3` and `disp_occ_0` folders, `ToTensor` and ImageNet `Normalize`, batches of 8, Adam
    1e-3 with betas (0.9, 0.999), `F.smooth_l1_loss` on the pixels whose ground-truth disparity is
    in (0, maxdisp = 16), and a test pass each epoch in `model.eval()` with the end-point error
    and the share of pixels off by more than 3."""
    g = _seed(seed)
    lefts, rights, disps = _stereo_scenes(g, 384)
    names = [f"{i:06d}_10.png" for i in range(len(lefts))]
    folders = {
        "image_2": dict(zip(names, lefts, strict=True)),
        "image_3": dict(zip(names, rights, strict=True)),
        "disp_occ_0": dict(zip(names, disps, strict=True)),
    }
    listing_order = {k: torch.randperm(len(names), generator=g).tolist() for k in folders}

    def listdir(folder: str) -> list[str]:  # a directory listing comes in the file system's order
        return [names[i] for i in listing_order[folder]]

    image = listdir("image_2")
    left_files, right_files = image, image
    # bug (shuffled_labels): the disparities listed from their own folder, not by the images' names
    disp_files = listdir("disp_occ_0") if bug == "shuffled_labels" else image
    mean = torch.tensor([0.485, 0.456, 0.406])[:, None, None]
    std = torch.tensor([0.229, 0.224, 0.225])[:, None, None]

    def load(files: list[str], folder: str) -> torch.Tensor:
        x = torch.stack([folders[folder][f] for f in files])
        return (x.permute(0, 3, 1, 2).float() / 255.0 - mean) / std if x.dim() == 4 else x

    left_all, right_all, disp_all = (
        load(left_files, "image_2"),
        load(right_files, "image_3"),
        load(disp_files, "disp_occ_0"),
    )
    n_train = 320
    model = _PSMNetBasic(maxdisp=16)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001, betas=(0.9, 0.999))
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(n_train, generator=g)
        for i in range(0, n_train, 8):
            idx = perm[i : i + 8]
            img_l, img_r, disp_l = left_all[idx], right_all[idx], disp_all[idx]
            mask = (disp_l < 16) & (disp_l > 0)
            optimizer.zero_grad()
            output = model(img_l, img_r)
            loss = F.smooth_l1_loss(output[mask], disp_l[mask], reduction="mean")
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            pred = model(left_all[n_train:], right_all[n_train:])
            true = disp_all[n_train:]
            mask = (true < 16) & (true > 0)
            err = (pred - true).abs()[mask]
        print(f"epoch {epoch + 1} total training loss = {np.mean(losses[-40:]):.3f}, test EPE = {err.mean().item():.3f}, "
              f"3-px error = {(err > 3).float().mean().item():.3f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= TENT: test-time entropy minimization


def _corrupt(x: torch.Tensor, kind: str, g: torch.Generator) -> torch.Tensor:
    """CIFAR-10-C-like corruptions (severity about 4) of float images in [0, 1]."""
    if kind == "gaussian_noise":
        x = x + 0.3 * torch.randn(x.shape, generator=g)
    elif kind == "contrast":
        x = (x - x.mean((1, 2, 3), keepdim=True)) * 0.35 + x.mean((1, 2, 3), keepdim=True)
    elif kind == "brightness":
        x = x + 0.35
    elif kind == "fog":
        fog = F.interpolate(torch.rand(len(x), 1, 4, 4, generator=g), size=x.shape[-2:], mode="bilinear")
        x = 0.55 * x + 0.5 * fog
    elif kind == "pixelate":
        x = F.interpolate(F.avg_pool2d(x, 2), scale_factor=2.0, mode="nearest")
    elif kind == "impulse_noise":
        salt = torch.rand(x.shape, generator=g)
        x = torch.where(salt < 0.12, torch.zeros(()), torch.where(salt > 0.88, torch.ones(()), x))
    return x.clamp(0, 1)


def tent_bn_entropy_adaptation(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Tent (Wang et al. 2021) as DequanWang/tent's `cifar10c.py` runs it, on a small BatchNorm
    CNN trained on clean RGB glyphs in the same script (standing in for the downloaded source
    checkpoint; SGD momentum at 0.05 with a cosine schedule, before the hook is made), then
    adapted online on six corruptions in turn: `tent.configure_model` (training mode, every
    parameter frozen but the BatchNorm affine ones, batch statistics instead of running ones),
    `collect_params`, Adam at `LR: 1e-3` with betas (0.9, 0.999) from the config, one
    `forward_and_adapt` per test batch of 50 (the mean softmax entropy of the predictions,
    backward, step), the model and optimizer reset to the source state before each corruption,
    and the error of the source model and of Tent per corruption. The losses are the entropies,
    falling within each corruption and jumping at each reset."""
    g = _seed(seed)
    images, labels = _rgb_glyphs(g, 2400 + 6 * 1000, 10)
    x_all = images.float() / 255.0
    x_src, y_src = x_all[:2400], labels[:2400]
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    )  # fmt: skip
    source_opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(source_opt, T_max=4 * 38)
    for _ in range(4):
        model.train()
        perm = torch.randperm(2400, generator=g)
        for i in range(0, 2400, 64):
            idx = perm[i : i + 64]
            source_opt.zero_grad()
            F.cross_entropy(model(x_src[idx]), y_src[idx]).backward()
            source_opt.step()
            sched.step()
    corruptions = ["gaussian_noise", "impulse_noise", "pixelate", "fog", "contrast", "brightness"]
    targets = []
    for k, kind in enumerate(corruptions):
        lo = 2400 + 1000 * k
        targets.append((kind, _corrupt(x_all[lo : lo + 1000], kind, g), labels[lo : lo + 1000]))
    model.eval()
    with torch.no_grad():
        source_err = {kind: (model(x).argmax(1) != y).float().mean().item() for kind, x, y in targets}

    def configure_model(model: nn.Module) -> nn.Module:
        model.train()
        model.requires_grad_(False)
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.requires_grad_(True)
                m.track_running_stats = False
                m.running_mean = None
                m.running_var = None
        return model

    def collect_params(model: nn.Module) -> list[nn.Parameter]:
        params = []
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                for np_, p in m.named_parameters():
                    if np_ in ["weight", "bias"]:
                        params.append(p)
        return params

    model = configure_model(model)
    # bug: `LR: 1e-1` in the config, typed for 1e-3
    optimizer = torch.optim.Adam(
        collect_params(model), lr=1e-1 if bug == "lr_x100" else 1e-3, betas=(0.9, 0.999), weight_decay=0.0
    )
    model_state, optimizer_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for kind, x, y in targets:
        model.load_state_dict(model_state, strict=True)  # tent's `reset()`
        optimizer.load_state_dict(optimizer_state)
        errors = []
        for i in range(0, len(x), 50):
            outputs = model(x[i : i + 50])
            loss = -(outputs.softmax(1) * outputs.log_softmax(1)).sum(1).mean(0)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            errors.append((outputs.argmax(1) != y[i : i + 50]).float().mean().item())
        print(f"error % [{kind}]: source {100 * source_err[kind]:.1f}, tent {100 * np.mean(errors):.1f}")
    hook.close()
    return losses


# ============================================================================= Chronos: forecasting as language modeling


def _kernel_synth(g: torch.Generator, n: int, length: int = 128, max_kernels: int = 4) -> torch.Tensor:
    """Chronos's KernelSynth: each series a draw from a Gaussian process whose kernel is a random
    composition (by + and x) of up to four kernels from a bank (linear, RBF and rational
    quadratic of several length scales, periodic kernels of periods 24, 12, 7 and 48 steps in a
    time axis scaled to [0, 1], a constant, white noise)."""
    t = torch.linspace(0, 1, length, dtype=torch.float64)[:, None]
    d = t - t.T

    def bank(i: int) -> torch.Tensor:
        if i == 0:
            return 0.5 * (t - 0.5) @ (t - 0.5).T + 0.1
        if i <= 3:
            return torch.exp(-0.5 * d**2 / (0.03, 0.1, 0.3)[i - 1] ** 2)
        if i <= 7:
            period = (24, 12, 7, 48)[i - 4] / length
            return torch.exp(-2 * torch.sin(math.pi * d.abs() / period) ** 2)
        if i == 8:
            return (1 + d**2 / (2 * 0.5 * 0.1**2)) ** -0.5
        if i == 9:
            return torch.ones_like(d)
        return 0.1 * torch.eye(length, dtype=torch.float64)

    out = torch.zeros(n, length)
    for k in range(n):
        kernel = bank(int(torch.randint(0, 11, (1,), generator=g)))
        for _ in range(int(torch.randint(0, max_kernels, (1,), generator=g))):
            other = bank(int(torch.randint(0, 11, (1,), generator=g)))
            kernel = kernel + other if torch.rand(1, generator=g) < 0.5 else kernel * other
        chol = torch.linalg.cholesky(kernel + 1e-5 * torch.eye(length, dtype=torch.float64))
        out[k] = (chol @ torch.randn(length, generator=g, dtype=torch.float64)).float()
    return out


class _TinyCausalLM(nn.Module):
    """A small GPT-style decoder (learned positions, pre-norm blocks, GELU, a causal mask, the
    unembedding tied to the token embedding, weights initialised with std 0.02), the
    `model_type: causal` variant of Chronos."""

    def __init__(
        self, vocab: int, max_len: int, d_model: int = 48, n_layers: int = 2, n_heads: int = 4
    ) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, 2 * d_model, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=True)  # fmt: skip
        self.blocks = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(t))
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        return self.lm_head(self.ln_f(self.blocks(x, mask=mask, is_causal=True)))


def chronos_tokenized_forecaster(path: str, max_steps: int = 150, seed: int = 0) -> list[float]:
    """amazon-science/chronos-forecasting's `training/train.py` recipe (Ansari et al. 2024)
    written out as a loop (the script drives the Hugging Face `Trainer`), on KernelSynth series
    with TSMixup: windows of 24 context and 8 future steps cut at random from 400 series, each
    training series a Dirichlet(1.5) mix of one to three mean-scaled windows; the
    `MeanScaleUniformBins` tokenizer (the context's mean absolute value as the scale, 253 uniform
    bins on [-15, 15] plus PAD and EOS), the future tokens and EOS as labels (the context's
    positions at -100), the causal model's cross-entropy, AdamW with weight decay 0.01 (no decay
    on norms and biases) at 3e-3 (1e-3 in the recipe's far longer run) decaying linearly to 0
    over 150 steps, clipping at 1, batches of 32."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 2609)
    train_series = _kernel_synth(g, 400)
    context_length, prediction_length, n_special, n_tokens = 24, 8, 2, 256
    eos_id = 1  # after PAD (0)
    centers = torch.linspace(-15, 15, n_tokens - n_special - 1)
    boundaries = torch.cat([torch.tensor([-1e20]), (centers[1:] + centers[:-1]) / 2, torch.tensor([1e20])])

    def context_input_transform(context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scale = context.abs().mean(-1).clamp(min=1e-10)
        token_ids = torch.bucketize(context / scale[:, None], boundaries, right=True) + n_special
        return token_ids.clamp(n_special, n_tokens - 1), scale

    def label_input_transform(label: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        token_ids = torch.bucketize(label / scale[:, None], boundaries, right=True) + n_special
        return torch.cat([token_ids.clamp(n_special, n_tokens - 1), torch.full((len(label), 1), eos_id)], 1)

    def ts_mixup_batch(batch_size: int) -> torch.Tensor:
        out = torch.zeros(batch_size, context_length + prediction_length)
        for b in range(batch_size):
            k = int(rng.integers(1, 4))
            weights = torch.tensor(rng.dirichlet([1.5] * k), dtype=torch.float32)
            for j in range(k):
                sid = int(rng.integers(0, len(train_series)))
                start = int(rng.integers(0, train_series.size(1) - context_length - prediction_length + 1))
                window = train_series[sid, start : start + context_length + prediction_length]
                out[b] += weights[j] * window / window[:context_length].abs().mean().clamp(min=1e-10)
        return out

    model = _TinyCausalLM(n_tokens, context_length + prediction_length + 1)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=3e-3
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, 1 - step / max_steps))
    hook = Hook(path)
    hook.register_module(model)

    losses: list[float] = []
    model.train()
    for step in range(max_steps):
        window = ts_mixup_batch(32)
        input_ids, scale = context_input_transform(window[:, :context_length])
        labels = label_input_transform(window[:, context_length:], scale)
        seq = torch.cat([input_ids, labels[:, :-1]], 1)
        target = torch.cat([torch.full_like(input_ids[:, 1:], -100), labels], 1)
        logits = model(seq)
        loss = F.cross_entropy(logits.reshape(-1, n_tokens), target.reshape(-1), ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step % 50 == 49:
            print(f"step {step + 1} loss {np.mean(losses[-50:]):.4f} lr {scheduler.get_last_lr()[0]:.2e}")
    hook.close()
    return losses


# ============================================================================= StyleGAN2: modulated convolutions, lazy R1


def _faces(g: torch.Generator, n: int, size: int = 16) -> torch.Tensor:
    """`n` uint8 RGB cartoon faces (n, size, size, 3): a skin-toned disc of random size and
    position on a coloured background, hair across the top, two eyes and a mouth whose curve
    varies, with a little noise."""
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
    out = torch.zeros(n, size, size, 3)
    for b in range(n):
        cx, cy = (0.2 * torch.randn(2, generator=g)).tolist()
        r = 0.55 + 0.2 * float(torch.rand(1, generator=g))
        img = (0.2 + 0.6 * torch.rand(3, generator=g)).expand(size, size, 3).clone()
        face = (xx - cx) ** 2 + (yy - cy) ** 2 < r**2
        skin = torch.tensor([0.95, 0.75, 0.6]) * (0.6 + 0.4 * float(torch.rand(1, generator=g)))
        img[face] = skin
        hair = face & (yy < cy - r * (0.3 + 0.4 * float(torch.rand(1, generator=g))))
        img[hair] = 0.5 * torch.rand(3, generator=g)
        for side in (-1, 1):
            eye = (xx - cx - side * 0.35 * r) ** 2 + (yy - cy + 0.1 * r) ** 2 < (0.12 * r) ** 2
            img[eye] = 0.05
        smile = 0.6 * (float(torch.rand(1, generator=g)) - 0.3)
        mouth = ((yy - cy - 0.45 * r - smile * (xx - cx) ** 2 / r).abs() < 0.08) & (
            (xx - cx).abs() < 0.35 * r
        )
        img[mouth] = torch.tensor([0.6, 0.1, 0.1])
        out[b] = img + 0.02 * torch.randn(size, size, 3, generator=g)
    return (out.clamp(0, 1) * 255).round().to(torch.uint8)


class _EqualLinear(nn.Module):
    """rosinality's `EqualLinear`: the equalized learning rate (weights drawn N(0, 1) / lr_mul,
    scaled by lr_mul / sqrt(fan_in) at run time), with the fused leaky ReLU (slope 0.2, gain
    sqrt 2) when asked."""

    def __init__(
        self, in_dim: int, out_dim: int, bias_init: float = 0.0, lr_mul: float = 1.0, activation: bool = False
    ):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_dim, in_dim).div_(lr_mul))
        self.bias = nn.Parameter(torch.full((out_dim,), float(bias_init)))
        self.scale, self.lr_mul, self.activation = (1 / math.sqrt(in_dim)) * lr_mul, lr_mul, activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.linear(x, self.weight * self.scale)
        out = out + self.bias * self.lr_mul
        return F.leaky_relu(out, 0.2) * math.sqrt(2) if self.activation else out


class _ModulatedConv2d(nn.Module):
    """StyleGAN2's modulated convolution: the weight scaled per input channel by the style,
    demodulated to unit norm per output channel, applied as a grouped convolution (one group per
    sample), after a bilinear 2x upsampling where the layer upsamples."""

    def __init__(
        self, cin: int, cout: int, k: int, style_dim: int, demodulate: bool = True, upsample: bool = False
    ):
        super().__init__()
        self.cin, self.cout, self.k, self.demodulate, self.upsample = cin, cout, k, demodulate, upsample
        self.scale = 1 / math.sqrt(cin * k * k)
        self.weight = nn.Parameter(torch.randn(1, cout, cin, k, k))
        self.modulation = _EqualLinear(style_dim, cin, bias_init=1.0)

    def forward(self, x: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
        b = x.size(0)
        weight = self.scale * self.weight * self.modulation(style).view(b, 1, self.cin, 1, 1)
        if self.demodulate:
            demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)
            weight = weight * demod.view(b, self.cout, 1, 1, 1)
        if self.upsample:
            x = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        out = F.conv2d(x.reshape(1, b * self.cin, *x.shape[2:]), weight.view(b * self.cout, self.cin, self.k, self.k),
                       padding=self.k // 2, groups=b)  # fmt: skip
        return out.view(b, self.cout, *out.shape[2:])


class _StyledConv(nn.Module):
    def __init__(self, cin: int, cout: int, style_dim: int, upsample: bool = False) -> None:
        super().__init__()
        self.conv = _ModulatedConv2d(cin, cout, 3, style_dim, upsample=upsample)
        self.noise_weight = nn.Parameter(torch.zeros(1))
        self.bias = nn.Parameter(torch.zeros(1, cout, 1, 1))

    def forward(self, x: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
        out = self.conv(x, style)
        out = out + self.noise_weight * torch.randn(out.size(0), 1, *out.shape[2:])
        return F.leaky_relu(out + self.bias, 0.2) * math.sqrt(2)


class _ToRGB(nn.Module):
    def __init__(self, cin: int, style_dim: int, upsample: bool = True) -> None:
        super().__init__()
        self.upsample = upsample
        self.conv = _ModulatedConv2d(cin, 3, 1, style_dim, demodulate=False)
        self.bias = nn.Parameter(torch.zeros(1, 3, 1, 1))

    def forward(self, x: torch.Tensor, style: torch.Tensor, skip: torch.Tensor | None = None) -> torch.Tensor:
        out = self.conv(x, style) + self.bias
        if skip is not None:
            out = out + F.interpolate(skip, scale_factor=2.0, mode="bilinear", align_corners=False)
        return out


class _StyleGenerator(nn.Module):
    """rosinality's StyleGAN2 `Generator` for 16x16 images: a mapping network (PixelNorm, two
    EqualLinear layers with lr_mul 0.01), a learned 4x4 constant, styled convolutions with noise
    injection at 4, 8 and 16 pixels, skip-connected ToRGB outputs."""

    def __init__(self, style_dim: int = 32, channels: int = 24) -> None:
        super().__init__()
        self.style_dim = style_dim
        self.style = nn.Sequential(
            *[_EqualLinear(style_dim, style_dim, lr_mul=0.01, activation=True) for _ in range(2)]
        )
        self.input = nn.Parameter(torch.randn(1, channels, 4, 4))
        self.conv1 = _StyledConv(channels, channels, style_dim)
        self.to_rgb1 = _ToRGB(channels, style_dim, upsample=False)
        self.convs = nn.ModuleList()
        self.to_rgbs = nn.ModuleList()
        for _ in range(2):
            self.convs.append(_StyledConv(channels, channels, style_dim, upsample=True))
            self.convs.append(_StyledConv(channels, channels, style_dim))
            self.to_rgbs.append(_ToRGB(channels, style_dim))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        w = self.style(z * torch.rsqrt(z.pow(2).mean(1, keepdim=True) + 1e-8))
        out = self.conv1(self.input.repeat(z.size(0), 1, 1, 1), w)
        skip = self.to_rgb1(out, w)
        for i, to_rgb in enumerate(self.to_rgbs):
            out = self.convs[2 * i + 1](self.convs[2 * i](out, w), w)
            skip = to_rgb(out, w, skip)
        return skip


class _EqualConv2d(nn.Module):
    def __init__(
        self, cin: int, cout: int, k: int, bias: bool = True, activate: bool = True, down: bool = False
    ):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(cout, cin, k, k))
        self.bias = nn.Parameter(torch.zeros(cout)) if bias else None
        self.scale, self.k, self.activate, self.down = 1 / math.sqrt(cin * k * k), k, activate, down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.down:
            x = F.avg_pool2d(x, 2)
        out = F.conv2d(x, self.weight * self.scale, self.bias, padding=self.k // 2)
        return F.leaky_relu(out, 0.2) * math.sqrt(2) if self.activate else out


class _StyleDiscriminator(nn.Module):
    """rosinality's StyleGAN2 `Discriminator` for 16x16: FromRGB, two residual blocks that halve
    the resolution (the skip a 1x1 convolution, the sum divided by sqrt 2), the minibatch
    standard deviation channel (groups of 4), a 3x3 convolution and two EqualLinear layers."""

    def __init__(self, channels: int = 24) -> None:
        super().__init__()
        self.from_rgb = _EqualConv2d(3, channels, 1)
        self.blocks = nn.ModuleList()
        for _ in range(2):
            self.blocks.append(nn.ModuleList([
                _EqualConv2d(channels, channels, 3), _EqualConv2d(channels, channels, 3, down=True),
                _EqualConv2d(channels, channels, 1, bias=False, activate=False, down=True),
            ]))  # fmt: skip
        self.final_conv = _EqualConv2d(channels + 1, channels, 3)
        self.final_linear = nn.Sequential(
            _EqualLinear(channels * 16, channels, activation=True), _EqualLinear(channels, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.from_rgb(x)
        for conv1, conv2, skip in self.blocks:
            out = (conv2(conv1(out)) + skip(out)) / math.sqrt(2)
        b, c, h, w = out.shape
        group = min(b, 4)
        stddev = out.view(group, -1, 1, c, h, w)
        stddev = torch.sqrt(stddev.var(0, unbiased=False) + 1e-8).mean([2, 3, 4], keepdim=True).squeeze(2)
        stddev = stddev.repeat(group, 1, h, w)
        out = self.final_conv(torch.cat([out, stddev], 1))
        return self.final_linear(out.view(b, -1))


def stylegan2_lazy_r1_modulated_convs(
    path: str, iters: int = 120, seed: int = 0, bug: str | None = None
) -> list[float]:
    """rosinality/stylegan2-pytorch's `train.py` on 16x16 cartoon faces (uint8, scaled to
    [-1, 1], random horizontal flips): the discriminator's step (`requires_grad(generator,
    False)`, `requires_grad(discriminator, True)`, the logistic loss `softplus(-real) +
    softplus(fake)`), the lazy R1 penalty every 16 steps (r1 10, scaled by 16), the generator's
    step (the toggles the other way round, the non-saturating loss `softplus(-fake)`), Adam with
    the lazy-regularization ratios (lr 0.002 x ratio, betas (0, 0.99^ratio)), batches of 8,
    `accumulate` into `g_ema` with decay 0.5^(32 / 10000); path-length regularization and style
    mixing off, as StyleGAN2-ADA's small-image `cifar` configuration has them. The losses are the
    generator's, around 0.7 to 1.5 as the two players balance."""
    g = _seed(seed)
    faces = _faces(g, 512)
    data = faces.permute(0, 3, 1, 2).float() / 127.5 - 1
    generator = _StyleGenerator()
    discriminator = _StyleDiscriminator()
    g_ema = _StyleGenerator()
    g_ema.eval()

    def accumulate(model1: nn.Module, model2: nn.Module, decay: float = 0.999) -> None:
        par1, par2 = dict(model1.named_parameters()), dict(model2.named_parameters())
        for k in par1:
            par1[k].data.mul_(decay).add_(par2[k].data, alpha=1 - decay)

    def requires_grad(model: nn.Module, flag: bool = True) -> None:
        for p in model.parameters():
            p.requires_grad = flag

    accumulate(g_ema, generator, 0)
    d_reg_every, g_reg_every, r1 = 16, 4, 10.0
    g_reg_ratio, d_reg_ratio = g_reg_every / (g_reg_every + 1), d_reg_every / (d_reg_every + 1)
    g_optim = torch.optim.Adam(
        generator.parameters(), lr=0.002 * g_reg_ratio, betas=(0**g_reg_ratio, 0.99**g_reg_ratio)
    )
    d_optim = torch.optim.Adam(
        discriminator.parameters(), lr=0.002 * d_reg_ratio, betas=(0**d_reg_ratio, 0.99**d_reg_ratio)
    )
    hook = Hook(path)
    hook.register_module(generator, name="generator")
    hook.register_module(discriminator, name="discriminator")
    accum = 0.5 ** (32 / (10 * 1000))
    batch = 8
    losses: list[float] = []
    for i in range(iters):
        idx = torch.randint(0, len(data), (batch,), generator=g)
        real_img = data[idx]
        flip = torch.rand(batch, generator=g) < 0.5
        real_img = torch.where(flip[:, None, None, None], real_img.flip(3), real_img)

        requires_grad(generator, False)
        requires_grad(discriminator, True)
        noise = torch.randn(batch, generator.style_dim, generator=g)
        fake_img = generator(noise)
        fake_pred, real_pred = discriminator(fake_img), discriminator(real_img)
        d_loss = F.softplus(-real_pred).mean() + F.softplus(fake_pred).mean()
        discriminator.zero_grad()
        d_loss.backward()
        d_optim.step()

        if i % d_reg_every == 0:
            real_img.requires_grad = True
            real_pred = discriminator(real_img)
            (grad_real,) = torch.autograd.grad(outputs=real_pred.sum(), inputs=real_img, create_graph=True)
            r1_loss = grad_real.pow(2).reshape(grad_real.shape[0], -1).sum(1).mean()
            discriminator.zero_grad()
            (r1 / 2 * r1_loss * d_reg_every + 0 * real_pred[0]).backward()
            d_optim.step()

        if bug == "frozen_by_mistake":
            # bug: the generator step's two toggles pasted from the discriminator step above
            requires_grad(generator, False)
            requires_grad(discriminator, True)
        else:
            requires_grad(generator, True)
            requires_grad(discriminator, False)
        noise = torch.randn(batch, generator.style_dim, generator=g)
        fake_pred = discriminator(generator(noise))
        g_loss = F.softplus(-fake_pred).mean()
        generator.zero_grad()
        g_loss.backward()
        g_optim.step()
        accumulate(g_ema, generator, accum)
        losses.append(g_loss.item())
        if i % 30 == 0 or i == iters - 1:
            print(f"{i}: d: {d_loss.item():.4f}; g: {g_loss.item():.4f}; r1: {r1_loss.item():.4f}; "
                  f"real score {real_pred.mean().item():.3f}; fake score {fake_pred.mean().item():.3f}")  # fmt: skip
    hook.close()
    with torch.no_grad():
        sample = generator(torch.randn(256, generator.style_dim, generator=g))
    print(
        f"samples: mean {sample.mean().item():.3f} std {sample.std().item():.3f} "
        f"(data mean {data.mean().item():.3f} std {data.std().item():.3f})"
    )
    return losses


# ============================================================================= DeepSDF: an auto-decoder of signed distances


def _shape_sdf(kind: int, params: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """The signed distance of an analytic shape at points `p` (n, 3): a sphere, a box, a torus,
    a capsule or a capped cylinder, each with its own sizes and an offset centre."""
    q = p - params[:3]
    a, b, c = params[3].item(), params[4].item(), params[5].item()
    if kind == 0:
        return q.norm(dim=1) - a
    if kind == 1:
        d = q.abs() - torch.tensor([a, b, c])
        return d.clamp(min=0).norm(dim=1) + d.max(1).values.clamp(max=0)
    if kind == 2:
        ring = torch.stack([q[:, [0, 2]].norm(dim=1) - a, q[:, 1]], 1)
        return ring.norm(dim=1) - 0.4 * b
    if kind == 3:
        h = q[:, 1].clamp(-b, b)
        return (q - torch.stack([torch.zeros_like(h), h, torch.zeros_like(h)], 1)).norm(dim=1) - 0.6 * a
    d = torch.stack([q[:, [0, 2]].norm(dim=1) - a, q[:, 1].abs() - b], 1)
    return d.max(1).values.clamp(max=0) + d.clamp(min=0).norm(dim=1)


def _sdf_samples(
    g: torch.Generator, n_shapes: int, n_points: int = 3000
) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSDF's preprocessing for analytic shapes: per shape, points pushed onto the surface
    from random starts (a few steps of `p - sdf(p) grad sdf(p)`), then perturbed with the two
    standard deviations of its near-surface sampling (0.05 and 0.016), plus 10 % uniform points
    in the unit cube; returns the points (shapes, n, 3) and their signed distances."""
    points, sdfs = torch.zeros(n_shapes, n_points, 3), torch.zeros(n_shapes, n_points)
    for s in range(n_shapes):
        kind = int(torch.randint(0, 5, (1,), generator=g))
        params = torch.cat([0.15 * torch.randn(3, generator=g), 0.2 + 0.3 * torch.rand(3, generator=g)])
        near = n_points * 9 // 10
        p = torch.rand(near, 3, generator=g) * 1.6 - 0.8
        for _ in range(4):
            p = p.detach().requires_grad_(True)
            d = _shape_sdf(kind, params, p)
            (grad,) = torch.autograd.grad(d.sum(), p)
            p = p - d[:, None] * grad / grad.norm(dim=1, keepdim=True).clamp(min=1e-6)
        p = p.detach()
        std = torch.where(torch.rand(near, 1, generator=g) < 0.5, 0.05, 0.016)
        p = torch.cat(
            [p + std * torch.randn(near, 3, generator=g), torch.rand(n_points - near, 3, generator=g) * 2 - 1]
        )
        p = p[torch.randperm(n_points, generator=g)]
        points[s], sdfs[s] = p, _shape_sdf(kind, params, p)
    return points, sdfs


class _DeepSDFDecoder(nn.Module):
    """DeepSDF's `Decoder` shrunk: five weight-normalized ReLU layers of 96 with dropout 0.2 on
    the latent code concatenated with xyz, the input fed again at the third layer (`latent_in`),
    a final tanh; initialised with the geometric initialization of SAL / IGR (hidden weights
    N(0, sqrt(2 / out)), biases 0, the last layer's weights around sqrt(pi / in) with its bias
    -0.4), so the network starts near the distance to a sphere of radius 0.4."""

    def __init__(self, latent_size: int = 16, width: int = 96, n_layers: int = 5, latent_in: int = 2,
                 radius_init: float = 0.4, dead_init: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.latent_in = latent_in
        dims = [latent_size + 3] + [width] * n_layers + [1]
        self.lins = nn.ModuleList()
        for layer in range(len(dims) - 1):
            in_dim = dims[layer] + (latent_size + 3 if layer == latent_in else 0)
            lin = nn.Linear(in_dim, dims[layer + 1])
            if layer == len(dims) - 2:
                nn.init.normal_(lin.weight, mean=math.sqrt(math.pi) / math.sqrt(in_dim), std=1e-4)
                nn.init.constant_(lin.bias, -radius_init)
            else:
                nn.init.normal_(lin.weight, 0.0, math.sqrt(2) / math.sqrt(dims[layer + 1]))
                nn.init.constant_(lin.bias, 0.0)
            if dead_init:
                # bug: the last layer's bias line dedented out of its `if` in the init loop, so every
                # layer starts with the bias -radius_init in front of its ReLU
                nn.init.constant_(lin.bias, -radius_init)
            self.lins.append(nn.utils.parametrizations.weight_norm(lin))
        self.dropout = nn.Dropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inp = x
        for layer, lin in enumerate(self.lins):
            if layer == self.latent_in:
                x = torch.cat([x, inp], 1)
            x = lin(x)
            if layer < len(self.lins) - 1:
                x = self.dropout(F.relu(x))
        return torch.tanh(x)


def deepsdf_auto_decoder(path: str, epochs: int = 60, seed: int = 0, bug: str | None = None) -> list[float]:
    """facebookresearch/DeepSDF's `train_deep_sdf.py` (Park et al. 2019) on 24 analytic shapes:
    one latent code per shape in an `nn.Embedding` (std 1 / sqrt(16)) trained with the decoder
    (the auto-decoder), 8 scenes of 192 samples a batch, the L1 of the distances clamped at
    0.1 summed over the samples and divided by their number, the code regularization 1e-4 x
    min(1, epoch / 100) x the code norms, Adam with the decoder at 2e-3 and the codes at 4e-3
    (four times the specs' 5e-4 and 1e-3 for a run of 60 epochs) halved every 25 epochs
    (`StepLearningRateSchedule`, 500 in the specs), and every 20 epochs the clamped L1 on held-out
    samples of the same shapes in `decoder.eval()`."""
    g = _seed(seed)
    num_scenes, latent_size, clamp_dist, code_reg_lambda = 24, 16, 0.1, 1e-4
    all_points, all_sdfs = _sdf_samples(g, num_scenes, 3500)
    points, sdfs = all_points[:, :3000], all_sdfs[:, :3000]
    test_points, test_sdfs = all_points[:, 3000:], all_sdfs[:, 3000:]
    decoder = _DeepSDFDecoder(latent_size, dead_init=bug == "dead_relu_init")
    lat_vecs = nn.Embedding(num_scenes, latent_size, max_norm=1.0)
    nn.init.normal_(lat_vecs.weight.data, 0.0, 1.0 / math.sqrt(latent_size))
    optimizer_all = torch.optim.Adam([
        {"params": decoder.parameters(), "lr": 0.002}, {"params": lat_vecs.parameters(), "lr": 0.004},
    ])  # fmt: skip
    hook = Hook(path)
    hook.register_module(decoder)
    loss_l1 = nn.L1Loss(reduction="sum")
    hook.register_loss(loss_l1)
    losses: list[float] = []
    for epoch in range(1, epochs + 1):
        decoder.train()
        for group, initial in zip(optimizer_all.param_groups, (0.002, 0.004), strict=True):
            group["lr"] = initial * 0.5 ** (epoch // 25)
        scene_order = torch.randperm(num_scenes, generator=g)
        for i in range(0, num_scenes, 8):
            indices = scene_order[i : i + 8]
            pick = torch.randint(0, points.size(1), (len(indices), 192), generator=g)
            xyz = torch.gather(points[indices], 1, pick[..., None].expand(-1, -1, 3)).reshape(-1, 3)
            sdf_gt = torch.gather(sdfs[indices], 1, pick).reshape(-1, 1).clamp(-clamp_dist, clamp_dist)
            num_sdf_samples = xyz.shape[0]
            batch_vecs = lat_vecs(indices.repeat_interleave(192))
            optimizer_all.zero_grad()
            pred_sdf = decoder(torch.cat([batch_vecs, xyz], 1)).clamp(-clamp_dist, clamp_dist)
            batch_loss = loss_l1(pred_sdf, sdf_gt) / num_sdf_samples
            l2_size_loss = torch.sum(torch.norm(batch_vecs, dim=1))
            batch_loss = batch_loss + code_reg_lambda * min(1, epoch / 100) * l2_size_loss / num_sdf_samples
            batch_loss.backward()
            optimizer_all.step()
            losses.append(batch_loss.item())
        if epoch % 20 == 0:
            decoder.eval()
            with torch.no_grad():
                xyz = test_points[:, :500].reshape(-1, 3)
                vecs = lat_vecs(torch.arange(num_scenes).repeat_interleave(500))
                pred = decoder(torch.cat([vecs, xyz], 1)).clamp(-clamp_dist, clamp_dist)
                err = (
                    (pred - test_sdfs[:, :500].reshape(-1, 1).clamp(-clamp_dist, clamp_dist))
                    .abs()
                    .mean()
                    .item()
                )
            print(f"epoch {epoch} loss {np.mean(losses[-60:]):.5f} fresh-sample clamped L1 {err:.5f}")
    hook.close()
    return losses


# ============================================================================= DUQ: deterministic uncertainty quantification


def _make_moons(g: torch.Generator, n: int, noise: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's `make_moons`: two interleaving half circles with Gaussian noise."""
    n_out = n // 2
    n_in = n - n_out
    t_out, t_in = torch.linspace(0, math.pi, n_out), torch.linspace(0, math.pi, n_in)
    x = torch.cat([torch.stack([torch.cos(t_out), torch.sin(t_out)], 1),
                   torch.stack([1 - torch.cos(t_in), 1 - torch.sin(t_in) - 0.5], 1)])  # fmt: skip
    y = torch.cat([torch.zeros(n_out, dtype=torch.long), torch.ones(n_in, dtype=torch.long)])
    x = x + noise * torch.randn(x.shape, generator=g)
    perm = torch.randperm(n, generator=g)
    return x[perm], y[perm]


class _ModelBilinear(nn.Module):
    """DUQ's `Model_bilinear` (van Amersfoort et al. 2020) from its two-moons notebook: a feature
    extractor of three ReLU layers of 20, a weight tensor mapping the features to one 10-D
    embedding per class, the RBF kernel (length scale 0.3) between each class's embedding and
    its centroid, the centroids kept as exponential moving averages (gamma 0.99) of the class
    embeddings outside the gradient."""

    def __init__(self, features: int, num_embeddings: int, sigmoid_depth: int = 0) -> None:
        super().__init__()
        self.gamma, self.sigma = 0.99, 0.3
        embedding_size = 10
        if sigmoid_depth:
            # bug: the feature extractor made "deeper" as eight sigmoid layers
            layers: list[nn.Module] = [nn.Linear(2, features), nn.Sigmoid()]
            for _ in range(sigmoid_depth - 1):
                layers += [nn.Linear(features, features), nn.Sigmoid()]
            self.feature_extractor = nn.Sequential(*layers)
        else:
            self.feature_extractor = nn.Sequential(
                nn.Linear(2, features), nn.ReLU(), nn.Linear(features, features), nn.ReLU(),
                nn.Linear(features, features), nn.ReLU(),
            )  # fmt: skip
        self.W = nn.Parameter(torch.normal(torch.zeros(embedding_size, num_embeddings, features), 1))
        self.register_buffer("N", torch.ones(num_embeddings) * 20)
        self.register_buffer("m", torch.normal(torch.zeros(embedding_size, num_embeddings), 1) * 20)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("ij,mnj->imn", self.feature_extractor(x), self.W)

    def bilinear(self, z: torch.Tensor) -> torch.Tensor:
        embeddings = self.m / self.N.unsqueeze(0)
        diff = z - embeddings.unsqueeze(0)
        return (-(diff**2)).mean(1).div(2 * self.sigma**2).exp()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.embed(x)
        return z, self.bilinear(z)

    def update_embeddings(self, x: torch.Tensor, y: torch.Tensor) -> None:
        z = self.embed(x)
        self.N = torch.max(self.gamma * self.N + (1 - self.gamma) * y.sum(0), torch.ones_like(self.N))
        features_sum = torch.einsum("ijk,ik->jk", z, y)
        self.m = self.gamma * self.m + (1 - self.gamma) * features_sum


def duq_two_moons_gradient_penalty(
    path: str, max_epochs: int = 30, seed: int = 0, bug: str | None = None
) -> list[float]:
    """y0ast/DUQ's two-moons training (its notebook's ignite `step` written as a loop): 1500
    points with noise 0.1, batches of 64 (`drop_last`), the binary cross-entropy between the
    kernel values and the one-hot labels plus the two-sided gradient penalty (weight 1) on the
    inputs through `create_graph`, SGD 0.01 with momentum 0.9 and weight decay 1e-4, the
    centroids updated under `no_grad` after each step, 30 epochs; the test accuracy and the mean
    certainty (the largest kernel value) on the test moons and far from them each 10 epochs."""
    g = _seed(seed)
    x_train, y_train = _make_moons(g, 1500)
    x_test, y_test = _make_moons(g, 200)
    far = 4 * torch.randn(500, 2, generator=g) + torch.tensor([0.5, 0.25])
    far = far[(far - torch.tensor([0.5, 0.25])).norm(dim=1) > 3]
    num_classes, batch_size, l_gradient_penalty = 2, 64, 1.0
    model = _ModelBilinear(20, num_classes, sigmoid_depth=8 if bug == "deep_sigmoid" else 0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    hook = Hook(path)
    hook.register_module(model)

    def calc_gradient_penalty(x: torch.Tensor, y_pred: torch.Tensor) -> torch.Tensor:
        gradients = torch.autograd.grad(outputs=y_pred, inputs=x, grad_outputs=torch.ones_like(y_pred),
                                        create_graph=True)[0]  # fmt: skip
        grad_norm = gradients.flatten(start_dim=1).norm(2, dim=1)
        return ((grad_norm - 1) ** 2).mean()

    losses: list[float] = []
    for epoch in range(1, max_epochs + 1):
        perm = torch.randperm(len(x_train), generator=g)
        for i in range(0, len(perm) - batch_size + 1, batch_size):
            model.train()
            optimizer.zero_grad()
            x, y = x_train[perm[i : i + batch_size]].clone(), y_train[perm[i : i + batch_size]]
            x.requires_grad_(True)
            z, y_pred = model(x)
            y = F.one_hot(y, num_classes).float()
            loss = F.binary_cross_entropy(y_pred, y)
            if l_gradient_penalty > 0:
                loss = loss + l_gradient_penalty * calc_gradient_penalty(x, y_pred)
            loss.backward()
            optimizer.step()
            x.requires_grad_(False)
            with torch.no_grad():
                model.update_embeddings(x, y)
            losses.append(loss.item())
        if epoch % 10 == 0:
            model.eval()
            with torch.no_grad():
                _, y_pred = model(x_test)
                acc = (y_pred.argmax(1) == y_test).float().mean().item()
                far_certainty = model(far)[1].max(1).values.mean().item()
            print(f"Test Results - Epoch: {epoch} Acc: {acc:.4f} BCE: {np.mean(losses[-23:]):.2f} "
                  f"certainty on the moons {y_pred.max(1).values.mean().item():.3f}, far away {far_certainty:.3f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= PFN: a prior-data fitted network


def _mlp_prior_datasets(
    g: torch.Generator, batch: int, n: int = 48, max_features: int = 6, max_classes: int = 3
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of classification datasets drawn from a TabPFN-style prior: 2 to 6 correlated
    Gaussian features, the labels a random tanh MLP's noisy output cut at random quantiles into
    2 or 3 classes (their order permuted), the features standardized per dataset and padded with
    zeros to 6; returns x (batch, n, 6) and y (batch, n)."""
    xs, ys = torch.zeros(batch, n, max_features), torch.zeros(batch, n, dtype=torch.long)
    for b in range(batch):
        d = int(torch.randint(2, max_features + 1, (1,), generator=g))
        x = torch.randn(n, d, generator=g) @ (torch.eye(d) + 0.5 * torch.randn(d, d, generator=g))
        w1 = torch.randn(d, 16, generator=g) * (0.5 + 1.5 * float(torch.rand(1, generator=g)))
        f = torch.tanh(x @ w1 + torch.randn(16, generator=g)) @ torch.randn(16, generator=g)
        f = f + 0.1 * f.std() * torch.randn(n, generator=g)
        k = int(torch.randint(2, max_classes + 1, (1,), generator=g))
        cuts = torch.quantile(f, torch.sort(0.2 + 0.6 * torch.rand(k - 1, generator=g)).values)
        y = torch.bucketize(f, cuts)
        ys[b] = torch.randperm(k, generator=g)[y]
        xs[b, :, :d] = (x - x.mean(0)) / (x.std(0) + 1e-6)
    return xs, ys


class _PFNTransformer(nn.Module):
    """The PFN of Muller et al. (2022): each training point embedded as its features' linear
    encoding plus its label's embedding, each test point as its features' alone, a transformer
    encoder whose attention mask lets every position attend to the training points only, a
    linear decoder to class logits at the test positions."""

    def __init__(self, n_features: int = 6, n_classes: int = 3, d_model: int = 48, n_layers: int = 2) -> None:
        super().__init__()
        self.encoder = nn.Linear(n_features, d_model)
        self.y_encoder = nn.Embedding(n_classes, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, 4, 2 * d_model, dropout=0.0, activation="gelu", batch_first=True
        )
        self.transformer = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.decoder = nn.Sequential(
            nn.Linear(d_model, 2 * d_model), nn.GELU(), nn.Linear(2 * d_model, n_classes)
        )

    def forward(self, x: torch.Tensor, y_train: torch.Tensor, single_eval_pos: int) -> torch.Tensor:
        h = self.encoder(x)
        h = torch.cat([h[:, :single_eval_pos] + self.y_encoder(y_train), h[:, single_eval_pos:]], 1)
        n = x.size(1)
        mask = torch.zeros(n, n)
        mask[:, single_eval_pos:] = float("-inf")
        return self.decoder(self.transformer(h, mask=mask)[:, single_eval_pos:])


def pfn_tabular_prior_fitting(path: str, steps: int = 200, seed: int = 0) -> list[float]:
    """Prior-data fitted networks (Muller et al. 2022, the training of TabPFN's first version)
    shrunk: every step a fresh batch of 16 datasets from the prior, 36 of their 48 points given
    with labels and the other 12 to classify, `CrossEntropyLoss` at the test positions, AdamW 1e-3
    with a linear warm-up over 10 % of the steps into a cosine decay, clipping at 1; every 50
    steps the accuracy on 64 new datasets beside a 1-nearest-neighbour baseline on the same
    points. The loss is noisy (each batch a new set of tasks) and falls slowly."""
    g = _seed(seed)
    model = _PFNTransformer()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    warmup = steps // 10
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (
            (s + 1) / warmup
            if s < warmup
            else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup)))
        ),
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    single_eval_pos = 36
    val_x, val_y = _mlp_prior_datasets(torch.Generator().manual_seed(seed + 2612), 64)
    losses: list[float] = []
    for step in range(steps):
        model.train()
        x, y = _mlp_prior_datasets(g, 16)
        logits = model(x, y[:, :single_eval_pos], single_eval_pos)
        loss = criterion(logits.reshape(-1, logits.size(-1)), y[:, single_eval_pos:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                pred = model(val_x, val_y[:, :single_eval_pos], single_eval_pos).argmax(-1)
                acc = (pred == val_y[:, single_eval_pos:]).float().mean().item()
                dist = torch.cdist(val_x[:, single_eval_pos:], val_x[:, :single_eval_pos])
                nn_pred = torch.gather(val_y[:, :single_eval_pos], 1, dist.argmin(-1))
                nn_acc = (nn_pred == val_y[:, single_eval_pos:]).float().mean().item()
            print(
                f"step {step + 1} loss {np.mean(losses[-50:]):.4f} prior-test accuracy {acc:.3f} (1-NN {nn_acc:.3f})"
            )
    hook.close()
    return losses


# ============================================================================= RepVGG: structural re-parameterization


class _RepVGGBlock(nn.Module):
    """RepVGG's `RepVGGBlock` (Ding et al. 2021): in training a 3x3 convolution with BatchNorm, a
    1x1 convolution with BatchNorm and (when the shapes allow) an identity BatchNorm, summed and
    through a ReLU; `get_equivalent_kernel_bias` folds the three branches into one 3x3
    convolution for deployment."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()

        def conv_bn(k: int, padding: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(cin, cout, k, stride, padding, bias=False), nn.BatchNorm2d(cout))

        self.rbr_identity = nn.BatchNorm2d(cin) if cout == cin and stride == 1 else None
        self.rbr_dense, self.rbr_1x1 = conv_bn(3, 1), conv_bn(1, 0)
        self.rbr_reparam: nn.Conv2d | None = None
        self.cin, self.cout, self.stride = cin, cout, stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.rbr_reparam is not None:
            return F.relu(self.rbr_reparam(x))
        id_out = 0 if self.rbr_identity is None else self.rbr_identity(x)
        return F.relu(self.rbr_dense(x) + self.rbr_1x1(x) + id_out)

    @staticmethod
    def _fuse_bn(kernel: torch.Tensor, bn: nn.BatchNorm2d) -> tuple[torch.Tensor, torch.Tensor]:
        std = (bn.running_var + bn.eps).sqrt()
        t = (bn.weight / std).reshape(-1, 1, 1, 1)
        return kernel * t, bn.bias - bn.running_mean * bn.weight / std

    def switch_to_deploy(self) -> None:
        k3, b3 = self._fuse_bn(self.rbr_dense[0].weight, self.rbr_dense[1])
        k1, b1 = self._fuse_bn(F.pad(self.rbr_1x1[0].weight, [1, 1, 1, 1]), self.rbr_1x1[1])
        kernel, bias = k3 + k1, b3 + b1
        if self.rbr_identity is not None:
            identity = torch.zeros(self.cin, self.cin, 3, 3)
            identity[torch.arange(self.cin), torch.arange(self.cin), 1, 1] = 1.0
            kid, bid = self._fuse_bn(identity, self.rbr_identity)
            kernel, bias = kernel + kid, bias + bid
        self.rbr_reparam = nn.Conv2d(self.cin, self.cout, 3, self.stride, 1, bias=True)
        self.rbr_reparam.weight.data, self.rbr_reparam.bias.data = kernel.detach(), bias.detach()
        del self.rbr_dense, self.rbr_1x1, self.rbr_identity
        self.rbr_identity = None


def repvgg_structural_reparam(
    path: str, epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """DingXiaoH/RepVGG's `train.py` recipe on 16x16 RGB glyphs of 10 classes: a RepVGG-A-like
    net (stages of 1, 2 and 2 blocks of widths 16, 32 and 64, the first block of each stage with
    stride 2, global average pooling, a linear head), the loader's `RandomCrop(16, padding=2)`,
    `RandomHorizontalFlip`, `ToTensor` and `Normalize` with the dataset's mean and std, label
    smoothing 0.1, SGD momentum 0.9 with weight decay 1e-4 at 0.1, one epoch of linear warm-up
    then cosine, batches of 64, a validation pass each epoch; after training
    `repvgg_model_convert` folds every block into a single 3x3 convolution and the deployed
    model's outputs are checked against the training-time model's."""
    g = _seed(seed)
    images, labels = _rgb_glyphs(g, 3000, 10)
    train_x, train_y, val_x, val_y = images[:2560], labels[:2560], images[2560:], labels[2560:]
    mean = (train_x.float() / 255).mean((0, 2, 3))[:, None, None]
    std = (train_x.float() / 255).std((0, 2, 3))[:, None, None]

    def to_tensor(x: torch.Tensor) -> torch.Tensor:
        if bug == "inputs_x255":  # bug: the user's uint8 loader casts with .float(), without ToTensor's / 255
            return (x.float() - mean) / std
        return (x.float() / 255.0 - mean) / std

    def augment(x: torch.Tensor) -> torch.Tensor:
        padded = F.pad(x, (2, 2, 2, 2))
        out = torch.empty_like(x)
        for i in range(len(x)):
            oy, ox = torch.randint(0, 5, (2,), generator=g).tolist()
            out[i] = padded[i, :, oy : oy + 16, ox : ox + 16]
        flip = torch.rand(len(x), generator=g) < 0.5
        return torch.where(flip[:, None, None, None], out.flip(3), out)

    blocks, cin = [], 3
    for width, n in ((16, 1), (32, 2), (64, 2)):
        for j in range(n):
            blocks.append(_RepVGGBlock(cin, width, stride=2 if j == 0 else 1))
            cin = width
    model = nn.Sequential(*blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    steps_per_epoch = len(train_x) // 64
    total = epochs * steps_per_epoch
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (s + 1) / steps_per_epoch if s < steps_per_epoch
        else 0.5 * (1 + math.cos(math.pi * (s - steps_per_epoch) / (total - steps_per_epoch))),
    )  # fmt: skip
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    val_t = to_tensor(val_x)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(train_x), generator=g)
        for i in range(steps_per_epoch):
            idx = perm[i * 64 : (i + 1) * 64]
            images_t = to_tensor(augment(train_x[idx]))
            output = model(images_t)
            loss = criterion(output, train_y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val_out = model(val_t)
            acc1 = (val_out.argmax(1) == val_y).float().mean().item()
        print(f"epoch {epoch + 1} train loss {np.mean(losses[-steps_per_epoch:]):.4f} "
              f"val loss {F.cross_entropy(val_out, val_y).item():.4f} acc@1 {acc1:.3f}")  # fmt: skip
    hook.close()
    deploy = copy.deepcopy(model)
    for module in deploy.modules():
        if isinstance(module, _RepVGGBlock):
            module.switch_to_deploy()
    with torch.no_grad():
        diff = (deploy(val_t) - val_out).abs().max().item()
        deploy_acc = (deploy(val_t).argmax(1) == val_y).float().mean().item()
    print(f"deployed model: acc@1 {deploy_acc:.3f}, largest difference from the trained one {diff:.2e}")
    return losses


# ============================================================================= Lightning: Autoformer


def _etth_like(g: torch.Generator, hours: int = 1300) -> torch.Tensor:
    """An ETTh1-like hourly table of seven columns (six loads and the oil temperature `OT`):
    daily and weekly cycles of their own amplitudes and phases, a slow random-walk level, noise,
    and OT following a smoothed mix of the loads."""
    t = torch.arange(hours).float()
    cols = []
    for _ in range(6):
        daily = (0.5 + float(torch.rand(1, generator=g))) * torch.sin(
            2 * math.pi * t / 24 + 6 * float(torch.rand(1, generator=g))
        )
        weekly = (
            0.5
            * float(torch.rand(1, generator=g))
            * torch.sin(2 * math.pi * t / 168 + 6 * float(torch.rand(1, generator=g)))
        )
        level = torch.cumsum(0.03 * torch.randn(hours, generator=g), 0)
        cols.append(5 + daily + weekly + level + 0.2 * torch.randn(hours, generator=g))
    loads = torch.stack(cols, 1)
    mix = loads @ torch.softmax(torch.randn(6, generator=g), 0)
    ot = F.avg_pool1d(F.pad(mix[None, None], (11, 0), mode="replicate"), 12, 1)[0, 0] * 2 + 0.1 * torch.randn(
        hours, generator=g
    )
    return torch.cat([loads, ot[:, None]], 1)


class _SeriesDecomp(nn.Module):
    """Autoformer's `series_decomp`: the trend a moving average (kernel 25, the ends padded by
    repetition), the seasonal part what is left."""

    def __init__(self, kernel_size: int = 25) -> None:
        super().__init__()
        self.kernel_size = kernel_size

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        front = x[:, 0:1, :].repeat(1, (self.kernel_size - 1) // 2, 1)
        end = x[:, -1:, :].repeat(1, (self.kernel_size - 1) // 2, 1)
        moving_mean = F.avg_pool1d(
            torch.cat([front, x, end], 1).permute(0, 2, 1), self.kernel_size, 1
        ).permute(0, 2, 1)
        return x - moving_mean, moving_mean


class _AutoCorrelation(nn.Module):
    """Autoformer's `AutoCorrelationLayer`: period-based dependencies from the FFT
    autocorrelation of queries and keys, the values rolled by the top-k delays (k = factor x
    log L) and summed with softmax weights (delays shared over the batch in training, per series
    in evaluation)."""

    def __init__(self, d_model: int, n_heads: int, factor: int = 1) -> None:
        super().__init__()
        self.factor, self.n_heads = factor, n_heads
        self.query_projection, self.key_projection = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.value_projection, self.out_projection = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def time_delay_agg(self, values: torch.Tensor, corr: torch.Tensor) -> torch.Tensor:
        batch, head, channel, length = values.shape
        top_k = int(self.factor * math.log(length))
        mean_value = corr.mean(1).mean(1)
        if self.training:
            index = torch.topk(mean_value.mean(0), top_k, dim=-1)[1]
            weights = torch.stack([mean_value[:, index[i]] for i in range(top_k)], -1)
            tmp_corr = torch.softmax(weights, -1)
            agg = torch.zeros_like(values)
            for i in range(top_k):
                agg = agg + torch.roll(values, -int(index[i]), -1) * tmp_corr[:, i, None, None, None]
            return agg
        weights, delay = torch.topk(mean_value, top_k, dim=-1)
        tmp_corr = torch.softmax(weights, -1)
        init_index = torch.arange(length)[None, None, None, :].repeat(batch, head, channel, 1)
        tmp_values = values.repeat(1, 1, 1, 2)
        agg = torch.zeros_like(values)
        for i in range(top_k):
            tmp_delay = init_index + delay[:, i, None, None, None]
            agg = agg + torch.gather(tmp_values, -1, tmp_delay) * tmp_corr[:, i, None, None, None]
        return agg

    def forward(self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        b, l_q, _ = queries.shape
        s_k, h = keys.shape[1], self.n_heads
        q = self.query_projection(queries).view(b, l_q, h, -1)
        k = self.key_projection(keys).view(b, s_k, h, -1)
        v = self.value_projection(values).view(b, s_k, h, -1)
        if l_q > s_k:
            k = torch.cat([k, torch.zeros(b, l_q - s_k, h, k.size(-1))], 1)
            v = torch.cat([v, torch.zeros(b, l_q - s_k, h, v.size(-1))], 1)
        else:
            k, v = k[:, :l_q], v[:, :l_q]
        q_fft = torch.fft.rfft(q.permute(0, 2, 3, 1).contiguous(), dim=-1)
        k_fft = torch.fft.rfft(k.permute(0, 2, 3, 1).contiguous(), dim=-1)
        corr = torch.fft.irfft(q_fft * torch.conj(k_fft), n=l_q, dim=-1)
        out = self.time_delay_agg(v.permute(0, 2, 3, 1).contiguous(), corr).permute(0, 3, 1, 2)
        return self.out_projection(out.reshape(b, l_q, -1))


def lit_autoformer_ett(path: str, max_epochs: int = 5, seed: int = 0) -> list[float]:
    """Autoformer (Wu et al. 2021) as Time-Series-Library's `exp_long_term_forecasting` trains it
    on ETTh1 (`--features M`, `moving_avg` 25, `factor` 1, the `timeF` time features; `seq_len`
    48, `label_len` 24 and `pred_len` 24 here), written as a `LightningModule`: the input decomposed
    into trend and season, the decoder started from the last 24 steps' season and trend with
    zeros and the mean for the horizon, one encoder and one decoder layer (d_model 32, 4 heads,
    d_ff 64, GELU, dropout 0.05) with the progressive decomposition, the MSE, Adam 1e-4 halved
    each epoch (`lradj type1` as a `StepLR` per epoch), batches of 32, the `StandardScaler` fitted
    on the training borders, a validation loss each epoch watched by `EarlyStopping(patience=3)`
    and a `ModelCheckpoint`, then `trainer.test(ckpt_path="best")`."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    data = _etth_like(g)
    seq_len, label_len, pred_len, d_model, n_heads = 48, 24, 24, 32, 4
    n_train, n_val = 800, 200
    border1s = [0, n_train - seq_len, n_train + n_val - seq_len]
    border2s = [n_train, n_train + n_val, len(data)]
    mean, std = data[:n_train].mean(0), data[:n_train].std(0)
    data = (data - mean) / std
    hours = torch.arange(len(data)).float()
    stamp = torch.stack([(hours % 24) / 23 - 0.5, ((hours // 24) % 7) / 6 - 0.5,
                         ((hours // 24) % 30) / 29 - 0.5, ((hours // 24) % 365) / 364 - 0.5], 1)  # fmt: skip

    def split(flag: int) -> TensorDataset:
        x, mark = data[border1s[flag] : border2s[flag]], stamp[border1s[flag] : border2s[flag]]
        idx = range(len(x) - seq_len - pred_len + 1)
        seq_x = torch.stack([x[i : i + seq_len] for i in idx])
        seq_y = torch.stack([x[i + seq_len - label_len : i + seq_len + pred_len] for i in idx])
        seq_x_mark = torch.stack([mark[i : i + seq_len] for i in idx])
        seq_y_mark = torch.stack([mark[i + seq_len - label_len : i + seq_len + pred_len] for i in idx])
        return TensorDataset(seq_x, seq_y, seq_x_mark, seq_y_mark)

    class DataEmbedding(nn.Module):  # DataEmbedding_wo_pos: circular Conv1d tokens + timeF features
        def __init__(self, c_in: int) -> None:
            super().__init__()
            self.value_embedding = nn.Conv1d(c_in, d_model, 3, padding=1, padding_mode="circular", bias=False)
            self.temporal_embedding = nn.Linear(4, d_model, bias=False)
            self.dropout = nn.Dropout(0.05)

        def forward(self, x: torch.Tensor, x_mark: torch.Tensor) -> torch.Tensor:
            return self.dropout(
                self.value_embedding(x.permute(0, 2, 1)).transpose(1, 2) + self.temporal_embedding(x_mark)
            )

    class MyLayernorm(nn.Module):  # Autoformer's layer norm for the seasonal part: the time mean taken out
        def __init__(self) -> None:
            super().__init__()
            self.layernorm = nn.LayerNorm(d_model)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x_hat = self.layernorm(x)
            return x_hat - x_hat.mean(1, keepdim=True)

    class Autoformer(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.decomp = _SeriesDecomp(25)
            self.enc_embedding, self.dec_embedding = DataEmbedding(7), DataEmbedding(7)
            self.enc_attn = _AutoCorrelation(d_model, n_heads)
            self.enc_conv1, self.enc_conv2 = (
                nn.Conv1d(d_model, 64, 1, bias=False),
                nn.Conv1d(64, d_model, 1, bias=False),
            )
            self.enc_norm = MyLayernorm()
            self.dec_self_attn, self.dec_cross_attn = (
                _AutoCorrelation(d_model, n_heads),
                _AutoCorrelation(d_model, n_heads),
            )
            self.dec_conv1, self.dec_conv2 = (
                nn.Conv1d(d_model, 64, 1, bias=False),
                nn.Conv1d(64, d_model, 1, bias=False),
            )
            self.dec_trend_projection = nn.Conv1d(
                d_model, 7, 3, padding=1, padding_mode="circular", bias=False
            )
            self.dec_norm = MyLayernorm()
            self.projection = nn.Linear(d_model, 7)
            self.dropout = nn.Dropout(0.05)
            self.criterion = nn.MSELoss()

        def ffn(self, x: torch.Tensor, conv1: nn.Conv1d, conv2: nn.Conv1d) -> torch.Tensor:
            y = self.dropout(F.gelu(conv1(x.transpose(-1, 1))))
            return self.dropout(conv2(y).transpose(-1, 1))

        def forward(
            self, x_enc: torch.Tensor, x_mark_enc: torch.Tensor, x_mark_dec: torch.Tensor
        ) -> torch.Tensor:
            mean = x_enc.mean(1, keepdim=True).repeat(1, pred_len, 1)
            zeros = torch.zeros(x_enc.size(0), pred_len, x_enc.size(2))
            seasonal_init, trend_init = self.decomp(x_enc)
            trend_init = torch.cat([trend_init[:, -label_len:], mean], 1)
            seasonal_init = torch.cat([seasonal_init[:, -label_len:], zeros], 1)
            enc = self.enc_embedding(x_enc, x_mark_enc)
            enc, _ = self.decomp(enc + self.dropout(self.enc_attn(enc, enc, enc)))
            enc, _ = self.decomp(enc + self.ffn(enc, self.enc_conv1, self.enc_conv2))
            enc = self.enc_norm(enc)
            x = self.dec_embedding(seasonal_init, x_mark_dec)
            x, trend1 = self.decomp(x + self.dropout(self.dec_self_attn(x, x, x)))
            x, trend2 = self.decomp(x + self.dropout(self.dec_cross_attn(x, enc, enc)))
            x, trend3 = self.decomp(x + self.ffn(x, self.dec_conv1, self.dec_conv2))
            residual_trend = self.dec_trend_projection((trend1 + trend2 + trend3).permute(0, 2, 1)).transpose(
                1, 2
            )
            seasonal_part = self.projection(self.dec_norm(x))
            return (trend_init + residual_trend + seasonal_part)[:, -pred_len:]

        def step_loss(self, batch: Any) -> torch.Tensor:
            batch_x, batch_y, batch_x_mark, batch_y_mark = batch
            return self.criterion(self(batch_x, batch_x_mark, batch_y_mark), batch_y[:, -pred_len:])

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = self.step_loss(batch)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("val_loss", self.step_loss(batch), prog_bar=False)

        def test_step(self, batch: Any, batch_idx: int) -> None:
            self.log("test_mse", self.step_loss(batch))

        def on_validation_epoch_end(self) -> None:
            print(f"Epoch: {self.current_epoch + 1} vali loss {float(self.trainer.callback_metrics['val_loss']):.4f} "
                  f"lr {self.optimizers().param_groups[0]['lr']:.2e}")  # fmt: skip

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.Adam(self.parameters(), lr=1e-4)
            return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)]

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    history = LossHistory()
    checkpoint = ModelCheckpoint(dirpath=os.path.join(path, "checkpoints"), monitor="val_loss", save_top_k=1)
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, enable_progress_bar=False, enable_model_summary=False, logger=False,
        default_root_dir=path, max_epochs=max_epochs, num_sanity_val_steps=0,
        callbacks=[DebuggerCallback(path), history, EarlyStopping(monitor="val_loss", patience=3), checkpoint],
    )  # fmt: skip
    model = Autoformer()
    trainer.fit(
        model,
        DataLoader(split(0), batch_size=32, shuffle=True, drop_last=True, generator=g),
        DataLoader(split(1), batch_size=32),
    )
    result = trainer.test(model, DataLoader(split(2), batch_size=32), ckpt_path="best", verbose=False)
    print(f"test mse {result[0]['test_mse']:.4f} from {os.path.basename(checkpoint.best_model_path)}")
    shutil.rmtree(os.path.join(path, "checkpoints"), ignore_errors=True)
    return history.losses


# ============================================================================= HF Trainer: VideoMAE pre-training


def _moving_shapes(g: torch.Generator, n: int, frames: int = 8, size: int = 32) -> torch.Tensor:
    """`n` short RGB clips (n, frames, 3, size, size) in [0, 1], rendered without sensor noise:
    a sky-to-ground vertical gradient, and one or two discs or squares of their own colours
    moving in straight lines and bouncing off the borders."""
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    out = torch.zeros(n, frames, 3, size, size)
    for b in range(n):
        top, bottom = torch.rand(3, generator=g), torch.rand(3, generator=g)
        background = top[:, None, None] + (bottom - top)[:, None, None] * (yy / (size - 1))
        objs = []
        for _ in range(int(torch.randint(1, 3, (1,), generator=g))):
            pos = 6 + (size - 12) * torch.rand(2, generator=g)
            vel = 3 * (torch.rand(2, generator=g) - 0.5) * 2
            objs.append((pos, vel, 3 + 4 * float(torch.rand(1, generator=g)), torch.rand(3, generator=g),
                         bool(torch.rand(1, generator=g) < 0.5)))  # fmt: skip
        for t in range(frames):
            img = background
            for pos, vel, r, colour, square in objs:
                p = pos + vel * t
                p = torch.where(p < r, 2 * r - p, p)
                p = torch.where(p > size - r, 2 * (size - r) - p, p)
                if square:
                    inside = ((xx - p[0]).abs() < r) & ((yy - p[1]).abs() < r)
                else:
                    inside = (xx - p[0]) ** 2 + (yy - p[1]) ** 2 < r * r
                img = torch.where(inside, colour[:, None, None], img)
            out[b, t] = img
    return out


def hf_videomae_pretraining(path: str, seed: int = 0) -> list[float]:
    """VideoMAE self-supervised pre-training (Tong et al. 2022) through the Hugging Face
    `Trainer`, as the model's documentation and the pre-training recipes feed it: clips of 8
    frames at 32x32 normalized with the ImageNet mean and standard deviation (what
    `VideoMAEImageProcessor` does), a collator stacking `pixel_values` and drawing one tube mask
    a batch (the same spatial patches hidden in every frame pair: 75 % of them here, 90 % in the
    paper), `remove_unused_columns=False` and `label_names` set so that `evaluate` reports the loss,
    a tiny random `VideoMAEForPreTraining` (tubelets of 2 frames x 8 x 8, a 2-layer encoder of 64
    on the visible tubes only, a 1-layer decoder of 32, the MSE on the masked tubes' normalized
    pixels), AdamW 3e-3 with betas (0.9, 0.95) and weight decay 0.05, a cosine schedule after 10 %
    warm-up, batches of 8, 3 epochs with an evaluation each. The loss starts near 1 (normalized
    pixels predicted by their mean) and falls slowly."""
    from transformers import (
        PrinterCallback,
        Trainer,
        TrainingArguments,
        VideoMAEConfig,
        VideoMAEForPreTraining,
    )

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    clips = _moving_shapes(g, 320)
    mean = torch.tensor([0.485, 0.456, 0.406])[None, :, None, None]
    std = torch.tensor([0.229, 0.224, 0.225])[None, :, None, None]
    clips = (clips - mean) / std
    train_dataset = [{"pixel_values": c} for c in clips[:288]]
    eval_dataset = [{"pixel_values": c} for c in clips[288:]]
    config = VideoMAEConfig(
        image_size=32, patch_size=8, num_channels=3, num_frames=8, tubelet_size=2, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, decoder_num_attention_heads=4, decoder_hidden_size=32,
        decoder_num_hidden_layers=1, decoder_intermediate_size=64, norm_pix_loss=True,
    )  # fmt: skip
    model = VideoMAEForPreTraining(config)
    num_patches_per_frame = (config.image_size // config.patch_size) ** 2
    seq_length = (config.num_frames // config.tubelet_size) * num_patches_per_frame
    mask_gen = torch.Generator().manual_seed(seed + 2613)

    def collate_fn(examples: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        pixel_values = torch.stack([e["pixel_values"] for e in examples])
        spatial = torch.zeros(num_patches_per_frame, dtype=torch.bool)
        spatial[
            torch.randperm(num_patches_per_frame, generator=mask_gen)[: int(0.75 * num_patches_per_frame)]
        ] = True
        bool_masked_pos = spatial.repeat(seq_length // num_patches_per_frame)[None].expand(len(examples), -1)
        return {"pixel_values": pixel_values, "bool_masked_pos": bool_masked_pos}

    args = TrainingArguments(
        output_dir=os.path.join(path, "trainer"), logging_steps=1, report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=seed, save_strategy="no", eval_strategy="epoch", learning_rate=3e-3,
        weight_decay=0.05, adam_beta2=0.95, lr_scheduler_type="cosine", warmup_steps=0.1,
        per_device_train_batch_size=8, per_device_eval_batch_size=8, num_train_epochs=3, remove_unused_columns=False,
        label_names=["bool_masked_pos"],  # so that `evaluate` computes the loss of a model without `labels`
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args, train_dataset=train_dataset, eval_dataset=eval_dataset, data_collator=collate_fn,
        callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(args.output_dir, ignore_errors=True)
    print("eval losses", [round(e["eval_loss"], 4) for e in trainer.state.log_history if "eval_loss" in e])
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


# ============================================================================= Keras: denoising diffusion implicit models


def keras_ddim_diffusion(path: str, seed: int = 0) -> list[float]:
    """keras.io's "Denoising Diffusion Implicit Models" (Beres) in Keras 3 on 16x16 cartoon
    faces: a `Normalization` layer adapted on the training images, the continuous-time cosine
    schedule between signal rates 0.95 and 0.02, a residual U-Net (widths 16 and 32, one block a
    level, BatchNorm without centre or scale, swish, a sinusoidal embedding of the noise variance
    upsampled over the image, a zero-initialized output convolution) predicting the noise, the
    `DiffusionModel(keras.Model)` with its own `compile`, `train_step` under a `tf.GradientTape`
    (the mean absolute error of the noise as the loss, of the image as a metric; no `loss` key)
    and `test_step` with the EMA network (0.99 for this short run, 0.999 in the example),
    `AdamW(1e-3, weight_decay=1e-4)`, batches of 16, 3 epochs with validation data; KID left out
    (it needs InceptionV3's weights), DDIM sampling of a few images at the end."""
    import keras
    import tensorflow as tf
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images = _faces(g, 576).numpy().astype("float32") / 255.0
    image_size, batch_size, ema = 16, 16, 0.99
    min_signal_rate, max_signal_rate = 0.02, 0.95
    embedding_dims, embedding_max_frequency = 16, 1000.0
    widths, block_depth = [16, 32], 1
    train_dataset = (
        tf.data.Dataset.from_tensor_slices(images[:512])
        .shuffle(512, seed=seed)
        .batch(batch_size, drop_remainder=True)
    )
    val_dataset = tf.data.Dataset.from_tensor_slices(images[512:]).batch(batch_size, drop_remainder=True)

    @keras.saving.register_keras_serializable(package="ddim")
    def sinusoidal_embedding(x: Any) -> Any:
        frequencies = ops.exp(
            ops.linspace(ops.log(1.0), ops.log(embedding_max_frequency), embedding_dims // 2)
        )
        angular_speeds = ops.cast(2.0 * math.pi * frequencies, "float32")
        return ops.concatenate([ops.sin(angular_speeds * x), ops.cos(angular_speeds * x)], axis=3)

    def residual_block(width: int) -> Any:
        def apply(x: Any) -> Any:
            residual = x if x.shape[3] == width else layers.Conv2D(width, kernel_size=1)(x)
            x = layers.BatchNormalization(center=False, scale=False)(x)
            x = layers.Conv2D(width, kernel_size=3, padding="same", activation="swish")(x)
            x = layers.Conv2D(width, kernel_size=3, padding="same")(x)
            return layers.Add()([x, residual])

        return apply

    def get_network() -> keras.Model:
        noisy_images = keras.Input(shape=(image_size, image_size, 3))
        noise_variances = keras.Input(shape=(1, 1, 1))
        e = layers.Lambda(sinusoidal_embedding, output_shape=(1, 1, embedding_dims))(noise_variances)
        e = layers.UpSampling2D(size=image_size, interpolation="nearest")(e)
        x = layers.Conv2D(widths[0], kernel_size=1)(noisy_images)
        x = layers.Concatenate()([x, e])
        skips = []
        for width in widths[:-1]:
            for _ in range(block_depth):
                x = residual_block(width)(x)
                skips.append(x)
            x = layers.AveragePooling2D(pool_size=2)(x)
        for _ in range(block_depth):
            x = residual_block(widths[-1])(x)
        for width in reversed(widths[:-1]):
            x = layers.UpSampling2D(size=2, interpolation="bilinear")(x)
            for _ in range(block_depth):
                x = layers.Concatenate()([x, skips.pop()])
                x = residual_block(width)(x)
        x = layers.Conv2D(3, kernel_size=1, kernel_initializer="zeros")(x)
        return keras.Model([noisy_images, noise_variances], x, name="residual_unet")

    class DiffusionModel(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.normalizer = layers.Normalization()
            self.network = get_network()
            self.ema_network = keras.models.clone_model(self.network)

        def compile(self, **kwargs: Any) -> None:
            super().compile(**kwargs)
            self.noise_loss_tracker = keras.metrics.Mean(name="n_loss")
            self.image_loss_tracker = keras.metrics.Mean(name="i_loss")

        @property
        def metrics(self) -> list[Any]:
            return [self.noise_loss_tracker, self.image_loss_tracker]

        def denormalize(self, images: Any) -> Any:
            return ops.clip(self.normalizer.mean + images * self.normalizer.variance**0.5, 0.0, 1.0)

        def diffusion_schedule(self, diffusion_times: Any) -> tuple[Any, Any]:
            start_angle = ops.cast(ops.arccos(max_signal_rate), "float32")
            end_angle = ops.cast(ops.arccos(min_signal_rate), "float32")
            diffusion_angles = start_angle + diffusion_times * (end_angle - start_angle)
            return ops.sin(diffusion_angles), ops.cos(diffusion_angles)

        def denoise(
            self, noisy_images: Any, noise_rates: Any, signal_rates: Any, training: bool
        ) -> tuple[Any, Any]:
            network = self.network if training else self.ema_network
            pred_noises = network([noisy_images, noise_rates**2], training=training)
            return pred_noises, (noisy_images - noise_rates * pred_noises) / signal_rates

        def reverse_diffusion(self, initial_noise: Any, diffusion_steps: int) -> Any:
            step_size = 1.0 / diffusion_steps
            next_noisy_images = initial_noise
            for step in range(diffusion_steps):
                noisy_images = next_noisy_images
                diffusion_times = ops.ones((ops.shape(initial_noise)[0], 1, 1, 1)) - step * step_size
                noise_rates, signal_rates = self.diffusion_schedule(diffusion_times)
                pred_noises, pred_images = self.denoise(
                    noisy_images, noise_rates, signal_rates, training=False
                )
                next_noise_rates, next_signal_rates = self.diffusion_schedule(diffusion_times - step_size)
                next_noisy_images = next_signal_rates * pred_images + next_noise_rates * pred_noises
            return pred_images

        def generate(self, num_images: int, diffusion_steps: int) -> Any:
            initial_noise = keras.random.normal(shape=(num_images, image_size, image_size, 3))
            return self.denormalize(self.reverse_diffusion(initial_noise, diffusion_steps))

        def train_step(self, images: Any) -> dict[str, Any]:
            images = self.normalizer(images, training=True)
            noises = keras.random.normal(shape=(batch_size, image_size, image_size, 3))
            diffusion_times = keras.random.uniform(shape=(batch_size, 1, 1, 1), minval=0.0, maxval=1.0)
            noise_rates, signal_rates = self.diffusion_schedule(diffusion_times)
            noisy_images = signal_rates * images + noise_rates * noises
            with tf.GradientTape() as tape:
                pred_noises, pred_images = self.denoise(
                    noisy_images, noise_rates, signal_rates, training=True
                )
                noise_loss = self.loss(noises, pred_noises)
                image_loss = self.loss(images, pred_images)
            gradients = tape.gradient(noise_loss, self.network.trainable_weights)
            self.optimizer.apply_gradients(zip(gradients, self.network.trainable_weights, strict=True))
            self.noise_loss_tracker.update_state(noise_loss)
            self.image_loss_tracker.update_state(image_loss)
            for weight, ema_weight in zip(self.network.weights, self.ema_network.weights, strict=True):
                ema_weight.assign(ema * ema_weight + (1 - ema) * weight)
            return {m.name: m.result() for m in self.metrics}

        def test_step(self, images: Any) -> dict[str, Any]:
            images = self.normalizer(images, training=False)
            noises = keras.random.normal(shape=(batch_size, image_size, image_size, 3))
            diffusion_times = keras.random.uniform(shape=(batch_size, 1, 1, 1), minval=0.0, maxval=1.0)
            noise_rates, signal_rates = self.diffusion_schedule(diffusion_times)
            noisy_images = signal_rates * images + noise_rates * noises
            pred_noises, pred_images = self.denoise(noisy_images, noise_rates, signal_rates, training=False)
            self.image_loss_tracker.update_state(self.loss(images, pred_images))
            self.noise_loss_tracker.update_state(self.loss(noises, pred_noises))
            return {m.name: m.result() for m in self.metrics}

    class BatchLosses(keras.callbacks.Callback):
        """Each batch's own noise loss from the tracker's running epoch mean."""

        def __init__(self) -> None:
            super().__init__()
            self.losses: list[float] = []
            self.prev = 0.0

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.prev = 0.0

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            mean = float(logs["n_loss"])
            self.losses.append((batch + 1) * mean - batch * self.prev)
            self.prev = mean

    model = DiffusionModel()
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=1e-3, weight_decay=1e-4),
        loss=keras.losses.mean_absolute_error,
    )
    model.normalizer.adapt(train_dataset)
    history = BatchLosses()
    fit = model.fit(train_dataset, epochs=3, validation_data=val_dataset, verbose=0,
                    callbacks=[mldbg.keras.Hook(path), history])  # fmt: skip
    print(
        "n_loss",
        [round(v, 4) for v in fit.history["n_loss"]],
        "val_n_loss",
        [round(v, 4) for v in fit.history["val_n_loss"]],
    )
    generated = model.generate(num_images=16, diffusion_steps=10)
    print(
        f"generated images: mean {float(ops.mean(generated)):.3f}, std {float(ops.std(generated)):.3f} "
        f"(data {images.mean():.3f}, {images.std():.3f})"
    )
    return history.losses


# ============================================================================= PIPELINES

_compress = healthy(
    "compressai_bmshj2018_hyperprior_rate_distortion",
    "learned image compression (CompressAI)",
    compressai_scale_hyperprior,
)
_svae = healthy(
    "sentence_vae_gru_kl_annealing_word_dropout", "Sentence-VAE (KL annealing)", sentence_vae_kl_annealing
)
_nri = healthy(
    "nri_springs_gumbel_edges_mlp_decoder",
    "NRI relational inference (springs)",
    nri_springs_relational_inference,
)
_dgi = healthy("dgi_deep_graph_infomax_bilinear_discriminator", "Deep Graph Infomax", dgi_graph_infomax)
_psm = healthy(
    "psmnet_basic_stereo_soft_argmin", "PSMNet stereo matching (cost volume)", psmnet_stereo_cost_volume
)
_tent = healthy(
    "tent_batchnorm_entropy_online_adaptation", "Tent test-time adaptation", tent_bn_entropy_adaptation
)
_stylegan = healthy(
    "stylegan2_modulated_conv_lazy_r1_nonsaturating",
    "StyleGAN2 (modulated convolutions)",
    stylegan2_lazy_r1_modulated_convs,
)
_deepsdf = healthy(
    "deepsdf_auto_decoder_latent_codes_geometric_init", "DeepSDF auto-decoder", deepsdf_auto_decoder
)
_duq = healthy(
    "duq_two_moons_rbf_centroids_gradient_penalty",
    "DUQ uncertainty (RBF centroids)",
    duq_two_moons_gradient_penalty,
)
_repvgg = healthy(
    "repvgg_three_branch_blocks_reparameterized",
    "RepVGG (structural re-parameterization)",
    repvgg_structural_reparam,
)
PIPELINES: list[Any] = [
    _compress,
    buggy(_compress, "log_zero_nan"),
    healthy(
        "vmc_quantum_dot_neural_jastrow_metropolis",
        "variational Monte Carlo (neural wavefunction)",
        vmc_quantum_dot_neural_wavefunction,
    ),
    _svae,
    buggy(_svae, "softmax_before_ce"),
    _nri,
    buggy(_nri, "train_in_eval_mode"),
    _dgi,
    buggy(_dgi, "no_zero_grad"),
    healthy("gail_ppo_cartpole_gradient_penalty", "GAIL imitation (PPO)", gail_ppo_cartpole_imitation),
    _psm,
    buggy(_psm, "shuffled_labels"),
    _tent,
    buggy(_tent, "lr_x100"),
    healthy(
        "chronos_mean_scale_bins_tsmixup_kernelsynth",
        "Chronos tokenized forecaster",
        chronos_tokenized_forecaster,
    ),
    _stylegan,
    buggy(_stylegan, "frozen_by_mistake"),
    _deepsdf,
    buggy(_deepsdf, "dead_relu_init"),
    _duq,
    buggy(_duq, "deep_sigmoid"),
    healthy(
        "pfn_prior_fitted_transformer_in_context_classification",
        "prior-data fitted network (TabPFN-style)",
        pfn_tabular_prior_fitting,
    ),
    _repvgg,
    buggy(_repvgg, "inputs_x255"),
]

if installed("lightning"):
    PIPELINES += [
        healthy(
            "lightning_autoformer_autocorrelation_decomposition", "Autoformer (Lightning)", lit_autoformer_ett
        )
    ]

if installed("transformers"):
    PIPELINES += [
        healthy(
            "hf_videomae_tube_masking_pretraining",
            "HF Trainer VideoMAE pre-training",
            hf_videomae_pretraining,
        )
    ]

if installed("keras", "tensorflow"):
    PIPELINES += [
        healthy(
            "keras_ddim_residual_unet_ema_custom_train_step",
            "Keras DDIM diffusion (custom train_step)",
            keras_ddim_diffusion,
        )
    ]
