"""A flat loss while the learning rate still warms up is the warm-up's, not a stall: the
PyTorch hook records each model's learning rate at statistics steps (`learning_rate/<model>`)
and `loss_not_decreasing` / `underfitting` wait while it rises. Without a recorded learning
rate, or once it stops rising, a flat loss is judged as before."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.torch import Hook
from tests.rules.conftest import fired

LR = "learning_rate/model"


def test_the_hook_records_the_learning_rate_of_each_update(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50))
    expected = []
    for _ in range(30):
        expected.append(opt.param_groups[0]["lr"])
        opt.zero_grad()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        opt.step()
        schedule.step()
    hook.close()
    t = mldbg.create_trial(str(tmp_path)).tensor(LR)
    got = {s: float(t.reduction_value(s, "sum")) for s in t.steps()}
    assert len(got) >= 20
    for step, value in got.items():
        assert value == pytest.approx(expected[step], rel=1e-6)


def _replay(path, loss: np.ndarray, lr: np.ndarray | None) -> str:
    rec = Recorder(str(path), save_config=mldbg.SaveConfig(save_interval=1), include_collections=["losses"])
    for i, x in enumerate(loss):
        rec.start_step(mldbg.Mode.TRAIN)
        rec.save_scalar("loss", float(x), ("losses",))
        if lr is not None and (i <= 20 or i % 100 == 0):
            rec.save_statistics(lambda v=float(lr[i]): {LR: {"sum": v}}, {LR: ("F32", (1,), ())}, 16)
        rec.end_step()
    rec.close()
    return str(path)


@pytest.mark.parametrize(
    ("schedule", "fires"),
    [("warming", False), ("none", True), ("constant", True)],
    ids=["the learning rate rises to the end", "no learning rate recorded", "a constant learning rate"],
)
def test_a_flat_loss_waits_for_the_warm_up(tmp_path, schedule, fires):
    """1,500 steps of a loss that barely moves (2.3, 5% noise): a long warm-up's first steps
    look like this, and so does a run whose learning rate is 0."""
    rng = np.random.default_rng(0)
    n = 1500
    loss = 2.3 * (1 + 0.05 * rng.standard_normal(n))
    lr = {"warming": np.arange(1, n + 1) / 20_000, "constant": np.full(n, 1e-3), "none": None}[schedule]
    path = _replay(tmp_path / schedule, loss, lr)
    found = fired(mldbg.check(path, rules=["loss_not_decreasing", "underfitting"]))
    assert bool(found) == fires, found
    if fires:
        assert set(found) == {"loss_not_decreasing", "underfitting"}
