"""The x axis of the training report: the global step of the TRAIN steps.

Every step of a run has a global step, and modes interleave: ten TRAIN steps, then the
batches of an evaluation pass, then TRAIN again. Plotting each mode against its own step count
squeezes the evaluation to the left of the chart (pass 3's batches at "step" 4 and 5 while
training is at 30). Here an evaluation pass (the EVAL or PREDICT steps between two TRAIN steps)
is one point, placed at the TRAIN step it followed, so both modes share one axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mldbg.config import Mode
from mldbg.report.svg import Mark
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
        last_train: tuple[int, int] | None = None  # (global step, TRAIN step) last saved
        last_eval: dict[Mode, int] = {}  # evaluation mode -> its last saved mode step
        pending: list[Pass] = []  # passes before the first TRAIN step
        by_key: dict[tuple[Mode, int], Pass] = {}
        for step in trial.steps():
            mode, mode_step = trial.mode(step), trial.mode_step(step)
            if mode not in EVALUATION_MODES:
                if last_train is None:
                    for p in pending:
                        p.x = step
                    pending = []
                last_train = (step, mode_step)
                self._x[step] = step
                continue
            # the TRAIN steps done before this one, exact even when steps between were not
            # saved: the global step counts every mode's steps, each mode step its own
            others = sum(ms + 1 for m, ms in last_eval.items() if m != mode)
            trained = step - mode_step - others
            last_eval[mode] = mode_step
            found = by_key.get((mode, trained))
            if found is None:
                if last_train is None or trained <= 0:
                    found = Pass(mode, step)
                    pending.append(found)
                else:  # the TRAIN step number `trained - 1`, at its global step
                    g, m = last_train
                    found = Pass(mode, min(g + max(trained - 1 - m, 0), step - 1))
                by_key[(mode, trained)] = found
                self.passes.append(found)
            found.steps.append(step)
        for p in self.passes:
            for s in p.steps:
                self._x[s] = p.x

    def x(self, step: int) -> int:
        """Where global step `step` is drawn: itself for a TRAIN step, the TRAIN step its
        evaluation pass followed otherwise (a step not recorded is drawn at itself)."""
        return self._x.get(step, step)

    def passes_of(self, mode: Mode) -> list[Pass]:
        return [p for p in self.passes if p.mode == mode]


LOSS_RULES = frozenset(
    {"loss_not_decreasing", "overfit", "underfitting", "overtraining", "loss_spike", "early_stopping"}
)


def finding_marks(
    found: Sequence[Any], tensors: set[str], timeline: Timeline, rules: frozenset[str] = frozenset()
) -> list[Mark]:
    """Marks for the findings that concern a chart: those naming one of its `tensors`, or
    one of `rules` (the loss rules name no tensor when they read the default loss). An
    evaluation step's finding is drawn at the train step its pass followed."""
    out = []
    for f in found:
        named = set(getattr(f, "tensors", None) or ())
        if named & tensors or (f.rule in rules and not named - tensors):
            out.append(Mark(timeline.x(int(f.step)), f.rule, f"{f.rule} at step {f.step}: {f.message}"))
    return out
