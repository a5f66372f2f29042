"""What rules read: a Trial with a per-step cache that every rule of one runner shares.

Many rules look at the same tensors at the same step (weights for `unchanged_tensor`,
`weight_update_ratio`, `exploding_tensor`...). The runner hands them a `TrialView`: it reads
each raw tensor of the current step once, answers reductions from the saved reductions when
only those were recorded, and keeps the tensor names of each collection at hand.

The view is the whole surface a rule reads: the step queries (`names`, `raw`, `value`,
`reduce`, `saved_reductions`, `tensor`), the read-only queries of the Trial that custom and
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
from mldbg.errors import InvalidConfig, TensorUnavailableForStep
from mldbg.store.reductions import reduce
from mldbg.trial import Record, Records, Trial

if TYPE_CHECKING:
    from mldbg.store import Store


class _Missing(enum.Enum):
    """Cached "only reductions were saved" (None means "not read yet")."""

    NO_RAW = enum.auto()


_NO_RAW: Final = _Missing.NO_RAW


class TrialView:
    """A Trial as the rules read it, plus a cache of the current step's reads.

    `trial` is the Trial itself: what the view does not answer (waiting for steps, exports)
    is asked there.
    """

    def __init__(self, trial: Trial):
        self.trial: Trial = trial
        self._step: int | None = None
        self._raw: dict[tuple[str, int, Any, Any], Any] = {}
        self._reds: dict[tuple[str, int, str, bool], float] = {}
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

    def __repr__(self) -> str:
        return f"TrialView({self.trial!r})"

    # bookkeeping (the runner calls these) -----------------------------------------------
    def begin(self, step: int) -> None:
        """Move to `step`: what was cached for other steps is dropped."""
        if step != self._step:
            self._step = step
            self._raw.clear()
            self._reds.clear()
            self._records.clear()

    def refreshed(self) -> None:
        """New data was loaded: collections and names may have grown."""
        self._collections = None
        self._names.clear()
        self._records.clear()
        self._sync()

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
        if step is not None:
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
        return self._tensor.steps(mode)

    def has_step(self, step: int, mode: Mode | None = None) -> bool:
        return self._tensor.has_step(step, mode)

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
