"""Issue 27's kinds through `mldbg.lightning.DebuggerCallback`, those `test_lightning_lm.py` and
`test_lightning.py` do not train: a parameter cut off from its gradient; a mixture of experts
whose router concentrates; a model left in eval mode after a look at a fixed batch in
`on_train_batch_end` (`self.eval()` without `self.train()`); a manual optimization that
forgets `zero_grad()` under gradient clipping (`self.clip_gradients`). Each against its fixed
twin, quiet."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import mldbg

pl = pytest.importorskip("lightning.pytorch")

from tests.rules.test_parameter_without_gradient import DetachedNet  # noqa: E402
from tests.rules.test_router_collapse import Net  # noqa: E402

from mldbg.lightning import DebuggerCallback  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning"),
    pytest.mark.filterwarnings("ignore:.*does not have many workers.*"),
    pytest.mark.filterwarnings("ignore:.*smaller than the logging interval.*"),
]


def _fit(path, module: Any, data: DataLoader, epochs: int = 1, **hook_options: Any) -> None:
    pl.Trainer(
        max_epochs=epochs, accelerator="cpu", callbacks=[DebuggerCallback(path, **hook_options)], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    ).fit(module, data)  # fmt: skip


def _found(path, rules: list[str] | None = None) -> dict[str, int]:
    found: dict[str, int] = {}
    for f in mldbg.check(str(path), rules=rules):
        found.setdefault(f.rule, f.step)
    return found


def _classes(n: int = 192, features: int = 10, classes: int = 3, batch: int = 16) -> DataLoader:
    g = torch.Generator().manual_seed(1)
    x, target = torch.randn(n, features, generator=g), torch.randn(features, classes, generator=g)
    return DataLoader(TensorDataset(x, (x @ target).argmax(1)), batch_size=batch)


class Classifier(pl.LightningModule):
    """A classifier around `net`, trained with SGD (automatic optimization)."""

    def __init__(self, net: nn.Module, lr: float = 0.05, adam: bool = False):
        super().__init__()
        self.net, self.lr, self.adam = net, lr, adam

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y) + self.extra()

    def extra(self) -> torch.Tensor | float:
        return 0.0

    def configure_optimizers(self):
        opt = torch.optim.Adam if self.adam else torch.optim.SGD
        return opt(self.parameters(), lr=self.lr)


# a parameter without gradient ---------------------------------------------------------------
def test_a_detached_branch_is_found_and_the_twin_is_quiet(tmp_path):
    torch.manual_seed(0)
    _fit(tmp_path / "cut", Classifier(DetachedNet(cut=True)), _classes())
    found = mldbg.check(str(tmp_path / "cut"), rules=["parameter_without_gradient"])
    assert found and found[0].step <= 5, found
    assert {"net.encoder.0.weight", "net.encoder.2.weight"} <= set(found[0].tensors), found
    torch.manual_seed(0)
    _fit(tmp_path / "twin", Classifier(DetachedNet(cut=False)), _classes())
    assert mldbg.check(str(tmp_path / "twin"), rules=["parameter_without_gradient"]) == []


# dynamo's warning as it traces to the graph break at the module's own hook (mldbg's code never
# enters a graph: `Attached`); an error under pytest
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_a_compiled_modules_detached_branch_is_found_and_the_twin_is_quiet(tmp_path):
    """`trainer.fit(torch.compile(module))` (Lightning compiles its steps): the callback runs a
    statistics step's batch eagerly (`torch_compiled`), where the cut shows; the other batches
    run compiled (statistics at steps 0-1, then every 3rd)."""
    from torch._dynamo.utils import counters

    options = {"statistics_warmup": 2, "statistics_every": 3}
    torch.manual_seed(0)
    torch._dynamo.reset()
    counters.clear()
    cut = torch.compile(Classifier(DetachedNet(cut=True)), backend="aot_eager")
    _fit(tmp_path / "cut", cut, _classes(), **options)
    assert counters["stats"]["unique_graphs"] >= 1  # the other batches ran compiled
    assert torch._dynamo.eval_frame._stance.stance == "default"
    found = mldbg.check(str(tmp_path / "cut"), rules=["parameter_without_gradient"])
    assert found and found[0].step <= 5, found
    torch.manual_seed(0)
    twin = torch.compile(Classifier(DetachedNet(cut=False)), backend="aot_eager")
    _fit(tmp_path / "twin", twin, _classes(), **options)
    assert mldbg.check(str(tmp_path / "twin"), rules=["parameter_without_gradient"]) == []


# a router that concentrates -----------------------------------------------------------------
class MoE(Classifier):
    def __init__(self, balance: float):
        super().__init__(Net(), lr=1e-2, adam=True)
        self.balance = balance

    def extra(self) -> torch.Tensor | float:
        return self.balance * self.net.moe.aux


def test_a_concentrating_router_is_found_and_the_balanced_twin_is_quiet(tmp_path):
    """tests/rules/test_router_collapse.py's MoE (Adam lr 1e-2, batches of 256): without a
    balancing loss the top expert passes twice its fair share and collapses; with the Switch
    Transformer's balancing loss it is quiet."""
    data = _classes(n=100 * 256, features=16, classes=8, batch=256)
    torch.manual_seed(0)
    _fit(tmp_path / "bug", MoE(0.0), data)
    found = [f for f in mldbg.check(str(tmp_path / "bug")) if f.rule == "router_collapse"]
    assert found and found[0].tensors == ["expert_counts/net.moe.router"], found
    torch.manual_seed(0)
    _fit(tmp_path / "twin", MoE(0.1), data)
    assert "router_collapse" not in _found(tmp_path / "twin")
    assert (
        len(mldbg.create_trial(str(tmp_path / "twin")).tensor("expert_counts/net.moe.router").steps()) >= 90
    )


