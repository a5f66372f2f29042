"""One worker of a 2-process gloo job that trains the defect table's PyTorch defects and their
healthy twins under FSDP2 (CPU): `python fsdp_defects_job.py OUT [SCENARIO ...]` with RANK and
WORLD_SIZE set. Each scenario is one run, `OUT/<scenario>`, recorded with the two lines
(`Hook(path)`, `register_module`, `register_loss`), of `tests.tiny`'s MLP with every Linear and
the model `fully_shard`ed; each rank trains on its half of every batch (FSDP2 averages the
gradients), as a data-parallel job does."""

import os
import sys

import torch
import torch.distributed as dist
from tests.tiny import apply_init, make_data, mlp
from torch import nn

from mldbg.torch import Hook

STEPS = 50
BATCH = 32

# scenario -> how it trains: activation, depth, init, optimizer ("sgd" | "adam"), lr, momentum,
# whether zero_grad() is called, the layer frozen from the start (left out of the optimizer),
# the step at which fc1 is frozen while the optimizer keeps it (gradients zeroed, not None)
SCENARIOS: dict[str, dict] = {
    "healthy": {},
    "healthy_sigmoid_adam": {"activation": "sigmoid", "optimizer": "adam", "lr": 1e-2},
    "healthy_momentum": {"momentum": 0.9, "lr": 0.02},
    "healthy_frozen_fc1": {"frozen": "fc1"},
    "vanishing": {"activation": "sigmoid", "depth": 8},
    "dead_relu": {"init": "negative_bias"},
    "no_zero_grad": {"zero_grad": False},
    "frozen_updated": {"momentum": 0.9, "lr": 0.02, "freeze_at": 5},
}


def train(out: str, rank: int, world: int, *, activation: str = "relu", depth: int = 2, init: str | None = None,
          optimizer: str = "sgd", lr: float = 0.1, momentum: float = 0.0, zero_grad: bool = True,
          frozen: str = "", freeze_at: int | None = None) -> None:  # fmt: skip
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    x, y = make_data(
        512, model="mlp", n_features=10, n_classes=3, channels=1, seed=1, teacher_seed=1234,
        imbalance=None, task="classification",
    )  # fmt: skip
    model = mlp(10, 3, 32, depth, activation)
    apply_init(model, init)
    if frozen:
        getattr(model, frozen).requires_grad_(False)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    hook = Hook(out)
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = (
        torch.optim.Adam(params, lr=lr)
        if optimizer == "adam"
        else torch.optim.SGD(params, lr=lr, momentum=momentum)
    )
    g = torch.Generator().manual_seed(2)
    order = torch.randperm(len(x), generator=g)
    per = BATCH // world
    for step in range(STEPS):
        b = step % (len(x) // BATCH)
        if b == 0 and step > 0:
            order = torch.randperm(len(x), generator=g)
        idx = order[b * BATCH : (b + 1) * BATCH][rank * per : (rank + 1) * per]
        if step == freeze_at:
            model.fc1.requires_grad_(False)
        if zero_grad:
            opt.zero_grad(set_to_none=freeze_at is None)
        loss_fn(model(x[idx]), y[idx]).backward()
        opt.step()
    hook.close()


def main(out_dir: str, names: list[str]) -> None:
    dist.init_process_group("gloo", init_method="env://")
    torch.set_num_threads(1)
    rank, world = dist.get_rank(), dist.get_world_size()
    for name in names or list(SCENARIOS):
        train(os.path.join(out_dir, name), rank, world, **SCENARIOS[name])
        dist.barrier()
    dist.destroy_process_group()
    print("worker done", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    main(sys.argv[1], sys.argv[2:])
    os._exit(0)  # see ddp_script.py's end
