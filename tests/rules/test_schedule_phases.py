"""A script that trains in stages, each with its own optimizer and schedule, under one global
step: the loss rules read a new schedule of the recorded learning rate as a new phase
(`mldbg.rules.losses.schedule_restarts`), not as the loss of one phase diverging."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mldbg
import mldbg.torch
from mldbg.record.recorder import Recorder
from mldbg.rules.losses import schedule_restarts
from mldbg.rules.view import TrialView

LR = "learning_rate/model"  # as the PyTorch hook records a model's learning rate
LOSS_RULES = ["loss_spike", "loss_change_point", "loss_not_decreasing", "loss_divergence", "underfitting"]


def _warm_decay(opt: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """`get_linear_schedule_with_warmup`: up over a tenth of the steps, then down to 0."""
    warm = steps // 10
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda k: (k + 1) / warm if k < warm else max(0.0, (steps - k) / (steps - warm))
    )


class Distiller(nn.Module):
    """A teacher and its student in one module: `forward` runs the one the stage trains."""

    def __init__(self, teacher: nn.Module, student: nn.Module) -> None:
        super().__init__()
        self.teacher, self.student = teacher, student

    def forward(self, x: torch.Tensor, student: bool = False) -> torch.Tensor:
        return self.student(x) if student else self.teacher(x)


def staged(path, steps: tuple[int, int] = (700, 700), scheduled: bool = True, seed: int = 0) -> list[float]:
    """A teacher fine-tuned on a 3-class task (cross-entropy), then a student distilled from
    its hidden states (an MSE on features of scale ~10, the first stage of TinyBERT's recipe),
    both losses computed functionally, one training loop's global step. With `scheduled`,
    each stage has a fresh AdamW with its own warm-up and linear decay; without, one AdamW
    over both models at a constant rate steps both stages. `steps`: each stage's length."""
    torch.manual_seed(seed)
    n, d, k = 2048, 24, 3
    x = torch.randn(n, d)
    y = (x @ torch.randn(d, k)).argmax(1)
    teacher = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, k))
    student = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, 64))
    losses: list[float] = []
    with mldbg.torch.Hook(str(path)) as hook:
        # one distiller module holding both, as TinyBERT's does: the stages update different
        # parts of one model (two models registered apart would log a loss each)
        distiller = Distiller(teacher, student)
        hook.register_module(distiller)
        stages = [(teacher, lambda i: F.cross_entropy(distiller(x[i]), y[i])), (student, None)]
        both = torch.optim.AdamW([*teacher.parameters(), *student.parameters()], lr=3e-3)
        for (model, objective), length in zip(stages, steps, strict=True):
            opt = torch.optim.AdamW(model.parameters(), lr=3e-3) if scheduled else both
            sched = _warm_decay(opt, length) if scheduled else None
            for _ in range(length):
                i = torch.randint(0, n, (32,))
                if objective is None:  # the teacher's penultimate features, scaled as BERT's are
                    with torch.no_grad():
                        target = 8 * teacher[:4](x[i])
                    loss = F.mse_loss(distiller(x[i], student=True), target)
                else:
                    loss = objective(i)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if sched is not None:
                    sched.step()
                losses.append(loss.item())
    return losses


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("staged")
    return {s: (str(root / str(s)), staged(root / str(s), scheduled=s)) for s in (True, False)}


def test_a_short_last_stage_on_another_scale_is_judged_on_its_own(tmp_path, monkeypatch):
    """A long first stage and a short second one that ends far above where the first began
    (a fine-tune after a pretraining on another objective): read as one series, the loss
    rose over the run and does not fall over its later half, a stall; the phase the new
    schedule began falls from its own start, and no stall is reported."""
    import mldbg.rules.losses as losses

    x = np.asarray(staged(tmp_path / "run", steps=(1200, 300)))
    assert np.median(x[-50:]) > 2 * np.median(x[:20])  # ends above the first stage's start
    assert np.median(x[-50:]) < 0.8 * np.median(x[1200:1220])  # the second stage learns
    rules = ["loss_not_decreasing", "underfitting"]
    assert not mldbg.check(str(tmp_path / "run"), rules=rules)
    monkeypatch.setattr(losses, "_schedules", lambda view: [])
    assert {f.rule for f in mldbg.check(str(tmp_path / "run"), rules=rules)} == set(rules)


def test_a_stage_begun_with_its_own_schedule_is_a_new_phase(runs):
    """The student's loss opens far above the teacher's last (a new objective on another
    scale) and falls through its own schedule: no loss rule reports the jump. The same run
    whose stages share one optimizer at a constant rate gives no sign of a new phase, and
    the jump is read as the divergence it looks like: the schedule is what tells them apart."""
    path, x = runs[True]
    x = np.asarray(x)
    assert np.median(x[700:720]) > 5 * np.median(x[600:700])  # the jump
    assert np.median(x[-50:]) < 0.8 * np.median(x[700:720])  # the student learns
    restarts = schedule_restarts(TrialView(mldbg.create_trial(path)))
    # the student's first step records its learning rate (not only at the next statistics
    # step, 720): its warm-up's first, the low that its rise (seen at 720) starts from
    assert len(restarts) == 1 and 690 < restarts[0][0] <= 700 < restarts[0][1] <= 720, restarts
    assert not mldbg.check(path, rules=LOSS_RULES)
    path, _ = runs[False]
    assert not schedule_restarts(TrialView(mldbg.create_trial(path)))
    assert {f.rule for f in mldbg.check(path, rules=LOSS_RULES)} & {"loss_spike", "loss_not_decreasing"}


def test_schedules_that_never_rise_after_decaying_are_one_phase(tmp_path):
    """A warm-up at the start, a step schedule and a cosine to 0 never start over; a warm
    restart (SGDR) does, at each restart."""

    def restarts_of(lrs: np.ndarray) -> list[tuple[int, int]]:
        path = tmp_path / f"r{len(list(tmp_path.iterdir()))}"
        rec = Recorder(
            str(path), save_config=mldbg.SaveConfig(save_interval=1), include_collections=["losses"]
        )
        for i, lr in enumerate(lrs.tolist()):
            rec.start_step(mldbg.Mode.TRAIN)
            rec.save_scalar("loss", 1.0, ("losses",))
            if i % 100 == 0:
                rec.save_statistics(lambda v=lr: {LR: {"sum": v}}, {LR: ("F32", (1,), ())}, 16)
            rec.end_step()
        rec.close()
        return schedule_restarts(TrialView(mldbg.create_trial(str(path))))

    k = np.arange(3000)
    assert restarts_of(np.minimum(1.0, (k + 1) / 500) * 1e-3) == []  # warm-up, then constant
    assert restarts_of(1e-1 * 0.1 ** (k // 1000)) == []  # step
    assert restarts_of(1e-3 * np.minimum((k + 1) / 300, 0.5 * (1 + np.cos(np.pi * k / 3000)))) == []
    sgdr = 1e-3 * 0.5 * (1 + np.cos(np.pi * (k % 1000) / 1000))
    assert restarts_of(sgdr) == [(900, 1000), (1900, 2000)]
