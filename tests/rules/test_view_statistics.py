"""TrialView.statistic and class_statistics: on raw runs they equal the NumPy reference of
`mldbg.store.statistics` on the raw tensors, so a rule reading statistics judges an old run
(raw only) exactly as a run recorded with statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mldbg
from mldbg.rules import TrialView
from mldbg.rules.labels import class_stats_from_raw, label_ids, predicted_ids
from mldbg.store.statistics import class_statistics, compute

SCALARS = (
    "mean_abs", "max_abs", "l2", "variance", "std", "nan_count", "inf_count", "zero_fraction",
    "count", "samples", "row_range", "col_range", "quantile(5.0)", "quantile(95.0)",
    "outside(-1.0,1.0)", "equal(0.0)",
)  # fmt: skip
VECTORS = ("unit_active", "unit_outside(-0.5,0.5)", "channel_count", "channel_mean", "channel_std")


def same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(
            np.allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), equal_nan=True)
        )
    assert isinstance(a, float) and isinstance(b, float)
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=0.0)


@pytest.mark.parametrize("scenario", ["healthy_relu_sgd", "healthy_cnn_sgd"])
def test_statistic_equals_the_reference_on_raw_tensors(scenario, run):
    trial = mldbg.create_trial(run(scenario))
    view = TrialView(trial)
    names = trial.tensor_names(collection="weights") + trial.tensor_names(collection="gradients")
    names += trial.tensor_names(collection="relu_activations") + trial.tensor_names(collection="inputs")
    assert names
    checked = 0
    for step in trial.steps()[:3]:
        view.begin(step)
        for name in names:
            if not trial.tensor(name).has_step(step):
                continue
            raw = trial.tensor(name).value(step)
            want = compute(raw, SCALARS + VECTORS)
            for key in SCALARS + VECTORS:
                got = view.statistic(name, step, key)
                assert got is not None and same(got, want[key]), (name, step, key, got, want[key])
                checked += 1
    assert checked > 100


def test_delta_l2_is_the_change_since_the_previous_saved_step(run):
    trial = mldbg.create_trial(run("healthy_relu_sgd"))
    view = TrialView(trial)
    name = "fc1.weight"
    first, second = trial.tensor(name).steps()[:2]
    view.begin(first)
    assert view.statistic(name, first, "delta_l2") is None  # nothing earlier to compare with
    view.begin(second)
    want = np.linalg.norm(
        trial.tensor(name).value(second).astype(np.float64) - trial.tensor(name).value(first)
    )
    got = view.statistic(name, second, "delta_l2")
    assert isinstance(got, float) and got == pytest.approx(float(want), rel=1e-12)


def test_statistic_is_none_without_data(run):
    trial = mldbg.create_trial(run("healthy_relu_sgd"))
    view = TrialView(trial)
    step = trial.steps()[0]
    view.begin(step)
    assert view.statistic("no_such_tensor", step, "mean") is None
    assert view.saved_statistic("fc1.weight", step, "unit_active") is None  # raw only: nothing saved


@pytest.mark.parametrize("scenario", ["healthy_relu_sgd", "imbalanced"])
def test_class_statistics_equal_the_reference_on_raw_labels(scenario, run):
    trial = mldbg.create_trial(run(scenario))
    view = TrialView(trial)
    labels = trial.tensor_names(collection="labels")[0]
    preds = trial.tensor_names(collection="predictions")[0]
    for step in trial.tensor(labels).steps()[:5]:
        view.begin(step)
        got = view.class_statistics(labels, preds, step)
        y, p = trial.tensor(labels).value(step), trial.tensor(preds).value(step)
        on_labels, on_preds = class_statistics(y, p)
        assert got is not None and got.predicted is not None and got.correct is not None
        assert got.confusion is not None
        np.testing.assert_array_equal(got.labels, on_labels["class_counts"])
        np.testing.assert_array_equal(got.predicted, on_preds["class_counts"])
        np.testing.assert_array_equal(got.correct, on_labels["class_correct"])
        np.testing.assert_array_equal(got.confusion, on_labels["confusion"])


def test_class_stats_from_raw_counts_ids():
    y = np.array([0, 1, 1, 2, 2, 2, -100])
    logits = np.eye(3)[[0, 1, 0, 2, 2, 1, 0]].astype(np.float32)
    got = class_stats_from_raw(y, logits)
    assert got is not None and got.classes == 3
    np.testing.assert_array_equal(got.labels, [1, 2, 3, 1])  # -100 in the outside bucket
    np.testing.assert_array_equal(got.predicted, [3, 2, 2, 0])
    np.testing.assert_array_equal(got.correct, [1, 1, 2, 0])
    assert got.confusion is not None and got.confusion.sum() == 6 and got.confusion[2, 1] == 1
    assert got.samples == 7
    ids = label_ids(y)
    assert ids is not None and predicted_ids(logits, y.shape) is not None
    # a regression target has no classes
    assert class_stats_from_raw(np.array([0.3, 1.7]), np.array([0.2, -1.5])) is None
