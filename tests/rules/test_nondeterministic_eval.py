"""nondeterministic_eval: F.dropout (training=True by default) in the forward pass makes two
evaluations of the same batch differ; the twin with nn.Dropout and model.eval() is quiet."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import assert_explains
from tests.rules.silent import HEALTHY_SILENT


def test_fires_on_dropout_active_in_eval(silent_run):
    found = mldbg.check(silent_run("functional_dropout"), rules=["nondeterministic_eval"])
    assert found
    f = found[0]
    # evaluation after step 9: forwards at steps 10, 11 (first pass), 12, 13 (the same batches again)
    assert f.step == 12 and f.mode == "EVAL", f
    assert "steps 10 and 12" in f.message and f.tensors == ["model_input_0", "model_output_0"]
    assert_explains(f)


@pytest.mark.parametrize("name", HEALTHY_SILENT)
def test_quiet_on_the_fixed_twins(name, silent_run):
    assert BUILTIN["nondeterministic_eval"].default
    found = [f for f in mldbg.check(silent_run(name)) if f.rule == "nondeterministic_eval"]
    assert not found, "\n".join(map(str, found))


def test_quiet_when_training_in_eval_mode_changes_the_weights(silent_run):
    """Training left in eval mode: every forward is an EVAL step, but the optimizer steps in
    between, so equal inputs may give other outputs: not this rule's finding."""
    assert not mldbg.check(silent_run("eval_left_on"), rules=["nondeterministic_eval"])


def test_fires_on_dropout_modules_in_training_mode_during_eval(tmp_path):
    """hook.set_mode(EVAL) while the model stayed in train(): the dropout flags show it."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            hook.set_mode(mldbg.Mode.TRAIN)
            opt.zero_grad()
            model(torch.randn(8, 10)).sum().backward()
            opt.step()
        hook.set_mode(mldbg.Mode.EVAL)  # model.eval() forgotten
        with torch.no_grad():
            model(torch.randn(8, 10))
    found = mldbg.check(str(tmp_path / "run"), rules=["nondeterministic_eval"])
    assert len(found) == 1 and found[0].step == 3 and "1 of 1 Dropout" in found[0].message, found


# An evaluation that forgets model.eval(), with no hook.set_mode: the hook follows
# model.training, so its forwards land in TRAIN steps (mldbg.frameworks.torch_eval).


def net(dropout: bool = True, bn: bool = False):
    from torch import nn

    layers = [nn.Linear(10, 16), *([nn.BatchNorm1d(16)] if bn else []), nn.ReLU()]
    layers += [nn.Dropout(0.3)] if dropout else []
    return nn.Sequential(*layers, nn.Linear(16, 3))


def train_loop(
    out,
    *,
    forget_eval: bool = True,
    eval_batches: int = 2,
    eval_loss: bool = False,
    inference_mode: bool = False,
    dense: bool = False,
    dropout: bool = True,
    bn: bool = False,
    steps: int = 12,
    eval_every: int = 5,
) -> None:
    """A tiny classifier trained `steps` steps with the two lines (or everything every 5 steps:
    `dense`), evaluated after every `eval_every` steps on `eval_batches` batches under
    `torch.no_grad()` (or `torch.inference_mode()`), its loss computed there if `eval_loss`;
    `forget_eval`: the model stays in training mode for the evaluation (the bug)."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    model = net(dropout, bn)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    kwargs = {"save_config": mldbg.SaveConfig(save_interval=5), "save_all": True} if dense else {}
    x, y = torch.randn(32 * steps, 10), torch.randint(0, 3, (32 * steps,))
    x_eval, y_eval = torch.randn(64 * eval_batches, 10), torch.randint(0, 3, (64 * eval_batches,))
    with mldbg.torch.Hook(str(out), **kwargs) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for step in range(steps):
            model.train()
            opt.zero_grad()
            loss_fn(model(x[32 * step : 32 * (step + 1)]), y[32 * step : 32 * (step + 1)]).backward()
            opt.step()
            if (step + 1) % eval_every == 0:
                model.train() if forget_eval else model.eval()
                with torch.inference_mode() if inference_mode else torch.no_grad():
                    for i in range(eval_batches):
                        p = model(x_eval[64 * i : 64 * (i + 1)])
                        if eval_loss:
                            loss_fn(p, y_eval[64 * i : 64 * (i + 1)])


