"""Profiler rules on real CPU trainings, through the same runner as the model rules:
an injected slow data loader fires `dataloader`, injected stalls fire `step_outlier`, the
healthy twin fires none; GPU rules are skipped with a reason on a machine without GPU."""

import json

import numpy as np
import pytest
from profiler_runs import SLOW_STEPS, fired, gpu_run, train

import mldbg
from mldbg.profiler import ProfilerConfig, ProfilerData, layout
from mldbg.rules import BUILTIN
from mldbg.rules.profiler import ProfilerRule
from mldbg.rules.runner import RuleRunner
from mldbg.store import open_store

PROFILER_RULES = sorted(n for n, c in BUILTIN.items() if issubclass(c, ProfilerRule))
GPU_RULES = {"low_gpu_utilization", "cpu_bottleneck", "io_bottleneck", "batch_size", "gpu_memory_increase"}


def run_rules(path, rules=PROFILER_RULES):
    runner = RuleRunner(path, list(rules))
    findings = runner.run_available() + runner.finish()
    assert not runner.errors, runner.errors
    return findings, runner


def test_the_ten_profiler_rules_are_registered():
    assert sorted(
        ["low_gpu_utilization", "cpu_bottleneck", "io_bottleneck", "batch_size", "gpu_memory_increase",
         "load_balancing", "step_outlier", "max_initialization_time", "dataloader", "overall_system_usage"]
    ) == PROFILER_RULES  # fmt: skip
    for name in PROFILER_RULES:
        cls = BUILTIN[name]
        assert cls.__doc__ and cls.__name__ == "".join(p.title() for p in name.split("_"))
        cls()  # defaults construct


def test_healthy_run_fires_nothing(healthy_run):
    findings, runner = run_rules(healthy_run)
    assert findings == [], [str(f) for f in findings]
    for name in GPU_RULES:  # said once, with the reason
        assert "no GPU" in runner.skipped[name]
    assert "dataloader" not in runner.skipped and "step_outlier" not in runner.skipped


def test_default_check_includes_profiler_rules_and_stays_quiet(healthy_run):
    findings = mldbg.check(healthy_run)
    assert not [f for f in findings if f.rule in PROFILER_RULES], [str(f) for f in findings]


def test_slow_data_loader_fires_dataloader(slow_loader_run):
    findings, _ = run_rules(slow_loader_run)
    (f,) = fired(findings, "dataloader")
    assert "wait for data" in f.message and "starved" in f.message and "0 data-loader processes" in f.message
    assert "num_workers" in f.suggestion and f.mode == "TRAIN" and f.worker == "worker_0"
    share = int(f.message.split("wait for data ")[1].split("%")[0])
    assert share > 60
    assert not fired(findings, "step_outlier")  # every step is slow alike: no outliers


def test_injected_stalls_fire_step_outlier(stalled_steps_run):
    findings, _ = run_rules(stalled_steps_run)
    (f,) = fired(findings, "step_outlier")
    assert f.mode == "TRAIN" and "TRAIN steps of 60" in f.message
    n = int(f.message.split(" ")[0])
    # the injected stalls, and at most a few more, plus the steps the machine itself made slow
    # (twice the median or more: a loaded CI machine): those are outliers too
    durations = ProfilerData(stalled_steps_run).steps(mode="TRAIN").duration
    slowed = max(0, int((durations >= 2 * np.median(durations)).sum()) - len(SLOW_STEPS))
    assert len(SLOW_STEPS) - 1 <= n <= len(SLOW_STEPS) + 3 + slowed, (n, slowed)
    slowest = [int(s.split(" ")[0]) for s in f.message.split("slowest ")[1].split(";")[0].split("), ")]
    assert set(slowest) <= set(SLOW_STEPS)
    assert "compute, not data" in f.message
    assert not fired(findings, "dataloader")
    # the same run with a higher bar stays quiet
    quiet, _ = run_rules(stalled_steps_run, ["step_outlier:n_outliers=20"])
    assert quiet == []


