"""What the rules know of a run's parameter updates, shared by the rules that judge weights and
gradients (`weight_update_ratio`, `unchanged_tensor`, `all_zero`, `vanishing_gradient`,
`dead_relu`, `poor_weight_initialization`, `frozen_layer_updated`) and the diagnoses:

- an update that blew a weight up (`blows`, `blown_weight`, `Blowup`: a learning rate far too high);
- a step held by gradient accumulation (`held`: no parameter moved, within the run's own period);
- a gradient's mean |g| over the entries that got one (`mean_nonzero`), and one waking behind
  a gate initialized at 0 (`gradient_rising`, `gate_opening`);
- an update below float32's resolution next to its weight (`rounds_away`, `learning_rate`,
  `fastest_update`).
"""

from __future__ import annotations

import bisect
import math
import weakref
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import MldbgError
from mldbg.rules.columns import Over, present_rows
from mldbg.rules.losses import LEARNING_RATE as LEARNING_RATE_RECORD
from mldbg.rules.stats import trend_z
from mldbg.rules.view import TrialView
from mldbg.store import layout, markers
from mldbg.store.markers import WorkerMeta

#: an update at least this share of the weight's size after it (|w_t - w_t-1| / |w_t|) blew the
#: weight up: a healthy step moves a weight by 1e-4 to 1e-2 of its size, a few such steps between
#: saved steps by less than 0.1; a learning rate 100x too high moves it by several times itself
BLOWN = 0.5
#: and the weight's gain after it, mean(w^2) x fan-in (the smaller of the two fan-in
#: candidates), above this: it multiplies its input's variance 10x or more, the signal
#: explodes (a variance-preserving init has gain 1/3 to 2). An update that moves a weight by
#: its size but leaves it small (an init of std 1e-5: any update dwarfs it) blew nothing up:
#: the init was at fault there, not the learning rate
GAIN = 10.0


#: the longest gradient-accumulation period (training steps between optimizer steps) waited
#: out before the run has shown one: `held`
ACCUMULATION_MAX = 16

_MOTION: weakref.WeakKeyDictionary[TrialView, _Motion] = weakref.WeakKeyDictionary()


