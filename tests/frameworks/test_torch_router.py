"""The two-line hook finds a mixture of experts' routers and records the tokens per expert
every step (`expert_counts/<router>`), so `router_collapse` judges an MoE with no line more:
a router trained without a balancing loss collapses and is caught, its twin with the Switch
Transformer's balancing loss is quiet; a tiny Hugging Face Mixtral's routers are found (they
return `(logits, scores, indices)`); modules that only look like routers are left alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tests.rules.test_router_collapse import Net
from torch import nn

import mldbg
import mldbg.torch
from mldbg.frameworks.torch_router import find_routers


def train(path, balance: float, steps: int = 120) -> list[np.ndarray]:
    """`tests.rules.test_router_collapse`'s MoE classifier with the two lines only; returns
    the tokens per expert of each step, counted here from the router's logits."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    target = torch.randn(16, 8, generator=g)
    net = Net()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    counts = []
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(net)
        hook.register_loss(loss_fn)
        for _ in range(steps):
            x = torch.randn(256, 16, generator=g)
            y = (x @ target).argmax(1)
            opt.zero_grad()
            loss = loss_fn(net(x), y) + balance * net.moe.aux
            counts.append(np.bincount(net.moe.logits.detach().argmax(-1).numpy(), minlength=4))
            loss.backward()
            opt.step()
    return counts


def test_the_two_lines_record_the_tokens_per_expert_every_step(tmp_path):
    counts = train(tmp_path / "run", balance=0.1, steps=30)
    trial = mldbg.create_trial(tmp_path / "run")
    name = "expert_counts/moe.router"
    assert name in trial.tensor_names(collection="router")
    assert trial.tensor(name).steps() == list(range(30))
    for step in (0, 17, 29):
        np.testing.assert_array_equal(trial.tensor(name).value(step), counts[step])


def test_a_collapsing_router_is_caught_and_its_balanced_twin_is_quiet(tmp_path):
    counts = train(tmp_path / "collapse", balance=0.0)
    shares = [c.max() / c.sum() for c in counts]
    assert min(shares[100:]) > 0.9  # it collapsed, on its own
    found = [f for f in mldbg.check(tmp_path / "collapse") if f.rule == "router_collapse"]
    assert any("collapsed onto one expert" in f.message for f in found), found
    assert found[0].tensors == ["expert_counts/moe.router"]
    train(tmp_path / "balanced", balance=0.1)
    assert not [f for f in mldbg.check(tmp_path / "balanced") if f.rule == "router_collapse"]


def test_hugging_face_mixtral_routers_are_found_and_counted(tmp_path):
    """Mixtral's router (`MixtralTopKRouter`, no Linear: a weight and `F.linear`) returns
    `(logits, scores, indices)`; each layer's tokens per expert are recorded."""
    transformers = pytest.importorskip("transformers")
    config = transformers.MixtralConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.MixtralForCausalLM(config)
    names = [name for name, _, _ in find_routers(model)]
    assert names == ["model.layers.0.mlp.gate", "model.layers.1.mlp.gate"]
    ids = torch.randint(0, 64, (4, 12), generator=torch.Generator().manual_seed(0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        for _ in range(3):
            opt.zero_grad()
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
    trial = mldbg.create_trial(tmp_path / "run")
    for name in names:
        counts = trial.tensor(f"expert_counts/{name}").value(2)
        assert counts.shape == (4,) and counts.sum() == 4 * 12  # each token's top-1 expert


class SwiGLU(nn.Module):
    """A LLaMA MLP: a `gate_proj`, but no experts."""

    def __init__(self) -> None:
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = nn.Linear(8, 4), nn.Linear(8, 4), nn.Linear(4, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class SharedExpertMoE(nn.Module):
    """Qwen-MoE's shape: a router `gate`, experts, and a one-output `shared_expert_gate`; a
    DeepSpeed-style `wg` inside a gate module counts too."""

    def __init__(self) -> None:
        super().__init__()
        self.num_experts = 3
        self.gate = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 3))
        self.experts = nn.ModuleList(SwiGLU() for _ in range(3))
        self.shared_expert_gate = nn.Linear(8, 1)


def test_only_routers_are_taken_for_routers():
    """A SwiGLU's `gate_proj` is no router, nor a one-output `shared_expert_gate`; a noisy
    gate (noise on the logits after the router) routes on what the hook cannot see."""
    assert not list(find_routers(SwiGLU()))
    assert [name for name, _, _ in find_routers(Net())] == ["moe.router"]
    assert not list(find_routers(Net(noise=1.0)))
    found = [
        (name, type(layer).__name__, numbers) for name, layer, numbers in find_routers(SharedExpertMoE())
    ]
    assert found == [("gate.1", "Linear", frozenset({3}))]


@pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")
@pytest.mark.filterwarnings("ignore:.*does not have many workers.*")
@pytest.mark.filterwarnings("ignore:.*smaller than the logging interval.*")
@pytest.mark.parametrize("balance", [0.0, 0.1])
def test_through_the_lightning_callback(tmp_path, balance):
    """The same MoE as a LightningModule with mldbg's callback (no line about the router):
    without a balancing loss the collapse is found, with it the run is quiet."""
    pl = pytest.importorskip("lightning.pytorch")
    from torch.utils.data import DataLoader, TensorDataset

    from mldbg.lightning import DebuggerCallback

    class MoEModule(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = Net()

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y) + balance * self.net.moe.aux

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-2)

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(120 * 256, 16, generator=g)
    y = (x @ torch.randn(16, 8, generator=g)).argmax(1)
    trainer = pl.Trainer(
        accelerator="cpu", max_epochs=1, callbacks=[DebuggerCallback(tmp_path / "run")], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(MoEModule(), DataLoader(TensorDataset(x, y), batch_size=256))
    found = [f for f in mldbg.check(tmp_path / "run") if f.rule == "router_collapse"]
    if balance:
        assert not found, found
    else:
        assert found and found[0].tensors == ["expert_counts/net.moe.router"], found


def test_the_router_collection_is_added_only_where_a_router_is_found(tmp_path):
    """A model without experts leaves the two lines' schedule as it was (nothing more saved
    each step); a model with a router adds `router` at every step; collections the user
    chose are theirs."""
    with mldbg.torch.Hook(str(tmp_path / "plain")) as hook:
        hook.register_module(SwiGLU())
        assert "router" not in hook.recorder.collections.included
    with mldbg.torch.Hook(str(tmp_path / "moe")) as hook:
        hook.register_module(Net())
        assert "router" in hook.recorder.collections.included
    with mldbg.torch.Hook(str(tmp_path / "chosen"), include_collections=["losses"]) as hook:
        hook.register_module(Net())
        assert "router" not in hook.recorder.collections.included
