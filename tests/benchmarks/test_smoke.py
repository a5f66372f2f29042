"""Each benchmark script of benchmarks/ runs for a few steps, so they keep working.

They are timed, not asserted: this only checks that each runs and prints its table. The
scripts run in this process (their `main()` with a few steps, `--inprocess` where they would
start a process per measurement) to keep the test fast; the peers (smdebug, TensorBoard) need
their own venv and are left out.
"""

import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

RUNS = {
    "overhead": ["--steps", "2", "--warmup", "1", "--rounds", "1", "--scenarios", "a,d", "--peers", "none",
                 "--inprocess", "--no-save"],
    "hook_cpu": ["--chunks", "1", "--chunk-steps", "10", "--scenarios", "a,d"],
    "limit": ["--capture-steps", "2", "--repeat", "1", "--large-mib", "1", "--large-count", "2", "--no-save"],
    "reading": ["--steps", "30", "--tensors", "4", "--repeat", "2", "--no-save"],
    "storage": ["--steps", "2", "--peers", "none", "--inprocess", "--no-save"],
    "memory": ["--steps", "3", "--rounds", "1", "--inprocess", "--no-save"],
    "sweep_throughput": ["--runs", "2", "--steps", "3", "--repeat", "1", "--no-save"],
    "dashboard_latency": ["--steps", "5", "--requests", "2", "--runs", "5", "--no-save"],
    "tensorboard_export": ["--steps", "5", "--repeat", "1", "--no-save"],
}  # fmt: skip


@pytest.fixture
def bench(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setenv("MLDBG_BENCH_TMP", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return lambda name: importlib.import_module(name)


@pytest.mark.parametrize("script", sorted(RUNS))
def test_benchmark_runs(script, bench, monkeypatch, capsys):
    module = bench(script)
    monkeypatch.setattr(sys, "argv", [str(BENCH / f"{script}.py"), *RUNS[script]])
    module.main()
    out = capsys.readouterr().out
    assert "| --- |" in out or "ms CPU per step" in out  # its table or its figure
    assert "Command: `python benchmarks/" in out


def test_splice_replaces_only_its_block(bench):
    run_all = bench("run_all")
    text = "# B\n\nprose\n<!-- bench:limit -->\nold\n<!-- /bench:limit -->\nmore prose\n"
    out = run_all.splice(text, "limit", "new table\n")
    assert "new table" in out and "old" not in out and out.endswith("more prose\n")
    assert run_all.splice(out, "reading", "r").rstrip().endswith("<!-- /bench:reading -->")
