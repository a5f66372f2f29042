"""Loss series for the loss rules: training values per step, validation values per evaluation.

Any framework: the tensors of the `losses` collection (and scalars whose name says "loss"),
in whatever mode they were saved. A TRAIN series has one value per saved step (minibatch
noise included); an EVAL series has one value per *evaluation pass*, the mean over the
consecutive EVAL steps of that pass (each eval batch is a step in PyTorch; XGBoost writes one
metric value per round). Metrics where higher is better (accuracy, AUC, NDCG...) are turned
into "lower is better" as 1 - value, so every rule reads a series that should fall.
"""

from __future__ import annotations

import bisect
import math
import re
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import MldbgError
from mldbg.rules import stats
from mldbg.rules.view import TrialView
from mldbg.store import layout

_HIGHER_IS_BETTER = {
    "auc",
    "aucpr",
    "accuracy",
    "acc",
    "map",
    "ndcg",
    "precision",
    "recall",
    "f1",
    "r2",
    "pre",
    # similarity coefficients, bounded above by 1: a criterion module that returns one
    # (SimSiam's nn.CosineSimilarity, whose negative mean is the loss) logs a value that rises
    "similarity",
    "dice",
    "iou",
    "jaccard",
}
_MODE_WORDS = {
    "train",
    "training",
    "validation",
    "valid",
    "val",
    "eval",
    "evaluation",
    "test",
    "dtrain",
    "dtest",
    "dvalid",
}
_TOKENS = re.compile(r"[A-Za-z]+|\d+")
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")  # camelCase split: CosineSimilarity_output_0


def higher_is_better(name: str) -> bool:
    """Whether a series measures something that should rise (accuracy, AUC, a similarity
    coefficient: the PyTorch hook names a criterion module's output after its class,
    `CosineSimilarity_output_0`), unless its name also says loss, error or distance."""
    tokens = {t.lower() for t in _TOKENS.findall(name.split("/")[-1])}
    words = {t.lower() for t in _WORDS.findall(name.split("/")[-1])}  # whole words only: not "Pre"Norm
    tokens |= words & {"similarity", "dice", "jaccard", "accuracy", "precision", "recall"} | words & {
        "loss",
        "error",
        "distance",
    }
    return bool(tokens & _HIGHER_IS_BETTER) and not tokens & {"loss", "error", "distance"}


def metric_key(name: str) -> str:
    """The metric a series measures, without its split: `train-rmse` and `validation_0-rmse`
    are both `rmse`; a PyTorch loss keeps its name in both modes."""
    tokens = [t.lower() for t in _TOKENS.findall(name)]
    kept = [t for t in tokens if t not in _MODE_WORDS and not t.isdigit()]
    return "-".join(kept) or name


@dataclass
class Evaluation:
    """One evaluation pass: consecutive EVAL steps of one loss tensor."""

    first_step: int
    last_step: int
    total: float = 0.0
    count: int = 0

    @property
    def value(self) -> float:
        return self.total / self.count if self.count else float("nan")


def _int64s() -> array[int]:
    return array("q")


def _float64s() -> array[float]:
    return array("d")


class _Buffer:
    """A typed buffer that grows by doubling: the values of one loss series as read, shared by
    the trackers of every rule of a view that reads it (`SharedColumn`)."""

    __slots__ = ("data", "n")

    def __init__(self, dtype: type[np.generic], data: np.ndarray | None = None) -> None:
        self.data = np.empty(0, dtype=dtype) if data is None else data
        self.n = 0 if data is None else len(data)

    def push(self, new: np.ndarray) -> None:
        need = self.n + len(new)
        if need > len(self.data):
            grown = np.empty(max(need, 2 * len(self.data), 1024), dtype=self.data.dtype)
            grown[: self.n] = self.data[: self.n]
            self.data = grown
        self.data[self.n : need] = new
        self.n = need


class SharedColumn(Sequence[Any]):
    """One tracker's steps or values of a loss series: the first `len` entries of a buffer
    that every tracker reading that series through one view shares (`LossTracker.bind`).
    The loss rules each kept their own copy (six copies of a 10^6-step loss, with their
    float64 mirrors: ~150 MB); the same values appended by several trackers are held once.
    A tracker that appends something else (its series was cut back and goes on otherwise)
    takes its own copy then. Reads as `array('q')` / `array('d')` do: an index gives a
    Python number, a slice a typed array, `np.asarray` the entries without a copy
    (read-only); `append`, `extend`, `del c[k:]` as on a list."""

    __slots__ = ("_buf", "_n", "_own", "_typecode")

    def __init__(self, buf: _Buffer, typecode: str) -> None:
        self._buf, self._n, self._own, self._typecode = buf, 0, False, typecode

    @classmethod
    def over(cls, values: np.ndarray) -> SharedColumn:
        """The float64 `values` (read, never written to) as a column of their own."""
        col = cls(_Buffer(np.float64, np.asarray(values, dtype=np.float64)), "d")
        col._n, col._own = len(values), True
        return col

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return array(self._typecode, self._buf.data[: self._n][i].tobytes())
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("series index out of range")
        return self._buf.data.item(i)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._buf.data[: self._n].tolist())

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        view = self._buf.data[: self._n]
        if copy or (dtype is not None and np.dtype(dtype) != view.dtype):
            return view.astype(view.dtype if dtype is None else dtype)
        view = view.view()
        view.flags.writeable = False
        return view

    def __repr__(self) -> str:
        return f"SharedColumn({self.tolist()!r})"

    def tolist(self) -> list[Any]:
        return self._buf.data[: self._n].tolist()

    def append(self, x: Any) -> None:
        buf, n = self._buf, self._n
        if n < buf.n and not self._own:
            y = buf.data.item(n)
            if y == x and (y != 0 or math.copysign(1, y) == math.copysign(1, x)) or (y != y and x != x):
                self._n = n + 1  # another tracker appended it already
                return
        self._extend(np.asarray([x], dtype=buf.data.dtype))

    def extend(self, new: Any) -> None:
        self._extend(
            np.asarray(new if isinstance(new, np.ndarray) else list(new), dtype=self._buf.data.dtype)
        )

    def _extend(self, new: np.ndarray) -> None:
        new = np.ascontiguousarray(new)
        buf, n = self._buf, self._n
        if n < buf.n and not self._own:
            k = min(len(new), buf.n - n)  # what the others appended already: the same bits?
            if np.array_equal(buf.data[n : n + k].view(np.uint8), new[:k].view(np.uint8)):
                self._n = n + k
                new, n = new[k:], n + k
                if not len(new):
                    return
            if n < buf.n:  # something else: a copy of its own from here
                self._buf = buf = _Buffer(buf.data.dtype.type, buf.data[:n].copy())
                self._own = True
        buf.push(new)
        self._n = buf.n

    def __delitem__(self, i: slice) -> None:
        if not isinstance(i, slice) or i.step is not None or i.stop is not None:
            raise TypeError("only the tail of a series is cut: del column[k:]")
        k = min(self._n, max(0, (i.start or 0) + (self._n if (i.start or 0) < 0 else 0)))
        self._n = k
        if self._own:
            self._buf.n = k


