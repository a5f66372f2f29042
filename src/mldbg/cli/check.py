"""`mldbg check PATH`: run rules over a recorded run; exit 1 if any fired, 2 on errors."""

from __future__ import annotations

import bisect
import json
import sys
from typing import TYPE_CHECKING, Any

import click

from mldbg.errors import InvalidConfig, MldbgError

if TYPE_CHECKING:
    from mldbg.rules.diagnosis import Diagnoses


def _fail(message: str) -> None:
    click.echo(f"mldbg check: error: {message}", err=True)
    sys.exit(2)


JSON_KEYS = ("rule", "step", "mode", "message", "tensors", "suggestion", "severity")
STRICT_HELP = (
    "Exit 1 on warnings too (findings that depend on the machine: the profiler rules); "
    "without it only errors (defects of the model, data or training) do."
)


def failing(findings: list[Any], strict: bool) -> list[Any]:
    """The findings that make a command exit 1: errors, and with `strict` warnings too."""
    return [f for f in findings if strict or getattr(f, "severity", "error") == "error"]


def collect_rule_specs(rules: tuple[str, ...], config: str | None) -> list[Any]:
    """The rule specs of `--rule NAME[:k=v,...]` options and a `--config` file (shared by `sweep`)."""
    from mldbg.rules.specs import load_rule_config

    return list(rules) + (load_rule_config(config) if config else [])


def echo_finding(finding: Any, as_json: bool, **extra: Any) -> None:
    """Print a finding as text, or as one JSON object (with `extra` fields first, e.g. the run);
    a finding on one worker of a run (`--per-worker`) names it."""
    worker = getattr(finding, "worker", None)
    if as_json:
        fields = {k: getattr(finding, k) for k in JSON_KEYS}
        click.echo(json.dumps({**extra, **fields, **({"worker": worker} if worker else {})}))
    else:
        click.echo(f"{worker}: {finding}" if worker else str(finding))


def diagnoses_of(findings: list[Any], trial: Any, specs: Any = None) -> Diagnoses:
    """The findings grouped into diagnoses, with the facts of `trial` (the run they came from)."""
    from mldbg.rules.diagnosis import RunFacts, group, rule_causes
    from mldbg.rules.specs import chosen_rules

    return group(
        findings,
        RunFacts.of(trial) if findings else None,
        causes_of=rule_causes(specs),
        chosen=chosen_rules(specs),
    )


def echo_unconfirmed(suspicions: list[Any], command: str = "check") -> None:
    """The findings of suspicions (`Diagnoses.unconfirmed`: one finding of a rule that alone is
    wrong as often as right) on stderr, one line each: listed, not counted."""
    for f in suspicions:
        where = f"step {f.step}" + (f" ({f.mode})" if f.mode else "")
        click.echo(
            f"mldbg {command}: unconfirmed (a lone finding of a rule below the reporting bar, not "
            f"counted): [{f.rule}] {where}: {f.message}",
            err=True,
        )


def echo_diagnosis(diagnosis: Any, as_json: bool, **extra: Any) -> None:
    """Print a diagnosis with its findings indented below it, or as one JSON object
    (`Diagnosis.to_dict()`, with `extra` fields first)."""
    if as_json:
        click.echo(json.dumps({**extra, **diagnosis.to_dict()}))
    else:
        click.echo(str(diagnosis))


def echo_unchecked(name: str, why: str, as_json: bool) -> None:
    """A rule that had too little data to judge: never silent. In JSON its own object,
    `{"unchecked": rule, "why": ...}`, that no reader can take for a finding."""
    if as_json:
        click.echo(json.dumps({"unchecked": name, "why": why}))
    else:
        click.echo(f"mldbg check: {name} could not judge: {why}", err=True)


def explained_skips(runner: Any, trial: Any, specs: Any = None, how: str | None = None) -> list[Any]:
    """The runner's skipped rules with their true reasons (`mldbg.report.skips`)."""
    from mldbg.report.skips import explain

    return explain(runner.skipped, runner.rules, trial, how=how, unchecked=runner.unchecked)


