"""A fifth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind5`.

    .venv/bin/python benchmarks/long_runs.py --blind5 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how a real
practice's loss looks over 10^5-10^6 steps (the practice is cited in its docstring), its
parameters drawn per seed, and none of them is one of `long_runs.KINDS`, `long_blind.KINDS`,
`long_blind2.KINDS`, `long_blind3.KINDS` or `long_blind4.KINDS` (nor a bug of their `BUGS`).
They are to be measured once, on the held-out seeds (`SEEDS`), and not tuned on: a rule
changed after looking at them makes them a tuning set.

The interface is `long_blind4`'s: a kind is `(n, rng) -> loss`; seven kinds record the
learning-rate schedule they follow (two more follow one they do not record), and
`series(kind, n, rng)` gives all that a run records, the loss and, where the kind has one, the
learning rate (`LR`, as the PyTorch hook records it, in real units).
Where a kind's values are logged every k steps (the mean of those k steps), a value is one log
and its learning rate the one logged with it. No kind here has evaluation passes, but `MODE` and
its codes are kept for the interface. A bug is `(n, rng) -> (loss, the step its defect begins)`.
Only numpy here: the series can be generated and looked at without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _ar1, _log_uniform, _maybe_rho, _noise, _power  # the first blind set's helpers
from long_blind3 import _lag, _transient  # the third's
from long_blind4 import _f32, _gamma  # the fourth's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE (no kind here records one)
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 5000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _sig(x: np.ndarray, digits: int) -> np.ndarray:
    """`x` printed with `digits` significant digits (`%.{digits-1}E`, `%.{digits}g`) and read
    back."""
    x = np.asarray(x, dtype=np.float64)
    mag = np.floor(np.log10(np.maximum(np.abs(x), 1e-300)))
    q = 10.0 ** (mag - digits + 1)
    return np.where(x == 0, 0.0, np.round(x / q) * q)


def _spikes(
    n: int,
    rng: np.random.Generator,
    count: int,
    lo: int,
    height: tuple[float, float],
    tau: tuple[float, float],
) -> np.ndarray:
    """A factor of 1 with `count` loss spikes after step `lo`: each up by `height` (a share of
    the level) within 1-10 steps, recovering with a time constant of `tau` steps."""
    out = np.ones(n)
    for _ in range(count):
        at = int(rng.integers(lo, max(lo + 1, n - 100)))
        k = np.arange(n - at, dtype=np.float64)
        out[at:] += rng.uniform(*height) * _transient(k, rng.uniform(1, 10), rng.uniform(*tau))
    return out


def _windowed(level: np.ndarray, k: int, sd: float, rho: float, rng: np.random.Generator) -> np.ndarray:
    """The mean over k steps of a loss with a per-step log-normal noise of `sd` (AR(1) `rho`
    between steps), one value per window: `level` is the windows' noise-free level."""
    n = len(level)
    if k == 1:
        return level * _noise(n, rng, sd, rho)
    spread = sd * math.sqrt((1 + rho) / (1 - rho) / k)  # the mean of k correlated steps
    return level * _noise(n, rng, spread)


