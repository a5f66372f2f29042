"""What the language-model rules read: the `lm/<key>` counts a PyTorch hook records at
statistics steps from the cross-entropy behind the loss (`mldbg.frameworks.torch_lm` lists
them), and the one decision they share: at which offset the targets copy the input ids.

Offsets: a causal language model's target at position t is the input token at t + 1 (the
labels shifted by one). Targets equal to the inputs at offset 0 mean the labels were not
shifted (the model is asked to copy the token it is given); at offset 2, they were shifted
twice (Hugging Face models shift `labels=` themselves: shifting them before is the usual way).

The decision is a comparison of offsets, not a threshold on one: data whose tokens repeat
(a run of one character, a padded tail) aligns at every offset, and is judged at none. The
targets align at offset k when at least `share` of the valid targets (not ignored) that have
a token k positions later equal it, and the next best offset's share is `margin` below.
Chance alignment of a token stream with itself at the wrong offset is the stream's repeat
rate (x[t] == x[t+1]): a few percent for text, far below 0.9 - 0.3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule
from mldbg.rules.columns import quiet_prefix
from mldbg.rules.view import TrialView

PREFIX = "lm/"
KEYS = (
    "align_0", "eligible_0", "align_1_0", "eligible_1_0", "align_2_0", "eligible_2_0",
    "align_1_1", "eligible_1_1", "align_2_1", "eligible_2_1",
    "last_loss_0", "last_0", "rest_loss_0", "rest_0", "last_loss_1", "last_1", "rest_loss_1", "rest_1",
    "rows", "valid", "pad_rows", "pad_trailing", "pad_all", "pad_loss", "loss_sum", "pad_id", "pad_weight",
    "prob_rows", "prob_total", "prob_softmax",
    "leak_0", "own_0", "positions_0", "leak_1", "own_1", "positions_1",
)  # fmt: skip
SHARE = 0.9  # the share of targets that equal the input at the aligned offset
MARGIN = 0.3  # ... above every other offset's share
MIN_TARGETS = 32  # valid targets with a position k later, at each offset judged


def counts(trial: TrialView, step: int) -> dict[str, float]:
    """The `lm/` counts saved at `step` (finite ones only; empty when none). One lookup at a
    step without them (`prob_total` is recorded whenever the others are)."""
    found: dict[str, float] = {}
    if (
        not trial.has_tensor(PREFIX + "prob_total")
        or trial.saved_statistic(PREFIX + "prob_total", step, "sum") is None
    ):
        return found
    for key in KEYS:
        value = trial.saved_statistic(PREFIX + key, step, "sum")
        if isinstance(value, float) and math.isfinite(value):
            found[key] = value
    return found


def recorded(trial: TrialView) -> bool:
    """Does the run hold language-model statistics at all?"""
    return trial.has_tensor(PREFIX + "prob_total")


@dataclass(frozen=True)
class Alignment:
    """The offset at which the targets equal the input ids, along `axis` (None for offset
    0, the same along both), with the share of each offset judged."""

    offset: int
    axis: int | None
    shares: dict[str, float]

    def describe(self) -> str:
        return ", ".join(f"offset {k}: {v:.0%}" for k, v in self.shares.items())

    def tensor(self) -> str:
        """The count that shows it: `lm/align_0`, or `lm/align_<k>_<axis>`."""
        return f"{PREFIX}align_{self.offset}" + ("" if self.axis is None else f"_{self.axis}")


def _share(c: dict[str, float], align: str, eligible: str) -> float | None:
    n = c.get(eligible, 0.0)
    return c[align] / n if n >= MIN_TARGETS and align in c else None


def alignment(c: dict[str, float], share: float = SHARE, margin: float = MARGIN) -> Alignment | None:
    """The offset (0, 1 or 2) at which the targets copy the inputs, or None when none stands
    out (targets that are not the inputs' tokens, a repetitive stream, too few targets)."""
    s0 = _share(c, "align_0", "eligible_0")
    if s0 is None:
        return None
    best: Alignment | None = None
    for axis in (0, 1):
        s1 = _share(c, f"align_1_{axis}", f"eligible_1_{axis}")
        s2 = _share(c, f"align_2_{axis}", f"eligible_2_{axis}")
        shares = {"0": s0, "1": s1, "2": s2}
        for k, s in ((1, s1), (2, s2)):
            if s is None or s < share:
                continue
            others = [v for key, v in shares.items() if key != str(k) and v is not None]
            if others and s - max(others) >= margin:
                found = Alignment(k, axis, {key: v for key, v in shares.items() if v is not None})
                best = found if best is None or s > best.shares[str(best.offset)] else best
    if best is not None:
        return best
    if s0 >= share:
        later = [
            v
            for axis in (0, 1)
            for k in (1, 2)
            if (v := _share(c, f"align_{k}_{axis}", f"eligible_{k}_{axis}")) is not None
        ]
        if later and s0 - max(later) >= margin:
            time = max((0, 1), key=lambda a: c.get(f"eligible_1_{a}", 0.0))
            seen: dict[str, float] = {"0": s0}
            for k in (1, 2):
                s = _share(c, f"align_{k}_{time}", f"eligible_{k}_{time}")
                if s is not None:
                    seen[str(k)] = s
            return Alignment(0, None, seen)
    return None


class CountsRule(Rule):
    """A language-model rule: judged on the `lm/` counts of each TRAIN statistics step (`judge`),
    it fires once its condition held at `patience` such steps in a row, and says so (`describe`)."""

    patience: int = 2

    def reset(self) -> None:
        super().reset()
        self._streak = 0

    def judge(self, c: dict[str, float]) -> Any:
        """None: the counts cannot judge this step (the streak stays as it is); falsy: healthy
        (the streak ends); else the evidence `describe` words."""
        raise NotImplementedError

    def describe(self, step: int, c: dict[str, float], evidence: Any) -> tuple[str, list[str]]:
        """The finding's message and tensors at `step`, from its counts and `judge`'s evidence."""
        raise NotImplementedError

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading `steps` where `check` does nothing: a step that is not a training
        step, or that holds no `lm/` counts (`judge` of no counts is None: the streak stays)."""
        cols = trial.columns.tensor(PREFIX + "prob_total")
        if cols is None or not len(cols.steps):
            return len(steps)
        present = cols.at(steps) >= 0
        if not present.any():
            return len(steps)
        modes, _ = trial.columns.modes(steps)
        return quiet_prefix(present & (modes == int(Mode.TRAIN)))

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        c = counts(trial, step)
        evidence = self.judge(c)
        if evidence is None:
            return None
        self._streak = self._streak + 1 if evidence else 0
        if self._streak < self.patience or not self.first():
            return None
        message, tensors = self.describe(step, c, evidence)
        return self.finding(trial, step, message, tensors=tensors)


class MisalignedLabels(CountsRule):
    """The decision `labels_not_shifted` and `labels_shifted_twice` share: the targets copy the
    inputs at `offset` (`alignment`, with `share` and `margin`). A subclass names its offset
    and says what it means (`explain`)."""

    offset: ClassVar[int]
    share: float = SHARE
    margin: float = MARGIN
    cause = "lm_labels_misaligned"

    def explain(self, found: Alignment) -> str:
        raise NotImplementedError

    def judge(self, c: dict[str, float]) -> Alignment | bool | None:
        if "eligible_0" not in c:
            return None
        found = alignment(c, self.share, self.margin)
        return found if found is not None and found.offset == self.offset else False

    def describe(self, step: int, c: dict[str, float], evidence: Alignment) -> tuple[str, list[str]]:
        return f"{evidence.shares[str(self.offset)]:.0%} {self.explain(evidence)}", [evidence.tensor()]

    def _streak_text(self, found: Alignment) -> str:
        return f"({found.describe()}; {self._streak} statistics steps in a row)"
