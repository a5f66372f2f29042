"""confusion: classes the model confuses, from the confusion matrix."""

from __future__ import annotations

from collections import deque

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.view import TrialView


@register
class Confusion(Rule):
    """In the confusion matrix of labels vs predictions at the end of training (the last
    `samples` validation predictions, or training ones if there was no evaluation), a class's
    diagonal share (recall) is below `min_diag`, or one off-diagonal share is above
    `max_off_diag` (the model systematically takes class i for class j).

    SageMaker's defaults (0.9 and 0.1) report a healthy 10-class model at 85% accuracy, and
    every model early in training; mldbg judges the last evaluation pass at the end of
    training, with `min_diag=0.3` (a class recognized less than 30% of the time) and
    `max_off_diag=0.5` (a class taken for one other class more often than not). Rows with fewer than
    10 samples are not judged. `category_no` caps the classes considered. Not in the default
    set: what recall is acceptable depends on the task (a 10-class model still learning its
    rare classes is healthy); run it by name with thresholds for yours. Imbalance and random
    labels are reported by `class_imbalance` and `overfit`. Reads the `confusion` statistic
    of the labels (a two-line hook records it every step for up to 64 classes), or counts it
    from raw labels and predictions.
    """

    needs = ("labels", "predictions")
    reads = {"labels": ("confusion",)}
    default = False
    category_no: int | None = None
    min_diag: float = 0.3
    max_off_diag: float = 0.5
    labels_collection: str = "labels"
    predictions_collection: str = "predictions"
    samples: int = 1000
    suggestion = (
        "Look at the confused classes' examples: are their labels right, are they separable with the "
        "inputs given? Re-sample or weight rare classes, train longer, or give the model more capacity."
    )

    def reset(self) -> None:
        super().reset()
        # per mode, the last `samples` (confusion matrix, labels, step): the matrix judged at the end
        self._recent: dict[Mode, deque[tuple[np.ndarray, int, int]]] = {}
        self._without = 0  # steps with labels and predictions but no confusion matrix (too many classes)
        self._names: list[str] = []  # the label and prediction tensors read

    def needed_collections(self) -> tuple[str, ...]:
        return (self.labels_collection, self.predictions_collection)

    def check(self, trial: TrialView, step: int) -> None:
        mode = trial.mode(step)
        labels = trial.names(self.labels_collection, step=step)
        preds = trial.names(self.predictions_collection, step=step)
        if not labels or not preds:
            return None
        got = trial.class_statistics(labels[0], preds[0], step)
        if got is None or got.correct is None:
            return None
        if got.confusion is None:
            self._without += 1
            return None
        if not self._recent:
            self._names = (
                trial.names(self.labels_collection, step=step)[:1]
                + trial.names(self.predictions_collection, step=step)[:1]
            )
        q = self._recent.setdefault(mode, deque())
        if mode == Mode.EVAL and q and q[-1][2] != step - 1:
            q.clear()  # a new evaluation pass: judge the model as it is now
        q.append((got.confusion, got.samples, step))
        while sum(n for _, n, _ in q) - q[0][1] >= self.samples:
            q.popleft()
        return None

    def unchecked(self) -> str | None:
        if not self._recent and not self._without:
            return "no class labels with predictions were found"
        return None

    def undecided(self) -> str | None:
        if not self._recent and self._without:
            return f"labels and predictions at {self._without} steps, but no confusion matrix (more than 64 classes)"
        return None

    def finish(self, trial: TrialView) -> Finding | None:
        recent = self._recent
        if not recent:
            return None
        mode = Mode.EVAL if Mode.EVAL in recent else next(iter(recent))
        q = recent[mode]
        last_step = q[-1][2]
        k = max(len(c) for c, _, _ in q)
        m = np.zeros((k, k), dtype=np.int64)
        for c, _, _ in q:  # the class count may grow between steps (ids seen so far)
            m[: len(c), : len(c)] += c
        if self.category_no:
            k = min(k, self.category_no)
            m = m[:k, :k]
        if not m.sum():
            return None
        bad = []
        for i in range(k):
            row = m[i].sum()
            if row < 10:
                continue
            diag = m[i, i] / row
            off = m[i].astype(float) / row
            off[i] = 0
            j = int(off.argmax())
            if diag < self.min_diag or off[j] > self.max_off_diag:
                bad.append(
                    f"class {i}: {100 * diag:.0f}% right, {100 * off[j]:.0f}% taken for class {j} ({row} samples)"
                )
        if not bad or not self.first():
            return None
        return self.finding(
            trial, last_step,
            f"confusion on the last {int(m.sum())} {mode.name.lower()} predictions: {'; '.join(bad[:8])} "
            f"(diagonal share below {self.min_diag:g} or an off-diagonal share above {self.max_off_diag:g}); "
            f"accuracy {100 * np.trace(m) / max(1, m.sum()):.0f}%",
            tensors=self._names,
        )  # fmt: skip
