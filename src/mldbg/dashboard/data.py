"""The dashboard's data layer: one `RunData` per recorded run, refreshed incrementally.

Each run keeps two trials of the same path: one read by the HTTP handlers (behind a lock),
one owned by a live watcher (`mldbg.watch.Watcher`: the findings shown are its), so a long
rule pass never blocks a page. Series (losses, reductions, distributions) are cached per
tensor and extended with the new steps only, so a poll costs what was written since the
last one, not the whole run. Nothing here knows HTTP:
errors are `MldbgError`s that app.py maps to status codes.
"""

from __future__ import annotations

import bisect
import functools
import logging
import math
import os
import re
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mldbg.config import Mode
from mldbg.dashboard.events import EventLog
from mldbg.errors import (
    CorruptRecord,
    InvalidConfig,
    MldbgError,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from mldbg.insight.distribution import PERCENTILES, finite_percentiles
from mldbg.rules.base import Finding
from mldbg.store import layout, markers, open_store
from mldbg.store.markers import End, StopRequest, WorkerMeta
from mldbg.store.reductions import REDUCTION_NAMES
from mldbg.trial import Trial, create_trial
from mldbg.trial.index import no_collection
from mldbg.trial.runs import find_runs

if TYPE_CHECKING:
    from mldbg.trial.index import OneNumberRows

log = logging.getLogger("mldbg")

SCALAR_COLLECTIONS = ("losses", "scalars")
MAX_CACHED_SERIES = 256
MAX_SERIES = 64  # tensors per /series call
#: the series of the `scalars` collection the page asks first, per run (`/scalars?limit=`; the
#: page's own constant in dashboard.js is the same): a run of 100,000 names sends 100, and the
#: filter over the chart reaches the others by name
SCALARS_PAGE = 100
MANY_SCALARS = 64  # scalar series beyond which their values are read together
OPEN_AT_START = 20  # runs opened before the app serves; the others in the background
EVIDENCE_STEPS = 50  # saved steps either side of a finding


class UnknownRun(MldbgError):
    """No run of that name is served."""


class NotFound(MldbgError):
    """The run is served, but what was asked (a tensor, a step) is not in it."""


class AlreadyEnded(MldbgError):
    """A stop was asked of a run that has already ended."""


def num(x: float) -> float | str:
    """A float for JSON: NaN and infinities (which JSON lacks) become the strings JavaScript's
    `Number()` parses back ("NaN", "Infinity", "-Infinity")."""
    x = float(x)
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


class _Series:
    """step -> value for one derived series, extended with new steps only."""

    def __init__(self, damaged: set[str]) -> None:
        self.values: dict[int, Any] = {}
        self.skipped: dict[int, str] = {}  # step -> why no value (only reductions saved, corrupt)
        self.damaged = damaged  # the run's damaged files, reported in its summary
        self.pace: tuple[int, dict[str, Any]] | None = None  # (steps counted, RunData._pace)

    def extend(self, steps: Iterable[int], compute: Callable[[int], Any]) -> None:
        for step in steps:
            if step in self.values or step in self.skipped:
                continue
            try:
                self.values[step] = compute(step)
            except TensorUnavailableForStep as e:
                self.skipped[step] = str(e)
            except CorruptRecord as e:  # a damaged data file: report it, serve the other steps
                self.skipped[step] = str(e)
                self.damaged.add(str(e))

    def add(self, steps: np.ndarray, values: np.ndarray) -> None:
        """The values read together (`Trial.one_number_series`): those of steps not held yet."""
        have = self.values
        if not have and not self.skipped:  # a new series: all of them
            have.update(zip(steps.tolist(), values.tolist(), strict=True))
            return
        for step, value in zip(steps.tolist(), values.tolist(), strict=True):
            if step not in have and step not in self.skipped:
                have[step] = value

    def since(self, since: int | None) -> list[int]:
        return sorted(s for s in self.values if since is None or s > since)


def _log_problem(text: str) -> None:
    """What the dashboard's watcher has to say (a rule that failed, data it lacks): logged."""
    log.info("mldbg dashboard: %s", text)


class RunData:
    """One run: its trial, cached series, and the findings of the rules run live over it."""

    def __init__(
        self,
        name: str,
        path: str,
        rules: Sequence[Any] | None,
        with_rules: bool = True,
        open_now: bool = True,
    ):
        self.name = name
        self.path = path
        self.rule_specs = None if rules is None else list(rules)
        self.with_rules = with_rules
        self.lock = threading.RLock()  # guards self.trial and the caches
        self.trial: Trial | None = None
        self.error: str | None = None
        self.finished = False
        self.step_count = 0
        self.last_step: int | None = None
        self.last_change = time.time()
        self._series: OrderedDict[tuple, _Series] = OrderedDict()
        self.damaged: set[str] = set()  # data files found damaged while reading values
        self._layer_paces: dict[tuple, dict[str, Any]] = {}  # (kind, steps) -> RunData._layer_pace
        # rules: their own trial, used by the refresher thread only
        self._watcher: Any = None  # the watcher whose findings this run shows
        self._rules_finished = False
        self._findings_lock = threading.Lock()
        self.findings: list[Finding] = []
        self.rule_errors: dict[str, str] = {}
        self.rules_skipped: dict[str, str] = {}
        self.rule_names: list[str] = []
        self.checked_step = -1
        # the run's markers (meta.json and END of each worker), read at open and at its end
        self.metas: dict[str, WorkerMeta] = {}
        self.ends: dict[str, End] = {}
        self.stop_requested: str | None = None
        self.stall_seconds = 60.0
        # wall-clock time of each step: interpolated for what was there at open, then observed
        self.step_time: dict[int, float] = {}
        self.time_kinds: set[str] = set()
        self.color = run_color(path)
        from mldbg.dashboard.layers import LayerCache

        self._layers = LayerCache()
        self._profile: tuple[float, bool, dict[str, Any]] | None = None
        self.opened = False  # tried to open the trial (else "loading": opened on first use)
        if open_now:
            self._open()

    # loading --------------------------------------------------------------------------------
    def _open(self) -> None:
        self.opened = True
        try:
            trial = create_trial(self.path, on_corrupt="skip", missing_ok=True)
        except (MldbgError, OSError) as e:
            self.error = f"cannot open {self.path}: {e}"
            return
        except Exception as e:  # e.g. an object store's client error: report, retry later
            self.error = f"cannot open {self.path}: {type(e).__name__}: {e}"
            return
        with self.lock:
            self.trial = trial
            self.error = None
            self._read_markers()
            self._note_steps(opening=True)

    def _read_markers(self, ends: bool = True) -> None:
        """meta.json (and END) of every worker (small JSON files; damaged ones are skipped)."""
        assert self.trial is not None
        store = self.trial.store
        for worker in self.trial.workers():
            if worker not in self.metas:
                meta = _marker(store, layout.meta_key(worker), WorkerMeta)
                if meta is not None:
                    self.metas[worker] = meta
            if ends and worker not in self.ends:
                end = _marker(store, layout.end_key(worker), End)
                if end is not None:
                    self.ends[worker] = end

    def _note_steps(self, opening: bool = False) -> None:
        assert self.trial is not None
        # read first: a refresh inside it may load the last steps and the end, so that the
        # steps read after it hold every step a finished run promises (never "finished" at 16/18)
        complete = self.trial.loaded_all_steps
        steps = self.trial.steps()
        now = time.time()
        if len(self.metas) < len(self.trial.workers()):
            self._read_markers(ends=False)
        if len(steps) != self.step_count:
            new = [s for s in steps if s not in self.step_time]
            if opening and new:  # recorded before we looked: spread over the run's lifetime
                starts = [m.started for m in self.metas.values() if m.started]
                begin = min(starts) if starts else None
                ends = [e.ended for e in self.ends.values() if e.ended]
                end = max(ends) if ends and complete else now
                if begin is not None and end > begin:
                    span = (end - begin) / len(new)
                    for i, s in enumerate(new):
                        self.step_time[s] = begin + span * (i + 1)
                    self.time_kinds.add("interpolated")
            elif new:
                for s in new:
                    self.step_time[s] = now
                self.time_kinds.add("observed")
            self.step_count = len(steps)
            self.last_step = steps[-1] if steps else None
            self.last_change = now
        if complete and not self.finished:
            self._read_markers()
            self._read_stop_request()
        self.finished = complete

    def _read_stop_request(self) -> None:
        assert self.trial is not None
        try:
            found = markers.load(self.trial.store, layout.STOP_REQUEST, StopRequest)
        except (MldbgError, OSError):
            return
        started = min((m.started for m in self.metas.values() if m.started), default=None)
        if found is not None and (started is None or (found.requested or 0) >= started):
            self.stop_requested = found.reason or "stop requested"

    def refresh(self) -> None:
        """Read what was written since the last refresh (the rules run apart: `check_rules`)."""
        if self.trial is None:
            self._open()
            if self.trial is None:
                return
        if not self.finished:
            with self.lock:
                try:
                    self.trial.refresh()
                    self._note_steps()
                    self.error = None
                except Exception as e:  # an unreadable store: say so, keep serving what we have
                    self.error = f"cannot read {self.path}: {type(e).__name__}: {e}"

    def check_rules(self) -> None:
        """The findings are the watcher's: a `mldbg.watch.Watcher` (no actions, no saved place)
        owns the rules over its own trial, one cycle per call, as `mldbg watch` runs them; the
        dashboard shows what it found and runs no rules of its own. Called from the rules'
        own thread: however long a cycle takes, the steps and charts keep moving."""
        if not self.with_rules or self._rules_finished or self.step_count == 0:
            return
        from mldbg.watch.watcher import Watcher

        try:
            if self._watcher is None:
                self._watcher = Watcher(self.path, self.rule_specs, state=False, on_problem=_log_problem)
                self.rule_names = [r.name for r in self._watcher.rules]
            watcher = self._watcher
            before = len(watcher.findings)
            watcher.cycle(final=self.finished)
            new = watcher.findings[before:]
            if self.finished and watcher.ended:
                self._rules_finished = True
        except Exception as e:  # a rule set that cannot start: report it as the run's rule error
            with self._findings_lock:
                self.rule_errors["(rules)"] = f"{type(e).__name__}: {e}"
            self._rules_finished = True
            return
        runner = watcher.runner
        with self._findings_lock:
            self.findings.extend(new)
            if runner is not None:
                self.rule_errors.update(runner.errors)
                self.rules_skipped = dict(runner.skipped)
                self.checked_step = runner.last_step

    # what the API serves ----------------------------------------------------------------------
    @property
    def status(self) -> str:
        """waiting, running (live), stalled, stopped, finished or error (docs/dashboard_api.md)."""
        if self.trial is None:
            return "error" if self.opened else "loading"
        if self.finished:
            return "stopped" if any(e.stopped for e in self.ends.values()) else "finished"
        if self.step_count == 0:
            return "waiting"
        if time.time() - self.last_change > self.stall_seconds:
            return "stalled"
        return "running"

    def summary(self) -> dict[str, Any]:
        with self.lock:
            trial = self.trial
            workers = trial.workers() if trial is not None else []
            corrupt = (trial.corrupt_files if trial is not None else []) + sorted(self.damaged)
        with self._findings_lock:
            n_findings = len(self.findings)
            rules_failed = len(self.rule_errors)
        return {
            "name": self.name,
            "path": self.path,
            "status": self.status,
            "steps": self.step_count,
            "last_step": self.last_step,
            "workers": workers,
            "loaded_all_steps": self.finished,
            "finished": self.finished,
            "seconds_since_new_step": round(time.time() - self.last_change, 1),
            "started": min((m.started for m in self.metas.values() if m.started), default=None),
            "ended": max((e.ended for e in self.ends.values() if e.ended), default=None)
            if self.finished
            else None,
            "framework": framework_and_version(self.metas)[0],
            "world_size": max((m.world_size for m in self.metas.values()), default=None),
            "color": self.color,
            "findings": n_findings,
            "rules_failed": rules_failed,
            "stop_requested": self.stop_requested,
            "corrupt": corrupt,
            "error": self.error,
        }

    def _trial(self) -> Trial:
        if self.trial is None and not self.opened:
            with self.lock:
                if not self.opened:
                    self._open()
        if self.trial is None:
            raise NotFound(f"run {self.name!r} cannot be read: {self.error}")
        return self.trial

    def tensors(self) -> dict[str, Any]:
        with self.lock:
            trial = self._trial()
            return {"run": self.name, "tensors": trial.tensor_names(), "collections": trial.collections()}

    def _tensor(self, name: str) -> Any:
        if self.step_count == 0 and self.trial is not None and not self.trial.tensor_names():
            raise NotFound(
                f"run {self.name!r} has no tensor {name!r}: nothing recorded at {self.path} yet "
                "(waiting for training to start)"
            )
        try:
            return self._trial().tensor(name)
        except TensorUnavailable as e:  # it names similar tensors; add which run was asked
            raise NotFound(f"run {self.name!r}: {e}") from None

    def _cached(self, key: tuple) -> _Series:
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series(self.damaged)
            while len(self._series) > MAX_CACHED_SERIES:
                self._series.popitem(last=False)
        else:
            self._series.move_to_end(key)
        return series

    def _modes(self, steps: list[int], known: dict[int, str] | None = None) -> list[str]:
        """The mode's name of each step; `known`: step -> name, kept across calls (the many
        series of a run share their steps)."""
        trial = self._trial()
        if known is None:
            return [trial.mode(s).name for s in steps]
        try:
            return [known[s] for s in steps]
        except KeyError:
            for s in steps:
                if s not in known:
                    known[s] = trial.mode(s).name
            return [known[s] for s in steps]

    def _pace(self, series: _Series) -> dict[str, Any]:
        """How often `series` was saved, per mode (`mldbg.report.cadence`): `breaks`, the steps
        whose point a line must not join to the previous one of its mode (a gap before them);
        `cadence`, mode -> the cadence in words ("every step to 19, then every 100th");
        `sparse`, whether a mode's points are apart (then draw them). Over every saved step,
        so a client that asks `since` a step still learns the gaps before it."""
        from mldbg.report.cadence import of_series

        steps = sorted(series.values)
        if series.pace is not None and series.pace[0] == len(steps):
            return series.pace[1]
        trial = self._trial()
        by_mode: dict[str, list[int]] = {}
        for s in steps:
            by_mode.setdefault(trial.mode(s).name, []).append(s)
        breaks: list[int] = []
        words: dict[str, str] = {}
        sparse = False
        for mode, mine in by_mode.items():
            pace = of_series(trial, mine)
            breaks += pace.breaks
            words[mode] = pace.text
            sparse = sparse or pace.sparse
        out = {"breaks": sorted(breaks), "cadence": words, "sparse": sparse}
        series.pace = (len(steps), out)
        return out

    def scalars(
        self, since: int | None = None, limit: int | None = None, offset: int = 0, match: str | None = None
    ) -> dict[str, Any]:
        """Every tensor of the `losses` and `scalars` collections, over global steps, each
        step labelled with its mode (TRAIN, EVAL...) and its wall-clock time; the epoch at each
        step when the run records one; losses also one point per evaluation pass.

        A page of the `scalars` collection (a run may save 100,000 names; the page shows the
        first few and reaches the others by their name): `match`, only the scalars whose name
        holds it (any case); `offset` and `limit`, those from the `offset`-th on, at most
        `limit` of them, in name order. The losses are always sent whole (the losses chart,
        the run cards and the findings' marks read every one); `scalars_total` says how many
        scalars matched."""
        if limit is not None and limit < 0:
            raise InvalidConfig(f"scalars: limit={limit} is negative; give a number of series >= 0")
        if offset < 0:
            raise InvalidConfig(f"scalars: offset={offset} is negative; give a number of series >= 0")
        out = []
        with self.lock, no_collection():  # 0.6 of the 0.9 s of 100,000 series' `scalars`
            trial = self._trial()
            collections = trial.collections()
            page = collections.get("scalars", [])
            if match:
                needle = match.lower()
                page = [n for n in page if needle in n.lower()]
            total = len(page)
            if offset or limit is not None:
                page = page[offset : None if limit is None else offset + limit]
            collections = {"losses": collections.get("losses", []), "scalars": page}
            times, kinds = self._wall_times()
            epochs = self._epochs()
            # many names: the one-number series read together, as one table of all their
            # records (`Trial.one_number_rows`), each series' lists cut from lists of all
            listed = [n for c in SCALAR_COLLECTIONS for n in collections.get(c, [])]
            table = (
                _Table(trial.one_number_rows(listed), since, times, epochs, self._modes)
                if len(listed) > MANY_SCALARS
                else None
            )
            mode_names: dict[int, str] = {}  # step -> its mode's name, asked once per step
            whole = table.whole if table is not None else []
            item: dict[str, Any]
            k = -1
            for collection in SCALAR_COLLECTIONS:
                for name in collections.get(collection, []):
                    k += 1
                    series: _Series | None = None
                    if k < len(whole) and whole[k] and table is not None:  # served as read, no series cached
                        item = table.item(k, name, collection)
                        if collection == "losses":
                            series = _Series(self.damaged)
                            series.add(*table.arrays(k))
                            item["passes"] = self._passes(series, since, times)
                        out.append(item)
                        continue
                    else:
                        series = self._cached(("scalar", name))
                        tensor = trial.tensor(name)
                        series.extend(tensor.steps(), functools.partial(_scalar_at, tensor))
                        steps = [s for s in series.since(since) if series.values[s] is not None]
                        values = [num(series.values[s]) for s in steps]
                    modes = self._modes(steps, mode_names)
                    item = {
                        "name": name,
                        "collection": collection,
                        "steps": steps,
                        "modes": modes,
                        "values": values,
                        "wall_time": [times.get(s) for s in steps],
                        "epochs": None if epochs is None else [_at_or_before(epochs, s) for s in steps],
                    }
                    if collection == "losses":
                        item["passes"] = self._passes(series, since, times)
                    out.append(item)
        return {
            "run": self.name,
            "series": out,
            "last_step": self.last_step,
            "time_source": kinds,
            "scalars_total": total,
        }

    def _wall_times(self) -> tuple[dict[int, float], str]:
        """step -> unix time, and where the times come from (docs/dashboard_api.md): the
        profiler's step ends where it recorded steps, else what this dashboard saw."""
        times = dict(self.step_time)
        kinds = set(self.time_kinds)
        profiled = self._profiler_times()
        if profiled:
            times.update(profiled)
            kinds.add("profiler")
            if all(s in profiled for s in self.step_time):
                kinds = {"profiler"}
        order = ("profiler", "observed", "interpolated")
        return times, "+".join(k for k in order if k in kinds) or "none"

    def _profiler_times(self) -> dict[int, float]:
        from mldbg.profiler.read import profiler_data

        try:
            data = profiler_data(self._trial(), max_age=1.0)
            if not data.has_steps:
                return {}
            out: dict[int, float] = {}
            for worker in data.workers():
                rows = data.steps(worker)
                for step, end in zip(rows.step.tolist(), rows.end.tolist(), strict=True):
                    if math.isfinite(end):
                        out.setdefault(int(step), float(end))
            return out
        except (MldbgError, OSError, ValueError) as e:
            log.debug("mldbg dashboard: no profiler times for %s: %s", self.path, e)
            return {}

    def _epochs(self) -> tuple[list[int], list[float]] | None:
        """(steps, epochs) of a scalar named `epoch` (or ending in `/epoch`), if recorded."""
        trial = self._trial()
        name = next(
            (n for n in trial.tensor_names() if n == "epoch" or n.endswith("/epoch")),
            None,
        )
        if name is None:
            return None
        tensor = trial.tensor(name)
        series = self._cached(("scalar", name))
        series.extend(tensor.steps(), functools.partial(_scalar_at, tensor))
        steps = sorted(s for s, v in series.values.items() if v is not None)
        return steps, [series.values[s] for s in steps]

    def _passes(self, series: _Series, since: int | None, times: dict[int, float]) -> list[dict[str, Any]]:
        """One point per evaluation pass: consecutive non-TRAIN steps of one mode with no TRAIN
        step between them; the mean of their values, at the TRAIN step they followed."""
        trial = self._trial()
        train = [s for s in trial.steps() if trial.mode(s) == Mode.TRAIN]  # global steps
        passes: dict[tuple[str, int], list[int]] = {}
        for step in sorted(series.values):
            value = series.values[step]
            mode = trial.mode(step)
            if value is None or mode == Mode.TRAIN:
                continue
            i = bisect.bisect_left(train, step)
            passes.setdefault((mode.name, train[i - 1] if i else -1), []).append(step)
        out = []
        for (mode_name, after), steps in passes.items():
            if since is not None and steps[-1] <= since:
                continue
            values = [series.values[s] for s in steps]
            out.append(
                {
                    "step": after,
                    "mode": mode_name,
                    "first_step": steps[0],
                    "last_step": steps[-1],
                    "batches": len(steps),
                    "value": num(float(np.mean(values))),
                    "wall_time": times.get(steps[-1]),
                }
            )
        return out

    def reduction(
        self, name: str, reduction: str = "mean", abs: bool = False, since: int | None = None
    ) -> dict[str, Any]:
        """A reduction of a tensor at each saved step: the saved one, or computed from the
        saved raw values (Tensor.reduction_value does both)."""
        if reduction not in REDUCTION_NAMES:
            raise InvalidConfig(f"unknown reduction {reduction!r}; choose from {', '.join(REDUCTION_NAMES)}")
        with self.lock:
            tensor = self._tensor(name)
            series = self._cached(("reduction", name, reduction, abs))
            series.extend(tensor.steps(), lambda s: tensor.reduction_value(s, reduction, abs=abs))
            steps = series.since(since)
            if not series.values and series.skipped:
                step, why = next(iter(series.skipped.items()))
                raise NotFound(
                    f"no {'abs ' if abs else ''}{reduction} of tensor {name!r} in run {self.name!r}: "
                    f"at step {step}: {why}"
                )
            return {
                "run": self.name,
                "tensor": name,
                "reduction": reduction,
                "abs": abs,
                "steps": steps,
                "modes": self._modes(steps),
                "values": [num(series.values[s]) for s in steps],
                "wall_time": _times_of(self._wall_times()[0], steps),
                **self._pace(series),
            }

    def distribution(self, name: str, since: int | None = None) -> dict[str, Any]:
        """Percentile bands of a tensor's raw values at each saved step (TensorBoard's
        "distributions"), over the finite values; `nonfinite` counts the others."""
        with self.lock:
            tensor = self._tensor(name)
            series = self._cached(("distribution", name))
            series.extend(tensor.steps(), lambda s: _percentiles(tensor.value(s)))
            steps = series.since(since)
            if not series.values and series.skipped:
                step, why = next(iter(series.skipped.items()))
                raise NotFound(
                    f"no raw values of tensor {name!r} in run {self.name!r} to draw its distribution "
                    f"(at step {step}: {why})"
                )
            return {
                "run": self.name,
                "tensor": name,
                "percentiles": list(PERCENTILES),
                "steps": steps,
                "modes": self._modes(steps),
                "values": [[num(v) for v in series.values[s][0]] for s in steps],
                "nonfinite": [series.values[s][1] for s in steps],
                "size": [series.values[s][2] for s in steps],
                **self._pace(series),
                # steps saved without raw values (statistics or reductions only): not drawn here
                "without_raw": sum(1 for why in series.skipped.values() if why not in self.damaged),
            }

    def histogram(self, name: str, step: int | None = None, bins: int = 30) -> dict[str, Any]:
        """A histogram of a tensor's finite raw values at `step` (default: its last step)."""
        if not 1 <= bins <= 1000:
            raise InvalidConfig(f"bins={bins}: give 1 to 1000 bins")
        with self.lock:
            tensor = self._tensor(name)
            steps = tensor.steps()
            if step is None:
                if not steps:
                    raise NotFound(f"tensor {name!r} of run {self.name!r} has no saved step yet")
                step = steps[-1]
            elif step not in steps:
                raise NotFound(
                    f"tensor {name!r} of run {self.name!r} was not saved at step {step}"
                    + (f"; its steps run from {steps[0]} to {steps[-1]}" if steps else "")
                )
            try:
                value = np.asarray(tensor.value(step), dtype=np.float64).ravel()
            except TensorUnavailableForStep as e:
                raise NotFound(str(e)) from None
            mode = self._trial().mode(step).name
        finite = value[np.isfinite(value)]
        if finite.size:
            counts, edges = np.histogram(finite, bins=bins)
        else:
            counts, edges = np.zeros(0, dtype=np.int64), np.zeros(0)
        return {
            "run": self.name,
            "tensor": name,
            "step": step,
            "mode": mode,
            "steps": steps,
            "edges": [num(e) for e in edges],
            "counts": counts.tolist(),
            "nonfinite": int(value.size - finite.size),
            "size": int(value.size),
        }

    def config(self) -> dict[str, Any]:
        """What the run records about its configuration (docs/dashboard_api.md)."""
        with self.lock:
            trial = self._trial()
            framework, version = framework_and_version(self.metas)
            metas = list(self.metas.values())
            collections = trial.collections()
            statistics: set[str] = set()
            raw = False
            for name in (collections.get("weights") or collections.get("gradients") or [])[:4]:
                statistics.update(
                    k for k, col in trial.statistic_columns(name).items() if np.isfinite(col).any()
                )
                raw = raw or bool(trial.records(name).has_raw.any())
            save_steps = {}
            for mode in Mode:
                steps = trial.steps(mode)
                if steps:
                    gaps = np.diff(steps)
                    interval = int(np.bincount(gaps).argmax()) if len(gaps) else None
                    save_steps[mode.name] = {
                        "count": len(steps), "first": steps[0], "last": steps[-1], "interval": interval
                    }  # fmt: skip
            workers = [
                {
                    "worker": w,
                    "rank": m.rank,
                    "host": m.host,
                    "pid": m.pid,
                    "started": m.started,
                    "ended": self.ends[w].ended if w in self.ends else None,
                    "stopped": self.ends[w].stopped if w in self.ends else False,
                    "last_step": self.ends[w].last_step if w in self.ends else None,
                }
                for w, m in sorted(self.metas.items())
            ]
            return {
                "run": self.name,
                "framework": framework,
                "framework_version": version,
                "mldbg_format": max((m.format for m in metas), default=None),
                "world_size": max((m.world_size for m in metas), default=None),
                "expected_workers": max((m.expected_workers for m in metas), default=None),
                "workers": workers,
                "collections": {c: len(names) for c, names in collections.items()},
                "tensors": len(trial.tensor_names()),
                "raw_tensors": raw,
                "statistics": sorted(statistics),
                "save_steps": save_steps,
                "hyperparameters": self._hyperparameters(),
            }

    def _hyperparameters(self) -> dict[str, Any]:
        trial = self._trial()
        names = set(trial.collections().get("hyperparameters", []))
        names.update(n for n in trial.tensor_names() if n.startswith(("hp/", "hyperparameters/")))
        out: dict[str, Any] = {}
        for name in sorted(names):
            tensor = trial.tensor(name)
            steps = tensor.steps()
            if not steps:
                continue
            try:
                value = _scalar_at(tensor, steps[0])
            except (TensorUnavailableForStep, CorruptRecord):
                continue
            key = name.split("/", 1)[1] if name.startswith(("hp/", "hyperparameters/")) else name
            out[key] = None if value is None else num(value)
        return out

    def series(self, names: Sequence[str], reduction: str = "l2", abs: bool = False, since: int | None = None,
               regex: bool = False) -> dict[str, Any]:  # fmt: skip
        """Several tensors' reduction series in one answer; a tensor that fails says why in its slot."""
        if reduction not in REDUCTION_NAMES:
            raise InvalidConfig(f"unknown reduction {reduction!r}; choose from {', '.join(REDUCTION_NAMES)}")
        if regex:
            with self.lock:
                trial = self._trial()
                wanted: list[str] = []
                for pattern in names:
                    try:
                        wanted += [n for n in trial.tensor_names(regex=pattern) if n not in wanted]
                    except re.error as e:
                        raise InvalidConfig(f"tensor regex {pattern!r} is not a valid regex: {e}") from None
            names = wanted
        if len(names) > MAX_SERIES:
            raise InvalidConfig(f"{len(names)} tensors asked at once; ask for at most {MAX_SERIES} per call")
        out = []
        for name in names:
            try:
                got = self.reduction(name, reduction, abs, since)
                keys = ("tensor", "steps", "modes", "values", "wall_time", "breaks", "cadence", "sparse")
                out.append({k: got[k] for k in keys})
            except NotFound as e:
                out.append({"tensor": name, "detail": str(e)})
        return {"run": self.name, "reduction": reduction, "abs": abs, "series": out}

    def evidence(self, id: int) -> dict[str, Any]:
        """A finding with what shows it: its tensors and the run's loss around its step."""
        with self._findings_lock:
            if not 0 <= id < len(self.findings):
                raise NotFound(
                    f"run {self.name!r} has no finding {id}; it has {len(self.findings)} (ids 0 to "
                    f"{len(self.findings) - 1}); see /api/runs/{self.name}/findings"
                )
            finding = self.findings[id]
        with self.lock:
            trial = self._trial()
            steps = trial.steps()
            at = bisect.bisect_left(steps, finding.step)
            window = [steps[max(0, at - EVIDENCE_STEPS)], steps[min(len(steps) - 1, at + EVIDENCE_STEPS)]]
            series = []
            for name in finding.tensors[:8]:
                if trial.has_tensor(name):
                    series.append(self._evidence_series(name, window))
            loss_names = trial.collections().get("losses", [])
            loss = None
            if loss_names:
                got = self._evidence_series(loss_names[0], window)
                loss = {"name": loss_names[0], **{k: got[k] for k in ("steps", "modes", "values")}}
        histogram = None
        if finding.tensors:
            try:
                histogram = self.histogram(finding.tensors[0], finding.step)
            except (NotFound, MldbgError):
                histogram = None
        return {
            "finding": finding_dict(self.name, id, finding),
            "window": window,
            "series": series,
            "loss": loss,
            "histogram": histogram,
        }

    def _evidence_series(self, name: str, window: list[int]) -> dict[str, Any]:
        tensor = self._trial().tensor(name)
        first = tensor.steps()
        first = [s for s in first if window[0] <= s <= window[1]]
        series = self._cached(("small", name))
        series.extend(first[:1], functools.partial(_scalar_at_small, tensor))
        if first and series.values.get(first[0]) is not None:  # a scalar (a loss): its value
            series.extend(first, functools.partial(_scalar_at_small, tensor))
            kind, reduction = "value", None
        else:
            for reduction in ("l2", "mean"):
                series = self._cached(("reduction", name, reduction, False))
                series.extend(first, functools.partial(_reduction_at, tensor, reduction))
                if series.values:
                    break
            kind = "reduction"
        steps = [s for s in first if series.values.get(s) is not None]
        return {
            "tensor": name,
            "kind": kind,
            "reduction": reduction,
            "steps": steps,
            "modes": self._modes(steps),
            "values": [num(series.values[s]) for s in steps],
        }

    def layers(self, since: int | None = None) -> dict[str, Any]:
        """Per-layer health over the recorded steps (mldbg.dashboard.layers)."""
        from mldbg.dashboard import layers

        with self.lock:
            trial = self._trial()
            out = {
                "run": self.name,
                "parameters": layers.parameters(trial, self._layers, since),
                "activations": layers.activations(trial, self._layers, since),
            }
            return {**out, **self._layer_pace(trial, out)}

    def _layer_pace(self, trial: Trial, got: dict[str, Any]) -> dict[str, Any]:
        """The layers' TRAIN steps' cadence (`_pace`): `breaks`, the steps with a gap before
        them (the heatmap leaves the gap blank instead of stretching a cell over it), and
        `cadence` in words. Over every step the parameters were saved at, not only `since`."""
        from mldbg.report.cadence import of_series

        names = [p["name"] for p in got["parameters"]] + [a["name"] for a in got["activations"]]
        union: set[int] = set()
        for name in names:
            union.update(trial.tensor(name).steps())
        train = sorted(s for s in union if trial.mode(s) == Mode.TRAIN)
        key = ("layers", len(train))
        cached = self._layer_paces.get(key)
        if cached is None:
            pace = of_series(trial, train)
            cached = self._layer_paces[key] = {"breaks": pace.breaks, "cadence": pace.text if train else ""}
        return cached

    def profiler(self) -> dict[str, Any]:
        """The profiler panel (mldbg.dashboard.profile); the rules' verdicts are re-evaluated
        at most every 2 seconds of a live run, once for an ended one."""
        from mldbg.dashboard.profile import panel
        from mldbg.profiler.read import profiler_data

        with self.lock:
            cached = self._profile
            if cached is not None and (cached[1] or time.monotonic() - cached[0] < 2.0):
                return cached[2]
            data = profiler_data(self._trial(), max_age=1.0)
            answer = panel(self.name, data)
            self._profile = (time.monotonic(), self.finished and data.complete, answer)
            return answer

    def stop(self, reason: str = "") -> dict[str, Any]:
        """Ask the live training to stop, as the StopTraining action does (control/stop)."""
        from mldbg.actions.base import Context
        from mldbg.actions.stop import StopTraining

        with self.lock:
            trial = self._trial()
            if self.finished:
                raise AlreadyEnded(
                    f"run {self.name!r} already ended ({self.status}); there is nothing to stop"
                )
            step = self.last_step if self.last_step is not None else 0
            why = reason or "stopped from the dashboard"
            finding = Finding(rule="dashboard", step=step, mode=None, message=why, severity="warning")
            context = Context(run=self.path, store=trial.store)
            StopTraining().act([finding], context)
            self.stop_requested = context.stop_requested or why
        return {"run": self.name, "requested": True, "reason": self.stop_requested}

    def findings_info(self) -> dict[str, Any]:
        with self._findings_lock:
            return {
                "run": self.name,
                "enabled": self.with_rules,
                "done": self._rules_finished,  # the run ended and every step was checked
                "rules": list(self.rule_names),
                "checked_step": self.checked_step,
                "findings": [finding_dict(self.name, i, f) for i, f in enumerate(self.findings)],
                "skipped": dict(self.rules_skipped),
                "errors": dict(self.rule_errors),
            }


def _times_of(times: dict[int, float], steps: list[int]) -> list[float | None]:
    return [times.get(s) for s in steps]


class _Table:
    """The scalars' series read together (`Trial.one_number_rows`), served as lists: each
    column made a list once for all the records (steps, values, modes, wall times, epochs),
    a series' lists a slice of them: 100,000 series of a few points with no NumPy call and
    no lookup per series."""

    def __init__(
        self,
        rows: OneNumberRows,
        since: int | None,
        times: Mapping[int, float],
        epochs: tuple[list[int], list[float]] | None,
        modes: Callable[[list[int], dict[int, str]], list[str]],
    ) -> None:
        self.rows = rows
        self.whole = rows.whole.tolist()
        starts, sizes = rows.starts, rows.sizes
        if since is not None and len(rows.step):  # a series' steps increase: those after `since` end it
            after = (rows.step > since).astype(np.int64)
            upto = np.concatenate(([0], np.cumsum(after)))
            kept = upto[starts + sizes] - upto[starts]
            starts, sizes = starts + sizes - kept, kept
        self.starts, self.sizes = starts.tolist(), sizes.tolist()
        self.steps = rows.step.tolist()
        self.values = rows.value.tolist()
        finite = np.isfinite(rows.value).astype(np.int64)
        upto = np.concatenate(([0], np.cumsum(finite)))
        self.finite = ((upto[starts + sizes] - upto[starts]) == sizes).tolist()
        distinct, inverse = np.unique(rows.step, return_inverse=True)
        steps = distinct.tolist()
        names = modes(steps, {})
        walls = [times.get(s) for s in steps]
        per = np.asarray(inverse, dtype=np.int64).reshape(-1)
        self.modes = np.asarray(names, dtype=object)[per].tolist() if steps else []
        self.wall = np.asarray(walls, dtype=object)[per].tolist() if steps else []
        self.epochs = None
        if epochs is not None:
            at = [_at_or_before(epochs, s) for s in steps]
            self.epochs = np.asarray(at, dtype=object)[per].tolist() if steps else []

    def item(self, k: int, name: str, collection: str) -> dict[str, Any]:
        """The series of the k-th name asked, as `/scalars` serves it (a name that read
        `whole`: the others are read step by step)."""
        a = self.starts[k]
        b = a + self.sizes[k]
        values = self.values[a:b]
        if not self.finite[k]:  # a NaN or an infinity: as JSON carries them
            values = [num(v) for v in values]
        return {
            "name": name,
            "collection": collection,
            "steps": self.steps[a:b],
            "modes": self.modes[a:b],
            "values": values,
            "wall_time": self.wall[a:b],
            "epochs": None if self.epochs is None else self.epochs[a:b],
        }

    def arrays(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of the k-th name asked, every record (`since` aside)."""
        a, n = int(self.rows.starts[k]), int(self.rows.sizes[k])
        return self.rows.step[a : a + n], self.rows.value[a : a + n]


def _at_or_before(found: tuple[list[int], list[float]], step: int) -> float | None:
    steps, values = found
    i = bisect.bisect_right(steps, step)
    return num(values[i - 1]) if i else None  # type: ignore[return-value]


def finding_dict(run: str, id: int, f: Finding) -> dict[str, Any]:
    """A finding for the API: its `id` in its run and the `tensor` to mark it on."""
    return {"id": id, "run": run, **f.to_dict(), "tensor": f.tensors[0] if f.tensors else None}


PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd",
)  # fmt: skip


def run_color(path: str) -> str:
    """A colour for a run that is the same on every start: from a hash of its path."""
    return PALETTE[zlib.crc32(path.encode()) % len(PALETTE)]


def framework_and_version(metas: dict[str, WorkerMeta]) -> tuple[str | None, str]:
    """("torch", "2.13.0") from meta.json's `framework` ("torch-2.13.0+cpu"); version "" unknown."""
    for meta in metas.values():
        if meta.framework:
            name, sep, version = meta.framework.partition("-")
            if sep and version[:1].isdigit():
                return name, version
            return meta.framework, ""
    return None, ""


def _scalar_at(tensor: Any, step: int) -> float | None:
    """A loss or scalar as one number: the mean when the hook saved a vector (per-sample losses)."""
    arr = np.asarray(tensor.value(step), dtype=np.float64)
    if arr.size == 0:
        return None
    return float(arr.reshape(-1)[0]) if arr.size == 1 else float(arr.mean())


def _marker(store: Any, key: str, kind: Any) -> Any:
    """A marker of the run, None when absent or damaged (the trial reports damage)."""
    try:
        return markers.load(store, key, kind)
    except (MldbgError, OSError):
        return None


def _reduction_at(tensor: Any, reduction: str, step: int) -> float:
    return float(tensor.reduction_value(step, reduction))


def _scalar_at_small(tensor: Any, step: int) -> float | None:
    """The value of a tensor of at most one element, else None (not a scalar)."""
    arr = np.asarray(tensor.value(step), dtype=np.float64)
    return float(arr.reshape(-1)[0]) if arr.size == 1 else None


def _percentiles(value: np.ndarray) -> tuple[list[float], int, int]:
    bands, nonfinite = finite_percentiles(value)
    return bands.tolist(), nonfinite, int(np.size(value))


# many runs ---------------------------------------------------------------------------------------
def run_names(paths: Sequence[str]) -> list[str]:
    """Short unique names for the runs: the last part of each path, more parts on a clash."""
    parts = [[q for q in p.rstrip("/").replace("\\", "/").split("/") if q] or [p] for p in paths]
    depth = [1] * len(paths)
    for _ in range(64):
        names = ["/".join(pp[-d:]) for pp, d in zip(parts, depth, strict=True)]
        clash = {n for n in names if names.count(n) > 1}
        if not clash:
            return names
        for i, n in enumerate(names):
            if n in clash and depth[i] < len(parts[i]):
                depth[i] += 1
        if all(depth[i] >= len(parts[i]) for i, n in enumerate(names) if n in clash):
            break
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
    return out


def _is_run(location: str) -> bool:
    """A run is a folder (or prefix) with `workers/` in it, or an smdebug output directory."""
    store = open_store(location)
    try:
        children = store.children("")
    except (OSError, MldbgError):
        return False
    finally:
        store.close()
    return layout.WORKERS.rstrip("/") in children or {"index", "events"} <= set(children)


class Source:
    """A served folder (or s3:// prefix) of runs, watched for runs that appear in it later:
    one listing of its children per refresh, and one of each child not yet known to be a run."""

    def __init__(self, location: str):
        self.location = location
        self.known: set[str] = set()  # children found to be runs

    def new_runs(self) -> list[str]:
        store = open_store(self.location)
        try:
            try:
                children = store.children("")
            except (OSError, MldbgError):
                return []
            found = []
            for child in children:
                if child in self.known:
                    continue
                try:
                    grandchildren = store.children(child + "/")
                except (OSError, MldbgError):
                    continue
                if layout.WORKERS.rstrip("/") in grandchildren or {"index", "events"} <= set(grandchildren):
                    self.known.add(child)
                    found.append(child)
        finally:
            store.close()
        base = self.location.rstrip("/")
        return [f"{base}/{c}" if "://" in base else os.path.join(base, c) for c in sorted(found)]


class Dashboard:
    """Every served run, a thread that refreshes them every `refresh_seconds`, and one that
    runs the rules over them (a slow rule pass never holds the step counters back).

    `rules`: None runs the default rule set on each run, a list of specs (names,
    `"name:k=v"` strings, rule objects) those rules, an empty list no rules.
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        rules: Sequence[Any] | None = None,
        refresh_seconds: float = 1.0,
        stall_seconds: float = 60.0,
    ):
        with_rules = rules is None or len(rules) > 0  # None: the default set; []: no rules
        if not paths:
            raise InvalidConfig("give at least one run PATH to the dashboard")
        if refresh_seconds <= 0:
            raise InvalidConfig(f"refresh_seconds={refresh_seconds}: must be > 0")
        if rules:
            from mldbg.rules.specs import resolve_rules

            resolve_rules(list(rules), None)  # an unknown rule or parameter fails now, not later
        self.refresh_seconds = refresh_seconds
        self.with_rules = with_rules
        self.rule_specs = rules
        # each PATH, the runs of a folder of runs (a sweep), or a pattern's; a PATH that does not
        # exist yet is kept: the run may start later
        expanded, unmatched = find_runs(paths)
        if unmatched:
            raise InvalidConfig("; ".join(unmatched.values()))
        if stall_seconds <= 0:
            raise InvalidConfig(f"stall_seconds={stall_seconds}: must be > 0")
        self.stall_seconds = stall_seconds
        # copy-on-write: the refresher replaces the dict when a run appears, readers iterate freely
        self.runs: dict[str, RunData] = {}
        for i, (name, path) in enumerate(zip(run_names(expanded), expanded, strict=True)):
            # the first runs opened now, the others by the refresher (or on first use): a sweep
            # of hundreds of runs answers its first request at once
            self.runs[name] = self._new_run(name, path, open_now=i < OPEN_AT_START)
        # the given folders and prefixes that are not runs themselves: watched for new runs
        self.sources: list[Source] = []
        for given in [os.fspath(p) for p in paths]:
            local = "://" not in given or given.startswith("file://")
            if any(c in given for c in "*?[") or (local and not os.path.isdir(given)) or _is_run(given):
                continue
            source = Source(given)
            parent = given.rstrip("/")
            for p in expanded:
                head, _, tail = p.rstrip("/").rpartition("/")
                if local:
                    head, tail = os.path.split(p.rstrip("/"))
                if head.rstrip("/") == parent:
                    source.known.add(tail)
            self.sources.append(source)
        self.events = EventLog()
        self._reported: dict[str, tuple[str, int, int]] = {}  # run -> (status, steps, findings) sent
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _new_run(self, name: str, path: str, open_now: bool = True) -> RunData:
        run = RunData(name, path, self.rule_specs, self.with_rules, open_now=open_now)
        run.stall_seconds = self.stall_seconds
        return run

    def discover(self) -> list[RunData]:
        """Add the runs that appeared under the watched folders; a placeholder for a watched
        folder itself (served while it held no run) goes once runs appear in it."""
        added = []
        for source in self.sources:
            try:
                paths = source.new_runs()
            except Exception as e:  # an unreachable bucket: try again next time
                log.warning(
                    "mldbg dashboard: listing %s failed: %s: %s", source.location, type(e).__name__, e
                )
                continue
            known = {r.path for r in self.runs.values()}
            for path in paths:
                if path in known:
                    continue
                names = run_names([*(r.path for r in self.runs.values()), path])
                name = names[-1]
                n = 2
                while name in self.runs:
                    name, n = f"{names[-1]}#{n}", n + 1
                run = self._new_run(name, path)
                runs = dict(self.runs)
                placeholder = next(
                    (k for k, r in runs.items() if r.path == source.location and r.step_count == 0), None
                )
                if placeholder is not None:
                    del runs[placeholder]
                    self.events.publish("removed", {"run": placeholder})
                runs[name] = run
                self.runs = runs
                added.append(run)
                self.events.publish("run", run.summary())
        return added

    def run(self, name: str) -> RunData:
        found = self.runs.get(name)
        if found is None:
            raise UnknownRun(f"no run named {name!r}; this dashboard serves: {', '.join(self.runs)}")
        return found

    def refresh_all(self) -> None:
        self.discover()
        for run in list(self.runs.values()):
            try:
                run.refresh()
            except Exception as e:  # never let one run stop the others
                log.warning("mldbg dashboard: refreshing %s failed: %s: %s", run.path, type(e).__name__, e)
                run.error = f"refresh failed: {type(e).__name__}: {e}"
            self._publish_changes(run)

    def _publish_changes(self, run: RunData) -> None:
        """Events for what changed in `run` since the last refresh: steps, status, findings."""
        status, steps = run.status, run.step_count
        with run._findings_lock:
            findings = list(run.findings)
        before = self._reported.get(run.name)
        self._reported[run.name] = (status, steps, len(findings))
        if before is None:
            before = ("waiting", 0, 0)
        if steps != before[1]:
            self.events.publish(
                "step", {"run": run.name, "steps": steps, "last_step": run.last_step, "status": status}
            )
        if status != before[0]:
            self.events.publish("status", {"run": run.name, "status": status, "previous": before[0]})
        for i in range(before[2], len(findings)):
            self.events.publish("finding", finding_dict(run.name, i, findings[i]))

    def check_all(self) -> None:
        """One rule cycle over every run (`RunData.check_rules`)."""
        for run in list(self.runs.values()):
            try:
                run.check_rules()
            except Exception as e:  # never let one run stop the others
                log.warning("mldbg dashboard: the rules on %s failed: %s: %s", run.path, type(e).__name__, e)

    def start(self) -> None:
        """Refresh every run now and then every `refresh_seconds`, and run the rules over
        them as often, each in a daemon thread of its own."""
        if self._threads:
            return
        self._stop.clear()
        for work, name in ((self.refresh_all, "refresh"), (self.check_all, "rules")):
            thread = threading.Thread(
                target=self._loop, args=(work,), name=f"mldbg-dashboard-{name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads = []

    def _loop(self, work: Callable[[], None]) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            work()
            self._stop.wait(max(0.05, self.refresh_seconds - (time.monotonic() - started)))
