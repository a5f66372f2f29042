"""When does the default rule set see an optimizer that stops stepping mid-run, with the two
lines of the README (`Hook(out_dir)`, statistics on the CPU budget)?

    .venv/bin/python benchmarks/optimizer_stop.py [--stop 300] [--steps 500]

Trains a small MLP and a small CNN with SGD on the CPU; `optimizer.step()` is skipped from
training step `--stop` on (the gradients are still computed). Prints the training steps of the
weights' statistics and every finding of `mldbg.check` with its step. BENCHMARKS.md section 10
("A parameter that stops moving between statistics steps") comes from this script.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import mldbg  # noqa: E402
import mldbg.torch  # noqa: E402

MODELS = {
    "MLP 20-64-3": (lambda: nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3)), (32, 20)),
    "CNN conv 3-8, linear": (
        lambda: nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 8 * 8, 3)
        ),
        (32, 3, 16, 16),
    ),
}


def run(name: str, out: Path, stop: int, steps: int) -> None:
    torch.manual_seed(0)
    build, shape = MODELS[name]
    model = build()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    hook = mldbg.torch.Hook(out)  # the two lines
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for step in range(steps):
        x = torch.randn(*shape)
        flat = x.flatten(1)
        y = (flat[:, 0] > 0).long() + (flat[:, 1] > 0).long()
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        if step < stop:
            optimizer.step()
    hook.close()
    trial = mldbg.create_trial(out)
    weight = trial.tensor_names(collection="weights")[0]
    stats = [s for s in trial.tensor(weight).steps(mldbg.Mode.TRAIN) if s >= 20]
    print(f"{name}: the optimizer stops after training step {stop - 1} of {steps}")
    print(f"  statistics of {weight} after the warm-up at training steps {stats}")
    findings = mldbg.check(out)
    for f in findings:
        print(f"  {f.rule} @{f.step} (training step {trial.mode_step(f.step)}): {f.message[:100]}")
    if not findings:
        print("  no finding")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop", type=int, default=300, help="first training step without optimizer.step()")
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        for i, name in enumerate(MODELS):
            run(name, Path(root) / str(i), args.stop, args.steps)


if __name__ == "__main__":
    main()
