"""The loss where the script computes it (`torch_loss`): with only `register_module`, the
hook records `loss` (in `losses`) for a functional loss given to backward, a model that
returns `(logits, loss)`, a dict or an object with `.loss`; `register_loss` still wins. Real
tiny trainings: the recorded values are the script's, step by step, and the training is the
same as without the hook (bit for bit)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mldbg
import mldbg.torch
from mldbg.config import Mode
from mldbg.frameworks import torch_loss

torch.set_num_threads(1)

N_IN, N_CLASSES, BATCH, STEPS = 16, 4, 32, 30


def _data(steps: int = STEPS) -> tuple[torch.Tensor, torch.Tensor]:
    """Learnable batches: labels from a fixed random teacher."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(steps, BATCH, N_IN, generator=g)
    teacher = torch.randn(N_IN, N_CLASSES, generator=g)
    return x, (x @ teacher).argmax(-1)


class MnistNet(nn.Module):
    """pytorch/examples mnist's shape: functional ReLU, log_softmax out, F.nll_loss outside."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(N_IN, 32)
        self.fc2 = nn.Linear(32, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


class GPTLike(nn.Module):
    """nanoGPT's shape: `logits, loss = model(idx, targets)`, F.cross_entropy inside."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(N_IN, 32)
        self.head = nn.Linear(32, N_CLASSES)

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None):
        logits = self.head(torch.tanh(self.fc1(x)))
        loss = None if targets is None else F.cross_entropy(logits, targets, ignore_index=-1)
        return logits, loss


class AuxNet(nn.Module):
    """TabNet's or a mixture of experts' shape: `logits, aux = model(x)`, an auxiliary scalar
    (a sparsity or balancing term) the script adds to its own `F.cross_entropy`."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(N_IN, 32)
        self.fc2 = nn.Linear(32, N_CLASSES)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(self.fc1(x))
        return self.fc2(h), h.pow(2).mean()


@dataclass
class Output:  # a Hugging Face ModelOutput's shape: attributes, `.loss`
    loss: torch.Tensor | None
    logits: torch.Tensor


class DictModel(GPTLike):
    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None):  # type: ignore[override]
        logits, loss = super().forward(x, labels)
        return {"logits": logits, "loss": loss}


class ObjectModel(GPTLike):
    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None):  # type: ignore[override]
        logits, loss = super().forward(x, labels)
        return Output(loss=loss, logits=logits)


def _train(model: nn.Module, kind: str, out: Path | None, lr: float = 0.1, steps: int = STEPS, **kw):
    """Train `model`; `kind` says where the loss comes from. Returns the script's losses."""
    x, y = _data(steps)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0) if kw.get("scaler") else None
    accumulate = kw.get("accumulate", 1)
    hook = mldbg.torch.Hook(str(out)) if out is not None else None
    if hook is not None:
        hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    if hook is not None and kind == "register_loss":
        hook.register_loss(loss_fn)
    losses = []
    for i in range(steps):
        model.train()
        opt.zero_grad()
        step_losses = []
        for xb, yb in zip(x[i].chunk(accumulate), y[i].chunk(accumulate), strict=True):
            if kind == "functional":
                loss = F.nll_loss(model(xb), yb)
            elif kind == "aux":  # the model's scalar is a term of the loss, not the loss
                logits, aux = model(xb)
                loss = F.cross_entropy(logits, yb) + 1e-3 * aux
            elif kind == "two_heads":  # two cross-entropies: whose labels is not known
                logits = model(xb)
                loss = F.cross_entropy(logits, yb) + 0.5 * F.cross_entropy(logits.flip(1), yb)
            elif kind == "register_loss":
                loss = loss_fn(model(xb), yb)
            elif kind == "tuple":
                _, loss = model(xb, yb)
            elif kind == "dict":
                loss = model(xb, labels=yb)["loss"]
            else:
                loss = model(xb, labels=yb).loss
            step_losses.append(loss.item())
            scaled = loss / accumulate
            (scaler.scale(scaled) if scaler is not None else scaled).backward()
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        losses.append(float(np.mean(step_losses)))
    if hook is not None:
        hook.close()
    return losses


