"""What the profiler costs: its sampler thread's own CPU, and its overhead on a training run.

    python benchmarks/profiler_overhead.py [--seconds 30] [--steps 300] [--rounds 5] [--out FILE.json]

1. Sampler cost: a fresh process starts a `Profiler` (system metrics at 500 ms, then 100 ms)
   and otherwise sleeps for `--seconds`; the profiler thread measures its own CPU time
   (`time.thread_time()` around each wake-up, written to the END marker), and the process
   CPU time over the same span is the cross-check. Result: % of one core.
2. Training overhead: fresh worker processes train an MLP for `--steps` timed steps (after 20
   untimed) with no mldbg, with the hook alone, with the hook and the step timeline only
   (`ProfilerConfig(system_interval_ms=None)`), and with the full default profiler, in
   interleaved rounds (A B C D A B C D ...). Per configuration: the median over rounds of
   the median step time and of the process CPU time per step.
3. The training thread's share: the timeline calls of one step (`forward_start`, five
   `mark`s, `step_end`) timed in a loop; and, in one process, the training thread's CPU
   time per step (`time.thread_time()`, blind to other jobs' scheduling) of the hook with and
   without the profiler, interleaved, `--rounds` x 1500 steps of the small MLP.

`--parts sampler,timeline,training,thread` picks what to run (all by default).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ("none", "hook", "timeline", "profiler")
MODELS = {"small": (64, 256, 32), "medium": (256, 1024, 64)}  # features, hidden, batch


def sampler_worker(interval_ms: int, seconds: float) -> dict:
    from mldbg.profiler import Profiler, ProfilerConfig, ProfilerData

    out = tempfile.mkdtemp(prefix="mldbg-bench-")
    c0 = time.process_time()
    t0 = time.monotonic()
    prof = Profiler(out, ProfilerConfig(system_interval_ms=interval_ms))
    time.sleep(seconds)
    prof.close()
    wall = time.monotonic() - t0
    cpu = time.process_time() - c0
    end = ProfilerData(out).worker_end("worker_0") or {}
    thread_cpu = float(end.get("sampler_cpu_seconds", float("nan")))
    return {
        "interval_ms": interval_ms,
        "seconds": wall,
        "samples": end.get("samples"),
        "thread_cpu_seconds": thread_cpu,
        "thread_percent_of_core": 100 * thread_cpu / wall,
        "process_cpu_seconds": cpu,
        "process_percent_of_core": 100 * cpu / wall,
        "us_per_wakeup": 1e6 * thread_cpu / max(1, end.get("samples") or 1),
    }


def train_worker(mode: str, model: str, steps: int) -> dict:
    import torch
    from torch import nn

    torch.set_num_threads(1)
    features, hidden, batch = MODELS[model]
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 10)
    )
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    hook = None
    if mode != "none":
        from mldbg.profiler import ProfilerConfig
        from mldbg.torch import Hook

        cfg = {
            "hook": None,
            "timeline": ProfilerConfig(system_interval_ms=None),
            "profiler": ProfilerConfig(),
        }[mode]
        hook = Hook(tempfile.mkdtemp(prefix="mldbg-bench-"), profiler_config=cfg)
        hook.register_module(net)
        hook.register_loss(loss_fn)
    xs = torch.randn(32, batch, features)
    ys = torch.randint(0, 10, (32, batch))
    times = []
    c0 = None
    for i in range(steps + 20):
        if i == 20:
            c0 = time.process_time()
        t = time.perf_counter()
        opt.zero_grad()
        loss_fn(net(xs[i % 32]), ys[i % 32]).backward()
        opt.step()
        if i >= 20:
            times.append(time.perf_counter() - t)
    cpu = time.process_time() - (c0 or 0.0)
    if hook is not None:
        hook.close()
    return {
        "mode": mode,
        "model": model,
        "median_step_ms": 1e3 * statistics.median(times),
        "cpu_ms_per_step": 1e3 * cpu / steps,
    }


def timeline_calls(n: int = 200_000) -> float:
    """ns of training-thread time for one step's timeline calls."""
    from mldbg.profiler.timeline import (
        BACKWARD_END,
        BACKWARD_START,
        FORWARD_END,
        OPTIMIZER_END,
        OPTIMIZER_START,
        StepTimeline,
    )

    tl = StepTimeline()
    t = time.perf_counter()
    for step in range(n):
        tl.forward_start(step, 1)
        tl.mark(FORWARD_END)
        tl.mark(BACKWARD_START)
        tl.mark(BACKWARD_END)
        tl.mark(OPTIMIZER_START)
        tl.mark(OPTIMIZER_END)
        tl.step_end()
        if step % 1000 == 999:
            tl.drain()  # as the profiler thread does
    return 1e9 * (time.perf_counter() - t) / n