class _Motion:
    """Per saved training step where the hook measured a parameter's change (`delta_l2`):
    its global step, and whether any parameter moved there (and whether that was `held`),
    as arrays grown as the run grows; and the steps where the optimizer's learning rate was
    recorded, kept until one of its records is added. `held_at` reads them in one binary
    search per call: nothing is rebuilt per call (per step, that was O(run) each)."""

    def __init__(self) -> None:
        self.covered = 0  # the run's global steps (`columns.steps()`) looked at
        self.steps = np.zeros(0, dtype=np.int64)  # global training steps with a measured change
        self.held = np.zeros(0, dtype=bool)  # there: `held`
        self.still = np.zeros(0, dtype=bool)  # there: no parameter moved
        self.last: int | None = None  # the mode step of the last move (at first: of the first training step)
        self.gap: int | None = None  # the longest interval between two moves so far
        self.per_update = False  # the hook's training steps are optimizer steps (`_steps_are_updates`)
        # (the learning-rate records' names and how many steps each has) -> their steps, merged
        self._stepped: tuple[tuple[tuple[str, int], ...], np.ndarray] | None = None

    def extend(self, trial: TrialView) -> None:
        """Take in the run's global steps loaded since the last call: of its training steps,
        those where a weight or bias has a measured change (a binary search of each
        parameter's own steps, then its statistics at those steps only)."""
        every = trial.columns.steps()
        if len(every) <= self.covered:
            return
        fresh = every[self.covered :]
        self.covered = len(every)
        modes, mode_steps = trial.columns.modes(fresh)
        train = modes == int(Mode.TRAIN)
        if not train.any():
            return
        new, new_at = fresh[train], mode_steps[train]
        if self.last is None:
            self.last = int(new_at[0])
        names = trial.names(("weights", "biases"))
        saved = np.zeros(len(new), dtype=bool)  # a parameter has a record there
        for name in names:
            saved[present_rows(trial, name, new)] = True
        rows = np.flatnonzero(saved)
        if not len(rows):
            return
        new, new_at = new[rows], new_at[rows]
        known = np.zeros(len(new), dtype=bool)
        moved = np.zeros(len(new), dtype=bool)
        for name in names:
            over = Over(trial, name, new)
            delta = over.stat("delta_l2")
            ok = over.present & (over.mode == int(Mode.TRAIN)) & np.isfinite(delta)
            known |= ok
            moved |= ok & (np.nan_to_num(delta) > 0)
        keep = np.flatnonzero(known)
        if not len(keep):
            return
        at, move = new_at[keep].astype(np.int64), moved[keep]
        # the model's moves in order: each one's interval from the move before it (the first
        # from `last`), and the longest interval up to it; a still step is held while it is
        # closer to the move before it than the longest interval so far (`ACCUMULATION_MAX`
        # before any interval)
        moves = at[move]
        before = np.concatenate(([self.last], moves[:-1])) if len(moves) else moves
        longest = np.maximum.accumulate(moves - before) if len(moves) else moves
        if self.gap is not None and len(longest):
            longest = np.maximum(longest, self.gap)
        k = np.cumsum(move) - 1  # the last move at or before each step (-1: none in this batch)
        prev = np.where(k >= 0, moves[np.maximum(k, 0)] if len(moves) else 0, self.last)
        if len(moves):
            limit = np.where(k >= 0, longest[np.maximum(k, 0)], self.gap or 0)
        else:
            limit = np.full(len(at), self.gap or 0, dtype=np.int64)
        limit = np.where(limit > 0, limit, ACCUMULATION_MAX)  # `gap or ACCUMULATION_MAX`
        held = ~move & (at - prev < limit)
        if len(moves):
            self.gap = int(longest[-1])
            self.last = int(moves[-1])
        self.steps = np.concatenate((self.steps, new[keep]))
        self.still = np.concatenate((self.still, ~move))
        self.held = np.concatenate((self.held, held))

    def stepped(self, trial: TrialView, rates: list[str]) -> np.ndarray:
        """The global steps where a learning rate (`rates`, its records) was recorded, merged;
        merged again only when a record was added."""
        cols = [trial.columns.tensor(n) for n in rates]
        key = tuple((n, -1 if c is None else len(c.steps)) for n, c in zip(rates, cols, strict=True))
        if self._stepped is None or self._stepped[0] != key:
            found = [c.steps for c in cols if c is not None and len(c.steps)]
            merged = (
                np.unique(np.concatenate(found)).astype(np.int64) if found else np.zeros(0, dtype=np.int64)
            )
            self._stepped = (key, merged)
        return self._stepped[1]


def _steps_are_updates(trial: TrialView) -> bool:
    """The run was recorded by PyTorch's hook (its worker's meta names the framework), whose
    training steps end at the optimizer's step."""
    for worker in trial.workers():
        try:
            meta = markers.load(trial.store, layout.meta_key(worker), WorkerMeta)
        except MldbgError:
            continue
        if meta is not None:
            return meta.framework.startswith("torch")
    return False


def held(trial: TrialView, step: int) -> bool:
    """Whether no parameter moved at the saved training `step` because the run accumulates
    gradients (PyTorch's optimizer.step() every k micro-batches, optax.MultiSteps, Keras'
    gradient_accumulation_steps): every parameter's measured change there is exactly 0, and the
    model has stood still since its last move (or the run's first step) for fewer training
    steps than the longest interval between two moves the run has shown, or, before its first
    move, than `ACCUMULATION_MAX`. Such a step is no evidence that a weight is stuck, zero or
    updated too little: judged over the accumulation period, the weights move every k steps.
    A model still for longer than that (an optimizer that stopped, a learning rate of 0 from
    the start) is not held. False where the change was not measured (raw tensors only), and
    in a run whose hook ends each training step at the optimizer's step (the PyTorch hook,
    which records the optimizer's learning rate, `learning_rate/<model>`, once it has seen
    one): every step there applied an update, so a model that stood still was not
    accumulating (a learning rate of 0 or 1e-10 is reported at once). PyTorch's hook ends a
    step at the optimizer's step, or at the backward where no optimizer holds the model: a
    loop that accumulates steps its optimizer every k backwards, and the hook counts those
    steps, so no step of a run it recorded is held (an optimizer built on other parameters
    is reported at once), but one where no optimizer stepped: a TRAIN forward and backward
    that no `optimizer.step()` follows (EWC's Fisher estimate after a task, per-sample
    gradients for saliency or influence) ends its step too, and records no learning rate.
    A step where no parameter moved and no learning rate was recorded over the interval its
    change is measured over (from the previous measured step up to it) applied no update:
    held (judged when the run ends, `idle_tail`: a loop that stops calling optimizer.step()
    for good). An optimizer that steps with a learning rate of 0 records it: not held."""
    return bool(held_at(trial, np.asarray([step], dtype=np.int64))[0])


