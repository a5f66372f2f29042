"""train_in_eval_mode: training resumes after validation without model.train() (fires within
a few steps), quiet on the twin that calls it and on the default set's healthy runs."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import assert_explains
from tests.rules.silent import HEALTHY_SILENT

ONSET = 10  # the first evaluation follows step 9; the bug leaves the model in eval from step 10


@pytest.mark.parametrize("name", ["eval_left_on", "eval_left_on_set_mode"])
def test_fires_when_training_resumes_in_eval_mode(name, silent_run):
    found = mldbg.check(silent_run(name), rules=["train_in_eval_mode"])
    assert found, name
    f = found[0]
    assert ONSET <= f.step <= ONSET + 5, f  # the eval forwards (steps 10, 11) come first
    assert_explains(f)
    assert "model.train()" in f.suggestion
    if name == "eval_left_on":  # the hook follows model.training: the steps are recorded as EVAL
        assert f.mode == "EVAL" and "optimizer stepped" in f.message
    else:  # hook.set_mode(TRAIN) kept the steps TRAIN: the modules' flags show it
        assert f.mode == "TRAIN" and "1 of 1 Dropout" in f.message and "BatchNorm" in f.message


@pytest.mark.parametrize("name", HEALTHY_SILENT)
def test_quiet_on_the_fixed_twins(name, silent_run):
    assert BUILTIN["train_in_eval_mode"].default
    found = [f for f in mldbg.check(silent_run(name)) if f.rule == "train_in_eval_mode"]
    assert not found, "\n".join(map(str, found))


def test_a_frozen_part_kept_in_eval_is_healthy(tmp_path):
    """A frozen backbone put in eval on purpose (its BatchNorm statistics frozen too) while the
    head trains: the backbone's modules are left out; the head's dropout still counts."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Linear(10, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.1))
    model = nn.Sequential(backbone, nn.Linear(16, 3), nn.Dropout(0.2))
    for p in backbone.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for _ in range(8):
            model.train()
            backbone.eval()
            opt.zero_grad()
            loss_fn(model(torch.randn(16, 10)), torch.randint(0, 3, (16,))).backward()
            opt.step()
    assert not mldbg.check(str(tmp_path / "run"), rules=["train_in_eval_mode"])
    trial = mldbg.create_trial(str(tmp_path / "run"))
    record = trial.record("module_training/dropout", 3)
    assert record.statistics["count"] == 1 and record.statistics["sum"] == 1  # the head's dropout only


