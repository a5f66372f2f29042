"""`mldbg status RUN`: each rule's evaluation status, as the run's watchers left it."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

EXIT_FOUND = 1  # a rule found issues (an error finding; --strict: warnings too)


@click.command("status")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per rule.")
@click.option("--strict", is_flag=True, help="Count warning findings as issues for the exit status too.")
@click.option(
    "--state",
    "state_files",
    multiple=True,
    metavar="FILE",
    help="Also read this watcher's state file (one that ran with --state FILE; repeatable).",
)
@click.option("--verbose", "-v", is_flag=True, help="List every skipped rule with why, not one summary line.")
def status(path: str, as_json: bool, strict: bool, state_files: tuple[str, ...], verbose: bool) -> None:
    """Each rule's status on the run at PATH (local or s3://), as `mldbg watch` (or `mldbg
    run`, or a hook's rules=) saves it beside the run while it checks: in progress, no issues
    found, issues found (with the first finding), error, waiting for data (with what it
    lacks), skipped (training ended without the data the rule needs: one summary line, each
    rule with its reason with --verbose). Works while the watcher runs and after. Exit status 1
    when a rule found issues.

    \b
    Example:
      mldbg watch runs/exp1 &   mldbg status runs/exp1
    """
    from mldbg.cli.runs import check_run_path, open_run
    from mldbg.watch.state import age, rule_status

    check_run_path(path)
    statuses = rule_status(path, state_files)
    if not statuses:
        open_run(path)  # no run there (a folder of runs, nothing recorded): a usage error
        click.echo(
            f"no rule status for {path}: no watcher has checked it yet (start one: mldbg watch {path})"
        )
        return
    watchers = list(dict.fromkeys(s.watcher for s in statuses))
    for s in statuses:
        if as_json:
            click.echo(json.dumps({**s.to_dict(), "watcher": s.watcher, "step": s.step,
                                   "updated": s.updated, "finished": s.finished}))  # fmt: skip
    if not as_json:
        for ident in watchers:
            mine = [s for s in statuses if s.watcher == ident]
            head = mine[0]
            state = "finished" if head.finished else "watching"
            through = f", checked through step {head.step}" if head.step is not None else ""
            click.echo(f"watcher {ident} ({state}{through}, updated {age(head.updated)} ago):")
            skips = _skips(path, [s for s in mine if s.status == "skipped"])
            left_out = {k.rule for k in skips if k.kind == "framework"}
            listed = [s for s in mine if s.status != "skipped" or verbose and s.rule not in left_out]
            width = max((len(s.rule) for s in listed), default=0)
            why = {k.rule: k for k in skips}
            for s in listed:
                line = f"  {s.rule:<{width}}  {s.words}"
                if s.first_finding is not None:
                    f = s.first_finding
                    count = f" ({s.findings} findings)" if s.findings > 1 else ""
                    line += f" at step {f.get('step')}{count}: {f.get('message')}"
                    if s.status == "error":
                        line += f"; then it failed: {s.detail}"
                elif s.rule in why:
                    skip = why[s.rule]
                    line += f": {skip.why}" + (f"; {skip.advice}" if skip.advice else "")
                elif s.detail:
                    line += f": {s.detail}"
                click.echo(line)
            if skips and not verbose:
                from mldbg.report.skips import summary

                ran = sum(1 for s in mine if s.status in ("no_issues_found", "issues_found"))
                hit = [s for s in mine if s.first_finding is not None]
                text = summary(skips, ran, len(hit), sum(s.findings for s in hit), hint="--verbose")
                click.echo(f"  {text}")
    fired = any(
        s.first_finding is not None and (strict or s.first_finding.get("severity", "error") == "error")
        for s in statuses
    )
    if fired:
        sys.exit(EXIT_FOUND)


def _skips(path: str, skipped: list[Any]) -> list[Any]:
    """The skipped rules of a watcher's status with their true reasons (`mldbg.report.skips`),
    read against the run; the saved reason stands where the run cannot be read."""
    from mldbg.report.skips import Skip, explain
    from mldbg.rules import BUILTIN

    if not skipped:
        return []
    rules = [BUILTIN[s.rule]() for s in skipped if s.rule in BUILTIN]
    try:
        from mldbg.trial import create_trial

        trial = create_trial(path)
    except Exception:
        return [Skip(s.rule, "data", s.detail) for s in skipped]
    short = {s.rule: s.detail for s in skipped if s.detail.startswith("needs ") and ", has " in s.detail}
    return explain({s.rule: s.detail for s in skipped}, rules, trial, unchecked=short)
