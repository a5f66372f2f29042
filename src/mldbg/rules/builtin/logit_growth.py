"""logit_growth: output or attention logits grow without bound."""

from __future__ import annotations

import math

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix
from mldbg.rules.stats import median, trend_z
from mldbg.rules.view import TrialView

_Z = 2.5  # Mann-Kendall z of the last window: still clearly rising
_FIT = 0.1  # a loss at or below this share of its start has fitted: the logits' growth is its margin
# attention logits q.k / sqrt(d) of unit-scale queries and keys are of order 1 (what the scale
# is for): their growth is measured from there at least (`LogitGrowth._floor`)
_ATTENTION_SCALE = 1.0


def _fitted(trial: TrialView, step: int, window: int) -> bool:
    """Whether a training loss (the `losses` collection, scalars named like "loss") fell to
    at most `_FIT` of where it started by `step`: the median of its last `window` values up
    to `step` against that of its first `window`. Cross-entropy on data the model separates
    (a memorised training set) keeps shrinking only as the logits' margins grow (Soudry et
    al. 2018: as log t, without bound): that growth is the fit, not a harm to it."""
    from mldbg.rules.losses import value_of

    names = trial.names("losses") + trial.names("scalars", regex=r"(?i)loss")
    for name in sorted(set(names)):
        steps = [s for s in trial.tensor(name).steps(Mode.TRAIN) if s <= step]
        if len(steps) < 2 * window:
            continue
        head = [value_of(trial, name, s) for s in steps[:window]]
        tail = [value_of(trial, name, s) for s in steps[-window:]]
        first = [v for v in head if v is not None and math.isfinite(v)]
        last = [v for v in tail if v is not None and math.isfinite(v)]
        if first and last and median(first) > 0 and median(last) <= _FIT * median(first):
            return True
    return False


