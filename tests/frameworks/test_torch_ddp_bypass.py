"""A hook registered on a `DistributedDataParallel` wrapper records the forwards that bypass it
(`model.module(x)`: a custom method of the wrapped module, an evaluation, or the bug of
training without the gradients' all-reduce), on a real one-process gloo job."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

import mldbg

SCRIPT = """
import os, sys
import torch
import torch.distributed as dist
from torch import nn
import mldbg.torch

out, port = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3)))
hook = mldbg.torch.Hook(out)
hook.register_module(model)
if sys.argv[3] == "again":
    hook.register_module(model.module)  # the same model: nothing more
loss_fn = nn.CrossEntropyLoss()
hook.register_loss(loss_fn)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(7)
x, y = torch.randn(64, 10, generator=g), torch.randint(0, 3, (64,), generator=g)
for step in range(12):
    net = model if step < 4 else model.module  # from step 4 on the wrapper is bypassed
    opt.zero_grad()
    loss_fn(net(x[step % 4 * 16 : step % 4 * 16 + 16]), y[:16]).backward()
    opt.step()
model.eval()
with torch.no_grad():
    model.module(x[:16])  # an evaluation through the wrapped module: one EVAL step
hook.close()
dist.destroy_process_group()
print("done", flush=True)
os._exit(0)  # no interpreter finalization: see the end of tests/frameworks/ddp_script.py
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("register", ["wrapper", "again"])
def test_forwards_that_bypass_the_ddp_wrapper_are_recorded(tmp_path, register):
    """`again`: the wrapped module registered after its wrapper is the same model."""
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(script), str(out), str(_free_port()), register],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "done" in done.stdout, done.stdout + done.stderr
    trial = mldbg.create_trial(str(out))
    assert trial.steps(mode=mldbg.Mode.TRAIN) == list(range(12))  # the bypassed steps too
    assert len(trial.steps(mode=mldbg.Mode.EVAL)) == 1
    loss = trial.tensor("CrossEntropyLoss_output_0")
    assert loss.steps(mode=mldbg.Mode.TRAIN) == list(range(12))
    # the statistics of every warmup step (all 12 here), bypassed or not, under the model's own names
    grads = trial.tensor("gradient/0.weight")
    assert grads.steps(mode=mldbg.Mode.TRAIN) == list(range(12))
    names = trial.tensor_names()
    assert "2.weight" in names
    assert not [n for n in names if "Sequential" in n]  # registering the wrapped module again: one model
