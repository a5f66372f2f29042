"""An eighth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind8`.

    .venv/bin/python benchmarks/long_runs.py --blind8 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of an ordinary training job look over 10^5-10^6 steps (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is the everyday shapes done differently: minibatch
losses with heavy-tailed noise (Student-t of 3-8 degrees of freedom, log-normal), warm-up and
cosine with restarts whose peaks decay, step schedules with 3-5 drops, epoch sawtooth of other
shapes (unshuffled chronological windows, a tiny last batch), plateaus then drops at other
positions and depths, slow power laws at a constant rate, losses at their floor for most of the
run, a loss summed over tokens, regression with outlier batches, noise whose level changes
through the run, and fp16 logging. None of them is one of `long_runs.KINDS`, `long_blind.KINDS`,
... `long_blind7.KINDS` (nor a bug of their `BUGS`). They are to be measured once, on the
held-out seeds (`SEEDS`), and not tuned on: a rule changed after looking at them makes them a
tuning set.

The interface is `long_blind7`'s: a kind is `(n, rng) -> loss`; seven kinds record the
learning-rate schedule they follow, and `series(kind, n, rng)` gives all that a run records,
the loss and, where the kind has one, the learning rate (`LR`, as the PyTorch hook records
it, in real units). No kind here has evaluation passes, but `MODE` and its codes are kept for
the interface. A bug is `(n, rng) -> (loss, the step its defect begins)`. Only numpy here: the
series can be generated and looked at without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _log_uniform, _noise, _power  # the first blind set's helpers
from long_blind3 import _lag, _transient  # the third's
from long_blind4 import _f32, _gamma  # the fourth's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE (no kind here records one)
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 8000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _t_noise(n: int, rng: np.random.Generator, sd: float | np.ndarray, df: float) -> np.ndarray:
    """A multiplicative heavy-tailed noise factor of median 1: exp(sd x a Student-t of `df`
    degrees of freedom scaled to unit variance), clipped at 8 (a batch can be hard, not
    infinitely so)."""
    z = np.clip(rng.standard_t(df, n) / math.sqrt(df / (df - 2)), -8, 8)
    return np.exp(np.asarray(sd) * z)


def _ce_start(rng: np.random.Generator) -> float:
    """A classifier's initial loss: ln C, 10-1,000 classes."""
    return math.log(float(rng.choice([10, 100, 200, 1000])))


