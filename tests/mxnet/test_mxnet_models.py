"""`mldbg.mxnet.Hook` on the Gluon models and training loops the first tests left out: a
hybridized CNN (`static_alloc`, `static_shape`) with BatchNorm, nested custom Blocks sharing a
layer, a `HybridSequential` inside a `Block`, the Trainer's kvstore settings (`local`,
`update_on_kvstore=False`, two devices), `allreduce_grads()` + `update()`,
`ignore_stale_grad`, several losses, `autograd.record(train_mode=False)`, a forgotten
`zero_grad()` with `grad_req='add'`, export / save / load, copies of a hooked block, two runs
into one folder and `profiler_config=`. Values read back equal the Gluon model's; the default
rules are quiet on the healthy nets and fire on the defects."""

from __future__ import annotations

import contextlib
import copy
import logging
import pickle
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mxnet as mx
import numpy as np
import pytest
from gluon_tiny import N_CLASSES, N_FEATURES, data, mlp
from mxnet import autograd, gluon, nd
from mxnet.gluon import nn

import mldbg
import mldbg.mxnet
from mldbg import Mode
from mldbg.errors import InvalidConfig
from mldbg.frameworks.mxnet import host_copy

EVERYTHING = ["weights", "biases", "gradients", "losses", "outputs", "inputs", "labels", "predictions"]
EVERY_STEP = mldbg.SaveConfig(save_interval=1)
ALL = dict(save_config=EVERY_STEP, include_collections=EVERYTHING)
HYBRID_WARNING = "mldbg: .* is hybridized"


