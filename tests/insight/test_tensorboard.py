"""export_tensorboard(): read back with TensorBoard's own EventAccumulator, the logs hold the
trial's scalars at the trial's steps, one TensorBoard run per mode, and histograms of the raw
tensors (one tag per worker when several saved one)."""

import sys
import types

import numpy as np
import pytest

import mldbg
import mldbg.torch
from mldbg import Mode, insight
from tests.insight.runs import REDUCED, record_blobs

LOSS = "CrossEntropyLoss_output_0"
ALL = {"scalars": 0, "histograms": 0, "compressedHistograms": 0}  # 0: keep every event


@pytest.fixture(scope="module")
def accumulator():
    """TensorBoard's reader. Its file access goes through `tensorboard.compat.tf`, which imports
    TensorFlow when installed (seconds); `tensorboard.compat.notf` is TensorBoard's own switch
    to its pure-Python gfile instead. The reading code is the same."""
    sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def read(folder):
        acc = EventAccumulator(str(folder), size_guidance=ALL)
        acc.Reload()
        return acc

    return read


def mode_steps(trial, name, mode):
    """Global steps of `mode` at which `name` was saved."""
    return [s for s in trial.tensor(name).steps() if trial.mode(s) == mode]


def test_scalars_per_mode_at_the_trials_steps(blobs_run, tmp_path, accumulator):
    trial = mldbg.create_trial(blobs_run)
    counts = insight.export_tensorboard(blobs_run, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval", "train"]
    train, ev = accumulator(tmp_path / "train"), accumulator(tmp_path / "eval")
    for acc, mode in ((train, Mode.TRAIN), (ev, Mode.EVAL)):
        events = acc.Scalars(LOSS)
        steps = mode_steps(trial, LOSS, mode)
        assert [e.step for e in events] == steps and steps
        expected = [float(trial.tensor(LOSS).value(s)) for s in steps]
        assert [e.value for e in events] == pytest.approx(expected, rel=1e-6)
    assert [e.step for e in ev.Scalars(LOSS)] == [4, 9, 14]
    accuracy = train.Scalars("accuracy")
    assert [e.value for e in accuracy] == pytest.approx(
        [float(trial.tensor("accuracy").value(s)) for s in mode_steps(trial, "accuracy", Mode.TRAIN)]
    )
    assert "accuracy" not in ev.Tags()["scalars"]
    assert counts.scalars["eval"] == 3  # the loss, at three evaluation steps


def test_saved_reductions_are_scalars(blobs_run, tmp_path, accumulator):
    trial = mldbg.create_trial(blobs_run)
    insight.export_tensorboard(trial, tmp_path)
    train = accumulator(tmp_path / "train")
    tensor = trial.tensor(REDUCED)
    saved = (("mean", "mean", False), ("max", "max", False), ("abs_mean", "mean", True), ("l2", "l2", False))
    for tag, reduction, absolute in saved:
        events = train.Scalars(f"{REDUCED}/{tag}")
        assert [e.step for e in events] == tensor.steps()
        assert [e.value for e in events] == pytest.approx(
            [tensor.reduction_value(s, reduction, abs=absolute) for s in tensor.steps()], rel=1e-6, abs=1e-30
        )
    assert REDUCED not in train.Tags()["histograms"]  # no raw values were saved


def test_histograms_of_raw_tensors(blobs_run, tmp_path, accumulator):
    trial = mldbg.create_trial(blobs_run)
    insight.export_tensorboard(blobs_run, tmp_path, bins=16)
    train, ev = accumulator(tmp_path / "train"), accumulator(tmp_path / "eval")
    assert {"fc1.weight", "gradient/fc1.weight", "relu1_output_0", "model_input_0"} <= set(
        train.Tags()["histograms"]
    )
    assert "gradient/fc1.weight" not in ev.Tags()["histograms"]  # no gradients in evaluation
    for acc, name, mode in ((train, "gradient/fc1.weight", Mode.TRAIN), (ev, "relu1_output_0", Mode.EVAL)):
        events = acc.Histograms(name)
        assert [e.step for e in events] == mode_steps(trial, name, mode)
        for e in events:
            v = trial.tensor(name).value(e.step).astype(np.float64).ravel()
            h = e.histogram_value
            assert (h.num, h.min, h.max) == (v.size, v.min(), v.max())
            assert h.sum == pytest.approx(v.sum()) and h.sum_squares == pytest.approx((v * v).sum())
            counts, edges = np.histogram(v, bins=16)
            assert list(h.bucket) == counts.tolist() and list(h.bucket_limit) == pytest.approx(edges[1:])


def test_one_tag_per_worker(two_workers_run, tmp_path, accumulator):
    trial = mldbg.create_trial(two_workers_run)
    insight.export_tensorboard(two_workers_run, tmp_path)
    train = accumulator(tmp_path / "train")
    tags = train.Tags()
    for worker in ("worker_0", "worker_1"):
        events = train.Scalars(f"{LOSS}/{worker}")
        assert [e.step for e in events] == [0, 1, 2]
        assert [e.value for e in events] == pytest.approx(
            [float(trial.tensor(LOSS).value(s, worker=worker)) for s in (0, 1, 2)], rel=1e-6
        )
        grads = train.Histograms(f"gradient/fc1.weight/{worker}")
        assert [g.histogram_value.sum for g in grads] == pytest.approx(
            [float(trial.tensor("gradient/fc1.weight").value(s, worker=worker).sum()) for s in (0, 1, 2)]
        )
    assert LOSS not in tags["scalars"] and "fc1.weight" not in tags["histograms"]
    w0 = train.Histograms("gradient/fc1.weight/worker_0")[0].histogram_value
    w1 = train.Histograms("gradient/fc1.weight/worker_1")[0].histogram_value
    assert w0.sum != w1.sum  # each worker's own data


def test_export_again_replaces_and_update_appends_only_new_steps(tmp_path, accumulator):
    first = record_blobs(tmp_path / "first", steps=4, eval_every=100)
    logdir = tmp_path / "tb"
    insight.export_tensorboard(first, logdir)
    insight.export_tensorboard(first, logdir)  # again: replaces, no duplicates
    assert len(list((logdir / "train").iterdir())) == 1
    assert [e.step for e in accumulator(logdir / "train").Scalars(LOSS)] == [0, 1, 2, 3]

    with insight.TensorBoardExport(first, tmp_path / "tb2") as export:
        before = export.update()
        assert export.update().total == 0  # nothing new
    assert before.scalars["train"] == 4 * 6  # per step: loss, accuracy, and 4 reductions of REDUCED
    assert [e.step for e in accumulator(tmp_path / "tb2" / "train").Scalars("accuracy")] == [0, 1, 2, 3]


def test_follow_a_run_being_written(tmp_path, accumulator):
    """Export while training writes: each update adds only the steps written since the last."""
    import torch
    from torch import nn

    from tests.tiny import mlp

    net, loss_fn = mlp(4, 2, width=4, depth=1), nn.MSELoss()
    hook = mldbg.torch.Hook(tmp_path / "run", save_config=mldbg.SaveConfig(save_interval=1))
    hook.register_module(net)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x, y = torch.ones(3, 4), torch.zeros(3, 2)

    def train(n):
        for _ in range(n):
            opt.zero_grad()
            loss_fn(net(x), y).backward()
            opt.step()

    train(3)
    hook.recorder.flush()
    export = insight.TensorBoardExport(tmp_path / "run", tmp_path / "tb")
    assert export.update().scalars == {"train": 3}
    train(2)
    hook.close()
    assert export.follow(poll=0.05, timeout=30).scalars == {"train": 2}
    export.close()
    assert [e.step for e in accumulator(tmp_path / "tb" / "train").Scalars("MSELoss_output_0")] == [
        0,
        1,
        2,
        3,
        4,
    ]
