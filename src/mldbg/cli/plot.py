"""`mldbg plot PATH KIND [NAME] -o out.html`: one insight plot of a recorded run as a file."""

from __future__ import annotations

import sys
from typing import Any

import click

from mldbg.errors import MldbgError

KINDS = ("distribution", "histograms", "tsne", "saliency", "confusion")


@click.command()
@click.argument("path")
@click.argument("kind", type=click.Choice(KINDS))
@click.argument("name", required=False)
@click.option("--step", "steps", type=int, multiple=True,
              help="Step (global, or of --mode). tsne, saliency, confusion: default the last saved; "
                   "histograms: repeat for several (default: up to 12 spread over the run).")  # fmt: skip
@click.option("--mode", type=click.Choice(["train", "eval", "predict"]), default=None,
              help="Only this mode's steps; --step counts that mode's steps.")  # fmt: skip
@click.option("--worker", default=None, help="The worker whose values to plot (default: the first).")
@click.option(
    "--labels", default=None, help="tsne: the tensor with the labels (default: the labels collection)."
)
@click.option(
    "--gradient", default=None, help="saliency: the input gradient's tensor (default: gradient/NAME)."
)
@click.option("--samples", type=int, default=4, show_default=True, help="saliency: how many samples.")
@click.option("--style", type=click.Choice(["ridge", "slider"]), default="ridge", show_default=True,
              help="histograms: stacked, or one at a time with a step slider.")  # fmt: skip
@click.option("--slider", is_flag=True, help="confusion: add a step slider.")
@click.option(
    "--output", "-o", default=None, help="Where to write: .html (default KIND.html), or .png with kaleido."
)
def plot(
    path: str,
    kind: str,
    name: str | None,
    steps: tuple[int, ...],
    mode: str | None,
    worker: str | None,
    labels: str | None,
    gradient: str | None,
    samples: int,
    style: str,
    slider: bool,
    output: str | None,
) -> None:
    """Plot a recorded run: a tensor's DISTRIBUTION over steps, its HISTOGRAMS at some steps,
    the TSNE of a layer's activations coloured by label, SALIENCY maps of the inputs, or the
    CONFUSION matrix of labels and predictions. Writes a self-contained HTML file.

    \b
    Examples:
      mldbg plot runs/exp1 distribution fc1.weight -o fc1.html
      mldbg plot runs/exp1 histograms gradient/fc1.weight --step 0 --step 50
      mldbg plot runs/exp1 tsne relu1_output_0 --mode eval
      mldbg plot runs/exp1 saliency model_input_0 --step 10
      mldbg plot runs/exp1 confusion --mode eval --slider
    """
    from mldbg import insight
    from mldbg.cli.runs import check_run_path

    try:
        check_run_path(path)
        fig = _figure(path, kind, name, steps, mode, worker, labels, gradient, samples, style, slider)
        target = insight.save(fig, output or f"{kind}.html")
    except MldbgError as e:
        click.echo(f"mldbg plot: error: {e}", err=True)
        sys.exit(2)
    click.echo(f"wrote {target}")


def _figure(
    path: str, kind: str, name: str | None, steps: tuple[int, ...], mode: str | None,
    worker: str | None, labels: str | None, gradient: str | None, samples: int, style: str, slider: bool,
) -> Any:  # fmt: skip
    """The figure of one `mldbg plot` invocation."""
    from mldbg import insight
    from mldbg.errors import InvalidConfig
    from mldbg.insight.data import open_trial

    trial = open_trial(path)
    if len(steps) > 1 and kind != "histograms":
        raise InvalidConfig(f"mldbg plot {kind} takes one --step, got {len(steps)}")
    step = steps[0] if steps else None
    if kind == "saliency":
        name = name or "model_input_0"
        return insight.saliency(trial, step, name, gradient, mode=mode, worker=worker, samples=samples)
    if kind == "confusion":
        return insight.confusion(trial, step=step, mode=mode, slider=slider)
    if not name:
        raise InvalidConfig(f"mldbg plot {kind} needs a tensor NAME (see: mldbg ls {path})")
    if kind == "distribution":
        return insight.distribution(trial, name, mode=mode, worker=worker)
    if kind == "histograms":
        return insight.histograms(
            trial, name, steps=list(steps) or None, mode=mode, worker=worker, style=style
        )
    return insight.tsne(trial, name, step, labels=labels, mode=mode, worker=worker)
