"""softmax_before_cross_entropy: a softmax before F.cross_entropy or nn.CrossEntropyLoss, and
probabilities given to F.nll_loss, are found within 5 steps, on a language model and on a
classifier; the fixed twins (logits; log_softmax twice; log(softmax) into nll_loss) are quiet."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mldbg
import mldbg.torch
from tests.rules.lm_defects import train_lm

RULE = ["softmax_before_cross_entropy"]


@pytest.mark.parametrize("loss", ["functional", "module"])
def test_a_softmax_before_the_cross_entropy_of_a_language_model(tmp_path, loss):
    train_lm(tmp_path / "bug", softmax=True, loss=loss, steps=8)
    found = mldbg.check(str(tmp_path / "bug"), rules=RULE)
    assert found and found[0].step <= 5, found
    assert "softmax feeds the cross-entropy" in found[0].message
    train_lm(tmp_path / "twin", loss=loss, steps=8)
    assert mldbg.check(str(tmp_path / "twin"), rules=RULE) == []


def _classifier(path, head: str, steps: int = 8) -> None:
    """A 3-class MLP on a fixed teacher's labels; `head` says what the loss is given."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(steps, 32, 10, generator=g)
    y = (x @ torch.randn(10, 3, generator=g)).argmax(-1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        for i in range(steps):
            opt.zero_grad()
            z = model(x[i])
            if head == "softmax":
                loss = F.cross_entropy(z.softmax(1), y[i])
            elif head == "nll_probabilities":
                loss = F.nll_loss(z.softmax(1), y[i])
            elif head == "log_softmax_twice":
                loss = F.cross_entropy(F.log_softmax(z, 1), y[i])
            elif head == "log_of_softmax":
                loss = F.nll_loss(z.softmax(1).clamp_min(1e-8).log(), y[i])
            else:
                loss = F.cross_entropy(z, y[i], label_smoothing=0.1)
            loss.backward()
            opt.step()


@pytest.mark.parametrize("head", ["softmax", "nll_probabilities"])
def test_a_classifier_given_probabilities_is_found(tmp_path, head):
    _classifier(tmp_path, head)
    found = mldbg.check(str(tmp_path), rules=RULE)
    assert found and found[0].step <= 5, found
    expected = "softmax feeds" if head == "softmax" else "nll_loss is given probabilities"
    assert expected in found[0].message, found[0].message
    causes = [d.cause for d in mldbg.diagnose(str(tmp_path))]
    assert "softmax_before_cross_entropy" in causes, causes


@pytest.mark.parametrize("head", ["log_softmax_twice", "log_of_softmax", "smoothed_logits"])
def test_correct_heads_are_quiet(tmp_path, head):
    _classifier(tmp_path, head)
    assert mldbg.check(str(tmp_path), rules=RULE) == []


class _Stages(nn.Module):
    """Two stages refining per-frame class scores (MS-TCN's shape): the second reads the
    first's softmax; every stage's output is stacked and each given to the loss. `probs`: each
    stage's output is a softmax (the bug), else its scores."""

    def __init__(self, probs: bool):
        super().__init__()
        self.probs = probs
        self.stage1 = nn.Conv1d(6, 4, 3, padding=1)
        self.stage2 = nn.Conv1d(4, 4, 3, padding=1)

    def forward(self, x):
        out = self.stage1(x)
        outputs = [out.softmax(1) if self.probs else out]
        out = self.stage2(out.softmax(1))
        outputs.append(out.softmax(1) if self.probs else out)
        return torch.stack(outputs)


@pytest.mark.parametrize("probs", [True, False], ids=["stages give probabilities", "stages give scores"])
def test_the_stacked_outputs_of_stages_given_to_the_loss_one_by_one(tmp_path, probs):
    """blind25's MS-TCN with the softmax moved to each stage's output was missed: between the
    softmax and the loss lie a stack and the loop's unbind, not reshapes only."""
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = _Stages(probs)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ce = nn.CrossEntropyLoss()  # as MS-TCN's script: a registered loss, called per stage
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        hook.register_loss(ce)
        for _ in range(8):
            x = torch.randn(4, 6, 20, generator=g)
            y = x[:, :4].argmax(1)
            loss = sum(ce(p.transpose(2, 1).contiguous().view(-1, 4), y.view(-1)) for p in model(x))
            opt.zero_grad()
            loss.backward()
            opt.step()
    found = mldbg.check(str(tmp_path), rules=RULE)
    assert bool(found) == probs, found
    if probs:
        assert "softmax feeds" in found[0].message and found[0].step <= 5