@contextlib.contextmanager
def quiet_hybrid() -> Iterator[None]:
    """The hybridized nets' warning: its own tests check it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=HYBRID_WARNING, category=UserWarning)
        yield


def params_of(net: nn.Block) -> dict[str, np.ndarray]:
    return {name: host_copy(p.data()) for name, p in net._collect_params_with_prefix().items()}


def grads_of(net: nn.Block) -> dict[str, np.ndarray]:
    return {
        f"gradient/{name}": host_copy(p.grad())
        for name, p in net._collect_params_with_prefix().items()
        if p.grad_req != "null"
    }


# a small CNN ------------------------------------------------------------------------------
def images(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """1x8x8 images; the class is which halves are brighter on average (learnable)."""
    x = np.random.default_rng(seed).standard_normal((n, 1, 8, 8)).astype("float32")
    y = (x[:, 0, :4].mean(axis=(1, 2)) > 0).astype("float32") + (x[:, 0, 4:].mean(axis=(1, 2)) > 0)
    return x, y


def cnn(dropout: float = 0.0) -> nn.HybridSequential:
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(2), nn.Flatten())
    if dropout:
        net.add(nn.Dropout(dropout))
    net.add(nn.Dense(N_CLASSES))
    mx.random.seed(0)
    net.initialize(mx.init.Xavier())
    return net


def train_cnn(
    out_dir: Path, steps: int = 60, train_mode: bool = True, dropout: float = 0.0, **options: Any
) -> None:
    x, y = images(steps * 16)
    net = cnn(dropout)
    net.hybridize(static_alloc=True, static_shape=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    with quiet_hybrid(), mldbg.mxnet.Hook(out_dir, **options) as hook:
        hook.register_block(net)
        hook.register_loss(loss_fn)
        for step in range(steps):
            xb, yb = nd.array(x[step * 16 : (step + 1) * 16]), nd.array(y[step * 16 : (step + 1) * 16])
            with autograd.record(train_mode=train_mode):
                loss = loss_fn(net(xb), yb)
            loss.backward()
            trainer.step(16)
            if (step + 1) % 20 == 0:
                for i in range(2):
                    net(nd.array(x[i * 16 : (i + 1) * 16]))


def test_hybridized_static_cnn_values_equal_the_models(tmp_path: Path) -> None:
    """Conv2D, BatchNorm, MaxPool, Flatten, hybridized with static_alloc and static_shape:
    parameters as the forward used them (BatchNorm's running statistics too: MXNet moves them
    in the backward pass; asked for by regex, they are in no collection), gradients, output,
    loss; the inner layers are not recorded (compiled graph) and the hook says so."""
    x, y = images(48)
    net = cnn()
    net.hybridize(static_alloc=True, static_shape=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    expected = []
    warned = pytest.warns(UserWarning, match="HybridSequential is hybridized")
    with warned, mldbg.mxnet.Hook(tmp_path, include_regex=["running_"], **ALL) as hook:
        hook.register_block(net)
        hook.register_loss(loss_fn)
        for step in range(3):
            xb, yb = nd.array(x[step * 16 : (step + 1) * 16]), nd.array(y[step * 16 : (step + 1) * 16])
            with autograd.record():
                out = net(xb)
                seen = params_of(net)  # as the forward saw them
                loss = loss_fn(out, yb)
            loss.backward()
            seen.update(grads_of(net), out=host_copy(out), loss=host_copy(loss))
            expected.append(seen)
            trainer.step(16)
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2]
    for step, seen in enumerate(expected):
        for name, value in seen.items():
            tensor = {"out": "model_output_0", "loss": "SoftmaxCrossEntropyLoss_output_0"}.get(name, name)
            np.testing.assert_array_equal(trial.tensor(tensor).value(step), value, err_msg=name)
    assert not np.array_equal(expected[0]["1.running_mean"], expected[2]["1.running_mean"])
    assert "1.running_mean" not in trial.tensor_names(collection="weights")
    assert set(trial.tensor_names(collection="weights")) == {"0.weight", "1.gamma", "1.beta", "5.weight"}
    assert not any(name.startswith(("1_", "2_", "3_")) for name in trial.tensor_names())


@pytest.mark.parametrize("case", ["healthy", "train_mode_false"])
def test_default_rules_on_the_hybridized_cnn(tmp_path: Path, case: str) -> None:
    """The two-line hook on the static hybridized CNN with Dropout: quiet when healthy (the
    running statistics are not frozen weights that moved); trained inside
    `record(train_mode=False)` (BatchNorm on its running statistics, Dropout off), its steps
    are EVAL and train_in_eval_mode fires."""
    train_cnn(tmp_path, dropout=0.2, train_mode=case == "healthy")
    trial = mldbg.create_trial(tmp_path)
    findings = mldbg.check(tmp_path)
    if case == "healthy":
        assert findings == [], [f"{f.rule}@{f.step}: {f.message}" for f in findings]
        assert trial.record("module_training/norm", 0).statistics["sum"] == 1.0
    else:
        assert trial.steps(mode=Mode.TRAIN) == []
        assert "train_in_eval_mode" in {f.rule for f in findings}
        assert trial.record("module_training/dropout", 0).statistics["sum"] == 0.0


def test_train_mode_false_on_a_net_without_dropout_or_batchnorm_is_quiet(tmp_path: Path) -> None:
    """The MLP trains the same outside train mode: train_in_eval_mode has nothing to say."""
    x, y = data(32 * 10)
    net = mlp()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    with mldbg.mxnet.Hook(tmp_path) as hook:
        hook.register_block(net)
        hook.register_loss(loss_fn)
        for step in range(10):
            with autograd.record(train_mode=False):
                loss = loss_fn(
                    net(nd.array(x[step * 32 : (step + 1) * 32])), nd.array(y[step * 32 : (step + 1) * 32])
                )
            loss.backward()
            trainer.step(32)
    assert mldbg.check(tmp_path, rules=["train_in_eval_mode"]) == []
    assert mldbg.create_trial(tmp_path).record("optimizer_step", 0).statistics["sum"] == 1.0


# nested custom blocks ----------------------------------------------------------------------
class Shared(nn.Block):
    """A custom Block calling one Dense twice, then a nested custom block holding a
    HybridSequential."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Dense(N_FEATURES, in_units=N_FEATURES)
        self.inner = Inner()

    def forward(self, x: nd.NDArray) -> nd.NDArray:
        return self.inner(self.shared(nd.relu(self.shared(x))))


