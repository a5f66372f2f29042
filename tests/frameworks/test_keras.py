"""`mldbg.keras.Hook` on each Keras 3 backend: round trip against values straight from Keras,
modes, activations, and the default rules on injected defects and their healthy twin.

Each backend trains once, in its own process (keras_job.py); the tests read what it wrote.
"""

from __future__ import annotations

import numpy as np
import pytest

import mldbg
from mldbg import Mode

BACKENDS = ["tensorflow", "jax", "torch"]
DEFECTS = {  # scenario of keras_job.py -> the rule that must fire
    "exploding": "exploding_tensor",
    "vanishing": "vanishing_gradient",
    "dead_relu": "dead_relu",
    "stalled": "loss_not_decreasing",
}
LR = 0.1
BATCH = 16


def _softmax_ce(logits: np.ndarray, labels: np.ndarray) -> float:
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(labels)), labels].mean())


@pytest.fixture(params=BACKENDS)
def roundtrip(request, keras_job):
    out, manifest = keras_job(request.param)
    ref = np.load(out / "reference.npz")
    return mldbg.create_trial(str(out / "roundtrip")), ref, manifest


@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_is_a_keras_callback_with_the_torch_hook_arguments(keras_job, backend):
    _, manifest = keras_job(backend)
    assert manifest["backend"] == backend
    assert manifest["is_callback"]
    torch_args = [a for a in manifest["torch_signature"] if a not in ("options",)]
    assert [a for a in manifest["signature"] if a != "options"] == torch_args


def test_weights_gradients_and_loss_match_keras(roundtrip):
    trial, ref, manifest = roundtrip
    names = manifest["roundtrip"]["weight_names"]
    assert names == ["hidden0/kernel", "hidden0/bias", "logits/kernel", "logits/bias"]
    steps = trial.steps(Mode.TRAIN)
    assert steps == list(range(manifest["roundtrip"]["steps"])) == list(range(8))
    assert set(trial.tensor_names(collection="biases")) == {"hidden0/bias", "logits/bias"}
    for s in steps:
        w = [ref[f"w{s}_{i}"] for i in range(4)]
        nxt = [ref[f"w{s + 1}_{i}"] for i in range(4)]
        for i, name in enumerate(names):
            np.testing.assert_array_equal(trial.tensor(name).value(s, mode=Mode.TRAIN), w[i], err_msg=name)
            # plain SGD: w_next = w - lr * g, so the gradient is what moved the weights
            grad = trial.tensor(f"gradient/{name}").value(s, mode=Mode.TRAIN)
            np.testing.assert_allclose(grad, (w[i] - nxt[i]) / LR, atol=2e-5, err_msg=f"gradient/{name}")
        batch = slice((s % 4) * BATCH, (s % 4 + 1) * BATCH)
        x, y = ref["x"][batch], ref["y"][batch]
        logits = np.maximum(x @ w[0] + w[1], 0) @ w[2] + w[3]
        loss = trial.tensor("loss").value(s, mode=Mode.TRAIN)
        assert float(loss) == pytest.approx(_softmax_ce(logits, y), rel=1e-4)


def test_inputs_labels_activations_and_modes(roundtrip):
    trial, ref, _ = roundtrip
    assert len(trial.steps(Mode.TRAIN)) == 8
    assert len(trial.steps(Mode.EVAL)) == 4  # 2 validation batches after each of 2 epochs
    assert len(trial.steps(Mode.PREDICT)) == 2
    assert [trial.mode(s) for s in trial.steps()] == [Mode.TRAIN] * 4 + [Mode.EVAL] * 2 + [Mode.TRAIN] * 4 + [
        Mode.EVAL
    ] * 2 + [Mode.PREDICT] * 2
    s = 5  # second epoch, second batch
    batch = slice(1 * BATCH, 2 * BATCH)
    x = ref["x"][batch]
    np.testing.assert_array_equal(trial.tensor("model_input_0").value(s, mode=Mode.TRAIN), x)
    np.testing.assert_array_equal(trial.tensor("labels_0").value(s, mode=Mode.TRAIN).ravel(), ref["y"][batch])
    w = [ref[f"w{s}_{i}"] for i in range(4)]
    pre = trial.tensor("hidden0/activation_input_0").value(s, mode=Mode.TRAIN)
    np.testing.assert_allclose(pre, x @ w[0] + w[1], rtol=1e-5, atol=1e-5)
    post = trial.tensor("hidden0/activation_output_0").value(s, mode=Mode.TRAIN)
    np.testing.assert_allclose(post, np.maximum(pre, 0), atol=1e-6)
    np.testing.assert_allclose(trial.tensor("hidden0_output_0").value(s, mode=Mode.TRAIN), post, atol=1e-6)
    collections = trial.collections()
    assert set(collections["relu_activations"]) == {
        "hidden0/activation_input_0",
        "hidden0/activation_output_0",
    }
    assert {"model_output_0"} <= set(collections["predictions"])
    assert {"optimizer/sgd/iteration"} <= set(collections["optimizer_variables"])
    assert {"metrics/loss", "metrics/accuracy"} <= set(collections["scalars"])
    # predictions in PREDICT mode are what model.predict returned
    preds = np.concatenate([trial.tensor("model_output_0").value(m, mode=Mode.PREDICT) for m in (0, 1)])
    np.testing.assert_allclose(preds, ref["predictions"], rtol=1e-5, atol=1e-6)
    # eval steps record the loss and the inputs, but no gradients
    np.testing.assert_array_equal(trial.tensor("model_input_0").value(1, mode=Mode.EVAL), ref["xv"][BATCH:])
    assert "gradient/hidden0/kernel" not in trial.tensor_names(mode=Mode.EVAL)
    assert trial.tensor("loss").steps(Mode.EVAL) == [0, 1, 2, 3]


