"""`mldbg export-tensorboard PATH LOGDIR`: a recorded run as TensorBoard event files."""

from __future__ import annotations

import sys

import click

from mldbg.errors import MldbgError


@click.command("export-tensorboard")
@click.argument("path")
@click.argument("logdir", type=click.Path(file_okay=False))
@click.option("--no-histograms", is_flag=True, help="Scalars only: no histograms of the raw tensors.")
@click.option("--bins", type=int, default=30, show_default=True, help="Buckets per histogram.")
@click.option("--follow", is_flag=True, help="Keep exporting new steps until training ends.")
@click.option(
    "--poll", type=float, default=2.0, show_default=True, help="With --follow: seconds between looks."
)
def export_tensorboard(
    path: str, logdir: str, no_histograms: bool, bins: int, follow: bool, poll: float
) -> None:
    """Write the run at PATH as TensorBoard logs in LOGDIR: one TensorBoard run per mode
    (LOGDIR/train, LOGDIR/eval), x axis the global step; losses, scalars and saved reductions
    (name/mean, name/l2, ...) as scalars, raw tensors as histograms; a tag per worker when
    several saved a tensor. Exporting again replaces what an earlier export wrote in LOGDIR.

    \b
    Example:
      mldbg export-tensorboard runs/exp1 tb/exp1 && tensorboard --logdir tb
    """
    from mldbg.cli.runs import check_run_path, open_run
    from mldbg.insight.tensorboard import TensorBoardExport

    try:
        check_run_path(path) if follow else open_run(path)  # --follow may wait for the run
        with TensorBoardExport(path, logdir, histograms=not no_histograms, bins=bins) as export:
            counts = export.follow(poll) if follow else export.update()
            runs = export.runs
    except MldbgError as e:
        click.echo(f"mldbg export-tensorboard: error: {e}", err=True)
        sys.exit(2)
    if not runs:
        click.echo(f"nothing to export from {path}")
        return
    for run in runs:
        name = run.name
        click.echo(
            f"{run}: {counts.scalars.get(name, 0)} scalars, {counts.histograms.get(name, 0)} histograms"
        )
    click.echo(f"view with: tensorboard --logdir {logdir}")
