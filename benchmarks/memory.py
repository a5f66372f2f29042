"""Memory of the hook: peak extra RSS during scenario (a), and that it stays bounded when the
disk is slow.

    python benchmarks/memory.py [--steps 200] [--rounds 3] [--disk-mbs 20] [--queue-mib 64]

Each configuration runs in a fresh process (the model and loop of overhead.py); the figure is
the process's peak RSS (VmHWM) minus the uninstrumented baseline's, median over interleaved
rounds. The slow disk is a LocalStore whose writes sleep as if the disk moved `--disk-mbs`
MB/s; with `max_queue_bytes=--queue-mib` MiB the training thread waits (`when_full="block"`)
or drops records (`when_full="drop"`), and the peak must stay near the bound.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import report


def slow_store(path: str, mbs: float):
    from mldbg.store.local import LocalStore

    class SlowDisk(LocalStore):
        def write(self, key, parts):
            nbytes = sum(memoryview(p).nbytes for p in parts)
            time.sleep(nbytes / (mbs * 1e6))
            super().write(key, parts)

    return SlowDisk(path)


def worker(spec: dict) -> dict:
    import overhead
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = overhead.build_model("resnet")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x, y = torch.randn(spec["batch"], 3, 32, 32), torch.randint(0, 10, (spec["batch"],))
    hook = None
    if spec["kind"] != "baseline":
        import mldbg
        from mldbg.torch import Hook

        out = spec["out"] if spec["kind"] == "normal" else slow_store(spec["out"], spec["disk_mbs"])
        opts = (
            {}
            if spec["kind"] == "normal"
            else {"max_queue_bytes": spec["queue_mib"] << 20, "when_full": spec["kind"]}
        )
        hook = Hook(out, include_collections=["weights", "biases", "gradients", "outputs"],
                    save_config=mldbg.SaveConfig(save_interval=10), **opts)  # fmt: skip
        hook.register_module(model)
        hook.register_loss(loss_fn)
    t0 = time.perf_counter()
    peak = 0
    for i in range(spec["steps"]):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        if i % 5 == 0:
            peak = max(peak, report.rss_kb())
    loop_s = time.perf_counter() - t0
    res = {"loop_s": loop_s, "hwm_loop_kb": peak}
    if hook is not None:
        w = hook.recorder.writer
        res.update(blocked_s=w.blocked_seconds, dropped=w.dropped)
        hook.close()
        res.update(records=w.written_records)
    res["hwm_kb"] = report.rss_kb("VmHWM")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--disk-mbs", type=float, default=20.0)
    ap.add_argument("--queue-mib", type=int, default=64)
    ap.add_argument("--name", default="memory")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--inprocess", action="store_true", help="no fresh process per run (smoke test)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    kinds = ["baseline", "normal", "block", "drop"]
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    root = Path(tempfile.mkdtemp(prefix="mldbg-mem-", dir=os.environ.get("MLDBG_BENCH_TMP")))
    result: dict = {"machine": report.machine(), "command": report.command(), "settings": vars(args).copy()}
    try:
        for r in range(args.rounds):
            for k in kinds:
                out = root / f"{k}-{r}"
                spec = {"kind": k, "out": str(out), "steps": args.steps, "batch": args.batch,
                        "disk_mbs": args.disk_mbs, "queue_mib": args.queue_mib}  # fmt: skip
                if args.inprocess:
                    runs[k].append(worker(spec))
                    continue
                proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)],
                                      capture_output=True, text=True, check=False)  # fmt: skip
                if proc.returncode:
                    raise RuntimeError(proc.stderr[-3000:])
                runs[k].append(json.loads(proc.stdout.splitlines()[-1]))
                shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = []
    for k in kinds:
        mine, base = runs[k], runs["baseline"]
        rows.append({
            "kind": k,
            "extra_peak_mb": report.med([(m["hwm_kb"] - b["hwm_kb"]) / 1024 for m, b in zip(mine, base, strict=True)]),
            "extra_peak_loop_mb": report.med([(m["hwm_loop_kb"] - b["hwm_loop_kb"]) / 1024 for m, b in zip(mine, base, strict=True)]),
            "ms_per_step": report.med([m["loop_s"] for m in mine]) / args.steps * 1e3,
            "blocked_s": report.med([m.get("blocked_s", 0) for m in mine]),
            "dropped": report.med([m.get("dropped", 0) for m in mine]),
            "records": report.med([m.get("records", 0) for m in mine]),
        })  # fmt: skip
    result["rows"] = rows
    report.publish(args.name, result, markdown(result), not args.no_save)


def markdown(r: dict) -> str:
    s = r["settings"]
    label = {
        "baseline": "baseline (no hook)",
        "normal": "(a), local disk, default bound (512 MiB)",
        "block": f"(a), disk throttled to {s['disk_mbs']:g} MB/s, max_queue_bytes {s['queue_mib']} MiB, when_full=block",
        "drop": f"(a), disk throttled to {s['disk_mbs']:g} MB/s, max_queue_bytes {s['queue_mib']} MiB, when_full=drop",
    }
    rows = [[label[x["kind"]], f"{x['extra_peak_mb']:+.1f}", f"{x['extra_peak_loop_mb']:+.1f}", f"{x['ms_per_step']:.1f}",
             f"{x['blocked_s']:.1f}", int(x["dropped"]), int(x["records"])] for x in r["rows"]]  # fmt: skip
    return "\n".join(
        [
            report.header(r),
            f"{s['steps']} steps of the small ResNet of overhead.py (batch {s['batch']}, 1 torch thread), {s['rounds']} "
            "interleaved rounds, each a fresh process; medians. Extra peak RSS = VmHWM - the baseline's VmHWM "
            "(whole run, `close()` included); 'during the loop' samples VmRSS every 5 steps.\n",
            report.table(
                [
                    "configuration",
                    "extra peak RSS MB",
                    "during the loop MB",
                    "ms/step",
                    "training blocked s",
                    "records dropped",
                    "records written",
                ],
                rows,
            ),  # fmt: skip
        ]
    )


if __name__ == "__main__":
    main()
