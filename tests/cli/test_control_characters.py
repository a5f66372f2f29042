"""Terminal escapes in names (issue 28, item 8): a crafted index can hold any tensor or
collection name; `mldbg ls` printed an OSC 52 sequence raw (it writes the clipboard in xterm,
kitty, iTerm2, tmux). Every line the CLI prints now has its control characters escaped, and the
recorder refuses collection names with control characters as it refuses such tensor names."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import numpy as np
import pytest

import mldbg
from mldbg.errors import InvalidConfig
from mldbg.record.recorder import Recorder
from mldbg.store import layout
from mldbg.store.format import reseal_index

OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"  # "rm -rf ~" into the clipboard
BIDI = "\u202e"


def _crafted_run(run):
    rec = Recorder(run, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"])
    for step in range(3):
        rec.start_step()
        rec.save_tensor("x", np.full(3, float(step), np.float32), ("mine",))
        rec.end_step()
    rec.close()
    path = run / layout.index_key("worker_0", 1)
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    meta = json.loads(header["__metadata__"]["mldbg"])
    meta["names"] = [f"x{OSC52}{BIDI}" if name == "x" else name for name in meta["names"]]
    meta["collections"] = {
        (f"mine{OSC52}" if c == "mine" else c): ids for c, ids in meta["collections"].items()
    }
    header["__metadata__"]["mldbg"] = json.dumps(meta)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(reseal_index(struct.pack("<Q", len(text)) + text + blob[8 + n :]))


@pytest.mark.parametrize("command", [["ls"], ["check"], ["show", "x"]])
def test_names_from_a_run_print_with_control_characters_escaped(tmp_path, command):
    run = tmp_path / "run"
    _crafted_run(run)
    trial = mldbg.create_trial(str(run))
    assert f"x{OSC52}{BIDI}" in trial.tensor_names()  # the reader keeps names as written
    args = [command[0], str(run), *command[1:]]
    done = subprocess.run([sys.executable, "-m", "mldbg.cli.main", *args], capture_output=True, timeout=120)
    out = done.stdout + done.stderr
    assert b"\x1b" not in out and b"\x07" not in out and BIDI.encode() not in out, out
    if command == ["ls"]:
        assert b"\\x1b]52" in out  # shown, as text


def test_the_recorder_refuses_control_characters_in_collection_names(tmp_path):
    rec = Recorder(tmp_path / "run", save_config=mldbg.SaveConfig(save_interval=1))
    try:
        rec.start_step()
        with pytest.raises(InvalidConfig, match="collection name .* control character"):
            rec.save_tensor("x", np.zeros(2, np.float32), (f"c{OSC52}",))
    finally:
        rec.close()
