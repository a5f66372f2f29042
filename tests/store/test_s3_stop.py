"""A stop through a forged remote meta.json (issue 28, item 4): a `meta.json` put in a bucket
naming this host, a local pid and that process's identity (world-readable in /proc) got the
process signalled before the fix: on S3 the open-file proof answered "unknown" and that was
taken as proven. A process named only by a remote file is never signalled; the stop request is
still written."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest

from mldbg.actions import Context, StopTraining
from mldbg.rules.base import Finding
from mldbg.store import layout, open_store, process


def test_a_forged_remote_meta_does_not_get_a_local_process_signalled(s3_url, caplog):
    victim = subprocess.Popen(["sleep", "60"])
    try:
        identity = process.identity(victim.pid)
        assert identity
        store = open_store(s3_url)
        meta = {
            "worker": "worker_0", "rank": 0, "world_size": 1, "expected_workers": 1,
            "framework": "", "host": socket.gethostname(), "pid": victim.pid,
            "started": 1.0, "process": identity, "format": 3,
        }  # fmt: skip
        store.write(layout.meta_key("worker_0"), [json.dumps(meta).encode()])
        finding = Finding(rule="exploding_tensor", step=3, mode="TRAIN", message="NaN", tensors=["x"])
        with caplog.at_level("WARNING", logger="mldbg"):
            StopTraining(signal="SIGTERM")([finding], Context(run=s3_url, store=store))
        with pytest.raises(subprocess.TimeoutExpired):
            victim.wait(timeout=1.0)
        assert store.exists(layout.STOP_REQUEST)
        assert "remote store" in caplog.text
    finally:
        victim.kill()
        victim.wait()
