"""The runner on long runs and many names: a rule is shown only the steps where its inputs were
saved, its fast path is asked a few times (not once per window of the run), the findings are
those of the reference path (every rule's `check` at every step), and many small tensors are
read together (`Trial.stacked_many`) with the values one tensor at a time would give."""

from __future__ import annotations

import numpy as np
import pytest

import mldbg
from mldbg.config import SaveConfig
from mldbg.record.recorder import Recorder
from mldbg.rules import BUILTIN
from mldbg.rules.runner import RuleRunner
from mldbg.trial.columns import Columns

STEPS = 3000
EVERY = 100  # the gradients' and weights' steps: 0, 100, 200...


def _record(path, nan_tail: bool = False, vanish: bool = False, blowup: bool = False) -> None:
    """A loss every step (noisy, falling) and a weight and its gradient every EVERY-th step;
    with `blowup`, an update at step 900 multiplies the weight by 50."""
    rec = Recorder(str(path), save_config=SaveConfig(save_interval=1))
    rng = np.random.default_rng(0)
    t = np.arange(STEPS)
    loss = (0.3 + 2.0 / (1 + t / 300)) * (1 + 0.05 * rng.standard_normal(STEPS))
    if nan_tail:
        loss[STEPS - 500 :] = np.nan
    w = rng.standard_normal((8, 8)).astype(np.float32)
    for step in range(STEPS):
        rec.start_step()
        rec.save_scalar("loss", float(loss[step]), collections=("losses",))
        if step % EVERY == 0:
            g = rng.standard_normal((8, 8)).astype(np.float32) * (1e-12 if vanish and step > 1000 else 1e-2)
            w = w - 0.1 * g
            if blowup and step == 900:
                w = w * 50
            rec.save_tensor("fc.weight", w, collections=("weights",))
            rec.save_tensor("gradient/fc.weight", g, collections=("gradients",))
        rec.end_step()
    rec.close()


def _counted(rule):
    calls = {"check": [], "check_columns": 0}
    check, fast = rule.check, getattr(rule, "check_columns", None)

    def counted_check(trial, step):
        calls["check"].append(step)
        return check(trial, step)

    def counted_fast(trial, steps):
        calls["check_columns"] += 1
        return fast(trial, steps)

    rule.check = counted_check
    if fast is not None:
        rule.check_columns = counted_fast
    return calls


def _run(path, rules, columns=True):
    runner = RuleRunner(str(path), rules, columns=columns)
    found = runner.run_available() + runner.finish()
    assert not runner.errors
    return [(f.rule, f.step, f.message) for f in found]


def test_a_rule_of_the_gradients_sees_only_the_gradients_steps(tmp_path):
    _record(tmp_path / "run", vanish=True)
    rule = BUILTIN["vanishing_gradient"]()
    calls = _counted(rule)
    _run(tmp_path / "run", [rule])
    saved = set(range(0, STEPS, EVERY))
    assert set(calls["check"]) <= saved  # never a step of the loss alone
    assert len(calls["check"]) + calls["check_columns"] <= 2 * len(saved)


@pytest.mark.parametrize("nan_tail", [False, True])
def test_the_loss_rules_fast_paths_are_asked_a_few_times(tmp_path, nan_tail):
    _record(tmp_path / "run", nan_tail=nan_tail)
    rules = [
        BUILTIN[n]() for n in ("loss_spike", "loss_divergence", "loss_not_decreasing", "exploding_tensor")
    ]
    counts = [_counted(r) for r in rules]
    _run(tmp_path / "run", rules)
    for rule, calls in zip(rules, counts, strict=True):
        # windows of 64, 256, 1024...: a handful per run, whatever its length
        assert calls["check_columns"] <= 40, (rule.name, calls["check_columns"])


@pytest.mark.parametrize("variant", [{}, {"nan_tail": True}, {"vanish": True}])
def test_findings_are_those_of_the_reference_path(tmp_path, variant):
    _record(tmp_path / "run", **variant)
    fast = _run(tmp_path / "run", None)
    reference = _run(tmp_path / "run", None, columns=False)
    assert fast == reference
    if variant:
        assert fast  # the NaN loss, the vanished gradients: found


