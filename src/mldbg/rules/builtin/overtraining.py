"""overtraining: training goes on, validation stopped improving (time to stop early)."""

from __future__ import annotations

import math

from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.losses import Evaluation, LossTracker, train_level
from mldbg.rules.view import TrialView


@register
class Overtraining(Rule):
    """The validation loss has not improved by `delta` (relative) for `patience_validation`
    evaluations, while the training loss did improve by `delta` within its last
    `patience_train` windows of `window` steps: further training only fits the training set.

    SageMaker fires when *either* loss stops improving, which every converged or slowly
    improving healthy run does (and `delta=0.01` was absolute, meaningless across loss
    scales). Here `delta` is relative, and a plateau of both losses is convergence, not
    overtraining. The finding names the evaluation where the validation loss was best: the
    step to stop at. Not in the default set: it is an early-stopping advisor, and long
    healthy runs reach that point too (a validation loss a few percent above its best while
    the training loss still falls); a defect (memorizing) is what `overfit` reports.
    """

    needs = ("losses", "scalars")
    needs_any = True
    default = False
    patience_train: int = 5
    patience_validation: int = 10
    delta: float = 0.01
    window: int = 10
    use_losses_collection: bool = True
    tensor_regex: list[str] | None = None
    suggestion = (
        "Use early stopping: keep the checkpoint of the best validation loss and stop once it has "
        "not improved for a few evaluations; or add regularization (weight decay, dropout, data "
        "augmentation) to keep the validation loss improving."
    )

    def reset(self) -> None:
        super().reset()
        self._tracker = LossTracker(self.use_losses_collection, self.tensor_regex)
        self._state: dict[str, dict] = {}  # per validation loss: its best, streak...

    def check(self, trial: TrialView, step: int) -> list[Finding]:
        _, _, closed = self._tracker.update(trial, step)
        return [f for name, ev in closed if (f := self._judge(trial, name, ev))]

    def finish(self, trial: TrialView) -> list[Finding]:
        return [f for name, ev in self._tracker.close_all() if (f := self._judge(trial, name, ev))]

    def unchecked(self) -> str | None:
        if not self._tracker.evals:
            return "no validation loss: it needs losses saved in EVAL mode (evaluation passes)"
        return None

    def undecided(self) -> str | None:
        return self._tracker.shortfall(self.patience_validation + 1, evaluations=True)

    def _judge(self, trial: TrialView, name: str, ev: Evaluation) -> Finding | None:
        v = ev.value
        if not math.isfinite(v):
            return None
        st = self._state.setdefault(
            name, {"best": math.inf, "best_step": None, "since": 0, "train_at_best": None}
        )
        train = self._tracker.train_for(name)
        if v < st["best"] - self.delta * abs(st["best"]) or st["best_step"] is None:
            st.update(best=v, best_step=ev.last_step, since=0,
                      train_at_best=train_level(train, ev.first_step, self.window))  # fmt: skip
            return None
        st["since"] += 1
        if st["since"] < self.patience_validation or train is None:
            return None
        # training still improving: its best window within the last patience_train windows beats the earlier ones
        w = max(2, self.window)
        vals = [
            x
            for x, s in zip(train.values, train.steps, strict=True)
            if s < ev.first_step and math.isfinite(x)
        ]
        meds = [sorted(vals[i : i + w])[len(vals[i : i + w]) // 2] for i in range(0, len(vals) - w + 1, w)]
        if len(meds) <= self.patience_train:
            return None
        recent, earlier = min(meds[-self.patience_train :]), min(meds[: -self.patience_train])
        if recent >= earlier - self.delta * abs(earlier) or not self.first(name):
            return None
        now_train = meds[-1]
        return self.finding(
            trial, ev.last_step,
            f"{name}: the validation loss has not improved by {100 * self.delta:g}% for {st['since']} evaluations "
            f"(best {st['best']:.4g} at step {st['best_step']}, now {v:.4g}) while the training loss kept falling "
            f"({earlier:.4g} -> {now_train:.4g}): the model is overtraining; the best point to stop was step {st['best_step']}",
            tensors=[name],
        )  # fmt: skip
