"""Live progress: a status line on a terminal (a real pseudo-terminal here), plain lines otherwise."""

import io
import os
import pty
import subprocess
import sys
import threading

from watch_helpers import in_thread, recorder, write_steps

from mldbg.watch.progress import Progress


def test_plain_lines_when_not_a_terminal():
    out = io.StringIO()
    p = Progress(out, interval=0.0)
    assert not p.interactive
    p.update(3, 4, 2, 1, 0)
    p.update(3, 4, 2, 1, 0)  # nothing changed: no new line
    p.note("[exploding_tensor] step 3: NaN")
    p.update(9, 10, 2, 1, 1)
    p.close()
    lines = out.getvalue().splitlines()
    assert (
        lines[0].startswith("mldbg watch: step 3 | 4 checked |")
        and "2 rules (1 skipped) | 0 findings" in lines[0]
    )
    assert lines[1] == "[exploding_tensor] step 3: NaN"
    assert "step 9 | 10 checked" in lines[2] and lines[2].endswith("1 finding")
    assert lines[3] == lines[2]  # the final line
    assert len(lines) == 4


def test_status_line_on_a_terminal(tmp_path):
    run = tmp_path / "run"
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "mldbg.cli.main", "watch", str(run), "--rule", "exploding_tensor"],
                            stdout=slave, stderr=slave, close_fds=True)  # fmt: skip
    os.close(slave)

    waiting = threading.Event()  # set once the watcher shows it waits for the run

    def train():
        assert waiting.wait(30), "the watcher never said it was waiting"
        rec = recorder(run)
        write_steps(rec, [1.0] * 10 + [float("nan")] + [1.0] * 19, sleep=0.05)
        rec.close()

    writer = in_thread(train)
    screen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal closed: the watcher ended
            break
        if not chunk:
            break
        screen += chunk
        if b"waiting for" in screen:
            waiting.set()
    os.close(master)
    assert proc.wait(timeout=30) == 1
    writer.join(5)
    text = screen.decode(errors="replace")
    assert "\r" in text  # the status line is redrawn in place
    assert "steps/s" in text and "mldbg watch: waiting for" in text
    assert "[exploding_tensor] step 10" in text
    assert "step 29 | 30 checked" in text  # the last status
