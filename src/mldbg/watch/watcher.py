"""The watcher: rules run on a live run, in their own process, until training ends.

One cycle refreshes the trial, lets the rule runner check the steps that appeared since the
last cycle, hands new findings to the actions, and saves its place. It waits for a run that
does not exist yet, reads around partial or corrupt files (and says so), and after training
ends it makes a final pass (`RuleRunner.finish`) and returns. With its place it saves each
rule's status (`mldbg.watch.state.RuleStatus`), which `mldbg status RUN` reads.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from mldbg.actions.base import Action, Context
from mldbg.actions.specs import ActionSpec, resolve_actions
from mldbg.actions.stop import StopTraining
from mldbg.errors import MldbgError
from mldbg.rules.base import Finding, Rule
from mldbg.store import layout, markers
from mldbg.store.markers import StopRequest
from mldbg.trial import create_trial
from mldbg.watch.journal import Journal, WatcherBusy, finding_id
from mldbg.watch.progress import NoProgress, Progress
from mldbg.watch.state import StateFile, WatchState, run_id, watcher_id

STATUS_SECONDS = 1.0  # how often the rules' statuses are worked out when nothing fired

log = logging.getLogger("mldbg")

RuleSpec = str | Rule | type[Rule]
SAVE_SECONDS = 2.0  # how often the place is saved when only progress changed


class WatchTimeout(MldbgError):
    """The run did not appear (no step was written) within the watcher's `wait_timeout`."""


