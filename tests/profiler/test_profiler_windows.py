"""Profiling windows: torch.profiler's Chrome trace and top operators, cProfile's stats,
for exactly the steps asked, written through the store."""

import gzip
import json
import marshal
import pstats

from profiler_runs import train

from mldbg.frameworks.torch_trace import TorchCapture
from mldbg.profiler import Profiler, ProfilerConfig, ProfilerData
from mldbg.store import open_store


def test_torch_and_python_windows(tmp_path):
    cfg = ProfilerConfig(
        system_interval_ms=None, torch_profiler=(3, 2), python_profiler=(6, 3), flush_seconds=0.25
    )
    train(tmp_path, steps=12, config=cfg)
    data = ProfilerData(tmp_path)
    store = open_store(tmp_path)

    (tw,) = data.windows("torch")
    assert tw["steps"] == [3, 4] and tw["worker"] == "worker_0"
    names = [op["name"] for op in tw["operators"]]
    assert any("addmm" in n or "linear" in n for n in names), names[:10]
    assert all(op["count"] >= 1 and op["self_cpu_us"] >= 0 for op in tw["operators"])
    trace = json.loads(gzip.decompress(store.read(tw["data_key"])))
    assert trace["traceEvents"] and any("addmm" in str(e.get("name", "")) for e in trace["traceEvents"])

    (pw,) = data.windows("python")
    assert pw["steps"] == [6, 8]
    functions = {f["function"] for f in pw["functions"]}
    assert "forward" in functions or "_call_impl" in functions, sorted(functions)[:20]
    raw = marshal.loads(store.read(pw["data_key"]))
    stats = pstats.Stats(_StatsFile(raw))
    assert stats.total_calls > 0  # a standard pstats file


class _StatsFile:
    """pstats.Stats accepts any object with create_stats() and a .stats dict."""

    def __init__(self, raw):
        self.stats = raw

    def create_stats(self):
        pass


def test_window_beyond_the_run_captures_nothing(tmp_path):
    train(
        tmp_path,
        steps=5,
        config=ProfilerConfig(system_interval_ms=None, torch_profiler=(100, 2), flush_seconds=0.25),
    )
    assert ProfilerData(tmp_path).windows("torch") == []


def test_window_still_open_at_close_is_saved(tmp_path):
    train(
        tmp_path,
        steps=6,
        config=ProfilerConfig(system_interval_ms=None, python_profiler=(4, 50), flush_seconds=0.25),
    )
    (pw,) = ProfilerData(tmp_path).windows("python")
    assert pw["steps"] == [4, 5]


def test_the_framework_capture_is_handed_to_the_profiler(tmp_path):
    """The profiler imports no framework: a torch.profiler window runs only where the hook
    (here the caller) hands over its capture; without one the window is noted as ignored."""
    import torch

    cfg = ProfilerConfig(system_interval_ms=None, torch_profiler=(1, 1), flush_seconds=0.25)
    without = Profiler(tmp_path / "without", cfg)
    without.close()
    assert any("torch_profiler window ignored" in n for n in without.notes)
    prof = Profiler(tmp_path / "with", cfg, captures={"torch": TorchCapture})
    for step in range(3):
        prof.timeline.step_begin(step)
        torch.ones(8, 8) @ torch.ones(8, 8)
        prof.timeline.step_end()
    prof.close()
    (tw,) = ProfilerData(tmp_path / "with").windows("torch")
    assert tw["steps"] == [1, 1] and any("mm" in op["name"] for op in tw["operators"])
