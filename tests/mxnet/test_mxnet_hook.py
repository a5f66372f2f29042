"""`mldbg.mxnet.Hook` on real Gluon trainings: the values read back equal the model's
(weights, gradients, layer outputs, activations, loss, predictions, labels), the steps and
modes of `autograd.record()` / `predict_mode()` / `set_mode`, gradient accumulation, training
without a Trainer, hybridized blocks (what is recorded, and the warning for what is not), and
the statistics of the two-line hook."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings
from pathlib import Path

import mxnet as mx
import numpy as np
import pytest
from gluon_tiny import data, mlp, train
from mxnet import autograd, gluon, nd

import mldbg
import mldbg.mxnet
from mldbg import Mode
from mldbg.errors import InvalidConfig
from mldbg.frameworks.mxnet import host_copy
from mldbg.store import statistics as st

EVERYTHING = ["weights", "biases", "gradients", "losses", "outputs", "inputs", "labels", "predictions",
              "relu_activations"]  # fmt: skip
EVERY_STEP = mldbg.SaveConfig(save_interval=1)


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def test_values_read_back_equal_the_models(tmp_path: Path) -> None:
    x, y = data(96)
    net = mlp()
    params = net._collect_params_with_prefix()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    expected: list[dict[str, np.ndarray]] = []
    with mldbg.mxnet.Hook(tmp_path, save_config=EVERY_STEP, include_collections=EVERYTHING) as hook:
        hook.register_block(net)
        hook.register_loss(loss_fn)
        for step in range(3):
            xb, yb = nd.array(x[step * 32 : (step + 1) * 32]), nd.array(y[step * 32 : (step + 1) * 32])
            with autograd.record():
                out = net(xb)
                loss = loss_fn(out, yb)
            loss.backward()
            seen = {name: host_copy(p.data()) for name, p in params.items()}
            seen.update({f"gradient/{name}": host_copy(p.grad()) for name, p in params.items()})
            seen.update(output=host_copy(out), loss=host_copy(loss), x=x[step * 32 : (step + 1) * 32])
            seen.update(y=y[step * 32 : (step + 1) * 32])
            expected.append(seen)
            trainer.step(32)

    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2] and [trial.mode(s) for s in range(3)] == [Mode.TRAIN] * 3
    for step, seen in enumerate(expected):
        for name in params:
            np.testing.assert_array_equal(trial.tensor(name).value(step), seen[name])
            np.testing.assert_array_equal(
                trial.tensor(f"gradient/{name}").value(step), seen[f"gradient/{name}"]
            )
        # the layers, by NumPy from the weights the step used
        pre0 = seen["x"] @ seen["0.weight"].T + seen["0.bias"]
        h1 = relu(pre0) @ seen["1.weight"].T + seen["1.bias"]
        logits = relu(h1) @ seen["3.weight"].T + seen["3.bias"]
        value = trial.tensor
        np.testing.assert_allclose(value("0.act_input_0").value(step), pre0, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(value("0_output_0").value(step), relu(pre0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(value("2_input_0").value(step), h1, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(value("2_output_0").value(step), relu(h1), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(value("3_output_0").value(step), logits, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(value("model_output_0").value(step), seen["output"])
        np.testing.assert_array_equal(value("model_input_0").value(step), seen["x"])
        # the loss, with smdebug's names: output, predictions (input 0), labels (input 1)
        np.testing.assert_array_equal(value("SoftmaxCrossEntropyLoss_output_0").value(step), seen["loss"])
        np.testing.assert_array_equal(value("SoftmaxCrossEntropyLoss_input_0").value(step), seen["output"])
        np.testing.assert_array_equal(value("SoftmaxCrossEntropyLoss_input_1").value(step), seen["y"])
    names = trial.tensor_names
    assert set(names(collection="weights")) == {"0.weight", "1.weight", "3.weight"}
    assert set(names(collection="biases")) == {"0.bias", "1.bias", "3.bias"}
    assert set(names(collection="losses")) == {"SoftmaxCrossEntropyLoss_output_0"}
    assert set(names(collection="labels")) == {"SoftmaxCrossEntropyLoss_input_1"}
    assert set(names(collection="predictions")) == {"SoftmaxCrossEntropyLoss_input_0"}
    assert {"0.act_input_0", "0.act_output_0", "2_input_0", "2_output_0"} <= set(
        names(collection="relu_activations")
    )
    assert trial.loaded_all_steps


def test_modes_accumulation_and_set_mode(tmp_path: Path) -> None:
    x, y = data(64)
    xb, yb = nd.array(x[:32]), nd.array(y[:32])
    net = mlp()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=None)
    for p in net.collect_params().values():
        p.grad_req = "add"  # accumulate over the two backward passes
    with mldbg.mxnet.Hook(tmp_path, save_config=EVERY_STEP, include_collections=EVERYTHING) as hook:
        hook.register_block(net)
        hook.register_loss(loss_fn)
        seen = {}
        for _ in range(2):  # each step: two forwards, two backward passes, one trainer step
            seen["weight"] = host_copy(net[0].weight.data())
            with autograd.record():
                loss_fn(net(xb), yb).backward()
            with autograd.record():
                loss_fn(net(nd.array(x[32:])), nd.array(y[32:])).backward()
            seen["grad"] = host_copy(net[0].weight.grad())
            trainer.step(64)
            net.collect_params().zero_grad()
        with autograd.predict_mode():
            net(xb)  # EVAL
        net(xb)  # outside record(): EVAL
        with autograd.record(train_mode=False):
            net(xb)  # recording, not training: EVAL
        hook.set_mode(Mode.PREDICT)
        net(xb)
        hook.set_mode(Mode.TRAIN)
        with autograd.record():
            loss_fn(net(xb), yb).backward()
        trainer.step(32)

    trial = mldbg.create_trial(tmp_path)
    modes = [trial.mode(s) for s in trial.steps()]
    assert modes == [Mode.TRAIN, Mode.TRAIN, Mode.EVAL, Mode.EVAL, Mode.EVAL, Mode.PREDICT, Mode.TRAIN]
    assert trial.steps(mode=Mode.EVAL) == [0, 1, 2] and trial.steps(mode=Mode.PREDICT) == [0]
    assert [trial.mode_step(s) for s in trial.steps()] == [0, 1, 0, 1, 2, 0, 2]
    # two forwards and one trainer step: one step, holding the accumulated gradient and the
    # weights and inputs of its first forward
    np.testing.assert_array_equal(trial.tensor("0.weight").value(1), seen["weight"])
    np.testing.assert_array_equal(trial.tensor("gradient/0.weight").value(1), seen["grad"])
    np.testing.assert_array_equal(trial.tensor("model_input_0").value(1), x[:32])
    assert trial.tensor("gradient/0.weight").steps() == [0, 1, 6]  # gradients where training


def test_without_a_trainer_each_forward_is_a_step(tmp_path: Path) -> None:
    """Plain SGD by hand (no Trainer): each TRAIN forward is a step; its gradients are the
    backward's that followed it, saved when the next step begins (or at close)."""
    x, y = data(96)
    net = mlp()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    grads = []
    with mldbg.mxnet.Hook(tmp_path, save_config=EVERY_STEP, include_collections=EVERYTHING) as hook:
        hook.register_block(net)
        hook.register_loss(loss_fn)
        for step in range(3):
            with autograd.record():
                loss_fn(
                    net(nd.array(x[step * 32 : (step + 1) * 32])), nd.array(y[step * 32 : (step + 1) * 32])
                ).backward()
            grads.append(host_copy(net[3].weight.grad()))
            for p in net.collect_params().values():
                p.set_data(p.data() - 0.1 * p.grad())
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2]
    for step in range(3):
        np.testing.assert_array_equal(trial.tensor("gradient/3.weight").value(step), grads[step])


