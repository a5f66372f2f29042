"""A watcher killed at the worst moment (right as a webhook delivery arrives) and restarted
delivers each finding exactly once: none twice, none lost (issue 16, item 7).

Real processes throughout: a run written step by step by a real Recorder, `mldbg watch` as a
subprocess, a real HTTP server counting what it receives, SIGKILL."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from watch_helpers import in_thread, recorder

import mldbg

FIRE_STEPS = [1, 2, 4, 5, 6, 8, 9, 11, 12, 13]
STEPS = 16
RULE = "all_zero"  # with patience=1: fires once per tensor, at the first step it is all zeros


def write(rec, steps, sleep=0.0):
    """Steps `steps`; at each of FIRE_STEPS a new all-zero weight appears (one finding each)."""
    for s in steps:
        rec.start_step(mldbg.Mode.TRAIN)
        rec.save_tensor("loss", np.float32(1.0 / (s + 1)), ("losses",))
        rec.save_tensor("fc.weight", np.full((2, 2), s + 1.0, dtype=np.float32), ("weights",))
        if s in FIRE_STEPS:
            rec.save_tensor(f"layer{s}.weight", np.zeros((2, 2), dtype=np.float32), ("weights",))
        rec.end_step()
        time.sleep(sleep)


class KillingSink:
    """Records every finding POSTed; at the deliveries numbered in `kills` it SIGKILLs the
    watcher, before answering ("before") or just after the answer went out ("after")."""

    def __init__(self, kills: dict[int, str]):
        self.findings: list[tuple[str, int]] = []
        self.posts = 0
        self.kills = dict(kills)
        self.watcher: subprocess.Popen | None = None
        self.killed = threading.Event()
        self.kinds: list[str] = []  # "before" or "after", in the order the kills came
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                sink.findings += [(f["rule"], f["step"]) for f in body["findings"]]
                sink.posts += 1
                when = sink.kills.pop(sink.posts, None)
                if when:
                    sink.kinds.append(when)
                if when == "before":
                    sink.kill()
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")
                self.wfile.flush()
                if when == "after":
                    sink.kill()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kill(self):
        os.kill(self.watcher.pid, signal.SIGKILL)
        self.killed.set()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def start_watcher(run, sink):
    return subprocess.Popen(
        [sys.executable, "-m", "mldbg.cli.main", "watch", str(run), "--rule", f"{RULE}:patience=1",
         "--webhook", sink.url, "--every-finding", "--json", "--quiet", "--poll", "0.05"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.parametrize(
    "kills",
    [
        pytest.param({1: "before", 3: "after"}, id="first-before-answer-then-after"),
        pytest.param({1: "after", 2: "before", 3: "before"}, id="three-kills-in-a-row"),
        pytest.param({2: "after"}, id="second-after-answer"),
    ],
)
def test_a_watcher_killed_right_after_a_delivery_delivers_each_finding_once(tmp_path, kills):
    run = tmp_path / "run"
    sink = KillingSink(kills)
    rec = recorder(run)

    def train():
        write(rec, range(STEPS), sleep=0.3)
        rec.close()  # the run ends: the last watcher makes its final pass and exits

    writer = in_thread(train)
    outputs, errors, kills_seen = [], [], 0
    try:
        sink.watcher = start_watcher(run, sink)
        while True:
            code = sink.watcher.poll()
            if code is None:
                time.sleep(0.05)
                continue
            out, err = sink.watcher.communicate(timeout=30)
            outputs.append(out)
            errors.append(err)
            if code != -signal.SIGKILL:
                break
            assert sink.killed.is_set()
            sink.killed.clear()
            kills_seen += 1
            sink.watcher = start_watcher(run, sink)  # at once, as a supervisor would
        assert code == 1, err  # findings were reported
    finally:
        if sink.watcher.poll() is None:
            sink.watcher.kill()
            sink.watcher.communicate()
        writer.join(30)
        sink.close()
    assert kills_seen == len(kills), (
        f"the kill points were not all reached: {sink.findings} {errors} {outputs}"
    )
    expected = [(RULE, s) for s in FIRE_STEPS]
    assert sorted(sink.findings) == expected  # each finding delivered exactly once, none lost
    printed = [(d["rule"], d["step"]) for out in outputs for d in map(json.loads, out.splitlines())]
    assert sorted(printed) == expected  # and printed exactly once across the watchers
    for kind, err in zip(sink.kinds, errors[1:], strict=True):
        if kind == "before":  # the delivery was cut short: the next watcher names it
            assert "ended while acting on" in err, err
    # the journal holds nothing once the saved place covers everything
    assert list((run / "watch").glob("*.journal")) == []


def test_a_finding_journaled_but_cut_short_is_named_and_not_sent_again(tmp_path):
    """At most once: a kill before the webhook's answer leaves the delivery unconfirmed; the
    restarted watcher says which finding that was, and does not send it again."""
    run = tmp_path / "run"
    sink = KillingSink({1: "before"})
    rec = recorder(run)
    write(rec, [0, 1, 3])  # a finding at step 1 only
    rec.flush()
    try:
        sink.watcher = start_watcher(run, sink)
        assert sink.killed.wait(timeout=60)
        sink.watcher.communicate(timeout=30)
        write(rec, [7])
        rec.close()
        sink.watcher = start_watcher(run, sink)
        out, err = sink.watcher.communicate(timeout=60)
    finally:
        sink.close()
    assert sink.findings == [(RULE, 1)]
    assert out == ""  # nothing new to print
    assert "ended while acting on 1 finding(s)" in err and "step 1" in err
    assert sink.watcher.returncode == 1  # the finding still counts for the exit code


class Dies(BaseException):  # not an Exception: it gets past the watcher, as a kill would
    pass


class CountThenDie:
    """Builds a real action that counts what it delivers and raises `Dies` after its first
    delivery, before the watcher can save its place."""

    @staticmethod
    def make(delivered, die):
        from mldbg.actions import Action

        class Deliver(Action):
            def act(self, findings, context):
                delivered.extend(f.step for f in findings)
                if die:
                    raise Dies

        return Deliver(once_per_rule=False)


@pytest.mark.parametrize("where", ["local", "memory"])
def test_a_watcher_dying_in_a_delivery_does_not_repeat_it_on_any_store(tmp_path, where):
    from watch_helpers import LossAbove, write_steps

    from mldbg.watch.watcher import Watcher

    run = tmp_path / "run" if where == "local" else f"memory://restarts-{tmp_path.name}"
    rec = recorder(run)
    write_steps(rec, [1, 50, 1, 60, 1])
    rec.flush()
    delivered = []
    first = Watcher(run, [LossAbove()], [CountThenDie.make(delivered, die=True)])
    with pytest.raises(Dies):
        first.cycle()
    assert delivered == [1, 3]  # one batch, then the watcher died
    write_steps(rec, [70, 1])
    rec.close()
    notes = []
    second = Watcher(run, [LossAbove()], [CountThenDie.make(delivered, die=False)], on_problem=notes.append)
    second.run()
    assert delivered == [1, 3, 5]  # 1 and 3 not again, 5 once
    assert any("ended while acting on 2 finding(s)" in n for n in notes)
    assert second.context.findings == 3


def test_a_damaged_journal_is_read_around(tmp_path):
    from watch_helpers import LossAbove, write_steps

    from mldbg.store import open_store
    from mldbg.watch.state import run_id
    from mldbg.watch.watcher import Watcher

    run = tmp_path / "run"
    rec = recorder(run)
    write_steps(rec, [1, 50, 1, 60, 1])
    rec.close()
    probe = Watcher(run, [LossAbove()])
    journal = run / f"watch/{probe.ident}.json.journal"
    journal.parent.mkdir(parents=True, exist_ok=True)
    ident = json.dumps(run_id(open_store(run)))
    journal.write_bytes(
        f'{{"run": {ident}, "id": 3, "finding": []}}\n'.encode()
        + b"\xff\xfe not json\n[1, 2]\n"
        + f'{{"run": {ident}, "id": "x", "finding": {{"step": "1"}}, "keys": {{}}}}\n'.encode()
        + f'{{"run": {ident}, "id": "y", "finding": {{"step": 1}}, "keys": [1]}}\n'.encode()
        + f'{{"run": {ident}, "acted": "all"}}\n{{"run": {ident}, "id": "half'.encode()
    )
    found = Watcher(run, [LossAbove()]).run()
    assert [f.step for f in found] == [1, 3]
