"""The twenty-fifth blind held-out set (issue 26), part AF: training loops in the shape of
popular open-source repositories' own train scripts (their loop, loss, optimizer, schedule,
EMA and logging habits), each shrunk to a tiny model on data generated in-process, fixed seeds,
one CPU thread. Plain PyTorch loops with the README's two lines (`register_loss` where the
script has one loss module) and one training each through Lightning, the Hugging Face
`Trainer` and Keras 3 with their one callback.

Plain PyTorch: timm's `train.py` with `--aug-splits 3 --jsd-loss` (the clean images and two
AugMix views of them in one batch, `JsdCrossEntropy` with label smoothing, timm's Nesterov SGD
with its lr scaled from `lr_base` by the batch, a `CosineLRScheduler` stepped per update by
`step_update`, clipping, `ModelEmaV2` validated beside the model) on a small ResNet over RGB
glyphs; YOLOX's trainer on a one-level anchor-free model (the decoupled head, SimOTA with the
centre prior and a dynamic k, the loss dict `model(inps, targets)` returns with
`outputs["total_loss"]` backpropagated, the L1 term switched on for the last "no-aug" epoch,
`yoloxwarmcos`, three parameter groups, its ramped `ModelEMA`, `initialize_biases(1e-2)`);
torchcfm's exact optimal-transport conditional flow matching from eight Gaussians to two moons
(minibatch pairs re-drawn from the OT plan, its SELU `MLP`, the examples' `ema` helper, Euler
sampling of the EMA model); CleanRL's `sac_atari.py` discrete soft actor-critic on a
hand-written cart-pole (two soft Q-networks and hard-copied targets, the expectation over
actions, the autotuned temperature, three Adam optimizers; the Q losses rise with the returns);
BERT4Rec's Cloze training as the BERT4Rec-VAE-Pytorch repository runs it (masked items over
the whole vocabulary, `CrossEntropyLoss(ignore_index=0)`, NDCG@10 and HR@10 against 100
sampled negatives); PyG's `examples/gcn2_cora.py` (GCNII: 16 layers with initial residual and
identity mapping, dropout 0.6, Adam with weight decay 0.01 on the convolutions and 5e-4 on the
linear layers, `F.nll_loss` on the train mask, `test()` each epoch) on a Cora-like stochastic
block model; Time-Series-Library's `exp_long_term_forecasting.py` training TimesNet (FFT
periods, 2-D Inception blocks, the non-stationary normalization, `lradj type1` halving the lr
each epoch, early stopping on the validation loss) on an ETTh-like hourly series; WeNet's
hybrid CTC/attention `ASRModel` (a Conv2dSubsampling4 transformer encoder, CTC with
`reduction="sum"`, a label-smoothed attention decoder, `ctc_weight` 0.3, the model's loss dict,
gradient accumulation, clipping at 5 with the step skipped when the norm is not finite,
`WarmupLR`, the dataset's length filter) on synthetic phone sequences; ConvE's `main.py` (1-N
scoring of (subject, relation) pairs against every entity, label smoothing, the model's own
`BCELoss`, reciprocal relations, entity embeddings warm-started from an SVD through
`nn.Embedding.from_pretrained(..., freeze=False)`, a filtered MRR); NVIDIA's tacotron2
`train.py` (`TextMelCollate`, teacher-forced decoding through location-sensitive attention, a
prenet whose dropout stays on, the postnet, `Tacotron2Loss` of the mel MSEs and the gate BCE,
clipping at 1, `validate()` every 20 iterations); metric learning as pytorch-metric-learning's
trainers run it (a trunk and an embedder with their own Adam optimizers, `MPerClassSampler`, the
semi-hard `TripletMarginMiner` and `TripletMarginLoss` on cosine similarity with a
`ThresholdReducer`, precision@1 on unseen classes; the loss stays about level while the mined
triplets thin out); fastai's `tabular_learner(...).fit_one_cycle(5, 1e-2)` written out
(`Categorify`, `FillMissing`, `Normalize`, `TabularModel` with `emb_sz_rule` and `LinBnDrop`,
the one-cycle lr with Adam's beta1 cycled the other way, true weight decay) on an
adult-census-like table; a SoundStream / EnCodec-style audio codec's reconstruction stage (a
strided convolutional autoencoder around vector-quantize-pytorch's `ResidualVQ` with EMA
codebooks, dead-code replacement and quantizer dropout, time L1 plus multi-scale STFT plus
commitment losses, Adam with betas (0.5, 0.9)) on harmonic notes.

Through tools: Lightning (`mldbg.lightning.DebuggerCallback`): the `reinforce_learn_ppo.py`
domain template (an `ExperienceSourceDataset` over generated trajectories, GAE, an actor and a
critic with two optimizers under manual optimization, four optimization passes per batch; the
critic's loss rises with the returns). Hugging Face `Trainer`
(`mldbg.transformers.DebuggerCallback`): object detection as `run_object_detection.py` sets it
up, a tiny random `YolosForObjectDetection` with `labels` as a list of dicts from the user's
`collate_fn`, the DETR loss dict summed inside the model, `max_grad_norm` 0.1. Keras 3
(`mldbg.keras.Hook`): keras.io's "Metric learning for image similarity search" (an
`AnchorPositivePairs` `PyDataset`, an `EmbeddingModel` with its own `train_step` under a
`tf.GradientTape`, the anchor-positive similarity matrix over temperature 0.2 as logits).

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the codec config's `lr: 3e-2` for 3e-4 (lr_x100); the metric-learning loop zeroing the
trunk's optimizer but not the embedder's (no_zero_grad); GCNII's node labels taken from a
{paper_id: label} map iterated in sorted-id order while the features and the adjacency follow
the content file's order (shuffled_labels); timm's glyphs from the user's own loader as byte
floats, without `ToTensor`'s division, before the ImageNet `Normalize` (inputs_x255);
BERT4Rec's output layer ending in `nn.Softmax` "so the ranking scores are probabilities" while
`CrossEntropyLoss` still expects logits (softmax_before_ce); YOLOX's prior-probability bias
put in `init_yolo`, which `model.apply` runs over every module, so every convolution bias and
BatchNorm beta gets -4.6 in front of the ReLUs (dead_relu_init); fastai's config made "deeper"
as eight sigmoid layers with BatchNorm off (deep_sigmoid); ConvE's warm-started entity
embeddings made by `nn.Embedding.from_pretrained` with its default `freeze=True` while Adam
holds them (frozen_by_mistake); WeNet's data pipeline without its length filter, so utterances
of fast speech have more tokens than subsampled frames, their CTC probability is 0 and its
`-log` infinite on the batches that hold them (log_zero_nan); tacotron2's `validate()` written
without the `model.train()` at its end (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND24`.
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

from mldbg.torch import Hook

from . import BLIND24, buggy, healthy, installed

SPLIT = BLIND24

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 2401)


def _rgb_glyphs(g: torch.Generator, n: int, k: int, size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` uint8 RGB images (n, 3, size, size) of `k` classes: a class is a random 5x5 binary
    shape drawn at (size - 4)^2, placed at a random offset, in a random colour on a random
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


class _CartPole:
    """The classic cart-pole (Barto et al. 1983; gym's CartPole-v1 equations), 200 steps at
    most, reward 1 per step, numpy only."""

    def __init__(self, rng: np.random.Generator, max_steps: int = 200) -> None:
        self.rng = rng
        self.max_steps = max_steps
        self.state = np.zeros(4)
        self.t = 0

    def reset(self) -> np.ndarray:
        self.state = self.rng.uniform(-0.05, 0.05, 4)
        self.t = 0
        return self.state.astype(np.float32)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool]:
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot**2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.t += 1
        terminated = bool(abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360)
        truncated = self.t >= self.max_steps
        return self.state.astype(np.float32), 1.0, terminated, truncated


# ============================================================================= timm train.py: AugMix + JSD


_IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406])[:, None, None]
_IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225])[:, None, None]


def _augmix_ops(x: torch.Tensor, op: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """One AugMix operation per image of `x` (float, 0..255 as PIL images hold them), chosen by
    `op`: autocontrast, posterize, solarize, translate x, translate y."""
    n = len(x)
    lo = x.amin((2, 3), keepdim=True)
    hi = x.amax((2, 3), keepdim=True)
    autocontrast = (x - lo) / (hi - lo).clamp(min=1.0) * 255.0
    bits = torch.randint(4, 8, (n, 1, 1, 1), generator=g).float()
    step = 2.0 ** (8 - bits)
    posterize = torch.floor(x / step) * step
    threshold = torch.randint(128, 256, (n, 1, 1, 1), generator=g).float()
    solarize = torch.where(x >= threshold, 255.0 - x, x)
    size = x.shape[-1]
    shifted = (torch.arange(size) - torch.randint(-3, 4, (n, 1), generator=g)) % size  # (n, size)
    tx = x.gather(3, shifted[:, None, None, :].expand_as(x))
    ty = x.gather(2, shifted[:, None, :, None].expand_as(x))
    options = torch.stack([autocontrast, posterize, solarize, tx, ty])
    return options[op, torch.arange(n)]


def _augment_and_mix(x: torch.Tensor, g: torch.Generator, width: int = 3, alpha: float = 1.0) -> torch.Tensor:
    """timm's `AugMixAugment` (Hendrycks et al. 2020): `width` chains of 1 to 3 random
    operations mixed by Dirichlet weights, then blended with the image by a Beta draw."""
    n = len(x)
    ws = torch.distributions.Dirichlet(torch.full((width,), alpha)).sample((n,))
    m = torch.distributions.Beta(alpha, alpha).sample((n,))[:, None, None, None]
    mixed = torch.zeros_like(x)
    for i in range(width):
        aug = x.clone()
        depth = torch.randint(1, 4, (n,), generator=g)
        for d in range(3):
            new = _augmix_ops(aug, torch.randint(0, 5, (n,), generator=g), g)
            aug = torch.where((depth > d)[:, None, None, None], new, aug)
        mixed += ws[:, i, None, None, None] * aug
    return ((1 - m) * x + m * mixed).clamp(0, 255)


class _LabelSmoothingCrossEntropy(nn.Module):
    def __init__(self, smoothing: float = 0.1) -> None:
        super().__init__()
        self.smoothing = smoothing

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logprobs = F.log_softmax(x, dim=-1)
        nll_loss = -logprobs.gather(dim=-1, index=target.unsqueeze(1)).squeeze(1)
        smooth_loss = -logprobs.mean(dim=-1)
        return ((1.0 - self.smoothing) * nll_loss + self.smoothing * smooth_loss).mean()


class _JsdCrossEntropy(nn.Module):
    """timm's `JsdCrossEntropy`: label-smoothed cross-entropy on the clean split plus `alpha`
    times the Jensen-Shannon divergence between the splits' softmaxes."""

    def __init__(self, num_splits: int = 3, alpha: float = 12.0, smoothing: float = 0.1) -> None:
        super().__init__()
        self.num_splits = num_splits
        self.alpha = alpha
        self.cross_entropy_loss = _LabelSmoothingCrossEntropy(smoothing)

    def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        split_size = output.shape[0] // self.num_splits
        logits_split = torch.split(output, split_size)
        loss = self.cross_entropy_loss(logits_split[0], target[:split_size])
        probs = [F.softmax(logits, dim=1) for logits in logits_split]
        logp_mixture = torch.clamp(torch.stack(probs).mean(dim=0), 1e-7, 1).log()
        loss = loss + self.alpha * sum(F.kl_div(logp_mixture, p, reduction="batchmean") for p in probs) / len(
            probs
        )
        return loss


class _BasicBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class _TinyResNet(nn.Module):
    def __init__(self, classes: int, width: int = 16) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        self.layer1 = _BasicBlock(width)
        self.down = nn.Sequential(
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
        )
        self.layer2 = _BasicBlock(2 * width)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.down(self.layer1(self.stem(x))))
        return self.fc(x.mean((2, 3)))


class _CosineLRScheduler:
    """timm's `CosineLRScheduler` with `t_in_epochs=False`: a linear warm-up from
    `warmup_lr_init` over `warmup_t` updates, then cosine to `lr_min`, set by `step_update`."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        t_initial: int,
        lr_min: float,
        warmup_t: int,
        warmup_lr_init: float,
    ) -> None:
        self.optimizer = optimizer
        self.t_initial, self.lr_min, self.warmup_t, self.warmup_lr_init = (
            t_initial,
            lr_min,
            warmup_t,
            warmup_lr_init,
        )
        self.base_values = [group["lr"] for group in optimizer.param_groups]
        self.step_update(0)

    def step(self, epoch: int) -> None:  # t_in_epochs=False: the epoch step does nothing
        pass

    def step_update(self, num_updates: int) -> None:
        for group, base in zip(self.optimizer.param_groups, self.base_values, strict=True):
            if num_updates < self.warmup_t:
                lr = self.warmup_lr_init + num_updates * (base - self.warmup_lr_init) / self.warmup_t
            else:
                t = min(num_updates - self.warmup_t, self.t_initial)
                lr = self.lr_min + 0.5 * (base - self.lr_min) * (1 + math.cos(math.pi * t / self.t_initial))
            group["lr"] = lr


class _ModelEmaV2(nn.Module):
    """timm's `ModelEmaV2`: a deep copy whose state (parameters and buffers) follows the
    model's by `ema = decay * ema + (1 - decay) * model` after each update."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        super().__init__()
        self.module = copy.deepcopy(model)
        self.module.eval()
        self.decay = decay

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        for ema_v, model_v in zip(
            self.module.state_dict().values(), model.state_dict().values(), strict=True
        ):
            if ema_v.dtype.is_floating_point:
                ema_v.copy_(self.decay * ema_v + (1.0 - self.decay) * model_v)
            else:
                ema_v.copy_(model_v)


