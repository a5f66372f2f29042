"""`reduce_runs`: the tidy table of reductions across a sweep equals what each trial reads."""

from __future__ import annotations

import math

import pytest

import mldbg
from mldbg.errors import InvalidConfig, TensorUnavailable
from mldbg.scale import reduce_runs
from tests.scale.conftest import HEALTHY, SWEEP

LOSS = "CrossEntropyLoss_output_0"


def test_values_equal_the_trials_reduction_values(sweep, client, tmp_path):
    missing = str(tmp_path / "gone")
    df = reduce_runs(
        [str(sweep.root), missing], [LOSS, "gradient/fc1.weight"], ["mean", "abs_max", "l2"], client=client
    )
    assert list(df.columns) == ["run", "worker", "step", "mode", "mode_step", "tensor", "reduction", "value"]
    assert "no recorded run" in df.attrs["errors"][missing]
    assert set(df.run) == {sweep.path(n) for n in SWEEP}
    expected = 0
    for name in SWEEP:
        trial = mldbg.create_trial(sweep.path(name))
        for tensor in (LOSS, "gradient/fc1.weight"):
            for step in trial.tensor(tensor).steps():
                expected += 3 * len(trial.tensor(tensor).workers(step))
    assert len(df) == expected
    trials = {}
    for row in df.itertuples():
        trial = trials.setdefault(row.run, mldbg.create_trial(row.run))
        reduction, is_abs = row.reduction.removeprefix("abs_"), row.reduction.startswith("abs_")
        want = trial.tensor(row.tensor).reduction_value(row.step, reduction, abs=is_abs, worker=row.worker)
        assert row.value == want or (math.isnan(row.value) and math.isnan(want)), row
        assert row.mode == trial.mode(row.step).name and row.mode_step == trial.mode_step(row.step)
    assert set(df["mode"]) == {"TRAIN", "EVAL"}


def test_final_loss_per_learning_rate(sweep, client):
    df = reduce_runs(f"{sweep.root}/lr_0.*", LOSS, mode="train", client=client)
    assert set(df["mode"]) == {"TRAIN"}
    final = df.sort_values("step").groupby("run").value.last()
    for name in HEALTHY:  # the last recorded training loss is the one the training loop saw
        assert final[sweep.path(name)] == pytest.approx(sweep.runs[name].train_losses[-1], rel=1e-6)
    assert final[sweep.path("lr_0.2")] < final[sweep.path("lr_0.1")] < final[sweep.path("lr_0.05")]


def test_regexes_and_mistakes(sweep, client):
    df = reduce_runs(sweep.path("lr_0.1"), "gradient/fc.*", "l2", client=client)
    assert set(df.tensor) == {
        "gradient/fc1.weight",
        "gradient/fc1.bias",
        "gradient/fc2.weight",
        "gradient/fc2.bias",
    }
    with pytest.raises(TensorUnavailable, match="no tensor matches 'no_such_tensor'"):
        reduce_runs(sweep.path("lr_0.1"), "no_such_tensor", client=client)
    with pytest.raises(InvalidConfig, match="unknown reduction 'median'"):
        reduce_runs(sweep.path("lr_0.1"), LOSS, "median", client=client)


def test_a_row_per_worker(two_worker_run, client):
    df = reduce_runs(two_worker_run, LOSS, ["mean"], mode="TRAIN", client=client)
    trial = mldbg.create_trial(two_worker_run)
    assert trial.workers() == ["worker_0", "worker_1"]
    assert len(df) == 2 * len(trial.tensor(LOSS).steps(mldbg.Mode.TRAIN))
    for row in df.itertuples():
        want = trial.tensor(LOSS).reduction_value(row.step, "mean", worker=row.worker)
        assert row.value == want or (math.isnan(row.value) and math.isnan(want)), row
    by_worker = df.pivot(index="step", columns="worker", values="value")
    assert by_worker.worker_0.notna().all() and by_worker.worker_1.isna().any()  # rank 1 exploded