class Inner(nn.Block):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.HybridSequential()
        self.head.add(nn.Dense(16, activation="relu"), nn.Dense(N_CLASSES))

    def forward(self, x: nd.NDArray) -> nd.NDArray:
        return self.head(x)


def shared_net() -> Shared:
    net = Shared()
    mx.random.seed(0)
    net.initialize(mx.init.Xavier())
    return net


def test_nested_blocks_with_a_layer_used_twice(tmp_path: Path) -> None:
    """Names follow the tree (`inner.head.0.weight`); the shared layer's gradient is the sum
    over both uses, as the model's; its output is its first call's; a NumPy forward gives the
    layers the hook recorded."""
    x, y = data(96)
    net = shared_net()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    expected = []
    with mldbg.mxnet.Hook(tmp_path, **ALL) as hook:
        hook.register_block(net)
        hook.register_loss(loss_fn)
        for step in range(3):
            xb = x[step * 32 : (step + 1) * 32]
            with autograd.record():
                out = net(nd.array(xb))
                loss = loss_fn(out, nd.array(y[step * 32 : (step + 1) * 32]))
            loss.backward()
            expected.append(params_of(net) | grads_of(net) | {"x": xb, "out": host_copy(out)})
            trainer.step(32)
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2]
    assert set(trial.tensor_names(collection="weights")) == {
        "shared.weight", "inner.head.0.weight", "inner.head.1.weight"
    }  # fmt: skip
    for step, seen in enumerate(expected):
        for name, value in seen.items():
            if name not in ("x", "out"):
                np.testing.assert_array_equal(trial.tensor(name).value(step), value, err_msg=name)
        first = seen["x"] @ seen["shared.weight"].T + seen["shared.bias"]
        second = np.maximum(first, 0) @ seen["shared.weight"].T + seen["shared.bias"]
        hidden = np.maximum(second @ seen["inner.head.0.weight"].T + seen["inner.head.0.bias"], 0)
        close = dict(rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(trial.tensor("shared_output_0").value(step), first, **close)
        np.testing.assert_allclose(trial.tensor("inner.head.0_output_0").value(step), hidden, **close)
        np.testing.assert_allclose(trial.tensor("inner_output_0").value(step), seen["out"], **close)
        np.testing.assert_array_equal(trial.tensor("model_output_0").value(step), seen["out"])


def test_a_hybridized_block_inside_a_plain_block_warns_once(tmp_path: Path) -> None:
    """`hybridize()` on a plain Block hybridizes its HybridBlock children: their inner layers
    are lost, the hook names the one it found, once; the rest is recorded."""
    x, _ = data(32)
    net = shared_net()
    net.hybridize()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with mldbg.mxnet.Hook(tmp_path, **ALL) as hook:
            hook.register_block(net)
            net(nd.array(x))
            net(nd.array(x))
    ours = [str(w.message) for w in got if str(w.message).startswith("mldbg:")]
    assert len(ours) == 1 and ours[0].startswith("mldbg: Shared.inner.head (HybridSequential) is hybridized")
    names = set(mldbg.create_trial(tmp_path).tensor_names())
    assert {"shared_output_0", "inner.head_output_0", "inner.head.0.weight", "model_output_0"} <= names
    assert not names & {"inner.head.0_output_0", "inner.head.1_output_0"}


# trainers ------------------------------------------------------------------------------------
TRAINERS = {  # (one device, MXNet makes no kvstore: update_on_kvstore=True is for several)
    "local, update by the trainer": {"kvstore": "local", "update_on_kvstore": False},
    "allreduce_grads + update": {"update_on_kvstore": False, "split": True},
    "two devices, local, update_on_kvstore": {"kvstore": "local", "update_on_kvstore": True, "devices": 2},
    "two devices, local, update by the trainer": {
        "kvstore": "local",
        "update_on_kvstore": False,
        "devices": 2,
    },
    "two devices, allreduce_grads + update": {
        "kvstore": "local",
        "update_on_kvstore": False,
        "split": True,
        "devices": 2,
    },
}


@pytest.mark.parametrize("case", sorted(TRAINERS))
def test_trainer_settings(tmp_path: Path, case: str) -> None:
    """Each trainer step (or update) is one step; weights and gradients read back equal the
    model's. On two devices (two CPU contexts, the batch split between them) the gradient is
    the sum of the devices', as the kvstore reduces them, and equals the whole batch's."""
    settings = dict(TRAINERS[case])
    split, devices = settings.pop("split", False), settings.pop("devices", 1)
    ctx = [mx.cpu(i) for i in range(devices)]
    x, y = data(96)
    net = mlp()
    net.collect_params().reset_ctx(ctx)
    twin = mlp()  # the same net on one device, trained by hand on the whole batch
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, **settings)
    expected = []
    with mldbg.mxnet.Hook(tmp_path, **ALL) as hook:
        hook.register_block(net)
        hook.register_loss(loss_fn)
        for step in range(3):
            xb, yb = nd.array(x[step * 32 : (step + 1) * 32]), nd.array(y[step * 32 : (step + 1) * 32])
            with autograd.record():
                losses = [
                    loss_fn(net(xs), ys)
                    for xs, ys in zip(
                        gluon.utils.split_and_load(xb, ctx), gluon.utils.split_and_load(yb, ctx), strict=True
                    )
                ]
            autograd.backward(losses)
            with autograd.record():
                twin_loss = loss_fn(twin(xb), yb)
            twin_loss.backward()
            expected.append(params_of(twin) | grads_of(twin))
            if split:
                trainer.allreduce_grads()
                trainer.update(32)
            else:
                trainer.step(32)
            for p in twin.collect_params().values():
                p.set_data(p.data() - 0.1 / 32 * p.grad())
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2] and {trial.mode(s) for s in range(3)} == {Mode.TRAIN}
    for step, seen in enumerate(expected):
        for name, value in seen.items():
            np.testing.assert_allclose(
                trial.tensor(name).value(step), value, rtol=1e-4, atol=1e-6, err_msg=name
            )
    if devices > 1:
        half = trial.tensor("model_input_0").value(0)
        np.testing.assert_array_equal(half, x[:16])  # the first device's forward


