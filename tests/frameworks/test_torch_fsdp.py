"""Sharded training (issue 31): 2-process gloo jobs on the CPU (`fsdp_job.py`) with FSDP2
(`fully_shard`) and tensor parallelism (`parallelize_module`), recorded with the two lines.

Every statistic recorded for a sharded weight or gradient is that of the global tensor: equal
to the NumPy reference of the tensor gathered in the job itself with `full_tensor()`, and to the
same model trained in one process; a defect is caught under FSDP2 while its twin stays quiet;
`rank_divergence` compares replicated parameters only."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_multi_worker import free_port

import mldbg
from mldbg.cli.main import cli
from mldbg.store import statistics as st

JOB = Path(__file__).with_name("fsdp_job.py")
WEIGHT_KEYS = {*st.DEFAULTS["weights"], *st.DEFAULTS["biases"], "fingerprint"} - {"requires_grad"}
PARAMS = ("0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias")


def start_workers(world: int, *args: str) -> list[subprocess.Popen[str]]:
    port = str(free_port())
    return [
        subprocess.Popen(
            [sys.executable, *args],
            env=dict(
                os.environ, RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(world)
    ]


def run(out: Path, layout: str, defect: str = "", refs: Path | None = None) -> Path:
    args = [str(JOB), str(out), layout, defect, str(refs or "")]
    if layout == "single":
        done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return out
    for p in start_workers(4 if layout == "fsdp_tp" else 2, *args):
        output, _ = p.communicate(timeout=120)
        assert p.returncode == 0, output
        assert "Traceback" not in output and "failed" not in output, output
    return out


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("sharded")
    run(base / "fsdp", "fsdp", refs=base / "fsdp.json")
    run(base / "single", "single")
    return base


def close(got: float, want: float, rtol: float) -> bool:
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) and math.isnan(got)
    return got == want or abs(got - want) <= rtol * abs(want)


def compare_with_references(
    run_dir: Path,
    refs_path: Path,
    left_out: frozenset[tuple[str, str]] = frozenset(),
    may_lack: frozenset[str] = frozenset(),
) -> set[str]:
    """Every reference statistic (of the gathered global tensor) recorded within 1e-6; returns
    the keys compared (`gradient:` before a gradient's). `left_out`: (tensor, key) pairs that
    must be absent, not wrong; `may_lack`: keys that may be absent."""
    trial = mldbg.create_trial(run_dir)
    refs = json.loads(refs_path.read_text())
    assert len(refs) == 6
    compared = set()
    for step, tensors in refs.items():
        for name, stats in tensors.items():
            got = trial.record(name, int(step), worker="worker_0").statistics
            for key, want in stats.items():
                if name.startswith("gradient/") and key == "fingerprint":
                    continue  # not asked for gradients
                if (name, key) in left_out or (key in may_lack and key not in got):
                    assert key not in got, (step, name, key)
                    continue
                assert key in got, (step, name, key, sorted(got))
                assert close(got[key], want, 1e-6), (step, name, key, got[key], want)
                compared.add(f"gradient:{key}" if name.startswith("gradient/") else key)
    return compared


def test_fsdp2_statistics_are_those_of_the_global_tensors(jobs: Path) -> None:
    compared = compare_with_references(jobs / "fsdp", jobs / "fsdp.json")
    # every key the two lines record for weights, biases and gradients
    assert compared == WEIGHT_KEYS | {f"gradient:{k}" for k in st.DEFAULTS["gradients"]}
    trial = mldbg.create_trial(jobs / "fsdp")
    record = trial.record("0.weight", 3, worker="worker_0").statistics
    assert record["requires_grad"] == 1.0 and record["delta_l2"] > 0


def test_fsdp2_statistics_equal_one_process_training_the_full_batch(jobs: Path) -> None:
    """The same model, seed and data unsharded in one process: the same values, up to the
    float32 rounding of the gradients' averaging across the ranks (and the recorder's float32
    accumulation in the unsharded run), far below 1e-4."""
    sharded, single = mldbg.create_trial(jobs / "fsdp"), mldbg.create_trial(jobs / "single")
    compared = 0
    for name in (*PARAMS, *(f"gradient/{p}" for p in PARAMS)):
        for step in single.tensor(name).steps():
            want = single.record(name, step).statistics
            got = sharded.record(name, step, worker="worker_0").statistics
            assert set(want) <= set(got) | {"fingerprint"}, (name, set(want) - set(got))
            for key, value in want.items():
                if key == "fingerprint" and step > 0:
                    continue  # bits, after updates rounded differently
                assert close(got[key], value, 1e-4), (step, name, key, got[key], value)
                compared += 1
    assert compared > 400


def test_every_rank_records_the_same_global_fingerprint_of_a_sharded_parameter(jobs: Path) -> None:
    """The fingerprint steps of a data-parallel job: worker 1 records the fingerprint of the
    global tensor too (not of its shard), so `rank_divergence` sees no difference by design."""
    trial = mldbg.create_trial(jobs / "fsdp")
    for step in (0, 3, 5):
        prints = {r.worker: r.statistics["fingerprint"] for r in trial.records("2.weight", step)}
        assert set(prints) == {"worker_0", "worker_1"} and len(set(prints.values())) == 1


def test_a_model_registered_before_fully_shard_records_its_sharded_parameters(tmp_path: Path) -> None:
    """`hook.register_module(model)` then `fully_shard(model)`: the hook follows the DTensors
    that replaced the parameters (at the first forward), so steps end at the optimizer and the
    statistics are the global tensors' as above."""
    refs = tmp_path / "late.json"
    late = run(tmp_path / "late", "fsdp", "late", refs)
    assert compare_with_references(late, refs) == WEIGHT_KEYS | {
        f"gradient:{k}" for k in st.DEFAULTS["gradients"]
    }
    assert mldbg.create_trial(late).steps() == list(range(6))