def test_the_blowup_a_rule_names_is_looked_for_at_the_weights_steps_only(tmp_path, monkeypatch):
    """The update that blew a weight up, which vanishing_gradient (and dead_relu, all_zero)
    names as the cause, is looked for where the weights were saved: asked at each of 10^6
    steps of a long run's loss, it took 200 s of a 1-minute `check` (issue 30)."""
    from mldbg.rules import updates

    _record(tmp_path / "run", vanish=True, blowup=True)
    asked: list[int] = []
    real = updates.blown_weight
    monkeypatch.setattr(updates, "blown_weight", lambda trial, step: asked.append(step) or real(trial, step))
    fast = _run(tmp_path / "run", [BUILTIN["vanishing_gradient"]()])
    assert asked and set(asked) <= set(range(0, STEPS, EVERY))
    assert any("after the update at step 900" in message for _, _, message in fast), fast
    assert fast == _run(tmp_path / "run", [BUILTIN["vanishing_gradient"]()], columns=False)


def test_many_small_tensors_are_read_together_as_one_at_a_time_would(tmp_path):
    rec = Recorder(str(tmp_path / "run"), save_config=SaveConfig(save_interval=1))
    rng = np.random.default_rng(1)
    names = [f"metric/{i:03d}" for i in range(150)]
    for step in range(3):
        rec.start_step()
        for i, name in enumerate(names):
            if (i + step) % 7:  # not every name at every step
                rec.save_scalar(name, float(rng.standard_normal()))
        rec.end_step()
    rec.close()
    trial = mldbg.create_trial(str(tmp_path / "run"))
    columns = Columns(trial)
    for name in names:
        steps, values = columns.values(name)
        cols = columns.tensor(name)
        assert np.array_equal(steps, cols.steps)
        assert np.array_equal(values, trial.stacked(name, cols._pick))
        assert [int(s) for s in steps] == trial.tensor(name).steps()
    together = trial.stacked_many({n: columns.tensor(n)._pick for n in names}, 8)
    assert set(together) == set(names)
    assert not trial.stacked_many({names[0]: columns.tensor(names[0])._pick}, 4)  # too large: left out


@pytest.mark.parametrize("bad", [None, "nan", "inf"])
def test_many_small_tensors_judged_together_find_what_the_reference_finds(tmp_path, bad, monkeypatch):
    """exploding_tensor over more than 256 small tensors judges the raw ones together
    (`_raw_together`): scalars, float16 and float64 vectors, integers, a tensor of more
    records than it takes and one of statistics only: a NaN or inf in one value of one of
    them is found at the step the reference path finds it, and none is found where none is."""
    from mldbg.rules.builtin import exploding_tensor as module

    rec = Recorder(str(tmp_path / "run"), save_config=SaveConfig(save_interval=1))
    rng = np.random.default_rng(3)
    for step in range(6):
        rec.start_step()
        for i in range(300):
            if (i + step) % 5:  # not every name at every step
                rec.save_scalar(f"metric/{i:03d}", float(rng.standard_normal()))
        vec = rng.standard_normal(4)
        if bad and step == 4:
            vec[2] = np.nan if bad == "nan" else np.inf
        rec.save_tensor("vec16", vec.astype(np.float16), collections=("metrics",))
        rec.save_tensor("vec64", rng.standard_normal((2, 3)), collections=("metrics",))
        rec.save_tensor("ints", np.arange(3, dtype=np.int64) + step, collections=("metrics",))
        rec.end_step()
    for step in range(6, 80):  # one tensor of more records than `_FEW_RECORDS`
        rec.start_step()
        rec.save_scalar("long", float(step))
        rec.end_step()
    rec.close()
    taken = []
    together = module.ExplodingTensor._raw_together

    def spied(*args):
        rest = together(*args)
        taken.append((len(args[1]), len(rest)))
        return rest

    monkeypatch.setattr(module.ExplodingTensor, "_raw_together", staticmethod(spied))
    fast = _run(tmp_path / "run", ["exploding_tensor"])
    reference = _run(tmp_path / "run", ["exploding_tensor"], columns=False)
    assert taken and any(rest < n for n, rest in taken)  # the tensors were judged together
    assert fast == reference
    assert [(rule, step) for rule, step, _ in fast] == ([("exploding_tensor", 4)] if bad else [])
