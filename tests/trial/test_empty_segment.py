"""An index segment with zero rows, as the project's own encoder writes it for an empty list
(issue 28, item 7), reads as zero rows: before the fix `create_trial` raised `ValueError`
(with `on_corrupt="skip"` too) and `mldbg check` printed a traceback."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.store import layout
from mldbg.store.format import encode_index


@pytest.fixture
def run(tmp_path):
    run = tmp_path / "run"
    rec = Recorder(run, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"])
    for step in range(4):
        rec.start_step()
        rec.save_tensor("loss", np.float32(1.0 / (step + 1)), ("losses",))
        rec.save_tensor("x", np.full(3, float(step), np.float32), ("weights",))
        rec.end_step()
        if step in (0, 2):
            rec.flush()
    rec.close()
    return run


@pytest.mark.parametrize("seq", [1, 2])
def test_an_empty_index_segment_reads_as_zero_rows(run, seq):
    steps = {s: float(mldbg.create_trial(str(run)).tensor("x").value(s)[0]) for s in range(4)}
    empty = b"".join(bytes(p) for p in encode_index([], [], "worker_0", layout.data_key("worker_0", seq)))
    (run / layout.index_key("worker_0", seq)).write_bytes(empty)  # its records gone: zero rows
    for on_corrupt in ("raise", "skip"):
        trial = mldbg.create_trial(str(run), on_corrupt=on_corrupt)
        assert trial.loaded_all_steps
        assert trial.steps() and set(trial.steps()) < set(steps)
        for s in trial.steps():
            assert float(trial.tensor("x").value(s)[0]) == steps[s]
    done = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "check", str(run)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr and done.returncode in (0, 1), done.stderr