@dataclass
class Series:
    """One loss tensor's values in one mode, in step order. Kept as typed arrays (8 bytes a
    value, read by NumPy without a copy), not Python lists (~70 bytes a step, six loss rules
    each holding their own: ~400 MB for 10^6 steps); they index, slice, append and extend
    as lists do."""

    name: str
    mode: Mode
    steps: array[int] | SharedColumn = field(default_factory=_int64s)
    values: array[float] | SharedColumn = field(default_factory=_float64s)


class LossTracker:
    """Feeds on steps in order; keeps TRAIN series and EVAL passes per loss tensor."""

    def __init__(self, use_losses_collection: bool = True, tensor_regex: Sequence[str] | str | None = None):
        self.use_losses_collection = use_losses_collection
        self.tensor_regex = tensor_regex
        self.train: dict[str, Series] = {}
        self.other: dict[tuple[str, Mode], Series] = {}  # PREDICT or EVAL steps, raw
        self.evals: dict[str, list[Evaluation]] = {}
        self._open: dict[str, Evaluation] = {}
        self.seen_any = False
        self._shared: dict[tuple[str, Mode, str], _Buffer] | None = None

    def bind(self, view: TrialView) -> None:
        """Share the series' values with the other trackers reading through `view` (its
        `loss_columns`): from here on, a new series holds them once for all of them."""
        shared = getattr(view, "loss_columns", None)
        if shared is not None:
            self._shared = shared

    def series(self, name: str, mode: Mode) -> Series:
        """A new series of `name` in `mode`, its columns shared where the tracker is bound."""
        if self._shared is None:
            return Series(name, mode)
        buffers = self._shared
        cols = []
        for kind, dtype, code in (("steps", np.int64, "q"), ("values", np.float64, "d")):
            buf = buffers.get((name, mode, kind))
            if buf is None:
                buf = buffers[(name, mode, kind)] = _Buffer(dtype)
            cols.append(SharedColumn(buf, code))
        return Series(name, mode, steps=cols[0], values=cols[1])

    def names(self, view: TrialView, step: int) -> list[str]:
        names: list[str] = []
        if self.use_losses_collection:
            names += view.names("losses", step=step)
            names += view.names("scalars", regex=r"(?i)loss", step=step)
        if self.tensor_regex:
            names += view.names(None, regex=self.tensor_regex, step=step)
        return sorted(set(names))

    def update(self, view: TrialView, step: int) -> tuple[Mode, list[str], list[tuple[str, Evaluation]]]:
        """Read the losses of `step`. Returns (mode, the tensors read, evaluations closed by it)."""
        if self._shared is None:
            self.bind(view)
        mode = view.mode(step)
        closed: list[tuple[str, Evaluation]] = []
        for name, open_ev in list(self._open.items()):  # a pass ends at a gap or another mode
            if mode != Mode.EVAL or step != open_ev.last_step + 1:
                closed.append((name, open_ev))
                del self._open[name]
        names = self.names(view, step)
        for name in names:
            v = value_of(view, name, step)
            if v is None:
                continue
            self.seen_any = True
            if mode == Mode.TRAIN:
                s = self.train.get(name) or self.train.setdefault(name, self.series(name, mode))
                s.steps.append(step)
                s.values.append(v)
            elif mode == Mode.EVAL:
                ev = self._open.get(name)
                if ev is None:
                    ev = self._open[name] = Evaluation(step, step)
                    self.evals.setdefault(name, []).append(ev)
                ev.last_step = step
                ev.total += v
                ev.count += 1
            else:
                s = self.other.get((name, mode)) or self.other.setdefault(
                    (name, mode), self.series(name, mode)
                )
                s.steps.append(step)
                s.values.append(v)
        return mode, names, closed

    def shortfall(self, need: int, evaluations: bool = False) -> str | None:
        """For a rule's `undecided()`: "needs N saved training losses, has n (name)" when
        every series is shorter than `need` (evaluation passes with `evaluations`); None when
        one is long enough, or there was no loss at all (`unchecked()` says that)."""
        if not self.seen_any:
            return None
        if evaluations:
            have = {name: len(evs) for name, evs in self.evals.items()}
            what = "evaluation passes (EVAL steps) with a loss"
        else:
            have = {name: len(s.values) for name, s in self.train.items()}
            what = "saved training losses"
        if not have:
            return f"needs {need} {what}, has 0"
        name = max(have, key=have.__getitem__)
        if have[name] >= need:
            return None
        return f"needs {need} {what}, has {have[name]} ({name})"

    def close_all(self) -> list[tuple[str, Evaluation]]:
        closed = list(self._open.items())
        self._open.clear()
        return closed

    def closed_evals(self, name: str) -> list[Evaluation]:
        open_ev = self._open.get(name)
        return [e for e in self.evals.get(name, []) if e is not open_ev]

    def train_for(self, eval_name: str) -> Series | None:
        """The TRAIN series that pairs with an EVAL loss tensor (same metric)."""
        if eval_name in self.train:
            return self.train[eval_name]
        key = metric_key(eval_name)
        for name, s in self.train.items():
            if metric_key(name) == key:
                return s
        return None


def value_of(view: TrialView, name: str, step: int) -> float | None:
    """The loss at a step as one number (the mean of a per-sample loss), oriented so that
    lower is better."""
    try:
        v = float(view.reduce(name, step, "mean"))
    except MldbgError:
        return None
    return 1.0 - v if higher_is_better(name) else v


def train_level(series: Series | None, before: int, window: int) -> float | None:
    """Median of the last `window` training values saved before step `before`."""
    if series is None:
        return None
    import bisect

    end = bisect.bisect_left(series.steps, before)
    vals = np.asarray(series.values[max(0, end - window) : end], dtype=np.float64)
    vals = vals[np.isfinite(vals)]
    if len(vals) == 0:
        return None
    return float(np.median(vals))


