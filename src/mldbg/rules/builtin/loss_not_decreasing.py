"""loss_not_decreasing: the loss does not fall, or rises."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import NEVER, loss_prefix
from mldbg.rules.losses import (
    _TREND_Z,
    GAME_STEPS,
    LossTracker,
    Progress,
    came_back,
    judged_at,
    judgement,
    opposed,
    phase_progress,
    progress,
    refutes_stall,
    rescued,
    restarts,
    schedule_phases,
    streak,
    streaks_at,
    warming_up,
)
from mldbg.rules.select import adversarial, progress_chases_targets
from mldbg.rules.view import TrialView

_MATERIAL = 10.0  # % the loss must shed to count as progress, whatever diff_percent says


_FLAT_ADVICE = (
    "Check that the optimizer steps and holds the model's parameters (a head attached after the "
    "optimizer was built is not in it), raise the learning rate (it may be orders of magnitude too "
    "small), check that the labels match the inputs, and look for dead_relu, vanishing_gradient, "
    "unchanged_tensor or weight_update_ratio findings."
)
_STUCK_ADVICE = (
    "The model or its data stopped changing: check that optimizer.step() still runs (a scaler "
    "that skips every step after an overflow, an optimizer whose state went NaN, a learning "
    "rate scheduled to 0), that the parameters change, and that the loader still yields new "
    "batches (a cached batch, an exhausted iterator re-yielding its last batch)."
)
_ZERO_ADVICE = (
    "The loss has nothing left to learn from: check the label masking (labels set to -100 or "
    "ignore_index for every token of a batch: a response template that no longer matches, a "
    "collator that masks everything), a masked mean over no element (clamp(min=1) turns 0/0 into "
    "0), and a filter that empties the batches."
)


_RISING_ADVICE = (
    "The loss ended above where it started: lower the learning rate or decay it with a schedule, "
    "clip gradients, and check for gradients that accumulate (a missing optimizer.zero_grad()) and "
    "for bad batches."
)


@register
class LossNotDecreasing(Rule):
    """The loss has made no progress, or rose after it had fallen: a calibrated test of the
    whole series, judged at geometrically spaced lengths (`num_steps` x 5, 6, 8, 10, 13, ...
    saved values: `mldbg.rules.losses.checkpoints`) from 1,000 saved values on (a stable
    baseline: the noise model's full history; the long flat start of a long run in its
    warm-up is not a stall; a loss without any noise, from the first judgement), and at the end of a finished run whatever its length. Each judgement spends its share of a false-alarm budget of 1e-3 per run
    (`mldbg.rules.detect`), against a noise model of the run itself (robust scale,
    autocorrelation, and the spread of block medians: a sawtooth or an oscillation that comes
    and goes is not progress lost). The series is cut into 10 blocks (`progress`):
    - *not decreasing*: the loss shed less than max(`diff_percent`, 10) % between the first
      block and the last, confidently (the upper confidence bound of the drop is below it),
      and it is not falling now (Mann-Kendall z > -2 over 10 blocks of its later half). A live
      judgement (mid-run: a stop acts on it) also needs the pace now shown below that share
      (`Progress.pace_high`: the upper bound of the fall from the third quarter to the last,
      x4): a batch-1 loop's per-sample loss too noisy to show its slow fall is not stalled; the
      end-of-run judgement reports what the run did. Nor is a loss that fell from its
      second block to its last beyond the noise at the judgement's bar, or along its
      least-squares trend over that stretch (`Progress.late_fall_z`): a slow but real decline past a first quick fit (a masked
      LM's pre-training near the unigram entropy, 2% in 200 steps at 5 standard errors) is
      decreasing, while a stall (a learning rate of 0 or 1e-10, a frozen model, a dead
      optimizer, labels shuffled once their prior is fitted) shows none. A slow but steady
      fall is learning; a loss that fell and then levelled off has learned (see
      `overtraining` for stopping early); a loss too noisy to tell is not reported. A
      finished run checked offline (`mldbg check`) is judged by what it did: a stall seen
      mid-run is reported, at the step it was first seen, unless the run refutes it
      (`mldbg.rules.losses.refutes_stall`: a later judgement, at a checkpoint after it or at
      the end, finds the loss shed more than that share, or fell past its first tenth beyond
      the bar): a plateau at init that the run leaves (a saddle, a triplet loss at its
      margin, grokking) is no stall, nor is a slow fall a later shift of the logged level
      hides. Live, it is reported at once (a stop acts on it). A series in phases begun by new schedules of the learning
      rate (`mldbg.rules.losses.phase_progress`: a fine-tune after a pretraining on another
      objective, ending above where the pretraining began) must be stalled in its last phase
      too, judged on its own.
    - *rising*: the last block's median is more than `increase_threshold_percent` % above
      the lowest earlier block's since the series last started over, and beyond the noise (the
      selection of the lowest allowed for). A series starts over where it came back to its
      starting level and then fell again (`mldbg.rules.losses.restarts`: the folds of a k-fold
      cross-validation, self-training's students, iterative DPO's rounds), or where the
      recorded learning rate began a new schedule (`mldbg.rules.losses.schedule_phases`: the
      next stage of a pipeline on another objective, a retraining after a search): a later
      fold or stage that ends above an earlier one's best is no rise. A finished run checked offline reports a
      rise seen mid-run only if the loss never came back to that lowest block's level
      (`mldbg.rules.losses.came_back`) and did not start over between the two: a rise the run
      came back from by itself is a transient (one a rollback brought back is not:
      `losses.rescued`); live, it is reported at once.
    - *stuck*: the loss has been exactly one value for longer than the run's own rate of
      exact repeats allows at the n-th value's share of the budget (`mldbg.rules.losses.streak`:
      a float loss under batch noise almost never repeats; a quantized log repeats at a rate
      of its own). The model or its data stopped changing. A loss of exactly 0 is a fit. A
      finished run checked offline reports the last such streak only if it lasted to the
      run's end: one that ended, the loss moving on, stopped what was logged, not the
      training (a scraped gauge repeating its last value through a checkpoint's stall);
      live, it is reported at once. A streak of exactly 0 is reported at once either way.
    `mode` picks TRAIN or EVAL series (default: the training loss; a loss saved only in EVAL,
    such as a validation metric, is judged per evaluation). Tensors of the `losses`
    collection (and scalars named like "loss") are read, plus `tensor_regex`. `patience`
    windows of `num_steps` values make the first judgement. A GAN (`mldbg.rules.select.adversarial`:
    two models trained, every batch of targets one class; or two loss series that move
    against each other, `mldbg.rules.losses.opposed`) plays a game whose loss is not meant
    to fall: it is not judged. Nor is a flat training loss while the recorded learning rate
    still rises (`mldbg.rules.losses.warming_up`: a warm-up moves the loss little at first).
    Nor is a loss without a floor at 0 (`mldbg.rules.losses.floorless`: its middle 90%, or
    its start and tenths, take both signs; or its level is never above 0; or it starts at
    exactly 0): a contrastive or adversarial objective (an EBM's energy gap, a WGAN critic)
    hovers near 0 or crosses it, a negative objective (minus an entropy bonus) has its floor
    somewhere below, a penalty weighted 0 at first has nothing to shed; a share of its level
    means nothing.
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
        # (name, mode, "flat" or "rise") -> a finding left to a finished run's end: (it, the
        # level the loss rose from, the index of the value judged, the block length, the index
        # of the block it rose from)
        self._held: dict[tuple[str, str, str], tuple[Finding, float, int, int, int]] = {}

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading training `steps` at which no judgement may report: their losses join
        the series from the columns; `check` judges the steps that may."""
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
        """The fast path's screen (`loss_prefix`): `_verdicts`, the decision `check` takes,
        at each series length of `lengths` (True where it reports)."""
        out = np.zeros(len(lengths), dtype=bool)
        for i in np.flatnonzero(judged_at(self.num_steps, self.patience, lengths)).tolist():
            out[i] = bool(self._verdicts(name, "TRAIN", values, int(lengths[i]), final=False))
        if (name, "TRAIN", "stuck") not in self._fired:
            out |= streaks_at(values, lengths)
        return out

    def _stuck(self, name: str, mode: str, values: Sequence[float] | np.ndarray, n: int) -> list:
        """("stuck", the streak) when the first `n` of `values` end in a streak of exactly
        equal values too long for the run's own rate of repeats (`mldbg.rules.losses.streak`),
        judged where a window of `num_steps` closes (as the fast path screens them)."""
        w = max(2, self.num_steps)
        if (name, mode, "stuck") in self._fired or n % w or n < max(2, self.patience) * w:
            return []
        found = streak(values, n)
        return [] if found is None else [("stuck", found)]

    def _verdicts(
        self, name: str, mode: str, values: Sequence[float] | np.ndarray, n: int, final: bool, since: int = 0
    ) -> list[tuple[str, Any]]:
        """The decision: ("flat" | "rise", the progress; or "stuck", the `Streak`) for each condition the first `n` of
        `values` meet (judged only at `checkpoints`, or at the end with `final`), not yet
        reported; a rise from the lowest level since the value `since` (a new phase's first).
        The GAN screens are left to the caller (they read the trial)."""
        stuck = self._stuck(name, mode, values, n) if mode == "TRAIN" else []
        k = judgement(self.num_steps, self.patience, values, n, final)
        if k is None:
            return stuck
        p = progress(values[:n], k, since=since)
        if p is None:
            return stuck
        out: list[tuple[str, Any]] = stuck
        if (name, mode, "flat") not in self._fired and self._flat(p, final):
            out.append(("flat", p))
        if (
            (name, mode, "rise") not in self._fired
            and p.rise > self.increase_threshold_percent / 100
            and p.rise_best_z > p.z
        ):
            out.append(("rise", p))
        return out

    def _flat(self, p: Progress, final: bool) -> bool:
        """Whether the progress `p` shows no decrease (live, unless `final`: none now either)."""
        material = max(self.diff_percent, _MATERIAL) / 100
        return (
            p.drop_high < material
            and p.trend_z > _TREND_Z
            and p.late_fall_z < p.z  # a significant fall past the first tenth: it decreases
            and (final or p.pace_high < material)  # live: not falling now must be shown
        )

    def check(self, trial: TrialView, step: int) -> list[Finding]:
        mode, names, closed = self._tracker.update(trial, step)
        out: list[Finding] = []
        wanted = Mode.parse(self.mode) if self.mode else None
        if mode == Mode.TRAIN and wanted in (None, Mode.TRAIN):
            for name in names:
                s = self._tracker.train.get(name)
                if s and s.steps and s.steps[-1] == step:
                    out += self._judge(trial, step, name, "TRAIN", s.steps, s.values, final=False)
        for name, ev in closed:
            out += self._eval(trial, step, name, ev.last_step, ev.value)
        return out

    def _eval(self, trial: TrialView, step: int, name: str, last_step: int, value: float) -> list[Finding]:
        wanted = Mode.parse(self.mode) if self.mode else None
        if not (wanted == Mode.EVAL or (wanted is None and name not in self._tracker.train)):
            return []
        series = self._series.setdefault((name, "EVAL"), [])
        series.append((last_step, value))
        return self._judge(
            trial, step, name, "EVAL", [s for s, _ in series], [v for _, v in series], final=False
        )

    def finish(self, trial: TrialView) -> list[Finding]:
        out: list[Finding] = []
        for name, ev in self._tracker.close_all():
            out += self._eval(trial, ev.last_step, name, ev.last_step, ev.value)
        material = max(self.diff_percent, _MATERIAL) / 100
        for (name, mode, kind), (held, level, at, block, best_at) in self._held.items():  # left to the end
            s = self._tracker.train.get(name) if mode == "TRAIN" else None
            values = s.values if s is not None else [v for _, v in self._series.get((name, mode), [])]
            if kind == "stuck":  # the streak from `at` ended: a later value differs from it
                later = np.asarray(values[at:], dtype=np.float64)
                refuted = bool(np.any(np.isfinite(later) & (later != level)))
            elif kind == "flat":
                refuted = refutes_stall(values, max(2, self.num_steps), self.patience, material, since=at + 1)
            else:  # a rise the loss came back from by itself (not through a rollback), or a
                # restart between the level it rose from and the rise (a new fold or round)
                steps = s.steps if s is not None else [t for t, _ in self._series.get((name, mode), [])]
                refuted = (came_back(values, at, level, block) and not rescued(trial)) or any(
                    best_at < r <= at for r in [*restarts(values), *schedule_phases(trial, steps)]
                )
            if not refuted and self.first((name, mode, kind)):
                out.append(held)
        self._held = {}
        wanted = Mode.parse(self.mode) if self.mode else None
        if wanted in (None, Mode.TRAIN):
            for name, s in self._tracker.train.items():
                if s.steps:
                    out += self._judge(trial, s.steps[-1], name, "TRAIN", s.steps, s.values, final=True)
        for (name, mode), series in self._series.items():
            if series:
                out += self._judge(
                    trial,
                    series[-1][0],
                    name,
                    mode,
                    [s for s, _ in series],
                    [v for _, v in series],
                    final=True,
                )
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

    def _game(
        self, trial: TrialView, name: str, mode: str, steps: Sequence[int], values: Sequence[float]
    ) -> bool:
        """A GAN's loss: two models trained on one-class targets, or another training loss
        that moves against this one; or any loss without a floor (`floorless`: of both signs,
        as a contrastive energy gap)."""
        from mldbg.rules.losses import floorless  # here: the import list above is busy elsewhere

        if floorless(values):
            return True
        if mode != "TRAIN":
            return False
        # the labels and gradients that tell a GAN are saved at statistics steps (every 100th
        # of the two-line hook's, after 20): read them over the last GAME_STEPS saved steps
        w = max(max(2, self.patience) * max(2, self.num_steps), GAME_STEPS)
        if adversarial(trial, steps[-w:]):
            return True
        return any(other != name and opposed(values, s.values) for other, s in self._tracker.train.items())

    def _judge(
        self,
        trial: TrialView,
        step: int,
        name: str,
        mode: str,
        steps: Sequence[int],
        values: Sequence[float],
        final: bool,
    ) -> list[Finding]:
        found = self._verdicts(name, mode, values, len(values), final)
        phases = schedule_phases(trial, steps) if any(k == "rise" for k, _ in found) else []
        if phases:  # a rise is sought since the phase now began (never a new one: its best is no lower)
            found = self._verdicts(name, mode, values, len(values), final, since=phases[-1])
        if any(k == "flat" for k, _ in found):
            phased, now = phase_progress(trial, steps, values, self.num_steps, self.patience)
            if phased and (now is None or not self._flat(now, final)):
                found = [(k, p) for k, p in found if k != "flat"]  # the phase now falls (or just began)
        if not found or self._game(trial, name, mode, steps, values):
            return []
        if mode == "TRAIN":
            found = [
                (k, p) for k, p in found
                if k == "stuck" or not progress_chases_targets(trial, name, steps, p, rise=k == "rise")
            ]  # fmt: skip
        what = f"{name} ({mode})"
        out: list[Finding] = []
        warm = warming_up(trial, step) if mode == "TRAIN" and any(k == "flat" for k, _ in found) else None
        for kind, p in found:
            if kind == "flat" and warm:
                continue  # a flat loss while the learning rate warms up is the warm-up's
            # a finished run checked offline is judged by what it did: a stall the run's own
            # end refutes (a plateau at the start, then the fall), or a rise it came back from
            # (a transient), is no finding; `finish` reports the first of each the run showed
            # (`_held`) unless the whole series refutes it (`refutes_stall`, `came_back`)
            # a streak of a value other than 0 is held too, the latest streak seen: one that
            # ended (the loss moved on) stopped only what was logged, not the training
            stuck = kind == "stuck" and p.value != 0
            hold = (kind in ("flat", "rise") or stuck) and not final and trial.finished
            if (hold and not stuck and (name, mode, kind) in self._held) or (
                not hold and not self.first((name, mode, kind))
            ):
                continue
            if kind == "stuck" and p.value == 0:
                out.append(self.finding(
                    trial, step,
                    f"{what} has been exactly 0 for {p.repeats + 1} saved values, since step {steps[p.start]}, "
                    f"where it dropped from {p.before:.4g}: no fit comes down to 0 at once; a "
                    f"loss with nothing left to learn from does (chance below {p.chance:.2g} at this run's rate of "
                    f"repeats; the bar: {p.bar:.2g}, 1e-3 false alarms per run)",
                    tensors=[name],
                    suggestion=_ZERO_ADVICE,
                ))  # fmt: skip
                continue
            if kind == "stuck":
                held = self.finding(
                    trial, step,
                    f"{what} has been exactly {p.value:.9g} for {p.repeats + 1} saved values, since step "
                    f"{steps[p.start]}: a float loss under batch noise almost never repeats, and this run "
                    f"repeated at its own rate a streak this long with chance below {p.chance:.2g} "
                    f"(the bar: {p.bar:.2g}, 1e-3 false alarms per run)",
                    tensors=[name],
                    suggestion=_STUCK_ADVICE,
                )  # fmt: skip
                seen = self._held.get((name, mode, kind))
                if hold and (seen is None or seen[2] != p.start):  # a new streak (else: the one seen first)
                    self._held[(name, mode, kind)] = (held, p.value, p.start, 0, 0)
                elif not hold:
                    out.append(held)
                continue
            n, m = p.n, p.block
            if kind == "flat":
                flat = self.finding(
                    trial, step,
                    f"{what} has not decreased over {n} saved values: median {p.first:.4g} at steps "
                    f"{steps[0]}-{steps[m - 1]}, {p.last:.4g} at steps {steps[n - m]}-{steps[n - 1]} "
                    f"({-100 * p.drop:+.2g}%; at most {100 * p.drop_high:.2g}% at the 1e-3-per-run bar, "
                    f"a drop must exceed {max(self.diff_percent, _MATERIAL):g}%; trend z = {p.trend_z:.1f})",
                    tensors=[name],
                    suggestion=_RISING_ADVICE if p.last > p.first else _FLAT_ADVICE,
                )  # fmt: skip
                if hold:
                    self._held[(name, mode, kind)] = (flat, math.nan, n - 1, m, 0)
                else:
                    out.append(flat)
            else:
                b = p.best_at
                rise = self.finding(
                    trial, step,
                    f"{what} rose by {100 * p.rise:.0f}%: median {p.best:.4g} at steps {steps[b]}-{steps[b + m - 1]}, "
                    f"{p.last:.4g} at steps {steps[n - m]}-{steps[n - 1]} (more than {self.increase_threshold_percent:g}%, "
                    f"z = {p.rise_best_z:.1f} after allowing for the lowest of the blocks, beyond the bar {p.z:.1f})",
                    tensors=[name],
                    suggestion=(
                        "Lower the learning rate or decay it with a schedule, clip gradients, and check "
                        "for bad batches (NaN, wrong labels) around the step where it started to rise."
                    ),
                )  # fmt: skip
                if hold:
                    self._held[(name, mode, kind)] = (rise, p.best, n - 1, m, p.best_at)
                else:
                    out.append(rise)
        return out
