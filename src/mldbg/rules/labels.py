"""Class ids from label and prediction tensors, whatever their layout.

Labels may be class ids (N,), one-hot or probabilities (N, C), or per-position ids (N, H, W)
with logits (N, C, H, W) (PyTorch puts classes on axis 1, Keras on the last axis). A float
label that is not integer-valued, takes more than `MAX_FLOAT_CLASSES` values, or comes with
real-valued predictions of its own shape is a regression target: no classes.

Rules judge classes by their counts (`ClassStats`): the `class_counts`, `class_correct` and
`confusion` statistics a hook records every step (`mldbg.store.statistics`), or the same
counts taken here from raw labels and predictions (`class_stats_from_raw`). Counts add up
exactly across steps, so a rule's windows are sums.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mldbg.config import Mode

if TYPE_CHECKING:
    from mldbg.rules.view import TrialView

MAX_FLOAT_CLASSES = 32  # integer-valued float targets with more distinct values: a regression
MAX_IDS = 1 << 16  # class ids counted one by one; larger ids go to the outside bucket
MAX_CONFUSION = 1024  # classes above which no confusion matrix is counted from raw tensors
PRIOR_STEPS = 200  # saved training steps of the labels read for their class distribution (`class_prior`)
PRIOR_LABELS = 100  # labels it needs counted


@dataclass
class ClassStats:
    """Class counts of one step. Vectors have C + 1 entries: one per class id in [0, C), the
    last for ids outside it (an ignore_index, a bad label); `confusion` is (C, C), rows the
    label, columns the predicted class. `classes` is the number of classes the predictions
    score when known (None: only the ids seen say)."""

    labels: np.ndarray
    classes: int | None
    predicted: np.ndarray | None = None
    correct: np.ndarray | None = None
    confusion: np.ndarray | None = None

    @property
    def samples(self) -> int:
        """Labels counted (ids outside [0, C) included)."""
        return int(self.labels.sum())


def _bincount(ids: np.ndarray, c: int, weights: np.ndarray | None = None) -> np.ndarray:
    bucket = np.where((ids >= 0) & (ids < c), ids, c)
    return np.bincount(bucket, weights=weights, minlength=c + 1).astype(np.int64)


def _paired(
    labels: np.ndarray, y: np.ndarray, predictions: np.ndarray | None
) -> tuple[np.ndarray | None, int | None] | None:
    """The predicted ids that pair with the label ids `y` (None when their shapes differ or
    there are no predictions) and the number of classes; None for a regression target."""
    if predictions is None:
        return None, None
    if _regression(np.asarray(labels), np.asarray(predictions)):
        return None
    shape = tuple(np.asarray(labels).shape)
    p = predicted_ids(predictions, shape)
    return (None if p is not None and p.shape != y.shape else p), n_classes(predictions, shape)


def class_stats_from_raw(
    labels: np.ndarray, predictions: np.ndarray | None, argmax: bool = False
) -> ClassStats | None:
    """The counts of `ClassStats` from raw label and prediction tensors; None when the labels
    are not class ids (or are a regression target). Predictions whose ids do not pair up
    with the labels (another shape) count as absent."""
    y = label_ids(labels, argmax)
    if y is None:
        return None
    paired = _paired(labels, y, predictions)
    if paired is None:
        return None
    p, c = paired
    seen = [int(a.max()) + 1 for a in (y, p) if a is not None and a.size]
    k = max(c or 0, 1, min(max(seen, default=0), MAX_IDS))  # ids beyond MAX_IDS count as outside
    out = ClassStats(labels=_bincount(y, k), classes=c)
    if p is not None:
        out.predicted = _bincount(p, k)
        out.correct = _bincount(y, k, (y == p).astype(np.float64))
        if k <= MAX_CONFUSION:
            ok = (y >= 0) & (y < k) & (p >= 0) & (p < k)
            out.confusion = np.bincount(y[ok] * k + p[ok], minlength=k * k).reshape(k, k).astype(np.int64)
    return out


def label_ids(labels: np.ndarray, argmax: bool = False) -> np.ndarray | None:
    y = np.asarray(labels)
    if y.size == 0:
        return None
    if y.ndim >= 2 and y.shape[-1] > 1 and (argmax or (y.dtype.kind == "f" and np.all((y >= 0) & (y <= 1)))):
        return np.argmax(y, axis=-1).reshape(-1)  # one-hot or probabilities
    if y.ndim >= 2 and y.shape[-1] == 1:
        y = y[..., 0]
    if y.dtype.kind == "b":
        return y.astype(np.int64).reshape(-1)
    if y.dtype.kind in "iu":
        return y.astype(np.int64).reshape(-1)
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)) or y.min() < 0:
            return None
        if len(np.unique(y)) > MAX_FLOAT_CLASSES:
            return None
        return y.astype(np.int64).reshape(-1)
    return None


def predicted_ids(pred: np.ndarray, labels_shape: tuple[int, ...] | None = None) -> np.ndarray | None:
    p = np.asarray(pred)
    if p.size == 0:
        return None
    if p.dtype.kind in "iub":
        return p.astype(np.int64).reshape(-1)
    if p.dtype.kind != "f":
        return None
    if labels_shape is not None and p.ndim == len(labels_shape) + 1:
        for axis in (1, -1):
            if tuple(np.delete(np.asarray(p.shape), axis)) == tuple(labels_shape):
                return np.argmax(p, axis=axis).reshape(-1)
    if p.ndim >= 2 and p.shape[-1] > 1:
        return np.argmax(p, axis=-1).reshape(-1)
    if p.ndim >= 2 and p.shape[-1] == 1:
        p = p[..., 0]
    finite = p[np.isfinite(p)]
    if finite.size and finite.min() >= 0 and finite.max() <= 1:
        return (p > 0.5).astype(np.int64).reshape(-1)  # binary probabilities
    return (p > 0).astype(np.int64).reshape(-1)  # binary logits


def n_classes(pred: np.ndarray | None, labels_shape: tuple[int, ...] | None = None) -> int | None:
    """The number of classes a prediction tensor scores, when it says."""
    if pred is None:
        return None
    p = np.asarray(pred)
    if p.dtype.kind != "f":
        return None
    if labels_shape is not None and p.ndim == len(labels_shape) + 1:
        for axis in (1, -1):
            if tuple(np.delete(np.asarray(p.shape), axis)) == tuple(labels_shape):
                return int(p.shape[axis])
    if p.ndim >= 2 and p.shape[-1] > 1:
        return int(p.shape[-1])
    return 2 if p.ndim >= 1 else None


def pairs(view: TrialView, step: int, labels_names: list[str], pred_names: list[str], argmax: bool = False):
    """(label ids, predicted ids or None, number of classes or None) at a step; None when the
    labels are not class ids."""
    if not labels_names:
        return None
    y_raw = view.raw(labels_names[0], step)
    if y_raw is None:
        return None
    y = label_ids(y_raw, argmax)
    if y is None:
        return None
    paired = _paired(y_raw, y, view.raw(pred_names[0], step) if pred_names else None)
    if paired is None:
        return None
    return y, *paired


def _regression(y: np.ndarray, p: np.ndarray) -> bool:
    """Float targets predicted by real values of the same shape (not probabilities)."""
    if y.dtype.kind != "f" or p.dtype.kind != "f" or p.size == 0:
        return False
    if p.shape != y.shape and p.reshape(-1).shape != y.reshape(-1).shape:
        return False
    finite = p[np.isfinite(p)]
    return bool(finite.size) and (finite.min() < 0 or finite.max() > 1)


def per_position(view: TrialView, step: int, labels: tuple[str, tuple[int, ...]] | None) -> bool:
    """Whether labels of layout `labels` ((dtype kind, shape), `TrialView.layout`) hold one id
    per position of an integer model input of (batch, length > 1) at `step`: as many labels as
    its batch x length positions, flattened or not. A language model's next-token targets
    (`logits.view(-1, vocabulary)`): tokens of a corpus, not one class per sample."""
    if labels is None or labels[0] not in "iu":
        return False
    size = math.prod(labels[1])
    for name in view.names("inputs", step=step):
        x = view.layout(name, step)
        if x is None or x[0] not in "iu" or len(x[1]) < 2 or x[1][1] <= 1:
            continue
        if size in (math.prod(x[1][:2]), math.prod(x[1])):
            return True
    return False


def step_confusion(view: TrialView, step: int, labels: str, predictions: str) -> np.ndarray | None:
    """The confusion matrix (labels x predictions, counts) of `step`'s `labels` and
    `predictions`: the statistic the hook saved (`confusion_steps`), else counted from their
    raw tensors; None where the step has neither."""
    saved = view.saved_statistic(labels, step, "confusion_steps")
    if isinstance(saved, np.ndarray):
        return np.asarray(saved, dtype=np.int64)
    got = view.class_statistics(labels, predictions, step)
    if got is None or got.confusion is None:
        return None
    return np.asarray(got.confusion, dtype=np.int64)


class ConfusionWindow:
    """The confusion matrix (rows: labels, columns: predictions) of one mode's last `size`
    labels, in whole steps (the oldest step leaves once the others hold `size`), with the
    labels pushed since the matrices took this shape and since the last judgement."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.steps: deque[np.ndarray] = deque()
        self.sums: deque[int] = deque()
        self.matrix: np.ndarray | None = None
        self.total = 0  # labels in the window
        self.pushed = 0  # labels pushed since the matrices took this shape
        self.fresh = 0  # labels pushed since the last judgement

    def push(self, c: np.ndarray, size: int) -> None:
        if self.matrix is None or self.matrix.shape != c.shape:
            self.clear()  # another class count: start over
            self.matrix = np.zeros(c.shape, dtype=np.int64)
        n = int(c.sum())
        self.steps.append(c)
        self.sums.append(n)
        self.matrix += c
        self.total += n
        self.pushed += n
        self.fresh += n
        while self.total - self.sums[0] >= size:
            self.matrix -= self.steps.popleft()
            self.total -= self.sums.popleft()