# the healthy kinds ----------------------------------------------------------------------------
def _timm_cosine_cycles(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    cycles = int(rng.integers(2, 5))
    mult = float(rng.choice([1.0, 2.0]))
    lens = mult ** np.arange(cycles)
    bounds = np.r_[0.0, np.cumsum(lens) / lens.sum() * n]
    c = np.minimum(np.searchsorted(bounds, t, side="right") - 1, cycles - 1)
    into = t - bounds[c]
    span = bounds[c + 1] - bounds[c]
    peak = _log_uniform(rng, 5e-4, 2e-3) if rng.random() < 0.5 else rng.uniform(0.05, 0.4)
    decay = float(rng.choice([0.5, 0.7, 1.0]))
    warm = n * rng.uniform(0.002, 0.02)
    top = peak * decay**c
    floor_lr = peak * 1e-3
    cos = floor_lr + (top - floor_lr) * 0.5 * (1 + np.cos(np.pi * into / span))
    lr = np.where(t < warm, floor_lr + (top - floor_lr) * t / warm, cos)  # `warmup_t`: once
    rel = lr / peak
    start = _ce_start(rng)
    end = start * rng.uniform(0.08, 0.3)
    base = _power(np.cumsum(rel), start, end, n / _log_uniform(rng, 30, 300), rng.uniform(0.6, 1.1))
    held = 1 + rng.uniform(0.1, 0.4) * _lag(rel, n * rng.uniform(0.001, 0.005), 1.0)
    level = end + (base - end) * held
    x = level * _t_noise(n, rng, rng.uniform(0.03, 0.1), rng.uniform(3, 8))
    return {"loss": _f32(x), LR: lr}


def timm_cosine_cycles(n: int, rng: np.random.Generator) -> np.ndarray:
    """An image classifier trained with timm's `CosineLRScheduler` with restarts (`--sched cosine
    --cycle-limit 2-4 --cycle-mul 1 or 2 --cycle-decay 0.5/0.7/1.0 --warmup-epochs --min-lr`): a
    linear warm-up over the first 0.2-2% of the run from 1e-3 of the peak (AdamW 5e-4-2e-3 or SGD
    0.05-0.4), then each cycle restarts at its own peak (the first one's x decay^cycle) and follows
    a cosine to 1e-3 of the peak; the loss falls from ln C (10-1,000 classes) along the rate's area
    to 8-30% of it, held up by 10-40% of its excess while the rate is high (lagging by 0.1-0.5% of
    the run), so it bumps up after each restart less and less; Student-t batch noise (3-8 degrees of
    freedom, 3-10%); float32."""
    return _timm_cosine_cycles(n, rng)["loss"]


def _darknet_steps(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    drops = int(rng.integers(3, 6))
    cuts = np.sort(rng.uniform(0.3, 0.95, drops)) * n
    gamma = float(rng.choice([0.1, 0.2, 0.5]))
    lr0 = float(rng.choice([1e-3, 1e-2, 0.1]))
    burn = n * rng.uniform(0.005, 0.02)
    k = np.searchsorted(cuts, t, side="right").astype(np.float64)
    lr = lr0 * gamma**k * np.minimum(1.0, (t / burn) ** 4)  # darknet's burn_in: (i / burn_in)^4
    rel = np.maximum(lr / lr0, 1e-12)
    start = rng.uniform(5, 20)  # YOLO's summed box + objectness + class loss
    floor = start * rng.uniform(0.05, 0.2)
    base = _power(np.cumsum(rel), start, floor, n / _log_uniform(rng, 20, 200), rng.uniform(0.5, 1.0))
    level = base * (1 + rng.uniform(0.1, 0.3) * _lag(rel, n * rng.uniform(0.001, 0.005), 0.0))
    x = level * _noise(n, rng, rng.uniform(0.1, 0.35))  # log-normal: mosaics of 1-50 objects
    return {"loss": x, LR: lr}


def darknet_steps(n: int, rng: np.random.Generator) -> np.ndarray:
    """A detector trained with darknet's `policy=steps` (YOLOv3/v4 cfg files: `burn_in` over
    0.5-2% of the run, the rate rising as (i / burn_in)^4, then `steps=` 3-5 iterations at
    30-95% of the run with `scales=` 0.1, 0.2 or 0.5 each, from 1e-3, 1e-2 or 0.1): the summed
    box + objectness + class loss falls from 5-20 along the rate's area to 5-20% of it, 10-30%
    of it held up by the rate (lagging by 0.1-0.5% of the run), so it steps down at each drop;
    log-normal batch noise of 10-35% (the number of objects in each mosaic varies)."""
    return _darknet_steps(n, rng)["loss"]


def chronological_windows(n: int, rng: np.random.Generator) -> np.ndarray:
    """A time-series forecaster (an LSTM, N-BEATS or a TFT on sliding windows of one long series, M5
    / electricity / traffic) trained with `shuffle=False`, as many tutorials do to "keep the time
    order": every epoch (200-3,000 steps) goes through the series from its start to its end, so the
    loss follows the series' own volatility through each epoch (its seasons, a calm then a turbulent
    period: 1-4 bumps of 30-150% and a drift of -30 to +60% from the first windows to the last), the
    same profile each epoch; the MSE on scaled targets falls from 0.5-1.5 to 10-40% of it along a
    power law, the profile shrinking less (to 50-90%); noise 5-15%, log-normal."""
    t = np.arange(n, dtype=np.float64)
    per = int(rng.integers(200, 3001))
    u = (t % per) / per
    profile = 1 + rng.uniform(-0.3, 0.6) * u
    for _ in range(int(rng.integers(1, 5))):
        c, w = rng.uniform(0, 1), rng.uniform(0.03, 0.15)
        profile += rng.uniform(0.3, 1.5) * np.exp(-0.5 * ((u - c) / w) ** 2)
    profile /= profile.mean()
    start = rng.uniform(0.5, 1.5)
    trend = _power(
        t, start, start * rng.uniform(0.1, 0.4), n / _log_uniform(rng, 20, 200), rng.uniform(0.5, 1.0)
    )
    fit = trend / start
    keep = rng.uniform(0.5, 0.9)
    shape = 1 + (profile - 1) * (keep + (1 - keep) * fit)
    return trend * shape * _noise(n, rng, rng.uniform(0.05, 0.15))


def tiny_last_batch(n: int, rng: np.random.Generator) -> np.ndarray:
    """A tabular regressor (an MLP on a Kaggle table with `nn.MSELoss()`, mean reduction) whose
    DataLoader keeps the last, partial batch (`drop_last=False`, the default, `shuffle=True`): the
    data set leaves 1-7 rows over a batch of 64-512, so the last step of every epoch (50-2,000
    steps) is the mean of a handful of rows: a chi-square with that many degrees of freedom, so it
    logs from ~0 to 5x the level, where the full batches log +-5-15%; the loss falls from 1 +-10% to
    0.1-0.5 (the targets' unexplained variance) along a power law; rows' squared errors are
    heavy-tailed (a full batch's mean of them Student-t-like, 4-10 degrees)."""
    t = np.arange(n, dtype=np.float64)
    per = int(rng.integers(50, 2001))
    rows = int(rng.integers(1, 8))
    start = rng.uniform(0.9, 1.1)
    trend = _power(t, start, rng.uniform(0.1, 0.5), n / _log_uniform(rng, 10, 200), rng.uniform(0.6, 1.2))
    x = trend * _t_noise(n, rng, rng.uniform(0.05, 0.15), rng.uniform(4, 10))
    last = np.arange(per - 1, n, per)
    x[last] = trend[last] * rng.chisquare(rows, len(last)) / rows
    return x


def induction_head_bump(n: int, rng: np.random.Generator) -> np.ndarray:
    """A small attention-only or 2-layer transformer trained on natural text (Olsson et al. 2022,
    "In-context learning and induction heads"): the loss falls fast from ln(vocabulary) to the
    bigram plateau (40-60% of it), sits there (falling by 2-6%) until the induction heads form
    at 1-30% of the run, where it first bumps up by 0-3% over 0.1-0.5% of the run, then drops by
    8-20% within 0.5-3% of the run, and falls slowly on (a power law, 5-15% more by the end);
    batch noise 1-4%, Student-t of 4-8 degrees."""
    t = np.arange(n, dtype=np.float64)
    vocab = math.log(float(rng.choice([50_257, 32_000, 8_192])))
    plateau = vocab * rng.uniform(0.4, 0.6)
    fast = (vocab - plateau) * np.exp(-t / (n * rng.uniform(0.001, 0.005)))
    tp = n * _log_uniform(rng, 0.01, 0.3)
    pre = plateau * (1 - rng.uniform(0.02, 0.06) * np.minimum(t / tp, 1))
    width = n * rng.uniform(0.005, 0.03)
    drop = rng.uniform(0.08, 0.2) / (1 + np.exp(-(t - tp - width / 2) / (width / 8)))
    bump = rng.uniform(0, 0.03) * np.exp(-0.5 * ((t - tp) / (n * rng.uniform(0.001, 0.005))) ** 2)
    later = 1 - rng.uniform(0.05, 0.15) * (1 - 1 / (1 + np.maximum(t - tp, 0) / (n * 0.05)))
    level = fast + pre * (1 - drop + bump) * later
    return level * _t_noise(n, rng, rng.uniform(0.01, 0.04), rng.uniform(4, 8))


def _constant_lr_power(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm = n * rng.uniform(0.001, 0.01)
    peak = _log_uniform(rng, 1e-4, 6e-4)
    lr = peak * np.minimum(1.0, (t + 1) / warm)
    start = math.log(float(rng.choice([32_000, 50_257, 128_256])))
    floor = rng.uniform(1.6, 2.4)
    alpha = rng.uniform(0.05, 0.2)
    scale = n * _log_uniform(rng, 1e-4, 1e-3)
    level = floor + (start - floor) / (1 + np.cumsum(lr / peak) / scale) ** alpha
    x = level * _t_noise(n, rng, rng.uniform(0.003, 0.01), rng.uniform(3, 6))
    return {"loss": _f32(x), LR: lr}


def constant_lr_power(n: int, rng: np.random.Generator) -> np.ndarray:
    """LM pretraining at a constant rate after a short warm-up (0.1-1% of the run; the "infinite"
    or warmup-stable schedule logged before any cooldown, as in the MiniCPM / Hägele et al. 2024
    runs, 1e-4-6e-4), over 10^5-10^6 logged steps: the loss follows a slow power law in the
    steps, L = E + (ln V - E) / (1 + t / s)^alpha with alpha 0.05-0.2 and E 1.6-2.4, so after
    its first percent the run moves it by only 3-20% per decade of steps; large batches, so the
    noise is small (0.3-1%) but heavy-tailed (Student-t of 3-6 degrees); float32."""
    return _constant_lr_power(n, rng)["loss"]


def nightly_warm_start(n: int, rng: np.random.Generator) -> np.ndarray:
    """A production recommender retrained each night from yesterday's weights (warm start, a
    TFX / Merlin continuous-training pipeline), one day's log of 10^5-10^6 steps: the model is
    converged on the older data, so the log loss (0.1-0.5, a CTR model) moves by only 0.5-3%
    over the run, down, its first 0.1-1% a little higher (yesterday's drift, +1-5%), while the
    batch noise (3-10%, log-normal, AR-correlated 0.3-0.9 as the examples come in time order)
    dominates it at every scale."""
    t = np.arange(n, dtype=np.float64)
    base = rng.uniform(0.1, 0.5)
    level = base * (1 - rng.uniform(0.005, 0.03) * t / n)
    level *= 1 + rng.uniform(0.01, 0.05) * np.exp(-t / (n * rng.uniform(0.001, 0.01)))
    return level * _noise(n, rng, rng.uniform(0.03, 0.1), rng.uniform(0.3, 0.9))


def token_sum_per_sequence(n: int, rng: np.random.Generator) -> np.ndarray:
    """A seq2seq or LM fine-tune whose hand-written loss is summed over each sequence's tokens and
    averaged over the sequences (`F.cross_entropy(..., reduction="sum") / batch_size`, as the
    sentence-VAE implementations of Bowman et al. 2016 report their NLL per sentence): the logged
    value is the per-token loss times the batch's mean target length (log-normal, a median of 20-200
    tokens, spread 0.3-0.8 over sentences, batches of 8-64), so it lies in the tens to hundreds and
    its noise is mostly the batch's length; the per-token loss falls from 4-8 to 1-2.5 along a power
    law."""
    t = np.arange(n, dtype=np.float64)
    med = _log_uniform(rng, 20, 200)
    spread = rng.uniform(0.3, 0.8)
    batch = int(rng.choice([8, 16, 32, 64]))
    mean_len = med * math.exp(spread**2 / 2)
    lens = mean_len * np.exp(spread / math.sqrt(batch) * rng.standard_normal(n) - spread**2 / (2 * batch))
    per_tok = _power(
        t, rng.uniform(4, 8), rng.uniform(1, 2.5), n / _log_uniform(rng, 30, 300), rng.uniform(0.5, 1)
    )
    return _f32(lens * per_tok * _noise(n, rng, rng.uniform(0.02, 0.06)))


def _smoothl1_outliers(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm = n * rng.uniform(0.01, 0.05)
    peak = _log_uniform(rng, 1e-4, 1e-3)
    lr = np.where(t < warm, peak * t / warm, peak * 0.5 * (1 + np.cos(np.pi * (t - warm) / (n - warm))))
    start = rng.uniform(0.5, 3.0)
    floor = start * rng.uniform(0.03, 0.15)
    level = _power(np.cumsum(lr / peak), start, floor, n / _log_uniform(rng, 20, 200), rng.uniform(0.6, 1.1))
    x = level * _gamma(n, rng, rng.uniform(0.05, 0.2))
    bad = rng.random(n) < _log_uniform(rng, 1e-3, 1e-2)
    x[bad] += start * _log_uniform(rng, 0.3, 3) * rng.pareto(2.5, int(bad.sum()))  # mislabeled rows
    return {"loss": _f32(x), LR: lr}


def smoothl1_outliers(n: int, rng: np.random.Generator) -> np.ndarray:
    """A keypoint / depth / box regressor trained with `SmoothL1Loss` (or L1) under AdamW 1e-4-1e-3,
    a linear warm-up over 1-5% and a cosine to 0: the loss falls from 0.5-3 to 3-15% of it along the
    rate's area, with skewed batch noise of 5-20%; 0.1-1% of the batches hold a mislabeled or
    corrupted sample (a flipped keypoint, a depth map of zeros), which adds a Pareto(2.5) tail of
    0.3-3x the initial loss on top, whatever the level: outliers of 10-100x the level (and more)
    late in the run."""
    return _smoothl1_outliers(n, rng)["loss"]


def _mixture_noise_shift(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm = n * rng.uniform(0.005, 0.02)
    peak = _log_uniform(rng, 2e-4, 1e-3)
    lr = np.where(t < warm, peak * t / warm, peak * (1 - 0.9 * (t - warm) / (n - warm)))
    share = 0.1 + rng.uniform(0.3, 0.8) * np.clip((t / n - 0.1) / 0.8, 0, 1)  # the web source's
    clean_l = _power(
        np.cumsum(lr / peak), rng.uniform(6, 9), rng.uniform(1.5, 2.2), n / _log_uniform(rng, 50, 500), 0.8
    )
    web_extra = rng.uniform(0.0, 0.1)
    level = clean_l + share * web_extra
    sd = rng.uniform(0.01, 0.03) + share * rng.uniform(0.1, 0.25)
    x = level * _noise(n, rng, sd)
    return {"loss": _f32(x), LR: lr}


def mixture_noise_shift(n: int, rng: np.random.Generator) -> np.ndarray:
    """LM pretraining whose data-mixture weights follow a schedule (an annealed curriculum, as in
    DoReMi-style or "from clean to web" recipes): the share of a noisy web source in each batch
    grows linearly from 10% to 40-90% between 10% and 90% of the run; its documents cost 0-0.1 nats
    more but vary far more, so the batch-to-batch spread grows from 1-3% to 4-25% of the level
    (heteroscedastic noise), while the mean falls along a power law in the rate's area (linear decay
    to 10% after a 0.5-2% warm-up, 2e-4-1e-3) from 6-9 to 1.5-2.2 plus the web share's cost;
    float32."""
    return _mixture_noise_shift(n, rng)["loss"]


def _fp16_logged_lm(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm = n * rng.uniform(0.005, 0.03)
    peak = _log_uniform(rng, 1e-4, 5e-4)
    lr = np.where(
        t < warm, peak * t / warm, peak * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * (t - warm) / (n - warm))))
    )
    start = math.log(float(rng.choice([32_000, 50_257])))
    level = _power(
        np.cumsum(lr / peak),
        start,
        rng.uniform(2.0, 3.2),
        n / _log_uniform(rng, 100, 1000),
        rng.uniform(0.5, 0.8),
    )
    x = level * _t_noise(n, rng, rng.uniform(0.005, 0.02), rng.uniform(3, 8))
    return {"loss": x.astype(np.float16).astype(np.float64), LR: lr}


def fp16_logged_lm(n: int, rng: np.random.Generator) -> np.ndarray:
    """A GPT-2-size LM trained in pure fp16 (the fairseq / Megatron `--fp16` recipes of 2019-2021)
    whose logged loss is the fp16 tensor's `.item()`: 10 bits of mantissa, so between 2 and 4 it
    takes steps of 1/512 and between 4 and 8 steps of 1/256, coarser than or as coarse as the
    batch noise (0.5-2%, Student-t of 3-8 degrees); warm-up over 0.5-3%, a cosine to 10% of
    1e-4-5e-4, the loss from ln V to 2.0-3.2 along the rate's area."""
    return _fp16_logged_lm(n, rng)["loss"]


def _keras_exponential_staircase(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    per = int(rng.integers(300, 5001))
    rate = float(rng.uniform(0.9, 0.99))
    lr0 = float(rng.choice([1e-3, 1e-2, 0.1]))
    lr = lr0 * rate ** np.floor(t / per)
    rel = lr / lr0
    start = _ce_start(rng)
    floor = start * rng.uniform(0.02, 0.2)
    base = _power(np.cumsum(rel), start, floor, n / _log_uniform(rng, 20, 200), rng.uniform(0.6, 1.2))
    level = base * (1 + rng.uniform(0.1, 0.5) * _lag(rel, n * rng.uniform(0.001, 0.005), 1.0))
    x = level * _t_noise(n, rng, rng.uniform(0.04, 0.12), rng.uniform(3, 5))
    return {"loss": _f32(x), LR: lr}


def keras_exponential_staircase(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Keras image classifier with `ExponentialDecay(initial_learning_rate, decay_steps=300-5,000,
    decay_rate=0.9-0.99, staircase=True)` (the TensorFlow tutorials' schedule; 1e-3, 1e-2 or
    0.1): the rate falls by a few % at each of 20-300 stair steps, so the loss (from ln C along
    the rate's area to 2-20% of it, held up by 10-50% by the higher rates early) falls in many
    small stairs that the batch noise hides (4-12%, Student-t of 3-5 degrees: heavy tails);
    float32."""
    return _keras_exponential_staircase(n, rng)["loss"]


def skill_quanta(n: int, rng: np.random.Generator) -> np.ndarray:
    """A small transformer trained on a multitask algorithmic mixture (sparse parities of
    different sizes, modular arithmetic, copying: the "quantization model of neural scaling",
    Michaud et al. 2023): each of 2-5 skills sits unlearned (at its share of ln C) until a
    time drawn log-uniformly over 0.5-70% of the run, when its loss drops within 0.2-3% of the
    run to 2-10% of it: the total loss shows plateaus then drops of different depths (each
    skill's share: a Dirichlet), at different places; log-normal batch noise of 2-6%."""
    t = np.arange(n, dtype=np.float64)
    skills = int(rng.integers(2, 6))
    shares = rng.dirichlet(np.ones(skills) * 2)
    start = math.log(float(rng.choice([2, 10, 97, 113])))
    level = np.zeros(n)
    for w in shares:
        at = n * _log_uniform(rng, 0.005, 0.7)
        width = n * _log_uniform(rng, 0.002, 0.03)
        rest = rng.uniform(0.02, 0.1)
        level += w * start * (rest + (1 - rest) / (1 + np.exp(np.minimum((t - at) / (width / 8), 700))))
    return level * _noise(n, rng, rng.uniform(0.02, 0.06))


def autoencoder_floor(n: int, rng: np.random.Generator) -> np.ndarray:
    """A convolutional autoencoder (the Keras / PyTorch MNIST / Fashion-MNIST / CIFAR tutorials,
    `MSELoss`, Adam 1e-3, no schedule) trained for many epochs: the reconstruction error falls
    from 0.1-0.3 to its floor (0.005-0.03) within the first 1-3% of the run and then lies there
    for the rest, falling by only 1-5% more, while the batch noise (5-15%, Student-t of 4-10
    degrees: a batch of hard digits) dominates the trend everywhere after the first few %."""
    t = np.arange(n, dtype=np.float64)
    start = rng.uniform(0.1, 0.3)
    floor = rng.uniform(0.005, 0.03)
    fast = (start - floor) * np.exp(-t / (n * rng.uniform(0.002, 0.008)))
    slow = floor * (1 + rng.uniform(0.01, 0.05) / (1 + t / (n * 0.05)))
    return _f32((fast + slow) * _t_noise(n, rng, rng.uniform(0.05, 0.15), rng.uniform(4, 10)))


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "timm_cosine_cycles": timm_cosine_cycles,
    "darknet_steps": darknet_steps,
    "chronological_windows": chronological_windows,
    "tiny_last_batch": tiny_last_batch,
    "induction_head_bump": induction_head_bump,
    "constant_lr_power": constant_lr_power,
    "nightly_warm_start": nightly_warm_start,
    "token_sum_per_sequence": token_sum_per_sequence,
    "smoothl1_outliers": smoothl1_outliers,
    "mixture_noise_shift": mixture_noise_shift,
    "fp16_logged_lm": fp16_logged_lm,
    "keras_exponential_staircase": keras_exponential_staircase,
    "skill_quanta": skill_quanta,
    "autoencoder_floor": autoencoder_floor,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "timm_cosine_cycles": _timm_cosine_cycles,
    "darknet_steps": _darknet_steps,
    "constant_lr_power": _constant_lr_power,
    "smoothl1_outliers": _smoothl1_outliers,
    "mixture_noise_shift": _mixture_noise_shift,
    "fp16_logged_lm": _fp16_logged_lm,
    "keras_exponential_staircase": _keras_exponential_staircase,
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
def _lm_base(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A healthy LM's loss to break and its noise-free trend: from ln V down a power law to
    1.8-3.0, most of the fall within 1/50-1/500 of the run, batch noise 1-4% (Student-t, 4-8
    degrees)."""
    t = np.arange(n, dtype=np.float64)
    start = math.log(float(rng.choice([32_000, 50_257, 128_256])))
    trend = _power(t, start, rng.uniform(1.8, 3.0), n / _log_uniform(rng, 50, 500), rng.uniform(0.5, 0.9))
    return trend * _t_noise(n, rng, rng.uniform(0.01, 0.04), rng.uniform(4, 8)), trend


def cooldown_inverted(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A warmup-stable-decay run whose cooldown has its sign flipped (a hand-written WSD lambda,
    `1 + (step - decay_start) / decay_steps` where `1 - ...` was meant): over the last 10-25% of
    the run the rate climbs linearly to 2x the stable one instead of falling to 0, so where the
    loss should drop by 5-15% it creeps UP, slowly at first (the optimizer's noise grows with
    the rate), by 3-12% at the end, over 10^4 steps of a 10^5-step run; its batch noise grows by
    up to 1.5x. The onset is the cooldown's first step."""
    x, trend = _lm_base(n, rng)
    t0 = int(n * (1 - rng.uniform(0.1, 0.25)))
    k = np.arange(n - t0, dtype=np.float64) / (n - t0)
    up = rng.uniform(0.03, 0.12) * k ** rng.uniform(1.2, 2.0)
    noise = x[t0:] / trend[t0:]
    x[t0:] = trend[t0:] * (1 + up) * noise ** (1 + 0.5 * k)
    return x, t0


def steplr_per_batch_resume(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """An image classifier resumed at 30-70% of its run by a refactored loop that calls
    `scheduler.step()` of its `MultiStepLR(milestones=[30, 60, 90] epochs, gamma=0.1)` once per
    batch instead of once per epoch: the milestones pass within the first 90 batches, so from
    ~90 steps after the resume the rate is 1e-3 of what it should be, and the loss, which a
    healthy run would take down another 10-40%, stops falling at its level and stays there,
    flat, with its batch noise (3-10%, skewed) for the rest of the run. The onset is the
    resume."""
    t = np.arange(n, dtype=np.float64)
    chance = _ce_start(rng)
    floor, scale, p = chance * rng.uniform(0.05, 0.2), n / _log_uniform(rng, 5, 30), rng.uniform(0.5, 0.9)
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.maximum(t - t0, 0)
    area = (
        np.minimum(t, t0) + np.minimum(k, 30) + 0.1 * np.clip(k - 30, 0, 30) + 0.01 * np.clip(k - 60, 0, 30)
    )
    area += 1e-3 * np.maximum(k - 90, 0)
    return _power(area, chance, floor, scale, p) * _gamma(n, rng, rng.uniform(0.03, 0.1)), t0


def scaler_overflow_cycles(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A hand-written fp16 loss scaler (a port of apex's `DynamicLossScaler` that halves the scale
    on overflow but forgets to skip the step: the inf/NaN gradients are `nan_to_num`-ed to +-65504
    and applied) on a model trained in fp16: every `scale_window` (1,000-4,000 steps) the scale
    doubles until the gradients overflow again, and the step taken with the clamped gradients throws
    the model off: the loss jumps by 1.2-1.6x within 1-5 steps and recovers over 100-1,000 steps,
    but each time Adam's second moments hold more of the garbage, so each jump is 1.1-1.25x the one
    before, each recovery 1.05-1.15x slower and only 96-99% complete, until the loss reaches ln V
    and stays there (the model diverged). The onset is the first overflow (after 10-40% of the run)."""
    x, trend = _lm_base(n, rng)
    vocab = float(trend[0])
    window = int(rng.integers(1000, 4001))
    t0 = int(n * rng.uniform(0.1, 0.4))
    jump, tau, rise = rng.uniform(0.2, 0.6), rng.uniform(100, 1000), rng.uniform(1, 5)
    g_jump, g_tau, left = rng.uniform(1.1, 1.25), rng.uniform(1.05, 1.15), rng.uniform(0.01, 0.04)
    mult, spike = np.ones(n), np.zeros(n)
    at = t0
    while at < n:
        k = np.arange(n - at, dtype=np.float64)
        spike[at:] += jump * _transient(k, rise, tau)
        mult[at + int(rise) :] *= 1 + left * jump
        jump, tau = jump * g_jump, tau * g_tau
        at += window
    return np.minimum(trend * mult * (1 + spike), vocab) * x / trend, t0


def completion_mask_all_ignored(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Supervised fine-tuning with TRL's `DataCollatorForCompletionOnlyLM` (only the answer
    tokens are trained on) whose response template stops matching at 30-70% of the run (a new
    data shard in another chat template, or the template tokenized differently in context): the
    collator sets every label of such an example to -100, and the script's masked mean,
    `(ce * mask).sum() / mask.sum().clamp(min=1)`, is exactly 0 for a batch with no label
    left. On half the seeds no example of the new shard matches: the loss is exactly 0.0 from
    the onset on; on the others 2-20% still match, so a batch of 4-16 examples logs 0.0 unless
    one of its examples matched, then the mean over those (the healthy level, noisier)."""
    t = np.arange(n, dtype=np.float64)
    trend = _power(t, rng.uniform(1.5, 2.5), rng.uniform(0.6, 1.2), n / _log_uniform(rng, 20, 200), 0.8)
    x = trend * _noise(n, rng, rng.uniform(0.03, 0.08))
    t0 = int(n * rng.uniform(0.3, 0.7))
    if rng.random() < 0.5:
        x[t0:] = 0.0
        return x, t0
    p = rng.uniform(0.02, 0.2)
    batch = int(rng.choice([4, 8, 16]))
    matched = rng.binomial(batch, p, n - t0)
    sd = np.where(matched > 0, rng.uniform(0.05, 0.15) / np.sqrt(np.maximum(matched, 1)), 0.0)
    x[t0:] = np.where(matched > 0, trend[t0:] * _noise(n - t0, rng, sd), 0.0)
    return x, t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "cooldown_inverted": cooldown_inverted,
    "steplr_per_batch_resume": steplr_per_batch_resume,
    "scaler_overflow_cycles": scaler_overflow_cycles,
    "completion_mask_all_ignored": completion_mask_all_ignored,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
