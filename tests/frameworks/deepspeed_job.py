"""One worker of a 2-process DeepSpeed ZeRO job on the CPU (DeepSpeed's CPU accelerator, gloo):
`python deepspeed_job.py OUT STAGE REFS [explode]` with RANK, LOCAL_RANK, WORLD_SIZE set
(`explode`: the defect of `fsdp_job.py`, lr 1e12). The model and data
of `fsdp_job.py` (a parameter of 3 elements: ZeRO-3's last partition is padded; ZeRO-1/2's flat
partitions split a weight between the ranks); ZeRO-3 partitions every parameter
(`stage3_param_persistence_threshold` 0). The hook has the two lines (statistics at every step):
registered on the model before `deepspeed.initialize` (stages 1, 2) or on the engine after it (3).

Worker 0 writes to REFS, per step, the statistics (`mldbg.store.statistics.compute`) of the global
fp32 weights and of the global averaged gradients, gathered with
`deepspeed.utils.safe_get_full_fp32_param` / `safe_get_full_grad` after `engine.backward` and
before `engine.step()`, and, under `single/`, the gradients' l2 of the same model trained in this
process without DeepSpeed on the full batch, for the test to compare with what the hook recorded."""

import json
import os
import sys

import torch
from fsdp_job import BATCH, batches, make_model
from torch import nn

from mldbg.store import statistics as st
from mldbg.torch import Hook


def main(out_dir: str, stage: int, refs_path: str, defect: str = "") -> None:
    import deepspeed
    from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_grad

    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    model = make_model()
    single = make_model()  # the same weights, trained here on the full batch
    single_opt = torch.optim.SGD(single.parameters(), lr=0.1)
    hook = Hook(out_dir, statistics_every=1)
    if stage != 3:
        hook.register_module(model)  # before deepspeed.initialize
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    zero = {"stage": stage, **({"stage3_param_persistence_threshold": 0} if stage == 3 else {})}
    config = {
        "train_micro_batch_size_per_gpu": BATCH // world, "gradient_accumulation_steps": 1,
        "zero_optimization": zero, "zero_allow_untested_optimizer": True,
        "optimizer": {"type": "SGD", "params": {"lr": 1e12 if defect == "explode" else 0.1}},
    }  # fmt: skip
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    if stage == 3:
        hook.register_module(engine)  # the engine, after: the hook records the model it wraps
    per = BATCH // world
    refs: dict = {}
    previous: dict = {}
    for step, (x, y) in enumerate(batches()):
        loss = loss_fn(engine(x[rank * per : (rank + 1) * per]), y[rank * per : (rank + 1) * per])
        engine.backward(loss)
        out, alone = {}, {}
        for name, p in model.named_parameters():
            own = st.DEFAULTS["biases" if name.endswith("bias") else "weights"]
            for key, t, kinds in (
                (name, safe_get_full_fp32_param(p), own),
                (f"gradient/{name}", safe_get_full_grad(p), st.DEFAULTS["gradients"]),
            ):
                value = (
                    t.detach().float().reshape(tuple(p.ds_shape) if stage == 3 else p.shape).numpy().copy()
                )
                wanted = [k for k in kinds if k != "requires_grad"]
                stats = st.compute(value, wanted, previous=previous.get(key))
                out[key] = {k: float(v) for k, v in stats.items()}
                previous[key] = value
        single_opt.zero_grad()
        loss_fn(single(x), y).backward()
        for name, p in single.named_parameters():
            alone[f"gradient/{name}"] = float(p.grad.norm())
        single_opt.step()
        refs[str(step)] = out
        refs[f"single/{step}"] = alone
        engine.step()
    hook.close()
    if rank == 0:
        with open(refs_path, "w") as f:
            json.dump(refs, f)
    torch.distributed.barrier()
    print(f"worker {rank} done", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], *sys.argv[4:])
    os._exit(0)
