"""A cross-entropy written in plain torch ops, with the two lines: `-(logp * onehot).sum(1).mean()`
(either order, label smoothing, a mixup's major class) and `-logp.gather(1, y[:, None]).mean()`
give their predictions and labels from what autograd saved (`torch_loss.written_cross_entropy`),
as `F.cross_entropy` does: class statistics, and the rules that read them (`class_imbalance`)
judge such a training; its balanced twin is quiet. A product of log-probabilities with
something that is no target (a per-class weight, soft targets without a majority class)
records no labels."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mldbg
import mldbg.torch
from mldbg.frameworks.torch_loss import saved_inputs

torch.set_num_threads(1)

N_IN, C, BATCH = 16, 4, 64


def _onehot(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return -(F.log_softmax(logits, 1) * F.one_hot(y, C).float()).sum(1).mean()


def _onehot_first(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return -(F.one_hot(y, C).float() * logits.log_softmax(-1)).sum(-1).mean()


def _smoothed(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    target = F.one_hot(y, C).float() * 0.9 + 0.1 / C
    return torch.sum(-target * F.log_softmax(logits, dim=-1), dim=-1).mean()


def _gather(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return -F.log_softmax(logits, 1).gather(1, y[:, None]).mean()


LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "onehot": _onehot,
    "onehot_first": _onehot_first,
    "smoothed": _smoothed,
    "gather": _gather,
}


@pytest.mark.parametrize("form", sorted(LOSSES))
def test_the_labels_of_a_written_cross_entropy_are_read_from_its_graph(form):
    torch.manual_seed(0)
    logits = torch.randn(8, C, requires_grad=True)
    y = torch.randint(0, C, (8,))
    found = saved_inputs(LOSSES[form](logits, y) / 2)  # through a scaling too
    assert found is not None and found[0] == "classes"
    np.testing.assert_array_equal(found[2].numpy(), y.numpy())
    np.testing.assert_allclose(found[1].detach().numpy(), F.log_softmax(logits, 1).detach().numpy())


def test_what_is_no_target_gives_no_labels():
    torch.manual_seed(0)
    logits = torch.randn(8, C, requires_grad=True)
    logp = F.log_softmax(logits, 1)
    assert saved_inputs(-(logp * torch.rand(C)).sum(1).mean()) is None  # a per-class weight
    assert saved_inputs((logp * 2.0).mean()) is None  # a scaling
    soft = torch.full((8, C), 1.0 / C)  # soft targets without a majority class: rows left out
    found = saved_inputs(-(logp * soft).sum(1).mean())
    assert found is not None and (found[2] == -1).all()
    assert saved_inputs((logits.softmax(1) * F.one_hot(torch.zeros(8, dtype=torch.long), C)).sum()) is None


def _train(path: Path, form: str, skew: float, steps: int = 25) -> None:
    """An MLP on a teacher's labels, a fraction `skew` of each batch relabelled class 0."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(N_IN, C, generator=g)
    net = nn.Sequential(nn.Linear(N_IN, 32), nn.ReLU(), nn.Linear(32, C))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(net)
        for _ in range(steps):
            x = torch.randn(BATCH, N_IN, generator=g)
            y = (x @ teacher).argmax(1)
            y[: int(skew * BATCH)] = 0
            opt.zero_grad()
            LOSSES[form](net(x), y).backward()
            opt.step()


@pytest.mark.parametrize("form", ["onehot", "gather"])
def test_class_imbalance_judges_a_written_cross_entropy_and_the_twin_is_quiet(tmp_path, form):
    _train(tmp_path / "skewed", form, skew=0.97)
    found = [f for f in mldbg.check(str(tmp_path / "skewed")) if f.rule == "class_imbalance"]
    assert found, "missed"
    trial = mldbg.create_trial(str(tmp_path / "skewed"))
    assert "loss_input_1" in trial.tensor_names(collection="labels")
    _train(tmp_path / "balanced", form, skew=0.0)
    assert [f.rule for f in mldbg.check(str(tmp_path / "balanced")) if f.rule == "class_imbalance"] == []
    assert "loss_input_1" in mldbg.create_trial(str(tmp_path / "balanced")).tensor_names(collection="labels")


LM_RULES = [
    "labels_not_shifted",
    "labels_shifted_twice",
    "missing_causal_mask",
    "padding_in_loss",
    "softmax_before_cross_entropy",
]


@pytest.mark.parametrize(
    ("kw", "rule"),
    [
        ({"shift": 0}, "labels_not_shifted"),
        ({"shift": 2}, "labels_shifted_twice"),
        ({"causal": False, "kind": "transformer"}, "missing_causal_mask"),
        ({"softmax": True}, "softmax_before_cross_entropy"),
    ],
    ids=["not_shifted", "shifted_twice", "no_causal_mask", "softmax"],
)
def test_a_language_model_with_a_written_cross_entropy_is_judged(tmp_path, kw, rule):
    """`-log_softmax(logits).gather(1, y).mean()`: the language-model counts come from the
    gather's log-probabilities and indices (`torch_lm.written_node`), as from `F.cross_entropy`'s
    node; padding is not judged (the script reduces the per-token terms itself: a mask may weigh
    them)."""
    from tests.rules.lm_defects import train_lm

    train_lm(tmp_path, loss="written", steps=8, lr=1e-2, **kw)
    found = {f.rule: f.step for f in reversed(mldbg.check(str(tmp_path), rules=LM_RULES))}
    assert list(found) == [rule] and found[rule] <= 5, found


@pytest.mark.parametrize("kind", ["gru", "transformer"])
def test_the_written_cross_entropy_twins_are_quiet(tmp_path, kind):
    from tests.rules.lm_defects import train_lm

    train_lm(tmp_path, loss="written", kind=kind, steps=30, lr=1e-2)
    assert "lm/align_0" in mldbg.create_trial(str(tmp_path)).tensor_names()  # judged
    assert mldbg.check(str(tmp_path), rules=LM_RULES) == []


def test_a_policy_gradient_is_no_cross_entropy_of_labels():
    """`-(logp.gather(1, actions) * advantages).mean()` gathers the actions an agent took, weighed
    by their advantages: no labels (a class_imbalance over actions would misread an RL run);
    nor a cross-entropy under a padding mask (its per-token terms weighed)."""
    from mldbg.frameworks import torch_lm

    torch.manual_seed(0)
    logits = torch.randn(16, C, requires_grad=True)
    logp = F.log_softmax(logits, 1)
    actions, advantages = torch.randint(0, C, (16,)), torch.randn(16, 1)
    pg = -(logp.gather(1, actions[:, None]) * advantages).mean()
    assert saved_inputs(pg) is None
    assert torch_lm.written_node(pg) is None
    mask = (torch.arange(16) < 12).float()
    masked = (-logp.gather(1, actions[:, None])[:, 0] * mask).sum() / mask.sum()
    assert saved_inputs(masked) is None and torch_lm.written_node(masked) is None
    plain = -logp.gather(1, actions[:, None]).mean() / 4.0  # a scaling is no weight
    assert saved_inputs(plain) is not None and torch_lm.written_node(plain) is not None
