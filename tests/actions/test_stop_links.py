"""A stop through a linked meta.json (issue 28, item 3): run B whose
`workers/worker_0/meta.json` is a symbolic or hard link to live run A's. Before the fix
`StopTraining(signal=...)` on B signalled A's training (2 of 2): the identity and the
open-file proof both followed the link. The stop request is still written into B."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from action_helpers import finding

from mldbg.actions import Context, StopTraining
from mldbg.store import layout, open_store

TRAINING = textwrap.dedent("""
    import sys, time
    from mldbg.record.recorder import Recorder
    rec = Recorder(sys.argv[1])
    print("ready", flush=True)
    time.sleep(60)
""")


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_a_linked_meta_does_not_get_another_run_s_training_signalled(tmp_path, caplog, link):
    a, b = tmp_path / "a", tmp_path / "b"
    training = subprocess.Popen([sys.executable, "-c", TRAINING, str(a)], stdout=subprocess.PIPE, text=True)
    try:
        assert training.stdout.readline().strip() == "ready"
        meta = b / layout.meta_key("worker_0")
        meta.parent.mkdir(parents=True)
        (os.symlink if link == "symlink" else os.link)(a / layout.meta_key("worker_0"), meta)
        with caplog.at_level("WARNING", logger="mldbg"):
            StopTraining(signal="SIGTERM")([finding()], Context(run=str(b), store=open_store(b)))
        with pytest.raises(subprocess.TimeoutExpired):
            training.wait(timeout=1.0)  # A's training lives on
        assert open_store(b).exists(layout.STOP_REQUEST)  # B's stop request is written
        assert not open_store(a).exists(layout.STOP_REQUEST)
        if link == "hardlink":  # a symbolic link is not even read (tests/store/test_links.py)
            assert "is a link" in caplog.text
    finally:
        training.kill()
        training.wait()
        training.stdout.close()
