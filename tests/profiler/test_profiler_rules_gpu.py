"""GPU rules on recorded GPU-shaped series (synthetic utilization traces written through
the real chunk writers and store: this machine has no GPU). Each rule fires on its defect
and stays quiet on a healthy GPU job; all run through the same runner as the model rules."""

import numpy as np
import pytest
from profiler_runs import fired, gpu_run

import mldbg
from mldbg.profiler import ProfilerData
from mldbg.rules import BUILTIN
from mldbg.rules.profiler import ProfilerRule

PROFILER_RULES = [n for n, c in BUILTIN.items() if issubclass(c, ProfilerRule)]


def check(path, rules=PROFILER_RULES):
    return mldbg.check(path, rules=list(rules))


@pytest.fixture(scope="module")
def healthy_gpu(tmp_path_factory):
    """Two busy GPUs (~92%), memory flat at 60%, CPU at 45%, no I/O wait."""
    return gpu_run(tmp_path_factory.mktemp("healthy_gpu"), gpus=2)


def test_healthy_gpu_job_fires_nothing(healthy_gpu):
    findings = check(healthy_gpu)
    assert findings == [], [str(f) for f in findings]
    data = ProfilerData(healthy_gpu)
    assert data.has_gpus and data.system().gpus == 2 and len(data.system()) == 400


def test_low_gpu_utilization_underused(tmp_path):
    path = gpu_run(tmp_path, gpu_util=lambda i, g: 35.0)
    (f,) = fired(check(path), "low_gpu_utilization")
    assert "under-used" in f.message and "p95 utilization 3" in f.message and "< 70%" in f.message
    assert f.tensors == ["gpu-node-1/gpu0_util_percent"] and f.mode == "TRAIN"


