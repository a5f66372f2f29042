"""class_imbalance: fires on a real training with the defect (97% of the labels are class 0), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("imbalanced"), rules=["class_imbalance"])
    assert found, "class_imbalance did not fire on imbalanced"
    assert all(f.rule == "class_imbalance" for f in found)
    assert "outnumbers" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["class_imbalance"].default:
        found = [f for f in default_findings(name) if f.rule == "class_imbalance"]
    else:
        found = mldbg.check(run(name), rules=["class_imbalance"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["class_imbalance"].__name__ == "ClassImbalance"


def test_quiet_on_integer_valued_regression_targets(tmp_path):
    """Regression targets like 25..346 (diabetes) are not classes."""
    import numpy as np

    import mldbg
    from mldbg.record.recorder import Recorder

    rng = np.random.default_rng(0)
    rec = Recorder(
        tmp_path, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["labels", "predictions"]
    )
    for _ in range(40):
        rec.start_step(mldbg.Mode.TRAIN)
        y = rng.choice(
            np.array([25.0, 30.0, 31.0, 200.0, 346.0]), size=32, p=[0.9, 0.04, 0.03, 0.02, 0.01]
        ).astype(np.float32)
        rec.save("labels", y, rec.plan("labels", ("labels",)))
        rec.save("preds", y + rng.normal(0, 5, 32).astype(np.float32), rec.plan("preds", ("predictions",)))
        rec.end_step()
    rec.close()
    assert mldbg.check(tmp_path, rules=["class_imbalance", "confusion"]) == []


# -- imbalanced by nature and handled (blind3: segmentation, clicks, a weighted loss) ---------------
# Imbalanced labels are a property of the data; the finding needs a model that ignores the
# rare classes. Each of these fired at the first 500 labels on the labels alone before.


def _train(path, model, loss_fn, batches, lr=0.05, optimizer="sgd"):
    """Train with the two lines of the README (Hook(out_dir), defaults)."""
    import torch

    import mldbg.torch

    torch.manual_seed(0)
    opt = (
        torch.optim.Adam(model.parameters(), lr=lr)
        if optimizer == "adam"
        else torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    )
    hook = mldbg.torch.Hook(str(path))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for x, y in batches:
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


def test_quiet_on_segmentation_pixels_with_ignore_index(tmp_path):
    """Per-pixel labels (background ~85%, a small square of class 1..3, a 255 border
    ignored) scored by (batch, classes, H, W) logits: positions, not samples."""
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(0)

    def batch():
        x = 0.1 * torch.randn(8, 3, 16, 16, generator=g)
        y = torch.zeros(8, 16, 16, dtype=torch.long)
        for i in range(8):
            k = int(torch.randint(1, 4, (1,), generator=g))
            r, c = (int(v) for v in torch.randint(2, 10, (2,), generator=g))
            y[i, r - 1 : r + 5, c - 1 : c + 5] = 255
            y[i, r : r + 4, c : c + 4] = k
            x[i, k - 1, r : r + 4, c : c + 4] += 1.0
        return x, y

    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1))
    losses = _train(
        tmp_path / "run", model, nn.CrossEntropyLoss(ignore_index=255), [batch() for _ in range(30)]
    )
    assert losses[-1] < losses[0]
    assert mldbg.check(str(tmp_path / "run"), rules=["class_imbalance"]) == []


def test_quiet_on_click_logistic_regression(tmp_path):
    """One logit per sample, 5% positives: a calibrated model of rare events puts nearly every
    positive below 0.5 by design; a 0.5 recall is not what it learns."""
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(0)
    w = torch.randn(20, generator=g)

    def batch():
        x = torch.randn(128, 20, generator=g)
        y = (torch.rand(128, generator=g) < torch.sigmoid(0.5 * x @ w / 4.5 - 3.2)).float()
        return x, y

    model = nn.Sequential(nn.Linear(20, 1), nn.Flatten(0))
    losses = _train(tmp_path / "run", model, nn.BCEWithLogitsLoss(), [batch() for _ in range(40)])
    assert losses[-1] < losses[0]
    assert mldbg.check(str(tmp_path / "run"), rules=["class_imbalance"]) == []


def test_quiet_on_imbalance_handled_by_class_weights(tmp_path):
    """97% of the labels in class 0 (tests/defects.py's data), the loss weighted by inverse class
    frequency: the model learns the rare classes, so the imbalance is handled."""
    import torch
    from torch import nn

    from tests.tiny import make_data

    x, y = make_data(
        6 * 768, model="mlp", n_features=10, n_classes=3, channels=1, seed=1, teacher_seed=1234,
        imbalance=0.97, task="classification",
    )  # fmt: skip
    counts = torch.bincount(y, minlength=3).float()
    weight = counts.sum() / (3 * counts.clamp(min=1))
    g = torch.Generator().manual_seed(2)
    batches = []
    for _ in range(40):  # batches of 128: the statistics steps of the two lines hold ~80 rare labels
        idx = torch.randint(0, len(x), (128,), generator=g)
        batches.append((x[idx], y[idx]))
    for name, loss_fn in (("weighted", nn.CrossEntropyLoss(weight=weight)), ("plain", nn.CrossEntropyLoss())):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
        _train(tmp_path / name, model, loss_fn, batches, lr=0.01, optimizer="adam")
    assert mldbg.check(str(tmp_path / "weighted"), rules=["class_imbalance"]) == []
    # its twin without the weights: the model predicts class 0 for nearly everything
    found = mldbg.check(str(tmp_path / "plain"), rules=["class_imbalance"])
    assert [f.rule for f in found] == ["class_imbalance"], found
    assert "ignores the other classes" in found[0].message


def test_binomial_tail():
    from mldbg.rules.stats import binomial_tail

    assert binomial_tail(0, 20, 0.3) == pytest.approx(0.7**20)
    assert binomial_tail(3, 10, 0.5) == pytest.approx(176 / 1024)
    assert binomial_tail(10, 10, 0.3) == 1.0


# -- per-step targets of a sequence model (blind6: sketch-RNN's pen states) -------------------------


def test_quiet_on_per_step_targets_of_a_sequence_model(tmp_path):
    """A GRU reads (batch, steps, 5) float frames and predicts a 3-way state per step (the pen
    of a stroke decoder: 90% "down", the rest at random steps, unpredictable from the input), the
    targets flattened to (batch x steps,): their frequencies are those of the steps, not of a
    data set's samples. The same labels one per sample of a classifier of (batch, 5) rows are
    imbalanced labels the model ignores, and fire."""
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(0)
    steps = 24

    def frames(batch):
        x = torch.randn(batch, steps, 5, generator=g)
        u = torch.rand(batch, steps, generator=g)
        y = (u > 0.9).long() + (u > 0.975).long()  # 90% class 0, 7.5% class 1, 2.5% class 2
        return x, y

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(5, 16, batch_first=True)
            self.pen = nn.Linear(16, 3)

        def forward(self, x):
            return self.pen(self.gru(x)[0]).reshape(-1, 3)

    data = [frames(16) for _ in range(30)]
    torch.manual_seed(0)
    _train(tmp_path / "seq", Decoder(), nn.CrossEntropyLoss(), [(x, y.reshape(-1)) for x, y in data], lr=0.01,
           optimizer="adam")  # fmt: skip
    assert mldbg.check(str(tmp_path / "seq"), rules=["class_imbalance"]) == []
    torch.manual_seed(0)
    flat = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3))
    _train(tmp_path / "rows", flat, nn.CrossEntropyLoss(), [(x.reshape(-1, 5), y.reshape(-1)) for x, y in data],
           lr=0.01, optimizer="adam")  # fmt: skip
    found = mldbg.check(str(tmp_path / "rows"), rules=["class_imbalance"])
    assert [f.rule for f in found] == ["class_imbalance"], found


def test_quiet_on_the_pixels_a_reconstruction_scores(tmp_path):
    """A VAE-like autoencoder of sparse binary images (about 6% of the pixels on) trained with
    the functional binary cross-entropy per pixel: its targets are the images, one decision per
    element of (batch, 1, H, W) outputs, not a class per sample; the rare "on" pixels are still
    poorly reconstructed in the first steps, by nature, not by imbalance (blind25's FactorVAE)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)

    def images():
        x = torch.zeros(16, 1, 16, 16)
        for i in range(16):
            r, c = (int(v) for v in torch.randint(0, 12, (2,), generator=g))
            x[i, 0, r : r + 4, c : c + 4] = 1.0
        return x

    model = nn.Sequential(
        nn.Flatten(), nn.Linear(256, 32), nn.ReLU(), nn.Linear(32, 256), nn.Unflatten(1, (1, 16, 16))
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    hook = mldbg.torch.Hook(str(tmp_path))
    hook.register_module(model)
    losses = []
    for _ in range(60):
        x = images()
        loss = F.binary_cross_entropy_with_logits(model(x), x, reduction="sum") / len(x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    assert losses[-1] < losses[0]
    assert mldbg.check(str(tmp_path), rules=["class_imbalance"]) == []
