"""The decision-tree rules fire on real defects and stay quiet on healthy boosters; the
universal rules read XGBoost trials (metrics as losses, labels and predictions)."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules.runner import RuleRunner

TREE_RULES = ["tree_depth", "feature_importance_overweight", "low_feature_importance"]


def fired(path, rules) -> dict[str, list[mldbg.Finding]]:
    out: dict[str, list[mldbg.Finding]] = {}
    for f in mldbg.check(str(path), rules):
        out.setdefault(f.rule, []).append(f)
    return out


def test_tree_depth_fires_on_a_max_depth_20_booster(run):
    found = fired(run("deep_trees")["path"], TREE_RULES)
    assert list(found) == ["tree_depth"]
    (f,) = found["tree_depth"]
    assert f.step == 0 and f.mode == "TRAIN" and f.tensors == ["trees/depth"]
    assert "deeper than depth=10" in f.message and "max_depth=20" in f.message
    assert "max_depth" in f.suggestion


def test_leafwise_trees_are_judged_by_their_leaves(tmp_path):
    """lossguide with max_depth=0 and max_leaves=31: chains of 11+ levels that hold 31 leaves
    (the bound the user set) are no deep trees; without the bound on the leaves they are."""
    import xgb_runs

    bounded = xgb_runs.leafwise_trees(tmp_path / "bounded")
    depths = mldbg.create_trial(str(bounded["path"])).tensor("trees/depth")
    assert max(int(depths.value(s).max()) for s in depths.steps()) > 10  # the trees do grow deep
    assert not fired(bounded["path"], ["tree_depth"])
    unbounded = xgb_runs.leafwise_trees(tmp_path / "unbounded", max_leaves=0)
    assert "max_depth=0" in fired(unbounded["path"], ["tree_depth"])["tree_depth"][0].message


def test_tree_depth_threshold_is_a_parameter(run):
    path = run("sane_classifier")["path"]
    assert not fired(path, ["tree_depth"])
    assert fired(path, ["tree_depth:depth=2"])["tree_depth"][0].message.count("reaches depth 3") == 1


def test_feature_importance_overweight_fires_on_a_leaked_label(run):
    found = fired(run("leaked_regression")["path"], TREE_RULES)
    assert list(found) == ["feature_importance_overweight"]
    (f,) = found["feature_importance_overweight"]
    # the leaked column, named first, with its share (74% of the splits once the ensemble has
    # doubled since the concentration was first seen; 100% of the first trees' splits)
    assert f.message.split(": ", 1)[1].startswith("f10 ") and "%" in f.message
    assert "leakage" in f.suggestion


def test_the_first_trees_concentrating_on_the_strongest_features_is_no_leak(tmp_path):
    """Five informative features of 12 (blind5's DART classifier, `XGBClassifier(booster="dart")`):
    the first few trees split on the strongest ones (the top 3 hold 80% of the first ~60
    splits), later trees on the rest (~50% at 60 rounds). The old rule fired on the first 5
    trees; a concentration must now hold while the ensemble doubles. A leaked column keeps
    it: the leaked twin still fires, naming it."""
    import numpy as np
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 12))
    logit = 1.2 * x[:, 0] - 0.8 * x[:, 1] * x[:, 2] + np.sin(2 * x[:, 3]) + 0.5 * (x[:, 4] > 0.5)
    y = (rng.random(len(x)) < 1 / (1 + np.exp(-logit))).astype(int)

    def fit(path, features):
        clf = xgb.XGBClassifier(
            booster="dart", rate_drop=0.1, skip_drop=0.5, n_estimators=60, learning_rate=0.1, max_depth=4,
            subsample=0.8, eval_metric="logloss", n_jobs=1, random_state=0, callbacks=[mldbg.xgboost.Hook(path)],
        )  # fmt: skip
        clf.fit(features[:2400], y[:2400], eval_set=[(features[2400:], y[2400:])], verbose=False)
        return path

    assert not fired(fit(tmp_path / "healthy", x), ["feature_importance_overweight"])
    leaked = fit(tmp_path / "leaked", np.c_[x, y + rng.normal(size=len(y)) * 0.1])
    found = fired(leaked, ["feature_importance_overweight"])["feature_importance_overweight"]
    assert found[0].message.split(": ", 1)[1].startswith("f12 "), found[0].message


def test_a_perfectly_separating_leak_holds_the_total_gain(run):
    path = run("leaked_classifier")["path"]
    found = fired(path, ["feature_importance_overweight:importance_type=total_gain,threshold=0.9"])
    assert "f30 99%" in found["feature_importance_overweight"][0].message


def test_low_feature_importance_fires_on_constant_and_duplicated_columns(run):
    found = fired(run("dead_columns")["path"], TREE_RULES)
    assert list(found) == ["low_feature_importance"]
    (f,) = found["low_feature_importance"]
    assert f.message.endswith(
        "2 of 12 features are never used (no share of the 'weight' importance): f10, f11"
    )
    # with a threshold, the rarely used ones too
    found = fired(run("dead_columns")["path"], ["low_feature_importance:threshold=0.05"])
    assert "at most 0.05 of an even share" in found["low_feature_importance"][0].message


def test_low_feature_importance_leaves_groups_the_interaction_constraints_never_open(tmp_path):
    """Under interaction_constraints a tree uses only its root's group: the noise groups
    are never used, by design; a dead column inside a used group still is a finding."""
    import xgb_runs

    quiet = xgb_runs.constrained(tmp_path / "groups")
    weights = mldbg.create_trial(str(quiet["path"])).tensor("feature_importance/weight")
    last = weights.value(weights.steps()[-1])
    assert last[:5].min() > 0 and last[5:].max() == 0 and last.sum() >= 1000  # judged, groups unused
    assert not fired(quiet["path"], ["low_feature_importance"])
    dead = xgb_runs.constrained(tmp_path / "dead", dead_column=True)
    (f,) = fired(dead["path"], ["low_feature_importance"])["low_feature_importance"]
    assert f.message.endswith("1 of 11 features are never used (no share of the 'weight' importance): f10")


@pytest.mark.parametrize("name", ["sane_classifier", "sane_regressor", "multiclass"])
def test_sane_boosters_fire_none_of_the_tree_rules(run, name):
    runner = RuleRunner(str(run(name)["path"]), TREE_RULES)
    assert runner.run_available() + runner.finish() == []
    assert not runner.errors
    if name == "sane_regressor":  # big enough for every tree rule to judge it
        assert not runner.skipped


def test_low_feature_importance_says_when_the_model_is_too_small_to_judge(run):
    runner = RuleRunner(str(run("sane_classifier")["path"]), ["low_feature_importance"])
    runner.run_available()
    runner.finish()
    assert "never made 100 splits per feature" in runner.skipped["low_feature_importance"]


# the universal rules on XGBoost trials ----------------------------------------------------
def test_overfit_reads_train_and_validation_metrics(run):
    found = fired(run("overfitting_regressor")["path"], ["overfit"])
    assert found["overfit"][0].mode == "EVAL" and "rmse" in found["overfit"][0].message
    assert not fired(run("sane_regressor")["path"], ["overfit"])


def test_loss_not_decreasing_on_a_stuck_booster(run):
    assert (
        "logloss"
        in fired(run("stuck_classifier")["path"], ["loss_not_decreasing"])["loss_not_decreasing"][0].message
    )
    assert not fired(run("sane_classifier")["path"], ["loss_not_decreasing"])


def test_class_imbalance_reads_the_labels(run, tmp_path):
    """212 to 5: a booster that learns the 5 (its trees fit them from round ~40) handles the
    imbalance; the same data at eta 1e-6 keeps predicting the majority: the rare class ignored."""
    import numpy as np
    from sklearn.datasets import load_breast_cancer
    from xgb_runs import train

    assert not fired(run("imbalanced_classifier")["path"], ["class_imbalance"])
    assert not fired(run("sane_classifier")["path"], ["class_imbalance"])
    X, y = load_breast_cancer(return_X_y=True)
    keep = np.r_[np.flatnonzero(y == 0), np.flatnonzero(y == 1)[:5]]
    stuck = train(tmp_path / "stuck", {"objective": "binary:logistic", "eta": 1e-6}, X[keep], y[keep], 60)
    assert (
        "ignores the other classes" in fired(stuck["path"], ["class_imbalance"])["class_imbalance"][0].message
    )


def test_confusion_reads_labels_and_predictions(run):
    f = fired(run("noisy_labels_classifier")["path"], ["confusion"])["confusion"][0]
    assert f.mode == "EVAL"
    assert not fired(run("sane_classifier")["path"], ["confusion"])
    assert not fired(run("multiclass")["path"], ["confusion"])
