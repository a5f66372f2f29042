"""A ninth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind9`.

    .venv/bin/python benchmarks/long_runs.py --blind9 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of an ordinary training job look over 10^5-10^6 steps (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is a mix of everyday supervised, fine-tuning and
generative training logs: a classifier trained with BCE under heavy augmentation, CTC speech
recognition with SpecAugment, segmentation on crops of varied content, pose heatmaps of tiny
magnitude, a probabilistic forecaster whose NLL crosses 0, a recommender refreshed every hour,
an LLM's vocabulary extended in two stages, a pruned LLM distilled, a batch-size doubling
pretraining with a final anneal, a VAE with free bits, a VQ-VAE with dead-code resets, a
StyleGAN2 discriminator with lazy R1, a DreamBooth fine-tune and a loss averaged over data-parallel
ranks with a slow one. None of them is one of `long_runs.KINDS`, `long_blind.KINDS`, ...
`long_blind8.KINDS` (nor a bug of their `BUGS`). They are to be measured once, on the held-out
seeds (`SEEDS`), and not tuned on: a rule changed after looking at them makes them a tuning set.

The interface is `long_blind8`'s: a kind is `(n, rng) -> loss`; seven kinds record the
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

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE (no kind here records one)
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 9000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _warm_cosine(t: np.ndarray, n: int, warm: float, peak: float, floor: float = 0.0) -> np.ndarray:
    """A linear warm-up over `warm` steps, then a cosine from `peak` to `floor` x peak."""
    into = np.clip((t - warm) / max(n - warm, 1.0), 0, 1)
    cos = peak * (floor + (1 - floor) * 0.5 * (1 + np.cos(np.pi * into)))
    return np.where(t < warm, peak * (t + 1) / max(warm, 1.0), cos)


def _lm_trend(n: int, rng: np.random.Generator) -> np.ndarray:
    """A healthy LM's noise-free loss: from ln V down a power law to 1.8-3.0."""
    t = np.arange(n, dtype=np.float64)
    start = math.log(float(rng.choice([32_000, 50_257, 128_256])))
    return _power(t, start, rng.uniform(1.8, 3.0), n / _log_uniform(rng, 50, 500), rng.uniform(0.5, 0.9))


# the healthy kinds ----------------------------------------------------------------------------
def _rsb_bce_augment(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([5e-3, 8e-3]))
    lr = _warm_cosine(t, n, n * rng.uniform(0.01, 0.05), peak, 1e-3)
    area = np.cumsum(lr / peak)
    # the per-class BCE: ln 2 with the logits near 0, to the negatives' floor at once, then
    # down along the rate's area, held up by mixup's soft targets
    fast = (math.log(2) - 0.01) * np.exp(-t / (n * rng.uniform(0.0005, 0.003)))
    floor = rng.uniform(0.0025, 0.005)
    slow = _power(
        area, rng.uniform(0.006, 0.01), floor, n / _log_uniform(rng, 20, 200), rng.uniform(0.6, 1.0)
    )
    level = fast + slow
    x = level * _gamma(n, rng, rng.uniform(0.04, 0.1))  # the mix ratio of each batch
    return {"loss": _f32(x), LR: lr}


def rsb_bce_augment(n: int, rng: np.random.Generator) -> np.ndarray:
    """ImageNet classification with the "ResNet strikes back" A1/A2 recipes (Wightman et al.
    2021, timm's `--bce-loss`): binary cross-entropy over the 1,000 classes (mean over classes
    and images) with mixup 0.1-0.2 / cutmix 1.0 and RandAugment rand-m7/m9, LAMB at 5e-3 or 8e-3,
    warmed up over 1-5%, a cosine to 1e-3 of it: the loss starts near ln 2 (the head's logits near 0)
    and falls within 0.05-0.3% of the run to ~0.01 as the negatives' logits go down, then slowly,
    along the rate's area, to 0.0025-0.005 (the soft mixed targets keep it up); skewed batch noise
    of 4-10% (the mix ratio of each batch); float32."""
    return _rsb_bce_augment(n, rng)["loss"]


