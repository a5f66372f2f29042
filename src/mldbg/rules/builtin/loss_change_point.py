"""loss_change_point: the training loss shifts upward and stays up, before it diverges."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import numpy as np

from mldbg.rules import detect
from mldbg.rules.base import Finding, register
from mldbg.rules.loss_rule import LossSeriesRule
from mldbg.rules.losses import GAME_STEPS, came_back, floor_of, rescued, restarted_between
from mldbg.rules.select import adversarial, moving_targets
from mldbg.rules.stats import median, trailing_median, trend_z
from mldbg.rules.view import TrialView

_BLOCK = 50  # the noise model is estimated again every this many values
_HISTORY = 500  # ... from at most this many values before
_PACE = 1000  # values before an excursion whose fall sets the pace the loss would go on at
_BACK = 0.2  # the share of its height (log) an excursion gives back when it falls back by itself
_ACCEL = 5.0  # noise units (the normal's 3e-7 quantile) by which a runaway climb must accelerate
_CURVE = 64  # the most values of an excursion its acceleration is measured on


def _known(model: detect.Noise, phi: float) -> float:
    """How far the noise's scale may exceed its estimate: the one-sided ~98% bound of a scale
    estimated from the model's effective sample size (sd(sigma) / sigma = 1 / sqrt(2 n_eff)):
    its values over their long-run variance factor, the lag-1 autocorrelation's (corrected
    for its small-sample bias, -(1 + 3 rho) / n) times the slow structure's `phi`. 50 values
    of noise correlated at 0.9 hold 2-3 independent ones: their spread is not the noise's, and
    a CUSUM scaled by it fires on the next slow wander."""
    rho = min(0.99, max(0.0, model.rho) + (1 + 3 * max(0.0, model.rho)) / max(1, model.n))
    factor = (1 + rho) / (1 - rho) * max(1.0, phi)
    return 1 + 2 / math.sqrt(2 * max(1.0, model.n / factor))


def _block_trend(values: Sequence[float] | np.ndarray) -> float:
    """The Mann-Kendall z of the medians of 10 blocks of a stretch of a series (0 for fewer
    than 10 finite values)."""
    seg = np.asarray(values, dtype=np.float64)
    seg = seg[np.isfinite(seg)]
    if len(seg) < 10:
        return 0.0
    m = len(seg) // 10
    return float(trend_z(np.median(seg[len(seg) - 10 * m :].reshape(10, m), axis=1)))


def _falls(values: Sequence[float] | np.ndarray) -> bool:
    """Whether a stretch of a series falls: the Mann-Kendall z of the medians of 10 blocks
    (fewer values: the values) below -2."""
    return _block_trend(values) < -2.0


def _climbs(values: Sequence[float] | np.ndarray) -> bool:
    """Whether a stretch of a series still climbs: the Mann-Kendall z of the medians of its 10
    blocks above 2 (a transient that turned and falls back, or holds, does not)."""
    return _block_trend(values) > 2.0


def _pace(values: Sequence[float], rho: float) -> float:
    """How fast a stretch of a loss fell, at least: the least-squares slope of its log per
    value, less 2 of its standard errors (the residuals' spread, widened for lag-1
    autocorrelation `rho`), and 0 if that is not a fall (or fewer than 50 positive values)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x) & (x > 0)]
    if len(x) < 50:
        return 0.0
    t = np.arange(len(x), dtype=np.float64)
    y = np.log(x)
    tc = t - t.mean()
    b = float(tc @ (y - y.mean()) / (tc @ tc))
    resid = y - y.mean() - b * tc
    rho = min(max(rho, 0.0), 0.98)
    se = float(np.std(resid)) * math.sqrt((1 + rho) / (1 - rho) / (tc @ tc))
    return max(0.0, -b - 2 * se)


_FIRST = 8  # values of an excursion `_Chain` follows at once, first (then 4x as many, ...)
_ROWS = 8192  # excursion starts `_Chain` follows together
_CELLS = 1 << 17  # values it follows at once, at most (a few MB of temporaries), past the first _FIRST


