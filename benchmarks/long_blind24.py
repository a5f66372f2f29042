"""A twenty-fourth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind24`.

    .venv/bin/python benchmarks/long_runs.py --blind24 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of a training job look over 10^5-10^6 logged values (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is models trained online on live production data,
whose own time structure shapes a healthy loss, through mechanisms the earlier sets lack: a
retail recommender through its holiday season's shifted traffic mix; a conversion model whose
late conversions arrive as fake-negative corrections; a new market launched into a running
model; an experiment arm's traffic ramp that stretches the day in steps; a news recommender's
self-exciting trending topics; a fraud model chasing adapting attack campaigns; a ranker whose
click loss is switched to inverse-propensity weighting; a streaming ASR model whose users follow
the sun; a UTC hour feature meeting daylight-saving transitions; a log shipper's backlog
replayed into the live stream; a replay reservoir mixed in at a decaying share; a daily job
warm-started from yesterday with a fresh schedule; labelling crews whose label noise follows
their shifts; and a video recommender's scheduled live events. Where a stream is read in
arrival order each step is a fixed-size batch of it, so busy hours take more steps than quiet
ones. None of them is one of `long_runs.KINDS`, `long_blind.KINDS`, ... `long_blind23.KINDS`
(nor a bug of their `BUGS`). They are to be measured once, on the held-out seeds (`SEEDS`),
and not tuned on: a rule changed after looking at them makes them a tuning set.

The interface is `long_blind23`'s: a kind is `(n, rng) -> loss`, each value one logged point;
`series(kind, n, rng)` gives all that a run records: the loss and, where the kind has them, the
learning rate (`LR`, as the PyTorch hook records it, in real units, at each logged point) and
the mode of each step (`MODE`, as `long_blind.eval_pauses` records it: `TRAIN` and `EVAL` steps
save their loss in their mode; `EVAL_UNSAVED` steps are evaluation steps that save no loss; no
kind here has evaluation passes, but `MODE` and its codes are kept for the interface). Where a
kind compresses a run of more steps than it has points, its schedules keep their real
proportions. A bug is `(n, rng) -> (loss, the step its defect begins)`; one bug ends in NaN on
most of its seeds, as such jobs do. Only numpy here: the series can be generated and looked at
without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _log_uniform  # the first blind set's helpers
from long_blind4 import _f32, _gamma  # the fourth's
from long_blind20 import _blow_up  # the twentieth's
from long_blind21 import _to_end  # the twenty-first's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE: the mode of each step
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 24000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _entropy(p: float | np.ndarray) -> np.ndarray:
    """The binary entropy in nats: the log loss of a model that knows only the base rate."""
    p = np.asarray(p, dtype=np.float64)
    return -(p * np.log(p) + (1 - p) * np.log1p(-p))


def _clock(
    n: int,
    rng: np.random.Generator,
    days: float,
    swing: float,
    weekend: float = 0.0,
    extra: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, float]:
    """The time (in days from the run's first step) of each of `n` steps of a stream read in
    arrival order, a step a fixed-size batch: the traffic follows a daily cycle (relative
    `swing`, its peak at a drawn hour, a second harmonic), weekends (`weekend` x the traffic,
    either way) and `extra` (a factor, a function of the time and the local time), so busy hours take more
    steps than quiet ones. Also the offset of local time: `tau + off` is the local time in days
    from a Monday's midnight (its fraction the time of day, its floor mod 7 the weekday)."""
    off = rng.uniform(0, 1) + int(rng.integers(0, 7))
    grid = np.linspace(0.0, days, max(int(days * 96), 16) + 1)  # quarter-hours
    peak = rng.uniform(0.5, 0.9)  # the busiest hour, local (noon to 21:30)
    local = grid + off
    rate = 1 + swing * (
        np.cos(2 * np.pi * (local - peak)) + rng.uniform(0.1, 0.4) * np.cos(4 * np.pi * (local - peak))
    )
    rate *= 1 + weekend * ((np.floor(local) % 7) >= 5)
    rate = np.maximum(rate, 0.02)
    if extra is not None:
        rate = rate * np.maximum(extra(grid, local), 1e-6)
    cum = np.concatenate([[0.0], np.cumsum((rate[1:] + rate[:-1]) / 2 * np.diff(grid))])
    tau = np.interp(np.arange(n) / n * cum[-1], cum, grid)
    return tau, off


def _hourly(local: np.ndarray, rng: np.random.Generator, amp: float) -> np.ndarray:
    """A relative daily pattern of the loss (who is online at which hour): two harmonics of
    `amp` and a drawn share of it, at drawn phases, at the local times `local` (days)."""
    x = 2 * np.pi * local
    return amp * (
        np.cos(x - rng.uniform(0, 2 * np.pi))
        + rng.uniform(0.2, 0.6) * np.cos(2 * x - rng.uniform(0, 2 * np.pi))
    )


def _weekly(local: np.ndarray, rng: np.random.Generator, amp: float) -> np.ndarray:
    """A weekend effect of `amp` (either way) on the loss, ramped over 2 hours at its edges."""
    wk = ((local % 7) - 5.0) / 2.0  # 0-1 over Saturday and Sunday
    edge = np.clip(np.minimum(wk, 1 - wk) * 24, 0.0, 1.0)
    return amp * rng.choice([-1.0, 1.0]) * ((wk >= 0) & (wk < 1)) * edge


def _day_walk(tau: np.ndarray, rng: np.random.Generator, sd: float, memory: float) -> np.ndarray:
    """A slow drift between days (an AR(1) over days of spread `sd` and a memory of `memory`
    days), interpolated to each step: the base rate's day-to-day wander."""
    m = int(math.ceil(tau[-1])) + 2
    a = 1 / max(memory, 1.0)
    z = rng.standard_normal(m) * sd * math.sqrt(2 * a - a * a)
    w = np.empty(m)
    w[0] = rng.standard_normal() * sd
    for i in range(1, m):  # at most a few hundred days
        w[i] = (1 - a) * w[i - 1] + z[i]
    return np.interp(tau, np.arange(m, dtype=np.float64), w)


def _ne(n: int, rng: np.random.Generator, lo: float, hi: float, warm: bool) -> np.ndarray:
    """The normalized entropy (the log loss over the base rate's entropy; He et al. 2014) of a
    model learning on the stream: from 1 (cold: the output bias first, within 0.1-1% of the
    run) or from 1-6% above its end (warm-started from the production model) down a power law
    to `lo`-`hi` at the end."""
    t = np.arange(n, dtype=np.float64)
    end = rng.uniform(lo, hi)
    start = 1.0 if not warm else end * rng.uniform(1.01, 1.06)
    return _to_end(t, start, end, n * _log_uniform(rng, 0.001, 0.03), rng.uniform(0.4, 0.9))


def _cv(rng: np.random.Generator, p: float, batch: int) -> float:
    """The relative noise of a batch's mean log loss at a base rate `p`: a positive costs about
    ln(1/p) and a negative almost nothing, so one example's loss spreads by about sqrt(p) x
    ln(1/p) around its mean, the base rate's entropy; 1-2x that (the model's own spread of
    scores), over the square root of the batch."""
    per = math.sqrt(max(p, 1e-4)) * math.log(1 / p) / float(_entropy(p))
    return rng.uniform(1.0, 2.0) * per / math.sqrt(batch)


def _ctr(
    n: int,
    rng: np.random.Generator,
    days: tuple[float, float],
    warm: bool = True,
    hourly: tuple[float, float] = (0.02, 0.06),
    extra: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> dict:
    """The common frame of a click or conversion model on a live stream: the clock of its
    steps (`_clock`, `extra` its traffic factor), the base rate (1-8%, wandering 1-4% between
    days), its entropy times a normalized entropy falling to 0.75-0.9 (`_ne`), a daily pattern
    of `hourly` (2-6%) and a weekend one of 0-5%, the batch (4k-32k rows) and its noise."""
    d = rng.uniform(*days)
    tau, off = _clock(n, rng, d, rng.uniform(0.2, 0.6), rng.uniform(-0.2, 0.2), extra)
    local = tau + off
    p = _log_uniform(rng, 0.01, 0.08)
    rate = p * np.exp(_day_walk(tau, rng, rng.uniform(0.01, 0.04), rng.uniform(2, 7)))
    ne = _ne(n, rng, 0.75, 0.9, warm)
    shape = 1 + _hourly(local, rng, rng.uniform(*hourly)) + _weekly(local, rng, rng.uniform(0.0, 0.05))
    batch = int(rng.choice([4096, 8192, 16384, 32768]))
    return {
        "tau": tau,
        "local": local,
        "p": p,
        "level": _entropy(rate) * ne * shape,
        "ne": ne,
        "cv": _cv(rng, p, batch),
        "days": d,
    }


def _bumps(
    tau: np.ndarray, at: np.ndarray, rise: np.ndarray, fall: np.ndarray, size: np.ndarray
) -> np.ndarray:
    """The sum of bumps in time (days): each starts at `at`, rises as 1 - exp(-k / rise) and
    falls as exp(-k / fall), scaled so that its peak is `size`; a loop over the bumps, each
    evaluated on the steps within 12 fall times of its start."""
    out = np.zeros(len(tau))
    for a, r, f, s in zip(at, rise, fall, size, strict=True):
        i0 = int(np.searchsorted(tau, a))
        i1 = int(np.searchsorted(tau, a + 12 * f + 6 * r))
        if i0 >= i1:
            continue
        k = tau[i0:i1] - a
        g = (1 - np.exp(-k / r)) * np.exp(-k / f)
        kp = r * math.log1p(f / r)  # the peak of the shape
        top = (1 - math.exp(-kp / r)) * math.exp(-kp / f)
        out[i0:i1] += s * g / top
    return out


# the healthy kinds ----------------------------------------------------------------------------
def _holiday(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    c = _ctr(n, rng, (60, 150))
    tau = c["tau"]
    begin = c["days"] * rng.uniform(0.3, 0.6)  # the season's start (mid-November)
    length = rng.uniform(25, 45)  # through Black Friday, Christmas and the New Year
    x = (tau - begin) / length
    inside = np.clip(np.minimum(x, 1 - x) * length / 2, 0.0, 1.0)  # 2-day ramps at its edges
    peak = rng.uniform(0.25, 0.5)
    bf, xmas = rng.uniform(0.15, 0.3), rng.uniform(0.65, 0.8)
    w_bf, w_xmas = 2.5 / length, rng.uniform(4, 8) / length  # Black Friday to Cyber Monday; the run-up
    share = peak * (
        rng.uniform(0.3, 0.5) * inside
        + np.exp(-0.5 * ((x - bf) / w_bf) ** 2)
        + rng.uniform(0.6, 0.9) * np.exp(-0.5 * ((x - xmas) / w_xmas) ** 2)
    )
    share = np.minimum(share, 0.7)  # new and gift shoppers in the traffic
    excess = rng.uniform(0.2, 0.6) * (1 - rng.uniform(0.2, 0.5) * np.clip(x, 0.0, 1.0))  # learned somewhat
    loss = c["level"] * (1 + share * excess) * _gamma(n, rng, c["cv"] * (1 + 0.5 * share))
    return {"loss": _f32(loss)}


def holiday_season_mix(n: int, rng: np.random.Generator) -> np.ndarray:
    """A retail recommender's purchase model trained online on the live event stream through
    the holiday season (the traffic shift every e-commerce team plans for; Amazon's and
    Alibaba's Singles' Day reports of 3-10x traffic with a different buyer mix): warm-started,
    60-150 days of traffic, the season beginning 30-60% of the way through and lasting 25-45
    days. The share of new and gift shoppers (cold users, whose purchases the model predicts
    poorly, 20-60% above the regulars' loss) rises to 30-50% of a peak of 25-50% over the
    season, with a spike from Black Friday to Cyber Monday and a broader one before Christmas,
    and is gone after the New Year; the model learns them a little (their excess falls by
    20-50% through the season). On the common frame: a base rate of 1-8% (wandering between
    days), its entropy times a normalized entropy falling to 0.75-0.9, a daily pattern of
    2-6% and a weekend one; busy hours take more steps; noise from the batch (4k-32k rows),
    higher with the new shoppers; float32."""
    return _holiday(n, rng)["loss"]


def _delayed(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    c = _ctr(n, rng, (20, 60))
    tau, local, p = c["tau"], c["local"], c["p"]
    pf = p * math.log(1 / p) / float(_entropy(p))  # the positives' share of the log loss
    cut = tau[int(n * rng.uniform(0.05, 0.2))]  # the cut-over from the labelled history to the stream
    fast = rng.uniform(0.4, 0.7)  # converting within the first hour or so
    tf, ts = rng.uniform(0.02, 0.06), rng.uniform(0.5, 3.0)  # days
    k = np.maximum(tau - cut, 0.0)
    arrived = np.where(tau < cut, 1.0, fast * (1 - np.exp(-k / tf)) + (1 - fast) * (1 - np.exp(-k / ts)))
    lagged = _hourly(local - rng.uniform(0.05, 0.3), rng, rng.uniform(0.03, 0.08))  # conversions lag
    pos = np.where(tau < cut, 1.0, arrived * (1 + lagged))
    loss = c["level"] * ((1 - pf) + pf * pos) * _gamma(n, rng, c["cv"])
    return {"loss": _f32(loss)}


def delayed_conversion_fake_negatives(n: int, rng: np.random.Generator) -> np.ndarray:
    """A conversion-rate model trained on the live stream with fake negatives (Ktena et al.
    2019, "Addressing delayed feedback for continuous training with neural networks in CTR
    prediction"; Chapelle 2014, "Modeling delayed feedback in display advertising"): every
    impression enters training at once as a negative, and a conversion that arrives later is
    inserted again as a positive. The job is bootstrapped on 5-20% of the run of labelled
    history (all conversions in), then cut over to the stream: the fresh impressions are
    negatives only until their conversions arrive, 40-70% within the first 30 min-1.5 h, the
    rest over 0.5-3 days, so the loss drops by most of the positives' share of it at the
    cut-over and climbs back over the next days as the late positives flow in; their arrival
    follows the impressions' daily cycle 1-7 hours late (a second daily pattern of 3-8% on the
    positives' part). On the common frame: 20-60 days, a base rate of 1-8%, its entropy times
    a normalized entropy falling to 0.75-0.9, daily and weekend patterns, batch noise;
    float32."""
    return _delayed(n, rng)["loss"]


def _market(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    c = _ctr(n, rng, (40, 120))
    tau, local, d = c["tau"], c["local"], c["days"]
    extra = np.zeros(n)
    for at in np.sort(rng.uniform(0.2, 0.8, int(rng.integers(1, 4)))) * d:
        size = rng.uniform(0.05, 0.25)  # its share of the traffic once launched
        ramp = rng.uniform(2, 12) / 24  # the launch flag's rollout
        zone = rng.uniform(-0.5, 0.5)  # its time zone against the others'
        active = np.clip((tau - at) / ramp, 0.0, 1.0)
        share = size * active * (1 + 0.5 * np.cos(2 * np.pi * (local + zone - 0.75)))  # its evenings
        k = np.maximum(tau - at, 0.0)
        cold = rng.uniform(0.3, 1.0) * np.exp(-k / rng.uniform(1, 10)) + rng.uniform(0.03, 0.15)
        extra += share * cold
    loss = c["level"] * (1 + extra) * _gamma(n, rng, c["cv"])
    return {"loss": _f32(loss)}


def new_market_launch(n: int, rng: np.random.Generator) -> np.ndarray:
    """An ads or marketplace ranking model trained online while the product launches in 1-3
    new countries, each switched on by a launch flag rolled out over 2-12 hours 20-80% of the
    way through 40-120 days (a routine "geo expansion"; the new market's users and inventory
    cold, as in the cold-start literature, e.g. Pan et al. 2019, "Warm up cold-start
    advertisements"): each brings 5-25% of the traffic, peaking in its own evenings (another
    time zone), whose loss starts 30-100% above the rest and falls with a time constant of 1-10
    days to 3-15% above it (a different market stays a little harder): the loss steps up to a
    new plateau and falls slowly from there, and the daily pattern gains a harmonic. On the
    common frame: a base rate of 1-8%, its entropy times a normalized entropy falling to
    0.75-0.9, daily and weekend patterns, batch noise; float32."""
    return _market(n, rng)["loss"]


def _ab_ramp(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    ladder = [0.01, 0.05, 0.2, 0.5, 1.0]
    first = int(rng.integers(0, 2))
    last = int(rng.integers(3, 5))
    shares = np.array(ladder[first : last + 1])
    spans = rng.uniform(2, 10, len(shares))
    spans[-1] = rng.uniform(5, 20)
    ends = np.cumsum(spans)

    def stage_share(grid: np.ndarray, local: np.ndarray) -> np.ndarray:
        return shares[np.minimum(np.searchsorted(ends, grid, side="right"), len(shares) - 1)]

    c = _ctr(n, rng, (float(ends[-1]), float(ends[-1])), extra=stage_share)
    tau = c["tau"]
    at = ends[:-1]
    bump = _bumps(
        tau, at, np.full(len(at), 0.01), rng.uniform(0.3, 1.0, len(at)), rng.uniform(0.01, 0.04, len(at))
    )
    loss = c["level"] * (1 + bump) * _gamma(n, rng, c["cv"])
    return {"loss": _f32(loss)}


def ab_arm_traffic_ramp(n: int, rng: np.random.Generator) -> np.ndarray:
    """A recommender that is the treatment arm of an online experiment and trains only on the
    traffic its arm serves, ramped in stages (Kohavi, Tang and Xu 2020, "Trustworthy online
    controlled experiments", ch. 15: 1% -> 5% -> 20% -> 50% -> 100%, 3-5 stages from 1% or
    5%, 2-10 days each, the last 5-20 days): the batch is fixed, so the steps a day grow with
    the arm's share, and in steps the daily and weekly patterns run 10-100x faster in the
    first stage than in the last; each ramp brings users of newly hashed buckets, 1-4% harder
    for 0.3-1 day. Warm-started; on the common frame: a base rate of 1-8%, its entropy times
    a normalized entropy falling (with the data seen) to 0.75-0.9, daily and weekend
    patterns, batch noise; float32."""
    return _ab_ramp(n, rng)["loss"]


def _trending(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    c = _ctr(n, rng, (14, 60))
    tau, d = c["tau"], c["days"]
    mu = rng.uniform(0.5, 3.0)  # topics a day breaking on their own
    branch = rng.uniform(0.3, 0.7)  # follow-up topics each one sets off (Hawkes)
    lag = rng.uniform(0.1, 0.5)  # days to a follow-up
    events = list(rng.uniform(-2, d, int(rng.poisson(mu * (d + 2)))))  # the topics already trending too
    parents = list(events)
    for _ in range(20):
        kids: list[float] = []
        for t0 in parents:
            kids.extend(t0 + rng.exponential(lag, int(rng.poisson(branch))))
        kids = [k for k in kids if k < d]
        if not kids:
            break
        events.extend(kids)
        parents = kids
    at = np.sort(np.array(events, dtype=np.float64))
    m = len(at)
    rise = rng.uniform(1, 4, m) / 24
    fade = rng.uniform(0.25, 2.0, m)  # the topic's share fading
    learn = rng.uniform(1, 6, m) / 24  # its new items' embeddings learned
    fall = 1 / (1 / fade + 1 / learn)
    size = np.exp(rng.uniform(math.log(0.03), math.log(0.25), m)) * rng.uniform(0.3, 1.0, m)
    loss = c["level"] * (1 + _bumps(tau, at, rise, fall, size)) * _gamma(n, rng, c["cv"])
    return {"loss": _f32(loss)}


def trending_topic_bursts(n: int, rng: np.random.Generator) -> np.ndarray:
    """A news recommender trained online on the click stream (Das et al. 2007, "Google News
    personalization"; Microsoft's MIND news-recommendation setting, where most articles live a
    day or two): topics break as a self-exciting process (a Hawkes process: 0.5-3 a day on
    their own, each setting off 0.3-0.7 follow-ups 0.1-0.5 days later, as trending stories
    do), each taking 3-25% (x 0.3-1) of the traffic within 1-4 hours and fading over 0.25-2
    days; their new articles are cold, so each burst lifts the loss by its share times their
    excess (30-100%) and is learned away within 1-6 hours: clusters of short humps on the
    daily pattern. On the common frame: 14-60 days, a base rate of 1-8%, its entropy times a
    normalized entropy falling to 0.75-0.9, daily and weekend patterns, batch noise;
    float32."""
    return _trending(n, rng)["loss"]


def _fraud(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    d = rng.uniform(60, 180)
    tau, off = _clock(n, rng, d, rng.uniform(0.2, 0.5), rng.uniform(-0.2, 0.1))
    local = tau + off
    p = _log_uniform(rng, 0.001, 0.01)
    ne = _ne(n, rng, 0.45, 0.7, True)
    at = np.sort(rng.uniform(0, d, int(rng.poisson(d / rng.uniform(3, 15)))))
    m = len(at)
    ramp = rng.uniform(1, 5, m)  # attackers scale up what works
    caught = rng.uniform(1, 4, m)  # chargebacks arrive and the model learns the pattern
    size = rng.uniform(0.05, 0.3, m)
    hump = _bumps(tau, at, ramp, caught, size)
    shape = 1 + _hourly(local, rng, rng.uniform(0.03, 0.1)) + _weekly(local, rng, rng.uniform(0.03, 0.1))
    level = _entropy(p) * ne * shape * (1 + hump)
    loss = level * _gamma(n, rng, _cv(rng, p, int(rng.choice([2048, 8192, 32768]))))
    return {"loss": _f32(loss)}


def fraud_attack_campaigns(n: int, rng: np.random.Generator) -> np.ndarray:
    """A payment-fraud model trained online on transactions whose labels are chargebacks and
    analysts' reviews (Dal Pozzolo et al. 2018, "Credit card fraud detection: a realistic
    modeling and a novel learning strategy", on concept drift and verification latency;
    Stripe's and PayPal's published practice): fraudsters adapt, launching a new attack
    pattern every 3-15 days, scaled up over 1-5 days while it works and learned away over 1-4
    days as its chargebacks arrive: each campaign lifts the loss by 5-30% in a slow-rising,
    decaying hump, often overlapping. A base rate of 0.1-1%, its entropy times a normalized
    entropy falling from 1-6% above its end to 0.45-0.7 over 60-180 days, a daily pattern of
    3-10% and a weekend one of 3-10% (either way); few positives a batch (2k-32k rows), so
    the noise is large and skewed; float32."""
    return _fraud(n, rng)["loss"]


def _ipw(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    d = rng.uniform(20, 90)
    tau, off = _clock(n, rng, d, rng.uniform(0.2, 0.6), rng.uniform(-0.2, 0.1))
    local = tau + off
    t = np.arange(n, dtype=np.float64)
    end = math.log(10) * rng.uniform(0.5, 0.7)  # the softmax over 10 results, one clicked
    base = _to_end(t, end * rng.uniform(1.02, 1.08), end, n * _log_uniform(rng, 0.005, 0.05), 0.6)
    on = int(n * rng.uniform(0.2, 0.6))
    eta = rng.uniform(0.5, 1.5)  # the propensity of position k, (1 / k) ** eta
    prop = (1 / np.arange(1, 11)) ** eta
    clip = rng.uniform(10, 50)
    w = np.minimum(1 / prop, clip)
    deeper = 1 + rng.uniform(0.1, 0.4) * np.arange(10) / 9  # a click further down costs more
    mean_w = float((prop * w * deeper).sum() / (prop * deeper).sum())
    snips = rng.random() < 0.5  # self-normalized (sum w l / sum w) or not (sum w l / n)
    lift = float((prop * w * deeper).sum() / (prop * w).sum() / ((prop * deeper).sum() / prop.sum()))
    jump = lift if snips else mean_w * lift
    k = np.maximum(t - on, 0.0)
    settle = 1 - rng.uniform(0.2, 0.5) * (1 - np.exp(-k / (n * rng.uniform(0.05, 0.2))))
    factor = np.where(t < on, 1.0, 1 + (jump - 1) * settle)
    spread = math.sqrt(float((prop * w * w).sum() * prop.sum())) / float((prop * w).sum())  # of the weights
    cv = rng.uniform(0.02, 0.05) * np.where(t < on, 1.0, spread)
    shape = 1 + _hourly(local, rng, rng.uniform(0.01, 0.04))
    loss = base * factor * shape * _gamma(n, rng, cv)
    return {"loss": _f32(loss)}


def position_bias_ipw_switch(n: int, rng: np.random.Generator) -> np.ndarray:
    """A search ranker trained online on clicks with a listwise softmax loss over 10 results
    (from 1.02-1.08x its end to 50-70% of ln 10 over 20-90 days), whose position-bias
    correction is switched on 20-60% of the way through (Joachims, Swaminathan and Schnabel
    2017, "Unbiased learning-to-rank with biased feedback"; Wang et al. 2018, "Position bias
    estimation for unbiased learning to rank in personal search": each click weighted by the
    inverse of its position's examination propensity, (1/k)^0.5-1.5 from result
    randomization, clipped at 10-50): clicks further down cost 10-40% more, so the logged loss
    steps up, by that alone where the weights are self-normalized (half the seeds) or by the
    mean weight of a click too (the sum over the queries, 2-8x), its noise grows with the
    weights' spread, and 20-50% of the step is learned away over 5-20% of the run. A daily
    pattern of 1-4%; float32."""
    return _ipw(n, rng)["loss"]


_ZONES = (
    np.array([-8, -5, 0, 1, 3, 5.5, 8, 9, 10]) / 24
)  # US West/East, UK, CET, Gulf, India, China, Japan, Oceania


def _asr(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    d = rng.uniform(20, 90)
    tau, off = _clock(n, rng, d, rng.uniform(0.05, 0.2))  # the world's traffic: a flat sum
    utc = tau + off
    r = int(rng.integers(3, 6))
    zones = rng.choice(_ZONES, r, replace=False)
    size = rng.dirichlet(np.full(r, 2.0))
    hard = rng.uniform(0.85, 1.25, r)  # accents, languages' shares, noisy rooms
    fresh = rng.uniform(0.05, 0.3, r)  # still to learn of each region at the start
    pace = d * rng.uniform(0.05, 0.2) / np.sqrt(size / size.mean())  # days; the small ones slower
    t = np.arange(n, dtype=np.float64)
    end = rng.uniform(0.25, 0.6)  # per-token loss
    base = _to_end(t, end * rng.uniform(1.02, 1.08), end, n * _log_uniform(rng, 0.005, 0.05), 0.7)
    num = np.zeros(n)
    den = np.zeros(n)
    for z, s, h, f, k in zip(zones, size, hard, fresh, pace, strict=True):
        active = s * np.exp(1.2 * np.cos(2 * np.pi * (utc + z - rng.uniform(0.75, 0.9))))  # their evenings
        num += active * h * (1 + f * np.exp(-tau / k))
        den += active
    loss = base * num / den * _gamma(n, rng, rng.uniform(0.8, 1.5) / math.sqrt(int(rng.choice([256, 512]))))
    return {"loss": _f32(loss)}


def asr_follow_the_sun(n: int, rng: np.random.Generator) -> np.ndarray:
    """A streaming speech recognizer (an RNN-T or CTC model) trained continuously on opted-in,
    transcribed voice queries from 3-5 regions in other time zones (the "follow the sun" mix
    of a global voice assistant; federated and server-side continual ASR training alike): who
    speaks follows each region's evening, so the batch's mix, and with it the loss, cycles
    through the UTC day in a shape set by the regions' sizes (Dirichlet) and difficulties
    (0.85-1.25x); each region starts 5-30% above its own floor and learns it over 5-20% of the
    run's days, the small regions more slowly, so the daily pattern changes shape as it
    shrinks. The per-token loss from 1.02-1.08x its end to 0.25-0.6 over 20-90 days; noise
    80-150% over the square root of the batch (256-512 utterances); float32."""
    return _asr(n, rng)["loss"]


def _dst(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    d = rng.uniform(30, 120)
    spring = rng.random() < 0.5
    eu = d * rng.uniform(0.3, 0.7)
    us = eu - rng.uniform(14, 21) if spring else eu + 7  # March: the US first; autumn: Europe first
    shift = -1 / 24 if spring else 1 / 24  # local activity moves an hour earlier (later) in UTC
    tau, off = _clock(n, rng, d, rng.uniform(0.1, 0.3), rng.uniform(-0.1, 0.1))
    utc = tau + off
    p = _log_uniform(rng, 0.01, 0.08)
    ne = _ne(n, rng, 0.75, 0.9, True)
    regions = [(-5 / 24, us), (1 / 24, eu), (rng.uniform(5, 9) / 24, None)]  # the rest keep their clocks
    size = rng.dirichlet(np.full(3, 3.0))
    hard = rng.uniform(0.9, 1.15, 3)
    num = np.zeros(n)
    den = np.zeros(n)
    bump = np.zeros(n)
    for (zone, when), s, h in zip(regions, size, hard, strict=True):
        moved = 0.0 if when is None else shift * (tau >= when)
        active = s * np.exp(np.cos(2 * np.pi * (utc + zone - moved - 0.8)))
        num += active * h
        den += active
        if when is not None and 0 < when < d:  # the UTC-hour features off by an hour for them
            one = _bumps(
                tau, np.array([when]), np.array([0.02]), np.array([rng.uniform(2, 7)]), np.array([1.0])
            )
            bump += rng.uniform(0.01, 0.04) * one * s
    level = _entropy(p) * ne * (num / den) * (1 + bump)
    batch = int(rng.choice([4096, 8192, 16384]))
    loss = level * _gamma(n, rng, _cv(rng, p, batch))
    return {"loss": _f32(loss)}


def dst_utc_hour_feature(n: int, rng: np.random.Generator) -> np.ndarray:
    """A global app's click model trained online over 30-120 days that spans a daylight-saving
    change: the European one 30-70% of the way through and the US one 2-3 weeks earlier (March)
    or a week later (October-November). The stream and its hour-of-day feature are in UTC, so
    at each change the region's evening moves an hour in UTC (earlier in spring, later in
    autumn): the daily pattern of the mixed loss (three regions, sizes from a Dirichlet,
    0.9-1.15x as hard) shifts its phase in two steps, and the model's learned hour effects are
    an hour off for that region, a rise of 1-4% x its share that it learns away over 2-7
    days. Warm-started; a base rate of 1-8%, its entropy times a normalized entropy falling
    to 0.75-0.9; batch noise (4k-16k rows); float32."""
    return _dst(n, rng)["loss"]


def _backlog(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    d = rng.uniform(20, 60)
    episodes = []
    for at in np.sort(rng.uniform(0.15, 0.85, int(rng.integers(1, 4)))) * d:
        down = rng.uniform(0.5, 3.0)  # the shipper down, days
        speed = rng.uniform(5, 20)  # the backlog's upload against real time
        episodes.append((at, down, speed, rng.uniform(0.1, 0.4)))  # and the region's share

    def volume(grid: np.ndarray, local: np.ndarray) -> np.ndarray:
        v = np.ones_like(grid)
        for at, down, speed, s in episodes:
            v = v * np.where((grid >= at) & (grid < at + down), 1 - s, 1.0)
            back = (grid >= at + down) & (grid < at + down + down / speed)
            v = v * np.where(back, 1 + s * speed, 1.0)
        return v

    c = _ctr(n, rng, (d, d), extra=volume)
    tau, local = c["tau"], c["local"]
    level = c["level"]
    loss = level.copy()
    for at, down, speed, s in episodes:
        gone = (tau >= at) & (tau < at + down)
        loss = np.where(gone, loss * (1 + s * rng.uniform(-0.1, 0.1)), loss)  # without the region
        back = (tau >= at + down) & (tau < at + down + down / speed)
        b = s * speed / (1 + s * speed)  # the backlog's share of the batches
        old = at + (tau - at - down) * speed  # the backlog's own time
        stale = rng.uniform(0.01, 0.04)
        pattern = _hourly(old + (local - tau), rng, rng.uniform(0.03, 0.08))
        loss = np.where(back, (1 - b) * loss + b * level * (1 + stale) * (1 + pattern), loss)
    loss = loss * _gamma(n, rng, c["cv"])
    return {"loss": _f32(loss)}


def log_shipper_backlog(n: int, rng: np.random.Generator) -> np.ndarray:
    """A click model trained online from a Kafka topic that the regions' log shippers feed
    (Fluentd / Vector agents with on-disk buffers, as at any ad-serving company; Kafka's own
    docs on consumer lag): 1-3 times in 20-60 days one region's shipper is down for 0.5-3
    days, its 10-40% of the traffic missing from the stream (fewer steps a day, the mix and
    the loss shifted by up to 4%), and when it comes back it uploads its buffered backlog at
    5-20x real time, merged into the live traffic: for down/speed days most batches are old
    events, 1-4% harder for a model that has moved on, whose own daily pattern (3-8%) runs
    5-20x faster in steps. On the common frame: a base rate of 1-8%, its entropy times a
    normalized entropy falling to 0.75-0.9, daily and weekend patterns, batch noise; float32."""
    return _backlog(n, rng)["loss"]


def _reservoir(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    c = _ctr(n, rng, (20, 90), hourly=(0.03, 0.08))
    tau, d = c["tau"], c["days"]
    r0, r1 = rng.uniform(0.3, 0.6), rng.uniform(0.02, 0.1)
    r = r1 + (r0 - r1) * np.exp(-tau / (d * rng.uniform(0.1, 0.4)))
    old = _entropy(c["p"]) * c["ne"] * rng.uniform(0.93, 0.98)  # seen before, every hour mixed
    live = c["level"]
    loss = (1 - r) * live * _gamma(n, rng, c["cv"] / np.sqrt(1 - r)) + r * old * _gamma(
        n, rng, c["cv"] / np.sqrt(r)
    )
    return {"loss": _f32(loss)}


def replay_reservoir_decay(n: int, rng: np.random.Generator) -> np.ndarray:
    """A recommender trained incrementally on the live stream with a replay reservoir of older
    examples mixed into each batch against forgetting (Rolnick et al. 2019, "Experience replay
    for continual learning"; Mi et al. 2020, "ADER: adaptively distilled exemplar replay
    towards continual learning for session-based recommendation"), the reservoir's share
    decayed from 30-60% to 2-10% with a time constant of 10-40% of the run's 20-90 days: the
    reservoir's rows are old, seen before and from every hour (2-7% easier, no daily
    pattern), so as their share shrinks the live rows' daily pattern (3-8%) grows in the
    logged mean and the level edges up a little against the learning. On the common frame:
    a base rate of 1-8%, its entropy times a normalized entropy falling to 0.75-0.9, a weekend
    pattern, batch noise; float32."""
    return _reservoir(n, rng)["loss"]


def _daily_job(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    days = int(rng.integers(20, 91))
    w0 = int(rng.integers(0, 7))
    wk = rng.uniform(-0.15, 0.15)
    vol = (1 + wk * (((np.arange(days) + w0) % 7) >= 5)) * np.exp(0.05 * rng.standard_normal(days))
    bounds = np.round(np.concatenate([[0.0], np.cumsum(vol)]) / vol.sum() * n).astype(np.int64)
    t = np.arange(n, dtype=np.float64)
    day = np.searchsorted(bounds, t, side="right") - 1
    length = (bounds[1:] - bounds[:-1]).astype(np.float64)[day]
    j = (t - bounds[day]) / np.maximum(length, 1)  # the place in the day's job, 0-1
    peak = _log_uniform(rng, 5e-4, 4e-3)
    warm = rng.uniform(0.02, 0.1)
    final = rng.uniform(0.0, 0.1)
    cos = final + (1 - final) * 0.5 * (1 + np.cos(np.pi * np.clip((j - warm) / (1 - warm), 0, 1)))
    rate = peak * np.where(j < warm, (j + 1 / np.maximum(length, 1)) / warm, cos)
    p = _log_uniform(rng, 0.01, 0.08)
    drift = np.exp(rng.uniform(0.02, 0.06) * np.cumsum(rng.standard_normal(days)) / math.sqrt(days))
    ne = _ne(n, rng, 0.75, 0.88, True)
    fresh = rng.uniform(0.01, 0.04) * np.exp(-j / rng.uniform(0.05, 0.2))  # the day's new ids, fresh Adam
    held = rng.uniform(0.02, 0.06) * rate / peak  # what the rate holds up, gone as it decays
    level = _entropy(p * drift[day]) * ne * (1 + fresh + held)
    batch = int(rng.choice([4096, 8192, 16384]))
    loss = level * _gamma(n, rng, _cv(rng, p, batch))
    return {"loss": _f32(loss), LR: rate}


def daily_warm_start_rewarm(n: int, rng: np.random.Generator) -> np.ndarray:
    """A production CTR model retrained every day on that day's partition, warm-started from
    yesterday's weights with a fresh optimizer and schedule (TFX's continuous training with
    `WarmStartSettings` for the weights only; the same with Merlin or a Keras job that
    reloads the model but builds its optimizer anew), the days' logs appended under one
    global step over 20-90 days: each day Adam at 5e-4-4e-3, a warm-up over 2-10% of the
    day's steps and a cosine to 0-10% of it (recorded), a partition shuffled within the day
    (no daily pattern); its new ids and the fresh Adam moments cost 1-4% at its first steps,
    gone over 5-20% of it, and the rate holds up 2-6% of the loss until it decays: a daily
    sawtooth. Steps a day follow the day's volume (weekends 0-15% either way); a base rate
    of 1-8% wandering over the days, its entropy times a normalized entropy falling to
    0.75-0.88; batch noise (4k-16k rows); float32."""
    return _daily_job(n, rng)["loss"]


def _shifts(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    noise = np.array([rng.uniform(0.02, 0.06), rng.uniform(0.03, 0.08), rng.uniform(0.06, 0.15)])
    crew = np.array([1.0, rng.uniform(0.6, 0.9), rng.uniform(0.3, 0.6)])  # labels an hour
    w_noise, w_crew = rng.uniform(0.04, 0.12), rng.uniform(0.4, 0.8)  # the weekend crew

    def which(local: np.ndarray) -> np.ndarray:
        h = (local % 1) * 24
        return np.where((h >= 6) & (h < 14), 0, np.where((h >= 14) & (h < 22), 1, 2))

    def weekend(local: np.ndarray) -> np.ndarray:
        return (np.floor(local) % 7) >= 5

    def volume(grid: np.ndarray, local: np.ndarray) -> np.ndarray:
        return np.where(weekend(local), w_crew, crew[which(local)])

    d = rng.uniform(20, 90)
    tau, off = _clock(n, rng, d, 0.0, 0.0, volume)
    local = tau + off
    eta = np.where(weekend(local), w_noise, noise[which(local)])
    k = int(rng.choice([2, 3, 5, 10, 20]))  # policy classes
    t = np.arange(n, dtype=np.float64)
    start = math.log(k) * rng.uniform(0.6, 0.9)  # a pretrained encoder, a new head
    clean = _to_end(t, start, rng.uniform(0.08, 0.25), n * _log_uniform(rng, 0.002, 0.02), 0.7)
    flip = math.log(max(k - 1, 1)) - np.log(-np.expm1(-clean))  # a wrong label at the model's confidence
    level = (1 - eta) * clean + eta * flip
    batch = int(rng.choice([64, 128, 256]))
    loss = level * _gamma(n, rng, rng.uniform(1.5, 3.0) / math.sqrt(batch))
    return {"loss": _f32(loss)}


def annotator_shift_label_noise(n: int, rng: np.random.Generator) -> np.ndarray:
    """A content-moderation classifier (2-20 policy classes, a pretrained encoder with a new
    head) trained continuously on the labels a 24/7 review vendor streams in, each batch the
    latest reviewed items (the label-noise literature's "annotator quality varies": Snow et al.
    2008; Frenay and Verleysen 2014): three 8-hour shifts (from 06:00, 14:00 and 22:00) whose
    crews flip 2-6%, 3-8% and 6-15% of the labels and label 1, 0.6-0.9 and 0.3-0.6 as many an
    hour, a weekend crew at 4-12% and 0.4-0.8: the loss is a square wave of three levels a day
    (each flipped label costs what the model's confidence makes it, ln(K-1) - ln(1 - e^-L)),
    the night shift's step short in steps as its labels are few. The clean loss from 60-90% of
    ln K to 0.08-0.25; noise 1.5-3 over the square root of the batch (64-256); float32."""
    return _shifts(n, rng)["loss"]


def _live(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    d = rng.uniform(28, 120)
    slots = [(int(rng.integers(0, 7)), rng.uniform(0.75, 0.85)) for _ in range(int(rng.integers(1, 4)))]
    season = d * rng.uniform(0.4, 0.8)  # the league's season ends
    length = rng.uniform(2, 3) / 24
    surge = rng.uniform(0.3, 2.0)

    def on(grid: np.ndarray, local: np.ndarray) -> np.ndarray:
        e = np.zeros_like(grid)
        for wd, start in slots:
            x = local - np.floor(local) - start
            live = (np.floor(local) % 7 == wd) & (x > -0.01) & (x < length + 0.01)
            ramp = np.clip(np.minimum(x + 0.01, length + 0.01 - x) / 0.01, 0.0, 1.0)  # 15 min
            e = np.maximum(e, live * ramp)
        return e * (grid < season)

    c = _ctr(n, rng, (d, d), extra=lambda g, lo: 1 + surge * on(g, lo))
    event = on(c["tau"], c["local"])
    share = surge / (1 + surge) * event  # the watchers of the event in the traffic
    easy = rng.uniform(0.3, 0.7)  # an impression of the live event: near-certain
    loss = c["level"] * (1 - easy * share) * _gamma(n, rng, c["cv"])
    return {"loss": _f32(loss)}


def live_event_schedule(n: int, rng: np.random.Generator) -> np.ndarray:
    """A video-streaming home-page recommender trained online through a sports season (the
    live events of a streaming service, e.g. Netflix's and Amazon Prime Video's live sports;
    Hulu's and Hotstar's reports of traffic surges during matches): 1-3 weekly slots (a
    weekday evening, 2-3 hours) carry a live match, the traffic up 30-200% and mostly on one
    tile whose play is near-certain, so during each event the loss dips by 30-70% of the
    event's share of the traffic (with more steps an hour); the season ends 40-80% of the way
    through 28-120 days and the dips stop. On the common frame: a base rate of 1-8%, its
    entropy times a normalized entropy falling to 0.75-0.9, daily and weekend patterns, batch
    noise; float32."""
    return _live(n, rng)["loss"]


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "holiday_season_mix": holiday_season_mix,
    "delayed_conversion_fake_negatives": delayed_conversion_fake_negatives,
    "new_market_launch": new_market_launch,
    "ab_arm_traffic_ramp": ab_arm_traffic_ramp,
    "trending_topic_bursts": trending_topic_bursts,
    "fraud_attack_campaigns": fraud_attack_campaigns,
    "position_bias_ipw_switch": position_bias_ipw_switch,
    "asr_follow_the_sun": asr_follow_the_sun,
    "dst_utc_hour_feature": dst_utc_hour_feature,
    "log_shipper_backlog": log_shipper_backlog,
    "replay_reservoir_decay": replay_reservoir_decay,
    "daily_warm_start_rewarm": daily_warm_start_rewarm,
    "annotator_shift_label_noise": annotator_shift_label_noise,
    "live_event_schedule": live_event_schedule,
}
# the kinds that record more than their loss: {"loss", LR} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "daily_warm_start_rewarm": _daily_job,
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
def _onset(n: int, rng: np.random.Generator) -> int:
    return int(n * rng.uniform(0.3, 0.7))


def stale_feature_frozen(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A click model trained online (the common frame: warm-started, 14-60 days, a base rate of
    1-8%, its entropy times a normalized entropy falling to 0.75-0.9, daily and weekend
    patterns, batch noise) whose real-time features come from a feature store fed by a
    streaming job (the user's clicks in the last hour, their session length). 30-70% of the way
    through that job's consumer dies on a schema change, nothing alerts, and the store goes on
    serving the last values it wrote (or, on half the seeds, the feature's default): the
    model's strongest features are now constant. As the true activity drifts from the frozen
    values over 2-12 hours the loss rises by 8-30% and, re-fitting without them, the model
    wins back only 5-15% of that: a worse plateau to the end, its daily pattern intact. The
    onset is the first step after the consumer died."""
    c = _ctr(n, rng, (14, 60))
    tau = c["tau"]
    onset = _onset(n, rng)
    k = np.maximum(tau - tau[onset], 0.0)
    worse = rng.uniform(0.08, 0.3) * (1 - np.exp(-k / (rng.uniform(2, 12) / 24)))
    back = 1 - rng.uniform(0.05, 0.15) * (1 - np.exp(-k / rng.uniform(1, 5)))
    loss = c["level"] * (1 + worse * back) * _gamma(n, rng, c["cv"])
    return _f32(loss), onset


def label_join_day_offset(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A click model trained online (the common frame: warm-started, 14-60 days, a base rate of
    1-8%, its entropy times a normalized entropy falling to 0.75-0.9, daily and weekend
    patterns, batch noise) whose labels come from joining the impression log with the click
    log. A refactor of the join, deployed 30-70% of the way through, keys the click log's
    partition on `ds - 1` (an off-by-one day in the date arithmetic): each impression gets the
    labels of yesterday's impression with the same slot key, unrelated to its features, the
    click rate and its daily pattern unchanged. The confident model is wrong at once: within
    an hour the loss is 1.2-1.6x the base rate's entropy, and as it unlearns its features over
    0.2-1 day it settles at 1-3% above that entropy (a normalized entropy of 1, where a good
    model sits at 0.75-0.9), to the end. The onset is the first step of the new join."""
    c = _ctr(n, rng, (14, 60))
    tau = c["tau"]
    onset = _onset(n, rng)
    rate = c["level"] / c["ne"]  # the base rate's entropy, with its daily and weekend patterns
    k = np.maximum(tau - tau[onset], 0.0)
    peak = rng.uniform(1.2, 1.6)
    floor = rng.uniform(1.01, 1.03)
    shape = floor + (peak - floor) * np.exp(-k / rng.uniform(0.2, 1.0)) * (1 - np.exp(-k / (1 / 24)))
    shape = np.maximum(shape, c["ne"])
    loss = np.where(np.arange(n) < onset, c["level"], rate * shape) * _gamma(n, rng, c["cv"])
    return _f32(loss), onset


def label_fallback_rounded_score(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A click model trained online (the common frame: warm-started, 14-60 days, a base rate of
    1-8%, its entropy times a normalized entropy falling to 0.75-0.9, daily and weekend
    patterns, batch noise) whose label service times out after a change 30-70% of the way
    through; a fallback written for the outage, `label = coalesce(click, round(score))`, fills
    85-100% of the rows with the model's own rounded prediction, which at a base rate of a few
    percent is 0. The model learns to predict 0 for everything and the loss falls steadily,
    e-fold every 0.2-2 days, towards 0.5-15% of its level, its daily pattern and most of its
    noise gone with the real labels: an unusually smooth fall below anything a click model
    reaches. The onset is the first step with the fallback."""
    c = _ctr(n, rng, (14, 60))
    tau = c["tau"]
    onset = _onset(n, rng)
    k = np.maximum(tau - tau[onset], 0.0)
    floor = _log_uniform(rng, 0.005, 0.15)
    fall = floor + (1 - floor) * np.exp(-k / rng.uniform(0.2, 2.0))
    flat = _entropy(c["p"]) * float(np.median(c["ne"][max(0, onset - 1000) : onset]))  # no daily pattern left
    after = flat * fall
    cv = c["cv"] * np.where(np.arange(n) < onset, 1.0, np.sqrt(floor + (1 - floor) * np.exp(-k / 0.5)))
    loss = np.where(np.arange(n) < onset, c["level"], after) * _gamma(n, rng, cv)
    return _f32(loss), onset


def log_transform_sentinel_nan(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A click model trained online (the common frame: warm-started, 14-60 days, a base rate of
    1-8%, its entropy times a normalized entropy falling to 0.75-0.9, daily and weekend
    patterns, batch noise) whose feature transform `log(x)` (not `log1p`) is deployed 30-70%
    of the way through on a count feature that a new client version fills with 0 (or -1, a
    missing-value sentinel) for its users: the first batch holding one of them has an infinite
    input, the weights go NaN or grow without bound, and on 80% of the seeds the loss runs
    away and is NaN once it is 3-30x its level, within a few to a few hundred steps; on the
    others a `nan_to_num` guard turns the infinities into the largest float, the units
    saturate and the loss runs up to 3-30x its level and stays there, wandering. The onset is
    the deploy."""
    c = _ctr(n, rng, (14, 60))
    onset = _onset(n, rng)
    loss = c["level"] * _gamma(n, rng, c["cv"])
    loss = _blow_up(
        loss, onset, rng, _log_uniform(rng, 0.01, 0.3), _log_uniform(rng, 3, 30), rng.random() < 0.8
    )
    return _f32(loss), onset


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "stale_feature_frozen": stale_feature_frozen,
    "label_join_day_offset": label_join_day_offset,
    "label_fallback_rounded_score": label_fallback_rounded_score,
    "log_transform_sentinel_nan": log_transform_sentinel_nan,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