def evidence(path) -> list[str]:
    return mldbg.create_trial(str(path)).tensor_names(regex="^no_grad_training/")


@pytest.mark.parametrize("config", ["two", "dense"])
def test_fires_on_an_evaluation_left_in_training_mode_without_set_mode(tmp_path, config):
    """Two evaluation batches under no_grad, model.eval() forgotten: caught at the step the
    evaluation ran in (after step 4: step 5, a TRAIN step), with both configurations."""
    train_loop(tmp_path / "run", dense=config == "dense")
    found = mldbg.check(str(tmp_path / "run"), rules=["nondeterministic_eval"])
    assert len(found) == 1, found
    f = found[0]
    assert f.step == 5 and f.mode == "TRAIN", f
    assert "dropout/BatchNorm in training mode" in f.message and "1 of 1 Dropout" in f.message, f
    assert "2 forwards" in f.message and "model.eval()" in f.suggestion
    assert f.tensors == ["no_grad_training/forwards", "no_grad_training/dropout"]
    assert_explains(f)
    # the default set finds it too (it is a default rule)
    assert "nondeterministic_eval" in {g.rule for g in mldbg.check(str(tmp_path / "run"))}


def test_fires_on_one_batch_whose_loss_is_computed_in_inference_mode(tmp_path):
    """One evaluation batch, its validation loss computed, under torch.inference_mode(); a
    model with BatchNorm only (no dropout): its outputs depend on the batch."""
    train_loop(tmp_path / "run", eval_batches=1, eval_loss=True, inference_mode=True, dropout=False, bn=True)
    found = mldbg.check(str(tmp_path / "run"), rules=["nondeterministic_eval"])
    assert len(found) == 1 and found[0].step == 5, found
    assert "1 of 1 BatchNorm" in found[0].message and "Dropout" not in found[0].message, found
    assert found[0].tensors == ["no_grad_training/forwards", "no_grad_training/norm"]
    assert "1 forward with gradients disabled" in found[0].message, found


@pytest.mark.parametrize("config", ["two", "dense"])
def test_quiet_when_the_evaluation_calls_model_eval(tmp_path, config):
    train_loop(tmp_path / "run", forget_eval=False, eval_loss=True, bn=True, dense=config == "dense")
    assert not evidence(tmp_path / "run")
    assert not mldbg.check(str(tmp_path / "run"), rules=["nondeterministic_eval"])


def test_quiet_on_an_evaluation_in_training_mode_of_a_model_without_dropout_or_batchnorm(tmp_path):
    """Nothing differs in eval mode: nothing to report."""
    train_loop(tmp_path / "run", dropout=False, eval_loss=True)
    assert not evidence(tmp_path / "run")
    assert not mldbg.check(str(tmp_path / "run"), rules=["nondeterministic_eval"])


@pytest.mark.parametrize("dropout", [False, True])
def test_quiet_on_dqn_targets_computed_with_the_same_network_under_no_grad(tmp_path, dropout):
    """A DQN-style step: the targets from the same network in training mode under no_grad,
    right before the forward with gradients (the same pattern as an evaluation's last batch
    followed by training). Without dropout nothing is recorded; with dropout, one no-grad
    forward per training iteration (a target or teacher pass) is left alone too."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    q = net(dropout=dropout)
    loss_fn = nn.MSELoss()
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(q)
        hook.register_loss(loss_fn)
        for _ in range(30):
            s, s_next = torch.randn(32, 10), torch.randn(32, 10)
            a, r = torch.randint(0, 3, (32, 1)), torch.randn(32)
            with torch.no_grad():
                target = r + 0.9 * q(s_next).max(1).values
            opt.zero_grad()
            loss_fn(q(s).gather(1, a).squeeze(1), target).backward()
            opt.step()
    assert not evidence(tmp_path / "run")
    assert not [f for f in mldbg.check(str(tmp_path / "run")) if f.rule == "nondeterministic_eval"]


def test_quiet_on_a_gan_sampling_its_generator_under_no_grad(tmp_path):
    """A GAN's generator (BatchNorm in training mode on purpose) sampled under no_grad for the
    discriminator's update, both models on one hook: training, not an evaluation."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    g = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 8))
    d = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Dropout(0.3), nn.Linear(16, 1))
    bce = nn.BCEWithLogitsLoss()
    opt_g, opt_d = torch.optim.Adam(g.parameters(), 1e-3), torch.optim.Adam(d.parameters(), 1e-3)
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(g, name="generator")
        hook.register_module(d, name="discriminator")
        hook.register_loss(bce)
        for _ in range(20):
            real = torch.randn(32, 8) + 2
            with torch.no_grad():
                fake = g(torch.randn(32, 4))
            opt_d.zero_grad()
            (bce(d(real), torch.ones(32, 1)) + bce(d(fake), torch.zeros(32, 1))).backward()
            opt_d.step()
            opt_g.zero_grad()
            bce(d(g(torch.randn(32, 4))), torch.ones(32, 1)).backward()
            opt_g.step()
    assert not evidence(tmp_path / "run")
    assert not [f for f in mldbg.check(str(tmp_path / "run")) if f.rule == "nondeterministic_eval"]


