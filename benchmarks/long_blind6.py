"""A sixth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind6`.

    .venv/bin/python benchmarks/long_runs.py --blind6 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how a real
practice's loss looks over 10^5-10^6 steps (the practice is cited in its docstring), its
parameters drawn per seed, and none of them is one of `long_runs.KINDS`, `long_blind.KINDS`,
`long_blind2.KINDS`, `long_blind3.KINDS`, `long_blind4.KINDS` or `long_blind5.KINDS` (nor a
bug of their `BUGS`). They are to be measured once, on the held-out seeds (`SEEDS`), and not
tuned on: a rule changed after looking at them makes them a tuning set.

The interface is `long_blind5`'s: a kind is `(n, rng) -> loss`; seven kinds record the
learning-rate schedule they follow, and `series(kind, n, rng)` gives all that a run records,
the loss and, where the kind has them, the learning rate (`LR`, as the PyTorch hook records
it, in real units) and the mode of each step (`MODE`: one kind, `val_crossover`, has
validation passes whose steps save their loss in EVAL mode). A bug is
`(n, rng) -> (loss, the step its defect begins)`. Only numpy here: the series can be generated
and looked at without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

import numpy as np
from long_blind import _ar1, _log_uniform, _maybe_rho, _noise, _power  # the first blind set's helpers
from long_blind3 import _lag, _transient  # the third's
from long_blind4 import _f32, _gamma  # the fourth's
from long_blind5 import _sig  # the fifth's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE: the mode of each step (`val_crossover` records one)
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 6000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _cosine(u: np.ndarray) -> np.ndarray:
    """A half cosine from 1 (u = 0) to 0 (u = 1), flat outside."""
    return 0.5 * (1 + np.cos(np.pi * np.clip(u, 0, 1)))


def _lm_floor_power(
    area: np.ndarray, start: float, floor: float, n: int, rng: np.random.Generator
) -> np.ndarray:
    """An LM's loss along the learning rate's area: a power law from `start` towards `floor`,
    most of the fall within 1/200-1/2,000 of the run."""
    return _power(area, start, floor, n / _log_uniform(rng, 200, 2000), rng.uniform(0.5, 0.8))


# the healthy kinds ----------------------------------------------------------------------------
def _word2vec_sgns(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    k = int(rng.choice([5, 5, 10, 15]))  # negative
    alpha0 = float(rng.choice([0.01, 0.025, 0.025, 0.025, 0.05]))
    lr = alpha0 - (alpha0 - 1e-4) * t / n  # linear over all epochs' words to min_alpha
    epochs = int(rng.choice([1, 3, 5, 5, 5, 10, 20]))
    per_epoch = n / epochs
    start = (k + 1) * math.log(2)  # syn1neg starts at 0: every sigmoid is 1/2
    trend = _power(
        np.cumsum(lr) / alpha0, start, start * rng.uniform(0.15, 0.35), n / _log_uniform(rng, 200, 5000),
        rng.uniform(0.4, 0.8),
    )  # fmt: skip
    epoch = np.minimum((t // per_epoch).astype(np.int64), epochs - 1)
    held = np.cumprod(np.r_[1.0, 1 - rng.uniform(0, 0.03, epochs - 1)])  # sentences seen before
    length = int(math.ceil(per_epoch))
    corr = max(2.0, per_epoch * rng.uniform(0.001, 0.02))
    section = np.exp(rng.uniform(0.02, 0.08) * _ar1(rng.standard_normal(length), 1 - 1 / corr))
    pos = np.minimum((t - epoch * per_epoch).astype(np.int64), length - 1)
    level = trend * held[epoch] * section[pos]  # the corpus in its order, the same every epoch
    pairs = _log_uniform(rng, 1e3, 1e5)
    return {"loss": _f32(level * _noise(n, rng, 1 / math.sqrt(pairs))), LR: lr}


def word2vec_sgns(n: int, rng: np.random.Generator) -> np.ndarray:
    """Skip-gram word2vec with negative sampling (Mikolov et al. 2013; word2vec.c, gensim's
    `Word2Vec(sg=1, negative=k)`, or a PyTorch SGNS reading the corpus in the same way): the
    output vectors (`syn1neg`) start at zero, so the loss per (centre, context) pair is
    (k + 1) ln 2 at first (k = 5-15 negatives); alpha (0.01-0.05, 0.025 most often) decays
    linearly over all the epochs' words to `min_alpha` 1e-4, and the loss follows its area down
    towards 15-35% of the start; the corpus is read in its order (not shuffled), so the
    sections' difficulty (+-2-8%, correlated over 0.1-2% of an epoch) comes back the same in
    every epoch (1-20), each later one 0-3% lower; the batch of 1k-100k pairs adds a noise of
    1/sqrt(pairs); float32."""
    return _word2vec_sgns(n, rng)["loss"]


def _nerf_rays(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    iters = float(rng.choice([200_000, 300_000, 500_000]))
    decay = float(rng.choice([250_000, 500_000]))  # lrate_decay * 1000
    lr = 5e-4 * 0.1 ** (t * iters / n / decay)
    area = np.cumsum(lr) / 5e-4
    mid = rng.uniform(0.01, 0.04)  # after the colours and the background
    fine_end = 10 ** (-rng.uniform(25, 35) / 10)  # PSNR 25-35 dB
    fine = fine_end + (mid - fine_end) / (1 + area / (n / _log_uniform(rng, 20, 300))) ** rng.uniform(
        0.5, 1.0
    )
    fine += (rng.uniform(0.05, 0.25) - mid) * np.exp(-t / (n * rng.uniform(0.001, 0.005) / 4))
    progress = 1 - fine / fine[0]
    coarse = fine * (1 + (rng.uniform(1.3, 2.5) - 1) * progress)
    level = coarse + fine
    if rng.random() < 0.5:  # a Blender scene: precrop_iters 500, the centre half of the image
        level[t < 500 / iters * n] *= rng.uniform(1.5, 3.0)
    cv = rng.uniform(0.05, 0.15) * (1 + progress)
    return {"loss": _f32(level * _gamma(n, rng, cv)), LR: lr}


def nerf_rays(n: int, rng: np.random.Generator) -> np.ndarray:
    """A NeRF fit to one scene (Mildenhall et al. 2020; bmild/nerf, yenchenlin/nerf-pytorch):
    the coarse plus the fine network's MSE over a batch of 1,024-4,096 random rays, Adam at
    5e-4 decayed exponentially, x0.1 every 250k or 500k iterations (`lrate_decay`), the run
    200k-500k iterations; each network's MSE from 0.05-0.25 (grey outputs) down within
    0.1-0.5% of the run to 0.01-0.04 (the colours and the background), then along the rate's
    area towards a fine MSE of 10^-2.5-10^-3.5 (PSNR 25-35 dB), the coarse network's 1.3-2.5x
    that; on Blender scenes
    (half the seeds) the first 500 iterations sample the centre half of the image only
    (`precrop_iters`), where the loss is 1.5-3x higher; skewed ray-batch noise of 5-15%, up to
    twice that as the error concentrates on edges; float32."""
    return _nerf_rays(n, rng)["loss"]


def _dino_selfdistill(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.choice([100, 300, 800]))
    e = t / (n / epochs)
    peak = 5e-4 * float(rng.choice([256, 512, 1024])) / 256  # lr x batch / 256
    lr = np.where(e < 10, peak * e / 10, 1e-6 + (peak - 1e-6) * _cosine((e - 10) / (epochs - 10)))
    warmed = rng.random() < 0.5  # warmup_teacher_temp 0.04 -> teacher_temp 0.07 over 30 epochs
    temp = 0.04 + 0.03 * np.minimum(e / 30, 1) * warmed
    soft = rng.uniform(0.2, 0.8) * (temp - 0.04) / 0.03  # the softer targets' entropy
    end = rng.uniform(2.0, 4.5)
    level = _power(
        np.cumsum(lr) / peak, math.log(65536), end, n / _log_uniform(rng, 50, 500), rng.uniform(0.5, 1.0)
    )
    x = (level + soft) * _noise(n, rng, rng.uniform(0.005, 0.02), _maybe_rho(rng))
    return {"loss": _f32(x), LR: lr}


def dino_selfdistill(n: int, rng: np.random.Generator) -> np.ndarray:
    """DINO self-distillation of a ViT (Caron et al. 2021, facebookresearch/dino): the
    cross-entropy between the momentum teacher's centred, sharpened softmax over 65,536
    prototypes and the student's, over the pairs of 2 global and 6-10 local crops; from
    ln(65,536) = 11.09 (both uniform at initialization) down along the learning rate's area
    towards 2-4.5; AdamW at 5e-4 x batch / 256 (batch 256-1,024), warmed up linearly over 10
    epochs and then a cosine to 1e-6 per iteration (100/300/800 epochs); on half the seeds the
    teacher temperature is warmed up from 0.04 to 0.07 over the first 30 epochs
    (`warmup_teacher_temp_epochs`), its softer targets adding 0.2-0.8 nats of entropy; batch
    noise 0.5-2%, AR-correlated on half the seeds; float32."""
    return _dino_selfdistill(n, rng)["loss"]


def _noisy_label_memorization(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    if rng.random() < 0.5:
        milestones, gamma = (0.5, 0.75), 0.1
    else:  # WideResNet's 60/120/160 of 200 epochs
        milestones, gamma = (0.3, 0.6, 0.8), 0.2
    phase = np.searchsorted(np.asarray(milestones) * n, t, side="right")
    lr = 0.1 * gamma**phase
    classes = int(rng.choice([10, 100]))
    eta = rng.uniform(0.2, 0.6)  # the share of wrong labels
    chance = math.log(classes)
    c_end, c_high = rng.uniform(0.02, 0.2), rng.uniform(0.2, 0.6)  # at the last rate; at 0.1
    floor = c_end + (c_high - c_end) * _lag(lr / 0.1, n * rng.uniform(0.002, 0.01), 1.0)  # SGD's noise
    area = np.cumsum(lr) / 0.1
    learned = 1 - 1 / (1 + area / (n / _log_uniform(rng, 100, 1000))) ** rng.uniform(0.7, 1.2)
    clean = floor + (chance - floor) * (1 - learned)
    confident = chance + (rng.uniform(2.5, 4.5) + (chance - math.log(10)) - chance) * learned
    keep = [rng.uniform(0.8, 0.95), rng.uniform(0.15, 0.5), rng.uniform(0.1, 0.4), rng.uniform(0.2, 0.6)]
    bounds = np.r_[0.0, np.asarray(milestones) * n, float(n)]
    rate = np.zeros(n)
    for i in range(len(bounds) - 1):  # the memorization rate of each phase: faster at a lower rate
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        rate[lo:hi] = -math.log(keep[min(i, 3)]) / max(hi - lo, 1)
    memo = np.exp(-np.cumsum(_lag(rate, n * rng.uniform(0.005, 0.02), rate[0])))
    noisy = confident * memo + c_end
    batch = int(rng.choice([64, 128, 256]))
    wrong = rng.binomial(batch, eta, n)
    x = ((batch - wrong) * clean + wrong * noisy) / batch
    return {"loss": x * _gamma(n, rng, rng.uniform(0.02, 0.06)), LR: lr}


def noisy_label_memorization(n: int, rng: np.random.Generator) -> np.ndarray:
    """A ResNet trained on CIFAR-10/100 with 20-60% of the labels flipped at random (the
    noisy-label benchmarks: Zhang et al. 2017; Arpit et al. 2017; Han et al. 2018, whose
    baselines show it): SGD at 0.1, x0.1 at 50% and 75% of the run (or x0.2 at 30/60/80%, the
    WideResNet recipe); the clean samples' loss falls from ln(C) to 0.2-0.6 at the rate of
    0.1 and to 0.02-0.2 at the last one (lagging the rate by 0.2-1% of the run), while the
    mislabeled ones' loss first rises from ln(C) to 2.5-4.5 (+ ln(C/10)) as the model learns
    the true classes, then falls as it memorizes them: slowly at 0.1 (to 80-95%), fast after
    each decay (to 15-50% of that, then 10-40%, then 20-60% in a third phase; the pace
    lagging by 0.5-2% of the run); the batch (64-256) mixes the two binomially, so the loss
    plateaus near the labels' noise entropy and drops in steps; 2-6% skewed noise on top."""
    return _noisy_label_memorization(n, rng)["loss"]


