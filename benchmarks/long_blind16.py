"""A sixteenth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind16`.

    .venv/bin/python benchmarks/long_runs.py --blind16 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of a training job look over 10^5-10^6 logged values (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is objectives whose healthy loss does not simply
fall, from research and production outside the LLM mainstream: MoCo's InfoNCE rising while its
queue fills with real keys, Barlow Twins' redundancy loss in the thousands, HuBERT's second
iteration restarting on finer targets (logged in bits), LDAM-DRW's deferred re-weighting that
steps the loss up, DANN's domain terms pushed back up to ln 2 by the gradient reversal,
AlphaFold's fine-tuning stage adding its violation loss, a GFlowNet's trajectory-balance
squares, score distillation's flat loss set by its annealed timestep range, VITS's summed
generator terms with a rising feature-matching term, Monodepth2's photometric loss with its one
validation batch per log, RigL's periodic mask updates, EWC over permuted tasks with
evaluations on every task seen, an energy-based model's contrastive-divergence loss that goes
below zero and then rises, and BitNet b1.58's two-stage schedule with its S-shaped drop. None
of them is one of `long_runs.KINDS`, `long_blind.KINDS`, ... `long_blind15.KINDS` (nor a bug
of their `BUGS`). They are to be measured once, on the held-out seeds (`SEEDS`), and not tuned
on: a rule changed after looking at them makes them a tuning set.

The interface is `long_blind15`'s: a kind is `(n, rng) -> loss`, each value one logged point;
`series(kind, n, rng)` gives all that a run records: the loss and, where the kind has them, the
learning rate (`LR`, as the PyTorch hook records it, in real units, at each logged point) and
the mode of each step (`MODE`, as `long_blind.eval_pauses` records it: `TRAIN` and `EVAL` steps
save their loss in their mode; `EVAL_UNSAVED` steps are evaluation steps that save no loss).
A bug is `(n, rng) -> (loss, the step its defect begins)`; one bug ends in NaN on most of its
seeds, as such jobs do. Only numpy here: the series can be generated and looked at without
mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _log_uniform, _maybe_rho, _noise, _power  # the first blind set's helpers
from long_blind4 import _f32, _gamma  # the fourth's
from long_blind9 import _warm_cosine  # the ninth's
from long_blind14 import _step_lag  # the fourteenth's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE: the mode of each step
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 16000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _moco_level(t: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """MoCo v2's noise-free InfoNCE and its cosine rate (see `moco_queue_fill`)."""
    k = int(rng.choice([4096, 16384, 65536]))
    batch = int(rng.choice([256, 512, 1024]))
    peak = 0.03 * batch / 256
    rate = peak * 0.5 * (1 + np.cos(np.pi * t / n))
    top = math.log(k + 1)
    start = top * rng.uniform(0.55, 0.75)
    fill = k / batch * rng.uniform(0.5, 1.5)  # steps until the queue holds real keys only
    rise = start + (top * rng.uniform(0.95, 1.0) - start) * (1 - np.exp(-t / fill))
    area = np.cumsum(rate / peak)
    fall = _power(area, 1.0, rng.uniform(0.5, 0.7), n / _log_uniform(rng, 10, 100), rng.uniform(0.5, 0.9))
    return rise * fall, rate


def _bitnet_level(
    t: np.ndarray, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, float, float, float]:
    """BitNet b1.58's first-stage trend and its rate over the whole run, the midpoint, the
    peak and the S-drop's depth (see `bitnet_two_stage`)."""
    mid = n * rng.uniform(0.45, 0.55)
    peak = rng.uniform(1.2e-3, 1.8e-3)
    warm = min(375.0, n * 0.01)
    first = peak * np.minimum((t + 1) / warm, 1 - 0.3 * t / mid)
    second = peak * rng.uniform(0.3, 0.6) * np.clip(1 - (t - mid) / (n - mid), 0.02, 1)
    rate = np.where(t < mid, first, second)
    area = np.cumsum(rate / peak)
    start = math.log(float(rng.choice([32_000, 100_352, 128_256])))
    base = _power(area, start, rng.uniform(2.0, 2.8), n / _log_uniform(rng, 50, 500), rng.uniform(0.4, 0.7))
    return base, rate, mid, peak, rng.uniform(0.04, 0.1)


