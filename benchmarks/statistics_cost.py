"""Cost of computing the rules' statistics where the tensors live: `StatisticsBatch` against a
per-tensor loop (issue 14).

    python benchmarks/statistics_cost.py [--device auto|cpu|cuda] [--batch 8] [--min-run-time 1]

The small ResNet of overhead.py (62 parameter tensors, 0.70 M parameters; `--model resnet18`
takes torchvision's on a GPU), after one forward and backward: statistics of every parameter and
every gradient (124 tensors) and of every ReLU call's output. Two sets:
- `norms`: l2, mean |x|, max |x| of parameters and gradients;
- `rules`: those plus NaN count, inf count, variance and zero fraction, and for the ReLU
  outputs per-unit activity (`unit_active`), zero fraction and mean |x|.
Three ways:
- `per-tensor .item()`: one operation per statistic and tensor, each read with `.item()` (a
  hook written the obvious way; on a GPU every read waits for the device);
- `per-tensor stacked`: the same operations, stacked and copied to the host once;
- `StatisticsBatch`: `finish()` alone (what the training thread pays: the work is enqueued,
  the values are read later on another thread), and `finish()` plus reading the values.
Times are medians of `torch.utils.benchmark.Timer.blocked_autorange` (which synchronizes CUDA),
next to the model's own training step (forward, backward, SGD step) at the same batch size.
Next to them, counted on any device: the operations each way dispatches (views left out), which
on a GPU are kernel launches, the cost that dominates a launch-bound step, and the times it
waits for the device (reads). `StatisticsBatch` is counted on its GPU path (`sync_free=True`).
"""

from __future__ import annotations

import argparse
import math

import overhead

import report

SETS = ("norms", "rules")