def _deepseek_mtp(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 1.5e-4, 4.2e-4)
    warm = n * rng.uniform(0.001, 0.005)
    s1 = n * rng.uniform(0.6, 0.72)  # 10T of 14.8T tokens: the decay and the weight switch
    s2 = min(s1 + n * rng.uniform(0.27, 0.3), n * 0.97)
    s3 = s2 + (n - s2) * 0.67
    rel = np.where(t < warm, t / warm, np.where(t < s1, 1.0, 0.1 + 0.9 * _cosine((t - s1) / (s2 - s1))))
    rel = np.where(t >= s2, 0.1, rel)
    rel = np.where(t >= s3, 7.3 / 220, rel)
    floor = rng.uniform(1.6, 2.2)
    main = _lm_floor_power(np.cumsum(rel), math.log(129_280), floor, n, rng)
    main -= floor * rng.uniform(0.03, 0.08) * np.where(t > warm, 1 - rel, 0)  # the annealing gain
    mtp = main + rng.uniform(0.3, 0.6)  # the depth-1 module's loss on the token after next
    lam = np.where(t < s1, 0.3, 0.1)
    ramp = n * rng.uniform(0.02, 0.05)  # the batch: 3,072 -> 15,360 sequences
    batch = 3072 + (15360 - 3072) * np.minimum(t / ramp, 1)
    sd = floor * rng.uniform(0.002, 0.008) * np.sqrt(15360 / batch)
    z = rng.standard_normal(n)
    rho = _maybe_rho(rng)
    x = main + lam * mtp + sd * (_ar1(z, rho) if rho else z)
    return {"loss": _f32(x), LR: peak * rel}


