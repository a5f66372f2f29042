"""`mldbg plot PATH KIND [NAME]... -o out.html`: insight plots of a recorded run as files; several
pages written into one folder share one plotly.min.js."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import click

from mldbg.cli.choice import Choice
from mldbg.errors import MldbgError

KINDS = ("distribution", "histograms", "tsne", "saliency", "confusion")


@click.command()
@click.argument("path")
@click.argument("kind", type=Choice(KINDS), metavar="KIND")
@click.argument("names", nargs=-1)
@click.option("--step", "steps", type=int, multiple=True,
              help="Step (global, or of --mode). tsne, saliency, confusion: default the last saved; "
                   "histograms: repeat for several (default: up to 12 spread over the run).")  # fmt: skip
@click.option("--mode", type=Choice(["train", "eval", "predict"]), default=None,
              help="Only this mode's steps; --step counts that mode's steps.")  # fmt: skip
@click.option("--worker", default=None, help="The worker whose values to plot (default: the first).")
@click.option(
    "--labels", default=None, help="tsne: the tensor with the labels (default: the labels collection)."
)
@click.option(
    "--gradient", default=None, help="saliency: the input gradient's tensor (default: gradient/NAME)."
)
@click.option("--samples", type=int, default=4, show_default=True, help="saliency: how many samples.")
@click.option("--style", type=Choice(["ridge", "slider"]), default="ridge", show_default=True,
              help="histograms: stacked, or one at a time with a step slider.")  # fmt: skip
@click.option("--slider", is_flag=True, help="confusion: add a step slider.")
@click.option("--output", "-o", default=None,
              help="Where to write: .html (default KIND.html), or .png with kaleido; with several "
                   "NAMEs, or a folder (an existing one, or ending in /), one KIND-NAME.html per "
                   "NAME in that folder.")  # fmt: skip
@click.option("--plotlyjs", type=Choice(["inline", "shared"]), default=None,
              help="inline: plotly.js (4.8 MB) inside each page, which then works alone; shared: "
                   "one plotly.min.js beside the pages, referenced by each. Default: inline for "
                   "one file, shared when writing into a folder (several NAMEs, or -o DIR/).")  # fmt: skip
def plot(
    path: str,
    kind: str,
    names: tuple[str, ...],
    steps: tuple[int, ...],
    mode: str | None,
    worker: str | None,
    labels: str | None,
    gradient: str | None,
    samples: int,
    style: str,
    slider: bool,
    output: str | None,
    plotlyjs: str | None,
) -> None:
    """Plot a recorded run: a tensor's DISTRIBUTION over steps, its HISTOGRAMS at some steps,
    the TSNE of a layer's activations coloured by label, SALIENCY maps of the inputs, or the
    CONFUSION matrix of labels and predictions. Writes an HTML file that opens offline; with
    several NAMEs, one page per NAME in a folder, sharing one plotly.min.js.

    \b
    Examples:
      mldbg plot runs/exp1 distribution fc1.weight -o fc1.html
      mldbg plot runs/exp1 histograms gradient/fc1.weight --step 0 --step 50
      mldbg plot runs/exp1 distribution fc1.weight fc2.weight out.weight -o plots/
      mldbg plot runs/exp1 tsne relu1_output_0 --mode eval
      mldbg plot runs/exp1 saliency model_input_0 --step 10
      mldbg plot runs/exp1 confusion --mode eval --slider
    """
    from mldbg import insight
    from mldbg.cli.runs import open_run

    try:
        open_run(path)
        pages, folder = _targets(kind, names, output)
        shared = plotlyjs == "shared" or (plotlyjs is None and folder)
        for name, target in pages:
            fig = _figure(path, kind, name, steps, mode, worker, labels, gradient, samples, style, slider)
            click.echo(f"wrote {insight.save(fig, target, plotlyjs='shared' if shared else 'inline')}")
    except MldbgError as e:
        click.echo(f"mldbg plot: error: {e}", err=True)
        sys.exit(2)
    if shared and any(t.suffix.lower() in (".html", ".htm") for _, t in pages):
        click.echo(f"wrote {pages[0][1].parent / 'plotly.min.js'} (shared by the pages beside it)")


def _targets(
    kind: str, names: tuple[str, ...], output: str | None
) -> tuple[list[tuple[str | None, Path]], bool]:
    """(NAME, file) of each page, and whether they go into a folder: `output` itself for one
    page, else `KIND-NAME.html` in the folder `output` names (the current one by default)."""
    folder = output is not None and (output.endswith(("/", os.sep)) or Path(output).is_dir())
    if len(names) <= 1 and not folder:
        return [(names[0] if names else None, Path(output or f"{kind}.html"))], False
    where = Path(output or ".")
    where.mkdir(parents=True, exist_ok=True)
    if not names:
        return [(None, where / f"{kind}.html")], True
    return [(n, where / f"{kind}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', n)}.html") for n in names], True


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
        if steps:  # it draws every saved step: a --step would be silently ignored
            raise InvalidConfig(
                "mldbg plot distribution draws every saved step and takes no --step; "
                f"for the values at some steps: mldbg plot {path} histograms {name} --step N"
            )
        return insight.distribution(trial, name, mode=mode, worker=worker)
    if kind == "histograms":
        return insight.histograms(
            trial, name, steps=list(steps) or None, mode=mode, worker=worker, style=style
        )
    return insight.tsne(trial, name, step, labels=labels, mode=mode, worker=worker)