def test_hybridized_records_what_it_can_and_says_what_it_cannot(tmp_path: Path) -> None:
    """Hybridized before registering: the hook warns once; parameters, gradients, the model's
    inputs and outputs and the loss are recorded and equal the plain twin's, step by step; the
    inner layers' outputs and activations are not recorded."""
    options = dict(save_config=EVERY_STEP, include_collections=EVERYTHING)
    train(tmp_path / "plain", steps=4, eval_every=None, **options)
    with pytest.warns(
        UserWarning, match="hybridized: the outputs and activations of its inner blocks"
    ) as got:
        train(tmp_path / "hybrid", steps=4, eval_every=None, hybridize=True, **options)
    assert len([w for w in got if "mldbg" in str(w.message)]) == 1  # once
    plain, hybrid = mldbg.create_trial(tmp_path / "plain"), mldbg.create_trial(tmp_path / "hybrid")
    names = set(hybrid.tensor_names())
    recorded = {"0.weight", "gradient/3.bias", "model_input_0", "model_output_0",
                "SoftmaxCrossEntropyLoss_output_0", "SoftmaxCrossEntropyLoss_input_1"}  # fmt: skip
    assert recorded <= names
    assert not names & {"0_output_0", "0.act_input_0", "2_input_0", "3_output_0"}
    assert hybrid.tensor_names(collection="relu_activations") == []
    assert names < set(plain.tensor_names())
    for name in sorted(names):
        for step in range(4):
            np.testing.assert_allclose(
                hybrid.tensor(name).value(step), plain.tensor(name).value(step), rtol=1e-5, atol=1e-6
            )


def test_hybridized_after_registering_warns_at_the_next_forward(tmp_path: Path) -> None:
    x, y = data(32)
    net = mlp()
    with mldbg.mxnet.Hook(tmp_path, save_config=EVERY_STEP, include_collections=EVERYTHING) as hook:
        hook.register_block(net)
        net(nd.array(x))  # step 0: every layer
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            net.hybridize()  # MXNet's own warning: hooks on the children
            net(nd.array(x))  # step 1: ours, once
            net(nd.array(x))
    ours = [w for w in got if str(w.message).startswith("mldbg:")]
    assert len(ours) == 1 and "HybridSequential is hybridized" in str(ours[0].message)
    trial = mldbg.create_trial(tmp_path)
    assert "0_output_0" in trial.tensor_names(step=0)
    assert "0_output_0" not in trial.tensor_names(step=2)
    assert "model_output_0" in trial.tensor_names(step=2)


