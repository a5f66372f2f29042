"""The language-model rules through `mldbg.transformers.DebuggerCallback` (the one callback, no
other option): a tiny GPT-2 built from a config (no downloads) trained by a Hugging Face
`Trainer` on Zipf token rows. Labels shifted before the model (which shifts them again), and
padding kept in the labels (the pad token is the EOS token, as with GPT-2's tokenizer), are
found within 5 steps; the fixed twins (labels=input_ids; -100 at the padded positions) are
quiet."""

from __future__ import annotations

import pytest
import torch

import mldbg

pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

from tests.rules.language_models import zipf_stream  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments  # noqa: E402

from mldbg.transformers import DebuggerCallback  # noqa: E402

VOCABULARY, LENGTH, N = 64, 16, 64
EOS = 0
RULES = ["labels_not_shifted", "labels_shifted_twice", "padding_in_loss", "missing_causal_mask"]


class Rows(torch.utils.data.Dataset):
    """Zipf token rows; `labels`: "same" (labels=input_ids), "shifted" (input_ids[1:], the
    mistake), with `padding`: rows cut short and padded with EOS ("kept": EOS in the labels
    too, "ignored": -100 there)."""

    def __init__(self, labels: str = "same", padding: str | None = None, seed: int = 0):
        stream = zipf_stream(N * (LENGTH + 1), VOCABULARY, seed).view(N, LENGTH + 1) + 1  # ids 1.. (0 is EOS)
        stream = stream.clamp(max=VOCABULARY - 1)
        self.ids = stream[:, :LENGTH].clone()
        self.labels = self.ids.clone() if labels == "same" else stream[:, 1:].clone()
        self.mask = torch.ones_like(self.ids)
        if padding is not None:
            g = torch.Generator().manual_seed(seed)
            lengths = torch.randint(LENGTH // 3, LENGTH, (N,), generator=g)
            pad = torch.arange(LENGTH)[None, :] >= lengths[:, None]
            self.ids[pad], self.mask[pad] = EOS, 0
            self.labels[pad] = EOS if padding == "kept" else -100

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "attention_mask": self.mask[i], "labels": self.labels[i]}


def _train(path, data: Rows, model: torch.nn.Module | None = None) -> None:
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=1,
        n_head=2,
        n_embd=32,
        vocab_size=VOCABULARY,
        n_positions=32,
        bos_token_id=EOS,
        eos_token_id=EOS,
    )
    args = TrainingArguments(
        output_dir=str(path / "hf"), per_device_train_batch_size=8, num_train_epochs=1, learning_rate=1e-3,
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, logging_strategy="no",
    )  # fmt: skip
    trainer = Trainer(
        model=GPT2LMHeadModel(config) if model is None else model,
        args=args,
        train_dataset=data,
        callbacks=[DebuggerCallback(path / "run")],
    )
    trainer.train()


@pytest.mark.parametrize(
    ("bug", "twin", "rule"),
    [
        (Rows(labels="shifted"), Rows(), "labels_shifted_twice"),
        (Rows(padding="kept"), Rows(padding="ignored"), "padding_in_loss"),
    ],
    ids=["shifted_twice", "padding_kept"],
)
def test_language_model_mistakes_through_the_trainer(tmp_path, bug, twin, rule):
    _train(tmp_path / "bug", bug)
    found = mldbg.check(str(tmp_path / "bug" / "run"), rules=RULES)
    assert [f.rule for f in found] == [rule], found
    assert found[0].step <= 5, found
    _train(tmp_path / "twin", twin)
    assert mldbg.check(str(tmp_path / "twin" / "run"), rules=RULES) == []


@pytest.mark.filterwarnings("ignore:.*is_decoder.*")
@pytest.mark.parametrize("decoder", [False, True], ids=["encoder_as_lm", "decoder"])
def test_an_encoder_trained_as_a_causal_lm_is_found(tmp_path, decoder):
    """`BertLMHeadModel` without `is_decoder=True` (a warning in its log, easily missed) attends
    both ways while its loss asks for the next token: the causal probe finds it within 5 steps;
    with `is_decoder=True` (its causal mask) it is quiet."""
    from transformers import BertConfig, BertLMHeadModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=VOCABULARY, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32, is_decoder=decoder,
    )  # fmt: skip
    _train(tmp_path, Rows(), BertLMHeadModel(config))
    found = mldbg.check(str(tmp_path / "run"), rules=RULES)
    if decoder:
        assert found == [], found
    else:
        assert [f.rule for f in found] == ["missing_causal_mask"], found
        assert found[0].step <= 5, found
