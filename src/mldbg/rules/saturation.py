"""Shared by `tanh_saturation`, `sigmoid_saturation` and `saturated_activation`: the share of
a layer's units whose inputs sit where the activation is flat.

From the raw tensor (a unit per position, samples where it is saturated), else from the
`unit_outside(lo,hi)` statistic of the activation's input (elements beyond the bounds per
unit, out of `count / units`) that a two-line hook records with the default bounds: with
other bounds only raw tensors can answer, and the rule says so (`SaturationTracker.short`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from mldbg.rules.base import Finding
from mldbg.rules.stats import UnitWindow, is_input, pick_per_layer, unit_fraction
from mldbg.rules.view import TrialView
from mldbg.store.statistics import Statistic


@dataclass
class Saturated:
    layer: str
    tensor: str
    share: float  # % of units saturated
    units: int
    saturated: int
    samples: int


def unit_outside(bounds: tuple[float, float]) -> str:
    """The statistic key a saturation rule reads for its bounds: `unit_outside(lo,hi)`."""
    return Statistic("unit_outside", (float(bounds[0]), float(bounds[1]))).key


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


FUNCTIONS: dict[str, Callable[[float], float]] = {"tanh": math.tanh, "sigmoid": _sigmoid}


class SaturationTracker:
    """Per layer, a window of per-unit saturation counts over the last `patience` saved steps."""

    def __init__(self, kind: str, lo: float, hi: float, patience: int):
        self.kind = kind
        self.lo, self.hi = lo, hi
        self.fn = FUNCTIONS[kind]
        self.patience = patience
        self.windows: dict[str, UnitWindow] = {}
        self.key = unit_outside((lo, hi))
        self.without: set[str] = set()  # layers seen with neither raw tensors nor `key`

    def short(self) -> str | None:
        """For `undecided()`: layers that had data, but neither raw tensors nor the statistic
        of these bounds."""
        if self.windows or not self.without:
            return None
        return (
            f"{len(self.without)} {self.kind} layer(s) have no raw tensors and no {self.key} statistic "
            f"(the run recorded other bounds, or none): only raw tensors can answer for these bounds"
        )

    def counts(self, view: TrialView, name: str, step: int) -> tuple[np.ndarray, int] | None:
        """Per unit, the samples (or elements) where it is saturated, and out of how many."""
        x = view.raw(name, step)
        if x is not None:
            if x.size == 0 or x.dtype.kind not in "fc":
                return None
            x = np.asarray(x)
            if is_input(name):
                mask = (x < self.lo) | (x > self.hi)
            else:  # only the output was saved: invert through the function
                mask = (x <= self.fn(self.lo)) | (x >= self.fn(self.hi))
            return unit_fraction(mask)
        outside = view.saved_statistic(name, step, self.key) if is_input(name) else None
        count = view.saved_statistic(name, step, "count")
        if (
            not isinstance(outside, np.ndarray)
            or not isinstance(count, float)
            or not outside.size
            or count < 1
        ):
            self.without.add(name)
            return None
        return outside.astype(np.int64).reshape(-1), max(1, round(count / outside.size))

    def update(
        self,
        view: TrialView,
        step: int,
        names: list[str],
        threshold_inactivity: float,
        threshold_layer: float,
    ) -> list[Saturated]:
        found = []
        for layer, name in sorted(pick_per_layer(names, prefer="input").items()):
            got = self.counts(view, name, step)
            if got is None:
                continue
            counts, samples = got
            win = self.windows.setdefault(layer, UnitWindow(self.patience))
            win.add(counts, samples)
            if not win.full:
                continue
            active = 100.0 * (1.0 - win.fraction())  # % of samples where the unit is not saturated
            sat = active <= threshold_inactivity
            share = 100.0 * sat.sum() / sat.size
            if share > threshold_layer:
                found.append(Saturated(layer, name, share, sat.size, int(sat.sum()), sum(win.samples)))
        return found


def describe(
    kind: str, found: list[Saturated], lo: float, hi: float, threshold_inactivity: float, patience: int
) -> str:
    parts = [
        f"{s.layer}: {s.saturated} of {s.units} units ({s.share:.0f}%) with inputs outside "
        f"[{lo:g}, {hi:g}] in at least {100 - threshold_inactivity:g}% of {s.samples} samples"
        for s in found
    ]
    return (
        f"saturated {kind} over the last {patience} saved steps: {'; '.join(parts)}; there the {kind} "
        "is flat, its gradient is ~0, and these units stop learning"
    )


class SaturationRule(Protocol):
    """What `check_saturation` reads of the rule: its thresholds, `first` and `finding`."""

    threshold_inactivity: float
    threshold_layer: float
    patience: int

    def first(self, key: Any = None) -> bool: ...

    def finding(
        self, trial: TrialView | None, step: int, message: str, tensors: Iterable[str] = ()
    ) -> Finding: ...


def check_saturation(
    rule: SaturationRule, view: TrialView, step: int, tracker: SaturationTracker
) -> Finding | None:
    """One step of a saturation rule: the finding for layers newly saturated, or None; the
    tracker holds the kind and bounds."""
    names = view.names(f"{tracker.kind}_activations", step=step)
    if not names:
        return None
    found = tracker.update(view, step, names, rule.threshold_inactivity, rule.threshold_layer)
    found = [s for s in found if rule.first(s.layer)]
    if not found:
        return None
    text = describe(tracker.kind, found, tracker.lo, tracker.hi, rule.threshold_inactivity, rule.patience)
    return rule.finding(view, step, text, tensors=[s.tensor for s in found])


SUGGESTION = (
    "Normalize the inputs (zero mean, unit variance), use a smaller init (xavier_uniform_ for "
    "tanh/sigmoid), add BatchNorm/LayerNorm before the activation, lower the learning rate, or "
    "switch hidden layers to ReLU-family activations."
)
