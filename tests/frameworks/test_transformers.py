"""`mldbg.transformers.DebuggerCallback`: a tiny BERT built from a config (no downloads) trained
on CPU by a Hugging Face `Trainer` with the callback, read back against the model's own values
(the losses of its outputs, the final parameters, `eval_loss`), gradient accumulation as one
step per optimizer step, evaluation as EVAL, the default rules on a diverging run and a
healthy one, and a stop action that ends `train()` early and cleanly."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest
import torch

import mldbg
from mldbg import Mode

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

from tests.tiny import Tokens  # noqa: E402
from transformers import (  # noqa: E402
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from mldbg.transformers import DebuggerCallback  # noqa: E402

N_TRAIN, N_EVAL = 64, 32


def _bert(**config) -> BertForSequenceClassification:
    torch.manual_seed(0)
    return BertForSequenceClassification(
        BertConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, vocab_size=100,
            **config,
        )
    )  # fmt: skip


class LossKeeper(Trainer):
    """Keeps the loss of every micro-batch the model returned (the reference)."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss, outputs = super().compute_loss(model, inputs, True, num_items_in_batch)
        if model.training:  # the outputs' loss (a tuple's first element with return_dict=False)
            self.micro_losses.append(
                float((outputs[0] if isinstance(outputs, tuple) else outputs.loss).detach())
            )
        return (loss, outputs) if return_outputs else loss


class Pace(TrainerCallback):
    """Slows each step a little so the watcher child keeps pace in the stop test."""

    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(0.02)


def _args(tmp_path, **kwargs) -> TrainingArguments:
    settings = dict(
        output_dir=str(tmp_path / "hf"), per_device_train_batch_size=8, per_device_eval_batch_size=16,
        num_train_epochs=2, learning_rate=1e-3, save_strategy="no", report_to=[], use_cpu=True,
        disable_tqdm=True, logging_strategy="no",
    )  # fmt: skip
    return TrainingArguments(**{**settings, **kwargs})


def test_records_the_model_with_accumulated_steps_and_evaluation(tmp_path):
    model = _bert()
    cb = DebuggerCallback(
        tmp_path / "run", save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["weights", "biases", "gradients", "losses"],
    )  # fmt: skip
    args = _args(tmp_path, per_device_train_batch_size=4, gradient_accumulation_steps=2, num_train_epochs=3,
                 eval_strategy="epoch")  # fmt: skip
    trainer = LossKeeper(model=model, args=args, train_dataset=Tokens(N_TRAIN), eval_dataset=Tokens(N_EVAL, 1),
                         callbacks=[cb])  # fmt: skip
    trainer.micro_losses = []
    trainer.train()

    trial = mldbg.create_trial(tmp_path / "run")
    assert trial.loaded_all_steps  # closed at the end of train()
    train_steps = [s for s in trial.steps() if trial.mode(s) == Mode.TRAIN]  # global steps
    eval_steps = [s for s in trial.steps() if trial.mode(s) == Mode.EVAL]
    # two micro-batches per optimizer step: one step, as the Trainer counts them
    assert len(train_steps) == trainer.state.global_step == 3 * N_TRAIN // 8
    assert len(eval_steps) == 3 * N_EVAL // 16  # each evaluation batch is an EVAL step
    assert eval_steps[:2] == [8, 9]  # the first evaluation follows the first epoch's 8 steps
    loss = trial.tensor("loss")
    recorded = [float(loss.value(s)) for s in train_steps]
    np.testing.assert_allclose(recorded, np.reshape(trainer.micro_losses, (-1, 2)).mean(axis=1), rtol=1e-5)
    evaluations = [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h]
    eval_losses = np.reshape([float(loss.value(s)) for s in eval_steps], (3, 2)).mean(axis=1)
    np.testing.assert_allclose(eval_losses, evaluations, rtol=1e-5)  # equal batches: the mean
    # the last evaluation ran after the last optimizer step: its weights are the final ones
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(trial.tensor(name).value(eval_steps[-1]), p.detach().numpy())
    grads = trial.tensor_names(collection="gradients")
    assert len(grads) == len(list(model.parameters()))
    assert trial.tensor(grads[0]).steps(mode=Mode.TRAIN) == list(range(len(train_steps)))


def _errors(findings: list[mldbg.Finding]) -> list[mldbg.Finding]:
    return [f for f in findings if f.severity == "error"]


