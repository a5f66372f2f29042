"""The limit: what recording scenario (a) cannot go below on this machine, and how fast the
writer moves large tensors next to `dd`.

    python benchmarks/limit.py [--repeat 7] [--large-mib 64 --large-count 16]

1. Bytes captured per saved step of scenario (a) (weights, biases, gradients, layer outputs of
   the small ResNet of overhead.py), from a short recorded run.
2. The floor for those bytes: a plain memcpy (one `numpy.copyto` per tensor, same sizes) plus
   one sequential write of the same bytes to a new file in the same folder, written through
   and dropped from the page cache (`fdatasync` + `POSIX_FADV_DONTNEED`, as mldbg's local
   store does for files of 1 MiB or more). The same write left in the page cache and with
   `fsync` is timed beside it. Compared with mldbg's added time per saved step from
   `benchmarks/results/overhead.json` when it exists.
3. Throughput for large tensors: the Recorder's writer (tensors handed over as host arrays,
   written as segments) against `dd bs=<tensor size>` of the same total: mldbg's default
   (written through, dropped from the cache) against `dd conv=fdatasync`, and with
   `drop_cache=False` against a buffered `dd`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import report


def capture_sizes(steps: int, tmp: Path) -> tuple[list[int], int]:
    """Sizes (bytes) of the tensors one saved step of scenario (a) captures, and the run's bytes."""
    import overhead

    out = tmp / "capture"
    spec = {"kind": "mldbg", "scenario": "a", "out": str(out), "steps": steps, "warmup": 1,
            "model": "resnet", "batch": 8, "threads": 1, "device": "cpu"}  # fmt: skip
    overhead.worker(spec)
    import mldbg

    trial = mldbg.create_trial(str(out))
    step = trial.steps()[-1]
    sizes = [trial.tensor(n).value(step).nbytes for n in trial.tensor_names(step=step)]
    nbytes, _ = report.tree_size(out)
    shutil.rmtree(out, ignore_errors=True)
    return sizes, nbytes // max(1, len(trial.steps()))


