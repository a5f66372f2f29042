"""poor_weight_initialization: fires on a real training with the defect (all-zero weights: identical neurons, no gradient), quiet on healthy ones."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import mldbg
import mldbg.torch
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("zero_init"), rules=["poor_weight_initialization"])
    assert found, "poor_weight_initialization did not fire on zero_init"
    assert all(f.rule == "poor_weight_initialization" for f in found)
    assert "identical" in found[0].message or "degenerate" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["poor_weight_initialization"].default:
        found = [f for f in default_findings(name) if f.rule == "poor_weight_initialization"]
    else:
        found = mldbg.check(run(name), rules=["poor_weight_initialization"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["poor_weight_initialization"].__name__ == "PoorWeightInitialization"


def test_embedding_tables_are_left_out_whatever_their_name(tmp_path):
    """PyTorch's word_language_model names its nn.Embedding `encoder`; its N(0, 1) default init
    is healthy for a lookup table (one row per token, no fan-in): the hook puts it in the
    `embeddings` collection and the rule leaves it out. The same matrix as a Linear fires."""

    class LM(nn.Module):
        def __init__(self, table: nn.Module):
            super().__init__()
            self.encoder, self.decoder = table, nn.Linear(64, 50)

        def forward(self, x):
            h = self.encoder(x) if isinstance(self.encoder, nn.Embedding) else self.encoder(x.float())
            return self.decoder(torch.tanh(h))

    torch.manual_seed(0)
    found = {}
    for kind, table, x in [
        ("embedding", nn.Embedding(50, 64), torch.randint(0, 50, (16,))),
        ("linear", nn.Linear(50, 64), torch.randn(16, 50)),
    ]:
        if kind == "linear":
            nn.init.normal_(table.weight)  # N(0, 1) with a fan-in of 50: x50 the variance
        net, path = LM(table), tmp_path / kind
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        with mldbg.torch.Hook(str(path)) as hook:
            hook.register_module(net)
            for _ in range(12):
                opt.zero_grad()
                net(x).logsumexp(1).mean().backward()
                opt.step()
        found[kind] = mldbg.check(str(path), rules=["poor_weight_initialization"])
        if kind == "embedding":
            assert mldbg.create_trial(str(path)).tensor_names(collection="embeddings") == ["encoder.weight"]
    assert not found["embedding"], [str(f) for f in found["embedding"]]
    assert found["linear"] and "encoder.weight" in found["linear"][0].tensors
