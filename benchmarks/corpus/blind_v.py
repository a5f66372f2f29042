"""The fifteenth blind held-out set (issue 26), part V: mid-size modern practice, mixed. Small
trainings of kinds the corpus did not have yet, half plain PyTorch loops with the README's two
lines (`register_loss` where the script has a loss module), half trainings through tools with
their one callback or hook. Data generated in-process, fixed seeds, one CPU thread.

Plain PyTorch: a conditional VAE (one-hot class concatenated to the encoder input and to the
latent, Bernoulli decoder, summed BCE plus KL per example) on binarized glyphs; CORN ordinal
regression (conditional binary tasks, each trained on the examples that passed the previous
rank) on tabular rows; a CLAP-style contrastive audio-text model (a 1-D convolutional tower over
log-mel frames, a bag-of-tokens caption tower, a learned logit scale clamped at 100, the symmetric
cross-entropy); a Conformer frame classifier (macaron half-step feed-forwards, self-attention, the
GLU/depthwise/BatchNorm/SiLU convolution module, SpecAugment masks while training, the Noam
schedule, label smoothing, a validation pass every 50 steps); a hurdle model of daily rainfall
(a rain/no-rain logit and a log-normal amount on wet days, two heads on one trunk); a
TabTransformer (column embeddings of the categorical features through a transformer, concatenated
with layer-normalized continuous features into an MLP, AdamW); an RNN-transducer (a unidirectional
LSTM encoder, an LSTM prediction network fed blank-then-labels, an additive tanh joint, the
transducer loss written as the forward-variable dynamic program in log space) on synthetic
phone sequences; a ConvMixer (patch embedding, depthwise convolutions with residual, pointwise
convolutions, GELU and BatchNorm) on RGB glyphs with the ConvMixer CIFAR script's piecewise-linear
one-cycle lr, AdamW and clipping.

Through tools: Hugging Face `Trainer` (`mldbg.transformers.DebuggerCallback`, tiny random
configs, no download): a `Trainer` subclass overriding `compute_loss` with class-weighted
cross-entropy on imbalanced topics (BERT sequence classifier); instruction tuning of a Mistral
causal LM with a custom collator (prompt tokens masked to -100, dynamic padding to the longest
example) on `cosine` with a warm-up ratio. Lightning (`mldbg.lightning.DebuggerCallback`):
multi-label sound-event tagging (`BCEWithLogitsLoss(pos_weight=...)`, `precision="bf16-mixed"`,
`accumulate_grad_batches=2`, `LearningRateMonitor` on a `CSVLogger`, a per-step cosine); an
N-HiTS-style forecaster (stacks of MLP blocks on max-pooled inputs, interpolated coarse
forecasts, residual backcasts, the MAE) with `StochasticWeightAveraging` and
`gradient_clip_val`. Keras 3 on TensorFlow (`mldbg.keras.Hook`): a `keras.Model` subclass with a
custom `train_step` (`tf.GradientTape`, cross-entropy minus a confidence penalty on the
entropy, its own `Mean` tracker) on RGB glyphs; a two-output listing model (category and log
price) with `loss_weights` and `ExponentialDecay`. JAX: Flax NNX binary fraud detection with
`optax.sigmoid_focal_loss` on `optax.chain(clip_by_global_norm, adamw)` with
`warmup_cosine_decay_schedule`. XGBoost (`mldbg.xgboost.Hook`): `rank:map` on binary relevance
grouped by `qid`.

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the ConvMixer's `lr_max` typed as 1.0 for 0.01 (lr_x100), the transducer loop without
`optimizer.zero_grad()` (no_zero_grad), the CORN rows' ranks read from a copy of the table sorted
another way (shuffled_labels), the Keras custom-train-step CNN without its `Rescaling(1/255)`
layer (inputs_x255), the class-weighted `compute_loss` applying `torch.softmax` to the logits "to
get probabilities" before `nn.CrossEntropyLoss(weight=...)` (softmax_before_ce), the TabTransformer's MLP biases
filled with -2 "to start sparse" (dead_relu_init), the CVAE's encoder made "deeper" as eight
sigmoid layers (deep_sigmoid), the CLAP caption tower frozen by a line left from the
pre-trained-text-encoder variant after the optimizer was built (frozen_by_mistake), the hurdle
model's log-normal term vectorized over every day with a wet-day mask, so `log(0)` of the dry
days reaches the loss (log_zero_nan), the Conformer never put back in training mode after its
first validation pass (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND14`.
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

from . import BLIND14, buggy, healthy, installed

SPLIT = BLIND14

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 71)


def _glyphs(
    g: torch.Generator,
    n: int,
    size: int = 12,
    classes: int = 10,
    channels: int = 1,
    proto_seed: int = 401,
    noise: float = 0.08,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, channels, size, size) images in [0, 1]: each class a smooth random shape (colored per
    class when `channels` is 3), shifted by a pixel, of random contrast, on noise; and the labels."""
    pg = torch.Generator().manual_seed(proto_seed)
    blobs = F.avg_pool2d(torch.rand(classes, 1, size, size, generator=pg), 5, 1, 2)
    blobs = (blobs - blobs.mean((2, 3), keepdim=True)) / blobs.std((2, 3), keepdim=True)
    shapes = torch.sigmoid(5 * (blobs - 0.3))
    colors = 0.3 + 0.7 * torch.rand(classes, channels, 1, 1, generator=pg)
    protos = shapes * colors
    y = torch.randint(0, classes, (n,), generator=g)
    shift = torch.randint(-1, 2, (n, 2), generator=g)
    obj = torch.stack(
        [torch.roll(protos[c], (int(a), int(b)), (1, 2)) for c, (a, b) in zip(y, shift, strict=True)]
    )
    x = obj * (0.7 + 0.3 * torch.rand(n, 1, 1, 1, generator=g)) + noise * torch.randn(
        n, channels, size, size, generator=g
    )
    return x.clamp(0, 1), y


# ============================================================================= plain PyTorch