def _recorded(path: Path, name: str = "loss", mode: Mode = Mode.TRAIN) -> list[float]:
    values = mldbg.create_trial(str(path)).tensor(name).values(mode)
    return [float(values[k]) for k in sorted(values)]


def _same_training(make, kind: str, tmp_path: Path, **kw) -> list[float]:
    """Trains `make()` with and without the hook: the same losses, the same final weights
    (the hook changes nothing of the training). Returns the recorded losses."""
    torch.manual_seed(0)
    plain = make()
    plain_losses = _train(plain, kind, None, **kw)
    torch.manual_seed(0)
    hooked = make()
    hooked_losses = _train(hooked, kind, tmp_path, **kw)
    assert hooked_losses == plain_losses
    for (name, a), (_, b) in zip(plain.named_parameters(), hooked.named_parameters(), strict=True):
        assert torch.equal(a, b), name
    recorded = _recorded(tmp_path)
    assert len(recorded) == len(plain_losses)
    np.testing.assert_allclose(recorded, plain_losses, rtol=1e-5)
    return recorded


def test_a_functional_loss_given_to_backward_is_the_loss(tmp_path):
    _same_training(MnistNet, "functional", tmp_path)
    trial = mldbg.create_trial(str(tmp_path))
    assert trial.tensor_names(collection="losses") == ["loss"]
    # F.nll_loss saved its log-probabilities and targets: the class statistics of the labels
    assert {"loss_input_0", "loss_input_1"} <= set(trial.tensor_names())
    # the wrapper is gone with the hook, unless a hook still open listens (one an earlier test
    # of this worker left open with its model: the wrapper is process-wide)
    assert torch.autograd.backward.__name__ == "backward" or torch_loss._listeners


def test_a_functional_loss_plus_the_models_auxiliary_term_is_the_loss_with_its_labels(tmp_path):
    """`logits, aux = model(x)`; `F.cross_entropy(logits, y) + 1e-3 * aux` is given to
    backward: that sum is the loss (not the model's returned scalar), and the cross-entropy's
    predictions and labels are found behind the sum: the labels' class counts are the batch's."""
    _same_training(AuxNet, "aux", tmp_path)
    trial = mldbg.create_trial(str(tmp_path))
    assert trial.tensor_names(collection="losses") == ["loss"]
    _, y = _data()
    counts = trial.tensor("stats/loss_input_1/class_counts").value(0)
    np.testing.assert_array_equal(counts[:N_CLASSES], np.bincount(y[0].numpy(), minlength=N_CLASSES))
    assert "loss_input_0" in trial.tensor_names(collection="predictions")