def test_step_outlier_mode_parameter(stalled_steps_run):
    findings, _ = run_rules(stalled_steps_run, ["step_outlier:mode=EVAL"])
    assert findings == []


def test_gpu_rules_skip_without_gpu_and_profiler_rules_skip_without_profiler(healthy_run, tmp_path):
    import torch
    from torch import nn

    from mldbg.torch import Hook

    hook = Hook(tmp_path)  # no profiler_config
    net = nn.Linear(4, 2)
    hook.register_module(net)
    net(torch.randn(3, 4)).sum().backward()
    hook.close()
    findings, runner = run_rules(tmp_path)
    assert findings == []
    for name in PROFILER_RULES:
        assert "no profiler data" in runner.skipped[name]


def test_max_initialization_time_on_a_real_run(healthy_run):
    # the process (pytest) started well before the first step: a tiny threshold fires...
    findings, _ = run_rules(healthy_run, ["max_initialization_time:threshold=0.0001"])
    (f,) = fired(findings, "max_initialization_time")
    assert f.step == 0 and f.mode == "TRAIN" and "first training step" in f.message
    # ...the default (20 minutes) does not
    assert run_rules(healthy_run, ["max_initialization_time"])[0] == []


@pytest.mark.parametrize(
    "first_step_after, ended_without_steps, fires",
    [(30.0, False, False), (1500.0, False, True), (None, True, True)],
)
def test_max_initialization_time_semantics(tmp_path, first_step_after, ended_without_steps, fires):
    path = gpu_run(tmp_path, n=40, init_samples=4)
    store = open_store(path)
    meta = json.loads(store.read(layout.worker_meta_key("worker_0")))
    data = ProfilerData(path)
    first = float(data.steps("worker_0").start[0])
    if first_step_after is not None:
        meta["process_start"] = first - first_step_after
    else:  # a job that never reached a step, and ran 25 minutes
        store.delete(layout.chunk_key(layout.worker_stream("worker_0", layout.STEPS), 1))
        meta["process_start"] = first - 1500.0
    store.write(layout.worker_meta_key("worker_0"), [json.dumps(meta).encode()])
    findings, _ = run_rules(path, ["max_initialization_time"])
    assert bool(findings) == fires, [str(f) for f in findings]
    if fires:
        assert "(> 20 min)" in findings[0].message
        assert ("ended without one" in findings[0].message) == ended_without_steps


def test_oversubscribed_loaders(tmp_path):
    """More child processes than max_threshold % of the cores: oversubscribed."""
    import os
    import subprocess
    import sys
    import time as _time

    from mldbg.profiler import Profiler

    n = 2 * (os.cpu_count() or 1) + 1
    # started before the profiler: it lists children every 5 s, first at its first sample
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"]) for _ in range(n)]
    try:
        prof = Profiler(tmp_path, ProfilerConfig(system_interval_ms=50, flush_seconds=0.2))
        _time.sleep(0.3)
        prof.timeline.step_begin(0)
        prof.timeline.step_end()
        prof.close()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    data = ProfilerData(tmp_path)
    assert int(np.max(data.process("worker_0").children)) >= n
    (f,) = BUILTIN["dataloader"]().run(data)
    assert f.message.startswith("oversubscribed") and "data-loader processes" in f.message
    quiet = BUILTIN["dataloader"](max_threshold=10_000).run(data)
    assert quiet == []


def test_slow_loader_with_parallel_workers_is_not_called_starved(tmp_path):
    train(
        tmp_path, steps=24, data_sleep=0.03, config=ProfilerConfig(system_interval_ms=50, flush_seconds=0.25)
    )
    data = ProfilerData(tmp_path)
    # pretend the job had many loaders: the advice changes from "more workers" to "cheaper samples"
    (f,) = BUILTIN["dataloader"](min_threshold=0).run(data)
    assert "starved" not in f.message and "cheaper" in f.suggestion
