"""label_confusion: predictions confuse particular class pairs far beyond the model's error."""

from __future__ import annotations

import math
from collections import deque
from typing import NamedTuple

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, aligned, quiet_prefix
from mldbg.rules.labels import ConfusionWindow, step_confusion
from mldbg.rules.view import TrialView
from mldbg.store.statistics import vector_name


class _Table(NamedTuple):
    """Per saved step of the run: its mode and whether `check` counts its labels from the
    raw tensors; the steps (indices) with a saved confusion matrix, the matrices, their sums."""

    steps: np.ndarray
    modes: np.ndarray
    raw: np.ndarray
    rows: np.ndarray
    confusion: np.ndarray
    sums: np.ndarray


class _Window(ConfusionWindow):
    """A mode's confusion window (`ConfusionWindow`) and, per pair, the judgements in a row
    that found it."""

    def clear(self) -> None:
        super().clear()
        self.streak: dict[tuple[int, int], int] = {}

    def snapshot(self) -> _Window:
        """A copy, to restore the window as it was (the fast path's judgement that reports)."""
        out = _Window()
        out.steps, out.sums = deque(self.steps), deque(self.sums)
        out.matrix = None if self.matrix is None else self.matrix.copy()
        out.total, out.pushed, out.fresh, out.streak = self.total, self.pushed, self.fresh, dict(self.streak)
        return out


def _window_at(
    old: list[np.ndarray],
    c: np.ndarray,
    sizes: np.ndarray,
    cum: np.ndarray,
    start: np.ndarray,
    e: int,
    pushed: np.ndarray,
    fresh: np.ndarray,
    streak: dict[tuple[int, int], int],
) -> _Window:
    """`LabelConfusion._advance`'s window after its first `e` (> 0) new entries (`old` the
    window's entries before them, `c` the new ones, `sizes` and `cum` the label counts and
    cumulative matrices of both, `start` each new entry's window start): as `push` leaves it."""
    q, i = len(old), e - 1
    j, g = int(start[i]), q + i
    w = _Window()
    w.steps = deque([*old[j:], *c[max(0, j - q) : i + 1]])
    w.sums = deque(sizes[j : g + 1].tolist())
    w.matrix = cum[g] - (cum[j - 1] if j else 0)
    w.total = int(sizes[j : g + 1].sum())
    w.pushed, w.fresh, w.streak = int(pushed[i]), int(fresh[i]), streak
    return w


