"""After a watcher restart, `mldbg watch` and `mldbg run --fail-on-finding` count the earlier
watcher's findings by their severity, as their own: a warning fails only with --strict. The
exit status comes from `counted_findings`, which both commands call."""

import json

import pytest
from watch_helpers import LossAbove, record, write_steps

from mldbg.cli.watch import counted_findings
from mldbg.store import open_store
from mldbg.watch.watcher import Watcher


class LossAboveWarning(LossAbove):
    """LossAbove as a machine-dependent finding (a warning, as the profiler rules are)."""

    severity = "warning"


def restarted(run, rule_cls):
    """A first watcher reports step 1 and dies; the run goes on; a second one finishes it."""
    rec = record(run, [1, 50, 1, 60], close=False)
    first = Watcher(run, [rule_cls()])
    first.cycle()  # then it dies: its place (with step 1's finding) is saved in the run
    assert [f.step for f in first.findings] == [1]
    write_steps(rec, [1, 70, 1])
    rec.close()
    again = Watcher(run, [rule_cls()])
    again.run()
    assert [f.step for f in again.findings] == [3, 5] and again.context.findings == 3
    return again


def test_warnings_an_earlier_watcher_reported_fail_only_with_strict(tmp_path):
    again = restarted(tmp_path / "run", LossAboveWarning)
    assert {f.severity for f in again.findings} == {"warning"}
    assert counted_findings(again, strict=False) == 0
    assert counted_findings(again, strict=True) == 3


def test_errors_an_earlier_watcher_reported_still_fail(tmp_path):
    again = restarted(tmp_path / "run", LossAbove)
    assert counted_findings(again, strict=False) == 3 and counted_findings(again, strict=True) == 3


def test_a_place_saved_before_severities_were_kept_counts_every_earlier_finding(tmp_path):
    """A watch state without the errors count (an older mldbg's): its findings all count."""
    run = tmp_path / "run"
    rec = record(run, [1, 50, 1, 60], close=False)
    Watcher(run, [LossAboveWarning()]).cycle()
    store = open_store(run)
    (key,) = [k for k in store.list("watch/") if k.endswith(".json")]
    state = json.loads(store.read(key))
    assert state["errors"] == 0 and state["findings"] == 1
    del state["errors"]
    store.write(key, [json.dumps(state).encode()])
    rec.close()
    again = Watcher(run, [LossAboveWarning()])
    again.run()
    assert [f.step for f in again.findings] == [3]
    assert counted_findings(again, strict=False) == 1  # the earlier one, severity unknown
    assert counted_findings(again, strict=True) == 2


@pytest.mark.parametrize("rule_cls", [LossAbove, LossAboveWarning])
def test_no_restart_counts_by_severity(tmp_path, rule_cls):
    record(tmp_path / "run", [1, 50, 1])
    watcher = Watcher(tmp_path / "run", [rule_cls()])
    watcher.run()
    assert counted_findings(watcher, strict=False) == (1 if rule_cls is LossAbove else 0)
