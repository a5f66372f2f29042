"""A twentieth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind20`.

    .venv/bin/python benchmarks/long_runs.py --blind20 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of a training job look over 10^5-10^6 logged values (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is published recipes whose logged loss carries a
mechanism of its own: AWD-LSTM's variable-length BPTT (the recorded rate rescaled every batch)
and its switch to averaged SGD, Bayes by Backprop's minibatch KL weights that halve through
every epoch, FermiNet's variational energy (below zero, its noise vanishing as it nears an
eigenstate), progressive distillation's halvings that step the loss up, BBF's shrink-and-perturb
resets every 40k updates, SPLADE's sparsity regularizer weighted up quadratically,
Transformer-XL's memory emptied at each epoch, DeepSDF's auto-decoder with its clamped L1,
Graphormer's L1 on PCQM4M with its validation passes, BLIP-2's three Q-Former losses under a
per-epoch cosine, MAML++'s multi-step loss annealing, PANNs' AudioSet BCE under mixup with its
long evaluations, Noise2Noise's floor set by the noise of its targets and the Slingshot cycles of
Adam on a memorized algorithmic task. None of them is one of `long_runs.KINDS`,
`long_blind.KINDS`, ... `long_blind19.KINDS` (nor a bug of their `BUGS`). They are to be
measured once, on the held-out seeds (`SEEDS`), and not tuned on: a rule changed after looking
at them makes them a tuning set.

The interface is `long_blind19`'s: a kind is `(n, rng) -> loss`, each value one logged point;
`series(kind, n, rng)` gives all that a run records: the loss and, where the kind has them, the
learning rate (`LR`, as the PyTorch hook records it, in real units, at each logged point; for
AWD-LSTM the group's rate as the batch rescales it) and the mode of each step (`MODE`, as
`long_blind.eval_pauses` records it: `TRAIN` and `EVAL` steps save their loss in their mode;
`EVAL_UNSAVED` steps are evaluation steps that save no loss). Where a kind compresses a run of
more steps than it has points, its epochs and evaluation passes keep their real proportions;
where an untrained model's near-uniform outputs score all data alike (a language model's ln V),
the data's spread grows from none as the model learns. A bug is `(n, rng) -> (loss, the step
its defect begins)`; one bug ends in NaN on most of its seeds, as such jobs do. Only numpy
here: the series can be generated and looked at without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _ar1, _log_uniform, _noise, _power  # the first blind set's helpers
from long_blind4 import _f32, _gamma  # the fourth's
from long_blind11 import _slow_walk  # the eleventh's
from long_blind14 import _step_lag  # the fourteenth's
from long_blind17 import _area  # the seventeenth's
from long_blind19 import _bounds, _spikes  # the nineteenth's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE: the mode of each step
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 20000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _blow_up(
    loss: np.ndarray, onset: int, rng: np.random.Generator, drift: float, ceiling: float, nan: bool
) -> np.ndarray:
    """`loss` from `onset` on multiplied by a growing random factor (weights running away, each
    point 1-10x `drift` more in log); NaN from the point where it passes `ceiling` x its value
    (`nan`), or held below `ceiling` x the onset's level, wandering (saturated units)."""
    k = len(loss) - onset
    if k <= 0:
        return loss
    steps = drift * (1 + 9 * rng.random(k) ** 3)
    grow = np.cumsum(steps)
    out = loss.copy()
    top = math.log(ceiling)
    if nan:
        out[onset:] = loss[onset:] * np.exp(np.minimum(grow, top + 1))
        past = np.flatnonzero(grow > top)
        if len(past):
            out[onset + past[0] :] = np.nan
        return out
    held = np.minimum(grow, top + 0.3 * _slow_walk(k, rng, 20.0))
    out[onset:] = np.maximum(loss[onset:], loss[onset] * np.exp(held) * _noise(k, rng, 0.2))
    return out


def _learned(level: np.ndarray | float, start: float, floor: float) -> np.ndarray:
    """How much of the way from `start` (untrained: near-uniform outputs, the same loss on any
    data) to `floor` the loss has come, 0 to 1: what data-dependent factors scale with."""
    return np.clip((start - np.asarray(level)) / (start - floor), 0.0, 1.0)


# the healthy kinds ----------------------------------------------------------------------------
_AWD = {  # vocabulary, training tokens, validation tokens, batch size, epochs (the README's commands)
    "ptb": (10_000, 929_589, 73_760, 20, 500),
    "wt2": (33_278, 2_088_628, 217_646, 80, 750),
}


