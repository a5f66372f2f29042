"""One worker of a 2-process gloo job with sharded parameters (CPU):
`python fsdp_job.py OUT LAYOUT [defect] [REFS]` with RANK and WORLD_SIZE set (world size 1 and
LAYOUT `single`: the same model unsharded in one process, on the full batch).

LAYOUT: `fsdp` (FSDP2: each Linear and the model `fully_shard`ed), `fsdp_compiled` (the same,
then `torch.compile(model, backend="aot_eager")`: the hook registers the compiled model), `tp` (tensor parallel: the
first Linear `ColwiseParallel`, the second `RowwiseParallel`, the last replicated),
`single`, `lightning` (Lightning's ModelParallelStrategy, `lightning_main`: run it once, without
RANK). The hook has the two lines (statistics at every step). Each rank trains on its part of
the same full batch (FSDP2: its half, the gradients averaged; TP: the whole batch). `defect`:
`explode` (lr 1e12), `dead` (the first Linear's bias at -10: its ReLUs dead from step 0), `nan1` (FSDP2: a NaN in rank 1's shard of one gradient at step
NAN_STEP), `drift` (TP: rank 1's copy of the replicated last layer drifts), `late`
(not a defect: the model registered before it is sharded), `raw` (not a defect: weights, biases
and gradients saved raw every other step, REFS an .npz of the global tensors gathered with
`full_tensor()` at each step: `<step>/<name>`). With REFS,
worker 0 writes there, per step, the statistics of the global tensors gathered with
`full_tensor()` (the NumPy reference of `mldbg.store.statistics`), for the test to compare."""

import json
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from mldbg.store import statistics as st
from mldbg.torch import Hook

STEPS = 6
NAN_STEP = 3  # `nan1`: rank 1's shard of the gradient of 2.weight gets a NaN at this step
BATCH = 16


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 12), nn.ReLU(), nn.Linear(12, 3))


def batches(steps: int = STEPS):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        yield torch.randn(BATCH, 6, generator=g), torch.randint(0, 3, (BATCH,), generator=g)


def shard(model: nn.Module, layout: str, world: int) -> nn.Module:
    if layout in ("fsdp", "fsdp_compiled"):
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
    elif layout == "tp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, distribute_tensor
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        mesh = init_device_mesh("cpu", (world,))
        parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        last = model[4]  # replicated: DTensors with Replicate placement on every rank
        for pname, p in list(last.named_parameters()):
            setattr(last, pname, nn.Parameter(distribute_tensor(p.data, mesh, [Replicate()])))
        model[4] = _LocalIn(last)
    elif layout == "fsdp_tp":  # 4 ranks: a (2, 2) mesh, TP inside, FSDP2 across
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp"))
        parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
    return model


class _LocalIn(nn.Module):
    """The replicated last layer of the TP layout, fed plain tensors (its input is local)."""

    def __init__(self, inner: nn.Linear):
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.distributed.tensor import DTensor, Replicate

        w, b = self.inner.weight, self.inner.bias
        x = DTensor.from_local(x, w.device_mesh, [Replicate()])
        return nn.functional.linear(x, w, b).to_local()


def references(model: nn.Module, previous: dict, refs: dict, step: int, rank: int) -> None:
    """The statistics of every global weight and gradient (gathered: a collective, every rank)."""
    out = {}
    for name, p in model.named_parameters():
        own = st.DEFAULTS["biases" if name.endswith("bias") else "weights"]
        for key, t, kinds in ((name, p, own), (f"gradient/{name}", p.grad, st.DEFAULTS["gradients"])):
            full = t.full_tensor() if hasattr(t, "full_tensor") else t
            value = full.detach().numpy().copy()
            stats = st.compute(value, [k for k in kinds if k != "requires_grad"], previous=previous.get(key))
            stats["fingerprint"] = float(st.fingerprint(value))
            previous[key] = value
            out[key] = {k: float(v) for k, v in stats.items()}
    if rank == 0:
        refs[str(step)] = out


def gathered(model: nn.Module, refs: dict, step: int, rank: int) -> None:
    """The global weights and gradients (`full_tensor()`: a collective, every rank), before the
    optimizer step: the weights the step's forward saw, the gradients the step saves."""
    for name, p in model.named_parameters():
        for key, t in ((name, p), (f"gradient/{name}", p.grad)):
            full = t.full_tensor() if hasattr(t, "full_tensor") else t
            if rank == 0:
                refs[f"{step}/{key}"] = full.detach().numpy().copy()


