"""Distributed training across processes: a `dist_sync` kvstore with its scheduler, one server
and two workers on 127.0.0.1 (the DMLC_* variables), each worker recorded by the hook into one
run (`include_workers="all"`, the rank from the kvstore). The weights read back are the same on
both workers at every step, the gradients are each worker's own, and the next step's weights
are the server's SGD update with their sum."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

import mldbg

WORKER = Path(__file__).with_name("dist_worker.py")
SERVER = (
    "import warnings; warnings.simplefilter('ignore'); import mxnet"  # a scheduler or server runs at import
)
LR, BATCH, STEPS = 0.1, 8, 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_dist_sync_kvstore_with_two_workers(tmp_path: Path) -> None:
    env = dict(
        os.environ,
        DMLC_PS_ROOT_URI="127.0.0.1",
        DMLC_PS_ROOT_PORT=str(free_port()),
        DMLC_NODE_HOST="127.0.0.1",
        DMLC_NUM_SERVER="1",
        DMLC_NUM_WORKER="2",
        OMP_NUM_THREADS="1",
    )
    run = tmp_path / "run"
    run.mkdir()
    nodes = [
        subprocess.Popen([sys.executable, "-c", SERVER], env=dict(env, DMLC_ROLE=r))
        for r in ("scheduler", "server")
    ]
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(run)],
            env=dict(env, DMLC_ROLE="worker"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for worker in workers:
            _, err = worker.communicate(timeout=120)
            assert worker.returncode == 0, err[-4000:]
        for node in nodes:
            assert node.wait(timeout=60) == 0
    finally:
        for p in [*workers, *nodes]:
            if p.poll() is None:
                p.kill()
                p.wait()
    trial = mldbg.create_trial(run)
    assert trial.workers() == ["worker_0", "worker_1"]
    assert trial.steps() == list(range(STEPS))
    weight, grad = trial.tensor("0.weight"), trial.tensor("gradient/0.weight")
    for step in range(STEPS):
        w0, w1 = (weight.value(step, worker=w) for w in trial.workers())
        g0, g1 = (grad.value(step, worker=w) for w in trial.workers())
        np.testing.assert_array_equal(w0, w1)  # synchronous: one model
        assert not np.allclose(g0, g1)  # each worker's own batch
        after = (
            weight.value(step + 1, worker="worker_0")
            if step + 1 < STEPS
            else np.load(tmp_path / "final_0.npy")
        )
        np.testing.assert_allclose(after, w0 - LR * (g0 + g1) / BATCH, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.load(tmp_path / "final_0.npy"), np.load(tmp_path / "final_1.npy"))
