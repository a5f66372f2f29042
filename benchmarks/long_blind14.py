"""A fourteenth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind14`.

    .venv/bin/python benchmarks/long_runs.py --blind14 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of a training job look over 10^5-10^6 logged values (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is classic, non-LLM production and research
training as common tools log it, with the logging idioms that distort the curve: Keras's
running epoch mean read every `steps_per_execution` batches, TensorBoard's smoothing exported
in place of the raw values, a loss averaged over wall-clock windows, Lightning's
`on_step=True, on_epoch=True` columns read back as one series, the TF Object Detection API's
total whose L2 term dominates late, a segmentation loss rebalanced towards a boundary term that
goes below zero, a beta-VAE with a growing capacity, amortized posterior estimation with a
normalizing flow (a loss below zero), a SAC critic, metric learning averaged over the triplets
still active, a competence-based curriculum, an online learner on a drifting stream,
cross-device federated rounds with their daily cycle and prototypical networks' episodes. None
of them is one of `long_runs.KINDS`, `long_blind.KINDS`, ... `long_blind13.KINDS` (nor a bug of
their `BUGS`). They are to be measured once, on the held-out seeds (`SEEDS`), and not tuned on:
a rule changed after looking at them makes them a tuning set.

The interface is `long_blind13`'s: a kind is `(n, rng) -> loss`, each value one logged point;
seven kinds record the learning rate they follow, and `series(kind, n, rng)` gives all that a
run records, the loss and, where the kind has one, the learning rate (`LR`, as the PyTorch hook
records it, in real units, at each logged point). No kind here has evaluation passes, but
`MODE` and its codes are kept for the interface. A bug is `(n, rng) -> (loss, the step its
defect begins)`; one bug ends in NaN on half its seeds, as such jobs do. Only numpy here: the
series can be generated and looked at without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _log_uniform, _noise, _power  # the first blind set's helpers
from long_blind4 import _f32, _gamma  # the fourth's
from long_blind8 import _t_noise  # the eighth's
from long_blind9 import _warm_cosine  # the ninth's
from long_blind11 import _slow_walk  # the eleventh's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE (no kind here records one)
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 14000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _ce_classes(rng: np.random.Generator) -> float:
    """ln C of an image or text classifier: 10-1,000 classes."""
    return math.log(float(rng.choice([10, 100, 200, 1000])))


def _step_lag(t: np.ndarray, times: list[float], factors: list[float], tau: float) -> np.ndarray:
    """A step schedule's rate relative to its first value (x `factors[k]` at `times[k]`), as the
    loss feels it: each cut followed with a lag of `tau` steps."""
    out = np.ones(len(t))
    level = 1.0
    for at, f in zip(times, factors, strict=True):
        after = level * f
        k = t - at
        out -= np.where(k >= 0, (level - after) * (1 - np.exp(-np.maximum(k, 0) / max(tau, 1.0))), 0.0)
        level = after
    return out


def _cosine_area(b: np.ndarray, total: float, warm: float, alpha: float = 0.0) -> np.ndarray:
    """The area (in steps at the peak) under `_warm_cosine(b, total, warm, 1, alpha)` up to `b`,
    in closed form."""
    u = np.clip((b - warm) / max(total - warm, 1.0), 0, 1)
    cos = warm / 2 + alpha * (b - warm) + (1 - alpha) * (total - warm) * (u + np.sin(np.pi * u) / np.pi) / 2
    return np.where(b < warm, b**2 / (2 * max(warm, 1.0)), cos)


def _tb_smooth(x: np.ndarray, w: float) -> np.ndarray:
    """TensorBoard's scalar smoothing (tensorboard/plugins/scalar, `vz_line_chart2`): a debiased
    exponential moving average with the weight `w`, over the points as they come, not the steps."""
    out = np.empty(len(x))
    last = 0.0
    for i, v in enumerate(x):  # 10^5 points: ~0.05 s
        last = last * w + (1 - w) * v
        out[i] = last / (1 - w ** (i + 1))
    return out


def _drift_stream(n: int, rng: np.random.Generator, moving: bool) -> dict[str, np.ndarray]:
    """An online logistic learner's prequential loss on a drifting stream (see
    `hyperplane_drift_stream`); `moving`: the hyperplane always moves (speed > 0)."""
    t = np.arange(n, dtype=np.float64)
    eps = rng.uniform(0.02, 0.1)  # label noise: the Bayes floor
    floor = -(eps * math.log(eps) + (1 - eps) * math.log(1 - eps)) + rng.uniform(0.02, 0.1)
    segs = int(rng.integers(3, 9))
    cuts = np.sort(rng.uniform(0, 1, segs - 1)) * n
    lo = 0.2 if moving else 0.0
    speed = np.where(rng.random(segs) < (1.0 if moving else 0.7), rng.uniform(lo, 1.0, segs), 0.0)
    s = speed[np.searchsorted(cuts, t, side="right")]
    track = rng.uniform(0.05, 0.3)  # the excess loss at full speed: the learner's lag behind it
    learn = (math.log(2) - floor) * np.exp(-t / (n * rng.uniform(0.002, 0.02)))
    return {"t": t, "floor": np.full(n, floor), "speed": s, "track": np.full(n, track), "learn": learn}


# the healthy kinds ----------------------------------------------------------------------------
def _keras_steps_per_execution(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    spe = int(rng.choice([8, 16, 32]))
    epoch = int(rng.integers(200, 3001))
    per = -(-epoch // spe)  # callbacks per epoch: the last execution of an epoch is shorter
    epochs = -(-n // per) + 1
    nb = float(epochs * epoch)
    size = np.full(per, float(spe))
    size[-1] = epoch - spe * (per - 1)
    first = np.r_[0.0, np.cumsum(size)[:-1]]
    e = np.repeat(np.arange(epochs, dtype=np.float64), per)
    s = np.tile(size, epochs)
    mid = e * epoch + np.tile(first, epochs) + s / 2
    last = mid + s / 2 - 1  # the batch after which the callback runs
    peak = float(rng.choice([1e-3, 3e-3, 0.1]))
    warm = nb * rng.uniform(0.005, 0.05)
    alpha = float(rng.choice([0.0, 0.01, 0.1]))
    rel = _warm_cosine(mid, int(nb), warm, 1.0, alpha)
    area = _cosine_area(mid, nb, warm, alpha)
    start = _ce_classes(rng)
    level = _power(area, start, start * rng.uniform(0.05, 0.2), nb / _log_uniform(rng, 30, 300), 0.8)
    level *= 1 + rng.uniform(0.05, 0.2) * rel
    cv = rng.uniform(0.05, 0.2)
    sums = level * rng.gamma(s / cv**2, cv**2)  # the execution's batches: gamma noise of cv each
    run = np.cumsum(sums.reshape(epochs, per), axis=1) / np.cumsum(size)  # the `Mean` tracker
    lr = _warm_cosine(last, int(nb), warm, peak, alpha)
    return {"loss": _f32(run.ravel()[:n]), LR: lr[:n]}


def keras_steps_per_execution(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Keras classifier trained with `model.fit` and `compile(steps_per_execution=8-32)`
    (the TPU / tf.distribute practice; Keras's guide "Customizing what happens in fit"), its
    loss written by a `TensorBoard(update_freq=...)` or a `CSVLogger`-style batch callback:
    callbacks run once per execution, and `logs["loss"]` is the `Mean` loss tracker's value, the
    mean of every batch since the epoch's start (reset by `reset_metrics()` at each epoch), so
    each logged value is a running epoch mean, sampled every 8-32 batches; an epoch of 200-3,000
    batches is not a multiple of that, so its last value comes from a shorter execution. The
    batches' own loss falls from ln C along the area of Keras's `CosineDecay(warmup_target=,
    warmup_steps=)` (0.5-5% warm-up to 1e-3-0.1, to 0-10%, recorded at each logged value) to
    5-20% of it, 5-20% of it held up by the rate; skewed batch noise of 5-20% (before the
    running mean); float32."""
    return _keras_steps_per_execution(n, rng)["loss"]


