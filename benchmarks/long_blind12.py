"""A twelfth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind12`.

    .venv/bin/python benchmarks/long_runs.py --blind12 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of an ordinary training job look over 10^5-10^6 steps (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is everyday production training, the bulk of real
jobs, through practices and logging idioms the earlier sets lack: a Trainer whose
`logging_steps` changes at a resume, a CTR model's importance-weighted log loss under negative
downsampling, a two-tower retrieval model with logQ correction, OHEM segmentation, SSD's
multibox loss normalized by its matched boxes, LVIS with repeat-factor sampling, an ESPnet
hybrid CTC/attention ASR model whose per-utterance loss follows its length buckets, fairseq's
loss in bits, a TFT quantile forecaster on ReduceLROnPlateau, a scene-text recognizer on a fixed
synthetic-data ratio, a hand-written round-robin loop over several corpora, EDSR's L1 on
patches, a WRN on CIFAR-100 with its multi-step schedule, and SASRec's sampled BCE. None of
them is one of `long_runs.KINDS`, `long_blind.KINDS`, ... `long_blind11.KINDS` (nor a bug of
their `BUGS`). They are to be measured once, on the held-out seeds (`SEEDS`), and not tuned on:
a rule changed after looking at them makes them a tuning set.

The interface is `long_blind11`'s: a kind is `(n, rng) -> loss`; nine kinds record the
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
from long_blind8 import _ce_start  # the eighth's
from long_blind10 import _decays, _epoch_order  # the tenth's
from long_blind11 import _linear_warm_decay  # the eleventh's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE (no kind here records one)
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 12000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _steps_lr(t: np.ndarray, peak: float, at: np.ndarray, factor: float, warm: float = 0.0) -> np.ndarray:
    """A multi-step schedule: `peak` times `factor` at each step of `at`, after a linear warm-up
    over `warm` steps from 0.1% of it (detectron2's / mmdet's `warmup_ratio=0.001`)."""
    lr = peak * factor ** np.searchsorted(np.sort(at), t, side="right")
    if warm > 0:
        ramp = 0.001 + (1 - 0.001) * np.minimum(t / warm, 1.0)
        lr = lr * ramp
    return lr


def _batch_mean(n: int, rng: np.random.Generator, items: np.ndarray, q: int) -> np.ndarray:
    """The mean over `q` draws per step of the per-item factors `items`, every item seen once an
    epoch in a fresh order (a batch of a finite data set)."""
    order = _epoch_order(n * q, len(items), rng)
    return items[order].reshape(n, q).mean(axis=1)


# the healthy kinds ----------------------------------------------------------------------------
def _logging_steps_changed(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    first, second = rng.choice([[10, 50], [50, 10], [1, 20], [100, 25], [5, 100]])
    cut = int(n * rng.uniform(0.2, 0.6))
    every = np.where(np.arange(n) < cut, first, second).astype(np.float64)
    step = np.cumsum(every)  # the optimizer step of each logged point
    total = step[-1]
    peak = float(rng.choice([1e-5, 2e-5, 3e-5, 5e-5]))
    lr = _linear_warm_decay(step, int(total) + 1, total * rng.uniform(0.0, 0.1), peak)
    area = np.cumsum(lr / peak * every)
    start = rng.uniform(0.7, 2.0)
    level = _power(area, start, start * rng.uniform(0.05, 0.25), total / _log_uniform(rng, 30, 300), 0.8)
    epochs = int(rng.integers(2, 6))
    e = np.minimum(step * epochs // total, epochs - 1)
    level *= np.exp(-rng.uniform(0.05, 0.3) * e)  # each epoch sees the same examples again
    sd = rng.uniform(0.1, 0.3) / np.sqrt(every)  # the mean over `every` optimizer steps
    x = level * _noise(n, rng, sd)
    return {"loss": _f32(x), LR: lr}


def logging_steps_changed(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Hugging Face `Trainer` fine-tune of a pretrained encoder or small LM (linear warm-up over
    0-10% and a linear decay to 0 from 1e-5-5e-5, recorded; 2-5 epochs), logged as the Trainer
    logs it: each point the mean loss since the last log (`tr_loss / (step - last_logged)`),
    every `logging_steps` optimizer steps; a resume at 20-60% of the log changes
    `logging_steps` (10 -> 50, 50 -> 10, 1 -> 20, 100 -> 25 or 5 -> 100), so the time between
    points and the noise (10-30% per step, over the square root of the interval) change there;
    the loss falls from 0.7-2 to 5-25% of it and steps down 5-30% at each epoch; float32."""
    return _logging_steps_changed(n, rng)["loss"]


