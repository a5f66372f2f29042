"""A live reader of a run that is replaced (issue 28, item 6): a job is killed, a reader keeps
its live trial, the job restarts with `overwrite=True` into the same folder. Before the fix the
live trial appended the new run's later segments to the old run's steps (a mix that read as
complete). Now it notices (meta.json names another writer, segment 1 changed), warns once and
starts over on the new run; a resumed run (segment 1 kept) goes on as before."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import mldbg
from mldbg.record.recorder import Recorder

FIRST = textwrap.dedent("""
    import sys, time
    import numpy as np
    import mldbg
    from mldbg.record.recorder import Recorder
    rec = Recorder(sys.argv[1], save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"])
    for step in range(1000):
        rec.start_step()
        rec.save_tensor("x", np.full(3, step + 1.0, np.float32), ("weights",))
        rec.end_step()
        rec.flush()
        print(step, flush=True)
        time.sleep(0.02)
""")


def _killed_run(run, steps):
    proc = subprocess.Popen([sys.executable, "-c", FIRST, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if int(line) >= steps:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()


def _write(run, steps, offset, **options):
    rec = Recorder(run, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"], **options)
    for step in range(steps):
        rec.start_step()
        rec.save_tensor("x", np.full(3, offset + step, np.float32), ("weights",))
        rec.end_step()
        rec.flush()
    rec.close()


def test_a_live_trial_starts_over_on_a_run_that_replaced_it(tmp_path):
    run = tmp_path / "run"
    _killed_run(run, 5)
    trial = mldbg.create_trial(str(run))
    old_steps = trial.steps()
    assert len(old_steps) >= 5 and not trial.loaded_all_steps
    assert [float(trial.tensor("x").value(s)[0]) for s in old_steps] == [
        s + 1.0 for s in old_steps
    ]  # files opened
    _write(run, len(old_steps) + 8, 1000.0, overwrite=True)  # the restart, more segments than before
    with pytest.warns(RuntimeWarning, match="replaced by a new run"):
        trial.refresh()
    assert trial.loaded_all_steps
    assert trial.steps() == list(range(len(old_steps) + 8))
    values = [float(trial.tensor("x").value(s)[0]) for s in trial.steps()]
    assert values == [1000.0 + s for s in trial.steps()]  # only the new run's values, no mix


def test_a_resumed_run_is_not_taken_for_a_replacement(tmp_path):
    run = tmp_path / "run"
    _killed_run(run, 5)
    trial = mldbg.create_trial(str(run))
    n = len(trial.steps())
    _write(run, 6, 0.0, resume=True)  # continues at step n
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trial.refresh()
    assert trial.steps() == list(range(n + 6)) and trial.loaded_all_steps
    assert [float(trial.tensor("x").value(s)[0]) for s in range(n)] == [s + 1.0 for s in range(n)]


def test_a_watcher_checks_the_run_that_replaced_the_one_it_watched(tmp_path):
    """The watcher's rules start afresh on the new run: a tensor all zeros from its first step
    is found at that step, not lost behind the old run's checked steps."""
    from mldbg.watch.watcher import Watcher

    run = tmp_path / "run"
    _killed_run(run, 6)
    watcher = Watcher(run, rules=["all_zero:patience=1"], state=False)
    watcher.cycle()
    assert not watcher.findings
    rec = Recorder(
        run, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"], overwrite=True
    )
    for step in range(3):
        rec.start_step()
        rec.save_tensor("x", np.full(3, 1.0 + step, np.float32), ("weights",))
        rec.save_tensor("dead.weight", np.zeros((2, 2), np.float32), ("weights",))
        rec.end_step()
        rec.flush()
    rec.close()
    for _ in range(3):
        watcher.cycle()
    found = [(f.rule, f.step) for f in watcher.findings]
    assert ("all_zero", 0) in found, found


def test_a_meta_json_that_appears_after_the_worker_was_found_is_no_replacement(tmp_path):
    """A reader that found a worker's folder before its meta.json was written (a writer
    starting, read by a live trial) sees the meta appear later: the same run, read on, never
    `RunReplaced` (the full suite once raised it in a reader thread racing the writer)."""
    run = tmp_path / "run"
    rec = Recorder(str(run), save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"])
    try:
        meta = next(run.glob("workers/*/meta.json"))
        saved = meta.read_bytes()
        meta.unlink()  # as a reader listing the folder between its creation and the meta's write
        trial = mldbg.create_trial(str(run))
        meta.write_bytes(saved)
        for step in range(3):
            rec.start_step()
            rec.save_tensor("x", np.full(3, step + 1.0, np.float32), ("weights",))
            rec.end_step()
        rec.flush()
    finally:
        rec.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a "replaced by a new run" warning fails the test
        trial.refresh()
        assert trial.steps() == [0, 1, 2]
        assert trial.tensor("x").value(2).tolist() == [3.0, 3.0, 3.0]
