"""A third blind set of long healthy training-loss series and buggy ones, for `long_runs.py`.

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how a real
practice's loss looks over 10^5-10^6 steps, its parameters drawn per seed, and none of them is
one of `long_runs.KINDS`, `long_blind.KINDS` or `long_blind2.KINDS` (nor a bug of their `BUGS`).
They are to be measured once, on the held-out seeds (`SEEDS`), and not tuned on: a rule changed
after looking at them makes them a tuning set.

The interface is `long_blind2`'s: a kind is `(n, rng) -> loss`; three kinds follow a
learning-rate schedule, and `series(kind, n, rng)` gives all that a run records, the loss and,
where the kind has one, the learning rate (`LR`, as the PyTorch hook records it, in real units).
No kind here has evaluation passes, but `MODE` and its codes are kept for the interface. A bug
is `(n, rng) -> (loss, the step its defect begins)`. Only numpy here: the series can be
generated and looked at without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _log_uniform, _maybe_rho, _noise, _power  # the first blind set's helpers
from long_blind2 import _bf16, _warmup_cosine  # the second's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE (no kind here records one)
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 3000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _lag(target: np.ndarray, tau: float, start: float) -> np.ndarray:
    """A first-order lag of `target` (time constant `tau` steps) from `start`: a parameter that
    an optimizer moves towards its moving optimum."""
    a = 1 / max(1.0, tau)
    out = np.empty(len(target))
    s = start
    for i, v in enumerate(target):  # 10^5 steps: ~0.05 s
        s += a * (v - s)
        out[i] = s
    return out


def _transient(k: np.ndarray, rise: float, tau: float) -> np.ndarray:
    """A bump of height 1: a linear rise over `rise` steps, then an exponential decay."""
    return np.where(k < rise, k / max(rise, 1e-9), np.exp(-(k - rise) / tau))


# the healthy kinds ----------------------------------------------------------------------------
def perplexity_logged(n: int, rng: np.random.Generator) -> np.ndarray:
    """LM pretraining logged as perplexity, exp(loss), instead of the loss (many training
    scripts and progress bars print `ppl`): from the vocabulary size (32k-256k, +-3% in the
    loss) down to exp(1.8-3.2) = 6-25, falling over 3-4 decades within the first few % of the
    run; the loss's batch noise of 1-3% becomes a multiplicative noise of 2-10% on the
    perplexity (larger early, where the loss is large), AR-correlated on half the seeds."""
    t = np.arange(n, dtype=np.float64)
    vocab = float(rng.choice([32_000, 50_257, 100_000, 256_000]))
    loss = _power(
        t, math.log(vocab) * rng.uniform(0.97, 1.03), rng.uniform(1.8, 3.2), n / rng.uniform(200, 2000),
        rng.uniform(0.35, 0.7),
    )  # fmt: skip
    loss = loss * _noise(n, rng, rng.uniform(0.01, 0.03), _maybe_rho(rng))
    return np.exp(loss)


def keras_epoch_mean(n: int, rng: np.random.Generator) -> np.ndarray:
    """Keras' per-batch `logs["loss"]` (a `Callback.on_train_batch_end` logger, the progress
    bar): the mean of the batch losses since the start of the epoch, not the batch's own loss.
    Epochs of 100-3,000 steps: at each epoch's start the value is one batch's loss (5-30% batch
    noise), then it settles into a smooth running mean that lags above the falling loss, so it
    drops at every epoch boundary, by more early in the run; a power-law decay from 1.5-4 to
    0.05-0.8 below."""
    t = np.arange(n, dtype=np.float64)
    raw = _power(
        t, rng.uniform(1.5, 4.0), rng.uniform(0.05, 0.8), n / rng.uniform(50, 500), rng.uniform(0.6, 1.4)
    ) * _noise(n, rng, _log_uniform(rng, 0.05, 0.3))
    epoch = int(_log_uniform(rng, 100, 3000))
    out = np.empty(n)
    for s0 in range(0, n, epoch):
        chunk = raw[s0 : s0 + epoch]
        out[s0 : s0 + len(chunk)] = np.cumsum(chunk) / np.arange(1, len(chunk) + 1)
    return out


def fedavg_rounds(n: int, rng: np.random.Generator) -> np.ndarray:
    """Federated averaging (FedAvg) simulated on one machine, the training loss logged at every
    local step: each round 2-10 of 20-200 clients (non-IID: a client's loss under the global
    model is 0.6-2x the mean, log-normal spread 0.1-0.5) train in turn for 10-200 local steps
    each, starting from the global model; a client's loss falls by 10-40% over its local steps
    (client drift, its own data), then the next client starts again at the global model's
    level on its data; the global level falls as a power law over the rounds from 1.5-3 to
    0.2-1; 3-15% batch noise."""
    clients, per_round = int(rng.integers(20, 201)), int(rng.integers(2, 11))
    local = int(_log_uniform(rng, 10, 200))
    het = np.exp(rng.uniform(0.1, 0.5) * rng.standard_normal(clients)).clip(0.6, 2.0)
    segments = -(-n // local)
    who = np.concatenate(
        [rng.choice(clients, per_round, replace=False) for _ in range(-(-segments // per_round))]
    )
    t = np.arange(n, dtype=np.float64)
    rnd = t // (local * per_round)  # the round of each step
    level = _power(
        rnd, rng.uniform(1.5, 3.0), rng.uniform(0.2, 1.0), n / (local * per_round) / rng.uniform(5, 50), 1.0
    )
    k = t % local  # the local step within a client's turn
    drift = rng.uniform(0.1, 0.4) * (1 - np.exp(-k / (local * rng.uniform(0.2, 0.6))))
    seg = (t // local).astype(np.int64)
    return level * het[who[seg]] * (1 - drift) * _noise(n, rng, _log_uniform(rng, 0.03, 0.15))


def noisy_student(n: int, rng: np.random.Generator) -> np.ndarray:
    """Self-training in rounds (Noisy Student, Xie et al. 2020), logged under one global step:
    a teacher trained on the labelled data, then 1-3 students, each a fresh (equal or larger)
    model trained from scratch on labelled plus pseudo-labelled data with noise (RandAugment,
    dropout, stochastic depth): at each new round the loss starts again at ln(C) (C: 10-1,000
    classes) and falls; the teacher's floor is 0.1-0.6, each student's 1.2-2.5x the last one's
    (soft pseudo-labels carry the teacher's entropy, and the noise makes the task harder),
    at most 0.6 ln(C); rounds of unequal length (Dirichlet(4) shares of the run); 2-10% batch
    noise."""
    t = np.arange(n, dtype=np.float64)
    rounds = int(rng.integers(2, 5))
    share = rng.dirichlet(np.full(rounds, 4.0))
    bounds = np.concatenate([[0], np.cumsum(share)]) * n
    bounds = bounds.astype(int)
    bounds[-1] = n
    classes = float(rng.choice([10, 100, 1000]))
    floor, x = rng.uniform(0.1, 0.6), np.empty(n)
    for r in range(rounds):
        a, b = bounds[r], bounds[r + 1]
        k = t[a:b] - a
        x[a:b] = _power(
            k,
            math.log(classes) * rng.uniform(0.97, 1.03),
            floor,
            (b - a) / rng.uniform(30, 300),
            rng.uniform(0.6, 1.2),
        )
        floor = min(floor * rng.uniform(1.2, 2.5), 0.6 * math.log(classes))  # below chance, always
    return x * _noise(n, rng, _log_uniform(rng, 0.02, 0.1), _maybe_rho(rng))


def uncertainty_weighted(n: int, rng: np.random.Generator) -> np.ndarray:
    """Multi-task learning with homoscedastic-uncertainty weighting (Kendall et al. 2018): the
    logged total is sum_i 0.5 exp(-s_i) L_i + 0.5 s_i over 2-3 tasks, each task loss L_i a
    power law from 0.5-5 to 0.02-0.5 with 2-10% noise, and each learned log-variance s_i
    following its optimum log(L_i) with a lag of 0.1-3% of the run from 0: the total falls
    from 0.5-7.5, through 0, to negative values (0.5 (1 + log L_i) per task at the optimum: down to
    about -2.5), still falling; the noise is the tasks' noise weighted by exp(-s_i), so its
    absolute size shrinks with the losses."""
    t = np.arange(n, dtype=np.float64)
    total = np.zeros(n)
    for _ in range(int(rng.integers(2, 4))):
        task = _power(
            t, rng.uniform(0.5, 5.0), rng.uniform(0.02, 0.5), n / rng.uniform(50, 500), rng.uniform(0.5, 1.2)
        )
        s = _lag(np.log(task), n * _log_uniform(rng, 0.001, 0.03), 0.0)
        total += 0.5 * np.exp(-s) * task * _noise(n, rng, rng.uniform(0.02, 0.1)) + 0.5 * s
    return total


def scheduled_sampling(n: int, rng: np.random.Generator) -> np.ndarray:
    """Sequence-to-sequence training with scheduled sampling (Bengio et al. 2015): the share of
    decoder inputs taken from the model's own predictions instead of the reference rises from 0
    to 25-100% between 5-30% and 40-90% of the run (inverse-sigmoid or linear), and the training
    loss, computed on those prefixes, rises with it by up to 10-40% of its level, partly offset
    by learning, then falls slowly again; a token cross-entropy from ln(8k-32k) to 1.5-3 nats
    below; 2-6% batch noise."""
    t = np.arange(n, dtype=np.float64)
    vocab = float(rng.choice([8_000, 16_000, 32_000]))
    base = _power(
        t, math.log(vocab), rng.uniform(1.5, 3.0), n / rng.uniform(100, 1000), rng.uniform(0.5, 1.0)
    )
    a = n * rng.uniform(0.05, 0.3)
    b = a + (n - a) * rng.uniform(0.3, 0.8)
    u = np.clip((t - a) / (b - a), 0, 1)
    if rng.random() < 0.5:  # inverse sigmoid over the span
        u = 1 / (1 + np.exp(-10 * (u - 0.5)))
        u = (u - u.min()) / (u.max() - u.min())
    sampled = rng.uniform(0.25, 1.0) * u
    penalty = rng.uniform(0.1, 0.4) * (1 - 0.3 * np.clip((t - b) / (n - b + 1), 0, 1))  # the model adapts
    return base * (1 + penalty * sampled) * _noise(n, rng, rng.uniform(0.02, 0.06), _maybe_rho(rng))


def ppo_value(n: int, rng: np.random.Generator) -> np.ndarray:
    """PPO's value loss (CleanRL's v_loss, 0.5 MSE of the returns), per minibatch update: each
    rollout is optimized for 3-10 epochs of 4-32 minibatches, and within it the value loss falls
    by 10-50% as the critic fits the rollout's returns, then jumps back at the next rollout; the
    level follows the returns' scale: it grows 1-20x over 10-60% of the run as the agent gets
    better (no return normalization) from 0.005-0.5, then eases by 0-50%; the minibatch loss is
    skewed (gamma, 20-60%), and 0.5-3% of rollouts (a new best episode) sit 2-10x higher."""
    t = np.arange(n, dtype=np.float64)
    epochs, minibatches = int(rng.integers(3, 11)), int(rng.choice([4, 8, 16, 32]))
    per = epochs * minibatches
    u = (t % per) / per
    bend = rng.uniform(2, 6)  # how early in the rollout the critic fits
    fit = 1 - rng.uniform(0.1, 0.5) * (1 - np.exp(-u * bend)) / (1 - math.exp(-bend))
    grow = _log_uniform(rng, 1, 20)
    tau = n * rng.uniform(0.1, 0.6)
    level = _log_uniform(rng, 0.005, 0.5) * (1 + (grow - 1) * (1 - np.exp(-t / (tau / 3))))
    level *= 1 - rng.uniform(0, 0.5) * np.clip((t - tau) / (n - tau + 1), 0, 1)
    rollouts = -(-n // per)
    surprise = np.where(rng.random(rollouts) < rng.uniform(0.005, 0.03), rng.uniform(2, 10, rollouts), 1.0)
    cv = rng.uniform(0.2, 0.6)
    return level * fit * surprise[(t // per).astype(np.int64)] * rng.gamma(1 / cv**2, cv**2, n)


def _adversarial_training(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = rng.uniform(0.05, 0.2)
    d1, d2 = int(n * rng.uniform(0.45, 0.67)), int(n * rng.uniform(0.72, 0.9))
    lr = peak * np.where(t < d1, 1.0, np.where(t < d2, 0.1, 0.01))
    cum = np.cumsum(lr) / peak
    ramp = np.ones(n)
    if rng.random() < 0.5:  # the perturbation budget ramped up from 0
        ramp = np.minimum(t / (n * rng.uniform(0.02, 0.15)), 1)
    clean = rng.uniform(0.2, 0.5)
    robust = rng.uniform(0.9, 1.4)  # the robust training loss the high learning rate holds
    floor = clean + (robust - clean) * ramp
    x = floor + (math.log(10) - floor) / (1 + cum / (n / rng.uniform(50, 300))) ** rng.uniform(0.6, 1.2)
    late = np.clip((t - d1) / (n - d1), 0, 1)
    drop = 1 - rng.uniform(0.2, 0.4) * (lr < peak) * np.minimum((t - d1) / rng.uniform(200, 2000), 1)
    drop *= 1 - rng.uniform(0.02, 0.08) * (t >= d2)  # the second decay: a smaller step
    overfit = 1 - rng.uniform(0.2, 0.5) * late ** rng.uniform(0.7, 1.5)  # robust overfitting
    x = x * drop * overfit * _noise(n, rng, rng.uniform(0.02, 0.06), _maybe_rho(rng))
    return {"loss": x, LR: lr}


def adversarial_training(n: int, rng: np.random.Generator) -> np.ndarray:
    """PGD adversarial training (Madry et al.; Rice et al. 2020) of a CIFAR-10 classifier, the
    loss on the adversarial examples: SGD at 0.05-0.2, divided by 10 at 45-67% and 72-90% of
    the run; from ln 10 down to a robust floor of 0.9-1.4 while the rate is high (on half the
    seeds the budget epsilon is ramped from 0 over 2-15% of the run: the loss first falls
    towards a clean floor of 0.2-0.5, then rises with the budget); at the first decay it drops
    by 20-40% within 200-2,000 steps, at the second by 2-8% more, and it keeps falling by
    20-50% through the end (robust overfitting); 2-6% batch noise."""
    return _adversarial_training(n, rng)["loss"]


def _continual_pretrain(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 1e-5, 3e-4)
    warm = int(n * rng.uniform(0.005, 0.02))
    lr = peak * _warmup_cosine(t, n, warm, 0.1)
    cum = np.cumsum(lr) / lr.mean()
    start = rng.uniform(1.8, 3.5)  # the base model's loss on the new mixture
    gain = rng.uniform(0.1, 0.35)
    q = 1 - 1 / (1 + cum / (n / rng.uniform(20, 300))) ** rng.uniform(0.4, 0.9)
    x = start * (1 - gain * q / q[-1])
    k = t
    gap = rng.uniform(0.02, 0.1) * _transient(k, warm * rng.uniform(0.5, 1.5), n * rng.uniform(0.01, 0.05))
    x = x * (1 + gap) * (1 + rng.uniform(0.02, 0.06) * lr / peak)
    x = x * _noise(n, rng, rng.uniform(0.01, 0.04), _maybe_rho(rng))
    if rng.random() < 0.5:
        x = _bf16(x)
    return {"loss": x, LR: lr}


def continual_pretrain(n: int, rng: np.random.Generator) -> np.ndarray:
    """Continual pretraining of a trained LM on a new data mixture (a new language, code, a
    later crawl, with replay of the old data): the loss starts at the base model's loss on the
    mixture (1.8-3.5 nats, not ln(vocabulary)); the learning rate is re-warmed over 0.5-2% of
    the run to a peak of 1e-5-3e-4, then a cosine to 10%; through the re-warm-up the loss
    rises by 2-10% (the stability gap) and comes back over 1-5% of the run, then falls by
    10-35% in all; 1-4% batch noise; logged in bf16 on half the seeds."""
    return _continual_pretrain(n, rng)["loss"]


def _swa_phase(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = rng.uniform(0.05, 0.2)
    s0 = int(n * rng.uniform(0.6, 0.85))
    lr = peak * _warmup_cosine(t, s0, int(n * rng.uniform(0.0, 0.02)), 0.0)
    lr[s0:] = 0.0
    swa = peak * rng.uniform(0.05, 0.5)
    anneal = max(1, int(n * rng.uniform(0.01, 0.05)))
    k = t[s0:] - s0
    shape = np.minimum(k / anneal, 1)
    if rng.random() < 0.5:  # SWALR's cosine annealing, else linear
        shape = 0.5 * (1 - np.cos(np.pi * shape))
    lr[s0:] = lr[s0 - 1] + (swa - lr[s0 - 1]) * shape
    cum = np.cumsum(lr) / peak
    classes = float(rng.choice([10, 100]))
    floor = _log_uniform(rng, 0.005, 0.1)
    base = _power(cum, math.log(classes), floor, n / rng.uniform(30, 300), rng.uniform(0.8, 1.5))
    hold = rng.uniform(0.1, 0.4)  # nats the learning rate's noise holds the loss up at the peak
    x = base + hold * (lr / peak) ** rng.uniform(1.0, 1.5)
    sd = rng.uniform(0.05, 0.2) * (0.3 + 0.7 * lr / peak)
    return {"loss": x * _noise(n, rng, sd, _maybe_rho(rng)), LR: lr}


def swa_phase(n: int, rng: np.random.Generator) -> np.ndarray:
    """Stochastic weight averaging (Izmailov et al. 2018; torch.optim.swa_utils) of an image
    classifier: SGD at 0.05-0.2 on a cosine to 0 until 60-85% of the run, then SWALR anneals
    the rate (cosine or linear, over 1-5% of the run) up to a constant 5-50% of the peak for the
    rest, while the weights are averaged: the training loss, down to 0.005-0.1 plus what the
    learning rate holds up (0.1-0.4 nats at the peak), rises again to a new plateau and stays
    there with more noise (the batch noise, 5-20%, scales with the rate)."""
    return _swa_phase(n, rng)["loss"]


def focal_detection(n: int, rng: np.random.Generator) -> np.ndarray:
    """A one-stage detector (RetinaNet, detectron2's 1x/3x schedule): the total of the focal
    classification loss (from 1.0-1.3 at the prior's initialization to 0.15-0.35) and the box
    regression loss (from 0.6-1.0 to 0.1-0.3, falling more slowly), normalized by the number
    of positive anchors in the batch, which varies: skewed (gamma) noise of 5-15%; a linear
    warm-up over 0.5-1.5% of the run; the learning rate divided by 10 at 2/3 and 8/9 of the
    run: the loss drops by 5-12% within 100-1,000 steps, then by 1-3%."""
    t = np.arange(n, dtype=np.float64)
    warm = n * rng.uniform(0.005, 0.015)
    progress = np.where(t < warm, t**2 / (2 * warm), t - warm / 2)  # the warm-up's slower start
    cls = _power(
        progress,
        rng.uniform(1.0, 1.3),
        rng.uniform(0.15, 0.35),
        n / rng.uniform(100, 800),
        rng.uniform(0.5, 1.0),
    )
    box = _power(
        progress,
        rng.uniform(0.6, 1.0),
        rng.uniform(0.1, 0.3),
        n / rng.uniform(30, 200),
        rng.uniform(0.4, 0.8),
    )
    x = cls + box
    for at, (lo, hi) in ((int(2 * n / 3), (0.05, 0.12)), (int(8 * n / 9), (0.01, 0.03))):
        x[at:] *= 1 - rng.uniform(lo, hi) * np.minimum((t[at:] - at) / rng.uniform(100, 1000), 1)
    cv = rng.uniform(0.05, 0.15)
    return x * rng.gamma(1 / cv**2, cv**2, n)


def accum_schedule(n: int, rng: np.random.Generator) -> np.ndarray:
    """Gradient accumulation that decreases over the run (PyTorch Lightning's
    GradientAccumulationScheduler, e.g. {0: 8, 4: 4, 8: 1}), the loss logged per optimizer step
    as the mean over its micro-batches: 1-3 changes, each halving or quartering the
    accumulation (from 4-32 micro-batches at first), at 5-60% of the run; after each the batch
    noise grows by the square root of the factor (micro-batch noise 5-30%) and a step carries
    fewer samples, so the loss falls more slowly per step; a power law from 1.5-4 to 0.1-1 in
    the samples seen."""
    k0 = int(rng.choice([4, 8, 16, 32]))
    changes = np.sort(rng.uniform(0.05, 0.6, int(rng.integers(1, 4))) * n).astype(int)
    k, accum = np.full(n, float(k0)), float(k0)
    for at in changes:
        accum = max(1.0, accum / float(rng.choice([2, 4])))
        k[at:] = accum
    samples = np.cumsum(k) / k0  # in optimizer steps of the first stage
    x = _power(
        samples, rng.uniform(1.5, 4.0), rng.uniform(0.1, 1.0), n / rng.uniform(50, 500), rng.uniform(0.5, 1.2)
    )
    return x * _noise(n, rng, rng.uniform(0.05, 0.3) / np.sqrt(k), _maybe_rho(rng))


def progressive_resizing(n: int, rng: np.random.Generator) -> np.ndarray:
    """Image classification with progressive resizing (fast.ai's DAWNBench, FFCV: 128 -> 224 ->
    288 px): 1-2 size changes at 30-95% of the run; at each the loss first rises by 2-15% (the
    train/test resolution discrepancy: objects look larger), decaying over 100-2,000 steps, and
    settles 2-8% lower (more detail); on half the seeds the batch is halved at the larger size
    (its noise x sqrt 2, and each step sees half the images, so the trend slows); from ln 1000
    to 0.8-2.0; 2-6% batch noise."""
    t = np.arange(n, dtype=np.float64)
    changes = np.sort(rng.uniform(0.3, 0.95, int(rng.integers(1, 3))) * n).astype(int)
    halve = rng.random() < 0.5
    per_step, sd = np.ones(n), np.full(n, rng.uniform(0.02, 0.06))
    for at in changes:
        if halve:
            per_step[at:] /= 2
            sd[at:] *= math.sqrt(2)
    x = _power(
        np.cumsum(per_step),
        math.log(1000),
        rng.uniform(0.8, 2.0),
        n / rng.uniform(30, 300),
        rng.uniform(0.6, 1.2),
    )
    for at in changes:
        k = t[at:] - at
        bump = rng.uniform(0.02, 0.15) * _transient(k, rng.uniform(5, 50), rng.uniform(100, 2000))
        x[at:] *= (1 + bump) * (1 - rng.uniform(0.02, 0.08) * np.minimum(k / rng.uniform(200, 2000), 1))
    return x * _noise(n, rng, sd, _maybe_rho(rng))


def pbt_exploit(n: int, rng: np.random.Generator) -> np.ndarray:
    """One worker of population-based training (Jaderberg et al. 2017; Ray Tune's PBT), its
    loss logged under one step count: every 1-5% of the run the worker is ranked; in the bottom
    quantile (on 20-50% of the rankings) it copies a better worker's weights (the loss drops at
    once by 2-15%) and perturbs the copied hyperparameters (x0.8 or x1.2: the level moves by
    -5-+5% over 50-500 steps, the noise by 0.8-1.25x); a power law from 1.5-4 to 0.1-1 below,
    2-10% batch noise."""
    t = np.arange(n, dtype=np.float64)
    x = _power(
        t, rng.uniform(1.5, 4.0), rng.uniform(0.1, 1.0), n / rng.uniform(50, 500), rng.uniform(0.5, 1.2)
    )
    every, odds = int(n * rng.uniform(0.01, 0.05)), rng.uniform(0.2, 0.5)
    log_f, sd = np.zeros(n), np.full(n, _log_uniform(rng, 0.02, 0.1))
    for at in range(every, n, every):
        if rng.random() >= odds:
            continue
        k = t[at:] - at
        log_f[at:] += math.log(rng.uniform(0.85, 0.98))
        log_f[at:] += math.log(rng.uniform(0.95, 1.05)) * np.minimum(k / rng.uniform(50, 500), 1)
        sd[at:] *= rng.uniform(0.8, 1.25)
    return x * np.exp(log_f) * _noise(n, rng, sd, _maybe_rho(rng))


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "perplexity_logged": perplexity_logged,
    "keras_epoch_mean": keras_epoch_mean,
    "fedavg_rounds": fedavg_rounds,
    "noisy_student": noisy_student,
    "uncertainty_weighted": uncertainty_weighted,
    "scheduled_sampling": scheduled_sampling,
    "ppo_value": ppo_value,
    "adversarial_training": adversarial_training,
    "continual_pretrain": continual_pretrain,
    "swa_phase": swa_phase,
    "focal_detection": focal_detection,
    "accum_schedule": accum_schedule,
    "progressive_resizing": progressive_resizing,
    "pbt_exploit": pbt_exploit,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "adversarial_training": _adversarial_training,
    "continual_pretrain": _continual_pretrain,
    "swa_phase": _swa_phase,
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
def _base(n: int, rng: np.random.Generator) -> np.ndarray:
    """A healthy loss to break: a power-law decay with 1-15% batch noise."""
    t = np.arange(n, dtype=np.float64)
    x = _power(
        t, rng.uniform(1.5, 4.0), rng.uniform(0.1, 1.0), n / rng.uniform(50, 500), rng.uniform(0.5, 1.2)
    )
    return x * _noise(n, rng, _log_uniform(rng, 0.01, 0.15), _maybe_rho(rng))


def shard_repeat(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of the run the data loader serves one shard over and over (a resumed
    loader's shard index stuck, a worker re-reading its file): the same 100-3,000 batches in
    the same order, so the series repeats with that period (each batch's own difficulty,
    5-20%, comes back every pass) and the model memorizes them: the loss falls below the healthy
    trend, towards 1-20% of its level, with a time constant of 2-20 passes."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.3, 0.7))
    shard = int(_log_uniform(rng, 100, 3000))
    k = np.arange(n - t0, dtype=np.float64)
    level = float(np.median(x[max(0, t0 - 200) : t0]))
    low = rng.uniform(0.01, 0.2)
    memo = low + (1 - low) * np.exp(-k / (shard * rng.uniform(2, 20)))
    batches = _noise(shard, rng, rng.uniform(0.05, 0.2))  # the shard's batches, always the same
    fresh = _noise(n - t0, rng, rng.uniform(0.005, 0.02))  # what changes between passes: dropout
    x[t0:] = level * memo * batches[(k % shard).astype(np.int64)] ** np.sqrt(memo) * fresh
    return x, t0


def lr_hits_zero(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A linear-decay schedule given the steps of one epoch as the run's total
    (`get_linear_schedule_with_warmup(num_training_steps=len(loader))`, the epochs forgotten):
    the learning rate reaches 0 after the first of 2-10 epochs and stays there, so from 10-50%
    of the run the loss stops falling: the same batch noise (1-15%) around the level it had,
    for good, where the healthy run would go on falling; before, it follows the decaying
    rate (a warm-up of 0-5% of that epoch)."""
    t = np.arange(n, dtype=np.float64)
    t0 = int(n / int(rng.integers(2, 11)))
    warm = max(1, int(t0 * rng.uniform(0.0, 0.05)))
    lr = np.where(t < warm, (t + 1) / warm, np.clip((t0 - t) / (t0 - warm), 0, 1))
    cum = np.cumsum(lr)
    hold = rng.uniform(0.03, 0.1)
    x = _power(
        cum, rng.uniform(1.5, 4.0), rng.uniform(0.1, 1.0), n / rng.uniform(50, 500), rng.uniform(0.5, 1.2)
    )
    x = x * (1 + hold * lr) * _noise(n, rng, _log_uniform(rng, 0.01, 0.15), _maybe_rho(rng))
    return x, t0


def precision_blowup(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """An optimizer precision bug (Adam's epsilon 1e-8 underflowing to 0 in fp16 optimizer
    state: a parameter whose second moment vanishes gets a huge update): from 30-70% of the run
    10-100 loss spikes come, ever more often (their rate e-folds 2-5 times before the end) and
    larger (1.3-3x at first, up to the cube of that), each recovering over 20-200 steps but
    leaving the loss 0.5-3% higher; after 30-90% of the rest of the run the loss overflows:
    inf once, then NaN for good."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.3, 0.7))
    end = t0 + int((n - t0) * rng.uniform(0.3, 0.9))
    c = rng.uniform(2, 5)  # e-folds of the spikes' rate over [t0, end)
    u = np.sort(rng.random(int(rng.integers(10, 101))))
    u[0] = 0.0  # the first spike marks the onset
    where = np.log1p(u * math.expm1(c)) / c  # a density growing as exp(c * where)
    log_f = np.zeros(n)
    for w in where:
        g = t0 + int(w * (end - t0))
        tau = rng.uniform(20, 200)
        j = np.arange(min(n - g, int(30 * tau)), dtype=np.float64)
        log_f[g : g + len(j)] += math.log(rng.uniform(1.3, 3.0)) * (1 + 2 * w) * np.exp(-j / tau)
        log_f[g:] += math.log(rng.uniform(1.005, 1.03))
    x = x * np.exp(log_f)
    x[end] = np.inf
    x[end + 1 :] = np.nan
    return x, t0


def unshuffled_resume(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Resumed at 30-70% of the run with the shuffling lost (a sampler rebuilt without
    `shuffle=True` over a data set stored class by class): every epoch now reads one class
    after another, 20-1,000 batches each, and the model learns to predict the class it is
    reading: at each new class the loss jumps to 3-10x the healthy level (the last class is
    predicted) and falls within 5-50 steps to 2-20% of it, a saw-tooth of that period, on the
    healthy run's 1-15% batch noise."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.3, 0.7))
    block = int(_log_uniform(rng, 20, 1000))
    k = np.arange(n - t0, dtype=np.float64)
    j = k % block
    high, low = rng.uniform(3, 10), rng.uniform(0.02, 0.2)
    jumps = rng.uniform(0.7, 1.3, int(k[-1] // block) + 1)[(k // block).astype(np.int64)]
    shape = low + (high * jumps - low) * np.exp(-j / rng.uniform(5, 50) * 3)
    x[t0:] = x[t0:] * shape  # the healthy trend and its batch noise, at the class's phase
    return x, t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "shard_repeat": shard_repeat,
    "lr_hits_zero": lr_hits_zero,
    "precision_blowup": precision_blowup,
    "unshuffled_resume": unshuffled_resume,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
