"""`mldbg watch` on a run that ended: each finding as it is found, then the diagnoses they add up
to (issue 26); `--findings` leaves the diagnoses out."""

import json

from click.testing import CliRunner
from tests.tiny import train

from mldbg.cli.main import cli


def test_watch_ends_with_the_diagnoses(tmp_path):
    run = tmp_path / "run"
    train(run, lr=1e12, steps=30)
    res = CliRunner().invoke(cli, ["watch", str(run), "--no-state", "--quiet"])
    assert res.exit_code == 1, res.output
    out = res.stdout
    assert out.index("[exploding_tensor] step") < out.index("diagnos")
    assert "[learning_rate_too_high] the learning rate is too high" in out
    res = CliRunner().invoke(cli, ["watch", str(run), "--no-state", "--quiet", "--json"])
    plain = [json.loads(line) for line in res.stdout.splitlines()]
    assert plain and not [d for d in plain if "cause" in d]  # one object per finding (and unchecked rule)
    res = CliRunner().invoke(cli, ["watch", str(run), "--no-state", "--quiet", "--json", "--diagnoses"])
    lines = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    findings = [d for d in lines if "rule" in d]
    diagnoses = [d for d in lines if "cause" in d]
    assert findings and lines[0] == findings[0]  # the findings as they came, first
    assert diagnoses[0]["cause"] == "learning_rate_too_high"
    assert {f["rule"] for d in diagnoses for f in d["findings"]} == {f["rule"] for f in findings}
    res = CliRunner().invoke(cli, ["watch", str(run), "--no-state", "--quiet", "--findings"])
    assert res.exit_code == 1 and "learning_rate_too_high" not in res.stdout
