"""Parameters that silently stop learning, caught with the two-line hook: a head attached
after the optimizer was built (its parameters are in no optimizer: unchanged, though they
get gradients) and an optimizer that stops stepping mid-run."""

from __future__ import annotations

import mldbg
from tests.rules.conftest import assert_explains, fired
from tests.tiny import train


def test_a_head_attached_after_the_optimizer_is_unchanged(tmp_path):
    run = train(tmp_path / "run", default_hook=True, late_head=True, optimizer="adam", steps=30)
    found = [f for f in mldbg.check(run.path) if f.rule == "unchanged_tensor"]
    assert found and found[0].step <= 3, [str(f) for f in found]
    assert set(found[0].tensors) == {"out.weight", "out.bias"}  # the head, not the body
    assert "gradients are not zero" in found[0].message
    assert_explains(found[0])


def test_an_optimizer_that_stops_stepping(tmp_path):
    run = train(tmp_path / "run", default_hook=True, stop_updating_at=15, steps=40)
    trial = mldbg.create_trial(run.path)
    stop = trial.global_step(mldbg.Mode.TRAIN, 15)
    found = [f for f in mldbg.check(run.path) if f.rule == "unchanged_tensor"]
    assert found, "unchanged_tensor did not fire"
    assert stop <= found[0].step <= stop + 10, (stop, found[0].step)
    assert "out.weight" in found[0].tensors and "fc1.weight" in found[0].tensors


def test_quiet_on_the_twins(tmp_path):
    for i, kwargs in enumerate([{"optimizer": "adam"}, {}]):
        run = train(tmp_path / f"run{i}", default_hook=True, steps=40, **kwargs)
        found = fired(mldbg.check(run.path))
        assert "unchanged_tensor" not in found and "loss_not_decreasing" not in found, found


def test_an_optimizer_that_stops_between_statistics_steps_is_reported_by_the_runs_end(tmp_path):
    """Statistics every 50th step (as the CPU budget spaces them on a slow step), the optimizer
    stops at step 120 while forwards and backwards go on. Steps where no optimizer stepped and
    nothing moved are held, not judged one by one (EWC's Fisher pass between tasks is such a
    stretch, and healthy): a run that ends in them is reported, at the latest by its end, never
    before the stop."""
    every = {"statistics_every": 50}
    run = train(tmp_path / "run", default_hook=True, stop_updating_at=120, steps=260, hook_kwargs=every)
    trial = mldbg.create_trial(run.path)
    weight_steps = trial.tensor("fc1.weight").steps(mldbg.Mode.TRAIN)  # training steps
    first_still = min(s for s in weight_steps if s > 120)  # the first statistics step after the stop
    found = [f for f in mldbg.check(run.path) if f.rule == "unchanged_tensor"]
    assert found, "unchanged_tensor did not fire"
    assert trial.mode_step(found[0].step) >= first_still, (first_still, trial.mode_step(found[0].step))
    assert "fc1.weight" in found[0].tensors
    healthy = train(tmp_path / "twin", default_hook=True, steps=260, hook_kwargs=every)
    assert "unchanged_tensor" not in fired(mldbg.check(healthy.path))
