"""`mldbg sweep`: the table, --json, exit codes, its own local cluster or a given scheduler."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mldbg.cli.main import cli
from tests.scale.conftest import HEALTHY, SWEEP


def test_folder_on_its_own_local_cluster(sweep):
    res = CliRunner().invoke(cli, ["sweep", str(sweep.root), "--workers", "1"])
    assert res.exit_code == 1, res.output
    lines = res.stdout.splitlines()
    assert lines[0].split()[:3] == ["run", "status", "findings"]
    status = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert status == {sweep.path(n): "ok" if n in HEALTHY else "fired" for n in SWEEP}
    assert "6 runs: 3 with findings, 3 clean, 0 errors" in res.stderr
    assert "on 1 Dask worker " in res.stderr


def test_json_on_a_given_scheduler(sweep, cluster):
    res = CliRunner().invoke(
        cli, ["sweep", f"{sweep.root}/lr_*", "--scheduler", cluster.scheduler_address, "--json",
              "--rule", "exploding_tensor"],
    )  # fmt: skip
    assert res.exit_code == 1, res.output
    found = [json.loads(line) for line in res.stdout.splitlines()]
    assert found and {f["run"] for f in found} == {sweep.path("lr_1e12")}
    assert set(found[0]) == {"run", "rule", "step", "mode", "message", "tensors", "suggestion", "severity"}
    assert "on 2 Dask workers" in res.stderr


def test_exit_codes(sweep, cluster, tmp_path):
    address = cluster.scheduler_address
    res = CliRunner().invoke(cli, ["sweep", f"{sweep.root}/lr_0.*", "--scheduler", address])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(
        cli, ["sweep", sweep.path("lr_0.1"), str(tmp_path / "gone"), "--scheduler", address]
    )
    assert res.exit_code == 2 and f"{tmp_path / 'gone'}: no recorded run" in res.stderr
    res = CliRunner().invoke(cli, ["sweep", str(sweep.root), "--rule", "dead_relus", "--scheduler", address])
    assert res.exit_code == 2 and "did you mean dead_relu" in res.stderr
    res = CliRunner().invoke(cli, ["sweep", str(sweep.root), "--scheduler", address, "--workers", "2"])
    assert res.exit_code == 2 and "--workers" in res.output


def test_per_worker_json(two_worker_run, cluster):
    args = [
        "sweep",
        two_worker_run,
        "--scheduler",
        cluster.scheduler_address,
        "--json",
        "--rule",
        "exploding_tensor",
    ]
    assert CliRunner().invoke(cli, args).exit_code == 0  # the rules read worker_0, which is healthy
    res = CliRunner().invoke(cli, [*args, "--per-worker"])
    assert res.exit_code == 1, res.output
    found = [json.loads(line) for line in res.stdout.splitlines()]
    assert found and {(f["run"], f["worker"], f["rule"]) for f in found} == {
        (two_worker_run, "worker_1", "exploding_tensor")
    }
