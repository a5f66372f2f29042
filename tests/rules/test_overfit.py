"""overfit: fires on a real training with the defect (16 training samples: the model memorizes them), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("tiny_train_set"), rules=["overfit"])
    assert found, "overfit did not fire on tiny_train_set"
    assert all(f.rule == "overfit" for f in found)
    assert "validation loss" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["overfit"].default:
        found = [f for f in default_findings(name) if f.rule == "overfit"]
    else:
        found = mldbg.check(run(name), rules=["overfit"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["overfit"].__name__ == "Overfit"


def train_xgboost_early_stopping(path, shuffled: bool, seed: int = 0) -> str:
    """`xgb.train` as its docs show it: binary:logistic, eta 0.3, max_depth 6, a validation
    set, `early_stopping_rounds=20`, on noisy tabular labels (a logistic model of the
    features: the log-loss has a floor, and deep trees soon fit the noise). `shuffled`: the
    labels permuted against the features (no signal: only memorizing lowers the loss)."""
    import numpy as np

    xgb = pytest.importorskip("xgboost")
    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2000, 10))
    z = 1.2 * x[:, 0] - 0.8 * x[:, 1] + 0.9 * x[:, 2] * x[:, 3] + np.where(x[:, 4] > 0.5, 1.0, -0.5)
    y = (rng.random(2000) < 1 / (1 + np.exp(-z))).astype(np.float32)
    if shuffled:
        y = y[rng.permutation(len(y))]
    dtrain, dvalid = xgb.DMatrix(x[:1600], y[:1600]), xgb.DMatrix(x[1600:], y[1600:])
    xgb.train(
        {"objective": "binary:logistic", "eta": 0.3, "max_depth": 6, "eval_metric": "logloss", "nthread": 1},
        dtrain, 300, evals=[(dtrain, "train"), (dvalid, "validation")], early_stopping_rounds=20,
        verbose_eval=False, callbacks=[mldbg.xgboost.Hook(str(path))],
    )  # fmt: skip
    return str(path)


def test_quiet_on_the_rounds_early_stopping_trains_past_the_best(tmp_path):
    """Early stopping trains `early_stopping_rounds` past the best round by design, and the
    validation loss rises there while the trees fit the noise: the stopper doing its job,
    and the model it keeps is the best round's (the rule fired on it before). The same
    training on shuffled labels never beats its first validation loss while the training
    loss falls: the model memorizes, reported."""
    path = train_xgboost_early_stopping(tmp_path / "healthy", shuffled=False)
    assert not mldbg.check(path, rules=["overfit"])
    shuffled = train_xgboost_early_stopping(tmp_path / "shuffled", shuffled=True)
    found = mldbg.check(shuffled, rules=["overfit"])
    assert found and "memorizing" in found[0].message, found


def _epochs(path, train: list[float], val: list[float], per: int = 20) -> str:
    """A run of `len(train)` epochs of `per` TRAIN steps at each epoch's training loss (1%
    noise), each followed by an evaluation pass of 3 EVAL steps at its validation loss."""
    import numpy as np

    from mldbg.record.recorder import Recorder

    rng = np.random.default_rng(0)
    rec = Recorder(str(path), save_config=mldbg.SaveConfig(save_interval=1), include_collections=["losses"])
    for t, v in zip(train, val, strict=True):
        for mode, level, n in ((mldbg.Mode.TRAIN, t, per), (mldbg.Mode.EVAL, v, 3)):
            for _ in range(n):
                rec.start_step(mode)
                rec.save_scalar("loss", float(level * (1 + 0.01 * rng.standard_normal())), ("losses",))
                rec.end_step()
    rec.close()
    return str(path)


def test_a_validation_loss_that_rises_with_the_training_loss_is_harder_data(tmp_path):
    """A walk-forward evaluation: each pass scores the next period, and a volatile one
    doubles both the training loss (the window takes it in) and the validation loss. The
    validation loss rose past its best while the model did not fit its training set any
    better: harder data, not memorizing. The same validation losses while the training loss
    goes on falling are overfitting."""
    import numpy as np

    base = 0.5 + 0.5 * np.exp(-np.arange(30) / 4)  # learning: 1 -> 0.5
    vol = np.where(np.arange(30) >= 18, 2.0, 1.0)  # a volatile period from epoch 18
    val = list(1.6 * base * vol)
    harder = _epochs(tmp_path / "harder", list(base * vol), val)
    assert not mldbg.check(harder, rules=["overfit"])
    memorizing = _epochs(
        tmp_path / "memorizing", list(base * np.exp(-np.maximum(0, np.arange(30) - 18) / 3)), val
    )
    assert [f.rule for f in mldbg.check(memorizing, rules=["overfit"])] == ["overfit"]


def test_a_validation_metric_of_another_quantity_is_not_judged(tmp_path):
    """MBPO's dynamics model: the training loss a Gaussian NLL that goes below zero as the
    variances shrink, each evaluation the holdout MSE (small, positive), which rises for a few
    epochs after every refit on new data. No gap between the two means anything: quiet, and
    the rule says why it could not judge. The same validation curve scaled to the training
    loss, while it goes on falling, is overfitting."""
    import numpy as np

    from mldbg.rules.runner import RuleRunner

    epochs = np.arange(40)
    nll = list(15 - 30 * (1 - np.exp(-epochs / 8)))  # 15 -> about -14
    mse = 2.5 * np.exp(-epochs / 10) + 0.05
    mse[20:30] = mse[19] * (1 + 0.1 * np.arange(1, 11))  # a refit: the holdout error climbs for 10 epochs
    runner = RuleRunner(_epochs(tmp_path / "mbpo", nll, list(mse)), ["overfit"])
    assert not runner.run_available() + runner.finish()
    assert "not a measure of the training loss" in runner.skipped["overfit"]
    falling = list(16 * np.exp(-epochs / 8) + 0.1)  # the same shape, one quantity
    same = _epochs(tmp_path / "same", falling, list(mse * 6))
    assert [f.rule for f in mldbg.check(same, rules=["overfit"])] == ["overfit"]


def _memorizing_keeping(path, keep: str, epochs: int = 40) -> str:
    """An MLP under Adam memorizing 64 samples with noisy labels, the validation loss of 256
    held-out samples after each epoch; `keep`: "best" takes the model's state when that loss
    is the lowest yet (early stopping written by hand, pytorchtools' and DGL's), "every"
    saves it after each epoch, "none" never."""
    import copy
    import io

    import torch
    import torch.nn.functional as F
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(16, 4, generator=g)

    def data(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, 16, generator=g)
        return x, (x @ teacher + torch.randn(n, 4, generator=g)).argmax(1)

    (xt, yt), (xv, yv) = data(64), data(256)
    model = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 4))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    best, best_state = float("inf"), None
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        for _ in range(epochs):
            model.train()
            for xb, yb in zip(xt.split(32), yt.split(32), strict=True):
                opt.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                val = F.cross_entropy(model(xv), yv).item()
            if keep == "every" or (keep == "best" and val < best):
                best, best_state = min(best, val), copy.deepcopy(model.state_dict())
                torch.save(model.state_dict(), io.BytesIO())
    assert best_state is not None or keep == "none"
    return str(path)


@pytest.mark.parametrize("keep", ["best", "every", "none"])
def test_a_script_that_keeps_its_best_model_is_under_early_stopping(tmp_path, keep):
    """The model's state taken after the passes that lower the validation loss, and only
    those, is a best model kept by hand (blind25's DGL HAN, CLAM): the passes past the best are
    its patience, as under a trainer's early stopping. A state saved after every epoch keeps
    no best: the memorizing is reported, as with none."""
    found = mldbg.check(_memorizing_keeping(tmp_path / "run", keep), rules=["overfit"])
    assert bool(found) == (keep != "best"), [str(f) for f in found]
    trial = mldbg.create_trial(str(tmp_path / "run"))
    assert trial.has_tensor("state_taken/model") == (keep != "none")
