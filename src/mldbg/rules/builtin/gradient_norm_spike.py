"""gradient_norm_spike: the global or a layer's gradient norm jumps far above its recent level."""

from __future__ import annotations

import math

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix
from mldbg.rules.select import short_list
from mldbg.rules.stats import median, trailing_median, trailing_nonfinite
from mldbg.rules.view import TrialView

GLOBAL = "global gradient norm"
_TOL = 1e-9  # relative: the screening of the fast path errs towards asking check()
LEVEL = 5  # saved values whose median is the recent level
_MIN_SCALE = 1e-3  # the Laplace scale of log residuals, at least (a flat series: 0.1% noise)


def _logs(values: list[float]) -> list[float]:
    return [math.log(v) for v in values if math.isfinite(v) and v > 0]


@register
class GradientNormSpike(Rule):
    """The global gradient norm (over every gradient saved at the step) or a weight's gradient
    norm jumps far above its recent level, further than the run's own history of jumps makes
    plausible: a calibrated test on the logarithm of the norm, with a false-alarm budget per
    run.

    The test. A gradient norm is a positive, multiplicative quantity whose batch-to-batch
    noise is heavy-tailed: a healthy classifier near convergence gets most of its gradient
    from the few samples it still gets wrong, so a batch holding one such sample has 20-60x
    the norm of a batch without (seen on small healthy CNNs). So each series is judged on
    log(norm): its residual r = log(norm) - the median of log(norm) over the previous 5 saved
    steps (the recent level: a steady rise or fall is not counted as noise), against the
    residuals of its last `window` saved steps, modelled as Laplace (double-exponential, the
    log of a power-law tail): centre m = their median, scale b = their mean absolute
    deviation from m (its maximum-likelihood estimate; the run's own past jumps widen it).
    The n-th judged value of a series fires when z = (r - m) / b exceeds the bound whose
    chance under the Laplace null is `budget` / (n (n + 1) k), k the number of series judged,
    which sums over every step of every series of a run of any length to at most `budget`
    (alpha spending), and never below `threshold`. The scale b is estimated from the q
    residuals at hand, so the chance is the predictive tail, (1 + z / q)^-q / 2, not the
    known-scale exp(-z) / 2: a series that starts over (the hook's spacing changes at step 20)
    judges its first values against a scale from 5-10 residuals, which for a classifier whose
    batches with a hard sample have 20-60x the norm may hold none of them; its bound is then
    2-3x the known-scale one (replayed: 3 of 25 such healthy 10^6-step runs alarmed there
    with the known-scale bound, `benchmarks/gradient_norm_rates.py`).
    It must also be an effect worth a finding: more than `min_ratio` times the recent level
    and `min_jump` times the previous saved value (a norm rising steadily through a sparse
    cadence is not a spike). A corrupted batch (inputs x30) gives z = 15-40 against a bound of
    9-13 in the first 50 steps; healthy CNNs, regressions and MLPs stay below 0.65 of it.

    Norms are compared only with norms saved at the same spacing of training steps: a
    one-batch jump and a drift over 100 steps are different quantities, so where the spacing
    changes (the two-line hook's every step for the first 20 steps, then every 100th) a series
    starts over, its level and jumps measured again at the new spacing (the spending of the
    budget goes on).

    A gradient spike is what a loss spike does to the weights: one bad batch, a learning
    rate too high for the curvature, an attention or output logit that blew up. The step
    after it carries an update `min_ratio` times too large, which may throw the model off
    for good. Reads the `l2` statistic of the gradients (saved by the two-line hook, or from
    raw gradients); a series is judged after `warmup` saved steps (a layer's gradient
    norm swings 3-4x in the first steps of healthy training), and biases are not judged.
    """

    needs = ("gradients",)
    reads = {"gradients": ("l2",)}
    window: int = 50
    threshold: float = 8.0
    min_ratio: float = 10.0
    min_jump: float = 2.0
    warmup: int = 10
    budget: float = 1e-3
    tensor_regex: list[str] | None = None
    suggestion = (
        "Replay the batch of that step (corrupted or extreme samples, wrong labels), clip gradients "
        "(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)), lower the learning rate or "
        "add a warmup, and look for logit_growth or loss_spike findings around it."
    )

    def reset(self) -> None:
        super().reset()
        self._series: dict[str, list[float]] = {}  # the last LEVEL values of each series
        self._resid: dict[str, list[float]] = {}  # the last `window` log residuals of each
        self._count: dict[str, int] = {}  # values seen of each series
        self._last: dict[str, int] = {}  # the training step of each series' last value
        self._gap: dict[str, int] = {}  # the spacing (training steps) of its values since it started over

    def _judged(self, name: str) -> bool:
        return name == GLOBAL or "bias" not in name.lower()

    def _spike(self, name: str, value: float) -> tuple[float, float] | None:
        """(level, z) when `value`, the next saved norm of series `name`, is a spike; else
        None. The one decision of both paths (`check_columns` only screens for it)."""
        count = self._count.get(name, 0)
        if count < max(1, self.warmup) or not self._judged(name) or not (math.isfinite(value) and value > 0):
            return None
        prev = self._series.get(name, [])
        logs = _logs(prev[-LEVEL:])
        hist = [r for r in self._resid.get(name, [])[-self.window :] if math.isfinite(r)]
        if not logs or len(hist) < 5 or not prev or not math.isfinite(prev[-1]):
            return None
        level = math.exp(median(logs))
        if not (value > self.min_ratio * level and value > self.min_jump * abs(prev[-1])):
            return None
        m = median(hist)
        b = max(sum(abs(r - m) for r in hist) / len(hist), _MIN_SCALE)
        z = (math.log(value / level) - m) / b
        return (level, z) if z > self.bound(count - max(1, self.warmup) + 1, len(hist)) else None

    def bound(self, n: int, m: int | None = None) -> float:
        """The z the n-th judged value of a series must exceed: the Laplace tail that spends
        `budget` / (n (n + 1) k) on it, k the series judged so far, ln(n (n + 1) k / (2
        `budget`)) when the scale is known. Estimated from `m` residuals (None: known), the
        tail of z is the predictive one, (1 + z / m)^-m / 2 (the mean absolute deviation of m
        Laplace values is a Gamma(m) multiple of the scale): a scale from few values may be
        far too small, and the bound is m ((2 alpha)^(-1/m) - 1), 2-3x the known-scale one
        at m = 5-10, 7-30% above it at m = 50 (n = 1 to 10^4)."""
        k = max(1, sum(1 for name in self._count if self._judged(name)))
        log_odds = math.log(n * (n + 1) * k / (2 * self.budget))  # -ln(2 alpha)
        z = log_odds if m is None or m <= 0 else m * math.expm1(log_odds / m)
        return max(self.threshold, z)

    def _space(self, name: str, mode_step: int) -> None:
        """Note that series `name`'s next value is at training step `mode_step`; where the
        spacing of its values changes, the series starts over (its count goes on)."""
        last = self._last.get(name)
        if last is not None:
            gap = mode_step - last
            if self._gap.get(name, gap) != gap:
                self._series[name] = []
                self._resid[name] = []
            self._gap[name] = gap
        self._last[name] = mode_step

    def _push(self, name: str, value: float) -> None:
        """Append a saved norm to its series (and its log residual to the history)."""
        prev = self._series.setdefault(name, [])
        logs = _logs(prev[-LEVEL:])
        if logs and math.isfinite(value) and value > 0:
            resid = self._resid.setdefault(name, [])
            resid.append(math.log(value) - median(logs))
            del resid[: -self.window]
        prev.append(value)
        del prev[:-LEVEL]
        self._count[name] = self._count.get(name, 0) + 1

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): the leading `steps` at which no norm can
        spike, their norms appended to the series. A norm can spike only where it is more
        than `min_ratio` times the median of its last 5 saved values and `min_jump` times the
        previous one (a necessary condition of `_spike`, screened over all steps at once);
        those steps, steps with a norm NaN in the columns (not saved there, saved NaN, or to
        compute from a raw gradient), and windows holding a non-finite or zero norm are left
        to `check`, which judges them with `_spike`."""
        if self.warmup < LEVEL:  # a level from fewer values than LEVEL: check() only
            return 0
        names = trial.names("gradients", regex=self.tensor_regex)
        if not names or not len(steps):
            return len(steps)
        modes, mode_steps = trial.columns.modes(steps)
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
            if len(pos) and self._judged(name):
                new = total[pos] if name == GLOBAL else vals[t, pos]
                hit = self._candidates(name, new)
                if len(hit):
                    cut = min(cut, int(pos[hit[0]]))
        for t, name in enumerate(names):
            at = have[t, :cut]
            if at.any():
                self._extend(name, vals[t, :cut][at].tolist(), mode_steps[:cut][at].tolist())
        rows = np.flatnonzero(whole[:cut])
        if len(rows):
            tail = rows[-(self.window + LEVEL) :]
            exact = [math.sqrt(sum(v * v for v in vals[have[:, p], p].tolist())) for p in tail.tolist()]
            self._extend(GLOBAL, exact, mode_steps[rows].tolist(), skipped=len(rows) - len(tail))
        return cut

    def _candidates(self, name: str, new: np.ndarray) -> np.ndarray:
        """Indices of `new` (values appended after the series as kept) where `_spike` may
        hold: judged, and either a level window holds a non-finite or zero value or the value
        is above both `min_ratio` x the median of the last 5 and `min_jump` x the previous one."""
        prior = self._series.get(name, [])
        p = len(prior)
        x = np.concatenate([np.asarray(prior, dtype=np.float64), new])
        count = self._count.get(name, 0) + np.arange(len(new))
        judged = (count >= max(1, self.warmup)) & np.isfinite(new)
        level = trailing_median(x, LEVEL)[p:]
        previous = np.abs(x[p - 1 : -1]) if p else np.concatenate([[np.nan], np.abs(x[:-1])])
        with np.errstate(invalid="ignore"):
            bad = trailing_nonfinite(np.where(x > 0, x, np.nan), LEVEL + 1)[p:] > 0
            high = (new >= (1 - _TOL) * self.min_ratio * level) & (
                new >= (1 - _TOL) * self.min_jump * previous
            )
        return np.flatnonzero(judged & (bad | np.isnan(level) | high))

    def _extend(self, name: str, values: list[float], at: list[int], skipped: int = 0) -> None:
        """`_push` each of `values` (at training steps `at`: the steps of the `skipped`
        earlier ones, that only count, then theirs), as `check` would: only the last
        `window` + LEVEL values of a series and the spacing of the steps before them shape
        its state."""
        keep = self.window + LEVEL
        if len(values) > keep:
            skipped, values = skipped + len(values) - keep, values[-keep:]
        if skipped:  # the spacing as check() saw it before the values kept: `_space` over
            # at[:skipped] leaves the last gap and step (the series restarts below anyway)
            last = self._last.get(name)
            if skipped >= 2:
                self._gap[name] = at[skipped - 1] - at[skipped - 2]
            elif last is not None:
                self._gap[name] = at[0] - last
            self._last[name] = at[skipped - 1]
            self._count[name] = self._count.get(name, 0) + skipped
            self._series[name] = []  # the level restarts from the values kept
            self._resid[name] = []
            at = at[skipped:]
        for v, step in zip(values, at, strict=True):
            self._space(name, step)
            self._push(name, v)

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
        mode_step = trial.mode_step(step)
        for name, value in values.items():
            self._space(name, mode_step)
            found = self._spike(name, value)
            if found is not None:
                spiked.append((name, value, *found))
        for name, value in values.items():
            self._push(name, value)
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
            f"(z = {z:.1f} Laplace scales of its log-norm's own step-to-step noise, beyond the "
            f"run's false-alarm budget {self.budget:g}; more than {self.min_ratio:g}x)"
            + (f"; {len(layers)} layer(s) spiked: {short_list(layers)}" if layers else "")
            + ": replay that batch",
            tensors=layers or list(norms),
            samples=trial.batch_fingerprints(step),
        )  # fmt: skip
