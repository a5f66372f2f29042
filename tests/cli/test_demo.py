"""`mldbg demo`, the embedded default job: trains on data shipped in scikit-learn, with rules live."""

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
    # stopped before the planned end (100 * 8 epochs of 43 training steps). How long before depends
    # on the machine: the watcher process starts, reads and asks for the stop in ~1 s on an idle
    # one (~250-400 steps of this tiny model), several times that on a loaded machine (a run of
    # 10 * 3 epochs once ended before the stop came on a loaded CI machine, 10 * 8 on a 2-core one
    # running three other jobs: the watcher took 19 s there)
    stopped, planned = map(int, re.search(r"stopped it after (\d+) of (\d+) planned", out).groups())
    assert planned == 100 * 8 * 43 and stopped < planned
    assert max(broken.steps(mldbg.Mode.TRAIN)) < planned
    assert mldbg.check(tmp_path / "healthy") == []
    assert {f.rule for f in mldbg.check(tmp_path / "broken")} >= {"dead_relu"}
