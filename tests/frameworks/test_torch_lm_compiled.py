"""A `torch.compile`d language model that computes its loss inside (nanoGPT's default
`compile = True`, `logits, loss = model(x, y)`; a Hugging Face-style model called with
`labels=`): its autograd graph is one compiled node, where no cross-entropy shows, so the
language-model counts come from its returned logits and the targets of its call, the layout
read from the returned loss (`torch_lm.returned_statistics`): at every step where the compiled
graph runs, which `statistics_eager=False` makes every step (by default the statistics steps
run eagerly, where the graph shows the cross-entropy: test_torch_compiled_statistics.py). Real
tiny trainings with the
`aot_eager` backend (the graph inductor's is, without its minute of C++ compilation on a
loaded CPU): the mistakes are found within 5 steps, the fixed twins are quiet."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from tests.rules.language_models import zipf_stream
from tests.rules.lm_defects import LM, PAD, HFStyle
from torch._dynamo.utils import counters

import mldbg
import mldbg.torch
from mldbg.frameworks import torch_lm

torch.set_num_threads(1)

LM_RULES = [
    "labels_not_shifted",
    "labels_shifted_twice",
    "padding_in_loss",
    "softmax_before_cross_entropy",
    "missing_causal_mask",
]
VOCABULARY, LENGTH, BATCH = 48, 16, 8


def _train(
    path: Path, *, shift: int, style: str = "nanogpt", padding: str | None = None, steps: int = 8
) -> None:
    """`style` "nanogpt": `_, loss = model(x, y)` with y the ids `shift` later; "hf":
    `model(input_ids=x, labels=y)["loss"]`, the model shifting once itself (y = x for a
    correct run). `padding`: rows padded with PAD in x, the labels there -100 ("ignored") or
    PAD ("kept")."""
    torch.manual_seed(0)
    stream = zipf_stream(BATCH * (LENGTH + 2) * 50, VOCABULARY, 0)
    g = torch.Generator().manual_seed(0)
    model = (HFStyle if style == "hf" else LM)(VOCABULARY, kind="transformer")  # a GRU warns under dynamo
    compiled = torch.compile(model, backend="aot_eager")
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    offset = shift - 1 if style == "hf" else shift
    with mldbg.torch.Hook(str(path), statistics_eager=False) as hook:  # every step compiled
        hook.register_module(compiled)
        for _ in range(steps):
            at = torch.randint(len(stream) - LENGTH - 3, (BATCH,), generator=g).tolist()
            x = torch.stack([stream[j : j + LENGTH] for j in at])
            y = torch.stack([stream[j + offset : j + offset + LENGTH] for j in at])
            if padding is not None:
                lengths = torch.randint(LENGTH // 3, LENGTH + 1, (BATCH,), generator=g)
                lengths[0] = LENGTH
                pad = torch.arange(LENGTH)[None, :] >= lengths[:, None]
                x = x.masked_fill(pad, PAD)
                y = y.masked_fill(pad, -100 if padding == "ignored" else PAD)
            opt.zero_grad()
            if style == "hf":
                loss = compiled(input_ids=x, labels=y)["loss"]
            else:
                _, loss = compiled(x, y)
            assert torch_lm.nll_node(loss) is None  # the cross-entropy is inside the compiled node
            loss.backward()
            opt.step()


def _found(path: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for f in mldbg.check(str(path), rules=LM_RULES):
        found.setdefault(f.rule, f.step)
    return found


@pytest.mark.parametrize(
    ("style", "shift", "padding", "rule"),
    [
        pytest.param("nanogpt", 0, None, "labels_not_shifted", id="nanoGPT, labels not shifted"),
        pytest.param("nanogpt", 2, None, "labels_shifted_twice", id="nanoGPT, labels shifted twice"),
        pytest.param("hf", 2, None, "labels_shifted_twice", id="labels= shifted before the model shifts"),
        pytest.param("nanogpt", 1, "kept", "padding_in_loss", id="nanoGPT, padding kept in the labels"),
    ],
)
def test_a_compiled_models_label_mistakes_are_found_within_five_steps(tmp_path, style, shift, padding, rule):
    _train(tmp_path, shift=shift, style=style, padding=padding)
    found = _found(tmp_path)
    assert rule in found and found[rule] <= 5, found
    assert set(found) == {rule}, found


@pytest.mark.parametrize(
    ("style", "padding"),
    [
        pytest.param("nanogpt", None, id="nanoGPT, shifted once"),
        pytest.param("hf", None, id="labels=input_ids, the model shifts"),
        pytest.param("nanogpt", "ignored", id="nanoGPT, padding ignored"),
        pytest.param("hf", "ignored", id="Hugging Face style, padding ignored"),
    ],
)
def test_the_compiled_twins_are_quiet(tmp_path, style, padding):
    _train(tmp_path, shift=1, style=style, padding=padding, steps=12)
    trial = mldbg.create_trial(str(tmp_path))
    assert "lm/align_0" in trial.tensor_names()  # the counts were recorded: quiet, not blind
    assert _found(tmp_path) == {}


def test_the_layout_is_read_from_the_returned_loss():
    """The counts of the layout whose cross-entropy is the returned loss; none when both or
    neither match (every count 0)."""
    torch.manual_seed(0)
    ids = torch.randint(0, 12, (4, 10))
    logits = torch.randn(4, 10, 12) * 3
    unshifted = F.cross_entropy(logits.reshape(-1, 12), ids.reshape(-1))
    shifted = F.cross_entropy(logits[:, :-1].reshape(-1, 12), ids[:, 1:].reshape(-1))
    same = torch_lm.returned_statistics(unshifted, logits, ids, ids)
    assert same is not None and same["align_0"] == same["eligible_0"] == 40  # targets = the ids
    once = torch_lm.returned_statistics(shifted, logits, ids, ids)
    assert once is not None and once["eligible_0"] == 36 and once["align_1_1"] == once["eligible_1_1"]
    neither = torch_lm.returned_statistics(unshifted + 1.0, logits, ids, ids)
    assert neither is not None and neither["eligible_0"] == 0 and neither["valid"] == 0


def test_the_targets_of_a_model_call():
    """`labels=` or `targets=`, else the integer argument after the ids (the same tensor too:
    `model(x, x)`); none for a call with the ids alone."""
    x, y = torch.randint(0, 9, (2, 5)), torch.randint(0, 9, (2, 5))
    assert torch_lm.targets_of((x, y), {}, x) is y
    assert torch_lm.targets_of((x, x), {}, x) is x
    assert torch_lm.targets_of((x,), {"labels": y}, x) is y
    assert torch_lm.targets_of((), {"input_ids": x, "labels": x}, x) is x
    assert torch_lm.targets_of((x,), {}, x) is None
    assert torch_lm.targets_of((x, y[:, :3]), {}, x) is None


def _hf_train(path: Path, shift: int, compile_: bool = True) -> None:
    """A tiny GPT-2 under the Hugging Face `Trainer` with `torch_compile=True` (aot_eager),
    recorded by the callback; `labels` are the ids `shift - 1` later (the model shifts them
    once itself: 1 is right, 2 shifts them twice)."""
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from mldbg.transformers import DebuggerCallback

    class Rows(torch.utils.data.Dataset):
        def __init__(self) -> None:
            stream = zipf_stream(64 * (LENGTH + 2), VOCABULARY, 0)
            self.ids = torch.stack(
                [stream[i * (LENGTH + 2) : i * (LENGTH + 2) + LENGTH + 1] for i in range(64)]
            )

        def __len__(self) -> int:
            return len(self.ids)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            row = self.ids[i]
            return {"input_ids": row[:LENGTH], "labels": row[shift - 1 : shift - 1 + LENGTH]}

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=VOCABULARY, n_positions=32)
    args = TrainingArguments(
        output_dir=str(path / "hf"), per_device_train_batch_size=8, num_train_epochs=1,
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, logging_strategy="no",
        torch_compile=compile_, torch_compile_backend="aot_eager",
    )  # fmt: skip
    trainer = Trainer(
        model=GPT2LMHeadModel(config),
        args=args,
        train_dataset=Rows(),
        # statistics at steps 0-2, then every 3rd: the other steps run the compiled graph
        callbacks=[DebuggerCallback(path / "run", statistics_warmup=3, statistics_every=3)],
    )
    trainer.train()
    assert torch._dynamo.eval_frame._stance.stance == "default"  # the stance is back


# dynamo's own warning while it traces GPT-2's loss (without mldbg too); an error under pytest
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_a_hugging_face_trainer_with_torch_compile_gets_the_language_model_counts(tmp_path):
    """`TrainingArguments(torch_compile=True)`: the `Trainer` compiles the model after the
    callback registered it, so the callback runs the statistics steps eagerly (from
    `on_step_begin` to `on_step_end`), where the cross-entropy shows: labels shifted twice are
    found within 5 steps, the twin (labels = the ids, the model shifts) is quiet, judged."""
    _hf_train(tmp_path / "twice", shift=2)
    found = _found(tmp_path / "twice" / "run")
    assert found.get("labels_shifted_twice", 99) <= 5, found
    torch._dynamo.reset()
    counters.clear()
    _hf_train(tmp_path / "twin", shift=1)
    assert counters["stats"]["unique_graphs"] >= 1  # the other steps ran compiled
    assert _found(tmp_path / "twin" / "run") == {}
    trial = mldbg.create_trial(str(tmp_path / "twin" / "run"))
    assert trial.tensor("loss").steps() == list(range(8))
    assert trial.tensor("lm/align_0").steps() == [0, 1, 2, 3, 6]  # the statistics steps: judged


# dynamo's own warning while it traces GPT-2's loss (without mldbg too); an error under pytest
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_a_hugging_face_trainer_with_torch_compile_trains_under_the_callback(tmp_path):
    """`TrainingArguments(torch_compile=True)`: the callback's hook on the model's output is
    traced into the compiled graph, where the hook must add nothing (its tensors are not
    values there): the training runs as without mldbg and its loss is recorded. (Its
    language-model counts are not: the callback's hook does not run outside the trace.)"""
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from mldbg.transformers import DebuggerCallback

    class Rows(torch.utils.data.Dataset):
        def __init__(self) -> None:
            self.ids = zipf_stream(32 * LENGTH, VOCABULARY, 0).view(32, LENGTH)

        def __len__(self) -> int:
            return len(self.ids)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return {"input_ids": self.ids[i], "labels": self.ids[i]}

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=VOCABULARY, n_positions=32)
    args = TrainingArguments(
        output_dir=str(tmp_path / "hf"), per_device_train_batch_size=8, num_train_epochs=1,
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, logging_strategy="no",
        torch_compile=True, torch_compile_backend="aot_eager",
    )  # fmt: skip
    trainer = Trainer(
        model=GPT2LMHeadModel(config),
        args=args,
        train_dataset=Rows(),
        callbacks=[DebuggerCallback(tmp_path / "run")],
    )
    trainer.train()
    trial = mldbg.create_trial(str(tmp_path / "run"))
    assert len(trial.tensor("loss").steps()) == 4
