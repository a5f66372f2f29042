"""An eleventh blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind11`.

    .venv/bin/python benchmarks/long_runs.py --blind11 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of an ordinary training job look over 10^5-10^6 steps (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is training recipes with a structure of their own:
dense retrieval whose hard negatives are refreshed from an index, class-incremental learning
with replay, Cluster-GCN's graph partitions, an interatomic potential whose loss weights switch
at its SWA stage, a VQGAN whose adversarial term enters at `disc_start`, a masked LM with a
decaying masking ratio, Once-for-All's progressive shrinking, CycleGAN with batch 1 and a linear
decay, Lookahead's synchronizations, I-JEPA's latent prediction, an EAGLE speculative-decoding
draft head, distributed Shampoo's preconditioner refreshes, Mean Teacher's consistency ramp-up
and a Muon-trained LM with a sliding-window warm-up. None of them is one of `long_runs.KINDS`,
`long_blind.KINDS`, ... `long_blind10.KINDS` (nor a bug of their `BUGS`). They are to be
measured once, on the held-out seeds (`SEEDS`), and not tuned on: a rule changed after looking
at them makes them a tuning set.

The interface is `long_blind10`'s: a kind is `(n, rng) -> loss`; ten kinds record the
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
from long_blind3 import _lag  # the third's
from long_blind4 import _f32, _gamma  # the fourth's
from long_blind8 import _ce_start, _t_noise  # the eighth's
from long_blind9 import _lm_trend, _warm_cosine  # the ninth's
from long_blind10 import _decays, _epoch_order  # the tenth's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE (no kind here records one)
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 11000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _linear_warm_decay(t: np.ndarray, n: int, warm: float, peak: float) -> np.ndarray:
    """A linear warm-up over `warm` steps to `peak`, then a linear decay to 0 at step `n`."""
    return np.where(t < warm, peak * (t + 1) / max(warm, 1.0), peak * (n - t) / max(n - warm, 1.0))


def _slow_walk(n: int, rng: np.random.Generator, tau: float) -> np.ndarray:
    """A unit-variance AR(1) wander with a time constant of `tau` steps (a quantity that drifts
    slowly, as a discriminator's verdict does)."""
    a = 1 / max(1.0, tau)
    z = rng.standard_normal(n) * math.sqrt((2 - a) / a)
    return _lag(z, tau, 0.0)


# the healthy kinds ----------------------------------------------------------------------------
def _ance_negative_refresh(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([5e-6, 1e-5, 2e-5]))
    lr = _linear_warm_decay(t, n, n * rng.uniform(0.01, 0.05), peak)
    batch = int(rng.choice([32, 64, 128]))
    hard = int(rng.integers(1, 8))  # hard negatives per query
    start = math.log(batch * (1 + hard))
    area = np.cumsum(lr / peak)
    level = _power(area, start, rng.uniform(0.05, 0.3), n / _log_uniform(rng, 50, 500), rng.uniform(0.6, 0.9))
    period = n * rng.uniform(0.01, 0.05)
    times = np.arange(period, n, period)
    k = np.arange(len(times))
    heights = rng.uniform(0.2, 0.6) / (1 + rng.uniform(0.1, 0.5) * k) * rng.uniform(0.7, 1.3, len(times))
    bump = _decays(t, times, heights, period * rng.uniform(0.15, 0.5))
    x = level * (1 + bump) * _gamma(n, rng, rng.uniform(0.05, 0.15))
    return {"loss": _f32(x), LR: lr}


def ance_negative_refresh(n: int, rng: np.random.Generator) -> np.ndarray:
    """Dense passage retrieval with asynchronously refreshed hard negatives (ANCE, Xiong et al.
    2021; DPR's `train_dense_encoder.py` loss: the NLL of the positive passage against the
    in-batch negatives and 1-7 mined hard negatives per query, batches of 32-128; AdamW at
    5e-6-2e-5, a linear warm-up over 1-5% and a linear decay to 0, recorded): the loss falls from
    ln(batch x (1 + hard)) along the rate's area to 0.05-0.3; every 1-5% of the run the ANN index
    is rebuilt with the latest encoder and the negatives mined from it are harder, so the loss
    jumps up by 20-60% (less at each refresh as the encoder settles) and falls back within
    15-50% of the period; skewed batch noise of 5-15%; float32."""
    return _ance_negative_refresh(n, rng)["loss"]


def class_incremental_replay(n: int, rng: np.random.Generator) -> np.ndarray:
    """Class-incremental continual learning with experience replay (Rebuffi et al. 2017, iCaRL's
    protocol; Chaudhry et al. 2019, "On tiny episodic memories"; Avalanche / Mammoth `er`: 5-20
    tasks of equal length, each with new classes, every batch half new data and half (20-50%)
    drawn from a small replay buffer of the old ones): at each task's start the new classes cost
    3-6 nats (the model confidently predicts old ones) and are learned over 10-30% of the task,
    down to 10-30% above a level that creeps up with the number of classes seen (0.1-0.4 of
    ln(classes), and 0-30% more by the end), the last of it over half the task;
    the replayed old samples, near their floor, are disturbed by 10-40% at each switch
    (interference) and recover; the logged loss is the batch mean of both; noise 3-10%."""
    t = np.arange(n, dtype=np.float64)
    tasks = int(rng.integers(5, 21))
    per = int(rng.choice([2, 5, 10, 20]))  # classes per task
    r = rng.uniform(0.2, 0.5)  # the replayed share of a batch
    task = np.minimum((t * tasks // n).astype(int), tasks - 1)
    into = t - task * (n / tasks)
    span = n / tasks
    seen = per * (task + 1)
    share = rng.uniform(0.1, 0.4)
    floor = share * np.log(seen.astype(np.float64) + 1) * (1 + rng.uniform(0.0, 0.3) * t / n)
    cost = rng.uniform(3, 6, tasks)[task]
    cost[task == 0] = math.log(per)  # the first task starts from chance on its classes
    learn = np.exp(-into / (span * rng.uniform(0.1, 0.3) / 3))
    new = floor * (1 + rng.uniform(0.1, 0.3) * np.exp(-into / (span * 0.5)))  # slower, within the task
    new = new + (np.maximum(cost, new) - new) * learn
    old = floor * 0.7 * (1 + rng.uniform(0.1, 0.4) * np.exp(-into / (span * rng.uniform(0.02, 0.1))))
    x = np.where(task == 0, new, (1 - r) * new + r * old)
    return _f32(x * _noise(n, rng, rng.uniform(0.03, 0.1)))


def cluster_gcn_partitions(n: int, rng: np.random.Generator) -> np.ndarray:
    """A GNN trained with Cluster-GCN (Chiang et al. 2019; PyG `ClusterData` / `ClusterLoader`
    on ogbn-products or Reddit: the graph cut by METIS into 1,000-3,000 parts, each batch the
    subgraph of 10-30 random parts, Adam at a constant 1e-3-5e-3): a partition is a community,
    its nodes' labels alike, so each has its own difficulty (log-normal, 30-70%) and size
    (log-normal, 0.3-0.6); a batch's loss is the node-weighted mean over its parts, every part
    seen once an epoch in a fresh grouping; the level falls from ln C (41-112 classes) to 5-25%
    of it along a power law; float32."""
    t = np.arange(n, dtype=np.float64)
    parts = int(rng.integers(1000, 3001))
    q = int(rng.integers(10, 31))
    steps = parts // q
    start = math.log(float(rng.choice([41, 47, 100, 112])))
    level = _power(
        t, start, start * rng.uniform(0.05, 0.25), n / _log_uniform(rng, 30, 300), rng.uniform(0.6, 1.0)
    )
    diff = _noise(parts, rng, rng.uniform(0.3, 0.7))
    size = _noise(parts, rng, rng.uniform(0.3, 0.6))
    order = _epoch_order(-(-n // steps) * steps * q, steps * q, rng)
    order = order.reshape(-1, q)[:n]
    w = size[order]
    batch = (w * diff[order]).sum(axis=1) / w.sum(axis=1)
    return _f32(level * batch * _noise(n, rng, 0.02))


def _mace_swa_weights(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    t_swa = int(n * rng.uniform(0.65, 0.85))
    drops = np.sort(rng.uniform(0.1, 0.95, int(rng.integers(2, 7)))) * t_swa
    lr = 0.01 * 0.8 ** np.searchsorted(drops, t, side="right")
    lr[t_swa:] = 1e-3
    rel = lr / 0.01
    area = np.cumsum(rel)
    scale = n / _log_uniform(rng, 30, 300)
    f_mse = _power(area, rng.uniform(0.3, 1.0), rng.uniform(0.0005, 0.003), scale, rng.uniform(0.7, 1.0))
    early = 1 + rng.uniform(5, 50) * np.exp(-area / (n * rng.uniform(0.005, 0.02)))  # fit fast
    e_mse = f_mse * _log_uniform(rng, 0.003, 0.05) * early  # per atom: a few meV vs tens of meV/A
    f_mse *= 1 + rng.uniform(0.05, 0.2) * _lag(rel, n * 0.003, 1.0)
    k = np.maximum(t - t_swa, 0)
    e_swa = e_mse * (1 - rng.uniform(0.5, 0.8) * (1 - np.exp(-k / (n * rng.uniform(0.005, 0.03)))))
    f_swa = f_mse * (1 + rng.uniform(0.02, 0.1) * (1 - np.exp(-k / (n * 0.01))))
    w_e = np.where(t < t_swa, 1.0, 1000.0)
    total = np.where(t < t_swa, w_e * e_mse + 100 * f_mse, w_e * e_swa + 100 * f_swa)
    configs = int(rng.choice([500, 1000, 2000, 5000]))
    batch = int(rng.choice([5, 10]))
    hard = _gamma(configs, rng, rng.uniform(0.4, 0.8))[_epoch_order(n * batch, configs, rng)]
    x = total * hard.reshape(n, batch).mean(axis=1)
    return {"loss": _f32(x), LR: lr}


def mace_swa_weights(n: int, rng: np.random.Generator) -> np.ndarray:
    """A machine-learned interatomic potential (MACE, Batatia et al. 2022, ACEsuit/mace
    `run_train.py`: the loss 1 x the per-atom energy MSE + 100 x the force MSE, batches of 5-10
    configurations from a 500-5,000 set, reshuffled each epoch; Adam (amsgrad) at 0.01 cut by
    0.8 on 2-6 validation plateaus, recorded; `--swa` from 65-85% of the run: the energy weight
    raised to 1,000 and the rate set to 1e-3): the force MSE falls from 0.3-1 to 5e-4-3e-3 and
    the energy MSE (per atom) 0.003-0.05x it, 5-50x more early (eV/A and eV/atom squared; a
    few meV/atom against tens of meV/A at the end), 5-20% of the force term
    held up by the rate; at the SWA switch the loss steps UP as the energy term is weighted 1000x,
    then that term falls by 50-80% and the force term gives back 2-10%; each configuration its
    own difficulty (skewed, 40-80%), the batch its mean; float32."""
    return _mace_swa_weights(n, rng)["loss"]


def vqgan_disc_start(n: int, rng: np.random.Generator) -> np.ndarray:
    """A VQGAN's autoencoder loss (Esser et al. 2021, CompVis/taming-transformers
    `VQLPIPSWithDiscriminator`: L1 + LPIPS + the codebook loss, and from `disc_start` on
    d_weight x g_loss, g_loss = -mean(logits_fake), d_weight the ratio of the two gradients'
    norms x 0.8): the reconstruction part falls from 0.8-1.5 to 15-30% of it; the codebook loss
    rises over the first 1-5% (encoder outputs grow) to 0.02-0.1 and settles at half of it; at
    `disc_start` (5-50% of the run) the adversarial term enters at 5-30% of the reconstruction
    level, its sign and size wandering with the discriminator's verdict (a slow walk, 40-80% of
    it, over 0.5-3% of the run) with noise of its own (30-60%), and the reconstruction gives
    back 3-15% to realism; batch noise 3-8%; float32."""
    t = np.arange(n, dtype=np.float64)
    start = rng.uniform(0.8, 1.5)
    rec = _power(
        t, start, start * rng.uniform(0.15, 0.3), n / _log_uniform(rng, 30, 300), rng.uniform(0.6, 0.9)
    )
    cb_top = rng.uniform(0.02, 0.1)
    rise = n * rng.uniform(0.01, 0.05)
    codebook = (
        cb_top * (1 - np.exp(-t / (rise / 3))) * (0.5 + 0.5 * np.exp(-np.maximum(t - rise, 0) / (n * 0.1)))
    )
    t0 = int(n * rng.uniform(0.05, 0.5))
    on = t >= t0
    k = np.maximum(t - t0, 0)
    rec = rec * (1 + on * rng.uniform(0.03, 0.15) * (1 - np.exp(-k / (n * 0.01))))
    amp = rng.uniform(0.05, 0.3)
    walk = rng.uniform(-0.3, 1.0) + rng.uniform(0.4, 0.8) * _slow_walk(n, rng, n * rng.uniform(0.005, 0.03))
    adv = on * amp * rec * (walk + rng.uniform(0.3, 0.6) * rng.standard_normal(n))
    x = rec * _noise(n, rng, rng.uniform(0.03, 0.08)) + codebook + adv
    return _f32(x)


def _mlm_mask_rate_decay(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([1e-4, 2e-4, 5e-4]))
    lr = _linear_warm_decay(t, n, n * rng.uniform(0.005, 0.02), peak)
    m0, m1 = rng.uniform(0.3, 0.4), 0.15
    mask = m0 + (m1 - m0) * t / n  # the masking ratio, decayed linearly
    start = math.log(30522)
    unigram = rng.uniform(7.0, 7.6)
    fast = (start - unigram) * np.exp(-t / (n * rng.uniform(0.0005, 0.002)))
    area = np.cumsum(lr / peak)
    floor = rng.uniform(1.4, 2.2)
    learn = (unigram - floor) * (1 - 1 / (1 + area / (n * rng.uniform(0.005, 0.05))) ** rng.uniform(0.5, 0.8))
    ctx = 1 + rng.uniform(1.0, 2.0) * (mask - 0.15)  # less context at a higher ratio
    x = (fast + (unigram - learn) * ctx) * _t_noise(n, rng, rng.uniform(0.01, 0.03), rng.uniform(4, 8))
    return {"loss": _f32(x), LR: lr}


def mlm_mask_rate_decay(n: int, rng: np.random.Generator) -> np.ndarray:
    """BERT-style masked-LM pretraining with a time-variant masking ratio (Yang et al. 2023,
    "Learning Better Masking for Better Language Model Pre-training": the ratio decayed linearly
    from 30-40% to 15%; Wettig et al. 2023 on the ratio's cost per token; AdamW warmed up over
    0.5-2% to 1e-4-5e-4 and decayed linearly to 0, recorded): the loss per masked token falls at
    once from ln 30,522 to the unigram plateau (7-7.6), then along the rate's area towards 1.4-2.2,
    the higher ratio early costing 1-2x (ratio - 15%) more (less context), a cost that fades as
    the ratio decays; batch noise 1-3%, Student-t; float32."""
    return _mlm_mask_rate_decay(n, rng)["loss"]


def _ofa_progressive_shrinking(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    shares = np.array([180, 120, 25, 120, 25, 120], dtype=np.float64)  # epochs of each stage
    bounds = np.r_[0, np.cumsum(shares)] / shares.sum() * n
    stage = np.clip(np.searchsorted(bounds, t, side="right") - 1, 0, 5)
    peaks = np.array([0.1, 0.03, 0.0025, 0.0075, 0.0025, 0.0075]) * rng.uniform(0.8, 1.2)
    into = t - bounds[stage]
    span = bounds[stage + 1] - bounds[stage]
    warm = np.minimum(span, n * 0.005)
    lr = np.where(
        into < warm, peaks[stage] * (into + 1) / warm, peaks[stage] * 0.5 * (1 + np.cos(np.pi * into / span))
    )
    start = math.log(1000)
    floor = rng.uniform(1.6, 2.2)  # label smoothing and KD keep it up
    full = _power(t, start, floor, n / _log_uniform(rng, 20, 100), rng.uniform(0.7, 1.0))
    full = full * (1 + rng.uniform(0.05, 0.15) * _lag(lr / 0.1, n * 0.005, 1.0))
    gap = np.r_[0.0, np.cumsum(rng.uniform(0.05, 0.15, 5))]  # smaller sub-networks each stage
    fall = np.exp(-into / (span * rng.uniform(0.1, 0.3)))
    mult = 1 + gap[stage] * (0.5 + 0.5 * fall)
    spread = np.r_[0.0, rng.uniform(0.03, 0.08) * np.arange(1, 6)][stage]  # the sampled subnet's
    x = full * mult * _noise(n, rng, spread) * _noise(n, rng, rng.uniform(0.02, 0.05))
    return {"loss": _f32(x), LR: lr}


def ofa_progressive_shrinking(n: int, rng: np.random.Generator) -> np.ndarray:
    """Once-for-All progressive shrinking (Cai et al. 2020, mit-han-lab/once-for-all: the full
    network first (180 epochs at 0.1), then elastic kernel (120 at 0.03), elastic depth (25 + 120
    at 2.5e-3 and 7.5e-3) and elastic width (25 + 120), each stage its own warm-up and cosine,
    recorded; every step trains random sub-networks, distilled from the full one): the full
    network's loss falls from ln 1,000 to 1.6-2.2, 5-15% held up by the rate; at each stage's
    start the smaller sub-networks now drawn cost 5-15% more, half of it learned over 10-30% of
    the stage, and the per-step noise grows with the space of sub-networks drawn (3-8% more
    per stage); batch noise 2-5%; float32."""
    return _ofa_progressive_shrinking(n, rng)["loss"]


def _cyclegan_linear_decay(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    half = n // 2
    lr = np.where(t < half, 2e-4, 2e-4 * (n - t) / (n - half))
    images = int(rng.integers(1000, 2501))
    scale = n / _log_uniform(rng, 20, 200)
    cycle = _power(t, rng.uniform(0.3, 0.5), rng.uniform(0.05, 0.1), scale, rng.uniform(0.6, 0.9))
    cycle *= 1 - rng.uniform(0.1, 0.3) * np.clip((t - half) / (n - half), 0, 1)  # the decay helps
    idt = cycle * rng.uniform(0.8, 1.2)
    hard = _noise(images, rng, rng.uniform(0.2, 0.4))[_epoch_order(n, images, rng)]
    gan_level = rng.uniform(0.3, 0.6) + rng.uniform(0.0, 0.3) * (1 - np.exp(-t / (n * 0.05)))
    walk = 1 + 0.3 * _slow_walk(n, rng, rng.uniform(200, 2000))
    gan = 2 * gan_level * np.clip(walk, 0.3, None) * _gamma(n, rng, rng.uniform(0.3, 0.5))
    x = 10 * 2 * cycle * hard * _noise(n, rng, 0.1) + 5 * 2 * idt * hard * _noise(n, rng, 0.1) + gan
    return {"loss": _f32(x), LR: lr}


def cyclegan_linear_decay(n: int, rng: np.random.Generator) -> np.ndarray:
    """Unpaired image translation with CycleGAN (Zhu et al. 2017, junyanz/pytorch-CycleGAN-and-
    pix2pix: batch 1, Adam at 2e-4 for `n_epochs` then linearly to 0 over `n_epochs_decay`, equal
    halves, recorded; 1,000-2,500 images a side): the generators' total, 10 x the two cycle L1s
    (each from 0.3-0.5 to 0.05-0.1, 10-30% lower again through the decay) + 5 x the two identity
    L1s + the two LSGAN terms (0.3-0.9 each, wandering with the discriminators, skewed 30-50%
    per step); each image its own difficulty (log-normal, 20-40%) seen once an epoch, and 10%
    more per-step noise: one image per step, so the loss swings by tens of %; float32."""
    return _cyclegan_linear_decay(n, rng)["loss"]


def _lookahead_sync(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([1e-3, 3e-3, 4e-3]))
    flat = n * rng.uniform(0.5, 0.75)
    into = np.clip((t - flat) / (n - flat), 0, 1)
    lr = np.where(t < flat, peak, peak * 0.5 * (1 + np.cos(np.pi * into)))
    rel = lr / peak
    start = _ce_start(rng)
    level = _power(np.cumsum(rel), start, start * rng.uniform(0.05, 0.2), n / _log_uniform(rng, 20, 200), 0.8)
    level *= 1 + rng.uniform(0.05, 0.15) * _lag(rel, n * 0.005, 1.0)
    k = int(rng.integers(5, 11))
    phase = (t % k) / (k - 1)  # 0 just after a synchronization
    drift = 1 + rng.uniform(0.005, 0.03) * rel * phase  # the fast weights wander off the slow ones
    x = level * drift * _noise(n, rng, rng.uniform(0.03, 0.08))
    return {"loss": _f32(x), LR: lr}


def lookahead_sync(n: int, rng: np.random.Generator) -> np.ndarray:
    """An image classifier with Lookahead around RAdam ("Ranger"; Zhang et al. 2019, Lookahead:
    k = 5-10 fast steps, then the slow weights move half way to the fast ones and the fast ones
    restart from there; fastai's `fit_flat_cos`: 1e-3-4e-3 flat for 50-75% of the run, then a
    cosine to 0, recorded): the loss falls from ln C (10-1,000 classes) to 5-20% of it along the
    rate's area, 5-15% of it held up by the rate; within each group of k steps the fast weights
    wander from the synchronized point and the loss grows by 0.5-3% (times the rate's share of
    its peak), dropping back at each synchronization: a k-periodic sawtooth under batch noise
    of 3-8%; float32."""
    return _lookahead_sync(n, rng)["loss"]


def _ijepa_latent(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm = n * 15 / 300
    peak = 1e-3 * rng.uniform(0.5, 1.5)
    into = np.clip((t - warm) / (n - warm), 0, 1)
    lr = np.where(
        t < warm, 2e-4 + (peak - 2e-4) * t / warm, 1e-6 + (peak - 1e-6) * 0.5 * (1 + np.cos(np.pi * into))
    )
    start = rng.uniform(0.45, 0.55)
    low = rng.uniform(0.05, 0.15)
    fast = (start - low) * np.exp(-t / (n * rng.uniform(0.003, 0.015)))
    grow = rng.uniform(1.5, 3.0)
    rich = (grow - 1) * low * (1 - np.exp(-t / (n * rng.uniform(0.1, 0.3))))  # richer targets
    fit = 1 - rng.uniform(0.2, 0.5) * np.clip(np.cumsum(1 - lr / peak) / n, 0, 1) ** 1.5
    x = (fast + (low + rich) * fit) * _noise(n, rng, rng.uniform(0.01, 0.03))
    return {"loss": _f32(x), LR: lr}


def ijepa_latent(n: int, rng: np.random.Generator) -> np.ndarray:
    """Self-supervised I-JEPA (Assran et al. 2023, facebookresearch/ijepa: the smooth L1 between
    the predictor's output and the layer-normed features of an EMA target encoder on 4 target
    blocks; AdamW warmed up over 15 of 300 epochs from 2e-4 to 1e-3 (x0.5-1.5), a cosine to 1e-6,
    recorded; the EMA momentum 0.996 to 1): the loss falls from 0.45-0.55 within 0.3-1.5% of the
    run to 0.05-0.15 while the targets, from a fresh encoder, are easy; then RISES to 1.5-3x that
    over 10-30% of the run as the target encoder's features grow richer, and comes down by
    20-50% late as the rate decays; noise 1-3% (large batches); float32."""
    return _ijepa_latent(n, rng)["loss"]


def _eagle_draft_head(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = 3e-5
    lr = np.minimum(peak, peak * (t + 1) / 2000)
    epochs = int(rng.integers(20, 41))
    spe = n // epochs + 1
    area = np.cumsum(lr / peak)
    scale = n / _log_uniform(rng, 20, 200)
    reg = _power(area, rng.uniform(0.5, 1.0), rng.uniform(0.1, 0.3), scale, rng.uniform(0.5, 0.9))
    ce = _power(area, math.log(32000), rng.uniform(1.5, 2.5), scale, rng.uniform(0.5, 0.9))
    e = t // spe
    d0 = rng.uniform(0.03, 0.1)
    memo = np.exp(-d0 * (1 - 0.8**e) / 0.2)  # each new epoch sees its dialogues once more
    batch = int(rng.choice([4, 8, 16]))
    items = spe * batch
    hard = _noise(items, rng, rng.uniform(0.2, 0.4))[_epoch_order(n * batch, items, rng)]
    x = (reg + 0.1 * ce) * memo * hard.reshape(n, batch).mean(axis=1) * _noise(n, rng, 0.02)
    return {"loss": _f32(x), LR: lr}


def eagle_draft_head(n: int, rng: np.random.Generator) -> np.ndarray:
    """The draft head of EAGLE speculative decoding (Li et al. 2024, SafeAILab/EAGLE `train`:
    one decoder layer over a frozen target LLM's features of ShareGPT's 68k dialogues, the loss
    1.0 x the smooth L1 of the next feature + 0.1 x the cross-entropy to the target's next-token
    distribution; AdamW (0.9, 0.95) at 3e-5 after a 2,000-step warm-up, recorded; 20-40 epochs):
    the feature term falls from 0.5-1 to 0.1-0.3 and the token term from ln 32,000 to 1.5-2.5,
    both along a power law; the same dialogues every epoch, so at each epoch's start the loss
    steps down (by 3-10% at the second, less at each later one, as the head memorizes them);
    each dialogue its own difficulty (log-normal, 20-40%), the batch (4-16) their mean; float32."""
    return _eagle_draft_head(n, rng)["loss"]


def _shampoo_refresh(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 1e-3, 5e-3)
    lr = _warm_cosine(t, n, n * rng.uniform(0.01, 0.05), peak, 0.0)
    rel = lr / peak
    t_pre = n * rng.uniform(0.01, 0.05)  # start_preconditioning_step
    freq = int(rng.choice([20, 50, 100]))
    phase = (t % freq) / freq  # the preconditioner's staleness
    boost = np.where(t < t_pre, 1.0, rng.uniform(1.3, 1.8) * (1 - rng.uniform(0.05, 0.2) * phase))
    area = np.cumsum(rel * boost)
    start = math.log(1000)
    level = _power(area, start, rng.uniform(1.8, 2.6), n / _log_uniform(rng, 30, 300), rng.uniform(0.6, 0.9))
    level *= 1 + rng.uniform(0.05, 0.15) * _lag(rel, n * 0.005, 1.0)
    spikes = int(rng.integers(0, 5))
    at = (np.sort(rng.uniform(t_pre, n * 0.9, spikes)) // freq) * freq  # at a refresh
    level *= 1 + _decays(t, at, rng.uniform(0.05, 0.3, spikes), rng.uniform(50, 300))
    x = level * _noise(n, rng, rng.uniform(0.02, 0.05))
    return {"loss": _f32(x), LR: lr}


def shampoo_refresh(n: int, rng: np.random.Generator) -> np.ndarray:
    """An ImageNet classifier with distributed Shampoo (Shi et al. 2023, facebookresearch/
    optimizers `DistributedShampoo`, the AlgoPerf winner: Adam-grafted, the preconditioners'
    inverse roots recomputed every `precondition_frequency` (20-100) steps from
    `start_preconditioning_step` (1-5% of the run); a warm-up and a cosine, recorded): the loss
    (label smoothing 0.1) falls from ln 1,000 to 1.8-2.6 along the rate's area, 1.3-1.8x faster
    once preconditioning starts, a little slower as a preconditioner goes stale within each
    period; 0-4 spikes of 5-30% at a refresh (an ill-conditioned root), recovering over 50-300
    steps; 5-15% held up by the rate; batch noise 2-5%; float32."""
    return _shampoo_refresh(n, rng)["loss"]


def mean_teacher_rampup(n: int, rng: np.random.Generator) -> np.ndarray:
    """Semi-supervised Mean Teacher (Tarvainen & Valpola 2017, CuriousAI/mean-teacher: each
    batch 31-62 labeled of 256, the loss the labeled cross-entropy + w(t) x the MSE between the
    student's and the EMA teacher's softmax, w ramped up as w_max exp(-5 (1 - t/T)^2) over
    2-30% of the run, w_max 1-100 (MSE summed over 10-100 classes)): the labeled part falls from
    ln C to 2-15% of it (a few thousand labels, fit well); the consistency part grows with w from
    0 to 0.1-1 and then falls by 30-70% as student and teacher agree; the few labeled samples a
    batch make its noise 8-20%, the consistency part's 3-6%."""
    t = np.arange(n, dtype=np.float64)
    start = math.log(float(rng.choice([10, 100])))
    ce = _power(
        t, start, start * rng.uniform(0.02, 0.15), n / _log_uniform(rng, 30, 300), rng.uniform(0.7, 1.0)
    )
    ramp = n * rng.uniform(0.02, 0.3)
    w = np.where(t < ramp, np.exp(-5 * (1 - t / ramp) ** 2), 1.0)
    top = rng.uniform(0.1, 1.0)
    agree = 1 - rng.uniform(0.3, 0.7) * (1 - np.exp(-t / (n * rng.uniform(0.1, 0.4))))
    cons = top * w * agree
    x = ce * _noise(n, rng, rng.uniform(0.08, 0.2)) + cons * _noise(n, rng, rng.uniform(0.03, 0.06))
    return _f32(x)


def _muon_window_warmup(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([0.02, 0.05]))
    cool = rng.uniform(0.4, 0.7)  # cooldown_frac
    lr = np.where(t < n * (1 - cool), peak, peak * (n - t) / (n * cool))
    rel = lr / peak
    start = math.log(50257)
    level = _power(np.cumsum(rel), start, rng.uniform(2.9, 3.4), n / _log_uniform(rng, 100, 1000), 0.7)
    level *= 1 + rng.uniform(0.05, 0.12) * _lag(rel, n * 0.005, 1.0)
    window = np.ceil((128 + (1728 - 128) * t / n) / 128) * 128  # next multiple of 128 tokens
    reach = 1 + rng.uniform(0.01, 0.04) * (1728 - window) / 1600  # a shorter reach costs a little
    x = level * reach * _t_noise(n, rng, rng.uniform(0.008, 0.02), rng.uniform(4, 8))
    return {"loss": _f32(x), LR: lr}


def muon_window_warmup(n: int, rng: np.random.Generator) -> np.ndarray:
    """A GPT-2-sized LM trained with Muon, the modded-nanogpt recipe scaled up (Jordan et al.
    2024, KellerJordan/modded-nanogpt; Liu et al. 2025, Moonlight: Muon at 0.02-0.05 for the
    hidden matrices, constant, then a linear cooldown to 0 over the last 40-70%, recorded; the
    sliding-window attention warmed up from 128 to 1,728 tokens, rounded up to multiples of 128):
    the loss from ln 50,257 along the rate's area towards 2.9-3.4 (FineWeb), 5-12% held up by the
    rate until the cooldown; the window's 13 steps each take 0.1-0.3% off it; noise 0.8-2%,
    Student-t; float32."""
    return _muon_window_warmup(n, rng)["loss"]


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "ance_negative_refresh": ance_negative_refresh,
    "class_incremental_replay": class_incremental_replay,
    "cluster_gcn_partitions": cluster_gcn_partitions,
    "mace_swa_weights": mace_swa_weights,
    "vqgan_disc_start": vqgan_disc_start,
    "mlm_mask_rate_decay": mlm_mask_rate_decay,
    "ofa_progressive_shrinking": ofa_progressive_shrinking,
    "cyclegan_linear_decay": cyclegan_linear_decay,
    "lookahead_sync": lookahead_sync,
    "ijepa_latent": ijepa_latent,
    "eagle_draft_head": eagle_draft_head,
    "shampoo_refresh": shampoo_refresh,
    "mean_teacher_rampup": mean_teacher_rampup,
    "muon_window_warmup": muon_window_warmup,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "ance_negative_refresh": _ance_negative_refresh,
    "mace_swa_weights": _mace_swa_weights,
    "mlm_mask_rate_decay": _mlm_mask_rate_decay,
    "ofa_progressive_shrinking": _ofa_progressive_shrinking,
    "cyclegan_linear_decay": _cyclegan_linear_decay,
    "lookahead_sync": _lookahead_sync,
    "ijepa_latent": _ijepa_latent,
    "eagle_draft_head": _eagle_draft_head,
    "shampoo_refresh": _shampoo_refresh,
    "muon_window_warmup": _muon_window_warmup,
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
def clip_before_unscale(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A ResNet on SGD with momentum under AMP, resumed at 30-70% of its run with a refactored
    step that calls `clip_grad_norm_(model.parameters(), 1.0)` before `scaler.unscale_(optimizer)`
    (the order the AMP docs warn about): the clip sees the gradients times the `GradScaler`'s
    scale (2^10-2^16) and cuts them to a norm of 1, then they are divided by the scale, so every
    update is 1e-3-1e-5 of what it was; the loss stops falling at once, and the weight decay
    (1e-4-5e-4, coupled, times the rate) still shrinks the final layer, so the logits' margins
    shrink by exp(-lr x wd x steps) and the loss creeps back up towards ln C (10-1,000 classes);
    batch noise 3-8%. The onset is the resume."""
    t = np.arange(n, dtype=np.float64)
    start = _ce_start(rng)
    classes = math.exp(start)
    trend = _power(t, start, start * rng.uniform(0.05, 0.25), n / _log_uniform(rng, 20, 200), 0.8)
    t0 = int(n * rng.uniform(0.3, 0.7))
    lr = 0.1 * 0.5 * (1 + np.cos(np.pi * t / n))  # a cosine from 0.1
    wd = rng.uniform(1e-4, 5e-4)  # ImageNet's to CIFAR's
    level0 = float(trend[t0])
    margin = -math.log((math.exp(level0) - 1) / (classes - 1))
    s = np.exp(-np.cumsum(lr[t0:] * wd) + lr[t0] * wd)
    loss = trend.copy()
    loss[t0:] = np.log1p((classes - 1) * np.exp(-s * margin))
    x = loss * _noise(n, rng, rng.uniform(0.03, 0.08))
    return _f32(x), t0


def warmup_every_resume(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """An LM on preemptible machines, resumed every 2-8% of its run; from a resume at 30-60%
    on, a new launcher builds `get_cosine_schedule_with_warmup` afresh and loads the model and
    optimizer but not the scheduler's state: at every resume the rate warms up again from 0
    over 0.5-2% of the run and then follows the cosine from its PEAK, over the whole run again,
    instead of the decayed rate. The loss, 10-25% of it held up by the rate (with a lag of
    0.2-1%), dips a little through each warm-up, then climbs back to the level of a
    high rate and stays there; the late anneal that brings a healthy run down never comes;
    noise 1-3%, Student-t. The onset is the first such resume."""
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 2e-4, 1e-3)
    warm = n * rng.uniform(0.005, 0.02)
    lr = _warm_cosine(t, n, warm, peak, 0.1)
    gaps = rng.uniform(0.02, 0.08, 60) * n
    resumes = np.cumsum(gaps)
    resumes = resumes[resumes < n * 0.97]
    first = rng.uniform(0.3, 0.6) * n
    buggy = resumes[resumes >= first]
    if len(buggy) == 0:
        buggy = np.array([first])
    t0 = int(buggy[0])
    for r in buggy:
        k = t[int(r) :] - int(r)
        lr[int(r) :] = _warm_cosine(k, n, warm, peak, 0.1)
    rel = lr / peak
    start = math.log(float(rng.choice([32_000, 50_257, 128_256])))
    level = _power(np.cumsum(rel), start, rng.uniform(1.8, 3.0), n / _log_uniform(rng, 50, 500), 0.7)
    level *= 1 + rng.uniform(0.1, 0.25) * _lag(rel, n * rng.uniform(0.002, 0.01), 1.0)
    x = level * _t_noise(n, rng, rng.uniform(0.01, 0.03), rng.uniform(4, 8))
    return _f32(x), t0


def pure_bf16_weights(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """An LM resumed at 30-60% of its run by new code that loads it with
    `torch_dtype=torch.bfloat16` and steps AdamW on the bf16 weights themselves (no fp32 master
    copy, no Kahan summation): the cast costs 0.5-2% at once, and an update smaller than half a
    bf16 ulp (2^-9 of the weight) is rounded away, so as the cosine rate falls the share of
    updates that land falls as 1 / (1 + (lr_c / lr)^2), lr_c 30-70% of the peak: the loss goes on
    falling for a while, then flattens, and the anneal's drop at the end (10-25% of the loss
    held up by the rate) is lost with it; noise 1-3%, Student-t. The onset is the resume."""
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 1e-4, 6e-4)
    lr = _warm_cosine(t, n, n * rng.uniform(0.005, 0.02), peak, 0.1)
    rel = lr / peak
    t0 = int(n * rng.uniform(0.3, 0.6))
    crit = rng.uniform(0.3, 0.7)
    eff = np.ones(n)
    eff[t0:] = 1 / (1 + (crit / rel[t0:]) ** 2)
    eff[t0:] = eff[t0:] / eff[t0]  # as the healthy run at the resume, then falling
    eff = np.minimum(eff, 1.0)
    start = math.log(float(rng.choice([32_000, 50_257, 128_256])))
    level = _power(np.cumsum(rel * eff), start, rng.uniform(1.8, 3.0), n / _log_uniform(rng, 50, 500), 0.7)
    h = rng.uniform(0.1, 0.25)
    held_rel = rel.copy()
    held_rel[t0:] = rel[t0:] * eff[t0:] + rel[t0] * (1 - eff[t0:])  # the weights stop settling
    level *= 1 + h * _lag(held_rel, n * 0.005, 1.0)
    level[t0:] *= 1 + rng.uniform(0.005, 0.02)
    x = level * _t_noise(n, rng, rng.uniform(0.01, 0.03), rng.uniform(4, 8))
    return _f32(x), t0


def attention_scaled_twice(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """An LM resumed at 30-70% of its run after its hand-written attention (`q = q * d**-0.5;
    softmax(q @ k.T)`) was replaced by `F.scaled_dot_product_attention(q, k, v)` with the
    pre-scaling kept: the logits are divided by d (64-128) instead of sqrt(d), 8-11x flatter, and
    the heads attend almost uniformly. Within 1-3 steps the loss jumps to 1.3-2x its level (a
    bag-of-context model); the query and key norms must grow by the missing factor against the
    weight decay, slowly at first, so it comes back along a sigmoid in log-time (over 1,000-
    20,000 steps) to 3-10% above the healthy run, a gap that closes by at most a third; noise
    1-3%, Student-t. The onset is the resume."""
    trend = _lm_trend(n, rng)
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0, dtype=np.float64)
    jump = rng.uniform(1.3, 2.0)
    gap = rng.uniform(0.03, 0.1) * (1 - rng.uniform(0, 0.33) * k / max(n - t0 - 1, 1))
    tau = _log_uniform(rng, 1000, 20000) / 3
    back = 1 / (1 + (k / tau) ** rng.uniform(1.5, 3.0))
    rise = np.minimum(1.0, (k + 1) / rng.integers(1, 4))
    factor = 1 + gap + rise * (jump - 1 - gap) * back
    x = trend.copy()
    x[t0:] *= factor
    x *= _t_noise(n, rng, rng.uniform(0.01, 0.03), rng.uniform(4, 8))
    return _f32(x), t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "clip_before_unscale": clip_before_unscale,
    "warmup_every_resume": warmup_every_resume,
    "pure_bf16_weights": pure_bf16_weights,
    "attention_scaled_twice": attention_scaled_twice,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
