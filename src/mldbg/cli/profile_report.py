"""`mldbg profile-report PATH -o profile.html`: the profiler's HTML report of a run."""

from __future__ import annotations

import click


@click.command("profile-report")
@click.argument("path")
@click.option("-o", "--output", default="profile.html", show_default=True, help="The HTML file to write.")
@click.option(
    "--rule",
    "rules",
    multiple=True,
    metavar="NAME[:k=v,...]",
    help="Parameters for a profiler rule, e.g. step_outlier:n_outliers=5 (repeatable).",
)
def profile_report(path: str, output: str, rules: tuple[str, ...]) -> None:
    """Write a self-contained HTML report of the profiler data of the run at PATH: job
    summary, system usage, step durations and phases, top operators, and the profiler rules."""
    from mldbg.cli.runs import check_run_path, open_run
    from mldbg.profiler.read import ProfilerData
    from mldbg.report.profiler import write_report

    check_run_path(path)  # a wrong path is not a run without profiler data
    data = ProfilerData(path)
    if not data.has_data:
        open_run(path)  # nothing recorded there at all: say that, not "no profiler data"
        raise click.ClickException(
            f"no profiler data in {data.path}: record with profiler_config=mldbg.ProfilerConfig() on the hook"
        )
    out = write_report(data, output, rules=list(rules))
    click.echo(f"wrote {out}")
