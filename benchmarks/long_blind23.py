"""A twenty-third blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind23`.

    .venv/bin/python benchmarks/long_runs.py --blind23 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of a training job look over 10^5-10^6 logged values (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is what numerics, hardware and infrastructure do to
a healthy loss, through mechanisms the earlier sets lack: FP8 delayed scaling whose scales are
recomputed every N steps from an amax history that outlier batches fill; an FP8 run annealed
in bf16; a logging library upgrade that reports bits where it reported nats (or the reverse);
PowerSGD's uncompressed warm-up, restarted at every launch since its state is not saved;
asynchronous parameter-server training with its stale gradients; data echoing adapted to a
shared store's throughput; a loss read back from Graphite's retention tiers; IPU training in
fp16 with stochastic rounding; Accelerate's batch-size finder restarting the fit after an
out-of-memory error; a TPU pod slice resized under a per-core BatchNorm; T5X's checkpoints
saved in bfloat16; a loader that skips the large files an object store throttles; a
wall-clock budget schedule on a shared GPU; and nanoGPT's last-micro-batch loss over requeues
onto other GPU models. None of them is one of `long_runs.KINDS`, `long_blind.KINDS`, ...
`long_blind22.KINDS` (nor a bug of their `BUGS`). They are to be measured once, on the held-out
seeds (`SEEDS`), and not tuned on: a rule changed after looking at them makes them a tuning set.

The interface is `long_blind22`'s: a kind is `(n, rng) -> loss`, each value one logged point;
`series(kind, n, rng)` gives all that a run records: the loss and, where the kind has them, the
learning rate (`LR`, as the PyTorch hook records it, in real units, at each logged point) and
the mode of each step (`MODE`, as `long_blind.eval_pauses` records it: `TRAIN` and `EVAL` steps
save their loss in their mode; `EVAL_UNSAVED` steps are evaluation steps that save no loss; no
kind here has evaluation passes, but `MODE` and its codes are kept for the interface). Where a
kind compresses a run of more steps than it has points, its schedules keep their real
proportions. A bug is `(n, rng) -> (loss, the step its defect begins)`; one bug ends in NaN on
most of its seeds, as such jobs do. Only numpy here: the series can be generated and looked at
without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _log_uniform, _noise, _power  # the first blind set's helpers
from long_blind3 import _lag  # the third's
from long_blind4 import _f32, _gamma  # the fourth's
from long_blind11 import _slow_walk  # the eleventh's
from long_blind17 import _area  # the seventeenth's
from long_blind20 import _blow_up, _learned  # the twentieth's
from long_blind21 import _to_end  # the twenty-first's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE: the mode of each step
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 23000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _cosine_rate(s: np.ndarray, total: float, warm: float, peak: float, final: float) -> np.ndarray:
    """A linear warm-up over `warm` steps to `peak`, then a cosine to `final` x `peak` at step
    `total` (held there after it), at the steps `s`."""
    c = np.clip((s - warm) / max(total - warm, 1.0), 0.0, 1.0)
    cos = final + (1 - final) * 0.5 * (1 + np.cos(np.pi * c))
    return peak * np.where(s < warm, (s + 1) / max(warm, 1.0), cos)


def _held(rate: np.ndarray, tau: float) -> np.ndarray:
    """The share of its peak the rate holds, as the loss feels it (a lag of `tau` steps): what
    multiplies the part of the loss a high rate keeps up (the noise floor of SGD)."""
    r = rate / rate.max()
    return _lag(r, tau, float(r[0]))


def _student(n: int, rng: np.random.Generator, sd: float | np.ndarray) -> np.ndarray:
    """A multiplicative Student-t noise factor (4-10 degrees of freedom) of spread `sd`."""
    df = rng.uniform(4, 10)
    return np.exp(np.asarray(sd) * rng.standard_t(df, n) / math.sqrt(df / (df - 2)))


def _lm(n: int, rng: np.random.Generator, end: tuple[float, float] = (1.8, 2.6)) -> dict[str, np.ndarray]:
    """LM pretraining's ordinary curve: a 0.2-1% warm-up and a cosine to 10% of 1.5e-4-6e-4
    (the rate), the loss from ln V (32k-128k) along the rate's area to `end`, 3-8% of it held
    up by the rate (the level, no noise)."""
    t = np.arange(n, dtype=np.float64)
    rate = _cosine_rate(t, n, n * rng.uniform(0.002, 0.01), _log_uniform(rng, 1.5e-4, 6e-4), 0.1)
    start = math.log(rng.uniform(32_000, 128_000))
    base = _to_end(
        _area(rate), start, rng.uniform(*end), n * _log_uniform(rng, 0.002, 0.03), rng.uniform(0.4, 0.8)
    )
    level = base * (1 + rng.uniform(0.03, 0.08) * _held(rate, n * rng.uniform(0.002, 0.01)))
    return {"level": level, LR: rate, "start": np.array([start])}


def _boxes(hit: np.ndarray, width: int) -> np.ndarray:
    """1 where a hit happened within the last `width` steps (the step itself included)."""
    c = np.cumsum(hit.astype(np.int64))
    before = np.concatenate([np.zeros(width, dtype=np.int64), c[:-width]]) if width < len(c) else 0
    return (c - before) > 0


def _narrowband(n: int, rng: np.random.Generator, period: float, width: float) -> np.ndarray:
    """A unit-variance oscillation of about `period` steps whose frequency wanders (a relative
    band of `width`): white noise filtered in frequency."""
    z = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n)
    f0 = 1 / period
    z *= np.exp(-0.5 * ((f - f0) / (width * f0)) ** 2)
    x = np.fft.irfft(z, n)
    return x / max(float(x.std()), 1e-12)


# the healthy kinds ----------------------------------------------------------------------------
def _fp8_interval(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    lm = _lm(n, rng)
    level, rate = lm["level"], lm[LR]
    t = np.arange(n)
    interval = int(rng.choice([16, 64, 256, 1024]))
    interval = max(4, min(interval, n // 50))
    share = rate / rate.max()
    stale = rng.uniform(0.001, 0.006) * ((t % interval) / interval) * share  # amax outgrows the scale
    history = int(rng.choice([16, 128, 1024]))  # amax_history_len, amax_compute_algo="max"
    history = max(2, min(history, n // 100))
    outlier = rng.random(n) < _log_uniform(rng, 1e-4, 1e-3)
    spike = 1 + outlier * rng.uniform(0.05, 0.3, n)  # the outlier batch itself
    # the next recalibration takes the outlier's amax: the scale too small until it leaves the
    # history, the small values flushed to zero in between
    recal = (t // interval) * interval
    first = np.minimum(((np.flatnonzero(outlier) // interval) + 1) * interval, n - 1)
    marks = np.zeros(n, dtype=bool)
    marks[first] = True
    box = _boxes(marks, history + interval) & (recal > 0)
    under = 1 + box * rng.uniform(0.003, 0.015) * (0.3 + 0.7 * share)
    loss = level * (1 + stale) * under * spike * _student(n, rng, rng.uniform(0.01, 0.025))
    return {"loss": _f32(loss), LR: rate}


def fp8_delayed_scaling_interval(n: int, rng: np.random.Generator) -> np.ndarray:
    """LM pretraining in FP8 with NVIDIA Transformer Engine's delayed scaling (Micikevicius et
    al. 2022, "FP8 formats for deep learning"; `DelayedScaling(fp8_format=HYBRID, interval=N,
    amax_history_len=H, amax_compute_algo="max")` as TE's 0.x releases offered it): each
    tensor's scale is recomputed only every N = 16-1,024 steps from the largest |value| of the
    last H = 16-1,024 steps. Between recalibrations the activations outgrow their scale and a
    few more values saturate: the loss rises by 0.1-0.6% (times the rate's share of its peak)
    through each interval and drops back at the next, a sawtooth of period N. A rare outlier
    batch (0.01-0.1% of the steps, 5-30% above the level itself) puts its amax in the history
    at the next recalibration: for H + N steps the scale is too small, the small values flush
    to zero, and the loss sits 0.3-1.5% higher, a flat-topped box. Warm-up and a cosine to 10%
    of 1.5e-4-6e-4, recorded; from ln V (32k-128k) to 1.8-2.6; Student-t noise of 1-2.5%;
    float32."""
    return _fp8_interval(n, rng)["loss"]


def _fp8_anneal(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    lm = _lm(n, rng)
    level, rate = lm["level"], lm[LR]
    start = float(lm["start"][0])
    t = np.arange(n)
    at = int(n * rng.uniform(0.75, 0.95))
    gap = rng.uniform(0.003, 0.015) * _learned(level, start, float(level[-1]))  # FP8's cost grows
    settle = rng.uniform(5, 50)  # steps for the bf16 weights' updates to take the gap back
    closed = 1 - np.exp(-np.maximum(t - at, 0) / settle)
    g_at = gap[at]
    factor = np.where(t < at, 1 + gap, 1 + g_at * (1 - closed))
    sd = rng.uniform(0.01, 0.025)
    loss = level * factor * _student(n, rng, np.where(t < at, sd, sd * rng.uniform(0.85, 0.97)))
    return {"loss": _f32(loss), LR: rate}


def fp8_bf16_anneal(n: int, rng: np.random.Generator) -> np.ndarray:
    """LM pretraining in FP8 (Transformer Engine's HYBRID recipe) for its long first part and
    in bf16 for its last 5-25%, as teams wary of FP8's late instabilities do (Fishman et al.
    2024, "Scaling FP8 training to trillion-token LLMs", saw them appear only after hundreds of
    billions of tokens): the job is relaunched with `fp8_autocast(enabled=False)` from its
    checkpoint, nothing else changed. FP8's quantization costs 0.3-1.5% of the loss, growing
    from nothing as the model learns; at the switch the loss drops by that much within 5-50
    steps and its noise falls by 3-15%, then it goes on along the cosine's tail. Warm-up and
    a cosine to 10% of 1.5e-4-6e-4, recorded; from ln V (32k-128k) to 1.8-2.6; Student-t noise
    of 1-2.5%; float32."""
    return _fp8_anneal(n, rng)["loss"]


def _bits(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    rate = _cosine_rate(t, n, n * rng.uniform(0.005, 0.02), _log_uniform(rng, 2e-4, 1e-3), 0.0)
    start = math.log(256)
    end = rng.uniform(0.65, 1.0)  # nats a byte: 0.94-1.44 bits
    level = _to_end(_area(rate), start, end, n * _log_uniform(rng, 0.002, 0.03), rng.uniform(0.5, 0.9))
    level = level * (1 + rng.uniform(0.03, 0.1) * _held(rate, n * rng.uniform(0.002, 0.01)))
    at = int(n * rng.uniform(0.2, 0.8))
    to_bits = rng.random() < 0.7
    unit = np.where((t >= at) == to_bits, 1 / math.log(2), 1.0)
    loss = level * unit * _noise(n, rng, rng.uniform(0.01, 0.04))
    return {"loss": _f32(loss), LR: rate}


def nats_to_bits_logger(n: int, rng: np.random.Generator) -> np.ndarray:
    """A byte-level language model (enwik8-style character modelling, reported in bits per
    character; AdamW at 2e-4-1e-3, a 0.5-2% warm-up and a cosine to 0, recorded), resumed 20-80%
    of the way through under an upgraded in-house logging library whose `log_loss` now divides
    by ln 2 (as fairseq's `base 2` metrics and compression papers report it): from the resume
    the logged value is in bits where it was in nats, 1.44x as high at once, its relative noise
    unchanged, and falls on from there. On 30% of the seeds the reverse (bits before, nats
    after: x0.69). In nats the loss falls from ln 256 along the rate's area to 0.65-1.0 (0.94-1.44
    bits), 3-10% of it held up by the rate; log-normal noise of 1-4%; float32."""
    return _bits(n, rng)["loss"]


def _powersgd(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    gpus = int(rng.choice([16, 32, 64, 128]))
    peak = 0.1 * gpus * 32 / 256  # SGD, Goyal et al.'s linear scaling, 32 images a GPU
    rate = _cosine_rate(t, n, n * rng.uniform(0.01, 0.05), peak, 0.0)
    start_iter = int(min(_log_uniform(rng, 1_000, 10_000), n * 0.1))  # start_powerSGD_iter
    launches = np.sort(rng.uniform(0.1, 0.95, int(rng.integers(1, 5))) * n).astype(int)  # preemptions
    bounds = np.concatenate([[0], launches])
    since = t - bounds[np.searchsorted(bounds, t, side="right") - 1]  # steps since this launch
    compressed = since >= start_iter
    slow = rng.uniform(0.9, 0.98)  # progress a step under rank-1-4 compression
    area = np.cumsum(rate / rate.max() * np.where(compressed, slow, 1.0))
    classes = int(rng.choice([100, 1000]))
    s0 = math.log(classes)
    base = _to_end(area, s0, s0 * rng.uniform(0.15, 0.35), n * rng.uniform(0.01, 0.05), rng.uniform(0.5, 0.9))
    base = base * (1 + rng.uniform(0.2, 0.5) * _held(rate, n * rng.uniform(0.002, 0.01)))
    # the switch: error-feedback memory empty, the low-rank bases warming up
    switch = np.flatnonzero(compressed & ~np.r_[False, compressed[:-1]])
    bump = np.zeros(n)
    tau = rng.uniform(100, 1_000)
    size = rng.uniform(0.005, 0.03)
    for s in switch:
        k = t[s:] - s
        bump[s:] += size * (rate[s] / rate.max()) * (k / 20) / (1 + k / 20) * np.exp(-k / tau)
    cv = rng.uniform(0.8, 1.5) / math.sqrt(32 * gpus) * np.where(compressed, rng.uniform(1.05, 1.2), 1.0)
    loss = base * (1 + bump) * _gamma(n, rng, cv)
    return {"loss": _f32(loss), LR: rate}


def powersgd_comm_hook(n: int, rng: np.random.Generator) -> np.ndarray:
    """An image classifier under DDP with PyTorch's PowerSGD communication hook (Vogels et al.
    2019; `ddp.register_comm_hook(PowerSGDState(matrix_approximation_rank=1-4,
    start_powerSGD_iter=1,000-10,000, use_error_feedback=True, warm_start=True),
    powerSGD_hook)`), 16-128 GPUs of 32 images, SGD at 0.1 x batch / 256 with a 1-5% warm-up
    and a cosine to 0, recorded. The first `start_powerSGD_iter` steps all-reduce the full
    gradients; then the low-rank compression starts with empty error-feedback memory: the loss
    lifts by up to 0.5-3% (times the rate's share of its peak) over some 20 steps and the lift
    fades over 100-1,000 steps, each compressed step then worth 90-98% of a full one and the
    noise 5-20% higher. The hook's state is not in the checkpoint, so after each of the job's
    1-4 preemptions (saved on the notice, no step lost) the uncompressed warm-up and the switch
    come again. The loss falls from ln C (100 or 1,000 classes) along the rate's area to 15-35%
    of it, 20-50% of it held up by the rate; noise 80-150% over the square root of the global
    batch, skewed; float32."""
    return _powersgd(n, rng)["loss"]


def _async_ps(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    workers = int(rng.choice([8, 16, 32, 50]))
    per_epoch = n / rng.uniform(60, 120)  # updates an epoch, the epochs in proportion
    t = np.arange(n, dtype=np.float64)
    rate = 0.045 * 0.94 ** np.floor(t / (2 * per_epoch))  # RMSProp, x0.94 every two epochs
    area = np.cumsum(rate / rate.max() / (1 + 0.01 * workers))  # staleness slows progress
    start = math.log(1000)
    base = _to_end(area, start, rng.uniform(1.2, 2.0), per_epoch * rng.uniform(0.5, 3), rng.uniform(0.5, 0.9))
    base = base * (1 + rng.uniform(0.1, 0.3) * _held(rate, per_epoch * rng.uniform(0.2, 1.0)))
    tau = workers * rng.uniform(0.8, 1.2)  # updates between a worker's read and its push
    osc = _narrowband(n, rng, 4 * tau * rng.uniform(0.9, 1.4), rng.uniform(0.1, 0.3))
    amp = rng.uniform(0.0005, 0.0015) * workers * (rate / rate.max())
    cv = rng.uniform(0.8, 1.5) / math.sqrt(32)  # the pushing worker's own batch
    loss = base * (1 + amp * osc) * _gamma(n, rng, cv)
    return {"loss": _f32(loss), LR: rate}


def async_parameter_server(n: int, rng: np.random.Generator) -> np.ndarray:
    """Inception-style ImageNet training with asynchronous replicas (Dean et al. 2012's Downpour
    SGD; Szegedy et al. 2016 trained Inception-v3 on 50 replicas this way: RMSProp at 0.045,
    x0.94 every two epochs of 60-120, recorded): 8-50 workers of 32 images each read the weights from
    the parameter servers, compute a gradient and push it, so an update is computed on weights
    about as many updates old as there are workers. Each logged value is the update's
    pushing worker's own batch loss (noise 80-150% over sqrt(32), skewed). The stale gradients
    make the sharpest directions overshoot: an oscillation of about four staleness periods
    (its frequency wandering 10-30%), 0.4-7.5% of the level, growing with the workers and
    shrinking with the rate, rides on the curve, and each update is worth a little less than
    a synchronous one. The loss falls from ln 1000 along the rate's area to 1.2-2.0 (label
    smoothing), 10-30% of it held up by the rate; float32."""
    return _async_ps(n, rng)["loss"]


def _echoing(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    m = n  # fresh batches, at most one a step
    # the store's throughput against the accelerators' appetite: a daily cycle and contention
    day = _log_uniform(rng, 2_000, 40_000)  # fresh batches a day
    slow = np.exp(
        rng.uniform(0.1, 0.4) * np.sin(2 * np.pi * np.arange(m) / day + rng.uniform(0, 6.3))
        + rng.uniform(0.2, 0.5) * _slow_walk(m, rng, day / 10)
    ) * rng.uniform(0.8, 1.6)
    echo = np.clip(np.ceil(slow - 0.05), 1, 4).astype(np.int64)  # echo factor, ceil(upstream / downstream)
    ends = np.cumsum(echo)
    m = int(np.searchsorted(ends, n)) + 1
    echo = echo[:m]
    fresh = np.repeat(np.arange(m), echo)[:n]  # the batch each step trains on
    first = np.concatenate([[0], np.cumsum(echo)[:-1]])
    r = (np.arange(n) - first[fresh]).astype(np.float64)  # 0 fresh, 1.. its repeats
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 0.1, 0.4)
    rate = _cosine_rate(t, n, n * rng.uniform(0.01, 0.05), peak, 0.0)
    worth = rng.uniform(0.3, 0.7)  # a repeated batch's progress against a fresh one's
    area = np.cumsum(rate / peak * np.where(r > 0, worth, 1.0))
    start = math.log(1000)
    base = _to_end(
        area, start, start * rng.uniform(0.15, 0.3), n * rng.uniform(0.01, 0.05), rng.uniform(0.5, 0.9)
    )
    base = base * (1 + rng.uniform(0.2, 0.4) * _held(rate, n * rng.uniform(0.002, 0.01)))
    fit = rng.uniform(0.005, 0.03) * rate / peak  # a step on a batch lowers its own loss
    cv = rng.uniform(0.8, 1.5) / math.sqrt(1024)
    batch = _gamma(m, rng, cv)[fresh]  # an echoed batch keeps its own difficulty
    loss = (
        base * batch * (1 - fit * r) * _noise(n, rng, cv * rng.uniform(0.2, 0.4))
    )  # its augmentations redrawn
    return {"loss": _f32(loss), LR: rate}


def data_echoing_adaptive(n: int, rng: np.random.Generator) -> np.ndarray:
    """ResNet-50 training on accelerators fed from a shared network store, with batch-level data
    echoing (Choi et al. 2019, "Faster neural network training with data echoing": each batch
    the input pipeline delivers is used e times, echoed before augmentation) and e set as the
    store allows: ceil(upstream time / step time), 1-4, following the store's daily cycle and
    its contention (a slow wander). A repeated batch has the same images, so its loss repeats
    its first showing's difficulty, lower by 0.5-3% (times the rate's share of its peak) for
    each step already taken on it; a repeat is worth 30-70% of a fresh batch, so the loss falls
    more slowly per step where e is high. SGD at 0.1-0.4 (batch 1,024) with a 1-5% warm-up and a
    cosine to 0, recorded; the loss from ln 1000 along the rate's area to 15-30% of it, 20-40%
    of it held up by the rate; noise 80-150% over sqrt(1024) a batch, kept by its repeats,
    and 20-40% of that redrawn at each showing (its augmentations); float32."""
    return _echoing(n, rng)["loss"]


def graphite_retention_rollup(n: int, rng: np.random.Generator) -> np.ndarray:
    """A recommendation or vision job whose trainer pushes the step loss to StatsD, which
    Graphite (carbon, whisper files) stores under a retention like `10s:6h,1m:7d,10m:1y` with
    `aggregationMethod = average`; once the run is over its loss is read back in one render
    query, and each point is whatever resolution the archive holding it keeps: the oldest
    40-70% of the points are the means of m1 steps, the next 35-70% of the rest of m2 = m1 /
    6-10, the newest of m3 = m2 / 6-10 (1, 2, 5 or 10 steps): the curve's early fall in smooth,
    coarse points and its end in noisy fine ones. The step loss falls from ln C
    (C = 10, 100 or 1,000) along a power law in steps to 10-30% of it; per-step noise 5-20%, so a
    point's noise is that over the square root of its steps; float32."""
    m3 = int(rng.choice([1, 2, 5, 10]))
    m2 = m3 * int(rng.choice([6, 10]))
    m1 = m2 * int(rng.choice([6, 10]))
    f1 = rng.uniform(0.4, 0.7)
    f2 = (1 - f1) * rng.uniform(0.35, 0.7)
    n1 = int(n * f1)
    n2 = int(n * f2)
    n3 = n - n1 - n2
    width = np.concatenate([np.full(n1, m1), np.full(n2, m2), np.full(n3, m3)]).astype(np.float64)
    ends = np.cumsum(width)
    centre = ends - width / 2
    total = float(ends[-1])
    start = math.log(int(rng.choice([10, 100, 1000])))
    level = _power(centre, start, start * rng.uniform(0.1, 0.3), total * _log_uniform(rng, 1e-4, 1e-2), 0.7)
    cv = rng.uniform(0.05, 0.2)
    return _f32(level * _noise(n, rng, cv / np.sqrt(width)))


