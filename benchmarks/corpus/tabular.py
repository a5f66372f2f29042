"""Tabular models: MLP classifiers (class weights for imbalance, BatchNorm/LayerNorm, dropout,
every common optimizer and schedule), binary with pos_weight, categorical embeddings, and
regressions (MSE, Huber, quantile, Poisson)."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from mldbg.torch import Hook

from . import _data, buggy, healthy

torch.set_num_threads(1)


def _mlp(d_in: int, d_out: int, width: int, depth: int, norm: str, dropout: float, act: str) -> nn.Sequential:
    layers: list[nn.Module] = []
    d = d_in
    for _ in range(depth):
        layers.append(nn.Linear(d, width))
        if norm == "batch":
            layers.append(nn.BatchNorm1d(width))
        elif norm == "layer":
            layers.append(nn.LayerNorm(width))
        layers.append(
            {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "silu": nn.SiLU}[act]()
        )
        if dropout:
            layers.append(nn.Dropout(dropout))
        d = width
    layers.append(nn.Linear(d, d_out))
    return nn.Sequential(*layers)


def _optimizer(name: str, params, lr: float) -> torch.optim.Optimizer:
    return {
        "sgd": lambda: torch.optim.SGD(params, lr=lr),
        "momentum": lambda: torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=1e-4),
        "nesterov": lambda: torch.optim.SGD(params, lr=lr, momentum=0.9, nesterov=True),
        "adam": lambda: torch.optim.Adam(params, lr=lr),
        "adamw": lambda: torch.optim.AdamW(params, lr=lr, weight_decay=0.05),
        "rmsprop": lambda: torch.optim.RMSprop(params, lr=lr),
        "adagrad": lambda: torch.optim.Adagrad(params, lr=lr),
    }[name]()


def _scheduler(name: str | None, opt: torch.optim.Optimizer, lr: float, total: int):
    if name == "step":
        return torch.optim.lr_scheduler.StepLR(opt, step_size=total // 3, gamma=0.3)
    if name == "cosine_restarts":
        return torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=total // 4, T_mult=1)
    if name == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=total)
    if name == "warmup_linear":
        w = total // 10
        return torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min((s + 1) / w, max(0.0, (total - s) / (total - w)))
        )
    if name == "exponential":
        return torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.995)
    return None


def classifier(
    path: str,
    classes: int = 5,
    priors: tuple[float, ...] | None = (0.6, 0.2, 0.1, 0.07, 0.03),
    weighted: bool = True,
    d: int = 20,
    n: int = 3000,
    width: int = 64,
    depth: int = 2,
    norm: str = "none",
    dropout: float = 0.0,
    act: str = "relu",
    optimizer: str = "adam",
    lr: float = 1e-3,
    schedule: str | None = None,
    batch: int = 64,
    epochs: int = 6,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """A tabular MLP classifier with a DataLoader over a fixed training set, CrossEntropyLoss
    weighted by inverse class frequency when the classes are imbalanced, a validation pass per
    epoch."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    x, y = _data.teacher_classes(g, n + 500, d, classes, list(priors) if priors else None)
    if bug == "inputs_x255":
        x = x * 255
    xtr, ytr, xva, yva = x[:n], y[:n], x[n:], y[n:]
    if bug == "shuffled_labels":
        ytr = ytr[torch.randperm(n, generator=g)]
    counts = torch.bincount(ytr, minlength=classes).float().clamp(min=1)
    weight = counts.sum() / (classes * counts) if weighted else None
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size=batch, shuffle=True, generator=g, drop_last=True)
    if bug == "deep_sigmoid":
        depth, act, norm = 10, "sigmoid", "none"
    model = _mlp(d, classes, width, depth, norm, dropout, act)
    if bug == "dead_relu_init":
        for m in model:
            if isinstance(m, nn.Linear) and m.out_features == width:
                nn.init.constant_(m.bias, -5.0)
    if bug == "softmax_before_ce":
        model.append(nn.Softmax(dim=1))
    loss_fn = nn.CrossEntropyLoss(weight=weight)
    lr_used = lr * (100 if bug == "lr_x100" else 1)
    opt = _optimizer(optimizer, model.parameters(), lr_used)
    if bug == "frozen_by_mistake":  # the model is re-created after the optimizer was built
        model = _mlp(d, classes, width, depth, norm, dropout, act)
    sched = _scheduler(schedule, opt, lr_used, epochs * len(loader))
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for _ in range(epochs):
        model.train(bug != "train_in_eval_mode")
        for xb, yb in loader:
            if bug != "no_zero_grad":
                opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            if sched:
                sched.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            loss_fn(model(xva), yva)
    hook.close()
    return losses


