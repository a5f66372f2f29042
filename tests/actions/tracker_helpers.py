"""Shared by the tracker tests: a real run where a rule fires, and `mldbg watch` on it."""

import json
import os
import subprocess
import sys

import numpy as np

import mldbg
from mldbg.record.recorder import Recorder

LOSSES = [1.0, 0.9, 0.8, float("nan"), 0.6, 0.5]  # exploding_tensor fires at step 3


def nan_run(out):
    """Six TRAIN steps of a real Recorder: a scalar `loss` (NaN at step 3) and a weight."""
    rec = Recorder(out, save_config=mldbg.SaveConfig(save_interval=1))
    for loss in LOSSES:
        rec.start_step(mldbg.Mode.TRAIN)
        rec.save_tensor("loss", np.float32(loss), ("losses",))
        rec.save_tensor("fc.weight", np.full((2, 2), loss, dtype=np.float32), ("weights",))
        rec.end_step()
    rec.close()
    return out


def watch(run, actions, tmp_path, env=None, rules=("exploding_tensor",)):
    """`mldbg watch RUN --config` with `actions`, as its own process; returns the result."""
    config = tmp_path / "watch.json"
    config.write_text(json.dumps({"rules": list(rules), "actions": actions}))
    return subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "watch", str(run), "--config", str(config), "-q"],
        capture_output=True, text=True, timeout=180, env={**os.environ, **(env or {})},
    )  # fmt: skip
