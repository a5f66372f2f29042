"""A nineteenth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind19`.

    .venv/bin/python benchmarks/long_runs.py --blind19 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of a training job look over 10^5-10^6 logged values (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is research codebases of fields the earlier sets
lack, each with the quirk its recipe gives the logged loss: a video network's multigrid
schedule (a 3-step short cycle of input shapes inside a long cycle with the rate scaled to the
batch), a motion forecaster's trajectory NLL with late halvings, a rainfall-runoff LSTM's NSE
loss with its flood batches and per-basin validation, scVI's ELBO whose KL weight climbs in
per-epoch stairs and never reaches 1, Co-teaching's mean over the small-loss samples kept,
schedule-free AdamW logged at its interpolated point with nanoGPT's evaluation passes,
a neural audio codec's generator total under quantizer dropout, attention-MIL over whole-slide
images one bag per step, MBPO's dynamics ensemble refit on its growing buffer with a loss
below zero, ACT's imitation loss with its rollout evaluations, learned image compression's
rate-distortion loss resumed from epoch checkpoints, a listwise ranking loss that can fall only
a few percent, certified training's epsilon ramp that makes the loss rise for half the run,
and MeshGraphNets' untrained first 1,000 steps and data read in file order. None of them is
one of `long_runs.KINDS`, `long_blind.KINDS`, ... `long_blind18.KINDS` (nor a bug of their
`BUGS`). They are to be measured once, on the held-out seeds (`SEEDS`), and not tuned on: a
rule changed after looking at them makes them a tuning set.

The interface is `long_blind18`'s: a kind is `(n, rng) -> loss`, each value one logged point;
`series(kind, n, rng)` gives all that a run records: the loss and, where the kind has them, the
learning rate (`LR`, as the PyTorch hook records it, in real units, at each logged point: the
optimizer's group rate, which for schedule-free AdamW is not the warmed-up rate it applies)
and the mode of each step (`MODE`, as `long_blind.eval_pauses` records it: `TRAIN` and `EVAL`
steps save their loss in their mode; `EVAL_UNSAVED` steps are evaluation steps that save no
loss). A bug is `(n, rng) -> (loss, the step its defect begins)`; one bug ends in NaN on most
of its seeds, as such jobs do. Only numpy here: the series can be generated and looked at
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
from long_blind14 import _step_lag  # the fourteenth's
from long_blind17 import _area  # the seventeenth's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE: the mode of each step
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 19000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _spikes(n: int, rng: np.random.Generator, p: float, scale: float, alpha: float) -> np.ndarray:
    """A heavy-tailed batch factor: 1, or on a fraction `p` of the batches 1 + `scale` x a
    Pareto(`alpha`) draw (a flood day, a scene with an unexpected turn, a contact)."""
    hit = rng.random(n) < p
    return 1 + hit * scale * rng.pareto(alpha, n)


def _smoothed_ramp(u: np.ndarray, mid: float = 0.25, beta: float = 4.0) -> np.ndarray:
    """auto_LiRPA's `SmoothedScheduler` on [0, 1]: a power `beta` up to `mid`, then linear to 1,
    the two joined with the same slope."""
    c = 1 / (mid**beta + beta * mid ** (beta - 1) * (1 - mid))
    return np.where(u < mid, c * u**beta, c * mid**beta + c * beta * mid ** (beta - 1) * (u - mid))


def _bounds(n: int, every: int, v: int, first_eval: bool = False) -> tuple[np.ndarray, int]:
    """The modes of a run that trains `every` steps, then runs `v` evaluation steps, and so on
    to `n` steps (an evaluation first too, with `first_eval`); and how many steps train."""
    mode = np.full(n, TRAIN)
    s = 0 if first_eval else every
    while s < n:
        mode[s : s + v] = EVAL
        s += v + every
    return mode, int((mode == TRAIN).sum())


# the healthy kinds ----------------------------------------------------------------------------
def _multigrid(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    spans = np.array([94.0, 60.0, 42.0]) * rng.uniform(0.85, 1.15, 3)  # SOLVER.STEPS' spans
    ft = rng.uniform(0.04, 0.1)  # the last phase at the base shape: its share of the iterations
    edges = np.r_[0.0, np.cumsum(spans) / spans.sum()] * (1 - ft) * n
    stage = np.minimum(np.searchsorted(edges, t, side="right") - 1, 3)  # 3: the last phase
    s3 = np.minimum(stage, 2)
    u = (t - edges[s3]) / (edges[s3 + 1] - edges[s3])
    long = np.where(stage < 3, np.minimum((u * 4).astype(int), 3), 3)  # equal iterations each
    t_factor = np.array([0.25, 0.5, 0.5, 1.0])[long]  # LONG_CYCLE_FACTORS' frames
    s_factor = np.array([0.5**0.5, 0.5**0.5, 1.0, 1.0])[long]  # and crop sides
    short = t.astype(np.int64) % 3  # SHORT_CYCLE_FACTORS 0.5, 0.5 ** 0.5, then the base crop
    side = np.where(short == 0, 0.5, np.where(short == 1, 0.5**0.5, s_factor))
    side = np.where(stage < 3, side, 1.0)
    batch = np.round(1 / (t_factor * side**2))  # clips per iteration, x the default batch
    gamma = np.where(stage < 3, 0.1**s3, np.where(t < (edges[3] + n) / 2, 0.01, 0.001))
    rate = 0.1 * gamma * np.array([8.0, 4.0, 2.0, 1.0])[long]  # linear scaling with the long shape
    area = np.cumsum(rate / 0.1)  # in iterations at the default batch
    start = math.log(400) * rng.uniform(0.99, 1.01)
    floor = rng.uniform(0.7, 1.4)  # dropout 0.5 and jittered crops keep the train loss up
    level = _power(area, start, floor, n * rng.uniform(0.01, 0.05), rng.uniform(0.6, 0.9))
    ball = _lag(gamma, n * rng.uniform(0.003, 0.01), 1.0)  # lr / batch: only the steps move it
    level = level * (1 + rng.uniform(0.15, 0.4) * ball)
    pen = rng.uniform(0.03, 0.08) * np.log2(1 / t_factor) + rng.uniform(0.05, 0.12) * np.log2(1 / side)
    learned = np.clip((start - level) / (start - floor), 0, 1)
    loss = level * (1 + pen * learned) * _noise(n, rng, rng.uniform(0.04, 0.08) / np.sqrt(batch))
    return {"loss": _f32(loss), LR: rate}


def multigrid_video_cycles(n: int, rng: np.random.Generator) -> np.ndarray:
    """A SlowFast / I3D video classifier trained on Kinetics-400 with the multigrid method (Wu
    et al. 2020, "A multigrid method for efficiently training video models";
    facebookresearch/SlowFast `MULTIGRID.LONG_CYCLE` and `SHORT_CYCLE`, its `multigrid.py`):
    the stepwise schedule (SGD at 0.1, x0.1 at each of 3 steps, their spans 94:60:42 +-15%) is
    split, in every stage, into a long cycle of 4 input shapes of equal iterations (frames x
    crop side 1/4 x 0.71, 1/2 x 0.71, 1/2 x 1, then the base), each with 8x, 4x, 2x, 1x the
    clips per batch and the rate scaled with it (recorded: 0.8, 0.4, 0.2, 0.1 in the first
    stage); inside, the short cycle changes the crop every iteration, 1/2, 0.71, then the long
    shape's, with up to 4x and 2x its clips; a last 4-10% of the iterations at the base shape
    (half at the last stage's rate, half at a tenth of it). The loss falls from ln 400 along the
    area of the scaled rate to 0.7-1.4 (dropout 0.5 on the head), held up 15-40% by the step's
    rate (lagging 0.3-1% of the run); coarser inputs cost 3-8% per halving of the frames and
    5-12% per halving of the crop side, as much more as the model has learned: a 3-step
    pattern inside a 4-level staircase in every stage; noise 4-8% / sqrt(clips); float32."""
    return _multigrid(n, rng)["loss"]


def _mtr(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    per = n / 30
    cuts = [22, 24, 26, 28]
    rate = 1e-4 * 0.5 ** sum((t >= c * per).astype(float) for c in cuts)
    area = _area(rate)
    end = rng.uniform(20, 150)
    mid = end * rng.uniform(2, 4)
    start = _log_uniform(rng, 500, 3000)
    level = (start - mid) * np.exp(-t / (n * rng.uniform(0.002, 0.01)))
    level = level + _power(area, mid, end, n * rng.uniform(0.01, 0.05), rng.uniform(0.6, 1.0))
    lagged = _step_lag(t, [c * per for c in cuts], [0.5] * 4, per * rng.uniform(0.2, 0.5))
    level = level * (1 - rng.uniform(0.03, 0.08) * (1 - lagged) / (1 - 0.5**4))
    tail = _spikes(n, rng, rng.uniform(0.005, 0.02), rng.uniform(0.5, 1.5), rng.uniform(2.0, 3.0))
    loss = level * _gamma(n, rng, rng.uniform(0.08, 0.15)) * tail
    return {"loss": _f32(loss), LR: rate}


def mtr_motion_nll(n: int, rng: np.random.Generator) -> np.ndarray:
    """Motion forecasting on the Waymo Open Motion Dataset with the Motion Transformer (Shi et
    al. 2022, sshaoshuai/MTR: AdamW at 1e-4 for 30 epochs, halved at epochs 22, 24, 26 and 28,
    recorded; batches of scenes, several agents each): the logged `loss` sums, over its
    decoder layers, the winning intention mode's bivariate-Gaussian negative log-likelihood of
    the 8-s future (summed over its 80 steps, the log-stds clipped below), that mode's
    classification and the dense future-prediction loss. The untrained outputs put it at
    500-3,000; it falls within 0.2-1% of the run to 2-4x its end, then along the rate's area to
    20-150; the four late halvings take 3-8% off in steps (each lagging 0.2-0.5 epoch). A
    batch's scenes give skewed noise of 8-15%, and 0.5-2% of the batches hold an agent whose
    future no intention point matched (a U-turn, a sudden stop): 1.5-5x and more (Pareto
    tails); float32."""
    return _mtr(n, rng)["loss"]


def _hydrology(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    epochs = 30
    every = int(rng.choice([1, 3, 5]))  # validate_every
    passes = epochs // every
    v = min(531, max(2, int(0.1 * n / passes)))  # basins validated per pass
    m = n - passes * v
    bounds = np.round(np.arange(epochs + 1) * m / epochs).astype(int)
    k = np.arange(m, dtype=np.float64)
    epoch = np.minimum(np.searchsorted(bounds, k, side="right") - 1, epochs - 1)
    rate = np.where(epoch < 10, 1e-3, np.where(epoch < 25, 5e-4, 1e-4))
    area = _area(rate)
    start, floor = rng.uniform(0.6, 1.2), rng.uniform(0.06, 0.2)
    level = _power(area, start, floor, m * rng.uniform(0.005, 0.03), rng.uniform(0.6, 0.9))
    tail = _spikes(m, rng, rng.uniform(0.01, 0.04), rng.uniform(0.3, 1.0), rng.uniform(1.5, 2.5))
    train = level * _noise(m, rng, rng.uniform(0.15, 0.3)) * tail
    hard = np.exp(rng.normal(0.0, rng.uniform(0.6, 1.0), v))  # each basin's own NSE* loss
    hard = hard / hard.mean()
    gap, late = rng.uniform(1.1, 1.4), rng.uniform(0.0, 0.1)
    loss, lr, mode = [], [], []
    for e in range(epochs):
        lo, hi = bounds[e], bounds[e + 1]
        loss.append(train[lo:hi])
        lr.append(rate[lo:hi])
        mode.append(np.full(hi - lo, TRAIN))
        if (e + 1) % every == 0:
            val = level[hi - 1] * gap * (1 + late * (e + 1) / epochs)
            loss.append(val * hard * _noise(v, rng, rng.uniform(0.03, 0.08)))
            lr.append(np.full(v, rate[hi - 1]))
            mode.append(np.full(v, EVAL))
    return {
        "loss": _f32(np.concatenate(loss)[:n]),
        LR: np.concatenate(lr)[:n],
        MODE: np.concatenate(mode)[:n],
    }


def hydrology_lstm_nse(n: int, rng: np.random.Generator) -> np.ndarray:
    """A rainfall-runoff LSTM trained on the 531 CAMELS-US basins with NeuralHydrology
    (Kratzert et al. 2019, "Towards learning universal, regional, and local hydrological
    behaviors via machine learning applied to large-sample datasets"; neuralhydrology's
    `cudalstm` example: 365-day input sequences, batches of 256, 30 epochs, Adam with the
    `learning_rate` dict {0: 1e-3, 10: 5e-4, 25: 1e-4}, recorded) on the NSE* loss, each
    sample's squared error divided by (its basin's discharge std + 0.1)^2. It falls from
    0.6-1.2 along the rate's area to 0.06-0.2; log-normal batch noise 15-30%, and on 1-4% of the
    batches a flood peak in a quiet basin multiplies it (Pareto tails, 1.3-2x and far more).
    Every 1, 3 or 5 epochs (`validate_every`) a validation pass runs each basin's validation
    period once, in the same basin order every time (EVAL steps that save their loss, up to 531
    of them, at most 10% of the run): the basins' losses spread log-normally (sd 0.6-1.0 around
    a mean 10-40% above the training level, up to 10% more by the end; 3-8% apart from one pass
    to the next beyond the model's progress); float32."""
    return _hydrology(n, rng)["loss"]