def held_at(trial: TrialView, steps: np.ndarray) -> np.ndarray:
    """`held` at each of `steps` (a boolean array): the run's kind and motion read once,
    then one lookup for all of them (the rules' fast paths)."""
    out = np.zeros(len(steps), dtype=bool)
    rates = trial.names(None, regex="^" + LEARNING_RATE_RECORD)
    motion = _MOTION.get(trial)
    if motion is None:
        motion = _MOTION[trial] = _Motion()
        motion.per_update = _steps_are_updates(trial)
    if (motion.per_update and not rates) or not len(steps):
        return out
    motion.extend(trial)
    if not len(motion.steps):
        return out
    known = motion.steps
    at = np.minimum(np.searchsorted(known, steps), len(known) - 1)
    if not rates:
        return (known[at] == steps) & motion.held[at]
    # PyTorch's hook records the learning rate at each statistics step where an optimizer
    # stepped: a step where nothing moved and no optimizer stepped over the interval its
    # change is measured from (the previous measured step up to it) applied no update
    stepped = motion.stepped(trial, rates)
    since = np.where(at > 0, known[np.maximum(at - 1, 0)], -1)
    none = np.searchsorted(stepped, steps, side="left") == np.searchsorted(stepped, since, side="left")
    return (known[at] == steps) & motion.still[at] & (since >= 0) & none


def idle_tail(trial: TrialView) -> tuple[int, int, int] | None:
    """In a run whose hook records the optimizer's steps (PyTorch's learning rate records):
    the trailing measured training steps that applied no update (`held` there: nothing moved,
    no optimizer stepped) as (first, last, how many); None when the run's last measured
    training step updated, or the run records no learning rate."""
    if not trial.names(None, regex="^" + LEARNING_RATE_RECORD):
        return None
    held_at(trial, np.zeros(1, dtype=np.int64))  # the run's motion, read up to now
    motion = _MOTION.get(trial)
    if motion is None or not len(motion.steps):
        return None
    known = motion.steps
    idle = held_at(trial, known)
    if not idle[-1]:
        return None
    moved = np.flatnonzero(~idle)
    start = int(moved[-1]) + 1 if len(moved) else 0
    return int(known[start]), int(known[-1]), len(known) - start


def blows(delta: Any, size: Any, shape: tuple[int, ...] | None) -> Any:
    """Whether an update of norm `delta` left a weight of norm `size` and `shape` blown up
    (`BLOWN`, `GAIN`): the one test of both paths (floats, or arrays of them). A weight of
    fewer than two axes, or of an unknown shape, is not judged."""
    size = np.asarray(size, dtype=np.float64)
    if shape is None or len(shape) < 2 or min(shape[0], shape[-1]) < 1:
        return np.zeros(size.shape, dtype=bool)
    count = math.prod(shape)
    fan = min(count / shape[0], count / shape[-1])
    with np.errstate(invalid="ignore", over="ignore"):
        return (size > 0) & (np.asarray(delta) >= BLOWN * size) & (size * size / count * fan >= GAIN)


def weight_shape(trial: TrialView, name: str, step: int) -> tuple[int, ...] | None:
    """The shape of weight `name` at `step` (its raw value or its record), None if unknown."""
    layout = trial.layout(name, step)
    return None if layout is None else tuple(int(n) for n in layout[1])


def _kernels(trial: TrialView, step: int | None = None) -> list[str]:
    """The weights (not biases) recorded in the run, or saved at `step`: those whose update's
    size relative to theirs is judged (`blown_weight`, its screen, `fastest_update`)."""
    return [n for n in trial.names("weights", step=step) if "bias" not in n.lower()]


