"""An eighteenth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind18`.

    .venv/bin/python benchmarks/long_runs.py --blind18 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of a training job look over 10^5-10^6 logged values (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is fields other than language-model pretraining and
the way their jobs log the loss: speech (wav2vec 2.0's CTC fine-tune with its frozen stage,
logged per sentence in bits; a speaker-embedding network whose additive angular margin is
ramped in), recommendation (a CTR model trained past its first epoch; a Wide & Deep model on
daily partitions with FTRL and Adagrad), reinforcement learning (RND's predictor meeting new
rooms; CQL's offline critic with its conservative penalty), a walk-forward backtest of a return
predictor refit on rolling windows with its out-of-sample evaluations, scientific ML (a PINN
with learning-rate-annealing loss weights; an incremental FNO's resolution curriculum),
instance discrimination with a memory bank filled over the first epoch, a LiDAR detector's
one-cycle schedule with its ground-truth sampling faded out, cross-silo federated rounds with a
server-side Adam, VoxelMorph's registration loss below zero and a genomics model's Poisson loss
on coverage tracks. None of them is one of `long_runs.KINDS`, `long_blind.KINDS`, ...
`long_blind17.KINDS` (nor a bug of their `BUGS`). They are to be measured once, on the
held-out seeds (`SEEDS`), and not tuned on: a rule changed after looking at them makes them a
tuning set.

The interface is `long_blind17`'s: a kind is `(n, rng) -> loss`, each value one logged point;
`series(kind, n, rng)` gives all that a run records: the loss and, where the kind has them, the
learning rate (`LR`, as the PyTorch hook records it, in real units, at each logged point; in a
federated run the clients' rate) and the mode of each step (`MODE`, as `long_blind.eval_pauses`
records it: `TRAIN` and `EVAL` steps save their loss in their mode; `EVAL_UNSAVED` steps are
evaluation steps that save no loss). A bug is `(n, rng) -> (loss, the step its defect
begins)`; one bug ends in NaN on most of its seeds, as such jobs do. Only numpy here: the
series can be generated and looked at without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _log_uniform, _noise, _power  # the first blind set's helpers
from long_blind3 import _lag  # the third's
from long_blind4 import _f32, _gamma  # the fourth's
from long_blind10 import _decays, _epoch_order  # the tenth's
from long_blind11 import _slow_walk  # the eleventh's
from long_blind14 import _step_lag  # the fourteenth's
from long_blind17 import _area  # the seventeenth's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE: the mode of each step
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 18000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _entropy(p: np.ndarray | float) -> np.ndarray:
    """The log loss of predicting a click rate `p` exactly: its binary entropy in nats."""
    p = np.asarray(p, dtype=np.float64)
    return -(p * np.log(p) + (1 - p) * np.log(1 - p))


def _onset(n: int, rng: np.random.Generator) -> int:
    """A bug's resume step: 30-70% of the run."""
    return int(n * rng.uniform(0.3, 0.7))


