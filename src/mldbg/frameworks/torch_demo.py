"""The embedded demo job: a small real PyTorch network on scikit-learn's digits (shipped
inside the installed package, no download), recorded with mldbg, then checked by the rules.
It trains with torch, so it lives at the framework edge, beside the torch adapter.

A healthy run and a deliberately broken twin (a learning rate far too high) show what the
rules say about each. It trains with PyTorch, so it lives beside the adapters (`mldbg demo`
imports it when it runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class DemoRun:
    path: Path
    train_accuracy: float
    eval_accuracy: float
    steps: int
    stopped: bool = False


def load_digits_split(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0 - 0.5).astype(np.float32) * 2  # pixels 0..16 -> -1..1
    return tuple(train_test_split(x, y.astype(np.int64), test_size=0.25, random_state=seed, stratify=y))


def train_digits(
    out: Path,
    *,
    lr: float = 1e-3,
    epochs: int = 4,
    batch_size: int = 32,
    save_interval: int = 5,
    seed: int = 0,
    progress: Callable[[int, float], None] | None = None,
    live_rules: bool = True,
    stop_on_finding: bool = False,
    watcher_wait: float = 120.0,
) -> DemoRun:
    """Train a 64-32-16-10 ReLU network with Adam, recording everything every few steps.

    With `live_rules` the default rules run beside the training in a watcher process and
    print what they find as it happens; with `stop_on_finding` they also stop the training.
    A step of this model takes about a millisecond, a real job's far longer: so that the stop
    can come before the run ends on any machine, a run meant to be stopped waits after its
    first epoch (at most `watcher_wait` seconds) until the watcher has read half of it.
    """
    import torch
    from torch import nn

    from mldbg import Mode, SaveConfig, TrainingStopped
    from mldbg.torch import Hook

    torch.manual_seed(seed)
    x_train, x_test, y_train, y_test = load_digits_split(seed)
    model = nn.Sequential(
        nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 10)
    )  # fmt: skip
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    from mldbg.actions import StopTraining

    hook = Hook(
        out,
        overwrite=True,  # the demo's own folder: a second `mldbg demo` replaces the first's run
        rules=["default"] if live_rules else None,
        flush_seconds=0.2,
        actions=[StopTraining()] if stop_on_finding else None,
        save_config=SaveConfig(save_interval=save_interval, mode_save_configs={Mode.EVAL: SaveConfig(save_interval=1)}),
        include_collections=[
            "weights", "biases", "gradients", "losses", "inputs", "labels", "predictions", "relu_activations",
        ],
    )  # fmt: skip
    hook.register_module(model)
    hook.register_loss(loss_fn)
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    xe, ye = torch.from_numpy(x_test), torch.from_numpy(y_test)
    gen = torch.Generator().manual_seed(seed)
    step = 0
    try:
        for epoch in range(epochs):
            if epoch == 1 and stop_on_finding and live_rules:
                wait_for_watcher(out, step // 2, watcher_wait)
            model.train()
            order = torch.randperm(len(xt), generator=gen)
            for i in range(0, len(order), batch_size):
                idx = order[i : i + batch_size]
                opt.zero_grad()
                loss = loss_fn(model(xt[idx]), yt[idx])
                loss.backward()
                opt.step()
                step += 1
                if progress:
                    progress(step, loss.item())
            model.eval()
            with torch.no_grad():
                for i in range(0, len(xe), 128):
                    loss_fn(model(xe[i : i + 128]), ye[i : i + 128])
    except TrainingStopped:
        stopped = True
    else:
        stopped = False
    finally:
        hook.close()
    with torch.no_grad():
        train_acc = (model(xt).argmax(1) == yt).float().mean().item()
        eval_acc = (model(xe).argmax(1) == ye).float().mean().item()
    return DemoRun(out, train_acc, eval_acc, step, stopped)


def wait_for_watcher(out: Path, step: int, timeout: float) -> None:
    """Wait until a watcher of the run at `out` has checked it up to `step` (it acts on what it
    found there before it says so), or `timeout` seconds passed: the training then goes on."""
    import time

    from mldbg.watch.state import rule_status

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(s.step is not None and s.step >= step for s in rule_status(out)):
            return
        time.sleep(0.1)