def floor(sizes: list[int], tmp: Path, repeat: int) -> dict:
    total = sum(sizes)
    srcs = [np.random.default_rng(0).random(max(1, s // 8)).view(np.uint8)[:s] for s in sizes]
    dsts = [np.empty_like(a) for a in srcs]
    memcpy = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for s, d in zip(srcs, dsts, strict=True):
            np.copyto(d, s)
        memcpy.append(time.perf_counter() - t0)
    # each way of writing in its own series of new files, kept (as the writer's segments are):
    # its steady state. Interleaving them would let one reuse the pages another just freed.
    modes = ("dropped", "cached", "fsync")
    wall: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    kept: list[Path] = []
    for mode in modes:
        for i in range(repeat + 1):
            path = tmp / f"floor-{i}-{mode}.bin"
            t0, c0 = time.perf_counter(), time.process_time()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.writev(fd, dsts[:1024])  # one sequential write of the same bytes
            if mode == "dropped":
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            elif mode == "fsync":
                os.fsync(fd)
            os.close(fd)
            if i:  # the first of each series only sets it up
                wall[mode].append(time.perf_counter() - t0)
                cpu[mode].append(time.process_time() - c0)
            kept.append(path)
    for path in kept:
        path.unlink()
    ms = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
    out = {"bytes": total, "tensors": len(sizes), "memcpy_ms": ms(memcpy)}
    for mode in modes:
        out[f"write_{mode}_ms"], out[f"write_{mode}_cpu_ms"] = ms(wall[mode]), ms(cpu[mode])
    out["floor_ms"] = out["memcpy_ms"] + out["write_dropped_ms"]
    out["floor_cpu_ms"] = out["memcpy_ms"] + out["write_dropped_cpu_ms"]
    return out


def writer_throughput(mib: int, count: int, tmp: Path, drop_cache: bool) -> float:
    """MB/s of the Recorder's writer for `count` tensors of `mib` MiB, to close() (and, when
    the page cache is kept, to `sync`, as `dd conv=fdatasync` would)."""
    from mldbg import SaveConfig
    from mldbg.record.recorder import Recorder
    from mldbg.store.local import LocalStore

    out = tmp / f"writer-{drop_cache}"
    arrays = [np.full(mib << 18, i, dtype=np.float32) for i in range(2)]  # 2 distinct buffers
    rec = Recorder(LocalStore(out, drop_cache=drop_cache), save_config=SaveConfig(save_interval=1),
                   include_collections=[], include_regex=["big"])  # fmt: skip
    t0 = time.perf_counter()
    for i in range(count):
        rec.start_step()
        plan = rec.plan("big", ())
        rec.save("big", arrays[i % 2], plan)
        rec.end_step()
    rec.close()
    elapsed = time.perf_counter() - t0
    shutil.rmtree(out, ignore_errors=True)
    return mib * count * 2**20 / elapsed / 1e6


def dd_throughput(mib: int, count: int, tmp: Path, fsync: bool) -> float:
    path = tmp / "dd.bin"
    cmd = ["dd", "if=/dev/zero", f"of={path}", f"bs={mib}M", f"count={count}"] + (
        ["conv=fdatasync"] if fsync else []
    )
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    elapsed = time.perf_counter() - t0
    path.unlink()
    return mib * count * 2**20 / elapsed / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--capture-steps", type=int, default=21)
    ap.add_argument("--large-mib", type=int, default=64)
    ap.add_argument("--large-count", type=int, default=16)
    ap.add_argument("--name", default="limit")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    result = {"machine": report.machine(), "command": report.command()}
    tmp = Path(tempfile.mkdtemp(prefix="mldbg-limit-", dir=os.environ.get("MLDBG_BENCH_TMP")))
    try:
        sizes, stored_per_step = capture_sizes(args.capture_steps, tmp)
        result["floor"] = floor(sizes, tmp, args.repeat)
        result["floor"]["stored_bytes_per_saved_step"] = stored_per_step
        rows = []
        writer_throughput(args.large_mib, 2, tmp, True)  # warm-up: imports, first allocations
        for drop_cache in (True, False):
            ours, theirs = [], []
            for _ in range(args.repeat):  # interleaved
                ours.append(writer_throughput(args.large_mib, args.large_count, tmp, drop_cache))
                theirs.append(dd_throughput(args.large_mib, args.large_count, tmp, fsync=drop_cache))
            rows.append({"drop_cache": drop_cache, "mldbg_mbs": statistics.median(ours), "dd_mbs": statistics.median(theirs),
                         "ratio": statistics.median(o / t for o, t in zip(ours, theirs, strict=True)),
                         "ratio_spread": report.spread([o / t for o, t in zip(ours, theirs, strict=True)])})  # fmt: skip
        result["throughput"] = rows
        result["large"] = {"mib": args.large_mib, "count": args.large_count, "repeat": args.repeat}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # the fixed malloc policy's run: the default one's baseline pays page faults the hooked runs do not
    overhead_json = next(
        (
            p
            for p in (report.RESULTS / "overhead_static.json", report.RESULTS / "overhead.json")
            if p.exists()
        ),
        None,
    )
    if overhead_json is not None:
        ov = {r["label"]: r for r in json.loads(overhead_json.read_text())["rows"]}
        if "a" in ov:
            result["overhead_source"] = overhead_json.name
            result["added_per_saved_step_ms"] = ov["a"]["added_ms"] * 10
            result["added_cpu_per_saved_step_ms"] = ov["a"]["added_cpu_ms"] * 10
            result["added_main_cpu_per_saved_step_ms"] = ov["a"].get("added_main_cpu_ms", float("nan")) * 10
    report.publish(args.name, result, markdown(result), not args.no_save)


def markdown(result: dict) -> str:
    f = result["floor"]
    lines = [report.header(result)]
    lines.append(
        f"Scenario (a) captures **{f['bytes'] / 1e6:.2f} MB in {f['tensors']} tensors per saved step** "
        f"({f['stored_bytes_per_saved_step'] / 1e6:.2f} MB stored with index and headers). On this machine a "
        f"plain memcpy of those tensors takes {f['memcpy_ms']:.2f} ms and one sequential write of the same bytes "
        f"into a new file, written through and dropped from the page cache (what mldbg's local store does), "
        f"{f['write_dropped_ms']:.2f} ms ({f['write_dropped_cpu_ms']:.2f} ms CPU): "
        f"**floor {f['floor_ms']:.2f} ms per saved step ({f['floor_cpu_ms']:.2f} ms CPU), "
        f"{f['floor_ms'] / 10:.2f} ms per step at every 10 steps**. The same write left in the page cache takes "
        f"{f['write_cached_ms']:.2f} ms ({f['write_cached_cpu_ms']:.2f} ms CPU), with fsync "
        f"{f['write_fsync_ms']:.2f} ms ({f['write_fsync_cpu_ms']:.2f} ms CPU).\n"
    )
    if "added_per_saved_step_ms" in result:
        lines.append(
            f"mldbg's added time in (a) from the overhead run ({result.get('overhead_source', 'overhead.json')}): "
            f"{result['added_per_saved_step_ms']:.2f} ms wall per saved "
            f"step ({result['added_per_saved_step_ms'] / f['floor_ms']:.1f}x the floor), "
            f"{result['added_cpu_per_saved_step_ms']:.2f} ms CPU in all threads "
            f"({result['added_cpu_per_saved_step_ms'] / f['floor_cpu_ms']:.1f}x the floor's CPU), of which "
            f"{result['added_main_cpu_per_saved_step_ms']:.2f} ms on the training thread.\n"
        )
    lg = result["large"]
    rows = [[("default, written through (dd conv=fdatasync)" if r["drop_cache"] else
              "drop_cache=False, page cache (dd buffered)"), f"{r['mldbg_mbs']:.0f}", f"{r['dd_mbs']:.0f}",
             f"{r['ratio'] * 100:.0f}%", r["ratio_spread"], ">= 70%"] for r in result["throughput"]]  # fmt: skip
    lines.append(
        f"Large tensors: {lg['count']} tensors of {lg['mib']} MiB through the Recorder's writer (to `close()`), "
        f"against `dd if=/dev/zero bs={lg['mib']}M count={lg['count']}`, {lg['repeat']} interleaved repeats, medians:\n"
    )
    lines.append(report.table(["mode", "mldbg MB/s", "dd MB/s", "mldbg / dd", "min-max", "target"], rows))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
