"""A `torch.compile`d `DistributedDataParallel` model (`torch.compile(DDP(model))`, dynamo's
DDP graph splitting at the gradient buckets) on a real 2-process gloo job: its statistics
steps run eagerly on each worker (`torch_compiled`), so its dead ReLUs are found and the
twin is quiet; each worker's losses are those of the same job without the hook."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import mldbg

SCRIPT = """
import json, os, sys
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
import mldbg.torch

out, bias, hooked, port, rank = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1", sys.argv[4], int(sys.argv[5])
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
with torch.no_grad():
    net[0].bias.fill_(bias)  # -10: every unit dead from step 0
model = torch.compile(nn.parallel.DistributedDataParallel(net), backend="aot_eager")
hook = mldbg.torch.Hook(out) if hooked else None
if hook is not None:
    hook.register_module(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(100 + rank)  # each worker its own data
target = torch.randn(10, 3, generator=torch.Generator().manual_seed(1))
losses = []
for step in range(30):  # statistics every step to 19, then compiled steps
    x = torch.randn(32, 10, generator=g)
    opt.zero_grad()
    loss = F.cross_entropy(model(x), (x @ target).argmax(1))
    loss.backward()
    opt.step()
    losses.append(loss.item())
if hook is not None:
    hook.close()
dist.barrier()
dist.destroy_process_group()
with open(f"{out}.losses{rank}.json", "w") as f:
    json.dump(losses, f)
sys.stdout.flush()
os._exit(0)  # past torch's own teardown: a compiled job's threads can abort it at exit under load
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _job(tmp: Path, out: Path, bias: float, hooked: bool) -> list[list[float]]:
    """Both workers of one job; each worker's losses."""
    script = tmp / "job.py"
    script.write_text(SCRIPT)
    port = str(_free_port())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), str(out), str(bias), "1" if hooked else "0", port, str(rank)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    for w in workers:
        output, _ = w.communicate(timeout=600)
        assert w.returncode == 0, output[-3000:]
    return [json.loads(Path(f"{out}.losses{rank}.json").read_text()) for rank in (0, 1)]


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | list[list[float]]]:
    tmp = tmp_path_factory.mktemp("compiled_ddp")
    out: dict[str, Path | list[list[float]]] = {}
    for name, bias, hooked in (("dead", -10.0, True), ("twin", 0.0, True), ("plain", 0.0, False)):
        out[name] = tmp / name
        out[f"{name}_losses"] = _job(tmp, tmp / name, bias, hooked)
    return out


def test_a_compiled_ddp_models_dead_relus_are_found_on_each_worker(jobs):
    found = [f for f in mldbg.check(str(jobs["dead"])) if f.rule == "dead_relu"]
    assert found and found[0].step <= 5, found
    trial = mldbg.create_trial(str(jobs["dead"]))
    assert trial.workers() == ["worker_0", "worker_1"]
    assert "1_input_0" in trial.collections()["relu_activations"]  # the layer's input, eagerly


def test_the_twin_is_quiet_and_trains_as_without_the_hook(jobs):
    assert [f for f in mldbg.check(str(jobs["twin"])) if f.rule == "dead_relu"] == []
    assert jobs["twin_losses"] == jobs["plain_losses"]  # bit for bit, on each worker
