"""The `mldbg` command. Each sub-command lives in its own module and loads on first use."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

# command name -> (module, attribute, one-line help)
COMMANDS = {
    "demo": ("mldbg.cli.demo", "demo", "Train a small real model with mldbg recording, then check it."),
    "ls": ("mldbg.cli.inspect", "ls", "List a run's steps, workers, collections and tensors."),
    "show": ("mldbg.cli.inspect", "show", "Print one tensor of a run (at a step)."),
    "check": ("mldbg.cli.check", "check", "Run rules over a recorded run; exit 1 if any fired."),
    "sweep": ("mldbg.cli.sweep", "sweep", "Check every run of a sweep on Dask; exit 1 if any rule fired."),
    "watch": ("mldbg.cli.watch", "watch", "Run rules live beside a training job."),
    "run": ("mldbg.cli.run", "run", "Run an unmodified training script with mldbg attached."),
    "report": ("mldbg.cli.report", "report", "Write a self-contained HTML report of a run."),
    "profile-report": ("mldbg.cli.profile_report", "profile_report", "Write the profiler HTML report."),
    "plot": ("mldbg.cli.plot", "plot", "Plot a run: distributions, histograms, t-SNE, saliency, confusion."),
    "export-tensorboard": ("mldbg.cli.export_tensorboard", "export_tensorboard", "Export to TensorBoard."),
    "dashboard": ("mldbg.cli.dashboard", "dashboard", "Serve a live dashboard of one or more runs."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [n for n, (mod, _, _) in COMMANDS.items() if importlib.util.find_spec(mod) is not None]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        try:
            return getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as e:
            if e.name == module:
                return None
            raise

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(n, COMMANDS[n][2]) for n in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mldbg")
def cli() -> None:
    """mldbg: catch vanishing gradients, dead ReLUs, stalled losses and idle hardware while
    training runs, and stop the job early."""


def main() -> None:
    from mldbg.errors import MldbgError

    try:
        cli(standalone_mode=True)
    except MldbgError as e:
        click.secho(f"mldbg: {e}", fg="red", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