def timm_augmix_jsd_ema(path: str, epochs: int = 4, seed: int = 0, bug: str | None = None) -> list[float]:
    """timm's `train.py` with `--aug-splits 3 --jsd-loss --smoothing 0.1 --model-ema
    --model-ema-decay 0.99 --clip-grad 1.0 --warmup-epochs 1 --sched cosine`: every batch is
    the clean images and two AugMix views of them (autocontrast, posterize, solarize and
    translations on the 0-255 pixels, as timm runs them on PIL images, before `ToTensor` and the
    ImageNet `Normalize`), `JsdCrossEntropy` (label-smoothed cross-entropy on the clean third
    plus 12 times the Jensen-Shannon term), timm's SGD (Nesterov momentum 0.9, weight decay 2e-5
    off the biases and norms), its lr from `lr_base 0.1 * batch / 256`, a `CosineLRScheduler`
    stepped per update by `step_update(num_updates)`, clipping by norm, `ModelEmaV2` updated after
    each step and validated with the model each epoch; a small ResNet on 16x16 RGB glyphs of
    10 classes."""
    g = _seed(seed)
    images, labels = _rgb_glyphs(g, 2800, 10)
    xtr, ytr, xva, yva = images[:2400], labels[:2400], images[2400:], labels[2400:]
    batch = 32
    model = _TinyResNet(10)
    decay, no_decay = [], []
    for p in model.parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    lr = 0.1 * batch / 256
    opt = torch.optim.SGD(
        [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": 2e-5}],
        lr=lr, momentum=0.9, nesterov=True,
    )  # fmt: skip
    steps_per_epoch = len(xtr) // batch
    sched = _CosineLRScheduler(opt, steps_per_epoch * (epochs - 1), 1e-5, steps_per_epoch, 1e-4)
    model_ema = _ModelEmaV2(model, decay=0.99)
    train_loss_fn = _JsdCrossEntropy(num_splits=3, smoothing=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(train_loss_fn)

    def to_tensor(x: torch.Tensor) -> torch.Tensor:
        # bug: the dataset's own loader returns the bytes as floats, no ToTensor's division by 255
        x = x.float() if bug == "inputs_x255" else x.float() / 255.0
        return (x - _IMAGENET_MEAN) / _IMAGENET_STD

    def validate(m: nn.Module) -> float:
        m.eval()
        with torch.no_grad():
            return (m(to_tensor(xva)).argmax(1) == yva).float().mean().item()

    losses: list[float] = []
    num_updates = 0
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(xtr), generator=g)
        for i in range(steps_per_epoch):
            idx = perm[i * batch : (i + 1) * batch]
            x = xtr[idx].float()
            flip = torch.rand(batch, generator=g) < 0.5
            x = torch.where(flip[:, None, None, None], x.flip(3), x)  # the primary transform
            views = [x, _augment_and_mix(x, g), _augment_and_mix(x, g)]
            inp = torch.cat([to_tensor(v.round()) for v in views])
            target = ytr[idx].repeat(3)
            loss = train_loss_fn(model(inp), target)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            model_ema.update(model)
            num_updates += 1
            sched.step_update(num_updates=num_updates)
            losses.append(loss.item())
        sched.step(epoch + 1)
        print(f"epoch {epoch} loss {np.mean(losses[-steps_per_epoch:]):.4f} top1 {validate(model):.3f} "
              f"ema top1 {validate(model_ema.module):.3f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= YOLOX: decoupled anchor-free head, SimOTA


def _shapes_scenes(g: torch.Generator, n: int, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` RGB scenes (float in [0, 1]) with 1 to 3 objects of three classes (filled square,
    disk, hollow square) of side 7 to 14 pixels; the labels (n, 3, 5) as YOLOX pads them:
    (class, cx, cy, w, h) in pixels, all-zero rows for no object."""
    img = 0.25 * torch.rand(n, 3, 1, 1, generator=g) + 0.05 * torch.randn(n, 3, size, size, generator=g)
    labels = torch.zeros(n, 3, 5)
    yy, xx = torch.meshgrid(torch.arange(size) + 0.5, torch.arange(size) + 0.5, indexing="ij")
    counts = torch.randint(1, 4, (n,), generator=g)
    for i in range(n):
        for j in range(int(counts[i])):
            cls = int(torch.randint(0, 3, (1,), generator=g))
            side = float(torch.randint(7, 15, (1,), generator=g))
            cx, cy = (torch.rand(2, generator=g) * (size - side) + side / 2).tolist()
            inside = ((xx - cx).abs() <= side / 2) & ((yy - cy).abs() <= side / 2)
            if cls == 1:
                inside = (xx - cx) ** 2 + (yy - cy) ** 2 <= (side / 2) ** 2
            elif cls == 2:
                inside = inside & ~(((xx - cx).abs() <= side / 2 - 2) & ((yy - cy).abs() <= side / 2 - 2))
            colour = 0.5 + 0.5 * torch.rand(3, 1, 1, generator=g)
            img[i] = torch.where(inside, colour, img[i])
            labels[i, j] = torch.tensor([float(cls), cx, cy, side, side])
    return img.clamp(0, 1), labels


def _base_conv(cin: int, cout: int, k: int = 3, s: int = 1) -> nn.Sequential:
    """YOLOX's `BaseConv` with `act="relu"`: convolution without bias, BatchNorm, activation."""
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


def _bboxes_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pairwise IoU of boxes as (cx, cy, w, h), YOLOX's `bboxes_iou(xyxy=False)`."""
    tl = torch.max(a[:, None, :2] - a[:, None, 2:] / 2, b[:, :2] - b[:, 2:] / 2)
    br = torch.min(a[:, None, :2] + a[:, None, 2:] / 2, b[:, :2] + b[:, 2:] / 2)
    inter = (br - tl).clamp(min=0).prod(2)
    return inter / (a[:, None, 2:].prod(2) + b[:, 2:].prod(1) - inter)


class _YOLOXLite(nn.Module):
    """A one-level YOLOX (stride 4): a small ReLU backbone, the decoupled head (a stem, a
    classification and a regression tower, `cls_preds`, `reg_preds`, `obj_preds`), and in
    training mode `forward(x, targets)` returning YOLOX's loss dict from SimOTA assignments."""

    def __init__(self, num_classes: int = 3, width: int = 24) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.stride = 4
        self.backbone = nn.Sequential(
            _base_conv(3, 16, 3, 2), _base_conv(16, 24), _base_conv(24, 32, 3, 2), _base_conv(32, 32)
        )
        self.stem = _base_conv(32, width, 1)
        self.cls_convs = nn.Sequential(_base_conv(width, width), _base_conv(width, width))
        self.reg_convs = nn.Sequential(_base_conv(width, width), _base_conv(width, width))
        self.cls_preds = nn.Conv2d(width, num_classes, 1)
        self.reg_preds = nn.Conv2d(width, 4, 1)
        self.obj_preds = nn.Conv2d(width, 1, 1)
        self.use_l1 = False

    def initialize_biases(self, prior_prob: float) -> None:
        for conv in (self.cls_preds, self.obj_preds):
            nn.init.constant_(conv.bias, -math.log((1 - prior_prob) / prior_prob))

    def head(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.stem(self.backbone(x))
        reg_feat = self.reg_convs(x)
        out = torch.cat(
            [self.reg_preds(reg_feat), self.obj_preds(reg_feat), self.cls_preds(self.cls_convs(x))], 1
        )
        b, c, h, w = out.shape
        yv, xv = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        grid = torch.stack((xv, yv), 2).view(1, -1, 2).float()
        return out.flatten(2).permute(0, 2, 1), grid  # (B, A, 5 + C)

    def decode(self, raw: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        xy = (raw[..., :2] + grid) * self.stride
        wh = torch.exp(raw[..., 2:4]) * self.stride
        return torch.cat([xy, wh, raw[..., 4:]], -1)

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> Any:
        raw, grid = self.head(x)
        outputs = self.decode(raw, grid)
        if not self.training or targets is None:
            return torch.cat([outputs[..., :4], outputs[..., 4:].sigmoid()], -1)
        return self.get_losses(outputs, raw, grid, targets)

    @torch.no_grad()
    def get_assignments(
        self, gt_boxes: torch.Tensor, gt_classes: torch.Tensor, boxes: torch.Tensor, cls: torch.Tensor,
        obj: torch.Tensor, centers: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:  # fmt: skip
        num_gt = len(gt_boxes)
        radius = 2.5 * self.stride  # the centre prior
        in_centers = ((centers[None] - gt_boxes[:, None, :2]).abs() < radius).all(2)  # (G, A)
        fg_mask = in_centers.any(0)
        geometry = in_centers[:, fg_mask]
        ious = _bboxes_iou(gt_boxes, boxes[fg_mask])
        gt_cls = F.one_hot(gt_classes, self.num_classes).float()
        scores = (cls[fg_mask].sigmoid() * obj[fg_mask].sigmoid()).sqrt()
        cls_cost = F.binary_cross_entropy(
            scores[None].expand(num_gt, -1, -1), gt_cls[:, None].expand(-1, len(scores), -1), reduction="none"
        ).sum(-1)
        cost = cls_cost + 3.0 * -torch.log(ious + 1e-8) + 1e6 * (~geometry)
        matching = torch.zeros_like(cost)
        dynamic_ks = torch.clamp(torch.topk(ious, min(10, ious.shape[1]), dim=1).values.sum(1).int(), min=1)
        for gt_idx in range(num_gt):
            _, pos_idx = torch.topk(cost[gt_idx], k=int(dynamic_ks[gt_idx]), largest=False)
            matching[gt_idx][pos_idx] = 1
        multiple = matching.sum(0) > 1
        if multiple.any():
            cost_argmin = cost[:, multiple].argmin(0)
            matching[:, multiple] = 0
            matching[cost_argmin, multiple] = 1
        fg_inboxes = matching.sum(0) > 0
        fg_mask[fg_mask.clone()] = fg_inboxes
        matched_gt = matching[:, fg_inboxes].argmax(0)
        pred_ious = (matching * ious).sum(0)[fg_inboxes]
        return fg_mask, matched_gt, pred_ious

    def get_losses(
        self, outputs: torch.Tensor, raw: torch.Tensor, grid: torch.Tensor, labels: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        boxes, obj, cls = outputs[..., :4], outputs[..., 4:5], outputs[..., 5:]
        centers = (grid[0] + 0.5) * self.stride
        cls_targets, reg_targets, l1_targets, obj_targets, fg_masks = [], [], [], [], []
        num_fg, num_gts = 0, 0
        for b in range(len(outputs)):
            valid = labels[b].sum(1) > 0
            gt = labels[b][valid]
            num_gts += len(gt)
            if len(gt) == 0:
                fg = torch.zeros(len(centers), dtype=torch.bool)
                cls_targets.append(outputs.new_zeros((0, self.num_classes)))
                reg_targets.append(outputs.new_zeros((0, 4)))
                l1_targets.append(outputs.new_zeros((0, 4)))
            else:
                gt_classes, gt_boxes = gt[:, 0].long(), gt[:, 1:]
                fg, matched, pred_ious = self.get_assignments(
                    gt_boxes, gt_classes, boxes[b], cls[b], obj[b], centers
                )
                cls_targets.append(F.one_hot(gt_classes[matched], self.num_classes) * pred_ious[:, None])
                reg = gt_boxes[matched]
                reg_targets.append(reg)
                anchor = grid[0][fg]
                l1_targets.append(
                    torch.cat(
                        [reg[:, :2] / self.stride - anchor, torch.log(reg[:, 2:] / self.stride + 1e-8)], 1
                    )
                )
            num_fg += int(fg.sum())
            obj_targets.append(fg[:, None].float())
            fg_masks.append(fg)
        fg_mask = torch.cat(fg_masks)
        num_fg = max(num_fg, 1)
        ious = _bboxes_iou(boxes.reshape(-1, 4)[fg_mask], torch.cat(reg_targets)).diagonal()
        loss_iou = (1 - ious**2).sum() / num_fg  # IOUloss(loss_type="iou")
        loss_obj = (
            F.binary_cross_entropy_with_logits(
                obj.reshape(-1, 1), torch.cat(obj_targets), reduction="none"
            ).sum()
            / num_fg
        )
        loss_cls = (
            F.binary_cross_entropy_with_logits(
                cls.reshape(-1, self.num_classes)[fg_mask], torch.cat(cls_targets), reduction="none"
            ).sum()
            / num_fg
        )
        loss_l1 = outputs.new_zeros(())
        if self.use_l1:
            origin = torch.cat([raw[..., :2], raw[..., 2:4]], -1).reshape(-1, 4)[fg_mask]
            loss_l1 = F.l1_loss(origin, torch.cat(l1_targets), reduction="none").sum() / num_fg
        reg_weight = 5.0
        loss = reg_weight * loss_iou + loss_obj + loss_cls + loss_l1
        return {
            "total_loss": loss, "iou_loss": reg_weight * loss_iou, "l1_loss": loss_l1, "conf_loss": loss_obj,
            "cls_loss": loss_cls, "num_fg": torch.tensor(num_fg / max(num_gts, 1)),
        }  # fmt: skip


class _ModelEMA:
    """YOLOX's `ModelEMA`: decay ramped by `decay * (1 - exp(-updates / 2000))`."""

    def __init__(self, model: nn.Module, decay: float = 0.9998) -> None:
        self.ema = copy.deepcopy(model).eval()
        self.updates = 0
        self.decay = lambda x: decay * (1 - math.exp(-x / 2000))
        for p in self.ema.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        self.updates += 1
        d = self.decay(self.updates)
        msd = model.state_dict()
        for k, v in self.ema.state_dict().items():
            if v.dtype.is_floating_point:
                v.mul_(d).add_((1.0 - d) * msd[k].detach())


def yolox_decoupled_head_simota(
    path: str, epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """YOLOX's `Trainer` (Ge et al. 2021) on a one-level model: the decoupled head, anchor-free
    boxes decoded from the grid, SimOTA assignment (the centre prior at radius 2.5, the cost
    of classification plus 3 times the IoU cost, a dynamic k from the top-10 IoUs), the loss dict
    `model(inps, targets)` returns (5 times the IoU loss `1 - iou^2`, objectness and
    classification BCE over the foreground count) with `outputs["total_loss"]` backpropagated,
    the L1 loss switched on for the last ("no-aug") epochs, SGD Nesterov momentum 0.9 with
    weight decay 5e-4 on the convolution weights only, `basic_lr_per_img` times the batch,
    `yoloxwarmcos` (a quadratic warm-up over the first epoch, cosine, the floor for the last
    epochs), `init_yolo` (BatchNorm eps 1e-3, momentum 0.03), `initialize_biases(1e-2)` on the
    classification and objectness convolutions, an EMA model evaluated at the end; 32x32 scenes
    of one to three squares, disks and hollow squares."""
    g = _seed(seed)
    images, labels = _shapes_scenes(g, 1800)
    xtr, ltr, xva, lva = images[:1600], labels[:1600], images[1600:], labels[1600:]
    batch, no_aug_epochs, warmup_epochs = 16, 1, 1
    model = _YOLOXLite()

    def init_yolo(m: nn.Module) -> None:
        if isinstance(m, nn.BatchNorm2d):
            m.eps = 1e-3
            m.momentum = 0.03
        if bug == "dead_relu_init" and getattr(m, "bias", None) is not None:
            # bug: the prior-probability bias put in init_yolo, so apply() gives it to every bias and BN beta
            nn.init.constant_(m.bias, -math.log((1 - 1e-2) / 1e-2))

    model.apply(init_yolo)
    model.initialize_biases(1e-2)
    pg0, pg1, pg2 = [], [], []  # BN weights, conv weights (decayed), biases
    for name, p in model.named_parameters():
        if p.ndim > 1:
            pg1.append(p)
        elif name.endswith("bias"):
            pg2.append(p)
        else:
            pg0.append(p)
    lr = 0.02 / 64.0 * batch
    opt = torch.optim.SGD(pg0, lr=lr, momentum=0.9, nesterov=True)
    opt.add_param_group({"params": pg1, "weight_decay": 5e-4})
    opt.add_param_group({"params": pg2})
    iters_per_epoch = len(xtr) // batch
    total, warmup_total = epochs * iters_per_epoch, warmup_epochs * iters_per_epoch
    no_aug_iter = no_aug_epochs * iters_per_epoch
    min_lr = 0.05 * lr

    def yoloxwarmcos(it: int) -> float:
        if it <= warmup_total:
            return lr * pow(it / float(warmup_total), 2)
        if it >= total - no_aug_iter:
            return min_lr
        return min_lr + 0.5 * (lr - min_lr) * (
            1.0 + math.cos(math.pi * (it - warmup_total) / (total - warmup_total - no_aug_iter))
        )

    ema_model = _ModelEMA(model, 0.9998)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    progress = 0
    for epoch in range(epochs):
        if epoch == epochs - no_aug_epochs:
            print("--->No mosaic aug now! --->Add additional L1 loss now!")
            model.use_l1 = True
        model.train()
        perm = torch.randperm(len(xtr), generator=g)
        for i in range(iters_per_epoch):
            idx = perm[i * batch : (i + 1) * batch]
            inps, targets = xtr[idx], ltr[idx].clone()
            flip = torch.rand(batch, generator=g) < 0.5
            inps = torch.where(flip[:, None, None, None], inps.flip(3), inps)
            targets[flip, :, 1] = torch.where(targets[flip].sum(2) > 0, 32 - targets[flip, :, 1], 0.0)
            outputs = model(inps, targets)
            loss = outputs["total_loss"]
            opt.zero_grad()
            loss.backward()
            opt.step()
            ema_model.update(model)
            progress += 1
            for group in opt.param_groups:
                group["lr"] = yoloxwarmcos(progress)
            losses.append(loss.item())
            if i % 50 == 0:
                print(
                    f"epoch {epoch + 1} iter {i} "
                    + ", ".join(f"{k}: {v.item():.3f}" for k, v in outputs.items())
                )
    with torch.no_grad():  # recall at IoU 0.5 of the EMA model's top-scoring boxes
        preds = ema_model.ema(xva)
        hits, count = 0, 0
        for b in range(len(xva)):
            gt = lva[b][lva[b].sum(1) > 0]
            score = preds[b, :, 4:5] * preds[b, :, 5:]
            best = score.max(1).values.topk(10).indices
            ious = _bboxes_iou(gt[:, 1:], preds[b, best, :4])
            cls_ok = score[best].argmax(1)[None] == gt[:, :1].long()
            hits += int(((ious > 0.5) & cls_ok).any(1).sum())
            count += len(gt)
    print(f"EMA recall@0.5 (top-10 boxes) {hits / count:.3f}")
    hook.close()
    return losses


# ============================================================================= torchcfm: exact-OT conditional flow matching


def _sample_8gaussians(n: int, g: torch.Generator) -> torch.Tensor:
    """torchcfm's `sample_8gaussians`: eight Gaussians of variance 0.1 on a circle of radius 5."""
    angles = torch.randint(0, 8, (n,), generator=g).float() * (math.pi / 4)
    centers = 5.0 * torch.stack([torch.cos(angles), torch.sin(angles)], 1)
    return centers + math.sqrt(0.1) * torch.randn(n, 2, generator=g)


def _sample_moons(n: int, g: torch.Generator) -> torch.Tensor:
    """torchcfm's `sample_moons`: scikit-learn's two moons with noise 0.2, times 3 minus 1."""
    t = torch.rand(n, generator=g) * math.pi
    upper = torch.rand(n, generator=g) < 0.5
    x = torch.where(upper, torch.cos(t), 1 - torch.cos(t))
    y = torch.where(upper, torch.sin(t), 0.5 - torch.sin(t))
    return torch.stack([x, y], 1) * 3 - 1 + 0.2 * 3 * torch.randn(n, 2, generator=g)


class _ExactOTConditionalFlowMatcher:
    """torchcfm's `ExactOptimalTransportConditionalFlowMatcher`: pairs re-drawn from the exact
    OT plan between the two minibatches (here by `linear_sum_assignment`, the plan of equal
    uniform batches being a permutation), then the straight path with noise `sigma`."""

    def __init__(self, sigma: float, rng: np.random.Generator) -> None:
        self.sigma = sigma
        self.rng = rng

    def sample_plan(self, x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        from scipy.optimize import linear_sum_assignment

        cost = torch.cdist(x0, x1) ** 2
        rows, cols = linear_sum_assignment(cost.numpy())
        pi = np.zeros(cost.shape)
        pi[rows, cols] = 1.0 / len(rows)
        choices = self.rng.choice(pi.size, p=pi.flatten(), size=len(x0), replace=True)
        i, j = np.divmod(choices, pi.shape[1])
        return x0[i], x1[j]

    def sample_location_and_conditional_flow(
        self, x0: torch.Tensor, x1: torch.Tensor, g: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x0, x1 = self.sample_plan(x0, x1)
        t = torch.rand(len(x0), generator=g)
        mu_t = t[:, None] * x1 + (1 - t[:, None]) * x0
        xt = mu_t + self.sigma * torch.randn(mu_t.shape, generator=g)
        return t, xt, x1 - x0


def _ema(source: nn.Module, target: nn.Module, decay: float) -> None:
    """torchcfm's `ema` helper of its examples."""
    source_dict, target_dict = source.state_dict(), target.state_dict()
    for key in source_dict:
        target_dict[key].data.copy_(target_dict[key].data * decay + source_dict[key].data * (1 - decay))


def torchcfm_exact_ot_cfm_ema(path: str, steps: int = 800, seed: int = 0) -> list[float]:
    """The 2-D example of torchcfm (Tong et al. 2024), eight Gaussians to two moons:
    `ExactOptimalTransportConditionalFlowMatcher(sigma=0.1)`, its `MLP(dim=2, w=64,
    time_varying=True)` (SELU, time concatenated to the input), `torch.mean((vt - ut) ** 2)`,
    Adam 1e-3 with batches of 256, an EMA copy (decay 0.995) by the examples' `ema` helper;
    every 400 steps the EMA model integrated by 100 Euler steps and compared with fresh moons
    (the mean distance of each sample to its nearest target point)."""
    g = _seed(seed)
    fm = _ExactOTConditionalFlowMatcher(0.1, np.random.default_rng(seed + 24))
    model = nn.Sequential(
        nn.Linear(3, 64),
        nn.SELU(),
        nn.Linear(64, 64),
        nn.SELU(),
        nn.Linear(64, 64),
        nn.SELU(),
        nn.Linear(64, 2),
    )
    ema_model = copy.deepcopy(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for k in range(steps):
        optimizer.zero_grad()
        x0 = _sample_8gaussians(256, g)
        x1 = _sample_moons(256, g)
        t, xt, ut = fm.sample_location_and_conditional_flow(x0, x1, g)
        vt = model(torch.cat([xt, t[:, None]], dim=-1))
        loss = torch.mean((vt - ut) ** 2)
        loss.backward()
        optimizer.step()
        _ema(model, ema_model, 0.995)
        losses.append(loss.item())
        if (k + 1) % 400 == 0:
            with torch.no_grad():
                x = _sample_8gaussians(1000, g)
                for i in range(100):
                    tt = torch.full((len(x), 1), i / 100)
                    x = x + ema_model(torch.cat([x, tt], -1)) / 100
                gap = torch.cdist(x, _sample_moons(2000, g)).min(1).values.mean().item()
            print(f"{k + 1}: loss {np.mean(losses[-100:]):0.3f} EMA samples to moons {gap:.3f}")
    hook.close()
    return losses


# ============================================================================= CleanRL: discrete SAC


class _SoftQNetwork(nn.Module):
    def __init__(self, obs: int, actions: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(obs, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, actions)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class _DiscreteActor(nn.Module):
    def __init__(self, obs: int, actions: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(obs, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, actions)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def get_action(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits = self(x)
        policy_dist = torch.distributions.Categorical(logits=logits)
        action = policy_dist.sample()
        action_probs = policy_dist.probs
        log_prob = F.log_softmax(logits, dim=1)
        return action, log_prob, action_probs


def cleanrl_sac_discrete_cartpole(path: str, total_timesteps: int = 6000, seed: int = 0) -> list[float]:
    """CleanRL's `sac_atari.py` (discrete soft actor-critic, Christodoulou 2019) on a hand-written
    cart-pole: two soft Q-networks over all actions and their target copies (hard copies,
    `tau=1.0`, every 200 steps), a categorical actor, the soft target
    `probs * (min Q' - alpha log pi)` summed over actions, the actor loss `probs * (alpha log pi -
    min Q)` and the autotuned temperature toward `0.89 * log(2)` nats, three Adam optimizers
    (3e-4, eps 1e-4), an update every 4 environment steps after 1000 random ones, batches of 64
    from a replay buffer; the losses are the Q losses, which rise with the returns as the
    values grow."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 2424)
    env = _CartPole(rng)
    actor = _DiscreteActor(4, 2)
    qf1, qf2 = _SoftQNetwork(4, 2), _SoftQNetwork(4, 2)
    qf1_target, qf2_target = copy.deepcopy(qf1), copy.deepcopy(qf2)
    q_optimizer = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=3e-4, eps=1e-4)
    actor_optimizer = torch.optim.Adam(list(actor.parameters()), lr=3e-4, eps=1e-4)
    target_entropy = -0.89 * torch.log(1 / torch.tensor(2.0))
    log_alpha = torch.zeros(1, requires_grad=True)
    alpha = log_alpha.exp().item()
    a_optimizer = torch.optim.Adam([log_alpha], lr=3e-4, eps=1e-4)
    hook = Hook(path)
    hook.register_module(actor, name="actor")
    hook.register_module(qf1, name="qf1")
    hook.register_module(qf2, name="qf2")
    size = total_timesteps
    obs_buf = np.zeros((size, 4), np.float32)
    next_buf = np.zeros((size, 4), np.float32)
    act_buf = np.zeros(size, np.int64)
    rew_buf = np.zeros(size, np.float32)
    done_buf = np.zeros(size, np.float32)
    losses: list[float] = []
    returns: list[float] = []
    obs, ep_return = env.reset(), 0.0
    for global_step in range(total_timesteps):
        if global_step < 1000:
            action = int(rng.integers(0, 2))
        else:
            with torch.no_grad():
                action = int(actor.get_action(torch.from_numpy(obs)[None])[0])
        next_obs, reward, terminated, truncated = env.step(action)
        obs_buf[global_step], next_buf[global_step], act_buf[global_step] = obs, next_obs, action
        rew_buf[global_step], done_buf[global_step] = reward, float(terminated)
        ep_return += reward
        obs = next_obs
        if terminated or truncated:
            returns.append(ep_return)
            obs, ep_return = env.reset(), 0.0
        if global_step > 1000 and global_step % 4 == 0:
            idx = torch.randint(0, global_step + 1, (64,), generator=g).numpy()
            b_obs, b_next = torch.from_numpy(obs_buf[idx]), torch.from_numpy(next_buf[idx])
            b_act, b_rew, b_done = (
                torch.from_numpy(act_buf[idx]),
                torch.from_numpy(rew_buf[idx]),
                torch.from_numpy(done_buf[idx]),
            )
            with torch.no_grad():
                _, next_state_log_pi, next_state_action_probs = actor.get_action(b_next)
                min_qf_next_target = next_state_action_probs * (
                    torch.min(qf1_target(b_next), qf2_target(b_next)) - alpha * next_state_log_pi
                )
                min_qf_next_target = min_qf_next_target.sum(dim=1)
                next_q_value = b_rew + (1 - b_done) * 0.99 * min_qf_next_target
            qf1_a_values = qf1(b_obs).gather(1, b_act[:, None]).view(-1)
            qf2_a_values = qf2(b_obs).gather(1, b_act[:, None]).view(-1)
            qf_loss = F.mse_loss(qf1_a_values, next_q_value) + F.mse_loss(qf2_a_values, next_q_value)
            q_optimizer.zero_grad()
            qf_loss.backward()
            q_optimizer.step()

            _, log_pi, action_probs = actor.get_action(b_obs)
            with torch.no_grad():
                min_qf_values = torch.min(qf1(b_obs), qf2(b_obs))
            actor_loss = (action_probs * ((alpha * log_pi) - min_qf_values)).mean()
            actor_optimizer.zero_grad()
            actor_loss.backward()
            actor_optimizer.step()

            alpha_loss = (
                action_probs.detach() * (-log_alpha.exp() * (log_pi + target_entropy).detach())
            ).mean()
            a_optimizer.zero_grad()
            alpha_loss.backward()
            a_optimizer.step()
            alpha = log_alpha.exp().item()
            losses.append(qf_loss.item())
        if global_step % 200 == 0:
            qf1_target.load_state_dict(qf1.state_dict())
            qf2_target.load_state_dict(qf2.state_dict())
        if global_step % 1000 == 999 and returns:
            print(f"step {global_step + 1} episodic return {np.mean(returns[-10:]):.1f} "
                  f"qf_loss {np.mean(losses[-50:]) if losses else 0:.3f} alpha {alpha:.3f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= BERT4Rec: Cloze item masking


def _sessions(g: torch.Generator, users: int, items: int, length: int, clusters: int = 10) -> torch.Tensor:
    """Item histories (ids 1..items): each user stays in one genre (a block of items) and
    walks through it by steps of +1 or +2 that are the user's habit, a random item of the genre
    one time in five."""
    per = items // clusters
    genre = torch.randint(0, clusters, (users,), generator=g)
    habit = torch.randint(1, 3, (users,), generator=g)
    pos = torch.randint(0, per, (users,), generator=g)
    seqs = torch.empty(users, length, dtype=torch.long)
    for t in range(length):
        seqs[:, t] = genre * per + pos + 1
        jump = torch.rand(users, generator=g) < 0.2
        pos = torch.where(jump, torch.randint(0, per, (users,), generator=g), (pos + habit) % per)
    return seqs


class _BERT4Rec(nn.Module):
    """BERT4Rec (Sun et al. 2019) as the BERT4Rec-VAE-Pytorch repository builds it: item and
    position embeddings, a bidirectional transformer with GELU, an output layer over the item
    vocabulary (0 padding, `items + 1` the mask token)."""

    def __init__(
        self, items: int, max_len: int, hidden: int = 64, layers: int = 2, softmax_out: bool = False
    ) -> None:
        super().__init__()
        vocab = items + 2
        self.token = nn.Embedding(vocab, hidden, padding_idx=0)
        self.position = nn.Embedding(max_len, hidden)
        self.dropout = nn.Dropout(0.1)
        block = nn.TransformerEncoderLayer(
            hidden, 2, 2 * hidden, dropout=0.1, activation="gelu", batch_first=True
        )
        self.transformer_blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        out: list[nn.Module] = [nn.Linear(hidden, vocab)]
        if softmax_out:  # bug: the output layer made to give the ranking scores as probabilities
            out.append(nn.Softmax(dim=-1))
        self.out = nn.Sequential(*out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = x == 0
        h = self.dropout(self.token(x) + self.position(torch.arange(x.shape[1]))[None])
        return self.out(self.transformer_blocks(h, src_key_padding_mask=mask))


def bert4rec_cloze_masked_items(
    path: str, epochs: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """BERT4Rec's training in the shape of the BERT4Rec-VAE-Pytorch repository: the Cloze task
    (15 % of the items of each history, up to 20, replaced by the mask token, which is
    predicted over the whole item vocabulary by `CrossEntropyLoss(ignore_index=0)`), a
    2-layer, 2-head bidirectional transformer of width 64, Adam 1e-3, batches of 64, and the
    validation protocol of the paper after each epoch (the last item masked, ranked against
    100 sampled negatives, NDCG@10 and HR@10 on 300 users); 1280 users on 300 items in 10
    genres."""
    g = _seed(seed)
    items, max_len, users = 300, 20, 1280
    seqs = _sessions(g, users, items, max_len + 1)
    train, val_target = seqs[:, :-1], seqs[:, -1]
    mask_token = items + 1
    model = _BERT4Rec(items, max_len, softmax_out=bug == "softmax_before_ce")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    ce = nn.CrossEntropyLoss(ignore_index=0)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(ce)
    negatives = torch.randint(1, items + 1, (users, 100), generator=g)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(users, generator=g)
        for i in range(0, users, 64):
            seq = train[perm[i : i + 64]]
            masked = torch.rand(seq.shape, generator=g) < 0.15
            tokens = torch.where(masked, mask_token, seq)
            labels = torch.where(masked, seq, 0)
            logits = model(tokens)
            loss = ce(logits.view(-1, logits.size(-1)), labels.view(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            tokens = torch.cat([train[:300, 1:], torch.full((300, 1), mask_token)], 1)
            scores = model(tokens)[:, -1]
            candidates = torch.cat([val_target[:300, None], negatives[:300]], 1)
            cand = scores.gather(1, candidates)
            rank = (cand[:, 1:] > cand[:, :1]).sum(1)
            hit = (rank < 10).float()
            ndcg = hit / torch.log2(rank.float() + 2)
        print(
            f"epoch {epoch} loss {np.mean(losses[-20:]):.4f} NDCG@10 {ndcg.mean():.3f} HR@10 {hit.mean():.3f}"
        )
    hook.close()
    return losses


# ============================================================================= PyG gcn2_cora: GCNII


def _citation_graph(
    g: torch.Generator, n: int = 1000, classes: int = 7, features: int = 300
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A Cora-like citation graph: a stochastic block model (about 4 links per node, 70 % of
    them inside the class) and sparse binary bag-of-words features drawn from per-class word
    rates, row-normalized (PyG's `NormalizeFeatures`); returns the features, the undirected
    edge index and the labels."""
    y = torch.randint(0, classes, (n,), generator=g)
    src = torch.randint(0, n, (4 * n,), generator=g)
    same = torch.rand(4 * n, generator=g) < 0.7
    by_class = [torch.nonzero(y == c).flatten() for c in range(classes)]
    pick = torch.stack([bc[torch.randint(0, len(bc), (4 * n,), generator=g)] for bc in by_class])  # (C, 4n)
    dst = torch.where(same, pick[y[src], torch.arange(4 * n)], torch.randint(0, n, (4 * n,), generator=g))
    keep = src != dst
    edge_index = torch.cat([torch.stack([src[keep], dst[keep]]), torch.stack([dst[keep], src[keep]])], 1)
    rates = 0.02 + 0.03 * (torch.rand(classes, features, generator=g) < 0.15).float()
    x = (torch.rand(n, features, generator=g) < rates[y]).float()
    x = x / x.sum(1, keepdim=True).clamp(min=1)
    return x, edge_index, y


def _gcn_norm(edge_index: torch.Tensor, n: int) -> torch.Tensor:
    """PyG's `gcn_norm` with self-loops as a sparse `D^-1/2 (A + I) D^-1/2` (`T.GCNNorm()`)."""
    loops = torch.arange(n)
    row = torch.cat([edge_index[0], loops])
    col = torch.cat([edge_index[1], loops])
    adj = torch.sparse_coo_tensor(torch.stack([row, col]), torch.ones(len(row)), (n, n)).coalesce()
    deg = torch.sparse.sum(adj, 1).to_dense()
    r, c = adj.indices()
    return torch.sparse_coo_tensor(
        adj.indices(), adj.values() * deg[r].rsqrt() * deg[c].rsqrt(), (n, n)
    ).coalesce()


class _GCN2Conv(nn.Module):
    """PyG's `GCN2Conv` with shared weights: `(1 - beta) P + beta P W` of `P = (1 - alpha) A x +
    alpha x_0`, `beta = log(theta / layer + 1)`."""

    def __init__(self, channels: int, alpha: float, theta: float, layer: int) -> None:
        super().__init__()
        self.alpha = alpha
        self.beta = math.log(theta / layer + 1)
        self.weight1 = nn.Parameter(torch.empty(channels, channels))
        nn.init.xavier_uniform_(self.weight1)

    def forward(self, x: torch.Tensor, x_0: torch.Tensor, adj_t: torch.Tensor) -> torch.Tensor:
        x = torch.sparse.mm(adj_t, x) * (1 - self.alpha)
        x = x + self.alpha * x_0
        return x.mul(1 - self.beta) + self.beta * (x @ self.weight1)


class _GCNII(nn.Module):
    def __init__(
        self,
        in_channels: int,
        classes: int,
        hidden: int,
        num_layers: int,
        alpha: float,
        theta: float,
        dropout: float,
    ) -> None:
        super().__init__()
        self.lins = nn.ModuleList([nn.Linear(in_channels, hidden), nn.Linear(hidden, classes)])
        self.convs = nn.ModuleList(
            [_GCN2Conv(hidden, alpha, theta, layer + 1) for layer in range(num_layers)]
        )
        self.dropout = dropout

    def forward(self, x: torch.Tensor, adj_t: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, self.dropout, training=self.training)
        x = x_0 = self.lins[0](x).relu()
        for conv in self.convs:
            x = F.dropout(x, self.dropout, training=self.training)
            x = conv(x, x_0, adj_t)
            x = x.relu()
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.lins[1](x)
        return x.log_softmax(dim=-1)


def pyg_gcn2_cora_deep(path: str, epochs: int = 150, seed: int = 0, bug: str | None = None) -> list[float]:
    """PyG's `examples/gcn2_cora.py` (GCNII, Chen et al. 2020) on a Cora-like graph: 16
    `GCN2Conv` layers of width 64 with initial residual alpha 0.1 and identity mapping theta
    0.5, dropout 0.6, a linear layer in and out, `log_softmax` with `F.nll_loss` on the train
    mask (20 nodes per class), Adam 0.01 with weight decay 0.01 on the convolutions and 5e-4 on
    the linear layers as two parameter groups, full batch, and `test()` each epoch (train,
    validation and test accuracy, the test accuracy at the best validation kept)."""
    g = _seed(seed)
    n, classes = 1000, 7
    x, edge_index, y = _citation_graph(g, n, classes)
    if bug == "shuffled_labels":
        # bug: the labels come from a {paper_id: label} map read in sorted-id order, while the
        # feature rows and the adjacency follow the content file's order of the paper ids
        paper_ids = torch.randperm(100_000, generator=g)[:n]
        label_of = dict(zip(paper_ids.tolist(), y.tolist(), strict=True))
        y = torch.tensor([label_of[pid] for pid in sorted(label_of)])
    adj_t = _gcn_norm(edge_index, n)
    train_mask = torch.zeros(n, dtype=torch.bool)
    for c in range(classes):
        train_mask[torch.nonzero(y == c).flatten()[:20]] = True
    rest = torch.nonzero(~train_mask).flatten()
    val_mask = torch.zeros(n, dtype=torch.bool)
    val_mask[rest[:500]] = True
    test_mask = torch.zeros(n, dtype=torch.bool)
    test_mask[rest[500:]] = True
    model = _GCNII(x.shape[1], classes, hidden=64, num_layers=16, alpha=0.1, theta=0.5, dropout=0.6)
    optimizer = torch.optim.Adam(
        [dict(params=model.convs.parameters(), weight_decay=0.01), dict(params=model.lins.parameters(), weight_decay=5e-4)],
        lr=0.01,
    )  # fmt: skip
    hook = Hook(path)
    hook.register_module(model)

    def train() -> float:
        model.train()
        optimizer.zero_grad()
        out = model(x, adj_t)
        loss = F.nll_loss(out[train_mask], y[train_mask])
        loss.backward()
        optimizer.step()
        return float(loss)

    @torch.no_grad()
    def test() -> list[float]:
        model.eval()
        pred = model(x, adj_t).argmax(dim=-1)
        return [int((pred[m] == y[m]).sum()) / int(m.sum()) for m in (train_mask, val_mask, test_mask)]

    losses: list[float] = []
    best_val_acc = test_acc = 0.0
    for epoch in range(1, epochs + 1):
        loss = train()
        losses.append(loss)
        train_acc, val_acc, tmp_test_acc = test()
        if val_acc > best_val_acc:
            best_val_acc, test_acc = val_acc, tmp_test_acc
        if epoch % 25 == 0:
            print(f"Epoch: {epoch:04d}, Loss: {loss:.4f} Train: {train_acc:.4f}, Val: {val_acc:.4f}, "
                  f"Test: {tmp_test_acc:.4f}, Final Test: {test_acc:.4f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= Time-Series-Library: TimesNet


def _fft_for_period(x: torch.Tensor, k: int = 2) -> tuple[np.ndarray, torch.Tensor]:
    xf = torch.fft.rfft(x, dim=1)
    frequency_list = abs(xf).mean(0).mean(-1)
    frequency_list[0] = 0
    _, top_list = torch.topk(frequency_list, k)
    top_list = top_list.detach().cpu().numpy()
    period = x.shape[1] // top_list
    return period, abs(xf).mean(-1)[:, top_list]


class _InceptionBlockV1(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, num_kernels: int) -> None:
        super().__init__()
        self.kernels = nn.ModuleList(
            [
                nn.Conv2d(in_channels, out_channels, kernel_size=2 * i + 1, padding=i)
                for i in range(num_kernels)
            ]
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([kernel(x) for kernel in self.kernels], dim=-1).mean(-1)


class _TimesBlock(nn.Module):
    def __init__(
        self, seq_len: int, pred_len: int, d_model: int, d_ff: int, top_k: int, num_kernels: int
    ) -> None:
        super().__init__()
        self.seq_len, self.pred_len, self.k = seq_len, pred_len, top_k
        self.conv = nn.Sequential(
            _InceptionBlockV1(d_model, d_ff, num_kernels),
            nn.GELU(),
            _InceptionBlockV1(d_ff, d_model, num_kernels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, n = x.size()
        period_list, period_weight = _fft_for_period(x, self.k)
        res = []
        for i in range(self.k):
            period = int(period_list[i])
            total = self.seq_len + self.pred_len
            if total % period != 0:
                length = (total // period + 1) * period
                out = torch.cat([x, torch.zeros([b, length - total, n])], dim=1)
            else:
                length, out = total, x
            out = out.reshape(b, length // period, period, n).permute(0, 3, 1, 2).contiguous()
            out = self.conv(out)
            out = out.permute(0, 2, 3, 1).reshape(b, -1, n)
            res.append(out[:, :total, :])
        res_stack = torch.stack(res, dim=-1)
        period_weight = F.softmax(period_weight, dim=1).unsqueeze(1).unsqueeze(1).repeat(1, t, n, 1)
        return torch.sum(res_stack * period_weight, -1) + x


class _TimesNet(nn.Module):
    """TimesNet (Wu et al. 2023) as Time-Series-Library's `models/TimesNet.py` forecasts:
    the non-stationary normalization of the input window, a token embedding (circular
    convolution) plus positional and time-feature embeddings, `predict_linear` stretching the
    window to the horizon, TimesBlocks (the top-k FFT periods, the series folded into 2-D,
    Inception convolutions, a softmax of the amplitudes weighting the periods), a projection,
    the de-normalization."""

    def __init__(
        self, seq_len: int, pred_len: int, c_in: int, d_model: int = 16, d_ff: int = 32, e_layers: int = 2
    ) -> None:
        super().__init__()
        self.seq_len, self.pred_len = seq_len, pred_len
        self.token = nn.Conv1d(c_in, d_model, 3, padding=1, padding_mode="circular", bias=False)
        self.temporal = nn.Linear(2, d_model, bias=False)  # timeF: hour of day, day of week
        pe = torch.zeros(seq_len, d_model)
        position = torch.arange(seq_len).float()[:, None]
        div = torch.exp(torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model))
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
        self.register_buffer("pe", pe[None])
        self.dropout = nn.Dropout(0.1)
        self.model = nn.ModuleList(
            [_TimesBlock(seq_len, pred_len, d_model, d_ff, 3, 3) for _ in range(e_layers)]
        )
        self.predict_linear = nn.Linear(seq_len, pred_len + seq_len)
        self.layer_norm = nn.LayerNorm(d_model)
        self.projection = nn.Linear(d_model, c_in, bias=True)

    def forward(self, x_enc: torch.Tensor, x_mark_enc: torch.Tensor) -> torch.Tensor:
        means = x_enc.mean(1, keepdim=True).detach()
        x_enc = x_enc - means
        stdev = torch.sqrt(torch.var(x_enc, dim=1, keepdim=True, unbiased=False) + 1e-5)
        x_enc = x_enc / stdev
        enc_out = self.token(x_enc.permute(0, 2, 1)).transpose(1, 2) + self.pe + self.temporal(x_mark_enc)
        enc_out = self.dropout(enc_out)
        enc_out = self.predict_linear(enc_out.permute(0, 2, 1)).permute(0, 2, 1)
        for block in self.model:
            enc_out = self.layer_norm(block(enc_out))
        dec_out = self.projection(enc_out)
        dec_out = dec_out * stdev[:, 0, :].unsqueeze(1).repeat(1, self.pred_len + self.seq_len, 1)
        dec_out = dec_out + means[:, 0, :].unsqueeze(1).repeat(1, self.pred_len + self.seq_len, 1)
        return dec_out[:, -self.pred_len :, :]


def timesnet_long_term_forecast(path: str, train_epochs: int = 6, seed: int = 0) -> list[float]:
    """Time-Series-Library's `exp_long_term_forecasting.py` training TimesNet on an ETTh-like
    hourly series of 7 variables (daily and weekly cycles, a slow trend, noise; the target
    last), 16 weeks split 10/3/3 as ETTh splits 12/4/4 months, a `StandardScaler` fitted on the
    training part, windows of 48 hours forecasting 12, `nn.MSELoss`, Adam at `--learning_rate
    0.001`, `adjust_learning_rate` with `lradj type1` (halved after every epoch), `vali` on the
    validation split each epoch and `EarlyStopping` with patience 3 keeping the best
    checkpoint; d_model 16, d_ff 32, top_k 3, two layers, batches of 32."""
    g = _seed(seed)
    hours = 24 * 7 * 16
    t = torch.arange(hours).float()
    phase = torch.rand(7, generator=g) * 2 * math.pi
    amp = 0.5 + torch.rand(7, generator=g)
    series = (
        amp * torch.sin(2 * math.pi * t[:, None] / 24 + phase)
        + 0.5 * torch.sin(2 * math.pi * t[:, None] / 168 + 2 * phase)
        + 0.002 * t[:, None] * torch.randn(7, generator=g)
        + 0.3 * torch.randn(hours, 7, generator=g)
    )
    series[:, -1] = series[:, :-1].mean(1) + 0.2 * torch.randn(hours, generator=g)  # "OT"
    marks = torch.stack([(t % 24) / 23 - 0.5, (t // 24 % 7) / 6 - 0.5], 1)
    border = [0, 24 * 7 * 10, 24 * 7 * 13, hours]
    mean, std = series[: border[1]].mean(0), series[: border[1]].std(0)
    data = (series - mean) / std
    seq_len, pred_len = 48, 12

    def windows(lo: int, hi: int) -> tuple[torch.Tensor, ...]:
        starts = torch.arange(lo, hi - seq_len - pred_len + 1, 3)
        idx = starts[:, None] + torch.arange(seq_len + pred_len)
        return data[idx[:, :seq_len]], marks[idx[:, :seq_len]], data[idx[:, seq_len:]]

    train_x, train_m, train_y = windows(border[0], border[1])
    val_x, val_m, val_y = windows(border[1] - seq_len, border[2])
    model = _TimesNet(seq_len, pred_len, 7)
    learning_rate = 0.001
    model_optim = torch.optim.Adam(model.parameters(), lr=learning_rate)
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    best, best_state, counter = float("inf"), None, 0
    for epoch in range(train_epochs):
        model.train()
        perm = torch.randperm(len(train_x), generator=g)
        train_loss = []
        for i in range(0, len(perm) - 31, 32):
            idx = perm[i : i + 32]
            model_optim.zero_grad()
            outputs = model(train_x[idx], train_m[idx])
            loss = criterion(outputs, train_y[idx])
            train_loss.append(loss.item())
            loss.backward()
            model_optim.step()
        losses += train_loss
        model.eval()
        with torch.no_grad():
            vali_loss = criterion(model(val_x, val_m), val_y).item()
        print(f"Epoch: {epoch + 1} | Train Loss: {np.average(train_loss):.7f} Vali Loss: {vali_loss:.7f}")
        if vali_loss < best:
            best, best_state, counter = vali_loss, copy.deepcopy(model.state_dict()), 0
        else:
            counter += 1
            print(f"EarlyStopping counter: {counter} out of 3")
            if counter >= 3:
                print("Early stopping")
                break
        lr = learning_rate * (0.5 ** ((epoch + 1) - 1))
        for param_group in model_optim.param_groups:
            param_group["lr"] = lr
        print(f"Updating learning rate to {lr}")
    if best_state is not None:
        model.load_state_dict(best_state)
    hook.close()
    return losses


# ============================================================================= WeNet: hybrid CTC/attention


def _utterances(
    g: torch.Generator, n: int, vocab: int, feat: int = 20, fast: float = 0.0
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Synthetic speech: each utterance 4 to 12 tokens of `vocab` "phones", each phone a fixed
    log-mel-like 20-dim pattern held for 5 to 8 frames (1 to 2 for a fraction `fast` of
    utterances, clipped fast speech), with short pauses and noise; (features, token ids
    1..vocab)."""
    protos = torch.randn(vocab + 1, feat, generator=g)
    protos[0] = -2.0  # silence
    out = []
    for _ in range(n):
        tokens = torch.randint(1, vocab + 1, (int(torch.randint(4, 13, (1,), generator=g)),), generator=g)
        is_fast = bool(torch.rand(1, generator=g) < fast)
        frames = [protos[0].expand(3, -1)]
        for tok in tokens.tolist():
            dur = (
                int(torch.randint(1, 3, (1,), generator=g))
                if is_fast
                else int(torch.randint(5, 9, (1,), generator=g))
            )
            frames.append(protos[tok].expand(dur, -1))
            if torch.rand(1, generator=g) < 0.3:
                frames.append(protos[0].expand(2, -1))
        frames.append(protos[0].expand(3, -1))
        x = torch.cat(frames)
        out.append((x + 0.5 * torch.randn(x.shape, generator=g), tokens))
    return out


class _Conv2dSubsampling4(nn.Module):
    def __init__(self, idim: int, odim: int) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, odim, 3, 2), nn.ReLU(), nn.Conv2d(odim, odim, 3, 2), nn.ReLU())
        self.out = nn.Linear(odim * (((idim - 1) // 2 - 1) // 2), odim)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.conv(x.unsqueeze(1))
        b, c, t, f = x.size()
        return self.out(x.transpose(1, 2).contiguous().view(b, t, c * f)), ((lengths - 1) // 2 - 1) // 2


class _ASRModel(nn.Module):
    """WeNet's `ASRModel` shrunk: a Conv2dSubsampling4 front end and a transformer encoder, a
    CTC head, a transformer attention decoder, and `forward` returning WeNet's loss dict
    `{"loss", "loss_att", "loss_ctc"}` with `ctc_weight` 0.3 and label smoothing 0.1."""

    def __init__(self, vocab: int, idim: int = 20, d: int = 64, ctc_weight: float = 0.3) -> None:
        super().__init__()
        self.vocab_size = vocab + 2  # 0 blank, 1..vocab tokens, vocab + 1 <sos/eos>
        self.sos = self.eos = vocab + 1
        self.ignore_id = -1
        self.ctc_weight = ctc_weight
        self.embed = _Conv2dSubsampling4(idim, d)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, 0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.after_norm = nn.LayerNorm(d)
        self.ctc_lo = nn.Linear(d, self.vocab_size)
        self.ctc_loss = nn.CTCLoss(reduction="sum")  # WeNet's CTC: zero_infinity left at False
        self.dec_embed = nn.Embedding(self.vocab_size, d)
        dec_layer = nn.TransformerDecoderLayer(d, 4, 4 * d, 0.1, batch_first=True, norm_first=True)
        self.decoder = nn.TransformerDecoder(dec_layer, 1)
        self.output_layer = nn.Linear(d, self.vocab_size)
        self.register_buffer("pe", self._positions(512, d))

    @staticmethod
    def _positions(n: int, d: int) -> torch.Tensor:
        pe = torch.zeros(n, d)
        position = torch.arange(n).float()[:, None]
        div = torch.exp(torch.arange(0, d, 2).float() * -(math.log(10000.0) / d))
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
        return pe

    def encode(self, speech: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, enc_lens = self.embed(speech, lengths)
        x = x * math.sqrt(x.shape[-1]) + self.pe[: x.shape[1]]
        pad = torch.arange(x.shape[1])[None] >= enc_lens[:, None]
        return self.after_norm(self.encoder(x, src_key_padding_mask=pad)), enc_lens

    def forward(
        self,
        speech: torch.Tensor,
        speech_lengths: torch.Tensor,
        text: torch.Tensor,
        text_lengths: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        encoder_out, encoder_lens = self.encode(speech, speech_lengths)
        # CTC branch, as WeNet's CTC module: (T, B, V) log-probs, summed over the batch, / B
        ys_hat = self.ctc_lo(F.dropout(encoder_out, 0.1, self.training)).log_softmax(2).transpose(0, 1)
        targets = torch.cat([text[i, : text_lengths[i]] for i in range(len(text))])
        loss_ctc = self.ctc_loss(ys_hat, targets, encoder_lens, text_lengths) / ys_hat.size(1)
        # attention branch: <sos> + text -> text + <eos>, label smoothing, normalize by batch
        b, u = text.shape
        ys_in = torch.cat(
            [torch.full((b, 1), self.sos), text.masked_fill(text == self.ignore_id, self.eos)], 1
        )
        ys_out = torch.cat([text, torch.full((b, 1), self.ignore_id)], 1)
        ys_out[torch.arange(b), text_lengths] = self.eos
        y = self.dec_embed(ys_in) * math.sqrt(encoder_out.shape[-1]) + self.pe[: u + 1]
        causal = torch.triu(torch.ones(u + 1, u + 1, dtype=torch.bool), 1)
        mem_pad = torch.arange(encoder_out.shape[1])[None] >= encoder_lens[:, None]
        decoder_out = self.output_layer(
            self.decoder(y, encoder_out, tgt_mask=causal, memory_key_padding_mask=mem_pad)
        )
        valid = ys_out != self.ignore_id
        true_dist = torch.full_like(decoder_out, 0.1 / (self.vocab_size - 1))
        true_dist.scatter_(2, ys_out.clamp(min=0)[..., None], 0.9)
        kl = F.kl_div(torch.log_softmax(decoder_out, -1), true_dist, reduction="none").sum(-1)
        loss_att = kl.masked_fill(~valid, 0).sum() / b
        loss = self.ctc_weight * loss_ctc + (1 - self.ctc_weight) * loss_att
        return {"loss": loss, "loss_att": loss_att, "loss_ctc": loss_ctc}


def wenet_hybrid_ctc_attention(
    path: str, epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """WeNet's `train.py` / `Executor.train` on a shrunk `ASRModel`: hybrid CTC/attention
    (Watanabe et al. 2017, `ctc_weight` 0.3, label smoothing 0.1), the model returning its loss
    dict and `loss_dict["loss"] / accum_grad` backpropagated, gradients accumulated over 2 batches,
    `clip_grad_norm_(model.parameters(), 5)` and the step skipped when that norm is not finite,
    Adam 2e-3 under `WarmupLR` (200 warm-up steps, then the inverse square root), the
    dataset's length filter dropping utterances whose token count would outrun the 4-times
    subsampled frames, batches of 16 sorted by length within a buffer (`sort` in the
    pipeline), and a CV pass each epoch; 900 synthetic utterances of 20 phones, 6 % of them
    fast speech (1 or 2 frames a phone), the last 100 for CV."""
    g = _seed(seed)
    vocab = 20
    data = _utterances(g, 900, vocab, fast=0.06)
    if bug != "log_zero_nan":  # bug: the data pipeline written without WeNet's filter
        data = [(x, y) for x, y in data if len(y) <= ((len(x) - 1) // 2 - 1) // 2]
    train, cv = data[:-100], data[-100:]
    model = _ASRModel(vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    warmup = 200
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup**0.5 * min((s + 1) ** -0.5, (s + 1) * warmup**-1.5)
    )
    hook = Hook(path)
    hook.register_module(model)
    accum_grad, batch = 2, 16

    def collate(items: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, ...]:
        xs = nn.utils.rnn.pad_sequence([x for x, _ in items], batch_first=True)
        ys = nn.utils.rnn.pad_sequence([y for _, y in items], batch_first=True, padding_value=-1)
        return xs, torch.tensor([len(x) for x, _ in items]), ys, torch.tensor([len(y) for _, y in items])

    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(train), generator=g).tolist()
        batches = []
        for i in range(0, len(order), batch * 8):  # WeNet's `sort` over a buffer, then batches
            chunk = sorted(order[i : i + batch * 8], key=lambda k: len(train[k][0]))
            batches += [chunk[j : j + batch] for j in range(0, len(chunk), batch)]
        for batch_idx, ids in enumerate(batches):
            feats, feats_lengths, target, target_lengths = collate([train[k] for k in ids])
            loss_dict = model(feats, feats_lengths, target, target_lengths)
            loss = loss_dict["loss"] / accum_grad
            loss.backward()
            if batch_idx % accum_grad == 0:
                grad_norm = nn.utils.clip_grad_norm_(model.parameters(), 5.0)
                if torch.isfinite(grad_norm):  # WeNet skips a step whose gradient is not finite
                    optimizer.step()
                optimizer.zero_grad()
                scheduler.step()
            losses.append(loss_dict["loss"].item())
            if batch_idx % 20 == 0:
                print(f"TRAIN Batch {epoch}/{batch_idx} loss {loss_dict['loss'].item():.4f} "
                      f"loss_att {loss_dict['loss_att'].item():.4f} loss_ctc {loss_dict['loss_ctc'].item():.4f} "
                      f"lr {optimizer.param_groups[0]['lr']:.6f}")  # fmt: skip
        model.eval()
        with torch.no_grad():
            cv_loss = np.mean([model(*collate(cv[i : i + 20]))["loss"].item() for i in range(0, len(cv), 20)])
        print(f"Epoch {epoch} CV info cv_loss {cv_loss:.4f}")
    hook.close()
    return losses


# ============================================================================= ConvE: 1-N scoring


def _knowledge_graph(g: torch.Generator, entities: int, relations: int, types: int = 16) -> torch.Tensor:
    """Triples (head, relation, tail) over entities 1..`entities` (0 is padding) of `types`
    latent types: a relation maps each type to another by a fixed permutation, and links a
    head to the 3 entities of the target type nearest to it on a latent circle."""
    etype = torch.randint(0, types, (entities,), generator=g)
    angle = torch.rand(entities, generator=g) * 2 * math.pi
    triples = []
    for r in range(relations):
        mapping = torch.randperm(types, generator=g)
        shift = float(torch.rand(1, generator=g)) * 2 * math.pi
        for h in range(entities):
            cands = torch.nonzero(etype == mapping[etype[h]]).flatten()
            d = torch.remainder(angle[cands] - angle[h] - shift + math.pi, 2 * math.pi) - math.pi
            for t in cands[d.abs().argsort()[:3]].tolist():
                triples.append((h + 1, r, t + 1))
    return torch.tensor(triples)


class _ConvE(nn.Module):
    """ConvE (Dettmers et al. 2018) as its repository's `model.py` writes it: subject and
    relation embeddings reshaped to 2-D and stacked, BatchNorm, input dropout, a 3x3
    convolution, BatchNorm, ReLU, feature-map dropout, a projection back to the embedding size,
    hidden dropout, BatchNorm, ReLU, scores against every entity plus a bias, a sigmoid, and
    the model's own `self.loss = torch.nn.BCELoss()`."""

    def __init__(self, num_entities: int, num_relations: int, pretrained: torch.Tensor, freeze: bool) -> None:
        super().__init__()
        dim, self.d1, self.d2 = 32, 4, 8
        if freeze:  # bug: `from_pretrained`'s default `freeze=True` kept, the warm start meant to be trained
            self.emb_e = nn.Embedding.from_pretrained(pretrained, padding_idx=0)
        else:
            self.emb_e = nn.Embedding.from_pretrained(pretrained, freeze=False, padding_idx=0)
        self.emb_rel = nn.Embedding(num_relations, dim, padding_idx=0)
        nn.init.xavier_normal_(self.emb_rel.weight.data)
        self.inp_drop = nn.Dropout(0.2)
        self.hidden_drop = nn.Dropout(0.3)
        self.feature_map_drop = nn.Dropout2d(0.2)
        self.loss = nn.BCELoss()
        self.conv1 = nn.Conv2d(1, 32, (3, 3), 1, 0, bias=True)
        self.bn0 = nn.BatchNorm2d(1)
        self.bn1 = nn.BatchNorm2d(32)
        self.bn2 = nn.BatchNorm1d(dim)
        self.b = nn.Parameter(torch.zeros(num_entities))
        self.fc = nn.Linear(32 * (2 * self.d1 - 2) * (self.d2 - 2), dim)

    def forward(self, e1: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
        e1_embedded = self.emb_e(e1).view(-1, 1, self.d1, self.d2)
        rel_embedded = self.emb_rel(rel).view(-1, 1, self.d1, self.d2)
        stacked_inputs = torch.cat([e1_embedded, rel_embedded], 2)
        x = self.inp_drop(self.bn0(stacked_inputs))
        x = self.feature_map_drop(F.relu(self.bn1(self.conv1(x))))
        x = x.view(x.shape[0], -1)
        x = F.relu(self.bn2(self.hidden_drop(self.fc(x))))
        x = torch.mm(x, self.emb_e.weight.transpose(1, 0))
        x += self.b.expand_as(x)
        return torch.sigmoid(x)


def conve_one_to_n_scoring(path: str, epochs: int = 12, seed: int = 0, bug: str | None = None) -> list[float]:
    """ConvE's `main.py` training loop: reciprocal relations added, 1-N scoring (each
    (subject, relation) pair scored against all entities with a multi-hot target), label
    smoothing 0.1 as `((1 - eps) * e2_multi) + (1 / num_entities)`, `model.loss(pred,
    e2_multi)`, Adam 0.003, batches of 64; entity embeddings warm-started from a truncated SVD
    of the training adjacency through `nn.Embedding.from_pretrained(..., freeze=False)`; a
    filtered MRR and Hits@10 on held-out triples every 4 epochs. 400 entities, 6 relations
    (12 with the reciprocals)."""
    g = _seed(seed)
    entities, relations = 400, 6
    triples = _knowledge_graph(g, entities, relations)
    triples = triples[torch.randperm(len(triples), generator=g)]
    test, train = triples[:300], triples[300:]
    reciprocal = torch.stack([train[:, 2], train[:, 1] + relations, train[:, 0]], 1)
    train = torch.cat([train, reciprocal])
    num_e, num_r = entities + 1, 2 * relations + 1
    train[:, 1] += 1  # relation 0 is padding as in the repository's vocabulary
    test = test.clone()
    test[:, 1] += 1
    pairs: dict[tuple[int, int], list[int]] = {}
    for h, r, t in train.tolist():
        pairs.setdefault((h, r), []).append(t)
    keys = torch.tensor(list(pairs))
    adj = torch.zeros(num_e, num_e)
    adj[train[:, 0], train[:, 2]] = 1.0
    u, s, _ = torch.linalg.svd(adj)
    pretrained = u[:, :32] * s[:32].sqrt()
    pretrained[0] = 0
    model = _ConvE(num_e, num_r, pretrained, freeze=bug == "frozen_by_mistake")
    opt = torch.optim.Adam(model.parameters(), lr=0.003, weight_decay=0.0)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(model.loss)
    all_true: dict[tuple[int, int], set[int]] = {k: set(v) for k, v in pairs.items()}
    for h, r, t in test.tolist():
        all_true.setdefault((h, r), set()).add(t)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(keys), generator=g)
        for i in range(0, len(perm), 64):
            batch = keys[perm[i : i + 64]]
            e2_multi = torch.zeros(len(batch), num_e)
            for row, (h, r) in enumerate(batch.tolist()):
                e2_multi[row, pairs[(h, r)]] = 1.0
            e2_multi = ((1.0 - 0.1) * e2_multi) + (1.0 / e2_multi.size(1))
            opt.zero_grad()
            pred = model(batch[:, 0], batch[:, 1])
            loss = model.loss(pred, e2_multi)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if epoch % 4 == 3:
            model.eval()
            with torch.no_grad():
                pred = model(test[:, 0], test[:, 1])
                for row, (h, r, t) in enumerate(test.tolist()):
                    target = pred[row, t].item()
                    pred[row, list(all_true[(h, r)])] = 0.0
                    pred[row, t] = target
                pred[:, 0] = 0.0
                ranks = 1 + (pred > pred[torch.arange(len(test)), test[:, 2]][:, None]).sum(1).float()
            print(f"epoch {epoch} loss {np.mean(losses[-20:]):.5f} MRR {(1 / ranks).mean():.3f} "
                  f"Hits@10 {(ranks <= 10).float().mean():.3f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= NVIDIA tacotron2


def _text_mel_pairs(
    g: torch.Generator, n: int, symbols: int = 24, n_mel: int = 20
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Synthetic text-to-speech pairs: 4 to 8 symbols of `symbols` (0 padding), each with
    its own mel pattern and a fixed duration of 2 or 3 frames, smoothed over neighbouring
    frames, with noise; mel values on tacotron2's log scale (about -4..2)."""
    protos = torch.randn(symbols, n_mel, generator=g)
    durations = torch.randint(2, 4, (symbols,), generator=g)
    out = []
    for _ in range(n):
        text = torch.randint(1, symbols, (int(torch.randint(4, 9, (1,), generator=g)),), generator=g)
        frames = torch.cat([protos[c].expand(int(durations[c]), -1) for c in text.tolist()])
        kernel = torch.tensor([0.25, 0.5, 0.25])
        smooth = F.conv1d(F.pad(frames.T[:, None], (1, 1), mode="replicate"), kernel.view(1, 1, 3))[:, 0].T
        out.append((text, smooth - 1.0 + 0.1 * torch.randn(smooth.shape, generator=g)))
    return out


class _LocationSensitiveAttention(nn.Module):
    def __init__(
        self, rnn_dim: int, emb_dim: int, att_dim: int = 32, filters: int = 8, kernel: int = 15
    ) -> None:
        super().__init__()
        self.query_layer = nn.Linear(rnn_dim, att_dim, bias=False)
        self.memory_layer = nn.Linear(emb_dim, att_dim, bias=False)
        self.v = nn.Linear(att_dim, 1, bias=False)
        self.location_conv = nn.Conv1d(2, filters, kernel, padding=kernel // 2, bias=False)
        self.location_dense = nn.Linear(filters, att_dim, bias=False)

    def forward(
        self, query: torch.Tensor, memory: torch.Tensor, processed_memory: torch.Tensor, weights_cat: torch.Tensor,
        mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        location = self.location_dense(self.location_conv(weights_cat).transpose(1, 2))
        energies = self.v(torch.tanh(self.query_layer(query)[:, None] + location + processed_memory)).squeeze(
            -1
        )
        energies = energies.masked_fill(mask, -float("inf"))
        weights = F.softmax(energies, dim=1)
        return torch.bmm(weights[:, None], memory).squeeze(1), weights


class _Tacotron2(nn.Module):
    """NVIDIA's tacotron2 `model.py` shrunk: an encoder of three convolutions (BatchNorm, ReLU,
    dropout 0.5) and a BiLSTM, a decoder with a prenet (ReLU, dropout 0.5 kept on at
    inference as in the repository), an attention LSTM, location-sensitive attention, a
    decoder LSTM with dropout 0.1, linear mel and gate projections, and a postnet of three
    convolutions (BatchNorm, tanh, dropout 0.5) added to the mel."""

    def __init__(self, symbols: int = 24, n_mel: int = 20, emb: int = 64, rnn: int = 128) -> None:
        super().__init__()
        self.n_mel, self.rnn = n_mel, rnn
        self.embedding = nn.Embedding(symbols, emb)
        self.convolutions = nn.ModuleList(
            [nn.Sequential(nn.Conv1d(emb, emb, 5, padding=2), nn.BatchNorm1d(emb)) for _ in range(3)]
        )
        self.lstm = nn.LSTM(emb, emb // 2, batch_first=True, bidirectional=True)
        self.prenet = nn.ModuleList([nn.Linear(n_mel, 64, bias=False), nn.Linear(64, 64, bias=False)])
        self.attention_rnn = nn.LSTMCell(64 + emb, rnn)
        self.attention_layer = _LocationSensitiveAttention(rnn, emb)
        self.decoder_rnn = nn.LSTMCell(rnn + emb, rnn)
        self.linear_projection = nn.Linear(rnn + emb, n_mel)
        self.gate_layer = nn.Linear(rnn + emb, 1)
        post = [nn.Sequential(nn.Conv1d(n_mel, 64, 5, padding=2), nn.BatchNorm1d(64))]
        post += [nn.Sequential(nn.Conv1d(64, 64, 5, padding=2), nn.BatchNorm1d(64))]
        post += [nn.Sequential(nn.Conv1d(64, n_mel, 5, padding=2), nn.BatchNorm1d(n_mel))]
        self.postnet = nn.ModuleList(post)

    def encode(self, text: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = self.embedding(text).transpose(1, 2)
        for conv in self.convolutions:
            x = F.dropout(F.relu(conv(x)), 0.5, self.training)
        packed = nn.utils.rnn.pack_padded_sequence(x.transpose(1, 2), lengths, batch_first=True)
        out, _ = self.lstm(packed)
        return nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0]

    def forward(
        self, text: torch.Tensor, text_lengths: torch.Tensor, mels: torch.Tensor, output_lengths: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        memory = self.encode(text, text_lengths)
        b, t_in, _ = memory.shape
        mask = torch.arange(t_in)[None] >= text_lengths[:, None]
        processed = self.attention_layer.memory_layer(memory)
        go = torch.zeros(b, 1, self.n_mel)
        prenet_in = torch.cat([go, mels.transpose(1, 2)[:, :-1]], 1)  # teacher forcing
        for linear in self.prenet:
            prenet_in = F.dropout(F.relu(linear(prenet_in)), p=0.5, training=True)
        att_h = att_c = dec_h = dec_c = memory.new_zeros(b, self.rnn)
        weights = cum = memory.new_zeros(b, t_in)
        context = memory.new_zeros(b, memory.shape[2])
        mel_outputs, gate_outputs, alignments = [], [], []
        for t in range(mels.shape[2]):
            att_h, att_c = self.attention_rnn(torch.cat([prenet_in[:, t], context], -1), (att_h, att_c))
            att_h = F.dropout(att_h, 0.1, self.training)
            context, weights = self.attention_layer(
                att_h, memory, processed, torch.stack([weights, cum], 1), mask
            )
            cum = cum + weights
            dec_h, dec_c = self.decoder_rnn(torch.cat([att_h, context], -1), (dec_h, dec_c))
            dec_h = F.dropout(dec_h, 0.1, self.training)
            hidden = torch.cat([dec_h, context], -1)
            mel_outputs.append(self.linear_projection(hidden))
            gate_outputs.append(self.gate_layer(hidden).squeeze(1))
            alignments.append(weights)
        mel_out = torch.stack(mel_outputs, 2)
        x = mel_out
        for i, conv in enumerate(self.postnet):
            x = conv(x)
            x = F.dropout(torch.tanh(x) if i < len(self.postnet) - 1 else x, 0.5, self.training)
        mel_out_postnet = mel_out + x
        pad = torch.arange(mels.shape[2])[None] >= output_lengths[:, None]  # mask_padding
        mel_out = mel_out.masked_fill(pad[:, None], 0.0)
        mel_out_postnet = mel_out_postnet.masked_fill(pad[:, None], 0.0)
        gate_out = torch.stack(gate_outputs, 1).masked_fill(pad, 1e3)
        return mel_out, mel_out_postnet, gate_out, torch.stack(alignments, 1)


class _Tacotron2Loss(nn.Module):
    def forward(
        self, model_output: tuple[torch.Tensor, ...], targets: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        mel_target, gate_target = targets[0], targets[1]
        mel_target.requires_grad = False
        gate_target.requires_grad = False
        gate_target = gate_target.view(-1, 1)
        mel_out, mel_out_postnet, gate_out, _ = model_output
        gate_out = gate_out.view(-1, 1)
        mel_loss = nn.MSELoss()(mel_out, mel_target) + nn.MSELoss()(mel_out_postnet, mel_target)
        gate_loss = nn.BCEWithLogitsLoss()(gate_out, gate_target)
        return mel_loss + gate_loss


def tacotron2_mel_postnet_gate(
    path: str, epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """NVIDIA/tacotron2's `train.py` on a shrunk model: `TextMelCollate` (a batch sorted by
    text length, mels padded with zeros, the gate target 1 from the last frame on),
    teacher-forced decoding, `Tacotron2Loss` (the MSE of the mel before and after the postnet
    plus the gate's BCE with logits), Adam 1e-3 with weight decay 1e-6, `clip_grad_norm_` at
    1.0, batches of 16, and `validate()` every 20 iterations (`model.eval()`, the validation
    loss under `torch.no_grad()`, `model.train()` again)."""
    g = _seed(seed)
    pairs = _text_mel_pairs(g, 528)
    train, val = pairs[:480], pairs[480:]
    model = _Tacotron2()
    criterion = _Tacotron2Loss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-6)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)

    def text_mel_collate(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[Any, Any]:
        batch = sorted(batch, key=lambda p: len(p[0]), reverse=True)
        input_lengths = torch.tensor([len(t) for t, _ in batch])
        text_padded = nn.utils.rnn.pad_sequence([t for t, _ in batch], batch_first=True)
        output_lengths = torch.tensor([len(m) for _, m in batch])
        max_target_len = int(output_lengths.max())
        mel_padded = torch.zeros(len(batch), 20, max_target_len)
        gate_padded = torch.zeros(len(batch), max_target_len)
        for i, (_, mel) in enumerate(batch):
            mel_padded[i, :, : len(mel)] = mel.T
            gate_padded[i, len(mel) - 1 :] = 1
        x = (text_padded, input_lengths, mel_padded, output_lengths)
        return x, (mel_padded, gate_padded)

    def validate() -> float:
        model.eval()
        with torch.no_grad():
            val_loss = 0.0
            for i in range(0, len(val), 16):
                x, y = text_mel_collate(val[i : i + 16])
                val_loss += criterion(model(*x), y).item()
        if bug != "train_in_eval_mode":  # bug: validate() written without the model.train() at its end
            model.train()
        return val_loss / math.ceil(len(val) / 16)

    losses: list[float] = []
    iteration = 0
    model.train()
    for _epoch in range(epochs):
        perm = torch.randperm(len(train), generator=g).tolist()
        for i in range(0, len(perm), 16):
            x, y = text_mel_collate([train[k] for k in perm[i : i + 16]])
            model.zero_grad()
            y_pred = model(*x)
            loss = criterion(y_pred, y)
            loss.backward()
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
            iteration += 1
            if iteration % 20 == 0:
                print(f"Train loss {iteration} {loss.item():.6f} Grad Norm {float(grad_norm):.6f} "
                      f"Validation loss {validate():.6f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= pytorch-metric-learning: semi-hard triplets


class _TripletMarginLoss(nn.Module):
    """pytorch-metric-learning's `TripletMarginLoss(margin, distance=CosineSimilarity(),
    reducer=ThresholdReducer(low=0))` over the triplets a miner gives: `relu(s_an - s_ap +
    margin)` averaged over the triplets whose loss is above 0."""

    def __init__(self, margin: float) -> None:
        super().__init__()
        self.margin = margin

    def forward(
        self, embeddings: torch.Tensor, labels: torch.Tensor, indices_tuple: tuple[torch.Tensor, ...]
    ) -> torch.Tensor:
        a, p, n = indices_tuple
        emb = F.normalize(embeddings, dim=1)
        sim = emb @ emb.T
        losses = F.relu(sim[a, n] - sim[a, p] + self.margin)
        positive = losses > 0
        if not positive.any():
            return (embeddings * 0).sum()
        return losses[positive].mean()


def _semihard_miner(
    embeddings: torch.Tensor, labels: torch.Tensor, margin: float
) -> tuple[torch.Tensor, ...]:
    """`TripletMarginMiner(margin, type_of_triplets="semihard", distance=CosineSimilarity())`:
    all (anchor, positive, negative) triplets of the batch with `s_ap - margin < s_an <=
    s_ap`."""
    with torch.no_grad():
        emb = F.normalize(embeddings, dim=1)
        sim = emb @ emb.T
        same = labels[:, None] == labels[None]
        eye = torch.eye(len(labels), dtype=torch.bool)
        pos = same & ~eye
        neg = ~same
        s_ap = sim[:, :, None]  # (a, p, 1)
        s_an = sim[:, None, :]  # (a, 1, n)
        valid = pos[:, :, None] & neg[:, None, :] & (s_an <= s_ap) & (s_an > s_ap - margin)
        a, p, n = torch.nonzero(valid, as_tuple=True)
    return a, p, n


def pml_trunk_embedder_semihard_triplets(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Metric learning as pytorch-metric-learning's trainers run it, written out: a convolutional
    `trunk` and an MLP `embedder` (to 64 dimensions) with their own optimizers (Adam 1e-4 and
    1e-3, weight decay 1e-4), an `MPerClassSampler` (m=4: 16 classes of 4 images per batch), the
    `TripletMarginMiner(margin=0.2, type_of_triplets="semihard")` and `TripletMarginLoss(margin
    =0.1)` on cosine similarity with a `ThresholdReducer(low=0)`, the number of mined triplets
    logged, and the `AccuracyCalculator`'s precision@1 on 8 classes never trained on after each
    epoch; 16x16 RGB glyphs of 40 classes. The loss, an average over the triplets still violating
    the margin among those mined, stays about level while the mined triplets thin out."""
    g = _seed(seed)
    images, labels = _rgb_glyphs(g, 4000, 40)
    x = (images.float() / 255.0 - 0.5) / 0.5
    seen = labels < 32
    xtr, ytr, xte, yte = x[seen], labels[seen], x[~seen], labels[~seen]
    trunk = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )  # fmt: skip
    embedder = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64))
    trunk_optimizer = torch.optim.Adam(trunk.parameters(), lr=1e-4, weight_decay=1e-4)
    embedder_optimizer = torch.optim.Adam(embedder.parameters(), lr=1e-3, weight_decay=1e-4)
    loss_func = _TripletMarginLoss(margin=0.1)
    hook = Hook(path)
    hook.register_module(trunk, name="trunk")
    hook.register_module(embedder, name="embedder")
    hook.register_loss(loss_func)
    by_class = {c: torch.nonzero(ytr == c).flatten() for c in range(32)}

    def m_per_class_batches() -> list[torch.Tensor]:
        """`MPerClassSampler(labels, m=4, batch_size=64, length_before_new_iter=len(dataset))`."""
        out = []
        for _ in range(len(ytr) // 64):
            classes = torch.randperm(32, generator=g)[:16].tolist()
            out.append(
                torch.cat([by_class[c][torch.randperm(len(by_class[c]), generator=g)[:4]] for c in classes])
            )
        return out

    def precision_at_1() -> float:
        trunk.eval()
        embedder.eval()
        with torch.no_grad():
            emb = F.normalize(embedder(trunk(xte)), dim=1)
            sim = emb @ emb.T
            sim.fill_diagonal_(-2.0)
            return (yte[sim.argmax(1)] == yte).float().mean().item()

    losses: list[float] = []
    print(f"precision@1 before training {precision_at_1():.3f}")
    for epoch in range(epochs):
        trunk.train()
        embedder.train()
        for batch_idx, idx in enumerate(m_per_class_batches()):
            data, batch_labels = xtr[idx], ytr[idx]
            trunk_optimizer.zero_grad()
            if bug != "no_zero_grad":  # bug: only the trunk's optimizer zeroed, the embedder's forgotten
                embedder_optimizer.zero_grad()
            embeddings = embedder(trunk(data))
            indices_tuple = _semihard_miner(embeddings, batch_labels, margin=0.2)
            loss = loss_func(embeddings, batch_labels, indices_tuple)
            loss.backward()
            trunk_optimizer.step()
            embedder_optimizer.step()
            losses.append(loss.item())
            if batch_idx % 20 == 0:
                print(f"Epoch {epoch} Iteration {batch_idx}: Loss = {loss.item():.4f}, "
                      f"Number of mined triplets = {len(indices_tuple[0])}")  # fmt: skip
        print(f"Test set accuracy (Precision@1) = {precision_at_1():.3f}")
    hook.close()
    return losses


# ============================================================================= fastai: tabular_learner, fit_one_cycle


def _emb_sz_rule(n_cat: int) -> int:
    """fastai's rule of thumb for an embedding's width."""
    return min(600, round(1.6 * n_cat**0.56))


class _LinBnDrop(nn.Sequential):
    """fastai's `LinBnDrop` (`lin_first=True` as `TabularModel` builds it): Linear, activation,
    BatchNorm, Dropout."""

    def __init__(
        self, n_in: int, n_out: int, bn: bool = True, p: float = 0.0, act: nn.Module | None = None
    ) -> None:
        layers: list[nn.Module] = [nn.Linear(n_in, n_out, bias=not bn)]
        if act is not None:
            layers.append(act)
        if bn:
            layers.append(nn.BatchNorm1d(n_out))
        if p:
            layers.append(nn.Dropout(p))
        super().__init__(*layers)


class _TabularModel(nn.Module):
    """fastai's `TabularModel`: an embedding per categorical column (width by `emb_sz_rule`),
    embedding dropout, BatchNorm of the continuous columns, `LinBnDrop` layers with `act_cls`,
    a final linear layer."""

    def __init__(
        self, emb_szs: list[tuple[int, int]], n_cont: int, out_sz: int, layers: list[int], embed_p: float = 0.0,
        use_bn: bool = True, act_cls: nn.Module | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        act_cls = act_cls if act_cls is not None else nn.ReLU(inplace=True)
        self.embeds = nn.ModuleList([nn.Embedding(ni, nf) for ni, nf in emb_szs])
        self.emb_drop = nn.Dropout(embed_p)
        self.bn_cont = nn.BatchNorm1d(n_cont)
        n_emb = sum(nf for _, nf in emb_szs)
        sizes = [n_emb + n_cont, *layers, out_sz]
        actns = [act_cls for _ in range(len(sizes) - 2)] + [None]
        _layers = [
            _LinBnDrop(sizes[i], sizes[i + 1], bn=use_bn and i != len(actns) - 1, act=a)
            for i, a in enumerate(actns)
        ]
        self.layers = nn.Sequential(*_layers)

    def forward(self, x_cat: torch.Tensor, x_cont: torch.Tensor) -> torch.Tensor:
        x = torch.cat([e(x_cat[:, i]) for i, e in enumerate(self.embeds)], 1)
        x = self.emb_drop(x)
        x = torch.cat([x, self.bn_cont(x_cont)], 1)
        return self.layers(x)


def fastai_tabular_fit_one_cycle(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """fastai's `tabular_learner(dls, layers=[200, 100], metrics=accuracy).fit_one_cycle(5,
    1e-2)` on an adult-census-like table, written out in PyTorch: `Categorify` (codes from 1,
    0 for unseen), `FillMissing` (the median, plus an `_na` flag column as a category),
    `Normalize` of the continuous columns, `TabularModel` (embeddings by `emb_sz_rule`,
    BatchNorm of the continuous inputs, `LinBnDrop` ReLU layers), `CrossEntropyLossFlat`, and
    `fit_one_cycle`'s schedule: the lr warmed up from lr/25 along a cosine over the first 25 %
    and annealed to lr/1e5, Adam's beta1 cycled 0.95 -> 0.85 -> 0.95 the other way, true weight
    decay 0.01, eps 1e-5, batches of 64; the validation loss and accuracy after each epoch."""
    g = _seed(seed)
    n = 6000
    card = [
        9,
        16,
        7,
        15,
        6,
        5,
        2,
    ]  # workclass, education, marital-status, occupation, relationship, race, sex
    cats = torch.stack([torch.randint(0, c, (n,), generator=g) for c in card], 1)
    age = 18 + 60 * torch.rand(n, generator=g) ** 1.3
    fnlwgt = torch.exp(12 + 0.5 * torch.randn(n, generator=g))
    edu_num = cats[:, 1].float() + torch.randn(n, generator=g)
    effects = [0.5 * torch.randn(c, generator=g) for c in card]
    logit = sum(e[cats[:, i]] for i, e in enumerate(effects)) + 0.04 * (age - 40) + 0.15 * (edu_num - 8)
    logit = logit + 0.8 * (cats[:, 2] == 1).float() * (age > 35).float() - 1.0
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).long()
    age[torch.rand(n, generator=g) < 0.05] = float("nan")  # missing ages
    cont = torch.stack([age, fnlwgt, edu_num], 1)
    split = int(0.8 * n)
    # FillMissing, Categorify, Normalize (statistics of the training rows)
    na = torch.isnan(cont[:, 0])
    cont[:, 0] = torch.where(na, cont[:split, 0].nanmedian(), cont[:, 0])
    x_cat = torch.cat([cats + 1, (na.long() + 1)[:, None]], 1)
    mean, std = cont[:split].mean(0), cont[:split].std(0)
    x_cont = (cont - mean) / std
    emb_szs = [(c + 1, _emb_sz_rule(c + 1)) for c in card] + [(3, _emb_sz_rule(3))]
    if bug == "deep_sigmoid":  # bug: a "deeper" config with sigmoid units and BatchNorm off
        model = _TabularModel(emb_szs, 3, 2, [100] * 8, use_bn=False, act_cls=nn.Sigmoid())
    else:
        model = _TabularModel(emb_szs, 3, 2, [200, 100])
    loss_func = nn.CrossEntropyLoss()  # CrossEntropyLossFlat
    lr_max, wd, batch = 1e-2, 0.01, 64
    opt = torch.optim.AdamW(model.parameters(), lr=lr_max / 25, betas=(0.95, 0.99), eps=1e-5, weight_decay=wd)
    steps_per_epoch = split // batch
    total = epochs * steps_per_epoch
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_func)

    def combined_cos(pct: float, start: float, middle: float, end: float) -> float:
        if pct < 0.25:
            p = pct / 0.25
            return start + (middle - start) * (1 - math.cos(math.pi * p)) / 2
        p = (pct - 0.25) / 0.75
        return middle + (end - middle) * (1 - math.cos(math.pi * p)) / 2

    losses: list[float] = []
    it = 0
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(split, generator=g)
        for i in range(steps_per_epoch):
            idx = perm[i * batch : (i + 1) * batch]
            pct = it / total
            for group in opt.param_groups:
                group["lr"] = combined_cos(pct, lr_max / 25, lr_max, lr_max / 1e5)
                group["betas"] = (combined_cos(pct, 0.95, 0.85, 0.95), 0.99)
            loss = loss_func(model(x_cat[idx], x_cont[idx]), y[idx])
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
            it += 1
        model.eval()
        with torch.no_grad():
            out = model(x_cat[split:], x_cont[split:])
            valid_loss = loss_func(out, y[split:]).item()
            acc = (out.argmax(1) == y[split:]).float().mean().item()
        print(
            f"epoch {epoch} train_loss {np.mean(losses[-steps_per_epoch:]):.6f} valid_loss {valid_loss:.6f} accuracy {acc:.6f}"
        )
    hook.close()
    return losses


# ============================================================================= residual vector quantization codec


class _EuclideanCodebook(nn.Module):
    """vector-quantize-pytorch's `EuclideanCodebook` with EMA updates: nearest code, cluster
    sizes and code sums by exponential moving averages (decay 0.99) with Laplace smoothing,
    codes used less than `threshold_ema_dead_code` times replaced by random inputs of the
    batch."""

    def __init__(
        self, dim: int, codebook_size: int, decay: float = 0.99, eps: float = 1e-5, dead: float = 2.0
    ) -> None:
        super().__init__()
        self.decay, self.eps, self.dead, self.codebook_size = decay, eps, dead, codebook_size
        embed = torch.randn(codebook_size, dim) * 0.1
        self.register_buffer("embed", embed)
        self.register_buffer("embed_avg", embed.clone())
        self.register_buffer("cluster_size", torch.ones(codebook_size))

    def forward(self, x: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        flatten = x.reshape(-1, x.shape[-1])
        dist = -(torch.cdist(flatten, self.embed) ** 2)
        embed_ind = dist.argmax(dim=-1)
        quantize = self.embed[embed_ind].view_as(x)
        if self.training:
            with torch.no_grad():
                onehot = F.one_hot(embed_ind, self.codebook_size).type(flatten.dtype)
                self.cluster_size.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
                self.embed_avg.mul_(self.decay).add_(onehot.T @ flatten, alpha=1 - self.decay)
                total = self.cluster_size.sum()
                smoothed = (self.cluster_size + self.eps) / (total + self.codebook_size * self.eps) * total
                self.embed.copy_(self.embed_avg / smoothed[:, None])
                expired = self.cluster_size < self.dead
                if expired.any():
                    pick = torch.randint(0, len(flatten), (int(expired.sum()),), generator=g)
                    self.embed[expired] = flatten[pick].detach()
                    self.embed_avg[expired] = flatten[pick].detach() * self.dead
                    self.cluster_size[expired] = self.dead
        return quantize, embed_ind.view(x.shape[:-1])


class _ResidualVQ(nn.Module):
    """vector-quantize-pytorch's `ResidualVQ(num_quantizers=4, codebook_size=64,
    commitment_weight=1.0, quantize_dropout=True)`: each quantizer codes what the previous
    left, straight-through gradients, a commitment loss per layer; in training a random number
    of quantizers is kept for the whole batch (SoundStream's quantizer dropout)."""

    def __init__(self, dim: int, num_quantizers: int = 4, codebook_size: int = 64) -> None:
        super().__init__()
        self.layers = nn.ModuleList([_EuclideanCodebook(dim, codebook_size) for _ in range(num_quantizers)])

    def forward(self, x: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        keep = len(self.layers)
        if self.training:
            keep = int(torch.randint(1, len(self.layers) + 1, (1,), generator=g))
        residual, quantized_out = x, torch.zeros_like(x)
        commit = x.new_zeros(())
        for layer in self.layers[:keep]:
            quantize, _ = layer(residual, g)
            commit = commit + F.mse_loss(quantize.detach(), residual)
            quantized = residual + (quantize - residual).detach()
            residual = residual - quantize.detach()
            quantized_out = quantized_out + quantized
        return quantized_out, commit


class _Codec(nn.Module):
    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv1d(1, 32, 7, padding=3), nn.ELU(),
            nn.Conv1d(32, 32, 4, stride=2, padding=1), nn.ELU(),
            nn.Conv1d(32, 64, 4, stride=2, padding=1), nn.ELU(),
            nn.Conv1d(64, 64, 8, stride=4, padding=2), nn.ELU(),
            nn.Conv1d(64, dim, 3, padding=1),
        )  # fmt: skip
        self.quantizer = _ResidualVQ(dim)
        self.decoder = nn.Sequential(
            nn.Conv1d(dim, 64, 3, padding=1), nn.ELU(),
            nn.ConvTranspose1d(64, 64, 8, stride=4, padding=2), nn.ELU(),
            nn.ConvTranspose1d(64, 32, 4, stride=2, padding=1), nn.ELU(),
            nn.ConvTranspose1d(32, 32, 4, stride=2, padding=1), nn.ELU(),
            nn.Conv1d(32, 1, 7, padding=3),
        )  # fmt: skip

    def forward(self, x: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.encoder(x).transpose(1, 2)
        q, commit = self.quantizer(z, g)
        return self.decoder(q.transpose(1, 2)), commit


def _tones(g: torch.Generator, n: int, length: int = 512, sr: int = 8000) -> torch.Tensor:
    """Harmonic notes: one or two notes per clip, f0 between 110 and 440 Hz, 1 to 4 harmonics
    falling off, an attack-decay envelope, a little noise; (n, 1, length)."""
    t = torch.arange(length) / sr
    out = torch.zeros(n, length)
    for k in range(2):
        f0 = 110 * 2 ** (2 * torch.rand(n, 1, generator=g))
        present = (torch.rand(n, 1, generator=g) < (1.0 if k == 0 else 0.5)).float()
        onset = torch.rand(n, 1, generator=g) * 0.02
        env = torch.clamp((t - onset) / 0.01, 0, 1) * torch.exp(-torch.clamp(t - onset, min=0) * 16)
        note = sum(torch.sin(2 * math.pi * h * f0 * t + h) / h**1.5 for h in range(1, 5))
        out += present * 0.4 * env * note
    return (out + 0.005 * torch.randn(n, length, generator=g))[:, None]


def _multi_scale_stft_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = x.new_zeros(())
    for n_fft in (64, 128, 256):
        window = torch.hann_window(n_fft)
        sx = torch.stft(x[:, 0], n_fft, n_fft // 4, window=window, return_complex=True).abs()
        sy = torch.stft(y[:, 0], n_fft, n_fft // 4, window=window, return_complex=True).abs()
        loss = loss + F.l1_loss(sx, sy) + F.l1_loss(sx.clamp(min=1e-5).log(), sy.clamp(min=1e-5).log())
    return loss / 3


def rvq_codec_quantizer_dropout(
    path: str, steps: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A neural audio codec trained the way SoundStream / EnCodec reimplementations train
    their autoencoder before the adversarial terms are added: a strided convolutional encoder
    (16 times down) and its transposed decoder around vector-quantize-pytorch's `ResidualVQ`
    (4 EMA codebooks of 64 codes, dead-code replacement, quantizer dropout), the loss the time
    L1 plus a multi-scale STFT loss (linear and log magnitudes at 64, 128 and 256 points)
    plus the commitment loss, Adam 3e-4 with EnCodec's betas (0.5, 0.9), batches of 16 clips
    of 512 samples of harmonic notes at 8 kHz; an evaluation with all four quantizers every
    50 steps (the SNR of the reconstruction)."""
    g = _seed(seed)
    model = _Codec()
    lr = 3e-2 if bug == "lr_x100" else 3e-4  # bug: the config's `lr: 3e-2` for 3e-4
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.5, 0.9))
    hook = Hook(path)
    hook.register_module(model)
    val = _tones(g, 64)
    losses: list[float] = []
    for step in range(steps):
        model.train()
        x = _tones(g, 16)
        x_hat, commit = model(x, g)
        loss = F.l1_loss(x_hat, x) + _multi_scale_stft_loss(x_hat, x) + commit
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                rec, _ = model(val, g)
                snr = 10 * torch.log10(val.pow(2).sum() / (val - rec).pow(2).sum()).item()
            print(
                f"step {step + 1} loss {np.mean(losses[-50:]):.4f} commit {commit.item():.4f} val SNR {snr:.2f} dB"
            )
    hook.close()
    return losses


# ============================================================================= Lightning: the PPO domain template


def lit_ppo_domain_template(path: str, max_epochs: int = 12, seed: int = 0) -> list[float]:
    """Lightning's `examples/pytorch/domain_templates/reinforce_learn_ppo.py` on a hand-written
    cart-pole: a `PPOLightning` module whose `train_dataloader` is an `ExperienceSourceDataset`
    (an `IterableDataset` over `generate_trajectory_samples`, 1024 environment steps per epoch,
    GAE with gamma 0.99 and lambda 0.95, discounted returns as the critic's targets), a
    categorical actor and a critic MLP, manual optimization with two Adam optimizers (actor
    3e-4, critic 1e-3) stepped `nb_optim_iters=4` times per batch of 256, the clipped
    surrogate (0.2) on normalized advantages and the critic's MSE, `avg_ep_reward` logged;
    `mldbg.lightning.DebuggerCallback` in the `Trainer`. The losses returned are the critic's,
    which rise with the episode returns."""
    import lightning.pytorch as pl
    from torch.utils.data import DataLoader, IterableDataset

    from mldbg.lightning import DebuggerCallback

    _seed(seed)
    pl.seed_everything(seed, verbose=False)

    def create_mlp(input_shape: int, n_actions: int, hidden_size: int = 64) -> nn.Sequential:
        return nn.Sequential(
            nn.Linear(input_shape, hidden_size), nn.ReLU(), nn.Linear(hidden_size, hidden_size), nn.ReLU(),
            nn.Linear(hidden_size, n_actions),
        )  # fmt: skip

    class ActorCategorical(nn.Module):
        def __init__(self, actor_net: nn.Module) -> None:
            super().__init__()
            self.actor_net = actor_net

        def forward(self, states: torch.Tensor) -> tuple[Any, torch.Tensor]:
            pi = torch.distributions.Categorical(logits=self.actor_net(states))
            return pi, pi.sample()

        def get_log_prob(self, pi: Any, actions: torch.Tensor) -> torch.Tensor:
            return pi.log_prob(actions)

    class ExperienceSourceDataset(IterableDataset):
        def __init__(self, generate_batch: Any) -> None:
            self.generate_batch = generate_batch

        def __iter__(self) -> Any:
            return self.generate_batch()

    class PPOLightning(pl.LightningModule):
        def __init__(
            self, gamma: float = 0.99, lam: float = 0.95, lr_actor: float = 3e-4, lr_critic: float = 1e-3,
            max_episode_len: int = 200, batch_size: int = 256, steps_per_epoch: int = 1024, nb_optim_iters: int = 4,
            clip_ratio: float = 0.2,
        ) -> None:  # fmt: skip
            super().__init__()
            self.automatic_optimization = False
            self.gamma, self.lam, self.lr_actor, self.lr_critic = gamma, lam, lr_actor, lr_critic
            self.max_episode_len, self.batch_size, self.steps_per_epoch = (
                max_episode_len,
                batch_size,
                steps_per_epoch,
            )
            self.nb_optim_iters, self.clip_ratio = nb_optim_iters, clip_ratio
            self.env = _CartPole(np.random.default_rng(seed + 7), max_steps=max_episode_len)
            self.critic = create_mlp(4, 1)
            self.actor = ActorCategorical(create_mlp(4, 2))
            self.batch_states: list[torch.Tensor] = []
            self.batch_actions: list[torch.Tensor] = []
            self.batch_adv: list[float] = []
            self.batch_qvals: list[float] = []
            self.batch_logp: list[torch.Tensor] = []
            self.ep_rewards: list[float] = []
            self.ep_values: list[float] = []
            self.epoch_rewards: list[float] = []
            self.episode_step = 0
            self.avg_ep_reward = 0.0
            self.avg_ep_len = 0.0
            self.critic_losses: list[float] = []
            self.state = torch.FloatTensor(self.env.reset())

        def forward(self, x: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor]:
            pi, action = self.actor(x)
            return pi, action, self.critic(x)

        def discount_rewards(self, rewards: list[float], discount: float) -> list[float]:
            cumul_reward, sum_r = [], 0.0
            for r in reversed(rewards):
                sum_r = (sum_r * discount) + r
                cumul_reward.append(sum_r)
            return list(reversed(cumul_reward))

        def calc_advantage(self, rewards: list[float], values: list[float], last_value: float) -> list[float]:
            rews = rewards + [last_value]
            vals = values + [last_value]
            delta = [rews[i] + self.gamma * vals[i + 1] - vals[i] for i in range(len(rews) - 1)]
            return self.discount_rewards(delta, self.gamma * self.lam)

        def generate_trajectory_samples(self) -> Any:
            for step in range(self.steps_per_epoch):
                with torch.no_grad():
                    pi, action, value = self(self.state)
                    log_prob = self.actor.get_log_prob(pi, action)
                next_state, reward, terminated, truncated = self.env.step(int(action))
                self.episode_step += 1
                self.batch_states.append(self.state)
                self.batch_actions.append(action)
                self.batch_logp.append(log_prob)
                self.ep_rewards.append(reward)
                self.ep_values.append(value.item())
                self.state = torch.FloatTensor(next_state)
                epoch_end = step == (self.steps_per_epoch - 1)
                terminal = len(self.ep_rewards) == self.max_episode_len
                if epoch_end or terminated or terminal:
                    if (terminal or epoch_end) and not terminated:
                        with torch.no_grad():
                            _, _, value = self(self.state)
                            last_value = value.item()
                    else:
                        last_value = 0.0
                    self.batch_qvals += self.discount_rewards(self.ep_rewards + [last_value], self.gamma)[:-1]
                    self.batch_adv += self.calc_advantage(self.ep_rewards, self.ep_values, last_value)
                    if not epoch_end or terminated or terminal:
                        self.epoch_rewards.append(sum(self.ep_rewards))
                    self.ep_rewards, self.ep_values, self.episode_step = [], [], 0
                    self.state = torch.FloatTensor(self.env.reset())
                if epoch_end:
                    train_data = zip(
                        self.batch_states, self.batch_actions, self.batch_logp, self.batch_qvals, self.batch_adv,
                        strict=True,
                    )  # fmt: skip
                    yield from train_data
                    self.avg_ep_reward = float(np.mean(self.epoch_rewards)) if self.epoch_rewards else 0.0
                    self.batch_states.clear()
                    self.batch_actions.clear()
                    self.batch_adv.clear()
                    self.batch_logp.clear()
                    self.batch_qvals.clear()
                    self.epoch_rewards.clear()

        def actor_loss(
            self, state: torch.Tensor, action: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor
        ) -> torch.Tensor:
            pi, _ = self.actor(state)
            logp = self.actor.get_log_prob(pi, action)
            ratio = torch.exp(logp - logp_old)
            clip_adv = torch.clamp(ratio, 1 - self.clip_ratio, 1 + self.clip_ratio) * adv
            return -(torch.min(ratio * adv, clip_adv)).mean()

        def critic_loss(self, state: torch.Tensor, qval: torch.Tensor) -> torch.Tensor:
            value = self.critic(state).squeeze(-1)
            return (qval - value).pow(2).mean()

        def training_step(self, batch: Any, batch_idx: int) -> None:
            state, action, old_logp, qval, adv = batch
            adv = (adv - adv.mean()) / adv.std()
            qval = qval.float()
            self.log("avg_ep_reward", self.avg_ep_reward, prog_bar=True, on_step=False, on_epoch=True)
            optimizer_actor, optimizer_critic = self.optimizers()
            for _ in range(self.nb_optim_iters):
                loss_actor = self.actor_loss(state, action, old_logp, adv)
                self.manual_backward(loss_actor)
                optimizer_actor.step()
                optimizer_actor.zero_grad()
                loss_critic = self.critic_loss(state, qval)
                self.manual_backward(loss_critic)
                optimizer_critic.step()
                optimizer_critic.zero_grad()
            self.critic_losses.append(loss_critic.item())
            self.log("loss_critic", loss_critic, on_step=False, on_epoch=True, prog_bar=False)
            self.log("loss_actor", loss_actor, on_step=False, on_epoch=True, prog_bar=True)

        def on_train_epoch_end(self) -> None:
            if self.current_epoch % 2 == 1:
                print(f"epoch {self.current_epoch} avg_ep_reward {self.avg_ep_reward:.1f} "
                      f"loss_critic {self.critic_losses[-1]:.3f}")  # fmt: skip

        def configure_optimizers(self) -> Any:
            optimizer_actor = torch.optim.Adam(self.actor.parameters(), lr=self.lr_actor)
            optimizer_critic = torch.optim.Adam(self.critic.parameters(), lr=self.lr_critic)
            return optimizer_actor, optimizer_critic

        def train_dataloader(self) -> DataLoader:
            return DataLoader(
                ExperienceSourceDataset(self.generate_trajectory_samples), batch_size=self.batch_size
            )

    model = PPOLightning()
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=path, logger=False, max_epochs=max_epochs, callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    trainer.fit(model)
    return model.critic_losses


# ============================================================================= HF Trainer: YOLOS object detection


def hf_yolos_object_detection(path: str, seed: int = 0) -> list[float]:
    """Object detection through the Hugging Face `Trainer` as transformers'
    `examples/pytorch/object-detection/run_object_detection.py` sets it up, on a tiny random
    `YolosForObjectDetection` (a ViT over 8x8 patches of 32x32 scenes with 10 detection
    tokens, hidden 64, 2 layers, no download): `labels` as a list of dicts (`class_labels`,
    normalized `boxes`) from the user's `collate_fn`, `remove_unused_columns=False`,
    `eval_do_concat_batches=False`; the model's loss is DETR's sum of its Hungarian-matched
    loss dict (cross-entropy with `eos_coefficient` 0.1, 5 times the box L1, 2 times the GIoU
    loss); AdamW 5e-4, weight decay 1e-4, `max_grad_norm` 0.1 as DETR clips, cosine schedule,
    batch 16, 4 epochs, an evaluation per epoch."""
    from transformers import PrinterCallback, Trainer, TrainingArguments, YolosConfig, YolosForObjectDetection

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    images, labels = _shapes_scenes(g, 1400)
    mean = images[:1200].mean((0, 2, 3))[:, None, None]
    std = images[:1200].std((0, 2, 3))[:, None, None]

    def to_examples(lo: int, hi: int) -> list[dict[str, Any]]:
        out = []
        for i in range(lo, hi):
            rows = labels[i][labels[i].sum(1) > 0]
            out.append({
                "pixel_values": (images[i] - mean) / std,
                "labels": {"class_labels": rows[:, 0].long(), "boxes": rows[:, 1:] / 32.0},
            })  # fmt: skip
        return out

    def collate_fn(batch: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "pixel_values": torch.stack([x["pixel_values"] for x in batch]),
            "labels": [x["labels"] for x in batch],
        }

    config = YolosConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=[32, 32],
        patch_size=8, num_detection_tokens=10, num_labels=3, use_mid_position_embeddings=False,
    )  # fmt: skip
    model = YolosForObjectDetection(config)
    args = TrainingArguments(
        output_dir=os.path.join(path, "trainer"), logging_steps=1, report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=seed, save_strategy="no", eval_strategy="epoch", learning_rate=5e-4,
        weight_decay=1e-4, max_grad_norm=0.1, lr_scheduler_type="cosine", per_device_train_batch_size=16,
        per_device_eval_batch_size=16, num_train_epochs=4, remove_unused_columns=False, eval_do_concat_batches=False,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args, train_dataset=to_examples(0, 1200), eval_dataset=to_examples(1200, 1400),
        data_collator=collate_fn, callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(args.output_dir, ignore_errors=True)
    print("eval losses", [round(e["eval_loss"], 4) for e in trainer.state.log_history if "eval_loss" in e])
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


# ============================================================================= Keras: metric learning for image similarity


def keras_metric_learning_similarity(path: str, seed: int = 0) -> list[float]:
    """keras.io's "Metric learning for image similarity search" in Keras 3: an
    `AnchorPositivePairs` `PyDataset` giving one anchor and one positive image per class per
    batch, an `EmbeddingModel(keras.Model)` whose own `train_step` (a `tf.GradientTape`)
    embeds both, takes their similarity matrix over temperature 0.2 and
    `self.compute_loss(y=arange(num_classes), y_pred=similarities)` with
    `SparseCategoricalCrossentropy(from_logits=True)`, three strided ReLU convolutions, global
    average pooling, an 8-D `UnitNormalization`'d embedding, Adam 1e-3, 100 batches per epoch,
    5 epochs; on 16x16 RGB glyphs of 10 classes; a nearest-neighbour accuracy on held-out
    images at the end."""
    import keras
    import tensorflow as tf
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, labels = _rgb_glyphs(g, 2400, 10)
    x_all = images.permute(0, 2, 3, 1).numpy().astype("float32") / 255.0
    y_all = labels.numpy()
    x_train, y_train, x_test, y_test = x_all[:2000], y_all[:2000], x_all[2000:], y_all[2000:]
    num_classes, hw = 10, 16
    class_idx_to_train_idxs = {c: np.nonzero(y_train == c)[0] for c in range(num_classes)}
    rng = random.Random(seed)

    class AnchorPositivePairs(keras.utils.PyDataset):
        def __init__(self, num_batches: int) -> None:
            super().__init__()
            self.batches = (
                num_batches  # the example's `self.num_batches` is a read-only property of PyDataset now
            )

        def __len__(self) -> int:
            return self.batches

        def __getitem__(self, _idx: int) -> Any:
            x = np.empty((2, num_classes, hw, hw, 3), dtype=np.float32)
            for class_idx in range(num_classes):
                examples_for_class = class_idx_to_train_idxs[class_idx]
                anchor_idx = rng.choice(examples_for_class)
                positive_idx = rng.choice(examples_for_class)
                while positive_idx == anchor_idx:
                    positive_idx = rng.choice(examples_for_class)
                x[0, class_idx] = x_train[anchor_idx]
                x[1, class_idx] = x_train[positive_idx]
            return x

    class EmbeddingModel(keras.Model):
        def train_step(self, data: Any) -> dict[str, Any]:
            if isinstance(data, tuple):
                data = data[0]
            anchors, positives = data[0], data[1]
            with tf.GradientTape() as tape:
                anchor_embeddings = self(anchors, training=True)
                positive_embeddings = self(positives, training=True)
                similarities = keras.ops.einsum("ae,pe->ap", anchor_embeddings, positive_embeddings)
                temperature = 0.2
                similarities /= temperature
                sparse_labels = keras.ops.arange(num_classes)
                loss = self.compute_loss(y=sparse_labels, y_pred=similarities)
            gradients = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(gradients, self.trainable_variables, strict=True))
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(sparse_labels, similarities)
            return {m.name: m.result() for m in self.metrics}

    inputs = layers.Input(shape=(hw, hw, 3))
    x = layers.Conv2D(filters=32, kernel_size=3, strides=2, activation="relu")(inputs)
    x = layers.Conv2D(filters=64, kernel_size=3, strides=2, activation="relu")(x)
    x = layers.Conv2D(filters=128, kernel_size=3, strides=1, activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    embeddings = layers.Dense(units=8, activation=None)(x)
    embeddings = layers.UnitNormalization()(embeddings)
    model = EmbeddingModel(inputs, embeddings)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=1e-3),
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
        AnchorPositivePairs(num_batches=100), epochs=5, verbose=0, callbacks=[mldbg.keras.Hook(path), history]
    )
    print("epoch losses", [round(v, 4) for v in fit.history["loss"]])
    emb_train = model.predict(x_train, verbose=0)
    emb_test = model.predict(x_test, verbose=0)
    nearest = (emb_test @ emb_train.T).argmax(1)
    print("nearest-neighbour accuracy", float((y_train[nearest] == y_test).mean()))
    return history.losses


_timm = healthy(
    "timm_train_augmix_jsd_model_ema", "timm train.py (AugMix splits, JSD loss, EMA)", timm_augmix_jsd_ema
)
_yolox = healthy(
    "yolox_decoupled_head_simota_loss_dict",
    "YOLOX (anchor-free decoupled head, SimOTA)",
    yolox_decoupled_head_simota,
)
_bert4rec = healthy(
    "bert4rec_cloze_masked_item_prediction", "BERT4Rec (Cloze masked items)", bert4rec_cloze_masked_items
)
_gcn2 = healthy("pyg_gcn2_cora_initial_residual_16_layers", "GCNII (PyG gcn2_cora)", pyg_gcn2_cora_deep)
_wenet = healthy(
    "wenet_hybrid_ctc_attention_loss_dict", "WeNet hybrid CTC/attention ASR", wenet_hybrid_ctc_attention
)
_conve = healthy(
    "conve_one_to_n_bce_label_smoothing", "ConvE link prediction (1-N scoring)", conve_one_to_n_scoring
)
_tacotron = healthy(
    "nvidia_tacotron2_mel_postnet_gate", "Tacotron 2 (NVIDIA train.py)", tacotron2_mel_postnet_gate
)
_pml = healthy(
    "pml_trunk_embedder_semihard_triplet_miner",
    "metric learning (semi-hard triplet miner)",
    pml_trunk_embedder_semihard_triplets,
)
_fastai = healthy(
    "fastai_tabular_learner_fit_one_cycle",
    "fastai tabular_learner with fit_one_cycle",
    fastai_tabular_fit_one_cycle,
)
_codec = healthy(
    "rvq_codec_quantizer_dropout_stft_loss", "neural audio codec (residual VQ)", rvq_codec_quantizer_dropout
)
PIPELINES: list[Any] = [
    _timm,
    buggy(_timm, "inputs_x255"),
    _yolox,
    buggy(_yolox, "dead_relu_init"),
    healthy(
        "torchcfm_exact_ot_flow_matching_ema",
        "torchcfm exact-OT conditional flow matching",
        torchcfm_exact_ot_cfm_ema,
    ),
    healthy("cleanrl_sac_discrete_cartpole", "CleanRL discrete SAC", cleanrl_sac_discrete_cartpole),
    _bert4rec,
    buggy(_bert4rec, "softmax_before_ce"),
    _gcn2,
    buggy(_gcn2, "shuffled_labels"),
    healthy(
        "tslib_timesnet_long_term_forecast_type1",
        "TimesNet (Time-Series-Library)",
        timesnet_long_term_forecast,
    ),
    _wenet,
    buggy(_wenet, "log_zero_nan"),
    _conve,
    buggy(_conve, "frozen_by_mistake"),
    _tacotron,
    buggy(_tacotron, "train_in_eval_mode"),
    _pml,
    buggy(_pml, "no_zero_grad"),
    _fastai,
    buggy(_fastai, "deep_sigmoid"),
    _codec,
    buggy(_codec, "lr_x100"),
]

if installed("lightning"):
    PIPELINES += [
        healthy(
            "lightning_ppo_domain_template_cartpole", "Lightning PPO domain template", lit_ppo_domain_template
        )
    ]

if installed("transformers", "scipy"):
    PIPELINES += [
        healthy(
            "hf_yolos_object_detection_loss_dict",
            "HF Trainer YOLOS object detection",
            hf_yolos_object_detection,
        )
    ]

if installed("keras", "tensorflow"):
    PIPELINES += [
        healthy(
            "keras_metric_learning_anchor_positive_pairs",
            "Keras metric learning (custom train_step)",
            keras_metric_learning_similarity,
        )
    ]
