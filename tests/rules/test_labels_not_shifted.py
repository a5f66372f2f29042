"""labels_not_shifted: a tiny word LM trained on its own inputs as targets (the labels not
shifted) is found within 5 steps, through a functional loss, a registered module loss, a
model that returns its loss, and a functional loss plus an auxiliary term the model returns; its fixed twin (labels shifted by one) is quiet."""

from __future__ import annotations

import pytest

import mldbg
import mldbg.torch
from tests.rules.lm_defects import train_lm

RULE = ["labels_not_shifted"]


@pytest.mark.parametrize("loss", ["functional", "module", "returned", "aux"])
def test_unshifted_labels_are_found_within_five_steps(tmp_path, loss):
    train_lm(tmp_path / "bug", shift=0, loss=loss, steps=8)
    found = mldbg.check(str(tmp_path / "bug"), rules=RULE)
    assert found and found[0].step <= 5, found
    assert "copy" in found[0].message and "offset 0: 100%" in found[0].message, found[0].message
    train_lm(tmp_path / "twin", shift=1, loss=loss, steps=8)
    assert mldbg.check(str(tmp_path / "twin"), rules=RULE) == []


def test_the_diagnosis_is_the_label_shift(tmp_path):
    train_lm(tmp_path, shift=0, steps=8)
    causes = [d.cause for d in mldbg.diagnose(str(tmp_path))]
    assert "lm_labels_misaligned" in causes, causes


def test_sequence_first_batches_are_found(tmp_path):
    """PyTorch's word_language_model layout: (T, B) batches."""
    train_lm(tmp_path, shift=0, seq_first=True, steps=8)
    found = mldbg.check(str(tmp_path), rules=RULE)
    assert found and found[0].step <= 5, found


def test_targets_fed_to_a_decoder_that_shifts_them_itself_are_not_judged(tmp_path):
    """A pointer network sorting numbers: `model(x, targets)`, x floats, the targets (the
    positions in sorted order) fed under teacher forcing, each step reading the ones before
    it; its loss on those same targets is no copy of its input. The token ids of a call are
    not sought after a floating first argument (`torch_lm.token_ids`): quiet, and learning."""
    import torch
    from torch import nn

    class Pointer(nn.Module):
        def __init__(self, d: int = 32) -> None:
            super().__init__()
            self.enc = nn.Linear(1, d)
            self.cell = nn.GRUCell(d, d)
            self.start = nn.Parameter(torch.zeros(d))

        def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            e = torch.tanh(self.enc(x[..., None]))  # (B, n, d)
            h = e.mean(1)
            inp = self.start.expand_as(h)
            scores = []
            for t in range(x.shape[1]):
                h = self.cell(inp, h)
                scores.append((e @ h[..., None])[..., 0])  # attention over the input positions
                inp = e[torch.arange(len(x)), targets[:, t]]  # the chosen one feeds the next step
            return torch.stack(scores, 1)  # (B, n, n)

    torch.manual_seed(0)
    model, n = Pointer(), 6
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for _ in range(150):
            x = torch.rand(32, n)
            targets = x.argsort(1)
            loss = loss_fn(model(x, targets).reshape(-1, n), targets.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert sum(losses[-10:]) < 0.7 * sum(losses[:10])
    assert not mldbg.check(str(tmp_path), rules=["labels_not_shifted"])
