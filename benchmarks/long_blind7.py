"""A seventh blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind7`.

    .venv/bin/python benchmarks/long_runs.py --blind7 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of an ordinary supervised or fine-tuning job look over 10^5-10^6 steps (the practice is cited
in its docstring), logging artefacts included (a loss smoothed as a progress bar shows it, the
mean of each logging interval or its median, values rounded to 4 or 6 decimals, a cumulative
average, the small last batch of each epoch, iterations logged twice after a resume), its
parameters drawn per seed; none of them is one of `long_runs.KINDS`, `long_blind.KINDS`, ...
`long_blind6.KINDS` (nor a bug of their `BUGS`). They are to be measured once, on the held-out
seeds (`SEEDS`), and not tuned on: a rule changed after looking at them makes them a tuning set.

The interface is `long_blind6`'s: a kind is `(n, rng) -> loss`; seven kinds record the
learning-rate schedule they follow, and `series(kind, n, rng)` gives all that a run records,
the loss and, where the kind has one, the learning rate (`LR`, as the PyTorch hook records
it, in real units). Where a kind's values are logged every k steps (the mean or the median of
those k steps), a value is one log and its learning rate the one logged with it. No kind here
has evaluation passes, but `MODE` and its codes are kept for the interface. A bug is
`(n, rng) -> (loss, the step its defect begins)`. Only numpy here: the series can be generated
and looked at without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

import numpy as np
from long_blind import _log_uniform, _maybe_rho, _noise, _power  # the first blind set's helpers
from long_blind3 import _lag, _transient  # the third's
from long_blind4 import _f32, _gamma  # the fourth's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE (no kind here records one)
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 7000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _cos_ramp(u: np.ndarray, start: float, end: float) -> np.ndarray:
    """fastai's `SchedCos`: a half cosine from `start` (u = 0) to `end` (u = 1)."""
    return start + (1 - np.cos(np.pi * np.clip(u, 0, 1))) / 2 * (end - start)


def _one_cycle(u: np.ndarray, top: float, pct: float) -> np.ndarray:
    """fastai's `fit_one_cycle` schedule over u in [0, 1): from top / 25 up to `top` over `pct`
    of the steps, then down to top / 2.5e6 (`div=25`, `div_final=1e5`)."""
    return np.where(
        u < pct, _cos_ramp(u / pct, top / 25, top), _cos_ramp((u - pct) / (1 - pct), top, top / 2.5e6)
    )


def _ema(x: np.ndarray, beta: float, resets: np.ndarray) -> np.ndarray:
    """fastai's `AvgSmoothLoss`: a debiased exponential moving average, started again (count 0)
    at each of `resets` (a new `fit`)."""
    out = np.empty(len(x))
    val, count = 0.0, 0
    starts = set(int(r) for r in resets)
    for i, v in enumerate(x):  # 10^5 steps: ~0.05 s
        if i in starts:
            val, count = 0.0, 0
        count += 1
        val = beta * val + (1 - beta) * v
        out[i] = val / (1 - beta**count)
    return out


def _smoothed_ce_floor(classes: int, eps: float) -> float:
    """The entropy of a label-smoothed target: the least a smoothed cross-entropy can be."""
    a, b = 1 - eps + eps / classes, eps / classes
    return -a * math.log(a) - (classes - 1) * b * math.log(b)


