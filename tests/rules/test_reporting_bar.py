"""The reporting bar: a diagnosis is an alert only when its evidence (or its confidence, with
the facts of the run) reaches `REPORT_CONFIDENCE`; one finding of a rule that alone is wrong
as often as right is a suspicion, kept in `Diagnoses.unconfirmed` and listed by `mldbg check`,
not reported, unless the user named that rule."""

from __future__ import annotations

from click.testing import CliRunner

import mldbg
from mldbg.cli.main import cli
from mldbg.rules import Finding
from mldbg.rules.diagnosis import REPORT_CONFIDENCE, group
from mldbg.rules.diagnosis.causes import reliability
from tests.tiny import train


def _finding(rule: str, step: int = 10, reliability: float | None = None) -> Finding:
    return Finding(rule, step, "TRAIN", f"{rule} fired", ["fc1.weight"], "", reliability=reliability)


def test_a_weak_rule_alone_is_a_suspicion_and_a_second_symptom_confirms_it():
    assert reliability("poor_weight_initialization") < REPORT_CONFIDENCE <= reliability("dead_relu")
    alone = group([_finding("poor_weight_initialization", 4)])
    assert list(alone) == [] and [d.cause for d in alone.unconfirmed] == ["bad_initialization"]
    both = group([_finding("poor_weight_initialization", 4), _finding("vanishing_gradient", 2)])
    assert both and not both.unconfirmed  # two symptoms of one cause: reported together
    assert {f.rule for d in both for f in d.findings} == {"poor_weight_initialization", "vanishing_gradient"}


def test_a_finding_that_knows_it_is_surer_than_its_rule_is_reported_alone():
    sure = group([_finding("poor_weight_initialization", 4, reliability=0.9)])
    assert [d.cause for d in sure] == ["bad_initialization"] and sure[0].evidence == 0.9
    assert _finding("x", reliability=0.9).to_dict()["reliability"] == 0.9
    assert "reliability" not in _finding("x").to_dict()


def test_a_rule_the_user_named_is_reported_alone():
    named = group([_finding("poor_weight_initialization", 4)], chosen=["poor_weight_initialization"])
    assert [d.cause for d in named] == ["bad_initialization"] and not named.unconfirmed


def test_one_corrupted_batch_is_listed_as_a_suspicion_not_an_alert(tmp_path):
    """A real training with one batch of inputs x30 at step 30 that it recovers from: the
    loss spike alone is below the bar. `mldbg check` lists it on stderr and exits 0; asked by
    name, it is reported; a constant init (identical weights: a sure defect) is reported alone."""
    run = tmp_path / "spike"
    train(run, steps=100, spike_at=30, optimizer="adam", default_hook=True)
    diagnoses = mldbg.diagnose(str(run))
    suspected = {f.rule for d in diagnoses.unconfirmed for f in d.findings}
    assert "loss_spike" in suspected
    assert "loss_spike" not in {f.rule for f in mldbg.check(str(run))}
    assert [f.rule for f in mldbg.check(str(run), rules=["loss_spike"])] == ["loss_spike"]
    result = CliRunner().invoke(cli, ["check", str(run)])
    assert result.exit_code == 0, result.output
    assert "unconfirmed" in result.stderr and "[loss_spike]" in result.stderr
    named = CliRunner().invoke(cli, ["check", str(run), "--rule", "loss_spike"])
    assert named.exit_code == 1 and "[loss_spike]" in named.stdout

    constant = tmp_path / "constant"
    train(constant, steps=20, init="constant", default_hook=True)
    found = [f for f in mldbg.check(str(constant)) if f.rule == "poor_weight_initialization"]
    assert found and found[0].reliability is not None and found[0].reliability >= REPORT_CONFIDENCE


def test_a_watcher_holds_a_suspicion_and_delivers_nothing_for_it(tmp_path):
    """`mldbg watch` and the actions see what `mldbg check` reports: the lone loss spike of one
    corrupted batch is held (`Watcher.held`), never printed as a finding nor delivered."""
    from mldbg.watch.watcher import Watcher

    run = tmp_path / "spike"
    train(run, steps=100, spike_at=30, optimizer="adam", default_hook=True)
    delivered: list[Finding] = []
    watcher = Watcher(str(run), on_finding=delivered.append, state=False, wait_timeout=30)
    watcher.run()
    assert "loss_spike" in {f.rule for f in watcher.held}
    assert "loss_spike" not in {f.rule for f in delivered} | {f.rule for f in watcher.findings}
    assert {f.rule for f in delivered} == {f.rule for f in mldbg.check(str(run))}