def ipu_fp16_stochastic_rounding(n: int, rng: np.random.Generator) -> np.ndarray:
    """A BERT-style model pretrained on Graphcore IPUs in pure fp16 (weights, gradients and
    optimizer state in half precision; static loss scaling) with the hardware's stochastic
    rounding on (`poptorch.Options().Precision.enableStochasticRounding(True)`; Graphcore's
    BERT recipes, Gupta et al. 2015 on why it works): an update smaller than half an fp16 ulp
    is applied as a whole ulp with the matching probability, so the weights keep moving in the
    mean however small the rate, but carry a rounding noise set by the ulp, not the rate: as
    the rate decays the loss keeps falling only to a floor 0.5-3% of its final level above
    where fp32 weights would go, and its step-to-step noise keeps a part (20-50%) that does
    not shrink with the rate. LAMB-style warm-up over 1-5% and a linear decay to 0 (not
    recorded); the loss from ln V (30,522) along the rate's area to 1.4-2.0; noise 1.5-4%;
    float32."""
    t = np.arange(n, dtype=np.float64)
    warm = n * rng.uniform(0.01, 0.05)
    rate = np.where(t < warm, (t + 1) / warm, np.clip((n - t) / (n - warm), 0.0, 1.0))
    start = math.log(30_522)
    end = rng.uniform(1.4, 2.0)
    fp32 = _to_end(np.cumsum(rate), start, end, n * _log_uniform(rng, 0.002, 0.03), rng.uniform(0.4, 0.8))
    fp32 = fp32 * (1 + rng.uniform(0.05, 0.15) * _held(rate, n * rng.uniform(0.002, 0.01)))
    floor = end * rng.uniform(0.005, 0.03) * (1 + 0.1 * _slow_walk(n, rng, n * 0.01))
    level = fp32 + floor * _learned(fp32, start, end)
    sd = rng.uniform(0.015, 0.04)
    keep = rng.uniform(0.2, 0.5)
    spread = sd * np.sqrt(keep + (1 - keep) * np.maximum(rate, 0.0))
    return _f32(level * _noise(n, rng, spread))


