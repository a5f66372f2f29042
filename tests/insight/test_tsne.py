"""tsne(): one point per sample, coloured by the recorded labels; classes the layer separates
stay apart in the embedding."""

import numpy as np
import pytest

import mldbg
from mldbg import Mode, insight
from mldbg.errors import InvalidConfig


def points_and_labels(fig):
    n = sum(len(tr.x) for tr in fig.data)
    xy, label = np.full((n, 2), np.nan), np.full(n, -1)
    for tr in fig.data:
        idx = np.asarray(tr.customdata, dtype=int)
        xy[idx] = np.c_[tr.x, tr.y]
        label[idx] = int(tr.name.removeprefix("class "))
    return xy, label


def nearest_neighbour_agreement(xy, label):
    d = np.linalg.norm(xy[:, None] - xy[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    return float(np.mean(label[d.argmin(axis=1)] == label))


def test_points_are_the_samples_coloured_by_the_recorded_labels(blobs_run):
    trial = mldbg.create_trial(blobs_run)
    step = trial.tensor("relu1_output_0").steps(Mode.TRAIN)[-1]
    fig = insight.tsne(trial, "relu1_output_0", step, mode="train")
    xy, label = points_and_labels(fig)
    recorded = trial.tensor("CrossEntropyLoss_input_1").value(step, mode=Mode.TRAIN)
    assert xy.shape == (48, 2) and np.all(np.isfinite(xy))
    assert label.tolist() == recorded.tolist()  # every sample, in batch order, with its label
    assert [tr.name for tr in fig.data] == ["class 0", "class 1", "class 2"]
    assert nearest_neighbour_agreement(xy, label) >= 0.95


def test_eval_step_uses_the_eval_batch_and_labels(blobs_run):
    trial = mldbg.create_trial(blobs_run)
    points, ids, name = insight.embedding(trial, "relu2_output_0", 2, mode=Mode.EVAL)
    assert points.shape == (24, 2)
    assert name == "CrossEntropyLoss_input_1"
    assert ids.tolist() == trial.tensor(name).value(2, mode=Mode.EVAL).tolist()
    assert nearest_neighbour_agreement(points, ids) >= 0.95


def test_given_labels_and_no_labels(blobs_run):
    given = np.arange(48) % 2
    fig = insight.tsne(blobs_run, "fc1_output_0", 0, labels=given)
    assert points_and_labels(fig)[1].tolist() == given.tolist()
    with pytest.raises(InvalidConfig, match="do not give one class per row"):
        insight.tsne(blobs_run, "fc1_output_0", 0, labels=np.arange(5))


def test_too_few_samples_is_a_clear_error(blobs_run):
    with pytest.raises(InvalidConfig, match=r"t-SNE of 'out.weight' at step 3 .*only 3 samples"):
        insight.tsne(blobs_run, "out.weight", 3)  # 3 rows
    with pytest.raises(InvalidConfig, match="'CrossEntropyLoss_output_0'.* shape \\(\\)"):
        insight.tsne(blobs_run, "CrossEntropyLoss_output_0", 3)
