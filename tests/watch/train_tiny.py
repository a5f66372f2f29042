"""A tiny real training run as its own process by the watch tests.

`python train_tiny.py OUT KIND STEPS [SLEEP]` with KIND `healthy`, `explode` (lr 1e12: the
loss and the weights blow up to inf/NaN within a few steps) or `stall` (lr 0: the loss never
moves). Prints `step N` after each step and `done` at the end; a TrainingStopped ends it with
`stopped at N` and exit code 86.
"""

import sys
import time

import torch
from torch import nn

import mldbg
from mldbg.torch import Hook

torch.set_num_threads(1)

LR = {"healthy": 0.1, "explode": 1e12, "stall": 0.0}


def main(out_dir: str, kind: str, steps: int, sleep: float) -> int:
    torch.manual_seed(0)
    x = torch.randn(64, 8)
    y = (x[:, 0] > 0).long()
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=LR[kind])
    hook = Hook(out_dir, save_config=mldbg.SaveConfig(save_interval=1), flush_seconds=0.05)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    step = 0
    try:
        for step in range(steps):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            print(f"step {step}", flush=True)
            time.sleep(sleep)
    except mldbg.TrainingStopped as e:
        print(f"stopped at {step}: {e}", flush=True)
        return 86
    hook.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(
        main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]) if len(sys.argv) > 4 else 0.0)
    )