def test_low_gpu_utilization_fluctuating(tmp_path):
    path = gpu_run(tmp_path, gpu_util=lambda i, g: 95.0 if (i // 3) % 2 else 2.0)
    (f,) = fired(check(path), "low_gpu_utilization")
    assert "fluctuates" in f.message and "waits between bursts" in f.message


def test_low_gpu_utilization_idle_gpu_and_load_balancing(tmp_path):
    path = gpu_run(
        tmp_path,
        gpus=2,
        gpu_util=lambda i, g: 92.0 if g == 0 else 0.0,
        gpu_mem=lambda i, g: 60.0 if g == 0 else 0.5,
    )
    findings = check(path)
    (low,) = fired(findings, "low_gpu_utilization")
    assert "GPU 1" in low.message and "is idle" in low.message and "device placement" in low.suggestion
    (lb,) = fired(findings, "load_balancing")
    assert (
        "gpu-node-1/gpu0" in lb.message and "gpu-node-1/gpu1" in lb.message and "Jensen-Shannon" in lb.message
    )
    assert not fired(findings, "batch_size")  # an unused GPU is not a batch-size question


def test_load_balancing_across_nodes_and_threshold(tmp_path):
    a = gpu_run(tmp_path / "run", gpus=1, node="node-a", gpu_util=lambda i, g: 90.0)
    gpu_run(
        tmp_path / "run",
        gpus=1,
        node="node-b",
        gpu_util=lambda i, g: 55.0,
        workers=("worker_1",),
        tensors=False,
    )
    findings = check(a, ["load_balancing", "low_gpu_utilization"])
    (lb,) = fired(findings, "load_balancing")
    assert "node-a/gpu0" in lb.message and "node-b/gpu0" in lb.message
    assert len(fired(findings, "low_gpu_utilization")) == 1  # node-b's GPU at 55%
    assert fired(check(a, ["load_balancing:threshold=1"]), "load_balancing") == []  # disjoint: distance 1


def test_cpu_bottleneck(tmp_path):
    # most of the time the GPU idles while one core is pegged (a single-threaded input pipeline)
    path = gpu_run(
        tmp_path,
        gpu_util=lambda i, g: 3.0 if i % 10 < 7 else 95.0,
        cpu=lambda i, c: 99.0 if c == 0 else 20.0,
    )
    findings = check(path)
    (f,) = fired(findings, "cpu_bottleneck")
    assert "CPU bottleneck" in f.message and "num_workers" in f.suggestion
    share = int(f.message.split("in ")[1].split("%")[0])
    assert 60 <= share <= 75
    assert not fired(findings, "io_bottleneck")
    assert fired(check(path, ["cpu_bottleneck:threshold=80"]), "cpu_bottleneck") == []


def test_io_bottleneck(tmp_path):
    path = gpu_run(
        tmp_path,
        gpu_util=lambda i, g: 2.0 if i % 10 < 8 else 90.0,
        iowait=lambda i: 75.0 if i % 10 < 8 else 2.0,
        cpu=lambda i, c: 10.0,
    )
    findings = check(path)
    (f,) = fired(findings, "io_bottleneck")
    assert "I/O bottleneck" in f.message and "local NVMe" in f.suggestion
    assert not fired(findings, "cpu_bottleneck")


def test_batch_size(tmp_path):
    path = gpu_run(tmp_path, gpu_util=lambda i, g: 40.0, gpu_mem=lambda i, g: 18.0, cpu=lambda i, c: 25.0)
    findings = check(path)
    (f,) = fired(findings, "batch_size")
    assert "larger batch" in f.message and "Increase the batch size" in f.suggestion
    # GPU memory well used: the batch is not the question
    path2 = gpu_run(
        tmp_path / "full", gpu_util=lambda i, g: 40.0, gpu_mem=lambda i, g: 85.0, cpu=lambda i, c: 25.0
    )
    assert not fired(check(path2), "batch_size")


def grew_from(finding):
    return float(finding.message.split("grew from ")[1].split("%")[0])


def test_gpu_memory_increase(tmp_path):
    # a slow leak: +0.05 points a sample (0.5 a window), from sample 100 on
    leak = gpu_run(tmp_path / "leak", gpu_mem=lambda i, g: 20.0 + 0.05 * max(0, i - 100))
    (f,) = fired(check(leak), "gpu_memory_increase")
    assert grew_from(f) == pytest.approx(20, abs=0.3)
    assert "memory_summary" in f.suggestion
    assert 180 < f.step * 0.25 / 0.5 + 4 < 260  # found ~100 samples (5 points) into the leak
    # a sudden jump
    jump = gpu_run(tmp_path / "jump", gpu_mem=lambda i, g: 30.0 if i < 300 else 45.0)
    (f,) = fired(check(jump), "gpu_memory_increase")
    assert grew_from(f) == pytest.approx(30, abs=0.3) and "reached 45" in f.message
    # memory filling up during the first steps, then flat: healthy
    warm = gpu_run(
        tmp_path / "warm", gpu_mem=lambda i, g: 10.0 if i < 5 else 60.0, init_samples=4, step_seconds=1.0
    )
    assert not fired(check(warm), "gpu_memory_increase")


def test_patience_skips_initialization(tmp_path):
    # GPU idle during the first 100 samples of loading; the first step after them
    path = gpu_run(tmp_path, gpu_util=lambda i, g: 0.0 if i < 100 else 92.0, init_samples=100)
    assert not fired(check(path), "low_gpu_utilization")
    # with patience=0 and no step timeline to mark the start, the idle start counts
    data = ProfilerData(path)
    rule = BUILTIN["low_gpu_utilization"](patience=0, window=100)
    data._steps.clear()
    assert rule.run(data)


def test_gpu_findings_are_reported_once_when_live(tmp_path):
    """A live runner sees the series grow: a condition is reported the first time only."""
    path = gpu_run(tmp_path, gpu_util=lambda i, g: 35.0)
    rule = BUILTIN["low_gpu_utilization"]()
    trial = mldbg.create_trial(path)
    first = rule.poll(trial, 0.0)
    assert len(first) == 1
    assert rule.poll(trial, 0.0) == [] and rule.finish(trial) == []


def test_series_of_the_report_rule(healthy_gpu):
    rule = BUILTIN["overall_system_usage"]()
    rows = rule.statistics(ProfilerData(healthy_gpu))
    by = {(r["where"], r["metric"]): r for r in rows}
    gpu0 = by[("gpu-node-1", "gpu0_util_percent")]
    assert 88 < gpu0["p50"] < 96 and gpu0["p50"] <= gpu0["p95"] <= gpu0["p99"] <= gpu0["max"]
    assert np.isclose(by[("gpu-node-1", "memory_percent")]["p50"], 35.0)
    assert rule.run(ProfilerData(healthy_gpu)) == []
