"""confusion: classes the model confuses, from the confusion matrix."""

from __future__ import annotations

from collections import deque

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.labels import pairs
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
    labels are reported by `class_imbalance` and `overfit`.
    """

    needs = ("labels", "predictions")
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
        # per mode, the last `samples` (labels, predictions, step): the matrix judged at the end
        self._recent: dict[Mode, deque[tuple[np.ndarray, np.ndarray, int]]] = {}
        self._names: list[str] = []  # the label and prediction tensors read

    def needed_collections(self) -> tuple[str, ...]:
        return (self.labels_collection, self.predictions_collection)

    def check(self, trial: TrialView, step: int) -> None:
        mode = trial.mode(step)
        got = pairs(
            trial, step,
            trial.names(self.labels_collection, step=step),
            trial.names(self.predictions_collection, step=step),
        )  # fmt: skip
        if got is None or got[1] is None:
            return None
        if not self._recent:
            self._names = (
                trial.names(self.labels_collection, step=step)[:1]
                + trial.names(self.predictions_collection, step=step)[:1]
            )
        y, p, _ = got
        q = self._recent.setdefault(mode, deque())
        if mode == Mode.EVAL and q and q[-1][2] != step - 1:
            q.clear()  # a new evaluation pass: judge the model as it is now
        q.append((y, p, step))
        while sum(len(a) for a, _, _ in q) - len(q[0][0]) >= self.samples:
            q.popleft()
        return None

    def unchecked(self) -> str | None:
        if not self._recent:
            return "no class labels with predictions were found"
        return None

    def finish(self, trial: TrialView) -> Finding | None:
        recent = self._recent
        if not recent:
            return None
        mode = Mode.EVAL if Mode.EVAL in recent else next(iter(recent))
        q = recent[mode]
        ys = np.concatenate([a for a, _, _ in q])
        ps = np.concatenate([b for _, b, _ in q])
        last_step = q[-1][2]
        keep = (ys >= 0) & (ps >= 0)
        ys, ps = ys[keep], ps[keep]
        if not len(ys):
            return None
        k = int(max(ys.max(), ps.max())) + 1
        if self.category_no:
            keep = (ys < self.category_no) & (ps < self.category_no)
            ys, ps, k = ys[keep], ps[keep], self.category_no
        m = np.zeros((k, k), dtype=np.int64)
        np.add.at(m, (ys, ps), 1)
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
            f"confusion on the last {len(ys)} {mode.name.lower()} predictions: {'; '.join(bad[:8])} "
            f"(diagonal share below {self.min_diag:g} or an off-diagonal share above {self.max_off_diag:g}); "
            f"accuracy {100 * np.trace(m) / max(1, m.sum()):.0f}%",
            tensors=self._names,
        )  # fmt: skip
