"""The x axis of the training report: the global step of the TRAIN steps.

Every step of a run has a global step, and modes interleave: ten TRAIN steps, then the
batches of an evaluation pass, then TRAIN again. Plotting each mode against its own step count
squeezes the evaluation to the left of the chart (pass 3's batches at "step" 4 and 5 while
training is at 30). Here an evaluation pass (the EVAL or PREDICT steps between two TRAIN steps)
is one point, placed at the TRAIN step it followed, so both modes share one axis.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mldbg.config import Mode
from mldbg.trial import Trial

EVALUATION_MODES = (Mode.EVAL, Mode.PREDICT)


@dataclass
class Pass:
    """One evaluation pass: its mode, its global steps, and the TRAIN step it followed (the
    first TRAIN step after it for a pass before any training; its own first step in a run
    with no TRAIN step)."""

    mode: Mode
    x: int
    steps: list[int] = field(default_factory=list)


class Timeline:
    """Which x each global step of a trial is drawn at, and its evaluation passes."""

    def __init__(self, trial: Trial):
        self._x: dict[int, int] = {}
        self.passes: list[Pass] = []
        last_train: int | None = None
        pending: list[Pass] = []  # passes before the first TRAIN step
        current: Pass | None = None
        for step in trial.steps():
            mode = trial.mode(step)
            if mode in EVALUATION_MODES:
                if current is None or current.mode != mode:
                    current = Pass(mode, last_train if last_train is not None else step)
                    self.passes.append(current)
                    if last_train is None:
                        pending.append(current)
                current.steps.append(step)
                continue
            current = None
            if last_train is None:
                for p in pending:
                    p.x = step
                pending = []
            last_train = step
            self._x[step] = step
        for p in self.passes:
            for s in p.steps:
                self._x[s] = p.x

    def x(self, step: int) -> int:
        """Where global step `step` is drawn: itself for a TRAIN step, the TRAIN step its
        evaluation pass followed otherwise (a step not recorded is drawn at itself)."""
        return self._x.get(step, step)

    def passes_of(self, mode: Mode) -> list[Pass]:
        return [p for p in self.passes if p.mode == mode]