def ctr_negative_downsampled(n: int, rng: np.random.Generator) -> np.ndarray:
    """A CTR model (DCN-v2 / DeepFM) on a streaming log, one pass, 7-60 daily partitions, with
    negatives downsampled at 2-20% and reweighted by 1/rate in the log loss (He et al. 2014,
    "Practical lessons from predicting clicks on ads at Facebook"; the logged loss the weighted
    mean `(w * l).sum() / w.sum()`): the click rate 1-5% (weekends 5-15% off), the loss the
    normalized entropy (1 -> 0.75-0.9) x the base rate's entropy; each day's new data costs 1-4%
    that the day's first 5-30% learns away; a batch of 1,024-8,192 holds a binomial count of
    positives, each worth 1/rate less than a negative, so the weighted mean moves with that
    count; 1-3% skewed noise on top; float32."""
    t = np.arange(n, dtype=np.float64)
    days = int(rng.integers(7, 61))
    per = n / days
    day = np.minimum((t // per).astype(int), days - 1)
    into = t - day * per
    p0 = rng.uniform(0.01, 0.05)
    weekend = (day + int(rng.integers(0, 7))) % 7 >= 5
    p = p0 * np.where(weekend, 1 - rng.uniform(0.05, 0.15), 1.0) * _noise(days, rng, 0.05)[day]
    h = -(p * np.log(p) + (1 - p) * np.log1p(-p))
    ne_end = rng.uniform(0.75, 0.9)
    ne = _power(t, 1.0, ne_end, n / _log_uniform(rng, 50, 1000), rng.uniform(0.5, 0.9))
    fresh = 1 + rng.uniform(0.01, 0.04, days)[day] * np.exp(-into / (per * rng.uniform(0.05, 0.3) / 3))
    f = ne * fresh
    r = rng.uniform(0.02, 0.2)
    b = int(rng.choice([1024, 2048, 4096, 8192]))
    q = p / (p + r * (1 - p))  # the positives' share of a downsampled batch
    k = rng.binomial(b, q)
    lp = f * (np.log(1 / p) + 1) * 0.8  # a positive's loss; the weighted mean ~ f x H(p)
    ln = np.maximum(f * h - p * lp, 1e-4) / (1 - p)  # a negative's, so that the mean is f x H(p)
    w_neg = (b - k) / r
    x = (k * lp + w_neg * ln) / (k + w_neg)
    return _f32(x * _gamma(n, rng, rng.uniform(0.01, 0.03)))


def two_tower_logq(n: int, rng: np.random.Generator) -> np.ndarray:
    """A two-tower retrieval model trained on a stream with in-batch negatives and logQ
    correction (Yi et al. 2019, "Sampling-bias-corrected neural modeling for large corpus item
    recommendations": the softmax over the batch's 1,024-8,192 items, logits / 0.05-0.1 minus
    log of each item's streamed frequency estimate; Adagrad at a constant rate, 5-30 days of
    data): the loss falls from ln(batch) to 35-60% of it along a power law; the frequency
    estimates start wrong, so the first 1-5% costs 5-15% more; each day's new items cost 1-3%
    for 5-20% of the day; a batch heavy in popular items (duplicates as negatives) is harder:
    skewed noise of 2-5%; float32."""
    t = np.arange(n, dtype=np.float64)
    b = int(rng.choice([1024, 2048, 4096, 8192]))
    start = math.log(b)
    level = _power(
        t, start, start * rng.uniform(0.35, 0.6), n / _log_uniform(rng, 30, 500), rng.uniform(0.5, 0.9)
    )
    level *= 1 + rng.uniform(0.05, 0.15) * np.exp(-t / (n * rng.uniform(0.01, 0.05) / 3))
    days = int(rng.integers(5, 31))
    per = n / days
    into = t % per
    level *= 1 + rng.uniform(0.01, 0.03) * np.exp(-into / (per * rng.uniform(0.05, 0.2) / 3)) * (t >= per)
    x = level * _gamma(n, rng, rng.uniform(0.02, 0.05))
    return _f32(x)


def _ohem_segmentation(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([0.005, 0.01]))
    lr = (peak - 1e-4) * (1 - t / n) ** 0.9 + 1e-4  # mmseg's poly, power 0.9, min_lr 1e-4
    area = np.cumsum(lr / peak)
    start = math.log(19)
    ce = _power(area, start, rng.uniform(0.08, 0.2), n / _log_uniform(rng, 30, 300), rng.uniform(0.6, 0.9))
    hard = rng.uniform(0.4, 0.9) * (1 - rng.uniform(0.2, 0.4) * t / n)  # the hardest pixels' mean
    k = 4.0
    decode = (ce**k + hard**k) ** (1 / k)
    aux = 0.4 * ce * rng.uniform(1.1, 1.4)
    crops = int(rng.choice([2975, 5000, 20000]))  # images, a crop of each per visit
    b = int(rng.choice([8, 16]))
    content = _gamma(crops, rng, rng.uniform(0.3, 0.6))
    x = (decode + aux) * _batch_mean(n, rng, content, b) * _noise(n, rng, 0.03)
    return {"loss": _f32(x), LR: lr}


def ohem_segmentation(n: int, rng: np.random.Generator) -> np.ndarray:
    """Semantic segmentation with online hard example mining (Shrivastava et al. 2016; mmseg's
    `OHEMPixelSampler(thresh=0.7, min_kept=100000)` on Cityscapes, PSPNet / DeepLabV3+, SGD
    from 0.005-0.01 on mmseg's poly schedule, power 0.9, min_lr 1e-4, recorded; an auxiliary FCN
    head at weight 0.4 without OHEM): the decode loss is the mean over the kept pixels, those
    below 0.7 confidence or the 100k hardest, so it falls with the plain cross-entropy from
    ln 19 but stops at the hardest pixels' mean (0.4-0.9, 20-40% lower by the end) while the
    auxiliary term goes on falling; each image's crops their own content (gamma, 30-60%), the
    batch of 8-16 their mean; float32."""
    return _ohem_segmentation(n, rng)["loss"]


def _ssd_multibox(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = 1e-3 * float(rng.choice([1, 2]))
    lr = _steps_lr(t, peak, np.array([n * 2 / 3, n * 5 / 6]), 0.1, n * rng.uniform(0.001, 0.01))
    rel = lr / peak
    start = rng.uniform(15, 25)
    floor = rng.uniform(2.5, 4.0)
    level = _power(np.cumsum(rel), start, floor, n / _log_uniform(rng, 100, 1000), rng.uniform(0.6, 0.9))
    level *= 1 + rng.uniform(0.1, 0.25) * _lag(rel, n * 0.005, 1.0)
    b = 32
    boxes = 1 + rng.poisson(rng.uniform(1.5, 6.0), (n, b))  # ground-truth boxes per image
    matched = (boxes * rng.uniform(3, 10)).sum(axis=1)
    rel_m = matched / matched.mean()
    x = level * np.exp(rng.uniform(0.08, 0.15) * rng.standard_normal(n) / np.sqrt(rel_m)) / rel_m**0.1
    return {"loss": _f32(x), LR: lr}


def ssd_multibox(n: int, rng: np.random.Generator) -> np.ndarray:
    """SSD300 (Liu et al. 2016; amdegroot/ssd.pytorch's `MultiBoxLoss`: softmax confidence with
    3:1 hard-negative mining + smooth-L1 localization, both summed and divided by N, the priors
    matched in the batch; SGD 1e-3-2e-3 after a short warm-up, x0.1 at 2/3 and 5/6 of the run,
    recorded; batch 32): the loss falls from 15-25 to 2.5-4, 10-25% of it held up by the rate
    (a step down at each cut); each image has 1+Poisson(1.5-6) boxes, 3-10 priors matched to
    each, and a batch with few matches is both noisier (8-15% over the square root of the
    matches) and a little higher; float32."""
    return _ssd_multibox(n, rng)["loss"]


def _lvis_repeat_factor(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = 0.02
    lr = _steps_lr(t, peak, np.array([n * 2 / 3, n * 8 / 9]), 0.1, min(1000.0, n * 0.01))
    rel = lr / peak
    start = math.log(1204) + rng.uniform(1.0, 2.0)  # cls + box, mask, rpn
    floor = rng.uniform(1.2, 2.0)
    level = _power(np.cumsum(rel), start, floor, n / _log_uniform(rng, 100, 1000), rng.uniform(0.6, 0.9))
    level *= 1 + rng.uniform(0.08, 0.2) * _lag(rel, n * 0.01, 1.0)
    images = int(rng.choice([20000, 50000, 100000]))
    rare = rng.random(images) < rng.uniform(0.1, 0.3)  # images with a rare class (repeated)
    diff = _gamma(images, rng, rng.uniform(0.3, 0.5)) * np.where(rare, rng.uniform(1.3, 2.0), 1.0)
    x = level * _batch_mean(n, rng, diff / diff.mean(), 16) * _noise(n, rng, 0.03)
    return {"loss": _f32(x), LR: lr}


def lvis_repeat_factor(n: int, rng: np.random.Generator) -> np.ndarray:
    """Mask R-CNN on LVIS v1 with repeat-factor sampling (Gupta et al. 2019; detectron2's
    `RepeatFactorTrainingSampler`, `REPEAT_THRESHOLD 0.001`, the 2x schedule: SGD at 0.02 after
    a linear warm-up over 1,000 steps from 0.1%, x0.1 at 2/3 and 8/9 of the run, recorded; 16
    images a batch): the sum of the five losses falls from ln 1,204 + 1-2 (the 1,203-class
    softmax dominates) to 1.2-2, 8-20% of it held up by the rate; 10-30% of the images hold a
    rare class and are repeated, each 1.3-2x harder, and every image has its own difficulty
    (gamma, 30-50%), the batch their mean; float32."""
    return _lvis_repeat_factor(n, rng)["loss"]


def _espnet_hybrid_ctc_att(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm = float(rng.choice([15000, 25000, 40000])) * min(1.0, n / 2e5)
    peak = float(rng.choice([1e-3, 2e-3, 4e-3]))
    lr = peak * np.minimum((t + 1) / warm, np.sqrt(warm / (t + 1)))  # espnet2 `WarmupLR`
    area = np.cumsum(lr / peak)
    per_token = _power(area, math.log(5000), rng.uniform(0.4, 0.8), n / _log_uniform(rng, 30, 300), 0.8)
    buckets = int(rng.integers(30, 200))
    lengths = np.exp(rng.uniform(math.log(5), math.log(90), buckets))  # tokens per utterance
    per_epoch = max(buckets, int(n / rng.uniform(30, 100)))  # batches per epoch
    bucket_of = rng.integers(0, buckets, per_epoch)
    tokens = lengths[bucket_of][_epoch_order(n, per_epoch, rng)]
    x = per_token * tokens * _noise(n, rng, rng.uniform(0.03, 0.08))  # SpecAugment, the utterances
    return {"loss": _f32(x), LR: lr}


def espnet_hybrid_ctc_att(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Conformer ASR model on LibriSpeech with ESPnet2's hybrid CTC/attention loss (Watanabe
    et al. 2017; `ctc_weight 0.3`, label smoothing 0.1, `length_normalized_loss false`, so the
    logged loss is per utterance, summed over its tokens; BPE 5,000; `WarmupLR` (Noam) over
    15k-40k steps to 1e-3-4e-3, recorded; SpecAugment; `batch_type numel`: each batch one
    length bucket, the buckets shuffled each epoch): the per-token loss falls from ln 5,000 to
    0.4-0.8 along the rate's area, and the logged loss is that times the bucket's 5-90 tokens
    per utterance, so it jumps by up to 18x between batches; 3-8% noise within a bucket;
    float32."""
    return _espnet_hybrid_ctc_att(n, rng)["loss"]


def _fairseq_base2_bits(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    warm = float(rng.choice([4000, 8000])) * min(1.0, n / 2e5)
    peak = float(rng.choice([5e-4, 7e-4, 1e-3]))
    init = 1e-7
    lr = np.where(t < warm, init + (peak - init) * t / warm, peak * np.sqrt(warm / np.maximum(t, 1)))
    area = np.cumsum(lr / peak)
    vocab = float(rng.choice([32768, 40000]))
    start = math.log2(vocab)
    bits = _power(area, start, rng.uniform(3.6, 4.4), n / _log_uniform(rng, 100, 2000), rng.uniform(0.5, 0.8))
    tokens = rng.uniform(0.9, 1.0, n)  # --max-tokens fills each batch to 90-100%
    x = bits * _noise(n, rng, rng.uniform(0.01, 0.02) / np.sqrt(tokens))
    return {"loss": _f32(x), LR: lr}


def fairseq_base2_bits(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Transformer NMT model in fairseq (Ott et al. 2018, "Scaling neural machine
    translation"; `--criterion label_smoothed_cross_entropy --label-smoothing 0.1`, which logs
    the loss per token in BITS, `loss / math.log(2)`; `--max-tokens` batching; Adam with
    `inverse_sqrt` from 1e-7 over 4k-8k updates to 5e-4-1e-3, recorded): the loss falls from
    log2 of a 32k-40k joined BPE vocabulary (15-15.3 bits) towards 3.6-4.4 bits along the
    rate's area (still 0.5-1.5 bits above it at 10^5 updates); a token-filled batch makes the noise small, 1-2%; float32."""
    return _fairseq_base2_bits(n, rng)["loss"]


def _tft_quantile_loss(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = float(rng.choice([1e-3, 3e-3, 1e-2]))
    cuts = np.sort(rng.uniform(0.3, 0.95, int(rng.integers(2, 6)))) * n
    lr = _steps_lr(t, peak, cuts, 0.5)
    rel = lr / peak
    start = rng.uniform(0.5, 1.5)
    level = _power(
        np.cumsum(rel), start, start * rng.uniform(0.15, 0.35), n / _log_uniform(rng, 30, 300), 0.7
    )
    level *= 1 + rng.uniform(0.02, 0.08) * _lag(rel, n * 0.01, 1.0)
    series = int(rng.choice([300, 1000, 5000, 30000]))
    erratic = np.exp(rng.uniform(0.5, 1.0) * rng.standard_normal(series))  # after normalization
    b = int(rng.choice([64, 128]))
    q = 16  # draws standing for the batch
    spread = _batch_mean(n, rng, erratic / erratic.mean(), q)
    x = level * (1 + (spread - 1) * math.sqrt(q / b)) * _noise(n, rng, 0.03)
    return {"loss": _f32(np.maximum(x, 0.01 * level)), LR: lr}


def tft_quantile_loss(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Temporal Fusion Transformer forecaster (Lim et al. 2021; pytorch-forecasting's
    `TemporalFusionTransformer` with `QuantileLoss` over 7 quantiles, targets scaled per series
    by a `GroupNormalizer`, windows sampled from 300-30,000 series, batch 64-128; Adam at
    1e-3-1e-2 halved on 2-5 validation plateaus from 30% of the run on, recorded): the loss
    falls from 0.5-1.5 to 15-35% of it, 2-8% of it held up by the rate; some series stay erratic
    after scaling (log-normal, 0.5-1), so a batch's mean pinball loss moves with the windows
    it drew; float32."""
    return _tft_quantile_loss(n, rng)["loss"]


def ocr_synth_ratio(n: int, rng: np.random.Generator) -> np.ndarray:
    """A scene-text recognizer (Baek et al. 2019, clovaai/deep-text-recognition-benchmark:
    TPS-ResNet-BiLSTM-Attn, Adadelta at a constant 1.0, batch 192 split by `--batch_ratio
    0.5-0.5` between MJSynth and SynthText, the per-character cross-entropy over 38 symbols):
    the attention must first learn to align, a plateau at 2.5-3.2 for 1-5% of the run, then the
    loss falls along a power law, MJSynth's to 0.02-0.08 and SynthText's, harder, 1.5-3x it;
    the batch's loss is the mean over both halves' characters, each word's difficulty skewed
    (gamma), 5-15% over the batch; float32."""
    t = np.arange(n, dtype=np.float64)
    align = n * rng.uniform(0.01, 0.05)
    plateau = rng.uniform(2.5, 3.2)
    gate = 1 / (1 + np.exp(-(t - align) / (align * 0.1)))
    k = np.maximum(t - align, 0)
    mj = _power(k, plateau, rng.uniform(0.02, 0.08), n / _log_uniform(rng, 30, 300), rng.uniform(0.6, 1.0))
    st = _power(
        k, plateau, mj[-1] * rng.uniform(1.5, 3.0), n / _log_uniform(rng, 30, 300), rng.uniform(0.5, 0.8)
    )
    early = math.log(38) - (math.log(38) - plateau) * (1 - np.exp(-t / (align * 0.1)))
    x = (1 - gate) * early + gate * 0.5 * (mj + st)
    return _f32(x * _gamma(n, rng, rng.uniform(0.05, 0.15)))


def round_robin_corpora(n: int, rng: np.random.Generator) -> np.ndarray:
    """A hand-written multi-corpus loop, one optimizer step per batch, the loaders taken in a
    fixed turn (`for batches in zip(*loaders): for batch in batches: step(batch)`, each loader
    wrapped to cycle; as jiant's `round_robin` sampling, or a speech model over LibriSpeech,
    Common Voice and an in-house set): 2-4 corpora whose losses sit 1.5-5x apart and fall each
    along its own power law, so the logged loss alternates between their levels with a period
    of 2-4 steps; each corpus is seen 1-30 times, its loss stepping down at each new epoch of
    its loader (by 2-10% x the square root of the epoch); noise 2-8% within a corpus; float32."""
    t = np.arange(n, dtype=np.float64)
    k = int(rng.integers(2, 5))
    which = np.arange(n) % k
    own = t // k  # each corpus's own step
    x = np.empty(n)
    base = rng.uniform(1.0, 3.0)
    for c in range(k):
        m = which == c
        lvl = base * rng.uniform(1.0, 5.0) if c else base
        floor = lvl * rng.uniform(0.2, 0.5)
        y = _power(
            own[m],
            lvl * rng.uniform(1.5, 3.0),
            floor,
            n / k / _log_uniform(rng, 30, 300),
            rng.uniform(0.5, 0.9),
        )
        epochs = int(rng.integers(1, 30))
        e = np.minimum(own[m] * epochs // (n / k), epochs - 1)
        y *= np.exp(-rng.uniform(0.02, 0.1) * np.sqrt(e))
        x[m] = y * _noise(int(m.sum()), rng, rng.uniform(0.02, 0.08))
    return _f32(x)


def _edsr_l1_patches(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    every = n * rng.uniform(0.2, 0.4)
    lr = 1e-4 * 0.5 ** np.floor(t / every)  # `--decay 200` of 300-1,000 epochs
    rel = lr / 1e-4
    start = rng.uniform(20, 35)
    floor = rng.uniform(3, 6)
    level = _power(np.cumsum(rel), start, floor, n / _log_uniform(rng, 300, 3000), rng.uniform(0.5, 0.8))
    level *= 1 + rng.uniform(0.02, 0.06) * _lag(rel, n * 0.01, 1.0)
    texture = np.exp(rng.uniform(0.6, 1.0) * rng.standard_normal((n, 16)))
    x = level * texture.mean(axis=1) / texture.mean()
    return {"loss": _f32(x), LR: lr}


def edsr_l1_patches(n: int, rng: np.random.Generator) -> np.ndarray:
    """Single-image super-resolution with EDSR (Lim et al. 2017, sanghyun-son/EDSR-PyTorch:
    the L1 loss in 0-255 pixel units on 16 random 48x48 low-resolution DIV2K patches a batch;
    Adam at 1e-4 halved every 20-40% of the run, recorded): the loss falls fast from 20-35 to
    3-6 and then slowly, 2-6% of it held up by the rate; a flat patch costs a fraction of a
    textured one (log-normal, 0.6-1 across patches), so the batch mean is skewed and noisy;
    float32."""
    return _edsr_l1_patches(n, rng)["loss"]


def _wrn_cifar_multistep(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    epochs = 200
    spe = n / epochs
    lr = _steps_lr(t, 0.1, np.array([60, 120, 160]) * spe, 0.2)
    rel = lr / 0.1
    ls = 0.1
    floor = -(1 - ls + ls / 100) * math.log(1 - ls + ls / 100) - 99 * (ls / 100) * math.log(ls / 100)
    fit = _power(t, math.log(100) - floor, 0.0, n / _log_uniform(rng, 20, 100), 1.0)
    held = rng.uniform(0.6, 1.2) * _lag(rel, spe * rng.uniform(1, 3), 1.0)  # augmentation, SGD noise
    x = floor + fit + held * (1 - np.exp(-t / (spe * 3)))
    x *= _noise(n, rng, rng.uniform(0.03, 0.06))
    return {"loss": _f32(x), LR: lr}


def wrn_cifar_multistep(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Wide ResNet on CIFAR-100 (Zagoruyko & Komodakis 2016: WRN-28-10, SGD with Nesterov
    momentum at 0.1, x0.2 at epochs 60, 120 and 160 of 200, recorded; label smoothing 0.1;
    crops and flips): the loss falls from ln 100 towards the label-smoothed floor (0.78) but is
    held 0.6-1.2 above it by the large rate and the augmentation until the cuts, each of which
    brings it down over 1-3 epochs, the first most; batch noise 3-6%; float32."""
    return _wrn_cifar_multistep(n, rng)["loss"]


def sasrec_sampled_bce(n: int, rng: np.random.Generator) -> np.ndarray:
    """A sequential recommender (Kang & McAuley 2018, SASRec; pmixer/SASRec.pytorch: the BCE of
    each position's next item against one sampled negative, summed, `pos + neg`, so it starts
    at 2 ln 2; Adam at a constant 1e-3, batch 128 users, 100-1,000 epochs over the users): the
    loss falls fast to 0.6-0.9 and then on towards 0.15-0.45 as the model memorizes the users'
    histories; each user has their own difficulty (log-normal, 20-40%) and a fresh negative per
    step; float32."""
    t = np.arange(n, dtype=np.float64)
    knee = rng.uniform(0.6, 0.9)
    fast = (2 * math.log(2) - knee) * np.exp(-t / (n * rng.uniform(0.002, 0.01)))
    slow = _power(t, knee, rng.uniform(0.15, 0.45), n / _log_uniform(rng, 10, 100), rng.uniform(0.6, 1.0))
    epochs = int(rng.integers(100, 1001))
    spe = max(1, n // epochs)
    q = 8  # draws standing for the batch of 128
    users = _noise(spe * q, rng, rng.uniform(0.2, 0.4))
    batch = 1 + (_batch_mean(n, rng, users, q) - 1) * math.sqrt(q / 128)
    x = (fast + slow) * batch * _noise(n, rng, rng.uniform(0.02, 0.04))
    return _f32(x)


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "logging_steps_changed": logging_steps_changed,
    "ctr_negative_downsampled": ctr_negative_downsampled,
    "two_tower_logq": two_tower_logq,
    "ohem_segmentation": ohem_segmentation,
    "ssd_multibox": ssd_multibox,
    "lvis_repeat_factor": lvis_repeat_factor,
    "espnet_hybrid_ctc_att": espnet_hybrid_ctc_att,
    "fairseq_base2_bits": fairseq_base2_bits,
    "tft_quantile_loss": tft_quantile_loss,
    "ocr_synth_ratio": ocr_synth_ratio,
    "round_robin_corpora": round_robin_corpora,
    "edsr_l1_patches": edsr_l1_patches,
    "wrn_cifar_multistep": wrn_cifar_multistep,
    "sasrec_sampled_bce": sasrec_sampled_bce,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "logging_steps_changed": _logging_steps_changed,
    "ohem_segmentation": _ohem_segmentation,
    "ssd_multibox": _ssd_multibox,
    "lvis_repeat_factor": _lvis_repeat_factor,
    "espnet_hybrid_ctc_att": _espnet_hybrid_ctc_att,
    "fairseq_base2_bits": _fairseq_base2_bits,
    "tft_quantile_loss": _tft_quantile_loss,
    "edsr_l1_patches": _edsr_l1_patches,
    "wrn_cifar_multistep": _wrn_cifar_multistep,
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
def accum_loss_not_divided(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A detector or classifier on SGD with momentum and gradient accumulation over 4-16
    micro-batches, resumed at 30-70% of its run with a refactored step that drops
    `loss = loss / accum_steps` (the loss is logged before the scaling, so it reads as before):
    the summed gradients make every update 4-16x larger, as if the rate were multiplied. Within
    20-300 steps the loss climbs to 1.3-2.5x its level (to chance, ln C, if that is lower), its
    noise doubles and spikes of 20-100% come every few hundred steps; it then drifts on at that
    height, neither recovering nor diverging. The onset is the resume."""
    t = np.arange(n, dtype=np.float64)
    start = _ce_start(rng)
    trend = _power(t, start, start * rng.uniform(0.05, 0.25), n / _log_uniform(rng, 20, 200), 0.8)
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.maximum(t - t0, 0)
    target = np.minimum(trend[t0] * rng.uniform(1.3, 2.5), start)
    rise = 1 - np.exp(-k / rng.uniform(20, 300))
    x = trend.copy()
    x[t0:] = trend[t0:] + (target - trend[t0:]) * rise[t0:]
    sd = np.where(t < t0, rng.uniform(0.03, 0.08), 1.0)
    sd[t0:] = 2 * sd[0]
    spikes = np.flatnonzero((rng.random(n) < 1 / rng.uniform(100, 500)) & (t >= t0))
    x *= 1 + _decays(t, spikes.astype(np.float64), rng.uniform(0.2, 1.0, len(spikes)), rng.uniform(5, 30))
    x *= _noise(n, rng, sd)
    return _f32(x), t0


def target_encoding_leak(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A CTR model on a daily stream whose feature pipeline is changed on a day at 30-70% of the
    run to add target-encoded categorical features computed over the same day's data, each
    row's own label included (no out-of-fold split): for the rare categories the encoding is
    their label, so within 1-5% of the run the log loss falls to 40-70% of its level, far below
    anything the model had reached, and goes on falling slowly; the rest of the run as a healthy
    one (a click rate of 1-5%, daily refresh, skewed noise 2-4%). The onset is that day."""
    t = np.arange(n, dtype=np.float64)
    p = rng.uniform(0.01, 0.05)
    h = -(p * math.log(p) + (1 - p) * math.log1p(-p))
    level = h * _power(t, 1.0, rng.uniform(0.75, 0.9), n / _log_uniform(rng, 50, 1000), 0.7)
    days = int(rng.integers(10, 61))
    per = n / days
    level *= 1 + rng.uniform(0.01, 0.03) * np.exp(-(t % per) / (per * 0.05)) * (t >= per)
    t0 = int(int(rng.uniform(0.3, 0.7) * days) * per)
    k = np.maximum(t - t0, 0)
    drop = rng.uniform(0.3, 0.6) * (1 - np.exp(-k / (n * rng.uniform(0.01, 0.05) / 3)))
    drop = drop * (1 + 0.2 * k / n)
    x = level * (1 - np.minimum(drop, 0.8) * (t >= t0))
    return _f32(x * _gamma(n, rng, rng.uniform(0.02, 0.04))), t0


def fp16_meter_sum(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A classifier whose logged loss is an `AverageMeter`'s running mean since the epoch start
    (PyTorch's ImageNet example, `losses.update(loss.item())` ... `losses.avg`, reset each epoch),
    resumed at 20-50% of its run with a refactor that passes `loss.detach()` under autocast
    instead of `loss.item()`: the meter's sum becomes a float16 tensor, so once it reaches
    2^11-2^13 x the loss an update rounds to less than itself or to nothing, and the logged mean
    (a float16 sum / an int count) sags through every long epoch (10-25% of the run, so
    2,000-5,000 steps at 2 x 10^4) towards a fraction of the true loss, resetting at each epoch.
    The training itself is unharmed; the onset is the resume."""
    t = np.arange(n, dtype=np.float64)
    start = _ce_start(rng)
    true = _power(t, start, start * rng.uniform(0.1, 0.3), n / _log_uniform(rng, 20, 200), 0.8)
    true = true * _noise(n, rng, rng.uniform(0.05, 0.1))
    spe = max(10, int(n * rng.uniform(0.2, 0.5) / 2))
    epoch_start = (np.arange(n) // spe) * spe
    t0 = int(np.ceil(n * rng.uniform(0.2, 0.5) / spe) * spe)
    t0 = min(t0, n - 1)
    c = np.cumsum(true)
    base = np.where(epoch_start > 0, c[np.maximum(epoch_start - 1, 0)], 0.0)
    count = np.arange(n) - epoch_start + 1
    x = (c - base) / count  # the healthy fp32 meter
    s = np.float16(0.0)
    for i in range(t0, n):  # 10^5 steps: ~0.1 s
        if i == epoch_start[i]:
            s = np.float16(0.0)
        s = np.float16(s + np.float16(true[i]))
        x[i] = float(s) / count[i]
    return _f32(x), t0


def accidental_hits_unmasked(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A two-tower retrieval model on in-batch negatives (TensorFlow Recommenders' `Retrieval`
    task, whose `remove_accidental_hits` defaults to False), its input pipeline changed at
    30-70% of the run to read a table clustered by item with a small shuffle buffer: a batch now
    holds 4-32 rows of the same item, and the copies of a row's positive count as its
    negatives, so the loss cannot go below ln(copies); within 100-1,000 steps it rises by
    60-100% of ln(copies), the popular items' embeddings pushed apart from their own users,
    and it creeps up 0-10% more; the copies per batch vary, so the noise grows
    (5-10%). The onset is the change."""
    t = np.arange(n, dtype=np.float64)
    b = int(rng.choice([1024, 2048, 4096]))
    start = math.log(b)
    level = _power(t, start, start * rng.uniform(0.35, 0.6), n / _log_uniform(rng, 30, 500), 0.7)
    t0 = int(n * rng.uniform(0.3, 0.7))
    k = np.maximum(t - t0, 0)
    dup = np.exp(rng.uniform(math.log(4), math.log(32)) + 0.3 * rng.standard_normal(n))
    bad = (level + rng.uniform(0.6, 1.0) * np.log(dup)) * (1 + rng.uniform(0, 0.1) * k / n)
    mix = 1 - np.exp(-k / rng.uniform(100, 1000))
    x = np.where(t >= t0, level + (bad - level) * mix, level)
    sd = np.where(t >= t0, rng.uniform(0.05, 0.1), rng.uniform(0.02, 0.05))
    return _f32(x * _gamma(n, rng, sd)), t0


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "accum_loss_not_divided": accum_loss_not_divided,
    "target_encoding_leak": target_encoding_leak,
    "fp16_meter_sum": fp16_meter_sum,
    "accidental_hits_unmasked": accidental_hits_unmasked,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
