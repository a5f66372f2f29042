"""The rules' fast path: a statistic of a tensor over many steps at once, from the columns.

A rule may define `check_columns(trial, steps) -> int` beside `check(trial, step)`: it looks
at the runner's next `steps` (a sorted int64 array) all at once, from the statistics columns
(`TrialView.columns`, `mldbg.trial.columns`), brings its state up to date through the leading
steps where `check` would have found nothing, and returns how many those are. The runner then
calls `check` at the next step as usual, and asks `check_columns` again after it. Returning 0
declines (no statistics saved, a raw tensor to read, a step that may fire): the per-step path
is always the reference, and a rule without the method runs only through it.

`Over` is what these methods read: one tensor's saved statistics aligned with the steps.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.rules.losses import Evaluation, LossTracker, Series, SharedColumn, higher_is_better
from mldbg.rules.select import as_list
from mldbg.rules.view import TrialView
from mldbg.store.statistics import reduction_key
from mldbg.trial.columns import TensorColumns


class Over:
    """One tensor's records at the runner's `steps`: `present` (it has a record at that step),
    `raw` (that record holds the raw tensor), `stat(key)` (the saved statistic, NaN where not
    saved or not present), `mode` (the record's mode value, 0 where not present)."""

    def __init__(self, view: TrialView, name: str, steps: np.ndarray):
        self.name = name
        cols = view.columns.tensor(name)
        if cols is None:
            self._cols = None
            self.present = np.zeros(len(steps), dtype=bool)
            self.raw = self.present
            self._idx = np.full(len(steps), -1, dtype=np.int64)
            return
        self._cols = cols
        # each call aligns anew (`TensorColumns.at`: time in the tensor's own steps when it
        # has few): a cache of every tensor aligned with every step of a pass held 18 bytes
        # per tensor and step, gigabytes for 200 tensors over 10^6 steps
        self._idx, self.present, self.raw, self._safe = _aligned(cols, steps)

    def stat(self, key: str) -> np.ndarray:
        out = np.full(len(self.present), np.nan)
        if self._cols is None or not len(self._cols.steps):
            return out
        col = self._cols.statistic(key)
        if col is not None:
            out[self.present] = col[self._idx[self.present]]
        return out

    def reduction(self, reduction: str, abs: bool = False) -> np.ndarray:
        return self.stat(reduction_key(reduction, abs))

    @property
    def mode(self) -> np.ndarray:
        out = np.zeros(len(self.present), dtype=np.int64)
        if self._cols is not None and len(self._cols.steps):
            out[self.present] = self._cols.mode[self._idx[self.present]]
        return out


def present_rows(view: TrialView, name: str, steps: np.ndarray) -> np.ndarray:
    """The indices of `steps` (sorted, distinct) where tensor `name` has a record: `Over`'s
    `present`, as indices, in time in the smaller of the two (a tensor saved at 10^4 of 10^6
    steps: no array of 10^6 built)."""
    cols = view.columns.tensor(name)
    if cols is None or not len(cols.steps) or not len(steps):
        return np.zeros(0, dtype=np.int64)
    own = cols.steps
    if len(own) > len(steps):
        return np.flatnonzero(cols.at(steps) >= 0)
    pos = np.searchsorted(steps, own)
    inside = pos < len(steps)
    pos = pos[inside]
    return pos[steps[pos] == own[inside]]


def _aligned(cols: TensorColumns, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(index into the tensor's steps or -1, present, raw, index or 0) for each of `steps`."""
    idx = cols.at(steps)
    present = idx >= 0
    safe = np.maximum(idx, 0)
    raw = present & cols.has_raw[safe] if len(cols.steps) else present.copy()
    return idx, present, raw, safe


def selected_all(
    view: TrialView,
    collection_names: Sequence[str] | str | None,
    tensor_regex: Sequence[str] | str | None,
    default_collections: Sequence[str] | None,
    exclude: str | None = None,
) -> list[str]:
    """`mldbg.rules.select.selected` over the whole run (every step): the tensors a rule
    may look at; `Over(...).present` says at which steps each was saved."""
    colls, regex = as_list(collection_names), as_list(tensor_regex)
    if not colls and not regex:
        return view.names(None if default_collections is None else list(default_collections), exclude=exclude)
    names: list[str] = []
    if colls:
        names += view.names(colls, exclude=exclude)
    if regex:
        names += view.names(None, regex=regex, exclude=exclude)
    return sorted(set(names))


def aligned(have: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """For each of `steps`, its row in `have` (sorted steps, e.g. of `Columns.values`), or -1."""
    if not len(have):
        return np.full(len(steps), -1, dtype=np.int64)
    i = np.minimum(np.searchsorted(have, steps), len(have) - 1)
    return np.where(have[i] == steps, i, -1)


def quiet_prefix(interesting: np.ndarray) -> int:
    """How many leading steps are not `interesting` (a bool per step)."""
    hit = np.flatnonzero(interesting)
    return int(hit[0]) if len(hit) else len(interesting)


def quiet_until_saved(trial: TrialView, names: Sequence[str], steps: np.ndarray) -> int:
    """The leading `steps` before the first training step at which one of `names` was saved:
    the quiet prefix of a rule that acts only on those records."""
    seen = np.zeros(len(steps), dtype=bool)
    for name in names:
        cols = trial.columns.tensor(name)
        if cols is not None and len(cols.steps):
            seen |= cols.at(steps) >= 0
    if not seen.any():
        return len(steps)
    modes, _ = trial.columns.modes(steps)
    return quiet_prefix(seen & (modes == int(Mode.TRAIN)))


def raw_values(view: TrialView, name: str, steps: np.ndarray) -> np.ndarray | None:
    """The raw values of a small tensor (a loss) at `steps`, one row per step (NaN rows where
    it has no record), when every record of it holds its raw value; None otherwise."""
    found = view.columns.values(name)
    if found is None:
        return None
    have, values = found
    if len(have) > 4096 and int(have[-1]) - int(have[0]) == len(have) - 1:
        # steps saved one after another (a loss every step; `have` strictly increases): the
        # place of each is its offset, what a binary search over 10^6 steps would find
        i = np.clip(steps - have[0], 0, len(have))
    else:
        i = np.searchsorted(have, steps)
    i = np.minimum(i, len(have) - 1)
    ok = have[i] == steps
    flat = values.reshape(len(values), -1)
    out = np.full((len(steps), flat.shape[1]), np.nan)
    # only the rows asked are converted (a loss of 10^6 float32 values was copied whole as
    # float64 at each call); the assignment converts them as `astype` does
    out[ok] = flat[i[ok]]
    return out


NEVER = 2**62  # `need` of a rule that judges no training step (overfit: evaluations only)


def loss_prefix(
    view: TrialView,
    tracker: LossTracker,
    steps: np.ndarray,
    window: int,
    need: int,
    screen: Callable[[str, np.ndarray, np.ndarray], np.ndarray] | None = None,
    quiet_close: Callable[[str, bool], bool] | None = None,
    closed: Callable[[str, Evaluation], None] | None = None,
) -> int:
    """The fast path of the loss rules (`loss_not_decreasing`, `underfitting`): the leading
    training `steps` at which no loss series reaches a judged length (a multiple of `window`,
    at least `need`), with their losses appended to the tracker's series as `update` appends
    them. An evaluation pass still open, another mode, or a loss that only its raw value of
    several elements gives (a per-sample loss), ends them.

    `screen(name, values, lengths)`, where given, judges the windows in place: `values` is the
    whole training series of `name` as it will be (the tracker's values, then the new ones),
    `lengths` the series lengths at which a window closes among `steps`; it returns a bool
    per length, True where the rule's `check` may report (screened with a margin, never
    missing one). Only those steps end the prefix, so a quiet run is one call.

    `quiet_close(name, has_train)`, where given, keeps evaluation steps in the prefix: their
    losses go to the tracker's evaluation passes as `update` puts them, and a pass closes in
    place where the rule says closing it (`name`, which has training losses or not) is quiet;
    elsewhere the step that closes it is `check`'s. The training losses before that step are
    in the tracker when `quiet_close` is asked (as `check` has them), and `closed(name, pass)`,
    where given, is told of each pass closed in place (for a rule that keeps state on them)."""
    if tracker._open and quiet_close is None:  # check() closes the pass at the next step
        return 0
    if tracker._shared is None:
        tracker.bind(view)
    if need < NEVER and screen is None:
        steps = steps[: 2 * window + 8]  # a window closes within `window` losses: look no further
    if not len(steps):
        return 0
    modes, _ = view.columns.modes(steps)
    train = modes == int(Mode.TRAIN)
    evals = modes == int(Mode.EVAL) if quiet_close is not None else np.zeros(len(steps), dtype=bool)
    interesting = ~(train | evals)
    end = quiet_prefix(interesting)  # nothing after the first step of another mode is read
    if end < len(steps):
        steps, modes, train, evals, interesting = (
            a[: end + 1] for a in (steps, modes, train, evals, interesting)
        )
    series: list[tuple[str, np.ndarray, np.ndarray]] = []
    closing: list[tuple[str, np.ndarray, np.ndarray]] = []  # (name, indices of steps, series lengths)
    for name in _loss_names(view, tracker):
        over = Over(view, name, steps)
        if not over.present.any():
            continue
        mean = over.stat("mean")
        keyed = view.columns.tensor(name)
        has_mean = keyed is not None and keyed.statistic("mean") is not None
        values = mean.copy()
        raw_only = over.raw & np.isnan(mean)
        if raw_only.any():
            raw = raw_values(view, name, steps)
            if raw is None or raw.shape[1] != 1:
                interesting |= raw_only
            else:
                values = np.where(raw_only, raw[:, 0], values)
        # NaN from the column: a NaN loss, or no saved mean (no value at that step) - ambiguous
        interesting |= over.present & ~over.raw & np.isnan(mean) & has_mean
        valid = over.present & (over.raw | ~np.isnan(mean))
        if higher_is_better(name):
            values = 1.0 - values
        have = len(tracker.train[name].values) if name in tracker.train else 0
        count = have + np.cumsum(valid & train)
        closes = valid & train & (count % window == 0) & (count >= need)
        if screen is None:
            interesting |= closes
        else:
            at = np.flatnonzero(closes)
            closing.append((name, at, count[at]))
        series.append((name, valid, values))
    k = quiet_prefix(interesting)
    if screen is not None:
        for name, at, lengths in closing:
            at_k = at < k
            if not at_k.any():
                continue
            valid, values = next((v, x) for nm, v, x in series if nm == name)
            upto = int(at[at_k][-1]) + 1
            whole = _extended(view, tracker.train.get(name), values[:upto][valid[:upto] & train[:upto]])
            hit = np.flatnonzero(screen(name, whole, lengths[at_k]))
            if len(hit):
                k = min(k, int(at[hit[0]]))
    done = 0  # the training losses of steps[:done] are in the tracker

    def append(upto: int) -> None:
        nonlocal done
        for name, valid, values in series:
            take = np.flatnonzero(valid[done:upto] & train[done:upto]) + done
            if not len(take):
                continue
            tracker.seen_any = True
            s = tracker.train.get(name) or tracker.train.setdefault(name, tracker.series(name, Mode.TRAIN))
            _extend(s.steps, steps[take], np.int64)
            _extend(s.values, values[take], np.float64)
        done = max(done, upto)

    if evals[:k].any() or tracker._open:
        k = _passes(tracker, steps, modes, evals, train, series, k, quiet_close, closed, append)
    append(k)
    return k


_TYPECODES: dict[type[np.generic], str] = {np.int64: "q", np.float64: "d"}


def _extend(into: Any, new: np.ndarray, dtype: type[np.generic]) -> None:
    """Append `new` to a series' typed array (`losses.Series`: `array('q')`, `array('d')`)
    as its bytes, or as a list where the series holds a list: no Python object per value (the
    10^6 losses of a long run were 10^6 floats and ints made and dropped per rule)."""
    if isinstance(into, SharedColumn):
        into.extend(np.asarray(new, dtype=dtype))
    elif isinstance(into, array) and into.typecode == _TYPECODES[dtype]:
        into.frombytes(np.ascontiguousarray(new, dtype=dtype).tobytes())
    else:
        into.extend(new.tolist())


def _extended(view: TrialView, series: Series | None, new: np.ndarray) -> np.ndarray:
    """The values of a tracker's series followed by `new`, as one float64 array, in time
    proportional to what was appended since the last call: the series' values are mirrored
    in a buffer of the view (`TrialView.series_buffers`) that grows by doubling; `new` is
    written after them, uncommitted (the next call mirrors what the series then holds).
    A series cut back since (`give_back`) is mirrored anew."""
    if series is None:
        return np.asarray(new, dtype=np.float64)
    values, steps = series.values, series.steps
    if isinstance(values, SharedColumn):  # held once for every rule: no mirror of its own
        out = np.concatenate((np.asarray(values), np.asarray(new, dtype=np.float64)))
        out.flags.writeable = False
        return out
    n = len(values)
    found = view.series_buffers.get(id(series))
    if found is not None and found[0] is series:
        _, buf, m, last = found
        if m > n or (m and steps[m - 1] != last):
            buf, m = np.zeros(0), 0  # cut back: mirror anew
    else:
        buf, m = np.zeros(0), 0
    need = n + len(new)
    if len(buf) < need:
        grown = np.empty(max(need, 2 * len(buf), 1024), dtype=np.float64)
        grown[:m] = buf[:m]
        buf = grown
    if m < n:
        buf[m:n] = values[m:n]
    view.series_buffers[id(series)] = (series, buf, n, steps[n - 1] if n else None)
    buf[n:need] = new
    out = buf[:need]
    out.flags.writeable = False  # a view of the buffer: read it, never keep it
    return out


def _passes(
    tracker: LossTracker,
    steps: np.ndarray,
    modes: np.ndarray,
    evals: np.ndarray,
    train: np.ndarray,
    series: list[tuple[str, np.ndarray, np.ndarray]],
    k: int,
    quiet_close: Callable[[str, bool], bool] | None,
    closed: Callable[[str, Evaluation], None] | None,
    append: Callable[[int], None],
) -> int:
    """`loss_prefix`'s evaluation steps among `steps[:k]`: their losses go to the tracker's
    passes as `LossTracker.update` puts them (a pass ends at a gap or another mode); returns
    the first step where a pass closes that `quiet_close` leaves to `check` (else k).
    `append(i)` puts the training losses of `steps[:i]` in the tracker."""
    assert quiet_close is not None
    at = np.flatnonzero(evals[:k])
    idx = sorted({*at.tolist(), *(at + 1).tolist(), *([0] if tracker._open else [])})
    for i in idx:
        if i >= k:
            break
        step, mode = int(steps[i]), int(modes[i])
        ending = [
            name for name, ev in tracker._open.items() if mode != int(Mode.EVAL) or step != ev.last_step + 1
        ]
        if ending:
            append(i)
        for name in ending:
            valid = next((v for nm, v, _ in series if nm == name), None)
            # check() asks after update() appended the step's own training losses
            before = name in tracker.train or (
                valid is not None and bool((valid[: i + 1] & train[: i + 1]).any())
            )
            if not quiet_close(name, before):
                return i
        for name in ending:
            ended = tracker._open.pop(name)
            if closed is not None:
                closed(name, ended)
        if mode != int(Mode.EVAL):
            continue
        for name, valid, values in series:
            if not valid[i]:
                continue
            tracker.seen_any = True
            ev = tracker._open.get(name)
            if ev is None:
                ev = tracker._open[name] = Evaluation(step, step)
                tracker.evals.setdefault(name, []).append(ev)
            ev.last_step = step
            ev.total += float(values[i])
            ev.count += 1
    return k


def give_back(tracker: LossTracker, steps: np.ndarray, cut: int, before: dict[str, int], seen: bool) -> None:
    """Undo `loss_prefix`'s appends from `steps[cut]` on (`before`: each series' length before
    it, `seen`: `tracker.seen_any` before it): a rule whose own screening found a step that
    may fire hands it, and what follows, back to `check`, which appends and judges them."""
    last = int(steps[cut])
    for name in list(tracker.train):
        s = tracker.train[name]
        keep = bisect.bisect_left(s.steps, last, lo=before.get(name, 0))
        del s.steps[keep:], s.values[keep:]
        if not s.values and name not in before:
            del tracker.train[name]
    tracker.seen_any = seen or any(len(s.values) > before.get(n, 0) for n, s in tracker.train.items())


def _loss_names(view: TrialView, tracker: LossTracker) -> list[str]:
    """`LossTracker.names` over the whole run: the tensors it may read."""
    names: list[str] = []
    if tracker.use_losses_collection:
        names += view.names("losses")
        names += view.names("scalars", regex=r"(?i)loss")
    if tracker.tensor_regex:
        names += view.names(None, regex=tracker.tensor_regex)
    return sorted(set(names))


__all__ = [
    "NEVER",
    "Over",
    "aligned",
    "give_back",
    "loss_prefix",
    "quiet_prefix",
    "raw_values",
    "selected_all",
]
