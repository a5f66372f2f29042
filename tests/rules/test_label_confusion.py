"""label_confusion: label noise concentrated on class pairs (30% of the training 7s labelled 1
and of the 3s labelled 8; 30% of the 7s only; 20% of the 7s) on a 10-class CNN fires within
150 steps, recorded with the two lines (statistics every step, as on a GPU, or on the CPU
budget, where the evaluation's labels carry the signal) or with everything every 5 steps;
healthy classifiers stay quiet: the clean twin, a 10-class MLP at ~85% accuracy (whose errors
spread over many pairs), an underfitting one (~15%), imbalanced classes, 40 classes, 3 classes
early in training. The calibration (72 runs, 4 seeds) is in docs/rules.md."""

from __future__ import annotations

import pytest

import mldbg
from tests.rules.conftest import assert_explains, fired
from tests.tiny import train

TEN = {"n_classes": 10, "optimizer": "adam", "n_train": 1024}
EVERY_STEP = {"default_hook": True, "hook_kwargs": {"statistics_budget": 0}}
TWO_LINES = {"default_hook": True}
EVERY_5 = {"save_interval": 5}
PAIRS = {(7, 1): 0.3, (3, 8): 0.3}


def first(path) -> mldbg.Finding | None:
    found = mldbg.check(path, rules=["label_confusion"])
    assert set(fired(found)) <= {"label_confusion"}
    return found[0] if found else None


@pytest.mark.parametrize(
    ("noise", "config", "seed", "steps", "bound"),
    [
        pytest.param(PAIRS, EVERY_STEP, 0, 150, 190, id="two pairs, statistics every step"),
        pytest.param(PAIRS, TWO_LINES, 2, 150, 155, id="two pairs, two lines"),
        pytest.param({(7, 1): 0.3}, TWO_LINES, 0, 150, 130, id="one pair, two lines"),
        pytest.param({(7, 1): 0.3}, EVERY_STEP, 1, 150, 140, id="one pair, statistics every step"),
        pytest.param({(7, 1): 0.2}, EVERY_STEP, 0, 180, 195, id="20% of the 7s, statistics every step"),
        pytest.param({(7, 1): 0.3}, EVERY_5, 1, 200, 250, id="one pair, everything every 5 steps"),
    ],
)
def test_fires_on_label_noise_concentrated_on_pairs(tmp_path, noise, config, seed, steps, bound):
    run = train(tmp_path / "run", model="cnn", pair_noise=noise, seed=seed, steps=steps, **TEN, **config)
    found = first(run.path)
    assert found is not None
    assert_explains(found)
    assert "pair 7 -> 1" in found.message or "pair 3 -> 8" in found.message, found.message
    # global steps (evaluation passes count); the bounds leave 30 steps for other CPUs' kernels,
    # which move where the noise shows by a few steps (116 on one machine, <= 110 on another)
    assert found.step <= bound, (found.step, found.message)


@pytest.mark.parametrize(
    "config", [EVERY_STEP, TWO_LINES, EVERY_5], ids=["every step", "two lines", "every 5"]
)
@pytest.mark.parametrize("seed", [0, 1])
def test_quiet_on_the_clean_twin(tmp_path, config, seed):
    run = train(tmp_path / "run", model="cnn", seed=seed, steps=200, **TEN, **config)
    assert first(run.path) is None


@pytest.mark.parametrize(
    ("kwargs", "accuracy"),
    [
        pytest.param({}, (0.75, 0.9), id="10-class MLP at 85%"),
        pytest.param({"optimizer": "sgd", "lr": 0.01}, (0.0, 0.35), id="underfitting: SGD lr 0.01"),
        pytest.param({"imbalance": 0.3}, (0.7, 0.95), id="imbalanced classes"),
        pytest.param({"n_classes": 40, "n_train": 2048}, (0.5, 0.85), id="40 classes"),
        pytest.param({"n_classes": 3}, (0.8, 1.0), id="3 classes"),
    ],
)
def test_quiet_on_healthy_classifiers(tmp_path, kwargs, accuracy):
    run = train(tmp_path / "run", steps=200, **{**TEN, **kwargs}, **EVERY_STEP)
    assert accuracy[0] <= run.eval_accuracy[-1] <= accuracy[1], run.eval_accuracy
    assert first(run.path) is None