def blown_weight(trial: TrialView, step: int) -> tuple[str, float] | None:
    """(name, |update| / |weight|) of a weight (not a bias) that an update blew up at `step`
    (`BLOWN`), from its `delta_l2` and `l2` (saved, or from the raw weights); else None. After
    such a step, units that died, gradients that vanished and updates that became tiny are its
    effects, not the initialization's or a freeze's: the rules that judge them ask this."""
    if trial.mode(step) != Mode.TRAIN:
        return None
    for name in _kernels(trial, step):
        delta, size = trial.statistic(name, step, "delta_l2"), trial.statistic(name, step, "l2")
        if not isinstance(delta, float) or not isinstance(size, float) or not math.isfinite(delta + size):
            continue
        if blows(delta, size, weight_shape(trial, name, step)):
            return name, delta / size
    return None


class Blowup:
    """The first training step, in the whole run up to a step, where an update blew a weight
    up (`blown_weight`), scanned once from where the last call stopped: the same answer
    whichever steps a rule's paths looked at. A rule holds one in its state."""

    def __init__(self) -> None:
        self.scanned = -1  # the last step looked at
        # (step, weight, |update| / |weight before it|: where the weight's previous record is
        # readable, else / |weight after it|)
        self.found: tuple[int, str, float] | None = None

    def upto(self, trial: TrialView, step: int) -> tuple[int, str, float] | None:
        if self.found is None and step > self.scanned:
            for at in _blowup_candidates(trial, self.scanned, step):
                if (hit := blown_weight(trial, at)) is not None:
                    name, ratio = hit
                    saved = trial.tensor(name).steps(Mode.TRAIN)
                    before = [s for s in saved if s < at]
                    size = trial.statistic(name, before[-1], "l2") if before else None
                    delta = trial.statistic(name, at, "delta_l2")
                    if isinstance(size, float) and isinstance(delta, float) and size > 0:
                        ratio = delta / size
                    self.found = (at, name, ratio)
                    break
            self.scanned = step
        return self.found if self.found is not None and self.found[0] <= step else None


def _blowup_candidates(trial: TrialView, after: int, upto: int) -> list[int]:
    """The training steps in (`after`, `upto`] where `blown_weight` may find a blown weight, in
    order: those where a weight's saved `delta_l2` is at least `BLOWN` x its saved `l2` (a
    superset of `blows`, which `blown_weight` then confirms), and those where a weight's record
    holds its raw value without them (`blown_weight` computes them there). Read from the
    columns: a run of 10^6 steps whose weights are saved at 10^4 is screened in one pass per
    weight, not asked step by step."""
    found: set[int] = set()
    for name in _kernels(trial):
        cols = trial.columns.tensor(name)
        if cols is None or not len(cols.steps):
            continue
        lo, hi = np.searchsorted(cols.steps, [after, upto], side="right")
        if lo >= hi:
            continue
        delta, size = cols.statistic("delta_l2"), cols.statistic("l2")
        span = slice(int(lo), int(hi))
        unknown = cols.has_raw[span]
        if delta is None or size is None:
            may = unknown
        else:
            d, w = delta[span], size[span]
            with np.errstate(invalid="ignore"):
                may = (w > 0) & (d >= BLOWN * w)
            may |= unknown & ~(np.isfinite(d) & np.isfinite(w))
        found.update(cols.steps[span][may & (cols.mode[span] == Mode.TRAIN.value)].tolist())
    return sorted(found)