def test_a_linear_probe_trained_in_eval_mode_is_healthy(tmp_path):
    """The whole model in eval() while a linear head on a frozen backbone trains: the backbone's
    Dropout and BatchNorm are frozen, the head has none, so eval mode changes nothing."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Linear(10, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.1))
    model = nn.Sequential(backbone, nn.Linear(16, 3))
    for p in backbone.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD(model[1].parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    model.eval()
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for _ in range(6):
            opt.zero_grad()
            loss_fn(model(torch.randn(16, 10)), torch.randint(0, 3, (16,))).backward()
            opt.step()
    trial = mldbg.create_trial(str(tmp_path / "run"))
    assert trial.record("optimizer_step", 3).statistics["sum"] == 1  # recorded as EVAL, stepping
    assert not mldbg.check(str(tmp_path / "run"), rules=["train_in_eval_mode"])


@pytest.mark.parametrize("set_mode", [False, True], ids=["follows-model", "set_mode"])
@pytest.mark.parametrize("bug", ["eval_left_on", None], ids=["forgot-train", "twin"])
def test_a_validation_after_the_warmup_is_caught_at_once(tmp_path, bug, set_mode):
    """Issue 27 item 5: the first validation comes after the statistics warmup (every step of
    a mode's first 20), then training goes on without model.train(). Statistics at the first
    training steps after each evaluation pass (the schedule's bursts), and at the steps after
    an optimizer stepped in an EVAL step, catch it within a few training steps; the streak
    counts statistics steps, not the gaps between them. The twin calls model.train()."""
    import mldbg.torch
    from tests.rules.silent import train_silent

    eval_every, passes = 50, 12  # 12 passes of 2 batches: the EVAL warmup ends in the first
    path = tmp_path / "run"
    train_silent(path, bug=bug, steps=2 * eval_every + 10, eval_every=eval_every, eval_repeat=passes,
                 set_mode=set_mode)  # fmt: skip
    found = mldbg.check(str(path), rules=["train_in_eval_mode"])
    if bug is None:
        assert not found, found
        return
    resumed = eval_every + 2 * passes  # the global step of the first training step after it
    assert found, "missed"
    assert resumed <= found[0].step <= resumed + 20, found[0]
    assert_explains(found[0])


@pytest.mark.parametrize("bug", [False, True], ids=["bn-frozen-on-purpose", "eval-left-on"])
def test_batchnorm_frozen_on_purpose_is_not_eval_left_on(tmp_path, bug):
    """BatchNorm statistics frozen on purpose (QAT's freeze_bn_stats, a detector fine-tuned with
    frozen BN: `model.train(); model.apply(set_bn_eval)`) leave every BatchNorm in eval while
    the model itself trains: healthy. The bug, `model.eval()` never undone behind
    `hook.set_mode(TRAIN)`, turns the model's own flag off too, with the same modules' flags."""
    import torch
    from torch import nn

    import mldbg.torch

    def set_bn_eval(m: nn.Module) -> None:
        if isinstance(m, nn.BatchNorm2d):
            m.eval()

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3),
    )  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for epoch in range(4):
            hook.set_mode(mldbg.Mode.TRAIN)
            if bug and epoch:
                pass  # model.train() forgotten after the validation
            else:
                model.train()
            if epoch >= 1:
                model.apply(set_bn_eval)  # BN statistics frozen from the second epoch on
            for _ in range(8):
                x = torch.randn(16, 1, 8, 8)
                opt.zero_grad()
                loss_fn(model(x), (x.mean((1, 2, 3)) > 0).long()).backward()
                opt.step()
            model.eval()
            hook.set_mode(mldbg.Mode.EVAL)
            with torch.no_grad():
                model(torch.randn(16, 1, 8, 8))
    found = mldbg.check(str(tmp_path / "run"), rules=["train_in_eval_mode"])
    assert bool(found) == bug, [str(f) for f in found]
    from mldbg.rules.runner import RuleRunner

    runner = RuleRunner(mldbg.create_trial(str(tmp_path / "run")), ["train_in_eval_mode"], columns=False)
    assert [f.step for f in runner.run_available() + runner.finish()] == [f.step for f in found]


def _functional_dropout_net():
    """A model whose only dropout is functional (`F.dropout(x, p, self.training)`, as in pyGAT
    and much research code): no Dropout module shows its mode."""
    import torch.nn.functional as F
    from torch import nn

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(10, 32)

        def forward(self, x):
            return F.dropout(F.elu(self.fc(x)), 0.5, self.training)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder, self.head = Encoder(), nn.Linear(32, 3)

        def forward(self, x):
            return F.log_softmax(self.head(self.encoder(x)), 1)

    return Net()


def _train_and_validate(path, case: str) -> None:
    """pyGAT's loop on `_functional_dropout_net`, recorded by the two lines: a training step
    on 48 samples, then a validation forward on 16, 12 epochs. `case`: "twin" calls
    model.train() each epoch, "forgot-train" once before the loop, "linear-probe" trains the
    head in eval mode with the encoder frozen."""
    import torch
    import torch.nn.functional as F

    import mldbg.torch

    torch.manual_seed(0)
    model = _functional_dropout_net()
    if case == "linear-probe":
        model.encoder.requires_grad_(False)
        model.eval()
    else:
        model.train()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=5e-3)
    x, y = torch.randn(64, 10), torch.randint(0, 3, (64,))
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        for _ in range(12):
            if case == "twin":
                model.train()
            opt.zero_grad()
            F.nll_loss(model(x[:48]), y[:48]).backward()
            opt.step()
            model.eval()
            with torch.no_grad():
                model(x[48:])


@pytest.mark.parametrize("case", ["twin", "forgot-train", "linear-probe"])
def test_functional_dropout_shows_the_mode(tmp_path, case):
    """pyGAT's loop: one full-batch training step, then a validation forward, each epoch. The
    bug calls model.train() once before the loop, so every later epoch trains in eval mode with
    its dropout off; its training forwards (recorded as EVAL, the optimizer stepping) alternate
    with validation forwards, which say nothing of the training's mode. Caught within a few
    epochs; quiet on the twin (model.train() each epoch) and on a linear probe trained in eval
    mode whose dropout sits in the frozen encoder."""
    _train_and_validate(tmp_path / "run", case)
    found = mldbg.check(str(tmp_path / "run"), rules=["train_in_eval_mode"])
    trial = mldbg.create_trial(str(tmp_path / "run"))
    if case != "forgot-train":
        assert not found, found
        if case == "twin":
            record = trial.record("module_training/functional", 0)
            assert record.statistics["count"] == 1 and record.statistics["sum"] == 1
        else:  # the probe's dropout is in its frozen encoder: left out
            assert "module_training/functional" not in trial.tensor_names()
        return
    record = trial.record("module_training/functional", 2)  # epoch 2's training forward
    assert record.statistics["count"] == 1 and record.statistics["sum"] == 0
    assert found, "missed"
    assert found[0].step <= 8, found[0]  # epochs 2 and 3 (global steps 2 and 4) in eval mode
    assert found[0].mode == "EVAL" and "optimizer stepped" in found[0].message
    assert_explains(found[0])


def test_functional_dropout_the_same_on_both_paths(tmp_path):
    """The fast path (`check_columns`) gives the per-step reference's findings on the
    functional-dropout run left in eval mode."""
    from mldbg.rules.runner import RuleRunner

    _train_and_validate(tmp_path / "run", "forgot-train")

    def outcome(columns: bool) -> list:
        runner = RuleRunner(
            mldbg.create_trial(str(tmp_path / "run")), ["train_in_eval_mode"], columns=columns
        )
        return [f.to_dict() for f in runner.run_available() + runner.finish()]

    reference = outcome(False)
    assert reference and outcome(True) == reference


def _pretrain_then_train_a_part(path, left_in_eval: bool) -> None:
    """DEC's two phases, tiny: an autoencoder (dropout on its encoder's input) registered and
    pretrained through its own forward, then its encoder alone trained on a new loss after
    `encoder.eval()` computed the embeddings; `left_in_eval`: no `encoder.train()` after."""
    import torch
    import torch.nn.functional as F  # noqa: N812
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    x = torch.randn(256, 12)
    encoder = nn.Sequential(nn.Dropout(0.2), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 4))
    autoencoder = nn.Sequential(encoder, nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 12))
    centres = nn.Parameter(torch.randn(3, 4))
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(autoencoder)
        opt = torch.optim.SGD(autoencoder.parameters(), lr=0.05)
        for i in range(12):
            xb = x[i * 16 : (i + 1) * 16]
            loss = F.mse_loss(autoencoder(xb), xb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        encoder.eval()
        with torch.no_grad():
            encoder(x)
        if not left_in_eval:
            encoder.train()
        opt = torch.optim.SGD([*encoder.parameters(), centres], lr=0.05)
        for i in range(12):
            h = encoder(x[i * 16 : (i + 1) * 16])
            loss = ((h[:, None] - centres[None]) ** 2).sum(-1).min(1).values.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


@pytest.mark.parametrize("left_in_eval", [True, False], ids=["encoder-left-in-eval", "twin"])
def test_a_part_trained_on_its_own_in_eval_mode(tmp_path, left_in_eval):
    """blind5's DEC twin: the registered autoencoder's own forward never runs in the second
    phase, its encoder's does: the hook records those forwards as the model's (from the first
    update that no forward of the model preceded), in the encoder's mode, with its parameters
    only (the decoder's `.grad` is stale from the pretraining: no `unchanged_tensor`)."""
    _pretrain_then_train_a_part(tmp_path / "run", left_in_eval)
    trial = mldbg.create_trial(str(tmp_path / "run"))
    phase2 = [s for s in trial.steps() if s >= 12]
    assert len(phase2) >= 8, trial.steps()  # the encoder's forwards are recorded (none before the fix)
    found = mldbg.check(str(tmp_path / "run"))
    if left_in_eval:
        assert {trial.mode(s).name for s in phase2} == {"EVAL"}
        ours = [f for f in found if f.rule == "train_in_eval_mode"]
        assert ours and ours[0].step >= 12 and "optimizer stepped" in ours[0].message, found
        assert_explains(ours[0])
    else:
        assert {trial.mode(s).name for s in phase2} == {"TRAIN"}
        assert not [f for f in found if f.rule in ("train_in_eval_mode", "unchanged_tensor")], found
        weights = {n for n in trial.tensor_names() if n.endswith("weight")}
        assert "0.1.weight" in weights and "1.weight" in weights
        assert "1.weight" not in trial.tensor_names(step=phase2[-1])  # the decoder: not in the step


def test_a_model_without_a_forward_keeps_its_parts_unrecorded(tmp_path):
    """A module without a forward of its own (CleanRL's `Agent`: `get_value` serves rollouts
    and updates alike) has no one call that is its training step: its parts trained on their
    own stay unrecorded, as before (only a model with a forward has its parts' calls taken)."""
    import torch
    from torch import nn

    import mldbg.torch

    class Agent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.critic = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))

    torch.manual_seed(0)
    agent = Agent()
    opt = torch.optim.SGD(agent.parameters(), lr=0.01)
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(agent)
        for _ in range(6):
            loss = agent.critic(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    trial = mldbg.create_trial(str(tmp_path / "run"))
    assert "model_input_0" not in trial.tensor_names()
    assert not mldbg.check(str(tmp_path / "run"), rules=["train_in_eval_mode"])


@pytest.mark.parametrize("left_in_eval", [True, False], ids=["left-in-eval", "twin"])
def test_a_recurrent_networks_own_dropout_shows_the_mode(tmp_path, left_in_eval):
    """A two-layer GRU with `dropout=0.2` between its layers and no Dropout module (a
    forecaster's decoder): its dropout acts in training mode only, so a model left in eval
    after its first validation trains without it; found, and the twin that calls
    `model.train()` is quiet."""
    import torch
    from torch import nn

    import mldbg.torch

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(4, 16, num_layers=2, dropout=0.2, batch_first=True)
            self.head = nn.Linear(16, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.gru(x)[0][:, -1])

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 12, 4, generator=g)
    y = x[:, -3:, 0].sum(1, keepdim=True)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.MSELoss()
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for step in range(40):
            if step == 0 or not left_in_eval:
                model.train()
            idx = torch.randint(0, 448, (32,), generator=g)
            opt.zero_grad()
            loss_fn(model(x[idx]), y[idx]).backward()
            opt.step()
            if step % 10 == 9:  # a validation pass
                model.eval()
                with torch.no_grad():
                    loss_fn(model(x[448:]), y[448:])
    found = [f for f in mldbg.check(str(tmp_path / "run")) if f.rule == "train_in_eval_mode"]
    if left_in_eval:
        assert found and 10 <= found[0].step <= 20, found
    else:
        assert not found, found


