"""One worker of a 2-process DeepSpeed ZeRO job on the CPU (DeepSpeed's CPU accelerator, gloo):
`python deepspeed_job.py OUT STAGE REFS` with RANK, LOCAL_RANK, WORLD_SIZE set. The model and data
of `fsdp_job.py`; the hook has the two lines (statistics at every step). Worker 0 writes to REFS,
per step, the statistics of the global fp32 weights and of the global averaged gradients
(`deepspeed.utils.safe_get_full_fp32_param` / `safe_get_full_grad`, gathered before
`engine.step()`), for the test to compare with what the hook recorded."""

import json
import os
import sys

import torch
from fsdp_job import BATCH, batches, make_model
from torch import nn

from mldbg.store import statistics as st
from mldbg.torch import Hook


def main(out_dir: str, stage: int, refs_path: str) -> None:
    import deepspeed
    from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_grad

    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    model = make_model()
    hook = Hook(out_dir, statistics_every=1)
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    config = {
        "train_micro_batch_size_per_gpu": BATCH // world, "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": stage}, "zero_allow_untested_optimizer": True,
        "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
    }  # fmt: skip
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    per = BATCH // world
    refs: dict = {}
    for step, (x, y) in enumerate(batches()):
        loss = loss_fn(engine(x[rank * per : (rank + 1) * per]), y[rank * per : (rank + 1) * per])
        engine.backward(loss)
        out = {}
        for name, p in model.named_parameters():
            own = st.DEFAULTS["biases" if name.endswith("bias") else "weights"]
            for key, t, kinds in (
                (name, safe_get_full_fp32_param(p), own),
                (f"gradient/{name}", safe_get_full_grad(p), st.DEFAULTS["gradients"]),
            ):
                if t is None:
                    continue
                value = t.detach().float().numpy().copy()
                wanted = [k for k in kinds if k not in ("requires_grad", "delta_l2")]
                out[key] = {k: float(v) for k, v in st.compute(value, wanted).items()}
        refs[str(step)] = out
        engine.step()
    hook.close()
    if rank == 0:
        with open(refs_path, "w") as f:
            json.dump(refs, f)
    torch.distributed.barrier()
    print(f"worker {rank} done", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
    os._exit(0)
