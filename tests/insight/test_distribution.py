"""distribution() and histograms(): the bands and counts are those of the recorded values."""

import numpy as np
import pytest

import mldbg
from mldbg import Mode, insight
from mldbg.errors import InvalidConfig, TensorUnavailable, TensorUnavailableForStep
from tests.insight.runs import REDUCED


def by_percentile(fig):
    return {tr.meta["percentile"]: np.asarray(tr.y, dtype=float) for tr in fig.data}


@pytest.mark.parametrize("name", ["fc1.weight", "gradient/fc1.weight", "relu1_output_0"])
def test_bands_are_the_percentiles_of_the_recorded_values(blobs_run, name):
    trial = mldbg.create_trial(blobs_run)
    fig = insight.distribution(trial, name)
    steps = trial.tensor(name).steps()
    assert list(fig.data[0].x) == steps and len(steps) > 5
    bands = by_percentile(fig)
    assert sorted(bands) == [0, 6.68, 15.87, 30.85, 50, 69.15, 84.13, 93.32, 100]  # TensorBoard's
    for i, s in enumerate(steps):
        v = trial.tensor(name).value(s)
        for q, y in bands.items():  # computed in float64 from the recorded float32 values
            assert y[i] == pytest.approx(np.percentile(v.astype(np.float64), q), rel=1e-12, abs=1e-15), (s, q)
            assert y[i] == pytest.approx(np.percentile(v, q), rel=1e-6), (s, q)
    assert np.all(bands[0] <= bands[50]) and np.all(bands[50] <= bands[100]) and np.all(bands[0] < bands[100])


def test_mode_reads_that_modes_steps(blobs_run):
    trial = mldbg.create_trial(blobs_run)
    fig = insight.distribution(blobs_run, "relu1_output_0", mode="eval")
    assert list(fig.data[0].x) == trial.tensor("relu1_output_0").steps(Mode.EVAL) == [0, 1, 2]
    median = by_percentile(fig)[50]
    for s in (0, 1, 2):
        assert median[s] == pytest.approx(np.median(trial.tensor("relu1_output_0").value(s, mode=Mode.EVAL)))
    assert fig.layout.xaxis.title.text == "eval step"


def test_one_workers_values(two_workers_run):
    trial = mldbg.create_trial(two_workers_run)
    w0, w1 = (
        by_percentile(insight.distribution(trial, "gradient/fc1.weight", worker=w))
        for w in ("worker_0", "worker_1")
    )
    for s in (0, 1, 2):
        v = trial.tensor("gradient/fc1.weight").value(s, worker="worker_1").astype(np.float64)
        assert w1[50][s] == pytest.approx(np.median(v), rel=1e-12)
    assert not np.allclose(w0[50], w1[50])  # each worker's own gradients
    with pytest.raises(TensorUnavailableForStep, match="not saved by worker 'worker_7'"):
        insight.distribution(trial, "gradient/fc1.weight", worker="worker_7")


def test_histogram_counts_are_those_of_the_values_on_shared_bins(blobs_run):
    trial = mldbg.create_trial(blobs_run)
    steps = [0, 5, 13]
    for style in ("ridge", "slider"):
        fig = insight.histograms(trial, "gradient/fc1.weight", steps=steps, bins=20, style=style)
        assert len(fig.data) == 3
        values = [trial.tensor("gradient/fc1.weight").value(s).ravel() for s in steps]
        edges = np.linspace(min(v.min() for v in values), max(v.max() for v in values), 21)
        for tr, v in zip(fig.data, values, strict=True):
            counts = np.asarray(tr.customdata)
            counts = counts[1:-1] if style == "ridge" else counts  # ridge: a closed outline
            assert counts.tolist() == np.histogram(v, bins=edges)[0].tolist()
    assert [tr.visible for tr in fig.data] == [False, False, True]  # the slider starts at the last step
    assert len(fig.layout.sliders[0].steps) == 3


def test_default_histogram_steps_are_spread_over_the_run(blobs_run):
    fig = insight.histograms(blobs_run, "fc1.weight")
    assert len(fig.data) == 12  # 15 saved steps, at most 12 drawn
    assert fig.layout.yaxis.ticktext[0] == "0" and fig.layout.yaxis.ticktext[-1] == "14"


def test_errors_name_the_tensor(blobs_run):
    with pytest.raises(TensorUnavailable, match="no tensor 'fc9.weight'"):
        insight.distribution(blobs_run, "fc9.weight")
    with pytest.raises(InvalidConfig, match=f"only reductions of '{REDUCED}'"):
        insight.distribution(blobs_run, REDUCED)
    with pytest.raises(InvalidConfig, match="'fc1.weight' was not saved at step"):
        insight.histograms(blobs_run, "fc1.weight", steps=[0, 99])
