"""The runners: rules over a trial, offline (`check`), or live, a pass at a time (`RuleRunner`).

The runner walks the global steps in order and calls a rule's `check(trial, step)` at the
steps it has something to read (a built-in rule: where its collections were saved, see
`RuleRunner._visits`; any other rule: every step), after its fast path (`check_columns`)
covered what it could; rules keep their own state (windows, counters) between calls, so the
same rule works on a finished run and beside a running job, and the runner resets that state
before it starts, so a rule object checks run after run. The rules read through a `TrialView`, which
reads each tensor of the current step once for all of them. A rule whose collections were not
saved is skipped, once, with the reason in `runner.skipped`; it never fails or fires. A rule
that read some data but too little to judge says why, with counts, in `runner.unchecked`
(and in `skipped`, which lists every rule that reached no verdict).
`PerWorkerRunner` checks each worker of a distributed run on its own.
"""

from __future__ import annotations

import heapq
import logging
import os
import time
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from mldbg.errors import (
    CorruptRecord,
    InvalidConfig,
    MldbgError,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from mldbg.rules.base import BUILTIN, Finding, Findings, Rule
from mldbg.rules.specs import RuleSpec, resolve_rules, unbound_copy
from mldbg.rules.view import TrialView
from mldbg.store import open_store
from mldbg.trial import Trial, create_trial
from mldbg.trial.worker_view import run_workers

log = logging.getLogger("mldbg")

EARLY_STEPS = 64  # each mode's first steps, shown to every rule (see `_visits`)
FIRST_WINDOW = 64  # steps offered to a fast path after it left one to `check`
MAX_WINDOW = 1 << 17  # and the most it is offered at once (it grows 4x while it covers them all;
# a call holds arrays over the steps it is offered: ~1 MB per 2^17 steps each, not 8 per 2^20)
_MANY_TENSORS = 256  # a collection of more tensors is placed by its steps joined (`Columns.steps_of`)

_MISSING_DATA = (TensorUnavailable, TensorUnavailableForStep, StepUnavailable, StepNotYetAvailable)


class RuleRunner:
    """Runs rules over a trial, step by step, in order.

    `run_available()` checks the steps not checked yet (call it again after new data came,
    for live use), `finish()` checks the rest and the whole-run conditions once training
    ended. `skipped` maps a rule name to why it could not run; `unchecked`, the rules among
    them that had some data but too little to judge ("needs 50 saved losses, has 3");
    `errors` a rule that raised (it is then dropped, the others go on).

    Rules with a fast path (`check_columns`, see `mldbg.rules.columns`) skip, in one call,
    the steps where the statistics columns show nothing to report; `columns=False` runs
    every rule through `check` at every step (the reference the fast paths are tested
    against).
    """

    def __init__(
        self,
        trial: Trial | str | os.PathLike[str],
        rules: RuleSpec | Iterable[RuleSpec] | None = None,
        start_step: int | None = None,
        end_step: int | None = None,
        columns: bool = True,
    ):
        self.trial = trial if isinstance(trial, Trial) else create_trial(trial)
        self.columns = columns  # False: every rule through check() only (the reference path)
        self.view = TrialView(self.trial, columns=columns)
        self.rules = resolve_rules(rules, self.trial)
        for rule in self.rules:
            if rule.trial is None:
                rule.trial = self.trial
            rule.reset()  # state left by an earlier run must not leak into this one
        self.start_step = start_step
        self.end_step = end_step
        self.skipped: dict[str, str] = {}
        self.unchecked: dict[str, str] = {}
        self.errors: dict[str, str] = {}
        self.corrupt: dict[str, str] = {}  # damaged file -> the rule that met it first
        self._waiting = list(self.rules)  # needs not met yet
        self._active: list[Rule] = []
        self._last = -1 if start_step is None else start_step - 1
        self._seen_steps = 0
        self._finished = False

    def run_available(self) -> list[Finding]:
        """Check every step not checked yet (in a live run, all but the newest, which may
        still be incomplete). Returns the new findings. The pass reads what the trial held at
        its start (`Trial.held`): a live run growing underneath is read by the next one."""
        complete = self.trial.loaded_all_steps
        with self.trial.held():
            return self._run(complete)

    def finish(self) -> list[Finding]:
        """Check the remaining steps, then whole-run conditions. Call once training ended."""
        if self._finished:
            return []
        self.trial.refresh()
        with self.trial.held():
            findings = self._run(True)
            self._finished = True
            for rule in list(self._active):
                findings += self._call(rule, rule.finish, self.view)
        for rule in self._active:
            if rule.name in self.errors:
                continue
            why = rule.unchecked()
            if why:
                self.skipped.setdefault(rule.name, why)
                continue
            short = rule.undecided()
            if short:
                self.unchecked[rule.name] = short
                self.skipped.setdefault(rule.name, short)
                log.info("mldbg: rule %s could not judge: %s", rule.name, short)
        for rule in self._waiting:
            self._skip(rule)
        self._waiting = []
        return findings

    # internals ------------------------------------------------------------------------------
    def _run(self, complete: bool) -> list[Finding]:
        every = self.view.columns.steps()  # the run's steps as an array: no list of 10^6 ints
        if len(every) != self._seen_steps:
            self._seen_steps = len(every)
            self.view.refreshed()
        self._activate(complete)
        self.view.finished = complete
        lo = int(np.searchsorted(every, self._last, side="right"))
        hi = len(every) if self.end_step is None else int(np.searchsorted(every, self.end_step))
        new = every[lo:hi].copy()
        if not complete and len(new):
            new = new[:-1]  # the newest step may still be written
        findings: list[Finding] = []
        with np.errstate(all="ignore"):
            if len(new):
                findings = self._walk(new)
                self._last = int(new[-1])
            now = time.time()
            for rule in list(self._active):
                findings += self._call(rule, rule.poll, self.view, now)
        return findings

    def _walk(self, new: np.ndarray) -> list[Finding]:
        """Every active rule over the steps `new`, in step order (at one step, in the rules'
        order, so they share the view's reads of that step).

        A rule is visited only at the steps where its inputs were saved (`_visits`): a rule of
        the gradients, saved at 10^4 of 10^6 steps, is called 10^4 times. A rule with a fast
        path (`check_columns`) is asked for a window of its steps at a time, the window
        growing while it covers them all (a quiet run is a few calls) and starting small again
        after a step it leaves to `check`: a call reads about as many steps as it may cover,
        so a run whose rules check a step every hundred costs the same per step as a short one
        (asked for all the remaining steps each time, that was quadratic in the run's length).
        """
        findings: list[tuple[int, int, list[Finding]]] = []
        steps_of: dict[int, np.ndarray] = {}  # id(rule) -> its steps among `new`
        at: dict[int, int] = {}  # id(rule) -> the index of its next step to look at
        window: dict[int, int] = {}  # id(rule) -> how many steps its next fast call is offered
        retry: dict[int, tuple[int, int]] = {}  # id(rule) -> (its next step index to try it at, declines)
        order = {id(rule): k for k, rule in enumerate(self._active)}
        heap: list[tuple[int, int, int]] = []  # (index into `new`, rule order, id(rule))
        by_id = {id(rule): rule for rule in self._active}
        visits = self._visits(new)
        for rule in self._active:
            key = id(rule)
            own = visits(rule)
            if not len(own):
                continue
            steps_of[key], at[key], window[key] = own, 0, FIRST_WINDOW
            heapq.heappush(heap, (int(np.searchsorted(new, own[0])), order[key], key))
        current = None
        while heap:
            _, rank, key = heapq.heappop(heap)
            rule = by_id[key]
            if rule not in self._active:
                continue  # stopped by an error
            own, p = steps_of[key], at[key]
            fast = getattr(rule, "check_columns", None) if self.columns else None
            if fast is not None:
                try_at, declines = retry.get(key, (0, 0))
                if try_at <= p:
                    w = window[key]
                    part = own[p : p + w]
                    n = self._quiet(rule, fast, part)
                    if rule not in self._active:
                        continue
                    if n:
                        at[key] = p = p + n
                        window[key] = min(w * 4, MAX_WINDOW) if n == len(part) else max(FIRST_WINDOW, n)
                        retry[key] = (p + 1, 0) if n < len(part) else (0, 0)
                        if p < len(own):
                            heapq.heappush(heap, (int(np.searchsorted(new, own[p])), rank, key))
                        continue
                    # declined: this step may fire, try the next one; a rule that keeps
                    # declining (raw tensors every step) is asked less and less often
                    declines += 1
                    retry[key] = (p + (1 << min(max(0, declines - 3), 6)), declines)
                    window[key] = FIRST_WINDOW
            step = int(own[p])
            if step != current:
                self.view.begin(step)
                current = step
            found = self._call(rule, rule.check, self.view, step)
            if found:
                findings.append((step, rank, found))
            at[key] = p + 1
            if p + 1 < len(own):
                heapq.heappush(heap, (int(np.searchsorted(new, own[p + 1])), rank, key))
        findings.sort(key=lambda f: (f[0], f[1]))  # stable: in step order, then the rules' order
        return [f for _, _, found in findings for f in found]

    def _visits(self, new: np.ndarray) -> Any:
        """rule -> the steps of `new` it is shown: where one of the tensors of the collections
        it reads (`needed_collections`, and the collections of `reads`) has a record, the
        first step of each run of one mode (a rule may note the mode changing), and each mode's
        first `EARLY_STEPS` steps (a rule that judges the start of training counts them, and
        names the last it saw: `poor_weight_initialization`). Every step for
        a rule that reads no declared collection, a rule that is not built in (a custom or
        smdebug-style rule may read anything), and on the reference path (`columns=False`)."""
        columns = self.view.columns
        have = self.view.collections()
        cache: dict[str, np.ndarray] = {}  # collection -> a mask over `new`
        unions: dict[tuple[str, ...], np.ndarray] = {}  # the collections a rule reads -> its steps
        if len(new):
            modes, mode_steps = columns.modes(new)
            changes = np.concatenate([[True], modes[1:] != modes[:-1]])
            boundaries = changes | (mode_steps < EARLY_STEPS)
        else:
            boundaries = np.zeros(0, dtype=bool)

        def of_collection(name: str) -> np.ndarray:
            """A mask over `new`: the boundaries and the steps a tensor of `name` was saved at
            (placed among `new` by binary search: time in the tensors' steps, no sort of all)."""
            found = cache.get(name)
            if found is None:
                found = boundaries.copy()
                tensors = have.get(name, ())
                if not len(new) or not tensors:
                    cache[name] = found
                    return found
                if len(tensors) > _MANY_TENSORS:  # their steps joined at once, no columns per name
                    _place(found, new, columns.steps_of(tensors))
                    cache[name] = found
                    return found
                few: list[np.ndarray] = []  # many tensors of few steps each: placed together
                for tensor in tensors:
                    cols = columns.tensor(tensor)
                    if cols is None or not len(cols.steps):
                        continue
                    own = cols.steps
                    if own[0] > new[-1] or own[-1] < new[0]:
                        continue
                    if len(own) <= 64 and len(tensors) > 256:
                        few.append(own)
                        continue
                    _place(found, new, own)
                if few:
                    _place(found, new, np.unique(np.concatenate(few)))
                cache[name] = found
            return found

        def visits(rule: Rule) -> np.ndarray:
            if not self.columns or BUILTIN.get(rule.name) is not type(rule):
                return new
            read = {*rule.needed_collections(), *rule.needed_statistics()}
            if not read or "all" in read:
                return new
            key = tuple(sorted(read))
            found = unions.get(key)
            if found is None:
                mask = of_collection(key[0])
                for name in key[1:]:
                    mask = mask | of_collection(name)
                found = unions[key] = new[mask]
            return found

        return visits

    def _quiet(self, rule: Rule, fast: Any, steps: np.ndarray) -> int:
        """How many of `steps` a rule's fast path (`check_columns`, `mldbg.rules.columns`)
        covered; 0 when it declined or the data it read was missing or damaged (the per-step
        path then reads, and reports, as usual)."""
        try:
            n = int(fast(self.view, steps))
        except (*_MISSING_DATA, CorruptRecord) as e:
            log.debug("mldbg: rule %s: fast path declined: %s", rule.name, e)
            return 0
        except Exception as e:
            self.errors[rule.name] = f"{type(e).__name__}: {e}"
            log.warning("mldbg: rule %s failed and was stopped: %s: %s", rule.name, type(e).__name__, e)
            if rule in self._active:
                self._active.remove(rule)
            return len(steps)
        return max(0, min(n, len(steps)))

    def _activate(self, complete: bool) -> None:
        if not self._waiting:
            return
        if not len(self.view.columns.steps()):
            # rules on other series (the profiler's) need no saved tensor step to start
            self._active.extend(r for r in self._waiting if not r.needs_steps)
            self._waiting = [r for r in self._waiting if r.needs_steps]
            if complete:
                for rule in self._waiting:
                    self._skip(rule, "the run has no saved steps")
                self._waiting = []
            return
        have = self.view.collections()
        still = []
        for rule in self._waiting:
            needs = rule.needed_collections()
            present = [c for c in needs if have.get(c)]
            ok = not needs or (bool(present) if rule.needs_any else len(present) == len(needs))
            if ok:
                self._active.append(rule)
            elif complete:
                self._skip(rule)
            else:
                still.append(rule)
        self._waiting = still

    @property
    def last_step(self) -> int:
        """The last global step checked so far (-1 before any)."""
        return self._last

    def _skip(self, rule: Rule, why: str | None = None) -> None:
        if rule.name in self.skipped:
            return
        if why is None:
            needs = rule.needed_collections()
            have = self.view.collections()
            missing = [c for c in needs if not have.get(c)]
            which = " or ".join(missing) if rule.needs_any else ", ".join(missing)
            absent = getattr(rule, "absent", "")  # why a run with the two lines' statistics lacks them
            why = (
                f"needs the {which} collection{'s' if len(missing) > 1 and not rule.needs_any else ''}, "
                + (
                    f"which this run did not record: {absent}"
                    if absent and self._has_statistics(have)
                    else "which this run did not save (add it to the hook's include_collections)"
                )
            )
        self.skipped[rule.name] = why
        log.info("mldbg: rule %s skipped: %s", rule.name, why)

    def _has_statistics(self, have: dict[str, frozenset[str]]) -> bool:
        """Were the two lines' statistics recorded (a weight's)? Then they hold every
        collection their models allow, and adding to include_collections is no help."""
        columns = self.view.columns
        for name in sorted(have.get("weights", ()))[:3]:
            found = columns.tensor(name)
            if found is not None and found.has_statistics:
                return True
        return False

    def _call(self, rule: Rule, method: Any, *args: Any) -> list[Finding]:
        try:
            result = method(*args)
        except _MISSING_DATA as e:  # data missing at this step: as smdebug, not a finding
            log.debug("mldbg: rule %s: %s", rule.name, e)
            return []
        except CorruptRecord as e:  # a damaged file: skip this step, keep the rule
            if str(e) not in self.corrupt:
                self.corrupt[str(e)] = rule.name
                log.warning("mldbg: rule %s skipped step %s: %s", rule.name, args[-1] if args else "?", e)
            return []
        except Exception as e:
            self.errors[rule.name] = f"{type(e).__name__}: {e}"
            log.warning("mldbg: rule %s failed and was stopped: %s: %s", rule.name, type(e).__name__, e)
            if rule in self._active:
                self._active.remove(rule)
            return []
        if result is None:
            return []
        found = [result] if isinstance(result, Finding) else [f for f in result if f is not None]
        if self.trial.worker is not None:  # a trial of one worker (create_trial(path, worker=...))
            for f in found:
                f.worker = f.worker or self.trial.worker
        return found


def _place(mask: np.ndarray, new: np.ndarray, own: np.ndarray) -> None:
    """Mark in `mask` (over the sorted steps `new`) the steps of `own` (sorted) among them."""
    pos = np.searchsorted(new, own)
    inside = pos < len(new)
    pos = pos[inside]
    mask[pos[new[pos] == own[inside]]] = True


class PerWorkerRunner:
    """A `RuleRunner` for each worker of a run written by several (the ranks of a distributed
    job, `include_workers="all"`), so that a rank that goes wrong alone is seen: a RuleRunner
    over the whole run reads each step from its first worker. Each worker's rules are built
    anew from the specs, and their findings carry `Finding.worker`.

    A run of one worker is checked as a whole, exactly as `RuleRunner` does. A worker that
    starts writing later (a live job) gets its runner when it appears. The same surface as
    RuleRunner: `run_available()`, `finish()`, `last_step` (the step every worker was checked
    through), `rules` (one worker's), and `skipped`, `errors`, `corrupt` merged by rule name.
    """

    def __init__(
        self,
        trial: Trial | str | os.PathLike[str],
        rules: RuleSpec | Iterable[RuleSpec] | None = None,
        start_step: int | None = None,
        end_step: int | None = None,
    ):
        if rules is not None and not isinstance(rules, (str, Rule, type, Mapping)):
            rules = list(rules)  # read once per worker
        self._specs = rules
        self._steps = (start_step, end_step)
        self.runners: dict[str, RuleRunner] = {}  # worker -> its runner (empty for a whole run)
        self._whole: RuleRunner | None = None
        if isinstance(trial, Trial):
            self.store, self._on_corrupt = trial.store, trial.on_corrupt
            several = trial.worker is None and (len(trial.workers()) > 1 or trial.expected_workers > 1)
        else:  # a finished run's workers are listed, not read: no index is loaded twice
            self.store, self._on_corrupt = open_store(trial), "raise"
            several = len(run_workers(self.store)) > 1
            if not several:
                trial = create_trial(self.store)
                several = len(trial.workers()) > 1 or trial.expected_workers > 1
        if several:
            self.rules = resolve_rules(unbound_copy(rules), None)
            self._add_workers()
        else:
            self._whole = RuleRunner(trial, rules, start_step, end_step)
            self.rules = self._whole.rules

    def _add_workers(self) -> None:
        for worker in run_workers(self.store):
            if worker not in self.runners:
                view = create_trial(self.store, on_corrupt=self._on_corrupt, worker=worker)
                self.runners[worker] = RuleRunner(view, unbound_copy(self._specs), *self._steps)

    def _each(self) -> list[RuleRunner]:
        return [self._whole] if self._whole is not None else list(self.runners.values())

    def run_available(self) -> list[Finding]:
        """Check every step not checked yet, worker by worker. Returns the new findings."""
        if self._whole is None:
            self._add_workers()
        return [f for runner in self._each() for f in runner.run_available()]

    def finish(self) -> list[Finding]:
        """Check the rest and the whole-run conditions of every worker. Call once training ended."""
        if self._whole is None:
            self._add_workers()
        return [f for runner in self._each() for f in runner.finish()]

    @property
    def last_step(self) -> int:
        """The last global step checked on every worker (-1 before any)."""
        return min((r.last_step for r in self._each()), default=-1)

    @property
    def skipped(self) -> dict[str, str]:
        return self._merged("skipped")

    @property
    def unchecked(self) -> dict[str, str]:
        return self._merged("unchecked")

    @property
    def errors(self) -> dict[str, str]:
        return self._merged("errors")

    @property
    def corrupt(self) -> dict[str, str]:
        return {what: name for r in self._each() for what, name in r.corrupt.items()}

    def _merged(self, kind: str) -> dict[str, str]:
        """Rule name -> why, from every worker; the workers are named unless it is all of them."""
        if self._whole is not None:
            return dict(getattr(self._whole, kind))
        by_rule: dict[str, dict[str, str]] = {}
        for worker, runner in self.runners.items():
            for name, why in getattr(runner, kind).items():
                by_rule.setdefault(name, {})[worker] = why
        out = {}
        for name, whys in by_rule.items():
            if len(whys) == len(self.runners) and len(set(whys.values())) == 1:
                out[name] = next(iter(whys.values()))
            else:
                out[name] = "; ".join(f"{worker}: {why}" for worker, why in whys.items())
        return out


def check(
    path: str | os.PathLike[str] | Trial,
    rules: RuleSpec | Iterable[RuleSpec] | None = None,
    start_step: int | None = None,
    end_step: int | None = None,
    per_worker: bool = False,
) -> list[Finding]:
    """Run rules over a recorded run and return what they found.

    `rules=None` runs the default set: every built-in rule whose data was recorded. A rule
    that raised is reported as a RuntimeWarning (the others still ran). The findings are
    those of the reported diagnoses (`mldbg.diagnose`): a lone finding of a rule that alone is
    wrong as often as right (reliability below `REPORT_CONFIDENCE`) is a suspicion, kept in
    `mldbg.diagnose(path).unconfirmed`, unless `rules` names that rule.

    In a run written by several workers (`include_workers="all"`) the rules read each step
    from its first worker. `per_worker=True` checks each worker on its own (worker by worker,
    in that order) and every finding names its `worker`; a one-worker run is checked as usual.
    """
    from mldbg.rules.diagnosis import reported

    trial = path if isinstance(path, Trial) else create_trial(path)
    findings = run_rules(trial, rules, start_step=start_step, end_step=end_step, per_worker=per_worker)
    return Findings(reported(findings, trial, rules))


def run_rules(
    path: str | os.PathLike[str] | Trial,
    rules: RuleSpec | Iterable[RuleSpec] | None = None,
    start_step: int | None = None,
    end_step: int | None = None,
    per_worker: bool = False,
) -> list[Finding]:
    """Every finding the rules make over a recorded run, reported or not (`check` keeps
    those of reported diagnoses). A rule that raised is a RuntimeWarning."""
    cls = PerWorkerRunner if per_worker else RuleRunner
    runner = cls(path, rules, start_step=start_step, end_step=end_step)
    findings = runner.run_available() + runner.finish()
    for name, err in runner.errors.items():
        warnings.warn(f"mldbg: rule {name} failed: {err}", RuntimeWarning, stacklevel=3)
    return findings


def invoke_rule(
    rule: Rule | Any, start_step: int | None = None, end_step: int | None = None
) -> list[Finding]:
    """Run one rule over its own trial (`rule.trial`, or smdebug's `rule.base_trial`)."""
    trial = getattr(rule, "trial", None) or getattr(rule, "base_trial", None)
    if trial is None:
        raise InvalidConfig(f"{rule!r} has no trial: create it with the trial as first argument")
    runner = RuleRunner(trial, [rule], start_step=start_step, end_step=end_step)
    findings = runner.run_available()
    last = trial.steps()[-1] if trial.steps() else -1
    if end_step is None or end_step > last:
        findings += runner.finish()
    for name, err in runner.errors.items():
        raise MldbgError(f"rule {name} failed: {err}")
    return findings


__all__ = ["PerWorkerRunner", "RuleRunner", "check", "invoke_rule", "run_rules"]
