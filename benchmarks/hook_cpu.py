"""CPU cost of the hook per step, measured in one process: the quiet cross-check of overhead.py.

    python benchmarks/hook_cpu.py [--scenarios a,b,c,d] [--chunks 8 --chunk-steps 50]

Copies of the small ResNet of overhead.py in the same process, one unhooked and one hooked per
scenario, train in rotating chunks of `--chunk-steps` steps (baseline a b c d baseline a ...).
For each chunk it reads the training thread's CPU time (`time.thread_time`) and the
process's (`time.process_time`, so the writer threads count), which other jobs on a shared
machine disturb far less than wall time; all models share one allocator state, so glibc's
adaptive malloc policy favours none of them. Reports medians per step and the hook's added
CPU per step, split into the training thread and the rest (the writer). `--profile` runs
cProfile over the hooked chunks' training thread and prints mldbg's entries.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
import statistics
import tempfile
import time

import overhead

import report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default="a,b,c,d")
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument(
        "--chunk-steps",
        type=int,
        default=50,
        help="a multiple of 10 (of 200 for c) keeps saves per chunk equal",
    )
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--name", default=None, help="save results under benchmarks/results/<name>")
    args = ap.parse_args()
    import torch
    from torch import nn

    torch.set_num_threads(1)
    scenarios = [s for s in args.scenarios.split(",") if s]
    x, y = torch.randn(args.batch, 3, 32, 32), torch.randint(0, 10, (args.batch,))
    models = {}
    for kind in ("baseline", *scenarios):
        torch.manual_seed(0)
        model = overhead.build_model("resnet")
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        models[kind] = (model, opt, nn.CrossEntropyLoss())
    out = tempfile.mkdtemp(prefix="mldbg-hookcpu-")
    hooks = {s: overhead.mldbg_hook(s, f"{out}/{s}", models[s][0], models[s][2]) for s in scenarios}
    prof = cProfile.Profile() if args.profile else None

    def chunk(kind: str, steps: int) -> tuple[float, float, float]:
        model, opt, loss_fn = models[kind]
        t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        if prof is not None and kind != "baseline":
            prof.enable()
        for _ in range(steps):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        if prof is not None and kind != "baseline":
            prof.disable()
        return time.perf_counter() - t0, time.process_time() - c0, time.thread_time() - m0

    for kind in models:  # warm-up: first-step work (name resolution, optimizer search)
        chunk(kind, 10)
    res: dict[str, list[tuple[float, float, float]]] = {k: [] for k in models}
    for _ in range(args.chunks):
        for kind in models:
            res[kind].append(chunk(kind, args.chunk_steps))
    close_ms = {}
    for s, hook in hooks.items():
        t0 = time.perf_counter()
        hook.close()
        close_ms[s] = (time.perf_counter() - t0) * 1e3
    shutil.rmtree(out, ignore_errors=True)
    n = args.chunk_steps

    def added(s: str, i: int) -> list[float]:
        return [(h[i] - b[i]) / n * 1e3 for h, b in zip(res[s], res["baseline"], strict=True)]

    base = res["baseline"]
    rows = []
    for s in scenarios:
        rows.append({
            "scenario": s, "added_cpu_ms": statistics.median(added(s, 1)), "added_cpu_spread": report.spread(added(s, 1)),
            "added_main_ms": statistics.median(added(s, 2)), "added_wall_ms": statistics.median(added(s, 0)),
            "close_ms": close_ms[s],
        })  # fmt: skip
    result = {
        "machine": report.machine(), "command": report.command(), "chunks": args.chunks, "chunk_steps": n,
        "baseline_ms": statistics.median(b[0] for b in base) / n * 1e3,
        "baseline_cpu_ms": statistics.median(b[1] for b in base) / n * 1e3, "rows": rows,
    }  # fmt: skip
    body = []
    for r in rows:
        body.append([
            f"({r['scenario']}) {overhead.SCENARIOS[r['scenario']]}",
            f"{r['added_cpu_ms']:+.3f} ({r['added_cpu_spread']})",
            f"{r['added_cpu_ms'] / result['baseline_cpu_ms'] * 100:+.1f}%",
            f"{r['added_main_ms']:+.3f}", f"{r['added_cpu_ms'] - r['added_main_ms']:+.3f}",
            f"{r['added_wall_ms']:+.2f}", f"{r['close_ms']:.0f}",
        ])  # fmt: skip
    md = "\n".join([
        report.header(result),
        f"{args.chunks} rotating chunks of {n} steps per configuration in one process, medians of the per-chunk "
        f"differences to the unhooked model's chunk of the same rotation. Baseline: {result['baseline_ms']:.2f} ms/step "
        f"wall, {result['baseline_cpu_ms']:.2f} ms/step CPU.\n",
        report.table(["scenario", "added CPU ms/step (chunks min-max)", "of the baseline's CPU", "training thread",
                      "writer", "added wall ms/step", "close() ms"], body),  # fmt: skip
    ])  # fmt: skip
    print(md)
    if args.name:
        report.save(args.name, result, md)
    if prof is not None:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats("mldbg|clone|copy_", 30)
        print(s.getvalue())


if __name__ == "__main__":
    main()
