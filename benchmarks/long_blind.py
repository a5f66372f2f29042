"""A blind set of long healthy training-loss series and buggy ones, for `long_runs.py --blind`.

    .venv/bin/python benchmarks/long_runs.py --blind [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written before
any rule ran on them and never checked while they were written: each models how a real
practice's loss looks over 10^5-10^6 steps, its parameters drawn per seed, and none of them is
one of `long_runs.KINDS`. They are to be measured once, on the held-out seeds (`SEEDS`), and
not tuned on: a rule changed after looking at them makes them a tuning set.

A kind is `(n, rng) -> loss` as in `long_runs.KINDS`. Two kinds follow a learning-rate
schedule and one has evaluation passes: `series(kind, n, rng)` gives all that a run records,
the loss, the learning rate (`LR`, as the PyTorch hook records it) and, for the evaluation
passes, the mode of each step (`MODE`: `TRAIN` and `EVAL` steps save their loss, in their
mode; `EVAL_UNSAVED` steps are evaluation steps that save no loss). Only numpy here: the
series can be generated and looked at without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # the mode of each step (not a series to save): the values below
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 1000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _ar1(z: np.ndarray, rho: float) -> np.ndarray:
    """Unit-variance AR(1) noise from the standard normal innovations `z`."""
    e = z * math.sqrt(1 - rho**2)
    out = np.empty(len(z))
    out[0] = z[0]
    for i in range(1, len(z)):  # 10^5 steps: ~0.05 s
        out[i] = rho * out[i - 1] + e[i]
    return out


def _noise(n: int, rng: np.random.Generator, sd: float | np.ndarray, rho: float = 0.0) -> np.ndarray:
    """A multiplicative log-normal noise factor of mean 1 and relative spread `sd` (an array:
    a spread per step), AR(1)-correlated when `rho` > 0."""
    z = rng.standard_normal(n)
    if rho > 0:
        z = _ar1(z, rho)
    return np.exp(sd * z - np.asarray(sd) ** 2 / 2)


def _maybe_rho(rng: np.random.Generator) -> float:
    """No correlation on half the seeds, AR(1) with rho 0.2-0.8 on the other half (data order)."""
    return 0.0 if rng.random() < 0.5 else rng.uniform(0.2, 0.8)


def _power(t: np.ndarray, start: float, floor: float, scale: float, p: float) -> np.ndarray:
    """A power-law decay from `start` to `floor` (scaling law in steps or tokens)."""
    return floor + (start - floor) / (1 + t / scale) ** p


def _lm_start(rng: np.random.Generator) -> float:
    """A language model's initial loss: ln(vocabulary), 32k-256k tokens, +-3%."""
    return math.log(float(rng.choice([32_000, 50_257, 100_000, 256_000]))) * rng.uniform(0.97, 1.03)


# the healthy kinds ----------------------------------------------------------------------------
def lm_spikes(n: int, rng: np.random.Generator) -> np.ndarray:
    """LM pretraining (OPT/PaLM logs): from ln(vocabulary) down a power law to 1.6-3.0 nats,
    1-3% batch noise; 1-6 loss spikes (expected) to 1.1-2.5x within 3-50 steps, each recovering
    with a time constant of 30-300 steps; rare outlier batches (0.005-0.02% of steps, 3-15x)."""
    t = np.arange(n, dtype=np.float64)
    x = _power(t, _lm_start(rng), rng.uniform(1.6, 3.0), n / rng.uniform(200, 2000), rng.uniform(0.35, 0.7))
    factor = np.ones(n)
    for at in rng.uniform(0.05, 0.95, rng.poisson(rng.uniform(1, 6))) * n:
        at = int(at)
        peak, rise, tau = rng.uniform(1.1, 2.5), rng.uniform(3, 50), rng.uniform(30, 300)
        k = t[at:] - at
        shape = np.where(k < rise, k / rise, np.exp(-(k - rise) / tau))
        factor[at:] *= 1 + (peak - 1) * shape
    x = x * factor * _noise(n, rng, rng.uniform(0.01, 0.03), _maybe_rho(rng))
    out = rng.random(n) < rng.uniform(5e-5, 2e-4)
    x[out] *= rng.uniform(3, 15, int(out.sum()))
    return x


