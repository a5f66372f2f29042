"""An evaluation's loss computed by a function under `torch.no_grad()` (`torch_eval_loss`):
with only `register_module`, the hook records it as `loss` in EVAL steps, as the mean the
training loss is; what is not computed from the registered model's output is not recorded.
Real tiny trainings, shaped as pytorch/examples mnist's `test()` and nanoGPT's
`estimate_loss()`."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tests.frameworks.test_torch_loss_capture import BATCH, MnistNet, TinyGPT, _data
from torch import nn

import mldbg
import mldbg.torch
from mldbg.config import Mode

torch.set_num_threads(1)


def _windows_left() -> list:
    """The evaluation-loss windows (this hook's torch function modes) still on the stack: none
    once the hook is closed. Other modes (another library's, another test's) are not ours."""
    from mldbg.frameworks.torch_eval_loss import _Window

    stack = [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]
    return [m for m in stack if isinstance(m, _Window)]


def _eval_losses(path) -> list[float]:
    values = mldbg.create_trial(str(path)).tensor("loss").values(Mode.EVAL)
    return [float(values[k]) for k in sorted(values)]


def _mnist(path, hooked: bool = True, epochs: int = 3, train_batches: int = 8, test_batches: int = 4):
    """pytorch/examples mnist: `train()` with `F.nll_loss`, `test()` under `torch.no_grad()`
    summing `F.nll_loss(output, target, reduction="sum")` and counting correct predictions.
    Returns (the per-batch mean test losses, each epoch's test loss, the final weights)."""
    torch.manual_seed(0)
    model = MnistNet()
    x, y = _data(train_batches + test_batches)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = mldbg.torch.Hook(str(path)) if hooked else None
    if hook is not None:
        hook.register_module(model)
    batch_means, epoch_losses = [], []
    for _ in range(epochs):
        model.train()
        for i in range(train_batches):
            opt.zero_grad()
            loss = F.nll_loss(model(x[i]), y[i])
            loss.backward()
            opt.step()
        model.eval()
        test_loss, correct = 0.0, 0
        with torch.no_grad():
            for i in range(train_batches, train_batches + test_batches):
                output = model(x[i])
                batch = F.nll_loss(output, y[i], reduction="sum").item()
                test_loss += batch
                batch_means.append(batch / BATCH)
                pred = output.argmax(dim=1, keepdim=True)
                correct += pred.eq(y[i].view_as(pred)).sum().item()
        epoch_losses.append(test_loss / (test_batches * BATCH))
    if hook is not None:
        hook.close()
    return batch_means, epoch_losses, [p.detach().clone() for p in model.parameters()]


def test_an_mnist_test_loop_records_its_summed_loss_as_the_mean(tmp_path):
    """Each test batch is an EVAL step whose `loss` is `F.nll_loss(..., reduction="sum")`
    divided by the batch: the epoch's mean over its steps is the script's test loss. The
    training is the same as without the hook, and no torch function mode is left behind."""
    means, epochs, weights = _mnist(tmp_path / "run")
    _, plain_epochs, plain_weights = _mnist(None, hooked=False)
    assert epochs == plain_epochs
    assert all(torch.equal(a, b) for a, b in zip(weights, plain_weights, strict=True))
    recorded = _eval_losses(tmp_path / "run")
    np.testing.assert_allclose(recorded, means, rtol=1e-5)
    np.testing.assert_allclose(np.mean(np.reshape(recorded, (3, -1)), axis=1), epochs, rtol=1e-5)
    assert not _windows_left()
    trial = mldbg.create_trial(str(tmp_path / "run"))
    assert len(trial.tensor("loss").steps(Mode.TRAIN)) == 24  # the training loss as before


def _memorizing(path, n_train: int, epochs: int) -> str:
    """An MLP under Adam on `n_train` samples with noisy labels (a loss floor), mnist's loop:
    `F.nll_loss` to train, each epoch's `test()` summing it over 256 held-out samples."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(16, 4, generator=g)

    def data(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, 16, generator=g)
        return x, (x @ teacher + torch.randn(n, 4, generator=g)).argmax(1)

    (xt, yt), (xv, yv) = data(n_train), data(256)
    model = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 4), nn.LogSoftmax(1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        for _ in range(epochs):
            model.train()
            for xb, yb in zip(xt.split(32), yt.split(32), strict=True):
                opt.zero_grad()
                F.nll_loss(model(xb), yb).backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                for xb, yb in zip(xv.split(64), yv.split(64), strict=True):
                    F.nll_loss(model(xb), yb, reduction="sum").item()
    return str(path)


def test_overfit_reads_the_validation_loss_a_function_computed(tmp_path):
    """64 samples memorized over 40 epochs: overfit fires from the functional test loss (it had
    no validation loss to read before); the twin on 1024 samples: no rule of the default set."""
    found = mldbg.check(_memorizing(tmp_path / "memorizing", 64, 40))
    assert [f.rule for f in found] == ["overfit"] and found[0].mode == "EVAL", [str(f) for f in found]
    healthy = mldbg.check(_memorizing(tmp_path / "healthy", 1024, 10))
    assert not healthy, [str(f) for f in healthy]


def test_a_nanogpt_estimate_loss_records_each_evaluation(tmp_path):
    """nanoGPT's `estimate_loss()`: `@torch.no_grad()`, `model.eval()`, `logits, loss =
    model(X, Y)` over a few batches of each split, `model.train()`: each call is an EVAL step
    holding the returned loss; the training steps keep theirs."""
    g = torch.Generator().manual_seed(0)
    data = torch.arange(4000) % 12
    torch.manual_seed(0)
    model = TinyGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def batch():
        ix = torch.randint(len(data) - 9, (6,), generator=g)
        return torch.stack([data[i : i + 8] for i in ix]), torch.stack([data[i + 1 : i + 9] for i in ix])

    evaluated: list[float] = []

    @torch.no_grad()
    def estimate_loss() -> None:
        model.eval()
        for _ in range(2):  # splits
            for _ in range(3):
                _, loss = model(*batch())
                evaluated.append(loss.item())
        model.train()

    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        for it in range(20):
            if it % 10 == 0:
                estimate_loss()
            _, loss = model(*batch())
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
    np.testing.assert_allclose(_eval_losses(tmp_path), evaluated, rtol=1e-5)
    assert len(mldbg.create_trial(str(tmp_path)).tensor("loss").steps(Mode.TRAIN)) == 20


class _AttentionLM(nn.Module):
    """A causal language model that returns its logits only, with
    `F.scaled_dot_product_attention` (which the hook's attention capture watches at statistics
    steps, a torch function mode of its own inside the forward)."""

    def __init__(self, vocab: int = 12, width: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.qkv = nn.Linear(width, 3 * width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        h = self.embed(idx)
        q, k, v = self.qkv(h).unsqueeze(1).chunk(3, dim=-1)
        return self.head(h + F.scaled_dot_product_attention(q, k, v, is_causal=True).squeeze(1))


def test_a_shifted_cross_entropy_over_padded_sequences_is_the_mean_over_valid_targets(tmp_path):
    """A script's own language-model evaluation: `logits[:, :-1].contiguous().view(-1, V)` (a
    copy, made from the output) against the shifted ids with padding ignored, summed, through
    an unregistered `nn.CrossEntropyLoss`; the attention capture's mode inside the forward
    stays as it was. The loss of the loop's unrelated `F.mse_loss` on the data is not taken."""
    torch.manual_seed(0)
    model = _AttentionLM()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 12, (6, 4, 10), generator=g)
    ids[:, :, 7:] = 0  # padding
    loss_fn = nn.CrossEntropyLoss(ignore_index=0, reduction="sum")
    expected = []
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        model.eval()
        with torch.no_grad():
            for batch in ids:
                F.mse_loss(batch.float(), batch.float() + 1)  # not the model's: not recorded
                logits = model(batch)
                F.mse_loss(batch.float(), batch.float() + 1)  # not made from the output either
                shifted = logits[:, :-1].contiguous().view(-1, logits.shape[-1])
                targets = batch[:, 1:].reshape(-1)
                total = loss_fn(shifted, targets)
                expected.append((total / (targets != 0).sum()).item())
    assert not _windows_left()
    np.testing.assert_allclose(_eval_losses(tmp_path), expected, rtol=1e-5)
    names = mldbg.create_trial(str(tmp_path)).tensor_names()
    assert any(n.endswith("_attention_logits") for n in names), names  # the capture ran as before


@pytest.mark.parametrize("kind", ["predict", "unrelated"])
def test_an_evaluation_without_a_loss_of_its_output_records_none(tmp_path, kind):
    """A predict loop (argmax, no loss) and a loop whose only loss function takes no tensor
    made from the model's output: no EVAL `loss`; after `MISSES` such forwards in a row the
    window stops opening (the loop goes on unchanged)."""
    torch.manual_seed(0)
    model = MnistNet()
    x, y = _data(40)
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        model.eval()
        with torch.no_grad():
            for i in range(40):
                pred = model(x[i]).argmax(1)
                if kind == "unrelated":
                    F.cross_entropy(torch.randn(BATCH, 4), y[i])
                assert pred.shape == (BATCH,)
    trial = mldbg.create_trial(str(tmp_path))
    assert "loss" not in trial.tensor_names()
    assert not _windows_left()


@pytest.mark.parametrize(
    ("func", "kwargs"),
    [
        (F.cross_entropy, {"reduction": "none", "ignore_index": 2}),
        (F.cross_entropy, {"reduction": "sum", "weight": torch.tensor([1.0, 2.0, 0.5, 1.0])}),
        (F.nll_loss, {"reduction": "sum"}),
        (F.mse_loss, {"reduction": "sum"}),
        (F.l1_loss, {"reduction": "none"}),
        (F.binary_cross_entropy_with_logits, {"reduction": "mean"}),
    ],
)
def test_the_recorded_value_is_the_mean_reduction(func, kwargs):
    """`mean_loss` gives what `reduction="mean"` gives, whatever the call's reduction."""
    from mldbg.frameworks.torch_eval_loss import _SIGNATURES, mean_loss

    torch.manual_seed(0)
    inp = torch.randn(8, 4)
    if func in (F.cross_entropy, F.nll_loss):
        target = torch.randint(0, 4, (8,))
        inp = inp.log_softmax(1) if func is F.nll_loss else inp
    elif func is F.binary_cross_entropy_with_logits:
        target = torch.rand(8, 4)
    else:
        target = torch.randn(8, 4)
    out = func(inp, target, **kwargs)
    bound = _SIGNATURES[func].bind(inp, target, **kwargs).arguments
    reference = func(inp, target, **{**kwargs, "reduction": "mean"})
    torch.testing.assert_close(mean_loss(func, bound, out), reference)


def test_a_loss_trained_on_in_eval_mode_is_no_evaluations(tmp_path):
    """A model trained in eval mode (its forwards EVAL steps): the functional loss it gives to
    backward is not recorded as an evaluation's loss."""
    torch.manual_seed(0)
    model = MnistNet().eval()
    x, y = _data(6)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        for i in range(6):
            opt.zero_grad()
            F.nll_loss(model(x[i]), y[i]).backward()
            opt.step()
    assert "loss" not in mldbg.create_trial(str(tmp_path)).tensor_names()
    assert not _windows_left()


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _regression(path, evaluate, steps: int = 12, every: int = 4) -> list[float]:
    """A regression trained on `((out - y) ** 2).mean()` given to backward, with an
    evaluation under `torch.no_grad()` every `every` steps computing `evaluate(out, y)` on
    two batches. Returns the values `evaluate` gave (floats; None where it gives none)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    w = torch.randn(8, 1, generator=g)
    model = Regressor()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    given = []
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        for step in range(steps):
            model.train()
            x = torch.randn(32, 8, generator=g)
            opt.zero_grad()
            ((model(x) - x @ w) ** 2).mean().backward()
            opt.step()
            if (step + 1) % every == 0:
                model.eval()
                with torch.no_grad():
                    for _ in range(2):
                        x = torch.randn(32, 8, generator=g)
                        value = evaluate(model(x), x @ w)
                        given.append(None if value is None else float(value))
    assert not _windows_left()
    return given


WRITTEN_OUT = {
    "((out - y) ** 2).mean()": lambda out, y: ((out - y) ** 2).mean(),
    "(out - y).abs().mean()": lambda out, y: (out - y).abs().mean(),
    "((out - y) ** 2).sum() / n": lambda out, y: ((out - y) ** 2).sum() / out.numel(),
    "torch.mean(torch.square(out - y))": lambda out, y: torch.mean(torch.square(out - y)),
}


@pytest.mark.parametrize("name", list(WRITTEN_OUT))
def test_an_evaluation_loss_written_out_in_torch_operations_is_recorded(tmp_path, name):
    """No loss function, no backward: the first mean or sum to one value of a tensor made
    from the output and the labels is the evaluation's loss (a sum as its mean), with its
    predictions and labels (`samples`, their shapes)."""
    given = _regression(tmp_path, WRITTEN_OUT[name])
    np.testing.assert_allclose(_eval_losses(tmp_path), given, rtol=1e-5)
    trial = mldbg.create_trial(str(tmp_path))
    for tensor, collection in (("loss_input_0", "predictions"), ("loss_input_1", "labels")):
        assert tensor in trial.collections()[collection]
        assert trial.tensor(tensor).steps(mode=Mode.EVAL), tensor


QUIET = {
    "the output's own mean (no labels)": lambda out, y: out.mean(),
    "its mean square": lambda out, y: out.pow(2).mean(),
    "a sign accuracy": lambda out, y: ((out > 0) == (y > 0)).float().mean(),
    "through a parameter": lambda out, y: (out * nn.Parameter(torch.ones(1, 1))).sum(),
    "times a number": lambda out, y: (out * torch.tensor(2.0)).mean(),
    "nothing": lambda out, y: None,
}


@pytest.mark.parametrize("name", list(QUIET))
def test_a_statistic_of_the_output_alone_is_no_loss(tmp_path, name):
    """A reduction of the output with no tensor of the data in it (its mean, a scale, a
    parameter), or a metric on ids (no floating tensor made from the output): no EVAL loss."""
    _regression(tmp_path, QUIET[name])
    trial = mldbg.create_trial(str(tmp_path))
    assert not trial.tensor("loss").values(Mode.EVAL)


def test_an_mnist_test_loop_records_its_labels_and_predictions(tmp_path):
    """pytorch/examples mnist's `test()`: the labels and predictions `F.nll_loss` is called on
    under no_grad are the EVAL steps' `loss_input_1` / `loss_input_0`, with their class
    counts and confusion matrix, as a training step's."""
    _mnist(tmp_path, epochs=2)
    trial = mldbg.create_trial(str(tmp_path))
    labels = trial.tensor("loss_input_1")
    eval_steps = labels.steps(mode=Mode.EVAL)
    assert len(eval_steps) == 8, eval_steps  # 2 epochs x 4 test batches, all statistics steps
    counts = trial.tensor("stats/loss_input_1/class_counts").values(Mode.EVAL)
    assert sorted(counts) == eval_steps
    assert all(c.sum() == BATCH for c in counts.values())
    assert "confusion" in trial.vector_statistics("loss_input_1")
    assert "loss_input_0" in trial.collections()["predictions"]


class Classifier(nn.Module):
    """A Hugging Face-style classifier: `model(x, labels=y)` returns `{"logits", "loss"}`."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 6))

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits, labels)
        return out


def _clusters(path, noise: float, style: str = "functional") -> str:
    """A 6-class MLP on Gaussian clusters, a validation pass every 10 steps under no_grad on
    clean held-out labels, recorded with the two lines only; `noise`: that share of class 0's
    training labels turned into class 1. `style` "functional": `F.cross_entropy(net(x), y)`
    given to backward and computed in the validation; "returned": `model(x, labels=y)`
    returns its loss and logits; "compiled": the same model `torch.compile`d (aot_eager)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    centers = torch.randn(6, 10, generator=g) * 3
    y = torch.randint(0, 6, (5120,), generator=g)
    x = centers[y] + torch.randn(5120, 10, generator=g)
    x_eval, y_eval, x, y = x[4096:], y[4096:], x[:4096], y[:4096]
    y = torch.where((y == 0) & (torch.rand(4096, generator=g) < noise), 1, y)
    net = Classifier()
    model = torch.compile(net, backend="aot_eager") if style == "compiled" else net

    def loss_of(xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        if style == "functional":
            return F.cross_entropy(model(xb)["logits"], yb)
        return model(xb, labels=yb)["loss"]

    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        for step in range(300):
            model.train()
            idx = torch.randint(0, len(x), (64,), generator=g)
            opt.zero_grad()
            loss_of(x[idx], y[idx]).backward()
            opt.step()
            if (step + 1) % 10 == 0:
                model.eval()
                with torch.no_grad():
                    for i in range(0, len(x_eval), 256):
                        loss_of(x_eval[i : i + 256], y_eval[i : i + 256])
    return str(path)


@pytest.mark.parametrize("style", ["functional", "returned", "compiled"])
def test_label_noise_is_told_from_the_clean_evaluation_labels(tmp_path, style):
    """`train_label_noise` compares the training confusion with the evaluation's: with no
    loss module registered, the labels come from the evaluation's `F.cross_entropy` call, or
    from the call of a model that computes its own loss (`labels=`) with its returned
    logits, where no autograd node holds them (under no_grad; inside a compiled graph).
    Noise on class 0's training labels fires on that pair; the clean twin is quiet."""
    rule = ["train_label_noise"]
    noisy = _clusters(tmp_path / "noisy", noise=0.3, style=style)
    trial = mldbg.create_trial(noisy)
    for mode in (Mode.TRAIN, Mode.EVAL):
        assert trial.tensor("stats/loss_input_1/confusion_steps").steps(mode=mode), mode
    found = mldbg.check(noisy, rules=rule)
    assert found and "pair 0 -> 1" in found[0].message, [str(f) for f in found]
    assert not mldbg.check(_clusters(tmp_path / "clean", noise=0.0, style=style), rules=rule)


def test_a_cross_entropy_written_out_over_one_hot_labels_is_the_loss(tmp_path):
    """mnist's shape evaluated with `-(F.one_hot(y, C) * log_probs).sum(1).mean()` (no loss
    function): recorded as the evaluation's loss, the value `F.nll_loss` gives."""
    torch.manual_seed(0)
    model = MnistNet()
    x, y = _data(8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    expected = []
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        for i in range(6):
            model.train()
            opt.zero_grad()
            F.nll_loss(model(x[i]), y[i]).backward()
            opt.step()
            model.eval()
            with torch.no_grad():
                out = model(x[6 + i % 2])
                written = -(F.one_hot(y[6 + i % 2], out.shape[1]) * out).sum(1).mean()
                torch.testing.assert_close(written, F.nll_loss(out, y[6 + i % 2]))
                expected.append(written.item())
    np.testing.assert_allclose(_eval_losses(tmp_path), expected, rtol=1e-5)


@pytest.mark.parametrize("bug", [True, False], ids=["(B, 1) against (B,)", "squeezed twin"])
def test_a_broadcast_in_a_loss_written_out_is_found_from_the_evaluation(tmp_path, bug):
    """`((out - y) ** 2).mean()` with out (B, 1) and y (B,): every prediction is compared with
    every label. The training's loss leaves no node that saved its inputs; the evaluation's
    loss written out gives their shapes: `batch_dim_mismatch` fires at the first evaluation,
    its squeezed twin is quiet."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    w = torch.randn(8, generator=g)
    model = Regressor()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def predict(x: torch.Tensor) -> torch.Tensor:
        return model(x) if bug else model(x).squeeze(1)

    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        for step in range(12):
            model.train()
            x = torch.randn(32, 8, generator=g)
            opt.zero_grad()
            ((predict(x) - x @ w) ** 2).mean().backward()
            opt.step()
            if step % 5 == 4:
                model.eval()
                with torch.no_grad():
                    x = torch.randn(32, 8, generator=g)
                    ((predict(x) - x @ w) ** 2).mean()
    found = mldbg.check(str(tmp_path), rules=["batch_dim_mismatch"])
    if bug:
        assert found and found[0].mode == "EVAL" and "[32, 32]" in found[0].message, found
    else:
        assert not found


PER_ITEM = {
    "masked": lambda out, y: (F.mse_loss(out, y, reduction="none") * (y > 0)).sum() / (y > 0).sum(),
    "permutation-invariant": lambda out, y: (
        torch.stack(
            [F.mse_loss(out, y, reduction="none").mean(1), F.mse_loss(out, -y, reduction="none").mean(1)], 1
        )
        .min(1)
        .values.mean()
    ),
    "weighted mean": lambda out, y: (
        F.l1_loss(out, y, reduction="none") * torch.linspace(0, 1, 32)[:, None]
    ).mean(),
}


@pytest.mark.parametrize("name", list(PER_ITEM))
def test_a_loss_per_item_reduced_further_is_recorded_as_reduced(tmp_path, name):
    """A loss function with `reduction="none"` whose items the evaluation reduces itself (a
    mask, EEND's best of the speakers' permutations, weights): the value recorded is the one
    it computes, not the mean of the first call's items (which for a permutation-invariant
    loss is the loss of one fixed permutation, rising as the model learns the others)."""
    given = _regression(tmp_path, PER_ITEM[name])
    np.testing.assert_allclose(_eval_losses(tmp_path), given, rtol=1e-5)
