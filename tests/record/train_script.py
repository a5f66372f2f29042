"""A tiny training job run as its own process by the tests: `python train_script.py OUT STEPS [SLEEP]`."""

import sys
import time

import torch
from torch import nn

import mldbg
from mldbg.torch import Hook


def main(out_dir: str, steps: int, sleep: float, close: bool = True) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    hook = Hook(out_dir, save_config=mldbg.SaveConfig(save_interval=1), flush_seconds=0.1)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for step in range(steps):
        x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        print(f"step {step}", flush=True)
        time.sleep(sleep)
    if close:  # else the interpreter's exit flushes and closes
        hook.close()


if __name__ == "__main__":
    main(
        sys.argv[1],
        int(sys.argv[2]),
        float(sys.argv[3]) if len(sys.argv) > 3 else 0.0,
        close=sys.argv[4:5] != ["noclose"],
    )
