"""The dashboard's API latency over real HTTP, on a finished run of a real PyTorch training,
and the time to the first curve and API latency on one run of `--steps` steps and on a sweep
of `--runs` runs (issue 19).

    python benchmarks/dashboard_latency.py [--steps 1000] [--requests 50] [--runs 200] [--sweep-steps 50]

Records one tiny real PyTorch training (tests/tiny.py's `train`: a 2-hidden-layer MLP,
`--steps` steps, weights, biases, gradients and the loss saved at every step), serves it with
the dashboard app (`mldbg.dashboard.app.create_app`, the default rules run live, refresh every
second) under uvicorn on a free port in a thread of this process, waits until the refresher
has read every step and the rules are done, then times `--requests` GETs of each endpoint
with urllib (a new connection each, as a browser's poll without keep-alive). The first request
of an endpoint (which fills the dashboard's per-tensor cache) is shown apart; the median and
p90 are of the requests after it.

First curve and latency (issue 19): for the single run, and for a sweep folder of `--runs`
copies of one recorded run of `--sweep-steps` steps (copied, not trained 200 times: the
dashboard reads each as its own run), the clock starts before `create_app` (which opens every
run) and stops when `/api/runs/{run}/scalars` of the first run answers with its loss series:
what a browser waits for before its first curve, the page and Plotly aside. Then p50/p95 of
`--requests` requests to `/api/runs`, `scalars`, `layers`, `/api/scalars?run=` (20 runs
overlaid, the sweep only) and of the time to the first message of `/api/events`. The bytes of
plotly.min.js sent with and without gzip are read from the server.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import report

COLLECTIONS = ("weights", "biases", "gradients", "losses")
TENSOR = "gradient/fc1.weight"


def record_run(path: Path, steps: int) -> None:
    """The run the dashboard and TensorBoard-export benchmarks read."""
    if str(report.ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(report.ROOT / "tests"))
    from tiny import train  # a tiny real PyTorch training, recorded by mldbg.torch.Hook

    train(path, steps=steps, eval_every=None, include_collections=COLLECTIONS)


def serve(app):
    """uvicorn serving `app` on a free port in a daemon thread: (server, thread, base URL)."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    # log_config=None: uvicorn's default runs logging.config.dictConfig, which closes every
    # handler of this process (absl's closes its stream: a test runner's captured stderr) and
    # binds new ones to the sys.stderr/sys.stdout of the moment; a server in a thread of someone
    # else's process leaves its logging alone (uvicorn's warnings still reach the root logger)
    server = uvicorn.Server(
        uvicorn.Config(
            app, log_config=None, log_level="warning", access_log=False, timeout_graceful_shutdown=2
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


def get(url: str) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        body = response.read()
    return time.perf_counter() - t0, body


def get_bytes(url: str, gzip: bool) -> int:
    """Bytes on the wire of a GET (urllib does not decompress: what is read is what was sent)."""
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip" if gzip else "identity"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return len(response.read())


def first_event(url: str) -> float:
    """Seconds from opening /api/events to the end of its first message."""
    t0 = time.perf_counter()
    with urllib.request.urlopen(url + "/api/events", timeout=60) as response:
        while response.readline().strip():
            pass
    return time.perf_counter() - t0


def pct(times: list[float], q: float) -> float:
    times = sorted(times)
    return times[min(len(times) - 1, int(round(q / 100 * (len(times) - 1))))] * 1e3 if times else float("nan")


def first_curve(paths: list[Path], requests: int, overlay: int = 0) -> dict:
    """Time from the server's start to the first run's loss series, then API latencies."""
    from mldbg.dashboard.app import create_app

    server = thread = None
    try:
        t0 = time.perf_counter()
        app = create_app([str(p) for p in paths] if len(paths) == 1 else [str(paths[0].parent)])
        server, thread, base = serve(app)
        while True:
            runs = json.loads(get(f"{base}/api/runs")[1])["runs"]
            q = urllib.parse.quote(runs[0]["name"], safe="")
            series = json.loads(get(f"{base}/api/runs/{q}/scalars")[1])["series"]
            if any(s["collection"] == "losses" and s["steps"] for s in series):
                break
            if time.perf_counter() - t0 > 120:
                raise RuntimeError("no loss series within 120 s")
            time.sleep(0.01)
        out: dict = {"runs": len(runs), "first_curve_s": time.perf_counter() - t0}
        names = [r["name"] for r in runs]
        urls = {
            "/api/runs": "/api/runs",
            "/api/runs/{run}/scalars": f"/api/runs/{q}/scalars",
            "/api/runs/{run}/layers": f"/api/runs/{q}/layers",
        }
        if overlay:
            urls[f"/api/scalars?run= ({overlay} runs)"] = "/api/scalars?" + urllib.parse.urlencode(
                [("run", n) for n in names[:overlay]]
            )
        rows = []
        for label, url in urls.items():
            times = [get(base + url)[0] for _ in range(requests)]
            rows.append({"endpoint": label, "p50_ms": pct(times, 50), "p95_ms": pct(times, 95)})
        times = [first_event(base) for _ in range(max(3, requests // 5))]
        rows.append(
            {"endpoint": "/api/events (first message)", "p50_ms": pct(times, 50), "p95_ms": pct(times, 95)}
        )
        out["rows"] = rows
        out["plotly_bytes"] = {
            "identity": get_bytes(base + "/static/plotly.min.js", gzip=False),
            "gzip": get_bytes(base + "/static/plotly.min.js", gzip=True),
        }
        return out
    finally:
        if server is not None:
            server.should_exit = True
            thread.join(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--runs", type=int, default=200, help="runs in the sweep (0: no sweep)")
    ap.add_argument("--sweep-steps", type=int, default=50)
    ap.add_argument("--name", default="dashboard_latency")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    from mldbg.dashboard.app import create_app

    result: dict = {"machine": report.machine(), "command": report.command(), "settings": vars(args).copy()}
    tmp = Path(tempfile.mkdtemp(prefix="mldbg-dash-", dir=os.environ.get("MLDBG_BENCH_TMP")))
    path = tmp / "run"
    server = thread = None
    rows = []
    try:
        t0 = time.perf_counter()
        record_run(path, args.steps)
        size, files = report.tree_size(path)
        result["record"] = {"seconds": time.perf_counter() - t0, "bytes": size, "files": files}
        app = create_app([str(path)])
        server, thread, base = serve(app)
        # ready: every step read and the rules done (a finished run, as a user opens it)
        t0 = time.perf_counter()
        while True:
            summary = json.loads(get(f"{base}/api/runs")[1])["runs"][0]
            run = summary["name"]
            q = urllib.parse.quote(run, safe="")
            info = json.loads(get(f"{base}/api/runs/{q}/findings")[1])
            if summary["loaded_all_steps"] and info["done"]:
                break
            if time.perf_counter() - t0 > 300:
                raise RuntimeError(f"the dashboard did not finish reading the run: {summary}, {info}")
            time.sleep(0.1)
        result["ready_s"] = time.perf_counter() - t0
        result["run"] = {
            "steps": summary["steps"],
            "last_step": summary["last_step"],
            "findings": len(info["findings"]),
        }
        last = summary["last_step"]
        t = urllib.parse.quote(TENSOR, safe="")
        endpoints = [
            ("/api/runs", "/api/runs"),
            ("/api/runs/{run}/scalars", f"/api/runs/{q}/scalars"),
            (f"/api/runs/{{run}}/scalars?since={last}", f"/api/runs/{q}/scalars?since={last}"),
            (f"/api/runs/{{run}}/reduction?tensor={TENSOR}&reduction=l2",
             f"/api/runs/{q}/reduction?tensor={t}&reduction=l2"),
            (f"/api/runs/{{run}}/distribution?tensor={TENSOR}", f"/api/runs/{q}/distribution?tensor={t}"),
            (f"/api/runs/{{run}}/histogram?tensor={TENSOR}", f"/api/runs/{q}/histogram?tensor={t}"),
            ("/api/runs/{run}/findings", f"/api/runs/{q}/findings"),
        ]  # fmt: skip
        for label, url in endpoints:
            first, body = get(base + url)
            times = [get(base + url)[0] for _ in range(args.requests)]
            times.sort()
            rows.append({"endpoint": label, "first_ms": first * 1e3, "median_ms": report.med(times) * 1e3,
                         "p90_ms": times[int(len(times) * 0.9)] * 1e3 if times else float("nan"),
                         "bytes": len(body)})  # fmt: skip
        server.should_exit = True
        thread.join(timeout=10)
        server = None
        result["curve"] = [{"scenario": f"1 run of {args.steps} steps", **first_curve([path], args.requests)}]
        if args.runs:
            sweep = tmp / "sweep"
            one = tmp / "one"
            record_run(one, min(args.sweep_steps, args.steps))
            for i in range(args.runs):
                shutil.copytree(one, sweep / f"run_{i:03d}")
            runs = sorted(sweep.iterdir())
            scenario = f"{args.runs} runs of {min(args.sweep_steps, args.steps)} steps"
            result["curve"].append({"scenario": scenario, **first_curve(runs, args.requests, overlay=20)})
    finally:
        if server is not None:
            server.should_exit = True
            thread.join(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
    result["rows"] = rows
    report.publish(args.name, result, markdown(result), not args.no_save)


def markdown(r: dict) -> str:
    s, rec, run = r["settings"], r["record"], r["run"]
    lines = [report.header(r)]
    lines.append(
        f"Run: tests/tiny.py's MLP, {run['steps']} steps with {', '.join(COLLECTIONS)} saved at every step "
        f"(recorded in {rec['seconds']:.1f} s, {rec['bytes'] / 1e6:.1f} MB in {rec['files']} files), served by "
        f"`create_app([run])` (default rules live, {run['findings']} findings) under uvicorn in a thread; "
        f"the dashboard had read it all and run the rules {r['ready_s']:.1f} s after start. Each endpoint: "
        f"one first request (fills the per-tensor cache), then {s['requests']} requests over urllib, one "
        f"connection each; `{{run}}` is the run's name, `since` its last step.\n"
    )
    rows = [
        [f"`{row['endpoint']}`", f"{row['first_ms']:.1f}", f"{row['median_ms']:.1f}", f"{row['p90_ms']:.1f}",
         f"{row['bytes'] / 1e3:.1f} kB"]
        for row in r["rows"]
    ]  # fmt: skip
    lines.append(
        report.table(["endpoint", "first request (ms)", "median (ms)", "p90 (ms)", "response"], rows)
    )
    lines.append(
        "\nFirst curve (issue 19): from before `create_app` (which opens every run) to the first run's "
        "loss series answered by `/api/runs/{run}/scalars`, the default rules starting in the background; "
        f"then p50/p95 of {s['requests']} requests per endpoint (the sweep: copies of one recorded run).\n"
    )
    curve_rows = []
    for c in r.get("curve", []):
        curve_rows.append([c["scenario"], "first curve", f"{c['first_curve_s'] * 1e3:.0f} ms", ""])
        for row in c["rows"]:
            curve_rows.append(
                [c["scenario"], f"`{row['endpoint']}`", f"{row['p50_ms']:.1f}", f"{row['p95_ms']:.1f}"]
            )
    if curve_rows:
        lines.append(report.table(["runs", "what", "p50 (ms)", "p95 (ms)"], curve_rows))
        b = r["curve"][0]["plotly_bytes"]
        lines.append(
            f"\nplotly.min.js on the wire: {b['identity'] / 1e6:.2f} MB uncompressed, {b['gzip'] / 1e6:.2f} MB "
            "with gzip (pre-compressed once at start, `Cache-Control: immutable`)."
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
