"""loss_at_class_prior: a classifier's training loss never went below the loss of predicting
each class at its frequency: it learned nothing from the inputs."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from mldbg.rules import detect
from mldbg.rules.base import Finding, register
from mldbg.rules.labels import class_prior
from mldbg.rules.loss_rule import LossSeriesRule
from mldbg.rules.losses import Series, floorless
from mldbg.rules.params import Range
from mldbg.rules.select import adversarial
from mldbg.rules.view import TrialView

_BLOCKS = 10  # the series' lowest level: the least of the medians of this many blocks
_Z = 2.0  # standard errors of a block's (or the end's) median by which the noise may move it


@register
class LossAtClassPrior(LossSeriesRule):
    """The training loss of a classifier (a mean cross-entropy in nats) never went below the
    entropy of its labels' class distribution, and ended there, once the run has finished:
    the model predicts each class at its frequency and learned nothing from its inputs.

    A model that cannot tell the classes apart from its inputs does best, on samples it has not
    memorized, by predicting each class at its frequency p_c; its cross-entropy is then the
    entropy H(p) = -sum p_c log p_c of the labels (`mldbg.rules.labels.class_prior`, from the
    `class_counts` the hook records for a classification loss's labels, over up to 200 saved
    training steps). A model that learns from its inputs goes below it; labels shuffled apart
    from their inputs (a shuffle, sort or split applied to one side only, a join on the wrong
    key) leave nothing to learn: the loss falls to H(p) if it started above (an untrained
    model is near uniform) or stays there (balanced classes), and does not leave it unless the
    model memorizes the training set.

    Judged once the run has finished, over the whole series of at least `min_values` (100)
    saved training values (a healthy model may not have begun to learn in 40 steps: a tiny
    BERT fine-tuned for 40 steps, 0.69 -> 0.67 nats). Reported when the loss's end (the median
    of its last quarter) lies between `tolerance` (relative) below H(p) and `excess` above it
    (a model that learned nothing wobbles around the class frequencies, each miss adding to its
    loss), and none of its 10 blocks' medians went more than `tolerance` below it; each bound
    widened by 2 standard errors of the median it bounds, under the run's own batch-to-batch
    noise (from successive differences: a batch's loss varies with its labels' mix).

    The loss judged is the run's one training loss, or the one whose labels these are (the
    labels `X_input_1` of a loss `X` or `X_output_0`), with one labels tensor of one class per
    sample (a classifier's: labels per position, a language model's next tokens, are not
    judged: a short healthy language-model run ends near its tokens' frequencies too), at
    least two classes and 100 labels counted. Not judged: a GAN (two models trained on
    one-class targets, or two losses that move against each other), and a loss without a floor
    at 0. A loss in other units (summed over tokens, class-weighted, with label smoothing or
    extra terms) does not sit at H(p), so it is not reported, right or wrong. Any training
    that learns nothing ends here (a learning rate that killed the ReLUs, unnormalized
    inputs): the diagnosis of such a cause takes this finding as a symptom.
    """

    needs = ("losses", "labels")
    needs_any = False
    reads = {"labels": ("class_counts",)}
    tolerance: float = 0.05
    excess: float = 0.15
    min_values: int = 100
    bounds: ClassVar[dict[str, Range]] = {
        "tolerance": Range(0, 1),
        "excess": Range(0, None),
        "min_values": Range(20, None),
    }
    cause = "labels_misaligned"
    suggestion = (
        "The model predicts each class at its frequency and nothing from the inputs: check that "
        "inputs and labels stay paired (a shuffle, sort or split applied to one and not the other, "
        "a join on the wrong key, labels of another dataset), print a few samples with their labels, "
        "and check that the model can overfit a small batch; if they are paired, the model may need "
        "far more training, a higher learning rate or more capacity."
    )

    def _judge(self, trial: TrialView, name: str, steps: object, values: object) -> list[Finding]:
        return []  # judged once the run has finished (`finish`)

    def _may_fire(self, name: str, values: object, lengths: np.ndarray) -> np.ndarray:
        return np.zeros(len(lengths), dtype=bool)

    def finish(self, trial: TrialView) -> list[Finding]:
        labels = trial.names("labels")
        if len(labels) != 1 or not _one_per_sample(trial, labels[0]):
            return []
        series = self._paired(labels[0])
        if series is None or len(series.values) < self.min_values or adversarial(trial, series.steps):
            return []
        prior = class_prior(trial, labels[0])
        if prior is None:
            return []
        h, classes, counted = prior
        x = np.asarray(series.values, dtype=np.float64)
        x = x[np.isfinite(x)]
        if len(x) < self.min_values or floorless(x) or self._game(series.name):
            return []
        tail = max(5, len(x) // 4)
        end = float(np.median(x[-tail:]))
        size = len(x) // _BLOCKS
        lowest = float(np.min(np.median(x[len(x) - size * _BLOCKS :].reshape(_BLOCKS, size), axis=1)))
        # a median of m values strays by about 1.25 sigma / sqrt(m); sigma, the batch-to-batch
        # noise, from successive differences (a trend or the fall at the start does not count)
        sigma = detect.step_spread(x)
        slack = _Z * 1.253 * sigma / math.sqrt(tail)
        if end < (1 - self.tolerance) * h - slack or end > (1 + self.excess) * h + slack:
            return []
        if lowest < (1 - self.tolerance) * h - _Z * 1.253 * sigma / math.sqrt(size):
            return []
        return [
            self.finding(
                trial, int(series.steps[-1]),
                f"{series.name} (TRAIN) ended at {end:.4g} and never went below {lowest:.4g} over "
                f"{len(x)} saved training values: the loss of predicting each of the {classes} classes of "
                f"{labels[0]} at its frequency is {h:.4g} nats (the entropy of their distribution over "
                f"{counted} training labels): the model learned nothing from its inputs, as when the labels "
                "do not belong to them",
                tensors=[series.name, labels[0]],
            )
        ]  # fmt: skip

    def _paired(self, labels: str) -> Series | None:
        """The training loss of `labels`: the run's only one, or the one named for them."""
        train = self._tracker.train
        if len(train) == 1:
            return next(iter(train.values()))
        stem = labels.rsplit("_input_", 1)[0] if "_input_" in labels else None
        for name in (stem, f"{stem}_output_0") if stem else ():
            if name in train:
                return train[name]
        return None

    def undecided(self) -> str | None:
        return None


def _one_per_sample(view: TrialView, labels: str) -> bool:
    """Whether `labels` hold one class per sample (class ids (N,), or one row of C per sample):
    a classifier's. Labels per position (a language model's next tokens, a tagger's tags, a
    segmentation's pixels) are not judged: a short language-model run ends near the entropy of
    its tokens' frequencies on healthy data too (it learns the unigram distribution first), and
    its own mistakes have rules of their own (`labels_not_shifted`, `padding_in_loss`). Per
    position: the hook laid the targets out as the input ids (`lm/eligible_0`), or more labels
    were counted at a step than the model's input holds samples (the targets flattened, B x T),
    or they are not one per row of their own tensor."""
    cols = view.columns.tensor(labels)
    if cols is None or not len(cols.steps) or view.has_tensor("lm/eligible_0"):
        return False
    step = int(cols.steps[-1])
    counted = view.class_statistics(labels, None, step)
    found = view.layout(labels, step)
    if counted is None or found is None:
        return False
    for name in view.names("inputs", step=step):
        batch = view.layout(name, step)
        if batch is not None and len(batch[1]) >= 1 and counted.samples > batch[1][0]:
            return False  # more labels than samples: one per position
    shape = found[1]
    return len(shape) <= 1 or (len(shape) == 2 and counted.samples == shape[0])
