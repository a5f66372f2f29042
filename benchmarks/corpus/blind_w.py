"""The sixteenth blind held-out set (issue 26), part W: small, common trainings a newcomer runs.
Kinds the corpus did not have yet, mostly plain PyTorch loops with the README's two lines
(`register_loss` where the script has a loss module), plus a Keras 3 model and a plain JAX loop
with their one callback or hook. Data generated in-process, fixed seeds, one CPU thread.

Plain PyTorch: the first tutorial's linear regression (`nn.Linear(1, 1)`, SGD, `MSELoss`, full
batch); logistic regression "from scratch" on heart-disease-style rows (an `nn.Linear`, a
hand-written clamped binary cross-entropy, the update by hand under `torch.no_grad()` and
`p.grad.zero_()`); an Iris-style full-batch MLP (SGD with momentum, `CrossEntropyLoss`); a
Titanic-style survival model (embeddings of the passenger class, sex and port concatenated with
standardized age and fare, `BCEWithLogitsLoss`, Adam, batch 32); a wine-quality regression MLP
with BatchNorm and dropout (SGD with Nesterov momentum, `CosineAnnealingWarmRestarts` stepped with
the fractional epoch, `L1Loss`); a store-sales demand MLP on a `log1p` target with sin/cos hour
and weekday features (`MSELoss`, RMSLE reported, Adam, `ExponentialLR` per epoch); a CIFAR-style
CNN on RGB glyphs with torchvision-style transforms written by hand (random crop with 2-pixel
padding, horizontal flip, per-channel mean/std normalization), AdamW and a per-batch `OneCycleLR`;
a keypoint regressor (a CNN predicting the two corners of a box in [-1, 1] coordinates,
`SmoothL1Loss`, SGD with momentum, `StepLR`); a sentiment GRU on "pretrained" word vectors
loaded with `nn.Embedding.from_pretrained(freeze=True)` for two epochs, then unfrozen with its
own lower-lr parameter group; the PyTorch tutorial's character-level RNN name generator (category,
input and hidden concatenated into `i2h`/`i2o`/`o2o`, dropout, `LogSoftmax` and `NLLLoss` summed
over the letters, one name per step, the update by hand `p.data.add_(p.grad, alpha=-lr)`); the
PyTorch translation tutorial's seq2seq (a GRU encoder, an attention decoder with dropout,
`teacher_forcing_ratio = 0.5`, `NLLLoss`, SGD, an evaluation each epoch); a tabular autoencoder
for anomaly detection (trained on normal rows only, `MSELoss`, Adam, a threshold at the 99th
percentile of validation errors); a Siamese bag-of-words encoder of question pairs with
`CosineEmbeddingLoss(margin=0.3)` (duplicate or not, labels in {1, -1}), RMSprop; a stock-price
LSTM on sliding windows of MinMax-scaled closes (`MSELoss`, Adam, gradient clipping).

Through tools: a Keras 3 functional model with two inputs (a review's token ids through an
`Embedding` and `GlobalAveragePooling1D`, and numeric metadata through a `Normalization` layer
adapted on the training split) to a helpful-or-not sigmoid (`binary_crossentropy`, RMSprop, batch
128, `validation_split`), `mldbg.keras.Hook`; a plain JAX MLP with parameters as a list of
dicts initialised by hand, `jax.value_and_grad`, a jitted step applying `optax.sgd(momentum=0.9)`
on `optax.exponential_decay`, `mldbg.jax.Hook.record` outside the step.

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the Titanic model's Adam at `lr=1e-1` for `1e-3` (lr_x100), the name generator without
its `rnn.zero_grad()` (no_zero_grad), the question pairs' labels taken from a list sorted
another way (shuffled_labels), the CIFAR-style CNN fed the uint8 bytes as floats with the mean
and std of [0, 1] images (inputs_x255), the Iris MLP ending in `nn.Softmax(dim=1)` before
`CrossEntropyLoss` (softmax_before_ce), the keypoint CNN's biases filled with -1 "to start
sparse" (dead_relu_init), the anomaly autoencoder's encoder made of eight sigmoid layers
(deep_sigmoid), the sentiment GRU "unfrozen" by `model.embedding.requires_grad = True` on the
module instead of its weight (frozen_by_mistake), the store-sales target taken with `torch.log`
for `torch.log1p`, so hours with no sale give `log(0)` (log_zero_nan), the seq2seq never put back
in training mode after its first evaluation (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND15`.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from mldbg.torch import Hook

from . import BLIND15, buggy, healthy, installed

SPLIT = BLIND15

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 91)


# ============================================================================= tabular and basics


def linear_regression_first_tutorial(path: str, epochs: int = 300, seed: int = 0) -> list[float]:
    """The first thing a newcomer trains: y = 2x + 1 plus noise, `nn.Linear(1, 1)`, `MSELoss`,
    SGD lr 0.01 on the full batch, the weight and bias printed at the end."""
    g = _seed(seed)
    x = torch.linspace(-3, 3, 200).unsqueeze(1)
    y = 2 * x + 1 + 0.3 * torch.randn(200, 1, generator=g)
    model = nn.Linear(1, 1)
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        pred = model(x)
        loss = criterion(pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if epoch % 100 == 99:
            print(f"epoch {epoch + 1}: loss {loss.item():.4f}")
    print("w", model.weight.item(), "b", model.bias.item())
    hook.close()
    return losses


def logistic_regression_from_scratch(path: str, epochs: int = 400, seed: int = 0) -> list[float]:
    """Logistic regression "from scratch" on heart-disease-style rows (age, blood pressure,
    cholesterol, max heart rate, ... standardized by hand): an `nn.Linear(8, 1)`, the sigmoid and
    a hand-written binary cross-entropy on probabilities clamped to [1e-7, 1 - 1e-7], the update
    written by hand under `torch.no_grad()` with `p.grad.zero_()`, lr 0.1, full batch."""
    g = _seed(seed)
    n, d = 600, 8
    raw = torch.randn(n, d, generator=g) * torch.tensor([9.0, 17, 50, 22, 1, 1, 1.1, 0.9]) + torch.tensor(
        [54.0, 131, 246, 150, 0.5, 0.3, 1.0, 0.6]
    )
    z = (raw - raw.mean(0)) / raw.std(0)
    true_w = torch.tensor([0.8, 0.5, 0.4, -1.0, 0.7, 0.3, 0.9, -0.5])
    y = (torch.rand(n, generator=g) < torch.sigmoid(z @ true_w - 0.2)).float().unsqueeze(1)
    x = (raw - raw[:480].mean(0)) / raw[:480].std(0)
    model = nn.Linear(d, 1)
    hook = Hook(path)
    hook.register_module(model)
    lr = 0.1
    losses: list[float] = []
    for _ in range(epochs):
        p = torch.sigmoid(model(x[:480])).clamp(1e-7, 1 - 1e-7)
        loss = -(y[:480] * torch.log(p) + (1 - y[:480]) * torch.log(1 - p)).mean()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= lr * param.grad
                param.grad.zero_()
        losses.append(loss.item())
    with torch.no_grad():
        acc = ((model(x[480:]) > 0).float() == y[480:]).float().mean()
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, test acc {acc:.3f}")
    hook.close()
    return losses


def iris_fullbatch_mlp(path: str, epochs: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """An Iris-style classifier (four measurements, three species drawn from per-class Gaussians,
    150 rows, 120 for training): `nn.Sequential(Linear(4, 16), ReLU, Linear(16, 3))`,
    `CrossEntropyLoss`, SGD lr 0.05 with momentum 0.9 on the full batch, test accuracy at the end."""
    g = _seed(seed)
    means = torch.tensor([[5.0, 3.4, 1.5, 0.25], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]])
    stds = torch.tensor([[0.35, 0.38, 0.17, 0.1], [0.5, 0.31, 0.47, 0.2], [0.63, 0.32, 0.55, 0.27]])
    y = torch.arange(3).repeat_interleave(50)
    x = means[y] + stds[y] * torch.randn(150, 4, generator=g)
    perm = torch.randperm(150, generator=g)
    x, y = x[perm], y[perm]
    x = (x - x[:120].mean(0)) / x[:120].std(0)
    layers: list[nn.Module] = [nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3)]
    if bug == "softmax_before_ce":  # bug: the network "outputs probabilities" before CrossEntropyLoss
        layers.append(nn.Softmax(dim=1))
    model = nn.Sequential(*layers)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = criterion(model(x[:120]), y[:120])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        acc = (model(x[120:]).argmax(1) == y[120:]).float().mean()
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, test acc {acc:.3f}")
    hook.close()
    return losses


def titanic_embeddings_survival(
    path: str, epochs: int = 25, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Titanic-style survival model: passenger class, sex and port of embarkation through small
    `nn.Embedding`s, concatenated with age (missing ages filled with the median) and log fare
    standardized on the training split, an MLP with dropout to one logit, `BCEWithLogitsLoss`,
    Adam 1e-3, batch 32, accuracy on a validation split each epoch."""
    g = _seed(seed)
    n = 891
    pclass = torch.multinomial(torch.tensor([0.24, 0.21, 0.55]), n, replacement=True, generator=g)
    sex = (torch.rand(n, generator=g) < 0.35).long()  # 1 = female
    port = torch.multinomial(torch.tensor([0.19, 0.09, 0.72]), n, replacement=True, generator=g)
    age = (30 - 5 * (pclass - 1) + 13 * torch.randn(n, generator=g)).clamp(0.5, 80)
    fare = torch.exp(4.2 - 0.9 * pclass + 0.5 * torch.randn(n, generator=g))
    logit = -1.4 + 2.5 * sex - 0.9 * (pclass - 1) - 0.02 * (age - 30) + 0.3 * (port == 0)
    survived = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    age[torch.rand(n, generator=g) < 0.2] = float("nan")
    age = torch.where(age.isnan(), age[:700].nanmedian(), age)
    num = torch.stack([age, torch.log1p(fare)], 1)
    num = (num - num[:700].mean(0)) / num[:700].std(0)
    cats = torch.stack([pclass, sex, port], 1)
    train_loader = DataLoader(
        TensorDataset(cats[:700], num[:700], survived[:700]), batch_size=32, shuffle=True, generator=g
    )

    class TitanicNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.ModuleList([nn.Embedding(3, 3), nn.Embedding(2, 2), nn.Embedding(3, 3)])
            self.mlp = nn.Sequential(
                nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 1)
            )

        def forward(self, c: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            e = [m(c[:, i]) for i, m in enumerate(self.emb)]
            return self.mlp(torch.cat([*e, x], 1)).squeeze(1)

    model = TitanicNet()
    criterion = nn.BCEWithLogitsLoss()
    lr = 1e-1 if bug == "lr_x100" else 1e-3  # bug: 1e-1 typed for 1e-3
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for cb, xb, yb in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(cb, xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = ((model(cats[700:], num[700:]) > 0).float() == survived[700:]).float().mean()
        if epoch % 5 == 4:
            print(f"epoch {epoch + 1}: loss {np.mean(losses[-22:]):.4f} val acc {acc:.3f}")
    hook.close()
    return losses


def wine_quality_batchnorm_nesterov(path: str, epochs: int = 30, seed: int = 0) -> list[float]:
    """A wine-quality regression (eleven physico-chemical measurements to a 3..8 score): an MLP
    with BatchNorm and dropout, `L1Loss`, SGD lr 0.05 with Nesterov momentum and weight decay,
    `CosineAnnealingWarmRestarts(T_0=10)` stepped with the fractional epoch inside the batch
    loop (the PyTorch docs' idiom), batch 64, validation MAE per epoch."""
    g = _seed(seed)
    n, d = 1600, 11
    x = torch.randn(n, d, generator=g)
    x[:, 3] = x[:, 3].exp()  # residual sugar, skewed
    w = torch.tensor([0.1, -0.5, 0.1, 0.05, -0.2, 0.05, -0.2, -0.1, 0.0, 0.3, 0.6])
    quality = (5.6 + x @ w + 0.2 * torch.tanh(x[:, 10] * x[:, 1]) + 0.4 * torch.randn(n, generator=g)).round()
    quality = quality.clamp(3, 8)
    x = (x - x[:1300].mean(0)) / x[:1300].std(0)
    loader = DataLoader(TensorDataset(x[:1300], quality[:1300]), batch_size=64, shuffle=True, generator=g)
    model = nn.Sequential(
        nn.Linear(d, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 1),
    )  # fmt: skip
    criterion = nn.L1Loss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=10)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    iters = len(loader)
    for epoch in range(epochs):
        model.train()
        for i, (xb, yb) in enumerate(loader):
            optimizer.zero_grad()
            loss = criterion(model(xb).squeeze(1), yb)
            loss.backward()
            optimizer.step()
            scheduler.step(epoch + i / iters)
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            mae = (model(x[1300:]).squeeze(1) - quality[1300:]).abs().mean()
        if epoch % 10 == 9:
            print(f"epoch {epoch + 1}: loss {np.mean(losses[-iters:]):.4f} val MAE {mae:.3f}")
    hook.close()
    return losses


def store_sales_log1p_demand(
    path: str, epochs: int = 20, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Hourly store sales (counts, many hours with none): hour and weekday as sin/cos features,
    a promotion flag, temperature and a store embedding, an MLP regressing `log1p(sales)` with
    `MSELoss` (so its root is the RMSLE), Adam 2e-3, batch 128, `ExponentialLR(gamma=0.9)` per
    epoch, the validation RMSLE each epoch."""
    g = _seed(seed)
    n, stores = 8000, 10
    hour = torch.randint(0, 24, (n,), generator=g)
    day = torch.randint(0, 7, (n,), generator=g)
    store = torch.randint(0, stores, (n,), generator=g)
    promo = (torch.rand(n, generator=g) < 0.2).float()
    temp = torch.randn(n, generator=g)
    open_hours = ((hour >= 8) & (hour <= 21)).float()
    store_level = torch.rand(stores, generator=g) * 1.5 + 0.5
    rate = (
        open_hours
        * store_level[store]
        * (
            3
            + 4 * torch.exp(-(((hour - 13).float() / 3) ** 2))
            + 2 * (day >= 5).float()
            + 3 * promo
            + 0.5 * temp
        ).clamp(min=0.1)
    )
    sales = torch.poisson(rate, generator=g)
    feats = torch.stack(
        [
            torch.sin(2 * math.pi * hour / 24), torch.cos(2 * math.pi * hour / 24),
            torch.sin(2 * math.pi * day / 7), torch.cos(2 * math.pi * day / 7), promo, temp,
        ],
        1,
    )  # fmt: skip
    target = torch.log(sales) if bug == "log_zero_nan" else torch.log1p(sales)  # bug: log for log1p
    loader = DataLoader(
        TensorDataset(feats[:7000], store[:7000], target[:7000]), batch_size=128, shuffle=True, generator=g
    )

    class SalesNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.store = nn.Embedding(stores, 4)
            self.mlp = nn.Sequential(
                nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)
            )

        def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
            return self.mlp(torch.cat([x, self.store(s)], 1)).squeeze(1)

    model = SalesNet()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, sb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb, sb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            rmsle = (model(feats[7000:], store[7000:]) - torch.log1p(sales[7000:])).pow(2).mean().sqrt()
        if epoch % 5 == 4:
            print(f"epoch {epoch + 1}: loss {np.mean(losses[-55:]):.4f} val RMSLE {rmsle:.3f}")
    hook.close()
    return losses


def tabular_autoencoder_anomaly(
    path: str, epochs: int = 25, seed: int = 0, bug: str | None = None
) -> list[float]:
    """An autoencoder for anomaly detection on sensor rows (twenty correlated readings from five
    latent factors): trained on normal rows only, 20-16-8-16-20 with ReLU, `MSELoss`, Adam 1e-3,
    batch 64; the threshold at the 99th percentile of the validation reconstruction errors, the
    precision and recall on a test set with 5 % anomalies."""
    g = _seed(seed)
    d, k = 20, 5
    mix = torch.randn(k, d, generator=torch.Generator().manual_seed(433))

    def normal_rows(m: int) -> torch.Tensor:
        return torch.tanh(torch.randn(m, k, generator=g) @ mix) + 0.1 * torch.randn(m, d, generator=g)

    x_train, x_val = normal_rows(4000), normal_rows(500)
    anomalies = torch.randn(50, d, generator=g) * 0.8
    x_test = torch.cat([normal_rows(950), anomalies])
    is_anomaly = torch.cat([torch.zeros(950), torch.ones(50)]).bool()
    mean, std = x_train.mean(0), x_train.std(0)

    class AutoEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if bug == "deep_sigmoid":  # bug: a "deeper" encoder of sigmoid layers
                layers: list[nn.Module] = [nn.Linear(d, 16), nn.Sigmoid()]
                for _ in range(6):
                    layers += [nn.Linear(16, 16), nn.Sigmoid()]
                self.encoder = nn.Sequential(*layers, nn.Linear(16, 8), nn.Sigmoid())
            else:
                self.encoder = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU())
            self.decoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, d))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.decoder(self.encoder(x))

    model = AutoEncoder()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset((x_train - mean) / std), batch_size=64, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for (xb,) in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), xb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 5 == 4:
            print(f"epoch {epoch + 1}: loss {np.mean(losses[-63:]):.4f}")
    model.eval()
    with torch.no_grad():
        val_err = (model((x_val - mean) / std) - (x_val - mean) / std).pow(2).mean(1)
        test_err = (model((x_test - mean) / std) - (x_test - mean) / std).pow(2).mean(1)
    flagged = test_err > torch.quantile(val_err, 0.99)
    tp = (flagged & is_anomaly).sum().item()
    print(f"precision {tp / max(1, flagged.sum().item()):.2f} recall {tp / 50:.2f}")
    hook.close()
    return losses


# ============================================================================= vision


def _rgb_glyphs(
    g: torch.Generator, n: int, size: int = 16, classes: int = 10
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 3, size, size) uint8 images like a tiny CIFAR: each class a colored smooth shape on a
    colored noisy background, shifted by up to two pixels; and the labels."""
    pg = torch.Generator().manual_seed(421)
    blobs = F.avg_pool2d(torch.rand(classes, 1, size, size, generator=pg), 5, 1, 2)
    blobs = (blobs - blobs.mean((2, 3), keepdim=True)) / blobs.std((2, 3), keepdim=True)
    shapes = torch.sigmoid(4 * (blobs - 0.2))
    colors = torch.rand(classes, 3, 1, 1, generator=pg)
    y = torch.randint(0, classes, (n,), generator=g)
    shift = torch.randint(-2, 3, (n, 2), generator=g)
    obj = torch.stack(
        [torch.roll(shapes[c], (int(a), int(b)), (1, 2)) for c, (a, b) in zip(y, shift, strict=True)]
    )
    background = torch.rand(n, 3, 1, 1, generator=g) * 0.5
    x = obj * colors[y] + (1 - obj) * background + 0.45 * torch.randn(n, 3, size, size, generator=g)
    return (x.clamp(0, 1) * 255).round().to(torch.uint8), y


def cifar_cnn_hand_transforms_onecycle(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The CIFAR-10 tutorial CNN grown a little (three conv-BN-ReLU blocks with max pooling,
    dropout, a linear head) on 16x16 RGB uint8 glyphs, with torchvision-style transforms written
    by hand on each batch: `ToTensor` (bytes / 255), `RandomCrop(16, padding=2)`,
    `RandomHorizontalFlip`, `Normalize(mean, std)` per channel; AdamW 2e-3 with weight decay
    5e-4, `OneCycleLR(max_lr=5e-3)` stepped per batch, label smoothing 0.1, batch 128."""
    g = _seed(seed)
    images, labels = _rgb_glyphs(g, 3072)
    train_x, train_y = images[:2560], labels[:2560]
    mean = (train_x.float() / 255).mean((0, 2, 3)).view(1, 3, 1, 1)
    std = (train_x.float() / 255).std((0, 2, 3)).view(1, 3, 1, 1)

    def to_tensor(b: torch.Tensor) -> torch.Tensor:
        if bug == "inputs_x255":  # bug: `ToTensor` dropped: the bytes cast to float, not scaled
            return b.float()
        return b.float() / 255

    def augment(x: torch.Tensor) -> torch.Tensor:
        padded = F.pad(x, (2, 2, 2, 2), mode="reflect")
        i, j = torch.randint(0, 5, (2,), generator=g).tolist()
        x = padded[:, :, i : i + 16, j : j + 16]
        flip = torch.rand(x.size(0), generator=g) < 0.5
        return torch.where(flip[:, None, None, None], x.flip(3), x)

    def block(cin: int, cout: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)
        )

    model = nn.Sequential(
        block(3, 32), block(32, 64), block(64, 64), nn.Flatten(), nn.Dropout(0.2), nn.Linear(64 * 4, 10)
    )
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=5e-4)
    steps_per_epoch = 2560 // 128
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=5e-3, epochs=epochs, steps_per_epoch=steps_per_epoch
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(2560, generator=g)
        for b in range(steps_per_epoch):
            idx = perm[b * 128 : (b + 1) * 128]
            xb = (augment(to_tensor(train_x[idx])) - mean) / std
            optimizer.zero_grad()
            loss = criterion(model(xb), train_y[idx])
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model((to_tensor(images[2560:]) - mean) / std).argmax(1) == labels[2560:]).float().mean()
        print(f"epoch {epoch + 1}: loss {np.mean(losses[-steps_per_epoch:]):.4f} test acc {acc:.3f}")
    hook.close()
    return losses


def keypoint_box_corners_cnn(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Image regression of keypoints: 24x24 grayscale images with one bright rectangle on noise,
    a small CNN regressing its top-left and bottom-right corners in [-1, 1] coordinates (four
    outputs), `SmoothL1Loss`, SGD lr 0.02 with momentum 0.9, `StepLR(step_size=3, gamma=0.5)`,
    batch 32, the mean corner error in pixels on a test split."""
    g = _seed(seed)
    n, size = 2400, 24
    x0 = torch.randint(0, 14, (n,), generator=g)
    y0 = torch.randint(0, 14, (n,), generator=g)
    w = torch.randint(4, 10, (n,), generator=g)
    h = torch.randint(4, 10, (n,), generator=g)
    x1, y1 = x0 + w, y0 + h
    grid = torch.arange(size)
    inside_x = (grid[None] >= x0[:, None]) & (grid[None] < x1[:, None])
    inside_y = (grid[None] >= y0[:, None]) & (grid[None] < y1[:, None])
    img = (inside_y[:, :, None] & inside_x[:, None, :]).float() * (
        0.6 + 0.4 * torch.rand(n, 1, 1, generator=g)
    )
    img = (img + 0.15 * torch.randn(n, size, size, generator=g)).unsqueeze(1)
    corners = torch.stack([x0, y0, x1, y1], 1).float() / (size / 2) - 1
    loader = DataLoader(TensorDataset(img[:2000], corners[:2000]), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Flatten(),
        nn.Linear(32 * 36, 64), nn.ReLU(), nn.Linear(64, 4),
    )  # fmt: skip
    if bug == "dead_relu_init":  # bug: biases filled with -1 "to start sparse"
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.constant_(m.bias, -1.0)
    criterion = nn.SmoothL1Loss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            err = ((model(img[2000:]) - corners[2000:]).abs() * size / 2).mean()
        print(f"epoch {epoch + 1}: loss {np.mean(losses[-63:]):.4f} test corner error {err:.2f} px")
    hook.close()
    return losses


# ============================================================================= text and sequences


def _sentiment_data(g: torch.Generator, n: int, vocab: int, length: int) -> tuple[torch.Tensor, ...]:
    """Reviews of token ids (0 = padding, right-padded), a sentiment label from positive and
    negative words with negations ("not" flips the next word), and "pretrained" word vectors in
    which the sentiment words lie along one direction."""
    pg = torch.Generator().manual_seed(439)
    vectors = torch.randn(vocab, 50, generator=pg)
    direction = F.normalize(torch.randn(50, generator=pg), dim=0)
    pos, neg, not_id = torch.arange(2, 22), torch.arange(22, 42), 1
    vectors[pos] += 2 * direction
    vectors[neg] -= 2 * direction
    vectors[0] = 0
    tokens = torch.randint(42, vocab, (n, length), generator=g)
    polarity = torch.zeros(n)
    for i in range(n):
        for j in torch.randperm(length - 1, generator=g)[
            : int(torch.randint(1, 4, (1,), generator=g))
        ].tolist():
            good = bool(torch.rand(1, generator=g) < 0.5)
            word = pos if good else neg
            tokens[i, j + 1] = word[torch.randint(0, 20, (1,), generator=g)]
            sign = 1 if good else -1
            if torch.rand(1, generator=g) < 0.25:
                tokens[i, j] = not_id
                sign = -sign
            polarity[i] += sign
    lens = torch.randint(length // 2, length + 1, (n,), generator=g)
    lens = torch.maximum(lens, (tokens > 0).long().cumsum(1).argmax(1) + 1)
    tokens[torch.arange(length)[None] >= lens[:, None]] = 0
    label = (polarity + 0.1 * torch.randn(n, generator=g) > 0).float()
    return tokens, lens, label, vectors


def sentiment_gru_freeze_then_unfreeze(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A sentiment GRU on "pretrained" word vectors: `nn.Embedding.from_pretrained(vectors,
    freeze=True, padding_idx=0)`, a one-layer GRU over `pack_padded_sequence`, the last hidden
    state to one logit, `BCEWithLogitsLoss`, Adam 2e-3, batch 64; after two epochs the embedding
    is unfrozen and added to the optimizer as its own parameter group at lr 2e-4."""
    g = _seed(seed)
    vocab, length = 400, 20
    tokens, lens, label, vectors = _sentiment_data(g, 2400, vocab, length)

    class SentimentGRU(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding.from_pretrained(vectors, freeze=True, padding_idx=0)
            self.gru = nn.GRU(50, 64, batch_first=True)
            self.fc = nn.Linear(64, 1)

        def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            packed = nn.utils.rnn.pack_padded_sequence(
                self.embedding(x), lengths, batch_first=True, enforce_sorted=False
            )
            _, h = self.gru(packed)
            return self.fc(h[-1]).squeeze(1)

    model = SentimentGRU()
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=2e-3)
    loader = DataLoader(
        TensorDataset(tokens[:2000], lens[:2000], label[:2000]), batch_size=64, shuffle=True, generator=g
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        if epoch == 2:
            if bug == "frozen_by_mistake":  # bug: the flag set on the module, not on its weight
                model.embedding.requires_grad = True
            else:
                model.embedding.weight.requires_grad = True
            optimizer.add_param_group({"params": [model.embedding.weight], "lr": 2e-4})
        model.train()
        for xb, lb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb, lb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = ((model(tokens[2000:], lens[2000:]) > 0).float() == label[2000:]).float().mean()
        print(f"epoch {epoch + 1}: loss {np.mean(losses[-32:]):.4f} val acc {acc:.3f}")
    hook.close()
    return losses


_LETTERS = "abcdefghijklmnopqrstuvwxyz'"


def _names(g: torch.Generator, per_language: int) -> dict[str, list[str]]:
    """Made-up surnames of four "languages", each with its own syllables and endings."""
    styles = {
        "Italian": (["ro", "ma", "ri", "lo", "ca", "ne", "ti", "ba"], ["ini", "elli", "one", "etti"]),
        "Japanese": (["ka", "ta", "mo", "su", "ki", "na", "hi", "ya"], ["moto", "shi", "da", "ra"]),
        "Russian": (["vo", "ko", "le", "ba", "sha", "mi", "ro", "zh"], ["ov", "ev", "sky", "in"]),
        "Scottish": (["mac", "do", "gal", "cam", "fer", "mur", "bu", "ch"], ["son", "ie", "an", "ay"]),
    }
    out: dict[str, list[str]] = {}
    for lang, (syll, ends) in styles.items():
        names = []
        for _ in range(per_language):
            k = int(torch.randint(1, 3, (1,), generator=g))
            parts = [syll[int(i)] for i in torch.randint(0, len(syll), (k,), generator=g)]
            names.append("".join(parts) + ends[int(torch.randint(0, len(ends), (1,), generator=g))])
        out[lang] = names
    return out


def char_rnn_name_generator(
    path: str, steps: int = 4000, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The PyTorch tutorial "Generating names with a character-level RNN": an `nn.Module` with
    `i2h`, `i2o` and `o2o` over the concatenation of the language one-hot, the letter one-hot and
    the hidden state, dropout 0.1 and `LogSoftmax`; one random (language, name) per step, the
    `NLLLoss` of each next letter (EOS last) summed over the name, `rnn.zero_grad()` then the
    update by hand `p.data.add_(p.grad.data, alpha=-learning_rate)` with lr 0.0005; the loss
    divided by the name's length; samples per language at the end."""
    g = _seed(seed)
    data = _names(g, 150)
    languages = list(data)
    n_letters = len(_LETTERS) + 1  # + EOS

    class RNN(nn.Module):
        def __init__(self, input_size: int, hidden_size: int, output_size: int) -> None:
            super().__init__()
            self.hidden_size = hidden_size
            self.i2h = nn.Linear(len(languages) + input_size + hidden_size, hidden_size)
            self.i2o = nn.Linear(len(languages) + input_size + hidden_size, output_size)
            self.o2o = nn.Linear(hidden_size + output_size, output_size)
            self.dropout = nn.Dropout(0.1)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, category: torch.Tensor, inp: torch.Tensor, hidden: torch.Tensor) -> Any:
            combined = torch.cat((category, inp, hidden), 1)
            hidden = self.i2h(combined)
            output = self.i2o(combined)
            output = self.o2o(torch.cat((hidden, output), 1))
            return self.softmax(self.dropout(output)), hidden

        def init_hidden(self) -> torch.Tensor:
            return torch.zeros(1, self.hidden_size)

    rnn = RNN(n_letters, 128, n_letters)
    criterion = nn.NLLLoss()
    learning_rate = 0.0005
    hook = Hook(path)
    hook.register_module(rnn)
    hook.register_loss(criterion)

    def one_hot_letters(s: str) -> torch.Tensor:
        t = torch.zeros(len(s), 1, n_letters)
        for i, c in enumerate(s):
            t[i, 0, _LETTERS.find(c)] = 1
        return t

    losses: list[float] = []
    for step in range(steps):
        lang = languages[int(torch.randint(0, len(languages), (1,), generator=g))]
        name = data[lang][int(torch.randint(0, len(data[lang]), (1,), generator=g))]
        category = torch.zeros(1, len(languages))
        category[0, languages.index(lang)] = 1
        inp = one_hot_letters(name)
        target = torch.tensor([_LETTERS.find(c) for c in name[1:]] + [n_letters - 1]).unsqueeze(-1)
        hidden = rnn.init_hidden()
        if bug != "no_zero_grad":  # bug: the tutorial's `rnn.zero_grad()` left out
            rnn.zero_grad()
        loss = torch.zeros(())
        for i in range(inp.size(0)):
            output, hidden = rnn(category, inp[i], hidden)
            loss = loss + criterion(output, target[i])
        loss.backward()
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-learning_rate)
        losses.append(loss.item() / inp.size(0))
        if step % 500 == 499:
            print(f"step {step + 1}: loss {np.mean(losses[-500:]):.4f}")
    rnn.eval()
    with torch.no_grad():
        for lang in languages:
            category = torch.zeros(1, len(languages))
            category[0, languages.index(lang)] = 1
            hidden, letter, out = rnn.init_hidden(), "k", "k"
            for _ in range(10):
                output, hidden = rnn(category, one_hot_letters(letter)[0], hidden)
                top = int(output.argmax())
                if top == n_letters - 1:
                    break
                letter = _LETTERS[top]
                out += letter
            print(lang, out)
    hook.close()
    return losses


def seq2seq_attention_teacher_forcing(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The PyTorch tutorial "Translation with a sequence to sequence network and attention",
    batched: a GRU encoder, a decoder with Bahdanau attention over the encoder outputs and dropout
    0.1 on its embeddings, `teacher_forcing_ratio = 0.5` drawn per batch, `log_softmax` and
    `NLLLoss(ignore_index=PAD)`, SGD lr 0.05 with momentum 0.9 for encoder and decoder alike, batch
    32; an `evaluate()` greedy-decodes a few pairs each epoch, switching to eval mode. The toy
    language: a word-by-word lexicon and a reversed word order."""
    g = _seed(seed)
    pad, sos, eos = 0, 1, 2
    src_vocab, tgt_vocab, n, max_len = 40, 40, 2400, 7
    lexicon = torch.randperm(tgt_vocab - 3, generator=torch.Generator().manual_seed(443)) + 3
    lens = torch.randint(3, max_len + 1, (n,), generator=g)
    src = torch.full((n, max_len + 1), pad)
    tgt = torch.full((n, max_len + 2), pad)
    for i in range(n):
        words = torch.randint(3, src_vocab, (int(lens[i]),), generator=g)
        src[i, : len(words)] = words
        src[i, len(words)] = eos
        tgt[i, 0] = sos
        tgt[i, 1 : len(words) + 1] = lexicon[words.flip(0) - 3]
        tgt[i, len(words) + 1] = eos

    class EncoderRNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(src_vocab, 64, padding_idx=pad)
            self.gru = nn.GRU(64, 64, batch_first=True)
            self.dropout = nn.Dropout(0.1)

        def forward(self, x: torch.Tensor) -> Any:
            return self.gru(self.dropout(self.embedding(x)))

    class AttnDecoderRNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(tgt_vocab, 64, padding_idx=pad)
            self.Wa, self.Ua, self.Va = nn.Linear(64, 64), nn.Linear(64, 64), nn.Linear(64, 1)
            self.gru = nn.GRU(128, 64, batch_first=True)
            self.out = nn.Linear(64, tgt_vocab)
            self.dropout = nn.Dropout(0.1)

        def forward_step(
            self, inp: torch.Tensor, hidden: torch.Tensor, enc: torch.Tensor, mask: torch.Tensor
        ) -> Any:
            embedded = self.dropout(self.embedding(inp))
            scores = self.Va(torch.tanh(self.Wa(hidden.permute(1, 0, 2)) + self.Ua(enc))).squeeze(2)
            weights = F.softmax(scores.masked_fill(mask, -1e9), dim=-1).unsqueeze(1)
            context = torch.bmm(weights, enc)
            output, hidden = self.gru(torch.cat((embedded, context), 2), hidden)
            return F.log_softmax(self.out(output), dim=-1), hidden

    encoder, decoder = EncoderRNN(), AttnDecoderRNN()
    criterion = nn.NLLLoss(ignore_index=pad)
    encoder_optimizer = torch.optim.SGD(encoder.parameters(), lr=0.05, momentum=0.9)
    decoder_optimizer = torch.optim.SGD(decoder.parameters(), lr=0.05, momentum=0.9)
    hook = Hook(path)
    hook.register_module(encoder)
    hook.register_module(decoder)
    hook.register_loss(criterion)
    teacher_forcing_ratio = 0.5

    def evaluate(xs: torch.Tensor, ys: torch.Tensor) -> float:
        encoder.eval()
        decoder.eval()
        with torch.no_grad():
            enc, hidden = encoder(xs)
            inp, correct = torch.full((len(xs), 1), sos), []
            for t in range(1, ys.size(1)):
                out, hidden = decoder.forward_step(inp, hidden, enc, xs == pad)
                inp = out.argmax(-1)
                keep = ys[:, t] != pad
                correct.append((inp.squeeze(1) == ys[:, t])[keep].float())
        return float(torch.cat(correct).mean())

    losses: list[float] = []
    train_src, train_tgt = src[:2000], tgt[:2000]
    for epoch in range(epochs):
        if bug != "train_in_eval_mode":  # bug: never back in train() after the first evaluate()
            encoder.train()
            decoder.train()
        perm = torch.randperm(2000, generator=g)
        for b in range(0, 2000, 32):
            idx = perm[b : b + 32]
            xs, ys = train_src[idx], train_tgt[idx]
            encoder_optimizer.zero_grad()
            decoder_optimizer.zero_grad()
            enc, hidden = encoder(xs)
            use_tf = random.random() < teacher_forcing_ratio
            inp, step_losses = ys[:, :1], []
            for t in range(1, ys.size(1)):
                out, hidden = decoder.forward_step(inp, hidden, enc, xs == pad)
                step_losses.append(criterion(out.squeeze(1), ys[:, t]))
                inp = ys[:, t : t + 1] if use_tf else out.argmax(-1).detach()
            valid = [(ys[:, t] != pad).any() for t in range(1, ys.size(1))]
            loss = torch.stack([s for s, v in zip(step_losses, valid, strict=True) if v]).mean()
            loss.backward()
            encoder_optimizer.step()
            decoder_optimizer.step()
            losses.append(loss.item())
        print(
            f"epoch {epoch + 1}: loss {np.mean(losses[-63:]):.4f} token acc {evaluate(src[2000:], tgt[2000:]):.3f}"
        )
    hook.close()
    return losses


def siamese_cosine_embedding_questions(
    path: str, epochs: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Duplicate-question detection with a Siamese encoder: both questions of a pair through one
    shared `EmbeddingBag(mode="mean")` and a two-layer MLP, `CosineEmbeddingLoss(margin=0.3)` on
    labels in {1, -1} (duplicate or not), RMSprop 1e-3, batch 64, the accuracy of a cosine
    threshold of 0.5 on held-out pairs each epoch. A duplicate is another wording of the same
    topic's question (shared topic words, different filler)."""
    g = _seed(seed)
    vocab, topics, n, length = 600, 150, 4000, 10
    topic_words = torch.randint(1, vocab, (topics, 5), generator=torch.Generator().manual_seed(449))

    def question(t: torch.Tensor) -> torch.Tensor:
        q = torch.randint(1, vocab, (len(t), length), generator=g)
        pick = torch.randint(0, 5, (len(t), 4), generator=g)
        q[:, :4] = topic_words[t[:, None], pick]
        return q[:, torch.randperm(length, generator=g)]

    t1 = torch.randint(0, topics, (n,), generator=g)
    dup = torch.rand(n, generator=g) < 0.5
    t2 = torch.where(dup, t1, (t1 + torch.randint(1, topics, (n,), generator=g)) % topics)
    q1, q2 = question(t1), question(t2)
    target = dup.float() * 2 - 1
    pairs = [(q1[i], q2[i], float(target[i])) for i in range(n)]
    labels = [p[2] for p in pairs]
    if bug == "shuffled_labels":  # bug: the labels taken from a copy of the pairs sorted by question
        labels = [p[2] for p in sorted(pairs, key=lambda p: p[0].tolist())]
    y = torch.tensor(labels)

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bag = nn.EmbeddingBag(vocab, 64, mode="mean")
            self.mlp = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32))

        def forward(self, q: torch.Tensor) -> torch.Tensor:
            return self.mlp(self.bag(q))

    encoder = Encoder()
    criterion = nn.CosineEmbeddingLoss(margin=0.3)
    optimizer = torch.optim.RMSprop(encoder.parameters(), lr=1e-3)
    loader = DataLoader(
        TensorDataset(q1[:3500], q2[:3500], y[:3500]), batch_size=64, shuffle=True, generator=g
    )
    hook = Hook(path)
    hook.register_module(encoder)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        encoder.train()
        for a, b, yb in loader:
            optimizer.zero_grad()
            loss = criterion(encoder(a), encoder(b), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        encoder.eval()
        with torch.no_grad():
            cos = F.cosine_similarity(encoder(q1[3500:]), encoder(q2[3500:]))
            acc = ((cos > 0.5) == dup[3500:]).float().mean()
        if epoch % 2 == 1:
            print(f"epoch {epoch + 1}: loss {np.mean(losses[-55:]):.4f} val acc {acc:.3f}")
    hook.close()
    return losses


def stock_lstm_sliding_windows(path: str, epochs: int = 15, seed: int = 0) -> list[float]:
    """The stock-price LSTM every blog writes: a daily close series (a random walk with drift and
    a weekly wiggle) MinMax-scaled on the training part, sliding windows of 30 days to the next
    day, a two-layer LSTM (dropout 0.2) and a linear head on the last step, `MSELoss`, Adam 1e-3,
    batch 32 of shuffled training windows, `clip_grad_norm_(1.0)`, the test RMSE in price units."""
    g = _seed(seed)
    days, window = 1300, 30
    returns = 0.0004 + 0.012 * torch.randn(days, generator=g)
    close = 100 * torch.exp(returns.cumsum(0)) + 2 * torch.sin(torch.arange(days) * 2 * math.pi / 5)
    split = 1000
    lo, hi = close[:split].min(), close[:split].max()
    scaled = (close - lo) / (hi - lo)
    xs = torch.stack([scaled[i : i + window] for i in range(days - window)]).unsqueeze(-1)
    ys = scaled[window:].unsqueeze(-1)
    n_train = split - window
    loader = DataLoader(TensorDataset(xs[:n_train], ys[:n_train]), batch_size=32, shuffle=True, generator=g)

    class StockLSTM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(1, 32, num_layers=2, batch_first=True, dropout=0.2)
            self.fc = nn.Linear(32, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out, _ = self.lstm(x)
            return self.fc(out[:, -1])

    model = StockLSTM()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
        if epoch % 5 == 4:
            model.eval()
            with torch.no_grad():
                pred = model(xs[n_train:]) * (hi - lo) + lo
                rmse = (pred - close[split:].unsqueeze(-1)).pow(2).mean().sqrt()
            print(f"epoch {epoch + 1}: loss {np.mean(losses[-31:]):.6f} test RMSE {rmse:.2f}")
    hook.close()
    return losses


# ============================================================================= Keras and JAX


def _keras_losses() -> Any:
    """A callback collecting each batch's loss: Keras 3 logs the epoch's running mean at every
    batch, so batch k's own loss is k * mean_k - (k - 1) * mean_{k-1}."""
    import keras

    class BatchLosses(keras.callbacks.Callback):
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

    return BatchLosses()


def keras_two_input_review_helpfulness(path: str, seed: int = 0) -> list[float]:
    """A Keras 3 functional model with two inputs: a review's token ids (`Embedding(mask_zero=
    True)`, `GlobalAveragePooling1D`) and its metadata (stars, length, reviewer's past votes,
    days since posting) through a `Normalization` layer adapted on the training rows, concatenated
    into a `Dense` stack to a sigmoid "helpful" output; `binary_crossentropy`, RMSprop 3e-3,
    batch 128, 10 epochs, `validation_split=0.2`."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 23)
    n, vocab, length = 6000, 200, 24
    helpful_words = rng.choice(np.arange(1, vocab), 30, replace=False)
    filler = np.setdiff1d(np.arange(1, vocab), helpful_words)
    tokens = rng.choice(filler, (n, length))
    n_help = rng.integers(0, 5, n)
    for i in range(n):
        tokens[i, rng.choice(8, n_help[i], replace=False)] = rng.choice(helpful_words, n_help[i])
    lens = rng.integers(8, length + 1, n)
    tokens[np.arange(length)[None] >= lens[:, None]] = 0
    meta = np.stack(
        [rng.integers(1, 6, n), lens * 12.0, rng.poisson(20, n), rng.exponential(200, n)], 1
    ).astype("float32")
    logit = 0.9 * (n_help - 2) + 0.04 * (meta[:, 2] - 20) - 0.4 * np.abs(meta[:, 0] - 3) + 0.5
    helpful = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype("float32")
    tokens_in = keras.Input((length,), dtype="int32", name="tokens")
    meta_in = keras.Input((4,), name="meta")
    norm = layers.Normalization()
    norm.adapt(meta[:4800])
    text = layers.GlobalAveragePooling1D()(layers.Embedding(vocab, 32, mask_zero=True)(tokens_in))
    h = layers.concatenate([text, layers.Dense(16, activation="relu")(norm(meta_in))])
    h = layers.Dense(32, activation="relu")(h)
    out = layers.Dense(1, activation="sigmoid", name="helpful")(h)
    model = keras.Model(inputs=[tokens_in, meta_in], outputs=out)
    model.compile(optimizer=keras.optimizers.RMSprop(3e-3), loss="binary_crossentropy", metrics=["accuracy"])
    history = _keras_losses()
    fit = model.fit(
        {"tokens": tokens, "meta": meta}, helpful, batch_size=128, epochs=10, validation_split=0.2,
        verbose=0, callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    print({k: round(float(v[-1]), 4) for k, v in fit.history.items()})
    return history.losses


def jax_mlp_hand_loop_sgd_momentum(path: str, steps: int = 400, seed: int = 0) -> list[float]:
    """The JAX "MLP from scratch" shape: parameters as a list of `{"w", "b"}` dicts initialised
    by hand (scaled normal), `jax.nn.relu`, `optax.softmax_cross_entropy_with_integer_labels`
    averaged, `jax.value_and_grad`, a `jax.jit` step applying `optax.sgd(exponential_decay(0.1,
    100, 0.7), momentum=0.9)`; 16-pixel digit-like glyphs (a 4x4 pattern per class with noise),
    batch 128, test accuracy every 100 steps; `hook.record` outside the jitted step."""
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    rng = np.random.default_rng(seed + 29)
    classes, d, n = 8, 64, 6000
    protos = rng.random((classes, d)) < 0.4
    y = rng.integers(0, classes, n)
    x = (protos[y] * (0.6 + 0.4 * rng.random((n, 1))) + 0.8 * rng.normal(size=(n, d))).astype("float32")
    x = (x - x[:5000].mean(0)) / x[:5000].std(0)

    def init(key: Any, sizes: list[int]) -> list[dict[str, Any]]:
        params = []
        for din, dout in zip(sizes[:-1], sizes[1:], strict=True):
            key, sub = jax.random.split(key)
            params.append(
                {"w": jax.random.normal(sub, (din, dout)) * jnp.sqrt(2.0 / din), "b": jnp.zeros(dout)}
            )
        return params

    def forward(params: list[dict[str, Any]], xb: Any) -> Any:
        for layer in params[:-1]:
            xb = jax.nn.relu(xb @ layer["w"] + layer["b"])
        return xb @ params[-1]["w"] + params[-1]["b"]

    def loss_fn(params: Any, xb: Any, yb: Any) -> Any:
        return optax.softmax_cross_entropy_with_integer_labels(forward(params, xb), yb).mean()

    params = init(jax.random.PRNGKey(seed), [d, 128, 64, classes])
    tx = optax.sgd(optax.exponential_decay(0.1, 100, 0.7), momentum=0.9)
    opt_state = tx.init(params)

    @jax.jit
    def step_fn(params: Any, opt_state: Any, xb: Any, yb: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(params, xb, yb)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    hook = mldbg.jax.Hook(path)
    losses: list[float] = []
    for step in range(steps):
        idx = rng.choice(5000, 128, replace=False)
        old = params
        params, opt_state, loss, grads = step_fn(params, opt_state, jnp.asarray(x[idx]), jnp.asarray(y[idx]))
        hook.record(step, params=old, grads=grads, loss=loss)
        losses.append(float(loss))
        if step % 100 == 99:
            acc = float((forward(params, jnp.asarray(x[5000:])).argmax(-1) == y[5000:]).mean())
            print(f"step {step + 1}: loss {np.mean(losses[-100:]):.4f} test acc {acc:.3f}")
    hook.close()
    return losses


# ============================================================================= the pipelines

_titanic = healthy(
    "titanic_category_embeddings_bce_adam", "Titanic-style tabular survival", titanic_embeddings_survival
)
_iris = healthy("iris_fullbatch_mlp_sgd_momentum", "Iris-style full-batch classifier", iris_fullbatch_mlp)
_sales = healthy(
    "store_sales_log1p_target_cyclic_hours", "log1p count-demand regression", store_sales_log1p_demand
)
_anomaly = healthy(
    "tabular_autoencoder_anomaly_threshold",
    "tabular autoencoder anomaly detection",
    tabular_autoencoder_anomaly,
)
_cifar = healthy(
    "cifar_style_cnn_hand_transforms_adamw_onecycle",
    "CIFAR-style CNN with hand-written transforms",
    cifar_cnn_hand_transforms_onecycle,
)
_keypoints = healthy(
    "keypoint_box_corners_cnn_smoothl1_steplr", "keypoint regression CNN", keypoint_box_corners_cnn
)
_sentiment = healthy(
    "sentiment_gru_pretrained_frozen_then_unfrozen",
    "sentiment GRU on pretrained embeddings",
    sentiment_gru_freeze_then_unfreeze,
)
_names_rnn = healthy(
    "char_rnn_name_generator_tutorial_manual_sgd",
    "character-level RNN name generator",
    char_rnn_name_generator,
)
_seq2seq = healthy(
    "seq2seq_attention_tutorial_teacher_forcing",
    "seq2seq GRU with attention (tutorial)",
    seq2seq_attention_teacher_forcing,
)
_siamese = healthy(
    "siamese_bag_cosine_embedding_loss_rmsprop",
    "Siamese encoder with CosineEmbeddingLoss",
    siamese_cosine_embedding_questions,
)

PIPELINES: list[Any] = [
    healthy("linear_regression_nn_linear_1_1_sgd", "first-tutorial linear regression", linear_regression_first_tutorial),
    healthy("logistic_regression_from_scratch_manual_update", "logistic regression from scratch", logistic_regression_from_scratch),
    healthy("wine_quality_bn_nesterov_warm_restarts_l1", "wine-quality regression MLP", wine_quality_batchnorm_nesterov),
    healthy("stock_lstm_minmax_sliding_windows_clip", "stock-price LSTM on sliding windows", stock_lstm_sliding_windows),
    _titanic,
    _iris,
    _sales,
    _anomaly,
    _cifar,
    _keypoints,
    _sentiment,
    _names_rnn,
    _seq2seq,
    _siamese,
    buggy(_titanic, "lr_x100"),
    buggy(_names_rnn, "no_zero_grad"),
    buggy(_siamese, "shuffled_labels"),
    buggy(_cifar, "inputs_x255"),
    buggy(_iris, "softmax_before_ce"),
    buggy(_keypoints, "dead_relu_init"),
    buggy(_anomaly, "deep_sigmoid"),
    buggy(_sentiment, "frozen_by_mistake"),
    buggy(_sales, "log_zero_nan"),
    buggy(_seq2seq, "train_in_eval_mode"),
]  # fmt: skip

if installed("keras", "tensorflow"):
    PIPELINES.append(
        healthy("keras_two_input_review_helpfulness", "Keras functional model with two inputs", keras_two_input_review_helpfulness)
    )  # fmt: skip

if installed("jax", "optax"):
    PIPELINES.append(
        healthy("jax_mlp_hand_init_optax_sgd_momentum", "plain JAX MLP with a hand-written loop", jax_mlp_hand_loop_sgd_momentum)
    )  # fmt: skip
