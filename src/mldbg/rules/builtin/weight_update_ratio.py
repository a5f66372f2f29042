"""weight_update_ratio: updates far too small or too large for the weights."""

from __future__ import annotations

import bisect
import math
import weakref
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import MldbgError
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix
from mldbg.rules.losses import LEARNING_RATE as LEARNING_RATE_RECORD
from mldbg.rules.select import gradient_names, short_list
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
    its mode step, and whether any parameter moved there. Grown as the run grows."""

    def __init__(self) -> None:
        self.covered = 0  # training steps of the trial looked at
        self.steps: list[int] = []  # global steps with a measured change
        self.held: list[bool] = []  # there: `held`
        self.last: int | None = None  # the mode step of the last move (at first: of the first step)
        self.gap: int | None = None  # the longest interval between two moves so far
        self.per_update = False  # the hook's training steps are optimizer steps (`_steps_are_updates`)

    def extend(self, trial: TrialView) -> None:
        train = trial.steps(Mode.TRAIN)
        if len(train) <= self.covered:
            return
        new = np.asarray(train[self.covered :], dtype=np.int64)
        if self.last is None:
            self.last = trial.mode_step(int(new[0]))
        self.covered = len(train)
        known = np.zeros(len(new), dtype=bool)
        moved = np.zeros(len(new), dtype=bool)
        for name in trial.names(("weights", "biases")):
            over = Over(trial, name, new)
            delta = over.stat("delta_l2")
            ok = over.present & (over.mode == int(Mode.TRAIN)) & np.isfinite(delta)
            known |= ok
            moved |= ok & (np.nan_to_num(delta) > 0)
        for k in np.flatnonzero(known).tolist():
            at = trial.mode_step(int(new[k]))
            self.steps.append(int(new[k]))
            if moved[k]:
                self.gap = max(self.gap or 0, at - self.last)
                self.last = at
                self.held.append(False)
            else:
                self.held.append(at - self.last < (self.gap or ACCUMULATION_MAX))


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
    is reported at once)."""
    if trial.names(None, regex="^" + LEARNING_RATE_RECORD):
        return False
    motion = _MOTION.get(trial)
    if motion is None:
        motion = _MOTION[trial] = _Motion()
        motion.per_update = _steps_are_updates(trial)
    if motion.per_update:
        return False
    motion.extend(trial)
    i = bisect.bisect_left(motion.steps, step)
    return i < len(motion.steps) and motion.steps[i] == step and motion.held[i]


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


def blown_weight(trial: TrialView, step: int) -> tuple[str, float] | None:
    """(name, |update| / |weight|) of a weight (not a bias) that an update blew up at `step`
    (`BLOWN`), from its `delta_l2` and `l2` (saved, or from the raw weights); else None. After
    such a step, units that died, gradients that vanished and updates that became tiny are its
    effects, not the initialization's or a freeze's: the rules that judge them ask this."""
    if trial.mode(step) != Mode.TRAIN:
        return None
    for name in trial.names("weights", step=step):
        if "bias" in name.lower():
            continue
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
            train = trial.steps(Mode.TRAIN)
            for at in train:
                if self.scanned < at <= step and (hit := blown_weight(trial, at)) is not None:
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


#: `gradient_rising`: the saved steps it looks back over, the one-sided Mann-Kendall z its
#: trend must reach (5%), and how many times the smallest of them the last must be
RISING_WINDOW = 10
RISING_Z = 1.645
RISING_GROWTH = 2.0


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
    saved = trial.tensor(grad).steps()
    steps: list[int] = []
    for at in reversed(saved[: bisect.bisect_right(saved, step)]):
        if trial.mode(at) == Mode.TRAIN:
            steps.insert(0, at)
            if len(steps) == RISING_WINDOW:
                break
    if len(steps) < 4:
        return False
    values = []
    for s in steps:
        m, z = trial.statistic(grad, s, "mean_abs"), trial.statistic(grad, s, "zero_fraction")
        if not isinstance(m, float) or not math.isfinite(m):
            return False
        if isinstance(z, float) and 0 <= z < 1:
            m /= 1.0 - z
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
    for name in trial.names("weights", step=step):
        if "bias" in name.lower():
            continue
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


