"""train_label_noise: training labels of one class that the model keeps predicting as another,
far more often than it does on the evaluation's labels, one way."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.labels import ConfusionWindow, step_confusion
from mldbg.rules.view import TrialView


class _Labels(ConfusionWindow):
    """One mode's confusion window (`ConfusionWindow`), and its older half."""

    def older(self) -> np.ndarray | None:
        """The matrix of the window's older entries, up to where half of its labels are in;
        None when the window is one entry, or its last entry holds more than half."""
        if len(self.steps) < 2 or self.matrix is None:
            return None
        out, n = np.zeros_like(self.matrix), 0
        for c, k in zip(list(self.steps)[:-1], list(self.sums)[:-1], strict=True):
            out, n = out + c, n + k
            if n >= self.total / 2:
                return out
        return None


@register
class TrainLabelNoise(Rule):
    """Label noise in the training set, told from a pair the task leaves ambiguous by the
    evaluation's labels. Noise that turns some training labels of class a into b shows in the
    TRAIN confusion matrix as label b predicted a (the model predicts what the inputs show, a,
    for the mislabelled samples), and there only: on evaluation samples labelled b the model
    does not predict a (their labels are right). A pair the task leaves ambiguous, a hard
    pair for the architecture, a class not learned yet, err on the evaluation's labels as on
    the training's (or more: a model fits its training set better than unseen data).

    At each judgement (every `every` training labels once `window` were seen, from global step
    `min_step`, with at least `eval_labels` evaluation labels): for each label b and predicted
    a, the share of training labels b predicted a is compared with the share on the last
    `window` evaluation labels, times the training-to-evaluation error ratio when training errs
    more overall (dropout, augmentation). It is reported when:

    - the training share exceeds that by `min_excess` of class b's training labels (at least
      `min_count` samples), beyond a one-sided two-proportion z-test at `budget` per judgement,
      Bonferroni over the ordered pairs judged (the evaluation share floored at half a
      sample);
    - it goes one way: the reverse, label a predicted b, is not in excess on the training
      labels (z below 1.645). Noise turns a's into b's and leaves the a's alone; a train-time
      augmentation that makes two classes look alike (a flip mapping one onto the other)
      confuses both ways;
    - its excess holds against the training share's spread between saved steps (the steps as
      clusters, where that variance exceeds the binomial's): a model whose predictions on a
      class swing from step to step errs in bursts, and an evaluation pass may fall on a good
      moment;
    - it is not fading: its share in the newer half of the training window is not lower than
      in the older half (one-sided 1%). A confusion the model is unlearning shows in training
      predictions made before the evaluation pass that no longer makes it;
    - the same pair is found at `patience` judgements in a row.

    Reads the `confusion` statistic of the labels in TRAIN and EVAL steps (`confusion_steps`,
    the labels of every step since the last statistics step, where the PyTorch hook saved it):
    it needs the evaluation's labels, which the hook records for a registered loss, a model
    that returns its loss, or a loss computed with gradients on. Not judged without them, nor
    when the evaluation set carries the same noise (nothing tells it then). Not in the
    default set: not calibrated on the corpus yet.
    """

    default = False
    needs = ("labels",)
    reads = {"labels": ("confusion",)}
    window: int = 1024
    every: int = 256
    eval_labels: int = 256
    min_excess: float = 0.05
    min_count: int = 10
    budget: float = 0.01
    patience: int = 2
    min_step: int = 50
    cause = "labels_misaligned"
    suggestion = (
        "Audit the training labels of that pair: sample training examples labelled b that the model "
        "predicts as a and look at them; fix or drop mislabelled ones (cleanlab finds them), and check "
        "how the training labels were made (a mapping, an annotator, a weak labeller) against the "
        "evaluation set's."
    )

    def reset(self) -> None:
        super().reset()
        self._labels: dict[Mode, _Labels] = {}
        self._streak: dict[tuple[int, int], int] = {}

    def check(self, trial: TrialView, step: int) -> Finding | None:
        mode = trial.mode(step)
        if mode not in (Mode.TRAIN, Mode.EVAL):
            return None
        labels = trial.names("labels", step=step)
        preds = trial.names("predictions", step=step)
        confusion = step_confusion(trial, step, labels[0], preds[0]) if labels and preds else None
        if confusion is None:
            return None
        mine = self._labels.setdefault(mode, _Labels())
        mine.push(confusion, self.window)
        train, evals = self._labels.get(Mode.TRAIN), self._labels.get(Mode.EVAL)
        if mode != Mode.TRAIN or train is None or evals is None or step < self.min_step:
            return None
        if train.total < self.window or train.fresh < self.every or evals.total < self.eval_labels:
            return None
        if train.matrix is None or evals.matrix is None or train.matrix.shape != evals.matrix.shape:
            return None
        train.fresh = 0
        found = self._pairs(train.matrix, evals.matrix, np.stack(list(train.steps)))
        older = train.older() if found else None
        found = {p: v for p, v in found.items() if not _fading(train.matrix, older, *p)}
        self._streak = {pair: self._streak.get(pair, 0) + 1 for pair in found}
        due = [p for p, run in self._streak.items() if run >= self.patience and p not in self._fired]
        if not due:
            return None
        b, a = max(due, key=lambda p: found[p][0])
        self.first((b, a))
        z, share, expected, count, row, e_share, e_row = found[(b, a)]
        return self.finding(
            trial, step,
            f"{100 * share:.0f}% of the last {row} training samples labelled {b} are predicted as class {a} "
            f"({count}), against {100 * e_share:.1f}% of {e_row} evaluation samples labelled {b} (at most "
            f"{100 * expected:.1f}% expected from the evaluation, z = {z:.1f}); the reverse, {a} taken "
            f"for {b}, is not in excess: training labels of class {a} turned into {b} (label noise on "
            f"the pair {a} -> {b}), in {self._streak[(b, a)]} judgements in a row",
            tensors=[labels[0], preds[0]],
        )  # fmt: skip

    def _pairs(
        self, t: np.ndarray, e: np.ndarray, entries: np.ndarray
    ) -> dict[tuple[int, int], tuple[float, float, float, int, int, float, int]]:
        """(label b, predicted a) -> (z, training share, expected share, count, b's training
        labels, evaluation share, b's evaluation labels) for the pairs in excess, one way;
        `entries`: the training window's matrices, one per saved step."""
        t_rows, e_rows = t.sum(axis=1), e.sum(axis=1)
        t_err = 1 - np.trace(t) / max(int(t.sum()), 1)
        e_err = 1 - np.trace(e) / max(int(e.sum()), 1)
        # training errs more overall (dropout, augmentation, a model still learning): the
        # evaluation's shares scaled by the ratio of the error rates, never below 1
        scale = max(1.0, (t_err + 0.5 / max(int(t.sum()), 1)) / (e_err + 0.5 / max(int(e.sum()), 1)))
        judged = [k for k in range(len(t)) if t_rows[k] >= self.min_count and e_rows[k] > 0]
        pairs = len(judged) * (len(t) - 1)
        if pairs == 0:
            return {}
        z_bar = _z_for(self.budget / pairs)
        out = {}
        for b in judged:
            for a in range(len(t)):
                if a == b or t[b, a] < self.min_count:
                    continue
                spread = _between_steps(entries[:, b, a], entries[:, b].sum(axis=1))
                z, share, expected = _excess(
                    int(t[b, a]), int(t_rows[b]), int(e[b, a]), int(e_rows[b]), scale, spread
                )
                if z <= z_bar or share - expected < self.min_excess:
                    continue
                if t_rows[a] > 0 and e_rows[a] > 0:
                    back, _, _ = _excess(int(t[a, b]), int(t_rows[a]), int(e[a, b]), int(e_rows[a]), scale)
                    if back > _ONE_WAY_Z:
                        continue  # both ways: two classes that look alike in training
                out[(b, a)] = (
                    z,
                    share,
                    expected,
                    int(t[b, a]),
                    int(t_rows[b]),
                    e[b, a] / e_rows[b],
                    int(e_rows[b]),
                )
        return out


