"""Runs that appear under a served S3 prefix after the start show up in the dashboard, found
with the store's listing API on a real S3 server (SeaweedFS on loopback)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from mldbg.dashboard.app import create_app
from tests.store.s3server import s3_prefix
from tests.tiny import train


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with s3_prefix(tmp_path_factory, "dashboard-sweep") as url:
        yield url


def test_runs_appearing_under_an_s3_prefix_are_found(s3):
    train(f"{s3}/first", steps=4, eval_every=None, include_collections=("losses",))
    app = create_app([f"{s3}/"], rules=[], refresh_seconds=0.2, allowed_hosts=["testserver"])
    with TestClient(app) as client:
        body = client.get("/api/runs").json()
        assert body["sources"] == [f"{s3}/"] and [r["name"] for r in body["runs"]] == ["first"]
        seq = app.state.dashboard.events.seq
        train(f"{s3}/second", steps=6, eval_every=None, include_collections=("losses",))
        landed = time.monotonic()
        deadline = landed + 60  # a loaded machine: the loop ends as soon as the run is read
        while time.monotonic() < deadline:
            runs = {r["name"]: r for r in client.get("/api/runs").json()["runs"]}
            if runs.get("second", {}).get("status") == "finished":
                break
            time.sleep(0.05)
        assert list(runs) == ["first", "second"], runs
        assert runs["second"]["path"] == f"{s3}/second" and runs["second"]["steps"] == 6
        # one listing per refresh (0.2 s), then the run's own read: about a second on an idle
        # machine; the bound tells "found at the next refreshes" from "listed rarely or never"
        # with room for a loaded one (under three other jobs on 2 cores it took over 20 s)
        assert time.monotonic() - landed < 30
        events = app.state.dashboard.events.since(seq)
        assert [d["name"] for n, d in ((e[1], e[2]) for e in events) if n == "run"] == ["second"]
        loss = client.get("/api/runs/second/scalars").json()["series"][0]
        assert len(loss["steps"]) == 6