def test_ignore_stale_grad_records_only_the_fresh_gradients(tmp_path: Path) -> None:
    """A model using one of two branches a step: the other branch's gradient is stale (the
    trainer skips it with ignore_stale_grad=True) and is not recorded at that step."""

    class Branches(nn.Block):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Dense(N_CLASSES, in_units=N_FEATURES)
            self.b = nn.Dense(N_CLASSES, in_units=N_FEATURES)

        def forward(self, x: nd.NDArray, use_b: bool = False) -> nd.NDArray:
            return self.b(x) if use_b else self.a(x)

    net = Branches()
    net.initialize()
    x, y = data(32)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    grads = []
    with mldbg.mxnet.Hook(tmp_path, **ALL) as hook:
        hook.register_block(net)
        hook.register_loss(loss_fn)
        for step in range(4):
            with autograd.record():
                loss = loss_fn(net(nd.array(x), step % 2 == 1), nd.array(y))
            loss.backward()
            grads.append(host_copy((net.b if step % 2 else net.a).weight.grad()))
            trainer.step(32, ignore_stale_grad=True)
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2, 3]
    assert trial.tensor("gradient/a.weight").steps() == [0, 2]
    assert trial.tensor("gradient/b.weight").steps() == [1, 3]
    for step, grad in enumerate(grads):
        name = "gradient/b.weight" if step % 2 else "gradient/a.weight"
        np.testing.assert_array_equal(trial.tensor(name).value(step), grad)


