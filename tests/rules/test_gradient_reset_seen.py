"""gradient_not_reset from what the PyTorch hook sees: at each update, was `.grad` reset (None
or zero) when the backward began? Every healthy way to reset (set_to_none, zeros, before the
forward or after it, micro-batch accumulation, a GAN whose generator's backward reaches the
discriminator, a hand-written SGD loop) records 1 and stays quiet; a missing `zero_grad()` and
one called every other step are found within 8 updates, however the gradients are clipped."""

from __future__ import annotations

import io
import pickle

import pytest
import torch
from torch import nn

import mldbg
from mldbg.torch import Hook
from tests.rules.conftest import assert_explains, fired


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))


def _batches(g: torch.Generator, n: int = 40):
    w = torch.randn(8, 3, generator=g)
    for _ in range(n):
        x = torch.randn(32, 8, generator=g)
        yield x, (x @ w).argmax(1)


def _train(path, how: str, steps: int = 40) -> str:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = _mlp()
    hook = Hook(str(path))
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    if how == "manual":
        for x, y in _batches(g, steps):
            model.zero_grad()
            loss_fn(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-0.5)
        hook.close()
        return str(path)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for i, (x, y) in enumerate(_batches(g, steps)):
        if how == "before_forward":
            opt.zero_grad()
        if how == "accumulate4":
            for xs, ys in zip(x.chunk(4), y.chunk(4), strict=True):
                (loss_fn(model(xs), ys) / 4).backward()
        else:
            loss = loss_fn(model(x), y)
            if how == "zeros_after_forward":
                opt.zero_grad(set_to_none=False)
            if how == "every_other" and i % 2 == 0:
                opt.zero_grad()
            # "never": no zero_grad() anywhere
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        if how in ("after_step", "accumulate4"):
            opt.zero_grad()
    hook.close()
    return str(path)


def _flags(path: str) -> list[int]:
    trial = mldbg.create_trial(path)
    (name,) = trial.tensor_names(regex="^gradient_reset/")
    t = trial.tensor(name)
    return [int(t.reduction_value(s, "sum")) for s in t.steps()]


@pytest.mark.parametrize(
    "how", ["before_forward", "zeros_after_forward", "after_step", "accumulate4", "manual"]
)
def test_every_way_to_reset_is_seen_and_quiet(tmp_path, how):
    path = _train(tmp_path / how, how)
    flags = _flags(path)
    assert len(flags) >= 20 and set(flags) == {1}, flags
    assert not mldbg.check(path, rules=["gradient_not_reset"])


@pytest.mark.parametrize(("how", "by"), [("never", 5), ("every_other", 8)])
def test_gradients_not_reset_are_found(tmp_path, how, by):
    path = _train(tmp_path / how, how)
    flags = _flags(path)
    assert flags[0] == 1 and 0 in flags[1:9]
    found = mldbg.check(path, rules=["gradient_not_reset"])
    assert fired(found)["gradient_not_reset"] <= by, [str(f) for f in found]
    assert "not been reset" in found[0].message and "gradient/0.weight" in found[0].tensors
    assert_explains(found[0])
    # the same on the reference path (every step through check())
    runner = mldbg.rules.runner.RuleRunner(mldbg.create_trial(path), ["gradient_not_reset"], columns=False)
    assert [f.step for f in runner.run_available() + runner.finish()][:1] == [found[0].step]


