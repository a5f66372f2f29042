"""The run a command reads: found, or refused with a message that says what to do.

A missing path, a file, and a folder that holds no run are usage errors (exit 2) of every
command that reads a recorded run, said in the terms of the command line (never a Python
method). `mldbg watch` and `mldbg dashboard` may start before the run exists, and wait for
it; `mldbg watch` still refuses a folder of runs, where no run would ever appear.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from mldbg.errors import RunNotFound

if TYPE_CHECKING:
    from mldbg.trial import Trial


def refuse_file(path: str, what: str = "give the directory the hook recorded into (its out_dir)") -> None:
    """Refuse a local PATH that is a file: a run is a folder (also one not written yet)."""
    if "://" in path and not path.startswith("file://"):
        return
    if Path(path.removeprefix("file://")).expanduser().is_file():
        raise RunNotFound(f"{path} is a file, not a run: {what}")


def check_run_path(path: str) -> None:
    """Refuse a local PATH that does not exist or is a file (URLs are checked by reading)."""
    if "://" in path and not path.startswith("file://"):
        return
    local = Path(path.removeprefix("file://")).expanduser()
    refuse_file(path)
    if not local.exists():
        parent = next((p for p in local.absolute().parents if p.exists()), None)
        raise RunNotFound(f"no run at {path}: the path does not exist (check the path){_near(local, parent)}")


def open_run(path: str, on_corrupt: str = "raise") -> Trial:
    """The trial of the run at PATH; RunNotFound when there is none, naming the runs below
    PATH when it is a folder of runs (a sweep). `on_corrupt` as for `create_trial`."""
    from mldbg.trial import create_trial

    check_run_path(path)
    trial = create_trial(path, on_corrupt=on_corrupt)
    if trial.workers() or trial.steps():  # the workers first: no list of every step
        return trial
    refuse_folder_of_runs(path)
    raise RunNotFound(
        f"no run at {path}: nothing was recorded there (no workers/ folder); give the out_dir "
        "of a hook, or wait until the training has written its first step"
    )


def refuse_folder_of_runs(path: str) -> None:
    """Refuse a folder that holds no run of its own but runs below it (a sweep's folder),
    naming them: `mldbg watch` would otherwise wait there for ever."""
    if "://" not in path or path.startswith("file://"):
        local = Path(path.removeprefix("file://")).expanduser()
        if not local.is_dir() or (local / "workers").exists():
            return
    below = _runs_below(path)
    if below:
        shown = ", ".join(below[:5]) + (f", ... ({len(below)} in all)" if len(below) > 5 else "")
        raise RunNotFound(
            f"no run at {path}: it is a folder of runs ({shown}); give one of them, "
            f"or check them all with: mldbg sweep {path}"
        )


def _runs_below(path: str) -> list[str]:
    from mldbg.trial.runs import find_runs

    try:
        runs, _ = find_runs(path)
    except Exception:  # an unreadable folder: the message without the list
        return []
    return [r for r in runs if r != path]


def _near(local: Path, parent: Path | None) -> str:
    """What the user may have meant: a folder of a close name, or the runs where the path
    stops existing."""
    if parent is None:
        return ""
    try:
        folders = sorted(e.name for e in os.scandir(parent) if e.is_dir())
    except OSError:
        return ""
    if parent == local.absolute().parent:
        close = difflib.get_close_matches(local.name, folders, n=3)
        if close:
            return f"; did you mean {', '.join(str(local.parent / c) for c in close)}?"
    runs = [f for f in folders if (parent / f / "workers").is_dir()]
    return f"; runs in {parent}: {', '.join(runs[:5])}" if runs else ""
