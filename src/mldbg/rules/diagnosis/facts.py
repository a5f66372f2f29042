"""What `diagnose` reads from the run itself to tell causes apart: never a finding.

Findings say what is wrong; several causes can explain the same finding (ReLUs die from a
negative bias init or from a learning rate so high that one step pushes every pre-activation
below zero). A few plain facts of the run, read through the trial's public API and bounded in
cost (the first saved training steps, two windows of the loss), decide between them:

- `loss_jump`: the training loss rose far above its first value within its first saved steps
  (or became NaN/inf there): the mark of a step far too large;
- `loss_rise`: the training loss ends well above where it started;
- `saturating`: the model's activations are sigmoid/tanh (no ReLU), where vanishing gradients
  come from the activation rather than from the init or dead units;
- `weights`: the parameter names, to tell a weight that is all zeros (the init) from a
  gradient or an output that is;
- `growth(tensors, step)`: how much a weight's norm changed at a step (a large update ratio
  grows the norm; a tiny one does not).

A fact never makes a diagnosis on its own: it only weighs between the causes that could explain
the findings a rule made, and adds to a diagnosis's confidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mldbg.config import Mode

EARLY = 20  # saved training steps that count as the start of training
MAX_LOSSES = 4  # loss tensors looked at


@dataclass(frozen=True)
class Fact:
    """One observation about the run: a sentence with its numbers, and how strongly (0-1) it
    speaks for the cause it supports."""

    text: str
    strength: float


@dataclass
class RunFacts:
    """The facts of one run (see the module doc); `RunFacts()` knows nothing."""

    loss_jump: Fact | None = None
    loss_rise: Fact | None = None
    saturating: bool = False
    weights: frozenset[str] = frozenset()
    _trial: Any = field(default=None, repr=False, compare=False)
    _growth: dict[tuple[str, int], float | None] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, trial: Any) -> RunFacts:
        """The facts of `trial` (a `mldbg.trial.Trial`); what cannot be read stays unknown."""
        try:
            colls = trial.collections()
        except Exception:
            return cls()
        names = lambda c: colls.get(c) or ()  # noqa: E731
        facts = cls(
            saturating=bool(names("sigmoid_activations") or names("tanh_activations"))
            and not names("relu_activations"),
            weights=frozenset(names("weights")) | frozenset(names("biases")),
            _trial=trial,
        )
        for name in list(names("losses"))[:MAX_LOSSES]:
            try:
                values = _train_values(trial, name)
            except Exception:
                continue
            jump, rise = _jump(name, values), _rise(name, values)
            if jump is not None and (facts.loss_jump is None or jump.strength > facts.loss_jump.strength):
                facts.loss_jump = jump
            if rise is not None and (facts.loss_rise is None or rise.strength > facts.loss_rise.strength):
                facts.loss_rise = rise
        return facts

    def growth(self, tensors: list[str], step: int) -> float | None:
        """The largest factor by which the norm of one of `tensors` (parameters) changed from
        its previous saved step to `step` (>= 1: grown or shrunk alike); None when unknown."""
        best = None
        for name in tensors:
            if name not in self.weights or self._trial is None:
                continue
            key = (name, step)
            if key not in self._growth:
                try:
                    self._growth[key] = _norm_change(self._trial, name, step)
                except Exception:  # unreadable (damaged, not saved): unknown, as without the run
                    self._growth[key] = None
            g = self._growth[key]
            if g is not None:
                best = g if best is None else max(best, g)
        return best


def _train_values(trial: Any, name: str) -> tuple[list[int], np.ndarray]:
    """(training steps, values) of a scalar loss: the first `EARLY` and, in a long run, a
    window at its end (enough for both facts without reading a 10^6-step series)."""
    tensor = trial.tensor(name)
    steps = tensor.steps(mode=Mode.TRAIN)
    if len(steps) > 4 * EARLY:
        w = max(EARLY, len(steps) // 10)
        w = min(w, 1000)
        steps = steps[: max(EARLY, w)] + steps[-w:]
    values = []
    for s in steps:
        v = np.asarray(tensor.value(s, mode=Mode.TRAIN), dtype=np.float64)
        values.append(float(v.mean()) if v.size else math.nan)
    return steps, np.asarray(values)


def _jump(name: str, series: tuple[list[int], np.ndarray]) -> Fact | None:
    """The training loss rose to many times its first value within its first saved steps."""
    steps, values = series
    early = values[:EARLY]
    finite = early[np.isfinite(early)]
    if len(early) < 2 or not len(finite) or not np.isfinite(early[0]) or early[0] <= 0 or finite.min() < 0:
        return None  # a loss that can be negative (a log-likelihood, a GAN's) has no ratio
    first = float(early[0])
    bad = np.flatnonzero(~np.isfinite(early))
    if len(bad):
        return Fact(
            f"the training loss {name} went from {first:.4g} to {early[bad[0]]} by training step {steps[bad[0]]}",
            0.95,
        )
    peak = int(np.argmax(early))
    ratio = float(early[peak]) / first
    if ratio < 3:
        return None
    return Fact(
        f"the training loss {name} jumped {ratio:.3g}x at its start ({first:.4g} at training step "
        f"{steps[0]} -> {early[peak]:.4g} at training step {steps[peak]})",
        round(min(0.95, 0.9 * math.log10(ratio)), 2),
    )


def _rise(name: str, series: tuple[list[int], np.ndarray]) -> Fact | None:
    """The training loss ends well above where it started (medians of its first and last
    tenth): training moves away from the minimum."""
    steps, values = series
    if len(values) < 20:
        return None
    w = max(5, min(len(values) // 10, 1000))
    head, tail = values[:w], values[-w:]
    head, finite_tail = head[np.isfinite(head)], tail[np.isfinite(tail)]
    if len(head) < w // 2 + 1 or np.any(values[np.isfinite(values)] < 0):
        return None
    a = float(np.median(head))
    b = float(np.median(finite_tail)) if len(finite_tail) > w // 2 else math.inf
    if a <= 0:
        return None
    ratio = b / a
    if ratio < 1.5:
        return None
    return Fact(
        f"the training loss {name} ends {ratio:.3g}x above where it started "
        f"(median {a:.4g} over its first {w} saved training steps, {b:.4g} over its last {w})",
        round(min(0.7, 0.3 * math.log2(ratio)), 2),
    )


def _norm_change(trial: Any, name: str, step: int) -> float | None:
    tensor = trial.tensor(name)
    steps = tensor.steps()
    try:
        i = steps.index(step)
    except ValueError:
        i = int(np.searchsorted(steps, step, side="right")) - 1
    if i < 1:
        return None
    a = tensor.reduction_value(steps[i - 1], "l2")
    b = tensor.reduction_value(steps[i], "l2")
    if not (math.isfinite(a) and a > 0):
        return None
    if not math.isfinite(b):
        return math.inf
    if b <= 0:
        return None
    return max(b / a, a / b)