# the healthy kinds ----------------------------------------------------------------------------
def _wav2vec2_ctc(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    ten_hours = rng.random() < 0.5
    freeze = n * (10 / 20 if ten_hours else 10 / 13)  # freeze_finetune_updates 10k of 20k or 13k
    peak, warm, hold = 5e-5, 0.1 * n, 0.5 * n
    decay = peak * np.exp(math.log(0.05) * (t - hold) / (n - hold))
    rate = np.where(t < warm, peak * (0.01 + 0.99 * t / warm), np.where(t < hold, peak, decay))
    area = _area(rate)
    s0 = rng.uniform(120, 200)  # bits per second of audio through the random head
    blank = s0 * rng.uniform(0.25, 0.4)  # every frame a blank
    at = int(n * rng.uniform(0.02, 0.08))  # the alignments form
    gate = 1 / (1 + np.exp(-(t - at) / (n * rng.uniform(0.001, 0.005))))
    early = blank + (s0 - blank) * np.exp(-t / (n * rng.uniform(0.002, 0.01)))
    head = rng.uniform(4, 10)  # what a linear head on the frozen features reaches
    aligned = _power(np.maximum(area - area[at], 0), blank, head, n * rng.uniform(0.005, 0.03), 0.8)
    level = (1 - gate) * early + gate * np.minimum(aligned, early)
    k = np.maximum(t - freeze, 0)
    tuned = 1 - rng.uniform(0.3, 0.6) * (1 - np.exp(-k / (n * rng.uniform(0.003, 0.02))))
    tuned = tuned * (1 - rng.uniform(0.1, 0.3) * (1 - 1 / (1 + k / (n * 0.1))))
    level = level * np.where(t >= freeze, tuned, 1.0)
    seconds = np.exp(math.log(rng.uniform(11, 15)) + rng.uniform(0.3, 0.5) * rng.standard_normal(n))
    seconds = np.clip(seconds, 1.5, 35.0)  # one length bucket per batch, the batches shuffled
    loss = level * seconds * _gamma(n, rng, rng.uniform(0.03, 0.08))
    return {"loss": _f32(loss), LR: rate}


def wav2vec2_ctc_finetune(n: int, rng: np.random.Generator) -> np.ndarray:
    """A wav2vec 2.0 BASE model fine-tuned with CTC on Libri-light's labelled subsets (Baevski
    et al. 2020; fairseq `examples/wav2vec/config/finetuning/base_10h.yaml` or `base_1h`:
    `freeze_finetune_updates 10000` of 20,000 or 13,000 updates, so only the output projection
    trains for the first 50% or 77% of the run; Adam on the `tri_stage` schedule, 1% of 5e-5
    rising over 10%, held to 50%, decayed exponentially to 5% of it, recorded; `mask_prob 0.65`;
    `sentence_avg true`), the loss as its `ctc` criterion reports it: summed over each
    utterance's frames, per SENTENCE and in bits (divided by ln 2). Per second of audio it falls
    from 120-200 bits through the random head to a plateau at 25-40% of that (every frame a
    blank) until the alignments form at 2-8% of the run, then along the rate's area to 4-10
    bits/s (what the frozen features allow); when the transformer is unfrozen it drops by
    30-60% within 0.3-2% of the run and 10-30% more slowly. `max_tokens` batches hold
    utterances of one length, 11-15 s at the median (log-normal spread 0.3-0.5, 1.5-35 s),
    shuffled, so the per-sentence loss jumps with each batch's length; noise 3-8%; float32."""
    return _wav2vec2_ctc(n, rng)["loss"]


def _wespeaker(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    per = n / 150  # 150 epochs
    epoch = t / per
    speakers = float(rng.choice([5994, 17982]))  # VoxCeleb2 dev, or x3 with speed perturbation
    rate = 0.1 * (5e-5 / 0.1) ** (t / n) * np.minimum((t + 1) / (6 * per), 1.0)
    x = np.clip((epoch - 20) / 20, 0, 1)
    margin = 0.2 * (1 - np.exp(math.log(1e-3) * x))  # increase_type "exp", epochs 20 to 40
    area = _area(rate)
    end = rng.uniform(0.75, 0.95)  # the mean angle to the speaker's centre, in radians
    angle = end + (math.pi / 2 - end) / (1 + area / (n * rng.uniform(0.005, 0.03))) ** rng.uniform(0.5, 0.8)
    angle = angle - rng.uniform(0.3, 0.7) * _lag(margin, per * rng.uniform(3, 10), 0.0)  # tightened
    spread = rng.uniform(0.15, 0.3)  # the angles' spread over a batch's utterances
    nodes, weights = np.polynomial.hermite_e.hermegauss(9)
    weights = weights / weights.sum()
    loss = np.zeros(n)
    for z, w in zip(nodes, weights, strict=True):
        target = np.cos(np.clip(angle + spread * z + margin, 0.0, math.pi))
        loss += w * np.logaddexp(0.0, math.log(speakers - 1) - 32 * target)  # s = 32
    loss = loss * _gamma(n, rng, rng.uniform(0.04, 0.1))
    return {"loss": _f32(loss), LR: rate}


def wespeaker_margin_ramp(n: int, rng: np.random.Generator) -> np.ndarray:
    """A speaker-verification ResNet trained with WeSpeaker's VoxCeleb recipe (Wang et al. 2023,
    wenet-e2e/wespeaker `examples/voxceleb/v2`, after Deng et al. 2019's ArcFace): an additive
    angular margin softmax over VoxCeleb2's 5,994 speakers (17,982 with speed perturbation as
    new speakers), scale 32, its margin held at 0 for 20 epochs and raised to 0.2 between
    epochs 20 and 40 by the `MarginScheduler` (`increase_type: exp`, fast first), of 150; SGD
    at 0.1 decreasing exponentially to 5e-5 after 6 warm-up epochs (recorded). The loss starts
    at ln(speakers) (embeddings at 90 degrees from every centre) and falls as the angle to the
    speaker's centre closes along the rate's area; as the margin comes in the loss RISES 2-4
    fold, since the target logit is now cos(angle + m), and falls again as the network makes
    up 30-70% of the margin over 3-10 epochs, then flattens as the rate runs out (to 0.3-2 at
    the end); the batch's angles spread 0.15-0.3 rad around their mean (MUSAN and RIR
    augmentation); noise 4-10%; float32."""
    return _wespeaker(n, rng)["loss"]


def _ctr_epochs(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.integers(2, 5))
    per = n / epochs
    epoch = np.minimum(np.floor(t / per), epochs - 1)
    criteo = rng.random() < 0.5
    h = float(_entropy(0.256 if criteo else 0.17))
    floor = h * (rng.uniform(0.77, 0.8) if criteo else rng.uniform(0.81, 0.84))
    level = _power(t, h, floor, per * rng.uniform(0.01, 0.1), 0.8)
    level = level + (math.log(2) - h) * np.exp(-t / rng.uniform(50, 500))  # the bias learned
    drop, tau = rng.uniform(0.05, 0.15), per * rng.uniform(0.005, 0.05)
    kept = np.ones(n)
    for e in range(1, epochs):
        k = np.maximum(t - e * per, 0)
        hit = drop * 0.5 ** (e - 1) * (1 - np.exp(-k / tau))
        slow = rng.uniform(0.01, 0.03) * 0.5 ** (e - 1) * k / per
        kept -= np.where(t >= e * per, hit + slow, 0.0)
    batch = float(rng.choice([2048, 4096, 10000]))
    loss = level * kept * _gamma(n, rng, rng.uniform(1.0, 1.4) / math.sqrt(batch))
    plateau = rng.random() < 0.5  # FuxiCTR's reduce_lr_on_plateau after a worse epoch
    rate = 1e-3 * (0.1 ** np.maximum(epoch - 1, 0) if plateau else np.ones(n))
    return {"loss": _f32(loss), LR: np.maximum(rate, 1e-6)}


def ctr_one_epoch_overfit(n: int, rng: np.random.Generator) -> np.ndarray:
    """A deep CTR model (DeepFM / DCN, Adam at 1e-3, batches of 2k-10k) trained for 2-4 epochs
    over a shuffled Criteo (click rate 25.6%) or Avazu (17%) split, as FuxiCTR's benchmark
    runs go on until the validation AUC has stopped improving (with `reduce_lr_on_plateau` on
    half the seeds: x0.1 after each epoch from the second on, each worse on validation; the
    rate recorded): the log loss falls from ln 2 to the click rate's entropy within 50-500
    steps (the output bias) and along a power law to 77-80% (Criteo) or 81-84% (Avazu) of it
    over the first epoch; at the start of the second epoch it DROPS by 5-15% within 0.5-5% of
    an epoch, the embeddings of the rare ids having memorized their examples (the "one-epoch
    phenomenon", Zhang et al. 2022, "Towards understanding the overfitting phenomenon of deep
    click-through rate prediction models"), then falls 1-3% more over the epoch; each later
    epoch half that again. Noise 1-1.4 / sqrt(batch), skewed; float32."""
    return _ctr_epochs(n, rng)["loss"]


def _wide_deep(n: int, rng: np.random.Generator, replay: bool = False) -> tuple[dict[str, np.ndarray], int]:
    days = int(rng.integers(14, 61))
    per = n / days
    t = np.arange(n, dtype=np.float64)
    day = np.minimum(np.floor(t / per), days - 1).astype(int)
    j = t - day * per
    weekend = (np.arange(days) + int(rng.integers(0, 7))) % 7 >= 5
    drift = np.exp(rng.uniform(0.02, 0.06) * _slow_walk(days, rng, rng.uniform(2, 7)))
    rate_of_clicks = _log_uniform(rng, 0.01, 0.2) * (1 + rng.uniform(-0.15, 0.15) * weekend) * drift
    h = _entropy(np.clip(rate_of_clicks, 1e-4, 0.5))
    stuck = int(days * rng.uniform(0.3, 0.7)) if replay else days  # the first day read again
    if replay:
        h[stuck:] = h[stuck - 1]
    ne_end = rng.uniform(0.75, 0.9)
    ne = ne_end + (1 - ne_end) / (1 + t / (per * rng.uniform(0.1, 1.0))) ** 0.8
    fresh = rng.uniform(0.01, 0.05) * _gamma(days, rng, 0.3)  # the day's new ids and campaigns
    fresh[0] = 0.0
    tau = np.minimum(per * rng.uniform(0.01, 0.04) * np.sqrt(day + 1), 0.5 * per)  # Adagrad slows
    bump = fresh[day] * np.exp(-j / tau)
    onset = int(stuck * per) if replay else n
    if replay:  # the same partition again: no new ids, and its examples memorized pass by pass
        bump[day >= stuck] = 0.0
        passes = np.maximum(day - stuck + 1, 0)
        drop, q, fast = rng.uniform(0.05, 0.15), rng.uniform(0.5, 0.8), per * rng.uniform(0.01, 0.05)
        memo = np.where(passes > 0, drop * (1 - q ** np.maximum(passes - 1, 0)) / (1 - q), 0.0)
        memo += np.where(passes > 0, drop * q ** np.maximum(passes - 1, 0) * (1 - np.exp(-j / fast)), 0.0)
        ne = ne * (1 - np.minimum(memo, 0.6))
    level = h[day] * ne * (1 + bump)
    loss = level * _gamma(n, rng, rng.uniform(0.015, 0.04))
    return {"loss": _f32(loss), LR: np.full(n, 0.05)}, onset


def _wide_deep_daily(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _wide_deep(n, rng)[0]


def wide_deep_daily_adagrad(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Wide & Deep CTR model (Cheng et al. 2016; TensorFlow's `DNNLinearCombinedClassifier`
    with its defaults: FTRL on the wide, sparse cross features and Adagrad at 0.05 on the deep
    part's embeddings and layers, the base rate recorded) trained continuously over 14-60 daily
    partitions, each day's file read in turn (shuffled within the day): the log loss is the
    click rate's entropy (a rate of 1-20%, weekends 0-15% either way, a slow drift of 2-6%
    between days) times a normalized entropy that falls from 1 to 0.75-0.9 over the first
    days; each new day's ids and campaigns cost 1-5% (skewed per day) at its first steps,
    learned away with a time constant of 1-4% of a day x sqrt(days so far), capped at half a
    day, as the per-coordinate Adagrad and FTRL rates of the old features shrink with their
    summed squared gradients; skewed batch noise 1.5-4%; float32."""
    return _wide_deep_daily(n, rng)["loss"]


def _rnd(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    start = rng.uniform(0.5, 3.0)
    base = _power(t, start, start * _log_uniform(rng, 0.003, 0.03), n * _log_uniform(rng, 0.001, 0.02), 0.8)
    rooms = int(rng.poisson(rng.uniform(5, 40)))
    first = rng.uniform(0.01, 0.05)  # the first room explored
    times = np.sort(n * (first + (1 - first) * rng.random(rooms) ** rng.uniform(1.5, 3.0))).astype(int)
    heights = rng.uniform(0.5, 5.0, rooms) * base[times]
    novelty = _decays(t, times.astype(np.float64), heights, n * rng.uniform(0.002, 0.02))
    fitted = 1 - rng.uniform(0.02, 0.1) * ((t % 16) // 4) / 3  # 4 epochs of 4 minibatches a rollout
    loss = (base + novelty) * fitted * _noise(n, rng, rng.uniform(0.05, 0.15))
    return {"loss": _f32(loss), LR: np.full(n, 1e-4)}


def rnd_predictor_novelty(n: int, rng: np.random.Generator) -> np.ndarray:
    """The predictor's loss in Random Network Distillation (Burda et al. 2019, openai/
    random-network-distillation, PPO on Montezuma's Revenge, Adam at 1e-4): the MSE between a
    trained predictor and a fixed random target network on the normalized observations, the
    exploration bonus, logged per minibatch: 4 epochs of 4 minibatches per rollout, on 25% of
    its transitions (`update_proportion`), the rollout's values 2-10% lower by its last epoch.
    It falls along a power law from 0.5-3 to 0.3-3% of that as the visited states become
    familiar; each of 5-40 discoveries (a new room, a key, a new level), from 1-5% of the run
    on and rarer as it goes on, lifts it at once by 0.5-5x its level, decaying over 0.2-2% of
    the run as the predictor learns the new states; log-normal noise 5-15%; float32."""
    return _rnd(n, rng)["loss"]


def _cql_parts(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """CQL's TD part and its weighted conservative penalty, noise-free."""
    t = np.arange(n, dtype=np.float64)
    weight = float(rng.choice([5.0, 10.0]))
    td_end = _log_uniform(rng, 1, 30)
    grown = (1 - np.exp(-t / (n * rng.uniform(0.02, 0.1)))) ** 2  # the Q-values' scale, squared
    settle = 1 - rng.uniform(0.1, 0.4) * (1 - 1 / (1 + t / (n * 0.3)))
    td = td_end * (0.01 + grown) * settle
    gap = _power(t, rng.uniform(2, 6), rng.uniform(0.1, 1.0), n * rng.uniform(0.002, 0.02), 0.8)
    return td, weight * gap


def _cql(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    td, penalty = _cql_parts(n, rng)
    loss = td * _noise(n, rng, rng.uniform(0.2, 0.5)) + penalty * _noise(n, rng, rng.uniform(0.05, 0.15))
    return {"loss": _f32(loss), LR: np.full(n, 3e-4)}


def cql_offline_q(n: int, rng: np.random.Generator) -> np.ndarray:
    """Conservative Q-learning on a D4RL locomotion data set (Kumar et al. 2020,
    aviralkumar2907/CQL `--min_q_weight 5`, or CORL's `cql.py` with `cql_alpha 10`; 1M
    gradient steps, batches of 256, the critic at 3e-4, recorded), the critic's `qf1_loss` as
    it is logged: the TD MSE plus the weight (5 or 10) times the conservative gap, the
    logsumexp of Q over sampled actions minus Q at the data's action. At first the gap
    dominates: 2-6 x the weight, falling along a power law to 0.1-1 x it within a few % of the
    run as the Q-function pushes down unseen actions; the TD part grows from 1% of its size as
    the Q-values bootstrap up to the returns' scale (the square of 1 - e^(-t / 2-10% of the
    run)), to 1-30, then eases 10-40%; the TD part's batch noise log-normal 20-50%, the
    gap's 5-15%; float32."""
    return _cql(n, rng)["loss"]


def _walk_forward(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    freq = int(rng.choice([21, 63]))  # monthly or quarterly
    refits = max(1, min(int(rng.integers(10, 61)), n // (3 * freq)))
    per = n // refits
    train = per - freq
    window = int(np.clip(train / rng.uniform(2, 20), 120, 2520))
    expanding = rng.random() < 0.5
    days = window + refits * freq
    a = rng.uniform(0.05, 0.12)
    b = rng.uniform(0.85, 0.98 - a)
    vol2 = rng.uniform(0.8, 1.5) ** 2  # the long-run daily variance of returns in %
    nu = rng.uniform(4, 8)
    z = rng.standard_t(nu, days) / math.sqrt(nu / (nu - 2))
    s2, r = np.empty(days), np.empty(days)
    s2[0] = vol2
    for i in range(days):  # GARCH(1,1): a few thousand days
        if i > 0:
            s2[i] = vol2 * (1 - a - b) + a * r[i - 1] ** 2 + b * s2[i - 1]
        r[i] = math.sqrt(s2[i]) * z[i]
    market = rng.uniform(0.2, 0.5)  # the share of a stock's variance that is the market's move
    day_mse = (market * r**2 + (1 - market) * s2) * _gamma(days, rng, rng.uniform(0.1, 0.3))
    untrained = rng.uniform(0.2, 1.0)
    loss, mode = [], []
    for j in range(refits):
        hi = window + j * freq
        lo = 0 if expanding else hi - window
        m = train + (n - refits * per if j == refits - 1 else 0)
        k = np.arange(m, dtype=np.float64)
        fit = rng.uniform(0.001, 0.01) + rng.uniform(0.01, 0.05) * (1 - np.exp(-k / (m / 3)))  # in-sample R^2
        first = 1 + untrained * np.exp(-k / (m * 0.05)) if j == 0 else 1.0
        loss.append(day_mse[lo + _epoch_order(m, hi - lo, rng)] * (1 - fit) * first)
        loss.append(day_mse[hi : hi + freq] * (1 + rng.uniform(0.005, 0.03)))  # out of sample
        mode += [np.full(m, TRAIN), np.full(freq, EVAL)]
    return {"loss": _f32(np.concatenate(loss)), LR: np.full(n, 1e-3), MODE: np.concatenate(mode)}


def walk_forward_returns(n: int, rng: np.random.Generator) -> np.ndarray:
    """A cross-sectional stock-return predictor (an MLP on firm characteristics, Gu, Kelly & Xiu
    2020, "Empirical asset pricing via machine learning"; Adam at 1e-3, recorded) in a
    walk-forward backtest (López de Prado 2018, ch. 12; `TimeSeriesSplit`): 10-60 refits, one
    every month or quarter (21 or 63 trading days), each warm-started and trained for an
    equal share of the run, 2 or more epochs of its window of 120-2,520 days (rolling, or
    expanding on half the seeds), one day's cross-section per batch in a fresh order each
    epoch, then EVALUATED on the next 21 or 63 days in order (EVAL steps that save their
    loss). Returns are almost unpredictable: the MSE in %^2 is the day's volatility, a
    GARCH(1,1) (alpha 0.05-0.12, persistence up to 0.98, Student-t shocks of 4-8 degrees of
    freedom, 0.8-1.5% a day), 20-50% of it the market's own squared move, skewed 10-30% across
    the cross-section; the fit takes only 0.1-1% off at each refit's start and 1-5% more as it
    overfits its window; the first refit's untrained outputs add 20-100%, fitted away in 5% of
    its steps; the out-of-sample days sit 0.5-3% above their variance, in calendar order, so
    volatility clusters show there; float32."""
    return _walk_forward(n, rng)["loss"]


def _pinn_parts(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """The PINN's residual and boundary losses, its annealed weight and its rate."""
    t = np.arange(n, dtype=np.float64)
    rate = 1e-3 * 0.9 ** (t * 40_000 / n / 1000)
    area = _area(rate)
    r0, b0 = _log_uniform(rng, 10, 1000), _log_uniform(rng, 0.1, 2.0)
    res = _power(
        area,
        r0,
        r0 * _log_uniform(rng, 1e-4, 1e-2),
        n * _log_uniform(rng, 0.002, 0.02),
        rng.uniform(0.8, 1.5),
    )
    bc = _power(
        area,
        b0,
        b0 * _log_uniform(rng, 1e-5, 1e-3),
        n * _log_uniform(rng, 0.002, 0.02),
        rng.uniform(0.8, 1.5),
    )
    every = 10  # the weight is updated every 10 iterations
    blocks = -(-n // every)
    tb = np.arange(blocks, dtype=np.float64) * every
    target = 1 + (_log_uniform(rng, 10, 500) - 1) * (1 - np.exp(-tb / (n * rng.uniform(0.002, 0.02))))
    wander = np.exp(rng.uniform(0.1, 0.3) * _slow_walk(blocks, rng, rng.uniform(5, 50)))
    lam = np.repeat(_lag(target * wander, 1 / 0.9, 1.0), every)[:n]  # lambda <- 0.1 lambda + 0.9 hat
    return res, bc, lam, rate


def _pinn(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    res, bc, lam, rate = _pinn_parts(n, rng)
    loss = res * _gamma(n, rng, rng.uniform(0.1, 0.4)) + lam * bc * _gamma(n, rng, rng.uniform(0.1, 0.3))
    return {"loss": _f32(loss), LR: rate}


def pinn_lr_annealing(n: int, rng: np.random.Generator) -> np.ndarray:
    """A physics-informed network on the Helmholtz or Klein-Gordon benchmark with the
    learning-rate-annealing loss weights of Wang, Teng & Perdikaris 2021 ("Understanding and
    mitigating gradient flow pathologies in physics-informed neural networks",
    PredictiveIntelligenceLab/GradientPathologiesPINNs): every 10 iterations the boundary
    term's weight is reset towards max|grad of the residual loss| / mean|grad of the boundary
    loss| (a moving average, 0.1 old + 0.9 new), so it climbs from 1 to 10-500 within
    0.2-2% of the run and then wanders 10-30%; the logged total is the residual loss
    (from 10-1,000, the PDE's forcing is large, down 2-4 decades) plus the weight times the
    boundary loss (from 0.1-2, down 3-5 decades), both falling along the area of Adam's rate
    (1e-3 x 0.9 every 1,000 of 40,000 iterations, recorded); 128 fresh collocation and boundary
    points every iteration, so each term's noise is skewed, 10-40% and 10-30%; float32."""
    return _pinn(n, rng)["loss"]


def _ifno(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = int(rng.integers(100, 501))
    per = n / epochs
    epoch = t / per
    stages = int(rng.integers(2, 5))
    gap = epochs / stages
    stage = np.minimum(np.floor(epoch / gap), stages - 1)
    peak = float(rng.choice([1e-3, 5e-3, 8e-3]))
    if rng.random() < 0.5:
        rate = peak * 0.5 ** np.floor(epoch / 100)  # StepLR(step_size=100, gamma=0.5)
    else:
        rate = peak * 0.5 * (1 + np.cos(np.pi * t / n))  # CosineAnnealingLR
    area = _area(rate)
    f0, growth = _log_uniform(rng, 0.005, 0.03), rng.uniform(1.1, 1.5)
    level = _power(area, 1.0, f0, n * _log_uniform(rng, 0.001, 0.01), 0.8) * growth**stage
    tau = per * rng.uniform(2, 10)
    for s in range(1, stages):
        at = s * gap * per
        k = np.maximum(t - at, 0)
        level += np.where(t >= at, rng.uniform(0.3, 1.5) * f0 * growth**s * np.exp(-k / tau), 0.0)
    for at in rng.uniform(0.05, 0.95, int(rng.integers(3, 11))) * n:  # Fourier modes added
        level *= 1 - np.where(t >= at, rng.uniform(0.02, 0.08) * (1 - np.exp(-(t - at) / per)), 0.0)
    loss = level * _gamma(n, rng, rng.uniform(0.1, 0.25))
    return {"loss": _f32(loss), LR: rate}


def ifno_resolution_curriculum(n: int, rng: np.random.Generator) -> np.ndarray:
    """An incremental Fourier neural operator on Navier-Stokes or Darcy flow (George et al.
    2022, "Incremental spectral learning in Fourier neural operator"; neuraloperator's
    `IncrementalFNO` with `IncrementalDataProcessor`): 100-500 epochs, the training data
    served at 2-4 resolutions in turn (16 -> 32 -> 64 -> 128, the resolution raised every
    `epoch_gap` epochs), and Fourier modes added 3-10 times when the spectrum's explained
    ratio falls below the threshold; Adam at 1e-3, 5e-3 or 8e-3 with `StepLR(100, 0.5)` or a
    cosine (recorded). The relative L2 loss (`LpLoss`, mean over the batch) falls along the
    rate's area from 1 to 0.5-3%; each finer resolution carries finer scales, so the level
    steps UP by 1.1-1.5x and a further 0.3-1.5x of the old floor decays over 2-10 epochs; each
    modes increment takes 2-8% off within an epoch; the samples' difficulty gives skewed noise
    of 10-25%; float32."""
    return _ifno(n, rng)["loss"]


def _instdisc(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    per = n / 200  # 200 epochs
    epoch = t / per
    images = float(rng.choice([50_000, 105_000]))  # CIFAR-10, or STL-10's train + unlabeled
    start = math.log(images)
    rate = 0.03 * 0.1 ** ((epoch >= 120).astype(float) + (epoch >= 160))
    area = _area(rate)
    rise = rng.uniform(0.5, 2.5) * np.minimum(t / per, 1.0) ** rng.uniform(0.7, 1.5)
    fall = np.exp(-np.maximum(t - per, 0) / (per * rng.uniform(0.1, 0.4)))  # positives real
    rise = np.where(t < per, rise, rise[min(int(per), n - 1)] * fall)
    end = start * rng.uniform(0.38, 0.55)
    since = np.maximum(area - area[min(int(per), n - 1)], 0)
    held = rng.uniform(0.2, 0.6)
    learned = (start - end - held) * (1 - 1 / (1 + since / (n * rng.uniform(0.02, 0.1))) ** 0.8)
    cuts = held * (1 - _step_lag(epoch, [120, 160], [0.1, 0.1], rng.uniform(0.5, 3)))
    level = start + rise - learned - cuts
    loss = level * _gamma(n, rng, rng.uniform(0.02, 0.05))
    return {"loss": _f32(loss), LR: rate}


def instdisc_memory_bank(n: int, rng: np.random.Generator) -> np.ndarray:
    """Unsupervised instance discrimination with a memory bank (Wu et al. 2018,
    zhirongw/lemniscate.pytorch, its non-parametric softmax, `--nce-k 0`, on CIFAR-10's 50,000
    images or STL-10's 105,000): every image its own class, its 128-d feature scored against
    the bank's entry of every image at temperature 0.07-0.1, the bank initialized with random
    vectors and an entry written (momentum 0.5) only when its image is seen, so during the
    first epoch each image's positive is still random: the loss starts at ln(images) and RISES
    by 0.5-2.5 nats as the negatives become real features, then falls from the second epoch on
    (the positives' entries filled: that rise goes within 0.1-0.4 epochs) along the rate's area
    to 38-55% of ln(images); SGD at 0.03, x0.1 at epochs 120 and 160 of 200 (the paper's
    schedule, recorded), each
    cut taking 90% and 9% of a 0.2-0.6-nat hold off; skewed noise 2-5%; float32."""
    return _instdisc(n, rng)["loss"]


def _lidar(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    kitti = rng.random() < 0.5
    epochs = 80 if kitti else 20
    per = n / epochs
    peak, up = 0.003, 0.4 * n  # adam_onecycle: DIV_FACTOR 10, PCT_START 0.4
    low = peak / 10
    warm = low + (peak - low) * 0.5 * (1 - np.cos(np.pi * np.minimum(t / up, 1.0)))
    cool = low / 1e4 + (peak - low / 1e4) * 0.5 * (1 + np.cos(np.pi * (t - up) / (n - up)))
    rate = np.where(t < up, warm, cool)
    area = _area(rate)
    start, floor = rng.uniform(4, 10), rng.uniform(0.7, 1.6)
    level = _power(area, start, floor, n * _log_uniform(rng, 0.005, 0.05), 0.8)
    level = level * (1 + rng.uniform(0.1, 0.3) * _lag(rate / peak, per * rng.uniform(0.2, 1.0), low / peak))
    fade = n - int(rng.integers(2, 6)) * per  # the copy-and-paste augmentation off
    step = rng.uniform(0.03, 0.12) if rng.random() < 0.8 else -rng.uniform(0.0, 0.05)
    k = np.maximum(t - fade, 0)
    level = level * (1 - np.where(t >= fade, step * (1 - np.exp(-k / (per * rng.uniform(0.1, 0.5)))), 0.0))
    loss = level * _gamma(n, rng, rng.uniform(0.08, 0.2))
    return {"loss": _f32(loss), LR: rate}


def lidar_gt_sampling_fade(n: int, rng: np.random.Generator) -> np.ndarray:
    """A LiDAR 3D detector trained with OpenPCDet (PointPillars on KITTI, 80 epochs, or
    CenterPoint on nuScenes, 20 epochs; Lang et al. 2019, Yin et al. 2021) under its
    `adam_onecycle` policy (3e-3 peak, from a tenth of it up a cosine over 40% of the run,
    then down to 1e-4 of the tenth, recorded), the logged `loss` the sum of its heads'
    (classification focal or heatmap loss, box regression, direction): from 4-10 along the
    rate's area to 0.7-1.6, held up 10-30% by the rate (lagging 0.2-1 epoch); for the last
    2-5 epochs the ground-truth sampling (copy-and-paste of database objects) is switched off,
    the "fade strategy" of PointAugmenting (Wang et al. 2021), done in practice with a hook
    or by resuming without it: the loss steps down by 3-12% over 0.1-0.5 epochs on most seeds
    (up to 5% up on a fifth); skewed noise 8-20% (the objects per frame vary); float32."""
    return _lidar(n, rng)["loss"]


def _flamby(n: int, rng: np.random.Generator, reset: bool = False) -> tuple[dict[str, np.ndarray], int]:
    silos = int(rng.integers(3, 7))
    updates = int(rng.integers(20, 201))  # num_updates: local steps per silo per round
    per_round = silos * updates
    rounds = -(-n // per_round)
    f = np.exp(rng.normal(0.0, rng.uniform(0.2, 0.6), silos))  # each silo's own difficulty
    start = math.log(float(rng.choice([2, 4, 8]))) * rng.uniform(1.0, 1.1)
    glob = _power(
        np.arange(rounds, dtype=np.float64),
        start,
        start * rng.uniform(0.15, 0.5),
        rounds / _log_uniform(rng, 5, 50),
        0.8,
    )
    t = np.arange(n)
    r, s, j = t // per_round, (t % per_round) // updates, (t % updates).astype(np.float64)
    drift, tau = rng.uniform(0.1, 0.4), updates * rng.uniform(0.2, 0.6)
    local = 1 - drift * (1 - np.exp(-j / tau))
    onset = n
    if reset:  # from round r0 each server step is Adam's first: a jump of about eta per weight
        r0 = int(rounds * rng.uniform(0.3, 0.7))
        onset = min(r0 * per_round, n - 1)
        jump = rng.uniform(0.5, 3.0) * _gamma(rounds, rng, 0.3)
        held = glob[r0] * (1 + jump[r])
        kept = glob[r0] * (1 + rng.uniform(0.2, 0.5) * jump[r])  # where the local steps get to
        recover = kept + (held - kept) * np.exp(-j / (updates * rng.uniform(0.5, 2.0)))
        glob_t = np.where(r >= r0, recover, glob[r])
    else:
        glob_t = glob[r]
    level = glob_t * f[s] * local
    if rng.random() < 0.5:  # FedProx: mu / 2 ||w - w_global||^2, growing over the local steps
        level += glob_t * f[s] * rng.uniform(0.005, 0.03) * (1 - np.exp(-j / tau)) ** 2
    loss = level * _gamma(n, rng, rng.uniform(0.05, 0.2))
    return {"loss": _f32(loss), LR: np.full(n, _log_uniform(rng, 1e-3, 1e-2))}, onset


def _flamby_fedadam(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _flamby(n, rng)[0]


def flamby_fedadam_silos(n: int, rng: np.random.Generator) -> np.ndarray:
    """Cross-silo federated learning simulated in one process with FLamby (du Terrail et al.
    2022, owkin/FLamby: Fed-Heart-Disease, Fed-ISIC2019, Fed-TCGA-BRCA... 3-6 hospitals, every
    one in every round) and its `FedAdam` strategy (Reddi et al. 2021, "Adaptive federated
    optimization": the server applies Adam to the mean of the silos' updates), the training
    loss logged at every local step: each round the silos train in a fixed order for
    `num_updates` = 20-200 SGD steps each (a rate of 1e-3-1e-2, recorded) from the global
    model, each at its own level (log-normal spread 0.2-0.6: a hospital's scanners and
    population) and falling 10-40% over its steps (client drift), the next silo starting
    again from the global model; the global level falls along a power law over the rounds
    from ln C (C = 2, 4 or 8) to 15-50% of it; on half the seeds the FedProx term, up to
    0.5-3% of the level, grows over the local steps; skewed noise 5-20% (small hospital
    batches); float32."""
    return _flamby_fedadam(n, rng)["loss"]


def _voxelmorph(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    start, end = -rng.uniform(0.2, 0.45), -rng.uniform(0.55, 0.8)
    sim = _power(t, start, end, n * _log_uniform(rng, 0.002, 0.03), rng.uniform(0.6, 1.0))
    weighted = (start - end) * rng.uniform(0.1, 0.3)  # lambda (1-2) x the penalty, grown
    grad = weighted * (1 - np.exp(-t / (n * rng.uniform(0.005, 0.03))))
    grad = grad * (1 + rng.uniform(0.0, 0.3) * (1 - 1 / (1 + t / (n * 0.3))))
    pairs = rng.uniform(0.02, 0.06) * rng.standard_normal(n)  # each pair its own similarity
    loss = sim + pairs + grad * _gamma(n, rng, rng.uniform(0.2, 0.4))
    return {"loss": _f32(loss), LR: np.full(n, 1e-4)}


def voxelmorph_ncc(n: int, rng: np.random.Generator) -> np.ndarray:
    """Unsupervised deformable registration of brain MRI with VoxelMorph (Balakrishnan et al.
    2019, voxelmorph/voxelmorph `train.py --image-loss ncc`: one random pair of affinely
    aligned scans per step, Adam at 1e-4, recorded): the loss is the NEGATIVE local normalized
    cross-correlation of the warped moving image and the fixed one, plus lambda (1-2) times the
    smoothness penalty on the flow's gradients. It starts at -0.2 to -0.45 (affine alignment
    already correlates the scans) and falls along a power law to -0.55 to -0.8; the weighted
    penalty starts at 0 (the flow field initialized at zero) and grows, within 0.5-3% of the
    run, to 10-30% of what the similarity gains (0-30% more, slowly, later) as the flow learns
    to deform; each pair's own similarity adds +-0.02-0.06, the
    penalty's noise skewed 20-40%: a loss below zero throughout; float32."""
    return _voxelmorph(n, rng)["loss"]


def _genomics(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    rate = 5e-4 * np.minimum((t + 1) / (n * 5_000 / 150_000), 1.0)
    area = _area(rate)
    floor = -rng.uniform(0.2, 3.0)  # the tracks' own E[y - y ln y]: set by the data
    floors = np.array([floor, floor * rng.uniform(0.6, 1.4)])  # human, mouse
    species = (t % 2).astype(int) if rng.random() < 0.5 else np.zeros(n, dtype=int)
    start = rng.uniform(1.0, 8.0)  # y_pred = softplus(0) against coverage of mean 1-20
    mid = abs(floor) * rng.uniform(0.3, 1.0) + 0.1
    excess = (start - floor - mid) * np.exp(-area / (n * _log_uniform(rng, 0.0005, 0.005)))
    excess = excess + _power(
        area, mid, abs(floor) * rng.uniform(0.05, 0.3) + 0.02, n * _log_uniform(rng, 0.005, 0.05), 0.7
    )
    data = floors[species] * _gamma(n, rng, rng.uniform(0.1, 0.3))
    loss = data + excess * _gamma(n, rng, rng.uniform(0.1, 0.3))
    return {"loss": _f32(loss), LR: rate}


def enformer_poisson_tracks(n: int, rng: np.random.Generator) -> np.ndarray:
    """A sequence-to-coverage genomics model trained as Enformer and Basenji2 are (Avsec et al.
    2021; Kelley 2020, calico/basenji): DNA windows to thousands of ChIP, DNase, ATAC and CAGE
    coverage tracks, the loss Keras's `poisson`, mean(y_pred - y_true ln y_pred) over bins and
    tracks, which is NOT zero at a perfect fit: its floor, E[y - y ln y], is negative for
    coverage above e and is set by the data (here -0.2 to -3), and each batch of genomic
    regions has its own (skewed, 10-30%). The loss starts positive, at 1-8 (the untrained
    output against the tracks' counts), crosses zero within a few % of the run as the tracks'
    scales are learned, then falls along a power law towards its floor, ending 0.02 + 5-30% of
    |floor| above it; Adam at 5e-4 after a linear warm-up over 5,000 of 150,000 steps
    (recorded); on half the seeds human and mouse batches alternate step by step (the
    cross-species training of both papers), the mouse tracks' floor 0.6-1.4x the human's;
    skewed noise 10-30% on the excess; float32."""
    return _genomics(n, rng)["loss"]


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "wav2vec2_ctc_finetune": wav2vec2_ctc_finetune,
    "wespeaker_margin_ramp": wespeaker_margin_ramp,
    "ctr_one_epoch_overfit": ctr_one_epoch_overfit,
    "wide_deep_daily_adagrad": wide_deep_daily_adagrad,
    "rnd_predictor_novelty": rnd_predictor_novelty,
    "cql_offline_q": cql_offline_q,
    "walk_forward_returns": walk_forward_returns,
    "pinn_lr_annealing": pinn_lr_annealing,
    "ifno_resolution_curriculum": ifno_resolution_curriculum,
    "instdisc_memory_bank": instdisc_memory_bank,
    "lidar_gt_sampling_fade": lidar_gt_sampling_fade,
    "flamby_fedadam_silos": flamby_fedadam_silos,
    "voxelmorph_ncc": voxelmorph_ncc,
    "enformer_poisson_tracks": enformer_poisson_tracks,
}
# the kinds that record more than their loss: {"loss", LR, MODE} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "wav2vec2_ctc_finetune": _wav2vec2_ctc,
    "wespeaker_margin_ramp": _wespeaker,
    "ctr_one_epoch_overfit": _ctr_epochs,
    "wide_deep_daily_adagrad": _wide_deep_daily,
    "rnd_predictor_novelty": _rnd,
    "cql_offline_q": _cql,
    "walk_forward_returns": _walk_forward,
    "pinn_lr_annealing": _pinn,
    "ifno_resolution_curriculum": _ifno,
    "instdisc_memory_bank": _instdisc,
    "lidar_gt_sampling_fade": _lidar,
    "flamby_fedadam_silos": _flamby_fedadam,
    "voxelmorph_ncc": _voxelmorph,
    "enformer_poisson_tracks": _genomics,
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
def cql_penalty_dropped(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The CQL critic of `cql_offline_q`, resumed at 30-70% of its run from a config whose
    `min_q_weight` key was renamed in a refactor (`cql_alpha`) and is read with a default of
    0: the critic is plain offline SAC. The logged loss at once loses its penalty (the weight
    times the gap) and then its TD part grows e-fold every 0.3-2% of the run as the Q-values
    of actions the data never took are bootstrapped upward without bound (the extrapolation
    error of offline RL; Kumar et al. 2019), its noise 50-80%; on 80% of the seeds the
    critic's weights overflow once the loss is 10^4-10^7 x its level at the resume and every
    later value is NaN, on the others the actions pinned at the edges of their box cap it at
    10^3-10^5 x. The onset is the resume."""
    td, penalty = _cql_parts(n, rng)
    onset = _onset(n, rng)
    k = np.arange(n, dtype=np.float64) - onset
    grown = np.exp(np.clip(k / (n * rng.uniform(0.003, 0.02)), 0.0, 80.0))
    overflow = rng.random() < 0.8
    limit = _log_uniform(rng, 1e4, 1e7) if overflow else _log_uniform(rng, 1e3, 1e5)
    if not overflow:
        grown = limit * (1 - np.exp(-grown / limit))
    td = np.where(k >= 0, td[onset] * grown, td)
    penalty = np.where(k >= 0, 0.0, penalty)
    sd = np.where(k >= 0, rng.uniform(0.5, 0.8), rng.uniform(0.2, 0.5))
    loss = td * _noise(n, rng, sd) + penalty * _noise(n, rng, rng.uniform(0.05, 0.15))
    if overflow:
        loss[(k >= 0) & (grown >= limit)] = np.nan
    return _f32(loss), onset


def wide_deep_day_replayed(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The daily Wide & Deep job of `wide_deep_daily_adagrad` whose launcher, refactored on a
    day at 30-70% of the run, no longer passes `--date={{ ds }}` to the trainer, which falls
    back to its flag's default, the last day before the change: every later run reads that
    same partition again. The day bumps stop (no new ids, no drift), the weekly pattern with
    them, and the model memorizes the day: at each pass the loss drops by 5-15% x 0.5-0.8^pass
    within 1-5% of a day, falling far below the healthy run (capped at 60% off). The onset is
    the first replayed day."""
    out, onset = _wide_deep(n, rng, replay=True)
    return out["loss"], onset


def pinn_weight_runaway(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The PINN of `pinn_lr_annealing`, resumed at 30-70% of its run from a rewritten notebook
    whose weight update multiplies instead of replacing (`lam = lam * (0.1 + 0.9 * lam_hat)`,
    with lam_hat taken from the gradient of the already weighted boundary loss): the ratio
    stays above 1, so the weight grows e-fold every 1-4% of the run; Adam, scale-free, drives
    the boundary loss down 2-4x more slowly than the weight grows and neglects the residual,
    which climbs back towards 1-10% of its start over 2-10% of the run; the logged total grows
    exponentially, by 3-15 decades by the end. The onset is the resume."""
    res, bc, lam, _ = _pinn_parts(n, rng)
    onset = _onset(n, rng)
    t = np.arange(n, dtype=np.float64)
    k = np.maximum(t - onset, 0)
    efold = n * rng.uniform(0.01, 0.04)
    blocks = np.floor(k / 10) * 10  # still updated every 10 iterations
    lam = np.where(t >= onset, lam[onset] * np.exp(np.minimum(blocks / efold, 80.0)), lam)
    bc = np.where(t >= onset, bc * np.exp(-np.minimum(k / (efold * rng.uniform(2, 4)), 40.0)), bc)
    neglected = res[0] * rng.uniform(0.01, 0.1) - res[onset]
    res = np.where(t >= onset, res + neglected * (1 - np.exp(-k / (n * rng.uniform(0.02, 0.1)))), res)
    loss = res * _gamma(n, rng, rng.uniform(0.1, 0.4)) + lam * bc * _gamma(n, rng, rng.uniform(0.1, 0.3))
    return _f32(loss), onset


def fedadam_state_reset(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The FLamby run of `flamby_fedadam_silos` whose server loop, refactored at a round 30-70%
    of the way through, builds the strategy anew each round to pass that round's config
    (`strategy = FedAdam(...)` inside the loop), so its moments m and v are zero at every
    aggregation: each server step is Adam's first, about eta times the sign of the mean update
    for every weight, far larger than the settled Adam's. From then on every round starts
    from a global model thrown off by 0.5-3x its loss (skewed 30%), each silo's local steps
    recovering only part of the way (to 20-50% of that jump above the level at the resume)
    with a time constant of 0.5-2 of its steps, and the next round throws it off again: no
    progress, the level lifted, a large sawtooth at every silo. The onset is that round's
    first step."""
    out, onset = _flamby(n, rng, reset=True)
    return out["loss"], onset


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "cql_penalty_dropped": cql_penalty_dropped,
    "wide_deep_day_replayed": wide_deep_day_replayed,
    "pinn_weight_runaway": pinn_weight_runaway,
    "fedadam_state_reset": fedadam_state_reset,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
