"""`mldbg sweep PATTERN_OR_PATH...`: check every run of a sweep on Dask; exit 1 if any rule
fired, 2 if a run could not be read."""

from __future__ import annotations

import shutil
import sys
from typing import NoReturn

import click

from mldbg.cli.check import STRICT_HELP, collect_rule_specs, echo_finding, failing
from mldbg.errors import MldbgError, RunNotFound


def _fail(message: str) -> NoReturn:
    click.echo(f"mldbg sweep: error: {' '.join(message.split())}", err=True)
    sys.exit(2)


def _refuse_if_none_exists(runs: tuple[str, ...]) -> None:
    """When every input is a local path that does not exist or is a file, refuse at once (no
    Dask cluster started), as `mldbg check` does; one bad path among good ones is reported in
    the table with the others."""
    from mldbg.cli.runs import check_run_path

    why = []
    for run in runs:
        if any(c in "*?[" for c in run):  # a pattern: matching nothing is said after the search
            return
        try:
            check_run_path(run)
        except RunNotFound as e:
            why.append(str(e))
        else:
            return
    if why:
        raise RunNotFound("; ".join(why))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


@click.command("sweep")
@click.argument("runs", nargs=-1, required=True, metavar="PATTERN_OR_PATH...")
@click.option("--rule", "-r", "rules", multiple=True, metavar="NAME[:k=v,...]",
              help="A rule to run, with parameters (repeatable); without --rule or --config, the default set.")  # fmt: skip
@click.option("--config", "config", type=click.Path(dir_okay=False), metavar="RULES.yaml",
              help="Rules from a YAML or JSON file, as for `mldbg check`.")  # fmt: skip
@click.option("--scheduler", metavar="ADDRESS",
              help="A running Dask scheduler (tcp://host:8786). Default: $DASK_SCHEDULER_ADDRESS, "
                   "else a local cluster started for this command.")  # fmt: skip
@click.option("--workers", "-w", "n_workers", type=click.IntRange(min=1),
              help="Worker processes of the local cluster (default: one per core).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="One JSON object per finding, with a 'run' field.")
@click.option("--start-step", type=int, default=None, help="First global step to check.")
@click.option("--end-step", type=int, default=None, help="Stop before this global step.")
@click.option(
    "--progress/--no-progress", default=None, help="A progress bar on stderr (default: on a terminal)."
)
@click.option("--per-worker", is_flag=True,
              help="Check each worker of a multi-worker run on its own (the rules otherwise read the first).")  # fmt: skip
@click.option("--verbose", "-v", is_flag=True, help="After the table, every finding of every run in full.")
@click.option("--strict", is_flag=True, help=STRICT_HELP)
def sweep(
    runs: tuple[str, ...],
    rules: tuple[str, ...],
    config: str | None,
    scheduler: str | None,
    n_workers: int | None,
    as_json: bool,
    start_step: int | None,
    end_step: int | None,
    progress: bool | None,
    per_worker: bool,
    verbose: bool,
    strict: bool,
) -> None:
    """Check every run of a sweep with rules, in parallel on Dask, and print one line per run.

    Each PATTERN_OR_PATH is a run (a directory or s3://bucket/prefix), a glob pattern, or a
    folder / s3:// prefix whose sub-folders are runs. Exit status: 1 if a rule found an error
    in any run (with --strict also a warning), 0 if not, 2 if a run could not be read
    (missing, corrupt) or a rule failed.

    \b
    Examples:
      mldbg sweep sweeps/lr/                      # every run below sweeps/lr/
      mldbg sweep 'sweeps/lr_*' --rule exploding_tensor --json
      mldbg sweep s3://bucket/sweeps/lr/ --scheduler tcp://10.0.0.5:8786
    """
    if scheduler and n_workers:
        raise click.UsageError(
            "--workers sizes a local cluster; with --scheduler the cluster is already there"
        )
    from mldbg.scale import check_runs

    try:
        specs = collect_rule_specs(rules, config)
        _refuse_if_none_exists(runs)
        result = check_runs(
            list(runs), specs or None, client=scheduler, start_step=start_step, end_step=end_step,
            n_workers=n_workers, progress=sys.stderr.isatty() if progress is None else progress,
            per_worker=per_worker,
        )  # fmt: skip
    except MldbgError as e:
        _fail(str(e))
        return
    except OSError as e:  # the --config file
        _fail(str(e))
        return
    if not result:  # not one run could be read: a usage error, said once, without a table
        _fail("; ".join(f"{run}: {why}" for run, why in result.errors.items()) or "no run to check")
    if as_json:
        for run, found in result.items():
            for f in found:
                echo_finding(f, True, run=run, **({"worker": f.worker} if f.worker else {}))
    else:
        click.echo(result.table(width=max(100, shutil.get_terminal_size().columns)))
        if verbose:
            for run, found in result.items():
                if found:
                    click.echo(f"\n{run}:")
                    for f in found:
                        echo_finding(f, False)
    for run, why in result.errors.items():
        click.echo(f"mldbg sweep: error: {run}: {why}", err=True)
    fired = result.fired
    clean = sum(result.status(r) == "ok" for r in result.runs)
    rate = len(result.runs) / result.seconds if result.seconds > 0 else 0.0
    click.echo(
        f"{_count(len(result.runs), 'run')}: {len(fired)} with findings, {clean} clean, "
        f"{_count(len(result.errors), 'error')}; checked in {result.seconds:.1f} s on "
        f"{_count(result.workers, 'Dask worker')} ({rate:.1f} runs/s)",
        err=True,
    )
    if result.errors:
        sys.exit(2)
    sys.exit(1 if any(failing(found, strict) for _, found in result.items()) else 0)