def tb_smoothed_export(n: int, rng: np.random.Generator) -> np.ndarray:
    """A training loss read back from a TensorBoard event file with `EventAccumulator` (its
    default `size_guidance` keeps a reservoir sample of 10,000 scalars per tag, here of 2-20x
    the values kept, so the kept steps are irregular) and exported with TensorBoard's own
    smoothing applied, as the scalar dashboard draws it and as the widely copied
    `smooth(scalars, weight)` recipes do: a debiased EMA over the points, weight 0.6 (the UI's
    default) or 0.8-0.99. The run below: an image classifier on SGD with a 0.5-3% warm-up and a
    cosine to 0 (1,000 classes or 100), from ln C along the rate's area to 10-30% of it, 10-30%
    held up by the rate; Student-t batch noise of 5-15%; float32 as the event file stores it."""
    r = int(rng.integers(2, 21))
    m = n * r
    kept = np.sort(rng.choice(m, size=n, replace=False)).astype(np.float64)
    start = math.log(float(rng.choice([100, 1000])))
    warm = m * rng.uniform(0.005, 0.03)
    rel = _warm_cosine(kept, m, warm, 1.0)
    area = _cosine_area(kept, m, warm)
    level = _power(area, start, start * rng.uniform(0.1, 0.3), m / _log_uniform(rng, 30, 300), 0.8)
    level *= 1 + rng.uniform(0.1, 0.3) * rel
    raw = _f32(level * _t_noise(n, rng, rng.uniform(0.05, 0.15), rng.uniform(3, 8)))
    w = float(rng.choice([0.6, 0.6, 0.8, 0.9, 0.95, 0.99]))
    return _f32(_tb_smooth(raw, w))