def test_close_gives_the_trainer_back_and_bad_registrations_are_refused(tmp_path: Path) -> None:
    step, update = gluon.Trainer.step, gluon.Trainer.update
    hook = mldbg.mxnet.Hook(tmp_path / "a")
    net = mlp()
    hook.register_block(net)
    assert gluon.Trainer.step is not step
    with pytest.raises(InvalidConfig, match="register_block was already called"):
        hook.register_block(mlp())
    with pytest.raises(InvalidConfig, match="gluon Block"):
        hook.register_block(lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfig, match="register_loss needs a gluon Block"):
        hook.register_loss(lambda a, b: a - b)  # type: ignore[arg-type]
    hook.close()
    assert gluon.Trainer.step is step and gluon.Trainer.update is update
    # a trainer of another model is not ours: its steps end nothing
    other = mlp()
    with mldbg.mxnet.Hook(tmp_path / "b", save_config=EVERY_STEP) as hook2:
        hook2.register_block(net)
        trainer = gluon.Trainer(other.collect_params(), "sgd", {"learning_rate": 0.1})
        x, y = data(32)
        with autograd.record():
            gluon.loss.L2Loss()(other(nd.array(x)), nd.array(np.zeros((32, 3)))).backward()
        trainer.step(32)
        net(nd.array(x))
    assert mldbg.create_trial(tmp_path / "b").steps() == [0]


def test_two_lines_record_the_statistics_of_the_default_rules(tmp_path: Path) -> None:
    """No save_config, no include_collections: the NumPy statistics of `DEFAULTS` at each
    mode's first `statistics_warmup` steps and every `statistics_every`-th after; the loss
    every step; raw tensors on the default schedule (step 0)."""
    x, y = data(32 * 8)
    net = mlp()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    grads, weights = [], []
    with mldbg.mxnet.Hook(tmp_path, statistics_warmup=2, statistics_every=3) as hook:
        hook.register_block(net)
        hook.register_loss(loss_fn)
        for step in range(8):
            xb, yb = nd.array(x[step * 32 : (step + 1) * 32]), nd.array(y[step * 32 : (step + 1) * 32])
            with autograd.record():
                loss_fn(net(xb), yb).backward()
            weights.append(host_copy(net[1].weight.data()))
            grads.append(host_copy(net[1].weight.grad()))
            trainer.step(32)
    trial = mldbg.create_trial(tmp_path)
    assert trial.tensor("SoftmaxCrossEntropyLoss_output_0").steps() == list(range(8))
    stat_steps = [0, 1, 3, 6]
    assert trial.tensor("gradient/1.weight").steps() == stat_steps
    for i, step in enumerate(stat_steps):
        got = trial.record("gradient/1.weight", step).statistics
        previous = grads[stat_steps[i - 1]] if i else None  # sample_change: since the last statistics step
        want = st.compute(grads[step], st.DEFAULTS["gradients"], previous=previous)
        assert math.isnan(got["sample_change"]) if not i else got["sample_change"] > 0
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=1e-9, nan_ok=True), key
        w = trial.record("1.weight", step).statistics
        assert w["l2"] == pytest.approx(float(np.linalg.norm(weights[step].astype(np.float64))))
        assert w["requires_grad"] == 1.0
    # delta_l2: the change since the previous statistics step
    assert trial.record("1.weight", 3).statistics["delta_l2"] == pytest.approx(
        float(np.linalg.norm(weights[3].astype(np.float64) - weights[1]))
    )
    # activations by their inputs, the classes of the loss's labels and predictions
    assert trial.record("2_input_0", 0).statistics["samples"] == 32
    active = trial.tensor("stats/2_input_0/unit_active").value(0)
    assert active.shape == (32,) and 0 < active.max() <= 32
    counts = trial.tensor("stats/SoftmaxCrossEntropyLoss_input_1/class_counts").value(0)
    np.testing.assert_array_equal(counts, np.bincount(y[:32].astype(int), minlength=4))
    assert trial.tensor("0.weight").value(0).shape == (32, 10)  # raw at step 0 (every 500)
    assert trial.record("0.weight", 0).has_raw and not trial.record("0.weight", 1).has_raw


def test_the_cli_reads_an_mxnet_run(tmp_path: Path) -> None:
    """The trial, the rules and the report of the main package, unchanged, in this environment."""
    train(tmp_path / "run", steps=10, save_config=EVERY_STEP, include_collections=EVERYTHING)
    cli = [sys.executable, "-m", "mldbg.cli.main"]
    listed = subprocess.run([*cli, "ls", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "SoftmaxCrossEntropyLoss_output_0" in listed.stdout
    assert f"mxnet-{mx.__version__}" in (tmp_path / "run" / "workers" / "worker_0" / "meta.json").read_text()
    report = tmp_path / "report.html"
    made = subprocess.run([*cli, "report", str(tmp_path / "run"), "-o", str(report)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "Confusion matrix" in report.read_text()
