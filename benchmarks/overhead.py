"""Training-step overhead of the PyTorch hook, as ratios to an uninstrumented baseline
measured in the same run, in interleaved rounds (A B C A B C ...).

    python benchmarks/overhead.py [--steps 200] [--rounds 5] [--model cnn|resnet]

Scenarios (issue 2 and 9): (a) weights, biases, gradients and layer outputs every 10 steps,
(b) weights every 10 steps, (c) everything every 200 steps, (d) the default configuration.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

import mldbg
from mldbg.torch import Hook


def small_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 10),
    )  # fmt: skip


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.down is None else self.down(x)))


def small_resnet() -> nn.Module:
    """A ResNet-18-shaped network, narrow enough for a 2-core CPU."""
    widths = [16, 32, 64, 128]
    layers: list[nn.Module] = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for i, w in enumerate(widths):
        layers += [Block(cin, w, 1 if i == 0 else 2), Block(w, w, 1)]
        cin = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
    return nn.Sequential(*layers)


SCENARIOS: dict[str, dict] = {
    "a": dict(include_collections=["weights", "biases", "gradients", "outputs"], save_config=mldbg.SaveConfig(save_interval=10)),
    "b": dict(include_collections=["weights"], save_config=mldbg.SaveConfig(save_interval=10)),
    "c": dict(save_all=True, save_config=mldbg.SaveConfig(save_interval=200)),
    "d": dict(),
}


def run(model_fn: Callable[[], nn.Module], steps: int, hook_kwargs: dict | None, out: Path) -> tuple[float, dict]:
    torch.manual_seed(0)
    model = model_fn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
    hook = None
    if hook_kwargs is not None:
        hook = Hook(out, **hook_kwargs)
        hook.register_module(model)
        hook.register_loss(loss_fn)
    for _ in range(5):  # warm-up, not timed
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    if hook is not None:
        hook.close()  # the time to flush what was recorded counts
    elapsed = time.perf_counter() - t0
    stats = {}
    if hook is not None:
        w = hook.recorder.writer
        stats = {"records": w.written_records, "segments": w.written_segments, "blocked_s": round(w.blocked_seconds, 3)}
    return elapsed / steps, stats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--model", choices=["cnn", "resnet"], default="cnn")
    ap.add_argument("--scenarios", default="a,b,c,d")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    model_fn = small_cnn if args.model == "cnn" else small_resnet
    names = ["baseline", *args.scenarios.split(",")]
    times: dict[str, list[float]] = {n: [] for n in names}
    stats: dict[str, dict] = {}
    root = Path(tempfile.mkdtemp(prefix="mldbg-bench-"))
    try:
        for r in range(args.rounds):
            for n in names:
                out = root / f"{n}-{r}"
                t, st = run(model_fn, args.steps, None if n == "baseline" else SCENARIOS[n], out)
                times[n].append(t)
                stats[n] = st
                shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base = statistics.median(times["baseline"])
    result = {
        "machine": f"{platform.machine()} {torch.get_num_threads()} threads, torch {torch.__version__}",
        "model": args.model, "steps": args.steps, "rounds": args.rounds,
        "baseline_ms": round(base * 1e3, 3),
        "ratios": {n: round(statistics.median(times[n]) / base, 4) for n in names if n != "baseline"},
        "added_ms": {n: round((statistics.median(times[n]) - base) * 1e3, 3) for n in names if n != "baseline"},
        "writer": stats,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['machine']}; model {args.model}; {args.steps} steps x {args.rounds} interleaved rounds")
    print(f"baseline: {result['baseline_ms']:.2f} ms/step")
    for n, ratio in result["ratios"].items():
        print(f"scenario {n}: {ratio:.3f}x  (+{result['added_ms'][n]:.3f} ms/step)  {stats.get(n, {})}")


if __name__ == "__main__":
    main()
