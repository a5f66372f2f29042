"""`mldbg dashboard`'s options and bad input: rule choices, a busy port, a damaged file."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys

import pytest

import mldbg
from tests.dashboard.helpers import LiveTraining, Server, run_url
from tests.waiting import wait_until


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", *args], capture_output=True, text=True, timeout=60
    )


def test_listed_in_help():
    out = cli("--help")
    assert out.returncode == 0 and "dashboard" in out.stdout
    out = cli("dashboard", "--help")
    for option in ("--host", "--port", "--rule", "--no-rules", "--open / --no-open"):
        assert option in out.stdout


def test_rule_choice_and_no_rules(recorded):
    with Server(str(recorded["explode"]), "--rule", "exploding_tensor:only_nan=True") as server:
        body = server.wait_for(run_url("explode") + "/findings", lambda b: b["done"])
        assert body["rules"] == ["exploding_tensor"]
        assert {f["rule"] for f in body["findings"]} == {"exploding_tensor"}
    with Server(str(recorded["explode"]), "--no-rules") as server:
        assert server.json("api/runs")["rules"]["enabled"] is False
        server.wait_for(run_url("explode"), lambda r: r["status"] == "finished")
        body = server.json(run_url("explode") + "/findings")
        assert body["enabled"] is False and body["findings"] == [] and body["rules"] == []


def test_bad_options_exit_2_with_a_message(recorded):
    out = cli("dashboard", str(recorded["healthy"]), "--rule", "no_such_rule", "--port", "0")
    assert out.returncode == 2 and "unknown rule 'no_such_rule'" in out.stderr
    out = cli("dashboard", str(recorded["healthy"]), "--rule", "dead_relu", "--no-rules")
    assert out.returncode == 2 and "--no-rules" in out.stderr
    out = cli("dashboard")
    assert out.returncode == 2 and "PATH" in out.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = cli("dashboard", str(recorded["healthy"]), "--port", str(port))
    assert (
        out.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in out.stderr and "--port" in out.stderr
    )


def damaged_copy(tmp_path, source):
    """A copy of the run at `source`, and its index and data files."""
    run = tmp_path / "damaged"
    shutil.copytree(source, run)
    files = run / "workers" / "worker_0"
    return run, sorted((files / "index").iterdir()), sorted((files / "data").iterdir())


@pytest.fixture(scope="module")
def two_segments(tmp_path_factory):
    """A real run written in several segments (it paused once, flushed, then went on)."""
    path = tmp_path_factory.mktemp("segments") / "run"
    training = LiveTraining(path, first=10, rest=10)
    training.start()
    assert training.paused.wait(60)
    wait_until(lambda: list(path.glob("workers/worker_0/index/*")), 30, "the first segment's index")
    training.finish()
    assert len(list((path / "workers" / "worker_0" / "index").iterdir())) >= 2
    return path


def test_a_damaged_index_file_is_reported_not_fatal(two_segments, tmp_path):
    run, index, _ = damaged_copy(tmp_path, two_segments)
    index[0].write_bytes(b"not a safetensors index")
    total = len(mldbg.create_trial(two_segments).steps())
    with Server(str(run), log=tmp_path / "server.log") as server:
        body = server.wait_for(run_url("damaged"), lambda r: r["status"] == "finished")
        assert len(body["corrupt"]) == 1 and index[0].name in body["corrupt"][0]
        assert 0 < body["steps"] < total  # the other segments are served
        series = server.json(run_url("damaged") + "/scalars")["series"][0]
        assert len(series["steps"]) == body["steps"]
        findings = server.wait_for(run_url("damaged") + "/findings", lambda b: b["done"])
        assert findings["errors"] == {}


def test_a_truncated_data_file_is_reported_not_fatal(two_segments, tmp_path):
    run, _, data = damaged_copy(tmp_path, two_segments)
    data[-1].write_bytes(data[-1].read_bytes()[:100])
    trial = mldbg.create_trial(two_segments)
    with Server(str(run), "--no-rules") as server:
        body = server.wait_for(run_url("damaged"), lambda r: r["status"] == "finished")
        assert body["steps"] == len(trial.steps())  # every index is fine
        series = server.json(run_url("damaged") + "/scalars")["series"][0]
        assert 0 < len(series["steps"]) < len(trial.steps())  # the steps of the damaged file are left out
        loss = trial.tensor("CrossEntropyLoss_output_0")
        assert series["values"] == [float(loss.value(s)) for s in series["steps"]]
        body = server.json(run_url("damaged"))
        assert any(data[-1].name in c and "truncated" in c for c in body["corrupt"]), body["corrupt"]