def _oom_restart(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    b0 = int(rng.choice([128, 256]))
    fails = int(rng.integers(1, 4))
    lengths = [
        int(min(rng.geometric(1 / _log_uniform(rng, 20, n * 0.02)), n * 0.05)) + 1 for _ in range(fails)
    ]
    epochs = int(rng.integers(2, 6))
    peak = _log_uniform(rng, 1e-5, 5e-5)  # AdamW, kept as the batch halves
    classes = int(rng.choice([2, 3, 5, 20]))
    start = math.log(classes) * rng.uniform(0.95, 1.05)
    end_frac = rng.uniform(0.1, 0.4)
    scale_frac = rng.uniform(0.005, 0.05)
    cv0 = rng.uniform(1.5, 3.0)
    parts, rates = [], []
    left = n
    for a in range(fails + 1):
        b = b0 // 2**a
        planned = max(100, (n - sum(lengths)) * 2 ** (a - fails))  # the fit's steps at this batch
        k = min(lengths[a], left) if a < fails else left
        s = np.arange(k, dtype=np.float64)
        warm = planned * 0.06
        rate = peak * np.where(s < warm, (s + 1) / warm, np.clip((planned - s) / (planned - warm), 0.0, 1.0))
        area = np.cumsum(rate / peak) * b / b0  # fewer examples a step
        full = planned * b / b0
        level = _to_end(np.r_[area, full], start, start * end_frac, full * scale_frac, 0.7)[:-1]
        x = np.minimum(s * epochs / planned, epochs - 1e-9)
        level = level * (1 - rng.uniform(0.1, 0.2)) ** np.floor(x)
        parts.append(level * _gamma(k, rng, cv0 / math.sqrt(b)))
        rates.append(rate)
        left -= k
        if left <= 0:
            break
    return {"loss": _f32(np.concatenate(parts)[:n]), LR: np.concatenate(rates)[:n]}


def oom_batch_halving_restart(n: int, rng: np.random.Generator) -> np.ndarray:
    """A fine-tune of a pretrained encoder on a large classification set (C = 2-20; 2-5 epochs;
    AdamW at 1e-5-5e-5, a 6% warm-up and a linear decay, recorded) wrapped in Accelerate's
    `@find_executable_batch_size(starting_batch_size=128 or 256)` (accelerate's
    `examples/by_feature/memory.py`): the training function builds the model and optimizer
    afresh and, when the dynamically padded batches bring a long one that does not fit (a
    CUDA out-of-memory error, after some 20 steps to 2% of the run, at most 5%), the decorator
    halves the batch and calls it again, 1-3 times. The tracker's own step counts on, so the
    log holds 1-3 short starts, each from the untrained loss (about ln C) falling a little along
    its warm-up, then the real fit from the start again at the batch that fits: twice the
    steps per epoch for each halving, the noise sqrt(2) higher (150-300% over the square root
    of the batch, skewed), the loss along the rate's area to 10-40% of ln C, 10-20% lower at
    each new epoch; float32."""
    return _oom_restart(n, rng)["loss"]


def _tpu_resize(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    per_epoch = n / 90
    e = t / per_epoch
    rate = (4096 / 256 * 0.1) * np.where(
        e < 5, (e + 1 / per_epoch) / 5, 0.1 ** np.searchsorted([30, 60, 80], e, side="right")
    )
    cores_options = [32, 64, 128, 256]
    cuts = np.sort(rng.uniform(0.05, 0.95, int(rng.integers(3, 6))) * n).astype(int)
    cores = rng.choice(cores_options, len(cuts) + 1)
    c_t = cores[np.searchsorted(cuts, t, side="right")].astype(np.float64)
    per_core = 4096 / c_t
    start = math.log(1000)
    base = _to_end(
        _area(rate), start, rng.uniform(0.9, 1.5), per_epoch * rng.uniform(0.5, 3), rng.uniform(0.5, 0.9)
    )
    base = base * (1 + rng.uniform(0.3, 0.6) * _held(rate, per_epoch * rng.uniform(0.2, 1.0)))
    kappa = rng.uniform(0.1, 0.4)  # BatchNorm's noise as a regularizer: higher with fewer images a core
    bn = 1 + kappa * _learned(base, start, float(base[-1])) / np.sqrt(per_core)
    loss = base * bn * _gamma(n, rng, rng.uniform(0.8, 1.5) / 64)
    return {"loss": _f32(loss), LR: rate}


def tpu_resize_bn_per_core(n: int, rng: np.random.Generator) -> np.ndarray:
    """ResNet-50 on Cloud TPU pod slices (the TPU reference `resnet_main.py`: global batch
    4,096, SGD with momentum at 0.1 x batch / 256, 5 warm-up epochs and x0.1 at epochs 30, 60
    and 80 of 90, recorded; BatchNorm statistics per core, no cross-replica BN) moved 3-5
    times between slices of 32-256 cores as the reservations allow, from its checkpoint at an
    epoch boundary. The global batch and so the rate stay the same, but each core's batch is
    4,096 / cores (16-128 images), and a smaller per-core batch makes BatchNorm's statistics
    noisier and the training loss higher: by 10-40% over the square root of the per-core batch
    of the part of the loss learned, so the level steps by a few percent at each move, up or
    down. The loss from ln 1000 along the rate's area to 0.9-1.5 (label smoothing), 30-60% of
    it held up by the rate; noise 80-150% over sqrt(4096); float32."""
    return _tpu_resize(n, rng)["loss"]


def _t5x(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm = min(10_000.0, n * 0.02)
    rate = 0.01 / np.sqrt(np.maximum(t + 1, warm) / warm)  # Adafactor, rsqrt decay after a constant 0.01
    start = math.log(32_128)
    level = _to_end(
        _area(rate), start, rng.uniform(1.6, 2.2), n * _log_uniform(rng, 0.002, 0.02), rng.uniform(0.4, 0.8)
    )
    stops = np.sort(rng.uniform(0.03, 0.97, int(rng.integers(3, 13))) * n).astype(int)
    bump = np.zeros(n)
    size = rng.uniform(0.002, 0.02)
    tau0 = rng.uniform(50, 500)
    for s in stops:
        k = t[s:] - s
        tau = tau0 * rate[0] / rate[s]  # recovered as fast as the rate allows
        bump[s:] += size * rng.uniform(0.7, 1.3) * np.exp(-k / tau)
    loss = level * (1 + bump) * _student(n, rng, rng.uniform(0.01, 0.025))
    return {"loss": _f32(loss), LR: rate}


def t5x_bf16_checkpoint_resume(n: int, rng: np.random.Generator) -> np.ndarray:
    """T5 span-corruption pretraining with T5X (Roberts et al. 2022; Adafactor at a constant
    0.01 for 10,000 steps, or 2% of the run if that is fewer, then 1 / sqrt(step), recorded) whose checkpoints
    are written with `SaveCheckpointConfig(dtype="bfloat16")` to halve their size: the float32
    parameters are rounded to bfloat16 on saving. The job runs in reservation windows on a
    shared TPU pool and 3-12 times stops at a window's end, saving, and restarts from that
    checkpoint at the same step later (no step lost or repeated): each restart begins from the
    rounded weights, so the loss starts 0.2-2% above where it stopped and works the rounding
    off over 50-500 steps at the peak rate, the slower the lower the rate has decayed. The
    loss from ln V (32,128) along the rate's area to 1.6-2.2; Student-t noise of 1-2.5%;
    float32."""
    return _t5x(n, rng)["loss"]


def _throttle(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 1e-3, 4e-3)
    rate = _cosine_rate(t, n, n * rng.uniform(0.01, 0.05), peak, 0.0)  # AdamW
    start = math.log(int(rng.choice([100, 1000])))
    base = _to_end(
        _area(rate),
        start,
        start * rng.uniform(0.15, 0.35),
        n * rng.uniform(0.01, 0.05),
        rng.uniform(0.5, 0.9),
    )
    base = base * (1 + rng.uniform(0.1, 0.3) * _held(rate, n * rng.uniform(0.002, 0.01)))
    episodes = int(rng.integers(3, 21))
    skip = np.zeros(n)
    for _ in range(episodes):
        a = int(rng.uniform(0, n))
        w = int(n * rng.uniform(0.002, 0.03))
        ramp = np.minimum(1.0, np.minimum(np.arange(w) + 1, w - np.arange(w)) / max(1.0, w * 0.1))
        seg = slice(a, min(n, a + w))
        skip[seg] = np.maximum(skip[seg], rng.uniform(0.1, 0.4) * ramp[: seg.stop - a])
    harder = rng.uniform(0.1, 0.3)  # a large file's loss above the mean
    shift = skip * harder / (1 + skip * harder) * _learned(base, start, float(base[-1]))
    loss = (
        base
        * (1 - shift)
        * _gamma(n, rng, rng.uniform(0.8, 1.5) / math.sqrt(int(rng.choice([256, 512, 1024]))))
    )
    return {"loss": _f32(loss), LR: rate}


def storage_throttle_skip_large(n: int, rng: np.random.Generator) -> np.ndarray:
    """An image classifier (a ViT, AdamW at 1e-3-4e-3 with a 1-5% warm-up and a cosine to 0,
    recorded; batches of 256-1,024) streaming WebDataset shards from an object store with
    `handler=wds.warn_and_continue`: a sample whose read times out is logged as a warning and
    skipped, the batch filled with the next ones. 3-20 times in the run the store throttles the
    job (S3's `503 SlowDown`, a GCS bucket's rate limit) for 0.2-3% of the run, and the reads
    that time out are the large files, the high-resolution, cluttered images, 10-30% harder
    than the mean: 10-40% of them skipped, the batches fill with smaller, easier ones, and the
    loss dips by 1-10% of its learned part for the episode, ramping in and out. The loss from
    ln C (100 or 1,000 classes) along the rate's area to 15-35% of it, 10-30% of it held up by
    the rate; noise 80-150% over the square root of the batch, skewed; float32."""
    return _throttle(n, rng)["loss"]


def _budget(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    step_s = rng.uniform(0.1, 0.5)
    load = np.exp(rng.uniform(0.05, 0.3) * _slow_walk(n, rng, n * rng.uniform(0.005, 0.05)))
    busy = np.zeros(n, dtype=bool)
    for _ in range(int(rng.integers(2, 8))):  # a co-located job or a thermal cap slows it for a while
        a, w = int(rng.uniform(0, n)), int(n * rng.uniform(0.01, 0.08))
        busy[a : a + w] = True
    dt = step_s * load * np.where(busy, rng.uniform(1.2, 2.0), 1.0) * _noise(n, rng, 0.05)
    pause = int(rng.integers(500, 5_001))
    save = rng.uniform(0.02, 0.1) * pause * step_s  # a checkpoint save, on the clock
    dt[np.arange(n) % pause == pause - 1] += save
    elapsed = np.cumsum(dt)
    p = elapsed / (elapsed[-1] + step_s)  # the budget's share spent, as the scheduler sees it
    peak = _log_uniform(rng, 5e-4, 1e-3)
    rate = peak * np.minimum(0.25 + p, 4 * (1 - p))  # budget-triangle2: base 25%, falloff 25%
    start = math.log(32_768)
    base = _to_end(
        _area(rate), start, rng.uniform(1.8, 2.3), n * _log_uniform(rng, 0.005, 0.05), rng.uniform(0.4, 0.8)
    )
    base = base * (1 + rng.uniform(0.05, 0.15) * _held(rate, n * rng.uniform(0.002, 0.01)))
    loss = base * _noise(n, rng, rng.uniform(0.01, 0.03))
    return {"loss": _f32(loss), LR: rate}


def wallclock_budget_schedule(n: int, rng: np.random.Generator) -> np.ndarray:
    """A BERT-style MLM crammed into a fixed wall-clock budget on one shared GPU (Geiping and
    Goldstein 2022, "Cramming: training a language model on a single GPU in one day": its
    `budget-triangle2` schedule keys the rate to the elapsed share p of the hour budget, not to
    the step: min(0.25 + p, 4 (1 - p)) x 5e-4-1e-3, from a quarter of the peak up to it at 75%
    of the budget and down to 0 at its end; recorded). The steps' durations (0.1-0.5 s) wander
    with the node's load (5-30%), and 2-7 times a co-located job or a thermal cap slows them
    1.2-2x for 1-8% of the run; a checkpoint save every 500-5,000 steps takes 2-10% of that
    stretch's time off the clock. So in steps the rate rises and falls unevenly: it moves
    faster per step where steps are slow and jumps at each save. The loss from ln V
    (32,768) along the rate's area to 1.8-2.3, 5-15% of it held up by the rate; noise 1-3%;
    float32."""
    return _budget(n, rng)["loss"]


def _nanogpt(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm = min(2_000.0, n * 0.01)
    decay = n * rng.uniform(1.0, 1.2)  # lr_decay_iters
    rate = _cosine_rate(t, decay, warm, 6e-4, 0.1)
    start = math.log(50_304)
    base = _to_end(
        _area(rate), start, rng.uniform(2.85, 3.1), n * _log_uniform(rng, 0.002, 0.02), rng.uniform(0.4, 0.8)
    )
    base = base * (1 + rng.uniform(0.02, 0.06) * _held(rate, n * rng.uniform(0.002, 0.01)))
    cuts = np.sort(rng.uniform(0.02, 0.98, int(rng.integers(2, 9))) * n).astype(int)
    micro = {"A100-40GB": 12, "A100-80GB": 24, "V100-32GB": 8, "H100-80GB": 32, "L40S-48GB": 16}
    sku = rng.choice(list(micro), len(cuts) + 1)
    b = np.array([micro[s] for s in sku], dtype=np.float64)[np.searchsorted(cuts, t, side="right")]
    cv = rng.uniform(0.03, 0.06) / np.sqrt(b / 12)  # one micro-batch of b x 1,024 tokens
    loss = base * _student(n, rng, cv)
    return {"loss": _f32(loss), LR: rate}


def nanogpt_requeue_sku(n: int, rng: np.random.Generator) -> np.ndarray:
    """GPT-2 (124M) on OpenWebText with nanoGPT's `train.py` (AdamW at 6e-4, 2,000 warm-up
    steps and a cosine to 6e-5 at `lr_decay_iters`, recorded; tokens a step fixed), whose
    logged loss is `loss.item() * gradient_accumulation_steps` of rank 0's LAST micro-batch.
    The SLURM job is requeued 2-8 times onto whatever GPUs are free (V100-32GB, A100-40GB or
    -80GB, L40S, H100), and the launch script picks the micro-batch that fits the card (8-32
    sequences of 1,024 tokens), the accumulation steps making up the rest: the tokens a step,
    the rate and the curve go on unchanged, but the logged value's noise, one micro-batch's,
    moves by up to 2x at each requeue. The loss from ln 50,304 along the rate's area to
    2.85-3.1, 2-6% of it held up by the rate; Student-t noise of 3-6% at 12 sequences a
    micro-batch, over the square root of the micro-batch's share of that; float32."""
    return _nanogpt(n, rng)["loss"]


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "fp8_delayed_scaling_interval": fp8_delayed_scaling_interval,
    "fp8_bf16_anneal": fp8_bf16_anneal,
    "nats_to_bits_logger": nats_to_bits_logger,
    "powersgd_comm_hook": powersgd_comm_hook,
    "async_parameter_server": async_parameter_server,
    "data_echoing_adaptive": data_echoing_adaptive,
    "graphite_retention_rollup": graphite_retention_rollup,
    "ipu_fp16_stochastic_rounding": ipu_fp16_stochastic_rounding,
    "oom_batch_halving_restart": oom_batch_halving_restart,
    "tpu_resize_bn_per_core": tpu_resize_bn_per_core,
    "t5x_bf16_checkpoint_resume": t5x_bf16_checkpoint_resume,
    "storage_throttle_skip_large": storage_throttle_skip_large,
    "wallclock_budget_schedule": wallclock_budget_schedule,
    "nanogpt_requeue_sku": nanogpt_requeue_sku,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "fp8_delayed_scaling_interval": _fp8_interval,
    "fp8_bf16_anneal": _fp8_anneal,
    "nats_to_bits_logger": _bits,
    "powersgd_comm_hook": _powersgd,
    "async_parameter_server": _async_ps,
    "data_echoing_adaptive": _echoing,
    "oom_batch_halving_restart": _oom_restart,
    "tpu_resize_bn_per_core": _tpu_resize,
    "t5x_bf16_checkpoint_resume": _t5x,
    "storage_throttle_skip_large": _throttle,
    "wallclock_budget_schedule": _budget,
    "nanogpt_requeue_sku": _nanogpt,
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
def loss_scale_underflow_frozen(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """LM pretraining in fp16 with a hand-written dynamic loss scaler (halve on overflow, no
    `min_loss_scale`), resumed 30-70% of the way through with a new auxiliary term (a router
    z-loss taken as `log(softmax(...))` in half precision) whose backward is inf on every step:
    every step overflows, the scaler halves the scale each time until it underflows to 0 (and
    0 x inf is NaN, so it overflows on), and every optimizer step is skipped from the resume
    on. The weights never change again. On half the seeds the trainer logs the loss of the last
    step it applied (kept in a variable that only an applied step updates), so the series is
    one value, repeated exactly, to the end; on the others each batch's own loss at the frozen
    weights, flat at the resume's level with its batch noise. The rate's schedule goes on as
    if nothing happened. Healthy part: `_lm`'s curve from ln V to 1.8-2.6, Student-t noise of
    1-2.5%. The onset is the resume."""
    lm = _lm(n, rng)
    level = lm["level"]
    onset = int(n * rng.uniform(0.3, 0.7))
    noise = _student(n, rng, rng.uniform(0.01, 0.025))
    loss = level * noise
    if rng.random() < 0.5:
        loss[onset:] = loss[onset - 1]
    else:
        loss[onset:] = level[onset - 1] * noise[onset:]
    return _f32(loss), onset


def rollback_corrupt_checkpoint(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """LM pretraining with an auto-restart wrapper (a SLURM requeue on failure that resumes from
    the `latest` checkpoint) that crashes 30-60% of the way through on a flaky host while it is
    writing a checkpoint: the torn write leaves some layers of the newest checkpoint as
    garbage, nothing checks it, and every later save fails on the full quota, so `latest`
    keeps pointing at it. Each restart loads the corrupt weights: the loss jumps to 1.5-2.5x
    its level (at most ln V), relearns over 200-2,000 steps to 2-10% above where it was, and
    after every 2-8% of the run the job crashes again on the same host and restores the same
    checkpoint: the same climb back up, the same descent, never lower, to the end (the log
    appended, the global step counting on). Healthy part: `_lm`'s curve from ln V to 1.8-2.6,
    Student-t noise of 1-2.5%. The onset is the first restart's first step."""
    lm = _lm(n, rng)
    level = lm["level"]
    start = float(lm["start"][0])
    noise = _student(n, rng, rng.uniform(0.01, 0.025))
    onset = int(n * rng.uniform(0.3, 0.6))
    lo = float(level[onset])
    top = min(start, lo * rng.uniform(1.5, 2.5))
    floor = lo * rng.uniform(1.02, 1.1)
    tau = rng.uniform(200, 2_000)
    loss = level * noise
    s = onset
    while s < n:
        length = int(n * rng.uniform(0.02, 0.08))
        k = np.arange(min(length, n - s), dtype=np.float64)
        loss[s : s + len(k)] = (floor + (top - floor) * np.exp(-k / tau)) * noise[s : s + len(k)]
        s += len(k)
    return _f32(loss), onset


def fp8_scales_frozen_nan(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The FP8 run of `fp8_delayed_scaling_interval`, resumed 30-60% of the way through by a
    fork that skips the amax reduction to save its all-reduce, so the scaling factors restored
    from the checkpoint are never recomputed. As the loss falls the gradients shrink below
    what their frozen E5M2 scale can hold and flush to zero, so the loss falls at only 10-40%
    of its pace and creeps up by 1-5%; meanwhile the activations grow past their frozen E4M3
    range, and after 10-50% of the rest of the run the casts overflow: the loss runs away
    (0.2-20% a step) and on 80% of the seeds is NaN once it is 3-50x its level; on the others it
    saturates there, wandering. The onset is the resume."""
    lm = _lm(n, rng)
    level = lm["level"]
    t = np.arange(n, dtype=np.float64)
    onset = int(n * rng.uniform(0.3, 0.6))
    pace = rng.uniform(0.1, 0.4)
    after = t >= onset
    slowed = level[onset] + pace * (level - level[onset])
    creep = 1 + rng.uniform(0.01, 0.05) * np.clip((t - onset) / (n - onset), 0.0, 1.0)
    loss = np.where(after, slowed * creep, level) * _student(n, rng, rng.uniform(0.01, 0.025))
    at = min(onset + int((n - onset) * rng.uniform(0.1, 0.5)), n - 1)
    loss = _blow_up(
        loss, at, rng, _log_uniform(rng, 0.002, 0.02), _log_uniform(rng, 3, 50), rng.random() < 0.8
    )
    return _f32(loss), onset


def sdc_node_swap_drift(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """LM pretraining on a large cluster where a failed node is swapped 30-70% of the way
    through for a spare whose GPU has a marginal arithmetic unit (the silent data corruption
    of Dixit et al. 2021, "Silent data corruptions at scale"; the Llama 3 and Gemini reports
    count such faults): 0.5-5% of its steps its gradient shard carries a few wrong values,
    clipped by the global norm so nothing overflows, and all-reduced into every replica. Each
    corrupted step pushes the weights a clip's length in a random direction and Adam's second
    moments swell, so from the swap the loss stops falling and drifts UP steadily, by 10-60% of
    its level by the end of the run, with a spike of 2-50% at many corrupted steps; it never
    recovers. Healthy part: `_lm`'s curve from ln V to 1.8-2.6, Student-t noise of 1-2.5%.
    The onset is the first step on the new node."""
    lm = _lm(n, rng)
    level = lm["level"]
    t = np.arange(n, dtype=np.float64)
    onset = int(n * rng.uniform(0.3, 0.7))
    k = np.clip((t - onset) / (n - onset), 0.0, 1.0)
    rise = rng.uniform(0.1, 0.6)
    learning = (level / level[onset]) ** rng.uniform(0.1, 0.3)  # what the good steps still win
    drifted = level[onset] * learning * (1 + rise * k ** rng.uniform(0.8, 1.2))
    bad = (rng.random(n) < _log_uniform(rng, 0.005, 0.05)) & (t >= onset)
    spike = 1 + bad * rng.uniform(0.02, 0.5, n) * (rng.random(n) < 0.7)
    loss = np.where(t >= onset, drifted * spike, level) * _student(n, rng, rng.uniform(0.01, 0.025))
    return _f32(loss), onset


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "loss_scale_underflow_frozen": loss_scale_underflow_frozen,
    "rollback_corrupt_checkpoint": rollback_corrupt_checkpoint,
    "fp8_scales_frozen_nan": fp8_scales_frozen_nan,
    "sdc_node_swap_drift": sdc_node_swap_drift,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
