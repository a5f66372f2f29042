"""One recorded tensor: its steps, values and reductions, across modes and workers.

A Tensor reads through the trial's public index API (`Trial.records`, `Trial.record`,
`Trial.read`), as rules and exports do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mldbg.config import Mode
from mldbg.errors import InvalidConfig, did_you_mean
from mldbg.store.reductions import REDUCTION_NAMES, reduce
from mldbg.trial.shards import global_value

if TYPE_CHECKING:
    from mldbg.trial.trial import Trial


class Tensor:
    def __init__(self, trial: Trial, name: str):
        self.trial = trial
        self.name = name

    def __repr__(self) -> str:
        return f"Tensor({self.name!r})"

    def _repr_html_(self) -> str:
        """A compact summary for notebooks (see `mldbg.trial.html`)."""
        from mldbg.trial.html import tensor_html

        return tensor_html(self)

    def steps(self, mode: Mode | None = None) -> list[int]:
        """Global steps where it was saved; with a mode, that mode's own steps."""
        mode = None if mode is None else Mode.parse(mode)
        if mode is None or mode == Mode.GLOBAL:
            return _distinct(self.trial.records(self.name).step)
        return _distinct(self.trial.records(self.name, mode=mode).mode_step)

    def workers(self, step: int, mode: Mode | None = None) -> list[str]:
        """The workers that saved it at `step` (the mode's step when `mode` is given)."""
        found = self.trial.records(self.name, step, mode)
        return sorted({found.workers[w] for w in found.worker.tolist()})

    def value(self, step: int, mode: Mode | None = None, worker: str | None = None) -> np.ndarray:
        """The tensor at `step` (a global step, or the mode's step when `mode` is given). A
        sharded tensor saved as its pieces reads as the global tensor, put back together from
        the workers' pieces; with `worker`, that worker's own piece (`mldbg.store.shards`)."""
        if worker is None:
            whole = global_value(self.trial, self.name, step, mode)
            if whole is not None:
                return whole
        return self.trial.read(self.trial.record(self.name, step, mode, worker))

    def reduction_value(
        self,
        step: int,
        reduction: str,
        abs: bool = False,
        mode: Mode | None = None,
        worker: str | None = None,
    ) -> float:
        """A saved reduction, or one computed from the saved raw tensor."""
        if reduction not in REDUCTION_NAMES:
            raise InvalidConfig(
                f"unknown reduction {reduction!r}; choose from {', '.join(REDUCTION_NAMES)} "
                "(abs=True for the reduction of |x|)" + did_you_mean(reduction, REDUCTION_NAMES)
            )
        record = self.trial.record(self.name, step, mode, worker)
        saved = record.reductions.get((reduction, abs))
        if saved is not None:
            return saved
        if worker is None:  # a sharded tensor: the global tensor's (its pieces carry no reductions)
            whole = global_value(self.trial, self.name, step, mode)
            if whole is not None:
                return reduce(whole, reduction, abs)
        return reduce(self.trial.read(record), reduction, abs)

    def values(self, mode: Mode | None = None) -> dict[int, np.ndarray]:
        """Every saved value (of the first worker), by step."""
        return {s: self.value(s, mode) for s in self.steps(mode)}

    def reduction_values(
        self, reduction: str, abs: bool = False, mode: Mode | None = None
    ) -> dict[int, float]:
        return {s: self.reduction_value(s, reduction, abs, mode) for s in self.steps(mode)}

    def has_step(self, step: int, mode: Mode | None = None) -> bool:
        return len(self.trial.records(self.name, step, mode)) > 0


def _distinct(steps: np.ndarray) -> list[int]:
    """The distinct values of `steps`, sorted; steps in load order are usually increasing
    already (one worker, written in order): then no sort of 10^6 steps."""
    if len(steps) < 2 or bool((steps[1:] > steps[:-1]).all()):
        return steps.tolist()
    return np.unique(steps).tolist()
