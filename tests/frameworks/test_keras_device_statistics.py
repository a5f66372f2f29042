"""The default statistics of Keras (each backend) and of the TensorFlow tape (eagerly and
under `tf.function`) are computed where the tensors live: after the first step (whose raw
tensors the default SaveConfig saves), no large tensor reaches the host, every statistics
tensor took the device path, and the statistics are there."""

from __future__ import annotations

from pathlib import Path

import pytest
from framework_jobs import run_job

import mldbg
from mldbg import Mode

BACKENDS = ("tensorflow", "jax", "torch")


@pytest.fixture(scope="module", params=BACKENDS)
def device_job(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp(f"keras_device_{request.param}")
    manifest = run_job("keras_device_job.py", out, env={"KERAS_BACKEND": request.param})
    assert manifest["backend"] == request.param
    return out, manifest


def test_no_large_host_copy_after_the_first_step(device_job):
    out, manifest = device_job
    expected = {"keras", "tape_eager", "tape_graph"} if manifest["backend"] == "tensorflow" else {"keras"}
    assert set(manifest["runs"]) == expected
    for run, found in manifest["runs"].items():
        late = [(step, size) for step, size in found["copies"] if step > 0]
        assert not late, (run, late[:5])
        assert found["routes"] and set(found["routes"].values()) == {"device"}, (run, found["routes"])
        assert {"big/kernel", "gradient/big/kernel", "big/activation_input_0"} <= set(found["routes"]), run


def test_the_device_statistics_are_recorded(device_job):
    out, manifest = device_job
    for run in manifest["runs"]:
        trial = mldbg.create_trial(str(out / run))
        kernel = trial.record("big/kernel", 5, mode=Mode.TRAIN).statistics
        assert kernel["delta_l2"] > 0 and kernel["requires_grad"] == 1.0, (run, kernel)
        grad = trial.record("gradient/big/kernel", 20, mode=Mode.TRAIN).statistics
        assert grad["l2"] > 0 and grad["nan_count"] == 0, (run, grad)
        active = trial.tensor("stats/big/activation_input_0/unit_active").value(3)
        assert active.shape == (256,) and active.max() <= 8, run
        counts = trial.tensor("stats/labels_0/class_counts").value(3)
        assert counts.sum() == 8, run
        assert not mldbg.check(str(out / run)), run
