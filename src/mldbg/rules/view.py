"""What rules read: a Trial with a per-step cache that every rule of one runner shares.

Many rules look at the same tensors at the same step (weights for `unchanged_tensor`,
`weight_update_ratio`, `exploding_tensor`...). The runner hands them a `TrialView`: it reads
each raw tensor of the current step once, answers reductions from the saved reductions when
only those were recorded, and keeps the tensor names of each collection at hand.

Rules read *statistics* (`mldbg.store.statistics`: `mean_abs`, `nan_count`, `unit_active`...)
through `statistic()`: the statistic the hook saved when there is one, else computed from the
raw tensor with the same NumPy reference, so a run recorded with the two-line hook (statistics
every step, raw rarely) and an old run (raw tensors only) are judged by the same code.
`class_statistics()` does the same for labels and predictions.

The view is the whole surface a rule reads: the step queries (`names`, `raw`, `value`,
`reduce`, `statistic`, `class_statistics`, `saved_reductions`, `tensor`), the read-only queries of the Trial that custom and
smdebug-style rules use (`steps`, `tensor_names`, `mode`, `mode_step`, `workers`,
`loaded_all_steps` ...), and `trial`, the Trial itself, for anything else.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from mldbg.config import Mode
from mldbg.errors import InvalidConfig, MldbgError, TensorUnavailableForStep
from mldbg.rules.labels import ClassStats, class_stats_from_raw
from mldbg.store.reductions import REDUCTION_NAMES as REDUCTIONS
from mldbg.store.reductions import reduce
from mldbg.store.shards import Unassembled
from mldbg.store.statistics import Statistic, Value, compute, vector_name
from mldbg.trial import Record, Records, Trial
from mldbg.trial.columns import Columns, TensorColumns
from mldbg.trial.shards import global_value

if TYPE_CHECKING:
    from mldbg.store import Store


class _Missing(enum.Enum):
    """Cached "only reductions were saved" (None means "not read yet")."""

    NO_RAW = enum.auto()


_NO_RAW: Final = _Missing.NO_RAW
# reduction -> (its statistic key, that of |x|): `mldbg.store.statistics.reduction_key`
_REDUCTION_KEYS: Final = {r: (r, f"{r}_abs") for r in REDUCTIONS}

# safetensors dtype names (the index's) -> NumPy's


class TrialView:
    """A Trial as the rules read it, plus a cache of the current step's reads.

    `trial` is the Trial itself: what the view does not answer (waiting for steps, exports)
    is asked there.
    """

    def __init__(self, trial: Trial, columns: bool = True):
        self.trial: Trial = trial
        self.use_columns = columns  # answer saved statistics from the columns (no Record built)
        self._step: int | None = None
        self._raw: dict[tuple[str, int, Any, Any], Any] = {}
        self._reds: dict[tuple[str, int, str, bool], float] = {}
        self._stats: dict[tuple[str, int, str], Value | None] = {}
        self._classes: dict[tuple[str, str | None, int, bool], ClassStats | None] = {}
        self._names: dict[tuple[Any, ...], list[str]] = {}
        self._collections: dict[str, frozenset[str]] | None = None
        self._modes: dict[int, Mode] = {}
        self._patterns: dict[str, re.Pattern[str]] = {}
        self._tensors: dict[str, CachedTensor] = {}
        self._records: dict[tuple[str, int], Any] = {}
        self._where: dict[tuple[str, int], tuple[int, str]] = {}  # -> (position in records(name), worker)
        self._present: dict[int, set[str]] = {}
        self._synced: dict[str, Records] = {}  # name -> its records, as indexed so far
        self._synced_all = 0  # the trial's loaded_records when last indexed
        self._columns: Columns | None = None
        self._column_cache: dict[str, Any] = {}  # name -> its TensorColumns (or None), while
        self._column_loaded = -1  # the trial's loaded_records is this
        # id(a loss tracker's series) -> (the series, a float64 buffer mirroring its values,
        # how many it mirrors, the step of the last): `mldbg.rules.columns._extended`
        self.series_buffers: dict[int, tuple[Any, np.ndarray, int, Any]] = {}
        # (loss tensor, mode, "steps" or "values") -> the buffer the loss rules' trackers
        # share (`mldbg.rules.losses.SharedColumn`): a loss series held once, not per rule
        self.loss_columns: dict[tuple[str, Any, str], Any] = {}
        # the run had ended and was read whole when the runner began walking these steps (an
        # offline check): a rule may leave a verdict on the run so far to the run's end, which
        # it sees at `finish` (set by the runner, each cycle; no refresh asked)
        self.finished = False

    def __repr__(self) -> str:
        return f"TrialView({self.trial!r})"

    # bookkeeping (the runner calls these) -----------------------------------------------
    def begin(self, step: int) -> None:
        """Move to `step`: what was cached for other steps is dropped."""
        if step != self._step:
            self._step = step
            self._raw.clear()
            self._reds.clear()
            self._stats.clear()
            self._classes.clear()
            self._records.clear()

    def refreshed(self) -> None:
        """New data was loaded: collections and names may have grown."""
        self._collections = None
        self._names.clear()
        self._records.clear()
        if not self.use_columns:  # else indexed when a Record is asked for (rarely)
            self._sync()

    @property
    def columns(self) -> Columns:
        """The run's statistics as columns over steps (`mldbg.trial.columns`), for the rules'
        fast path (`mldbg.rules.columns`); grown as the trial loads more."""
        if self._columns is None:
            self._columns = Columns.of(self.trial)
        return self._columns

    # the run: read-only queries of the Trial ----------------------------------------------
    @property
    def path(self) -> str:
        """Where the run is (a local path or a URL), for messages."""
        return self.trial.path

    @property
    def store(self) -> Store:
        """The run's store: the profiler rules read their series from it."""
        return self.trial.store

    @property
    def loaded_all_steps(self) -> bool:
        """True once training ended and every step it wrote has been read."""
        return self.trial.loaded_all_steps

    def steps(self, mode: Mode | None = None) -> list[int]:
        """Global steps with saved data; with a mode, that mode's own steps."""
        return self.trial.steps(mode)

    def mode(self, step: int) -> Mode:
        """The mode of a global step (asked of the trial once per step)."""
        found = self._modes.get(step)
        if found is None:
            found = self._modes[step] = self.trial.mode(step)
        return found

    def mode_step(self, step: int) -> int:
        """The mode's own step count at a global step."""
        return self.trial.mode_step(step)

    def global_step(self, mode: Mode, mode_step: int) -> int:
        """The global step of a mode's own step."""
        return self.trial.global_step(mode, mode_step)

    def workers(self) -> list[str]:
        """The workers that wrote to the run so far."""
        return self.trial.workers()

    def batch_fingerprints(self, step: int) -> list[int]:
        """One fingerprint per sample of the (first) model input at `step`: the batch a
        finding names for replay (`Finding.samples`); [] when none was recorded there."""
        for name in sorted(self.names("inputs", step=step)):
            found = self.saved_statistic(name, step, "sample_fingerprints")
            if isinstance(found, np.ndarray) and found.size:
                return [int(v) for v in found.reshape(-1)]
        return []

    # tensors and collections ------------------------------------------------------------
    def collections(self) -> dict[str, frozenset[str]]:
        """Collection name -> the names of its recorded tensors (cached until new data)."""
        if self._collections is None:
            self._collections = {c: frozenset(n) for c, n in self.trial.collections().items()}
        return self._collections

    def has_collection(self, name: str) -> bool:
        """True when the collection holds at least one recorded tensor."""
        return bool(self.collections().get(name))

    def has_tensor(self, name: str) -> bool:
        return self.trial.has_tensor(name)

    def tensor_names(
        self,
        regex: str | list[str] | None = None,
        collection: str | None = None,
        mode: Mode | None = None,
        step: int | None = None,
    ) -> list[str]:
        """The Trial's query, for rules written against it; `names` is the cached one."""
        return self.trial.tensor_names(regex=regex, collection=collection, mode=mode, step=step)

    def tensor(self, name: str) -> CachedTensor:
        """A tensor whose values of the current step are read once for every rule."""
        found = self._tensors.get(name)
        if found is None:
            found = self._tensors[name] = CachedTensor(self, name)
        return found

    def names(
        self,
        collections: Sequence[str] | str | None = None,
        regex: Sequence[str] | str | None = None,
        step: int | None = None,
        exclude: str | None = None,
    ) -> list[str]:
        """Tensor names in any of `collections` (all tensors when None), matching any of
        `regex`, not matching `exclude`, and (when `step` is given) saved at that step."""
        if isinstance(collections, str):
            collections = (collections,)
        if isinstance(regex, str):
            regex = (regex,)
        key = (tuple(collections) if collections else None, tuple(regex) if regex else None, step, exclude)
        found = self._names.get(key)
        if found is not None:
            return found
        if step is not None and self.use_columns:
            every = self.names(collections, regex, None, exclude)
            names = []
            for n in every:
                cols = self._tensor_columns(n)
                if cols is not None and cols.index(step) >= 0:
                    names.append(n)
        elif step is not None:
            every = self.names(collections, regex, None, exclude)
            present = self._present.get(step) if self._where is not None else None
            if present is None and self._where is not None:
                self._sync()
                present = self._present.get(step) if self._where is not None else None
            if present is not None:
                names = [n for n in every if n in present]
            else:
                names = [n for n in every if self.trial.tensor(n).has_step(step)]
        else:
            pool: Iterable[str]
            if collections is None:
                pool = self.trial.tensor_names()
            else:
                cmap = self.collections()
                pool = set().union(*(cmap.get(c, frozenset()) for c in collections))
            names = sorted(pool)
            if regex:
                pats = [self._pattern(r) for r in regex]
                if len(pats) == 1:  # the usual one pattern: no generator per name
                    names = list(filter(pats[0].search, names))
                else:
                    names = [n for n in names if any(p.search(n) for p in pats)]
            if exclude:
                pat = self._pattern(exclude)
                names = [n for n in names if not pat.search(n)]
        self._names[key] = names
        return names

    def _pattern(self, regex: str) -> re.Pattern[str]:
        found = self._patterns.get(regex)
        if found is None:
            try:
                found = self._patterns[regex] = re.compile(regex)
            except re.error as e:
                raise InvalidConfig(f"invalid regex {regex!r}: {e}") from None
        return found

    # values -----------------------------------------------------------------------------
    def _sync(self) -> None:
        """Index the records the trial loaded since the last call: (name, step) -> the first
        worker's record, and the names saved at each step. One pass over the new entries of
        each tensor's record columns (`Trial.records`, which only grow), so that per-step
        lookups are dict lookups."""
        loaded = self.trial.loaded_records
        if loaded == self._synced_all:
            return
        self._synced_all = loaded
        for name in self.trial.tensor_names():
            records = self.trial.records(name)
            seen = self._synced.get(name)
            done = 0 if seen is None else len(seen)
            if len(records) == done:
                continue
            workers = records.workers
            steps, ids = records.step[done:].tolist(), records.worker[done:].tolist()
            for pos, (st, wid) in enumerate(zip(steps, ids, strict=True), done):
                key = (name, st)
                worker = workers[wid]
                prev = self._where.get(key)
                if prev is None or worker < prev[1]:
                    self._where[key] = (pos, worker)
                self._present.setdefault(st, set()).add(name)
            self._synced[name] = records

    def _record(self, name: str, step: int) -> Record | None:
        """The record of a tensor at a global step that reads use (the first worker's), from
        the trial's index without touching data files; None when the index has none (yet):
        the public Tensor API then says why."""
        key = (name, step)
        found = self._records.get(key)
        if found is None and self.use_columns:  # the columns know the first worker's position
            cols = self._tensor_columns(name)
            i = -1 if cols is None else cols.index(step)
            if i >= 0:
                found = self.trial.records(name)[cols.position(i)]  # type: ignore[union-attr]
                if step == self._step:
                    self._records[key] = found
                return found
            # the columns hold every loaded record of every tensor the trial knows
            # (`Trial.records`, every worker): none here, as indexing the whole run would
            # find (`_sync`: tens of ms on a long run, for one step of one tensor)
            if step == self._step:
                self._records[key] = _NO_RAW
            return None
        if found is None:
            where = self._where.get(key)
            if where is None:
                self._sync()
                where = self._where.get(key)
            found = _NO_RAW if where is None else self._synced[name][where[0]]
            if step == self._step:
                self._records[key] = found
        return None if found is _NO_RAW else found

    def saved_reductions(self, name: str, step: int) -> dict[tuple[str, bool], float]:
        """Every reduction saved for a tensor at a global step: {(reduction, abs): value}."""
        rec = self._record(name, step)
        return {} if rec is None else dict(rec.reductions)

    def raw(
        self, name: str, step: int, mode: Mode | None = None, worker: str | None = None
    ) -> np.ndarray | None:
        """The saved tensor, or None when only its reductions were saved at that step."""
        key = (name, step, mode, worker)
        found = self._raw.get(key)
        if found is None and worker is None:  # a sharded tensor saved as its pieces: the global one
            try:
                found = global_value(self.trial, name, step, mode)
            except Unassembled:  # some worker's pieces missing: not the tensor, as if not saved raw
                found = _NO_RAW
            if found is not None and step == self._step:
                self._raw[key] = found
        if found is None and self.use_columns and mode is None and worker is None:
            found = self._column_raw(name, step)
            if found is not None and step == self._step:
                self._raw[key] = found
        if found is None:
            rec = self._record(name, step) if mode is None and worker is None else None
            if rec is not None and not rec.has_raw:
                found = _NO_RAW
            elif rec is not None:
                found = self.trial.read(rec)
            else:
                try:
                    found = self.trial.tensor(name).value(step, mode, worker)
                except TensorUnavailableForStep:
                    if not self.trial.tensor(name).has_step(step, mode):
                        raise
                    found = _NO_RAW
            if step == self._step:
                self._raw[key] = found
        return None if found is _NO_RAW else found

    def value(self, name: str, step: int, mode: Mode | None = None, worker: str | None = None) -> np.ndarray:
        """The saved tensor; `TensorUnavailableForStep` when only its reductions were saved."""
        found = self.raw(name, step, mode, worker)
        if found is None:
            raise TensorUnavailableForStep(f"only reductions of {name!r} were saved at step {step}")
        return found

    def reduce(self, name: str, step: int, reduction: str, abs: bool = False) -> float:
        """A reduction of a tensor at a global step: computed from the raw tensor when it was
        saved (read once for every rule), else the saved reduction."""
        key = (name, step, reduction, abs)
        found = self._reds.get(key)
        if found is None:
            if self.use_columns and reduction in _REDUCTION_KEYS:
                stat = _REDUCTION_KEYS[reduction][abs]
                found = self._column_value(name, step, stat)
                cols = self._tensor_columns(name) if found is None else None
                if found is None and cols is not None and cols.statistic(stat) is None:
                    raw = self._column_raw(name, step)  # never saved: from the raw value
                    if raw is not None and raw is not _NO_RAW:
                        with np.errstate(all="ignore"):
                            found = reduce(raw, reduction, abs)
                if found is not None:
                    if step == self._step:
                        self._reds[key] = found
                    return found
            rec = self._record(name, step)
            if rec is not None and (reduction, abs) in rec.reductions:
                found = rec.reductions[(reduction, abs)]
            else:
                raw = self.raw(name, step)
                if raw is None:
                    found = self.trial.tensor(name).reduction_value(step, reduction, abs)
                else:
                    with np.errstate(all="ignore"):
                        found = reduce(raw, reduction, abs)
            if step == self._step:
                self._reds[key] = found
        return found

    # statistics ---------------------------------------------------------------------------
    def statistic(self, name: str, step: int, key: str | Statistic) -> Value | None:
        """A statistic of a tensor at a global step (`mldbg.store.statistics`): a float for a
        scalar key (`mean_abs`, `outside(-1.0,1.0)`), an ndarray for a vector one
        (`unit_active`). The saved one when the hook recorded it, else computed from the raw
        tensor (once per step for every rule), else None: a rule that gets None has no data
        for that tensor at that step and must not judge it."""
        stat = Statistic.parse(key)
        cache = (name, step, stat.key)
        if cache in self._stats:
            return self._stats[cache]
        found = self.saved_statistic(name, step, stat)
        if found is None:
            for k, v in self._computed(name, step, stat).items():
                if step == self._step:
                    self._stats[(name, step, k)] = v
                if k == stat.key:
                    found = v
        if step == self._step:
            self._stats[cache] = found
        return found

    def saved_statistic(self, name: str, step: int, key: str | Statistic) -> Value | None:
        """Only what the hook saved (None when it did not): a scalar from the tensor's
        record, a vector from its `stats/<tensor>/<key>` record. Rules whose raw reading is
        finer than the statistic (per position, exact percentiles) ask this first."""
        stat = Statistic.parse(key)
        if stat.is_vector:
            return self._saved_vector(name, step, stat)
        if self.use_columns:
            found = self._column_value(name, step, stat.key)
            if found is not None:
                return found
        rec = self._record(name, step)
        if rec is None:
            return None
        saved = rec.statistics
        found = saved.get(stat.key)
        if found is None and stat.name in ("variance", "std"):  # the one is the other's square
            other = saved.get("std" if stat.name == "variance" else "variance")
            if other is not None:
                found = other * other if stat.name == "variance" else float(np.sqrt(other))
        return None if found is None else float(found)

    def _tensor_columns(self, name: str) -> TensorColumns | None:
        """A tensor's columns (None for a name not recorded), looked up once per refresh."""
        loaded = self.trial.loaded_records
        if loaded != self._column_loaded:
            self._column_cache.clear()
            self._column_loaded = loaded
        cols = self._column_cache.get(name, _NO_RAW)
        if cols is _NO_RAW:
            cols = self._column_cache[name] = self.columns.tensor(name)
        return cols

    def _column_raw(self, name: str, step: int) -> Any:
        """A small tensor's raw value at a step from the stacked columns (no Record built),
        `_NO_RAW` when that record has only statistics, None when the columns cannot say."""
        cols = self._tensor_columns(name)
        if cols is None:
            return None
        i = cols.index(step)
        if i < 0:
            return None
        if not cols.has_raw[i]:
            return _NO_RAW
        stacked = self.columns.values(name)
        return None if stacked is None else stacked[1][i]

    def _column_value(self, name: str, step: int, key: str) -> float | None:
        """A saved scalar statistic from the columns, without building a Record; None when
        the column has NaN there (not saved, or NaN: the record says which)."""
        cols = self._tensor_columns(name)
        if cols is None or not cols.has_statistics:
            return None
        value = cols.value(key, step)
        return None if value != value else value

    def layout(self, name: str, step: int) -> tuple[str, tuple[int, ...]] | None:
        """(dtype kind as NumPy's `dtype.kind`: 'f', 'i', 'u', 'b'; shape) of a tensor at a
        step: from the raw tensor, else from its record when the index keeps them (a
        statistics-only record does); None when unknown. Rules that judge only float inputs
        or integer sequences ask this before trusting statistics."""
        try:
            raw = self.raw(name, step)
        except MldbgError:
            return None
        if raw is not None:
            return raw.dtype.kind, tuple(raw.shape)
        if self.use_columns:  # from the index's columns: no Record, no statistics decoded
            cols = self._tensor_columns(name)
            i = -1 if cols is None else cols.index(step)
            if i >= 0:
                return self.trial.layout_at(name, cols.position(i))  # type: ignore[union-attr]
        rec = self._record(name, step)
        return None if rec is None else (rec.dtype.kind, rec.shape)

    def _saved_vector(self, name: str, step: int, stat: Statistic) -> np.ndarray | None:
        vname = vector_name(name, stat)
        if self.use_columns:
            found = self._column_raw(vname, step)
            if found is not None:
                return None if found is _NO_RAW else found
        try:
            rec = self._record(vname, step)
            if rec is not None:
                return self.trial.read(rec) if rec.has_raw else None
            if self.trial.has_tensor(vname):  # a trial that lists vectors apart from tensors
                tensor = self.trial.tensor(vname)
                return tensor.value(step) if tensor.has_step(step) else None
        except MldbgError:
            return None
        return None

    def _computed(self, name: str, step: int, stat: Statistic) -> dict[str, Value]:
        """The statistic (and the denominators it brings) from the raw tensor; {} without one."""
        try:
            raw = self.raw(name, step)
        except MldbgError:
            return {}
        if raw is None or raw.dtype.kind not in "biuf":
            return {}
        previous = None
        if stat.name == "delta_l2":  # the change since the tensor's previous saved step
            earlier = [s for s in self.trial.tensor(name).steps() if s < step]
            try:
                previous = self.raw(name, earlier[-1]) if earlier else None
            except MldbgError:
                previous = None
            if previous is None:
                return {}
        return compute(raw, [stat], previous=previous)

    def class_statistics(
        self, labels: str, predictions: str | None, step: int, argmax: bool = False
    ) -> ClassStats | None:
        """Class counts of the labels (and of the predicted classes, per-class correct
        predictions and the confusion matrix when `predictions` is given) at a step: the
        `class_counts` / `class_correct` / `confusion` vectors the hook saved on the labels'
        and predictions' names, else counted from the raw tensors (`rules.labels`); None when
        neither is there or the labels are not class ids (a regression target)."""
        cache = (labels, predictions, step, argmax)
        if cache in self._classes:
            return self._classes[cache]
        found = self._saved_classes(labels, predictions, step)
        if found is None:
            try:
                y = self.raw(labels, step)
                p = self.raw(predictions, step) if predictions is not None else None
            except MldbgError:
                y = p = None
            found = None if y is None else class_stats_from_raw(y, p, argmax)
        if step == self._step:
            self._classes[cache] = found
        return found

    def _saved_classes(self, labels: str, predictions: str | None, step: int) -> ClassStats | None:
        counts = self._saved_vector(labels, step, Statistic("class_counts"))
        if counts is None:
            return None
        counts = np.asarray(counts, dtype=np.int64)
        out = ClassStats(labels=counts, classes=len(counts) - 1)
        if predictions is not None:
            predicted = self._saved_vector(predictions, step, Statistic("class_counts"))
            correct = self._saved_vector(labels, step, Statistic("class_correct"))
            confusion = self._saved_vector(labels, step, Statistic("confusion"))
            out.predicted = None if predicted is None else np.asarray(predicted, dtype=np.int64)
            out.correct = None if correct is None else np.asarray(correct, dtype=np.int64)
            out.confusion = None if confusion is None else np.asarray(confusion, dtype=np.int64)
        return out


