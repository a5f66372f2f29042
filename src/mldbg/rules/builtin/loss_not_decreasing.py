"""loss_not_decreasing: the loss does not fall, or rises."""

from __future__ import annotations

import math

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import NEVER, loss_prefix
from mldbg.rules.losses import LossTracker
from mldbg.rules.select import adversarial
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
    A GAN on one hook (`mldbg.rules.select.adversarial`: two models trained, every batch of
    targets one class) plays a game whose training loss is not meant to fall: it is not
    judged (as in `underfitting`); the fast path's screen asks `check` there, which decides.
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
        if wanted == Mode.EVAL:
            return loss_prefix(trial, self._tracker, steps, w, need)
        return loss_prefix(
            trial, self._tracker, steps, w, need, screen=self._may_report, quiet_close=self._quiet_close
        )

    def _quiet_close(self, name: str, has_train: bool) -> bool:
        """Closing an evaluation pass of `name` judges nothing (`check` judges a pass only of
        a loss saved in EVAL alone, or with mode="EVAL")."""
        return has_train or Mode.parse(self.mode) == Mode.TRAIN if self.mode else has_train

    def _may_report(self, name: str, values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The fast path's screen (`loss_prefix`): for each series length of `lengths` (a
        window of `values` closes there), False only where `_judge` surely finds nothing:
        every window finite, the last window's median more than `diff_percent` % below the
        first's and lower by a Mann-Whitney test whose p (taken without the tie correction,
        which only lowers it) is below 0.1, and its median not above `increase_threshold_percent`
        % over the best earlier window's. Margins make it err towards asking `check`."""
        flat_done = (name, "TRAIN", "flat") in self._fired
        rise_done = (name, "TRAIN", "rise") in self._fired
        if flat_done and rise_done:
            return np.zeros(len(lengths), dtype=bool)
        w = max(2, self.num_steps)
        windows = values[: len(values) // w * w].reshape(-1, w)
        finite = np.logical_and.accumulate(np.isfinite(windows).all(axis=1))
        medians = np.median(windows, axis=1)
        j = lengths // w - 1  # the last window of each length
        last, first = windows[j], windows[0]
        m_first, m_last = medians[0], medians[j]
        drop = -(m_last - m_first) / max(abs(float(m_first)), 1e-12) * 100
        u = (last[:, :, None] > first[None, None, :]).sum(axis=(1, 2)) + 0.5 * (
            last[:, :, None] == first[None, None, :]
        ).sum(axis=(1, 2))
        z = (w * w / 2 - u - 0.5) / math.sqrt(w * w * (2 * w + 1) / 12)
        margin = 1e-9 * (1 + abs(self.diff_percent))
        flat_quiet = flat_done | ((drop > self.diff_percent + margin) & (z > 1.2816))  # sf(1.2816) < 0.1
        # rise: against the best earlier window (the first of the lowest medians, as _judge picks)
        b = np.zeros(len(medians), dtype=np.int64)  # b[i]: the best window among 0..i
        for i in range(1, len(medians)):
            b[i] = i if medians[i] < medians[b[i - 1]] else b[i - 1]
        best_at = b[np.maximum(j - 1, 0)]
        best = medians[best_at]
        rise = (m_last - best) / np.maximum(np.abs(best), 1e-12) * 100
        small = rise < self.increase_threshold_percent - 1e-9 * (1 + abs(self.increase_threshold_percent))
        # or not clearly so: p of best-lower-than-last exact (no ties) and above 0.001
        both = np.concatenate([windows[best_at], last], axis=1)
        ordered = np.sort(both, axis=1)
        no_ties = (np.diff(ordered, axis=1) != 0).all(axis=1)
        best_w = windows[best_at]
        u_best = (best_w[:, :, None] > last[:, None, :]).sum(axis=(1, 2))
        z_rise = (w * w / 2 - u_best - 0.5) / math.sqrt(w * w * (2 * w + 1) / 12)
        rise_quiet = rise_done | (j < 1) | small | (no_ties & (z_rise < 3.0902))  # sf(3.0902) > 0.001
        return ~(finite[j] & flat_quiet & rise_quiet)

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
        out: list[Finding] = []
        first = values[:w]
        m_first, m_last = median(first), median(last)
        drop = -rel_change(m_last, m_first) * 100
        game: bool | None = None  # a GAN's loss (asked once, only where a finding would follow)

        def a_game() -> bool:
            nonlocal game
            if game is None:
                game = mode == "TRAIN" and adversarial(trial, steps[-max(2, self.patience) * w :])
            return game

        if (
            (drop < self.diff_percent or p_lower(last, first) > _P_PROGRESS)
            and (name, mode, "flat") not in self._fired
            and not a_game()
            and self.first((name, mode, "flat"))
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
                and (name, mode, "rise") not in self._fired
                and not a_game()
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