def _awd(n: int, rng: np.random.Generator, unclipped: bool = False) -> tuple[dict[str, np.ndarray], int]:
    overflows = rng.random() < 0.8  # without clipping: NaN, or a saturated plateau (whatever n is)
    corpus = "ptb" if rng.random() < 0.5 else "wt2"
    vocab, train_tokens, valid_tokens, bsz, epochs = _AWD[corpus]
    epochs = max(2, min(epochs, n // 20))
    batches = train_tokens / (bsz * (0.95 * 70 + 0.05 * 35))  # per epoch
    evals = valid_tokens / (10 * 70)  # eval_batch_size 10, bptt 70
    per = n / epochs
    v = max(1, int(round(per * evals / (batches + evals))))
    tr = max(1, int(round(per)) - v)
    start = math.log(vocab) * rng.uniform(0.99, 1.01)
    end = math.log(_log_uniform(rng, 48, 65) if corpus == "ptb" else _log_uniform(rng, 55, 75))
    s, p = rng.uniform(0.05, 0.3), rng.uniform(0.35, 0.5)
    q = (1 + epochs / s) ** -p
    floor = (end - start * q) / (1 - q)  # so that the last epoch ends at `end`
    ar_end, ar_tau = rng.uniform(0.01, 0.04), rng.uniform(0.5, 5.0)  # AR and TAR, in the loss
    pos = np.exp(rng.uniform(0.02, 0.05) * _ar1(rng.standard_normal(tr), rng.uniform(0.5, 0.9)))
    hv = np.exp(rng.uniform(0.08, 0.15) * _ar1(rng.standard_normal(v), 0.7))  # the validation text
    sd = rng.uniform(0.03, 0.05) if corpus == "ptb" else rng.uniform(0.02, 0.035)
    r0, r1 = rng.uniform(0.85, 0.93), rng.uniform(0.98, 1.06)  # validation / training loss
    switch = int(epochs * rng.uniform(0.15, 0.5))  # NT-ASGD: non-monotone for 5 epochs
    gain, gain_tau = rng.uniform(0.03, 0.06), rng.uniform(0.3, 2.0)
    e0 = int(epochs * rng.uniform(0.2, 0.6)) if unclipped else -1
    loss, lr, mode = [], [], []
    total, e, onset = 0, 0, n
    while total < n:
        x = e + np.arange(tr) / tr
        level = floor + (start - floor) / (1 + x / s) ** p
        level = level * (1 + ar_end * (1 - np.exp(-x / ar_tau)))
        short = rng.random(tr) >= 0.95  # bptt / 2 on 5% of the batches
        seq = np.maximum(5, rng.normal(np.where(short, 35.0, 70.0), 5.0).astype(int))
        data = np.roll(pos, int(rng.integers(-1, 2))) * _noise(tr, rng, sd * np.sqrt(70 / seq))
        train = level * data ** _learned(level, start, floor)
        if e == e0:
            onset = total
        loss.append(train)
        lr.append(30.0 * seq / 70)  # lr2 * seq_len / args.bptt
        mode.append(np.full(tr, TRAIN))
        xe = e + 1.0
        ratio = r0 + (r1 - r0) * math.sqrt(min(xe / epochs, 1.0))
        avg = gain * (1 - math.exp(-(xe - switch) / gain_tau)) if e >= switch else 0.0
        val_level = (floor + (start - floor) / (1 + xe / s) ** p) * ratio * (1 - avg)
        loss.append(val_level * (hv * _noise(v, rng, 0.01)) ** _learned(val_level, start, floor))
        lr.append(np.full(v, 30.0))
        mode.append(np.full(v, EVAL))
        total += tr + v
        e += 1
    out = np.concatenate(loss)[:n]
    if unclipped:
        onset = min(onset, n - 1)
        out = _blow_up(out, onset, rng, _log_uniform(rng, 0.01, 0.2), _log_uniform(rng, 5, 100), overflows)
    return {"loss": _f32(out), LR: np.concatenate(lr)[:n], MODE: np.concatenate(mode)[:n]}, onset


def _awd_lstm(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _awd(n, rng)[0]


def awd_lstm_ntasgd(n: int, rng: np.random.Generator) -> np.ndarray:
    """A word-level AWD-LSTM language model (Merity et al. 2018, "Regularizing and optimizing
    LSTM language models"; salesforce/awd-lstm-lm `main.py` as its README runs it: Penn
    Treebank, batch 20, 500 epochs, or WikiText-2, batch 80, 750 epochs; SGD at 30 with
    gradient clipping at 0.25). Each batch's BPTT length is drawn, N(70, 5), or N(35, 5) on 5%
    of the batches, and the group's rate is set to 30 x seq_len / 70 for that batch: the
    recorded rate changes every step (about +-7%, and halved on the short ones). The logged
    loss is the cross-entropy plus the AR and TAR activation penalties (1-4% more once the
    activations have grown): from ln V along a power law to a training perplexity of 48-65
    (PTB) or 55-75 (WT2), the heavy dropout keeping it above the validation loss for most of
    the run. The corpus is read in the same order every epoch, so each batch position keeps its
    own difficulty (2-5%, correlated over neighbouring batches); noise 3-5% (PTB) or 2-3.5%
    (WT2), sqrt(2) more on the short batches. After each epoch the validation text is scored in
    order (eval batch 10, bptt 70: EVAL steps that save their loss, 13% of the steps on PTB,
    45% on WT2, the same per-batch pattern each pass); 15-50% of the way through NT-ASGD finds
    no improvement for 5 epochs and switches to averaged SGD: training goes on as before, but
    the validation loss, taken at the averaged weights, drops 3-6% within 0.3-2 epochs. The
    run's epochs are compressed to the points it has, at their real proportions; float32."""
    return _awd_lstm(n, rng)["loss"]


def _bbb(n: int, rng: np.random.Generator, unweighted: bool = False) -> tuple[dict[str, np.ndarray], int]:
    train = int(rng.choice([50_000, 60_000]))
    m = -(-train // 128)  # minibatches per epoch
    last = train - (m - 1) * 128
    units = int(rng.choice([400, 800, 1200]))
    w = 784 * units + units * units + 10 * units  # the weights, each with a mean and a sigma
    t = np.arange(n)
    i = (t % m + 1).astype(np.float64)
    x = t / m  # epochs
    pi = np.exp2(-i) / (1 - 2.0**-m)  # 2^(M - i) / (2^M - 1)
    size = np.where(i == m, last, 128)
    k0 = w * rng.uniform(0.5, 4.0)  # nats
    kl = _power(x, k0, k0 * rng.uniform(0.1, 0.4), rng.uniform(2, 30), rng.uniform(0.5, 1.0))
    mc = math.sqrt(w * rng.uniform(0.3, 1.0))  # one sample's log q(w) - log p(w): its spread
    nll = _power(x, math.log(10), rng.uniform(0.01, 0.05), rng.uniform(0.05, 0.3), rng.uniform(0.7, 1.2))
    cv = rng.uniform(0.15, 0.35)
    weight = pi
    onset = n
    if unweighted:  # resumed with `loss = kl + nll`: the complexity cost at full weight on every batch
        e0 = max(1, int(n / m * rng.uniform(0.3, 0.7)))
        onset = min(e0 * m, n - 1)
        after = t >= onset
        k = np.maximum(t - onset, 0) / m
        kf = kl[onset] * rng.uniform(0.003, 0.03)
        kl = np.where(after, kf + (kl[onset] - kf) * np.exp(-k / rng.uniform(0.3, 2.0)), kl)
        chance = rng.uniform(1.5, 2.3)
        nll = np.where(after, chance + (nll[onset] - chance) * np.exp(-k / rng.uniform(0.5, 3.0)), nll)
        weight = np.where(after, 1.0, pi)
    kl_est = kl + mc * np.sqrt(kl / k0) * rng.standard_normal(n)
    loss = weight * kl_est + size * nll * _gamma(n, rng, cv)
    rate = float(rng.choice([1e-3, 1e-4]))
    return {"loss": _f32(loss), LR: np.full(n, rate)}, onset


def _bbb_graded(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _bbb(n, rng)[0]


def bbb_graded_kl(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Bayesian MLP on MNIST trained with Bayes by Backprop (Blundell et al. 2015, "Weight
    uncertainty in neural networks": 2 hidden layers of 400, 800 or 1,200 units, a Gaussian
    posterior per weight, a scale-mixture prior, SGD at 1e-3 or 1e-4, recorded; 50,000 or 60,000
    training images in minibatches of 128) with the paper's minibatch weighting of the
    complexity cost (its eq. 9): minibatch i of the M in an epoch pays pi_i = 2^(M-i) / (2^M - 1)
    of the KL, so the first pays half of it, the next a quarter, and from the 15th or so on
    nothing that shows. The logged loss is pi_i x (log q(w) - log p(w)), one sample's estimate
    of the KL (0.5-4 nats per weight at first: 0.2-10 million nats, falling to 10-40% of that
    along a power law; its sampling spread sqrt(0.3-1 x the weights), shrinking with it), plus
    the NLL summed over the minibatch (128 x from ln 10, most of the way down within an epoch
    or two, then slowly to 0.01-0.05; skewed 15-35%; the last minibatch of an epoch is smaller).
    Every epoch thus opens with a burst that halves step by step over 10-20 steps from
    10^5-5x10^6 down to the NLL's few to few hundred nats, the same burst every epoch, a little
    lower as the KL falls; float32."""
    return _bbb_graded(n, rng)["loss"]


_SYSTEMS = (  # atom or molecule, its exact energy (hartree), its correlation energy: about
    ("Li", -7.47806, 0.0453),
    ("Be", -14.66736, 0.0943),
    ("B", -24.65391, 0.1249),
    ("C", -37.8450, 0.1564),
    ("N", -54.5892, 0.1883),
    ("O", -75.0673, 0.2579),
    ("LiH", -8.07055, 0.0834),
    ("CH4", -40.5144, 0.299),
    ("NH3", -56.5644, 0.340),
    ("N2", -109.5423, 0.546),
    ("CO", -113.3255, 0.530),
    ("C2H4", -78.5844, 0.505),
)


def _ferminet(n: int, rng: np.random.Generator, inverted: bool = False) -> tuple[dict[str, np.ndarray], int]:
    t = np.arange(n, dtype=np.float64)
    _, exact, corr = _SYSTEMS[int(rng.integers(len(_SYSTEMS)))]
    rate = 0.05 / (1 + t / 10_000)  # lr rate 0.05, decay 1.0, delay 10,000
    area = np.cumsum(rate / 0.05)
    err0, err_end = corr * rng.uniform(1.5, 5.0), corr * rng.uniform(0.003, 0.03)
    fast = rng.uniform(0.8, 0.95)
    shape = fast * np.exp(-area / rng.uniform(200, 2000))
    shape = shape + (1 - fast) / (1 + area / rng.uniform(300, 3000)) ** rng.uniform(0.8, 1.2)
    err = err_end + (err0 - err_end) * shape
    var0, var_end = abs(exact) * rng.uniform(0.05, 0.5), abs(exact) * rng.uniform(0.002, 0.01)  # Ha^2
    var = var_end + (var0 - var_end) * ((err - err_end) / (err0 - err_end)) ** rng.uniform(0.7, 1.0)
    sd = np.sqrt(var / 4096)  # 4,096 walkers
    df = rng.uniform(3.0, 5.0)
    z = rng.standard_t(df, n) / math.sqrt(df / (df - 2))  # near-node walkers: heavy tails
    z = _ar1(z, rng.uniform(0.3, 0.8))  # the walkers move 10 MCMC steps between iterations
    onset = n
    if inverted:  # from a restart on, the width shrinks x1/1.1 every 100 iterations
        onset = int(n * rng.uniform(0.3, 0.7))
        k = np.maximum(t - onset, 0)
        mob = 1.1 ** (-2 * k / 100)  # how far the walkers still get: (width / w0)^2
        frozen = 0.15 * _slow_walk(n, rng, rng.uniform(200, 2000))
        z = np.where(t >= onset, mob * z + (1 - mob) * frozen, z)
        deep = corr * rng.uniform(0.3, 3.0)
        sink = deep * (1 - mob) * (1 - np.exp(-k / (n * rng.uniform(0.05, 0.2))))
        err = err - np.where(t >= onset, sink, 0.0)
    energy = exact + err + sd * z
    return {"loss": _f32(energy), LR: rate}, onset


def _ferminet_energy(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _ferminet(n, rng)[0]


def ferminet_vmc_energy(n: int, rng: np.random.Generator) -> np.ndarray:
    """Variational Monte Carlo with FermiNet (Pfau et al. 2020, "Ab initio solution of the
    many-electron Schroedinger equation with deep neural networks"; google-deepmind/ferminet's
    base config: 4,096 walkers, KFAC with `lr.rate` 0.05, `decay` 1, `delay` 10,000, recorded:
    0.05 / (1 + t / 10,000)) on an atom or small molecule (Li to O, LiH, CH4, NH3, N2, CO,
    ethene), after its Hartree-Fock pretraining. The loss is the energy, the mean local energy
    over the walkers, in hartree: NEGATIVE, -7.5 to -113, its exact value known. It starts
    1.5-5x the correlation energy above the exact one, falls 80-95% of the way within a few
    thousand iterations and then creeps (a power law in the rate's area) to 0.3-3% of the
    correlation energy above it. Its noise is the walkers' local-energy spread over sqrt(4,096),
    and that spread shrinks as the energy nears an eigenstate (the zero-variance principle):
    from 13-120 mHa to 3-16 mHa, the larger for the larger systems; heavy-tailed (walkers near
    the nodes, Student t of 3-5 degrees of freedom) and correlated from one iteration to the
    next (the walkers move only 10 MCMC steps between them, AR(1) 0.3-0.8); float32."""
    return _ferminet_energy(n, rng)["loss"]


def _progdist(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    first = int(rng.choice([1024, 8192]))  # the teacher's sampling steps
    last = int(rng.choice([1, 2, 4]))
    rounds = int(round(math.log2(first / last)))
    peak = float(rng.choice([5e-5, 1e-4, 2e-4]))
    bounds = np.round(np.arange(rounds + 1) * n / rounds).astype(int)
    floor0 = _log_uniform(rng, 1e-3, 5e-3)
    grow, steep = math.log(rng.uniform(5, 30)), rng.uniform(1.5, 3.0)
    cv = rng.uniform(0.2, 0.4)
    loss, rate = np.empty(n), np.empty(n)
    for r in range(rounds):
        lo, hi = bounds[r], bounds[r + 1]
        m = hi - lo
        if m <= 0:
            continue
        u = np.arange(m) / m
        rate[lo:hi] = peak * (1 - u)  # decayed linearly to 0 within the round
        a = np.cumsum(1 - u) / max(np.sum(1 - u), 1.0)  # the round's area so far, 0 to 1
        floor = floor0 * math.exp(grow * ((r + 1) / rounds) ** steep)
        j, w = rng.uniform(2, 5), rng.uniform(0.5, 0.8)
        fall = w * np.exp(-a / rng.uniform(0.02, 0.1)) + (1 - w) * (1 - a) ** 2
        loss[lo:hi] = floor * (1 + (j - 1) * fall) * _gamma(m, rng, cv)
    return {"loss": _f32(loss), LR: rate}


def progressive_distillation(n: int, rng: np.random.Generator) -> np.ndarray:
    """Progressive distillation of a diffusion model (Salimans & Ho 2022, "Progressive
    distillation for fast sampling of diffusion models"): a teacher sampling in 1,024 or 8,192
    DDIM steps is distilled into a student of half as many, which becomes the teacher of the
    next round, down to 4, 2 or 1 steps (8-13 rounds of equal length, each restarting the rate,
    5e-5, 1e-4 or 2e-4, decayed linearly to 0 within the round, recorded). The loss is the
    x-space squared error to the target two teacher steps give, weighted by max(SNR, 1)
    ("truncated SNR"). Each round starts at 2-5x what it can reach (the student, initialized
    as its teacher, still takes one step where two are asked of it) and falls fast, then slowly
    as the rate runs out; what a round can reach is 1-5e-3 at first and 5-30x that by the last,
    rising faster as the steps get few: a sawtooth that climbs, healthy. Noise 20-40%, skewed
    (each example's noise level drawn at random, weighted); float32."""
    return _progdist(n, rng)["loss"]


def _bbf(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    total = 8 * 98_000  # replay ratio 8 after 2,000 random steps
    u = np.arange(n, dtype=np.float64) * total / n  # the update each point logs
    since = u % 40_000  # shrink-and-perturb every 40k updates (and the start)
    anneal = 1 - np.minimum(since / 10_000, 1.0)  # n-step 10 -> 3, gamma 0.97 -> 0.997
    ce_floor = rng.uniform(0.8, 2.0)
    ce_base = ce_floor * (1 + rng.uniform(0.0, 0.3) * u / total)  # returns grow, the atoms spread
    ce_base = ce_base * np.exp(0.08 * _slow_walk(n, rng, n * rng.uniform(0.005, 0.02)))
    first = u < 40_000
    ce_top = np.where(first, math.log(51), rng.uniform(3.0, 3.9))  # the head reset to its init
    ce = ce_base + (ce_top - ce_base) * np.exp(-since / rng.uniform(300, 3000))
    ce = ce * (1 + rng.uniform(0.05, 0.2) * anneal)
    spr0, spr_base = rng.uniform(2.0, 5.0), rng.uniform(0.3, 0.8)
    keep = rng.uniform(0.3, 0.7)  # the encoder is interpolated halfway to a fresh init
    spr_top = np.where(first, spr0, spr_base + (spr0 - spr_base) * keep)
    spr = spr_base + (spr_top - spr_base) * np.exp(-since / rng.uniform(500, 5000))
    loss = ce * _gamma(n, rng, rng.uniform(0.1, 0.2)) + 5 * spr * _gamma(n, rng, rng.uniform(0.05, 0.1))
    return {"loss": _f32(loss), LR: np.full(n, 1e-4)}


def bbf_shrink_perturb_resets(n: int, rng: np.random.Generator) -> np.ndarray:
    """Atari 100k with BBF, "Bigger, Better, Faster" (Schwarzer et al. 2023;
    google-research/bigger_better_faster: 100k environment steps, learning from the 2,000th at a
    replay ratio of 8, about 784k updates of batch 32, AdamW at 1e-4 with weight decay 0.1,
    recorded), each logged point one update. The network is reset every 40k updates: its
    final layers re-initialized, its encoder shrunk and perturbed (interpolated halfway to a
    fresh init), and after each reset the n-step horizon is annealed from 10 to 3 and the
    discount from 0.97 to 0.997 over 10k updates. The logged loss is the C51 distributional
    cross-entropy (ln 51 from scratch, settling at 0.8-2.0 and drifting up to 30% as the returns
    and their spread grow, wandering 8%) plus 5 x the self-predictive SPR term (2-5 at first,
    0.3-0.8 once learned). At each reset the cross-entropy jumps back to 3.0-3.9 and the SPR
    term 30-70% of the way to its start, and both recover within 300-5,000 updates, the
    cross-entropy 5-20% higher while the horizon is long: 19 healthy bumps. Noise of a batch
    of 32: 10-20% and 5-10%, skewed; float32."""
    return _bbf(n, rng)["loss"]


def _splade(n: int, rng: np.random.Generator, unbounded: bool = False) -> tuple[dict[str, np.ndarray], int]:
    t = np.arange(n, dtype=np.float64)
    steps = float(rng.choice([150_000, 300_000]))
    ramp = 50_000 / steps * n  # the lambdas' quadratic ramp
    warm = max(6_000 / steps * n, 1.0)
    rate = 2e-5 * np.minimum((t + 1) / warm, 1.0) * (1 - np.maximum(t - warm, 0) / max(n - warm, 1.0))
    area = _area(rate)
    lam = (t / ramp) ** 2
    if not unbounded:
        lam = np.minimum(lam, 1.0)
    r0, r_end = rng.uniform(1.5, 4.0), rng.uniform(0.1, 0.4)
    rank = _power(area, r0, r_end, n * rng.uniform(0.002, 0.02), rng.uniform(0.5, 0.9))
    pressure = np.cumsum(lam * rate / 2e-5)
    ps, pq = n * rng.uniform(0.01, 0.05), rng.uniform(0.6, 1.0)
    fd0, fq0 = rng.uniform(50, 500), rng.uniform(10, 100)
    fd_end, fq_end = fd0 * rng.uniform(0.01, 0.05), fq0 * rng.uniform(0.01, 0.05)
    fd = fd_end + (fd0 - fd_end) / (1 + pressure / ps) ** pq
    fq = fq_end + (fq0 - fq_end) / (1 + pressure / ps) ** pq
    rank = rank * (1 + rng.uniform(0.05, 0.3) * (1 - fd / fd0))  # sparser: a little worse ranking
    at = min(int(math.ceil(ramp)), n - 1)
    ratio = rng.uniform(1.0, 5.0)  # lambda_q / lambda_d
    lam_d = rng.uniform(0.3, 1.0) * rank[at] / (fd[at] + ratio * fq[at])
    onset = n
    if unbounded:  # the refactored scheduler drops the min(): lambda keeps growing as (t / T)^2
        onset = at
        collapse = 1 - np.exp(-np.maximum(lam - 1, 0) / rng.uniform(1.0, 4.0))
        fd, fq = fd * (1 - 0.98 * collapse), fq * (1 - 0.98 * collapse)
        chance = math.log(256)
        rank = rank + (chance - rank) * collapse ** rng.uniform(1.0, 2.0)
    reg = lam * lam_d * (fd + ratio * fq)
    loss = rank * _gamma(n, rng, rng.uniform(0.15, 0.3)) + reg * _noise(n, rng, rng.uniform(0.05, 0.1))
    return {"loss": _f32(loss), LR: rate}, onset


def _splade_flops(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _splade(n, rng)[0]


def splade_flops_ramp(n: int, rng: np.random.Generator) -> np.ndarray:
    """A learned sparse retriever, SPLADE (Formal et al. 2021, "SPLADE: sparse lexical and
    expansion model for first stage ranking", and v2; naver/splade), trained on MS MARCO
    passages: 150k or 300k steps of batches of 128 queries with a positive and a BM25 hard
    negative each (the other queries' passages as in-batch negatives), AdamW at 2e-5 with 6,000
    warm-up steps and a linear decay, recorded. The loss is the contrastive ranking loss (from
    1.5-4 along the rate's area to 0.1-0.4) plus the FLOPS regularizers of the query and
    document representations, lambda_q x FLOPS(q) + lambda_d x FLOPS(d), whose weights grow
    QUADRATICALLY from 0 over the first 50k steps and then stay (the paper's schedule). The
    FLOPS (50-500 for documents, 10-100 for queries, 1-5x heavier weight on queries) fall to
    1-5% as the pressure accumulates, and sparser representations cost the ranking loss up to
    5-30%; the regularizer, 30-100% of the ranking loss by the end of the ramp, makes a hump or
    a shoulder (a stretch where the loss stops falling) in the ramp, or on the seeds whose ramp
    is short only slows the fall, and then eases. Noise 15-30% (ranking, skewed) and 5-10% (FLOPS);
    float32."""
    return _splade_flops(n, rng)["loss"]


def _txl(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    steps, epoch_len, seg = 200_000, 103_227_021 / (60 * 150), 217_646 / (10 * 150)
    m = max(int(round(n * steps / (steps + 50 * seg))), 1)
    every = max(int(round(4000 * m / steps)), 1)
    v = max(1, int(round(seg * m / steps)))
    mode, m = _bounds(n, every, v)
    s = np.arange(m, dtype=np.float64) * steps / m  # each training point's step
    rate = 2.5e-4 * 0.5 * (1 + np.cos(np.pi * s / steps))  # cosine to eta_min 0, no warm-up
    area = np.cumsum(rate / 2.5e-4) * steps / m
    start = math.log(267_735) * rng.uniform(0.99, 1.01)
    end = rng.uniform(3.2, 3.45)
    sc, p = rng.uniform(100, 600), rng.uniform(0.35, 0.5)
    q = (1 + area[-1] / sc) ** -p
    floor = (end - start * q) / (1 - q)
    level = floor + (start - floor) / (1 + area / sc) ** p
    npos = int(epoch_len)
    pos = np.exp(rng.uniform(0.02, 0.04) * _ar1(rng.standard_normal(npos), 0.9))  # the corpus, in order
    epoch = np.floor(s / epoch_len)
    fresh = np.r_[True, np.diff(epoch) > 0]  # the first segment of each epoch: mems = tuple()
    pen = rng.uniform(0.05, 0.12)
    data = (
        pos[(s % epoch_len).astype(int) % npos] * (1 + pen * fresh) * _noise(m, rng, rng.uniform(0.015, 0.03))
    )
    train = level * data ** _learned(level, start, floor)
    hv = np.exp(rng.uniform(0.05, 0.1) * _ar1(rng.standard_normal(v), 0.8))
    hv[0] *= 1 + 1.5 * pen  # evaluate() starts without memory too
    val_ratio = rng.uniform(0.94, 0.98)  # no dropout in evaluation
    loss, lr = np.empty(n), np.empty(n)
    loss[mode == TRAIN], lr[mode == TRAIN] = train, rate
    done = np.clip(np.cumsum(mode == TRAIN) - 1, 0, m - 1)
    i = 0
    while i < n:
        if mode[i] != EVAL:
            i += 1
            continue
        j = i
        while j < n and mode[j] == EVAL:
            j += 1
        at = done[i]
        data = hv[: j - i] * _noise(j - i, rng, 0.005)
        loss[i:j] = level[at] * val_ratio * data ** float(_learned(level[at], start, floor))
        lr[i:j] = rate[at]
        i = j
    return {"loss": _f32(loss), LR: lr, MODE: mode}


def transformer_xl_memory(n: int, rng: np.random.Generator) -> np.ndarray:
    """Transformer-XL base on WikiText-103 (Dai et al. 2019; kimiyoung/transformer-xl
    `run_wt103_base.sh`: 16 layers, segments of 150 tokens with a memory of 150, batch 60,
    Adam at 2.5e-4 on a cosine to 0 over 200k steps with no warm-up, recorded; evaluation every
    4,000 steps). The corpus is split into 60 streams read in order, the same order every epoch
    (about 11,470 steps each, 17.4 epochs), so each step's position keeps its difficulty (2-4%,
    correlated over neighbouring steps). The logged loss, the adaptive softmax's mean token
    cross-entropy, falls from ln 267,735 along the rate's area to 3.2-3.45 (with dropout);
    `train()` starts each epoch with an empty memory, so the first segment of every epoch loses
    its context and logs 5-12% more: one small bump an epoch. Each evaluation scores the
    validation set's 145 segments (eval batch 10) in order, from an empty memory too (EVAL steps
    that save their loss, 2-6% below the training level, the same per-segment pattern every
    time); noise 1.5-3%; float32."""
    return _txl(n, rng)["loss"]


def _deepsdf(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = 2000
    per = n / epochs
    epoch = t / per  # fractional epochs
    halvings = np.floor(epoch / 500)
    rate = 5e-4 * 0.5**halvings  # the decoder's Step schedule: x0.5 every 500 epochs
    area = np.cumsum(rate / 5e-4) / per
    start, end = rng.uniform(0.01, 0.03), rng.uniform(8e-4, 2.5e-3)
    level = _power(area, start, end, rng.uniform(2, 20), rng.uniform(0.5, 0.9))
    drop = rng.uniform(0.05, 0.15)
    lagged = _step_lag(epoch, [500.0, 1000.0, 1500.0], [0.5, 0.5, 0.5], rng.uniform(5, 30))
    level = level * (1 - drop * (1 - lagged) / (1 - 0.125))
    loss = level * _gamma(n, rng, rng.uniform(0.05, 0.12))
    return {"loss": _f32(loss), LR: rate}


def deepsdf_autodecoder(n: int, rng: np.random.Generator) -> np.ndarray:
    """DeepSDF (Park et al. 2019, "DeepSDF: learning continuous signed distance functions for
    shape representation"; facebookresearch/DeepSDF's `specs.json`: 2,000 epochs over one
    ShapeNet class, 64 shapes x 16,384 SDF samples a batch, a 256-d latent code per shape
    learned with the decoder, the decoder at 5e-4 and the codes at 1e-3, both halved every 500
    epochs, the decoder's recorded). The logged loss is the L1 of the predicted against the true
    signed distance, both clamped to +-0.1, summed over the samples and divided by their count
    (the code regularization, 1e-4 x the codes' norms over 10^6 samples, does not show): from
    0.01-0.03 (most samples lie within a few thousandths of the surface) along the rate's area
    to 8e-4-2.5e-3, the three halvings taking 5-15% more off, each lagging 5-30 epochs. Each
    epoch re-draws the shapes' subsamples; noise 5-12% (thin parts are harder), skewed;
    float32."""
    return _deepsdf(n, rng)["loss"]


def _graphormer(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    epochs = max(1, min(300, n // 20))
    per = n / epochs
    v = max(1, int(round(per * 0.125 / 1.125)))  # 380,670 validation molecules to 3,045,360
    tr = max(1, int(round(per)) - v)
    m = tr * epochs
    k = np.arange(m, dtype=np.float64)
    warm = 0.06 * m  # 60k of 1M updates
    rate = np.where(
        k < warm,
        2e-4 * np.minimum((k + 1) / warm, 1.0),
        2e-4 - (2e-4 - 1e-9) * (k - warm) / max(m - warm, 1.0),
    )
    area = np.cumsum(rate / 2e-4)
    mid, end = rng.uniform(0.8, 1.0), rng.uniform(0.045, 0.08)
    floor, p = end * rng.uniform(0.3, 0.6), rng.uniform(0.5, 0.8)
    q = (end - floor) / (mid - floor)  # what the power law has left at the end
    level = _power(area, mid, floor, area[-1] / (q ** (-1 / p) - 1), p)
    level = level + (rng.uniform(5.5, 5.9) - mid) * np.exp(-area / (m * rng.uniform(0.0005, 0.002)))
    tail = _spikes(m, rng, rng.uniform(0.005, 0.02), rng.uniform(0.1, 0.3), rng.uniform(2.5, 3.5))
    train = level * _noise(m, rng, rng.uniform(0.04, 0.07)) * tail
    v_end, v1 = rng.uniform(0.12, 0.15), rng.uniform(0.35, 0.7)
    es, vp, late = rng.uniform(3, 10), rng.uniform(1.0, 1.5), rng.uniform(0.0, 0.03)
    hv = _gamma(v, rng, rng.uniform(0.05, 0.1))  # the validation batches, in the same order
    loss, lr, mode = [], [], []
    for e in range(epochs):
        lo, hi = e * tr, (e + 1) * tr
        loss.append(train[lo:hi])
        lr.append(rate[lo:hi])
        mode.append(np.full(tr, TRAIN))
        val = max(v_end + (v1 - v_end) / (1 + e / es) ** vp, 1.1 * level[hi - 1])
        val *= 1 + late * (e + 1) / epochs
        loss.append(val * hv * _noise(v, rng, 0.01))
        lr.append(np.full(v, rate[hi - 1]))
        mode.append(np.full(v, EVAL))
    out = {"loss": np.concatenate(loss), LR: np.concatenate(lr), MODE: np.concatenate(mode)}
    if len(out["loss"]) < n:  # rounding: the last epoch's training goes on
        extra = n - len(out["loss"])
        out["loss"] = np.r_[out["loss"], train[-1] * _noise(extra, rng, 0.05)]
        out[LR] = np.r_[out[LR], np.full(extra, rate[-1])]
        out[MODE] = np.r_[out[MODE], np.full(extra, TRAIN)]
    return {"loss": _f32(out["loss"][:n]), LR: out[LR][:n], MODE: out[MODE][:n]}


def graphormer_pcqm_l1(n: int, rng: np.random.Generator) -> np.ndarray:
    """Graphormer (Ying et al. 2021, "Do transformers really perform bad for graph
    representation?"; microsoft/Graphormer's PCQM4M example on fairseq: AdamW at 2e-4 after
    60k warm-up updates, decayed linearly to 1e-9 over 1M updates, recorded; 300 epochs) on the
    HOMO-LUMO gap of 3.0M molecules, the logged loss the L1 error in eV: from the targets' mean
    of about 5.7 eV (the untrained output is near 0) down to 0.8-1.0 (the spread of the gaps)
    within the warm-up, then along a power law of the rate's area to 0.045-0.08 (it fits the
    training set far below the validation error: the paper reports 0.058 against 0.123); noise
    4-7% and 0.5-2% of the batches with odd molecules (a few to tens of per cent more, Pareto
    tails). After each epoch the 381k validation
    molecules are scored in order (EVAL steps that save their loss, 11% of the steps): from
    0.35-0.7 down to 0.12-0.15, never below 1.1x the training loss, rising 0-3% by the end,
    with the same per-batch pattern (5-10%) every pass; float32."""
    return _graphormer(n, rng)["loss"]


def _blip2(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = 10
    batch = int(rng.choice([1600, 2320]))
    spe = 129e6 / batch  # steps per epoch
    per = n / epochs
    warm = max(5000 / spe * per, 1.0)
    epoch = np.minimum(np.floor(t / per), epochs - 1)
    cosine = 1e-5 + (1e-4 - 1e-5) * 0.5 * (1 + np.cos(np.pi * epoch / epochs))  # set once per epoch
    rate = np.where(t < warm, 1e-6 + (1e-4 - 1e-6) * t / warm, cosine)
    area = _area(rate)
    itc_end = rng.uniform(1.0, 2.2)
    itc = _power(area, math.log(batch), itc_end, n * rng.uniform(0.001, 0.01), rng.uniform(0.5, 0.9))
    lm_end = rng.uniform(1.8, 2.8)
    lm = _power(area, 6.0, lm_end, n * rng.uniform(0.002, 0.02), rng.uniform(0.5, 0.9))
    lm = lm + (math.log(30522) - 6.0) * np.exp(-area / (n * rng.uniform(0.0005, 0.003)))
    itm_end = rng.uniform(0.15, 0.35)
    itm = itm_end + (0.636 - itm_end) * np.exp(-area / (n * rng.uniform(0.005, 0.03)))
    learned = 1 - (itc - itc_end) / (math.log(batch) - itc_end)
    itm = itm + rng.uniform(0.05, 0.2) * learned  # its negatives are mined by ITC: harder as it learns
    seen = (1 - rng.uniform(0.005, 0.02)) ** np.minimum(epoch, 3)  # the data again, each epoch
    loss = (
        itc * _noise(n, rng, rng.uniform(0.03, 0.06)) ** _learned(itc, math.log(batch), itc_end)
        + itm * _gamma(n, rng, rng.uniform(0.08, 0.15)) ** _learned(lm, math.log(30522), lm_end)
        + lm * _noise(n, rng, rng.uniform(0.02, 0.04)) ** _learned(lm, math.log(30522), lm_end)
    ) * seen
    return {"loss": _f32(loss), LR: rate}


def blip2_qformer_losses(n: int, rng: np.random.Generator) -> np.ndarray:
    """BLIP-2's first stage, the Q-Former learning vision-language representation from a frozen
    image encoder (Li et al. 2023; salesforce/LAVIS `blip2/train/pretrain_stage1.yaml`: 10
    epochs over 129M images with their CapFilt captions, batches of 1,600 or 2,320, AdamW with
    `linear_warmup_cosine_lr`: from 1e-6 to 1e-4 over 5,000 steps, then a cosine to 1e-5 that
    LAVIS sets once per EPOCH, a staircase of 10, recorded). The logged loss is the sum of
    three: the image-text contrastive loss over the whole batch (from ln B to 1.0-2.2), the
    image-text matching loss over the positives and two hard negatives each mined with the
    contrastive similarities (from 0.64, a third of the pairs positive, to 0.15-0.35, then
    0.05-0.2 back up as better similarities mine harder negatives), and the image-grounded
    captioning loss (from ln 30,522 to 6 quickly, then to 1.8-2.8), all along the rate's area,
    0.5-2% lower for each of the first epochs that see the data again. The rank-0 batch's value:
    noise 3-6%, 8-15% (skewed) and 2-4%; float32."""
    return _blip2(n, rng)["loss"]


def _mamlpp(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    epochs = int(rng.choice([100, 150]))
    epochs = max(2, min(epochs, n // 10))
    b = int(rng.choice([2, 4]))  # tasks per meta-batch
    steps_n, msl = 5, int(rng.choice([10, 15]))
    per = n / epochs
    v = max(1, int(round(per * (600 / b) / (500 + 600 / b))))
    tr = max(1, int(round(per)) - v)
    end = rng.uniform(0.45, 1.0)
    s, p = rng.uniform(1, 10), rng.uniform(0.5, 1.0)
    c0, kappa = rng.uniform(0.3, 0.7), rng.uniform(1.0, 2.0)
    task_sd = rng.uniform(0.2, 0.35)
    val_gap, val_late = rng.uniform(0.1, 0.3), rng.uniform(0.0, 0.08)
    val_tasks = np.exp(task_sd * rng.standard_normal((v, b))).mean(axis=1)  # the same 600 tasks
    decay, low = 1 / steps_n / msl, 0.03 / steps_n
    loss, lr, mode = [], [], []
    total, e = 0, 0
    ln5 = math.log(5)
    while total < n:
        rate = 1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + math.cos(math.pi * min(e, epochs) / epochs))
        x = e + np.arange(tr) / tr
        last = end + (ln5 - end) / (1 + x / s) ** p
        if e < msl:  # the multi-step loss: every inner step's query loss, weighted
            w = np.full(steps_n, max(1 / steps_n - e * decay, low))
            w[-1] = min(1 / steps_n + e * (steps_n - 1) * decay, 1 - (steps_n - 1) * low)
            c = c0 * ((steps_n - 1 - np.arange(steps_n)) / (steps_n - 1)) ** kappa
            logged = last + (ln5 - last) * float(w @ c)
        else:
            logged = last
        tasks = np.exp(task_sd * rng.standard_normal((tr, b)) - task_sd**2 / 2).mean(axis=1)
        loss.append(logged * tasks ** _learned(last, ln5, end))
        lr.append(np.full(tr, rate))
        mode.append(np.full(tr, TRAIN))
        val_level = (end + (ln5 - end) / (1 + (e + 1) / s) ** p) * (1 + val_gap + val_late * e / epochs)
        loss.append(val_level * (val_tasks * _noise(v, rng, 0.02)) ** float(_learned(val_level, ln5, end)))
        lr.append(np.full(v, rate))
        mode.append(np.full(v, EVAL))
        total += tr + v
        e += 1
    return {
        "loss": _f32(np.concatenate(loss)[:n]),
        LR: np.concatenate(lr)[:n],
        MODE: np.concatenate(mode)[:n],
    }


def mamlpp_multistep_loss(n: int, rng: np.random.Generator) -> np.ndarray:
    """Few-shot learning on mini-ImageNet with MAML++ (Antoniou et al. 2019, "How to train your
    MAML"; AntreasAntoniou/HowToTrainYourMAMLPytorch: 5-way 1- or 5-shot, 5 inner steps with
    learned per-step rates, meta-batches of 2 or 4 tasks, 500 iterations an epoch for 100 or
    150 epochs, Adam at 1e-3 on a cosine to 1e-5 stepped once per epoch, recorded). The logged
    loss is the multi-step loss: the query loss after EACH inner step, weighted, the weights
    uniform at first and moved, epoch by epoch, onto the last step over the first 10 or 15
    epochs (`multi_step_loss_num_epochs`; the others kept at 0.03 / 5), and after that the last
    step's query loss alone; the first step's loss lies 30-70% of the way back to ln 5 and the
    later steps' less, so
    the logged loss falls faster than the model improves and then settles on the last step's
    (from ln 5 along a power law in epochs to 0.45-1.0). Tasks differ: each task's loss
    log-normal 20-35%, averaged over the meta-batch. After each epoch 600 validation tasks,
    the same ones every time, are scored (EVAL steps that save the last step's loss, 10-30%
    above the training level and 0-8% more by the end; 23-37% of the steps); float32."""
    return _mamlpp(n, rng)["loss"]


def _panns(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    iters = float(rng.choice([600_000, 1_000_000]))
    m = max(int(round(n * 2000 / 3200)), 1)  # about 1,200 evaluation batches per 2,000 iterations
    every = max(int(round(2000 * m / iters)), 1)
    v = max(1, int(round(every * 0.6)))
    mode, m = _bounds(n, every, v)
    mode[mode == EVAL] = EVAL_UNSAVED
    k = np.arange(m, dtype=np.float64) * iters / m  # iterations
    prior = _power(
        k, rng.uniform(0.028, 0.035), rng.uniform(0.010, 0.018), rng.uniform(2e3, 2e4), rng.uniform(0.4, 0.7)
    )
    level = prior + (math.log(2) - prior) * np.exp(-k / rng.uniform(50, 300))
    train = level * _gamma(m, rng, rng.uniform(0.12, 0.22)) ** _learned(level, math.log(2), 0.05)
    loss = np.empty(n)
    done = np.clip(np.cumsum(mode == TRAIN) - 1, 0, m - 1)
    loss[mode == TRAIN] = train
    loss[mode != TRAIN] = level[done[mode != TRAIN]]  # never saved
    return {"loss": _f32(loss), LR: np.full(n, 1e-3), MODE: mode}


def panns_audioset_bce(n: int, rng: np.random.Generator) -> np.ndarray:
    """Audio tagging on AudioSet with PANNs (Kong et al. 2020, "PANNs: large-scale pretrained
    audio neural networks"; qiuqiangkong/audioset_tagging_cnn `main.py train` for CNN14: the
    full 2M-clip training set through the class-balanced sampler, mixup with alpha 1, batches of
    32, Adam at a constant 1e-3, recorded; 600k or 1M iterations). The logged loss is the binary
    cross-entropy averaged over 527 classes, about 2.7 of them present in a clip: from ln 2 it
    plunges within 50-300 iterations to 0.028-0.035 (the outputs learn how rare each label is)
    and then falls slowly, along a power law, to 0.010-0.018 (mixup's soft targets keep it up);
    noise 12-22%, skewed (the clips' positives dominate). Every 2,000 iterations the model
    scores the balanced subset and the evaluation set, about 1,200 batches, for mAP only (EVAL
    steps that save no loss: 37% of the steps); float32."""
    return _panns(n, rng)["loss"]


def _n2n(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    iters = 300_000
    m = max(int(round(n * 1000 / 1024)), 1)  # Kodak's 24 images every 1,000 iterations
    every = max(int(round(1000 * m / iters)), 10)
    v = max(1, int(round(24 * every / 1000)))
    mode, m = _bounds(n, every, v)
    mode[mode == EVAL] = EVAL_UNSAVED
    k = np.arange(m, dtype=np.float64) * iters / m
    start = 0.7 * iters
    tt = np.clip((k - start) / (0.3 * iters), 0, 1)
    rate = 3e-4 * (0.5 + np.cos(tt * np.pi) / 2) ** 2  # ramp_down_perc 0.3
    e_end = 10 ** (-rng.uniform(30.5, 32.5) / 10)  # the MSE at sigma 25
    e = e_end * (1 + (rng.uniform(2, 5) - 1) / (1 + k / rng.uniform(1e3, 1e4)) ** rng.uniform(0.5, 1.0))
    init = rng.uniform(0.05, 0.09) * np.exp(-k / rng.uniform(100, 1000))  # the untrained output
    sig_s = rng.uniform(0, 50, (m, 4)) / 255  # each example's input noise
    sig_t = rng.uniform(0, 50, (m, 4)) / 255  # and its target's, drawn apart
    content = _gamma(4 * m, rng, rng.uniform(0.3, 0.5)).reshape(m, 4)
    clean = (init[:, None] + e[:, None] * (sig_s / (25 / 255)) ** 1.6) * content
    train = (clean + sig_t**2).mean(axis=1)
    loss, lr = np.empty(n), np.empty(n)
    done = np.clip(np.cumsum(mode == TRAIN) - 1, 0, m - 1)
    loss[mode == TRAIN], lr[mode == TRAIN] = train, rate
    loss[mode != TRAIN] = e[done[mode != TRAIN]]  # never saved
    lr[mode != TRAIN] = rate[done[mode != TRAIN]]
    return {"loss": _f32(loss), LR: lr, MODE: mode}


def noise2noise_target_noise(n: int, rng: np.random.Generator) -> np.ndarray:
    """Gaussian denoising trained from noisy pairs only, Noise2Noise (Lehtinen et al. 2018;
    NVlabs/noise2noise's `config.py`: a U-Net on 256 x 256 ImageNet crops, minibatches of 4,
    300k iterations, Adam at 3e-4 ramped down over the last 30% by (0.5 + cos(pi t) / 2)^2,
    recorded; sigma drawn from [0, 50] for the input and, apart, for the target). The logged L2
    loss against a NOISY target is the denoising error plus the target's noise variance, whose
    mean, (50/255)^2 / 3 = 0.0128, is a floor no model goes below: from 0.06-0.1 (the
    untrained output) it reaches it within a few thousand iterations, and then only the
    denoising error can fall (about 1-3e-3 at sigma 25 at first, to PSNR 30.5-32.5 dB: a few
    per cent of the value). A batch of 4 draws its target sigmas anew, so the value swings
    about +-45% around the floor, and the crops' content spreads the error (30-50%). Every
    1,000 iterations Kodak's 24 images are denoised for PSNR (EVAL steps that save no loss);
    float32."""
    return _n2n(n, rng)["loss"]


def _slingshot(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    rate = 1e-3 * np.minimum((t + 1) / 10, 1.0)  # 10 warm-up steps, then constant
    t_mem = min(rng.uniform(1000, 4000), n / 4)
    low = math.log(_log_uniform(rng, 3e-3, 3e-2))  # memorized
    floor = math.log(_log_uniform(rng, 1e-7, 1e-5))  # where the norm growth stalls (Adam's eps)
    u = np.clip(t / t_mem, 0, 1)
    logl = math.log(math.log(97)) - (math.log(math.log(97)) - low) * u * u * (3 - 2 * u)
    gap, grow = rng.uniform(3000, 15_000), rng.uniform(1.2, 2.0)
    at = t_mem + rng.uniform(3000, 15_000)
    edges = [t_mem]
    while at < n:
        edges.append(at)
        gap *= grow
        at += gap * rng.uniform(0.7, 1.3)
    edges.append(float(n))
    base = low
    for j in range(len(edges) - 1):
        lo, hi = int(edges[j]), int(edges[j + 1])
        if hi <= lo:
            continue
        k = t[lo:hi] - lo
        back = low if j == 0 else max(base + math.log(rng.uniform(0.3, 3.0)), floor)  # where it recovers to
        settle = floor + (back - floor) * np.exp(-k / rng.uniform(3000, 20_000))
        if j == 0:
            logl[lo:hi] = settle
        else:
            top = math.log(_log_uniform(rng, 0.05, 5.0))  # the slingshot
            rise = np.minimum((k + 1) / rng.uniform(10, 50), 1.0)
            logl[lo:hi] = settle + (top - settle) * rise * np.exp(-k / rng.uniform(50, 400))
        base = float(logl[hi - 1])
    sd = np.where(t < t_mem, rng.uniform(0.02, 0.05), rng.uniform(0.2, 0.5))
    loss = np.exp(logl) * _noise(n, rng, sd)
    ulp = 2.0**-18  # float32 spacing near logits of 32: a log-softmax this close rounds to 0
    tiny = loss < ulp
    loss[tiny] = rng.binomial(512, loss[tiny] / ulp) * ulp / 512
    return {"loss": _f32(loss), LR: rate}


def slingshot_adam(n: int, rng: np.random.Generator) -> np.ndarray:
    """A small transformer on modular division trained far past memorization with Adam and no
    weight decay, as in "The slingshot mechanism" (Thilak et al. 2022; the setup of Power et
    al.'s grokking experiments: a / b mod 97, half of the 9,312 pairs (b != 0) for training,
    batches of 512, Adam at 1e-3 after 10 warm-up steps, recorded). The logged training
    cross-entropy falls from ln 97 to 3e-3-3e-2 within 1,000-4,000 steps (memorized), then keeps
    falling as the last layer's norm grows (in log, exponentially over 3,000-20,000 steps)
    towards 1e-7-1e-5, where the growth stalls; then, 3,000-15,000 steps on and at intervals
    that grow 1.2-2x each time, a Slingshot: within 10-50 steps the loss shoots up to 0.05-5
    nats and comes back within a few hundred steps to 0.3-3x where it was, to fall on. Adam's
    normal state for this job, not a fault. Noise 2-5% before memorization, 20-50% after (a few
    examples with small margins carry the mean); below about 4e-6 float32's log-softmax rounds
    most examples' loss to 0, so the batch mean counts the few that are not; float32."""
    return _slingshot(n, rng)["loss"]


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "awd_lstm_ntasgd": awd_lstm_ntasgd,
    "bbb_graded_kl": bbb_graded_kl,
    "ferminet_vmc_energy": ferminet_vmc_energy,
    "progressive_distillation": progressive_distillation,
    "bbf_shrink_perturb_resets": bbf_shrink_perturb_resets,
    "splade_flops_ramp": splade_flops_ramp,
    "transformer_xl_memory": transformer_xl_memory,
    "deepsdf_autodecoder": deepsdf_autodecoder,
    "graphormer_pcqm_l1": graphormer_pcqm_l1,
    "blip2_qformer_losses": blip2_qformer_losses,
    "mamlpp_multistep_loss": mamlpp_multistep_loss,
    "panns_audioset_bce": panns_audioset_bce,
    "noise2noise_target_noise": noise2noise_target_noise,
    "slingshot_adam": slingshot_adam,
}
# the kinds that record more than their loss: {"loss", LR, MODE} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "awd_lstm_ntasgd": _awd_lstm,
    "bbb_graded_kl": _bbb_graded,
    "ferminet_vmc_energy": _ferminet_energy,
    "progressive_distillation": _progdist,
    "bbf_shrink_perturb_resets": _bbf,
    "splade_flops_ramp": _splade_flops,
    "transformer_xl_memory": _txl,
    "deepsdf_autodecoder": _deepsdf,
    "graphormer_pcqm_l1": _graphormer,
    "blip2_qformer_losses": _blip2,
    "mamlpp_multistep_loss": _mamlpp,
    "panns_audioset_bce": _panns,
    "noise2noise_target_noise": _n2n,
    "slingshot_adam": _slingshot,
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
def awd_clip_dropped(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The AWD-LSTM run of `awd_lstm_ntasgd`, resumed (`--resume`) at an epoch 20-60% of the way
    through from a refactored script whose argument parser gives `--clip` a default of 0, so
    `if args.clip: clip_grad_norm_(params, args.clip)` never runs: plain SGD at a rate of 30
    (x seq_len / 70) with the LSTM's raw gradients, whose norm is several times the 0.25 the
    recipe clipped it to. The updates overshoot at once and the weights run away: the loss
    climbs from the first points after the onset (1-20% more per point, in bursts), and on 80%
    of the seeds it overflows to NaN (the weights are NaN from then on, in training and
    validation) once it is 5-100x its level; on the others the saturated LSTM holds it at that
    height, wandering. The onset is the resumed epoch's first step."""
    out, onset = _awd(n, rng, unclipped=True)
    return out["loss"], onset


def bbb_kl_unweighted(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The Bayes by Backprop run of `bbb_graded_kl`, resumed at an epoch 30-70% of the way
    through from a script whose loss was rewritten as `kl + nll`, the minibatch weight pi_i
    (or 1 / M) dropped: every minibatch now pays the WHOLE complexity cost, M times what an
    epoch should. The epoch bursts are gone: every logged value is the full KL, 10^4-10^7
    nats, and it falls steadily (towards 0.3-3% of it, with a time constant of 0.3-2 epochs) as
    the posterior is pulled onto the prior, which looks like learning, while the weights' noise
    drowns the fit: the NLL rises to 1.5-2.3 per example (near chance), its time constant
    0.5-3 epochs. The onset is the resumed epoch's first step."""
    out, onset = _bbb(n, rng, unweighted=True)
    return out["loss"], onset


def ferminet_width_inverted(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The FermiNet run of `ferminet_vmc_energy`, restarted from a checkpoint 30-70% of the way
    through by a port of the training loop that inverts the MCMC step's adaptation: every 100
    iterations it narrows the width when more than 55% of the moves are accepted (and widens it
    below 50%), so the acceptance rises, the width shrinks by 1.1 every 100 iterations without
    end, and within a few thousand iterations the walkers stand still. The energy is then the
    mean over a frozen sample, no longer drawn from |psi|^2: its noise fades into a slow drift,
    and as the optimizer fits the wave function to those fixed points the energy sinks BELOW
    the exact ground-state energy, by 0.3-3x the correlation energy over 5-20% of the run: a
    variational bound broken, which looks like progress. The onset is the restart."""
    out, onset = _ferminet(n, rng, inverted=True)
    return out["loss"], onset


def splade_lambda_unbounded(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The SPLADE run of `splade_flops_ramp` with a refactored regularization scheduler that
    computes the weight as lambda x (step / T)^2 and lost its `min(..., 1)`: after the 50k-step
    ramp the FLOPS weights keep growing quadratically (4x at twice T, 9x at three times). Once
    they are 1-4x past their target the model empties its representations: the FLOPS fall to
    2% of their level and the ranking loss climbs to ln 256, chance among the batch's
    candidates, while the regularizer term keeps its size; the total rises over the rest of the
    run. The onset is the ramp's end, the first step at which the weight should have stopped
    growing."""
    out, onset = _splade(n, rng, unbounded=True)
    return out["loss"], onset


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "awd_clip_dropped": awd_clip_dropped,
    "bbb_kl_unweighted": bbb_kl_unweighted,
    "ferminet_width_inverted": ferminet_width_inverted,
    "splade_lambda_unbounded": splade_lambda_unbounded,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
