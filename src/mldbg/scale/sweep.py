"""Check every run of a sweep with rules, one Dask task per run: `check_runs`.

A task opens its own trial and runs the rules over it exactly as `mldbg.check` does, so a
sweep finds what a loop of `mldbg.check` would, in parallel on any Dask cluster. Rules travel
as specs (names, `(name, params)`, mappings, classes) and are built inside the task: a rule
object holds state and its trial, and one must never be shared between runs.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mldbg.errors import InvalidConfig, MldbgError, StoreError
from mldbg.scale.cluster import ClientSpec, dask_client, run_tasks
from mldbg.trial.runs import RunsSpec, find_runs

if TYPE_CHECKING:
    import pandas

    from mldbg.rules.base import Finding

RuleSpecs = Any  # None, a name, "name:k=v", (name, params), {"name": ..., k: v}, a Rule class, or a list


@dataclass
class RunOutcome:
    """What one task sends back: the findings of a run, or why it could not be read."""

    run: str
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None  # the run could not be read at all
    problems: list[str] = field(default_factory=list)  # read, but a rule failed or a file was damaged
    worker: str | None = None  # the one worker checked, or None for the whole run
    steps: int = 0
    seconds: float = 0.0


class SweepResult(dict[str, list["Finding"]]):
    """What a sweep found: a dict from each run that could be read to its findings (in the
    order the runs were given), plus

    - `errors`: run -> what went wrong, for a run that could not be read (missing, not a run,
      corrupt; it is then not a key of the dict) or that was read with a rule failing or a
      file damaged (it is a key, with what the other rules found);
    - `runs`: every run of the sweep, `status(run)`: "error", "fired" or "ok";
    - `summary()`: a pandas DataFrame, one row per run; `table()`: the same as text;
    - `seconds` (wall time of the sweep), `workers` (Dask workers it ran on), `steps` (run ->
      global steps checked).
    """

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[str] = []
        self.errors: dict[str, str] = {}
        self.steps: dict[str, int] = {}
        self.seconds = 0.0
        self.workers = 0

    @property
    def findings(self) -> dict[str, list[Finding]]:
        """Run -> findings, for the runs that could be read (the dict itself, as a plain dict)."""
        return dict(self)

    @property
    def fired(self) -> list[str]:
        """The runs where a rule fired."""
        return [r for r in self.runs if self.get(r)]

    def status(self, run: str) -> str:
        if run in self.errors:
            return "error"
        return "fired" if self.get(run) else "ok"

    def rows(self) -> list[dict[str, Any]]:
        """One dict per run: run, status, steps, findings, rules (that fired), first_finding, error."""
        out = []
        for run in self.runs:
            found = self.get(run, [])
            first = min(found, key=lambda f: f.step) if found else None
            out.append(
                {
                    "run": run,
                    "status": self.status(run),
                    "steps": self.steps.get(run, 0),
                    "findings": len(found),
                    "rules": ",".join(sorted({f.rule for f in found})),
                    "first_finding": f"[{first.rule}] step {first.step}: {first.message}" if first else "",
                    "error": self.errors.get(run, ""),
                }
            )
        return out

    def summary(self) -> pandas.DataFrame:
        """`rows()` as a pandas DataFrame, one row per run."""
        import pandas as pd

        columns = ["run", "status", "steps", "findings", "rules", "first_finding", "error"]
        return pd.DataFrame(self.rows(), columns=columns)

    def table(self, width: int = 120) -> str:
        """A text table: run, status, findings count, and the first finding (or the error),
        cut to fit `width` characters."""
        rows = [
            (r["run"], r["status"], str(r["findings"]), r["error"] or r["first_finding"]) for r in self.rows()
        ]
        head = ("run", "status", "findings", "first finding / error")
        widths = [max(len(x[i]) for x in [head, *rows]) for i in range(3)]
        lines = []
        for row in [head, *rows]:
            left = f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:>{widths[2]}}  "
            text = " ".join(row[3].split())
            room = max(20, width - len(left))
            lines.append((left + (text if len(text) <= room else text[: room - 3] + "...")).rstrip())
        return "\n".join(lines)

    def __repr__(self) -> str:
        counts = {s: sum(self.status(r) == s for r in self.runs) for s in ("fired", "ok", "error")}
        return (
            f"SweepResult({len(self.runs)} runs: {counts['fired']} fired, {counts['ok']} ok, "
            f"{counts['error']} errors, in {self.seconds:.1f} s on {self.workers} workers)"
        )


def check_runs(
    runs: RunsSpec,
    rules: RuleSpecs = None,
    client: ClientSpec = None,
    start_step: int | None = None,
    end_step: int | None = None,
    *,
    n_workers: int | None = None,
    progress: bool = False,
    per_worker: bool = False,
) -> SweepResult:
    """Run rules over every run of a sweep, one Dask task per run, and return run -> findings.

    `runs`: paths or URLs, glob patterns (`sweeps/lr_*`), or folders / `s3://bucket/prefix/`
    holding many runs (see `find_runs`). `rules` as `mldbg.check` takes them (None: the
    default set), as names, `"name:k=v"`, `(name, params)` or `{"name": ..., **params}`, or
    Rule classes, never rule objects. `client`: a `distributed.Client` or a scheduler address;
    None uses the current client, or a local cluster of `n_workers` processes (default: one
    per core) started for this call and closed after it. A run that cannot be read is reported
    in `result.errors` and the others are still checked. `progress` shows a bar on stderr.

    `per_worker`: check each worker of a run written by several (the ranks of a distributed
    job) on its own, in its own task, as `mldbg.check(run, per_worker=True)` does, and tag the
    findings with `Finding.worker`. Without it a run is checked as `mldbg.check` does, where
    the rules read each step from its first worker only.
    """
    specs = rule_specs(rules)
    found, unmatched = find_runs(runs)
    result = SweepResult()
    result.runs = found + list(unmatched)
    result.errors.update(unmatched)
    start = time.perf_counter()
    if found:
        split = workers_of(found) if per_worker else {}
        tasks: list[tuple[str, str | None]] = []  # (run, one worker of it or None)
        for run in found:
            several = split.get(run, [])
            tasks += [(run, w) for w in several] if len(several) > 1 else [(run, None)]
        with dask_client(client, n_workers=n_workers, jobs=len(tasks)) as c:
            result.workers = len(c.nthreads())
            outcomes = run_tasks(
                c, _check_run, [r for r, _ in tasks], [w for _, w in tasks], progress=progress,
                desc="checking", rules=specs, start_step=start_step, end_step=end_step,
            )  # fmt: skip
        by_run: dict[str, list[RunOutcome]] = {}
        for (run, worker), (outcome, failure) in zip(tasks, outcomes, strict=True):
            if failure is not None:  # the task itself died: a lost worker, ...
                where = run if worker is None else f"{run} ({worker})"
                msg = f"the Dask task checking {where} failed: {type(failure).__name__}: {failure}"
                outcome = RunOutcome(run, error=msg, worker=worker)
            by_run.setdefault(run, []).append(outcome)
        for run in found:
            _merge(result, run, by_run[run])
    result.seconds = time.perf_counter() - start
    return result


def _merge(result: SweepResult, run: str, outcomes: list[RunOutcome]) -> None:
    """One run's outcomes (one, or one per worker) into the result."""
    read = [o for o in outcomes if o.error is None]
    problems = [
        (f"{o.worker}: " if o.worker else "") + p
        for o in outcomes
        for p in ([o.error] if o.error is not None else o.problems)
    ]
    if read:
        result[run] = [f for o in read for f in o.findings]
        result.steps[run] = max(o.steps for o in read)
    if problems:
        result.errors[run] = "; ".join(problems)


