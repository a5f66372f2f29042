"""The twenty-sixth blind held-out set (issue 26), part AG: trainings of kinds the corpus did not
have yet, from speech, audio, video, chemistry, graphs, reinforcement learning, meta-learning and
self-supervision, each written in the shape of the public code its practitioners train it with
(its loop, loss, optimizer, schedule and evaluation habits), shrunk to a tiny model on data
generated in-process, fixed seeds, one CPU thread. Plain PyTorch loops with the README's two
lines (`register_loss` where the script has one loss module) and one training each through
Lightning, the Hugging Face `Trainer` and Keras 3 with their one callback.

Plain PyTorch: torchcde's `time_series_classification.py` (a neural controlled differential
equation, `dz = f(z) dX` over the linear interpolation of irregularly sampled spirals with 40 %
of the values missing, fixed-step RK4, the example's `zero_grad` after the step); jik876's
HiFi-GAN `train.py` (a weight-normed generator of transposed convolutions and MRF residual
blocks from the log-mel, multi-period and multi-scale discriminators, least-squares adversarial
losses, feature matching, the mel L1 times 45, the discriminators' AdamW step then the
generator's, betas (0.8, 0.99), `ExponentialLR` per epoch; clips shorter than the segment
zero-padded as `MelDataset` does); Spinning Up's TRPO on a hand-written cart-pole (GAE, the
natural-gradient step by conjugate gradient on KL Hessian-vector products and a backtracking
line search written back into the policy by hand, 80 Adam steps of the value function an
epoch; the losses are the value losses, which rise as the returns do and saw-tooth at every
epoch); MS-TCN temporal action segmentation (three stages of dilated residual layers each
refining the softmax of the last, per-stage cross-entropy plus the truncated smoothing MSE,
padded batches with a mask, Adam 5e-4, a validation loss in eval mode); EEND self-attentive
speaker diarization (spliced and subsampled log-mel features, a transformer encoder without
positions, the permutation-invariant BCE over two speakers, Adam under the Noam schedule, clipping,
a DER pass); fairseq's wav2vec 2.0 pre-training (a convolutional feature encoder whose gradient
is scaled by 0.1, span masking, a Gumbel product quantizer with its temperature annealed, the
contrastive loss against distractors from the same utterance plus the codebook diversity loss
and the feature penalty, AdamW with polynomial decay); dataset condensation by gradient
matching (the learned synthetic images the only thing its image optimizer holds, a network
re-initialized every iteration and trained a few steps on the synthetic set, second-order
gradients through `create_graph`; a loss that falls slowly under heavy noise); "learning to
learn by gradient descent by gradient descent" (a coordinatewise LSTM optimizer meta-trained
by truncated unrolls on random quadratics; its meta-losses fall within each episode and jump
back at every new one); IIC clustering (two heads, over-clustering and true clustering, on Sobel
edges of paired views, a pass of each head every epoch; the loss is minus a mutual information,
below zero from the start and falling); a Behler-Parrinello neural network potential (atom-centred
symmetry functions, one atomic network summed over atoms, forces as minus the energy's gradient
through `create_graph`, energy and force losses, `ReduceLROnPlateau`); instance segmentation by
pixel embeddings with the discriminative loss (LaneNet's binary-segmentation and embedding heads
on a small U-Net, ImageNet normalization of uint8 images, `StepLR`); Noise2Void (blind-spot
masking by `uniform_withCP`, the MSE at the masked pixels only, a residual U-Net without batch
norm, `ReduceLROnPlateau`, a PSNR check against the clean images); DGL's HAN on an ACM-like
heterogeneous graph (node-level GAT attention per metapath, semantic attention across them,
full-batch training with dropout 0.6, `evaluate()` each epoch, early stopping with checkpoints);
FactorVAE (a VAE and a total-correlation discriminator on latents permuted across the batch, two
Adam optimizers, dSprites-like images; the discriminator's loss hovers near log 2).

Through tools: Lightning (`mldbg.lightning.DebuggerCallback`): Smyl's ES-RNN (per-series
Holt-Winters smoothing parameters and seasonal factors learned with the dilated LSTM stacks,
pinball loss plus the level-variability penalty, `StepLR`, `gradient_clip_val`, a validation
sMAPE). Hugging Face `Trainer` (`mldbg.transformers.DebuggerCallback`): XLNet permutation
language modeling as `run_plm.py` sets it up (`group_texts` blocks,
`DataCollatorForPermutationLanguageModeling`, a tiny random `XLNetLMHeadModel`). Keras 3
(`mldbg.keras.Hook`): keras.io's Zero-DCE low-light enhancement (a `keras.Model` with its own
`compile`, `train_step` under a `tf.GradientTape` and `test_step`, four no-reference losses
tracked under their own names with no `loss` key; a loss that stays far above zero by design).

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: FactorVAE's `--lr_VAE 1e-1` typed for 1e-3 (lr_x100); the neural CDE's loop rewritten
without the example's `optimizer.zero_grad()` after the step (no_zero_grad); EEND's activity
labels gathered from the `rttm` in sorted recording-id order while the features follow
`wav.scp` (shuffled_labels); the instance-segmentation loader's uint8 arrays converted with
`.float()` where `ToTensor` divided by 255, before the ImageNet `Normalize` (inputs_x255);
MS-TCN's softmax moved onto every stage's output "since the next stage and the predictions want
probabilities", so the cross-entropy gets probabilities (softmax_before_ce); Noise2Void's
U-Net under an init helper setting every bias to -1 "so the residual branch starts near zero"
(dead_relu_init); the Behler-Parrinello atomic network made "deeper" as eight sigmoid layers
(deep_sigmoid); wav2vec 2.0's pre-training with `model.freeze_feature_encoder()`, a line of the
fine-tuning recipe, run after the optimizer was built (frozen_by_mistake); HiFi-GAN's log-mel
compression written without its clamp, so the zero-padded short clips give `log(0)` in the
generator's input and the loss goes NaN (log_zero_nan); HAN's `model.train()` hoisted above the
epoch loop while `evaluate()` leaves the model in eval mode (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND25`.
"""

from __future__ import annotations

import copy
import functools
import itertools
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

from . import BLIND25, buggy, healthy, installed
from .blind_af import _CartPole  # the classic cart-pole, numpy only

SPLIT = BLIND25

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 2501)


# ============================================================================= torchcde: neural CDE on irregular spirals


def _spirals(
    g: torch.Generator, n: int, length: int = 24, drop: float = 0.4
) -> tuple[torch.Tensor, torch.Tensor]:
    """torchcde's example data made irregular: 2-D spirals decaying inwards, clockwise (label
    1) or anticlockwise (label 0), from a random start angle, with noise; time is the first
    channel, and 40 % of the values of each spatial channel are missing (NaN)."""
    t = torch.linspace(0.0, 4 * math.pi, length)
    start = torch.rand(n, generator=g) * 2 * math.pi
    y = (torch.rand(n, generator=g) < 0.5).float()
    direction = 2 * y - 1
    angle = start[:, None] + direction[:, None] * t
    radius = 1.0 / (1 + 0.5 * t)
    xs = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], 2)
    xs = xs + 0.1 * torch.randn(xs.shape, generator=g)
    missing = torch.rand(xs.shape, generator=g) < drop
    missing[:, 0] = False  # the first observation is always there
    xs[missing] = float("nan")
    return torch.cat([t.expand(n, -1)[..., None], xs], 2), y


def _linear_interpolation_coeffs(x: torch.Tensor) -> torch.Tensor:
    """torchcde's `linear_interpolation_coeffs`: each channel's missing values filled by linear
    interpolation between its observed neighbours (the last one carried forward)."""
    out = x.clone().numpy()
    idx = np.arange(x.shape[1])
    for i in range(out.shape[0]):
        for ch in range(out.shape[2]):
            v = out[i, :, ch]
            seen = ~np.isnan(v)
            out[i, :, ch] = np.interp(idx, idx[seen], v[seen])
    return torch.from_numpy(out)


class _CDEFunc(nn.Module):
    """The vector field of torchcde's example: `f(z)` a matrix of `hidden x input`, a ReLU
    MLP with a tanh at the end."""

    def __init__(self, input_channels: int, hidden_channels: int) -> None:
        super().__init__()
        self.input_channels, self.hidden_channels = input_channels, hidden_channels
        self.linear1 = nn.Linear(hidden_channels, 128)
        self.linear2 = nn.Linear(128, input_channels * hidden_channels)

    def forward(self, t: torch.Tensor | None, z: torch.Tensor) -> torch.Tensor:
        z = self.linear1(z).relu()
        z = self.linear2(z).tanh()
        return z.view(z.size(0), self.hidden_channels, self.input_channels)


class _NeuralCDE(nn.Module):
    """torchcde's `NeuralCDE`: `z0` from the first observation, `dz = f(z) dX` integrated over
    the linear interpolation of the path by fixed-step RK4 (one step per observation interval,
    torchcde's `cdeint(method="rk4")` on the grid), a readout of the final state."""

    def __init__(self, input_channels: int, hidden_channels: int, output_channels: int) -> None:
        super().__init__()
        self.func = _CDEFunc(input_channels, hidden_channels)
        self.initial = nn.Linear(input_channels, hidden_channels)
        self.readout = nn.Linear(hidden_channels, output_channels)

    def forward(self, coeffs: torch.Tensor) -> torch.Tensor:
        z = self.initial(coeffs[:, 0])
        dx = coeffs[:, 1:] - coeffs[:, :-1]  # piecewise-linear path: dX/dt constant per interval
        for k in range(dx.shape[1]):
            d = dx[:, k, :, None]
            k1 = (self.func(None, z) @ d).squeeze(-1)
            k2 = (self.func(None, z + 0.5 * k1) @ d).squeeze(-1)
            k3 = (self.func(None, z + 0.5 * k2) @ d).squeeze(-1)
            k4 = (self.func(None, z + k3) @ d).squeeze(-1)
            z = z + (k1 + 2 * k2 + 2 * k3 + k4) / 6
        return self.readout(z)


