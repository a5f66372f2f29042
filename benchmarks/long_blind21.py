"""A twenty-first blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind21`.

    .venv/bin/python benchmarks/long_runs.py --blind21 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of a training job look over 10^5-10^6 logged values (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is recipes whose logged value the recipe itself
changes partway, through a term it adds, weighs, blends or switches on a schedule or a trigger
of its own, from fields the earlier sets lack: Graves's handwriting mixture density network,
whose per-line NLL crosses zero on its way to about -1,100 nats; the pointer-generator with its
coverage loss added for the last 3,000 iterations; IMPALA's V-trace total, whose value term
grows with the score and whose entropy term is negative; FastSpeech 2's five summed terms under
a Noam schedule with three anneals; SwAV held near ln 3000 until its queue starts at epoch 15;
Stockfish's NNUE trainer, whose targets blend in game results and make the loss rise; ReLoRA's
merges and optimizer resets under a jagged schedule; LightGCN's BPR loss with its growing L2
term and full-ranking tests; Diffusion Policy's 3,050 epochs over 200 demonstrations, its
validation loss rising; Wav2Lip's expert sync loss switched on when an evaluation crosses 0.75;
VSE++'s hardest-negative loss with its plateau at 2 x batch x margin; DALL-E's dVAE with its KL
weight and Gumbel temperature annealed; a ControlNet's flat loss from its zero convolutions, with
its sudden convergence; and XLM's unsupervised translation steps interleaved, the auto-encoding
ones weighted down to nothing and then skipped. None of them is one of `long_runs.KINDS`,
`long_blind.KINDS`, ... `long_blind20.KINDS` (nor a bug of their `BUGS`). They are to be
measured once, on the held-out seeds (`SEEDS`), and not tuned on: a rule changed after looking
at them makes them a tuning set.

The interface is `long_blind20`'s: a kind is `(n, rng) -> loss`, each value one logged point;
`series(kind, n, rng)` gives all that a run records: the loss and, where the kind has them, the
learning rate (`LR`, as the PyTorch hook records it, in real units, at each logged point) and
the mode of each step (`MODE`, as `long_blind.eval_pauses` records it: `TRAIN` and `EVAL` steps
save their loss in their mode; `EVAL_UNSAVED` steps are evaluation steps that save no loss).
Where a kind compresses a run of more steps than it has points, its epochs, schedules and
evaluation passes keep their real proportions. A bug is `(n, rng) -> (loss, the step its defect
begins)`; one bug ends in NaN on most of its seeds, as such jobs do. Only numpy here: the series
can be generated and looked at without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _log_uniform, _noise, _power  # the first blind set's helpers
from long_blind4 import _f32, _gamma  # the fourth's
from long_blind11 import _slow_walk  # the eleventh's
from long_blind14 import _step_lag  # the fourteenth's
from long_blind17 import _area  # the seventeenth's
from long_blind19 import _bounds  # the nineteenth's
from long_blind20 import _blow_up, _learned  # the twentieth's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE: the mode of each step
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 21000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _to_end(t: np.ndarray, start: float, end: float, scale: float, p: float) -> np.ndarray:
    """A power-law decay in `t` from `start` that reaches `end` at the last `t` (its asymptote
    set below to make it so), as a run's logs show the loss it ended at."""
    q = (1 + t[-1] / scale) ** -p
    floor = (end - start * q) / (1 - q)
    return floor + (start - floor) / (1 + t / scale) ** p


