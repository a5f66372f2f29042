"""The watcher in-process, on runs written by a real Recorder: it waits for the run, keeps up
with it, keeps its place across restarts, survives damaged files, and ends with the run."""

import shutil
import time

import pytest
from tests.waiting import wait_until
from watch_helpers import LossAbove, in_thread, record, recorder, write_steps

from mldbg.actions import Action
from mldbg.store import open_store
from mldbg.watch.watcher import Watcher, WatchTimeout


class Collect(Action):
    """A real (tiny) action that remembers what it delivered."""

    def __init__(self, **gate):
        super().__init__(**gate)
        self.delivered = []

    def act(self, findings, context):
        self.delivered += [f.step for f in findings]


def test_waits_for_the_run_then_reports_each_step_within_a_second(tmp_path):
    run = tmp_path / "run"
    found = []
    polls = []  # `alive` is asked once per poll: the watcher's own count of its polls
    watcher = Watcher(run, [LossAbove()], poll_seconds=0.1, alive=lambda: polls.append(1) or True,
                      on_finding=lambda f: found.append((time.monotonic(), f)))  # fmt: skip
    done = {}
    thread = in_thread(lambda: done.setdefault("findings", watcher.run()))
    wait_until(lambda: len(polls) >= 4, 30, "four polls of the watcher")
    assert thread.is_alive() and not run.exists()  # waiting; nothing written into a run that is not there

    visible = {}
    rec = recorder(run)
    losses = [1.0] * 5 + [50.0] + [1.0] * 5 + [60.0] + [1.0] * 3
    write_steps(rec, losses, sleep=0.1, on_step=lambda s: visible.setdefault(s, time.monotonic()))
    rec.close()
    thread.join(10)
    assert not thread.is_alive() and watcher.ended
    assert [f.step for _, f in found] == [5, 11]
    assert [f.step for f in done["findings"]] == [5, 11]
    for when, f in found:
        assert when - visible[f.step] < 1.0, (
            f"step {f.step} reported {when - visible[f.step]:.2f}s after it ended"
        )
    assert watcher.context.steps_checked == len(losses) and watcher.context.step == len(losses) - 1


def test_a_restarted_watcher_does_not_report_or_alert_old_findings(tmp_path):
    run = tmp_path / "run"
    rec = record(run, [1, 50, 1, 60], close=False)
    first_found, per_rule, per_finding = [], Collect(), Collect(once_per_rule=False)
    first = Watcher(run, [LossAbove()], [per_rule, per_finding], on_finding=first_found.append)
    first.cycle()  # then it dies (no final pass, no END yet)
    assert [f.step for f in first_found] == [1]  # the newest step, 3, may still be written: not yet
    assert per_rule.delivered == [1] and per_finding.delivered == [1]
    assert open_store(run).list("watch/")  # its place is kept in the run

    write_steps(rec, [1, 70, 1])
    rec.close()
    again_found, per_rule2, per_finding2 = [], Collect(), Collect(once_per_rule=False)
    again = Watcher(run, [LossAbove()], [per_rule2, per_finding2], on_finding=again_found.append)
    again.run()
    assert [f.step for f in again_found] == [3, 5]  # step 1 was reported by the first watcher
    assert per_rule2.delivered == []  # loss_above was already alerted in this run
    assert per_finding2.delivered == [3, 5]
    assert again.context.findings == 3  # in the run so far

    third_found, per_finding3 = [], Collect(once_per_rule=False)
    Watcher(run, [LossAbove()], [Collect(), per_finding3], on_finding=third_found.append).run()
    assert third_found == [] and per_finding3.delivered == []


def test_different_watchers_keep_different_places(tmp_path):
    run = tmp_path / "run"
    record(run, [1, 50, 1])
    assert len(Watcher(run, [LossAbove()]).run()) == 1
    assert len(Watcher(run, [LossAbove(limit=0.5)]).run()) == 3  # other parameters: its own place
    assert len(open_store(run).list("watch/")) == 2
    assert len(Watcher(run, [LossAbove()], state=False).run()) == 1  # no state: reports again


def test_a_new_training_in_the_same_directory_starts_afresh(tmp_path):
    run = tmp_path / "run"
    record(run, [1, 50, 1])
    assert len(Watcher(run, [LossAbove()]).run()) == 1
    shutil.rmtree(run / "workers")
    time.sleep(0.01)
    record(run, [1, 1, 80])
    assert [f.step for f in Watcher(run, [LossAbove()]).run()] == [2]


def test_damaged_files_are_reported_and_skipped(tmp_path):
    run = tmp_path / "run"
    rec = recorder(run)
    write_steps(rec, [1, 50, 1, 1, 60, 1, 70], flush=True)  # one segment per step
    rec.close()
    store = open_store(run)
    index = store.list("workers/worker_0/index/")
    data = store.list("workers/worker_0/data/")
    assert len(index) == len(data) == 7
    (run / index[3]).write_bytes((run / index[3]).read_bytes()[:20])  # a partial index file
    (run / data[4]).write_bytes((run / data[4]).read_bytes()[:10])  # a truncated data file
    problems, found = [], []
    watcher = Watcher(
        run, [LossAbove()], on_finding=found.append, on_problem=problems.append, poll_seconds=0.05
    )
    watcher.run()
    assert watcher.ended
    steps = [f.step for f in found]
    assert steps[0] == 1 and set(steps) <= {1, 6}  # step 4 is unreadable
    assert any(index[3].split("/")[-1] in p for p in problems), problems  # the partial index: skipped
    assert any(data[4].split("/")[-1] in p for p in problems), problems  # the truncated data: said


def test_gives_up_waiting_when_asked(tmp_path):
    with pytest.raises(WatchTimeout, match="no run was written"):
        Watcher(tmp_path / "never", [LossAbove()], poll_seconds=0.05, wait_timeout=0.3).run()


def test_a_training_that_died_gets_a_final_pass(tmp_path):
    run = tmp_path / "run"
    rec = record(run, [1, 50], close=False)
    rec.flush()
    found = []
    watcher = Watcher(run, [LossAbove()], on_finding=found.append, alive=lambda: False)
    watcher.run()  # no END marker: without `alive` it would wait forever
    assert watcher.ended and [f.step for f in found] == [1]
    rec.close()


def test_profiler_rules_run_live_before_the_first_step(tmp_path):
    """A job stuck in start-up has no tensor step yet: max_initialization_time must still fire
    while it waits (the process started longer ago than the tiny threshold)."""
    import torch

    import mldbg
    from mldbg.torch import Hook

    run = tmp_path / "run"
    hook = Hook(run, profiler_config=mldbg.ProfilerConfig(system_interval_ms=100))
    hook.register_module(torch.nn.Linear(2, 1))
    found = []
    watcher = Watcher(run, ["max_initialization_time:threshold=0.001"], poll_seconds=0.05,
                      on_finding=found.append)  # fmt: skip
    thread = in_thread(watcher.run)
    deadline = time.monotonic() + 10
    while not found and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert [f.rule for f in found] == ["max_initialization_time"]
        assert "none has come yet" in found[0].message
        assert not open_store(str(run)).list("workers/worker_0/index/")  # no step was recorded
    finally:
        hook.close()
        thread.join(10)
    assert not thread.is_alive()