def deepseek_mtp(n: int, rng: np.random.Generator) -> np.ndarray:
    """LLM pretraining with a multi-token-prediction objective as in DeepSeek-V3 (DeepSeek-AI
    2024, section 4.2), the total that is backpropagated: the main LM loss plus lambda x the
    MTP module's loss (0.3-0.6 nats above it, predicting the token after next), lambda 0.3 for
    the first 10T of 14.8T tokens (here 60-72% of the run) and 0.1 after, so the logged loss
    drops by 0.2 x the MTP loss at once where the cosine decay begins; the rate (peak
    1.5e-4-4.2e-4) warmed up over 0.1-0.5%, constant, a cosine to 10% over 27-30% of the run,
    then 10% and 3.3% of the peak for the last two thirds and third of what is left; the main
    loss from ln(129,280) along the rate's area to 1.6-2.2, 3-8% lower at the end for the
    annealing; the batch ramps from 3,072 to 15,360 sequences over the first 2-5%, the noise
    (0.2-0.8% of the floor at the full batch, AR on half the seeds) falling by sqrt(5); float32."""
    return _deepseek_mtp(n, rng)["loss"]


def _bert_lamb_two_phase(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    n1 = int(n * rng.uniform(0.8, 0.9))  # phase 1: sequences of 128
    p1, p2 = 6e-3 * rng.uniform(0.7, 1.0), 4e-3 * rng.uniform(0.7, 1.0)
    w1, w2 = 0.2843 * n1, 0.128 * (n - n1)
    u1, u2 = t / n1, (t - n1) / (n - n1)
    lr1 = p1 * np.where(t < w1, t / w1, np.sqrt(np.clip(1 - u1, 0, 1)))
    lr2 = p2 * np.where(t - n1 < w2, (t - n1) / w2, np.sqrt(np.clip(1 - u2, 0, 1)))
    lr = np.where(t < n1, lr1, lr2)
    start = math.log(30_522) + math.log(2)  # MLM + NSP at initialization
    unigram = rng.uniform(7.3, 7.8) + math.log(2)  # the MLM's unigram plateau, NSP at chance
    end1 = rng.uniform(1.4, 2.0)
    area = np.cumsum(np.where(t < n1, lr1, 0)) / p1
    stay = n1 * rng.uniform(0.03, 0.1)  # area spent on the plateau
    fall = end1 + (unigram - end1) / (
        1 + np.maximum(area - stay, 0) / (n1 * rng.uniform(0.01, 0.05))
    ) ** rng.uniform(0.6, 1.0)
    level = fall + (start - unigram) * np.exp(-t / (n1 * rng.uniform(0.002, 0.01) / 4))
    reached = float(level[n1 - 1])
    k = t[n1:] - n1
    area2 = np.cumsum(lr2[n1:]) / p2
    low = rng.uniform(0.8, 0.92)
    level[n1:] = reached * (1 - (1 - low) * np.sqrt(area2 / area2[-1]))
    level[n1:] *= 1 + rng.uniform(0, 0.08) * _transient(
        k, rng.uniform(5, 50), (n - n1) * rng.uniform(0.05, 0.2)
    )
    sd = np.where(t < n1, 1.0, 1 / math.sqrt(2)) * rng.uniform(0.003, 0.01)
    return {"loss": _f32(level * _noise(n, rng, sd, _maybe_rho(rng))), LR: lr}


def bert_lamb_two_phase(n: int, rng: np.random.Generator) -> np.ndarray:
    """BERT-Large pretraining with LAMB in two phases (You et al. 2020; NVIDIA's
    DeepLearningExamples recipe: 7,038 steps at sequence length 128 and batch 64k, then 1,563
    at 512 and 32k), the logged MLM + NSP loss: phase 1 (80-90% of the run) at 6e-3
    (x0.7-1), warmed up over 28.43% of it, then a polynomial decay (power 0.5) to 0; phase 2
    again from 0 to 4e-3 (x0.7-1) over 12.8% of it, then the same decay. From ln(30,522) +
    ln 2 = 11.0 down to the unigram plateau (7.3-7.8 + ln 2) within 0.2-1% of phase 1, held
    there for an area under the rate of 3-10% of the phase's steps at its peak, then down to
    1.4-2.0 by the phase's end; in phase 2 the loss first rises by 0-8% (positions 128-511
    untrained) within 5-50 steps, decaying over 5-20% of the phase, and falls to 80-92% of
    phase 1's end; batch noise 0.3-1% (AR on half the seeds), /sqrt 2 in phase 2 (twice the
    tokens); float32."""
    return _bert_lamb_two_phase(n, rng)["loss"]


def _early_dropout(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.choice([100, 300, 300]))
    warm = n * int(rng.choice([5, 20])) / epochs
    peak = _log_uniform(rng, 1e-3, 4e-3)
    lr = np.where(t < warm, peak * t / warm, 1e-6 + (peak - 1e-6) * _cosine((t - warm) / (n - warm)))
    off = n * int(rng.integers(20, 51)) / epochs
    rate = rng.uniform(0.05, 0.2)
    constant = rng.random() < 0.5  # "early dropout": constant, then off; or linearly to 0
    p = np.where(t < off, rate, 0.0) if constant else rate * np.clip(1 - t / off, 0, 1)
    end = rng.uniform(2.4, 3.5)
    level = _power(
        np.cumsum(lr) / peak, math.log(1000), end, n / _log_uniform(rng, 50, 300), rng.uniform(0.6, 1.0)
    )
    level *= 1 + rng.uniform(0.03, 0.12) * p / rate
    x = level * _gamma(n, rng, rng.uniform(0.01, 0.03)) * _noise(n, rng, rng.uniform(0.01, 0.03))
    return {"loss": x, LR: lr}


def early_dropout(n: int, rng: np.random.Generator) -> np.ndarray:
    """ImageNet classification with early dropout (Liu et al. 2023, "Dropout Reduces
    Underfitting", facebookresearch/dropout: ViT/ConvNeXt, AdamW at 1e-3-4e-3 warmed up over 5
    or 20 of 100-300 epochs, then a cosine to 1e-6): dropout (or stochastic depth) at 5-20%
    for the first 20-50 epochs only, constant then switched off (half the seeds: the training
    loss drops by 3-12% at that step) or decreasing linearly to 0 (the others: the same drop,
    spread over the phase); the loss, with label smoothing and mixup, from ln 1,000 along the
    rate's area to 2.4-3.5; batch noise 1-3% skewed, 1-3% log-normal."""
    return _early_dropout(n, rng)["loss"]


def xgboost_logloss(n: int, rng: np.random.Generator) -> np.ndarray:
    """Gradient-boosted trees (XGBoost's `train(..., evals=[(dtrain, "train")])`, one value per
    boosting round, `eta` 0.005-0.1, depth 4-10): the training set's `logloss` (binary, from
    base_score 0.5: ln 2) or `mlogloss` (3-10 classes: ln C), computed on the whole training
    set, so there is no batch noise: it falls monotonically, within 2-10 / eta rounds to a
    fitted level of 15-45% of the start, then on as the trees fit the training set ever closer
    (a power law, 5-50% of the fitted level by the end); with `subsample` < 1 (half the seeds)
    a round's tree can take back a little (each round's gain x (1 +- 0.3-1.0)); the values as
    the evaluation string carries them, with 6 significant digits (`train-error:0.113926`):
    late in the run rounds that gain less than that repeat the value."""
    t = np.arange(n, dtype=np.float64) + 1
    start = math.log(2) if rng.random() < 0.5 else math.log(float(rng.integers(3, 11)))
    eta = _log_uniform(rng, 0.005, 0.1)
    fit = start * rng.uniform(0.15, 0.45)
    q = rng.uniform(0.3, 1.0)
    slow = (rng.uniform(0.05, 0.5) ** (-1 / q) - 1) / n  # fit x end share at the last round
    level = fit * (1 + t * slow) ** -q + (start - fit) * np.exp(-t * eta / rng.uniform(2, 10))
    gain = np.diff(np.r_[start, level])
    if rng.random() < 0.5:
        gain *= 1 + rng.uniform(0.3, 1.0) * rng.standard_normal(n)
    return _sig(np.maximum(start + np.cumsum(gain), 1e-6), 6)


def masked_diffusion_lm(n: int, rng: np.random.Generator) -> np.ndarray:
    """A masked diffusion language model (MDLM, Sahoo et al. 2024, kuleshov-group/mdlm; SEDD,
    MD4), 1M steps of batch 512 at a constant 3e-4: the NELBO per token, (1/t) x the
    cross-entropy summed over the masked tokens / L, each sequence at its own masking rate t
    ~ U(1e-3, 1) (a linear schedule); from ln(vocabulary) (OpenWebText with GPT-2's 50,257,
    L = 1,024; or LM1B with bert-base's 30,522, L = 128) towards 3.0-3.6 (3.3-4.2 on LM1B) as
    a power law; the batch noise from the masking rates is 35-50% of the loss per sequence
    over sqrt(512) (on half the seeds the rates are stratified, low-discrepancy: a quarter of
    that); the sequences at t below 10 / L weigh their few masked tokens by 1/t, an upper
    tail: x count / (t L), count ~ Poisson(t L)."""
    t = np.arange(n, dtype=np.float64)
    owt = rng.random() < 0.5
    vocab, length = (50_257, 1024) if owt else (30_522, 128)
    floor = rng.uniform(3.0, 3.6) if owt else rng.uniform(3.3, 4.2)
    level = _power(t, math.log(vocab), floor, n / _log_uniform(rng, 300, 3000), rng.uniform(0.4, 0.7))
    batch = 512
    stratified = rng.random() < 0.5
    spread = rng.uniform(0.35, 0.5) * (0.25 if stratified else 1.0)
    x = level * (1 + spread / math.sqrt(batch) * rng.standard_normal(n))
    t_c = 10 / length
    share = (t_c - 1e-3) / (1 - 1e-3)
    m = np.full(n, round(batch * share)) if stratified else rng.poisson(batch * share, n)
    step = np.repeat(np.arange(n), m)
    ts = rng.uniform(1e-3, t_c, len(step))
    count = rng.poisson(ts * length)
    easy = level[step] * rng.uniform(0.5, 0.8)  # little masked: almost all the context
    x += np.bincount(step, easy * (count / (ts * length) - 1), minlength=n) / batch
    return _f32(x)


def clip_elastic_world(n: int, rng: np.random.Generator) -> np.ndarray:
    """CLIP pretraining with OpenCLIP's `ClipLoss` over the global batch (features all-gathered,
    `--gather-with-grad`), run elastically (torchrun's elastic agent, a SLURM requeue with the
    nodes it can get): 1-4 times the job resumes from its checkpoint with 25-75% of its nodes
    (4-32 nodes of 8 GPUs, 128-512 pairs per GPU), or with all of them again, and the loss
    level moves with the number of negatives: per pair ln(1 + (B - 1) exp(-margin)), the
    margin the model has learned (ln B at initialization, CLIP's logit scale 1/0.07 over random
    embeddings; towards a loss of 1.0-3.0 at the full batch along a power law), so a smaller
    batch logs a lower loss at once; rank 0 logs its own 128-512 rows: noise 0.4-0.8 over
    sqrt(rows), AR on half the seeds; float32."""
    t = np.arange(n, dtype=np.float64)
    per_gpu = int(rng.choice([128, 256, 512]))
    nodes = int(rng.integers(4, 33))
    full = float(per_gpu * 8 * nodes)
    base = _power(
        t, math.log(full), rng.uniform(1.0, 3.0), n / _log_uniform(rng, 50, 1000), rng.uniform(0.5, 0.9)
    )
    margin = -np.log(np.expm1(base) / (full - 1))
    world = np.full(n, float(nodes))
    for at in np.sort(rng.uniform(0.1, 0.9, int(rng.integers(1, 5)))):
        now = nodes if rng.random() < 0.35 else max(1, round(nodes * rng.uniform(0.25, 0.75)))
        world[int(at * n) :] = now
    b = per_gpu * 8 * world
    level = np.log1p((b - 1) * np.exp(-margin))
    noise = _noise(n, rng, rng.uniform(0.4, 0.8) / math.sqrt(per_gpu), _maybe_rho(rng))
    return _f32(level * noise)


def reward_model_pairwise(n: int, rng: np.random.Generator) -> np.ndarray:
    """A reward model trained on human preference pairs for RLHF (Stiennon et al. 2020; Ouyang
    et al. 2022, InstructGPT: one epoch; TRL's `RewardTrainer`), the Bradley-Terry loss
    -log sigmoid(r_chosen - r_rejected) averaged over batches of 32-128 pairs: the randomly
    initialized head gives margins of spread 0.3-1.0, so the loss starts a little above ln 2
    (0.70-0.80); within 1-5% of the run the accuracy climbs to 65-75% (the annotators' own
    agreement) and then by 0-3 points more, the margins calibrated (normal, their mean half
    their variance) and 0-30% overconfident by the end: the loss settles near 0.5-0.63 and
    barely moves; each pair's margin is drawn, so the batch noise is large and skewed."""
    t = np.arange(n, dtype=np.float64)
    batch = int(rng.choice([32, 64, 128]))
    grown = 1 - np.exp(-t / (n * rng.uniform(0.01, 0.05)))
    acc = 0.5 + (rng.uniform(0.65, 0.75) - 0.5) * grown + rng.uniform(0, 0.03) * t / n
    inv = NormalDist().inv_cdf
    kappa = np.interp(acc, np.linspace(0.5, 0.8, 61), [inv(a) for a in np.linspace(0.5, 0.8, 61)])
    calibrated = 2 * kappa * (1 + rng.uniform(0, 0.3) * t / n)  # the spread whose mean is spread^2 / 2
    spread = rng.uniform(0.3, 1.0) * (1 - grown) + calibrated * grown
    out = np.empty(n)
    for lo in range(0, n, 20_000):  # by blocks: n x batch margins
        hi = min(n, lo + 20_000)
        d = (kappa[lo:hi, None] + rng.standard_normal((hi - lo, batch))) * spread[lo:hi, None]
        out[lo:hi] = np.logaddexp(0, -d).mean(axis=1)
    return _f32(out)


def sortagrad_ctc(n: int, rng: np.random.Generator) -> np.ndarray:
    """Speech recognition with CTC and SortaGrad (Amodei et al. 2016, Deep Speech 2, section
    3.1; SeanNaren/deepspeech.pytorch): the loss summed over each utterance's frames and
    averaged over the batch (16-64 utterances of LibriSpeech: log-normal lengths, median
    10-14 s, filtered at 15-35 s), so a batch's loss is its mean length x the loss per second.
    In the first of 15-70 epochs the batches come in order of length, shortest first: the loss
    falls less than the model learns, and rises in the epoch's later part (longer and longer
    batches); from the second epoch on the same
    length-sorted batches come in a random order, so the loss jumps between their lengths
    (1-35 s). The loss per second from 60-150 nats (untrained) towards 0.3-1.5 along a power
    law, most of it within the first epochs; 3-8% skewed noise per batch."""
    epochs = int(rng.integers(15, 71))
    per_epoch = int(math.ceil(n / epochs))
    batch = int(rng.choice([16, 32, 64]))
    cap = rng.uniform(15, 35)
    raw = np.exp(
        math.log(rng.uniform(10, 14)) + rng.uniform(0.4, 0.6) * rng.standard_normal(3 * per_epoch * batch)
    )
    lengths = np.sort(raw[raw <= cap][: per_epoch * batch])
    if len(lengths) < per_epoch * batch:  # (never at these settings) pad with the longest
        lengths = np.r_[lengths, np.full(per_epoch * batch - len(lengths), cap)]
    means = lengths.reshape(per_epoch, batch).mean(axis=1)
    order = np.concatenate([means] + [rng.permutation(means) for _ in range(epochs - 1)])[:n]
    t = np.arange(n, dtype=np.float64)
    q = _power(
        t,
        rng.uniform(60, 150),
        rng.uniform(0.3, 1.5),
        n / _log_uniform(rng, 300, 3000),
        rng.uniform(0.6, 1.0),
    )
    return order * q * _gamma(n, rng, rng.uniform(0.03, 0.08))


def _val_crossover(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    epochs = int(rng.integers(30, 301))
    span = n / epochs
    val = int(min(rng.integers(20, 401), span * rng.uniform(0.05, 0.2)))
    classes = float(rng.choice([10, 100, 1000]))
    chance = math.log(classes)
    mode = np.full(n, TRAIN)
    starts = (np.arange(epochs) * span).astype(np.int64)
    for s0 in starts + int(span) - val:  # each epoch ends with its validation pass
        mode[max(0, s0) : s0 + val] = EVAL
    t = np.arange(n, dtype=np.float64)
    end = chance * rng.uniform(0.05, 0.3)
    scale, p = n / _log_uniform(rng, 30, 300), rng.uniform(0.6, 1.2)
    trend = _power(t, chance, end, scale, p)
    train = trend * _noise(n, rng, rng.uniform(0.03, 0.1), _maybe_rho(rng))
    below, above = rng.uniform(0.6, 0.9), rng.uniform(1.0, 1.2)
    fitted = ((chance - trend) / (chance - end)) ** rng.uniform(1, 4)  # how far the fit has gone
    held_out = np.minimum.accumulate(trend * (below + (above - below) * fitted))
    batches = _noise(val, rng, rng.uniform(0.05, 0.2))  # the same held-out batches every pass
    x = train.copy()
    for s0 in np.flatnonzero(np.diff(np.r_[TRAIN, mode]) != 0):
        if mode[s0] != EVAL:
            continue
        m = min(val, n - s0)
        x[s0 : s0 + m] = held_out[s0] * batches[:m]
    return {"loss": x, MODE: mode}


def val_crossover(n: int, rng: np.random.Generator) -> np.ndarray:
    """An image classifier trained with strong regularization (dropout, RandAugment, mixup:
    the Keras FAQ's "why is my training loss much higher than my testing loss?"), validated at
    the end of each of 30-300 epochs on the same held-out batches (20-400 steps in EVAL mode,
    at most 5-20% of an epoch, the global step counting on): the validation loss, without
    dropout or augmentation, sits 10-40% below the training trend at first, and the gap closes
    and turns as the model fits the training set (the ratio goes to 1.0-1.2 as a power 1-4 of
    the share of its fall the training loss has made), the validation loss never rising; from
    ln(C) (10-1,000 classes) to 5-30% of it; training noise 3-10% (AR on half the seeds), the
    held-out batches' own spread 5-20%. See `series` for the modes."""
    return _val_crossover(n, rng)["loss"]


def weight_noise_asr(n: int, rng: np.random.Generator) -> np.ndarray:
    """An attention (LAS) or RNN-T speech recognizer trained with variational weight noise
    switched on partway (Graves 2011; Graves et al. 2013, who add it after the network has
    converged without it; Lingvo's `VariationalNoiseParams(start_step=...)` in its ASR
    recipes): until 5-30% of the run the token cross-entropy (label smoothing 0.1) falls from
    ln(vocabulary of 76 graphemes or 1k-16k word pieces) towards 0.4-1.0; then Gaussian noise
    (std 0.05-0.075) is added to every weight at each step: the loss jumps by 10-40% within
    1-10 steps, the model recovers 30-70% of it over 1-5% of the run and falls on, above the
    noise-free trend; the batch noise (3-8%, skewed: utterance lengths) grows by 20-60% with
    the weight noise."""
    t = np.arange(n, dtype=np.float64)
    vocab = float(rng.choice([76, 1024, 4096, 16384]))
    end = rng.uniform(0.4, 1.0)
    trend = _power(t, math.log(vocab), end * 0.8, n / _log_uniform(rng, 50, 500), rng.uniform(0.6, 1.0))
    at = int(n * rng.uniform(0.05, 0.3))
    k = np.maximum(t - at, 0)
    jump = rng.uniform(0.1, 0.4)
    kept = 1 - rng.uniform(0.3, 0.7)
    rise = np.minimum(k / rng.uniform(1, 10), 1)
    extra = jump * rise * (kept + (1 - kept) * np.exp(-k / (n * rng.uniform(0.01, 0.05))))
    level = trend * (1 + np.where(t >= at, extra, 0))
    cv = rng.uniform(0.03, 0.08) * np.where(t >= at, 1 + rng.uniform(0.2, 0.6), 1.0)
    return level * _gamma(n, rng, cv)


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "word2vec_sgns": word2vec_sgns,
    "nerf_rays": nerf_rays,
    "dino_selfdistill": dino_selfdistill,
    "noisy_label_memorization": noisy_label_memorization,
    "deepseek_mtp": deepseek_mtp,
    "bert_lamb_two_phase": bert_lamb_two_phase,
    "early_dropout": early_dropout,
    "xgboost_logloss": xgboost_logloss,
    "masked_diffusion_lm": masked_diffusion_lm,
    "clip_elastic_world": clip_elastic_world,
    "reward_model_pairwise": reward_model_pairwise,
    "sortagrad_ctc": sortagrad_ctc,
    "val_crossover": val_crossover,
    "weight_noise_asr": weight_noise_asr,
}
# the kinds that record more than their loss: {"loss", LR} or {"loss", MODE} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "word2vec_sgns": _word2vec_sgns,
    "nerf_rays": _nerf_rays,
    "dino_selfdistill": _dino_selfdistill,
    "noisy_label_memorization": _noisy_label_memorization,
    "deepseek_mtp": _deepseek_mtp,
    "bert_lamb_two_phase": _bert_lamb_two_phase,
    "early_dropout": _early_dropout,
    "val_crossover": _val_crossover,
}


