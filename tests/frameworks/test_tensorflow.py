"""`mldbg.tensorflow.Hook` on custom loops (eagerly and inside `tf.function`), and
`mldbg.keras.Hook` through the `tf.keras` namespace, against values straight from TensorFlow."""

from __future__ import annotations

import numpy as np
import pytest
from framework_jobs import run_job

import mldbg
from mldbg import Mode

LR = 0.1
NAMES = ["hidden/kernel", "hidden/bias", "logits/kernel", "logits/bias"]


@pytest.fixture(scope="module")
def tf_job(tmp_path_factory):
    out = tmp_path_factory.mktemp("tf")
    manifest = run_job("tf_job.py", out)
    return out, np.load(out / "reference.npz"), manifest


@pytest.mark.parametrize("tag", ["eager", "graph"])
def test_custom_loop_records_weights_gradients_loss_and_activations(tf_job, tag):
    out, ref, _ = tf_job
    trial = mldbg.create_trial(str(out / tag))
    assert trial.steps(Mode.TRAIN) == [0, 1, 2, 3]
    x = ref["x"]
    for s in range(4):
        w = [ref[f"{tag}_w{s}_{i}"] for i in range(4)]
        nxt = [ref[f"{tag}_w{s + 1}_{i}"] for i in range(4)]
        for i, name in enumerate(NAMES):
            np.testing.assert_array_equal(trial.tensor(name).value(s, mode=Mode.TRAIN), w[i], err_msg=name)
            grad = trial.tensor(f"gradient/{name}").value(s, mode=Mode.TRAIN)
            np.testing.assert_allclose(grad, (w[i] - nxt[i]) / LR, atol=2e-5, err_msg=f"gradient/{name}")
        assert float(trial.tensor("loss").value(s, mode=Mode.TRAIN)) == pytest.approx(
            float(ref[f"{tag}_loss{s}"])
        )
        pre = x[s * 16 : (s + 1) * 16] @ w[0] + w[1]
        np.testing.assert_allclose(
            trial.tensor("hidden/activation_input_0").value(s, mode=Mode.TRAIN), pre, atol=1e-5
        )
        post = trial.tensor("hidden/activation_output_0").value(s, mode=Mode.TRAIN)
        np.testing.assert_allclose(post, np.tanh(pre), atol=1e-5)
        np.testing.assert_allclose(
            trial.tensor("logits_output_0").value(s, mode=Mode.TRAIN), post @ w[2] + w[3], atol=1e-5
        )
    assert set(trial.collections()["tanh_activations"]) == {
        "hidden/activation_input_0",
        "hidden/activation_output_0",
    }


@pytest.mark.parametrize("tag", ["eager", "graph"])
def test_custom_loop_eval_step(tf_job, tag):
    out, ref, _ = tf_job
    trial = mldbg.create_trial(str(out / tag))
    assert trial.steps(Mode.EVAL) == [0]
    assert trial.mode(4) == Mode.EVAL
    np.testing.assert_array_equal(trial.tensor("model_input_0").value(0, mode=Mode.EVAL), ref["x"][:16])
    np.testing.assert_array_equal(trial.tensor("labels_0").value(0, mode=Mode.EVAL), ref["y"][:16])
    np.testing.assert_allclose(
        trial.tensor("model_output_0").value(0, mode=Mode.EVAL), ref[f"{tag}_eval_logits"], atol=1e-6
    )
    assert "loss" in trial.tensor_names(mode=Mode.EVAL)
    assert "gradient/hidden/kernel" not in trial.tensor_names(mode=Mode.EVAL)


def test_tf_keras_fit(tf_job):
    out, ref, manifest = tf_job
    assert manifest["tf_keras"].startswith("keras")  # tf.keras is Keras 3 here
    trial = mldbg.create_trial(str(out / "tf_keras"))
    assert trial.steps(Mode.TRAIN) == [0, 1, 2, 3]
    assert set(trial.tensor_names()) >= {*NAMES, *(f"gradient/{n}" for n in NAMES), "loss"}
    for s in range(4):
        for i, name in enumerate(NAMES):
            w, nxt = ref[f"fit_w{s}_{i}"], ref[f"fit_w{s + 1}_{i}"]
            np.testing.assert_array_equal(trial.tensor(name).value(s), w)
            np.testing.assert_allclose(trial.tensor(f"gradient/{name}").value(s), (w - nxt) / LR, atol=2e-5)
