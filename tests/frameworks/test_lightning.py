"""`mldbg.lightning.DebuggerCallback`: a tiny LightningModule trained on CPU with the callback,
read back against the module's own values (parameters, the losses its `training_step`
returned), modes from Lightning's loops, the default rules on a diverging run and its healthy
twin, and a stop action that ends the fit early and cleanly."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import mldbg
from mldbg import Mode

pl = pytest.importorskip("lightning.pytorch")

from mldbg.lightning import DebuggerCallback  # noqa: E402

# Lightning's own notices (its pytree shim's deprecation, the dataloader worker advice)
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning"),
    pytest.mark.filterwarnings("ignore:.*does not have many workers.*"),
    pytest.mark.filterwarnings("ignore:.*smaller than the logging interval.*"),
]


class Tiny(pl.LightningModule):
    """An MLP whose `training_step` never calls `self(...)` (Lightning's common style), and
    keeps the losses it returned."""

    def __init__(self, lr: float = 0.1, sleep: float = 0.0):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        self.lr, self.sleep = lr, sleep
        self.train_losses: list[float] = []
        self.val_losses: list[float] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.train_losses.append(float(loss.detach()))
        if self.sleep:
            time.sleep(self.sleep)  # lets the watcher child keep pace in the stop test
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.val_losses.append(float(loss))
        self.log("val_loss", loss)
        return loss

    def test_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("test_loss", loss)  # logged, not returned: read at the end of the loop

    def forward(self, x):
        return self.net(x)

    def predict_step(self, batch, batch_idx):
        return self(batch[0])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def _data(n: int = 256, batch: int = 16) -> tuple[DataLoader, DataLoader]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    y = x[:, :3].argmax(1)  # learnable: a healthy run's loss falls
    train = DataLoader(TensorDataset(x, y), batch_size=batch)
    val = DataLoader(TensorDataset(x[:64], y[:64]), batch_size=32)
    return train, val


def _trainer(callback: DebuggerCallback, **kwargs) -> pl.Trainer:
    return pl.Trainer(
        accelerator="cpu", callbacks=[callback], logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, **kwargs,
    )  # fmt: skip


def test_records_parameters_losses_and_modes_from_the_loops(tmp_path):
    torch.manual_seed(0)
    model = Tiny()
    train, val = _data()
    cb = DebuggerCallback(
        tmp_path, save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["weights", "biases", "gradients", "losses"],
    )  # fmt: skip
    trainer = _trainer(cb, max_epochs=2, accumulate_grad_batches=2)
    trainer.fit(model, train, val)

    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps  # the run closed with the fit
    train_steps = [s for s in trial.steps() if trial.mode(s) == Mode.TRAIN]  # global steps
    eval_steps = [s for s in trial.steps() if trial.mode(s) == Mode.EVAL]
    # two micro-batches per optimizer step are one step; the sanity check is not recorded
    assert len(train_steps) == trainer.global_step == 16
    assert len(eval_steps) == 2 * len(val)
    assert trial.steps(mode=Mode.EVAL) == list(range(len(eval_steps)))  # the mode's own steps
    assert eval_steps[: len(val)] == [8, 9]  # validation after the first epoch's 8 steps
    # the loss of each step: the mean of its two micro-batches' returned losses
    loss = trial.tensor("loss")
    recorded = [float(loss.value(s)) for s in train_steps]
    expected = np.asarray(model.train_losses).reshape(-1, 2).mean(axis=1)
    np.testing.assert_allclose(recorded, expected, rtol=1e-5)
    sanity = model.val_losses[:2]  # the sanity check ran first: not recorded
    np.testing.assert_allclose(
        [float(loss.value(s)) for s in eval_steps], model.val_losses[len(sanity) :], rtol=1e-5
    )
    assert recorded[-1] < recorded[0]
    # the last validation ran after the last optimizer step: its weights are the final ones
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(trial.tensor(name).value(eval_steps[-1]), p.detach().numpy())
        assert len(trial.tensor(f"gradient/{name}").steps(mode=Mode.TRAIN)) == len(train_steps)
    # test and predict loops: EVAL and PREDICT steps of a run of their own
    every = mldbg.SaveConfig(save_interval=1)
    cb2 = DebuggerCallback(tmp_path / "test", save_config=every, include_collections=["weights", "losses"])
    _trainer(cb2).test(model, val, verbose=False)
    cb3 = DebuggerCallback(tmp_path / "predict", save_config=every, include_collections=["weights"])
    _trainer(cb3).predict(model, DataLoader(TensorDataset(torch.randn(20, 8)), batch_size=10))
    tested = mldbg.create_trial(tmp_path / "test")
    assert tested.steps(mode=Mode.EVAL) == list(range(len(val))) and tested.steps() == [0, 1]
    x, y = val.dataset.tensors
    with torch.no_grad():
        whole = float(nn.functional.cross_entropy(model(x), y))  # Lightning's epoch mean of equal batches
    assert float(tested.tensor("loss").value(1)) == pytest.approx(whole, rel=1e-5)
    predicted = mldbg.create_trial(tmp_path / "predict")
    assert len(predicted.steps(mode=Mode.PREDICT)) == 2 and not predicted.steps(mode=Mode.TRAIN)


def _errors(findings: list[mldbg.Finding]) -> list[mldbg.Finding]:
    return [f for f in findings if f.severity == "error"]


def test_default_rules_find_a_diverging_run_and_keep_quiet_on_a_healthy_one(tmp_path):
    train, val = _data()
    runs = {}
    for name, lr in (("healthy", 0.1), ("diverging", 1e6)):
        torch.manual_seed(0)
        _trainer(DebuggerCallback(tmp_path / name), max_epochs=3).fit(Tiny(lr), train, val)
        runs[name] = mldbg.check(tmp_path / name)
    assert _errors(runs["healthy"]) == []
    assert {"exploding_tensor", "loss_not_decreasing"} & {f.rule for f in _errors(runs["diverging"])}


def test_a_stop_action_ends_the_fit_early_and_cleanly(tmp_path, caplog):
    from mldbg.actions import StopTraining

    train, val = _data()
    torch.manual_seed(0)
    model = Tiny(lr=1e12, sleep=0.01)
    cb = DebuggerCallback(
        tmp_path, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["weights", "losses"],
        flush_seconds=0.05, rules=["exploding_tensor"], actions=[StopTraining()],
    )  # fmt: skip
    trainer = _trainer(cb, max_epochs=100)
    with caplog.at_level(logging.WARNING, logger="mldbg"):
        trainer.fit(model, train, val)  # returns: no TrainingStopped reaches the caller
    assert cb.stopped and trainer.should_stop
    assert trainer.global_step < 100 * len(train) // 2
    assert any("stopped the training" in r.getMessage() for r in caplog.records)
    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps
    # nothing recorded past the stop: a TRAIN step per optimizer step (the one open at the stop
    # too), and each validation pass 2 EVAL steps (2 batches) per epoch begun
    assert len(trial.steps(Mode.TRAIN)) <= trainer.global_step + 1
    assert len(trial.steps(Mode.EVAL)) <= 2 * (trainer.current_epoch + 1)


def test_pytorch_lightning_trainer_takes_the_same_callback(tmp_path):
    ptl = pytest.importorskip("pytorch_lightning")

    class Legacy(ptl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(8, 3)

        def training_step(self, batch, batch_idx):
            return nn.functional.cross_entropy(self.net(batch[0]), batch[1])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    train, _ = _data()
    trainer = ptl.Trainer(
        max_epochs=1, accelerator="cpu", callbacks=[DebuggerCallback(tmp_path)], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(Legacy(), train)
    assert mldbg.create_trial(tmp_path).tensor("loss").steps() == list(range(len(train)))


@pytest.mark.slow  # two processes that each start Lightning (~15 s on a busy 2-core machine)
def test_ddp_ranks_are_workers(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("lightning_ddp_job.py")
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rank 0 steps 4" in done.stdout and "rank 1 steps 4" in done.stdout
    trial = mldbg.create_trial(tmp_path)
    assert trial.workers() == ["worker_0", "worker_1"] and trial.loaded_all_steps
    assert trial.steps() == [0, 1, 2, 3]
    weight, loss = trial.tensor("net.0.weight"), trial.tensor("loss")
    # DDP keeps the replicas equal; each rank has its own batch, so its own loss
    np.testing.assert_array_equal(weight.value(3, worker="worker_0"), weight.value(3, worker="worker_1"))
    assert loss.value(0, worker="worker_0") != loss.value(0, worker="worker_1")


def test_layers_made_in_configure_model_are_recorded(tmp_path):
    class Late(Tiny):
        def __init__(self):
            super().__init__()
            del self.net

        def configure_model(self):  # Lightning calls it after the callbacks' setup
            if not hasattr(self, "net"):
                self.net = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 3))

    train, val = _data()
    cb = DebuggerCallback(
        tmp_path, include_collections=["weights"], save_config=mldbg.SaveConfig(save_interval=1)
    )
    trainer = _trainer(cb, max_epochs=1, num_sanity_val_steps=0)
    model = Late()
    trainer.fit(model, train, val)
    trial = mldbg.create_trial(tmp_path)
    np.testing.assert_array_equal(
        trial.tensor("net.2.weight").value(trial.steps()[-1]), model.net[2].weight.detach()
    )


def test_manual_optimization_records_the_loss_given_to_backward(tmp_path):
    class Manual(Tiny):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            opt.zero_grad()
            x, y = batch
            loss = nn.functional.cross_entropy(self.net(x), y)
            self.train_losses.append(float(loss.detach()))
            self.manual_backward(loss)
            opt.step()  # returns nothing: the loss comes from manual_backward

    train, val = _data()
    model = Manual()
    cb = DebuggerCallback(
        tmp_path, include_collections=["losses"], save_config=mldbg.SaveConfig(save_interval=1)
    )
    _trainer(cb, max_epochs=1, num_sanity_val_steps=0).fit(model, train, val)
    trial = mldbg.create_trial(tmp_path)
    loss = trial.tensor("loss")
    train_steps = [s for s in loss.steps() if trial.mode(s) == Mode.TRAIN]
    assert train_steps == list(range(len(train)))
    np.testing.assert_allclose([float(loss.value(s)) for s in train_steps], model.train_losses, rtol=1e-6)


class Gan(pl.LightningModule):
    """Manual optimization with two optimizers: the discriminator's step, then the
    generator's, in each batch; keeps the gradients each optimizer stepped with."""

    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.g = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
        self.d = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
        self.grads: list[dict[str, np.ndarray]] = []
        self.losses: list[tuple[float, float]] = []

    def training_step(self, batch, batch_idx):
        opt_g, opt_d = self.optimizers()
        real = batch[0]
        fake = self.g(torch.randn(len(real), 4))
        bce = nn.functional.binary_cross_entropy_with_logits
        ones, zeros = torch.ones(len(real), 1), torch.zeros(len(real), 1)
        d_loss = bce(self.d(real), ones) + bce(self.d(fake.detach()), zeros)
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        seen = {f"d.{n}": p.grad.clone().numpy() for n, p in self.d.named_parameters()}
        opt_d.step()
        g_loss = bce(self.d(fake), ones)  # also leaves gradients on d, which opt_d never uses
        opt_g.zero_grad()
        self.manual_backward(g_loss)
        seen.update({f"g.{n}": p.grad.clone().numpy() for n, p in self.g.named_parameters()})
        opt_g.step()
        self.grads.append(seen)
        self.losses.append((float(d_loss.detach()), float(g_loss.detach())))

    def configure_optimizers(self):
        return [torch.optim.Adam(self.g.parameters(), 1e-3), torch.optim.Adam(self.d.parameters(), 1e-3)]


def test_a_gan_with_two_optimizers_is_one_step_per_batch_with_each_optimizers_gradients_and_loss(tmp_path):
    train, _ = _data(n=64)
    torch.manual_seed(0)
    model = Gan()
    cb = DebuggerCallback(
        tmp_path, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["gradients", "losses"]
    )
    trainer = _trainer(cb, max_epochs=1)
    trainer.fit(model, train)
    assert trainer.global_step == 2 * len(train)  # Lightning counts each optimizer's steps
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == list(range(len(train)))  # one step per batch: a GAN iteration
    for step, seen in enumerate(model.grads):  # each model's gradients as its optimizer saw them
        for name, grad in seen.items():
            np.testing.assert_array_equal(trial.tensor(f"gradient/{name}").value(step), grad)
    # each player's loss a series of its own, named in the order their optimizers first
    # stepped: the discriminator's `loss`, the generator's `loss/backward1` (not their mean)
    assert sorted(trial.tensor_names(collection="losses")) == ["loss", "loss/backward1"]
    for name, column in (("loss", 0), ("loss/backward1", 1)):
        got = [float(trial.tensor(name).value(s)) for s in trial.steps()]
        np.testing.assert_allclose(got, np.asarray(model.losses)[:, column], rtol=1e-6)


def test_a_loss_logged_under_its_own_name_or_returned_in_a_dict_is_recorded(tmp_path):
    class Dict(Tiny):
        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            self.log("loss/train", loss)
            return {"loss": loss, "accuracy": 0.5}

    class Logged(Tiny):
        """Steps its optimizer itself, with `loss.backward()`: the loss is only logged."""

        def __init__(self):
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            opt.zero_grad()
            loss = nn.functional.cross_entropy(self.net(batch[0]), batch[1])
            self.train_losses.append(float(loss.detach()))
            loss.backward()
            opt.step()
            self.log("loss/train", loss)

        def validation_step(self, batch, batch_idx):
            loss = nn.functional.cross_entropy(self.net(batch[0]), batch[1])
            self.val_losses.append(float(loss))
            self.log("loss/val", loss)  # logged, not returned

    train, val = _data(n=64)
    for name, module in (("dict", Dict), ("logged", Logged)):
        torch.manual_seed(0)
        model = module()
        cb = DebuggerCallback(
            tmp_path / name, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["losses"]
        )
        _trainer(cb, max_epochs=1, num_sanity_val_steps=0).fit(model, train, val)
        trial = mldbg.create_trial(tmp_path / name)
        loss = trial.tensor("loss")
        train_steps = trial.steps(mode=Mode.TRAIN)
        assert (
            [s for s in loss.steps() if trial.mode(s) == Mode.TRAIN] == train_steps == list(range(len(train)))
        )
        np.testing.assert_allclose([float(loss.value(s)) for s in train_steps], model.train_losses, rtol=1e-6)
        eval_steps = [s for s in loss.steps() if trial.mode(s) == Mode.EVAL]
        assert eval_steps, name
    # the logged validation loss: Lightning's epoch mean of the batches', at the loop's end
    assert float(loss.value(eval_steps[-1])) == pytest.approx(np.mean(model.val_losses), rel=1e-5)


def test_later_trainer_calls_with_the_same_callback_continue_the_run(tmp_path):
    train, val = _data(n=64)
    torch.manual_seed(0)
    model = Tiny()
    cb = DebuggerCallback(
        tmp_path, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["weights", "losses"]
    )
    trainer = _trainer(cb, max_epochs=1, num_sanity_val_steps=0)
    trainer.fit(model, train, val)  # 4 TRAIN, 2 EVAL (two validation batches)
    trainer.validate(model, val, verbose=False)  # 2 EVAL
    trainer.test(model, val, verbose=False)  # 2 EVAL
    trainer.predict(model, val)  # 2 PREDICT
    _trainer(cb, max_epochs=1, num_sanity_val_steps=0).fit(model, train, val)  # a second fit: 4 + 2
    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps
    modes = [trial.mode(s).name for s in trial.steps()]
    assert modes == ["TRAIN"] * 4 + ["EVAL"] * 6 + ["PREDICT"] * 2 + ["TRAIN"] * 4 + ["EVAL"] * 2
    assert trial.steps(mode=Mode.TRAIN) == list(range(8)) and trial.steps(mode=Mode.EVAL) == list(range(8))
    for name in trial.tensor_names(collection="weights"):  # the last step saw the final weights
        final = model.get_parameter(name).detach().numpy()
        np.testing.assert_array_equal(trial.tensor(name).value(trial.steps()[-1]), final)
    assert mldbg.check(tmp_path, rules=["loss_not_decreasing"]) == []

    class Broken(Tiny):
        def training_step(self, batch, batch_idx):
            if batch_idx == 1:
                raise RuntimeError("a bug in the training step")
            return super().training_step(batch, batch_idx)

    broken = Broken()
    broken.load_state_dict(model.state_dict())
    with pytest.raises(RuntimeError, match="a bug"):
        _trainer(cb, max_epochs=1, num_sanity_val_steps=0).fit(broken, train, val)
    assert mldbg.create_trial(tmp_path).loaded_all_steps  # closed at the exception
    _trainer(cb).validate(model, val, verbose=False)  # and the next call still continues the run
    trial = mldbg.create_trial(tmp_path)
    assert [trial.mode(s).name for s in trial.steps()][-2:] == ["EVAL", "EVAL"]
    assert len(trial.steps()) == len(modes) + 2 + 2  # the broken fit: its good step and the one that raised


def test_the_callback_and_the_module_copy_and_reload_from_a_checkpoint(tmp_path):
    import copy
    import pickle

    train, val = _data(n=64)
    model = Hyper(lr=0.05)
    cb = DebuggerCallback(
        tmp_path / "run", save_config=mldbg.SaveConfig(save_interval=1), rules=["loss_not_decreasing"]
    )
    trainer = _trainer(cb, max_epochs=1)
    trainer.fit(model, train, val)
    ckpt = tmp_path / "tiny.ckpt"
    trainer.save_checkpoint(ckpt)
    back = Hyper.load_from_checkpoint(ckpt)
    assert back.lr == 0.05
    for (name, p), q in zip(model.named_parameters(), back.parameters(), strict=True):
        torch.testing.assert_close(p, q, msg=name)
    copied = pickle.loads(pickle.dumps(cb))  # the settings travel, not the closed run
    assert copied.hook is None and copied.hook_options["rules"] == ["loss_not_decreasing"]
    assert copy.deepcopy(cb).out_dir == cb.out_dir
    twin = copy.deepcopy(model)  # a copy of the hooked module records nothing, computes the same
    x = val.dataset.tensors[0]
    torch.testing.assert_close(twin(x), model(x))
    steps = mldbg.create_trial(tmp_path / "run").steps()
    torch.save(model, tmp_path / "model.pt")
    assert mldbg.create_trial(tmp_path / "run").steps() == steps


class Hyper(Tiny):
    """Keeps its hyperparameters in the checkpoint (`load_from_checkpoint` rebuilds it)."""

    def __init__(self, lr: float = 0.1):
        super().__init__(lr)
        self.save_hyperparameters()


def test_each_steps_gradients_are_its_own_batchs_under_automatic_optimization(tmp_path):
    """Lightning runs forward and backward inside `optimizer.step(closure)`, after the
    optimizer's pre-hook: the gradients the hook records at a step are the ones that step's
    optimizer used (as `on_before_optimizer_step` sees them), not the previous batch's, and
    the last batch's are recorded too."""

    class Seen(Tiny):
        def __init__(self):
            super().__init__()
            self.grads: list[dict[str, np.ndarray]] = []

        def on_before_optimizer_step(self, optimizer):
            self.grads.append({n: p.grad.detach().numpy().copy() for n, p in self.named_parameters()})

    torch.manual_seed(0)
    model = Seen()
    train, val = _data(n=96)
    cb = DebuggerCallback(
        tmp_path, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["gradients", "losses"]
    )
    _trainer(cb, max_epochs=1, num_sanity_val_steps=0).fit(model, train, val)
    trial = mldbg.create_trial(tmp_path)
    steps = trial.steps(mode=Mode.TRAIN)
    assert len(steps) == len(model.grads) == len(train)
    for step, seen in zip(steps, model.grads, strict=True):
        for name, grad in seen.items():
            np.testing.assert_array_equal(trial.tensor(f"gradient/{name}").value(step), grad)


class NoZeroGrad(Tiny):
    """Manual optimization that forgets `opt.zero_grad()`."""

    def __init__(self, reset: bool):
        super().__init__(lr=0.05)
        self.automatic_optimization = False
        self.reset = reset

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        if self.reset:
            opt.zero_grad()
        self.manual_backward(loss)
        opt.step()
        return loss


@pytest.mark.parametrize("module", ["automatic", "manual, zero_grad", "manual, no zero_grad"])
def test_the_callback_sees_whether_gradients_are_reset(tmp_path, module):
    """`gradient_reset/model` at the statistics steps: all 1 under Lightning's automatic
    optimization and a manual loop that resets; a manual loop without `zero_grad()` is found."""
    torch.manual_seed(0)
    train, val = _data()
    lit = {
        "automatic": Tiny(),
        "manual, zero_grad": NoZeroGrad(True),
        "manual, no zero_grad": NoZeroGrad(False),
    }[module]
    _trainer(DebuggerCallback(tmp_path), max_epochs=2).fit(lit, train, val)
    trial = mldbg.create_trial(str(tmp_path))
    (name,) = trial.tensor_names(regex="^gradient_reset/")
    flags = [int(trial.tensor(name).reduction_value(s, "sum")) for s in trial.tensor(name).steps()]
    found = [f for f in mldbg.check(str(tmp_path), rules=["gradient_not_reset"])]
    if module == "manual, no zero_grad":
        assert 0 in flags[1:9] and found and found[0].step <= 5, (flags, found)
    else:
        assert len(flags) >= 20 and set(flags) == {1} and not found, (flags, found)


class Memorizer(Tiny):
    """A wide MLP with Adam: it memorizes a small training set with noisy labels, and its
    validation loss rises past its best."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 256), nn.ReLU(), nn.Linear(256, 3))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def _memorizing_fit(path, keep_best: bool) -> Memorizer:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(288, 8, generator=g)
    y = x[:, :3].argmax(1)
    noisy = torch.rand(32, generator=g) < 0.4
    y[:32] = torch.where(noisy, torch.randint(0, 3, (32,), generator=g), y[:32])
    train = DataLoader(TensorDataset(x[:32], y[:32]), batch_size=16)
    val = DataLoader(TensorDataset(x[32:], y[32:]), batch_size=256)
    torch.manual_seed(0)
    model = Memorizer()
    keeps = [pl.callbacks.ModelCheckpoint(dirpath=path.parent / f"{path.name}_ckpt", monitor="val_loss")]
    trainer = pl.Trainer(
        accelerator="cpu", callbacks=[DebuggerCallback(path), *(keeps if keep_best else [])], logger=False,
        enable_checkpointing=keep_best, enable_progress_bar=False, enable_model_summary=False, max_epochs=40,
    )  # fmt: skip
    trainer.fit(model, train, val)
    return model


def test_a_fit_that_keeps_its_best_model_is_not_reported_for_the_epochs_past_it(tmp_path):
    """A `ModelCheckpoint` that monitors the validation loss keeps the best epoch's model:
    the epochs trained past it are the stopper's patience, and `overfit` leaves them alone
    (the callback records `early_stopping`). The same fit without it is reported."""
    plain = _memorizing_fit(tmp_path / "plain", keep_best=False)
    kept = _memorizing_fit(tmp_path / "kept", keep_best=True)
    val = np.asarray(plain.val_losses[1:])  # the sanity check's first
    assert val[-1] > 1.5 * val.min() and val.argmin() < len(val) // 2  # it memorizes
    np.testing.assert_allclose(kept.val_losses, plain.val_losses, rtol=1e-5)  # the same fit
    assert [f.rule for f in mldbg.check(str(tmp_path / "plain"), rules=["overfit"])] == ["overfit"]
    trial = mldbg.create_trial(str(tmp_path / "kept"))
    assert trial.tensor("early_stopping").steps(Mode.TRAIN)
    assert not mldbg.create_trial(str(tmp_path / "plain")).has_tensor("early_stopping")
    assert not mldbg.check(str(tmp_path / "kept"), rules=["overfit"])