def test_default_rules_find_a_diverging_run_and_keep_quiet_on_a_healthy_one(tmp_path):
    # BERT's own initializer_range=0.02 (its key bias gets no gradient but float noise, its
    # query/key gradients are ~1e-6: healthy; see tests/rules/test_transformer_quiet.py)
    runs = {}
    for name, lr in (("healthy", 1e-3), ("diverging", 1e3)):
        trainer = Trainer(
            model=_bert(), args=_args(tmp_path / name, learning_rate=lr),
            train_dataset=Tokens(N_TRAIN), callbacks=[DebuggerCallback(tmp_path / name / "run")],
        )  # fmt: skip
        trainer.train()
        runs[name] = mldbg.check(tmp_path / name / "run")
    assert _errors(runs["healthy"]) == []
    assert {"tensor_variance", "exploding_tensor"} & {f.rule for f in _errors(runs["diverging"])}


def test_a_stop_action_ends_train_early_and_cleanly(tmp_path, caplog):
    from mldbg.actions import StopTraining

    cb = DebuggerCallback(
        tmp_path / "run", flush_seconds=0.05, rules=["tensor_variance"], actions=[StopTraining(on="finding")],
    )  # fmt: skip
    args = _args(tmp_path, learning_rate=1e3, max_steps=300)
    trainer = Trainer(model=_bert(), args=args, train_dataset=Tokens(N_TRAIN), callbacks=[cb, Pace()])
    with caplog.at_level(logging.WARNING, logger="mldbg"):
        trainer.train()  # returns: no TrainingStopped reaches the caller
    assert cb.stopped
    assert trainer.state.global_step < 300
    assert any("stopped the training" in r.getMessage() for r in caplog.records)
    trial = mldbg.create_trial(tmp_path / "run")
    assert trial.loaded_all_steps
    assert trial.steps()[-1] == trainer.state.global_step - 1  # the step the stop ended


