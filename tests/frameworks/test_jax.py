"""`mldbg.jax.Hook`: round trip on plain JAX (eagerly and inside `jax.jit`), names of Flax and
Optax pytrees, modes, and the default rules on injected defects and their healthy twin."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mldbg
import mldbg.jax
from mldbg import Mode

LR = 0.1
RULE_COLLECTIONS = ["weights", "biases", "gradients", "losses", "scalars", "relu_activations",
                    "tanh_activations", "sigmoid_activations"]  # fmt: skip
DEFECTS = {  # keyword of `train` -> the rule that must fire
    "exploding": ({"lr": 1e12}, "exploding_tensor"),
    "vanishing": ({"activation": "sigmoid", "depth": 10}, "vanishing_gradient"),
    "dead_relu": ({"bias": -20.0}, "dead_relu"),
    "stalled": ({"lr": 1e-10}, "loss_not_decreasing"),
}
ACT = {"relu": jax.nn.relu, "sigmoid": jax.nn.sigmoid, "tanh": jnp.tanh}


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 8)).astype("float32")
    return x, np.argmax(x @ np.random.default_rng(42).standard_normal((8, 3)), axis=1).astype("int32")


def init(depth: int = 1, bias: float = 0.0) -> dict:
    keys = jax.random.split(jax.random.key(0), depth + 1)
    params, width = {}, 8
    for i in range(depth):
        w = jax.random.normal(keys[i], (width, 16)) * np.sqrt(2.0 / (width + 16))
        params[f"hidden{i}"] = {"kernel": w, "bias": jnp.full((16,), bias)}
        width = 16
    params["logits"] = {
        "kernel": jax.random.normal(keys[-1], (width, 3)) * np.sqrt(2.0 / (width + 3)),
        "bias": jnp.zeros(3),
    }
    return params


def forward(params: dict, x, activation: str = "relu"):
    acts, h = {}, x
    for name in [k for k in params if k.startswith("hidden")]:
        pre = h @ params[name]["kernel"] + params[name]["bias"]
        h = ACT[activation](pre)
        acts[name] = (pre, h)
    return h @ params["logits"]["kernel"] + params["logits"]["bias"], acts


def make_step(hook, activation: str = "relu", lr: float = LR, jit: bool = True):
    kind = f"{activation}_activations"

    def loss_fn(p, x, y):
        logits, acts = forward(p, x, activation)
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1)), (logits, acts)

    def step(i, p, x, y):
        (loss, (logits, acts)), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, x, y)
        hook.record(
            i, params=p, grads=grads, loss=loss, inputs=x, labels=y, predictions=logits, **{kind: acts}
        )
        return jax.tree_util.tree_map(lambda w, g: w - lr * g, p, grads), loss

    return jax.jit(step) if jit else step


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_round_trip_against_jax(tmp_path, jit):
    hook = mldbg.jax.Hook(str(tmp_path), save_config=mldbg.SaveConfig(save_interval=2),
                          include_collections=RULE_COLLECTIONS + ["inputs", "labels", "predictions"])  # fmt: skip
    step = make_step(hook, jit=jit)
    params, x, y = init(), *data(64)
    history = [params]
    for i in range(5):
        params, _ = step(i, params, x[i * 8 : (i + 1) * 8], y[i * 8 : (i + 1) * 8])
        history.append(params)
    hook.close()
    trial = mldbg.create_trial(str(tmp_path))
    assert trial.steps() == [0, 2, 4]
    assert set(trial.tensor_names(collection="biases")) == {"hidden0/bias", "logits/bias"}
    for s in (0, 2, 4):
        for layer in ("hidden0", "logits"):
            for var in ("kernel", "bias"):
                name, w, nxt = f"{layer}/{var}", history[s][layer][var], history[s + 1][layer][var]
                np.testing.assert_array_equal(trial.tensor(name).value(s), np.asarray(w))
                np.testing.assert_allclose(
                    trial.tensor(f"gradient/{name}").value(s), (w - nxt) / LR, atol=2e-5
                )
        xb = x[s * 8 : (s + 1) * 8]
        np.testing.assert_array_equal(trial.tensor("model_input_0").value(s), xb)
        np.testing.assert_array_equal(trial.tensor("labels_0").value(s), y[s * 8 : (s + 1) * 8])
        pre = xb @ np.asarray(history[s]["hidden0"]["kernel"]) + np.asarray(history[s]["hidden0"]["bias"])
        np.testing.assert_allclose(trial.tensor("hidden0_input_0").value(s), pre, atol=1e-5)
        np.testing.assert_allclose(trial.tensor("hidden0_output_0").value(s), np.maximum(pre, 0), atol=1e-5)
        logits, _ = forward(history[s], xb)
        np.testing.assert_allclose(trial.tensor("model_output_0").value(s), logits, atol=1e-5)
        assert np.isfinite(trial.tensor("loss").value(s))
    assert set(trial.collections()["relu_activations"]) == {"hidden0_input_0", "hidden0_output_0"}


def test_nothing_is_converted_on_steps_that_save_nothing(tmp_path):
    hook = mldbg.jax.Hook(str(tmp_path), save_config=mldbg.SaveConfig(save_interval=10))
    gone = jnp.ones(3)
    gone.delete()  # reading it would raise: a step that converted it would fail
    hook.record(1, params={"w": gone}, grads={"w": gone}, loss=gone)
    hook.record(2, params={"w": gone})
    hook.record(10, params={"w": jnp.ones(3)}, loss=0.5)
    hook.close()
    trial = mldbg.create_trial(str(tmp_path))
    assert trial.steps() == [2]  # the third call; its mode step is 10
    assert trial.mode_step(2) == 10
    assert trial.tensor("loss").value(10, mode=Mode.TRAIN) == 0.5


def test_modes_and_named_values(tmp_path):
    hook = mldbg.jax.Hook(
        str(tmp_path), save_config=mldbg.SaveConfig(save_interval=1), include_regex=["^hidden"]
    )
    hook.record(0, params={"w": jnp.ones(2)}, loss=1.0, accuracy=0.25, hidden={"a": jnp.zeros(4)})
    hook.record(0, loss=2.0, mode="eval")
    hook.record(1, params={"w": jnp.ones(2)}, loss=0.5)
    hook.close()
    trial = mldbg.create_trial(str(tmp_path))
    assert [trial.mode(s) for s in trial.steps()] == [Mode.TRAIN, Mode.EVAL, Mode.TRAIN]
    assert trial.tensor("loss").value(0, mode=Mode.EVAL) == 2.0
    assert trial.tensor("accuracy").value(0) == 0.25
    assert "accuracy" in trial.collections()["scalars"]
    assert trial.tensor("hidden/a").value(0).shape == (4,)


def test_profiler_config_records_step_times(tmp_path):
    from mldbg.profiler.read import ProfilerData

    hook = mldbg.jax.Hook(str(tmp_path), profiler_config=mldbg.ProfilerConfig(system_interval_ms=50))
    for i in range(3):
        hook.record(i, params={"w": jnp.ones(3)}, loss=1.0)
    hook.close()
    assert ProfilerData(str(tmp_path)).has_steps


def test_flax_and_optax_names(tmp_path):
    import flax.linen as nn
    import optax
    from flax import nnx

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(3)(nn.relu(nn.Dense(4)(x)))

    x = jnp.ones((2, 5))
    variables = MLP().init(jax.random.key(0), x)
    tx = optax.adam(1e-3)
    opt_state = tx.init(variables["params"])
    model = nnx.Linear(5, 2, rngs=nnx.Rngs(0))
    hook = mldbg.jax.Hook(str(tmp_path), save_config=mldbg.SaveConfig(save_interval=1),
                          include_collections=["weights", "biases", "gradients", "optimizer_variables"])  # fmt: skip
    hook.record(0, params=variables, grads=variables, opt_state=opt_state)
    hook.record(1, params=nnx.state(model, nnx.Param))
    hook.close()
    trial = mldbg.create_trial(str(tmp_path))
    assert set(trial.tensor_names(step=0, collection="weights")) == {"Dense_0/kernel", "Dense_1/kernel"}
    assert set(trial.tensor_names(step=0, collection="biases")) == {"Dense_0/bias", "Dense_1/bias"}
    assert "gradient/Dense_0/kernel" in trial.tensor_names(step=0)
    assert {"optimizer/0/count", "optimizer/0/mu/Dense_0/kernel"} <= set(
        trial.collections()["optimizer_variables"]
    )
    assert set(trial.tensor_names(step=1)) == {"kernel", "bias"}  # NNX: the Variable's .value is dropped
    np.testing.assert_array_equal(trial.tensor("kernel").value(1), np.asarray(model.kernel[...]))


def train(path, lr: float = LR, activation: str = "relu", depth: int = 1, bias: float = 0.0) -> list[float]:
    """64 steps of a tiny MLP, recorded inside jax.jit at every step."""
    hook = mldbg.jax.Hook(
        str(path), save_config=mldbg.SaveConfig(save_interval=1), include_collections=RULE_COLLECTIONS
    )
    step = make_step(hook, activation=activation, lr=lr)
    params, (x, y), losses = init(depth, bias), data(256), []
    for i in range(64):
        b = i % 8
        params, loss = step(i, params, x[b * 32 : (b + 1) * 32], y[b * 32 : (b + 1) * 32])
        losses.append(float(loss))
    hook.close()
    return losses


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("jax_rules")
    losses = {"healthy": train(base / "healthy")}
    for name, (kwargs, _) in DEFECTS.items():
        losses[name] = train(base / name, **kwargs)
    return base, losses


def test_the_defects_show_in_the_record(runs):
    base, losses = runs
    assert np.mean(losses["healthy"][-8:]) < 0.8 * np.mean(losses["healthy"][:8])
    assert not np.isfinite(losses["exploding"][-1])
    vanishing = mldbg.create_trial(str(base / "vanishing"))
    assert vanishing.tensor("gradient/hidden0/kernel").reduction_value(63, "mean", abs=True) < 1e-7
    dead = mldbg.create_trial(str(base / "dead_relu"))
    assert np.all(dead.tensor("hidden0_output_0").value(63) == 0)
    assert np.ptp(losses["stalled"][::8]) < 1e-4


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_default_rules_fire_on_the_defect(runs, defect):
    base, _ = runs
    findings = mldbg.check(str(base / defect))
    assert DEFECTS[defect][1] in {f.rule for f in findings}, [str(f) for f in findings]


def test_default_rules_stay_quiet_on_the_healthy_twin(runs):
    base, _ = runs
    findings = mldbg.check(str(base / "healthy"))
    assert findings == [], [str(f) for f in findings]
