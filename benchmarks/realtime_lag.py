"""Real-time lag: from a bad step to its finding, and from a stop request to TrainingStopped.

    python benchmarks/realtime_lag.py [--repeats 3] [--step-ms 10,50,200] [--out FILE.json]

A real PyTorch training (a tiny MLP, `mldbg.torch.Hook`, every step saved) runs as its own
process at a fixed step time, and `mldbg watch --json --rule exploding_tensor` runs beside it
as another process, as a user would run them. Wall-clock times are taken in each process
(`time.time()`, one machine), so they compare directly.

1. Step -> finding. The training poisons one weight with NaN before step 20 and keeps going.
   Measured: (a) the bad step ends -> (b) its records are visible in the store (the mtime
   of the index file that first holds the step) -> (c) the watcher prints the finding.
   b->c is the watcher's own lag; a->c adds the writer's batching (`flush_seconds`).
   "steps late" counts the training steps that ended between a and c.
2. Stop request -> TrainingStopped. After step 20 this script writes the stop request with
   the `StopTraining` action (what `watch --stop` does) and the training notes when
   `TrainingStopped` reaches it and at which step.
3. End to end with `watch --stop`: the bad step ends -> TrainingStopped in the training.

Each is run with the defaults (writer flush 0.5 s, recorder stop check every 0.1 s, watcher
poll 0.2 s) and with a low-latency setting (flush 0.1 s, stop check every step, poll 0.05 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BAD = 20
SETTINGS = {
    "default": {"flush": 0.5, "stop_check": 0.1, "poll": 0.2},
    "low-latency": {"flush": 0.1, "stop_check": 0.0, "poll": 0.05},
}


# the training process ----------------------------------------------------------------------
def child(out: str, step_ms: float, steps: int, poison: bool, flush: float, stop_check: float) -> None:
    import torch
    from torch import nn

    import mldbg
    from mldbg.torch import Hook

    torch.set_num_threads(1)
    torch.manual_seed(0)
    x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    hook = Hook(out, save_config=mldbg.SaveConfig(save_interval=1), flush_seconds=flush,
                stop_check_seconds=stop_check)  # fmt: skip
    hook.register_module(model)
    hook.register_loss(loss_fn)
    step = 0
    try:
        for step in range(steps):
            t0 = time.perf_counter()
            if poison and step == BAD:
                with torch.no_grad():
                    model[0].weight[0, 0] = float("nan")
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            print(f"end {step} {time.time():.6f}", flush=True)
            rest = step_ms / 1000 - (time.perf_counter() - t0)
            if rest > 0:
                time.sleep(rest)
    except mldbg.TrainingStopped:
        print(f"stopped {step} {time.time():.6f}", flush=True)
        return
    hook.close()


# the measuring process ---------------------------------------------------------------------
def start_training(out: Path, step_ms: float, steps: int, poison: bool, s: dict) -> subprocess.Popen[str]:
    args = [sys.executable, __file__, "--child", str(out), str(step_ms), str(steps), str(int(poison)),
            str(s["flush"]), str(s["stop_check"])]  # fmt: skip
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def start_watcher(out: Path, s: dict, stop: bool) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "mldbg.cli.main", "watch", str(out), "--rule", "exploding_tensor", "--json",
            "--quiet", "--poll", str(s["poll"])] + (["--stop"] if stop else [])  # fmt: skip
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def stamped(pipe: object) -> tuple[list[tuple[float, str]], threading.Thread]:
    """Read a pipe's lines in a thread, each with the wall-clock time it arrived."""
    lines: list[tuple[float, str]] = []

    def read() -> None:
        for line in pipe:  # type: ignore[attr-defined]
            lines.append((time.time(), line.strip()))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return lines, thread


def ends(lines: list[tuple[float, str]]) -> dict[int, float]:
    out = {}
    for _, line in lines:
        kind, step, when = line.split()
        if kind == "end":
            out[int(step)] = float(when)
    return out


def visible_at(out: Path, step: int) -> float:
    """When the step's records became readable: the mtime of the first index file holding it."""
    import mldbg

    trial = mldbg.create_trial(out)
    files = {r.index_file for name in trial.tensor_names() for r in trial.records(name, step=step)}
    if not files:
        raise RuntimeError(f"step {step} not found in {out}")
    return min(os.stat(f).st_mtime for f in files)


