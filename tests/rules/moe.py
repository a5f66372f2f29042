"""A tiny mixture of experts with top-1 routing, for the rules' healthy twins: an expert that
gets no token in a batch gets no gradient (PyTorch leaves its `.grad` None), so Adam skips it
and its weights stand still for as long as the router sends it nothing. Healthy: the router
learns which expert serves which inputs; `starve` biases the router against the last expert
so that it gets tokens only at some steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

import mldbg.torch


class TopOneMoE(nn.Module):
    def __init__(
        self, n_in: int = 10, width: int = 16, experts: int = 4, n_out: int = 3, starve: float = 0.0
    ):
        super().__init__()
        self.router = nn.Linear(n_in, experts)
        self.experts = nn.ModuleList(nn.Linear(n_in, width) for _ in range(experts))
        self.out = nn.Linear(width, n_out)
        self.starve = starve

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.router(x)
        if self.starve:
            scores = scores - torch.tensor([0.0] * (scores.shape[1] - 1) + [self.starve])
        gate, choice = scores.softmax(-1).max(-1)
        h = torch.zeros(len(x), self.out.in_features)
        for e, expert in enumerate(self.experts):
            rows = (choice == e).nonzero().flatten()
            if len(rows):  # an expert without tokens is not called: no gradient reaches it
                h = h.index_add(0, rows, torch.relu(expert(x[rows])) * gate[rows, None])
        return self.out(h)


def train_moe(
    path: str | Path, *, steps: int = 60, starve: float = 2.5, batch: int = 16, seed: int = 0,
    hook_kwargs: dict[str, Any] | None = None, forget_expert: int | None = None,
) -> list[float]:  # fmt: skip
    """Train it; `forget_expert`: that expert's parameters are left out of the optimizer
    (the defect: its gradients come, nothing applies them)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1024, 10, generator=g)
    y = (x @ torch.randn(10, 3, generator=g)).argmax(1)
    model = TopOneMoE(starve=starve)
    left_out = set() if forget_expert is None else {id(p) for p in model.experts[forget_expert].parameters()}
    opt = torch.optim.Adam([p for p in model.parameters() if id(p) not in left_out], lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    hook = mldbg.torch.Hook(str(path), **(hook_kwargs or {}))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for _ in range(steps):
        idx = torch.randint(len(x), (batch,), generator=g)
        opt.zero_grad()
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    hook.close()
    return losses