def _default_named(specs: Any) -> bool:
    return any(s == "default" for s in specs or ())


def _list_rules() -> None:
    from mldbg.rules import BUILTIN

    for name, cls in sorted(BUILTIN.items()):
        doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        params = ", ".join(f"{k}={v!r}" for k, v in cls.parameters().items())
        flag = "" if cls.default else " (not in the default set)"
        click.echo(f"{name}{flag}\n    {doc}\n    parameters: {params or 'none'}")


def _in_range(steps: Any, start_step: int | None, end_step: int | None) -> int:
    """How many of `steps` (sorted: a list, or an array) --start-step and --end-step select."""
    lo = 0 if start_step is None else bisect.bisect_left(steps, start_step)
    hi = len(steps) if end_step is None else bisect.bisect_left(steps, end_step)
    return max(0, hi - lo)


def _steps(trial: Any) -> Any:
    """The run's global steps, sorted, as the columns' shared array (no list of 10^6 ints)."""
    from mldbg.trial.columns import Columns

    return Columns.of(trial).steps()


def _check_range(trial: Any, start_step: int | None, end_step: int | None) -> None:
    """Refuse --start-step/--end-step that select no step of a finished run (or none at all):
    "0 findings" there would say the run is healthy when nothing was checked."""
    if start_step is not None and end_step is not None and end_step <= start_step:
        raise InvalidConfig(
            f"--end-step {end_step} is not after --start-step {start_step}: the steps checked are "
            "start <= step < end"
        )
    steps = _steps(trial)
    if len(steps) and not _in_range(steps, start_step, end_step) and trial.loaded_all_steps:
        given = " ".join(
            f"--{k}-step {v}" for k, v in (("start", start_step), ("end", end_step)) if v is not None
        )
        raise InvalidConfig(
            f"{given} selects no step of {trial.path}: its steps are {int(steps[0])}..{int(steps[-1])} (global steps)"
        )


@click.command("check")
@click.argument("path", required=False)
@click.option("--rule", "-r", "rules", multiple=True, metavar="NAME[:k=v,...]",
              help="A rule to run, with parameters (repeatable; 'default' is the default set). "
                   "Without --rule or --config, the default set runs.")  # fmt: skip
@click.option("--config", "config", type=click.Path(dir_okay=False), metavar="RULES.yaml",
              help="Rules from a YAML or JSON file: a list of names / {name: ..., k: v}, or {name: {k: v}}.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per diagnosis on stdout, its findings inside (with --findings: per finding).")  # fmt: skip
@click.option("--findings", "flat", is_flag=True,
              help="List the findings flat, as the rules made them, instead of grouped into diagnoses.")  # fmt: skip
@click.option("--start-step", type=int, default=None, help="First global step to check.")
@click.option("--end-step", type=int, default=None, help="Stop before this global step.")
@click.option("--list", "list_rules", is_flag=True, help="List the built-in rules and their parameters.")
@click.option("--per-worker", is_flag=True,
              help="Check each worker of a multi-worker run on its own (the rules otherwise read the first).")  # fmt: skip
