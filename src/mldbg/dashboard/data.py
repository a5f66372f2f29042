"""The dashboard's data layer: one `RunData` per recorded run, refreshed incrementally.

Each run keeps two trials of the same path: one read by the HTTP handlers (behind a lock),
one owned by a live `RuleRunner`, so a long rule pass never blocks a page. Series (losses,
reductions, distributions) are cached per tensor and extended with the new steps only, so a
poll costs what was written since the last one, not the whole run. Nothing here knows HTTP:
errors are `MldbgError`s that app.py maps to status codes.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from mldbg.errors import (
    CorruptRecord,
    InvalidConfig,
    MldbgError,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from mldbg.insight.distribution import PERCENTILES, finite_percentiles
from mldbg.rules.base import Finding
from mldbg.store.reductions import REDUCTION_NAMES
from mldbg.trial import Trial, create_trial
from mldbg.trial.runs import find_runs

log = logging.getLogger("mldbg")

SCALAR_COLLECTIONS = ("losses", "scalars")
MAX_CACHED_SERIES = 256


class UnknownRun(MldbgError):
    """No run of that name is served."""


class NotFound(MldbgError):
    """The run is served, but what was asked (a tensor, a step) is not in it."""


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

    def since(self, since: int | None) -> list[int]:
        return sorted(s for s in self.values if since is None or s > since)


class RunData:
    """One run: its trial, cached series, and the findings of the rules run live over it."""

    def __init__(self, name: str, path: str, rules: Sequence[Any] | None, with_rules: bool = True):
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
        # rules: their own trial, used by the refresher thread only
        self._runner: Any = None
        self._rules_finished = False
        self._findings_lock = threading.Lock()
        self.findings: list[Finding] = []
        self.rule_errors: dict[str, str] = {}
        self.rules_skipped: dict[str, str] = {}
        self.rule_names: list[str] = []
        self.checked_step = -1
        self._open()

    # loading --------------------------------------------------------------------------------
    def _open(self) -> None:
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
            self._note_steps()

    def _note_steps(self) -> None:
        assert self.trial is not None
        steps = self.trial.steps()
        if len(steps) != self.step_count:
            self.step_count = len(steps)
            self.last_step = steps[-1] if steps else None
            self.last_change = time.time()
        self.finished = self.trial.loaded_all_steps

    def refresh(self) -> None:
        """Read what was written since the last refresh, then run the rules over it."""
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
                    return
        self._run_rules()

    def _run_rules(self) -> None:
        if not self.with_rules or self._rules_finished or self.step_count == 0:
            return
        from mldbg.rules.runner import RuleRunner

        try:
            if self._runner is None:
                self._runner = RuleRunner(create_trial(self.path, on_corrupt="skip"), self.rule_specs)
                self.rule_names = [r.name for r in self._runner.rules]
            new = self._runner.run_available()
            if self.finished:
                new += self._runner.finish()
                self._rules_finished = True
        except Exception as e:  # a rule set that cannot start: report it as the run's rule error
            with self._findings_lock:
                self.rule_errors["(rules)"] = f"{type(e).__name__}: {e}"
            self._rules_finished = True
            return
        with self._findings_lock:
            self.findings.extend(new)
            self.rule_errors.update(self._runner.errors)
            self.rules_skipped = dict(self._runner.skipped)
            self.checked_step = self._runner.last_step

    # what the API serves ----------------------------------------------------------------------
    @property
    def status(self) -> str:
        if self.trial is None:
            return "error"
        if self.finished:
            return "finished"
        if self.step_count == 0:
            return "waiting"
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
            "findings": n_findings,
            "rules_failed": rules_failed,
            "corrupt": corrupt,
            "error": self.error,
        }

    def _trial(self) -> Trial:
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

    def _modes(self, steps: list[int]) -> list[str]:
        trial = self._trial()
        return [trial.mode(s).name for s in steps]

    def scalars(self, since: int | None = None) -> dict[str, Any]:
        """Every tensor of the `losses` and `scalars` collections, over global steps, each
        step labelled with its mode (TRAIN, EVAL...)."""
        out = []
        with self.lock:
            trial = self._trial()
            collections = trial.collections()
            for collection in SCALAR_COLLECTIONS:
                for name in collections.get(collection, []):
                    tensor = trial.tensor(name)
                    series = self._cached(("scalar", name))
                    series.extend(tensor.steps(), functools.partial(_scalar_at, tensor))
                    steps = [s for s in series.since(since) if series.values[s] is not None]
                    out.append(
                        {
                            "name": name,
                            "collection": collection,
                            "steps": steps,
                            "modes": self._modes(steps),
                            "values": [num(series.values[s]) for s in steps],
                        }
                    )
        return {"run": self.name, "series": out, "last_step": self.last_step}

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

    def findings_info(self) -> dict[str, Any]:
        with self._findings_lock:
            return {
                "run": self.name,
                "enabled": self.with_rules,
                "done": self._rules_finished,  # the run ended and every step was checked
                "rules": list(self.rule_names),
                "checked_step": self.checked_step,
                "findings": [{"run": self.name, **f.to_dict()} for f in self.findings],
                "skipped": dict(self.rules_skipped),
                "errors": dict(self.rule_errors),
            }


def _scalar_at(tensor: Any, step: int) -> float | None:
    """A loss or scalar as one number: the mean when the hook saved a vector (per-sample losses)."""
    arr = np.asarray(tensor.value(step), dtype=np.float64)
    if arr.size == 0:
        return None
    return float(arr.reshape(-1)[0]) if arr.size == 1 else float(arr.mean())


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


class Dashboard:
    """Every served run, and a thread that refreshes them every `refresh_seconds`.

    `rules`: None runs the default rule set on each run, a list of specs (names,
    `"name:k=v"` strings, rule objects) those rules, an empty list no rules.
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        rules: Sequence[Any] | None = None,
        refresh_seconds: float = 1.0,
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
        self.runs: dict[str, RunData] = {
            name: RunData(name, path, rules, with_rules)
            for name, path in zip(run_names(expanded), expanded, strict=True)
        }
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run(self, name: str) -> RunData:
        found = self.runs.get(name)
        if found is None:
            raise UnknownRun(f"no run named {name!r}; this dashboard serves: {', '.join(self.runs)}")
        return found

    def refresh_all(self) -> None:
        for run in self.runs.values():
            try:
                run.refresh()
            except Exception as e:  # never let one run stop the others
                log.warning("mldbg dashboard: refreshing %s failed: %s: %s", run.path, type(e).__name__, e)
                run.error = f"refresh failed: {type(e).__name__}: {e}"

    def start(self) -> None:
        """Refresh every run now and then every `refresh_seconds`, in a daemon thread."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="mldbg-dashboard-refresh", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.refresh_all()
            self._stop.wait(max(0.05, self.refresh_seconds - (time.monotonic() - started)))