class CachedTensor:
    """`trial.tensor(name)` as seen through a TrialView: what it reads at the current step
    comes from the view's cache, shared by every rule; the rest is the Tensor's."""

    def __init__(self, view: TrialView, name: str):
        self._view = view
        self.name = name
        self._tensor = view.trial.tensor(name)

    def __repr__(self) -> str:
        return f"Tensor({self.name!r})"

    def steps(self, mode: Mode | None = None) -> list[int]:
        """Global steps where it was saved; with a mode, that mode's own steps."""
        cols = self._columns() if mode is None else None
        return self._tensor.steps(mode) if cols is None else cols.steps.tolist()

    def has_step(self, step: int, mode: Mode | None = None) -> bool:
        """Whether it was saved at `step` (by any worker): a dict lookup in the columns."""
        cols = self._columns() if mode is None else None
        return self._tensor.has_step(step, mode) if cols is None else cols.index(step) >= 0

    def _columns(self) -> TensorColumns | None:
        """The tensor's columns (`TrialView.columns`: every worker's records), or None on
        the reference path."""
        return self._view._tensor_columns(self.name) if self._view.use_columns else None

    def workers(self, step: int, mode: Mode | None = None) -> list[str]:
        """The workers that saved it at `step`."""
        return self._tensor.workers(step, mode)

    def value(self, step: int, mode: Mode | None = None, worker: str | None = None) -> np.ndarray:
        """The tensor at `step` (a global step, or the mode's step when `mode` is given)."""
        return self._view.value(self.name, step, mode, worker)

    def values(self, mode: Mode | None = None) -> dict[int, np.ndarray]:
        """Every saved value (of the first worker), by step."""
        return {s: self.value(s, mode) for s in self.steps(mode)}

    def reduction_value(
        self,
        step: int,
        reduction: str,
        abs: bool = False,
        mode: Mode | None = None,
        worker: str | None = None,
    ) -> float:
        if mode is None and worker is None:
            return self._view.reduce(self.name, step, reduction, abs)
        return self._tensor.reduction_value(step, reduction, abs, mode, worker)

    def reduction_values(
        self, reduction: str, abs: bool = False, mode: Mode | None = None
    ) -> dict[int, float]:
        return {s: self.reduction_value(s, reduction, abs, mode) for s in self.steps(mode)}