def workers_of(runs: list[str]) -> dict[str, list[str]]:
    """run -> the workers that wrote it (one listing per run, in parallel for remote stores)."""
    from mldbg.store import open_store
    from mldbg.trial.worker_view import run_workers

    def workers(run: str) -> list[str]:
        try:
            store = open_store(run)
        except Exception:  # an unreadable location: its check reports it
            return []
        try:
            return run_workers(store)
        except (OSError, StoreError):
            return []
        finally:
            store.close()

    remote = any("://" in r for r in runs)
    with ThreadPoolExecutor(16 if remote else 1) as pool:
        return dict(zip(runs, pool.map(workers, runs), strict=True))


def rule_specs(rules: RuleSpecs) -> list[Any] | None:
    """Rule specs in a form that pickles and that `mldbg.check` takes, checked here (unknown
    names and parameters fail now, not in every task)."""
    if rules is None:
        return None
    if isinstance(rules, Mapping) and "name" not in rules:  # {rule_name: {params}}
        rules = [{"name": k, **(v or {})} for k, v in rules.items()]
    elif isinstance(rules, (str, Mapping, type)) or _is_pair(rules):
        rules = [rules]
    specs: list[Any] = []
    for spec in rules:
        if _is_pair(spec):
            specs.append({"name": spec[0], **spec[1]})
        elif isinstance(spec, Mapping):
            specs.append(dict(spec))
        elif isinstance(spec, (str, type)):
            specs.append(spec)
        else:
            raise InvalidConfig(
                f"rule {spec!r}: a sweep takes rule names, 'name:k=v', (name, params), "
                "{'name': ..., k: v} or Rule classes, built anew for each run; not rule objects"
            )
    from mldbg.rules.specs import resolve_rules

    resolve_rules(copy.deepcopy(specs), None)
    return specs


def _is_pair(spec: Any) -> bool:
    return (
        isinstance(spec, tuple)
        and len(spec) == 2
        and isinstance(spec[0], str)
        and isinstance(spec[1], Mapping)
    )


def _check_run(
    run: str,
    worker: str | None,
    rules: list[Any] | None,
    start_step: int | None,
    end_step: int | None,
) -> RunOutcome:
    """The task: check one run (or one worker of it, its findings tagged with the worker) as
    `mldbg.check` would, and say what went wrong instead of raising."""
    from mldbg.rules.runner import RuleRunner
    from mldbg.trial import create_trial

    began = time.perf_counter()
    outcome = RunOutcome(run, worker=worker)
    try:
        trial = create_trial(run, worker=worker, missing_ok=True)  # reported below
        if not trial.steps() and not trial.workers():
            outcome.error = f"no recorded run at {run} (nothing written there; is the path right?)"
            return outcome
        runner = RuleRunner(trial, copy.deepcopy(rules), start_step=start_step, end_step=end_step)
        outcome.findings = runner.run_available() + runner.finish()
        outcome.steps = len(trial.steps())
    except MldbgError as e:
        outcome.error = str(e)
        return outcome
    except OSError as e:
        outcome.error = f"cannot read {run}: {e}"
        return outcome
    except Exception as e:  # never let one run stop the sweep
        outcome.error = f"checking {run} failed: {type(e).__name__}: {e}"
        return outcome
    finally:
        outcome.seconds = time.perf_counter() - began
    outcome.problems = [f"rule {name} failed: {err}" for name, err in runner.errors.items()]
    outcome.problems += [f"damaged file skipped: {what}" for what in runner.corrupt]
    return outcome


__all__ = ["RunOutcome", "SweepResult", "check_runs", "rule_specs"]