def check(run_dir: Path) -> tuple[int, list[dict]]:
    """`mldbg check --json`: the exit code and the findings (those grouped under a diagnosis too)."""
    result = CliRunner().invoke(cli, ["check", str(run_dir), "--json"])
    findings = []
    for line in result.output.splitlines():
        if line.startswith("{"):
            found = json.loads(line)
            findings.extend(found.get("findings", [found] if "rule" in found else []))
    return result.exit_code, findings


def test_exploding_gradients_are_caught_under_fsdp2_and_the_twin_is_quiet(jobs: Path, tmp_path: Path) -> None:
    code, output = check(jobs / "fsdp")
    assert code == 0, output
    code, output = check(run(tmp_path / "explode", "fsdp", "explode"))
    assert code == 1 and "exploding_tensor" in {f["rule"] for f in output}, output


def test_tensor_parallel_statistics_and_a_drifting_replicated_layer(tmp_path: Path) -> None:
    """ColwiseParallel / RowwiseParallel layers and a replicated one: global values exact (the
    row_range of a tensor split along its rows, Rowwise's weight, is left out, not wrong); the
    healthy job is quiet (its ranks share their batch by design: no duplicate_batches); the
    replicated layer drifting on rank 1 is what `rank_divergence` names, never a sharded one."""
    refs = tmp_path / "tp.json"
    healthy = run(tmp_path / "tp", "tp", refs=refs)
    compared = compare_with_references(healthy, refs, frozenset({("2.weight", "row_range")}))
    assert compared == WEIGHT_KEYS | {f"gradient:{k}" for k in st.DEFAULTS["gradients"]}
    code, output = check(healthy)
    assert code == 0, output
    code, findings = check(run(tmp_path / "drift", "tp", "drift"))
    divergent = {t for f in findings if f["rule"] == "rank_divergence" for t in f["tensors"]}
    assert code == 1 and "4.inner.weight" in divergent, findings
    assert not divergent & {"0.weight", "2.weight"}, divergent  # sharded: one global value


def test_fsdp2_with_tensor_parallel_on_a_2d_mesh(tmp_path: Path) -> None:
    """4 ranks, a (dp 2, tp 2) mesh: TP inside, FSDP2 across. The statistics that merge are the
    global tensors'; those needing element positions are left out where FSDP2 interleaves the
    pieces (`_StridedShard`), never wrong; the TP pairs share their batch (no duplicate_batches)."""
    refs = tmp_path / "2d.json"
    job = run(tmp_path / "2d", "fsdp_tp", refs=refs)
    positional = frozenset({"row_range", "quantile(5.0)", "quantile(95.0)", "sample_change"})
    compared = compare_with_references(job, refs, may_lack=positional)
    assert {"l2", "mean", "variance", "fingerprint", "gradient:l2", "gradient:max_abs"} <= compared
    code, findings = check(job)
    assert code == 0, findings


def test_a_nan_in_one_ranks_shard_is_named_with_its_rank(tmp_path: Path) -> None:
    """A NaN in rank 1's piece of one FSDP2 gradient: worker 0 records the global counts and,
    beside them, `rank_nonfinite` (per rank, the NaN and inf of its own piece), so the finding
    says which rank; the steps before it record no such vector."""
    from fsdp_job import NAN_STEP

    job = run(tmp_path / "nan1", "fsdp", "nan1")
    trial = mldbg.create_trial(job)
    name = "gradient/2.weight"
    record = trial.record(name, NAN_STEP, worker="worker_0").statistics
    assert record["nan_count"] == 1, record
    vname = st.vector_name(name, "rank_nonfinite")
    assert trial.tensor(vname).value(NAN_STEP).tolist() == [0, 1]
    assert NAN_STEP - 1 not in trial.tensor(vname).steps()
    code, findings = check(job)
    exploding = [f for f in findings if f["rule"] == "exploding_tensor"]
    assert code == 1 and exploding and exploding[0]["step"] == NAN_STEP, findings
    assert "in the shard of rank 1" in exploding[0]["message"], exploding[0]["message"]


