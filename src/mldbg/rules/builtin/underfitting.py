"""underfitting: the loss stays high and flat."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import loss_prefix
from mldbg.rules.losses import (
    _TREND_Z,
    GAME_STEPS,
    LossTracker,
    Progress,
    floorless,
    judged_at,
    judgement,
    opposed,
    phase_progress,
    progress,
    refutes_stall,
    warming_up,
)
from mldbg.rules.select import adversarial, progress_chases_targets
from mldbg.rules.view import TrialView


def _quiet(name: str, has_train: bool) -> bool:
    """Closing an evaluation pass judges nothing here (`check` reads the closed passes when a
    training loss is judged)."""
    return True


def _rising(p: Progress) -> bool:
    """The loss ended above its start, one-sided at 5%, or trends up (z > 2)."""
    return p.last > p.first and (p.rise_z > 1.645 or p.trend_z > -_TREND_Z)


@register
class Underfitting(Rule):
    """The model does not fit even the training data: the training loss is still above
    `threshold_percent` % of where it started (the median of its first values), confidently
    (the upper confidence bound of the share it shed is below 100 - `threshold_percent` %),
    it is not falling now (Mann-Kendall z > -2 over 10 blocks of its later half; live, mid-run:
    its pace now shown below that share too, `loss_not_decreasing`'s screen), and the validation loss,
    when there is one, has not improved by more than 100 - `threshold_percent` % either.

    The decision is `loss_not_decreasing`'s (`mldbg.rules.losses.progress`): the whole series
    judged at geometrically spaced lengths (`window` x `patience`, then x1.25 each time) from
    1,000 saved values on (a stable baseline; a loss without any noise from the first), and at the end of a finished run, each judgement spending its share of a false-alarm budget
    of 1e-3 per run against a noise model of the run itself. A loss that fell a lot and then
    levelled off has learned, a slow but steady fall is learning too (a fall from the second
    of 10 blocks to the last, or along its trend over that stretch, beyond the noise at the
    judgement's bar, `Progress.late_fall_z`,
    however small: a masked LM's pre-training near the unigram entropy), and a loss too noisy
    to tell (a warm-up's first steps) is not reported. On a finished run checked offline, a
    verdict reached mid-run is reported (at its step) unless the run refutes it
    (`mldbg.rules.losses.refutes_stall`: a later judgement finds the loss decreasing, as after
    a plateau at init that the run leaves). A series in
    phases begun by new schedules of the learning rate (`mldbg.rules.losses.phase_progress`: a
    fine-tune after a pretraining on another objective) must be stalled in its last phase
    too, judged on its own. Too small a model, a learning rate far
    too low, over-regularization, or labels unrelated to the inputs cause it. A loss that
    rose (its last block above its start, one-sided at 5%, or an upward trend, z > 2) is
    diverging: the finding says so and suggests lowering the learning rate, never raising
    it. A GAN (two models trained on one-class targets, or two losses that move against each
    other) plays a game whose loss is not meant to fall: it is not judged. Nor is a loss that
    has not risen while the recorded learning rate still rises (a warm-up,
    `mldbg.rules.losses.warming_up`). Nor is a loss without a floor at 0 (`mldbg.rules.losses.floorless`:
    of both signs, as an EBM's energy gap or a WGAN critic near 0 or crossing it; never above
    0, as minus an entropy bonus; or 0 at its start, as a penalty weighted 0 at first): it has
    no floor to fall to.
    """

    needs = ("losses", "scalars")
    needs_any = True
    window: int = 10
    patience: int = 5
    threshold_percent: float = 90.0
    use_losses_collection: bool = True
    tensor_regex: list[str] | None = None
    diverging_suggestion: ClassVar[str] = (
        "The loss is rising, not stalled: lower the learning rate (10x), clip gradients "
        "(torch.nn.utils.clip_grad_norm_), add a warmup, and check for bad batches and for "
        "gradients that accumulate (a missing optimizer.zero_grad())."
    )
    suggestion = (
        "Train longer or raise the learning rate, use a bigger model (more units or layers), remove "
        "excess regularization (weight decay, dropout), and check the data pipeline: do the labels "
        "belong to the inputs?"
    )

    def reset(self) -> None:
        super().reset()
        self._tracker = LossTracker(self.use_losses_collection, self.tensor_regex)
        # name -> (progress, validation losses, step) of a verdict left to the run's end
        self._held: dict[str, tuple[Progress, list[float], int]] = {}

    def undecided(self) -> str | None:
        why = self._tracker.shortfall(self.patience * max(2, self.window))
        return None if why is None else f"{why}: patience={self.patience} windows of window={self.window}"

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading training `steps` at which no judgement may report: their losses join
        the series from the columns; `check` judges the steps that may."""
        w = max(2, self.window)
        return loss_prefix(
            trial, self._tracker, steps, w, self.patience * w, screen=self._may_report, quiet_close=_quiet
        )

    def _may_report(self, name: str, values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The fast path's screen (`loss_prefix`): `_verdict`, the decision `check` takes, at
        each series length of `lengths` (True where it reports)."""
        out = np.zeros(len(lengths), dtype=bool)
        for i in np.flatnonzero(judged_at(self.window, self.patience, lengths)).tolist():
            out[i] = self._verdict(name, values, int(lengths[i]), False) is not None  # elsewhere: not judged
        return out

    def _verdict(
        self, name: str, values: Sequence[float] | np.ndarray, n: int, final: bool
    ) -> Progress | None:
        """The decision on the first `n` of `values` (judged at `checkpoints`, or at the end
        with `final`): the progress when the loss is still high and not falling; None
        otherwise. The validation loss and the GAN screens are the caller's (they read the
        tracker and the trial)."""
        if name in self._fired:
            return None
        k = judgement(self.window, self.patience, values, n, final)
        if k is None:
            return None
        p = progress(values[:n], k)
        return p if p is not None and self._stalled(p, final) else None

    def _stalled(self, p: Progress, final: bool) -> bool:
        """Whether the progress `p` is still high and not falling (live, unless `final`: nor now)."""
        if not math.isfinite(p.first) or p.first == 0:
            return False
        material = 1 - self.threshold_percent / 100
        return (
            p.drop_high < material
            and p.trend_z > _TREND_Z
            and p.late_fall_z < p.z  # still falling past its first tenth, significantly: it fits
            and (final or p.pace_high < material)
        )

    def check(self, trial: TrialView, step: int) -> Finding | None:
        mode, names, _ = self._tracker.update(trial, step)
        if mode != Mode.TRAIN:
            return None
        return self._judge(trial, step, names, final=False)

    def finish(self, trial: TrialView) -> list[Finding]:
        self._tracker.close_all()
        material = 1 - self.threshold_percent / 100
        w = max(2, self.window)
        held = []
        for name, v in self._held.items():  # v: (progress, evaluations, the step it was judged at)
            s = self._tracker.train[name]
            since = bisect.bisect_right(s.steps, v[2])  # the values judged then
            if not refutes_stall(s.values, w, self.patience, material, since=since) and self.first(name):
                held.append((name, *v))
        self._held = {}
        out = [self._report(trial, held)] if held else []
        last = self._judge(trial, None, list(self._tracker.train), final=True)
        return out + ([last] if last is not None else [])

    def _judge(self, trial: TrialView, step: int | None, names: list[str], final: bool) -> Finding | None:
        found: list[tuple[str, Progress, list[float], int]] = []
        for name in names:
            s = self._tracker.train.get(name)
            if s is None or not s.steps or (step is not None and s.steps[-1] != step):
                continue
            p = self._verdict(name, s.values, len(s.values), final)
            if p is None:
                continue
            phased, now = phase_progress(trial, s.steps, s.values, self.window, self.patience)
            if phased and (now is None or not self._stalled(now, final)):
                continue  # the phase a new schedule began falls from its own start (or just began)
            evals = [e.value for e in self._tracker.closed_evals(name) if math.isfinite(e.value)]
            if len(evals) >= 2 and 100.0 * min(evals[1:]) / evals[0] <= self.threshold_percent:
                continue
            # the labels and gradients that tell a GAN are saved at statistics steps (every
            # 100th of the two-line hook's, after 20): read them over the last GAME_STEPS
            w = max(self.patience * max(2, self.window), GAME_STEPS)
            if floorless(s.values):
                continue  # of both signs (a contrastive energy gap): no floor to measure progress from
            if adversarial(trial, s.steps[-w:]) or any(
                other != name and opposed(s.values, o.values) for other, o in self._tracker.train.items()
            ):
                continue  # an adversarial game (a GAN): its loss is not meant to fall
            if not _rising(p) and warming_up(trial, s.steps[-1]):
                continue  # a flat loss while the learning rate still rises: the warm-up's
            if progress_chases_targets(trial, name, s.steps, p):
                continue  # a TD loss chasing targets that grow with the values it learns
            if not final and trial.finished:
                # a finished run checked offline: a verdict its own end refutes (a plateau at the
                # start, then the fall) is no finding; `finish` reports the first one the run
                # showed unless the whole series refutes it (`refutes_stall`)
                self._held.setdefault(name, (p, evals, s.steps[-1]))
                continue
            if self.first(name):
                found.append((name, p, evals, s.steps[-1]))
        return self._report(trial, found) if found else None

    def _report(self, trial: TrialView, found: list[tuple[str, Progress, list[float], int]]) -> Finding:
        """The finding on the losses `found` (name, progress, validation losses, step), at the
        first's step."""
        name, p, evals, at = found[0]
        level = 100.0 * p.last / p.first
        val = f"; validation loss {evals[0]:.4g} -> {evals[-1]:.4g}" if len(evals) >= 2 else ""
        rising = _rising(p)  # the advice only (the finding stands either way)
        what = (
            "it is rising: the training diverges" if rising else "the model is not fitting the training data"
        )
        return self.finding(
            trial, at,
            f"{name}: after {p.n} saved training steps the loss is still {level:.0f}% of where it started "
            f"({p.first:.4g} -> {p.last:.4g}; it shed at most {max(0.0, 100 * p.drop_high):.2g}% at the "
            f"1e-3-per-run bar, where {100 - self.threshold_percent:g}% is progress) with no downward trend "
            f"(Mann-Kendall z = {p.trend_z:.1f} over its later half){val}: {what}",
            tensors=[f[0] for f in found],
            suggestion=self.diverging_suggestion if rising else self.suggestion,
        )  # fmt: skip
