"""The bucket goes away in the middle of a training run and comes back: every step is there
afterwards, in order and equal to the same run recorded locally, and no training step waited
longer than the configured bound (`block_seconds`).

Short outages, and the 30 s outage of the issue (marked slow: `-m "not slow"` leaves it out).
"""

from __future__ import annotations

import threading
import time
import uuid

import numpy as np
import pytest
import torch

import mldbg
from mldbg.store import layout, open_store
from mldbg.store.format import decode_index
from mldbg.torch import Hook

try:
    from .s3server import BUCKET, point_env_at
except ImportError:
    from s3server import BUCKET, point_env_at

BOUND = 1.0  # block_seconds: the longest a store call may hold the training thread


def run_through_outage(server, url: str, outage: float, freeze: bool, pause: float = 0.02):
    """Train until `outage` seconds of server downtime are over, plus 20 steps; return the
    hook, the number of steps and the slowest step (without the pause)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = Hook(url, save_config=mldbg.SaveConfig(save_interval=1), flush_seconds=0.2)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 4, generator=g), torch.randint(0, 3, (16,), generator=g)

    started, back = threading.Event(), threading.Event()

    def outage_now() -> None:
        started.wait()
        if freeze:
            server.freeze()
        else:
            server.stop()
        time.sleep(outage)
        if freeze:
            server.thaw()
        else:
            server.start()
        back.set()

    controller = threading.Thread(target=outage_now)
    controller.start()
    slowest, step, steps_after = 0.0, 0, None
    try:
        while steps_after is None or step < steps_after:
            t0 = time.perf_counter()
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()  # the step ends here: records handed over, stop request polled
            slowest = max(slowest, time.perf_counter() - t0)
            step += 1
            if step == 10:
                started.set()
            if steps_after is None and back.is_set():
                steps_after = step + 20
            time.sleep(pause)
    finally:
        started.set()
        controller.join()
    t0 = time.perf_counter()
    hook.close()  # uploads what was spilled
    return hook, step, slowest, time.perf_counter() - t0


def local_twin(path, steps: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Hook(path, save_config=mldbg.SaveConfig(save_interval=1)) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(16, 4, generator=g), torch.randint(0, 3, (16,), generator=g)
        for _ in range(steps):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()


def check_outage(server, monkeypatch, tmp_path, outage: float, freeze: bool) -> None:
    point_env_at(server, monkeypatch, str(tmp_path / "spill"))
    monkeypatch.setenv("MLDBG_S3_BLOCK_SECONDS", str(BOUND))
    url = f"s3://{BUCKET}/outage-{uuid.uuid4().hex[:8]}"
    hook, steps, slowest, _closing = run_through_outage(server, url, outage, freeze)
    store = hook.recorder.store
    writer = hook.recorder.writer

    # the outage really hit the writes, and training never waited on it
    assert store.spilled > 0, "no write happened during the outage"
    # the store holds a step at most BOUND; the rest is the step's own work, slow on a loaded
    # machine (1.53 s was seen once): a step that waited on the outage takes its length, >= 3 s
    assert slowest < min(outage, BOUND + 1.5), f"a training step took {slowest:.2f}s during the outage"
    assert writer.blocked_seconds == 0 and writer.dropped == 0
    assert store.pending == 0 and store.spill_dir is None, "everything spilled was uploaded at close"
    # (how long close() waited depends on how soon the restarted server accepts writes again)

    # every step is there, in order
    trial = mldbg.create_trial(url)
    assert trial.loaded_all_steps
    assert trial.steps() == list(range(steps))
    assert trial.tensor("CrossEntropyLoss_output_0").steps() == list(range(steps))
    reader = open_store(url)
    segments = [
        decode_index(reader.read(k), k).columns["step"] for k in reader.list(layout.index_prefix("worker_0"))
    ]
    assert len(segments) == writer.written_segments
    for before, after in zip(segments, segments[1:], strict=False):
        assert before.max() <= after.min(), "segments reached the bucket out of order"

    # and equal to the same run recorded locally
    local_twin(tmp_path / "local", steps)
    local = mldbg.create_trial(tmp_path / "local")
    assert local.tensor_names() == trial.tensor_names()
    for name in trial.tensor_names():
        a, b = trial.tensor(name), local.tensor(name)
        for step in range(0, steps, 7):
            np.testing.assert_array_equal(a.value(step), b.value(step), err_msg=f"{name} at {step}")


def test_the_server_stops_and_restarts_during_training(own_s3_server, monkeypatch, tmp_path):
    check_outage(own_s3_server, monkeypatch, tmp_path, outage=3.0, freeze=False)


def test_the_server_hangs_during_training(own_s3_server, monkeypatch, tmp_path):
    """SIGSTOP: connections open but nothing answers, so every request runs into its timeout."""
    check_outage(own_s3_server, monkeypatch, tmp_path, outage=3.0, freeze=True)


@pytest.mark.slow
def test_a_30s_outage_during_training(own_s3_server, monkeypatch, tmp_path):
    check_outage(own_s3_server, monkeypatch, tmp_path, outage=30.0, freeze=False)
