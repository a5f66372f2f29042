"""The Trial: query a recorded run (finished, or still being written) by name, regex,
collection, step, mode and worker."""

from __future__ import annotations

import bisect
import contextlib
import difflib
import numbers
import os
import re
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import (
    InvalidConfig,
    NoMoreData,
    RunNotFound,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from mldbg.store import Store, open_store
from mldbg.store.shards import layout_name
from mldbg.store.statistics import STATS_PREFIX, parse_vector_name
from mldbg.trial.index import OneNumberRows, RunIndex, RunReplaced
from mldbg.trial.records import Record, Records
from mldbg.trial.smdebug import SmdebugStore, is_smdebug_run
from mldbg.trial.tensor import Tensor
from mldbg.trial.worker_view import WorkerView

if TYPE_CHECKING:
    import pandas

#: the collections hooks record by these names (API.md; XGBoost's too): a query for one of them
#: is never a typo, its absence only means that it was not recorded
STANDARD_COLLECTIONS = frozenset(
    ("weights", "biases", "gradients", "losses", "scalars", "inputs", "outputs", "labels",
     "predictions", "relu_activations", "tanh_activations", "sigmoid_activations",
     "optimizer_variables", "all", "custom", "metrics", "feature_importance", "trees",
     "hyperparameters", "probabilities", "shap")
)  # fmt: skip


def create_trial(
    path: str | os.PathLike[str] | Store,
    on_corrupt: str = "raise",
    worker: str | None = None,
    missing_ok: bool = False,
) -> Trial:
    """Open a run: a local path, `memory://name` or `s3://bucket/prefix`.

    The run may still be written: call `refresh()` or `wait_for_steps()` to see new steps.
    A local path that does not exist raises `RunNotFound` (a typo is not an empty run),
    unless `missing_ok=True`: then the trial waits for the run to appear, as `mldbg watch`
    does when it starts before the training. A file is never a run. `on_corrupt="skip"`
    reads around damaged files (and warns) instead of raising `CorruptRecord`.

    A SageMaker Debugger / smdebug output directory (`events/`, `index/`, written by
    smdebug's hooks, local or S3) opens read-only through `mldbg.trial.smdebug.SmdebugStore`.

    `worker="worker_1"` shows one worker of a run written by several (the ranks of a
    distributed job, `include_workers="all"`) as a run of its own: its steps, its tensors,
    `workers() == ["worker_1"]`, `loaded_all_steps` once that worker ended. Without it a
    query reads each step from the first worker that saved it. A worker that did not write to
    an existing run raises `InvalidConfig`, naming the workers that did.
    """
    if not isinstance(path, Store):
        _check_local_path(path, missing_ok)
    store = open_store(path)
    if is_smdebug_run(store):  # a SageMaker Debugger / smdebug output directory, read-only
        store = SmdebugStore(store)
    if worker is not None:
        store = WorkerView.checked(store, worker)
    return Trial(store, on_corrupt=on_corrupt)


def _check_local_path(path: str | os.PathLike[str], missing_ok: bool) -> None:
    """Refuse a local path that is a file, or (unless `missing_ok`) does not exist."""
    text = os.fspath(path)
    if "://" in text and not text.startswith("file://"):
        return  # a bucket or a memory store: its runs are found by reading
    local = Path(text.removeprefix("file://")).expanduser()
    if local.is_file():
        raise RunNotFound(
            f"{text} is a file, not a run: give the directory a hook recorded into (its out_dir)"
        )
    if local.exists() or missing_ok:
        return
    parent = next((p for p in local.absolute().parents if p.exists()), None)
    where = f" ({parent} exists)" if parent is not None and parent != Path("/") else ""
    raise RunNotFound(
        f"no run at {text}: the path does not exist{where}; check the path, or pass "
        "create_trial(path, missing_ok=True) to open a run that training has not started writing"
    )


class Trial:
    def __init__(self, store: Store, on_corrupt: str = "raise"):
        self.store = store
        self.path = store.url
        self.on_corrupt = on_corrupt
        # the one worker this trial shows (create_trial(path, worker=...)), else None
        self.worker: str | None = store.worker if isinstance(store, WorkerView) else None
        self._index = RunIndex(store, on_corrupt, single_worker=self.worker is not None)
        self._tensors: dict[str, Tensor] = {}
        self._steps_cache: dict[int | None, tuple[int, np.ndarray]] = {}
        self.restarts = 0  # times the run was replaced and the trial started over (`refresh`)
        self._holds = 0  # inside held(): a query reads nothing new on its own
        self.refresh()

    def __repr__(self) -> str:
        if self.worker is not None:
            return (
                f"Trial({self.path!r}, worker={self.worker!r}, steps={self._index.step_count}, "
                f"tensors={len(self._index.names)})"
            )
        return f"Trial({self.path!r}, steps={self._index.step_count}, tensors={len(self._index.names)})"

    # loading ----------------------------------------------------------------------------
    def refresh(self) -> int:
        """Read what was written since the last refresh. Returns the number of new records.

        A run replaced while it is read (the job restarted with `overwrite=True` into the same
        folder) is never mixed with its replacement: the trial warns once and starts over on
        the new run (`loaded_records` still only grows)."""
        for _ in range(3):
            try:
                return self._index.refresh()
            except RunReplaced as e:
                warnings.warn(f"mldbg: {e}; reading the new run from its start", RuntimeWarning, stacklevel=2)
                loaded = self._index.loaded_records
                self._index = RunIndex(self.store, self.on_corrupt, single_worker=self.worker is not None)
                self._index.loaded_records = loaded
                self._tensors.clear()
                self._steps_cache.clear()
                self.restarts += 1
                for store in (self.store, getattr(self.store, "inner", None)):  # no read of the old files
                    forget = getattr(store, "forget_reads", None)
                    if forget is not None:
                        forget()
        return self._index.refresh()

    @contextlib.contextmanager
    def held(self) -> Iterator[Trial]:
        """Within it, the trial reads nothing new on its own: a query that misses a tensor, a
        step or a collection answers from what the last `refresh()` loaded (an explicit
        `refresh()` still reads). A rule runner holds the trial over each pass, so that a live
        run growing underneath neither changes the data under a pass nor drops the caches it
        reads through at every step (a pass over a run written at 50 steps/s never ends)."""
        self._holds += 1
        try:
            yield self
        finally:
            self._holds -= 1

    def _refresh_unless_held(self) -> None:
        if not self._holds and not self._index.complete:
            self.refresh()

    @property
    def loaded_all_steps(self) -> bool:
        """True once training ended and every step it wrote has been read (records it could
        not write are not among them: see `lost_records`)."""
        self._refresh_unless_held()
        return self._index.complete

    @property
    def lost_records(self) -> int:
        """Records the training could not write (its queue was full, its disk refused them),
        as each ended worker counted them in its END marker. A finished run
        (`loaded_all_steps`) that lost records is complete as far as it goes, not whole:
        `lost()` says which steps."""
        self._refresh_unless_held()
        return sum(end.lost_records for end in self._index.ended.values())

    def lost(self) -> str | None:
        """What the training lost, in words (`"180 records of 524 steps (76..599)"`), or None."""
        if not self.lost_records:
            return None
        ends = [e for e in self._index.ended.values() if e.lost_records]
        steps = sum(e.lost_steps for e in ends)
        firsts = [e.first_lost_step for e in ends if e.first_lost_step is not None]
        lasts = [e.last_lost_step for e in ends if e.last_lost_step is not None]
        span = f" ({min(firsts)}..{max(lasts)})" if firsts and lasts else ""
        return f"{self.lost_records} records of {steps} steps{span}"

    @property
    def loaded_records(self) -> int:
        """How many records the trial has loaded so far. It only grows: a reader that keeps
        the last value it saw knows without a query whether anything new came."""
        return self._index.loaded_records

    @property
    def corrupt_files(self) -> list[str]:
        return list(self._index.corrupt)

    def wait_for_steps(
        self, steps: Iterable[int], mode: Mode | None = None, timeout: float | None = None
    ) -> None:
        """Block until every step in `steps` is readable.

        Raises StepNotYetAvailable after `timeout` seconds, StepUnavailable when training ended
        without saving one of them, NoMoreData when they lie beyond the last step.
        """
        wanted = sorted(set(steps))
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.refresh()
            missing = [s for s in wanted if not self._has_step(s, mode)]
            if not missing:
                return
            if self._index.complete:
                self._raise_never(missing[0], mode)
            if deadline is not None and time.monotonic() >= deadline:
                raise StepNotYetAvailable(f"steps {missing} not written after {timeout}s (run {self.path})")
            time.sleep(0.05)

    def _raise_never(self, step: int, mode: Mode | None) -> None:
        """Training has ended without `step`: NoMoreData past the end, else StepUnavailable;
        either names the nearest saved steps."""
        steps = self.steps(mode)
        last = max(steps, default=-1)
        what = f"step {step}" + (f" of mode {mode.name}" if mode else "")
        near = _nearest(step, steps)
        saved = f"; the nearest saved {_kind(mode)}steps: {near}" if near else ""
        if step > last:
            raise NoMoreData(
                f"{what}: training ended at {_kind(mode)}step {last} ({self.path}); no more data will come{saved}"
            )
        raise StepUnavailable(f"{what} was not saved in {self.path}, and training has ended{saved}")

    def _not_saved_at(self, name: str, step: int, mode: Mode | None) -> str:
        """Why tensor `name` has no value at `step` (a mode's step with `mode`), with the
        steps nearest to it where it does: `step 200 is an EVAL step (eval step 3); the
        nearest TRAIN steps that saved 'fc1.weight': 190 (before), 210 (after)`."""
        what = f"tensor {name!r} was not saved at " + (f"{mode.name} step {step}" if mode else f"step {step}")
        tensor = self.tensor(name)
        saved_modes = [m for m in (Mode.TRAIN, Mode.EVAL, Mode.PREDICT) if tensor.steps(m)]
        info = self._index.step_info(step) if mode is None else None
        if info is not None:
            step_mode = Mode(info[0])
            article = "an" if step_mode.name[0] in "AEIOU" else "a"
            what += (
                f"; step {step} is {article} {step_mode.name} step ({step_mode.name.lower()} step {info[1]})"
            )
            if step_mode not in saved_modes and saved_modes:
                what += f", and {name!r} was saved in {', '.join(m.name for m in saved_modes)} steps only"
        near = _nearest(step, tensor.steps(mode))
        if near:
            what += f"; the nearest {_kind(mode)}steps that saved it: {near}"
        if mode is None and len(saved_modes) > 1:
            what += (
                " (global steps; its steps per mode: "
                + "; ".join(f"{m.name} {_summary(tensor.steps(m))}" for m in saved_modes)
                + ")"
            )
        elif mode is not None and mode not in saved_modes and saved_modes:
            what += f"; it was saved in {', '.join(m.name for m in saved_modes)} steps only"
        return what

    def _missing_step(self, step: int, mode: Mode | None, tensor: str | None = None) -> None:
        """Called when a query misses a step: refresh once, then say why it is missing."""
        self._refresh_unless_held()
        if not self._has_step(step, mode):
            if self._index.complete:
                self._raise_never(step, mode)
            near = _nearest(step, self.steps(mode))
            raise StepNotYetAvailable(
                f"step {step}"
                + (f" of mode {mode.name}" if mode else "")
                + f" is not written yet (run {self.path}, still training)"
                + (f"; the nearest saved {_kind(mode)}steps: {near}" if near else "")
                + "; wait for it with wait_for_steps()"
            )

    # queries ----------------------------------------------------------------------------
    def steps(self, mode: Mode | None = None) -> list[int]:
        """Global steps with saved data; with a mode, that mode's own steps."""
        return self._sorted_steps(mode).tolist()

    def _sorted_steps(self, mode: Mode | None) -> np.ndarray:
        """The steps of `steps(mode)` as a sorted int64 array (shared: not to be written to)."""
        if mode is None or mode == Mode.GLOBAL:
            return self._index.step_table()[0]
        key = int(Mode.parse(mode))
        version = self._index.step_count
        cached = self._steps_cache.get(key)
        if cached is None or cached[0] != version:
            cached = self._steps_cache[key] = (version, self._index.mode_steps(key))
        return cached[1]

    def _step_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The run's global steps (sorted), each one's mode value and mode step: int64
        arrays, shared (not to be written to)."""
        return self._index.step_table()

    def _has_step(self, step: int, mode: Mode | None) -> bool:
        """Whether `step` (a step of `mode` with a mode) has saved data."""
        steps = self._sorted_steps(mode)
        i = int(np.searchsorted(steps, step))
        return i < len(steps) and int(steps[i]) == step

    def mode(self, step: int) -> Mode:
        """The mode of a global step."""
        return Mode(self._step_info(step)[0])

    def mode_step(self, step: int) -> int:
        """The mode's own step count at a global step."""
        return self._step_info(step)[1]

    def global_step(self, mode: Mode, mode_step: int) -> int:
        found = self._index.global_step(int(mode), mode_step)
        if found is None:
            self._missing_step(mode_step, mode)
            found = self._index.global_step(int(mode), mode_step)
            if found is None:
                raise KeyError((int(mode), mode_step))
        return found

    def _step_info(self, step: int) -> tuple[int, int]:
        info = self._index.step_info(step)
        if info is None:
            self._missing_step(step, None)
            info = self._index.step_info(step)
            if info is None:
                raise KeyError(step)
        return info

    def workers(self) -> list[str]:
        """The workers that wrote to the run so far (only `worker` for a one-worker trial)."""
        return sorted(self._index.workers)

    @property
    def expected_workers(self) -> int:
        """How many workers will write, as the first to start said (the world size of a job
        recording every rank, else 1): `workers()` may list fewer while a job starts."""
        return self._index.expected_workers

    def collections(self) -> dict[str, list[str]]:
        """Collection name -> the names of its recorded tensors."""
        return {c: sorted(names) for c, names in sorted(self._index.collections.items())}

    def tensor_names(
        self,
        regex: str | list[str] | None = None,
        collection: str | None = None,
        mode: Mode | None = None,
        step: int | None = None,
    ) -> list[str]:
        """Recorded tensor names; vector statistics (`stats/<tensor>/<key>`) are not listed
        (`vector_statistics(tensor)` names them, `tensor(name)` reads them). With `step`, the
        names saved at that step (the mode's step with `mode`); a step the run never saved
        raises StepUnavailable (StepNotYetAvailable while training goes on) naming the
        nearest saved steps, rather than answer with nothing."""
        names: Iterable[str] = self._plain_names()
        if collection is not None:
            if collection not in self._index.collections:
                self._refresh_unless_held()
                if collection not in self._index.collections:
                    self._unknown_collection(collection)
            names = self._index.collections.get(collection, set())
        if regex is not None:
            try:
                pats = [re.compile(r) for r in ([regex] if isinstance(regex, str) else regex)]
            except re.error as e:
                raise InvalidConfig(f"invalid regex {regex!r}: {e}") from None
            names = [n for n in names if any(p.search(n) for p in pats)]
        if step is not None:
            step, mode = _step_and_mode(step, mode)
            if not self._has_step(step, mode):
                self._missing_step(step, mode)  # never saved: say so, with the nearest saved steps
            names = [n for n in names if self.tensor(n).has_step(step, mode)]
        elif mode is not None and mode != Mode.GLOBAL:
            names = [n for n in names if self.tensor(n).steps(mode)]
        return sorted(names)

    def _plain_names(self) -> list[str]:
        """The recorded names but the vector statistics', in the index's order, kept while no
        name is added (names only come: a count tells), as a run of 100,000 names asks it
        for each query."""
        index = self._index
        found = getattr(self, "_plain", None)
        if found is None or found[0] is not index or found[1] != len(index.names):
            plain = [n for n in index.names if not n.startswith(STATS_PREFIX)]
            found = self._plain = (index, len(index.names), plain)
        return found[2]

    def _unknown_collection(self, name: str) -> None:
        """A query named a collection the run does not hold. A standard collection (or one
        unlike any the run holds) may simply not be recorded: no tensors. A name close to one
        the run holds is a typo: say so, rather than answer with nothing."""
        held = [c for c in self._index.collections if c != "all"]
        if name in STANDARD_COLLECTIONS or not held:
            return
        close = difflib.get_close_matches(name, held, n=3, cutoff=0.75)
        if close:
            raise InvalidConfig(
                f"no collection {name!r} in {self.path}; did you mean {', '.join(map(repr, close))}? "
                f"its collections: {', '.join(sorted(held))}"
            )

    def vector_statistics(self, tensor: str) -> dict[str, str]:
        """The vector statistics recorded for `tensor`: key (`unit_active`, `class_counts`...)
        -> the name of their records, readable with `tensor(name)` or `records(name)`."""
        found = {}
        prefix = f"{STATS_PREFIX}{tensor}/"
        for name in self._index.names:
            if name.startswith(prefix):
                parsed = parse_vector_name(name)
                if parsed is not None and parsed[0] == tensor:
                    found[parsed[1].key] = name
        return dict(sorted(found.items()))

    def has_tensor(self, name: str) -> bool:
        return name in self._index.names

    def tensor(self, name: str) -> Tensor:
        found = self._tensors.get(name)
        if found is not None:
            return found
        if name not in self._index.names:
            self._unknown(name)
        found = self._tensors[name] = Tensor(self, name)
        return found

    def _unknown(self, name: str) -> None:
        """A query named a tensor not seen yet: refresh once, then say what there is."""
        self._refresh_unless_held()
        if name in self._index.names:
            return
        raise TensorUnavailable(f"no tensor {name!r} in {self.path}; {self._names_like(name)}")

    def _names_like(self, name: str) -> str:
        """The recorded names closest to `name` ("did you mean ..."), else a few of them."""
        names = sorted(n for n in self._index.names if not n.startswith(STATS_PREFIX))
        if not names:
            return "no tensor was recorded yet"
        by_case = {n.lower(): n for n in names}
        ratio = {n: difflib.SequenceMatcher(None, name.lower(), n).ratio() for n in by_case}
        best = max(ratio.values())
        close = [
            by_case[n] for n in sorted(by_case, key=lambda n: -ratio[n]) if ratio[n] >= max(0.6, best - 0.05)
        ]
        close += [n for n in names if name.lower() in n.lower() and n not in close]
        if close:
            return f"did you mean {', '.join(repr(n) for n in close[:3])}?"
        shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        return f"{len(names)} tensors recorded: {shown}"

    # the index API: where records are, without reading them -----------------------------
    def records(
        self, name: str, step: int | None = None, mode: Mode | None = None, worker: str | None = None
    ) -> Records:
        """The saved records of tensor `name` as NumPy columns (see `Records`), in the order
        they were loaded: a refresh only appends, so a reader that keeps `len()` picks up
        exactly the new ones. `step` is a global step, or the mode's own step when `mode` is
        given; `mode` alone keeps that mode's records; `worker` one worker's. Nothing is
        read from data files. Raises TensorUnavailable for a name not recorded."""
        if name not in self._index.names:
            self._unknown(name)
        step, mode = _step_and_mode(step, mode)
        return self._index.records(name, step, mode, worker)

    def record(self, name: str, step: int, mode: Mode | None = None, worker: str | None = None) -> Record:
        """The record a read of `name` at `step` uses (the mode's step when `mode` is given):
        `worker`'s, or else the first worker's by name. Raises as `Tensor.value` does when the
        step is not there (yet), or that worker did not save it."""
        index = self._index
        if name not in index.names:
            self._unknown(name)
        if step is None:
            _step_and_mode("None", mode)  # one record: a step is needed
        step, mode = _step_and_mode(step, mode)
        found = index.positions(name, step, mode)
        if not found:
            self._missing_step(step, mode, tensor=name)
            found = index.positions(name, step, mode)  # a refresh may have brought it
            if not found:
                raise TensorUnavailableForStep(self._not_saved_at(name, step, mode))
        if len(found) == 1 and worker is None:
            return index.record(name, found[0])
        records = [index.record(name, p) for p in found]
        if worker is None:
            return min(records, key=lambda r: r.worker)
        for r in records:
            if r.worker == worker:
                return r
        raise TensorUnavailableForStep(
            f"tensor {name!r} at step {step} was not saved by worker {worker!r}; "
            f"it was by {sorted(r.worker for r in records)}"
        )

    def _all_known(self, names: Iterable[str]) -> None:
        """Raise TensorUnavailable for the first of `names` that is not recorded (a bulk
        read's check of every name it is given)."""
        known = self._index.names
        for name in names:
            if name not in known:
                self._unknown(name)

    def step_counts(self, names: list[str]) -> list[int]:
        """For each tensor of `names`, how many global steps it was saved at
        (`len(tensor(name).steps())`), counted for all of them at once."""
        self._all_known(names)
        return self._index.step_counts(names).tolist()

    def one_number_series(self, names: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """name -> (steps, float64 values) of each tensor of `names` saved as one number
        at each of its steps (one record a step, raw), read together: the values
        `tensor(name).value(step)` gives, as one array per tensor. A tensor that does not read
        cleanly that way (a vector, several workers' records at a step, only reductions, a
        damaged data file) is left out: read it with `Tensor.value`, which says why."""
        self._all_known(names)
        known = self._index.names  # a sharded tensor's value is its pieces put together: not here
        return self._index.one_number_series([n for n in names if layout_name(n) not in known])

    def steps_of(self, names: list[str]) -> np.ndarray:
        """The global steps (sorted int64, no repeats) at which some tensor of `names` has a
        record: the union of their `steps()`, found for all of them at once."""
        self._all_known(names)
        return self._index.steps_of(names)

    def one_number_rows(self, names: list[str]) -> OneNumberRows:
        """The records of `names` read as one table (`one_number_series` without a dict of
        arrays per name): (`starts`, `sizes`: where each name's records lie, in the order of
        `records(name)`; per record its `step`, its `value` as float64, its `dtype` (an index
        into `mldbg.store.format.DTYPES`) and `ndim`; `whole`: per name, whether every one of its records
        read cleanly as one number, one a step, its steps in order). Only the records of a
        `whole` name are values to use; a sharded tensor (its value is its pieces put
        together) is never whole here."""
        self._all_known(names)
        known = self._index.names
        table = self._index.one_number_rows(names)
        if len(self._plain_names()) < len(known):  # some `stats/` names: maybe a shard layout
            sharded = [i for i, n in enumerate(names) if layout_name(n) in known]
            if sharded:
                table.whole[sharded] = False
        return table

    def statistic_columns(self, name: str, start: int = 0) -> dict[str, np.ndarray]:
        """The saved scalar statistics of tensor `name`'s records from position `start` of
        `records(name)` on, as float64 columns by key (NaN where a record has none), decoded
        from the index in one pass: what `mldbg.trial.columns.Columns` scans."""
        if name not in self._index.names:
            self._unknown(name)
        return self._index.statistic_columns(name, start)

    def _statistics_decoded(self) -> None:
        """Every tensor's scalar statistics of the records loaded so far are decoded into
        columns (`Columns`): the index may drop its copy of them (`RunIndex.release_statistics`)."""
        self._index.release_statistics()

    def statistic_columns_of(self, starts: Mapping[str, int]) -> dict[str, dict[str, np.ndarray]]:
        """`statistic_columns(name, start)` of several tensors (name -> start), decoded together
        in one pass over each segment: what `Columns` asks when it decodes a run's tensors."""
        self._all_known(starts)
        return self._index.statistic_columns_of(starts)

    def record_columns_of(self, names: list[str]) -> list[dict[str, np.ndarray]]:
        """The columns of `records(name)` (`Records`: `step`, `mode`, `mode_step`, `worker`,
        `raw`, read-only, load order) of each of `names`, for many tensors at once: no
        `Records` built per name."""
        self._all_known(names)
        return self._index.record_columns_of(names)

    def layouts(self, name: str, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The dtype kind ('f', 'i', 'u', 'b') and number of dimensions of each of
        `records(name)` from position `start` on, from the index alone."""
        if name not in self._index.names:
            self._unknown(name)
        return self._index.layouts(name, start)

    def layout_at(self, name: str, position: int) -> tuple[str, tuple[int, ...]]:
        """The dtype kind ('f', 'i', 'u', 'b') and shape of `records(name)[position]`, from
        the index alone (what its `Record.dtype.kind` and `.shape` say, with no `Record` built
        and no statistics decoded)."""
        if name not in self._index.names:
            self._unknown(name)
        return self._index.layout_at(name, position)

    def shapes(self, name: str, start: int = 0) -> list[tuple[int, ...]]:
        """The shape of each of `records(name)` from position `start` on, from the index alone."""
        if name not in self._index.names:
            self._unknown(name)
        return self._index.shapes(name, start)

    def stacked(self, name: str, positions: np.ndarray) -> np.ndarray | None:
        """The values of `records(name)` at `positions`, stacked into one array (one ranged
        read per segment), or None when they differ in shape or dtype or one has no raw value."""
        if name not in self._index.names:
            self._unknown(name)
        return self._index.stacked(name, positions)

    def stacked_many(self, requests: Mapping[str, np.ndarray], max_bytes: int) -> dict[str, np.ndarray]:
        """`stacked` for many small tensors at once (name -> positions in `records(name)`),
        one read per segment for all; a tensor that does not read cleanly that way is left
        out (read it with `stacked`, which says why)."""
        self._all_known(requests)
        return self._index.stacked_many(requests, max_bytes)

    # views ------------------------------------------------------------------------------
    def to_pandas(
        self,
        regex: str | list[str] | None = None,
        collection: str | None = None,
        mode: Mode | str | None = None,
        reductions: Iterable[str] | None = None,
    ) -> pandas.DataFrame:
        """A tidy DataFrame: one row per tensor, step, worker (and reduction, when asked),
        columns `step`, `mode`, `mode_step`, `worker`, `tensor`[, `reduction`], `value`.
        Without `reductions` every selected tensor must hold one number (losses, scalars);
        with no argument at all, the one-number series, and one warning naming the tensors
        left out (weights, gradients) and how to get them;
        `reductions=["mean", "l2", "abs_mean"]` gives those of any tensor, saved or computed
        from the raw tensor. Needs pandas (see `mldbg.trial.frame`)."""
        from mldbg.trial.frame import to_pandas

        return to_pandas(self, regex=regex, collection=collection, mode=mode, reductions=reductions)

    def _repr_html_(self) -> str:
        """A compact summary for notebooks (see `mldbg.trial.html`)."""
        from mldbg.trial.html import trial_html

        return trial_html(self)

    def read(self, record: Record) -> np.ndarray:
        """The saved value of a record this trial located (one ranged read of its data file).
        Raises TensorUnavailableForStep when only its reductions were saved, CorruptRecord
        when the data file is damaged."""
        return self._index.read(record)


def _kind(mode: Mode | None) -> str:
    return f"{mode.name} " if mode is not None and mode != Mode.GLOBAL else ""


def _nearest(step: int, steps: list[int]) -> str:
    """The saved steps on either side of `step`: `190 (before), 210 (after)`."""
    i = bisect.bisect_left(steps, step)
    j = i + 1 if i < len(steps) and steps[i] == step else i
    parts = ([f"{steps[i - 1]} (before)"] if i > 0 else []) + (
        [f"{steps[j]} (after)"] if j < len(steps) else []
    )
    return ", ".join(parts)


def _summary(steps: list[int]) -> str:
    if len(steps) <= 8:
        return str(steps)
    return f"[{', '.join(map(str, steps[:4]))}, ..., {', '.join(map(str, steps[-3:]))}] ({len(steps)} in all)"


def _step_and_mode(step: Any, mode: Any) -> tuple[Any, Mode | None]:
    """A query's step (a whole number, or None) and mode (a `Mode`, or its name: "train")."""
    if step is not None and (isinstance(step, (bool, str)) or not isinstance(step, numbers.Real)):
        raise InvalidConfig(
            f"step {step!r}: a step is a whole number (a global step, or the mode's with mode=)"
        )
    return step, None if mode is None else Mode.parse(mode)
