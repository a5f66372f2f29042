"""The live dashboard of issue 19 in its own process, over real HTTP: runs that appear in a
served folder after the start, the server-sent events that announce them, their steps and
their end, and the Stop button stopping a real training in another process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request

import mldbg
from tests.dashboard.helpers import Events, LiveTraining, Server, run_url


def test_a_run_created_after_the_start_appears_and_its_events_arrive(tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    with Server(str(sweep), "--rule", "exploding_tensor") as server:
        runs = server.json("api/runs")
        assert runs["sources"] == [str(sweep)]
        assert [r["name"] for r in runs["runs"]] == ["sweep"]  # the empty folder waits, as before
        with Events(server.url) as events:
            name, hello, seq = events.next()
            assert name == "hello" and [r["name"] for r in hello["runs"]] == ["sweep"]
            assert events.headers["Content-Type"].startswith("text/event-stream")
            training = LiveTraining(sweep / "late", first=5, rest=10, lr=1e12)
            training.start()
            assert training.paused.wait(60)
            paused_at = time.monotonic()
            _, run, _ = events.wait_for(lambda n, d: n == "run")
            assert run["name"] == "late" and run["path"] == str(sweep / "late")
            _, step, _ = events.wait_for(lambda n, d: n == "step" and d["run"] == "late" and d["steps"] >= 5)
            assert time.monotonic() - paused_at < 5  # a refresh (0.2 s) after the data landed
            _, finding, _ = events.wait_for(lambda n, d: n == "finding", seen=True)
            assert finding["run"] == "late" and finding["rule"] == "exploding_tensor" and finding["id"] == 0
            assert finding["tensor"] in finding["tensors"]
            seen = step["steps"]
            training.finish()
            _, status, _ = events.wait_for(lambda n, d: n == "status" and d["status"] == "finished")
            assert status["run"] == "late" and status["previous"] in ("running", "waiting")
        names = [r["name"] for r in server.json("api/runs")["runs"]]
        assert names == ["late"]  # the placeholder made way for the run found in the folder
        body = server.json(run_url("late"))
        trial = mldbg.create_trial(sweep / "late")
        assert body["status"] == "finished" and body["steps"] == len(trial.steps()) > seen
        # a client that reconnects with the last id it saw gets what it missed, no hello
        with Events(server.url, last_event_id=seq) as again:
            name, data, _ = again.next()
            assert name != "hello"
    # a second run in a folder that already held one is found too (one listing per refresh)
    with Server(str(sweep), "--no-rules") as server:
        assert [r["name"] for r in server.json("api/runs")["runs"]] == ["late"]
        later = LiveTraining(sweep / "later", first=0, rest=3)
        later.go.set()
        later.run()
        assert later.error is None
        body = server.wait_for("api/runs", lambda b: len(b["runs"]) == 2, timeout=10)
        assert [r["name"] for r in body["runs"]] == ["late", "later"]


TRAIN = textwrap.dedent(
    """
    import sys, time, torch
    from torch import nn
    import mldbg, mldbg.torch

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    hook = mldbg.torch.Hook(sys.argv[1], save_config=mldbg.SaveConfig(save_interval=1), flush_seconds=0.05)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    try:
        for step in range(3000):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            time.sleep(0.02)
    except mldbg.TrainingStopped as e:
        print("stopped at", step, e, flush=True)
        sys.exit(0)
    print("ran to the end", flush=True)
    sys.exit(3)
    """
)


def post(url: str, headers: dict | None = None, body: bytes | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=body if body is not None else b"", method="POST", headers=headers or {}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


def test_stop_ends_a_real_training_in_another_process(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    out = tmp_path / "job"
    job = subprocess.Popen([sys.executable, str(script), str(out)], stdout=subprocess.PIPE, text=True)
    try:
        with Server(str(out), "--no-rules") as server, Events(server.url) as events:
            events.next()  # hello
            server.wait_for(
                run_url("job"), lambda r: r["status"] == "running" and r["steps"] >= 5, timeout=60
            )
            stop = server.url + run_url("job") + "/stop"
            # refused without the header a page of another site cannot send, or from another origin
            status, body = post(stop)
            assert status == 403 and "X-Mldbg" in body["detail"]
            status, body = post(stop, {"X-Mldbg": "1", "Origin": "http://evil.example"})
            assert status == 403 and "Origin" in body["detail"]
            assert job.poll() is None  # still training
            origin = server.url.rstrip("/")
            status, body = post(stop, {"X-Mldbg": "1", "Origin": origin, "Content-Type": "application/json"},
                                json.dumps({"reason": "enough"}).encode())  # fmt: skip
            # the reason the training sees, as the StopTraining action words it
            assert status == 202 and body["run"] == "job" and body["requested"] is True
            assert body["reason"].startswith("dashboard at step ") and body["reason"].endswith(": enough")
            _, event, _ = events.wait_for(lambda n, d: n == "stop", seen=True)
            assert event["run"] == "job" and event["reason"] == body["reason"]
            assert job.wait(timeout=60) == 0
            assert "stopped at" in job.stdout.read()
            events.wait_for(lambda n, d: n == "status" and d["status"] == "stopped", seen=True)
            body = server.json(run_url("job"))
            assert body["status"] == "stopped" and body["stop_requested"].endswith(": enough")
            # the run ended: nothing more to stop
            status, body = post(stop, {"X-Mldbg": "1"})
            assert status == 409 and "already ended" in body["detail"]
            status, body = post(server.url + "api/runs/nope/stop", {"X-Mldbg": "1"})
            assert status == 404
    finally:
        if job.poll() is None:
            job.kill()
        job.wait()
        job.stdout.close()


def test_a_paused_training_turns_stalled_then_running_with_observed_times(tmp_path):
    from fastapi.testclient import TestClient

    from mldbg.dashboard.app import create_app

    training = LiveTraining(tmp_path / "slow", first=4, rest=6, eval_every=0)
    training.start()
    assert training.paused.wait(60)
    app = create_app([str(tmp_path / "slow")], rules=[], refresh_seconds=0.1, stall_seconds=0.6,
                     allowed_hosts=["testserver"])  # fmt: skip
    with TestClient(app) as client:

        def status() -> str:
            return client.get("/api/runs/slow").json()["status"]

        deadline = time.monotonic() + 10
        while status() != "stalled" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status() == "stalled"

        def status_events() -> list[str]:
            return [e[2]["status"] for e in app.state.dashboard.events.since(0) if e[1] == "status"]

        # the refresher tells the page (a `status` event) at its next pass: on a loaded machine
        # that may come after the API has said it; resume only once it has
        while "stalled" not in status_events() and time.monotonic() < deadline + 10:
            time.sleep(0.05)
        before = client.get("/api/runs/slow/scalars").json()
        assert before["time_source"] == "interpolated"  # recorded before the dashboard looked
        resumed = time.time()
        training.finish()
        deadline = time.monotonic() + 10
        while status() != "finished" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status() == "finished"
        after = client.get("/api/runs/slow/scalars").json()
        assert after["time_source"] == "observed+interpolated"
        loss = after["series"][0]
        new = [t for s, t in zip(loss["steps"], loss["wall_time"], strict=True) if s >= 4]
        assert new and all(resumed - 0.5 <= t <= time.time() for t in new)  # seen within a refresh
        events = [e[1] for e in app.state.dashboard.events.since(0)]
        assert "status" in events
        statuses = [e[2]["status"] for e in app.state.dashboard.events.since(0) if e[1] == "status"]
        assert statuses[-3:] == ["stalled", "running", "finished"] or statuses[-2:] == ["stalled", "finished"]
