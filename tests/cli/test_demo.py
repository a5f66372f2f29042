"""`mldbg demo`, the embedded default job: trains on data shipped in scikit-learn, with rules live."""

import os
import re
import subprocess
import sys

import mldbg


def test_demo_trains_records_and_catches_the_broken_run(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "demo", "--out", str(tmp_path), "--epochs", "8"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    out = res.stdout + res.stderr
    assert "rules on the healthy run: no finding" in out
    assert "mldbg stopped it after" in out
    assert "[dead_relu]" in out
    # the findings of the broken run add up to one cause, said first (issue 26)
    assert "[learning_rate_too_high] the learning rate is too high" in out
    assert "(diagnosis: learning_rate_too_high" in out  # the live stop named it too
    healthy = mldbg.create_trial(tmp_path / "healthy")
    assert healthy.loaded_all_steps and len(healthy.steps(mldbg.Mode.TRAIN)) > 20
    broken = mldbg.create_trial(tmp_path / "broken")
    assert broken.loaded_all_steps
    # stopped before the planned end (100 * 8 epochs of 43 training steps). The watcher starts in
    # ~1 s on an idle machine, 19 s or more on a loaded one (a CI run once ended all 34,400 steps
    # before it came): the run waits for it after its first epoch (the test below)
    stopped, planned = map(int, re.search(r"stopped it after (\d+) of (\d+) planned", out).groups())
    assert planned == 100 * 8 * 43 and stopped < planned
    assert max(broken.steps(mldbg.Mode.TRAIN)) < planned
    assert mldbg.check(tmp_path / "healthy") == []
    assert {f.rule for f in mldbg.check(tmp_path / "broken")} >= {"dead_relu"}


def test_the_broken_demo_run_is_stopped_when_its_watcher_starts_late(tmp_path):
    """The demo's steps take a millisecond: a watcher that starts later than the whole run lasts
    (a loaded CI machine) would find the bug after the end. The run waits for it after its first
    epoch; here the watcher's interpreter is held back 8 s at its start, longer than the 5 epochs
    (215 steps) take to train."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(
        "import time\n"
        "if b'mldbg.watch.inprocess' in open('/proc/self/cmdline', 'rb').read():\n"
        "    time.sleep(8)\n"
    )
    code = (
        "from pathlib import Path; from mldbg.frameworks.torch_demo import train_digits\n"
        f"r = train_digits(Path({str(tmp_path / 'broken')!r}), lr=5.0, epochs=5, stop_on_finding=True)\n"
        "print('stopped', r.stopped, r.steps)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), *sys.path])}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    stopped, steps = re.search(r"stopped (\w+) (\d+)", res.stdout).groups()
    assert stopped == "True" and int(steps) < 5 * 43, res.stdout + res.stderr
