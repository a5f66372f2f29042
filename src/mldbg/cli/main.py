"""The `mldbg` command. Each sub-command lives in its own module and loads on first use."""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import io
import os
import re
import sys
from typing import Any, NoReturn

import click

from mldbg.errors import MldbgError

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
    "export": ("mldbg.cli.export", "export", "Write a run's values as a CSV or Parquet table."),
    "status": ("mldbg.cli.status", "status", "Each rule's status on a run, as the watcher left it."),
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

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError:
            name = args[0] if args else ""
            close = difflib.get_close_matches(name, list(COMMANDS), n=2)
            hint = f"did you mean {' or '.join(close)}?" if close else f"the commands: {', '.join(COMMANDS)}"
            raise click.UsageError(f"no command {name!r}: {hint}", ctx) from None

    def invoke(self, ctx: click.Context) -> Any:
        """Run the sub-command under the one convention of exit codes: a user's mistake (a
        bad path, option, config, rule, parameter or tensor name) is one line,
        `mldbg <command>: error: <what>`, and exit status 2, never a traceback."""
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            raise click.exceptions.Exit(130) from None
        except click.UsageError as e:
            name = ctx.invoked_subcommand or _command_name(e.ctx)
            usage = f" (see: mldbg {name} --help)" if name else " (see: mldbg --help)"
            fail(name, e.format_message() + usage)
        except click.ClickException as e:
            fail(ctx.invoked_subcommand, e.format_message())
        except MldbgError as e:
            fail(ctx.invoked_subcommand, str(e))
        except BrokenPipeError:  # `mldbg ls RUN | head`: the reader left; not an error of ours
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush at exit
            raise click.exceptions.Exit(141) from None
        except OSError as e:  # a file the user named: missing, unreadable, a folder
            where = f"{e.filename}: " if e.filename and str(e.filename) not in str(e.strerror) else ""
            fail(ctx.invoked_subcommand, f"{where}{e.strerror or e}")

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(n, COMMANDS[n][2]) for n in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mldbg")
def cli() -> None:
    """mldbg: catch vanishing gradients, dead ReLUs, stalled losses and idle hardware while
    training runs, and stop the job early."""


EXIT_USAGE = 2  # the user's mistake: a bad path, option, config, rule, parameter or name


def fail(command: str | None, message: str) -> NoReturn:
    """Print a usage error as one line, `mldbg <command>: error: <message>`, and exit 2."""
    one_line = " ".join(message.split())
    click.echo(f"mldbg{' ' + command if command else ''}: error: {one_line}", err=True)
    raise click.exceptions.Exit(EXIT_USAGE)


def _command_name(ctx: click.Context | None) -> str | None:
    while ctx is not None and ctx.parent is not None and ctx.parent.parent is not None:
        ctx = ctx.parent
    return ctx.info_name if ctx is not None and ctx.parent is not None else None


# what a terminal acts on rather than prints: C0 controls but tab and newline, DEL, C1 controls
# (ESC ] 52 writes the clipboard in xterm, kitty, iTerm2, tmux), and the bidirectional overrides
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# kept on a terminal only: SGR colours (click.style), cursor up and erase line, and carriage
# returns (the progress bar redraws itself with them); never OSC (clipboard, title) or queries
_TERMINAL_KEPT = "\x1b\\[[0-9;]*[mAK]|\r"
_ESCAPE_OR_KEEP = re.compile(f"{_TERMINAL_KEPT}|{_CONTROLS.pattern}")


def escape_controls(text: str, colours: bool = False) -> str:
    """`text` with each control character written as an escape (`\\x1b`, `\\u202e`): names from a
    run (a crafted index can hold any) print as text, never as terminal commands. With
    `colours` (a terminal), colour, cursor-up and erase-line sequences and carriage returns stay
    (mldbg's own styling and progress bar)."""
    if not _CONTROLS.search(text):
        return text

    def escaped(m: re.Match[str]) -> str:
        found = m.group(0)
        if colours and (len(found) > 1 or found == "\r"):
            return found
        return found.encode("unicode_escape").decode("ascii")

    return _ESCAPE_OR_KEEP.sub(escaped, text)


class _Escaping(io.TextIOWrapper):
    """A text stream over the same buffer as `sys.stdout`/`sys.stderr` that escapes control
    characters in everything written (names, paths, messages from a run)."""

    _colours = False  # the stream is a terminal: mldbg's own styling passes (set by `over`)

    def write(self, s: str) -> int:
        super().write(escape_controls(s, self._colours))
        return len(s)

    @classmethod
    def over(cls, stream: io.TextIOWrapper) -> _Escaping:
        stream.flush()
        wrapper = cls(
            stream.buffer,
            encoding=stream.encoding,
            errors=stream.errors,
            line_buffering=stream.line_buffering or stream.isatty(),
            write_through=getattr(stream, "write_through", False),
        )
        wrapper._colours = stream.isatty()
        return wrapper


_ESCAPING: list[_Escaping] = []  # kept until exit: closing one would close the real stream


def _escape_output() -> None:
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, io.TextIOWrapper) and not isinstance(stream, _Escaping):
            try:
                wrapper = _Escaping.over(stream)
            except (AttributeError, OSError, ValueError):
                continue
            _ESCAPING.append(wrapper)
            setattr(sys, name, wrapper)


def main() -> None:
    _escape_output()
    try:
        cli(prog_name="mldbg", standalone_mode=True)
    except MldbgError as e:  # raised before a sub-command ran
        click.echo(f"mldbg: error: {' '.join(str(e).split())}", err=True)
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
