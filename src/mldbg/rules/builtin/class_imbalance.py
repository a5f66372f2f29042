"""class_imbalance: some classes far rarer than others, or ignored by the model."""

from __future__ import annotations

import math
import re
from statistics import NormalDist

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, aligned
from mldbg.rules.labels import ClassStats, per_position
from mldbg.rules.stats import binomial_tail
from mldbg.rules.view import TrialView
from mldbg.store.statistics import vector_name

# the inputs of a binary loss taken per tag (multi-label): PyTorch's names of the registered loss
_MULTI_LABEL = r"(?i)(BCE(WithLogits)?Loss|MultiLabel(SoftMargin|Margin)Loss)(_\d+)?_input_"


@register
class ClassImbalance(Rule):
    """The labels are imbalanced (the most frequent class outnumbers the rarest by more than
    `threshold_imbalance` times) and the model ignores the rare classes: it predicts the
    majority for nearly everything, the other classes mispredicted more than
    `threshold_misprediction` of the time; or a class is mispredicted more than
    `threshold_misprediction` of the time while the other classes are mostly right.

    An imbalanced label set is a property of the data, not a defect: background pixels,
    clicks, fraud, diseases are rare by nature, and a loss weighted per class or a resampler
    handles it. What hurts is a model that learns to predict the majority and ignore the rest,
    which its accuracy hides; so the imbalance is reported only with that evidence from the
    predictions, never from the labels alone (no predictions, no finding). The evidence is a
    test: the classes other than the majority, pooled (or one of them), over the predictions
    since the first step, evaluation passes included (the first `samples` labels, and on while
    undecided, up to 4 x `samples`), are right so rarely that a model getting them right at
    least 1 - `threshold_misprediction` of the time would do so with probability below
    `budget` / 2 (binomial tail; `budget` / (2 x rare classes) for one class), and still no more
    often than that in the labels after the first `samples` / 2 (the model had the first half
    to learn), while the majority is mispredicted less than `threshold_misprediction` / 2.

    Mispredictions are counted on consecutive windows of `samples`
    predictions, skipping the first (the model is untrained then), and must show in two
    windows in a row; the other classes must be mispredicted less than half as often, so a
    model that is simply still poor everywhere is not reported, and the class counts in the
    window must differ by more than `threshold_imbalance` / 2 times (a class that is just
    harder to learn is not imbalance). Classes the model scores but that never appear in the
    labels are not counted: a start-of-sequence or padding token of a seq2seq vocabulary, an
    output kept for later, are not classes of the data (a class rarer than the threshold still
    shows once it appears). `argmax` turns one-hot or probability labels into ids (done
    automatically for float labels in [0, 1]).

    Multi-label targets are left out: (batch, tags) targets of a binary loss (`BCELoss`,
    `BCEWithLogitsLoss`, `MultiLabelSoftMarginLoss`, `MultiLabelMarginLoss`: one yes/no
    decision per tag, not a class per sample) have tag frequencies that fall off by nature.

    Not judged either: one score per label (a (batch,) or (batch, 1) float output, a binary
    model's logit or probability). Such a model estimates a probability; thresholded at 0.5,
    a calibrated model of rare events (a click-through rate of 5%, fraud) predicts the
    majority for nearly every sample by design, and what it learns shows in its log loss, not
    in a 0.5 recall. And labels per position of a dense prediction ((batch, *positions) ids
    scored by (batch, classes, *positions) or (batch, *positions, classes) logits: pixels of a
    segmentation, whose background dominates by nature; or a target per element of outputs of
    three axes or more, of the outputs' own shape: the binary pixels a VAE reconstructs, a mask
    scored pixel by pixel) are positions, not samples, as tokens are.

    The imbalance is a test, not a ratio of two raw counts: the smallest count of a set of
    many classes is small by chance (a class of 1 in 500 labels may be 1 in 100), so the
    rule fires when the ratio of a lower confidence bound of the largest count to an upper
    bound of the smallest exceeds `threshold_imbalance`: Poisson bounds (on the square-root
    scale, where a count's noise is 1/2) at the level `budget` / (2 x classes), a false alarm
    at most `budget` per run whatever the number of classes. 97% of 500 labels in class 0
    (485 against 7 and 8) gives a bound of 19; a language model's 64 characters counted in
    512 tokens (56 against 1) gives 3.

    Token targets are left out: with more than `max_classes` classes (the predictions' class
    axis, or the ids seen) or labels that are sequences ((batch, length) ids scored by
    (batch, length, vocabulary) or (batch, vocabulary, length) logits), the labels are words
    of a language, whose Zipf distribution is the data, not a defect; so are labels flattened
    from such sequences, one per position of an integer model input ((batch x length,) ids for
    a (batch, length) input of token ids: a language model's `logits.view(-1, vocabulary)`),
    or one per position of a float input of (batch, positions..., features) or (batch,
    channels, positions...): the per-step targets of a sequence or dense model (sketch-RNN's
    pen states, mostly "pen down" by the nature of strokes; a signal's frames).
    So are targets made per
    batch: when every batch of two or more labels holds one class only (a GAN's "real" and
    "fake" targets, the positive and negative passes of a contrastive loss), the labels are
    not a data set's classes and their counts are not judged.

    It works on class counts: the `class_counts` and `class_correct` statistics a two-line
    hook records every step on the labels (and `class_counts` on the predictions), or the
    same counted from raw labels and predictions. Ids outside [0, classes) (an ignore_index)
    are not a class.
    """

    needs = ("labels",)
    reads = {"labels": ("class_counts", "class_correct"), "predictions": ("class_counts",)}
    threshold_imbalance: float = 10.0
    threshold_misprediction: float = 0.7
    samples: int = 500
    argmax: bool = False
    labels_regex: list[str] | None = None
    predictions_regex: list[str] | None = None
    max_classes: int = 100
    budget: float = 1e-3
    suggestion = (
        "Re-sample the classes (oversample the rare ones, e.g. torch.utils.data.WeightedRandomSampler), "
        "weight the loss by inverse class frequency (CrossEntropyLoss(weight=...)), or collect more "
        "data of the rare classes; judge the model with per-class recall or F1, not accuracy."
    )

    def reset(self) -> None:
        super().reset()
        self._counts: dict[int, int] = {}  # label counts over the first `samples` labels
        self._total = 0  # labels counted while undecided
        # the evidence that the model ignores the rare classes: labels and those predicted right
        # per class since the first step, and since the first `samples` / 2 labels (`late`)
        self._seen: dict[int, int] = {}
        self._right: dict[int, int] = {}
        self._late_seen: dict[int, int] = {}
        self._late_right: dict[int, int] = {}
        self._decided = False  # the imbalance judged (reported, not there, or no evidence)
        self._mixed = False  # some batch of labels held two classes or more
        self._classes: int | None = None  # classes the predictions score
        self._win_count: np.ndarray | None = None  # the window being filled: labels per class
        self._win_correct: np.ndarray | None = None  # and those predicted right
        self._win_n = 0  # labels in the window (outside ids too)
        self._windows = 0
        self._streak = 0  # windows in a row where a class was ignored

    def needed_collections(self) -> tuple[str, ...]:
        return () if self.labels_regex else self.needs

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """Once the first `samples` labels are counted: the leading `steps` where no window of
        labels closes with a finding. Their class counts are added to the window from the
        saved `class_counts` / `class_correct` vectors; at each step that closes a window the
        counts go to the judging code of `check` (`_mispredictions`), and a window it reports
        on is handed back, its state as before it, for `check` to judge and report."""
        if not self._decided:
            return 0
        labels = trial.names(None, regex=self.labels_regex) if self.labels_regex else trial.names("labels")
        preds = (
            trial.names(None, regex=self.predictions_regex)
            if self.predictions_regex
            else trial.names("predictions")
        )
        if len(labels) != 1 or len(preds) > 1:
            return 0  # check() picks among several per step
        over = Over(trial, labels[0], steps)
        has_train = bool(trial.steps(Mode.TRAIN))
        modes = over.mode
        judged = over.present & ((modes == int(Mode.TRAIN)) | ((modes == int(Mode.EVAL)) & (not has_train)))
        if not judged.any():
            return len(steps)
        counts = trial.columns.values(vector_name(labels[0], "class_counts"))
        correct = trial.columns.values(vector_name(labels[0], "class_correct"))
        if counts is None or over.raw[judged].any():
            return 0  # counted from raw tensors, or no saved counts: check() reads them
        # no predictions at a step: no correct counts, no window (check() judges only imbalance)
        have = over.present & Over(trial, preds[0], steps).present if preds else np.zeros(len(steps), bool)
        c_at = aligned(counts[0], steps)
        k_at = aligned(correct[0], steps) if correct is not None else np.full(len(steps), -1)
        rows = np.flatnonzero(judged & (c_at >= 0) & have & (k_at >= 0))
        lab = counts[1][c_at[rows]].astype(np.int64)
        cor = correct[1][k_at[rows]].astype(np.int64) if correct is not None else lab
        if len(rows) and self._win_count is not None and self._win_count.shape != lab.shape[1:]:
            return 0
        n = self._judge_windows(trial, steps, rows, lab, cor, [labels[0], *preds[:1]])
        if (judged[:n] & (c_at[:n] >= 0)).any():
            self._classes = max(self._classes or 0, len(counts[1][0]) - 1)
        return n

    def _judge_windows(
        self, trial: TrialView, steps: np.ndarray, rows: np.ndarray, lab: np.ndarray, cor: np.ndarray,
        tensors: list[str],
    ) -> int:  # fmt: skip
        """The fast path's windows: add the counts `lab` / `cor` of `rows` (indices of `steps`)
        to the window, each closing row judged by `_mispredictions` as `check` would; returns
        the index of `steps` of the first closing row that reports (its state restored), or
        len(steps)."""
        per_row = np.cumsum(lab.sum(axis=1))
        pos, base = 0, 0
        while pos < len(rows):
            # the first row from `pos` where the window reaches `samples` labels
            end = int(np.searchsorted(per_row, base + self.samples - self._win_n, "left"))
            end = max(end, pos)
            if end > pos:
                upto = min(end, len(rows))
                if self._win_count is None or self._win_correct is None:
                    self._win_count = np.zeros(lab.shape[1:], np.int64)
                    self._win_correct = np.zeros(lab.shape[1:], np.int64)
                self._win_count = self._win_count + lab[pos:upto].sum(axis=0)
                self._win_correct = self._win_correct + cor[pos:upto].sum(axis=0)
                self._win_n += int(per_row[upto - 1] - base)
            if end >= len(rows):
                break
            before = (
                None if self._win_count is None else self._win_count.copy(),
                None if self._win_correct is None else self._win_correct.copy(),
                self._win_n, self._windows, self._streak, set(self._fired),
            )  # fmt: skip
            step = int(steps[rows[end]])
            if self._mispredictions(trial, step, lab[end], cor[end], tensors) is not None:
                self._win_count, self._win_correct, self._win_n, self._windows, self._streak, self._fired = (
                    before
                )
                return int(rows[end])
            pos, base = end + 1, int(per_row[end])
        return len(steps)

    def check(self, trial: TrialView, step: int) -> Finding | None:
        mode = trial.mode(step)
        # an evaluation pass of a run that trains: evidence of the predictions only (below)
        evaluating = mode != Mode.TRAIN and bool(trial.steps(Mode.TRAIN))
        if mode == Mode.PREDICT or (evaluating and self._decided):
            return None
        labels = (
            trial.names(None, regex=self.labels_regex, step=step)
            if self.labels_regex
            else trial.names("labels", step=step)
        )
        preds = (
            trial.names(None, regex=self.predictions_regex, step=step)
            if self.predictions_regex
            else trial.names("predictions", step=step)
        )
        if not labels:
            return None
        got = trial.class_statistics(labels[0], preds[0] if preds else None, step, self.argmax)
        if got is None or self._tokens(trial, step, labels[0], preds[0] if preds else None, got):
            return None
        if self._one_score(trial, step, labels[0], preds[0] if preds else None):
            return None
        if got.classes is not None:
            self._classes = max(self._classes or 0, got.classes)
        if not self._decided:
            present = np.flatnonzero(got.labels[:-1])
            if self._total < self.samples and not evaluating:
                self._mixed = self._mixed or present.size > 1 or got.samples < 2
                for i in present.tolist():
                    self._counts[i] = self._counts.get(i, 0) + int(got.labels[i])
            if got.correct is not None:
                late = self._total >= self.samples // 2
                for i in present.tolist():
                    n, k = int(got.labels[i]), int(got.correct[i])
                    self._seen[i] = self._seen.get(i, 0) + n
                    self._right[i] = self._right.get(i, 0) + k
                    if late:
                        self._late_seen[i] = self._late_seen.get(i, 0) + n
                        self._late_right[i] = self._late_right.get(i, 0) + k
            if not evaluating:
                self._total += got.samples
            if self._total >= self.samples:
                found = self._imbalance(trial, step, labels[0])
                if found:
                    return found
        if got.correct is not None and not evaluating:
            return self._mispredictions(trial, step, got.labels, got.correct, labels + preds[:1])
        return None

    def _tokens(self, trial: TrialView, step: int, labels: str, preds: str | None, got: ClassStats) -> bool:
        """Token targets of a language model (many classes, or sequences of ids), or the
        targets of a multi-label loss (one binary decision per tag): not a class per sample."""
        classes = got.classes if got.classes is not None else len(got.labels) - 1
        if classes > self.max_classes:
            return True
        y = trial.layout(labels, step)
        if (
            y is not None
            and len(y[1]) >= 2
            and y[1][-1] > 1
            and re.match(_MULTI_LABEL, labels.rsplit("/", 1)[-1])
        ):
            return True
        p = trial.layout(preds, step) if preds is not None else None
        if (
            y is not None and p is not None and y[0] in "iu" and len(y[1]) >= 2
            and len(p[1]) == len(y[1]) + 1 and y[1][0] == p[1][0]
            and y[1][1:] in (p[1][2:], p[1][1:-1])
        ):  # fmt: skip
            return True  # ids per position (tokens, pixels): scored by (batch, classes, *positions) logits or channels-last
        if y is not None and p is not None and len(y[1]) >= 3 and y[1] == p[1]:
            return True  # a target per element of (batch, channels, *positions) outputs: pixels of a reconstruction or a mask
        return per_position(trial, step, y) or self._per_frame(trial, step, y)

    @staticmethod
    def _per_frame(trial: TrialView, step: int, y: tuple[str, tuple[int, ...]] | None) -> bool:
        """Integer labels, flattened or not, one per position of a float model input of
        (batch, positions..., features) or (batch, channels, positions...), more than one
        position: as many labels as the input's batch x positions. The per-step targets of a
        sequence or dense model (the pen states of a stroke decoder, the frames of a tagged
        signal, the pixels of a segmentation), whose class frequencies are those of the
        positions, not of samples."""
        if y is None or y[0] not in "iu":
            return False
        size = math.prod(y[1])
        for name in trial.names("inputs", step=step):
            x = trial.layout(name, step)
            if x is None or x[0] != "f" or len(x[1]) < 3:
                continue
            shape = x[1]
            if size in (math.prod(shape[:-1]), shape[0] * math.prod(shape[2:])) and size > shape[0]:
                return True
        return False

    def _one_score(self, trial: TrialView, step: int, labels: str, preds: str | None) -> bool:
        """One float score per label ((batch,) or (batch, 1) predictions of (batch,) labels): a
        binary model's logit or probability, whose 0.5 threshold is not its decision."""
        if preds is None:
            return False
        y, p = trial.layout(labels, step), trial.layout(preds, step)
        return (
            y is not None and p is not None and p[0] == "f" and len(p[1]) >= 1
            and math.prod(p[1]) == math.prod(y[1]) == p[1][0]
        )  # fmt: skip

    def undecided(self) -> str | None:
        if 0 < self._total < self.samples:
            return (
                f"saw {self._total} of the {self.samples} training labels it needs (samples={self.samples})"
            )
        return None

    def _imbalance(self, trial: TrialView, step: int, name: str) -> Finding | None:
        """Once `samples` labels are counted: imbalanced labels and a model that ignores the
        rare classes (`_ignored`) give the finding; labels that are not imbalanced, no
        predictions, or 4 x `samples` labels without the evidence decide it quiet."""
        counts = {k: v for k, v in self._counts.items() if v > 0}  # classes the labels hold
        if len(counts) < 2 or not self._mixed or not self._seen:
            self._decided = True  # one class, one class per batch (targets made per batch), no predictions
            return None
        big = max(counts, key=counts.get)  # type: ignore[arg-type]
        small = min(counts, key=counts.get)  # type: ignore[arg-type]
        ratio = counts[big] / counts[small] if counts[small] else float("inf")
        bound = self.ratio_bound(counts[big], counts[small], max(len(counts), self._classes or 0))
        if bound <= self.threshold_imbalance:
            self._decided = True
            return None
        ignored = self._ignored(big)
        if ignored is None:
            self._decided = sum(self._seen.values()) >= 4 * self.samples
            return None
        self._decided = True
        if not self.first("imbalance"):
            return None
        which, n, k, p_value = ignored
        share = ", ".join(f"{c}: {v}" for c, v in sorted(counts.items())[:12])
        return self.finding(
            trial, step,
            f"class {big} outnumbers class {small} {ratio:.3g} to 1 in the first {sum(counts.values())} "
            f"training labels of {name} (at least {bound:.3g} to 1 at a false-alarm rate of {self.budget:g}: more "
            f"than {self.threshold_imbalance:g}; counts per class: {share}), and the model ignores {which}: "
            f"it predicted {k} of their {n} labels right (a model right on them "
            f"{100 * (1 - self.threshold_misprediction):.0f}% of the time would be right this rarely with "
            f"probability {p_value:.2g}) while class {big} is mostly right",
            tensors=[name],
        )  # fmt: skip

    def _ignored(self, big: int) -> tuple[str, int, int, float] | None:
        """The evidence that the model ignores the classes other than `big`, pooled or one of
        them: (which: "the other classes" or "class c", their labels, those predicted right,
        the binomial tail probability of so few right at a rate of 1 - `threshold_misprediction`),
        or None. The tail is below `budget` / 2 pooled, `budget` / (2 x rare classes) for one
        (Bonferroni), the labels after the first `samples` / 2 are no better (right at most
        1 - `threshold_misprediction`), and `big` is mispredicted less than
        `threshold_misprediction` / 2 (a model poor on every class is not learned yet)."""
        big_n, big_k = self._seen.get(big, 0), self._right.get(big, 0)
        if not big_n or 1 - big_k / big_n >= self.threshold_misprediction / 2:
            return None
        rare = [c for c in self._seen if c != big]
        q = 1 - self.threshold_misprediction
        groups = [("the other classes", rare, self.budget / 2)]
        if len(rare) > 1:
            groups += [(f"class {c}", [c], self.budget / (2 * len(rare))) for c in rare]
        for which, cs, level in groups:
            n = sum(self._seen.get(c, 0) for c in cs)
            k = sum(self._right.get(c, 0) for c in cs)
            late_n = sum(self._late_seen.get(c, 0) for c in cs)
            late_k = sum(self._late_right.get(c, 0) for c in cs)
            if not n or not late_n or late_k > late_n * q:
                continue
            p_value = binomial_tail(k, n, q)
            if p_value < level:
                return which, n, k, p_value
        return None

    def ratio_bound(self, big: int, small: int, classes: int) -> float:
        """A lower confidence bound of the ratio of two Poisson counts' rates: (sqrt(big) -
        z/2)^2 over (sqrt(small + 1) + z/2)^2, z the normal quantile of `budget` / (2 x
        `classes`) (the square root of a count has noise 1/2; Bonferroni over the classes
        and the two bounds)."""
        z = NormalDist().inv_cdf(1 - self.budget / (2 * max(2, classes)))
        low = max(0.0, math.sqrt(big) - z / 2) ** 2
        return low / (math.sqrt(small + 1) + z / 2) ** 2

    def _mispredictions(
        self, trial: TrialView, step: int, labels: np.ndarray, correct: np.ndarray, tensors: list[str]
    ) -> Finding | None:
        if self._win_count is None or self._win_correct is None or self._win_count.shape != labels.shape:
            # the first step of a window (or the class count changed): start the sums afresh
            self._win_count, self._win_correct = np.zeros_like(labels), np.zeros_like(correct)
        self._win_count += labels
        self._win_correct += correct
        self._win_n += int(labels.sum())
        if self._win_n < self.samples:
            return None
        count, right, n = self._win_count[:-1], self._win_correct[:-1], self._win_n
        self._win_count = self._win_correct = None
        self._win_n = 0
        self._windows += 1
        if self._windows == 1:
            return None  # the first window: the model is still untrained
        worst = None
        present = np.flatnonzero(count)
        if not present.size or count[present].max() <= count[present].min() * self.threshold_imbalance / 2:
            self._streak = 0
            return None  # classes about as frequent: a class still hard to learn is not imbalance
        for k in present.tolist():
            if count[k] < 10:
                continue
            err = 1.0 - right[k] / count[k]
            others, others_right = count.sum() - count[k], right.sum() - right[k]
            other_err = float((others - others_right) / others) if others else 0.0
            ignored = err > self.threshold_misprediction and other_err < self.threshold_misprediction / 2
            if ignored and (worst is None or err > worst[1]):
                worst = (k, float(err), other_err, int(count[k]))
        self._streak = self._streak + 1 if worst else 0
        if worst is None or self._streak < 2 or not self.first("misprediction"):
            return None
        k, err, other_err, n = worst
        window = int(count.sum())
        return self.finding(
            trial, step,
            f"class {k} is mispredicted {100 * err:.0f}% of the time ({n} samples in the last {window} "
            f"training predictions; more than {100 * self.threshold_misprediction:g}%) while the other classes "
            f"are mispredicted {100 * other_err:.0f}%: the model ignores it",
            tensors=tensors,
        )  # fmt: skip
