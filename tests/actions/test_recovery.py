"""SkipBatch and Rollback with `mldbg.torch.Guard` on a real tiny training (an MLP on four
overlapping Gaussian classes, SGD momentum 0.9): one batch with NaN inputs, or one with its
inputs x1000, ruins the run without the guard (NaN weights; a dead network at chance,
loss ln 4); with it the run goes on with a finite loss and ends near its healthy twin."""

from __future__ import annotations

import math
import time

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from action_helpers import finding
from torch import nn

import mldbg
import mldbg.torch
from mldbg.actions import Context, Rollback, SkipBatch, resolve_actions
from mldbg.actions.recovery import RecoveryRequest, read_request
from mldbg.errors import InvalidConfig
from mldbg.store import layout, open_store

CORRUPT_AT = 40


def train(
    steps: int = 100,
    corrupt: str | None = None,
    guard: dict | None = None,
    path=None,
    hook_kwargs: dict | None = None,
    requests: dict | None = None,
) -> tuple[float, mldbg.torch.Guard | None]:
    """Train; `corrupt`: "nan" or "x1000" inputs at CORRUPT_AT. `guard`: Guard keywords (None:
    plain optimizer.step()). `requests`: {step: action} run on a finding of CORRUPT_AT just
    before that step (as a watcher would, some steps late). Returns the loss on a held-out
    set after `steps` updates were applied (skipped and rolled-back ones are made up), and
    the guard."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    centers = torch.randn(4, 20, generator=g) * 0.4

    def batch(n: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, 4, (n,), generator=g)
        return centers[y] + torch.randn(n, 20, generator=g), y

    x_test, y_test = batch(512)
    net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    hook = mldbg.torch.Hook(str(path), **(hook_kwargs or {})) if path is not None else None
    loss_fn = nn.CrossEntropyLoss()
    if hook is not None:
        hook.register_module(net)
        hook.register_loss(loss_fn)
    g_ = mldbg.torch.Guard(net, opt, hook=hook, **guard) if guard is not None else None
    applied, step, started = 0, 0, time.monotonic()
    try:
        while applied < steps or (hook_kwargs and g_ is not None and not g_.rollbacks):
            x, y = batch()
            if step == CORRUPT_AT and corrupt is not None:
                x = x * (float("nan") if corrupt == "nan" else 1000.0)
            if requests and step in requests:
                requests[step](
                    [finding("loss_spike", step=CORRUPT_AT)], Context(run=str(path), store=hook.session.store)
                )
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            if g_ is None:
                opt.step()
                applied += 1
            else:
                before = len(g_.rollbacks)
                applied += g_.step(loss)
                if len(g_.rollbacks) > before:  # the updates since the restored state are gone
                    applied = g_.rollbacks[-1][1]
                if step > CORRUPT_AT and hook_kwargs and not g_.rollbacks:
                    time.sleep(0.05)  # a real step takes time: the watcher reads a few steps behind
                    assert time.monotonic() - started < 60, "the watcher's request never came"
            step += 1
    finally:
        if hook is not None:
            hook.close()
    with torch.no_grad():
        return F.cross_entropy(net(x_test), y_test).item(), g_


@pytest.fixture(scope="module")
def healthy():
    return train()[0]


def test_a_nan_batch_ruins_the_run_without_a_guard(healthy):
    assert 0.5 < healthy < 0.9
    assert math.isnan(train(corrupt="nan")[0])
    assert train(corrupt="x1000")[0] > 1.3  # a dead network: ln 4 = 1.386


def test_guard_skips_a_nan_batch(healthy):
    loss, guard = train(corrupt="nan", guard={"every": 10})
    assert guard.skipped == [CORRUPT_AT] and not guard.rollbacks
    assert abs(loss - healthy) < 0.05


def test_guard_rolls_back_after_max_skips(tmp_path):
    """NaN weights make every later step non-finite: after max_skips skips, the guard goes
    back to the last good state (and halves the learning rate)."""
    torch.manual_seed(0)
    net = nn.Linear(4, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    guard = mldbg.torch.Guard(net, opt, every=5, max_skips=3)
    good = None
    for step in range(12):
        if step == 5:
            good = {k: v.clone() for k, v in net.state_dict().items()}
        if step == 7:
            with torch.no_grad():
                net.weight[0, 0] = float("nan")  # the weights themselves are broken
        opt.zero_grad()
        loss = net(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        guard.step(loss)
    assert guard.skipped[:3] == [7, 8, 9]
    assert [r[:2] for r in guard.rollbacks] == [(9, 5)]
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05) and guard.lr_scale == 0.5
    assert torch.isfinite(net.weight).all()
    assert good is not None and not torch.equal(net.weight, good["weight"])  # trained on after it


def test_rollback_from_the_hooks_own_watcher(tmp_path, healthy):
    """The whole path: loss_spike runs in the hook's watcher, Rollback writes the request,
    the guard restores the state before the corrupted step."""
    loss, guard = train(
        corrupt="x1000",
        # a loaded machine's watcher may answer many steps late: keep every state since the spike
        guard={"every": 10, "keep": 200},
        path=tmp_path / "run",
        hook_kwargs={"rules": ["loss_spike"], "actions": [Rollback(lr_factor=1.0)]},
    )
    assert guard.rollbacks, "no rollback"
    at, back_to, why = guard.rollbacks[0]
    assert back_to == CORRUPT_AT and at > CORRUPT_AT and "loss_spike" in why
    assert abs(loss - healthy) < 0.1
    found = mldbg.check(str(tmp_path / "run"), rules=["loss_spike"])
    assert [f.step for f in found] == [CORRUPT_AT]  # the recorded run shows the spike, and no other


def test_skip_batch_of_an_applied_step_rolls_back_with_the_same_lr(tmp_path, healthy):
    loss, guard = train(
        corrupt="x1000", guard={"every": 10}, path=tmp_path / "run", requests={CORRUPT_AT + 7: SkipBatch()}
    )
    assert [r[:2] for r in guard.rollbacks] == [(CORRUPT_AT + 7, CORRUPT_AT)]
    assert guard.lr_scale == 1.0 and abs(loss - healthy) < 0.1


def test_skip_batch_of_a_step_not_applied_yet(tmp_path, healthy):
    """A finding that arrives before its step's update (a guard given the verdict in time):
    only that update is dropped."""
    loss, guard = train(
        corrupt="x1000", guard={"every": 10}, path=tmp_path / "run", requests={CORRUPT_AT: SkipBatch()}
    )
    assert guard.skipped == [CORRUPT_AT] and not guard.rollbacks
    assert abs(loss - healthy) < 0.05


def test_rollback_lowers_the_learning_rate(tmp_path):
    _, guard = train(corrupt="x1000", guard={"every": 10}, path=tmp_path / "run", requests={45: Rollback()})
    assert [r[:2] for r in guard.rollbacks] == [(45, CORRUPT_AT)]
    assert guard.lr_scale == 0.5 and guard.optimizer.param_groups[0]["lr"] == pytest.approx(0.05)


def test_request_on_disk_and_stale_requests(tmp_path):
    store = open_store(tmp_path / "run")
    context = Context(run=str(tmp_path / "run"), store=store)
    assert Rollback(lr_factor=0.25)([finding(step=7)], context) == 1
    request = read_request(store)
    assert isinstance(request, RecoveryRequest)
    assert (request.kind, request.step, request.rule, request.lr_factor) == (
        "rollback",
        7,
        "exploding_tensor",
        0.25,
    )
    # a request left by an earlier run is not for a guard started after it
    net = nn.Linear(2, 1)
    guard = mldbg.torch.Guard(net, torch.optim.SGD(net.parameters(), lr=0.1), out_dir=str(tmp_path / "run"))
    net(torch.randn(3, 2)).sum().backward()
    assert guard.step() and not guard.rollbacks
    store.write(layout.RECOVERY_REQUEST, [b"{not json"])
    net(torch.randn(3, 2)).sum().backward()
    assert guard.step()  # a damaged request is logged, never stops the training


def test_actions_by_name_and_settings():
    rollback, skip = resolve_actions([{"type": "rollback", "lr_factor": 0.5}, "skip"])
    assert isinstance(rollback, Rollback) and rollback.lr_factor == 0.5
    assert isinstance(skip, SkipBatch)
    with pytest.raises(InvalidConfig, match="lr_factor"):
        Rollback(lr_factor=2)
    net = nn.Linear(2, 1)
    with pytest.raises(InvalidConfig, match="every"):
        mldbg.torch.Guard(net, torch.optim.SGD(net.parameters(), lr=0.1), every=0)


def test_early_warning_and_rollback_keep_the_diverging_lm_training(tmp_path, caplog):
    """The tiny GPT of tests/rules/diverging_lm.py diverges on its own (at step 158 on one
    machine, NaN by 165). With loss_change_point in the hook's watcher and Rollback(lr_factor=0.5), the guard
    goes back to a state from before the warning and halves the learning rate: the run trains
    to the end with the loss of its stable twin. 20-30 s: 220 steps of a transformer, paced at
    0.5 s a step from step 140 (before the climb on any machine) until the rollback, so that
    the watcher keeps up as it would with a real model: the guard's own NaN rollback comes
    6 steps after the warning, 3 s for the watcher on a loaded machine."""
    from tests.rules.diverging_lm import diverged_at, train_lm

    hook = {"rules": ["loss_change_point"], "actions": [Rollback(lr_factor=0.5)], "flush_seconds": 0.05}
    with caplog.at_level("WARNING", logger="mldbg"):
        losses = train_lm(
            tmp_path / "run",
            steps=220,
            hook_kwargs=hook,
            guard={"every": 25},
            step_seconds=0.5,
            paced_from=140,
        )
    rolled = [r.getMessage() for r in caplog.records if "rolled back" in r.getMessage()]
    assert rolled and "loss_change_point" in rolled[0], rolled  # the warning's request, not the NaN guard
    assert len(losses) == 220 and all(math.isfinite(v) for v in losses[-40:])
    assert max(losses[-40:]) < 3.2  # the stable twins end near 2.8
    # checked offline, the warning stands though the loss came back: the rollback brought it
    # back, not the run (`losses.rescued`)
    found = mldbg.check(str(tmp_path / "run"), rules=["loss_change_point"])
    # the warning came while this run was still sound, or within 3 steps of its loss doubling
    # (where it diverges, and how abruptly, moves with another CPU's kernels: 160 against 158
    # on an AVX-512 machine; no step of one machine is pinned here)
    assert found and diverged_at(losses[: found[0].step - 2]) is None, (found[0].step, diverged_at(losses))