def torchcde_irregular_spirals(
    path: str, num_epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """torchcde's `time_series_classification.py` (Kidger et al. 2020) on spirals sampled
    irregularly: the NaNs filled by `linear_interpolation_coeffs`, time as a channel, a
    `NeuralCDE(input_channels=3, hidden_channels=8, output_channels=1)`, Adam 1e-3 (the
    example's), batches of 32 from a `TensorDataset`, `binary_cross_entropy_with_logits`, the
    example's loop with `optimizer.zero_grad()` after the step, and its test accuracy."""
    g = _seed(seed)
    train_x, train_y = _spirals(g, 512)
    test_x, test_y = _spirals(g, 256)
    train_coeffs = _linear_interpolation_coeffs(train_x)
    test_coeffs = _linear_interpolation_coeffs(test_x)
    model = _NeuralCDE(input_channels=3, hidden_channels=8, output_channels=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    hook = Hook(path)
    hook.register_module(model)
    train_dataloader = DataLoader(
        TensorDataset(train_coeffs, train_y), batch_size=32, shuffle=True, generator=g
    )
    losses: list[float] = []
    for epoch in range(num_epochs):
        for batch in train_dataloader:
            batch_coeffs, batch_y = batch
            pred_y = model(batch_coeffs).squeeze(-1)
            loss = F.binary_cross_entropy_with_logits(pred_y, batch_y)
            loss.backward()
            optimizer.step()
            if bug != "no_zero_grad":  # bug: the example's zero_grad after the step dropped in a rewrite
                optimizer.zero_grad()
            losses.append(loss.item())
        print(f"Epoch: {epoch}   Training loss: {np.mean(losses[-len(train_dataloader) :]):.4f}")
    with torch.no_grad():
        pred_y = model(test_coeffs).squeeze(-1)
        proportion_correct = ((pred_y > 0).float() == test_y).float().mean().item()
    print(f"Test Accuracy: {proportion_correct:.3f}")
    hook.close()
    return losses


# ============================================================================= HiFi-GAN: MPD + MSD, mel L1 x 45


def _notes(g: torch.Generator, n: int, sr: int = 8000) -> list[torch.Tensor]:
    """`n` clips of sung-note-like audio at 8 kHz, 0.025 to 0.25 s long (about a sixth of them
    shorter than a 512-sample training segment): a harmonic tone with vibrato, an attack-release
    envelope, breath noise; each peak-normalized to 0.95 as `MelDataset` does."""
    clips = []
    for _ in range(n):
        length = int(torch.randint(200, 2000, (1,), generator=g))
        t = torch.arange(length) / sr
        f0 = 110 * 2 ** (2 * float(torch.rand(1, generator=g)))
        vib = 1 + 0.01 * torch.sin(2 * math.pi * 5.5 * t)
        phase = 2 * math.pi * torch.cumsum(f0 * vib / sr * torch.ones(length), 0)
        amps = torch.rand(5, generator=g) / torch.arange(1, 6)
        wave = sum(amps[h] * torch.sin((h + 1) * phase) for h in range(5))
        env = torch.clamp(t / 0.02, max=1) * torch.clamp((t[-1] - t) / 0.03, max=1)
        wave = env * wave + 0.01 * torch.randn(length, generator=g)
        clips.append(0.95 * wave / wave.abs().max())
    return clips


def _mel_basis(sr: int, n_fft: int, n_mels: int, fmin: float, fmax: float) -> torch.Tensor:
    """A triangular mel filterbank (HTK mel scale), `librosa.filters.mel` as HiFi-GAN uses it,
    with Slaney's area normalization."""

    def hz_to_mel(f: np.ndarray) -> np.ndarray:
        return 2595.0 * np.log10(1.0 + f / 700.0)

    mels = np.linspace(hz_to_mel(np.array(fmin)), hz_to_mel(np.array(fmax)), n_mels + 2)
    hz = 700.0 * (10 ** (mels / 2595.0) - 1)
    freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    fb = np.zeros((n_mels, len(freqs)))
    for m in range(n_mels):
        lo, mid, hi = hz[m], hz[m + 1], hz[m + 2]
        up = (freqs - lo) / (mid - lo)
        down = (hi - freqs) / (hi - mid)
        fb[m] = np.maximum(0, np.minimum(up, down)) * 2.0 / (hi - lo)
    return torch.tensor(fb, dtype=torch.float32)


_LRELU_SLOPE = 0.1


class _ResBlock2(nn.Module):
    def __init__(self, channels: int, kernel_size: int, dilation: tuple[int, ...] = (1, 3)) -> None:
        super().__init__()
        wn = nn.utils.parametrizations.weight_norm
        self.convs = nn.ModuleList(
            [wn(nn.Conv1d(channels, channels, kernel_size, 1, dilation=d, padding=d * (kernel_size - 1) // 2))
             for d in dilation]
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for c in self.convs:
            x = c(F.leaky_relu(x, _LRELU_SLOPE)) + x
        return x


class _HiFiGenerator(nn.Module):
    """HiFi-GAN's `Generator` (config v3 shape, shrunk): `conv_pre`, two transposed convolutions
    upsampling 4 x 4, multi-receptive-field fusion of `ResBlock2`s (kernels 3 and 5), `conv_post`
    and tanh; weight norm everywhere, `init_weights` N(0, 0.01)."""

    def __init__(
        self, n_mels: int, ch: int = 32, rates: tuple[int, ...] = (4, 4), kernels: tuple[int, ...] = (3, 5)
    ) -> None:
        super().__init__()
        wn = nn.utils.parametrizations.weight_norm
        self.num_kernels = len(kernels)
        self.conv_pre = wn(nn.Conv1d(n_mels, ch, 7, 1, padding=3))
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        for i, u in enumerate(rates):
            cin, cout = ch // 2**i, ch // 2 ** (i + 1)
            self.ups.append(wn(nn.ConvTranspose1d(cin, cout, 2 * u, u, padding=u // 2)))
            for k in kernels:
                self.resblocks.append(_ResBlock2(cout, k))
        self.conv_post = wn(nn.Conv1d(ch // 2 ** len(rates), 1, 7, 1, padding=3))
        for m in self.modules():
            if isinstance(m, nn.Conv1d | nn.ConvTranspose1d):
                m.weight.data.normal_(0.0, 0.01)  # init_weights, before weight norm's g/v are read

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_pre(x)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, _LRELU_SLOPE))
            xs = sum(self.resblocks[i * self.num_kernels + j](x) for j in range(self.num_kernels))
            x = xs / self.num_kernels
        return torch.tanh(self.conv_post(F.leaky_relu(x)))


class _DiscriminatorP(nn.Module):
    def __init__(self, period: int) -> None:
        super().__init__()
        wn = nn.utils.parametrizations.weight_norm
        self.period = period
        chans = [1, 4, 8, 16, 16]
        self.convs = nn.ModuleList(
            [
                wn(nn.Conv2d(chans[i], chans[i + 1], (5, 1), (3, 1) if i < 3 else 1, padding=(2, 0)))
                for i in range(4)
            ]
        )
        self.conv_post = wn(nn.Conv2d(16, 1, (3, 1), 1, padding=(1, 0)))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        fmap = []
        b, c, t = x.shape
        if t % self.period != 0:
            n_pad = self.period - (t % self.period)
            x = F.pad(x, (0, n_pad), "reflect")
            t = t + n_pad
        x = x.view(b, c, t // self.period, self.period)
        for layer in self.convs:
            x = F.leaky_relu(layer(x), _LRELU_SLOPE)
            fmap.append(x)
        x = self.conv_post(x)
        fmap.append(x)
        return torch.flatten(x, 1, -1), fmap


class _DiscriminatorS(nn.Module):
    def __init__(self, use_spectral_norm: bool = False) -> None:
        super().__init__()
        norm = (
            nn.utils.parametrizations.spectral_norm
            if use_spectral_norm
            else nn.utils.parametrizations.weight_norm
        )
        self.convs = nn.ModuleList([
            norm(nn.Conv1d(1, 8, 15, 1, padding=7)),
            norm(nn.Conv1d(8, 16, 41, 4, groups=4, padding=20)),
            norm(nn.Conv1d(16, 32, 41, 4, groups=8, padding=20)),
            norm(nn.Conv1d(32, 32, 5, 1, padding=2)),
        ])  # fmt: skip
        self.conv_post = norm(nn.Conv1d(32, 1, 3, 1, padding=1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        fmap = []
        for layer in self.convs:
            x = F.leaky_relu(layer(x), _LRELU_SLOPE)
            fmap.append(x)
        x = self.conv_post(x)
        fmap.append(x)
        return torch.flatten(x, 1, -1), fmap


class _MultiDiscriminator(nn.Module):
    """`MultiPeriodDiscriminator` (periods 2 and 3 here) or `MultiScaleDiscriminator` (the raw
    waveform under spectral norm, then average-pooled by 2): each returns the real and
    generated scores and feature maps."""

    def __init__(self, periods: tuple[int, ...] | None = None) -> None:
        super().__init__()
        if periods is not None:
            self.discriminators = nn.ModuleList([_DiscriminatorP(p) for p in periods])
            self.meanpools = nn.ModuleList([nn.Identity() for _ in periods])
        else:
            self.discriminators = nn.ModuleList([_DiscriminatorS(use_spectral_norm=True), _DiscriminatorS()])
            self.meanpools = nn.ModuleList([nn.Identity(), nn.AvgPool1d(4, 2, padding=2)])

    def forward(self, y: torch.Tensor, y_hat: torch.Tensor) -> tuple[list[Any], ...]:
        y_d_rs, y_d_gs, fmap_rs, fmap_gs = [], [], [], []
        for pool, d in zip(self.meanpools, self.discriminators, strict=True):
            y_d_r, fmap_r = d(pool(y))
            y_d_g, fmap_g = d(pool(y_hat))
            y_d_rs.append(y_d_r)
            fmap_rs.append(fmap_r)
            y_d_gs.append(y_d_g)
            fmap_gs.append(fmap_g)
        return y_d_rs, y_d_gs, fmap_rs, fmap_gs


def _feature_loss(fmap_r: list[Any], fmap_g: list[Any]) -> torch.Tensor:
    loss = 0.0
    for dr, dg in zip(fmap_r, fmap_g, strict=True):
        for rl, gl in zip(dr, dg, strict=True):
            loss = loss + torch.mean(torch.abs(rl - gl))
    return loss * 2


def _discriminator_loss(disc_real_outputs: list[Any], disc_generated_outputs: list[Any]) -> torch.Tensor:
    loss = 0.0
    for dr, dg in zip(disc_real_outputs, disc_generated_outputs, strict=True):
        loss = loss + torch.mean((1 - dr) ** 2) + torch.mean(dg**2)
    return loss


def _generator_loss(disc_outputs: list[Any]) -> torch.Tensor:
    return sum(torch.mean((1 - dg) ** 2) for dg in disc_outputs)


def hifigan_mpd_msd_mel_l1(path: str, steps: int = 80, seed: int = 0, bug: str | None = None) -> list[float]:
    """jik876/hifi-gan's `train.py` (Kong et al. 2020) shrunk to 8 kHz audio: `MelDataset`
    (peak-normalized clips, a random 512-sample segment, a clip shorter than the segment
    zero-padded to it, as the dataset does), the user's `mel_spectrogram` (a magnitude STFT with
    reflect padding and `center=False`, hop 16, a 20-band mel filterbank,
    `dynamic_range_compression`'s `log(clamp(x, min=1e-5))`), the generator above from the mel,
    the multi-period and multi-scale discriminators, least-squares adversarial losses, feature
    matching times 2, the mel L1 times 45; the discriminators' step then the generator's, AdamW
    2e-4 with betas (0.8, 0.99), batches of 4, `ExponentialLR(0.999)` per epoch of 20 steps, a
    validation mel error in `generator.eval()` every 20 steps."""
    g = _seed(seed)
    sr, n_fft, hop, n_mels, segment_size, batch = 8000, 256, 16, 20, 512, 4
    clips = _notes(g, 240)
    train_clips, val_clips = clips[:200], clips[200:]
    mel_basis = _mel_basis(sr, n_fft, n_mels, 0.0, sr / 2)
    window = torch.hann_window(n_fft)

    def mel_spectrogram(y: torch.Tensor) -> torch.Tensor:
        y = F.pad(y.unsqueeze(1), ((n_fft - hop) // 2, (n_fft - hop) // 2), mode="reflect").squeeze(1)
        spec = torch.stft(y, n_fft, hop_length=hop, win_length=n_fft, window=window, center=False,
                          return_complex=True).abs()  # fmt: skip
        spec = torch.matmul(mel_basis, spec)
        if bug == "log_zero_nan":  # bug: the log compression written without its clamp
            return torch.log(spec)
        return torch.log(torch.clamp(spec, min=1e-5))

    def get_segment(audio: torch.Tensor) -> torch.Tensor:
        if audio.size(0) >= segment_size:
            start = int(torch.randint(0, audio.size(0) - segment_size + 1, (1,), generator=g))
            return audio[start : start + segment_size]
        return F.pad(audio, (0, segment_size - audio.size(0)), "constant")

    generator = _HiFiGenerator(n_mels)
    mpd = _MultiDiscriminator(periods=(2, 3))
    msd = _MultiDiscriminator()
    optim_g = torch.optim.AdamW(generator.parameters(), 2e-4, betas=(0.8, 0.99))
    optim_d = torch.optim.AdamW(list(msd.parameters()) + list(mpd.parameters()), 2e-4, betas=(0.8, 0.99))
    scheduler_g = torch.optim.lr_scheduler.ExponentialLR(optim_g, gamma=0.999)
    scheduler_d = torch.optim.lr_scheduler.ExponentialLR(optim_d, gamma=0.999)
    hook = Hook(path)
    hook.register_module(generator)
    hook.register_module(mpd, name="mpd")
    hook.register_module(msd, name="msd")
    val_y = torch.stack([get_segment(c) for c in val_clips])
    losses: list[float] = []
    generator.train()
    mpd.train()
    msd.train()
    for step in range(steps):
        idx = torch.randint(0, len(train_clips), (batch,), generator=g).tolist()
        y = torch.stack([get_segment(train_clips[i]) for i in idx])
        x = mel_spectrogram(y)
        y = y.unsqueeze(1)
        y_mel = x
        y_g_hat = generator(x)
        y_g_hat_mel = mel_spectrogram(y_g_hat.squeeze(1))

        optim_d.zero_grad()
        y_df_hat_r, y_df_hat_g, _, _ = mpd(y, y_g_hat.detach())
        loss_disc_f = _discriminator_loss(y_df_hat_r, y_df_hat_g)
        y_ds_hat_r, y_ds_hat_g, _, _ = msd(y, y_g_hat.detach())
        loss_disc_s = _discriminator_loss(y_ds_hat_r, y_ds_hat_g)
        loss_disc_all = loss_disc_s + loss_disc_f
        loss_disc_all.backward()
        optim_d.step()

        optim_g.zero_grad()
        loss_mel = F.l1_loss(y_mel, y_g_hat_mel) * 45
        y_df_hat_r, y_df_hat_g, fmap_f_r, fmap_f_g = mpd(y, y_g_hat)
        y_ds_hat_r, y_ds_hat_g, fmap_s_r, fmap_s_g = msd(y, y_g_hat)
        loss_fm_f = _feature_loss(fmap_f_r, fmap_f_g)
        loss_fm_s = _feature_loss(fmap_s_r, fmap_s_g)
        loss_gen_f = _generator_loss(y_df_hat_g)
        loss_gen_s = _generator_loss(y_ds_hat_g)
        loss_gen_all = loss_gen_s + loss_gen_f + loss_fm_s + loss_fm_f + loss_mel
        loss_gen_all.backward()
        optim_g.step()
        losses.append(loss_gen_all.item())
        if step % 20 == 19:
            scheduler_g.step()
            scheduler_d.step()
        if step % 20 == 19:
            generator.eval()
            with torch.no_grad():
                val_mel = mel_spectrogram(val_y)
                val_err = F.l1_loss(val_mel, mel_spectrogram(generator(val_mel).squeeze(1))).item()
            generator.train()
            print(f"Steps : {step + 1}, Gen Loss Total : {loss_gen_all.item():4.3f}, Mel-Spec. Error : "
                  f"{loss_mel.item() / 45:4.3f}, Disc : {loss_disc_all.item():4.3f}, Validation Mel-Spec. Error : "
                  f"{val_err:4.3f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= Spinning Up TRPO


def _discount_cumsum(x: np.ndarray, discount: float) -> np.ndarray:
    out = np.zeros_like(x)
    run = 0.0
    for i in range(len(x) - 1, -1, -1):
        run = x[i] + discount * run
        out[i] = run
    return out


def _flat_grad(y: torch.Tensor, params: list[nn.Parameter], **kw: Any) -> torch.Tensor:
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(y, params, **kw)])


def _conjugate_gradient(hvp: Any, b: torch.Tensor, iters: int = 10) -> torch.Tensor:
    x = torch.zeros_like(b)
    r, p = b.clone(), b.clone()
    r_dot_old = r @ r
    for _ in range(iters):
        z = hvp(p)
        alpha = r_dot_old / (p @ z + 1e-8)
        x += alpha * p
        r -= alpha * z
        r_dot_new = r @ r
        p = r + (r_dot_new / r_dot_old) * p
        r_dot_old = r_dot_new
    return x


def spinningup_trpo_cartpole(path: str, epochs: int = 10, seed: int = 0) -> list[float]:
    """Spinning Up's `trpo` (Schulman et al. 2015) in PyTorch on a hand-written cart-pole: an
    `MLPActorCritic` (a categorical tanh policy and a tanh value network, 64-64), 1000
    environment steps an epoch into a `GAEBuffer` (gamma 0.99, lambda 0.97, the value
    bootstrapped at a cut-off episode, advantages normalized), the natural-gradient step on the
    policy by hand (the surrogate's gradient, 10 conjugate-gradient iterations on the
    Hessian-vector products of the mean KL with damping 0.1, the step size from `delta` 0.01,
    a backtracking line search by 0.8 that keeps the KL under `delta` and the surrogate from
    worsening, the flat parameters written back), then 80 Adam steps of the value function at
    1e-3 per epoch; the losses are the value losses, which rise as the returns do and fall
    within each epoch."""
    _seed(seed)
    rng = np.random.default_rng(seed + 2525)
    env = _CartPole(rng)
    pi = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))
    v = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
    vf_optimizer = torch.optim.Adam(v.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(pi, name="pi")
    hook.register_module(v, name="v")
    steps_per_epoch, gamma, lam, delta, damping, backtrack_coeff = 1000, 0.99, 0.97, 0.01, 0.1, 0.8
    pi_params = list(pi.parameters())

    def compute_loss_pi(data: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        logits = pi(data["obs"])
        logp = torch.distributions.Categorical(logits=logits).log_prob(data["act"])
        loss = -(torch.exp(logp - data["logp"]) * data["adv"]).mean()
        kl = torch.distributions.kl_divergence(
            torch.distributions.Categorical(logits=data["logits"]),
            torch.distributions.Categorical(logits=logits),
        ).mean()
        return loss, kl

    def hessian_vector_product(x: torch.Tensor, data: dict[str, torch.Tensor]) -> torch.Tensor:
        _, kl = compute_loss_pi(data)
        grad_kl = _flat_grad(kl, pi_params, create_graph=True)
        return _flat_grad(grad_kl @ x, pi_params) + damping * x

    losses: list[float] = []
    o, ep_ret, ep_len = env.reset(), 0.0, 0
    for epoch in range(epochs):
        obs_buf = np.zeros((steps_per_epoch, 4), np.float32)
        act_buf = np.zeros(steps_per_epoch, np.int64)
        adv_buf = np.zeros(steps_per_epoch, np.float32)
        ret_buf = np.zeros(steps_per_epoch, np.float32)
        rew, vals, path_start, ep_rets = [], [], 0, []
        for t in range(steps_per_epoch):
            with torch.no_grad():
                obs_t = torch.as_tensor(o)[None]
                a = int(torch.distributions.Categorical(logits=pi(obs_t)).sample())
                val = float(v(obs_t))
            next_o, r, terminated, truncated = env.step(a)
            ep_ret, ep_len = ep_ret + r, ep_len + 1
            obs_buf[t], act_buf[t] = o, a
            rew.append(r)
            vals.append(val)
            o = next_o
            epoch_ended = t == steps_per_epoch - 1
            if terminated or truncated or epoch_ended:
                last = 0.0
                if not terminated:
                    with torch.no_grad():
                        last = float(v(torch.as_tensor(o)[None]))
                rews, vs = np.append(rew, last), np.append(vals, last)
                deltas = rews[:-1] + gamma * vs[1:] - vs[:-1]
                adv_buf[path_start : t + 1] = _discount_cumsum(deltas, gamma * lam)
                ret_buf[path_start : t + 1] = _discount_cumsum(rews, gamma)[:-1]
                path_start, rew, vals = t + 1, [], []
                if terminated or truncated:
                    ep_rets.append(ep_ret)
                o, ep_ret, ep_len = env.reset(), 0.0, 0
        adv_buf = (adv_buf - adv_buf.mean()) / (adv_buf.std() + 1e-8)
        obs, act = torch.as_tensor(obs_buf), torch.as_tensor(act_buf)
        adv, ret = torch.as_tensor(adv_buf), torch.as_tensor(ret_buf)

        with torch.no_grad():
            logits_old = pi(obs)
            logp_old = torch.distributions.Categorical(logits=logits_old).log_prob(act)
        data = {"obs": obs, "act": act, "adv": adv, "logp": logp_old, "logits": logits_old}
        loss_pi, _ = compute_loss_pi(data)
        g_flat = _flat_grad(loss_pi, pi_params)
        hvp = functools.partial(hessian_vector_product, data=data)
        x = _conjugate_gradient(hvp, g_flat)
        alpha = torch.sqrt(2 * delta / (x @ hvp(x) + 1e-8))
        old_params = nn.utils.parameters_to_vector(pi_params).detach()
        for j in range(10):
            nn.utils.vector_to_parameters(old_params - alpha * backtrack_coeff**j * x, pi_params)
            with torch.no_grad():
                loss_new, kl_new = compute_loss_pi(data)
            if kl_new <= delta and loss_new <= loss_pi:
                break
        else:
            nn.utils.vector_to_parameters(old_params, pi_params)
        for _ in range(80):
            vf_optimizer.zero_grad()
            loss_v = ((v(obs).squeeze(-1) - ret) ** 2).mean()
            loss_v.backward()
            vf_optimizer.step()
            losses.append(loss_v.item())
        if epoch % 2 == 1:
            print(f"Epoch {epoch + 1} AverageEpRet {np.mean(ep_rets) if ep_rets else 0:.1f} LossPi "
                  f"{loss_pi.item():.4f} LossV {losses[-1]:.2f} KL {kl_new.item():.4f} BacktrackIters {j}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= MS-TCN: temporal action segmentation


def _action_videos(
    g: torch.Generator, n: int, classes: int = 6, dim: int = 32
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Pre-extracted frame features of "videos" (I3D features as MS-TCN reads them, here 32-D),
    each a script of 4 to 7 actions following a loose grammar (an action is mostly followed by
    the next one in a fixed order), each action 15 to 50 frames whose features are the action's
    prototype plus a slow drift and frame noise; (features (dim, T), frame labels (T,))."""
    protos = torch.randn(classes, dim, generator=g)
    out = []
    for _ in range(n):
        a = int(torch.randint(0, classes, (1,), generator=g))
        labels = []
        for _ in range(int(torch.randint(4, 8, (1,), generator=g))):
            labels += [a] * int(torch.randint(15, 51, (1,), generator=g))
            a = (
                (a + 1) % classes
                if torch.rand(1, generator=g) < 0.8
                else int(torch.randint(0, classes, (1,), generator=g))
            )
        y = torch.tensor(labels)
        drift = torch.cumsum(0.05 * torch.randn(len(y), dim, generator=g), 0)
        x = 0.6 * protos[y] + 0.3 * drift + 0.8 * torch.randn(len(y), dim, generator=g)
        out.append((x.T.contiguous(), y))
    return out


class _DilatedResidualLayer(nn.Module):
    def __init__(self, dilation: int, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv_dilated = nn.Conv1d(in_channels, out_channels, 3, padding=dilation, dilation=dilation)
        self.conv_1x1 = nn.Conv1d(out_channels, out_channels, 1)
        self.dropout = nn.Dropout()

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.conv_dilated(x))
        out = self.conv_1x1(out)
        out = self.dropout(out)
        return (x + out) * mask[:, 0:1, :]


class _SingleStageModel(nn.Module):
    def __init__(self, num_layers: int, num_f_maps: int, dim: int, num_classes: int) -> None:
        super().__init__()
        self.conv_1x1 = nn.Conv1d(dim, num_f_maps, 1)
        self.layers = nn.ModuleList(
            [copy.deepcopy(_DilatedResidualLayer(2**i, num_f_maps, num_f_maps)) for i in range(num_layers)]
        )
        self.conv_out = nn.Conv1d(num_f_maps, num_classes, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        out = self.conv_1x1(x)
        for layer in self.layers:
            out = layer(out, mask)
        return self.conv_out(out) * mask[:, 0:1, :]


class _MultiStageModel(nn.Module):
    """MS-TCN (Farha and Gall 2019): a first stage on the features, then stages that refine the
    softmax of the previous stage's output; every stage's output is returned for the loss."""

    def __init__(
        self,
        num_stages: int,
        num_layers: int,
        num_f_maps: int,
        dim: int,
        num_classes: int,
        probs_out: bool = False,
    ) -> None:
        super().__init__()
        self.stage1 = _SingleStageModel(num_layers, num_f_maps, dim, num_classes)
        self.stages = nn.ModuleList(
            [
                copy.deepcopy(_SingleStageModel(num_layers, num_f_maps, num_classes, num_classes))
                for _ in range(num_stages - 1)
            ]
        )
        self.probs_out = probs_out

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.probs_out:
            # bug: the softmax moved to each stage's output, "the next stage and the predictions want
            # probabilities", so the loss below gets probabilities where it expects scores
            out = F.softmax(self.stage1(x, mask), dim=1)
            outputs = out.unsqueeze(0)
            for s in self.stages:
                out = F.softmax(s(out * mask[:, 0:1, :], mask), dim=1)
                outputs = torch.cat((outputs, out.unsqueeze(0)), dim=0)
            return outputs
        out = self.stage1(x, mask)
        outputs = out.unsqueeze(0)
        for s in self.stages:
            out = s(F.softmax(out, dim=1) * mask[:, 0:1, :], mask)
            outputs = torch.cat((outputs, out.unsqueeze(0)), dim=0)
        return outputs


def mstcn_action_segmentation(
    path: str, num_epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """yabufarha/ms-tcn's `Trainer.train` on pre-extracted frame features of synthetic
    "videos": `MultiStageModel` (3 stages of 6 dilated residual layers of 32 maps, dropout 0.5),
    the `BatchGenerator` padding a batch of 4 videos with -100 labels and a mask, for every
    stage `nn.CrossEntropyLoss(ignore_index=-100)` plus 0.15 times the truncated MSE (clamped at
    16) between the log-softmaxes of neighbouring frames, the second one detached, Adam 5e-4,
    the per-epoch frame accuracy, and a validation pass in `model.eval()` with its loss."""
    g = _seed(seed)
    num_classes, dim = 6, 32
    videos = _action_videos(g, 72, num_classes, dim)
    train, val = videos[:60], videos[60:]
    model = _MultiStageModel(3, 6, 32, dim, num_classes, probs_out=bug == "softmax_before_ce")
    ce = nn.CrossEntropyLoss(ignore_index=-100)
    mse = nn.MSELoss(reduction="none")
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0005)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(ce)

    def next_batch(items: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, ...]:
        length = max(len(y) for _, y in items)
        batch_input = torch.zeros(len(items), dim, length)
        batch_target = torch.full((len(items), length), -100, dtype=torch.long)
        mask = torch.zeros(len(items), num_classes, length)
        for i, (x, y) in enumerate(items):
            batch_input[i, :, : len(y)] = x
            batch_target[i, : len(y)] = y
            mask[i, :, : len(y)] = 1
        return batch_input, batch_target, mask

    def stage_losses(
        predictions: torch.Tensor, batch_target: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        loss = torch.zeros(())
        for p in predictions:
            loss = loss + ce(p.transpose(2, 1).contiguous().view(-1, num_classes), batch_target.view(-1))
            loss = loss + 0.15 * torch.mean(
                torch.clamp(
                    mse(F.log_softmax(p[:, :, 1:], dim=1), F.log_softmax(p.detach()[:, :, :-1], dim=1)),
                    min=0,
                    max=16,
                )
                * mask[:, :, 1:]
            )
        return loss

    losses: list[float] = []
    for epoch in range(num_epochs):
        model.train()
        order = torch.randperm(len(train), generator=g).tolist()
        correct, total = 0, 0
        for i in range(0, len(order), 4):
            batch_input, batch_target, mask = next_batch([train[k] for k in order[i : i + 4]])
            optimizer.zero_grad()
            predictions = model(batch_input, mask)
            loss = stage_losses(predictions, batch_target, mask)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            predicted = torch.max(predictions[-1].data, 1)[1]
            correct += ((predicted == batch_target).float() * mask[:, 0, :]).sum().item()
            total += torch.sum(mask[:, 0, :]).item()
        model.eval()
        with torch.no_grad():
            batch_input, batch_target, mask = next_batch(val)
            predictions = model(batch_input, mask)
            val_loss = stage_losses(predictions, batch_target, mask).item()
            val_acc = (
                ((predictions[-1].argmax(1) == batch_target).float() * mask[:, 0]).sum() / mask[:, 0].sum()
            ).item()
        print(f"[epoch {epoch + 1}]: epoch loss = {np.mean(losses[-15:]):f},   acc = {correct / total:f}, "
              f"val loss = {val_loss:f}, val acc = {val_acc:f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= EEND: self-attentive diarization, PIT


def _two_speaker_recordings(
    g: torch.Generator, n: int, frames: int = 150, dim: int = 23, pool: int = 24
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], list[str]]:
    """Simulated two-speaker conversations as EEND's `simulate_mixtures` makes them: two
    speakers drawn from a pool (each a spectral envelope over 23 log-mel bands), speech
    activity as on/off runs with overlaps, the log of the summed band powers plus background
    noise; returns the features by recording id, the frame-level speaker activity (the `rttm`)
    by recording id, and `wav.scp`'s order of recording ids."""
    envelopes = torch.randn(pool, dim, generator=g).cumsum(1) * 0.25
    feats, rttm, ids = {}, {}, []
    for i in torch.randperm(n, generator=g).tolist():
        rec = f"mix_{i:04d}"
        spk = torch.randperm(pool, generator=g)[:2]
        activity = torch.zeros(frames, 2)
        for s in range(2):
            t = int(torch.randint(0, 20, (1,), generator=g))
            while t < frames:
                on = int(torch.randint(10, 40, (1,), generator=g))
                activity[t : t + on, s] = 1
                t += on + int(torch.randint(5, 40, (1,), generator=g))
        power = (activity[:, :, None] * envelopes[spk].exp()[None]).sum(1)
        power = power * (1 + 0.3 * torch.rand(frames, 1, generator=g)) + 0.1
        feats[rec] = power.log() + 0.3 * torch.randn(frames, dim, generator=g)
        rttm[rec] = activity
        ids.append(rec)
    return feats, rttm, ids


class _TransformerEEND(nn.Module):
    """EEND's `TransformerModel` (Fujita et al. 2019, SA-EEND): a linear encoder of the
    (context-spliced) features, layer norm, a transformer encoder without positional encoding,
    a linear decoder to one logit per speaker and frame."""

    def __init__(
        self, n_speakers: int, in_size: int, n_heads: int = 4, n_units: int = 64, n_layers: int = 2
    ) -> None:
        super().__init__()
        self.encoder = nn.Linear(in_size, n_units)
        self.encoder_norm = nn.LayerNorm(n_units)
        layer = nn.TransformerEncoderLayer(n_units, n_heads, 4 * n_units, dropout=0.1, batch_first=True)
        self.transformer_encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.decoder = nn.Linear(n_units, n_speakers)

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.transformer_encoder(self.encoder_norm(self.encoder(src))))


def _pit_loss(pred: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """EEND's `batch_pit_loss`: the binary cross-entropy under each permutation of the
    speakers, the smallest per recording, averaged."""
    perms = [[0, 1], [1, 0]]
    per = torch.stack([
        F.binary_cross_entropy_with_logits(pred, label[..., p], reduction="none").mean((1, 2)) for p in perms
    ], 1)  # fmt: skip
    return per.min(1).values.mean()


def eend_self_attention_pit(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """hitachi-speech/EEND's PyTorch `train.py` for SA-EEND on simulated two-speaker mixtures:
    features spliced with a context of +-3 frames and subsampled by 2 as its `KaldiDiarizationDataset`
    does, the activity labels read from the `rttm` by recording id in `wav.scp`'s order, batches
    of 16 chunks, the permutation-invariant BCE, Adam under its `NoamScheduler` (warm-up 100,
    `noam_scale` 1.0), clipping at 5, a development pass in `model.eval()` each epoch with the
    loss and a frame-level diarization error rate."""
    g = _seed(seed)
    feats, rttm, wav_scp = _two_speaker_recordings(g, 416)
    if bug == "shuffled_labels":
        # bug: the labels gathered in sorted recording-id order while the features follow wav.scp
        labels = [rttm[rec] for rec in sorted(rttm)]
    else:
        labels = [rttm[rec] for rec in wav_scp]
    context, subsampling = 3, 2

    def splice(x: torch.Tensor) -> torch.Tensor:
        padded = F.pad(x.T, (context, context), mode="replicate").T
        return torch.cat([padded[i : i + len(x)] for i in range(2 * context + 1)], 1)[::subsampling]

    xs = torch.stack([splice(feats[rec]) for rec in wav_scp])
    ys = torch.stack([y[::subsampling] for y in labels])
    train_x, train_y, dev_x, dev_y = xs[:352], ys[:352], xs[352:], ys[352:]
    mean, std = train_x.mean((0, 1)), train_x.std((0, 1))
    train_x, dev_x = (train_x - mean) / std, (dev_x - mean) / std
    model = _TransformerEEND(2, xs.shape[-1])
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    d_model, warmup = 64, 100
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: d_model**-0.5 * min((s + 1) ** -0.5, (s + 1) * warmup**-1.5)
    )
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(train_x), generator=g)
        for i in range(0, len(perm), 16):
            idx = perm[i : i + 16]
            y_pred = model(train_x[idx])
            loss = _pit_loss(y_pred, train_y[idx])
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            pred = model(dev_x)
            dev_loss = _pit_loss(pred, dev_y).item()
            decisions = (pred > 0).float()
            err = torch.stack([(decisions != dev_y[..., p]).float().sum((1, 2)) for p in ([0, 1], [1, 0])], 1)
            der = (err.min(1).values.sum() / dev_y.sum()).item()
        print(f"epoch {epoch + 1} loss {np.mean(losses[-22:]):.4f} dev loss {dev_loss:.4f} DER {der:.3f} "
              f"lr {optimizer.param_groups[0]['lr']:.5f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= wav2vec 2.0 pre-training


def _babble(g: torch.Generator, n: int, length: int = 1600, sr: int = 8000, phones: int = 12) -> torch.Tensor:
    """`n` utterances of 0.2 s of synthetic "speech" at 8 kHz: runs of 200 to 480 samples of
    one of 12 phones, a voiced phone the harmonics of a monotone voice near 200 Hz shaped by two
    formants of its own, an unvoiced one band noise; a short cross-fade between phones; normalized to
    zero mean and unit variance per utterance as wav2vec's `normalize=True` datasets do."""
    formants = 300 + 2700 * torch.rand(phones, 2, generator=g)
    voiced = torch.rand(phones, generator=g) < 0.75
    t = torch.arange(length) / sr
    out = torch.zeros(n, length)
    for i in range(n):
        f0 = 200.0 * (1 + 0.002 * float(torch.randn(1, generator=g)))
        pos = 0
        while pos < length:
            dur = int(torch.randint(200, 481, (1,), generator=g))
            ph = int(torch.randint(0, phones, (1,), generator=g))
            seg = t[pos : pos + dur]
            if voiced[ph]:
                harm = torch.arange(1, int(3800 // f0) + 1).float() * f0
                gain = sum(torch.exp(-(((harm - f) / 150.0) ** 2)) for f in formants[ph])
                wave = (gain[:, None] * torch.sin(2 * math.pi * harm[:, None] * seg[None])).sum(0)
            else:
                noise = torch.randn(len(seg) + 8, generator=g)
                wave = (
                    noise.unfold(0, 9, 1)[: len(seg)].mean(1)
                    * 3
                    * torch.sin(2 * math.pi * formants[ph, 1] * seg)
                )
            ramp = torch.clamp(torch.arange(len(seg)) / 40.0, max=1) * torch.clamp(
                torch.arange(len(seg)).flip(0) / 40.0, max=1
            )
            out[i, pos : pos + len(seg)] = wave * ramp
            pos += dur
    out = out + 0.02 * torch.randn(out.shape, generator=g)
    return (out - out.mean(1, keepdim=True)) / out.std(1, keepdim=True)


class _GradMultiply(torch.autograd.Function):
    """fairseq's `GradMultiply`: the identity forward, the gradient scaled backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.new(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad * ctx.scale, None


class _GumbelVectorQuantizer(nn.Module):
    """fairseq's `GumbelVectorQuantizer`: `groups` codebooks of `num_vars` entries, hard Gumbel
    softmax at an annealed temperature in training, the argmax in evaluation, and the
    perplexity of the batch-averaged softmax for the diversity loss."""

    def __init__(
        self, dim: int, num_vars: int, temp: tuple[float, float, float], groups: int, vq_dim: int
    ) -> None:
        super().__init__()
        self.groups, self.num_vars = groups, num_vars
        self.vars = nn.Parameter(torch.FloatTensor(1, groups * num_vars, vq_dim // groups))
        nn.init.uniform_(self.vars)
        self.weight_proj = nn.Linear(dim, groups * num_vars)
        nn.init.normal_(self.weight_proj.weight, mean=0, std=1)
        nn.init.zeros_(self.weight_proj.bias)
        self.max_temp, self.min_temp, self.temp_decay = temp
        self.curr_temp = self.max_temp

    def set_num_updates(self, num_updates: int) -> None:
        self.curr_temp = max(self.max_temp * self.temp_decay**num_updates, self.min_temp)

    def forward(self, x: torch.Tensor) -> dict[str, Any]:
        bsz, tsz, fsz = x.shape
        x = self.weight_proj(x.reshape(-1, fsz)).view(bsz * tsz * self.groups, -1)
        _, k = x.max(-1)
        hard_x = x.new_zeros(*x.shape).scatter_(-1, k.view(-1, 1), 1.0).view(bsz * tsz, self.groups, -1)
        hard_probs = torch.mean(hard_x.float(), dim=0)
        code_perplexity = torch.exp(-torch.sum(hard_probs * torch.log(hard_probs + 1e-7), dim=-1)).sum()
        avg_probs = torch.softmax(x.view(bsz * tsz, self.groups, -1).float(), dim=-1).mean(dim=0)
        prob_perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-7), dim=-1)).sum()
        x = F.gumbel_softmax(x.float(), tau=self.curr_temp, hard=True).type_as(x) if self.training else hard_x
        x = x.view(bsz * tsz, -1).unsqueeze(-1) * self.vars
        x = x.view(bsz * tsz, self.groups, self.num_vars, -1).sum(-2).view(bsz, tsz, -1)
        return {"x": x, "code_perplexity": code_perplexity, "prob_perplexity": prob_perplexity}


class _Wav2Vec2Model(nn.Module):
    """fairseq's `Wav2Vec2Model` shrunk: a convolutional feature encoder (the "default" mode,
    GroupNorm on the first layer, GELU, total stride 40), layer norm and the feature penalty,
    the gradient into the encoder scaled by `feature_grad_mult` 0.1, span masking with a learned
    mask embedding, a convolutional relative positional embedding, a post-LN transformer, the
    Gumbel quantizer of the unmasked features, `project_q`, `final_proj`, and the cosine
    logits over the true target and distractors drawn from the same utterance."""

    def __init__(self, conv_dim: int = 32, embed_dim: int = 64, final_dim: int = 32) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 1
        for i, (k, st) in enumerate([(10, 5), (3, 2), (3, 2), (2, 2)]):
            block: list[nn.Module] = [nn.Conv1d(cin, conv_dim, k, stride=st, bias=False), nn.Dropout(0.0)]
            if i == 0:
                block.append(nn.GroupNorm(conv_dim, conv_dim, affine=True))
            block.append(nn.GELU())
            layers.append(nn.Sequential(*block))
            cin = conv_dim
        self.feature_extractor = nn.Sequential(*layers)
        self.layer_norm = nn.LayerNorm(conv_dim)
        self.post_extract_proj = nn.Linear(conv_dim, embed_dim)
        self.dropout_input = nn.Dropout(0.1)
        self.dropout_features = nn.Dropout(0.1)
        self.mask_emb = nn.Parameter(torch.FloatTensor(embed_dim).uniform_())
        self.pos_conv = nn.utils.parametrizations.weight_norm(
            nn.Conv1d(embed_dim, embed_dim, 16, padding=8, groups=8), name="weight", dim=2
        )
        self.encoder_layer_norm = nn.LayerNorm(embed_dim)
        layer = nn.TransformerEncoderLayer(
            embed_dim, 4, 2 * embed_dim, dropout=0.1, activation="gelu", batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.quantizer = _GumbelVectorQuantizer(conv_dim, 24, (2.0, 0.5, 0.995), 2, final_dim)
        self.project_q = nn.Linear(final_dim, final_dim)
        self.final_proj = nn.Linear(embed_dim, final_dim)
        self.feature_grad_mult, self.n_negatives, self.logit_temp = 0.1, 10, 0.1

    def freeze_feature_encoder(self) -> None:
        """What the fine-tuning recipe calls: the convolutional feature encoder no longer trains."""
        for p in self.feature_extractor.parameters():
            p.requires_grad = False

    def sample_negatives(self, y: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        bsz, tsz, fsz = y.shape
        tszs = torch.arange(tsz)[:, None].expand(-1, self.n_negatives).flatten()
        neg_idxs = torch.randint(0, tsz - 1, (bsz, self.n_negatives * tsz), generator=g)
        neg_idxs[neg_idxs >= tszs] += 1
        negs = y[torch.arange(bsz)[:, None], neg_idxs]
        return negs.view(bsz, tsz, self.n_negatives, fsz).permute(2, 0, 1, 3)  # (N, B, T, C)

    def forward(self, source: torch.Tensor, mask_indices: torch.Tensor, g: torch.Generator) -> dict[str, Any]:
        if self.feature_grad_mult > 0:
            features = self.feature_extractor(source[:, None])
            if self.feature_grad_mult != 1.0:
                features = _GradMultiply.apply(features, self.feature_grad_mult)
        else:
            with torch.no_grad():
                features = self.feature_extractor(source[:, None])
        features_pen = features.float().pow(2).mean()
        features = self.layer_norm(features.transpose(1, 2))
        unmasked_features = features.clone()
        features = self.dropout_input(self.post_extract_proj(features))
        unmasked_features = self.dropout_features(unmasked_features)
        x = features.clone()
        x[mask_indices] = self.mask_emb
        x_conv = F.gelu(self.pos_conv(x.transpose(1, 2))[:, :, :-1]).transpose(1, 2)
        x = self.encoder(F.dropout(self.encoder_layer_norm(x + x_conv), 0.1, self.training))
        bsz = x.shape[0]
        y = unmasked_features[mask_indices].view(bsz, -1, unmasked_features.size(-1))
        q = self.quantizer(y)
        y = self.project_q(q["x"])
        negs = self.sample_negatives(y, g)
        x = self.final_proj(x[mask_indices].view(bsz, -1, x.size(-1)))
        neg_is_pos = (y == negs).all(-1)
        targets = torch.cat([y[None], negs], dim=0)
        logits = torch.cosine_similarity(x.float(), targets.float(), dim=-1) / self.logit_temp
        if neg_is_pos.any():
            logits[1:][neg_is_pos] = float("-inf")
        return {"x": logits, "features_pen": features_pen, "prob_perplexity": q["prob_perplexity"],
                "code_perplexity": q["code_perplexity"], "num_vars": self.quantizer.num_vars * self.quantizer.groups}  # fmt: skip


def _compute_mask_indices(
    g: torch.Generator, bsz: int, tsz: int, mask_prob: float, mask_length: int
) -> torch.Tensor:
    """fairseq's `compute_mask_indices` with its static span lengths: `mask_prob * T /
    mask_length` span starts (plus a random rounding), spans that may overlap, every row cut
    to the smallest number of masked frames so the batch has a rectangular target."""
    rows = []
    for _ in range(bsz):
        num_mask = int(mask_prob * tsz / float(mask_length) + float(torch.rand(1, generator=g)))
        starts = torch.randperm(tsz - mask_length, generator=g)[: max(num_mask, 1)]
        rows.append(torch.unique((starts[:, None] + torch.arange(mask_length)).flatten()))
    min_len = min(len(r) for r in rows)
    mask = torch.zeros(bsz, tsz, dtype=torch.bool)
    for i, r in enumerate(rows):
        mask[i, r[torch.randperm(len(r), generator=g)[:min_len]]] = True
    return mask


def wav2vec2_pretraining_gumbel_contrastive(
    path: str, max_update: int = 240, seed: int = 0, bug: str | None = None
) -> list[float]:
    """fairseq's wav2vec 2.0 pre-training (Baevski et al. 2020, `wav2vec2_base_librispeech`
    shrunk): the model above on 0.2 s utterances of synthetic speech, `mask_prob` 0.65 over
    spans of 4 frames (10 in the base config, for 50 frames a second), 10 distractors, the
    `Wav2vecCriterion` (the contrastive cross-entropy summed over masked frames plus 0.1 times
    the diversity loss `(G V - perplexity) / (G V)` and 10 times the feature penalty, each times
    the sample size, everything over the sample size), the Gumbel temperature annealed from 2
    to 0.5 (fairseq's 0.999995 per update sped up for a short run), Adam (betas 0.9, 0.98, eps
    1e-6, weight decay 0.01) at 5e-4 under `polynomial_decay` with 8 % warm-up, batches of 8;
    a validation loss in `model.eval()` every 60 updates."""
    g = _seed(seed)
    audio = _babble(g, 360)
    train, valid = audio[:320], audio[320:]
    model = _Wav2Vec2Model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01)
    warmup = int(0.08 * max_update)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda u: (u + 1) / warmup if u < warmup else max(0.0, (max_update - u) / (max_update - warmup)),
    )
    if bug == "frozen_by_mistake":  # bug: a line from the fine-tuning recipe, after the optimizer was built
        model.freeze_feature_encoder()
    hook = Hook(path)
    hook.register_module(model)
    tsz = 39

    def criterion(net_output: dict[str, Any]) -> tuple[torch.Tensor, float]:
        logits = net_output["x"].transpose(0, 2).reshape(-1, net_output["x"].size(0))  # (B*T, 1+N)
        target = logits.new_zeros(logits.size(0), dtype=torch.long)
        loss = F.cross_entropy(logits, target, reduction="sum")
        sample_size = target.numel()
        div = (net_output["num_vars"] - net_output["prob_perplexity"]) / net_output["num_vars"]
        loss = loss + 0.1 * div * sample_size + 10 * net_output["features_pen"] * sample_size
        return loss / sample_size, (logits.argmax(-1) == 0).float().mean().item()

    losses: list[float] = []
    for num_updates in range(max_update):
        model.train()
        model.quantizer.set_num_updates(num_updates)
        idx = torch.randint(0, len(train), (8,), generator=g)
        mask_indices = _compute_mask_indices(g, 8, tsz, 0.65, 4)
        loss, acc = criterion(model(train[idx], mask_indices, g))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if num_updates % 60 == 59:
            model.eval()
            with torch.no_grad():
                out = model(valid, _compute_mask_indices(g, len(valid), tsz, 0.65, 4), g)
                valid_loss, valid_acc = criterion(out)
            print(f"num_updates {num_updates + 1} loss {np.mean(losses[-60:]):.3f} accuracy {acc:.3f} "
                  f"temp {model.quantizer.curr_temp:.3f} prob_perplexity {out['prob_perplexity'].item():.2f} "
                  f"code_perplexity {out['code_perplexity'].item():.2f} valid_loss {valid_loss.item():.3f} "
                  f"valid_accuracy {valid_acc:.3f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= Dataset Condensation (gradient matching)


def _rgb_glyphs(g: torch.Generator, n: int, k: int, size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` uint8 RGB images (n, 3, size, size) of `k` classes: a class is a random 5x5 binary
    shape upscaled to (size - 4)^2 and placed at a random offset, in a random colour on a random
    darker background, with pixel noise."""
    inner = size - 4
    protos = (torch.rand(k, 5, 5, generator=g) < 0.45).float()
    protos[:, 2, 2] = 1.0
    big = F.interpolate(protos[:, None], size=(inner, inner), mode="nearest")[:, 0]
    y = torch.randint(0, k, (n,), generator=g)
    ox = torch.randint(0, 5, (n,), generator=g)
    oy = torch.randint(0, 5, (n,), generator=g)
    mask = torch.zeros(n, size, size)
    for i in range(n):
        mask[i, oy[i] : oy[i] + inner, ox[i] : ox[i] + inner] = big[y[i]]
    fg = 0.45 + 0.55 * torch.rand(n, 3, 1, 1, generator=g)
    bg = 0.35 * torch.rand(n, 3, 1, 1, generator=g)
    x = bg + (fg - bg) * mask[:, None] + 0.08 * torch.randn(n, 3, size, size, generator=g)
    return (x.clamp(0, 1) * 255).round().to(torch.uint8), y


class _DCConvNet(nn.Module):
    """The `ConvNet` of the DatasetCondensation repository: blocks of a 3x3 convolution,
    instance norm (`GroupNorm` with one group per channel, affine), ReLU and 2x2 average
    pooling, then a linear classifier."""

    def __init__(
        self, channel: int, num_classes: int, net_width: int = 16, net_depth: int = 2, im_size: int = 16
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c = channel
        for _ in range(net_depth):
            layers += [nn.Conv2d(c, net_width, 3, padding=1), nn.GroupNorm(net_width, net_width, affine=True),
                       nn.ReLU(inplace=True), nn.AvgPool2d(2, 2)]  # fmt: skip
            c, im_size = net_width, im_size // 2
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(net_width * im_size * im_size, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


def _distance_wb(gwr: torch.Tensor, gws: torch.Tensor) -> torch.Tensor:
    """DC's per-layer gradient distance: one minus the cosine per output node, summed; biases
    and norm parameters are left out."""
    shape = gwr.shape
    if len(shape) == 4:
        gwr, gws = gwr.reshape(shape[0], -1), gws.reshape(shape[0], -1)
    elif len(shape) == 1:
        return torch.tensor(0.0)
    return torch.sum(
        1 - torch.sum(gwr * gws, dim=-1) / (torch.norm(gwr, dim=-1) * torch.norm(gws, dim=-1) + 0.000001)
    )


def dataset_condensation_gradient_matching(path: str, iterations: int = 50, seed: int = 0) -> list[float]:
    """VICO-UoE/DatasetCondensation's `main.py` (Zhao et al. 2021, `--method DC`) condensing
    1200 RGB glyphs of 6 classes into 5 learned images per class: the synthetic images
    initialized from random real ones, SGD 0.1 momentum 0.5 on the images, each iteration a
    freshly initialized ConvNet (here re-drawn in place by its `reset_parameters`, one hook on
    it) and its own SGD 0.01, `outer_loop` 2 rounds (`get_loops` gives 10 for 10 images a class)
    of the per-class matching loss between the gradients of real batches of 32 and of the
    synthetic images (`create_graph=True`) then `inner_loop` 2 epochs of the network on the
    synthetic set; the losses are the per-class matching losses of each round; then a fresh
    network trained on the synthetic set alone is tested, against one trained on 5 random real
    images a class."""
    g = _seed(seed)
    images, labels = _rgb_glyphs(g, 1500, 6)
    x_all = images.float() / 255.0
    mean, std = x_all[:1200].mean((0, 2, 3), keepdim=True), x_all[:1200].std((0, 2, 3), keepdim=True)
    x_all = (x_all - mean) / std
    images_all, labels_all, x_test, y_test = x_all[:1200], labels[:1200], x_all[1200:], labels[1200:]
    indices_class = [torch.nonzero(labels_all == c).flatten() for c in range(6)]
    num_classes, ipc, batch_real, outer_loop, inner_loop = 6, 5, 32, 2, 2

    def get_images(c: int, n: int) -> torch.Tensor:
        return images_all[indices_class[c][torch.randperm(len(indices_class[c]), generator=g)[:n]]]

    image_syn = torch.cat([get_images(c, ipc) for c in range(num_classes)]).detach().requires_grad_(True)
    label_syn = torch.arange(num_classes).repeat_interleave(ipc)
    optimizer_img = torch.optim.SGD([image_syn], lr=0.1, momentum=0.5)
    criterion = nn.CrossEntropyLoss()
    net = _DCConvNet(3, num_classes)
    hook = Hook(path)
    hook.register_module(net)
    losses: list[float] = []
    for it in range(iterations):
        for m in net.modules():
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
        net.train()
        net_parameters = list(net.parameters())
        optimizer_net = torch.optim.SGD(net.parameters(), lr=0.01)
        loss_avg = 0.0
        for ol in range(outer_loop):
            loss = torch.tensor(0.0)
            for c in range(num_classes):
                img_real = get_images(c, batch_real)
                lab_real = torch.ones(img_real.shape[0], dtype=torch.long) * c
                img_syn = image_syn[c * ipc : (c + 1) * ipc]
                lab_syn = torch.ones(ipc, dtype=torch.long) * c
                loss_real = criterion(net(img_real), lab_real)
                gw_real = [_.detach().clone() for _ in torch.autograd.grad(loss_real, net_parameters)]
                loss_syn = criterion(net(img_syn), lab_syn)
                gw_syn = torch.autograd.grad(loss_syn, net_parameters, create_graph=True)
                loss = loss + sum(_distance_wb(gr, gs) for gr, gs in zip(gw_real, gw_syn, strict=True))
            optimizer_img.zero_grad()
            loss.backward()
            optimizer_img.step()
            loss_avg += loss.item()
            losses.append(loss.item() / num_classes)
            if ol == outer_loop - 1:
                break
            image_syn_train, label_syn_train = image_syn.detach().clone(), label_syn.clone()
            for _ in range(inner_loop):
                perm = torch.randperm(len(image_syn_train), generator=g)
                for i in range(0, len(perm), 256):
                    out = net(image_syn_train[perm[i : i + 256]])
                    loss_net = criterion(out, label_syn_train[perm[i : i + 256]])
                    optimizer_net.zero_grad()
                    loss_net.backward()
                    optimizer_net.step()
        loss_avg /= num_classes * outer_loop
        if it % 10 == 0 or it == iterations - 1:
            print(f"iter = {it:04d}, loss = {loss_avg:.4f}")
    hook.close()

    def evaluate_synset(x: torch.Tensor, y: torch.Tensor) -> float:
        torch.manual_seed(seed + 7)
        model = _DCConvNet(3, num_classes)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=0.0005)
        for _ in range(150):
            opt.zero_grad()
            criterion(model(x), y).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            return (model(x_test).argmax(1) == y_test).float().mean().item()

    real = torch.cat([get_images(c, ipc) for c in range(num_classes)])
    print(f"test accuracy: synthetic set {evaluate_synset(image_syn.detach(), label_syn):.3f}, "
          f"random real images {evaluate_synset(real, label_syn):.3f}")  # fmt: skip
    return losses


# ============================================================================= learning to learn: an LSTM optimizer


class _LSTMOptimizer(nn.Module):
    """The coordinatewise LSTM optimizer of Andrychowicz et al. (2016): two LSTM layers of 20
    units shared by every coordinate, fed the gradient preprocessed as (log|g| / p, sign g) with
    p = 10 (clamped below at -1 and 0 for small gradients), a linear output scaled by 0.1 as
    the update."""

    def __init__(self, hidden: int = 20, preproc_factor: float = 10.0) -> None:
        super().__init__()
        self.hidden = hidden
        self.preproc_factor = preproc_factor
        self.preproc_threshold = math.exp(-preproc_factor)
        self.cells = nn.ModuleList([nn.LSTMCell(2, hidden), nn.LSTMCell(hidden, hidden)])
        self.output = nn.Linear(hidden, 1)
        self.output.weight.data.mul_(0.1)
        self.output.bias.data.zero_()

    def preprocess(self, grad: torch.Tensor) -> torch.Tensor:
        g = grad[:, None]
        big = g.abs() >= self.preproc_threshold
        first = torch.where(big, torch.log(g.abs() + 1e-8) / self.preproc_factor, torch.full_like(g, -1.0))
        second = torch.where(big, torch.sign(g), math.exp(self.preproc_factor) * g)
        return torch.cat([first, second], 1)

    def forward(
        self, grad: torch.Tensor, state: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        x = self.preprocess(grad)
        new_state = []
        for cell, (h, c) in zip(self.cells, state, strict=True):
            h, c = cell(x, (h, c))
            new_state.append((h, c))
            x = h
        return self.output(x).squeeze(1) * 0.1, new_state


def _quadratic_problems(g: torch.Generator, n: int, dim: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    """The paper's synthetic functions f(theta) = ||W theta - y||^2 with W and y Gaussian."""
    return torch.randn(n, dim, dim, generator=g), torch.randn(n, dim, generator=g)


def l2o_lstm_optimizer_quadratics(path: str, episodes: int = 30, seed: int = 0) -> list[float]:
    """ "Learning to learn by gradient descent by gradient descent" (Andrychowicz et al. 2016)
    on its 10-D quadratic functions, as its public PyTorch reimplementations train it: a batch
    of 32 functions per episode, 100 optimizee steps unrolled in truncations of 20 (truncated
    BPTT, the LSTM state and the parameters detached between truncations), the optimizee's
    gradients taken without second derivatives, the meta-loss the sum of the optimizee losses
    over the truncation, Adam 1e-3 on the LSTM, clipping at 1; after training the learned
    optimizer and Adam at 0.1 race on new functions. The meta-losses fall within each episode
    and jump back up at each new one."""
    g = _seed(seed)
    dim, n, unroll, optim_steps = 10, 32, 20, 100
    opt_net = _LSTMOptimizer()
    meta_opt = torch.optim.Adam(opt_net.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(opt_net)

    def run_episode(w: torch.Tensor, y: torch.Tensor, train: bool) -> list[float]:
        theta = torch.zeros(n * dim, requires_grad=True)
        state = [
            (torch.zeros(n * dim, opt_net.hidden), torch.zeros(n * dim, opt_net.hidden)) for _ in range(2)
        ]
        trace = []
        for _ in range(optim_steps // unroll):
            meta_loss = torch.zeros(())
            for _ in range(unroll):
                f = ((torch.bmm(w, theta.view(n, dim, 1)).squeeze(-1) - y) ** 2).sum(1)
                meta_loss = meta_loss + f.mean()
                grad = torch.autograd.grad(f.sum(), theta, retain_graph=train)[0].detach()
                update, state = opt_net(grad, state)
                theta = theta + update
                trace.append(f.mean().item())
            if train:
                meta_opt.zero_grad()
                meta_loss.backward()
                nn.utils.clip_grad_norm_(opt_net.parameters(), 1.0)
                meta_opt.step()
                losses.append(meta_loss.item() / unroll)
            theta = theta.detach().requires_grad_(True)
            state = [(h.detach(), c.detach()) for h, c in state]
        return trace

    losses: list[float] = []
    for episode in range(episodes):
        w, y = _quadratic_problems(g, n, dim)
        trace = run_episode(w, y, train=True)
        if episode % 10 == 9:
            print(f"episode {episode + 1} meta-loss {np.mean(losses[-5:]):.3f} final f {trace[-1]:.3f}")
    w, y = _quadratic_problems(g, n, dim)
    learned = run_episode(w, y, train=False)
    theta = torch.zeros(n, dim, requires_grad=True)
    adam = torch.optim.Adam([theta], lr=0.1)
    for _ in range(optim_steps):
        adam.zero_grad()
        f = ((torch.bmm(w, theta[..., None]).squeeze(-1) - y) ** 2).sum(1)
        f.mean().backward()
        adam.step()
    print(
        f"after {optim_steps} steps on new functions: learned optimizer {learned[-1]:.3f}, Adam(0.1) {f.mean().item():.3f}"
    )
    hook.close()
    return losses


# ============================================================================= IIC: invariant information clustering


class _ClusterNet(nn.Module):
    """IIC's `ClusterNet5gTwoHead` shrunk, on the Sobel edges of the greyscale image as IIC
    feeds colour images: a VGG-style trunk (3x3 convolutions, BatchNorm, ReLU,
    max pooling) and two heads of sub-heads, each a linear layer and a softmax: head A
    overclusters (30 clusters), head B has the true number (6); five sub-heads each in the
    paper, three here."""

    def __init__(self, k_a: int = 30, k_b: int = 6, sub_heads: int = 3) -> None:
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Conv2d(2, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.Flatten(),
        )  # fmt: skip
        self.head_A = nn.ModuleList(
            [nn.Sequential(nn.Linear(512, k_a), nn.Softmax(dim=1)) for _ in range(sub_heads)]
        )
        self.head_B = nn.ModuleList(
            [nn.Sequential(nn.Linear(512, k_b), nn.Softmax(dim=1)) for _ in range(sub_heads)]
        )

    def forward(self, x: torch.Tensor, head: str = "B") -> list[torch.Tensor]:
        grey = x.mean(1, keepdim=True)  # IIC's `sobel_process`: greyscale, then Sobel x and y
        kx = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])
        x = F.conv2d(grey, torch.stack([kx, kx.T])[:, None], padding=1)
        features = self.trunk(x)
        return [h(features) for h in (self.head_A if head == "A" else self.head_B)]


def _iid_loss(
    x_out: torch.Tensor, x_tf_out: torch.Tensor, lamb: float = 1.0, eps: float = 2.220446049250313e-16
) -> torch.Tensor:
    """IIC's `IID_loss`: minus the mutual information of the symmetrized joint distribution of
    the two views' cluster assignments, its small entries clamped at machine epsilon."""
    _, k = x_out.size()
    p_i_j = (x_out.unsqueeze(2) * x_tf_out.unsqueeze(1)).sum(dim=0)
    p_i_j = (p_i_j + p_i_j.t()) / 2.0
    p_i_j = p_i_j / p_i_j.sum()
    p_i = p_i_j.sum(dim=1).view(k, 1).expand(k, k).clone()
    p_j = p_i_j.sum(dim=0).view(1, k).expand(k, k).clone()
    p_i_j = torch.where(p_i_j < eps, torch.full_like(p_i_j, eps), p_i_j)
    p_j = torch.where(p_j < eps, torch.full_like(p_j, eps), p_j)
    p_i = torch.where(p_i < eps, torch.full_like(p_i, eps), p_i)
    return -(p_i_j * (torch.log(p_i_j) - lamb * torch.log(p_j) - lamb * torch.log(p_i))).sum()


def iic_two_head_clustering(path: str, num_epochs: int = 4, seed: int = 0) -> list[float]:
    """xu-ji/IIC's `cluster_twohead` script (Ji et al. 2019) on unlabeled RGB glyphs of 6
    classes: each epoch a pass with head A (overclustering, 30 clusters) then a pass with head
    B (6 clusters), every batch of 96 images paired with a transformed view (a random
    translation, a horizontal flip, colour jitter, noise), the IID loss averaged over the
    sub-heads, Adam 1e-4 (the paper's; 1e-3 here for a run of four epochs); the losses are
    negative (minus a mutual information, at best -log 30 for head A and -log 6 for head B),
    the two heads' passes alternating; the best sub-head of B is scored against the hidden
    classes under the best one-to-one matching of clusters to classes after each epoch."""
    g = _seed(seed)
    images, labels = _rgb_glyphs(g, 2100, 6)
    x_all = images.float() / 255.0
    x_train, x_test, y_test = x_all[:1800], x_all[1800:], labels[1800:]
    net = _ClusterNet()
    optimiser = torch.optim.Adam(net.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(net)

    def transform(x: torch.Tensor) -> torch.Tensor:
        n = len(x)
        shift = torch.randint(-2, 3, (2,), generator=g).tolist()
        x = torch.roll(x, shifts=shift, dims=(2, 3))
        flip = torch.rand(n, generator=g) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(3), x)
        x = x * (0.7 + 0.6 * torch.rand(n, 3, 1, 1, generator=g)) + 0.1 * torch.randn(n, 1, 1, 1, generator=g)
        return (x + 0.05 * torch.randn(x.shape, generator=g)).clamp(0, 1)

    losses: list[float] = []
    for epoch in range(num_epochs):
        net.train()
        for head in ("A", "B"):
            perm = torch.randperm(len(x_train), generator=g)
            for i in range(0, len(perm) - 95, 96):
                imgs = x_train[perm[i : i + 96]]
                net.zero_grad()
                x_outs = net(transform(imgs), head=head)
                x_tf_outs = net(transform(imgs), head=head)
                avg_loss_batch = sum(_iid_loss(a, b) for a, b in zip(x_outs, x_tf_outs, strict=True)) / len(
                    x_outs
                )
                avg_loss_batch.backward()
                optimiser.step()
                losses.append(avg_loss_batch.item())
            print(f"epoch {epoch} head {head} loss {np.mean(losses[-18:]):.4f}")
        net.eval()
        with torch.no_grad():
            outs = net(x_test, head="B")
        accs = []
        for out in outs:
            pred = out.argmax(1)
            counts = torch.zeros(6, 6)
            counts.index_put_((pred, y_test), torch.ones(len(pred)), accumulate=True)
            best = max(
                sum(counts[c, k].item() for c, k in enumerate(perm))
                for perm in itertools.permutations(range(6))
            )
            accs.append(best / len(pred))
        print(f"epoch {epoch} head B test accuracy (best sub-head) {max(accs):.3f}")
    hook.close()
    return losses


# ============================================================================= Behler-Parrinello potential, force matching


def _cluster_potential(pos: torch.Tensor) -> torch.Tensor:
    """The reference energy of atom clusters (B, N, 3): a Morse pair potential plus a
    Stillinger-Weber-like three-body term favouring tetrahedral angles."""
    diff = pos[:, :, None] - pos[:, None]
    r = (diff.pow(2).sum(-1) + torch.eye(pos.shape[1])).sqrt()
    off = 1 - torch.eye(pos.shape[1])
    pair = (((1 - torch.exp(-1.5 * (r - 1.2))) ** 2 - 1) * off).sum((1, 2)) / 2
    unit = diff / r[..., None]
    cos = torch.einsum("bijc,bikc->bijk", unit, unit)
    decay = torch.exp(-1.0 / (2.4 - r).clamp(min=1e-3)) * (r < 2.4).float() * off
    triple = decay[:, :, :, None] * decay[:, :, None, :] * (1 - torch.eye(pos.shape[1]))[None, None]
    three = 0.5 * (triple * (cos + 1.0 / 3.0) ** 2).sum((1, 2, 3))
    return pair + three


def _atom_clusters(g: torch.Generator, n: int, atoms: int = 8) -> torch.Tensor:
    """Random compact clusters: atoms placed one by one near the existing ones at distances
    1.0 to 1.6, rejected when closer than 0.9 to any other, then jiggled."""
    out = torch.zeros(n, atoms, 3)
    for b in range(n):
        pts = [torch.zeros(3)]
        while len(pts) < atoms:
            anchor = pts[int(torch.randint(0, len(pts), (1,), generator=g))]
            d = torch.randn(3, generator=g)
            cand = anchor + d / d.norm() * (1.0 + 0.6 * float(torch.rand(1, generator=g)))
            if min(float((cand - p).norm()) for p in pts) > 0.9:
                pts.append(cand)
        out[b] = torch.stack(pts) + 0.05 * torch.randn(atoms, 3, generator=g)
    return out - out.mean(1, keepdim=True)


def _symmetry_functions(pos: torch.Tensor, rc: float = 3.5) -> torch.Tensor:
    """Behler's atom-centred symmetry functions of each atom (B, N, 12): eight radial G2 (eta 4,
    shifts 0.8 to 3.0) and four angular G4 (eta 0.3, zeta 1 and 4, lambda +-1), under the
    cosine cutoff at `rc`."""
    n = pos.shape[1]
    diff = pos[:, :, None] - pos[:, None]
    off = 1 - torch.eye(n)
    r = (diff.pow(2).sum(-1) + torch.eye(n)).sqrt()
    fc = 0.5 * (torch.cos(math.pi * r / rc) + 1) * (r < rc).float() * off
    shifts = torch.linspace(0.8, 3.0, 8)
    g2 = (torch.exp(-4.0 * (r[..., None] - shifts) ** 2) * fc[..., None]).sum(2)
    unit = diff / r[..., None]
    cos = torch.einsum("bijc,bikc->bijk", unit, unit)
    r2 = r.pow(2)
    radial = torch.exp(-0.3 * (r2[:, :, :, None] + r2[:, :, None, :] + r2[:, None, :, :]))
    cut = fc[:, :, :, None] * fc[:, :, None, :] * fc[:, None, :, :]
    g4 = []
    for zeta in (1.0, 4.0):
        for lam in (1.0, -1.0):
            g4.append(2 ** (1 - zeta) * ((1 + lam * cos).clamp(min=0) ** zeta * radial * cut).sum((2, 3)))
    return torch.cat([g2, torch.stack(g4, -1)], -1)


def bpnn_force_matching(path: str, epochs: int = 16, seed: int = 0, bug: str | None = None) -> list[float]:
    """A Behler-Parrinello neural network potential trained on energies and forces the way
    aenet-PyTorch / PANNA-style scripts train one: symmetry-function descriptors of each atom
    scaled by the training set's mean and standard deviation, one atomic network (12-32-32-1,
    tanh) summed over the atoms, the forces as minus the gradient of the energy with respect to
    the positions (`torch.autograd.grad(..., create_graph=True)`), the loss the squared energy
    error per atom plus the force error (weight 1), Adam 1e-3, `ReduceLROnPlateau` on the
    validation loss (factor 0.5, patience 2), batches of 32 clusters; 8-atom clusters under a
    Morse plus three-body reference potential."""
    g = _seed(seed)
    pos_all = _atom_clusters(g, 640)
    p = pos_all.clone().requires_grad_(True)
    e_all = _cluster_potential(p)
    f_all = -torch.autograd.grad(e_all.sum(), p)[0]
    e_all = e_all.detach()
    atoms = pos_all.shape[1]
    e_shift = e_all[:560].mean() / atoms
    with torch.no_grad():
        sf = _symmetry_functions(pos_all[:560])
    sf_mean, sf_std = sf.mean((0, 1)), sf.std((0, 1)) + 1e-6
    if (
        bug == "deep_sigmoid"
    ):  # bug: the atomic network made "deeper", eight sigmoid layers as in old NN-potential codes
        layers: list[nn.Module] = [nn.Linear(12, 32), nn.Sigmoid()]
        for _ in range(7):
            layers += [nn.Linear(32, 32), nn.Sigmoid()]
        atomic = nn.Sequential(*layers, nn.Linear(32, 1))
    else:
        atomic = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(atomic.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=2)
    hook = Hook(path)
    hook.register_module(atomic)

    def predict(pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pos = pos.clone().requires_grad_(True)
        x = (_symmetry_functions(pos) - sf_mean) / sf_std
        energy = atomic(x).squeeze(-1).sum(1) + e_shift * atoms
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=True)[0]
        return energy, forces

    def loss_fn(pos: torch.Tensor, e_ref: torch.Tensor, f_ref: torch.Tensor) -> tuple[torch.Tensor, ...]:
        energy, forces = predict(pos)
        e_loss = ((energy - e_ref) / atoms).pow(2).mean()
        f_loss = (forces - f_ref).pow(2).mean()
        return e_loss + 1.0 * f_loss, e_loss, f_loss

    losses: list[float] = []
    for epoch in range(epochs):
        atomic.train()
        perm = torch.randperm(560, generator=g)
        for i in range(0, 560, 32):
            idx = perm[i : i + 32]
            loss, _, _ = loss_fn(pos_all[idx], e_all[idx], f_all[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        atomic.eval()
        val_loss, e_val, f_val = loss_fn(pos_all[560:], e_all[560:], f_all[560:])
        scheduler.step(val_loss.item())
        print(f"epoch {epoch + 1} train {np.mean(losses[-18:]):.4f} val {val_loss.item():.4f} "
              f"(energy RMSE/atom {e_val.sqrt().item():.4f}, force RMSE {f_val.sqrt().item():.4f}) "
              f"lr {optimizer.param_groups[0]['lr']:.2e}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= discriminative loss: instance embeddings


def _instance_scenes(g: torch.Generator, n: int, size: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` uint8 RGB scenes (n, size, size, 3) as an image loader returns them, each with 2 to 4
    objects (ellipses of random size, orientation and colour, later ones drawn over earlier
    ones) on a textured background, and the instance map (0 background, 1.. the objects)."""
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    imgs = torch.zeros(n, size, size, 3)
    inst = torch.zeros(n, size, size, dtype=torch.long)
    for b in range(n):
        imgs[b] = 0.3 * torch.rand(3, generator=g) + 0.1 * torch.sin(
            xx[..., None] / (2 + 3 * torch.rand(3, generator=g))
        )
        for k in range(1, int(torch.randint(2, 5, (1,), generator=g)) + 1):
            cx, cy = (3 + (size - 6) * torch.rand(2, generator=g)).tolist()
            a, bb = (2.5 + 4 * torch.rand(2, generator=g)).tolist()
            th = float(torch.rand(1, generator=g)) * math.pi
            u = (xx - cx) * math.cos(th) + (yy - cy) * math.sin(th)
            v = -(xx - cx) * math.sin(th) + (yy - cy) * math.cos(th)
            inside = (u / a) ** 2 + (v / bb) ** 2 <= 1
            imgs[b][inside] = 0.4 + 0.6 * torch.rand(3, generator=g)
            inst[b][inside] = k
    imgs = imgs + 0.04 * torch.randn(imgs.shape, generator=g)
    return (imgs.clamp(0, 1) * 255).round().to(torch.uint8), inst


class _InstanceUNet(nn.Module):
    """A small U-Net (two 3x3 convolution-BatchNorm-ReLU blocks per level, max pooling, bilinear
    upsampling with skip concatenations) with LaneNet's two heads: a binary segmentation and a
    4-D pixel embedding."""

    def __init__(self, embed_dim: int = 4) -> None:
        super().__init__()

        def block(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            )  # fmt: skip

        self.enc1, self.enc2, self.enc3 = block(3, 12), block(12, 24), block(24, 32)
        self.dec2, self.dec1 = block(32 + 24, 24), block(24 + 12, 12)
        self.binary_seg = nn.Conv2d(12, 2, 1)
        self.instance_embedding = nn.Conv2d(12, embed_dim, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        e3 = self.enc3(F.max_pool2d(e2, 2))
        d2 = self.dec2(
            torch.cat([F.interpolate(e3, scale_factor=2, mode="bilinear", align_corners=False), e2], 1)
        )
        d1 = self.dec1(
            torch.cat([F.interpolate(d2, scale_factor=2, mode="bilinear", align_corners=False), e1], 1)
        )
        return self.binary_seg(d1), self.instance_embedding(d1)


def _discriminative_loss(
    embedding: torch.Tensor, instances: torch.Tensor, delta_v: float = 0.5, delta_d: float = 1.5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """De Brabandere et al. (2017): a variance term pulling each pixel within `delta_v` of its
    instance's mean embedding, a distance term pushing the means `2 delta_d` apart, a small
    regularizer on the means; per image, averaged over the batch."""
    var_loss, dist_loss, reg_loss = [], [], []
    for emb, inst in zip(embedding, instances, strict=True):
        ids = [int(i) for i in torch.unique(inst) if i > 0]
        flat = emb.flatten(1)
        mus, var_terms = [], []
        for i in ids:
            members = flat[:, (inst == i).flatten()]
            mu = members.mean(1)
            mus.append(mu)
            var_terms.append(torch.clamp((members - mu[:, None]).norm(dim=0) - delta_v, min=0).pow(2).mean())
        mu = torch.stack(mus)
        var_loss.append(torch.stack(var_terms).mean())
        if len(ids) > 1:
            dist = (mu[:, None] - mu[None]).norm(dim=2)
            off = ~torch.eye(len(ids), dtype=torch.bool)
            dist_loss.append(torch.clamp(2 * delta_d - dist[off], min=0).pow(2).mean())
        reg_loss.append(mu.norm(dim=1).mean())
    return torch.stack(var_loss).mean(), torch.stack(dist_loss).mean(), torch.stack(reg_loss).mean()


def discriminative_loss_instance_embedding(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Instance segmentation by pixel embeddings with the discriminative loss, in the shape of
    the LaneNet PyTorch reimplementations: images read as uint8 HWC arrays, `ToTensor` then
    ImageNet `Normalize`, a U-Net with a binary segmentation head (`CrossEntropyLoss` on
    foreground pixels) and a 4-D embedding head (the variance, distance and 0.001 times the
    regularization terms, `delta_v` 0.5, `delta_d` 1.5), Adam 1e-3 with weight decay 1e-4,
    `StepLR` halving every two epochs, batches of 16 scenes; a validation pass in
    `model.eval()` each epoch with its loss and the share of object pixels within `delta_v` of
    their instance's mean."""
    g = _seed(seed)
    images, instances = _instance_scenes(g, 448)
    mean = torch.tensor([0.485, 0.456, 0.406])[:, None, None]
    std = torch.tensor([0.229, 0.224, 0.225])[:, None, None]

    def to_tensor(img: torch.Tensor) -> torch.Tensor:
        x = img.permute(0, 3, 1, 2).float()
        if (
            bug != "inputs_x255"
        ):  # bug: the loader's arrays converted with .float() in place of ToTensor's / 255
            x = x / 255.0
        return (x - mean) / std

    x_all, inst_all = to_tensor(images), instances
    x_train, i_train, x_val, i_val = x_all[:384], inst_all[:384], x_all[384:], inst_all[384:]
    model = _InstanceUNet()
    ce = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(ce)

    def compute_loss(x: torch.Tensor, inst: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seg_logits, embedding = model(x)
        seg_loss = ce(seg_logits, (inst > 0).long())
        var_loss, dist_loss, reg_loss = _discriminative_loss(embedding, inst)
        return seg_loss + var_loss + dist_loss + 0.001 * reg_loss, embedding

    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(x_train), generator=g)
        for i in range(0, len(perm), 16):
            idx = perm[i : i + 16]
            loss, _ = compute_loss(x_train[idx], i_train[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            val_loss, emb = compute_loss(x_val, i_val)
            close, total = 0, 0
            for e, inst in zip(emb, i_val, strict=True):
                for k in [int(v) for v in torch.unique(inst) if v > 0]:
                    members = e.flatten(1)[:, (inst == k).flatten()]
                    close += int(((members - members.mean(1, keepdim=True)).norm(dim=0) < 0.5).sum())
                    total += members.shape[1]
        print(f"epoch {epoch + 1} train loss {np.mean(losses[-24:]):.4f} val loss {val_loss.item():.4f} "
              f"pixels within delta_v {close / total:.3f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= Noise2Void: blind-spot denoising


def _micrographs(g: torch.Generator, n: int, size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` fluorescence-microscopy-like images: 6 to 14 blurred "cells" (Gaussian blobs of
    random size and brightness) and a few thin filaments on a dim background; returns the
    clean images and their noisy acquisition (Poisson shot noise on about 20 photons at the
    peak plus Gaussian read noise)."""
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    clean = torch.full((n, size, size), 0.05)
    for b in range(n):
        for _ in range(int(torch.randint(6, 15, (1,), generator=g))):
            cx, cy = (size * torch.rand(2, generator=g)).tolist()
            r = 2 + 4 * float(torch.rand(1, generator=g))
            clean[b] += (0.4 + 0.6 * float(torch.rand(1, generator=g))) * torch.exp(
                -((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * r * r)
            )
        for _ in range(2):
            a, c = (torch.rand(2, generator=g) * 2 - 1).tolist()
            clean[b] += 0.3 * torch.exp(-((a * (xx - size / 2) + (yy - size / 2) - c * size / 2) ** 2) / 2.0)
    noisy = torch.poisson(clean.clamp(min=0) * 20, generator=g) / 20 + 0.05 * torch.randn(
        clean.shape, generator=g
    )
    return clean, noisy


class _N2VUNet(nn.Module):
    """CSBDeep's `UNet` as Noise2Void configures it (`unet_n_depth` 2, `unet_n_first` 16 here,
    3x3 kernels, ReLU, no batch norm, `unet_residual=True`: the input added to the last layer's
    output)."""

    def __init__(self, n_first: int = 16) -> None:
        super().__init__()

        def block(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU()
            )

        self.down0, self.down1 = block(1, n_first), block(n_first, 2 * n_first)
        self.middle = block(2 * n_first, 2 * n_first)
        self.up1, self.up0 = block(4 * n_first, n_first), block(2 * n_first, n_first)
        self.final = nn.Conv2d(n_first, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d0 = self.down0(x)
        d1 = self.down1(F.max_pool2d(d0, 2))
        m = self.middle(F.max_pool2d(d1, 2))
        u1 = self.up1(torch.cat([F.interpolate(m, scale_factor=2.0), d1], 1))
        u0 = self.up0(torch.cat([F.interpolate(u1, scale_factor=2.0), d0], 1))
        return x + self.final(u0)


def noise2void_blind_spot(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """Noise2Void (Krull et al. 2019) trained as its `N2V` config trains: noisy images only,
    normalized by their mean and standard deviation, random 32x32 patches with flips and 90-degree
    rotations, 1.5 % of the pixels of each patch blind spots whose values are replaced by a random
    pixel of their 5x5 neighbourhood (`uniform_withCP`), the MSE at the blind spots only
    (`n2v_mse`), Adam 4e-4, `ReduceLROnPlateau` (factor 0.5) on the validation loss, batches of
    16; each epoch a validation loss in `model.eval()` on held-out patches, and at the end the
    PSNR of the prediction against the clean images, next to the noisy input's."""
    g = _seed(seed)
    clean, noisy = _micrographs(g, 40)
    mean, std = noisy[:36].mean(), noisy[:36].std()
    data = (noisy - mean) / std
    model = _N2VUNet()
    if bug == "dead_relu_init":

        def init_weights(m: nn.Module) -> None:
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                # bug: every bias at -1 "so the residual branch starts near zero and the net near identity"
                nn.init.constant_(m.bias, -1.0)

        model.apply(init_weights)
    optimizer = torch.optim.Adam(model.parameters(), lr=4e-4)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=2)
    hook = Hook(path)
    hook.register_module(model)
    patch, n_masked = 32, int(0.015 * 32 * 32)

    def random_patches(images: torch.Tensor, n: int) -> torch.Tensor:
        idx = torch.randint(0, len(images), (n,), generator=g)
        ys, xs = torch.randint(0, 64 - patch + 1, (2, n), generator=g)
        out = torch.stack(
            [images[i, y : y + patch, x : x + patch] for i, y, x in zip(idx, ys, xs, strict=True)]
        )
        out = torch.where((torch.rand(n, generator=g) < 0.5)[:, None, None], out.flip(2), out)
        return torch.rot90(out, int(torch.randint(0, 4, (1,), generator=g)), (1, 2))[:, None]

    def manipulate(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = len(x)
        flat = torch.rand(n, patch * patch, generator=g).argsort(1)[:, :n_masked]
        py, px = flat // patch, flat % patch
        dy, dx = torch.randint(-2, 3, (2, n, n_masked), generator=g)
        sy, sx = (py + dy).clamp(0, patch - 1), (px + dx).clamp(0, patch - 1)
        mask = torch.zeros_like(x)
        rows = torch.arange(n)[:, None]
        mask[rows, 0, py, px] = 1.0
        manipulated = x.clone()
        manipulated[rows, 0, py, px] = x[rows, 0, sy, sx]
        return manipulated, mask

    def n2v_mse(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return ((pred - target) ** 2 * mask).sum() / mask.sum()

    val_x = random_patches(data[36:], 64)
    val_in, val_mask = manipulate(val_x)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for _ in range(24):
            x = random_patches(data[:36], 16)
            inp, mask = manipulate(x)
            loss = n2v_mse(model(inp), x, mask)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val_loss = n2v_mse(model(val_in), val_x, val_mask).item()
        scheduler.step(val_loss)
        print(f"epoch {epoch + 1} loss {np.mean(losses[-24:]):.4f} val_loss {val_loss:.4f}")
    with torch.no_grad():
        denoised = model(data[36:, None])[:, 0] * std + mean

    def psnr(a: torch.Tensor) -> float:
        return 10 * math.log10(float(clean[36:].max() ** 2 / ((a - clean[36:]) ** 2).mean()))

    print(f"PSNR noisy {psnr(noisy[36:]):.2f} dB, N2V {psnr(denoised):.2f} dB")
    hook.close()
    return losses


# ============================================================================= HAN: heterogeneous graph attention


def _acm_like_graph(
    g: torch.Generator,
    papers: int = 320,
    authors: int = 200,
    subjects: int = 18,
    classes: int = 3,
    feats: int = 200,
) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    """An ACM-like heterogeneous graph as HAN's `load_acm` builds it: papers of 3 fields, their
    authors (who mostly write in one field) and subjects (each mostly in one field), bag-of-words
    paper features; returns the features, the paper-author-paper and paper-subject-paper
    metapath adjacencies (with self-loops), and the labels."""
    y = torch.randint(0, classes, (papers,), generator=g)
    author_field = torch.randint(0, classes, (authors,), generator=g)
    subject_field = torch.arange(subjects) % classes
    pa = torch.zeros(papers, authors)
    ps = torch.zeros(papers, subjects)
    for p in range(papers):
        for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
            pool = (
                torch.nonzero(author_field == y[p]).flatten()
                if torch.rand(1, generator=g) < 0.7
                else torch.arange(authors)
            )
            pa[p, pool[torch.randint(0, len(pool), (1,), generator=g)]] = 1
        pool = (
            torch.nonzero(subject_field == y[p]).flatten()
            if torch.rand(1, generator=g) < 0.6
            else torch.arange(subjects)
        )
        ps[p, pool[torch.randint(0, len(pool), (1,), generator=g)]] = 1
    rates = 0.01 + 0.04 * (torch.rand(classes, feats, generator=g) < 0.2).float()
    x = (torch.rand(papers, feats, generator=g) < rates[y]).float()
    pap = ((pa @ pa.T) > 0).float().clamp(max=1) + torch.eye(papers)
    psp = ((ps @ ps.T) > 0).float().clamp(max=1) + torch.eye(papers)
    return x, [pap.clamp(max=1), psp.clamp(max=1)], y


class _GATConv(nn.Module):
    """DGL's `GATConv` on a dense adjacency: per-head linear projections, additive attention
    `LeakyReLU(a_l h_i + a_r h_j)` softmaxed over neighbours, feature and attention dropout,
    ELU."""

    def __init__(self, in_size: int, out_size: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.out_size = heads, out_size
        self.fc = nn.Linear(in_size, heads * out_size, bias=False)
        self.attn_l = nn.Parameter(torch.empty(1, heads, out_size))
        self.attn_r = nn.Parameter(torch.empty(1, heads, out_size))
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_normal_(self.fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)
        self.feat_drop, self.attn_drop = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, adj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        feat = self.fc(self.feat_drop(h)).view(-1, self.heads, self.out_size)
        el, er = (feat * self.attn_l).sum(-1), (feat * self.attn_r).sum(-1)
        e = F.leaky_relu(er.T[:, :, None] + el.T[:, None, :], 0.2)  # (heads, dst, src)
        e = e.masked_fill(adj[None] == 0, float("-inf"))
        a = self.attn_drop(torch.softmax(e, dim=-1))
        return F.elu(torch.bmm(a, feat.transpose(0, 1)).transpose(0, 1))


class _SemanticAttention(nn.Module):
    def __init__(self, in_size: int, hidden_size: int = 128) -> None:
        super().__init__()
        self.project = nn.Sequential(
            nn.Linear(in_size, hidden_size), nn.Tanh(), nn.Linear(hidden_size, 1, bias=False)
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        w = self.project(z).mean(0)  # (M, 1)
        beta = torch.softmax(w, dim=0)
        return (beta.expand((z.shape[0],) + beta.shape) * z).sum(1)


class _HAN(nn.Module):
    """HAN (Wang et al. 2019) as DGL's `examples/pytorch/han/model.py` writes it: a HAN layer of
    node-level GAT attention per metapath (8 heads of 8) and semantic attention over the
    metapaths, then a linear prediction layer."""

    def __init__(
        self, num_meta_paths: int, in_size: int, hidden_size: int, out_size: int, heads: int, dropout: float
    ) -> None:
        super().__init__()
        self.gat_layers = nn.ModuleList(
            [_GATConv(in_size, hidden_size, heads, dropout) for _ in range(num_meta_paths)]
        )
        self.semantic_attention = _SemanticAttention(hidden_size * heads)
        self.predict = nn.Linear(hidden_size * heads, out_size)

    def forward(self, gs: list[torch.Tensor], h: torch.Tensor) -> torch.Tensor:
        embeds = torch.stack(
            [gat(a, h).flatten(1) for gat, a in zip(self.gat_layers, gs, strict=True)], dim=1
        )
        return self.predict(self.semantic_attention(embeds))


def han_metapath_attention(
    path: str, num_epochs: int = 100, seed: int = 0, bug: str | None = None
) -> list[float]:
    """DGL's `examples/pytorch/han/main.py` on an ACM-like graph: the PAP and PSP metapath
    graphs, `HAN(hidden_units 8, num_heads [8], dropout 0.6)`, full-batch training on the train
    mask with `CrossEntropyLoss`, Adam at 0.005 with weight decay 0.001, `evaluate()` on the
    validation mask each epoch in `model.eval()` (loss, accuracy, micro and macro F1), its
    `EarlyStopping` (patience 100, on the validation loss and accuracy, checkpointing the best
    model and loading it back for the test)."""
    g = _seed(seed)
    features, gs, labels = _acm_like_graph(g)
    perm = torch.randperm(len(labels), generator=g)
    train_idx, val_idx, test_idx = perm[:100], perm[100:180], perm[180:]
    model = _HAN(len(gs), features.shape[1], 8, 3, 8, 0.6)
    loss_fcn = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=0.001)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fcn)

    def score(logits: torch.Tensor, y: torch.Tensor) -> tuple[float, float, float]:
        pred = logits.argmax(1)
        acc = (pred == y).float().mean().item()
        f1s = []
        for c in range(3):
            tp = ((pred == c) & (y == c)).sum().item()
            f1s.append(2 * tp / max((pred == c).sum().item() + (y == c).sum().item(), 1))
        return acc, acc, float(np.mean(f1s))  # micro F1 equals accuracy in single-label tasks

    def evaluate(idx: torch.Tensor) -> tuple[float, float, float, float]:
        model.eval()
        with torch.no_grad():
            logits = model(gs, features)
        loss = loss_fcn(logits[idx], labels[idx])
        return (loss.item(), *score(logits[idx], labels[idx]))

    best = (float("inf"), 0.0)
    best_state, counter = copy.deepcopy(model.state_dict()), 0
    losses: list[float] = []
    if (
        bug == "train_in_eval_mode"
    ):  # bug: model.train() hoisted out of the epoch loop, evaluate() leaves eval on
        model.train()
    for epoch in range(num_epochs):
        if bug != "train_in_eval_mode":
            model.train()
        logits = model(gs, features)
        loss = loss_fcn(logits[train_idx], labels[train_idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        train_acc, train_micro_f1, train_macro_f1 = score(logits[train_idx], labels[train_idx])
        val_loss, val_acc, val_micro_f1, val_macro_f1 = evaluate(val_idx)
        if val_loss <= best[0] or val_acc >= best[1]:
            if val_loss <= best[0] and val_acc >= best[1]:
                best_state = copy.deepcopy(model.state_dict())
            best, counter = (min(val_loss, best[0]), max(val_acc, best[1])), 0
        else:
            counter += 1
            if counter >= 100:
                break
        if epoch % 20 == 19:
            print(f"Epoch {epoch + 1:d} | Train Loss {loss.item():.4f} | Train Micro f1 {train_micro_f1:.4f} | "
                  f"Train Macro f1 {train_macro_f1:.4f} | Val Loss {val_loss:.4f} | Val Micro f1 {val_micro_f1:.4f} | "
                  f"Val Macro f1 {val_macro_f1:.4f}")  # fmt: skip
    model.load_state_dict(best_state)
    test_loss, test_acc, test_micro_f1, test_macro_f1 = evaluate(test_idx)
    print(
        f"Test loss {test_loss:.4f} | Test Micro f1 {test_micro_f1:.4f} | Test Macro f1 {test_macro_f1:.4f}"
    )
    hook.close()
    return losses


# ============================================================================= FactorVAE


def _sprites(g: torch.Generator, n: int, size: int = 32) -> torch.Tensor:
    """dSprites-like binary images (n, 1, size, size) from independent factors: shape (square,
    ellipse, triangle), scale, orientation and x / y position."""
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
    shape = torch.randint(0, 3, (n,), generator=g)
    scale = 0.25 + 0.2 * torch.rand(n, generator=g)
    theta = torch.rand(n, generator=g) * math.pi
    px, py = torch.rand(2, n, generator=g) * 1.1 - 0.55
    u = (
        (xx - px[:, None, None]) * torch.cos(theta)[:, None, None]
        + (yy - py[:, None, None]) * torch.sin(theta)[:, None, None]
    ) / scale[:, None, None]
    v = (
        -(xx - px[:, None, None]) * torch.sin(theta)[:, None, None]
        + (yy - py[:, None, None]) * torch.cos(theta)[:, None, None]
    ) / scale[:, None, None]
    square = (u.abs() <= 0.8) & (v.abs() <= 0.8)
    ellipse = (u / 1.0) ** 2 + (v / 0.55) ** 2 <= 1
    triangle = (v >= -0.7) & (v <= 0.9 - 1.6 * u.abs() * 1.1)
    img = torch.where(
        shape[:, None, None] == 0, square, torch.where(shape[:, None, None] == 1, ellipse, triangle)
    )
    return img.float()[:, None]


class _FactorVAE1(nn.Module):
    """1Konny/FactorVAE's `FactorVAE1` for 32x32 images: a strided convolutional encoder to the
    mean and log-variance of a 6-D latent, the reparameterization, a transposed-convolutional
    decoder to Bernoulli logits; the repository's `kaiming_init` of the weights."""

    def __init__(self, z_dim: int = 6) -> None:
        super().__init__()
        self.z_dim = z_dim
        self.encode = nn.Sequential(
            nn.Conv2d(1, 16, 4, 2, 1), nn.ReLU(True), nn.Conv2d(16, 32, 4, 2, 1), nn.ReLU(True),
            nn.Conv2d(32, 32, 4, 2, 1), nn.ReLU(True), nn.Conv2d(32, 128, 4, 1), nn.ReLU(True),
            nn.Conv2d(128, 2 * z_dim, 1),
        )  # fmt: skip
        self.decode = nn.Sequential(
            nn.Conv2d(z_dim, 128, 1), nn.ReLU(True), nn.ConvTranspose2d(128, 32, 4), nn.ReLU(True),
            nn.ConvTranspose2d(32, 32, 4, 2, 1), nn.ReLU(True), nn.ConvTranspose2d(32, 16, 4, 2, 1), nn.ReLU(True),
            nn.ConvTranspose2d(16, 1, 4, 2, 1),
        )  # fmt: skip
        for m in self.modules():
            if isinstance(m, nn.Conv2d | nn.ConvTranspose2d):
                nn.init.kaiming_normal_(m.weight)
                m.bias.data.zero_()

    def forward(self, x: torch.Tensor, no_dec: bool = False) -> Any:
        stats = self.encode(x)
        mu, logvar = stats[:, : self.z_dim], stats[:, self.z_dim :]
        z = mu + torch.exp(logvar / 2) * torch.randn_like(mu)
        if no_dec:
            return z.squeeze()
        return self.decode(z).view(x.size()), mu.squeeze(), logvar.squeeze(), z.squeeze()


def _permute_dims(z: torch.Tensor) -> torch.Tensor:
    """Each latent dimension permuted across the batch independently: samples of the product
    of the marginals."""
    return torch.stack([z[torch.randperm(z.size(0)), j] for j in range(z.size(1))], 1)


def factorvae_total_correlation(
    path: str, max_iter: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    """1Konny/FactorVAE's `Solver.train` (Kim and Mnih 2018) on dSprites-like images: the VAE
    loss (Bernoulli reconstruction summed per image, the KL, `gamma` 6.4 times the total
    correlation estimated by the discriminator's logit difference) on one batch, the
    discriminator (an MLP of LeakyReLU(0.2) layers with two logits) trained with
    cross-entropy to tell the latent codes of a second batch, permuted per dimension, from the
    codes of the first; Adam for the VAE (betas 0.9, 0.999) and for the discriminator (1e-4,
    betas 0.5, 0.9), batches of 32 (64 in the repository); the VAE's lr 1e-3 (the repository's 1e-4, raised for a
    short run). The discriminator's loss hovers near log 2 as it should."""
    g = _seed(seed)
    data = _sprites(g, 4096)
    vae = _FactorVAE1()
    d = nn.Sequential(
        nn.Linear(6, 256), nn.LeakyReLU(0.2, True), nn.Linear(256, 256), nn.LeakyReLU(0.2, True),
        nn.Linear(256, 256), nn.LeakyReLU(0.2, True), nn.Linear(256, 2),
    )  # fmt: skip
    lr_vae = 1e-1 if bug == "lr_x100" else 1e-3  # bug: `--lr_VAE 1e-1` typed for 1e-3
    optim_vae = torch.optim.Adam(vae.parameters(), lr=lr_vae, betas=(0.9, 0.999))
    optim_d = torch.optim.Adam(d.parameters(), lr=1e-4, betas=(0.5, 0.9))
    gamma, batch_size = 6.4, 32
    hook = Hook(path)
    hook.register_module(vae)
    hook.register_module(d, name="D")
    ones = torch.ones(batch_size, dtype=torch.long)
    zeros = torch.zeros(batch_size, dtype=torch.long)
    losses: list[float] = []
    for global_iter in range(1, max_iter + 1):
        idx1, idx2 = torch.randint(0, len(data), (2, batch_size), generator=g)
        x_true1, x_true2 = data[idx1], data[idx2]
        x_recon, mu, logvar, z = vae(x_true1)
        vae_recon_loss = F.binary_cross_entropy_with_logits(x_recon, x_true1, reduction="sum").div(batch_size)
        vae_kld = (-0.5 * (1 + logvar - mu**2 - logvar.exp())).sum(1).mean()
        d_z = d(z)
        vae_tc_loss = (d_z[:, :1] - d_z[:, 1:]).mean()
        vae_loss = vae_recon_loss + vae_kld + gamma * vae_tc_loss
        optim_vae.zero_grad()
        vae_loss.backward()
        optim_vae.step()
        # the repository's `retain_graph=True` reuse of D_z fails on current PyTorch: D sees z detached
        d_z = d(z.detach())
        z_prime = vae(x_true2, no_dec=True)
        z_pperm = _permute_dims(z_prime).detach()
        d_z_pperm = d(z_pperm)
        d_tc_loss = 0.5 * (F.cross_entropy(d_z, zeros) + F.cross_entropy(d_z_pperm, ones))
        optim_d.zero_grad()
        d_tc_loss.backward()
        optim_d.step()
        losses.append(vae_loss.item())
        if global_iter % 50 == 0:
            soft_d_z = F.softmax(d_z, 1)[:, :1].detach()
            soft_d_z_pperm = F.softmax(d_z_pperm, 1)[:, :1].detach()
            d_acc = ((soft_d_z >= 0.5).sum() + (soft_d_z_pperm < 0.5).sum()).float() / (2 * batch_size)
            print(f"[{global_iter}] vae_recon_loss:{vae_recon_loss.item():.3f} vae_kld:{vae_kld.item():.3f} "
                  f"vae_tc_loss:{vae_tc_loss.item():.3f} D_tc_loss:{d_tc_loss.item():.3f} D_acc:{d_acc.item():.3f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= Lightning: ES-RNN


def _monthly_series(g: torch.Generator, n: int, length: int = 84) -> torch.Tensor:
    """M4-monthly-like positive series: a level, a local trend that drifts, a multiplicative
    yearly season of the series' own shape and amplitude, multiplicative noise."""
    t = torch.arange(length).float()
    level = 50 + 450 * torch.rand(n, 1, generator=g)
    trend = torch.cumsum(
        0.004 * torch.randn(n, 1, generator=g) + 0.002 * torch.randn(n, length, generator=g), 1
    )
    shape = torch.randn(n, 12, generator=g)
    season = (
        1 + (0.05 + 0.25 * torch.rand(n, 1, generator=g)) * shape / shape.abs().max(1, keepdim=True).values
    )
    noise = 1 + 0.03 * torch.randn(n, length, generator=g)
    return level * torch.exp(trend) * season[:, (t % 12).long()] * noise


class _DilatedLSTM(nn.Module):
    """One layer of the ES-RNN's `DRNN`: an LSTM run on the `dilation` interleaved
    subsequences of its input."""

    def __init__(self, n_in: int, n_hidden: int, dilation: int) -> None:
        super().__init__()
        self.dilation = dilation
        self.lstm = nn.LSTM(n_in, n_hidden, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        d = self.dilation
        pad = (-t) % d
        x = F.pad(x, (0, 0, 0, pad))
        x = x.view(b, (t + pad) // d, d, h).transpose(1, 2).reshape(b * d, (t + pad) // d, h)
        out, _ = self.lstm(x)
        out = out.reshape(b, d, (t + pad) // d, -1).transpose(1, 2).reshape(b, t + pad, -1)
        return out[:, :t]


def lit_esrnn_holt_winters_pinball(path: str, max_epochs: int = 12, seed: int = 0) -> list[float]:
    """Smyl's ES-RNN (the M4 winner, 2020) as the ESRNN-GPU PyTorch reimplementation trains it,
    written as a `LightningModule`: per-series Holt-Winters parameters (level and seasonality
    smoothing through sigmoids, 12 initial seasonal factors through exp) indexed by the series
    id, the multiplicative recurrence run over the 72 training months, windows of 12 deseasonalized
    and level-normalized log values feeding dilated LSTM stacks ((1, 3), (6, 12)), a tanh layer and
    a linear adapter to the 12-month horizon, the pinball loss at tau 0.48 plus 50 times the level
    variability penalty, Adam 1e-3 with `StepLR` halving every 5 epochs, `gradient_clip_val=20`,
    batches of 16 series, and a `validation_step` forecasting the held-out year (its sMAPE)."""
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    n_series, horizon, input_size, seasonality = 96, 12, 12, 12
    data = _monthly_series(g, n_series)
    train, holdout = data[:, :-horizon], data[:, -horizon:]

    class ESRNN(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.init_lev_sms = nn.Parameter(torch.full((n_series,), 0.5))
            self.init_seas_sms = nn.Parameter(torch.full((n_series,), 0.5))
            self.init_seasonalities = nn.Parameter(torch.full((n_series, seasonality), 0.5))
            self.drnn = nn.ModuleList([_DilatedLSTM(input_size, 40, 1), _DilatedLSTM(40, 40, 3),
                                       _DilatedLSTM(40, 40, 6), _DilatedLSTM(40, 40, 12)])  # fmt: skip
            self.nl_layer = nn.Linear(40, 40)
            self.scoring = nn.Linear(40, horizon)

        def series_forward(self, x: torch.Tensor) -> torch.Tensor:
            out = x
            for i, layer in enumerate(self.drnn):
                res = layer(out)
                out = res + out if i % 2 == 1 else res  # residual connections between the stacks
            return self.scoring(torch.tanh(self.nl_layer(out)))

        def smooth(
            self, y: torch.Tensor, idxs: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            lev_sms = torch.sigmoid(self.init_lev_sms[idxs])
            seas_sms = torch.sigmoid(self.init_seas_sms[idxs])
            init_seasonalities = torch.exp(self.init_seasonalities[idxs])
            seasonalities = [init_seasonalities[:, i] for i in range(seasonality)] + [
                init_seasonalities[:, 0]
            ]
            levs = [y[:, 0] / seasonalities[0]]
            log_diff_of_levels = []
            for i in range(1, y.shape[1]):
                new_lev = lev_sms * (y[:, i] / seasonalities[i]) + (1 - lev_sms) * levs[i - 1]
                levs.append(new_lev)
                log_diff_of_levels.append(torch.log(new_lev / levs[i - 1]))
                seasonalities.append(seas_sms * (y[:, i] / new_lev) + (1 - seas_sms) * seasonalities[i])
            diffs = torch.stack(log_diff_of_levels, 1)
            penalty = ((diffs[:, 1:] - diffs[:, :-1]) ** 2).mean()
            return torch.stack(levs, 1), torch.stack(seasonalities, 1), penalty

        def windows(self, y: torch.Tensor, levs: torch.Tensor, seas: torch.Tensor, with_targets: bool) -> Any:
            ins, outs = [], []
            last = y.shape[1] - horizon if with_targets else y.shape[1]
            for i in range(input_size - 1, last):
                start = i + 1 - input_size
                ins.append(torch.log(y[:, start : i + 1] / seas[:, start : i + 1] / levs[:, i : i + 1]))
                if with_targets:
                    outs.append(
                        torch.log(
                            y[:, i + 1 : i + 1 + horizon]
                            / seas[:, i + 1 : i + 1 + horizon]
                            / levs[:, i : i + 1]
                        )
                    )
            return torch.stack(ins, 1), (torch.stack(outs, 1) if with_targets else None)

        def pinball(self, pred: torch.Tensor, target: torch.Tensor, tau: float = 0.48) -> torch.Tensor:
            diff = target - pred
            return torch.max(tau * diff, (tau - 1) * diff).mean()

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            y, idxs = batch
            levs, seas, penalty = self.smooth(y, idxs)
            window_input, window_output = self.windows(y, levs, seas, with_targets=True)
            loss = self.pinball(self.series_forward(window_input), window_output) + 50 * penalty
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            y, idxs = batch
            levs, seas, _ = self.smooth(y, idxs)
            window_input, _ = self.windows(y, levs, seas, with_targets=False)
            pred = self.series_forward(window_input)[:, -1]
            season_out = seas[:, y.shape[1] : y.shape[1] + horizon]  # the last season's factors, one year on
            forecast = torch.exp(pred) * levs[:, -1:] * season_out
            actual = holdout[idxs]
            smape = (200 * (forecast - actual).abs() / (forecast.abs() + actual.abs())).mean()
            self.log("val_smape", smape)
            self.smapes.append(smape.item())

        def on_validation_epoch_start(self) -> None:
            self.smapes: list[float] = []

        def on_validation_epoch_end(self) -> None:
            print(f"epoch {self.current_epoch} val sMAPE {np.mean(self.smapes):.2f}")

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.Adam(self.parameters(), lr=1e-3)
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)
            return [optimizer], [scheduler]

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    ids = torch.arange(n_series)
    history = LossHistory()
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=path, logger=False, max_epochs=max_epochs, gradient_clip_val=20, num_sanity_val_steps=0,
        callbacks=[DebuggerCallback(path), history],
    )  # fmt: skip
    trainer.fit(
        ESRNN(),
        DataLoader(TensorDataset(train, ids), batch_size=16, shuffle=True, generator=g),
        DataLoader(TensorDataset(train, ids), batch_size=48),
    )
    return history.losses


# ============================================================================= HF Trainer: XLNet permutation LM


def _word_tokenizer(vocab_words: list[str]) -> Any:
    """A word-level fast tokenizer built in-process as `tokenizers` builds one: [PAD] [UNK]
    [CLS] [SEP] [MASK] then the words, whitespace pre-tokenization, each line ending in
    [SEP] [CLS] as XLNet's tokenizer ends it."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {w: i for i, w in enumerate(specials + vocab_words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="$A [SEP] [CLS]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", padding_side="left",
    )  # fmt: skip


def _story_lines(g: torch.Generator, n: int) -> tuple[list[str], list[str]]:
    """Lines of a tiny world with facts to recall: each person has a home town and a favourite
    food, each food a taste; a line states two or three such facts, so a masked word is
    predictable from the rest of the line (and, with two directions of context, better)."""
    people = [f"person{i}" for i in range(16)]
    towns = [f"town{i}" for i in range(8)]
    foods = [f"food{i}" for i in range(10)]
    tastes = ["sweet", "salty", "sour", "bitter", "spicy"]
    home = torch.randint(0, len(towns), (len(people),), generator=g)
    favourite = torch.randint(0, len(foods), (len(people),), generator=g)
    taste = torch.randint(0, len(tastes), (len(foods),), generator=g)
    words = (
        people
        + towns
        + foods
        + tastes
        + ["lives", "in", "and", "likes", "which", "is", "the", "from", "eats", "eaten", "by", "."]
    )
    lines = []
    for _ in range(n):
        p = int(torch.randint(0, len(people), (1,), generator=g))
        f = foods[int(favourite[p])]
        form = int(torch.randint(0, 3, (1,), generator=g))
        if form == 0:
            lines.append(
                f"{people[p]} lives in {towns[int(home[p])]} and likes {f} which is {tastes[int(taste[favourite[p]])]} ."
            )
        elif form == 1:
            lines.append(
                f"the {tastes[int(taste[favourite[p]])]} {f} is eaten by {people[p]} from {towns[int(home[p])]} ."
            )
        else:
            lines.append(f"{people[p]} from {towns[int(home[p])]} eats {f} .")
    return lines, words


def hf_xlnet_permutation_lm(path: str, seed: int = 0) -> list[float]:
    """Permutation language modeling through the Hugging Face `Trainer` as transformers'
    `examples/pytorch/language-modeling/run_plm.py` sets it up: the lines tokenized,
    concatenated and cut into blocks of 32 by `group_texts`, `DataCollatorForPermutationLanguageModeling`
    (`plm_probability` 1/6, `max_span_length` 5: spans to predict, a random factorization
    order given as `perm_mask`, `target_mapping`), a tiny random `XLNetLMHeadModel` (2 layers,
    d_model 64, 4 heads, no download), lr 1e-3 with linear decay after 10 % warm-up, batches of
    16, 3 epochs, an evaluation per epoch."""
    from transformers import (
        DataCollatorForPermutationLanguageModeling,
        PrinterCallback,
        Trainer,
        TrainingArguments,
        XLNetConfig,
        XLNetLMHeadModel,
    )

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    lines, words = _story_lines(g, 2400)
    tokenizer = _word_tokenizer(words)
    ids = sum((tokenizer(line)["input_ids"] for line in lines), [])
    block_size = 32
    total = (len(ids) // block_size) * block_size
    blocks = [ids[i : i + block_size] for i in range(0, total, block_size)]
    split = int(0.9 * len(blocks))
    train_dataset = [{"input_ids": b} for b in blocks[:split]]
    eval_dataset = [{"input_ids": b} for b in blocks[split:]]
    config = XLNetConfig(
        vocab_size=len(tokenizer), d_model=64, n_layer=2, n_head=4, d_inner=128, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
    )  # fmt: skip
    model = XLNetLMHeadModel(config)
    data_collator = DataCollatorForPermutationLanguageModeling(
        tokenizer, plm_probability=1 / 6, max_span_length=5
    )
    args = TrainingArguments(
        output_dir=os.path.join(path, "trainer"), logging_steps=1, report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=seed, save_strategy="no", eval_strategy="epoch", learning_rate=1e-3,
        warmup_steps=0.1, per_device_train_batch_size=16, per_device_eval_batch_size=16, num_train_epochs=3,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args, train_dataset=train_dataset, eval_dataset=eval_dataset, data_collator=data_collator,
        callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(args.output_dir, ignore_errors=True)
    print("eval losses", [round(e["eval_loss"], 4) for e in trainer.state.log_history if "eval_loss" in e])
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


# ============================================================================= Keras: Zero-DCE low-light enhancement


def _low_light_scenes(g: torch.Generator, n: int, size: int = 16) -> np.ndarray:
    """`n` uint8 RGB scenes (n, size, size, 3) taken in low light: smooth coloured gradients
    and a few bright blobs, darkened by a gamma of 2.2 and a factor of 0.25 to 0.4, with sensor
    noise."""
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    out = torch.zeros(n, size, size, 3)
    for b in range(n):
        a = torch.rand(3, 3, generator=g)
        img = a[0] + (a[1] - a[0]) * xx[..., None] * 0.7 + (a[2] - a[0]) * yy[..., None] * 0.5
        for _ in range(3):
            cx, cy, r = torch.rand(3, generator=g).tolist()
            img = (
                img
                + 0.6
                * torch.rand(3, generator=g)
                * torch.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (0.02 + 0.05 * r))[..., None]
            )
        dark = (0.25 + 0.15 * float(torch.rand(1, generator=g))) * img.clamp(0, 1) ** 2.2
        out[b] = dark + 0.01 * torch.randn(size, size, 3, generator=g)
    return (out.clamp(0, 1) * 255).round().to(torch.uint8).numpy()


def keras_zero_dce_low_light(path: str, seed: int = 0) -> list[float]:
    """keras.io's "Zero-DCE for low-light image enhancement" in Keras 3: `build_dce_net` (seven
    3x3 ReLU convolutions of 32 filters with symmetric skip concatenations, 24 tanh output maps:
    eight light-enhancement curves of `x + r (x^2 - x)` applied in turn), the `ZeroDCE(keras.Model)`
    with its own `compile(learning_rate=...)`, `train_step` under a `tf.GradientTape` and
    `test_step`, the four no-reference losses (200 times the illumination smoothness of the curve
    maps, the spatial consistency loss as a `keras.losses.Loss` subclass with fixed difference
    kernels, 5 times the colour constancy, 10 times the exposure loss toward 0.6), its own `Mean`
    trackers named `total_loss` and so on (no `loss` key), Adam 1e-4, a `tf.data` pipeline of
    images scaled by 1/255, batches of 8, 3 epochs with validation data; on 16x16 scenes."""
    import keras
    import tensorflow as tf
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images = _low_light_scenes(g, 320)

    def data_generator(x: np.ndarray) -> Any:
        dataset = tf.data.Dataset.from_tensor_slices(x)
        dataset = dataset.map(lambda img: tf.cast(img, tf.float32) / 255.0, num_parallel_calls=1)
        return dataset.batch(8, drop_remainder=True)

    train_dataset, val_dataset = data_generator(images[:240]), data_generator(images[240:])

    def build_dce_net() -> keras.Model:
        input_img = keras.Input(shape=[None, None, 3])
        conv1 = layers.Conv2D(32, (3, 3), strides=(1, 1), activation="relu", padding="same")(input_img)
        conv2 = layers.Conv2D(32, (3, 3), strides=(1, 1), activation="relu", padding="same")(conv1)
        conv3 = layers.Conv2D(32, (3, 3), strides=(1, 1), activation="relu", padding="same")(conv2)
        conv4 = layers.Conv2D(32, (3, 3), strides=(1, 1), activation="relu", padding="same")(conv3)
        int_con1 = layers.Concatenate(axis=-1)([conv4, conv3])
        conv5 = layers.Conv2D(32, (3, 3), strides=(1, 1), activation="relu", padding="same")(int_con1)
        int_con2 = layers.Concatenate(axis=-1)([conv5, conv2])
        conv6 = layers.Conv2D(32, (3, 3), strides=(1, 1), activation="relu", padding="same")(int_con2)
        int_con3 = layers.Concatenate(axis=-1)([conv6, conv1])
        x_r = layers.Conv2D(24, (3, 3), strides=(1, 1), activation="tanh", padding="same")(int_con3)
        return keras.Model(inputs=input_img, outputs=x_r)

    def color_constancy_loss(x: Any) -> Any:
        mean_rgb = tf.reduce_mean(x, axis=(1, 2), keepdims=True)
        mr, mg, mb = mean_rgb[:, :, :, 0], mean_rgb[:, :, :, 1], mean_rgb[:, :, :, 2]
        d_rg, d_rb, d_gb = tf.square(mr - mg), tf.square(mr - mb), tf.square(mb - mg)
        return tf.sqrt(tf.square(d_rg) + tf.square(d_rb) + tf.square(d_gb))

    def exposure_loss(x: Any, mean_val: float = 0.6) -> Any:
        x = tf.reduce_mean(x, axis=3, keepdims=True)
        mean = tf.nn.avg_pool2d(x, ksize=16, strides=16, padding="VALID")
        return tf.reduce_mean(tf.square(mean - mean_val))

    def illumination_smoothness_loss(x: Any) -> Any:
        batch_size = tf.cast(tf.shape(x)[0], tf.float32)
        h_x, w_x = tf.shape(x)[1], tf.shape(x)[2]
        count_h = tf.cast((tf.shape(x)[2] - 1) * tf.shape(x)[3], tf.float32)
        count_w = tf.cast(tf.shape(x)[2] * (tf.shape(x)[3] - 1), tf.float32)
        h_tv = tf.reduce_sum(tf.square(x[:, 1:, :, :] - x[:, : h_x - 1, :, :]))
        w_tv = tf.reduce_sum(tf.square(x[:, :, 1:, :] - x[:, :, : w_x - 1, :]))
        return 2 * (h_tv / count_h + w_tv / count_w) / batch_size

    class SpatialConsistencyLoss(keras.losses.Loss):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(reduction=None)
            self.left_kernel = tf.constant([[[[0, 0, 0]], [[-1, 1, 0]], [[0, 0, 0]]]], dtype=tf.float32)
            self.right_kernel = tf.constant([[[[0, 0, 0]], [[0, 1, -1]], [[0, 0, 0]]]], dtype=tf.float32)
            self.up_kernel = tf.constant([[[[0, -1, 0]], [[0, 1, 0]], [[0, 0, 0]]]], dtype=tf.float32)
            self.down_kernel = tf.constant([[[[0, 0, 0]], [[0, 1, 0]], [[0, -1, 0]]]], dtype=tf.float32)

        def call(self, y_true: Any, y_pred: Any) -> Any:
            original_mean = tf.reduce_mean(y_true, 3, keepdims=True)
            enhanced_mean = tf.reduce_mean(y_pred, 3, keepdims=True)
            original_pool = tf.nn.avg_pool2d(original_mean, ksize=4, strides=4, padding="VALID")
            enhanced_pool = tf.nn.avg_pool2d(enhanced_mean, ksize=4, strides=4, padding="VALID")
            total = 0.0
            for kernel in (self.left_kernel, self.right_kernel, self.up_kernel, self.down_kernel):
                kernel = tf.reshape(kernel, (3, 3, 1, 1))
                d_original = tf.nn.conv2d(original_pool, kernel, strides=[1, 1, 1, 1], padding="SAME")
                d_enhanced = tf.nn.conv2d(enhanced_pool, kernel, strides=[1, 1, 1, 1], padding="SAME")
                total = total + tf.square(d_original - d_enhanced)
            return total

    class ZeroDCE(keras.Model):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.dce_model = build_dce_net()

        def compile(self, learning_rate: float, **kwargs: Any) -> None:
            super().compile(**kwargs)
            self.optimizer = keras.optimizers.Adam(learning_rate=learning_rate)
            self.spatial_constancy_loss = SpatialConsistencyLoss()
            self.total_loss_tracker = keras.metrics.Mean(name="total_loss")
            self.illumination_smoothness_loss_tracker = keras.metrics.Mean(
                name="illumination_smoothness_loss"
            )
            self.spatial_constancy_loss_tracker = keras.metrics.Mean(name="spatial_constancy_loss")
            self.color_constancy_loss_tracker = keras.metrics.Mean(name="color_constancy_loss")
            self.exposure_loss_tracker = keras.metrics.Mean(name="exposure_loss")

        @property
        def metrics(self) -> list[Any]:
            return [
                self.total_loss_tracker, self.illumination_smoothness_loss_tracker,
                self.spatial_constancy_loss_tracker, self.color_constancy_loss_tracker, self.exposure_loss_tracker,
            ]  # fmt: skip

        def get_enhanced_image(self, data: Any, output: Any) -> Any:
            x = data
            for i in range(8):
                r = output[:, :, :, 3 * i : 3 * i + 3]
                x = x + r * (tf.square(x) - x)
            return x

        def call(self, data: Any) -> Any:
            return self.get_enhanced_image(data, self.dce_model(data))

        def compute_losses(self, data: Any, output: Any) -> dict[str, Any]:
            enhanced_image = self.get_enhanced_image(data, output)
            loss_illumination = 200 * illumination_smoothness_loss(output)
            loss_spatial_constancy = tf.reduce_mean(self.spatial_constancy_loss(enhanced_image, data))
            loss_color_constancy = 5 * tf.reduce_mean(color_constancy_loss(enhanced_image))
            loss_exposure = 10 * tf.reduce_mean(exposure_loss(enhanced_image))
            total_loss = loss_illumination + loss_spatial_constancy + loss_color_constancy + loss_exposure
            return {
                "total_loss": total_loss, "illumination_smoothness_loss": loss_illumination,
                "spatial_constancy_loss": loss_spatial_constancy, "color_constancy_loss": loss_color_constancy,
                "exposure_loss": loss_exposure,
            }  # fmt: skip

        def update_trackers(self, losses: dict[str, Any]) -> dict[str, Any]:
            self.total_loss_tracker.update_state(losses["total_loss"])
            self.illumination_smoothness_loss_tracker.update_state(losses["illumination_smoothness_loss"])
            self.spatial_constancy_loss_tracker.update_state(losses["spatial_constancy_loss"])
            self.color_constancy_loss_tracker.update_state(losses["color_constancy_loss"])
            self.exposure_loss_tracker.update_state(losses["exposure_loss"])
            return {metric.name: metric.result() for metric in self.metrics}

        def train_step(self, data: Any) -> dict[str, Any]:
            with tf.GradientTape() as tape:
                output = self.dce_model(data)
                losses = self.compute_losses(data, output)
            gradients = tape.gradient(losses["total_loss"], self.dce_model.trainable_weights)
            self.optimizer.apply_gradients(zip(gradients, self.dce_model.trainable_weights, strict=True))
            return self.update_trackers(losses)

        def test_step(self, data: Any) -> dict[str, Any]:
            return self.update_trackers(self.compute_losses(data, self.dce_model(data)))

    class BatchLosses(keras.callbacks.Callback):
        """Each batch's own total loss from the tracker's running epoch mean."""

        def __init__(self) -> None:
            super().__init__()
            self.losses: list[float] = []
            self.prev = 0.0

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.prev = 0.0

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            mean = float(logs["total_loss"])
            self.losses.append((batch + 1) * mean - batch * self.prev)
            self.prev = mean

    zero_dce_model = ZeroDCE()
    zero_dce_model.compile(learning_rate=1e-4)
    history = BatchLosses()
    fit = zero_dce_model.fit(
        train_dataset, validation_data=val_dataset, epochs=3, verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    print("total_loss", [round(v, 4) for v in fit.history["total_loss"]],
          "val_total_loss", [round(v, 4) for v in fit.history["val_total_loss"]])  # fmt: skip
    enhanced = zero_dce_model(images[240:].astype("float32") / 255.0)
    print(f"mean brightness {images[240:].mean() / 255:.3f} -> {float(tf.reduce_mean(enhanced)):.3f}")
    return history.losses


# ============================================================================= PIPELINES

_cde = healthy("torchcde_neural_cde_irregular_spirals", "neural CDE (torchcde)", torchcde_irregular_spirals)
_hifigan = healthy(
    "hifigan_mpd_msd_mel_l1_zero_padded_segments", "HiFi-GAN vocoder (MPD + MSD)", hifigan_mpd_msd_mel_l1
)
_mstcn = healthy("mstcn_multi_stage_smoothing_loss", "MS-TCN action segmentation", mstcn_action_segmentation)
_eend = healthy("eend_self_attentive_pit_bce_noam", "EEND speaker diarization (PIT)", eend_self_attention_pit)
_w2v = healthy(
    "wav2vec2_pretraining_gumbel_contrastive_diversity",
    "wav2vec 2.0 pre-training",
    wav2vec2_pretraining_gumbel_contrastive,
)
_bpnn = healthy(
    "bpnn_symmetry_functions_force_matching", "Behler-Parrinello potential (forces)", bpnn_force_matching
)
_disc = healthy(
    "lanenet_discriminative_loss_instance_embedding",
    "instance embeddings (discriminative loss)",
    discriminative_loss_instance_embedding,
)
_n2v = healthy(
    "noise2void_blind_spot_residual_unet", "Noise2Void self-supervised denoising", noise2void_blind_spot
)
_han = healthy(
    "dgl_han_metapath_semantic_attention", "HAN heterogeneous graph attention", han_metapath_attention
)
_factorvae = healthy(
    "factorvae_tc_discriminator_permuted_latents", "FactorVAE (TC discriminator)", factorvae_total_correlation
)
PIPELINES: list[Any] = [
    _cde,
    buggy(_cde, "no_zero_grad"),
    _hifigan,
    buggy(_hifigan, "log_zero_nan"),
    healthy("spinningup_trpo_cartpole_value_loss", "TRPO (Spinning Up)", spinningup_trpo_cartpole),
    _mstcn,
    buggy(_mstcn, "softmax_before_ce"),
    _eend,
    buggy(_eend, "shuffled_labels"),
    _w2v,
    buggy(_w2v, "frozen_by_mistake"),
    healthy(
        "dataset_condensation_gradient_matching_synthetic_images",
        "dataset condensation (gradient matching)",
        dataset_condensation_gradient_matching,
    ),
    healthy(
        "l2o_lstm_optimizer_truncated_unrolls", "learned optimizer (L2O LSTM)", l2o_lstm_optimizer_quadratics
    ),
    healthy(
        "iic_two_head_overclustering_mutual_information",
        "IIC clustering (two heads)",
        iic_two_head_clustering,
    ),
    _bpnn,
    buggy(_bpnn, "deep_sigmoid"),
    _disc,
    buggy(_disc, "inputs_x255"),
    _n2v,
    buggy(_n2v, "dead_relu_init"),
    _han,
    buggy(_han, "train_in_eval_mode"),
    _factorvae,
    buggy(_factorvae, "lr_x100"),
]

if installed("lightning"):
    PIPELINES += [
        healthy("lightning_esrnn_holt_winters_pinball", "ES-RNN (Lightning)", lit_esrnn_holt_winters_pinball)
    ]

if installed("transformers", "tokenizers"):
    PIPELINES += [
        healthy("hf_xlnet_permutation_language_modeling", "HF Trainer XLNet PLM", hf_xlnet_permutation_lm)
    ]

if installed("keras", "tensorflow"):
    PIPELINES += [
        healthy(
            "keras_zero_dce_no_reference_losses",
            "Keras Zero-DCE (custom train_step)",
            keras_zero_dce_low_light,
        )
    ]
