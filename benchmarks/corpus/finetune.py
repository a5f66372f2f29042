"""Fine-tuning: a model is trained first (the "pretrained" checkpoint, not recorded), then a
copy is fine-tuned on a related task and recorded: at a tiny learning rate, with a frozen
backbone and a new head, with layer-wise learning rates, and gradual unfreezing."""

from __future__ import annotations

import copy

import torch
from torch import nn

from mldbg.torch import Hook

from . import _data, buggy, healthy

torch.set_num_threads(1)


class Backbone(nn.Module):
    def __init__(self, d: int, width: int, depth: int):
        super().__init__()
        layers: list[nn.Module] = []
        for i in range(depth):
            layers += [nn.Linear(d if i == 0 else width, width), nn.LayerNorm(width), nn.GELU()]
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class Classifier(nn.Module):
    def __init__(self, backbone: Backbone, width: int, classes: int):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def _tasks(seed: int, d: int, n: int):
    """Two related tasks: the same input distribution and teacher features, different labels
    (6 classes for pretraining, 3 for the downstream task built from them)."""
    g = torch.Generator().manual_seed(seed)
    x, y6 = _data.teacher_classes(g, 2 * n, d, 6)
    down = torch.tensor([0, 0, 1, 1, 2, 2])[y6]
    down = torch.where(torch.rand(2 * n, generator=g) < 0.1, torch.randint(0, 3, (2 * n,), generator=g), down)
    return (x[:n], y6[:n]), (x[n:], down[n:])


def pretrain(seed: int, d: int, width: int, depth: int, steps: int = 200) -> Classifier:
    torch.manual_seed(seed)
    (x, y), _ = _tasks(seed, d, 2000)
    model = Classifier(Backbone(d, width, depth), width, 6)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for i in range(steps):
        idx = torch.arange(i * 64, (i + 1) * 64) % len(x)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
    return model


def finetune(
    path: str,
    mode: str = "tiny_lr",
    lr: float = 1e-4,
    d: int = 16,
    width: int = 64,
    depth: int = 3,
    steps: int = 200,
    batch: int = 32,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """`tiny_lr`: the whole model at a small learning rate (AdamW, linear decay), new head;
    `frozen`: backbone frozen (requires_grad False, eval mode), only the head trains with SGD;
    `layerwise`: discriminative learning rates, the lower layers slower; `unfreeze`: frozen
    backbone, then unfrozen after a third of the steps (added to the optimizer)."""
    pretrained = pretrain(seed, d, width, depth)
    torch.manual_seed(seed + 10)
    _, (x, y) = _tasks(seed, d, 2000)
    model = Classifier(copy.deepcopy(pretrained.backbone), width, 3)
    loss_fn = nn.CrossEntropyLoss()
    if mode == "frozen":
        model.backbone.requires_grad_(False)
        opt = torch.optim.SGD(model.head.parameters(), lr=lr, momentum=0.9)
    elif mode == "layerwise":
        groups = [{"params": model.head.parameters(), "lr": lr}]
        blocks = [model.backbone.layers[i : i + 3] for i in range(0, len(model.backbone.layers), 3)]
        for k, block in enumerate(reversed(blocks)):
            groups.append({"params": block.parameters(), "lr": lr * 0.5 ** (k + 1)})
        opt = torch.optim.Adam(groups)
    elif mode == "unfreeze":
        model.backbone.requires_grad_(False)
        opt = torch.optim.Adam(model.head.parameters(), lr=lr)
    elif bug == "frozen_by_mistake":  # the optimizer given the checkpoint's parameters, not the copy's
        opt = torch.optim.AdamW(pretrained.parameters(), lr=lr, weight_decay=0.01)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LinearLR(opt, 1.0, 0.1, total_iters=steps)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(seed + 2)
    losses = []
    for step in range(steps):
        if mode == "unfreeze" and step == steps // 3:
            model.backbone.requires_grad_(True)
            opt.add_param_group({"params": model.backbone.parameters(), "lr": lr * 0.1})
        model.train()
        if mode == "frozen":
            model.backbone.eval()
        idx = torch.randint(0, len(x), (batch,), generator=g)
        opt.zero_grad()
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


_tiny = healthy("finetune_whole_model_tiny_lr", "fine-tuning", finetune)

PIPELINES = [
    _tiny,
    healthy("finetune_whole_model_lr_1e-5", "fine-tuning", finetune, lr=1e-5, seed=1),
    healthy("finetune_frozen_backbone_new_head", "fine-tuning", finetune, mode="frozen", lr=0.05, seed=2),
    healthy("finetune_layerwise_lr", "fine-tuning", finetune, mode="layerwise", lr=1e-3, depth=4, seed=3),
    healthy("finetune_gradual_unfreeze", "fine-tuning", finetune, mode="unfreeze", lr=2e-3, seed=4),
    buggy(_tiny, "frozen_by_mistake"),
]
