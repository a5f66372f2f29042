"""The two lines on Keras 3 (TensorFlow backend) and on a custom TensorFlow loop record the
statistics of the default rules: they equal the NumPy reference on the raw tensors of the
same steps, and `mldbg.check` catches each injected defect and stays quiet on its healthy twin.

Everything trains once, in one subprocess (keras_statistics_job.py: TensorFlow is slow to
import); the tests read what it wrote.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from framework_jobs import run_job

import mldbg
from mldbg import Mode
from mldbg.store import statistics as st

# scenario of keras_statistics_job.py -> rules any of which must fire (() for a healthy twin)
EXPECTED = {
    "healthy relu": (),
    "exploding (lr 1e12)": ("exploding_tensor", "tensor_variance"),
    "dead relu (bias -10)": ("dead_relu",),
    "healthy tanh": (),
    "saturated tanh (inputs x100)": ("tanh_saturation",),
    "healthy sigmoid": (),
    "saturated sigmoid (inputs x100)": ("sigmoid_saturation",),
}
TAPE = ("healthy relu", "exploding (lr 1e12)", "dead relu (bias -10)", "saturated tanh (inputs x100)")
COMPARE = ("compare_keras", "compare_mixed", "compare_tape_eager", "compare_tape_graph")
BACKENDS = ("jax", "torch")  # the TensorFlow backend runs everything in `job`


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("keras_statistics")
    run_job("keras_statistics_job.py", out, env={"KERAS_BACKEND": "tensorflow"})
    return out


@pytest.fixture(scope="module", params=BACKENDS)
def backend_job(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same Keras code on the JAX (statistics through `jax.debug.callback`) and PyTorch
    backends: the compare run and three scenarios."""
    out = tmp_path_factory.mktemp(f"keras_statistics_{request.param}")
    manifest = run_job(
        "keras_statistics_job.py", out, "--backend-smoke", env={"KERAS_BACKEND": request.param}
    )
    assert manifest["backend"] == request.param
    return out


def test_other_backends_record_the_same_statistics(backend_job):
    # the torch and JAX hooks' device code accumulates float32 in float32 (docs/statistics.md)
    test_statistics_equal_numpy_on_the_raw_tensors(backend_job, "compare_keras", 1e-5)
    test_class_statistics_of_labels_and_predictions(backend_job, "compare_keras")
    for name in ("healthy relu", "exploding (lr 1e12)", "dead relu (bias -10)"):
        fired = {f.rule for f in mldbg.check(str(backend_job / "keras" / name))}
        expected = EXPECTED[name]
        assert fired & set(expected) if expected else not fired, (name, sorted(fired))


def _assert_close(got: float, want: float, what: str, rtol: float = 1e-9, scale: float = 1.0) -> None:
    if math.isnan(want):
        assert math.isnan(got), what
    else:  # the reference on the same float32 copy, in float64 both times (TensorFlow, host copies)
        assert got == pytest.approx(want, rel=rtol, abs=max(1e-12, rtol * scale * 1e-2)), what


@pytest.mark.parametrize("run", COMPARE)
def test_statistics_equal_numpy_on_the_raw_tensors(job, run, rtol=1e-9):
    trial = mldbg.create_trial(str(job / run))
    compared, vectors, previous = 0, 0, {}
    for name in trial.tensor_names():
        if name.startswith(("inputs_rescaled/", "learning_rate/")):
            continue  # the hook's facts about the model and its optimizer (statistics only), not tensors
        records = trial.records(name)
        for i in range(len(records)):
            rec = records[i]
            if not rec.statistics:
                continue
            raw = trial.tensor(name).value(rec.step)
            axis = -1 if raw.ndim > 2 else None
            prev = previous.get(name) if {"delta_l2", "sample_change"} & set(rec.statistics) else None
            want = st.compute(raw, tuple(rec.statistics), unit_axis=axis, previous=prev)
            for key, value in rec.statistics.items():
                if key == "requires_grad":
                    assert value == 1.0, name  # every variable of these models trains
                else:
                    scale = float(np.max(np.abs(raw.astype(np.float64)))) if raw.size else 1.0
                    _assert_close(value, float(want[key]), f"{name} {key} at step {rec.step}", rtol, scale)
                compared += 1
            if {"delta_l2", "sample_change"} & set(rec.statistics):
                previous[name] = raw
            for key, vector in trial.vector_statistics(name).items():
                if key in st.CLASS_VECTORS or rec.step not in trial.tensor(vector).steps():
                    continue
                expected = st.compute(raw, (key,), unit_axis=axis)[key]
                tol = (1e-12, 0.0) if rtol <= 1e-9 else (rtol, rtol * 1e-2 * float(np.max(np.abs(raw))))
                np.testing.assert_allclose(trial.tensor(vector).value(rec.step), expected, *tol)
                vectors += 1
    assert compared > 200 and vectors > 10, (compared, vectors)


