"""DeepSpeed ZeRO stages 1-3 on 2 CPU processes (DeepSpeed's CPU accelerator, gloo;
`deepspeed_job.py`) with the two lines: the statistics recorded are the global tensors', as
docs/frameworks.md ('Sharded training', DeepSpeed) says. Skipped where deepspeed is not
importable (it is not in the test install: docs/frameworks.md says why).

Gradients (every stage): recorded at ZeRO's optimizer step from each rank's partition of the
averaged fp32 gradient (`torch_deepspeed`), merged across the ranks: every statistic equals the
global gradient's (`safe_get_full_grad`, within 1e-6), whose l2 is the one-process gradient's on
the full batch. Weights: ZeRO-1/2 keep them whole on every rank; ZeRO-3's (every parameter
partitioned, a padded last partition) come from each rank's `ds_tensor`: every statistic equals the
global fp32 weight's (`safe_get_full_fp32_param`) at every step, the first included, but
`row_range`, which a run of the flattened weight cannot give (left out). `mldbg check` is quiet."""

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
from test_torch_fsdp import check

import mldbg
from mldbg.store import statistics as st

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="deepspeed not installed"
)
JOB = Path(__file__).with_name("deepspeed_job.py")


def run(out: Path, stage: int, defect: str = "") -> tuple[Path, list[str]]:
    port, refs = str(free_port()), out.with_suffix(".json")
    workers = [
        subprocess.Popen(
            [sys.executable, str(JOB), str(out), str(stage), str(refs), *([defect] if defect else [])],
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
    outputs = []
    for p in workers:
        output, _ = p.communicate(timeout=900)  # the first run compiles DeepSpeed's CPU comm op
        assert p.returncode == 0, output[-3000:]
        assert "DeepSpeed without a ZeRO optimizer" not in output, output[-3000:]
        outputs.append(output)
    return refs, outputs


def same(value: float, want: float) -> bool:
    return value == pytest.approx(want, rel=1e-6, abs=1e-12) or math.isnan(want) and math.isnan(value)


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_zero_statistics_are_the_global_reduced_gradients_and_weights(tmp_path: Path, stage: int) -> None:
    path, _ = run(tmp_path / "run", stage)
    refs = json.loads(path.read_text())
    trial = mldbg.create_trial(tmp_path / "run")
    assert trial.steps() == list(range(6))
    gradients = weights = 0
    for step in map(str, range(6)):
        for name, stats in refs[step].items():
            got = trial.record(name, int(step), worker="worker_0")
            keys = set(stats)
            if stage == 3 and not name.startswith("gradient/"):
                keys.discard("row_range")  # a ZeRO-3 run of the flattened weight: rows split
            assert keys <= set(got.statistics), (step, name, sorted(keys - set(got.statistics)))
            for key in keys:
                assert same(got.statistics[key], stats[key]), (
                    step,
                    name,
                    key,
                    got.statistics[key],
                    stats[key],
                )
            if name.startswith("gradient/"):
                gradients += len(keys)
                assert set(st.expand(st.DEFAULTS["gradients"])) <= {st.Statistic.parse(k) for k in keys}
                # the reference is the global gradient: the one-process gradient on the full batch
                assert got.statistics["l2"] == pytest.approx(refs[f"single/{step}"][name], rel=1e-5)
            else:
                weights += len(keys)
                assert got.shape == trial.record(name, 0, worker="worker_0").shape != (0,)
                assert got.statistics["requires_grad"] == 1.0
    assert gradients == 6 * 6 * len(st.DEFAULTS["gradients"])  # 6 steps, 6 tensors, every key
    assert weights >= 6 * 6 * 6
    code, findings = check(tmp_path / "run")  # a healthy job: quiet
    assert code == 0, findings


def test_an_exploding_run_is_caught_under_zero2(tmp_path: Path) -> None:
    """The FSDP2 tests' defect (lr 1e12) under ZeRO-2: caught from the global statistics (the
    healthy twin is quiet: the test above). DeepSpeed skips the steps whose gradient norm is not
    finite (its overflow check), so the weights stay huge but finite and no gradient is recorded at
    a skipped step: the weights' variance and the loss tell, not `exploding_tensor`."""
    run(tmp_path / "explode", 2, "explode")
    code, findings = check(tmp_path / "explode")
    assert code == 1 and "tensor_variance" in {f["rule"] for f in findings}, findings