def _resumed_from_a_checkpoint(path, keep_eval: bool) -> None:
    """The PyTorch "saving and loading a general checkpoint" recipe in one process: a CNN with
    BatchNorm and Dropout trained 40 steps, saved, then rebuilt, loaded, registered again and
    trained 60 more steps (`keep_eval`: the recipe's `model.eval()` line kept to resume
    training: the bug); evaluated in eval mode at the end. The first model stays registered,
    no longer run, its Dropout in training mode."""
    import io

    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 1, 32, generator=g)
    y = (x.mean((1, 2)) > 0).long()

    def build():
        model = nn.Sequential(
            nn.Conv1d(1, 8, 5, padding=2), nn.BatchNorm1d(8), nn.ReLU(), nn.Flatten(),
            nn.Dropout(0.3), nn.Linear(8 * 32, 2),
        )  # fmt: skip
        return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    loss_fn = nn.CrossEntropyLoss()
    model, opt = build()
    hook = mldbg.torch.Hook(str(path))
    hook.register_module(model)
    hook.register_loss(loss_fn)

    def train(steps: int) -> None:
        for _ in range(steps):
            idx = torch.randint(0, 512, (32,), generator=g)
            loss = loss_fn(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()

    model.train()
    train(40)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, buffer)
    buffer.seek(0)
    model, opt = build()
    state = torch.load(buffer)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    hook.register_module(model)
    model.eval() if keep_eval else model.train()
    train(60)
    model.eval()
    with torch.no_grad():
        for i in range(0, 512, 128):
            loss_fn(model(x[i : i + 128]), y[i : i + 128])
    hook.close()


