"""`mldbg check`: findings, --json, exit codes."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mldbg.cli.check import check


def test_exit_1_and_json_findings(run):
    res = CliRunner().invoke(check, [run("negative_bias"), "--json", "--findings", "--rule", "dead_relu"])
    assert res.exit_code == 1, res.output
    lines = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    assert lines and set(lines[0]) == {"rule", "step", "mode", "message", "tensors", "suggestion", "severity"}
    assert lines[0]["severity"] == "error"
    assert lines[0]["rule"] == "dead_relu" and lines[0]["mode"] == "TRAIN"


def test_json_diagnoses_carry_their_findings(run):
    """Without --findings, one JSON object per diagnosis, its findings (the fields above) inside."""
    res = CliRunner().invoke(check, [run("negative_bias"), "--json", "--rule", "dead_relu"])
    assert res.exit_code == 1, res.output
    lines = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    keys = {"cause", "title", "step", "confidence", "why", "severity", "advice", "findings"}
    diagnoses = [d for d in lines if "cause" in d]
    assert diagnoses and all(set(d) == keys for d in diagnoses)
    # units dead at the first step, before any update (biases initialized negative): the init
    assert diagnoses[0]["cause"] == "bad_initialization" and 0 < diagnoses[0]["confidence"] <= 1
    inner = diagnoses[0]["findings"]
    assert inner and set(inner[0]) == {"rule", "step", "mode", "message", "tensors", "suggestion", "severity"}
    assert inner[0]["rule"] == "dead_relu"


def test_exit_0_on_healthy_run(run):
    res = CliRunner().invoke(check, [run("healthy_relu_sgd")])
    assert res.exit_code == 0, res.output


def test_config_file_and_parameters(run, tmp_path):
    cfg = tmp_path / "rules.json"
    cfg.write_text(json.dumps([{"name": "dead_relu", "threshold_layer": 99.0}]))
    res = CliRunner().invoke(check, [run("negative_bias"), "--config", str(cfg)])
    assert res.exit_code == 1 and "dead_relu" in res.stdout


def test_exit_2_on_errors(run, tmp_path):
    assert CliRunner().invoke(check, [str(tmp_path / "nothing")]).exit_code == 2
    res = CliRunner().invoke(check, [run("healthy_relu_sgd"), "--rule", "dead_relus"])
    assert res.exit_code == 2 and "did you mean" in res.stderr
    res = CliRunner().invoke(check, [run("healthy_relu_sgd"), "--rule", "dead_relu:nope=1"])
    assert res.exit_code == 2 and "unknown parameter" in res.stderr


def test_list_rules():
    res = CliRunner().invoke(check, ["--list"])
    assert res.exit_code == 0 and "loss_not_decreasing" in res.stdout


def test_a_rule_short_of_data_says_so_with_counts(tmp_path):
    """20 saved losses: loss_not_decreasing cannot judge (it needs 50) and says so, in the text
    output and as its own JSON object that cannot be taken for a finding."""
    from tests.tiny import train

    path = tmp_path / "short"
    train(path, steps=20)
    res = CliRunner().invoke(check, [str(path)])
    assert res.exit_code == 0, res.output
    assert "loss_not_decreasing could not judge: needs 50 saved training losses, has 20" in res.stderr
    res = CliRunner().invoke(check, [str(path), "--json"])
    lines = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    short = {d["unchecked"]: d["why"] for d in lines if "unchecked" in d}
    assert "needs 50 saved training losses, has 20" in short["loss_not_decreasing"]
    assert all(set(d) == {"unchecked", "why"} for d in lines)  # no finding on a healthy run


def test_text_shows_diagnoses_first_their_findings_below(run):
    res = CliRunner().invoke(check, [run("lr_huge")])
    assert res.exit_code == 1, res.output
    lines = res.stdout.splitlines()
    assert lines[0].startswith("[learning_rate_too_high] the learning rate is too high"), res.stdout
    assert lines[1].startswith("    why: ") and lines[2].startswith("    advice: Lower the learning rate")
    assert any(line.startswith("      [exploding_tensor] step ") for line in lines)
    assert "diagnos" in res.stderr.splitlines()[-1]
    flat = CliRunner().invoke(check, [run("lr_huge"), "--findings"])
    assert flat.exit_code == 1
    assert not flat.stdout.startswith("[learning_rate_too_high]") and "    try: " in flat.stdout
    assert "[exploding_tensor] step" in flat.stdout