# the healthy kinds ----------------------------------------------------------------------------
def _hf_sft_logged(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    k = int(rng.choice([1, 5, 10, 10, 25, 50, 100]))
    epochs = int(rng.choice([1, 2, 3, 3, 3, 4, 5]))
    total = n * k  # optimizer steps
    s = (np.arange(n, dtype=np.float64) + 1) * k  # the step of each log
    warm = total * float(rng.choice([0.0, 0.03, 0.03, 0.05, 0.1]))
    u = np.clip((s - warm) / (total - warm), 0, 1)
    decay = 0.5 * (1 + np.cos(np.pi * u)) if rng.random() < 0.6 else 1 - u  # cosine or linear to 0
    rel = np.where(s < warm, s / max(warm, 1), decay)
    peak = (
        _log_uniform(rng, 1e-5, 3e-5) if rng.random() < 0.5 else _log_uniform(rng, 1e-4, 3e-4)
    )  # full / LoRA
    per_epoch = total / epochs
    start = rng.uniform(1.0, 2.5)  # the base model's loss on the responses
    level = _power(
        np.cumsum(rel) * k, start, start * rng.uniform(0.45, 0.8), per_epoch * rng.uniform(0.005, 0.05),
        rng.uniform(0.3, 0.7),
    )  # fmt: skip
    epoch = np.minimum(s // per_epoch, epochs - 1).astype(np.int64)
    drops = rng.uniform(0.05, 0.25) * np.cumprod(np.r_[1.0, rng.uniform(0.6, 1.2, epochs)])[:epochs]
    held = np.r_[1.0, np.cumprod(1 - drops)]  # each later epoch meets examples it has seen
    ease = np.minimum((s - epoch * per_epoch) / (0.01 * per_epoch), 1)
    memo = np.where(epoch > 0, held[epoch - 1] * (1 - drops[epoch - 1] * ease), 1.0)
    sd = rng.uniform(0.05, 0.25)
    x = _windowed(level * memo, k, sd, 0.0, rng)
    out = rng.random(n) < 1 - (1 - _log_uniform(rng, 1e-3, 1e-2)) ** k  # a long, hard example's step
    x[out] += (level * memo)[out] * rng.uniform(1, 3, int(out.sum())) / k
    return {"loss": np.round(x, 4), LR: peak * rel}


def hf_sft_logged(n: int, rng: np.random.Generator) -> np.ndarray:
    """Supervised fine-tuning of a pretrained LLM with the Hugging Face Trainer (TRL's
    SFTTrainer, Alpaca-style recipes): 1-5 epochs (3 most often), `warmup_ratio` 0-0.1, then a
    cosine (or linear) decay to 0, at 1e-5-3e-5 (full) or 1e-4-3e-4 (LoRA); the loss logged
    every `logging_steps` (1-100) optimizer steps as the mean over them, rounded to 4 decimals
    (`round(tr_loss / steps, 4)`), each value one log. It starts at the base model's loss on
    the responses (1.0-2.5 nats), falls along the rate's area towards 45-80% of it, and at each
    epoch boundary steps down by 5-25% (less or more at later ones) within 1% of the epoch, as
    the examples come round again; per-step noise 5-25% (short batches of varied examples),
    shrunk by the averaging, and 0.1-1% of the steps a long, hard example (+100-300%, diluted
    by k)."""
    return _hf_sft_logged(n, rng)["loss"]


def _gpt3_batch_warmup(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    full, b0 = float(rng.choice([0.5e6, 1e6, 2e6, 3.2e6])), 32_768.0  # tokens per step
    c = math.log(full / b0) / (n * rng.uniform(0.05, 0.3))  # db/dtokens: the ramp's slope
    ramp = (full - b0) / c  # the tokens it takes: 4-12B in GPT-3
    s_ramp = math.log(1 + c * ramp / b0) / c
    tokens = np.where(t < s_ramp, b0 / c * np.expm1(c * t), ramp + full * (t - s_ramp))
    batch = np.minimum(b0 + c * tokens, full)
    warm = 375e6  # tokens
    horizon = tokens[-1] * rng.uniform(0.9, 1.0)
    u = np.clip((tokens - warm) / (horizon - warm), 0, 1)
    rel = np.where(tokens < warm, np.maximum(tokens, b0) / warm, 0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * u)))
    peak = _log_uniform(rng, 6e-5, 6e-4)
    crit = 0.25 * full  # the gradient noise scale: steps of a small batch are worth more than its share
    area = np.cumsum(rel * batch / (batch + crit) * (full + crit) / full)  # in full-batch steps
    floor = rng.uniform(1.7, 2.8)
    level = _power(area, math.log(50_257), floor, n / _log_uniform(rng, 200, 2000), rng.uniform(0.5, 0.8))
    level -= floor * rng.uniform(0.02, 0.06) * np.where(tokens > warm, 1 - rel, 0)  # the annealing gain
    level *= _spikes(n, rng, int(rng.integers(0, 5)), int(s_ramp / 2), (0.15, 1.0), (20, 500))
    sd = floor * rng.uniform(0.005, 0.02) * np.sqrt(full / batch)  # nats: documents differ
    z = rng.standard_normal(n)
    rho = _maybe_rho(rng)
    return {"loss": _f32(level + sd * (_ar1(z, rho) if rho else z)), LR: peak * rel}


def gpt3_batch_warmup(n: int, rng: np.random.Generator) -> np.ndarray:
    """GPT-3-style pretraining (Brown et al. 2020, appendix B; GPT-NeoX's and Megatron's
    `--rampup-batch-size`): the batch ramps linearly in tokens seen from 32k tokens to its full
    0.5M-3.2M over the first 5-30% of the steps (the tokens per step grow exponentially in
    steps there); the learning rate warms up over 375M tokens and decays on a cosine over
    90-100% of the run's tokens to 10% of its peak (6e-5-6e-4); per step the loss follows the
    learning rate's area in full-batch units (a small batch's step counts for more than its
    share of tokens: b / (b + B_noise), B_noise a quarter of the full batch; McCandlish et al.
    2018), from ln(50,257) to 1.7-2.8 nats, with an extra 2-6% gain as the rate anneals;
    0-4 spikes (1.15-2x within 1-10 steps, recovering over 20-500 steps) after the ramp's
    first half; the batch noise is absolute, 0.5-2% of the final loss at the full batch, up by
    sqrt(full / batch) early on (4-10x at 32k tokens), AR-correlated on half the seeds."""
    return _gpt3_batch_warmup(n, rng)["loss"]


def _megatron_wsd(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    k = int(rng.choice([1, 10, 10, 100]))  # --log-interval
    total = n * k  # iterations
    s = (np.arange(n, dtype=np.float64) + 1) * k
    warm = total * rng.uniform(0.005, 0.02)
    dec = total * rng.uniform(0.1, 0.2)  # --lr-wsd-decay-iters
    u = np.clip((s - (total - dec)) / dec, 0, 1)
    style = str(rng.choice(["linear", "cosine", "minus_sqrt"]))  # --lr-wsd-decay-style
    f = {"linear": 1 - u, "cosine": 0.5 * (1 + np.cos(np.pi * u)), "minus_sqrt": 1 - np.sqrt(u)}[style]
    low = float(rng.choice([0.0, 0.1]))  # --min-lr
    rel = np.where(s < warm, s / warm, low + (1 - low) * f)
    peak = _log_uniform(rng, 1.5e-4, 1e-3)
    floor = rng.uniform(1.8, 3.0)
    level = _power(
        np.cumsum(rel) * k, math.log(float(rng.choice([32_000, 50_257, 128_256, 151_936]))), floor,
        total / _log_uniform(rng, 200, 2000), rng.uniform(0.5, 0.8),
    )  # fmt: skip
    level -= floor * rng.uniform(0.04, 0.1) * np.where(s > warm, 1 - rel, 0)  # the decay's drop
    bumps = np.ones(n)
    for _ in range(int(rng.integers(0, 4))):  # a spike at iteration `at`, averaged into its logs
        at, h = int(rng.integers(int(warm), total - 1)), rng.uniform(0.2, 1.0)
        rise, tau = rng.uniform(1, 10), rng.uniform(20, 300)
        first, last = at // k, min(n - 1, int((at + rise + 10 * tau) // k))
        for i in range(first, last + 1):
            it = np.arange(i * k, (i + 1) * k, dtype=np.float64) - at
            bumps[i] += h * float(np.mean(np.where(it < 0, 0, _transient(np.maximum(it, 0), rise, tau))))
    x = _windowed(level * bumps, k, rng.uniform(0.01, 0.04), _maybe_rho(rng), rng)
    return {"loss": _sig(x, 7), LR: _sig(peak * rel, 7)}


def megatron_wsd(n: int, rng: np.random.Generator) -> np.ndarray:
    """LLM pretraining with Megatron-LM's warmup-stable-decay schedule (`--lr-decay-style WSD`,
    `--lr-wsd-decay-style` linear, cosine or minus_sqrt over the last 10-20% of the iterations,
    `--min-lr` 0 or 10%, warm-up over 0.5-2%; MiniCPM, Hu et al. 2024), the `lm loss` as
    Megatron prints it: the mean over each `--log-interval` (1, 10 or 100 iterations), with
    `{:.6E}` (7 significant digits), each value one log. From ln(vocabulary) (32k-152k) along
    the learning rate's area to 1.8-3.0 nats, 4-10% lower at the end of the decay; per-iteration
    noise 1-4% (AR-correlated on half the seeds), shrunk by the averaging; 0-3 spikes (1.2-2x
    within 1-10 iterations, recovering over 20-300) averaged into the logs they fall in."""
    return _megatron_wsd(n, rng)["loss"]


def _triangular_clr(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.integers(50, 301))
    step = max(1.0, n / epochs * rng.uniform(2, 10))  # step_size_up: 2-10 epochs
    base = _log_uniform(rng, 1e-3, 2e-2)
    top = base * rng.uniform(3, 20)
    cycle = np.floor(1 + t / (2 * step))
    tri = np.maximum(0, 1 - np.abs(t / step - 2 * cycle + 1))
    mode = str(rng.choice(["triangular", "triangular2", "exp_range"]))
    if mode == "triangular":
        scale = np.ones(n)
    elif mode == "triangular2":
        scale = 1 / 2 ** (cycle - 1)
    else:
        scale = np.exp(math.log(rng.uniform(0.05, 0.3)) * t / n)  # gamma ** iteration
    lr = base + (top - base) * tri * scale
    classes = float(rng.choice([10, 100]))
    trend = _power(
        np.cumsum(lr) / top, math.log(classes), math.log(classes) * rng.uniform(0.005, 0.08),
        n / _log_uniform(rng, 20, 300), rng.uniform(0.6, 1.2),
    )  # fmt: skip
    excess = rng.uniform(0.1, 0.5) * _lag(lr / top, rng.uniform(50, 500), base / top)  # SGD's noise floor
    level = trend * (1 + excess)
    cv = np.minimum(rng.uniform(0.05, 0.12) * (trend[0] / trend) ** 0.3, 0.6)  # few errors: lumpy
    return {"loss": level * _gamma(n, rng, cv), LR: lr}


def triangular_clr(n: int, rng: np.random.Generator) -> np.ndarray:
    """CIFAR-10/100 classification under cyclical learning rates (Smith 2017, "Cyclical
    Learning Rates for Training Neural Networks"; `torch.optim.lr_scheduler.CyclicLR`, mode
    triangular, triangular2 or exp_range): SGD between a base rate of 1e-3-2e-2 and 3-20x that,
    half-cycles of 2-10 epochs of 50-300; from ln(classes) to 0.5-8% of it along the rate's
    area, and 10-50% above that trend where the rate is at its top (the noise floor of SGD,
    lagging the rate by 50-500 steps), so the loss rises and falls with each cycle, less as the
    amplitude decays (triangular2: halved each cycle; exp_range: to 5-30% by the end); skewed
    batch noise of 5-12%, growing as the loss gets small (a few misclassified images)."""
    return _triangular_clr(n, rng)["loss"]


def _icefall_transducer(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.integers(20, 41))
    epoch = np.floor(t / (n / epochs))  # Eden's step_epoch(epoch - 1): 0 in the first
    base = rng.uniform(0.035, 0.05)
    lr_batches, lr_epochs = rng.uniform(5000, 7500), rng.uniform(3.5, 6)
    eden = ((t**2 + lr_batches**2) / lr_batches**2) ** -0.25 * (
        (epoch**2 + lr_epochs**2) / lr_epochs**2
    ) ** -0.25
    lr = base * eden * np.where(t < 500, 0.5 + 0.5 * t / 500, 1.0)  # warmup_batches 500
    area = np.cumsum(lr) / base
    scale = n / _log_uniform(rng, 30, 300)
    simple = _power(area, rng.uniform(0.9, 1.6), rng.uniform(0.12, 0.3), scale, rng.uniform(0.5, 0.9))
    pruned = _power(area, rng.uniform(6, 10), rng.uniform(0.02, 0.08), scale / 10, rng.uniform(0.7, 1.0))
    warm_step = 2000
    w = np.minimum(t / warm_step, 1)
    total = (1 - 0.5 * w) * simple + (0.1 + 0.9 * w) * pruned  # simple_loss_scale 0.5 after warm_step
    total *= 1 + rng.uniform(0.05, 0.2) * _lag(lr / base, 300, 0.5)
    x = total * _gamma(n, rng, rng.uniform(0.03, 0.08))
    return {"loss": _sig(x, 4), LR: lr}


def icefall_transducer(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Zipformer pruned-transducer ASR model trained with k2/icefall (the LibriSpeech
    recipes): ScaledAdam at 0.035-0.05 on the Eden schedule, base_lr x ((batch^2 +
    lr_batches^2) / lr_batches^2)^-0.25 x ((epoch^2 + lr_epochs^2) / lr_epochs^2)^-0.25
    (lr_batches 5,000-7,500, lr_epochs 3.5-6, 20-40 epochs, stepped per epoch, warm-up from half
    over 500 batches); the logged per-frame loss is simple_loss_scale x the simple loss plus
    the pruned loss, the first scale going 1 -> 0.5 and the second 0.1 -> 1 over the first
    2,000 batches (warm_step); the simple loss from 0.9-1.6 to 0.12-0.3 and the pruned from
    6-10 (as icefall's logs show at batch 0) to 0.02-0.08, ten times faster, along the rate's
    area, above that by 5-20% x lr / base_lr (lagging);
    skewed batch noise of 3-8% (batches by duration); printed with 4 significant digits."""
    return _icefall_transducer(n, rng)["loss"]


def _sisnr_separation(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.integers(100, 201))
    per_epoch = n / epochs
    epoch = np.floor(t / per_epoch)
    halvings: list[float] = []
    at = epochs * rng.uniform(0.3, 0.6)
    while at < epochs:  # ReduceLROnPlateau(factor=0.5) as the validation stalls
        halvings.append(float(np.floor(at)))
        at += rng.uniform(8, 25)
    lr = 1e-3 * 0.5 ** np.searchsorted(np.asarray(halvings), epoch, side="right")
    area = np.cumsum(lr) / 1e-3
    g0, g1 = rng.uniform(-2, 3), rng.uniform(14, 22)  # the outputs' SI-SNR, dB
    q = 1 - 1 / (1 + area / (n / _log_uniform(rng, 30, 300))) ** rng.uniform(0.4, 0.8)
    q = q / q[-1]
    gain = g0 + (g1 - g0) * q
    level = -gain + rng.uniform(0.3, 1.0) * _lag(lr / 1e-3, rng.uniform(200, 2000), 1.0)
    batch = int(rng.choice([4, 8, 16, 24]))
    sd = rng.uniform(3, 5)  # per utterance, dB
    fail = 0.2 + (rng.uniform(0.02, 0.1) - 0.2) * q  # separations that fail (similar voices)
    failures = rng.binomial(batch, fail)
    x = level + sd / math.sqrt(batch) * rng.standard_normal(n) + failures * rng.uniform(5, 15, n) / batch
    return {"loss": x, LR: lr}


def sisnr_separation(n: int, rng: np.random.Generator) -> np.ndarray:
    """Speech separation (Conv-TasNet, DPRNN, SepFormer on wsj0-2mix / Libri2Mix; Asteroid's
    and SpeechBrain's recipes) trained on the negative permutation-invariant SI-SNR, in dB:
    from -3 - +2 (the untrained masks return the mixture) to -14 - -22 along the rate's area,
    Adam at 1e-3 for 100-200 epochs, halved (ReduceLROnPlateau) from 30-60% of the run every
    8-25 epochs, each halving bringing the loss down by half the last one's drop (0.15-0.5 dB
    at first, lagging by 200-2,000 steps); the batch (4-24 mixtures) noise is absolute, a per-
    mixture spread of 3-5 dB over sqrt(batch), and the mixtures the model fails to separate
    (20% at first, 2-10% at the end) cost 5-15 dB each: an upper tail."""
    return _sisnr_separation(n, rng)["loss"]


def _detr_hungarian(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs, drop = {150: (150, 100), 300: (300, 200), 500: (500, 400)}[int(rng.choice([150, 300, 500]))]
    per_epoch = n / epochs
    lr = np.where(np.floor(t / per_epoch) < drop, 1e-4, 1e-5)  # --lr_drop: StepLR per epoch
    g = 1 / (1 + np.cumsum(lr) / 1e-4 / (n / _log_uniform(rng, 50, 500))) ** rng.uniform(0.3, 0.6)
    start, end = rng.uniform(25, 40), rng.uniform(4.5, 8.0)
    trend = end + (start - end) * (g - g[-1]) / (1 - g[-1])  # still falling at the end
    level = trend * (1 + rng.uniform(0.08, 0.18) * _lag(lr / 1e-4, per_epoch * rng.uniform(0.3, 1.5), 1.0))
    return {"loss": level * _gamma(n, rng, rng.uniform(0.05, 0.12)), LR: lr}


def detr_hungarian(n: int, rng: np.random.Generator) -> np.ndarray:
    """DETR object detection (Carion et al. 2020, facebookresearch/detr): the logged `loss`,
    the weighted sum (classification 1, L1 box 5, GIoU 2) over the Hungarian-matched queries of
    all 6 decoder layers (`--aux_loss`), from 27-47 (fb/detr#22 shows 23-33 in the first
    epoch) down to 4.5-8 at the end, slowly (DETR's long convergence: power 0.3-0.6 in the
    rate's area); AdamW at 1e-4 for 150/300/500 epochs, x0.1 at epoch 100/200/400
    (`--lr_drop`), where the loss drops by a further 7-14% over 0.3-1.5 epochs (8-18% above
    the trend at 1e-4); skewed batch noise of 5-12% (16-64 images with varied numbers of objects)."""
    return _detr_hungarian(n, rng)["loss"]


def wav2vec2_pretrain(n: int, rng: np.random.Generator) -> np.ndarray:
    """wav2vec 2.0 self-supervised pretraining (Baevski et al. 2020; fairseq's
    wav2vec2_base_librispeech config, 400k updates here scaled to the run), the loss as fairseq
    logs it, in bits (`/ math.log(2)`, `round=3`): the contrastive loss over 100 distractors
    from log2(101) = 6.66 to 1.8-3.2 bits (3.3-3.5 at 22k updates in fairseq#3391's log), plus
    the codebook diversity term, 0.1 (640 - perplexity) / 640 (`loss_1`): 0 at first (the
    softmax over 2 x 320 entries is uniform), ~0.13 bits within 0.05-0.2% of the run as the
    perplexity collapses to 20-110, then falling as it spreads to 200-600 over 20-60%; plus
    the features' penalty (`loss_2`, 0.005-0.03); the Gumbel temperature
    annealed 2 -> 0.5 (x0.999995 per update, scaled) makes the targets harder, adding up to 10%
    of the floor as it falls; the learning rate warms up over 8% and decays linearly to 0 (the
    loss drifts down with it); 0.5-2% batch noise (about 1.4M audio samples a batch), AR on
    half the seeds; 0-3 small spikes (1.1-1.3x, recovering over 100-1,000 updates)."""
    t = np.arange(n, dtype=np.float64)
    scaled = t * 400_000 / n
    temp = np.maximum(2 * 0.999995**scaled, 0.5)
    warm = 0.08 * n
    rel = np.where(t < warm, t / warm, (n - t) / (n - warm))
    floor = rng.uniform(1.8, 3.2)
    con = _power(np.cumsum(rel), math.log2(101), floor, n / _log_uniform(rng, 30, 300), rng.uniform(0.5, 0.9))
    con += floor * rng.uniform(0.0, 0.1) * (2 - temp) / 1.5
    con -= floor * rng.uniform(0.02, 0.06) * np.where(t > warm, 1 - rel, 0)
    collapse = np.exp(-t / (n * rng.uniform(0.0005, 0.002) / 3))  # 640 -> 20-110 at once
    spread = 1 - np.exp(-t / (n * rng.uniform(0.2, 0.6)))
    low, high = rng.uniform(20, 110), rng.uniform(200, 600)
    perplexity = 640 * collapse + (1 - collapse) * (low + (high - low) * spread)
    div = 0.1 * (640 - perplexity) / 640  # loss_1, nats
    pen = rng.uniform(0.005, 0.03)  # loss_2: the features' L2 penalty
    x = (con + (div + pen) / math.log(2)) * _spikes(
        n, rng, int(rng.integers(0, 4)), int(warm), (0.1, 0.3), (100, 1000)
    )
    return np.round(x * _noise(n, rng, rng.uniform(0.005, 0.02), _maybe_rho(rng)), 3)


def rectified_flow(n: int, rng: np.random.Generator) -> np.ndarray:
    """Latent rectified-flow training of a text-to-image DiT (Esser et al. 2024, SD3; Flux and
    diffusers' train_dreambooth_sd3 / flow-matching scripts): the MSE between the predicted and
    the true velocity (noise - latent) on unit-variance latents, timesteps drawn logit-normal
    per sample; the zero-initialized output layer predicts 0, so the loss starts at 2 (+-5%),
    falls within 0.5-3% of the run to 0.3-0.6 and then only 2-8% more (the target's
    conditional variance is irreducible); the batches come from 1-6 aspect-ratio buckets whose
    losses differ by +-10%; skewed batch noise of (0.5-1.0) / sqrt(batch of 32-1,024) from the
    timesteps."""
    t = np.arange(n, dtype=np.float64)
    start = 2.0 * rng.uniform(0.95, 1.05)
    floor = rng.uniform(0.3, 0.6)
    fast = n * rng.uniform(0.005, 0.03)
    late = 1 - rng.uniform(0.02, 0.08) * (1 - 1 / (1 + t / (n * rng.uniform(0.05, 0.3))))
    level = (floor + (start - floor) * np.exp(-t / (fast / 4))) * late
    buckets = int(rng.integers(1, 7))
    share = rng.dirichlet(np.ones(buckets) * 2)
    offset = rng.uniform(0.9, 1.1, buckets)
    bucket = rng.choice(buckets, n, p=share)
    cv = rng.uniform(0.5, 1.0) / math.sqrt(float(rng.choice([32, 64, 128, 256, 512, 1024])))
    return level * offset[bucket] * _gamma(n, rng, cv)


def mae_pixel(n: int, rng: np.random.Generator) -> np.ndarray:
    """Masked-autoencoder pretraining (He et al. 2022, facebookresearch/mae, `--norm_pix_loss`,
    75% masking, batch 4,096): the MSE on the masked patches, each normalized to unit variance,
    from 1.0-1.1 (the untrained decoder) to 0.6-0.7 within the first few % of the run (slower
    where the warm-up is long) and on to 0.40-0.50 (ViT-B/L/H); AdamW warmed up over 40 of
    400/800/1,600 epochs and decayed on a half cosine to 0 per iteration, the loss 3-6% lower
    at the end for the annealing; batch noise 0.3-1% (random masks over 4,096 images)."""
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.choice([400, 800, 1600]))
    warm = n * 40 / epochs
    rel = np.where(t < warm, t / warm, 0.5 * (1 + np.cos(np.pi * (t - warm) / (n - warm))))
    area = np.cumsum(rel)
    mid, end = rng.uniform(0.6, 0.7), rng.uniform(0.40, 0.50)
    fast = n * rng.uniform(0.01, 0.03)
    early = (rng.uniform(1.0, 1.1) - mid) * np.exp(-area / (fast / 3))
    slow = (mid - end) * (1 - np.minimum(area / area[-1], 1) ** rng.uniform(0.3, 0.6))
    gain = end * rng.uniform(0.03, 0.06) * np.where(t > warm, 1 - rel, 0)
    level = end + early + slow + gain[-1] - gain
    return level * _noise(n, rng, rng.uniform(0.003, 0.01))


def dlrm_criteo(n: int, rng: np.random.Generator) -> np.ndarray:
    """A click-through-rate model trained for one epoch over Criteo's logs in time order (DLRM,
    Naumov et al. 2019, facebookresearch/dlrm, the MLPerf recommendation benchmark on the
    Terabyte set; or the 7-day Kaggle set): binary cross-entropy from ln 2 (the untrained net
    predicts 0.5) down to the click rate's entropy (0.142 at 3.2% clicks; 0.569 at 25.6%)
    within 50-500 steps as the output bias is learned, then 11-14% (Terabyte) or 20-23%
    (Kaggle) below it, slowly; each day of the 23 (7) has its own level (+-3%) and a daily
    rhythm of 0-3%; the batch (2k-64k examples) noise is skewed, 2.5-4 (1.2-1.6) per example
    over sqrt(batch)."""
    t = np.arange(n, dtype=np.float64)
    if rng.random() < 0.5:  # Terabyte
        p, below, days, per_ex = 0.032, rng.uniform(0.11, 0.14), 23, rng.uniform(2.5, 4.0)
    else:  # Kaggle
        p, below, days, per_ex = 0.256, rng.uniform(0.20, 0.23), 7, rng.uniform(1.2, 1.6)
    h = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    bias = np.exp(-t / (_log_uniform(rng, 50, 500) / 3))
    g = 1 - 1 / (1 + t / (n / _log_uniform(rng, 20, 200))) ** rng.uniform(0.4, 0.8)
    learn = 1 - below * g / g[-1]  # `below` the entropy at the end
    day = np.minimum((t / (n / days)).astype(np.int64), days - 1)
    per_day = rng.uniform(0.97, 1.03, days)
    rhythm = 1 + rng.uniform(0, 0.03) * np.sin(2 * np.pi * t / (n / days) + rng.uniform(0, 2 * np.pi))
    level = h * learn * per_day[day] * rhythm
    level = level + (math.log(2) - level) * bias
    batch = float(rng.choice([2048, 8192, 32768, 65536]))
    return _f32(level * _gamma(n, rng, per_ex / math.sqrt(batch)))


def sac_actor(n: int, rng: np.random.Generator) -> np.ndarray:
    """Soft actor-critic on a MuJoCo task (Haarnoja et al. 2018; Stable-Baselines3's
    `train/actor_loss`, CleanRL's sac_continuous_action), one gradient step per environment
    step: the actor loss alpha log pi - min Q over a replay batch of 256 falls from about -d
    (alpha 1 at first, a broad policy in d = 1-17 action dimensions) to minus the Q-values the
    critic learns, -(100-1,000) (rewards of 1-10 per step, gamma 0.99), along the return's
    learning curve (a stretched exponential over 10-50% of the run), with 0-3 dips of the
    policy (Q 5-25% lower over 100-1,000 steps, recovered over 1-5% of the run); alpha falls
    to 0.01-0.2 within 1-5%; the batch's mean Q scatters by 2-8% (states of different value),
    plus 0.05-0.5 absolute, and wanders by 1-3% (correlated over 100-1,000 steps); float32."""
    t = np.arange(n, dtype=np.float64)
    d = int(rng.integers(1, 18))
    q_end = _log_uniform(rng, 100, 1000)
    q = q_end * (1 - np.exp(-((t / (n * rng.uniform(0.1, 0.5))) ** rng.uniform(0.7, 1.5))))
    for _ in range(int(rng.integers(0, 4))):
        at = int(rng.integers(int(0.1 * n), n - 100))
        k = np.arange(n - at, dtype=np.float64)
        q[at:] *= 1 - rng.uniform(0.05, 0.25) * _transient(
            k, rng.uniform(100, 1000), n * rng.uniform(0.01, 0.05)
        )
    settle = np.exp(-t / (n * rng.uniform(0.01, 0.05) / 3))
    alpha = np.exp(math.log(rng.uniform(0.01, 0.2)) * (1 - settle))
    log_pi = d * (-0.9 * settle + (1 - settle))  # to the target entropy -d
    wander = rng.uniform(0.01, 0.03) * _ar1(rng.standard_normal(n), 1 - 1 / rng.uniform(100, 1000))
    q_batch = q * (1 + wander + rng.uniform(0.02, 0.08) * rng.standard_normal(n))
    q_batch += rng.uniform(0.05, 0.5) * rng.standard_normal(n)
    return _f32(alpha * log_pi - q_batch)


def tacotron_alignment(n: int, rng: np.random.Generator) -> np.ndarray:
    """Tacotron 2 text-to-speech (Shen et al. 2018, NVIDIA/tacotron2): the mel MSE before and
    after the postnet plus the stop-token BCE, Adam at 1e-3, batches of 32-64 utterances: from
    20-60 (the log-mel targets' mean square, twice) to 0.6-0.9 within 100-500 steps, where it
    sits while the decoder, teacher-forced, predicts frames without attending to the text;
    when the attention learns the alignment (3,000-20,000 steps in, at most 30% of the run) it
    drops by 20-40% over
    500-3,000 steps, then falls slowly to 0.3-0.45 by the end; skewed batch noise of 3-8%
    (utterance lengths), AR on half the seeds."""
    t = np.arange(n, dtype=np.float64)
    start, plateau = rng.uniform(20, 60), rng.uniform(0.6, 0.9)
    fall = rng.uniform(100, 500)
    align = min(rng.uniform(3000, 20000), 0.3 * n)
    span = rng.uniform(500, 3000)
    after = plateau * (1 - rng.uniform(0.2, 0.4))
    end = min(rng.uniform(0.3, 0.45), 0.9 * after)
    click = 1 / (1 + np.exp(-(t - align - span / 2) / (span / 8)))
    slow = end + (after - end) / (1 + np.maximum(t - align, 0) / (n * rng.uniform(0.05, 0.2))) ** 0.7
    level = plateau * (1 - click) + slow * click + (start - plateau) * np.exp(-t / (fall / 5))
    return level * _gamma(n, rng, rng.uniform(0.03, 0.08)) * _noise(n, rng, 0.02, _maybe_rho(rng))


def hifigan_generator(n: int, rng: np.random.Generator) -> np.ndarray:
    """A HiFi-GAN vocoder's "Gen Loss Total" (Kong et al. 2020, jik876/hifi-gan): the
    least-squares adversarial loss over its 8 discriminators (MPD and MSD), from ~8 to 2-5
    within 1-3% of the run, then wandering by 10-20% (correlated over 500-5,000 steps) as the
    players trade; plus 2 x the
    feature-matching L1 (the term growing from 0.5-1 to 3-8 over 1-10% as the discriminators'
    features become telling); plus 45 x the mel L1, from 1.2-2.0 to 0.18-0.35 along a power
    law: the total from ~60-100 to ~13-30; batches of 16 one-second segments: 3-8% noise on the mel
    term, 10-20% on the adversarial one, 5-10% on the feature matching."""
    t = np.arange(n, dtype=np.float64)
    mel = _power(
        t,
        rng.uniform(1.2, 2.0),
        rng.uniform(0.18, 0.35),
        n / _log_uniform(rng, 50, 500),
        rng.uniform(0.4, 0.8),
    )
    adv_end = rng.uniform(2, 5)
    adv = adv_end + (8 - adv_end) * np.exp(-t / (n * rng.uniform(0.01, 0.03) / 3))
    adv *= np.exp(rng.uniform(0.1, 0.2) * _ar1(rng.standard_normal(n), 1 - 1 / rng.uniform(500, 5000)))
    fm0, fm1 = rng.uniform(0.25, 0.5), rng.uniform(1.5, 4)
    fm = fm1 + (fm0 - fm1) * np.exp(-t / (n * rng.uniform(0.01, 0.1) / 3))
    return (
        45 * mel * _gamma(n, rng, rng.uniform(0.03, 0.08))
        + adv * _gamma(n, rng, rng.uniform(0.1, 0.2))
        + 2 * fm * _gamma(n, rng, rng.uniform(0.05, 0.1))
    )


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "hf_sft_logged": hf_sft_logged,
    "gpt3_batch_warmup": gpt3_batch_warmup,
    "megatron_wsd": megatron_wsd,
    "triangular_clr": triangular_clr,
    "icefall_transducer": icefall_transducer,
    "sisnr_separation": sisnr_separation,
    "detr_hungarian": detr_hungarian,
    "wav2vec2_pretrain": wav2vec2_pretrain,
    "rectified_flow": rectified_flow,
    "mae_pixel": mae_pixel,
    "dlrm_criteo": dlrm_criteo,
    "sac_actor": sac_actor,
    "tacotron_alignment": tacotron_alignment,
    "hifigan_generator": hifigan_generator,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "hf_sft_logged": _hf_sft_logged,
    "gpt3_batch_warmup": _gpt3_batch_warmup,
    "megatron_wsd": _megatron_wsd,
    "triangular_clr": _triangular_clr,
    "icefall_transducer": _icefall_transducer,
    "sisnr_separation": _sisnr_separation,
    "detr_hungarian": _detr_hungarian,
}


def series(kind: str, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """What a run of `kind` records: {"loss": ...} and, where the kind has one, the learning
    rate (`LR`)."""
    if kind in _SERIES:
        return _SERIES[kind](n, rng)
    return {"loss": KINDS[kind](n, rng)}


def rng_for(kind: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + list(KINDS).index(kind)])


# the buggy runs: (series, the step the defect begins) -------------------------------------------
def _trend(n: int, rng: np.random.Generator, fast: tuple[float, float] = (50, 500)) -> np.ndarray:
    """A healthy loss's noise-free trend: a power-law decay from 1.5-4 to 0.1-1, most of the
    way within 1/fast of the run."""
    t = np.arange(n, dtype=np.float64)
    return _power(
        t, rng.uniform(1.5, 4.0), rng.uniform(0.1, 1.0), n / rng.uniform(*fast), rng.uniform(0.5, 1.2)
    )


def optimizer_orphaned(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of the run (new resume code) the optimizer holds other tensors than the
    model's: it was built over `model.parameters()` before the model was replaced (loaded into
    a new object, moved with `model = model.to(device)` after `optimizer = AdamW(...)`, wrapped
    again), so it steps tensors the forward pass never uses and no error comes: the model is
    frozen at the checkpoint, the loss stays at its level with its batch noise (1-15%, AR on
    half the seeds) while the healthy run (a slow power law, most of its fall within 3-30% of
    the run) would have gone on falling."""
    trend, t0 = _trend(n, rng, (3, 30)), int(n * rng.uniform(0.3, 0.7))
    trend[t0:] = trend[t0]
    return trend * _noise(n, rng, _log_uniform(rng, 0.01, 0.15), _maybe_rho(rng)), t0


def inf_loss_creep(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A hand-written cross-entropy, `-torch.log(torch.softmax(logits, -1))` under fp16
    autocast (new code from 30-70% of the run): once the model is confident, a wrong label's
    probability underflows to 0 in fp16 and the batch's loss is +inf; the GradScaler skips those
    steps, so training goes on and the other batches are healthy, but the share of inf batches
    grows as the logits grow, from 0.05-0.5% at the onset to 5-50% over 10-40% of the run
    (the values are +inf, not NaN)."""
    trend, t0 = _trend(n, rng), int(n * rng.uniform(0.3, 0.7))
    x = trend * _noise(n, rng, _log_uniform(rng, 0.01, 0.15), _maybe_rho(rng))
    k = np.arange(n - t0, dtype=np.float64)
    lo, hi = _log_uniform(rng, 5e-4, 5e-3), rng.uniform(0.05, 0.5)
    share = np.exp(
        np.log(lo) + (math.log(hi) - math.log(lo)) * np.minimum(k / (n * rng.uniform(0.1, 0.4)), 1)
    )
    x[t0:][rng.random(n - t0) < share] = np.inf
    return x, t0


def worker_duplicates(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of the run the data comes from an `IterableDataset` that does not shard by
    `get_worker_info()` (a new streaming pipeline) read by a DataLoader with 2-8 workers: each
    worker yields the same batches, round-robin, so every batch arrives w times in a row. Within
    each group of w the first is the healthy loss and each repeat 0.5-5% lower than the one before
    (the model has just stepped on it), with the same batch noise (1-15%); and as only one step
    in w sees new data the trend goes on at 1/w of the healthy pace."""
    t = np.arange(n, dtype=np.float64)
    t0 = int(n * rng.uniform(0.3, 0.7))
    start, floor = rng.uniform(1.5, 4.0), rng.uniform(0.1, 1.0)
    scale, p = n / rng.uniform(50, 500), rng.uniform(0.5, 1.2)
    w = int(rng.integers(2, 9))
    k = t[t0:] - t0
    seen = np.r_[t[:t0], t0 + k / w]  # the steps' worth of new data seen
    trend = _power(seen, start, floor, scale, p)
    noise = _noise(n, rng, _log_uniform(rng, 0.01, 0.15), _maybe_rho(rng))
    repeat = (k % w).astype(np.int64)
    noise[t0:] = noise[t0:][(k - repeat).astype(np.int64)]  # the group's first batch, again
    x = trend * noise
    x[t0:] *= (1 - rng.uniform(0.005, 0.05)) ** repeat
    return x, t0


def no_zero_grad(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of the run (a refactor of the step) `optimizer.zero_grad()` is never called:
    each `.grad` is the sum of every gradient since, so Adam's update locks onto the direction
    of that running sum and the weights travel along it at the learning rate's speed: the loss
    first dips by 2-10% over 20-200 steps (the direction still points downhill), then rises as
    the square of the distance past the minimum, back to 1-2x the run's start within 500-5,000
    steps, where it stays with its batch noise (1-15%) growing to 5-30% (saturated, confidently
    wrong outputs)."""
    trend, t0 = _trend(n, rng), int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0, dtype=np.float64)
    level = float(trend[t0])
    low = level * (1 - rng.uniform(0.02, 0.1))
    k_min = rng.uniform(20, 200)
    top = float(trend[0]) * rng.uniform(1.0, 2.0)
    climb = _log_uniform(rng, 500, 5000)
    path = np.where(
        k < k_min,
        level - (level - low) * (1 - (1 - k / k_min) ** 2),
        low + (top - low) * np.minimum((k - k_min) / climb, 1) ** 2,
    )
    trend[t0:] = path
    sd = _log_uniform(rng, 0.01, 0.15)
    grown = np.full(n, sd)
    grown[t0:] = sd + (max(sd, rng.uniform(0.05, 0.3)) - sd) * np.minimum(np.maximum(k - k_min, 0) / climb, 1)
    return trend * _noise(n, rng, np.maximum(grown, 0.005), _maybe_rho(rng)), t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "optimizer_orphaned": optimizer_orphaned,
    "inf_loss_creep": inf_loss_creep,
    "worker_duplicates": worker_duplicates,
    "no_zero_grad": no_zero_grad,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
