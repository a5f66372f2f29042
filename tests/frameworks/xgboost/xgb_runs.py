"""Small real XGBoost trainings on scikit-learn data, recorded with `mldbg.xgboost.Hook`.

Each builder trains in well under a second and returns the booster with what the test needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xgboost as xgb
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine, make_friedman1, make_regression

from mldbg.xgboost import Hook


def split(X: np.ndarray, y: np.ndarray, train: float = 0.7, seed: int = 0) -> tuple[np.ndarray, ...]:
    idx = np.random.default_rng(seed).permutation(len(y))
    cut = int(len(y) * train)
    a, b = idx[:cut], idx[cut:]
    return X[a], y[a], X[b], y[b]


def train(
    out: Path,
    params: dict[str, Any],
    X: np.ndarray,
    y: np.ndarray,
    rounds: int,
    validation: bool = True,
    feature_names: list[str] | None = None,
    **hook: Any,
) -> dict[str, Any]:
    """`xgb.train` with evals [(train, "train"), (validation, "validation")] and the hook.

    One thread: on a small shared machine, OpenMP threads waiting on each other cost more
    than these tiny trainings."""
    params = {"nthread": 1, **params}
    Xt, yt, Xv, yv = split(X, y)
    dtrain = xgb.DMatrix(Xt, yt, feature_names=feature_names)
    dvalid = xgb.DMatrix(Xv, yv, feature_names=feature_names)
    evals = [(dtrain, "train"), (dvalid, "validation")] if validation else [(dtrain, "train")]
    result: dict[str, Any] = {}
    booster = xgb.train(
        params,
        dtrain,
        rounds,
        evals=evals,
        evals_result=result,
        callbacks=[Hook(out, **hook)],
        verbose_eval=False,
    )
    return {"path": out, "booster": booster, "dtrain": dtrain, "dvalid": dvalid, "evals_result": result}


def sane_classifier(out: Path, **hook: Any) -> dict[str, Any]:
    """Breast cancer, shallow trees, a modest learning rate: a healthy binary booster."""
    X, y = load_breast_cancer(return_X_y=True)
    names = [n.replace(" ", "_") for n in load_breast_cancer().feature_names]
    params = {"objective": "binary:logistic", "max_depth": 3, "eta": 0.1, "eval_metric": ["logloss", "auc"]}
    return train(out, params, X, y, 60, feature_names=names, **hook)


def sane_regressor(out: Path) -> dict[str, Any]:
    """Ten features that all carry signal, enough rounds for every tree rule to judge."""
    X, y = make_regression(1500, 10, n_informative=10, noise=5.0, random_state=0)
    return train(out, {"max_depth": 3, "eta": 0.1}, X, y, 160)


def deep_trees(out: Path) -> dict[str, Any]:
    """max_depth=20 on noisy data: nothing stops the trees from growing 15+ levels."""
    X, y = make_friedman1(600, 10, noise=3.0, random_state=0)
    return train(out, {"max_depth": 20}, X, y, 8)


def leafwise_trees(out: Path, max_leaves: int = 31) -> dict[str, Any]:
    """deep_trees' data grown leaf-wise (LightGBM's way): depth unbounded, 31 leaves a tree;
    `max_leaves=0` lifts the bound on the leaves too."""
    X, y = make_friedman1(600, 10, noise=3.0, random_state=0)
    params = {"tree_method": "hist", "grow_policy": "lossguide", "max_depth": 0, "max_leaves": max_leaves}
    return train(out, params, X, y, 8)


def leaked_regression(out: Path) -> dict[str, Any]:
    """Diabetes with the target (plus a little noise) as an extra column."""
    X, y = load_diabetes(return_X_y=True)
    leak = y + np.random.default_rng(0).normal(size=y.size) * 5
    return train(out, {"max_depth": 3}, np.c_[X, leak], y, 40)


def leaked_classifier(out: Path) -> dict[str, Any]:
    """Breast cancer with the label as an extra column: the classes separate perfectly."""
    X, y = load_breast_cancer(return_X_y=True)
    leak = y + np.random.default_rng(0).normal(size=y.size) * 0.01
    return train(out, {"objective": "binary:logistic", "max_depth": 4}, np.c_[X, leak], y, 30)


def dead_columns(out: Path) -> dict[str, Any]:
    """Ten informative features plus a constant column and an exact duplicate of feature 0."""
    X, y = make_regression(1200, 10, n_informative=10, noise=5.0, random_state=1)
    X = np.c_[X, np.full(len(y), 3.0), X[:, 0]]
    return train(out, {"max_depth": 3, "eta": 0.3}, X, y, 200)


def constrained(out: Path, dead_column: bool = False) -> dict[str, Any]:
    """Friedman #1 (features 0-4 informative, 5-9 noise) under `interaction_constraints`
    `[[0, 1, 2, 3, 4], [5, 6], [7, 8, 9]]`: each tree uses the group its root opens, and the
    noise groups never win a root. `dead_column`: a constant column 10 joins the first group."""
    X, y = make_friedman1(1500, 10, noise=1.0, random_state=0)
    groups = [[0, 1, 2, 3, 4], [5, 6], [7, 8, 9]]
    if dead_column:
        X, groups[0] = np.c_[X, np.full(len(y), 3.0)], [*groups[0], 10]
    params = {"max_depth": 6, "eta": 0.1, "interaction_constraints": str(groups)}
    return train(out, params, X, y, 25)


def multiclass(out: Path, **hook: Any) -> dict[str, Any]:
    X, y = load_wine(return_X_y=True)
    params = {"objective": "multi:softprob", "num_class": 3, "max_depth": 2, "eta": 0.3}
    return train(out, params, X, y, 20, **hook)


def regression(out: Path, **hook: Any) -> dict[str, Any]:
    X, y = load_diabetes(return_X_y=True)
    return train(out, {"max_depth": 3, "eta": 0.1}, X, y, 40, **hook)


def overfitting_regressor(out: Path) -> dict[str, Any]:
    """Deep trees, a large learning rate, 442 rows: the validation loss turns up early."""
    X, y = load_diabetes(return_X_y=True)
    return train(out, {"max_depth": 6, "eta": 0.3}, X, y, 60)


def stuck_classifier(out: Path) -> dict[str, Any]:
    """A learning rate of 1e-6: the loss does not move."""
    X, y = load_breast_cancer(return_X_y=True)
    return train(out, {"objective": "binary:logistic", "eta": 1e-6}, X, y, 60)


def imbalanced_classifier(out: Path) -> dict[str, Any]:
    """Breast cancer with only 5 of the 357 benign cases kept: 212 to 5 (class_imbalance is a
    significance test: 212 to 15 is not surely beyond its 10:1 at its budget)."""
    X, y = load_breast_cancer(return_X_y=True)
    keep = np.r_[np.flatnonzero(y == 0), np.flatnonzero(y == 1)[:5]]
    return train(out, {"objective": "binary:logistic", "max_depth": 3}, X[keep], y[keep], 60)


def noisy_labels_classifier(out: Path) -> dict[str, Any]:
    """Four classes, 40% of the labels random: a third of each class is mispredicted."""
    from sklearn.datasets import make_classification

    X, y = make_classification(1200, 10, n_informative=6, n_classes=4, flip_y=0.4, random_state=0)
    params = {"objective": "multi:softprob", "num_class": 4, "max_depth": 3, "eta": 0.1}
    return train(out, params, X, y, 30)