@register
class WeightUpdateRatio(Rule):
    """|update| / |weight| (L2 norms) between consecutive saved training steps is below
    `small_threshold` or above `large_threshold`, at `patience` consecutive checks.

    A healthy update moves a weight by roughly 1e-4 to 1e-2 of its size per step. Far below,
    training crawls (the learning rate is orders of magnitude too small, or the optimizer
    holds other parameters); far above, it is unstable. `num_steps` checks every n-th saved
    step only. Weights that get no gradient (frozen on purpose, `requires_grad=False`) are
    skipped (no gradient at the saved step before, whose update the ratio measures: an expert
    of a mixture that got no token there too), and weights near 0 (|w| < `epsilon` per
    element) have no meaningful ratio. Reads
    raw weights, else the `delta_l2` (|update|) and `l2` statistics a two-line hook records
    every step (exact too); with only reductions saved, only "too large" is checked (from the
    change of the L2 norm, a lower bound of |update|). A step that changed nothing at all (no
    weight moved, and every loss of the step is the same number as at the previous saved
    training step: full-batch L-BFGS that met its tolerance, an optimizer at its minimum) is
    not a tiny update: nothing was left to update.

    Nor are the tiny updates of a run whose weights an update blew up before (a weight moved
    by at least half its size after the update, `BLOWN`, leaving it a gain above `GAIN`: a
    learning rate far too high): its
    units died and their gradients are 0, and "raise the learning rate" would be the opposite
    of the cure. The "too large" side judges that run. Nor those of a weight behind a gate
    initialized at 0 that is opening (`gate_opening`: its gradient exactly 0 at the first
    saved step, above 0 now, and within 10 saved steps or still rising): under a warm-up's
    small learning rate (ResNet's zero-init of the last BN gamma of each block) the update
    rounds to nothing next to a weight of 1 in float32 until the gradient has grown; judged
    once the rise stops.
    Nor the steps of a run that accumulates gradients (`held`: no parameter moved, within the
    run's own interval between optimizer steps): the ratio of 0 there is no update due, not a
    tiny one; the ratios are judged at the steps that apply the accumulated update.
    Nor a weight whose update is below what float32 can show next to it (`rounds_away`: the
    recorded learning rate x its gradient x 10 for momentum below 2^-25 x its RMS, while
    other weights move): the optimizer applied an update, and rounding kept it.
    """

    needs = ("weights",)
    reads = {"weights": ("delta_l2", "l2")}
    num_steps: int | None = None
    large_threshold: float = 10.0
    small_threshold: float = 1e-8
    epsilon: float = 1e-9
    patience: int = 3

    def reset(self) -> None:
        super().reset()
        self._prev: dict[str, tuple[int, np.ndarray | float]] = {}  # per weight, its last (step, value or L2)
        self._streak: dict[tuple[str, str], int] = {}  # (weight, "small"/"large") -> checks in a row
        self._ratios: dict[str, float] = {}  # per weight, its last ratio
        self._count = 0  # training steps seen (for `num_steps`)
        self._blown: tuple[int, str, float] | None = None  # (step, weight, ratio) of the first blow-up

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading training `steps` where no weight's ratio streak reaches `patience`, from
        the saved `delta_l2` and `l2` (a raw weight, or an L2 that may be a saved NaN, ends
        them); `_prev`, the streaks and the ratios are brought up to date as in `check`.
        Declines with `num_steps` (it counts checks)."""
        if self.num_steps:
            return 0
        names = trial.names("weights")
        if not names:
            return len(steps)
        grads = gradient_names(trial) if trial.has_collection("gradients") else {}
        any_grad = np.zeros(len(steps), dtype=bool)
        grad_at: dict[str, np.ndarray] = {}
        if grads:
            for g in trial.names("gradients"):
                grad_at[g] = Over(trial, g, steps).present
                any_grad |= grad_at[g]
        train = np.zeros(len(steps), dtype=bool)
        # steps where the run accumulates gradients (`held`): check() leaves them out
        interesting = np.asarray([held(trial, int(s)) for s in steps], dtype=bool)
        blown = np.zeros(len(steps), dtype=bool)  # a weight blew up at that step (`BLOWN`)
        small_reach = np.zeros(len(steps), dtype=bool)  # a "small" streak reaches `patience` there
        updates = []
        for name in names:
            over = Over(trial, name, steps)
            rows = over.present & (over.mode == int(Mode.TRAIN))
            train |= rows
            l2, delta = over.stat("l2"), over.stat("delta_l2")
            cols = trial.columns.tensor(name)
            keyed = cols is not None and cols.statistic("l2") is not None
            interesting |= rows & (over.raw | (np.isnan(l2) & keyed))
            idx = np.flatnonzero(rows & ~over.raw & ~np.isnan(l2))
            if not len(idx):
                continue
            cur = l2[idx]
            prev = self._prev.get(name)
            before = np.nan
            if prev is not None and isinstance(prev[1], np.ndarray):
                interesting[idx[0]] = True  # the previous value is raw: check() compares the two
            elif prev is not None:
                before = float(prev[1])
            old = np.concatenate([[before], cur[:-1]])
            d = delta[idx]
            exact = np.isfinite(d)
            with np.errstate(all="ignore"):
                ratio = np.where(exact, d, np.abs(cur - old)) / (old + self.epsilon)
            interesting[idx[exact & (ratio == 0)]] = True  # no step at all? check() looks at the loss
            judged = np.isfinite(old) & (old >= self.epsilon) & np.isfinite(ratio)
            if prev is None:
                judged[0] = False
            if grads:  # no gradient at the record before, a step that has gradients: nothing to apply
                grad = grads.get(name)
                none = np.zeros(len(steps), dtype=bool)
                g_here = none if grad is None else grad_at.get(grad, none)
                had = ~(any_grad[idx] & ~g_here[idx])  # at each record: a gradient, or none saved at all
                before_first = prev is None or self._applied(trial, grads, name, prev[0])
                judged &= np.concatenate([[before_first], had[:-1]])
            if "bias" not in name.lower():
                shape = weight_shape(trial, name, int(steps[idx[0]]))
                blown[idx[judged & exact & blows(d, cur, shape)]] = True
            streaks = {}
            for kind, hit in (
                ("small", exact & (ratio < self.small_threshold)),
                ("large", ratio > self.large_threshold),
            ):
                j = np.flatnonzero(judged)
                h = hit[j]
                pos = np.arange(len(j))
                last_miss = np.maximum.accumulate(np.where(~h, pos, -1)) if len(j) else pos
                streak = np.where(
                    last_miss >= 0, pos - last_miss, self._streak.get((name, kind), 0) + pos + 1
                )
                if (name, kind) not in self._fired:
                    (small_reach if kind == "small" else interesting)[idx[j[streak >= self.patience]]] = True
                streaks[kind] = (j, streak)
            updates.append((name, idx, cur, ratio, streaks))
        # no tiny update is reported from the first blow-up on (check() holds them back)
        first = -1 if self._blown is not None else quiet_prefix(blown)
        interesting |= small_reach & (np.arange(len(steps)) < first)
        n = quiet_prefix(interesting)
        at = np.flatnonzero(blown[:n])
        if self._blown is None and len(at):
            self._blown = (int(steps[at[0]]), "", math.nan)  # check() names it when it reports
        self._count += int(train[:n].sum())
        for name, idx, cur, ratio, streaks in updates:
            take = np.flatnonzero(idx < n)
            if not len(take):
                continue
            last = take[-1]
            self._prev[name] = (int(steps[idx[last]]), float(cur[last]))
            for kind, (j, streak) in streaks.items():
                done = np.flatnonzero(idx[j] < n)
                if len(done):
                    self._streak[(name, kind)] = int(streak[done[-1]])
                    self._ratios[name] = float(ratio[j[done[-1]]])
        return n

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        names = trial.names("weights", step=step)
        if not names:
            return None
        self._count += 1
        if self.num_steps and (self._count - 1) % self.num_steps:
            return None
        if held(trial, step):  # accumulating gradients: no update was due, no ratio to judge
            for name in names:
                raw = trial.raw(name, step)
                if raw is not None:
                    self._prev[name] = (step, raw.astype(np.float64))
                elif isinstance(l2 := trial.statistic(name, step, "l2"), float):
                    self._prev[name] = (step, l2)
            return None
        grads = gradient_names(trial) if trial.has_collection("gradients") else {}
        small: list[str] = []
        large: list[str] = []
        still: bool | None = None  # the step changed nothing (looked up at the first update of 0)
        froms: dict[str, int] = {}  # per weight, the saved step its update is measured from
        for name in names:
            raw = trial.raw(name, step)
            delta = None if raw is not None else trial.saved_statistic(name, step, "delta_l2")
            if raw is not None:
                cur: np.ndarray | float = raw.astype(np.float64)
            elif isinstance(l2 := trial.statistic(name, step, "l2"), float):
                cur = l2
            else:
                continue
            prev = self._prev.get(name)
            self._prev[name] = (step, cur)
            if prev is None:
                continue
            froms[name] = prev[0]
            if grads and not self._applied(trial, grads, name, prev[0]):
                continue  # no gradient at the record before: frozen on purpose, an expert without tokens
            old = prev[1]
            if isinstance(delta, float) and math.isfinite(delta) and not isinstance(old, np.ndarray):
                if not math.isfinite(old) or old < self.epsilon:
                    continue
                ratio = delta / (old + self.epsilon)  # |w_t - w_t-1| / |w_t-1|, from the hook
                exact = True
            elif isinstance(cur, np.ndarray) and isinstance(old, np.ndarray) and cur.shape == old.shape:
                wnorm = float(np.linalg.norm(old))
                if wnorm < self.epsilon * math.sqrt(max(1, old.size)) or not math.isfinite(wnorm):
                    continue
                ratio = float(np.linalg.norm(cur - old)) / (wnorm + self.epsilon)
                exact = True
            else:
                o = float(np.linalg.norm(old)) if isinstance(old, np.ndarray) else float(old)
                c = float(np.linalg.norm(cur)) if isinstance(cur, np.ndarray) else float(cur)
                if not (math.isfinite(o) and math.isfinite(c)) or o < self.epsilon:
                    continue
                ratio = abs(c - o) / (o + self.epsilon)
                exact = False
            if not math.isfinite(ratio):
                continue
            if self._blown is None and exact and "bias" not in name.lower():
                now = float(np.linalg.norm(cur)) if isinstance(cur, np.ndarray) else float(cur)
                moved = ratio * (old if not isinstance(old, np.ndarray) else wnorm)  # |w_t - w_t-1|
                if blows(moved, now, weight_shape(trial, name, step)):
                    self._blown = (step, name, moved / now)
            self._ratios[name] = ratio
            if exact and ratio == 0 and still is None:
                still = self._loss_unchanged(trial, step)
            for kind, hit in (
                ("small", exact and ratio < self.small_threshold and not (ratio == 0 and still)),
                ("large", ratio > self.large_threshold),
            ):
                key = (name, kind)
                self._streak[key] = self._streak.get(key, 0) + 1 if hit else 0
                if self._streak[key] >= self.patience:
                    (small if kind == "small" else large).append(name)
        if self._blown is not None:
            small = []  # the effects of the blow-up (see the class doc), not a learning rate too small
        # a weight whose gradient is rising from (near) 0 stands still until the gradient is
        # large enough for its update to show in float32: waking, judged once the rise stops
        # or whose update is too small for float32 to show (`rounds_away`): not the optimizer's fault
        small = [
            n for n in small
            if (n, "small") in self._fired or not (
                n in grads
                and (gate_opening(trial, grads[n], step) or rounds_away(trial, n, grads[n], step, froms.get(n)))
            )
        ]  # fmt: skip
        small = [n for n in small if self.first((n, "small"))]
        large = [n for n in large if self.first((n, "large"))]
        if not small and not large:
            return None
        parts, tips = [], []
        if small:
            worst = max(small, key=lambda n: -self._ratios[n])
            parts.append(
                f"updates tiny for {len(small)} weight{'s' if len(small) > 1 else ''} ({short_list(small)}): "
                f"|update|/|weight| = {self._ratios[worst]:.2g} for {worst}, below {self.small_threshold:g}"
            )
            tips.append("raise the learning rate (it may be orders of magnitude too small) and check that "
                        "the optimizer was given the model's parameters")  # fmt: skip
        if large:
            worst = max(large, key=lambda n: self._ratios[n])
            parts.append(
                f"updates huge for {len(large)} weight{'s' if len(large) > 1 else ''} ({short_list(large)}): "
                f"|update|/|weight| = {self._ratios[worst]:.2g} for {worst}, above {self.large_threshold:g}"
            )
            tips.append("lower the learning rate, clip gradients, or use a warm-up")
        return self.finding(
            trial, step,
            "; ".join(parts) + f" for {self.patience} consecutive saved steps up to step {step}",
            tensors=small + large,
            suggestion="; ".join(tips).capitalize() + ".",
        )  # fmt: skip

    @staticmethod
    def _applied(trial: TrialView, grads: dict[str, str], name: str, step: int) -> bool:
        """Whether weight `name` had a gradient for the optimizer to apply at `step` (its
        gradient saved there), or nothing says (no gradient saved at that step at all). The
        update that a record's |update| measures applied the gradient of the record before:
        a weight frozen on purpose, or an expert of a mixture that got no token at that step,
        had none and stood still, which is not a tiny update."""
        if not trial.names("gradients", step=step):
            return True
        return name in grads and trial.tensor(grads[name]).has_step(step)

    def _loss_unchanged(self, trial: TrialView, step: int) -> bool:
        """Every loss saved at `step` is the same number as at its previous saved training
        step (and there is one): the step changed nothing, the weights included."""
        names = trial.names("losses", step=step)
        if not names:
            return False
        for name in names:
            saved = trial.tensor(name).steps()
            i = bisect.bisect_left(saved, step) - 1
            while i >= 0 and trial.mode(saved[i]) != Mode.TRAIN:
                i -= 1
            if i < 0:
                return False
            now, then = trial.statistic(name, step, "mean"), trial.statistic(name, saved[i], "mean")
            if not isinstance(now, float) or not isinstance(then, float) or now != then:
                return False
        return True
