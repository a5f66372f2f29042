"""The default rules on runs of the two-line MXNet hook (`Hook(out_dir)`, `register_block`,
`register_loss`): they fire on an exploding, a dead-ReLU, a saturated-tanh and a
saturated-sigmoid Gluon net and stay quiet on the healthy twins, plain and hybridized, with
the statistics the hook records by default."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from gluon_tiny import train

import mldbg
import mldbg.mxnet

CASES: dict[str, tuple[dict[str, Any], str | None]] = {  # run -> (train keywords, the rule that must fire)
    "healthy": ({}, None),
    "exploding": ({"lr": 1e12}, "exploding_tensor"),
    "dead_relu": ({"bias_init": -10.0}, "dead_relu"),
    "healthy_tanh": ({"activation": "tanh"}, None),
    "saturated_tanh": ({"activation": "tanh", "input_scale": 100.0}, "tanh_saturation"),
    "healthy_sigmoid": ({"activation": "sigmoid"}, None),
    "saturated_sigmoid": ({"activation": "sigmoid", "input_scale": 100.0}, "sigmoid_saturation"),
    "hybridized_healthy": ({"hybridize": True}, None),
    "hybridized_exploding": ({"hybridize": True, "lr": 1e12}, "exploding_tensor"),
}


def record(path: Path, **keywords: Any) -> None:
    with warnings.catch_warnings():  # the hybridized runs' warning: its own test checks it
        warnings.filterwarnings("ignore", message="mldbg: .* is hybridized", category=UserWarning)
        train(path, **keywords)


@pytest.mark.parametrize("case", sorted(CASES))
def test_default_rules(tmp_path: Path, case: str) -> None:
    keywords, rule = CASES[case]
    record(tmp_path, **keywords)
    findings = mldbg.check(tmp_path)
    fired = {f.rule for f in findings}
    if rule is None:
        assert findings == [], [f"{f.rule}@{f.step}: {f.message}" for f in findings]
    else:
        assert rule in fired, fired
        first = next(f for f in findings if f.rule == rule)
        assert first.step <= 5 and first.tensors and first.suggestion
        if rule.endswith("_saturation"):
            # inputs x100 saturate the first activation (fused in `Dense(activation=...)`,
            # `0.act`); the second (`2`) sees the first's bounded outputs and is not saturated
            assert set(first.tensors) == {"0.act_input_0"}, first.tensors


def test_dead_relu_names_the_dead_layers(tmp_path: Path) -> None:
    record(tmp_path, bias_init=-10.0)
    dead = [f for f in mldbg.check(tmp_path, rules=["dead_relu"]) if f.rule == "dead_relu"]
    assert dead and set(dead[0].tensors) == {"0.act_input_0", "2_input_0"}


def test_hybridized_dead_relu_is_caught_by_the_other_rules(tmp_path: Path) -> None:
    """Hybridized, the activations are not recorded, so dead_relu has nothing to read (and is
    skipped, not quiet by mistake); the dead net still shows in its gradients."""
    record(tmp_path, bias_init=-10.0, hybridize=True)
    fired = {f.rule for f in mldbg.check(tmp_path)}
    assert "dead_relu" not in fired and "vanishing_gradient" in fired


def test_mldbg_check_exits_1_on_the_exploding_run(tmp_path: Path) -> None:
    record(tmp_path / "bad", lr=1e12)
    record(tmp_path / "good")
    cli = [sys.executable, "-m", "mldbg.cli.main", "check"]
    bad = subprocess.run([*cli, str(tmp_path / "bad")], capture_output=True, text=True, timeout=120)
    good = subprocess.run([*cli, str(tmp_path / "good")], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "exploding_tensor" in bad.stdout
    assert good.returncode == 0, good.stdout


def test_live_rules_stop_an_exploding_gluon_training(tmp_path: Path) -> None:
    """`rules=` and `actions=` of every hook: the watcher child sees the NaN and the next step
    raises TrainingStopped in the training process."""
    import time

    import mxnet as mx
    from gluon_tiny import data, mlp
    from mxnet import autograd, gluon, nd

    from mldbg.actions import StopTraining

    mx.random.seed(0)
    net = mlp()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 1e12})
    x, y = data(32)
    hook = mldbg.mxnet.Hook(
        tmp_path, flush_seconds=0.05, rules=["exploding_tensor"], actions=[StopTraining()]
    )
    hook.register_block(net)
    hook.register_loss(loss_fn)
    stopped = None
    for step in range(2000):
        with autograd.record():
            loss = loss_fn(net(nd.array(x)), nd.array(y))
        loss.backward()
        try:
            trainer.step(32)
        except mldbg.TrainingStopped:
            stopped = step
            break
        time.sleep(0.01)
    hook.close()
    assert stopped is not None and stopped < 1500
    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps and trial.steps()[-1] == stopped