def test_the_train_step_records_its_training_batch_not_the_evaluations(tmp_path):
    """The evaluation's forwards (and its loss) run first in the TRAIN step they land in; the
    step records the training forward that follows them (everything saved raw at step 5)."""
    import numpy as np
    import torch

    train_loop(tmp_path / "run", dense=True, eval_loss=True, bn=True)
    trial = mldbg.create_trial(str(tmp_path / "run"))
    assert trial.mode(5) == mldbg.Mode.TRAIN
    torch.manual_seed(0)  # the batches train_loop draws, in its order
    net(True, True)
    x, y = torch.randn(32 * 12, 10), torch.randint(0, 3, (32 * 12,))
    np.testing.assert_array_equal(trial.tensor("model_input_0").value(5), x[160:192].numpy())
    np.testing.assert_array_equal(trial.tensor("CrossEntropyLoss_input_1").value(5), y[160:192].numpy())


@pytest.mark.parametrize("mc_loss", [False, True])
def test_quiet_on_monte_carlo_dropout(tmp_path, mc_loss):
    """MC dropout: one batch (a new view of it at each pass) forwarded 20 times under no_grad
    in training mode on purpose (its outputs' spread is the uncertainty), with or without a
    loss of their mean; the same loop over 20 different batches is an evaluation that forgot
    model.eval()."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = net(True, False)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with mldbg.torch.Hook(str(tmp_path / "mc")) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for step in range(12):
            x, y = torch.randn(32, 10), torch.randint(0, 3, (32,))
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            if step % 4 == 3:
                x_val, y_val = torch.randn(64, 10), torch.randint(0, 3, (64,))
                with torch.no_grad():
                    mean = torch.stack([model(x_val[:48]).softmax(-1) for _ in range(20)]).mean(0)
                    if mc_loss:
                        loss_fn(mean.log(), y_val[:48])
    assert not mldbg.check(str(tmp_path / "mc"), rules=["nondeterministic_eval"])


@pytest.mark.parametrize("inputs", ["one-hot", "real"])
def test_one_hot_batches_are_not_the_same_inputs(tmp_path, inputs):
    """The Keras addition example's evaluation: one-hot questions (7 positions x 12 symbols),
    batch after batch. The input fingerprint sums over elements whatever their position, so
    every one-hot row hashes alike and so do different batches of them: those batches are not
    compared (quiet, a deterministic model). The same evaluation of real-valued batches,
    evaluated twice with dropout left on through F.dropout, is still caught."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(7 * 12, 32), nn.Linear(32, 12)

        def forward(self, x):
            h = torch.relu(self.fc1(x.flatten(1).float()))
            return self.fc2(nn.functional.dropout(h, 0.3) if inputs == "real" else h)

    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    if inputs == "one-hot":
        data = nn.functional.one_hot(torch.randint(0, 12, (320, 7)), 12).bool()
        evals = [data[i : i + 32] for i in range(0, 320, 32)]  # ten different batches
    else:
        data = torch.randn(320, 7, 12)
        evals = [data[:32], data[:32]]  # one batch, twice
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        for step in range(5):
            hook.set_mode(mldbg.Mode.TRAIN)
            loss = model(data[32 * step : 32 * (step + 1)]).logsumexp(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        hook.set_mode(mldbg.Mode.EVAL)
        with torch.no_grad():
            for batch in evals:
                model(batch)
    found = mldbg.check(str(tmp_path / "run"), rules=["nondeterministic_eval"])
    assert bool(found) == (inputs == "real"), "\n".join(map(str, found))


def test_quiet_on_test_time_augmentation_with_flips(tmp_path):
    """A CNN evaluated with flip test-time augmentation: each validation batch, then its mirror
    image, through the model in eval mode, one after the other. The mirror is another input
    (a sample's fingerprint sees where its values are), so its other output is no
    nondeterminism (the old fingerprint, a multiset hash, took it for the same input); a
    dropout left active in the same evaluation is still reported."""
    import torch
    from torch import nn

    import mldbg.torch

    for dropout_active in (False, True):
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(0)
        model = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Dropout(0.3), nn.Linear(8 * 8 * 8, 4)
        )
        x, y = torch.randn(256, 3, 8, 8, generator=g), torch.randint(0, 4, (256,), generator=g)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        path = tmp_path / f"run{int(dropout_active)}"
        with mldbg.torch.Hook(str(path)) as hook:
            hook.register_module(model)
            for step in range(30):
                model.train()
                idx = torch.arange(step * 32, step * 32 + 32) % 192
                loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                if step % 10 == 9:
                    model.eval()
                    if dropout_active:
                        model[3].train()  # a dropout left on in evaluation
                    with torch.no_grad():
                        xv = x[192:]
                        (model(xv).softmax(1) + model(xv.flip(3)).softmax(1)) / 2
                        if dropout_active:
                            model(xv)  # the same batch again: a different output
        found = mldbg.check(str(path), rules=["nondeterministic_eval"])
        assert bool(found) == dropout_active, [str(f) for f in found]


