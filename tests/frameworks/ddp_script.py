"""One worker of a 2-process gloo job: `python ddp_script.py OUT INCLUDE_WORKERS [stop|overwrite|resume]`
with RANK set. `overwrite`, `resume`: the hook's keywords. With `stop` it trains until mldbg stops it, worker 0 a little slower than worker 1
(so that a stop request often lands between the two workers' step ends)."""

import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

import mldbg
from mldbg.torch import Hook


def main(out_dir: str, include_workers: str, stop: bool, **claim: bool) -> None:
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
    hook = Hook(
        out_dir,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_workers=include_workers,
        include_collections=["weights", "gradients", "losses", "inputs"],
        **claim,
    )
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)  # each worker its own data
    try:
        for _ in range(2000 if stop else 4):
            x, y = torch.randn(4, 4, generator=g), torch.randint(0, 2, (4,), generator=g)
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            if stop and rank == 0:
                time.sleep(0.02)  # worker 1 ends each step first and waits in the next all-reduce
            opt.step()
    except mldbg.TrainingStopped as e:
        print(f"stopped after step {hook.recorder.step - 1}: {e}", flush=True)
    hook.close()
    dist.barrier()
    dist.destroy_process_group()
    print("worker done", flush=True)
    # main returns: its DDP model is freed, and with it the process group (its gloo threads
    # joined), before interpreter finalization. That free hung for ever in about one job of 60
    # (one run of test_multi_worker.py in 4 to 9) on a loaded machine, until the hook kept the
    # group for after the model's Reducer (mldbg/frameworks/torch_ddp.py explains it).


if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    flags = sys.argv[3:]
    main(
        sys.argv[1],
        sys.argv[2],
        stop="stop" in flags,
        overwrite="overwrite" in flags,
        resume="resume" in flags,
    )
    # This script ends normally. The job scripts of other tests that keep their DDP model at
    # module level leave with os._exit(0) after their last line: their process group lives on
    # into interpreter finalization. PyTorch 2.13 (`_engine_run_backward`) stashes a Python
    # object (a contextvars.Context) in thread-local state during backward; the gloo
    # all-reduces that DDP starts there copy it, and a later barrier keeps a weak reference to
    # one still in flight. When a gloo worker thread frees that barrier after the interpreter
    # began finalizing, the decref must take the GIL, CPython 3.11 ends the thread with
    # pthread_exit inside a noexcept destructor, and the worker aborts with "terminate called
    # without an active exception" (about 1 job in 60, with or without mldbg).