def test_an_evaluation_does_not_take_the_auxiliary_term_for_its_loss(tmp_path):
    """Once training showed the returned scalar is only a term of the loss, an evaluation's
    forward does not record it as the evaluation's loss."""
    torch.manual_seed(0)
    model = AuxNet()
    x, y = _data(4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        for i in range(3):
            model.train()
            logits, aux = model(x[i])
            loss = F.cross_entropy(logits, y[i]) + 1e-3 * aux
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            model(x[3])
    trial = mldbg.create_trial(str(tmp_path))
    assert trial.tensor("loss").steps(Mode.EVAL) == []
    assert len(trial.tensor("loss").steps(Mode.TRAIN)) == 3


def test_a_loss_the_model_names_stays_the_loss_when_the_script_adds_a_term(tmp_path):
    """A Hugging Face-style `.loss` (or `"loss"`) is the model's task loss: a script that adds a
    term for training (`out.loss + 1e-3 * aux`) still has it recorded, in TRAIN and in EVAL,
    so the two compare."""
    torch.manual_seed(0)
    model = ObjectModel()
    x, y = _data(4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    expected = []
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        for i in range(3):
            model.train()
            out = model(x[i], labels=y[i])
            expected.append(out.loss.item())
            opt.zero_grad()
            (out.loss + 1e-3 * out.logits.pow(2).mean()).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            model(x[3], labels=y[3])
    np.testing.assert_allclose(_recorded(tmp_path), expected, rtol=1e-5)
    assert len(_recorded(tmp_path, mode=Mode.EVAL)) == 1


def test_a_sum_of_two_cross_entropies_records_the_loss_but_no_labels(tmp_path):
    """Two classification losses in one sum: which labels go with which predictions is not
    known, so none are recorded (the loss is)."""
    _same_training(MnistNet, "two_heads", tmp_path)
    names = mldbg.create_trial(str(tmp_path)).tensor_names()
    assert "loss_input_1" not in names and not any(n.startswith("stats/loss_input") for n in names)


def test_a_gradscaler_scaled_loss_is_recorded_unscaled(tmp_path):
    _same_training(MnistNet, "functional", tmp_path, scaler=True)


def test_a_model_returning_logits_and_loss(tmp_path):
    """nanoGPT's loop, with gradient accumulation: the step's loss is the mean of its
    micro-batches' losses as the model returned them (not the divided ones given to backward)."""
    _same_training(GPTLike, "tuple", tmp_path, accumulate=4)


@pytest.mark.parametrize("model", [DictModel, ObjectModel])
def test_a_model_returning_a_dict_or_an_object_with_loss(tmp_path, model):
    _same_training(model, "dict" if model is DictModel else "object", tmp_path)


def test_register_loss_wins(tmp_path):
    """With `register_loss`, its loss alone is recorded (no second `loss`)."""
    torch.manual_seed(0)
    losses = _train(
        nn.Sequential(nn.Linear(N_IN, 32), nn.ReLU(), nn.Linear(32, N_CLASSES)), "register_loss", tmp_path
    )
    trial = mldbg.create_trial(str(tmp_path))
    assert trial.tensor_names(collection="losses") == ["CrossEntropyLoss_output_0"]
    np.testing.assert_allclose(_recorded(tmp_path, "CrossEntropyLoss_output_0"), losses, rtol=1e-5)


def test_a_registered_loss_the_script_stopped_calling_leaves_the_loss_to_backward(tmp_path, caplog):
    """`register_loss(nn.KLDivLoss())` kept while the script computes its KL by hand, `0 * log
    0` NaN at every step (its gradients are finite: the training goes on): the registered loss
    never runs, so each step records what it gave to backward as `loss`, with one warning,
    and the NaN is found at step 0. Steps where the registered loss runs record it alone."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(N_IN, 32), nn.ReLU(), nn.Linear(32, N_CLASSES))
    x, y = _data(STEPS)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.KLDivLoss(reduction="batchmean")
    given = []
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        hook.register_loss(criterion)
        for i in range(STEPS):
            log_q = F.log_softmax(model(x[i]), 1)
            t = F.one_hot(y[i], N_CLASSES).float()  # zeros where no vote: 0 * log 0
            loss = criterion(log_q, t) if i % 2 else (t * (t.log() - log_q)).sum(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            given.append(loss.item())
    trial = mldbg.create_trial(str(tmp_path))
    assert trial.tensor("loss").steps() == list(range(0, STEPS, 2))  # the steps it did not run
    assert trial.tensor("KLDivLoss_output_0").steps() == list(range(1, STEPS, 2))
    assert np.isnan(_recorded(tmp_path)).all() and all(np.isnan(given[0::2]))
    assert sum("registered loss did not run" in r.message for r in caplog.records) == 1
    found = [f for f in mldbg.check(str(tmp_path)) if f.rule == "exploding_tensor"]
    assert found and found[0].step == 0 and "loss" in found[0].tensors, found
    assert "gradient tensors recorded there are finite" in found[0].message  # not "overflowed"


def test_an_evaluation_records_the_returned_loss(tmp_path):
    torch.manual_seed(0)
    model = GPTLike()
    x, y = _data(3)
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        model.eval()
        with torch.no_grad():
            expected = [model(x[i], y[i])[1].item() for i in range(3)]
    np.testing.assert_allclose(_recorded(tmp_path, mode=Mode.EVAL), expected, rtol=1e-5)


def test_a_backward_outside_the_models_is_not_the_loss(tmp_path):
    """A backward through no registered model (here, before any forward) records nothing."""
    model = MnistNet()
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        w = torch.ones(3, requires_grad=True)
        (w * 2).sum().backward()
    assert "loss" not in mldbg.create_trial(str(tmp_path)).tensor_names()


def test_a_diverging_functional_loss_run_is_found(tmp_path):
    """The mnist-style loop at lr x100: with the two lines only, a loss rule speaks."""
    torch.manual_seed(0)
    _train(MnistNet(), "functional", tmp_path / "diverging", lr=10.0, steps=40)
    findings = mldbg.check(str(tmp_path / "diverging"))
    assert any("loss" in f.tensors for f in findings), findings
    torch.manual_seed(0)
    _train(MnistNet(), "functional", tmp_path / "healthy", lr=0.1, steps=40)  # its twin: no loss finding
    healthy = mldbg.check(str(tmp_path / "healthy"))
    assert not any("loss" in f.tensors for f in healthy), healthy


def test_register_loss_of_a_function_is_harmless_and_a_saved_loss_wins(tmp_path):
    """`register_loss(F.nll_loss)` (a function, which no hook can see) does nothing: the loss
    given to backward is recorded. A script that saves its own `loss` is recorded from then on."""
    torch.manual_seed(0)
    model = MnistNet()
    x, y = _data(6)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    expected = []
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        hook.register_loss(F.nll_loss)
        for i in range(6):
            opt.zero_grad()
            loss = F.nll_loss(model(x[i]), y[i])
            if i >= 3:
                hook.save_tensor("loss", loss.detach() + 100.0, ("losses",))  # before the step ends
            loss.backward()
            opt.step()
            expected.append(loss.item() + (100.0 if i >= 3 else 0.0))
    np.testing.assert_allclose(_recorded(tmp_path), expected, rtol=1e-5)


class HingeNet(MnistNet):
    """MnistNet plus a hinge inside its forward: `F.relu(1 - margin)`, one value per sample
    (mostly 0 once the margins hold: no layer, not a dead one)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        self.hinge = F.relu(1.0 - out.max(1).values).mean()
        return out


def test_a_functional_relu_is_checked_as_a_relu_module_is(tmp_path):
    """The two lines on a model that calls F.relu record its input at statistics steps as
    `model.F.relu_<n>_input_0` in `relu_activations`, and dead_relu runs; an nn.ReLU module
    is recorded once, by its own hook; a hinge over one value per sample is no layer."""
    from mldbg.rules.runner import RuleRunner

    torch.manual_seed(0)
    _train(HingeNet(), "functional", tmp_path / "functional", steps=5)
    trial = mldbg.create_trial(str(tmp_path / "functional"))
    assert trial.collections()["relu_activations"] == ["model.F.relu_0_input_0"]
    assert trial.tensor("model.F.relu_0_input_0").steps() == list(range(5))
    runner = RuleRunner(str(tmp_path / "functional"), ["dead_relu"])
    runner.run_available()
    runner.finish()
    assert "dead_relu" not in runner.skipped

    torch.manual_seed(0)
    _train(
        nn.Sequential(nn.Linear(N_IN, 32), nn.ReLU(), nn.Linear(32, N_CLASSES)),
        "register_loss",
        tmp_path / "module",
        steps=5,
    )
    assert mldbg.create_trial(str(tmp_path / "module")).collections()["relu_activations"] == ["1_input_0"]


def test_dead_relu_says_why_a_compiled_models_relus_are_not_checked(tmp_path):
    """A torch.compile'd model recorded with `statistics_eager=False` runs every step compiled,
    where no ReLU is seen: dead_relu's skip says so, rather than advising include_collections.
    (By default its statistics steps run eagerly and its ReLUs are judged:
    test_torch_compiled_statistics.py.)"""
    from mldbg.rules.runner import RuleRunner

    torch.manual_seed(0)
    model = torch.compile(MnistNet(), backend="eager")
    with mldbg.torch.Hook(str(tmp_path), statistics_eager=False) as hook:
        hook.register_module(model)
        x, y = _data(5)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(5):
            opt.zero_grad()
            F.nll_loss(model(x[i]), y[i]).backward()
            opt.step()
    runner = RuleRunner(str(tmp_path), ["dead_relu"])
    runner.run_available()
    runner.finish()
    why = runner.skipped["dead_relu"]
    assert "F.relu" in why and "torch.compile" in why and "statistics_eager=False" in why, why
    assert "include_collections" not in why, why


class TinyGPT(nn.Module):
    """nanoGPT's forward: token and position embeddings, a head, `F.cross_entropy` over the
    flattened (batch x time) logits with `ignore_index=-1`, `(logits, loss)` returned."""

    def __init__(self, vocab: int = 12, block: int = 8, width: int = 16) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(block, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.lm_head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        pos = torch.arange(idx.shape[1], device=idx.device)
        h = self.wte(idx) + self.wpe(pos)
        logits = self.lm_head(h + self.mlp(h))
        if targets is None:
            return logits[:, [-1], :], None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def test_a_nanogpt_style_loop_records_its_loss(tmp_path):
    """nanoGPT's train.py loop: AdamW, gradient accumulation (loss / steps before backward),
    clipping; the recorded loss is the model's, the labels are the targets."""
    g = torch.Generator().manual_seed(0)
    data = torch.arange(4000) % 12  # next token = token + 1: learnable
    torch.manual_seed(0)
    model = TinyGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    expected = []
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        for _ in range(25):
            micro = []
            for _ in range(2):
                ix = torch.randint(len(data) - 9, (6,), generator=g)
                x = torch.stack([data[i : i + 8] for i in ix])
                y = torch.stack([data[i + 1 : i + 9] for i in ix])
                _, loss = model(x, y)
                micro.append(loss.item())
                (loss / 2).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            expected.append(float(np.mean(micro)))
    np.testing.assert_allclose(_recorded(tmp_path), expected, rtol=1e-5)
    assert expected[-1] < expected[0] / 2  # it learned
    assert {"loss_input_0", "loss_input_1"} <= set(mldbg.create_trial(str(tmp_path)).tensor_names())


def test_a_hugging_face_model_output_holds_the_loss():
    """`ModelOutput` (an ordered dict with attributes): its `loss`; none without labels."""
    from mldbg.frameworks.torch_loss import returned_loss

    outputs = pytest.importorskip("transformers.modeling_outputs")
    loss, logits = torch.tensor(2.5), torch.randn(2, 3)
    assert returned_loss(outputs.CausalLMOutput(loss=loss, logits=logits)) is loss
    assert returned_loss(outputs.CausalLMOutput(logits=logits)) is None
    assert returned_loss((loss, logits)) is loss  # return_dict=False
    assert returned_loss((logits, torch.tensor(1.0), torch.tensor(2.0))) is None  # which one? none


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_compiled_model_records_its_loss_weights_gradients_and_evaluation(tmp_path, backend):
    """`torch.compile(model)` registered with the two lines: the functional loss given to
    backward (the training unchanged), weights, gradients, labels; an evaluation's loss under
    no_grad, by a function or written out; layer inputs (`relu_activations`) from the
    statistics steps, which run eagerly (`torch_compiled`). Inductor behaves as these backends
    here but compiles for a minute on a loaded CPU: the backends of the same front end."""
    x, y = _data(12)

    def run(out: Path | None) -> tuple[list[float], list[float]]:
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(N_IN, 32), nn.ReLU(), nn.Linear(32, N_CLASSES))
        model = torch.compile(net, backend=backend)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        hook = mldbg.torch.Hook(str(out)) if out is not None else None
        if hook is not None:
            hook.register_module(model)
        losses, evaluations = [], []
        for i in range(10):
            model.train()
            opt.zero_grad()
            loss = F.cross_entropy(model(x[i]), y[i])
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if i % 3 == 2:
                model.eval()
                with torch.no_grad():
                    out_ = model(x[10])
                    evaluations.append(F.cross_entropy(out_, y[10]).item())
                    out_ = model(x[11])
                    evaluations.append(((out_.softmax(1) - F.one_hot(y[11], N_CLASSES)) ** 2).mean().item())
        if hook is not None:
            hook.close()
        return losses, evaluations

    plain = run(None)
    hooked = run(tmp_path)
    assert hooked == plain
    np.testing.assert_allclose(_recorded(tmp_path), plain[0], rtol=1e-5)
    np.testing.assert_allclose(_recorded(tmp_path, mode=Mode.EVAL), plain[1], rtol=1e-5)
    trial = mldbg.create_trial(str(tmp_path))
    collections = trial.collections()
    assert {"0.weight", "2.weight"} <= set(collections["weights"])
    assert {"gradient/0.weight", "gradient/2.weight"} <= set(collections["gradients"])
    assert "loss_input_1" in collections["labels"] and "loss_input_0" in collections["predictions"]
    assert trial.tensor("loss_input_1").steps(mode=Mode.EVAL)
    assert collections["relu_activations"] == ["1_input_0"]


class ExamplesMnist(nn.Module):
    """pytorch/examples mnist's `Net`, small: two convolutions, max-pooling, dropout, two
    linear layers, functional ReLUs, `log_softmax` out (trained with `F.nll_loss` outside)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(8 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def _examples_mnist(path: Path, lr: float, epochs: int = 3, batches: int = 12) -> list[float]:
    """pytorch/examples mnist's main loop: Adadelta at `lr` (1.0 by default), StepLR(gamma
    0.7) per epoch, `train()` with `F.nll_loss`, `test()` under no_grad with
    `F.nll_loss(..., reduction="sum")`; the two lines only. Returns the training losses."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    templates = torch.randn(N_CLASSES, 1, 12, 12, generator=g)
    y = torch.randint(0, N_CLASSES, (batches + 2, BATCH), generator=g)
    x = templates[y] + 0.5 * torch.randn(batches + 2, BATCH, 1, 12, 12, generator=g)
    model = ExamplesMnist()
    opt = torch.optim.Adadelta(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    losses = []
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        for _ in range(epochs):
            model.train()
            for i in range(batches):
                opt.zero_grad()
                loss = F.nll_loss(model(x[i]), y[i])
                loss.backward()
                opt.step()
                losses.append(loss.item())
            model.eval()
            with torch.no_grad():
                for i in range(batches, batches + 2):
                    F.nll_loss(model(x[i]), y[i], reduction="sum").item()
            scheduler.step()
    return losses


def test_the_examples_mnist_at_lr_x100_is_found_at_once_and_its_twin_is_quiet(tmp_path):
    """lr 100 instead of 1.0: the loss leaps at step 1 (by orders of magnitude) and the ReLUs
    die. With the two lines the default rules find it within five steps (`dead_relu` on the
    inputs of its functional ReLUs; the gradients of the dead layers), and the loss recorded
    from backward gets its own finding (`loss_divergence`, once the loss has settled back at
    chance: here ~10 steps). At lr 1.0 (the example's own) the default set is quiet."""
    losses = _examples_mnist(tmp_path / "x100", lr=100.0)
    assert max(losses[1:4]) > 20 * losses[0], losses[:4]  # the leap the issue saw (2.3 -> 40,000)
    found = mldbg.check(str(tmp_path / "x100"))
    assert found and min(f.step for f in found) <= 5, [str(f) for f in found]
    assert any(f.rule == "dead_relu" and f.step <= 5 and "model.F.relu" in f.message for f in found)
    on_loss = [f.step for f in found if "loss" in f.tensors]
    assert on_loss and min(on_loss) <= 20, [str(f) for f in found]
    healthy = _examples_mnist(tmp_path / "x1", lr=1.0)
    assert healthy[-1] < healthy[0] / 2  # it learns
    assert not mldbg.check(str(tmp_path / "x1"))