def binary_pos_weight(
    path: str,
    positive: float = 0.08,
    optimizer: str = "adamw",
    lr: float = 2e-3,
    batch: int = 128,
    epochs: int = 8,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """Rare-event detection: 8% positives, BCEWithLogitsLoss(pos_weight=negatives/positives),
    an MLP with BatchNorm and dropout."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    x, y = _data.teacher_classes(g, 4000, 16, 2, [1 - positive, positive])
    y = y.float()
    pos_weight = (1 - y).sum() / y.sum().clamp(min=1)
    model = _mlp(16, 1, 64, 2, "batch", 0.2, "relu")
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    opt = _optimizer(optimizer, model.parameters(), lr)
    loader = DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=True, generator=g, drop_last=True)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    model.train()
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(xb).squeeze(1), yb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    hook.close()
    return losses


class EmbeddingMLP(nn.Module):
    """Categorical columns through embeddings, concatenated with the numeric columns."""

    def __init__(self, cardinalities: list[int], n_num: int, classes: int):
        super().__init__()
        self.embeds = nn.ModuleList(nn.Embedding(c, min(8, (c + 1) // 2)) for c in cardinalities)
        d = sum(e.embedding_dim for e in self.embeds) + n_num
        self.net = nn.Sequential(
            nn.Linear(d, 64), nn.LayerNorm(64), nn.GELU(), nn.Dropout(0.1), nn.Linear(64, classes)
        )

    def forward(self, cat: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([e(cat[:, i]) for i, e in enumerate(self.embeds)] + [num], 1))


def categorical(
    path: str, lr: float = 3e-3, epochs: int = 6, batch: int = 64, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Mixed categorical and numeric columns (a census-like table), AdamW with OneCycleLR."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    n, cards = 3000, [12, 5, 30]
    cat = torch.stack([torch.randint(0, c, (n,), generator=g) for c in cards], 1)
    num = torch.randn(n, 4, generator=g)
    effects = [torch.randn(c, generator=g) for c in cards]
    score = sum(e[cat[:, i]] for i, e in enumerate(effects)) + num @ torch.randn(4, generator=g)
    y = torch.bucketize(score, torch.quantile(score, torch.tensor([0.33, 0.66])))
    model = EmbeddingMLP(cards, 4, 3)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(
        TensorDataset(cat, num, y), batch_size=batch, shuffle=True, generator=g, drop_last=True
    )
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * len(loader))
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    model.train()
    for _ in range(epochs):
        for cb, nb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(cb, nb), yb)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
    hook.close()
    return losses


class PinballLoss(nn.Module):
    """Quantile regression: one output per quantile."""

    def __init__(self, quantiles: tuple[float, ...]):
        super().__init__()
        self.register_buffer("q", torch.tensor(quantiles))

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        err = target[:, None] - pred
        return torch.maximum(self.q * err, (self.q - 1) * err).mean()


class PoissonLoss(nn.Module):
    """Poisson negative log-likelihood of counts given a predicted rate (written out)."""

    def forward(self, rate: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        return (rate - counts * torch.log(rate)).mean()


def regression(
    path: str,
    loss: str = "mse",
    optimizer: str = "momentum",
    lr: float = 0.01,
    schedule: str | None = "step",
    norm: str = "batch",
    standardize: bool = True,
    width: int = 64,
    batch: int = 64,
    epochs: int = 8,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """Regression on house-price-like columns (ages, areas, incomes: raw scales differ by orders
    of magnitude), standardized with the training set's mean and std as a user does; targets
    standardized too (MSE, Huber, quantiles) or counts (Poisson, exp link)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    n = 2500
    z = torch.randn(n, 8, generator=g)
    scales = torch.tensor([40.0, 1500.0, 5e4, 3.0, 12.0, 0.5, 200.0, 7.0])
    offsets = torch.tensor([40.0, 2000.0, 6e4, 3.0, 20.0, 0.0, 500.0, 10.0])
    raw = z * scales + offsets
    signal = torch.tanh(z[:, 0]) * 2 + z[:, 1] * z[:, 2] + 0.5 * z[:, 3] - z[:, 4].abs()
    noise = (
        torch.distributions.StudentT(3.0).sample((n,)) * 0.3
        if loss == "huber"
        else 0.3 * torch.randn(n, generator=g)
    )
    if loss == "poisson":
        y = torch.poisson(torch.exp(0.5 * signal.clamp(max=3)), generator=g)
    else:
        y = signal + noise
        y = (y - y.mean()) / y.std()
    x = raw
    if standardize and bug != "inputs_x255":  # the bug: the standardization forgotten
        x = (raw - raw.mean(0)) / raw.std(0)
    outputs = 3 if loss == "quantile" else 1
    model = _mlp(8, outputs, width, 2, norm, 0.0, "relu")
    if loss == "poisson":
        model.append(nn.ReLU() if bug == "log_zero_nan" else nn.Softplus())  # the rate must be > 0
    loss_fn = {
        "mse": nn.MSELoss(),
        "huber": nn.HuberLoss(delta=1.0),
        "quantile": PinballLoss((0.1, 0.5, 0.9)),
        "poisson": PoissonLoss(),
    }[loss]
    lr_used = lr * (100 if bug == "lr_x100" else 1)
    opt = _optimizer(optimizer, model.parameters(), lr_used)
    loader = DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=True, generator=g, drop_last=True)
    sched = _scheduler(schedule, opt, lr_used, epochs * len(loader))
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    model.train()
    for _ in range(epochs):
        for xb, yb in loader:
            if bug != "no_zero_grad":
                opt.zero_grad()
            out = model(xb)
            loss_value = loss_fn(out, yb) if loss == "quantile" else loss_fn(out.squeeze(1), yb)
            loss_value.backward()
            opt.step()
            if sched:
                sched.step()
            losses.append(loss_value.item())
    hook.close()
    return losses


