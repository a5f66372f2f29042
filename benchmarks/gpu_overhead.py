"""Job time of a GPU training with each way of recording it, over an uninstrumented run of the
same round (issue 14): torchvision ResNet18 on random images, batch 128, SGD with momentum.

    python benchmarks/gpu_overhead.py [--images 32,224] [--steps 300] [--rounds 3]
                                      [--configs none,default,reductions,raw,...] [--peer-python PATH]
    python benchmarks/gpu_overhead.py --device cpu --model tiny --steps 5 --rounds 1   # smoke run

Configurations (`--configs`, in round order):
- `none`: no instrumentation (the baseline of each round and image size);
- `default`: `mldbg.torch.Hook(out)` with `register_module` and `register_loss`;
- `reductions`: every tensor (`save_all`) every 10 steps as `ReductionConfig(min, max, mean, l2)`;
- `raw`: every tensor every 10 steps, raw;
- `pinned`: what moving every tensor off the GPU costs by itself: every parameter, gradient and
  layer output copied to pinned host memory every 10 steps (non-blocking, one event), nothing else;
- `stats-norms`: `StatisticsBatch` every step: l2, mean |x|, max |x| of every parameter and
  gradient (the fused multi-tensor kernels), read on a second thread;
- `stats-rules`: every step, parameters and gradients also get NaN/inf counts, variance and
  zero fraction, every ReLU output its per-unit activity, zero fraction and mean |x|, the inputs
  their channel moments, the labels and logits their class counts; `stats-rules-10`: the same
  every 10 steps;
- `smdebug`: smdebug 1.0.34 `save_all` every 10 steps; `tensorboard`: `SummaryWriter.add_histogram`
  of every parameter, gradient and layer output every 10 steps. Both run with `--peer-python`
  (default: `.bench-venvs/smdebug` when it exists, else this Python) and are left out, saying
  why, where they do not import.

Every measurement is a fresh process (`--worker`); rounds interleave the configurations
(none default reductions ... none default ...) so that drifts of the machine hit all alike.
A worker builds the model, trains `--warmup` untimed steps, then times `--steps` steps and the
hook's `close()` (the job's end, after its writer drained): job time. Reported per image size:
the median over rounds of job time / the same round's baseline, its min-max, ms per step, and
the bytes written. On a machine without a CUDA GPU it says so and stops, unless `--device cpu`
(the smoke run: `--model tiny` needs no torchvision).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import report

CONFIGS = {
    "none": "no instrumentation",
    "default": "mldbg, default Hook",
    "reductions": "mldbg, all tensors every 10 steps, ReductionConfig(min, max, mean, l2)",
    "raw": "mldbg, all tensors every 10 steps, raw",
    "pinned": "copy every tensor to pinned host memory every 10 steps, nothing else",
    "stats-norms": "StatisticsBatch every step: l2, mean |x|, max |x| of parameters and gradients",
    "stats-rules": "StatisticsBatch every step: the rules' statistics of every tensor",
    "stats-rules-10": "StatisticsBatch every 10 steps: the rules' statistics of every tensor",
    "smdebug": "smdebug 1.0.34, all tensors every 10 steps",
    "tensorboard": "TensorBoard histograms of all tensors every 10 steps",
}
PEERS = ("smdebug", "tensorboard")
TARGETS = {("default", 32): 1.03, ("default", 224): 1.01, ("reductions", 32): 1.10, ("reductions", 224): 1.10}
PARAM_KINDS = ["l2", "mean_abs", "max_abs", "nan_count", "inf_count", "variance", "zero_fraction"]
ACT_KINDS = ["unit_active", "zero_fraction", "mean_abs"]


# the model -------------------------------------------------------------------------------------
def build_model(kind: str):
    if kind == "resnet18":
        try:
            import torchvision
        except ImportError:
            raise SystemExit(
                "gpu_overhead.py: --model resnet18 needs torchvision (pip install torchvision), "
                "or pass --model small / tiny"
            ) from None
        return torchvision.models.resnet18(num_classes=10)
    import overhead

    return overhead.build_model("resnet" if kind == "small" else "cnn")


# instrumentations ------------------------------------------------------------------------------
class Reader:
    """The writer's side of the statistics: a thread that reads pending values as they come."""

    def __init__(self) -> None:
        self.pending: queue.Queue[Any] = queue.Queue()
        self.values = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (p := self.pending.get()) is not None:
            self.values += sum(len(v) for v in p().values())

    def close(self) -> None:
        self.pending.put(None)
        self.thread.join()