def test_quiet_early_in_training(tmp_path):
    """The first 60 steps of the CNN, everything confused (the first evaluations well under
    50%), statistics every step: nothing is judged as a pair yet."""
    run = train(tmp_path / "run", model="cnn", steps=60, **TEN, **EVERY_STEP)
    assert run.eval_accuracy[0] < 0.5, run.eval_accuracy
    assert first(run.path) is None


def _clusters(path, noise: float = 0.0, steps: int = 200) -> str:
    """A 6-class MLP on Gaussian clusters where classes 4 and 5 overlap (their centers 1.5
    apart, unit noise: the best model errs on ~23% of each), recorded with statistics every
    step; `noise`: that share of class 0's training labels turned into class 1."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    centers = torch.randn(6, 10, generator=g) * 3
    way = torch.randn(10, generator=g)
    centers[5] = centers[4] + 1.5 * way / way.norm()
    y = torch.randint(0, 6, (4096,), generator=g)
    x = centers[y] + torch.randn(4096, 10, generator=g)
    flip = (y == 0) & (torch.rand(4096, generator=g) < noise)
    y = torch.where(flip, 1, y)
    net = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 6))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    with mldbg.torch.Hook(str(path), statistics_budget=0) as hook:
        hook.register_module(net)
        hook.register_loss(loss_fn)
        for _ in range(steps):
            idx = torch.randint(0, len(x), (64,), generator=g)
            opt.zero_grad()
            loss_fn(net(x[idx]), y[idx]).backward()
            opt.step()
    return str(path)


def test_quiet_on_a_pair_the_model_cannot_tell_apart(tmp_path):
    """Two overlapping classes: the model errs between them both ways alike (4 -> 5 and
    5 -> 4, 20-30% each) and nowhere else; a systematic confusion of the pair, but not label
    noise (which turns a's into b's and leaves b's alone): quiet. The same data with 30% of
    class 0's labels turned into 1 fires on the pair 1 -> 0 (the noisy labels predicted as
    what they show), one way only."""
    assert first(_clusters(tmp_path / "overlap")) is None
    found = first(_clusters(tmp_path / "noisy", noise=0.3))
    assert found is not None and "pair 1 -> 0" in found.message, found


def test_every_steps_labels_are_counted(tmp_path):
    """Between statistics steps the hook counts every step's labels: a statistics step after
    a gap saves the confusion matrix of the latest labels since the last one (`confusion_steps`,
    at most 1024 of them), not only its own step's."""
    import numpy as np

    from mldbg.rules.view import TrialView

    run = train(tmp_path / "run", model="cnn", seed=0, steps=150, **TEN, **TWO_LINES)
    view = TrialView(mldbg.create_trial(run.path))
    name = "CrossEntropyLoss_input_1"
    saved = [s for s in view.steps() if view.saved_statistic(name, s, "confusion_steps") is not None]
    assert saved
    sizes = {s: int(np.sum(view.saved_statistic(name, s, "confusion_steps"))) for s in saved}
    own = {s: int(np.sum(view.saved_statistic(name, s, "confusion"))) for s in saved}
    assert all(sizes[s] >= own[s] for s in saved)
    assert max(sizes.values()) == 1024, sizes  # a gap of more than 32 training steps of 32 labels


def test_quiet_on_a_binary_classifier_of_a_rare_class(tmp_path):
    """Clicks are 30% of the samples and hard to call: the model takes most of them for
    non-clicks, its threshold's doing (two classes: no other pair to single this one out)."""
    import torch
    from torch import nn

    from mldbg.torch import Hook

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    loss_fn = nn.BCEWithLogitsLoss()
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(330):
        x = torch.randn(64, 8)
        y = ((x[:, 0] + 2.0 * torch.randn(64)) > 1.5).float()  # ~25% positives, weakly predictable
        loss = loss_fn(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    found = mldbg.check(str(tmp_path), rules=["label_confusion"])
    assert not found, [str(f) for f in found]


def test_quiet_on_an_early_confusion_that_fades(tmp_path):
    """A healthy 3-class MLP (SGD momentum 0.9, xavier init) takes 46% of class 0 for class 1
    at first, then 21% in the newer half of the same window, and 2% by the end: a confusion
    it is unlearning, not label noise (the rule reported it at step 60 before). Noise on a
    pair stays, half after half (test_fires_on_label_noise_concentrated_on_pairs)."""
    run = train(tmp_path / "run", steps=100, momentum=0.9, lr=0.02, init="xavier")
    assert first(run.path) is None
