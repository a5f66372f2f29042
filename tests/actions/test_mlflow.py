"""`mldbg.actions.MLflow`: findings (and the losses) reach a real local MLflow tracking store,
sent by a real `mldbg watch` process; read back with MLflow's own client."""

import json
import math
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from tests.actions.tracker_helpers import LOSSES, nan_run, watch

import mldbg
from mldbg.actions import ACTIONS, MLflow, resolve_actions
from mldbg.errors import InvalidConfig

ENV = {"MLFLOW_ALLOW_FILE_STORE": "true"}  # MLflow 3 wants the opt-in for a file store


@pytest.fixture
def store(tmp_path, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    return (tmp_path / "mlruns").as_uri()


def test_registered_and_built_from_config():
    assert ACTIONS["mlflow"] is MLflow
    (action,) = resolve_actions([{"type": "mlflow", "tracking_uri": "file:///x", "experiment": "e"}])
    assert isinstance(action, MLflow) and action.experiment == "e"
    with pytest.raises(InvalidConfig, match="mlflow"):
        resolve_actions([{"type": "mlflow", "no_such_setting": 1}])


def test_findings_reach_a_new_run_in_the_experiment(tmp_path, store):
    run = nan_run(str(tmp_path / "run"))
    res = watch(run, [{"type": "mlflow", "tracking_uri": store, "experiment": "debug"}], tmp_path, ENV)
    assert res.returncode == 1, res.stderr  # the rule fired
    client = MlflowClient(store)
    experiment = client.get_experiment_by_name("debug")
    (found,) = client.search_runs([experiment.experiment_id])
    assert found.info.run_name == "run" and found.info.status == "FINISHED"
    assert found.data.tags["mldbg.run"] == run
    tag = found.data.tags["mldbg.rule.exploding_tensor"]
    assert tag.startswith("step 3 (TRAIN): NaN")
    (point,) = client.get_metric_history(found.info.run_id, "mldbg.findings")
    assert point.step == 3 and point.value == 1.0
    assert [
        p.step for p in client.get_metric_history(found.info.run_id, "mldbg.finding.exploding_tensor")
    ] == [3]
    path = client.download_artifacts(found.info.run_id, "mldbg/findings.json", str(tmp_path))
    saved = json.loads(Path(path).read_text())
    expect = [f.to_dict() for f in mldbg.check(run, rules=["exploding_tensor"])]
    assert saved["findings"] == expect and saved["run"] == run


def test_an_existing_run_gets_findings_and_the_losses(tmp_path, store):
    run = nan_run(str(tmp_path / "run"))
    client = MlflowClient(store)
    experiment_id = client.create_experiment("training")
    training = client.create_run(experiment_id, run_name="my-training")
    actions = [{"type": "mlflow", "tracking_uri": store, "run_id": training.info.run_id,
                "log_statistics": True, "once_per_rule": False}]  # fmt: skip
    res = watch(run, actions, tmp_path, ENV)
    assert res.returncode == 1, res.stderr
    got = client.get_run(training.info.run_id)
    assert got.info.status == "RUNNING"  # not ours to end
    assert "mldbg.rule.exploding_tensor" in got.data.tags
    history = sorted(client.get_metric_history(training.info.run_id, "mldbg/loss"), key=lambda m: m.step)
    assert [m.step for m in history] == list(range(len(LOSSES)))
    for m, expect in zip(history, LOSSES, strict=True):
        assert (math.isnan(m.value) and math.isnan(expect)) or m.value == pytest.approx(expect)
    # every distinct finding: exploding_tensor fires at each step from 3 on
    steps = [
        p.step for p in client.get_metric_history(training.info.run_id, "mldbg.finding.exploding_tensor")
    ]
    assert sorted(steps) == sorted(f.step for f in mldbg.check(run, rules=["exploding_tensor"]))


def test_a_wrong_run_id_is_one_line_exit_2(tmp_path, store):
    run = nan_run(str(tmp_path / "run"))
    res = watch(run, [{"type": "mlflow", "tracking_uri": store, "run_id": "0" * 32}], tmp_path, ENV)
    assert res.returncode == 2, res.stderr
    assert "MLflow action: cannot open the MLflow run" in res.stderr