class Statistics:
    """StatisticsBatch as a hook would use it: activations finished at the end of the forward,
    parameters and gradients after backward (before the optimizer changes them)."""

    def __init__(self, model, which: str, every: int):
        from torch import nn

        from mldbg.frameworks.torch_statistics import StatisticsBatch

        self.model, self.which, self.every = model, which, every
        self.forward_batch, self.step_batch = StatisticsBatch(), StatisticsBatch()
        self.reader = Reader()
        self.step = 0
        self.params = list(model.named_parameters())
        if which == "rules":
            for name, m in model.named_modules():
                if isinstance(m, nn.ReLU):
                    m.register_forward_hook(self._activation(name))
            model.register_forward_hook(self._forward_end)

    def _due(self) -> bool:
        return self.step % self.every == 0

    def _activation(self, name: str):
        def hook(module, args, out) -> None:
            if self._due():
                self.forward_batch.add(f"{name}_output", out, ACT_KINDS)

        return hook

    def _forward_end(self, module, args, out) -> None:
        if self._due():
            self.forward_batch.add("inputs", args[0], ["channel_count", "channel_mean", "channel_std"])
            self.reader.pending.put(self.forward_batch.finish())

    def labels(self, y, logits) -> None:
        if self._due() and self.which == "rules":
            self.step_batch.add_classes("labels", y, "logits", logits.detach())

    def after_backward(self) -> None:
        if self._due():
            kinds = PARAM_KINDS if self.which == "rules" else PARAM_KINDS[:3]
            for name, p in self.params:
                self.step_batch.add(name, p, kinds)
                if p.grad is not None:
                    self.step_batch.add(f"gradient/{name}", p.grad, kinds)
            self.reader.pending.put(self.step_batch.finish())
        self.step += 1

    def close(self) -> None:
        self.reader.close()


class PinnedCopies:
    """Every parameter, gradient and layer output copied to pinned host memory every 10 steps."""

    def __init__(self, model, every: int = 10):
        import torch

        self.torch, self.model, self.every, self.step = torch, model, every, 0
        self.buffers: dict[str, Any] = {}
        self.event = None
        for name, m in model.named_modules():
            if name:
                m.register_forward_hook(lambda mod, a, out, name=name: self._copy(f"{name}_output", out))

    def _copy(self, name: str, t) -> None:
        torch = self.torch
        if self.step % self.every or not isinstance(t, torch.Tensor):
            return
        buf = self.buffers.get(name)
        if buf is None or buf.shape != t.shape or buf.dtype != t.dtype:
            buf = self.buffers[name] = torch.empty(t.shape, dtype=t.dtype, pin_memory=t.is_cuda)
        buf.copy_(t.detach(), non_blocking=True)

    def after_backward(self) -> None:
        if self.step % self.every == 0:
            for name, p in self.model.named_parameters():
                self._copy(name, p)
                if p.grad is not None:
                    self._copy(f"gradient/{name}", p.grad)
            if self.torch.cuda.is_available() and next(self.model.parameters()).is_cuda:
                if self.event is not None:
                    self.event.synchronize()  # the last copies landed before their buffers are reused
                self.event = self.torch.cuda.Event()
                self.event.record()
        self.step += 1

    def close(self) -> None:
        if self.event is not None:
            self.event.synchronize()


def mldbg_hook(config: str, out: str, model, loss_fn):
    import mldbg
    from mldbg.torch import Hook

    every10 = mldbg.SaveConfig(save_interval=10)
    kwargs: dict[str, Any] = {
        "default": {},
        "reductions": {
            "save_all": True,
            "save_config": every10,
            "reduction_config": mldbg.ReductionConfig(reductions=["min", "max", "mean"], norms=["l2"]),
        },
        "raw": {"save_all": True, "save_config": every10},
    }[config]
    hook = Hook(out, **kwargs)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    return hook


def smdebug_hook(out: str, model, loss_fn):
    import smdebug.pytorch as smd

    hook = smd.Hook(out_dir=out, save_all=True, save_config=smd.SaveConfig(save_interval=10))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    return hook


