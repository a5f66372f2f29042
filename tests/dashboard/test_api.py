"""The dashboard's JSON API over real HTTP, served by `mldbg dashboard` in its own process,
compared with what the trial itself reads and with NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mldbg
from mldbg.insight.distribution import PERCENTILES
from tests.dashboard.conftest import STEPS
from tests.dashboard.helpers import Server, run_url
from tests.tiny import train


def as_float(v):
    """The API sends NaN and infinities as strings (JSON has none)."""
    return float(v)


@pytest.fixture(scope="module")
def server(recorded, tmp_path_factory):
    later = tmp_path_factory.mktemp("later") / "run"  # does not exist yet
    never = tmp_path_factory.mktemp("never") / "never"  # nor ever will
    log = tmp_path_factory.mktemp("logs") / "server.log"
    with Server(str(recorded["sweep"]), str(recorded["reduced"]), str(later), str(never), log=log) as s:
        s.later = later
        yield s


def test_runs_lists_each_run_of_the_sweep_with_its_state(server, recorded):
    body = server.wait_for("api/runs", lambda b: all(r["status"] != "running" for r in b["runs"]))
    runs = {r["name"]: r for r in body["runs"]}
    assert list(runs) == ["explode", "healthy", "reduced", "run", "never"]  # the sweep folder expanded
    for name in ("explode", "healthy", "reduced"):
        trial = mldbg.create_trial(recorded[name])
        r = runs[name]
        assert r["path"] == str(recorded[name])
        assert r["steps"] == len(trial.steps()) and r["last_step"] == trial.steps()[-1]
        assert r["workers"] == trial.workers() == ["worker_0"]
        assert r["status"] == "finished" and r["finished"] and r["loaded_all_steps"]
        assert r["corrupt"] == [] and r["error"] is None
    assert runs["never"]["status"] == "waiting" and runs["never"]["steps"] == 0
    assert body["rules"]["enabled"] is True
    assert body["percentiles"] == list(PERCENTILES)


def test_tensor_names_by_collection_equal_the_trial(server, recorded):
    trial = mldbg.create_trial(recorded["healthy"])
    body = server.json(run_url("healthy") + "/tensors")
    assert body["tensors"] == trial.tensor_names()
    assert body["collections"] == trial.collections()
    assert "gradient/fc1.weight" in body["collections"]["gradients"]


@pytest.mark.parametrize("name", ["healthy", "explode"])
def test_loss_series_equals_the_trial_at_each_step(server, recorded, name):
    trial = mldbg.create_trial(recorded[name])
    body = server.json(run_url(name) + "/scalars")
    (series,) = [s for s in body["series"] if s["collection"] == "losses"]
    loss = trial.tensor("CrossEntropyLoss_output_0")
    assert series["name"] == "CrossEntropyLoss_output_0"
    assert series["steps"] == loss.steps() == trial.steps()
    assert set(series["modes"]) == {"TRAIN", "EVAL"}
    for step, mode, value in zip(series["steps"], series["modes"], series["values"], strict=True):
        expected = float(loss.value(step))
        assert mode == trial.mode(step).name
        if math.isfinite(expected):
            assert value == expected
        else:
            assert isinstance(value, str) and math.isnan(as_float(value)) == math.isnan(expected)
    # only the steps after `since`
    later = server.json(run_url(name) + "/scalars", since=20)["series"][0]
    assert later["steps"] == [s for s in loss.steps() if s > 20]


@pytest.mark.parametrize(("reduction", "absolute", "numpy"), [
    ("mean", False, np.mean), ("std", False, np.std), ("min", False, np.min), ("max", False, np.max),
    ("l2", False, lambda x: np.sqrt(np.sum(np.square(x, dtype=np.float64)))),
    ("mean", True, lambda x: np.mean(np.abs(x))), ("variance", False, np.var),
])  # fmt: skip
def test_reduction_over_steps_equals_numpy(server, recorded, reduction, absolute, numpy):
    trial = mldbg.create_trial(recorded["healthy"])
    tensor = trial.tensor("gradient/fc2.weight")
    body = server.json(
        run_url("healthy") + "/reduction", tensor=tensor.name, reduction=reduction, abs=str(absolute).lower()
    )
    assert body["steps"] == tensor.steps() and len(body["steps"]) == STEPS  # gradients: TRAIN steps only
    assert set(body["modes"]) == {"TRAIN"}
    for step, value in zip(body["steps"], body["values"], strict=True):
        assert value == pytest.approx(float(numpy(tensor.value(step))), rel=1e-6, abs=1e-12)


def test_reduction_is_read_from_saved_reductions_when_no_raw_tensor_was_saved(server, recorded):
    trial = mldbg.create_trial(recorded["reduced"])
    tensor = trial.tensor("fc1.weight")
    with pytest.raises(mldbg.errors.TensorUnavailableForStep):
        tensor.value(tensor.steps()[0])  # really no raw values
    for reduction, absolute in (("mean", False), ("max", False), ("l2", False), ("mean", True)):
        body = server.json(
            run_url("reduced") + "/reduction",
            tensor="fc1.weight",
            reduction=reduction,
            abs=str(absolute).lower(),
        )
        assert body["steps"] == tensor.steps()
        assert body["values"] == [tensor.reduction_value(s, reduction, abs=absolute) for s in tensor.steps()]
    # a reduction that was not saved cannot be computed without raw values: a clear 404
    status, body = server.get(run_url("reduced") + "/reduction", tensor="fc1.weight", reduction="std")
    assert status == 404 and "std" in body["detail"] and "fc1.weight" in body["detail"]
    status, body = server.get(run_url("reduced") + "/distribution", tensor="fc1.weight")
    assert status == 404 and "no raw values of tensor 'fc1.weight'" in body["detail"]


def test_distribution_bands_and_histogram_equal_numpy(server, recorded):
    trial = mldbg.create_trial(recorded["healthy"])
    tensor = trial.tensor("fc1.weight")
    body = server.json(run_url("healthy") + "/distribution", tensor="fc1.weight")
    assert body["percentiles"] == list(PERCENTILES)
    assert body["steps"] == tensor.steps()
    for step, row, nonfinite in zip(body["steps"], body["values"], body["nonfinite"], strict=True):
        expected = np.percentile(tensor.value(step).astype(np.float64), PERCENTILES)
        np.testing.assert_allclose(row, expected, rtol=1e-12)
        assert nonfinite == 0
    step = tensor.steps()[7]
    hist = server.json(run_url("healthy") + "/histogram", tensor="fc1.weight", step=step, bins=12)
    counts, edges = np.histogram(tensor.value(step).astype(np.float64), bins=12)
    assert hist["step"] == step and hist["mode"] == trial.mode(step).name
    assert hist["counts"] == counts.tolist() and hist["size"] == tensor.value(step).size
    np.testing.assert_allclose(hist["edges"], edges, rtol=1e-12)
    latest = server.json(run_url("healthy") + "/histogram", tensor="fc1.weight")
    assert latest["step"] == tensor.steps()[-1]


def test_distribution_counts_the_non_finite_values_of_an_exploded_run(server, recorded):
    trial = mldbg.create_trial(recorded["explode"])
    tensor = trial.tensor("fc1.weight")
    body = server.json(run_url("explode") + "/distribution", tensor="fc1.weight")
    last = tensor.value(body["steps"][-1])
    assert body["nonfinite"][-1] == int(np.sum(~np.isfinite(last))) > 0


def test_findings_name_the_defect_and_nothing_on_the_healthy_run(server):
    body = server.wait_for(
        "api/findings", lambda b: all(b["runs"][n]["done"] for n in ("healthy", "explode"))
    )
    explode = body["runs"]["explode"]
    assert "exploding_tensor" in {f["rule"] for f in explode["findings"]}
    f = next(f for f in explode["findings"] if f["rule"] == "exploding_tensor")
    assert f["run"] == "explode" and f["step"] <= 3 and f["mode"] == "TRAIN"
    assert "NaN" in f["message"] and len(f["suggestion"]) > 20 and f["tensors"]
    assert explode["errors"] == {}
    # the same findings as `mldbg check` (the default rule set)
    expected = mldbg.check(server_path(server, "explode"))
    assert [(f["rule"], f["step"], f["message"]) for f in explode["findings"]] == [
        (e.rule, e.step, e.message) for e in expected
    ]
    assert body["runs"]["healthy"]["findings"] == []
    assert body["runs"]["healthy"]["rules"]  # the default set did run
    per_run = server.json(run_url("explode") + "/findings")
    assert per_run["findings"] == explode["findings"]
    summary = {r["name"]: r for r in server.json("api/runs")["runs"]}
    assert summary["explode"]["findings"] == len(explode["findings"]) and summary["healthy"]["findings"] == 0


def server_path(server, name):
    return next(r["path"] for r in server.json("api/runs")["runs"] if r["name"] == name)


@pytest.mark.parametrize(("path", "params", "status", "words"), [
    ("api/runs/nope/scalars", {}, 404, ["no run named 'nope'", "healthy"]),
    ("api/runs/nope", {}, 404, ["no run named 'nope'"]),
    ("api/runs/healthy/reduction", {"tensor": "fc9.weight"}, 404, ["no tensor 'fc9.weight'", "'healthy'"]),
    ("api/runs/healthy/distribution", {"tensor": "nothing"}, 404, ["no tensor 'nothing'"]),
    ("api/runs/healthy/histogram", {"tensor": "fc1.weight", "step": 999}, 404, ["not saved at step 999", "fc1.weight"]),
    ("api/runs/healthy/reduction", {"tensor": "fc1.weight", "reduction": "median"}, 400, ["unknown reduction 'median'"]),
    ("api/runs/healthy/reduction", {}, 400, ["tensor"]),
    ("api/runs/healthy/histogram", {"tensor": "fc1.weight", "step": "last"}, 400, ["step"]),
    ("api/runs/never/reduction", {"tensor": "fc1.weight"}, 404, ["'never'", "waiting for training to start"]),
    ("api/nothing", {}, 404, ["no endpoint /api/nothing"]),
])  # fmt: skip
def test_errors_are_clear_json_never_a_stack_trace(server, path, params, status, words):
    got, body = server.get(path, **params)
    assert got == status, body
    assert set(body) == {"detail"} and "Traceback" not in body["detail"]
    for w in words:
        assert w in body["detail"], body["detail"]


def test_a_run_that_did_not_exist_appears_when_it_starts(server):
    assert server.json(run_url("run"))["status"] == "waiting"
    run = train(server.later, steps=12, eval_every=None, include_collections=("losses", "weights"))
    body = server.wait_for(run_url("run"), lambda r: r["status"] == "finished")
    assert body["steps"] == 12
    series = server.json(run_url("run") + "/scalars")["series"][0]
    assert series["values"] == pytest.approx(run.train_losses, rel=1e-6)


def test_the_page_and_a_local_plotly_are_served(server):
    import importlib.resources
    import urllib.request

    with urllib.request.urlopen(server.url) as r:
        html = r.read().decode()
    assert "static/plotly.min.js" in html and "static/dashboard.js" in html
    assert "cdn" not in html.lower() and "https://" not in html
    with urllib.request.urlopen(server.url + "static/plotly.min.js") as r:
        js = r.read()
    assert js == (importlib.resources.files("plotly") / "package_data" / "plotly.min.js").read_bytes()
