"""Two writers starting on one S3 run at once (issue 28, item 2, the bucket's part): the claim
is a conditional put (`If-None-Match: *`, which SeaweedFS honours), so exactly one is accepted.
A real SeaweedFS on 127.0.0.1, two real processes released at the same instant."""

from __future__ import annotations

import subprocess
import sys

from tests.record.test_two_writers import REFUSALS, start_together

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.store import open_store


def test_two_writers_starting_together_on_s3_one_is_refused(s3_url):
    results = start_together(s3_url, timeout=180)
    assert sorted(rc for rc, _, _ in results) == [0, 3], results
    refused = next(out for rc, out, _ in results if rc == 3)
    assert any(why in refused for why in REFUSALS), refused
    trial = mldbg.create_trial(s3_url)
    values = {float(trial.tensor("x").value(s)[0]) for s in trial.steps()}
    assert len(values) == 1 and trial.steps() == list(range(20)), (values, trial.steps())
    assert not [k for k in open_store(s3_url).list("") if "lock" in k]  # the claim is gone, and never listed


def test_a_claim_left_by_a_dead_writer_is_taken_over(s3_url):
    code = "import os, sys; from mldbg.record.recorder import Recorder; Recorder(sys.argv[1]); os._exit(0)"
    subprocess.run([sys.executable, "-c", code, s3_url], check=True, timeout=120)  # killed: no close
    rec = Recorder(s3_url, save_config=mldbg.SaveConfig(save_interval=1), overwrite=True)
    rec.close()
