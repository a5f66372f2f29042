"""nlp_sequence_ratio: padding-heavy token sequences fire, compact ones do not."""

from __future__ import annotations

import torch
from torch import nn

import mldbg
import mldbg.torch


class BagOfTokens(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 8, padding_idx=0)
        self.out = nn.Linear(8, 2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(tokens).mean(1))


def record(path, pad_share: float) -> str:
    torch.manual_seed(0)
    model, loss_fn = BagOfTokens(), nn.CrossEntropyLoss()
    hook = mldbg.torch.Hook(
        path, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["inputs", "losses"]
    )
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(10):
        tokens = torch.randint(1, 50, (16, 20))
        tokens[:, int(20 * (1 - pad_share)) :] = 0  # right padding
        opt.zero_grad()
        loss_fn(model(tokens), torch.randint(0, 2, (16,))).backward()
        opt.step()
    hook.close()
    return str(path)


def test_fires_on_padding_heavy_sequences(tmp_path):
    found = mldbg.check(record(tmp_path / "pad", 0.7), rules=["nlp_sequence_ratio"])
    assert len(found) == 1 and "token 0 is 70%" in found[0].message


def test_quiet_on_short_padding_and_custom_thresholds(tmp_path):
    path = record(tmp_path / "ok", 0.2)
    assert mldbg.check(path, rules=["nlp_sequence_ratio"]) == []
    assert mldbg.check(path, rules=["nlp_sequence_ratio:token_values=0,1,token_thresholds_percent=10,50"])