def thread_cpu_ab(rounds: int, steps: int = 1500) -> dict:
    """Training-thread CPU per step (us) of the hook alone, and of the hook with the profiler."""
    import torch
    from torch import nn

    from mldbg.profiler import ProfilerConfig
    from mldbg.torch import Hook

    torch.set_num_threads(1)
    features, hidden, batch = MODELS["small"]

    def one(profiler: bool) -> float:
        torch.manual_seed(0)
        net = nn.Sequential(
            nn.Linear(features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 10),
        )
        loss_fn = nn.CrossEntropyLoss()
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        hook = Hook(
            tempfile.mkdtemp(prefix="mldbg-bench-"), profiler_config=ProfilerConfig() if profiler else None
        )
        hook.register_module(net)
        hook.register_loss(loss_fn)
        x, y = torch.randn(batch, features), torch.randint(0, 10, (batch,))
        for i in range(steps + 50):
            if i == 50:
                c0 = time.thread_time()
            opt.zero_grad()
            loss_fn(net(x), y).backward()
            opt.step()
        cpu = time.thread_time() - c0
        hook.close()
        return 1e6 * cpu / steps

    hook_only, with_profiler = [], []
    for _ in range(rounds):
        hook_only.append(one(False))
        with_profiler.append(one(True))
    return {
        "hook_us": statistics.median(hook_only),
        "profiler_us": statistics.median(with_profiler),
        "rounds": rounds,
        "steps": steps,
    }


def run(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", *args], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--parts", default="sampler,timeline,training,thread")
    ap.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker is not None:
        kind, *rest = a.worker
        if kind == "sampler":
            print(json.dumps(sampler_worker(int(rest[0]), float(rest[1]))))
        else:
            print(json.dumps(train_worker(rest[0], rest[1], int(rest[2]))))
        return

    parts = set(a.parts.split(","))
    load = os.getloadavg()
    results: dict = {"cores": os.cpu_count(), "load_before": load, "sampler": [], "training": {}}
    for ms in (500, 100) if "sampler" in parts else ():
        r = run(["sampler", str(ms), str(a.seconds)])
        results["sampler"].append(r)
        print(
            f"sampler @{ms} ms: thread {r['thread_percent_of_core']:.3f}% of a core "
            f"({r['us_per_wakeup']:.0f} us per wake-up, {r['samples']} samples), "
            f"whole idle process {r['process_percent_of_core']:.3f}%",
            flush=True,
        )
    if "timeline" in parts:
        results["timeline_ns_per_step"] = timeline_calls()
        print(
            f"timeline calls of one step on the training thread: {results['timeline_ns_per_step']:.0f} ns",
            flush=True,
        )
    if "thread" in parts:
        ab = results["thread_cpu"] = thread_cpu_ab(a.rounds)
        print(
            f"training-thread CPU per step, small MLP: hook {ab['hook_us']:.1f} us, hook + profiler "
            f"{ab['profiler_us']:.1f} us ({ab['profiler_us'] - ab['hook_us']:+.1f} us)",
            flush=True,
        )
    for model in MODELS if "training" in parts else ():
        per: dict[str, list[dict]] = {m: [] for m in MODES}
        for _ in range(a.rounds):
            for mode in MODES:
                per[mode].append(run(["train", mode, model, str(a.steps)]))
        summary = {}
        for mode in MODES:
            summary[mode] = {
                "median_step_ms": statistics.median(r["median_step_ms"] for r in per[mode]),
                "cpu_ms_per_step": statistics.median(r["cpu_ms_per_step"] for r in per[mode]),
            }
        base = summary["none"]
        for mode in MODES:
            s = summary[mode]
            s["step_ratio"] = s["median_step_ms"] / base["median_step_ms"]
            s["cpu_ratio"] = s["cpu_ms_per_step"] / base["cpu_ms_per_step"]
            print(
                f"{model:6s} {mode:9s} median step {s['median_step_ms']:.3f} ms (x{s['step_ratio']:.3f}), "
                f"CPU {s['cpu_ms_per_step']:.3f} ms/step (x{s['cpu_ratio']:.3f})",
                flush=True,
            )
        results["training"][model] = {"summary": summary, "rounds": per}
    results["load_after"] = os.getloadavg()
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
