"""`mldbg ls` and `mldbg show`: look inside a run from the terminal."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

import click
import numpy as np

from mldbg.cli.choice import Choice
from mldbg.config import Mode
from mldbg.errors import InvalidConfig, MldbgError, StepNotYetAvailable

if TYPE_CHECKING:
    from mldbg.trial import Trial


def _open(path: str) -> Trial:
    from mldbg.cli.runs import open_run

    return open_run(path)


def _collection(trial: Trial, name: str | None) -> None:
    """Refuse a collection the run does not hold, with the closest names it does."""
    if name is None:
        return
    known = [c for c in trial.collections() if c != "all"]
    if name in known or name == "all":
        return
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise InvalidConfig(
        f"no collection {name!r} in {trial.path}: {hint}its collections: {', '.join(known) or 'none'}"
    )


@click.command()
@click.argument("path")
@click.option("--collection", "-c", default=None, help="Only tensors of this collection.")
@click.option("--regex", "-r", default=None, help="Only tensor names matching this regex.")
def ls(path: str, collection: str | None, regex: str | None) -> None:
    """List a run's steps, workers, collections and tensors."""
    trial = _open(path)
    _collection(trial, collection)
    names = trial.tensor_names(regex=regex, collection=collection)  # a bad regex: before any output
    steps = trial.steps()
    state = "finished" if trial.loaded_all_steps else "still being written (or stopped early)"
    lost = trial.lost()
    if lost:
        state += f", {lost} lost (the training could not write them)"
    click.echo(f"run {trial.path}: {state}")
    click.echo(f"workers: {', '.join(trial.workers())}")
    span = f"{steps[0]}..{steps[-1]}" if steps else "none"
    click.echo(f"steps: {len(steps)} saved (global steps {span}, every mode; --step takes these)")
    seen = _seen(trial)
    for mode in (Mode.TRAIN, Mode.EVAL, Mode.PREDICT):
        ms, word = trial.steps(mode), mode.name.lower()
        of = seen.get(word) if seen is not None else None
        if ms:
            count = f"{len(ms)} of {of} steps saved" if of is not None else f"{len(ms)} steps saved"
            click.echo(f"  {word:<8} {count} ({ms[0]}..{ms[-1]}; --mode {word} --step N)")
        elif of:
            click.echo(f"  {word:<8} 0 of {of} steps saved")
    click.echo("collections:")
    for c, members in trial.collections().items():
        if c != "all":
            click.echo(f"  {c:<20} {len(members)} tensors")
    click.echo("tensors:")
    if names:  # counted together and written at once: 100,000 names in a second, not seconds
        counts = trial.step_counts(names)
        click.echo("\n".join(f"  {name:<40} {n} steps" for name, n in zip(names, counts, strict=True)))


def _seen(trial: Trial) -> dict[str, int] | None:
    """Each mode's steps the training went through, saved or not, from the workers' END
    markers (`record.end.StepsEnd`); None while the run is written, or for a run recorded
    before the markers said it."""
    import json

    from mldbg.store import layout

    seen: dict[str, int] = {}
    for worker in trial.workers():
        try:
            counts = json.loads(trial.store.read(layout.end_key(worker))).get("mode_steps")
        except (OSError, ValueError, MldbgError):  # no END yet (the run is written), or unreadable
            return None
        if not isinstance(counts, dict):
            return None
        for mode, n in counts.items():
            if isinstance(n, int):
                seen[mode] = max(seen.get(mode, 0), n)
    return seen or None


@click.command()
@click.argument("path")
@click.argument("name")
@click.option("--step", type=int, default=None, help="Global step (default: the last saved).")
@click.option(
    "--mode",
    type=Choice(["train", "eval", "predict"]),
    default=None,
    help="Read --step as this mode's own step.",
)
@click.option("--worker", default=None)
def show(path: str, name: str, step: int | None, mode: str | None, worker: str | None) -> None:
    """Print one tensor of a run at a step, with its statistics."""
    trial = _open(path)
    m = Mode.parse(mode) if mode else None
    t = trial.tensor(name)
    if step is None:
        steps = t.steps(m)
        if not steps:
            modes = [md.name.lower() for md in (Mode.TRAIN, Mode.EVAL, Mode.PREDICT) if t.steps(md)]
            raise InvalidConfig(
                f"{name!r} has no saved steps" + (f" in mode {mode}" if mode else "")
                + (f"; it was saved in mode {', '.join(modes)} (give --mode {modes[0]})" if modes else "")
            )  # fmt: skip
        step = steps[-1]
    try:
        record = trial.record(name, step, m, worker)
    except StepNotYetAvailable as e:  # said for the command line, not for the Python API
        raise InvalidConfig(str(e).replace("wait for it with wait_for_steps()", "run again later")) from None
    if not record.has_raw:  # statistics only at this step: show them, and where the values are
        _show_statistics(trial, name, step, mode, m, record)
        return
    value = trial.read(record)
    click.echo(
        f"{name} at step {step}{f' ({mode})' if mode else ''}: shape {value.shape}, dtype {value.dtype}"
    )
    if value.size:
        v = value.astype(np.float64)
        click.echo(
            f"min {v.min():.6g}  max {v.max():.6g}  mean {v.mean():.6g}  std {v.std():.6g}  "
            f"zeros {np.mean(v == 0):.1%}  nan {int(np.isnan(v).sum())}"
        )
    with np.printoptions(threshold=200, precision=5, suppress=True):
        click.echo(value)


def _show_statistics(
    trial: Trial, name: str, step: int, mode: str | None, m: Mode | None, record: Any
) -> None:
    """A step where only statistics of `name` were saved (the statistics budget, or a
    ReductionConfig without the raw tensor): print them, and the nearest steps with values."""
    where = f"{name} at step {step}{f' ({mode})' if mode else ''}"
    click.echo(f"{where}: shape {record.shape}; only statistics were saved at this step, not the values")
    for key, number in sorted(record.statistics.items()):
        click.echo(f"  {key:<24} {number:.6g}")
    records = trial.records(name, mode=m)
    counted = records.mode_step if m is not None else records.step
    raw = sorted({int(s) for s in counted[records.has_raw]})
    if raw:
        before = [s for s in raw if s < step][-1:]
        after = [s for s in raw if s > step][:1]
        near = ", ".join([*(f"{s} (before)" for s in before), *(f"{s} (after)" for s in after)])
        flag = f" --mode {mode}" if mode else ""
        click.echo(
            f"its values were saved at {len(raw)} step{'s' if len(raw) > 1 else ''}; the nearest: {near} (give{flag} --step N)"
        )
    else:
        click.echo(
            "its values were saved at no step (save_config=mldbg.SaveConfig(save_interval=N) saves them)"
        )
