"""gradient_norm_spike: the global or a layer's gradient norm jumps far above its recent level."""

from __future__ import annotations

import math

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix
from mldbg.rules.select import short_list
from mldbg.rules.stats import robust_z, trailing_median, trailing_nonfinite
from mldbg.rules.view import TrialView

GLOBAL = "global gradient norm"
_TOL = 1e-9  # relative: the screening of the fast path errs towards asking check()


@register
class GradientNormSpike(Rule):
    """The global gradient norm (over every gradient saved at the step) or a weight's gradient
    norm lies far above its recent level: more than `threshold` robust standard deviations
    of its step-to-step noise over the last `window` saved training steps above the recent
    level (the median of the last 5), more than `min_ratio` times that level, and more than
    `min_jump` times the previous saved value: under the two-line hook's sparse cadence the
    last 5 saved steps may span a hundred steps, and a norm that rises steadily (a layer's
    gradient grows 7x over 80 steps of healthy sigmoid training) is not a spike, and a healthy
    CNN without BatchNorm has transients of 8.5x its level (a 3-step ramp, seen at once).

    A gradient spike is what a loss spike does to the weights: one bad batch, a learning
    rate too high for the curvature, an attention or output logit that blew up. The step
    after it carries an update `min_ratio` times too large, which may throw the model off
    for good. Reads the `l2` statistic of the gradients (saved by the two-line hook, or from
    raw gradients); a series is judged after `warmup` saved steps (a layer's gradient
    norm swings 3-4x in the first steps of healthy training).
    """

    needs = ("gradients",)
    reads = {"gradients": ("l2",)}
    window: int = 20
    threshold: float = 10.0
    min_ratio: float = 10.0
    min_jump: float = 2.0
    warmup: int = 10
    tensor_regex: list[str] | None = None
    suggestion = (
        "Replay the batch of that step (corrupted or extreme samples, wrong labels), clip gradients "
        "(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)), lower the learning rate or "
        "add a warmup, and look for logit_growth or loss_spike findings around it."
    )

    def reset(self) -> None:
        super().reset()
        self._series: dict[str, list[float]] = {}

    def _spike(self, name: str, value: float, series: list[float]) -> tuple[float, float] | None:
        """(level, z) when `value`, after the saved `series` of `name`, is a spike; else None."""
        judge = len(series) >= max(1, self.warmup) and math.isfinite(value)
        if not judge or (name != GLOBAL and "bias" in name.lower()):
            return None
        z, level, _ = robust_z(value, series[-self.window :], floor=0.01 * abs(series[-1]))
        jumped = value > self.min_ratio * level and value > self.min_jump * abs(series[-1])
        return (level, z) if z > self.threshold and jumped and level > 0 else None

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): the leading `steps` at which no norm can
        spike, their norms appended to the series. A norm can spike only where it is more
        than `min_ratio` times the median of its last 5 saved values and `min_jump` times the
        previous one (screened over all steps at once); those steps, steps with a norm NaN in
        the columns (not saved there, saved NaN, or to compute from a raw gradient), and
        windows holding a non-finite norm are left to `check`."""
        if self.window < 5 or self.warmup < 5:  # windows shorter than the level's: check() only
            return 0
        names = trial.names("gradients", regex=self.tensor_regex)
        if not names or not len(steps):
            return len(steps)
        modes, _ = trial.columns.modes(steps)
        overs = [Over(trial, n, steps) for n in names]
        have = np.array([o.present for o in overs]) & (modes == int(Mode.TRAIN))
        vals = np.array([o.stat("l2") for o in overs])
        k = quiet_prefix((have & np.isnan(vals)).any(axis=0))
        have, vals = have[:, :k], vals[:, :k]
        squares = np.where(have, vals, 0.0)
        total = np.sqrt((squares * squares).sum(axis=0))  # screening only; the series gets check()'s sums
        whole = have.any(axis=0) & np.where(have, np.isfinite(vals), True).all(axis=0)
        cut = k
        for t, name in enumerate([*names, GLOBAL]):
            pos = np.flatnonzero(whole if name == GLOBAL else have[t])
            if len(pos) and (name == GLOBAL or "bias" not in name.lower()):
                new = total[pos] if name == GLOBAL else vals[t, pos]
                hit = self._candidates(self._series.get(name, []), new)
                if len(hit):
                    cut = min(cut, int(pos[hit[0]]))
        for t, name in enumerate(names):
            add = vals[t, :cut][have[t, :cut]]
            if len(add):
                self._extend(name, add.tolist())
        rows = np.flatnonzero(whole[:cut])[-self.window - 1 :]
        if len(rows):
            exact = [math.sqrt(sum(v * v for v in vals[have[:, p], p].tolist())) for p in rows.tolist()]
            self._extend(GLOBAL, exact)
        return cut

    def _candidates(self, prior: list[float], new: np.ndarray) -> np.ndarray:
        """Indices of `new` (values appended after `prior`, the series as kept) where `_spike`
        may hold: judged, and either a window holds a non-finite value or the value is above
        both `min_ratio` x the median of the last 5 and `min_jump` x the previous one."""
        p = len(prior)
        x = np.concatenate([np.asarray(prior, dtype=np.float64), new])
        before = np.minimum(p + np.arange(len(new)), self.window + 1)
        judged = (before >= max(1, self.warmup)) & np.isfinite(new)
        level = trailing_median(x, 5)[p:]
        previous = np.abs(x[p - 1 : -1]) if p else np.concatenate([[np.nan], np.abs(x[:-1])])
        bad = trailing_nonfinite(x, self.window + 1)[p:] > 0
        with np.errstate(invalid="ignore"):
            high = (new >= (1 - _TOL) * self.min_ratio * level) & (
                new >= (1 - _TOL) * self.min_jump * previous
            )
        return np.flatnonzero(judged & (bad | np.isnan(level) | high))

    def _extend(self, name: str, values: list[float]) -> None:
        series = self._series.setdefault(name, [])
        series.extend(values)
        del series[: -self.window - 1]

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        names = trial.names("gradients", regex=self.tensor_regex, step=step)
        norms = {n: v for n in names if isinstance(v := trial.statistic(n, step, "l2"), float)}
        if not norms:
            return None
        values = dict(norms)
        if all(math.isfinite(v) for v in norms.values()):
            values[GLOBAL] = math.sqrt(sum(v * v for v in norms.values()))
        spiked: list[tuple[str, float, float, float]] = []
        for name, value in values.items():
            series = self._series.setdefault(name, [])
            found = self._spike(name, value, series)
            if found is not None:
                spiked.append((name, value, *found))
            series.append(value)
            del series[: -self.window - 1]
        spiked = [s for s in spiked if self.first((s[0], step))]  # (name, value, level, z)
        if not spiked:
            return None
        spiked.sort(key=lambda s: (s[0] != GLOBAL, -s[1] / s[2]))
        name, value, level, z = spiked[0]
        where = f"step {step} (mode step {trial.mode_step(step)})"
        layers = [s[0] for s in spiked if s[0] != GLOBAL]
        return self.finding(
            trial, step,
            f"{name} jumped to {value:.4g} at {where}, {value / level:.1f}x its recent level {level:.4g} "
            f"(robust z = {z:.1f}, more than {self.threshold:g}; more than {self.min_ratio:g}x)"
            + (f"; {len(layers)} layer(s) spiked: {short_list(layers)}" if layers else "")
            + ": replay that batch",
            tensors=layers or list(norms),
            samples=trial.batch_fingerprints(step),
        )  # fmt: skip