def main(out_dir: str, layout: str, defect: str, refs_path: str) -> None:
    single = layout == "single"
    if not single:
        dist.init_process_group("gloo", init_method="env://")
    rank, world = (0, 1) if single else (dist.get_rank(), dist.get_world_size())
    if defect == "raw":
        from mldbg import SaveConfig

        hook = Hook(
            out_dir, save_config=SaveConfig(save_interval=2),
            include_collections=["weights", "biases", "gradients", "losses"],
            include_workers=os.environ.get("INCLUDE_WORKERS", "one"),
        )  # fmt: skip
    else:
        hook = Hook(out_dir, statistics_every=1)
    net = make_model()
    if defect == "dead":
        with torch.no_grad():
            net[0].bias.fill_(-10.0)
    if defect == "late":  # registered before the parameters are sharded
        hook.register_module(net)
        model = shard(net, layout, world)
    else:
        model = shard(net, layout, world)
        if layout == "fsdp_compiled":
            model = torch.compile(model, backend="aot_eager")
        hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=1e12 if defect == "explode" else 0.1)
    shards = {"fsdp": world, "fsdp_compiled": world, "fsdp_tp": world // 2}.get(layout, 1)  # the dp ranks
    per, index = BATCH // shards, rank if layout in ("fsdp", "fsdp_compiled") else rank // 2
    part = slice(index * per, (index + 1) * per) if shards > 1 else slice(None)
    previous: dict = {}
    refs: dict = {}
    for step, (x, y) in enumerate(batches()):
        opt.zero_grad()
        loss_fn(model(x[part]), y[part]).backward()
        if defect == "nan1" and rank == 1 and step == NAN_STEP:  # only rank 1's piece of one gradient
            with torch.no_grad():
                model[2].weight.grad.to_local()[0, 0] = float("nan")
        if refs_path and defect == "raw":
            gathered(net, refs, step, rank)
        elif refs_path:
            references(net, previous, refs, step, rank)  # the model's names (not the compiled wrapper's)
        opt.step()
        if defect == "drift" and rank == 1:
            with torch.no_grad():
                model[4].inner.weight.to_local().mul_(1.5)
    hook.close()
    if refs_path and rank == 0 and defect == "raw":
        np.savez(refs_path, **refs)
    elif refs_path and rank == 0:
        with open(refs_path, "w") as f:
            json.dump(refs, f)
    if not single:
        dist.barrier()
        dist.destroy_process_group()
    print("worker done", flush=True)


def lightning_main(out_dir: str, defect: str, refs_path: str) -> None:
    """LAYOUT `lightning`: the same model under Lightning's `ModelParallelStrategy` (FSDP2 in
    `configure_model`, data_parallel 2) on 2 CPU processes, with `mldbg.lightning.DebuggerCallback`
    and its defaults (the two lines). Run once: Lightning's launcher starts rank 1. With REFS,
    rank 0 writes there, per step, the statistics of the global weights at the batch's start."""
    import warnings

    import lightning.pytorch as pl
    from lightning.pytorch.strategies import ModelParallelStrategy
    from torch.utils.data import DataLoader, TensorDataset

    from mldbg.lightning import DebuggerCallback

    warnings.filterwarnings("ignore")

    class Sharded(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = make_model()

        def configure_model(self) -> None:
            from torch.distributed.fsdp import fully_shard

            mesh = self.device_mesh["data_parallel"]
            for layer in self.net:
                if isinstance(layer, nn.Linear):
                    fully_shard(layer, mesh=mesh)
            fully_shard(self.net, mesh=mesh)

        def on_train_batch_start(self, batch, batch_idx) -> None:
            if not refs_path:
                return
            out = {}
            for name, p in self.named_parameters():  # full_tensor(): a collective, every rank
                value = p.full_tensor().detach().numpy().copy()
                own = st.DEFAULTS["biases" if name.endswith("bias") else "weights"]
                stats = st.compute(value, [k for k in own if k not in ("requires_grad", "delta_l2")])
                stats["fingerprint"] = float(st.fingerprint(value))
                out[name] = {k: float(v) for k, v in stats.items()}
            refs[str(self.trainer.global_step)] = out

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1e12 if defect == "explode" else 0.1)

    refs: dict = {}
    xs, ys = zip(*batches(), strict=True)
    data = DataLoader(TensorDataset(torch.cat(xs), torch.cat(ys)), batch_size=BATCH // 2)
    trainer = pl.Trainer(
        max_epochs=1, accelerator="cpu", devices=2,
        strategy=ModelParallelStrategy(data_parallel_size=2, tensor_parallel_size=1),
        callbacks=[DebuggerCallback(out_dir)], logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(Sharded(), data)
    if refs_path and trainer.global_rank == 0:
        with open(refs_path, "w") as f:
            json.dump(refs, f)
    print(f"rank {trainer.global_rank} steps {trainer.global_step}", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    args = sys.argv[1:] + [""] * 4
    if args[1] == "lightning":
        lightning_main(args[0], args[2], args[3])
        sys.exit(0)  # Lightning tears its processes down itself
    main(args[0], args[1], args[2], args[3])
    os._exit(0)  # see ddp_script.py's end