def series(kind: str, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """What a run of `kind` records: {"loss": ...} and, where the kind has them, the learning
    rate (`LR`) and the mode of each step (`MODE`)."""
    if kind in _SERIES:
        return _SERIES[kind](n, rng)
    return {"loss": KINDS[kind](n, rng)}


def rng_for(kind: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + list(KINDS).index(kind)])


# the buggy runs: (series, the step the defect begins) -------------------------------------------
def _lm_base(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A healthy LM loss to break, and its noise-free trend: from ln(32k-128k) down a power law
    to 2-3.5 nats, most of the fall within 1/50-1/500 of the run, 1-5% batch noise (AR on half
    the seeds)."""
    t = np.arange(n, dtype=np.float64)
    trend = _power(
        t, math.log(float(rng.choice([32_000, 50_257, 128_256]))), rng.uniform(2.0, 3.5),
        n / _log_uniform(rng, 50, 500), rng.uniform(0.5, 0.9),
    )  # fmt: skip
    return trend * _noise(n, rng, _log_uniform(rng, 0.01, 0.05), _maybe_rho(rng)), trend


def causal_mask_leak(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of an LM's run (a refactor of the attention: `is_causal=True` dropped from
    `F.scaled_dot_product_attention`, a padding mask passed where the causal one belonged)
    every position attends to the tokens after it, the one it predicts among them: the model
    learns to copy it, and the loss falls from its level (2-3.5 nats) over 100-3,000 steps (a
    logistic in log-loss) to 0.005-0.1 nats, where it stays with a relative noise of 5-30%
    (the batch's few uncopyable tokens)."""
    x, trend = _lm_base(n, rng)
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0, dtype=np.float64)
    low = _log_uniform(rng, 0.005, 0.1)
    span = _log_uniform(rng, 100, 3000)
    share = 1 / (1 + np.exp(-(k - span / 2) / (span / 10)))  # in log space: level -> low
    share = (share - share[0]) / (1 - share[0])
    logged = np.log(trend[t0:]) * (1 - share) + math.log(low) * share
    sd = rng.uniform(0.05, 0.3)
    x[t0:] = np.exp(logged) * x[t0:] / trend[t0:] * _noise(n - t0, rng, sd * share)
    return x, t0


