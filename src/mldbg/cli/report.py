"""`mldbg report PATH -o report.html`: the training report of a run as one HTML file."""

from __future__ import annotations

import click

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
    """Write a self-contained HTML report of a run (XGBoost runs get the XGBoost report)."""
    from mldbg.cli.runs import open_run
    from mldbg.report import write_report

    open_run(path)  # a wrong path, a file, a folder of runs: said as every command says it
    try:
        target = write_report(path, output, rules=list(rules) or None, check=not no_rules)
    except MldbgError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"wrote {target}")
