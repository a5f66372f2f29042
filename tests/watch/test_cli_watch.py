"""`mldbg watch` as a user runs it: its own process beside a real training process."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiosmtpd.controller as aiosmtpd
import prometheus_client.parser as parser

import mldbg
from mldbg.store import layout, open_store

SCRIPT = Path(__file__).with_name("train_tiny.py")
STOPPED = 86


def train(out, kind, steps, sleep):
    return subprocess.Popen([sys.executable, str(SCRIPT), str(out), kind, str(steps), str(sleep)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip


def watch(out, *args, env=None):
    return subprocess.Popen([sys.executable, "-m", "mldbg.cli.main", "watch", str(out), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})  # fmt: skip


class Lines:
    """Collects a pipe's lines in a thread, with the time each arrived."""

    def __init__(self, pipe):
        self.lines = []
        self.thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self.thread.start()

    def _read(self, pipe):
        for line in pipe:
            self.lines.append((time.monotonic(), line.rstrip("\n")))
        pipe.close()

    def text(self):
        return [line for _, line in self.lines]

    def wait_for(self, predicate, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for _, line in self.lines:
                if predicate(line):
                    return line
            time.sleep(0.02)
        raise AssertionError(f"no such line within {timeout}s in {self.text()}")


def finish(proc, out_lines, err_lines, timeout=60):
    code = proc.wait(timeout=timeout)
    out_lines.thread.join(5)
    err_lines.thread.join(5)
    return code


def assert_intact(out, steps):
    """Every step that was trained was recorded and every value reads back."""
    trial = mldbg.create_trial(out)
    assert trial.loaded_all_steps and trial.corrupt_files == []
    assert trial.steps() == list(range(steps))
    for name in trial.tensor_names():
        for step in trial.tensor(name).steps():
            trial.tensor(name).value(step)
    return trial


def test_stop_an_exploding_training_early(tmp_path):
    out = tmp_path / "run"
    watcher = watch(out, "--rule", "exploding_tensor", "--stop", "--json")  # before the run exists
    w_out, w_err = Lines(watcher.stdout), Lines(watcher.stderr)
    w_err.wait_for(lambda line: "waiting for" in line)  # the watcher is up, the run not there yet
    training = train(out, "explode", 400, 0.02)
    t_out = training.communicate(timeout=60)[0].splitlines()
    assert training.returncode == STOPPED
    assert finish(watcher, w_out, w_err) == 1  # a rule fired
    stopped = [line for line in t_out if line.startswith("stopped at")]
    assert stopped, t_out[-5:]
    last = int(stopped[0].split()[2].rstrip(":"))
    assert last < 100, f"stopped only at step {last}"  # of 400
    findings = [json.loads(line) for line in w_out.text()]
    assert findings[0]["rule"] == "exploding_tensor"
    assert set(findings[0]) >= {"rule", "step", "mode", "message", "tensors", "suggestion"}
    assert findings[0]["step"] <= 5, findings[0]
    trial = assert_intact(out, last + 1)
    assert trial.tensor("CrossEntropyLoss_output_0").steps() == list(range(last + 1))
    store = open_store(out)
    assert json.loads(store.read(layout.end_key("worker_0")))["stopped"] is True
    assert "exploding_tensor" in json.loads(store.read(layout.STOP_REQUEST))["reason"]


def test_a_healthy_training_runs_to_the_end_untouched(tmp_path):
    out = tmp_path / "run"
    training = train(out, "healthy", 60, 0.01)
    watcher = watch(out, "--rule", "exploding_tensor", "--rule", "loss_not_decreasing", "--stop")
    w_out, w_err = Lines(watcher.stdout), Lines(watcher.stderr)
    t_out = training.communicate(timeout=60)[0].splitlines()
    assert training.returncode == 0 and t_out[-1] == "done"
    assert finish(watcher, w_out, w_err) == 0, w_out.text() + w_err.text()
    assert w_out.text() == []
    assert not open_store(out).exists(layout.STOP_REQUEST)
    assert_intact(out, 60)
    assert "60 checked" in w_err.text()[-2]  # the final progress line
    assert "2 rules ran over 60 steps, none fired" in w_err.text()[-1]  # then what ran


def test_stop_a_stalled_training_early(tmp_path):
    out = tmp_path / "run"
    training = train(out, "stall", 400, 0.02)
    watcher = watch(out, "--rule", "loss_not_decreasing", "--stop")
    w_out, w_err = Lines(watcher.stdout), Lines(watcher.stderr)
    t_out = training.communicate(timeout=60)[0].splitlines()
    assert training.returncode == STOPPED, t_out[-3:]
    assert finish(watcher, w_out, w_err) == 1
    last = int(t_out[-1].split()[2].rstrip(":"))
    assert last < 200, f"stopped only at step {last} of 400"
    assert w_out.text()[0].startswith("[loss_not_decreasing] step")
    assert_intact(out, last + 1)


def test_email_webhook_and_metrics_from_the_command_line(tmp_path):
    import socket
    import urllib.request
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    mails, posts = [], []

    class Inbox:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802
            mails.append(envelope.content.decode())
            return "250 OK"

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            posts.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        smtp_port = s.getsockname()[1]
    smtp = aiosmtpd.Controller(Inbox(), hostname="127.0.0.1", port=smtp_port)
    smtp.start()
    http = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:
        out = tmp_path / "run"
        watcher = watch(
            out, "--rule", "exploding_tensor", "--rule", "loss_not_decreasing", "--email", "ml@example.com",
            "--webhook", f"http://127.0.0.1:{http.server_address[1]}/mldbg", "--slack", "--metrics-port", "0",
            "--metrics-file", str(tmp_path / "mldbg.prom"),
            env={"MLDBG_SMTP_HOST": "127.0.0.1", "MLDBG_SMTP_PORT": str(smtp_port)},
        )  # fmt: skip
        w_out, w_err = Lines(watcher.stdout), Lines(watcher.stderr)
        url = w_err.wait_for(lambda line: "metrics at http://" in line).split("metrics at ")[1]

        def scrape():
            text = urllib.request.urlopen(url, timeout=5).read().decode()
            return {(s.name, s.labels.get("rule")): s.value
                    for f in parser.text_string_to_metric_families(text) for s in f.samples}  # fmt: skip

        assert scrape()[("mldbg_rule_issues_found", "exploding_tensor")] == 0
        training = train(out, "explode", 150, 0.02)  # no --stop: it runs on after the finding
        w_out.wait_for(lambda line: line.startswith("[exploding_tensor]"))
        deadline = time.monotonic() + 5
        while scrape()[("mldbg_rule_issues_found", "exploding_tensor")] != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        live = scrape()
        assert live[("mldbg_rule_issues_found", "exploding_tensor")] == 1
        assert live[("mldbg_findings_total", "exploding_tensor")] == 1
        assert live[("mldbg_stop_requested", None)] == 0
        training.communicate(timeout=60)
        assert training.returncode == 0
        assert finish(watcher, w_out, w_err) == 1
    finally:
        smtp.stop()
        http.shutdown()
        http.server_close()
    assert len(mails) == 1 and "exploding_tensor" in mails[0]  # once per rule, however often it fires
    assert len(posts) == 1 and "exploding_tensor" in posts[0]["text"] and "blocks" in posts[0]
    final = (tmp_path / "mldbg.prom").read_text()
    assert 'mldbg_training_ended{run="' in final and "} 1" in final.split("mldbg_training_ended")[-1]


def test_a_restarted_watch_command_stays_quiet_about_old_findings(tmp_path):
    from watch_helpers import record

    run = tmp_path / "run"
    record(run, [1.0, float("nan"), 1.0])
    first = subprocess.run([sys.executable, "-m", "mldbg.cli.main", "watch", str(run), "--rule", "exploding_tensor"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert first.returncode == 1 and first.stdout.startswith("[exploding_tensor] step 1")
    again = subprocess.run([sys.executable, "-m", "mldbg.cli.main", "watch", str(run), "--rule", "exploding_tensor"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert again.returncode == 1  # a rule fired in this run
    assert again.stdout == "" and "resuming after step 2" in again.stderr


def test_config_file_with_rules_and_actions(tmp_path):
    from watch_helpers import record

    run, log = tmp_path / "run", tmp_path / "found.jsonl"
    record(run, [1.0, 1.0, float("inf")])
    config = tmp_path / "watch.yaml"
    config.write_text(
        f"rules:\n  - exploding_tensor: {{only_nan: false}}\nactions:\n  - {{type: log, path: '{log}'}}\n"
    )
    done = subprocess.run([sys.executable, "-m", "mldbg.cli.main", "watch", str(run), "--config", str(config)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1, done.stderr
    (row,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert row["rule"] == "exploding_tensor" and row["step"] == 2
    bad = subprocess.run([sys.executable, "-m", "mldbg.cli.main", "watch", str(run), "--rule", "no_such_rule"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "unknown rule 'no_such_rule'" in bad.stderr


def test_sigterm_saves_the_place_and_exits(tmp_path):
    import signal

    proc = watch(tmp_path / "not-yet")
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    err.wait_for(lambda line: "waiting for" in line)
    proc.send_signal(signal.SIGTERM)
    assert finish(proc, out, err, timeout=10) == 130


# --stop --signal signals only the run's own process (issue 16, item 5) ----------------------
STUBBORN = """
import sys, time
from pathlib import Path
import torch
from torch import nn
import mldbg
from mldbg.torch import Hook

torch.set_num_threads(1)
torch.manual_seed(0)
out, go = sys.argv[1], Path(sys.argv[2])
x, y = torch.randn(64, 8), torch.randint(0, 2, (64,))
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
loss_fn = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=1e12)  # explodes within a few steps
hook = Hook(out, save_config=mldbg.SaveConfig(save_interval=1), flush_seconds=0.05)
hook.register_module(model)
hook.register_loss(loss_fn)
print("ready", flush=True)
while not go.exists():
    time.sleep(0.02)
for step in range(1500):
    try:  # a script that swallows every exception: only a signal stops it
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    except Exception:
        pass
    time.sleep(0.02)
print("done", flush=True)
"""


def stubborn_training(out, go):
    proc = subprocess.Popen(
        [sys.executable, "-c", STUBBORN, str(out), str(go)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_stop_signal_reaches_the_run_s_own_training(tmp_path):
    out, go = tmp_path / "run", tmp_path / "go"
    training = stubborn_training(out, go)
    watcher = watch(out, "--rule", "exploding_tensor", "--stop", "--signal", "SIGTERM", "--quiet",
                    "--pid", str(training.pid))  # fmt: skip
    try:
        go.touch()
        assert training.wait(timeout=60) == -signal.SIGTERM  # long before its 1500 steps
        assert watcher.wait(timeout=60) == 1
    finally:
        for proc in (training, watcher):
            proc.kill()
            proc.communicate()


def test_stop_signal_refuses_a_process_the_meta_was_edited_to_name(tmp_path):
    out, go = tmp_path / "run", tmp_path / "go"
    training = stubborn_training(out, go)
    victim = subprocess.Popen(["sleep", "60"])
    key = layout.meta_key("worker_0")
    meta = json.loads(open_store(out).read(key))
    assert meta["pid"] == training.pid and meta["process"]
    open_store(out).write(key, [json.dumps({**meta, "pid": victim.pid}).encode()])
    watcher = watch(out, "--rule", "exploding_tensor", "--stop", "--signal", "SIGTERM", "--quiet")
    w_out, w_err = Lines(watcher.stdout), Lines(watcher.stderr)
    try:
        go.touch()
        w_err.wait_for(lambda line: f"did not signal pid {victim.pid}" in line, timeout=60)
        assert victim.poll() is None  # not signalled
        assert open_store(out).exists(layout.STOP_REQUEST)  # the request went out all the same
        # the training's recording stopped at the request (END written, stopped=True)
        deadline = time.monotonic() + 30
        while not open_store(out).exists(layout.end_key("worker_0")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert json.loads(open_store(out).read(layout.end_key("worker_0")))["stopped"] is True
        assert victim.poll() is None
    finally:
        for proc in (training, victim, watcher):
            proc.kill()
        training.communicate()
        victim.wait()
        finish(watcher, w_out, w_err)


def test_metrics_on_a_non_loopback_address_print_their_token(tmp_path):
    import re

    from watch_helpers import record

    record(tmp_path / "run", [1.0, 0.5, 0.25])
    proc = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "watch", str(tmp_path / "run"), "--rule", "exploding_tensor",
         "--metrics-port", "0", "--metrics-host", "0.0.0.0", "--quiet"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"metrics at http://127\.0\.0\.1:\d+/metrics\?token=[\w-]{16,}", proc.stderr), (
        proc.stderr
    )
    short = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "watch", str(tmp_path / "run"), "--metrics-port", "0",
         "--metrics-token", "short"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert short.returncode == 2 and "at least 8 characters" in short.stderr