def nan_bursts(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of the run a shard with a corrupt stretch (records whose features are NaN)
    is in the data, read in a fixed shard order each epoch (epochs of 2-10% of the run): every
    time the loader reaches it, 20-500 consecutive batches give a NaN loss (a NaN guard skips
    their updates, so training goes on, healthy in between) - a burst of NaNs at the same
    place in every epoch."""
    x, _ = _lm_base(n, rng)
    t0 = int(n * rng.uniform(0.3, 0.7))
    every = int(n * rng.uniform(0.02, 0.1))
    width = int(rng.integers(20, 501))
    for s in range(t0, n, every):
        x[s : s + width] = np.nan
    return x, t0


def lr_growth_blowup(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Resumed at 30-70% of the run with an `ExponentialLR` whose gamma is above 1 (a typo,
    1.0001 for 0.9999; or a warm-up's multiplier left uncapped): the learning rate grows
    e-fold every 0.5-3% of the run; for its first 1.5-4 e-folds the loss goes on falling,
    0-5% faster, then, past the edge of stability, it rises ever faster, its noise with it,
    up to 10x every 50-500 steps, until at 10^3-10^5x its level the weights overflow and every
    later value is NaN."""
    x, trend = _lm_base(n, rng)
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0, dtype=np.float64)
    tau = n * rng.uniform(0.005, 0.03)
    cross = tau * rng.uniform(1.5, 4.0)  # the steps until the rate passes the edge
    faster = 1 - rng.uniform(0, 0.05) * np.minimum(k / cross, 1)
    past = np.maximum(k - cross, 0)
    per_ten = _log_uniform(rng, 50, 500)
    ramp = per_ten * rng.uniform(2, 10)  # the growth speeds up to 10x per `per_ten` steps
    log10 = past / per_ten * np.minimum(past / ramp, 1) * 0.5 + np.maximum(past - ramp, 0) / per_ten * 0.5
    log10 = np.minimum(log10, 10.0)  # past the cap: NaN below
    x[t0:] *= faster * 10**log10 * _noise(n - t0, rng, np.minimum(0.05 * log10, 0.5))
    cap = 10 ** rng.uniform(3, 5)
    over = np.flatnonzero(10**log10 >= cap)
    if len(over):
        x[t0 + int(over[0]) :] = np.nan
    return x, t0


