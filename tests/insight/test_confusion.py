"""confusion(): the matrix of the recorded labels and (argmax of the) predictions."""

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix

import mldbg
from mldbg import Mode, insight
from mldbg.errors import InvalidConfig

LABELS, LOGITS = "CrossEntropyLoss_input_1", "CrossEntropyLoss_input_0"


def expected(trial, step, mode=None):
    y = trial.tensor(LABELS).value(step, mode=mode)
    p = trial.tensor(LOGITS).value(step, mode=mode).argmax(axis=-1)
    return confusion_matrix(y, p, labels=[0, 1, 2])


def test_matrix_equals_sklearn_at_every_step(blobs_run):
    trial = mldbg.create_trial(blobs_run)
    steps = insight.prediction_steps(trial)
    assert steps == trial.steps()
    for s in steps:
        np.testing.assert_array_equal(insight.confusion_matrix(trial, s), expected(trial, s))
    assert np.trace(expected(trial, 0)) < 48  # untrained: not all on the diagonal


def test_figure_defaults_to_the_last_step(blobs_run):
    trial = mldbg.create_trial(blobs_run)
    fig = insight.confusion(trial)
    (heat,) = fig.data
    np.testing.assert_array_equal(np.asarray(heat.customdata), expected(trial, trial.steps()[-1]))
    assert "step 14 (eval step 2)" in fig.layout.title.text


def test_mode_and_slider(blobs_run):
    trial = mldbg.create_trial(blobs_run)
    fig = insight.confusion(trial, step=1, mode="train", slider=True)
    train_steps = trial.steps(Mode.TRAIN)
    assert len(fig.data) == len(train_steps) == len(fig.layout.sliders[0].steps)
    assert [tr.visible for tr in fig.data].index(True) == 1
    for tr, s in zip(fig.data, train_steps, strict=True):
        np.testing.assert_array_equal(np.asarray(tr.customdata), expected(trial, s, Mode.TRAIN))
    norm = insight.confusion(trial, step=0, mode="eval", normalize=True).data[0]
    np.testing.assert_allclose(np.asarray(norm.z).sum(axis=1), 1.0)


def test_errors(blobs_run, two_workers_run):
    with pytest.raises(InvalidConfig, match="not both saved at step 99"):
        insight.confusion(blobs_run, step=99)
    with pytest.raises(InvalidConfig, match="no labels collection"):
        insight.confusion(two_workers_run)
