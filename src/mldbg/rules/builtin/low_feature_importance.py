"""Features that the trees (almost) never use."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from mldbg.errors import InvalidConfig
from mldbg.rules.base import Finding, Rule, register
from mldbg.store.run_info import IMPORTANCE_TYPES, importance_at, read_run_info

if TYPE_CHECKING:
    from mldbg.rules.view import TrialView
    from mldbg.trial import Trial


@register
class LowFeatureImportance(Rule):
    """At least `nfeatures` features are never used: each holds at most `threshold` times the
    even share (1 / number of features) of the `importance_type` importance; at the default 0,
    none of it. Constant, all-missing or duplicated columns are never split on; a column that
    a broken join emptied looks the same. A feature used rarely is not one of them: a weak or
    pure-noise column still wins a few splits of a large ensemble (a continuous one with a
    small weight: 4 of 1,619 splits, 1/25 of an even share, in a healthy 16-feature
    regressor), and real tables are full of them; `threshold` > 0 reports those too.

    It judges only once the ensemble has made `min_splits_per_feature` splits per feature on
    average, so every feature had its chance: early trees use the strongest features first,
    and weak or even pure-noise features are picked up later, the later the smaller the
    learning rate (measured on scikit-learn's datasets, docs/xgboost.md: with eta=0.05, 4 of
    the 5 noise features of Friedman #1 are still unused at 50 splits per feature, none at
    100; constant and duplicated columns stay unused for good). Runs that never reach that
    many splits are not judged (`mldbg check` says so). It fires once.

    Under `interaction_constraints` a tree uses the features of one group only, the group its
    root's feature opens: a group whose features never win a root is never used, by the
    constraint's design. So a feature is judged there only when another feature of its group
    was used (a feature in no group is a group of its own).
    """

    needs = ("feature_importance",)
    threshold: float = 0.0
    nfeatures: int = 1
    importance_type: str = "weight"
    min_splits_per_feature: float = 100.0

    suggestion = (
        "Drop the unused features, or check the data pipeline for them: constant, all-missing "
        "or duplicated columns are never split on. A feature that should matter but is unused "
        "may have lost its values upstream."
    )

    def __init__(self, base_trial: Trial | None = None, **params: Any):
        super().__init__(base_trial, **params)
        if self.importance_type not in IMPORTANCE_TYPES:
            raise InvalidConfig(
                f"rule {self.name!r}: importance_type={self.importance_type!r}; choose from {', '.join(IMPORTANCE_TYPES)}"
            )

    def reset(self) -> None:
        super().reset()
        self._most_splits = -1.0  # splits per feature of the largest model seen, for `unchecked`

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if self._fired:  # once per run
            return None
        splits = importance_at(trial.trial, step, "weight")
        scores = importance_at(trial.trial, step, self.importance_type)
        if splits is None or scores is None or scores.size == 0 or scores.sum() <= 0:
            return None
        if splits.sum() < self.min_splits_per_feature * scores.size:
            self._most_splits = max(self._most_splits, splits.sum() / scores.size)
            return None
        self._most_splits = float("inf")
        share = scores / scores.sum()
        low = np.flatnonzero(share <= self.threshold / scores.size)
        if low.size < self.nfeatures:
            return None  # nothing to judge: the run's information is not read
        info = read_run_info(trial.trial)
        groups = _constraint_groups(info.params.get("interaction_constraints") if info else None, info)
        if groups is not None:  # judged only beside a used feature of its own group
            used = share > self.threshold / scores.size
            low = np.array(
                [i for i in low if any(j != i and j < used.size and used[j] for j in groups.get(int(i), ()))]
            )
        if low.size < self.nfeatures or not self.first():
            return None
        names = [info.feature(int(i)) if info else f"f{int(i)}" for i in low]
        listed = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
        return self.finding(
            trial,
            step,
            f"at iteration {trial.mode_step(step)}, after {int(splits.sum())} splits, {low.size} of "
            f"{scores.size} features are "
            + (
                f"never used (no share of the '{self.importance_type}' importance): {listed}"
                if self.threshold <= 0
                else f"(almost) never used (at most {self.threshold:g} of an even share of the "
                f"'{self.importance_type}' importance): {listed}"
            ),
            tensors=[f"feature_importance/{self.importance_type}"],
        )

    def unchecked(self) -> str | None:
        if 0 <= self._most_splits < self.min_splits_per_feature:
            return (
                f"the model never made {self.min_splits_per_feature:g} splits per feature "
                f"(at most {self._most_splits:.1f}), too few to call a feature unused"
            )
        return None


def _constraint_groups(constraints: Any, info: Any) -> dict[int, tuple[int, ...]] | None:
    """XGBoost's `interaction_constraints` (a list of lists of feature indices or names, or
    its JSON string) as feature index -> the indices of its groups (None: no constraints, or
    a form not understood)."""
    if constraints is None:
        return None
    if isinstance(constraints, str):
        try:
            constraints = json.loads(constraints.replace("'", '"'))
        except ValueError:
            return None
    names = list(info.feature_names) if info is not None else []
    out: dict[int, set[int]] = {}
    try:
        for group in constraints:
            idx = [names.index(f) if isinstance(f, str) and f in names else int(f) for f in group]
            for i in idx:
                out.setdefault(i, set()).update(idx)
    except (TypeError, ValueError):
        return None
    return {i: tuple(sorted(g)) for i, g in out.items()}
