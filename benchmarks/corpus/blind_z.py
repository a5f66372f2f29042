"""The nineteenth blind held-out set (issue 26), part Z: code as beginners and Kaggle notebooks
write it and as popular public tutorials show it, shrunk to tiny data generated in-process,
fixed seeds, one CPU thread. Plain PyTorch loops with the README's two lines (`register_loss`
where the script has a loss module) and trainings through tools with their one callback.

Plain PyTorch: 5-fold cross-validation of a Titanic-style MLP (one-hot features built with
`np.eye` and numpy standardization fitted on each fold, five fresh models trained in one run);
a house-prices regression on `log1p(SalePrice)` (the skewed areas, often 0, through `np.log1p`,
the MSE's root being the competition's RMSLE) with early stopping on a validation split and the
best `state_dict` reloaded; the Kaggle Digit Recognizer as a `Dataset` of 784-pixel uint8 rows
reshaped and divided by 255 in `__getitem__`, `DataLoader(num_workers=0)`, a two-conv CNN,
`MultiplicativeLR` per epoch and a `model.eval()` / `torch.no_grad()` accuracy every epoch; a pair-distance embedding with
`HingeEmbeddingLoss` (+1 / -1 pair labels); a multi-label glyph tagger with
`MultiLabelSoftMarginLoss` and a `ChainedScheduler` of `ConstantLR` and `ExponentialLR`; a
"ViT from scratch" patch classifier whose patches come from `F.unfold`, one
`nn.MultiheadAttention` layer and mean pooling; pseudo-labelling in two rounds (a teacher
trained on the labelled rows, its confident predictions on unlabelled rows added, a second model
trained on both); checkpoint-and-resume mid-run (a 1-D CNN with BatchNorm and dropout trained for
half its epochs, `torch.save` of model, optimizer, scheduler and epoch, then a new model and
optimizer rebuilt and `load_state_dict` before the rest); a spam-style bag-of-words classifier
on +1 / -1 labels with `SoftMarginLoss` and Adagrad; the names-by-language classifier on
characters with `nn.RNN` over `pack_sequence(enforce_sorted=False)` and `NLLLoss` on
`LogSoftmax`; a multi-output regression (one trunk, three targets standardized, per-target MSE
summed, `CosineAnnealingLR` per epoch, clipping at 1.0); a stacked-LSTM multi-horizon forecaster
on min-max-scaled sliding windows with dropout between layers; an LR range test (the lr grown
exponentially until the loss passes four times its best, the initial weights restored) followed
by the real training at a tenth of the lr of the smoothed minimum under `OneCycleLR`.

Through tools: Lightning (`mldbg.lightning.DebuggerCallback`): a convolutional autoencoder on
MNIST-like digits with a `Sigmoid` output and `nn.BCELoss`, a validation loss each epoch;
Hugging Face `Trainer` (`mldbg.transformers.DebuggerCallback`): a tiny random
`MobileBertForSequenceClassification` with cosine schedule and accumulation; Keras 3
(`mldbg.keras.Hook`): a `Sequential` `SimpleRNN` forecaster on sliding windows of a noisy sine.

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the names RNN's `learning_rate = 0.5` typed for 0.005 (lr_x100), the pair-distance loop
without `optimizer.zero_grad()` (no_zero_grad), the k-fold labels shuffled apart from their rows
by a `np.random.shuffle(y)` (shuffled_labels), the digit `Dataset` missing its `/ 255.0`
(inputs_x255), the patch classifier ending in `nn.Softmax(dim=1)` before `CrossEntropyLoss`
(softmax_before_ce), the spam model's init filling biases with -1 under std 0.01 weights
(dead_relu_init), the multi-output trunk of eight `Sigmoid` layers (deep_sigmoid), the tagger's
convolutional features left `requires_grad=False` from a transfer-learning cell after the
optimizer was built (frozen_by_mistake), the skewed house areas through `np.log` instead of
`np.log1p`, so the houses without a basement or porch get -inf features (log_zero_nan), and the
recipe's `model.eval()` kept after the checkpoint reload (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND18`.
"""

from __future__ import annotations

import copy
import math
import os
import random
import shutil
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from mldbg.torch import Hook

from . import BLIND18, buggy, healthy, installed

SPLIT = BLIND18

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 181)


# ============================================================================= tabular


