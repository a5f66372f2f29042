"""`mldbg export RUN csv|parquet -o FILE`: a run's values as a table (`trial.to_pandas`)."""

from __future__ import annotations

from pathlib import Path

import click

from mldbg.cli.choice import Choice
from mldbg.errors import InvalidConfig, MldbgError


@click.command("export")
@click.argument("path")
@click.argument("format", type=Choice(["csv", "parquet"], case_sensitive=False), metavar="FORMAT")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="The file to write.")
@click.option("--regex", multiple=True, help="Only tensors whose name matches (repeatable).")
@click.option("--collection", default=None, help="Only the tensors of this collection.")
@click.option("--mode", default=None, help="Only the steps of this mode (train, eval, predict).")
@click.option(
    "--reductions",
    default=None,
    help="Comma-separated reductions (mean,l2,abs_mean...): one row per reduction, for tensors of "
    "any shape. Without it, every selected tensor must hold one number (losses, scalars); "
    "with no --regex and no --collection either, the one-number series, and one line on what was left out.",
)
def export(
    path: str,
    format: str,
    output: str,
    regex: tuple[str, ...],
    collection: str | None,
    mode: str | None,
    reductions: str | None,
) -> None:
    """Write the run at PATH as a tidy table in FORMAT (csv or parquet): one row per tensor,
    step, worker (and reduction), columns step, mode, mode_step, worker, tensor[, reduction],
    value.

    \b
    Examples:
      mldbg export runs/exp1 csv -o losses.csv --collection losses
      mldbg export runs/exp1 parquet -o grads.parquet --collection gradients --reductions l2,abs_mean
    """
    from mldbg.cli.runs import open_run
    from mldbg.trial.frame import NotOneNumber, left_out_line, to_pandas

    trial = open_run(path)
    left_out: list[str] = []
    try:
        frame = to_pandas(
            trial,
            regex=list(regex) or None,
            collection=collection,
            mode=mode,
            reductions=None if reductions is None else [r for r in reductions.split(",") if r.strip()],
            left_out=left_out,
        )
    except NotOneNumber as e:  # said in the options of the command line, not the Python API
        raise InvalidConfig(
            f"tensor {e.name!r} of {path} {e.why}: give --reductions mean,l2,... for one row per "
            "reduction, or export only one-number tensors with --collection losses (or --regex); "
            f"see its values with: mldbg show {path} {e.name}"
        ) from None
    if frame.empty and left_out:
        raise InvalidConfig(
            f"nothing to export without --reductions: every tensor of {path} holds more than one number "
            f"({len(left_out)} tensors); give --reductions mean,l2 (with --regex NAME or --collection NAME)"
        )
    if frame.empty:
        raise InvalidConfig(
            f"nothing to export: no saved tensor of {path} matches the selection "
            "(--regex, --collection, --mode); list them with: mldbg ls " + path
        )
    out = Path(output)
    if format.lower() == "parquet":
        import importlib.util

        if importlib.util.find_spec("pyarrow") is None:  # pandas writes parquet through it
            raise MldbgError(
                "writing parquet needs pyarrow, which is not installed: pip install pyarrow "
                "(or mldbg[tables]), or export csv"
            )
        frame.to_parquet(out, index=False)
    else:
        frame.to_csv(out, index=False)
    click.echo(f"{out}: {len(frame)} rows, {frame['tensor'].nunique()} tensors")
    if left_out:  # no selection: the one-number series; what was left out, in one line
        how = f"--regex NAME --reductions mean,l2 (or --collection weights --reductions l2); list them with: mldbg ls {path}"
        click.echo(left_out_line(left_out, how), err=True)
