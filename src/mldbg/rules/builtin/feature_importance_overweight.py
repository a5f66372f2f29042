"""A few features carry almost all of a tree model's importance."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from mldbg.errors import InvalidConfig
from mldbg.rules.base import Finding, Rule, register
from mldbg.store.run_info import IMPORTANCE_TYPES, importance_at, read_run_info

if TYPE_CHECKING:
    from mldbg.rules.view import TrialView
    from mldbg.trial import Trial


@register
class FeatureImportanceOverweight(Rule):
    """The top `nfeatures` features hold more than `threshold` of the normalized
    `importance_type` importance: the model leans on a few columns, the classic sign of a
    leaked label (a column computed from the target, an ID or timestamp that encodes it).

    Two guards keep it quiet where concentration means nothing: during training it waits until
    the ensemble has made `min_splits` splits (the first trees use a handful of features by
    construction; when training ends it judges the final model whatever its size), and it
    only judges models with at least 3 x `nfeatures` features (with 4 or 8 features, the top
    3 hold most of the importance anyway). It fires once.

    During training a concentration must persist while the ensemble doubles: it is noted at
    the first split count `n` (>= `min_splits`) where the top features are over `threshold`,
    and reported only when they still are at `2 n` splits (a dip below forgets it). Greedy
    trees take the strongest features first, so any ensemble of a few trees is concentrated
    (a DART or gbtree booster on 5 informative features of 12: the top 3 hold 80% of 60
    splits, 68% of 160 and 40% of the final 1900); a leaked column keeps its share as trees
    are added (the leaked regression: 100% throughout). The final model is judged as it is.

    What it cannot tell apart: a leak, and data where only `nfeatures` or fewer features carry
    the signal (measured: with 3 informative features of 10, the top 3 hold 95-100% of the
    splits for hundreds of rounds). The finding then says which features the model lives on;
    raise `nfeatures` if that is expected.

    With the default `importance_type="weight"` (split counts) it catches a leak that the trees
    keep splitting on, as in regression. A leak that separates the classes perfectly leaves
    the trees with few splits (29 in 80 rounds in our breast-cancer test) and holds ~60% of
    them: use `importance_type="total_gain", threshold=0.9` for that (measured in
    docs/xgboost.md: leaks hold >= 90% of the total gain, healthy models <= 88%).
    """

    needs = ("feature_importance",)
    threshold: float = 0.8
    nfeatures: int = 3
    importance_type: str = "weight"
    min_splits: int = 50

    suggestion = (
        "Check the dominant features for target leakage (derived from the label, or an ID or "
        "time column that encodes it) and drop them if so; if the dominance is genuine, "
        "colsample_bytree/colsample_bynode < 1 makes the trees use other features too."
    )

    def __init__(self, base_trial: Trial | None = None, **params: Any):
        super().__init__(base_trial, **params)
        if self.importance_type not in IMPORTANCE_TYPES:
            raise InvalidConfig(
                f"rule {self.name!r}: importance_type={self.importance_type!r}; choose from {', '.join(IMPORTANCE_TYPES)}"
            )

    def reset(self) -> None:
        super().reset()
        self._over_at: float | None = None  # the split count where the concentration was first seen

    def check(self, trial: TrialView, step: int) -> Finding | None:
        return self._judge(trial, step, self.min_splits)

    def finish(self, trial: TrialView) -> Finding | None:
        name = f"feature_importance/{self.importance_type}"
        steps = trial.tensor(name).steps() if trial.has_tensor(name) else []
        return self._judge(trial, steps[-1], 0) if steps else None

    def _judge(self, trial: TrialView, step: int, min_splits: int) -> Finding | None:
        if self._fired:  # once per run
            return None
        splits = importance_at(trial.trial, step, "weight")
        scores = importance_at(trial.trial, step, self.importance_type)
        if splits is None or scores is None or splits.sum() < min_splits:
            return None
        if scores.size < 3 * self.nfeatures or scores.sum() <= 0:
            return None
        share = scores / scores.sum()
        top = np.argsort(share)[::-1][: self.nfeatures]
        total = float(share[top].sum())
        if total <= self.threshold:
            self._over_at = None
            return None
        if min_splits:  # during training: only a concentration that held while the ensemble doubled
            if self._over_at is None:
                self._over_at = float(splits.sum())
            if splits.sum() < 2 * self._over_at:
                return None
        if not self.first():
            return None
        info = read_run_info(trial.trial)
        names = [info.feature(int(i)) if info else f"f{int(i)}" for i in top]
        parts = ", ".join(f"{n} {share[i]:.0%}" for n, i in zip(names, top, strict=True))
        return self.finding(
            trial,
            step,
            f"at iteration {trial.mode_step(step)}, the top {self.nfeatures} of {scores.size} features hold "
            f"{total:.0%} of the '{self.importance_type}' importance (threshold {self.threshold:.0%}): {parts}",
            tensors=[f"feature_importance/{self.importance_type}"],
        )
