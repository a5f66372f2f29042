"""The eleventh blind held-out set (issue 26), part R: small trainings of kinds the corpus did
not have yet, plain PyTorch loops with the README's two lines (`register_loss` where the script
has a loss module) and trainings through tools with their one callback or hook. Data generated
in-process, fixed seeds, one CPU thread. Chosen to try a debugger's false-alarm rate in
different ways: unusual but correct initializations, losses below zero or stuck high by
design, long noisy plateaus, learned loss weights, small batches, heavy regularization.

Plain PyTorch: a Fixup-initialized residual CNN with no normalization (zero-initialised last
convolution of each branch and classifier, scalar biases and multipliers) trained with mixup on
SGD, an IRNN (ReLU RNN with an identity recurrent matrix) on the adding problem with its long
plateau at the baseline, quantization-aware fine-tuning with learned step size quantization
(LSQ: 4-bit weights and activations, straight-through rounding, scaled step-size gradients),
movement pruning of a bag-of-words MLP (learned importance scores, straight-through top-k, a
cubic sparsity schedule to 10 %), GradNorm balancing three task losses (regression,
classification, detection) with learned task weights on a second optimizer, temporal
ensembling for semi-supervised classification (per-example EMA of predictions as the target of
a ramped consistency term), MINE estimating mutual information (Donsker-Varadhan bound, a
moving-average gradient correction, a negative loss), a forecaster trained on the soft-DTW
loss (a dynamic program of soft minima, negative values), RotatE knowledge-graph embedding with
self-adversarial negative sampling, and Group DRO on a spurious feature (exponentiated-gradient
group weights, weight decay 0.1).

Through tools: Keras 3 (`mldbg.keras.Hook`): a small skip-connected encoder-decoder segmenting
blobs on `keras.losses.Dice()` with batches of 8. Lightning (`mldbg.lightning.
DebuggerCallback`): symmetric cross-entropy (CE plus reverse CE) against 40 % label noise, whose
training loss stays high; Noise2Noise denoising (noisy targets, a loss floored at the noise
variance, batches of 8, a per-step cosine ramp-down). Hugging Face `Trainer`
(`mldbg.transformers.DebuggerCallback`, a tiny random config):
`TimeSeriesTransformerForPrediction`, a Student-t likelihood on lagged demand series. JAX (`mldbg.jax.Hook`): sliced
score matching in Flax NNX (`jax.jvp` projections, a loss falling far below zero). XGBoost
(`mldbg.xgboost.Hook`): `reg:absoluteerror` median regression on heavy-tailed noise with
strong `lambda`/`alpha` regularization.

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the soft-DTW forecaster on Adam 1e-1 typed for 1e-3 (lr_x100), the IRNN without
`optimizer.zero_grad()` (no_zero_grad), the LSQ network's labels read from a shuffled copy of
the table (shuffled_labels), the Keras segmenter without its `Rescaling(1/255)` layer
(inputs_x255), the Lightning SCE classifier ending in `nn.Softmax` "since the reverse CE needs
probabilities" while `F.cross_entropy` still expects logits (softmax_before_ce), the Fixup
network's biases filled with -2 at init (dead_relu_init), MINE's statistics network as eight
sigmoid layers (deep_sigmoid), movement pruning's weights frozen by a line left from the
scores-only (supermask) variant after the optimizer was built (frozen_by_mistake), GradNorm's
binary cross-entropy written out as `-(t log p + (1 - t) log(1 - p))` on sigmoid probabilities
of a separable task that saturate (log_zero_nan), temporal ensembling's network never put back
in training mode after its first test pass (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND10`.
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

from . import BLIND10, buggy, healthy, installed

SPLIT = BLIND10

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 31)


def _shape_images(
    g: torch.Generator, n: int, size: int = 16, classes: int = 5, proto_seed: int = 501
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 3, size, size) uint8 images: each class a smooth random silhouette of its own colour,
    shifted a few pixels, on a noisy background of random grey; and the labels."""
    pg = torch.Generator().manual_seed(proto_seed)
    shapes = F.avg_pool2d(torch.rand(classes, 1, size, size, generator=pg), 5, 1, 2)
    cut = shapes.flatten(1).quantile(0.6, dim=1).view(classes, 1, 1, 1)
    shapes = ((shapes - cut) * 30).sigmoid()
    colour = 0.25 + 0.75 * torch.rand(classes, 3, 1, 1, generator=pg)
    y = torch.randint(0, classes, (n,), generator=g)
    shift = torch.randint(-2, 3, (n, 2), generator=g)
    obj = torch.stack(
        [torch.roll(shapes[c], (int(a), int(b)), (1, 2)) for c, (a, b) in zip(y, shift, strict=True)]
    )
    grey = 0.5 * torch.rand(n, 1, 1, 1, generator=g)
    x = grey * (1 - obj) + obj * colour[y] + 0.3 * torch.randn(n, 3, size, size, generator=g)
    return (x.clamp(0, 1) * 255).round().to(torch.uint8), y


