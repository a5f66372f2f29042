"""Rule status (`mldbg status RUN`, `mldbg.rule_status`): what the watcher leaves beside the
run, read while a real `mldbg watch` process checks a run being written, and after."""

import json
import subprocess
import sys
import time

import numpy as np
from tests.store.conftest import s3_env, s3_server, s3_url  # noqa: F401 (the S3 fixtures)
from tests.watch.watch_helpers import LossAbove, recorder, write_steps

import mldbg
from mldbg.rules.base import Rule
from mldbg.watch import Watcher


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", *args], capture_output=True, text=True, timeout=60
    )


def wait_status(out, predicate, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        by_rule = {s.rule: s for s in mldbg.rule_status(out)}
        if by_rule and predicate(by_rule):
            return by_rule
        time.sleep(0.1)
    raise AssertionError(f"status not reached within {timeout}s: {mldbg.rule_status(out)}")


def test_status_while_a_watch_process_runs_and_after(tmp_path):
    out = str(tmp_path / "run")
    assert mldbg.rule_status(str(tmp_path)) == []  # no watcher yet
    watcher = subprocess.Popen(
        [sys.executable, "-m", "mldbg.cli.main", "watch", out, "-q", "--json", "--poll", "0.05",
         "--rule", "exploding_tensor", "--rule", "dead_relu", "--rule", "vanishing_gradient"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        rec = recorder(out)
        write_steps(rec, [1.0, 0.9, 0.8, 0.7], flush=True)
        running = wait_status(out, lambda s: s["exploding_tensor"].status == "in_progress")
        assert running["dead_relu"].status == "waiting_for_data"
        assert "needs the relu_activations collection" in running["dead_relu"].detail
        assert running["vanishing_gradient"].status == "waiting_for_data"
        assert "gradients" in running["vanishing_gradient"].detail
        assert not running["exploding_tensor"].finished

        res = cli("status", out)
        assert res.returncode == 0, res.stderr
        assert "(watching" in res.stdout and "exploding_tensor" in res.stdout and "in progress" in res.stdout
        assert "waiting for data: needs the relu_activations collection" in res.stdout

        write_steps(rec, [float("nan"), 0.5, 0.4], flush=True)
        fired = wait_status(out, lambda s: s["exploding_tensor"].status == "issues_found")
        first = fired["exploding_tensor"].first_finding
        assert first["rule"] == "exploding_tensor" and first["step"] == 4 and "NaN" in first["message"]
        res = cli("status", out)
        assert res.returncode == 1  # a rule found issues
        assert "issues found at step 4" in res.stdout
        rec.close()
        assert watcher.wait(timeout=60) == 1  # a rule fired
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        watcher.stdout.close()
        watcher.stderr.close()
    done = {s.rule: s for s in mldbg.rule_status(out)}
    assert done["exploding_tensor"].status == "issues_found" and done["exploding_tensor"].finished
    assert done["dead_relu"].status == "skipped" and "did not save" in done["dead_relu"].detail
    assert done["vanishing_gradient"].status == "skipped"
    res = cli("status", out, "--json")
    assert res.returncode == 1
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert {r["rule"]: r["status"] for r in rows} == {
        "exploding_tensor": "issues_found", "dead_relu": "skipped", "vanishing_gradient": "skipped"
    }  # fmt: skip
    assert all(r["finished"] for r in rows)


class Broken(Rule):
    """A rule that fails at step 2 (a bug in a custom rule)."""

    needs = ("losses",)

    def check(self, trial, step):
        if step == 2:
            raise ZeroDivisionError("custom rule bug")
        return None


def test_no_issues_found_and_error(tmp_path):
    out = str(tmp_path / "run")
    rec = recorder(out)
    write_steps(rec, np.linspace(1.0, 0.5, 6).tolist())
    rec.close()
    Watcher(out, rules=[LossAbove(limit=100.0), Broken()], poll_seconds=0.01).run()
    by_rule = {s.rule: s for s in mldbg.rule_status(out)}
    assert by_rule["loss_above"].status == "no_issues_found" and by_rule["loss_above"].first_finding is None
    assert (
        by_rule["broken"].status == "error"
        and "ZeroDivisionError: custom rule bug" in by_rule["broken"].detail
    )
    assert str(by_rule["broken"]).startswith("broken: error: ZeroDivisionError")
    res = cli("status", out)
    assert res.returncode == 0 and "loss_above  no issues found" in res.stdout


def test_status_of_a_missing_run_is_a_usage_error(tmp_path):
    res = cli("status", str(tmp_path / "nope"))
    assert res.returncode == 2 and res.stderr.startswith("mldbg status: error: no run at")
    res = cli("status", str(tmp_path))  # an empty folder: no run, no watcher's state (issue 15)
    assert res.returncode == 2 and "nothing was recorded there" in res.stderr


def test_status_of_a_run_on_s3(s3_url):  # noqa: F811 (the fixture imported above)
    """The watcher saves the statuses in the run's own bucket; `mldbg status s3://...` reads them."""
    rec = recorder(s3_url)
    write_steps(rec, [1.0, float("nan"), 0.5])
    rec.close()
    res = cli("watch", s3_url, "-q", "--rule", "exploding_tensor", "--rule", "dead_relu")
    assert res.returncode == 1, res.stderr
    by_rule = {s.rule: s for s in mldbg.rule_status(s3_url)}
    assert by_rule["exploding_tensor"].status == "issues_found"
    assert by_rule["exploding_tensor"].first_finding["step"] == 1
    assert by_rule["dead_relu"].status == "skipped" and by_rule["dead_relu"].finished
    res = cli("status", s3_url)
    assert res.returncode == 1 and "exploding_tensor  issues found at step 1" in res.stdout


def test_a_watcher_with_its_own_state_file(tmp_path):
    out = str(tmp_path / "run")
    rec = recorder(out)
    write_steps(rec, [1.0, 2.0, 300.0])
    rec.close()
    state = tmp_path / "elsewhere" / "watch-state.json"
    Watcher(out, rules=[LossAbove(limit=100.0)], state=state, poll_seconds=0.01).run()
    assert mldbg.rule_status(out) == []  # not beside the run
    (status,) = mldbg.rule_status(out, [state])
    assert status.status == "issues_found" and status.first_finding["step"] == 2
    res = cli("status", out, "--state", str(state))
    assert res.returncode == 1 and "loss_above  issues found at step 2" in res.stdout
    res = cli("status", out, "--state", str(tmp_path / "nope.json"))
    assert res.returncode == 2 and "nope.json" in res.stderr
