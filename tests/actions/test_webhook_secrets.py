"""Credentials in a webhook URL (issue 28, item 5): `--webhook http://user:secret@host/hook`
printed the password in the retry warnings and wrote it into the run folder
(`watch/<id>.json`), and the delivery never worked (urllib took the userinfo for the host).
Now the password appears in no output and no run file, and the basic auth is sent as a header.
A real recorded run, `mldbg watch` as a subprocess, a real HTTP server that fails once."""

from __future__ import annotations

import base64
import subprocess
import sys

import numpy as np
from http_sink import Sink

import mldbg
from mldbg.record.recorder import Recorder

SECRET = "s3cr3t-Pa55"


def test_a_password_in_a_webhook_url_is_sent_as_a_header_and_never_printed_or_stored(tmp_path):
    run = tmp_path / "run"
    rec = Recorder(run, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"])
    for _ in range(4):
        rec.start_step(mldbg.Mode.TRAIN)
        rec.save_tensor("loss", np.float32(1.0), ("losses",))
        rec.save_tensor("layer.weight", np.zeros((2, 2), np.float32), ("weights",))
        rec.end_step()
    rec.close()
    outputs = []
    for fail_first in (1, 0):  # a failure first: the retry warning is printed
        with Sink(fail_first=fail_first) as sink:
            url = sink.url.replace("http://", f"http://alice:{SECRET}@")
            done = subprocess.run(
                [sys.executable, "-m", "mldbg.cli.main", "watch", str(run), "--rule", "all_zero:patience=1",
                 "--webhook", url, "--every-finding", "--poll", "0.05"],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
        outputs.append(done.stdout + done.stderr)
    assert "retrying" in outputs[0]
    for output in outputs:
        assert SECRET not in output, output
    for path in run.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert sink.bodies, outputs[1]  # delivered, with the basic auth as a header
    expected = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
    assert all(h.get("Authorization") == expected for h in sink.headers)
