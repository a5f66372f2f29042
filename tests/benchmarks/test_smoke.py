"""Each benchmark script of benchmarks/ runs for a few steps, so they keep working.

They are timed, not asserted: this only checks that each runs and prints its table. The
scripts run in this process (their `main()` with a few steps, `--inprocess` where they would
start a process per measurement) to keep the test fast; the peers (smdebug, TensorBoard) need
their own venv and are left out.
"""

import importlib
import io
import logging
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


async def _empty_app(scope, receive, send):
    """An ASGI app with a lifespan and nothing to serve."""
    while scope["type"] == "lifespan":
        message = await receive()
        done = message["type"] == "lifespan.shutdown"
        await send({"type": f"{message['type']}.complete"})
        if done:
            return


def test_dashboard_server_leaves_the_process_logging_alone(bench):
    """dashboard_latency serves in a thread of this process (of pytest's, in test_benchmark_runs):
    uvicorn's default log_config ran logging.config.dictConfig, which closes every handler of the
    process, and absl's (imported with jax or TensorFlow) closes its stream with it: the captured
    stderr of the pytest worker, which every later test then failed on ('I/O operation on closed
    file'). A handler like absl's, made before the server starts, keeps its stream open."""

    class ClosesItsStream(logging.StreamHandler):  # as absl's PythonHandler does
        def close(self) -> None:
            self.stream.close()
            super().close()

    stream = io.StringIO()
    handler = ClosesItsStream(stream)
    uvicorn_handlers = logging.getLogger("uvicorn").handlers[:]
    server, thread, _ = bench("dashboard_latency").serve(_empty_app)
    try:
        assert not stream.closed
        assert logging.getLogger("uvicorn").handlers == uvicorn_handlers  # none bound to this sys.stderr
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        handler.close()
    assert not thread.is_alive()


def test_splice_replaces_only_its_block(bench):
    run_all = bench("run_all")
    text = "# B\n\nprose\n<!-- bench:limit -->\nold\n<!-- /bench:limit -->\nmore prose\n"
    out = run_all.splice(text, "limit", "new table\n")
    assert "new table" in out and "old" not in out and out.endswith("more prose\n")
    assert run_all.splice(out, "reading", "r").rstrip().endswith("<!-- /bench:reading -->")
