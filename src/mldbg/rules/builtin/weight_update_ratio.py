"""weight_update_ratio: updates far too small or too large for the weights."""

from __future__ import annotations

import bisect
import math

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix
from mldbg.rules.select import gradient_names, short_list
from mldbg.rules.updates import (
    blows,
    gate_opening,
    held,
    held_at,
    rounds_away,
    weight_shape,
)
from mldbg.rules.view import TrialView


@register
class WeightUpdateRatio(Rule):
    """|update| / |weight| (L2 norms) between consecutive saved training steps is below
    `small_threshold` or above `large_threshold`, at `patience` consecutive checks.

    A healthy update moves a weight by roughly 1e-4 to 1e-2 of its size per step. Far below,
    training crawls (the learning rate is orders of magnitude too small, or the optimizer
    holds other parameters); far above, it is unstable. `num_steps` checks every n-th saved
    step only. Weights that get no gradient (frozen on purpose, `requires_grad=False`) are
    skipped (no gradient at the saved step before, whose update the ratio measures: an expert
    of a mixture that got no token there too), and weights near 0 (|w| < `epsilon` per
    element) have no meaningful ratio. Reads
    raw weights, else the `delta_l2` (|update|) and `l2` statistics a two-line hook records
    every step (exact too); with only reductions saved, only "too large" is checked (from the
    change of the L2 norm, a lower bound of |update|). A step that changed nothing at all (no
    weight moved, and every loss of the step is the same number as at the previous saved
    training step: full-batch L-BFGS that met its tolerance, an optimizer at its minimum) is
    not a tiny update: nothing was left to update.

    Nor are the tiny updates of a run whose weights an update blew up before (a weight moved
    by at least half its size after the update, `BLOWN`, leaving it a gain above `GAIN`: a
    learning rate far too high): its
    units died and their gradients are 0, and "raise the learning rate" would be the opposite
    of the cure. The "too large" side judges that run. Nor those of a weight behind a gate
    initialized at 0 that is opening (`gate_opening`: its gradient exactly 0 at the first
    saved step, above 0 now, and within 10 saved steps or still rising): under a warm-up's
    small learning rate (ResNet's zero-init of the last BN gamma of each block) the update
    rounds to nothing next to a weight of 1 in float32 until the gradient has grown; judged
    once the rise stops.
    Nor the steps of a run that accumulates gradients (`held`: no parameter moved, within the
    run's own interval between optimizer steps): the ratio of 0 there is no update due, not a
    tiny one; the ratios are judged at the steps that apply the accumulated update.
    Nor a weight whose update is below what float32 can show next to it (`rounds_away`: the
    recorded learning rate x its gradient x 10 for momentum below 2^-25 x its RMS, while
    other weights move): the optimizer applied an update, and rounding kept it.
    """

    needs = ("weights",)
    reads = {"weights": ("delta_l2", "l2")}
    num_steps: int | None = None
    large_threshold: float = 10.0
    small_threshold: float = 1e-8
    epsilon: float = 1e-9
    patience: int = 3

    def reset(self) -> None:
        super().reset()
        self._prev: dict[str, tuple[int, np.ndarray | float]] = {}  # per weight, its last (step, value or L2)
        self._streak: dict[tuple[str, str], int] = {}  # (weight, "small"/"large") -> checks in a row
        self._ratios: dict[str, float] = {}  # per weight, its last ratio
        self._count = 0  # training steps seen (for `num_steps`)
        self._blown: tuple[int, str, float] | None = None  # (step, weight, ratio) of the first blow-up

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading training `steps` where no weight's ratio streak reaches `patience`, from
        the saved `delta_l2` and `l2` (a raw weight, or an L2 that may be a saved NaN, ends
        them); `_prev`, the streaks and the ratios are brought up to date as in `check`.
        Declines with `num_steps` (it counts checks)."""
        if self.num_steps:
            return 0
        names = trial.names("weights")
        if not names:
            return len(steps)
        grads = gradient_names(trial) if trial.has_collection("gradients") else {}
        any_grad = np.zeros(len(steps), dtype=bool)
        grad_at: dict[str, np.ndarray] = {}
        if grads:
            for g in trial.names("gradients"):
                grad_at[g] = Over(trial, g, steps).present
                any_grad |= grad_at[g]
        train = np.zeros(len(steps), dtype=bool)
        # steps where the run accumulates gradients (`held`): check() leaves them out
        interesting = held_at(trial, steps)
        blown = np.zeros(len(steps), dtype=bool)  # a weight blew up at that step (`BLOWN`)
        small_reach = np.zeros(len(steps), dtype=bool)  # a "small" streak reaches `patience` there
        updates = []
        for name in names:
            over = Over(trial, name, steps)
            rows = over.present & (over.mode == int(Mode.TRAIN))
            train |= rows
            l2, delta = over.stat("l2"), over.stat("delta_l2")
            cols = trial.columns.tensor(name)
            keyed = cols is not None and cols.statistic("l2") is not None
            interesting |= rows & (over.raw | (np.isnan(l2) & keyed))
            idx = np.flatnonzero(rows & ~over.raw & ~np.isnan(l2))
            if not len(idx):
                continue
            cur = l2[idx]
            prev = self._prev.get(name)
            before = np.nan
            if prev is not None and isinstance(prev[1], np.ndarray):
                interesting[idx[0]] = True  # the previous value is raw: check() compares the two
            elif prev is not None:
                before = float(prev[1])
            old = np.concatenate([[before], cur[:-1]])
            d = delta[idx]
            exact = np.isfinite(d)
            with np.errstate(all="ignore"):
                ratio = np.where(exact, d, np.abs(cur - old)) / (old + self.epsilon)
            interesting[idx[exact & (ratio == 0)]] = True  # no step at all? check() looks at the loss
            judged = np.isfinite(old) & (old >= self.epsilon) & np.isfinite(ratio)
            if prev is None:
                judged[0] = False
            if grads:  # no gradient at the record before, a step that has gradients: nothing to apply
                grad = grads.get(name)
                none = np.zeros(len(steps), dtype=bool)
                g_here = none if grad is None else grad_at.get(grad, none)
                had = ~(any_grad[idx] & ~g_here[idx])  # at each record: a gradient, or none saved at all
                before_first = prev is None or self._applied(trial, grads, name, prev[0])
                judged &= np.concatenate([[before_first], had[:-1]])
            if "bias" not in name.lower():
                shape = weight_shape(trial, name, int(steps[idx[0]]))
                blown[idx[judged & exact & blows(d, cur, shape)]] = True
            streaks = {}
            for kind, hit in (
                ("small", exact & (ratio < self.small_threshold)),
                ("large", ratio > self.large_threshold),
            ):
                j = np.flatnonzero(judged)
                h = hit[j]
                pos = np.arange(len(j))
                last_miss = np.maximum.accumulate(np.where(~h, pos, -1)) if len(j) else pos
                streak = np.where(
                    last_miss >= 0, pos - last_miss, self._streak.get((name, kind), 0) + pos + 1
                )
                if (name, kind) not in self._fired:
                    (small_reach if kind == "small" else interesting)[idx[j[streak >= self.patience]]] = True
                streaks[kind] = (j, streak)
            updates.append((name, idx, cur, ratio, streaks))
        # no tiny update is reported from the first blow-up on (check() holds them back)
        first = -1 if self._blown is not None else quiet_prefix(blown)
        interesting |= small_reach & (np.arange(len(steps)) < first)
        n = quiet_prefix(interesting)
        at = np.flatnonzero(blown[:n])
        if self._blown is None and len(at):
            self._blown = (int(steps[at[0]]), "", math.nan)  # check() names it when it reports
        self._count += int(train[:n].sum())
        for name, idx, cur, ratio, streaks in updates:
            take = np.flatnonzero(idx < n)
            if not len(take):
                continue
            last = take[-1]
            self._prev[name] = (int(steps[idx[last]]), float(cur[last]))
            for kind, (j, streak) in streaks.items():
                done = np.flatnonzero(idx[j] < n)
                if len(done):
                    self._streak[(name, kind)] = int(streak[done[-1]])
                    self._ratios[name] = float(ratio[j[done[-1]]])
        return n

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        names = trial.names("weights", step=step)
        if not names:
            return None
        self._count += 1
        if self.num_steps and (self._count - 1) % self.num_steps:
            return None
        if held(trial, step):  # accumulating gradients: no update was due, no ratio to judge
            for name in names:
                raw = trial.raw(name, step)
                if raw is not None:
                    self._prev[name] = (step, raw.astype(np.float64))
                elif isinstance(l2 := trial.statistic(name, step, "l2"), float):
                    self._prev[name] = (step, l2)
            return None
        grads = gradient_names(trial) if trial.has_collection("gradients") else {}
        small: list[str] = []
        large: list[str] = []
        still: bool | None = None  # the step changed nothing (looked up at the first update of 0)
        froms: dict[str, int] = {}  # per weight, the saved step its update is measured from
        for name in names:
            raw = trial.raw(name, step)
            delta = None if raw is not None else trial.saved_statistic(name, step, "delta_l2")
            if raw is not None:
                cur: np.ndarray | float = raw.astype(np.float64)
            elif isinstance(l2 := trial.statistic(name, step, "l2"), float):
                cur = l2
            else:
                continue
            prev = self._prev.get(name)
            self._prev[name] = (step, cur)
            if prev is None:
                continue
            froms[name] = prev[0]
            if grads and not self._applied(trial, grads, name, prev[0]):
                continue  # no gradient at the record before: frozen on purpose, an expert without tokens
            old = prev[1]
            if isinstance(delta, float) and math.isfinite(delta) and not isinstance(old, np.ndarray):
                if not math.isfinite(old) or old < self.epsilon:
                    continue
                ratio = delta / (old + self.epsilon)  # |w_t - w_t-1| / |w_t-1|, from the hook
                exact = True
            elif isinstance(cur, np.ndarray) and isinstance(old, np.ndarray) and cur.shape == old.shape:
                wnorm = float(np.linalg.norm(old))
                if wnorm < self.epsilon * math.sqrt(max(1, old.size)) or not math.isfinite(wnorm):
                    continue
                ratio = float(np.linalg.norm(cur - old)) / (wnorm + self.epsilon)
                exact = True
            else:
                o = float(np.linalg.norm(old)) if isinstance(old, np.ndarray) else float(old)
                c = float(np.linalg.norm(cur)) if isinstance(cur, np.ndarray) else float(cur)
                if not (math.isfinite(o) and math.isfinite(c)) or o < self.epsilon:
                    continue
                ratio = abs(c - o) / (o + self.epsilon)
                exact = False
            if not math.isfinite(ratio):
                continue
            if self._blown is None and exact and "bias" not in name.lower():
                now = float(np.linalg.norm(cur)) if isinstance(cur, np.ndarray) else float(cur)
                moved = ratio * (old if not isinstance(old, np.ndarray) else wnorm)  # |w_t - w_t-1|
                if blows(moved, now, weight_shape(trial, name, step)):
                    self._blown = (step, name, moved / now)
            self._ratios[name] = ratio
            if exact and ratio == 0 and still is None:
                still = self._loss_unchanged(trial, step)
            for kind, hit in (
                ("small", exact and ratio < self.small_threshold and not (ratio == 0 and still)),
                ("large", ratio > self.large_threshold),
            ):
                key = (name, kind)
                self._streak[key] = self._streak.get(key, 0) + 1 if hit else 0
                if self._streak[key] >= self.patience:
                    (small if kind == "small" else large).append(name)
        if self._blown is not None:
            small = []  # the effects of the blow-up (see the class doc), not a learning rate too small
        # a weight whose gradient is rising from (near) 0 stands still until the gradient is
        # large enough for its update to show in float32: waking, judged once the rise stops
        # or whose update is too small for float32 to show (`rounds_away`): not the optimizer's fault
        small = [
            n for n in small
            if (n, "small") in self._fired or not (
                n in grads
                and (gate_opening(trial, grads[n], step) or rounds_away(trial, n, grads[n], step, froms.get(n)))
            )
        ]  # fmt: skip
        small = [n for n in small if self.first((n, "small"))]
        large = [n for n in large if self.first((n, "large"))]
        if not small and not large:
            return None
        parts, tips = [], []
        if small:
            worst = max(small, key=lambda n: -self._ratios[n])
            parts.append(
                f"updates tiny for {len(small)} weight{'s' if len(small) > 1 else ''} ({short_list(small)}): "
                f"|update|/|weight| = {self._ratios[worst]:.2g} for {worst}, below {self.small_threshold:g}"
            )
            tips.append("raise the learning rate (it may be orders of magnitude too small) and check that "
                        "the optimizer was given the model's parameters")  # fmt: skip
        if large:
            worst = max(large, key=lambda n: self._ratios[n])
            parts.append(
                f"updates huge for {len(large)} weight{'s' if len(large) > 1 else ''} ({short_list(large)}): "
                f"|update|/|weight| = {self._ratios[worst]:.2g} for {worst}, above {self.large_threshold:g}"
            )
            tips.append("lower the learning rate, clip gradients, or use a warm-up")
        return self.finding(
            trial, step,
            "; ".join(parts) + f" for {self.patience} consecutive saved steps up to step {step}",
            tensors=small + large,
            suggestion="; ".join(tips).capitalize() + ".",
        )  # fmt: skip

    @staticmethod
    def _applied(trial: TrialView, grads: dict[str, str], name: str, step: int) -> bool:
        """Whether weight `name` had a gradient for the optimizer to apply at `step` (its
        gradient saved there), or nothing says (no gradient saved at that step at all). The
        update that a record's |update| measures applied the gradient of the record before:
        a weight frozen on purpose, or an expert of a mixture that got no token at that step,
        had none and stood still, which is not a tiny update."""
        if not trial.names("gradients", step=step):
            return True
        return name in grads and trial.tensor(grads[name]).has_step(step)

    def _loss_unchanged(self, trial: TrialView, step: int) -> bool:
        """Every loss saved at `step` is the same number as at its previous saved training
        step (and there is one): the step changed nothing, the weights included."""
        names = trial.names("losses", step=step)
        if not names:
            return False
        for name in names:
            saved = trial.tensor(name).steps()
            i = bisect.bisect_left(saved, step) - 1
            while i >= 0 and trial.mode(saved[i]) != Mode.TRAIN:
                i -= 1
            if i < 0:
                return False
            now, then = trial.statistic(name, step, "mean"), trial.statistic(name, saved[i], "mean")
            if not isinstance(now, float) or not isinstance(then, float) or now != then:
                return False
        return True
