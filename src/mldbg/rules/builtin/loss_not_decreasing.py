"""loss_not_decreasing: the loss does not fall, or rises."""

from __future__ import annotations

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import NEVER, loss_prefix
from mldbg.rules.losses import LossTracker
from mldbg.rules.stats import median, p_lower, rel_change
from mldbg.rules.view import TrialView

_P_PROGRESS = 0.1  # the last window must be lower than the first at this significance to count as progress
_P_RISE = 0.001  # a rise must be this significant: minibatch noise is not a rise
_MATERIAL = 10.0  # % drop that counts as progress even when the first window is too noisy to test


_FLAT_ADVICE = (
    "Check that the optimizer steps and holds the model's parameters (a head attached after the "
    "optimizer was built is not in it), raise the learning rate (it may be orders of magnitude too "
    "small), check that the labels match the inputs, and look for dead_relu, vanishing_gradient, "
    "unchanged_tensor or weight_update_ratio findings."
)
_RISING_ADVICE = (
    "The loss ended above where it started: lower the learning rate or decay it with a schedule, "
    "clip gradients, and check for gradients that accumulate (a missing optimizer.zero_grad()) and "
    "for bad batches."
)


@register
class LossNotDecreasing(Rule):
    """The loss has made no progress, or rose, judged on windows of `num_steps` saved values.

    Minibatch losses are noisy, so windows are compared with a rank test (Mann-Whitney), not
    as two raw points:
    - *not decreasing*: after `patience` windows, the latest window is not lower than the
      first one by more than `diff_percent` % (medians), or by less than 10% and within the
      noise (one-sided Mann-Whitney p > 0.1). A loss that fell
      and then levelled off has learned; its plateau is not reported here (see `overtraining`
      for stopping early).
    - *rising*: the latest window's median is more than `increase_threshold_percent` % above
      the best window's, and clearly so (p < 0.001).
    `mode` picks TRAIN or EVAL series (default: the training loss; a loss saved only in EVAL,
    such as a validation metric, is judged per evaluation). Tensors of the `losses`
    collection (and scalars named like "loss") are read, plus `tensor_regex`.
    """

    needs = ("losses", "scalars")
    needs_any = True
    num_steps: int = 10
    diff_percent: float = 0.1
    increase_threshold_percent: float = 5.0
    mode: str | None = None
    use_losses_collection: bool = True
    tensor_regex: list[str] | None = None
    patience: int = 5

    def reset(self) -> None:
        super().reset()
        self._tracker = LossTracker(self.use_losses_collection, self.tensor_regex)
        self._series: dict[tuple[str, str], list[tuple[int, float]]] = {}  # per-evaluation values
        # (name, mode) -> medians of the complete windows judged so far
        self._medians: dict[tuple[str, str], list[float]] = {}

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading training `steps` at which no loss window closes: their losses join the
        series from the columns; `check` judges the steps that close one."""
        wanted = Mode.parse(self.mode) if self.mode else None
        w = max(2, self.num_steps)
        need = max(2, self.patience) * w if wanted in (None, Mode.TRAIN) else NEVER
        return loss_prefix(trial, self._tracker, steps, w, need)

    def check(self, trial: TrialView, step: int) -> list[Finding]:
        mode, names, closed = self._tracker.update(trial, step)
        out: list[Finding] = []
        wanted = Mode.parse(self.mode) if self.mode else None
        if mode == Mode.TRAIN and wanted in (None, Mode.TRAIN):
            for name in names:
                s = self._tracker.train.get(name)
                if s and s.steps and s.steps[-1] == step:
                    out += self._judge(trial, step, name, "TRAIN", list(zip(s.steps, s.values, strict=False)))
        for name, ev in closed:
            if wanted == Mode.EVAL or (wanted is None and name not in self._tracker.train):
                series = self._series.setdefault((name, "EVAL"), [])
                series.append((ev.last_step, ev.value))
                out += self._judge(trial, step, name, "EVAL", series)
        return out

    def finish(self, trial: TrialView) -> list[Finding]:
        out: list[Finding] = []
        wanted = Mode.parse(self.mode) if self.mode else None
        for name, ev in self._tracker.close_all():
            if wanted == Mode.EVAL or (wanted is None and name not in self._tracker.train):
                series = self._series.setdefault((name, "EVAL"), [])
                series.append((ev.last_step, ev.value))
                out += self._judge(trial, ev.last_step, name, "EVAL", series)
        return out

    def unchecked(self) -> str | None:
        if not self._tracker.seen_any:
            return "no loss values found (losses collection, or scalars named like 'loss')"
        return None

    def undecided(self) -> str | None:
        need = max(2, self.patience) * max(2, self.num_steps)
        if self.mode and Mode.parse(self.mode) == Mode.EVAL:
            return self._tracker.shortfall(need, evaluations=True)
        if self._series and max(len(v) for v in self._series.values()) >= need:
            return None  # an evaluation-only loss was judged
        why = self._tracker.shortfall(need)
        return (
            None if why is None else f"{why}: patience={self.patience} windows of num_steps={self.num_steps}"
        )

    def _judge(
        self, trial: TrialView, step: int, name: str, mode: str, series: list[tuple[int, float]]
    ) -> list[Finding]:
        w = max(2, self.num_steps)
        n = len(series)
        if n % w or n < max(2, self.patience) * w:
            return []
        values = [v for _, v in series]
        steps = [s for s, _ in series]
        last = values[n - w :]
        if sum(v == v and abs(v) != float("inf") for v in last) < w / 2:
            return []  # NaN or inf: exploding_tensor's business
        what = f"{name} ({mode})"
        out = []
        first = values[:w]
        m_first, m_last = median(first), median(last)
        drop = -rel_change(m_last, m_first) * 100
        if (drop < self.diff_percent or p_lower(last, first) > _P_PROGRESS) and self.first(
            (name, mode, "flat")
        ):
            out.append(self.finding(
                trial, step,
                f"{what} has not decreased over {n} saved values: median {m_first:.4g} at steps "
                f"{steps[0]}-{steps[w - 1]}, {m_last:.4g} at steps {steps[n - w]}-{steps[-1]} "
                f"({-drop:+.2g}%; a drop must exceed {self.diff_percent:g}% and the minibatch noise)",
                tensors=[name],
                suggestion=_RISING_ADVICE if m_last > m_first else _FLAT_ADVICE,
            ))  # fmt: skip
        cache = self._medians.setdefault((name, mode), [])
        while len(cache) < n // w - 1:  # medians of the complete windows before the last one
            i = len(cache) * w
            cache.append(median(values[i : i + w]))
        medians = cache[: n // w - 1]
        if medians:
            b = min(range(len(medians)), key=lambda i: medians[i])
            best = values[b * w : b * w + w]
            rise = rel_change(m_last, medians[b]) * 100
            if (
                rise > self.increase_threshold_percent
                and p_lower(best, last) < _P_RISE
                and self.first((name, mode, "rise"))
            ):
                out.append(self.finding(
                    trial, step,
                    f"{what} rose by {rise:.0f}%: median {medians[b]:.4g} at steps {steps[b * w]}-{steps[b * w + w - 1]}, "
                    f"{m_last:.4g} at steps {steps[n - w]}-{steps[-1]} (more than {self.increase_threshold_percent:g}%)",
                    tensors=[name],
                    suggestion=(
                        "Lower the learning rate or decay it with a schedule, clip gradients, and check "
                        "for bad batches (NaN, wrong labels) around the step where it started to rise."
                    ),
                ))  # fmt: skip
        return out