def test_several_losses(tmp_path: Path) -> None:
    """Two losses of different classes and a second of the same class (`<Loss>_2`), all
    recorded with their own values."""
    x, y = data(64)
    net = mlp()
    ce, l2, ce_aux = (
        gluon.loss.SoftmaxCrossEntropyLoss(),
        gluon.loss.L2Loss(),
        gluon.loss.SoftmaxCrossEntropyLoss(),
    )
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    expected = []
    with mldbg.mxnet.Hook(tmp_path, **ALL) as hook:
        hook.register_block(net)
        for loss_fn in (ce, l2, ce_aux):
            hook.register_loss(loss_fn)
        for step in range(2):
            xb, yb = nd.array(x[step * 32 : (step + 1) * 32]), nd.array(y[step * 32 : (step + 1) * 32])
            with autograd.record():
                out = net(xb)
                parts = (ce(out, yb), l2(out, nd.one_hot(yb, N_CLASSES)), ce_aux(out * 0.5, yb))
                total = parts[0] + 0.1 * parts[1] + 0.5 * parts[2]
            total.backward()
            expected.append([host_copy(p) for p in parts])
            trainer.step(32)
    trial = mldbg.create_trial(tmp_path)
    names = ["SoftmaxCrossEntropyLoss_output_0", "L2Loss_output_0", "SoftmaxCrossEntropyLoss_2_output_0"]
    assert set(trial.tensor_names(collection="losses")) == set(names)
    for step, parts in enumerate(expected):
        for name, value in zip(names, parts, strict=True):
            np.testing.assert_array_equal(trial.tensor(name).value(step), value, err_msg=name)


@pytest.mark.parametrize("zero_grad", [True, False])
def test_gradient_not_reset_with_grad_req_add(tmp_path: Path, zero_grad: bool) -> None:
    """`grad_req='add'` accumulates until `zero_grad()`: forgotten, the gradients grow step
    after step and gradient_not_reset fires; with it, the default rules are quiet."""
    x, y = data(32 * 30)
    net = mlp()
    net.collect_params().setattr("grad_req", "add")
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.02})
    with mldbg.mxnet.Hook(tmp_path) as hook:
        hook.register_block(net)
        hook.register_loss(loss_fn)
        for step in range(30):
            xb, yb = nd.array(x[step * 32 : (step + 1) * 32]), nd.array(y[step * 32 : (step + 1) * 32])
            with autograd.record():
                loss = loss_fn(net(xb), yb)
            loss.backward()
            trainer.step(32)
            if zero_grad:
                net.collect_params().zero_grad()
    findings = mldbg.check(tmp_path)
    if zero_grad:
        assert findings == [], [f"{f.rule}@{f.step}: {f.message}" for f in findings]
    else:
        assert "gradient_not_reset" in {f.rule for f in findings}


# saving, copying ------------------------------------------------------------------------------
def test_export_save_and_load_with_the_hook_attached(tmp_path: Path) -> None:
    """`export`, `save_parameters` and `load_parameters` work on a hooked (hybridized) net;
    the steps after loading record the loaded values."""
    x, _ = data(32)
    net = mlp()
    net.hybridize()
    with quiet_hybrid(), mldbg.mxnet.Hook(tmp_path / "run", **ALL) as hook:
        hook.register_block(net)
        before = net(nd.array(x)).asnumpy()
        net.export(str(tmp_path / "model"))
        net.save_parameters(str(tmp_path / "w.params"))
        other = mlp()
        for p in other.collect_params().values():
            p.set_data(p.data() + 1)
        other.save_parameters(str(tmp_path / "other.params"))
        net.load_parameters(str(tmp_path / "other.params"))
        after = net(nd.array(x)).asnumpy()
        net.load_parameters(str(tmp_path / "w.params"))
        again = net(nd.array(x)).asnumpy()
    assert (tmp_path / "model-symbol.json").exists() and (tmp_path / "model-0000.params").exists()
    trial = mldbg.create_trial(tmp_path / "run")
    np.testing.assert_array_equal(trial.tensor("0.weight").value(1), host_copy(other[0].weight.data()))
    np.testing.assert_array_equal(trial.tensor("model_output_0").value(1), after)
    np.testing.assert_array_equal(trial.tensor("model_output_0").value(2), before)
    np.testing.assert_array_equal(again, before)
    # the exported graph gives the same outputs
    with warnings.catch_warnings():  # MXNet's: NumPy aliases, the input's type it cannot decide
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message="Cannot decide type", category=UserWarning)
        imported = gluon.SymbolBlock.imports(
            str(tmp_path / "model-symbol.json"), ["data"], str(tmp_path / "model-0000.params")
        )
    np.testing.assert_allclose(imported(nd.array(x)).asnumpy(), before, rtol=1e-6)


