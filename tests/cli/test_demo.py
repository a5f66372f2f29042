"""`mldbg demo`, the embedded default job: trains on data shipped in scikit-learn, with rules live."""

import subprocess
import sys

import mldbg


def test_demo_trains_records_and_catches_the_broken_run(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "demo", "--out", str(tmp_path), "--epochs", "3"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    out = res.stdout + res.stderr
    assert "rules on the healthy run: no finding" in out
    assert "mldbg stopped it after" in out
    assert "[dead_relu]" in out
    healthy = mldbg.create_trial(tmp_path / "healthy")
    assert healthy.loaded_all_steps and len(healthy.steps(mldbg.Mode.TRAIN)) > 20
    broken = mldbg.create_trial(tmp_path / "broken")
    assert broken.loaded_all_steps
    # stopped before the planned end (10 * 3 epochs of 43 steps). How long before depends on the
    # machine: ~1 s from the bad step to the stop, 250-700 steps of this tiny model on an idle one
    assert max(broken.steps()) < 10 * 3 * 43 * 0.9
    assert mldbg.check(tmp_path / "healthy") == []
    assert {f.rule for f in mldbg.check(tmp_path / "broken")} >= {"dead_relu"}
