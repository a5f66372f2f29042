"""How `make test` shares the suite out between pytest-xdist's two workers (`-n 2 --dist
loadfile`): each test file runs whole in one worker, so that a module-scoped training is made
once, not once a worker; the test files of one group below, which share a costly
session-scoped recording, run in one worker together, so that it is made once too; and the
test files of one folder below run in one worker, one after the other. The files of SOLO
time the machine itself (training steps against a bound, CPU use, step-time outliers): they run
last, in one worker, while the other waits, as they run in a suite of one process."""

from __future__ import annotations

from typing import Any

import pytest

# test files that read the same session-scoped recordings (fixtures of tests/rules/conftest.py)
SHARED = {
    "tests/rules/test_columns.py": "tests/rules/test_rank_divergence.py",  # ddp_jobs: gloo jobs
    "tests/rules/test_diagnosis.py": "tests/rules/test_default_hook.py",  # defect_table_runs
}

# each starts a Dask LocalCluster: one at a time (mldbg's own put their dashboard on a free
# port, but a test's cluster of its own may not, and a second on port 8787 warns: an error here)
ONE_WORKER_FOLDERS = ("tests/scale/",)

# they time real training steps on this machine: alone, as in one process
SOLO = frozenset({
    "tests/profiler/test_profiler_monitor.py",  # CPU use while training
    "tests/profiler/test_profiler_rules_cpu.py",  # step_outlier on injected 0.12 s stalls
    "tests/cli/test_exit_codes_strict.py",  # step_outlier on injected 0.1 s stalls
    "tests/store/test_s3_fault.py",  # no step waits on the bucket beyond a bound
    "tests/store/test_s3_start_down.py",
    "tests/store/test_s3_spill_limits.py",
    "tests/record/test_hung_store.py",
    "tests/record/test_full_disk.py",
    "tests/record/test_flapping_store.py",
    "tests/watch/test_restarts.py",  # a restarted watcher must catch a run of 16 x 0.3 s steps
    "tests/dashboard/test_live_events.py",  # the dashboard follows a run written at a pace
})  # fmt: skip


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: absent without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None  # another way of sharing out, asked for by name: xdist's own
    from xdist.scheduler import LoadFileScheduling

    class FileGroups(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            folder = next((f for f in ONE_WORKER_FOLDERS if path.startswith(f)), None)
            return folder or SHARED.get(path, path)

        def _assign_work_unit(self, node: Any) -> None:
            """The next unit that is not SOLO; SOLO ones when only they are left."""
            scope = next((s for s in self.workqueue if s not in SOLO), None)
            if scope is None:
                if any(self._pending_of(w) for n, w in self.assigned_work.items() if n is not node):
                    return  # another worker has work: a SOLO unit waits until it is done
                scope = next(iter(self.workqueue))
            work_unit = self.workqueue.pop(scope)
            self.assigned_work.setdefault(node, {})[scope] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(i) for i, done in work_unit.items() if not done])

        def _reschedule(self, node: Any) -> None:
            if node.shutting_down or not self.workqueue or any(s not in SOLO for s in self.workqueue):
                super()._reschedule(node)
                return
            # only SOLO units are left: the other workers finish their last test and stop (a worker
            # holds its last test until it gets more work or is stopped), then this one runs them all
            others = [n for n in self.assigned_work if n is not node]
            if any(self._pending_of(self.assigned_work[n]) > 1 for n in others):
                return  # still at work
            for other in others:
                if not other.shutting_down:
                    other.shutdown()
            if any(self._pending_of(self.assigned_work[n]) for n in others):
                return  # their last tests run; this one is asked again when one completes
            while self.workqueue:
                self._assign_work_unit(node)

        def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
            super().mark_test_complete(node, item_index, duration)
            for other in list(self.assigned_work):  # a worker waiting for the SOLO units
                if other is not node:
                    self._reschedule(other)

    return FileGroups(config, log)


@pytest.fixture(autouse=True)
def _no_torch_mode_left_behind():
    """No test leaves a torch function mode on the stack, nor the `torch.compile` stance
    changed: the hook's modes (attention capture, evaluation-loss window) and stance
    (compiled statistics steps) are the process's while on, and one left behind changed every
    later test of the worker (a compiled model traced under a stale capture). Taken off after
    the check, so one leak fails one test, not the rest."""
    yield
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return
    left = torch.overrides._get_current_function_mode_stack()
    while torch._C._len_torch_function_stack():
        torch.overrides._pop_mode()
    dynamo = sys.modules.get("torch._dynamo.eval_frame")
    stance = dynamo._stance.stance if dynamo is not None else "default"
    if stance != "default":
        torch.compiler.set_stance("default")
    assert not left and stance == "default", f"left behind: modes {left}, torch.compile stance {stance!r}"