class Watcher:
    """Check `rules` on the run at `path` while it is written, and act on what they find.

    - `rules`: names, "name:k=v,..." strings, Rule objects or classes; None: the default set.
    - `actions`: `mldbg.actions.Action` objects, names (`"stop"`) or config objects
      (`{"type": "email", "to": ...}`), built-in or from the `mldbg.actions` entry points;
      called every cycle with the new findings.
    - `poll_seconds`: how often to look for new steps when nothing new came.
    - `state`: True to keep the watcher's place in the run's store (`watch/<id>.json`), a
      path for a local file, False for none. A restarted watcher resumes there and does not
      report or alert old findings again: each finding is journaled (`watch/<id>.json.journal`)
      before it is printed or delivered, so even a watcher killed right after a delivery
      delivers nothing twice (at most once; see `mldbg.watch.journal`).
    - `on_finding`: called with each new finding (the CLI prints it).
    - `alive`: returns False once the training process is gone; the watcher then makes its
      final pass even if the run has no end marker (a crash, kill -9).
    - `wait_timeout`: seconds to wait for the run to appear before raising `WatchTimeout`.
    - `per_worker`: check each worker of a run written by several (the ranks of a distributed
      job) on its own, as `mldbg.check(path, per_worker=True)`; findings carry the worker.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        rules: Sequence[RuleSpec] | None = None,
        actions: Iterable[ActionSpec] = (),
        *,
        poll_seconds: float = 0.2,
        state: bool | str | os.PathLike[str] = True,
        progress: Progress | None = None,
        on_finding: Callable[[Finding], None] | None = None,
        on_problem: Callable[[str], None] | None = None,
        alive: Callable[[], bool] | None = None,
        wait_timeout: float | None = None,
        per_worker: bool = False,
    ):
        from mldbg.rules.specs import chosen_rules, resolve_rules

        self.rules: list[Rule] = list(resolve_rules(rules))  # a wrong name fails now, not later
        self._chosen = chosen_rules(rules)  # named by the user: reported whatever their evidence
        # suspicions: findings of diagnoses below the reporting bar, held until a later finding
        # corroborates them (`mldbg.rules.diagnosis.REPORT_CONFIDENCE`); never delivered alone
        self.held: list[Finding] = []
        # stop first: the sooner the request is written, the fewer steps run past the problem
        self.actions: list[Action] = sorted(
            resolve_actions(actions), key=lambda a: not isinstance(a, StopTraining)
        )
        self.poll_seconds = poll_seconds
        self.progress = progress or NoProgress()
        self.on_finding = on_finding
        self.on_problem = on_problem or (lambda text: self.progress.note(f"{self.progress.label}: {text}"))
        self.alive = alive
        self.wait_timeout = wait_timeout
        self.per_worker = per_worker
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.trial = create_trial(path, on_corrupt="skip", missing_ok=True)
        self._report_warnings(caught)
        self.store = self.trial.store
        self.runner: Any = None
        self._trial_restarts = 0  # the trial's `restarts` this runner was made for
        self.ident = watcher_id(
            [repr(r) for r in self.rules]
            + [a.ident() for a in self.actions]
            + (["per_worker"] if per_worker else [])
        )
        self._state_file: StateFile | None = None
        self._journal: Journal | None = None
        if state is not False:
            self._state_file = StateFile.for_watcher(self.store, self.ident, None if state is True else state)
            self._journal = Journal.beside(
                self.store, self._state_file.key, self._state_file.path, self._state_file.fallback()
            )
        self._lock: int | None = None  # the journal's lock, held while this watcher runs
        self._handed: dict[str, int] = {}  # findings journaled and not yet covered by the saved place
        self._handed_before: set[str] = set()  # ... by an earlier watcher: never acted on again
        self.state = WatchState()
        self._resume_step = -1  # findings up to here were reported by an earlier watcher
        self._resume_finished = False
        self.findings: list[Finding] = []  # new findings reported by this watcher
        self.context = Context(
            run=self.store.url, store=self.store, rules=[r.name for r in self.rules], trial=self.trial
        )
        self._stop = threading.Event()
        self._started = False
        self.ended = False
        self.errors = 0
        self._told: set[tuple[str, str]] = set()
        self._saved_at = 0.0
        self._first: dict[str, Finding] = {}  # rule name -> its first finding (this runner's)
        self._counts: dict[str, int] = {}  # rule name -> findings so far
        self._status_at = 0.0

    # control ----------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask `run()` to return after the current cycle (thread- and signal-safe)."""
        self._stop.set()

    def run(self) -> list[Finding]:
        """Watch until training ends (or `stop()`); the new findings."""
        self.start()
        waiting_since = time.monotonic()
        try:
            while not self._stop.is_set():
                gone = self.alive is not None and not self.alive()
                new_records = self.cycle(final=gone)
                if self.ended:
                    break
                waited = time.monotonic() - waiting_since
                if self.runner is None and self.wait_timeout is not None and waited > self.wait_timeout:
                    raise WatchTimeout(
                        f"no run was written to {self.store.url} within {self.wait_timeout:g}s"
                    )
                if not new_records:
                    self._stop.wait(self.poll_seconds)
        finally:
            self._save()
            Journal.unlock(self._lock)
            self._lock = None
            self.progress.close()
            for action in self.actions:
                try:
                    action.close()
                except Exception as e:
                    log.warning("mldbg: closing %s: %s", action.describe(), e)
        return self.findings

    # one cycle --------------------------------------------------------------------------
    def cycle(self, final: bool = False) -> int:
        """Check what is new; with `final` (or once training ended) make the final pass.
        Returns the number of new records read."""
        self.start()
        found: list[Finding] = []
        new_records = 0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                new_records = self.trial.refresh()
                self._after_replacement()
                ended = self.trial.loaded_all_steps or final
                # a worker's meta is there: start, so that rules on the profiler's series
                # (max_initialization_time) run before the first tensor step
                if self.runner is None and (self.trial.workers() or ended):
                    self._begin()
                if self.runner is not None:
                    found = list(self.runner.run_available())
                    if ended:
                        found += list(self.runner.finish())
                        self.ended = True
                elif ended:
                    self.ended = True
                self.errors = 0
            except WatcherBusy:
                raise
            except Exception as e:  # a read failed (a store outage?): report, try again next cycle
                self.errors += 1
                if self.errors == 1 or self.errors % 100 == 0:
                    self.on_problem(
                        f"{type(e).__name__}: {e}" + (f" ({self.errors} times)" if self.errors > 1 else "")
                    )
                if final:
                    self.ended = True
        self._report_warnings(caught)
        self._handle(self._confirmed(found))
        return new_records

    def _confirmed(self, found: list[Finding]) -> list[Finding]:
        """Of the new findings and the suspicions held so far, those of reported diagnoses
        (judged with every finding this watcher reported before, as `mldbg.check` judges a
        finished run); the others are held. Regrouped only when something new was found."""
        if not found:
            return []
        from mldbg.rules.diagnosis import RunFacts, group, rule_causes

        pending = self.held + found
        grouped = group(
            [*self.findings, *pending],
            RunFacts.of(self.trial),
            causes_of=rule_causes(self.rules),
            chosen=self._chosen,
        )
        confirmed = grouped.reported_of(pending)
        shown = {id(f) for f in confirmed}
        self.held = [f for f in pending if id(f) not in shown]
        return confirmed

    def _after_replacement(self) -> None:
        """The run was replaced by a new one (a restart with `overwrite=True`) and the trial
        started over on it: the rules start afresh on the new run, with its own saved place and
        journal (`_begin`), so nothing of the old run's steps is mixed into its checks."""
        restarts = getattr(self.trial, "restarts", 0)
        if restarts == self._trial_restarts:
            return
        self._trial_restarts = restarts
        if self.runner is not None:
            self.runner = None
            self.ended = False

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        for action in self.actions:
            action.start(self.context)
        try:  # a stop asked before this watcher started (an earlier watcher) shows in its context
            request = markers.load(self.store, layout.STOP_REQUEST, StopRequest)
        except (OSError, MldbgError):  # damaged (CorruptRecord) or the store is away
            request = None
        if request is not None:
            self.context.stop_requested = request.reason or "a stop was requested"
        self.progress.update(None, 0, len(self.rules), 0, 0, waiting=f"waiting for {self.store.url}")

    def _begin(self) -> None:
        """The run is there: load the saved place, then start the rule runner (one per worker
        with `per_worker`, each worker's rules copied from `self.rules`)."""
        from mldbg.rules.runner import PerWorkerRunner, RuleRunner

        if self._journal is not None and self._lock is None:
            self._lock = self._journal.lock()  # WatcherBusy: another one holds this place
        self._load()
        self.runner = (PerWorkerRunner if self.per_worker else RuleRunner)(self.trial, self.rules)

    def _handle(self, found: list[Finding]) -> None:
        ctx = self.context
        last = self._checked_through()
        if last is not None:
            ctx.step = last
            ctx.steps_checked = sum(1 for s in self.trial.steps() if s <= last)
        new = []
        for f in found:
            old = f.step <= self._resume_step or (self.ended and self._resume_finished)
            if not old and finding_id(f) not in self._handed_before and finding_id(f) not in self._handed:
                new.append(f)
        if new:
            self._journal_handing(new)
        # an earlier watcher's findings reach no gated action again (their keys were restored)
        offered = [f for f in found if finding_id(f) not in self._handed_before]
        self.findings.extend(new)
        ctx.findings = self.state.findings + len(new)
        ctx.ended = self.ended
        for f in new:
            if self.on_finding is not None:
                self.on_finding(f)
        stop_before = ctx.stop_requested
        delivered = 0
        for action in self.actions:
            try:
                delivered += action(found if action.every_cycle else offered, ctx, final=self.ended)
            except Exception as e:  # every_cycle actions are not gated: never let them stop us
                self.on_problem(f"{action.describe()}: {e}")
        if new and self._journal is not None:
            self._journal.acted(self.state.run_id, new)
        if ctx.stop_requested and not stop_before:
            self.on_problem(f"asked the training to stop: {ctx.stop_requested}")
        # what was reported or delivered is saved at once; mere progress every few seconds
        urgent = bool(new) or bool(delivered) or self.ended
        moved = ctx.step is not None and ctx.step != self.state.last_step
        self.state.findings = ctx.findings
        self.state.errors += sum(1 for f in new if f.severity == "error")
        self.state.steps_checked = ctx.steps_checked
        if ctx.step is not None:
            self.state.last_step = ctx.step
        for f in found:
            self._first.setdefault(f.rule, f)
            self._counts[f.rule] = self._counts.get(f.rule, 0) + 1
        now = time.monotonic()
        if found or self.ended or now - self._status_at > STATUS_SECONDS:
            self._status_at = now
            statuses = self.rule_statuses()
            # a new status is saved at once; "checked through step N" with the next save
            if [(e["status"], e["findings"]) for e in statuses] != [
                (e.get("status"), e.get("findings")) for e in self.state.rules
            ]:
                urgent = True
            self.state.rules = statuses
        if urgent or (moved and time.monotonic() - self._saved_at > SAVE_SECONDS):
            self._save()
        if self.runner is not None:
            self._report_rule_problems()
            skipped = len(self.runner.skipped) + len(self.runner.errors)
            self.progress.update(
                ctx.step, ctx.steps_checked, len(self.rules) - skipped, skipped, ctx.findings
            )

    def rule_statuses(self) -> list[dict[str, Any]]:
        """Each rule's status now (`RuleStatus.to_dict()`), in the order of `self.rules`."""
        runner = self.runner
        errors: dict[str, str] = runner.errors if runner is not None else {}
        skipped: dict[str, str] = runner.skipped if runner is not None else {}
        steps = self.trial.steps() if runner is not None else []
        have: dict[str, list[str]] | None = None
        last = self._checked_through()
        out: list[dict[str, Any]] = []
        for rule in self.rules:
            name = rule.name
            first = self._first.get(name)
            entry: dict[str, Any] = {
                "rule": name,
                "first_finding": first.to_dict() if first is not None else None,
                "findings": self._counts.get(name, 0),
            }
            if name in errors:
                status, detail = "error", errors[name]
            elif first is not None:
                status, detail = "issues_found", ""
            elif self.ended:
                status, detail = ("skipped", skipped[name]) if name in skipped else ("no_issues_found", "")
            elif runner is None or (rule.needs_steps and not steps):
                status, detail = "waiting_for_data", f"no step saved in {self.store.url} yet"
            else:
                if have is None:
                    have = self.trial.collections()
                needs = rule.needed_collections()
                missing = [c for c in needs if not have.get(c)]
                ready = not needs or (len(missing) < len(needs) if rule.needs_any else not missing)
                if not ready:
                    which = " or ".join(missing) if rule.needs_any else ", ".join(missing)
                    plural = "s" if len(missing) > 1 and not rule.needs_any else ""
                    status, detail = (
                        "waiting_for_data",
                        f"needs the {which} collection{plural}, not saved yet",
                    )
                else:
                    status = "in_progress"
                    detail = f"checked through step {last}" if last is not None else "starting"
            entry["status"], entry["detail"] = status, detail
            out.append(entry)
        return out

    def _journal_handing(self, new: list[Finding]) -> None:
        """Write `new` into the journal before anything is printed or delivered. When it
        cannot be written (a full disk) the findings are still acted on, never held back: a
        watcher killed before its next saved place may then deliver them again."""
        for f in new:
            self._handed[finding_id(f)] = f.step
        if self._journal is None:
            return
        entries = [(f, {a.ident(): a.key(f) for a in self.actions if not a.every_cycle}) for f in new]
        try:
            self._journal.handing(self.state.run_id, entries)
        except OSError as e:
            if ("journal", "") not in self._told:
                self._told.add(("journal", ""))
                self.on_problem(
                    f"cannot write the journal {self._journal.where} ({e}): findings are delivered "
                    "anyway, and a restart before the next saved place may deliver them again"
                )

    def _checked_through(self) -> int | None:
        """The last step the runner checked (in a live run it holds back the newest step)."""
        if self.runner is None:
            return None
        last = getattr(self.runner, "last_step", None)
        if last is None:
            last = self.runner.last_step
        return int(last) if last is not None and last >= 0 else None

    # saved place ------------------------------------------------------------------------
    def _load(self) -> None:
        if self._state_file is None:
            return
        current = run_id(self.store)
        saved = self._state_file.load()
        if saved is None or (saved.run_id is not None and saved.run_id != current):
            self.state = WatchState(run_id=current)
            self._load_journal()
            return
        self.state = saved
        self.state.run_id = current
        self._resume_step = saved.last_step
        self._resume_finished = saved.finished
        for action in self.actions:
            kept = saved.actions.get(action.ident())
            if kept:
                action.restore(kept)
        self._load_journal()
        if saved.last_step >= 0:
            self.on_problem(
                f"resuming after step {saved.last_step} ({saved.findings} findings reported before; "
                f"state in {self._state_file.where})"
            )

    def _load_journal(self) -> None:
        """What an earlier watcher journaled but did not cover by its saved place: never
        printed or delivered again; each gated action takes the keys in as delivered."""
        if self._journal is None:
            return
        handed, acted = self._journal.load(self.state.run_id)
        if not handed:
            return
        self._handed_before = set(handed)
        self._handed = {i: int(e["finding"].get("step", -1)) for i, e in handed.items()}
        # counted in the saved place already unless it was saved before them
        unsaved = [
            e["finding"] for i, e in handed.items()
            if self._handed[i] > self.state.last_step and not self.state.finished
        ]  # fmt: skip
        self.state.findings += len(unsaved)
        self.state.errors += sum(1 for f in unsaved if f.get("severity", "error") == "error")
        for action in self.actions:
            keys = [e["keys"][action.ident()] for e in handed.values() if action.ident() in e.get("keys", {})]
            if keys:
                kept = action.state()
                action.restore({**kept, "seen": sorted(set(kept.get("seen", ())) | set(keys))})
        cut = [e["finding"] for i, e in handed.items() if i not in acted]
        if cut:
            shown = "; ".join(
                f"[{f.get('rule')}] step {f.get('step')}: {f.get('message')}" for f in cut[:5]
            ) + (f"; and {len(cut) - 5} more" if len(cut) > 5 else "")
            self.on_problem(
                f"the previous watcher ended while acting on {len(cut)} finding(s); they may not have "
                f"been delivered, and are not delivered again (at most once): {shown}"
            )

    def _save(self) -> None:
        if self._state_file is None or self.runner is None:
            return
        self.state.actions = {a.ident(): a.state() for a in self.actions}
        self.state.finished = self.ended
        self.state.updated = time.time()
        self._saved_at = time.monotonic()
        try:
            self._state_file.save(self.state)
        except Exception as e:
            self.on_problem(f"cannot save the watch state: {e}")
            return
        # the saved place now covers the journaled findings up to its step: they leave it
        covered = {
            i for i, step in self._handed.items() if self.state.finished or step <= self.state.last_step
        }
        if covered and self._journal is not None:
            self._handed = {i: s for i, s in self._handed.items() if i not in covered}
            self._journal.compact(self.state.run_id, set(self._handed))

    def _report_rule_problems(self) -> None:
        """Say once why a rule does not run: its data was not saved, or it failed."""
        if self.ended and not self.trial.steps():
            if ("empty", "") not in self._told:
                self._told.add(("empty", ""))
                self.on_problem(f"no step was recorded in {self.store.url}: no rule could run")
            return
        for kind, problems in (
            ("skipped", self.runner.skipped),
            ("failed and was stopped", self.runner.errors),
        ):
            for name, why in problems.items():
                if (kind, name) not in self._told:
                    self._told.add((kind, name))
                    self.on_problem(f"rule {name} {kind}: {why}")
        for damage in self.runner.corrupt:
            if ("corrupt", damage) not in self._told:
                self._told.add(("corrupt", damage))
                self.on_problem(f"skipped a damaged record: {damage}")

    def _report_warnings(self, caught: list[warnings.WarningMessage]) -> None:
        seen = set()
        for w in caught:
            text = str(w.message).removeprefix("mldbg: ")
            if text not in seen:
                seen.add(text)
                self.on_problem(text)
