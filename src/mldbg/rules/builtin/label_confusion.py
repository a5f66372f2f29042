"""label_confusion: predictions confuse particular class pairs far beyond the model's error."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, aligned, quiet_prefix
from mldbg.rules.view import TrialView
from mldbg.store.statistics import vector_name

_HORIZON = 512  # steps one call of the fast path looks at


class _Table(NamedTuple):
    """Per saved step of the run: its mode and whether `check` counts its labels from the
    raw tensors; the steps (indices) with a saved confusion matrix, the matrices, their sums."""

    steps: np.ndarray
    modes: np.ndarray
    raw: np.ndarray
    rows: np.ndarray
    confusion: np.ndarray
    sums: np.ndarray


@register
class LabelConfusion(Rule):
    """Predictions systematically confuse particular class pairs: in the confusion matrix of
    the labels seen so far (per mode, the first `samples` left out: the model is untrained
    then; judged every `samples` labels), a share of more than `min_share` of class a's
    samples is predicted as one class b, that cell holds most of class a's errors (a pair,
    not a hard class), and it is more than `ratio` times the error rate of a typical other
    class (the median over classes: what the model's overall error explains); at `patience` consecutive judgements.

    A healthy classifier errs on many pairs, each about as often as its overall error says
    (a 10-class model at 85% accuracy confuses every class a little). A pair far above that
    is label noise concentrated on it (7s labelled 1, 3s labelled 8, two class ids swapped in
    part of the data), or two classes the data cannot tell apart. Reads the `confusion`
    statistic of the labels (the two-line hook records it for classification losses with up
    to 64 classes), or counts it from raw labels and predictions.
    """

    needs = ("labels",)
    reads = {"labels": ("confusion",)}
    samples: int = 1000
    min_share: float = 0.2
    ratio: float = 2.5
    patience: int = 2
    min_count: int = 20
    suggestion = (
        "Audit the labels of that pair: sample training examples labelled a and predicted b (and b "
        "predicted a) and look at them; fix or drop mislabelled ones (cleanlab finds them), check the "
        "label mapping (class ids swapped in part of the data), and if the classes truly look alike, "
        "add data or features that separate them."
    )

    def reset(self) -> None:
        super().reset()
        self._window: dict[str, np.ndarray] = {}  # mode -> confusion summed since the first window
        self._seen: dict[str, int] = {}  # mode -> labels counted since the last judgement
        self._windows: dict[str, int] = {}  # mode -> windows closed
        self._streak: dict[str, tuple[tuple[int, int], int]] = {}  # mode -> (pair, windows in a row)
        # the fast path's reading of the run (not state: what the trial holds), made once per load
        self._table: tuple[tuple[int, int], _Table | None] | None = None

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`), for one labels and one predictions tensor:
        the leading steps before a judgement (the step whose labels bring a mode's count to
        `samples`), their saved confusion matrices added to the windows. Counts to compute
        from raw labels, or matrices of several shapes, are left to `check`."""
        table = self._read(trial)
        if table is None or not len(steps):
            return 0
        i0 = int(np.searchsorted(table.steps, steps[0]))
        steps = steps[:_HORIZON]  # a window closes every few dozen steps: look no further
        if not np.array_equal(table.steps[i0 : i0 + len(steps)], steps):
            return 0  # not a run of consecutive saved steps (the runner passes those)
        modes = table.modes[i0 : i0 + len(steps)]
        cut = quiet_prefix(table.raw[i0 : i0 + len(steps)])  # counted from the raw labels: check()
        lo, hi = np.searchsorted(table.rows, [i0, i0 + cut])
        rows, c, sums = table.rows[lo:hi] - i0, table.confusion[lo:hi], table.sums[lo:hi]
        if not len(rows):
            return cut
        for m in np.unique(modes[rows]).tolist():
            mine = modes[rows] == m
            key = Mode(m).name
            total = self._seen.get(key, 0) + np.cumsum(sums[mine])
            full = np.flatnonzero(total >= self.samples)
            if len(full):
                cut = min(cut, int(rows[mine][full[0]]))
        for m in np.unique(modes[rows]).tolist():
            mine = (modes[rows] == m) & (rows < cut)
            if not mine.any():
                continue
            key = Mode(m).name
            acc = self._window.get(key)
            if acc is None or acc.shape != c.shape[1:]:
                acc = np.zeros(c.shape[1:], dtype=np.int64)
            self._window[key] = acc + c[mine].sum(axis=0)
            self._seen[key] = self._seen.get(key, 0) + int(sums[mine].sum())
        return cut

    def _read(self, trial: TrialView) -> _Table | None:
        """The run's labels as the fast path reads them (once per load of the trial); None
        when it declines: not one labels and one predictions tensor, or confusion matrices of
        several shapes."""
        key = (id(trial.trial), trial.trial.loaded_records)
        if self._table is not None and self._table[0] == key:
            return self._table[1]
        found = None
        labels, preds = trial.names("labels"), trial.names("predictions")
        if len(labels) == 1 and len(preds) == 1:
            steps = np.asarray(trial.steps(), dtype=np.int64)
            modes, _ = trial.columns.modes(steps)
            judged = (modes == int(Mode.TRAIN)) | (modes == int(Mode.EVAL))
            y, p = Over(trial, labels[0], steps), Over(trial, preds[0], steps)
            counts = Over(trial, vector_name(labels[0], "class_counts"), steps)
            matrix = Over(trial, vector_name(labels[0], "confusion"), steps)
            both = judged & y.present & p.present
            rows = np.flatnonzero(both & counts.raw & matrix.raw)
            stacked = trial.columns.values(vector_name(labels[0], "confusion")) if len(rows) else None
            if stacked is not None or not len(rows):
                c = (
                    stacked[1][aligned(stacked[0], steps[rows])].astype(np.int64)
                    if stacked is not None
                    else np.zeros((0, 0, 0), dtype=np.int64)
                )
                sums = c.reshape(len(rows), -1).sum(axis=1) if len(rows) else np.zeros(0, dtype=np.int64)
                found = _Table(steps, modes, both & ~counts.raw & y.raw, rows, c, sums)
        self._table = (key, found)
        return found

    def check(self, trial: TrialView, step: int) -> Finding | None:
        mode = trial.mode(step)
        if mode not in (Mode.TRAIN, Mode.EVAL):
            return None
        labels = trial.names("labels", step=step)
        preds = trial.names("predictions", step=step)
        if not labels or not preds:
            return None
        got = trial.class_statistics(labels[0], preds[0], step)
        if got is None or got.confusion is None:
            return None
        c = np.asarray(got.confusion, dtype=np.int64)
        key = mode.name
        acc = self._window.get(key)
        if acc is None or acc.shape != c.shape:
            acc = np.zeros_like(c)
        acc = acc + c
        self._window[key] = acc
        self._seen[key] = self._seen.get(key, 0) + int(c.sum())
        if self._seen[key] < self.samples:
            return None
        self._seen[key] = 0
        self._windows[key] = self._windows.get(key, 0) + 1
        if self._windows[key] == 1:
            del self._window[key]  # the untrained model's window: left out
            return None
        found = self._pair(acc)
        if found is None:
            self._streak.pop(key, None)
            return None
        pair, share, others, count, row = found
        prev = self._streak.get(key)
        run = prev[1] + 1 if prev is not None and prev[0] == pair else 1
        self._streak[key] = (pair, run)
        if run < self.patience or not self.first(pair):
            return None
        a, b = pair
        return self.finding(
            trial, step,
            f"{100 * share:.0f}% of class {a}'s {row} samples are predicted as class {b} ({count} of "
            f"{int(acc.sum())} {key} labels of {labels[0]} since the first {self.samples}; more than {100 * self.min_share:g}% and "
            f"{share / max(others, 1e-9):.1f}x the {100 * others:.1f}% error rate of a typical other class, in "
            f"{run} judgements in a row): a systematic confusion of the pair {a} -> {b}",
            tensors=[labels[0], preds[0]],
        )  # fmt: skip

    def _pair(self, c: np.ndarray) -> tuple[tuple[int, int], float, float, int, int] | None:
        """The most confused pair (a, b) beyond the model's error, with its share of a's
        samples, the other classes' error rate, its count and a's count; None if none."""
        rows = c.sum(axis=1)
        total, right = int(c.sum()), int(np.trace(c))
        if total == 0 or right < total / 2:
            return None  # a model this poor errs everywhere: nothing to single out
        off = c.copy()
        np.fill_diagonal(off, 0)
        best = None
        big = np.flatnonzero(rows >= max(1, self.min_count)).tolist()
        err = {k: 1.0 - c[k, k] / rows[k] for k in big}
        for a in big:
            b = int(np.argmax(off[a]))
            count = int(off[a, b])
            errors = int(off[a].sum())
            if count < self.min_count or 2 * count < errors:
                continue
            share = count / rows[a]
            rest = [err[k] for k in big if k != a]
            others = float(np.median(rest)) if rest else 0.0  # a typical class's error rate
            if share > self.min_share and share > self.ratio * others and (best is None or share > best[1]):
                best = ((a, b), float(share), float(others), count, int(rows[a]))
        return best