def run_lightning(out: Path, defect: str = "", refs: Path | None = None) -> Path:
    """`fsdp_job.py OUT lightning`: started once; Lightning's launcher starts rank 1."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    done = subprocess.run(
        [sys.executable, str(JOB), str(out), "lightning", defect, str(refs or "")],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "rank 0 steps 6" in done.stdout and "rank 1 steps 6" in done.stdout, done.stdout
    return out


def test_lightning_model_parallel_strategy_records_the_global_weights(tmp_path: Path) -> None:
    """Lightning's ModelParallelStrategy (FSDP2 in `configure_model`) on 2 CPU gloo processes
    with `mldbg.lightning.DebuggerCallback` and its defaults: the weights' statistics are the
    global tensors' (gathered in the job at each batch's start, within 1e-6) at every step, the
    gradients are recorded as global DTensors too; the healthy fit is quiet and its lr-1e12
    twin is caught by exploding_tensor."""
    refs = tmp_path / "lightning.json"
    healthy = run_lightning(tmp_path / "healthy", refs=refs)
    trial = mldbg.create_trial(healthy)
    assert trial.steps() == list(range(6))
    references = json.loads(refs.read_text())
    assert len(references) == 6
    compared = set()
    for step, tensors in references.items():
        for name, stats in tensors.items():
            got = trial.record(name, int(step), worker="worker_0").statistics
            for key, want in stats.items():
                assert close(got[key], want, 1e-6), (step, name, key, got[key], want)
                compared.add(key)
    assert compared == WEIGHT_KEYS - {"delta_l2"}
    gradients = [trial.record(f"gradient/net.{p}", s).statistics for p in PARAMS for s in (1, 5)]
    assert all(set(st.DEFAULTS["gradients"]) <= set(g) and g["l2"] > 0 for g in gradients)
    code, findings = check(healthy)
    assert code == 0, findings
    code, findings = check(run_lightning(tmp_path / "explode", "explode"))
    assert code == 1 and "exploding_tensor" in {f["rule"] for f in findings}, findings


DEFECTS_JOB = Path(__file__).with_name("fsdp_defects_job.py")
# the defect table's PyTorch defects under FSDP2 -> the rules any of which must fire
FSDP2_DEFECTS = {
    "vanishing": {"vanishing_gradient"},
    "dead_relu": {"dead_relu"},
    "no_zero_grad": {"gradient_not_reset"},
    "frozen_updated": {"frozen_layer_updated"},
}
FSDP2_TWINS = ("healthy", "healthy_sigmoid_adam", "healthy_momentum", "healthy_frozen_fc1")


@pytest.fixture(scope="module")
def fsdp2_defects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One 2-process FSDP2 job that trains every scenario of `fsdp_defects_job.py` in turn."""
    out = tmp_path_factory.mktemp("fsdp2_defects")
    root = str(Path(__file__).resolve().parents[2])  # the job imports tests.tiny
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, old) if p)
    try:
        workers = start_workers(2, str(DEFECTS_JOB), str(out), *FSDP2_TWINS, *FSDP2_DEFECTS)
    finally:
        os.environ.pop("PYTHONPATH") if old is None else os.environ.__setitem__("PYTHONPATH", old)
    for p in workers:
        output, _ = p.communicate(timeout=300)
        assert p.returncode == 0 and "worker done" in output, output
    return out


@pytest.mark.parametrize("name", FSDP2_TWINS)
def test_the_healthy_twins_are_quiet_under_fsdp2(fsdp2_defects: Path, name: str) -> None:
    code, findings = check(fsdp2_defects / name)
    assert code == 0 and not findings, findings


@pytest.mark.parametrize("name", list(FSDP2_DEFECTS))
def test_the_defect_tables_defects_are_caught_under_fsdp2(fsdp2_defects: Path, name: str) -> None:
    """Vanishing gradients (8 sigmoid layers), ReLUs killed by a bias of -10, a missing
    `zero_grad()`, a layer frozen mid-run that SGD's momentum keeps moving: each caught by its
    rule from the global statistics of the sharded tensors."""
    code, findings = check(fsdp2_defects / name)
    assert code == 1 and FSDP2_DEFECTS[name] & {f["rule"] for f in findings}, findings
