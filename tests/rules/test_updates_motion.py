"""mldbg.rules.updates: the run's motion (`held_at`, `idle_tail`) is kept per view and grown
as a live run grows; what it answers is what a view opened on the same data from scratch
answers, and it covers a run's training steps by their global steps (evaluation steps
interleaved)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import mldbg
import mldbg.torch
from mldbg.config import Mode
from mldbg.rules.updates import _MOTION, held_at, idle_tail
from mldbg.rules.view import TrialView
from tests.tiny import train


def _answers(view: TrialView) -> tuple[list[int], list[bool], tuple[int, int, int] | None]:
    steps = view.columns.steps()
    return steps.tolist(), held_at(view, steps).tolist(), idle_tail(view)


def test_held_at_follows_a_live_run_as_a_fresh_view_does(tmp_path):
    """Training with SGD, then TRAIN forwards and backwards no optimizer step follows (EWC's
    Fisher pass: held, no learning rate recorded), then training again (learning-rate records
    added: the steps before them are no longer the run's idle tail). One view asked after
    each flush answers as a new view of the run so far does: the cached learning-rate steps
    and motion are renewed when the run grows."""
    torch.manual_seed(0)
    x, y = torch.randn(256, 8), torch.randint(0, 3, (256,))
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    path = tmp_path / "live"
    hook = mldbg.torch.Hook(str(path), statistics_every=2)
    hook.register_module(model)
    criterion = nn.CrossEntropyLoss()
    hook.register_loss(criterion)
    live = TrialView(mldbg.create_trial(str(path)))

    def step(update: bool) -> None:
        idx = torch.randint(0, 256, (32,))
        opt.zero_grad()
        criterion(model(x[idx]), y[idx]).backward()
        if update:
            opt.step()

    seen = []
    for phase, (n, update) in enumerate([(24, True), (12, False), (10, True)]):
        for i in range(n):
            step(update)
            if i % 4 == 3:
                hook.recorder.flush()
                live.trial.refresh()
                live.refreshed()
                got = _answers(live)
                fresh = _answers(TrialView(mldbg.create_trial(str(path))))
                assert got == fresh, (phase, i)
                seen.append((phase, got))
    hook.close()
    live.trial.refresh()
    live.refreshed()
    final = _answers(live)
    assert final == _answers(TrialView(mldbg.create_trial(str(path))))
    # the cache held something to renew: the idle tail was there during the Fisher pass and
    # is gone once the optimizer stepped again; some steps of that pass are held to the end
    assert any(phase == 1 and got[2] is not None for phase, got in seen)
    assert final[2] is None
    assert any(final[1])


def test_motion_covers_the_training_steps_by_their_global_steps(tmp_path):
    """A run that evaluates every 10 training steps: its training steps' global steps run
    past their count, and the motion covers each one where a weight's change was measured
    (up to the last), not the first as many global steps as there are training steps."""
    path = tmp_path / "run"
    train(path, steps=40, default_hook=True, hook_kwargs={"statistics_every": 1})
    view = TrialView(mldbg.create_trial(str(path)))
    steps = view.columns.steps()
    modes, _ = view.columns.modes(steps)
    assert (modes != int(Mode.TRAIN)).any()  # evaluation steps interleaved
    held_at(view, steps)
    motion = _MOTION[view]
    measured = []
    for s in steps[modes == int(Mode.TRAIN)].tolist():
        for name in view.names(("weights", "biases")):
            delta = view.statistic(name, s, "delta_l2")
            if isinstance(delta, float) and np.isfinite(delta):
                measured.append(s)
                break
    assert measured and motion.steps.tolist() == measured
    assert motion.steps[-1] > len(view.steps(Mode.TRAIN))  # past the count of training steps