def _lightning_step_epoch_csv(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    every = int(rng.choice([10, 50, 50, 100]))  # Trainer(log_every_n_steps=...), 50 by default
    epoch = int(rng.integers(300, 5001))
    rows_per = epoch // every  # at least, and an epoch row
    epochs = -(-n // rows_per) + 1
    peak = float(rng.choice([1e-3, 3e-3, 0.05, 0.1]))
    e_all = np.arange(epochs, dtype=np.float64)
    lr_e = peak * 0.5 * (1 + np.cos(np.pi * e_all / epochs))  # CosineAnnealingLR(T_max=max_epochs)
    area_before = np.r_[0.0, np.cumsum(lr_e * epoch / peak)]
    start = _ce_classes(rng)
    end = start * rng.uniform(0.03, 0.2)
    scale = epochs * epoch / _log_uniform(rng, 30, 300)
    held = rng.uniform(0.05, 0.25)
    sd = rng.uniform(0.05, 0.2)

    def trend(g: np.ndarray) -> np.ndarray:
        e = np.minimum((g // epoch).astype(int), epochs - 1)
        area = area_before[e] + (g - e * epoch) * lr_e[e] / peak
        return _power(area, start, end, scale, 0.8) * (1 + held * lr_e[e] / peak)

    g = np.arange(every - 1, epochs * epoch, every, dtype=np.float64)  # `train_loss_step` rows
    step_rows = trend(g) * _gamma(len(g), rng, sd)  # that step's own loss
    grid = (np.arange(epochs)[:, None] + (np.arange(16) + 0.5) / 16) * epoch
    mean = trend(grid.ravel()).reshape(epochs, 16).mean(axis=1)
    mean *= 1 + sd / math.sqrt(epoch) * rng.standard_normal(epochs)  # `train_loss_epoch` rows
    ends = (np.arange(epochs) + 1) * epoch - 0.5  # written after the epoch's last step row
    order = np.argsort(np.r_[g, ends], kind="stable")[:n]
    loss = np.r_[step_rows, mean][order]
    e = np.minimum((np.r_[g, ends] // epoch).astype(int), epochs - 1)[order]
    return {"loss": _f32(loss), LR: lr_e[e]}


def lightning_step_epoch_csv(n: int, rng: np.random.Generator) -> np.ndarray:
    """A PyTorch Lightning classifier that logs `self.log("train_loss", loss, on_step=True,
    on_epoch=True)`, read back from its `CSVLogger` `metrics.csv` as one series (the common
    `df.train_loss_step.fillna(df.train_loss_epoch)`): a row every `log_every_n_steps` (10-100,
    50 by default) with that step's own batch loss, and at each epoch's end a row with
    `train_loss_epoch`, the mean of all the epoch's steps: smooth, and above the epoch's last
    steps early in the run (the loss fell during the epoch). The scheduler,
    `CosineAnnealingLR(T_max=max_epochs)`, is stepped per epoch (Lightning's default `interval:
    "epoch"`), so the rate (1e-3-0.1, recorded) is constant within each epoch of 300-5,000
    steps; the loss from ln C along the rate's area to 3-20% of it, 5-25% held up by the rate;
    skewed batch noise of 5-20%; float32."""
    return _lightning_step_epoch_csv(n, rng)["loss"]


def _time_window_mean(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    windows = n + n // 4
    w = rng.uniform(50, 500)  # steps per logging window at the usual throughput
    jitter = _noise(windows, rng, rng.uniform(0.05, 0.15), rng.uniform(0.3, 0.9))
    share = np.ones(windows)
    ckpt = int(rng.integers(20, 121))  # a checkpoint save every so many windows stalls training
    share[ckpt::ckpt] -= rng.uniform(0.3, 1.0, len(share[ckpt::ckpt]))
    m = rng.poisson(w * jitter * np.maximum(share, 0.0))
    epoch = float(np.sum(m[:n])) / 90  # 90 epochs, torchvision's ResNet recipe
    pos = np.cumsum(m) % epoch
    restart = pos < m * rng.uniform(0.1, 0.6)  # the loader's workers restart at each epoch
    m = np.where(restart, (m * rng.uniform(0.3, 0.9)).astype(int), m)
    ends = np.cumsum(m)[m > 0][:n].astype(np.float64)  # a window without a step logs nothing
    m = m[m > 0][:n]
    total = float(ends[-1])
    mid = ends - m / 2
    peak = 0.1 * float(rng.choice([1, 2, 4]))  # 0.1 x batch / 256
    lr = peak * 0.1 ** ((mid >= total / 3).astype(float) + (mid >= 2 * total / 3))
    rel = _step_lag(mid, [total / 3, 2 * total / 3], [0.1, 0.1], total * rng.uniform(0.002, 0.01))
    area = np.minimum(mid, total / 3) + 0.1 * np.clip(mid - total / 3, 0, total / 3)
    area += 0.01 * np.maximum(mid - 2 * total / 3, 0)
    start = math.log(1000)
    level = _power(area, start, rng.uniform(0.6, 1.0), total / _log_uniform(rng, 20, 200), 0.8)
    level *= 1 + rng.uniform(0.3, 0.6) * rel
    sd = rng.uniform(0.05, 0.12)
    x = level * (1 + sd / np.sqrt(m) * rng.standard_normal(len(m)))
    return {"loss": _f32(x[:n]), LR: lr[:n]}


def time_window_mean(n: int, rng: np.random.Generator) -> np.ndarray:
    """An ImageNet ResNet-50 on torchvision's reference recipe (SGD at 0.1 x batch / 256, x0.1
    at epochs 30 and 60 of 90, recorded) whose trainer logs by wall-clock time: every 30-120 s
    the mean of the step losses since the last write (TF Estimator's `LoggingTensorHook(
    every_n_secs=...)`, an in-house `MetricLogger` flushed on a timer), so each value averages
    50-500 steps, as many as the throughput allowed (its jitter 5-15%, correlated); a checkpoint
    save every 20-120 windows stalls training for 30-100% of a window, and the data loader's
    workers restart at each epoch, so those windows average fewer steps (a window with none logs
    nothing). The loss from ln 1,000 along the rate's area to 0.6-1.0, 30-60% held up by the
    rate until each cut (lagging 0.2-1% of the run); per-step noise 5-12% over the square root
    of the window's steps; float32."""
    return _time_window_mean(n, rng)["loss"]


def _tfod_regularization_total(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)  # a logged value every 100 steps
    base = float(rng.choice([0.08, 0.04, 0.004]))  # learning_rate_base (0.004: users' fine-tunes)
    warm = n * rng.uniform(0.01, 0.03)
    lr = _warm_cosine(t, n, warm, base)
    lr = np.where(t < warm, base / 3 + (base - base / 3) * t / warm, lr)  # from warmup_learning_rate
    area = np.cumsum(lr / base)
    scale = n / _log_uniform(rng, 30, 300)
    cls = _power(area, rng.uniform(0.9, 1.4), rng.uniform(0.08, 0.25), scale, 0.8)
    loc = _power(area, rng.uniform(0.5, 0.9), rng.uniform(0.04, 0.15), scale * rng.uniform(1, 3), 0.7)
    r0 = rng.uniform(0.12, 0.35)
    rise = rng.uniform(0.1, 0.6) * (1 - np.exp(-t / (n * rng.uniform(0.01, 0.05))))
    reg = r0 * (1 + rise) * (1 - rng.uniform(0.2, 0.5) * area / area[-1])
    reg *= 1 + 0.001 * _slow_walk(n, rng, n * 0.01)
    b = rng.uniform(0.15, 0.3)
    x = cls * _gamma(n, rng, b) + loc * _gamma(n, rng, b) + reg
    return {"loss": _f32(x), LR: lr}


def tfod_regularization_total(n: int, rng: np.random.Generator) -> np.ndarray:
    """A detector trained with the TensorFlow 2 Object Detection API (`model_main_tf2.py`, the
    SSD MobileNet V2 FPNLite / EfficientDet configs of its model zoo, as its many custom-data
    tutorials fine-tune them), `Loss/total_loss` as it is written every 100 steps: that step's
    classification (focal) loss + localization loss + `regularization_loss`, the config's L2
    regularizer (4e-5 x the squared weights, no batch noise). Momentum SGD on
    `cosine_decay_learning_rate` (learning_rate_base 0.004-0.08, warm-up from a third of it over
    1-3% of the run, recorded): classification from 0.9-1.4 to 0.08-0.25 and localization from
    0.5-0.9 to 0.04-0.15 along the rate's area, while the L2 term, 0.12-0.35 from the
    checkpoint, grows by 10-60% early (the new heads' weights) and is shrunk 20-50% by the
    end, so late in the run it is most of the total and the total's noise (each step's image
    batch: skewed, 15-30% on the two task terms) is small against it; float32."""
    return _tfod_regularization_total(n, rng)["loss"]


def boundary_loss_rebalance(n: int, rng: np.random.Generator) -> np.ndarray:
    """Highly unbalanced segmentation (brain lesions on ISLES / WMH slices) with the boundary
    loss (Kervadec et al. 2019, "Boundary loss for highly unbalanced segmentation", LIVIAETS/
    boundary-loss): alpha x the generalized Dice loss + (1 - alpha) x the boundary loss, the
    mean over pixels of the ground truth's signed distance map (negative inside the lesion)
    times the predicted foreground probability, alpha 1 at first and lowered by 0.01 each epoch
    to 0.01 (the "rebalance" schedule) over 150-300 epochs; Adam at a constant rate. The Dice
    loss from 0.95-1 to 0.15-0.4 (skewed noise of 10-25%: slices with tiny lesions); the
    boundary term is positive while the network still predicts foreground away from the lesion
    (0.5 x the mean distance, 5-30, falling within 0.3-2% of the run to 0.005-0.03; its noise
    50-100%) and goes negative as the lesions' insides are predicted (-0.02 - -0.2; 30-60%), so
    as alpha falls the total slides towards that small, negative value; float32."""
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.integers(150, 301))
    alpha = np.maximum(1 - 0.01 * np.floor(t * epochs / n), 0.01)
    gdl = _power(t, rng.uniform(0.95, 1.0), rng.uniform(0.15, 0.4), n / _log_uniform(rng, 30, 300), 0.8)
    gdl = np.minimum(gdl * _gamma(n, rng, rng.uniform(0.1, 0.25)), 1.0)
    fp = rng.uniform(5, 30) * np.exp(-t / (n * rng.uniform(0.003, 0.02))) + rng.uniform(0.005, 0.03)
    inside = -rng.uniform(0.02, 0.2) * (1 - np.exp(-t / (n * rng.uniform(0.02, 0.1))))
    bnd = fp * _gamma(n, rng, rng.uniform(0.5, 1.0)) + inside * _gamma(n, rng, rng.uniform(0.3, 0.6))
    return _f32(alpha * gdl + (1 - alpha) * bnd)


def beta_vae_capacity(n: int, rng: np.random.Generator) -> np.ndarray:
    """A beta-VAE with a controlled capacity increase (Burgess et al. 2018, "Understanding
    disentangling in beta-VAE"; 1Konny/Beta-VAE `--objective B`): the loss is the Bernoulli
    reconstruction summed over a 64x64 image (dSprites, 3D shapes) + gamma x |KL - C|, gamma 100
    or 1,000, the capacity C raised linearly from 0 to 5-50 nats over 10-60% of the run
    (`C_stop_iter`), then held. The reconstruction starts at 4,096 ln 2 (the decoder's logits 0),
    falls within 0.2-1% of the run to the mean image's 150-400 nats while C is still near 0, and
    then as C grows towards 20-80 nats (most of it over the first half of C's rise), 5-15% more
    slowly after; the KL of the random encoder (0.5-5 nats) is squeezed to C within 0.05-0.5% of
    the run, then tracks it, lagging 0.02-0.1 nats while C rises (caught up within 0.2-1% of the run once C
    stops), each batch of 64 off by
    0.05-0.3 nats (times gamma: a large, skewed part of the loss); 2-4% reconstruction noise;
    float32."""
    t = np.arange(n, dtype=np.float64)
    gamma = float(rng.choice([100.0, 1000.0]))
    cmax = float(rng.choice([5.0, 25.0, 25.0, 50.0]))
    stop = n * rng.uniform(0.1, 0.6)
    c = cmax * np.minimum(t / stop, 1.0)
    r0 = 4096 * math.log(2)
    rc0 = rng.uniform(150, 400)
    rend = rng.uniform(20, 80)
    rec = rend + (rc0 - rend) * np.exp(-c / (cmax / rng.uniform(2, 4)))
    rec *= _power(t, 1.0, 1 - rng.uniform(0.05, 0.15), n / _log_uniform(rng, 10, 100), 0.7)
    rec += (r0 - rc0) * np.exp(-t / (n * rng.uniform(0.002, 0.01) / 3))
    kl0 = rng.uniform(0.5, 5.0) * np.exp(-t / (n * rng.uniform(0.0005, 0.005)))
    catch = np.exp(-np.maximum(t - stop, 0) / (n * rng.uniform(0.002, 0.01)))  # KL catches C up
    bias = rng.uniform(0.02, 0.1) * catch + kl0
    dev = np.abs(bias + rng.uniform(0.05, 0.3) * rng.standard_normal(n))
    return _f32(rec * _noise(n, rng, rng.uniform(0.02, 0.04)) + gamma * dev)


def _bayesflow_npe(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = 5e-4
    lr = _warm_cosine(t, n, 0.0, peak)  # CosineDecay over the iterations, no warm-up
    area = np.cumsum(lr / peak)
    d = int(rng.integers(2, 11))
    start = 1.419 * d * rng.uniform(0.9, 1.1)  # the untrained flow: a standard normal
    gain = rng.uniform(0.5, 3.0)  # ln(prior sd / posterior sd) per parameter
    end = d * (1.419 - gain)
    level = _power(area, start, end, n / _log_uniform(rng, 20, 300), rng.uniform(0.6, 1.0))
    b = int(rng.choice([32, 64, 128]))
    spread = math.sqrt(d / 2) * rng.uniform(1.0, 2.0)  # each simulation's log density
    z = np.clip(rng.standard_t(rng.uniform(3, 6), n), -12, 12)
    return {"loss": _f32(level + spread / math.sqrt(b) * z), LR: lr}


def bayesflow_npe(n: int, rng: np.random.Generator) -> np.ndarray:
    """Amortized neural posterior estimation with online simulation (BayesFlow, Radev et al.
    2020, `Trainer.train_online`: a fresh batch of 32-128 simulations every iteration, no
    epochs over a fixed set; the sbi toolbox's NPE likewise): the loss is -log q(theta | x), the
    negative log posterior density of a conditional normalizing flow (affine coupling) over the
    2-10 standardized parameters, per simulation. The untrained flow is a standard normal, so
    it starts at about 1.42 x d nats; it falls along the area of Adam's cosine decay from 5e-4
    (recorded) to d x (1.42 - g), g = 0.5-3 nats of information per parameter (ln of the prior
    over the posterior width): below zero on most seeds, and still falling; the simulations'
    log densities spread by (1-2) x sqrt(d/2) nats (heavy-tailed: Student-t of 3-6 degrees,
    some parameter regions are multimodal), over sqrt(batch), absolute; float32."""
    return _bayesflow_npe(n, rng)["loss"]


def _sac_level(n: int, rng: np.random.Generator) -> np.ndarray:
    """The SAC critic's loss level at each log: growing with the Q-values as the returns do."""
    t = np.arange(n, dtype=np.float64)
    learned = 1 - np.exp(-((t / (n * rng.uniform(0.1, 0.5))) ** rng.uniform(0.6, 1.5)))
    end = _log_uniform(rng, 2.0, 100.0)
    return end * (0.01 + 0.99 * learned) ** rng.uniform(1.0, 2.0)


def sac_critic(n: int, rng: np.random.Generator) -> np.ndarray:
    """Soft actor-critic on a MuJoCo task (Haarnoja et al. 2018; CleanRL's
    `sac_continuous_action.py`, which writes `losses/qf_loss`, the two Q-networks' mean MSE on a
    replay batch of 256, every 100 global steps; SB3's `train/critic_loss` likewise), the
    targets from Polyak-averaged target networks (tau 0.005), gamma 0.99: the TD errors scale
    with the Q-values, so the loss GROWS as the agent learns: from 1% of its final size to
    2-100 (the return's learning curve, a stretched exponential over 10-50% of the run, to a
    power 1-2), healthy; each logged value is one batch's loss: log-normal, 25-50%, a slow
    wander of 10-30% over 1-5% of the run (the policy's state distribution moves), and
    0.1-0.5% of the batches holding a rare transition with a large TD error (2-10x); float32."""
    level = _sac_level(n, rng)
    wander = np.exp(rng.uniform(0.1, 0.3) * _slow_walk(n, rng, n * rng.uniform(0.01, 0.05)))
    x = level * wander * _noise(n, rng, rng.uniform(0.25, 0.5))
    rare = rng.random(n) < rng.uniform(0.001, 0.005)
    x = np.where(rare, x * rng.uniform(2, 10, n), x)
    return _f32(x)


def pml_avg_nonzero(n: int, rng: np.random.Generator) -> np.ndarray:
    """Deep metric learning with pytorch-metric-learning (Musgrave et al. 2020, "A metric
    learning reality check": CUB-200, Cars196 or Stanford Online Products, a pretrained trunk at
    a constant 1e-6-1e-5, `MPerClassSampler(m=4)`, batches of 32-256): `TripletMarginLoss(margin
    0.05-0.2)` on the triplets of a `TripletMarginMiner("semihard")` or `MultiSimilarityMiner`,
    reduced by the library's default `AvgNonZeroReducer`, the mean over the triplets whose loss
    is above 0. As the embedding improves, the mined triplets still active fall from 30-70% of
    the batch's to 0.1-2%, and those left are the hardest (and the mislabeled ones): the mean
    over them stays near 0.4-0.6 x the margin and creeps UP to 0.5-1.0 x it, healthy, while its
    noise grows as fewer triplets share it (3-8% at first, up to 50%); the batch's classes add
    5-10% (similar species or car models in one batch); float32."""
    t = np.arange(n, dtype=np.float64)
    margin = float(rng.choice([0.05, 0.1, 0.1, 0.2]))
    f0 = rng.uniform(0.3, 0.7)
    f1 = _log_uniform(rng, 0.001, 0.02)
    frac = f1 + (f0 - f1) / (1 + t / (n * _log_uniform(rng, 0.002, 0.05))) ** rng.uniform(0.7, 1.2)
    m0 = rng.uniform(0.4, 0.6)
    m1 = rng.uniform(max(m0, 0.5), 1.0)
    level = margin * (m1 - (m1 - m0) * (frac - f1) / (f0 - f1))
    sd = np.minimum(rng.uniform(0.03, 0.08) * np.sqrt(f0 / frac), 0.5)
    x = level * _gamma(n, rng, sd) * _gamma(n, rng, rng.uniform(0.05, 0.1))
    return _f32(x)


def _competence_curriculum(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm = float(rng.choice([4000, 8000, 16000])) * min(1.0, n / 1e5)
    d = float(rng.choice([512, 1024]))
    lr = d**-0.5 * np.minimum((t + 1) ** -0.5, (t + 1) * warm**-1.5)  # the Transformer's schedule
    area = np.cumsum(lr / lr.max())
    start = math.log(float(rng.choice([32_000, 40_000])))
    base = _power(area, start, rng.uniform(1.5, 2.5), n / _log_uniform(rng, 50, 500), 0.7)
    c0 = 0.01
    horizon = n * rng.uniform(0.05, 0.3)
    comp = np.minimum(1.0, np.sqrt(t * (1 - c0**2) / horizon + c0**2))
    h = rng.uniform(1.5, 3.0)  # the hardest sentences' per-token loss against the easiest
    a = 2 / (1 + h)
    mix = a + a * (h - 1) * comp / 2  # the batch's mean difficulty: uniform over [0, c]
    x = base * mix * _noise(n, rng, rng.uniform(0.02, 0.05))
    return {"loss": _f32(x), LR: lr}


def competence_curriculum(n: int, rng: np.random.Generator) -> np.ndarray:
    """Neural machine translation with competence-based curriculum learning (Platanios et al.
    2019, NAACL: a Transformer, d_model 512 or 1,024, on the Vaswani schedule, warm-up over
    4,000-16,000 steps, recorded): each sentence's difficulty is the CDF of its length or word
    rarity, and a batch is drawn from the sentences whose difficulty is below the competence
    c(t) = min(1, sqrt(t (1 - c0^2) / T + c0^2)), c0 0.01, T 5-30% of the run. The per-token
    loss (label-smoothed, from ln of a 32k-40k BPE vocabulary to 1.5-2.5 along the rate's area)
    is that of the full data times the batch's mix: the hardest sentences cost 1.5-3x the
    easiest, so while the competence grows the loss falls less (or rises) as harder sentences
    come in, continuously, and from T on it is the full data's; noise 2-5%; float32."""
    return _competence_curriculum(n, rng)["loss"]


def hyperplane_drift_stream(n: int, rng: np.random.Generator) -> np.ndarray:
    """Online learning on a drifting stream, test-then-train (prequential evaluation: Gama et
    al. 2013; river's `synth.Hyperplane(mag_change=...)` and MOA's rotating hyperplane, Hulten et
    al. 2001; `SEA` concepts switching; an online logistic model or small MLP updated per batch
    of 32-256 in time order): each batch's log loss is taken before the update. From ln 2 the
    loss falls within 0.2-2% of the run to the label noise's entropy (2-10% flipped) + 0.02-0.1;
    the hyperplane moves at a speed that changes 2-7 times (30% of the stretches still), and
    the learner, lagging behind it, pays 0.05-0.3 nats at full speed; 1-4 abrupt concept
    switches make the model confidently wrong (1-2x ln 2 at once), relearned over 0.3-3% of the
    run (a recurring concept three times faster); absolute batch noise of (0.8-1.5) x the level
    over sqrt(batch); float32."""
    s = _drift_stream(n, rng, moving=False)
    t, floor = s["t"], s["floor"]
    level = floor + s["learn"] + s["track"] * s["speed"]
    k = int(rng.integers(1, 5))
    for j, at in enumerate(np.sort(rng.uniform(0.1, 0.9, k)) * n):
        fast = 3.0 if j > 0 and rng.random() < 0.3 else 1.0
        tau = n * rng.uniform(0.003, 0.03) / 3 / fast
        jump = math.log(2) * rng.uniform(1.0, 2.0) - floor
        level += np.where(t >= at, jump * np.exp(-np.maximum(t - at, 0) / tau), 0.0)
    b = int(rng.choice([32, 64, 128, 256]))
    x = level * (1 + rng.uniform(0.8, 1.5) / math.sqrt(b) * rng.standard_normal(n))
    return _f32(np.maximum(x, 1e-4))


def fl_round_metrics(n: int, rng: np.random.Generator) -> np.ndarray:
    """Cross-device federated learning in production (Gboard's next-word model, Hard et al.
    2018; Bonawitz et al. 2019, "Towards federated learning at scale": devices join when idle,
    charging and on Wi-Fi, so who is available follows the day), logged once per round as
    TensorFlow Federated's `build_weighted_fed_avg` reports it: `client_work/train/loss`, the
    example-weighted mean of the sampled clients' training loss over their local epochs. Each
    round 50-500 clients report (fewer at the day's low, down to 30-70% of that); a client's
    loss under the global model is its own (non-IID: log-normal, 20-50%), its local epochs take
    2-8% off the mean; 50-300 rounds a day, and the population of the hour shifts the mean by
    2-8% in a daily cycle; a next-word cross-entropy from ln 10,000 along a power law in the
    rounds to 3.3-4.5; float32."""
    t = np.arange(n, dtype=np.float64)
    level = _power(t, math.log(10_000), rng.uniform(3.3, 4.5), n / _log_uniform(rng, 20, 200), 0.7)
    level *= 1 - rng.uniform(0.02, 0.08)
    day = rng.uniform(50, 300)
    phase = 2 * np.pi * t / day + rng.uniform(0, 2 * np.pi)
    level *= 1 + rng.uniform(0.02, 0.08) * (0.8 * np.sin(phase) + 0.2 * np.sin(2 * phase + 1.0))
    k0 = rng.uniform(50, 500)
    low = rng.uniform(0.3, 0.7)
    k = np.maximum(k0 * (low + (1 - low) * 0.5 * (1 + np.cos(phase - 0.7))), 5)
    spread = rng.uniform(0.2, 0.5) * 1.4  # the clients' spread, inflated by the example weights
    x = level * (1 + spread / np.sqrt(k) * rng.standard_normal(n))
    return _f32(x)


def _protonet_episodes(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    halvings = int(rng.integers(5, 16))
    every = n / (halvings + 1)
    lr = 1e-3 * 0.5 ** np.floor(t / every)
    area = np.cumsum(lr / 1e-3)
    omniglot = rng.random() < 0.5
    way = 60.0 if omniglot else float(rng.choice([20, 30]))
    start = math.log(way) * rng.uniform(1.0, 1.1)
    end = rng.uniform(0.03, 0.1) if omniglot else rng.uniform(0.4, 1.0)
    level = _power(area, start, end, n / _log_uniform(rng, 50, 500), rng.uniform(0.6, 1.0))
    level *= 1 + rng.uniform(0.05, 0.15) * lr / 1e-3
    cv = np.minimum(rng.uniform(0.08, 0.15) * (start / level) ** 0.3, 0.6)
    return {"loss": _f32(level * _gamma(n, rng, cv)), LR: lr}


def protonet_episodes(n: int, rng: np.random.Generator) -> np.ndarray:
    """Few-shot learning with prototypical networks (Snell et al. 2017; jakesnell/prototypical-
    networks, learn2learn's examples): one episode per step, trained at a higher way than it is
    tested (60-way on Omniglot, 20- or 30-way on miniImageNet, 5 shots, 15 queries a class),
    Adam at 1e-3 halved every so many episodes (2,000 in the paper; 5-15 halvings here,
    recorded). The loss, the queries' cross-entropy against the prototypes' softmax, starts at
    about ln(way) and falls along the rate's area to 0.03-0.1 (Omniglot) or 0.4-1.0
    (miniImageNet), 5-15% of it held up by the rate; each episode's classes make their own
    difficulty (similar characters or breeds together): skewed noise of 8-15%, growing as the
    loss falls (up to 60%); float32."""
    return _protonet_episodes(n, rng)["loss"]


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "keras_steps_per_execution": keras_steps_per_execution,
    "tb_smoothed_export": tb_smoothed_export,
    "lightning_step_epoch_csv": lightning_step_epoch_csv,
    "time_window_mean": time_window_mean,
    "tfod_regularization_total": tfod_regularization_total,
    "boundary_loss_rebalance": boundary_loss_rebalance,
    "beta_vae_capacity": beta_vae_capacity,
    "bayesflow_npe": bayesflow_npe,
    "sac_critic": sac_critic,
    "pml_avg_nonzero": pml_avg_nonzero,
    "competence_curriculum": competence_curriculum,
    "hyperplane_drift_stream": hyperplane_drift_stream,
    "fl_round_metrics": fl_round_metrics,
    "protonet_episodes": protonet_episodes,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "keras_steps_per_execution": _keras_steps_per_execution,
    "lightning_step_epoch_csv": _lightning_step_epoch_csv,
    "time_window_mean": _time_window_mean,
    "tfod_regularization_total": _tfod_regularization_total,
    "bayesflow_npe": _bayesflow_npe,
    "competence_curriculum": _competence_curriculum,
    "protonet_episodes": _protonet_episodes,
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
def polyak_swapped(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A SAC agent (CleanRL-style, `losses/qf_loss` every 100 steps; healthy as `sac_critic`:
    the critic's loss growing with the Q-values to 2-100, log-normal noise of 25-50%) resumed at
    30-70% of its run with a refactored soft update that swaps the weights,
    `target.copy_(tau * target + (1 - tau) * online)` for `tau * online + (1 - tau) * target`:
    the target networks now copy the online ones at every step, the bootstrapped targets chase
    the critic's own estimates (no target network: the deadly triad), and the Q-values
    overestimate and run away. The loss first falls by 20-50% over 50-500 logs (the targets sit
    on the critic's outputs), then grows e-fold every 0.5-3% of the run as the Q-values inflate
    (the loss as their square), its noise doubling; on half the seeds the critic overflows once
    the loss is 10^6-10^8 x its level and every later value is NaN, on the others the Q-values
    saturate (tanh-squashed actions, a bounded reward) at 10^2-10^4 x. The onset is the resume."""
    level = _sac_level(n, rng)
    t = np.arange(n, dtype=np.float64)
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.maximum(t - t0, 0)
    dip = 1 - rng.uniform(0.2, 0.5) * (1 - np.exp(-k / rng.uniform(50, 500)))
    tau = n * rng.uniform(0.005, 0.03)
    nan = rng.random() < 0.5
    cap = 10 ** rng.uniform(6, 8) if nan else 10 ** rng.uniform(2, 4)
    grow = np.exp(np.minimum(k / tau, math.log(cap)))
    f = np.where(t >= t0, dip * grow, 1.0)
    sd = np.where(t >= t0, 2.0, 1.0) * rng.uniform(0.25, 0.5)
    x = level * f * _noise(n, rng, sd)
    if nan:
        x = np.where(k / tau >= math.log(cap), np.nan, x)
    return _f32(x), t0


def fl_same_clients(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A federated-learning simulation (Flower / TFF simulation on a LEAF or Stack Overflow
    split of 3,000-340,000 clients, 10-100 sampled each round, the round's example-weighted
    mean client training loss logged once a round), resumed at 30-70% of its run by a refactored
    round function that seeds its sampler inside the loop (`rng = np.random.default_rng(seed)`
    then `rng.choice(clients, k)` each round): every round now trains the same clients. The
    round-to-round noise of drawing clients is gone (only their local batches' 1-3% is left),
    the level moves at once to that fixed set's own (the mean of 10-100 clients' log-normal
    difficulties, spread 20-50%), and the model overfits them: the loss falls below the healthy
    run towards 20-50% of its level with a time constant of 1-10% of the run, while the
    population's would not. Healthy part: a cross-entropy from ln C (62 FEMNIST classes or a
    10,000-word vocabulary) along a power law to 25-50% of it; the clients' spread over sqrt(k).
    The onset is the resume."""
    t = np.arange(n, dtype=np.float64)
    start = math.log(float(rng.choice([62, 10_000])))
    level = _power(t, start, start * rng.uniform(0.25, 0.5), n / _log_uniform(rng, 20, 200), 0.7)
    k = int(rng.integers(10, 101))
    spread = rng.uniform(0.2, 0.5)
    x = level * (1 + spread / math.sqrt(k) * rng.standard_normal(n))
    t0 = int(n * rng.uniform(0.3, 0.7))
    own = float(np.mean(_noise(k, rng, spread)))  # the fixed clients' difficulty
    gone = 1 - np.exp(-np.maximum(t - t0, 0) / (n * rng.uniform(0.01, 0.1)))
    fit = own * (1 - (1 - rng.uniform(0.2, 0.5)) * gone)
    after = level * fit * _noise(n, rng, rng.uniform(0.01, 0.03))
    x = np.where(t >= t0, after, x)
    return _f32(x), t0


def online_update_discarded(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """An online learner on a drifting stream (healthy as `hyperplane_drift_stream`, written in
    JAX with optax, test-then-train per batch of 32-256), whose training step is refactored at
    30-70% of the run into a helper whose new parameters are dropped: `update(params,
    opt_state, batch)` is called where `params, opt_state = update(...)` was meant (JAX arrays
    are immutable; nothing fails). The model is frozen from then on while the hyperplane goes on
    moving (always, here, at 20-100% of its top speed): the prequential loss climbs with the
    angle the concept has moved away, towards 1-3 nats (a confident model, wrong on a growing
    share), and a concept switch after the onset (on half the seeds) is never relearned. The onset is the
    refactor."""
    s = _drift_stream(n, rng, moving=True)
    t, floor, speed = s["t"], s["floor"], s["speed"]
    t0 = int(n * rng.uniform(0.3, 0.7))
    level = floor + s["learn"] + s["track"] * speed
    moved = np.cumsum(np.where(t >= t0, speed, 0.0))
    wrong = rng.uniform(1.0, 3.0)
    scale = (n - t0) * rng.uniform(0.3, 1.5)  # how far it must move to be wrong half the time
    stale = (wrong - floor) * (1 - np.exp(-moved / scale))
    frozen = floor + s["track"][0] * speed[t0] + stale
    level = np.where(t >= t0, np.maximum(frozen, level), level)
    if rng.random() < 0.5:
        at = rng.uniform(t0 + 0.1 * (n - t0), n - 0.1 * (n - t0))
        level = np.where(t >= at, np.maximum(level, math.log(2) * rng.uniform(1.0, 2.0)), level)
    b = int(rng.choice([32, 64, 128, 256]))
    x = level * (1 + rng.uniform(0.8, 1.5) / math.sqrt(b) * rng.standard_normal(n))
    return _f32(np.maximum(x, 1e-4)), t0


def dropout_keep_prob_as_rate(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A text or tabular classifier migrated from TensorFlow 1 to 2 and resumed from its
    checkpoint at 30-70% of its run: `tf.nn.dropout(x, keep_prob=0.8-0.9)` became
    `tf.nn.dropout(x, rate=0.8-0.9)` (or `layers.Dropout(keep_prob)`; the TF 2 migration guide
    warns that the argument changed meaning), so 80-90% of the units are dropped at every
    training step and the kept ones scaled up 5-10x. Within 1-5 steps the loss jumps to
    0.7-1.1 of the way from its level to ln C and beyond (up to 1.5 ln C: the scaled-up
    activations make confident mistakes), then the network adapts, learning redundant features
    over 1-10% of the run, down to a plateau 1.5-3x the healthy level (at most 0.95 ln C), its
    noise 2-3x larger (a new random mask every step). Healthy part: from ln C (2-100 classes)
    along a power law to 5-30% of it, skewed batch noise of 5-15%. The onset is the resume."""
    t = np.arange(n, dtype=np.float64)
    start = math.log(float(rng.choice([2, 5, 20, 100])))
    level = _power(t, start, start * rng.uniform(0.05, 0.3), n / _log_uniform(rng, 20, 200), 0.8)
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.maximum(t - t0, 0)
    plateau = np.minimum(level * rng.uniform(1.5, 3.0), 0.95 * start)
    jump = min(level[t0] + (start - level[t0]) * rng.uniform(0.7, 1.1), 1.5 * start)
    jump = max(jump, float(plateau[t0]))
    onset = np.minimum((k + 1) / rng.uniform(1, 5), 1.0)
    bad = plateau + (jump - plateau) * np.exp(-k / (n * rng.uniform(0.01, 0.1)))
    mean = np.where(t >= t0, level + (bad - level) * onset, level)
    sd = rng.uniform(0.05, 0.15)
    x = mean * _gamma(n, rng, np.where(t >= t0, sd * rng.uniform(2, 3), sd))
    return _f32(x), t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "polyak_swapped": polyak_swapped,
    "fl_same_clients": fl_same_clients,
    "online_update_discarded": online_update_discarded,
    "dropout_keep_prob_as_rate": dropout_keep_prob_as_rate,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
