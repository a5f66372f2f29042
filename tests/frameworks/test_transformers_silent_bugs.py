"""Issue 27's kinds through `mldbg.transformers.DebuggerCallback` (the one callback), those
`test_transformers_lm.py` does not train: a `compute_loss` of the user's that does not shift
the labels, or puts a softmax before the cross-entropy (the loss outside the model's forward:
its counts come from the tensor given to backward); a parameter cut off from its gradient; a
mixture of experts whose router concentrates; a `compute_loss` that runs a forward in eval mode
and trains in it. Each against its fixed twin, quiet. (A missing `zero_grad()` cannot happen
here: the `Trainer` resets the gradients itself after every optimizer step; its default
clipping, `max_grad_norm=1.0`, is on in every run here, and `gradient_not_reset` stays quiet.)"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mldbg

pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

from tests.rules.language_models import zipf_stream  # noqa: E402
from tests.rules.test_parameter_without_gradient import DetachedNet  # noqa: E402
from tests.rules.test_router_collapse import Net  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments  # noqa: E402

from mldbg.transformers import DebuggerCallback  # noqa: E402

VOCABULARY, LENGTH, N = 64, 16, 64


class Dicts(torch.utils.data.Dataset):
    def __init__(self, rows: list[dict[str, torch.Tensor]]):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.rows[i]


def _train(
    path, model: nn.Module, data: Dicts, trainer: type[Trainer] = Trainer, batch: int = 8, **kw: Any
) -> None:
    kw.setdefault("learning_rate", 1e-3)
    args = TrainingArguments(
        output_dir=str(path / "hf"), per_device_train_batch_size=batch, num_train_epochs=1,
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, logging_strategy="no",
        remove_unused_columns=False, **kw,
    )  # fmt: skip
    trainer(model=model, args=args, train_dataset=data, callbacks=[DebuggerCallback(path / "run")]).train()


def _found(path, rules: list[str] | None = None) -> dict[str, int]:
    found: dict[str, int] = {}
    for f in mldbg.check(str(path / "run"), rules=rules):
        found.setdefault(f.rule, f.step)
    return found


# a compute_loss of the user's ---------------------------------------------------------------
LM_RULES = [
    "labels_not_shifted",
    "labels_shifted_twice",
    "missing_causal_mask",
    "softmax_before_cross_entropy",
]


class OwnLoss(Trainer):
    """`compute_loss` written by the user: the labels taken out, the cross-entropy outside the
    model; `shift` False forgets to shift them, `softmax` puts a softmax before it."""

    shift, softmax = True, False

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        logits = model(**inputs).logits
        if self.shift:
            logits, labels = logits[:, :-1], labels[:, 1:]
        if self.softmax:
            logits = logits.softmax(-1)
        return F.cross_entropy(logits.reshape(-1, VOCABULARY), labels.reshape(-1))


def _gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=VOCABULARY, n_positions=32)
    return GPT2LMHeadModel(config)


def _rows() -> Dicts:
    ids = zipf_stream(N * LENGTH, VOCABULARY, 0).view(N, LENGTH)
    return Dicts([{"input_ids": r, "labels": r} for r in ids])


@pytest.mark.parametrize(
    ("shift", "softmax", "rule"),
    [(False, False, "labels_not_shifted"), (True, True, "softmax_before_cross_entropy")],
    ids=["not_shifted", "softmax"],
)
def test_a_compute_loss_of_the_users_is_judged(tmp_path, shift, softmax, rule):
    bug = type("Bug", (OwnLoss,), {"shift": shift, "softmax": softmax})
    _train(tmp_path / "bug", _gpt2(), _rows(), bug)
    found = _found(tmp_path / "bug", LM_RULES)
    assert list(found) == [rule] and found[rule] <= 5, found
    _train(tmp_path / "twin", _gpt2(), _rows(), OwnLoss)
    assert _found(tmp_path / "twin", LM_RULES) == {}
    assert "lm/align_0" in mldbg.create_trial(str(tmp_path / "twin" / "run")).tensor_names()  # judged


# a parameter without gradient ---------------------------------------------------------------
class Classifier(nn.Module):
    """`tests.rules`' net whose encoder may reach its head detached, as a model the `Trainer`
    takes: `model(x=..., labels=...)` returns its loss."""

    def __init__(self, cut: bool):
        super().__init__()
        self.net = DetachedNet(cut)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        return {"loss": F.cross_entropy(logits, labels), "logits": logits}


def _classes(n: int = 192) -> Dicts:
    g = torch.Generator().manual_seed(1)
    x, target = torch.randn(n, 10, generator=g), torch.randn(10, 3, generator=g)
    return Dicts([{"x": a, "labels": b} for a, b in zip(x, (x @ target).argmax(1), strict=True)])


def test_a_detached_branch_is_found_and_the_twin_is_quiet(tmp_path):
    torch.manual_seed(0)
    _train(tmp_path / "cut", Classifier(cut=True), _classes(), batch=16)
    found = mldbg.check(str(tmp_path / "cut" / "run"), rules=["parameter_without_gradient"])
    assert found and found[0].step <= 5, found
    assert {"net.encoder.0.weight", "net.encoder.2.weight"} <= set(found[0].tensors), found
    torch.manual_seed(0)
    _train(tmp_path / "twin", Classifier(cut=False), _classes(), batch=16)
    assert mldbg.check(str(tmp_path / "twin" / "run"), rules=["parameter_without_gradient"]) == []


# a router that concentrates -----------------------------------------------------------------
class MoEClassifier(nn.Module):
    """`tests.rules`' Switch-style MoE classifier, its balancing loss weighted `balance`."""

    def __init__(self, balance: float):
        super().__init__()
        self.net, self.balance = Net(), balance

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        return {"loss": F.cross_entropy(logits, labels) + self.balance * self.net.moe.aux, "logits": logits}


