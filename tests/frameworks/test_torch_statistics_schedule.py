"""The same script records statistics at the same steps on a quiet machine and a busy one
(issue 26, item 6): the two-line PyTorch hook chooses its statistics steps from the step
numbers (`Cadence`), never from timing.

A seeded BPTT language model (an LSTM whose hidden state runs on across batches, detached at
each window, with an evaluation every 40 steps), recorded twice: once as it is, once with
the machine made busy for the whole run (a thread multiplying matrices without a pause) and
a slow step function injected into the loop (a data-loader stall of 20 ms every 9th step,
and a stretch of steps 3 ms dearer). The cadence measured as it ran (before this change)
chose different steps for the two (one pair of runs on a 2-core VM): 119 quiet and 102 busy with the defaults, 90 and 119 with
`statistics_budget=0.05`. These runs must give the same statistics steps, and the ones
`Cadence.steps` names before the run."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch import nn

import mldbg
import mldbg.torch
from mldbg import Mode
from mldbg.frameworks.torch_defaults import BUDGET, WARMUP, Cadence

VOCAB, BATCH, WINDOW = 60, 8, 16
TRAIN_STEPS, EVAL_EVERY, EVAL_BATCHES = 130, 40, 3


class BPTTLanguageModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.decoder = nn.Linear(32, VOCAB)

    def forward(
        self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        h, state = self.lstm(self.embed(x), state)
        return self.decoder(h), state


def _stream(g: torch.Generator, n: int) -> torch.Tensor:
    """A token stream (BATCH, n): the next token is the previous one + 1 half of the time."""
    seq = torch.randint(0, VOCAB, (BATCH, n), generator=g)
    follow = torch.rand(BATCH, n, generator=g) < 0.5
    for t in range(1, n):
        seq[:, t] = torch.where(follow[:, t], (seq[:, t - 1] + 1) % VOCAB, seq[:, t])
    return seq


def _train(path: str, hook_kwargs: dict[str, object], stall: Callable[[int], None]) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # PyTorch's thread pool and a busy core: seconds a step, not ms
    try:
        _train_lm(path, hook_kwargs, stall)
    finally:
        torch.set_num_threads(threads)


def _train_lm(path: str, hook_kwargs: dict[str, object], stall: Callable[[int], None]) -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    train, held_out = _stream(g, 40 * WINDOW + 1), _stream(g, EVAL_BATCHES * WINDOW + 1)
    net = BPTTLanguageModel()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    with mldbg.torch.Hook(path, **hook_kwargs) as hook:  # type: ignore[arg-type]
        hook.register_module(net)
        hook.register_loss(loss_fn)
        state = None
        for step in range(TRAIN_STEPS):
            i = (step * WINDOW) % (train.shape[1] - 1)
            if i == 0:
                state = None  # the stream starts over
            x, y = train[:, i : i + WINDOW], train[:, i + 1 : i + 1 + WINDOW]
            stall(step)
            net.train()
            opt.zero_grad()
            logits, state = net(x, state)
            state = (state[0].detach(), state[1].detach())  # truncated backpropagation through time
            loss = loss_fn(logits.reshape(-1, VOCAB), y.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            if (step + 1) % EVAL_EVERY == 0:
                net.eval()
                with torch.no_grad():
                    held = None
                    for b in range(EVAL_BATCHES):
                        j = b * WINDOW
                        logits, held = net(held_out[:, j : j + WINDOW], held)
                        loss_fn(logits.reshape(-1, VOCAB), held_out[:, j + 1 : j + 1 + WINDOW].reshape(-1))


def _statistics_steps(path: str) -> dict[Mode, list[int]]:
    """The mode steps at which any tensor carries statistics, per mode."""
    trial = mldbg.create_trial(path)
    steps: dict[Mode, set[int]] = {}
    for name in trial.tensor_names():
        for s in trial.tensor(name).steps():
            if trial.record(name, s).statistics:
                steps.setdefault(trial.mode(s), set()).add(trial.mode_step(s))
    return {mode: sorted(found) for mode, found in steps.items()}


def _quiet(step: int) -> None:
    return


def _slow(step: int) -> None:
    if step % 9 == 4:
        time.sleep(0.02)  # a data-loader stall
    elif 50 <= step < 80:
        time.sleep(0.003)  # a dearer stretch of steps


@pytest.mark.parametrize(
    "hook_kwargs",
    [{}, {"statistics_budget": 0.05}],
    ids=["two-lines", "budget-5%"],
)
def test_a_busy_machine_records_statistics_at_the_same_steps(tmp_path, hook_kwargs) -> None:
    quiet = str(tmp_path / "quiet")
    _train(quiet, hook_kwargs, _quiet)

    busy = str(tmp_path / "busy")
    done = threading.Event()

    def spin() -> None:  # another job's arithmetic on the machine (NumPy lets go of the GIL)
        a = np.random.default_rng(0).standard_normal((192, 192))
        while not done.is_set():
            a = np.tanh(a @ a)

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        _train(busy, hook_kwargs, _slow)
    finally:
        done.set()
        spinner.join(timeout=10)

    got_quiet, got_busy = _statistics_steps(quiet), _statistics_steps(busy)
    assert got_busy == got_quiet
    # so the rules read the same values at the same steps and say the same (before, the quiet
    # run with the 5% budget got a `duplicate_batches` finding and the busy one none)
    findings = [sorted((f.rule, f.step) for f in mldbg.check(path)) for path in (quiet, busy)]
    assert findings[0] == findings[1]
    # and they are the ones the schedule names before the run, spaced after the warmup
    cadence = Cadence(float(hook_kwargs.get("statistics_budget", BUDGET)))  # type: ignore[arg-type]
    # (the first training steps after each evaluation pass too: a function of the mode sequence)
    switches = list(range(EVAL_EVERY, TRAIN_STEPS, EVAL_EVERY))
    assert got_quiet[Mode.TRAIN] == cadence.steps(TRAIN_STEPS, switches=switches)
    assert set(got_quiet[Mode.TRAIN]) >= {EVAL_EVERY, EVAL_EVERY + 1}  # after the first pass
    assert len(got_quiet[Mode.TRAIN]) < TRAIN_STEPS // 2
    assert got_quiet[Mode.EVAL] == list(range(EVAL_BATCHES * (TRAIN_STEPS // EVAL_EVERY)))  # its warmup
    assert got_quiet[Mode.TRAIN][: WARMUP + 1] == list(range(WARMUP + 1))


def test_bursts_follow_the_mode_sequence_alone() -> None:
    """The first steps of a mode entered again, and the steps after an alert, are statistics
    steps; at most one burst of each kind per mode every k steps; the same calls give the
    same steps."""

    def run() -> list[tuple[str, int]]:
        cadence = Cadence(every=10, warmup=3, after_switch=2)
        got = []
        train = evals = 0
        for block in range(6):
            for _ in range(7):
                if cadence.due(Mode.TRAIN, train):
                    got.append(("train", train))
                train += 1
            for _ in range(2):
                if cadence.due(Mode.EVAL, evals):
                    got.append(("eval", evals))
                if block == 3:
                    cadence.alert(Mode.EVAL, evals)
                evals += 1
        return got

    got = run()
    assert got == run()
    train = [s for kind, s in got if kind == "train"]
    # warmup 0-2, the grid 3, 13, 23, 33; bursts at the re-entries 7 (7, 8), then >= 10 later: 21 (21, 22), 35
    assert train == [0, 1, 2, 3, 7, 8, 13, 21, 22, 23, 33, 35, 36]
    assert Cadence(every=10, warmup=3, after_switch=2).steps(42, switches=[7, 14, 21, 28, 35]) == train
    evals = [s for kind, s in got if kind == "eval"]
    # warmup 0-2 (and a re-entry burst at 0), grid 3, the alert at eval step 6 -> 7, 8 (the one
    # at 7 is within k of it), the next re-entry burst 10 steps after the first: 10, 11
    assert evals == [0, 1, 2, 3, 7, 8, 10, 11]


def test_peek_says_what_due_will_say() -> None:
    """`Cadence.peek` (asked before a trainer's optimizer step opens, for a compiled model:
    `torch_compiled`) answers as the `due` asked next, bursts and alerts included, and
    changes nothing."""
    cadence = Cadence(every=10, warmup=3, after_switch=2)
    train = evals = 0
    for block in range(6):
        for _ in range(7):
            told = cadence.peek(Mode.TRAIN, train)
            assert cadence.peek(Mode.TRAIN, train) == told  # nothing changed
            assert cadence.due(Mode.TRAIN, train) == told, (block, train)
            train += 1
        for _ in range(2):
            cadence.due(Mode.EVAL, evals)
            if block == 3:
                cadence.alert(Mode.TRAIN, train - 1)
            evals += 1
