"""Copies of `mldbg.xgboost.Hook` (scikit-learn's `clone`, pickling): each fit its own run."""

from __future__ import annotations

import copy
import logging
import os
import pickle
import threading

import joblib
import numpy as np
import pytest
import xgboost as xgb
from sklearn.datasets import make_classification
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, cross_val_score

import mldbg
from mldbg import Mode
from mldbg.store.run_info import read_run_info
from mldbg.xgboost import Hook

ROUNDS = 4


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    return make_classification(120, 6, n_informative=4, random_state=0)


def classifier(hook: Hook) -> xgb.XGBClassifier:
    return xgb.XGBClassifier(n_estimators=ROUNDS, max_depth=2, n_jobs=1, callbacks=[hook])


def complete_run(path: str, rows: int) -> mldbg.trial.Trial:
    """A finished run of ROUNDS boosting rounds whose training set had `rows` rows."""
    trial = mldbg.create_trial(path)
    assert trial.loaded_all_steps
    assert trial.steps(Mode.TRAIN) == list(range(ROUNDS))
    assert len(trial.tensor("train-logloss").steps(Mode.TRAIN)) == ROUNDS
    assert len(trial.tensor("labels").value(0, mode=Mode.TRAIN)) == rows
    return trial


def test_grid_search_records_every_fit_as_its_own_run(tmp_path, data):
    X, y = data
    hook = Hook(tmp_path)
    search = GridSearchCV(classifier(hook), {"max_depth": [2, 3]}, cv=2, n_jobs=1).fit(X, y)
    # 2 candidates x 2 folds, then the refit of the best on all the data, in that order
    assert hook.sub_runs == [os.path.join(tmp_path, f"fit-{k}") for k in range(5)]
    best = search.best_params_["max_depth"]
    curves = []
    for run, depth, rows in zip(hook.sub_runs, [2, 2, 3, 3, best], [60, 60, 60, 60, 120], strict=True):
        trial = complete_run(run, rows)
        assert read_run_info(trial).params["max_depth"] == depth
        curves.append([float(v) for v in trial.tensor("train-logloss").values(Mode.TRAIN).values()])
    assert len({tuple(c) for c in curves}) == 5  # five different trainings, none overwritten
    # the refit's recorded loss is the final model's
    assert curves[-1][-1] == pytest.approx(log_loss(y, search.best_estimator_.predict_proba(X)), rel=1e-5)
    # the hook itself never trained: its run is empty; `mldbg check` reads a fit
    assert mldbg.create_trial(tmp_path).steps() == []
    assert mldbg.check(hook.sub_runs[-1]) == []


def test_cross_val_score_records_each_fold(tmp_path, data):
    X, y = data
    hook = Hook(tmp_path)
    scores = cross_val_score(classifier(hook), X, y, cv=3)
    assert len(scores) == 3 and np.all(scores > 0.5)
    assert len(hook.sub_runs) == 3
    for run in hook.sub_runs:
        complete_run(run, 80)


def test_plain_fit_records_into_out_dir_and_a_copy_is_idle_until_it_trains(tmp_path, data):
    X, y = data
    hook = Hook(tmp_path)
    threads, files = threading.active_count(), sorted(os.listdir(tmp_path))
    twin = copy.deepcopy(hook)
    assert twin.session is None and twin.out_dir is None
    assert threading.active_count() == threads and sorted(os.listdir(tmp_path)) == files
    assert copy.deepcopy(twin).session is None and hook.sub_runs == []

    classifier(hook).fit(X, y)
    complete_run(tmp_path, 120)
    assert hook.out_dir == str(tmp_path) and hook.sub_runs == []

    classifier(twin).fit(X[:90], y[:90])
    assert twin.out_dir == os.path.join(tmp_path, "fit-0") == hook.sub_runs[0]
    complete_run(twin.out_dir, 90)
    complete_run(tmp_path, 120)  # untouched


def test_numbering_continues_after_the_runs_already_there(tmp_path, data):
    X, y = data
    GridSearchCV(classifier(Hook(tmp_path)), {"max_depth": [2]}, cv=2, refit=False).fit(X, y)
    hook = Hook(tmp_path)  # the same folder again, as a rerun of the script does
    cross_val_score(classifier(hook), X, y, cv=2)
    assert [os.path.basename(r) for r in hook.sub_runs] == ["fit-2", "fit-3"]
    for run in hook.sub_runs:
        complete_run(run, 60)


@pytest.mark.parametrize("backend", ["loky", "threading"])
def test_grid_search_in_parallel(tmp_path, data, backend):
    """loky pickles the copies to worker processes, threading trains them side by side."""
    X, y = data
    hook = Hook(tmp_path)
    with joblib.parallel_backend(backend, n_jobs=2):
        GridSearchCV(classifier(hook), {"max_depth": [2, 3]}, cv=2).fit(X, y)
    assert hook.sub_runs == [os.path.join(tmp_path, f"fit-{k}") for k in range(5)]
    depths = []
    for run, rows in zip(hook.sub_runs, [60, 60, 60, 60, 120], strict=True):  # the refit comes last
        depths.append(read_run_info(complete_run(run, rows)).params["max_depth"])
    assert sorted(depths[:4]) == [2, 2, 3, 3]


def test_a_pickled_hook_records_its_own_run(tmp_path, data):
    X, y = data
    hook = Hook(tmp_path)
    classifier(hook).fit(X, y)
    restored = pickle.loads(pickle.dumps(hook))  # e.g. joblib.dump of the fitted model
    assert restored.session is None and hook.sub_runs == []  # numbered when it trains
    classifier(restored).fit(X[:90], y[:90])
    assert restored.out_dir == os.path.join(tmp_path, "fit-0")
    complete_run(restored.out_dir, 90)
    complete_run(tmp_path, 120)


def test_a_copy_that_cannot_open_its_run_lets_training_go_on(tmp_path, data, caplog):
    X, y = data
    hook = Hook(tmp_path / "run")
    twin = copy.deepcopy(hook)
    hook.close()
    for name in os.listdir(tmp_path / "run"):
        os.rename(tmp_path / "run" / name, tmp_path / name)
    os.rmdir(tmp_path / "run")
    (tmp_path / "run").write_text("a file where the run's folder was")
    with caplog.at_level(logging.ERROR, logger="mldbg"):
        model = classifier(twin).fit(X, y)
    assert model.predict(X).shape == (120,)
    assert any("cannot record this XGBoost training" in r.getMessage() for r in caplog.records)
