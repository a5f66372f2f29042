"""Mixed precision and the training-loop mechanics around it: bf16 autocast, fp16 autocast
with torch.amp.GradScaler (dynamic loss scaling), a manual static loss scale, gradient
accumulation over micro-batches, clipping by norm and by value."""

from __future__ import annotations

import torch
from torch import nn

from mldbg.torch import Hook

from . import _data, buggy, healthy

torch.set_num_threads(1)


class ResMLP(nn.Module):
    def __init__(self, d_in: int, width: int, blocks: int, classes: int):
        super().__init__()
        self.inp = nn.Linear(d_in, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width)
            )
            for _ in range(blocks)
        )
        self.out = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for b in self.blocks:
            h = h + b(h)
        return self.out(h)


def mixed_precision(
    path: str,
    precision: str = "bf16",
    accumulate: int = 1,
    clip: str | None = None,
    optimizer: str = "adamw",
    lr: float = 1e-3,
    blocks: int = 3,
    steps: int = 200,
    micro_batch: int = 64,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """A residual MLP classifier. `precision`: `bf16` (CPU autocast), `fp16` (CPU autocast in
    float16 with torch.amp.GradScaler), `static_scale` (fp32, loss multiplied by 1024, the
    gradients divided back before the step), `fp32`. `accumulate` micro-batches per optimizer
    step (the loss divided by it); `clip`: `norm` (1.0) or `value` (0.5)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    x, y = _data.teacher_classes(g, 8000, 24, 10)
    model = ResMLP(24, 64, blocks, 10)
    loss_fn = nn.CrossEntropyLoss()
    lr = lr * (100 if bug == "lr_x100" else 1)
    if optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**14) if precision == "fp16" else None
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    model.train()
    for _ in range(steps):
        if bug != "no_zero_grad":
            opt.zero_grad()
        total = 0.0
        for _ in range(accumulate):
            idx = torch.randint(0, len(x), (micro_batch,), generator=g)
            if precision in ("bf16", "fp16"):
                dtype = torch.bfloat16 if precision == "bf16" else torch.float16
                with torch.autocast("cpu", dtype=dtype):
                    loss = loss_fn(model(x[idx]), y[idx]) / accumulate
            else:
                loss = loss_fn(model(x[idx]), y[idx]) / accumulate
            if scaler is not None:
                scaler.scale(loss).backward()
            elif precision == "static_scale":
                (loss * 1024.0).backward()
            else:
                loss.backward()
            total += loss.item()
        if scaler is not None:
            scaler.unscale_(opt)
        elif precision == "static_scale":
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.div_(1024.0)
        if clip == "norm":
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        elif clip == "value":
            nn.utils.clip_grad_value_(model.parameters(), 0.5)
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        losses.append(total)
    hook.close()
    return losses


_accum = healthy(
    "grad_accumulation_8_sgd",
    "precision",
    mixed_precision,
    precision="fp32",
    accumulate=8,
    micro_batch=16,
    optimizer="sgd",
    lr=0.05,
    steps=120,
)
_fp16 = healthy("fp16_autocast_gradscaler", "precision", mixed_precision, precision="fp16", clip="norm")

PIPELINES = [
    healthy("bf16_autocast_resmlp", "precision", mixed_precision),
    _fp16,
    healthy(
        "static_loss_scale_1024",
        "precision",
        mixed_precision,
        precision="static_scale",
        optimizer="sgd",
        lr=0.05,
        seed=1,
    ),
    _accum,
    healthy(
        "bf16_accumulate4_clip_value",
        "precision",
        mixed_precision,
        accumulate=4,
        micro_batch=32,
        clip="value",
        steps=100,
        seed=2,
    ),
    healthy(
        "fp32_clip_norm_deep_resmlp",
        "precision",
        mixed_precision,
        precision="fp32",
        clip="norm",
        blocks=6,
        lr=2e-3,
        seed=3,
    ),
    buggy(_accum, "no_zero_grad"),
    buggy(_fp16, "lr_x100"),
]