@click.option("--verbose", "-v", is_flag=True, help="Say why each skipped rule was skipped.")
@click.option("--strict", is_flag=True, help=STRICT_HELP)
def check(
    path: str | None,
    rules: tuple[str, ...],
    config: str | None,
    as_json: bool,
    flat: bool,
    start_step: int | None,
    end_step: int | None,
    list_rules: bool,
    per_worker: bool,
    verbose: bool,
    strict: bool,
) -> None:
    """Run rules over the run recorded at PATH (a directory or s3://bucket/prefix).

    Prints the diagnoses: one per root cause (the learning rate is too high, the inputs are
    not normalized...), with how sure it is and why, and one advice; below each, the findings it
    explains (the tensors, the numbers that crossed the line, from which step). --findings
    lists the findings flat instead, each with its rule's own advice. Exit status: 1 if a rule found an error (a defect of the model,
    data or training; with --strict also a warning: what depends on the machine, such as the
    profiler rules), 0 if not, 2 on a usage error (a bad path, config, rule or parameter).

    \b
    Examples:
      mldbg check ./run
      mldbg check ./run --rule dead_relu --rule loss_not_decreasing:num_steps=20
      mldbg check ./run --config rules.yaml --json
      mldbg check ./ddp_run --per-worker       # every rank of a distributed job on its own
      mldbg check ./run --findings             # the findings flat, each with its own advice
    """
    if list_rules:
        _list_rules()
        return
    if not path:
        _fail("give the PATH of a recorded run (or --list to see the rules)")
    from mldbg.cli.runs import open_run
    from mldbg.rules.runner import PerWorkerRunner, RuleRunner

    specs: list[Any] = list(rules)
    try:
        specs = collect_rule_specs(rules, config)
        trial = open_run(str(path))
        _check_range(trial, start_step, end_step)
        cls = PerWorkerRunner if per_worker else RuleRunner
        runner = cls(trial, specs or None, start_step=start_step, end_step=end_step)
        findings = runner.run_available() + runner.finish()
    except MldbgError as e:
        _fail(str(e))
        return
    except OSError as e:
        _fail(f"cannot read {path}: {e}")
        return
    try:
        diagnoses = diagnoses_of(findings, trial, specs)
    except MldbgError as e:
        _fail(str(e))
        return
    findings = diagnoses.reported_of(findings)
    if flat:
        for f in findings:
            echo_finding(f, as_json)
    else:
        for i, d in enumerate(diagnoses):
            if i and not as_json:
                click.echo("")
            echo_diagnosis(d, as_json)
    echo_unconfirmed([f for d in getattr(diagnoses, "unconfirmed", []) for f in d.findings])
    unchecked = runner.unchecked
    for name, why in unchecked.items():  # each said, with its counts: never silent
        echo_unchecked(name, why, as_json)
    skips = [s for s in explained_skips(runner, trial, specs) if s.kind != "short"]
    if verbose or specs:
        from mldbg.report.skips import reasons

        asked = (
            {s.rule for s in skips if s.kind == "framework"} if specs and not _default_named(specs) else set()
        )
        for line in reasons(skips) + [f"{s.rule} skipped: {s.why}" for s in skips if s.rule in asked]:
            click.echo(f"mldbg check: {line}", err=True)
    for name, err in runner.errors.items():
        click.echo(f"mldbg check: error: rule {name} failed: {err}", err=True)
    if not as_json:
        from mldbg.report.skips import summary

        ran = len(runner.rules) - len(runner.skipped)
        fired = len({f.rule for f in findings})
        split = getattr(runner, "runners", None)  # the workers checked on their own
        warnings = sum(f.severity != "error" for f in findings)
        causes = f"{len(diagnoses)} diagnos{'es' if len(diagnoses) != 1 else 'is'}; " if diagnoses else ""
        steps = _in_range(_steps(trial), start_step, end_step)
        shown = [s for s in skips if s.kind != "framework"] if not (verbose or specs) else []
        where = f"over {steps} step{'s' if steps != 1 else ''} of {path}"
        if split:
            where += f" ({len(split)} workers, each on its own)"
        head, _, tail = summary(shown, ran, fired, len(findings), where).partition("; ")
        click.echo(
            f"mldbg check: {causes}{head}"
            + (f"; {warnings} warning{'s' if warnings != 1 else ''} (machine-dependent"
               f"{', counted: --strict' if strict else ', not counted without --strict'})"
               if warnings else "")
            + (f"; {tail}" if tail else ""),
            err=True,
        )  # fmt: skip
    damaged = runner.corrupt
    if damaged:
        first, rule = next(iter(damaged.items()))
        files = {what.split(": ", 1)[0] for what in damaged}  # each message starts with its file
        more = f" ({len(files) - 1} more damaged files)" if len(files) > 1 else ""
        click.echo(
            f"mldbg check: error: the rules skipped damaged data: {first}{more}, met by {rule}; "
            "the findings leave those steps out: restore the file from a copy of the run, or rerun",
            err=True,
        )
    if runner.errors or damaged:
        sys.exit(2)
    sys.exit(1 if failing(findings, strict) else 0)
