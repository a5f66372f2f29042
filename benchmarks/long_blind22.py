"""A twenty-second blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind22`.

    .venv/bin/python benchmarks/long_runs.py --blind22 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of a training job look over 10^5-10^6 logged values (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is what the logging of production and distributed
jobs does to a healthy loss, through mechanisms the earlier sets lack: a progress bar's sliding
window cleared at every epoch; a resume that switches the loss from per-token to per-sequence
normalisation (or back); an elastic job whose rank 0 logs its own batch and its own validation
shard while nodes come and go; every rank appending to one log file through its own buffer;
streaming workers that each read their own shards, taken in turn; DiLoCo's outer steps every
H inner steps; resumes that replay the epoch's first batches (`ignore_data_skip`); a sidecar
evaluator's points landing in the training stream; a streaming shuffle buffer refilled at every
restart; context parallelism whose rank 0 holds each sequence's first chunk; a cosine stretched
at a resume to train longer; a Prometheus gauge scraped on a timer; token-budget batches that
one long document fills; and a running loss that restarts from zero at every launch. None of
them is one of `long_runs.KINDS`, `long_blind.KINDS`, ... `long_blind21.KINDS` (nor a bug of
their `BUGS`). They are to be measured once, on the held-out seeds (`SEEDS`), and not tuned on:
a rule changed after looking at them makes them a tuning set.

The interface is `long_blind21`'s: a kind is `(n, rng) -> loss`, each value one logged point;
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
from long_blind3 import _lag  # the third's
from long_blind4 import _f32, _gamma  # the fourth's
from long_blind11 import _slow_walk  # the eleventh's
from long_blind17 import _area  # the seventeenth's
from long_blind20 import _blow_up, _learned  # the twentieth's
from long_blind21 import _to_end  # the twenty-first's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE: the mode of each step
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 22000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _cosine_rate(s: np.ndarray, total: float, warm: float, peak: float, final: float) -> np.ndarray:
    """A linear warm-up over `warm` steps to `peak`, then a cosine to `final` x `peak` at step
    `total` (held there after it), at the steps `s`."""
    c = np.clip((s - warm) / max(total - warm, 1.0), 0.0, 1.0)
    cos = final + (1 - final) * 0.5 * (1 + np.cos(np.pi * c))
    return peak * np.where(s < warm, (s + 1) / max(warm, 1.0), cos)


def _linear_rate(s: np.ndarray, total: float, warm: float, peak: float) -> np.ndarray:
    """The Hugging Face `Trainer`'s default: a linear warm-up over `warm` steps, then a linear
    decay to 0 at step `total`."""
    down = np.clip((total - s) / max(total - warm, 1.0), 0.0, 1.0)
    return peak * np.where(s < warm, (s + 1) / max(warm, 1.0), down)


def _held(rate: np.ndarray, tau: float) -> np.ndarray:
    """The share of its peak the rate holds, as the loss feels it (a lag of `tau` steps): what
    multiplies the part of the loss a high rate keeps up (the noise floor of SGD)."""
    r = rate / rate.max()
    return _lag(r, tau, float(r[0]))


def _epoch_stair(x: np.ndarray, drop: float, width: float = 0.01) -> np.ndarray:
    """A multi-epoch fine-tune's staircase, as a factor: from the second epoch on the examples
    come round again and the loss steps down by `drop` at each epoch's start (within `width`
    of an epoch)."""
    e = np.floor(x)
    expo = np.where(e >= 1, e - 1 + np.clip((x - e) / width, 0.0, 1.0), 0.0)
    return (1 - drop) ** expo


# the healthy kinds ----------------------------------------------------------------------------
def _window_mean(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    per = int(min(_log_uniform(rng, 500, 10_000), n / 3))  # steps an epoch
    k = int(rng.choice([20, 50, 100, 200, 500]))  # the deque's maxlen
    t = np.arange(n, dtype=np.float64)
    classes = int(rng.choice([100, 1000]))
    gpus = int(rng.choice([8, 16, 32, 64]))
    peak = 5e-4 * gpus * 64 / 512  # AdamW at 5e-4 x batch / 512, 64 images a GPU
    rate = _cosine_rate(t, n, per * rng.uniform(0.5, 5.0), peak, 0.0)
    start = math.log(classes)
    base = _to_end(
        _area(rate), start, start * rng.uniform(0.1, 0.35), n * rng.uniform(0.01, 0.1), rng.uniform(0.5, 0.9)
    )
    base = base * (1 + rng.uniform(0.1, 0.3) * _held(rate, n * rng.uniform(0.002, 0.01)))
    raw = base * _gamma(n, rng, rng.uniform(0.8, 1.5) / math.sqrt(64 * gpus))  # all-reduced
    cs = np.concatenate([[0.0], np.cumsum(raw)])
    i = np.arange(n)
    lo = np.maximum(i - k + 1, (i // per) * per)  # the window, emptied at each epoch's start
    logged = (cs[i + 1] - cs[lo]) / (i + 1 - lo)
    return {"loss": _f32(logged), LR: rate}


def window_mean_epoch_reset(n: int, rng: np.random.Generator) -> np.ndarray:
    """A hand-written DDP image classifier (timm-style: 8-64 GPUs, 64 images each, AdamW at
    5e-4 x batch / 512, a warm-up of 0.5-5 epochs and a per-step cosine to 0, recorded; 100 or
    1,000 classes; epochs of 500-10,000 steps) whose loop keeps `window = deque(maxlen=k)` of
    the all-reduced step loss and logs `sum(window) / len(window)` at every step for its
    progress bar and its tracker, the deque made anew at each epoch's start (k = 20-500). So
    each value is the mean of the last k steps, except the first k of each epoch: the epoch's
    first value is one step's loss, the next the mean of two, and so on, the noise shrinking
    from the global batch's (80-150% over the square root of its images, skewed) as the
    window fills. The
    loss falls from ln C along the rate's area to 10-35% of it, 10-30% of it held up by the
    rate; float32."""
    return _window_mean(n, rng)["loss"]


def _norm_stats(rng: np.random.Generator, batch: int) -> tuple[float, float, float]:
    """For batches of `batch` sequences of log-normal lengths whose per-token loss is higher on
    short ones: the per-sequence mean's ratio to the per-token mean, and the spread of each."""
    med, spread = rng.uniform(100, 600), rng.uniform(0.6, 1.0)
    gamma, sd = rng.uniform(0.03, 0.12), rng.uniform(0.25, 0.45)
    reps = max(200, 400_000 // batch)
    lens = med * np.exp(spread * rng.standard_normal((reps, batch)))
    own = (lens / med) ** -gamma * np.exp(sd * rng.standard_normal((reps, batch)) - sd**2 / 2)
    per_token = (lens * own).sum(1) / lens.sum(1)
    per_seq = own.mean(1)
    mean = per_token.mean()
    return per_seq.mean() / mean, per_token.std() / mean, per_seq.std() / per_seq.mean()


def _norm_switch(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    epochs = int(rng.choice([1, 2, 3, 3, 4]))
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 1e-5, 2e-4)
    rate = _linear_rate(t, n, n * rng.uniform(0.0, 0.05), peak)
    start = rng.uniform(1.0, 2.2)
    base = _to_end(
        _area(rate), start, start * rng.uniform(0.45, 0.75), n * rng.uniform(0.01, 0.1), rng.uniform(0.5, 0.9)
    )
    x = np.minimum(t * epochs / n, epochs - 1e-9)
    base = base * _epoch_stair(x, rng.uniform(0.05, 0.2))
    ratio, cv_token, cv_seq = _norm_stats(rng, int(rng.choice([32, 64, 128, 256])))
    at = int(n * rng.uniform(0.3, 0.7))
    to_seq = rng.random() < 0.6  # else per-sequence before the resume, per-token after it
    seq = (t >= at) == to_seq
    level = base * np.where(seq, ratio, 1.0)
    loss = level * _gamma(n, rng, np.where(seq, cv_seq, cv_token))
    return {"loss": _f32(loss), LR: rate}


def loss_norm_switch_resume(n: int, rng: np.random.Generator) -> np.ndarray:
    """Supervised fine-tuning of an LLM on chat data (1-4 epochs, 32-256 sequences a step,
    AdamW at 1e-5-2e-4 with a 0-5% warm-up and a linear decay to 0, recorded), resumed 30-70%
    of the way through under a new trainer version or config that normalises the loss another
    way: per token (the mean over all the step's response tokens) before and per sequence (each
    sequence's mean token loss, averaged over the sequences) after, or the reverse on 40% of
    the seeds, as verl's `loss_agg_mode` ("token-mean", "seq-mean-token-mean") and the
    Transformers 4.46 gradient-accumulation rework change it. Response lengths are log-normal
    (a median of 100-600 tokens, spread 0.6-1.0) and short responses cost more per token (x
    (length / median)^-(0.03-0.12): 2-9% more at half the length), so the per-sequence value sits 1-13% above the per-token
    one and is noisier (short sequences weigh as much as long ones): the logged level and its
    noise step at the resume, and nothing else changes. The per-token loss falls from 1.0-2.2
    along the rate's area to 45-75% of it and steps down 5-20% at each new epoch; float32."""
    return _norm_switch(n, rng)["loss"]


def _elastic(n: int, rng: np.random.Generator, lr_twice: bool = False) -> tuple[dict[str, np.ndarray], int]:
    b = int(rng.choice([32, 64, 128]))  # images a GPU
    nodes_max = int(rng.integers(4, 17))
    nodes_min = max(1, nodes_max // 2)  # torchrun --nnodes=MIN:MAX
    classes = int(rng.choice([100, 1000]))
    epochs = int(rng.integers(30, 121))
    val_share = rng.uniform(0.02, 0.05)  # the validation set against the training set
    cuts = np.sort(rng.uniform(0, epochs, int(rng.integers(3, 16))))  # re-rendezvous, in epochs
    onset_epoch = math.inf
    if lr_twice:
        onset_epoch = epochs * rng.uniform(0.3, 0.7)
        cuts = np.sort(np.append(cuts, onset_epoch))
    nodes = np.concatenate([[nodes_max], rng.integers(nodes_min, nodes_max + 1, len(cuts))])
    w_ref = 8 * nodes_max
    # steps an epoch at the full world, so that the run fills about n points
    grid = np.linspace(0, epochs, 2_000, endpoint=False)
    inv = (w_ref / (8 * nodes[np.searchsorted(cuts, grid, side="right")])).mean() * epochs
    s_ref = max(20.0, n / ((1 + val_share) * inv))
    world, xs, modes = [], [], []
    x, total, e = 0.0, 0, 0
    while total < n:
        while x < e + 1 and total < n:
            c = int(np.searchsorted(cuts, x, side="right"))
            w = 8 * int(nodes[c])
            stop = min(e + 1.0, cuts[c] if c < len(cuts) else math.inf)
            dx = w / (w_ref * s_ref)  # epochs a step
            k = max(1, int(math.ceil((stop - x) / dx - 1e-9)))
            world.append(np.full(k, w))
            xs.append(x + dx * np.arange(k))
            modes.append(np.full(k, TRAIN))
            x = stop
            total += k
        w = 8 * int(nodes[int(np.searchsorted(cuts, x - 1e-9, side="right"))])
        v = max(1, int(round(val_share * s_ref * w_ref / w)))  # rank 0's batches of its val shard
        world.append(np.full(v, w))
        xs.append(np.full(v, x))
        modes.append(np.full(v, EVAL))
        total += v
        e += 1
    world_a = np.concatenate(world)[:n]
    x_a = np.concatenate(xs)[:n]
    mode = np.concatenate(modes)[:n]
    sched = np.where(
        x_a < 5, (x_a + 1 / s_ref) / 5, 0.5 * (1 + np.cos(np.pi * np.clip((x_a - 5) / (epochs - 5), 0, 1)))
    )
    rate = 0.1 * world_a * b / 256 * sched  # Goyal et al.'s linear scaling, recomputed at each rendezvous
    tr = mode == TRAIN
    dx_a = np.where(tr, world_a / (w_ref * s_ref), 0.0)
    area = np.cumsum(sched * dx_a)  # epochs at the peak rate
    start, end = math.log(classes), math.log(classes) * rng.uniform(0.15, 0.35)
    base = _to_end(area, start, end, rng.uniform(0.3, 3.0), rng.uniform(0.5, 0.9))
    h = rng.uniform(0.2, 0.5)
    held = _lag(sched, s_ref * rng.uniform(0.2, 1.0), float(sched[0]))
    train_level = base * (1 + h * held)
    cv = rng.uniform(0.8, 1.5) / math.sqrt(b)
    loss = train_level * _gamma(n, rng, cv)
    gap = rng.uniform(0.85, 1.15)  # the validation loss against training's (augmentations off)
    shard = {int(w): float(np.exp(rng.normal(0, rng.uniform(0.01, 0.03)))) for w in np.unique(world_a)}
    batch_bias = np.exp(0.07 * rng.standard_normal(max(1, int(val_share * s_ref * w_ref / 8)) + 1))
    ev = ~tr
    first = ev & ~np.r_[False, ev[:-1]]
    pos = np.arange(n) - np.maximum.accumulate(np.where(first, np.arange(n), 0))
    shard_a = np.array([shard[int(w)] for w in world_a[ev]])
    idx = np.minimum(pos[ev], len(batch_bias) - 1)
    loss[ev] = base[ev] * gap * shard_a * batch_bias[idx] * (1 + 0.1 * h * held[ev])
    onset = n
    if lr_twice:  # from the rendezvous on the already scaled rate is multiplied by the GPUs again
        onset = min(int(np.searchsorted(x_a, onset_epoch)), n - 1)
        after = np.arange(n) >= onset
        rate = np.where(after, rate * world_a, rate)
        q = np.where(after, rate / (0.1 * world_a * b / 256), 0.0)  # times the intended peak
        relearn = np.cumsum(np.where(after & (q < 3) & tr, sched * dx_a, 0.0))
        chance = start * (1 + 0.02 * _slow_walk(n, rng, 50.0))
        broken = _power(relearn, start * 1.02, start * rng.uniform(0.2, 0.4), rng.uniform(0.1, 0.5), 0.7)
        broken = np.where(relearn > 0, broken, chance)
        k = np.maximum(np.arange(n) - onset, 0)
        over = (
            rng.uniform(0.1, 0.6) * np.minimum(k / rng.uniform(1, 5), 1.0) * np.exp(-k / rng.uniform(20, 200))
        )
        spikes = 1 + (rng.random(n) < 0.01) * rng.pareto(2.5, n) * 0.3
        hit = after * _gamma(n, rng, cv * 1.5) * spikes
        loss = np.where(after, broken * (1 + over) * hit, loss)
    return {"loss": _f32(loss), LR: rate, MODE: mode}, onset


def _elastic_rank0(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _elastic(n, rng)[0]


def elastic_rank0_local(n: int, rng: np.random.Generator) -> np.ndarray:
    """An image classifier trained on spot nodes with TorchElastic (`torchrun
    --nnodes=MIN:MAX`, 4-16 nodes of 8 GPUs, MIN half of MAX; 30-120 epochs, 100 or 1,000
    classes) that logs as many scripts do, `if rank == 0: writer.add_scalar("loss",
    loss.item())`: rank 0's OWN batch of 32-128 images, not the all-reduced mean, so the noise
    is one GPU's (80-150% over the square root of its batch, skewed). 3-15 times nodes leave or
    join (a re-rendezvous, after a checkpoint taken on the notice, so no step is lost): each GPU
    keeps its batch, so the global batch moves with the world, the rate with it (Goyal et al.'s
    0.1 x batch / 256, 5 warm-up epochs and a cosine, recomputed at each rendezvous; recorded)
    and the steps an epoch against it, while the loss per epoch goes on as before, from ln C
    to 15-35% of it, 20-50% of it held up by the rate. After each epoch rank 0 logs the
    validation batches of ITS shard (`DistributedSampler(shuffle=False)`: indices rank::world),
    so each pass has as many steps as the world allows and its level moves by 1-3% with the
    world size (EVAL steps that save their loss, 2-5% of the epoch, 0.85-1.15x training's
    level); float32."""
    return _elastic_rank0(n, rng)["loss"]


def _every_rank(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    ranks = int(rng.choice([2, 4, 8]))
    m = -(-n // ranks)  # optimizer steps
    epochs = int(rng.integers(2, 11))
    t = np.arange(m, dtype=np.float64)
    rate = _linear_rate(t, m, m * rng.uniform(0.0, 0.1), _log_uniform(rng, 1e-5, 5e-5))
    classes = int(rng.choice([2, 3, 5, 20]))
    start = math.log(classes)
    base = _to_end(
        _area(rate), start, start * rng.uniform(0.1, 0.4), m * rng.uniform(0.005, 0.05), rng.uniform(0.5, 0.9)
    )
    base = base * _epoch_stair(np.minimum(t * epochs / m, epochs - 1e-9), rng.uniform(0.1, 0.3))
    cv = rng.uniform(1.5, 3.0) / math.sqrt(int(rng.choice([16, 32, 64])))  # one rank's batch
    per_rank = base[:, None] * _gamma(m * ranks, rng, cv).reshape(m, ranks)
    buffered = rng.random() < 0.5
    if buffered:  # each rank's CSV buffer flushes every `block` lines: blocks of the same steps
        block = int(rng.integers(150, 601))
        parts, rates = [], []
        for lo in range(0, m, block):
            hi = min(lo + block, m)
            for r in rng.permutation(ranks):
                parts.append(per_rank[lo:hi, r])
                rates.append(rate[lo:hi])
        loss, lr = np.concatenate(parts), np.concatenate(rates)
    else:  # one line each, in the order the ranks get there
        order = np.argsort(rng.random((m, ranks)) + 0.3 * (np.arange(ranks) == 0), axis=1)
        loss = np.take_along_axis(per_rank, order, axis=1).ravel()
        lr = np.repeat(rate, ranks)
    return {"loss": _f32(loss[:n]), LR: lr[:n]}


def every_rank_logs(n: int, rng: np.random.Generator) -> np.ndarray:
    """A DDP fine-tune of a pretrained encoder on a large classification set (2-8 GPUs, 16-64
    examples each, 2-10 epochs, AdamW at 1e-5-5e-5 with a 0-10% warm-up and a linear decay,
    recorded) whose logging line is not guarded by `if rank == 0`: every rank appends its own
    local loss to the same log, so each step is logged once per rank, each value one rank's
    batch (its noise 150-300% over the square root of the batch, skewed: a confident model's
    per-example cross-entropy). On half the seeds each line is written as it comes (a tracker
    call per line, the ranks in the order they get there, rank 0 a little later as it does the
    other logging); on the others each rank writes through its own file buffer, flushed every
    150-600 lines, so the log holds blocks of the same stretch of steps from one rank after
    another, the trend starting over at each block. The loss falls from ln C (C = 2-20) along
    the rate's area to 10-40% of it and steps down 10-30% at each new epoch; float32."""
    return _every_rank(n, rng)["loss"]


def worker_shards(n: int, rng: np.random.Generator) -> np.ndarray:
    """LM pretraining from a sharded streaming dataset (WebDataset-style tar shards of
    tokenized documents, each shard from one crawl dump or source, 20-500 batches' worth),
    read by an `IterableDataset` that splits the shards by `get_worker_info()` among the
    DataLoader's 4-16 workers as it should; a batch comes whole from one worker, and the loader
    takes the workers' batches in turn, so step i's batch on each of 1-8 GPUs comes from
    worker i mod W and that worker's current shard. A shard's documents are 2-10% easier or
    harder than the mean (log-normal), so the all-reduced loss carries a pattern of period W,
    averaged over the GPUs, that changes whenever a worker moves to its next shard (shard sizes
    vary 30%, so the workers' moves drift apart). The loss falls from ln V (32k-50k) along a
    power law to 2.3-3.3; batch noise 1-4%; float32."""
    workers = int(rng.choice([4, 6, 8, 12, 16]))
    gpus = int(rng.choice([1, 2, 4, 8]))
    mean_shard = _log_uniform(rng, 20, 500)  # batches of one worker in one shard
    sd = rng.uniform(0.02, 0.1)
    offset = np.zeros(n)
    for _ in range(gpus):
        for w in range(workers):
            m = len(range(w, n, workers))
            sizes = np.maximum(
                1, np.round(mean_shard * np.exp(0.3 * rng.standard_normal(m // 5 + 10)))
            ).astype(int)
            while sizes.sum() < m:
                sizes = np.concatenate([sizes, sizes])
            level = rng.normal(0, sd, len(sizes))
            offset[w::workers] += np.repeat(level, sizes)[:m]
    offset /= gpus
    t = np.arange(n, dtype=np.float64)
    start = math.log(rng.uniform(32_000, 50_257))
    base = _to_end(t, start, rng.uniform(2.3, 3.3), n * _log_uniform(rng, 0.001, 0.02), rng.uniform(0.4, 0.7))
    data = np.exp(offset * _learned(base, start, float(base[-1])) ** 0.5)
    loss = base * data * _noise(n, rng, rng.uniform(0.01, 0.04))
    return _f32(loss)


def _diloco(n: int, rng: np.random.Generator, flipped: bool = False) -> tuple[dict[str, np.ndarray], int]:
    inner = int(rng.choice([50, 100, 250, 500]))  # H, the inner steps between outer steps
    inner = min(inner, max(10, n // 100))
    t = np.arange(n, dtype=np.float64)
    rate = _cosine_rate(t, n, min(1000.0, n * 0.01), _log_uniform(rng, 3e-4, 1e-3), 0.1)
    start = math.log(rng.uniform(32_000, 50_257))
    base = _to_end(
        _area(rate), start, rng.uniform(2.4, 3.4), n * _log_uniform(rng, 0.002, 0.03), rng.uniform(0.4, 0.8)
    )
    base = base * (1 + rng.uniform(0.02, 0.06) * _held(rate, n * 0.005))
    k = t % inner
    rnd = t // inner
    scale = _learned(base, start, float(base[-1])) * rate / rate.max()  # the drift grows with lr x H
    if rng.random() < 0.75:  # the outer step lands below where the worker had got
        saw = rng.uniform(0.005, 0.03) * (((k + 1) / inner) ** rng.uniform(0.5, 1.0) - 0.5)
    else:  # the average of the drifted workers a little above it
        tau = inner * rng.uniform(0.05, 0.3)
        saw = rng.uniform(0.003, 0.015) * (np.exp(-k / tau) - tau / inner)
    level = base * (1 + saw * scale)
    onset = n
    if flipped:  # the pseudo-gradient taken as new - old: each outer step moves the model back
        first = int(rng.uniform(0.3, 0.6) * n / inner) + 1
        onset = min(first * inner, n - 1)
        a0, grow = rng.uniform(0.02, 0.08), rng.uniform(1.5, 2.5)  # Nesterov's momentum compounds it
        kicks = int(math.ceil(math.log(0.5 / a0) / math.log(grow)))
        j = np.minimum(rnd - first, kicks + 2)
        keep = rng.uniform(0.3, 0.6)  # what the inner steps do not win back
        a_j = a0 * grow ** np.maximum(j, 0)
        kept = keep * a0 * (grow ** (np.maximum(j, 0) + 1) - 1) / (grow - 1)
        lift = kept + (1 - keep) * a_j * np.exp(-k / (inner * rng.uniform(0.1, 0.3)))
        level = np.where(j >= 0, level * (1 + lift), level)
    loss = level * _noise(n, rng, rng.uniform(0.01, 0.03))
    if flipped:
        at = min(onset + kicks * inner, n - 1)  # the outer step the inner steps no longer undo
        loss = _blow_up(
            loss, at, rng, _log_uniform(rng, 0.002, 0.02), _log_uniform(rng, 3, 50), rng.random() < 0.8
        )
    return {"loss": _f32(loss), LR: rate}, onset


def _diloco_outer(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _diloco(n, rng)[0]


def diloco_outer_sync(n: int, rng: np.random.Generator) -> np.ndarray:
    """LM pretraining with DiLoCo (Douillard et al. 2023, "DiLoCo: distributed low-communication
    training of language models"; PrimeIntellect's OpenDiLoCo): 2-8 islands of GPUs each train
    their own copy with AdamW for H = 50-500 inner steps (1,000 warm-up steps to 3e-4-1e-3, a
    cosine to 10%, recorded), then the pseudo-gradients (old minus new weights) are averaged and
    the outer optimizer, SGD with Nesterov momentum (0.7, 0.9), moves the shared weights, which
    every island starts its next round from. The logged loss is worker 0's at each inner step:
    from ln V along the rate's area to 2.4-3.4, 2-6% held up by the rate, with a sawtooth of
    period H: on 75% of the seeds the outer step lands 0.5-3% below where the worker had got
    and the worker then falls more slowly than the trend until the next one; on the others the
    average of the drifted copies lands 0.3-1.5% above it and the worker soon wins that back;
    both scaled by the rate's share and by how much has been learned. Noise 1-3%; float32."""
    return _diloco_outer(n, rng)["loss"]


def _ignore_skip(
    n: int, rng: np.random.Generator, misaligned: bool = False
) -> tuple[dict[str, np.ndarray], int]:
    epochs = int(rng.integers(3, 11))
    per = max(1, n // epochs)  # len(train_dataloader), optimizer steps an epoch
    resumes = sorted({int(r * n) for r in rng.uniform(0.05, 0.95, int(rng.integers(1, 5)))})
    onset = n
    if misaligned:
        onset = int(n * rng.uniform(0.3, 0.7))
        resumes = sorted(set(resumes) | {onset})
    ep = np.zeros(n, dtype=np.int64)
    batch = np.zeros(n, dtype=np.int64)
    replay = np.zeros(n, dtype=bool)
    starts = [0]  # the step each epoch began at
    s = e = pos = furthest = ri = 0
    while s < n:
        nxt = resumes[ri] if ri < len(resumes) else n
        run = min(per - pos, nxt - s, n - s)
        if run > 0:
            ep[s : s + run] = e
            batch[s : s + run] = np.arange(pos, pos + run)
            replay[s : s + run] = np.arange(pos, pos + run) < furthest
            s, pos = s + run, pos + run
            furthest = max(furthest, pos)
        if pos >= per:
            e, pos, furthest = e + 1, 0, 0
            starts.append(s)
        if ri < len(resumes) and s >= resumes[ri]:  # the epoch's data from its first batch again
            ri, pos = ri + 1, 0
    t = np.arange(n, dtype=np.float64)
    rate = _linear_rate(t, n, n * rng.uniform(0.0, 0.1), _log_uniform(rng, 1e-5, 1e-4))
    start = rng.uniform(2.0, 3.5)
    base = _to_end(
        _area(rate),
        start,
        start * rng.uniform(0.45, 0.7),
        n * _log_uniform(rng, 0.005, 0.05),
        rng.uniform(0.5, 0.9),
    )
    x = ep + (t - np.asarray(starts)[ep]) / per
    drop = rng.uniform(0.04, 0.12)
    seen = 1 - drop * rng.uniform(0.7, 1.3) * replay  # batches this epoch has already shown
    level = base * _epoch_stair(x, drop) * seen
    hard = np.exp(rng.uniform(0.05, 0.12) * rng.standard_normal((e + 1, per)))  # each batch's own
    noise_sd = np.full(n, rng.uniform(0.01, 0.04))
    if misaligned:  # Adam's moments loaded onto other tensors of the same shapes
        k = np.maximum(t - onset, 0)
        jump, keep = rng.uniform(0.15, 0.6), rng.uniform(0.3, 0.6)
        tau = n * rng.uniform(0.01, 0.05)
        bump = jump * np.minimum(k / rng.uniform(10, 50), 1.0) * (keep + (1 - keep) * np.exp(-k / tau))
        level = np.where(t >= onset, level * (1 + bump), level)
        noise_sd = np.where(t >= onset, noise_sd * (1 + 0.5 * np.exp(-k / tau)), noise_sd)
    loss = level * hard[ep, batch] * _noise(n, rng, noise_sd)
    return {"loss": _f32(loss), LR: rate}, onset


def _ignore_data_skip(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _ignore_skip(n, rng)[0]


def resume_ignore_data_skip(n: int, rng: np.random.Generator) -> np.ndarray:
    """A `Seq2SeqTrainer` fine-tune of a T5 or BART on a corpus of millions of pairs (3-10
    epochs, AdamW at 1e-5-1e-4 with a 0-10% warm-up and a linear decay to 0 at `max_steps`,
    recorded), preempted 1-4 times and resumed from a checkpoint saved on the preemption
    notice, with `ignore_data_skip=True` (skipping the epoch's first batches would take hours):
    the epoch's data start again from its first batch, in the same seeded order, while the
    global step and the schedule go on. So after each resume the batches the epoch has already
    shown come again, 4-12% lower (each seen a few hundred to thousands of steps before, as at
    an epoch boundary), with the same per-batch difficulties (5-12%) in the same order, until
    the resumed epoch reaches new batches; the epoch lasts longer and the run ends at
    `max_steps` partway through its last one. The loss falls from 2-3.5 along the rate's area
    to 45-70% of it and steps down 4-12% at each new epoch; other noise 1-4%; float32."""
    return _ignore_data_skip(n, rng)["loss"]


def _sidecar(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    every = max(50, int(n * _log_uniform(rng, 0.002, 0.02)))  # a checkpoint every so many steps
    dur = every * _log_uniform(rng, 0.3, 3.0)  # an evaluation's length, in training steps
    ev_at, ev_ckpt = [], []
    clock, last = 0.0, 0
    while True:
        latest = int(clock // every)
        if latest <= last:  # nothing new: wait for the next checkpoint
            clock = (last + 1) * every
            continue
        finish = clock + dur * rng.uniform(0.9, 1.1)
        if finish >= n - 1:
            break
        ev_at.append(int(finish))
        ev_ckpt.append(latest * every)
        last, clock = latest, finish
    t = np.arange(n, dtype=np.float64)
    rate = _cosine_rate(t, n, n * rng.uniform(0.01, 0.05), _log_uniform(rng, 1e-3, 0.1), 0.0)
    classes = int(rng.choice([10, 91, 100, 1000]))
    start = math.log(classes)
    base = _to_end(
        _area(rate),
        start,
        start * rng.uniform(0.1, 0.3),
        n * _log_uniform(rng, 0.005, 0.05),
        rng.uniform(0.5, 0.9),
    )
    held = 1 + rng.uniform(0.1, 0.3) * _held(rate, n * 0.005)
    train = base * held * _gamma(n, rng, rng.uniform(0.05, 0.15))
    at, ck = np.asarray(ev_at, dtype=np.int64), np.asarray(ev_ckpt, dtype=np.int64)
    gap, late = rng.uniform(1.05, 1.3), rng.uniform(0.0, 0.15)
    val = base[ck] * gap * (1 + late * ck / n) * (1 + 0.003 * rng.standard_normal(len(ck)))
    loss = np.insert(train, at + 1, val)[:n]
    lr = np.insert(rate, at + 1, rate[at])[:n]
    mode = np.insert(np.full(n, TRAIN), at + 1, EVAL)[:n]
    return {"loss": _f32(loss), LR: lr, MODE: mode}


def sidecar_eval_points(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Keras classifier or detector on a cluster (TF2, `CosineDecay` with a 1-5% warm-up to
    1e-3-0.1, to 0, recorded; 10-1,000 classes) evaluated by a sidecar job
    (`tf.keras.utils.SidecarEvaluator`, or the Orbit / TFM continuous evaluator): a checkpoint
    every 0.2-2% of the run, and the evaluator, whenever it is free, scores the newest one on
    the whole validation set, taking 0.3-3 checkpoint intervals to do it (when slower than the
    checkpoints it skips some). Both jobs write the tag `loss` to the same metrics store, and
    the run is read back in the order the values arrived: a training loss every step and, each
    time an evaluation finishes, one validation value (EVAL steps that save their loss), the
    loss of a checkpoint some way behind, 5-30% above training's level and 0-15% more by the
    end, with almost no noise (0.3%: the whole set). Training's loss falls from ln C along the
    rate's area to 10-30% of it, 10-30% of it held up by the rate; skewed batch noise of
    5-15%; float32."""
    return _sidecar(n, rng)["loss"]


def _stream(n: int, rng: np.random.Generator, unsplit: bool = False) -> tuple[dict[str, np.ndarray], int]:
    t = np.arange(n, dtype=np.float64)
    ranks = int(rng.choice([8, 16, 32, 64]))
    rate = _cosine_rate(t, n, n * rng.uniform(0.005, 0.02), _log_uniform(rng, 2e-4, 1e-3), 0.1)
    start = math.log(rng.uniform(32_000, 128_000))
    base = _to_end(
        _area(rate), start, rng.uniform(2.0, 3.0), n * _log_uniform(rng, 0.002, 0.03), rng.uniform(0.4, 0.8)
    )
    base = base * (1 + rng.uniform(0.02, 0.06) * _held(rate, n * 0.005))
    gaps = rng.exponential(n * rng.uniform(0.01, 0.05), 400)
    restarts = np.cumsum(gaps)
    restarts = restarts[restarts < n].astype(np.int64)
    onset = n
    if unsplit:  # a relaunch whose new data module no longer splits the stream by rank
        onset = int(n * rng.uniform(0.3, 0.6))
        restarts = np.unique(np.append(restarts, onset))
    launches = np.concatenate([[0], restarts]).astype(np.int64)
    which = np.searchsorted(launches, t, side="right") - 1
    k = t - launches[which]
    fill = _log_uniform(rng, 50, 1000)  # steps until the refilled buffer mixes the stream again
    sd = rng.uniform(0.01, 0.05)
    first_shards = rng.normal(0, sd, len(launches))[which] + 0.7 * sd * _slow_walk(n, rng, fill * 0.2)
    data = np.exp(first_shards * np.exp(-k / fill) * _learned(base, start, float(base[-1])))
    cv_rank = rng.uniform(0.03, 0.08)  # one rank's batch
    cv = np.full(n, cv_rank / math.sqrt(ranks))  # the all-reduced mean
    level = base * data
    if unsplit:  # every rank reads the same samples: one rank's batch, all-reduced W times over
        after = t >= onset
        kk = np.maximum(t - onset, 0)
        slower = rng.uniform(0.2, 0.5)
        b0 = base[min(onset, n - 1)]
        small_batch = (
            b0
            + slower * (base - b0)
            + b0 * rng.uniform(0.01, 0.05) * (1 - np.exp(-kk / (n * rng.uniform(0.005, 0.03))))
        )
        level = np.where(after, small_batch * data, level)
        cv = np.where(after, cv_rank, cv)
    loss = level * _noise(n, rng, cv)
    return {"loss": _f32(loss), LR: rate}, onset


def _stream_buffer(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _stream(n, rng)[0]


def stream_buffer_refill(n: int, rng: np.random.Generator) -> np.ndarray:
    """LM pretraining on preemptible capacity from a streamed corpus (Hugging Face `datasets`
    in streaming mode, `.shuffle(buffer_size=...)` and `split_dataset_by_node` over 8-64 ranks,
    resumed through the dataset's `state_dict()`; WebDataset's shuffle buffer behaves alike),
    restarted every 1-5% of the run on average (exponential gaps) and resumed correctly, at the
    exact sample: but the shuffle buffer's contents are not saved, so at every launch it fills
    again from the next shards only, and for the first 50-1,000 steps the batches come from a
    few neighbouring shards of one source: the all-reduced loss (noise 3-8% a rank, over the
    square root of the ranks) sits 1-5% off the trend, wandering, and settles back as the buffer
    mixes. The rate warms up over 0.5-2% and follows a cosine to 10% of 2e-4-1e-3, recorded;
    the loss falls from ln V (32k-128k) along the rate's area to 2-3, 2-6% held up by the
    rate; float32."""
    return _stream_buffer(n, rng)["loss"]


def context_parallel_first_chunk(n: int, rng: np.random.Generator) -> np.ndarray:
    """Long-context training of an LLM with context parallelism (ring attention over 2-16 GPUs,
    each holding a contiguous 1/CP of every sequence, without Megatron's load-balancing zig-zag;
    sequences of 32k-128k tokens; AdamW at 1e-5-5e-5, constant after a 1% warm-up) whose loop
    logs rank 0's loss without reducing it over the context-parallel group: the mean over the
    FIRST chunk of its sequences, whose tokens see the least context. The per-token loss falls
    with the position as 1 + (0.3-0.8) x (1 + p / (16-64))^-(0.3-0.6), so the first chunk's
    mean sits above the whole sequence's by about 1-8%, more the more ranks share a sequence. At
    one or two resumes (20-80% of the way) the job moves to another layout and CP doubles or
    halves: the logged value steps up or down by 1-4% and its noise a little with it (fewer
    tokens in the chunk), while training goes on unchanged. The whole-sequence loss falls from
    the base model's 2.0-2.6 by 3-10% along a power law; noise 5-12% over the square root of
    the 1-4 sequences a rank holds; float32."""
    t = np.arange(n, dtype=np.float64)
    length = int(rng.choice([32_768, 65_536, 131_072]))
    c, p0, alpha = rng.uniform(0.3, 0.8), rng.uniform(16, 64), rng.uniform(0.3, 0.6)

    def chunk_mean(x: float) -> float:  # the mean of 1 + c (1 + p / p0)^-alpha over p in [0, x)
        return 1 + c * p0 / (1 - alpha) * ((1 + x / p0) ** (1 - alpha) - 1) / x

    cp = [int(rng.choice([2, 4, 8]))]
    times = np.sort(rng.uniform(0.2, 0.8, int(rng.integers(1, 3)))) * n
    for _ in times:
        up = cp[-1] == 2 or (cp[-1] < 16 and rng.random() < 0.6)
        cp.append(cp[-1] * 2 if up else cp[-1] // 2)
    cp_t = np.asarray(cp)[np.searchsorted(times, t, side="right")]
    ratio = np.array([chunk_mean(length / d) for d in cp]) / chunk_mean(length)
    ratio_t = ratio[np.searchsorted(times, t, side="right")]
    start = rng.uniform(2.0, 2.6)
    level = _to_end(
        t, start, start * rng.uniform(0.9, 0.97), n * _log_uniform(rng, 0.005, 0.1), rng.uniform(0.5, 0.9)
    )
    seqs = int(rng.integers(1, 5))
    cv = rng.uniform(0.05, 0.12) / math.sqrt(seqs) * (cp_t / cp[0]) ** 0.25
    return _f32(level * ratio_t * _noise(n, rng, cv))


def _extended(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    planned = n / rng.uniform(1.3, 2.5)  # --train-iters before the extension
    at = planned * rng.uniform(0.5, 0.85)
    warm = n * rng.uniform(0.002, 0.01)
    peak = _log_uniform(rng, 1.5e-4, 6e-4)
    rate = np.where(t < at, _cosine_rate(t, planned, warm, peak, 0.1), _cosine_rate(t, n, warm, peak, 0.1))
    start = math.log(rng.uniform(32_000, 128_000))
    base = _to_end(
        _area(rate), start, rng.uniform(1.8, 2.6), n * _log_uniform(rng, 0.002, 0.03), rng.uniform(0.4, 0.8)
    )
    base = base * (1 + rng.uniform(0.03, 0.08) * _held(rate, n * rng.uniform(0.002, 0.01)))
    df = rng.uniform(4, 10)
    z = rng.standard_t(df, n) / math.sqrt(df / (df - 2))
    loss = base * np.exp(rng.uniform(0.01, 0.025) * z)
    return {"loss": _f32(loss), LR: rate}


def schedule_extended_resume(n: int, rng: np.random.Generator) -> np.ndarray:
    """LLM pretraining with Megatron-LM (a warm-up over 0.2-1% and a cosine to 10% of
    1.5e-4-6e-4 over `--lr-decay-iters`, recorded) that the team decides to train longer: at a
    resume 50-85% of the way through the planned run, `--train-iters` and `--lr-decay-iters` are
    raised 1.3-2.5x (more data, more compute granted) with `--override-opt_param-scheduler`,
    so the scheduler recomputes the rate at the same iteration on the longer cosine: the rate
    jumps UP from its decayed value, the loss, 3-8% of it held up by the rate, rises by a
    percent or two over the next few thousand steps, then goes on falling, and ends lower than
    the planned run would have. From ln V (32k-128k) along the rate's area to 1.8-2.6;
    Student-t noise of 1-2.5%; float32."""
    return _extended(n, rng)["loss"]


def _gauge(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    scrape = float(rng.choice([10.0, 15.0, 30.0]))  # Prometheus's scrape interval, seconds
    step_s = scrape * _log_uniform(rng, 0.25, 3.0)  # a training step
    steps = int(n * scrape / step_s * 1.05) + 10
    dt = step_s * _noise(steps, rng, rng.uniform(0.03, 0.15))
    i = np.arange(steps)
    ckpt, evals = int(rng.integers(250, 2_001)), int(rng.integers(500, 5_001))
    dt[i % ckpt == ckpt - 1] += rng.uniform(60, 600)  # a checkpoint save: the gauge holds
    dt[i % evals == evals - 1] += rng.uniform(60, 600)  # an evaluation: metrics only, no loss
    done = np.cumsum(dt)
    at = done[0] + scrape * np.arange(n) + rng.uniform(0, scrape)
    idx = np.clip(np.searchsorted(done, at, side="right") - 1, 0, steps - 1)  # the step last set
    s = idx.astype(np.float64)
    total = float(idx[-1]) + 1
    rate = _cosine_rate(s, total, total * rng.uniform(0.005, 0.02), _log_uniform(rng, 1.5e-4, 6e-4), 0.1)
    start = math.log(rng.uniform(32_000, 128_000))
    level = _power(
        s, start, rng.uniform(1.6, 2.4), total * _log_uniform(rng, 0.001, 0.02), rng.uniform(0.4, 0.7)
    )
    per_step = _noise(steps, rng, rng.uniform(0.01, 0.025))
    loss = level * per_step[idx]
    return {"loss": _f32(loss), LR: rate}


def prometheus_gauge_scrape(n: int, rng: np.random.Generator) -> np.ndarray:
    """LLM pretraining on Kubernetes (a Kubeflow `PyTorchJob`) whose loss is exported as a
    Prometheus gauge, `prometheus_client.Gauge("train_loss").set(loss)` at every step, and read
    back from the metrics store (a Grafana panel's range query, one point per scrape): each
    value is the gauge at a scrape, every 10, 15 or 30 s, i.e. the loss of the last step that
    had finished, whatever came before it. A step takes 0.25-3 scrape intervals (3-15%
    jitter), so faster jobs show every few steps and slower ones repeat a step's value at one
    scrape or more; every 250-2,000 steps a checkpoint save and every 500-5,000 an evaluation
    pass stall training for 1-10 minutes, and the gauge holds: 2-60 exact repeats in a row.
    The rate (a 0.5-2% warm-up, a cosine to 10% of 1.5e-4-6e-4) is recorded with each value;
    the loss falls from ln V (32k-128k) along a power law to 1.6-2.4; noise 1-2.5% a step;
    float32."""
    return _gauge(n, rng)["loss"]


def long_document_batches(n: int, rng: np.random.Generator) -> np.ndarray:
    """LM pretraining without sequence packing, on batches filled with whole documents up to
    a token budget (fairseq's `--max-tokens` with `--sample-break-mode complete_doc`, or a
    length-bucketed `batch_by_size`), the loss the mean per token: a batch of many documents
    averages their difficulties out (noise 1-3%), but 0.05-1% of the batches are mostly one
    very long document (50-100% of the tokens) whose own per-token loss shows: repetitive ones
    (server logs, data dumps, license boilerplate, 40-70% of them), which a trained model copies
    in context, down to exp(-(0.5-1.6)) of the level, or noise-like ones (hashes, base64, tables
    of numbers), up to exp(0.2-0.9) of it, both growing from nothing as the model learns (to an
    untrained model every token costs about ln V). So the series has rare dips and spikes on
    both sides, single steps, with no aftermath. The loss falls from ln V (32k-64k) along a
    power law to 2.2-3.2; float32."""
    t = np.arange(n, dtype=np.float64)
    start = math.log(rng.uniform(32_000, 64_000))
    level = _to_end(
        t, start, rng.uniform(2.2, 3.2), n * _log_uniform(rng, 0.001, 0.02), rng.uniform(0.4, 0.7)
    )
    learned = _learned(level, start, float(level[-1]))
    hit = rng.random(n) < _log_uniform(rng, 0.0005, 0.01)
    share = rng.uniform(0.5, 1.0, n) * hit
    repetitive = rng.random(n) < rng.uniform(0.4, 0.7)
    log_ratio = np.where(repetitive, -rng.uniform(0.5, 1.6, n), rng.uniform(0.2, 0.9, n))
    doc = np.exp(log_ratio * learned)
    rest = _noise(n, rng, rng.uniform(0.01, 0.03))
    return _f32(level * ((1 - share) * rest + share * doc))


def _running_zero(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    tau = _log_uniform(rng, 20, 1000)  # 1 / (1 - beta): beta 0.95-0.999
    peak = float(rng.choice([0.1, 0.2, 0.4]))
    rate = peak * np.where(t < 0.5 * n, 1.0, np.where(t < 0.75 * n, 0.1, 0.01))  # MultiStepLR
    classes = int(rng.choice([10, 100, 1000]))
    start = math.log(classes)
    base = _to_end(
        _area(rate),
        start,
        start * rng.uniform(0.05, 0.3),
        n * _log_uniform(rng, 0.005, 0.05),
        rng.uniform(0.5, 0.9),
    )
    base = base * (1 + rng.uniform(0.3, 0.8) * _held(rate, n * rng.uniform(0.002, 0.01)))
    raw = base * _gamma(n, rng, rng.uniform(0.05, 0.2))
    gaps = rng.exponential(n * rng.uniform(0.02, 0.1), 200)
    cuts = [int(c) for c in np.cumsum(gaps) if c < n]  # the job's launches (requeued by SLURM)
    if rng.random() < 0.5:  # `running_loss = 0.0` at the top of the epoch loop too
        per = int(_log_uniform(rng, 1_000, 20_000))
        cuts += list(range(per, n, per))
    bounds = sorted({0, *cuts, n})
    logged = np.concatenate([_lag(raw[a:b], tau, 0.0) for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
    return {"loss": _f32(logged), LR: rate}


def running_loss_zero_init(n: int, rng: np.random.Generator) -> np.ndarray:
    """A hand-written PyTorch loop on a SLURM cluster (an image classifier, 10-1,000 classes,
    SGD at 0.1-0.4 with `MultiStepLR` x0.1 at 50% and 75% of the run, recorded) that logs
    `running_loss = beta * running_loss + (1 - beta) * loss.item()` with beta 0.95-0.999 and no
    bias correction, `running_loss = 0.0` set when the script starts (and on half the seeds at
    the top of every epoch of 1,000-20,000 steps too). The job is requeued every 2-10% of the
    run on average (exponential gaps; a checkpoint saved on SLURM's signal, so no step is lost)
    and each launch's first values start from ZERO: (1 - beta) x the loss, then climbing to the
    loss's level over some 1 / (1 - beta) = 20-1,000 steps. Between launches a smooth,
    lagging curve. The loss falls from ln C along the rate's area to 5-30% of it, 30-80% of it
    held up by the rate until each cut; skewed batch noise 5-20% before the smoothing;
    float32."""
    return _running_zero(n, rng)["loss"]


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "window_mean_epoch_reset": window_mean_epoch_reset,
    "loss_norm_switch_resume": loss_norm_switch_resume,
    "elastic_rank0_local": elastic_rank0_local,
    "every_rank_logs": every_rank_logs,
    "worker_shards": worker_shards,
    "diloco_outer_sync": diloco_outer_sync,
    "resume_ignore_data_skip": resume_ignore_data_skip,
    "sidecar_eval_points": sidecar_eval_points,
    "stream_buffer_refill": stream_buffer_refill,
    "context_parallel_first_chunk": context_parallel_first_chunk,
    "schedule_extended_resume": schedule_extended_resume,
    "prometheus_gauge_scrape": prometheus_gauge_scrape,
    "long_document_batches": long_document_batches,
    "running_loss_zero_init": running_loss_zero_init,
}
# the kinds that record more than their loss: {"loss", LR, MODE} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "window_mean_epoch_reset": _window_mean,
    "loss_norm_switch_resume": _norm_switch,
    "elastic_rank0_local": _elastic_rank0,
    "every_rank_logs": _every_rank,
    "diloco_outer_sync": _diloco_outer,
    "resume_ignore_data_skip": _ignore_data_skip,
    "sidecar_eval_points": _sidecar,
    "stream_buffer_refill": _stream_buffer,
    "schedule_extended_resume": _extended,
    "prometheus_gauge_scrape": _gauge,
    "running_loss_zero_init": _running_zero,
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
def diloco_pseudo_gradient_flipped(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The DiLoCo run of `diloco_outer_sync`, resumed 30-60% of the way through with a
    refactored outer step that takes the pseudo-gradient as new minus old weights: the outer
    SGD now moves the shared weights BACK along the islands' progress, and Nesterov's momentum
    compounds it. From the first outer step after the resume each one throws the loss up, 2-8%
    at first and 1.5-2.5x more at each outer step after, the inner steps winning back only
    40-70% of each kick before the next; once a kick reaches about 50% the run runs away (the
    loss climbing by 0.2-20% a step) and on 80% of the seeds overflows to NaN once it is 3-50x
    its level; on the others it saturates there, wandering. The onset is that first outer
    step."""
    out, onset = _diloco(n, rng, flipped=True)
    return out["loss"], onset


def elastic_lr_scaled_twice(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The elastic run of `elastic_rank0_local`, whose launcher is changed at a re-rendezvous
    30-70% of the way through its epochs to scale the rate by the world size after loading a config whose
    rate is already scaled (`lr = cfg.lr * world_size` on top of Goyal's rule): from then the
    rate is 16-128x what was meant. Within 1-5 steps rank 0's loss overshoots chance by 10-60%
    (the network confidently wrong), then sits at ln C, wandering by 2% with its noise 1.5x and
    1% of the steps spiking, in training and validation alike, and only once the cosine has
    brought the rate below 3x the intended peak, in the last few percent of the run, does it
    start to fall again. The onset is the re-rendezvous's first step."""
    out, onset = _elastic(n, rng, lr_twice=True)
    return out["loss"], onset


def stream_unsplit_after_restart(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The streaming run of `stream_buffer_refill`, relaunched 30-60% of the way through with
    a rewritten data module that builds the stream with the same seed on every rank and no
    longer calls `split_dataset_by_node`: all 8-64 ranks now read the same samples in the same
    order, so each step's global batch is one rank's batch repeated. The all-reduced loss's
    noise jumps to one rank's (sqrt(ranks) = 2.8-8x), the effective batch is 1/ranks of the
    tuned one, so the loss lifts by 1-5% within 0.5-3% of the run and from there falls only
    20-50% as fast as it should. The onset is the relaunch's first step."""
    out, onset = _stream(n, rng, unsplit=True)
    return out["loss"], onset


def optimizer_state_misaligned(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The fine-tune of `resume_ignore_data_skip`, resumed 30-70% of the way through by a
    script whose model class now registers its modules in another order (the attention
    projections fused and split differently): `optimizer.load_state_dict` matches the saved
    state to the parameters by position, and shapes agree often enough that no error comes,
    so Adam's moments land on other tensors. The first updates go in stale directions with
    wrong step sizes and undo part of what was learned: the loss rises by 15-60% within 10-50
    steps, recovers only part of the way (30-60% of the rise stays, the linear decay leaving
    too little rate to relearn it) over 1-5% of the run, and stays above the healthy run to the
    end, its noise up by half meanwhile. The onset is the resume's first step."""
    out, onset = _ignore_skip(n, rng, misaligned=True)
    return out["loss"], onset


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "diloco_pseudo_gradient_flipped": diloco_pseudo_gradient_flipped,
    "elastic_lr_scaled_twice": elastic_lr_scaled_twice,
    "stream_unsplit_after_restart": stream_unsplit_after_restart,
    "optimizer_state_misaligned": optimizer_state_misaligned,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
