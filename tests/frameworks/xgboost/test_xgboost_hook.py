"""What `mldbg.xgboost.Hook` records equals what XGBoost computed, iteration by iteration."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
import xgb_runs
import xgboost as xgb
from sklearn.datasets import load_breast_cancer, load_diabetes

import mldbg
from mldbg import CollectionConfig, Mode, SaveConfig
from mldbg.frameworks.xgboost import tree_stats
from mldbg.store import layout, open_store
from mldbg.store.run_info import IMPORTANCE_TYPES, read_run_info
from mldbg.xgboost import Hook


def test_each_iteration_is_a_train_step_then_an_eval_step(run):
    r = run("sane_classifier")
    trial = mldbg.create_trial(r["path"])
    assert trial.loaded_all_steps  # the hook closed itself when training ended
    assert trial.steps(Mode.TRAIN) == list(range(60)) == trial.steps(Mode.EVAL)
    assert [trial.mode(s) for s in trial.steps()[:4]] == [Mode.TRAIN, Mode.EVAL, Mode.TRAIN, Mode.EVAL]
    assert trial.mode_step(trial.steps()[-1]) == 59


def test_metrics_and_losses_equal_the_evaluation_log(run):
    r = run("sane_classifier")
    trial = mldbg.create_trial(r["path"])
    log = r["evals_result"]
    metrics = set(trial.tensor_names(collection="metrics"))
    assert metrics == {"train-logloss", "train-auc", "validation-logloss", "validation-auc"}
    for set_name, mode in (("train", Mode.TRAIN), ("validation", Mode.EVAL)):
        for metric in ("logloss", "auc"):
            got = trial.tensor(f"{set_name}-{metric}").values(mode)
            assert [float(v) for v in got.values()] == pytest.approx(log[set_name][metric], rel=1e-12)
    # losses: one tensor per loss metric, the training set in TRAIN, the validation set in EVAL
    assert trial.tensor_names(collection="losses") == ["logloss"]
    loss = trial.tensor("logloss")
    assert [float(v) for v in loss.values(Mode.TRAIN).values()] == pytest.approx(log["train"]["logloss"])
    assert [float(v) for v in loss.values(Mode.EVAL).values()] == pytest.approx(log["validation"]["logloss"])


def test_feature_importance_equals_get_score_at_that_iteration(run):
    r = run("sane_classifier")
    trial, booster = mldbg.create_trial(r["path"]), r["booster"]
    names = booster.feature_names
    for iteration in (0, 7, 31, 59):
        step = trial.global_step(Mode.TRAIN, iteration)
        model = booster[: iteration + 1]
        for kind in IMPORTANCE_TYPES:
            recorded = trial.tensor(f"feature_importance/{kind}").value(step)
            score = model.get_score(importance_type=kind)
            assert recorded.shape == (len(names),)
            assert {names[i]: v for i, v in enumerate(recorded) if v} == score  # exactly, unused are 0
    info = read_run_info(trial)
    assert info is not None and info.feature_names == names and info.task == "binary"


def test_tree_statistics_describe_the_new_trees(run):
    r = run("deep_trees")
    trial, booster = mldbg.create_trial(r["path"]), r["booster"]
    for iteration in range(8):
        step = trial.global_step(Mode.TRAIN, iteration)
        depth = trial.tensor("trees/depth").value(step)
        leaves = trial.tensor("trees/leaves").value(step)
        nodes = trial.tensor("trees/nodes").value(step)
        tree = json.loads(booster[iteration : iteration + 1].get_dump(dump_format="json")[0])
        assert depth.tolist() == [_json_depth(tree)]
        assert nodes.tolist() == [2 * leaves[0] - 1]  # binary trees
    assert trial.tensor("trees/depth").value(0).max() > 10


def _json_depth(node: dict) -> int:
    return 0 if "leaf" in node else 1 + max(_json_depth(c) for c in node["children"])


def test_tree_stats_of_a_stump_and_a_split():
    assert [a.tolist() for a in tree_stats(["0:leaf=0.5\n"])] == [[0], [1], [1]]
    dump = "0:[f0<1] yes=1,no=2,missing=1\n\t1:leaf=0.1\n\t2:[f1<2] yes=3,no=4\n\t\t3:leaf=1\n\t\t4:leaf=2\n"
    assert [a.tolist() for a in tree_stats([dump])] == [[2], [3], [5]]


def test_labels_predictions_and_probabilities_at_their_interval(run):
    r = run("sane_classifier")
    trial, booster = mldbg.create_trial(r["path"]), r["booster"]
    assert trial.tensor("predictions").steps(Mode.EVAL) == [0, 10, 20, 30, 40, 50]
    for mode, data in ((Mode.TRAIN, r["dtrain"]), (Mode.EVAL, r["dvalid"])):
        labels = trial.tensor("labels").value(30, mode=mode)
        np.testing.assert_array_equal(labels, data.get_label().astype(np.int32))
        p = booster[:31].predict(data)
        np.testing.assert_allclose(trial.tensor("probabilities").value(30, mode=mode), p, rtol=1e-5)
        np.testing.assert_array_equal(trial.tensor("predictions").value(30, mode=mode), (p > 0.5).astype(int))


def test_multiclass_probabilities_are_softprob(tmp_path):
    r = xgb_runs.multiclass(tmp_path, predictions_interval=4)
    trial = mldbg.create_trial(tmp_path)
    p = r["booster"][:9].predict(r["dvalid"])
    np.testing.assert_allclose(
        trial.tensor("probabilities").value(8, mode=Mode.EVAL), p, rtol=1e-5, atol=1e-7
    )
    np.testing.assert_array_equal(trial.tensor("predictions").value(8, mode=Mode.EVAL), p.argmax(axis=1))
    assert trial.tensor_names(collection="losses") == ["mlogloss"]
    # a multiclass round grows one tree per class
    assert trial.tensor("trees/depth").value(0).shape == (3,)


def test_hyperparameters_are_saved_once(run):
    trial = mldbg.create_trial(run("sane_classifier")["path"])
    depth = trial.tensor("hyperparameters/max_depth")
    assert depth.steps() == [0] and float(depth.value(0)) == 3.0
    assert float(trial.tensor("hyperparameters/num_boost_round").value(0)) == 60
    info = read_run_info(trial)
    assert info.params["eta"] == 0.1 and info.objective == "binary:logistic" and info.rounds == 60


def test_shap_values_at_chosen_steps(tmp_path):
    r = xgb_runs.regression(tmp_path, shap_steps=[3])
    trial = mldbg.create_trial(tmp_path)
    values = trial.tensor("shap/values")
    assert values.steps(Mode.EVAL) == [3] and values.steps(Mode.TRAIN) == []
    contribs = values.value(3, mode=Mode.EVAL)
    margin = r["booster"][:4].predict(r["dvalid"], output_margin=True)
    np.testing.assert_allclose(contribs.sum(axis=1), margin, rtol=1e-4, atol=1e-3)  # SHAP sums to the margin
    np.testing.assert_allclose(
        trial.tensor("shap/mean_abs").value(3, mode=Mode.EVAL), np.abs(contribs).mean(0)
    )


def test_scikit_learn_classifier_with_the_training_set_in_eval_set(tmp_path):
    X, y = load_breast_cancer(return_X_y=True)
    Xt, yt, Xv, yv = xgb_runs.split(X, y)
    model = xgb.XGBClassifier(n_estimators=12, max_depth=2, n_jobs=1, callbacks=[Hook(tmp_path)])
    model.fit(Xt, yt, eval_set=[(Xt, yt), (Xv, yv)], verbose=False)
    trial = mldbg.create_trial(tmp_path)
    info = read_run_info(trial)
    assert (info.train_set, info.validation_set) == ("validation_0", "validation_1")
    assert trial.steps(Mode.TRAIN) == list(range(12)) == trial.steps(Mode.EVAL)
    log = model.evals_result()
    got = trial.tensor("logloss").values(Mode.EVAL)
    assert [float(v) for v in got.values()] == pytest.approx(log["validation_1"]["logloss"])
    assert len(trial.tensor("labels").value(0, mode=Mode.TRAIN)) == len(yt)


def test_scikit_learn_regressor_without_the_training_set_gets_training_metrics(tmp_path):
    X, y = load_diabetes(return_X_y=True)
    Xt, yt, Xv, yv = xgb_runs.split(X, y)
    model = xgb.XGBRegressor(n_estimators=10, max_depth=2, n_jobs=1, callbacks=[Hook(tmp_path)])
    model.fit(Xt, yt, eval_set=[(Xv, yv)], verbose=False)
    trial = mldbg.create_trial(tmp_path)
    train_rmse = trial.tensor("train-rmse").values(Mode.TRAIN)
    expected = [
        float(np.sqrt(np.mean((model.get_booster()[: i + 1].predict(xgb.DMatrix(Xt)) - yt) ** 2)))
        for i in range(10)
    ]
    assert [float(v) for v in train_rmse.values()] == pytest.approx(expected, rel=1e-5)
    assert trial.tensor("rmse").steps(Mode.EVAL) == list(range(10))


def test_collections_and_schedules_follow_the_hook_settings(tmp_path):
    X, y = load_diabetes(return_X_y=True)
    configs = [CollectionConfig("trees", save_config=SaveConfig(save_interval=3))]
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=2), include_collections=["metrics", "trees"],
                collection_configs=configs)  # fmt: skip
    xgb.train(
        {"max_depth": 2, "nthread": 1},
        xgb.DMatrix(X, y),
        7,
        evals=[(xgb.DMatrix(X, y), "train")],
        callbacks=[hook],
    )
    trial = mldbg.create_trial(tmp_path)
    assert set(trial.collections()) - {"all"} == {"metrics", "trees"}
    assert trial.tensor("train-rmse").steps(Mode.TRAIN) == [0, 2, 4, 6]
    depth = trial.tensor("trees/depth")
    assert depth.steps(Mode.TRAIN) == [0, 3, 6]
    assert [len(depth.value(s, mode=Mode.TRAIN)) for s in (0, 3, 6)] == [
        1,
        3,
        3,
    ]  # every tree since the last record


def test_a_stop_request_raises_training_stopped(tmp_path):
    X, y = load_diabetes(return_X_y=True)
    hook = Hook(tmp_path, stop_check_seconds=0)
    request = {"reason": "test", "requested": time.time()}  # after the run started
    open_store(tmp_path).write(layout.STOP_REQUEST, [json.dumps(request).encode()])
    with pytest.raises(mldbg.TrainingStopped):
        xgb.train({"max_depth": 2, "nthread": 1}, xgb.DMatrix(X, y), 50, callbacks=[hook])
    assert mldbg.create_trial(tmp_path).steps(Mode.TRAIN) == [0]


def test_rules_and_report_import_without_xgboost():
    code = (
        "import sys; sys.modules['xgboost'] = None\n"
        "import mldbg.rules, mldbg.report, mldbg.cli.report\n"
        "from mldbg.rules import BUILTIN\n"
        "assert {'tree_depth', 'feature_importance_overweight', 'low_feature_importance'} <= set(BUILTIN)\n"
        "assert 'xgboost' not in [m.split('.')[0] for m in sys.modules if sys.modules[m] is not None]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_profiler_and_live_rules_from_the_hook(tmp_path):
    """`profiler_config=` times each boosting round; `rules=` checks them in a watcher child."""
    from mldbg.profiler.config import ProfilerConfig
    from mldbg.profiler.read import ProfilerData

    X, y = load_diabetes(return_X_y=True)
    hook = Hook(
        tmp_path, profiler_config=ProfilerConfig(system_interval_ms=100), rules=["tree_depth:depth=1"]
    )
    xgb.train({"max_depth": 3, "nthread": 1}, xgb.DMatrix(X, y), 20, callbacks=[hook])
    assert hook.session.watcher is None  # stopped with the hook, after its final pass
    steps = ProfilerData(mldbg.create_trial(tmp_path)).steps()
    assert len(steps) >= 20
    assert {f.rule for f in mldbg.check(tmp_path, rules=["tree_depth:depth=1"])} == {"tree_depth"}