def _clusters(
    g: torch.Generator, n: int, d: int, k: int, proto_seed: int = 61, spread: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian clusters with a mild nonlinear warp; (x, labels)."""
    pg = torch.Generator().manual_seed(proto_seed)
    centres = 1.5 * torch.randn(k, d, generator=pg)
    y = torch.randint(0, k, (n,), generator=g)
    x = centres[y] + spread * torch.randn(n, d, generator=g)
    return x + 0.3 * torch.sin(x.roll(1, 1) * x.roll(3, 1)), y


# ============================================================================= plain PyTorch


class _FixupBlock(nn.Module):
    """Zhang et al. 2019: a residual block with no normalization; scalar biases before each
    convolution and activation, a scalar multiplier, the second convolution initialised to zero."""

    def __init__(self, channels: int, num_blocks: int) -> None:
        super().__init__()
        self.bias1a, self.bias1b = nn.Parameter(torch.zeros(1)), nn.Parameter(torch.zeros(1))
        self.bias2a, self.bias2b = nn.Parameter(torch.zeros(1)), nn.Parameter(torch.zeros(1))
        self.scale = nn.Parameter(torch.ones(1))
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        fan_in = self.conv1.weight[0].numel()
        nn.init.normal_(self.conv1.weight, 0, math.sqrt(2 / fan_in) * num_blocks ** (-0.5))
        nn.init.zeros_(self.conv2.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.conv1(x + self.bias1a) + self.bias1b)
        out = self.conv2(out + self.bias2a) * self.scale + self.bias2b
        return F.relu(out + x)


def fixup_resnet_mixup(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """Fixup initialization (Zhang, Dauphin & Ma 2019): a residual CNN with no BatchNorm, each
    block's branch rescaled at init by L^(-1/2) and ending in a zero-initialised convolution,
    scalar biases and multipliers, the classifier initialised to zero; trained as the paper does
    with mixup (alpha 1.0), SGD momentum 0.9 at 0.1 (the scalar biases and multipliers at 0.01)
    with cosine decay, weight decay 5e-4, batch 64."""
    g = _seed(seed)
    images, labels = _shape_images(g, 3000)
    x = (images.float() / 255 - 0.5) / 0.25

    class FixupNet(nn.Module):
        def __init__(self, blocks: int = 3, width: int = 16) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, width, 3, padding=1)
            self.blocks = nn.Sequential(*[_FixupBlock(width, blocks) for _ in range(blocks)])
            self.bias_out = nn.Parameter(torch.zeros(1))
            self.fc = nn.Linear(width, 5)
            nn.init.zeros_(self.fc.weight)
            nn.init.zeros_(self.fc.bias)

        def forward(self, xb: torch.Tensor) -> torch.Tensor:
            h = self.blocks(F.relu(self.stem(xb)))
            return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1) + self.bias_out)

    model = FixupNet()
    if bug == "dead_relu_init":  # "start the ReLUs sparse": every bias filled with -2 at init
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "bias" in name:
                    p.fill_(-2.0)
    params_bias = [p for n, p in model.named_parameters() if "bias" in n or "scale" in n]
    params_other = [p for n, p in model.named_parameters() if not ("bias" in n or "scale" in n)]
    opt = torch.optim.SGD(
        [{"params": params_bias, "lr": 0.01}, {"params": params_other}],
        lr=0.1,
        momentum=0.9,
        weight_decay=5e-4,
    )
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    criterion = nn.CrossEntropyLoss()
    beta = torch.distributions.Beta(1.0, 1.0)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, 2500, (64,), generator=g)
        xb, yb = x[idx], labels[idx]
        lam = float(beta.sample())
        perm = torch.randperm(64, generator=g)
        out = model(lam * xb + (1 - lam) * xb[perm])
        loss = lam * criterion(out, yb) + (1 - lam) * criterion(out, yb[perm])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                acc = (model(x[2500:]).argmax(1) == labels[2500:]).float().mean().item()
            model.train()
            print(f"step {step + 1}: loss {loss.item():.4f} val acc {acc:.3f}")
    hook.close()
    return losses


def irnn_adding_problem(path: str, steps: int = 1200, seed: int = 0, bug: str | None = None) -> list[float]:
    """Le, Jaitly & Hinton 2015 (IRNN): a ReLU RNN whose recurrent matrix is initialised to the
    identity and biases to zero (input weights N(0, 0.1)), on the adding problem (a sequence of
    30 (value, marker) pairs; the target is the sum of the two marked values; MSE, whose
    constant-prediction baseline is about 0.167, a long plateau there first); RMSprop 1e-3,
    gradient norm clipped at 1, batch 32."""
    g = _seed(seed)
    length = 30

    def batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        values = torch.rand(n, length, generator=g)
        marks = torch.zeros(n, length)
        first = torch.randint(0, length // 2, (n,), generator=g)
        second = torch.randint(length // 2, length, (n,), generator=g)
        marks[torch.arange(n), first] = 1.0
        marks[torch.arange(n), second] = 1.0
        return torch.stack([values, marks], 2), (values * marks).sum(1, keepdim=True)

    class IRNN(nn.Module):
        def __init__(self, hidden: int = 64) -> None:
            super().__init__()
            self.rnn = nn.RNN(2, hidden, nonlinearity="relu", batch_first=True)
            nn.init.eye_(self.rnn.weight_hh_l0)
            nn.init.normal_(self.rnn.weight_ih_l0, 0.0, 0.1)
            nn.init.zeros_(self.rnn.bias_hh_l0)
            nn.init.zeros_(self.rnn.bias_ih_l0)
            self.out = nn.Linear(hidden, 1)

        def forward(self, xb: torch.Tensor) -> torch.Tensor:
            h, _ = self.rnn(xb)
            return self.out(h[:, -1])

    model = IRNN()
    criterion = nn.MSELoss()
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    x_val, y_val = batch(1000)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        xb, yb = batch(32)
        loss = criterion(model(xb), yb)
        if bug != "no_zero_grad":
            opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 300 == 299:
            with torch.no_grad():
                val = criterion(model(x_val), y_val).item()
            print(f"step {step + 1}: loss {loss.item():.4f} val mse {val:.4f}")
    hook.close()
    return losses


class _LsqQuantizer(nn.Module):
    """Esser et al. 2020 (LSQ): v_q = round(clamp(v / s, -Qn, Qp)) * s with a learned step size s,
    rounded through a straight-through estimator and its gradient scaled by 1 / sqrt(N Qp)."""

    def __init__(self, bits: int, signed: bool) -> None:
        super().__init__()
        self.qn = 2 ** (bits - 1) if signed else 0
        self.qp = 2 ** (bits - 1) - 1 if signed else 2**bits - 1
        self.step = nn.Parameter(torch.tensor(1.0))
        self.initialized = False

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        if not self.initialized:  # s = 2 <|v|> / sqrt(Qp) on the first batch
            with torch.no_grad():
                self.step.fill_(2 * v.abs().mean().item() / math.sqrt(self.qp))
            self.initialized = True
        g = 1.0 / math.sqrt(v.numel() * self.qp)
        s = self.step * g + (self.step - self.step * g).detach()  # gradient scale
        q = torch.clamp(v / s, -self.qn, self.qp)
        q = q + (q.round() - q).detach()  # round_pass
        return q * s


class _QuantConv(nn.Conv2d):
    def __init__(self, cin: int, cout: int, bits: int = 4) -> None:
        super().__init__(cin, cout, 3, padding=1, bias=False)
        self.wq, self.aq = _LsqQuantizer(bits, True), _LsqQuantizer(bits, False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(self.aq(x), self.wq(self.weight), None, 1, 1)


def lsq_4bit_qat_cnn(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """Quantization-aware fine-tuning with learned step size quantization (LSQ, Esser et al.
    2020): a full-precision CNN trained first (not recorded), then its inner convolutions
    replaced by 4-bit LSQ convolutions (weights signed, post-ReLU activations unsigned, step
    sizes initialised from the first batch) keeping the first and last layers in full precision,
    fine-tuned with SGD momentum 0.9 at 0.01 on cosine, weight decay 5e-5 (lowered for low
    precision as the paper does), batch 64."""
    g = _seed(seed)
    images, labels = _shape_images(g, 3000, proto_seed=502)
    x = (images.float() / 255 - 0.5) / 0.25
    y_tr = labels[:2500]
    if bug == "shuffled_labels":  # the label column taken from a shuffled copy of the table
        y_tr = y_tr[torch.randperm(2500, generator=g)]

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(16)
            self.conv2: nn.Conv2d = nn.Conv2d(16, 32, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(32)
            self.conv3: nn.Conv2d = nn.Conv2d(32, 32, 3, padding=1, bias=False)
            self.bn3 = nn.BatchNorm2d(32)
            self.fc = nn.Linear(32, 5)

        def forward(self, xb: torch.Tensor) -> torch.Tensor:
            h = F.max_pool2d(F.relu(self.bn1(self.conv1(xb))), 2)
            h = F.max_pool2d(F.relu(self.bn2(self.conv2(h))), 2)
            h = F.relu(self.bn3(self.conv3(h)))
            return self.fc(h.mean((2, 3)))

    model = Net()
    criterion = nn.CrossEntropyLoss()
    pre = torch.optim.Adam(model.parameters(), lr=2e-3)
    model.train()
    for _ in range(150):  # the full-precision model
        idx = torch.randint(0, 2500, (64,), generator=g)
        loss = criterion(model(x[idx]), y_tr[idx])
        pre.zero_grad()
        loss.backward()
        pre.step()
    for name in ("conv2", "conv3"):
        old = getattr(model, name)
        new = _QuantConv(old.in_channels, old.out_channels)
        new.weight.data.copy_(old.weight.data)
        setattr(model, name, new)
    with torch.no_grad():
        model(x[:64])  # initialise the step sizes
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-5)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        model.train()
        idx = torch.randint(0, 2500, (64,), generator=g)
        loss = criterion(model(x[idx]), y_tr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                acc = (model(x[2500:]).argmax(1) == labels[2500:]).float().mean().item()
            print(f"step {step + 1}: loss {loss.item():.4f} 4-bit val acc {acc:.3f}")
    hook.close()
    return losses


class _MaskedLinear(nn.Linear):
    """Sanh et al. 2020 (movement pruning): importance scores S next to the weights, the mask
    the top `keep` fraction of S, straight-through: S receives dL/dW' * W."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__(n_in, n_out)
        self.scores = nn.Parameter(torch.zeros(n_out, n_in))
        self.keep = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = max(1, int(self.keep * self.scores.numel()))
        threshold = self.scores.flatten().kthvalue(self.scores.numel() - k + 1).values
        hard = (self.scores >= threshold).float()
        mask = hard + self.scores - self.scores.detach()  # straight-through
        return F.linear(x, self.weight * mask, self.bias)


def movement_pruning_bow(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """Movement pruning (Sanh, Wolf & Rush 2020) while fine-tuning: a bag-of-words MLP trained
    first (not recorded), then fine-tuned with learned importance scores whose top-k keeps the
    weights, the remaining fraction following the cubic schedule from 100 % to 10 % between a
    warm-up of 40 steps and a cool-down of the last 80; AdamW 1e-3 on weights, 1e-2 on scores,
    batch 32."""
    g = _seed(seed)
    n, vocab, topics = 4000, 300, 6
    pg = torch.Generator().manual_seed(73)
    topic_words = torch.softmax(2.5 * torch.randn(topics, vocab, generator=pg), 1)
    background = torch.softmax(torch.randn(vocab, generator=pg), 0)
    y = torch.randint(0, topics, (n,), generator=g)
    words = torch.multinomial(0.15 * topic_words[y] + 0.85 * background, 50, replacement=True, generator=g)
    x = torch.log1p(torch.zeros(n, vocab).scatter_add_(1, words, torch.ones(n, 50)))

    model = nn.Sequential(
        _MaskedLinear(vocab, 256), nn.ReLU(), _MaskedLinear(256, 128), nn.ReLU(), nn.Linear(128, 6)
    )
    criterion = nn.CrossEntropyLoss()
    weights = [p for name, p in model.named_parameters() if "scores" not in name]
    pre = torch.optim.AdamW(weights, lr=1e-3)
    for _ in range(200):  # the dense model the pruning starts from
        idx = torch.randint(0, 3200, (32,), generator=g)
        loss = criterion(model(x[idx]), y[idx])
        pre.zero_grad()
        loss.backward()
        pre.step()
    masked = [m for m in model if isinstance(m, _MaskedLinear)]
    scores = [m.scores for m in masked]
    opt = torch.optim.AdamW(
        [{"params": weights, "lr": 1e-3}, {"params": scores, "lr": 1e-2, "weight_decay": 0.0}]
    )
    if bug == "frozen_by_mistake":  # left from the scores-only ("supermask") variant
        for m in masked:
            m.weight.requires_grad_(False)
    warmup, cooldown, final = 40, 80, 0.10
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        t = min(max((step - warmup) / (steps - warmup - cooldown), 0.0), 1.0)
        keep = final + (1 - final) * (1 - t) ** 3
        for m in masked:
            m.keep = keep
        idx = torch.randint(0, 3200, (32,), generator=g)
        loss = criterion(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                acc = (model(x[3200:]).argmax(1) == y[3200:]).float().mean().item()
            print(f"step {step + 1}: loss {loss.item():.4f} kept {keep:.2f} val acc {acc:.3f}")
    hook.close()
    return losses


def gradnorm_multitask(path: str, steps: int = 600, seed: int = 0, bug: str | None = None) -> list[float]:
    """GradNorm (Chen et al. 2018): a shared trunk with three heads (a regression on MSE, a 5-way
    classification, a binary detection task on binary cross-entropy), the total loss
    sum_i w_i L_i with learned task weights; each step the weights' own loss
    sum_i |G_i - mean(G) r_i^alpha| (G_i the norm of the gradient of w_i L_i with respect to the
    last shared layer, r_i the task's relative inverse training rate, alpha 1.5) updates only
    the weights, which are then renormalized to sum to 3; Adam 1e-3 on the network, 2.5e-2 on
    the weights, batch 64."""
    g = _seed(seed)
    n, d = 6000, 16
    x = torch.randn(n, d, generator=g)
    w_true = torch.randn(d, generator=torch.Generator().manual_seed(81))
    y_reg = (torch.sin(x[:, 0] * 1.5) + x[:, 1] * x[:, 2] + 0.3 * torch.randn(n, generator=g)).unsqueeze(1)
    y_cls = torch.bucketize(x[:, 3] + 0.5 * x[:, 4] ** 2, torch.tensor([-0.5, 0.3, 1.0, 2.0]))
    y_bin = (x @ w_true > 0).float().unsqueeze(1)  # a linearly separable detection task

    class MultiTask(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(d, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
            self.reg, self.cls, self.det = nn.Linear(128, 1), nn.Linear(128, 5), nn.Linear(128, 1)

        def forward(self, xb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            h = self.trunk(xb)
            return self.reg(h), self.cls(h), self.det(h)

    model = MultiTask()
    task_w = nn.Parameter(torch.ones(3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    opt_w = torch.optim.Adam([task_w], lr=2.5e-2)
    shared = model.trunk[2].weight
    alpha = 1.5
    initial: torch.Tensor | None = None
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, 5000, (64,), generator=g)
        out_reg, out_cls, out_det = model(x[idx])
        l_reg = F.mse_loss(out_reg, y_reg[idx])
        l_cls = F.cross_entropy(out_cls, y_cls[idx])
        if bug == "log_zero_nan":  # the binary cross-entropy written out on sigmoid probabilities
            p = torch.sigmoid(out_det)
            t = y_bin[idx]
            l_det = -(t * torch.log(p) + (1 - t) * torch.log(1 - p)).mean()
        else:
            l_det = F.binary_cross_entropy_with_logits(out_det, y_bin[idx])
        task_losses = torch.stack([l_reg, l_cls, l_det])
        if initial is None:
            initial = task_losses.detach()
        weighted = task_w * task_losses
        loss = weighted.sum()
        opt.zero_grad()
        opt_w.zero_grad()
        loss.backward(retain_graph=True)
        norms = torch.stack(
            [
                torch.autograd.grad(weighted[i], shared, retain_graph=True, create_graph=True)[0].norm()
                for i in range(3)
            ]
        )
        with torch.no_grad():
            ratio = task_losses.detach() / initial
            target = norms.mean() * (ratio / ratio.mean()) ** alpha
        grad_norm_loss = (norms - target).abs().sum()
        task_w.grad = torch.autograd.grad(grad_norm_loss, task_w)[0]
        opt.step()
        opt_w.step()
        with torch.no_grad():
            task_w.clamp_(min=1e-3)
            task_w.mul_(3 / task_w.sum())
        losses.append(loss.item())
        if step % 150 == 149:
            with torch.no_grad():
                r, c, b = model(x[5000:])
                acc = (c.argmax(1) == y_cls[5000:]).float().mean().item()
                det = ((b > 0).float() == y_bin[5000:]).float().mean().item()
                mse = F.mse_loss(r, y_reg[5000:]).item()
            print(
                f"step {step + 1}: loss {loss.item():.4f} weights {[round(v, 2) for v in task_w.tolist()]} "
                f"mse {mse:.3f} acc {acc:.3f} det {det:.3f}"
            )
    hook.close()
    return losses


def temporal_ensembling_ssl(
    path: str, epochs: int = 15, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Temporal ensembling (Laine & Aila 2017): 200 of 4000 training points labeled; each
    point's softmax prediction is accumulated across epochs, Z <- alpha Z + (1 - alpha) z
    (alpha 0.6), and the bias-corrected ensemble Z / (1 - alpha^t) is the target of an MSE
    consistency term for every point, weighted by w(t) = w_max exp(-5 (1 - t)^2) over a 6-epoch
    ramp-up (w_max 30 * 200 / 4000); Gaussian input noise and dropout 0.5 as the stochastic
    augmentation, Adam 3e-3, batch 100, a test pass after each epoch."""
    g = _seed(seed)
    x, y = _clusters(g, 5000, 12, 6, proto_seed=67, spread=2.2)
    n_tr, n_lab = 4000, 200
    labeled = torch.zeros(n_tr, dtype=torch.bool)
    labeled[:n_lab] = True
    model = nn.Sequential(
        nn.Linear(12, 256), nn.LeakyReLU(0.1), nn.Dropout(0.5),
        nn.Linear(256, 256), nn.LeakyReLU(0.1), nn.Dropout(0.5),
        nn.Linear(256, 6),
    )  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.999))
    alpha, ramp, w_max = 0.6, 6, 30.0 * n_lab / n_tr
    ensemble = torch.zeros(n_tr, 6)
    targets = torch.zeros(n_tr, 6)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    model.train()
    for epoch in range(epochs):
        if bug != "train_in_eval_mode":  # bug: `model.train()` only once, before the loop
            model.train()
        w = w_max * math.exp(-5 * (1 - min(epoch / ramp, 1.0)) ** 2) if epoch > 0 else 0.0
        outputs = torch.zeros(n_tr, 6)
        for b in torch.randperm(n_tr, generator=g).split(100):
            xb = x[b] + 0.15 * torch.randn(len(b), 12, generator=g)
            logits = model(xb)
            probs = F.softmax(logits, 1)
            lab = labeled[b]
            sup = (
                F.cross_entropy(logits[lab], y[b][lab], reduction="sum") / len(b)
                if lab.any()
                else logits.sum() * 0
            )
            unsup = F.mse_loss(probs, targets[b])
            loss = sup + w * unsup
            opt.zero_grad()
            loss.backward()
            opt.step()
            outputs[b] = probs.detach()
            losses.append(loss.item())
        ensemble = alpha * ensemble + (1 - alpha) * outputs
        targets = ensemble / (1 - alpha ** (epoch + 1))
        model.eval()
        with torch.no_grad():
            acc = (model(x[n_tr:]).argmax(1) == y[n_tr:]).float().mean().item()
        print(f"epoch {epoch}: loss {losses[-1]:.4f} w {w:.3f} test acc {acc:.3f}")
    hook.close()
    return losses


def mine_mutual_information(
    path: str, steps: int = 800, seed: int = 0, bug: str | None = None
) -> list[float]:
    """MINE (Belghazi et al. 2018): a statistics network T(x, z) trained to maximise the
    Donsker-Varadhan bound E_joint[T] - log E_marginal[e^T] on correlated Gaussians
    (5 coordinates with correlation 0.8, true MI 2.55 nats), the marginal by shuffling z within
    the batch, the biased gradient corrected by a moving average of E[e^T] (rate 0.01); the loss
    is negative and noisy; Adam 1e-4, batch 256."""
    g = _seed(seed)
    d, rho = 5, 0.8
    true_mi = -d / 2 * math.log(1 - rho**2)

    def sample(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        xs = torch.randn(n, d, generator=g)
        return xs, rho * xs + math.sqrt(1 - rho**2) * torch.randn(n, d, generator=g)

    if bug == "deep_sigmoid":  # the statistics network written as eight sigmoid layers
        layers: list[nn.Module] = [nn.Linear(2 * d, 128), nn.Sigmoid()]
        for _ in range(7):
            layers += [nn.Linear(128, 128), nn.Sigmoid()]
        body = nn.Sequential(*layers, nn.Linear(128, 1))
    else:
        body = nn.Sequential(
            nn.Linear(2 * d, 128), nn.ELU(), nn.Linear(128, 128), nn.ELU(), nn.Linear(128, 1)
        )

    class Statistics(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = body

        def forward(self, xs: torch.Tensor, zs: torch.Tensor) -> torch.Tensor:
            return self.net(torch.cat([xs, zs], 1)).squeeze(1)

    model = Statistics()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    ma_et = 1.0
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        xs, zs = sample(256)
        t_joint = model(xs, zs)
        t_marg = model(xs, zs[torch.randperm(256, generator=g)])
        et = torch.exp(t_marg).mean()
        ma_et = 0.99 * ma_et + 0.01 * et.item()
        mi_lb = t_joint.mean() - torch.log(et)
        loss = -(t_joint.mean() - et / ma_et)  # the bias-corrected gradient of -mi_lb
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 200 == 199:
            with torch.no_grad():
                xs, zs = sample(5000)
                est = (
                    model(xs, zs).mean() - torch.logsumexp(model(xs, zs.roll(1, 0)), 0) + math.log(5000)
                ).item()
            print(
                f"step {step + 1}: loss {loss.item():.4f} batch bound {mi_lb.item():.3f} MI est {est:.3f} / {true_mi:.3f}"
            )
    hook.close()
    return losses


def rotate_self_adversarial_kg(path: str, steps: int = 500, seed: int = 0) -> list[float]:
    """RotatE (Sun et al. 2019) knowledge-graph embedding: each relation a rotation in the
    complex plane (phases), the score gamma - ||h o r - t||_1 over complex dimensions, the loss
    -log sigma(gamma - d(h, r, t)) - sum_i p_i log sigma(d(h, r, t'_i) - gamma) over 32 corrupted
    tails weighted by the self-adversarial softmax of their scores (temperature 1, no gradient
    through the weights); gamma 6, Adam 2e-3, batch 128, a raw MRR pass every 100 steps."""
    g = _seed(seed)
    n_ent, n_rel, dim, gamma = 400, 8, 32, 6.0
    pg = torch.Generator().manual_seed(91)
    true_ent = torch.polar(torch.ones(n_ent, dim), 2 * math.pi * torch.rand(n_ent, dim, generator=pg))
    true_rel = torch.polar(torch.ones(n_rel, dim), 2 * math.pi * torch.rand(n_rel, dim, generator=pg))
    heads = torch.randint(0, n_ent, (6000,), generator=pg)
    rels = torch.randint(0, n_rel, (6000,), generator=pg)
    dist = (true_ent[heads, None] * true_rel[rels, None] - true_ent[None]).abs().sum(-1)
    tails = (-dist / 2 + 0.5 * torch.randn(dist.shape, generator=pg)).argmax(1)  # a noisy nearest tail
    triples = torch.stack([heads, rels, tails], 1)
    train, test = triples[:5400], triples[5400:]

    class RotatE(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            bound = (gamma + 2.0) / dim
            self.entity = nn.Embedding(n_ent, 2 * dim)
            self.relation = nn.Embedding(n_rel, dim)
            nn.init.uniform_(self.entity.weight, -bound, bound)
            nn.init.uniform_(self.relation.weight, -bound, bound)
            self.phase_scale = math.pi / bound

        def forward(self, h: torch.Tensor, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            re_h, im_h = self.entity(h).chunk(2, -1)
            re_t, im_t = self.entity(t).chunk(2, -1)
            phase = self.relation(r) * self.phase_scale
            re_r, im_r = torch.cos(phase), torch.sin(phase)
            re_s = re_h * re_r - im_h * im_r - re_t
            im_s = re_h * im_r + im_h * re_r - im_t
            return gamma - torch.stack([re_s, im_s]).norm(dim=0).sum(-1)

    model = RotatE()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        b = train[torch.randint(0, len(train), (128,), generator=g)]
        h, r, t = b[:, 0], b[:, 1], b[:, 2]
        negatives = torch.randint(0, n_ent, (128, 32), generator=g)
        pos = model(h, r, t)
        neg = model(h[:, None].expand(-1, 32), r[:, None].expand(-1, 32), negatives)
        weights = F.softmax(neg * 1.0, 1).detach()
        loss = -(F.logsigmoid(pos).mean() + (weights * F.logsigmoid(-neg)).sum(1).mean()) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                h, r, t = test[:, 0], test[:, 1], test[:, 2]
                all_scores = model(
                    h[:, None].expand(-1, n_ent),
                    r[:, None].expand(-1, n_ent),
                    torch.arange(n_ent).expand(len(test), -1),
                )
                rank = (all_scores > all_scores.gather(1, t[:, None])).sum(1) + 1
            print(f"step {step + 1}: loss {loss.item():.4f} raw MRR {(1.0 / rank.float()).mean().item():.3f}")
    hook.close()
    return losses


def _soft_dtw(pred: torch.Tensor, target: torch.Tensor, gamma: float) -> torch.Tensor:
    """Cuturi & Blondel 2017: the soft-min over all alignments of the squared distances,
    R[i, j] = D[i, j] - gamma log sum exp(-R[neighbours] / gamma), averaged over the batch."""
    d = (pred[:, :, None] - target[:, None, :]) ** 2  # (b, n, m)
    n, m = d.shape[1], d.shape[2]
    inf = torch.full_like(d[:, 0, 0], float("inf"))
    prev = [inf] * (m + 1)
    prev[0] = torch.zeros_like(inf)
    for i in range(1, n + 1):
        row = [inf]
        for j in range(1, m + 1):
            r = torch.stack([prev[j - 1], prev[j], row[j - 1]], 1)
            row.append(d[:, i - 1, j - 1] - gamma * torch.logsumexp(-r / gamma, 1))
        prev = row
    return prev[m].mean()


def soft_dtw_forecaster(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """A multi-step forecaster trained on the soft-DTW loss (Cuturi & Blondel 2017, as in
    DILATE-style shape losses) instead of the MSE: series of sharp pulses whose timing jitters,
    an MLP from 48 past values to 20 future ones, soft-DTW with gamma 0.1 (a loss that can go
    below zero), Adam 1e-3, batch 32, the MSE of a validation set printed each epoch."""
    g = _seed(seed)
    n, past, horizon = 1600, 48, 20
    t = torch.arange(past + horizon).float()
    period = torch.randint(10, 16, (n, 1), generator=g).float()
    phase = torch.rand(n, 1, generator=g) * period
    pulse = torch.exp(-((((t - phase) % period) - period / 2) ** 2) / 2.0)
    series = (0.5 + torch.rand(n, 1, generator=g)) * pulse + 0.05 * torch.randn(
        n, past + horizon, generator=g
    )
    src, tgt = series[:, :past], series[:, past:]
    train = DataLoader(TensorDataset(src[:1400], tgt[:1400]), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(
        nn.Linear(past, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, horizon)
    )
    lr = 1e-1 if bug == "lr_x100" else 1e-3  # bug: 1e-1 typed for 1e-3
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            loss = _soft_dtw(model(xb), yb, gamma=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            mse = F.mse_loss(model(src[1400:]), tgt[1400:]).item()
        print(f"epoch {epoch}: soft-dtw {losses[-1]:.4f} val mse {mse:.4f}")
    hook.close()
    return losses


def group_dro_spurious(path: str, steps: int = 600, seed: int = 0) -> list[float]:
    """Group DRO (Sagawa et al. 2020) on data with a spurious feature: four groups (label x
    attribute), the attribute agreeing with the label in 95 % of training points; the loss
    sum_g q_g L_g with the group weights updated by exponentiated gradient (step 0.01) on the
    batch's group losses, groups absent from a batch counted as zero, strong L2 (weight decay
    0.1) as the paper pairs with it; SGD momentum 0.9 at 1e-2, batch 128, worst-group accuracy on
    a balanced test set."""
    g = _seed(seed)

    def make(n: int, agree: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = torch.randint(0, 2, (n,), generator=g)
        a = torch.where(torch.rand(n, generator=g) < agree, y, 1 - y)
        core = (2 * y - 1).float()[:, None] * 0.6 + torch.randn(n, 6, generator=g)
        spurious = (2 * a - 1).float()[:, None] * 2.0 + 0.5 * torch.randn(n, 4, generator=g)
        noise = torch.randn(n, 10, generator=g)
        return torch.cat([core, spurious, noise], 1), y, 2 * y + a

    x_tr, y_tr, grp_tr = make(8000, 0.95)
    x_te, y_te, grp_te = make(4000, 0.5)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
    criterion = nn.CrossEntropyLoss(reduction="none")
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, weight_decay=0.1)
    q = torch.ones(4) / 4
    eta = 0.01
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        model.train()
        idx = torch.randint(0, 8000, (128,), generator=g)
        per_example = criterion(model(x_tr[idx]), y_tr[idx])
        one_hot = F.one_hot(grp_tr[idx], 4).float()
        count = one_hot.sum(0)
        group_loss = (one_hot.T @ per_example) / (count + (count == 0).float())
        q = q * torch.exp(eta * group_loss.detach())
        q = q / q.sum()
        loss = (q * group_loss).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 150 == 149:
            model.eval()
            with torch.no_grad():
                correct = (model(x_te).argmax(1) == y_te).float()
                accs = [correct[grp_te == k].mean().item() for k in range(4)]
            print(
                f"step {step + 1}: loss {loss.item():.4f} q {[round(v, 2) for v in q.tolist()]} worst-group {min(accs):.3f}"
            )
    hook.close()
    return losses


# ============================================================================= Keras 3


def _keras_losses(key: str = "loss") -> Any:
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
            mean = float(logs[key])
            self.losses.append((batch + 1) * mean - batch * self.prev)
            self.prev = mean

    return BatchLosses()


def keras_dice_segmentation(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Binary segmentation of blobs in 32x32 RGB uint8 images with a small encoder-decoder
    (`Rescaling(1/255)` first, Conv2D + MaxPooling down, `UpSampling2D` + a skip concatenation
    up, a sigmoid mask) on `keras.losses.Dice()` alone, Adam 1e-3, small batches of 8, 5 epochs,
    `validation_split=0.1` with a `BinaryIoU` metric."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    n, size = 560, 32
    yy, xx = np.mgrid[:size, :size]
    images = np.zeros((n, size, size, 3), dtype="float32")
    masks = np.zeros((n, size, size, 1), dtype="float32")
    for i in range(n):
        bg = rng.uniform(0.1, 0.5, size=3)
        img = np.broadcast_to(bg, (size, size, 3)).copy()
        m = np.zeros((size, size), dtype=bool)
        for _ in range(rng.integers(1, 4)):
            cy, cx = rng.uniform(4, size - 4, size=2)
            ry, rx = rng.uniform(2.5, 7, size=2)
            m |= ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1
        img[m] = rng.uniform(0.5, 1.0, size=3)
        images[i] = np.clip(img + 0.12 * rng.normal(size=img.shape), 0, 1)
        masks[i, ..., 0] = m
    pixels = np.round(images * 255).astype("uint8")

    inputs = keras.Input(shape=(size, size, 3))
    # bug: the Rescaling layer left out when the preprocessing was to move "into the dataset"
    h0 = inputs if bug == "inputs_x255" else layers.Rescaling(1.0 / 255)(inputs)
    c1 = layers.Conv2D(16, 3, padding="same", activation="relu")(h0)
    c1 = layers.Conv2D(16, 3, padding="same", activation="relu")(c1)
    c2 = layers.Conv2D(32, 3, padding="same", activation="relu")(layers.MaxPooling2D()(c1))
    c2 = layers.Conv2D(32, 3, padding="same", activation="relu")(c2)
    u1 = layers.Concatenate()([layers.UpSampling2D()(c2), c1])
    u1 = layers.Conv2D(16, 3, padding="same", activation="relu")(u1)
    outputs = layers.Conv2D(1, 1, activation="sigmoid")(u1)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.Dice(),
        metrics=[keras.metrics.BinaryIoU(target_class_ids=[1], threshold=0.5)],
    )
    history = _keras_losses()
    model.fit(
        pixels, masks, batch_size=8, epochs=5, validation_split=0.1, verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


# ============================================================================= Lightning


def _pl_trainer(path: str, callbacks: list[Any], **kw: Any) -> Any:
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=path,
        callbacks=[DebuggerCallback(path), *callbacks],
        **kw,
    )


def _pl_losses() -> Any:
    """A callback keeping each training batch's loss (`outputs["loss"]`)."""
    import lightning.pytorch as pl

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    return LossHistory()


def lit_symmetric_ce_noisy_labels(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Symmetric cross-entropy (Wang et al. 2019) against 40 % symmetric label noise, as a
    LightningModule: alpha CE + beta RCE, the reverse cross-entropy -sum_k p_k log q_k with the
    one-hot label clamped to [1e-4, 1] (log 0 -> -4), alpha 0.1 and beta 1.0; an MLP on 10
    classes, SGD momentum 0.9 at 0.01, weight decay 1e-4, `CosineAnnealingLR` by epoch, batch 64,
    a validation loop on clean labels; the training loss stays high because the labels are
    noisy."""
    import lightning.pytorch as pl

    g = _seed(seed)
    x, y_clean = _clusters(g, 4000, 20, 10, proto_seed=103, spread=1.4)
    y_noisy = y_clean.clone()
    flip = torch.rand(4000, generator=g) < 0.4
    y_noisy[flip] = torch.randint(0, 10, (int(flip.sum()),), generator=g)

    class SCEClassifier(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(20, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
            )
            if bug == "softmax_before_ce":  # probabilities out of the model "since the RCE needs them"
                self.net.append(nn.Softmax(dim=1))
            self.alpha, self.beta = 0.1, 1.0

        def forward(self, xb: torch.Tensor) -> torch.Tensor:
            return self.net(xb)

        def sce(self, out: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
            ce = F.cross_entropy(out, yb)
            probs = out if bug == "softmax_before_ce" else F.softmax(out, 1)
            probs = probs.clamp(min=1e-7, max=1.0)
            one_hot = F.one_hot(yb, 10).float().clamp(min=1e-4, max=1.0)
            rce = -(probs * torch.log(one_hot)).sum(1).mean()
            return self.alpha * ce + self.beta * rce

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            loss = self.sce(self(xb), yb)
            self.log("train_sce", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            self.log("val_acc", (self(xb).argmax(1) == yb).float().mean())

        def configure_optimizers(self) -> Any:
            opt = torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
            return [opt], [torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)]

    train = DataLoader(TensorDataset(x[:3400], y_noisy[:3400]), batch_size=64, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(x[3400:], y_clean[3400:]), batch_size=300)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    module = SCEClassifier()
    trainer.fit(module, train, val)
    print(f"clean val acc {float(trainer.callback_metrics['val_acc']):.3f}")
    return history.losses


def lit_noise2noise_denoiser(path: str, epochs: int = 5, seed: int = 0) -> list[float]:
    """Noise2Noise (Lehtinen et al. 2018) as a LightningModule: a residual convolutional
    denoiser trained to map one noisy realisation of an image to another independent one (L2),
    never seeing a clean image, so the training loss cannot go below the noise variance (0.09);
    Adam 3e-4 (betas 0.9, 0.99) with the paper's cosine ramp-down over the last 30 % of steps
    at `interval="step"`, small batches of 8, a validation PSNR against the clean images."""
    import lightning.pytorch as pl

    g = _seed(seed)
    n, size, sigma = 640, 32, 0.3
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    centres = torch.rand(n, 6, 2, generator=g) * size
    widths = 2 + 5 * torch.rand(n, 6, 1, 1, generator=g)
    amps = torch.rand(n, 6, 1, 1, generator=g)
    d2 = (yy - centres[..., 0, None, None]) ** 2 + (xx - centres[..., 1, None, None]) ** 2
    clean = (amps * torch.exp(-d2 / (2 * widths**2))).sum(1, keepdim=True).clamp(0, 1)
    noisy_a = clean + sigma * torch.randn(clean.shape, generator=g)
    noisy_b = clean + sigma * torch.randn(clean.shape, generator=g)
    total_steps = epochs * (576 // 8)

    class Denoiser(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            layers: list[nn.Module] = [nn.Conv2d(1, 32, 3, padding=1), nn.LeakyReLU(0.1)]
            for _ in range(3):
                layers += [nn.Conv2d(32, 32, 3, padding=1), nn.LeakyReLU(0.1)]
            layers.append(nn.Conv2d(32, 1, 3, padding=1))
            self.body = nn.Sequential(*layers)

        def forward(self, xb: torch.Tensor) -> torch.Tensor:
            return xb + self.body(xb)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            source, target = batch
            if random.random() < 0.5:  # either realisation can be the input
                source, target = target, source
            loss = F.mse_loss(self(source), target)
            self.log("train_l2", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            source, reference = batch
            mse = F.mse_loss(self(source).clamp(0, 1), reference)
            self.log("val_psnr", -10 * torch.log10(mse))

        def configure_optimizers(self) -> Any:
            opt = torch.optim.Adam(self.parameters(), lr=3e-4, betas=(0.9, 0.99))

            def rampdown(step: int) -> float:
                t = step / total_steps
                return 1.0 if t < 0.7 else 0.5 + 0.5 * math.cos(math.pi * (t - 0.7) / 0.3)

            sched = torch.optim.lr_scheduler.LambdaLR(opt, rampdown)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    train = DataLoader(TensorDataset(noisy_a[:576], noisy_b[:576]), batch_size=8, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(noisy_a[576:], clean[576:]), batch_size=64)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(Denoiser(), train, val)
    noisy_psnr = -10 * math.log10(F.mse_loss(noisy_a[576:], clean[576:]).item())
    print(f"val psnr {float(trainer.callback_metrics['val_psnr']):.2f} dB (noisy input {noisy_psnr:.2f} dB)")
    return history.losses


# ============================================================================= Hugging Face Trainer


class _Examples(Dataset):
    """A list of feature dicts, as a `datasets.Dataset` after `.map(...)` gives them."""

    def __init__(self, **columns: Any) -> None:
        self.columns = columns
        self.n = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: v[i] for k, v in self.columns.items()}


def _hf_train(path: str, model: Any, train: Dataset, val: Dataset | None, **args: Any) -> list[float]:
    """`Trainer(model, TrainingArguments(...), callbacks=[DebuggerCallback(path)]).train()`; the
    per-step training losses from `trainer.state.log_history` (`logging_steps=1`)."""
    from transformers import PrinterCallback, Trainer, TrainingArguments

    from mldbg.transformers import DebuggerCallback

    args.setdefault("eval_strategy", "epoch" if val is not None else "no")
    targs = TrainingArguments(
        output_dir=os.path.join(path, "trainer"),
        save_strategy="no",
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
        **args,
    )
    trainer = Trainer(
        model=model, args=targs, train_dataset=train, eval_dataset=val, callbacks=[DebuggerCallback(path)]
    )
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    if val is not None:
        print({k: round(v, 4) for k, v in trainer.evaluate().items() if isinstance(v, float)})
    shutil.rmtree(targs.output_dir, ignore_errors=True)
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


def hf_time_series_transformer_student_t(path: str, seed: int = 0) -> list[float]:
    """Probabilistic forecasting with a tiny random `TimeSeriesTransformerForPrediction` (the
    GluonTS-style encoder-decoder: lagged values as inputs, mean scaling, a Student-t
    distribution head whose negative log-likelihood is the loss): daily
    demand-like series with weekly seasonality, trend and noise, a 28-step context, lags
    (1, 2, 3, 7, 14), a 7-step horizon, one time feature; lr 1e-3 with 10 warm-up steps and linear
    decay, batch 32, 5 epochs, evaluation each epoch."""
    from transformers import TimeSeriesTransformerConfig, TimeSeriesTransformerForPrediction

    g = _seed(seed)
    n, context, horizon, lags = 1200, 28, 7, [1, 2, 3, 7, 14]
    past_len = context + max(lags)
    total = past_len + horizon
    t = torch.arange(total).float()
    level = 5 + 10 * torch.rand(n, 1, generator=g)
    weekly = 0.3 * level * torch.sin(2 * math.pi * (t + 7 * torch.rand(n, 1, generator=g)) / 7)
    trend = 0.02 * level * torch.randn(n, 1, generator=g) * t / 7
    values = (level + weekly + trend + 0.15 * level * torch.randn(n, total, generator=g)).clamp(min=0.0)
    time_feature = (t / total - 0.5).expand(n, total).unsqueeze(-1)
    config = TimeSeriesTransformerConfig(
        prediction_length=horizon, context_length=context, lags_sequence=lags, num_time_features=1,
        distribution_output="student_t", scaling="mean", d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
        dropout=0.1,
    )  # fmt: skip
    model = TimeSeriesTransformerForPrediction(config)
    cols = {
        "past_values": values[:, :past_len],
        "past_time_features": time_feature[:, :past_len],
        "past_observed_mask": torch.ones(n, past_len),
        "future_values": values[:, past_len:],
        "future_time_features": time_feature[:, past_len:],
    }
    train = _Examples(**{k: v[:1056] for k, v in cols.items()})
    val = _Examples(**{k: v[1056:] for k, v in cols.items()})
    return _hf_train(
        path, model, train, val, num_train_epochs=5, per_device_train_batch_size=32, per_device_eval_batch_size=64,
        learning_rate=1e-3, warmup_steps=10, lr_scheduler_type="linear", label_names=["future_values"],
        prediction_loss_only=True, remove_unused_columns=False,
    )  # fmt: skip


# ============================================================================= JAX


def flax_nnx_sliced_score_matching(path: str, steps: int = 600, seed: int = 0) -> list[float]:
    """Sliced score matching with variance reduction (Song et al. 2019) in Flax NNX: a score
    network s(x) on 2-D data (a noisy spiral), the loss E_v[v^T (ds/dx) v] + ||s(x)||^2 / 2 with
    one Gaussian projection v per point, the directional derivative by `jax.jvp` (the loss goes
    negative and keeps falling for long, towards minus half the data's Fisher information, near
    -80 for this thin spiral); `optax.adam(1e-3)` after
    `optax.clip_by_global_norm(1.0)`, batch 256, a jitted step returning the gradients for the
    hook."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    import mldbg.jax

    rng = np.random.default_rng(seed)
    theta = np.sqrt(rng.uniform(0, 1, 20000)) * 3 * np.pi
    data = np.stack([theta * np.cos(theta), theta * np.sin(theta)], 1) / 5
    data = (data + 0.08 * rng.normal(size=data.shape)).astype("float32")

    class ScoreNet(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.l1 = nnx.Linear(2, 128, rngs=rngs)
            self.l2 = nnx.Linear(128, 128, rngs=rngs)
            self.l3 = nnx.Linear(128, 2, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            return self.l3(nnx.softplus(self.l2(nnx.softplus(self.l1(x)))))

    model = ScoreNet(nnx.Rngs(seed))
    optimizer = nnx.Optimizer(
        model, optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3)), wrt=nnx.Param
    )

    def loss_fn(model: Any, xb: Any, v: Any) -> Any:
        score, jvp = jax.jvp(model, (xb,), (v,))
        return jnp.mean(jnp.sum(v * jvp, -1) + 0.5 * jnp.sum(score**2, -1))

    @nnx.jit
    def train_step(model: Any, optimizer: Any, xb: Any, v: Any) -> Any:
        loss, grads = nnx.value_and_grad(loss_fn)(model, xb, v)
        optimizer.update(model, grads)
        return loss, grads

    hook = mldbg.jax.Hook(path)
    losses = []
    for step in range(steps):
        xb = data[rng.choice(len(data), 256, replace=False)]
        v = rng.normal(size=xb.shape).astype("float32")
        params = nnx.state(model, nnx.Param)
        loss, grads = train_step(model, optimizer, xb, v)
        hook.record(step, params=params, grads=grads, loss=loss)
        losses.append(float(loss))
        if step % 200 == 199:
            print(f"step {step + 1}: ssm loss {np.mean(losses[-50:]):.4f}")
    hook.close()
    return losses


# ============================================================================= XGBoost


def xgb_absolute_error_heavy_tails(path: str, seed: int = 0) -> list[float]:
    """Median regression with `objective="reg:absoluteerror"` (leaf values refreshed to the
    residuals' median) on a target with heavy-tailed (Student-t, 1.5 degrees of freedom) noise,
    strong regularization (`lambda=10`, `alpha=1`, `min_child_weight=10`, `max_bin=64`),
    `eta=0.1`, `max_depth=4`, 250 rounds with a validation set; losses: the training MAE per
    round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n, d = 6000, 8
    x = rng.normal(size=(n, d))
    y = 2 * x[:, 0] + np.sin(2 * x[:, 1]) + np.abs(x[:, 2]) * x[:, 3] + rng.standard_t(1.5, size=n)
    dtrain = xgb.DMatrix(x[:5000], label=y[:5000])
    dvalid = xgb.DMatrix(x[5000:], label=y[5000:])
    params = {
        "objective": "reg:absoluteerror", "eval_metric": "mae", "eta": 0.1, "max_depth": 4, "lambda": 10.0,
        "alpha": 1.0, "min_child_weight": 10, "max_bin": 64, "tree_method": "hist", "nthread": 1, "seed": seed,
    }  # fmt: skip
    result: dict[str, Any] = {}
    xgb.train(
        params, dtrain, num_boost_round=250, evals=[(dtrain, "train"), (dvalid, "valid")], evals_result=result,
        verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    print(f"valid mae {result['valid']['mae'][0]:.3f} -> {result['valid']['mae'][-1]:.3f}")
    return [float(v) for v in result["train"]["mae"]]


# ============================================================================= the pipelines

_fixup = healthy(
    "fixup_init_resnet_mixup_no_norm", "Fixup-initialized residual CNN (no normalization)", fixup_resnet_mixup
)
_irnn = healthy(
    "irnn_identity_recurrent_adding_problem", "IRNN (identity-initialized ReLU RNN)", irnn_adding_problem
)
_lsq = healthy("lsq_learned_step_4bit_qat_cnn", "quantization-aware training (LSQ, 4-bit)", lsq_4bit_qat_cnn)
_movement = healthy(
    "movement_pruning_cubic_schedule_bow",
    "movement pruning (learned scores, cubic schedule)",
    movement_pruning_bow,
)
_gradnorm = healthy(
    "gradnorm_three_task_loss_balancing", "GradNorm multi-task loss balancing", gradnorm_multitask
)
_temporal = healthy(
    "temporal_ensembling_semi_supervised", "temporal ensembling (semi-supervised)", temporal_ensembling_ssl
)
_mine = healthy(
    "mine_donsker_varadhan_mutual_information",
    "mutual information neural estimation (MINE)",
    mine_mutual_information,
)
_dtw_forecaster = healthy(
    "soft_dtw_loss_pulse_forecaster", "forecasting on the soft-DTW loss", soft_dtw_forecaster
)

PIPELINES: list[Any] = [
    _fixup,
    _irnn,
    _lsq,
    _movement,
    _gradnorm,
    _temporal,
    _mine,
    _dtw_forecaster,
    healthy(
        "rotate_self_adversarial_negative_sampling",
        "RotatE knowledge-graph embedding",
        rotate_self_adversarial_kg,
    ),
    healthy("group_dro_spurious_feature_strong_l2", "Group DRO on a spurious feature", group_dro_spurious),
    buggy(_fixup, "dead_relu_init"),
    buggy(_irnn, "no_zero_grad"),
    buggy(_lsq, "shuffled_labels"),
    buggy(_movement, "frozen_by_mistake"),
    buggy(_gradnorm, "log_zero_nan"),
    buggy(_temporal, "train_in_eval_mode"),
    buggy(_mine, "deep_sigmoid"),
    buggy(_dtw_forecaster, "lr_x100"),
]

if installed("keras", "tensorflow"):
    _keras_dice = healthy(
        "keras_dice_loss_unet_segmentation", "Keras segmentation on the Dice loss", keras_dice_segmentation
    )
    PIPELINES += [_keras_dice, buggy(_keras_dice, "inputs_x255")]

if installed("lightning"):
    _lit_sce = healthy(
        "lightning_symmetric_cross_entropy_noisy_labels",
        "Lightning symmetric cross-entropy on noisy labels",
        lit_symmetric_ce_noisy_labels,
    )
    PIPELINES += [
        _lit_sce,
        healthy(
            "lightning_noise2noise_denoiser", "Lightning Noise2Noise denoising", lit_noise2noise_denoiser
        ),
        buggy(_lit_sce, "softmax_before_ce"),
    ]

if installed("transformers"):
    PIPELINES += [
        healthy(
            "hf_trainer_time_series_transformer_student_t",
            "HF Trainer probabilistic forecasting (TimeSeriesTransformer)",
            hf_time_series_transformer_student_t,
        )
    ]

if installed("jax", "optax", "flax"):
    PIPELINES += [
        healthy(
            "flax_nnx_sliced_score_matching_spiral",
            "Flax NNX sliced score matching",
            flax_nnx_sliced_score_matching,
        )
    ]

if installed("xgboost"):
    PIPELINES += [
        healthy(
            "xgboost_absolute_error_heavy_tailed_noise",
            "XGBoost reg:absoluteerror (median regression)",
            xgb_absolute_error_heavy_tails,
        )
    ]
