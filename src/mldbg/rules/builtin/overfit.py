"""overfit: the validation loss parts from the training loss."""

from __future__ import annotations

import math

import numpy as np

from mldbg.rules import detect
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import NEVER, loss_prefix
from mldbg.rules.losses import Evaluation, LossTracker, train_level
from mldbg.rules.view import TrialView
from mldbg.store.run_info import read_run_info

NOISE_PASSES = (6, 51)  # the evaluations `pass_noise` needs, and the most recent it reads


def pass_noise(values: list[float]) -> float:
    """The noise of one evaluation pass's loss about the validation curve: the robust spread
    of the changes from pass to pass (`detect.MAD_SCALE` x their median absolute deviation
    from their median, over sqrt 2), so that a steady trend, however steep, is no noise; 0 before
    `NOISE_PASSES[0]` passes. A small or changing validation set (a walk-forward evaluation
    of each next period) scatters its loss from pass to pass, and the best of such a series
    is its luckiest pass: a later one above it is no rise."""
    if len(values) < NOISE_PASSES[0]:
        return 0.0
    d = np.diff(np.asarray(values, dtype=np.float64))
    return float(detect.MAD_SCALE * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


EARLY_STOPPING = "early_stopping"  # the hooks' record of a training that stops early or keeps its best model
# the PyTorch hook's record of a model's `state_dict()` taken in an evaluation step
STATE_TAKEN = "state_taken/"


@register
class Overfit(Rule):
    """The model fits the training set and stops generalizing: at `patience` consecutive
    evaluations (after `start_step`), the validation loss is above its best so far by more
    than `rise` of what it had gained from its first value to that best (a validation loss
    that levels off and wavers, as a booster's does in the rounds before early stopping ends
    it, is not one that rises) and by more than 3 x the noise of one pass (`pass_noise`), the
    training loss is below its level at that best (the model went on fitting the training
    set: a validation loss that rose with the training loss, as a walk-forward evaluation's
    does when the next quarter's data is more volatile, is harder data, not a gap opening), and
    (validation - training) / training exceeds `ratio_threshold` and the gap is more than
    `gap_threshold` of the first validation loss.

    The gap means something only between two measures of one loss: where the first validation
    value is below `comparable` x the training loss then, or the two differ in sign (a
    Gaussian NLL trained, a holdout MSE validated: the NLL goes below zero as its variances
    shrink, the MSE stays small and positive), the validation series is another quantity, and
    the rule says it cannot judge it rather than read a gap between them.

    SageMaker's condition alone, (val - train) / train > 0.1, fires on almost every healthy
    run: a validation loss above the training loss is normal, and the ratio explodes as the
    training loss nears 0. A model overfits when the validation loss stops improving while
    the gap keeps a sizeable share of the loss scale (the first validation loss, ~ln(classes)
    for cross-entropy). Validation values are the mean over each evaluation pass (EVAL steps),
    smoothed as the median of the last 3 evaluations (a single spike is instability, not
    overfitting); the training value is the median of the last `window` training losses
    before it. `patience` is 2, not SageMaker's 1, for the same reason.

    Under early stopping (the run says so: XGBoost's run description holds the best
    iteration its early-stopping callback marks; the Keras, Lightning and Hugging Face hooks
    record `early_stopping` where the training stops early or keeps its best model by a
    validation metric: Keras' `EarlyStopping` or `ModelCheckpoint(save_best_only=True)`,
    Lightning's `EarlyStopping` or a `ModelCheckpoint` that monitors a metric, the `Trainer`'s
    `load_best_model_at_end`; a PyTorch script that takes its model's `state_dict()` after
    the passes that lower the validation loss and not after the others, `_keeps_best`), the
    rounds past the best are the stopper's patience, trained by
    design and cut off from the model it keeps: a validation loss that rises there is the
    stopper doing its job. Then the rule reports only a model that never generalized, whose
    validation loss gained less than `early_stopping_gain` of what the training loss gained
    (shuffled labels: the training loss falls as the trees memorize, the validation loss never
    beats its first value), since the best iteration it keeps is no model either.
    """

    needs = ("losses", "scalars")
    needs_any = True
    start_step: int = 0
    patience: int = 2
    ratio_threshold: float = 0.1
    gap_threshold: float = 0.25
    rise: float = 0.05
    window: int = 10
    early_stopping_gain: float = 0.1
    comparable: float = 0.25
    use_losses_collection: bool = True
    tensor_regex: list[str] | None = None
    suggestion = (
        "Stop earlier (early stopping on the validation loss), get more training data or augment "
        "it, add regularization (weight decay, dropout), or use a smaller model; if the labels "
        "could be wrong or shuffled, check them."
    )

    def reset(self) -> None:
        super().reset()
        self._tracker = LossTracker(self.use_losses_collection, self.tensor_regex)
        self._state: dict[str, dict] = {}  # per validation loss: its best, streak...
        self._trial: TrialView | None = None  # the run judged (`_early_stopping` reads its description)
        self._early = False  # the run trains with early stopping (known once it says so)

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading training `steps` (no evaluation pass to close): their losses join the
        training series from the columns; `check` takes the evaluation steps."""
        self._trial = trial
        return loss_prefix(
            trial, self._tracker, steps, 1, NEVER, quiet_close=self._quiet_close, closed=self._closed
        )

    def _quiet_close(self, name: str, has_train: bool) -> bool:
        """Closing the open evaluation pass of `name` reports nothing (the fast path)."""
        got = self._advance(name, self._tracker._open[name])
        return got is None or got[2] is None or got[0]["streak"] < self.patience or name in self._fired

    def _closed(self, name: str, ev: Evaluation) -> None:
        """A pass the fast path closed: the state `check` keeps."""
        got = self._advance(name, ev)
        if got is not None:
            self._state[name] = got[0]

    def check(self, trial: TrialView, step: int) -> list[Finding]:
        self._trial = trial
        _, _, closed = self._tracker.update(trial, step)
        return [f for name, ev in closed if (f := self._judge(trial, name, ev))]

    def finish(self, trial: TrialView) -> list[Finding]:
        self._trial = trial
        return [f for name, ev in self._tracker.close_all() if (f := self._judge(trial, name, ev))]

    def unchecked(self) -> str | None:
        if not self._tracker.evals:
            return "no validation loss: it needs losses saved in EVAL mode (evaluation passes)"
        if not self._tracker.train:
            return "no training loss to compare the validation loss with"
        return None

    def undecided(self) -> str | None:
        apart = [st["apart"] for st in self._state.values() if st.get("apart")]
        if apart and len(apart) == len(self._tracker.evals):
            return "; ".join(apart)
        return self._tracker.shortfall(max(2, self.patience), evaluations=True)

    def _advance(self, name: str, ev: Evaluation) -> tuple[dict, float, float | None, float, float] | None:
        """The state of `name` after judging the pass `ev` (the rule's own is left as it is), the
        validation value, the training level (None: none to compare), the ratio and the gap's
        share; None when the pass is not judged."""
        if ev.last_step < self.start_step or not math.isfinite(ev.value):
            return None
        old = self._state.get(name) or {
            "best": math.inf,
            "best_step": None,
            "first": None,
            "streak": 0,
            "recent": [],
            "passes": [],
            "bests": (),
            "count": 0,
            "lowest": math.inf,
        }
        st = dict(old)
        # the last steps of the passes whose own value was the lowest yet, of how many (`_keeps_best`)
        st["bests"] = old["bests"] + (ev.last_step,) if ev.value <= old["lowest"] else old["bests"]
        st["count"] = old["count"] + 1
        st["lowest"] = min(old["lowest"], ev.value)
        st["recent"] = (old["recent"] + [ev.value])[-3:]
        st["passes"] = (old["passes"] + [ev.value])[-NOISE_PASSES[1] :]
        v = sorted(st["recent"])[len(st["recent"]) // 2]  # median of the last 3: one spike is not a trend
        t = train_level(self._tracker.train_for(name), ev.first_step, self.window)
        if st["first"] is None:
            st["first"] = v
        if st.get("train_first") is None and t is not None:
            st["train_first"] = t
            if not self._same_quantity(v, t):
                st["apart"] = (
                    f"{name}'s first evaluation {v:.4g} is not a measure of the training loss "
                    f"{t:.4g} (below {self.comparable:g} x it, or of another sign): no gap to judge"
                )
        if st.get("apart"):
            return st, v, None, math.nan, math.nan
        # worse: above its best by more than `rise` of what it had gained since the first (a
        # plateau's noise, as boosting's validation loss near early stopping, is not a rise),
        # and by more than 3 x the passes' own noise (`pass_noise`: the best of a noisy series
        # is its luckiest pass)
        worse = v > st["best"] + max(
            self.rise * max(st["first"] - st["best"], 0.0), 3 * pass_noise(st["passes"])
        )
        if v <= st["best"]:
            st["best"], st["best_step"], st["train_at_best"] = v, ev.last_step, t
        if t is None:
            return st, v, None, math.nan, math.nan
        ratio = (v - t) / max(abs(t), 1e-12)
        gap_share = (v - t) / max(abs(st["first"]), 1e-12)
        # memorizing: the training loss went on falling since the best validation loss (a
        # validation loss that rose with the training loss is harder data, not a gap opening)
        fitting = st.get("train_at_best") is None or t < st["train_at_best"]
        if worse and fitting and ratio > self.ratio_threshold and gap_share > self.gap_threshold:
            st["streak"] += 1
        else:
            st["streak"] = 0
        if st["streak"] >= self.patience and self._early_stopping():
            # the stopper's patience: judged only when validation never gained next to training
            gained = st["first"] - st["best"]
            if gained > self.early_stopping_gain * max(st["train_first"] - t, 0.0):
                st["streak"] = 0
        return st, v, t, ratio, gap_share

    def _same_quantity(self, v: float, t: float) -> bool:
        """Whether a first validation value `v` and the training level `t` then measure one
        loss: of one sign, and `v` at least `comparable` x `t` (dropout and augmentation lift a
        training loss above its validation twin, never fourfold)."""
        if (v > 0) != (t > 0):
            return False
        return t <= 0 or v >= self.comparable * t

    def _early_stopping(self) -> bool:
        """Whether the run trains with early stopping: its run description (XGBoost's) holds
        the best iteration the early-stopping callback marks, or the hook recorded
        `early_stopping`. Read when a streak would report, not every step; once known, kept."""
        if not self._early and self._trial is not None:
            info = read_run_info(self._trial.trial)
            self._early = (
                (info is not None and info.best_iteration is not None)
                or bool(self._trial.names(None, regex=f"^{EARLY_STOPPING}$"))
                or self._keeps_best(self._trial)
            )
        return self._early

    def _keeps_best(self, trial: TrialView) -> bool:
        """Whether the script keeps its best model by the validation loss itself (early stopping
        written by hand: `torch.save(model.state_dict(), path)` or `best = copy.deepcopy(
        model.state_dict())` when the validation loss improves, the PyTorch hook's `state_taken/
        <model>` at the pass's last step): the model's state was taken after two passes or
        more of some validation loss, each the lowest of it yet, and not after every pass (a
        checkpoint each epoch keeps no best)."""
        taken = {
            s for name in trial.names(None, regex=[f"^{STATE_TAKEN}"]) for s in trial.tensor(name).steps()
        }
        for st in self._state.values():
            if len(taken) >= 2 and taken <= set(st["bests"]) and len(taken) < st["count"]:
                return True
        return False

    def _judge(self, trial: TrialView, name: str, ev: Evaluation) -> Finding | None:
        got = self._advance(name, ev)
        if got is None:
            return None
        st, v, t, ratio, gap_share = got
        self._state[name] = st
        if t is None or st["streak"] < self.patience or not self.first(name):
            return None
        return self.finding(
            trial, ev.last_step,
            f"{name}: validation loss {v:.4g} (median of the last 3 evaluations) vs training loss {t:.4g} at step {ev.last_step} "
            f"(ratio {ratio:.2g} > {self.ratio_threshold:g}; the gap is {100 * gap_share:.0f}% of the first "
            f"validation loss {st['first']:.4g}), and the validation loss has not beaten its best "
            f"{st['best']:.4g} (step {st['best_step']}) by more than {100 * self.rise:g}% of its gain for "
            f"{st['streak']} evaluations: the model is memorizing "
            "the training set",
            tensors=[name],
        )  # fmt: skip