def _passes(mode: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each step of a run with evaluation passes: the index of the last training step before
    it (among the training steps only), the evaluation pass it belongs to and its place in that
    pass (both meaningful on evaluation steps only)."""
    m = int((mode == TRAIN).sum())
    done = np.clip(np.cumsum(mode == TRAIN) - 1, 0, max(m - 1, 0))
    ev = mode != TRAIN
    first = ev & ~np.r_[False, ev[:-1]]
    run = np.maximum(np.cumsum(first) - 1, 0)
    starts = np.flatnonzero(first)
    pos = np.arange(len(mode)) - (starts[run] if len(starts) else 0)
    return done, run, pos


def _fill(
    mode: np.ndarray, train: np.ndarray, evals: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
) -> np.ndarray:
    """A run's values: `train` on its training steps in order, and on its evaluation steps what
    `evals(done, run, pos)` gives for them (see `_passes`)."""
    out = np.empty(len(mode))
    done, run, pos = _passes(mode)
    tr = mode == TRAIN
    out[tr] = train
    ev = ~tr
    if ev.any():
        out[ev] = evals(done[ev], run[ev], pos[ev])
    return out


# the healthy kinds ----------------------------------------------------------------------------
def _graves(n: int, rng: np.random.Generator, repeated: bool = False) -> tuple[dict[str, np.ndarray], int]:
    epochs = max(3, int(round(n / 11_450)))
    per = n / epochs
    v = max(1, int(round(per * 1_450 / 11_450)))  # the validation lines, after each epoch
    every = max(1, int(round(per)) - v)
    mode, m = _bounds(n, every, v)
    x = np.arange(m) / every  # epochs
    start, end = rng.uniform(3.3, 3.7), -rng.uniform(1.45, 1.65)  # nats per pen point
    w, tau = rng.uniform(0.6, 0.8), rng.uniform(0.02, 0.1)
    s, p = rng.uniform(0.2, 1.0), rng.uniform(0.6, 1.0)

    def level(e: np.ndarray) -> np.ndarray:
        return end + (start - end) * (w * np.exp(-e / tau) + (1 - w) / (1 + e / s) ** p)

    med, spread = rng.uniform(600, 700), rng.uniform(0.35, 0.45)  # points per line
    style = rng.uniform(0.15, 0.35)  # each line's own difficulty, nats per point
    lines = med * np.exp(spread * rng.standard_normal(m))
    style_i = style * rng.standard_normal(m)
    val_lines = med * np.exp(spread * rng.standard_normal(v))  # the same lines, in order, each pass
    val_style = style * rng.standard_normal(v)
    gap0, gap1 = rng.uniform(0.03, 0.1), rng.uniform(0.0, 0.08)
    onset = n
    lvl = level(x)
    lvl_at_pass = level(np.arange(epochs + 2, dtype=np.float64))
    rep = np.zeros(m)
    frac = 0.0
    if repeated:  # from an epoch on the lines keep their repeated points: a component collapses on them
        e0 = int(epochs * rng.uniform(0.3, 0.7))
        e0 = min(max(e0, 1), epochs - 1)
        onset = int(np.flatnonzero(np.cumsum(mode == TRAIN) == e0 * every + 1)[0])
        frac = rng.uniform(0.03, 0.1)  # the share of points that repeat the one before
        drop = rng.uniform(5, 60)  # log sigma of the collapsing component, per epoch
        k = np.maximum(x - e0, 0)
        s0 = (level(np.float64(e0)) + math.log(frac) - math.log(2 * math.pi)) / 2
        log_sigma = s0 - drop * k
        rep = np.where(x >= e0, log_sigma, np.nan)
    learned = _learned(lvl, start, end)

    def per_point(base: np.ndarray, sig: np.ndarray) -> np.ndarray:
        if not repeated:
            return base
        collapsed = np.minimum(base, -math.log(frac) + math.log(2 * math.pi) + 2 * sig)
        return np.where(np.isnan(sig), base, (1 - frac) * base + frac * collapsed)

    train = lines * (per_point(lvl, rep) + style_i * learned) + rng.normal(0, 3.0, m)

    def evals(done: np.ndarray, run: np.ndarray, pos: np.ndarray) -> np.ndarray:
        e = run + 1
        base = lvl_at_pass[e] + gap0 + gap1 * e / epochs
        p_i = np.minimum(pos, v - 1)
        val = val_lines[p_i] * (per_point(base, rep[done]) + val_style[p_i] * learned[done])
        return val + rng.normal(0, 3.0, len(done))

    loss = _fill(mode, train, evals)
    if repeated:  # float32: sigma^2 underflows, the density overflows, and the weights go NaN
        sig_all = _fill(mode, rep, lambda done, run, pos: rep[done])
        dead = np.flatnonzero(sig_all < -50)
        if len(dead):
            loss[dead[0] :] = np.nan
    return {"loss": _f32(loss), LR: np.full(n, 1e-4), MODE: mode}, onset


def _graves_mdn(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _graves(n, rng)[0]


def graves_handwriting_mdn(n: int, rng: np.random.Generator) -> np.ndarray:
    """Handwriting prediction with an LSTM and a mixture density output (Graves 2013,
    "Generating sequences with recurrent neural networks", section 4: IAM-OnDB's online lines,
    about 10,000 for training and 1,450 for validation, each a sequence of pen offsets and
    end-of-stroke bits; 3 LSTM layers, 20 bivariate Gaussians; RMSprop at 1e-4, recorded; each
    logged value one line, a line per update as RNNLIB trains). The logged loss is the line's negative log-likelihood in nats, summed over
    its points (600-700 at the median, log-normal spread 35-45%), the way the paper reports it:
    a density, so it falls from about +3.5 nats a point (untrained: wide Gaussians) through zero
    within the first fifth of an epoch or so to -1.45 to -1.65 a point, about -1,000 to -1,100
    a line, most of it fast and the rest along a power law. A line's value is its length times
    its level, each line's style moving that by 0.15-0.35 nats a point once the model has
    learned (unlearned, all lines alike), so the values swing by hundreds of nats around a
    negative level; +-3 nats of other noise. After each epoch the validation lines are scored in
    order (EVAL steps that save their loss, 11% of the steps, the same lines each pass, 0.03-0.1
    nats a point above training and up to 0.08 more by the end); float32."""
    return _graves_mdn(n, rng)["loss"]


def _pgen(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    iters, cov_at = 233_000, 230_000
    it = np.arange(n) * iters / n
    start, mid, end = math.log(50_000), rng.uniform(4.5, 6.0), rng.uniform(2.4, 3.2)
    s, p = rng.uniform(1_000, 10_000), rng.uniform(0.5, 0.9)
    q = (1 + cov_at / s) ** -p
    floor = (end - mid * q) / (1 - q)  # so that the last iteration before coverage sits at `end`
    level = floor + (mid - floor) / (1 + it / s) ** p + (start - mid) * np.exp(-it / rng.uniform(300, 2000))
    t_r = cov_at * rng.uniform(0.3, 0.6)  # the articles' truncation raised to 400 tokens
    k = np.maximum(it - t_r, 0)
    after = it >= t_r
    bump = rng.uniform(0.02, 0.06) * np.exp(-k / rng.uniform(1_000, 5_000))
    gain = rng.uniform(0.03, 0.08) * (1 - np.exp(-k / rng.uniform(5_000, 20_000)))
    level = level * (1 + after * (bump - gain))
    kc = np.maximum(it - cov_at, 0)
    on = it >= cov_at
    level = level * (1 + on * rng.uniform(0.005, 0.02) * (1 - np.exp(-kc / 500)))  # attention constrained
    nll = level * _gamma(n, rng, rng.uniform(0.08, 0.14))
    c0, c_end = rng.uniform(0.45, 0.6), rng.uniform(0.17, 0.25)
    cov = on * (c_end + (c0 - c_end) * np.exp(-kc / rng.uniform(300, 1_200))) * _gamma(n, rng, 0.15)
    return {"loss": _f32(nll + cov), LR: np.full(n, 0.15)}


def pointer_generator_coverage(n: int, rng: np.random.Generator) -> np.ndarray:
    """Abstractive summarization of CNN/Daily Mail with a pointer-generator network (See et al.
    2017, "Get to the point"; abisee/pointer-generator, and the PyTorch port
    atulkum/pointer_summarizer, which logs the total it minimizes: a 50k vocabulary, batches of
    16, Adagrad at 0.15 with initial accumulators of 0.1, recorded, gradients clipped at 2). The
    logged loss is the mean NLL per summary token: from ln 50,000 to 4.5-6 within a few hundred
    to 2,000 iterations, then along a power law to 2.4-3.2 at 230k iterations (12.8 epochs);
    noise 8-14%, skewed (the articles). The model first trains on articles truncated short and
    the limit is raised to 400 tokens partway (30-60% in, as the paper describes): the loss
    bumps up 2-6% and then settles 3-8% lower over 5k-20k iterations. For the last 3,000
    iterations (1.3% of the run) the coverage mechanism is switched on with its loss at weight
    1: the logged value steps up by the coverage loss, about 0.45-0.6 at first, which falls
    within a few hundred to 1,200 iterations to 0.17-0.25 (the paper: from about 0.5 to about
    0.2), the NLL 0.5-2% higher as the attention is constrained; float32."""
    return _pgen(n, rng)["loss"]


def _impala(n: int, rng: np.random.Generator, unclipped: bool = False) -> tuple[dict[str, np.ndarray], int]:
    u = (np.arange(n) + 0.5) / n  # the fraction of the environment steps done
    actions = int(rng.choice([4, 6, 9, 18]))
    cost = float(rng.choice([0.0006, 0.001, 0.01]))
    tb = 80 * 8  # unroll length x batch: the terms are SUMS over 640 steps
    ent0, keep = math.log(actions), rng.uniform(0.15, 0.5)
    ent = ent0 * (keep + (1 - keep) * np.exp(-u / rng.uniform(0.05, 0.3))) * _noise(n, rng, 0.03)
    prog = 1 - np.exp(-((u / rng.uniform(0.1, 0.6)) ** rng.uniform(1.0, 2.0)))  # the score, 0 to 1
    s0, s1 = rng.uniform(0.01, 0.05), rng.uniform(0.1, 0.5)  # the value error, clipped rewards
    sv = s0 + (s1 - s0) * prog
    eff = rng.uniform(10, 40)  # independent stretches among the 640 steps (V-trace targets overlap)
    df = rng.uniform(3.0, 5.0)
    onset = n
    if unclipped:  # resumed with reward_clipping "none": raw game scores as rewards
        onset = int(n * rng.uniform(0.3, 0.6))
        k = np.maximum(np.arange(n) - onset, 0) / n
        scale = _log_uniform(rng, 5, 300)
        sv = np.where(u * n >= onset, sv * scale * (0.25 + 0.75 * np.exp(-k / rng.uniform(0.01, 0.05))), sv)
        ent = np.where(u * n >= onset, ent * (0.05 + 0.95 * np.exp(-k / rng.uniform(0.002, 0.02))), ent)
    z = rng.standard_t(df, n) / math.sqrt(df / (df - 2))
    pg = tb * sv * np.maximum(ent, 0.05) / math.sqrt(eff) * z  # sum of cross-entropy x advantage
    baseline = 0.5 * 0.5 * tb * sv**2 * _gamma(n, rng, math.sqrt(2 / eff))  # baseline_cost x 0.5 sum(adv^2)
    entropy = -cost * tb * ent  # entropy_cost x sum(p log p)
    lr0 = float(rng.choice([4.8e-4, 6e-4]))
    return {"loss": _f32(pg + baseline + entropy), LR: lr0 * (1 - (np.arange(n) / n))}, onset


def _impala_total(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _impala(n, rng)[0]


def impala_vtrace_total(n: int, rng: np.random.Generator) -> np.ndarray:
    """An IMPALA agent on an Atari game (Espeholt et al. 2018; facebookresearch/torchbeast's
    monobeast and polybeast: unrolls of 80 steps, batches of 8, V-trace, baseline cost 0.5,
    entropy cost 0.0006-0.01, rewards clipped to [-1, 1], RMSprop at 4.8e-4 or 6e-4 decayed
    linearly to 0 over the run, recorded), each logged point one learner step. The logged
    `total_loss` is a SUM over the 640 steps of the batch of three terms: the policy-gradient
    loss (cross-entropy x advantage: zero-mean, its spread set by the advantages and the
    policy's entropy, heavy-tailed, Student t of 3-5 degrees: the rare reward), the baseline
    loss (0.5 x 0.5 x the squared value errors, which grow as the agent learns to score: an error
    of 0.01-0.05 per step at first, 0.1-0.5 once it scores often) and the entropy term, NEGATIVE
    (entropy cost x sum of p log p: from -cost x 640 x ln A, A = 4-18 actions, shrinking to
    15-50% of that as the policy sharpens). So the healthy total first hovers around a negative
    value (the entropy term, -0.4 to -18) with a spread of a few units to ten and then, as the
    score rises, its mean rises with the baseline loss and its spread grows tenfold or more:
    nothing in it falls; float32."""
    return _impala_total(n, rng)["loss"]


def _fastspeech2(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    steps = 900_000
    m0 = max(int(round(n * 1000 / 1032)), 1)
    every = max(int(round(1000 * m0 / steps)), 1)
    v = max(1, int(round(32 * m0 / steps)))  # 512 validation utterances, batches of 16
    mode, m = _bounds(n, every, v)
    s = (np.arange(m) + 1.0) * steps / m
    anneals = (s >= 300_000).astype(int) + (s >= 400_000) + (s >= 500_000)
    rate = 256**-0.5 * np.minimum(s**-0.5, s * 4000**-1.5) * 0.3**anneals
    area = _area(rate)
    lag = _step_lag(s, [300_000.0, 400_000.0, 500_000.0], [0.3, 0.3, 0.3], rng.uniform(5_000, 30_000))
    settle = 1 - rng.uniform(0.03, 0.08) * (1 - lag) / (1 - 0.3**3)  # each anneal takes a little more off

    def term(start: float, end: float, fast: float) -> np.ndarray:
        return _to_end(area, start, end, m * fast, rng.uniform(0.5, 0.9)) * settle

    mel = term(rng.uniform(1.5, 3.0), rng.uniform(0.15, 0.3), rng.uniform(0.002, 0.01))
    post = mel * (1 - rng.uniform(0.01, 0.05) * _learned(mel, mel[0], mel[-1]))
    pitch = term(rng.uniform(0.7, 1.1), rng.uniform(0.1, 0.25), rng.uniform(0.002, 0.01))
    energy = term(rng.uniform(0.4, 0.9), rng.uniform(0.04, 0.12), rng.uniform(0.002, 0.01))
    dur = term(rng.uniform(2.0, 5.0), rng.uniform(0.05, 0.12), rng.uniform(0.0005, 0.003))
    length = _gamma(m, rng, rng.uniform(0.04, 0.07))  # the batch's utterances, sorted by length in groups
    cv = rng.uniform(0.15, 0.25)
    train = (
        (mel + post) * length
        + pitch * _gamma(m, rng, cv)
        + energy * _gamma(m, rng, cv)
        + dur * _gamma(m, rng, cv)
    )
    gap_mel, gap_var = rng.uniform(1.05, 1.2), rng.uniform(1.1, 1.3)
    late = rng.uniform(0.0, 0.1)
    batch_mel = _gamma(v, rng, 0.05)  # the same validation batches each time
    batch_var = _gamma(v, rng, 0.15)

    def evals(done: np.ndarray, run: np.ndarray, pos: np.ndarray) -> np.ndarray:
        f = 1 + late * done / m
        body = (mel[done] + post[done]) * gap_mel * f * batch_mel[pos]
        return body + (pitch[done] + energy[done] + dur[done]) * gap_var * f * batch_var[pos]

    loss = _fill(mode, train, evals)
    lr = _fill(mode, rate, lambda done, run, pos: rate[done])
    return {"loss": _f32(loss), LR: lr, MODE: mode}


def fastspeech2_variance(n: int, rng: np.random.Generator) -> np.ndarray:
    """Text to speech with FastSpeech 2 on LJSpeech (Ren et al. 2021; ming024/FastSpeech2's
    configs: batches of 16 utterances, 900k steps, Adam with the Noam schedule, 256^-0.5 x
    min(step^-0.5, step x 4000^-1.5), x0.3 at each of 300k, 400k and 500k steps, recorded:
    about 1e-3 at its peak). The logged total is the sum of five losses: the mel and the
    post-net mel L1 (from 1.5-3 each to 0.15-0.3, the post-net's 1-5% lower once it has
    learned), the pitch and energy MSE of the variance predictors (to 0.1-0.25 and 0.04-0.12:
    what the text does not say about them stays), and the MSE of the log durations (from 2-5,
    faster, to 0.05-0.12), all along the rate's area, each anneal taking 3-8% more off over the
    next 5k-30k steps. Noise: the batch's utterances (4-7% on the mel terms) and 15-25% on each
    variance term, skewed. Every 1,000 steps the 512 validation utterances are scored in the
    same batches each time (EVAL steps that save their loss, 3% of the steps: the mel terms
    5-20% and the variance terms 10-30% above training, 0-10% more by the end); float32."""
    return _fastspeech2(n, rng)["loss"]


def _swav(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    epochs = 200
    x = np.arange(n) * epochs / n
    rate = 0.0006 + (0.6 - 0.0006) * 0.5 * (1 + np.cos(np.pi * x / epochs))  # no warm-up
    slow = np.where(x < 1, rng.uniform(0.2, 0.5), np.where(x < 15, rng.uniform(0.3, 0.7), 1.0))
    prog = np.cumsum(rate / 0.6 * slow) * epochs / n  # epochs at the peak rate, as the codes teach
    ln_k = math.log(3000)
    extra = rng.uniform(0.5, 1.5)  # what soft codes cost while 256 samples share 3,000 prototypes
    end = rng.uniform(2.5, 4.0)
    base = end + (ln_k - extra - end) / (1 + prog / rng.uniform(0.5, 3.0)) ** rng.uniform(0.4, 0.8)
    queue = np.where(x < 15, 0.0, 1 - np.exp(-np.maximum(x - 15, 0) / rng.uniform(0.1, 1.0)))
    level = base + extra * (1 - queue)
    loss = level * _noise(n, rng, rng.uniform(0.015, 0.03))
    return {"loss": _f32(loss), LR: rate}


def swav_queue_start(n: int, rng: np.random.Generator) -> np.ndarray:
    """Self-supervised pretraining with SwAV on ImageNet at a small batch (Caron et al. 2020;
    facebookresearch/swav's README command for small batches: 256 images a batch, 2 x 224 + 6 x
    96 crops, 3,000 prototypes, Sinkhorn with epsilon 0.05, SGD with LARC, base rate 0.6 on a
    cosine to 0.0006 with no warm-up, recorded; 200 epochs of 5,005 iterations; the prototypes
    frozen for the first 5,005 iterations, `freeze_prototypes_niters`; a queue of 3,840 features
    from epoch 15, `epoch_queue_starts`). The logged loss is the swapped-prediction
    cross-entropy averaged over the crops: ln 3000 = 8.006 when nothing is learned. With 256
    samples to share 3,000 prototypes equally the codes must stay soft, which keeps the loss
    0.5-1.5 nats up and its fall slow (slower still in the first epoch, the prototypes frozen);
    from epoch 15 the queue lets the codes sharpen and the loss drops by that much within
    0.1-1 epoch, then falls along the rate's area to 2.5-4.0. Noise 1.5-3%; float32."""
    return _swav(n, rng)["loss"]


def _nnue(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    epochs = int(rng.choice([400, 800]))
    per = n / epochs
    v = max(1, int(round(per * 0.015)))
    every = max(1, int(round(per)) - v)
    mode, m = _bounds(n, every, v)
    x = np.arange(m) / every  # epochs
    rate = 8.75e-4 * 0.992 ** np.floor(x)
    blend = rng.random() < 0.7
    lam_end = rng.uniform(0.7, 0.8) if blend else 1.0
    lam = 1.0 + (lam_end - 1.0) * x / epochs
    err = _power(
        x, rng.uniform(0.03, 0.06), rng.uniform(1.2e-3, 3e-3), rng.uniform(0.1, 1.0), rng.uniform(0.5, 0.9)
    )
    d_wdl = (1 - lam) * rng.uniform(0.2, 0.35)  # the game results' share of the target: unpredictable
    level = (err ** (2 / 2.6) + d_wdl**2) ** 1.3
    wander = np.exp(rng.uniform(0.02, 0.05) * _slow_walk(m, rng, every * rng.uniform(0.2, 2.0)))
    train = level * wander * _noise(m, rng, rng.uniform(0.01, 0.02))
    val_ratio = rng.uniform(1.0, 1.05)
    batches = _noise(v, rng, 0.02)

    def evals(done: np.ndarray, run: np.ndarray, pos: np.ndarray) -> np.ndarray:
        return level[done] * val_ratio * batches[pos]

    loss = _fill(mode, train, evals)
    return {"loss": _f32(loss), LR: _fill(mode, rate, lambda done, run, pos: rate[done]), MODE: mode}


def nnue_lambda_blend(n: int, rng: np.random.Generator) -> np.ndarray:
    """Training a chess evaluation network with Stockfish's trainer (official-stockfish/
    nnue-pytorch, on PyTorch Lightning: positions with their search scores and game results
    streamed from binpack files, batches of 16,384, epochs of 100M positions, 400 or 800 of
    them, Ranger at 8.75e-4 x 0.992 per epoch, recorded). The loss is |sigmoid(output) -
    target|^2.6, the target blending the search score's win probability with the game's result
    as lambda x score + (1 - lambda) x result; on 70% of the seeds lambda moves linearly from
    1.0 to 0.7-0.8 over the run (`--start-lambda`, `--end-lambda`). The network's own error falls
    from 0.03-0.06 within the first epochs to 1.2e-3-3e-3, but the results it is asked to match
    more and more are what no evaluation predicts: where lambda falls, the loss bottoms out and
    then RISES for most of the run, healthy. Noise 1-2% (a batch is large), and a 2-5% wander
    as the stream moves through files of different sources. After each epoch a validation set
    is scored (EVAL steps that save their loss, 1.5% of the steps, 0-5% above training, the same
    batches each time); float32."""
    return _nnue(n, rng)["loss"]


def _relora(n: int, rng: np.random.Generator, no_rewarm: bool = False) -> tuple[dict[str, np.ndarray], int]:
    t = np.arange(n, dtype=np.float64)
    every = int(rng.choice([1000, 2000, 4000, 5000]))  # ReLoRA's merge-and-reset interval
    every = min(every, max(n // 8, 200))
    first_warm, rewarm = min(500, every // 4), min(100, every // 10)
    peak = 1e-3
    prog = np.clip((t - first_warm) / max(n - first_warm, 1), 0, 1)
    cosine = 0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * prog))
    k = t % every
    ratio = np.where(t < first_warm, t / first_warm, cosine)
    restart = (t >= every) & (k < rewarm)
    end_prog = np.clip((t - k + rewarm - first_warm) / max(n - first_warm, 1), 0, 1)
    ratio = np.where(restart, k / rewarm * (0.1 + 0.45 * (1 + np.cos(np.pi * end_prog))), ratio)
    rate = peak * ratio
    start, end = rng.uniform(3.6, 4.4), rng.uniform(2.9, 3.4)  # from the full-rank warm start's checkpoint
    level = _to_end(_area(rate), start, end, n * rng.uniform(0.05, 0.3), rng.uniform(0.5, 0.9))
    amp = rng.uniform(0.003, 0.015)  # each reset: Adam's state zeroed, the new LoRA factors fresh
    tau = rng.uniform(50, 300)
    since = np.where(t >= every, k, np.inf)
    bump = amp * np.minimum(since / max(rewarm, 1), 1.0) * np.exp(-since / tau)
    onset = n
    if no_rewarm:  # a refactored scheduler: plain cosine, no dip and re-warm-up at the resets
        first = int(rng.uniform(0.3, 0.6) * n / every) + 1
        onset = min(first * every, n - 1)
        j = np.floor(t / every) - first  # resets since the onset
        a0, grow = rng.uniform(0.05, 0.3), rng.uniform(1.5, 3.0)
        kick = np.minimum(a0 * grow ** np.maximum(j, 0), 1.0)
        held = 0.25 + 0.75 * np.exp(-since / (tau * rng.uniform(2, 5)))  # a quarter of each kick stays
        bump = np.where(t >= onset, kick * held, bump)
        overflows = rng.random() < 0.8
    loss = level * (1 + bump) * _noise(n, rng, rng.uniform(0.01, 0.025))
    if no_rewarm:
        kicks = max(1, int(np.ceil(math.log(0.6 / a0) / math.log(grow))))
        at = min(onset + kicks * every, n - 1)  # the reset whose kick no longer recovers
        loss = _blow_up(loss, at, rng, _log_uniform(rng, 0.002, 0.02), _log_uniform(rng, 3, 50), overflows)
    return {"loss": _f32(loss), LR: rate}, onset


def _relora_jagged(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _relora(n, rng)[0]


def relora_jagged_restarts(n: int, rng: np.random.Generator) -> np.ndarray:
    """Language-model pretraining with ReLoRA (Lialin et al. 2023, "ReLoRA: high-rank training
    through low-rank updates"; Guitaricet/relora `torchrun_main.py` with `--relora 1000-5000
    --cycle_length` the same `--restart_warmup_steps 100 --scheduler cosine_restarts
    --reset_optimizer_on_relora`), continued from a full-rank warm-start checkpoint: every
    1,000-5,000 updates the LoRA factors are merged into the weights and re-initialized and
    Adam's state is zeroed. The rate follows the jagged cosine: 500 warm-up updates to 1e-3,
    a cosine to 10% over the run, and at each reset a drop to 0 and a re-warm-up over 100
    updates to the cosine's value, recorded. The logged loss (the LM's cross-entropy, from the
    checkpoint's 3.6-4.4 along the rate's area to 2.9-3.4) bumps up 0.3-1.5% at every reset as
    the rate comes back, recovering within 50-300 updates: 20-100 small saw-teeth in a healthy
    run. Noise 1-2.5%; float32."""
    return _relora_jagged(n, rng)["loss"]


_LIGHTGCN = {  # training interactions, users (gusye1234/LightGCN-PyTorch's data)
    "gowalla": (810_128, 29_858),
    "yelp2018": (1_237_259, 31_668),
    "amazon-book": (2_380_730, 52_643),
}


def _lightgcn(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    name = list(_LIGHTGCN)[int(rng.integers(len(_LIGHTGCN)))]
    inter, users = _LIGHTGCN[name]
    batches, tests = -(-inter // 2048), -(-users // 100)  # bpr_batch 2048, testbatch 100
    epochs = max(20, min(1000, n // 30))
    per = n / epochs
    every = max(1, int(round(10 * per * batches / (batches + tests / 10))))  # ten epochs of training
    v = max(1, int(round(10 * per)) - every)  # then the full-ranking test, no loss
    mode, m = _bounds(n, every, v)
    x = np.arange(m) * epochs / m
    b1, b_end = rng.uniform(0.15, 0.3), rng.uniform(0.008, 0.04)
    bpr = _to_end(x, b1, b_end, rng.uniform(1, 20), rng.uniform(0.6, 1.0))
    bpr = bpr + (math.log(2) - b1) * np.exp(-x / rng.uniform(0.1, 0.5))
    r0 = 0.5 * 3 * 64 * 0.1**2  # half the squared norms of 3 ego embeddings of 64, init N(0, 0.1)
    r_end = rng.uniform(5, 30)
    reg = r0 + (r_end - r0) * (1 - np.exp(-x / rng.uniform(50, 300)))
    train = bpr * _gamma(m, rng, rng.uniform(0.03, 0.08)) + 1e-4 * reg * _noise(m, rng, 0.02)
    loss = _fill(mode, train, lambda done, run, pos: bpr[done] + 1e-4 * reg[done])  # never saved
    mode[mode == EVAL] = EVAL_UNSAVED
    return {"loss": _f32(loss), LR: np.full(n, 1e-3), MODE: mode}


def lightgcn_bpr_reg(n: int, rng: np.random.Generator) -> np.ndarray:
    """Collaborative filtering with LightGCN (He et al. 2020; gusye1234/LightGCN-PyTorch: 64-d
    embeddings, 3 layers, batches of 2,048 (user, positive, negative) triples sampled afresh
    each epoch, Adam at 1e-3, recorded, weight decay 1e-4 applied in the loss, 1,000 epochs;
    Gowalla, Yelp2018 or Amazon-book, 396-1,163 batches an epoch). The logged loss is the BPR
    loss, mean softplus(negative score - positive score), plus 1e-4 x half the squared norms of
    the batch's ego embeddings per triple: the BPR term from ln 2 to 0.15-0.3 within the first
    epoch, then along a power law to 0.008-0.04; the L2 term GROWS as the embeddings do, from
    1e-4 to 5e-4-3e-3, so late in the run it is a fair share of the total and can hold it flat
    or lift it a little. Noise 3-8%. Every 10 epochs all users are ranked against all items for
    recall and NDCG (EVAL steps that save no loss, 100 users a batch: 4-7% of the steps);
    float32."""
    return _lightgcn(n, rng)["loss"]


def _dp(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    epochs = max(10, min(3050, n // 30))
    batches = int(rng.integers(360, 400))  # about 24k training windows of 16 steps, batch 64
    val, sample, rollout = 8, 1, 38  # 2% of the episodes; one sampled batch; 50 envs x 300 steps / 8
    per = n / epochs
    unit = per / (batches + val + sample / 5 + rollout / 50)
    tr, vb = max(1, int(round(batches * unit))), max(1, int(round(val * unit)))
    rb = max(1, int(round(rollout * unit)))
    modes = []
    e, total = 0, 0
    while total < n:
        block = [np.full(tr, TRAIN), np.full(vb, EVAL)]
        if (e + 1) % 5 == 0:
            block.append(np.full(1, EVAL_UNSAVED))  # sample_every 5: an action MSE, no loss
        if (e + 1) % 50 == 0:
            block.append(np.full(rb, EVAL_UNSAVED))  # rollout_every 50
        b = np.concatenate(block)
        modes.append(b)
        total += len(b)
        e += 1
    mode = np.concatenate(modes)[:n]
    m = int((mode == TRAIN).sum())
    x = np.arange(m) / tr  # epochs
    steps = m * batches / tr
    s = np.arange(m) * steps / m
    rate = 1e-4 * np.minimum((s + 1) / 500, 1.0) * 0.5 * (1 + np.cos(np.pi * s / steps))
    floor = rng.uniform(0.004, 0.02)
    level = _to_end(x, rng.uniform(0.05, 0.15), floor, rng.uniform(5, 50), rng.uniform(0.5, 0.9))
    level = level + (1.0 - level[0]) * np.exp(-x / rng.uniform(0.5, 3.0))  # from E[eps^2] = 1
    train = level * _gamma(m, rng, rng.uniform(0.15, 0.3))  # each sample's own diffusion step
    best = rng.uniform(50, 300)
    v_min = np.interp(best, x, level) * rng.uniform(1.5, 3.0)
    rise = rng.uniform(0.5, 2.0)
    v_shape = _gamma(vb, rng, 0.1)
    early_ratio = rng.uniform(1.5, 3.0)

    def evals(done: np.ndarray, run: np.ndarray, pos: np.ndarray) -> np.ndarray:
        xe = x[done]
        early = np.maximum(level[done] * early_ratio, v_min)
        late = v_min * (1 + rise * (np.maximum(xe - best, 0) / max(epochs - best, 1.0)) ** 0.7)
        val_level = np.where(xe < best, early, late)
        return val_level * v_shape[np.minimum(pos, vb - 1)] * _gamma(len(done), rng, 0.1)

    loss = _fill(mode, train, evals)
    return {"loss": _f32(loss), LR: _fill(mode, rate, lambda done, run, pos: rate[done]), MODE: mode}


def diffusion_policy_pusht(n: int, rng: np.random.Generator) -> np.ndarray:
    """Visuomotor imitation with Diffusion Policy on Push-T (Chi et al. 2023;
    real-stanford/diffusion_policy's image Push-T config: about 200 demonstrations, windows of 16
    actions, batches of 64, 360-400 batches an epoch, 3,050 epochs; AdamW at 1e-4 with 500
    warm-up steps and a cosine to 0, recorded; DDPM with 100 training steps, epsilon
    prediction). The logged loss is the noise-prediction MSE: from E[eps^2] = 1 to 0.05-0.15
    within a few epochs, then along a power law to 0.004-0.02, as so few demonstrations are
    learned by heart; noise 15-30%, skewed (each sample draws its own diffusion step). Every
    epoch the held-out 2% of the episodes is scored (EVAL steps that save their loss): it bottoms
    out 1.5-3x above training by epoch 50-300 and then RISES, 50-200% by the end, as a tiny
    behaviour-cloning set does, while the rollouts' success does not suffer (the recipe picks
    checkpoints by rollouts, never by this loss). Every 5 epochs one batch is sampled for its
    action error and every 50 epochs 50 environments are rolled out (EVAL steps that save no
    loss); float32."""
    return _dp(n, rng)["loss"]


def _wav2lip(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    steps = float(rng.uniform(2e5, 6e5))
    m0 = max(int(round(n * 3000 / 3700)), 1)
    every = max(int(round(3000 * m0 / steps)), 1)
    v = max(1, int(round(700 * m0 / steps)))  # eval_steps 700 every eval_interval 3,000
    mode, m = _bounds(n, every, v)
    s = np.arange(m) * steps / m
    l1_end = rng.uniform(0.015, 0.03)
    l1 = _to_end(s, rng.uniform(0.04, 0.06), l1_end, rng.uniform(2_000, 20_000), rng.uniform(0.5, 0.9))
    l1 = l1 + (rng.uniform(0.15, 0.25) - l1[0]) * np.exp(-s / rng.uniform(300, 2_000))
    n_evals = max(1, m // every)
    first = int(n_evals * rng.uniform(0.15, 0.5))  # the first evaluation whose sync loss is below 0.75
    switch = min((first + 1) * every, m - 1)
    k = np.maximum(np.arange(m) - switch, 0) * steps / m
    on = np.arange(m) >= switch
    sync_end = rng.uniform(0.2, 0.35)
    sync = sync_end + (rng.uniform(0.6, 0.75) - sync_end) * np.exp(-k / rng.uniform(1e4, 5e4))
    wt = np.where(on, 0.01, 0.0)
    train = (1 - wt) * l1 * _gamma(m, rng, rng.uniform(0.05, 0.1)) + wt * sync * _gamma(m, rng, 0.25)
    loss = _fill(mode, train, lambda done, run, pos: (1 - wt[done]) * l1[done] + wt[done] * sync[done])
    mode[mode == EVAL] = EVAL_UNSAVED
    return {"loss": _f32(loss), LR: np.full(n, 1e-4), MODE: mode}


def wav2lip_sync_switch(n: int, rng: np.random.Generator) -> np.ndarray:
    """Lip-sync generation with Wav2Lip (Prajwal et al. 2020; Rudrabha/Wav2Lip `wav2lip_train.py`,
    the generator without the visual-quality discriminator: LRS2 face crops, batches of 16,
    Adam at 1e-4, recorded, a frozen pretrained SyncNet expert; 200k-600k steps). The logged
    loss is `syncnet_wt x sync_loss + (1 - syncnet_wt) x L1`, with `syncnet_wt` 0 at first: the L1
    reconstruction of the lower half of the face alone, from 0.15-0.25 within a few thousand
    steps to 0.04-0.06 and along a power law to 0.015-0.03, noise 5-10%. Every 3,000 steps 700
    validation batches are scored (EVAL steps that save no loss: 19% of the steps); at the
    first evaluation whose mean sync loss is below 0.75 (15-50% of the way), the script sets
    `syncnet_wt` to 0.01 for good: the logged value steps UP by 0.01 x the sync loss, 0.006-0.0075
    on an L1 of 0.02-0.04, a rise of 15-35% at one step, and eases as the sync loss falls to
    0.2-0.35 over 10k-50k steps (noise 25% on it); float32."""
    return _wav2lip(n, rng)["loss"]


def _vsepp(n: int, rng: np.random.Generator, collapse: bool = False) -> tuple[dict[str, np.ndarray], int]:
    coco = rng.random() < 0.7
    iters, val = (4_426, 196) if coco else (1_133, 40)  # COCO's 566k captions or Flickr30k's 145k
    epochs = 30
    per = n / epochs
    v = max(1, int(round(per * val / (iters + val))))
    every = max(1, int(round(per)) - v)
    mode, m = _bounds(n, every, v)
    x = np.arange(m) / every  # epochs
    s = x * iters  # iterations
    plateau = 2 * 128 * 0.2  # every pair's hardest negative scored like its positive: 51.2
    start = plateau * rng.uniform(1.6, 2.3)
    fall = rng.uniform(100, 400)
    leave = rng.uniform(300, 5_000)  # iterations stuck on the plateau
    end = rng.uniform(2.0, 8.0)
    sc, p = rng.uniform(500, 5_000), rng.uniform(0.4, 0.8)
    pre = plateau + (start - plateau) * np.exp(-s / fall)
    post = end + (plateau - end) / (1 + np.maximum(s - leave, 0) / sc) ** p
    level = np.where(s < leave, pre, np.minimum(pre, post))
    lag = _step_lag(s, [15.0 * iters], [0.1], rng.uniform(200, 1_500))
    level = level * (1 - rng.uniform(0.05, 0.15) * (1 - lag) / 0.9)  # the rate / 10 at epoch 15
    near = np.clip((level - plateau) / plateau, 0, None) + np.clip((plateau - level) / plateau, 0, None)
    cv = rng.uniform(0.05, 0.1) * np.minimum(near * 4, 1.0) + 0.002  # at the plateau nothing varies
    onset = n
    if collapse:  # resumed at epoch 15 with --finetune: the image CNN trained too, and it collapses
        e0 = int(rng.integers(15, 21))
        e0 = min(e0, epochs - 2)
        i0 = min(e0 * every, m - 1)
        onset = int(np.flatnonzero(np.cumsum(mode == TRAIN) == i0 + 1)[0])
        kk = np.maximum(s - i0 * iters / every, 0)
        w = 1 - np.exp(-kk / rng.uniform(100, 1_000))
        level = np.where(np.arange(m) >= i0, level + (plateau - level) * w, level)
        cv = np.where(np.arange(m) >= i0, cv * (1 - w) + 0.002 * w, cv)
    train = level * _gamma(m, rng, cv)
    val_ratio = rng.uniform(1.1, 1.3)
    batches = _gamma(v, rng, 0.05)

    def evals(done: np.ndarray, run: np.ndarray, pos: np.ndarray) -> np.ndarray:
        lv = level[done]
        stuck = np.abs(lv - plateau) < 0.01 * plateau
        return np.where(
            stuck, plateau * (1 + 0.001 * rng.standard_normal(len(done))), lv * val_ratio * batches[pos]
        )

    loss = _fill(mode, train, evals)
    rate = np.where(x < 15, 2e-4, 2e-5)
    return {"loss": _f32(loss), LR: _fill(mode, rate, lambda done, run, pos: rate[done]), MODE: mode}, onset


def _vsepp_hardest(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _vsepp(n, rng)[0]


def vsepp_hardest_negative(n: int, rng: np.random.Generator) -> np.ndarray:
    """Image-caption retrieval with VSE++ (Faghri et al. 2018; fartashf/vsepp `train.py
    --max_violation`: precomputed ResNet-152 features, a GRU caption encoder, batches of 128,
    margin 0.2, Adam at 2e-4 for 15 epochs and 2e-5 for 15 more, recorded; COCO on 70% of the
    seeds, 4,426 iterations an epoch, Flickr30k on the rest, 1,133). The loss is SUMMED over
    the batch: for each image and each caption, the hinge against its hardest negative in the
    batch. It starts at 1.6-2.3x 2 x 128 x 0.2 = 51.2, falls within a few hundred iterations
    onto 51.2 exactly, where all embeddings have collapsed and every hardest negative scores like
    its positive, sits there for 300-5,000 iterations with almost no noise (fartashf/vsepp issue
    27 shows this plateau, left quickly with precomputed features), then leaves it and falls
    along a power law to 2-8 (noise 5-10%), 5-15% more at the rate's drop. After each epoch the
    validation set is encoded in order with its loss (EVAL steps that save their loss, 4% of
    the steps, 10-30% above training, the same batches each pass); float32."""
    return _vsepp_hardest(n, rng)["loss"]


def _dvae(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    updates = 3_000_000
    u = np.arange(n) * updates / n
    cos_to = 1_200_000
    c = np.clip(u / cos_to, 0, 1)
    rate = 1.25e-6 + (1e-4 - 1.25e-6) * 0.5 * (1 + np.cos(np.pi * c))
    beta = 6.6 * 0.5 * (1 - np.cos(np.pi * np.clip(u / 5_000, 0, 1)))
    tau = 1 / 16 + (1 - 1 / 16) * 0.5 * (1 + np.cos(np.pi * np.clip(u / 150_000, 0, 1)))
    r0, r_end = rng.uniform(0.8, 1.5), -rng.uniform(0.4, 1.2)  # nats per subpixel (a density)
    sharp = rng.uniform(0.05, 0.2)  # what decoding near-discrete codes costs, once tau is low
    recon = _to_end(_area(rate), r0, r_end - sharp, n * rng.uniform(0.002, 0.02), rng.uniform(0.4, 0.8))
    recon = recon + sharp * (1 - tau) / (1 - 1 / 16)  # harder as the relaxation sharpens
    h_end = rng.uniform(1.0, 4.0)  # the encoder's entropy per position, from ln 8192
    ent = h_end + (math.log(8192) - h_end) * np.exp(-u / rng.uniform(2e4, 1e5))
    kl = (math.log(8192) - ent) * 1024 / (256 * 256 * 3)  # 32 x 32 codes over 256 x 256 x 3 subpixels
    loss = recon + beta * kl + rng.normal(0, rng.uniform(0.005, 0.02), n)
    return {"loss": _f32(loss), LR: rate}


def dalle_dvae_gumbel(n: int, rng: np.random.Generator) -> np.ndarray:
    """The discrete VAE of DALL-E (Ramesh et al. 2021, "Zero-shot text-to-image generation",
    appendix A: 256 x 256 images to 32 x 32 codes of 8,192, the Gumbel-softmax relaxation with
    its temperature annealed from 1 to 1/16 over the first 150,000 updates, the KL weight from 0
    to 6.6 over the first 5,000, AdamW at 1e-4 on a cosine to 1.25e-6 over 1.2M updates, then
    held there, recorded; 3M updates at batch 512). The logged loss is the negative ELBO per
    subpixel: the logit-Laplace reconstruction NLL, a density, so it falls from 0.8-1.5 nats
    through zero to -0.4 to -1.2, plus beta x the KL of the code distribution against the
    uniform prior (ln 8192 minus the encoder's entropy, over 1,024 positions per 196,608
    subpixels). As beta ramps in and the codes sharpen the KL term GROWS to 0.17-0.28, and while
    the temperature falls the reconstruction is held up by 0.05-0.2 (a sharper relaxation is
    harder to decode): over the first 5% of the run these add 0.2-0.5 nats to a total that is
    falling fast, slowing its fall; after that it falls along the rate's area and flattens
    once the rate is held. Noise 0.005-0.02 nats, additive (the value crosses zero); float32."""
    return _dvae(n, rng)["loss"]


def _controlnet(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    batch = int(rng.choice([4, 8, 16, 32]))
    base = rng.uniform(0.08, 0.15)  # Stable Diffusion's own loss: zero convolutions start as it
    at = min(rng.uniform(3_000, 12_000), n * 0.3)  # the sudden convergence
    width = rng.uniform(200, 1_000)
    drop = rng.uniform(0.03, 0.08) / (1 + np.exp(-(t - at) / (width / 4)))
    drift = rng.uniform(0.01, 0.04) * (1 - np.exp(-np.maximum(t - at, 0) / (n * rng.uniform(0.2, 0.6))))
    level = base * (1 - drop - drift)
    cv = rng.uniform(0.9, 1.3) / math.sqrt(batch)  # each sample draws its own timestep
    loss = level * _gamma(n, rng, cv)
    return {"loss": _f32(loss), LR: np.full(n, 1e-5)}


def controlnet_sudden_convergence(n: int, rng: np.random.Generator) -> np.ndarray:
    """Training a ControlNet on a frozen Stable Diffusion 1.5 (Zhang et al. 2023, "Adding
    conditional control to text-to-image diffusion models"; lllyasviel/ControlNet's
    `tutorial_train.py`: AdamW at a constant 1e-5, recorded, batches of 4-32, half the prompts
    emptied). The loss is the latent diffusion noise-prediction MSE. The zero convolutions make
    the model at step 0 exactly Stable Diffusion, so the loss starts at SD's own level,
    0.08-0.15, and has no learning curve to speak of; its noise is huge and skewed (each sample
    draws its timestep: 90-130% over the square root of the batch). Within the first 3k-12k
    steps comes the "sudden convergence" the paper describes: the model starts to follow the
    condition within a few hundred steps, and the loss's mean drops 3-8% at once, then drifts
    1-4% lower over the rest of the run, all hidden in the noise; float32."""
    return _controlnet(n, rng)["loss"]


def _xlm(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    total = rng.uniform(3.5e5, 6e5)  # iterations: each runs AE en, AE fr, BT en-fr-en, BT fr-en-fr
    epoch = rng.uniform(800, 1_500)  # iterations per 200,000-sentence epoch
    ev_share = rng.uniform(0.05, 0.1)  # generation-based evaluation after each epoch, in steps
    real = 4 * 300_000 + 2 * (total - 300_000)  # optimizer steps in the run
    c = real * (1 + ev_share) / n  # the run's iterations per logged iteration
    j = np.arange(n, dtype=np.float64)  # more logged iterations than the run can fill
    it = j * c
    lam = np.interp(it, [0, 100_000, 300_000], [1.0, 0.1, 0.0])
    width = np.where(lam > 0, 4, 2)  # XLM skips a step whose lambda is 0
    new_epoch = np.floor((j + 1) * c / epoch) > np.floor(j * c / epoch)
    k_ev = max(1, int(round(ev_share * epoch * 3 / c)))
    seg = width + new_epoch * k_ev
    ends = np.cumsum(seg)
    cycles = int(np.searchsorted(ends, n)) + 1
    cyc = np.repeat(np.arange(cycles), seg[:cycles])[:n]
    pos = np.arange(n) - (ends[cyc] - seg[cyc])
    slot = np.where(width[cyc] == 4, pos, pos + 2)  # 0, 1: AE en, fr; 2, 3: BT en-fr-en, fr-en-fr
    train = pos < width[cyc]
    at = it[cyc]
    ae = _to_end(
        at, rng.uniform(2.0, 3.0), rng.uniform(0.8, 1.4), rng.uniform(2e3, 2e4), rng.uniform(0.5, 0.9)
    )
    bt = _to_end(
        at, rng.uniform(3.0, 4.5), rng.uniform(1.3, 2.2), rng.uniform(1e4, 1e5), rng.uniform(0.4, 0.8)
    )
    tilt = rng.uniform(-0.1, 0.1)  # fr-en-fr against en-fr-en
    la = lam[cyc]
    value = np.select(
        [slot == 0, slot == 1, slot == 2], [la * ae, la * ae * (1 - tilt / 2), bt], default=bt * (1 + tilt)
    )
    loss = np.where(train, value * _noise(n, rng, rng.uniform(0.05, 0.08)), bt)  # evaluation: never saved
    updates = np.maximum(np.cumsum(train), 1) * c  # the run's optimizer steps so far
    lr = 1e-4 * np.minimum(updates / 4000, np.sqrt(4000 / updates))
    mode = np.where(train, TRAIN, EVAL_UNSAVED)
    return {"loss": _f32(loss), LR: lr, MODE: mode}


def xlm_unmt_steps(n: int, rng: np.random.Generator) -> np.ndarray:
    """Unsupervised machine translation with XLM (Lample & Conneau 2019; facebookresearch/XLM's
    README command for English-French: an encoder and decoder initialized from a pretrained
    MLM, `--ae_steps 'en,fr' --bt_steps 'en-fr-en,fr-en-fr' --lambda_ae '0:1,100000:0.1,300000:0'`,
    word shuffle, dropout and blanking as the AE noise, 2,000 tokens a batch, Adam with an
    inverse square root schedule after 4,000 warm-up updates to 1e-4, recorded, epochs of
    200,000 sentences, 350k-600k iterations). Every iteration makes FOUR optimizer steps, each
    logged: a denoising auto-encoding step in English and one in French, whose losses are
    multiplied by lambda_ae before backward (from 2-3 to 0.8-1.4 nats a token, times a weight
    that falls linearly from 1 to 0.1 over 100k iterations and to 0 at 300k), then the two
    on-the-fly back-translation steps (from 3-4.5 to 1.3-2.2, the two directions 0-10%
    apart). So the series is a cycle of four whose two AE values shrink towards 0, and once
    lambda_ae is 0 XLM skips the AE steps: the cycle becomes one of two. Noise 5-8% a step.
    After each epoch the model translates the validation and test sets for BLEU (EVAL steps
    that save no loss, 4-8% of the steps); float32."""
    return _xlm(n, rng)["loss"]


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "graves_handwriting_mdn": graves_handwriting_mdn,
    "pointer_generator_coverage": pointer_generator_coverage,
    "impala_vtrace_total": impala_vtrace_total,
    "fastspeech2_variance": fastspeech2_variance,
    "swav_queue_start": swav_queue_start,
    "nnue_lambda_blend": nnue_lambda_blend,
    "relora_jagged_restarts": relora_jagged_restarts,
    "lightgcn_bpr_reg": lightgcn_bpr_reg,
    "diffusion_policy_pusht": diffusion_policy_pusht,
    "wav2lip_sync_switch": wav2lip_sync_switch,
    "vsepp_hardest_negative": vsepp_hardest_negative,
    "dalle_dvae_gumbel": dalle_dvae_gumbel,
    "controlnet_sudden_convergence": controlnet_sudden_convergence,
    "xlm_unmt_steps": xlm_unmt_steps,
}
# the kinds that record more than their loss: {"loss", LR, MODE} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "graves_handwriting_mdn": _graves_mdn,
    "pointer_generator_coverage": _pgen,
    "impala_vtrace_total": _impala_total,
    "fastspeech2_variance": _fastspeech2,
    "swav_queue_start": _swav,
    "nnue_lambda_blend": _nnue,
    "relora_jagged_restarts": _relora_jagged,
    "lightgcn_bpr_reg": _lightgcn,
    "diffusion_policy_pusht": _dp,
    "wav2lip_sync_switch": _wav2lip,
    "vsepp_hardest_negative": _vsepp_hardest,
    "dalle_dvae_gumbel": _dvae,
    "controlnet_sudden_convergence": _controlnet,
    "xlm_unmt_steps": _xlm,
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
def relora_rewarm_dropped(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The ReLoRA run of `relora_jagged_restarts`, resumed 30-60% of the way through by a script
    whose refactored scheduler is a plain cosine: at every reset Adam's state is still zeroed
    and the LoRA factors re-initialized, but the rate no longer drops to 0 and re-warms, so the
    first updates on empty moments (each about three times a normal update's size) land at the
    full rate. From the first reset after the resume each reset kicks the loss up, 5-30% at
    first and 1.5-3x more at each reset after, recovering less each time; once a kick reaches
    about 60% the run runs away (the loss climbs by 0.2-20% a step, 0.6-6.5% on average) and on
    80% of the seeds overflows to NaN once it is 3-50x its level; on the others it saturates
    there, wandering. The onset is the first reset after the resume."""
    out, onset = _relora(n, rng, no_rewarm=True)
    return out["loss"], onset


def impala_rewards_unclipped(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The IMPALA run of `impala_vtrace_total`, resumed 30-60% of the way through with a
    flags file that sets `--reward_clipping none`: the learner now sees the game's raw scores,
    5-300x the clipped rewards, and the value errors, targets and advantages scale with them.
    The baseline loss (squared errors) jumps by 25 to 90,000 times and the policy-gradient term
    by 5-300x at the first learner step after the resume; the value head catches up only in
    part (to a quarter of the jump over 1-5% of the run, its gradients clipped at 40), and the
    policy, pushed by huge advantages, collapses to near-deterministic within 0.2-2% of the run
    (its entropy to 5%). The onset is the first step after the resume."""
    out, onset = _impala(n, rng, unclipped=True)
    return out["loss"], onset


def mdn_repeated_points(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The handwriting run of `graves_handwriting_mdn`, resumed at an epoch 30-70% of the way
    through with a rewritten preprocessing that no longer drops repeated pen samples: 3-10% of
    each line's points are now exact repeats, an offset of (0, 0). A mixture density network
    can put one component on that single point and shrink its sigma without bound, each step
    buying more likelihood: the repeated points' NLL falls by 2 x 5-60 nats per epoch (the log
    sigma's fall), so the loss per line dives below anything the data allows (from about -1,000
    to several thousand below zero within an epoch, tens of thousands for long lines), which
    looks like progress, in training and validation alike. Once sigma^2 underflows float32
    (log sigma below -50) the density overflows and the run is NaN from there, on the seeds
    that get that far. The onset is the resumed epoch's first step."""
    out, onset = _graves(n, rng, repeated=True)
    return out["loss"], onset


def vsepp_finetune_collapse(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The VSE++ run of `vsepp_hardest_negative`, resumed at epoch 15-20 with `--finetune` to
    train the ResNet-152 as well (the paper's fine-tuned variant): with the hardest negatives
    and the image encoder now free, the embeddings collapse (fartashf/vsepp issue 27: stuck for
    good at 2 x batch x margin when fine-tuning). Within 100-1,000 iterations the loss rises from
    its level by then (about 5-20) to 51.2 exactly and stays there, its noise gone, in training
    and validation. The onset is the resumed epoch's first step."""
    out, onset = _vsepp(n, rng, collapse=True)
    return out["loss"], onset


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "relora_rewarm_dropped": relora_rewarm_dropped,
    "impala_rewards_unclipped": impala_rewards_unclipped,
    "mdn_repeated_points": mdn_repeated_points,
    "vsepp_finetune_collapse": vsepp_finetune_collapse,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