def cvae_binarized_glyphs(path: str, epochs: int = 12, seed: int = 0, bug: str | None = None) -> list[float]:
    """A conditional VAE (Sohn et al. 2015, the common MNIST tutorial shape): the one-hot class
    concatenated to the flattened image for the encoder (two ReLU layers to a 10-d Gaussian) and to
    the latent for the decoder (two ReLU layers to Bernoulli logits), the reparameterization trick,
    `BCEWithLogitsLoss(reduction="sum")` plus the analytic KL, divided by the batch; Adam 1e-3,
    batch 64, a test ELBO per epoch and class-conditioned samples at the end."""
    g = _seed(seed)
    x, y = _glyphs(g, 2304, 12, proto_seed=403)
    x = (x > 0.35).float().flatten(1)
    train_loader = DataLoader(TensorDataset(x[:2048], y[:2048]), batch_size=64, shuffle=True, generator=g)
    x_test, y_test = x[2048:], y[2048:]
    latent, classes, dim = 10, 10, 144

    class CVAE(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if bug == "deep_sigmoid":  # bug: the encoder made "deeper" with sigmoid layers
                layers: list[nn.Module] = [nn.Linear(dim + classes, 256), nn.Sigmoid()]
                for _ in range(7):
                    layers += [nn.Linear(256, 256), nn.Sigmoid()]
                self.encoder = nn.Sequential(*layers, nn.Linear(256, 128), nn.Sigmoid())
            else:
                self.encoder = nn.Sequential(
                    nn.Linear(dim + classes, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU()
                )
            self.fc_mu = nn.Linear(128, latent)
            self.fc_logvar = nn.Linear(128, latent)
            self.decoder = nn.Sequential(
                nn.Linear(latent + classes, 128),
                nn.ReLU(),
                nn.Linear(128, 256),
                nn.ReLU(),
                nn.Linear(256, dim),
            )

        def forward(self, x: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.encoder(torch.cat([x, c], 1))
            mu, logvar = self.fc_mu(h), self.fc_logvar(h)
            z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
            return self.decoder(torch.cat([z, c], 1)), mu, logvar

    model = CVAE()
    recon_loss = nn.BCEWithLogitsLoss(reduction="sum")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(recon_loss)

    def loss_function(logits: torch.Tensor, x: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> Any:
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return (recon_loss(logits, x) + kld) / x.size(0)

    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            logits, mu, logvar = model(xb, F.one_hot(yb, classes).float())
            loss = loss_function(logits, xb, mu, logvar)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            logits, mu, logvar = model(x_test, F.one_hot(y_test, classes).float())
            test = loss_function(logits, x_test, mu, logvar).item()
        print(f"epoch {epoch}: train {np.mean(losses[-32:]):.2f} test {test:.2f}")
    with torch.no_grad():
        c = F.one_hot(torch.arange(classes), classes).float()
        samples = torch.sigmoid(model.decoder(torch.cat([torch.randn(classes, latent), c], 1)))
    print("sample means per class", samples.mean(1).numpy().round(2))
    hook.close()
    return losses


def corn_ordinal_regression(
    path: str, steps: int = 360, seed: int = 0, bug: str | None = None
) -> list[float]:
    """CORN ordinal regression (Shi, Cao and Raschka 2021, the `coral_pytorch` `corn_loss`) on
    tabular rows of six ordered grades: an MLP with K-1 outputs, task k trained with binary
    cross-entropy only on the examples whose grade exceeds k-1 (the conditional training
    subsets), the losses summed over tasks divided by the examples used; the grade predicted from
    the cumulative product of the conditional probabilities; Adam 1e-3, batch 128, MAE on a test
    split every 60 steps."""
    g = _seed(seed)
    n, d, k = 4096, 10, 6
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, generator=g) / math.sqrt(d)
    score = x @ w + 0.4 * torch.sin(2 * x[:, 0]) + 0.3 * x[:, 1] * x[:, 2] + 0.3 * torch.randn(n, generator=g)
    cuts = torch.quantile(score, torch.tensor([0.15, 0.35, 0.6, 0.8, 0.93]))
    grade = torch.bucketize(score, cuts)
    table = {"features": x, "grade": grade}
    if bug == "shuffled_labels":  # bug: the grades read from a copy of the table sorted another way
        order = torch.argsort(torch.rand(n, generator=g))
        table["grade"] = grade[order]
    x_train, y_train = table["features"][:3584], table["grade"][:3584]
    x_test, y_test = x[3584:], grade[3584:]
    model = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, k - 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)

    def corn_loss(logits: torch.Tensor, y: torch.Tensor, num_classes: int) -> torch.Tensor:
        total, num_examples = logits.new_zeros(()), 0
        for i in range(num_classes - 1):
            subset = y > i - 1
            if subset.sum() == 0:
                continue
            label = (y[subset] > i).float()
            pred = logits[subset, i]
            total = total + F.binary_cross_entropy_with_logits(pred, label, reduction="sum")
            num_examples += int(subset.sum())
        return total / num_examples

    losses: list[float] = []
    for step in range(steps):
        idx = torch.randint(0, len(x_train), (128,), generator=g)
        loss = corn_loss(model(x_train[idx]), y_train[idx], k)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 60 == 59:
            with torch.no_grad():
                probas = torch.cumprod(torch.sigmoid(model(x_test)), dim=1)
                pred = (probas > 0.5).sum(1)
            print(
                f"step {step + 1}: loss {np.mean(losses[-60:]):.4f} test MAE {(pred - y_test).abs().float().mean():.3f}"
            )
    hook.close()
    return losses


def clap_audio_text_contrastive(
    path: str, steps: int = 320, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A CLAP-style (LAION-CLAP / Microsoft CLAP, shrunk) contrastive audio-text model: log-mel
    clips of sound events through a 1-D convolutional tower (BatchNorm, ReLU, strided, mean-pooled
    over time), captions through a token embedding averaged over the non-padding tokens and an MLP,
    both projected to 64-d and L2-normalized; a learned `logit_scale` initialised at log(1/0.07)
    and clamped at 100; `(CE(logits_a, arange) + CE(logits_t, arange)) / 2`; AdamW 1e-3, weight
    decay 0.1 (none on the scale), batch 64, a text-to-audio recall@1 on held-out pairs."""
    g = _seed(seed)
    n, frames, mels, events, vocab, cap_len = 2560, 48, 32, 16, 120, 8
    pg = torch.Generator().manual_seed(409)
    spectra = torch.randn(events, mels, 1, generator=pg)
    rhythm = torch.rand(events, 1, frames, generator=pg) < 0.4
    ev = torch.randint(0, events, (n,), generator=g)
    loud = 0.5 + torch.rand(n, 1, 1, generator=g)
    audio = loud * spectra[ev] * rhythm[ev].float() + 0.8 * torch.randn(n, mels, frames, generator=g)
    words = torch.randint(1, vocab, (events, 3), generator=pg)
    caps = torch.randint(1, vocab, (n, cap_len), generator=g)
    for j in range(3):
        caps[:, 2 * j] = words[ev, j]
    lens = torch.randint(5, cap_len + 1, (n,), generator=g)
    caps[torch.arange(cap_len)[None] >= lens[:, None]] = 0

    class AudioEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Sequential(
                nn.Conv1d(mels, 64, 3, padding=1), nn.BatchNorm1d(64), nn.ReLU(),
                nn.Conv1d(64, 96, 3, stride=2, padding=1), nn.BatchNorm1d(96), nn.ReLU(),
                nn.Conv1d(96, 128, 3, stride=2, padding=1), nn.BatchNorm1d(128), nn.ReLU(),
            )  # fmt: skip
            self.proj = nn.Linear(128, 64)

        def forward(self, a: torch.Tensor) -> torch.Tensor:
            return self.proj(self.conv(a).mean(-1))

    class TextEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, 64, padding_idx=0)
            self.mlp = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))

        def forward(self, t: torch.Tensor) -> torch.Tensor:
            mask = (t != 0).float().unsqueeze(-1)
            return self.mlp((self.embed(t) * mask).sum(1) / mask.sum(1))

    class CLAP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.audio_encoder = AudioEncoder()
            self.text_encoder = TextEncoder()
            self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

        def forward(self, a: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            za = F.normalize(self.audio_encoder(a), dim=-1)
            zt = F.normalize(self.text_encoder(t), dim=-1)
            return self.logit_scale.exp().clamp(max=100) * za @ zt.t()

    model = CLAP()
    decay = [p for n_, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n_, p in model.named_parameters() if p.ndim <= 1]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-3
    )
    if bug == "frozen_by_mistake":  # bug: left from the variant with a pre-trained text encoder
        for p in model.text_encoder.parameters():
            p.requires_grad = False
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for step in range(steps):
        model.train()
        idx = torch.randperm(2048, generator=g)[:64]
        logits_per_audio = model(audio[idx], caps[idx])
        labels = torch.arange(64)
        loss = (criterion(logits_per_audio, labels) + criterion(logits_per_audio.t(), labels)) / 2
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 80 == 79:
            model.eval()
            with torch.no_grad():
                sims = model(audio[2048:2304], caps[2048:2304]).t()
                hits = ev[2048:2304][sims.argmax(1)] == ev[2048:2304]
            print(
                f"step {step + 1}: loss {np.mean(losses[-80:]):.3f} t2a event recall@1 {hits.float().mean():.3f}"
            )
    hook.close()
    return losses


def conformer_frame_classifier(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Conformer (Gulati et al. 2020) frame classifier, two blocks at d=48: half-step macaron
    feed-forwards (LayerNorm, Linear x4, SiLU, dropout), multi-head self-attention, the
    convolution module (pointwise conv to 2d, GLU, depthwise conv k=15, BatchNorm, SiLU,
    pointwise), a final LayerNorm; SpecAugment time and frequency masks applied in `forward`
    while `self.training`; Adam (0.9, 0.98, eps 1e-9) on the Noam schedule (warm-up 60),
    cross-entropy with label smoothing 0.1 on per-frame phone labels, batch 32, a validation pass
    under `model.eval()` every 50 steps."""
    g = _seed(seed)
    n, frames, feats, phones, d = 1600, 60, 24, 12, 48
    pg = torch.Generator().manual_seed(419)
    protos = 0.6 * torch.randn(phones, feats, generator=pg)
    labels = torch.zeros(n, frames, dtype=torch.long)
    for i in range(n):
        t = 0
        while t < frames:
            dur = int(torch.randint(3, 9, (1,), generator=g))
            labels[i, t : t + dur] = int(torch.randint(0, phones, (1,), generator=g))
            t += dur
    x = protos[labels] + 1.5 * torch.randn(n, frames, feats, generator=g)
    x = F.avg_pool1d(x.transpose(1, 2), 3, 1, 1, count_include_pad=False).transpose(1, 2)

    class FeedForward(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(
                nn.LayerNorm(d),
                nn.Linear(d, 4 * d),
                nn.SiLU(),
                nn.Dropout(0.1),
                nn.Linear(4 * d, d),
                nn.Dropout(0.1),
            )

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            return self.net(h)

    class ConvModule(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.pw1 = nn.Conv1d(d, 2 * d, 1)
            self.dw = nn.Conv1d(d, d, 15, padding=7, groups=d)
            self.bn = nn.BatchNorm1d(d)
            self.pw2 = nn.Conv1d(d, d, 1)
            self.drop = nn.Dropout(0.1)

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            h = F.glu(self.pw1(self.norm(h).transpose(1, 2)), dim=1)
            h = self.pw2(F.silu(self.bn(self.dw(h))))
            return self.drop(h.transpose(1, 2))

    class ConformerBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ff1, self.ff2 = FeedForward(), FeedForward()
            self.attn_norm = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, 4, dropout=0.1, batch_first=True)
            self.conv = ConvModule()
            self.out_norm = nn.LayerNorm(d)

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            h = h + 0.5 * self.ff1(h)
            a = self.attn_norm(h)
            h = h + self.attn(a, a, a, need_weights=False)[0]
            h = h + self.conv(h)
            h = h + 0.5 * self.ff2(h)
            return self.out_norm(h)

    class Conformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(feats, d)
            self.pos = nn.Parameter(0.02 * torch.randn(1, frames, d))
            self.blocks = nn.ModuleList([ConformerBlock(), ConformerBlock()])
            self.out = nn.Linear(d, phones)

        def spec_augment(self, f: torch.Tensor) -> torch.Tensor:
            f = f.clone()
            for i in range(f.size(0)):
                t0, w = random.randrange(frames - 8), random.randrange(1, 8)
                f[i, t0 : t0 + w] = 0
                f0, fw = random.randrange(feats - 4), random.randrange(1, 4)
                f[i, :, f0 : f0 + fw] = 0
            return f

        def forward(self, f: torch.Tensor) -> torch.Tensor:
            if self.training:
                f = self.spec_augment(f)
            h = self.inp(f) + self.pos
            for block in self.blocks:
                h = block(h)
            return self.out(h)

    model = Conformer()
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    warmup, factor = 60, 0.2
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: factor * d**-0.5 * min((s + 1) ** -0.5, (s + 1) * warmup**-1.5)
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, 1400, (32,), generator=g)
        logits = model(x[idx])
        loss = criterion(logits.reshape(-1, phones), labels[idx].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                acc = (model(x[1400:]).argmax(-1) == labels[1400:]).float().mean()
            print(f"step {step + 1}: loss {np.mean(losses[-50:]):.4f} val frame acc {acc:.3f}")
            if bug != "train_in_eval_mode":  # bug: `model.train()` forgotten after validation
                model.train()
    hook.close()
    return losses


def hurdle_lognormal_rainfall(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A hurdle model of daily rainfall from weather-station features: one MLP trunk, a head for
    the logit of a wet day (`BCEWithLogitsLoss`) and a head for the mean and log-scale of the
    log-normal amount on wet days (its negative log-likelihood on the wet days of the batch);
    Adam 1e-3, batch 256, the predicted expected amount checked on a test split."""
    g = _seed(seed)
    n, d = 8192, 8
    x = torch.randn(n, d, generator=g)
    wet_logit = -0.6 + 1.2 * x[:, 0] - 0.8 * x[:, 1] + 0.5 * x[:, 2] * x[:, 3]
    wet = torch.rand(n, generator=g) < torch.sigmoid(wet_logit)
    log_amount = 1.0 + 0.6 * x[:, 0] + 0.4 * torch.tanh(x[:, 4]) + 0.5 * torch.randn(n, generator=g)
    rain = torch.where(wet, torch.exp(log_amount), torch.zeros(n))  # mm per day, 0 on dry days

    class Hurdle(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
            self.occurrence = nn.Linear(64, 1)
            self.amount = nn.Linear(64, 2)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            h = self.trunk(x)
            mu, log_sigma = self.amount(h).unbind(-1)
            return self.occurrence(h).squeeze(-1), mu, log_sigma

    model = Hurdle()
    bce = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(bce)
    losses: list[float] = []
    for step in range(steps):
        idx = torch.randint(0, 7168, (256,), generator=g)
        y = rain[idx]
        is_wet = (y > 0).float()
        logit, mu, log_sigma = model(x[idx])
        if bug == "log_zero_nan":  # bug: the log-normal term vectorized over every day, masked after
            log_y = torch.log(y)
            nll = (log_y + log_sigma + 0.5 * ((log_y - mu) / log_sigma.exp()) ** 2) * is_wet
            amount_loss = nll.sum() / is_wet.sum().clamp(min=1)
        else:
            m = y > 0
            log_y = torch.log(y[m])
            nll = log_y + log_sigma[m] + 0.5 * ((log_y - mu[m]) / log_sigma[m].exp()) ** 2
            amount_loss = nll.mean()
        loss = bce(logit, is_wet) + amount_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                logit, mu, log_sigma = model(x[7168:])
                expected = torch.sigmoid(logit) * torch.exp(mu + 0.5 * log_sigma.exp() ** 2)
                mae = (expected - rain[7168:]).abs().mean()
            print(f"step {step + 1}: loss {np.mean(losses[-100:]):.4f} test MAE {mae:.3f} mm")
    hook.close()
    return losses


def tab_transformer(path: str, epochs: int = 10, seed: int = 0, bug: str | None = None) -> list[float]:
    """TabTransformer (Huang et al. 2020): each categorical column embedded (plus a learned column
    embedding), two transformer encoder layers over the columns, their outputs flattened and
    concatenated with the layer-normalized continuous features into an MLP (4l, 2l, ReLU) to one
    logit; `BCEWithLogitsLoss`, AdamW 1e-3 weight decay 1e-4, batch 256, validation AUC-like
    accuracy per epoch."""
    g = _seed(seed)
    n, cards, n_cont, d = 6144, [6, 9, 12, 5, 8, 10], 4, 16
    cats = torch.stack([torch.randint(0, c, (n,), generator=g) for c in cards], 1)
    cont = torch.randn(n, n_cont, generator=g)
    pg = torch.Generator().manual_seed(421)
    effects = [torch.randn(c, generator=pg) for c in cards]
    pair = torch.randn(cards[0], cards[1], generator=pg)
    logit = sum(e[cats[:, j]] * 0.6 for j, e in enumerate(effects)) + pair[cats[:, 0], cats[:, 1]]
    logit = logit + 0.8 * cont[:, 0] - 0.5 * cont[:, 1] * cont[:, 2] - 0.3
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    train_loader = DataLoader(
        TensorDataset(cats[:5120], cont[:5120], y[:5120]), batch_size=256, shuffle=True, generator=g
    )

    class TabTransformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embeds = nn.ModuleList([nn.Embedding(c, d) for c in cards])
            self.column_embed = nn.Parameter(0.02 * torch.randn(len(cards), d))
            layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.1, batch_first=True)
            self.transformer = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.cont_norm = nn.LayerNorm(n_cont)
            width = len(cards) * d + n_cont
            self.mlp = nn.Sequential(
                nn.Linear(width, 4 * width // 4), nn.ReLU(), nn.Linear(width, 2 * width // 4), nn.ReLU(),
                nn.Linear(2 * width // 4, 1),
            )  # fmt: skip

        def forward(self, c: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            tokens = torch.stack([e(c[:, j]) for j, e in enumerate(self.embeds)], 1) + self.column_embed
            h = self.transformer(tokens).flatten(1)
            return self.mlp(torch.cat([h, self.cont_norm(x)], 1)).squeeze(-1)

    model = TabTransformer()
    if bug == "dead_relu_init":  # bug: the MLP's biases filled with -2 "to start sparse"
        for m in model.mlp:
            if isinstance(m, nn.Linear):
                nn.init.constant_(m.bias, -2.0)
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for cb, xb, yb in train_loader:
            loss = criterion(model(cb, xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = ((model(cats[5120:], cont[5120:]) > 0).float() == y[5120:]).float().mean()
        print(f"epoch {epoch}: loss {np.mean(losses[-20:]):.4f} val acc {acc:.3f}")
    hook.close()
    return losses


def rnn_transducer_phones(path: str, steps: int = 260, seed: int = 0, bug: str | None = None) -> list[float]:
    """An RNN-transducer (Graves 2012) on synthetic utterances: a unidirectional LSTM encoder over
    the acoustic frames, an LSTM prediction network over blank-then-labels, an additive joint
    (`tanh(W_e enc + W_p pred)` to the vocabulary with blank 0), the transducer loss as the
    forward-variable recursion in log space (`alpha[t, u] = logaddexp(alpha[t-1, u] +
    blank, alpha[t, u-1] + emit)`), summed over the batch and divided by the label count; Adam
    1e-3, clipping at 5, batch 32, greedy decoding accuracy every 65 steps."""
    g = _seed(seed)
    n, u_len, vocab, feats = 1536, 4, 7, 16
    pg = torch.Generator().manual_seed(431)
    protos = 1.5 * torch.randn(vocab, feats, generator=pg)
    targets = torch.randint(1, vocab, (n, u_len), generator=g)
    frames_list = []
    for i in range(n):
        seq = []
        for lab in targets[i].tolist():
            seq += [0] * int(torch.randint(0, 2, (1,), generator=g)) + [lab] * int(
                torch.randint(2, 4, (1,), generator=g)
            )
        seq = (seq + [0] * 20)[:20]
        frames_list.append(seq)
    frame_ids = torch.tensor(frames_list)
    x = protos[frame_ids] * (frame_ids > 0).float().unsqueeze(-1) + 0.7 * torch.randn(
        n, 20, feats, generator=g
    )
    t_len = x.size(1)

    class Transducer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.LSTM(feats, 64, batch_first=True)
            self.embed = nn.Embedding(vocab, 32)
            self.predictor = nn.LSTM(32, 64, batch_first=True)
            self.enc_proj = nn.Linear(64, 64)
            self.pred_proj = nn.Linear(64, 64, bias=False)
            self.out = nn.Linear(64, vocab)

        def forward(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            enc, _ = self.encoder(f)
            pred_in = torch.cat([torch.zeros_like(y[:, :1]), y], 1)  # blank as start symbol
            pred, _ = self.predictor(self.embed(pred_in))
            joint = torch.tanh(self.enc_proj(enc).unsqueeze(2) + self.pred_proj(pred).unsqueeze(1))
            return self.out(joint).log_softmax(-1)  # (B, T, U+1, V)

    def transducer_loss(logp: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        b = logp.size(0)
        blank = logp[..., 0]
        emit = logp[:, :, :-1, :].gather(3, y[:, None, :, None].expand(b, t_len, u_len, 1)).squeeze(-1)
        alpha: list[list[torch.Tensor]] = [[logp.new_zeros(b)] + [logp.new_zeros(b)] * u_len]
        for u in range(1, u_len + 1):
            alpha[0][u] = alpha[0][u - 1] + emit[:, 0, u - 1]
        for t in range(1, t_len):
            row = [alpha[t - 1][0] + blank[:, t - 1, 0]]
            for u in range(1, u_len + 1):
                row.append(
                    torch.logaddexp(alpha[t - 1][u] + blank[:, t - 1, u], row[u - 1] + emit[:, t, u - 1])
                )
            alpha.append(row)
        log_lik = alpha[t_len - 1][u_len] + blank[:, t_len - 1, u_len]
        return -log_lik.sum() / (b * u_len)

    model = Transducer()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []

    @torch.no_grad()
    def greedy(f: torch.Tensor) -> list[list[int]]:
        enc, _ = model.encoder(f)
        outs = []
        for i in range(f.size(0)):
            hyp: list[int] = []
            state = None
            pred, state = model.predictor(model.embed(torch.zeros(1, 1, dtype=torch.long)), state)
            for t in range(t_len):
                for _ in range(3):
                    j = torch.tanh(model.enc_proj(enc[i, t]) + model.pred_proj(pred[0, 0]))
                    k = int(model.out(j).argmax())
                    if k == 0:
                        break
                    hyp.append(k)
                    pred, state = model.predictor(model.embed(torch.tensor([[k]])), state)
            outs.append(hyp)
        return outs

    for step in range(steps):
        model.train()
        idx = torch.randint(0, 1408, (32,), generator=g)
        loss = transducer_loss(model(x[idx], targets[idx]), targets[idx])
        if bug != "no_zero_grad":  # bug: the line dropped when the loop was refactored
            optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        losses.append(loss.item())
        if step % 65 == 64:
            model.eval()
            hyps = greedy(x[1408:1472])
            exact = np.mean([h == t for h, t in zip(hyps, targets[1408:1472].tolist(), strict=True)])
            print(f"step {step + 1}: loss {np.mean(losses[-65:]):.4f} exact-sequence acc {exact:.3f}")
    hook.close()
    return losses


def convmixer_onecycle(path: str, epochs: int = 12, seed: int = 0, bug: str | None = None) -> list[float]:
    """ConvMixer (Trockman and Kolter, "Patches Are All You Need?") in the shape of its CIFAR-10
    script, shrunk: a patch-embedding conv (patch 2), four blocks of a residual depthwise conv
    (kernel 5) and a pointwise conv, each followed by GELU and BatchNorm, adaptive average pooling
    and a linear head; AdamW with weight decay 0.005, the script's piecewise-linear schedule
    `np.interp([t], [0, epochs*2//5, epochs*4//5, epochs], [0, lr_max, lr_max/20, 0])` set per
    step, `lr_max` 0.01, gradient clipping at 1.0, batch 128, a test accuracy per epoch."""
    g = _seed(seed)
    x, y = _glyphs(g, 2560, 16, channels=3, proto_seed=433, noise=0.5)
    mean, std = x[:2048].mean((0, 2, 3), keepdim=True), x[:2048].std((0, 2, 3), keepdim=True)
    x = (x - mean) / std
    trainloader = DataLoader(TensorDataset(x[:2048], y[:2048]), batch_size=128, shuffle=True, generator=g)
    dim, depth, kernel_size, patch_size = 64, 4, 5, 2

    class Residual(nn.Module):
        def __init__(self, fn: nn.Module) -> None:
            super().__init__()
            self.fn = fn

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fn(x) + x

    model = nn.Sequential(
        nn.Conv2d(3, dim, kernel_size=patch_size, stride=patch_size), nn.GELU(), nn.BatchNorm2d(dim),
        *[
            nn.Sequential(
                Residual(nn.Sequential(
                    nn.Conv2d(dim, dim, kernel_size, groups=dim, padding="same"), nn.GELU(), nn.BatchNorm2d(dim)
                )),
                nn.Conv2d(dim, dim, kernel_size=1), nn.GELU(), nn.BatchNorm2d(dim),
            )
            for _ in range(depth)
        ],
        nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(dim, 10),
    )  # fmt: skip
    lr_max = 1.0 if bug == "lr_x100" else 0.01  # bug: lr_max typed as 1.0 for 0.01
    lr_schedule = lambda t: np.interp(  # noqa: E731
        [t], [0, epochs * 2 // 5, epochs * 4 // 5, epochs], [0, lr_max, lr_max / 20.0, 0]
    )[0]
    opt = torch.optim.AdamW(model.parameters(), lr=lr_max, weight_decay=0.005)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for i, (X, Y) in enumerate(trainloader):  # noqa: N806
            lr = lr_schedule(epoch + (i + 1) / len(trainloader))
            opt.param_groups[0].update(lr=lr)
            opt.zero_grad()
            loss = criterion(model(X), Y)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x[2048:]).argmax(1) == y[2048:]).float().mean()
        print(f"epoch {epoch}: lr {lr:.4f} train loss {np.mean(losses[-16:]):.4f} test acc {acc:.3f}")
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


def _hf_args(path: str, **args: Any) -> Any:
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=os.path.join(path, "trainer"), logging_steps=1, report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=0, save_strategy="no", **args,
    )  # fmt: skip


def _hf_run(trainer: Any) -> list[float]:
    """`trainer.train()` with the per-step log line removed; the training losses of the log."""
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(trainer.args.output_dir, ignore_errors=True)
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


def hf_weighted_loss_trainer(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Hugging Face docs' "customize the Trainer" recipe: a `Trainer` subclass overriding
    `compute_loss(model, inputs, return_outputs=False, num_items_in_batch=None)` to pop the labels
    and apply `nn.CrossEntropyLoss(weight=...)` with inverse-frequency class weights, on
    imbalanced topics (70/20/10) with a tiny `BertForSequenceClassification` from a config; lr
    5e-4, linear decay with 10 % warm-up, batch 32, 4 epochs, macro recall per epoch."""
    from transformers import BertConfig, BertForSequenceClassification, Trainer

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    n, length, vocab = 1400, 32, 160
    y = torch.multinomial(torch.tensor([0.7, 0.2, 0.1]), n, replacement=True, generator=g)
    pg = torch.Generator().manual_seed(439)
    topics = torch.softmax(2.0 * torch.randn(3, vocab - 2, generator=pg), -1)
    background = torch.full((vocab - 2,), 1.0 / (vocab - 2))
    ids = (
        torch.stack(
            [
                torch.where(
                    torch.rand(length, generator=g) < 0.3,
                    torch.multinomial(topics[c], length, replacement=True, generator=g),
                    torch.multinomial(background, length, replacement=True, generator=g),
                )
                for c in y
            ]
        )
        + 2
    )
    ids[:, 0] = 1  # [CLS]
    mask = torch.ones_like(ids)
    counts = torch.bincount(y[:1200], minlength=3).float()
    class_weights = counts.sum() / (3 * counts)

    class WeightedLossTrainer(Trainer):
        def compute_loss(
            self,
            model: Any,
            inputs: dict[str, Any],
            return_outputs: bool = False,
            num_items_in_batch: Any = None,
        ) -> Any:
            labels = inputs.pop("labels")
            outputs = model(**inputs)
            logits = outputs.get("logits")
            if bug == "softmax_before_ce":  # bug: "probabilities" for the weighted loss, which wants logits
                logits = torch.softmax(logits, dim=-1)
            loss_fct = nn.CrossEntropyLoss(weight=class_weights.to(logits.device))
            loss = loss_fct(logits.view(-1, self.model.config.num_labels), labels.view(-1))
            return (loss, outputs) if return_outputs else loss

    config = BertConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=64, num_labels=3,
    )  # fmt: skip
    model = BertForSequenceClassification(config)

    def compute_metrics(eval_pred: Any) -> dict[str, float]:
        logits, labels = eval_pred
        pred = np.argmax(logits, -1)
        return {"macro_recall": float(np.mean([(pred[labels == c] == c).mean() for c in range(3)]))}

    args = _hf_args(
        path, eval_strategy="epoch", learning_rate=5e-4, per_device_train_batch_size=32, per_device_eval_batch_size=64,
        num_train_epochs=4, warmup_steps=0.1, weight_decay=0.01,
    )  # fmt: skip
    trainer = WeightedLossTrainer(
        model=model, args=args, train_dataset=_Examples(input_ids=ids[:1200], attention_mask=mask[:1200], labels=y[:1200]),
        eval_dataset=_Examples(input_ids=ids[1200:], attention_mask=mask[1200:], labels=y[1200:]),
        compute_metrics=compute_metrics, callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    losses = _hf_run(trainer)
    print([round(e["eval_macro_recall"], 3) for e in trainer.state.log_history if "eval_macro_recall" in e])
    return losses


def hf_mistral_instruction_collator(path: str, seed: int = 0) -> list[float]:
    """Instruction tuning the way a hand-written SFT script does it with the plain `Trainer`: a
    tiny `MistralForCausalLM` from a config, examples "prompt tokens, separator, answer, eos" of
    varying lengths (the task: reverse and shift a digit string), a custom collator padding to the
    longest example of the batch (right padding, attention mask 0) and setting the labels of the
    prompt and of the padding to -100; lr 2e-3, `lr_scheduler_type="cosine"`, `warmup_steps=0.05` (a ratio),
    batch 16, 3 epochs, `max_grad_norm=1.0`, an exact-answer check by greedy generation."""
    from transformers import MistralConfig, MistralForCausalLM, Trainer

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    pad, bos, eos, sep, vocab = 0, 1, 2, 3, 24
    examples = []
    for _ in range(1600):
        k = int(torch.randint(3, 8, (1,), generator=g))
        digits = torch.randint(4, 14, (k,), generator=g).tolist()
        answer = [d + 10 for d in reversed(digits)]
        examples.append({"prompt": [bos, *digits, sep], "answer": [*answer, eos]})

    def collate(batch: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        longest = max(len(e["prompt"]) + len(e["answer"]) for e in batch)
        input_ids = torch.full((len(batch), longest), pad)
        attention_mask = torch.zeros((len(batch), longest), dtype=torch.long)
        labels = torch.full((len(batch), longest), -100)
        for i, e in enumerate(batch):
            seq = e["prompt"] + e["answer"]
            input_ids[i, : len(seq)] = torch.tensor(seq)
            attention_mask[i, : len(seq)] = 1
            labels[i, len(e["prompt"]) : len(seq)] = torch.tensor(e["answer"])
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}

    class ListDataset(Dataset):
        def __init__(self, rows: list[dict[str, list[int]]]) -> None:
            self.rows = rows

        def __len__(self) -> int:
            return len(self.rows)

        def __getitem__(self, i: int) -> dict[str, list[int]]:
            return self.rows[i]

    config = MistralConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, pad_token_id=pad, bos_token_id=bos, eos_token_id=eos,
        sliding_window=None,
    )  # fmt: skip
    model = MistralForCausalLM(config)
    args = _hf_args(
        path, learning_rate=2e-3, lr_scheduler_type="cosine", warmup_steps=0.05, per_device_train_batch_size=16,
        num_train_epochs=3, max_grad_norm=1.0, weight_decay=0.0, remove_unused_columns=False,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args, train_dataset=ListDataset(examples[:1536]), data_collator=collate,
        callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    losses = _hf_run(trainer)
    model.eval()
    correct = 0
    with torch.no_grad():
        for e in examples[1536:1568]:
            out = model.generate(
                torch.tensor([e["prompt"]]),
                max_new_tokens=len(e["answer"]),
                do_sample=False,
                pad_token_id=pad,
            )
            correct += out[0, len(e["prompt"]) :].tolist() == e["answer"]
    print("exact answers", correct, "/ 32")
    return losses


# ============================================================================= Lightning


def _pl_trainer(path: str, callbacks: list[Any], **kw: Any) -> Any:
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    kw.setdefault("logger", False)
    return pl.Trainer(
        accelerator="cpu", devices=1, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, default_root_dir=path, callbacks=[DebuggerCallback(path), *callbacks], **kw,
    )  # fmt: skip


def _pl_losses() -> Any:
    """A callback keeping each training batch's loss (`outputs["loss"]` or the returned tensor)."""
    import lightning.pytorch as pl

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    return LossHistory()


def lit_sound_event_tagging_bf16(path: str, max_epochs: int = 8, seed: int = 0) -> list[float]:
    """Multi-label sound-event tagging in Lightning (the AudioSet / FSD50K recipe shrunk): log-mel
    clips holding zero to three of eight overlapping events, a small 2-D CNN (conv-BN-ReLU-pool
    blocks, global mean over time and max over frequency), `nn.BCEWithLogitsLoss(pos_weight=...)`
    from the label frequencies, `Trainer(precision="bf16-mixed", accumulate_grad_batches=2,
    callbacks=[LearningRateMonitor("step")], logger=CSVLogger(...))`, Adam 2e-3 with a per-step
    `CosineAnnealingLR` over `trainer.estimated_stepping_batches`, a validation mAP-like mean
    per-class accuracy each epoch."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import LearningRateMonitor
    from lightning.pytorch.loggers import CSVLogger

    g = _seed(seed)
    pl.seed_everything(seed, verbose=False)
    n, mels, frames, events = 1536, 32, 40, 8
    pg = torch.Generator().manual_seed(443)
    freq_shape = torch.softmax(3 * torch.randn(events, mels, generator=pg), -1) * mels
    rate = torch.tensor([0.35, 0.3, 0.25, 0.2, 0.15, 0.1, 0.08, 0.05])
    present = (torch.rand(n, events, generator=g) < rate).float()
    onsets = torch.randint(0, frames // 2, (n, events), generator=g)
    t = torch.arange(frames)
    act = ((t[None, None] >= onsets[..., None]) & (t[None, None] < onsets[..., None] + 16)).float()
    spec = torch.einsum("ne,em,net->nmt", present, freq_shape, act)
    x = torch.log1p(spec + 0.3 * torch.rand(n, mels, frames, generator=g)).unsqueeze(1)
    pos_weight = (1 - present[:1280].mean(0)) / present[:1280].mean(0)

    class Tagger(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()

            def block(i: int, o: int) -> nn.Module:
                return nn.Sequential(
                    nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(), nn.MaxPool2d(2)
                )

            self.features = nn.Sequential(block(1, 16), block(16, 32), block(32, 64))
            self.head = nn.Linear(64, events)
            self.criterion = nn.BCEWithLogitsLoss(pos_weight=pos_weight)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.features(x)  # (B, C, F, T)
            return self.head(h.mean(3).amax(2))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            loss = self.criterion(self(xb), yb)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            acc = ((self(xb) > 0).float() == yb).float().mean(0).mean()
            self.log("val_acc", acc, prog_bar=True)

        def configure_optimizers(self) -> Any:
            opt = torch.optim.Adam(self.parameters(), lr=2e-3)
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(
                opt, T_max=self.trainer.estimated_stepping_batches
            )
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    history = _pl_losses()
    trainer = _pl_trainer(
        path, [LearningRateMonitor(logging_interval="step"), history], max_epochs=max_epochs,
        precision="bf16-mixed", accumulate_grad_batches=2, logger=CSVLogger(path, name="tagger"),
        log_every_n_steps=5,
    )  # fmt: skip
    train = DataLoader(TensorDataset(x[:1280], present[:1280]), batch_size=32, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(x[1280:], present[1280:]), batch_size=128)
    trainer.fit(Tagger(), train, val)
    print("val_acc", float(trainer.callback_metrics.get("val_acc", float("nan"))))
    return history.losses


def lit_nhits_swa_forecaster(path: str, max_epochs: int = 12, seed: int = 0) -> list[float]:
    """An N-HiTS-style forecaster (Challu et al. 2023) in Lightning: three stacks of one block
    each, every block max-pooling the 48-step input at its own rate (8, 4, 1), an MLP of 128 ReLU
    units to a backcast and a coarse forecast interpolated linearly to the 12-step horizon, the
    backcast subtracted from the residual input and the forecasts summed; the MAE, Adam 1e-3
    with `StepLR(step_size=4, gamma=0.5)`, `StochasticWeightAveraging(swa_lrs=5e-4,
    swa_epoch_start=0.75)`, `gradient_clip_val=1.0`, batch 64, a validation MAE each epoch."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import StochasticWeightAveraging

    g = _seed(seed)
    pl.seed_everything(seed, verbose=False)
    lookback, horizon, n_series, length = 48, 12, 24, 400
    t = torch.arange(length).float()
    series = []
    for _ in range(n_series):
        p1, p2 = (
            float(torch.randint(12, 30, (1,), generator=g)),
            float(torch.randint(60, 120, (1,), generator=g)),
        )
        a, b = torch.rand(2, generator=g) + 0.3
        series.append(
            a * torch.sin(2 * math.pi * t / p1) + b * torch.sin(2 * math.pi * t / p2) + 0.002 * t
            + 0.15 * torch.randn(length, generator=g)
        )  # fmt: skip
    data = torch.stack(series)
    windows = data.unfold(1, lookback + horizon, 3).reshape(-1, lookback + horizon)
    perm = torch.randperm(len(windows), generator=g)
    windows = windows[perm]
    split = int(0.85 * len(windows))

    class Block(nn.Module):
        def __init__(self, pool: int, n_coarse: int) -> None:
            super().__init__()
            self.pool = nn.MaxPool1d(pool, pool, ceil_mode=True)
            self.mlp = nn.Sequential(
                nn.Linear(math.ceil(lookback / pool), 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU()
            )
            self.backcast = nn.Linear(128, lookback)
            self.forecast = nn.Linear(128, n_coarse)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.mlp(self.pool(x.unsqueeze(1)).squeeze(1))
            coarse = self.forecast(h).unsqueeze(1)
            fc = F.interpolate(coarse, size=horizon, mode="linear", align_corners=True).squeeze(1)
            return self.backcast(h), fc

    class NHiTS(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList([Block(8, 2), Block(4, 4), Block(1, horizon)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            level = x[:, -1:]
            residual, forecast = x - level, 0.0
            for block in self.blocks:
                back, fc = block(residual)
                residual = residual - back
                forecast = forecast + fc
            return forecast + level

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            (w,) = batch
            loss = F.l1_loss(self(w[:, :lookback]), w[:, lookback:])
            self.log("train_mae", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            (w,) = batch
            self.log("val_mae", F.l1_loss(self(w[:, :lookback]), w[:, lookback:]))

        def configure_optimizers(self) -> Any:
            opt = torch.optim.Adam(self.parameters(), lr=1e-3)
            return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)]

    history = _pl_losses()
    trainer = _pl_trainer(
        path, [StochasticWeightAveraging(swa_lrs=5e-4, swa_epoch_start=0.75), history], max_epochs=max_epochs,
        gradient_clip_val=1.0,
    )  # fmt: skip
    train = DataLoader(TensorDataset(windows[:split]), batch_size=64, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(windows[split:]), batch_size=256)
    trainer.fit(NHiTS(), train, val)
    print("val_mae", float(trainer.callback_metrics.get("val_mae", float("nan"))))
    return history.losses


# ============================================================================= Keras 3


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


def keras_custom_train_step_confidence_penalty(
    path: str, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The Keras guide "Customizing what happens in `fit()`" on the TensorFlow backend: a
    `keras.Model` subclass whose `train_step` runs the forward pass under `tf.GradientTape`,
    computes the cross-entropy minus 0.1 times the predictive entropy (the confidence penalty of
    Pereyra et al. 2017), applies the gradients with `self.optimizer.apply_gradients` and updates
    its own `keras.metrics.Mean` loss tracker listed in `metrics`; the functional CNN inside starts
    with `Rescaling(1/255)` on uint8 RGB glyphs; Adam 1e-3, batch 64, 8 epochs."""
    import keras
    import tensorflow as tf
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    x, y = _glyphs(g, 2560, 16, channels=3, proto_seed=449, noise=0.3)
    images = (x * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
    labels = y.numpy()

    class ConfidencePenaltyModel(keras.Model):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.loss_tracker = keras.metrics.Mean(name="loss")
            self.acc = keras.metrics.SparseCategoricalAccuracy(name="accuracy")

        def train_step(self, data: Any) -> Any:
            xb, yb = data
            with tf.GradientTape() as tape:
                logits = self(xb, training=True)
                ce = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(yb, logits))
                p = tf.nn.softmax(logits)
                entropy = -tf.reduce_mean(tf.reduce_sum(p * tf.nn.log_softmax(logits), -1))
                loss = ce - 0.1 * entropy
            grads = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables, strict=True))
            self.loss_tracker.update_state(loss)
            self.acc.update_state(yb, logits)
            return {"loss": self.loss_tracker.result(), "accuracy": self.acc.result()}

        @property
        def metrics(self) -> list[Any]:
            return [self.loss_tracker, self.acc]

    inputs = keras.Input((16, 16, 3), dtype="uint8")
    h = layers.Lambda(lambda t: keras.ops.cast(t, "float32"))(inputs)
    if bug != "inputs_x255":  # bug: the Rescaling layer dropped; the bytes reach the convolutions
        h = layers.Rescaling(1.0 / 255)(h)
    h = layers.Conv2D(32, 3, padding="same", activation="relu")(h)
    h = layers.MaxPooling2D()(h)
    h = layers.Conv2D(64, 3, padding="same", activation="relu")(h)
    h = layers.GlobalAveragePooling2D()(h)
    outputs = layers.Dense(10)(h)
    model = ConfidencePenaltyModel(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    history = _keras_losses()
    model.fit(
        images[:2048],
        labels[:2048],
        batch_size=64,
        epochs=8,
        verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )
    logits = model.predict(images[2048:], verbose=0)
    print("test acc", float((logits.argmax(-1) == labels[2048:]).mean()))
    return history.losses


def keras_listing_two_outputs_loss_weights(path: str, seed: int = 0) -> list[float]:
    """A Keras 3 functional model with two named outputs, as in the "multi-input and
    multi-output models" section of the functional API guide: marketplace listings (a bag of
    title words as a multi-hot vector, numeric seller features) to the category
    (`SparseCategoricalCrossentropy(from_logits=True)`) and the log price (`Huber`), compiled
    with `loss_weights={"category": 1.0, "log_price": 0.5}`, Adam on
    `ExponentialDecay(1e-3, 200, 0.8)`, dropout 0.3, batch 64, 12 epochs, `validation_split=0.1`."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 13)
    n, vocab, cats = 4096, 300, 6
    cat = rng.integers(0, cats, n)
    cat_words = rng.integers(0, vocab, (cats, 12))
    title = np.zeros((n, vocab), "float32")
    for i in range(n):
        title[i, rng.choice(cat_words[cat[i]], 3)] = 1
        title[i, rng.integers(0, vocab, 4)] = 1
    seller = rng.normal(size=(n, 4)).astype("float32")
    base = np.array([2.0, 3.5, 1.2, 4.0, 2.8, 3.0])
    log_price = (base[cat] + 0.3 * seller[:, 0] + 0.2 * rng.normal(size=n)).astype("float32")
    title_in = keras.Input((vocab,), name="title")
    seller_in = keras.Input((4,), name="seller")
    h = layers.concatenate(
        [layers.Dense(64, activation="relu")(title_in), layers.Dense(16, activation="relu")(seller_in)]
    )
    h = layers.Dropout(0.3)(h)
    h = layers.Dense(64, activation="relu")(h)
    category = layers.Dense(cats, name="category")(h)
    price = layers.Dense(1, name="log_price")(h)
    model = keras.Model(inputs=[title_in, seller_in], outputs=[category, price])
    schedule = keras.optimizers.schedules.ExponentialDecay(1e-3, decay_steps=200, decay_rate=0.8)
    model.compile(
        optimizer=keras.optimizers.Adam(schedule),
        loss={
            "category": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "log_price": keras.losses.Huber(),
        },
        loss_weights={"category": 1.0, "log_price": 0.5},
    )
    history = _keras_losses()
    fit = model.fit(
        {"title": title, "seller": seller}, {"category": cat, "log_price": log_price}, batch_size=64, epochs=12,
        validation_split=0.1, verbose=0, callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    print({k: round(float(v[-1]), 4) for k, v in fit.history.items()})
    return history.losses


# ============================================================================= JAX


def nnx_focal_fraud_chain_adamw(path: str, steps: int = 400, seed: int = 0) -> list[float]:
    """Flax NNX fraud detection on imbalanced transactions (about 4 % positive): an `nnx.Module`
    MLP (Linear, LayerNorm, GELU, Dropout) to one logit, `optax.sigmoid_focal_loss(alpha=0.25,
    gamma=2)`, `nnx.Optimizer` on `optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(
    warmup_cosine_decay_schedule(0, 3e-3, 40, steps), weight_decay=1e-4))`, `nnx.jit` train
    step with `nnx.value_and_grad`, batch 256, a recall at 5 % false positives every 100 steps;
    `hook.record` outside the jitted step."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    import mldbg.jax

    _seed(seed)
    rng = np.random.default_rng(seed + 17)
    n, d = 12000, 12
    x = rng.normal(size=(n, d)).astype("float32")
    amount = rng.lognormal(3, 1, n)
    logit = -4.2 + 1.3 * x[:, 0] + 0.9 * x[:, 1] * (x[:, 2] > 0.5) + 0.6 * np.log(amount) - 1.8
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype("float32")
    x[:, 3] = (np.log(amount) - 3).astype("float32")
    print("positive rate", y.mean())

    class FraudMLP(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.l1 = nnx.Linear(d, 128, rngs=rngs)
            self.n1 = nnx.LayerNorm(128, rngs=rngs)
            self.l2 = nnx.Linear(128, 64, rngs=rngs)
            self.drop = nnx.Dropout(0.1, rngs=rngs)
            self.out = nnx.Linear(64, 1, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            h = nnx.gelu(self.n1(self.l1(x)))
            h = self.drop(nnx.gelu(self.l2(h)))
            return self.out(h).squeeze(-1)

    model = FraudMLP(nnx.Rngs(seed))
    schedule = optax.warmup_cosine_decay_schedule(0.0, 3e-3, 40, steps)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=1e-4))
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)

    def loss_fn(model: Any, xb: Any, yb: Any) -> Any:
        return optax.sigmoid_focal_loss(model(xb), yb, alpha=0.25, gamma=2.0).mean()

    @nnx.jit
    def train_step(model: Any, optimizer: Any, xb: Any, yb: Any) -> Any:
        loss, grads = nnx.value_and_grad(loss_fn)(model, xb, yb)
        optimizer.update(model, grads)
        return loss, grads

    @nnx.jit
    def scores(model: Any, xb: Any) -> Any:
        return jax.nn.sigmoid(model(xb))

    hook = mldbg.jax.Hook(path)
    losses: list[float] = []
    model.train()
    for step in range(steps):
        idx = rng.choice(10000, 256, replace=False)
        params = nnx.state(model, nnx.Param)
        loss, grads = train_step(model, optimizer, jnp.asarray(x[idx]), jnp.asarray(y[idx]))
        hook.record(step, params=params, grads=grads, loss=loss)
        losses.append(float(loss))
        if step % 100 == 99:
            model.eval()
            s = np.asarray(scores(model, jnp.asarray(x[10000:])))
            model.train()
            thr = np.quantile(s[y[10000:] == 0], 0.95)
            print(
                f"step {step + 1}: loss {np.mean(losses[-100:]):.5f} recall@5%FPR {(s[y[10000:] == 1] > thr).mean():.3f}"
            )
    hook.close()
    return losses


# ============================================================================= XGBoost


def xgb_rank_map_binary_relevance(path: str, seed: int = 0) -> list[float]:
    """XGBoost learning to rank with `objective="rank:map"` (LambdaMART weighted by the change in
    mean average precision) on binary relevance: search sessions as query groups passed through
    `qid` on a `DMatrix`, `eval_metric=["map@10", "ndcg@10"]`, eta 0.1, max_depth 4,
    `lambdarank_num_pair_per_sample=8` with the mean pair method, 200 rounds, early stopping on
    the validation MAP after 30 rounds; the training MAP@10 recorded by the callback."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed + 19)
    n_queries, per_query, d = 400, 20, 10
    qid = np.repeat(np.arange(n_queries), per_query)
    x = rng.normal(size=(n_queries * per_query, d)).astype("float32")
    q_intent = np.array([1.0, -0.8, 0.6]) + 0.3 * rng.normal(size=(n_queries, 3))
    score = (x[:, :3] * q_intent[qid]).sum(1) + 0.7 * x[:, 3] + 0.3 * rng.normal(size=len(qid))
    rel = np.zeros(len(qid), "float32")
    for q in range(n_queries):
        s = score[qid == q]
        rel[qid == q] = (s >= np.sort(s)[-3]).astype("float32")
    split = 320 * per_query
    dtrain = xgb.DMatrix(x[:split], label=rel[:split], qid=qid[:split])
    dvalid = xgb.DMatrix(x[split:], label=rel[split:], qid=qid[split:])
    params = {
        "objective": "rank:map", "eval_metric": ["ndcg@10", "map@10"], "eta": 0.1, "max_depth": 4,
        "lambdarank_pair_method": "mean", "lambdarank_num_pair_per_sample": 8, "tree_method": "hist",
        "nthread": 1, "seed": seed,
    }  # fmt: skip
    result: dict[str, Any] = {}
    xgb.train(
        params, dtrain, num_boost_round=200, evals=[(dtrain, "train"), (dvalid, "valid")], evals_result=result,
        early_stopping_rounds=30, verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    print(f"valid map@10 {result['valid']['map@10'][0]:.4f} -> {result['valid']['map@10'][-1]:.4f}")
    return [1.0 - float(v) for v in result["train"]["map@10"]]


# ============================================================================= the pipelines

_cvae = healthy("cvae_onehot_condition_binarized_glyphs", "conditional VAE", cvae_binarized_glyphs)
_corn = healthy("corn_conditional_ordinal_mlp", "CORN ordinal regression", corn_ordinal_regression)
_clap = healthy(
    "clap_audio_text_contrastive_logit_scale",
    "CLAP-style audio-text contrastive",
    clap_audio_text_contrastive,
)
_conformer = healthy(
    "conformer_specaugment_noam_frame_ce", "Conformer frame classifier", conformer_frame_classifier
)
_hurdle = healthy("hurdle_lognormal_rainfall_two_heads", "hurdle log-normal model", hurdle_lognormal_rainfall)
_tabt = healthy("tab_transformer_column_embeddings_adamw", "TabTransformer", tab_transformer)
_rnnt = healthy("rnn_transducer_logspace_forward_dp", "RNN-transducer", rnn_transducer_phones)
_convmixer = healthy("convmixer_piecewise_onecycle_adamw", "ConvMixer", convmixer_onecycle)

PIPELINES: list[Any] = [
    _cvae,
    _corn,
    _clap,
    _conformer,
    _hurdle,
    _tabt,
    _rnnt,
    _convmixer,
    buggy(_convmixer, "lr_x100"),
    buggy(_rnnt, "no_zero_grad"),
    buggy(_corn, "shuffled_labels"),
    buggy(_tabt, "dead_relu_init"),
    buggy(_cvae, "deep_sigmoid"),
    buggy(_clap, "frozen_by_mistake"),
    buggy(_hurdle, "log_zero_nan"),
    buggy(_conformer, "train_in_eval_mode"),
]

if installed("transformers", "accelerate"):
    _hf_weighted = healthy(
        "hf_trainer_subclass_class_weighted_compute_loss",
        "HF Trainer with a custom compute_loss",
        hf_weighted_loss_trainer,
    )
    PIPELINES += [
        _hf_weighted,
        buggy(_hf_weighted, "softmax_before_ce"),
        healthy(
            "hf_mistral_sft_prompt_masking_collator",
            "HF Trainer instruction tuning with a custom collator",
            hf_mistral_instruction_collator,
        ),
    ]

if installed("lightning"):
    PIPELINES += [
        healthy(
            "lightning_sound_tagging_bf16_accum_lr_monitor",
            "Lightning multi-label audio tagging (bf16-mixed)",
            lit_sound_event_tagging_bf16,
        ),
        healthy(
            "lightning_nhits_swa_grad_clip", "Lightning N-HiTS forecaster with SWA", lit_nhits_swa_forecaster
        ),
    ]

if installed("keras", "tensorflow"):
    _keras_step = healthy(
        "keras_custom_train_step_confidence_penalty_cnn",
        "Keras custom train_step CNN",
        keras_custom_train_step_confidence_penalty,
    )
    _keras_listing = healthy(
        "keras_two_output_listing_loss_weights",
        "Keras multi-output model with loss weights",
        keras_listing_two_outputs_loss_weights,
    )
    PIPELINES += [
        _keras_step,
        _keras_listing,
        buggy(_keras_step, "inputs_x255"),
    ]

if installed("jax", "optax", "flax"):
    PIPELINES += [
        healthy(
            "flax_nnx_focal_fraud_chain_clip_adamw",
            "Flax NNX focal-loss fraud detector",
            nnx_focal_fraud_chain_adamw,
        )
    ]

if installed("xgboost"):
    PIPELINES += [
        healthy("xgboost_rank_map_binary_relevance_qid", "XGBoost rank:map", xgb_rank_map_binary_relevance)
    ]
