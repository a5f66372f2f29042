"""Training-step overhead of the PyTorch hook next to smdebug and TensorBoard, as ratios to an
uninstrumented baseline measured in the same run, in interleaved rounds (A B C A B C ...).

    python benchmarks/overhead.py [--steps 300] [--rounds 5] [--peers smdebug,tensorboard]

Scenarios (issue 9): (a) weights, biases, gradients and layer outputs every 10 steps,
(b) weights every 10 steps, (c) everything every 200 steps, (d) the default configuration.
Peers: smdebug 1.0.34 (which has no `outputs` collection for PyTorch: `include_regex=[".*"]`)
and TensorBoard's `SummaryWriter.add_histogram` over every parameter, gradient and layer
output, both in their own virtual environment (`.bench-venvs/smdebug`, made by
`benchmarks/run_all.py`), so environments never mix.

Every measurement is a fresh worker process (`--worker`), so no run inherits another's heap,
threads or page cache state. A worker builds the model, runs `--warmup` steps untimed (the
hook's one-time work: the first step's name resolution and optimizer search), then times
`--steps` steps (CUDA events on a GPU, `perf_counter` on a CPU) and, separately, `close()`.
Next to wall time it reports the process CPU time (all threads, so the writer's work counts),
which is far less sensitive to other jobs on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import report

SCENARIOS = {
    "a": "weights, biases, gradients, layer outputs every 10 steps",
    "b": "weights every 10 steps",
    "c": "everything every 200 steps",
    "d": "default configuration",
}
TARGETS = {"a": 1.10, "b": 1.02, "c": 1.01, "d": 1.01}
# glibc's malloc adapts its mmap threshold to the sizes freed, so a process that clones tensors
# (any hook) ends up with a different allocation policy, and page-fault count, than one that
# does not: on this machine the unhooked baseline takes ~1,700 minor faults (~3 ms of system
# time) per step and a hooked process ~90. `--malloc static` fixes the policy for every
# configuration alike, so that the ratios measure the work added and nothing else.
STATIC_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


# the model -----------------------------------------------------------------------------
def build_model(kind: str):
    from torch import nn

    if kind == "cnn":
        return nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 10),
        )  # fmt: skip

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + (x if self.down is None else self.down(x)))

    # ResNet-18's shape (4 stages of 2 basic blocks) at a quarter of its width, for a 2-core CPU
    layers: list[nn.Module] = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for i, w in enumerate([16, 32, 64, 128]):
        layers += [Block(cin, w, 1 if i == 0 else 2), Block(w, w, 1)]
        cin = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
    return nn.Sequential(*layers)


# instrumentations ------------------------------------------------------------------------
def mldbg_hook(scenario: str, out: str, model, loss_fn):
    import mldbg
    from mldbg.torch import Hook

    kwargs = {
        "a": dict(
            include_collections=["weights", "biases", "gradients", "outputs"],
            save_config=mldbg.SaveConfig(save_interval=10),
        ),
        "b": dict(include_collections=["weights"], save_config=mldbg.SaveConfig(save_interval=10)),
        "c": dict(save_all=True, save_config=mldbg.SaveConfig(save_interval=200)),
        "d": dict(),
        # smdebug's (a): what storage.py compares byte for byte
        "a-regex": dict(
            include_collections=["weights", "biases", "gradients"],
            include_regex=[".*"],
            save_config=mldbg.SaveConfig(save_interval=10),
        ),
    }[scenario]
    hook = Hook(out, **kwargs)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    return hook


def smdebug_hook(scenario: str, out: str, model, loss_fn):
    import smdebug.pytorch as smd

    kwargs = {
        "a": dict(
            include_collections=["weights", "biases", "gradients"],
            include_regex=[".*"],
            save_config=smd.SaveConfig(save_interval=10),
        ),
        "b": dict(include_collections=["weights"], save_config=smd.SaveConfig(save_interval=10)),
        "c": dict(save_all=True, save_config=smd.SaveConfig(save_interval=200)),
        "d": dict(),
    }[scenario.replace("-regex", "")]
    hook = smd.Hook(out_dir=out, **kwargs)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    return hook


class TensorBoardHistograms:
    """What a TensorBoard user writes: histograms of every parameter and gradient (after
    backward) and of every layer output (forward hooks), every `interval` steps."""

    def __init__(self, scenario: str, out: str, model):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(out)
        self.model = model
        self.step = 0
        self.interval = {"a": 10, "b": 10, "c": 200, "d": 500}[scenario]
        self.grads = scenario in ("a", "c")
        self.outputs = scenario in ("a", "c")
        if self.outputs:
            for name, m in model.named_modules():
                if name:
                    m.register_forward_hook(self._output(name))

    def _output(self, name: str):
        def hook(module, args, output) -> None:
            if self.step % self.interval == 0:
                self.writer.add_histogram(f"{name}_output_0", output.detach(), self.step)

        return hook

    def after_backward(self) -> None:
        if self.step % self.interval == 0:
            for name, p in self.model.named_parameters():
                self.writer.add_histogram(name, p.detach(), self.step)
                if self.grads and p.grad is not None:
                    self.writer.add_histogram(f"gradient/{name}", p.grad, self.step)
        self.step += 1

    def close(self) -> None:
        self.writer.close()


# one measurement ---------------------------------------------------------------------------
def worker(spec: dict) -> dict:
    """Run one configuration in this process; returns the timings."""
    import torch
    from torch import nn

    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    device = torch.device(spec["device"])
    cuda = device.type == "cuda"
    torch.manual_seed(0)
    model = build_model(spec["model"]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    img = 32
    x = torch.randn(spec["batch"], 3, img, img, device=device)
    y = torch.randint(0, 10, (spec["batch"],), device=device)
    kind, scenario, out = spec["kind"], spec.get("scenario"), spec["out"]
    rss0 = report.rss_kb()
    hook = tb = None
    t_setup = time.perf_counter()
    if kind == "mldbg":
        hook = mldbg_hook(scenario, out, model, loss_fn)
    elif kind == "smdebug":
        hook = smdebug_hook(scenario, out, model, loss_fn)
    elif kind == "tensorboard":
        tb = TensorBoardHistograms(scenario, out, model)
    setup_s = time.perf_counter() - t_setup

    def step() -> None:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        if tb is not None:
            tb.after_backward()
        opt.step()

    for _ in range(spec["warmup"]):
        step()
    if cuda:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    c0, m0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
    for _ in range(spec["steps"]):
        step()
    if cuda:
        end.record()
        end.synchronize()
        loop_s = start.elapsed_time(end) / 1e3
    else:
        loop_s = time.perf_counter() - t0
    cpu_s, main_cpu_s = time.process_time() - c0, time.thread_time() - m0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    t1, c1 = time.perf_counter(), time.process_time()
    if hook is not None:
        hook.close()
    if tb is not None:
        tb.close()
    close_s, close_cpu_s = time.perf_counter() - t1, time.process_time() - c1
    nbytes, files = report.tree_size(out) if os.path.exists(out) else (0, 0)
    result = {
        "loop_s": loop_s, "cpu_s": cpu_s, "main_cpu_s": main_cpu_s, "close_s": close_s,
        "close_cpu_s": close_cpu_s, "setup_s": setup_s, "rss_start_kb": rss0,
        "hwm_kb": report.rss_kb("VmHWM"), "bytes": nbytes, "files": files,
        "minor_faults": ru1.ru_minflt - ru0.ru_minflt, "sys_s": ru1.ru_stime - ru0.ru_stime,
    }  # fmt: skip
    if kind == "mldbg":
        w = hook.recorder.writer
        result.update(records=w.written_records, segments=w.written_segments, blocked_s=w.blocked_seconds)
    return result


# the driver --------------------------------------------------------------------------------
def configs(args: argparse.Namespace) -> list[tuple[str, str, str | None]]:
    """(label, kind, scenario) in round order."""
    out = [("baseline", "baseline", None)]
    out += [(s, "mldbg", s) for s in args.scenarios]
    peers = [p for p in args.peers.split(",") if p and p != "none"]
    if peers:
        out.append(("baseline (peer venv)", "baseline-peer", None))
    if "smdebug" in peers:
        out += [(f"smdebug {s}", "smdebug", s) for s in args.scenarios]
    if "tensorboard" in peers:
        out += [(f"tensorboard {s}", "tensorboard", s) for s in args.tb_scenarios if s in args.scenarios]
    return out


def run_worker(python: str, spec: dict, env_extra: dict | None = None) -> dict:
    if python == "inprocess":  # the smoke test: no fresh process per measurement
        return worker(spec)
    env = dict(os.environ, SMDEBUG_LOG_LEVEL="error", PYTHONWARNINGS="ignore", **(env_extra or {}))
    proc = subprocess.run(
        [python, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
        capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(),
    )  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"worker {spec['kind']} {spec.get('scenario')} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def peer_python() -> str:
    python = report.BENCH_VENV / "bin" / "python"
    if not python.exists():
        raise SystemExit(
            f"{python} not found: create the peers' venv with `python benchmarks/run_all.py --setup` "
            "or pass --peers none"
        )
    return str(python)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--steps", type=int, default=300, help="timed steps per run (>= 196 for (c) to save once)"
    )
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--model", choices=["resnet", "cnn"], default="resnet")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--device", default="auto", help="auto (cuda when available), cpu or cuda")
    ap.add_argument("--scenarios", default="a,b,c,d")
    ap.add_argument("--peers", default="smdebug,tensorboard", help="comma list, or none")
    ap.add_argument("--tb-scenarios", default="a,b", help="scenarios the TensorBoard peer runs")
    ap.add_argument("--name", default="overhead", help="result file name under benchmarks/results/")
    ap.add_argument("--no-save", action="store_true", help="print only; do not write benchmarks/results/")
    ap.add_argument(
        "--malloc",
        choices=["default", "static"],
        default="default",
        help="static: the same fixed glibc malloc policy for every configuration (see STATIC_MALLOC)",
    )
    ap.add_argument(
        "--inprocess", action="store_true", help="run mldbg's measurements in this process (smoke test)"
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    args.tb_scenarios = [s for s in args.tb_scenarios.split(",") if s]
    if args.device == "auto":
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    plan = configs(args)
    me = "inprocess" if args.inprocess else sys.executable
    pythons = {"baseline": me, "mldbg": me}
    if any(k not in pythons for _, k, _ in plan):
        peer = peer_python()
        pythons.update({"baseline-peer": peer, "smdebug": peer, "tensorboard": peer})
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in plan}
    root = Path(tempfile.mkdtemp(prefix="mldbg-bench-"))
    result = {"machine": report.machine(), "command": report.command()}
    t_start = time.time()
    try:
        for r in range(args.rounds):
            for label, kind, scenario in plan:
                out = root / f"{label.replace(' ', '_')}-{r}"
                spec = {
                    "kind": kind.replace("-peer", ""), "scenario": scenario, "out": str(out),
                    "steps": args.steps, "warmup": args.warmup, "model": args.model,
                    "batch": args.batch, "threads": args.threads, "device": args.device,
                }  # fmt: skip
                res = run_worker(pythons[kind], spec, STATIC_MALLOC if args.malloc == "static" else None)
                runs[label].append(res)
                shutil.rmtree(out, ignore_errors=True)
                print(f"round {r + 1}/{args.rounds} {label:22s} {res['loop_s'] / args.steps * 1e3:8.2f} ms/step "
                      f"cpu {res['cpu_s'] / args.steps * 1e3:8.2f} ms/step", file=sys.stderr, flush=True)  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result.update(
        settings={
            k: getattr(args, k)
            for k in ("steps", "warmup", "rounds", "model", "batch", "threads", "device", "malloc")
        },
        seconds=round(time.time() - t_start, 1),
        rows=summarize(plan, runs, args.steps),
    )
    report.publish(args.name, result, markdown(result), not args.no_save)


def summarize(plan: list[tuple[str, str, str | None]], runs: dict[str, list[dict]], steps: int) -> list[dict]:
    """Per configuration: medians over rounds of the per-round ratio to the same round's
    baseline (its own venv's baseline for peers), with the min-max spread as the noise."""
    rows = []
    for label, kind, scenario in plan:
        base_label = "baseline (peer venv)" if kind in ("smdebug", "tensorboard") else "baseline"
        mine, base = runs[label], runs[base_label]
        wall = [m["loop_s"] / b["loop_s"] for m, b in zip(mine, base, strict=True)]
        cpu = [m["cpu_s"] / b["cpu_s"] for m, b in zip(mine, base, strict=True)]
        with_close = [(m["loop_s"] + m["close_s"]) / b["loop_s"] for m, b in zip(mine, base, strict=True)]
        added = [(m["loop_s"] - b["loop_s"]) / steps * 1e3 for m, b in zip(mine, base, strict=True)]
        added_cpu = [(m["cpu_s"] - b["cpu_s"]) / steps * 1e3 for m, b in zip(mine, base, strict=True)]
        added_main = [
            (m["main_cpu_s"] - b["main_cpu_s"]) / steps * 1e3 for m, b in zip(mine, base, strict=True)
        ]
        rows.append({
            "label": label, "kind": kind, "scenario": scenario,
            "ms_per_step": report.med([m["loop_s"] for m in mine]) / steps * 1e3,
            "cpu_ms_per_step": report.med([m["cpu_s"] for m in mine]) / steps * 1e3,
            "ratio": report.med(wall), "ratio_spread": report.spread(wall),
            "ratio_with_close": report.med(with_close), "cpu_ratio": report.med(cpu),
            "cpu_ratio_spread": report.spread(cpu),
            "added_ms": report.med(added), "added_cpu_ms": report.med(added_cpu),
            "added_main_cpu_ms": report.med(added_main),
            "close_ms": report.med([m["close_s"] for m in mine]) * 1e3,
            "extra_hwm_mb": report.med([(m["hwm_kb"] - b["hwm_kb"]) / 1024 for m, b in zip(mine, base, strict=True)]),
            "bytes": report.med([m["bytes"] for m in mine]), "files": report.med([m["files"] for m in mine]),
            "blocked_s": report.med([m.get("blocked_s", 0.0) for m in mine]),
            "faults_per_step": report.med([m["minor_faults"] / steps for m in mine if "minor_faults" in m]),
            "sys_ms_per_step": report.med([m["sys_s"] / steps * 1e3 for m in mine if "sys_s" in m]),
        })  # fmt: skip
    return rows


def markdown(result: dict) -> str:
    s = result["settings"]
    rows = result["rows"]
    lines = [
        report.header(result),
        f"Model: {s['model']} (ResNet-18 shape at 1/4 width, 0.70 M parameters), batch {s['batch']} of 3x32x32, "
        f"SGD with momentum, device {s['device']}, torch threads {s['threads'] or 'default'}; "
        f"{s['warmup']} untimed warm-up steps, then {s['steps']} timed steps; {s['rounds']} interleaved rounds, "
        f"each configuration a fresh process ({result['seconds']:.0f} s in all). "
        + (
            "glibc malloc with its default, adaptive policy (what users get).\n"
            if s.get("malloc", "default") == "default"
            else "glibc malloc with a fixed policy for every configuration: "
            + ", ".join(f"`{k}={v}`" for k, v in STATIC_MALLOC.items())
            + ".\n"
        ),
        "Ratio = step time / the same round's uninstrumented baseline (peers: the baseline run in "
        "their own venv), median over rounds, min-max over rounds as the noise. CPU ratio = process "
        "CPU time (all threads, the writer's included) / the baseline's. `+close` adds the one-time "
        "`close()` (final flush) to the timed loop.\n",
    ]
    head = ["configuration", "ms/step", "ratio", "rounds min-max", "ratio +close", "CPU ratio",
            "CPU min-max", "added ms/step", "added CPU ms/step", "of it training thread", "extra peak RSS MB", "bytes written", "files", "page faults/step", "system ms/step", "target"]  # fmt: skip
    body = []
    for r in rows:
        target = TARGETS.get(r["scenario"] or "") if r["kind"] == "mldbg" else None
        body.append([
            r["label"] + (f" ({SCENARIOS[r['scenario']]})" if r["kind"] == "mldbg" else ""),
            f"{r['ms_per_step']:.2f}", f"{r['ratio']:.3f}x", r["ratio_spread"], f"{r['ratio_with_close']:.3f}x",
            f"{r['cpu_ratio']:.3f}x", r["cpu_ratio_spread"], f"{r['added_ms']:+.2f}", f"{r['added_cpu_ms']:+.2f}", f"{r['added_main_cpu_ms']:+.2f}",
            f"{r['extra_hwm_mb']:+.1f}", f"{r['bytes'] / 1e6:.1f} MB" if r["bytes"] else "-",
            int(r["files"]) if r["files"] else "-",
            f"{r.get('faults_per_step', float('nan')):.0f}", f"{r.get('sys_ms_per_step', float('nan')):.2f}",
            f"<= {target:.2f}x" if target else "",
        ])  # fmt: skip
    lines.append(report.table(head, body))
    by = {r["label"]: r for r in rows}
    if "a" in by and "smdebug a" in by and by["a"]["added_ms"] > 0:
        lines.append(
            f"\nAdded time in (a): mldbg {by['a']['added_ms']:.2f} ms/step, smdebug "
            f"{by['smdebug a']['added_ms']:.2f} ms/step: {by['smdebug a']['added_ms'] / by['a']['added_ms']:.1f}x less "
            f"(target >= 3x); in CPU time {by['a']['added_cpu_ms']:.2f} vs {by['smdebug a']['added_cpu_ms']:.2f} ms/step "
            f"({by['smdebug a']['added_cpu_ms'] / max(by['a']['added_cpu_ms'], 1e-9):.1f}x)."
        )
    base = by.get("baseline")
    if base:
        lines.append(
            f"\nBaseline: {base['ms_per_step']:.2f} ms/step wall, {base['cpu_ms_per_step']:.2f} ms/step CPU; "
            f"baseline-to-baseline noise is the spread of every ratio above."
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
