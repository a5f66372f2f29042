"""Overhead of the two lines (`Hook(out)`, `register_module`, `register_loss`) on a 2-process
FSDP2 job next to the same on DDP, each relative to its own uninstrumented step (issue 31).

    python benchmarks/sharded_overhead.py [--steps 120] [--rounds 3] [--width 256]

Four configurations: {DDP, FSDP2 (`fully_shard` on each Linear and the model)} x {no hook,
the two lines with their defaults}. The same model (an MLP of 4 Linear layers, `--width`
units), batch and data on both; gloo on the CPU. Every measurement is a fresh pair of worker
processes (`--worker`), the configurations interleaved round by round (D0 D1 F0 F1, then the
next round in the reverse order), so a drift of the shared machine falls on all of them alike.
A worker times `--steps` steps with `perf_counter` on rank 0 (each step ends at
`optimizer.step()`; the ranks wait on each other at every collective, so rank 0's step is the
job's), leaving out the first 2 (the hook's one-time work). Two figures per layout, each the
hooked one over the bare one, minus 1:

- statistics steps: the median of steps 2-19, the cadence's warmup, where the two lines record
  statistics at every step (on FSDP2: the partials of every DTensor, one `all_gather` per
  mesh and one `all_reduce` of the gradients' subsample, docs/frameworks.md "Sharded training");
- steady state: the mean of steps 20 and on (one statistics step in 100, a data-parallel
  fingerprint step in 10), what a long run pays on average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAYOUTS = ("ddp", "fsdp")
WARMUP = 20  # the cadence's warmup: statistics at every step (torch_defaults.WARMUP)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# the worker --------------------------------------------------------------------------------
def worker(layout: str, hooked: bool, steps: int, width: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn

    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # two processes on the CPU cores: no oversubscription
    layers = [nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    if layout == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
    else:
        model = nn.parallel.DistributedDataParallel(model)
    loss_fn = nn.CrossEntropyLoss()
    hook = None
    if hooked:
        from mldbg.torch import Hook

        hook = Hook(out)
        hook.register_module(model)
        hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(100 + rank)
    data = [(torch.randn(32, 64, generator=g), torch.randint(0, 10, (32,), generator=g)) for _ in range(8)]
    times = []
    for i in range(steps):
        x, y = data[i % len(data)]
        start = time.perf_counter()
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - start)
    if hook is not None:
        hook.close()
    dist.barrier()
    if rank == 0:
        print("TIMES " + json.dumps(times), flush=True)
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # as tests/frameworks/ddp_script.py: no interpreter finalization


def measure(layout: str, hooked: bool, args: argparse.Namespace) -> list[float]:
    out = tempfile.mkdtemp(prefix="mldbg-sharded-bench-")
    port = str(free_port())
    argv = [sys.executable, __file__, "--worker", layout, str(int(hooked)), "--steps", str(args.steps)]
    argv += ["--width", str(args.width), "--out", out]
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    procs = [
        subprocess.Popen(
            argv, env=dict(env, RANK=str(r)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for r in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    shutil.rmtree(out, ignore_errors=True)
    for p, text in zip(procs, outputs, strict=True):
        if p.returncode != 0:
            raise SystemExit(f"worker failed ({layout}, hooked={hooked}):\n{text}")
    line = next(ln for ln in outputs[0].splitlines() if ln.startswith("TIMES "))
    return list(json.loads(line[6:]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--out", default="")
    parser.add_argument("--worker", nargs=2, metavar=("LAYOUT", "HOOKED"))
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1] == "1", args.steps, args.width, args.out)
        return
    configs = [(layout, hooked) for layout in LAYOUTS for hooked in (False, True)]
    warm: dict[tuple[str, bool], list[float]] = {c: [] for c in configs}
    steady: dict[tuple[str, bool], list[float]] = {c: [] for c in configs}
    began = time.perf_counter()
    for r in range(args.rounds):
        for c in configs if r % 2 == 0 else configs[::-1]:
            times = measure(*c, args)
            warm[c].extend(times[2:WARMUP])
            steady[c].extend(times[WARMUP:])
    print(f"2-process gloo jobs on the CPU, {args.rounds} rounds x {args.steps} steps, width {args.width}")
    print(
        "| layout | statistics steps: bare / two lines (median) | overhead | steady: bare / two lines (mean) | overhead |"
    )
    print("| --- | --- | --- | --- | --- |")
    for layout in LAYOUTS:
        row = [layout]
        for pick, times_of in ((statistics.median, warm), (statistics.fmean, steady)):
            bare, hooked = pick(times_of[(layout, False)]), pick(times_of[(layout, True)])
            row += [f"{bare * 1e3:.2f} / {hooked * 1e3:.2f} ms", f"{100 * (hooked / bare - 1):+.1f}%"]
        print("| " + " | ".join(row) + " |")
    print(f"({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
