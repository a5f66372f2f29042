"""What the insight plots read from a run: the trial, a mode, steps, raw values, labels.

Every plot takes a `Trial` or a path, and steps as the trial counts them: global steps, or a
mode's own steps when a mode is given.
"""

from __future__ import annotations

import os

import numpy as np

from mldbg.config import Mode
from mldbg.errors import InvalidConfig, TensorUnavailableForStep
from mldbg.trial import Trial, create_trial

RunLike = Trial | str | os.PathLike[str]


def open_trial(run: RunLike) -> Trial:
    """A trial from a path (or the trial itself); a clear error when nothing was recorded there."""
    trial = run if isinstance(run, Trial) else create_trial(run)
    if not trial.workers():
        raise InvalidConfig(f"no mldbg run at {trial.path} (no workers/ folder with records)")
    return trial


def parse_mode(mode: Mode | str | int | None) -> Mode | None:
    return None if mode is None else Mode.parse(mode)


def steps_of(trial: Trial, name: str, mode: Mode | None) -> list[int]:
    """The steps `name` was saved at (of `mode` when given); an error naming it when none."""
    steps = trial.tensor(name).steps(mode)
    if not steps:
        raise TensorUnavailableForStep(
            f"tensor {name!r} has no saved steps"
            + (f" in mode {mode.name}" if mode else "")
            + f" ({trial.path})"
        )
    return steps


def raw(
    trial: Trial, name: str, step: int, mode: Mode | None = None, worker: str | None = None
) -> np.ndarray | None:
    """The saved tensor, or None when only its reductions were saved at that step."""
    tensor = trial.tensor(name)
    try:
        return np.asarray(tensor.value(step, mode=mode, worker=worker))
    except TensorUnavailableForStep:
        if tensor.has_step(step, mode) and (worker is None or worker in tensor.workers(step, mode)):
            return None  # saved, but only as reductions
        raise


def global_step(trial: Trial, step: int, mode: Mode | None) -> int:
    return step if mode is None or mode == Mode.GLOBAL else trial.global_step(mode, step)


def step_label(trial: Trial, step: int, mode: Mode | None) -> str:
    """`step 12 (eval step 3)`: what a title says about a step."""
    g = global_step(trial, step, mode)
    m = trial.mode(g)
    return f"step {g} ({m.name.lower()} step {trial.mode_step(g)})"


def first_in(trial: Trial, collection: str, step: int) -> str | None:
    """The first tensor of a collection saved at a global step (as the rules pick it)."""
    names = trial.tensor_names(collection=collection, step=step)
    return names[0] if names else None


def evenly(items: list[int], count: int) -> list[int]:
    """At most `count` of `items`, evenly spread, always keeping the first and the last."""
    if len(items) <= count:
        return list(items)
    idx = np.unique(np.round(np.linspace(0, len(items) - 1, count)).astype(int))
    return [items[i] for i in idx]
