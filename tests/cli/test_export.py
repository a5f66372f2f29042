"""`mldbg export RUN csv|parquet -o FILE`: a real subprocess of the CLI on a real two-worker run."""

import subprocess
import sys

import pandas as pd
import pytest
from tests.trial.test_frame import write

import mldbg


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", *args], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("export"))
    write(out, rank=0)
    write(out, rank=1)
    return out


def test_csv_of_the_losses_equals_to_pandas(run, tmp_path):
    out = tmp_path / "losses.csv"
    res = cli("export", run, "csv", "-o", str(out), "--collection", "losses")
    assert res.returncode == 0, res.stderr
    assert "16 rows, 1 tensors" in res.stdout
    got = pd.read_csv(out)
    expect = mldbg.create_trial(run).to_pandas(collection="losses")
    assert list(got.columns) == list(expect.columns)
    assert got.step.tolist() == expect.step.tolist() and got.worker.tolist() == expect.worker.tolist()
    assert got.value.tolist() == pytest.approx(expect.value.tolist())


def test_parquet_with_reductions_and_mode(run, tmp_path):
    out = tmp_path / "w.parquet"
    res = cli(
        "export",
        run,
        "parquet",
        "-o",
        str(out),
        "--regex",
        "^w$",
        "--mode",
        "train",
        "--reductions",
        "l2,abs_mean",
    )
    assert res.returncode == 0, res.stderr
    got = pd.read_parquet(out)
    assert set(got["mode"]) == {"TRAIN"} and set(got.reduction) == {"l2", "abs_mean"}
    trial = mldbg.create_trial(run)
    for row in got.itertuples():
        name, use_abs = ("mean", True) if row.reduction == "abs_mean" else ("l2", False)
        assert row.value == pytest.approx(
            trial.tensor("w").reduction_value(row.step, name, abs=use_abs, worker=row.worker), rel=1e-6
        )


def test_errors_are_one_line_exit_2(run, tmp_path):
    res = cli("export", run, "csv", "-o", str(tmp_path / "x.csv"), "--regex", "^w$")
    assert res.returncode == 2
    # said in the command's options (--reductions), not to_pandas' Python arguments
    assert res.stderr.startswith(f"mldbg export: error: tensor 'w' of {run} holds 6 numbers")
    assert "--reductions" in res.stderr and "to_pandas" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    res = cli("export", str(tmp_path / "nope"), "csv", "-o", str(tmp_path / "x.csv"))
    assert res.returncode == 2 and "no run at" in res.stderr
    res = cli("export", run, "csv", "-o", str(tmp_path / "x.csv"), "--regex", "^zzz$")
    assert res.returncode == 2 and "nothing to export" in res.stderr
    assert not (tmp_path / "x.csv").exists()
    res = cli("export", run, "csv", "-o", str(tmp_path / "x.csv"), "--reductions", "median")
    assert res.returncode == 2 and "unknown reduction 'median'" in res.stderr


def test_no_selection_exports_the_one_number_series_and_says_what_it_left_out(run, tmp_path):
    """`mldbg export RUN csv` on a run that holds arrays (issue #29): the one-number series,
    and one line on stderr naming what was left out and the options that get it."""
    out = tmp_path / "all.csv"
    res = cli("export", run, "csv", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "16 rows, 1 tensors" in res.stdout
    line = res.stderr.strip()
    assert len(line.splitlines()) == 1 and "left out 2 tensors" in line and "'r', 'w'" in line
    assert "--reductions" in line and "to_pandas" not in line and "reductions=" not in line
    assert set(pd.read_csv(out).tensor) == {"loss"}
    res = cli("export", run, "csv", "-o", str(tmp_path / "x.csv"), "--regex", "^(w|r)$")
    assert res.returncode == 2 and "holds 6 numbers" in res.stderr  # a selection of arrays: refused


def test_a_torch_run_with_weights_without_arguments(tmp_path):
    from tests.tiny import train

    run = train(str(tmp_path / "run"), steps=4, eval_every=None)
    out = tmp_path / "run.csv"
    res = cli("export", run.path, "csv", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "left out" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    got = pd.read_csv(out)
    trial = mldbg.create_trial(run.path)
    assert set(trial.tensor_names(collection="losses")) <= set(got.tensor)
    assert not set(trial.tensor_names(collection="weights")) & set(got.tensor)