@register
class LabelConfusion(Rule):
    """Predictions systematically confuse particular class pairs: in the confusion matrix of
    the last `window` labels of a mode (judged every `every` labels once `window` were seen),
    a share of more than `min_share` of class a's samples is predicted as one class b (at
    least `min_count` of them), that cell holds most of class a's errors and `dominance` times
    its next wrong class (a pair, not a hard class: a class the model has not learned yet errs
    towards every other class alike), and it is more than `ratio` times the error rate of a typical other class (the
    median over classes: what the model's overall error explains); the same pair found at
    `patience` consecutive judgements, none before global step `min_step` (a model learns its
    classes one by one at first: a full-batch GCN takes its 4th community for the 1st until
    step ~40, with the 200 nodes seen every step filling windows fast).

    And the confusion must go one way: label noise that turns some of a's labels into b
    leaves class b's predictions alone (b -> a at a typical class's error rate), while two
    classes the model cannot tell apart (a hard pair for its architecture: a separable CNN
    with global average pooling takes a 7x7 box for a cross 23% of the time and the cross
    for the box 25%; a flip augmentation that maps one diagonal onto the other) err both ways
    alike. A pair whose reverse count b -> a is likelier (binomial likelihood) at the share
    a -> b than at the typical class's error rate is such a pair, not reported. Ids swapped
    in part of the data err both ways too: the `confusion` rule's case. Two classes that
    overlap entirely still err one way (the model predicts the one it prefers for both, as
    one 10-D Gaussian cluster 0.5 apart from another does early on): reported.

    A healthy classifier errs on many pairs, each about as often as its overall error says
    (a 10-class model at 85% accuracy confuses every class a little), and its early
    confusions fade as it learns. A pair far above that, judgement after judgement, is label
    noise concentrated on it (7s labelled 1, 3s labelled 8, two class ids swapped in part of
    the data), or two classes the data cannot tell apart. A pair whose share is falling (lower
    in the window's newer half than in its older half, one-sided at 1%: `_fading`) is not
    reported at that judgement: it is an early confusion the model is unlearning; it keeps its
    streak and is reported once it no longer fades. Labels of two classes only are not
    judged: a binary classifier's errors on its rarer class are its threshold's, with no other
    class to single a pair out against. A model right on fewer than half
    of the window's labels is not judged (it errs everywhere). Reads the `confusion`
    statistic of the labels (the two-line hook records it for classification losses with up
    to 64 classes), or counts it from raw labels and predictions.

    Not in the default set: run it by name. A confusion matrix cannot tell label noise on a
    pair from a pair the task itself leaves ambiguous (a word that is a noun in some sentences
    and a verb in others: the tagger predicts the likelier tag for both, one way). On the four
    blind sets measured once (`benchmarks/results/calibration_first_looks.md`) it fired on 4 of
    245 healthy trainings (two sequence taggers, two classifiers) and on none of 72 buggy ones;
    pair noise it finds in 1-2 of 8 seeds on the CPU statistics budget.
    """

    default = False
    needs = ("labels",)
    reads = {"labels": ("confusion",)}
    window: int = 512
    every: int = 256
    min_share: float = 0.2
    ratio: float = 4.0
    patience: int = 2
    min_count: int = 10
    min_step: int = 50
    dominance: float = 1.5
    suggestion = (
        "Audit the labels of that pair: sample training examples labelled a and predicted b (and b "
        "predicted a) and look at them; fix or drop mislabelled ones (cleanlab finds them), check the "
        "label mapping (class ids swapped in part of the data), and if the classes truly look alike, "
        "add data or features that separate them."
    )

    def reset(self) -> None:
        super().reset()
        self._windows: dict[str, _Window] = {}  # mode -> its window
        # the fast path's reading of the run (not state: what the trial holds), made once per load
        self._table: tuple[tuple[int, int], _Table | None] | None = None

    def _due(self, w: _Window | None, n: int, shape: tuple[int, ...]) -> bool:
        """Whether pushing a matrix of `n` labels and this shape onto `w` brings a judgement."""
        if w is None or w.matrix is None or w.matrix.shape != shape:
            return n >= self.window and n >= self.every
        return w.pushed + n >= self.window and w.fresh + n >= self.every

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`), for one labels and one predictions tensor:
        the leading steps before one that reports, their saved confusion matrices pushed onto
        the windows and the windows judged in place (`_judge`, the code `check` runs). Counts
        to compute from raw labels, or matrices of several shapes, are left to `check`."""
        table = self._read(trial)
        if table is None or not len(steps):
            return 0
        i0 = int(np.searchsorted(table.steps, steps[0]))
        if not np.array_equal(table.steps[i0 : i0 + len(steps)], steps):
            return 0  # not a run of consecutive saved steps (the runner passes those)
        modes = table.modes[i0 : i0 + len(steps)]
        cut = quiet_prefix(table.raw[i0 : i0 + len(steps)])  # counted from the raw labels: check()
        lo, hi = np.searchsorted(table.rows, [i0, i0 + cut])
        rows, c, sums = table.rows[lo:hi] - i0, table.confusion[lo:hi], table.sums[lo:hi]
        if self.window < 1 or not len(rows):
            return cut
        when = table.steps[i0 + rows]
        plans = []
        for m in np.unique(modes[rows]).tolist():
            mine = np.flatnonzero(modes[rows] == m)
            key, n = Mode(m).name, len(mine)
            at, state = self._advance(self._windows.get(key), c[mine], sums[mine], when[mine], n)
            if at is not None:
                cut = min(cut, int(rows[mine[at]]))  # the step that reports is check()'s
            plans.append((key, mine, n if at is None else at, state))
        for key, mine, done, state in plans:
            upto = int(np.searchsorted(rows[mine], cut))
            if upto != done:
                _, state = self._advance(self._windows.get(key), c[mine], sums[mine], when[mine], upto)
            if state is not None:
                self._windows[key] = state
        return cut

    def _advance(
        self, w: _Window | None, c: np.ndarray, n: np.ndarray, steps: np.ndarray, limit: int
    ) -> tuple[int | None, _Window | None]:
        """One mode's window after pushing `c[:limit]` (their label counts `n`, at `steps`) and
        judging it where `check` would, as `check` does, computed with cumulative sums: (None,
        the window) when none of them reports, else (the index of the first that reports, the
        window before it). `w` is left as it was."""
        if limit == 0:
            return None, w
        old: list[np.ndarray] = []
        old_sizes: list[int] = []
        streak: dict[tuple[int, int], int] = {}
        pushed = fresh = 0
        if w is not None and w.matrix is not None and w.matrix.shape == c.shape[1:]:
            old, old_sizes, streak = list(w.steps), list(w.sums), dict(w.streak)
            pushed, fresh = w.pushed, w.fresh
        q = len(old)  # else push() starts over: another shape, or a new window
        mats = np.concatenate([np.asarray(old, dtype=np.int64).reshape(q, *c.shape[1:]), c[:limit]])
        sizes = np.concatenate([np.asarray(old_sizes, dtype=np.int64), n[:limit]])
        total, cum = np.cumsum(sizes), np.cumsum(mats, axis=0)
        # the window after pushing entry g: from the first j whose later entries hold < `window`
        start = np.searchsorted(total, total[q:] - self.window, side="right")
        new = np.cumsum(n[:limit])
        pushed_at = pushed + new
        i = max(
            int(np.searchsorted(pushed_at, self.window)), int(np.searchsorted(steps[:limit], self.min_step))
        )
        base = fresh  # fresh after entry i: base + new[i], until a judgement resets it
        state = (old, c, sizes, cum, start)
        while i < limit:
            i = max(i, int(np.searchsorted(new, self.every - base)))
            if i >= limit:
                break
            j, g = int(start[i]), q + i
            window = cum[g] - (cum[j - 1] if j else 0)
            # the window's older half: its entries up to where half of its labels are in
            before = total[j - 1] if j else 0
            h = int(np.searchsorted(total, before + (total[g] - before) / 2))
            older = cum[h] - (cum[j - 1] if j else 0) if h < g else None
            found = self._pairs(window)
            after = {pair: streak.get(pair, 0) + 1 for pair in found}
            if any(
                run >= self.patience and pair not in self._fired and not _fading(window, older, *pair)
                for pair, run in after.items()
            ):
                return i, (w if i == 0 else _window_at(*state, i, pushed_at, base + new, streak))
            streak, base = after, -int(new[i])
            i += 1
        return None, _window_at(*state, limit, pushed_at, base + new, streak)

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
            which = _matrix(trial, labels[0])
            matrix = Over(trial, vector_name(labels[0], which), steps)
            both = judged & y.present & p.present
            rows = np.flatnonzero(both & counts.raw & matrix.raw)
            stacked = trial.columns.values(vector_name(labels[0], which)) if len(rows) else None
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
        confusion = step_confusion(trial, step, labels[0], preds[0]) if labels and preds else None
        if confusion is None:
            return None
        key = mode.name
        w = self._windows.setdefault(key, _Window())
        w.push(confusion, self.window)
        if w.pushed < self.window or w.fresh < self.every or step < self.min_step:
            return None
        found, due = self._judge(w)
        if not due:
            return None
        acc = w.matrix
        assert acc is not None
        a, b = max(due, key=lambda pair: found[pair][0])
        self.first((a, b))
        share, others, count, row = found[(a, b)]
        also = [f"{x} -> {y}" for x, y in sorted(found) if (x, y) != (a, b)]
        return self.finding(
            trial, step,
            f"{100 * share:.0f}% of class {a}'s {row} samples are predicted as class {b} ({count} of "
            f"the last {int(acc.sum())} {key} labels of {labels[0]}; more than {100 * self.min_share:g}% and "
            f"{share / max(others, 1e-9):.1f}x the {100 * others:.1f}% error rate of a typical other class, in "
            f"{w.streak[(a, b)]} judgements in a row): a systematic confusion of the pair {a} -> {b}"
            + (f" (also {', '.join(also)})" if also else ""),
            tensors=[labels[0], preds[0]],
        )  # fmt: skip

    def _judge(
        self, w: _Window
    ) -> tuple[dict[tuple[int, int], tuple[float, float, int, int]], list[tuple[int, int]]]:
        """Judge a window that is due (both paths): its confused pairs, the streaks updated,
        and the pairs due for a report."""
        w.fresh = 0
        assert w.matrix is not None
        found = self._pairs(w.matrix)
        w.streak = {pair: w.streak.get(pair, 0) + 1 for pair in found}
        older = _older_half(w) if found else None
        due = [
            pair for pair, run in w.streak.items()
            if run >= self.patience and pair not in self._fired and not _fading(w.matrix, older, *pair)
        ]  # fmt: skip
        return found, due

    def _pairs(self, c: np.ndarray) -> dict[tuple[int, int], tuple[float, float, int, int]]:
        """The pairs (a, b) confused beyond the model's error: each class a's most frequent
        wrong prediction b, with its share of a's samples, the other classes' error rate, its
        count and a's count."""
        rows = c.sum(axis=1)
        total, right = int(c.sum()), int(np.trace(c))
        if total == 0 or right < total / 2:
            return {}  # a model this poor errs everywhere: nothing to single out
        if int((rows > 0).sum()) < 3:
            # two classes: a rare class taken for the common one is where a binary classifier's
            # threshold lies (clicks, positives), not a pair singled out against the others
            return {}
        off = c.copy()
        np.fill_diagonal(off, 0)
        # the conditions below but the comparison with the other classes, for all rows at once:
        # a healthy window has no candidate, and its judgement ends here
        ranked = np.sort(off, axis=1)
        most, runner_up = ranked[:, -1], ranked[:, -2] if off.shape[1] > 1 else np.zeros(len(off))
        if not bool(
            (
                (rows >= max(1, self.min_count))
                & (most >= self.min_count)
                & (2 * most >= off.sum(axis=1))
                & (most >= self.dominance * runner_up)
                & (most / np.maximum(rows, 1) > self.min_share)
            ).any()
        ):
            return {}
        out = {}
        big = np.flatnonzero(rows >= max(1, self.min_count)).tolist()
        err = {k: 1.0 - c[k, k] / rows[k] for k in big}
        for a in big:
            b = int(np.argmax(off[a]))
            count = int(off[a, b])
            errors = int(off[a].sum())
            if count < self.min_count or 2 * count < errors or count < self.dominance * runner_up[a]:
                continue
            share = count / rows[a]
            rest = [err[k] for k in big if k != a]
            others = float(np.median(rest)) if rest else 0.0  # a typical class's error rate
            if (
                share > self.min_share
                and share > self.ratio * others
                and not _mutual(share, others, int(c[b, a]), int(rows[b]))
            ):
                out[(a, b)] = (float(share), others, count, int(rows[a]))
        return out


def _matrix(trial: TrialView, labels: str) -> str:
    """The confusion vector the run holds for `labels`: `confusion_steps` (every step's labels
    since the last statistics step, the PyTorch hook's) where it was saved, else `confusion`
    (the statistics step's own)."""
    return "confusion_steps" if trial.has_tensor(vector_name(labels, "confusion_steps")) else "confusion"


def _older_half(w: _Window) -> np.ndarray | None:
    """The matrix of the window's older entries, up to where half of its labels are in
    (the fast path cuts it where `_advance` does); None when the window is one entry."""
    if len(w.steps) < 2:
        return None
    out, n = np.zeros_like(w.steps[0]), 0
    for c, k in zip(list(w.steps)[:-1], list(w.sums)[:-1], strict=True):
        out, n = out + c, n + k
        if n >= w.total / 2:
            return out
    return None  # the last entry holds more than half


def _fading(window: np.ndarray, older: np.ndarray | None, a: int, b: int) -> bool:
    """Whether the share of class a's samples predicted as b is lower in the window's newer
    half than in its `older` half, one-sided at 1% (a two-proportion z-test, pooled): an early
    confusion the model is unlearning as it learns the two classes apart (a healthy MLP takes
    43% of class 0 for class 1 at its first judgement, 12% three later, 2% at the end). Label
    noise on the pair stays: its share is the noise's, half after half. A fading pair keeps
    its streak and is reported at the first judgement where it no longer fades."""
    if older is None:
        return False
    newer = window - older
    n1, n2 = int(older[a].sum()), int(newer[a].sum())
    if n1 == 0 or n2 == 0:
        return False
    k1, k2 = int(older[a, b]), int(newer[a, b])
    pooled = (k1 + k2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    return se > 0 and (k1 / n1 - k2 / n2) / se > _FADING_Z


# one-sided 1%: the test runs at every judgement that would report, and on label noise each
# false "fading" delays the finding (at 5%, a pair of 18 and 18 samples, 44% then 17%, read as
# fading and put a noisy pair's report past its step); a healthy early confusion fades far
# beyond it (46% of 69 samples, then 21% of 62: z = 3.1)
_FADING_Z = 2.326


def _mutual(share: float, others: float, back: int, n: int) -> bool:
    """Whether class b's `back` of `n` samples predicted as a are likelier at a's share
    predicted as b (`share`: two classes the model cannot tell apart err both ways alike)
    than at a typical class's error rate (`others`: label noise that turns a's into b's
    leaves b's predictions alone). A binomial likelihood ratio; the typical rate is floored
    at half a sample of `n`, a share at half a sample below 1."""
    if n <= 0:
        return False
    low = max(others, 0.5 / n)
    high = min(share, 1 - 0.5 / n)
    if high <= low:
        return False

    def loglik(p: float) -> float:
        return back * math.log(p) + (n - back) * math.log1p(-p)

    return loglik(high) > loglik(low)
