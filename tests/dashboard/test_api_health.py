"""The dashboard API of issue 19 over runs recorded by the real torch hook, in-process
(Starlette's TestClient on the real app): per-layer health, several tensors per call, run
configuration, wall-clock times, epochs, evaluation passes, findings' evidence, the profiler
panel and compressed assets; each answer compared with what the trial itself reads."""

from __future__ import annotations

import gzip
import importlib.resources
import math
import time

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from torch import nn

import mldbg
import mldbg.torch
from mldbg.dashboard.app import create_app
from tests.tiny import train


def client_for(*paths, **kwargs) -> TestClient:
    app = create_app([str(p) for p in paths], allowed_hosts=["testserver"], refresh_seconds=0.2, **kwargs)
    return TestClient(app)


def ok(client: TestClient, path: str, **params):
    r = client.get(path, params=params)
    assert r.status_code == 200, (path, r.status_code, r.text)
    return r.json()


def nan_or(v):
    return math.nan if v is None else float(v)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A run recorded with the README's two lines (statistics), one recording raw tensors,
    one with the profiler on, and one that logs epochs and hyper-parameters."""
    root = tmp_path_factory.mktemp("health")
    paths = {name: root / name for name in ("stats", "raw", "profiled", "epochs", "reduced")}
    runs = {
        "stats": train(paths["stats"], steps=30, default_hook=True, eval_every=10),
        "raw": train(paths["raw"], steps=12, eval_every=5),
    }
    train(
        paths["reduced"],
        steps=6,
        eval_every=None,
        include_collections=("weights", "gradients", "losses"),
        reduction_config=mldbg.ReductionConfig(reductions=["mean"], norms=["l2"]),
    )
    # the profiler on, over 40 steps of 5 ms: the system sampler (every 20 ms) sees them
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    profiler = mldbg.ProfilerConfig(system_interval_ms=20)
    with mldbg.torch.Hook(
        paths["profiled"], include_collections=["losses"], profiler_config=profiler
    ) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn := nn.CrossEntropyLoss())
        for _ in range(40):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            time.sleep(0.005)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    with mldbg.torch.Hook(paths["epochs"], save_config=mldbg.SaveConfig(save_interval=1)) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn := nn.CrossEntropyLoss())
        hook.save_scalar("hp/lr", 0.05)
        for step in range(9):
            hook.save_scalar("epoch", step // 3)
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
    return paths, runs


@pytest.fixture(scope="module")
def client(runs):
    paths, _ = runs
    with client_for(*paths.values(), rules=["exploding_tensor"]) as c:
        yield c


def test_layers_from_the_recorded_statistics_equal_the_index(client, runs):
    paths, _ = runs
    trial = mldbg.create_trial(paths["stats"])
    body = ok(client, "/api/runs/stats/layers")
    params = {p["name"]: p for p in body["parameters"]}
    assert set(params) == set(trial.collections()["weights"]) | set(trial.collections()["biases"])
    p = params["fc1.weight"]
    assert p["source"] == "statistics" and p["gradient"] == "gradient/fc1.weight"
    records = trial.records("fc1.weight")
    stats = trial.statistic_columns("fc1.weight")
    assert p["steps"] == records.step.tolist()
    assert p["modes"] == [mldbg.Mode(int(m)).name for m in records.mode]
    np.testing.assert_array_equal([nan_or(v) for v in p["weight_l2"]], stats["l2"])
    expected_ratio = stats["delta_l2"] / stats["l2"]
    np.testing.assert_allclose([nan_or(v) for v in p["update_ratio"]], expected_ratio, equal_nan=True)
    assert p["update_ratio"][0] is None and all(0 < v < 0.1 for v in p["update_ratio"][1:] if v is not None)
    grad = trial.statistic_columns("gradient/fc1.weight")["l2"]
    grad_at = dict(zip(trial.records("gradient/fc1.weight").step.tolist(), grad.tolist(), strict=True))
    assert [nan_or(v) for v in p["grad_l2"]] == pytest.approx(
        [grad_at.get(s, math.nan) for s in p["steps"]], nan_ok=True
    )
    # activations: the dead fraction of each ReLU layer, from its unit_active vectors
    acts = {a["name"]: a for a in body["activations"]}
    assert "relu1_input_0" in acts
    a = acts["relu1_input_0"]
    vector = trial.vector_statistics("relu1_input_0")["unit_active"]
    vrec = trial.records(vector)
    expected = {int(vrec.step[i]): float(np.mean(trial.read(vrec[i]) == 0)) for i in range(len(vrec))}
    assert a["kind"] == "relu" and a["source"] == "statistics" and a["units"] == 32
    assert a["steps"] == sorted(expected)
    assert a["dead_fraction"] == [expected[s] for s in a["steps"]]
    assert a["saturated_fraction"] is None
    # since= keeps only the later steps
    later = ok(client, "/api/runs/stats/layers", since=20)
    assert all(s > 20 for p in later["parameters"] for s in p["steps"])


def test_layers_fall_back_to_raw_tensors(client, runs):
    paths, _ = runs
    trial = mldbg.create_trial(paths["raw"])
    body = ok(client, "/api/runs/raw/layers")
    p = next(p for p in body["parameters"] if p["name"] == "fc2.weight")
    assert p["source"] == "raw"
    w = trial.tensor("fc2.weight")
    assert p["steps"] == w.steps()
    values = [w.value(s).astype(np.float64) for s in w.steps()]
    assert p["weight_l2"] == pytest.approx([float(np.linalg.norm(v)) for v in values], rel=1e-12)
    ratios = [None] + [
        float(np.linalg.norm(b - a) / np.linalg.norm(b)) for a, b in zip(values[:-1], values[1:], strict=True)
    ]
    assert p["update_ratio"][0] is None
    assert p["update_ratio"][1:] == pytest.approx(ratios[1:], rel=1e-9)
    g = trial.tensor("gradient/fc2.weight")
    grad_at = {s: float(np.linalg.norm(g.value(s).astype(np.float64))) for s in g.steps()}
    assert [nan_or(v) for v in p["grad_l2"]] == pytest.approx(
        [grad_at.get(s, math.nan) for s in p["steps"]], nan_ok=True
    )
    a = next(a for a in body["activations"] if a["name"] == "relu1_input_0")
    assert a["source"] == "raw" and a["kind"] == "relu"
    x = trial.tensor("relu1_input_0")
    expected = [float(1 - (x.value(s) > 0).any(axis=0).mean()) for s in x.steps()]
    assert a["steps"] == x.steps() and a["dead_fraction"] == pytest.approx(expected)


def test_layers_from_saved_reductions(client, runs):
    paths, _ = runs
    trial = mldbg.create_trial(paths["reduced"])
    body = ok(client, "/api/runs/reduced/layers")
    p = next(p for p in body["parameters"] if p["name"] == "fc1.weight")
    w, g = trial.tensor("fc1.weight"), trial.tensor("gradient/fc1.weight")
    assert p["source"] == "reductions" and p["steps"] == w.steps()
    assert p["weight_l2"] == [w.reduction_value(s, "l2") for s in w.steps()]
    assert p["grad_l2"] == [g.reduction_value(s, "l2") for s in w.steps()]
    assert set(p["update_ratio"]) == {None}  # no delta_l2 among reductions, no raw values


def test_several_tensors_in_one_call_equal_the_single_endpoint(client):
    names = ["fc1.weight", "gradient/fc1.weight", "out.bias"]
    body = ok(client, "/api/runs/raw/series", tensor=[*names, "nope"], reduction="l2")
    assert [s["tensor"] for s in body["series"]] == [*names, "nope"]
    for s in body["series"][:3]:
        single = ok(client, "/api/runs/raw/reduction", tensor=s["tensor"], reduction="l2")
        assert s["steps"] == single["steps"] and s["values"] == single["values"]
        assert len(s["wall_time"]) == len(s["steps"])
    assert "no tensor 'nope'" in body["series"][3]["detail"]
    grads = ok(client, "/api/runs/raw/series", tensor="gradient/.*weight", regex="true", reduction="mean")
    assert [s["tensor"] for s in grads["series"]] == [
        "gradient/fc1.weight",
        "gradient/fc2.weight",
        "gradient/out.weight",
    ]
    r = client.get("/api/runs/raw/series", params={"tensor": [f"t{i}" for i in range(65)]})
    assert r.status_code == 400 and "at most 64" in r.json()["detail"]
    r = client.get("/api/runs/raw/series", params={"tensor": "fc1.weight", "reduction": "median"})
    assert r.status_code == 400 and "unknown reduction 'median'" in r.json()["detail"]


def test_scalars_carry_wall_clock_time_and_one_point_per_evaluation_pass(client, runs):
    paths, recorded = runs
    trial = mldbg.create_trial(paths["raw"])
    body = ok(client, "/api/runs/raw/scalars")
    loss = next(s for s in body["series"] if s["collection"] == "losses")
    meta = ok(client, "/api/runs/raw")
    assert body["time_source"] == "interpolated"  # recorded before the dashboard looked, no profiler
    times = loss["wall_time"]
    assert all(t is not None for t in times) and times == sorted(times)
    assert meta["started"] <= times[0] and times[-1] <= meta["ended"] + 1e-6
    # 12 steps, an evaluation every 5: two passes of two batches each
    passes = loss["passes"]
    train_steps = [s for s in trial.steps() if trial.mode(s) == mldbg.Mode.TRAIN]
    assert [p["batches"] for p in passes] == [2, 2]
    for p, expected in zip(passes, recorded["raw"].eval_losses, strict=True):
        assert p["mode"] == "EVAL" and p["value"] == pytest.approx(expected, rel=1e-6)
        assert p["step"] == max(s for s in train_steps if s < p["first_step"])
        assert trial.mode(p["first_step"]) == trial.mode(p["last_step"]) == mldbg.Mode.EVAL
    assert loss["epochs"] is None
    # the profiled run's times are its profiler's step ends
    prof = ok(client, "/api/runs/profiled/scalars")
    assert prof["time_source"] == "profiler"
    steps = mldbg.profiler.read.ProfilerData(paths["profiled"]).steps()
    ends = dict(zip(steps.step.tolist(), steps.end.tolist(), strict=True))
    series = prof["series"][0]
    assert series["wall_time"] == [ends[s] for s in series["steps"]]


def test_epochs_and_hyperparameters_and_configuration(client, runs):
    paths, _ = runs
    body = ok(client, "/api/runs/epochs/scalars")
    loss = next(s for s in body["series"] if s["name"] == "CrossEntropyLoss_output_0")
    epoch = mldbg.create_trial(paths["epochs"]).tensor("epoch")
    at = {s: float(epoch.value(s)) for s in epoch.steps()}
    assert loss["epochs"] == [at[max(e for e in at if e <= s)] for s in loss["steps"]]
    assert sorted(set(loss["epochs"])) == [0.0, 1.0, 2.0]
    config = ok(client, "/api/runs/epochs/config")
    assert config["hyperparameters"] == {"lr": pytest.approx(0.05)}
    assert config["framework"] == "torch" and config["framework_version"] == torch.__version__
    assert config["world_size"] == 1 and config["workers"][0]["worker"] == "worker_0"
    assert config["workers"][0]["ended"] is not None and config["workers"][0]["stopped"] is False
    assert config["save_steps"]["TRAIN"] == {"count": 9, "first": 0, "last": 8, "interval": 1}
    assert config["raw_tensors"] is True
    stats = ok(client, "/api/runs/stats/config")
    assert {"l2", "delta_l2"} <= set(stats["statistics"]) and stats["hyperparameters"] == {}
    runs_ = {r["name"]: r for r in ok(client, "/api/runs")["runs"]}
    assert runs_["epochs"]["status"] == "finished" and runs_["epochs"]["framework"] == "torch"
    # the colours do not change from one start to the next
    with client_for(paths["epochs"], paths["raw"], rules=[]) as again:
        colours = {r["name"]: r["color"] for r in ok(again, "/api/runs")["runs"]}
    assert colours == {"epochs": runs_["epochs"]["color"], "raw": runs_["raw"]["color"]}


def test_profiler_panel_and_its_rules_verdicts(client, runs):
    paths, _ = runs
    body = ok(client, "/api/runs/profiled/profiler")
    data = mldbg.profiler.read.ProfilerData(paths["profiled"])
    assert body["available"] and body["reason"] is None
    (steps,) = body["steps"]
    assert steps["step"] == data.steps().step.tolist() and len(steps["forward"]) == len(steps["step"])
    system = data.system()
    assert len(system) >= 3 and body["system"][0]["node"] == system.node
    assert len(body["system"][0]["time"]) == len(system) and body["system"][0]["time"][0] >= 0
    assert body["system"][0]["time"] == pytest.approx((system.time - body["t0"]).tolist(), abs=1e-3)
    assert body["system"][0]["cpu_total"] == pytest.approx(system.cpu_total.tolist(), abs=0.01)
    verdicts = {v["rule"]: v for v in body["verdicts"]}
    assert verdicts and {v["verdict"] for v in verdicts.values()} <= {
        "issues",
        "no issue",
        "statistics",
        "not evaluated",
    }
    for v in verdicts.values():
        assert (v["verdict"] == "not evaluated") == (v["reason"] is not None)
    none = ok(client, "/api/runs/raw/profiler")
    assert none["available"] is False and "ProfilerConfig" in none["reason"]


def test_finding_evidence_shows_the_tensor_and_steps(tmp_path):
    train(tmp_path / "explode", steps=12, lr=1e12, eval_every=None)
    with client_for(tmp_path / "explode", rules=["exploding_tensor"]) as c:
        deadline = time.monotonic() + 30
        while not (found := ok(c, "/api/runs/explode/findings"))["done"] and time.monotonic() < deadline:
            time.sleep(0.1)
        (f,) = found["findings"][:1]
        assert f["id"] == 0 and f["tensor"] == f["tensors"][0] and f["rule"] == "exploding_tensor"
        body = ok(c, "/api/runs/explode/findings/0/evidence")
        assert body["finding"] == f
        lo, hi = body["window"]
        assert lo <= f["step"] <= hi
        trial = mldbg.create_trial(tmp_path / "explode")
        series = {s["tensor"]: s for s in body["series"]}
        s = series[f["tensor"]]
        tensor = trial.tensor(f["tensor"])
        assert f["step"] in s["steps"] and all(lo <= x <= hi for x in s["steps"])
        expected = [
            tensor.reduction_value(x, s["reduction"]) if s["kind"] == "reduction" else float(tensor.value(x))
            for x in s["steps"]
        ]
        assert [float(v) for v in s["values"]] == pytest.approx(expected, nan_ok=True)
        assert body["loss"]["name"] == "CrossEntropyLoss_output_0" and body["loss"]["steps"]
        hist = body["histogram"]
        value = tensor.value(f["step"])
        assert hist["step"] == f["step"] and hist["nonfinite"] == int((~np.isfinite(value)).sum()) > 0
        r = c.get("/api/runs/explode/findings/99/evidence")
        assert r.status_code == 404 and "no finding 99" in r.json()["detail"]


def test_json_is_compressed_and_plotly_goes_precompressed_and_cached(client):
    r = client.get("/api/runs/raw/layers", headers={"Accept-Encoding": "gzip"})
    assert r.headers["content-encoding"] == "gzip"
    raw = (importlib.resources.files("plotly") / "package_data" / "plotly.min.js").read_bytes()
    with client.stream("GET", "/static/plotly.min.js", headers={"Accept-Encoding": "gzip"}) as r:
        sent = b"".join(r.iter_raw())
        headers = r.headers
    assert headers["content-encoding"] == "gzip" and "immutable" in headers["cache-control"]
    assert gzip.decompress(sent) == raw and len(sent) < len(raw) / 2.5  # 4.8 MB -> about 1.5 MB
    again = client.get("/static/plotly.min.js", headers={"If-None-Match": headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    plain = client.get("/static/plotly.min.js", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.content == raw
    page = client.get("/", headers={"Accept-Encoding": "gzip"})
    assert page.headers["cache-control"] == "no-cache" and page.headers["etag"]


def test_the_scalars_of_several_runs_in_one_call(client):
    body = ok(client, "/api/scalars", run=["raw", "stats", "nope"])
    assert list(body["runs"]) == ["raw", "stats", "nope"]
    for name in ("raw", "stats"):
        assert body["runs"][name] == ok(client, f"/api/runs/{name}/scalars")
    assert "no run named 'nope'" in body["runs"]["nope"]["detail"]
