"""While a real training records more steps, the dashboard's API shows them, and its rules fire
on a defective run before the run ends."""

from __future__ import annotations

import pytest

import mldbg
from tests.dashboard.helpers import LiveTraining, Server, run_url


@pytest.fixture
def live(tmp_path):
    started: list[LiveTraining] = []

    def start(name: str, **kwargs) -> LiveTraining:
        t = LiveTraining(tmp_path / name, **kwargs)
        t.start()
        started.append(t)
        assert t.paused.wait(60), "the training never reached its pause"
        return t

    yield start
    for t in started:
        t.go.set()
        t.join(30)


def test_steps_written_after_the_server_started_appear(live, tmp_path):
    training = live("live", first=10, rest=20)
    path = tmp_path / "live"
    with Server(str(path)) as server:
        body = server.wait_for(run_url("live"), lambda r: r["steps"] >= 10)
        assert body["status"] == "running" and not body["finished"] and not body["loaded_all_steps"]
        seen = body["last_step"]
        early = server.json(run_url("live") + "/scalars")["series"][0]
        assert early["steps"] and max(early["steps"]) <= seen

        training.finish()
        body = server.wait_for(run_url("live"), lambda r: r["status"] == "finished")
        trial = mldbg.create_trial(path)
        assert body["steps"] == len(trial.steps()) == 30 + 30 // 5 and body["last_step"] > seen
        loss = trial.tensor("CrossEntropyLoss_output_0")
        series = server.json(run_url("live") + "/scalars")["series"][0]
        assert series["steps"] == loss.steps()
        assert series["values"] == [float(loss.value(s)) for s in loss.steps()]
        # polling with `since` brings only what is new
        new = server.json(run_url("live") + "/scalars", since=seen)["series"][0]
        assert new["steps"] == [s for s in loss.steps() if s > seen] and new["steps"]
        grad = trial.tensor("gradient/0.weight")
        red = server.json(run_url("live") + "/reduction", tensor=grad.name, reduction="l2")
        assert red["steps"] == grad.steps() and len(red["steps"]) == 30
        found = server.wait_for(run_url("live") + "/findings", lambda b: b["done"])
        assert found["findings"] == [] and found["checked_step"] == trial.steps()[-1]


def test_rules_fire_live_before_the_run_ends(live, tmp_path):
    training = live("explode", first=12, rest=3, lr=1e12)
    with Server(str(tmp_path / "explode"), "--rule", "exploding_tensor") as server:
        body = server.wait_for(run_url("explode") + "/findings", lambda b: b["findings"])
        assert [f["rule"] for f in body["findings"]] == ["exploding_tensor"]
        assert body["rules"] == ["exploding_tensor"] and not body["done"]
        assert server.json(run_url("explode"))["status"] == "running"  # still paused mid-training
        training.finish()
        server.wait_for(run_url("explode") + "/findings", lambda b: b["done"])