# one measurement -------------------------------------------------------------------------------
def worker(spec: dict) -> dict:
    """Run one configuration in this process; returns its timings, or why it could not run."""
    import torch
    from torch import nn

    device = torch.device(spec["device"])
    cuda = device.type == "cuda"
    torch.manual_seed(0)
    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    model = build_model(spec["model"]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(spec["batch"], 3, spec["image"], spec["image"], device=device)
    y = torch.randint(0, 10, (spec["batch"],), device=device)
    config, out = spec["config"], spec["out"]
    hook = tb = stats = pinned = None
    try:
        if config in ("default", "reductions", "raw"):
            hook = mldbg_hook(config, out, model, loss_fn)
        elif config == "smdebug":
            hook = smdebug_hook(out, model, loss_fn)
        elif config == "tensorboard":
            import overhead

            tb = overhead.TensorBoardHistograms("a", out, model)
        elif config.startswith("stats-"):
            which = "norms" if config == "stats-norms" else "rules"
            stats = Statistics(model, which, 10 if config.endswith("-10") else 1)
        elif config == "pinned":
            pinned = PinnedCopies(model)
    except ImportError as e:
        return {"unavailable": f"{type(e).__name__}: {e}"}

    def step() -> None:
        opt.zero_grad()
        logits = model(x)
        loss = loss_fn(logits, y)
        loss.backward()
        for extra in (tb, stats, pinned):
            if extra is not None:
                extra.after_backward()
        if stats is not None:
            stats.labels(y, logits)
        opt.step()

    for _ in range(spec["warmup"]):
        step()
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(spec["steps"]):
        step()
    if cuda:
        torch.cuda.synchronize()
    loop_s = time.perf_counter() - t0
    for closing in (hook, tb, stats, pinned):
        if closing is not None:
            closing.close()
    if cuda:
        torch.cuda.synchronize()
    job_s = time.perf_counter() - t0
    nbytes, files = report.tree_size(out) if os.path.exists(out) else (0, 0)
    return {
        "loop_s": loop_s,
        "job_s": job_s,
        "bytes": nbytes,
        "files": files,
        "gpu": torch.cuda.get_device_name(device) if cuda else None,
        "peak_mb": torch.cuda.max_memory_allocated(device) / 2**20 if cuda else None,
    }


def run_worker(python: str, spec: dict) -> dict:
    if python == "inprocess":
        return worker(spec)
    env = dict(os.environ, SMDEBUG_LOG_LEVEL="error", PYTHONWARNINGS="ignore")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(report.ROOT / "src"), str(Path(__file__).resolve().parent), env.get("PYTHONPATH", "")]
    )
    proc = subprocess.run(
        [python, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"worker {spec['config']} at {spec['image']}px failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


# the driver ------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (the benchmark) or cpu (a smoke run of its logic)")
    ap.add_argument("--model", default="resnet18", choices=["resnet18", "small", "tiny"],
                    help="resnet18: torchvision's; small: overhead.py's quarter-width ResNet; tiny: its CNN")  # fmt: skip
    ap.add_argument("--images", default="32,224", help="image sizes, comma-separated")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=300, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma list of {', '.join(CONFIGS)}")
    ap.add_argument("--peer-python", default=None, help="the Python that runs smdebug and tensorboard")
    ap.add_argument("--name", default="gpu_overhead", help="result file name under benchmarks/results/")
    ap.add_argument("--no-save", action="store_true", help="print only; do not write benchmarks/results/")
    ap.add_argument("--inprocess", action="store_true", help="measure in this process (smoke test only)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(
            "gpu_overhead.py: no CUDA GPU here (torch.cuda.is_available() is False), so there is nothing "
            "to measure; run it on a GPU machine, or smoke-test its logic with "
            "--device cpu --model tiny --steps 5 --rounds 1"
        )
    configs = [c for c in args.configs.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise SystemExit(
            f"gpu_overhead.py: unknown configuration(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}"
        )
    if "none" not in configs:
        configs.insert(0, "none")
    images = [int(s) for s in args.images.split(",") if s]
    me = "inprocess" if args.inprocess else sys.executable
    peer = args.peer_python
    if peer is None:
        venv = report.BENCH_VENV / "bin" / "python"
        peer = str(venv) if venv.exists() and not args.inprocess else me
    runs: dict[tuple[str, int], list[dict]] = {(c, i): [] for c in configs for i in images}
    unavailable: dict[str, str] = {}
    root = Path(tempfile.mkdtemp(prefix="mldbg-gpu-bench-"))
    result: dict[str, Any] = {"machine": report.machine(), "command": report.command()}
    t_start = time.time()
    try:
        for r in range(args.rounds):
            for image in images:
                for config in configs:
                    if config in unavailable:
                        continue
                    out = root / f"{config}-{image}-{r}"
                    spec = {
                        "config": config, "out": str(out), "device": args.device, "model": args.model,
                        "image": image, "batch": args.batch, "steps": args.steps, "warmup": args.warmup,
                        "threads": args.threads,
                    }  # fmt: skip
                    res = run_worker(peer if config in PEERS else me, spec)
                    shutil.rmtree(out, ignore_errors=True)
                    if "unavailable" in res:
                        unavailable[config] = res["unavailable"]
                        print(f"{config}: left out ({res['unavailable']})", file=sys.stderr, flush=True)
                        continue
                    runs[(config, image)].append(res)
                    print(
                        f"round {r + 1}/{args.rounds} {image:4d}px {config:15s} "
                        f"{res['loop_s'] / args.steps * 1e3:8.2f} ms/step, job {res['job_s']:7.2f} s, "
                        f"{res['bytes'] / 1e6:9.1f} MB",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    gpu = next((x["gpu"] for rs in runs.values() for x in rs if x.get("gpu")), None)
    result.update(
        settings={
            k: getattr(args, k) for k in ("device", "model", "batch", "steps", "warmup", "rounds", "threads")
        },
        gpu=gpu,
        seconds=round(time.time() - t_start, 1),
        unavailable=unavailable,
        rows=summarize(runs, configs, images, args.steps, unavailable),
    )
    report.publish(args.name, result, markdown(result), not args.no_save)


def summarize(runs, configs, images, steps, unavailable) -> list[dict]:
    rows = []
    for image in images:
        base = runs[("none", image)]
        for config in configs:
            mine = runs[(config, image)]
            if config in unavailable or not mine:
                continue
            ratios = [m["job_s"] / b["job_s"] for m, b in zip(mine, base, strict=False)]
            rows.append({
                "config": config, "image": image,
                "ms_per_step": report.med([m["loop_s"] for m in mine]) / steps * 1e3,
                "ratio": report.med(ratios), "spread": report.spread(ratios),
                "bytes": report.med([m["bytes"] for m in mine]),
                "peak_mb": report.med([m["peak_mb"] for m in mine if m.get("peak_mb") is not None]),
            })  # fmt: skip
    return rows


def markdown(result: dict) -> str:
    s = result["settings"]
    where = f"on {result['gpu']}" if result["gpu"] else f"on {s['device']} (a smoke run, not the GPU figure)"
    lines = [
        report.header(result),
        f"Model {s['model']}, batch {s['batch']}, SGD with momentum, {where}; {s['warmup']} untimed warm-up "
        f"steps, then {s['steps']} timed steps and the hook's close(); {s['rounds']} interleaved rounds, each "
        f"configuration a fresh process ({result['seconds']:.0f} s in all). Ratio: job time (the timed steps "
        "and close) over the same round's uninstrumented run, median over rounds, min-max as the noise.\n",
    ]
    head = [
        "configuration",
        "image",
        "ms/step",
        "job time ratio",
        "rounds min-max",
        "written",
        "peak GPU MB",
        "target",
    ]
    body = []
    for r in result["rows"]:
        target = TARGETS.get((r["config"], r["image"]))
        body.append([
            f"{r['config']} ({CONFIGS[r['config']]})", f"{r['image']}x{r['image']}", f"{r['ms_per_step']:.2f}",
            f"{r['ratio']:.3f}x", r["spread"], f"{r['bytes'] / 1e6:.1f} MB" if r["bytes"] else "-",
            f"{r['peak_mb']:.0f}" if r["peak_mb"] == r["peak_mb"] else "-", f"<= {target:.2f}x" if target else "",
        ])  # fmt: skip
    lines.append(report.table(head, body))
    for config, why in result["unavailable"].items():
        lines.append(f"\n{config}: not measured ({why}).")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
