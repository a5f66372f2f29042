"""duplicate_batches: a loader that serves every batch twice (an IterableDataset read by two
workers without sharding), and the same batch every step (while the evaluation reads more
samples, or with the dataset size given); the twins (a shuffled epoch-based loader,
full-batch training) are quiet."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains
from tests.rules.silent import HEALTHY_SILENT


def test_fires_when_batches_come_back_within_the_epoch(silent_run):
    found = mldbg.check(silent_run("duplicated_loader"), rules=["duplicate_batches"])
    assert len(found) == 1
    f = found[0]
    assert f.step == 2, f  # step 1 repeats step 0's batch, step 2 brings new samples
    assert "within an epoch" in f.message
    assert_explains(f)


def test_the_same_batch_every_step(silent_run):
    """Every training step reads the first batch (32 samples) while the evaluation reads 128:
    caught at the first evaluation; with the dataset size, at once."""
    path = silent_run("same_batch")
    found = mldbg.check(path, rules=["duplicate_batches"])
    assert len(found) == 1 and found[0].step == 11, (
        found
    )  # the first evaluation: 2 batches of 64 after step 9
    assert "same 32 samples" in found[0].message and "next(iter(loader))" in found[0].message
    assert_explains(found[0])
    found = mldbg.check(path, rules=["duplicate_batches:dataset_size=256"])
    assert found[0].step == 1, found
    assert "32 of the 32 samples" in found[0].message and "256" in found[0].message


@pytest.mark.parametrize("name", HEALTHY_SILENT)
def test_quiet_on_the_fixed_twins(name, silent_run):
    """Eight batches per epoch over 30 steps: later epochs repeat every sample, as they should."""
    assert BUILTIN["duplicate_batches"].default
    found = [f for f in mldbg.check(silent_run(name)) if f.rule == "duplicate_batches"]
    assert not found, "\n".join(map(str, found))


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_the_catalogue_runs(name, run):
    """Raw inputs every step."""
    assert not mldbg.check(run(name), rules=["duplicate_batches"])


def test_a_training_set_smaller_than_the_evaluation_reads_as_a_fixed_batch(run):
    """`tiny_train_set` trains on all its 16 samples at every step and evaluates on 256: from
    the inputs alone that is one batch drawn once (the finding says so, and what else it can be)."""
    found = mldbg.check(run("tiny_train_set"), rules=["duplicate_batches"])
    assert len(found) == 1 and "same 16 samples" in found[0].message, found
    assert "Full-batch training on purpose" in found[0].suggestion


@pytest.mark.parametrize("passes", ["sam", "after-the-update", "served-twice"])
def test_two_passes_of_one_optimizer_step_are_not_a_batch_drawn_twice(tmp_path, passes):
    """SAM (Foret et al.): each optimizer step runs forward and backward on its batch twice,
    the weights perturbed between (ASAM, a gradient penalty, R-Drop do the same); the hook
    starts a step at the second forward. The same batch twice in a row with no optimizer step
    between is one step's two passes: quiet. So is a pass after the update that steps no
    optimizer: Sophia's Hessian refresh (every k steps, a forward and backward on the batch
    just trained on, against labels sampled from the model). The loader that serves every
    batch twice, each followed by its own optimizer step, is still caught; both paths agree."""
    import torch
    from torch import nn

    import mldbg.torch
    from mldbg.rules.runner import RuleRunner

    torch.manual_seed(0)
    x, y = torch.randn(256, 8), torch.randint(0, 3, (256,))
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for _ in range(2):  # two epochs of 8 shuffled batches
            for idx in torch.randperm(256).split(32):
                xb, yb = x[idx], y[idx]
                if passes == "sam":
                    loss_fn(model(xb), yb).backward()
                    with torch.no_grad():  # ascend to the worst point nearby (rho 0.05)
                        norm = torch.sqrt(sum((p.grad**2).sum() for p in model.parameters()))
                        eps = [0.05 * p.grad / (norm + 1e-12) for p in model.parameters()]
                        for p, e in zip(model.parameters(), eps, strict=True):
                            p.add_(e)
                    opt.zero_grad()
                    loss_fn(model(xb), yb).backward()
                    with torch.no_grad():
                        for p, e in zip(model.parameters(), eps, strict=True):
                            p.sub_(e)
                    opt.step()
                    opt.zero_grad()
                elif passes == "after-the-update":
                    loss_fn(model(xb), yb).backward()
                    opt.step()
                    opt.zero_grad()
                    logits = model(x[idx])  # the Hessian estimate's pass, on labels the model samples
                    sampled = torch.distributions.Categorical(logits=logits).sample()
                    loss_fn(logits, sampled).backward()
                    opt.zero_grad()  # (Sophia keeps the squared gradients as its Hessian estimate)
                else:
                    for _ in range(2):  # a loader collates each serving into a new tensor
                        opt.zero_grad()
                        loss_fn(model(x[idx]), y[idx]).backward()
                        opt.step()
    found = mldbg.check(str(tmp_path / "run"), rules=["duplicate_batches"])
    assert bool(found) == (passes == "served-twice"), [str(f) for f in found]
    runner = RuleRunner(mldbg.create_trial(str(tmp_path / "run")), ["duplicate_batches"], columns=False)
    assert [f.step for f in runner.run_available() + runner.finish()] == [f.step for f in found]


def _scored_pool_training(path: str, served: str) -> None:
    """IMLE's shape (Li & Malik): every 5 steps the model scores a pool of 512 fresh latent
    candidates under `torch.no_grad()` (in training mode), and trains on the 64 it picks, with
    a new target, for the next steps. `served`: "reused" trains the 5 steps on the very same
    tensor (the healthy script); "loader-twice" takes 2 steps on each pick, the second on a
    copy (the bug: a loader that serves every batch twice collates a new tensor each time)."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    every = 5 if served == "reused" else 2
    with mldbg.torch.Hook(path, statistics_every=1) as hook:
        hook.register_module(model)
        for step in range(40):
            if step % every == 0:
                pool = torch.randn(512, 4)
                with torch.no_grad():  # score the candidates: no batch of the step
                    picked = model(pool).norm(dim=1).topk(64).indices
                z, target = pool[picked], torch.randn(64, 2)
            batch = z if served == "reused" or step % every == 0 else z.clone()
            loss = ((model(batch) - target) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


@pytest.mark.parametrize("served", ["reused", "loader-twice"])
def test_a_no_grad_candidate_pool_and_a_batch_trained_on_again_are_not_batches_drawn_again(tmp_path, served):
    """The batch of a step is the one its loss is backpropagated through: the hook records a
    model's inputs at its first forward with gradients, not the candidate pool it scored under
    no_grad before (the old hook recorded the pool, so the picked batch read as 64 repeats of
    it, and the next pool as new samples: "samples recur within an epoch"). A batch trained
    on again as the very same tensor is not drawn again (quiet); a loader serving each batch
    twice, a new tensor each time, is caught as before. Both paths agree."""
    from mldbg.rules.runner import RuleRunner
    from mldbg.rules.view import TrialView

    path = str(tmp_path / "run")
    _scored_pool_training(path, served)
    view = TrialView(mldbg.create_trial(path))
    assert (
        len(view.statistic("model_input_0", 0, "sample_fingerprints")) == 64
    )  # the picked batch, not the pool
    found = mldbg.check(path, rules=["duplicate_batches"])
    assert bool(found) == (served == "loader-twice"), [str(f) for f in found]
    if found:
        assert "within an epoch" in found[0].message
    runner = RuleRunner(mldbg.create_trial(path), ["duplicate_batches"], columns=False)
    assert [f.step for f in runner.run_available() + runner.finish()] == [f.step for f in found]


def test_a_step_with_only_no_grad_forwards_records_their_inputs(tmp_path):
    """A TRAIN step whose forwards all run without gradients (a check in training mode after
    the update) records its first forward's inputs and outputs at the step's end, as before."""
    import torch
    from torch import nn

    import mldbg.torch
    from mldbg.rules.view import TrialView

    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with mldbg.torch.Hook(str(tmp_path / "run"), statistics_every=1) as hook:
        hook.register_module(model)
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(16, 4)).pow(2).mean().backward()
            opt.step()
        with torch.no_grad():
            model(torch.randn(8, 4))
    view = TrialView(mldbg.create_trial(str(tmp_path / "run")))
    last = max(view.trial.steps())
    assert len(view.statistic("model_input_0", last, "sample_fingerprints")) == 8
    assert view.statistic("model_output_0", last, "mean") is not None


