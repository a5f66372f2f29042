"""The predictions and labels of a training loss where a trainer's callback records the loss
(`LossCapture.listen_for_counts`): class statistics of a Lightning classifier, a regression's
targets (a loss that rises with its targets is judged as chasing them), and labels a model
flattened from its (batch, length) `labels=` recorded per position again."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import mldbg
from mldbg.rules.view import TrialView
from mldbg.torch import Hook

pl = pytest.importorskip("lightning.pytorch")

from mldbg.lightning import DebuggerCallback  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning"),
    pytest.mark.filterwarnings("ignore:.*does not have many workers.*"),
    pytest.mark.filterwarnings("ignore:.*smaller than the logging interval.*"),
]
LOSS_RULES = {"loss_change_point", "loss_not_decreasing", "underfitting"}


class Regressor(pl.LightningModule):
    """A value regression whose targets are scaled by 1.0015 per step (a DQN's bootstrapped
    targets grow with the values it learns), or fixed."""

    def __init__(self, growing: bool, classes: int = 0):
        super().__init__()
        self.growing, self.classes = growing, classes
        self.net = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, classes or 1))

    def training_step(self, batch, _):
        x, y = batch
        if self.classes:
            return F.cross_entropy(self.net(x), y)
        scale = 1.0015**self.global_step if self.growing else 1.0
        return F.smooth_l1_loss(self.net(x).squeeze(1), scale * y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def _fit(path, module, data, epochs: int) -> None:
    pl.Trainer(
        max_epochs=epochs, accelerator="cpu", callbacks=[DebuggerCallback(str(path))], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    ).fit(module, data)  # fmt: skip


def _data(classes: int = 0) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12800, 8, generator=g)
    value = torch.tanh(x @ torch.randn(8, 4, generator=g)) @ torch.randn(4, generator=g)
    y = value + 0.3 * torch.randn(12800, generator=g)
    if classes:
        y = torch.bucketize(value, torch.quantile(value, torch.tensor([1 / 3, 2 / 3])))
    return DataLoader(TensorDataset(x, y), batch_size=128, shuffle=True, generator=g)


def test_lightning_records_the_class_statistics_of_its_loss(tmp_path):
    _fit(tmp_path, Regressor(False, classes=3), _data(classes=3), epochs=1)
    view = TrialView(mldbg.create_trial(str(tmp_path)))
    counts = view.statistic("loss_input_1", 0, "class_counts")
    assert counts is not None and int(np.sum(counts)) == 128  # the batch's labels, per class


def test_a_lightning_loss_rising_with_its_targets_is_quiet(tmp_path):
    torch.manual_seed(0)  # the model's init: not whatever the tests before left the generator at
    _fit(tmp_path, Regressor(True), _data(), epochs=15)  # 1,500 steps: the targets grow x9.5
    trial = mldbg.create_trial(str(tmp_path))
    loss = trial.tensor("loss")
    values = np.array([float(loss.value(s)) for s in loss.steps()])
    assert np.median(values[-200:]) > 4 * np.median(values[:200])  # it did rise, several-fold
    view = TrialView(trial)
    steps = trial.tensor("loss_input_1").steps()
    assert view.statistic("loss_input_1", steps[-1], "std") > 5 * view.statistic(
        "loss_input_1", steps[0], "std"
    )
    assert not {f.rule for f in mldbg.check(str(tmp_path))} & LOSS_RULES


class Seq2Seq(nn.Module):
    """Computes its own token loss from (batch, length) labels, flattened as Hugging Face's
    seq2seq models do: `CrossEntropyLoss()(logits.view(-1, V), labels.view(-1))`."""

    def __init__(self, vocab: int = 12):
        super().__init__()
        self.embed, self.out = nn.Embedding(vocab, 16), nn.Linear(16, vocab)

    def forward(self, ids, labels=None):
        logits = self.out(self.embed(ids))
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))
        return loss, logits


def test_labels_flattened_from_sequences_are_recorded_per_position(tmp_path):
    torch.manual_seed(0)
    model = Seq2Seq()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    for _ in range(3):
        ids = torch.randint(0, 12, (8, 5))
        loss, _ = model(ids, labels=(ids + 1) % 12)
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    view = TrialView(mldbg.create_trial(str(tmp_path)))
    assert view.layout("loss_input_1", 0) == ("i", (8, 5))
    assert view.layout("loss_input_0", 0) == ("f", (8, 5, 12))
