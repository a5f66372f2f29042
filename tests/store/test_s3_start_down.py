"""A hook created while the bucket is unreachable: training starts anyway, one warning names the
bucket and the spill folder, what is recorded waits on local disk, and once the server is back
every step is in the bucket, equal to the same run recorded locally. A run that already holds
segments keeps them: the ones recorded while the bucket was away are numbered after them."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import uuid

import numpy as np
import torch
from tests.waiting import wait_until

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.store import layout, open_store
from mldbg.store.format import decode_index
from mldbg.torch import Hook

try:
    from .s3server import BUCKET, point_env_at
    from .test_s3_torch import assert_same_run, train
except ImportError:
    from s3server import BUCKET, point_env_at
    from test_s3_torch import assert_same_run, train

BOUND = 0.5  # block_seconds
# block_seconds where a test times the training steps: a step that waited on the bucket takes at
# least this long, and it is far above a tiny step's own time on a loaded 2-core machine (the
# first step, statistics included, has taken 0.5 s there)
STEP_BOUND = 2.0


def test_a_hook_starts_while_the_bucket_is_down(own_s3_server, monkeypatch, tmp_path, caplog):
    point_env_at(own_s3_server, monkeypatch, str(tmp_path / "spill"))
    monkeypatch.setenv("MLDBG_S3_BLOCK_SECONDS", str(STEP_BOUND))
    url = f"s3://{BUCKET}/down-at-start-{uuid.uuid4().hex[:8]}"
    steps = 12
    own_s3_server.stop()

    # the same model, data and seeds as test_s3_torch.train, which records the local twin
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with caplog.at_level(logging.WARNING, logger="mldbg"):
        t0 = time.monotonic()
        hook = Hook(
            url, save_config=mldbg.SaveConfig(save_interval=1), flush_seconds=0.05, spill_max_bytes=1 << 30
        )
        started = time.monotonic() - t0
        hook.register_module(model)
        hook.register_loss(loss_fn)
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(16, 4, generator=g), torch.randint(0, 3, (16,), generator=g)
        store, writer = hook.recorder.store, hook.recorder.writer
        slowest = 0.0
        for _ in range(steps):
            segments = writer.written_segments
            t0 = time.perf_counter()
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            slowest = max(slowest, time.perf_counter() - t0)
            # a segment a step: the writer flushes every 0.05 s
            wait_until(lambda n=segments: writer.written_segments > n, 10, "the step's segment")
        hook.recorder.flush()

    assert started < STEP_BOUND + 1.5, f"creating the hook took {started:.2f}s"
    assert slowest < STEP_BOUND, f"a training step took {slowest:.2f}s: it waited on the bucket"
    assert store.options.spill_max_bytes == 1 << 30  # the hook's option reached the store
    # one clear warning, naming the bucket and where the records wait
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert url in warnings[0] and str(store.spill_dir) in warnings[0] and "unreachable" in warnings[0]
    # everything waits on local disk: meta.json, the END delete, every segment
    assert writer.written_segments >= 3 and writer.blocked_seconds == 0
    assert store.pending == 2 + 2 * writer.written_segments
    assert len(list(store.spill_dir.glob("*.obj"))) == 1 + 2 * writer.written_segments

    own_s3_server.start()
    hook.close()  # uploads, in order
    assert store.pending == 0 and store.spill_dir is None
    assert list((tmp_path / "spill").iterdir()) == []

    trial = mldbg.create_trial(url)
    assert trial.steps() == list(range(steps))
    meta = json.loads(open_store(url).read(layout.meta_key("worker_0")))
    assert meta["framework"].startswith("torch")
    keys = open_store(url).list(layout.index_prefix("worker_0"))
    assert keys == [layout.index_key("worker_0", i) for i in range(1, writer.written_segments + 1)]
    train(tmp_path / "local", steps)
    assert_same_run(trial, mldbg.create_trial(tmp_path / "local"))


def record(url: str, steps: int, offset: float) -> Recorder:
    """`steps` steps of a tensor x = offset + step, one segment per step; left open. A job
    after the first resumes the run (the first: nothing to resume)."""
    rec = Recorder(
        url, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"], resume=True
    )
    for step in range(steps):
        rec.start_step()
        rec.save("x", np.full(4, offset + step, dtype=np.float32), rec.plan("x", ()))
        rec.end_step()
        rec.flush()
    return rec


def test_a_run_resumed_while_the_bucket_is_down_keeps_what_it_held(own_s3_server, monkeypatch, tmp_path):
    point_env_at(own_s3_server, monkeypatch, str(tmp_path / "spill"))
    monkeypatch.setenv("MLDBG_S3_BLOCK_SECONDS", str(BOUND))
    url = f"s3://{BUCKET}/resumed-{uuid.uuid4().hex[:8]}"
    reader = open_store(url)
    record(url, 3, 0.0).close()  # the first job: segments 1-3
    idx = layout.index_prefix("worker_0")
    before = {k: reader.read(k) for k in reader.list(idx)}
    assert len(before) == 3
    # a stop request left by that job: the next one must remove it, not obey it
    stale = {"reason": "an earlier run", "requested": time.time() - 60}
    reader.write(layout.STOP_REQUEST, [json.dumps(stale).encode()])

    own_s3_server.stop()
    rec = record(url, 4, 100.0)  # the job is resumed while the bucket is away: numbered 1-4 for now
    assert rec.store.pending == 2 + 2 * 4
    own_s3_server.start()
    deadline = time.monotonic() + 30  # training goes on; the stale stop request is seen and removed
    while reader.exists(layout.STOP_REQUEST):
        assert time.monotonic() < deadline, "the stale stop request was not removed"
        rec.start_step()
        rec.end_step()
        time.sleep(0.1)
    assert not rec.stopped
    rec.close()

    keys = reader.list(idx)
    assert keys == [layout.index_key("worker_0", i) for i in range(1, 8)]
    assert {k: reader.read(k) for k in keys[:3]} == before, "the first job's segments were overwritten"
    for seq, key in enumerate(keys, start=1):
        seg = decode_index(reader.read(key), key)
        assert seg.data_key == layout.data_key("worker_0", seq)
        (offset,), (nbytes,), (step,) = seg.columns["offset"], seg.columns["nbytes"], seg.columns["step"]
        value = np.frombuffer(reader.read(seg.data_key, int(offset), int(nbytes)), dtype=np.float32)
        expected = step if seq <= 3 else 100 + step
        np.testing.assert_array_equal(value, np.full(4, expected, dtype=np.float32))
    assert json.loads(reader.read(layout.end_key("worker_0")))["last_step"] >= 3
    assert not reader.exists(layout.STOP_REQUEST)


START_DOWN_AND_DIE = """
import os, sys
import numpy as np
import mldbg
from mldbg.record.recorder import Recorder
rec = Recorder(sys.argv[1], save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"], resume=True)
for step in range(3):
    rec.start_step()
    rec.save("x", np.full(4, 50 + step, dtype=np.float32), rec.plan("x", ()))
    rec.end_step()
    rec.flush()
assert rec.store.pending == 2 + 2 * 3, rec.store.pending
os._exit(0)  # a crash: nothing uploaded, nothing numbered yet
"""


def test_a_job_that_started_and_died_while_the_bucket_was_down_loses_nothing(
    own_s3_server, monkeypatch, tmp_path
):
    """The spill of a crashed job, numbered provisionally, is adopted by the next job on the same
    run: the earlier job's segments, the crashed one's, the next one's, in that order."""
    point_env_at(own_s3_server, monkeypatch, str(tmp_path / "spill"))
    monkeypatch.setenv("MLDBG_S3_BLOCK_SECONDS", str(BOUND))
    url = f"s3://{BUCKET}/died-{uuid.uuid4().hex[:8]}"
    record(url, 2, 0.0).close()
    own_s3_server.stop()
    subprocess.run([sys.executable, "-c", START_DOWN_AND_DIE, url], check=True, timeout=60, env=os.environ)
    own_s3_server.start()
    record(url, 2, 100.0).close()

    reader = open_store(url)
    keys = reader.list(layout.index_prefix("worker_0"))
    assert keys == [layout.index_key("worker_0", i) for i in range(1, 8)]
    values = []
    for key in keys:
        seg = decode_index(reader.read(key), key)
        assert seg.data_key == key.replace("/index/", "/data/")
        (offset,), (nbytes,) = seg.columns["offset"], seg.columns["nbytes"]
        values.append(np.frombuffer(reader.read(seg.data_key, int(offset), int(nbytes)), np.float32)[0])
    assert values == [0, 1, 50, 51, 52, 100, 101]
    assert list((tmp_path / "spill").iterdir()) == []


def test_upload_from_renumbers_the_local_copy_too(own_s3_server, monkeypatch, tmp_path):
    point_env_at(own_s3_server, monkeypatch, str(tmp_path / "spill"))
    monkeypatch.setenv("MLDBG_S3_BLOCK_SECONDS", str(BOUND))
    url = f"s3://{BUCKET}/mirror-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("MLDBG_S3_UPLOAD_FROM", str(tmp_path / "mirror"))
    record(url, 1, 0.0).close()  # segment 1, in the bucket and in the local copy
    monkeypatch.delenv("MLDBG_S3_UPLOAD_FROM")
    record(url, 1, 10.0).close()  # segment 2, in the bucket only
    own_s3_server.stop()
    monkeypatch.setenv("MLDBG_S3_UPLOAD_FROM", str(tmp_path / "mirror"))
    rec = record(url, 2, 100.0)  # written locally as 2-3 for now (after the local copy's 1)
    own_s3_server.start()
    rec.close()
    monkeypatch.delenv("MLDBG_S3_UPLOAD_FROM")

    reader = open_store(url)
    keys = reader.list(layout.index_prefix("worker_0"))
    assert keys == [layout.index_key("worker_0", i) for i in (1, 2, 3, 4)]
    local = open_store(tmp_path / "mirror" / url[len("s3://") :])
    assert local.list(layout.index_prefix("worker_0")) == [keys[0], keys[2], keys[3]]
    for store in (reader, local):  # the local copy stays a valid run, with the same segments
        for seq, expected in ((1, 0.0), (3, 100.0), (4, 101.0)):
            seg = decode_index(store.read(keys[seq - 1]), keys[seq - 1])
            assert seg.data_key == layout.data_key("worker_0", seq)
            (offset,), (nbytes,) = seg.columns["offset"], seg.columns["nbytes"]
            value = np.frombuffer(store.read(seg.data_key, int(offset), int(nbytes)), np.float32)
            assert value[0] == expected, (store, seq)