# training in eval mode ----------------------------------------------------------------------
class LooksAtAFixedBatch(Classifier):
    """Every 4th batch, `on_train_batch_end` scores a fixed batch in eval mode (a sample for a
    log), and forgets `self.train()` unless `restore`: the next batches train with dropout off."""

    def __init__(self, restore: bool):
        super().__init__(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3)))
        self.restore = restore
        self.fixed = torch.randn(4, 10)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if batch_idx % 4 == 0:
            self.eval()
            with torch.no_grad():
                self(self.fixed)
            if self.restore:
                self.train()


def test_a_model_left_in_eval_mode_is_found_and_the_twin_is_quiet(tmp_path):
    torch.manual_seed(0)
    _fit(tmp_path / "bug", LooksAtAFixedBatch(restore=False), _classes())
    found = _found(tmp_path / "bug")
    assert found.get("train_in_eval_mode", 99) <= 5, found
    torch.manual_seed(0)
    _fit(tmp_path / "twin", LooksAtAFixedBatch(restore=True), _classes())
    assert "train_in_eval_mode" not in _found(tmp_path / "twin")


# a missing zero_grad under clipping ---------------------------------------------------------
class Clipped(Classifier):
    """Manual optimization clipped with `self.clip_gradients` (norm 0.1, binding at every
    step), `zero_grad()` forgotten unless `reset`."""

    def __init__(self, reset: bool):
        super().__init__(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3)))
        self.automatic_optimization = False
        self.reset = reset

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        if self.reset:
            opt.zero_grad()
        self.manual_backward(loss)
        self.clip_gradients(opt, gradient_clip_val=0.1, gradient_clip_algorithm="norm")
        opt.step()
        return loss


def test_a_missing_zero_grad_under_clipping_is_found_and_the_twin_is_quiet(tmp_path):
    torch.manual_seed(0)
    _fit(tmp_path / "bug", Clipped(reset=False), _classes(n=384))
    found = _found(tmp_path / "bug", ["gradient_not_reset"])
    assert found.get("gradient_not_reset", 99) <= 5, found
    torch.manual_seed(0)
    _fit(tmp_path / "twin", Clipped(reset=True), _classes(n=384))
    assert _found(tmp_path / "twin", ["gradient_not_reset"]) == {}
