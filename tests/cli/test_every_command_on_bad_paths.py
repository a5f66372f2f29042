"""Every command that reads a run, on what a user may give it by mistake: a missing path, a
file, an empty folder, a folder of runs, a run with a damaged file. Each is a usage error:
exit 2 and one line `mldbg <command>: error: ...` naming the path and what to do, never a
traceback, never a Python method for a CLI user (a new-user audit of issue 15)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.tiny import train

from mldbg.cli.main import cli


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of runs: one tiny real training (with an eval pass) below it."""
    folder = tmp_path_factory.mktemp("sweep")
    train(folder / "lr0.1", steps=12, save_interval=3, eval_every=6)
    return folder


def commands(path: str, out: Path) -> list[list[str]]:
    """Every command that reads one recorded run, with PATH in its place."""
    return [
        ["ls", path],
        ["show", path, "fc1.weight"],
        ["check", path],
        ["report", path, "-o", str(out / "r.html")],
        ["profile-report", path, "-o", str(out / "p.html")],
        ["plot", path, "distribution", "fc1.weight", "-o", str(out / "d.html")],
        ["export", path, "csv", "-o", str(out / "t.csv")],
        ["export-tensorboard", path, str(out / "tb")],
        ["status", path],
    ]


def one_line(result, command: str) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, (command, result.output)
    assert len(lines) == 1 and lines[0].startswith(f"mldbg {command}: error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_a_folder_of_runs_is_named_by_every_command(sweep, tmp_path):
    runner = CliRunner()
    for args in commands(str(sweep), tmp_path):
        line = one_line(runner.invoke(cli, args), args[0])
        assert "it is a folder of runs" in line and str(sweep / "lr0.1") in line, line
        assert f"mldbg sweep {sweep}" in line


def test_an_empty_folder_is_named_by_every_command(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    runner = CliRunner()
    for args in commands(str(empty), tmp_path):
        line = one_line(runner.invoke(cli, args), args[0])
        assert f"no run at {empty}: nothing was recorded there" in line, line


def test_a_damaged_marker_is_a_usage_error_of_every_command(sweep, tmp_path):
    run = tmp_path / "damaged"
    shutil.copytree(sweep / "lr0.1", run)
    (run / "workers" / "worker_0" / "meta.json").write_text("{not json")
    runner = CliRunner()
    for args in commands(str(run), tmp_path):
        line = one_line(runner.invoke(cli, args), args[0])
        assert "meta.json: not valid JSON" in line, line


def test_watch_refuses_a_folder_of_runs_at_once(sweep):
    """`watch` waits for a run that does not exist yet, but a folder of runs will never become
    one: refused at once instead of waiting for ever."""
    done = subprocess.run([sys.executable, "-m", "mldbg.cli.main", "watch", str(sweep)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("mldbg watch: error: no run at") and "folder of runs" in lines[0]


def test_export_says_its_own_options(sweep, tmp_path):
    """A table without a selection gives the one-number series and says in one line what it
    left out (issue #29); a selection of a tensor that holds more than one number fails on it:
    both said with --reductions / --collection, not to_pandas' Python arguments; a wrong mode or
    reduction gets a "did you mean"."""
    run = str(sweep / "lr0.1")
    runner = CliRunner()
    res = runner.invoke(cli, ["export", run, "csv", "-o", str(tmp_path / "t.csv")])
    assert res.exit_code == 0, res.output
    said = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and "left out" in said[0] and "--reductions mean,l2" in said[0]
    assert "to_pandas" not in said[0] and "reductions=" not in said[0]
    res = runner.invoke(cli, ["export", run, "csv", "-o", str(tmp_path / "t.csv"), "--regex", "weight"])
    line = one_line(res, "export")
    assert "--reductions mean,l2" in line and "--collection losses" in line and f"mldbg show {run}" in line
    assert "to_pandas" not in line and "reductions=" not in line and "value(step)" not in line
    res = runner.invoke(cli, ["export", run, "csv", "-o", str(tmp_path / "t.csv"), "--mode", "tran"])
    assert "did you mean 'TRAIN'?" in one_line(res, "export")
    res = runner.invoke(cli, ["export", run, "csv", "-o", str(tmp_path / "t.csv"), "--reductions", "l2,mena"])
    assert "did you mean 'mean'?" in one_line(res, "export")
    res = runner.invoke(cli, ["export", run, "csv", "-o", str(tmp_path / "t.csv"), "--collection", "loses"])
    assert "did you mean 'losses'?" in one_line(res, "export")
    res = runner.invoke(cli, ["export", run, "csv", "-o", str(tmp_path / "t.csv"), "--collection", "losses"])
    assert res.exit_code == 0, res.output


def test_more_first_run_mistakes_are_usage_errors(sweep, tmp_path):
    """A file as `mldbg run --out` or as a dashboard PATH, a step range that selects nothing,
    a --step that `plot distribution` would ignore, a bad regex of `ls` (before any output)."""
    run = str(sweep / "lr0.1")
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    runner = CliRunner()
    res = runner.invoke(cli, ["run", "--out", str(script), "--", sys.executable, str(script)])
    line = one_line(res, "run")
    assert f"{script} is a file, not a run: give --out a directory" in line and "ran" not in res.output
    res = runner.invoke(cli, ["dashboard", str(script), "--port", "0"])
    assert f"{script} is a file, not a run" in one_line(res, "dashboard")
    res = runner.invoke(cli, ["check", run, "--start-step", "500"])
    assert "--start-step 500 selects no step of" in one_line(res, "check")
    res = runner.invoke(cli, ["check", run, "--start-step", "5", "--end-step", "2"])
    assert "--end-step 2 is not after --start-step 5" in one_line(res, "check")
    res = runner.invoke(
        cli, ["check", run, "--start-step", "3", "--end-step", "6", "--rule", "exploding_tensor"]
    )
    import mldbg

    inside = [s for s in mldbg.create_trial(run).steps() if 3 <= s < 6]
    assert (
        res.exit_code == 0 and f"over {len(inside)} step{'s' if len(inside) != 1 else ''} of" in res.stderr
    ), res.output
    assert len(inside) < len(mldbg.create_trial(run).steps())
    res = runner.invoke(
        cli, ["plot", run, "distribution", "fc1.weight", "--step", "3", "-o", str(tmp_path / "d.html")]
    )
    assert "takes no --step" in one_line(res, "plot") and not (tmp_path / "d.html").exists()
    res = runner.invoke(cli, ["ls", run, "--regex", "[bad"])
    assert "invalid regex '[bad'" in one_line(res, "ls") and res.stdout == ""


def test_sweep_on_bad_paths_only_is_one_line(tmp_path):
    """`mldbg sweep` where no input names a readable run: one line, exit 2, no table and no
    summary after it (a missing path or a file refused before any Dask cluster starts)."""
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "empty").mkdir()
    cases = [
        ([str(tmp_path / "gone")], "the path does not exist"),
        ([str(tmp_path / "gone"), str(tmp_path / "train.py")], "is a file, not a run"),
        ([str(tmp_path / "lr_*")], "matched no folder"),
        ([str(tmp_path / "empty"), "--workers", "1"], "no recorded run at"),
    ]
    for args, why in cases:
        res = subprocess.run([sys.executable, "-m", "mldbg.cli.main", "sweep", *args],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert len(lines) == 1 and lines[0].startswith("mldbg sweep: error: "), res.stderr
        assert why in lines[0] and args[0] in lines[0], lines[0]
        assert res.stdout == "" and "Traceback" not in res.stderr
