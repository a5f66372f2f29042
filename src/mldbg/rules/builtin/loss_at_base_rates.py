"""loss_at_base_rates: a binary cross-entropy (multi-label) loss that falls to the loss of
predicting each label's base rate and stays there: nothing learned from the inputs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, register
from mldbg.rules.loss_rule import LossSeriesRule
from mldbg.rules.losses import floorless, warming_up
from mldbg.rules.params import Range
from mldbg.rules.view import TrialView

_BLOCKS = 40  # the series is judged as the medians of this many blocks (at least `_MIN_BLOCK` values each)
_MIN_BLOCK = 5
_GRID = 1.05  # judged at lengths that grow by 5% (a few hundred judgements over 10^6 values)
_ONE_HOT = 1e-3  # per-label rates summing to 1 within this: a distribution over classes, not labels


def binary_entropy(p: np.ndarray) -> np.ndarray:
    """h(p) = -p log p - (1 - p) log(1 - p) in nats (0 at p = 0 or 1)."""
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = -(np.where(p > 0, p * np.log(p), 0.0) + np.where(p < 1, (1 - p) * np.log1p(-p), 0.0))
    return np.asarray(out)


def base_rate_loss(positives: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """(the mean binary cross-entropy of predicting each label at its base rate, its standard
    error) from per-label positive counts (or sums of soft targets) over `counts` samples.

    Predicting a constant q_l for label l costs -y log q_l - (1 - y) log(1 - q_l) per sample,
    linear in y: its mean over the data is smallest at q_l = the label's mean target p_l,
    where it is h(p_l), for 0/1 and soft targets alike. A `BCEWithLogitsLoss` (mean
    reduction) averages over the labels too: mean_l h(p_l). Its error, by the delta method:
    h'(p) = log((1 - p) / p), var(p_hat) = p (1 - p) / n."""
    n = np.maximum(np.asarray(counts, dtype=np.float64), 1.0)
    p = np.clip(np.asarray(positives, dtype=np.float64) / n, 0.0, 1.0)
    h = float(binary_entropy(p).mean())
    q = np.clip(p, 0.5 / n, 1 - 0.5 / n)
    slope = np.log((1 - q) / q)
    se = float(math.sqrt(float((slope * slope * q * (1 - q) / n).sum())) / len(p))
    return h, se


