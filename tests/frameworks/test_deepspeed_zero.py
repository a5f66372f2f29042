"""DeepSpeed ZeRO stages 1-3 on 2 CPU processes (DeepSpeed's CPU accelerator, gloo;
`deepspeed_job.py`) with the two lines: what the PyTorch hook records there today, as
docs/frameworks.md ('Sharded training', DeepSpeed) says. Skipped where deepspeed is not
importable (it is not in the test install: docs/frameworks.md says why).

Weights: ZeRO-1 and 2 keep every parameter whole on every rank, so the weights' statistics are
the global fp32 weights' (within 1e-6, at every step); under ZeRO-3 a parameter is a
placeholder outside DeepSpeed's gather (empty, shape (0,)), read so at the first step and
whole from then on. Gradients: recorded, but each rank's own (before DeepSpeed averages them
across the ranks), so they are not compared."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_multi_worker import free_port

import mldbg

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="deepspeed not installed"
)
JOB = Path(__file__).with_name("deepspeed_job.py")


def run(out: Path, stage: int) -> Path:
    port, refs = str(free_port()), out.with_suffix(".json")
    workers = [
        subprocess.Popen(
            [sys.executable, str(JOB), str(out), str(stage), str(refs)],
            env=dict(
                os.environ,
                RANK=str(r),
                LOCAL_RANK=str(r),
                WORLD_SIZE="2",
                LOCAL_WORLD_SIZE="2",
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port,
            ),  # fmt: skip
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for r in range(2)
    ]
    for p in workers:
        output, _ = p.communicate(timeout=600)  # the first run compiles DeepSpeed's CPU comm op
        assert p.returncode == 0, output[-3000:]
        assert "DeepSpeed is not supported yet" in output or p is workers[1], output[-3000:]
    return refs


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_zero_weights_statistics_are_the_global_weights(tmp_path: Path, stage: int) -> None:
    refs = json.loads(run(tmp_path / "run", stage).read_text())
    trial = mldbg.create_trial(tmp_path / "run")
    assert trial.steps() == list(range(6))
    compared = 0
    for step, tensors in refs.items():
        for name, stats in tensors.items():
            got = trial.record(name, int(step), worker="worker_0")
            if name.startswith("gradient/"):
                assert got.statistics["l2"] > 0  # recorded: the rank's own gradient
                continue
            if stage == 3 and got.shape == (0,):
                assert int(step) == 0, (step, name)  # ZeRO-3's placeholder, before its first gather
                continue
            for key, want in stats.items():
                value = got.statistics[key]
                assert value == pytest.approx(want, rel=1e-6) or math.isnan(want) and math.isnan(value)
                compared += 1
    assert compared >= (5 if stage == 3 else 6) * 6 * 4
