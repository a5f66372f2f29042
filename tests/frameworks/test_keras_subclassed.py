"""`mldbg.keras.Hook` on `keras.Model` subclasses that call their layers in `call()`: a
BiGRU tagger and a Conv1D tagger (`Embedding(mask_zero=True)`, per-token softmax), the Conv1D
tagger with a custom `train_step`, and a layer called only inside a `fori_loop`. On TensorFlow
the model builds itself while the recording step is traced (Keras runs `call` once in a scratch
graph): the hook used to capture those placeholders and crash with `InaccessibleTensorError`.

Each backend trains every model twice in one subprocess (keras_subclassed_job.py), with the two
lines and with a plain callback: the training must complete unchanged, and the statistics of
the default rules be recorded.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from framework_jobs import run_job

import mldbg
from mldbg import Mode
from mldbg.store import statistics as st

BACKENDS = ["tensorflow", "jax", "torch"]
MODELS = ["bigru", "conv", "custom_step", "loop"]
STEPS = 4


@pytest.fixture(scope="module", params=BACKENDS)
def job(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp(f"keras_subclassed_{request.param}")
    # eight tiny trainings: minutes on a loaded 2-core machine
    manifest = run_job("keras_subclassed_job.py", out, env={"KERAS_BACKEND": request.param}, timeout=900)
    assert manifest["backend"] == request.param
    return out, manifest


def _statistics_steps(trial: Any, name: str) -> list[int]:
    records = trial.records(name)
    return [records[i].mode_step for i in range(len(records)) if records[i].statistics]


@pytest.mark.parametrize("model", MODELS)
def test_training_completes_unchanged(job, model):
    _, manifest = job
    hook, plain = manifest[model]["hook"], manifest[model]["plain"]
    assert len(hook["losses"]) == len(plain["losses"]) == STEPS
    for got, want in zip(hook["losses"], plain["losses"], strict=True):
        assert math.isfinite(got) and got == pytest.approx(want, rel=1e-5, abs=1e-6)
    for got, want in zip(hook["weights"], plain["weights"], strict=True):
        assert got == pytest.approx(want, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("model", ["bigru", "conv", "custom_step"])
def test_the_default_statistics_are_recorded(job, model):
    out, manifest = job
    assert manifest[model]["hook"]["warnings"] == []  # everything of these models can be recorded
    trial = mldbg.create_trial(str(out / model))
    names = set(trial.tensor_names())
    every = list(range(STEPS))
    for name in ("model_input_0", "model_output_0", "labels_0"):
        assert _statistics_steps(trial, name) == every, name
    if not (model == "custom_step" and manifest["backend"] == "jax"):  # that step never calls compute_loss
        assert trial.tensor("loss").steps(Mode.TRAIN) == every
    gradients = {n for n in names if n.startswith("gradient/")}
    assert {"gradient/embed/embeddings", "gradient/out/kernel", "gradient/out/bias"} <= gradients
    assert any(n.startswith("gradient/mid/") for n in gradients), gradients
    for name in gradients:
        assert _statistics_steps(trial, name) == every, name
    weights = {n[len("gradient/") :] for n in gradients}
    assert weights <= names
    # TensorFlow builds a subclassed model while it traces the first step: its step-0 weights
    # are read inside the step, before the optimizer writes them
    for name in weights:
        assert _statistics_steps(trial, name) == every, name
        # the weights the first step trained from (saved raw at step 0): had they been read
        # after the optimizer's update, step 1 would see no change
        raw = trial.tensor(name).value(0, mode=Mode.TRAIN)
        stats = trial.record(name, 0).statistics
        want = st.compute(raw, tuple(k for k in stats if k not in ("requires_grad", "delta_l2")))
        for key, value in want.items():
            assert stats[key] == pytest.approx(float(value), rel=1e-5, abs=1e-7), (name, key)
        assert trial.record(name, 1).statistics["delta_l2"] > 0, name
    # the conv's relu; the GRU cells' tanh (their first time step)
    activation = [n for n in names if n.startswith("mid/") and n.endswith("/activation_input_0")]
    assert len(activation) == (2 if model == "bigru" else 1), names
    for name in activation:
        assert _statistics_steps(trial, name) == every, name


def test_a_layer_the_step_cannot_read_is_skipped_with_one_warning(job):
    out, manifest = job
    trial = mldbg.create_trial(str(out / "loop"))
    names = set(trial.tensor_names())
    assert {"model_output_0", "loss", "gradient/embed/embeddings", "gradient/step/kernel"} <= names
    assert _statistics_steps(trial, "model_output_0") == list(range(STEPS))
    warned = manifest["loop"]["hook"]["warnings"]
    if manifest["backend"] == "tensorflow":  # the Dense inside the tf.while_loop
        assert len(warned) == 1 and "is not recorded" in warned[0] and "training is unchanged" in warned[0]
        assert "step/activation_input_0" in warned[0] and "step/activation_input_0" not in names
    else:  # JAX and PyTorch read a loop body's tensors (here, its first iteration's)
        assert warned == [] and "step/activation_input_0" in names
