"""`mldbg report PATH -o report.html`: the training report of a run as one HTML file."""

from __future__ import annotations

import click

from mldbg.cli.main import fail
from mldbg.errors import MldbgError


@click.command()
@click.argument("path")
@click.option(
    "--output", "-o", default="report.html", show_default=True, help="Where to write the HTML file."
)
@click.option(
    "--rule", "rules", multiple=True, metavar="NAME[:k=v,...]",
    help="Rules whose findings the report shows (repeatable; default: the default rule set).",
)  # fmt: skip
@click.option("--no-rules", is_flag=True, help="Do not run the rules.")
def report(path: str, output: str, rules: tuple[str, ...], no_rules: bool) -> None:
    """Write a self-contained HTML report of a run (XGBoost runs get the XGBoost report).

    A run with damaged files is reported around them: what can be read is shown, each damaged
    file and record is named in the report's "Damaged data" section, and the command says so
    once on stderr and exits 2 (the report is written, but it is not the whole run)."""
    import warnings
    from pathlib import Path

    from mldbg.cli.runs import open_run
    from mldbg.report.training import render

    with warnings.catch_warnings():  # files skipped are named in the report, and said once below
        warnings.filterwarnings("ignore", message="mldbg: skipping", category=RuntimeWarning)
        trial = open_run(path, on_corrupt="skip")  # a wrong path, a file, a folder of runs: as every command
    try:
        done = render(trial, rules=list(rules) or None, check=not no_rules)
    except MldbgError as e:
        raise click.ClickException(str(e)) from None
    target = Path(output)
    target.write_text(done.html, encoding="utf-8")
    click.echo(f"wrote {target}")
    if done.damaged:
        n = len(done.damaged)
        fail(
            "report",
            f"{path}: {n} damaged file{'s' if n > 1 else ''} or record{'s' if n > 1 else ''}, left out of "
            f"the report and named in its Damaged data section ({target}); the first: {next(iter(done.damaged))}",
        )