def _scvi(n: int, rng: np.random.Generator, log_input: bool = False) -> tuple[dict[str, np.ndarray], int]:
    t = np.arange(n, dtype=np.float64)
    cells = int(_log_uniform(rng, 8_000, 300_000))
    epochs = max(1, min(int(min(round(20_000 / cells * 400), 400)), n // 20))  # scvi's heuristic
    last = int(0.9 * cells) % 128  # drop_last=False: the epoch's last batch, 0-127 cells
    per = n / epochs
    epoch = np.minimum(np.floor(t / per), epochs - 1)
    ends = np.r_[np.diff(epoch) > 0, True]  # the last step of each epoch
    weight = np.minimum(epoch / 400, 1.0)  # n_epochs_kl_warmup=400: set per epoch
    genes = float(rng.choice([1200, 2000, 4000]))
    rec = genes * rng.uniform(0.15, 0.6)  # the ZINB NLL summed over the genes, per cell
    rec = rec * (
        1 + rng.uniform(0.5, 2.0) / (1 + t / (n * rng.uniform(0.001, 0.01))) ** rng.uniform(0.6, 1.0)
    )
    kl = rng.uniform(10, 40) * (1 - np.exp(-t / (per * rng.uniform(0.5, 3))))
    kl = kl * (1 - rng.uniform(0.2, 0.5) * weight)
    cv = np.full(n, rng.uniform(0.02, 0.05))  # library sizes and cell types over 128 cells
    if last > 0:
        cv[ends] *= math.sqrt(128 / last)
    onset = n
    if log_input:  # from a resumed epoch on, adata.X holds log1p-normalized values
        e0 = int(epochs * rng.uniform(0.3, 0.7))
        onset = min(int(np.argmax(epoch >= e0)) if e0 > 0 else 0, n - 1)
        k = np.maximum(t - onset, 0)
        after = t >= onset
        weight = np.where(after, np.minimum((epoch - e0) / 400, 1.0), weight)  # a new train()
        ratio, jump = rng.uniform(0.05, 0.25), rng.uniform(0.7, 2.0)
        tau = per * rng.uniform(0.5, 2.0)
        rec = np.where(after, rec * (ratio + (jump - ratio) * np.exp(-k / tau)), rec)
        kl = np.where(after, kl * (1 + rng.uniform(0.5, 2.0) * np.exp(-k / tau)), kl)
        cv = np.where(after, cv * rng.uniform(0.3, 0.6), cv)
    loss = rec * _gamma(n, rng, cv) + weight * kl * _gamma(n, rng, 0.1)
    return {"loss": _f32(loss), LR: np.full(n, 1e-3)}, onset


def _scvi_elbo(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _scvi(n, rng)[0]


def scvi_kl_staircase(n: int, rng: np.random.Generator) -> np.ndarray:
    """scVI on a single-cell RNA-seq atlas of 8,000-300,000 cells (Lopez et al. 2018,
    scverse/scvi-tools `SCVI.train()` with its defaults: `max_epochs` = min(20,000 / cells x
    400, 400), 90% of the cells for training, batches of 128, Adam at 1e-3, recorded), the
    logged `train_loss_step`: the mean over the batch's cells of the ZINB reconstruction NLL
    summed over 1,200-4,000 highly variable genes (15-60% of the genes' count, in nats) plus the
    KL weight times the latent KL. `n_epochs_kl_warmup=400` sets the weight to epoch / 400 once
    per epoch, so it climbs in stairs and, with fewer than 400 epochs, ends below 1 (scvi-tools
    warns of it); the reconstruction falls from 1.5-3x its end along a power law (its scale
    0.1-1% of the run); the KL rises to 10-40 nats within 0.5-3 epochs and is pressed 20-50%
    down as the weight grows. Noise 2-5% (library sizes, cell types), skewed; the data loader
    keeps each epoch's last, smaller batch (`drop_last=False`: 0.9 x cells mod 128 cells), its
    noise larger by sqrt(128 / its size); float32."""
    return _scvi_elbo(n, rng)["loss"]


def _kept(
    clean: float,
    noisy: float,
    eps: float,
    forget: float,
    view: float,
    largest: bool,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """The mean and spread of the per-sample losses Co-teaching's update keeps: of clean samples
    (mean `clean`) and a fraction `eps` of mislabelled ones (mean `noisy`), the 1 - `forget`
    whose loss in the peer network's view (off by a log-normal `view`) is smallest (`largest`:
    largest)."""
    m = 4000
    bad = int(m * eps)
    losses = np.r_[clean * _gamma(m - bad, rng, 1.3), noisy * _gamma(bad, rng, 0.5)]
    peer = losses * np.exp(view * rng.standard_normal(m))
    keep = max(1, int(round(m * (1 - forget))))
    order = np.argsort(peer)
    sel = losses[order[-keep:] if largest else order[:keep]]
    return float(sel.mean()), float(sel.std())


def _coteach(n: int, rng: np.random.Generator, topk: bool = False) -> tuple[dict[str, np.ndarray], int]:
    t = np.arange(n, dtype=np.float64)
    epochs = 200
    per = n / epochs
    epoch = np.minimum(np.floor(t / per), epochs - 1)
    classes = 100 if rng.random() < 0.4 else 10
    pair = rng.random() < 0.3
    eps = 0.45 if pair else float(rng.choice([0.2, 0.5]))
    rate = 1e-3 * np.where(epoch < 80, 1.0, (200 - epoch) / 120)  # alpha_plan
    area = np.cumsum(rate / 1e-3) / per  # in epochs at the full rate
    start = math.log(classes)
    c_end = rng.uniform(0.02, 0.1) if classes == 10 else rng.uniform(0.2, 0.6)
    c_scale, c_p = rng.uniform(1, 5), rng.uniform(0.7, 1.2)
    peak = rng.uniform(1.5, 3.0) if pair else start + rng.uniform(1.0, 3.0)
    memo, memo_tau = rng.uniform(0.0, 0.4), rng.uniform(50, 150)
    view = rng.uniform(0.3, 0.8)
    e0 = int(epochs * rng.uniform(0.3, 0.7)) if topk else epochs
    onset = min(int(round(e0 * per)), n - 1) if topk else n
    fill, rise, fast = rng.uniform(0.1, 0.3), rng.uniform(0.5, 3.0), rng.uniform(5, 20)

    def means(a: float, a0: float, after: bool) -> tuple[float, float]:
        clean = c_end + (start - c_end) / (1 + a / c_scale) ** c_p
        noisy = start + (peak - start) * (1 - math.exp(-a / 2)) - memo * peak * (1 - math.exp(-a / memo_tau))
        if after:  # trained on the large-loss samples: the wrong labels memorized, the rest confused
            noisy *= fill + (1 - fill) * math.exp(-(a - a0) / fast)
            clean *= 1 + rise * (1 - math.exp(-(a - a0) / fast))
        return clean, noisy

    ends = np.minimum(np.round(np.arange(epochs + 1) * per).astype(int), n)
    level, sd = np.empty(n), np.empty(n)
    a0 = float(area[min(ends[e0], n - 1)]) if topk else 0.0
    for e in range(epochs):
        lo, hi = ends[e], ends[e + 1]
        if hi <= lo:
            continue
        forget = eps * min(e / 9, 1.0)  # rate_schedule: linspace(0, eps, num_gradual=10)
        vals = []
        for i in (lo, hi - 1):
            clean, noisy = means(float(area[i]), a0, e >= e0)
            vals.append(_kept(clean, noisy, eps, forget, view, e >= e0, rng))
        w = np.linspace(0, 1, hi - lo)
        level[lo:hi] = vals[0][0] + (vals[1][0] - vals[0][0]) * w
        kept = 128 * (1 - forget)
        sd[lo:hi] = (vals[0][1] + (vals[1][1] - vals[0][1]) * w) / math.sqrt(kept)
    loss = level * _gamma(n, rng, np.clip(sd / level, 0.01, 1.0))
    return {"loss": _f32(loss), LR: rate}, onset


def _coteaching(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _coteach(n, rng)[0]


def coteaching_small_loss(n: int, rng: np.random.Generator) -> np.ndarray:
    """Co-teaching on CIFAR-10 or CIFAR-100 with noisy labels (Han et al. 2018,
    bhanML/Co-teaching: symmetric noise of 20% or 50%, or 45% pair flips; two networks, batches
    of 128, 200 epochs, Adam at 1e-3 held to epoch 80 and then decayed linearly to 0, recorded;
    beta1 0.9 then 0.1): each network's update uses only the 1 - R(epoch) of the batch whose
    loss is smallest in its PEER's view, R rising per epoch from 0 to the noise rate over the
    first 10 epochs (`rate_schedule`, `num_gradual=10`), and the logged loss is that update's
    mean over the kept samples. Clean samples' losses fall from ln C to 0.02-0.1 (CIFAR-10) or
    0.2-0.6 (CIFAR-100) along the rate's area; the mislabelled ones' move to 1.5-3 nats (pair
    flips: the wrong class is a plausible one) or rise 1-3 nats above ln C, and 0-40% of that
    is memorized over the run. The peer sees each loss off by a log-normal 0.3-0.8, so some
    wrong labels are kept. As R climbs the logged mean drops in ten stairs, far below the
    batch's mean loss; noise: the kept samples' spread over sqrt(their count); float32."""
    return _coteaching(n, rng)["loss"]


def _schedule_free(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    every = max(int(n * rng.uniform(0.01, 0.04)), 10)  # eval_interval
    v = min(int(rng.integers(20, 201)), max(1, every // 20))  # eval_iters per split
    mode, m = _bounds(n, every, 2 * v, first_eval=True)
    k = np.arange(m, dtype=np.float64)
    group = float(rng.choice([1e-3, 2e-3, 3e-3]))  # AdamWScheduleFree's lr: the group's value
    warm = m * rng.uniform(0.01, 0.05)  # warmup_steps: applied inside the optimizer
    area = np.cumsum(np.minimum((k + 1) / warm, 1.0))
    start = math.log(50257) * rng.uniform(0.99, 1.01)
    floor = rng.uniform(2.6, 3.3)
    y = _power(area, start, floor, m * rng.uniform(0.002, 0.01), rng.uniform(0.5, 0.8))
    x = y * (1 - rng.uniform(0.015, 0.04) * (1 - np.exp(-k / (m * 0.05))))  # the averaged iterate
    train = y * _noise(m, rng, rng.uniform(0.01, 0.025))
    val_gap = rng.uniform(0.0, 0.015)
    loss = np.empty(n)
    loss[mode == TRAIN] = train
    done = np.cumsum(mode == TRAIN)  # training steps taken before each step, plus its own
    s = 0
    while s < n:
        if mode[s] != EVAL:
            s += 1
            continue
        e = s
        while e < n and mode[e] == EVAL:
            e += 1
        at = x[min(int(done[s]), m - 1)] if done[s] > 0 else start
        half = min(v, e - s)
        loss[s : s + half] = at * _noise(half, rng, 0.02)  # the train split, at x, no dropout
        loss[s + half : e] = at * (1 + val_gap) * _noise(e - s - half, rng, 0.02)  # the val split
        s = e
    return {"loss": _f32(loss), LR: np.full(n, group), MODE: mode}


def schedule_free_lm_evals(n: int, rng: np.random.Generator) -> np.ndarray:
    """A GPT-2-small language model trained on OpenWebText with nanoGPT's loop and schedule-free
    AdamW (Defazio et al. 2024, "The road less scheduled"; facebookresearch/schedule_free
    `AdamWScheduleFree(lr, warmup_steps)`, `optimizer.train()` / `optimizer.eval()` around each
    evaluation): no decay, only a warm-up over 1-5% of the run done INSIDE the optimizer, so the
    recorded group rate (1e-3, 2e-3 or 3e-3) is constant. The training loss is taken at the
    interpolated point y: from ln 50,257 along a power law in the warmed-up steps to 2.6-3.3,
    with no drop at the end; 1-2.5% noise. nanoGPT's `estimate_loss` runs every 1-4% of the run
    and at step 0, at the averaged point x (1.5-4% below y once the average has formed):
    `eval_iters` (20-200, at most 5% of the interval each) batches of the TRAIN split, then as
    many of the validation split, 0-1.5% above, all EVAL steps that save their loss; float32."""
    return _schedule_free(n, rng)["loss"]


def _dac(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    iters = int(rng.choice([250_000, 400_000]))
    every = max(int(n * 1000 / iters), 10)  # valid_freq: 1,000 iterations
    mode, m = _bounds(n, every, 3)  # 250 validation excerpts in batches of 100
    mode[mode == EVAL] = EVAL_UNSAVED
    k = np.arange(m, dtype=np.float64)
    rate = 1e-4 * 0.999996 ** (k * iters / m)  # ExponentialLR per iteration
    mel = _power(
        k, rng.uniform(3, 5), rng.uniform(0.8, 1.3), m * rng.uniform(0.005, 0.03), rng.uniform(0.5, 0.9)
    )
    feat = rng.uniform(1, 4) * (1 - np.exp(-k / (m * rng.uniform(0.002, 0.01))))
    feat = feat * (1 - rng.uniform(0.2, 0.4) * (1 - 1 / (1 + k / (m * 0.1))))
    g_end = rng.uniform(0.3, 0.6)
    gen = 8 * (g_end + (1 - g_end) * np.exp(-k / (m * rng.uniform(0.002, 0.01))))
    gen = gen * np.exp(rng.uniform(0.05, 0.15) * _slow_walk(m, rng, m * rng.uniform(0.005, 0.02)))
    c_end = rng.uniform(0.2, 0.8)
    vq = c_end + (rng.uniform(1, 3) - c_end) * np.exp(-k / (m * rng.uniform(0.01, 0.05)))
    train = (
        15 * mel * _gamma(m, rng, rng.uniform(0.03, 0.07))
        + 2 * feat * _gamma(m, rng, rng.uniform(0.08, 0.15))
        + gen * _gamma(m, rng, rng.uniform(0.05, 0.12))
        + 1.25 * vq * _gamma(m, rng, rng.uniform(0.05, 0.1))
    )
    loss, lr = np.empty(n), np.empty(n)
    done = np.clip(np.cumsum(mode == TRAIN) - 1, 0, m - 1)
    loss[mode == TRAIN], lr[mode == TRAIN] = train, rate
    loss[mode != TRAIN] = 15 * mel[done[mode != TRAIN]]  # never saved
    lr[mode != TRAIN] = rate[done[mode != TRAIN]]
    return {"loss": _f32(loss), LR: lr, MODE: mode}


def dac_codec_generator(n: int, rng: np.random.Generator) -> np.ndarray:
    """The generator of the Descript Audio Codec (Kumar et al. 2023, "High-fidelity audio
    compression with improved RVQGAN"; descriptinc/descript-audio-codec `conf/base.yml`: 250k or
    400k iterations of 72 excerpts of 0.38 s from speech, music and general-audio folders, AdamW
    at 1e-4 with `ExponentialLR(0.999996)` per iteration, recorded; 9 codebooks with
    `quantizer_dropout` 1.0, each excerpt coded with a random number of them), its logged total
    the `lambdas`-weighted sum: 15 x the multi-scale mel L1 (from 3-5 along a power law to
    0.8-1.3, noise 3-7%: the batch's mix of sources and codebook counts), 2 x the
    feature-matching loss (growing from 0 to 1-4 within 0.2-1% of the run as the discriminators
    learn, then easing 20-40%), the adversarial loss of 8 discriminators (5 periods, 3
    multi-band STFTs: from 8 to 2.4-4.8, wandering 5-15% as the game goes) and 1.25 x the
    codebook and commitment MSE (1-3 down to 0.2-0.8). Every 1,000 iterations a validation pass
    of 3 batches computes reconstruction metrics only (EVAL steps that save no loss); float32."""
    return _dac(n, rng)["loss"]


def _clam(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    epochs = max(1, min(int(rng.integers(70, 201)), n // 60))  # stopped early at 70-200
    size = -(-n // epochs)
    v = max(2, int(size * rng.uniform(0.1, 0.15)))
    s = size - v
    classes = int(rng.choice([2, 3]))
    sigma = rng.uniform(1.5, 3.0)
    z_train, z_val = rng.standard_normal(s), rng.standard_normal(v) * rng.uniform(1.0, 1.3)
    mu_end, e0 = rng.uniform(4, 8), rng.uniform(2, 10)
    mv_end, e1 = rng.uniform(1.5, 3.5), rng.uniform(5, 20)
    drift, e_min = rng.uniform(0.005, 0.02), rng.uniform(20, 60)
    dropout = rng.uniform(0.2, 0.5)
    i0, i_end, e2 = rng.uniform(0.8, 1.2), rng.uniform(0.05, 0.3), rng.uniform(3, 15)
    i_cv = rng.uniform(0.3, 0.6)

    def ce(margin: np.ndarray) -> np.ndarray:
        return np.logaddexp(0.0, math.log(classes - 1) - margin)

    loss, mode = [], []
    for e in range(epochs):
        ep = e + np.arange(s) / s
        mu = mu_end * (1 - 1 / (1 + ep / e0) ** 0.8)
        slides = rng.integers(0, s, s)  # WeightedRandomSampler: with replacement
        bag = ce(mu + sigma * z_train[slides] + dropout * rng.standard_normal(s))
        inst = (i_end + (i0 - i_end) * np.exp(-ep / e2)) * _gamma(s, rng, i_cv)
        loss.append(0.7 * bag + 0.3 * inst)  # bag_weight 0.7, the smooth-SVM instance loss
        mv = mv_end * (1 - math.exp(-(e + 1) / e1)) - drift * max(0.0, e + 1 - e_min)
        loss.append(ce(mv + sigma * z_val))  # the validation slides, in order: bag CE
        mode += [np.full(s, TRAIN), np.full(v, EVAL)]
    return {
        "loss": _f32(np.concatenate(loss)[:n]),
        LR: np.full(n, 2e-4),
        MODE: np.concatenate(mode)[:n],
    }


def clam_wsi_bags(n: int, rng: np.random.Generator) -> np.ndarray:
    """Weakly supervised whole-slide-image classification with CLAM (Lu et al. 2021,
    "Data-efficient and weakly supervised computational pathology on whole-slide images";
    mahmoodlab/CLAM `main.py --bag_loss ce --inst_loss svm --bag_weight 0.7 --weighted_sample
    --early_stopping`, Adam at 2e-4, recorded): ONE slide per step, a bag of its precomputed
    patch features, 2 or 3 classes, drawn with replacement to balance the classes; the logged
    loss is 0.7 x the slide's cross-entropy + 0.3 x the instance clustering loss on its top
    patches (from about 1 down to 0.05-0.3, skewed 30-60% per slide). Each slide has its own
    difficulty (a margin spread of 1.5-3 around the mean margin, which grows with the epochs
    to 4-8 as the training slides are fitted; dropout adds 0.2-0.5): most values near 0, the
    hard slides' several nats, so the series is a floor with a forest of spikes. After each
    epoch the validation slides (10-15%) are scored in the same order (EVAL steps that save the
    bag cross-entropy), their margin growing to 1.5-3.5 and drifting back down slowly after
    epoch 20-60; the run is stopped early at epoch 70-200; float32."""
    return _clam(n, rng)["loss"]


def _mbpo(n: int, rng: np.random.Generator, unbounded: bool = False) -> tuple[dict[str, np.ndarray], int]:
    out = int(rng.choice([12, 18, 28]))  # the state dimensions and the reward
    first = int(rng.integers(20, 80))  # epochs of the first fit, from scratch
    extra = rng.uniform(1, 6)  # later fits: 5 epochs without improvement, and a few more
    v_end, s_v = -rng.uniform(3, 6), _log_uniform(rng, 2e3, 2e4)
    m0, cv = rng.uniform(2, 5), rng.uniform(0.1, 0.25)
    p_spike = rng.uniform(0.005, 0.02)
    reg0 = 0.01 * out * 10.5  # 0.01 (sum max_logvar - sum min_logvar), from 0.5 and -10
    reg_end = reg0 * rng.uniform(0.4, 0.7)
    h_scale, bump, over = rng.uniform(0.3, 3.0), rng.uniform(0.05, 0.3), rng.uniform(0.03, 0.1)
    zero = int(rng.integers(1, 5))  # outputs the data make exactly predictable
    rare = rng.random() < 0.5  # and one that is nonzero on a rare transition (a terminal flag)
    at = int(n * rng.uniform(0.3, 0.7)) if unbounded else n
    speed = 85 / (n * rng.uniform(0.1, 0.35))  # nats per step the free log-variances fall
    loss, mode, onset, tg, call = [], [], n, 0, 0
    v_at = 0.0
    total = 0
    while total < n:
        data = 5000 + 250 * call
        hold = min(int(0.2 * data), 5000)
        spe = -(-(data - hold) // 256)
        epochs = first if call == 0 else 5 + int(rng.poisson(extra))
        free = unbounded and total >= at
        if free and onset == n:
            onset = total
        shift = bump * float(_gamma(1, rng, 0.5)[0]) if call > 0 else 0.0
        held = h_scale * float(_noise(1, rng, 0.1)[0])
        for e in range(epochs):
            k = np.arange(e * spe, (e + 1) * spe, dtype=np.float64)
            tt = tg + k
            v = v_end * (1 - 1 / (1 + tt / s_v) ** 0.7)
            if call == 0:
                m = 1 + (m0 - 1) * np.exp(-tt / (s_v * 0.2))
            else:
                m = 1 + shift * np.exp(-k / spe) - over * (1 - np.exp(-k / (3 * spe)))
            reg = reg_end + (reg0 - reg_end) * np.exp(-tt / s_v)
            batch = m * _gamma(spe, rng, cv) * _spikes(spe, rng, p_spike, 1.0, 2.5)
            if free:  # the free log-variances of the exact outputs fall without bound
                if v_at == 0.0:
                    v_at = float(v[0])
                drop = speed * (total + np.arange(spe) - onset)
                v = ((out - zero) * v + zero * (v_at - drop)) / out
                if rare:
                    hit = rng.random(spe) < 0.005
                    batch = batch + hit * np.exp(np.minimum(drop - v_at, 700.0)) / (256 * out)
                dead = (v_at - drop) < -88.7  # exp(-logvar) overflows float32: 0 x inf
                part = 7 * (batch + v) + reg
                part = np.where(dead | (part > 3e38), np.nan, part)
            else:
                part = 7 * (batch + v) + reg
            loss.append(part)
            mode.append(np.full(spe, TRAIN))
            fit = math.exp(float(v_end * (1 - 1 / (1 + (tg + k[-1]) / s_v) ** 0.7)))
            hv = held * fit * (1 + 0.1 * e / epochs)
            if free and np.isnan(part).any():
                hv = math.nan
            loss.append(np.array([hv]))  # the holdout MSE, after each epoch
            mode.append(np.array([EVAL]))
            total += spe + 1
            if total >= n:
                break
        tg += epochs * spe
        call += 1
    loss_all = np.concatenate(loss)[:n]
    if unbounded:
        first_nan = np.flatnonzero(np.isnan(loss_all))
        if len(first_nan):
            loss_all[first_nan[0] :] = np.nan  # NaN weights from then on
    return {"loss": _f32(loss_all), LR: np.full(n, 1e-3), MODE: np.concatenate(mode)[:n]}, min(onset, n - 1)


def _mbpo_model(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _mbpo(n, rng)[0]


def mbpo_model_ensemble(n: int, rng: np.random.Generator) -> np.ndarray:
    """The dynamics model of Model-Based Policy Optimization (Janner et al. 2019, jannerm/mbpo
    and its PyTorch ports: an ensemble of 7 probabilistic networks, Adam at 1e-3, recorded),
    refit every 250 environment steps on everything collected so far (5,000 random steps at
    first), each fit running epochs of batches of 256 over 80% of the buffer until the holdout
    loss has not improved for 5 epochs (20-80 epochs the first time, 5 + a few later), so the
    fits grow longer as the buffer grows. The logged loss is the ensemble's summed Gaussian
    NLL, mean(squared error / variance) + mean(log-variance) per member, plus 0.01 x (sum of
    max_logvar - sum of min_logvar): from about 7 x (2-5) + 1-3 it goes BELOW ZERO as the
    log-variances fall to -3 to -6, to about -13 to -35; the squared-error term of each new fit
    starts 5-30% above its calibrated 1 (fresh data, a new holdout split) and sinks 3-10% below
    it within the fit (overfitting); skewed noise 10-25% and 0.5-2% of
    batches with contacts at 2-5x. After each epoch one EVAL step saves the holdout MSE of the
    mean predictions (raw targets: small and positive); float32."""
    return _mbpo_model(n, rng)["loss"]


def _act(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    every = max(int(n * float(rng.choice([0.1, 0.2]))), 10)  # eval_freq of 100k steps
    v = min(200, max(1, int(n * 0.005)))  # 50 episodes, a query every 100 steps of 400
    mode, m = _bounds(n, every, v)
    mode[mode == EVAL] = EVAL_UNSAVED
    k = np.arange(m, dtype=np.float64)
    l1 = _power(
        k, rng.uniform(0.5, 1.0), rng.uniform(0.02, 0.06), m * rng.uniform(0.002, 0.02), rng.uniform(0.6, 0.9)
    )
    kl = rng.uniform(0.005, 0.03) * (1 - np.exp(-k / (m * rng.uniform(0.002, 0.01))))
    r = rng.uniform(0.1, 0.4)
    kl = kl * (r + (1 - r) * np.exp(-k / (m * rng.uniform(0.05, 0.3))))
    train = l1 * _gamma(m, rng, rng.uniform(0.15, 0.35)) + 10 * kl * _gamma(m, rng, rng.uniform(0.1, 0.25))
    loss = np.empty(n)
    done = np.clip(np.cumsum(mode == TRAIN) - 1, 0, m - 1)
    loss[mode == TRAIN] = train
    loss[mode != TRAIN] = l1[done[mode != TRAIN]]  # never saved
    return {"loss": _f32(loss), LR: np.full(n, 1e-5), MODE: mode}


def act_imitation_chunks(n: int, rng: np.random.Generator) -> np.ndarray:
    """Imitation learning of a bimanual task from 50 demonstrations with ACT, Action Chunking
    with Transformers (Zhao et al. 2023; huggingface/lerobot `policy=act` on ALOHA's sim
    insertion or transfer-cube data: 100k offline steps, batches of 8, AdamW at 1e-5, recorded;
    a CVAE over chunks of 100 future joint positions), the logged loss the L1 of the normalized
    action chunk plus `kl_weight` 10 x the style latent's KL. The L1 falls along a power law from
    0.5-1.0 to 0.02-0.06 and keeps falling (the demonstrations memorized, as with few demos);
    the KL rises to 0.005-0.03 within 0.2-1% of the run as the encoder uses the latent and is then
    squeezed to 10-40% of that; a batch of 8 random frames gives skewed noise of 15-35% (grasps
    and hand-overs are harder than reaching). Every 10% or 20% of the run the policy is rolled
    out in simulation (its forward passes: EVAL steps that save no loss, up to 200); float32."""
    return _act(n, rng)["loss"]


_LAMBDAS = (0.0018, 0.0035, 0.0067, 0.0130, 0.0250, 0.0483, 0.0932, 0.1800)  # CompressAI's qualities


def _compressai(n: int, rng: np.random.Generator, stuck: bool = False) -> tuple[dict[str, np.ndarray], int]:
    t = np.arange(n, dtype=np.float64)
    q = int(rng.integers(1, 9))
    lam = _LAMBDAS[q - 1]
    psnr = 27.0 + (q - 1) * 10 / 7 + rng.uniform(-1, 1)
    d_end = lam * 255**2 * 10 ** (-psnr / 10) * rng.uniform(0.9, 1.3)
    r_end = 0.12 * (lam / 0.0018) ** 0.6 * rng.uniform(0.8, 1.3)  # bits per pixel
    d0, r0 = lam * 255**2 * rng.uniform(0.03, 0.08), rng.uniform(1.0, 4.0)
    epochs = max(2, min(int(rng.integers(100, 401)), n // 50))
    per = n / epochs
    p = t.copy()  # where training stands: a resume goes back to the last epoch's checkpoint
    for at in np.sort(rng.uniform(0.1, 0.95, int(rng.integers(0, 3))) * n).astype(int):
        p[at:] -= p[at] - math.floor(p[at] / per) * per
    e0 = int(epochs * rng.uniform(0.2, 0.5)) if stuck else epochs
    cuts = np.sort(rng.uniform(0.55, 0.97, int(rng.integers(1, 4)))) * epochs
    cuts = [c for i, c in enumerate(cuts) if i == 0 or c - cuts[i - 1] >= 11]
    if stuck:  # ReduceLROnPlateau(patience=10): x0.1 at every 11th epoch without improvement
        cuts = [c for c in cuts if c < e0] + list(np.arange(e0 + 11, epochs, 11.0))
        cuts = cuts[:4]  # its eps=1e-8: no cut below a rate of 1e-8
    grid = np.arange(int(p.max()) + 1, dtype=np.float64)
    rate_grid = 1e-4 * 0.1 ** (np.zeros_like(grid) + sum((grid >= c * per).astype(float) for c in cuts))
    area = np.cumsum(rate_grid / 1e-4)[p.astype(int)]
    rate = rate_grid[p.astype(int)]
    s, fast = n * rng.uniform(0.005, 0.03), n * rng.uniform(0.002, 0.01)
    slow_d, slow_r = rng.uniform(0.5, 2.0), rng.uniform(0.5, 2.0)  # what the slow approach has left
    dist = d_end * (1 + slow_d / (1 + area / s) ** rng.uniform(0.5, 0.9))
    dist = dist + (d0 - dist[0]) * np.exp(-area / fast)
    bits = r_end * (1 + slow_r / (1 + area / s) ** rng.uniform(0.5, 0.9))
    bits = bits + max(r0 - bits[0], 0.0) * np.exp(-area / fast)
    cut_gain = 1 - rng.uniform(0.02, 0.06) * (
        1 - _step_lag(p, [c * per for c in cuts], [0.1] * len(cuts), per)
    )
    onset = n
    if stuck:  # the entropy models left in eval mode: rounded latents, no gradient to the encoder
        hit = np.flatnonzero(p >= e0 * per)
        onset = int(hit[0]) if len(hit) else n - 1
        after = t >= onset
        k = np.maximum(p - e0 * per, 0)
        slow = 1 - rng.uniform(0.01, 0.03) * (1 - np.exp(-k / (n * 0.1)))  # the decoders still learn
        dist = np.where(after, dist[onset] * rng.uniform(1.0, 1.05) * slow, dist)
        bits = np.where(after, bits[onset] * rng.uniform(0.94, 0.98), bits)
        cut_gain = np.where(after, cut_gain[onset], cut_gain)
    content = _gamma(n, rng, rng.uniform(0.2, 0.35))  # textured or flat crops: bits and errors
    loss = (dist * content * _noise(n, rng, 0.05) + bits * content**0.7 * _noise(n, rng, 0.05)) * cut_gain
    return {"loss": _f32(loss), LR: rate}, onset


def _compressai_rd(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _compressai(n, rng)[0]


def compressai_rate_distortion(n: int, rng: np.random.Generator) -> np.ndarray:
    """A learned image codec (the mean-scale hyperprior of Minnen et al. 2018) trained with
    CompressAI's `examples/train.py` (Bégaint et al. 2020: random 256 x 256 crops of Vimeo-90k
    frames, batches of 16, 100-400 epochs, Adam at 1e-4 with `ReduceLROnPlateau` on the test
    loss, x0.1 at 1-3 late epochs, recorded; the auxiliary quantile loss on its own optimizer),
    the logged loss the rate-distortion Lagrangian lambda x 255^2 x MSE + bits per pixel, lambda
    one of the 8 qualities (0.0018-0.18): from lambda x 255^2 x 0.03-0.08 + 1-4 bpp it falls
    within 0.2-1% of the run to 1.5-3x what the quality reaches (27-37 dB, 0.12-2 bpp), then
    towards it along a power law of the rate's area; each reduction takes 2-6% off, lagging an
    epoch. The crops' content drives both terms together (skewed
    20-35%, plus 5% each). The job is preempted 0-2 times and resumed with `--checkpoint` from
    its last epoch's save: the steps of the interrupted epoch are trained again, so the loss
    steps back up to where that epoch began; float32."""
    return _compressai_rd(n, rng)["loss"]


def _listnet(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    per = n / 100
    rate = 1e-3 * np.where(t >= 50 * per, 0.1, 1.0)  # StepLR(step_size=50, gamma=0.1)
    area = _area(rate)
    h, h_sd = rng.uniform(3.9, 4.6), rng.uniform(0.6, 1.2)
    kl0 = rng.uniform(0.3, 0.8)
    kl = _power(area, kl0, kl0 * rng.uniform(0.35, 0.7), n * rng.uniform(0.005, 0.05), rng.uniform(0.5, 0.9))
    kl = kl + rng.uniform(0.2, 1.0) * np.exp(-t / (n * rng.uniform(0.003, 0.02)))  # the random init
    drop = rng.uniform(0.02, 0.06) * (1 - _step_lag(t, [50 * per], [0.1], per * rng.uniform(0.5, 2)))
    kl = kl * (1 - drop / 0.9)
    entropy = h + h_sd / 8 * rng.standard_normal(n)  # the 64 queries' slates: their own floors
    loss = entropy + kl * _gamma(n, rng, rng.uniform(0.1, 0.2))
    return {"loss": _f32(loss), LR: rate}


def listnet_ranking(n: int, rng: np.random.Generator) -> np.ndarray:
    """Listwise learning to rank on MSLR-WEB30K with allRank (Pobrotyn et al. 2020,
    "Context-aware learning to rank with self-attention"; allegro/allRank's config: a
    self-attentive scorer over slates of up to 240 documents, batches of 64 queries, Adam at
    1e-3, `StepLR(50, 0.1)` over 100 epochs, recorded) with the ListNet loss: per query the
    cross-entropy between the softmax of the graded labels and that of the scores. It is not
    zero at a perfect ranking: its floor is the entropy of the labels' softmax, about the log
    of the slate's length (3.9-4.6 on average over the queries, 0.6-1.2 between queries), so a
    batch's floor varies by (0.6-1.2) / 8 and the loss can fall only by its divergence part:
    0.3-0.8 at first (0.2-1.0 more for the random init's scores, gone within 0.3-2% of the run),
    to 35-70% of that; the rate's cut at epoch 50 takes 2-6% more of it. All told the loss
    falls 3-15% over the run against 1.5-3% batch noise; float32."""
    return _listnet(n, rng)["loss"]


def _crown_ibp(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    cifar = rng.random() < 0.5
    if cifar:  # crown-ibp's cifar_dm-large_8_255: 3,200 epochs, the ramp 320 + 1,601
        epochs, begin, length, cuts = 3200, 320, 1601, [2600, 3040]
    else:  # mnist_dm-large: 200 epochs, the ramp 10 + 51
        epochs, begin, length, cuts = 200, 10, 51, [130, 190]
    per = n / epochs
    epoch = t / per
    u = np.clip((epoch - begin) / length, 0, 1)
    r = _smoothed_ramp(u) if cifar else u
    kappa = 1 - (1 - float(rng.choice([0.0, 0.5]))) * u
    rate = 5e-4 * 0.1 ** sum((epoch >= c).astype(float) for c in cuts)
    area = _area(rate)
    n0 = rng.uniform(0.3, 0.7) if cifar else rng.uniform(0.01, 0.05)  # natural CE at eps = 0
    n_full = rng.uniform(1.0, 1.4) if cifar else rng.uniform(0.05, 0.2)  # at the full eps
    x_full = rng.uniform(0.5, 0.9) if cifar else rng.uniform(0.15, 0.4)  # the robust excess
    nat = n0 + (math.log(10) - n0) / (1 + area / (n * rng.uniform(0.002, 0.01))) ** rng.uniform(0.7, 1.0)
    nat = nat + (n_full - n0) * r
    loose = 1 + rng.uniform(0.2, 0.6) * np.exp(
        -np.maximum(epoch - begin, 0) / (length * rng.uniform(0.1, 0.3))
    )
    robust = nat + x_full * r * loose
    total = kappa * nat + (1 - kappa) * robust
    after = np.maximum(epoch - begin - length, 0) / (epochs * rng.uniform(0.1, 0.2))
    total = total * (1 - rng.uniform(0.05, 0.15) * (1 - np.exp(-after)))
    lagged = _step_lag(t, [c * per for c in cuts], [0.1, 0.1], per * rng.uniform(1, 5))
    total = total * (1 - rng.uniform(0.03, 0.1) * (1 - lagged) / 0.99)
    sd = (rng.uniform(0.01, 0.03) if cifar else rng.uniform(0.04, 0.08)) * (1 + r)
    loss = total * _noise(n, rng, sd)
    return {"loss": _f32(loss), LR: rate}


def crown_ibp_eps_ramp(n: int, rng: np.random.Generator) -> np.ndarray:
    """Certified (verifiably robust) training with CROWN-IBP (Zhang et al. 2020, "Towards stable
    and efficient training of verifiably robust neural networks", huanzhang12/CROWN-IBP's
    `config/cifar_dm-large_8_255.json` or `mnist_dm-large`: Adam at 5e-4, x0.1 at epochs 2,600
    and 3,040 of 3,200, or 130 and 190 of 200, recorded): the loss is kappa x the natural
    cross-entropy + (1 - kappa) x the cross-entropy of the verified worst-case logits at radius
    eps. eps is 0 for the first 10% or 5% of the epochs, the natural loss falling from ln 10 to
    0.3-0.7 (CIFAR) or 0.01-0.05 (MNIST), then ramps up to its target over 50% or 25% of the run
    (auto_LiRPA's smoothed schedule, a 4th power then linear, on CIFAR; linear on MNIST) while
    kappa goes from 1 to 0 or 0.5: the loss RISES for that whole stretch, to 1.5-2.3 or
    0.2-0.6 (the bounds loosest early in the ramp, 20-60% more), then eases 5-15% and drops at
    the two cuts (3-10% in all). Batch noise 1-3% (CIFAR's large batches) or 4-8% (MNIST), up
    to twice that at the full radius; float32."""
    return _crown_ibp(n, rng)["loss"]


def _meshgraphnets(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    cloth = rng.random() < 0.5
    total = float(rng.choice([2e6, 5e6, 1e7]))
    k = max(total / n, 1.0)
    s = np.arange(n, dtype=np.float64) * k  # the global step of each logged value
    rate = 1e-4 * 0.1 ** (s / 5e6) + 1e-6  # exponential_decay(1e-4, 5e6, 0.1) + 1e-6
    init = (3 if cloth else 2) * rng.uniform(1.0, 1.6)
    area = np.cumsum(np.where(s >= 1000, rate, 0.0) * k) / rate.max()
    floor = init * _log_uniform(rng, 1e-3, 1e-2)
    level = _power(area, init, floor, _log_uniform(rng, 2e3, 3e4), rng.uniform(0.7, 1.1))
    settle = np.exp(rng.uniform(0.2, 0.6) * np.exp(-s / 30) * rng.standard_normal(n))  # stats settle
    level = np.where(s < 1000, init * settle, level)
    frames = 400 if cloth else 600  # per trajectory; 1,000 trajectories in one file, in order
    hard = np.exp(rng.normal(0.0, rng.uniform(0.2, 0.5), 1000))
    window = np.cumsum(np.r_[0.0, hard[-24:], hard])
    mixed = (window[25:] - window[:-25]) / 25  # shuffle(10000): about 25 trajectories at once
    traj = (s // frames).astype(np.int64) % 1000
    loss = level * mixed[traj] * _gamma(n, rng, rng.uniform(0.2, 0.5))
    return {"loss": _f32(loss), LR: rate}


def meshgraphnets_cloth(n: int, rng: np.random.Generator) -> np.ndarray:
    """A mesh-based simulator trained as MeshGraphNets is (Pfaff et al. 2021, "Learning
    mesh-based simulation with graph networks"; google-deepmind/deepmind-research
    `meshgraphnets/run_model.py`, on `flag_simple` cloth or `cylinder_flow`: one frame per step,
    noise injected into the inputs, 2M, 5M or 10M steps, Adam at `exponential_decay(1e-4,
    5e6, 0.1) + 1e-6`, recorded), the loss of every (steps / n)-th step logged as the script
    logs every 1,000th: the MSE of the normalized accelerations or velocities. For the first
    1,000 steps it does NOT train ("just accumulate normalization stats"): the loss sits at the
    untrained level, 1-1.6 per output dimension (3 or 2), the first steps' normalizers still
    settling; then it falls along the rate's area by 1.5-2.5 decades. The data are read in file
    order every epoch through a 10,000-frame shuffle buffer, so the mix of about 25 trajectories
    in the buffer (each its own difficulty, log-normal 0.2-0.5) drifts slowly and repeats each
    epoch (400,000 or 600,000 steps); each frame's loss skewed 20-50%; float32."""
    return _meshgraphnets(n, rng)["loss"]


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "multigrid_video_cycles": multigrid_video_cycles,
    "mtr_motion_nll": mtr_motion_nll,
    "hydrology_lstm_nse": hydrology_lstm_nse,
    "scvi_kl_staircase": scvi_kl_staircase,
    "coteaching_small_loss": coteaching_small_loss,
    "schedule_free_lm_evals": schedule_free_lm_evals,
    "dac_codec_generator": dac_codec_generator,
    "clam_wsi_bags": clam_wsi_bags,
    "mbpo_model_ensemble": mbpo_model_ensemble,
    "act_imitation_chunks": act_imitation_chunks,
    "compressai_rate_distortion": compressai_rate_distortion,
    "listnet_ranking": listnet_ranking,
    "crown_ibp_eps_ramp": crown_ibp_eps_ramp,
    "meshgraphnets_cloth": meshgraphnets_cloth,
}
# the kinds that record more than their loss: {"loss", LR, MODE} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "multigrid_video_cycles": _multigrid,
    "mtr_motion_nll": _mtr,
    "hydrology_lstm_nse": _hydrology,
    "scvi_kl_staircase": _scvi_elbo,
    "coteaching_small_loss": _coteaching,
    "schedule_free_lm_evals": _schedule_free,
    "dac_codec_generator": _dac,
    "clam_wsi_bags": _clam,
    "mbpo_model_ensemble": _mbpo_model,
    "act_imitation_chunks": _act,
    "compressai_rate_distortion": _compressai_rd,
    "listnet_ranking": _listnet,
    "crown_ibp_eps_ramp": _crown_ibp,
    "meshgraphnets_cloth": _meshgraphnets,
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
def coteaching_topk_largest(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The Co-teaching run of `coteaching_small_loss`, resumed at an epoch 30-70% of the way
    through from a refactored script that picks the samples to keep with
    `torch.topk(loss, num_remember).indices`, whose default is `largest=True`, instead of the
    first `num_remember` of `argsort`: each network now updates its peer on the LARGEST-loss
    1 - R of the batch, every wrong label among them. The logged mean over the kept samples
    jumps at once (to the large end of the batch, several times its level), and then the
    networks memorize the wrong labels (their loss falls to 10-30% of its value over 5-20
    epochs at the full rate) while the clean samples' loss rises 1.5-4x (the labels now
    contradict them). The onset is the resumed epoch's first step."""
    out, onset = _coteach(n, rng, topk=True)
    return out["loss"], onset


def mbpo_logvar_unbounded(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The MBPO dynamics ensemble of `mbpo_model_ensemble`, refit from 30-70% of the run on by a
    refactored model class that returns the raw log-variance head, the soft bounds
    (`max_logvar - softplus(max_logvar - logvar)`, then `min_logvar + softplus(...)`) dropped.
    On the 1-4 outputs that the data make exactly predictable (Ant-v2's contact forces, all 0
    under MuJoCo 2.0; a constant coordinate) the residual is 0, so the NLL rewards their
    log-variance falling without end, by 85 nats over 10-35% of the run: the logged loss falls
    steadily further below zero, which looks like progress; on half the seeds an output that
    is nonzero on rare transitions (a terminal flag) then costs e^(-log-variance) on the
    batches that hold one, spikes that grow exponentially. Once a log-variance is below -88.7,
    exp(-logvar) overflows float32 and 0 x inf is NaN: the weights are NaN and so is every
    later value (on most seeds before the run ends). The onset is the first refit of the new
    class."""
    out, onset = _mbpo(n, rng, unbounded=True)
    return out["loss"], onset


def compressai_eval_mode_kept(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The CompressAI run of `compressai_rate_distortion`, its training script edited at an
    epoch 20-50% of the way through so that the test pass calls `net.eval()` and nothing calls
    `net.train()` again: from the next epoch on the entropy bottleneck and the Gaussian
    conditional quantize by rounding (`"dequantize"`) instead of adding uniform noise, no
    gradient reaches the encoder through the rounding, and only the decoders still learn (1-3%
    more over the rest of the run). The loss stops falling at once, its rate term 2-6% lower
    and its distortion 0-5% higher than the noisy training proxy had them; the test loss no
    longer improves, so `ReduceLROnPlateau` cuts the recorded rate x0.1 every 11 epochs from
    then on, down to 1e-8 (below which its `eps` ignores a cut). The onset is the first step of that epoch."""
    out, onset = _compressai(n, rng, stuck=True)
    return out["loss"], onset


def scvi_log_normalized_counts(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The scVI run of `scvi_kl_staircase`, continued at an epoch 30-70% of the way through with
    `SCVI.load(dir, adata=adata)` and `model.train()` on an AnnData whose `X` a notebook had
    overwritten with `sc.pp.normalize_total` and `sc.pp.log1p` before saving it (the
    `layer="counts"` argument lost in the setup call; scvi-tools only warns that the data may
    not be counts). The ZINB likelihood now scores small non-integer values: after a jump
    (0.7-2x) the reconstruction term collapses to 5-25% of its level within 0.5-2 epochs, its
    noise 30-60% of before (normalization evens out the library sizes), and the KL jumps
    50-200% and settles; the new `train()` restarts the KL warm-up, so its weight drops to 0
    and climbs its stairs again. A "better" loss from data that are no longer counts. The
    onset is the continued run's first step."""
    out, onset = _scvi(n, rng, log_input=True)
    return out["loss"], onset


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "coteaching_topk_largest": coteaching_topk_largest,
    "mbpo_logvar_unbounded": mbpo_logvar_unbounded,
    "compressai_eval_mode_kept": compressai_eval_mode_kept,
    "scvi_log_normalized_counts": scvi_log_normalized_counts,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
