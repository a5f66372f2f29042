"""unchanged_tensor: a tensor that should change does not."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from mldbg.config import Mode
from mldbg.errors import TensorUnavailableForStep
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix, selected_all
from mldbg.rules.losses import warming_up
from mldbg.rules.select import gradient_names, needed, selected, short_list
from mldbg.rules.updates import gate_opening, held, held_at, idle_tail, rounds_away
from mldbg.rules.view import TrialView

_DEFAULT = ("weights", "biases")
_REDUCTIONS = (("mean", False), ("l2", False), ("max", False), ("min", False), ("mean", True), ("std", False))
_NEGLIGIBLE = 1e-6  # mean|gradient| / mean|weight| below this: no update was expected
# mean|gradient| below this, or below _NEGLIGIBLE x the median of the net's gradients: float
# noise (an attention's key bias: softmax is invariant to it), not a gradient to follow
_NOISE = 1e-10


@dataclass(frozen=True)
class _Change:
    """A statistics-only step: |x - x_prev| (`delta_l2`) and |x| (`l2`) as the hook saved them;
    `since`: the global step of the tensor's previous record, which the change is measured from
    (-1: none), and `span`: the training steps between the two (1 unless both are TRAIN steps)."""

    delta: float
    l2: float
    since: int = -1
    span: int = 1


def _measured_from(trial: TrialView, name: str, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For the records of `name` at global `steps`: the global step of each one's previous
    record (-1: none), which its `delta_l2` is measured from, and the training steps between
    the two (1 unless both are TRAIN steps)."""
    since, span = np.full(len(steps), -1, dtype=np.int64), np.ones(len(steps), dtype=np.int64)
    cols = trial.columns.tensor(name)
    if cols is None or not len(cols.steps) or not len(steps):
        return since, span
    i = np.searchsorted(cols.steps, steps) - 1
    has = i >= 0
    since[has] = cols.steps[i[has]]
    modes, now = trial.columns.modes(steps)
    train = has & (modes == int(Mode.TRAIN))
    train[train] = cols.mode[i[train]] == int(Mode.TRAIN)
    if train.any():
        _, then = trial.columns.modes(since[train])
        span[train] = np.maximum(now[train] - then, 1)
    return since, span


def _mean_abs(trial: TrialView, name: str, step: int) -> float | None:
    """mean |x| of a tensor; from the RMS (sqrt(variance + mean^2), never smaller) when only
    those statistics were saved, as a two-line hook does for weights."""
    m = trial.statistic(name, step, "mean_abs")
    if isinstance(m, float):
        return m
    var, mean = trial.statistic(name, step, "variance"), trial.statistic(name, step, "mean")
    if isinstance(var, float) and isinstance(mean, float):
        return math.sqrt(max(var, 0.0) + mean * mean)
    return None


