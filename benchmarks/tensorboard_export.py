"""Exporting a run to TensorBoard event files: time, records/s and MB/s of event files.

    python benchmarks/tensorboard_export.py [--steps 500] [--repeat 5]

Records the run of dashboard_latency.py (tests/tiny.py's MLP, `--steps` steps, weights,
biases, gradients and the loss saved at every step), then times
`mldbg.insight.export_tensorboard(run, logdir)` into a fresh logdir, `--repeat` times each:
with histograms (the default: every raw tensor as a histogram, the loss as a scalar) and with
`histograms=False` (scalars only). The time includes opening the run. records/s: the run's
saved records (tensor x step) read per second; events/s: TensorBoard values written per
second; MB/s: bytes of event files written per second. Medians of `--repeat`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import dashboard_latency

import report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--name", default="tensorboard_export")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    import mldbg
    from mldbg.insight import export_tensorboard

    result: dict = {"machine": report.machine(), "command": report.command(), "settings": vars(args).copy()}
    tmp = Path(tempfile.mkdtemp(prefix="mldbg-tb-", dir=os.environ.get("MLDBG_BENCH_TMP")))
    path = tmp / "run"
    rows = []
    try:
        t0 = time.perf_counter()
        dashboard_latency.record_run(path, args.steps)
        size, files = report.tree_size(path)
        trial = mldbg.create_trial(str(path))
        records = sum(len(trial.tensor(n).steps()) for n in trial.tensor_names())
        result["record"] = {"seconds": time.perf_counter() - t0, "bytes": size, "files": files,
                            "records": records, "tensors": len(trial.tensor_names()),
                            "steps": len(trial.steps())}  # fmt: skip
        for histograms in (True, False):
            times, written = [], []
            for i in range(args.repeat):
                logdir = tmp / f"tb_{histograms}_{i}"
                t0 = time.perf_counter()
                counts = export_tensorboard(str(path), logdir, histograms=histograms)
                times.append(time.perf_counter() - t0)
                written.append(report.tree_size(logdir)[0])
                shutil.rmtree(logdir, ignore_errors=True)
            seconds = report.med(times)
            rows.append({"histograms": histograms, "seconds": seconds, "spread": report.spread(times),
                         "events": counts.total, "scalars": sum(counts.scalars.values()),
                         "histogram_events": sum(counts.histograms.values()), "bytes": written[0],
                         "records_per_s": records / seconds, "events_per_s": counts.total / seconds,
                         "mb_per_s": written[0] / 1e6 / seconds})  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["rows"] = rows
    report.publish(args.name, result, markdown(result), not args.no_save)


def markdown(r: dict) -> str:
    s, rec = r["settings"], r["record"]
    lines = [report.header(r)]
    lines.append(
        f"Run: tests/tiny.py's MLP, {rec['steps']} steps, {rec['tensors']} tensors "
        f"({', '.join(dashboard_latency.COLLECTIONS)}) saved at every step = {rec['records']:,} records, "
        f"{rec['bytes'] / 1e6:.1f} MB in {rec['files']} files. `export_tensorboard(run, logdir)` into a fresh "
        f"logdir, opening the run included; medians of {s['repeat']} repeats (min-max in seconds).\n"
    )
    rows = [
        ["histograms (default)" if row["histograms"] else "scalars only (`histograms=False`)",
         f"{row['seconds']:.2f} s ({row['spread']})",
         f"{row['events']:,} ({row['scalars']:,} scalars, {row['histogram_events']:,} histograms)",
         f"{row['bytes'] / 1e6:.2f} MB", f"{row['records_per_s']:,.0f}", f"{row['events_per_s']:,.0f}",
         f"{row['mb_per_s']:.2f}"]
        for row in r["rows"]
    ]  # fmt: skip
    head = [
        "export",
        "time",
        "TensorBoard values written",
        "event files",
        "run records/s",
        "values/s",
        "MB/s",
    ]
    lines.append(report.table(head, rows))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
