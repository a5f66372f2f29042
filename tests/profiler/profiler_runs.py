"""Tiny real trainings with the profiler on, and GPU-shaped runs written through the real
writers and store (this machine has no GPU).

    train(path)                                   # healthy: DataLoader of ready batches
    train(path, data_sleep=0.01)                  # every batch takes 10 ms to load (__getitem__ sleeps)
    train(path, slow_steps=range(5, 100, 5))      # those steps sleep 40 ms inside the forward
    train(path, start_delay=1.0)                  # the first step comes a second late
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from mldbg import Mode, SaveConfig
from mldbg.profiler import ProfilerConfig, layout
from mldbg.profiler.series import ChunkWriter
from mldbg.profiler.system import node_writer
from mldbg.profiler.timeline import STEP_COLUMNS
from mldbg.record.recorder import Recorder
from mldbg.store import open_store
from mldbg.torch import Hook

torch.set_num_threads(1)  # tiny models: threads only contend on a shared 2-core machine

FAST = dict(system_interval_ms=50, flush_seconds=0.25)
SLOW_STEPS = tuple(range(8, 60, 4))  # the stalled steps of the step_outlier test: 13 > n_outliers=10


class Batches(Dataset):
    """Ready-made batches (batch_size=None in the DataLoader: no collation), optionally slow."""

    def __init__(self, n: int, batch: int, features: int, sleep: float = 0.0, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, batch, features, generator=g)
        self.y = torch.randint(0, 10, (n, batch), generator=g)
        self.sleep = sleep

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.sleep:
            time.sleep(self.sleep)  # decoding a slow image, reading a slow disk...
        return self.x[i], self.y[i]


class SleepOn(nn.Module):
    """Sleeps in the forward of chosen training steps (a stall inside the step)."""

    def __init__(self, steps: Iterable[int], seconds: float):
        super().__init__()
        self.steps = set(steps)
        self.seconds = seconds
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            if self.calls in self.steps:
                time.sleep(self.seconds)
            self.calls += 1
        return x


def model(
    features: int = 32, hidden: int = 256, slow_steps: Iterable[int] = (), slow_seconds: float = 0.04
) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(features, hidden),
        nn.ReLU(),
        SleepOn(slow_steps, slow_seconds),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 10),
    )


def train(
    out: str | Path,
    *,
    steps: int = 80,
    eval_steps: int = 0,
    batch: int = 64,
    hidden: int = 256,
    data_sleep: float = 0.0,
    slow_steps: Iterable[int] = (),
    slow_seconds: float = 0.04,
    start_delay: float = 0.0,
    config: ProfilerConfig | None = None,
    busy_seconds: float = 0.0,
) -> Hook:
    """Train (and evaluate) a small MLP with the profiler on; returns the closed hook."""
    features = 32
    hook = Hook(out, profiler_config=config or ProfilerConfig(**FAST))
    net = model(features, hidden, slow_steps, slow_seconds)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_module(net)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    if start_delay:
        time.sleep(start_delay)  # loading a data set, compiling...
    loader = DataLoader(Batches(steps, batch, features, data_sleep), batch_size=None, shuffle=False)
    deadline = time.perf_counter() + busy_seconds
    done = 0
    while True:
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            done += 1
        if time.perf_counter() >= deadline:
            break
    hook.train_steps = done  # type: ignore[attr-defined]
    if eval_steps:
        net.eval()
        with torch.no_grad():
            for x, y in DataLoader(Batches(eval_steps, batch, features, seed=1), batch_size=None):
                loss_fn(net(x), y)
    hook.close()
    return hook


# GPU-shaped runs ------------------------------------------------------------------------
def gpu_run(
    out: str | Path,
    *,
    n: int = 400,
    gpus: int = 1,
    cores: int = 8,
    interval: float = 0.5,
    gpu_util: Callable[[int, int], float] = lambda i, g: 92.0,
    gpu_mem: Callable[[int, int], float] = lambda i, g: 60.0,
    cpu: Callable[[int, int], float] = lambda i, c: 45.0,
    iowait: Callable[[int], float] = lambda i: 1.0,
    node: str = "gpu-node-1",
    workers: Sequence[str] = ("worker_0",),
    init_samples: int = 4,
    step_seconds: float = 0.25,
    seed: int = 0,
    tensors: bool = True,
) -> str:
    """Write a recorded GPU job: `n` node samples every `interval` s (values from the
    callables, plus a little noise), and a training step every `step_seconds` after
    `init_samples` samples of initialization. Returns the run's path."""
    rng = np.random.default_rng(seed)
    store = open_store(out)
    t0 = 1_700_000_000.0
    w = node_writer(
        store,
        node,
        cores,
        gpus,
        {
            "interval_ms": int(interval * 1000),
            "gpu_info": [
                {"index": g, "name": "Synthetic GPU", "memory_total": 16 << 30} for g in range(gpus)
            ],
        },
    )
    for i in range(n):
        noise = lambda: float(rng.normal(0, 1.0))  # noqa: E731
        clip = lambda v: float(np.clip(v, 0, 100))  # noqa: E731
        w.append([
            t0 + i * interval,
            [clip(cpu(i, c) + noise()) for c in range(cores)],
            clip(iowait(i) + abs(noise()) * 0.1),
            35.0, 20e9, 1e6, 2e5, 1e5, 1e5,
            [clip(gpu_util(i, g) + noise()) for g in range(gpus)],
            [clip(gpu_mem(i, g) + noise() * 0.2) for g in range(gpus)],
            [clip(gpu_mem(i, g)) / 100 * (16 << 30) for g in range(gpus)],
        ])  # fmt: skip
        if i % 50 == 49:
            w.flush()  # several chunks, as a live run writes them
    w.flush()
    start = t0 + init_samples * interval
    end_time = t0 + n * interval
    for worker in workers:
        meta = {
            "worker": worker,
            "node": node,
            "process_start": t0 - 2.0,
            "started": t0,
            "cores": cores,
            "framework": "torch-synthetic",
            "config": ProfilerConfig().to_dict(),
            "notes": [],
        }
        store.write(layout.worker_meta_key(worker), [json.dumps(meta).encode()])
        steps = ChunkWriter(store, layout.worker_stream(worker, layout.STEPS), STEP_COLUMNS)
        t = start
        k = 0
        while t + step_seconds < end_time:
            dur = step_seconds * (1 + 0.02 * float(rng.normal()))
            steps.append([k, 1, t + 0.01 * dur, t + dur, 0.01 * dur, 0.3 * dur, 0.5 * dur, 0.1 * dur, 0.0])
            t += dur
            k += 1
        steps.flush()
        store.write(layout.worker_end_key(worker), [json.dumps({"ended": end_time + 1.0}).encode()])
    if tensors:  # a few tensor steps too, as a hook saves them: the rule runner starts on them
        rec = Recorder(store, save_config=SaveConfig(save_interval=1))
        for _ in range(3):
            rec.start_step(Mode.TRAIN)
            rec.save_scalar("loss", 1.0)
            rec.end_step()
        rec.close()
    return str(out)


def fired(findings: Iterable[Any], rule: str) -> list[Any]:
    return [f for f in findings if f.rule == rule]
