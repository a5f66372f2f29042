"""Machine-dependent findings are warnings (issue 15): `check` and `watch` exit 0 on them
unless --strict. Apart from test_exit_codes.py: its training times real steps, so that under
pytest-xdist it runs alone (tests/conftest.py, SOLO)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mldbg.cli.main import cli

PROFILER_TESTS = Path(__file__).resolve().parents[1] / "profiler"


def mldbg(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mldbg.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.fixture(scope="module")
def stalled_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real training with the profiler on whose steps 8, 12, ... stall: step_outlier fires."""
    path = tmp_path_factory.mktemp("stalled")
    code = ("from profiler_runs import train; "
            f"train({str(path)!r}, steps=30, slow_steps=range(8, 30, 4), slow_seconds=0.1, hidden=512, batch=64)")  # fmt: skip
    subprocess.run([sys.executable, "-c", code], cwd=PROFILER_TESTS, check=True, timeout=300)
    return path


def test_machine_dependent_findings_are_warnings(stalled_run):
    """step_outlier fires as a warning: `check` and `watch` exit 0 unless --strict."""
    rule = "step_outlier:n_outliers=2"
    res = CliRunner().invoke(cli, ["check", str(stalled_run), "--rule", rule, "--json"])
    findings = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    assert findings and all(f["severity"] == "warning" for f in findings if "rule" in f), res.output
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["check", str(stalled_run), "--rule", rule, "--strict"])
    assert res.exit_code == 1, res.output
    assert "[step_outlier, warning]" in res.stdout and "counted: --strict" in res.stderr
    for extra, code in (([], 0), (["--strict"], 1)):
        res = mldbg("watch", str(stalled_run), "--rule", rule, "--no-state", "--quiet", *extra)
        assert res.returncode == code, res.stderr
        assert "step_outlier" in res.stdout