@register
class UnchangedTensor(Rule):
    """A tensor is unchanged (`allclose` with `rtol`, `atol`, `equal_nan`) over its last
    `num_steps` saved steps.

    By default the parameters (`weights`, `biases`) on training steps: if they do not move
    although their gradients are not zero, the optimizer is not updating them (no
    `optimizer.step()`, a learning rate of 0, an optimizer built on other parameters). A
    parameter with no gradient (frozen on purpose) or a negligible one (a bias before
    BatchNorm) is not reported, nor one whose gradient is float noise (mean |g| below 1e-10, or
    a millionth of the net's median gradient: an attention's key bias, to which softmax is
    invariant). A parameter that gets a gradient is reported only when it did not move at all
    (within `atol`, `rtol` aside): a step below `rtol` is still an update (a small learning rate,
    or one a schedule decays to 0, on a LayerNorm weight of 1), while a parameter the optimizer
    does not update keeps its exact value. Without raw tensors it reads the `delta_l2` statistic (the
    change since the hook's previous step): unchanged when delta_l2 <= atol + rtol * l2; and
    from saved reductions too (all of them unchanged). A change the hook measured over several
    training steps (statistics every k-th step) counts for each of them: no change over the
    last `num_steps` - 1 training steps is as many unchanged saved steps, so a tensor that stops
    moving mid-run is seen at the first statistics step after it stopped, not `num_steps` - 1
    statistics steps later.

    A run that converged is not reported: when the parameters stand still and every loss
    saved at the step is the same number, to the bit, as at the previous saved training
    step, though not as at the first (the loss fell, then nothing moved: L-BFGS that met its
    tolerance on a full batch). Mini-batch losses differ every step, so an optimizer whose
    learning rate became 0, or a head it does not hold, is still reported.

    Nor is a parameter behind a gate initialized at 0 that is opening (`gate_opening`: its
    gradient exactly 0 at the first saved step, above 0 now, and within 10 saved steps or
    still rising: a significant upward trend over its last 10 saved steps that at least
    doubled it): behind ResNet's zero-init of the last BN gamma of each block, under a
    warm-up's small learning rate, its update rounds to nothing next to a weight of 1 in
    float32 until the gradient has grown. It is judged once the rise stops. Nor one whose updates were below
    what float32 shows next to it (`rounds_away`: the recorded learning rate x its gradient x
    10 for momentum below 2^-25 x its RMS, while other weights move): the optimizer applied
    them and rounding kept them (a learning rate of 1e-10 rounds every update away: reported).

    Gradient accumulation (PyTorch's optimizer.step() every k micro-batches, optax.MultiSteps,
    Keras' gradient_accumulation_steps) leaves every parameter unchanged at k - 1 of every k
    steps by design. A step where no parameter moved, within the run's own longest interval
    between two moves (before the first move: within `ACCUMULATION_MAX` = 16 steps), is
    `held`: left out of the window, so a parameter is judged over the steps that apply the
    accumulated update. A model still for longer (an optimizer that stopped, a learning rate
    of 0 from the start: reported 16 steps in) is not held, nor any step of a run whose hook
    ends each step at the optimizer's step (PyTorch's: a loop that accumulates steps its
    optimizer every k backwards and the hook counts those steps; a learning rate of 0, an
    optimizer built on other parameters are reported at once).

    A PyTorch step where no optimizer stepped and nothing moved (`held`: EWC's Fisher
    estimate, TRAIN forwards and backwards between tasks) is held too; a run that ends in
    such steps with the training loss still computed at each (the loop no longer calls
    optimizer.step()) is reported when it ends (`finish`).
    """

    needs = _DEFAULT
    reads = {c: ("delta_l2", "l2") for c in _DEFAULT}
    needs_any = True
    collection_names: list[str] | None = None
    tensor_regex: list[str] | None = None
    num_steps: int = 3
    rtol: float = 1e-5
    atol: float = 1e-8
    equal_nan: bool = False
    suggestion = (
        "Check that optimizer.step() is called every step, that the optimizer was built with "
        "model.parameters() (after moving the model to its device), that the learning rate is not "
        "0, and that the tensor is not detached from the graph."
    )

    def reset(self) -> None:
        super().reset()
        self._history: dict[str, list[tuple[int, object]]] = {}  # per tensor, its last (step, snapshot)s
        self._typical_at: tuple[int, float] = (-1, 0.0)  # (step, median mean|gradient| there)

    def needed_collections(self) -> tuple[str, ...]:
        return needed(self.collection_names, self.tensor_regex, _DEFAULT)

    def check(self, trial: TrialView, step: int) -> Finding | None:
        params = not self.collection_names and not self.tensor_regex
        if params and trial.mode(step) != Mode.TRAIN:
            return None  # weights do not change in evaluation
        if params and held(trial, step):
            return None  # accumulating gradients: no update was due (judged at the steps that apply one)
        names = selected(trial, step, self.collection_names, self.tensor_regex, _DEFAULT)
        if not names:
            return None
        grads = gradient_names(trial) if trial.has_collection("gradients") else {}
        grads_here = bool(grads) and bool(trial.names("gradients", step=step))
        stuck = []
        for name in names:
            if not params and self._mode_mismatch(trial, name, step):
                continue
            snap = self._snapshot(trial, name, step)
            if snap is None:
                continue
            hist = self._history.setdefault(name, [])
            hist.append((step, snap))
            if len(hist) > self.num_steps:
                hist.pop(0)
            window = len(hist) >= max(2, self.num_steps) and all(
                self._same(hist[0][1], h[1]) for h in hist[1:]
            )
            run = None if window else self._still_run(hist)  # or changes of 0 over enough training steps
            if not window and run is None:
                continue
            if params and grads_here:
                g = grads.get(name)
                if g is None or not all(
                    self._pushed(trial, grads, g, name, at) for at in self._covered(hist, run, step)
                ):
                    continue  # no gradient at a step whose update the window covers: nothing to apply
                if not (
                    all(self._same(hist[0][1], h[1], exact=True) for h in hist[1:])
                    if run is None
                    else self._still_run(hist, exact=True) is not None
                ):
                    continue  # moved, though by less than rtol: updated
            stuck.append((name, hist[0][0] if run is None else run, run is not None))
        stuck = [s for s in stuck if s[0] not in self._fired and not self._at_zero(trial, s[0], step)]
        if params and grads_here:  # waking: its update rounds to nothing until its gradient has grown
            stuck = [
                s for s in stuck
                if not gate_opening(trial, grads[s[0]], step) and not rounds_away(trial, s[0], grads[s[0]], step, s[1])
            ]  # fmt: skip
        if stuck and params and self._converged(trial, step):
            return None  # nothing moved, the loss included, after it had: a converged run
        if stuck and params and warming_up(trial, step):
            return None  # a learning rate warming up from near 0 moves parameters by less than rtol
        stuck = [s for s in stuck if self.first(s[0])]
        if not stuck:
            return None
        names_ = [n for n, _, _ in stuck]
        since = min(s for _, s, _ in stuck)
        why = " although their gradients are not zero" if params and grads_here else ""
        tol = f"allclose rtol={self.rtol:g}, atol={self.atol:g}"
        over = (
            f"from step {since} to step {step} (every change the hook measured since, {tol})"
            if all(by_span for _, _, by_span in stuck)
            else f"over the last {self.num_steps} saved steps (steps {since}-{step}, {tol})"
        )
        return self.finding(
            trial, step,
            f"{len(names_)} tensor{'s' if len(names_) > 1 else ''} unchanged {over}{why}: {short_list(names_)}",
            tensors=names_,
        )  # fmt: skip

    def finish(self, trial: TrialView) -> Finding | None:
        """The run ended in steps where no optimizer stepped and nothing moved (`held`, no
        learning rate recorded), the training loss still computed at each of them: the loop
        went on training without updates (an optimizer.step() that stopped being called).
        Such steps mid-run, followed by updates again, are an interlude (EWC's Fisher
        estimate), and a tail without the training loss is no training (gradients taken for
        a Fisher estimate or a saliency map after the last update)."""
        if self.collection_names or self.tensor_regex:
            return None
        tail = idle_tail(trial)
        if tail is None or tail[2] < max(2, self.num_steps):
            return None
        first, last, count = tail
        steps = [s for s in trial.steps(Mode.TRAIN) if first <= s <= last]
        if not all(trial.names("losses", step=s) for s in steps):
            return None
        names = [n for n in selected(trial, last, None, None, _DEFAULT) if self.first(n)]
        if not names:
            return None
        return self.finding(
            trial, last,
            f"{len(names)} tensor{'s' if len(names) > 1 else ''} unchanged from step {first} to step {last}, "
            f"the run's last measured training step ({count} saved steps): the training loss was computed at "
            f"each of them, but no optimizer stepped (no learning rate recorded) and no parameter moved: "
            f"{short_list(names)}",
            tensors=names,
        )  # fmt: skip

    def _covered(self, hist: list[tuple[int, object]], run: int | None, step: int) -> list[int]:
        """The saved steps whose gradients the optimizer applied in the updates the unchanged
        window spans: the weight saved at a step is the one its forward read, so the update
        after step t shows at the next save. The window's steps but its last; for a run of
        changes measured over several steps, the step each change is measured from. Where
        none is known, the step itself (the gradient that is there now)."""
        if run is None:
            steps = [at for at, _ in hist[:-1]]
        else:
            steps = []
            for at, change in reversed(hist):
                if not isinstance(change, _Change) or not self._same(None, change):
                    break
                steps.append(change.since if change.since >= 0 else at)
        return steps or [step]

    def _pushed(self, trial: TrialView, grads: dict[str, str], g: str, name: str, at: int) -> bool:
        """Whether the parameter `name` had a gradient to apply at step `at`: its gradient `g`
        saved there, not negligible next to the weight (1e-6 of mean |w|: a bias before
        BatchNorm) nor float noise (1e-10, or 1e-6 of the net's median gradient: an
        attention's key bias). A step where no gradient was saved at all says nothing: True.
        An expert of a mixture that got no token at that step has no gradient (PyTorch leaves
        it None, Adam skips it): its weights standing still are not stuck."""
        if not trial.tensor(g).has_step(at):
            return not trial.names("gradients", step=at)
        gmean, wmean = _mean_abs(trial, g, at), _mean_abs(trial, name, at)
        if gmean is None or wmean is None or not gmean > _NEGLIGIBLE * max(wmean, 1e-12):
            return False
        return not (gmean < _NOISE or gmean < _NEGLIGIBLE * self._typical_gradient(trial, grads, at))

    def _trailing_still(self, hist: list[tuple[int, object]], exact: bool = False) -> tuple[int, int]:
        """The training steps the history's trailing unchanged changes cover, and the step the
        first of them is measured from (where the value was last seen moving)."""
        covered, begun = 0, -1
        for step, change in reversed(hist):
            if not isinstance(change, _Change) or not self._same(None, change, exact):
                break
            covered, begun = covered + change.span, change.since if change.since >= 0 else step
        return covered, begun

    def _still_run(self, hist: list[tuple[int, object]], exact: bool = False) -> int | None:
        """Where the trailing unchanged changes begin when they cover `num_steps` - 1 training
        steps or more; else None."""
        covered, begun = self._trailing_still(hist, exact)
        return begun if covered >= max(1, self.num_steps - 1) else None

    def _at_zero(self, trial: TrialView, name: str, step: int) -> bool:
        """A tensor at 0 (a bias or a BatchNorm shift still at its init): allclose falls back
        to `atol` alone, an absolute bar its tiny gradient's update may pass under, so its
        stillness says nothing about whether it is updated."""
        l2 = trial.statistic(name, step, "l2")
        layout = trial.layout(name, step)
        n = max(1, math.prod(layout[1])) if layout is not None else 1
        return isinstance(l2, float) and l2 <= self.atol * math.sqrt(n) * 100

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The parameters' leading training `steps` where no tensor has been unchanged for
        `num_steps` saved steps, from the saved `delta_l2` and `l2` (a step with only raw
        values or reductions ends them); their changes join the history as in `check`.
        Declines for `collection_names` / `tensor_regex` (compared within modes)."""
        if self.collection_names or self.tensor_regex:
            return 0
        w = self.num_steps
        # steps where the run accumulates gradients (`held`): check() leaves them out
        interesting = held_at(trial, steps)
        adds: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        for name in selected_all(trial, None, None, _DEFAULT):
            over = Over(trial, name, steps)
            rows = over.present & (over.mode == int(Mode.TRAIN))
            if not rows.any():
                continue
            delta, l2 = over.stat("delta_l2"), over.stat("l2")
            change = rows & ~over.raw & ~np.isnan(delta) & ~np.isnan(l2)
            interesting |= rows & ~change  # a raw value, reductions, an ambiguous NaN: check() reads
            idx = np.flatnonzero(change)
            if not len(idx):
                continue
            still = delta[idx] <= self.atol + self.rtol * np.abs(l2[idx])
            since, span = _measured_from(trial, name, steps[idx])
            hist = self._history.get(name, [])
            e = len(hist)
            # the entry at position p of history + new is judged on the window ending there:
            # unchanged when every entry after the window's first is `still` (b is a _Change)
            k = np.arange(len(idx))
            end = e + k + 1
            size = np.minimum(end, w)
            stuck = size >= max(2, w)
            notstill = np.concatenate([[0], np.cumsum(~still)])
            first_new = np.maximum(end - size + 1, e)  # window entries from history + 1 on
            stuck &= notstill[k + 1] - notstill[first_new - e] == 0
            for j in range(min(len(idx), w)):  # windows that begin in the history
                old = [h[1] for h in hist[max(0, e + j + 1 - w) :]]
                if stuck[j] and old:
                    stuck[j] = all(self._same(old[0], b) for b in old[1:])
            # or the trailing unchanged changes cover num_steps - 1 training steps (_still_run);
            # a run back to the first new change continues the history's own
            last = np.maximum.accumulate(np.where(still, -1, k))
            covered = np.concatenate([[0], np.cumsum(np.where(still, span, 0))])
            run = covered[k + 1] - covered[last + 1] + np.where(last < 0, self._trailing_still(hist)[0], 0)
            stuck |= still & (run >= max(1, w - 1))
            if name not in self._fired:
                interesting[idx[stuck]] = True
            adds.append((name, idx, delta[idx], l2[idx], since, span))
        n = quiet_prefix(interesting)
        for name, idx, delta, l2, since, span in adds:
            take = np.flatnonzero(idx < n)[-w:]  # the history keeps the last `w` changes
            if not len(take):
                continue
            hist = self._history.setdefault(name, [])
            hist.extend(
                (int(s), _Change(float(d), float(v), int(f), int(c)))
                for s, d, v, f, c in zip(
                    steps[idx[take]].tolist(),
                    delta[take].tolist(),
                    l2[take].tolist(),
                    since[take].tolist(),
                    span[take].tolist(),
                    strict=True,
                )
            )
            del hist[: max(0, len(hist) - w)]
        return n

    def _converged(self, trial: TrialView, step: int) -> bool:
        """Every loss saved at `step` is the same number, to the bit, as at its previous saved
        training step, and not as at its first: the run's loss moved, then a step changed
        nothing (an optimizer such as L-BFGS that met its tolerance on a full batch). An
        optimizer that stopped updating on mini-batches sees losses that differ every step;
        one that never updated, on a full batch, one loss from the start."""
        names = trial.names("losses", step=step)
        if not names:
            return False
        for name in names:
            train = [s for s in trial.tensor(name).steps() if trial.mode(s) == Mode.TRAIN]
            i = bisect.bisect_left(train, step) - 1
            if i < 1:
                return False
            now = trial.statistic(name, step, "mean")
            then = trial.statistic(name, train[i], "mean")
            start = trial.statistic(name, train[0], "mean")
            if not (isinstance(now, float) and isinstance(then, float) and isinstance(start, float)):
                return False
            if now != then or start == now:
                return False
        return True

    def _typical_gradient(self, trial: TrialView, grads: dict[str, str], step: int) -> float:
        """The median mean |g| of the net's gradients at `step` (0 when none is readable)."""
        if self._typical_at[0] != step:
            sizes = [
                m for g in grads.values() if trial.tensor(g).has_step(step)
                for m in (_mean_abs(trial, g, step),) if m is not None and math.isfinite(m)
            ]  # fmt: skip
            self._typical_at = (step, float(np.median(sizes)) if sizes else 0.0)
        return self._typical_at[1]

    def _mode_mismatch(self, trial: TrialView, name: str, step: int) -> bool:
        """Compare a tensor within one mode: TRAIN when it has training steps."""
        return trial.mode(step) != Mode.TRAIN and bool(trial.tensor(name).steps(Mode.TRAIN))

    def _snapshot(self, trial: TrialView, name: str, step: int) -> object | None:
        raw = trial.raw(name, step)
        if raw is not None:
            return raw.copy()
        delta = trial.saved_statistic(name, step, "delta_l2")
        l2 = trial.saved_statistic(name, step, "l2")
        if isinstance(delta, float) and isinstance(l2, float) and not math.isnan(delta):
            since, span = _measured_from(trial, name, np.asarray([step], dtype=np.int64))
            return _Change(delta, l2, int(since[0]), int(span[0]))
        saved = trial.saved_reductions(name, step)
        if saved:
            return tuple(v for _, v in sorted(saved.items()))
        vals = []
        for red, is_abs in _REDUCTIONS:
            try:
                vals.append(trial.tensor(name).reduction_value(step, red, is_abs))
            except TensorUnavailableForStep:
                continue
        return tuple(vals) or None

    def _same(self, a: object, b: object, exact: bool = False) -> bool:
        """allclose(a, b) with `rtol` and `atol`; `exact`: within `atol` alone (rtol 0)."""
        rtol = 0.0 if exact else self.rtol
        if isinstance(b, _Change):  # the hook measured the change up to b's step
            return b.delta <= self.atol + rtol * abs(b.l2)
        if isinstance(a, _Change):  # a raw step after statistics-only ones: no value to compare
            return False
        if isinstance(a, tuple) and isinstance(b, tuple):
            return len(a) == len(b) and all(
                (x != x and y != y and self.equal_nan) or abs(x - y) <= self.atol + rtol * abs(y)
                for x, y in zip(a, b, strict=True)
            )
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return False
        if a.dtype.kind not in "fc" or b.dtype.kind not in "fc":
            return bool(np.array_equal(a, b))
        return bool(np.allclose(a, b, rtol=rtol, atol=self.atol, equal_nan=self.equal_nan))
