"""A fifteenth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind15`.

    .venv/bin/python benchmarks/long_runs.py --blind15 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of a training job look over 10^5-10^6 logged values (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is training that legitimately restarts or re-phases
under one global step, and ordinary jobs seen through their evaluation passes: k-fold
cross-validation in one process, an Optuna sweep with pruning and a successive-halving bracket
logged into one run, a learning-rate range test before the real fit, progressive growing of a
GAN, ULMFiT's and TinyBERT's multi-stage pipelines, codistillation with stale peers, a
population trained in turns, DARTS's search then retraining, and periodic validation passes
whose loss plateaus, triggers `ReduceLROnPlateau` and early stopping, or rises a little late
(a fine-tune's eval loss, an NMT model's, a data-constrained LM's over repeated epochs). None of
them is one of `long_runs.KINDS`, `long_blind.KINDS`, ... `long_blind14.KINDS` (nor a bug of
their `BUGS`). They are to be measured once, on the held-out seeds (`SEEDS`), and not tuned on:
a rule changed after looking at them makes them a tuning set.

The interface is `long_blind14`'s: a kind is `(n, rng) -> loss`, each value one logged point;
`series(kind, n, rng)` gives all that a run records: the loss and, where the kind has them, the
learning rate (`LR`, as the PyTorch hook records it, in real units, at each logged point) and
the mode of each step (`MODE`, as `long_blind.eval_pauses` records it: `TRAIN` and `EVAL` steps
save their loss in their mode; `EVAL_UNSAVED` steps are evaluation steps that save no loss).
A bug is `(n, rng) -> (loss, the step its defect begins)`. Only numpy here: the series can be
generated and looked at without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _log_uniform, _maybe_rho, _noise, _power  # the first blind set's helpers
from long_blind4 import _f32, _gamma  # the fourth's
from long_blind9 import _warm_cosine  # the ninth's
from long_blind14 import _ce_classes  # the fourteenth's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE: the mode of each step
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 15000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _stlr(k: np.ndarray, total: float, peak: float, cut: float = 0.1, ratio: float = 32.0) -> np.ndarray:
    """ULMFiT's slanted triangular rate (Howard & Ruder 2018, eq. 3) at step `k` of `total`."""
    c = max(total * cut, 1.0)
    p = np.where(k < c, k / c, 1 - (k - c) / max(c * (1 / cut - 1), 1.0))
    return peak * (1 + np.clip(p, 0, 1) * (ratio - 1)) / ratio


def _linear_warm(k: np.ndarray, total: float, warm: float, peak: float) -> np.ndarray:
    """`get_linear_schedule_with_warmup`: up over `warm` steps, then linearly to 0 at `total`."""
    up = (k + 1) / max(warm, 1.0)
    down = np.clip((total - k) / max(total - warm, 1.0), 0, 1)
    return peak * np.where(k < warm, up, down)