def test_profiler_config_records_step_times(roundtrip):
    from mldbg.profiler.read import ProfilerData

    trial, _, _ = roundtrip
    assert ProfilerData(trial.path).has_steps


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_defects_show_in_the_record(keras_job, backend):
    out, manifest = keras_job(backend)
    losses = manifest["losses"]
    assert losses["healthy"][-1] < 0.8 * losses["healthy"][0]
    exploded = mldbg.create_trial(str(out / "exploding"))
    assert any(not np.isfinite(exploded.tensor("loss").value(s)) for s in exploded.steps())
    vanishing = mldbg.create_trial(str(out / "vanishing"))
    step = vanishing.steps()[-1]
    assert vanishing.tensor("gradient/hidden0/kernel").reduction_value(step, "mean", abs=True) < 1e-7
    dead = mldbg.create_trial(str(out / "dead_relu"))
    relu = dead.tensor("hidden0/activation_output_0").value(dead.steps()[-1])
    assert np.all(relu == 0)
    stalled = mldbg.create_trial(str(out / "stalled"))
    assert np.ptp([stalled.tensor("loss").value(s) for s in stalled.steps()[::8]]) < 1e-4


@pytest.mark.parametrize("defect", sorted(DEFECTS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_default_rules_fire_on_the_defect(keras_job, backend, defect):
    out, _ = keras_job(backend)
    findings = mldbg.check(str(out / defect))
    assert DEFECTS[defect] in {f.rule for f in findings}, [str(f) for f in findings]


@pytest.mark.parametrize("backend", BACKENDS)
def test_default_rules_stay_quiet_on_the_healthy_twin(keras_job, backend):
    out, _ = keras_job(backend)
    findings = mldbg.check(str(out / "healthy"))
    assert findings == [], [str(f) for f in findings]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_lstm_model_trains_and_records_with_the_two_lines(keras_job, backend):
    """A Keras LSTM's `activation` is a read-only property: the hook leaves it alone, the fit
    runs, and the loss and weights are recorded."""
    out, manifest = keras_job(backend)
    assert len(manifest["lstm"]) == 2 and all(np.isfinite(manifest["lstm"]))
    trial = mldbg.create_trial(str(out / "lstm"))
    assert len(trial.steps(mode=Mode.TRAIN)) == 16  # 2 epochs of 8 batches
    assert any("lstm" in n for n in trial.tensor_names(collection="weights"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_learning_rate_of_each_model_is_recorded_and_a_new_model_begins_a_phase(keras_job, backend):
    """`learning_rate/<model>` at TRAIN statistics steps, as Keras computes it (the teacher's
    cosine schedule at its iteration counter), only at the steps that apply an update (the
    student accumulates over 2 batches), and the student, first trained after the teacher,
    begins a new phase for the loss rules (`schedule_restarts`); a fit with `EarlyStopping`
    records `early_stopping` from its first step."""
    from mldbg.rules.losses import schedule_restarts
    from mldbg.rules.view import TrialView

    out, manifest = keras_job(backend)
    job = manifest["teacher_student"]
    trial = mldbg.create_trial(str(out / "teacher_student"))
    teacher, student = (f"learning_rate/{job[k]}" for k in ("teacher", "student"))
    steps = trial.tensor(teacher).steps(Mode.TRAIN)
    assert steps == list(range(16))  # every step of the first 20 of the mode
    got = [trial.tensor(teacher).reduction_value(s, "sum") for s in steps]
    np.testing.assert_allclose(got, job["rates"], rtol=1e-6)
    assert len(set(np.round(got, 9))) > 8  # the schedule moved
    steps = trial.tensor(student).steps(Mode.TRAIN)
    assert steps and all(s >= 16 and (s - 16) % 2 == 1 for s in steps), steps
    assert steps[0] == 17
    assert [trial.tensor(student).reduction_value(s, "sum") for s in steps] == pytest.approx(
        [1e-3] * len(steps)
    )
    assert schedule_restarts(TrialView(trial)) == [(15, 17)]
    # the student's fit runs under `EarlyStopping` (its sibling callback): `overfit` reads it
    assert trial.tensor("early_stopping").steps(Mode.TRAIN)[0] == 16