def softmax_wrong_dim(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of a classifier's run a refactor of the loss writes
    `F.nll_loss(F.log_softmax(logits, dim=0), y)`: the softmax runs over the batch, not the
    classes, so each sample's target logit competes with the other samples' logits for that
    class. A trained model gives the samples of class y a large logit y, so the loss becomes at
    once (within 1-10 steps) the mean of ln(n_y), n_y the number of samples of the sample's
    class in the batch, plus 2-10% of the level before (the other classes' samples): above
    ln C where the batch (32-512) is large for the classes (10), below the healthy level where
    it is small (100 classes); it stays there, its noise the batch's class counts' (a
    multinomial) and 1-3% more, 0-30% above for the first 10-300 steps while the logits
    adjust."""
    t = np.arange(n, dtype=np.float64)
    classes = int(rng.choice([10, 100]))
    trend = _power(
        t,
        math.log(classes),
        math.log(classes) * rng.uniform(0.02, 0.3),
        n / _log_uniform(rng, 50, 500),
        rng.uniform(0.6, 1.2),
    )
    x = trend * _noise(n, rng, _log_uniform(rng, 0.02, 0.15), _maybe_rho(rng))
    t0 = int(n * rng.uniform(0.3, 0.7))
    m = n - t0
    batch = int(rng.choice([32, 64, 128, 256, 512]))
    counts = rng.multinomial(batch, np.full(classes, 1 / classes), size=m).astype(np.float64)
    floor = (counts * np.log(np.maximum(counts, 1))).sum(axis=1) / batch
    k = np.arange(m, dtype=np.float64)
    start = float(trend[t0])
    into = np.minimum(k / rng.uniform(1, 10), 1)
    over = rng.uniform(0, 0.3) * np.exp(-k / _log_uniform(rng, 10, 300))
    rest = start * rng.uniform(0.02, 0.1)  # the other classes' samples: not quite -inf
    level = (start * (1 - into) + (floor + rest) * into) * (1 + over)
    x[t0:] = level * _noise(m, rng, rng.uniform(0.01, 0.03))
    return x, t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "causal_mask_leak": causal_mask_leak,
    "nan_bursts": nan_bursts,
    "lr_growth_blowup": lr_growth_blowup,
    "softmax_wrong_dim": softmax_wrong_dim,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
