"""A thirteenth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind13`.

    .venv/bin/python benchmarks/long_runs.py --blind13 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of a training job look over 10^5-10^6 steps (the practice is cited in its docstring), its
parameters drawn per seed. Their theme is large-scale training as the public reports of
2024-2026 log it, through practices the earlier sets lack: OLMo 2's mid-training anneal on a
new data mix, OPT's logbook of rollbacks after loss spikes, DeepSeek's multi-step schedule,
a sparsely upcycled mixture of experts with its balancing loss in the total, a muP run with a
zero-initialized readout on MiniCPM's exponential decay, ORPO, iterative DPO in rounds, KTO,
v-prediction diffusion with Min-SNR weighting, EDM2's learned per-noise-level uncertainty
(a loss that goes below zero), w2v-BERT's contrastive plus masked-prediction loss, a video
model trained on mixed image and video batches through resolution stages, MusicGen's codec
language model and VAR's next-scale image tokens. None of them is one of `long_runs.KINDS`,
`long_blind.KINDS`, ... `long_blind12.KINDS` (nor a bug of their `BUGS`). They are to be
measured once, on the held-out seeds (`SEEDS`), and not tuned on: a rule changed after looking
at them makes them a tuning set.

The interface is `long_blind12`'s: a kind is `(n, rng) -> loss`; eleven kinds record the
learning-rate schedule they follow, and `series(kind, n, rng)` gives all that a run records,
the loss and, where the kind has one, the learning rate (`LR`, as the PyTorch hook records
it, in real units). No kind here has evaluation passes, but `MODE` and its codes are kept for
the interface. A bug is `(n, rng) -> (loss, the step its defect begins)`; two bugs log NaN or
exact constants, as such jobs do. Only numpy here: the series can be generated and looked at
without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _log_uniform, _noise, _power  # the first blind set's helpers
from long_blind3 import _lag  # the third's
from long_blind4 import _f32, _gamma  # the fourth's
from long_blind8 import _t_noise  # the eighth's
from long_blind9 import _warm_cosine  # the ninth's
from long_blind10 import _decays  # the tenth's
from long_blind11 import _linear_warm_decay  # the eleventh's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE (no kind here records one)
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 13000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _vocab(rng: np.random.Generator) -> float:
    """ln V of a 2024-2026 LLM's tokenizer: 32k (Llama 2, Mistral), 100k (OLMo 2, cl100k),
    128k (Llama 3), 152k (Qwen 2)."""
    return math.log(float(rng.choice([32_000, 100_278, 128_256, 151_936])))


def _lm_area(area: np.ndarray, start: float, floor: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """An LM's loss along the learning rate's area (in steps at the peak rate): a power law from
    `start` towards `floor`, most of the fall within 1/100-1/1,000 of the run."""
    return _power(area, start, floor, n / _log_uniform(rng, 100, 1000), rng.uniform(0.5, 0.8))


def _held(lr: np.ndarray, peak: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """The share of the loss the learning rate holds up (the noise floor of the iterates, as in
    the loss drop of an anneal): the rate relative to its peak, lagged by 0.1-1% of the run."""
    return _lag(lr / peak, n * rng.uniform(0.001, 0.01), 0.0)


def _beta_rise(k: np.ndarray, tau: float) -> np.ndarray:
    """0 at k <= 0, rising to 1 with the time constant `tau`."""
    return 1 - np.exp(-np.maximum(k, 0) / max(tau, 1.0))


# the healthy kinds ----------------------------------------------------------------------------
def _olmo2_midtrain_anneal(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([3e-4, 6e-4, 9e-4]))
    s = int(n * rng.uniform(0.85, 0.95))  # stage 2 starts here
    horizon = s / rng.uniform(0.6, 0.95)  # stage 1's cosine is cut short of its end
    lr = _warm_cosine(t, int(horizon), n * rng.uniform(0.002, 0.01), peak, 0.1)
    lr[s:] = lr[s - 1] * (n - t[s:]) / (n - s)  # stage 2: linear to 0 from where stage 1 stopped
    area = np.cumsum(lr / peak)
    level = _lm_area(area, _vocab(rng), rng.uniform(2.1, 2.8), n, rng)
    level *= 1 + rng.uniform(0.04, 0.1) * _held(lr, peak, n, rng)
    shift = rng.uniform(0.85, 1.08)  # the Dolmino mix's own per-token loss against the web mix
    k = t - s
    learn = rng.uniform(0.02, 0.06) * _beta_rise(k, (n - s) * rng.uniform(0.1, 0.3))
    mix = np.where(t >= s, shift * (1 - learn), 1.0)
    sd = np.where(t >= s, rng.uniform(1.2, 1.6), 1.0) * rng.uniform(0.01, 0.025)
    x = level * mix * _t_noise(n, rng, sd, rng.uniform(3, 8))
    return {"loss": _f32(x), LR: lr}


def olmo2_midtrain_anneal(n: int, rng: np.random.Generator) -> np.ndarray:
    """Two-stage LLM pre-training as OLMo 2 did it (OLMo et al. 2024, "2 OLMo 2 Furious"; the
    same idea in Llama 3's annealing and MiniCPM's decay-phase mix): stage 1 on the web mix
    with a warm-up over 0.2-1% and a cosine towards 10% of 3e-4-9e-4 that is cut short at
    85-95% of the run (60-95% of the way through its horizon); stage 2, a new job from the last
    checkpoint, on the high-quality Dolmino mix (filtered web, math, FLAN, Wikipedia), its rate
    linear from where stage 1 stopped to 0, recorded. The loss from ln V along the rate's area
    to 2.1-2.8 nats, 4-10% of it held up by the rate (the drop of the anneal); at the switch
    the new mix's per-token loss is its own, 0.85-1.08x the web mix's, at once, and 2-6% of it
    is learned away during the anneal; Student-t noise of 1-2.5%, 1.2-1.6x larger on the more
    heterogeneous stage-2 mix; float32."""
    return _olmo2_midtrain_anneal(n, rng)["loss"]


def _rollback_restarts(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    peak = float(rng.choice([6e-5, 1.2e-4, 1.5e-4]))
    warm = n * rng.uniform(0.002, 0.01)
    events = int(rng.integers(2, 7))
    at = np.sort(rng.uniform(0.1, 0.9, events) * n).astype(int)
    rec_step = np.empty(n)  # the training step of each record
    rec_mult = np.empty(n)  # the rate's multiplier after the restarts so far
    spike = np.zeros(n)
    step, mult, i, e = 0, 1.0, 0, 0
    while i < n:
        if e < events and i >= at[e]:  # the loss blows up here
            w = int(rng.integers(30, 301))  # records logged while it does, before the stop
            j = np.arange(min(w, n - i))
            rec_step[i : i + len(j)] = step + j
            rec_mult[i : i + len(j)] = mult
            spike[i : i + len(j)] = rng.uniform(0.5, 2.0) * (1 - np.exp(-j / rng.uniform(5, 60)))
            i += len(j)
            step = max(0, step - int(rng.integers(100, 1001)))  # back to a checkpoint before the spike
            mult *= float(rng.choice([1.0, 1.0, 0.9, 0.75]))  # the rate lowered at some restarts
            e += 1
            continue
        stop = max(i, min(at[e], n)) if e < events else n
        m = stop - i
        rec_step[i:stop] = step + np.arange(m)
        rec_mult[i:stop] = mult
        step += m
        i = stop
    frac = np.minimum(rec_step / n, 1.0)
    lr = peak * rec_mult * np.where(rec_step < warm, (rec_step + 1) / warm, 1 - 0.9 * frac)
    start = _vocab(rng)
    floor = rng.uniform(1.9, 2.6)
    scale = n / _log_uniform(rng, 100, 1000)
    p = rng.uniform(0.5, 0.8)
    level = _power(rec_step, start, floor, scale, p) * (1 + rng.uniform(0.03, 0.08) * lr / peak)
    x = level * (1 + spike) * _t_noise(n, rng, rng.uniform(0.01, 0.025), rng.uniform(3, 8))
    return {"loss": _f32(x), LR: lr}


def rollback_restarts(n: int, rng: np.random.Generator) -> np.ndarray:
    """A large LM pre-trained the way OPT-175B's logbook records it (Zhang et al. 2022,
    facebookresearch/metaseq `projects/OPT/chronicles`; PaLM's "restart ~100 steps before the
    spike and skip 200-500 batches", Chowdhery et al. 2022): 2-6 times in the run the loss
    blows up (to 1.5-3x within 5-60 steps) and the operators stop the job after 30-300 logged
    steps, roll back to a checkpoint 100-1,000 steps earlier and go on, on fresh batches, the
    rate lowered at some of the restarts (x0.9 or x0.75); the log is as appended, so the
    re-trained steps are logged again after the blown-up ones: a spike that ends at once at the
    level of the checkpoint. The rate warms up over 0.2-1% and decays linearly towards 10% of
    6e-5-1.5e-4 (recorded); the loss from ln V to 1.9-2.6 nats, 3-8% of it held up by the rate;
    Student-t noise of 1-2.5%; float32."""
    return _rollback_restarts(n, rng)["loss"]


def _deepseek_multistep(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([4.2e-4, 3.2e-4, 2.2e-4]))
    warm = n * rng.uniform(0.002, 0.01)
    lr = peak * 0.316 ** ((t >= 0.8 * n).astype(float) + (t >= 0.9 * n))
    lr = np.where(t < warm, peak * (t + 1) / warm, lr)
    area = np.cumsum(lr / peak)
    level = _lm_area(area, math.log(102_400), rng.uniform(1.9, 2.6), n, rng)
    level *= 1 + rng.uniform(0.05, 0.1) * _held(lr, peak, n, rng)
    spikes = np.sort(rng.uniform(0.05, 0.95, int(rng.integers(0, 3))) * n)
    level *= 1 + _decays(t, spikes, rng.uniform(0.1, 0.4, len(spikes)), rng.uniform(20, 200))
    rho = 0.0 if rng.random() < 0.5 else rng.uniform(0.3, 0.8)
    x = level * _noise(n, rng, rng.uniform(0.008, 0.025), rho)
    return {"loss": _f32(x), LR: lr}


def deepseek_multistep(n: int, rng: np.random.Generator) -> np.ndarray:
    """LLM pre-training on DeepSeek LLM's multi-step schedule (DeepSeek-AI 2024, "DeepSeek LLM:
    scaling open-source language models with longtermism", sec. 2.3; the 102,400-token
    vocabulary): a warm-up over 0.2-1% to 2.2e-4-4.2e-4, held, then x0.316 at 80% of the run
    and x0.316 again at 90% (recorded); the loss from ln 102,400 along the rate's area to 1.9-2.6
    nats, 5-10% of it held up by the rate, so it steps down twice (over 0.1-1% of the run) as
    the paper's figure 1 shows; 0-2 small spikes (+10-40%, recovering over 20-200 steps); noise
    0.8-2.5%, AR-correlated on half the seeds; float32."""
    return _deepseek_multistep(n, rng)["loss"]


def _moe_upcycled(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([1e-4, 2e-4, 3e-4]))
    warm = n * rng.uniform(0.005, 0.02)
    lr = _warm_cosine(t, n, warm, peak, 0.1)
    dense = rng.uniform(2.0, 2.6)  # the dense checkpoint's loss on this data
    gain = rng.uniform(0.05, 0.12)  # how much lower the MoE gets
    level = _power(
        np.cumsum(lr / peak), dense, dense * (1 - gain) * 0.97, n / _log_uniform(rng, 20, 200), 0.7
    )
    gap = rng.uniform(0.03, 0.08) * (t / warm) * np.exp(1 - t / warm)  # the rewarm's stability gap
    level *= 1 + gap
    level *= 1 + 0.03 * _held(lr, peak, n, rng)
    balance = 1.0 + rng.uniform(0.1, 0.3) * (t / (2 * warm)) * np.exp(1 - t / (2 * warm))
    balance += rng.uniform(0.02, 0.06) * _beta_rise(t, 2 * warm)
    x = level * _t_noise(n, rng, rng.uniform(0.01, 0.025), rng.uniform(3, 8)) + 0.01 * balance
    return {"loss": _f32(x), LR: lr}


def moe_upcycled(n: int, rng: np.random.Generator) -> np.ndarray:
    """Sparse upcycling of a dense LLM into a mixture of experts (Komatsuzaki et al. 2023; as
    Qwen1.5-MoE and Skywork-MoE were made; every MLP copied into 8-64 experts, a new router,
    top-2): continued pre-training at a re-warmed rate (0.5-2% to 1e-4-3e-4, a cosine to 10%,
    recorded). The loss starts at the dense checkpoint's (2.0-2.6 nats; the copies compute the
    dense MLP), rises by 3-8% through the warm-up (the new router and the re-warmed rate: the
    stability gap) and comes back, then falls along the rate's area 5-12% below the dense
    model; the logged total adds 0.01 x the load-balancing loss (E x sum f_i P_i: 1 at
    uniform routing, up 10-30% as the experts first specialize, settling 2-6% above 1);
    Student-t noise of 1-2.5%; float32."""
    return _moe_upcycled(n, rng)["loss"]


def _mup_zero_readout(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([0.01, 0.01, 0.02]))  # muP's base rate, tuned on a proxy model
    warm = n * rng.uniform(0.002, 0.01)
    s = n * rng.uniform(0.85, 0.92)  # the decay starts
    half = (n - s) / rng.uniform(3, 8)  # MiniCPM's 0.5^((t - s) / T)
    lr = np.where(t < warm, peak * (t + 1) / warm, peak * 0.5 ** (np.maximum(t - s, 0) / half))
    area = np.cumsum(lr / peak)
    start = _vocab(rng)
    level = _lm_area(area, start, rng.uniform(2.0, 2.8), n, rng)
    level *= 1 + rng.uniform(0.06, 0.12) * _held(lr, peak, n, rng)
    level = np.minimum(level, start)
    sd = rng.uniform(0.008, 0.02) * (
        1 - np.exp(-t / 20)
    )  # the uniform logits of a zero readout: 0 spread at first
    x = level * _t_noise(n, rng, sd, rng.uniform(3, 8))
    x[0] = start
    return {"loss": _f32(x), LR: lr}


def mup_zero_readout(n: int, rng: np.random.Generator) -> np.ndarray:
    """An LLM trained under muP (Yang et al. 2022, "Tensor Programs V"; Cerebras-GPT, Dey et
    al. 2023; MiniCPM, Hu et al. 2024): the readout initialized to zero, so the first loss is
    exactly ln V (uniform logits) and the first steps' batches all cost about the same; the
    base rate tuned on a proxy (0.01-0.02, as muP's optimizer sees it, recorded) warmed up over
    0.2-1%, held, and decayed as MiniCPM's WSD does from 85-92% of the run, 0.5^((t - s) / T),
    halving 3-8 times; the loss along the rate's area to 2.0-2.8 nats, 6-12% of it held up by
    the rate (the decay's drop); Student-t noise of 0.8-2% once the logits differ; float32."""
    return _mup_zero_readout(n, rng)["loss"]


def _orpo(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([5e-6, 8e-6, 1e-5]))
    lr = _linear_warm_decay(t, n, min(100.0, n * 0.01), peak)
    area = np.cumsum(lr / peak)
    epochs = int(rng.integers(1, 4))
    e = np.minimum(t * epochs // n, epochs - 1)
    nll0 = rng.uniform(1.0, 1.6)
    nll = _power(area, nll0, nll0 * rng.uniform(0.55, 0.8), n / _log_uniform(rng, 20, 200), 0.8)
    nll *= np.exp(-rng.uniform(0.04, 0.15) * e)
    acc_end = rng.uniform(0.3, 0.55)  # the odds-ratio term's end, from ~0.72 (margins near 0)
    ratio = _power(area, 0.72, acc_end, n / _log_uniform(rng, 10, 100), 0.8) * np.exp(
        -rng.uniform(0.03, 0.12) * e
    )
    beta = float(rng.choice([0.1, 0.1, 0.25, 0.5]))
    b = int(rng.choice([8, 16, 32, 64]))
    x = nll * _noise(n, rng, rng.uniform(0.2, 0.4) / math.sqrt(b)) + beta * ratio * _gamma(
        n, rng, 0.8 / math.sqrt(b)
    )
    return {"loss": _f32(x), LR: lr}


def orpo(n: int, rng: np.random.Generator) -> np.ndarray:
    """Preference alignment with ORPO (Hong et al. 2024, "ORPO: monolithic preference
    optimization without reference model"; TRL's `ORPOTrainer`, `beta` 0.1 by default, 0.25 or
    0.5 on some seeds): the loss is the chosen responses' NLL plus beta x -log sigmoid(the log
    odds ratio of chosen over rejected); it starts at the SFT-free base model's NLL (1.0-1.6
    nats) + beta x ~0.72 (the odds nearly equal), the NLL falls 20-45% along the rate's area
    and the odds-ratio term to 0.3-0.55; 1-3 epochs, each later one 4-15% lower (pairs seen
    before); a linear warm-up over 100 steps (at most 1% of the run) and a linear decay to 0
    from 5e-6-1e-5 (recorded); batches of 8-64 pairs: the NLL's noise 20-40% / sqrt(batch), the odds-ratio
    term's skewed, 80% / sqrt(batch); float32."""
    return _orpo(n, rng)["loss"]


def _iterative_dpo(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    rounds = int(rng.integers(3, 7))
    per = n / rounds
    r = np.minimum((t // per).astype(int), rounds - 1)
    into = t - r * per
    peak = float(rng.choice([5e-7, 1e-6, 5e-6]))
    lr = _warm_cosine(into, int(per), per * 0.1, peak)
    area = np.empty(n)
    for k in range(rounds):  # each round's area from its own start
        m = r == k
        area[m] = np.cumsum(lr[m] / peak)
    ends = rng.uniform(0.3, 0.5) + np.cumsum(rng.uniform(0.0, 0.05, rounds))  # later pairs: closer margins
    end = ends[r]
    tau = per * rng.uniform(0.05, 0.3)
    gone = 1 - np.exp(-area / tau)
    level = math.log(2) - (math.log(2) - end) * gone
    b = int(rng.choice([32, 64, 128]))
    spread = rng.uniform(0.5, 0.9) * gone / math.sqrt(b)  # the pairs' losses spread as the margins do
    x = level * _gamma(n, rng, np.maximum(spread, 1e-9))
    first = np.r_[True, r[1:] != r[:-1]]
    x = np.where(first, math.log(2), x)  # a round's first step: the policy is the reference
    return {"loss": _f32(x), LR: lr}


def iterative_dpo(n: int, rng: np.random.Generator) -> np.ndarray:
    """Iterative (online) DPO in rounds (Xu et al. 2023, "Some things are more CRINGE than
    others"; Xiong et al. 2024, "Iterative preference learning from human feedback"; Llama 3's
    post-training rounds, Dubey et al. 2024; one job that loops): 3-6 equal rounds, each on
    fresh pairs sampled from the current policy and judged, with the reference reset to the
    current policy, so each round's first step is exactly ln 2 and its loss falls (1 -
    exp(-area / tau), along the round's rate) towards 0.3-0.5, each later round's pairs a little
    closer (its end 0-5% higher); the rate re-warms each round over 10% and decays on a cosine
    to 0, from 5e-7-5e-6 (recorded); batches of 32-128 pairs whose losses spread as the margins
    grow: skewed noise from 0 to (50-90%) / sqrt(batch); float32."""
    return _iterative_dpo(n, rng)["loss"]


def _kto(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([5e-7, 1e-6, 5e-6]))
    lr = _warm_cosine(t, n, n * 0.1, peak)
    area = np.cumsum(lr / peak)
    epochs = int(rng.integers(1, 4))
    e = np.minimum(t * epochs // n, epochs - 1)
    tau = n / _log_uniform(rng, 5, 50)
    gone = 1 - np.exp(-area / tau)
    want = 0.5 - rng.uniform(0.15, 0.3) * gone  # desirable examples: 1 - sigmoid(beta (r - z))
    avoid = 0.5 - rng.uniform(0.1, 0.3) * gone  # undesirable: 1 - sigmoid(beta (z - r))
    drift = rng.uniform(0.0, 0.05) * gone  # the KL estimate z grows: desirable harder, undesirable easier
    want, avoid = want + drift, avoid - drift
    later = np.exp(-rng.uniform(0.02, 0.1) * e)
    b = int(rng.choice([16, 32, 64]))
    share = rng.uniform(0.5, 0.8)  # desirable share of the data (lambda_D rebalanced in TRL)
    k = rng.binomial(b, share, n)
    x = (k * want + (b - k) * avoid) / b * later
    x = x * _noise(n, rng, rng.uniform(0.3, 0.5) * gone / math.sqrt(b))
    x[0] = 0.5  # r = z = 0 at the first step: every example costs 0.5
    return {"loss": _f32(np.clip(x, 0.0, 1.0)), LR: lr}


def kto(n: int, rng: np.random.Generator) -> np.ndarray:
    """Alignment with KTO on unpaired binary feedback (Ethayarajh et al. 2024, "KTO: model
    alignment as prospect theoretic optimization"; TRL's `KTOTrainer`): each example costs
    1 - sigmoid(beta (r - z)) if desirable, 1 - sigmoid(beta (z - r)) if not, r its log ratio to
    the reference and z the batch's KL estimate (mismatched pairs, clamped at 0), so the first
    step is exactly 0.5 and the loss stays within [0, 1]; the desirable examples' loss falls by
    0.15-0.3, the undesirable ones' by 0.1-0.3, and as z grows (0-0.05) the first get harder and
    the second easier; 50-80% of the data desirable, so a batch of 16-64 holds a binomial count
    of each, whose means differ; 1-3 epochs (each later one 2-10% lower); a cosine with 10%
    warm-up from 5e-7-5e-6 (recorded); per-example noise 30-50% / sqrt(batch) as the rewards
    spread; float32."""
    return _kto(n, rng)["loss"]


def vpred_min_snr(n: int, rng: np.random.Generator) -> np.ndarray:
    """A latent diffusion model trained with v-prediction (Salimans & Ho 2022; Stable Diffusion
    2's 768-v) and Min-SNR-gamma loss weighting (Hang et al. 2023, gamma 5; diffusers'
    `--snr_gamma 5.0`, for v-prediction min(SNR, 5) / (SNR + 1)), cosine noise schedule, each
    sample at a uniform timestep: the untrained net's v error is 1 at every timestep, so the
    weighted loss starts at the weights' mean (~0.32, computed here); it falls within 0.3-3% of
    the run to 15-35% of that and then 3-10% more along a power law; the batch of 64-2,048
    samples averages per-sample losses whose spread across timesteps (and the weights) is
    80-120% of their mean, a skewed noise of that over sqrt(batch); float32."""
    t = np.arange(n, dtype=np.float64)
    u = (np.arange(4096) + 0.5) / 4096
    snr = 1 / np.tan(np.pi * u / 2) ** 2
    w0 = float(np.mean(np.minimum(snr, 5.0) / (snr + 1)))
    r = rng.uniform(0.15, 0.35)
    fast = n * rng.uniform(0.003, 0.03) / 3
    slow = _power(t, 1.0, 1 - rng.uniform(0.03, 0.1), n / _log_uniform(rng, 5, 50), 0.7)
    level = w0 * (r + (1 - r) * np.exp(-t / fast)) * slow
    b = int(rng.choice([64, 256, 1024, 2048]))
    cv = rng.uniform(0.8, 1.2) / math.sqrt(b)
    return _f32(level * _gamma(n, rng, cv))


def _edm2_logvar(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    ref = float(rng.choice([0.01, 0.012]))
    t_ref = n * rng.uniform(0.03, 0.1)
    warm = n * rng.uniform(0.003, 0.01)
    lr = ref / np.sqrt(np.maximum(t / t_ref, 1.0)) * np.minimum((t + 1) / warm, 1.0)
    area = np.cumsum(lr / ref)
    end = rng.uniform(0.15, 0.4)  # the weighted MSE's end, its mean over the noise levels
    fast = n * rng.uniform(0.003, 0.02) / 3
    slow = _power(area, 1.0, 1 - rng.uniform(0.05, 0.15), n / _log_uniform(rng, 5, 50), 0.7)
    mse = (end + (1 - end) * np.exp(-area / fast)) * slow
    g = np.log(mse)
    u = _lag(g, n * rng.uniform(0.001, 0.01), 0.0)  # the log-variance MLP follows it
    level = np.exp(g - u) + u
    b = int(rng.choice([256, 512, 2048]))
    spread = rng.uniform(0.6, 1.1)  # u's spread over the noise levels and the per-sample scatter
    x = level + spread / math.sqrt(b) * rng.standard_normal(n)
    return {"loss": _f32(x), LR: lr}


def edm2_logvar(n: int, rng: np.random.Generator) -> np.ndarray:
    """An image diffusion model trained as EDM2 does it (Karras et al. 2024, "Analyzing and
    improving the training dynamics of diffusion models", NVlabs/edm2): the per-sample loss is
    lambda(sigma) / exp(u(sigma)) x ||D - y||^2 + u(sigma), u a learned log-variance per noise
    level (sigma log-normal), so the logged loss starts at 1 (the preconditioned untrained net,
    u = 0), falls as the weighted MSE does (to 15-40% of 1 within 0.3-2% of the run, then 5-15%
    more) with u lagging 0.1-1% behind it, and settles near 1 + the mean log MSE: below zero on
    most seeds (-1.1 to 0); the rate at 0.01-0.012 (Adam on magnitude-preserving layers)
    warmed up over 0.3-1% and decayed as 1 / sqrt(t / t_ref) after t_ref at 3-10% of the run
    (recorded); batches of 256-2,048: normal noise of (0.6-1.1) / sqrt(batch), absolute;
    float32."""
    return _edm2_logvar(n, rng)["loss"]


def w2v_bert(n: int, rng: np.random.Generator) -> np.ndarray:
    """Speech self-supervised pre-training with w2v-BERT (Chung et al. 2021; w2v-BERT 2.0 in
    Seamless, 2023): the logged loss is the contrastive loss (wav2vec 2.0's, over 100
    distractors: from ln 101 = 4.62 to 1.0-2.0 nats within 1-5% of the run, then slowly) plus
    the masked-prediction cross-entropy over the quantizer's 1,024 code ids plus 0.1 x the
    codebook diversity loss, 1 - perplexity / 1,024. The codes are learned with the contrastive
    module: the random quantizer's codes (a perplexity of 50-300) first collapse within
    0.1-0.3% of the run onto a few ids that are easy to predict (the masked loss 0.5-1.5 nats),
    then spread within 2-10% of the run, so the masked loss rises towards 3-4.5 nats while the
    model learns to predict them (it ends at 1.5-3.0): the total falls, rises to a hump, and
    falls on; noise 1-3% (AR-correlated on half the seeds); float32."""
    t = np.arange(n, dtype=np.float64)
    c = _power(t, math.log(101), rng.uniform(1.0, 2.0), n * rng.uniform(0.002, 0.01), 0.8)
    ent = _beta_rise(t - n * 0.003, n * rng.uniform(0.02, 0.1) / 3)  # the codes' spread, 0 -> 1
    easy = rng.uniform(0.5, 1.5)
    hump = rng.uniform(3.0, 4.5)
    first = math.log(rng.uniform(50, 300))
    collapse = np.exp(-t / (n * rng.uniform(0.001, 0.003) / 3))
    target = easy + (hump - easy) * ent + (first - easy) * collapse  # the targets' entropy, nats
    learned = _power(t, 1.0, rng.uniform(1.5, 3.0) / hump, n * rng.uniform(0.02, 0.1), 0.7)
    m = target * learned
    d = 0.1 * (1 - np.exp(target) / 1024)
    rho = 0.0 if rng.random() < 0.5 else rng.uniform(0.3, 0.8)
    x = (c + m) * _noise(n, rng, rng.uniform(0.01, 0.03), rho) + d
    return _f32(x)


def video_image_joint(n: int, rng: np.random.Generator) -> np.ndarray:
    """A text-to-video flow-matching transformer trained on mixed image and video batches
    through resolution stages (Movie Gen, Polyak et al. 2024; Open-Sora 1.2/2.0;
    HunyuanVideo, Kong et al. 2024): 2-4 stages (256p -> 512p/768p, longer clips), each a
    share of the run; 10-50% of the steps are image batches (a frame each, many more samples:
    noise 1-2%), the rest video batches of a few clips (noise 3-6%); an image batch's
    velocity MSE is its own, 0.85-1.15x a video batch's. The loss starts at 2 (zero-initialized
    output), falls within 0.5-2% to 0.4-0.7 and then 3-8% more; at each new stage the
    per-element loss is 5-15% lower (smoother high-resolution latents, a larger timestep shift)
    after a bump of 2-6% that the model learns away over 0.5-2% of the run; constant rate; float32."""
    t = np.arange(n, dtype=np.float64)
    stages = int(rng.integers(2, 5))
    cuts = np.sort(rng.uniform(0.15, 0.9, stages - 1)) * n
    s = np.searchsorted(cuts, t, side="right")
    floor = rng.uniform(0.4, 0.7)
    base = floor * _power(t, 1.0, 1 - rng.uniform(0.03, 0.08), n / _log_uniform(rng, 10, 100), 0.7)
    base = base + (2.0 - floor) * np.exp(-t / (n * rng.uniform(0.005, 0.02) / 3))
    drops = np.r_[1.0, np.cumprod(1 - rng.uniform(0.05, 0.15, stages - 1))]
    level = base * drops[s]
    bumps = _decays(
        t,
        cuts.astype(int).astype(np.float64),
        rng.uniform(0.02, 0.06, stages - 1),
        n * rng.uniform(0.005, 0.02),
    )
    level *= 1 + bumps
    image = rng.random(n) < rng.uniform(0.1, 0.5)
    level *= np.where(image, rng.uniform(0.85, 1.15), 1.0)
    sd = np.where(image, rng.uniform(0.01, 0.02), rng.uniform(0.03, 0.06))
    return _f32(level * _gamma(n, rng, sd))


def _codec_lm(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = 1e-4
    lr = _warm_cosine(t, n, min(4000.0, n * 0.02), peak)
    area = np.cumsum(lr / peak)
    start = math.log(2048)
    k = 4
    f1 = rng.uniform(2.8, 4.0)
    floors = f1 * (1 + rng.uniform(0.1, 0.25) * np.arange(k))  # finer residual codebooks: closer to noise
    floors = np.minimum(floors, start - 0.5)
    ces = [_power(area, start, f, n / _log_uniform(rng, 50, 500), rng.uniform(0.5, 0.8)) for f in floors]
    level = np.mean(ces, axis=0) * (1 + rng.uniform(0.02, 0.05) * _held(lr, peak, n, rng))
    x = level * _t_noise(n, rng, rng.uniform(0.01, 0.03), rng.uniform(4, 10))
    return {"loss": _f32(x), LR: lr}


def codec_lm(n: int, rng: np.random.Generator) -> np.ndarray:
    """A music or speech language model over neural-codec tokens (MusicGen, Copet et al. 2023,
    facebookresearch/audiocraft: 4 EnCodec codebooks of 2,048 in the delay pattern; VALL-E and
    Moshi likewise): the logged loss is the mean of the codebooks' cross-entropies, each from
    ln 2,048 = 7.62 to its own floor (the first 2.8-4.0 nats, each finer residual codebook
    10-25% higher: closer to noise), along the rate's area; AdamW at 1e-4, warmed up over 4,000
    steps (at most 2% of the run) and a cosine to 0 (recorded), 2-5% of the loss held up by it;
    Student-t noise of 1-3%; float32."""
    return _codec_lm(n, rng)["loss"]


def _var_next_scale(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    b = int(rng.choice([512, 768, 1024]))
    peak = 1e-4 * b / 256
    warm = n * rng.uniform(0.005, 0.03)
    lr = np.where(t < warm, peak * (t + 1) / warm, peak - (peak - 0.01 * peak) * (t - warm) / (n - warm))
    area = np.cumsum(lr / peak)
    start = math.log(4096)
    floor = rng.uniform(5.3, 6.5)
    level = _power(area, start, floor, n / _log_uniform(rng, 30, 300), rng.uniform(0.4, 0.7))
    level *= 1 + rng.uniform(0.005, 0.02) * _held(lr, peak, n, rng)
    classes = 1 + rng.uniform(0.002, 0.006) * rng.standard_normal(
        n
    )  # the batch's classes' share of hard ones
    x = level * classes * _noise(n, rng, rng.uniform(0.001, 0.004))
    return {"loss": _f32(x), LR: lr}


def var_next_scale(n: int, rng: np.random.Generator) -> np.ndarray:
    """A visual autoregressive model on ImageNet 256 (VAR, Tian et al. 2024, FoundationVision/
    VAR: next-scale prediction over 10 token maps, 1x1 to 16x16, 680 tokens of a 4,096-code
    multi-scale VQ-VAE per image): the cross-entropy over every token of the batch, from
    ln 4,096 = 8.32 down a slow power law to 5.3-6.5 nats (image tokens keep much of their
    entropy); batches of 512-1,024 images (half a million tokens) so the noise is small,
    0.1-0.4% plus 0.2-0.6% from the batch's classes; AdamW at 1e-4 x batch / 256, warmed up
    over 0.5-3% and decayed linearly to 1% of it (recorded), 0.5-2% of the loss held up by it;
    float32."""
    return _var_next_scale(n, rng)["loss"]


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "olmo2_midtrain_anneal": olmo2_midtrain_anneal,
    "rollback_restarts": rollback_restarts,
    "deepseek_multistep": deepseek_multistep,
    "moe_upcycled": moe_upcycled,
    "mup_zero_readout": mup_zero_readout,
    "orpo": orpo,
    "iterative_dpo": iterative_dpo,
    "kto": kto,
    "vpred_min_snr": vpred_min_snr,
    "edm2_logvar": edm2_logvar,
    "w2v_bert": w2v_bert,
    "video_image_joint": video_image_joint,
    "codec_lm": codec_lm,
    "var_next_scale": var_next_scale,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "olmo2_midtrain_anneal": _olmo2_midtrain_anneal,
    "rollback_restarts": _rollback_restarts,
    "deepseek_multistep": _deepseek_multistep,
    "moe_upcycled": _moe_upcycled,
    "mup_zero_readout": _mup_zero_readout,
    "orpo": _orpo,
    "iterative_dpo": _iterative_dpo,
    "kto": _kto,
    "edm2_logvar": _edm2_logvar,
    "codec_lm": _codec_lm,
    "var_next_scale": _var_next_scale,
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
def _lm_healthy(n: int, rng: np.random.Generator) -> np.ndarray:
    """A healthy LLM's noise-free loss over `n` steps: from ln V to 1.9-2.8 nats."""
    t = np.arange(n, dtype=np.float64)
    return _power(
        t, _vocab(rng), rng.uniform(1.9, 2.8), n / _log_uniform(rng, 50, 500), rng.uniform(0.5, 0.8)
    )


def rope_base_not_updated(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Long-context extension at 60-85% of an LLM's run (the context 4-16x longer) whose
    launcher drops the `rope_theta` override (the new base of 500k-10M never reaches the model
    config; Xiong et al. 2023 and Llama 3 raise it at the switch): the tokens beyond the old
    window see rotations never trained, so within 1-3 steps the per-token loss rises by their
    share of the sequence (75-94%) x 1-3 nats, and the fine-tuning adapts to the unscaled
    positions only slowly (a time constant of 5-20% of the run), to a plateau 5-20% above the
    healthy run's level; the batch noise (1-3%) doubles. The onset is the switch."""
    t = np.arange(n, dtype=np.float64)
    trend = _lm_healthy(n, rng)
    t0 = int(n * rng.uniform(0.6, 0.85))
    m = float(rng.choice([4, 8, 16]))
    beyond = 1 - 1 / m
    jump = beyond * rng.uniform(1.0, 3.0)
    k = t - t0
    rest = rng.uniform(0.05, 0.2) * trend
    extra = rest + (jump - rest) * np.exp(-np.maximum(k, 0) / (n * rng.uniform(0.05, 0.2)))
    onset = np.minimum(np.maximum(k + 1, 0) / rng.uniform(1, 3), 1.0)
    x = trend + extra * onset * (t >= t0)
    sd0 = rng.uniform(0.01, 0.03)
    x *= _noise(n, rng, np.where(t >= t0, 2 * sd0, sd0))
    return _f32(x), t0


def dpo_reference_is_policy(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A DPO job (TRL-style, batches of 32-128 pairs; the loss from ln 2 towards 0.3-0.55, its
    skewed noise growing with the margins) resumed at 30-70% of its run by a refactored script
    that passes the policy itself as the reference model (`ref_model=model`: one module, no
    frozen copy; dropout disabled as TRL does): both log-probabilities come from the same
    weights in the same step, so every log ratio difference is exactly 0 and the loss is
    exactly ln 2 (float32 0.6931472) at every step from the onset, without noise, while the
    gradient, beta / 2 x (grad log p_chosen - grad log p_rejected), goes on pushing the policy
    unanchored. The onset is the resume."""
    t = np.arange(n, dtype=np.float64)
    end = rng.uniform(0.3, 0.55)
    gone = 1 - np.exp(-t / (n * rng.uniform(0.05, 0.3)))
    level = math.log(2) - (math.log(2) - end) * gone
    b = int(rng.choice([32, 64, 128]))
    x = level * _gamma(n, rng, np.maximum(rng.uniform(0.5, 0.9) * gone / math.sqrt(b), 1e-9))
    x[0] = math.log(2)
    t0 = int(n * rng.uniform(0.3, 0.7))
    x[t0:] = math.log(2)
    return _f32(x), t0


def fp16_attention_overflow(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """An LM trained in fp16 with a dynamic loss scaler and no QK-norm (the attention logits
    grow with the query and key norms; Dehghani et al. 2023, Wortsman et al. 2023), healthy
    until 40-80% of its run, where the largest attention logits start to pass 65,504 in the
    forward pass: a batch that overflows gives a NaN loss (softmax over inf - inf; 10-30% of
    them +inf), its step skipped by the scaler; the finite batches keep training and keep
    growing the logits, so the share of overflowing batches climbs from 1-5% to all of them
    within 2-10% of the run, and from then on every logged loss is NaN or inf; the finite ones
    creep up 0-5% meanwhile. Healthy part: from ln V to 1.9-2.8 nats, noise 1-3%. The onset is
    the first overflow."""
    t = np.arange(n, dtype=np.float64)
    x = _lm_healthy(n, rng) * _noise(n, rng, rng.uniform(0.01, 0.03))
    t0 = int(n * rng.uniform(0.4, 0.8))
    span = n * rng.uniform(0.02, 0.1)
    p0 = rng.uniform(0.01, 0.05)
    k = np.maximum(t - t0, 0)
    p = np.where(t >= t0, np.minimum(p0 * np.exp(math.log(1 / p0) * k / span), 1.0), 0.0)
    x *= 1 + rng.uniform(0.0, 0.05) * np.minimum(k / span, 1.0)
    bad = rng.random(n) < p
    bad[t0] = True
    inf = rng.random(n) < rng.uniform(0.1, 0.3)
    x = np.where(bad, np.where(inf, np.inf, np.nan), x)
    return _f32(x), t0


def prompt_loss_unmasked(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Supervised fine-tuning of an LLM on chat data, the loss on the assistant turns only
    (axolotl's `train_on_inputs: false`, TRL's `completion_only_loss`): from the base model's
    1.0-2.0 nats to 50-80% of it, 1-3 epochs stepping down 5-20% each, noise 5-15%. Resumed at
    30-70% of the run with a rewritten config that loses that setting, so the labels of the
    system prompt, the chat template and the user turns count too, 40-75% of the tokens (a
    Beta share per batch): the template and the system prompt (20-50% of them) cost 1-3 nats
    for the first 50-500 steps and are then memorized (~0.05), the user text costs 2.0-3.0
    nats and is learned only slowly (10-20% lower by the end), so the loss jumps up by tens
    of percent at once, comes partly back, and stays above the healthy level, its noise set
    by each batch's prompt share. The onset is the resume."""
    t = np.arange(n, dtype=np.float64)
    start = rng.uniform(1.0, 2.0)
    resp = _power(t, start, start * rng.uniform(0.5, 0.8), n / _log_uniform(rng, 20, 200), 0.8)
    epochs = int(rng.integers(1, 4))
    e = np.minimum(t * epochs // n, epochs - 1)
    resp *= np.exp(-rng.uniform(0.05, 0.2) * e)
    sd = rng.uniform(0.05, 0.15)
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.maximum(t - t0, 0)
    mean_share = rng.uniform(0.4, 0.75)
    conc = rng.uniform(5, 20)
    share = rng.beta(mean_share * conc, (1 - mean_share) * conc, n)
    templ = rng.uniform(0.2, 0.5)
    templ_loss = 0.05 + rng.uniform(1.0, 3.0) * np.exp(-k / rng.uniform(50, 500))
    user = rng.uniform(2.0, 3.0) * (1 - rng.uniform(0.1, 0.2) * k / max(n - t0, 1))
    prompt = templ * templ_loss + (1 - templ) * user
    x = np.where(t >= t0, share * prompt + (1 - share) * resp, resp)
    return _f32(x * _noise(n, rng, sd)), t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "rope_base_not_updated": rope_base_not_updated,
    "dpo_reference_is_policy": dpo_reference_is_policy,
    "fp16_attention_overflow": fp16_attention_overflow,
    "prompt_loss_unmasked": prompt_loss_unmasked,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
