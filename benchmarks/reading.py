"""Reading a run: open, value() latency warm and cold, refresh cost, records written per second.

    python benchmarks/reading.py [--steps 10000 --tensors 100 --elements 64] [--repeat 7]

Builds a run of `--steps` steps x `--tensors` tensors (float32, `--elements` each) with the
Recorder (framework-free, so the figure is the format's and the reader's), then measures:
- open: `mldbg.create_trial(path)` on the finished run (index files in the page cache);
- value() cold: the first `value()` of a tensor on a freshly opened trial (builds that
  tensor's step table, opens the data file); warm: later `value()` calls on other steps;
- refresh: `trial.refresh()` on a live run after 10 new steps were flushed, and with nothing new.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import report


def recorder(path: Path):
    from mldbg import SaveConfig
    from mldbg.record.recorder import Recorder

    return Recorder(str(path), save_config=SaveConfig(save_interval=1), include_collections=[],
                    include_regex=["^t"], flush_seconds=0.5)  # fmt: skip


def write_steps(rec, first: int, count: int, names: list[str], values: list[np.ndarray]) -> None:
    for _ in range(count):
        rec.start_step()
        for name, v in zip(names, values, strict=True):
            rec.save(name, v, rec.plan(name, ()))
        rec.end_step()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--tensors", type=int, default=100)
    ap.add_argument("--elements", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--name", default="reading")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    import mldbg

    result: dict = {"machine": report.machine(), "command": report.command(), "settings": vars(args).copy()}
    tmp = Path(tempfile.mkdtemp(prefix="mldbg-read-", dir=os.environ.get("MLDBG_BENCH_TMP")))
    run = tmp / "run"
    names = [f"t{i:03d}/layer.weight" for i in range(args.tensors)]
    values = [np.full(args.elements, i, dtype=np.float32) for i in range(args.tensors)]
    try:
        rec = recorder(run)
        t0, c0 = time.perf_counter(), time.process_time()
        write_steps(rec, 0, args.steps, names, values)
        rec.flush()
        write_s, write_cpu = time.perf_counter() - t0, time.process_time() - c0
        records = args.steps * args.tensors
        result["write"] = {"records": records, "seconds": write_s, "cpu_seconds": write_cpu,
                           "records_per_s": records / write_s, "bytes": report.tree_size(run)[0],
                           "files": report.tree_size(run)[1]}  # fmt: skip
        # open ------------------------------------------------------------------------
        opens = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            trial = mldbg.create_trial(str(run))
            opens.append(time.perf_counter() - t0)
        assert len(trial.steps()) == args.steps, (len(trial.steps()), args.steps)
        # value(): cold = first call for a tensor on a fresh trial; warm = later calls ---------
        rng = random.Random(0)
        cold, first_any, warm = [], [], []
        for _ in range(args.repeat):
            trial = mldbg.create_trial(str(run))
            name = rng.choice(names)
            t0 = time.perf_counter()
            trial.tensor(name).value(rng.randrange(args.steps))
            first_any.append(time.perf_counter() - t0)
            name2 = rng.choice([n for n in names if n != name])
            t0 = time.perf_counter()
            v = trial.tensor(name2).value(rng.randrange(args.steps))
            cold.append(time.perf_counter() - t0)
            assert v[0] == names.index(name2)
            t = trial.tensor(name2)
            for _ in range(200):
                s = rng.randrange(args.steps)
                t0 = time.perf_counter()
                t.value(s)
                warm.append(time.perf_counter() - t0)
        red = []
        t = trial.tensor(names[0])
        for _ in range(200):
            s = rng.randrange(args.steps)
            t0 = time.perf_counter()
            t.reduction_value(s, "mean")
            red.append(time.perf_counter() - t0)
        # refresh ------------------------------------------------------------------------
        live = mldbg.create_trial(str(run))
        refresh_new, refresh_none = [], []
        step = args.steps
        for _ in range(args.repeat):
            write_steps(rec, step, 10, names, values)
            rec.flush()
            step += 10
            t0 = time.perf_counter()
            n = live.refresh()
            refresh_new.append(time.perf_counter() - t0)
            assert n == 10 * args.tensors, n
            t0 = time.perf_counter()
            live.refresh()
            refresh_none.append(time.perf_counter() - t0)
        rec.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ms = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
    result["open_ms"] = ms(opens)
    result["open_spread_ms"] = f"{min(opens) * 1e3:.0f}-{max(opens) * 1e3:.0f}"
    result["value_first_ms"] = ms(first_any)
    result["value_cold_ms"] = ms(cold)
    result["value_warm_ms"] = ms(warm)
    result["value_warm_p90_ms"] = sorted(warm)[int(len(warm) * 0.9)] * 1e3
    result["reduction_warm_ms"] = ms(red)
    result["refresh_10_steps_ms"] = ms(refresh_new)
    result["refresh_nothing_ms"] = ms(refresh_none)
    report.publish(args.name, result, markdown(result), not args.no_save)


def markdown(r: dict) -> str:
    s, w = r["settings"], r["write"]
    lines = [report.header(r)]
    lines.append(
        f"Run: {s['steps']:,} steps x {s['tensors']} tensors of {s['elements']} float32 = {w['records']:,} records, "
        f"written by the Recorder in {w['seconds']:.1f} s ({w['records_per_s']:,.0f} records/s, "
        f"{w['cpu_seconds']:.1f} s CPU) into {w['files']} files, {w['bytes'] / 1e6:.1f} MB. Medians of {s['repeat']} "
        "repeats (value(): of 200 calls per repeat).\n"
    )
    rows = [
        ["open the run (`create_trial`)", f"{r['open_ms']:.0f} ms (min-max {r['open_spread_ms']})", "< 1 s"],
        ["first `value()` on a fresh trial (builds its step table)", f"{r['value_first_ms']:.2f} ms", ""],
        ["`value()` cold (first call for another tensor)", f"{r['value_cold_ms']:.2f} ms", ""],
        [
            "`value()` warm",
            f"{r['value_warm_ms'] * 1e3:.0f} µs (p90 {r['value_warm_p90_ms'] * 1e3:.0f} µs)",
            "< 1 ms",
        ],
        ["`reduction_value()` warm (from the raw tensor)", f"{r['reduction_warm_ms'] * 1e3:.0f} µs", ""],
        ["`refresh()` after 10 new steps", f"{r['refresh_10_steps_ms']:.1f} ms", ""],
        ["`refresh()` with nothing new", f"{r['refresh_nothing_ms']:.1f} ms", ""],
    ]
    lines.append(report.table(["figure", "value", "target"], rows))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
