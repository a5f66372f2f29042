"""The language-model rules through `mldbg.lightning.DebuggerCallback`: a tiny GRU language
model as a LightningModule whose `training_step` computes `F.cross_entropy` on (x, y) batches.
Targets not shifted against the inputs or shifted twice, padding kept in the labels, a softmax
before the loss and a bidirectional GRU (no causal mask) are found within 5 steps; the fixed
twins (padding ignored with -100 too) are quiet."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from tests.rules.language_models import zipf_stream
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import mldbg

pl = pytest.importorskip("lightning.pytorch")

from mldbg.lightning import DebuggerCallback  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning"),
    pytest.mark.filterwarnings("ignore:.*does not have many workers.*"),
    pytest.mark.filterwarnings("ignore:.*smaller than the logging interval.*"),
]
VOCABULARY, LENGTH = 48, 16
RULES = [
    "labels_not_shifted",
    "labels_shifted_twice",
    "missing_causal_mask",
    "padding_in_loss",
    "softmax_before_cross_entropy",
]


class CharLM(pl.LightningModule):
    def __init__(self, softmax: bool = False, bidirectional: bool = False):
        super().__init__()
        self.emb = nn.Embedding(VOCABULARY, 32)
        self.rnn = nn.GRU(32, 32, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(64 if bidirectional else 32, VOCABULARY)
        self.softmax = softmax

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(self.emb(x))[0])

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        if self.softmax:
            logits = logits.softmax(-1)
        return F.cross_entropy(logits.reshape(-1, VOCABULARY), y.reshape(-1))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=3e-3)


PAD = 1  # a Zipf-frequent id: padding is told by its place


def _train(
    path, shift: int = 1, softmax: bool = False, bidirectional: bool = False, padding: str | None = None
) -> None:
    """`padding`: rows cut short and padded with PAD, the labels there PAD ("kept") or -100
    ("ignored")."""
    torch.manual_seed(0)
    stream = zipf_stream(64 * (LENGTH + 2), VOCABULARY, 0).view(64, LENGTH + 2)
    x, y = stream[:, :LENGTH].clone(), stream[:, shift : shift + LENGTH].clone()
    if padding is not None:
        g = torch.Generator().manual_seed(0)
        pad = torch.arange(LENGTH)[None, :] >= torch.randint(LENGTH // 3, LENGTH, (64, 1), generator=g)
        x[pad], y[pad] = PAD, PAD if padding == "kept" else -100
    data = TensorDataset(x, y)
    trainer = pl.Trainer(
        max_epochs=1, accelerator="cpu", callbacks=[DebuggerCallback(path)], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(CharLM(softmax, bidirectional), DataLoader(data, batch_size=8))


@pytest.mark.parametrize(
    ("kw", "rule"),
    [
        ({"shift": 0}, "labels_not_shifted"),
        ({"shift": 2}, "labels_shifted_twice"),
        ({"padding": "kept"}, "padding_in_loss"),
        ({"softmax": True}, "softmax_before_cross_entropy"),
        ({"bidirectional": True}, "missing_causal_mask"),
    ],
    ids=["not_shifted", "shifted_twice", "padding_kept", "softmax", "bidirectional"],
)
def test_language_model_mistakes_through_lightning(tmp_path, kw, rule):
    _train(tmp_path / "bug", **kw)
    found = mldbg.check(str(tmp_path / "bug"), rules=RULES)
    assert [f.rule for f in found] == [rule], found
    assert found[0].step <= 5, found


@pytest.mark.parametrize("padding", [None, "ignored"], ids=["unpadded", "padding_ignored"])
def test_the_fixed_twin_is_quiet(tmp_path, padding):
    _train(tmp_path, padding=padding)
    assert any(n.startswith("lm/align") for n in mldbg.create_trial(str(tmp_path)).tensor_names())
    assert mldbg.check(str(tmp_path), rules=RULES) == []