@pytest.mark.parametrize("keep_eval", [False, True])
def test_a_model_replaced_by_its_reloaded_checkpoint_is_not_judged(tmp_path, keep_eval):
    """The modes judged at a step are those of the modules whose model ran in it: the first
    model, replaced by the one rebuilt from its checkpoint, keeps its Dropout in training mode
    and no longer runs; read as the new model's, it made the healthy run's evaluation look
    nondeterministic ("1 of 1 Dropout modules were in training mode during a EVAL step"). The
    twin that resumes in eval mode is still caught."""
    _resumed_from_a_checkpoint(tmp_path / "run", keep_eval)
    rules = ["train_in_eval_mode", "nondeterministic_eval"]
    found = {f.rule for f in mldbg.check(str(tmp_path / "run"), rules=rules)}
    assert found == ({"train_in_eval_mode"} if keep_eval else set()), found


@pytest.mark.parametrize("left_in_eval", [True, False], ids=["eval left on", "train() each epoch"])
def test_an_encoder_in_eval_trained_through_the_decoders_step(tmp_path, left_in_eval):
    """NRI's layout (blind26, missed): an encoder with BatchNorm and a decoder without any,
    registered apart, one optimizer over both. In eval mode each forward is a step: the
    encoder's opens one, the decoder's the next, where the optimizer steps. The modes of the
    encoder's modules are kept at that step too: the optimizer updates it."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    encoder = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    decoder = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
    opt = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-3)
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(encoder, name="encoder")
        hook.register_module(decoder, name="decoder")
        for _ in range(4):
            if not left_in_eval:
                encoder.train()
                decoder.train()
            for _ in range(10):
                x = torch.randn(32, 8, generator=g)
                loss = F.mse_loss(decoder(encoder(x)), x)
                opt.zero_grad()
                loss.backward()
                opt.step()
            encoder.eval()
            decoder.eval()
            with torch.no_grad():
                x = torch.randn(64, 8, generator=g)
                F.mse_loss(decoder(encoder(x)), x).item()
    found = mldbg.check(str(tmp_path), rules=["train_in_eval_mode"])
    assert bool(found) == left_in_eval, [str(f) for f in found]
