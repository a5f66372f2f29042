"""train_eval_discrepancy: the same weights give outputs of very different scale in TRAIN and EVAL."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix
from mldbg.rules.view import TrialView

COLLECTIONS = ("relu_activations", "tanh_activations", "sigmoid_activations", "outputs")
# the share of the last pass's factor below which a pass off again counts as converging: a
# running average with momentum 0.1 (PyTorch's) behind activations of variance 1e-4 shrinks
# its factor by ~0.6 every 10 steps; a stuck one (momentum 0) moves with the data (+-20%)
_CONVERGING = 0.75


@dataclass(frozen=True)
class _Passes:
    """The evaluation passes in a row off in scale and not converging: `streak` of them; the
    last pass seen `ran` training steps in, and its worst factor (0: none of its steps off)."""

    streak: int = 0
    ran: int = -1
    factor: float = 0.0

    def after(self, ran: int, factor: float) -> _Passes:
        """With an EVAL step `ran` training steps in, whose worst factor off is `factor` (0:
        none off)."""
        if ran == self.ran:  # the same pass: its first step off counts it
            if factor and not self.factor:
                return _Passes(self.streak + 1, ran, factor)
            return _Passes(self.streak, ran, max(factor, self.factor))
        if not factor:
            return _Passes(0, ran, 0.0)
        # a lagging average converges: off again, but by a factor shrunk past `_CONVERGING` of
        # the last pass's, is a lag that is catching up (its streak starts over), not a stuck one
        going_on = self.factor and factor >= _CONVERGING * self.factor
        return _Passes(self.streak + 1 if going_on else 1, ran, factor)


@register
class TrainEvalDiscrepancy(Rule):
    """With the same weights, TRAIN and EVAL forwards differ in scale by orders of magnitude:
    the RMS (sqrt(variance + mean^2)) of a layer's activations, or of the model's output, in an
    EVAL step lies more than `threshold` times outside the range of its TRAIN values just
    before and just after that evaluation (so a scale that grows while the model learns, as
    logits do, is bracketed). Mode-dependent layers do it: BatchNorm whose running statistics
    are broken (momentum 0, reset, never updated, computed on other data) normalizes the
    evaluation inputs with the wrong scale; hand-written dropout that scales at evaluation. A
    healthy dropout changes the scale by at most 1 / (1 - p).

    Judges an evaluation at the next TRAIN statistics step, only after `min_train_steps`
    TRAIN steps (the training steps run, saved or not) (BatchNorm's running statistics need a few steps to follow the data), and
    fires after `patience` evaluation passes in a row with such a step (a pass: the EVAL steps
    between two training steps; its batches share one set of running statistics, so a second
    batch of the same pass is no new evidence); the finding is dated at the EVAL step. Running
    statistics that lag behind the data converge: Keras' and Flax's BatchNorm (momentum 0.99,
    a time constant of 100 steps) evaluated after its first few dozen steps can be 10x off in
    one pass and within 5x at the next; running statistics that never follow it (momentum 0)
    stay off at every pass. Reads
    the `mean` and `variance` statistics the two-line PyTorch hook records for activation
    inputs and model outputs in both modes (or raw tensors).
    """

    needs = COLLECTIONS
    needs_any = True
    reads = {c: ("mean", "variance") for c in COLLECTIONS}
    threshold: float = 10.0
    min_train_steps: int = 10
    patience: int = 2

    def reset(self) -> None:
        super().reset()
        self._before: dict[str, float] = {}  # per tensor, its scale at the last TRAIN statistics step
        # EVAL steps since then: their scales, and the training steps run before them (their pass)
        self._pending: list[tuple[int, dict[str, float], int]] = []
        self._train_steps = 0
        self._passes = _Passes()

    def _scale(self, trial: TrialView, name: str, step: int) -> float | None:
        var, mean = trial.statistic(name, step, "variance"), trial.statistic(name, step, "mean")
        if not isinstance(var, float) or not isinstance(mean, float):
            return None
        rms = math.sqrt(max(var, 0.0) + mean * mean)
        return rms if math.isfinite(rms) else None

    def _scales(self, trial: TrialView, step: int) -> dict[str, float]:
        found = {}
        for name in trial.names(COLLECTIONS, step=step):
            scale = self._scale(trial, name, step)
            if scale is not None:
                found[name] = scale
        return found

    def check(self, trial: TrialView, step: int) -> Finding | None:
        mode = trial.mode(step)
        if mode == Mode.EVAL:
            if self._before:
                scales = self._scales(trial, step)
                if scales:
                    self._pending.append((step, scales, self._train_steps))
            return None
        if mode != Mode.TRAIN:
            return None
        self._train_steps += 1
        after = self._scales(trial, step)
        if not after:
            return None  # not a statistics step: the evaluations wait for one
        pending, self._pending = self._pending, []
        before, self._before = self._before, after
        if trial.mode_step(step) < self.min_train_steps:
            return None  # counted in training steps, saved or not (the statistics may be sparse)
        for eval_step, scales, run in pending:
            found = self._judge(trial, eval_step, scales, before, after, run)
            if found is not None:
                return found
        return None

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): the leading steps where no evaluation is
        judged to fire, walked as `check` walks them (evaluation scales kept while a TRAIN
        scale is known, judged at the next TRAIN statistics step with `_offs`, the code `check`
        runs), from the saved `mean` and `variance`. A record only its raw value (or an
        unsaved statistic) can judge ends them; so does the TRAIN step that would report."""
        if not len(steps):
            return 0
        modes, mode_steps = trial.columns.modes(steps)
        train, evals = modes == int(Mode.TRAIN), modes == int(Mode.EVAL)
        names = trial.names(COLLECTIONS)
        scale = np.full((len(names), len(steps)), np.nan)
        interesting = np.zeros(len(steps), dtype=bool)
        with np.errstate(invalid="ignore", over="ignore"):
            for t, name in enumerate(names):
                over = Over(trial, name, steps)
                var, mean = over.stat("variance"), over.stat("mean")
                saved = over.present & ~over.raw
                interesting |= (train | evals) & over.present & (over.raw | np.isnan(var) | np.isnan(mean))
                rms = np.sqrt(np.maximum(var, 0.0) + mean * mean)
                scale[t] = np.where(saved & np.isfinite(rms), rms, np.nan)
        k = quiet_prefix(interesting)
        has = ~np.isnan(scale[:, :k])
        before, pending, passes = self._before, list(self._pending), self._passes
        ran = self._train_steps + np.cumsum(train) - train  # training steps before each step
        cut = k
        for i in self._events(evals[:k], train[:k] & has.any(axis=0)).tolist():
            found = {names[t]: float(scale[t, i]) for t in np.flatnonzero(has[:, i]).tolist()}
            if evals[i]:
                if before and found:
                    pending.append((int(steps[i]), found, int(ran[i])))
                continue
            if mode_steps[i] >= self.min_train_steps:
                now = passes
                for _, scales, run in pending:
                    _, worst = self._offs(scales, before, found)
                    now = now.after(run, worst[0] if worst is not None else 0.0)
                    if worst is not None and now.streak >= self.patience and "scale" not in self._fired:
                        cut = i  # the TRAIN step that reports: check()'s
                        break
                if cut == i:
                    break
                passes = now
            pending, before = [], found
        self._before, self._pending, self._passes = before, pending, passes
        self._train_steps += int(train[:cut].sum())
        return cut

    def _events(self, evals: np.ndarray, scaled: np.ndarray) -> np.ndarray:
        """The steps (indices) that change what `check` keeps: the evaluation steps, and of the
        TRAIN statistics steps the last before each (its scales are `before`), the first after
        each (it judges them), the first (it judges what is pending) and the last; a TRAIN
        statistics step between others only replaces `before` with its own, which the next
        of them replaces again."""
        e, t = np.flatnonzero(evals), np.flatnonzero(scaled)
        if not len(t):
            return e
        at = np.searchsorted(t, e)
        parts = [e, t[at[at > 0] - 1], t[at[at < len(t)]], t[-1:], t[:1] if self._pending else t[:0]]
        return np.unique(np.concatenate(parts))

    def _offs(
        self, scales: dict[str, float], before: dict[str, float], after: dict[str, float]
    ) -> tuple[list[str], tuple[float, str, float, float, float] | None]:
        """The tensors whose EVAL scale lies more than `threshold` times outside their TRAIN
        range around it, and the worst (factor, name, scale, low, high)."""
        worst: tuple[float, str, float, float, float] | None = None
        off: list[str] = []
        for name, scale in scales.items():
            if name not in before or name not in after:
                continue
            low, high = min(before[name], after[name]), max(before[name], after[name])
            if not low > 1e-8:
                continue
            factor = scale / high if scale > high else low / max(scale, 1e-30)
            if factor > self.threshold:
                off.append(name)
                if worst is None or factor > worst[0]:
                    worst = (factor, name, scale, low, high)
        return off, worst

    def _judge(
        self,
        trial: TrialView,
        step: int,
        scales: dict[str, float],
        before: dict[str, float],
        after: dict[str, float],
        run: int,
    ) -> Finding | None:
        off, worst = self._offs(scales, before, after)
        self._passes = self._passes.after(run, worst[0] if worst is not None else 0.0)
        streak = self._passes.streak
        if worst is None or streak < self.patience or not self.first("scale"):
            return None
        factor, name, scale, low, high = worst
        span = f"{low:.3g}" if low == high or f"{low:.3g}" == f"{high:.3g}" else f"{low:.3g}-{high:.3g}"
        return self.finding(
            trial, step,
            f"in EVAL the scale (RMS) of {len(off)} tensor{'s' if len(off) > 1 else ''} is off by more than "
            f"{self.threshold:g}x from TRAIN at {streak} evaluation passes in a row: {name} has RMS "
            f"{scale:.3g} in EVAL against {span} in the TRAIN steps around it ({factor:.3g}x)",
            tensors=off,
            suggestion="Check the mode-dependent layers: BatchNorm's running statistics (momentum, "
            "track_running_stats, a reset or a load that skipped them, statistics computed on other data), "
            "dropout that scales at evaluation instead of training, and that training and evaluation inputs "
            "are preprocessed the same way.",
        )  # fmt: skip