def over_nonzero(mean_abs: np.ndarray, zero_fraction: np.ndarray) -> np.ndarray:
    """mean |g| over the entries that got a gradient: mean_abs / (1 - zero_fraction), where
    the zero fraction is known and below 1 (else mean_abs as it is)."""
    nonzero = 1.0 - np.nan_to_num(zero_fraction, nan=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(nonzero > 0, mean_abs / np.where(nonzero > 0, nonzero, 1.0), mean_abs)


def mean_nonzero(trial: TrialView, name: str, step: int) -> float | None:
    """`over_nonzero` of one gradient at one step; None when mean_abs is not saved there."""
    m = trial.statistic(name, step, "mean_abs")
    if not isinstance(m, float):
        return None
    z = trial.statistic(name, step, "zero_fraction")
    zero = z if isinstance(z, float) else float("nan")
    return float(over_nonzero(np.array([m]), np.array([zero]))[0])


#: `gradient_rising`: the saved steps it looks back over, the one-sided Mann-Kendall z its
#: trend must reach (5%), and how many times the smallest of them the last must be
RISING_WINDOW = 10
RISING_Z = 1.645
RISING_GROWTH = 2.0


def last_train_steps(trial: TrialView, name: str, step: int, count: int) -> list[int]:
    """The last `count` saved TRAIN steps of tensor `name` up to and including `step`, in
    order (fewer where it has fewer): read back from `step`, not over the whole run."""
    saved = trial.tensor(name).steps()
    out: list[int] = []
    for i in range(bisect.bisect_right(saved, step) - 1, -1, -1):
        if len(out) == count:
            break
        if trial.mode(saved[i]) == Mode.TRAIN:
            out.append(saved[i])
    out.reverse()
    return out


def gradient_rising(trial: TrialView, grad: str, step: int) -> bool:
    """Whether gradient `grad`'s mean |g| (over the entries that got one: mean_abs / (1 -
    zero_fraction)) is rising, at the last `RISING_WINDOW` saved training steps up to `step`:
    a significant upward trend (one-sided Mann-Kendall z >= `RISING_Z`, 5%; a stationary
    noisy gradient passes it once in 20 looks, and then a step later it no longer does) that
    grew the gradient `RISING_GROWTH` times its smallest there. Such a gradient is waking, not
    vanishing: the branch behind a gate initialized at 0 (ResNet's zero-init of the last BN
    gamma in each block, layer scale, ReZero, adaLN-Zero) gets exactly no gradient at step 0,
    then a gradient that grows with the gate, slowly while a learning-rate warm-up holds the
    gate's steps small; its weights stand still in float32 meanwhile (an update below the
    weight's resolution rounds to nothing). A gradient that vanished (deep sigmoids), or whose
    weight the optimizer ignores, stays at its level or falls: the rules that judge them wait
    while the trend lasts, and report once it stops."""
    steps = last_train_steps(trial, grad, step, RISING_WINDOW)
    if len(steps) < 4:
        return False
    values = []
    for s in steps:
        m = mean_nonzero(trial, grad, s)
        if m is None or not math.isfinite(m):
            return False
        values.append(m)
    return trend_z(values) >= RISING_Z and values[-1] >= RISING_GROWTH * min(values) and values[-1] > 0


#: `rounds_away`: the most a step of SGD with momentum (0.9) moves a weight, in units of
#: lr x |gradient| (1 / (1 - 0.9)), and the float32 spacing's lower half-ulp next to |w|
#: (2^-25 |w|: an update below it rounds to nothing, whatever |w|'s place in its binade)
MOMENTUM_GAIN = 10.0
HALF_ULP = 2.0**-25


def learning_rate(trial: TrialView, step: int, since: int | None = None) -> float | None:
    """The largest learning rate the PyTorch hook recorded (`learning_rate/<model>`, over the
    models) at the steps whose updates a record at `step` measures: from `since` (the
    record before) up to `step`, not including it; without `since`, or where none was
    recorded there, its last record up to `step`. None when none is recorded."""
    found = None
    for name in trial.names(None, regex="^" + LEARNING_RATE_RECORD):
        saved = trial.tensor(name).steps()
        end = bisect.bisect_right(saved, step)
        at = (
            saved[bisect.bisect_left(saved, since) : bisect.bisect_left(saved, step)]
            if since is not None
            else []
        )
        for s in at or saved[max(0, end - 1) : end]:
            v = trial.saved_statistic(name, s, "sum")
            if isinstance(v, float) and math.isfinite(v):
                found = v if found is None else max(found, v)
    return found


#: `rounds_away`: the fastest weight's |update| / |weight| at the step must be above this
#: (float32's resolution, 2^-23, ten times over): the learning rate moves the net, so a weight
#: left behind owes it to its own gradient, not to a learning rate of 1e-10 (which leaves
#: every weight's update below it)
NET_MOVES = 10 * 2.0**-23


def fastest_update(trial: TrialView, step: int) -> float | None:
    """The largest |update| / |weight| over the weights (not biases) the hook measured at
    `step` (`delta_l2` / `l2`); None when none was. The largest, not the median: behind the
    zero-initialized gates of a small ResNet, most weights may be the ones left behind."""
    ratios = []
    for name in _kernels(trial, step):
        delta, size = trial.statistic(name, step, "delta_l2"), trial.statistic(name, step, "l2")
        if isinstance(delta, float) and isinstance(size, float) and math.isfinite(delta) and size > 0:
            ratios.append(delta / size)
    return max(ratios) if ratios else None


def rounds_away(trial: TrialView, weight: str, grad: str | None, step: int, since: int | None) -> bool:
    """Whether weight `weight`'s updates up to `step` were too small for float32 to show: the
    recorded learning rate (above 0) x its gradient's mean |g| (the largest at its saved steps
    from `since` to `step`) x `MOMENTUM_GAIN` is below `HALF_ULP` x the weight's RMS. A weight
    of 1 (a BatchNorm gamma) behind a gate initialized at 0, under a warm-up's learning rate
    of 1e-3, gets a gradient of 1e-7 and an update of 1e-9: it rounds to nothing, and the
    weight stands still exactly while the optimizer does its job. Only where the net moves
    at the step (`fastest_update` above `NET_MOVES`): a learning rate of 1e-10 rounds every
    update away, and that is the bug. A learning rate of 0, or none
    recorded, or a gradient large enough to show, decides nothing here (False)."""
    if grad is None:
        return False
    fastest = fastest_update(trial, step)
    if fastest is None or not fastest > NET_MOVES:
        return False
    lr = learning_rate(trial, step, since)
    if lr is None or not lr > 0:
        return False
    l2 = trial.statistic(weight, step, "l2")
    shape = weight_shape(trial, weight, step)
    if not isinstance(l2, float) or not math.isfinite(l2) or shape is None:
        return False
    rms = l2 / math.sqrt(max(1, math.prod(shape)))
    saved = trial.tensor(grad).steps()
    lo = bisect.bisect_left(saved, step if since is None else since)
    sizes: list[float] = []
    for at in saved[lo : bisect.bisect_right(saved, step)][-16:]:
        m = trial.statistic(grad, at, "mean_abs")
        if not isinstance(m, float) or not math.isfinite(m):
            return False
        sizes.append(m)
    return bool(sizes) and lr * max(sizes) * MOMENTUM_GAIN < HALF_ULP * rms


def gate_opening(trial: TrialView, grad: str, step: int) -> bool:
    """Whether gradient `grad` is that of a weight behind a gate initialized at 0, opening:
    its mean |g| was exactly 0 at its first saved training step and is above 0 at `step`'s
    (the gate, ResNet's zero-init of a block's last BN gamma or ReZero's alpha, blocked all of
    it, and now lets some through), and it has either had at most `RISING_WINDOW` saved
    training steps to open (a warm-up's small learning rate opens it slowly), or is still
    rising (`gradient_rising`). A vanishing gradient (deep sigmoids) is never exactly 0; a
    dead ReLU's stays 0; a gradient the optimizer ignores does not start at 0: none is
    held."""
    saved = trial.tensor(grad).steps()
    end = bisect.bisect_right(saved, step)
    train: list[int] = []
    for at in saved[:end]:
        if trial.mode(at) == Mode.TRAIN:
            train.append(at)
            if len(train) > RISING_WINDOW:
                break
    if not train or trial.statistic(grad, train[0], "mean_abs") != 0.0:
        return False
    last = next((at for at in reversed(saved[:end]) if trial.mode(at) == Mode.TRAIN), None)
    now = None if last is None else trial.statistic(grad, last, "mean_abs")
    if not isinstance(now, float) or not now > 0:
        return False
    return len(train) <= RISING_WINDOW or gradient_rising(trial, grad, step)


LR_TOO_HIGH = (
    "Lower the learning rate (by 10x or more), add a warm-up, or clip gradients "
    "(torch.nn.utils.clip_grad_norm_): an update far too large threw the weights off, and what "
    "followed is its doing, not the initialization's."
)