_ONE_WAY_Z = 1.645  # one-sided 5%: the reverse pair in excess too
_FADING_Z = 2.326  # one-sided 1%: a confusion the model is unlearning


def _fading(window: np.ndarray, older: np.ndarray | None, b: int, a: int) -> bool:
    """Whether the share of label b predicted a is lower in the training window's newer half
    than in its `older` half (a one-sided two-proportion z-test, pooled): a confusion the
    model is unlearning, whose older predictions the evaluation pass after them no longer
    makes. Label noise stays, half after half."""
    if older is None:
        return False
    newer = window - older
    n1, n2 = int(older[b].sum()), int(newer[b].sum())
    if n1 == 0 or n2 == 0:
        return False
    k1, k2 = int(older[b, a]), int(newer[b, a])
    pooled = (k1 + k2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    return se > 0 and (k1 / n1 - k2 / n2) / se > _FADING_Z


def _between_steps(k: np.ndarray, n: np.ndarray) -> float:
    """The variance of the share sum(k) / sum(n) estimated from its spread between saved steps
    (a ratio estimator over the steps as clusters): the labels of one step share the model of
    that step, and a model whose predictions on a class swing from step to step (a noisy
    optimizer) errs in bursts, not sample by sample. 0 with fewer than 3 steps holding labels
    of the class."""
    held = n > 0
    m = int(held.sum())
    if m < 3:
        return 0.0
    k, n = k[held].astype(float), n[held].astype(float)
    p = k.sum() / n.sum()
    return float(m / (m - 1) * ((k - p * n) ** 2).sum() / n.sum() ** 2)


def _excess(
    k_t: int, n_t: int, k_e: int, n_e: int, scale: float, spread: float = 0.0
) -> tuple[float, float, float]:
    """(z, training share, expected share) of a one-sided two-proportion z-test that `k_t` of
    `n_t` training labels is more than `scale` times `k_e` of `n_e` evaluation labels (that
    share floored at half a sample); the training share's variance the larger of the
    binomial's and `spread` (its spread between steps)."""
    share = k_t / n_t
    p_e = max(k_e, 0.5) / n_e
    expected = min(1.0, scale * p_e)
    se = math.sqrt(max(share * (1 - share) / n_t, spread) + scale * scale * p_e * (1 - p_e) / n_e)
    return ((share - expected) / se if se > 0 else 0.0), share, expected


def _z_for(alpha: float) -> float:
    """The one-sided normal quantile of level `alpha`."""
    return NormalDist().inv_cdf(1 - min(max(alpha, 1e-15), 0.5))
