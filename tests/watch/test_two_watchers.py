"""Two watchers with the same rules and actions on one run at once would each deliver every
finding (they share a saved place and a journal): the second is refused with one line naming
the first's pid, whether it is a `Watcher` or `mldbg watch`. The lock is the process's and
the kernel drops it when the process ends, killed or not: a restarted watcher is never refused
by the one it replaces (tests/watch/test_restarts.py kills them)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.watch.watch_helpers import LossAbove, record, recorder, write_steps

from mldbg.errors import MldbgError
from mldbg.watch import Watcher, WatcherBusy

HOLDER = textwrap.dedent(
    """
    import sys
    from tests.watch.watch_helpers import LossAbove
    from mldbg.watch import Watcher
    watcher = Watcher(sys.argv[1], [LossAbove()], poll_seconds=0.05)
    watcher.cycle()
    print("holding", flush=True)
    sys.stdin.read()  # until the test closes our stdin
    """
)


def hold(run):
    """A watcher of `run` in another process, holding its place until `.stdin.close()`."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],  # where `tests` imports from
    )
    assert proc.stdout.readline().strip() == "holding"
    return proc


def test_a_second_watcher_of_the_same_place_is_refused_while_the_first_runs(tmp_path):
    run = tmp_path / "run"
    rec = recorder(run)
    write_steps(rec, [20.0, 1.0, 30.0], flush=True)  # a live run
    holder = hold(run)
    try:
        second = Watcher(run, [LossAbove()], poll_seconds=0.05)
        with pytest.raises(WatcherBusy, match=f"pid {holder.pid}") as err:
            second.run()
        assert isinstance(err.value, MldbgError) and "\n" not in str(err.value)
        # a watcher with other rules has its own place and is not refused
        assert Watcher(run, [LossAbove(limit=25.0)], poll_seconds=0.05).cycle() >= 0
    finally:
        holder.stdin.close()
        holder.wait(30)
        holder.stdout.close()
    write_steps(rec, [40.0])
    rec.close()
    # the holder is gone (its lock with it): the next watcher runs, and does not report again
    # the finding the holder reported (step 0)
    again = Watcher(run, [LossAbove()], poll_seconds=0.05)
    assert sorted(f.step for f in again.run()) == [2, 3]


def test_mldbg_watch_refuses_to_run_beside_a_watcher_of_the_same_place(tmp_path):
    run = tmp_path / "run"
    record(run, [1.0, 2.0], close=False)
    holder = Watcher(run, ["exploding_tensor"], poll_seconds=0.05)
    holder.cycle()  # holds the place of `mldbg watch RUN --rule exploding_tensor`
    proc = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "watch", str(run), "--rule", "exploding_tensor"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    holder.stop()
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and "another watcher" in lines[0] and str(os.getpid()) in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