# whether a loss makes progress: the one decision of loss_not_decreasing and underfitting ------
GROWTH = 1.25  # the judged series lengths grow by this factor (alpha is spent per judgement)
GAME_STEPS = 1000  # the last saved steps read for a GAN's labels and gradients (`select.adversarial`)
_TREND_MIN = 0.002  # the least fall over the later half that counts as one (a share of the level)
_TREND_Z = -2.0  # Mann-Kendall z of the later block medians below this: the loss falls, it is learning


def checkpoint_lengths(window: int, patience: int, top: int) -> list[int]:
    """The series lengths up to `top` at which a loss is judged: window x c_j, c_0 = max(2,
    patience), c_(j+1) = max(c_j + 1, ceil(GROWTH c_j)). Geometric, so a run of 10^6 values
    is judged about 40 times, not 10^5: the per-run budget is spent on few tests, and each
    reads a longer stretch."""
    w, c = max(2, window), max(2, patience)
    out: list[int] = []
    while w * c <= top:
        out.append(w * c)
        c = max(c + 1, math.ceil(GROWTH * c))
    return out


def checkpoints(window: int, patience: int, n: int) -> tuple[bool, int]:
    """(whether a series of length `n` is judged, the number of judgements up to and including
    `n`), at the `checkpoint_lengths`."""
    at = checkpoint_lengths(window, patience, n)
    return bool(at) and at[-1] == n, len(at)


def judged_at(window: int, patience: int, lengths: np.ndarray) -> np.ndarray:
    """Whether each of `lengths` is one of the `checkpoints` (a bool per length), at once: the
    lengths a live judgement may be made at, for a fast path to skip the others."""
    lengths = np.asarray(lengths, dtype=np.int64)
    top = int(lengths.max()) if len(lengths) else 0
    return np.isin(lengths, np.array(checkpoint_lengths(window, patience, top), dtype=np.int64))


def judgement(
    window: int, patience: int, values: Sequence[float] | np.ndarray, n: int, final: bool
) -> int | None:
    """The index k (1, 2, ...) of the judgement of the first `n` of `values`, or None when
    they are not judged there. Live, at the `checkpoints` from a stable baseline on: the
    noise model's full history (`detect.HISTORY`, 1,000 values), so that the long flat
    start of a long run in its warm-up is not taken for a stall; a series with no noise at
    all (every value the same, to float32 rounding: a learning rate of 0 on one batch) needs
    no noise model and is judged from `patience` windows on. With `final` (the end of a
    finished run), at its last length whatever it is, from `patience` windows on, unless
    judged there already."""
    from mldbg.rules import detect

    judged, k = checkpoints(window, patience, n)
    if not (judged or final):
        return None
    flat = _constant(values, n)
    if not flat:  # the judgements made: those from the stable baseline on
        _, before = checkpoints(window, patience, detect.HISTORY - 1)
        k = max(0, k - before)
    live = judged and (n >= detect.HISTORY or flat)
    if final:
        if live or n < max(2, patience) * max(2, window):
            return None
        return k + 1
    return k if live else None


def refutes_stall(
    values: Sequence[float] | np.ndarray, window: int, patience: int, material: float, *, since: int
) -> bool:
    """Whether a finished run's whole loss series refutes a stall judged on its first `since`
    values (`loss_not_decreasing`'s "flat", `underfitting`): a later judgement of the run
    finds it decreasing: at one of the live `checkpoints` after `since`, or at its end, the
    loss shed more than `material` of its starting level, or it falls past its first tenth
    beyond the noise at that judgement's bar of the run's budget (`Progress.late_fall_z`). A
    plateau at the start that the run leaves (a saddle at init, the margin of a triplet loss,
    grokking) refutes it; so does a slow fall that a later shift of the logged level hides by
    the end (the loss of rank 0's first context-parallel chunk, stepped up when the layout
    changed): the run was seen learning after the stall. A stall to the end, or an end too
    noisy to tell (a batch-1 loss whose later blocks wander down by chance: a Mann-Kendall z
    near -2 is no fall), does not."""
    n = len(values)
    judgements: list[tuple[int, int]] = []  # (length, the judgement's index)
    for length in checkpoint_lengths(window, patience, n - 1):
        k = judgement(window, patience, values, length, final=False)
        if length > since and k is not None:
            judgements.append((length, k))
    _, k = checkpoints(window, patience, n)
    judgements.append((n, k + 1))
    for length, k in judgements:
        p = progress(values[:length], k)
        if p is not None and (p.drop > material or p.late_fall_z >= p.z):
            return True
    return False