def _epoch_passes(epochs: int, n: int, val_share: float) -> tuple[int, int]:
    """Train and validation steps per epoch so that `epochs` epochs, each ending with its
    validation pass, fill at least `n` steps."""
    per = -(-n // epochs)
    val = max(1, int(round(per * val_share)))
    return max(per - val, 1), val


# the healthy kinds ----------------------------------------------------------------------------
def _kfold_cv(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    k = int(rng.choice([5, 5, 10]))
    e_max = int(rng.integers(20, 61))
    patience = int(rng.integers(3, 11))
    chance = _ce_classes(rng)
    end = chance * rng.uniform(0.03, 0.2)
    vend = end * rng.uniform(1.5, 3.0)
    scale = e_max / rng.uniform(5, 30)
    over = vend * rng.uniform(0.05, 0.3) / e_max  # the val loss's late rise, per epoch
    jitter = rng.uniform(0.005, 0.02)
    runs: list[tuple[int, float, np.ndarray]] = []  # epochs run, difficulty, val per epoch
    for _ in range(k):
        d = float(_noise(1, rng, rng.uniform(0.03, 0.08))[0])  # the fold's split
        star = e_max * rng.uniform(0.3, 0.7)
        e = np.arange(e_max, dtype=np.float64)
        val = _power(e + 1, chance, vend * d, scale, 0.8) + over * d * np.maximum(e - star, 0)
        val = val * (1 + jitter * rng.standard_normal(e_max))
        best, wait, stop = math.inf, 0, e_max
        for i, v in enumerate(val):  # pytorchtools-style EarlyStopping on the val loss
            best, wait = (v, 0) if v < best else (best, wait + 1)
            if wait >= patience:
                stop = i + 1
                break
        runs.append((stop, d, val[:stop]))
    total_e = sum(r[0] for r in runs)
    s, v = _epoch_passes(total_e, n, 0.5 / (k - 1))
    peak = float(rng.choice([3e-4, 1e-3, 0.05, 0.1]))
    held, cv = rng.uniform(0.05, 0.15), rng.uniform(0.05, 0.15)
    loss, lr, mode = [], [], []
    for stop, d, val in runs:
        planned = e_max * s
        batches = _gamma(v, rng, rng.uniform(0.05, 0.2))
        batches /= batches.mean()  # the fold's own validation batches, every epoch
        for e in range(stop):
            steps = e * s + np.arange(s, dtype=np.float64)
            rate = _warm_cosine(steps, planned, planned * 0.05, peak)
            level = _power(steps / s, chance, end * d, scale, 0.8) * (1 + held * rate / peak)
            loss += [level * _gamma(s, rng, cv), val[e] * batches]
            lr += [rate, np.full(v, rate[-1])]
            mode += [np.full(s, TRAIN), np.full(v, EVAL)]
    return {
        "loss": _f32(np.concatenate(loss)[:n]),
        LR: np.concatenate(lr)[:n],
        MODE: np.concatenate(mode)[:n],
    }


def kfold_cv(n: int, rng: np.random.Generator) -> np.ndarray:
    """K-fold cross-validation of a neural network in one process (the Kaggle notebook loop
    `for fold, (tr, va) in enumerate(KFold(5).split(X)): model = Net(); ...`, all folds written
    to one TensorBoard or W&B run under a global step that counts on): 5 or 10 folds, each a
    fresh model trained for up to 20-60 epochs on a warm cosine planned over them (3e-4-0.1,
    recorded), with a validation pass on its held-out fold at each epoch's end (EVAL steps, the
    fold's same batches every epoch, half an epoch's worth over k - 1) and pytorchtools-style
    early stopping (patience 3-10 epochs), so folds end at different lengths. At each fold the
    loss is back at ln C (10-1,000 classes) and falls to 3-20% of it (the split moves it by
    3-8%); the val loss falls to 1.5-3x that and rises by 5-30% over the run after 30-70% of
    the epochs (slight overfitting), with 0.5-2% epoch-to-epoch jitter; batch noise 5-15%,
    skewed; float32. See `series` for the modes."""
    return _kfold_cv(n, rng)["loss"]


def _trial_curve(
    rng: np.random.Generator, lr: float, lr_opt: float, chance: float, floor: float, steps: int, scale: float
) -> np.ndarray:
    """A fresh model's loss at the rate `lr`: slower below `lr_opt`, a higher floor and more
    noise above it (no learning at all far above it), skewed batch noise."""
    x = math.log10(lr / lr_opt)
    speed = min(lr / lr_opt, 1.0) ** 0.8
    f = min(floor * (1 + 0.3 * x * x + 2.0 * max(x, 0.0) ** 2), 0.95 * chance)
    t = np.arange(steps, dtype=np.float64)
    cv = 0.08 * (1 + max(x, 0.0))
    return _power(t * speed, chance, f, scale, 0.8) * _gamma(steps, rng, cv)


def _optuna_pruned_sweep(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    length = int(n / rng.uniform(10, 40))
    every = max(length // int(rng.integers(10, 31)), 1)
    lr_opt = _log_uniform(rng, 3e-4, 3e-3)
    chance = _ce_classes(rng)
    floor = chance * rng.uniform(0.05, 0.2)
    scale = length / _log_uniform(rng, 3, 30)
    startup, warm = 5, int(rng.integers(1, 4))  # MedianPruner(n_startup_trials=5, n_warmup_steps)
    history: list[np.ndarray] = []
    loss, lr = [], []
    total, best_lr, best = 0, lr_opt, math.inf
    while total < n:
        if len(history) < 10 or rng.random() < 0.3:
            rate = _log_uniform(rng, 1e-5, 1e-1)
        else:  # TPE: around the best so far
            rate = float(np.clip(best_lr * math.exp(rng.normal(0, 0.7)), 1e-5, 1e-1))
        x = _trial_curve(rng, rate, lr_opt, chance, floor, length, scale)
        reports = np.array([x[max(0, r - every + 1) : r + 1].mean() for r in range(every - 1, length, every)])
        stop = length
        if len(history) >= startup:
            for j in range(warm, len(reports)):
                others = [h[j] for h in history if len(h) > j]
                if others and reports[: j + 1].min() > np.median(others):
                    stop = (j + 1) * every
                    break
        history.append(reports[: stop // every])
        if stop == length and reports[-1] < best:
            best, best_lr = float(reports[-1]), rate
        loss.append(x[:stop])
        lr.append(np.full(stop, rate))
        total += stop
    return {"loss": _f32(np.concatenate(loss)[:n]), LR: np.concatenate(lr)[:n]}


def optuna_pruned_sweep(n: int, rng: np.random.Generator) -> np.ndarray:
    """A learning-rate sweep run as one Optuna study in one process (`study.optimize(objective)`
    with `MedianPruner(n_startup_trials=5, n_warmup_steps=1-3 reports)` and TPE; the objective
    trains a fresh classifier and `trial.report`s its mean loss every 1/10-1/30 of the budget),
    every trial's batch losses written to one run under a global step that counts on (a shared
    `SummaryWriter`): each trial starts again at ln C (10-1,000 classes), its Adam rate drawn
    log-uniform in 1e-5-0.1 (the first 10 and 30% after), else around the best so far (recorded);
    below the best rate (3e-4-3e-3) it learns slowly, above it the floor (5-20% of ln C at best)
    rises and the noise grows, far above it it barely learns; a trial worse than the median of
    the earlier ones at a report is pruned there, so most trials are short; trials of 1/10-1/40
    of the run; skewed batch noise of 8% and more; float32."""
    return _optuna_pruned_sweep(n, rng)["loss"]


def _successive_halving(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    eta = 3
    n0 = int(rng.choice([27, 81]))
    rungs = round(math.log(n0, eta)) + 1
    budget = [eta**i for i in range(rungs)]  # a config's total steps after rung i, in r0
    units = sum((n0 // eta**i) * (budget[i] - (budget[i - 1] if i else 0)) for i in range(rungs))
    r0 = max(-(-n // units), 2)
    lr_opt = _log_uniform(rng, 3e-4, 3e-3)
    chance = _ce_classes(rng)
    floor = chance * rng.uniform(0.05, 0.2)
    scale = r0 * budget[-1] / _log_uniform(rng, 10, 100)
    rates = np.exp(rng.uniform(math.log(1e-4), math.log(1e-2), n0))
    other = _noise(n0, rng, rng.uniform(0.1, 0.3))  # the other hyperparameters' effect on the floor
    curves = [
        _trial_curve(rng, float(rates[c]), lr_opt, chance, floor * float(other[c]), r0 * budget[-1], scale)
        for c in range(n0)
    ]
    alive = list(range(n0))
    loss, lr = [], []
    for i in range(rungs):
        lo, hi = (budget[i - 1] if i else 0) * r0, budget[i] * r0
        for c in alive:  # each resumed from its checkpoint
            loss.append(curves[c][lo:hi])
            lr.append(np.full(hi - lo, rates[c]))
        score = [curves[c][hi - max(r0 // 4, 1) : hi].mean() for c in alive]
        alive = [alive[j] for j in sorted(np.argsort(score)[: max(len(alive) // eta, 1)])]
    return {"loss": _f32(np.concatenate(loss)[:n]), LR: np.concatenate(lr)[:n]}


def successive_halving(n: int, rng: np.random.Generator) -> np.ndarray:
    """One bracket of successive halving (Jamieson & Talwalkar 2016; Hyperband's inner loop, Li
    et al. 2018; Ray Tune's `HyperBandScheduler` run with one worker), logged into one run: 27
    or 81 configurations (an Adam rate log-uniform in 1e-4-1e-2, recorded, and others that move
    the floor by 10-30%) each trained for r0 steps one after the other, then the best third by
    their last quarter-rung's mean loss resumed from their checkpoints to 3 r0, the best third
    of those to 9 r0, ..., one to 27 or 81 r0. So the loss restarts at ln C (10-1,000 classes)
    at every first-rung config, and later jumps between the survivors' lower levels as each
    resumes where it stopped; a config's own loss as `optuna_pruned_sweep`'s trials; float32."""
    return _successive_halving(n, rng)["loss"]


def _lr_range_test(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    chance = _ce_classes(rng)
    steps = int(rng.choice([100, 200, 300]))
    lo, hi = 1e-7, 10.0
    rate = lo * (hi / lo) ** (np.arange(steps) / (steps - 1))
    mid = math.log10(_log_uniform(rng, 1e-4, 3e-3))  # where it starts to learn
    div = mid + rng.uniform(1.5, 2.5)  # where it diverges
    lg = np.log10(rate)
    learn = chance * rng.uniform(0.2, 0.5) / (1 + np.exp(-(lg - mid) / 0.3))
    blow = np.exp(np.maximum(lg - div, 0) * rng.uniform(2, 4)) - 1
    cv = rng.uniform(0.05, 0.15)
    test = (chance - learn) * (1 + blow) * _gamma(steps, rng, cv)
    smooth, avg = np.empty(steps), 0.0
    for i, v in enumerate(test):  # fastai's `LRFinder`: a debiased EMA, beta 0.98
        avg = 0.98 * avg + 0.02 * v
        smooth[i] = avg / (1 - 0.98 ** (i + 1))
    over = np.flatnonzero(smooth > 4 * np.minimum.accumulate(smooth))
    stop = int(over[0]) + 1 if len(over) else steps  # stop_div=True
    test, rate = test[:stop], rate[:stop]
    peak = 10 ** (lg[int(np.argmin(smooth[:stop]))]) / 10  # the minimum / 10 suggestion
    m = n - stop
    k = np.arange(m, dtype=np.float64)
    up = m * rng.uniform(0.25, 0.3)  # fit_one_cycle(pct_start=0.25): cosine up, then down
    one = np.where(
        k < up,
        peak / 25 + (peak - peak / 25) * 0.5 * (1 - np.cos(np.pi * k / up)),
        peak / 1e5 + (peak - peak / 1e5) * 0.5 * (1 + np.cos(np.pi * (k - up) / max(m - up, 1))),
    )
    area = np.cumsum(one / peak)
    level = _power(area, chance, chance * rng.uniform(0.05, 0.25), m / _log_uniform(rng, 20, 200), 0.8)
    level *= 1 + rng.uniform(0.05, 0.2) * one / peak
    train = level * _gamma(m, rng, cv)
    return {"loss": _f32(np.r_[test, train]), LR: np.r_[rate, one]}


def lr_range_test(n: int, rng: np.random.Generator) -> np.ndarray:
    """fastai's `learn.lr_find()` then `learn.fit_one_cycle(epochs, lr_max)` in one script, the
    loss written by a callback that logs every batch under one global step (a hand-written
    W&B / TensorBoard callback that does not skip the finder's batches): the LR range test
    (Smith 2017, sec. 3.3) raises the rate exponentially from 1e-7 to 10 over 100-300 batches,
    the loss flat at ln C (10-1,000 classes) until 1e-4-3e-3, then falling by 20-50%, then
    blowing up 1.5-2.5 decades later; the test stops when its smoothed loss passes 4x its
    minimum (`stop_div`; the smoothing lags, so the raw loss has often passed 10-100x by then),
    and the weights are restored. The fit then starts at ln C again, the
    rate at the minimum's / 10 on `fit_one_cycle` (recorded, with the test's), the loss along
    the rate's area to 5-25% of ln C, 5-20% held up by it; skewed batch noise of 5-15%; float32."""
    return _lr_range_test(n, rng)["loss"]


def progan_growing(n: int, rng: np.random.Generator) -> np.ndarray:
    """The discriminator's loss of a progressively grown GAN (Karras et al. 2018, tkarras/
    progressive_growing_of_gans: WGAN-GP, `D(fake) - D(real) + 10 GP + 0.001 D(real)^2`, logged
    per minibatch): 4x4 up to 256 or 1,024 pixels, each new resolution faded in over 600k-800k
    images (alpha 0 -> 1), then stabilized as long; the minibatch falls from 64-128 at the low
    resolutions to 4-16 at the top (its `minibatch_dict`), so the later phases take more steps
    and noisier ones, and the final resolution trains on for 20-50% of the images. The loss is
    minus the critic's Wasserstein estimate plus the penalty: at each fade-in the critic sees
    new detail and the estimate climbs 1.5-3x, then falls back as the generator catches up to a
    level 10-40% higher each resolution; absolute noise of (0.5-2) x the estimate / sqrt(batch),
    the penalty skewed (5-20% of the estimate); float32."""
    stages = int(rng.choice([7, 9]))
    top = float(rng.choice([4, 8, 16]))
    low = float(rng.choice([64, 128]))
    batch = np.maximum(low / 2 ** np.maximum(np.arange(stages) - 3, 0), top)
    batch[-1] = top
    kimg = rng.uniform(600, 800)
    imgs = [kimg] + [2 * kimg] * (stages - 1)
    imgs[-1] += kimg * stages * rng.uniform(0.2, 0.5) * 2
    weights = np.array(imgs) / batch
    lengths = np.maximum((weights / weights.sum() * n).astype(int), 2)
    lengths[-1] += n - lengths.sum()
    w0, grow = rng.uniform(1, 5), rng.uniform(1.1, 1.4)
    c = rng.uniform(0.5, 2)
    out, prev = [], w0 * 2
    for s in range(stages):
        m = int(lengths[s])
        k = np.arange(m, dtype=np.float64)
        base = w0 * grow**s
        if s == 0:
            w = base + (prev - base) * np.exp(-k / (m * 0.3))
        else:
            fade = m * kimg / imgs[s]  # the fade-in's share of the phase
            peak = base * rng.uniform(1.5, 3.0)
            rise = prev + (peak - prev) * np.minimum(k / fade, 1)
            w = np.where(
                k < fade, rise, base + (peak - base) * np.exp(-(k - fade) / (m * rng.uniform(0.1, 0.3)))
            )
        gp = w * rng.uniform(0.05, 0.2) * _gamma(m, rng, 1.0)
        out.append(-w * (1 + c / math.sqrt(batch[s]) * rng.standard_normal(m)) + gp)
        prev = float(w[-1])
    return _f32(np.concatenate(out)[:n])


def _ulmfit(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    m2 = int(n * rng.uniform(0.03, 0.15))  # the classifier's 5 epochs are short
    m1 = n - m2
    frozen = int(m1 / rng.uniform(8, 12))  # 1 frozen epoch of the LM, then 7-11 unfrozen
    lr1 = np.r_[_stlr(np.arange(frozen), frozen, 2e-2), _stlr(np.arange(m1 - frozen), m1 - frozen, 2e-3)]
    area1 = np.cumsum(lr1 / 2e-3)
    start = rng.uniform(4.3, 5.3)  # WikiText-103's AWD-LSTM on the target corpus
    lm = _power(area1, start, start - rng.uniform(0.5, 1.0), area1[-1] / _log_uniform(rng, 5, 50), 0.7)
    lm = lm * (1 + rng.uniform(0.01, 0.04) * lr1 / 2e-2) * _noise(m1, rng, rng.uniform(0.02, 0.05))
    chance = math.log(float(rng.choice([2, 4, 5, 14])))  # IMDb, AG News, Yelp-5, DBpedia
    epoch = m2 / 5
    cycles = [(2e-2, int(epoch)), (1e-2, int(epoch)), (5e-3, int(epoch)), (1e-3, m2 - 3 * int(epoch))]
    level, floor = chance, chance * rng.uniform(0.25, 0.45)
    lr2, lv = [], []
    for j, (peak, m) in enumerate(cycles):
        k = np.arange(m, dtype=np.float64)  # one cycle per unfreezing
        rate = _stlr(k, m, peak)
        target = floor * (rng.uniform(0.6, 0.9) if j else 1.0)
        frac = 1 - np.exp(-np.cumsum(rate / peak) / (m * rng.uniform(0.1, 0.3)))
        lv.append(level + (target - level) * frac)
        lr2.append(rate)
        level, floor = float(lv[-1][-1]), target
    cls = np.concatenate(lv)
    cls = cls * _gamma(len(cls), rng, rng.uniform(0.15, 0.3))
    return {"loss": _f32(np.r_[lm, cls][:n]), LR: np.r_[lr1, np.concatenate(lr2)][:n]}


def ulmfit(n: int, rng: np.random.Generator) -> np.ndarray:
    """ULMFiT in one script (Howard & Ruder 2018; the fastai text tutorial on IMDb): the
    WikiText-103 AWD-LSTM fine-tuned as a language model on the target corpus (1 epoch with the
    new embeddings only at 2e-2, then 7-11 unfrozen at 2e-3, each on the slanted triangular
    rate, recorded), its cross-entropy from 4.3-5.3 nats down by 0.5-1.0, 1-4% held up by the
    rate, noise 2-5%; then the classifier (2, 4, 5 or 14 classes) with gradual unfreezing: one
    epoch each with the last 1, 2 and 3 layer groups unfrozen, then 2 with all, each its own
    slanted triangular cycle (2e-2, 1e-2, 5e-3, 1e-3, the top group's rate recorded): from ln C
    to 25-45% of it in the first epoch, 10-40% lower at each unfreeze; 3-15% of the run, its
    batch noise 15-30%, skewed; float32."""
    return _ulmfit(n, rng)["loss"]


def _tinybert_pipeline(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    shares = np.array([rng.uniform(0.05, 0.15), 0, rng.uniform(0.08, 0.15)])
    shares[1] = 1 - shares[0] - shares[2]
    m1, m3 = int(n * shares[0]), int(n * shares[2])
    m2 = n - m1 - m3
    chance = math.log(float(rng.choice([2, 3])))
    # stage 1: the BERT-base teacher fine-tuned for 3 epochs
    k = np.arange(m1, dtype=np.float64)
    lr1 = _linear_warm(k, m1, m1 * 0.1, 2e-5)
    epoch = np.floor(k / (m1 / 3))
    fit = 1 - np.exp(-np.cumsum(lr1 / 2e-5) / (m1 * rng.uniform(0.03, 0.1)))
    t_end = chance * rng.uniform(0.2, 0.5)
    teacher = chance * rng.uniform(1.0, 1.1) + (t_end - chance) * fit
    teacher *= rng.uniform(0.6, 0.85) ** epoch  # later epochs: examples seen before
    teacher *= _gamma(m1, rng, rng.uniform(0.3, 0.5))
    # stage 2: intermediate-layer distillation on the augmented data (attention + hidden MSE)
    k = np.arange(m2, dtype=np.float64)
    lr2 = _linear_warm(k, m2, m2 * 0.1, 5e-5)
    s0 = rng.uniform(5, 30)
    mse = _power(np.cumsum(lr2 / 5e-5), s0, s0 * rng.uniform(0.2, 0.4), m2 / _log_uniform(rng, 20, 200), 0.7)
    mse *= _noise(m2, rng, rng.uniform(0.02, 0.06))
    # stage 3: prediction-layer distillation, soft cross-entropy to the teacher (T = 1)
    k = np.arange(m3, dtype=np.float64)
    lr3 = _linear_warm(k, m3, m3 * 0.1, 3e-5)
    ent = t_end * rng.uniform(0.3, 0.7)  # the teacher's entropy on augmented inputs
    s3 = chance * rng.uniform(0.6, 0.9)
    pred = _power(
        np.cumsum(lr3 / 3e-5), s3, ent * rng.uniform(1.1, 1.4), m3 / _log_uniform(rng, 10, 100), 0.8
    )
    pred *= _gamma(m3, rng, rng.uniform(0.1, 0.2))
    return {"loss": _f32(np.r_[teacher, mse, pred]), LR: np.r_[lr1, lr2, lr3]}


def tinybert_pipeline(n: int, rng: np.random.Generator) -> np.ndarray:
    """A task-specific distillation pipeline in one process, as TinyBERT's recipe runs it (Jiao
    et al. 2020, huawei-noah/Pretrained-Language-Model `task_distill.py`, its two distillation
    steps chained after the teacher's fine-tune, one global step): (1) BERT-base fine-tuned on a
    GLUE task (2 or 3 classes) for 3 epochs at 2e-5, warm-up 10% and linear decay (recorded for
    each stage), from ln C to 20-50% of it and 15-40% lower each later epoch, batch noise 30-50%
    (32 examples); (2) intermediate-layer distillation of a 4-layer student on the augmented
    data (20x), the sum of the attention and hidden-state MSEs, from 5-30 to 20-40% of it at
    5e-5, noise 2-6%; (3) prediction-layer distillation at 3e-5, the soft cross-entropy to the
    teacher from 60-90% of ln C to 1.1-1.4x the teacher's entropy; stage shares 5-15%, the rest,
    8-15%; float32."""
    return _tinybert_pipeline(n, rng)["loss"]


def codistillation(n: int, rng: np.random.Generator) -> np.ndarray:
    """Codistillation of a language model (Anil et al. 2018, "Large scale distributed neural
    network training through online distillation"): two copies trained side by side on
    different data, and after a burn-in of 5-30% of the run each adds w x the cross-entropy
    to the other's predictions (w 0.5 or 1) from the other's checkpoint, reloaded every
    50-2,000 steps (stale predictions). The logged total: the token cross-entropy (from ln V to
    2.8-4.0 along a power law, 1-4% lower by the end for the regularization); at the burn-in
    it jumps by w x (the peer's entropy, about its own cross-entropy, + the two's KL, 3-10% of
    it); at each reload the KL jumps back up by 2-10% of the level and falls as the model
    follows; noise 1-3%."""
    t = np.arange(n, dtype=np.float64)
    start = math.log(float(rng.choice([32_000, 50_257, 256_000])))
    ce = _power(t, start, rng.uniform(2.8, 4.0), n / _log_uniform(rng, 50, 500), rng.uniform(0.5, 0.8))
    burn = n * rng.uniform(0.05, 0.3)
    on = t >= burn
    gain = rng.uniform(0.01, 0.04) * (1 - np.exp(-np.maximum(t - burn, 0) / (0.2 * n)))
    ce = ce * (1 - gain)
    every = _log_uniform(rng, 50, 2000)
    since = np.where(on, (t - burn) % every, 0.0)
    kl = ce * (
        rng.uniform(0.03, 0.1) + rng.uniform(0.02, 0.1) * np.exp(-since / (every * rng.uniform(0.2, 0.5)))
    )
    w = float(rng.choice([0.5, 1.0]))
    total = ce + np.where(on, w * (ce * rng.uniform(0.85, 1.0) + kl), 0.0)
    return total * _noise(n, rng, rng.uniform(0.01, 0.03), _maybe_rho(rng))


def pbt_in_turns(n: int, rng: np.random.Generator) -> np.ndarray:
    """Population-based training written by hand in one process (Jaderberg et al. 2017; the
    "PBT from scratch" tutorials): 4-16 workers stepped in turns, `for w in population: loss =
    w.step(); writer.add_scalar("loss", loss, global_step); global_step += 1`, so the series
    cycles through the workers; each worker's hyperparameters set its level (spread 5-30%) and
    its speed (20%); every 1-5% of the run the bottom quarter copies the top quarter's weights
    and perturbs their hyperparameters (x0.8 or x1.2): its level jumps to the donor's, off by
    -5-+5%, and the spread shrinks; the levels fall from 1.5-4 along a power law to 0.1-1;
    batch noise 3-10%, each worker's own."""
    p = int(rng.choice([4, 8, 10, 16]))
    steps = -(-n // p)
    t = np.arange(steps, dtype=np.float64)
    start, floor = rng.uniform(1.5, 4.0), rng.uniform(0.1, 1.0)
    scale = steps / _log_uniform(rng, 30, 300)
    spread = rng.uniform(0.05, 0.3)
    mult = _noise(p, rng, spread)
    speed = _noise(p, rng, 0.2)
    level = np.stack([_power(t * speed[w], start, floor, scale, 0.8) for w in range(p)]) * mult[:, None]
    every = max(int(steps * rng.uniform(0.01, 0.05)), 1)
    factor = np.ones((p, steps))
    for at in range(every, steps, every):
        now = level[:, at - 1] * factor[:, at - 1]
        order = np.argsort(now)
        q = max(p // 4, 1)
        for bad, good in zip(order[::-1][:q], order[:q], strict=True):  # the worst copy the best
            factor[bad, at:] *= now[good] / now[bad] * rng.uniform(0.95, 1.05)
    sd = rng.uniform(0.03, 0.1, p)
    x = level * factor * np.stack([_noise(steps, rng, sd[w]) for w in range(p)])
    return x.T.ravel()[:n]


def _darts(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    m1 = int(n * rng.uniform(0.04, 0.15))
    m2 = n - m1
    k1 = np.arange(m1, dtype=np.float64)
    lr1 = 0.001 + (0.025 - 0.001) * 0.5 * (1 + np.cos(np.pi * k1 / m1))
    chance = math.log(10)
    a1 = np.cumsum(lr1 / 0.025)
    search = _power(a1, chance, rng.uniform(0.1, 0.4), m1 / _log_uniform(rng, 5, 30), 0.9)
    search *= (1 + rng.uniform(0.05, 0.15) * lr1 / 0.025) * _gamma(m1, rng, rng.uniform(0.15, 0.3))
    k2 = np.arange(m2, dtype=np.float64)
    lr2 = 0.025 * 0.5 * (1 + np.cos(np.pi * k2 / m2))
    a2 = np.cumsum(lr2 / 0.025)
    aux = 1 + 0.4 * rng.uniform(1.1, 1.4)  # CE + 0.4 x the auxiliary head's CE
    drop = 0.2 * k2 / m2  # drop path, raised linearly
    ce = _power(a2, chance, rng.uniform(0.03, 0.12), m2 / _log_uniform(rng, 10, 100), 0.9)
    ce = ce * (1 + rng.uniform(0.05, 0.2) * lr2 / 0.025) + drop * rng.uniform(0.3, 1.0)
    retrain = aux * ce * _gamma(m2, rng, rng.uniform(0.15, 0.3))
    return {"loss": _f32(np.r_[search, retrain]), LR: np.r_[lr1, lr2]}


def darts_search_retrain(n: int, rng: np.random.Generator) -> np.ndarray:
    """DARTS on CIFAR-10 in one script (Liu et al. 2019, quark0/darts: `train_search.py` then
    `train.py` on the derived genotype): the search trains the 8-cell supernet's weights on
    half the training set (alternating with architecture steps on the other half, not logged)
    for 50 epochs at 0.025 on a cosine to 0.001, the loss from ln 10 to 0.1-0.4; then a fresh
    20-cell network is trained from scratch for 600 epochs (cosine from 0.025 to 0, recorded
    with the search's) with cutout, drop path raised linearly to 0.2 and the auxiliary head at
    weight 0.4: the logged total restarts at (1.44-1.56) x ln 10, falls along the rate's area to
    that factor x 0.03-0.12, held up late by the drop path; the search 4-15% of the steps (its
    epochs shorter); batch noise 15-30%, skewed; float32."""
    return _darts(n, rng)["loss"]


def _plateau_early_stop(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    chance = _ce_classes(rng)
    end, vend = chance * rng.uniform(0.02, 0.15), chance * rng.uniform(0.15, 0.35)
    sc = rng.uniform(0.3, 3)  # epochs at the first rate to fall most of the way
    peak = float(rng.choice([1e-3, 3e-4, 0.1]))
    factor = float(rng.choice([0.1, 0.2, 0.5]))
    lr_pat, es_pat = int(rng.integers(2, 6)), int(rng.integers(6, 16))
    star, rise = rng.uniform(5, 20), rng.uniform(0.005, 0.03)
    held_t, held_v = rng.uniform(0.1, 0.3), rng.uniform(0.05, 0.2)
    jitter = rng.uniform(0.005, 0.02)
    rates, areas, vals = [], [0.0], []
    rate, best_lr, bad, best, wait = peak, math.inf, 0, math.inf, 0
    for _ in range(300):
        a = areas[-1] + rate / peak
        v = _power(a, chance, vend, sc, 0.8) * (1 + held_v * rate / peak) + vend * rise * max(a - star, 0)
        v += vend * rise * 0.3 * len(vals) / 10 * (a > star)  # memorization goes on at low rates
        v *= 1 + jitter * rng.standard_normal()
        rates.append(rate)
        areas.append(a)
        vals.append(v)
        best, wait = (v, 0) if v < best else (best, wait + 1)
        if wait >= es_pat:  # EarlyStopping(patience): the run ends here
            break
        best_lr, bad = (v, 0) if v < best_lr * (1 - 1e-4) else (best_lr, bad + 1)
        if bad > lr_pat:  # ReduceLROnPlateau(factor, patience)
            rate, bad = rate * factor, 0
    epochs = len(vals)
    s, v_steps = _epoch_passes(epochs, n, rng.uniform(0.1, 0.25))
    batches = _gamma(v_steps, rng, rng.uniform(0.05, 0.2))
    batches /= batches.mean()
    cv = rng.uniform(0.05, 0.15)
    loss, lr, mode = [], [], []
    for e in range(epochs):
        a = areas[e] + (np.arange(s) + 0.5) / s * rates[e] / peak
        level = _power(a, chance, end, sc, 0.8) * (1 + held_t * rates[e] / peak)
        loss += [level * _gamma(s, rng, cv), vals[e] * batches]
        lr.append(np.full(s + v_steps, rates[e]))
        mode += [np.full(s, TRAIN), np.full(v_steps, EVAL)]
    return {
        "loss": _f32(np.concatenate(loss)[:n]),
        LR: np.concatenate(lr)[:n],
        MODE: np.concatenate(mode)[:n],
    }


def plateau_early_stop(n: int, rng: np.random.Generator) -> np.ndarray:
    """A PyTorch classifier (10-1,000 classes) with `ReduceLROnPlateau(optimizer, factor=0.1,
    0.2 or 0.5, patience=2-5)` stepped on the validation loss and pytorchtools' `EarlyStopping
    (patience=6-15)` (Keras users: the same two callbacks): each epoch ends with a validation
    pass (EVAL steps, 10-25% of an epoch, the same batches every time), and the run ends where
    early stopping stops it. The training loss falls from ln C along the rate's area towards
    2-15% of it, 10-30% held up by the rate, and steps down after each cut (recorded); the
    validation loss falls towards 15-35% of ln C, 5-20% held up, drops at the cuts, and after
    5-20 epochs' worth of area creeps up (0.5-3% of it per epoch: slight overfitting) until the
    patience runs out; 0.5-2% epoch-to-epoch jitter; training noise 5-15%, skewed; float32."""
    return _plateau_early_stop(n, rng)["loss"]


def _hf_eval_overfit(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    epochs = int(rng.integers(3, 6))
    every = int(n * rng.uniform(0.02, 0.05))
    v = int(min(rng.integers(20, 201), every * 0.3))
    passes = n // (every + v)
    m = n - passes * v  # training steps
    k = np.arange(m, dtype=np.float64)
    peak = float(rng.choice([1e-5, 2e-5, 3e-5, 5e-5]))
    rate = _linear_warm(k, m, m * rng.uniform(0.0, 0.1), peak)
    chance = math.log(float(rng.choice([2, 3])))
    f1 = chance * rng.uniform(0.3, 0.6)
    fit = 1 - np.exp(-np.cumsum(rate / peak) / (m / epochs * rng.uniform(0.1, 0.3)))
    level = chance * rng.uniform(1.0, 1.1) + (f1 - chance) * fit
    drop = rng.uniform(0.5, 0.8)
    ep = k / (m / epochs)
    level *= drop ** np.clip(np.floor(ep) + np.clip((ep % 1) * (m / epochs) / 100, 0, 1) - 1, 0, None)
    cv = np.minimum(rng.uniform(0.2, 0.4) * (chance / level) ** 0.3, 1.0)
    train = level * _gamma(m, rng, cv)
    vmin = f1 * rng.uniform(0.9, 1.3)
    mem = np.maximum(np.log(np.maximum(f1 / level, 1.0)), 0)
    val = chance + (vmin - chance) * fit
    val = val * (1 + rng.uniform(0.1, 0.3) * mem)
    batches = _gamma(v, rng, rng.uniform(0.2, 0.5))
    batches /= batches.mean()
    loss, lr, mode = [], [], []
    for j in range(passes + 1):
        lo, hi = j * every, (j + 1) * every if j < passes else m
        loss.append(train[lo:hi])
        lr.append(rate[lo:hi])
        mode.append(np.full(hi - lo, TRAIN))
        if j < passes:
            loss.append(val[hi - 1] * batches)
            lr.append(np.full(v, rate[hi - 1]))
            mode.append(np.full(v, EVAL))
    return {
        "loss": _f32(np.concatenate(loss)[:n]),
        LR: np.concatenate(lr)[:n],
        MODE: np.concatenate(mode)[:n],
    }


def hf_eval_overfit(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Hugging Face `Trainer` fine-tune of a pretrained encoder on a small binary or 3-class
    task (`eval_strategy="steps"`, `eval_steps` every 2-5% of the run, `load_best_model_at_end`;
    3-5 epochs at 1e-5-5e-5, warm-up 0-10%, linear decay, recorded): the eval pass (20-200 EVAL
    steps, the same batches every time, their own spread 20-50%) follows the training loss's
    first fall from ln C to 30-60% of it, bottoms out within the first epoch or two, and then
    rises by 10-30% per nat of memorization as later epochs drive the training loss down
    (20-50% lower each epoch, over 100 steps: the examples were seen before), the familiar
    "eval loss goes up while accuracy holds"; training batches of 16-32 with skewed noise of
    20-40%, growing as the loss falls (up to 100%); float32. See `series` for the modes."""
    return _hf_eval_overfit(n, rng)["loss"]


def _nmt_valid_generate(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    epochs = int(rng.integers(25, 101))
    per = -(-n // epochs)
    v = max(int(min(rng.integers(20, 201), per * 0.05)), 2)
    g = int(min(v * rng.uniform(2, 8), per * 0.2))  # beam search for BLEU: no loss
    s = per - v - g
    m = s * epochs
    k = np.arange(m, dtype=np.float64)
    warm = m * rng.uniform(0.01, 0.05)
    peak = float(rng.choice([5e-4, 7e-4, 1e-3]))
    rate = peak * np.minimum((k + 1) / warm, np.sqrt(warm / (k + 1)))
    area = np.cumsum(rate / peak)
    start = math.log(float(rng.choice([32_000, 40_000])))
    floor = rng.uniform(3.0, 4.0)  # label smoothing 0.1 keeps it up
    scale = area[-1] / _log_uniform(rng, 20, 200)
    train = _power(area, start, floor, scale, 0.7)
    val = _power(area, start, floor * rng.uniform(1.02, 1.1), scale, 0.7)
    late = np.clip((k / m - rng.uniform(0.4, 0.8)) / 0.5, 0, None)
    val *= 1 + rng.uniform(0.01, 0.04) * late
    train *= _noise(m, rng, rng.uniform(0.02, 0.05))
    batches = _noise(v, rng, rng.uniform(0.05, 0.15))
    loss, lr, mode = [], [], []
    for e in range(epochs):
        lo, hi = e * s, (e + 1) * s
        loss += [train[lo:hi], val[hi - 1] * batches, np.full(g, val[hi - 1])]  # g: never saved
        lr.append(np.r_[rate[lo:hi], np.full(v + g, rate[hi - 1])])
        mode += [np.full(s, TRAIN), np.full(v, EVAL), np.full(g, EVAL_UNSAVED)]
    return {
        "loss": _f32(np.concatenate(loss)[:n]),
        LR: np.concatenate(lr)[:n],
        MODE: np.concatenate(mode)[:n],
    }


def nmt_valid_generate(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Transformer NMT model trained with fairseq (Ott et al. 2018; `--arch transformer
    --criterion label_smoothed_cross_entropy --lr-scheduler inverse_sqrt --eval-bleu`): each of
    25-100 epochs ends with validation, first the teacher-forced loss over the valid set (20-200
    EVAL steps that save their loss, the same batches each time, at most 5% of an epoch) and then
    beam-search generation for BLEU (2-8x as many EVAL steps that save none, at most 20%). The
    training loss falls from ln of a 32k-40k vocabulary along the rate's area to 3.0-4.0 (label
    smoothing keeps it up), noise 2-5%; the valid loss to 2-10% above that, then, from 40-80% of
    the run, up by 1-4% per half run while BLEU still improves (NMT's known over-confidence).
    The rate warms up over 1-5% to 5e-4-1e-3 and falls as 1/sqrt (recorded); float32. See
    `series` for the modes."""
    return _nmt_valid_generate(n, rng)["loss"]


def _repeated_epochs_lm(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    reps = int(rng.integers(4, 17))
    every = int(n * rng.uniform(0.01, 0.03))
    v = int(min(rng.integers(50, 201), every * 0.2))
    passes = n // (every + v)
    m = n - passes * v
    k = np.arange(m, dtype=np.float64)
    peak = float(rng.choice([3e-4, 6e-4, 1e-3]))
    rate = _warm_cosine(k, m, m * rng.uniform(0.005, 0.02), peak, 0.1)
    area = np.cumsum(rate / peak)
    start = math.log(float(rng.choice([32_000, 50_257])))
    base = _power(area, start, rng.uniform(2.2, 3.2), m / _log_uniform(rng, 50, 500), rng.uniform(0.4, 0.7))
    ep = k / (m / reps)
    mem = rng.uniform(0.005, 0.02) * np.floor(ep) ** 1.3  # seen tokens are cheaper each pass
    train = base * (1 + rng.uniform(0.02, 0.08) * rate / peak) * (1 - np.minimum(mem, 0.3))
    train *= _noise(m, rng, rng.uniform(0.01, 0.03), _maybe_rho(rng))
    ep0 = rng.uniform(3, 6)
    val = base * rng.uniform(1.0, 1.02) * (1 + rng.uniform(0.001, 0.005) * np.maximum(ep - ep0, 0) ** 1.5)
    batches = _noise(v, rng, rng.uniform(0.03, 0.1))
    loss, lr, mode = [], [], []
    for j in range(passes + 1):
        lo, hi = j * every, (j + 1) * every if j < passes else m
        loss.append(train[lo:hi])
        lr.append(rate[lo:hi])
        mode.append(np.full(hi - lo, TRAIN))
        if j < passes:
            loss.append(val[hi - 1] * batches)
            lr.append(np.full(v, rate[hi - 1]))
            mode.append(np.full(v, EVAL))
    return {
        "loss": _f32(np.concatenate(loss)[:n]),
        LR: np.concatenate(lr)[:n],
        MODE: np.concatenate(mode)[:n],
    }


def repeated_epochs_lm(n: int, rng: np.random.Generator) -> np.ndarray:
    """A data-constrained language model trained for 4-16 epochs over its unique tokens
    (Muennighoff et al. 2023, "Scaling data-constrained language models": up to ~4 epochs about
    as good as fresh data, then diminishing, and the validation loss turning up after many),
    AdamW at 3e-4-1e-3 on a warm cosine to 10% (recorded), a held-out evaluation every 1-3% of
    the run (50-200 EVAL steps, the same batches each time): the training loss from ln V along
    the rate's area to 2.2-3.2, 2-8% held up by the rate, and 0.5-2% x epoch^1.3 lower for the
    tokens it has seen (a small drop at each epoch boundary); the validation loss follows the
    fresh-data curve 0-2% above it until 3-6 epochs and then rises by 0.1-0.5% x
    (epochs beyond)^1.5 as the model memorizes; noise 1-3%; float32. See `series` for the modes."""
    return _repeated_epochs_lm(n, rng)["loss"]


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "kfold_cv": kfold_cv,
    "optuna_pruned_sweep": optuna_pruned_sweep,
    "successive_halving": successive_halving,
    "lr_range_test": lr_range_test,
    "progan_growing": progan_growing,
    "ulmfit": ulmfit,
    "tinybert_pipeline": tinybert_pipeline,
    "codistillation": codistillation,
    "pbt_in_turns": pbt_in_turns,
    "darts_search_retrain": darts_search_retrain,
    "plateau_early_stop": plateau_early_stop,
    "hf_eval_overfit": hf_eval_overfit,
    "nmt_valid_generate": nmt_valid_generate,
    "repeated_epochs_lm": repeated_epochs_lm,
}
# the kinds that record more than their loss: {"loss", LR, MODE} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "kfold_cv": _kfold_cv,
    "optuna_pruned_sweep": _optuna_pruned_sweep,
    "successive_halving": _successive_halving,
    "lr_range_test": _lr_range_test,
    "ulmfit": _ulmfit,
    "tinybert_pipeline": _tinybert_pipeline,
    "darts_search_retrain": _darts,
    "plateau_early_stop": _plateau_early_stop,
    "hf_eval_overfit": _hf_eval_overfit,
    "nmt_valid_generate": _nmt_valid_generate,
    "repeated_epochs_lm": _repeated_epochs_lm,
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
def val_pass_trains(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A hand-written loop whose `run_epoch(loader, train)` logs every batch's loss under one
    tag and global step, the training batches and then the validation pass's (healthy: the
    validation batches, the same each epoch, 5-40% above the training trend and that gap
    growing by up to 1.5x; a classifier from ln C to 5-25% of it over 30-300 epochs, the pass
    5-20% of an epoch; batch noise 5-15%). Resumed at 30-70% of the run by a refactor that
    drops the `if train:` around `loss.backward(); optimizer.step()`: each validation pass now
    trains on the validation set, at the current rate. Within a pass its values fall as the
    model fits the batches (by 20-60%), and from pass to pass it memorizes them: the validation
    values go below the training loss, towards 2-20% of it, with a time constant of 2-10
    passes; the training batches barely change. The onset is the first validation pass after
    the resume."""
    epochs = int(rng.integers(30, 301))
    span = n / epochs
    val = max(int(span * rng.uniform(0.05, 0.2)), 2)
    t = np.arange(n, dtype=np.float64)
    chance = _ce_classes(rng)
    trend = _power(t, chance, chance * rng.uniform(0.05, 0.25), n / _log_uniform(rng, 30, 300), 0.8)
    x = trend * _gamma(n, rng, rng.uniform(0.05, 0.15))
    gap = rng.uniform(1.05, 1.4) * (1 + rng.uniform(0, 0.5) * t / n)
    batches = _gamma(val, rng, rng.uniform(0.05, 0.2))
    resume = n * rng.uniform(0.3, 0.7)
    fall, floor, tau = rng.uniform(0.2, 0.6), rng.uniform(0.02, 0.2), rng.uniform(2, 10)
    onset, seen = -1, 0
    for e in range(epochs):
        s0 = int((e + 1) * span) - val
        m = min(val, n - s0)
        healthy = trend[s0] * gap[s0] * batches[:m]
        if s0 < resume:
            x[s0 : s0 + m] = healthy
            continue
        if onset < 0:
            onset = s0
        kept = floor + (1 - floor) * math.exp(-seen / tau)
        within = 1 - fall * (1 - np.exp(-np.arange(m) / (m / 3))) * kept
        x[s0 : s0 + m] = np.minimum(healthy, trend[s0] * batches[:m]) * kept * within
        seen += 1
    return _f32(x), onset


def fold_model_leak(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """K-fold cross-validation in one process (healthy as `kfold_cv`, here without the
    validation steps and without early stopping: 5 or 10 folds of 10-40 epochs, each a warm
    cosine from 3e-4-0.1 planned over the fold, the loss from ln C to 3-20% of it, 5-15% held
    up by the rate, batch noise 5-15%) whose model is built once, above `for fold in ...`
    (`model = Net()` moved out of the loop in a refactor; only the optimizer and scheduler are
    rebuilt): from the second fold on the model is the one already trained, and the validation
    fold it is scored on was in its training data. At the second fold the loss does not go
    back to ln C: the rate's re-warm lifts it by the held-up share, the batches of the fold that
    was held out (1/(k - 1) of them) cost 1.2-2x for about an epoch, and then, trained again and again on data it has seen, it falls
    fold after fold below a single fold's end, towards 5-30% of it. The onset is the second
    fold's first step."""
    k = int(rng.choice([5, 10]))
    steps = -(-n // k)
    chance = _ce_classes(rng)
    end = chance * rng.uniform(0.03, 0.2)
    epochs = int(rng.integers(10, 41))
    scale = steps / rng.uniform(5, 30)
    peak = float(rng.choice([3e-4, 1e-3, 0.05, 0.1]))
    held, cv = rng.uniform(0.05, 0.15), rng.uniform(0.05, 0.15)
    local = np.arange(steps, dtype=np.float64)
    rate = _warm_cosine(local, steps, steps * 0.05, peak)
    floor_m, tau = rng.uniform(0.05, 0.3), steps * rng.uniform(0.5, 2)
    new, ep = rng.uniform(1.2, 2.0), steps / epochs
    out = []
    for f in range(k):
        if f == 0:
            level = _power(local, chance, end, scale, 0.8)
        else:
            trained = local + f * steps
            mem = floor_m + (1 - floor_m) * np.exp(-(trained - steps) / tau)
            level = _power(trained, chance, end, scale, 0.8) * mem
            level *= 1 + (new - 1) / (k - 1) * np.exp(-local / ep)
        out.append(level * (1 + held * rate / peak) * _gamma(steps, rng, cv))
    return _f32(np.concatenate(out)[:n]), steps


def stage_scheduler_exhausted(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Intermediate-task transfer in one script (STILTs, Phang et al. 2018: an encoder
    fine-tuned on MNLI, then on a small target task with a new head, 2-5 classes), built on a
    hand-written trainer class that makes its optimizer and `get_linear_schedule_with_warmup
    (num_training_steps=...)` once, in `__init__`, from the first stage's length, and is called
    again for the second stage: the LambdaLR's factor is `max(0, (total - step) / (total -
    warm))`, 0 past the first stage's end, so the second stage runs at a rate of exactly 0
    (AdamW's decay too). Healthy part: MNLI's loss from ln 3 to 35-55% of it along the rate's
    area, batch noise 15-30%. At the second stage (at 40-80% of the run) the new head's loss
    starts at ln C x 1.0-1.15 (random logits) and stays there, only its batch noise (20-40%,
    dropout still on) moving, where the healthy run falls to 10-40% of it. The onset is the
    second stage's first step."""
    t0 = int(n * rng.uniform(0.4, 0.8))
    k = np.arange(t0, dtype=np.float64)
    rate = _linear_warm(k, t0, t0 * rng.uniform(0.0, 0.1), 2e-5)
    area = np.cumsum(rate / 2e-5)
    first = _power(
        area, math.log(3) * 1.05, math.log(3) * rng.uniform(0.35, 0.55), t0 / _log_uniform(rng, 20, 200), 0.8
    )
    first *= _gamma(t0, rng, rng.uniform(0.15, 0.3))
    c = math.log(float(rng.choice([2, 3, 5])))
    second = c * rng.uniform(1.0, 1.15) * _gamma(n - t0, rng, rng.uniform(0.2, 0.4))
    return _f32(np.r_[first, second]), t0


def teacher_in_train_mode(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Knowledge distillation of a CIFAR-100 or ImageNet student (Hinton et al. 2015; the loss
    alpha T^2 KL(teacher_T || student_T) + (1 - alpha) CE, T 2-4, SGD on a step schedule,
    x0.1 at 50% and 75%: from 5-20 along the rate's area to 5-15% of it, held up 10-30% by the
    rate, skewed batch noise 3-12%), resumed at 30-70% of its run by a refactor into a
    `LightningModule` that holds the teacher as a submodule (`self.teacher = teacher`): the
    trainer's `model.train()` now reaches it, so its dropout and stochastic depth are on and
    its BatchNorm layers normalize with the batch's statistics (and overwrite their running
    ones); `requires_grad_(False)` does not stop either. Its soft targets change from step to
    step: at once the loss jumps 1.3-2.5x, then the student learns their mean and it settles at
    1.2-1.8x the healthy level, its noise 1.5-2x. The onset is the resume."""
    t = np.arange(n, dtype=np.float64)
    rate = 0.1 ** ((t >= n / 2).astype(float) + (t >= 0.75 * n))
    area = np.cumsum(rate)
    start = rng.uniform(5, 20)
    level = _power(area, start, start * rng.uniform(0.05, 0.15), n / _log_uniform(rng, 20, 200), 0.8)
    level *= 1 + rng.uniform(0.1, 0.3) * rate
    t0 = int(n * rng.uniform(0.3, 0.7))
    jump, settle = rng.uniform(1.3, 2.5), rng.uniform(1.2, 1.8)
    settle = min(settle, jump)
    k = np.maximum(t - t0, 0)
    f = np.where(t >= t0, settle + (jump - settle) * np.exp(-k / (n * rng.uniform(0.005, 0.05))), 1.0)
    sd = rng.uniform(0.03, 0.12)
    cv = np.where(t >= t0, sd * rng.uniform(1.5, 2.0), sd)
    return _f32(level * f * _gamma(n, rng, cv)), t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "val_pass_trains": val_pass_trains,
    "fold_model_leak": fold_model_leak,
    "stage_scheduler_exhausted": stage_scheduler_exhausted,
    "teacher_in_train_mode": teacher_in_train_mode,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
