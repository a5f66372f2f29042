"""stalled_training: needs a live run; a finished run is never stalled."""

from __future__ import annotations

import mldbg


def test_quiet_on_finished_run(run):
    assert mldbg.check(run("healthy_relu_sgd"), rules=["stalled_training:threshold=0"]) == []


# firing on a live, stalled run is covered by tests/rules/test_runner.py::test_live_run_is_checked_as_it_grows
