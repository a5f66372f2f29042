"""The default rules stay quiet on a healthy tiny BERT with Hugging Face's default init
(`initializer_range=0.02`), trained ~40 steps by a `Trainer` with its default linear schedule
through `mldbg.transformers.DebuggerCallback`: at that init the attention's key bias gets no
gradient but float noise (softmax is invariant to it), the query/key weights' gradients are
~1e-6 (each one's is scaled by the other's small weights), the weights scale their input's
variance by ~0.01 (LayerNorm after each sublayer restores it), and at the end of a schedule
decayed to 0 Adam's steps fall below `unchanged_tensor`'s tolerance on LayerNorm's weights."""

from __future__ import annotations

import pytest
import torch

import mldbg

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments  # noqa: E402

from mldbg.transformers import DebuggerCallback  # noqa: E402
from tests.tiny import Tokens  # noqa: E402

N_TRAIN = 64


def _train(path, lr: float, zero_linear: bool = False) -> list[mldbg.Finding]:
    """~40 steps of the tiny BERT (Hugging Face's default init unless `zero_linear`: every
    Linear weight 0) under a Trainer with its default linear schedule; the default rules' findings."""
    torch.manual_seed(0)
    model = BertForSequenceClassification(
        BertConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, vocab_size=100
        )
    )
    assert model.config.initializer_range == 0.02  # Hugging Face's default
    if zero_linear:
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, torch.nn.Linear):
                    m.weight.zero_()
    args = TrainingArguments(
        output_dir=str(path / "hf"), per_device_train_batch_size=8, num_train_epochs=5, learning_rate=lr,
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, logging_strategy="no",
    )  # fmt: skip
    assert args.lr_scheduler_type == "linear"  # decays to 0 at the last step
    trainer = Trainer(
        model=model, args=args, train_dataset=Tokens(N_TRAIN), callbacks=[DebuggerCallback(path / "run")]
    )
    trainer.train()
    assert trainer.state.global_step == 40
    return mldbg.check(path / "run")


@pytest.mark.parametrize("lr", [5e-5, 1e-3])
def test_default_rules_quiet_on_a_tiny_bert_with_the_default_init(tmp_path, lr):
    errors = [f for f in _train(tmp_path, lr) if f.severity == "error"]
    assert errors == [], "\n".join(map(str, errors))


def test_the_defects_still_fire_on_the_tiny_bert(tmp_path):
    """A learning rate of 0 (the parameters keep their exact values) and Linear weights all
    zero (identical neurons): the rules left quiet above still see them on the same model."""
    frozen = [f for f in _train(tmp_path / "lr0", 0.0) if f.rule == "unchanged_tensor"]
    assert frozen and frozen[0].step <= 3, [str(f) for f in frozen]
    assert "bert.encoder.layer.0.attention.output.LayerNorm.weight" in frozen[0].tensors
    zero = [
        f for f in _train(tmp_path / "zero", 1e-3, zero_linear=True) if f.rule == "poor_weight_initialization"
    ]
    assert zero and "identical weights" in zero[0].message, [str(f) for f in zero]