class OwnLoss(Trainer):
    """A custom `compute_loss`: the model is called without labels, so its outputs hold no loss."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        loss = torch.nn.functional.cross_entropy(outputs.logits, labels)
        return (loss, outputs) if return_outputs else loss


def test_without_a_loss_in_the_outputs_the_logged_losses_are_recorded(tmp_path):
    cb = DebuggerCallback(
        tmp_path / "run", save_config=mldbg.SaveConfig(save_interval=1), include_collections=["losses"]
    )
    args = _args(
        tmp_path, logging_strategy="steps", logging_steps=1, eval_strategy="epoch", num_train_epochs=1
    )
    trainer = OwnLoss(model=_bert(), args=args, train_dataset=Tokens(N_TRAIN), eval_dataset=Tokens(N_EVAL, 1),
                      callbacks=[cb])  # fmt: skip
    trainer.train()
    trial = mldbg.create_trial(tmp_path / "run")
    loss = trial.tensor("loss")
    train_steps = [s for s in loss.steps() if trial.mode(s) == Mode.TRAIN]
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(train_steps) == len(logged) == N_TRAIN // 8
    np.testing.assert_allclose([float(loss.value(s)) for s in train_steps], logged, rtol=1e-5)
    eval_steps = [s for s in loss.steps() if trial.mode(s) == Mode.EVAL]
    evaluation = [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h]
    assert len(eval_steps) == 1  # the evaluation's loss, at its last step
    assert float(loss.value(eval_steps[0])) == pytest.approx(evaluation[0], rel=1e-5)


class Shifted(torch.utils.data.Dataset):
    """Token sequences that count up (mod the vocabulary): a causal LM learns the next one."""

    def __init__(self, n: int, seed: int = 0, length: int = 16, vocabulary: int = 64):
        g = torch.Generator().manual_seed(seed)
        self.ids = (torch.randint(0, vocabulary, (n, 1), generator=g) + torch.arange(length)) % vocabulary

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=32, bos_token_id=0, eos_token_id=0
    )
    return GPT2LMHeadModel(config)


def test_a_causal_lm_with_accumulation_clipping_smoothing_evaluation_and_checkpoints(tmp_path):
    """GPT-2 with `label_smoothing_factor` (the Trainer computes the loss: the outputs hold
    none, so the logged losses are recorded), evaluations every 2 steps, checkpoints saved
    with the hooks on the model, then `evaluate()` and `predict()` after `train()`."""
    cb = DebuggerCallback(
        tmp_path / "run",
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["weights", "losses"],
    )
    args = _args(
        tmp_path, per_device_train_batch_size=2, gradient_accumulation_steps=4, num_train_epochs=1,
        eval_strategy="steps", eval_steps=2, logging_strategy="steps", logging_steps=1, max_grad_norm=0.5,
        save_strategy="steps", save_steps=2, label_smoothing_factor=0.1, per_device_eval_batch_size=8,
    )  # fmt: skip
    model = _gpt2()
    trainer = Trainer(
        model=model, args=args, train_dataset=Shifted(32), eval_dataset=Shifted(16, 1), callbacks=[cb]
    )
    trainer.train()
    assert trainer.state.global_step == 4  # 32 samples / (2 x 4 accumulated)
    assert sorted(p.name for p in (tmp_path / "hf").glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    trial = mldbg.create_trial(tmp_path / "run")
    assert trial.loaded_all_steps
    modes = [trial.mode(s).name for s in trial.steps()]
    assert modes == ["TRAIN"] * 2 + ["EVAL"] * 2 + ["TRAIN"] * 2 + ["EVAL"] * 2
    loss = trial.tensor("loss")
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    recorded = [float(loss.value(s)) for s in trial.steps(mode=None) if trial.mode(s) == Mode.TRAIN]
    np.testing.assert_allclose(recorded, logged, rtol=1e-5)  # the smoothed loss the Trainer logged
    evaluations = [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h]
    eval_steps = [s for s in loss.steps() if trial.mode(s) == Mode.EVAL]
    assert eval_steps == [3, 7]  # each evaluation's loss, at its last step
    np.testing.assert_allclose([float(loss.value(s)) for s in eval_steps], evaluations, rtol=1e-5)

    # evaluate() and predict() after train() continue the run (EVAL, then PREDICT steps),
    # closed at their end
    final = trainer.evaluate()["eval_loss"]
    predicted = trainer.predict(Shifted(8, 2)).metrics["test_loss"]
    trial = mldbg.create_trial(tmp_path / "run")
    assert trial.loaded_all_steps
    assert [trial.mode(s).name for s in trial.steps()] == modes + ["EVAL"] * 2 + ["PREDICT"]
    assert float(trial.tensor("loss").value(9)) == pytest.approx(final, rel=1e-5)  # its last batch
    assert float(trial.tensor("loss").value(10)) == pytest.approx(predicted, rel=1e-5)
    for name in trial.tensor_names(collection="weights"):
        np.testing.assert_array_equal(
            trial.tensor(name).value(10), model.get_parameter(name).detach().numpy()
        )


def test_a_model_returning_tuples_a_copied_model_and_a_copied_callback(tmp_path):
    import copy
    import pickle

    cb = DebuggerCallback(
        tmp_path / "run", save_config=mldbg.SaveConfig(save_interval=1), include_collections=["losses"]
    )
    model = _bert(return_dict=False)  # outputs (loss, logits): the loss is the first element

    class Copying(LossKeeper):
        def training_step(self, model, inputs, num_items_in_batch=None):
            self.copies.append(copy.deepcopy(model))  # an EMA or a swap: mldbg's hooks left out
            return super().training_step(model, inputs, num_items_in_batch)

    args = _args(tmp_path, num_train_epochs=1, eval_strategy="epoch")
    trainer = Copying(model=model, args=args, train_dataset=Tokens(N_TRAIN), eval_dataset=Tokens(N_EVAL, 1),
                      callbacks=[cb])  # fmt: skip
    trainer.micro_losses, trainer.copies = [], []
    trainer.train()
    trial = mldbg.create_trial(tmp_path / "run")
    loss = trial.tensor("loss")
    train_steps = trial.steps(mode=Mode.TRAIN)
    assert (
        [s for s in loss.steps() if trial.mode(s) == Mode.TRAIN] == train_steps == list(range(N_TRAIN // 8))
    )
    np.testing.assert_allclose([float(loss.value(s)) for s in train_steps], trainer.micro_losses, rtol=1e-6)
    assert len([s for s in loss.steps() if trial.mode(s) == Mode.EVAL]) == N_EVAL // 16
    steps = trial.steps()
    copied = trainer.copies[-1].eval()
    with torch.no_grad():
        copied(**{k: v[None] for k, v in Tokens(1)[0].items()})  # a copy records nothing
    assert b"mldbg" not in pickle.dumps(model)  # the callback's hooks are left out (issue #29)
    assert mldbg.create_trial(tmp_path / "run").steps() == steps
    twin = pickle.loads(pickle.dumps(cb))  # the settings travel, not the closed run
    assert twin.hook is None and twin.out_dir == cb.out_dir


def test_predict_is_predict_and_forwards_outside_the_trainer_are_not_recorded(tmp_path):
    """`predict()` batches are PREDICT steps (their own mode steps, the test loss at the last);
    a `model.generate()` or a plain call of the model outside the Trainer's loops (before
    `train()`, after it, between `evaluate()` and `predict()`) records nothing and does not
    reopen the closed run; `evaluate()` and `predict()` still do."""
    cb = DebuggerCallback(
        tmp_path / "run", save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["weights", "losses", "outputs"],
    )  # fmt: skip
    args = _args(tmp_path, per_device_train_batch_size=8, num_train_epochs=1, eval_strategy="epoch",
                 per_device_eval_batch_size=8)  # fmt: skip
    model = _gpt2()
    trainer = Trainer(
        model=model, args=args, train_dataset=Shifted(32), eval_dataset=Shifted(16, 1), callbacks=[cb]
    )
    prompt = Shifted(1, 3)[0]["input_ids"][None, :4]
    model.eval()
    with torch.no_grad():
        model(input_ids=prompt, labels=prompt)  # before train(): the run is open, nothing recorded
    model.train()
    trainer.train()
    trial = mldbg.create_trial(tmp_path / "run")
    modes = [trial.mode(s).name for s in trial.steps()]
    assert modes == ["TRAIN"] * 4 + ["EVAL"] * 2 and trial.loaded_all_steps

    def generate() -> None:
        model.eval()
        with torch.no_grad():
            out = model.generate(prompt, max_new_tokens=5, do_sample=False, pad_token_id=0)
        assert out.shape == (1, 9)  # five forwards of the model

    generate()  # after train(): not recorded, the run stays closed
    trial = mldbg.create_trial(tmp_path / "run")
    assert [trial.mode(s).name for s in trial.steps()] == modes and trial.loaded_all_steps
    final = trainer.evaluate()["eval_loss"]
    generate()  # between evaluate() and predict()
    predicted = trainer.predict(Shifted(16, 2))
    generate()  # after predict()
    trial = mldbg.create_trial(tmp_path / "run")
    assert trial.loaded_all_steps
    assert [trial.mode(s).name for s in trial.steps()] == modes + ["EVAL"] * 2 + ["PREDICT"] * 2
    assert trial.steps(mode=Mode.PREDICT) == [0, 1]  # the predict batches count on their own
    predict_steps = [s for s in trial.steps() if trial.mode(s) == Mode.PREDICT]
    loss = trial.tensor("loss")
    eval_steps = [s for s in trial.steps() if trial.mode(s) == Mode.EVAL][-2:]
    # equal batches: each pass's loss is the mean of its batches' losses
    assert np.mean([float(loss.value(s)) for s in predict_steps]) == pytest.approx(
        predicted.metrics["test_loss"], rel=1e-5
    )
    assert np.mean([float(loss.value(s)) for s in eval_steps]) == pytest.approx(final, rel=1e-5)
    # the recorded outputs of the predict batches are the logits predict() returned
    logits = np.concatenate([trial.tensor("lm_head_output_0").value(s) for s in predict_steps])
    returned = predicted.predictions[0] if isinstance(predicted.predictions, tuple) else predicted.predictions
    np.testing.assert_allclose(logits, returned, rtol=1e-5, atol=1e-5)


def test_a_trainer_that_keeps_its_best_model_says_so(tmp_path):
    """`load_best_model_at_end` keeps the best evaluation's checkpoint (and `EarlyStoppingCallback`
    needs it): the callback records `early_stopping`, which `overfit` reads as a training that
    stops early (the epochs past the best are its patience). Without it, nothing is recorded."""
    for keep in (True, False):
        path = tmp_path / f"keep_{keep}"
        args = _args(tmp_path / str(keep), eval_strategy="epoch", save_strategy="epoch" if keep else "no",
                     load_best_model_at_end=keep)  # fmt: skip
        trainer = Trainer(model=_bert(), args=args, train_dataset=Tokens(N_TRAIN), eval_dataset=Tokens(N_EVAL, 1),
                          callbacks=[DebuggerCallback(path)])  # fmt: skip
        trainer.train()
        trial = mldbg.create_trial(str(path))
        assert trial.has_tensor("early_stopping") == keep
        if keep:
            assert trial.tensor("early_stopping").steps(Mode.TRAIN)[0] == 0
