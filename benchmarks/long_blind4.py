"""A fourth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind4`.

    .venv/bin/python benchmarks/long_runs.py --blind4 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how a real
practice's loss looks over 10^5-10^6 steps (the practice is cited in its docstring), its
parameters drawn per seed, and none of them is one of `long_runs.KINDS`, `long_blind.KINDS`,
`long_blind2.KINDS` or `long_blind3.KINDS` (nor a bug of their `BUGS`). They are to be measured
once, on the held-out seeds (`SEEDS`), and not tuned on: a rule changed after looking at them
makes them a tuning set.

The interface is `long_blind3`'s: a kind is `(n, rng) -> loss`; four kinds follow a
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
from long_blind import _ar1, _log_uniform, _maybe_rho, _noise, _power  # the first blind set's helpers
from long_blind2 import _bf16  # the second's
from long_blind3 import _transient  # the third's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE (no kind here records one)
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 4000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _gamma(n: int, rng: np.random.Generator, cv: float | np.ndarray) -> np.ndarray:
    """A skewed (gamma) noise factor of mean 1 and coefficient of variation `cv`."""
    cv = np.asarray(cv, dtype=np.float64)
    return rng.gamma(1 / cv**2, 1.0, n) * cv**2


def _f32(x: np.ndarray) -> np.ndarray:
    """As a float32 loss is logged."""
    return x.astype(np.float32).astype(np.float64)


# the healthy kinds ----------------------------------------------------------------------------
def wgan_gp_critic(n: int, rng: np.random.Generator) -> np.ndarray:
    """The critic's loss of a WGAN-GP (Gulrajani et al. 2017, igul222/improved_wgan_training:
    D(fake) - D(real) + 10 * gradient penalty, 5 critic steps per generator step, Adam 1e-4),
    logged at every critic step: it starts positive (the penalty, 1-10, at an untrained critic),
    plunges within 0.2-2% of the run to minus the Wasserstein estimate (2-20), then rises
    towards 0 as the generator catches up (the estimate shrinks to 5-25% of its deepest by the
    end, as a power law); within each group of 5 critic steps the first sits 2-10% of the
    estimate higher (the generator has just moved); the batch noise is absolute, 10-30% of the
    estimate."""
    t = np.arange(n, dtype=np.float64)
    n_critic = 5
    deep = _log_uniform(rng, 2, 20)
    fall = n * rng.uniform(0.002, 0.02)
    shrink = rng.uniform(0.05, 0.25)
    q = 1 - 1 / (1 + np.maximum(t - fall, 0) / (n / rng.uniform(20, 200))) ** rng.uniform(0.5, 1.0)
    w = deep * (1 - (1 - shrink) * q / q[-1])  # the Wasserstein estimate
    penalty = rng.uniform(1, 10) * np.exp(-t / (fall / 4))
    reach = 1 - np.exp(-t / (fall / 3))  # the critic learning to separate real from fake
    x = penalty - w * reach
    first = (t % n_critic == 0) * rng.uniform(0.02, 0.1)
    return x + w * (first + rng.uniform(0.1, 0.3) * rng.standard_normal(n))


def _sae_resampling(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 5e-5, 4e-4)
    warm = int(n * rng.uniform(0.0, 0.05))
    lr = np.where(t < warm, (t + 1) / max(1, warm), 1.0)
    if rng.random() < 0.5:  # SAELens' lr_decay_steps: a linear decay to 0 at the end
        d0 = int(n * rng.uniform(0.8, 0.9))
        lr = np.where(t < d0, lr, (n - t) / (n - d0))
    lr = peak * lr
    cum = np.cumsum(lr) / peak
    mse = _power(cum, rng.uniform(0.8, 1.2), rng.uniform(0.03, 0.2), n / rng.uniform(100, 1000), 0.8)
    l1_warm = n * rng.uniform(0.01, 0.05)
    coeff = np.minimum(t / l1_warm, 1)  # SAELens' l1_warm_up_steps
    l1 = rng.uniform(0.05, 0.3) * (0.3 + 0.7 * np.exp(-cum / (n * rng.uniform(0.05, 0.3))))
    x = mse + coeff * l1
    every = int(n * rng.uniform(0.1, 0.25))
    for at in range(every, int(n * 0.7), every):  # dead latents resampled
        k = t[at:] - at
        x[at:] *= 1 + rng.uniform(0.05, 0.3) * _transient(k, rng.uniform(1, 20), rng.uniform(200, 3000))
    x = x * _noise(n, rng, rng.uniform(0.02, 0.08), _maybe_rho(rng))
    return {"loss": x, LR: lr}


def sae_resampling(n: int, rng: np.random.Generator) -> np.ndarray:
    """A sparse autoencoder on a language model's activations (Bricken et al. 2023, "Towards
    Monosemanticity"; SAELens): normalized MSE (from ~1 to 0.03-0.2) plus an L1 penalty whose
    coefficient is warmed up from 0 over 1-5% of the run (where the MSE has fallen by then, the
    total rises again through the warm-up), the L1 term itself shrinking as the code gets
    sparse; every 10-25% of the run, until 70%, the dead latents are resampled: the loss jumps
    by 5-30% within 1-20 steps and recovers over 200-3,000; Adam at 5e-5-4e-4, warmed up over
    0-5%, constant, on half the seeds decayed linearly to 0 over the last 10-20%; 2-8% batch
    noise."""
    return _sae_resampling(n, rng)["loss"]


def dqn_target_sync(n: int, rng: np.random.Generator) -> np.ndarray:
    """DQN's TD loss (Mnih et al. 2015; CleanRL's dqn_atari td_loss, SB3's DQN; Huber loss,
    rewards clipped), per gradient step after the replay buffer's warm-up: every 250-2,500
    gradient steps the target network is synced to the online one and the loss jumps up by
    20-100% (the targets move), decaying within the period as the online network fits them; the
    level grows 2-20x over 10-50% of the run from 0.001-0.01 as the agent finds rewards and the
    Q-values grow, then drifts (+-30%, slow); the batch loss is log-normal, 30-80% (a few
    transitions with large TD errors dominate)."""
    t = np.arange(n, dtype=np.float64)
    period = int(_log_uniform(rng, 250, 2500))
    k = t % period
    jump = rng.uniform(0.2, 1.0)
    saw = 1 + jump * np.exp(-k / (period * rng.uniform(0.1, 0.4)))
    grow = _log_uniform(rng, 2, 20)
    tau = n * rng.uniform(0.1, 0.5)
    level = _log_uniform(rng, 0.001, 0.01) * (1 + (grow - 1) * (1 - np.exp(-t / (tau / 3))))
    level *= np.exp(0.3 * _ar1(rng.standard_normal(n), 1 - 1 / (n * rng.uniform(0.02, 0.1))))
    return level * saw * _noise(n, rng, rng.uniform(0.3, 0.8))


def entropy_loss(n: int, rng: np.random.Generator) -> np.ndarray:
    """Stable-Baselines3's `train/entropy_loss` (PPO, A2C): minus the policy's mean entropy,
    per minibatch update; it RISES as the policy gets more certain. Discrete actions (half the
    seeds, 2-18 actions): from -ln(actions) towards -(0.05-0.5) ln(actions), the batch noise
    growing from a tenth of its final size (the policy is near uniform in every state) to
    5-20% of the entropy. Continuous actions (the others: a Gaussian policy with a
    state-independent log std, 1-17 dimensions, `log_std_init=0`): -d (1.419 + mean log std),
    the log std drifting down by 0.3-2.5, so it crosses 0 when the std falls below 0.24; no
    batch noise (the entropy is the same in every state), only Adam's small steps (a correlated
    wiggle of 0.002-0.02 in the log std); logged in float32."""
    t = np.arange(n, dtype=np.float64)
    q = 1 - np.exp(-t / (n * rng.uniform(0.1, 0.6)))
    if rng.random() < 0.5:
        actions = int(rng.integers(2, 19))
        ent = math.log(actions) * (1 - (1 - rng.uniform(0.05, 0.5)) * q)
        sd = rng.uniform(0.05, 0.2) * (0.1 + 0.9 * q)  # near uniform in every state at first
        ent = ent * _noise(n, rng, sd, _maybe_rho(rng))
        return _f32(-ent)
    d = int(rng.integers(1, 18))
    log_std = -rng.uniform(0.3, 2.5) * q
    log_std = log_std + _log_uniform(rng, 0.002, 0.02) * _ar1(
        rng.standard_normal(n), 1 - 1 / rng.uniform(50, 1000)
    )
    return _f32(-d * (0.5 * math.log(2 * math.pi * math.e) + log_std))


def _scst_switch(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.integers(40, 61))
    per_epoch = n / epochs
    epoch = t // per_epoch
    switch = int(n * rng.uniform(0.4, 0.7))
    peak = 5e-4 * rng.uniform(0.5, 2.0)
    lr = peak * 0.8 ** (epoch // 3)  # learning_rate_decay_every 3, rate 0.8
    lr[switch:] = _log_uniform(rng, 2e-5, 5e-5)
    vocab = float(rng.choice([9_487, 10_010]))
    ce = _power(
        np.cumsum(lr) / peak, math.log(vocab), rng.uniform(2.0, 2.6), n / rng.uniform(100, 1000),
        rng.uniform(0.5, 1.0),
    )  # fmt: skip
    x = ce * _noise(n, rng, rng.uniform(0.03, 0.08), _maybe_rho(rng))
    k = t[switch:] - switch
    m = len(k)
    if rng.random() < 0.5:  # the greedy decode as baseline: samples mostly score below it
        adv = -rng.uniform(0.05, 0.2) * (
            1 - rng.uniform(0.5, 0.9) * (1 - np.exp(-k / (m * rng.uniform(0.1, 0.4))))
        )
    else:  # the mean of the other samples (the new self-critical): 0 on average
        adv = np.zeros(m)
    nll = rng.uniform(1.0, 2.0) * (1 - rng.uniform(0.2, 0.5) * (1 - np.exp(-k / (m * rng.uniform(0.1, 0.4)))))
    x[switch:] = nll * (adv + rng.uniform(0.05, 0.2) * rng.standard_normal(m))
    return {"loss": x, LR: lr}


def scst_switch(n: int, rng: np.random.Generator) -> np.ndarray:
    """Image captioning trained with cross-entropy, then self-critical sequence training (Rennie
    et al. 2017; ruotianluo/self-critical.pytorch, `--self_critical_after`): a token cross-entropy
    from ln(~10k words) to 2.0-2.6 under Adam (5e-4, x0.8 every 3 of 40-60 epochs), then from
    40-70% of the run the logged loss is the policy-gradient one, -(reward - baseline) log p per
    token at a fixed 2e-5-5e-5: it drops to around 0 at once, values of both signs (an absolute
    noise of 0.05-0.2 x the samples' NLL, 1-2 nats per token); with the greedy decode as the
    baseline (half the seeds) it sits below 0 (samples score below greedy: -0.05 - -0.4) and
    climbs towards 0 as sampling sharpens; with the mean of the other samples it is 0 on
    average."""
    return _scst_switch(n, rng)["loss"]


def triplet_batch_hard(n: int, rng: np.random.Generator) -> np.ndarray:
    """Metric learning with the batch-hard triplet loss (Hermans et al. 2017, "In Defense of the
    Triplet Loss"; FaceNet; person re-identification, P x K batches): at initialization the
    embeddings are close together, so the loss sits at the margin (0.2-1.0; the soft-margin
    variant, half the seeds: at ln 2) for 0.5-5% of the run, then leaves it within 0.5-3% and
    falls to 10-40% of it, slowly falling on; the hardest positive and negative of each anchor
    make the batch loss skewed (gamma, 10-30%)."""
    t = np.arange(n, dtype=np.float64)
    start = math.log(2) if rng.random() < 0.5 else rng.uniform(0.2, 1.0)
    stuck, leave = n * rng.uniform(0.005, 0.05), n * rng.uniform(0.005, 0.03)
    floor = start * rng.uniform(0.1, 0.4)
    after = np.maximum(t - stuck, 0)
    learn = 1 / (1 + np.exp(-(t - stuck - leave / 2) / (leave / 8)))
    low = floor * (1 + rng.uniform(0.5, 1.5) / (1 + after / (n * rng.uniform(0.02, 0.1))) ** 0.7)
    level = start * (1 - learn) + np.minimum(low, start) * learn
    cv = rng.uniform(0.1, 0.3) * np.where(t < stuck, 0.2, 1.0)  # collapsed: every triplet alike
    return level * _gamma(n, rng, cv)


def cyclical_kl(n: int, rng: np.random.Generator) -> np.ndarray:
    """A text VAE with the cyclical KL annealing schedule (Fu et al. 2019,
    haofuml/cyclical_annealing; M = 4-10 cycles, R = 0.5-0.8): in each cycle beta rises
    linearly from 0 to 1 over its first R, then stays at 1; the logged negative ELBO
    (reconstruction + beta KL, nats per sentence) drops at each cycle's start, where beta
    returns to 0, by the KL term (2-6 nats), and climbs back as beta grows (the weighted term
    peaking before beta reaches 1, as the KL shrinks under it); meanwhile the reconstruction
    falls from 150-300 to 70-110 nats and the KL grows while beta is small (to 5-20 nats) and
    shrinks again at beta = 1 (to 2-6); 3-8% batch noise (sentence lengths)."""
    t = np.arange(n, dtype=np.float64)
    cycles, r = int(rng.integers(4, 11)), rng.uniform(0.5, 0.8)
    u = (t % (n / cycles)) / (n / cycles)
    beta = np.minimum(u / r, 1)
    recon = _power(
        t, rng.uniform(150, 300), rng.uniform(70, 110), n / rng.uniform(20, 200), rng.uniform(0.5, 1.0)
    )
    kl_hi, kl_lo = rng.uniform(5, 20), rng.uniform(2, 6)
    kl = kl_lo + (kl_hi - kl_lo) * (1 - beta) ** 2  # the posterior takes in more while beta is low
    return (recon + beta * kl) * _noise(n, rng, rng.uniform(0.03, 0.08), _maybe_rho(rng))


def _yolo_close_mosaic(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.choice([100, 150, 200, 300]))
    per_epoch = n / epochs
    epoch = t // per_epoch
    lr0, lrf = rng.choice([0.01, 0.002]), 0.01
    lf = (1 - epoch / epochs) * (1 - lrf) + lrf  # Ultralytics' linear schedule, per epoch
    warm = max(3 * per_epoch, 100)  # warmup_epochs=3
    lr = lr0 * lf * np.minimum(t / warm, 1)
    cum = np.cumsum(lr) / lr0
    scratch = rng.random() < 0.5  # from scratch, or fine-tuned from COCO weights
    hi = (1.5, 3.5, 1.5) if scratch else (1.2, 2.0, 1.3)
    lo = (rng.uniform(0.8, 1.1), rng.uniform(0.5, 1.0), rng.uniform(0.9, 1.1))
    scale = n / rng.uniform(20, 200)
    box, cls, dfl = (
        _power(cum, h * rng.uniform(0.9, 1.1), f, scale, rng.uniform(0.5, 1.0))
        for h, f in zip(hi, lo, strict=True)
    )
    close = int((epochs - 10) * per_epoch)  # close_mosaic=10: the last 10 epochs without mosaic
    k = t[close:] - close
    ease = np.minimum(k / rng.uniform(20, 200), 1)
    box[close:] *= 1 - rng.uniform(0.1, 0.2) * ease
    cls[close:] *= 1 - rng.uniform(0.15, 0.3) * ease
    dfl[close:] *= 1 - rng.uniform(0.03, 0.08) * ease
    x = (box + cls + dfl) * _gamma(n, rng, rng.uniform(0.05, 0.15))
    return {"loss": x, LR: lr}


def yolo_close_mosaic(n: int, rng: np.random.Generator) -> np.ndarray:
    """An Ultralytics YOLOv8 detector (docs: `close_mosaic=10`, `warmup_epochs=3`, `lrf=0.01`),
    the sum of the box, classification and DFL losses per batch: SGD at lr0 0.01 (or 0.002),
    warmed up over 3 epochs, then decayed linearly per epoch to 1%; 100-300 epochs from scratch
    (from ~6.5) or fine-tuned from COCO weights (from ~4.5) down to 2.2-3.2; for the last 10
    epochs the mosaic augmentation is closed and the loss drops within 20-200 steps (box by
    10-20%, classification by 15-30%, DFL by 3-8%); skewed batch noise (gamma, 5-15%: the number
    of objects varies)."""
    return _yolo_close_mosaic(n, rng)["loss"]


def dp_sgd(n: int, rng: np.random.Generator) -> np.ndarray:
    """Differentially private training (DP-SGD, Abadi et al. 2016; Opacus with Poisson sampling
    and the BatchMemoryManager), the loss logged per physical batch: each logical batch (a
    Poisson-sampled 1,024-8,192 examples, split into physical batches of 64-256) is 4-128
    values at the same weights, the last one smaller and noisier; the Gaussian noise added to
    the clipped gradients makes the weights wander, so the loss has a slow correlated wander of
    1-5% (over 50-500 logical steps) and sits on a high floor (1.0-1.8 from ln 10: clipping and
    noise cost accuracy); skewed batch noise (gamma) of 5-15% at the full physical size,
    growing as 1/sqrt(size) on the smaller last ones (at most 1.5x the mean for a single
    example)."""
    physical = int(rng.choice([64, 128, 256]))
    logical = int(rng.choice([1024, 2048, 4096, 8192]))
    sizes: list[int] = []
    steps: list[int] = []
    while len(sizes) < n:  # the Poisson-sampled logical batches, cut into physical ones
        m = int(rng.poisson(logical))
        parts = [physical] * (m // physical) + ([m % physical] if m % physical else [])
        steps.extend([steps[-1] + 1 if steps else 0] * len(parts))
        sizes.extend(parts)
    size = np.asarray(sizes[:n], dtype=np.float64)
    step = np.asarray(steps[:n], dtype=np.float64)  # each value's logical step (its weights)
    x = _power(
        step, math.log(10), rng.uniform(1.0, 1.8), step[-1] / rng.uniform(20, 200), rng.uniform(0.5, 1.0)
    )
    wander = rng.uniform(0.01, 0.05) * _ar1(
        rng.standard_normal(int(step[-1]) + 1), 1 - 1 / rng.uniform(50, 500)
    )
    cv = np.minimum(rng.uniform(0.05, 0.15) * np.sqrt(physical / size), 1.5)  # per example: <= 1.5
    return x * np.exp(wander[step.astype(np.int64)]) * _gamma(n, rng, cv)


def flow_nll(n: int, rng: np.random.Generator) -> np.ndarray:
    """A normalizing flow (MAF, Papamakarios et al. 2017; nflows) fit to a standardized tabular
    data set of the UCI suite, the negative log-likelihood in nats per example: from the base
    Gaussian's ~1.42 d (d: 6-63 dimensions) down to the data set's level (POWER ~ -0.3, GAS ~
    -11, HEPMASS ~ +18, MINIBOONE ~ +11, BSDS300 ~ -155; +-5%), so on some it crosses 0 and
    keeps falling; the batch noise is absolute (0.02-0.3 nats at batch 512-1,024), and
    0.01-0.1% of batches carry an outlier the flow maps badly (+5-50 nats)."""
    data = {
        "power": (6, -0.3),
        "gas": (8, -11.0),
        "hepmass": (21, 18.0),
        "miniboone": (43, 11.5),
        "bsds300": (63, -155.0),
    }
    d, final = data[str(rng.choice(list(data)))]
    t = np.arange(n, dtype=np.float64)
    start = 0.5 * math.log(2 * math.pi * math.e) * d * rng.uniform(0.95, 1.1)
    final = final + abs(final) * rng.uniform(-0.05, 0.05) + rng.uniform(0, 0.3)
    q = 1 - 1 / (1 + t / (n / rng.uniform(50, 500))) ** rng.uniform(0.5, 1.0)
    x = start - (start - final) * q / q[-1]
    x = x + _log_uniform(rng, 0.02, 0.3) * rng.standard_normal(n)
    out = rng.random(n) < _log_uniform(rng, 1e-4, 1e-3)
    x[out] += rng.uniform(5, 50, int(out.sum()))
    return x


def progressive_stacking(n: int, rng: np.random.Generator) -> np.ndarray:
    """BERT pretraining with progressive stacking (Gong et al. 2019, gonglinyuan/StackingBERT:
    3 -> 6 -> 12 layers): the shallow model trains for 10-20% of the run, is stacked (its layers
    copied on top of themselves) and trains on; 1-2 stackings (6 -> 12, or 3 -> 6 -> 12, each
    stage before the last 10-20% of the run). At each the MLM loss jumps up by
    5-30% within 1-10 steps (the copy is not the same function), is back within 100-1,000
    steps, then falls towards the deeper model's lower floor (3 layers: 2.6-3.0 nats, 6:
    2.1-2.4, 12: 1.7-2.0) from ln(30,522); 1-4% batch noise."""
    t = np.arange(n, dtype=np.float64)
    stacks = int(rng.integers(1, 3))
    floors = [rng.uniform(2.6, 3.0), rng.uniform(2.1, 2.4), rng.uniform(1.7, 2.0)][-(stacks + 1) :]
    bounds = [0]
    for _ in range(stacks):
        bounds.append(bounds[-1] + int(n * rng.uniform(0.1, 0.2)))
    bounds.append(n)
    x, level = np.empty(n), math.log(30_522)
    for s in range(stacks + 1):
        a, b = bounds[s], bounds[s + 1]
        k = t[a:b] - a
        seg = _power(
            k, level, floors[s], n / rng.uniform(50, 500) if s == 0 else n / rng.uniform(20, 100), 0.6
        )
        if s:
            seg *= 1 + rng.uniform(0.05, 0.3) * _transient(k, rng.uniform(1, 10), rng.uniform(30, 300))
        x[a:b] = seg
        level = float(seg[-1])
    return x * _noise(n, rng, rng.uniform(0.01, 0.04), _maybe_rho(rng))


def _nnunet_dice_ce(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = 1000
    epoch = np.floor(t / (n / epochs))
    lr = 0.01 * (1 - epoch / epochs) ** 0.9  # nnU-Net's PolyLRScheduler, stepped per epoch
    cum = np.cumsum(lr) / 0.01
    classes = int(rng.integers(2, 5))
    scale = n / rng.uniform(20, 200)
    ce = _power(cum, math.log(classes) * rng.uniform(0.8, 1.2), rng.uniform(0.01, 0.06), scale / 3, 1.0)
    dice = rng.uniform(0.05, 0.2) + (rng.uniform(0.6, 0.95) - 0.1) * (1 - 1 / (1 + cum / scale) ** 0.8)
    ce = ce * _noise(n, rng, rng.uniform(0.05, 0.2))
    dice = np.clip(1 - (1 - dice) * _gamma(n, rng, rng.uniform(0.1, 0.4)), 0, 1)  # batch 2: patches differ
    return {"loss": ce - dice, LR: lr}


def nnunet_dice_ce(n: int, rng: np.random.Generator) -> np.ndarray:
    """nnU-Net (Isensee et al. 2021, MIC-DKFZ/nnUNet): 1,000 epochs (of 250 iterations there,
    of n/1,000 here), SGD (Nesterov) at 0.01 on the poly schedule (1 - epoch/1000)^0.9, stepped
    per epoch; the loss is cross-entropy plus the soft Dice loss as nnU-Net writes it, minus
    the Dice (2-4 classes): from ln(classes) (+-20%) less 0.05-0.2 (0.35-1.6) it falls through
    0 to about -(0.5-0.9) and keeps creeping down, never below -1; batches of 2 patches (a
    third forced to hold foreground): the batch's Dice scatters (its gap to 1 by 10-40%,
    skewed), its cross-entropy by 5-20%."""
    return _nnunet_dice_ce(n, rng)["loss"]


def grpo_kl(n: int, rng: np.random.Generator) -> np.ndarray:
    """GRPO (Shao et al. 2024; TRL's GRPOTrainer, `num_iterations=1`), the loss logged per
    micro-batch: the clipped policy term is 0 in value (the ratio is exactly 1 and the
    advantages are centred per group; huggingface/open-r1#239), so the loss is beta (0.001-0.04)
    times the KL to the reference policy: the KL is exactly 0 for the first optimizer step's
    4-64 micro-batches (the policy is the reference), then rises as the policy moves away, to
    0.05-2 nats per token by the end; the batch KL is skewed (gamma, 20-60%); with the loss
    normalized per sequence (half the seeds) that is all (the first values exactly 0.0), with
    the loss normalized over all tokens (`loss_type="bnpo"`/"dapo") the length-weighted
    advantages add a zero-mean noise of 0.002-0.05 from the first step; logged in float32."""
    t = np.arange(n, dtype=np.float64)
    beta = float(rng.choice([0.001, 0.01, 0.02, 0.04]))
    accum = int(rng.choice([4, 8, 16, 32, 64]))
    kl_end = _log_uniform(rng, 0.05, 2.0)
    q = (t / n) ** rng.uniform(0.5, 1.5)
    if rng.random() < 0.5:  # it levels off
        q = 1 - np.exp(-t / (n * rng.uniform(0.1, 0.4)))
        q = q / q[-1]
    kl = kl_end * q * _gamma(n, rng, rng.uniform(0.2, 0.6))
    kl[:accum] = 0.0
    x = beta * kl
    if rng.random() < 0.5:  # normalized over all tokens
        x = x + _log_uniform(rng, 0.002, 0.05) * rng.standard_normal(n)
    return _f32(x)


def electra_rtd(n: int, rng: np.random.Generator) -> np.ndarray:
    """ELECTRA pretraining (Clark et al. 2020, google-research/electra; Small: 1M steps), the
    logged total: the generator's MLM loss (from ln(30,522) to 2.5-3.5) plus 50 x the
    discriminator's replaced-token-detection loss (from ln 2); the discriminator first learns
    fast against a generator that still samples nonsense (its loss down to 0.03-0.1 within
    0.2-1% of the run), then the replacements get plausible as the generator learns (over 1-5%)
    and its loss climbs back to 0.2-0.35 before falling slowly to 0.12-0.25 (the generator's
    quality sets it, google-research/electra#3); 1-4% batch noise, in bf16 on half the
    seeds."""
    t = np.arange(n, dtype=np.float64)
    gen = _power(t, math.log(30_522), rng.uniform(2.5, 3.5), n / rng.uniform(50, 300), rng.uniform(0.5, 0.9))
    easy = rng.uniform(0.03, 0.1)
    fast = n * rng.uniform(0.002, 0.01)
    g = 1 - np.exp(-t / (n * rng.uniform(0.01, 0.05)))  # how plausible the replacements are
    hard_peak, hard_end = rng.uniform(0.2, 0.35), rng.uniform(0.12, 0.25)
    hard = hard_end + (hard_peak - hard_end) / (1 + t / (n * rng.uniform(0.05, 0.2))) ** 0.7
    disc = (math.log(2) - easy) * np.exp(-t / (fast / 4)) + easy * (1 - g) + hard * g
    x = (gen + 50 * disc) * _noise(n, rng, rng.uniform(0.01, 0.04), _maybe_rho(rng))
    return _bf16(x) if rng.random() < 0.5 else x


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "wgan_gp_critic": wgan_gp_critic,
    "sae_resampling": sae_resampling,
    "dqn_target_sync": dqn_target_sync,
    "entropy_loss": entropy_loss,
    "scst_switch": scst_switch,
    "triplet_batch_hard": triplet_batch_hard,
    "cyclical_kl": cyclical_kl,
    "yolo_close_mosaic": yolo_close_mosaic,
    "dp_sgd": dp_sgd,
    "flow_nll": flow_nll,
    "progressive_stacking": progressive_stacking,
    "nnunet_dice_ce": nnunet_dice_ce,
    "grpo_kl": grpo_kl,
    "electra_rtd": electra_rtd,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "sae_resampling": _sae_resampling,
    "scst_switch": _scst_switch,
    "yolo_close_mosaic": _yolo_close_mosaic,
    "nnunet_dice_ce": _nnunet_dice_ce,
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


def single_batch_loop(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of the run (new code after a resume) every step trains on the same batch:
    `batch = next(iter(loader))` inside the loop over a loader that does not shuffle (a
    sequential or streaming pipeline rebuilt at each call), so it is always the first batch. The
    batch noise is gone (only dropout's 0.5-2% is left) and the model memorizes the batch: the
    loss falls smoothly from the level it had to 0.1-5% of it, with a time constant of
    50-2,000 steps, and stays there."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0, dtype=np.float64)
    level = float(np.median(x[max(0, t0 - 200) : t0])) * _noise(1, rng, 0.1)[0]  # this batch's loss
    low = _log_uniform(rng, 0.001, 0.05)
    x[t0:] = level * (low + (1 - low) * np.exp(-k / _log_uniform(rng, 50, 2000)))
    x[t0:] *= _noise(n - t0, rng, rng.uniform(0.005, 0.02))
    return x, t0


def warmup_never_ends(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """`scheduler.step()` called once per epoch on a per-step schedule
    (`get_linear_schedule_with_warmup(num_warmup_steps=500-10,000)`): the learning rate is 0
    for the whole first epoch and then only epoch/warmup of its peak, a few % at most over the
    run's 3-20 epochs, rising by a step at each epoch: the loss sits at its start, with its
    batch noise (1-15%), through the first epoch, then falls, faster at each epoch but far
    slower than the healthy run; the defect is there from the start."""
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.integers(3, 21))
    warm = int(_log_uniform(rng, 500, 10_000))
    lr = np.minimum((t // (n / epochs)) / warm, 1)
    x = _power(
        np.cumsum(lr),
        rng.uniform(1.5, 4.0),
        rng.uniform(0.1, 1.0),
        n / rng.uniform(50, 500),
        rng.uniform(0.5, 1.2),
    )
    return x * _noise(n, rng, _log_uniform(rng, 0.01, 0.15), _maybe_rho(rng)), 0


def padding_in_loss(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of an LM fine-tune's run a new collator pads the labels with the pad token's
    id instead of -100 (`ignore_index` lost), so the per-token mean takes in the padding, a
    share of each batch that varies (a Beta with a mean of 20-60%): at first the pad tokens
    cost 8-15 nats each (never predicted before), so the loss jumps up, then within 50-1,000
    steps the model learns that pad follows pad and they cost ~0: the loss ends well below the
    healthy level ((1 - share) x it), and the batch's padding share, not its text, sets its
    noise."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0, dtype=np.float64)
    mean = rng.uniform(0.2, 0.6)
    c = rng.uniform(5, 30)
    share = rng.beta(mean * c, (1 - mean) * c, n - t0)
    pad = rng.uniform(8, 15) * np.exp(-k / _log_uniform(rng, 50, 1000) * 3) + 0.001
    x[t0:] = (1 - share) * x[t0:] + share * pad
    return x, t0


def vocab_mismatch_resume(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """An LM resumed at 30-70% of its run with another tokenizer than its checkpoint's (a
    retrained vocabulary of the same size: every embedding row now stands for another token):
    the model is confidently wrong, the loss jumps within 1-3 steps to 1.1-1.6x ln(vocabulary),
    above chance, falls within 100-1,000 steps to near chance and relearns from there as a
    fresh model would, ending 10-50% of the way from the healthy run's end back up to chance;
    the healthy run starts at ln(vocabulary) (32k-100k); 1-15% batch noise."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.3, 0.7))
    chance = math.log(float(rng.choice([32_000, 50_257, 100_000])))
    x *= chance / float(np.median(x[:10]))  # a healthy LM run starts at ln(vocabulary)
    k = np.arange(n - t0, dtype=np.float64)
    healthy = x[t0:].copy()
    well = float(np.median(healthy[-200:]))  # where the healthy run ends
    end = well + (chance - well) * rng.uniform(0.1, 0.5)
    peak = chance * rng.uniform(1.1, 1.6)
    g = 1 / (1 + k / ((n - t0) / rng.uniform(10, 50))) ** 0.7  # a fresh model's power law
    relearn = end + (chance - end) * (g - g[-1]) / (1 - g[-1])  # from chance at t0 to `end`
    shock = (peak - chance) * np.exp(-k / (_log_uniform(rng, 100, 1000) / 3))
    rise = np.minimum((k + 1) / rng.integers(1, 4), 1)
    noise = _noise(n - t0, rng, _log_uniform(rng, 0.01, 0.15), _maybe_rho(rng))
    x[t0:] = (relearn + shock) * rise * noise + healthy * (1 - rise)
    return x, t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "single_batch_loop": single_batch_loop,
    "warmup_never_ends": warmup_never_ends,
    "padding_in_loss": padding_in_loss,
    "vocab_mismatch_resume": vocab_mismatch_resume,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