# the healthy kinds ----------------------------------------------------------------------------
def _plateau_label_smoothing(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    classes = int(rng.choice([10, 100, 200, 1000]))
    eps = float(rng.choice([0.1, 0.1, 0.1, 0.2]))
    floor = _smoothed_ce_floor(classes, eps)
    chance = math.log(classes)
    epochs = int(rng.integers(60, 301))
    per = n / epochs
    lr0 = 0.1 if rng.random() < 0.5 else 1e-3  # SGD or Adam
    factor = float(rng.choice([0.1, 0.2, 0.5]))
    patience = int(rng.integers(5, 16))
    min_lr = lr0 * float(rng.choice([1e-3, 1e-4]))
    cuts: list[int] = []
    e = int(epochs * rng.uniform(0.15, 0.4))  # the first plateau of the validation loss
    while e < epochs:
        cuts.append(e)
        e += patience + 1 + int(rng.geometric(1 / rng.uniform(2, 15)))  # until the next plateau
    k = np.searchsorted(np.asarray(cuts, dtype=np.float64) * per, t, side="right")
    lr = np.maximum(lr0 * factor ** k.astype(np.float64), min_lr)
    area = np.cumsum(lr / lr0)
    g = 1 / (1 + area / (n / _log_uniform(rng, 30, 300))) ** rng.uniform(0.6, 1.2)
    gap = chance - floor
    held = gap * rng.uniform(0.05, 0.2) * _lag(lr / lr0, n * rng.uniform(0.002, 0.01), 1.0)
    excess = gap * g + (held + gap * rng.uniform(0.003, 0.03)) * (1 - g)
    x = floor * _noise(n, rng, rng.uniform(0.002, 0.01)) + excess * _gamma(n, rng, rng.uniform(0.05, 0.15))
    return {"loss": _f32(x), LR: lr}


def plateau_label_smoothing(n: int, rng: np.random.Generator) -> np.ndarray:
    """An image classifier (10-1,000 classes) trained with `nn.CrossEntropyLoss(label_smoothing=
    0.1 or 0.2)` and `ReduceLROnPlateau(factor=0.1/0.2/0.5, patience=5-15)` stepped on the
    validation loss each of 60-300 epochs (the torchvision / Kaggle practice; SGD at 0.1 or
    Adam at 1e-3, `min_lr` 1e-3 or 1e-4 of it): the first plateau comes at 15-40% of the
    epochs, the next ones every patience + 1 + a few epochs, until the rate sits at `min_lr`;
    at each cut the loss steps down (the part that the rate's noise held up, 5-20% of the gap,
    lagging by 0.2-1% of the run); the smoothed targets put a floor well above 0 under the loss
    (their entropy: 0.50 nats for 10 classes, 1.0 for 1,000 at 0.1), which it approaches from
    ln C and never crosses; skewed batch noise of 5-15% on the part above the floor; float32."""
    return _plateau_label_smoothing(n, rng)["loss"]


def _fastai_fine_tune(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.integers(3, 21))
    n1 = int(n / (epochs + 1))  # `freeze_epochs=1`
    base = float(rng.choice([1e-3, 2e-3, 2e-3, 3e-3]))
    lr = np.where(t < n1, _one_cycle(t / n1, base, 0.99), _one_cycle((t - n1) / (n - n1), base / 2, 0.3))
    classes = int(rng.choice([2, 37, 102, 120]))  # cats vs dogs, Oxford pets, flowers, dogs
    chance = math.log(classes)
    f1 = chance * rng.uniform(0.1, 0.3)
    a1 = np.cumsum(np.where(t < n1, lr / base, 0))
    head = f1 + (chance - f1) * np.exp(-a1 / (n1 * rng.uniform(0.02, 0.1)))
    head *= 1 + rng.uniform(0.05, 0.2) * lr / base  # a high rate holds the head's loss up
    level = head.copy()
    end1 = float(head[n1 - 1])
    a2 = np.cumsum(np.where(t >= n1, lr / (base / 2), 0))
    f2 = end1 * rng.uniform(0.1, 0.4)
    fall = f2 + (end1 - f2) / (1 + a2 / ((n - n1) * rng.uniform(0.02, 0.1))) ** rng.uniform(0.6, 1.2)
    shaken = 1 + rng.uniform(0.05, 0.25) * _lag(lr / (base / 2), (n - n1) * rng.uniform(0.01, 0.04), 0.0)
    level[n1:] = (fall * shaken)[n1:]
    raw = level * _gamma(n, rng, rng.uniform(0.1, 0.3))
    return {"loss": _f32(_ema(raw, 0.98, np.array([0, n1]))), LR: lr}


def fastai_fine_tune(n: int, rng: np.random.Generator) -> np.ndarray:
    """Transfer learning with fastai's `learn.fine_tune(epochs)` (the fast.ai course's first
    lesson: a pretrained ResNet on cats vs dogs, Oxford pets, flowers or Stanford dogs), the
    loss as the `Recorder` keeps it: `smooth_loss`, a debiased EMA (beta 0.98) of the batch
    losses, started again at each `fit`. One frozen epoch with `fit_one_cycle(1, base_lr,
    pct_start=0.99)` (the rate climbs on a cosine from base / 25 through the whole epoch and
    falls to ~0 in its last 1%) trains the new head from ln C to 10-30% of it (5-20% above that at the top rate); then the model is
    unfrozen and `fit_one_cycle(3-20 epochs, slice(base_lr / 200, base_lr / 2),
    pct_start=0.3)`: the rate climbs again for 30% of the phase, shaking the backbone (the loss
    held up by 5-25%, lagging), then anneals to ~0 while the loss falls to 10-40% of the frozen
    phase's end; batch noise 10-30%, skewed, before smoothing. The learning rate recorded is
    the head's group's (base_lr 1e-3-3e-3); float32."""
    return _fastai_fine_tune(n, rng)["loss"]


def _glue_llrd_linear(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    classes = 2 if rng.random() < 0.6 else 3
    chance = math.log(classes)
    epochs = int(rng.choice([2, 3, 3, 5, 10]))
    per = n / epochs
    batch = int(rng.choice([16, 32, 32]))
    warm = n * rng.uniform(0.06, 0.1)
    peak = _log_uniform(rng, 1e-5, 5e-5)
    rel = np.where(t < warm, t / warm, (n - t) / (n - warm))
    area = np.cumsum(rel)
    fast = np.exp(-area / (n * rng.uniform(0.005, 0.03)))  # the pretrained features: a quick fit
    slow = 1 / (1 + area / (n * rng.uniform(0.05, 0.3))) ** rng.uniform(0.7, 1.5)  # memorizing
    e_mid, e_end = rng.uniform(0.05, 0.2), rng.uniform(0.0, 0.02)
    err = e_end + (e_mid - e_end) * slow + ((classes - 1) / classes - e_mid) * fast
    confident = 1 - fast
    m_ok = chance * (1 - confident) + confident * (
        _log_uniform(rng, 0.002, 0.02) + rng.uniform(0.05, 0.15) * slow
    )  # fmt: skip
    m_bad = chance + (rng.uniform(1.0, 3.0) - chance) * confident**2  # confidently wrong: later
    size = np.full(n, batch)
    last = int(rng.integers(1, batch))  # drop_last=False: the data set's remainder
    ends = (np.arange(1, epochs + 1) * per).astype(np.int64) - 1
    size[ends[ends < n]] = last
    wrong = rng.binomial(size, err)
    ok_sum = rng.gamma(np.maximum((size - wrong) * 0.5, 1e-9), m_ok / 0.5) * (size > wrong)
    bad_sum = rng.gamma(np.maximum(wrong * 2.0, 1e-9), m_bad / 2.0) * (wrong > 0)
    return {"loss": _f32((ok_sum + bad_sum) / size), LR: peak * rel}


def glue_llrd_linear(n: int, rng: np.random.Generator) -> np.ndarray:
    """Fine-tuning a pretrained encoder (BERT, RoBERTa, ELECTRA, DeBERTa) on a GLUE task (a
    binary one or MNLI's 3 classes) with layer-wise learning-rate decay (ELECTRA's and
    DeBERTa's recipes: each layer below the head at 0.75-0.95 of the one above) and the Hugging
    Face linear schedule: warm-up over 6-10% of the steps to 1e-5-5e-5 (the head's rate, the
    one recorded), then linearly to 0 at the last step, over 2-10 epochs. The loss per batch
    (16-32 sentences, `drop_last=False`: each epoch's last batch holds the data set's remainder,
    1 to batch - 1) is the mean of its examples' cross-entropies: the training error falls
    within the warm-up (a fast drop from ln C, the pretrained features) to 5-20%, then along the
    rate's area towards 0-2% as the model memorizes, while the right examples' loss goes to
    0.002-0.02 and the wrong ones' to 1-3 nats: a long flat tail of skewed noise (a batch's
    share of wrong examples), which flattens hard as the rate reaches 0; float32."""
    return _glue_llrd_linear(n, rng)["loss"]


def _kd_hinton(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    lr0 = 0.05 if rng.random() < 0.7 else 0.01  # 0.01 for MobileNet / ShuffleNet students
    lr = lr0 * 0.1 ** np.searchsorted(np.array([150, 180, 210]) / 240 * n, t, side="right").astype(float)
    temp = float(rng.choice([2, 3, 4, 4, 8]))
    alpha, ce_w = (0.9, 0.1) if rng.random() < 0.6 else (0.5, 0.5)
    chance = math.log(100)
    share = {2.0: (0.5, 0.7), 3.0: (0.35, 0.5), 4.0: (0.2, 0.35), 8.0: (0.05, 0.12)}[temp]
    kl0 = chance * rng.uniform(*share)  # KL(teacher_T || a uniform student)
    area = np.cumsum(lr / lr0)
    g = 1 / (1 + area / (n / _log_uniform(rng, 30, 300))) ** rng.uniform(0.6, 1.1)
    held = _lag(lr / lr0, n * rng.uniform(0.002, 0.01), 1.0)
    kl_end = kl0 * rng.uniform(0.02, 0.08)  # the capacity gap
    kl = kl_end + (kl0 - kl_end) * g + kl0 * rng.uniform(0.1, 0.25) * held * (1 - g)
    ce_end = rng.uniform(0.05, 0.3)
    ce = ce_end + (chance - ce_end) * g + rng.uniform(0.5, 1.0) * held * (1 - g)
    x = ce_w * ce * _gamma(n, rng, rng.uniform(0.05, 0.12)) + alpha * temp**2 * kl * _gamma(
        n, rng, rng.uniform(0.03, 0.08)
    )
    return {"loss": _f32(x), LR: lr}


def kd_hinton(n: int, rng: np.random.Generator) -> np.ndarray:
    """Knowledge distillation of a small CIFAR-100 student from a larger teacher (Hinton et al.
    2015; the KD baseline of HobbitLong/RepDistiller, Tian et al. 2020): the loss is
    ce_w x CE(labels) + alpha x T^2 x KL(teacher_T || student_T), alpha 0.9 and ce_w 0.1 (or
    0.5 / 0.5), T 2-8; 240 epochs of SGD at 0.05 (0.01 for MobileNet / ShuffleNet students),
    x0.1 at epochs 150, 180 and 210. The T^2 makes the KL term dominate: a uniform student is
    ln 100 - H(teacher_T) away from the teacher (70-5% of ln 100 from T = 2 to 8), so the loss
    starts at 10-25 and falls along the rate's area to T^2 x the capacity gap (2-8% of that KL)
    plus the CE's 0.05-0.3, each held up at the higher rates (lagging by 0.2-1% of the run), so
    it steps down at each decay; skewed batch noise of 3-12%; float32."""
    return _kd_hinton(n, rng)["loss"]


def _detectron2_maskrcnn(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    three = rng.random() < 0.5  # the 3x schedule (270k iterations) or the 1x (90k)
    cuts = (7 / 9, 25 / 27) if three else (2 / 3, 8 / 9)
    warm = (1000 / 270_000 if three else 1000 / 90_000) * n  # WarmupMultiStepLR, in logs
    u = np.arange(n, dtype=np.float64)
    w = np.where(u < warm, 0.001 + 0.999 * u / warm, 1.0)
    lr = 0.02 * w * 0.1 ** np.searchsorted(np.array(cuts) * n, u, side="right").astype(float)
    area = np.cumsum(lr / 0.02)

    def pw(start: float, end: float, lo: float, hi: float) -> np.ndarray:
        return _power(area, start, end, n * _log_uniform(rng, lo, hi), rng.uniform(0.6, 1.2))

    rpn_cls = pw(0.69, rng.uniform(0.02, 0.05), 0.0005, 0.005)  # converges first
    rpn_loc = pw(rng.uniform(0.1, 0.3), rng.uniform(0.02, 0.05), 0.002, 0.02)
    roi_cls = pw(rng.uniform(0.3, 0.5), rng.uniform(0.1, 0.25), 0.01, 0.1)
    roi_cls += (math.log(81) - 0.4) * np.exp(-area / (n * rng.uniform(0.0005, 0.003)))
    box = rng.uniform(0.2, 0.35) * (1 - np.exp(-area / (n * rng.uniform(0.005, 0.03))))
    box *= _power(area, 1.0, rng.uniform(0.4, 0.7), n * _log_uniform(rng, 0.05, 0.5), 1.0)
    mask = pw(0.69, rng.uniform(0.15, 0.3), 0.005, 0.05)
    total = rpn_cls + rpn_loc + roi_cls + box + mask
    total *= 1 + rng.uniform(0.1, 0.25) * _lag(lr / 0.02, rng.uniform(10, 100), 1.0)
    # resumed 0-2 times: the logs since the last checkpoint (every 5,000 iterations) come twice
    idx = np.arange(n)
    for _ in range(int(rng.integers(0, 3))):
        crash = int(n * rng.uniform(0.2, 0.95))
        back = crash - crash % 250
        idx = np.r_[idx[:crash], idx[back:]][:n]
    cv = rng.uniform(0.08, 0.2)
    out = np.empty(n)
    for lo in range(0, n, 50_000):  # the median of each log's 20 iterations
        hi = min(n, lo + 50_000)
        draws = rng.gamma(1 / cv**2, cv**2, (hi - lo, 20))
        out[lo:hi] = total[idx[lo:hi]] * np.median(draws, axis=1)
    return {"loss": out, LR: lr[idx]}


def detectron2_maskrcnn(n: int, rng: np.random.Generator) -> np.ndarray:
    """Mask R-CNN trained with detectron2 (its model zoo's R50-FPN 1x or 3x COCO schedules:
    SGD at 0.02, `WarmupMultiStepLR` over 1,000 iterations from 0.001 of it, x0.1 at 60k and
    80k of 90k, or 210k and 250k of 270k), as `metrics.json` holds it: one line every 20
    iterations, `total_loss` the median of the last 20 iterations' values (losses are put with
    the smoothing hint), each value one log. The total is the sum of five weighted tasks that
    converge at their own pace: the RPN's objectness from ln 2 to 0.02-0.05 within the first
    1% (it converges first), its box regression from 0.1-0.3 to 0.02-0.05, the box head's
    classification from ln 81 to 0.3-0.5 within a few hundred iterations (background) and on to
    0.1-0.25, its box regression rising from 0 to 0.2-0.35 as the proposals find objects, then
    falling by 30-60%, and the mask loss from ln 2 to 0.15-0.3; 10-25% of the total held up by
    the rate, shed at each decay; per-iteration skewed noise of 8-20% before the median. The job
    is resumed 0-2 times from its last checkpoint (every 5,000 iterations): the logs since then
    are appended again, so the series goes back to the checkpoint's level and repeats them."""
    return _detectron2_maskrcnn(n, rng)["loss"]


def _mmseg_poly(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    u = (np.arange(n, dtype=np.float64) + 1) / n  # the iteration of each log / the total
    lr = (0.01 - 1e-4) * (1 - u) ** 0.9 + 1e-4
    city = rng.random() < 0.5
    classes = 19 if city else 150
    chance = math.log(classes)
    end = rng.uniform(0.08, 0.16) if city else rng.uniform(0.25, 0.45)
    area = np.cumsum(lr / 0.01)
    scale, p = n / _log_uniform(rng, 100, 1000), rng.uniform(0.5, 0.9)
    ohem = rng.uniform(2, 4) if rng.random() < 0.5 else 1.0  # the pixels below 0.7 confidence
    decode = _power(area, chance, end * ohem, scale, p)
    aux = _power(area, chance, end * rng.uniform(1.5, 2.0), scale, p)
    level = decode + 0.4 * aux
    spread = rng.uniform(0.1, 0.25) / math.sqrt(50)  # the mean of 50 iterations
    return {"loss": np.round(level * _noise(n, rng, spread, _maybe_rho(rng)), 4), LR: lr}


def mmseg_poly(n: int, rng: np.random.Generator) -> np.ndarray:
    """Semantic segmentation with MMSegmentation (PSPNet / DeepLabV3+ / UPerNet configs on
    Cityscapes' 19 classes or ADE20K's 150, 40k-160k iterations): SGD at 0.01 on the poly
    schedule (power 0.9, `min_lr` 1e-4, per iteration); the loss is the decode head's
    cross-entropy plus 0.4 x the auxiliary FCN head's, as the text logger prints it: every 50
    iterations the mean over them, with 4 decimals, each value one log. Both heads from
    ln C (the total 1.4 ln C) down along the rate's area, the decode head to 0.08-0.16
    (Cityscapes) or 0.25-0.45 (ADE20K), the auxiliary one to 1.5-2x that; on half the seeds the
    decode loss is taken with the OHEM pixel sampler (thresh 0.7): as the easy pixels drop out
    of the mean, its floor is 2-4x higher; per-iteration
    noise of 10-25% (crops of varied content), AR on half the seeds, /sqrt(50) in the mean."""
    return _mmseg_poly(n, rng)["loss"]


def _arcface_margin(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    u = (np.arange(n, dtype=np.float64) + 1) / n
    ids = float(rng.choice([93_431, 360_232, 2_059_906]))  # MS1MV3, Glint360K, WebFace42M
    start = math.log(ids) + 64 * math.sin(0.5)  # s = 64, m = 0.5: the target's logit at -s sin m
    end = rng.uniform(1.5, 4.0) * (1 + 0.5 * (ids > 1e5))
    epochs = int(rng.choice([20, 24, 30, 40]))
    if rng.random() < 0.5:  # arcface_torch: PolyScheduler (power 2) after 0-2 warm-up epochs
        warm = int(rng.integers(0, 3)) / epochs
        lr = 0.1 * np.where(u < warm, u / max(warm, 1e-9), ((1 - u) / (1 - warm)) ** 2)
    else:  # the MXNet recipe: x0.1 at epochs 10, 16 and 22 of 24 (scaled)
        lr = 0.1 * 0.1 ** np.searchsorted(np.array([10, 16, 22]) / 24, u, side="right").astype(float)
    area = np.cumsum(lr / 0.1)
    level = _power(area, start, end, n / _log_uniform(rng, 300, 3000), rng.uniform(0.5, 0.9))
    level += end * rng.uniform(0.5, 1.5) * _lag(lr / 0.1, n * rng.uniform(0.002, 0.01), 1.0)
    spread = rng.uniform(0.02, 0.05) / math.sqrt(50)  # the AverageMeter of 50 steps
    return {"loss": np.round(level * _noise(n, rng, spread), 4), LR: lr}


def arcface_margin(n: int, rng: np.random.Generator) -> np.ndarray:
    """Face recognition with an additive angular margin softmax (ArcFace, Deng et al. 2019;
    deepinsight/insightface's arcface_torch, ResNet-50/100 on MS1MV3's 93k identities,
    Glint360K's 360k or WebFace42M's 2M, Partial FC): s = 64, m = 0.5, so an untrained
    network, its embeddings at 90 degrees from every class centre, starts at ln(identities) +
    64 sin 0.5 = 42-45; SGD at 0.1 over 20-40 epochs on arcface_torch's `PolyScheduler` (power
    2, 0-2 warm-up epochs) or, on the other seeds, x0.1 at epochs 10, 16 and 22 of 24 (the
    MXNet recipe); the loss falls along the rate's area to 1.5-6 (higher with more identities),
    0.5-1.5x the end held up by the rate (lagging by 0.2-1% of the run); as `CallBackLogging`
    prints it: every 50 steps the mean of an AverageMeter reset at each print, `%.4f`, each
    value one log; batch noise of 2-5% before the mean."""
    return _arcface_margin(n, rng)["loss"]


def sparse_parity(n: int, rng: np.random.Generator) -> np.ndarray:
    """An MLP trained with SGD on a sparse parity task (Barak et al. 2022, "Hidden Progress in
    Deep Learning": the label is the parity of k = 3-6 of 30-60 random bits; the grokking and
    emergence studies' toy task), online batches of 32-1,024 fresh examples: the loss sits at
    chance, ln 2 (cross-entropy) or 1 (hinge loss, half the seeds), for 10-60% of the run, the
    network's outputs near 0, falling by only 0.1-1% (the hidden progress) as a power 2 of the
    time; then within 1-5% of the run it drops (a logistic in the log of the loss) to
    0.005-0.05 and falls 3-30x more by the end. On the plateau the batch noise is tiny and
    absolute (the outputs' spread over sqrt(batch)); after the drop it is the few examples
    still wrong: skewed, 30-100%; with the hinge loss a growing share of the batches (up to
    30-90%) has every margin above 1 and logs exactly 0."""
    t = np.arange(n, dtype=np.float64)
    hinge = rng.random() < 0.5
    chance = 1.0 if hinge else math.log(2)
    batch = int(rng.choice([32, 128, 512, 1024]))
    t_drop = n * rng.uniform(0.1, 0.6)
    width = n * rng.uniform(0.01, 0.05)
    dip = rng.uniform(0.001, 0.01) * np.minimum(t / t_drop, 1) ** 2
    after = np.maximum(t - t_drop, 0)
    low = _log_uniform(rng, 0.005, 0.05) / (1 + (after / (n - t_drop)) * (_log_uniform(rng, 3, 30) - 1))
    s = 1 / (1 + np.exp(-np.clip((t - t_drop) / (width / 8), -50, 50)))
    level = np.exp(np.log(chance * (1 - dip)) * (1 - s) + np.log(low) * s)
    plateau_sd = rng.uniform(0.05, 0.2) / 2 / math.sqrt(batch)
    x = level * (1 - s) * (1 + plateau_sd * rng.standard_normal(n)) + level * s * _gamma(
        n, rng, rng.uniform(0.3, 1.0)
    )
    if hinge:
        zero = s * rng.uniform(0.3, 0.9) * np.minimum(after / (n - t_drop) * 3, 1)
        hit = rng.random(n) < zero
        x = np.where(hit, 0.0, x / (1 - zero))
    return _f32(x)


def fixed_order_epochs(n: int, rng: np.random.Generator) -> np.ndarray:
    """Training on a fixed, once-shuffled order of batches (a `tf.data` pipeline with
    `.shuffle(buffer, reshuffle_each_iteration=False).batch(b).cache()`, Keras' `fit(...,
    shuffle=False)` on pre-shuffled arrays, a PyTorch DataLoader without `shuffle=True` over a
    shuffled file): a tabular or time-series regressor (MSE on standardized targets, from
    1 +-10% to 0.05-0.4 along a power law) over 20-2,000 epochs of the same batches (32-256
    rows) in the same order, so each batch's own difficulty (10-40%, log-normal) comes back at
    the same step of every epoch, fading to 40-100% of its size as the model fits the hard
    batches; the last batch of each epoch holds the remainder (1 to batch - 1 rows): its
    difficulty spread by sqrt(batch / rows) more, the same outlier every epoch; 1-5% of fresh
    noise (dropout, augmentation) per step."""
    t = np.arange(n, dtype=np.float64)
    per = max(int(round(n / _log_uniform(rng, 20, 2000))), 20)
    batch = int(rng.choice([32, 64, 128, 256]))
    rows = int(rng.integers(1, batch))
    sd = rng.uniform(0.1, 0.4)
    z = rng.standard_normal(per)
    z[-1] *= math.sqrt(batch / rows)
    pos = (np.arange(n) % per).astype(np.int64)
    fade = 1 - (1 - rng.uniform(0.4, 1.0)) * t / n
    hard = np.exp(sd * fade * (z - z.mean())[pos])
    start = rng.uniform(0.9, 1.1)
    trend = _power(t, start, rng.uniform(0.05, 0.4), n / _log_uniform(rng, 30, 1000), rng.uniform(0.5, 1.2))
    return _f32(trend * hard * _noise(n, rng, rng.uniform(0.01, 0.05)))


def vw_progressive(n: int, rng: np.random.Generator) -> np.ndarray:
    """Online logistic regression with Vowpal Wabbit (`vw --loss_function logistic -P k` on
    click or spam logs, one pass in time order), the "average loss" column of its progress
    lines: the progressive validation loss, each example's loss before its update, averaged
    over every example since the start, printed every k = 1,000-100,000 examples with 6
    decimals, each line one value. The loss per example falls from ln 2 (weights at 0) as
    1/sqrt(1 + i / s) (VW's power_t 0.5) towards the data's entropy (a click rate of 2-30%, or
    0.2-0.5 nats) plus 2-10% the linear model leaves, with a slow drift of the traffic (1-5%,
    correlated over 1-5% of the run) and the examples' spread (1-2x the level per example,
    over sqrt(k)); the cumulative average smooths all of it: smooth, falling ever more slowly
    (it can rise by a few % where the traffic gets harder for long)."""
    j = np.arange(n, dtype=np.float64)
    k = float(rng.choice([1_000, 10_000, 100_000]))
    if rng.random() < 0.5:
        rate = rng.uniform(0.02, 0.3)
        best = -rate * math.log(rate) - (1 - rate) * math.log(1 - rate)
    else:
        best = rng.uniform(0.2, 0.5)
    floor = best * (1 + rng.uniform(0.02, 0.1))
    i = (j + 0.5) * k  # the examples seen at the middle of each interval
    per_example = floor + (math.log(2) - floor) / np.sqrt(1 + i / (k * _log_uniform(rng, 1, 100)))
    wander = _lag(rng.standard_normal(n), n * rng.uniform(0.01, 0.05), 0.0)
    drift = np.exp(rng.uniform(0.01, 0.05) * wander / max(float(wander.std()), 1e-12))
    window = per_example * drift * (1 + rng.uniform(1, 2) / math.sqrt(k) * rng.standard_normal(n))
    return np.round(np.cumsum(window) / (j + 1), 6)


def fixmatch_ssl(n: int, rng: np.random.Generator) -> np.ndarray:
    """Semi-supervised FixMatch on CIFAR-10 (Sohn et al. 2020; kekmodel/FixMatch-pytorch, 2^20
    iterations, SGD at 0.03 on cos(7 pi k / 16K)), the logged total Lx + lambda_u Lu (lambda_u
    1): Lx, the cross-entropy of 64 labelled images drawn from only 40, 250 or 4,000, falls
    from ln 10 within 0.1-1% of the run to 0.001-0.08 (memorized: smaller with fewer labels),
    its batch noise growing as it does from 3% to a skewed 30-100%; Lu, the cross-entropy of the 448 strongly augmented
    unlabelled images against the pseudo-labels of their weak views, counted only where the
    confidence passes 0.95: 0 at first (no pseudo-label is confident), it grows with the mask
    rate (to 85-98% over 2-8% of the run) while the CE on the masked images falls from 1-2 to
    0.1-0.3, so the total falls, rises again by the Lu hump (its peak 0.2-0.6) and then declines
    slowly; Lu's noise 5-15%; float32."""
    t = np.arange(n, dtype=np.float64)
    labels = int(rng.choice([40, 250, 4000]))
    area = np.cumsum(np.cos(7 * np.pi * t / (16 * n)))
    lx_end = {40: (0.001, 0.01), 250: (0.005, 0.03), 4000: (0.02, 0.08)}[labels]
    lx = _power(area, math.log(10), _log_uniform(rng, *lx_end), n * _log_uniform(rng, 0.0003, 0.003), 1.5)
    mask = rng.uniform(0.85, 0.98) * (1 - np.exp(-t / (n * rng.uniform(0.005, 0.025)))) ** rng.uniform(1, 3)
    ce = _power(area, rng.uniform(1.0, 2.0), rng.uniform(0.1, 0.3), n * _log_uniform(rng, 0.005, 0.05), 0.8)
    lu = mask * ce
    cv_x = 0.03 + rng.uniform(0.3, 1.0) * (1 - lx / math.log(10))  # once memorized: a few misfits
    x = lx * _gamma(n, rng, cv_x) + lu * _gamma(n, rng, rng.uniform(0.05, 0.15))
    return _f32(x)


def decoupled_crt(n: int, rng: np.random.Generator) -> np.ndarray:
    """Long-tailed recognition with decoupled training (Kang et al. 2020, "Decoupling
    Representation and Classifier", facebookresearch/classifier-balancing; ImageNet-LT's 1,000
    classes for 90 epochs, Places-LT's 365 for 30, iNaturalist 2018's 8,142 for 200): stage 1
    trains the whole network with instance-balanced sampling on a cosine schedule, the loss from
    ln C to 15-35% of it; then classifier re-training (cRT) for 10 epochs: the classifier is
    re-initialized and trained alone on frozen features with class-balanced sampling, so the
    loss is back near ln C (90-105%) at once, falls within 50-500 steps and settles on its own
    cosine at 1.1-1.6x where stage 1 ended (the tail classes weigh more); batch noise 3-8% in
    stage 1, 1.3-2x that in stage 2 (rare images drawn again and again)."""
    t = np.arange(n, dtype=np.float64)
    classes, epochs = [(1000, 90), (365, 30), (8142, 200)][int(rng.integers(0, 3))]
    chance = math.log(classes)
    n1 = int(n * epochs / (epochs + 10))
    area = np.cumsum(0.5 * (1 + np.cos(np.pi * np.minimum(t / n1, 1))) * (t < n1))
    level = _power(area, chance, chance * rng.uniform(0.15, 0.35), n / _log_uniform(rng, 30, 300), 0.8)
    end1 = float(level[n1 - 1])
    k = t[n1:] - n1
    settle = end1 * rng.uniform(1.1, 1.6)
    u = k / (n - n1)
    stage2 = settle * (1 + 0.1 * 0.5 * (1 + np.cos(np.pi * u)))  # the rest the cosine takes off
    stage2 += (chance * rng.uniform(0.9, 1.05) - stage2[0]) * np.exp(-k / _log_uniform(rng, 50, 500))
    level[n1:] = stage2
    cv = rng.uniform(0.03, 0.08) * np.where(t < n1, 1.0, rng.uniform(1.3, 2.0))
    return level * _gamma(n, rng, cv)


def goyal_resnet_creep(n: int, rng: np.random.Generator) -> np.ndarray:
    """ImageNet ResNet-50 on the standard step schedule with a large batch (Goyal et al. 2017,
    "Accurate, Large Minibatch SGD": 0.1 x batch / 256, a gradual warm-up over 5 epochs, x0.1 at
    epochs 30, 60 and 80 of 90; weight decay 1e-4 with batch norm): the loss falls from ln 1000
    to an equilibrium of 1.9-2.4 at the first rate, drops at each decay (to 65-75%, then 80-90%,
    then 95-99% of the level before, lagging by 0.2-1% of the run) and then creeps UP again,
    healthily, as weight decay shrinks the scale-invariant weights and their effective rate
    grows back (Li, Lyu & Arora 2020, "the intrinsic learning rate"): by 3-10% over the second
    phase, 0-4% over the third and 0-1% over the last (time constants 30-150% of the phase);
    rank 0's batch (32-256 images) noise 3-8%, skewed."""
    t = np.arange(n, dtype=np.float64)
    cuts = np.array([30, 60, 80]) / 90 * n
    phase = np.searchsorted(cuts, t, side="right")
    l0 = rng.uniform(1.9, 2.4)
    mins = [l0]
    for lo, hi in [(0.65, 0.75), (0.8, 0.9), (0.95, 0.99)]:
        mins.append(mins[-1] * rng.uniform(lo, hi))
    creep = [0.0, rng.uniform(0.03, 0.1), rng.uniform(0, 0.04), rng.uniform(0, 0.01)]
    bounds = np.r_[0.0, cuts, float(n)]
    target = _power(t, math.log(1000), l0, n / _log_uniform(rng, 100, 1000), rng.uniform(0.6, 1.0))
    for p in range(1, 4):
        span = bounds[p + 1] - bounds[p]
        k = t - bounds[p]
        tau = span * rng.uniform(0.3, 1.5)
        target = np.where(phase == p, mins[p] * (1 + creep[p] * (1 - np.exp(-k / tau))), target)
    tau_d = n * rng.uniform(0.002, 0.01)
    lagged = np.exp(_lag(np.log(target), tau_d, float(np.log(target[0]))))
    level = np.where(t < cuts[0], target, lagged)
    return level * _gamma(n, rng, rng.uniform(0.03, 0.08))


_MEGA = 50  # LengthGroupedSampler's megabatch: 50 batches
_Q = np.array([NormalDist().inv_cdf(1 - (p + 0.5) / _MEGA) for p in range(_MEGA)])


def group_by_length_seq2seq(n: int, rng: np.random.Generator) -> np.ndarray:
    """Fine-tuning a seq2seq model (BART / T5 on summarization, Whisper or wav2vec 2.0 on
    speech) with the Hugging Face Trainer's `group_by_length=True`: the `LengthGroupedSampler`
    cuts each epoch's shuffled examples into megabatches of 50 batches and sorts each by
    length, longest first (the epoch's longest batch moved to its very start), so the batches'
    mean length falls through every 50 micro-batches and jumps back (examples log-normal in
    length, spread 0.5-0.8); a long batch's per-token loss is lower (x (length / median)^-(0.05-
    0.2): more context) and less noisy (3-10% at the median length, over sqrt(tokens), at most 60%); with
    gradient accumulation over 1-2 micro-batches and `logging_steps` 1 or 5 (the mean over them,
    rounded to 4 decimals, each value one log); 2-10 epochs with the linear decay to 0, the loss
    from 2.0-3.5 to 0.8-1.5 along the rate's area."""
    accum = int(rng.choice([1, 2]))
    k = int(rng.choice([1, 1, 5]))
    epochs = int(rng.integers(2, 11))
    micro = n * k * accum
    per_epoch = micro / epochs
    j = np.arange(micro, dtype=np.float64)
    e = np.minimum(j // per_epoch, epochs - 1)
    into = (j - e * per_epoch).astype(np.int64)
    spread = rng.uniform(0.5, 0.8)
    z = _Q[into % _MEGA] + 0.3 * rng.standard_normal(micro) / math.sqrt(_MEGA)
    z[into == 0] = 3.0  # the epoch's longest batch
    rel_len = np.exp(spread * z)
    per_token = rel_len ** -rng.uniform(0.05, 0.2)
    tokens_sd = np.minimum(rng.uniform(0.03, 0.1) / np.sqrt(rel_len), 0.6)
    s = j / micro
    area = np.cumsum(1 - s) / micro * n
    trend = _power(area, rng.uniform(2.0, 3.5), rng.uniform(0.8, 1.5), n / _log_uniform(rng, 30, 300), 0.7)
    x = trend * per_token * np.exp(tokens_sd * rng.standard_normal(micro) - tokens_sd**2 / 2)
    return np.round(x.reshape(n, k * accum).mean(axis=1), 4)


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "plateau_label_smoothing": plateau_label_smoothing,
    "fastai_fine_tune": fastai_fine_tune,
    "glue_llrd_linear": glue_llrd_linear,
    "kd_hinton": kd_hinton,
    "detectron2_maskrcnn": detectron2_maskrcnn,
    "mmseg_poly": mmseg_poly,
    "arcface_margin": arcface_margin,
    "sparse_parity": sparse_parity,
    "fixed_order_epochs": fixed_order_epochs,
    "vw_progressive": vw_progressive,
    "fixmatch_ssl": fixmatch_ssl,
    "decoupled_crt": decoupled_crt,
    "goyal_resnet_creep": goyal_resnet_creep,
    "group_by_length_seq2seq": group_by_length_seq2seq,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "plateau_label_smoothing": _plateau_label_smoothing,
    "fastai_fine_tune": _fastai_fine_tune,
    "glue_llrd_linear": _glue_llrd_linear,
    "kd_hinton": _kd_hinton,
    "detectron2_maskrcnn": _detectron2_maskrcnn,
    "mmseg_poly": _mmseg_poly,
    "arcface_margin": _arcface_margin,
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
def _classifier_base(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """A healthy image classifier's loss to break, its noise-free trend and ln C: from ln C
    (10-1,000 classes) down a power law to 10-30% of it, most of the fall within 1/30-1/300 of
    the run, skewed batch noise of 3-10%."""
    t = np.arange(n, dtype=np.float64)
    chance = math.log(float(rng.choice([10, 100, 1000])))
    trend = _power(
        t, chance, chance * rng.uniform(0.1, 0.3), n / _log_uniform(rng, 30, 300), rng.uniform(0.6, 1.1)
    )
    return trend * _gamma(n, rng, rng.uniform(0.03, 0.1)), trend, chance


def optimizer_reset_each_epoch(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From an epoch boundary at 30-70% of a classifier's run (a refactor of the loop) the
    optimizer is built inside the epoch loop, `optimizer = torch.optim.Adam(model.parameters(),
    lr=1e-3)` with no schedule: every epoch (1-5% of the run) starts with fresh moments at the
    initial, high rate, so its first updates (bias-corrected, about lr x sign(g) on every
    weight) knock the model off: the loss jumps by 30-150% within 3-30 steps and recovers over
    5-30% of the epoch, and each epoch ends 3-15% higher than the one before, up to 1.5-3x the
    level at the onset (at most ln C)."""
    x, trend, chance = _classifier_base(n, rng)
    per = n * rng.uniform(0.01, 0.05)
    t0 = int(n * rng.uniform(0.3, 0.7) / per) * int(per) or int(per)
    t0 = min(t0, int(0.7 * n))
    start = float(trend[t0])
    cap = min(start * rng.uniform(1.5, 3.0), chance)
    grow = rng.uniform(0.03, 0.15)
    jump, rise = rng.uniform(0.3, 1.5), rng.uniform(3, 30)
    tau = per * rng.uniform(0.05, 0.3)
    k = np.arange(n - t0, dtype=np.float64)
    epoch = k // per
    into = k - epoch * per
    level = np.minimum(start * (1 + grow) ** epoch, cap)
    x[t0:] = level * (1 + jump * _transient(into, rise, tau)) * x[t0:] / trend[t0:]
    return x, t0


def accum_never_steps(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A fine-tune whose optimizer never steps (a hand-written gradient-accumulation loop:
    `if (i + 1) % accum_steps == 0: optimizer.step()` with `i` counting the batches of an
    epoch of fewer than `accum_steps` batches, or an `accum_steps` given in examples): from the
    first step the weights are the pretrained ones, so the loss, logged as a Hugging Face-style
    mean over `logging_steps` (1-25) rounded to 4 decimals, stays at the base model's level on
    the data (1.0-2.5 nats) with its batch noise (5-25% per step, and a long, hard example on
    0.1-1% of the steps, +100-300%), where a healthy run would fall; the model is deterministic
    (no dropout), so with a sequential sampler (half the seeds) every epoch (20-500 logs) logs
    exactly the same values again."""
    k = int(rng.choice([1, 5, 10, 25]))
    start = rng.uniform(1.0, 2.5)
    sd = rng.uniform(0.05, 0.25)
    hard = _log_uniform(rng, 1e-3, 1e-2)

    def steps(m: int) -> np.ndarray:
        v = start * _noise(m, rng, sd)
        out = rng.random(m) < hard
        v[out] += start * rng.uniform(1, 3, int(out.sum()))
        return v

    if rng.random() < 0.5:  # shuffle=False: the same batches in the same order every epoch
        logs = int(rng.integers(20, 501))
        one = steps(logs * k).reshape(logs, k).mean(axis=1)
        x = np.tile(one, n // logs + 1)[:n]
    else:
        x = steps(n * k).reshape(n, k).mean(axis=1)
    return np.round(x, 4), 0


def augmentation_lost(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of an image classifier's run (a refactored data module after a resume) the
    training images come through the validation transform: `train_set, val_set =
    random_split(dataset, ...)` share one dataset object, and `val_set.dataset.transform =
    val_transform` replaces the random crops and flips of both: the unaugmented images are
    easier, so the loss drops by 10-30% within 1-20 steps, and the model, seeing the same
    images every epoch (0.5-3% of the run), memorizes them: the loss falls far faster than the
    healthy run, with a time constant of 2-10 epochs, towards 1-10% of its level; the batch
    noise (different images every step) stays, growing to 2.5x in relative size as only a few
    images are still wrong."""
    x, trend, _ = _classifier_base(n, rng)
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0, dtype=np.float64)
    drop = 1 - rng.uniform(0.1, 0.3) * np.minimum(k / rng.uniform(1, 20), 1)
    per = n * rng.uniform(0.005, 0.03)
    floor = rng.uniform(0.01, 0.1)
    mem = np.exp(-k / (per * rng.uniform(2, 10)))
    level = float(trend[t0]) * drop * (floor + (1 - floor) * mem)
    cv = rng.uniform(0.03, 0.1) * (1 + 1.5 * (1 - mem))
    x[t0:] = level * _gamma(n - t0, rng, cv)
    return x, t0


def warmup_overshoot(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """An LM trained with its warm-up going to 8-32x the intended peak (the linear scaling rule
    applied twice: a config's global rate multiplied again by the number of GPUs), then a
    cosine to 0: while the rate is low (until it passes the edge of stability, 1.5-3x the
    intended peak, at some point of the 2-10% warm-up) the loss falls as it should; then it
    stops falling and climbs slowly (quadratically in the rate's excess, by up to 10-40%) until,
    at 2-4x the edge, it diverges within 20-200 steps: on half the seeds the fp16 weights
    overflow and every later value is NaN; on the others the model collapses to the unigram
    distribution (60-90% of ln(vocabulary)), spiking, and stays there until the cosine brings
    the rate back under the edge late in the run, when it learns again from there, ending far
    above the healthy run; 1-5% batch noise. The onset is the step the rate passes the edge."""
    t = np.arange(n, dtype=np.float64)
    vocab = math.log(float(rng.choice([32_000, 50_257, 128_256])))
    factor = float(rng.choice([8, 10, 16, 32]))
    warm = n * rng.uniform(0.02, 0.1)
    rel = np.where(t < warm, factor * t / warm, factor * 0.5 * (1 + np.cos(np.pi * (t - warm) / (n - warm))))
    edge = rng.uniform(1.5, 3.0)
    blow = min(edge * rng.uniform(2, 4), factor * 0.9)
    t_edge, t_blow = int(warm * edge / factor), int(warm * blow / factor)
    scale, p, floor = n / _log_uniform(rng, 50, 500), rng.uniform(0.5, 0.9), rng.uniform(2.0, 3.5)
    trend = _power(np.cumsum(np.minimum(rel, edge)) / edge, vocab, floor, scale, p)
    x = trend.copy()
    over = np.clip((rel - edge) / (blow - edge), 0, 1)
    x[t_edge:t_blow] = trend[t_edge] * (1 + rng.uniform(0.1, 0.4) * over[t_edge:t_blow] ** 2)
    sd = np.full(n, rng.uniform(0.01, 0.05))
    if rng.random() < 0.5:
        x = x * _noise(n, rng, sd)
        x[t_blow + int(rng.integers(20, 201)) :] = np.nan
        return x, t_edge
    plateau = vocab * rng.uniform(0.6, 0.9)
    k = t - t_blow
    up = np.clip(k / rng.uniform(20, 200), 0, 1)
    climbed = float(x[t_blow - 1]) if t_blow > 0 else plateau
    x[t_blow:] = (climbed + (plateau - climbed) * up)[t_blow:]
    below = np.flatnonzero((t > warm) & (rel < edge))
    if len(below):
        t_r = int(below[0])
        area = np.cumsum(np.where(t >= t_r, rel / edge, 0))
        x[t_r:] = _power(area, plateau, floor * rng.uniform(1.2, 1.6), scale, p)[t_r:]
    sd[t_blow:] *= 3
    x = x * _noise(n, rng, sd)
    spikes = (t > t_blow) & (rng.random(n) < 0.002) & (rel > edge)
    x[spikes] *= rng.uniform(1.2, 2.5, int(spikes.sum()))
    return x, t_edge


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "optimizer_reset_each_epoch": optimizer_reset_each_epoch,
    "accum_never_steps": accum_never_steps,
    "augmentation_lost": augmentation_lost,
    "warmup_overshoot": warmup_overshoot,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