def _nemo_ctc_zero_inf(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm = n * rng.uniform(0.01, 0.05)
    d_model = float(rng.choice([176, 256, 512]))
    scale = rng.uniform(2.0, 5.0)
    lr = scale * d_model**-0.5 * np.minimum((t + 1) ** -0.5, (t + 1) * warm**-1.5) * (10_000 / warm) ** -0.5
    rel = lr / lr.max()
    start = rng.uniform(4, 8)  # per target token, once the blank takes over
    floor = rng.uniform(0.1, 0.4) * rng.uniform(1.2, 1.6)  # SpecAugment keeps the train loss up
    area = np.cumsum(rel)
    level = _power(area, start, floor, n / _log_uniform(rng, 30, 300), rng.uniform(0.6, 1.0))
    x = level * _gamma(n, rng, rng.uniform(0.05, 0.15))
    batch = int(rng.choice([16, 32, 64]))
    bad = rng.binomial(batch, _log_uniform(rng, 1e-3, 1e-2), n)  # inf -> 0 (zero_infinity)
    return {"loss": _f32(x * (batch - bad) / batch), LR: lr}


def nemo_ctc_zero_inf(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Conformer-CTC speech recognizer trained with NVIDIA NeMo (Gulati et al. 2020; NeMo's
    conformer_ctc_bpe configs: the Noam schedule, scale x d_model^-0.5 x min(step^-0.5,
    step x warmup^-1.5), d_model 176-512, warm-up over 1-5%; SpecAugment with 2 frequency and
    10 time masks; CTC `reduction="mean_batch"`, each utterance's loss over its target length,
    `zero_infinity=True`): the loss per token from 4-8 down the rate's area to 0.12-0.65
    (SpecAugment holds it 20-60% above the clean fit); skewed batch noise of 5-15%; in 0.1-1% of
    the utterances the target is longer than the 4x-8x subsampled frames, their CTC is inf and
    is zeroed, so a batch of 16-64 holding one logs 1/batch lower; float32."""
    return _nemo_ctc_zero_inf(n, rng)["loss"]


def _seg_crop_content(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    lr0 = float(rng.choice([0.01, 0.02, 6e-5]))
    lr = lr0 * (1 - t / n) ** 0.9 + lr0 * 1e-4
    start = math.log(float(rng.choice([19, 150, 171])))
    level = _power(
        np.cumsum(lr / lr0), start, start * rng.uniform(0.05, 0.15), n / _log_uniform(rng, 20, 200), 0.8
    )
    batch = int(rng.choice([2, 4, 8]))
    a, b = rng.uniform(0.5, 2), rng.uniform(0.5, 2)
    content = rng.beta(a, b, (n, batch)).mean(axis=1)  # the share of hard, object-rich pixels
    mix = 0.3 + 1.4 * content / (a / (a + b))
    return {"loss": _f32(level * mix * _noise(n, rng, 0.05)), LR: lr}


def seg_crop_content(n: int, rng: np.random.Generator) -> np.ndarray:
    """Semantic segmentation trained per iteration on random crops (DeepLabV3+ / SegFormer on
    Cityscapes' 19, ADE20K's 150 or COCO-Stuff's 171 classes; SGD 0.01-0.02 or AdamW 6e-5 on the
    poly schedule, power 0.9, to 1e-4 of it), logged every iteration (not a 50-iteration mean):
    2-8 crops a GPU, each mostly road / sky / wall or full of small objects (its share of hard
    pixels a Beta(0.5-2, 0.5-2)), so the batch loss ranges over 0.3-1.7x its level; the level
    falls from ln C along the rate's area to 5-15% of it; 5% more noise; float32."""
    return _seg_crop_content(n, rng)["loss"]


def _hrnet_heatmap(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    lr0 = float(rng.choice([1e-3, 5e-4]))
    warm = n * rng.uniform(0.002, 0.01)
    cuts = np.array([170 / 210, 200 / 210]) * n
    lr = lr0 * 0.1 ** np.searchsorted(cuts, t, side="right") * np.minimum(1.0, 0.001 + t / warm)
    rel = lr / lr0
    start = rng.uniform(0.0015, 0.0025)
    floor = start * rng.uniform(0.25, 0.4)
    base = _power(np.cumsum(rel), start, floor, n / _log_uniform(rng, 50, 500), rng.uniform(0.5, 0.9))
    level = base * (1 + rng.uniform(0.05, 0.12) * _lag(rel, n * rng.uniform(0.002, 0.01), 1.0))
    return {"loss": _f32(level * _gamma(n, rng, rng.uniform(0.03, 0.08))), LR: lr}


def hrnet_heatmap(n: int, rng: np.random.Generator) -> np.ndarray:
    """Top-down human pose estimation with HRNet / SimpleBaseline (Sun et al. 2019; mmpose's
    COCO configs: Adam at 5e-4-1e-3, linear warm-up over 500 iterations, x0.1 at epochs 170 and
    200 of 210): `JointsMSELoss` on 17 Gaussian heatmaps, almost all pixels 0, so the loss is tiny:
    from 0.0015-0.0025 down the rate's area to 25-40% of it (mmpose prints ~0.0007), held up by
    5-12% at the higher rate, so it steps down a little at each decay; skewed noise of 3-8%;
    float32."""
    return _hrnet_heatmap(n, rng)["loss"]


def deepar_gaussian_nll(n: int, rng: np.random.Generator) -> np.ndarray:
    """A probabilistic forecaster (DeepAR, Salinas et al. 2020; GluonTS / PyTorch Forecasting
    with a Gaussian or Student-t output on mean-scaled series, Adam 1e-3): the negative
    log-likelihood per time step, from 1.0-2.0 (a wide predicted distribution) down a power law
    to -0.4-0.6, through 0 on most seeds, as the predicted scales shrink; the batch noise is
    additive, 0.03-0.12 (batches of 32-64 windows from series of different predictability),
    AR-correlated 0-0.6 (windows of one series come together)."""
    t = np.arange(n, dtype=np.float64)
    level = _power(t, rng.uniform(1.0, 2.0), rng.uniform(-0.4, 0.6), n / _log_uniform(rng, 20, 300), 0.8)
    sd = rng.uniform(0.03, 0.12)
    rho = rng.uniform(0, 0.6)
    z = rng.standard_normal(n)
    z[1:] = rho * z[:-1] + math.sqrt(1 - rho**2) * z[1:]  # one step of memory
    return _f32(level + sd * z)


def hourly_refresh(n: int, rng: np.random.Generator) -> np.ndarray:
    """A recommender trained in real time on the streaming log (Monolith, Liu et al. 2022;
    a Flink-fed online trainer): every hour's data (200-3,000 steps) comes from a drifted
    distribution (the hour's log-level is an AR(1) of spread 3-8% forgetting over 1-7 days, a
    day's cycle of 3-10% on top): at each hour the loss is 2-8% above the hour's level, the model having been fit to
    the last hour, and comes down over 5-30% of the hour; a log loss of 0.15-0.5 that has
    converged; 2-6% log-normal batch noise."""
    t = np.arange(n, dtype=np.float64)
    hour = int(rng.integers(200, 3001))
    h = (t // hour).astype(int)
    hours = h[-1] + 1
    rho = math.exp(-1 / rng.uniform(24, 168))  # the drift forgets over 1-7 days
    walk = np.exp(
        _lag(
            rng.normal(0, rng.uniform(0.03, 0.08), hours) / math.sqrt((1 - rho) / (1 + rho)),
            1 / (1 - rho),
            0.0,
        )
    )
    day = 1 + rng.uniform(0.03, 0.1) * np.sin(2 * np.pi * np.arange(hours) / 24 + rng.uniform(0, 6.3))
    hl = (walk / walk.mean() * day)[h]
    into = t - h * hour
    lag = 1 + rng.uniform(0.02, 0.08, hours)[h] * np.exp(-into / (hour * rng.uniform(0.05, 0.3)))
    return rng.uniform(0.15, 0.5) * hl * lag * _noise(n, rng, rng.uniform(0.02, 0.06))


def _vocab_extension(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    t1 = n * rng.uniform(0.2, 0.4)
    p1, p2 = _log_uniform(rng, 1e-4, 2e-4), _log_uniform(rng, 1e-4, 2e-4)
    w = n * 0.01
    lr1 = np.where(t < w, p1 * (t + 1) / w, p1)
    lr2 = _warm_cosine(t - t1, int(n - t1), n * 0.01, p2, 0.1)
    lr = np.where(t < t1, lr1, lr2)
    start = rng.uniform(4.0, 7.0)  # the new tokens' embeddings are the mean of the old ones
    mid = start * rng.uniform(0.55, 0.75)
    stage1 = _power(t, start, mid, n / _log_uniform(rng, 20, 200), 0.7)
    at = np.interp(t1, t, stage1)
    area2 = np.cumsum(np.where(t >= t1, lr / p2, 0.0))
    end = rng.uniform(1.8, 2.6)
    stage2 = end + (at - end) / (1 + area2 / (n / _log_uniform(rng, 20, 100))) ** 0.7
    level = np.where(t < t1, stage1, stage2)
    return {"loss": _f32(level * _t_noise(n, rng, rng.uniform(0.01, 0.03), rng.uniform(4, 8))), LR: lr}


def vocab_extension(n: int, rng: np.random.Generator) -> np.ndarray:
    """Adapting an LLM to a new language by extending its vocabulary (Chinese-LLaMA, Cui et al.
    2023: 20k new tokens, their embeddings initialized to the old ones' mean): stage 1 trains only
    the embeddings and the LM head, the transformer frozen (constant 1-2e-4 after a 1% warm-up):
    the loss falls slowly from 4-7 to 55-75% of it; at 20-40% of the run stage 2 adds LoRA on
    every layer (a new warm-up over 1%, a cosine to 10% of 1-2e-4), and the loss falls faster from
    where stage 1 left it, to 1.8-2.6; batch noise 1-3%, Student-t of 4-8 degrees; float32."""
    return _vocab_extension(n, rng)["loss"]


def _minitron_distill(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 1e-4, 3e-4)
    lr = _warm_cosine(t, n, n * rng.uniform(0.005, 0.02), peak, 4.5e-7 / 1e-4)
    start = rng.uniform(1.0, 4.0)  # the pruned model's KL to its own unpruned teacher
    mid = rng.uniform(0.25, 0.6)
    fast = (start - mid) * np.exp(-t / (n * rng.uniform(0.002, 0.02)))
    slow = _power(np.cumsum(lr / peak), mid, mid * rng.uniform(0.3, 0.6), n / _log_uniform(rng, 10, 100), 0.7)
    x = (fast + slow) * _gamma(n, rng, rng.uniform(0.02, 0.06))
    return {"loss": _f32(x), LR: lr}


def minitron_distill(n: int, rng: np.random.Generator) -> np.ndarray:
    """Recovering a pruned LLM by distillation (Minitron, Muralidharan et al. 2024; NeMo's
    logit-only KD, forward KL to the unpruned teacher's logits, cosine from 1-3e-4 to 4.5e-7 after
    a 0.5-2% warm-up): the KL starts at 1-4 nats (width or depth pruning without retraining) and
    recovers fast, within 0.2-2% of the run, to 0.25-0.6, then falls slowly along the rate's area
    to 30-60% of that; skewed noise of 2-6%; float32."""
    return _minitron_distill(n, rng)["loss"]


def _batch_doubling_anneal(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm = n * rng.uniform(0.005, 0.02)
    peak = _log_uniform(rng, 3e-4, 1e-3)
    cool = n * (1 - rng.uniform(0.1, 0.2))
    lr = np.where(t < warm, peak * (t + 1) / warm, peak)
    lr = np.where(t >= cool, peak * (0.01 + 0.99 * (1 - (t - cool) / (n - cool))), lr)
    doubles = int(rng.integers(2, 5))
    at = np.sort(rng.uniform(0.05, 0.6, doubles)) * n
    batch = 2.0 ** np.searchsorted(at, t, side="right")  # x the first batch
    tokens = np.cumsum(batch)
    start = math.log(float(rng.choice([50_257, 100_277, 151_936])))
    level = _power(
        tokens, start, rng.uniform(1.8, 2.6), n / _log_uniform(rng, 50, 500), rng.uniform(0.5, 0.8)
    )
    level *= 1 - rng.uniform(0.03, 0.08) * np.clip((t - cool) / (n - cool), 0, 1) ** 0.8
    x = level * _t_noise(n, rng, rng.uniform(0.01, 0.03) / np.sqrt(batch), rng.uniform(4, 8))
    return {"loss": _f32(x), LR: lr}


def batch_doubling_anneal(n: int, rng: np.random.Generator) -> np.ndarray:
    """LLM pretraining with a stepwise batch-size schedule and a final anneal (OLMo 2's and
    DeepSeek's batch warm-up done in 2-4 doublings at 5-60% of the run; Merrill et al. 2025,
    "Critical batch size"; a warmup-stable-decay rate of 3e-4-1e-3 decayed linearly to 1% over the
    last 10-20%): each doubling halves the steps per token, so the loss per step falls faster
    after it and its noise shrinks by sqrt 2 (from 1-3% at the first batch); the loss from ln V
    along the tokens seen to 1.8-2.6, 3-8% lower at the end of the anneal; float32."""
    return _batch_doubling_anneal(n, rng)["loss"]


def vae_free_bits(n: int, rng: np.random.Generator) -> np.ndarray:
    """A hierarchical image VAE with free bits (IAF-VAE, Kingma et al. 2016; NVAE, Vahdat & Kautz
    2020, on CIFAR-10 / ImageNet 32x32), the negative ELBO in bits per dimension: the
    reconstruction falls from 6-8 to 2.6-3.4 bits/dim along a power law, and the KL of each of its
    4-16 latent groups is clamped below at lambda (`max(KL_g, lambda)`, 0.05-0.2 bits/dim over all
    groups): while a group's KL is below lambda its term is the constant lambda / G, and from
    2-40% of the run on, group after group uses more than that (the KL term grows to 1.2-2x
    lambda); batch noise 1-3% (log-normal)."""
    t = np.arange(n, dtype=np.float64)
    recon = _power(t, rng.uniform(6, 8), rng.uniform(2.6, 3.4), n / _log_uniform(rng, 30, 300), 0.8)
    groups = int(rng.integers(4, 17))
    lam = rng.uniform(0.05, 0.2)
    kl = np.zeros(n)
    for _ in range(groups):
        on = n * _log_uniform(rng, 0.02, 0.4)
        grow = rng.uniform(0.2, 1.0) * np.clip((t - on) / (n * rng.uniform(0.05, 0.3)), 0, 1)
        kl += lam / groups * (1 + grow)
    return (recon + kl) * _noise(n, rng, rng.uniform(0.01, 0.03))


def vqvae_code_reset(n: int, rng: np.random.Generator) -> np.ndarray:
    """A VQ-VAE (van den Oord et al. 2017) trained with dead-code resets (Dhariwal et al. 2020,
    Jukebox's random restarts; SoundStream's and taming-transformers' variants: a code unused
    for a while is moved to a random encoder output): the total is reconstruction (MSE from 0.5-1
    to 0.02-0.08) + codebook + 0.25 x commitment, the two VQ terms first rising, from 0.01 to
    0.1-0.3 over 1-5% of the run as the encoder's outputs grow away from the codes, then falling
    to 20-50% of that; resets come at random (200-2,000 in the run, ever rarer: a rate falling as
    1/t), each lifting the VQ terms by 5-30% for 20-300 steps; skewed noise of 3-8%."""
    t = np.arange(n, dtype=np.float64)
    recon = _power(t, rng.uniform(0.5, 1.0), rng.uniform(0.02, 0.08), n / _log_uniform(rng, 30, 300), 0.9)
    top = rng.uniform(0.1, 0.3)
    rise = n * rng.uniform(0.01, 0.05)
    vq = 0.01 + (top - 0.01) * (1 - np.exp(-t / (rise / 3)))
    vq *= 1 - rng.uniform(0.5, 0.8) * (1 - 1 / (1 + np.maximum(t - rise, 0) / (n * 0.1)))
    count = int(rng.integers(200, 2001))
    times = np.sort((np.exp(rng.uniform(0, math.log(n), count)) - 1).astype(int))
    impulse = np.bincount(times, weights=rng.uniform(0.05, 0.3, count), minlength=n)[:n]
    tau = rng.uniform(20, 300)
    bump = _lag(impulse * tau, tau, 0.0)  # each reset's lift decays e-fold over tau steps
    return (recon + vq * (1 + bump) * 1.25) * _gamma(n, rng, rng.uniform(0.03, 0.08))


def stylegan2_lazy_r1(n: int, rng: np.random.Generator) -> np.ndarray:
    """A StyleGAN2 discriminator's loss as logged per minibatch (Karras et al. 2020, NVlabs'
    stylegan2-ada-pytorch: `Loss/D/loss` plus the lazy R1 penalty, gamma 1-10, applied every 16
    minibatches and weighted x16): softplus(D(fake)) + softplus(-D(real)) starts at 2 ln 2 and
    settles within 1-3% of the run at 0.3-1.0, drifting up by 0-30% as the generator gets better
    (the ADA augmentation keeping it from falling further), with an oscillation of 5-15% over
    0.1-1% of the run; every 16th value holds the R1 term too: 16 x gamma / 2 x the gradient
    penalty, 0.1-1.5x the loss, itself noisy (30-60%); 5-15% batch noise."""
    t = np.arange(n, dtype=np.float64)
    settle = rng.uniform(0.3, 1.0)
    level = settle + (2 * math.log(2) - settle) * np.exp(-t / (n * rng.uniform(0.003, 0.01)))
    level *= 1 + rng.uniform(0, 0.3) * t / n
    level *= 1 + rng.uniform(0.05, 0.15) * np.sin(2 * np.pi * t / (n * _log_uniform(rng, 0.001, 0.01)))
    x = level * _noise(n, rng, rng.uniform(0.05, 0.15))
    reg = np.arange(int(rng.integers(0, 16)), n, 16)
    x[reg] += level[reg] * rng.uniform(0.1, 1.5) * _gamma(len(reg), rng, rng.uniform(0.3, 0.6))
    return _f32(x)


def _dreambooth_flat(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    lr = np.full(n, float(rng.choice([1e-6, 2e-6, 5e-6])))
    t = np.arange(n, dtype=np.float64)
    level = rng.uniform(0.05, 0.2) * (1 - rng.uniform(0, 0.05) * t / n)
    batch = int(rng.choice([1, 2, 4])) * 2  # instance + class images (prior preservation)
    per = rng.lognormal(0, rng.uniform(0.8, 1.2), (n, batch))
    per /= per.mean()
    return {"loss": _f32(level * per.mean(axis=1)), LR: lr}


def dreambooth_flat(n: int, rng: np.random.Generator) -> np.ndarray:
    """A DreamBooth fine-tune of Stable Diffusion (Ruiz et al. 2023; diffusers'
    train_dreambooth.py with `--with_prior_preservation`, a constant 1e-6-5e-6; here run long, as
    a many-subject or style fine-tune is): the epsilon MSE
    of 1-4 instance images and as many class images, each at a random timestep, so the loss is
    dominated by the timesteps drawn (per image log-normal, spread 0.8-1.2: 0.01-1 at small and
    large timesteps) and shows no trend: a level of 0.05-0.2, falling by 0-5% over the run as the
    few instance images are learned; float32."""
    return _dreambooth_flat(n, rng)["loss"]


def rank_mean_slow_rank(n: int, rng: np.random.Generator) -> np.ndarray:
    """The loss logged by a metrics aggregator as the mean over 8 data-parallel ranks of the
    last loss each has reported (Ray Train / a Lightning `sync_dist=False` logger reporting
    per node, the reports asynchronous): each rank's own loss has 4-12% batch noise and its shard
    sits 1-4% from the others; one rank, on a slower node, reports only every 2-8 steps, so its
    eighth of the mean holds its value between reports; the common loss falls from ln C along
    a power law to 5-25% of it."""
    t = np.arange(n, dtype=np.float64)
    start = _ce_start(rng)
    trend = _power(t, start, start * rng.uniform(0.05, 0.25), n / _log_uniform(rng, 20, 200), 0.8)
    sd = rng.uniform(0.04, 0.12)
    offsets = 1 + rng.normal(0, rng.uniform(0.01, 0.04), 8)
    ranks = np.stack([trend * o * _noise(n, rng, sd) for o in offsets])
    every = int(rng.integers(2, 9))
    held = (np.arange(n) // every) * every
    ranks[7] = ranks[7][held]
    return ranks.mean(axis=0)


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "rsb_bce_augment": rsb_bce_augment,
    "nemo_ctc_zero_inf": nemo_ctc_zero_inf,
    "seg_crop_content": seg_crop_content,
    "hrnet_heatmap": hrnet_heatmap,
    "deepar_gaussian_nll": deepar_gaussian_nll,
    "hourly_refresh": hourly_refresh,
    "vocab_extension": vocab_extension,
    "minitron_distill": minitron_distill,
    "batch_doubling_anneal": batch_doubling_anneal,
    "vae_free_bits": vae_free_bits,
    "vqvae_code_reset": vqvae_code_reset,
    "stylegan2_lazy_r1": stylegan2_lazy_r1,
    "dreambooth_flat": dreambooth_flat,
    "rank_mean_slow_rank": rank_mean_slow_rank,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "rsb_bce_augment": _rsb_bce_augment,
    "nemo_ctc_zero_inf": _nemo_ctc_zero_inf,
    "seg_crop_content": _seg_crop_content,
    "hrnet_heatmap": _hrnet_heatmap,
    "vocab_extension": _vocab_extension,
    "minitron_distill": _minitron_distill,
    "batch_doubling_anneal": _batch_doubling_anneal,
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
def sampler_set_epoch_lost(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A classifier trained with a `DistributedSampler(shuffle=True)` whose loop, rewritten at a
    resume at 30-70% of the run, no longer calls `sampler.set_epoch(epoch)`: the sampler's seed
    stays that of epoch 0, so every epoch (300-3,000 steps) reads the same batches in the same
    order. Each batch's own difficulty (5-20%, log-normal) comes back at the same step of every
    epoch, an epoch-periodic pattern, and the model fits the order: over 1-4 epochs the loss falls
    10-30% below where it was (too fast), then stays flat (the healthy decline stops: the model
    no longer generalizes); 2-6% fresh noise (augmentation). The onset is the resume."""
    t = np.arange(n, dtype=np.float64)
    start = _ce_start(rng)
    trend = _power(t, start, start * rng.uniform(0.05, 0.2), n / _log_uniform(rng, 10, 100), 0.8)
    x = trend * _noise(n, rng, rng.uniform(0.05, 0.2)) * _noise(n, rng, rng.uniform(0.02, 0.06))
    t0 = int(n * rng.uniform(0.3, 0.7))
    per = int(rng.integers(300, 3001))
    k = np.arange(n - t0)
    diff = _noise(per, rng, rng.uniform(0.05, 0.2))[k % per]
    fall = 1 - rng.uniform(0.1, 0.3) * (1 - np.exp(-k / (per * rng.uniform(1, 4))))
    x[t0:] = trend[t0] * fall * diff * _noise(n - t0, rng, rng.uniform(0.02, 0.06))
    return x, t0


def decay_on_norms(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """An LM resumed at 30-70% of its run with new parameter groups (a refactored optimizer
    builder that drops the `no_decay` list and passes a weight decay of 0.5-5 meant for another
    model): from the resume, AdamW's decoupled decay lr x wd shrinks the LayerNorm gains and the
    embeddings by e every 1/(lr x wd) steps (5-30% of the rest of the run here), while the
    gradients fight back: the loss rises slowly, at first as the square of the time since, then
    faster, towards the unigram level (60-85% of ln V), reaching 20-70% of the way by the end;
    batch noise 1-4% (Student-t). The onset is the resume."""
    trend = _lm_trend(n, rng)
    x = trend * _t_noise(n, rng, rng.uniform(0.01, 0.04), rng.uniform(4, 8))
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n - t0, dtype=np.float64)
    tau = (n - t0) * rng.uniform(0.05, 0.3)
    shrink = 1 - np.exp(-((k / tau) ** 2) * rng.uniform(0.05, 0.3))
    reach = rng.uniform(0.2, 0.7) * shrink / max(shrink[-1], 1e-9)
    unigram = float(trend[0]) * rng.uniform(0.6, 0.85)
    x[t0:] *= 1 + reach * (unigram / trend[t0:] - 1)
    return x, t0


def scheduler_per_epoch(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A fine-tune whose loop, refactored at an epoch boundary at 20-60% of the run, builds its
    `get_cosine_schedule_with_warmup(optimizer, warmup, total)` inside the epoch loop: every
    epoch (1-5% of the run) the rate warms up again from 0 over its 100-2,000 steps and then
    sits near its peak (the cosine's total is the whole run, so an epoch decays it by a few %):
    instead of decaying, each epoch starts with a dip of the rate, then the loss bumps up by
    3-12% as the rate gets back to its peak, the same every epoch, and the level stops falling
    (it stays 5-20% above the healthy decayed run, which the bumps do not approach); skewed batch
    noise of 2-8%. The onset is the first re-created scheduler."""
    t = np.arange(n, dtype=np.float64)
    start = rng.uniform(1.5, 3.0)
    trend = _power(t, start, start * rng.uniform(0.2, 0.5), n / _log_uniform(rng, 20, 200), 0.8)
    x = trend * _gamma(n, rng, rng.uniform(0.02, 0.08))
    per = int(n * rng.uniform(0.01, 0.05))
    t0 = per * int(rng.integers(int(0.2 * n / per) + 1, int(0.6 * n / per) + 1))
    warm = min(int(rng.integers(100, 2001)), per // 2)
    k = np.arange(n - t0, dtype=np.float64)
    into = k % per
    rel = np.minimum(1.0, (into + 1) / warm)
    held = _lag(rel, warm * rng.uniform(0.2, 1.0), 1.0)
    stay = 1 + rng.uniform(0.05, 0.2) * np.minimum(k / (per * 2), 1)
    x[t0:] = trend[t0] * stay * (1 + rng.uniform(0.03, 0.12) * (held - 1 + 0.5)) * x[t0:] / trend[t0:]
    return x, t0


def scaled_loss_logged(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A mixed-precision run whose logging line, refactored at 30-70% of the run, reads the
    loss after `scaler.scale(loss)` (`loss = scaler.scale(loss); loss.backward(); log(loss.item())`):
    the logged value is the loss times the `GradScaler`'s current scale, 2^16 at a fresh scaler
    (on half the seeds the scaler's state was not restored at the resume) or the restored 2^10-2^18:
    it jumps by that factor at once, then doubles every `growth_interval` (2,000 steps) without an
    overflow and halves at each overflow (every 500-20,000 steps at random), a staircase of factors
    of 2 on top of the healthy loss (training itself is unchanged). The onset is the refactor."""
    t = np.arange(n, dtype=np.float64)
    start = _ce_start(rng)
    trend = _power(t, start, start * rng.uniform(0.05, 0.25), n / _log_uniform(rng, 20, 200), 0.8)
    x = trend * _noise(n, rng, rng.uniform(0.03, 0.1))
    t0 = int(n * rng.uniform(0.3, 0.7))
    log2 = 16.0 if rng.random() < 0.5 else float(rng.integers(10, 19))
    ceiling = log2 + float(rng.integers(0, 4))  # where the gradients overflow in fp16
    gap = _log_uniform(rng, 4_000, 40_000)  # rarer than the growth, as a healthy scaler's
    over = rng.random(n - t0) < 1 / gap  # an overflow of a rare batch
    scale = np.empty(n - t0)
    since = 0
    for i in range(n - t0):  # 10^5 steps: ~0.05 s
        since += 1
        if over[i] or log2 > ceiling:
            log2, since = log2 - 1, 0
        elif since >= 2000:
            log2, since = log2 + 1, 0
        scale[i] = 2.0**log2
    x[t0:] *= scale
    return _f32(x), t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "sampler_set_epoch_lost": sampler_set_epoch_lost,
    "decay_on_norms": decay_on_norms,
    "scheduler_per_epoch": scheduler_per_epoch,
    "scaled_loss_logged": scaled_loss_logged,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