def _ewc_tasks(n: int, rng: np.random.Generator) -> tuple[int, int, int, float, float, float, float]:
    """Tasks, train steps per task, eval batches per test set, and the per-task floors' and
    penalties' parameters of a permuted-MNIST sequence (see `ewc_permuted_tasks`)."""
    tasks = int(rng.integers(5, 21))
    v = int(max(1, min(rng.integers(10, 21), n // (4 * tasks * (tasks + 1)))))
    s = (n - v * tasks * (tasks + 1) // 2) // tasks
    f0, grow = rng.uniform(0.02, 0.08), rng.uniform(0.05, 0.2)
    p0, scale = rng.uniform(0.01, 0.05), s / _log_uniform(rng, 20, 200)
    return tasks, s, v, f0, grow, p0, scale


# the healthy kinds ----------------------------------------------------------------------------
def _moco_queue_fill(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    level, rate = _moco_level(t, n, rng)
    loss = level * _noise(n, rng, rng.uniform(0.01, 0.03), _maybe_rho(rng))
    return {"loss": _f32(loss), LR: rate}


def moco_queue_fill(n: int, rng: np.random.Generator) -> np.ndarray:
    """MoCo v2's InfoNCE (He et al. 2020, Chen et al. 2020; facebookresearch/moco `main_moco.py
    --mlp --moco-t 0.2 --aug-plus --cos`), logged per iteration: the queue of K = 4k-65k keys
    starts as random unit vectors, easy negatives, so the loss starts at 55-75% of ln(K + 1);
    as the queue fills with the momentum encoder's real keys (K / batch steps, batch 256-1,024)
    the negatives get hard and the loss RISES to 95-100% of ln(K + 1), and only then falls,
    along the cosine rate's area (0.03 x batch / 256, recorded), to 50-70% of it. Noise 1-3%,
    AR(1) on half the seeds; float32."""
    return _moco_queue_fill(n, rng)["loss"]


def _barlow_twins(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    d = int(rng.choice([2048, 4096, 8192]))
    epochs = int(rng.choice([300, 1000]))
    peak = 0.2 * int(rng.choice([1024, 2048])) / 256
    rate = _warm_cosine(t, n, n * 10 / epochs, peak, 0.001)
    area = np.cumsum(rate / peak)
    level = _power(
        area, d * rng.uniform(0.9, 1.2), d * rng.uniform(0.08, 0.25), n / _log_uniform(rng, 200, 2000), 0.7
    )
    loss = level * _noise(n, rng, rng.uniform(0.01, 0.03), _maybe_rho(rng))
    return {"loss": _f32(loss), LR: rate}


def barlow_twins(n: int, rng: np.random.Generator) -> np.ndarray:
    """Barlow Twins (Zbontar et al. 2021, facebookresearch/barlowtwins): the loss
    sum_i (1 - C_ii)^2 + 0.0051 sum_{i != j} C_ij^2 over a projector of D = 2,048-8,192 units,
    so it starts near D (0.9-1.2 D) and falls within the first 0.05-0.5% of the run to a slow
    power law that ends at 8-25% of D: values in the thousands, per-step noise 1-3% (AR(1) on
    half the seeds). LARS, 10 warm-up epochs of 300 or 1,000, then a cosine to 0.001x, the
    weights' rate 0.2 x batch / 256 (batch 1,024-2,048, recorded); float32."""
    return _barlow_twins(n, rng)["loss"]


def _hubert_iterations(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n1 = int(n * rng.uniform(0.3, 0.45))
    loss, lr = [], []
    for m, k, frac in ((n1, 100, rng.uniform(0.55, 0.7)), (n - n1, 500, rng.uniform(0.35, 0.5))):
        j = np.arange(m, dtype=np.float64)
        warm = m * 0.08
        rate = 5e-4 * np.where(j < warm, (j + 1) / warm, (m - j) / (m - warm))
        area = np.cumsum(rate / 5e-4)
        nats = _power(
            area,
            math.log(k) * rng.uniform(1.0, 1.05),
            math.log(k) * frac,
            m / _log_uniform(rng, 20, 200),
            0.7,
        )
        pen = 10 * rng.uniform(0.01, 0.03) * _power(j, 1.0, 0.3, m / 20, 1.0)  # features_pen x 10
        loss.append((nats / math.log(2) + pen) * _noise(m, rng, rng.uniform(0.005, 0.015)))
        lr.append(rate)
    return {"loss": _f32(np.concatenate(loss)), LR: np.concatenate(lr)}


def hubert_iterations(n: int, rng: np.random.Generator) -> np.ndarray:
    """HuBERT BASE's two iterations in one fairseq run directory (Hsu et al. 2021;
    `examples/hubert`, `hubert_base_librispeech.yaml`), each a fresh model under the same
    global step: the first predicts the masked frames' k-means clusters of MFCCs (100), 30-45%
    of the run; the second the 500 clusters of the first model's 6th-layer features. fairseq
    logs the loss in bits (`loss / sample_size / log(2)`), its `features_pen` x 10 in the total
    (0.1-0.3 bits, falling): from log2(100) = 6.6 to 55-70% of it, then a restart at log2(500)
    = 9.0 falling to 35-50% of it. Each iteration warms up over 8% to 5e-4 and decays linearly
    to 0 (recorded); each value the mean of a log interval, noise 0.5-1.5%; float32."""
    return _hubert_iterations(n, rng)["loss"]


def _ldam_drw(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    ep = t / (n / 200)
    rate = (
        0.1
        * np.where(ep < 5, np.floor(ep + 1) / 5, 1.0)
        * np.where(ep >= 180, 1e-4, np.where(ep >= 160, 0.01, 1))
    )
    chance = math.log(float(rng.choice([10, 100])))
    base = _power(
        ep, chance * rng.uniform(1.0, 1.3), chance * rng.uniform(0.15, 0.35), rng.uniform(3, 20), 0.8
    )
    held, tau = rng.uniform(0.3, 0.8), rng.uniform(1, 3)
    after = np.maximum(ep - 160, 0)
    up = np.minimum((ep + 1) / 5, 1) * np.where(ep < 160, 1.0, 0.01 + 0.99 * np.exp(-after / tau))
    w = rng.uniform(1.4, 2.5)  # DRW: the tail classes' higher losses weighted up
    drw = np.where(ep < 160, 1.0, 1 + (w - 1) * (0.4 + 0.6 * np.exp(-after / rng.uniform(2, 8))))
    cv = rng.uniform(0.05, 0.12)
    cv_t = np.where(ep < 160, cv, cv * rng.uniform(1.5, 3.0))
    loss = base * (1 + held * up) * drw * _gamma(n, rng, cv_t)
    return {"loss": _f32(loss), LR: rate}


def ldam_drw(n: int, rng: np.random.Generator) -> np.ndarray:
    """LDAM-DRW on a long-tailed CIFAR-10 or CIFAR-100 (Cao et al. 2019, kaidic/LDAM-DRW
    `--loss_type LDAM --train_rule DRW`, imbalance 100), 200 epochs of n / 200 steps: SGD at 0.1
    after a 5-epoch warm-up, 1e-3 after epoch 160, 1e-5 after 180 (recorded). The LDAM loss
    (s = 30, margins) falls from 1.0-1.3 x ln C to 15-35% of it, held up 30-80% by the rate;
    at epoch 160 the rate drop would take that away within 1-3 epochs, but the deferred
    re-weighting starts there too: class-balanced weights (beta 0.9999) put the tail classes'
    higher losses in front, so the mean steps UP 1.4-2.5x and settles at 40% of that step
    over 2-8 epochs, the batch noise 1.5-3x larger (5-12% before, skewed); float32."""
    return _ldam_drw(n, rng)["loss"]


def _dann(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    p = t / n
    lam = 2 / (1 + np.exp(-10 * p)) - 1
    rate = float(rng.choice([0.01, 0.001])) / (1 + 10 * p) ** 0.75
    chance = math.log(float(rng.choice([10, 31, 65])))
    ce = _power(
        t,
        chance * rng.uniform(1.0, 1.1),
        chance * rng.uniform(0.02, 0.15),
        n / _log_uniform(rng, 20, 200),
        0.8,
    )
    ce = ce * (1 + rng.uniform(0.05, 0.2) * lam) * _gamma(n, rng, rng.uniform(0.1, 0.25))
    dip = rng.uniform(0.3, 0.8)
    d = math.log(2) * (1 - dip * (1 - np.exp(-t / (n * rng.uniform(0.005, 0.03)))) * (1 - lam) ** 2)
    swing = _noise(n, rng, rng.uniform(0.03, 0.1), rng.uniform(0.95, 0.995))  # the min-max game
    d_s = d * swing * _noise(n, rng, rng.uniform(0.03, 0.08))
    d_t = d * swing * _noise(n, rng, rng.uniform(0.03, 0.08))
    return {"loss": _f32(ce + d_s + d_t), LR: rate}


def dann_domain_adversarial(n: int, rng: np.random.Generator) -> np.ndarray:
    """Domain-adversarial training (Ganin & Lempitsky 2015, Ganin et al. 2016; the common
    PyTorch port that logs `err_s_label + err_s_domain + err_t_domain`) on digits, Office-31 or
    Office-Home (10, 31, 65 classes): the source CE from ln C to 2-15% of it, slowed 5-20% by
    the reversal, skewed noise 10-25%; the two domain BCEs start at ln 2, fall by 30-80% in the
    first 0.5-3% while the reversal weight lambda = 2 / (1 + exp(-10 p)) - 1 is still small,
    then are pushed back UP to ln 2 as lambda grows (the features become domain-invariant),
    swinging slowly 3-10% (the min-max game) with 3-8% batch noise. The rate anneals as
    mu0 / (1 + 10 p)^0.75, mu0 0.01 or 0.001 (recorded); float32."""
    return _dann(n, rng)["loss"]


def _alphafold_finetune(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t0 = int(n * rng.uniform(0.8, 0.9))
    t = np.arange(n, dtype=np.float64)
    warm = t0 * rng.uniform(0.01, 0.02)
    rate = np.where(t < t0, 1e-3 * np.minimum((t + 1) / warm, 1) * np.where(t > 0.64 * t0, 0.95, 1), 5e-4)
    scale, p = t0 / _log_uniform(rng, 20, 100), rng.uniform(0.5, 0.8)
    base = _power(t, rng.uniform(4, 6), rng.uniform(1.2, 2.0), scale, p)
    j = np.maximum(t - t0, 0)
    m2 = n - t0
    fine = np.where(
        t < t0, 1.0, rng.uniform(1.05, 1.15) * (1 - rng.uniform(0.02, 0.05) * (1 - np.exp(-j / (m2 * 0.2))))
    )
    viol = np.where(
        t < t0,
        0.0,
        rng.uniform(0.3, 2.0) * np.exp(-j / (m2 * rng.uniform(0.02, 0.1))) + rng.uniform(0.02, 0.1),
    )
    cycles = rng.integers(1, 5, n)  # N_cycle ~ U{1..4} recycling iterations per step
    recycle = 1 + rng.uniform(0.05, 0.15) * (4 - cycles) / 3
    loss = (base * fine * recycle + viol) * _gamma(n, rng, rng.uniform(0.05, 0.15))
    return {"loss": _f32(loss), LR: rate}


def alphafold_finetune(n: int, rng: np.random.Generator) -> np.ndarray:
    """AlphaFold 2 trained as OpenFold does it (Jumper et al. 2021, suppl. 1.11; Ahdritz et al.
    2024): the total of FAPE, distogram, masked-MSA, pLDDT and the other heads from 4-6 to
    1.2-2.0 over the initial training (80-90% of the run; Adam at 1e-3 after a 1-2% warm-up,
    x0.95 after 64% of it), then the fine-tuning stage (larger crops, rate 5e-4, recorded):
    the loss steps up 5-15% for the longer-range pairs, and the structural violation loss
    enters the total at 0.3-2.0 (clashes) and falls within 2-10% of the stage to 0.02-0.1.
    Each step samples 1-4 recycling iterations, the fewer the higher its loss (by up to 5-15%);
    skewed noise 5-15%; float32."""
    return _alphafold_finetune(n, rng)["loss"]


def gflownet_tb(n: int, rng: np.random.Generator) -> np.ndarray:
    """A GFlowNet trained with trajectory balance (Malkin et al. 2022; `torchgfn`, recursionpharma
    `gflownet`), logging the batch mean of (log Z + sum log P_F - log R - sum log P_B)^2 over
    16-128 trajectories: log Z starts 5-30 nats off and catches up (its own 10-100x rate)
    within 0.5-5% of the run, so the loss starts in the hundreds; the residuals' spread falls
    along a power law from 3-10 to 0.1-0.5 nats. 3-15 times in the run the sampler finds a new
    high-reward mode and the spread jumps 2-4x, decaying within 0.2-1% of the run; rare
    off-policy trajectories (0.2% of batches) add one 5-15x residual. The loss is a square:
    chi-squared noise, heavy above; float32."""
    t = np.arange(n, dtype=np.float64)
    b = int(rng.choice([16, 64, 128]))
    bias = rng.uniform(5, 30) * np.exp(-t / (n * rng.uniform(0.005, 0.05)))
    sd = _power(t, rng.uniform(3, 10), rng.uniform(0.1, 0.5), n / _log_uniform(rng, 20, 200), 0.7)
    for at in rng.uniform(0.05, 0.95, int(rng.integers(3, 16))) * n:
        k = t - at
        sd = sd * np.where(
            k >= 0, 1 + rng.uniform(1, 3) * np.exp(-np.maximum(k, 0) / (n * rng.uniform(0.002, 0.01))), 1
        )
    zbar = rng.standard_normal(n) / math.sqrt(b)
    rest = rng.chisquare(b - 1, n) / b
    loss = (bias + sd * zbar) ** 2 + sd**2 * rest
    odd = rng.random(n) < 0.002
    loss[odd] += (sd[odd] * rng.uniform(5, 15, int(odd.sum()))) ** 2 / b
    return _f32(loss)


def sds_amortized(n: int, rng: np.random.Generator) -> np.ndarray:
    """Score distillation sampling (DreamFusion, Poole et al. 2022) amortized over a pool of
    prompts (ATT3D, Lorraine et al. 2023), logged as threestudio logs `train/loss_sds`, the
    surrogate 0.5 ||x - sg(x - grad)||^2 / batch: its value is the squared guided residual
    w(t) ||eps_hat - eps||^2 at one random timestep a step, so it barely measures learning.
    t ~ U(0.02, max) with max annealed linearly from 0.98 to 0.5-0.7 over the first 10-50%
    (ProlificDreamer's annealed time schedule, threestudio's `max_step_percent`), w(t) = 1 -
    alpha_bar(t) on a linear-beta schedule, the residual 1-5x higher at small t: the loss's
    level follows the timestep range and falls only 10-40% from the 3D model's learning;
    100-5,000 in size, skewed per-prompt noise 20-40% on top of the timestep's; float32."""
    t = np.arange(n, dtype=np.float64)
    lo, hi = 0.02, rng.uniform(0.5, 0.7)
    ramp = n * rng.uniform(0.1, 0.5)
    top = 0.98 + (hi - 0.98) * np.minimum(t / ramp, 1)
    u = lo + (top - lo) * rng.random(n)
    abar = np.exp(-(0.1 * u + 9.95 * u**2))
    level = (1 - abar) * (1 + rng.uniform(1, 5) * abar)
    trend = 1 - rng.uniform(0.1, 0.4) * (1 - np.exp(-t / (n * rng.uniform(0.05, 0.3))))
    loss = _log_uniform(rng, 100, 5000) * level * trend * _gamma(n, rng, rng.uniform(0.2, 0.4))
    return _f32(loss)


def _vits_total(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    per_epoch = int(rng.integers(150, 401))
    rate = 2e-4 * 0.999875 ** np.floor(t / per_epoch)
    mel = 45 * _power(t, rng.uniform(0.9, 1.2), rng.uniform(0.3, 0.45), n / _log_uniform(rng, 50, 500), 0.6)
    kl = _power(t, rng.uniform(3, 10), rng.uniform(1.0, 2.0), n / _log_uniform(rng, 100, 1000), 0.7)
    dur = _power(t, rng.uniform(2, 3), rng.uniform(1.0, 1.5), n / _log_uniform(rng, 100, 1000), 0.8)
    fm = 2 * (rng.uniform(0.5, 1.5) + rng.uniform(2, 4) * (1 - 1 / (1 + t / (n * rng.uniform(0.01, 0.1)))))
    adv = rng.uniform(2, 3) * _noise(n, rng, rng.uniform(0.05, 0.15), rng.uniform(0.9, 0.99))
    parts = (mel, kl, dur, fm)
    total = sum(x * _noise(n, rng, rng.uniform(0.03, 0.1)) for x in parts) + adv
    return {"loss": _f32(total), LR: rate}


def vits_total(n: int, rng: np.random.Generator) -> np.ndarray:
    """VITS's generator loss as its `train.py` logs `loss_gen_all` (Kim et al. 2021,
    jaywalnut310/vits, LJSpeech or VCTK): 45 x mel L1 (from 40-55 to 13-20), the KL (3-10 to
    1-2), the duration loss (2-3 to 1-1.5), the adversarial term (2-3, swinging 5-15%, slowly)
    and 2 x feature matching, which RISES from 1-3 towards 5-11 as the discriminators learn
    features worth matching: the total falls fast and then flattens or creeps up a little
    while the mel term still falls. AdamW 2e-4 x 0.999875 per epoch (150-400 steps an epoch,
    recorded); 3-10% noise on each term; float32."""
    return _vits_total(n, rng)["loss"]


def _monodepth2(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    s = np.arange(n)
    at = s[((s < 2000) & (s % 250 == 0)) | (s % 2000 == 0)]  # monodepth2's `log_frequency` logs
    t = s.astype(np.float64)
    rate = np.where(t < 0.75 * n, 1e-4, 1e-5)
    trend = _power(t, rng.uniform(0.2, 0.25), rng.uniform(0.09, 0.12), n / _log_uniform(rng, 50, 500), 0.8)
    trend = trend * (1 - rng.uniform(0.01, 0.03) * (t >= 0.75 * n))
    cv = rng.uniform(0.05, 0.12)
    train = trend * _gamma(n, rng, cv)
    val = trend[at] * rng.uniform(1.0, 1.08) * _gamma(len(at), rng, cv * 1.5)
    loss = np.insert(train, at + 1, val)  # each log's validation batch right after its step
    lr = np.insert(rate, at + 1, rate[at])
    mode = np.insert(np.full(n, TRAIN), at + 1, EVAL)
    return {"loss": _f32(loss[:n]), LR: lr[:n], MODE: mode[:n]}


def monodepth2(n: int, rng: np.random.Generator) -> np.ndarray:
    """Monodepth2's self-supervised depth (Godard et al. 2019, nianticlabs/monodepth2 on KITTI):
    the loss is the per-pixel minimum reprojection error (0.85 SSIM + 0.15 L1, auto-masked)
    plus 1e-3 x edge-aware smoothness, averaged over 4 scales: small values, from 0.20-0.25 to
    0.09-0.12, skewed noise 5-12% from the scenes' texture; Adam 1e-4, x0.1 for the last 5 of
    20 epochs (recorded), 1-3% lower after. Each log (every 250 steps before step 2,000, then
    every 2,000) runs `self.val()`: one validation batch in eval mode, its loss logged (an EVAL
    step, 0-8% above the trend, its noise 1.5x the training batches'); float32. See `series`
    for the modes."""
    return _monodepth2(n, rng)["loss"]


def _rigl(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    per = n / 100
    peak = float(rng.choice([0.4, 1.6]))
    drops = [30 * per, 70 * per, 90 * per]
    rate = peak * np.minimum((t + 1) / (5 * per), 1) * 0.1 ** sum((t >= d).astype(float) for d in drops)
    area = np.cumsum(rate / peak)
    sparsity = float(rng.choice([0.8, 0.9, 0.95]))
    floor = rng.uniform(1.3, 1.8) * (1 + 0.3 * (sparsity - 0.8) / 0.15)
    level = _power(area, math.log(1000) * rng.uniform(1.0, 1.05), floor, n / _log_uniform(rng, 20, 200), 0.8)
    level *= 1 + rng.uniform(0.1, 0.3) * _step_lag(t, drops, [0.1, 0.1, 0.1], per * rng.uniform(0.5, 2))
    every, end = 100, 0.75 * n
    last = np.floor(t / every) * every
    alpha = np.where(last < end, 0.5 * (1 + np.cos(np.pi * last / end)), 0.0)
    bump = rng.uniform(0.01, 0.05) * alpha * np.exp(-(t - last) / rng.uniform(5, 30))
    loss = level * (1 + bump) * _gamma(n, rng, rng.uniform(0.03, 0.08))
    return {"loss": _f32(loss), LR: rate}


def rigl_mask_updates(n: int, rng: np.random.Generator) -> np.ndarray:
    """A sparse ResNet-50 on ImageNet trained with RigL (Evci et al. 2020, google-research/rigl:
    80-95% sparse, ERK): every 100 steps, until 75% of the run, the smallest-magnitude active
    weights are dropped (a fraction 0.3, cosine-decayed to 0) and as many grown where the
    gradient is largest, at zero; each update lifts the loss by 1-5% x the fraction, recovering
    within 5-30 steps: a fading comb of small bumps. SGD with momentum, 0.4 or 1.6 after a
    5-epoch warm-up, x0.1 at epochs 30, 70 and 90 of 100 (recorded); the loss from ln 1000
    along the rate's area to 1.3-1.8 (higher the sparser), held up 10-30% by the rate, each cut
    felt over 0.5-2 epochs; skewed noise 3-8%; float32."""
    return _rigl(n, rng)["loss"]


def _ewc_permuted(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    tasks, s, v, f0, grow, p0, scale = _ewc_tasks(n, rng)
    floors = f0 * (1 + grow * np.arange(tasks))
    gap, forget = rng.uniform(1.1, 1.5), rng.uniform(0.02, 0.1)
    cv = rng.uniform(0.1, 0.3)
    j = np.arange(s, dtype=np.float64)
    loss, mode = [], []
    for k in range(tasks):
        ce = _power(j, math.log(10) * rng.uniform(1.0, 1.4), floors[k], scale, 0.8)
        pen = p0 * k * (1 - np.exp(-j / (s * 0.1)))  # lambda/2 sum F (theta - theta*)^2
        loss.append((ce + pen) * _gamma(s, rng, cv))
        mode.append(np.full(s, TRAIN))
        for i in range(k + 1):  # the test sets of every task seen so far
            loss.append(floors[i] * gap * (1 + forget * (k - i)) * _gamma(v, rng, 0.1))
            mode.append(np.full(v, EVAL))
    out, modes = np.concatenate(loss), np.concatenate(mode)
    pad = n - len(out)
    if pad > 0:
        out = np.r_[out, out[len(out) - pad - v * tasks : len(out) - v * tasks][:pad]]
        modes = np.r_[modes, np.full(pad, TRAIN)]
    return {"loss": _f32(out[:n]), MODE: modes[:n]}


def ewc_permuted_tasks(n: int, rng: np.random.Generator) -> np.ndarray:
    """Elastic weight consolidation on permuted MNIST (Kirkpatrick et al. 2017; the continual
    learning benchmarks' loop, e.g. Avalanche's `EWC` strategy with its evaluation on the test
    stream after each experience): 5-20 tasks in sequence, each a new pixel permutation, the
    total CE + lambda/2 sum F (theta - theta*)^2 logged: at each task the CE jumps back to
    1.0-1.4 x ln 10 and falls to its floor (2-8% of ln 10, 5-20% higher each task as capacity
    is consolidated), the penalty growing within the task to 0.01-0.05 x the tasks before; skewed
    batch noise 10-30%. After each task, 10-20 EVAL batches on the test set of every task seen
    so far, 10-50% above that task's floor and 2-10% more for each task since (forgetting that
    EWC keeps small). A last partial task repeats the tail's training values; float32. See
    `series` for the modes."""
    return _ewc_permuted(n, rng)["loss"]


def ebm_contrastive_divergence(n: int, rng: np.random.Generator) -> np.ndarray:
    """An energy-based image model trained with contrastive divergence (Du & Mordatch 2019,
    openai/ebm_code_release: SGLD negatives from a replay buffer, 60 steps), the logged loss
    E(x+) - E(x-) + alpha (E(x+)^2 + E(x-)^2), alpha 0.1-1: the model first tells data from the
    poor samples easily, and the loss falls from 0 within 0.1-1% of the run BELOW zero,
    towards -1 / (2 alpha) x 75-100%; then the sampler and the buffer catch up and the loss
    RISES back towards 0 (the energy gap to 2-10% of its peak) along a power law, the gap
    swinging 20-40% (the arms race, AR(1) rho 0.99-0.999), the energies' common level
    wandering; batch noise additive, 0.02-0.1 x the gap's peak; float32."""
    t = np.arange(n, dtype=np.float64)
    alpha = _log_uniform(rng, 0.1, 1.0)
    top = rng.uniform(0.5, 1.0) / alpha
    rise = 1 - np.exp(-t / (n * rng.uniform(0.001, 0.01)))
    gap = top * rise * _power(t, 1.0, rng.uniform(0.02, 0.1), n / _log_uniform(rng, 20, 200), 0.8)
    gap *= _noise(n, rng, rng.uniform(0.2, 0.4), rng.uniform(0.99, 0.999))
    common = top * rng.uniform(0.05, 0.2) * (_noise(n, rng, 0.5, 0.999) - 1)
    loss = -gap + alpha * (2 * common**2 + gap**2 / 2)
    loss += top * rng.uniform(0.02, 0.1) * rng.standard_normal(n)
    return _f32(loss)


def _bitnet_two_stage(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    base, rate, mid, peak, depth = _bitnet_level(t, n, rng)
    s_drop = 1 - depth / (1 + np.exp(-(t - mid) / (n * rng.uniform(0.003, 0.01))))
    level = base * (1 + rng.uniform(0.1, 0.2) * np.minimum(rate / peak, 1)) * s_drop
    loss = level * _noise(n, rng, rng.uniform(0.01, 0.03), _maybe_rho(rng))
    return {"loss": _f32(loss), LR: rate}


def bitnet_two_stage(n: int, rng: np.random.Generator) -> np.ndarray:
    """BitNet b1.58 pretraining (Ma et al. 2024, "The Era of 1-bit LLMs: Training Tips, Code
    and FAQ"): ternary weights, a two-stage schedule: warm-up over 375 steps to 1.2e-3-1.8e-3,
    a linear decay to 70% of it at the midpoint (45-55% of the run), then a sharp cut to 30-60%
    of the peak, decaying linearly to 2% (recorded), and weight decay 0.1 switched off there.
    The loss falls from ln V along the rate's area to 2.0-2.8, held up 10-20% by the rate (the
    ternary weights flip more at a high rate), and at the midpoint drops by a further 4-10% in
    an S over 1-4% of the run, as the FAQ shows; noise 1-3% (AR(1) on half the seeds); bf16
    read as float32."""
    return _bitnet_two_stage(n, rng)["loss"]


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "moco_queue_fill": moco_queue_fill,
    "barlow_twins": barlow_twins,
    "hubert_iterations": hubert_iterations,
    "ldam_drw": ldam_drw,
    "dann_domain_adversarial": dann_domain_adversarial,
    "alphafold_finetune": alphafold_finetune,
    "gflownet_tb": gflownet_tb,
    "sds_amortized": sds_amortized,
    "vits_total": vits_total,
    "monodepth2": monodepth2,
    "rigl_mask_updates": rigl_mask_updates,
    "ewc_permuted_tasks": ewc_permuted_tasks,
    "ebm_contrastive_divergence": ebm_contrastive_divergence,
    "bitnet_two_stage": bitnet_two_stage,
}
# the kinds that record more than their loss: {"loss", LR, MODE} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "moco_queue_fill": _moco_queue_fill,
    "barlow_twins": _barlow_twins,
    "hubert_iterations": _hubert_iterations,
    "ldam_drw": _ldam_drw,
    "dann_domain_adversarial": _dann,
    "alphafold_finetune": _alphafold_finetune,
    "vits_total": _vits_total,
    "monodepth2": _monodepth2,
    "rigl_mask_updates": _rigl,
    "ewc_permuted_tasks": _ewc_permuted,
    "bitnet_two_stage": _bitnet_two_stage,
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
def moco_shuffle_bn_lost(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """MoCo v2 (healthy as `moco_queue_fill`), resumed at 30-70% of its run after a refactor
    that drops `_batch_shuffle_ddp` / `_batch_unshuffle_ddp` around the key encoder (or moves
    the job to one GPU with DataParallel, where the shuffle has no effect): queries and their
    positive keys are normalized with the same batch statistics, and the network learns to
    read them (He et al. 2020, sec. 3.3, "the model appears to 'cheat' the pretext task"): the
    loss falls within 0.5-3% of the run to 5-25% of its level and stays there, while nothing
    useful is learned. The onset is the resume."""
    t = np.arange(n, dtype=np.float64)
    level, _ = _moco_level(t, n, rng)
    t0 = int(n * rng.uniform(0.3, 0.7))
    to = rng.uniform(0.05, 0.25)
    k = np.maximum(t - t0, 0)
    cheat = np.where(t < t0, 1.0, to + (1 - to) * np.exp(-k / (n * rng.uniform(0.002, 0.01))))
    return _f32(level * cheat * _noise(n, rng, rng.uniform(0.01, 0.03), _maybe_rho(rng))), t0


def ewc_fisher_summed(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """EWC on permuted MNIST (healthy as `ewc_permuted_tasks`, the training steps only) whose
    Fisher information is accumulated as a sum of squared gradients over the 60,000 training
    examples instead of their mean (a `fisher[n] += p.grad ** 2` without the division), so the
    penalty is ~10^4 x too strong: from the second task on the weights cannot leave the first
    task's optimum, the new task's CE stays at 70-100% of where it started (chance for a new
    permutation) instead of falling to its floor, and the penalty, quadratic in the small moves
    the CE's gradient still forces, rises to 0.5-3 x ln 10 within the task and higher each task.
    The onset is the second task's first step."""
    tasks, s, v, f0, grow, p0, scale = _ewc_tasks(n, rng)
    s = n // tasks
    j = np.arange(s, dtype=np.float64)
    cv = rng.uniform(0.1, 0.3)
    stuck, big = rng.uniform(0.7, 1.0), rng.uniform(0.5, 3.0) * math.log(10)
    out = []
    for k in range(tasks):
        start = math.log(10) * rng.uniform(1.0, 1.4)
        if k == 0:
            x = _power(j, start, f0, scale, 0.8)
        else:
            floor = start * stuck
            x = _power(j, start, floor, scale, 0.8) + big * (1 + 0.2 * (k - 1)) * (
                1 - np.exp(-j / (s * 0.05))
            )
        out.append(x * _gamma(s, rng, cv))
    loss = np.concatenate(out)
    loss = np.r_[loss, loss[len(loss) - (n - len(loss)) :]] if len(loss) < n else loss
    return _f32(loss[:n]), s


def bitnet_stage_two_lr_kept(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """BitNet b1.58's two-stage run (healthy as `bitnet_two_stage`) whose second stage is
    launched from the first's checkpoint with `scheduler.load_state_dict(...)` called after the
    new stage's scheduler is built: its `base_lrs` and lambdas come back from the first stage,
    so the rate is NOT cut at the midpoint (it carries on the first stage's linear decay from
    70% of the peak, down to 40%) while weight decay is switched off as planned. Without decay
    at the high rate the latent weights grow and more ternary weights flip each step: no
    S-drop, and where the healthy run would fall on, the loss drifts 3-10% above its
    first-stage trend over the rest of the run (flat, or creeping up), its noise 1.5-2x. The
    onset is the midpoint."""
    t = np.arange(n, dtype=np.float64)
    base, rate, mid, peak, _ = _bitnet_level(t, n, rng)
    kept = np.where(t < mid, rate, peak * np.maximum(1 - 0.3 * t / mid, 0.4))
    after = np.clip((t - mid) / (n - mid), 0, 1)
    level = base * (1 + rng.uniform(0.1, 0.2) * kept / peak) * (1 + rng.uniform(0.03, 0.1) * after)
    sd = rng.uniform(0.01, 0.03)
    noise = _noise(n, rng, np.where(t < mid, sd, sd * rng.uniform(1.5, 2.0)), _maybe_rho(rng))
    return _f32(level * noise), int(math.ceil(mid))


def ebm_energy_reg_lost(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The energy-based model of `ebm_contrastive_divergence`, resumed at 30-70% of its run
    from a config whose `l2_coeff` was renamed, so alpha is 0: nothing holds the energies'
    scale, the model pushes E(x-) up and E(x+) down without bound, and the loss E(x+) - E(x-)
    runs away below zero, exponentially (doubling every 0.5-3% of the run); on 60% of the seeds
    the energies overflow float32 in the SGLD step within 3-20% of the run and the loss is NaN
    from then on; on the others it runs on towards -10^3-10^5 (where it saturates). The onset is
    the resume."""
    t = np.arange(n, dtype=np.float64)
    alpha = _log_uniform(rng, 0.1, 1.0)
    top = rng.uniform(0.5, 1.0) / alpha
    rise = 1 - np.exp(-t / (n * rng.uniform(0.001, 0.01)))
    gap = top * rise * _power(t, 1.0, rng.uniform(0.02, 0.1), n / _log_uniform(rng, 20, 200), 0.8)
    gap *= _noise(n, rng, rng.uniform(0.2, 0.4), rng.uniform(0.99, 0.999))
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.maximum(t - t0, 0)
    cap = _log_uniform(rng, 1e3, 1e5)  # where the sampler's steps stop moving the energies
    grown = gap[t0] * np.exp(np.minimum(math.log(2) * k / (n * rng.uniform(0.005, 0.03)), 50.0))
    runaway = cap * (1 - np.exp(-grown / cap))
    loss = np.where(t < t0, -gap + alpha * gap**2 / 2, -runaway)
    loss += top * rng.uniform(0.02, 0.1) * rng.standard_normal(n) * np.where(t < t0, 1.0, runaway / top)
    if rng.random() < 0.6:
        loss[t >= t0 + n * rng.uniform(0.03, 0.2)] = np.nan
    return _f32(loss), t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "moco_shuffle_bn_lost": moco_shuffle_bn_lost,
    "ewc_fisher_summed": ewc_fisher_summed,
    "bitnet_stage_two_lr_kept": bitnet_stage_two_lr_kept,
    "ebm_energy_reg_lost": ebm_energy_reg_lost,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
