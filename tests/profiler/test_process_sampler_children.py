"""The profiler's process sampler counts as data loaders only the children that work for the
training: started after it, of the same Python, not multiprocessing's own helpers. A test runner
or a notebook whose process already ran a pool has a resource tracker and a fork server for
good; the full test suite had five such children, and `dataloader` called a healthy run
oversubscribed."""

from __future__ import annotations

import subprocess
import sys
import time

from mldbg.profiler.system import ProcessSampler


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])


def test_children_from_before_and_multiprocessing_helpers_are_not_loaders():
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()  # a helper: the resource tracker
    before = _sleeper()  # started before the profiler
    time.sleep(1.5)  # create times are whole-ish seconds apart from the profiler's start
    try:
        sampler = ProcessSampler(children_seconds=0.0)
        time.sleep(0.05)
        assert sampler.sample()[4] == 0  # neither counts
        after = _sleeper()  # a worker started while training: it counts
        try:
            time.sleep(0.3)
            sampler._next_list = 0.0
            assert sampler.sample()[4] == 1
        finally:
            after.kill()
            after.wait()
    finally:
        before.kill()
        before.wait()
