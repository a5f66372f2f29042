"""Sweeps on Dask: runs/s of `mldbg.scale.check_runs` and `reduce_runs` against a serial loop.

    python benchmarks/sweep_throughput.py [--runs 40 --steps 30] [--workers 2] [--repeat 3]

Records `--runs` tiny real PyTorch trainings (tests/tiny.py's `train`: a 2-hidden-layer MLP
recorded by `mldbg.torch.Hook` with every collection, `--steps` steps each, an evaluation
pass every 10 steps), then measures, on the same runs:
- serial: a loop of `mldbg.check(run)` (the default rules) in this process;
- `check_runs(runs, client=client)`: the same rules, one Dask task per run;
- `reduce_runs(runs, [<the runs' loss>], ("mean",), client=client)`: the loss of every step of
  every run gathered into one pandas table.
`client` is a `distributed.Client` of a `LocalCluster(n_workers=--workers,
threads_per_worker=1, processes=True)` started once, before the timings (its start-up is
reported apart); one untimed call of each warms its workers (imports). Medians of `--repeat`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import report


def record_runs(root: Path, count: int, steps: int) -> list[str]:
    if str(report.ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(report.ROOT / "tests"))
    from tiny import train  # a tiny real PyTorch training, recorded by mldbg.torch.Hook

    runs = []
    for i in range(count):  # a small learning-rate sweep, so the runs differ
        path = root / f"lr_{i:03d}"
        train(path, steps=steps, seed=i, lr=0.02 + 0.01 * (i % 10))
        runs.append(str(path))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--name", default="sweep_throughput")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    import mldbg
    from mldbg.scale import check_runs, reduce_runs

    result: dict = {"machine": report.machine(), "command": report.command(), "settings": vars(args).copy()}
    tmp = Path(tempfile.mkdtemp(prefix="mldbg-sweep-", dir=os.environ.get("MLDBG_BENCH_TMP")))
    cluster = client = None
    try:
        t0 = time.perf_counter()
        runs = record_runs(tmp, args.runs, args.steps)
        size, files = report.tree_size(tmp)
        result["record"] = {"seconds": time.perf_counter() - t0, "bytes": size, "files": files}
        loss = mldbg.create_trial(runs[0]).collections()["losses"][0]
        result["loss"] = loss

        t0 = time.perf_counter()
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)  # fmt: skip
        client = Client(cluster)
        result["cluster_start_s"] = time.perf_counter() - t0

        def serial() -> dict[str, list]:
            return {run: mldbg.check(run) for run in runs}

        def sweep():
            return check_runs(runs, client=client)

        def reduce():
            return reduce_runs(runs, [loss], ("mean",), client=client)

        # warm-up: imports in this process and on every worker (Dask spreads the runs)
        t0 = time.perf_counter()
        mldbg.check(runs[0])
        warm_serial = time.perf_counter() - t0
        t0 = time.perf_counter()
        check_runs(runs[: 2 * args.workers], client=client)
        warm_sweep = time.perf_counter() - t0
        t0 = time.perf_counter()
        reduce_runs(runs[: 2 * args.workers], [loss], ("mean",), client=client)
        warm_reduce = time.perf_counter() - t0
        result["warmup_s"] = {
            "serial_1_run": warm_serial,
            "check_runs": warm_sweep,
            "reduce_runs": warm_reduce,
        }

        times: dict[str, list[float]] = {"serial": [], "check_runs": [], "reduce_runs": []}
        outputs: dict[str, object] = {}
        for _ in range(args.repeat):
            for label, fn in (("serial", serial), ("check_runs", sweep), ("reduce_runs", reduce)):
                t0 = time.perf_counter()
                outputs[label] = fn()
                times[label].append(time.perf_counter() - t0)
        # the sweep finds what the loop finds; the table holds every run
        found = outputs["serial"]
        swept = outputs["check_runs"]
        assert not swept.errors, swept.errors
        assert {r: len(f) for r, f in swept.items()} == {r: len(f) for r, f in found.items()}
        df = outputs["reduce_runs"]
        assert df["run"].nunique() == args.runs, df["run"].nunique()
        result["findings"] = sum(len(f) for f in found.values())
        result["reduce_rows"] = len(df)
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        shutil.rmtree(tmp, ignore_errors=True)
    serial_s = report.med(times["serial"])
    result["rows"] = [
        {"label": label, "seconds": report.med(ts), "spread": report.spread(ts),
         "runs_per_s": args.runs / report.med(ts), "ratio": serial_s / report.med(ts)}
        for label, ts in times.items()
    ]  # fmt: skip
    report.publish(args.name, result, markdown(result), not args.no_save)


def markdown(r: dict) -> str:
    s, rec = r["settings"], r["record"]
    lines = [report.header(r)]
    lines.append(
        f"Sweep: {s['runs']} tiny PyTorch runs (tests/tiny.py: MLP, every collection, {s['steps']} steps, "
        f"recorded in {rec['seconds']:.1f} s, {rec['bytes'] / 1e6:.1f} MB in {rec['files']} files). Dask: "
        f"`LocalCluster(n_workers={s['workers']}, threads_per_worker=1, processes=True)`, started once in "
        f"{r['cluster_start_s']:.1f} s (not timed below) and warmed by one untimed call of each. The default "
        f"rules found {r['findings']} findings in all; `reduce_runs` of `{r['loss']}` gave "
        f"{r['reduce_rows']:,} rows. Medians of {s['repeat']} repeats (min-max in seconds).\n"
    )
    names = {
        "serial": "serial loop of `mldbg.check(run)`",
        "check_runs": "`check_runs(runs, client=...)`",
        "reduce_runs": f'`reduce_runs(runs, ["{r["loss"]}"], ("mean",), client=...)`',
    }
    rows = [
        [names[row["label"]], f"{row['seconds']:.2f} s ({row['spread']})", f"{row['runs_per_s']:.1f}",
         f"{row['ratio']:.2f}x"]
        for row in r["rows"]
    ]  # fmt: skip
    lines.append(
        report.table(["what", "time for all runs", "runs/s", "speed vs the serial `check` loop"], rows)
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
