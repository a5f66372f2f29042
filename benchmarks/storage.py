"""Storage per step: mldbg against smdebug recording the same tensors of the same run.

    python benchmarks/storage.py [--steps 50]

Both record the small ResNet of overhead.py with smdebug's scenario (a): weights, biases,
gradients, and `include_regex=[".*"]` (every layer's inputs and outputs), every 10 steps;
smdebug runs in its own venv (`.bench-venvs/smdebug`). Bytes and files are counted on disk.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import overhead

import report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=50, help="steps after one warm-up step (saved: every 10th)")
    ap.add_argument("--peers", default="smdebug", help="smdebug, or none")
    ap.add_argument("--inprocess", action="store_true", help="record mldbg in this process (smoke test)")
    ap.add_argument("--name", default="storage")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    result: dict = {"machine": report.machine(), "command": report.command(), "steps": args.steps}
    tmp = Path(tempfile.mkdtemp(prefix="mldbg-storage-", dir=os.environ.get("MLDBG_BENCH_TMP")))
    saved = len(range(0, args.steps + 1, 10))
    rows = []
    try:
        tools = [("mldbg", "inprocess" if args.inprocess else sys.executable)]
        if args.peers != "none":
            tools.append(("smdebug", overhead.peer_python()))
        for tool, python in tools:
            spec = {"kind": tool, "scenario": "a-regex", "out": str(tmp / tool), "steps": args.steps, "warmup": 1,
                    "model": "resnet", "batch": 8, "threads": 1, "device": "cpu"}  # fmt: skip
            res = overhead.run_worker(python, spec)
            rows.append({"tool": tool, "bytes": res["bytes"], "files": res["files"], "saved_steps": saved})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["rows"] = rows
    report.publish(args.name, result, markdown(result), not args.no_save)


def markdown(r: dict) -> str:
    rows = r["rows"]
    body = [[x["tool"], x["saved_steps"], f"{x['bytes'] / x['saved_steps'] / 1e6:.2f} MB",
             f"{x['files'] / x['saved_steps']:.2f}", x["files"]] for x in rows]  # fmt: skip
    lines = [
        report.header(r),
        f"The small ResNet of overhead.py, {r['steps'] + 1} steps, weights + biases + gradients + every layer's "
        'inputs and outputs (`include_regex=[".*"]`) every 10 steps, in both tools:\n',
        report.table(["tool", "saved steps", "bytes per saved step", "files per saved step", "files"], body),
    ]
    if len(rows) == 2 and rows[1]["bytes"]:
        lines.append(
            f"\nmldbg stores {rows[0]['bytes'] / rows[1]['bytes']:.3f}x smdebug's bytes in "
            f"{rows[0]['files'] / max(1, rows[1]['files']):.2f}x its files."
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
