"""`xgb.cv(..., callbacks=[hook])`: the mean and std of each metric over the folds, per round,
equal to the table `xgb.cv` returns; per-fold importances, trees, labels and predictions."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import xgboost as xgb
from sklearn.datasets import load_breast_cancer, make_classification

import mldbg
from mldbg import Mode
from mldbg.report import build_report
from mldbg.store.run_info import IMPORTANCE_TYPES, read_run_info
from mldbg.xgboost import Hook

PARAMS = {
    "objective": "binary:logistic",
    "max_depth": 2,
    "eta": 0.3,
    "nthread": 1,
    "eval_metric": ["logloss", "auc"],
}


class KeepFolds(xgb.callback.TrainingCallback):
    """Keeps xgb.cv's folds (each with its booster and data) to compare the recording with."""

    def after_training(self, model: Any) -> Any:
        self.folds = list(model.cvfolds)
        return model


@pytest.fixture(scope="module")
def cv_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    X, y = load_breast_cancer(return_X_y=True)
    out, folds = tmp_path_factory.mktemp("cv"), KeepFolds()
    table = xgb.cv(
        PARAMS, xgb.DMatrix(X, y), 8, nfold=3, seed=0, callbacks=[Hook(out, predictions_interval=5), folds]
    )
    return {"path": out, "table": table, "folds": folds.folds}


def test_metrics_per_round_equal_the_table_xgb_cv_returns(cv_run):
    trial, table = mldbg.create_trial(cv_run["path"]), cv_run["table"]
    assert trial.loaded_all_steps
    assert trial.steps(Mode.TRAIN) == list(range(8)) == trial.steps(Mode.EVAL)
    assert set(trial.tensor_names(collection="metrics")) == set(table.columns)
    for column in table.columns:  # train-logloss-mean, ..., test-auc-std
        mode = Mode.TRAIN if column.startswith("train-") else Mode.EVAL
        recorded = [float(v) for v in trial.tensor(column).values(mode).values()]
        assert recorded == pytest.approx(list(table[column]), rel=1e-12)
    # the loss: the training folds' mean in TRAIN, the test folds' mean in EVAL; auc is no loss
    assert trial.tensor_names(collection="losses") == ["logloss"]
    loss = trial.tensor("logloss")
    assert [float(v) for v in loss.values(Mode.TRAIN).values()] == pytest.approx(
        list(table["train-logloss-mean"])
    )
    assert [float(v) for v in loss.values(Mode.EVAL).values()] == pytest.approx(
        list(table["test-logloss-mean"])
    )
    info = read_run_info(trial)
    assert (info.cv_folds, info.train_set, info.validation_set, info.task) == (3, "train", "test", "binary")
    assert info.params["eval_metric"] == ["logloss", "auc"] and info.params["nfold"] == 3
    assert info.rounds == 8 and float(trial.tensor("hyperparameters/max_depth").value(0)) == 2


def test_importance_and_trees_per_fold(cv_run):
    trial, folds = mldbg.create_trial(cv_run["path"]), cv_run["folds"]
    names = folds[0].bst.feature_names or [f"f{i}" for i in range(30)]
    step = trial.global_step(Mode.TRAIN, 7)
    for kind in IMPORTANCE_TYPES:
        per_fold = trial.tensor(f"feature_importance/{kind}/folds").value(step)
        assert per_fold.shape == (3, 30)
        for row, fold in zip(per_fold, folds, strict=True):
            assert {names[i]: v for i, v in enumerate(row) if v} == fold.bst.get_score(importance_type=kind)
        np.testing.assert_allclose(trial.tensor(f"feature_importance/{kind}").value(step), per_fold.mean(0))
    # one tree per fold per round, fold after fold
    depth = trial.tensor("trees/depth").value(trial.global_step(Mode.TRAIN, 3))
    assert depth.shape == (3,) and depth.max() <= 2


def test_labels_and_predictions_are_the_folds_one_after_the_other(cv_run):
    trial, folds = mldbg.create_trial(cv_run["path"]), cv_run["folds"]
    assert trial.tensor("probabilities").steps(Mode.EVAL) == [0, 5]
    for mode, part in ((Mode.EVAL, "dtest"), (Mode.TRAIN, "dtrain")):
        sets = [getattr(f, part) for f in folds]
        labels = np.concatenate([d.get_label() for d in sets]).astype(np.int32)
        np.testing.assert_array_equal(trial.tensor("labels").value(5, mode=mode), labels)
        p = np.concatenate([f.bst[:6].predict(d) for f, d in zip(folds, sets, strict=True)])
        np.testing.assert_allclose(trial.tensor("probabilities").value(5, mode=mode), p, rtol=1e-5)
        np.testing.assert_array_equal(trial.tensor("predictions").value(5, mode=mode), (p > 0.5).astype(int))
    # out of fold: the test sets together hold every row once
    assert len(trial.tensor("labels").value(0, mode=Mode.EVAL)) == 569


def test_rules_and_report_read_a_cv_run(cv_run):
    assert mldbg.check(cv_run["path"]) == []
    page = build_report(cv_run["path"], check=False)
    assert re.findall(r'<section id="([^"]+)">', page) == [
        "summary", "findings", "labels", "loss", "feature-importance", "trees", "confusion", "per-class", "roc",
    ]  # fmt: skip
    assert "<td>validation set</td><td>test</td>" in page and "<td>test rows</td><td>569</td>" in page
    assert "logloss-mean" in page and "auc-std" in page  # the loss chart per metric


def test_early_stopping_keeps_every_trained_round(tmp_path):
    X, y = make_classification(300, 8, flip_y=0.3, random_state=0)
    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 1.0, "nthread": 1}
    table = xgb.cv(
        params, xgb.DMatrix(X, y), 60, nfold=3, seed=0, early_stopping_rounds=3, callbacks=[Hook(tmp_path)]
    )
    assert len(table) < 57  # it stopped early
    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps
    assert read_run_info(trial).best_iteration == len(table) - 1
    # the table ends at the best round; the run holds the rounds after it, until the stop, too
    recorded = [float(v) for v in trial.tensor("test-logloss-mean").values(Mode.EVAL).values()]
    assert len(recorded) == len(table) + 3
    assert recorded[: len(table)] == pytest.approx(list(table["test-logloss-mean"]), rel=1e-12)
