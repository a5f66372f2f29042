"""`check_runs`: a sweep checked on a real Dask cluster finds what a serial `mldbg.check` of
each run finds; unreadable runs are reported, not raised; runs are found by folder and pattern."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from distributed import Client, get_task_stream

import mldbg
from mldbg.errors import InvalidConfig
from mldbg.rules.builtin.dead_relu import DeadRelu
from mldbg.scale import SweepResult, check_runs, find_runs
from tests.scale.conftest import HEALTHY, SWEEP
from tests.scale.failing_rule import AlwaysFails


def corrupt_copy(src: str, dst: Path) -> str:
    """A copy of a run whose index files are overwritten with garbage (a loaded machine's writer
    may have sealed more than one)."""
    shutil.copytree(src, dst)
    indexes = sorted(dst.glob("workers/*/index/*.safetensors"))
    assert indexes, f"no index file in {src}"
    for index in indexes:
        index.write_bytes(b"not a safetensors index" * 4)
    return str(dst)


def test_findings_equal_serial_check(sweep, client):
    result = check_runs(str(sweep.root), client=client)
    assert isinstance(result, SweepResult) and not result.errors
    assert list(result) == sorted(sweep.path(n) for n in SWEEP)  # the folder's runs, by name
    for name in SWEEP:
        path = sweep.path(name)
        assert result[path] == mldbg.check(path), name
        assert bool(result[path]) == (name not in HEALTHY), (name, result[path])
        assert result.status(path) == ("ok" if name in HEALTHY else "fired")
        assert result.steps[path] == len(mldbg.create_trial(path).steps())
    assert {"exploding_tensor"} <= {f.rule for f in result[sweep.path("lr_1e12")]}
    assert {"dead_relu"} <= {f.rule for f in result[sweep.path("negative_bias")]}
    assert {"vanishing_gradient"} <= {f.rule for f in result[sweep.path("deep_sigmoid")]}
    assert result.workers == 2 and result.seconds > 0


def test_a_run_of_two_workers(two_worker_run, sweep, client):
    assert mldbg.create_trial(two_worker_run).workers() == ["worker_0", "worker_1"]
    whole = check_runs(two_worker_run, client=client)  # as mldbg.check: the rules read worker_0
    assert whole == {two_worker_run: mldbg.check(two_worker_run)} and not whole.errors
    assert "exploding_tensor" not in {f.rule for f in whole[two_worker_run]}
    split = check_runs([two_worker_run, sweep.path("lr_1e12")], client=client, per_worker=True)
    assert not split.errors and split[sweep.path("lr_1e12")] == mldbg.check(sweep.path("lr_1e12"))
    exploded = [f for f in split[two_worker_run] if f.rule == "exploding_tensor"]
    assert exploded and {f.worker for f in exploded} == {"worker_1"}  # the rank that exploded
    assert {f.worker for f in split[two_worker_run]} <= {"worker_0", "worker_1"}
    assert split[two_worker_run] == mldbg.check(two_worker_run, per_worker=True)  # one per worker, as check


def test_unreadable_runs_are_errors_and_the_rest_is_checked(sweep, client, tmp_path):
    corrupt = corrupt_copy(sweep.path("lr_0.1"), tmp_path / "corrupt")
    missing = str(tmp_path / "never_written")
    (tmp_path / "notes.txt").write_text("a file, not a run")
    a_file = str(tmp_path / "notes.txt")
    result = check_runs(
        [str(sweep.root), corrupt, missing, a_file, str(tmp_path / "nothing_*")], client=client
    )
    assert set(result.errors) == {corrupt, missing, a_file, str(tmp_path / "nothing_*")}
    assert "is a file, not a run" in result.errors[a_file]  # not "[Errno 20] Not a directory"
    assert "index" in result.errors[corrupt] and "safetensors" in result.errors[corrupt]
    assert "no recorded run" in result.errors[missing]
    assert "matched no folder" in result.errors[str(tmp_path / "nothing_*")]
    assert set(result) == {sweep.path(n) for n in SWEEP}  # every readable run checked
    for name in SWEEP:
        assert result[sweep.path(name)] == mldbg.check(sweep.path(name))
    table = result.summary()
    assert list(table.columns) == ["run", "status", "steps", "findings", "rules", "first_finding", "error"]
    assert dict(zip(table.run, table.status, strict=True)) == {r: result.status(r) for r in result.runs}
    assert (table.status == "error").sum() == 4 and (table.status == "fired").sum() == 3
    assert "exploding_tensor" in table.set_index("run").rules[sweep.path("lr_1e12")]
    lines = {line.split()[0]: line for line in result.table(width=400).splitlines()}
    assert lines["run"].split() == ["run", "status", "findings", "first", "finding", "/", "error"]
    assert lines[missing].split()[1:5] == ["error", "0", "no", "recorded"]
    first = min(result[sweep.path("lr_1e12")], key=lambda f: f.step)
    assert lines[sweep.path("lr_1e12")].split()[1:3] == ["fired", str(len(result[sweep.path("lr_1e12")]))]
    assert f"[{first.rule}] step {first.step}: {first.message[:30]}" in lines[sweep.path("lr_1e12")]


def test_rule_specs_and_steps_as_in_check(sweep, client):
    specs = ["exploding_tensor", ("dead_relu", {"threshold_layer": 40.0}), {"name": "vanishing_gradient"}]
    serial = ["exploding_tensor", {"name": "dead_relu", "threshold_layer": 40.0}, "vanishing_gradient"]
    result = check_runs(f"{sweep.root}/*", specs, client=client, start_step=2, end_step=15)
    for name in SWEEP:
        path = sweep.path(name)
        assert result[path] == mldbg.check(path, serial, start_step=2, end_step=15), name
        assert all(2 <= f.step < 15 for f in result[path])
    assert {f.rule for fs in result.values() for f in fs} == {
        "exploding_tensor",
        "dead_relu",
        "vanishing_gradient",
    }


def test_a_failing_rule_is_reported_and_the_others_still_run(sweep, client):
    result = check_runs(sweep.path("lr_1e12"), ["exploding_tensor", AlwaysFails], client=client)
    run = sweep.path("lr_1e12")
    assert result.status(run) == "error"
    assert "rule always_fails failed: ZeroDivisionError: a bug at step 0" in result.errors[run]
    assert result[run] == mldbg.check(run, ["exploding_tensor"])  # what the other rule found
    assert result[run]


def test_bad_rules_fail_before_the_sweep(sweep, client):
    with pytest.raises(InvalidConfig, match="did you mean dead_relu"):
        check_runs(str(sweep.root), ["dead_relus"], client=client)
    with pytest.raises(InvalidConfig, match="unknown parameter"):
        check_runs(str(sweep.root), [("dead_relu", {"nope": 1})], client=client)
    with pytest.raises(InvalidConfig, match="not rule objects"):
        check_runs(str(sweep.root), [DeadRelu()], client=client)


def test_the_current_client_is_used(sweep, cluster):
    with Client(cluster) as current, get_task_stream(current) as tasks:  # the default client
        result = check_runs(sweep.path("lr_1e12"), ["exploding_tensor"])
    assert [f.rule for f in result[sweep.path("lr_1e12")]] == ["exploding_tensor"]
    assert [t["key"] for t in tasks.data if "_check_run" in str(t["key"])]  # ran on that cluster


def test_find_runs(sweep, tmp_path):
    (tmp_path / "plots").mkdir()  # a folder that holds no run is not one
    shutil.copytree(sweep.path("lr_0.1"), tmp_path / "a")
    shutil.copytree(sweep.path("lr_0.2"), tmp_path / "b")
    assert find_runs(str(tmp_path)) == ([str(tmp_path / "a"), str(tmp_path / "b")], {})
    assert find_runs(str(tmp_path / "a")) == ([str(tmp_path / "a")], {})  # a run itself
    runs, unmatched = find_runs([f"{tmp_path}/[ab]", str(tmp_path / "a"), f"{sweep.root}/lr_0.*"])
    assert runs == [str(tmp_path / "a"), str(tmp_path / "b"), *(sweep.path(n) for n in HEALTHY)]
    assert not unmatched
    assert find_runs(f"{tmp_path}/z*") == (
        [],
        {f"{tmp_path}/z*": f"the pattern '{tmp_path}/z*' matched no folder"},
    )
    assert find_runs(str(tmp_path / "plots")) == ([str(tmp_path / "plots")], {})  # reported when read
