"""The mldbg command on real runs: ls, show, demo, errors."""

import subprocess
import sys

import numpy as np
from click.testing import CliRunner

import mldbg
from mldbg.cli.main import cli
from mldbg.record.recorder import Recorder


def make_run(path):
    rec = Recorder(
        path, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["weights", "losses"]
    )
    for s in range(3):
        rec.start_step(mldbg.Mode.TRAIN if s < 2 else mldbg.Mode.EVAL)
        rec.save("fc.weight", np.full((2, 2), s, dtype=np.float32), rec.plan("fc.weight", ("weights",)))
        rec.save("loss", np.float32(1.0 / (s + 1)), rec.plan("loss", ("losses",)))
        rec.end_step()
    rec.close()


def test_ls_and_show(tmp_path):
    make_run(tmp_path)
    runner = CliRunner()
    out = runner.invoke(cli, ["ls", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "finished" in out.output and "3 saved (global steps 0..2" in out.output
    assert "train    2 of 2 steps saved" in out.output and "eval     1 of 1 steps saved" in out.output
    assert "fc.weight" in out.output and "weights" in out.output
    listed = out.output.split("tensors:\n", 1)[1]  # every tensor, not the last collection's
    assert "fc.weight" in listed and "loss " in listed
    out = runner.invoke(cli, ["show", str(tmp_path), "fc.weight", "--step", "1"])
    assert out.exit_code == 0, out.output
    assert "shape (2, 2)" in out.output and "mean 1" in out.output
    out = runner.invoke(cli, ["show", str(tmp_path), "fc.weight", "--step", "0", "--mode", "eval"])
    assert out.exit_code == 0 and "mean 2" in out.output


def test_errors_are_clear_and_exit_2(tmp_path):
    make_run(tmp_path)
    res = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "show", str(tmp_path), "nope"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2
    assert "no tensor 'nope'" in res.stderr
    res = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "ls", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2 and res.stderr.startswith("mldbg ls: error: no run at ")
    assert "the path does not exist" in res.stderr and "Traceback" not in res.stderr
