"""The monitor on real trainings: series present and plausible, steps and phases timed,
several workers per node, readable while the run goes on."""

import math
import time

import numpy as np
import psutil
import pytest
from profiler_runs import FAST, train

from mldbg import Mode
from mldbg.profiler import Profiler, ProfilerConfig, ProfilerData
from mldbg.profiler.timeline import FORWARD_END


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("monitor")
    hook = train(path, steps=40, eval_steps=5, busy_seconds=1.2, start_delay=0.4)
    return path, hook


def test_system_series_are_present_and_plausible(run):
    path, _ = run
    data = ProfilerData(path)
    assert data.complete and len(data.nodes()) == 1
    sys = data.system()
    assert len(sys) >= 15  # 50 ms samples over ~2 s
    assert sys.cores == psutil.cpu_count(logical=True)
    assert np.all(np.diff(sys.time) > 0)
    for name, values in sys.metrics().items():
        assert np.all(np.isfinite(values)), name
        assert np.all(values >= 0), name
    assert np.all(sys.cpu <= 100) and np.all(sys.mem_percent < 100) and np.all(sys.mem_percent > 0)
    assert sys.mem_used[-1] > 50e6


def test_no_gpu_is_a_note_not_an_error(run):
    data = ProfilerData(run[0])
    assert data.system().gpus == 0 and not data.has_gpus
    assert any("GPU" in n for n in data.notes())


def test_cpu_is_busy_while_training(run):
    data = ProfilerData(run[0])
    summary = data.job_summary()
    proc = data.process("worker_0")
    training = (proc.time > summary["first_step_start"] + 0.1) & (proc.time < summary["last_step_end"])
    # inside the start delay (a sleep just before the data loader and the first step)
    first = summary["first_step_start"]
    waiting = (proc.time > first - 0.35) & (proc.time < first - 0.1)
    assert training.sum() >= 8 and waiting.sum() >= 2
    busy, idle = float(np.median(proc.cpu[training])), float(np.median(proc.cpu[waiting]))
    assert busy > 20 and busy > idle + 15, (busy, idle)  # a shared 2-core machine: not 100%
    assert proc.rss[-1] > 50e6
    node = data.system()
    during = (node.time > summary["first_step_start"] + 0.1) & (node.time < summary["last_step_end"])
    assert float(np.median(node.cpu_max_core[during])) > 20


def test_steps_and_phases(run):
    path, hook = run
    data = ProfilerData(path)
    steps = data.steps("worker_0")
    train_steps, eval_steps = steps.select(Mode.TRAIN), steps.select(Mode.EVAL)
    assert len(train_steps) == hook.train_steps and len(eval_steps) == 5
    # the recorder's global steps: training first, then evaluation
    assert train_steps.step.tolist() == list(range(hook.train_steps))
    assert eval_steps.step.tolist() == list(range(hook.train_steps, hook.train_steps + 5))
    for phase in ("forward", "backward", "optimizer"):
        values = getattr(train_steps, phase)
        assert np.all(np.isfinite(values)) and np.all(values > 0), phase
    assert math.isnan(train_steps.data[0]) and np.all(np.isfinite(train_steps.data[1:]))
    parts = train_steps.forward + train_steps.backward + train_steps.optimizer
    assert np.all(parts <= train_steps.compute + 1e-6)
    assert np.all(np.diff(train_steps.start) > 0) and np.all(train_steps.end >= train_steps.start)
    assert np.all(np.isfinite(eval_steps.forward)) and np.all(np.isnan(eval_steps.backward))


def test_job_summary(run):
    s = ProfilerData(run[0]).job_summary()
    assert s["initialization"] >= 0.4  # the start delay at least
    assert s["training_loop"] >= 1.0
    assert 0 <= s["finalization"] < 5
    assert s["total"] == pytest.approx(s["initialization"] + s["training_loop"] + s["finalization"], rel=1e-6)


def test_sampler_accounts_for_its_own_cpu(run):
    data = ProfilerData(run[0])
    end = data.worker_end("worker_0")
    assert end["samples"] >= 15 and 0 < end["sampler_cpu_seconds"] < 1.0


def test_several_workers_one_node_sampler_and_live_reading(tmp_path):
    cfg = ProfilerConfig(**FAST)
    p0 = Profiler(tmp_path, cfg, rank=0, node="n1")
    p1 = Profiler(tmp_path, ProfilerConfig(**FAST, node_metrics=False), rank=1, node="n1")
    try:
        live = ProfilerData(tmp_path)
        deadline = time.monotonic() + 5
        step = 0
        while (
            time.monotonic() < deadline
            and not (live.refresh() or live.has_steps)
            or len(live.steps("worker_0")) < 3
        ):
            for p in (p0, p1):
                p.timeline.step_begin(step)
                sum(i * i for i in range(20000))
                p.timeline.mark(FORWARD_END)
                p.timeline.step_end()
            step += 1
            if time.monotonic() > deadline:
                break
        assert not live.complete
        assert live.system("n1").cores > 0 and len(live.steps("worker_0")) >= 3  # read while running
    finally:
        p0.close()
        p1.close()
    data = ProfilerData(tmp_path)
    assert data.complete and data.nodes() == ["n1"] and data.workers() == ["worker_0", "worker_1"]
    assert data.worker_meta("worker_0")["node_metrics"] and not data.worker_meta("worker_1")["node_metrics"]
    assert len(data.process("worker_1")) > 0 and len(data.steps("worker_1")) == step


@pytest.mark.parametrize("flush_seconds", [0.05, 60.0])  # 60: only close() writes, and meets every failure
def test_any_store_and_a_failing_store_never_reach_training(tmp_path, flush_seconds):
    """The profiler writes through the Store interface (here in memory); a store that
    refuses writes for a while loses nothing: the rows are kept and written later."""
    from mldbg.store.memory import MemoryStore

    class Flaky(MemoryStore):
        failures = 3

        def write(self, key, parts):
            if "/steps/" in key and self.failures:
                self.failures -= 1
                raise OSError("bucket unavailable")
            super().write(key, parts)

    store = Flaky(f"profiler-flaky-{flush_seconds}")
    prof = Profiler(store, ProfilerConfig(system_interval_ms=20, flush_seconds=flush_seconds))
    for step in range(30):
        prof.timeline.step_begin(step)
        time.sleep(0.005)
        prof.timeline.step_end()
    prof.close()
    data = ProfilerData(MemoryStore(f"profiler-flaky-{flush_seconds}"))
    assert store.failures == 0
    assert data.steps("worker_0").step.tolist() == list(range(30))
    assert len(data.system()) > 5 and data.complete
