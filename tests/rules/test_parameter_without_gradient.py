"""parameter_without_gradient: parameters an optimizer trains that never get a gradient,
though requires_grad is True (issue 27, item 3), on tiny real trainings with the two lines.

Fires: a reentrant `torch.utils.checkpoint` over frozen embeddings (its block never gets a
gradient); a branch cut by `.detach()` between two layers. Quiet twins: the same with
`use_reentrant=False`; the reentrant checkpoint over inputs that require a gradient; the
detached part frozen on purpose (requires_grad False, left out of the optimizer); a feature
extractor under `torch.no_grad()`; a mixture of experts whose rare expert gets no token for
many steps; an embedding whose rows are mostly unused; tied weights; an unused head (a
pooler beside the loss)."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.utils.checkpoint import checkpoint

import mldbg
import mldbg.torch
from tests.rules.conftest import assert_explains

VOCAB, DIM, SEQ = 50, 16, 8


class CheckpointedLM(nn.Module):
    """Embedding -> a checkpointed block -> head (a tiny language model)."""

    def __init__(self, reentrant: bool, tied: bool = False):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.block = nn.Sequential(nn.Linear(DIM, 32), nn.GELU(), nn.Linear(32, DIM))
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        if tied:
            self.head.weight = self.embed.weight
        self.reentrant = reentrant

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        h = h + checkpoint(self.block, h, use_reentrant=self.reentrant)
        return self.head(h)


class DetachedNet(nn.Module):
    """An encoder whose output reaches the head detached (`cut`), an unused pooler beside it."""

    def __init__(self, cut: bool, no_grad: bool = False):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32))
        self.pooler = nn.Linear(32, 32)  # computed, never used by the loss (healthy)
        self.head = nn.Linear(32, 3)
        self.cut, self.no_grad = cut, no_grad

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.no_grad:
            with torch.no_grad():
                h = self.encoder(x)
        else:
            h = self.encoder(x)
        self.pooled = self.pooler(h)
        return self.head(h.detach() if self.cut else h)


def _lm_batches(steps: int, g: torch.Generator) -> list[tuple[torch.Tensor, torch.Tensor]]:
    out = []
    for _ in range(steps):
        ids = torch.randint(0, 10, (8, SEQ + 1), generator=g)  # 10 of the 50 rows are ever used
        out.append((ids[:, :-1], ids[:, 1:]))
    return out


def train_lm(path, reentrant: bool, frozen_embeddings: bool, tied: bool = False, steps: int = 12) -> str:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    net = CheckpointedLM(reentrant, tied)
    if frozen_embeddings:
        net.embed.weight.requires_grad_(False)  # (tied: the head's weight is frozen with it)
    opt = torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=1e-2)
    with mldbg.torch.Hook(str(path)) as hook, warnings.catch_warnings():
        # torch warns "None of the inputs have requires_grad=True" for the buggy checkpoint
        warnings.simplefilter("ignore", UserWarning)
        hook.register_module(net)
        for x, y in _lm_batches(steps, g):
            opt.zero_grad()
            loss = F.cross_entropy(net(x).reshape(-1, VOCAB), y.reshape(-1))
            loss.backward()
            opt.step()
    return str(path)


def train_detached(
    path, cut: bool, frozen: bool = False, no_grad: bool = False, steps: int = 12, set_to_none: bool = True
) -> str:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    target = torch.randn(10, 3, generator=g)
    net = DetachedNet(cut, no_grad)
    if frozen:
        net.encoder.requires_grad_(False)
    opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(net)
        hook.register_loss(loss_fn)
        for _ in range(steps):
            x = torch.randn(32, 10, generator=g)
            opt.zero_grad(set_to_none=set_to_none)
            loss_fn(net(x), (x @ target).argmax(1)).backward()
            opt.step()
    return str(path)


def _found(path: str) -> list[mldbg.Finding]:
    return mldbg.check(path, rules=["parameter_without_gradient"])


def test_fires_on_a_reentrant_checkpoint_over_frozen_embeddings(tmp_path):
    found = _found(train_lm(tmp_path / "run", reentrant=True, frozen_embeddings=True))
    assert found, "missed"
    f = found[0]
    assert f.step <= 5, f  # present from step 0: found within 5 training steps
    assert set(f.tensors) == {"block.0.weight", "block.0.bias", "block.2.weight", "block.2.bias"}, f
    assert "use_reentrant" in f.message and "use_reentrant=False" in f.suggestion
    assert_explains(f)
    assert [d.cause for d in mldbg.diagnose(str(tmp_path / "run"), rules=["parameter_without_gradient"])] == [
        "gradients_interrupted"
    ]


@pytest.mark.parametrize("set_to_none", [True, False])
def test_fires_on_a_branch_cut_by_detach(tmp_path, set_to_none):
    """(zero_grad(set_to_none=False) zeroes only gradients that exist: the cut ones stay None.)"""
    found = _found(train_detached(tmp_path / "run", cut=True, set_to_none=set_to_none))
    assert found, "missed"
    f = found[0]
    assert f.step <= 5, f
    assert set(f.tensors) == {"encoder.0.weight", "encoder.0.bias", "encoder.2.weight", "encoder.2.bias"}, f
    assert ".detach()" in f.message
    assert_explains(f)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"reentrant": False, "frozen_embeddings": True},  # non-reentrant: gradients flow
        {"reentrant": True, "frozen_embeddings": False},  # the checkpoint's input needs a gradient
        {"reentrant": False, "frozen_embeddings": False, "tied": True},  # tied weights, rare rows
    ],
    ids=["non-reentrant", "reentrant-trainable-input", "tied"],
)
def test_quiet_on_checkpoint_twins(tmp_path, kwargs):
    assert not _found(train_lm(tmp_path / "run", **kwargs))


@pytest.mark.parametrize(
    "kwargs",
    [{"cut": False}, {"cut": True, "frozen": True}, {"cut": False, "no_grad": True}],
    ids=["connected", "frozen-on-purpose", "no-grad-extractor"],
)
def test_quiet_on_detach_twins(tmp_path, kwargs):
    """The unused pooler (its output never reaches the loss) is in the optimizer in each."""
    assert not _found(train_detached(tmp_path / "run", **kwargs))


def test_quiet_on_a_rare_expert(tmp_path):
    """A top-1 mixture of experts whose router sends no token to expert 3 for many steps (its
    logits biased against it): the expert did not run, so its missing gradient is no bug."""
    from tests.rules.test_router_collapse import Net

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    net = Net()
    with torch.no_grad():
        net.moe.router.bias.copy_(torch.tensor([0.0, 0.0, 0.0, -30.0]))
    target = torch.randn(16, 8, generator=g)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    path = str(tmp_path / "run")
    with mldbg.torch.Hook(path) as hook:
        hook.register_module(net)
        hook.register_loss(loss_fn)
        for _ in range(12):
            x = torch.randn(64, 16, generator=g)
            opt.zero_grad()
            loss_fn(net(x), (x @ target).argmax(1)).backward()
            opt.step()
    assert net.moe.experts[3][0].weight.grad is None  # it never got a token
    assert not _found(path)


@pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")
@pytest.mark.filterwarnings("ignore:.*does not have many workers.*")
@pytest.mark.filterwarnings("ignore:.*smaller than the logging interval.*")
@pytest.mark.parametrize("cut", [True, False], ids=["detached", "twin"])
def test_through_the_lightning_callback(tmp_path, cut):
    """The same cut in a LightningModule recorded with `mldbg.lightning.DebuggerCallback`."""
    pl = pytest.importorskip("lightning.pytorch")
    from torch.utils.data import DataLoader, TensorDataset

    from mldbg.lightning import DebuggerCallback

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = DetachedNet(cut)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 10, generator=g)
    y = (x @ torch.randn(10, 3, generator=g)).argmax(1)
    path = str(tmp_path / "run")
    trainer = pl.Trainer(
        accelerator="cpu", callbacks=[DebuggerCallback(path)], logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, max_steps=10,
    )  # fmt: skip
    trainer.fit(Module(), DataLoader(TensorDataset(x, y), batch_size=32))
    found = _found(path)
    if not cut:
        assert not found, found
        return
    assert found and found[0].step <= 5, found
    assert any(t.endswith("encoder.0.weight") for t in found[0].tensors), found[0]


@pytest.mark.parametrize(
    ("reentrant", "input_grads"),
    [(True, False), (False, False), (True, True)],
    ids=["reentrant-frozen-inputs", "non-reentrant", "reentrant-as-transformers-sets-it"],
)
def test_through_the_hugging_face_callback(tmp_path, reentrant, input_grads):
    """The classic: a Hugging Face model with gradient checkpointing (`use_reentrant=True`)
    and frozen embeddings, trained by a `Trainer` with `mldbg.transformers.DebuggerCallback`:
    its encoder layers get no gradient (transformers 5 makes the embeddings' output require
    a gradient when it checkpoints, `enable_input_require_grads`; earlier versions did not,
    which `disable_input_require_grads()` reproduces). The twins: no reentry; reentry with the
    inputs' gradient as transformers sets it up."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from mldbg.transformers import DebuggerCallback
    from tests.tiny import Tokens

    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(
        transformers.BertConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, vocab_size=100
        )
    )
    model.bert.embeddings.requires_grad_(False)
    kwargs = {"use_reentrant": reentrant}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if input_grads:
        model.enable_input_require_grads()
    elif hasattr(model, "disable_input_require_grads") and getattr(model, "_require_grads_hook", None):
        model.disable_input_require_grads()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"), per_device_train_batch_size=8, num_train_epochs=1, learning_rate=1e-3,
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, logging_strategy="no",
    )  # fmt: skip
    path = str(tmp_path / "run")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "None of the inputs have requires_grad=True"
        transformers.Trainer(
            model=model, args=args, train_dataset=Tokens(64), callbacks=[DebuggerCallback(path)]
        ).train()
    found = _found(path)
    if not reentrant or input_grads:
        assert not found, found
        return
    assert found and found[0].step <= 5, found
    assert any("encoder.layer.0." in t for t in found[0].tensors), found[0]
    assert "use_reentrant" in found[0].message
