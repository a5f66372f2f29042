"""One worker of a 2-process gloo FSDP2 job (CPU): `python fsdp_job.py OUT MODE [defect]` with RANK set.

MODE: `two` (the two lines), `raw` (save_config with weights and gradients saved raw).
The model is a 3-layer MLP, each Linear and the model `fully_shard`ed; each rank trains on its
half of the same full batch (the loss is the mean over the full batch, as one process would
compute it). `defect`: `explode` (a learning rate that blows up the weights)."""

import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

import mldbg
from mldbg.torch import Hook

STEPS = 6
BATCH = 16


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 12), nn.ReLU(), nn.Linear(12, 3))


def batches(steps: int = STEPS):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        yield torch.randn(BATCH, 6, generator=g), torch.randint(0, 3, (BATCH,), generator=g)


def main(out_dir: str, mode: str, defect: str) -> None:
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = make_model()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    if mode == "raw":
        hook = Hook(
            out_dir,
            save_config=mldbg.SaveConfig(save_interval=1),
            include_collections=["weights", "gradients", "losses"],
        )
    else:
        hook = Hook(out_dir, statistics_every=1)
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    lr = 1e12 if defect == "explode" else 0.1
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    per = BATCH // world
    for x, y in batches():
        x, y = x[rank * per : (rank + 1) * per], y[rank * per : (rank + 1) * per]
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    hook.close()
    dist.barrier()
    dist.destroy_process_group()
    print("worker done", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
    os._exit(0)  # see ddp_script.py's end