def step_to_finding(tmp: Path, step_ms: float, s: dict) -> dict:
    out = tmp / f"find-{time.monotonic_ns()}"
    watcher = start_watcher(out, s, stop=False)
    found, found_reader = stamped(watcher.stdout)
    time.sleep(0.3)
    steps = BAD + max(40, int(3000 / step_ms))
    training = start_training(out, step_ms, steps, poison=True, s=s)
    t_lines, t_reader = stamped(training.stdout)
    training.wait()
    watcher.wait(timeout=60)
    found_reader.join(5)
    t_reader.join(5)
    when, line = found[0]
    finding = json.loads(line)
    assert finding["rule"] == "exploding_tensor" and finding["step"] == BAD, finding
    end = ends(t_lines)
    vis = visible_at(out, BAD)
    return {
        "end_to_visible": vis - end[BAD],
        "visible_to_finding": when - vis,
        "end_to_finding": when - end[BAD],
        "steps_late": sum(1 for s_, t in end.items() if s_ > BAD and t <= when),
    }


def stop_to_stopped(tmp: Path, step_ms: float, s: dict) -> dict:
    from mldbg.actions import Context, StopTraining
    from mldbg.rules.base import Finding
    from mldbg.store import open_store

    out = tmp / f"stop-{time.monotonic_ns()}"
    training = start_training(out, step_ms, 100000, poison=False, s=s)
    requested = None
    before = None  # the last step that had ended when the request was written
    for line in training.stdout:  # type: ignore[union-attr]
        kind, step, when = line.split()
        if kind == "end" and int(step) == BAD and requested is None:
            finding = Finding("benchmark", BAD, "TRAIN", "stop requested by the benchmark")
            requested = time.time()
            StopTraining()([finding], Context(run=str(out), store=open_store(out)))
        if kind == "end" and requested is not None and before is None and float(when) > requested:
            before = int(step) - 1
        elif kind == "stopped":
            stopped_step, stopped_when = int(step), float(when)
            if before is None:
                before = stopped_step - 1
            break
    training.wait()
    assert requested is not None and before is not None
    # steps that ended after the request, the one that raised included
    return {"request_to_stopped": stopped_when - requested, "steps_after_request": stopped_step - before}


def end_to_end(tmp: Path, step_ms: float, s: dict) -> dict:
    out = tmp / f"e2e-{time.monotonic_ns()}"
    watcher = start_watcher(out, s, stop=True)
    time.sleep(0.3)
    training = start_training(out, step_ms, BAD + max(100, int(10000 / step_ms)), poison=True, s=s)
    lines, reader = stamped(training.stdout)
    training.wait()
    watcher.wait(timeout=60)
    reader.join(5)
    end = ends(lines)
    stopped = [(float(w), int(st)) for _, line in lines for k, st, w in [line.split()] if k == "stopped"]
    assert stopped, "the training was not stopped"
    ((when, step),) = stopped
    return {"bad_to_stopped": when - end[BAD], "steps_past_bad": step - BAD}


def summarize(rows: list[dict]) -> dict:
    keys = rows[0].keys()
    return {
        k: {"median": statistics.median(r[k] for r in rows), "max": max(r[k] for r in rows)} for k in keys
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--step-ms", default="10,50,200")
    p.add_argument("--settings", default="default,low-latency")
    p.add_argument("--out", default=None, help="also write the results as JSON here")
    p.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        out, step_ms, steps, poison, flush, stop_check = args.child
        child(out, float(step_ms), int(steps), poison == "1", float(flush), float(stop_check))
        return
    results = []
    with tempfile.TemporaryDirectory(prefix="mldbg-lag-") as tmp:
        for name in args.settings.split(","):
            s = SETTINGS[name]
            for step_ms in [float(v) for v in args.step_ms.split(",")]:
                row = {"setting": name, "step_ms": step_ms, **s}
                row["find"] = summarize([step_to_finding(Path(tmp), step_ms, s) for _ in range(args.repeats)])
                row["stop"] = summarize([stop_to_stopped(Path(tmp), step_ms, s) for _ in range(args.repeats)])
                row["e2e"] = summarize([end_to_end(Path(tmp), step_ms, s) for _ in range(args.repeats)])
                results.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    print(table(results, args.repeats))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


def table(results: list[dict], repeats: int) -> str:
    def t(d: dict) -> str:
        return f"{d['median']:.2f} s ({d['max']:.2f})"

    def n(d: dict) -> str:
        return f"{d['median']:g} ({d['max']:g})"

    lines = [
        f"Median (max) of {repeats} runs each.",
        "",
        "| setting | step | step end -> visible | visible -> finding | step end -> finding | steps late "
        "| stop request -> TrainingStopped | steps after request | bad step -> stopped (watch --stop) "
        "| steps past bad |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        f, s, e = r["find"], r["stop"], r["e2e"]
        lines.append(
            f"| {r['setting']} | {r['step_ms']:g} ms | {t(f['end_to_visible'])} | {t(f['visible_to_finding'])} "
            f"| {t(f['end_to_finding'])} | {n(f['steps_late'])} | {t(s['request_to_stopped'])} "
            f"| {n(s['steps_after_request'])} | {t(e['bad_to_stopped'])} | {n(e['steps_past_bad'])} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