def _wsd(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm, d0 = int(n * rng.uniform(0.005, 0.03)), int(n * rng.uniform(0.75, 0.9))
    u = np.clip((t - d0) / max(1, n - d0), 0, 1)
    lo = rng.choice([0.0, 0.1])
    tail = 1 - u if rng.random() < 0.5 else 1 - np.sqrt(u)  # linear or 1-sqrt decay
    lr = np.where(t < warm, (t + 1) / warm, lo + (1 - lo) * tail)
    cum = np.cumsum(lr)
    base = _power(
        cum, _lm_start(rng), rng.uniform(1.8, 3.2), n / rng.uniform(200, 2000), rng.uniform(0.3, 0.6)
    )
    high = rng.uniform(0.04, 0.1) * base[d0]  # the loss the high learning rate holds up
    sd = rng.uniform(0.005, 0.04) * (0.4 + 0.6 * lr)  # the batch noise follows the learning rate
    return {"loss": (base + high * lr) * _noise(n, rng, sd, _maybe_rho(rng)), LR: lr}


def wsd(n: int, rng: np.random.Generator) -> np.ndarray:
    """Warmup-stable-decay (MiniCPM, DeepSeek): warm-up over 0.5-3% of the run, a constant learning
    rate to 75-90%, then a linear or 1-sqrt decay to 0 or 10%: the loss falls slowly on the
    plateau and drops by 4-10% in the decay phase; LM magnitudes; batch noise 0.5-4%, smaller
    as the learning rate falls."""
    return _wsd(n, rng)["loss"]


def _inverse_sqrt(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm = max(1, int(n * rng.uniform(0.02, 0.08)))
    lr = np.minimum((t + 1) / warm, np.sqrt(warm / (t + 1)))
    cum = np.cumsum(lr) / lr.mean()
    base = _power(
        cum, _lm_start(rng), rng.uniform(2.5, 4.0), n / rng.uniform(100, 1000), rng.uniform(0.5, 1.0)
    )
    high = rng.uniform(0.05, 0.2) * base[-1]
    x = (base + high * lr) * _noise(n, rng, rng.uniform(0.02, 0.06), _maybe_rho(rng))
    return {"loss": x, LR: lr}


def inverse_sqrt(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Transformer NMT run (Vaswani et al.): linear warm-up over 2-8% of the run, then the
    learning rate falls as 1/sqrt(step); a label-smoothed cross-entropy from ln(vocabulary) to a
    floor of 2.5-4 nats; 2-6% noise (sentence lengths vary)."""
    return _inverse_sqrt(n, rng)["loss"]


def data_mixture(n: int, rng: np.random.Generator) -> np.ndarray:
    """Pretraining whose data mixture changes 1-3 times (a new domain, more code, a later
    crawl): the level shifts by +2-10% (one in five: -2-6%) as the new shards stream in over
    50-2,000 steps, 0-50% of it learned away later, and the loss falls on; stochastic
    volatility (the noise's spread wanders, log-sd AR(1)) around 2-10%, rescaled at each change."""
    t = np.arange(n, dtype=np.float64)
    x = _power(
        t, rng.uniform(2.5, 4.0), rng.uniform(1.0, 2.5), n / rng.uniform(100, 1000), rng.uniform(0.4, 1.0)
    )
    log_sd = math.log(rng.uniform(0.02, 0.1)) + rng.uniform(0.2, 0.5) * _ar1(rng.standard_normal(n), 0.999)
    for at in np.sort(rng.uniform(0.2, 0.9, int(rng.integers(1, 4))) * n).astype(int):
        shift = rng.uniform(1.02, 1.1) if rng.random() < 0.8 else rng.uniform(0.94, 0.98)
        ramp, keep = rng.uniform(50, 2000), rng.uniform(0.5, 1.0)
        k = t[at:] - at
        learned = 1 - np.exp(-k / (n * rng.uniform(0.01, 0.05)))
        x[at:] *= 1 + (shift - 1) * np.minimum(k / ramp, 1) * (1 - (1 - keep) * learned)
        log_sd[at:] += math.log(rng.uniform(0.7, 1.5))
    return x * _noise(n, rng, np.exp(log_sd))


def epoch_staircase(n: int, rng: np.random.Generator) -> np.ndarray:
    """Multi-epoch fine-tuning on a small data set (2-8 epochs, reshuffled each): the training
    loss drops by 5-25% at each epoch boundary, within 20-200 steps, as the model meets examples
    it has memorized, and falls slowly within an epoch; 3-20% batch noise (small batches)."""
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.integers(2, 9))
    x = _power(
        t, rng.uniform(1.0, 3.0), rng.uniform(0.3, 1.0), n / rng.uniform(20, 200), rng.uniform(0.3, 0.8)
    )
    log_f = np.zeros(n)
    for e in range(1, epochs):
        b = e * n // epochs
        log_f += math.log(rng.uniform(0.75, 0.95)) * np.clip((t - b) / rng.uniform(20, 200), 0, 1)
    return x * np.exp(log_f) * _noise(n, rng, _log_uniform(rng, 0.03, 0.2), _maybe_rho(rng))


def ema_logged(n: int, rng: np.random.Generator) -> np.ndarray:
    """A loss logged as its exponential moving average (fastai's `smooth_loss`, a progress
    bar's running loss): beta 0.9-0.999, bias-corrected, of a raw loss with 5-40% batch noise:
    smooth, with slow wanders."""
    raw = _power(
        np.arange(n, dtype=np.float64), rng.uniform(1.5, 4.0), rng.uniform(0.05, 0.8), n / rng.uniform(50, 500),
        rng.uniform(0.6, 1.4),
    ) * _noise(n, rng, _log_uniform(rng, 0.05, 0.4))  # fmt: skip
    beta = 1 - _log_uniform(rng, 0.001, 0.1)
    out, avg = np.empty(n), 0.0
    for i in range(n):
        avg = beta * avg + (1 - beta) * raw[i]
        out[i] = avg / (1 - beta ** (i + 1))
    return out


def microbatch_cycle(n: int, rng: np.random.Generator) -> np.ndarray:
    """Gradient accumulation over 2, 4 or 8 micro-batches, the loss logged per micro-batch: the
    micro-batches come from length buckets whose per-token loss differs by 10-40%, in a fixed
    order (half the seeds) or shuffled within each optimizer step; 2-10% noise on top."""
    k = int(rng.choice([2, 4, 8]))
    levels = np.exp(rng.uniform(-1, 1, k) * rng.uniform(0.05, 0.2))
    levels /= levels.mean()
    cycles = -(-n // k)
    if rng.random() < 0.5:
        order = np.tile(np.arange(k), cycles)
    else:
        order = np.argsort(rng.random((cycles, k)), axis=1).ravel()
    t = np.arange(n, dtype=np.float64)
    step = (t // k) * k  # the model changes once per optimizer step
    x = _power(
        step, rng.uniform(2.0, 4.0), rng.uniform(0.3, 1.5), n / rng.uniform(50, 500), rng.uniform(0.5, 1.2)
    )
    return x * levels[order[:n]] * _noise(n, rng, rng.uniform(0.02, 0.1))


def bpb_floor(n: int, rng: np.random.Generator) -> np.ndarray:
    """Bits per byte late in a byte-level LM's training (or continued pretraining): 0.85-1.3
    bpb, down by only 1-4% over the run, 0.3-1.5% batch noise and a slow drift (shards of
    different entropy) of 0.2-1% of the level; printed to 4 decimals."""
    t = np.arange(n, dtype=np.float64)
    start, fall = rng.uniform(0.85, 1.3), rng.uniform(0.01, 0.04)
    p = rng.uniform(0.3, 1.0)
    x = start * (1 - fall * (1 - 1 / (1 + t / (0.1 * n)) ** p) / (1 - 1 / 11**p))
    drift = rng.uniform(0.002, 0.01) * _ar1(rng.standard_normal(n), 1 - 1 / rng.uniform(500, 5000))
    return np.round(x * (1 + drift) * _noise(n, rng, rng.uniform(0.003, 0.015)), 4)


def rl_return(n: int, rng: np.random.Generator) -> np.ndarray:
    """Reinforcement learning with the objective logged as a loss, -(mean return of the
    episodes that ended at the step, 1-8 of them): the return climbs slowly from 10-50 towards
    150-500 (not always reached), each episode's return varies by 30-80% (clipped at a third of
    the first return and above the cap), and 0-3 temporary slumps of 10-30% lasting 1-5% of the run. Negative values."""
    t = np.arange(n, dtype=np.float64)
    lo, hi = rng.uniform(10, 50), rng.uniform(150, 500)
    ret = lo + (hi - lo) * (1 - np.exp(-((t / (n * rng.uniform(0.3, 1.5))) ** rng.uniform(1.0, 2.0))))
    for at in rng.uniform(0.1, 0.9, int(rng.integers(0, 4))) * n:
        width = n * rng.uniform(0.01, 0.05)
        ret *= 1 - rng.uniform(0.1, 0.3) * np.exp(-0.5 * ((t - at) / (width / 2)) ** 2)
    m = rng.integers(1, 9, n)  # episodes ended at each step
    cv = rng.uniform(0.3, 0.8)
    episodes = ret[:, None] * (1 + cv * rng.standard_normal((n, 8)))
    episodes = np.clip(episodes, lo / 3, hi * 1.2)  # a random policy's worst, the cap
    mask = np.arange(8)[None, :] < m[:, None]
    return -(episodes * mask).sum(axis=1) / m


def infonce_temperature(n: int, rng: np.random.Generator) -> np.ndarray:
    """Contrastive pretraining (InfoNCE, CLIP/SimCLR) with a temperature annealed (cosine) from
    0.1-0.2 to 0.03-0.07 over 20-100% of the run: log(1 + (B - 1) exp(-gap / T)) for a batch B of
    256-32k, from ln(B) down to 0.3-2.5 as the positive-negative similarity gap grows; 1-5% noise."""
    t = np.arange(n, dtype=np.float64)
    b = float(rng.choice([256, 1024, 4096, 16384, 32768]))
    t0, t1, span = rng.uniform(0.1, 0.2), rng.uniform(0.03, 0.07), n * rng.uniform(0.2, 1.0)
    temp = t1 + (t0 - t1) * 0.5 * (1 + np.cos(np.pi * np.minimum(t / span, 1)))
    q = 1 - 1 / (1 + t / (n / rng.uniform(50, 500))) ** rng.uniform(0.5, 1.2)
    final = rng.uniform(0.3, 2.5)
    gap = t1 * math.log((b - 1) / math.expm1(final)) * q / q[-1]
    x = np.log1p((b - 1) * np.exp(-gap / temp))
    return x * _noise(n, rng, rng.uniform(0.01, 0.05), _maybe_rho(rng))


def distill_teacher(n: int, rng: np.random.Generator) -> np.ndarray:
    """Distillation (KL to a teacher) whose teacher is replaced 2-4 times (progressive
    distillation, a refreshed teacher checkpoint): the loss rises by 10-50% over 50-1,000 steps
    and returns to its trend, settling 5% lower to 8% higher; from 1-4 to 0.1-0.6, 2-15% noise."""
    t = np.arange(n, dtype=np.float64)
    x = _power(
        t, rng.uniform(1.0, 4.0), rng.uniform(0.1, 0.6), n / rng.uniform(50, 500), rng.uniform(0.6, 1.4)
    )
    for at in np.sort(rng.uniform(0.15, 0.9, int(rng.integers(2, 5))) * n).astype(int):
        k = t[at:] - at
        r = rng.uniform(50, 1000)
        bump = rng.uniform(0.1, 0.5) * (k / r) * np.exp(1 - k / r)
        x[at:] *= (1 + bump) * rng.uniform(0.95, 1.08)
    return x * _noise(n, rng, _log_uniform(rng, 0.02, 0.15), _maybe_rho(rng))


def _eval_pauses(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    trend = _power(
        t, rng.uniform(1.5, 3.0), rng.uniform(0.1, 0.8), n / rng.uniform(50, 500), rng.uniform(0.6, 1.4)
    )
    x = trend * _noise(n, rng, _log_uniform(rng, 0.02, 0.2), _maybe_rho(rng))
    every, length = int(n * rng.uniform(0.01, 0.05)), int(rng.integers(20, 401))
    saved = rng.random() < 0.5  # the pass computes the loss (saved in EVAL mode), or only metrics
    batches = _noise(length, rng, rng.uniform(0.05, 0.2))  # the same eval batches every pass
    gap = rng.uniform(1.0, 1.25)  # the generalization gap
    mode = np.full(n, TRAIN)
    for s0 in range(every, n, every + length):
        m = min(length, n - s0)
        mode[s0 : s0 + m] = EVAL if saved else EVAL_UNSAVED
        x[s0 : s0 + m] = trend[s0] * gap * batches[:m]
    return {"loss": x, MODE: mode}


def eval_pauses(n: int, rng: np.random.Generator) -> np.ndarray:
    """An evaluation pass every 1-5% of the run pauses training for 20-400 steps (the global
    step counts on): on half the seeds the pass saves its loss in EVAL mode (the same eval
    batches every pass, 0-25% above the training trend), on the others it saves nothing (a
    metrics-only pass); 2-20% training batch noise. See `series` for the modes."""
    return _eval_pauses(n, rng)["loss"]


def restart_repeat(n: int, rng: np.random.Generator) -> np.ndarray:
    """A preempted job restarted 1-4 times from its last checkpoint (every 500-5,000 steps): the
    global step counts on, so the loss jumps back to the checkpoint's level and repeats the
    steps since then (fresh batches), 0-30% higher for its first 10-100 steps (optimizer and
    data loader warm again); 2-15% noise."""
    every = int(rng.uniform(500, 5000))
    logical, pos, g = np.empty(n, dtype=np.int64), 0, 0
    bumps = np.ones(n)
    restarts = set((rng.uniform(0.1, 0.95, int(rng.integers(1, 5))) * n).astype(int))
    for g in range(n):
        if g in restarts:
            pos = (pos // every) * every  # back to the last checkpoint
            k = np.arange(n - g)
            bumps[g:] *= 1 + rng.uniform(0, 0.3) * np.exp(-k / rng.uniform(10, 100))
        logical[g] = pos
        pos += 1
    trend = _power(
        logical.astype(np.float64), rng.uniform(1.5, 3.0), rng.uniform(0.1, 0.8), n / rng.uniform(50, 500),
        rng.uniform(0.6, 1.4),
    )  # fmt: skip
    return trend * bumps * _noise(n, rng, _log_uniform(rng, 0.02, 0.15))


def regularized_total(n: int, rng: np.random.Generator) -> np.ndarray:
    """The total of a task loss and a regularizer that grows (an L2 / weight-norm term, an MoE
    balance loss): after a fast early fall (2-10% of the run) the task part keeps falling while
    the regularizer (5-20% of the task loss then) grows by 70-100% of what the task loses, so the
    logged total is nearly flat; 2-15% noise on the task part only."""
    t = np.arange(n, dtype=np.float64)
    task = _power(
        t, rng.uniform(1.5, 2.5), rng.uniform(0.05, 0.5), n / rng.uniform(20, 200), rng.uniform(0.5, 1.2)
    )
    ta = int(n * rng.uniform(0.02, 0.1))
    reg0 = rng.uniform(0.05, 0.2) * task[ta]
    reg = reg0 * (1 - np.exp(-t / (ta / 3))) + rng.uniform(0.7, 1.0) * np.maximum(0, task[ta] - task)
    return task * _noise(n, rng, _log_uniform(rng, 0.02, 0.15), _maybe_rho(rng)) + reg


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "lm_spikes": lm_spikes,
    "wsd": wsd,
    "inverse_sqrt": inverse_sqrt,
    "data_mixture": data_mixture,
    "epoch_staircase": epoch_staircase,
    "ema_logged": ema_logged,
    "microbatch_cycle": microbatch_cycle,
    "bpb_floor": bpb_floor,
    "rl_return": rl_return,
    "infonce_temperature": infonce_temperature,
    "distill_teacher": distill_teacher,
    "eval_pauses": eval_pauses,
    "restart_repeat": restart_repeat,
    "regularized_total": regularized_total,
}
# the kinds that record more than their loss: {"loss", LR, MODE} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "wsd": _wsd,
    "inverse_sqrt": _inverse_sqrt,
    "eval_pauses": _eval_pauses,
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
def _base(n: int, rng: np.random.Generator) -> np.ndarray:
    """A healthy loss to break: a power-law decay with 1-20% batch noise."""
    t = np.arange(n, dtype=np.float64)
    x = _power(
        t, rng.uniform(1.5, 4.0), rng.uniform(0.1, 1.0), n / rng.uniform(50, 500), rng.uniform(0.6, 1.4)
    )
    return x * _noise(n, rng, _log_uniform(rng, 0.01, 0.2), _maybe_rho(rng))


def schedule_creep(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A learning-rate schedule bug at 55-65% of the run (the cosine's phase wraps, the rate
    climbs back up): the loss creeps upward, slowly at first (as a power 1.5-2.5 of the time since),
    to 1.3-2x its level by the end, its noise growing by as much."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.55, 0.65))
    k = np.arange(n - t0) / (n - t0)
    grow = 1 + rng.uniform(0.3, 1.0) * k ** rng.uniform(1.5, 2.5)
    x[t0:] *= grow * _noise(n - t0, rng, 0.05 * (grow - 1))
    return x, t0


def dead_optimizer(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of the run the logged loss is exactly constant, the value of the step before
    (the optimizer's state went bad and the parameters stopped; the loss of one cached batch)."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.3, 0.7))
    x[t0:] = x[t0 - 1]
    return x, t0


def label_leak(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From 30-70% of the run the labels leak into the inputs (a data pipeline change): the loss
    collapses within 20-300 steps to exactly 0 (float32 cross-entropy of certain predictions)."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0)
    y = x[t0:] * np.exp(-k / (rng.uniform(20, 300) / 14))  # ~1e-6 of the level by the end
    x[t0:] = np.where(y < 1e-7, 0.0, y).astype(np.float32)
    return x, t0


def growing_oscillation(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A divergence that starts as an oscillation (the edge of stability crossed): from 30-70% of
    the run the loss alternates up and down with a period of 2-10 steps, its log-amplitude
    growing from 1% e-fold every 50-300 steps, until it swings by 10^4x."""
    x, t0 = _base(n, rng), int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0)
    period = int(rng.integers(2, 11))
    amp = np.minimum(0.01 * np.exp(np.minimum(k / rng.uniform(50, 300), 50)), math.log(1e4))
    x[t0:] *= np.exp(amp * np.sin(2 * np.pi * (k + 0.5) / period))
    return x, t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "schedule_creep": schedule_creep,
    "dead_optimizer": dead_optimizer,
    "label_leak": label_leak,
    "growing_oscillation": growing_oscillation,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