def came_back(values: Sequence[float] | np.ndarray, after: int, level: float, block: int) -> bool:
    """Whether a finished run's loss came back, after its value `after`, to `level` (where it
    was before a rise): the median of some block of `block` values after it (the last block
    may be shorter, down to a quarter of one) at or below `level`. A rise the run recovered
    from by itself is a transient of its training (a world model meeting new states, a
    penalty's coefficient warmed up, a harder stage of a curriculum it then learns), not a
    divergence; one that holds to the end, or ends in NaN, is not."""
    x = np.asarray(values[after + 1 :], dtype=np.float64)
    block = max(1, block)
    full = len(x) // block
    if full and bool(np.any(np.median(x[: full * block].reshape(full, block), axis=1) <= level)):
        return True
    tail = x[full * block :]
    return len(tail) >= max(1, block // 4) and bool(np.median(tail) <= level)


RESTART_SHARE = 0.1  # a restart: back within this share of the starting level, from 2x as far below


def restarts(values: Sequence[float] | np.ndarray) -> list[int]:
    """Where the series starts over on a schedule (the first value of each restart), or [].

    Training that starts over on the same objective does so under one global step: the folds
    of a k-fold cross-validation, the rounds of self-training or of iterative DPO, a sweep's
    trials. Each phase is then judged on its own (`progress`): a later phase that ends above
    an earlier one's best is no rise. A restart:
    - comes back to within `RESTART_SHARE` of the series' starting level (the median of its
      first values, a quarter of a block's, at least 5: a fresh model's loss may halve in its
      first 50 steps) after the series had fallen more than twice that share below it;
    - falls that far below again after (a collapse to chance that stays there is no restart);
    - ends a phase at least a twelfth of the series long (a loss swinging to its start and
      back, as batches sorted by class make it, has no phases).
    At least two of them, and no phase a quarter of the first or shorter, make a schedule: a
    single return to the start is an event, judged as the rise it is (a resume that lost what
    the model had learned, its embeddings reloaded against another vocabulary, looks the same).
    Read as the medians of blocks of at least 20 values, enough that a block's median strays
    by at most a third of `RESTART_SHARE` of the start under the series' batch-to-batch noise
    (from its successive differences): a noisy loss wandering near the bars is no restart."""
    from mldbg.rules import detect

    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    if n < 60:
        return []
    sigma = detect.step_spread(x)
    head = x[:5][np.isfinite(x[:5])]
    level = float(np.median(head)) if len(head) else 0.0
    if not level > 0:  # no start to come back to (a loss of both signs is judged as it is)
        return []
    size = max(20, math.ceil((3 * 1.253 * sigma / (RESTART_SHARE * level)) ** 2))
    head = x[: max(5, size // 4)]  # where it starts: its first values, before a fast first fall
    head = head[np.isfinite(head)]
    start = float(np.median(head)) if len(head) else math.nan
    if n < 3 * size or not start > 0:
        return []
    k = n // size
    blocks = x[: k * size].reshape(k, size)
    finite = np.isfinite(blocks)
    some = finite.any(axis=1)  # a block of NaN (a stretch that overflowed) has no level
    med = np.full(k, np.nan)
    med[some] = np.nanmedian(np.where(finite[some], blocks[some], np.nan), axis=1)
    low, back = med <= (1 - 2 * RESTART_SHARE) * start, med >= (1 - RESTART_SHARE) * start
    found: list[int] = []
    fallen, pending = False, None
    least = max(5 * size, n // 12)  # a phase, start to restart: a fold (of up to 10), not a swing
    for i in range(k):
        if pending is not None and low[i]:
            if pending - (found[-1] if found else 0) >= least:
                found.append(pending)
            pending = None
        if low[i]:
            fallen = True
        elif back[i] and fallen and pending is None:
            pending, fallen = i * size, False
    if len(found) < 2:
        return []
    # a schedule of restarts repeats its first phase's recipe: no phase a quarter of it or less
    # (a loss that swings back to its start every epoch once its batches come sorted, after a
    # long healthy first phase, is no schedule)
    phases = np.diff([0, *found])
    return found if bool((phases * 4 > phases[0]).all()) else []


def rescued(view: TrialView) -> bool:
    """Whether a recovery action (`Rollback`, `SkipBatch`) asked this run's training to
    recover (`control/recover`, which `mldbg.torch.Guard` acts on): a loss that came back in
    such a run did not come back by itself, and its rise is reported as it was seen."""
    try:
        return view.store.exists(layout.RECOVERY_REQUEST)
    except Exception:  # a store that cannot say (away, damaged): the run is judged as it stands
        return False


def _constant(values: Sequence[float] | np.ndarray, n: int) -> bool:
    """Whether the first `n` values have no noise at all: the same value, or the same cycle
    of values (a loader over a few fixed batches) repeated, to 1e-5 of the level."""
    return _cycle(np.asarray(values[:n], dtype=np.float64)) is not None


def _cycle(x: np.ndarray) -> int | None:
    """The shortest period P (up to 64, and a quarter of the values) with which `x` repeats
    itself to 1e-5 of its level; None when it does not (any minibatch noise)."""
    if len(x) < 8 or not np.isfinite(x).all():
        return None
    tol = 1e-5 * max(float(np.max(np.abs(x))), 1e-12)
    head = x[: _CYCLE_HEAD + 64]
    for period in range(1, min(64, len(x) // 4) + 1):
        # the first values rule most periods out (a maximum only grows with more values):
        # a noisy series of 10^6 values is not passed over 64 times per judgement
        if len(x) > len(head) and float(np.max(np.abs(head[period:] - head[:-period]))) > tol:
            continue
        if float(np.max(np.abs(x[period:] - x[:-period]))) <= tol:
            return period
    return None


_CYCLE_HEAD = 1024  # values `_cycle` first looks at for each period


@dataclass(frozen=True)
class Progress:
    """How a loss series moved, with the noise it moved through (`progress`)."""

    n: int  # values judged
    block: int  # values per block (the first block, the last block)
    first: float  # median of the first values (the starting level)
    last: float  # median of the last block (at least as many values as `first`)
    drop: float  # (first - last) / |first|: the share of the loss it shed
    drop_high: float  # the upper confidence bound of `drop` at the judgement's alpha
    rise_z: float  # the last block above the first, in standard errors
    trend_z: float  # Mann-Kendall z of 10 block medians of the later half (clearly negative: falling now)
    pace_high: (
        float  # the upper confidence bound of the share of the level the later half's pace sheds per n values
    )
    best: float  # the lowest block median before the last block
    best_at: int  # index of the first value of that block
    rise: float  # (last - best) / |best|
    rise_best_z: float  # the last block above the best, in standard errors (selection allowed for)
    z: float  # the bar a z must pass at this judgement (from the per-run budget)
    late_fall_z: float = 0.0  # the fall from the second block to the level now, in standard errors


def progress(
    values: Sequence[float] | np.ndarray, k: int, alpha: float | None = None, since: int = 0
) -> Progress | None:
    """The progress of `values` at its `k`-th judgement, or None when its last block holds a
    NaN or inf (`exploding_tensor`'s) or fewer than 4 values are finite.

    The series is cut into blocks of m = max(2, n // 10) values; its starting level is the
    median of its first 10..50 values (a tenth of a long run would hide its fall), its level
    now the median of its last block (at least as many values). The
    noise model of each end (`mldbg.rules.detect.noise`: robust scale, autocorrelation) gives
    the standard error of its median; the bar z is the normal quantile of the k-th test's
    share of the run's false-alarm budget (`detect.spend`). Between-block variation (an epoch
    sawtooth, a GAN's oscillation, correlated noise) that the within-block model misses is
    added from the block medians themselves (their robust step-to-step spread, beyond what
    the model gives a median), so structure that comes and goes is not taken for a change.
    `late_fall_z` is the fall from the second block to the level now in standard errors (the
    same noise model), or along the least-squares trend of that stretch (`_slope_fall_z`),
    the larger: a loss still falling past its first tenth, significantly, is learning
    however small its share (a pre-training loss near the unigram entropy), from `_TREND_MIN`
    of its level on. `best`, the lowest earlier block, is sought since the series last started
    over (`restarts`: a new fold or round is judged on its own) and from its value `since` on
    (where the caller knows a new phase began: `schedule_restarts`)."""
    from mldbg.rules import detect

    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    m = max(2, n // 10)
    k_blocks = n // m
    if k_blocks < 2:
        return None
    blocks = x[n - k_blocks * m :].reshape(k_blocks, m)
    if not np.isfinite(blocks[-1]).all():
        return None
    start = min(
        n // 2, max(10, min(50, n // 10))
    )  # the starting level: the first values, not a tenth of the run
    end = min(n // 2, max(m, start))  # the level now: the last block, or as many values as the start
    head = x[:start][np.isfinite(x[:start])]
    if len(head) < 4:
        return None
    meds = np.array([np.median(b[np.isfinite(b)]) if np.isfinite(b).any() else np.nan for b in blocks])
    tail = x[n - end :]
    if not np.isfinite(tail).all():
        return None
    first, last = float(np.median(head)), float(np.median(tail))
    period = _cycle(x)
    if period is not None:  # no noise: the same cycle of batches, compared cycle for cycle
        first, last = float(np.mean(x[:period])), float(np.mean(x[n - period :]))
    scale = max(abs(first), 1e-12)
    floor = 1e-3 * scale  # a loss held exactly (no batch noise) still moves in the 4th digit
    span = max(m, 100)  # the noise of each end, from at least 100 values
    a, b = detect.noise(x[: max(start, 100)], floor), detect.noise(x[max(0, n - span) :], floor)
    if a is None or b is None:
        return None
    fine = meds[np.isfinite(meds)]
    between = detect.step_spread(fine) if len(fine) >= 4 else 0.0
    within = max(a.se_median(m), b.se_median(m))
    excess = max(0.0, between**2 - within**2)  # what the blocks vary beyond the model's noise
    se = math.sqrt(a.se_median(len(head)) ** 2 + b.se_median(end) ** 2 + 2 * excess)
    if period is not None:
        se = floor  # what float32 rounding leaves
    # still learning after its start: the fall from the second block (past a quick first fit,
    # the class prior that shuffled labels allow too) to the level now, against the same noise
    late = x[m : 2 * m][np.isfinite(x[m : 2 * m])]
    c = detect.noise(x[m : m + max(m, 100)], floor) if len(late) >= 2 and k_blocks >= 3 else None
    late_se = (
        math.inf if c is None else math.sqrt(c.se_median(len(late)) ** 2 + b.se_median(end) ** 2 + 2 * excess)
    )
    if period is not None:
        late_se = floor
    late_fall = float(np.median(late)) - last if len(late) else 0.0
    if period is not None:  # the same cycle of batches: the second cycle against the last
        late_fall = float(np.mean(x[period : 2 * period])) - last if n >= 3 * period else 0.0
    # a fall too small to be learning (below `_TREND_MIN` of the level: a learning rate of 1e-10
    # moves a noiseless loss in its 7th digit, significantly) does not count, as for the trend
    late_fall_z = late_fall / max(late_se, 1e-300) if late_fall >= _TREND_MIN * scale else 0.0
    if period is None:  # the trend over the same stretch: a steady fall, however slow, shows there
        late_fall_z = max(late_fall_z, _slope_fall_z(x[m:], _TREND_MIN * scale))
    z = detect.z_normal(detect.spend(k) if alpha is None else detect.spend(k, alpha))
    drop = (first - last) / scale
    earlier = meds[:-1]
    ok = np.isfinite(earlier)
    over = [*restarts(x), since] if period is None else []
    if max(over, default=0) > 0:  # the phase now, since the last restart: a later fold or round
        ok &= n - k_blocks * m + np.arange(len(earlier)) * m >= max(over)  # is judged on its own
    if ok.any():
        i = int(np.argmin(np.where(ok, earlier, np.inf)))
        best = float(earlier[i])
        # the lowest of K medians lies ~sqrt(2 ln K) standard errors below their level
        bias = math.sqrt(2 * math.log(max(2, int(ok.sum()))))
        rise_best_z = (last - best) / max(se, 1e-300) - bias
        best_at = n - k_blocks * m + i * m
    else:
        best, best_at, rise_best_z = last, n - m, 0.0
    if period is not None:  # the same cycle throughout: nothing rose (blocks cut it unevenly)
        best, best_at, rise_best_z = last, n - m, -math.inf
    return Progress(
        n=n,
        block=m,
        first=first,
        last=last,
        drop=drop,
        drop_high=drop + z * se / scale,
        rise_z=(last - first) / max(se, 1e-300),
        trend_z=_recent_trend(x),
        pace_high=_pace_high(x, z, floor, math.sqrt(2 * excess), scale) if period is None else 0.0,
        best=best,
        best_at=best_at,
        rise=(last - best) / max(abs(best), 1e-12),
        rise_best_z=rise_best_z,
        z=z,
        late_fall_z=late_fall_z,
    )


_SLOPE_BLOCKS = 100  # the most block medians the trend of a stretch is fitted to
_SLOPE_BLOCK_MIN = 5  # values per block, at least


def _slope_fall_z(x: np.ndarray, least: float) -> float:
    """How far a stretch of a loss falls along its least-squares trend, in standard errors:
    the slope of the medians of up to `_SLOPE_BLOCKS` consecutive blocks (of at least
    `_SLOPE_BLOCK_MIN` values: medians, so that heavy-tailed batches do not pull it) against
    their index, its standard error from the spread of their residuals about the line (which
    holds the noise within blocks and whatever wanders between them), widened for the
    residuals' lag-1 autocorrelation r as (1 + r) / (1 - r) (a slow drift of the level is
    not a trend); 0 when the fall along the line is below `least` (a loss moving in its 7th
    digit is not learning, however steadily) or the blocks are too few (below 8).

    The same null as `late_fall_z`'s comparison of two block medians (the loss holds its
    level past its first tenth), tested with all the blocks between them: a steady decline of
    0.5% over 1,000 values under 1% batch noise is a fall of ~5 standard errors along the
    line, and of ~2 between the second tenth and the last."""
    x = x[np.isfinite(x)]
    m = max(_SLOPE_BLOCK_MIN, len(x) // _SLOPE_BLOCKS)
    nb = len(x) // m
    if nb < 8:
        return 0.0
    meds = _row_medians(x[len(x) - nb * m :].reshape(nb, m))
    t = np.arange(nb, dtype=np.float64) - (nb - 1) / 2
    slope = float(t @ (meds - meds.mean()) / (t @ t))
    fall = -slope * (nb - 1)
    if fall < least:
        return 0.0
    resid = meds - meds.mean() - slope * t
    sd = float(np.sqrt(resid @ resid / (nb - 2)))
    r1 = float(resid[1:] @ resid[:-1] / max(resid @ resid, 1e-300))
    r1 = min(max(r1, 0.0), 0.95)
    se = sd * math.sqrt((1 + r1) / (1 - r1) / (t @ t))
    return -slope / max(se, 1e-300)


def _row_medians(a: np.ndarray) -> np.ndarray:
    return np.median(a, axis=1)


def _pace_high(x: np.ndarray, z: float, floor: float, extra: float, scale: float) -> float:
    """The upper confidence bound (at the bar `z`) of the loss's pace now: the fall from the
    third quarter of `x` to its last (medians, a quarter of the run apart), x 4, as a share of
    `scale`: the share of the level the loss would shed over as many values again at that
    pace. Each quarter's median has its standard error from its own noise model
    (`detect.noise`), `extra` adds the between-block variation the model misses.

    Not falling now must be shown, not assumed: a loss too noisy for a trend test to see its
    fall (one sample a step, as a batch-1 loop: a heavy-tailed per-sample loss, a trend
    buried in it) has a wide bound here, and is not called flat; a loss that learns nothing
    (shuffled labels, a dead model) holds its level, and its bound closes on 0 as the run
    goes on."""
    from mldbg.rules import detect

    n = len(x)
    q = n // 4
    if q < 4:
        return math.inf
    third, last = x[n - 2 * q : n - q], x[n - q :]
    third, last = third[np.isfinite(third)], last[np.isfinite(last)]
    a, b = detect.noise(third, floor), detect.noise(last, floor)
    if a is None or b is None or len(third) < 4:
        return math.inf
    se = math.sqrt(a.se_median(len(third)) ** 2 + b.se_median(len(last)) ** 2 + extra**2)
    fall = float(np.median(third)) - float(np.median(last))
    return 4 * (fall + z * se) / scale


def _recent_trend(x: np.ndarray) -> float:
    """Mann-Kendall z of the medians of 10 blocks over the later half of `x`: whether the
    loss is falling now (a loss that fell and then stopped is not). A fall of less than
    `_TREND_MIN` of the level over that half is no fall, however steady (a learning rate of
    1e-10 moves a full-batch loss in its 6th digit, every step the same way): z = 0."""
    half = x[len(x) // 2 :]
    m = max(1, len(half) // 10)
    nb = len(half) // m
    blocks = half[len(half) - nb * m :].reshape(nb, m)
    meds = np.array([np.median(b[np.isfinite(b)]) for b in blocks if np.isfinite(b).any()])
    if len(meds) < 2 or meds[0] - meds[-1] < _TREND_MIN * max(abs(float(meds[0])), 1e-12):
        return max(0.0, stats.trend_z(meds))  # no material fall: a rise may still show
    return stats.trend_z(meds)


_UNDONE = 0.2  # a divergence must bring the loss back to this share of its starting level


def floor_of(values: Sequence[float] | np.ndarray) -> float:
    """The least value a divergence's swings (`loss_divergence`) or runaway climb
    (`loss_change_point`) must reach: `_UNDONE` (0.2) x the loss's starting
    level (the median of its first 10 values; 0 when that is not positive). A divergence
    undoes the training: its swings bring the loss back towards where it began. A converged
    loss that shed 99% of its start and flickers between 1% and 13% of it (Lion's sign
    steps on a graph network at 0.008, batches to 0.17 from a start of 1.27) has lost
    nothing worth a stop; nor has a memorised training set's cross-entropy at 1e-9, whose
    batches read 1e-8..1e-5 as float rounding moves them (10^4 x its level, still nothing):
    a ratio to a level near 0 says nothing; nor has a full-batch fit 4 decades down whose
    Adam spikes climb 2-30x geometrically for a few steps and turn. A real divergence grows
    by e-folds until it passes the start: the bar delays it by a few e-folds."""
    head = np.asarray(values[:10], dtype=np.float64)
    head = head[np.isfinite(head)]
    if not len(head):
        return 0.0
    return max(0.0, _UNDONE * float(np.median(head)))


def floorless(values: Sequence[float] | np.ndarray) -> bool:
    """Whether a loss series has no floor at 0 to judge its progress against, so that "shed
    x% of its level" or "rose y%" is a share of nothing:
    - its values take both signs, the middle 90% of them straddling 0 (its level is near 0
      against its own noise), or its level does (the median of its first values and of its
      tenths are not all of one sign: it crossed 0). A loss bounded below by 0 (cross-entropy,
      MSE) never does; an adversarial or contrastive objective does (an energy gap
      E(data) - E(samples), a WGAN critic, a policy-gradient term): it is not meant to fall,
      it hovers near 0 or changes sign;
    - or its level is never above 0 (a negative objective: minus an entropy bonus, a flow's
      or a score model's negative log-likelihood below 0, a Dice-style loss of -1..0): its
      floor is somewhere below, unknown, and a share of a negative level is no progress;
    - or it starts at exactly 0 (the median of its first values): a penalty not yet
      switched on (a KL to a reference policy that is the policy itself at the first step, a
      regularizer weighted 0 at first), already at its floor, with nothing to shed, and
      whatever it rises to is an infinite share of its start."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if len(x) < 4:
        return False
    m = max(2, len(x) // 10)
    levels = [float(v) for v in np.quantile(x, [0.05, 0.95])]
    levels.append(float(np.median(x[: min(len(x) // 2, max(10, min(50, len(x) // 10)))])))
    levels += np.median(x[len(x) - (len(x) // m) * m :].reshape(-1, m), axis=1).tolist()
    return min(levels) < 0 < max(levels) or max(levels) <= 0 or levels[2] == 0


LEARNING_RATE = "learning_rate/"  # the PyTorch hook's record of each model's learning rate


def warming_up(view: TrialView, step: int) -> str | None:
    """The learning rate of a model (`learning_rate/<model>`, which the PyTorch hook records
    at statistics steps) rose at its last record up to `step`: a warm-up is under way, and a
    loss that barely moves is what it gives (the learning rate is still small), not a stall.
    Returns the record's name, or None (no learning rate recorded, or not rising)."""
    for name in view.names(None, regex="^" + LEARNING_RATE):
        steps = [s for s in view.tensor(name).steps(Mode.TRAIN) if s <= step][-2:]
        if len(steps) < 2:
            continue
        before, last = (view.saved_statistic(name, s, "sum") for s in steps)
        if isinstance(before, float) and isinstance(last, float) and last > before * (1 + 1e-6) > 0:
            return name
    return None


SCHEDULE_RESTART_SHARE = 0.5  # a learning rate that rises again from at most this share of its peak


def schedule_restarts(view: TrialView) -> list[tuple[int, int]]:
    """Where the run's recorded learning rates (`learning_rate/<model>`, at the PyTorch hook's
    statistics steps and where an optimizer begins a new schedule) began a new schedule: the
    steps (after, upto] between the record before and the first record of the new one
    (`_schedules`: with the step where its rise ended)."""
    return sorted({(a, b) for a, b, _ in _schedules(view)})


def _schedules(view: TrialView) -> list[tuple[int, int, int]]:
    """(after, upto, settled) of each new schedule of `schedule_restarts`: `settled`, its last
    record while its learning rate still rose (its warm-up's end; `upto` without one).

    A schedule begins anew
    - where a model's learning rate rises again after it had decayed to at most half its peak
      so far (its first rise, not each record of the warm-up that follows): a warm-up begun
      anew (the next stage of a pipeline with its own optimizer and schedule), a warm restart
      (SGDR), a cyclical rate's next cycle, SWA's rate raised again;
    - where a model's learning rate is first recorded after another's had been: a model
      that starts training then (a student distilled from the teacher just fine-tuned, the
      network retrained from scratch after an architecture search, the next fold's).
    The script begins a new phase there; a loss that jumps as it begins (a new objective,
    another model, data it had not seen) is that phase's start, not a divergence: no step of
    the optimizer threw it there. A warm-up at the start, a step or plateau schedule and a
    constant rate (`lr_x100`) never begin anew."""
    found: list[tuple[int, int, int]] = []
    starts: list[tuple[int, int]] = []  # each model's first record and where its first rise ended
    records: list[np.ndarray] = []
    for name in view.names(None, regex="^" + LEARNING_RATE):
        cols = view.columns.tensor(name)
        lr = cols.statistic("sum") if cols is not None else None
        if cols is None or lr is None or not len(lr):
            continue
        ok = np.isfinite(lr) & (lr >= 0)
        steps, lr = cols.steps[ok], lr[ok]
        if not len(lr):
            continue
        up = lr[1:] > lr[:-1] * (1 + 1e-6)
        # where each rise ends: the records that no rise follows (its last, its peak)
        ends = np.flatnonzero(~np.concatenate([up, [False]]))

        def settled(i: int, steps: np.ndarray = steps, ends: np.ndarray = ends) -> int:
            return int(steps[ends[np.searchsorted(ends, i)]])

        starts.append((int(steps[0]), settled(0)))
        records.append(steps)
        peak = np.maximum.accumulate(lr)[:-1]
        turned = np.concatenate([[True], ~up[:-1]])  # its first rise, not each record of a warm-up
        rises = up & turned & (lr[:-1] <= SCHEDULE_RESTART_SHARE * peak)
        found += [(int(steps[i]), int(steps[i + 1]), settled(i + 1)) for i in np.flatnonzero(rises).tolist()]
    if len(starts) > 1:
        every = np.unique(np.concatenate(records))
        for first, done in starts:
            before = every[every < first]
            if len(before):  # another model's learning rate was recorded before this one's
                found.append((int(before[-1]), first, done))
    return sorted(set(found))


def schedule_phases(view: TrialView, steps: Sequence[int]) -> list[int]:
    """The indices into a series' sorted `steps` where a phase begun by a new schedule of
    the learning rate (`schedule_restarts`) opens: its first value once the new schedule's
    rate stopped rising (after its warm-up: a rise of the loss while the rate is raised again,
    as SWA raises it, is that schedule's, not a divergence)."""
    if not len(steps):
        return []
    found = {bisect.bisect_right(steps, c) for a, _, c in _schedules(view) if a < steps[-1]}
    return sorted(found - {0})


def phase_progress(
    view: TrialView, steps: Sequence[int], values: Sequence[float] | np.ndarray, window: int, patience: int
) -> tuple[bool, Progress | None]:
    """Whether the series (its sorted `steps` and `values`) runs in phases begun by new
    schedules of the learning rate (`schedule_phases`) and, if so, the progress of its last
    phase judged as a series of its own (`progress`; None while that phase is too short to
    judge: fewer than `patience` windows of `window` values). A stall is a stall of the phase
    now too: a fine-tune that falls from its own start is learning, though it ends above where
    the pretraining before it started (another objective on another scale)."""
    phases = schedule_phases(view, steps)
    if not phases:
        return False, None
    x = np.asarray(values[phases[-1] :], dtype=np.float64)
    if len(x) < max(2, patience) * max(2, window):
        return True, None
    _, k = checkpoints(window, patience, len(x))
    return True, progress(x, k + 1)


def restarted_between(view: TrialView, lo: int, hi: int) -> bool:
    """Whether a recorded learning rate began a new schedule (`schedule_restarts`), or was
    still rising into it, at a step that may lie in (lo, hi]: its transition runs from the
    record before its first rise to the end of that rise (SWA's rate raised over a few
    epochs)."""
    return any(a < hi and c > lo for a, _, c in _schedules(view))  # (settled: never before upto)


def opposed(a: Sequence[float], b: Sequence[float], blocks: int = 20) -> bool:
    """Whether two loss series move against each other (a GAN's two players: when one gains,
    the other loses): the medians of 20 blocks (of at least 5 values) over the stretch they share, or their changes
    from block to block, correlate below -0.4. Such a loss is one side of a game (or a term
    that rises by design against another, as an annealed KL term): not meant to fall."""
    n = min(len(a), len(b))
    blocks = max(5, min(blocks, n // 5))  # at least 5 values a block: a median of 2 is noise
    m = n // blocks
    if m < 1:
        return False
    xa = np.asarray(a[len(a) - n :], dtype=np.float64)[n - blocks * m :].reshape(blocks, m)
    xb = np.asarray(b[len(b) - n :], dtype=np.float64)[n - blocks * m :].reshape(blocks, m)
    ma, mb = np.median(xa, axis=1), np.median(xb, axis=1)
    if not (np.isfinite(ma).all() and np.isfinite(mb).all()):
        return False
    for ua, ub in ((ma, mb), (np.diff(ma), np.diff(mb))):  # their levels, or their changes
        if ua.std() > 0 and ub.std() > 0 and float(np.corrcoef(ua, ub)[0, 1]) < -0.4:
            return True
    return False


# a loss that stopped moving: a streak of exactly equal values ------------------------------------
STREAK_HISTORY = 1000  # values before a streak whose repeats set the run's own rate of them
_STREAK_MIN = 100  # fewer values before a streak: no rate to judge it by (a noise-free run: `_cycle`)


@dataclass(frozen=True)
class Streak:
    """A streak of exactly equal loss values too long for the run's own rate of repeats."""

    start: int  # index of its first value
    repeats: int  # values after the first equal to it
    value: float
    chance: float  # the upper bound of its chance under the run's own rate of repeats
    bar: float  # the share of the per-run budget its test may spend
    before: float  # the level it came from: the median of the (up to) 10 finite values before it


def _repeat_counts(x: np.ndarray) -> tuple[np.ndarray, ...]:
    """(eq, E, B, last) of a series x: eq[i] whether x[i + 1] == x[i] (finite); E and
    B the cumulative counts (a leading 0) of repeats and of repeats that follow a repeat
    (B[k]: those among eq[1 : k + 1]); last[i] the index of the last i' <= i with eq[i']
    False (-1: none)."""
    with np.errstate(invalid="ignore"):
        eq = (x[1:] == x[:-1]) & np.isfinite(x[1:])
    both = eq[1:] & eq[:-1]
    last = np.maximum.accumulate(np.where(eq, -1, np.arange(len(eq))))
    return eq, np.concatenate([[0], np.cumsum(eq)]), np.concatenate([[0], np.cumsum(both)]), last


def _streak_chance(x: np.ndarray, start: int, repeats: int, counts: tuple[np.ndarray, ...]) -> float:
    """The upper bound of the chance that a run's value at `start` is followed by `repeats`
    equal ones, from the run's own rate of repeats over the `STREAK_HISTORY` values before it:
    a first repeat at the rate p, each further one at the rate q of a repeat after a repeat,
    both as their Laplace (rule of succession) estimates, and neither below what the noise
    model of those values gives (`_repeat_model`): p q^(repeats - 1)."""
    _, e_cum, b_cum, _ = counts
    lo = max(0, start - STREAK_HISTORY)
    pairs = start - lo  # the pairs (x[i], x[i + 1]), i in [lo, start): within x[lo : start + 1]
    rep = float(e_cum[start] - e_cum[lo])
    cont = float(b_cum[max(start - 1, lo)] - b_cum[lo])  # eq[t] and eq[t + 1], lo <= t < start - 1
    p = (rep + 1) / (pairs + 2)
    q = (cont + 1) / (rep + 2)
    if p * q ** max(0, repeats - 1) >= 1e-300:  # only a candidate needs the model: it costs more
        model = _repeat_model(x[lo : start + 1])
        p, q = max(p, model), max(q, model)
    return p * q ** max(0, repeats - 1)


def _repeat_model(h: np.ndarray) -> float:
    """The chance of an exact repeat under the noise of the values `h`: their step-to-step
    changes, less the local slope (`detect._local_level` over 21), have a robust spread s; the
    values lie on a grid of resolution r (the smallest nonzero change: float rounding, or the
    logging's decimals), and a change rounds to 0 with chance about r / (s sqrt(2 pi)). A
    loss without noise (a full batch converging: its changes all the slope) repeats as soon
    as its steps fall below the rounding: chance 1, never a streak."""
    from mldbg.rules import detect

    h = h[np.isfinite(h)]
    d = np.diff(h)
    if len(d) < 2 * 21:
        return 1.0
    nz = np.abs(d[d != 0])
    if not len(nz):
        return 1.0
    s = detect._spread(d - detect._local_level(d, 21))
    if s <= 0:
        return 1.0
    return min(1.0, float(nz.min()) / (s * math.sqrt(2 * math.pi)))


def streak(
    values: Sequence[float] | np.ndarray, n: int, counts: tuple[np.ndarray, ...] | None = None
) -> Streak | None:
    """The streak of values equal to the `n`-th (the last judged), when its chance under the
    run's own rate of exact repeats (`_streak_chance`) is below the `n`-th value's share of a
    false-alarm budget of `detect.ALPHA` per run (`detect.spend(n)`); else None. A float loss
    under minibatch noise almost never repeats exactly; the logged loss held at one value
    says the optimizer no longer changes the model (or its data no longer changes). A
    quantized loss (3 significant digits, 4 decimals) repeats often, and its own rate says
    how long a streak it gives by chance. A loss of exactly 0 is a perfect fit, not a stall,
    where the loss came down to it: the values just before its streak (their median) at most
    `floor_of` (0.2 of its starting level). A loss that drops to exactly 0 from above that has
    not fitted anything: nothing is left to learn from (every label masked, a mean over no
    element that a `clamp(min=1)` turns into 0), and its streak is judged as any other.
    A series with fewer than `_STREAK_MIN` values before its streak is not judged."""
    from mldbg.rules import detect

    if n < 2 or n - 1 <= _STREAK_MIN or values[n - 1] != values[n - 2]:
        return None  # (a NaN is no repeat: NaN != NaN; an inf is exploding_tensor's)
    if not math.isfinite(values[n - 1]):
        return None
    x = np.asarray(values[:n], dtype=np.float64)
    if counts is None:
        counts = _repeat_counts(x)
    start = int(counts[3][n - 2]) + 1  # the streak's first value (eq[n - 2]: x[n - 1] == x[n - 2])
    repeats = n - 1 - start
    if start < _STREAK_MIN:
        return None
    head = x[max(0, start - 10) : start]
    head = head[np.isfinite(head)]
    before = float(np.median(head)) if len(head) else math.nan
    if x[-1] == 0 and not before > floor_of(x):
        return None  # fitted down to 0
    bar = detect.spend(n)
    chance = _streak_chance(x, start, repeats, counts)
    if chance >= bar:
        return None
    return Streak(start, repeats, float(x[-1]), chance, bar, before)


def streaks_at(values: Sequence[float] | np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """`streak` at each of `lengths` at once (a bool per length: True where it reports)."""
    x = np.asarray(values, dtype=np.float64)
    out = np.zeros(len(lengths), dtype=bool)
    if len(x) < 2:
        return out
    counts = _repeat_counts(x)
    eq = counts[0]
    for k, n in enumerate(np.asarray(lengths, dtype=np.int64).tolist()):
        if 2 <= n <= len(x) and eq[n - 2]:
            out[k] = streak(x, n, counts) is not None
    return out
