"""loss_at_base_rates: a multi-label model (BCEWithLogitsLoss over 8 labels) trained on labels
shuffled apart from its inputs fires, with the diagnosis `labels_misaligned`; its healthy twins
(imbalanced labels, a slow start on a saddle) stay quiet. Real tiny trainings recorded with
the two lines of the README (`Hook(out_dir)`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mldbg
import mldbg.torch
from mldbg.rules import BUILTIN
from mldbg.rules.builtin.loss_at_base_rates import base_rate_loss, binary_entropy

RULES = ["default"]


def multi_label(
    out_dir,
    *,
    shuffle: bool = False,
    steps: int = 600,
    optimizer: str = "adam",
    depth: int = 2,
    seed: int = 0,
    register: bool = True,
    rates_shift: float = -5.0,
) -> None:
    """A ReLU MLP on 20 features and 8 labels from a fixed linear teacher, each label's
    threshold set so that its positive rate runs from ~1% to ~50% (`rates_shift`: the lowest
    label's offset); `shuffle`: the label rows permuted apart from the inputs."""
    torch.manual_seed(seed)
    n, d, labels = 2048, 20, 8
    x = torch.randn(n, d)
    teacher = torch.randn(d, labels)
    y = ((x @ teacher) / d**0.5 * 2 + torch.linspace(rates_shift, 0, labels) > 0).float()
    if shuffle:
        y = y[torch.randperm(n)]
    layers: list[nn.Module] = []
    width = d
    for _ in range(depth):
        layers += [nn.Linear(width, 64), nn.ReLU()]
        width = 64
    model = nn.Sequential(*layers, nn.Linear(width, labels))
    if optimizer == "adam":
        opt: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.BCEWithLogitsLoss()
    with mldbg.torch.Hook(str(out_dir)) as hook:
        hook.register_module(model)
        if register:
            hook.register_loss(loss_fn)
        for _ in range(steps):
            i = torch.randint(0, n, (64,))
            loss = loss_fn(model(x[i]), y[i])
            opt.zero_grad()
            loss.backward()
            opt.step()


def _ours(path) -> list:
    return [f for f in mldbg.check(str(path), rules=RULES) if f.rule == "loss_at_base_rates"]


def test_base_rate_loss_is_the_bce_of_predicting_the_rates():
    """The reference: torch's BCE of a constant prediction at each label's rate."""
    g = torch.Generator().manual_seed(0)
    y = (torch.rand(5000, 6, generator=g) < torch.tensor([0.01, 0.05, 0.2, 0.5, 0.7, 0.97])).float()
    rates = y.mean(0)
    expected = float(nn.functional.binary_cross_entropy(rates.expand_as(y), y))
    h, se = base_rate_loss(y.sum(0).numpy(), np.full(6, 5000.0))
    assert h == pytest.approx(expected, rel=1e-5)
    assert 0 < se < 0.01
    assert binary_entropy(np.array([0.0, 1.0, 0.5]))[2] == pytest.approx(np.log(2))
    assert binary_entropy(np.array([0.0, 1.0]))[:2].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("register", [True, False], ids=["registered_loss", "loss_at_backward"])
def test_fires_on_shuffled_multi_label(tmp_path, register):
    path = tmp_path / "run"
    multi_label(path, shuffle=True, register=register)
    found = _ours(path)
    assert found, "loss_at_base_rates did not fire on shuffled multi-label labels"
    assert "base rate" in found[0].message
    causes = [d.cause for d in mldbg.diagnose(str(path), rules=RULES)]
    assert "labels_misaligned" in causes, causes


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"rates_shift": -8.0},  # rarer labels: the lowest under 0.5%
        {"optimizer": "sgd", "depth": 4, "steps": 1200, "seed": 1},  # a saddle at the base rates, then a fall
    ],
    ids=["healthy", "healthy_imbalanced", "healthy_slow_start"],
)
def test_quiet_on_healthy_multi_label(tmp_path, kwargs):
    path = tmp_path / "run"
    multi_label(path, **kwargs)
    assert not _ours(path)


def test_quiet_on_single_label_runs(run):
    """Class-id labels (a cross-entropy's) are not per-label targets: never judged."""
    for name in ("healthy_relu_sgd", "random_labels"):
        found = mldbg.check(run(name), rules=["loss_at_base_rates"])
        assert not found, "\n".join(map(str, found))


def test_registered():
    assert BUILTIN["loss_at_base_rates"].__name__ == "LossAtBaseRates"
    assert BUILTIN["loss_at_base_rates"].cause == "labels_misaligned"
