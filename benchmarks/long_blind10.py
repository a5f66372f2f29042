"""A tenth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind10`.

    .venv/bin/python benchmarks/long_runs.py --blind10 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of an ordinary training job look over 10^5-10^6 steps (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is training jobs outside the everyday classifier and
LM: 3D Gaussian splatting with opacity resets, a weather model's autoregressive rollout
curriculum (its loss steps UP), consistency training with a doubling discretization, a sparse
autoencoder with an L1 warm-up, a mixture-of-experts LM with its balance and z-losses, a protein
language model's unigram plateau, AlphaZero's self-play training, a Dreamer world model meeting
new parts of its world, RAFT's optical-flow sequence loss, SigLIP's sigmoid loss, a Fourier
neural operator's summed relative errors, RotatE's self-adversarial knowledge-graph loss, active
learning rounds and an LM's context extension. None of them is one of `long_runs.KINDS`,
`long_blind.KINDS`, ... `long_blind9.KINDS` (nor a bug of their `BUGS`). They are to be
measured once, on the held-out seeds (`SEEDS`), and not tuned on: a rule changed after looking
at them makes them a tuning set.

The interface is `long_blind9`'s: a kind is `(n, rng) -> loss`; nine kinds record the
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

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE (no kind here records one)
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 10000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _epoch_order(n: int, items: int, rng: np.random.Generator) -> np.ndarray:
    """The item drawn at each step when every epoch visits `items` items in a fresh random order."""
    epochs = -(-n // items)
    return np.argsort(rng.random((epochs, items)), axis=1).ravel()[:n]


def _decays(t: np.ndarray, times: np.ndarray, heights: np.ndarray, tau: float) -> np.ndarray:
    """A sum of bumps: each of `heights` at once at its step of `times`, decaying e-fold over `tau`."""
    impulse = np.bincount(times.astype(int), weights=heights, minlength=len(t))[: len(t)]
    return _lag(impulse * tau, tau, 0.0)


# the healthy kinds ----------------------------------------------------------------------------
def _gaussian_splatting(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    extent = rng.uniform(1.0, 5.0)
    lr = np.exp(np.log(1.6e-4 * extent) * (1 - t / n) + np.log(1.6e-6 * extent) * (t / n))
    views = int(rng.integers(100, 301))
    hard = _noise(views, rng, rng.uniform(0.2, 0.5))[_epoch_order(n, views, rng)]
    start = rng.uniform(0.2, 0.4)
    base = _power(
        t, start, start * rng.uniform(0.08, 0.2), n / _log_uniform(rng, 30, 300), rng.uniform(0.6, 1.0)
    )
    resets = np.array([0.1, 0.2, 0.3, 0.4]) * n  # every 3,000 of 30,000 iterations, until 15,000
    tau = n * rng.uniform(0.003, 0.01)
    bump = _decays(t, resets, rng.uniform(0.5, 2.0, 4), tau)
    x = base * (1 + bump) * hard * _noise(n, rng, rng.uniform(0.03, 0.06))
    return {"loss": _f32(x), LR: lr}


def gaussian_splatting(n: int, rng: np.random.Generator) -> np.ndarray:
    """3D Gaussian splatting of one scene (Kerbl et al. 2023, graphdeco-inria/gaussian-splatting
    `train.py`: one training view per iteration, popped from a shuffled stack of the scene's
    100-300 views; the loss 0.8 x L1 + 0.2 x (1 - SSIM); the positions' rate decays exponentially
    from 1.6e-4 to 1.6e-6 times the scene's extent, recorded here; densification until half the
    run, the opacities reset to 0.01 at 10, 20, 30 and 40% of it): the loss falls from 0.2-0.4
    along a power law to 8-20% of it; each view has its own difficulty (log-normal, 20-50%), seen
    once per pass; at each opacity reset the rendered images go faint and the loss jumps by 1.5-3x,
    recovering over 0.3-1% of the run; 3-6% more noise; float32."""
    return _gaussian_splatting(n, rng)["loss"]


def _graphcast_rollout(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    t1 = int(n * rng.uniform(0.85, 0.93))
    lr = np.full(n, 3e-7)
    lr[:t1] = _warm_cosine(t[:t1], t1, n * rng.uniform(0.003, 0.01), 1e-3, 0.0)
    area = np.cumsum(lr / 1e-3)
    start = rng.uniform(1.0, 2.0)
    one = _power(area, start, rng.uniform(0.02, 0.08), n / _log_uniform(rng, 30, 300), rng.uniform(0.6, 0.9))
    level = one.copy()
    stages = 11  # 2 to 12 autoregressive steps, as many iterations each
    per = (n - t1) / stages
    a = rng.uniform(1.0, 1.6)  # the error grows as the a-th power of the lead time
    gain = rng.uniform(0.03, 0.1)
    for s in range(stages):
        lo, hi = t1 + int(s * per), t1 + int((s + 1) * per) if s < stages - 1 else n
        k = s + 2
        mean_err = float(np.mean(np.arange(1, k + 1) ** a))
        into = np.arange(hi - lo, dtype=np.float64)
        level[lo:hi] = one[t1 - 1] * mean_err * (1 - gain * (1 - np.exp(-into / (per * 0.3))))
    x = level * _gamma(n, rng, rng.uniform(0.03, 0.08))
    return {"loss": _f32(x), LR: lr}


def graphcast_rollout(n: int, rng: np.random.Generator) -> np.ndarray:
    """A GraphCast-style weather model (Lam et al. 2023): pretraining on one 6-hour step (the
    area- and level-weighted MSE of normalized residuals; the rate warmed up to 1e-3 over 0.3-1%,
    a half cosine to 0 by 85-93% of the run), the loss from 1-2 along the rate's area to
    0.02-0.08; then the rollout curriculum at a constant 3e-7: 11 stages of equal length training
    on 2, 3, ... 12 autoregressive steps, the loss the mean over the steps, whose errors grow as a
    power 1-1.6 of the lead time, so the logged loss steps UP at each stage (to 2-10x the one-step
    loss by the last) and falls 3-10% within it; skewed batch noise of 3-8% (the weather of the
    initial times drawn); float32."""
    return _graphcast_rollout(n, rng)["loss"]


def consistency_ict(n: int, rng: np.random.Generator) -> np.ndarray:
    """Improved consistency training of an image generator (Song & Dhariwal 2023, iCT: the
    pseudo-Huber distance between the model's outputs at adjacent noise levels, weighted by
    1/(sigma_(i+1) - sigma_i), noise levels drawn log-normally; RAdam at a constant rate; the
    discretization N doubles from 10 to 1280 in 8 equal stages): at each doubling the gap between
    adjacent levels halves and its weight doubles, so the level moves by a factor of 0.8-1.25 at
    once, then relaxes by 5-20% over 1-10% of the run as the model gets consistent at the finer
    grid; under it all the loss falls along a power law from 0.3-1 towards 20-50% of it; the
    batch's noise levels make a skewed noise of 4-10%."""
    t = np.arange(n, dtype=np.float64)
    start = rng.uniform(0.3, 1.0)
    level = _power(t, start, start * rng.uniform(0.2, 0.5), n / _log_uniform(rng, 50, 500), 0.8)
    stage = np.minimum((t * 8 // n).astype(int), 7)
    mult = np.ones(n)
    at = 1.0  # the multiplier where the stage before ended
    for s in range(1, 8):
        k = stage == s
        into = t[k] - t[k][0]
        depth = rng.uniform(0.05, 0.2)
        mult[k] = (
            at * rng.uniform(0.8, 1.25) * (1 - depth * (1 - np.exp(-into / (n * rng.uniform(0.01, 0.1)))))
        )
        at = float(mult[k][-1])
    x = level * mult
    return x * _gamma(n, rng, rng.uniform(0.04, 0.1))


def _sae_l1_warmup(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([5e-5, 1e-4, 2e-4]))
    decay = n * (1 - rng.uniform(0.1, 0.2))
    lr = np.where(t < decay, peak, peak * (n - t) / (n - decay))
    warm = n * rng.uniform(0.03, 0.07)
    lam = np.minimum(1.0, t / warm)  # lambda over its final value
    start = rng.uniform(1.0, 1.5)
    mse_end = rng.uniform(0.05, 0.2)
    mse = _power(t, start, mse_end, n / _log_uniform(rng, 100, 1000), rng.uniform(0.7, 1.0))
    mse *= 1 + rng.uniform(0.1, 0.4) * lam  # sparsity costs reconstruction
    l1_end = mse_end * rng.uniform(0.5, 1.5)  # the sparsity term, at the full lambda, at the end
    dense = 1 + rng.uniform(2, 6) * np.exp(-t / (n * rng.uniform(0.03, 0.15)))  # features shrink
    l1 = lam * l1_end * dense * (1 - rng.uniform(0.05, 0.15) * np.clip(t / n, 0, 1))
    anneal = 1 - rng.uniform(0.02, 0.05) * np.clip((t - decay) / (n - decay), 0, 1)
    x = (mse + l1) * anneal * _noise(n, rng, rng.uniform(0.01, 0.03))
    return {"loss": _f32(x), LR: lr}


def sae_l1_warmup(n: int, rng: np.random.Generator) -> np.ndarray:
    """A sparse autoencoder on an LLM's residual stream, the April 2024 recipe (Conerly et al.,
    Anthropic's "Circuits Updates": the L1 coefficient lambda warmed up linearly from 0 over the
    first 3-7% of training, Adam at a constant 5e-5-2e-4 decayed linearly to 0 over the last
    10-20%): the normalized MSE falls fast from 1-1.5 to 0.05-0.2 (10-40% above that once the
    sparsity bites), while lambda x the decoder-norm-weighted L1 of the features grows with lambda
    from 0, the features still dense (3-7x their final L1), so the total rises through the warm-up
    after its first fall and comes down as the features sparsify, to a sparsity term of 0.5-1.5x
    the MSE; 2-5% lower over the decay; noise 1-3% (4,096 activations a batch); float32."""
    return _sae_l1_warmup(n, rng)["loss"]


def _moe_aux_zloss(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 2e-4, 1e-3)
    lr = _warm_cosine(t, n, n * rng.uniform(0.005, 0.02), peak, 0.1)
    ce = _lm_trend(n, rng)
    experts = int(rng.choice([8, 16, 32, 64]))
    dropped = rng.uniform(0.005, 0.02) + rng.uniform(0.05, 0.15) * np.exp(-t / (n * rng.uniform(0.01, 0.05)))
    ce = ce * (1 + 0.3 * dropped)  # a dropped token skips its expert (the residual only)
    balance = (
        1 + rng.uniform(0.01, 0.05) + rng.uniform(0.05, 0.3) * np.exp(-t / (n * rng.uniform(0.005, 0.02)))
    )
    aux = 0.01 * balance * _noise(n, rng, 0.02)
    z = 0.001 * math.log(experts) ** 2 * (1 + rng.uniform(0.0, 0.5) * np.exp(-t / (n * 0.05)))
    flips = int(rng.integers(0, 6))  # router flips: small spikes that recover
    spikes = _decays(
        t, np.sort(rng.uniform(0.05, 0.95, flips)) * n, rng.uniform(0.05, 0.3, flips), rng.uniform(50, 500)
    )
    x = ce * (1 + spikes) * _t_noise(n, rng, rng.uniform(0.01, 0.03), rng.uniform(4, 8)) + aux + z
    return {"loss": _f32(x), LR: lr}


def moe_aux_zloss(n: int, rng: np.random.Generator) -> np.ndarray:
    """A mixture-of-experts LM (Switch Transformer, Fedus et al. 2022; ST-MoE, Zoph et al. 2022;
    8-64 experts, top-1/2 routing at capacity factor 1.25; AdamW warmed up over 0.5-2%, a cosine
    to 10% of 2e-4-1e-3): the logged total is the cross-entropy (from ln V to 1.8-3.0, held up by
    0.3x the share of tokens dropped at full experts, 5-15% early, 0.5-2% later), plus 0.01 x the
    load-balancing loss (E x sum f_i P_i: 1 at perfect balance, 1.05-1.35 at the start, settling
    at 1.01-1.05) plus 0.001 x the router z-loss ((ln E)^2, up to 50% above it early); 0-5 router
    flips (a spike of 5-30% recovering over 50-500 steps); batch noise 1-3%, Student-t; float32."""
    return _moe_aux_zloss(n, rng)["loss"]


def _esm2_protein_mlm(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = 4e-4
    warm = n * rng.uniform(0.004, 0.01)  # 2,000 of 270,000-500,000 updates
    end = 0.9 * n
    lr = np.where(
        t < warm, peak * (t + 1) / warm, peak * (1 - 0.9 * np.clip((t - warm) / (end - warm), 0, 1))
    )
    unigram = rng.uniform(2.82, 2.9)  # the amino acids' entropy in nats
    start = math.log(33)
    fast = (start - unigram) * np.exp(-t / (n * rng.uniform(0.0005, 0.003)))
    plateau = n * rng.uniform(0.02, 0.1)
    floor = rng.uniform(1.9, 2.4)
    area = np.cumsum(lr / peak)
    off = np.interp(plateau, t, area)
    since = np.maximum(area - off, 0)
    learn = (unigram - floor) * (1 - 1 / (1 + since / (n * rng.uniform(0.05, 0.3))) ** 0.7)
    level = fast + unigram - learn
    x = level * _t_noise(n, rng, rng.uniform(0.01, 0.025), rng.uniform(4, 8))
    return {"loss": _f32(x), LR: lr}


def esm2_protein_mlm(n: int, rng: np.random.Generator) -> np.ndarray:
    """A protein language model (ESM-2, Lin et al. 2023: masked LM on UniRef50 sequences, 15%
    masked, a vocabulary of 33 tokens; Adam warmed up over 2,000 updates to 4e-4, decayed linearly
    to a tenth of it by 90% of training): the loss falls at once from ln 33 to the amino acids'
    unigram entropy (2.82-2.9 nats) and sits on that plateau for 2-10% of the run before the model
    finds the contexts that predict a residue, then falls slowly along the rate's area towards 1.9-2.4
    (a perplexity of 7-11); batch noise 1-2.5% (Student-t: a batch rich in one family is easy);
    float32."""
    return _esm2_protein_mlm(n, rng)["loss"]


def _alphazero_selfplay(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    cuts = np.array([100, 300, 500]) / 700 * n
    lr = 0.2 * 0.1 ** np.searchsorted(cuts, t, side="right")
    rel = lr / 0.2
    moves = float(rng.choice([30, 60, 250]))  # legal moves: chess, shogi-like, Go
    target_h = rng.uniform(1.2, 2.5)  # the MCTS visit distribution's entropy, late
    h = target_h + (math.log(moves) - target_h) * np.exp(-t / (n * rng.uniform(0.05, 0.2)))
    kl = rng.uniform(0.3, 0.8) * _power(t, 1.0, 0.3, n / _log_uniform(rng, 20, 200), 0.7)
    value = _power(t, rng.uniform(0.8, 1.0), rng.uniform(0.45, 0.7), n / _log_uniform(rng, 20, 200), 0.7)
    held = 1 + rng.uniform(0.03, 0.1) * _lag(rel, n * rng.uniform(0.002, 0.01), 1.0)
    gen = int(rng.integers(500, 2001))  # a new network plays the games every `gen` steps
    into = t % gen
    fresh = 1 + rng.uniform(0.01, 0.03) * np.exp(-into / (gen * 0.3))
    x = (h + kl * held + value * held) * fresh * _noise(n, rng, rng.uniform(0.02, 0.05))
    return {"loss": _f32(x), LR: lr}


def alphazero_selfplay(n: int, rng: np.random.Generator) -> np.ndarray:
    """AlphaZero-style training on self-play games (Silver et al. 2018: SGD with momentum at 0.2,
    x0.1 at 100k, 300k and 500k of 700k steps; batches of 4,096 positions from the latest games;
    Leela Chess Zero / KataGo log the same sum): the loss is (z - v)^2 + the cross-entropy to the
    MCTS visit distribution: the value term from 0.8-1 to 0.45-0.7, the policy term from ln(legal
    moves) (30-250) down to the targets' own entropy (1.2-2.5, the search sharpening slowly) plus
    a KL that falls; 3-10% of the two learnable parts held up by the rate (a step down at each
    drop); every 500-2,000 steps the games of a new network come in, 1-3% harder at first; noise
    2-5%; float32."""
    return _alphazero_selfplay(n, rng)["loss"]


def dreamer_world_model(n: int, rng: np.random.Generator) -> np.ndarray:
    """A DreamerV3 world model (Hafner et al. 2023: the model loss = prediction (the decoder's
    summed squared error, reward and continue) + 0.5 x dynamics KL + 0.1 x representation KL, each
    KL clipped below at 1 free nat; replay ratio fixed, so the gradient steps follow the
    agent's steps): the prediction loss falls from 20-100 to 10-30% of it, both KLs sit at their
    free nat (0.6) early and grow to 2-6 nats as the latents carry more; the agent reaches new
    parts of its world at 3-15 random times, ever rarer (a new level, a new Crafter achievement):
    the novel frames lift the prediction loss by 10-50%, learned over 1-5% of the run; the world's
    richer later frames drift it up by 0-30%; skewed noise of 3-8% (16 x 64 replayed steps)."""
    t = np.arange(n, dtype=np.float64)
    start = rng.uniform(20, 100)
    pred = _power(t, start, start * rng.uniform(0.1, 0.3), n / _log_uniform(rng, 30, 300), 0.8)
    pred *= 1 + rng.uniform(0, 0.3) * t / n
    events = int(rng.integers(3, 16))
    times = np.sort(np.exp(rng.uniform(math.log(n * 0.01), math.log(n * 0.95), events)))
    pred *= 1 + _decays(t, times, rng.uniform(0.1, 0.5, events), n * rng.uniform(0.01, 0.05))
    kl = 1 + (rng.uniform(2, 6) - 1) * (1 - np.exp(-t / (n * rng.uniform(0.02, 0.2))))
    return _f32((pred + 0.6 * kl) * _gamma(n, rng, rng.uniform(0.03, 0.08)))


def _raft_flow_sequence(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([1.25e-4, 2.5e-4, 4e-4]))
    up = 0.05 * n
    lr = np.where(
        t < up, peak / 25 + (peak - peak / 25) * t / up, peak - (peak - peak / 25e4) * (t - up) / (n - up)
    )
    weights = sum(0.8 ** (12 - i) for i in range(1, 13))
    start = weights * 1.3 * rng.uniform(10, 30)  # the L1 of a zero flow, over the 12 iterations
    level = _power(
        np.cumsum(lr / peak), start, start * rng.uniform(0.04, 0.1), n / _log_uniform(rng, 30, 300), 0.8
    )
    batch = int(rng.choice([6, 8, 12]))
    motion = rng.lognormal(0, rng.uniform(0.5, 0.9), (n, batch)).mean(axis=1)
    x = level * motion / motion.mean() * _noise(n, rng, 0.03)
    return {"loss": _f32(x), LR: lr}


def raft_flow_sequence(n: int, rng: np.random.Generator) -> np.ndarray:
    """Optical flow with RAFT (Teed & Deng 2020, princeton-vl/RAFT `train.py` on FlyingThings3D:
    AdamW, `OneCycleLR(max_lr, pct_start=0.05, anneal_strategy="linear")` at 1.25e-4-4e-4,
    recorded; batches of 6-12 pairs): the sequence loss, the L1 error of each of 12 refinement
    iterations weighted 0.8^(12 - i), from 4.7 x 1.3 x the mean motion (10-30 px, a zero flow) to
    4-10% of it along the rate's area; each pair's motion (large displacements) scales its error,
    log-normal with spread 0.5-0.9, so the batch loss swings by tens of % with long upper tails;
    3% more noise; float32."""
    return _raft_flow_sequence(n, rng)["loss"]


def siglip_sigmoid(n: int, rng: np.random.Generator) -> np.ndarray:
    """Image-text pretraining with the sigmoid loss (SigLIP, Zhai et al. 2023, big_vision: the
    temperature t' = log 10 and the bias -10 at init, both learned; batches of 4k-32k pairs):
    -1/|B| sum over all pairs of log sigmoid(z_ij (t x_i.y_j + b)), so at init each image pays ~10
    for its positive pair and (|B| - 1) x e^-10 for the negatives (0.2-1.5): the loss starts at
    10.2-11.5, falls within 0.5-3% of the run to 2.5-5 as the positives align and the bias moves,
    then slowly along a power law to 0.6-2.0 as the temperature grows; batch noise 1-3%."""
    t = np.arange(n, dtype=np.float64)
    batch = float(rng.choice([4096, 8192, 16384, 32768]))
    start = 10.0 + (batch - 1) * math.exp(-10)
    mid = rng.uniform(2.5, 5.0)
    fast = (start - mid) * np.exp(-t / (n * rng.uniform(0.002, 0.01)))
    slow = _power(t, mid, rng.uniform(0.6, 2.0), n / _log_uniform(rng, 20, 200), rng.uniform(0.5, 0.9))
    return (fast + slow) * _noise(n, rng, rng.uniform(0.01, 0.03))


def _fno_darcy(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    batch = int(rng.choice([10, 20]))
    ntrain = int(rng.choice([1000, 2000]))
    per_epoch = ntrain // batch
    halvings = int(rng.integers(4, 8))
    step = n / (halvings + 1)
    lr = 1e-3 * 0.5 ** np.floor(t / step)
    rel = lr / 1e-3
    err = _power(
        np.cumsum(rel), 1.0, rng.uniform(0.005, 0.03), n / _log_uniform(rng, 30, 300), rng.uniform(0.7, 1.0)
    )
    err *= 1 + rng.uniform(0.05, 0.2) * _lag(rel, per_epoch * rng.uniform(2, 10), 1.0)
    hard = _noise(ntrain, rng, rng.uniform(0.3, 0.5))[_epoch_order(n * batch, ntrain, rng)]
    x = batch * err * hard.reshape(n, batch).mean(axis=1)
    return {"loss": _f32(x), LR: lr}


def fno_darcy(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Fourier neural operator on Darcy flow or Navier-Stokes (Li et al. 2021, neuraloperator's
    `fourier_2d.py`: Adam 1e-3, `StepLR(gamma=0.5)` at 4-7 equal steps through the run; 1,000 or
    2,000 training samples in batches of 10-20, reshuffled each epoch), the loss logged per batch
    as the code's `LpLoss(size_average=False)`: the SUM over the batch of each sample's relative
    L2 error, so from the batch size (1 per sample) to 0.5-3% of it along the rate's area, 5-20%
    higher at the higher rates (a step down at each halving); each sample its own difficulty
    (log-normal, 30-50%), the batch its mean; float32."""
    return _fno_darcy(n, rng)["loss"]


def _rotate_kge(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    lr0 = float(rng.choice([5e-5, 1e-4, 2e-4]))
    lr = np.where(t < n // 2, lr0, lr0 / 10)
    rel = lr / lr0
    area = np.cumsum(rel)
    pos = _power(area, rng.uniform(0.6, 1.2), rng.uniform(0.05, 0.2), n / _log_uniform(rng, 20, 200), 0.8)
    neg = _power(area, rng.uniform(0.6, 1.2), rng.uniform(0.2, 0.5), n / _log_uniform(rng, 20, 200), 0.7)
    held = 1 + rng.uniform(0.03, 0.08) * _lag(rel, n * rng.uniform(0.002, 0.01), 1.0)
    x = (pos + neg) / 2 * held * _noise(n, rng, rng.uniform(0.02, 0.05))
    return {"loss": _f32(x), LR: lr}


def rotate_kge(n: int, rng: np.random.Generator) -> np.ndarray:
    """Knowledge-graph embeddings with RotatE (Sun et al. 2019, DeepGraphLearning/
    KnowledgeGraphEmbedding `run.py` on FB15k-237 / WN18RR / YAGO3-10: Adam at 5e-5-2e-4, divided
    by 10 at `warm_up_steps = max_steps // 2`; 256-1,024 self-adversarially weighted negatives per
    triple): the logged loss is the mean of the positive sample loss (-log sigmoid(gamma - d),
    from 0.6-1.2 to 0.05-0.2) and the negative one (the hard negatives' weight keeps it at 0.2-0.5),
    both along the rate's area, 3-8% lower after the drop; noise 2-5%; float32."""
    return _rotate_kge(n, rng)["loss"]


def active_learning_rounds(n: int, rng: np.random.Generator) -> np.ndarray:
    """Pool-based deep active learning with warm starts (Beck et al. 2021, "Effective evaluation
    of deep active learning"; DISTIL / modAL loops: label 5-20 acquisitions of the most uncertain
    pool samples, entropy or BADGE, and train on for a fixed number of epochs, so a round's steps
    grow with the labeled set): at each round the new samples, a share a/(p0 + k a) of the set, cost
    2-4x the current level (they were chosen as the hardest), so the loss jumps up by that share
    and falls as they are fit (over 10-40% of the round); the level falls from ln C (10-1,000
    classes) to 5-20% of it, the floor creeping up by 10-30% as the set grows; batch noise 3-10%."""
    t = np.arange(n, dtype=np.float64)
    start = _ce_start(rng)
    rounds = int(rng.integers(5, 21))
    p0, a = rng.uniform(1, 4), 1.0  # the initial labeled set, in acquisitions
    sizes = p0 + a * np.arange(rounds + 1)
    bounds = np.r_[0, np.cumsum(sizes)] / sizes.sum() * n
    k = np.clip(np.searchsorted(bounds, t, side="right") - 1, 0, rounds)
    floor = start * rng.uniform(0.05, 0.2) * (1 + rng.uniform(0.1, 0.3) * k / rounds)
    level = _power(t, start, 0.0, n / _log_uniform(rng, 50, 500), 0.8) + floor
    share = np.where(k > 0, a / sizes[k], 0.0)
    into = t - bounds[k]
    span = bounds[k + 1] - bounds[k]
    fit = np.exp(-into / (span * rng.uniform(0.1, 0.4)))
    extra = share * (rng.uniform(2, 4, rounds + 1)[k] - 1) * fit
    return level * (1 + extra) * _noise(n, rng, rng.uniform(0.03, 0.1))


def context_extension(n: int, rng: np.random.Generator) -> np.ndarray:
    """LLM pretraining followed by long-context continued training in stages (Llama 3, Dubey
    et al. 2024: the context raised from 8k to 128k in 6 stages; Xiong et al. 2023: RoPE's base
    frequency raised at the switch): at 75-92% of the run the context doubles 2-5 times, in equal
    stages; at each switch the rescaled positions cost 2-8% for a while (recovering over 0.3-2%
    of the run), and the per-token loss then settles 0.5-2% lower than before (later tokens see
    more context); the loss from ln V to 1.8-3.0 before; the noise 1-3%, Student-t, larger by
    10-30% at each switch (as many tokens a step, but in half as many documents, each one's
    difficulty a larger share of the batch)."""
    t = np.arange(n, dtype=np.float64)
    trend = _lm_trend(n, rng)
    t1 = n * rng.uniform(0.75, 0.92)
    stages = int(rng.integers(2, 6))
    switches = t1 + (n - t1) * np.arange(stages) / stages
    shift = np.ones(n)
    bump = np.zeros(n)
    sd = np.full(n, rng.uniform(0.01, 0.03))
    for s in switches:
        after = t >= s
        shift[after] *= 1 - rng.uniform(0.005, 0.02)
        sd[after] *= 1 + rng.uniform(0.1, 0.3)
        bump[after] += rng.uniform(0.02, 0.08) * np.exp(-(t[after] - s) / (n * rng.uniform(0.003, 0.02)))
    x = trend * shift * (1 + bump) * _t_noise(n, rng, sd, rng.uniform(4, 8))
    return _f32(x)


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "gaussian_splatting": gaussian_splatting,
    "graphcast_rollout": graphcast_rollout,
    "consistency_ict": consistency_ict,
    "sae_l1_warmup": sae_l1_warmup,
    "moe_aux_zloss": moe_aux_zloss,
    "esm2_protein_mlm": esm2_protein_mlm,
    "alphazero_selfplay": alphazero_selfplay,
    "dreamer_world_model": dreamer_world_model,
    "raft_flow_sequence": raft_flow_sequence,
    "siglip_sigmoid": siglip_sigmoid,
    "fno_darcy": fno_darcy,
    "rotate_kge": rotate_kge,
    "active_learning_rounds": active_learning_rounds,
    "context_extension": context_extension,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "gaussian_splatting": _gaussian_splatting,
    "graphcast_rollout": _graphcast_rollout,
    "sae_l1_warmup": _sae_l1_warmup,
    "moe_aux_zloss": _moe_aux_zloss,
    "esm2_protein_mlm": _esm2_protein_mlm,
    "alphazero_selfplay": _alphazero_selfplay,
    "raft_flow_sequence": _raft_flow_sequence,
    "fno_darcy": _fno_darcy,
    "rotate_kge": _rotate_kge,
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
def labels_shifted_twice(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """An LM resumed at 30-70% of its run with a new collator that shifts the labels by one
    (`labels = input_ids[:, 1:]`) before a Hugging Face model that shifts them again: every
    position is now scored on the token two ahead. The model, sure of the next token, is wrong:
    within 1-5 steps the loss jumps to 1.5-2.5x its level, then it learns to predict two ahead
    (a harder task), falling over 200-3,000 steps to 1.25-1.5x the healthy level and on down
    with it, never closer; batch noise 1-4% (Student-t). The onset is the resume."""
    trend = _lm_trend(n, rng)
    x = trend * _t_noise(n, rng, rng.uniform(0.01, 0.04), rng.uniform(4, 8))
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0, dtype=np.float64)
    worse = rng.uniform(1.25, 1.5)
    peak = rng.uniform(1.5, 2.5)
    rise = np.minimum(1.0, (k + 1) / rng.integers(1, 6))
    relearn = np.exp(-k / rng.uniform(200, 3000))
    factor = 1 + rise * ((worse - 1) + (peak - worse) * relearn)
    x[t0:] *= factor
    return x, t0


def tiny_batch_batchnorm(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """An image classifier (a ResNet with plain `BatchNorm2d`, no SyncBN) resumed at 30-70% of its
    run on bigger images with the per-GPU batch cut from 32-128 to 2-4 and gradient accumulation
    to keep the global batch: each micro-batch is normalized by its own 2-4 samples' statistics,
    noisy and unlike the running ones, so the loss, logged per micro-batch, jumps in mean by 20-60% at
    once and comes down only part of the way (to 10-30% above the healthy run) over 500-3,000
    steps, and its noise grows from the mean of 32-128 samples' to that of 2-4 (each sample's
    loss log-normal, spread 0.6-1). The onset is the resume."""
    t = np.arange(n, dtype=np.float64)
    start = _ce_start(rng)
    trend = _power(t, start, start * rng.uniform(0.05, 0.2), n / _log_uniform(rng, 20, 200), 0.8)
    spread = rng.uniform(0.6, 1.0)
    big = int(rng.choice([32, 64, 128]))
    x = trend * _noise(n, rng, spread / math.sqrt(big))
    t0 = int(n * rng.uniform(0.3, 0.7))
    small = int(rng.integers(2, 5))
    k = np.arange(n - t0, dtype=np.float64)
    per = rng.lognormal(-(spread**2) / 2, spread, (n - t0, small)).mean(axis=1)
    stay = rng.uniform(0.1, 0.3)
    level = 1 + stay + (rng.uniform(0.2, 0.6) - stay) * np.exp(-k / rng.uniform(500, 3000))
    x[t0:] = trend[t0:] * level * per
    return x, t0


def target_net_frozen(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A DQN (CleanRL-style, Huber TD loss) resumed at 30-70% of its run by a refactored agent
    whose `sync_target()` builds a new target network (`self.target = copy.deepcopy(self.q)`)
    while the loss function keeps the old one: the targets never move again. Before, every
    500-5,000 steps a sync lifts the loss by 20-100%, decaying within the period, on a level that
    grows slowly with the Q-values; after, the bumps stop and the online network fits the frozen
    targets: the loss falls smoothly over 1-5 periods to 10-40% of its level (only the fresh
    replay's new transitions keep it up); the batch loss log-normal, 30-60%. The onset is the
    resume."""
    t = np.arange(n, dtype=np.float64)
    level = _log_uniform(rng, 0.002, 0.02) * (
        1 + rng.uniform(1, 5) * (1 - np.exp(-t / (n * rng.uniform(0.1, 0.5))))
    )
    period = int(rng.integers(500, 5001))
    lift = rng.uniform(0.2, 1.0)
    into = t % period
    sync = 1 + lift * np.exp(-into / (period * rng.uniform(0.1, 0.3)))
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0, dtype=np.float64)
    low = rng.uniform(0.1, 0.4)
    sync[t0:] = sync[t0] * (low + (1 - low) * np.exp(-k / (period * rng.uniform(1, 5))))
    x = level * sync * _noise(n, rng, rng.uniform(0.3, 0.6))
    return x, t0


def head_reinit_strict_false(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A classifier resumed at 30-70% of its run with `model.load_state_dict(ckpt, strict=False)`
    after its head was renamed (`fc` to `head` in a refactor): the head's weights are missing, no
    error, and it starts again from its fresh initialization, as do its optimizer moments: within
    1-3 steps the loss is back near ln C (10-1,000 classes, the run's start), then the head is
    relearned on the intact features, fast, over 100-2,000 steps, to 2-10% above the healthy
    level, a gap that closes over the rest of the run only by half; skewed batch noise 3-10%. The
    onset is the resume."""
    t = np.arange(n, dtype=np.float64)
    start = _ce_start(rng)
    trend = _power(t, start, start * rng.uniform(0.05, 0.25), n / _log_uniform(rng, 20, 200), 0.8)
    x = trend * _gamma(n, rng, rng.uniform(0.03, 0.1))
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0, dtype=np.float64)
    gap = rng.uniform(0.02, 0.1) * (1 - 0.5 * k / max(n - t0 - 1, 1))
    tau = rng.uniform(100, 2000)
    lvl = trend[t0:] * (1 + gap)
    near = start * rng.uniform(0.9, 1.05)
    rise = np.minimum(1.0, (k + 1) / rng.integers(1, 4))
    cur = lvl + rise * (near - lvl) * np.exp(-k / tau)
    x[t0:] = cur * _gamma(n - t0, rng, rng.uniform(0.03, 0.1))
    return _f32(x), t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "labels_shifted_twice": labels_shifted_twice,
    "tiny_batch_batchnorm": tiny_batch_batchnorm,
    "target_net_frozen": target_net_frozen,
    "head_reinit_strict_false": head_reinit_strict_false,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