@pytest.mark.parametrize("dropout_on", [False, True], ids=["eval", "dropout left on"])
def test_an_rnn_stepped_through_a_sequence_is_judged_on_all_its_inputs(tmp_path, dropout_on):
    """The PyTorch name-generation tutorial's RNN, `rnn(category, letter, hidden)`, sampled in
    evaluation: every step feeds the same category with another letter and hidden state,
    another input, whose output differs by design (the rule compared the first input alone
    and fired). Generating twice from the same start with a dropout that stays on in eval
    (`F.dropout(x, p)`, whose `training` defaults to True): the same three inputs, different
    outputs, reported."""
    import torch
    from torch import nn

    import mldbg.torch

    class Rnn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.i2h, self.i2o = nn.Linear(4 + 8 + 16, 16), nn.Linear(4 + 8 + 16, 8)

        def forward(self, category, letter, hidden):
            x = torch.cat((category, letter, hidden), 1)
            out = nn.functional.dropout(self.i2o(x), 0.3, training=dropout_on or self.training)
            return torch.log_softmax(out, 1), torch.tanh(self.i2h(x))

    torch.manual_seed(0)
    rnn = Rnn()
    opt = torch.optim.SGD(rnn.parameters(), lr=0.05)
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(rnn)
        for _ in range(30):
            category = torch.eye(4)[torch.randint(0, 4, (1,))]
            letters = torch.eye(8)[torch.randint(0, 8, (6,))]
            hidden, loss = torch.zeros(1, 16), torch.zeros(())
            for i in range(5):
                out, hidden = rnn(category, letters[i : i + 1], hidden)
                loss = loss + nn.functional.nll_loss(out, letters[i + 1].argmax()[None])
            opt.zero_grad()
            loss.backward()
            opt.step()
        rnn.eval()
        hook.set_mode(mldbg.Mode.EVAL)
        with torch.no_grad():
            for _ in range(2):  # two samples from the same start
                letter, hidden = torch.eye(8)[:1], torch.zeros(1, 16)
                for _ in range(6):
                    out, hidden = rnn(torch.eye(4)[:1], letter, hidden)
                    letter = torch.eye(8)[out.argmax(1)]
    found = mldbg.check(str(tmp_path), rules=["nondeterministic_eval"])
    assert bool(found) == dropout_on, [str(f) for f in found]
    if found:
        assert "model_input_1" in found[0].tensors and "model_input_2" in found[0].tensors
    from mldbg.rules.runner import RuleRunner  # the reference path decides the same

    runner = RuleRunner(mldbg.create_trial(str(tmp_path)), ["nondeterministic_eval"], columns=False)
    assert [f.step for f in runner.run_available() + runner.finish()] == [f.step for f in found]