def test_a_hand_written_sgd_loop_without_zero_grad(tmp_path):
    """No optimizer: each backward is an update (`p.data.add_`), clipped at 0.25."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = _mlp()
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    for x, y in _batches(g, 20):
        nn.functional.cross_entropy(model(x), y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-0.5)
    hook.close()
    assert fired(mldbg.check(str(tmp_path), rules=["gradient_not_reset"]))["gradient_not_reset"] <= 5


def test_a_gan_whose_generator_backward_reaches_the_discriminator(tmp_path):
    """DCGAN's loop: the generator's loss flows back through the discriminator into its
    `.grad` after the discriminator's update; `netD.zero_grad()` clears it before the next."""
    torch.manual_seed(0)
    g_net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    d_net = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    hook = Hook(str(tmp_path))
    hook.register_module(g_net, name="generator")
    hook.register_module(d_net, name="discriminator")
    opt_g = torch.optim.Adam(g_net.parameters(), lr=1e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d_net.parameters(), lr=1e-3, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    for _ in range(30):
        real = torch.randn(32, 2) * 0.5 + 2
        fake = g_net(torch.randn(32, 4))
        d_net.zero_grad()
        bce(d_net(real), torch.ones(32, 1)).backward()
        bce(d_net(fake.detach()), torch.zeros(32, 1)).backward()
        opt_d.step()
        g_net.zero_grad()
        bce(d_net(fake), torch.ones(32, 1)).backward()  # into d_net's .grad too
        opt_g.step()
    hook.close()
    trial = mldbg.create_trial(str(tmp_path))
    names = trial.tensor_names(regex="^gradient_reset/")
    assert sorted(names) == ["gradient_reset/discriminator", "gradient_reset/generator"]
    for name in names:
        t = trial.tensor(name)
        assert {int(t.reduction_value(s, "sum")) for s in t.steps()} == {1}, name
    assert not mldbg.check(str(tmp_path), rules=["gradient_not_reset"])


def test_the_hooked_model_still_copies_pickles_and_saves(tmp_path):
    import copy

    model = _mlp()
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
    copy.deepcopy(model)
    pickle.loads(pickle.dumps(model))
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    torch.load(buf, weights_only=True)
    hook.close()


@pytest.mark.parametrize("reset", [True, False])
def test_a_packed_rnn_first_layer(tmp_path, reset):
    """The first parameter is a GRU's, run on a PackedSequence: its output is (packed, h_n),
    and only the packed output reaches the loss."""

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(6, 16, bidirectional=True)
            self.fc = nn.Linear(32, 4)

        def forward(self, x, lengths):
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
            out, _ = self.rnn(packed)
            out, _ = nn.utils.rnn.pad_packed_sequence(out)
            return self.fc(out)

    torch.manual_seed(0)
    model = Tagger()
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(12):
        x, lengths = torch.randn(10, 8, 6), torch.randint(3, 11, (8,))
        out = model(x, lengths)
        loss = out.pow(2).mean()
        if reset:
            opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    flags = _flags(str(tmp_path))
    assert len(flags) >= 10 and (set(flags) == {1} if reset else 0 in flags[1:5]), flags
    assert bool(mldbg.check(str(tmp_path), rules=["gradient_not_reset"])) == (not reset)


def test_a_parameter_of_the_model_itself_used_outside_its_forward(tmp_path):
    """A CRF-style model: its own `transitions` come first among its parameters and are used
    by the loss method, which calls the forward; the flags come from its first leaf layer."""

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.transitions = nn.Parameter(torch.randn(3, 3) * 0.1)
            self.emb = nn.Embedding(20, 8)
            self.out = nn.Linear(8, 3)

        def forward(self, words):
            return self.out(self.emb(words))

        def loss(self, words, tags):
            em = self(words)
            pair = self.transitions[tags[:, 1:], tags[:, :-1]].sum(1)
            return (
                torch.logsumexp(em, -1).sum(1) - em.gather(2, tags[..., None]).squeeze(2).sum(1) - pair
            ).mean()

    torch.manual_seed(0)
    model = Tagger()
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(25):
        words = torch.randint(0, 20, (16, 6))
        opt.zero_grad()
        model.loss(words, words % 3).backward()
        opt.step()
    hook.close()
    flags = _flags(str(tmp_path))
    assert len(flags) >= 20 and set(flags) == {1}, flags
    assert not mldbg.check(str(tmp_path), rules=["gradient_not_reset"])