def _sums(
    x: np.ndarray,
    at: np.ndarray,
    carry: np.ndarray,
    lv: np.ndarray,
    rho: np.ndarray,
    scale: np.ndarray,
    cap: float,
    drift: float,
    width: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For rows of values `x[at + t]`, t < `width`, each judged against its excursion's
    reference (`lv`, `rho`, `scale`) with the sum at `carry` before the first: (the sums
    after each value, as `_scan` adds them one at a time: ((sum + min(z, cap)) - drift), in
    that order, with no lower or upper bound applied; whether each value is finite; whether
    it lies past the series' end). `np.add.accumulate` adds along a row in order, so the
    sums are the loop's, bit for bit, wherever the loop's bounds did not act."""
    n = len(x)
    j = at[:, None] + np.arange(width)[None, :]
    past = j >= n
    j = np.minimum(j, n - 1)
    v, p = x[j], x[j - 1]
    level = lv[:, None]
    with np.errstate(all="ignore"):
        prev = np.where(np.isfinite(p), p, level)
        z = ((v - level) - rho[:, None] * (prev - level)) / scale[:, None]
        steps = np.empty((len(at), 2 * width + 1))
        steps[:, 0] = carry
        steps[:, 1::2] = np.minimum(z, cap)
        steps[:, 2::2] = -drift
        sums = np.add.accumulate(steps, axis=1)[:, 2::2]
    return sums, np.isfinite(v), past


class _Chain:
    """The excursions of `_scan` that start from a sum of 0 and come back to 0 without
    crossing the threshold, followed together instead of a value at a time: an excursion
    begins at a value that raises the sum from 0 (a `moves` index of `_quiet` whose own
    reference is known: `ok`); its sum is then the running sum of its increments under that
    reference while it stays in (0, h] (neither bound acts); it ends at the first value that
    brings it to 0 or below (the sum is 0 again: the next excursion begins at the next index
    that moves it, the values between leave it at 0). Where a sum would cross h, a value is
    not finite, or the series ends, the loop takes over (`walk` returns its state there)."""

    def __init__(
        self,
        rule: LossChangePoint,
        name: str,
        x: np.ndarray,
        moves: np.ndarray,
        ok: np.ndarray,
        lv: np.ndarray,
        js: np.ndarray,
        rho: np.ndarray,
        scale: np.ndarray,
        h: np.ndarray,
    ) -> None:
        self.rule, self.name, self.x, self.moves = rule, name, x, moves
        self.ok, self.lv, self.js, self.rho, self.scale, self.h = ok, lv, js, rho, scale, h
        m = len(moves)
        self.length = np.full(m, -1, dtype=np.int64)  # values each excursion's bulk part takes
        self.ended = np.zeros(m, dtype=bool)  # ... and whether its last brought the sum to 0
        self.nxt = np.zeros(m, dtype=np.int64)  # the next start after an excursion that ended

    def _follow(self, k0: int) -> None:
        """`length`, `ended` and `nxt` of the starts from position `k0` (`_ROWS` of them)."""
        k1 = min(len(self.moves), k0 + _ROWS)
        self.length[k0:k1] = 0
        rows = k0 + np.flatnonzero(self.ok[k0:k1])
        carry = np.zeros(len(rows))
        t0, width = 0, _FIRST
        cap, drift = float(self.rule.cap), float(self.rule.drift)
        while len(rows):
            sums, finite, past = _sums(
                self.x, self.moves[rows] + t0, carry, self.lv[rows], self.rho[rows], self.scale[rows],
                cap, drift, width,
            )  # fmt: skip
            stop = past | ~finite | ~(sums <= self.h[rows, None])  # the loop takes this value
            end = ~stop & ~(sums > 0)  # back to 0 (or below) at this value
            event = stop | end
            hit = event.any(axis=1)
            first = np.argmax(event, axis=1)
            done = rows[hit]
            f = first[hit]
            ends = end[hit, f]
            self.length[done] = t0 + f + ends
            self.ended[done] = ends
            rows, carry = rows[~hit], sums[~hit, -1]
            t0 += width
            width = max(_FIRST, min(4 * width, _CELLS // max(1, len(rows))))
        fin = np.flatnonzero(self.ended[k0:k1]) + k0
        self.nxt[fin] = np.searchsorted(self.moves, self.moves[fin] + self.length[fin] - 1, "right")

    def walk(self, k: int) -> tuple[_Runs | None, int, tuple | None]:
        """From the start at position `k` (the sum at 0 before it): the excursions that end
        in bulk one after another, (their `_Runs` or None, the position of the first start
        they do not cover, and the loop's state (index, sum, start, reference) where an
        excursion goes on past the bulk part; None when none does)."""
        path: list[int] = []
        m = len(self.moves)
        length, ended, nxt = self.length, self.ended, self.nxt
        while k < m:
            if length[k] < 0:
                self._follow(k)
            if not ended[k]:
                break
            path.append(k)
            k = int(nxt[k])
        state = None
        if k < m and length[k] > 0:  # an excursion the bulk part follows, then the loop
            path.append(k)
        if not path:
            return None, k, None
        runs = _Runs(self, np.asarray(path, dtype=np.int64))
        if k < m and length[k] > 0:
            state = runs.state_before(int(self.moves[k] + length[k]))
            assert state is not None
        return runs, k, state


class _Runs:
    """The excursions one `_Chain.walk` took: their starts' positions among the chain's."""

    def __init__(self, chain: _Chain, path: np.ndarray) -> None:
        self.chain = chain
        self.path = path
        self.starts = chain.moves[path]

    def state_before(self, taken: float) -> tuple[int, float, int, tuple[float, float, float, float]] | None:
        """(index, sum, start, reference) after the last value below `taken` these
        excursions took; None when they took none."""
        c = self.chain
        p = int(np.searchsorted(self.starts, taken, "left")) - 1
        if p < 0:
            return None
        k = int(self.path[p])
        start = int(self.starts[p])
        last = min(start + int(c.length[k]), int(min(taken, c.x.shape[0]))) - 1
        one = np.array([k])
        sums, _, _ = _sums(
            c.x, c.moves[one], np.zeros(1), c.lv[one], c.rho[one], c.scale[one],
            float(c.rule.cap), float(c.rule.drift), last - start + 1,
        )  # fmt: skip
        total = float(sums[0, -1])
        total = total if total > 0 else 0.0  # the loop's lower bound: 0 where it came back
        model = c.rule._models[(c.name, int(c.js[k]))]
        assert model is not None  # an `ok` start has its noise model
        return last, total, start, (float(c.lv[k]), *model)


@register
class LossChangePoint(LossSeriesRule):
    """The training loss moved up to a new level and stays there: a one-sided robust CUSUM
    (Page's test) of the loss against its reference level crosses its threshold, and the
    median of the last 5 values is more than `min_increase_percent` % above that level.

    The reference level is the median of the 4 x `window` saved values before the current
    excursion began; the noise is the run's own (`mldbg.rules.detect.noise`, over up to 500
    values before, re-estimated every 50): its robust scale, its lag-1 autocorrelation rho
    (each value is judged by its innovation, (x_t - level) - rho (x_(t-1) - level), in units
    of the innovations' scale, so that correlated noise that wanders is not a shift), the
    slow structure beyond it (`detect.long_run`: an oscillation, a sawtooth, which widen the
    scale by the square root of the long-run variance factor) and its tails; the scale is
    taken at its upper bound for the values it was estimated from (`_known`: x1.06 for 500
    independent values, x1.7 for 50 values correlated at 0.9). Each new value adds its standardized innovation, less the allowance `drift`,
    capped at `cap` (one bad batch is loss_spike's, not a change of level); the sum resets
    to 0 when the loss comes back. The threshold is set from a false-alarm budget of 1e-3 per
    run of up to 10^6 steps (`detect.cusum_threshold`: ln(10^9) / theta, theta the Lundberg
    exponent of the capped increments under the run's tails: 10.4 for normal noise, 19.7
    for Student-t with 3 degrees of freedom), and never below `threshold`.

    A crossing is a candidate, not yet a finding: a learning-rate schedule moves the loss up
    too (a warm restart, SGDR: the loss jumps up at each restart and falls through the cycle;
    a curriculum's harder stage; a burst of hard batches; evaluation-mode batches logged
    among the training steps, which the reference, the median of 4 `window`s, does not
    follow). A rise that **reverses by itself within a bounded time** is a schedule's; one
    that climbs on or lasts is not. The candidate is reported when
    - it runs away (`_accelerates`: its climb accelerates, the curvature of a parabola
      through its last values beyond 5 standard errors, the last two each a new high: a loss leaving
      the edge of stability grows geometrically; an LM's loss spike climbs in steady
      strides and turns), at its crossing or within `_CURVE` values after it, or
    - it climbs on: a second CUSUM, the same test against the excursion's own level, crosses
      the same threshold (a loss that shifted up and rises again: a divergence), unless the
      excursion had been falling back in between (a staircase of relaxing stages), and it
      then climbs on for as long again as the excursion had lasted (`_climbs`: its 10 block
      medians since rise; a transient's own time scale, whatever it is: a spike has turned
      by then), or
    - it lasts: `persist` x the values before the crossing later (as long again as the run
      had run: schedules act on time scales proportional to the run), the excursion has not
      fallen back (its 10 block medians do not fall, Mann-Kendall z > -2, or it gave back
      less than `_BACK` = 20% of its height, in log terms) and is still
      `min_increase_percent` above the reference.
    A finished run checked offline (`mldbg check`) is judged by what it did after: a
    confirmed crossing is held, and reported at the end only if the loss never came back to
    its reference level (`losses.came_back`): a rise it came back from was a transient of its
    training (a world model meeting new states, a penalty's coefficient warmed up, a harder
    stage it then learned). Live, it is reported at once (a stop acts on it).
    It is dropped when the CUSUM empties (the loss came back to its reference; the sum is
    held at 2h so that this takes ~2h values) or when it fell back; the test then starts
    afresh from the new level. The cost: a permanent step up (a data shard broken, a loss 2x
    from one step on) is reported only after it has lasted as long as the run before it
    (`loss_not_decreasing`'s rise often sooner), and one that starts in the second half
    of a run is not reported by this rule at all. Nor is an excursion that begins as the
    recorded learning rate begins a new schedule, or whose reference straddles one
    (`mldbg.rules.losses.schedule_restarts`: the next stage of a pipeline, a warm restart):
    a new phase, judged once its reference is its own. What it cannot tell apart: a restart
    whose loss climbs for longer than it had lasted at its second crossing (a slow bump of
    hundreds of steps) is read as climbing on; a rise that levels off and never falls back (a KL weight warmed up to its
    full value while the reconstruction no longer improves) is read as lasting. A loss creeping
    upward at the edge of stability (a learning rate slightly too high) crosses it several
    steps before the loss doubles (docs/rules.md, "Early warning"). TRAIN losses only, each
    series on its own, after `warmup` saved values. A reference level at or below 0 is not
    judged: such a series is a signed surrogate objective (a policy gradient's -log pi x
    normalized return, which rises toward 0 as the policy becomes sure), not a loss that
    diverges upward; nor is a loss that moves against another loss of the run (a GAN's
    players, `mldbg.rules.losses.opposed`), nor a GAN's loss on one hook
    (`mldbg.rules.select.adversarial`: two models trained on one-class targets), as
    `loss_not_decreasing` and `underfitting` judge them: a game's loss is not meant to settle.
    """

    window: int = 50
    drift: float = 1.0
    cap: float = 6.0
    threshold: float = 6.0
    min_increase_percent: float = 5.0
    persist: float = 1.0
    warmup: int = 100
    suggestion = (
        "The loss is drifting away from where it was: lower the learning rate (or lengthen the "
        "warmup), clip gradients (torch.nn.utils.clip_grad_norm_), and keep a checkpoint from "
        "before the shift to roll back to (mldbg.torch.Guard) if it goes on rising."
    )

    def reset(self) -> None:
        super().reset()
        self._sum: dict[str, float] = {}  # name -> the CUSUM
        self._start: dict[str, int] = {}  # name -> index where the current excursion began
        self._ref: dict[str, tuple[float, float, float, float]] = {}  # name -> the excursion's reference
        self._pend: dict[str, tuple | None] = {}  # name -> a crossing awaiting confirmation
        self._models: dict[tuple[str, int], tuple[float, float, float] | None] = {}  # (name, j) -> noise
        self._pending: dict[str, list[tuple]] = {}  # the fast path's updates, to keep
        # a finished run checked offline: name -> its crossings (finding, the level before,
        # the index of the value), each reported at `finish` unless the run came back
        self._held: dict[str, list[tuple[Finding, float, int, bool]]] = {}

    def _screens(self) -> bool:
        return self.window >= 4 and self.threshold >= 0  # no screening for these: check() only

    def _may_fire(self, name: str, values: Sequence[float], lengths: np.ndarray) -> np.ndarray:
        """The fast path: `_scan`, the decision `check` takes, over the new values at once;
        its updates wait in `_pending` for `_kept`; True at the first value that fires."""
        out = np.zeros(len(lengths), dtype=bool)
        if not len(lengths) or name in self._fired:
            return out  # reported (or a game's): nothing more to find in it, no scan to run
        # the series as it is shared (`SharedColumn`: an index a Python float, `np.asarray` no
        # copy), not a list of 10^6 floats made per call: the scan's Python loop reads only
        # the values it cannot take in bulk (`_runs`)
        self._pending[name], at = self._scan(name, values, int(lengths[0]) - 1)
        if at is not None:
            out[lengths == at + 1] = True
        return out

    def _kept(self) -> None:
        """The CUSUM updates of the values the fast path took."""
        for name, done in self._pending.items():
            s = self._tracker.train.get(name)
            self._last(name, done, len(s.values) if s is not None else 0)
        self._pending = {}

    def _model(self, name: str, values: Sequence[float], j: int) -> tuple[float, float, float] | None:
        """(rho, scale of the innovations, CUSUM threshold) of the noise before index `j` (a
        multiple of `_BLOCK`); None when fewer than 3 values are finite there."""
        key = (name, j)
        if key not in self._models:
            x = np.asarray(values[max(0, j - _HISTORY) : j], dtype=np.float64)
            x = x[np.isfinite(x)]
            got = None
            if len(x) >= 3:
                level = float(np.median(x))
                # the tail as measured: the Lundberg bound's own slack (the realized rate is a
                # fraction of the budget, tests/rules/test_detect.py) covers its uncertainty
                model = detect.noise(x, floor=0.01 * abs(level), tail_margin=0.0)
                if model is None:  # 3 values: no differences to speak of
                    model = detect.Noise(level, max(0.01 * abs(level), 1e-12), 0.0, math.inf, len(x))
                # slow structure the lag-1 model misses
                got = self._scaled(level, model, detect.long_run(x, model))
            self._models[key] = got
        return self._models[key]

    def _scaled(self, level: float, model: detect.Noise, phi: float) -> tuple[float, float, float]:
        """(rho, scale of the innovations, CUSUM threshold) of a noise model and its long-run
        variance factor."""
        h = max(self.threshold, detect.cusum_threshold(self.drift, self.cap, model.nu))
        floor = 0.01 * abs(level)  # the innovations' scale, floored as the level's
        scale = model.sigma * math.sqrt((1 - model.rho**2) * phi) * _known(model, phi)
        return (model.rho, max(scale, floor, 1e-12), h)

    def _prefill(self, name: str, x: np.ndarray, first: int) -> None:
        """The noise models (`_model`) of every block a scan of `x[first:]` may ask for,
        computed at once (`detect.noise_windows`: the same numbers) where the `_HISTORY`
        values before the block are all finite; the others are left to `_model`."""
        lo = max(_HISTORY, first // _BLOCK * _BLOCK)
        hi = (len(x) - 1) // _BLOCK * _BLOCK
        if hi < lo:
            return
        js = np.arange(lo, hi + 1, _BLOCK)
        bad = np.concatenate([[0], np.cumsum(~np.isfinite(x))])
        js = js[bad[js] == bad[js - _HISTORY]]
        js = np.array([j for j in js.tolist() if (name, j) not in self._models], dtype=np.int64)
        if not len(js):
            return
        for j, (model, phi) in zip(
            js.tolist(), detect.noise_windows(x, js, _HISTORY, 0.01, tail_margin=0.0), strict=True
        ):
            self._models[(name, j)] = self._scaled(model.level, model, phi)

    def _reference(
        self, name: str, values: Sequence[float], start: int, level: float | None = None
    ) -> tuple[float, float, float, float] | None:
        """(level, rho, innovation scale, threshold) of an excursion beginning at `start`."""
        if level is None:
            ref = [v for v in values[max(0, start - self._span()) : start] if math.isfinite(v)]
            if len(ref) < 3:
                return None
            level = median(ref)
        model = self._model(name, values, max(_BLOCK, start // _BLOCK * _BLOCK) if start >= _BLOCK else start)
        if model is None or not math.isfinite(level):
            return None
        return (level, *model)

    def _scan(self, name: str, values: Sequence[float], first: int) -> tuple[list[tuple], int | None]:
        """The decision: the CUSUM over `values[first:]` from the rule's state, one value at a
        time; the (index, sum, start, reference) after each value that updates it (`_last`
        reads them), and the index of the first value that fires (None when none does).
        `check` scans its one new value; the fast path scans many, with the reference levels
        of the values that begin an excursion taken at once (rolling medians), steps over
        the values that leave a sum of 0 at 0 (`_quiet`) in one go, and follows the
        excursions that come back to 0 below the threshold as running sums over arrays
        (`_Chain`: the same sums, in the same order); the loop goes value by value only
        where an excursion nears its threshold, meets a value not finite, or starts where
        the bulk path does not know its reference."""
        w = self._span()
        base = max(0, first - w)
        levels = None
        quiet: tuple | None = None
        if len(values) - first > 8:
            x = np.asarray(values, dtype=np.float64)
            levels = trailing_median(x[base:], w)
            self._prefill(name, x, first)
            found = self._quiet(name, values, x, levels[first - base :], first)
            chain = _Chain(self, name, x, found[0], *found[4:])
            quiet = (*found[:4], found[0].tolist(), found[1].tolist(), chain)
        total = self._sum.get(name, 0.0)
        start = self._start.get(name, first)
        ref = self._ref.get(name)
        pend = self._pend.get(name)
        done: list[tuple] = []
        fired = name in self._fired
        warm = max(2, self.warmup)
        i, n = first, len(values)
        while i < n:
            if quiet is not None and not total > 0:
                # the values from i that leave the sum at 0, or that a scan passes over, and
                # the excursions from 0 that come back to 0 below the threshold, in bulk
                nxt, at, lv, js, steps_at, zeros_at, chain = quiet
                k = bisect.bisect_left(steps_at, i)
                runs, k, state = chain.walk(k)
                upto = (steps_at[k] if k < len(steps_at) else n) if state is None else state[0] + 1
                if upto > i:
                    lo, hi = bisect.bisect_left(zeros_at, i), bisect.bisect_left(zeros_at, upto)
                    if runs is not None:
                        done.append(("chain", at[lo:hi], lv[lo:hi], js[lo:hi], runs, upto))
                    elif hi > lo:
                        done.append(("quiet", at[lo:hi], lv[lo:hi], js[lo:hi]))
                    i = upto
                    if state is not None:  # an excursion the loop goes on with, one value at a time
                        _, total, start, ref = state
                        pend = None
                    continue
            value = values[i]
            if i + 1 <= warm or not math.isfinite(value):
                i += 1
                continue
            if not total > 0:
                lv = None
                if levels is not None:
                    lv = float(levels[i - base])
                    lv = None if not math.isfinite(lv) else lv  # a NaN in the window: the exact median
                start, ref = i, self._reference(name, values, i, lv)
            if ref is None:
                i += 1
                continue
            level, rho, scale, h = ref
            prev = values[i - 1] if i > 0 and math.isfinite(values[i - 1]) else level
            z = ((value - level) - rho * (prev - level)) / scale
            # held at 2h: once the loss is back, the sum empties in ~2h values, not in as many
            # as it spent up (the crossing is all that is decided on)
            total = min(max(0.0, total + min(z, self.cap) - self.drift), 2 * h)
            if not total > 0:
                pend = None  # back at its reference: a transient (hard batches, a restart that fell back)
            elif pend is not None:
                pend, verdict = self._confirm(values, i, start, pend, ref)
                ic = pend[0]
                if (
                    verdict is None
                    and i - ic <= _CURVE
                    and self._accelerates(values, max(start, ic - 2), i, scale, level)
                ):
                    verdict = True  # it ran away soon after its crossing (a new step later on is not)
                if verdict is False:  # it fell back by itself: a schedule's; judged afresh from here
                    total, pend = 0.0, None
                elif verdict:
                    done.append((i, total, start, ref, pend))
                    return done, i
            elif not fired and total > h and level > 0:
                recent = median([v for v in values[max(0, i - 4) : i + 1] if math.isfinite(v)] or [value])
                if recent - level > self.min_increase_percent / 100 * abs(level):
                    # crossed: now it must last (or climb on) before it is reported
                    if self._accelerates(values, start, i, scale, level):
                        done.append((i, total, start, ref, pend))
                        return done, i
                    wait = max(self.window, math.ceil(self.persist * (i + 1)))
                    lc = self._level_of(values, max(start, i - 2), i)
                    pend = (i, i + wait, lc, 0.0, i + 4, rho, scale * max(1.0, lc / level), None)
            done.append((i, total, start, ref, pend))
            i += 1
        return done, None

    def _span(self) -> int:
        """The values before an excursion whose median is its reference level: 4 windows, so
        that a few dozen values of another kind (evaluation-mode batches logged as training
        steps, a burst of easy batches) do not set it."""
        return 4 * max(1, self.window)

    @staticmethod
    def _accelerates(values: Sequence[float], start: int, i: int, scale: float, level: float) -> bool:
        """Whether the excursion runs away by its value `i`: its climb accelerates. A loss
        that runs away from the edge of stability grows geometrically, its strides growing
        step after step; a transient (an LM's loss spike rising over a few steps, a restart,
        a teacher swapped) climbs in steady or shrinking strides and turns. Tested on the
        excursion's last values (from its start, at most `_CURVE`): the curvature of a
        least-squares parabola through them beyond `_ACCEL` of its standard errors at the
        noise scale (the reference's innovation scale, grown with the excursion's level
        over the reference `level`, as batch noise is a share of the loss: 3 values make
        it their second difference, sqrt(6) scales), its last two values each a new high, up
        by more than `_ACCEL` innovation scales of a difference (sqrt(2) of them) on the one before
        (climbing in strides through both: one bad batch at the end of a transient,
        loss_spike's, is one new high after a value that was none; a restart's or a new
        stage's jump is one stride, then noise), and its last value back above 0.2 of the
        loss's starting level (`mldbg.rules.losses.floor_of`: a divergence undoes the
        training; a full-batch fit 4 decades down whose Adam spike climbs 2-30x geometrically
        for a few steps and turns has undone nothing; a climb that goes on is still found as
        climbing on, or lasting)."""
        lo = max(start, i + 1 - _CURVE)
        if i - lo < 2:
            return False
        y = np.asarray(values[lo : i + 1], dtype=np.float64)
        if not np.isfinite(y).all():
            return False
        if not (y[-1] > y[-2] > float(np.max(y[:-2]))):
            return False  # not climbing now: its last two values not each a new high
        if y[-1] <= floor_of(values):
            return False  # far below where the loss began: a converged fit's spike undoes nothing yet
        noise = scale * max(1.0, float(np.median(y)) / level) if level > 0 else scale
        if not min(y[-1] - y[-2], y[-2] - y[-3]) > _ACCEL * math.sqrt(2) * scale:
            return False  # not climbing in strides: one jump (a restart, a new stage), then noise
        z = y
        k = np.arange(len(z), dtype=np.float64)
        k -= k.mean()
        design = np.stack([np.ones_like(k), k, k * k], axis=1)
        cov = np.linalg.inv(design.T @ design)
        curve = float((cov @ design.T @ z)[2])
        return curve > _ACCEL * noise * math.sqrt(float(cov[2, 2]))

    @staticmethod
    def _level_of(values: Sequence[float], start: int, i: int) -> float:
        """The median of the excursion's values so far (its last `_HISTORY`)."""
        seg = [v for v in values[max(start, i + 1 - _HISTORY) : i + 1] if math.isfinite(v)]
        return median(seg) if seg else math.nan

    def _confirm(
        self, values: Sequence[float], i: int, start: int, pend: tuple, ref: tuple[float, float, float, float]
    ) -> tuple[tuple, bool | None]:
        """One value of a crossing awaiting confirmation: (the pending state after it, True
        when it is confirmed, False when it fell back, None while undecided).

        - It climbs on: a second CUSUM, the same test against the excursion's own level
          (the median of its values, refreshed at 4, 8, 16, ... values and then every
          `_BLOCK`, with the excursion's own noise model from 10 values on; before, the
          reference's, scaled up with the level, as batch noise is a share of the loss),
          crosses the same threshold: the loss rose again beyond where it had
          shifted to, as a divergence does, and a schedule's step does not. Confirmed.
        - It lasted: after `persist` x the values before the crossing (at least `window`),
          the excursion's values (10 block medians since the crossing) do not fall (a
          Mann-Kendall z above -2) and the last block is still `min_increase_percent` above
          the reference. Confirmed; when they fall, it fell back by itself: a learning-rate
          restart, a curriculum stage, a burst of hard batches (False)."""
        ic, until, lc, s2, upd, rho2, scale2, climb = pend
        level, _, _, h = ref
        if climb is not None:  # it climbed on at climb[0]: does it go on climbing as long again?
            if i < climb[1]:
                return pend, None
            verdict = _climbs(values[climb[0] : i + 1]) and self._lasted(values, ic, i, start, ref)
            return (ic, until, lc, s2, upd, rho2, scale2, None), True if verdict else None
        if i >= upd:
            lc = self._level_of(values, max(start, ic - 2), i)
            upd = i + min(_BLOCK, max(4, i - ic))
            seg = np.asarray(values[max(ic - 2, i + 1 - _HISTORY) : i + 1], dtype=np.float64)
            model = detect.noise(seg, floor=0.01 * abs(lc), tail_margin=0.0) if math.isfinite(lc) else None
            if model is not None and len(seg) >= 10:  # the excursion's own noise, once it has some
                rho2 = model.rho
                phi = detect.long_run(seg, model)  # slow structure: a cycle's own fall, AR noise
                scale2 = max(model.sigma * math.sqrt((1 - model.rho**2) * phi) * _known(model, phi), 1e-12)
        value = values[i]
        prev = values[i - 1] if math.isfinite(values[i - 1]) else lc
        if math.isfinite(lc):
            z2 = ((value - lc) - rho2 * (prev - lc)) / scale2
            s2 = max(0.0, s2 + min(z2, self.cap) - self.drift)
            if s2 > h:  # climbed again: unless it had been falling back in between (a staircase
                # of schedule steps, each relaxing: a curriculum's stages)
                if i - ic < 10:  # too soon to tell a climb from the step's own level: look again
                    return (ic, until, lc, 0.0, upd, rho2, scale2, None), None
                if self._lasted(values, ic, i, start, ref):
                    # a transient climbs too, then turns: it must go on climbing for as long
                    # again as the excursion has lasted (its own time scale), not turn
                    return (ic, until, lc, 0.0, upd, rho2, scale2, (i, i + max(self.window, i - start))), None
                return (ic, until, lc, s2, upd, rho2, scale2, None), False
        if i < until:
            return (ic, until, lc, s2, upd, rho2, scale2, None), None
        return (ic, until, lc, s2, upd, rho2, scale2, None), self._lasted(values, ic, i, start, ref)

    def _lasted(
        self, values: Sequence[float], ic: int, i: int, start: int, ref: tuple[float, float, float, float]
    ) -> bool:
        """The verdict on an excursion from its crossing `ic` to `i`: it lasted (True) unless
        it falls back by itself: its block medians fall (Mann-Kendall z below -2) and its
        last block has given back at least `_BACK` of its first block's height above the
        reference level, in log terms, beyond what the loss's own fall before the excursion
        accounts for (`_pace`: a loss that goes on learning at twice its level falls as it
        fell before, and gives none of the jump back); or it is no longer
        `min_increase_percent` above the reference."""
        level = ref[0]
        seg = np.asarray(values[ic : i + 1], dtype=np.float64)
        seg = seg[np.isfinite(seg)]
        if len(seg) < 10 or level <= 0:
            return False
        m = len(seg) // 10
        first, last = float(np.median(seg[:m])), float(np.median(seg[-m:]))
        if last - level <= self.min_increase_percent / 100 * abs(level):
            return False
        if first > level and last > 0:
            # the loss's own pace, over no more values than it was measured on (a loss
            # that falls as a power law slows down: further, it would overstate the fall)
            own = _pace(values[max(0, start - _PACE) : start], ref[1]) * min(len(seg) - m, _PACE)
            back = (math.log(first) - math.log(last) - own) / (math.log(first) - math.log(level))
            if back >= _BACK and _falls(seg):
                return False
        return True

    def _quiet(
        self, name: str, values: Sequence[float], x: np.ndarray, levels: np.ndarray, first: int
    ) -> tuple[np.ndarray, ...]:
        """For the values `x[first:]` (`levels`: the trailing medians of each), what `_scan`
        does with each when its sum stands at 0, at once: it passes over a value of the
        warm-up or a value not finite, and a value whose increment min(z, cap) - drift (z
        under the reference it would start) is at most 0 leaves the sum at 0 (a new
        reference, nothing else). Returns (the indices of the other values, where the scan
        steps; the indices of those that leave it at 0, their reference levels and blocks;
        then, for each value where the scan steps: whether it starts an excursion from a sum
        of 0 under a reference of its own (a finite level, a noise model, an increment above
        0), and that reference's level, block, rho, scale and threshold)."""
        idx = np.arange(first, len(x))
        v = x[first:]
        warm = max(2, self.warmup)
        passed = (idx + 1 <= warm) | ~np.isfinite(v)
        cand = ~passed & np.isfinite(levels)
        js = np.where(idx >= _BLOCK, idx // _BLOCK * _BLOCK, idx)
        blocks, which = np.unique(js, return_inverse=True)
        rho_of, scale_of = np.full(len(blocks), np.nan), np.full(len(blocks), np.nan)
        for b in np.unique(which[cand]).tolist():
            model = self._model(name, values, int(blocks[b]))
            if model is not None:
                rho_of[b], scale_of[b] = model[0], model[1]
        rho, scale = rho_of[which], scale_of[which]
        cand &= np.isfinite(rho)
        prev = np.concatenate([[np.nan], x[:-1]])[first:]
        with np.errstate(all="ignore"):
            prev = np.where(np.isfinite(prev), prev, levels)
            z = ((v - levels) - rho * (prev - levels)) / scale
            zero = cand & (np.minimum(z, self.cap) - self.drift <= 0)
        at = np.flatnonzero(zero)
        moves = np.flatnonzero(~(passed | zero))
        h_of = np.full(len(blocks), np.nan)
        for b in np.unique(which[moves[cand[moves]]]).tolist():
            h_of[b] = self._models[(name, int(blocks[b]))][2]  # type: ignore[index]
        with np.errstate(all="ignore"):
            ok = cand[moves] & (np.minimum(z[moves], self.cap) - self.drift > 0)
        return (
            idx[moves], idx[at], levels[at], js[at],
            ok, levels[moves], js[moves], rho[moves], scale[moves], h_of[which[moves]],
        )  # fmt: skip

    def _last(self, name: str, done: list[tuple], taken: float = math.inf) -> None:
        """The rule's state after the last of the `_scan` updates `done` at an index below
        `taken` (a run of values that left the sum at 0: its last, with the reference it
        started)."""
        for entry in done:
            if entry[0] == "chain":
                _, at, lv, js, runs, upto = entry
                k = len(at) if not len(at) or at[-1] < taken else int(np.searchsorted(at, taken))
                i = int(at[k - 1]) if k else -1
                got = runs.state_before(taken)
                # (a value left at 0 inside an excursion was judged under the excursion's reference)
                if got is not None and got[0] >= i:
                    _, self._sum[name], self._start[name], self._ref[name] = got
                    self._pend[name] = None
                elif k:
                    ref = (float(lv[k - 1]), *self._models[(name, int(js[k - 1]))])  # type: ignore[misc]
                    self._sum[name], self._start[name], self._ref[name] = 0.0, i, ref
                    self._pend[name] = None
                if upto > taken:
                    break
                continue
            if entry[0] == "quiet":
                _, at, lv, js = entry
                # (no search when every index is below `taken`: a stretch of the many a scan takes)
                k = len(at) if not len(at) or at[-1] < taken else int(np.searchsorted(at, taken))
                if k:
                    i = int(at[k - 1])
                    ref = (float(lv[k - 1]), *self._models[(name, int(js[k - 1]))])  # type: ignore[misc]
                    self._sum[name], self._start[name], self._ref[name] = 0.0, i, ref
                    self._pend[name] = None
                if k < len(at):
                    break
                continue
            i, total, start, ref, pend = entry
            if i >= taken:
                break
            self._sum[name], self._start[name], self._ref[name] = total, start, ref
            self._pend[name] = pend

    def _judge(
        self, trial: TrialView, name: str, steps: Sequence[int], values: Sequence[float]
    ) -> list[Finding]:
        if name in self._fired:
            return []  # reported once (or a game's): its confirmed excursion is not scanned on
        done, at = self._scan(name, values, len(values) - 1)
        self._last(name, done)
        if at is None:
            return []
        # a GAN's player: its loss goes up and down by design (the labels and gradients that
        # tell one are saved at statistics steps: every 100th of the two-line hook's, after 20)
        if self._game(name) or adversarial(trial, steps[-max(self.window, GAME_STEPS) :]):
            self._fired.add(name)
            return []
        total, start, (level, _, _, h) = self._sum[name], self._start[name], self._ref[name]
        recent = median([v for v in values[-5:] if math.isfinite(v)])
        before = (steps[max(0, start - 4 * self.window)], steps[start])
        if level > 0 and moving_targets(trial, name, before, (steps[start], steps[-1]), recent / level):
            return []  # a TD loss chasing targets that grow with the values it learns
        if restarted_between(trial, steps[max(0, start - 1 - self._span())], steps[start]):
            # the learning rate began a new schedule among the values of the reference or as
            # the excursion began (the next stage of a pipeline, a warm restart): a new phase,
            # not a shift of this one; the test goes on once its reference is the new phase's
            self._sum[name], self._pend[name] = 0.0, None
            return []
        rise = recent - level
        finding = self.finding(
            trial, steps[-1],
            f"{name} (TRAIN) shifted up since step {steps[start]}: median {recent:.4g} over the last 5 saved "
            f"values, {100 * rise / max(abs(level), 1e-12):.0f}% above its level {level:.4g} before "
            f"(CUSUM {total:.1f} noise units, more than {h:.1f}: at most 1 false alarm in 1,000 healthy "
            "runs of 10^6 steps): the loss is drifting away, a divergence often follows",
            tensors=[name],
        )  # fmt: skip
        if trial.finished:
            # a finished run checked offline is judged by what it did: `finish` reports the
            # first crossing the loss did not come back from, unless it only restored the level
            # held before its reference; the test goes on from the new level
            restored = recent <= self._before_reference(values, start) * (1 + self.min_increase_percent / 100)
            self._held.setdefault(name, []).append((finding, level, len(values) - 1, restored))
            self._sum[name], self._pend[name] = 0.0, None
            return []
        return [finding] if self.first(name) else []

    def _before_reference(self, values: Sequence[float], start: int) -> float:
        """The level the loss held before the reference of an excursion beginning at `start`:
        the median of the span of values before the reference's span (NaN where there are
        fewer than half a span)."""
        span = self._span()
        seg = [v for v in values[max(0, start - 2 * span) : max(0, start - span)] if math.isfinite(v)]
        return median(seg) if len(seg) >= span // 2 else math.nan

    def finish(self, trial: TrialView) -> list[Finding]:
        """The held crossings of a finished run checked offline: per loss, the first one after
        which the loss never came back to its level before (`losses.came_back`, blocks of the
        reference's length); one it came back from was a transient of the training (a world
        model meeting new states, a penalty's coefficient warmed up), not a divergence, unless
        a recovery action brought it back (`losses.rescued`: a rollback, a skipped batch). Nor
        is a crossing that only restored the level the loss held before its reference (within
        `min_increase_percent`): the reference was a dip, and the loss came back from it (a
        running mean restarted from 0 at a relaunch, refilling)."""
        out: list[Finding] = []
        helped = bool(self._held) and rescued(trial)  # a rollback brought it back, not the run
        for name, held in self._held.items():
            s = self._tracker.train.get(name)
            if s is None:
                continue
            for finding, level, at, restored in held:
                back = came_back(s.values, at, level, self._span()) or restored
                if (helped or not back) and self.first(name):
                    out.append(finding)
                    break
        self._held = {}
        return out