def test_evolution_strategies_evaluate_one_batch_many_times_and_are_quiet(tmp_path):
    """OpenAI-style evolution strategies (blind6): each iteration scores antithetic perturbations
    of the weights on one batch under `torch.no_grad()`, hands the estimated gradient to Adam
    through `.grad`, and scores the update on the same batch again; no backward. The hook's
    TRAIN step (an optimizer step) records a batch no gradient came from (`no_grad_input/model`):
    the next step opens with the last one's batch again, then a new one, which read as samples
    recurring within an epoch before."""
    import torch
    from torch import nn

    import mldbg.torch

    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    policy = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))
    params = list(policy.parameters())
    opt = torch.optim.Adam(params, lr=0.03)
    hook = mldbg.torch.Hook(str(tmp_path))
    hook.register_module(policy)

    def score(batch: torch.Tensor) -> float:
        with torch.no_grad():
            return -policy(batch.clone()).pow(2).mean().item()

    for _ in range(12):
        batch = torch.randn(8, 6, generator=g)
        flat = nn.utils.parameters_to_vector(params).detach()
        eps = torch.randn(4, flat.numel(), generator=g)
        returns = []
        for k in range(8):
            nn.utils.vector_to_parameters(flat + 0.1 * (eps[k // 2] if k % 2 == 0 else -eps[k // 2]), params)
            returns.append(score(batch))
        r = torch.tensor(returns)
        grad = ((r[0::2] - r[1::2])[:, None] * eps).sum(0) / (8 * 0.1)
        nn.utils.vector_to_parameters(flat, params)
        opt.zero_grad()
        offset = 0
        for p in params:
            p.grad = -grad[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
        opt.step()
        score(batch)  # the update scored on the same batch
    hook.close()
    trial = mldbg.create_trial(str(tmp_path))
    assert any(n.startswith("no_grad_input/") for n in trial.tensor_names()), trial.tensor_names()
    assert mldbg.check(str(tmp_path), rules=["duplicate_batches"]) == []