_imbalanced = healthy("tabular_imbalanced_weighted_adam", "tabular", classifier)
_bn = healthy(
    "tabular_batchnorm_momentum_step",
    "tabular",
    classifier,
    priors=None,
    classes=4,
    norm="batch",
    optimizer="momentum",
    lr=0.05,
    schedule="step",
    seed=1,
)
_drop = healthy(
    "tabular_dropout_layernorm_adamw_restarts",
    "tabular",
    classifier,
    priors=None,
    classes=6,
    norm="layer",
    dropout=0.2,
    optimizer="adamw",
    lr=2e-3,
    schedule="cosine_restarts",
    width=96,
    seed=2,
)
_mse = healthy("regression_mse_batchnorm_momentum", "regression", regression)
_poisson = healthy(
    "regression_poisson_counts_adam",
    "regression",
    regression,
    loss="poisson",
    optimizer="adam",
    lr=2e-3,
    schedule=None,
    norm="none",
    seed=4,
)
_plain = healthy(
    "tabular_sgd_plain_3layer",
    "tabular",
    classifier,
    priors=None,
    classes=3,
    depth=3,
    optimizer="sgd",
    lr=0.1,
    seed=5,
    epochs=8,
)

PIPELINES = [
    _imbalanced,
    _bn,
    _drop,
    _plain,
    healthy(
        "tabular_imbalanced_unweighted_rmsprop",
        "tabular",
        classifier,
        priors=(0.5, 0.3, 0.15, 0.05),
        classes=4,
        weighted=False,
        optimizer="rmsprop",
        lr=5e-4,
        seed=3,
    ),
    healthy(
        "tabular_tanh_adagrad",
        "tabular",
        classifier,
        priors=None,
        classes=3,
        act="tanh",
        optimizer="adagrad",
        lr=0.05,
        seed=4,
    ),
    healthy(
        "tabular_gelu_nesterov_onecycle",
        "tabular",
        classifier,
        priors=None,
        classes=8,
        act="gelu",
        optimizer="nesterov",
        lr=0.1,
        schedule="onecycle",
        depth=3,
        seed=6,
    ),
    healthy(
        "tabular_silu_adam_warmup_linear",
        "tabular",
        classifier,
        priors=(0.4, 0.4, 0.2),
        classes=3,
        act="silu",
        lr=3e-3,
        schedule="warmup_linear",
        batch=32,
        epochs=4,
        seed=7,
    ),
    healthy(
        "tabular_wide_batchnorm_adam_exponential",
        "tabular",
        classifier,
        priors=None,
        classes=10,
        norm="batch",
        width=256,
        lr=1e-3,
        schedule="exponential",
        n=4000,
        seed=8,
    ),
    healthy("binary_rare_positives_pos_weight", "tabular", binary_pos_weight),
    healthy(
        "binary_rare_positives_sgd",
        "tabular",
        binary_pos_weight,
        positive=0.15,
        optimizer="momentum",
        lr=0.02,
        seed=1,
    ),
    healthy("tabular_categorical_embeddings_onecycle", "tabular", categorical),
    _mse,
    healthy(
        "regression_huber_heavy_tails_rmsprop",
        "regression",
        regression,
        loss="huber",
        optimizer="rmsprop",
        lr=1e-3,
        schedule=None,
        norm="none",
        seed=1,
    ),
    healthy(
        "regression_quantile_adamw_cosine_restarts",
        "regression",
        regression,
        loss="quantile",
        optimizer="adamw",
        lr=3e-3,
        schedule="cosine_restarts",
        norm="layer",
        seed=2,
    ),
    healthy(
        "regression_mse_sgd_nonorm",
        "regression",
        regression,
        optimizer="sgd",
        lr=0.02,
        schedule=None,
        norm="none",
        width=32,
        seed=3,
    ),
    _poisson,
    buggy(_imbalanced, "lr_x100"),
    buggy(_imbalanced, "shuffled_labels"),
    buggy(_imbalanced, "softmax_before_ce"),
    buggy(_imbalanced, "inputs_x255"),
    buggy(_bn, "no_zero_grad"),
    buggy(_bn, "train_in_eval_mode"),
    buggy(_plain, "dead_relu_init"),
    buggy(_plain, "deep_sigmoid"),
    buggy(_drop, "frozen_by_mistake"),
    buggy(_mse, "inputs_x255"),
    buggy(_mse, "lr_x100"),
    buggy(_poisson, "log_zero_nan"),
]
