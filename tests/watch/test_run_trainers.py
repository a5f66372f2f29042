"""`mldbg run` on unmodified scripts that train through a framework's `Trainer` (issue #29,
item 2): the Lightning README's autoencoder, whose `training_step` calls `self.encoder` and
`self.decoder` and never `self(...)`. The whole LightningModule is recorded, as
`mldbg.lightning.DebuggerCallback` records it, and one line says what was taken as the model."""

import subprocess
import sys
import textwrap

import pytest

import mldbg
from mldbg import Mode

pytest.importorskip("lightning")

AUTOENCODER = """
import sys
import torch
import lightning as L
from torch import nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class LitAutoEncoder(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 3))
        self.decoder = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 64))

    def forward(self, x):
        return self.encoder(x)

    def training_step(self, batch, batch_idx):
        x, _ = batch
        x = x.view(x.size(0), -1)
        z = self.encoder(x)
        x_hat = self.decoder(z)
        loss = F.mse_loss(x_hat, x)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


data = TensorDataset(torch.rand(64, 8, 8), torch.zeros(64))
trainer = L.Trainer(max_steps=int(sys.argv[1]), accelerator="cpu", logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)
trainer.fit(model=LitAutoEncoder(), train_dataloaders=DataLoader(data, batch_size=8))
print("fitted", flush=True)
"""


def test_lightning_records_the_whole_module_and_says_so(tmp_path):
    train = tmp_path / "lit_autoencoder.py"
    train.write_text(textwrap.dedent(AUTOENCODER))
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "run", "--out", str(out), "--save-interval", "1", "--",
         sys.executable, str(train), "6"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "fitted"
    said = [line for line in done.stderr.splitlines() if line.startswith("mldbg run: the model is")]
    assert len(said) == 1 and "LitAutoEncoder (the LightningModule" in said[0], done.stderr
    assert "recorded whole" in said[0]
    trial = mldbg.create_trial(out)
    names = set(trial.tensor_names())
    # both submodules, under their names in the LightningModule (no prefix, no encoder alone)
    assert {"encoder.0.weight", "decoder.2.weight", "gradient/decoder.0.weight"} <= names, sorted(names)
    assert "loss" in trial.tensor_names(collection="losses")
    assert trial.steps(Mode.TRAIN) == list(range(6))  # steps from Lightning's loop


HF_GPT2 = """
import sys
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

torch.manual_seed(0)
config = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16, bos_token_id=0, eos_token_id=0)
model = GPT2LMHeadModel(config)


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


args = TrainingArguments(output_dir=sys.argv[1], max_steps=4, per_device_train_batch_size=8, save_strategy="no",
                         report_to=[], use_cpu=True, disable_tqdm=True, logging_strategy="no")
Trainer(model=model, args=args, train_dataset=Tokens()).train()
print("trained", flush=True)
"""


def test_hugging_face_trainer_gets_the_callbacks_recording(tmp_path):
    pytest.importorskip("transformers")
    train = tmp_path / "train_gpt2.py"
    train.write_text(textwrap.dedent(HF_GPT2))
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "run", "--out", str(out), "--save-interval", "1", "--",
         sys.executable, str(train), str(tmp_path / "hf")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "trained"
    said = [line for line in done.stderr.splitlines() if line.startswith("mldbg run: the model is")]
    assert len(said) == 1 and "GPT2LMHeadModel (the Trainer's model)" in said[0], done.stderr
    trial = mldbg.create_trial(out)
    assert trial.steps(Mode.TRAIN) == list(range(4))  # the Trainer's optimizer steps
    assert "loss" in trial.tensor_names(collection="losses")  # the outputs' loss, as the callback saves it
    assert any(n.startswith("transformer.h.0.") for n in trial.tensor_names(collection="weights"))


def test_a_plain_loop_says_which_module_it_took_as_the_model(tmp_path):
    from tests.watch.test_run import PLAIN

    train = tmp_path / "train.py"
    train.write_text(textwrap.dedent(PLAIN))
    done = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "run", "--out", str(tmp_path / "run"), "--",
         sys.executable, str(train), "0.1", "3"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("mldbg run: the model is")]
    assert len(said) == 1 and "Sequential (the first module" in said[0], done.stderr
