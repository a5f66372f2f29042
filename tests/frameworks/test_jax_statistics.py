"""The JAX hook's statistics (issue 14): jax.numpy on the device equals the NumPy reference, a
two-line hook records them (eagerly, from `mldbg.jax.statistics` inside a jitted step, and
from `hook.record` inside it, all with the same values), and the default rules read them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mldbg
import mldbg.jax
from mldbg import Mode
from mldbg.frameworks import jax_reductions as jr
from mldbg.frameworks import jax_statistics as jst
from mldbg.frameworks.jax import Statistics
from mldbg.store import statistics as st

SCALARS = [
    "min", "max", "mean", "std", "variance", "sum", "l1", "l2", "mean_abs", "max_abs", "min_abs",
    "count", "nan_count", "inf_count", "zero_fraction", "samples", "delta_l2", "row_range",
    "col_range", "outside(-1.0,1.0)", "outside(-9.4999,9.4999)", "equal(0.0)", "equal(0.1)",
    "quantile(5.0)", "quantile(50.0)", "quantile(95.0)", "fingerprint",
]  # fmt: skip
VECTORS = [
    "sample_fingerprints",
    "unit_active",
    "unit_outside(-0.5,0.5)",
    "channel_count",
    "channel_mean",
    "channel_std",
]


def arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    special = rng.standard_normal((6, 5)).astype("float32")
    special[1, 2], special[3, 4], special[0, 0] = np.nan, np.inf, -np.inf
    relu = np.maximum(rng.standard_normal((16, 7)), 0).astype("float32")
    relu[:, 2] = 0  # a dead unit
    return {
        "fp32": rng.standard_normal((16, 8)).astype("float32"),
        "relu": relu,
        "nonfinite": special,
        "fp16": (rng.standard_normal((4, 3, 5, 5)) * 3).astype("float16"),
        "bf16": (rng.standard_normal((8, 5)) * 12).astype(ml_dtypes.bfloat16),
        "int32": rng.integers(-3, 4, (32,)).astype("int32"),
        "bool": rng.random((4, 6)) > 0.5,
        "scalar": np.asarray(2.5, dtype="float32"),
        "empty": np.zeros((0, 4), dtype="float32"),
        "seq": rng.standard_normal((3, 4, 6)).astype("float32"),
        "long": (rng.standard_normal(20_011) * 5).astype("float32"),  # quantiles from a subsample
        "wide": rng.standard_normal((3, 70_001)).astype("float32"),  # fingerprints over chunks of 2^16
        "int8": rng.integers(-128, 128, (5, 7)).astype("int8"),
    }


def reference(x: np.ndarray, kinds: list[str], previous: np.ndarray | None = None) -> dict:
    if x.dtype != ml_dtypes.bfloat16:
        return st.compute(x, kinds, previous=previous)
    out = st.compute(x.astype(np.float32), kinds, previous=previous)  # bf16: its float32 values,
    bits = x.view(np.uint16)  # and the fingerprints of its bits
    out.update({k: v for k, v in st.compute(bits, kinds).items() if "fingerprint" in k})
    return out


def assert_same(got: dict, want: dict, where: str, rtol: float = 2e-5) -> None:
    assert set(got) == set(want), where
    for key, w in want.items():
        g = got[key]
        if isinstance(w, np.ndarray):
            assert np.shape(g) == w.shape, (where, key)
            if w.dtype.kind == "i":
                np.testing.assert_array_equal(g, w, err_msg=f"{where} {key}")
            else:
                np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6, err_msg=f"{where} {key}")
        elif st.Statistic.parse(key).name in ("count", "nan_count", "inf_count", "samples"):
            assert g == w, (where, key, g, w)
        else:
            np.testing.assert_allclose(
                g, w, rtol=rtol, atol=1e-6 * max(1.0, abs(w)), err_msg=f"{where} {key}"
            )


@pytest.mark.parametrize("name", sorted(arrays()))
def test_every_statistic_equals_numpys_on_the_raw_array(name):
    x = arrays()[name]
    previous = (x.astype(np.float32) * 0.5 + 0.25).astype(x.dtype) if x.dtype.kind == "f" else x
    kinds = SCALARS + VECTORS

    @jax.jit
    def measure(a, prev):
        values = jr.tensor_statistics(a, kinds, prev, jnp.bool_(True))
        packed, layout = jst.pack({"t": values}, {"t": ("F32", tuple(a.shape), ())})
        return Statistics(packed, layout, {}, (), {}, Mode.TRAIN)  # a pytree: the layout is static

    got = measure(jnp.asarray(x), jnp.asarray(previous)).values()["t"]
    want = reference(x, kinds, None if previous is None else np.asarray(previous).astype(np.float64))
    assert_same(got, want, name)


def test_bounds_are_the_real_numbers_not_their_float32_roundings():
    # -9.4999 is not a float32: a float32 value between it and its rounding is on the right side
    lo32 = np.float32(-9.4999)
    inside = np.nextafter(lo32, np.float32(0)) if float(lo32) < -9.4999 else lo32
    x = np.asarray([[inside, lo32, np.float32(0.1), np.float32(9.5)]], dtype="float32")
    kinds = ["outside(-9.4999,9.4999)", "equal(0.1)", "unit_outside(-9.4999,9.4999)"]
    got = jax.jit(lambda a: jr.tensor_statistics(a, kinds))(jnp.asarray(x))
    want = st.compute(x, kinds)
    assert float(got["outside(-9.4999,9.4999)"]) == want["outside(-9.4999,9.4999)"]
    assert float(got["equal(0.1)"]) == want["equal(0.1)"] == 0.0  # 0.1 is no float32
    np.testing.assert_array_equal(
        np.asarray(got["unit_outside(-9.4999,9.4999)"]), want["unit_outside(-9.4999,9.4999)"]
    )


CLASS_CASES = {
    "logits": (np.arange(40) % 4, np.random.default_rng(1).standard_normal((40, 4))),
    "labels_out_of_range": (np.array([0, 1, 2, -1, 5, 2]), np.random.default_rng(2).standard_normal((6, 3))),
    "probabilities": (np.array([0, 1, 1, 0, 1]), np.array([0.1, 0.7, 0.4, 0.2, 0.9])),
    "scores": (np.array([0, 1, 1, 0]), np.array([-2.0, 3.0, -0.5, 0.2])),
    "one_hot": (np.eye(3)[[0, 2, 1, 1, 2]], np.random.default_rng(3).standard_normal((5, 3))),
    "float_labels": (
        np.array([0.0, 1.0, 1.5, 2.0, np.nan]),
        np.random.default_rng(4).standard_normal((5, 3)),
    ),
}


@pytest.mark.parametrize("case", sorted(CLASS_CASES))
def test_class_statistics_equal_numpys(case):
    labels, preds = CLASS_CASES[case]
    labels = labels.astype("float32" if labels.dtype.kind == "f" else "int32")
    preds = preds.astype("float32")
    on_labels, on_preds = jax.jit(jr.class_statistics)(jnp.asarray(labels), jnp.asarray(preds))
    want_labels, want_preds = st.class_statistics(labels, preds)
    assert set(on_labels) == set(want_labels) and set(on_preds) == set(want_preds)
    for got, want in ((on_labels, want_labels), (on_preds, want_preds)):
        for key in want:
            np.testing.assert_array_equal(np.asarray(got[key]), want[key], err_msg=f"{case} {key}")


# a tiny MLP trained with jax.grad and plain SGD ---------------------------------------------------
def data(n: int = 256) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(0).standard_normal((n, 8)).astype("float32")
    return x, np.argmax(x @ np.random.default_rng(42).standard_normal((8, 3)), axis=1).astype("int32")


def init(bias: float = 0.0) -> dict:
    k1, k2 = jax.random.split(jax.random.key(0))
    return {
        "hidden": {
            "kernel": jax.random.normal(k1, (8, 16)) * np.sqrt(2.0 / 24),
            "bias": jnp.full((16,), bias),
        },
        "logits": {"kernel": jax.random.normal(k2, (16, 3)) * np.sqrt(2.0 / 19), "bias": jnp.zeros(3)},
    }


def loss_fn(p, x, y):
    pre = x @ p["hidden"]["kernel"] + p["hidden"]["bias"]
    logits = jax.nn.relu(pre) @ p["logits"]["kernel"] + p["logits"]["bias"]
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1)), (logits, pre)


def make_step(path: str, hook=None):
    """The jitted train step of `train`; `hook` only for the "inside" path."""

    def step(i, p, x, y, lr, due):
        (loss, (logits, pre)), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, x, y)
        seen = dict(
            inputs=x, labels=y, predictions=logits, relu_activations={"hidden": (pre, jax.nn.relu(pre))}
        )
        out = None
        if path == "statistics":
            out = mldbg.jax.statistics(p, grads, loss, **seen)
        elif path == "gated":  # computed only on the hook's statistics steps
            out = mldbg.jax.statistics(p, grads, loss, when=due, **seen)
        elif path == "inside":
            hook.record(i, params=p, grads=grads, loss=loss, **seen)
        new = jax.tree_util.tree_map(lambda w, g: w - lr * g, p, grads)
        return new, (p, grads, loss, seen) if path == "eager" else None, out, loss

    return jax.jit(step)


STEPS = {path: make_step(path) for path in ("eager", "statistics", "gated")}  # compiled once for every run


def train(hook, path: str, lr: float = 0.1, bias: float = 0.0, steps: int = 40) -> list[np.ndarray]:
    """`path`: "eager" (record outside jit, the hook computes), "statistics" (computed inside
    the jitted step by `mldbg.jax.statistics`, returned, handed over), "gated" (the same under
    `when=hook.statistics_due(step)`), "inside" (`hook.record` inside the jitted step)."""
    step = STEPS[path] if path in STEPS else make_step(path, hook)
    params, (x, y), losses = init(bias), data(), []
    for i in range(steps):
        b = i % 8
        due = hook.statistics_due(i)
        params, seen, stats, loss = step(
            i, params, x[b * 32 : (b + 1) * 32], y[b * 32 : (b + 1) * 32], lr, due
        )
        if path == "eager":
            p, grads, loss, named = seen
            hook.record(i, params=p, grads=grads, loss=loss, **named)
        elif path in ("statistics", "gated"):
            hook.record(i, statistics=stats)
        losses.append(loss)
    hook.close()
    return [np.asarray(v) for v in losses]


def statistics_of(trial) -> dict[tuple[str, int], dict]:
    out = {}
    for step in trial.steps():
        for name in trial.tensor_names(step=step):
            stats = trial.record(name, step).statistics
            if stats:
                out[(name, step)] = dict(stats)
        for name in trial.tensor_names(step=step):
            for key, vname in trial.vector_statistics(name).items():
                if step in trial.tensor(vname).steps():
                    out.setdefault((name, step), {})[key] = trial.tensor(vname).value(step)
    return out


def test_recorded_statistics_equal_numpys_on_the_recorded_raw_tensors(tmp_path):
    collections = [
        "weights",
        "biases",
        "gradients",
        "losses",
        "inputs",
        "labels",
        "predictions",
        "relu_activations",
    ]
    hook = mldbg.jax.Hook(str(tmp_path), save_config=mldbg.SaveConfig(save_interval=1),
                          include_collections=collections, statistics=True, statistics_every=5)  # fmt: skip
    train(hook, "eager", steps=26)
    trial = mldbg.create_trial(str(tmp_path))
    found = statistics_of(trial)
    stat_steps = sorted({s for _, s in found})
    assert stat_steps == [*range(20), 20, 25]  # every step of the warmup, then every 5th
    names = {n for n, _ in found}
    assert names == {"hidden/kernel", "hidden/bias", "logits/kernel", "logits/bias", "gradient/hidden/kernel",
                     "gradient/hidden/bias", "gradient/logits/kernel", "gradient/logits/bias", "hidden_input_0",
                     "model_input_0", "labels_0", "model_output_0"}  # fmt: skip
    assert trial.tensor("loss").steps() == list(range(26))
    labels_preds = st.class_statistics(
        trial.tensor("labels_0").value(3), trial.tensor("model_output_0").value(3)
    )
    for (name, step), got in found.items():
        raw = trial.tensor(name).value(step)
        kinds = [k for k in got if k not in ("class_counts", "class_correct", "confusion", "delta_l2")]
        assert_same({k: got[k] for k in kinds}, st.compute(raw, kinds), f"{name}@{step}", rtol=1e-4)
        if "delta_l2" in got:
            before = [s for s in stat_steps if s < step]
            if before:
                want = st.compute(raw, ["delta_l2"], previous=trial.tensor(name).value(before[-1]))[
                    "delta_l2"
                ]
                np.testing.assert_allclose(got["delta_l2"], want, rtol=1e-4, atol=1e-7)
            else:
                assert np.isnan(got["delta_l2"])
    assert "delta_l2" in found[("hidden/kernel", 25)] and "row_range" in found[("hidden/kernel", 25)]
    assert set(found[("labels_0", 3)]) >= {"class_counts", "class_correct", "confusion", "samples"}
    for key, want in labels_preds[0].items():
        np.testing.assert_array_equal(found[("labels_0", 3)][key], want)
    np.testing.assert_array_equal(
        found[("model_output_0", 3)]["class_counts"], labels_preds[1]["class_counts"]
    )


def test_the_jit_paths_record_what_the_eager_path_records(tmp_path):
    # ~15-20 s on a shared 2-core machine: four train steps and the statistics compile (XLA)
    found = {}
    for path in ("eager", "statistics", "gated", "inside"):
        losses = train(mldbg.jax.Hook(str(tmp_path / path)), path, steps=31)
        trial = mldbg.create_trial(str(tmp_path / path))
        found[path] = statistics_of(trial)
        assert trial.tensor("loss").steps() == list(range(31))  # the loss of every step
        np.testing.assert_array_equal([trial.tensor("loss").value(s) for s in range(31)], losses)
    eager = found["eager"]
    assert sorted({s for _, s in eager}) == [*range(20), 20, 30]
    assert any("delta_l2" in v for v in eager.values())
    for path in ("statistics", "gated", "inside"):
        other = found[path]
        assert set(other) == set(eager), path
        for where, want in eager.items():
            if path == "inside":  # no delta_l2 inside jit without `mldbg.jax.statistics`
                want = {k: v for k, v in want.items() if k != "delta_l2"}
            assert_same(other[where], want, f"{path} {where}", rtol=1e-4)


def test_a_hook_given_a_save_config_records_no_statistics(tmp_path):
    train(mldbg.jax.Hook(str(tmp_path), save_config=mldbg.SaveConfig(save_interval=10)), "eager", steps=12)
    trial = mldbg.create_trial(str(tmp_path))
    assert statistics_of(trial) == {}
    assert trial.steps() == [0, 10]


def test_statistics_of_eval_steps_leave_the_parameters_out(tmp_path):
    hook = mldbg.jax.Hook(str(tmp_path))
    x, y = data(32)
    p = init()
    loss, (logits, _) = loss_fn(p, x, y)
    hook.record(0, params=p, loss=loss, inputs=x, labels=y, predictions=logits, mode=Mode.EVAL)
    hook.close()
    found = statistics_of(mldbg.create_trial(str(tmp_path)))
    assert {n for n, _ in found} == {"model_input_0", "labels_0", "model_output_0"}


# the default rules over a two-line run ------------------------------------------------------------
RUNS = {"healthy": {}, "exploding": {"lr": 1e12}, "dead_relu": {"bias": -10.0}}


@pytest.fixture(scope="module")
def two_line_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("jax_two_lines")
    for path in ("eager", "statistics"):
        for name, kwargs in RUNS.items():
            with mldbg.jax.Hook(str(base / path / name)) as hook:
                train(hook, path, steps=60, **kwargs)
    return base


@pytest.mark.parametrize("path", ["eager", "statistics"])
@pytest.mark.parametrize(("run", "rule"), [("exploding", "exploding_tensor"), ("dead_relu", "dead_relu")])
def test_the_default_rules_fire_on_a_two_line_run(two_line_runs, path, run, rule):
    trial = mldbg.create_trial(str(two_line_runs / path / run))
    assert not any(
        trial.record(n, 0).has_raw for n in trial.tensor_names(step=0, collection="relu_activations")
    )
    findings = mldbg.check(str(two_line_runs / path / run))
    assert rule in {f.rule for f in findings}, [str(f) for f in findings]


@pytest.mark.parametrize("path", ["eager", "statistics"])
def test_the_default_rules_stay_quiet_on_the_healthy_twin(two_line_runs, path):
    findings = mldbg.check(str(two_line_runs / path / "healthy"))
    assert findings == [], [str(f) for f in findings]


def test_donated_parameters_do_not_break_delta_l2(tmp_path):
    """The hook keeps its own device copies of the parameters of the last statistics step (and
    reads the loss later, not the parameters): deleting the user's buffers after `record`, as a
    step with `donate_argnums` does, leaves them intact."""

    @jax.jit
    def grads_of(p, x, y):
        return jax.value_and_grad(loss_fn, has_aux=True)(p, x, y)

    update = jax.jit(lambda p, g: jax.tree_util.tree_map(lambda w, d: w - 0.1 * d, p, g))
    x, y = data(32)
    params, history = init(), []
    with mldbg.jax.Hook(str(tmp_path)) as hook:
        for i in range(3):
            (loss, (logits, _)), grads = grads_of(params, x, y)
            hook.record(i, params=params, grads=grads, loss=loss)
            history.append(np.asarray(params["hidden"]["kernel"]))
            old, params = params, update(params, grads)
            for leaf in jax.tree_util.tree_leaves(old):  # as `donate_argnums` does on a GPU
                leaf.delete()
    trial = mldbg.create_trial(str(tmp_path))
    deltas = [trial.record("hidden/kernel", s).statistics["delta_l2"] for s in range(3)]
    assert np.isnan(deltas[0])
    for s in (1, 2):
        np.testing.assert_allclose(deltas[s], np.linalg.norm(history[s] - history[s - 1]), rtol=1e-5)