@register
class LogitGrowth(Rule):
    """Logits grow without bound: the scale of a logit tensor (its max |x| when the tensor
    is saved raw or that statistic was saved, else its standard deviation from the saved
    `variance`) is more than `factor` times its early level (the median of its first
    `window` saved values), above `min_value` (where a softmax saturates), and still
    clearly rising over the last `window` saved values (Mann-Kendall z > 2.5).

    Logits that keep growing saturate the softmax: gradients vanish for the examples it is
    sure of and explode for the others, and a loss spike or NaN follows. Attention logits
    grow the same way in a transformer trained with too high a learning rate (no QK-norm, a
    missing 1/sqrt(d) scale), output logits under a learned temperature without a clamp, a
    loss maximized by mistake, or no weight decay on a separable task. Read: the model's
    outputs (`outputs`) and the classification loss's `predictions` when the labels are
    class ids (a regression output may grow to its targets' scale), the attention logits the
    PyTorch hook records of each `nn.MultiheadAttention`, `F.scaled_dot_product_attention` call
    and eager attention softmax (`attention_logits`: q.k * scale of the first sample of the
    batch, its `max_abs`), and any tensor matching `tensor_regex`
    (attention logits you save, e.g. `attn_scores`). Per mode.

    Attention logits are measured from their early level or their natural scale, 1 (q.k /
    sqrt(d) of unit-scale queries and keys), whichever is larger: a small init (Hugging
    Face's std 0.02) starts them near 0.1, and attention that learns to attend sharply
    reaches 10-20 (ModernBERT's MLM pre-training, 0.08 -> 14 in 230 steps); a runaway goes on
    past 100 (ViT-22B's and small-scale proxies' unstable runs: thousands).

    Output logits that grow while the training loss fell to a tenth of its start or less
    (`_fitted`) are the fit's margins: cross-entropy on data the model separates (a memorised
    training set, its loss at 1e-5) falls only as they grow. Not reported; the harm claimed
    here (a saturated softmax, then a spike) shows in a loss that does not fall.
    """

    needs = ("outputs", "predictions", "attention_logits")
    needs_any = True
    reads = {"outputs": ("variance",), "predictions": ("variance",), "attention_logits": ("max_abs",)}
    window: int = 10
    factor: float = 100.0
    min_value: float = 10.0
    tensor_regex: list[str] | None = None
    suggestion = (
        "Lower the learning rate, clamp a learned temperature or logit scale (CLIP clamps it at 100), "
        "add weight decay or a z-loss on the logits, normalize queries and keys (QK-norm) or check "
        "the 1/sqrt(d) scale of attention, and check that the loss is minimized (not maximize=True, "
        "not a flipped sign)."
    )

    def reset(self) -> None:
        super().reset()
        self._series: dict[tuple[str, str], list[tuple[int, float]]] = {}
        self._keys: dict[str, str] = {}  # tensor -> the statistic its scale is read from
        self._classes: bool | None = None  # are the labels class ids? (None: not known yet)

    def needed_collections(self) -> tuple[str, ...]:
        return () if self.tensor_regex else self.needs

    def _is_classification(self, trial: TrialView, step: int) -> bool:
        if self._classes is None:
            labels = trial.names("labels", step=step)
            if labels:
                preds = trial.names("predictions", step=step)
                stats = trial.class_statistics(labels[0], preds[0] if preds else None, step)
                self._classes = stats is not None
        return bool(self._classes)

    def _scale(self, trial: TrialView, name: str, step: int) -> float | None:
        key = self._keys.get(name)
        if key is None:
            if isinstance(trial.saved_statistic(name, step, "max_abs"), float):
                key = "max_abs"
            elif isinstance(trial.saved_statistic(name, step, "variance"), float):
                key = "variance"
            elif isinstance(trial.statistic(name, step, "max_abs"), float):
                key = "max_abs"
            else:
                return None
            self._keys[name] = key
        value = trial.statistic(name, step, key)
        if not isinstance(value, float) or not math.isfinite(value):
            return None
        return math.sqrt(max(value, 0.0)) if key == "variance" else value

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): the leading `steps` at which no logit
        series grows `factor` times past its early level, their scales appended to the series.
        Left to `check`: the first step with labels while it is not known whether they are
        class ids, a tensor's first step while the statistic of its scale is not chosen, a
        raw record (its scale computed from the tensor), and the steps where a scale is above
        `factor` x its early level and `min_value` (where the trend is then tested)."""
        if not len(steps):
            return 0
        modes, _ = trial.columns.modes(steps)
        cut = len(steps)
        names = trial.names(None, regex=self.tensor_regex) if self.tensor_regex else []
        names += trial.names("attention_logits")
        if self._classes is None:  # check() decides at the first step with labels
            for label in trial.names("labels"):
                cut = min(cut, quiet_prefix(Over(trial, label, steps).present))
        elif self._classes:
            names = [*names, *trial.names(("outputs", "predictions"))]
        scales: list[tuple[str, np.ndarray, np.ndarray]] = []  # name, has a scale, scale
        for name in sorted(set(names)):
            over = Over(trial, name, steps)
            if not over.present[:cut].any():
                continue
            key = self._keys.get(name)
            if key is None:  # check() chooses the statistic where one is saved or computable
                cols = trial.columns.tensor(name)
                saved = cols is not None and any(
                    cols.statistic(k) is not None for k in ("max_abs", "variance")
                )
                cut = min(cut, quiet_prefix(over.present if saved else over.raw))
                continue
            value = over.stat(key)
            cut = min(cut, quiet_prefix(over.raw & np.isnan(value)))
            with np.errstate(invalid="ignore"):
                scale = np.sqrt(np.where(value < 0.0, 0.0, value)) if key == "variance" else value
            scales.append((name, over.present & np.isfinite(value), scale))
        for name, ok, scale in scales:
            for m in np.unique(modes[:cut][ok[:cut]]).tolist():
                mode = Mode(m).name
                if (name, mode) in self._fired:
                    continue
                pos = np.flatnonzero(ok[:cut] & (modes[:cut] == m))
                floor = self._floor(trial, name)
                at = self._first_growth(self._series.get((name, mode), []), scale[pos], floor)
                if at is not None:
                    cut = min(cut, int(pos[at]))
        for name, ok, scale in scales:
            pos = np.flatnonzero(ok[:cut])
            for m, st, v in zip(modes[pos].tolist(), steps[pos].tolist(), scale[pos].tolist(), strict=True):
                self._series.setdefault((name, Mode(m).name), []).append((st, v))
        return cut

    def _first_growth(
        self, series: list[tuple[int, float]], new: np.ndarray, floor: float = 0.0
    ) -> int | None:
        """The index of the first of `new` (scales appended to `series`) at which `check`
        would find the series grown and still rising (from its early level, at least
        `floor`); None if none."""
        w = max(3, self.window)
        n0 = len(series)
        head = [v for _, v in series[:w]] + new[: max(0, w - n0)].tolist()
        if len(head) < w:
            return None
        early = median(head)
        if not early > 0:
            return None
        early = max(early, floor)
        length = n0 + 1 + np.arange(len(new))
        grew = (length >= 2 * w) & (new > self.factor * early) & (new > self.min_value)
        for i in np.flatnonzero(grew).tolist():
            tail = [v for _, v in series[max(0, n0 + i + 1 - w) :]] + new[max(0, i + 1 - w) : i + 1].tolist()
            if trend_z(tail[-w:]) > _Z:
                return i
        return None

    @staticmethod
    def _floor(trial: TrialView, name: str) -> float:
        """The least early level a tensor's growth is measured from: `_ATTENTION_SCALE` for
        the attention logits the hook records (an init of small weights, std 0.02 as Hugging
        Face's, starts them near 0.1: attending sharply, at 10-20, is not a 100-fold runaway
        from there), 0 for the others."""
        return _ATTENTION_SCALE if name in trial.names("attention_logits") else 0.0

    def _margin(self, trial: TrialView, name: str, step: int) -> bool:
        """Output logits (not attention logits) whose loss fell to a tenth: `_fitted`."""
        if name in trial.names("attention_logits") or (
            self.tensor_regex and name in trial.names(None, regex=self.tensor_regex)
        ):
            return False
        return _fitted(trial, step, max(3, self.window))

    def check(self, trial: TrialView, step: int) -> Finding | None:
        names: list[str] = []
        if self.tensor_regex:
            names += trial.names(None, regex=self.tensor_regex, step=step)
        names += trial.names("attention_logits", step=step)
        if self._is_classification(trial, step):
            names += trial.names(("outputs", "predictions"), step=step)
        mode = trial.mode(step).name
        grown = []
        for name in sorted(set(names)):
            value = self._scale(trial, name, step)
            if value is None:
                continue
            series = self._series.setdefault((name, mode), [])
            series.append((step, value))
            w = max(3, self.window)
            if len(series) < 2 * w:
                continue
            early = median([v for _, v in series[:w]])
            last = [v for _, v in series[-w:]]
            z = trend_z(last)
            base = max(early, self._floor(trial, name))
            grew = early > 0 and value > self.factor * base and value > self.min_value
            margin = grew and z > _Z and (name, mode) not in self._fired and self._margin(trial, name, step)
            if grew and z > _Z and not margin and self.first((name, mode)):
                grown.append((name, early, base, value, z, series[0][0]))
        if not grown:
            return None
        name, early, base, value, z, since = grown[0]
        what = "max |x|" if self._keys[name] == "max_abs" else "std"
        return self.finding(
            trial, step,
            f"the logits of {name} ({mode}) grew {value / early:.3g}x: {what} {early:.3g} in its first "
            f"{max(3, self.window)} saved steps (from step {since}), {value:.3g} now (more than {self.factor:g}x "
            f"{'that' if base == early else f'the natural scale {base:g}'} "
            f"and {self.min_value:g}), still rising (Mann-Kendall z = {z:.1f} over the last {max(3, self.window)}): "
            "they grow without bound",
            tensors=[g[0] for g in grown],
        )  # fmt: skip