def test_copies_of_a_hooked_block_record_nothing(tmp_path: Path) -> None:
    """`copy.deepcopy` and pickle of a hooked block work (the hook's callables become inert
    stand-ins); the copies compute what the original does and are not recorded."""
    x, _ = data(32)
    net = mlp()
    with mldbg.mxnet.Hook(tmp_path, **ALL) as hook:
        hook.register_block(net)
        out = net(nd.array(x)).asnumpy()
        for twin in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
            np.testing.assert_allclose(twin(nd.array(x)).asnumpy(), out, rtol=1e-6)
            assert twin[0].weight is not net[0].weight
        net(nd.array(x))
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1]


def test_two_runs_into_one_folder(tmp_path: Path) -> None:
    """A folder holding a run is refused, unless overwrite (replaced) or resume (continued)."""
    x, _ = data(32)

    def run(**options: Any) -> None:
        with mldbg.mxnet.Hook(tmp_path, save_config=EVERY_STEP, **options) as hook:
            net = mlp()
            hook.register_block(net)
            for _ in range(3):
                net(nd.array(x))

    run()
    with pytest.raises(InvalidConfig, match="already holds a run.*overwrite=True.*resume=True"):
        run()
    assert mldbg.create_trial(tmp_path).steps() == [0, 1, 2]
    run(overwrite=True)
    assert mldbg.create_trial(tmp_path).steps() == [0, 1, 2]
    run(resume=True)
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2, 3, 4, 5] and trial.loaded_all_steps


# the profiler -----------------------------------------------------------------------------------
def profiled(out_dir: Path) -> None:
    from gluon_tiny import train

    train(out_dir, steps=20, eval_every=None, profiler_config=mldbg.ProfilerConfig(system_interval_ms=20))


def test_profiler_config(tmp_path: Path) -> None:
    """`profiler_config=` in this environment (psutil is in the mxnet extra): step phases of
    every TRAIN step (forward, backward, optimizer), process and system metrics."""
    from mldbg.profiler.read import ProfilerData

    profiled(tmp_path)
    data_ = ProfilerData(tmp_path)
    steps = data_.steps("worker_0", mode=Mode.TRAIN)
    assert list(steps.step) == list(range(20))
    for phase in (steps.forward, steps.backward, steps.optimizer):
        assert np.all(np.isfinite(phase[1:])) and np.all(phase[1:] >= 0)
    assert data_.has_system and not any("psutil" in note for note in data_.notes())
    assert len(data_.process("worker_0")) >= 1


def test_profiler_without_psutil_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where psutil is missing, the run is recorded without system metrics and one line says
    why (the log, and the profiler's notes); the step phases are still there."""
    from mldbg.profiler.read import ProfilerData

    monkeypatch.setitem(sys.modules, "psutil", None)  # import psutil raises ImportError
    with caplog.at_level(logging.WARNING, logger="mldbg"):
        profiled(tmp_path)
    said = [r.getMessage() for r in caplog.records if "psutil" in r.getMessage()]
    assert said == ["mldbg: no system metrics: psutil is not installed (pip install 'mldbg[profiler]')"]
    data_ = ProfilerData(tmp_path)
    assert not data_.has_system and any("psutil is not installed" in n for n in data_.notes())
    assert len(data_.steps("worker_0", mode=Mode.TRAIN)) == 20
    assert mldbg.create_trial(tmp_path).steps() == list(range(20))
