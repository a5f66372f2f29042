"""The promise of the README: two lines (`Hook(out_dir)`, `register_module`, `register_loss`)
and the library's defaults, and `mldbg check` catches each injected defect and stays quiet on
its healthy twin. The statistics the default rules read are recorded every step at first,
then on the hook's cost budget; no raw tensor is needed."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import Finding
from tests.defects import EXTRA, SCENARIOS, SUSPICIONS
from tests.tiny import train


def assert_caught_or_quiet(run, name: str, findings: list[Finding] | None = None) -> None:
    expected = SCENARIOS[name][1]
    if findings is None:
        findings = mldbg.check(str(run), rules=["default", *EXTRA])
    if name in SUSPICIONS:  # caught as a suspicion, by design: listed, not reported
        unconfirmed = mldbg.diagnose(str(run), rules=["default", *EXTRA]).unconfirmed
        findings = [*findings, *(f for d in unconfirmed for f in d.findings)]
    fired = {f.rule for f in findings}
    if expected:
        assert fired & set(expected), f"{name}: expected one of {expected}, fired {sorted(fired)}"
    else:
        assert not fired - set(EXTRA), f"{name}: a healthy training raised {sorted(fired - set(EXTRA))}"


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_two_lines_catch_the_defect_or_stay_quiet(defect_table_runs, name):
    """100 steps with `Hook(out_dir)` (the session's recording, tests/rules/conftest.py; the
    diagnosis tests read it too)."""
    run, findings, caught = defect_table_runs(name)
    assert not caught, [str(w.message) for w in caught]  # no rule failed on it
    assert_caught_or_quiet(run, name, findings)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_same_with_sparse_statistics(tmp_path, name):
    """What the budget does on a busy machine or a big model (k grows to 100), made
    reproducible: statistics at every step of the first 20, then every 7th."""
    kwargs = SCENARIOS[name][0]
    train(
        tmp_path / "run",
        default_hook=True,
        **{"steps": 100, **kwargs, "hook_kwargs": {"statistics_every": 7}},
    )
    assert_caught_or_quiet(tmp_path / "run", name)


def test_the_two_lines_save_no_raw_tensor_but_the_loss_after_the_first_step(tmp_path):
    """What makes it cheap: the rules above read statistics, not tensors."""
    train(tmp_path / "run", default_hook=True, steps=30, eval_every=None)
    trial = mldbg.create_trial(tmp_path / "run")
    raw_after_first = {
        name
        for name in trial.tensor_names()
        for rec in (trial.records(name)[i] for i in range(len(trial.records(name))))
        if rec.has_raw and rec.step > 0
    }
    assert raw_after_first == {n for n in trial.tensor_names(collection="losses")}
