"""The trackers as a training uses them: `Hook(actions=[...])` (the in-process watcher, a
child process) inside the training's own MLflow run (`mlflow.start_run()`) and W&B run
(`wandb.init`), with a built-in rule and a custom rule whose name has odd characters."""

import json
import math
import pickle
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient
from tests.actions.odd_rule import OddName
from tests.waiting import wait_until
from torch import nn

import mldbg
import mldbg.torch
from mldbg.actions import MLflow, WandB


def _train(out, actions, rules=("exploding_tensor",)):
    """Eight steps of a tiny MLP at a learning rate that overflows (NaN from step 3)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=1e9)
    hook = mldbg.torch.Hook(
        out, rules=list(rules), actions=actions, include_collections=["losses"],
        save_config=mldbg.SaveConfig(save_interval=1),
    )  # fmt: skip
    hook.register_module(model)
    losses = []
    for _ in range(8):
        x = torch.randn(16, 4)
        loss = nn.functional.cross_entropy(model(x), (x[:, 0] > 0).long())
        opt.zero_grad()
        loss.backward()
        opt.step()
        hook.save_tensor("loss", loss.detach(), ("losses",))
        losses.append(float(loss.detach()))
    hook.close()
    return losses


def test_findings_reach_the_trainings_active_mlflow_run(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    store = (tmp_path / "mlruns").as_uri()
    mlflow.set_tracking_uri(store)
    try:
        with mlflow.start_run(run_name="my-training") as active:
            action = MLflow()  # no run named: the active one, in the watcher process too
            own = MLflow(experiment="debugging")  # a run of its own asked for: not the active one
            assert own.run_id is None and pickle.loads(pickle.dumps(own)).run_id is None
            losses = _train(tmp_path / "run", [action], ("exploding_tensor", OddName()))
            mlflow.log_metric("loss", losses[0])
    finally:
        mlflow.set_tracking_uri(None)
    assert action.run_id == active.info.run_id
    client = MlflowClient(store)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert [r.info.run_name for r in runs] == ["my-training"]  # no run of mldbg's own
    got = client.get_run(active.info.run_id)
    findings = mldbg.check(tmp_path / "run", rules=["exploding_tensor", OddName()])
    first = {f.rule: f for f in reversed(findings)}
    assert got.data.tags["mldbg.rule.exploding_tensor"].startswith("step 3 (TRAIN): NaN")
    assert got.data.tags["mldbg.rule.odd rule/_ _v2___"] == 'step 2 (TRAIN): loss seen {x} "quoted" & <b>'
    assert [
        p.step for p in client.get_metric_history(got.info.run_id, "mldbg.finding.odd rule/_ _v2___")
    ] == [2]
    path = client.download_artifacts(got.info.run_id, "mldbg/findings.json", str(tmp_path))
    saved = json.loads(Path(path).read_text())["findings"]
    assert {f["rule"] for f in saved} == set(first)
    odd = next(f for f in saved if f["rule"] == "odd rule/α (v2)!*")
    assert odd == first["odd rule/α (v2)!*"].to_dict() and odd["tensors"] == ["loss", "a/b"]
    assert got.data.metrics["loss"] == losses[0] and got.info.status == "FINISHED"


def test_findings_go_beside_the_trainings_own_wandb_run(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    from tests.actions.test_wandb import records

    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    run = wandb.init(project="mine", mode="offline", dir=str(tmp_path), name="my-training")
    try:
        losses = _train(tmp_path / "run", [WandB()])
        run.log({"train/loss": losses[0]})
    finally:
        run.finish()
    wait_until(
        lambda: _offline_runs(tmp_path, records), what="both offline runs written"
    )  # W&B's service writes late
    found = _offline_runs(tmp_path, records)
    assert set(found) == {"my-training", "my-training-mldbg"}
    ours, summary = found["my-training-mldbg"]
    assert ours.project == "mine" and ours.run_group == run.id
    config = {i.key: json.loads(i.value_json) for i in ours.config.update}
    assert config["mldbg.training_run"] == run.id
    (finding,) = mldbg.check(tmp_path / "run", rules=["exploding_tensor"])[:1]
    assert summary["mldbg/rule/exploding_tensor"] == f"step {finding.step} (TRAIN): {finding.message}"
    assert summary["mldbg/findings"] >= 1
    assert not math.isnan(losses[0])


def _offline_runs(wandb_dir, records):
    """{display name: (run record, summary)} of the offline runs, once both are written."""
    found = {}
    for path in wandb_dir.glob("wandb/offline-run-*/run-*.wandb"):
        summary, wb_run = {}, None
        for r in records(path):
            kind = r.WhichOneof("record_type")
            if kind == "run":
                wb_run = r.run
            elif kind == "summary":
                summary.update(
                    {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.summary.update}
                )
        if wb_run is None:
            return None
        found[wb_run.display_name] = (wb_run, summary)
    return found if len(found) == 2 else None
