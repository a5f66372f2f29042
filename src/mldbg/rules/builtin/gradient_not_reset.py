"""gradient_not_reset: gradients accumulate across optimizer steps (a missing zero_grad)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from mldbg.config import Mode
from mldbg.rules import detect
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, aligned, quiet_prefix
from mldbg.rules.select import adversarial
from mldbg.rules.stats import rising_share, trend_z
from mldbg.rules.view import TrialView
from mldbg.store.statistics import vector_name

_RISING = 0.8  # share of consecutive steps whose norm rose
_MAX_DROP = 0.2  # the largest one-step fall of a norm that sums gradients
_RAW_MAX_GAP = 50  # saved raw gradients further apart (the default SaveConfig's 500) are not compared
DECAY = 64  # statistics steps whose changes give the decay of a sum (`GradientNotReset.decay`)
_SUM_OF_TWO = 0.9  # a sum of two gradients changes by less than this share of its norm (0.5-0.8)
FRESH_LEVEL = 0.05  # the paired t-test's level: the first gradients refute a sum (`_fresh_sized`)
HELD = 1e-4  # a global norm held by clipping varies by rounding only: relative spread below this
RESET = "gradient_reset/"  # what a PyTorch hook saw at each update: was `.grad` reset since the last?


@register
class GradientNotReset(Rule):
    """Gradients accumulate across optimizer steps without gradient accumulation being
    intended: over `window` consecutive saved training steps the global gradient norm rose
    at (almost) every step (at least 80% of them) and grew more than `min_growth` times, in
    its first half by a typical step (the median increment) of at least half the first norm,
    as adding gradients of about the same size and direction does, never falling by more
    than 20% in one step (a sum of many gradients barely changes; noisy small norms near
    convergence do); and most weight gradients grew on their own.

    When `optimizer.zero_grad()` is missing, `.grad` holds the sum of every gradient since
    the start: consecutive gradients are nearly collinear early on, so the norm grows about
    linearly with the step (norm(t) ~ t x norm(1)), and every update is a step along a
    stale, growing sum. Healthy gradients fluctuate around a level or shrink. The sawtooth
    of intended accumulation (reset every `accumulation_steps` steps, when the hook counts
    micro-batches as steps) never rises for longer than that: the window is at least
    2 x `accumulation_steps` + 2 steps. Reads the `l2` statistic of the gradients (the
    two-line hook saves it every step of the first 20, where this shows).

    Norms alone cannot tell every case: a slower, steady rise (2x over 16 steps) is what a
    healthy language model's gradient norm does early on, and what a BatchNorm CNN without
    `zero_grad()` does too. The `sample_change` statistic the two-line hook records tells
    them apart: how much each gradient changed since the previous statistics step, over its
    norm. Two mini-batch gradients differ about as much as they weigh (healthy: 0.6-2), while
    a sum of gradients changes by one fresh gradient, a shrinking share of it. So the rule
    also fires when, over `window` saved training steps, the median over weight gradients of
    `sample_change` stayed below `max_change` (its median over the window) while the global
    norm stood `min_sum_growth` times above its first saved values: a stale sum that grew.
    Full-batch training changes its gradient little too (the same inputs every step), and
    its norm may rise 1.5x as the fit sharpens (a GCN, 30-50% changes): a step whose model
    input (`input_name`) holds the same samples as the previous training statistics step's
    (their `sample_fingerprints`, which the two-line hook records) counts against
    `max_full_batch_change` instead (its change x `max_change` / `max_full_batch_change`),
    and not in the parity signal below. A missing `zero_grad()` in full-batch training sums
    the same gradient every step: its norm grows linearly (the first signal), or, where
    BatchNorm holds it back, its change falls as 1/t, below 20% within a few steps. Nor is a
    GAN on one hook (`mldbg.rules.select.adversarial`): early on, its discriminator learns one
    direction (real against fake) whatever the batch, and its generator follows it, so
    fresh gradients change little while their norm rises as the game sharpens.

    `optimizer.zero_grad()` called only every other step leaves a sawtooth instead: every
    second gradient is the sum of two, so over `parity_window` consecutive statistics steps
    the `sample_change` of one parity stays below that of the other and below 0.9 (all of
    them, and by 1.8x in median: a sum of two changes by 0.5-0.8 of its norm, a fresh
    gradient after the sum by about 1.5) while its norm is 1.2x larger. Healthy gradients
    have no such parity; a siamese net fed alternating kinds of pairs has one in its changes
    (1.0 against 3.1), but not below 0.9.

    Each of these signals is then tested against what accumulation itself predicts, where the
    hook's `sample_change` of the first steps tells it (the null is a healthy run, whose
    gradient is one fresh mini-batch gradient at every step): if `.grad` is a sum, its change
    from one step to the next is one fresh gradient, so (1) at train steps 1-3 that change
    weighs about what the first gradient did (0.5-1.8x in every missing-`zero_grad()` run
    measured), as the recorded gradient itself does if it is reset (a gradient at nearly the
    same weights): where the gradients of steps 1-3 stray further from the first one's size,
    |log(size / first size)|, as a sum's fresh terms than as recorded, significantly over the
    (weight gradient, step) pairs (a one-sided paired t-test at 5%), the sum is refuted,
    for every signal (healthy full-batch training and regressions under SGD: a sum would need
    fresh gradients at 5-10% of the first, the recorded ones stay within 2-7% of it; under
    Adam 40% against 4-40%; missing-`zero_grad()` runs, mini-batch or full batch, favour the
    sum, or neither); and (2) for the two signals of a sum that is
    never reset, the change falls as the sum grows, as (t + 1)^-1/2 (fresh gradients in
    random directions) to (t + 1)^-1 (aligned): the slope of log(change) over log(t + 1) on the
    first 64 statistics steps (`decay`) must be at most `sum_decay` = -0.25, the middle
    between that and a healthy gradient's slope of 0 (-0.3 to +0.4 measured). A regression at
    batch 128 whose gradient changes by a steady 39% while its norm rises 1.5x fails (2); a
    full-batch MLP regression, 8% of its first gradient (40% under Adam, whose norm rises 1.9x
    while its change falls as 1/t for 8 steps), fails (1). The parity signal needs
    (1) only (every second gradient a sum of two does not decay). Where neither is known (no
    `sample_change`, statistics that skip the first steps), the signals decide alone.

    Under gradient clipping (`clip_grad_norm_`, the default of nanoGPT and the Hugging Face
    Trainer) the hook records the gradients as the optimizer sees them, after the clip: a sum
    that is never reset cannot grow past `max_norm`, so its norm is censored and the growth
    above never shows. Its censored form does: over the `window` statistics steps the global
    norm is held at one value (a relative spread below `HELD` = 1e-4, rounding: a free
    gradient whose direction changes by 1% or more moves its norm by a comparable share, so
    the spread must also be below 1% of the median change), the clip binding at every step.
    Under the null (gradients reset), a held norm is a fresh gradient rescaled, whose
    direction changes by what any fresh mini-batch gradient's does (60-200%: 0.6-1.1 measured
    on tiny LMs and MLPs clipped at every step, 0.1x their free norm); if `.grad` carries the
    clipped sum, each step adds one fresh gradient f to a vector of norm `max_norm` and
    rescales, so the direction changes by about |f| / `max_norm` (20-40% where the clip binds
    only because of the sum). So the stale-sum test holds on a held norm as on a grown one,
    at every step of the window rather than in median (healthy 2-layer LSTM language models
    clipped at 0.1 under Adam, their early gradients aligned, turn by 0.36-0.83 a step, a
    median of 0.45-0.6 over 8 steps, but never 8 steps all below 0.4; the same LSTM without
    `zero_grad()` turns by 0.25-0.4), while the fresh-size and decay tests do not apply:
    they size the change against a first gradient and a norm that the clip has cut. Where
    the fresh gradients alone exceed the clip by far, a carried sum of norm `max_norm`
    barely moves a step, and neither rule nor training can tell it: not judged. Nor is a
    clip applied to bf16 gradients (their norm is held to bf16's rounding, ~0.4%), nor
    `clip_grad_value_` (it holds no norm).

    Where the gradients were saved raw at sparse steps (everything every 5 steps, no
    statistics), the rule computes the same change itself, between consecutive saved
    training steps 2 to 50 steps apart: over `raw_window` saved steps the global norm grew
    more than `min_growth` times, never falling by more than 20%, while the weight gradients
    changed by a median below `max_raw_change` of their norm. Fresh gradients 5 steps apart differ by 100-200% of
    their norm (full-batch ones by 60-100%, at a flat norm); a sum without `zero_grad()`
    changes by 5 fresh gradients over a norm that grew with the step (20-95%).

    Where the hook saw it (the PyTorch two-line hook records `gradient_reset/<model>` at
    statistics steps), none of the above is needed and none of it runs: when a backward
    begins, the gradient of the model's first parameter is None or zero if `zero_grad()` ran
    since the last update, and holds that update's gradient if not. The rule fires when, of
    a model's last `observed_window` recorded updates, `observed_carried` or more applied a
    gradient that had not been reset (a missing `zero_grad()` from the second update on;
    one called every other step, at every second update). A healthy run resets before every
    update, whatever its clipping, schedule, optimizer or accumulation (micro-batches add up
    within one update). A GAN's generator backward that reaches the discriminator is not
    counted: the discriminator's gradient is judged at its own update, after its reset. Nor
    is a pass that adds nothing into `.grad`: `torch.autograd.grad` (gradient surgery:
    adversarial debiasing, PCGrad, which compute gradients, project them and assign `.grad`
    after its reset) or a `backward(inputs=...)` that leaves the layer out.

    `observed_window` and `observed_carried` are counts of updates (8 and 4); `observed=False`
    judges from the statistics alone, as for a run recorded without the flags.
    """

    needs = ("gradients",)
    reads = {"gradients": ("l2", "sample_change"), "inputs": ("sample_fingerprints",)}
    observed: bool = True
    observed_window: int = 8
    observed_carried: int = 4
    window: int = 8
    min_growth: float = 3.0
    max_change: float = 0.4
    max_full_batch_change: float = 0.2
    min_sum_growth: float = 1.5
    raw_window: int = 4
    parity_window: int = 12
    max_raw_change: float = 0.95
    accumulation_steps: int = 1
    tensor_regex: list[str] | None = None
    input_name: str = "model_input_0"
    sum_decay: float = -0.25
    suggestion = (
        "Call optimizer.zero_grad() (or model.zero_grad(set_to_none=True)) once per optimizer step, "
        "before loss.backward(); when accumulating on purpose, zero the gradients after each "
        "optimizer.step() and pass accumulation_steps to this rule."
    )

    def reset(self) -> None:
        super().reset()
        self._run: list[tuple[int, int, dict[str, float]]] = []  # (step, mode step, norms): consecutive
        self._first: list[float] = []  # the global norm at the first saved training steps
        # (step, global norm, median sample_change as judged, as saved): judged x max_change /
        # max_full_batch_change on a step whose inputs repeat the step before's
        self._changes: list[tuple[int, float, float, float]] = []
        self._raw_prev: dict[
            str, np.ndarray
        ] = {}  # a fixed subsample of each weight gradient, last saved raw
        self._raw_run: list[
            tuple[int, float, float]
        ] = []  # (step, global norm, median change since the last)
        self._raw_gap_from = -(10**9)  # the mode step of the last saved raw gradient
        self._parity: list[
            tuple[int, float, float]
        ] = []  # (mode step, global norm, median sample_change): consecutive
        self._game: bool | None = None  # a GAN (`adversarial`), asked once where _stale_sum would fire
        self._inputs: np.ndarray | None = None  # the sorted input fingerprints of the last training step read
        # the fresh-gradient reference (`_learn_fresh`): the weight gradients' norms at train step 0,
        # the last train step read after it, the median change / first norm at each of steps 1-3
        self._fresh_first: dict[str, float] | None = None
        self._fresh_last = 0
        self._fresh: list[tuple[float, float]] = []  # per weight gradient and step: (|log a|, |log b|)
        self._fresh_steps = 0
        self._fresh_done = False
        self._decay: list[tuple[int, float]] = []  # (mode step, median sample_change): the first DECAY
        self._decay_open = True  # still collecting them
        self._observed = False  # the hook recorded `gradient_reset/`: it alone decides
        self._carried: dict[str, list[tuple[int, bool]]] = {}  # per model: (step, not reset), last updates

    def _width(self) -> int:
        return max(self.window, 2 * max(1, self.accumulation_steps) + 2)

    def _accumulating(
        self, run: list[tuple[int, int, dict[str, float]]]
    ) -> tuple[list[float], float, list[str], list[str]] | None:
        """(global norms, growth, weights that grew, weights) when the last `window`
        consecutive steps of `run` look like gradients that accumulate; else None."""
        w = self._width()
        if len(run) < w:
            return None
        total = [math.sqrt(sum(v * v for v in n.values())) for _, _, n in run]
        growth = total[-1] / total[0] if total[0] > 0 else math.inf
        if rising_share(total) < _RISING or growth <= self.min_growth:
            return None
        if float(np.median(np.diff(total[: w // 2 + 1]))) < 0.5 * total[0]:
            return None  # not a sum of comparable gradients: a divergence grows otherwise
        if min((b / a for a, b in zip(total, total[1:], strict=False) if a > 0), default=1.0) < 1 - _MAX_DROP:
            return None  # a sum of many gradients barely shrinks in one step; noise does
        norms = run[-1][2]
        weights = [n for n in norms if "bias" not in n.lower()] or list(norms)
        grown = [
            n for n in weights
            if trend_z([r[2][n] for r in run]) > 2 and run[-1][2][n] > 1.5 * run[0][2][n]
        ]  # fmt: skip
        return None if 2 * len(grown) < len(weights) else (total, growth, grown, weights)

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): the leading `steps` at which the global
        norm did not grow `min_growth` times over a full window (screened over all steps at
        once, then judged as `check` judges), their norms kept as `check` keeps them. A
        gradient saved raw whose `l2` must be computed ends the prefix. The kept steps feed
        the fresh-gradient reference and the decay of the changes as in `check`."""
        if self.observed and (self._observed or trial.names(None, regex="^" + RESET)):
            return self._observed_columns(trial, steps)
        names = trial.names("gradients", regex=self.tensor_regex)
        if not names or not len(steps):
            return len(steps)
        modes, mode_steps = trial.columns.modes(steps)
        overs = [Over(trial, n, steps) for n in names]
        have = np.array([o.present for o in overs]) & (modes == int(Mode.TRAIN))
        vals = np.array([o.stat("l2") for o in overs])
        raw = np.array([o.raw for o in overs])
        cut = quiet_prefix((have & raw & np.isnan(vals)).any(axis=0))
        with np.errstate(invalid="ignore"):
            inc = have[:, :cut] & np.isfinite(vals[:, :cut])  # a NaN not raw: saved NaN or not saved, skipped
        rows = np.flatnonzero(inc.any(axis=0))  # the steps check() appends to its run
        if not len(rows):
            return cut
        w = self._width()
        mine, ms = inc[:, rows], mode_steps[rows]
        joined = np.ones(len(rows), dtype=bool)  # continues the run of the row before
        joined[1:] = (ms[1:] == ms[:-1] + 1) & (mine[:, 1:] == mine[:, :-1]).all(axis=0)
        prior = self._run
        if prior:
            last_names = set(prior[-1][2])
            joined[0] = (
                ms[0] == prior[-1][1] + 1
                and {n for n, i in zip(names, mine[:, 0].tolist(), strict=True) if i} == last_names
            )
        else:
            joined[0] = False
        # the length of the run (uncapped) at each row
        start = np.maximum.accumulate(np.where(joined, 0, np.arange(len(rows))))
        length = np.arange(len(rows)) - start + 1 + np.where(start == 0, len(prior) if joined[0] else 0, 0)
        squares = np.where(mine, vals[:, rows], 0.0)
        total = np.sqrt((squares * squares).sum(axis=0))  # screening only
        before = (
            np.array([math.sqrt(sum(v * v for v in n.values())) for _, _, n in prior])
            if prior
            else np.zeros(0)
        )
        series = np.concatenate([before, total])
        at = np.arange(len(rows)) + len(before)
        with np.errstate(invalid="ignore", divide="ignore"):
            base = series[np.maximum(0, at - w + 1)]
            maybe = (length >= w) & ((base <= 0) | ~(total < (1 - 1e-9) * self.min_growth * base))
            # and rising at 80% of the window's steps (a rise within rounding counted as one)
            rises = np.concatenate([[0], np.cumsum(np.diff(series) > -1e-9 * np.abs(series[1:]))])
            share = (rises[at] - rises[np.maximum(0, at - w + 1)]) / max(1, w - 1)
            maybe &= ~(share < _RISING * (1 - 1e-9))
        if "accumulating" in self._fired:
            maybe[:] = False

        def row(p: int) -> tuple[int, int, dict[str, float]]:
            at = int(rows[p])
            return (
                int(steps[at]),
                int(mode_steps[at]),
                {n: float(vals[t, at]) for t, n in enumerate(names) if inc[t, at]},
            )

        def run_at(p: int) -> list[tuple[int, int, dict[str, float]]]:
            """check()'s run after row p."""
            n = min(int(length[p]), w)
            new = [row(q) for q in range(max(0, p - n + 1), p + 1)]
            return (prior + new)[-n:] if n > len(new) else new

        changes = np.array([o.stat("sample_change") for o in overs])
        found, matrix = self._fingerprint_rows(trial, steps[rows])
        if found is None:  # batches of several sizes: read one by one, up to 256 rows here
            rows = rows[:256]
            cut = min(cut, int(rows[-1]) + 1) if len(rows) == 256 else cut
            mine, ms, total, length, maybe = (a[: len(rows)] for a in (mine, ms, total, length, maybe))
            batches = [self._fingerprints(trial, int(steps[r])) for r in rows.tolist()]
        else:
            batches = found
        repeated = np.zeros(len(rows), dtype=bool)
        last = self._inputs
        if matrix is not None and len(batches) and batches[0] is not None:
            # one batch size throughout (the rows of `matrix`): each against the one before
            repeated[1:] = (matrix[1:] == matrix[:-1]).all(axis=1)
            repeated[0] = last is not None and np.array_equal(batches[0], last)
        else:
            for i, b in enumerate(batches):
                repeated[i] = b is not None and last is not None and np.array_equal(b, last)
                last = b
        stale = self._stale_candidate(names, inc[:, rows], total, changes[:, rows], ms, repeated)
        if stale is not None:
            cut = min(cut, int(rows[stale]))
        for p in np.flatnonzero(maybe).tolist():
            if int(rows[p]) >= cut:
                break
            if self._accumulating(run_at(p)) is not None:
                cut = int(rows[p])
                break
        kept = np.flatnonzero(rows < cut)
        for q in kept.tolist():  # the first steps only: until both references are settled
            if self._fresh_done and not self._decay_open:
                break
            _, ms_q, norms_q = row(q)
            col = int(rows[q])
            got = {n: float(changes[t, col]) for t, n in enumerate(names) if inc[t, col]}
            self._fresh_from(ms_q, norms_q, got)
            self._decay_from(ms_q, self._valid_changes(norms_q, got))
        if len(kept):
            self._run = run_at(int(kept[-1]))
            self._keep_stale_state(
                kept.tolist(), row, changes[:, rows[kept]], inc[:, rows[kept]], names, repeated[kept]
            )
            self._inputs = batches[int(kept[-1])]
        return cut

    def _fingerprints(self, trial: TrialView, step: int) -> np.ndarray | None:
        """The sorted sample fingerprints of the model input at `step` (None: not saved)."""
        got = trial.statistic(self.input_name, step, "sample_fingerprints")
        return np.sort(np.asarray(got).reshape(-1)) if isinstance(got, np.ndarray) and got.size else None

    def _fingerprint_rows(
        self, trial: TrialView, steps: np.ndarray
    ) -> tuple[list[np.ndarray | None] | None, np.ndarray | None]:
        """`_fingerprints` at each of `steps`, from the columns (None: batches of several sizes,
        to read one by one), and the same as one 2-D array (a row per step) where they are."""
        name = vector_name(self.input_name, "sample_fingerprints")
        if trial.columns.tensor(name) is None and trial.columns.tensor(self.input_name) is None:
            return [None] * len(steps), None  # no input recorded
        stacked = trial.columns.values(name)
        if stacked is None:  # batches of several sizes (evaluation batches): these steps' only
            found = trial.columns.values_at(name, steps)
            if found is None:
                return None, None
            values = np.sort(found.reshape(len(steps), -1), axis=1)
            return [values[i] if values.shape[1] else None for i in range(len(steps))], values
        at = aligned(stacked[0], steps)
        if (at < 0).any():
            return None, None  # some step without a saved vector (raw inputs to fingerprint): one by one
        values = np.sort(stacked[1].reshape(len(stacked[0]), -1), axis=1)[at]
        return [values[i] if values.shape[1] else None for i in range(len(at))], values

    def _alternating(self, totals: np.ndarray, changes: np.ndarray) -> np.ndarray:
        """Per window (rows of `parity_window` consecutive steps: global norms, median
        sample_change), whether one parity of steps holds sums of two gradients."""
        if self.accumulation_steps != 1 or totals.shape[1] < 4:
            return np.zeros(len(totals), dtype=bool)
        a, b, ta, tb = changes[:, 0::2], changes[:, 1::2], totals[:, 0::2], totals[:, 1::2]
        k = min(a.shape[1], b.shape[1])
        a, b, ta, tb = a[:, :k], b[:, :k], ta[:, :k], tb[:, :k]
        swap = (np.median(a, axis=1) > np.median(b, axis=1))[:, None]
        low, high = np.where(swap, b, a), np.where(swap, a, b)
        t_low, t_high = np.where(swap, tb, ta), np.where(swap, ta, tb)
        with np.errstate(invalid="ignore"):
            return (
                (low.max(axis=1) < np.minimum(high.min(axis=1), _SUM_OF_TWO))
                & (np.median(high, axis=1) >= 1.8 * np.median(low, axis=1))
                & (np.median(t_low, axis=1) >= 1.2 * np.median(t_high, axis=1))
            )

    def _parity_windows(self, seq: list[tuple[int, float, float]]) -> np.ndarray:
        """`_alternating` over every window of `seq` ((mode step, norm, change)); a window
        with a gap in the mode steps or a change missing is not judged."""
        w = self.parity_window
        if len(seq) < w:
            return np.zeros(0, dtype=bool)
        ms = np.array([m for m, _, _ in seq], dtype=np.int64)
        tot = np.array([t for _, t, _ in seq])
        chg = np.array([c for _, _, c in seq])
        view = np.lib.stride_tricks.sliding_window_view
        consecutive = (view(ms, w)[:, -1] - view(ms, w)[:, 0]) == w - 1
        ok = consecutive & np.isfinite(view(chg, w)).all(axis=1) & np.isfinite(view(tot, w)).all(axis=1)
        return ok & self._alternating(view(tot, w), view(chg, w))

    def _valid_changes(self, norms: dict[str, float], changes: dict[str, float]) -> float | None:
        """The median sample_change of the weight gradients of a step (`_stale_sum`), None when
        fewer than half of them have one."""
        weights = [n for n in norms if "bias" not in n.lower()] or list(norms)
        finite = [c for n in weights if math.isfinite(c := changes.get(n, math.nan))]
        return float(np.median(finite)) if 2 * len(finite) > len(weights) else None

    def _stale_candidate(
        self,
        names: list[str],
        inc: np.ndarray,
        total: np.ndarray,
        changes: np.ndarray,
        ms: np.ndarray,
        repeated: np.ndarray,
    ) -> int | None:
        """The first of the rows (steps check() judges) where `_stale_sum` may fire, screened
        with a margin for rounding (None: none)."""
        if "accumulating" in self._fired or not len(total):
            return None
        weight = np.array(["bias" not in n.lower() for n in names])
        weights = inc & weight[:, None]
        weights = np.where(weights.any(axis=0), weights, inc)  # no weight saved: every tensor
        finite = weights & np.isfinite(changes)
        valid = 2 * finite.sum(axis=0) > weights.sum(axis=0)
        if not valid.any():
            return None
        with np.errstate(all="ignore"):
            median = np.nanmedian(np.where(finite, changes, np.nan)[:, valid], axis=0)
        med = np.full(len(total), np.nan)
        med[valid] = median
        fresh = np.where(repeated, np.nan, med)  # the parity signal reads no repeated inputs
        seq = self._parity + [(int(m), float(t), float(c)) for m, t, c in zip(ms, total, fresh, strict=True)]
        hits = np.flatnonzero(self._parity_windows(seq))
        ends = hits + self.parity_window - 1 - len(self._parity)
        alternating = int(ends[ends >= 0][0]) if (ends >= 0).any() else None
        judged = np.where(repeated, med * self._full_batch_factor(), med)
        found = None if self._game else self._stale_window(total, judged, valid)
        return found if alternating is None else alternating if found is None else min(found, alternating)

    def _stale_window(self, total: np.ndarray, med: np.ndarray, valid: np.ndarray) -> int | None:
        """The first row where `_stale_sum`'s window may fire (see `_stale_candidate`)."""
        prior = self._changes
        seq_change = np.concatenate([[r[2] for r in prior], med])
        seq_total = np.concatenate([[r[1] for r in prior], total])
        seq_valid = np.concatenate([np.ones(len(prior), dtype=bool), valid])
        firsts = (self._first + total[:3].tolist())[:3]
        w = self.window
        if len(seq_valid) < w:
            return None
        windows = np.lib.stride_tricks.sliding_window_view
        full = windows(seq_valid, w).all(axis=1)
        with np.errstate(all="ignore"):
            change = np.median(windows(seq_change, w), axis=1)
            level = np.median(windows(seq_total, w), axis=1)
        ends = np.arange(w - 1, len(seq_valid)) - len(prior)  # the row each window ends at
        for i in np.flatnonzero(full & (ends >= 0) & (change < self.max_change * (1 + 1e-9))).tolist():
            p = int(ends[i])
            start = (
                float(np.median((self._first + total[: p + 1].tolist())[:3]))
                if p < 3
                else float(np.median(firsts))
            )
            if level[i] >= self.min_sum_growth * start * (1 - 1e-9) and start > 0:
                return p
            if held_norm(windows(seq_total, w)[i].tolist(), float(change[i]), margin=2.0):
                return p
        return None

    def _keep_stale_state(
        self,
        kept: list[int],
        row: Callable[[int], tuple[int, int, dict[str, float]]],
        changes: np.ndarray,
        inc: np.ndarray,
        names: list[str],
        repeated: np.ndarray,
    ) -> None:
        """`_first` and `_changes` as check() leaves them after the `kept` rows (`row(q)`: the
        step, mode step and norms of one); `changes`, `inc`: the sample_change of `names` at
        those rows and whether each has a norm there. Only what check() keeps is built: the
        first 3 norms, and the last `window` medians after the last row without one."""
        for q in kept[: max(0, 3 - len(self._first))]:
            self._first.append(math.sqrt(sum(v * v for v in row(q)[2].values())))
        weight = np.array(["bias" not in n.lower() for n in names])
        weights = inc & weight[:, None]
        weights = np.where(weights.any(axis=0), weights, inc)  # no weight saved: every tensor
        valid = 2 * (weights & np.isfinite(changes)).sum(axis=0) > weights.sum(axis=0)
        gaps = np.flatnonzero(~valid)
        start = int(gaps[-1]) + 1 if len(gaps) else 0
        if len(gaps):
            self._changes = []
        for t in range(max(start, len(kept) - max(self.window, self.parity_window)), len(kept)):
            step, ms, step_norms = row(kept[t])
            total = math.sqrt(sum(v * v for v in step_norms.values()))
            median = self._valid_changes(
                step_norms, {n: float(changes[i, t]) for i, n in enumerate(names) if n in step_norms}
            )
            if median is None:  # the screen above is exact; this keeps check()'s rule if not
                self._changes = []
                self._parity = []
            else:
                self._keep_change(step, ms, total, median, bool(repeated[t]))

    def _full_batch_factor(self) -> float:
        return self.max_change / self.max_full_batch_change if self.max_full_batch_change > 0 else math.inf

    def _keep_change(self, step: int, mode_step: int, total: float, median: float, repeated: bool) -> None:
        """Append a step's median sample_change to the stale-sum window (judged against
        `max_full_batch_change` where the inputs repeat the step before's: the same samples
        give a gradient that changes little) and, on fresh inputs only, to the parity run."""
        judged = median * self._full_batch_factor() if repeated else median
        self._changes.append((step, total, judged, median))
        del self._changes[: -self.window]
        if repeated:
            self._parity = []
            return
        if self._parity and self._parity[-1][0] != mode_step - 1:
            self._parity = []
        self._parity.append((mode_step, total, median))
        del self._parity[: -self.parity_window]

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        flags = trial.names(None, regex="^" + RESET, step=step) if self.observed else []
        if flags or self._observed:
            self._observed = True
            for name in flags:
                value = trial.saved_statistic(name, step, "sum")
                if isinstance(value, float) and math.isfinite(value):
                    self._count_update(name, step, value == 0)
            return self._carried_finding(trial, step)
        names = trial.names("gradients", regex=self.tensor_regex, step=step)
        norms = {
            n: v for n in names if isinstance(v := trial.statistic(n, step, "l2"), float) and math.isfinite(v)
        }
        if not norms:
            return None
        self._learn_fresh(trial, step, norms)
        stale = self._stale_sum(trial, step, norms) or self._raw_sum(trial, step, norms)
        if stale is not None:
            return stale
        mode_step = trial.mode_step(step)
        if self._run and (mode_step != self._run[-1][1] + 1 or set(norms) != set(self._run[-1][2])):
            self._run = []  # a gap in the statistics (or other tensors): start a new run of steps
        self._run.append((step, mode_step, norms))
        w = self._width()
        del self._run[:-w]
        found = self._accumulating(self._run)
        if found is None or not self._sum_possible() or not self.first("accumulating"):
            return None
        total, growth, grown, weights = found
        return self.finding(
            trial, step,
            f"the global gradient norm grew {growth:.1f}x over {w} consecutive training steps "
            f"({self._run[0][0]}-{step}: {', '.join(f'{v:.3g}' for v in total)}), rising at "
            f"{100 * rising_share(total):.0f}% of them, and {len(grown)} of {len(weights)} weight gradients "
            "grew with it: gradients accumulate across optimizer steps, as when optimizer.zero_grad() is missing",
            tensors=grown,
        )  # fmt: skip

    def _count_update(self, name: str, step: int, carried: bool) -> None:
        last = self._carried.setdefault(name, [])
        last.append((step, carried))
        del last[: -self.observed_window]

    def _carried_finding(self, trial: TrialView, step: int) -> Finding | None:
        """The finding where a model's last updates applied gradients not reset (`check`)."""
        for name, last in self._carried.items():
            carried = [s for s, c in last if c]
            if len(carried) < self.observed_carried or not self.first("observed"):
                continue
            model = name[len(RESET) :]
            grads = trial.names("gradients", regex=self.tensor_regex, step=step)
            if model != "model":
                grads = [g for g in grads if g.startswith(f"gradient/{model}.")]
            return self.finding(
                trial, step,
                f"{len(carried)} of the last {len(last)} updates of {model} (steps {last[0][0]}-{step}; "
                f"at steps {', '.join(map(str, carried))}) applied a gradient that had not been reset since "
                "the update before: when the next backward began, .grad still held the last update's "
                "gradient (neither None nor zero), so each update adds the old gradients again: "
                "optimizer.zero_grad() is missing, or called only every few steps",
                tensors=grads[:8] or [name],
            )  # fmt: skip
        return None

    def _observed_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """`check_columns` where the hook recorded `gradient_reset/`: every training step
        whose flags make no finding counted as `check` counts them; stops at the step where
        `check` fires."""
        self._observed = True
        if not len(steps):
            return 0
        train = trial.columns.modes(steps)[0] == int(Mode.TRAIN)
        seen: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        stop = len(steps)
        for name in trial.names(None, regex="^" + RESET):
            over = Over(trial, name, steps)
            value = over.stat("sum")
            at = np.flatnonzero(train & over.present & np.isfinite(value))
            carried = value[at] == 0
            seen[name] = (at, carried)
            if "observed" in self._fired:
                continue
            before = np.array([c for _, c in self._carried.get(name, [])], dtype=bool)
            every = np.concatenate([before, carried]).astype(np.int64)
            total = np.concatenate([[0], np.cumsum(every)])
            ends = np.arange(len(before), len(every)) + 1
            counts = total[ends] - total[np.maximum(0, ends - self.observed_window)]
            hit = np.flatnonzero(counts >= self.observed_carried)
            if hit.size:
                stop = min(stop, int(at[hit[0]]))
        for name, (at, carried) in seen.items():
            for i, c in zip(at.tolist(), carried.tolist(), strict=True):
                if i >= stop:
                    break
                self._count_update(name, int(steps[i]), bool(c))
        return stop

    def _learn_fresh(self, trial: TrialView, step: int, norms: dict[str, float]) -> None:
        """`_fresh_from` at a step read by `check`."""
        if self._fresh_done:
            return
        weights = [n for n in norms if "bias" not in n.lower()] or list(norms)
        got = {
            n: c for n in weights if isinstance(c := trial.saved_statistic(n, step, "sample_change"), float)
        }
        self._fresh_from(trial.mode_step(step), norms, got)

    def _fresh_from(self, mode_step: int, norms: dict[str, float], changes: dict[str, float]) -> None:
        """The fresh-gradient reference, from the first training steps (`norms`: the l2 of
        the gradients at train step `mode_step`, `changes`: their `sample_change`): at train
        step 0 every gradient is fresh (a sum or not); at steps 1-3, if gradients accumulate,
        the change since the step before is one fresh gradient again, so `sample_change` x
        norm over the norm at step 0 is about 1 (0.5-1.8 measured: two batches' gradients at
        nearly the same weights); if they are reset, the norm over the norm at step 0 is.
        Kept per weight gradient and step: |log| of each ratio. The one bookkeeping of both
        paths."""
        if self._fresh_done:
            return
        weights = [n for n in norms if "bias" not in n.lower()] or list(norms)
        if self._fresh_first is None:
            if mode_step != 0:
                self._fresh_done = True  # the run's first gradient was not recorded: no reference
            else:
                self._fresh_first = {n: norms[n] for n in weights}
            return
        if mode_step != self._fresh_last + 1:
            self._fresh_done = True  # not consecutive: the change spans several steps
            return
        self._fresh_last = mode_step
        first = self._fresh_first
        pairs = [
            (abs(math.log(c * norms[n] / first[n])), abs(math.log(norms[n] / first[n]))) for n in weights
            if first.get(n, 0.0) > 0 and norms[n] > 0 and math.isfinite(c := changes.get(n, math.nan)) and c > 0
        ]  # fmt: skip
        if 2 * len(pairs) <= len(weights):
            self._fresh_done = True
            return
        self._fresh += pairs
        self._fresh_steps += 1
        self._fresh_done = self._fresh_steps >= 3

    def _decay_from(self, mode_step: int, median: float | None) -> None:
        """Follow the first DECAY medians of `sample_change` (`decay`); a step after the first
        without one ends them (the first step has none)."""
        if not self._decay_open:
            return
        if median is None:
            self._decay_open = mode_step == 0
        elif mode_step > 0 and median > 0:
            self._decay.append((mode_step, median))
            self._decay_open = len(self._decay) < DECAY

    def _fresh_sized(self) -> bool:
        """False when the first changes refute a sum: if gradients accumulate (all of them, or
        every second one), each change is a fresh gradient, and at train steps 1-3 a fresh
        gradient weighs about what the first did; if they are reset, the recorded gradient
        is the fresh one and weighs that. A sum whose implied fresh gradients stray further
        from the first one's size than the recorded gradients do (a gradient that barely
        moves: full-batch training, a regression, their small `sample_change` and rising
        norm the fit's) is refuted: the differences |log a| - |log b| over the (weight
        gradient, step) pairs are positive in mean, significantly (a one-sided paired t-test
        at `FRESH_LEVEL`); where both hypotheses fit about as well (a BatchNorm CNN under
        Adam, its early gradients 25-30% from the first one's size either way), the signals
        decide."""
        d = np.array([a - b for a, b in self._fresh], dtype=np.float64)
        if len(d) < 3:
            return True
        sd = float(d.std(ddof=1))
        if sd == 0:
            return not float(d.mean()) > 0
        return float(d.mean()) / (sd / math.sqrt(len(d))) <= detect.t_quantile(FRESH_LEVEL, len(d) - 1)

    def _sum_possible(self) -> bool:
        """`_fresh_sized`, and the changes fall as a growing sum's do (`decay`, where known):
        the test of the two signals of a sum that is never reset (the parity signal's
        changes alternate instead)."""
        slope = self.decay()
        return self._fresh_sized() and (slope is None or slope <= self.sum_decay)

    def decay(self) -> float | None:
        """The slope of log(median sample_change) against log(train step + 1) over the first
        DECAY statistics steps (None: fewer than 4). If gradients accumulate, the gradient at
        train step t sums t + 1 fresh ones and its change is one fresh gradient: the change
        falls as (t + 1)^-1/2 (fresh gradients in random directions) to (t + 1)^-1 (aligned),
        a slope of -0.5 to -1. A fresh gradient changes by what the batch noise and the fit
        say, at any step: a slope near 0 (-0.3 to +0.4 on healthy CNNs, MLPs and regressions,
        at any batch size). `sum_decay` = -0.25 splits the two at the middle; a regression at
        batch 128 whose gradient changes by a steady 39% while its norm rises 1.5x fails it."""
        if len(self._decay) < 4:
            return None
        x = np.log(np.array([m for m, _ in self._decay], dtype=np.float64) + 1)
        y = np.log(np.array([c for _, c in self._decay], dtype=np.float64))
        if np.ptp(x) <= 0 or not np.isfinite(y).all():
            return None
        return float(np.polyfit(x, y, 1)[0])

    def _stale_sum(self, trial: TrialView, step: int, norms: dict[str, float]) -> Finding | None:
        """The sample_change signal (see the class doc); None until it holds."""
        total = math.sqrt(sum(v * v for v in norms.values()))
        if len(self._first) < 3:
            self._first.append(total)
        saved = {n: trial.saved_statistic(n, step, "sample_change") for n in norms}
        median = self._valid_changes(norms, {n: c for n, c in saved.items() if isinstance(c, float)})
        inputs, last = self._fingerprints(trial, step), self._inputs
        self._inputs = inputs
        if median is None:
            self._changes = []  # no statistic (a raw or older run), or not since the last step
            self._parity = []
            self._decay_from(trial.mode_step(step), None)
            return None
        self._decay_from(trial.mode_step(step), median)
        weights = [n for n in norms if "bias" not in n.lower()] or list(norms)
        repeated = inputs is not None and last is not None and np.array_equal(inputs, last)
        self._keep_change(step, trial.mode_step(step), total, median, repeated)
        if self._parity_windows(self._parity).any() and self._fresh_sized() and self.first("accumulating"):
            seq = self._parity
            low = sorted(seq[0::2] if seq[0][2] < seq[1][2] else seq[1::2], key=lambda r: r[0])
            return self.finding(
                trial, step,
                f"over {len(seq)} consecutive training steps (train steps {seq[0][0]}-{seq[-1][0]}) every second "
                f"gradient changed by a median {100 * float(np.median([c for _, _, c in low])):.0f}% of its norm "
                f"from the step before, and the others by "
                f"{100 * float(np.median([c for m, _, c in seq if (m - low[0][0]) % 2])):.0f}%, with a larger "
                "norm at the first: every second gradient is the sum of two, as when optimizer.zero_grad() "
                "is called only every other step",
                tensors=weights,
            )  # fmt: skip
        if len(self._changes) < self.window or not self._first:
            return None
        change = float(np.median([r[2] for r in self._changes]))
        start = float(np.median(self._first))
        level = float(np.median([r[1] for r in self._changes]))
        # a held norm: its direction turned less than `max_change` at every step of the window
        held = max(r[2] for r in self._changes) < self.max_change and held_norm(
            [r[1] for r in self._changes], change
        )
        if change >= self.max_change or not (held or level >= self.min_sum_growth * start > 0):
            return None
        if self._game is None:
            self._game = adversarial(trial, [r[0] for r in self._changes])
        if self._game or not (held or self._sum_possible()) or not self.first("accumulating"):
            return None
        if held:
            return self.finding(
                trial, step,
                f"over {self.window} training steps ({self._changes[0][0]}-{step}) the global gradient norm "
                f"was held at {level:.4g} by gradient clipping at every step while the weight gradients "
                f"changed by a median {100 * float(np.median([r[3] for r in self._changes])):.0f}% of their "
                f"norm from one step to the next, less than {100 * self.max_change:g}% at every step "
                "(a fresh gradient rescaled by the clip changes its direction "
                "by 60-200%): each gradient is a clipped sum that a fresh batch barely turns, as when "
                "optimizer.zero_grad() is missing",
                tensors=[n for n in norms if "bias" not in n.lower()] or list(norms),
            )  # fmt: skip
        full = (
            f"mini-batch gradients differ by 60-200%; {sum(r[2] != r[3] for r in self._changes)} of these steps "
            f"read the same samples as the step before, judged against {100 * self.max_full_batch_change:g}%"
            if any(r[2] != r[3] for r in self._changes)
            else "mini-batch gradients differ by 60-200%"
        )
        return self.finding(
            trial, step,
            f"over {self.window} training steps ({self._changes[0][0]}-{step}) the weight gradients "
            f"changed by a median {100 * float(np.median([r[3] for r in self._changes])):.0f}% of their norm "
            f"from one saved step to the next ({full}), while the global gradient norm stood at "
            f"{level / start:.1f}x its first value ({start:.3g} -> {level:.3g}): each gradient is a growing "
            "sum that a fresh batch barely changes, as when optimizer.zero_grad() is missing",
            tensors=weights,
        )  # fmt: skip

    def _raw_sum(self, trial: TrialView, step: int, norms: dict[str, float]) -> Finding | None:
        """The change between saved raw gradients, at any gap between them (see the class doc)."""
        weights = [n for n in norms if "bias" not in n.lower()] or list(norms)
        now: dict[str, np.ndarray] = {}
        for n in weights:
            raw = trial.raw(n, step)
            if raw is None:
                self._raw_prev, self._raw_run = {}, []  # statistics only: not this path
                return None
            flat = np.asarray(raw, dtype=np.float64).reshape(-1)
            if flat.size > 4096:
                flat = flat[np.linspace(0, flat.size - 1, 4096).astype(np.int64)]
            now[n] = flat
        total = math.sqrt(sum(v * v for v in norms.values()))
        changes = [
            float(np.linalg.norm(now[n] - self._raw_prev[n]) / size)
            for n in weights
            if n in self._raw_prev and self._raw_prev[n].shape == now[n].shape
            and (size := float(np.linalg.norm(now[n]))) > 0
        ]  # fmt: skip
        self._raw_prev = now
        mode_step, gap = trial.mode_step(step), trial.mode_step(step) - self._raw_gap_from
        self._raw_gap_from = mode_step
        if 2 * len(changes) <= len(weights):
            self._raw_run = [(step, total, math.nan)]
            return None
        if self._raw_run and not 2 <= gap <= _RAW_MAX_GAP:
            self._raw_run = [
                (step, total, math.nan)
            ]  # consecutive: the norms' own path; far apart: unrelated
            return None
        self._raw_run.append((step, total, float(np.median(changes))))
        del self._raw_run[: -self.raw_window]
        if len(self._raw_run) < self.raw_window:
            return None
        totals = [t for _, t, _ in self._raw_run]
        first, last = totals[0], total
        change = float(np.median([c for _, _, c in self._raw_run[1:]]))
        if not (first > 0 and last >= self.min_growth * first and change < self.max_raw_change):
            return None
        if min(b / a for a, b in zip(totals, totals[1:], strict=False)) < 1 - _MAX_DROP:
            return None  # a sum of many gradients barely shrinks between saved steps
        if not self.first("accumulating"):
            return None
        return self.finding(
            trial, step,
            f"over {self.raw_window} saved training steps ({self._raw_run[0][0]}-{step}) the global gradient "
            f"norm grew {last / first:.1f}x ({', '.join(f'{t:.3g}' for _, t, _ in self._raw_run)}) while the "
            f"weight gradients changed by a median {100 * change:.0f}% of their norm from one saved step to "
            "the next (fresh mini-batch gradients differ by 100-200%): each gradient is a growing sum, as "
            "when optimizer.zero_grad() is missing",
            tensors=weights,
        )  # fmt: skip


def held_norm(totals: list[float], change: float, margin: float = 1.0) -> bool:
    """Whether global norms `totals` were held at one value by clipping (`GradientNotReset`):
    a relative spread below `HELD` and below 1% of the median `change` of their direction
    (`margin` > 1 widens both, for a screen)."""
    if len(totals) < 2 or not all(math.isfinite(t) for t in totals):
        return False
    mid = float(np.median(totals))
    if not mid > 0:
        return False
    spread = (max(totals) - min(totals)) / mid
    return spread < margin * HELD and spread < margin * 0.01 * change
