"""Where the two-line hook's time goes on a GPU, and how many bytes a statistics step writes
(issue 32): torchvision ResNet18, batch 128, SGD with momentum, the README's two lines.

    python benchmarks/gpu_profile.py [--image 32] [--steps 20] [--warmup 30] [--out DIR]

Prints, for the hooked run, torch.profiler's top operations by self CPU and self CUDA time over
`--steps` steps after `--warmup`, the number of host synchronisations the CUDA runtime was asked
for in those steps (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, and
synchronous cudaMemcpy), with the same count for an uninstrumented run beside it; then the bytes
the first 20 steps wrote (each one a statistics step) per step. With `--out` it writes the
profiles' tables and a Chrome trace there.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import report

SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


def build(image: int, batch: int):
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, 3, image, image, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    return model, opt, loss_fn, x, y


def profile(hooked: bool, args, out: Path | None) -> dict:
    import torch
    from torch.profiler import ProfilerActivity

    model, opt, loss_fn, x, y = build(args.image, args.batch)
    hook = None
    run = tempfile.mkdtemp(prefix="gpu_profile_")
    if hooked:
        from mldbg.torch import Hook

        hook = Hook(run, overwrite=True)
        hook.register_module(model)
        hook.register_loss(loss_fn)

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) / args.steps * 1e3
    if hook is not None:
        hook.close()
    events = prof.key_averages()
    syncs = {name: sum(e.count for e in events if e.key == name) for name in SYNC_CALLS}
    tag = "hooked" if hooked else "plain"
    cpu = events.table(sort_by="self_cpu_time_total", row_limit=25)
    cuda = events.table(sort_by="self_cuda_time_total", row_limit=25)
    if out is not None:
        (out / f"profile_{tag}_{args.image}.txt").write_text(cpu + "\n\n" + cuda)
        prof.export_chrome_trace(str(out / f"trace_{tag}_{args.image}.json"))
    return {"tag": tag, "ms_per_step": ms, "syncs": syncs, "cpu_table": cpu, "cuda_table": cuda}


def statistics_bytes(args) -> dict:
    """Bytes one statistics step of a two-line run writes: runs of 10 and of 20 steps (every one
    of the first 20 steps is a statistics step; both runs also hold step 0's raw weights and
    gradients of the default save config), closed; the difference over 10 steps."""
    from mldbg.torch import Hook

    sizes = {}
    for steps in (10, 20):
        model, opt, loss_fn, x, y = build(args.image, args.batch)
        run = tempfile.mkdtemp(prefix="gpu_bytes_")
        hook = Hook(run, overwrite=True)
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for _ in range(steps):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        hook.close()
        sizes[steps] = report.tree_size(run)[0]
    return {"bytes_10": sizes[10], "bytes_20": sizes[20], "bytes_per_step": (sizes[20] - sizes[10]) / 10}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--out", default=None)
    ap.add_argument("--bytes-only", action="store_true", help="only the bytes of a statistics step")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("gpu_profile.py: no CUDA GPU here")
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    size = statistics_bytes(args)
    print(f"two-line statistics: {size['bytes_per_step'] / 1024:.1f} KB per statistics step "
          f"(10 steps {size['bytes_10']:,} B, 20 steps {size['bytes_20']:,} B)")  # fmt: skip
    if args.bytes_only:
        return
    plain = profile(False, args, out)
    hooked = profile(True, args, out)
    print(hooked["cpu_table"])
    print(hooked["cuda_table"])
    print(f"GPU: {torch.cuda.get_device_name()}; ResNet18 {args.image}x{args.image}, batch {args.batch}")
    print(f"ms/step under the profiler: plain {plain['ms_per_step']:.2f}, hooked {hooked['ms_per_step']:.2f}")
    print(f"host syncs in {args.steps} steps: plain {plain['syncs']}, hooked {hooked['syncs']}")
    if out is not None:
        keep = {k: v for k, v in hooked.items() if not k.endswith("_table")}
        (out / f"gpu_profile_{args.image}.json").write_text(
            json.dumps(
                {
                    "plain": {k: v for k, v in plain.items() if not k.endswith("_table")},
                    "hooked": keep,
                    "bytes": size,
                },
                indent=1,
            )  # fmt: skip
        )


if __name__ == "__main__":
    main()
