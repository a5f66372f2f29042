"""Long runs: do the loss rules stay quiet on healthy loss series of 10^5-10^6 steps, and how
fast do they fire on their buggy twins?

    .venv/bin/python benchmarks/long_runs.py [--steps 100000] [--half heldout|tune|both]
        [--kinds noisy heavy ...] [--bugs divergence nan ...] [--bug-steps 20000] [--rules ...]
        [--seeds 5] [--loss-only] [--blind | --blind2 | ... | --blind24]

Twenty-seven kinds of realistic healthy training-loss series (`KINDS`: the first nine,
`FIRST_SET`, tuned on; thirteen more written later, before any rule ran on them, with their
noise level 1-30% and its autocorrelation drawn per seed; a third set of five, `THIRD_SET`,
written the same way: upward evaluation spikes, a per-token loss over variable lengths, a
two-phase fine-tune with a re-warm, fp16-skipped steps logged as repeats, a multi-task mixture), each generated from a seed,
written step by step through the real recorder (`mldbg.record.Recorder`, the loss in the
`losses` collection, saved every step) and checked with `mldbg.check` as `mldbg check PATH`
is (the default set, its suspicions below the reporting bar not counted; the table shows the
loss rules, `RULES`); the two kinds driven by a learning-rate schedule record it too, as the PyTorch
hook does (`learning_rate/model` at statistics steps; `--loss-only`: not). The seeds are split once, before any tuning, into a tuning half (`TUNE`,
0-4) and a held-out half (`HELDOUT`, 5-9): the rules were tuned on the first only, and the
figures reported are the second's. Buggy twins (`BUGS`) inject a defect at a known step
into the `noisy` kind; the detection delay is the first finding of any loss rule (or
`exploding_tensor`, whose the NaN is) minus that step. Prints two markdown tables (BENCHMARKS.md, "Long runs").

`--blind` measures the blind set instead: `long_blind.KINDS` (14 more healthy kinds, one with
evaluation passes in EVAL mode, two with a learning rate) and `long_blind.BUGS` (4 bugs), on the
held-out seeds, written and checked the same way. No rule ran on them while they were written;
run it once, and do not tune on what it shows. `--blind2` measures the second blind set,
`long_blind2` (14 more kinds, three with a learning rate, and 4 bugs; written after the first had
been tuned on), the same way; `--blind3` the third, `long_blind3` (written after the second had
been tuned on); `--blind4` the fourth, `long_blind4` (14 more kinds, four with a learning rate,
and 4 bugs; written after the third had been measured); `--blind5` the fifth, `long_blind5` (14
more kinds, seven with a learning rate, some logged as the mean of every k steps, and 4 bugs;
written after the fourth); `--blind6` the sixth, `long_blind6` (written after the fifth); `--blind7` the seventh,
`long_blind7` (written after the sixth had been measured); `--blind8` the eighth, `long_blind8`
(written after the seventh had been measured); `--blind9` the ninth, `long_blind9`; `--blind10` the tenth, `long_blind10` (written after the ninth had been measured); `--blind11` the eleventh, `long_blind11`; `--blind12` the twelfth, `long_blind12`; `--blind13` the thirteenth, `long_blind13`; `--blind14` the fourteenth, `long_blind14`; `--blind15` the fifteenth, `long_blind15`; `--blind16` the sixteenth, `long_blind16`; `--blind17` the seventeenth, `long_blind17`; `--blind18` the eighteenth, `long_blind18`; `--blind19` the nineteenth, `long_blind19`; `--blind20` the twentieth, `long_blind20`; `--blind21` the twenty-first, `long_blind21`; `--blind22` the twenty-second, `long_blind22`; `--blind23` the twenty-third, `long_blind23`; `--blind24` the twenty-fourth, `long_blind24`.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


import long_blind  # noqa: E402

import mldbg  # noqa: E402
from mldbg.record.recorder import Recorder  # noqa: E402

RULES = (
    "loss_not_decreasing",
    "loss_change_point",
    "loss_spike",
    "loss_divergence",
    "underfitting",
    "overfit",
)
TUNE = (0, 1, 2, 3, 4)  # the seeds the rules were tuned on
HELDOUT = (5, 6, 7, 8, 9)  # never looked at while tuning: the reported figures


def _decay(n: int, rng: np.random.Generator, progress: np.ndarray | None = None) -> np.ndarray:
    """A loss that falls from about ln(10) towards a floor, fast at first: a power law in the
    progress (steps, or the learning rate's cumulative sum)."""
    t = np.arange(n, dtype=np.float64) if progress is None else progress
    scale = n / rng.uniform(50, 500)  # steps to fall most of the way
    start, floor = rng.uniform(2.0, 2.5), rng.uniform(0.05, 0.6)
    return floor + (start - floor) / (1 + t / scale) ** rng.uniform(0.7, 1.5)


def noisy(n: int, rng: np.random.Generator) -> np.ndarray:
    """Minibatch noise, 5% of the loss (multiplicative normal)."""
    return _decay(n, rng) * (1 + rng.uniform(0.03, 0.08) * rng.standard_normal(n))


def heavy(n: int, rng: np.random.Generator) -> np.ndarray:
    """Heavy-tailed batch noise: Student-t with 3 degrees of freedom, 3% of the loss."""
    return _decay(n, rng) * np.maximum(1 + 0.03 * rng.standard_t(3, n), 0.05)


def _lr_loss(lr: np.ndarray, rng: np.random.Generator, noise: float = 0.05) -> np.ndarray:
    """A loss driven by a learning-rate schedule: it falls with the cumulative learning rate,
    and sits higher while the learning rate is high (the noise floor of SGD)."""
    n = len(lr)
    cum = np.cumsum(lr) / lr.mean()
    base = _decay(n, rng, cum)
    floor_term = rng.uniform(0.1, 0.3) * lr / lr.max()
    return (base + floor_term) * (1 + noise * rng.standard_normal(n))


def _warmup_cosine_lr(n: int, rng: np.random.Generator) -> np.ndarray:
    w = int(n * rng.uniform(0.01, 0.05))
    t = np.arange(n)
    return np.where(t < w, (t + 1) / w, 0.5 * (1 + np.cos(np.pi * (t - w) / max(1, n - w))))


def warmup_cosine(n: int, rng: np.random.Generator) -> np.ndarray:
    """Linear warm-up over 1-5% of the run, then a cosine decay to 0."""
    return _lr_loss(_warmup_cosine_lr(n, rng), rng)


def _step_lr(n: int, rng: np.random.Generator) -> np.ndarray:
    t = np.arange(n)
    return np.where(t < n // 2, 1.0, np.where(t < 3 * n // 4, 0.1, 0.01))


def step_schedule(n: int, rng: np.random.Generator) -> np.ndarray:
    """The learning rate divided by 10 at 50% and 75% of the run (the loss drops at each)."""
    return _lr_loss(_step_lr(n, rng), rng)


# the learning rate of the kinds driven by a schedule, drawn as the kind draws it (first)
SCHEDULES = {"warmup_cosine": _warmup_cosine_lr, "step_schedule": _step_lr}


def sawtooth(n: int, rng: np.random.Generator) -> np.ndarray:
    """Epochs of 1-5% of the run over the same data: within an epoch the loss creeps up (by
    5-15%, the model forgets what it saw long ago), and it drops when an epoch starts over
    samples it has seen."""
    epoch = int(n * rng.uniform(0.01, 0.05))
    phase = (np.arange(n) % epoch) / epoch
    amp = rng.uniform(0.05, 0.15)
    return _decay(n, rng) * (1 + amp * phase) * (1 + 0.05 * rng.standard_normal(n))


def plateau_drop(n: int, rng: np.random.Generator) -> np.ndarray:
    """Falls, sits on a plateau for 10-30% of the run, then drops again (a second phase of
    learning, as when a network finds a new feature)."""
    x = _decay(n, rng)
    a, b = int(n * rng.uniform(0.1, 0.3)), int(n * rng.uniform(0.4, 0.6))
    x[a:b] = x[a]
    drop = rng.uniform(0.3, 0.6)
    tail = x[b:] - x[b] + x[a]
    x[b:] = tail * (1 - drop * (1 - np.exp(-np.arange(n - b) / (0.02 * n))))
    return x * (1 + 0.05 * rng.standard_normal(n))


def gan(n: int, rng: np.random.Generator) -> np.ndarray:
    """A GAN generator's loss: no downward trend, an oscillation (the two players take turns)
    of period 0.2-2% of the run, a slow drift up as the discriminator learns, 10% noise."""
    t = np.arange(n)
    period = n * rng.uniform(0.002, 0.02)
    level = rng.uniform(0.7, 1.0) * (1 + rng.uniform(0.2, 0.8) * t / n)
    osc = 1 + rng.uniform(0.1, 0.3) * np.sin(2 * np.pi * t / period + rng.uniform(0, 6.3))
    return level * osc * (1 + 0.1 * rng.standard_normal(n))


def _bf16(x: np.ndarray) -> np.ndarray:
    """Round to bfloat16 (8 significant bits), as a bf16 loss is."""
    m, e = np.frexp(x)
    return np.ldexp(np.round(m * 256) / 256, e)


def bf16_accumulation(n: int, rng: np.random.Generator) -> np.ndarray:
    """A bf16 loss with gradient accumulation: the mean of 4 micro-batch losses, each rounded
    to bf16, rounded again."""
    base = _decay(n, rng)
    micro = base[:, None] * (1 + 0.05 * rng.standard_normal((n, 4)))
    return _bf16(_bf16(micro).mean(axis=1))


def ar1(n: int, rng: np.random.Generator) -> np.ndarray:
    """Correlated batch noise (data order, a curriculum): AR(1) with rho 0.8-0.95, 5%."""
    rho = rng.uniform(0.8, 0.95)
    e = rng.standard_normal(n) * math.sqrt(1 - rho**2)
    z = np.empty(n)
    z[0] = e[0] / math.sqrt(1 - rho**2)
    for i in range(1, n):  # a loop: 10^5 steps take 0.05 s
        z[i] = rho * z[i - 1] + e[i]
    return _decay(n, rng) * (1 + 0.05 * z)


# the second set of healthy kinds (written before any rule ran on them): as a practitioner sees
# them in real logs, each with its noise drawn per seed -------------------------------------------
def _batch_noise(n: int, rng: np.random.Generator, lo: float = 0.01, hi: float = 0.3) -> np.ndarray:
    """A multiplicative batch-noise factor: log-normal, its spread drawn log-uniform in [lo, hi]
    of the loss, AR(1)-correlated (rho 0.3-0.9) on half the seeds (data order, shards)."""
    sd = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    z = rng.standard_normal(n)
    if rng.random() < 0.5:
        rho = rng.uniform(0.3, 0.9)
        e = z * math.sqrt(1 - rho**2)
        z = np.empty(n)
        z[0] = e[0] / math.sqrt(1 - rho**2)
        for i in range(1, n):
            z[i] = rho * z[i - 1] + e[i]
    return np.exp(sd * z - sd**2 / 2)


def _sched_loss(
    lr: np.ndarray, rng: np.random.Generator, high: tuple[float, float] = (0.1, 0.3)
) -> np.ndarray:
    """A loss driven by a learning-rate schedule (`_lr_loss`) with `_batch_noise`."""
    cum = np.cumsum(lr) / lr.mean()
    base = _decay(len(lr), rng, cum)
    return (base + rng.uniform(*high) * lr / lr.max()) * _batch_noise(len(lr), rng)


def one_cycle(n: int, rng: np.random.Generator) -> np.ndarray:
    """OneCycle: the learning rate climbs from max/25 over 20-45% of the run (cosine), then
    anneals to max/10^4: the loss barely moves, even sits a little higher, while the learning
    rate is high, then falls fast in the annealing phase."""
    t = np.arange(n) / n
    pct = rng.uniform(0.2, 0.45)
    up = 1 / 25 + (1 - 1 / 25) * 0.5 * (1 - np.cos(np.pi * t / pct))
    down = 1e-4 + (1 - 1e-4) * 0.5 * (1 + np.cos(np.pi * (t - pct) / (1 - pct)))
    lr = np.where(t < pct, up, down)
    return _sched_loss(lr, rng, high=(0.3, 0.8))


def sgdr(n: int, rng: np.random.Generator) -> np.ndarray:
    """Cosine annealing with warm restarts (SGDR): cycles of 4-20% of the run (doubling or not);
    at each restart the learning rate jumps back to its maximum and the loss jumps UP (by
    10-60% of its level), then falls through the cycle."""
    t0, mult = int(n * rng.uniform(0.04, 0.2)), int(rng.choice([1, 2]))
    lr, start, length = np.empty(n), 0, t0
    while start < n:
        k = np.arange(min(length, n - start))
        lr[start : start + len(k)] = 0.01 + 0.99 * 0.5 * (1 + np.cos(np.pi * k / length))
        start, length = start + length, length * mult
    return _sched_loss(lr, rng, high=(0.2, 0.6))


def kl_annealing(n: int, rng: np.random.Generator) -> np.ndarray:
    """A VAE's total loss with KL annealing: beta rises linearly 0 -> 1 over 2-15% of the run
    (from 0-2%), so while the reconstruction falls the total RISES (by 10-60% of the
    reconstruction's level) as the KL term is weighed in, then settles and falls slowly (the
    KL shrinks by 10-30% as the code gets efficient, the reconstruction keeps improving)."""
    t = np.arange(n)
    recon = _decay(n, rng)
    a, b = int(n * rng.uniform(0.0, 0.02)), int(n * rng.uniform(0.02, 0.15))
    beta = np.clip((t - a) / max(1, b), 0, 1)
    kl_end = rng.uniform(0.1, 0.6) * recon[a + b]
    kl = kl_end * (1 + rng.uniform(0.1, 0.3) * np.exp(-t / (0.3 * n)))
    return (recon + beta * kl) * _batch_noise(n, rng)


def curriculum(n: int, rng: np.random.Generator) -> np.ndarray:
    """Curriculum learning: every 5-20% of the run harder data comes in; the loss steps UP (by
    10-50%), then falls again (time constant 5-30% of a stage), part of the step (0-30%)
    staying (harder data has a higher floor)."""
    t = np.arange(n)
    stage = int(n * rng.uniform(0.05, 0.2))
    keep, tau = rng.uniform(0.0, 0.3), stage * rng.uniform(0.05, 0.3)
    factor = np.ones(n)
    for s0 in range(stage, n, stage):
        after = t >= s0
        jump = rng.uniform(0.1, 0.5)
        factor[after] *= 1 + jump * (keep + (1 - keep) * np.exp(-(t[after] - s0) / tau))
    return _decay(n, rng) * factor * _batch_noise(n, rng)


def batch_ramp(n: int, rng: np.random.Generator) -> np.ndarray:
    """A batch-size ramp (x2 at 3-6 points of the run, as in large-batch LM training): the
    noise shrinks by sqrt(2) at each, from 10-30% at first."""
    noise = rng.uniform(0.1, 0.3)
    points = np.sort(rng.uniform(0.05, 0.6, int(rng.integers(3, 7))) * n).astype(int)
    sd = noise / np.sqrt(2.0) ** np.searchsorted(points, np.arange(n), side="right")
    return _decay(n, rng) * np.exp(sd * rng.standard_normal(n) - sd**2 / 2)


def near_zero(n: int, rng: np.random.Generator) -> np.ndarray:
    """A loss that goes to 0 (an easy task memorized, a regression that fits): it falls by
    3-6 decades, with multiplicative log-normal noise of 10-60% (in log space)."""
    t = np.arange(n)
    decades = rng.uniform(3, 6)
    level = rng.uniform(1, 3) * 10 ** (-decades * (1 - 1 / (1 + t / (n * rng.uniform(0.02, 0.2)))))
    sd = rng.uniform(0.1, 0.6)
    return level * np.exp(sd * rng.standard_normal(n))


def late_noise(n: int, rng: np.random.Generator) -> np.ndarray:
    """Heteroscedastic noise that grows late (the model fits the easy samples; the hard ones
    dominate the batch loss): the relative noise grows from 2-5% to 15-40% over the run."""
    t = np.arange(n) / n
    sd = rng.uniform(0.02, 0.05) + (rng.uniform(0.15, 0.4) - 0.03) * t ** rng.uniform(1, 3)
    return _decay(n, rng) * np.exp(sd * rng.standard_normal(n) - sd**2 / 2)


def hard_batches(n: int, rng: np.random.Generator) -> np.ndarray:
    """Rare hard batches: 0.2-1% of the batches have 3-10x the loss (a mixture), on
    top of 2-15% batch noise."""
    x = _decay(n, rng) * _batch_noise(n, rng, 0.02, 0.15)
    hard = rng.random(n) < rng.uniform(0.002, 0.01)
    x[hard] *= rng.uniform(3, 10, int(hard.sum()))
    return x


def eval_dips(n: int, rng: np.random.Generator) -> np.ndarray:
    """Evaluation-mode steps logged into the training loss (no dropout, a held-out batch set):
    every 1-5% of the run, 5-50 consecutive values sit 10-40% below the training loss."""
    x = _decay(n, rng) * _batch_noise(n, rng, 0.02, 0.15)
    every, width = int(n * rng.uniform(0.01, 0.05)), int(rng.integers(5, 51))
    dip = 1 - rng.uniform(0.1, 0.4)
    for s0 in range(every, n, every):
        x[s0 : s0 + width] *= dip
    return x


def quantized(n: int, rng: np.random.Generator) -> np.ndarray:
    """A loss printed/stored with 3 significant digits (bf16-like discrete levels): few distinct
    values, many ties, with 1-10% batch noise."""
    x = _decay(n, rng) * _batch_noise(n, rng, 0.01, 0.1)
    digits = 10.0 ** (np.floor(np.log10(x)) - 2)
    return np.round(x / digits) * digits


def linear_decline(n: int, rng: np.random.Generator) -> np.ndarray:
    """A slow linear decline that never plateaus (an under-trained large model): from its
    start to 40-85% of it by the end, 1-30% noise."""
    start = rng.uniform(2.0, 6.0)
    return start * (1 - rng.uniform(0.15, 0.6) * np.arange(n) / n) * _batch_noise(n, rng)


def grokking(n: int, rng: np.random.Generator) -> np.ndarray:
    """A long plateau (grokking-like): the loss falls a little, sits flat for 30-70% of the
    run, then falls by 50-95% over 2-10% of the run."""
    t = np.arange(n)
    start = rng.uniform(1.0, 3.0)
    first = start * (1 - rng.uniform(0.05, 0.3) * (1 - np.exp(-t / (0.01 * n))))
    at, width = int(n * rng.uniform(0.3, 0.7)), n * rng.uniform(0.02, 0.1)
    fall = rng.uniform(0.5, 0.95)
    x = first * (1 - fall / (1 + np.exp(-(t - at) / (width / 6))))
    return x * _batch_noise(n, rng)


def unfreeze(n: int, rng: np.random.Generator) -> np.ndarray:
    """Fine-tuning: a head trained on a frozen backbone levels off; at 10-50% of the run the
    backbone is unfrozen and the loss drops at once (by 10-40%), then falls on."""
    t = np.arange(n)
    at = int(n * rng.uniform(0.1, 0.5))
    x = _decay(n, rng)
    drop = rng.uniform(0.1, 0.4)
    x[at:] = x[at] * (1 - drop) * (1 - rng.uniform(0.1, 0.5) * (1 - np.exp(-(t[at:] - at) / (0.1 * n))))
    return x * _batch_noise(n, rng)


# the third set of healthy kinds (written before any rule ran on them, 2026-11-29 afternoon):
# shapes none of the kinds above has -----------------------------------------------------------------
def eval_spikes(n: int, rng: np.random.Generator) -> np.ndarray:
    """A validation loss logged into the training loss at each epoch's end (every 1-5% of the
    run): 1-3 consecutive values 10-60% ABOVE the training loss (the generalization gap, which
    widens over the run by up to 2x), on 2-15% batch noise."""
    x = _decay(n, rng) * _batch_noise(n, rng, 0.02, 0.15)
    every, width = int(n * rng.uniform(0.01, 0.05)), int(rng.integers(1, 4))
    gap, widen = rng.uniform(0.1, 0.6), rng.uniform(1.0, 2.0)
    for s0 in range(every, n, every):
        x[s0 : s0 + width] *= 1 + gap * (1 + (widen - 1) * s0 / n)
    return x


def per_token_varlen(n: int, rng: np.random.Generator) -> np.ndarray:
    """A loss averaged per token over batches of variable total length (packed-free LM or ASR
    batches): the number of tokens per batch is log-normal (spread 0.3-1.0 in log), so the
    noise of the mean scales as 1/sqrt(tokens), 2-10% at the median length and several times
    that on the shortest batches; short batches also sit 0-10% higher per token (less context)."""
    tokens = np.exp(rng.uniform(0.3, 1.0) * rng.standard_normal(n))  # relative to the median
    sd = rng.uniform(0.02, 0.1) / np.sqrt(tokens)
    context = 1 + rng.uniform(0.0, 0.1) * np.clip(-np.log(tokens), 0, None)
    return _decay(n, rng) * context * np.exp(sd * rng.standard_normal(n) - sd**2 / 2)


def rewarm_finetune(n: int, rng: np.random.Generator) -> np.ndarray:
    """Two phases: pretraining for 30-60% of the run, then fine-tuning on new data with the
    learning rate re-warmed over 1-5% of the run: the loss jumps UP by 10-40% within 5-50 steps
    (a new domain), rises another 3-15% during the re-warm (the high rate forgets), then falls
    through a cosine decay to below where the first phase ended; 1-10% batch noise."""
    t = np.arange(n, dtype=np.float64)
    x = _decay(n, rng)
    at = int(n * rng.uniform(0.3, 0.6))
    warm, shift_in = n * rng.uniform(0.01, 0.05), rng.uniform(5, 50)
    k = t[at:] - at
    shift = rng.uniform(0.1, 0.4) * np.minimum(k / shift_in, 1.0)
    bump = rng.uniform(0.03, 0.15) * np.where(k < warm, k / warm, np.exp(-(k - warm) / warm))
    fall = rng.uniform(0.3, 0.7) * (1 - np.exp(-k / (0.2 * (n - at))))
    x[at:] = x[at] * (1 + shift + bump) * (1 - fall)
    return x * _batch_noise(n, rng, 0.01, 0.1)


def amp_skipped(n: int, rng: np.random.Generator) -> np.ndarray:
    """fp16 with a dynamic loss scaler whose skipped steps log the previous value: the first
    5-20 steps all overflow (the scale search: the initial loss repeated exactly), then one
    overflow per growth interval (every 500-2,000 steps) and rare bursts of 2-5 in a row
    (0.01-0.1% of steps), each an exact repeat of the value before; 2-10% batch noise."""
    x = _decay(n, rng) * _batch_noise(n, rng, 0.02, 0.1)
    skip = np.zeros(n, dtype=bool)
    skip[1 : int(rng.integers(5, 21))] = True
    interval = int(rng.integers(500, 2001))
    skip[interval::interval] = True
    for s0 in np.flatnonzero(rng.random(n) < rng.uniform(1e-4, 1e-3)):
        skip[s0 : s0 + int(rng.integers(2, 6))] = True
    skip[0] = False
    for i in np.flatnonzero(skip):  # in order: a run of skips repeats the last real value
        x[i] = x[i - 1]
    return x


def multitask_mix(n: int, rng: np.random.Generator) -> np.ndarray:
    """Multi-task training, one task per batch (sampled with fixed odds): 2-4 tasks whose losses
    sit 2-10x apart and fall at their own rates, so the logged loss jumps between levels every
    step (a multi-modal series with no single level); 2-10% noise within a task."""
    tasks = int(rng.integers(2, 5))
    odds = rng.dirichlet(np.ones(tasks) * 2)
    which = rng.choice(tasks, size=n, p=odds)
    levels = np.stack([_decay(n, rng) * rng.uniform(1, 10) for _ in range(tasks)])
    return levels[which, np.arange(n)] * _batch_noise(n, rng, 0.02, 0.1)


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "noisy": noisy,
    "heavy": heavy,
    "warmup_cosine": warmup_cosine,
    "step_schedule": step_schedule,
    "sawtooth": sawtooth,
    "plateau_drop": plateau_drop,
    "gan": gan,
    "bf16_accumulation": bf16_accumulation,
    "ar1": ar1,
    # the second set
    "one_cycle": one_cycle,
    "sgdr": sgdr,
    "kl_annealing": kl_annealing,
    "curriculum": curriculum,
    "batch_ramp": batch_ramp,
    "near_zero": near_zero,
    "late_noise": late_noise,
    "hard_batches": hard_batches,
    "eval_dips": eval_dips,
    "quantized": quantized,
    "linear_decline": linear_decline,
    "grokking": grokking,
    "unfreeze": unfreeze,
    # the third set
    "eval_spikes": eval_spikes,
    "per_token_varlen": per_token_varlen,
    "rewarm_finetune": rewarm_finetune,
    "amp_skipped": amp_skipped,
    "multitask_mix": multitask_mix,
}
FIRST_SET = (
    "noisy", "heavy", "warmup_cosine", "step_schedule", "sawtooth", "plateau_drop", "gan",
    "bf16_accumulation", "ar1",
)  # fmt: skip
THIRD_SET = ("eval_spikes", "per_token_varlen", "rewarm_finetune", "amp_skipped", "multitask_mix")


# buggy twins of `noisy`: (series, the step the defect begins) ------------------------------------
def _onset(n: int, rng: np.random.Generator) -> int:
    return int(n * rng.uniform(0.3, 0.6))


def divergence(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """From the onset the loss grows 10x every 100 steps, to 40,000 (a learning rate far too
    high after a schedule change)."""
    x, t0 = noisy(n, rng), _onset(n, rng)
    x[t0:] = np.minimum(x[t0:] * 10 ** (np.arange(n - t0) / 100), 4e4)
    return x, t0


def diverge_at_once(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A learning rate 100x too high: 2.3 at step 0, then thousands (the demo's broken twin)."""
    x = noisy(n, rng)
    x[1:] = rng.uniform(1e3, 4e4) * (1 + 0.3 * rng.standard_normal(n - 1)) ** 2
    return x, 1


def nan(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The loss becomes NaN and stays NaN."""
    x, t0 = noisy(n, rng), _onset(n, rng)
    x[t0:] = np.nan
    return x, t0


def stall(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """No learning from the start (learning rate 0, or labels unrelated to the inputs): the
    loss stays at chance level, ln(10), with minibatch noise."""
    return math.log(10) * (1 + 0.05 * rng.standard_normal(n)), 0


def rise(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """After learning, the loss climbs back up over 5% of the run to 80% of its start (a
    learning rate warm restart far too high, data corrupted from then on)."""
    x, t0 = noisy(n, rng), _onset(n, rng)
    start = float(np.median(x[:10]))
    span = max(1, n // 20)
    ramp = np.minimum(np.arange(n - t0) / span, 1.0)
    level = x[t0:] + ramp * (0.8 * start - x[t0:])
    x[t0:] = level * (1 + 0.05 * rng.standard_normal(n - t0))
    return x, t0


def jump(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """At the onset the loss jumps to 2x its level and stays there (a data pipeline change)."""
    x, t0 = noisy(n, rng), _onset(n, rng)
    x[t0:] *= 2.0
    return x, t0


def slow_divergence(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """After learning, the loss creeps up to 2x over 20% of the run and goes on creeping (a
    learning rate slightly too high for the late, sharp part of the landscape); 1-30% noise."""
    x, t0 = _decay(n, rng), _onset(n, rng)
    k = np.arange(n - t0)
    x[t0:] = x[t0:] * 2.0 ** (k / (0.2 * n))
    return x * _batch_noise(n, rng), t0


def chance_after_spike(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """After learning, a spike (10-100x for 1-5 steps), then the loss sits flat at the chance
    level, ln(10), with batch noise: the model was destroyed and predicts uniformly."""
    x, t0 = noisy(n, rng), _onset(n, rng)
    w = int(rng.integers(1, 6))
    x[t0 : t0 + w] *= rng.uniform(10, 100)
    x[t0 + w :] = math.log(10) * (1 + 0.01 * rng.standard_normal(n - t0 - w))
    return x, t0


def nan_midrun(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """One NaN mid-run (an fp16 overflow without a scaler), then the run goes on: every later
    value NaN as well (the weights are NaN)."""
    x = _decay(n, rng) * _batch_noise(n, rng)
    t0 = _onset(n, rng)
    x[t0:] = np.nan
    return x, t0


def jump3(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A sudden permanent jump to 3x (a broken data shard, a corrupted checkpoint restored),
    with the seed's batch noise."""
    x, t0 = _decay(n, rng), _onset(n, rng)
    x[t0:] *= 3.0
    return x * _batch_noise(n, rng), t0


def spike_ratchet(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Unrecovered loss spikes (an unstable LM, Adam's epsilon too small): from the onset a spike
    every 200-1,000 steps, to 1.5-3x, recovering only part of the way: each leaves the level
    10-30% higher, so the loss ratchets up; 1-10% batch noise."""
    x, t0 = _decay(n, rng), _onset(n, rng)
    t = np.arange(n, dtype=np.float64)
    factor, at = np.ones(n), t0
    while at < n:
        k = t[at:] - at
        peak, keep = rng.uniform(1.5, 3.0), rng.uniform(0.1, 0.3)
        factor[at:] *= (1 + keep) + (peak - 1 - keep) * np.exp(-k / rng.uniform(10, 50))
        at += int(rng.integers(200, 1001))
    return x * factor * _batch_noise(n, rng, 0.01, 0.1), t0


def rewarm_too_high(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A fine-tune whose re-warmed learning rate is 10x too high: from the onset the loss rises
    over the re-warm (1-5% of the run) to 2-4x where pretraining ended and stays there, noisy
    (the pretrained features are destroyed); 1-10% batch noise."""
    x, t0 = _decay(n, rng), _onset(n, rng)
    k = np.arange(n - t0, dtype=np.float64)
    warm = n * rng.uniform(0.01, 0.05)
    x[t0:] = x[t0] * (1 + (rng.uniform(2, 4) - 1) * np.minimum(k / warm, 1.0))
    return x * _batch_noise(n, rng, 0.01, 0.1), t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "divergence": divergence,
    "diverge_at_once": diverge_at_once,
    "nan": nan,
    "stall": stall,
    "rise": rise,
    "jump": jump,
    # the second set
    "slow_divergence": slow_divergence,
    "chance_after_spike": chance_after_spike,
    "nan_midrun": nan_midrun,
    "jump3": jump3,
    # the third set
    "spike_ratchet": spike_ratchet,
    "rewarm_too_high": rewarm_too_high,
}


LR = "learning_rate/model"  # as the PyTorch hook records it: a statistic `sum`, at statistics steps
MODE = long_blind.MODE  # a run's mode per step (`long_blind.eval_pauses`): mldbg.Mode codes, and
EVAL_UNSAVED = long_blind.EVAL_UNSAVED  # an evaluation step that saves no loss
assert long_blind.LR == LR
# the blind sets, each written after the one before had been measured: --blind (long_blind),
# --blind2 (long_blind2), ...; their constants are these (checked as one is imported)
BLIND_SETS = (
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
    "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth", "eighteenth",
    "nineteenth", "twentieth", "twenty-first", "twenty-second", "twenty-third",
    "twenty-fourth",
)  # fmt: skip
BLIND_FLAGS = ("blind", *(f"blind{k}" for k in range(2, len(BLIND_SETS) + 1)))


def write(path: Path, series: dict[str, np.ndarray]) -> None:
    """Each series as a scalar of the `losses` collection, one TRAIN step per value, through
    the recorder as a framework adapter drives it; a learning rate (`LR` in `series`) as the
    PyTorch hook records it, at the two-line hook's statistics steps (0-20, then every 100th).
    With `MODE` in `series` a step is opened in its mode (`mldbg.Mode`'s code) and saves its
    values there; an `EVAL_UNSAVED` step is an EVAL step that saves nothing (the global step
    counts on)."""
    rec = Recorder(
        str(path),
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["losses"],
        overwrite=True,
    )
    lr = series.pop(LR, None)
    modes = series.pop(MODE, None)
    n = len(next(iter(series.values())))
    try:
        for i in range(n):
            code = int(mldbg.Mode.TRAIN) if modes is None else int(modes[i])
            rec.start_step(mldbg.Mode(abs(code)))
            for name, x in series.items():
                if code != EVAL_UNSAVED:
                    rec.save_scalar(name, float(x[i]), ("losses",))
            if lr is not None and (i <= 20 or i % 100 == 0):
                value = float(lr[i])
                rec.save_statistics(lambda v=value: {LR: {"sum": v}}, {LR: ("F32", (1,), ())}, 16)
            rec.end_step()
    finally:
        rec.close()


def check(path: Path, rules: tuple[str, ...]) -> dict[str, int]:
    """The first step at which each of `rules` fired, as `mldbg check PATH` reports it: the
    default rule set (on a loss-only run, the loss rules), its suspicions not counted."""
    first: dict[str, int] = {}
    for f in mldbg.check(str(path)):
        if f.rule not in rules:
            continue
        first[f.rule] = min(first.get(f.rule, f.step), f.step)
    return first


def healthy_series(kind: str, n: int, seed: int, learning_rate: bool = True) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([seed, list(KINDS).index(kind)])
    out = {"loss": KINDS[kind](n, rng)}
    if learning_rate and kind in SCHEDULES:  # the same draws: the schedule the loss followed
        out[LR] = SCHEDULES[kind](n, np.random.default_rng([seed, list(KINDS).index(kind)]))
    if kind == "gan":  # the discriminator's loss too: near ln 4 / 2, oscillating against it
        out["d_loss"] = 0.6 * (1 - 0.5 * (out["loss"] / np.median(out["loss"]) - 1)).clip(0.05)
    return out


def blind_series(
    kind: str, n: int, seed: int, learning_rate: bool = True, blind: ModuleType = long_blind
) -> dict[str, np.ndarray]:
    """A run of the blind set's `kind` (`long_blind`, `long_blind2`, ... `long_blind8`), as
    `healthy_series` gives one of `KINDS`."""
    out = blind.series(kind, n, blind.rng_for(kind, seed))
    if not learning_rate:
        out.pop(LR, None)
    return out


def bug_series(bug: str, n: int, seed: int) -> tuple[np.ndarray, int]:
    """A buggy twin of `BUGS` and the step its defect begins."""
    return BUGS[bug](n, np.random.default_rng([seed, 100 + list(BUGS).index(bug)]))


def blind_bug_series(bug: str, n: int, seed: int, blind: ModuleType = long_blind) -> tuple[np.ndarray, int]:
    return blind.BUGS[bug](n, blind.bug_rng_for(bug, seed))


def _written(path: Path, cache: str | None, make: Callable[[], dict[str, np.ndarray]]) -> Path:
    """Write the run `make()` gives at `path`, unless the cache has it already."""
    if not (cache and (path / ".written").exists()):
        write(path, make())
        (path / ".written").touch()
    return path


def healthy_table(
    kinds: list[str],
    seeds: tuple[int, ...],
    steps: int,
    rules: tuple[str, ...],
    make: Callable[[str, int], dict[str, np.ndarray]],
    tmp: str,
    cache: str | None,
    tag: str,
    label: str,
    prefix: str = "",
    verbose: bool = False,
) -> None:
    """Write and check each kind's run for each seed; print the two healthy tables."""
    fired = {r: 0 for r in rules}
    steps_total = 0
    per_kind: dict[str, list[str]] = {}
    for kind in kinds:
        for seed in seeds:
            path = Path(tmp) / f"{prefix}{kind}-{seed}-{steps}{tag}"
            _written(path, cache, lambda kind=kind, seed=seed: make(kind, seed))
            t = time.perf_counter()
            first = check(path, rules)
            secs = time.perf_counter() - t
            steps_total += steps
            for r in first:
                fired[r] += 1
            per_kind.setdefault(kind, []).append(
                ", ".join(f"{r}@{s}" for r, s in sorted(first.items())) or "quiet"
            )
            if verbose:
                print(f"{kind} seed {seed}: {first or 'quiet'} ({secs:.1f} s)", file=sys.stderr)
    print(f"Healthy: {len(kinds)} kinds x {len(seeds)} seeds ({label}) x {steps:,} steps\n")
    print("| kind | runs alarmed | findings (rule@first step) |")
    print("| --- | --- | --- |")
    for kind, cells in per_kind.items():
        alarmed = sum(c != "quiet" for c in cells)
        shown = "; ".join(c for c in cells if c != "quiet") or "-"
        print(f"| {kind} | {alarmed} of {len(cells)} | {shown} |")
    print("\n| rule | healthy runs alarmed | false alarms per 10^6 healthy steps |")
    print("| --- | --- | --- |")
    runs = len(kinds) * len(seeds)
    for r in rules:
        print(f"| `{r}` | {fired[r]} of {runs} | {fired[r] / max(1, steps_total) * 1e6:.2g} |")


def bug_table(
    bugs: list[str],
    seeds: tuple[int, ...],
    steps: int,
    rules: tuple[str, ...],
    make: Callable[[str, int, int], tuple[np.ndarray, int]],
    tmp: str,
    cache: str | None,
    prefix: str,
    verbose: bool = False,
) -> None:
    """Write and check each buggy run for each seed; print the detection table."""
    print(f"\nBuggy twins: {len(seeds)} seeds x {steps:,} steps\n")
    print("| defect | runs caught | delay (steps after onset): median, max | rules (first step - onset) |")
    print("| --- | --- | --- | --- |")
    for bug in bugs:
        delays: list[int] = []
        cells = []
        for seed in seeds:
            x, t0 = make(bug, steps, seed)
            path = _written(Path(tmp) / f"{prefix}{bug}-{seed}-{steps}", cache, lambda x=x: {"loss": x})
            first = check(path, (*rules, "exploding_tensor"))
            late = {r: s - t0 for r, s in first.items()}
            hits = [d for d in late.values() if d >= 0]
            if hits:
                delays.append(min(hits))
            cells.append(", ".join(f"{r} {d:+d}" for r, d in sorted(late.items())) or "none")
            if verbose:
                print(f"{bug} seed {seed}: onset {t0}, {first or 'none'}", file=sys.stderr)
        med = f"{int(np.median(delays))}, {max(delays)}" if delays else "-"
        print(f"| {bug} | {len(delays)} of {len(seeds)} | {med} | {'; '.join(cells)} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--bug-steps", type=int, default=20_000)
    ap.add_argument("--half", choices=("heldout", "tune", "both"), default="heldout")
    ap.add_argument(
        "--kinds",
        nargs="*",
        help="default: all of KINDS (with --blind/--blind2/...: of that set's KINDS)",
    )
    ap.add_argument(
        "--bugs", nargs="*", help="default: all of BUGS (with --blind/--blind2/...: of that set's BUGS)"
    )
    ap.add_argument("--rules", nargs="*", default=list(RULES))
    ap.add_argument(
        "--seeds", type=int, nargs="*", help="these seeds of the half only (10^6 steps: one or two)"
    )
    which = ap.add_mutually_exclusive_group()
    for flag, ordinal in zip(BLIND_FLAGS, BLIND_SETS, strict=True):
        module = f"long_{flag}"
        which.add_argument(
            f"--{flag}",
            action="store_true",
            help=f"the {ordinal} blind set ({module}.KINDS and .BUGS, never tuned on) on the held-out seeds: "
            "measure it once",
        )
    ap.add_argument(
        "--loss-only",
        action="store_true",
        help="no learning rate for the scheduled kinds (as a loss-only replay)",
    )
    ap.add_argument(
        "--cache", help="keep the written runs in this folder and reuse them (the same seeds, kinds, steps)"
    )
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args()
    blind: ModuleType | None = None
    name = next((flag for flag in BLIND_FLAGS if getattr(args, flag)), "")
    if name:  # each written after the one before had been measured; its constants are these
        blind = importlib.import_module(f"long_{name}")
        assert blind.LR == LR and blind.MODE == MODE and blind.EVAL_UNSAVED == EVAL_UNSAVED
    if blind and args.half != "heldout":
        ap.error(f"--{name} runs on the held-out seeds only")
    source_kinds, source_bugs = (blind.KINDS, blind.BUGS) if blind else (KINDS, BUGS)
    kinds = list(source_kinds) if args.kinds is None else args.kinds
    bugs = list(source_bugs) if args.bugs is None else args.bugs
    unknown = [k for k in kinds if k not in source_kinds] + [b for b in bugs if b not in source_bugs]
    if unknown:
        ap.error(f"not in the {name + ' ' if blind else ''}set: {', '.join(unknown)}")
    seeds = blind.SEEDS if blind else {"heldout": HELDOUT, "tune": TUNE, "both": TUNE + HELDOUT}[args.half]
    if args.seeds:
        seeds = tuple(s for s in seeds if s in args.seeds)
    rules = tuple(args.rules)
    lr_tag = "" if args.loss_only else "-lr"
    if blind:
        make = functools.partial(blind_series, blind=blind)
        make_bug = functools.partial(blind_bug_series, blind=blind)
    else:
        make, make_bug = healthy_series, bug_series
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.cache or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        healthy_table(
            kinds,
            seeds,
            args.steps,
            rules,
            lambda kind, seed: make(kind, args.steps, seed, learning_rate=not args.loss_only),
            tmp,
            args.cache,
            tag=lr_tag,
            label=f"{args.half}, {name}" if blind else args.half,
            prefix=f"{name}-" if blind else "",
            verbose=args.verbose,
        )
        if bugs:
            bug_table(
                bugs,
                seeds,
                args.bug_steps,
                rules,
                make_bug,
                tmp,
                args.cache,
                prefix=f"bug-{name}-" if blind else "bug-",
                verbose=args.verbose,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