@pytest.mark.parametrize("run", COMPARE)
def test_class_statistics_of_labels_and_predictions(job, run):
    trial = mldbg.create_trial(str(job / run))
    steps = trial.tensor("stats/labels_0/class_counts").steps()
    assert steps == trial.tensor("stats/model_output_0/class_counts").steps()
    assert len(steps) >= 4
    for step in steps:
        labels, preds = trial.tensor("labels_0").value(step), trial.tensor("model_output_0").value(step)
        on_labels, on_preds = st.class_statistics(labels, preds)
        for key in ("class_counts", "class_correct", "confusion"):
            np.testing.assert_array_equal(trial.tensor(f"stats/labels_0/{key}").value(step), on_labels[key])
        np.testing.assert_array_equal(
            trial.tensor("stats/model_output_0/class_counts").value(step), on_preds["class_counts"]
        )


def test_keras_records_what_the_torch_hook_does(job):
    """Parameters and gradients in TRAIN only; the activation inputs per channel (the conv
    layer's 4 filters, channels-last); EVAL outputs with their fingerprint; the cadence."""
    trial = mldbg.create_trial(str(job / "compare_keras"))
    names = set(trial.tensor_names())
    assert {"conv/kernel", "conv/bias", "gradient/conv/kernel", "conv/activation_input_0", "act_input_0",
            "gate/activation_input_0", "model_input_0", "model_output_0", "labels_0", "loss"} <= names  # fmt: skip
    stat_steps = [r.mode_step for r in _records(trial, "gradient/conv/kernel") if r.statistics]
    assert stat_steps == [0, 1, 3, 6]  # warmup 2, then every 3rd of 9 TRAIN steps
    assert trial.record("conv/kernel", 3).statistics["delta_l2"] > 0
    assert trial.record("conv/bias", 0).statistics.keys() == set(st.DEFAULTS["biases"])
    assert trial.record("gradient/dense/kernel", 0).statistics.keys() == set(st.DEFAULTS["gradients"])
    assert trial.tensor("stats/conv/activation_input_0/unit_active").value(0).shape == (4,)
    assert "unit_outside(-9.4999,9.4999)" in trial.vector_statistics("act_input_0")
    assert "unit_outside(-23.0,16.99999)" in trial.vector_statistics("gate/activation_input_0")
    assert trial.tensor("stats/model_input_0/channel_mean").value(0).shape == (2,)  # channels-last
    # what the first learned layer sees of the input: nothing rescales it before the conv
    scale, offset = (
        trial.record(f"inputs_rescaled/model/{k}", 0).statistics["sum"] for k in ("scale", "offset")
    )
    assert (scale, offset) == (1.0, 0.0)
    eval_out = trial.record("model_output_0", 1, mode=Mode.EVAL).statistics
    assert "fingerprint" in eval_out and "fingerprint" not in trial.record("model_output_0", 0).statistics
    assert not any(r.statistics for r in _records(trial, "conv/kernel") if r.mode == Mode.EVAL)


def _records(trial, name):
    records = trial.records(name)
    return [records[i] for i in range(len(records))]


def test_the_two_lines_save_the_loss_every_step_and_no_other_raw_tensor_after_the_first(job):
    trial = mldbg.create_trial(str(job / "keras" / "healthy relu"))
    assert trial.tensor("loss").steps(Mode.TRAIN) == list(range(80))
    raw_late = {
        n for n in trial.tensor_names() for r in _records(trial, n) if r.has_raw and r.mode_step > 0
    }  # the default SaveConfig saves each mode's step 0 (and every 500th)
    assert raw_late <= {"loss", "metrics/loss", "metrics/val_loss"}, raw_late
    stat_steps = [r.mode_step for r in _records(trial, "gradient/hidden0/kernel") if r.statistics]
    assert stat_steps == list(range(20)) + list(range(20, 80, 10))


@pytest.mark.parametrize("loop", ["keras", "tape_eager", "tape_graph"])
def test_default_rules_catch_the_defect_or_stay_quiet(job, loop):
    scenarios = EXPECTED if loop == "keras" else {name: EXPECTED[name] for name in TAPE}
    wrong = {}
    for name, expected in scenarios.items():
        fired = {f.rule for f in mldbg.check(str(job / loop / name))}
        if (expected and not fired & set(expected)) or (not expected and fired):
            wrong[name] = (expected, sorted(fired))
    assert not wrong, wrong