@register
class LossAtBaseRates(LossSeriesRule):
    """A multi-label (binary cross-entropy) model that learned each label's base rate and
    nothing else: the labels do not belong to their inputs (shuffled apart from them).

    With labels unrelated to the inputs, the loss of a multi-label model still falls: it
    learns how often each label is on, and then stalls at the loss of predicting those rates,
    the mean over the labels of the binary entropy h(p_l) of each label's positive rate p_l
    (`base_rate_loss`; a model that learns from its inputs goes below it). The rates come from
    the labels the loss was given: their per-label mean (`channel_mean` and `channel_count`,
    which the PyTorch hook records at statistics steps for a binary cross-entropy's targets of
    the predictions' shape, or the raw labels), over every saved training step up to the one
    judged. Labels whose per-label rates sum to 1 are one-hot or soft targets of a
    cross-entropy over classes: not judged here (the diagnosis's `at_prior` fact weighs those).

    The decision, at series lengths that grow by 5% from `min_values` saved training values on:
    the series as the medians of 40 blocks (of at least 5 values); the loss is at the base
    rates in a block when its level (the median of its own and its two neighbours' medians: one
    odd block is noise) lies within `tolerance` (relative) of that loss, or within 3 standard
    errors of the difference (the block median's, from its spread, and the rates' estimate's). It is reported when:

    - the loss started well above (its first 5 values' median at least 1 + `min_drop` times
      the base-rate loss): it fell, so the optimizer works and found the rates;
    - the trailing blocks at the base rates (the plateau) hold at least `min_plateau` values and
      `factor` times as many as the loss took to get there: a slow start sits at the base rates
      for a while and then falls below them, a model that cannot learn from its inputs stays;
    - the plateau is not falling through the band: the median of its later half's blocks is
      not lower than its earlier half's by more than `tolerance` of the base-rate loss (a loss
      still going down is still learning);
    - no learning rate is still warming up (`mldbg.rules.losses.warming_up`), the loss has a
      floor at 0 (`floorless`: not a contrastive objective), and it does not move against
      another training loss of the run (`opposed`: a GAN's discriminator on its 0/1 targets
      plays a game, its loss is not meant to fall).

    Not judged: a loss with `pos_weight` or other terms (it does not sit at the base-rate
    loss, so nothing fires), balanced labels (every rate near 0.5: an untrained model already
    predicts them, and no fall tells the optimizer works), and a model that memorizes its
    shuffled training set (its training loss goes below the base rates, as a learning
    model's does; only an evaluation on held-out data tells them apart). A limit: soft targets
    (label smoothing, distillation) floor the loss at their own entropy, which with rare labels
    and heavy smoothing nears the base-rate loss. Judged once per loss series; each judgement
    reads only the recorded labels' rates and the loss series.
    """

    needs = ("losses", "labels")
    needs_any = False
    reads = {"labels": ("channel_mean", "channel_count")}
    min_values: int = 100
    min_plateau: int = 200
    factor: float = 5.0
    tolerance: float = 0.03
    min_drop: float = 0.15
    bounds: ClassVar[dict[str, Range]] = {
        "min_values": Range(20, None),
        "min_plateau": Range(1, None),
        "factor": Range(0, None),
        "tolerance": Range(0, 1),
        "min_drop": Range(0, None),
    }
    cause = "labels_misaligned"
    suggestion = (
        "The model predicts each label at its base rate and nothing from the inputs: check that "
        "inputs and labels stay paired (a shuffle, sort or split applied to one and not the other, "
        "a join on the wrong key, labels of another dataset), print a few samples with their labels, "
        "and compare with a model trained on a small subset, which should overfit it."
    )

    def reset(self) -> None:
        super().reset()
        # labels tensor -> (last step read, per-label positives, per-label samples)
        self._rates: dict[str, tuple[int, np.ndarray, np.ndarray]] = {}
        self._next: dict[str, int] = {}  # loss series -> the next length judged

    # the judged lengths -----------------------------------------------------------------
    def _due(self, name: str, n: int) -> bool:
        nxt = self._next.get(name, self.min_values)
        if n < nxt:
            return False
        self._next[name] = max(n + 1, math.ceil(n * _GRID))
        return True

    def _may_fire(self, name: str, values: Sequence[float], lengths: np.ndarray) -> np.ndarray:
        """The fast path's screen: True at the first length due for a judgement (the rule
        reads the labels there, which only the per-step path has)."""
        out = np.zeros(len(lengths), dtype=bool)
        if name in self._fired:
            return out
        nxt = self._next.get(name, self.min_values)
        hit = np.flatnonzero(np.asarray(lengths) >= nxt)
        if len(hit):
            out[hit[0]] = True
        return out

    def _judge(
        self, trial: TrialView, name: str, steps: Sequence[int], values: Sequence[float]
    ) -> list[Finding]:
        n = len(values)
        if name in self._fired or not self._due(name, n):
            return []
        labels = self._labels_of(trial, name)
        if labels is None:
            return []
        got = self._base_rates(trial, labels, steps[-1])
        if got is None:
            return []
        h, se_h, n_labels, samples = got
        x = np.asarray(values, dtype=np.float64)
        found = self._plateau(x, h, se_h)
        if found is None or floorless(x) or self._game(name) or warming_up(trial, steps[-1]) is not None:
            return []
        start, level, first_at = found
        if not self.first(name):
            return []
        return [
            self.finding(
                trial, steps[-1],
                f"{name} (TRAIN) fell from {start:.4g} to {level:.4g} and has stayed there since training "
                f"step {steps[first_at]} ({n - first_at} saved values, {(n - first_at) / max(first_at, 1):.1f}x "
                f"as many as it took to get there): the loss of predicting each of the {n_labels} labels of "
                f"{labels} at its base rate is {h:.4g} (the mean binary entropy of their positive rates, over "
                f"{samples} training samples): the model learned how often each label is on and nothing "
                "from the inputs, as when the labels do not belong to their inputs",
                tensors=[name, labels],
            )
        ]  # fmt: skip

    def _plateau(self, x: np.ndarray, h: float, se_h: float) -> tuple[float, float, int] | None:
        """(start level, plateau level, index of the plateau's first value) when the series
        `x` sits at the base-rate loss `h` as the rule's doc says; else None."""
        n = len(x)
        if n < self.min_values or h <= 0 or not np.isfinite(x).all():
            return None
        start = float(np.median(x[:5]))
        if start < (1 + self.min_drop) * h:
            return None
        size = max(_MIN_BLOCK, n // _BLOCKS)
        k = n // size
        blocks = x[n - k * size :].reshape(k, size)
        med = np.median(blocks, axis=1)
        mad = np.median(np.abs(blocks - med[:, None]), axis=1)
        se = 1.253 * 1.4826 * mad / math.sqrt(size)  # the standard error of a block's median
        if k >= 3:  # each block's level: the median of it and its two neighbours' (one odd block is noise)
            padded = np.concatenate([med[:1], med, med[-1:]])
            med = np.median(np.stack([padded[:-2], padded[1:-1], padded[2:]]), axis=0)
        near = np.abs(med - h) <= np.maximum(self.tolerance * h, 3 * np.sqrt(se * se + se_h * se_h))
        if not near[-1]:
            return None
        j = k - 1
        while j > 0 and near[j - 1]:
            j -= 1
        first_at = n - k * size + j * size
        plateau = n - first_at
        if j == 0 or plateau < max(self.min_plateau, self.factor * first_at):
            return None
        half = (k - j) // 2
        if (
            half
            and float(np.median(med[k - half :])) < float(np.median(med[j : j + half])) - self.tolerance * h
        ):
            return None  # still falling across the band: still learning
        return start, float(np.median(x[first_at:])), first_at

    def _labels_of(self, trial: TrialView, loss: str) -> str | None:
        """The labels tensor given to the loss `loss`: `<loss>_input_1` of a registered loss
        (`X_output_0`) or of the hook's own `loss`; else the run's one labels tensor."""
        names = trial.names("labels")
        prefix = loss.removesuffix("_output_0")
        for candidate in (f"{prefix}_input_1",):
            if candidate in names:
                return candidate
        return names[0] if len(names) == 1 else None

    def _base_rates(self, trial: TrialView, labels: str, upto: int) -> tuple[float, float, int, int] | None:
        """(base-rate loss, its standard error, labels, samples) from the per-label mean of
        the labels at the saved training steps up to `upto`; None when they are not per-label
        0..1 targets (class ids, one-hot rows), or too few."""
        last, pos, cnt = self._rates.get(labels, (-1, np.zeros(0), np.zeros(0)))
        for step in trial.tensor(labels).steps(mode=Mode.TRAIN):
            if step <= last:
                continue
            if step > upto:
                break
            last = step
            if not _per_label(trial, labels, step):
                continue
            mean = trial.statistic(labels, step, "channel_mean")
            count = trial.statistic(labels, step, "channel_count")
            if (
                not (isinstance(mean, np.ndarray) and isinstance(count, np.ndarray))
                or mean.shape != count.shape
            ):
                continue
            mean, count = mean.astype(np.float64).reshape(-1), count.astype(np.float64).reshape(-1)
            if len(pos) and len(pos) != len(mean):
                pos, cnt = np.zeros(0), np.zeros(0)  # another label set: start again
            if not len(pos):
                pos, cnt = np.zeros(len(mean)), np.zeros(len(mean))
            ok = np.isfinite(mean) & (count > 0)
            pos = pos + np.where(ok, mean * count, 0.0)
            cnt = cnt + np.where(ok, count, 0.0)
        self._rates[labels] = (last, pos, cnt)
        if not len(pos) or cnt.min() < 100:
            return None
        p = pos / cnt
        if p.min() < 0 or p.max() > 1 or abs(float(p.sum()) - 1) < _ONE_HOT:
            return None
        h, se = base_rate_loss(pos, cnt)
        return h, se, len(p), int(cnt.max())


def _per_label(trial: TrialView, labels: str, step: int) -> bool:
    """Whether the labels at `step` are float targets of their predictions' shape (one 0..1
    target per label: a binary cross-entropy's), not class ids."""
    mine = trial.layout(labels, step)
    if mine is None or mine[0] != "f" or not mine[1]:
        return False
    preds = labels.removesuffix("_input_1") + "_input_0"
    theirs = trial.layout(preds, step) if preds != labels and trial.has_tensor(preds) else None
    return theirs is not None and theirs[1] == mine[1]
