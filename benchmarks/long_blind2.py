"""A second blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind2`.

    .venv/bin/python benchmarks/long_runs.py --blind2 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written after
`long_blind.py` had been looked at and tuned on, without running any rule on them: each models
how a real practice's loss looks over 10^5-10^6 steps, its parameters drawn per seed, and none
of them is one of `long_runs.KINDS` or `long_blind.KINDS` (nor a bug of their `BUGS`). They are
to be measured once, on the held-out seeds (`SEEDS`), and not tuned on: a rule changed after
looking at them makes them a tuning set.

The interface is `long_blind`'s: a kind is `(n, rng) -> loss`; three kinds follow a learning-rate
schedule, and `series(kind, n, rng)` gives all that a run records, the loss and, where the kind
has one, the learning rate (`LR`, as the PyTorch hook records it; here in real units, not
normalized to 1). No kind here has evaluation passes, but `MODE` and its codes are kept for
the interface. A bug is `(n, rng) -> (loss, the step its defect begins)`. Only numpy here: the
series can be generated and looked at without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _ar1, _log_uniform, _maybe_rho, _noise, _power  # the first blind set's helpers

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE (no kind here records one)
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 2000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _bf16(x: np.ndarray) -> np.ndarray:
    """Round to bfloat16 (8 significant bits), as a loss logged in bf16 is."""
    m, e = np.frexp(x)
    return np.ldexp(np.round(m * 256) / 256, e)


def _warmup_cosine(t: np.ndarray, n: int, warm: int, floor: float) -> np.ndarray:
    """A learning rate relative to its peak: linear warm-up over `warm` steps, then a cosine
    to `floor` at step `n`."""
    cos = floor + (1 - floor) * 0.5 * (1 + np.cos(np.pi * np.clip((t - warm) / max(1, n - warm), 0, 1)))
    return np.where(t < warm, (t + 1) / max(1, warm), cos)


# the healthy kinds ----------------------------------------------------------------------------
def _seqlen_warmup(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 1e-4, 1e-3)
    lr = peak * _warmup_cosine(t, n, int(n * rng.uniform(0.005, 0.02)), 0.1)
    cum = np.cumsum(lr) / lr.mean()
    vocab = float(rng.choice([32_000, 50_257, 100_000]))
    base = _power(
        cum, math.log(vocab), rng.uniform(2.0, 3.2), n / rng.uniform(200, 2000), rng.uniform(0.3, 0.6)
    )
    x = base * (1 + rng.uniform(0.03, 0.1) * lr / peak)  # the loss the high learning rate holds up
    stages = int(rng.integers(3, 6))  # doublings of the context, e.g. 128 -> 2048
    ends = np.sort(rng.uniform(0.02, 1.0, stages)) * n * rng.uniform(0.1, 0.4)
    factor, sd = np.ones(n), np.full(n, rng.uniform(0.02, 0.06))
    for at in ends.astype(int):
        k = t[at:] - at
        gain = rng.uniform(0.01, 0.04)  # more context: a lower per-token loss for good
        bump = rng.uniform(0.02, 0.1) * np.exp(-k / rng.uniform(50, 1000))  # new positions
        factor[at:] *= (1 - gain * np.minimum(k / 200, 1)) * (1 + bump)
        sd[at:] /= math.sqrt(2)  # twice the tokens per batch
    x = x * factor * _noise(n, rng, sd, _maybe_rho(rng))
    if rng.random() < 0.5:
        x = _bf16(x)
    return {"loss": x, LR: lr}


def seqlen_warmup(n: int, rng: np.random.Generator) -> np.ndarray:
    """LM pretraining with sequence-length warm-up (Li et al. 2022; MosaicML's
    SeqLengthWarmup): the context doubles 3-5 times within the first 10-40% of the run; at each
    doubling the per-token loss jumps up by 2-10% (positions not trained yet), decaying over
    50-1,000 steps, and settles 1-4% lower (more context), while the batch noise falls by
    sqrt(2) (twice the tokens per batch) from 2-6%. Learning rate: warm-up over 0.5-2%, cosine
    to 10% of a peak of 1e-4-1e-3; the loss from ln(vocabulary) to 2.0-3.2 nats; logged in
    bf16 on half the seeds."""
    return _seqlen_warmup(n, rng)["loss"]


def diurnal_stream(n: int, rng: np.random.Generator) -> np.ndarray:
    """Online training of a click-through model on a live stream (batches in time order): a
    log-loss of 0.1-0.5 that falls 5-20% early and then follows the traffic over the 3-60
    days the run covers: a daily cycle (3-15% of the level, its shape a sum of two harmonics),
    weekends up to 8% off (either way), and a slow drift of the base rate (AR(1), time
    constant 1-5 days, 2-8%); 1-5% batch noise."""
    t = np.arange(n, dtype=np.float64)
    day = n / rng.uniform(3, 60)  # the run covers 3-60 days of traffic
    level = rng.uniform(0.1, 0.5) * (1 + rng.uniform(0.05, 0.2) / (1 + t / (n * rng.uniform(0.005, 0.05))))
    phase = 2 * np.pi * t / day
    a1, a2 = rng.uniform(0.03, 0.15), rng.uniform(0.0, 0.5)
    daily = a1 * (
        np.sin(phase + rng.uniform(0, 2 * np.pi)) + a2 * np.sin(2 * phase + rng.uniform(0, 2 * np.pi))
    )
    weekend = ((t // day + rng.integers(0, 7)) % 7 >= 5) * rng.uniform(-0.08, 0.08)
    drift = rng.uniform(0.02, 0.08) * _ar1(rng.standard_normal(n), 1 - 1 / (day * rng.uniform(1, 5)))
    return level * (1 + daily + weekend) * (1 + drift) * _noise(n, rng, rng.uniform(0.01, 0.05))


def ppo_policy(n: int, rng: np.random.Generator) -> np.ndarray:
    """PPO's clipped surrogate (policy) loss, logged per minibatch update (CleanRL's pg_loss):
    each rollout is optimized for 3-10 epochs of 4-32 minibatches; the policy starts each rollout
    at the old one (the ratio 1), so the loss starts near 0 and falls within the rollout as the
    policy moves towards the advantages, to -0.005 - -0.03 (clipping bounds it), then returns
    to 0 at the next rollout; the advantages normalized per minibatch (half the seeds: the
    first minibatch is 0 up to rounding) or per rollout (the others: each minibatch's mean
    advantage adds a noise of 0.02-0.1); the depth wanders slowly (+-30%, over ~50 rollouts)
    and, on half the seeds, falls to 0 with a learning rate annealed linearly. Values of both
    signs around 0, logged in float32."""
    t = np.arange(n, dtype=np.float64)
    epochs, minibatches = int(rng.integers(3, 11)), int(rng.choice([4, 8, 16, 32]))
    per = epochs * minibatches
    u = (t % per) / per  # progress within the rollout
    depth = rng.uniform(0.005, 0.03) * (1 - t / n if rng.random() < 0.5 else np.ones(n))
    depth = depth * np.exp(0.3 * _ar1(rng.standard_normal(n), 1 - 1 / (50 * per)))
    bend = rng.uniform(2, 6)  # how early in the rollout the policy moves
    moved = (1 - np.exp(-u * bend)) / (1 - math.exp(-bend))
    x = -depth * moved
    if rng.random() < 0.5:  # per-minibatch normalization: the noise grows as the ratio moves
        x = x + depth * rng.uniform(0.3, 1.0) * moved * rng.standard_normal(n)
        x[t % per == 0] = rng.standard_normal(int((t % per == 0).sum())) * 1e-9
    else:
        x = x + rng.uniform(0.02, 0.1) * rng.standard_normal(n)
    return x.astype(np.float32).astype(np.float64)


def dpo(n: int, rng: np.random.Generator) -> np.ndarray:
    """Direct preference optimization: -log sigmoid(beta * margin) over batches of 16-128 pairs,
    exactly ln 2 at the first step (the policy is the reference), falling over the run to
    0.2-0.6 as the implicit reward margins grow; the pairs' losses spread as the margins do, so
    the batch noise grows from 2-5% to 5-20%; 1-3 epochs, each later one 5-25% lower within
    10-100 steps (pairs seen before)."""
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.integers(1, 4))
    final = rng.uniform(0.2, 0.6)
    q = 1 - 1 / (1 + t / (n / rng.uniform(20, 200))) ** rng.uniform(0.5, 1.0)
    x = math.log(2) - (math.log(2) - final) * q / q[-1]
    for e in range(1, epochs):
        b = e * n // epochs
        x *= 1 - rng.uniform(0.05, 0.25) * np.clip((t - b) / rng.uniform(10, 100), 0, 1)
    sd = rng.uniform(0.02, 0.05) + rng.uniform(0.03, 0.15) * q / q[-1]
    x = x * _noise(n, rng, sd)
    x[0] = math.log(2)
    return x


def _resume_fresh_optimizer(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 1e-4, 1e-3)
    lr = peak * _warmup_cosine(t, n, int(n * rng.uniform(0.005, 0.03)), rng.choice([0.0, 0.1]))
    resumes = np.sort(rng.uniform(0.1, 0.9, int(rng.integers(1, 4))) * n).astype(int)
    for at in resumes:  # the learning rate re-warmed from 0 over 100-1,000 steps
        rewarm = int(rng.uniform(100, 1000))
        lr[at : at + rewarm] *= (np.arange(len(lr[at : at + rewarm])) + 1) / rewarm
    cum = np.cumsum(lr) / lr.mean()
    base = _power(
        cum, rng.uniform(3.0, 6.0), rng.uniform(1.5, 3.0), n / rng.uniform(100, 1000), rng.uniform(0.3, 0.7)
    )
    x = base * (1 + rng.uniform(0.03, 0.1) * lr / peak)
    factor, sd = np.ones(n), np.full(n, rng.uniform(0.01, 0.05))
    for at in resumes:  # Adam's moments start at 0 again: a blip, and noisier steps for a while
        k = t[at:] - at
        rise, tau = rng.uniform(5, 50), rng.uniform(200, 3000)
        factor[at:] *= 1 + rng.uniform(0.01, 0.1) * np.where(k < rise, k / rise, np.exp(-(k - rise) / tau))
        sd[at:] *= 1 + rng.uniform(0.2, 1.0) * np.exp(-k / tau)
    return {"loss": x * factor * _noise(n, rng, sd, _maybe_rho(rng)), LR: lr}


def resume_fresh_optimizer(n: int, rng: np.random.Generator) -> np.ndarray:
    """Pretraining resumed 1-3 times from a weights-only checkpoint (a converted checkpoint, a
    new parallel layout: the optimizer state is not restored), the learning rate re-warmed from
    0 over 100-1,000 steps: the loss blips up by 1-10% within 5-50 steps and recovers over
    200-3,000 steps, its noise up by 20-100% meanwhile. Warm-up and cosine to 0 or 10% of a
    peak of 1e-4-1e-3; from 3-6 to 1.5-3 nats; 1-5% batch noise."""
    return _resume_fresh_optimizer(n, rng)["loss"]


def full_batch_pinn(n: int, rng: np.random.Generator) -> np.ndarray:
    """A physics-informed network (or a neural field) trained full-batch with Adam: no batch
    noise; the loss falls over 2-5 decades, a wiggle of 0.1-3% (Adam's own oscillation,
    correlated over 5-50 steps), 0-6 of Adam's spikes to 2-30x within 1-5 steps, recovering
    over 20-300 steps (in the Adam phase); on half the seeds the last 10-30% runs L-BFGS: the
    loss falls by 1-2 more decades, smoothly (its wiggle 10x smaller); logged in float32."""
    t = np.arange(n, dtype=np.float64)
    decades = rng.uniform(2, 5)
    start = _log_uniform(rng, 0.1, 10)
    q = 1 - 1 / (1 + t / (n / rng.uniform(20, 500))) ** rng.uniform(0.5, 1.0)
    log_x = math.log(start) - decades * math.log(10) * q / q[-1]
    wiggle = np.full(n, _log_uniform(rng, 0.001, 0.03))
    adam_end = n
    if rng.random() < 0.5:
        adam_end = int(n * rng.uniform(0.7, 0.9))
        k = t[adam_end:] - adam_end
        log_x[adam_end:] -= rng.uniform(1, 2) * math.log(10) * (1 - np.exp(-k / (0.1 * (n - adam_end))))
        wiggle[adam_end:] /= 10
    for at in rng.uniform(0.05, 0.95, int(rng.integers(0, 7))) * adam_end:
        at = int(at)
        k = t[at:] - at
        rise, tau = rng.uniform(1, 5), rng.uniform(20, 300)
        log_x[at:] += math.log(rng.uniform(2, 30)) * np.where(k < rise, k / rise, np.exp(-(k - rise) / tau))
    z = _ar1(rng.standard_normal(n), 1 - 1 / rng.uniform(5, 50))
    return np.exp(log_x + wiggle * z).astype(np.float32).astype(np.float64)


def diffusion_mse(n: int, rng: np.random.Generator) -> np.ndarray:
    """A diffusion model's noise-prediction MSE, each sample at a random timestep: from 1 (the
    untrained net predicts 0) to 0.03-0.12 within 0.5-5% of the run, then down by only 2-10%
    more; the batch mean over 32-512 timesteps is skewed (small timesteps cost most): gamma
    noise of 3-15% (its shape 1/cv^2); logged in bf16 on half the seeds."""
    t = np.arange(n, dtype=np.float64)
    fast = n * rng.uniform(0.005, 0.05)
    plateau = rng.uniform(0.03, 0.12)
    slow = 1 - rng.uniform(0.02, 0.1) * (1 - 1 / (1 + t / (0.2 * n)))
    level = plateau * slow + (1 - plateau) * np.exp(-t / (fast / 5))
    cv = rng.uniform(0.03, 0.15)
    x = level * rng.gamma(1 / cv**2, cv**2, n)
    return _bf16(x) if rng.random() < 0.5 else x


def ctc_sum(n: int, rng: np.random.Generator) -> np.ndarray:
    """Speech recognition with CTC, the loss summed over each utterance's frames and averaged
    over the batch (ESPnet-style): from 200-1,500 it falls to a plateau at 30-50% of that (the
    net emits only blanks) until 1-5% of the run, then drops by 40-70% as the alignments form
    (over 0.5-2% of the run), falling on as a power law towards 3-15% of the start; the
    per-batch mean length varies (bucketed batches, spread 15-40%) and the loss with it; on
    half the seeds the first epoch (2-10% of the run) is SortaGrad,
    shortest utterances first, so the loss rises through it with the lengths; 2-8% noise."""
    t = np.arange(n, dtype=np.float64)
    start = rng.uniform(200, 1500)
    blank = rng.uniform(0.3, 0.5)
    p_end, w = n * rng.uniform(0.01, 0.05), n * rng.uniform(0.005, 0.02)
    final = rng.uniform(0.03, 0.15)
    pre = blank + (1 - blank) * np.exp(-t / (0.1 * p_end))  # down to the blank plateau
    after = np.maximum(t - p_end, 0) / (n * rng.uniform(0.005, 0.02))
    aligned = blank * rng.uniform(0.3, 0.6)  # just after the alignments form
    post = final + (aligned - final) / (1 + after) ** rng.uniform(0.6, 1.0)
    learn = 1 / (1 + np.exp(-(t - p_end) / (w / 6)))  # the alignments form
    per_frame = start * (pre * (1 - learn) + np.minimum(pre, post) * learn)
    length = _noise(n, rng, rng.uniform(0.15, 0.4))
    if rng.random() < 0.5:
        epoch = int(n * rng.uniform(0.02, 0.1))
        length[:epoch] = np.sort(length[:epoch])  # the same batches, shortest first
    return per_frame * length * _noise(n, rng, rng.uniform(0.02, 0.08))


def _mixup_cutmix(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = (
        rng.choice([0.1, 0.5, 1.0]) * rng.uniform(0.5, 2.0)
        if rng.random() < 0.5
        else _log_uniform(rng, 5e-4, 5e-3)
    )
    lr = peak * _warmup_cosine(t, n, int(n * rng.uniform(0.01, 0.05)), 0.0)
    cum = np.cumsum(lr) / lr.mean()
    floor = rng.uniform(1.4, 2.4)
    base = _power(cum, math.log(1000), floor, n / rng.uniform(30, 300), rng.uniform(0.6, 1.2))
    trained = (math.log(1000) - base) / (math.log(1000) - floor)  # a uniform guess: ln 1000, always
    lam = np.where(rng.random(n) < 0.5, rng.beta(0.8, 0.8, n), rng.beta(1.0, 1.0, n))
    lam = lam.clip(1e-6, 1 - 1e-6)
    mixing = -(lam * np.log(lam) + (1 - lam) * np.log(1 - lam))  # the mixed target's entropy
    h = rng.uniform(0.6, 1.0) * np.ones(n)
    if rng.random() < 0.5:  # mixing switched off for the last epochs
        h[int(n * (1 - rng.uniform(0.03, 0.1))) :] = 0
    smooth = 0.1 * math.log(1000) / 2  # label smoothing 0.1: a floor of ~0.35 nats more
    x = (base + trained * (smooth + h * mixing)) * _noise(n, rng, rng.uniform(0.01, 0.04))
    return {"loss": x, LR: lr}


def mixup_cutmix(n: int, rng: np.random.Generator) -> np.ndarray:
    """ImageNet-style classification with timm's mixup/cutmix (a batch-wide lambda, per batch
    mixup with Beta(0.8, 0.8) or cutmix with Beta(1, 1)) and label smoothing 0.1: the loss
    falls from ln(1000) towards 1.4-2.4 with the learning rate (warm-up 1-5%, cosine to 0; SGD
    0.05-2 or LAMB/AdamW 5e-4-5e-3), plus, as the model learns, ~0.35 for the smoothing and
    0.6-1x the mixed target's entropy (0-ln 2, per batch); on half the seeds the mixing is
    switched off for the last 3-10% of the run (the loss drops by its mean, ~0.3-0.5); 1-4%
    noise."""
    return _mixup_cutmix(n, rng)["loss"]


def simsiam_negcos(n: int, rng: np.random.Generator) -> np.ndarray:
    """Non-contrastive self-supervised learning: SimSiam's -cos(p, z) (half the seeds: from
    -0.0 - -0.3 to -0.85 - -0.97 within 1-10% of the run, then slowly towards -1, the gap to
    -1 shrinking by up to half more) or BYOL's 2 - 2 cos (the others: the same gap, doubled,
    from ~2 to 0.06-0.3); the noise is 2-10% of the gap to a perfect -1, as the cosines
    saturate."""
    t = np.arange(n, dtype=np.float64)
    g0, g1 = rng.uniform(0.7, 1.0), rng.uniform(0.03, 0.15)
    fast = n * rng.uniform(0.01, 0.1)
    gap = g1 * (1 - 0.5 * t / n * rng.uniform(0, 1)) + (g0 - g1) * np.exp(-t / (fast / 4))
    gap = gap * _noise(n, rng, rng.uniform(0.02, 0.1), _maybe_rho(rng))
    return gap - 1 if rng.random() < 0.5 else 2 * gap


def shard_blocks(n: int, rng: np.random.Generator) -> np.ndarray:
    """Two data sources (web text and code, two languages) read whole shards in turn: blocks of
    geometric length (a mean of 20-1,000 steps) from one source, then the other; their losses
    sit 1.2-2.5x apart and fall at their own rates (power laws), so the series switches between
    two levels at random times; 1-8% noise within a source."""
    t = np.arange(n, dtype=np.float64)
    mean_len = _log_uniform(rng, 20, 1000)
    lengths = rng.geometric(1 / mean_len, int(3 * n / mean_len) + 10)
    which = (np.repeat(np.arange(len(lengths)) % 2, lengths)[:n] + rng.integers(0, 2)) % 2
    if len(which) < n:
        which = np.concatenate([which, np.zeros(n - len(which), dtype=which.dtype)])
    ratio = rng.uniform(1.2, 2.5)
    levels = [
        _power(
            t, rng.uniform(2.0, 4.0), rng.uniform(0.5, 1.5), n / rng.uniform(50, 500), rng.uniform(0.4, 1.0)
        )
        for _ in range(2)
    ]
    levels[1] = levels[1] * ratio
    x = np.where(which == 0, levels[0], levels[1])
    return x * _noise(n, rng, rng.uniform(0.01, 0.08), _maybe_rho(rng))


def sum_last_batch(n: int, rng: np.random.Generator) -> np.ndarray:
    """A loss summed over the batch (`reduction="sum"`, a VAE's negative ELBO in nats per
    batch, 64-256 images of 100-600 nats each at first) on a small data set read with
    drop_last=False: epochs of 50-2,000 steps, each ending with a partial batch of 1-99% of
    the size, logged at that fraction of the others; falls by 30-70% over the run; 1-5%
    noise."""
    t = np.arange(n, dtype=np.float64)
    batch = int(rng.choice([64, 128, 256]))
    per = rng.uniform(100, 600)
    x = batch * _power(t, per, per * rng.uniform(0.3, 0.7), n / rng.uniform(20, 200), rng.uniform(0.5, 1.2))
    epoch = int(rng.uniform(50, 2000))
    x[epoch - 1 :: epoch] *= rng.uniform(0.01, 0.99)  # the same partial batch each epoch
    return x * _noise(n, rng, rng.uniform(0.01, 0.05))


def qat_switch(n: int, rng: np.random.Generator) -> np.ndarray:
    """Quantization-aware fine-tuning of a trained float model (PyTorch's QAT recipe): the
    float model's loss (0.3-2), falling by only 2-8%; at 5-30% of the run fake quantization is
    switched on and the loss jumps by 5-40% within 1-10 steps, then recovers 50-90% of it (time
    constant 2-10% of the run); at 50-85% the observers and the batch-norm statistics are
    frozen: the loss moves by -5% to +2% within 10-100 steps; 1-10% noise."""
    t = np.arange(n, dtype=np.float64)
    x = rng.uniform(0.3, 2.0) * (1 - rng.uniform(0.02, 0.08) * (1 - np.exp(-t / (0.3 * n))))
    at = int(n * rng.uniform(0.05, 0.3))
    k = t[at:] - at
    jump, keep = rng.uniform(0.05, 0.4), rng.uniform(0.1, 0.5)
    x[at:] *= 1 + jump * np.minimum(k / rng.uniform(1, 10), 1) * (
        keep + (1 - keep) * np.exp(-k / (n * rng.uniform(0.02, 0.1)))
    )
    freeze = int(n * rng.uniform(0.5, 0.85))
    x[freeze:] *= 1 + rng.uniform(-0.05, 0.02) * np.minimum((t[freeze:] - freeze) / rng.uniform(10, 100), 1)
    return x * _noise(n, rng, _log_uniform(rng, 0.01, 0.1), _maybe_rho(rng))


def gradual_pruning(n: int, rng: np.random.Generator) -> np.ndarray:
    """Gradual magnitude pruning (Zhu & Gupta 2017) of a model being trained: the sparsity rises
    from 0 to 50-95% on a cubic schedule from 5-30% to 40-80% of the run, pruned every
    100-2,000 steps; each pruning step lifts the loss by 0.05-0.3x the share of the remaining
    weights it removes (a few % early, less later), 80-95% of which the training recovers
    within a fifth to a half of an interval; a power-law decay below with 1-10% batch noise."""
    t = np.arange(n, dtype=np.float64)
    x = _power(
        t, rng.uniform(1.5, 4.0), rng.uniform(0.2, 1.0), n / rng.uniform(50, 500), rng.uniform(0.5, 1.2)
    )
    a, b = n * rng.uniform(0.05, 0.3), n * rng.uniform(0.4, 0.8)
    final, every = rng.uniform(0.5, 0.95), int(rng.uniform(100, 2000))
    sens, keep = rng.uniform(0.5, 3.0), rng.uniform(0.05, 0.2)
    kept, log_f, prev = np.zeros(n), np.zeros(n), 0.0
    for at in range(int(a), int(b) + every, every):
        s = final * (1 - (1 - min(1.0, (at - a) / (b - a))) ** 3)
        if at >= n or s <= prev:
            continue
        lift = math.log1p(0.1 * sens * (s - prev) / (1 - prev))
        kept[at] += lift * keep
        tau = every * rng.uniform(0.2, 0.5)
        k = t[at : at + int(30 * tau) + 1] - at  # the transient, until it is e^-30 of itself
        log_f[at : at + len(k)] += lift * (1 - keep) * np.exp(-k / tau)
        prev = s
    log_f += np.cumsum(kept)
    return x * np.exp(log_f) * _noise(n, rng, _log_uniform(rng, 0.01, 0.1), _maybe_rho(rng))


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "seqlen_warmup": seqlen_warmup,
    "diurnal_stream": diurnal_stream,
    "ppo_policy": ppo_policy,
    "dpo": dpo,
    "resume_fresh_optimizer": resume_fresh_optimizer,
    "full_batch_pinn": full_batch_pinn,
    "diffusion_mse": diffusion_mse,
    "ctc_sum": ctc_sum,
    "mixup_cutmix": mixup_cutmix,
    "simsiam_negcos": simsiam_negcos,
    "shard_blocks": shard_blocks,
    "sum_last_batch": sum_last_batch,
    "qat_switch": qat_switch,
    "gradual_pruning": gradual_pruning,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "seqlen_warmup": _seqlen_warmup,
    "resume_fresh_optimizer": _resume_fresh_optimizer,
    "mixup_cutmix": _mixup_cutmix,
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


def sporadic_nan(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of the run a shard with corrupt records (inf or NaN features) is in the
    mix: 0.2-5% of the batches give a NaN loss, the others a healthy one (the loss scaler or a
    NaN guard skips those updates, so training goes on)."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.3, 0.7))
    bad = rng.random(n - t0) < _log_uniform(rng, 0.002, 0.05)
    bad[0] = True  # the first bad batch marks the onset
    x[t0:][bad] = np.nan
    return x, t0


def dead_collapse(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of the run one bad update (a corrupt batch, a learning-rate spike) kills
    the network: 1-3 steps at 2-20x the loss, then every unit before the bias-free output
    layer is dead, the logits are all 0, and the loss is exactly float32(ln C) at every
    step (C: 10-50,257 classes, the healthy run's start), whatever the batch."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.3, 0.7))
    classes = int(rng.choice([10, 100, 1000, 32_000, 50_257]))
    x *= math.log(classes) / float(np.median(x[:10]))  # a healthy run starts at ln C
    w = int(rng.integers(1, 4))
    x[t0 : t0 + w] *= rng.uniform(2, 20, w)
    x[t0 + w :] = float(np.float32(math.log(classes)))
    return x, t0


def label_drift(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of the run a data-pipeline bug (a join that misaligns labels in the new
    partitions) corrupts a share of the samples that grows linearly to 10-50% over 10-60% of
    the rest of the run: a mislabeled sample costs about ln C (C: 10-1,000 classes, 0.8-1.2x),
    so the loss drifts slowly up towards it; the batch noise grows with the share."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.3, 0.7))
    classes = int(rng.choice([10, 100, 1000]))
    x *= math.log(classes) / float(np.median(x[:10]))  # a healthy run starts at ln C
    span = (n - t0) * rng.uniform(0.1, 0.6)
    share = rng.uniform(0.1, 0.5) * np.minimum(np.arange(n - t0) / span, 1)
    wrong = math.log(classes) * rng.uniform(0.8, 1.2)
    x[t0:] = (1 - share) * x[t0:] + share * wrong * _noise(n - t0, rng, 0.1 * share + 1e-9)
    return x, t0


def resume_lr_mistake(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Resumed at 30-70% of the run with the learning rate 10-100x too high (the scheduler's
    state not loaded: the peak rate again instead of the decayed one, a units mistake): the
    loss climbs within 5-50 steps to a plateau 1.5-4x its level, where it stays (falling by at
    most 10% by the end), with 3-30% batch noise."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0, dtype=np.float64)
    level = float(np.median(x[max(0, t0 - 200) : t0]))
    high = level * rng.uniform(1.5, 4.0) * (1 - rng.uniform(0, 0.1) * k / (n - t0))
    ramp = np.minimum(k / rng.uniform(5, 50), 1)
    noisier = _noise(n - t0, rng, rng.uniform(0.02, 0.1) * rng.uniform(1.5, 3))
    x[t0:] = x[t0:] * (1 - ramp) + high * ramp * noisier
    return x, t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "sporadic_nan": sporadic_nan,
    "dead_collapse": dead_collapse,
    "label_drift": label_drift,
    "resume_lr_mistake": resume_lr_mistake,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