def _moe_data(steps: int = 100, batch: int = 256) -> Dicts:
    g = torch.Generator().manual_seed(1)
    target = torch.randn(16, 8, generator=g)
    x = torch.randn(steps * batch, 16, generator=g)
    return Dicts([{"x": a, "labels": b} for a, b in zip(x, (x @ target).argmax(1), strict=True)])


def test_a_concentrating_router_is_found_and_the_balanced_twin_is_quiet(tmp_path):
    """Without a balancing loss the top expert passes twice its fair share (the concentration
    of issue 27) long before the collapse; the Switch Transformer's balancing loss keeps it
    quiet. lr 1e-2 (Adam), as in tests/rules/test_router_collapse.py."""
    torch.manual_seed(0)
    _train(
        tmp_path / "bug", MoEClassifier(0.0), _moe_data(), batch=256, learning_rate=1e-2, max_grad_norm=0.0
    )
    found = [f for f in mldbg.check(str(tmp_path / "bug" / "run")) if f.rule == "router_collapse"]
    assert found and found[0].tensors == ["expert_counts/net.moe.router"], found
    torch.manual_seed(0)
    _train(
        tmp_path / "twin", MoEClassifier(0.1), _moe_data(), batch=256, learning_rate=1e-2, max_grad_norm=0.0
    )
    assert "router_collapse" not in _found(tmp_path / "twin")
    trial = mldbg.create_trial(str(tmp_path / "twin" / "run"))
    assert len(trial.tensor("expert_counts/net.moe.router").steps()) >= 90  # judged, every step


# training in eval mode ----------------------------------------------------------------------
class WithDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3))

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        return {"loss": F.cross_entropy(logits, labels), "logits": logits}


class SelfReference(Trainer):
    """`compute_loss` that scores the batch in eval mode first (a reference, under no_grad) and
    forgets `model.train()` before the training forward, unless `restore`."""

    restore = False

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        model.eval()
        with torch.no_grad():
            model(**inputs)
        if self.restore:
            model.train()
        return model(**inputs)["loss"]


def test_a_training_forward_left_in_eval_mode_is_found_and_the_twin_is_quiet(tmp_path):
    torch.manual_seed(0)
    _train(tmp_path / "bug", WithDropout(), _classes(), SelfReference, batch=16)
    found = _found(tmp_path / "bug")
    assert found.get("train_in_eval_mode", 99) <= 5, found
    torch.manual_seed(0)
    _train(
        tmp_path / "twin",
        WithDropout(),
        _classes(),
        type("Fixed", (SelfReference,), {"restore": True}),
        batch=16,
    )
    assert "train_in_eval_mode" not in _found(tmp_path / "twin")
    assert "gradient_not_reset" not in _found(tmp_path / "twin")  # clipped at 1.0 by default