def _titanic(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    pclass = rng.integers(0, 3, n)
    sex = rng.integers(0, 2, n)
    port = rng.integers(0, 3, n)
    age = np.clip(rng.normal(30, 14, n), 1, 80)
    fare = np.exp(rng.normal(3.0 - 0.6 * pclass, 0.6))
    sibsp = rng.poisson(0.5, n)
    logit = 1.5 * sex - 0.9 * pclass + 0.6 - 0.02 * (age - 30) + 0.15 * np.log(fare) - 0.3 * sibsp
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    onehot = np.concatenate([np.eye(3)[pclass], np.eye(2)[sex], np.eye(3)[port]], 1)
    numeric = np.stack([age, np.log1p(fare), sibsp], 1)
    return np.concatenate([onehot, numeric], 1).astype(np.float32), y


def kfold_titanic_mlp(path: str, epochs: int = 12, seed: int = 0, bug: str | None = None) -> list[float]:
    """5-fold cross-validation of a Titanic-style survival MLP, numpy only: class, sex and port
    one-hot through `np.eye`, age, log fare and siblings standardized with the training fold's
    mean and std; per fold a fresh Linear 11-32-16-1 ReLU net with dropout 0.2,
    `BCEWithLogitsLoss`, Adam 1e-3, batch 32; the out-of-fold accuracy of each fold."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 7)
    x, y = _titanic(rng, 900)
    if bug == "shuffled_labels":  # bug: "shuffle the data" done on y alone
        np.random.shuffle(y)
    folds = np.array_split(rng.permutation(len(x)), 5)
    loss_fn = nn.BCEWithLogitsLoss()
    hook = Hook(path)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for k, val_idx in enumerate(folds):
        tr_idx = np.concatenate([f for j, f in enumerate(folds) if j != k])
        xtr, xva = x[tr_idx].copy(), x[val_idx].copy()
        mu, sd = xtr[:, 8:].mean(0), xtr[:, 8:].std(0) + 1e-6
        xtr[:, 8:] = (xtr[:, 8:] - mu) / sd
        xva[:, 8:] = (xva[:, 8:] - mu) / sd
        model = nn.Sequential(
            nn.Linear(11, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 1)
        )
        hook.register_module(model)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        xt, yt = torch.from_numpy(xtr), torch.from_numpy(y[tr_idx])
        for _ in range(epochs):
            model.train()
            perm = torch.randperm(len(xt), generator=g)
            for i in range(0, len(xt), 32):
                b = perm[i : i + 32]
                loss = loss_fn(model(xt[b]).squeeze(1), yt[b])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (
                (model(torch.from_numpy(xva)).squeeze(1) > 0).float() == torch.from_numpy(y[val_idx])
            ).float()
        print(f"fold {k}: accuracy {acc.mean():.3f}")
    hook.close()
    return losses


def house_prices_log_target(
    path: str, epochs: int = 60, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Kaggle house-prices MLP on a log target: the skewed areas (lot, basement, porch; many
    houses have no basement or porch, an area of 0) through `np.log1p`, then all numeric
    columns standardized in numpy, a one-hot neighbourhood; the target `log1p(SalePrice)`, so
    the MSE's root is the competition's RMSLE; a 21-64-32-1 ReLU net, `MSELoss`, Adam 1e-3
    with weight decay 1e-4, batch 64; the validation RMSLE each epoch under `torch.no_grad()`,
    early stopping with patience 8 and the best `state_dict` (deep-copied) reloaded."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 11)
    n = 1400
    lot = rng.lognormal(9.0, 0.5, n)
    bsmt = rng.lognormal(6.8, 0.4, n) * (rng.random(n) > 0.15)
    porch = rng.lognormal(4.0, 0.8, n) * (rng.random(n) > 0.5)
    rooms = rng.integers(3, 11, n)
    age = rng.integers(0, 100, n)
    qual = rng.integers(1, 11, n)
    hood = rng.integers(0, 15, n)
    hood_eff = rng.normal(0, 0.25, 15)
    price = np.exp(
        11.0 + 0.2 * (np.log(lot) - 9) + 0.0002 * bsmt + 0.08 * (qual - 5) - 0.003 * age + 0.03 * rooms
        + 0.05 * (porch > 0) + hood_eff[hood] + rng.normal(0, 0.1, n)
    )  # fmt: skip
    skewed = np.stack([lot, bsmt, porch], 1)
    # bug: np.log on areas that are 0 for houses without a basement or porch gives -inf
    skewed = np.log(skewed) if bug == "log_zero_nan" else np.log1p(skewed)
    numeric = np.concatenate([skewed, np.stack([rooms, age, qual], 1)], 1)
    numeric = (numeric - numeric[:1100].mean(0)) / numeric[:1100].std(0)
    x = torch.tensor(np.concatenate([numeric, np.eye(15)[hood]], 1), dtype=torch.float32)
    y = torch.tensor(np.log1p(price), dtype=torch.float32)
    model = nn.Sequential(nn.Linear(21, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    best, best_state, bad = float("inf"), copy.deepcopy(model.state_dict()), 0
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(1100, generator=g)
        for i in range(0, 1100, 64):
            b = perm[i : i + 64]
            loss = criterion(model(x[b]).squeeze(1), y[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val = math.sqrt(criterion(model(x[1100:]).squeeze(1), y[1100:]).item())
        if val < best - 1e-4:
            best, best_state, bad = val, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
            if bad >= 8:
                print(f"early stop at epoch {epoch}")
                break
    model.load_state_dict(best_state)
    print(f"best validation RMSLE {best:.4f}")
    hook.close()
    return losses


def multi_output_regression(
    path: str, epochs: int = 30, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A multi-output regression as Kaggle notebooks write it (energy-efficiency style: heating
    load, cooling load and a third target from eight building features): one trunk 8-64-64, one
    Linear head per target, targets standardized, the per-target `MSELoss` summed, Adam 1e-3
    with `CosineAnnealingLR` stepped per epoch, `clip_grad_norm_(1.0)`, batch 32, the
    validation R^2 of each target under `torch.no_grad()`."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 13)
    n = 1200
    x = rng.normal(size=(n, 8)).astype(np.float32)
    t1 = 3 * x[:, 0] + np.sin(2 * x[:, 1]) + x[:, 2] * x[:, 3]
    t2 = 2 * x[:, 0] - x[:, 4] ** 2 + 0.5 * x[:, 5]
    t3 = np.tanh(x[:, 6] + x[:, 7]) * 5 + x[:, 1]
    yy = np.stack([t1, t2, t3], 1) * np.array([20.0, 5.0, 1.0]) + rng.normal(0, 0.3, (n, 3))
    yy = ((yy - yy[:1000].mean(0)) / yy[:1000].std(0)).astype(np.float32)
    xt, yt = torch.from_numpy(x), torch.from_numpy(yy)

    class MultiOut(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if bug == "deep_sigmoid":  # bug: the old tutorial's eight sigmoid layers
                layers: list[nn.Module] = [nn.Linear(8, 64), nn.Sigmoid()]
                for _ in range(7):
                    layers += [nn.Linear(64, 64), nn.Sigmoid()]
                self.trunk = nn.Sequential(*layers)
            else:
                self.trunk = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
            self.heads = nn.ModuleList([nn.Linear(64, 1) for _ in range(3)])

        def forward(self, v: torch.Tensor) -> list[torch.Tensor]:
            h = self.trunk(v)
            return [head(h).squeeze(1) for head in self.heads]

    model = MultiOut()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(1000, generator=g)
        for i in range(0, 1000, 32):
            b = perm[i : i + 32]
            outs = model(xt[b])
            loss = sum(criterion(o, yt[b, j]) for j, o in enumerate(outs))
            assert isinstance(loss, torch.Tensor)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        if epoch % 10 == 9:
            model.eval()
            with torch.no_grad():
                outs = model(xt[1000:])
                r2 = [
                    1 - float(((o - yt[1000:, j]) ** 2).mean() / yt[1000:, j].var())
                    for j, o in enumerate(outs)
                ]
            print(f"epoch {epoch + 1}: R2 {[round(r, 3) for r in r2]}")
    hook.close()
    return losses


# ============================================================================= images


def _digits(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """28x28 uint8 "digits": ten smooth random prototypes, shifted by up to 2 pixels, noised."""
    protos = F.interpolate(
        torch.rand(10, 1, 7, 7, generator=g), size=28, mode="bilinear", align_corners=False
    )
    protos = (protos > 0.55).float()
    labels = torch.randint(0, 10, (n,), generator=g)
    imgs = protos[labels]
    shifts = torch.randint(-2, 3, (n, 2), generator=g)
    imgs = torch.stack(
        [torch.roll(im, (int(s[0]), int(s[1])), (1, 2)) for im, s in zip(imgs, shifts, strict=True)]
    )
    imgs = (imgs * 200 + 30 * torch.rand(imgs.shape, generator=g)).clamp(0, 255)
    return imgs.to(torch.uint8), labels


def digit_recognizer_dataset_cnn(
    path: str, epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The Kaggle Digit Recognizer kernel: train.csv as rows of a label and 784 uint8 pixels, a
    `Dataset` whose `__getitem__` reshapes a row to 1x28x28 and divides by 255,
    `DataLoader(batch_size=64, shuffle=True, num_workers=0)`, Conv(32)-ReLU-MaxPool-Conv(64)-
    ReLU-MaxPool-Dropout(0.25)-Linear(128)-Linear(10), `CrossEntropyLoss`, Adam 1e-3 with
    `MultiplicativeLR(lambda epoch: 0.7)` stepped per epoch, a validation accuracy each epoch
    under `model.eval()` and `torch.no_grad()`."""
    g = _seed(seed)
    imgs, labels = _digits(g, 2400)
    table = torch.cat([labels[:, None], imgs.reshape(len(imgs), -1).long()], 1).numpy()  # like pd.read_csv

    class DigitDataset(Dataset):
        def __init__(self, rows: np.ndarray) -> None:
            self.rows = rows

        def __len__(self) -> int:
            return len(self.rows)

        def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
            pixels = torch.tensor(self.rows[i, 1:], dtype=torch.float32).reshape(1, 28, 28)
            if bug != "inputs_x255":  # bug: the division by 255 left out
                pixels = pixels / 255.0
            return pixels, int(self.rows[i, 0])

    train = DataLoader(DigitDataset(table[:2000]), batch_size=64, shuffle=True, num_workers=0, generator=g)
    val = DataLoader(DigitDataset(table[2000:]), batch_size=200, num_workers=0)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10),
    )  # fmt: skip
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.MultiplicativeLR(optimizer, lr_lambda=lambda epoch: 0.7)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for images, target in train:
            optimizer.zero_grad()
            loss = criterion(model(images), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for images, target in val:
                correct += int((model(images).argmax(1) == target).sum())
        print(f"epoch {epoch + 1}: val accuracy {correct / 400:.3f}")
    hook.close()
    return losses


def _glyphs(g: torch.Generator, n: int, size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Images holding any subset of four shapes (square, bar, cross, dot), as multi-hot tags."""
    tags = (torch.rand(n, 4, generator=g) < 0.4).float()
    imgs = 0.15 * torch.randn(n, 1, size, size, generator=g)
    for i in range(n):
        for t in range(4):
            if tags[i, t] > 0:
                r, c = (int(v) for v in torch.randint(0, size - 5, (2,), generator=g))
                if t == 0:
                    imgs[i, 0, r : r + 5, c : c + 5] += 1.0
                elif t == 1:
                    imgs[i, 0, r : r + 5, c + 2] += 1.0
                elif t == 2:
                    imgs[i, 0, r + 2, c : c + 5] += 1.0
                    imgs[i, 0, r : r + 5, c + 2] += 1.0
                else:
                    imgs[i, 0, r + 2 : r + 4, c + 2 : c + 4] -= 1.0
    return imgs, tags


def multilabel_softmargin_tagger(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A multi-label image tagger (the "planet: understanding the Amazon" kernels' shape, tiny):
    a 3-block CNN `features` and a Linear `classifier` on 4 tags, `MultiLabelSoftMarginLoss`,
    Adam 2e-3 under a `ChainedScheduler` of `ConstantLR(factor=0.5, total_iters=2)` and
    `ExponentialLR(0.9)` stepped per epoch, batch 32; the F1 at threshold 0.5 on a held-out set."""
    g = _seed(seed)
    x, y = _glyphs(g, 1200)

    class Tagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveMaxPool2d(1),
            )  # fmt: skip
            self.classifier = nn.Linear(64, 4)

        def forward(self, v: torch.Tensor) -> torch.Tensor:
            return self.classifier(self.features(v).flatten(1))

    model = Tagger()
    criterion = nn.MultiLabelSoftMarginLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    if bug == "frozen_by_mistake":  # bug: a transfer-learning cell's freeze, run after the optimizer
        for p in model.features.parameters():
            p.requires_grad = False
    scheduler = torch.optim.lr_scheduler.ChainedScheduler(
        [
            torch.optim.lr_scheduler.ConstantLR(optimizer, factor=0.5, total_iters=2),
            torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9),
        ]
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(1000, generator=g)
        for i in range(0, 1000, 32):
            b = perm[i : i + 32]
            loss = criterion(model(x[b]), y[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            pred = (torch.sigmoid(model(x[1000:])) > 0.5).float()
        tp = (pred * y[1000:]).sum()
        f1 = 2 * tp / (pred.sum() + y[1000:].sum()).clamp(min=1)
        print(f"epoch {epoch + 1}: F1 {float(f1):.3f}")
    hook.close()
    return losses


def unfold_patch_attention_classifier(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A "vision transformer from scratch" blog post: 28x28 digits cut into 7x7 patches by
    `F.unfold(kernel_size=7, stride=7)`, a Linear patch embedding plus a learned position
    embedding, one `nn.MultiheadAttention(64, 4, batch_first=True)` layer with a residual and
    LayerNorm, a feed-forward, mean pooling, a Linear head; `CrossEntropyLoss`, AdamW 1e-3,
    batch 64, the validation accuracy each epoch."""
    g = _seed(seed)
    imgs, labels = _digits(g, 2200)
    x = imgs.float() / 255.0

    class PatchNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(49, 64)
            self.pos = nn.Parameter(torch.zeros(1, 16, 64))
            self.attn = nn.MultiheadAttention(64, 4, batch_first=True)
            self.norm1 = nn.LayerNorm(64)
            self.ff = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))
            self.norm2 = nn.LayerNorm(64)
            self.head = nn.Linear(64, 10)
            self.softmax = nn.Softmax(dim=1) if bug == "softmax_before_ce" else None  # bug

        def forward(self, v: torch.Tensor) -> torch.Tensor:
            patches = F.unfold(v, kernel_size=7, stride=7).transpose(1, 2)  # (B, 16, 49)
            h = self.embed(patches) + self.pos
            a, _ = self.attn(h, h, h)
            h = self.norm1(h + a)
            h = self.norm2(h + self.ff(h))
            out = self.head(h.mean(1))
            return self.softmax(out) if self.softmax is not None else out

    model = PatchNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(2000, generator=g)
        for i in range(0, 2000, 64):
            b = perm[i : i + 64]
            loss = criterion(model(x[b]), labels[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x[2000:]).argmax(1) == labels[2000:]).float().mean()
        print(f"epoch {epoch + 1}: accuracy {float(acc):.3f}")
    hook.close()
    return losses


def hinge_embedding_pairs(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """Pairwise metric learning with `nn.HingeEmbeddingLoss(margin=2.0)` (the PyTorch docs'
    shape: the input is the pair's L2 distance, the target +1 for same-class pairs and -1 for
    different ones): an MLP 20-64-16 on ten-class Gaussian clusters, balanced pairs of 128, SGD
    0.05 momentum 0.9; the nearest-centroid accuracy of the embeddings at the end."""
    g = _seed(seed)
    centers = 1.2 * torch.randn(10, 20, generator=g)
    labels = torch.randint(0, 10, (3000,), generator=g)
    x = centers[labels] + torch.randn(3000, 20, generator=g)
    by_class = [torch.nonzero(labels == c).squeeze(1) for c in range(10)]
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))
    criterion = nn.HingeEmbeddingLoss(margin=2.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for _ in range(steps):
        a = torch.randint(0, 2500, (128,), generator=g)
        same = torch.rand(128, generator=g) < 0.5
        b = torch.randint(0, 2500, (128,), generator=g)
        for j in torch.nonzero(same).squeeze(1).tolist():
            pool = by_class[int(labels[a[j]])]
            b[j] = pool[int(torch.randint(0, len(pool), (1,), generator=g))]
        target = torch.where(labels[a] == labels[b], 1.0, -1.0)
        dist = F.pairwise_distance(model(x[a]), model(x[b]))
        loss = criterion(dist, target)
        if bug != "no_zero_grad":  # bug: optimizer.zero_grad() forgotten
            optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        emb = model(x)
        cent = torch.stack([emb[:2500][labels[:2500] == c].mean(0) for c in range(10)])
        acc = (torch.cdist(emb[2500:], cent).argmin(1) == labels[2500:]).float().mean()
    print(f"nearest-centroid accuracy {float(acc):.3f}")
    hook.close()
    return losses


# ============================================================================= training-loop idioms


def pseudo_label_two_rounds(path: str, epochs: int = 25, seed: int = 0) -> list[float]:
    """Pseudo-labelling as Kaggle competitors do it: 300 labelled and 2000 unlabelled rows of a
    five-class tabular problem; round 1 trains a 30-128-64-5 MLP (BatchNorm, dropout 0.3) on the
    labelled rows, its predictions with max probability above 0.9 become labels, round 2 trains
    a fresh model on both; `CrossEntropyLoss`, Adam 1e-3, batch 64, the test accuracy of each
    round."""
    g = _seed(seed)
    w = torch.randn(30, 5, generator=g)
    x = torch.randn(2800, 30, generator=g)
    y = (
        x @ w + 0.3 * torch.tanh(x[:, :5] * x[:, 5:10]) @ w[:5] + 0.3 * torch.randn(2800, 5, generator=g)
    ).argmax(1)
    xl, yl, xu, xte, yte = x[:300], y[:300], x[300:2300], x[2300:], y[2300:]
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_loss(criterion)
    losses: list[float] = []

    def make() -> nn.Module:
        return nn.Sequential(
            nn.Linear(30, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.3),
            nn.Linear(128, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 5),
        )  # fmt: skip

    def fit(model: nn.Module, xs: torch.Tensor, ys: torch.Tensor) -> None:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(epochs):
            model.train()
            perm = torch.randperm(len(xs), generator=g)
            for i in range(0, len(xs) - 8, 64):
                b = perm[i : i + 64]
                loss = criterion(model(xs[b]), ys[b])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())

    teacher = make()
    hook.register_module(teacher)
    fit(teacher, xl, yl)
    teacher.eval()
    with torch.no_grad():
        probs = torch.softmax(teacher(xu), 1)
        print(f"round 1 test accuracy {float((teacher(xte).argmax(1) == yte).float().mean()):.3f}")
    conf, pseudo = probs.max(1)
    keep = conf > 0.9
    print(f"pseudo-labels kept {int(keep.sum())} / {len(xu)}")
    student = make()
    hook.register_module(student)
    fit(student, torch.cat([xl, xu[keep]]), torch.cat([yl, pseudo[keep]]))
    student.eval()
    with torch.no_grad():
        print(f"round 2 test accuracy {float((student(xte).argmax(1) == yte).float().mean()):.3f}")
    hook.close()
    return losses


def checkpoint_resume_mid_run(
    path: str, epochs: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Checkpoint and resume (the PyTorch "saving and loading a general checkpoint" recipe) in
    the middle of one run: a 1-D CNN (Conv1d-BatchNorm-ReLU twice, global average pooling,
    dropout 0.3, Linear) on three-class noisy waveforms, SGD 0.05 momentum 0.9 with `StepLR(3,
    0.5)`; after 5 epochs `torch.save({"epoch", "model_state_dict", "optimizer_state_dict",
    "scheduler_state_dict", "loss"})`, then a new model, optimizer and scheduler rebuilt, loaded
    and trained to the end; `CrossEntropyLoss`, batch 32."""
    g = _seed(seed)
    n, length = 1500, 64
    labels = torch.randint(0, 3, (n,), generator=g)
    t = torch.linspace(0, 1, length)
    freq = torch.tensor([3.0, 5.0, 8.0])[labels] + 0.5 * torch.randn(n, generator=g)
    phase = 6.28 * torch.rand(n, generator=g)
    x = torch.sin(6.28 * freq[:, None] * t[None] + phase[:, None])
    x = (x + 0.6 * torch.randn(n, length, generator=g)).unsqueeze(1)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Sequential(
                nn.Conv1d(1, 16, 7, padding=3), nn.BatchNorm1d(16), nn.ReLU(),
                nn.Conv1d(16, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU(),
            )  # fmt: skip
            self.drop = nn.Dropout(0.3)
            self.fc = nn.Linear(32, 3)

        def forward(self, v: torch.Tensor) -> torch.Tensor:
            return self.fc(self.drop(self.conv(v).mean(2)))

    def build() -> tuple[nn.Module, Any, Any]:
        model = Net()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        return model, optimizer, torch.optim.lr_scheduler.StepLR(optimizer, 3, 0.5)

    criterion = nn.CrossEntropyLoss()
    model, optimizer, scheduler = build()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    ckpt = os.path.join(path, "checkpoint.pt")
    losses: list[float] = []

    def train_epochs(first: int, last: int) -> float:
        running = 0.0
        for _ in range(first, last):
            running = 0.0
            perm = torch.randperm(1200, generator=g)
            for i in range(0, 1200, 32):
                b = perm[i : i + 32]
                loss = criterion(model(x[b]), labels[b])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                batch_loss = loss.item()
                losses.append(batch_loss)
                running += batch_loss
            scheduler.step()
        return running / 38

    model.train()
    last_loss = train_epochs(0, epochs // 2)
    torch.save(
        {
            "epoch": epochs // 2, "model_state_dict": model.state_dict(),
            "optimizer_state_dict": optimizer.state_dict(),
            "scheduler_state_dict": scheduler.state_dict(), "loss": last_loss,
        },
        ckpt,
    )  # fmt: skip
    # resume as a new process would: rebuild everything, load the checkpoint
    model, optimizer, scheduler = build()
    state = torch.load(ckpt)
    model.load_state_dict(state["model_state_dict"])
    optimizer.load_state_dict(state["optimizer_state_dict"])
    scheduler.load_state_dict(state["scheduler_state_dict"])
    hook.register_module(model)
    if bug == "train_in_eval_mode":  # bug: the recipe's `model.eval()` line kept to resume training
        model.eval()
    else:
        model.train()
    train_epochs(state["epoch"], epochs)
    model.eval()
    with torch.no_grad():
        acc = (model(x[1200:]).argmax(1) == labels[1200:]).float().mean()
    print(f"resumed from epoch {state['epoch']} (loss {state['loss']:.3f}); accuracy {float(acc):.3f}")
    os.remove(ckpt)
    hook.close()
    return losses


# ============================================================================= text and sequences


def spam_softmargin_bow(path: str, epochs: int = 10, seed: int = 0, bug: str | None = None) -> list[float]:
    """A spam filter on a bag-of-words count matrix (CountVectorizer-style, 500 words, the
    counts `log1p`-scaled) with labels in {-1, +1} and `nn.SoftMarginLoss` (the logistic loss
    on the margin y * f(x)); an MLP 500-64-1 with ReLU and dropout 0.2, weights initialized by
    an `init_weights` applied with `model.apply` (normal std 0.01, biases 0.01), Adagrad 0.05,
    batch 50; the test accuracy each epoch."""
    g = _seed(seed)
    n, vocab = 2500, 500
    spam = torch.rand(n, generator=g) < 0.4
    rates = (torch.rand(1, vocab, generator=g) ** 3 * 0.3).repeat(2, 1)
    rates[1, :40] += 0.04
    rates[0, 40:80] += 0.03
    counts = torch.poisson(rates[spam.long()] * 3, generator=g)
    x = torch.log1p(counts)
    y = spam.float() * 2 - 1

    model = nn.Sequential(nn.Linear(vocab, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 1))

    def init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.01)
            nn.init.constant_(m.bias, -1.0 if bug == "dead_relu_init" else 0.01)  # bug: -1 for 0.01

    model.apply(init_weights)
    criterion = nn.SoftMarginLoss()
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(2000, generator=g)
        for i in range(0, 2000, 50):
            b = perm[i : i + 50]
            loss = criterion(model(x[b]).squeeze(1), y[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (torch.sign(model(x[2000:]).squeeze(1)) == y[2000:]).float().mean()
        print(f"epoch {epoch + 1}: accuracy {float(acc):.3f}")
    hook.close()
    return losses


def _make_names(g: torch.Generator, n: int) -> tuple[list[str], torch.Tensor]:
    """Made-up names from six "languages", each its own letter bigram habits and endings."""
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    endings = ["ov", "ez", "ini", "son", "ou", "ski"]
    names, langs = [], torch.randint(0, 6, (n,), generator=g)
    letter_sets = [(alphabet * 2)[4 * k : 4 * k + 9] for k in range(6)]
    for lang in langs.tolist():
        k = int(torch.randint(2, 7, (1,), generator=g))
        letters = letter_sets[lang]
        stem = "".join(
            letters[int(i)] if torch.rand(1, generator=g) < 0.7 else alphabet[int(j)]
            for i, j in zip(
                torch.randint(0, 9, (k,), generator=g), torch.randint(0, 26, (k,), generator=g), strict=True
            )
        )
        names.append(stem.capitalize() + (endings[lang] if torch.rand(1, generator=g) < 0.6 else ""))
    return names, langs


def char_rnn_names_packed(path: str, epochs: int = 12, seed: int = 0, bug: str | None = None) -> list[float]:
    """The PyTorch tutorial "classifying names with a character-level RNN", batched: names as
    one-hot letter sequences (52 letters + punctuation), `pack_sequence(enforce_sorted=False)`
    into `nn.RNN(57, 128)`, the last hidden state through a Linear and `LogSoftmax`,
    `NLLLoss`, SGD at the tutorial's `learning_rate = 0.005` scaled to a batch of 32 (0.05 with
    momentum 0.9), clipping at 3; the accuracy on held-out names each epoch."""
    g = _seed(seed)
    all_letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ .,;'"
    names, langs = _make_names(g, 2400)

    def line_to_tensor(line: str) -> torch.Tensor:
        t = torch.zeros(len(line), len(all_letters))
        for i, ch in enumerate(line):
            t[i, all_letters.find(ch)] = 1.0
        return t

    seqs = [line_to_tensor(s) for s in names]

    class RNNClassifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.RNN(len(all_letters), 128)
            self.h2o = nn.Linear(128, 6)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, batch: list[torch.Tensor]) -> torch.Tensor:
            packed = nn.utils.rnn.pack_sequence(batch, enforce_sorted=False)
            _, hidden = self.rnn(packed)
            return self.softmax(self.h2o(hidden[0]))

    model = RNNClassifier()
    criterion = nn.NLLLoss()
    learning_rate = 0.5 if bug == "lr_x100" else 0.005  # bug: 0.5 typed for 0.005
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate * 10, momentum=0.9)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(2000, generator=g).tolist()
        for i in range(0, 2000, 32):
            b = perm[i : i + 32]
            loss = criterion(model([seqs[j] for j in b]), langs[b])
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 3.0)
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(seqs[2000:]).argmax(1) == langs[2000:]).float().mean()
        print(f"epoch {epoch + 1}: accuracy {float(acc):.3f}")
    hook.close()
    return losses


def lstm_sliding_window_forecaster(path: str, epochs: int = 25, seed: int = 0) -> list[float]:
    """A multi-horizon LSTM forecaster as the "time series with LSTM" tutorials write it: a
    monthly-style series (trend, yearly season, noise) min-max scaled with the training part's
    min and max, sliding windows of 24 steps predicting the next 6 at once, a 2-layer LSTM(1,
    64, dropout=0.2) and a Linear on the last output, `MSELoss`, Adam 1e-3, batch 32,
    `model.eval()` / `torch.no_grad()` validation every epoch and `model.train()` back."""
    g = _seed(seed)
    t = torch.arange(1600, dtype=torch.float32)
    series = 0.002 * t + torch.sin(2 * math.pi * t / 12) + 0.5 * torch.sin(2 * math.pi * t / 50)
    series = series + 0.15 * torch.randn(1600, generator=g)
    lo, hi = series[:1300].min(), series[:1300].max()
    scaled = (series - lo) / (hi - lo)
    lookback, horizon = 24, 6
    idx = torch.arange(len(scaled) - lookback - horizon + 1)
    xw = torch.stack([scaled[i : i + lookback] for i in idx.tolist()]).unsqueeze(2)
    yw = torch.stack([scaled[i + lookback : i + lookback + horizon] for i in idx.tolist()])
    n_train = 1300 - lookback - horizon

    class Forecaster(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(1, 64, num_layers=2, batch_first=True, dropout=0.2)
            self.fc = nn.Linear(64, horizon)

        def forward(self, v: torch.Tensor) -> torch.Tensor:
            out, _ = self.lstm(v)
            return self.fc(out[:, -1])

    model = Forecaster()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    model.train()
    for epoch in range(epochs):
        perm = torch.randperm(n_train, generator=g)
        for i in range(0, 640, 32):  # 20 random batches an epoch
            b = perm[i : i + 32]
            loss = criterion(model(xw[b]), yw[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val = criterion(model(xw[n_train + horizon :]), yw[n_train + horizon :]).item()
        model.train()
        if epoch % 5 == 4:
            print(f"epoch {epoch + 1}: val MSE {val:.5f}")
    hook.close()
    return losses


def lr_range_test_then_onecycle(path: str, seed: int = 0) -> list[float]:
    """An LR range test before training (Smith 2015, the fastai `lr_find` and torch-lr-finder
    shape) in one script: from the initial weights, 100 mini-batches with the lr grown
    exponentially from 1e-6 to 1, stopped once the smoothed loss passes four times its best; the
    initial weights and optimizer restored; then the training at a tenth of the lr of the
    smoothed loss's minimum (fastai's `lr_min`) under `OneCycleLR`, 6 epochs; a 3-layer MLP on
    10-class tabular rows, SGD
    momentum 0.9, `CrossEntropyLoss`, batch 64."""
    g = _seed(seed)
    w1 = torch.randn(24, 48, generator=g)
    x = torch.randn(3000, 24, generator=g)
    y = (torch.relu(x @ w1) @ torch.randn(48, 10, generator=g) + torch.randn(3000, 10, generator=g)).argmax(1)
    model = nn.Sequential(nn.Linear(24, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    init_model = copy.deepcopy(model.state_dict())
    init_opt = copy.deepcopy(optimizer.state_dict())
    lrs, smoothed, avg, best = [], [], 0.0, float("inf")
    for it in range(100):
        lr = 1e-6 * (1e6 ** (it / 99))
        for group in optimizer.param_groups:
            group["lr"] = lr
        b = torch.randint(0, 2500, (64,), generator=g)
        loss = criterion(model(x[b]), y[b])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        avg = 0.98 * avg + 0.02 * loss.item()
        sm = avg / (1 - 0.98 ** (it + 1))
        lrs.append(lr)
        smoothed.append(sm)
        best = min(best, sm)
        if sm > 4 * best or not math.isfinite(sm):
            break
    lr_min = lrs[int(np.argmin(smoothed))] / 10  # fastai's `lr_min`: the minimum's lr over ten
    max_lr = min(max(lr_min, 1e-3), 0.5)
    print(f"range test: {len(lrs)} steps, lr_min {lr_min:.2e}, max_lr {max_lr:.2e}")
    model.load_state_dict(init_model)
    optimizer.load_state_dict(init_opt)
    epochs, per_epoch = 6, 2500 // 64
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=max_lr, epochs=epochs, steps_per_epoch=per_epoch
    )
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(2500, generator=g)
        for i in range(per_epoch):
            b = perm[i * 64 : (i + 1) * 64]
            loss = criterion(model(x[b]), y[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x[2500:]).argmax(1) == y[2500:]).float().mean()
        print(f"epoch {epoch + 1}: accuracy {float(acc):.3f}")
    hook.close()
    return losses


# ============================================================================= Lightning


def lit_conv_autoencoder_bce(path: str, max_epochs: int = 6, seed: int = 0) -> list[float]:
    """The MNIST autoencoder of the tutorials, in Lightning: Conv(16, stride 2)-ReLU-Conv(32,
    stride 2)-ReLU-Linear(32) encoder, a Linear-ConvTranspose2d mirror decoder ending in
    `nn.Sigmoid`, `nn.BCELoss` against the pixels in [0, 1], Adam 1e-3, batch 64, a
    `validation_step` logging the validation loss each epoch."""
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    imgs, _ = _digits(g, 1800)
    x = imgs.float() / 255.0

    class AutoEncoder(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                nn.Flatten(), nn.Linear(32 * 7 * 7, 32),
            )  # fmt: skip
            self.decoder = nn.Sequential(
                nn.Linear(32, 32 * 7 * 7), nn.ReLU(), nn.Unflatten(1, (32, 7, 7)),
                nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
                nn.ConvTranspose2d(16, 1, 3, stride=2, padding=1, output_padding=1), nn.Sigmoid(),
            )  # fmt: skip
            self.loss_fn = nn.BCELoss()

        def forward(self, v: torch.Tensor) -> torch.Tensor:
            return self.decoder(self.encoder(v))

        def training_step(self, batch: Any, idx: int) -> torch.Tensor:
            (v,) = batch
            loss = self.loss_fn(self(v), v)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, idx: int) -> None:
            (v,) = batch
            self.log("val_loss", self.loss_fn(self(v), v))

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    history = LossHistory()
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=path, logger=False, max_epochs=max_epochs, callbacks=[DebuggerCallback(path), history],
    )  # fmt: skip
    train = DataLoader(TensorDataset(x[:1600]), batch_size=64, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(x[1600:]), batch_size=100)
    trainer.fit(AutoEncoder(), train, val)
    print("val_loss", float(trainer.callback_metrics.get("val_loss", float("nan"))))
    return history.losses


# ============================================================================= Hugging Face


class _Examples(Dataset):
    """A list of feature dicts, as `datasets.Dataset` hands them to the Trainer."""

    def __init__(self, **columns: Any) -> None:
        self.columns = columns
        self.n = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: v[i] for k, v in self.columns.items()}


def hf_mobilebert_sentiment(path: str, seed: int = 0) -> list[float]:
    """Sentiment classification with the Hugging Face `Trainer` on a tiny random
    `MobileBertForSequenceClassification` (bottleneck and a narrow embedding, no download):
    token ids of reviews where a handful of positive and negative words decide the label amid
    filler, padded to 32 with an attention mask; lr 2e-3, `lr_scheduler_type="cosine"` with 26
    warm-up steps (a tenth), batch 16 with `gradient_accumulation_steps=2`, 6 epochs, weight
    decay 0.01, an evaluation per epoch."""
    from transformers import (
        MobileBertConfig,
        MobileBertForSequenceClassification,
        PrinterCallback,
        Trainer,
        TrainingArguments,
    )

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    vocab, length, n = 300, 32, 1600
    ids = torch.randint(20, vocab, (n, length), generator=g)
    lens = torch.randint(12, length + 1, (n,), generator=g)
    labels = torch.randint(0, 2, (n,), generator=g)
    for i in range(n):
        k = int(torch.randint(1, 4, (1,), generator=g))
        pos = torch.randint(1, int(lens[i]), (k,), generator=g)
        words = torch.randint(2, 11, (k,), generator=g) + 9 * (
            1 - labels[i]
        )  # 2..10 positive, 11..19 negative
        ids[i, pos] = words
    ids[:, 0] = 1  # [CLS]
    mask = (torch.arange(length)[None] < lens[:, None]).long()
    ids = ids * mask
    config = MobileBertConfig(
        vocab_size=vocab, hidden_size=64, embedding_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, intra_bottleneck_size=32, true_hidden_size=32, num_feedforward_networks=2,
        max_position_embeddings=64, num_labels=2, pad_token_id=0,
    )  # fmt: skip
    model = MobileBertForSequenceClassification(config)
    args = TrainingArguments(
        output_dir=os.path.join(path, "trainer"), logging_steps=1, report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=seed, save_strategy="no", eval_strategy="epoch", learning_rate=2e-3,
        lr_scheduler_type="cosine", warmup_steps=26, per_device_train_batch_size=16, gradient_accumulation_steps=2,
        num_train_epochs=6, weight_decay=0.01,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args,
        train_dataset=_Examples(input_ids=ids[:1400], attention_mask=mask[:1400], labels=labels[:1400]),
        eval_dataset=_Examples(input_ids=ids[1400:], attention_mask=mask[1400:], labels=labels[1400:]),
        callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(args.output_dir, ignore_errors=True)
    print("eval losses", [round(e["eval_loss"], 4) for e in trainer.state.log_history if "eval_loss" in e])
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


# ============================================================================= Keras


def keras_simplernn_sine_windows(path: str, seed: int = 0) -> list[float]:
    """The beginner's Keras RNN forecaster: a noisy sine cut into sliding windows of 20 steps
    with the next value as target, `keras.Sequential([Input((20, 1)), SimpleRNN(32,
    return_sequences=True), SimpleRNN(32), Dense(1)])`, `loss="mse"`, Adam 1e-3, batch 32,
    15 epochs, `validation_split=0.2`."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 3)
    t = np.arange(2200, dtype="float32")
    series = np.sin(0.1 * t) + 0.5 * np.sin(0.037 * t) + rng.normal(0, 0.1, 2200).astype("float32")
    xw = np.stack([series[i : i + 20] for i in range(2180)])[:, :, None].astype("float32")
    yw = series[20:2200].astype("float32")[:, None]
    model = keras.Sequential(
        [
            keras.Input((20, 1)),
            layers.SimpleRNN(32, return_sequences=True),
            layers.SimpleRNN(32),
            layers.Dense(1),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3), loss="mse")

    class BatchLosses(keras.callbacks.Callback):
        """Each batch's own loss from Keras's running epoch mean."""

        def __init__(self) -> None:
            super().__init__()
            self.losses: list[float] = []
            self.prev = 0.0

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.prev = 0.0

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            mean = float(logs["loss"])
            self.losses.append((batch + 1) * mean - batch * self.prev)
            self.prev = mean

    history = BatchLosses()
    fit = model.fit(
        xw, yw, batch_size=32, epochs=15, validation_split=0.2, verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    print("val loss", [round(v, 4) for v in fit.history["val_loss"]])
    return history.losses


_kfold = healthy("kfold_titanic_onehot_numpy_mlp", "k-fold cross-validation tabular MLP", kfold_titanic_mlp)
_house = healthy(
    "house_prices_log1p_target_early_stop", "house prices log-target regression", house_prices_log_target
)
_multi = healthy("multi_output_regression_three_heads", "multi-output regression", multi_output_regression)
_digit = healthy(
    "digit_recognizer_pixel_rows_dataset_cnn", "Kaggle Digit Recognizer CNN", digit_recognizer_dataset_cnn
)
_tagger = healthy(
    "multilabel_softmargin_glyph_tagger", "multi-label MultiLabelSoftMarginLoss", multilabel_softmargin_tagger
)
_unfold = healthy(
    "unfold_patches_multihead_attention_classifier",
    "F.unfold patch attention classifier",
    unfold_patch_attention_classifier,
)
_hinge = healthy("hinge_embedding_pair_distance", "HingeEmbeddingLoss metric learning", hinge_embedding_pairs)
_resume = healthy(
    "checkpoint_save_reload_resume_cnn1d", "checkpoint and resume mid-run", checkpoint_resume_mid_run
)
_spam = healthy("spam_bag_of_words_soft_margin_adagrad", "SoftMarginLoss bag-of-words", spam_softmargin_bow)
_names = healthy(
    "char_rnn_names_language_pack_sequence", "char-level nn.RNN names classifier", char_rnn_names_packed
)

PIPELINES: list[Any] = [
    _kfold,
    _house,
    _multi,
    _digit,
    _tagger,
    _unfold,
    _hinge,
    healthy("pseudo_labelling_two_rounds_mlp", "pseudo-labelling", pseudo_label_two_rounds),
    _resume,
    _spam,
    _names,
    healthy("lstm_sliding_windows_multi_horizon", "LSTM multi-horizon sliding windows", lstm_sliding_window_forecaster),
    healthy("lr_range_test_then_onecycle_mlp", "LR range test then OneCycle", lr_range_test_then_onecycle),
    buggy(_names, "lr_x100"),
    buggy(_hinge, "no_zero_grad"),
    buggy(_kfold, "shuffled_labels"),
    buggy(_digit, "inputs_x255"),
    buggy(_unfold, "softmax_before_ce"),
    buggy(_spam, "dead_relu_init"),
    buggy(_multi, "deep_sigmoid"),
    buggy(_tagger, "frozen_by_mistake"),
    buggy(_house, "log_zero_nan"),
    buggy(_resume, "train_in_eval_mode"),
]  # fmt: skip

if installed("lightning"):
    PIPELINES += [
        healthy(
            "lightning_conv_autoencoder_sigmoid_bce",
            "Lightning conv autoencoder BCELoss",
            lit_conv_autoencoder_bce,
        )
    ]

if installed("transformers"):
    PIPELINES += [
        healthy(
            "hf_mobilebert_sentiment_cosine_accumulation",
            "HF Trainer MobileBERT classification",
            hf_mobilebert_sentiment,
        )
    ]

if installed("keras", "tensorflow"):
    PIPELINES += [
        healthy(
            "keras_sequential_simplernn_sine_windows",
            "Keras SimpleRNN forecaster",
            keras_simplernn_sine_windows,
        )
    ]