def class_prior(view: TrialView, labels: str) -> tuple[float, int, int] | None:
    """(the entropy in nats of the class distribution of `labels` over its saved training
    steps, the classes seen, the labels counted): the cross-entropy of predicting each class at
    its frequency. Read at up to `PRIOR_STEPS` of those steps, evenly spread; None without
    class counts there, with fewer than `PRIOR_LABELS` labels or one class."""
    cols = view.columns.tensor(labels)
    if cols is None or not len(cols.steps):
        return None
    modes, _ = view.columns.modes(cols.steps)
    steps = cols.steps[modes == int(Mode.TRAIN)]
    if len(steps) > PRIOR_STEPS:
        steps = steps[np.linspace(0, len(steps) - 1, PRIOR_STEPS).astype(int)]
    total: np.ndarray | None = None
    for step in steps.tolist():
        got = view.class_statistics(labels, None, step)
        if got is None:
            continue
        counts = np.asarray(got.labels[:-1], dtype=np.float64)  # the last: ids outside the classes
        if total is not None and len(counts) != len(total):
            return None
        total = counts if total is None else total + counts
    if total is None or total.sum() < PRIOR_LABELS or np.count_nonzero(total) < 2:
        return None
    p = total[total > 0] / total.sum()
    return float(-(p * np.log(p)).sum()), int(np.count_nonzero(total)), int(total.sum())
