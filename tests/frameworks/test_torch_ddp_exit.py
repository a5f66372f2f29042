"""A DDP model freed as a training function returns must not destroy its process group from
the Reducer's destructor, which holds the GIL while it joins the gloo threads (a worker hung
there for ever when a gloo thread still needed the GIL: mldbg/frameworks/torch_ddp.py).

On a real 2-process gloo job, a DDP model is freed as `main` returns, after
`destroy_process_group`, as ddp_script.py does. The group says, as its Python object goes,
whether the model's Reducer was still alive: alive means that the Reducer dropped the group's
last reference (the shape of the hang: a model mldbg does not hold), gone that the group
ended from its own Python object, whose destructor releases the GIL first (a model the hook
records)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.frameworks.test_multi_worker import start_workers

ROOT = Path(__file__).resolve().parents[2]
WORKER = """
import sys, time, weakref
import torch
import torch.distributed as dist
from torch import nn
import mldbg.torch

seen = []


def main(out, registered):
    dist.init_process_group("gloo", init_method="env://")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))
    reducer = weakref.ref(model.reducer)
    weakref.finalize(model.process_group, lambda: seen.append(reducer() is not None))
    hook = mldbg.torch.Hook(out)
    if registered:
        hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(8, 4)).sum().backward()
        opt.step()
    hook.close()
    dist.destroy_process_group()
    # no barrier, and a pause: the gloo threads are idle when the model goes (the unregistered
    # case is the shape of the hang and would hang as often as ddp_script.py did)
    time.sleep(0.2)


main(sys.argv[1], sys.argv[2] == "registered")
print("reducer alive as the group went:", seen, flush=True)  # [] while the group lives
print("worker done", flush=True)
"""


@pytest.mark.parametrize("registered", [True, False])
def test_the_group_of_a_hooked_ddp_model_outlives_its_reducer(tmp_path, registered):
    """Not registered, the Reducer drops the group's last reference (PyTorch 2.13): the test
    keeps that case to show the shape of the hang that registering guards against."""
    argv = (str(tmp_path / "run"), "registered" if registered else "bare")
    for p in start_workers("-c", WORKER, *argv, cwd=ROOT):
        output, _ = p.communicate(timeout=120)
        assert p.returncode == 0 and "worker done" in output, output
        assert f"reducer alive as the group went: [{not registered}]" in output, output
