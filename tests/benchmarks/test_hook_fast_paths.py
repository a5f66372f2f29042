"""The performance edits of issue 9 keep the hook's behaviour: what they remove is only work."""

import numpy as np
import torch
from torch import nn

import mldbg
from mldbg.torch import Hook


def _train(tmp_path, optimizer: bool, steps: int = 3):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
    loss_fn = nn.CrossEntropyLoss()
    hook = Hook(
        tmp_path / "run", include_collections=["gradients"], save_config=mldbg.SaveConfig(save_interval=1)
    )
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1) if optimizer else None
    grads, handles = [], []
    for _ in range(steps):
        x, y = torch.randn(6, 4), torch.randint(0, 2, (6,))
        model.zero_grad()
        loss_fn(model(x), y).backward()
        grads.append(model[0].weight.grad.clone().numpy())
        handles.append(len(hook._grad_handles))
        if opt is not None:
            opt.step()
        else:
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.1 * p.grad
    hook.close()
    return mldbg.create_trial(tmp_path / "run"), grads, handles


def test_no_per_gradient_callbacks_once_the_optimizer_is_known(tmp_path):
    trial, grads, handles = _train(tmp_path, optimizer=True)
    assert handles == [0, 0, 0]  # found at the first backward: no Python call per parameter after it
    for step, g in enumerate(grads):
        np.testing.assert_array_equal(trial.tensor("gradient/0.weight").value(step), g)


def test_without_optimizer_gradients_still_end_the_step(tmp_path):
    trial, grads, handles = _train(tmp_path, optimizer=False)
    assert handles == [4, 4, 4]  # the per-gradient hooks are what ends a step here
    assert trial.steps() == [0, 1, 2]
    for step, g in enumerate(grads):
        np.testing.assert_array_equal(trial.tensor("gradient/0.weight").value(step), g)
