"""A run written from another machine (a shared disk, a bucket) cannot be proven alive by its
pid: the claim check takes it for alive when it has not ended and new index segments appear
while it watches (issue 16). A real second process records the folder; the check runs here as
a process on another host sees it (`here=`: this host's name as that host would not know it)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from mldbg.errors import InvalidConfig
from mldbg.store import LocalStore, layout
from mldbg.store.claim import growing, live_writer, refuse_live

JOB = """
import sys, time
import numpy as np
import mldbg
from mldbg.record.recorder import Recorder

rec = Recorder(sys.argv[1], save_config=mldbg.SaveConfig(save_interval=1), flush_seconds=0.05)
print("recording", flush=True)
for step in range(100_000):
    rec.start_step(mldbg.Mode.TRAIN)
    rec.save_scalar("loss", 1.0 / (step + 1))
    rec.end_step()
    time.sleep(0.01)
    if sys.argv[2] == "stop" and step == 30:
        break
rec.close()
print("closed", flush=True)
"""


def start(tmp_path, mode: str = "run") -> subprocess.Popen[str]:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(JOB))
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "run"), mode],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "recording"
    return proc


def test_a_live_writer_on_another_host_is_refused_and_a_dead_one_is_not(tmp_path):
    writer = start(tmp_path)
    store = LocalStore(tmp_path / "run")
    try:
        t0 = time.monotonic()
        while not [k for k in store.list(layout.index_prefix("worker_0")) if layout.parse_segment_key(k)]:
            assert time.monotonic() - t0 < 60, "the writer wrote no segment"
            time.sleep(0.05)
        # on this host the pid proves it, at once
        assert live_writer(store, "worker_0") is not None
        # seen from another host: no pid to prove, the new segments do
        t0 = time.monotonic()
        with pytest.raises(InvalidConfig) as e:
            refuse_live(store, ["worker_0"], "overwrite=True or resume=True", here="another-host", window=1.0)
        assert time.monotonic() - t0 < 1.0  # refused as soon as a new segment appeared
        line = str(e.value)
        assert "\n" not in line and str(tmp_path / "run") in line
        assert f"pid {writer.pid} on {socket.gethostname()}, worker_0" in line
        assert "writing new segments within the last 1s" in line and "not even with overwrite=True" in line
        assert f"kill {writer.pid} on " in line and "record into a new directory" in line
    finally:
        writer.send_signal(signal.SIGKILL)  # a crash: no END, and no segment comes any more
        writer.communicate(timeout=60)
    t0 = time.monotonic()
    assert live_writer(store, "worker_0", here="another-host", window=0.5) is None
    assert 0.5 <= time.monotonic() - t0 < 5  # watched for the window, then taken for dead
    assert not store.exists(layout.end_key("worker_0"))
    refuse_live(store, ["worker_0"], "overwrite=True", here="another-host", window=0.3)


def test_an_ended_run_from_another_host_is_not_watched(tmp_path):
    writer = start(tmp_path, "stop")
    assert writer.communicate(timeout=120)[0].strip() == "closed"
    store = LocalStore(tmp_path / "run")
    t0 = time.monotonic()
    assert live_writer(store, "worker_0", here="another-host", window=5.0) is None  # END: at once
    assert time.monotonic() - t0 < 1.0
    assert not growing(store, "worker_0", 0.2)