def count_ops(fn) -> int:
    """Operations `fn` dispatches, views and reads left out: kernel launches on a GPU."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        ops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not func.is_view and func.overloadpacket.__name__ != "_local_scalar_dense":
                Count.ops += 1
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.ops


def reads(params, acts, which: str) -> int:
    """Values `per_tensor(..., read=True)` reads one by one: each waits for a GPU."""
    per_param = 7 if which == "rules" else 3
    return per_param * len(params) + (3 * len(acts) if which == "rules" else 0)


def per_tensor(params, acts, which: str, read: bool):
    """The statistics the straightforward way: one op per statistic and tensor."""
    import torch

    vals = []
    for t in params:
        vals += [t.norm(), t.abs().mean(), t.abs().max()]
        if which == "rules":
            vals += [
                torch.isnan(t).sum(),
                torch.isinf(t).sum(),
                t.var(unbiased=False),
                (t == 0).float().mean(),
            ]
    if which == "rules":
        for a in acts:
            peak = a.amax(dim=tuple(range(2, a.dim()))) if a.dim() > 2 else a
            vals += [(peak > 0).sum(0), (a == 0).float().mean(), a.abs().mean()]
    if read:
        return [v.tolist() for v in vals]
    return torch.cat([v.reshape(-1).double() for v in vals]).cpu()


PER_STATISTIC = [
    *((k, False) for k in ["l2", "mean_abs", "max_abs", "max", "min", "nan_count", "variance", "zero_fraction",
                           "outside(-1,1)", "quantile(5)", "fingerprint", "delta_l2", "row_range"]),
    *((k, True) for k in ["unit_active", "unit_outside(-1,1)", "zero_fraction", "channel_mean"]),
]  # fmt: skip


def batched_one(batch, pairs, kinds, read: bool = True):
    for name, t in pairs:
        batch.add(name, t, kinds)
    pending = batch.finish()
    return pending() if read else pending


def batched(batch, named_params, named_acts, which: str, read: bool):
    kinds = ["l2", "mean_abs", "max_abs"]
    if which == "rules":
        kinds += ["nan_count", "inf_count", "variance", "zero_fraction"]
    for name, t in named_params:
        batch.add(name, t, kinds)
    if which == "rules":
        for name, a in named_acts:
            batch.add(name, a, ["unit_active", "zero_fraction", "mean_abs"])
    pending = batch.finish()
    return pending() if read else pending


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto", help="auto (cuda when available), cpu or cuda")
    ap.add_argument("--model", default="resnet", choices=["resnet", "resnet18"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads on the CPU (0: default)")
    ap.add_argument("--min-run-time", type=float, default=1.0, help="seconds per measurement")
    ap.add_argument("--name", default="statistics_cost", help="result file name under benchmarks/results/")
    ap.add_argument("--no-save", action="store_true", help="print only; do not write benchmarks/results/")
    ap.add_argument(
        "--per-statistic", action="store_true", help="also time each statistic alone (the cadence table)"
    )
    args = ap.parse_args()
    import torch
    from torch import nn
    from torch.utils.benchmark import Timer

    from mldbg.frameworks.torch_statistics import StatisticsBatch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    torch.manual_seed(0)
    if args.model == "resnet18":
        import torchvision  # the GPU machine's model

        model = torchvision.models.resnet18(num_classes=10).to(device)
    else:
        model = overhead.build_model("resnet").to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(args.batch, 3, args.image, args.image, device=device)
    y = torch.randint(0, 10, (args.batch,), device=device)
    acts: list[tuple[str, torch.Tensor]] = []
    capture = [False]
    for name, m in model.named_modules():
        if isinstance(m, nn.ReLU):
            m.register_forward_hook(
                lambda mod, a, out, name=name: (
                    acts.append((f"{name}_output_{len(acts)}", out.detach())) if capture[0] else None
                )
            )

    def train_step() -> None:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    capture[0] = True
    train_step()
    capture[0] = False
    named = [(n, p.detach()) for n, p in model.named_parameters()]
    named += [(f"gradient/{n}", p.grad) for n, p in model.named_parameters() if p.grad is not None]
    params = [t for _, t in named]
    act_tensors = [a for _, a in acts]
    batch = StatisticsBatch()
    for which in SETS:  # warm up (and check that both give numbers)
        per_tensor(params, act_tensors, which, True)
        batched(batch, named, acts, which, True)

    def timed(stmt: str, env: dict) -> float:
        t = Timer(stmt=stmt, globals=env, num_threads=torch.get_num_threads())
        return t.blocked_autorange(min_run_time=args.min_run_time).median * 1e3

    env = {"per_tensor": per_tensor, "batched": batched, "batch": batch, "named": named, "acts": acts,
           "params": params, "act_tensors": act_tensors, "train_step": train_step}  # fmt: skip
    step_ms = timed("train_step()", env)
    rows = []
    for which in SETS:
        e = dict(env, which=which)
        item = timed("per_tensor(params, act_tensors, which, True)", e)
        stacked = timed("per_tensor(params, act_tensors, which, False)", e)
        enqueue = timed("batched(batch, named, acts, which, False)", e)
        full = timed("batched(batch, named, acts, which, True)", e)
        gpu_path = StatisticsBatch(sync_free=True)
        ops = {
            "item": count_ops(lambda: per_tensor(params, act_tensors, which, True)),  # noqa: B023
            "stacked": count_ops(lambda: per_tensor(params, act_tensors, which, False)),  # noqa: B023
            "batch": count_ops(lambda: batched(gpu_path, named, acts, which, False)),  # noqa: B023
        }
        rows.append({
            "set": which, "item_ms": item, "stacked_ms": stacked, "finish_ms": enqueue, "read_ms": full,
            "ops": ops, "reads": reads(params, act_tensors, which),
        })  # fmt: skip
    per_stat = []
    if args.per_statistic:
        for kind, on_acts in PER_STATISTIC:
            pairs = acts if on_acts else named
            e = dict(env, pairs=pairs, kinds=[kind])
            ms = timed("batched_one(batch, pairs, kinds)", dict(e, batched_one=batched_one))
            gpu_path = StatisticsBatch(sync_free=True)
            batched_one(gpu_path, pairs, [kind])  # the steady state: delta_l2 has its copies
            ops = count_ops(lambda: batched_one(gpu_path, pairs, [kind], read=False))  # noqa: B023
            per_stat.append({"statistic": kind, "on": "activations" if on_acts else "parameters and gradients",
                             "ms": ms, "ops": ops})  # fmt: skip
    n_acts = len(acts)
    result = {
        "machine": report.machine(),
        "command": report.command(),
        "settings": {
            "device": str(device), "model": args.model, "batch": args.batch, "image": args.image,
            "threads": torch.get_num_threads(), "tensors": len(named), "activations": n_acts,
            "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        },
        "step_ms": step_ms,
        "rows": rows,
        "per_statistic": per_stat,
    }  # fmt: skip
    report.publish(args.name, result, markdown(result), not args.no_save)


def markdown(result: dict) -> str:
    s = result["settings"]
    where = s["gpu"] or "CPU"
    lines = [
        report.header(result),
        f"Statistics of {s['tensors']} parameters and gradients and {s['activations']} ReLU outputs of the "
        f"{s['model']} model (batch {s['batch']} of 3x{s['image']}x{s['image']}) on {where}, torch threads "
        f"{s['threads']}; medians of torch.utils.benchmark. The training step itself takes "
        f"{result['step_ms']:.2f} ms. Percentages: of that step.\n",
    ]
    step = result["step_ms"]

    def cell(ms: float) -> str:
        return f"{ms:.3f} ({100 * ms / step:.1f}%)" if math.isfinite(ms) else "-"

    head = ["statistics", "per-tensor .item() ms", "per-tensor stacked ms", "StatisticsBatch finish() ms",
            "finish() + read ms", "speed-up (read) vs .item()"]  # fmt: skip
    body = [
        [r["set"], cell(r["item_ms"]), cell(r["stacked_ms"]), cell(r["finish_ms"]), cell(r["read_ms"]),
         f"{r['item_ms'] / r['read_ms']:.1f}x"]
        for r in result["rows"]
    ]  # fmt: skip
    lines.append(report.table(head, body))
    lines.append("\nOperations dispatched per step (kernel launches on a GPU) and waits for the device:\n")
    head = ["statistics", "per-tensor .item()", "per-tensor stacked", "StatisticsBatch (GPU path)"]
    body = [
        [r["set"], f"{r['ops']['item']} ops, {r['reads']} waits", f"{r['ops']['stacked']} ops, 1 wait",
         f"{r['ops']['batch']} ops, 0 waits (1 event, read on another thread)"]
        for r in result["rows"]
    ]  # fmt: skip
    lines.append(report.table(head, body))
    if result["per_statistic"]:
        lines.append(
            "\nEach statistic alone (finish() + read), and the operations its GPU path dispatches:\n"
        )
        head = ["statistic", "of", "ms", "% of the step", "ops (GPU launches)"]
        body = [
            [r["statistic"], r["on"], f"{r['ms']:.3f}", f"{100 * r['ms'] / step:.1f}%", r["ops"]]
            for r in result["per_statistic"]
        ]
        lines.append(report.table(head, body))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
