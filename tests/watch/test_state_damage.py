"""A damaged saved place (not JSON, a field of the wrong type, deep nesting, a folder) is
ignored with a warning naming it; the restarted watcher never fails on it."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
from tests.watch.watch_helpers import LossAbove, record

from mldbg.watch import Watcher

DAMAGES = {
    "not JSON": b'{"last_step": 3',
    "a list": b"[1, 2]",
    "last_step a string": json.dumps({"last_step": "7", "finished": True}).encode(),
    "finished a number": json.dumps({"last_step": 1, "finished": 1}).encode(),
    "actions not objects": json.dumps({"last_step": 1, "actions": {"x": 5}}).encode(),
    "rules not objects": json.dumps({"last_step": 1, "rules": [3]}).encode(),
    "deep nesting": b"[" * 100_000,
    "a folder": None,
}


@pytest.mark.parametrize("damage", list(DAMAGES), ids=list(DAMAGES))
def test_a_damaged_saved_place_is_ignored_with_a_warning(tmp_path, caplog, damage):
    run = tmp_path / "run"
    record(run, [20.0, 1.0, 30.0])
    assert len(Watcher(run, [LossAbove()]).run()) == 2
    (state,) = [p for p in (run / "watch").iterdir() if p.suffix == ".json"]
    if DAMAGES[damage] is None:
        state.unlink()
        state.mkdir()
    else:
        state.write_bytes(DAMAGES[damage])
    with caplog.at_level(logging.WARNING, logger="mldbg"):
        again = Watcher(run, [LossAbove()]).run()
    assert any(
        "unreadable watch state" in r.getMessage() and str(state) in r.getMessage() for r in caplog.records
    )
    assert len(again) == 2  # without its place it reports the run again, and does not fail
    if state.is_dir():
        shutil.rmtree(state)
