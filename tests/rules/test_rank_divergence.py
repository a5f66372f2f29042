"""rank_divergence and duplicate_batches across workers, on real two-process gloo jobs of a
tiny DistributedDataParallel model recorded with the two lines (include_workers="one"):

- `diverge`: after step 5's optimizer step, rank 1 scales a parameter outside DDP (the
  replicas drift apart; DDP keeps averaging gradients, so they never meet again);
- `no_sampler`: both ranks read the same batches (no DistributedSampler);
- `healthy`: each rank its own shard, every update through DDP;
- `diverge_all`: `diverge` recorded with include_workers="all";
- `diverge_bypass`: from step 5 on, every rank calls `model.module(x)` (the wrapped module, as a
  custom method of it would be called): no gradient is all-reduced, each rank follows its
  shard. The hook is registered on the DDP wrapper, as the two lines say: it records the
  wrapped module's forwards, so the bypassed steps are recorded too.
"""

from __future__ import annotations

from pathlib import Path

import mldbg
from tests.frameworks.test_multi_worker import start_workers
from tests.rules.conftest import assert_explains

ROOT = Path(__file__).resolve().parents[2]
STEPS = 24
WORKER = """
import os, sys
import torch
import torch.distributed as dist
from torch import nn
import mldbg.torch

dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
out, bug, steps, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3)))
hook = mldbg.torch.Hook(out, include_workers=workers)  # "one": the two lines' default
hook.register_module(model)  # the DDP wrapper (see `diverge_bypass` above)
loss_fn = nn.CrossEntropyLoss()
hook.register_loss(loss_fn)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(7)
x = torch.randn(256, 10, generator=g)
y = (x @ torch.randn(10, 3, generator=g)).argmax(1)
shard = torch.arange(256) if bug == "no_sampler" else torch.arange(rank, 256, 2)
order = shard[torch.randperm(len(shard), generator=torch.Generator().manual_seed(1))]
per_epoch = len(order) // 16
for step in range(steps):
    b = step % per_epoch
    idx = order[b * 16 : (b + 1) * 16]
    opt.zero_grad()
    net = model.module if bug == "diverge_bypass" and step >= 5 else model  # DDP bypassed: no all-reduce
    loss_fn(net(x[idx]), y[idx]).backward()
    opt.step()
    if bug in ("diverge", "diverge_all") and rank == 1 and step == 5:
        with torch.no_grad():
            model.module[0].weight.mul_(1.001)  # outside DDP, on one rank only
hook.close()
dist.barrier()
dist.destroy_process_group()
print("worker done", flush=True)
os._exit(0)  # no interpreter finalization: see the end of tests/frameworks/ddp_script.py
"""


def record_jobs(base: Path) -> dict[str, str]:
    """Each job above, recorded under `base`: bug -> run path (the session fixture `ddp_jobs` of
    tests/rules/conftest.py, shared with test_columns.py)."""
    out = {}
    for bug in ("diverge", "no_sampler", "healthy", "diverge_all", "diverge_bypass"):
        path = base / bug
        workers = "all" if bug.endswith("_all") else "one"
        procs = start_workers("-c", WORKER, str(path), bug, str(STEPS), workers, cwd=ROOT)
        for p in procs:
            output, _ = p.communicate(timeout=120)
            assert p.returncode == 0, output
        out[bug] = str(path)
    return out


def test_every_worker_records_its_fingerprints(ddp_jobs):
    """include_workers="one" records worker 0's statistics only, and the fingerprints of all."""
    trial = mldbg.create_trial(ddp_jobs["healthy"])
    assert trial.workers() == ["worker_0", "worker_1"] and trial.loaded_all_steps
    ones = [r for r in trial.records("0.weight") if r.worker == "worker_1"]
    steps = [r.step for r in ones]
    assert steps == [*range(20)] + [s for s in range(20, STEPS) if s % 10 == 0]  # the fingerprint steps
    assert all(set(r.statistics) == {"fingerprint"} for r in ones)
    zeros = {r.step: r for r in trial.records("0.weight") if r.worker == "worker_0"}
    assert all(zeros[r.step].statistics["fingerprint"] == r.statistics["fingerprint"] for r in ones)
    assert "l2" in zeros[0].statistics  # worker 0: the default rules' statistics too
    assert not [r for r in trial.records("CrossEntropyLoss_output_0") if r.worker == "worker_1"]


def test_fires_when_a_rank_drifts(ddp_jobs):
    found = mldbg.check(ddp_jobs["diverge"], rules=["rank_divergence"])
    assert len(found) == 1
    f = found[0]
    assert f.step == 6, f  # rank 1 changed 0.weight after step 5's optimizer step
    assert f.tensors == ["0.weight"] and "worker_0" in f.message and "worker_1" in f.message
    assert_explains(f)


def test_fires_when_ddp_is_bypassed(ddp_jobs):
    found = mldbg.check(ddp_jobs["diverge_bypass"])  # the default set
    assert [f.rule for f in found] == ["rank_divergence"], "\n".join(map(str, found))
    f = found[0]
    assert f.step == 6, f  # step 5 updated without the all-reduce; parameters are read before the update
    assert len(f.tensors) == 4 and "worker_1" in f.message  # every parameter drifts
    assert_explains(f)


def test_fires_when_ranks_read_the_same_batches(ddp_jobs):
    found = mldbg.check(ddp_jobs["no_sampler"], rules=["duplicate_batches"])
    assert len(found) == 1
    f = found[0]
    assert f.step == 1, f  # the same samples on both ranks at steps 0 and 1 (patience 2)
    assert "worker_0 and worker_1" in f.message and "100%" in f.message
    assert "DistributedSampler" in f.suggestion
    assert_explains(f)


def test_quiet_on_the_twins(ddp_jobs):
    assert not mldbg.check(ddp_jobs["no_sampler"], rules=["rank_divergence"])
    assert not mldbg.check(ddp_jobs["diverge"], rules=["duplicate_batches"])
    found = mldbg.check(ddp_jobs["healthy"])  # the whole default set
    assert not found, "\n".join(map(str, found))


def test_each_worker_alone_has_nothing_to_compare(ddp_jobs):
    """Per-worker checking gives each rule one worker: rank_divergence has no pair to compare."""
    assert not mldbg.check(ddp_jobs["diverge"], rules=["rank_divergence"], per_worker=True)


def test_fires_with_every_worker_recording_everything(ddp_jobs):
    """include_workers="all": each worker records the default statistics at its own cadence,
    and the fingerprints at the same fingerprint steps."""
    trial = mldbg.create_trial(ddp_jobs["diverge_all"])
    assert trial.workers() == ["worker_0", "worker_1"]
    assert {r.worker for r in trial.records("CrossEntropyLoss_output_0")} == {"worker_0", "worker_1"}
    found = mldbg.check(ddp_jobs["diverge_all"], rules=["rank_divergence"])
    assert [(f.step, f.tensors) for f in found] == [(6, ["0.weight"])], found
