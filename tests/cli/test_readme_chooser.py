"""The README's opening chooser is true: each row's line, copied from the README as written,
records a tiny real training of that shape (a loss module; a functional loss and a model that
returns its loss; Lightning; a Hugging Face `Trainer`; `mldbg run` with no code change), with
the loss at every training step (issue #29 item 7, issue #27's README requirement)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import mldbg

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# the scripts run in their own folder: they import this checkout's mldbg
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]),
}
STEPS = 12


def chooser() -> list[str]:
    """The code of each row of the chooser table, in order (the second column's first span)."""
    section = README.read_text().split("## Which way fits your script", 1)[1].split("\n## ", 1)[0]
    table = section.split("| --- |", 1)[1]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "`" in line.split("|")[2]]
    return [re.search(r"`([^`]+)`", row.split("|")[2]).group(1) for row in rows]


def test_the_chooser_has_five_ways_near_the_top():
    text = README.read_text()
    assert text.index("## Which way fits your script") < text.index("## Install")
    assert text.index("mldbg run") < 1500  # the no-code way is seen in the first screenful
    assert len(chooser()) == 5


def run_script(path: Path, text: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    path.write_text(textwrap.dedent(text))
    done = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=path.parent, env=ENV)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done


PYTORCH = """
import torch, mldbg.torch
import torch.nn.functional as F
from torch import nn
torch.set_num_threads(1)
torch.manual_seed(0)
x, y = torch.randn(64, 8), (torch.randn(64) > 0).long()
{model}
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
{line}
losses = []
for step in range({steps}):
    optimizer.zero_grad()
    {loss}
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
hook.close()
print(losses)
"""
MLP = "model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))"
RETURNS_LOSS = """
class GPTish(nn.Module):  # nanoGPT's shape: logits, loss = model(x, targets)
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 2)
    def forward(self, x, targets=None):
        logits = self.fc2(F.relu(self.fc1(x)))
        return logits, (None if targets is None else F.cross_entropy(logits, targets))
model = GPTish()
"""


def _recorded(out: Path, name: str, printed: str) -> None:
    trial = mldbg.create_trial(out)
    loss = trial.tensor(name)
    steps = loss.steps(mode=mldbg.Mode.TRAIN)
    assert steps == list(range(STEPS))
    want = eval(printed.strip().splitlines()[-1])  # the losses the script computed
    got = [float(loss.value(s, mode=mldbg.Mode.TRAIN)) for s in steps]
    assert np.allclose(got, want, rtol=1e-5)


def test_a_loss_module(tmp_path):
    line = chooser()[0].replace("runs/exp1", str(tmp_path / "run"))
    done = run_script(tmp_path / "t.py", PYTORCH.format(model=MLP, line=line, steps=STEPS,
                                                         loss="loss = loss_fn(model(x), y)"))  # fmt: skip
    _recorded(tmp_path / "run", "CrossEntropyLoss_output_0", done.stdout)


@pytest.mark.parametrize(
    "model, loss",
    [(MLP, "loss = F.cross_entropy(model(x), y)"), (RETURNS_LOSS, "logits, loss = model(x, y)")],
    ids=["functional loss", "the model returns its loss"],
)
def test_a_loss_of_a_function_or_of_the_model(tmp_path, model, loss):
    line = chooser()[1].replace("runs/exp1", str(tmp_path / "run"))
    assert "register_loss" not in line
    done = run_script(tmp_path / "t.py", PYTORCH.format(model=model, line=line, steps=STEPS, loss=loss))
    _recorded(tmp_path / "run", "loss", done.stdout)


def test_lightning(tmp_path):
    pytest.importorskip("lightning")
    line = chooser()[2].replace("runs/exp1", str(tmp_path / "run"))
    args = (
        f"max_steps={STEPS}, logger=False, enable_checkpointing=False, enable_progress_bar=False, "
        "enable_model_summary=False, accelerator='cpu'"
    )
    script = f"""
    import torch, mldbg.lightning
    import lightning as L
    from lightning import Trainer
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(0)
    class AutoEncoder(L.LightningModule):  # Lightning's README autoencoder, small
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(8, 4), nn.ReLU())
            self.decoder = nn.Linear(4, 8)
        def training_step(self, batch, batch_idx):
            (x,) = batch
            return nn.functional.mse_loss(self.decoder(self.encoder(x)), x)
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)
    data = DataLoader(TensorDataset(torch.randn(64 * {STEPS}, 8)), batch_size=64)
    trainer = {line.replace("...", args)}
    trainer.fit(AutoEncoder(), data)
    """
    run_script(tmp_path / "t.py", script)
    trial = mldbg.create_trial(tmp_path / "run")
    assert trial.steps(mode=mldbg.Mode.TRAIN) == list(range(STEPS))
    assert trial.tensor_names(collection="losses")
    names = set(trial.tensor_names(collection="weights"))
    assert any(n.startswith("encoder") for n in names) and any(n.startswith("decoder") for n in names)


def test_hugging_face_trainer(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    line = chooser()[3].replace("runs/exp1", str(tmp_path / "run"))
    args = "model=model, args=args, train_dataset=data"
    script = f"""
    import torch, mldbg.transformers
    from torch import nn
    from transformers import Trainer, TrainingArguments
    torch.manual_seed(0)
    class Regressor(nn.Module):  # any module that returns {{"loss": ...}} trains under the Trainer
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 1)
        def forward(self, x, labels=None):
            out = self.fc(x).squeeze(-1)
            return {{"loss": nn.functional.mse_loss(out, labels), "logits": out}}
    xs = torch.randn(8 * {STEPS}, 8)
    data = [{{"x": xs[i], "labels": xs[i].sum()}} for i in range(len(xs))]
    model = Regressor()
    args = TrainingArguments(output_dir="hf", per_device_train_batch_size=8, num_train_epochs=1,
                             save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, logging_strategy="no")
    trainer = {line.replace("...", args)}
    trainer.train()
    """
    run_script(tmp_path / "t.py", script)
    trial = mldbg.create_trial(tmp_path / "run")
    assert trial.steps(mode=mldbg.Mode.TRAIN) == list(range(STEPS))
    assert trial.tensor_names(collection="losses")


def test_no_code_change(tmp_path):
    line = chooser()[4]
    assert line.startswith("mldbg run ") and " -- python train.py" in line
    (tmp_path / "train.py").write_text(textwrap.dedent(PYTORCH.format(
        model="import sys\n" + MLP, line="lr = float(sys.argv[sys.argv.index('--lr') + 1]); hook = None",
        steps=STEPS, loss="loss = F.cross_entropy(model(x), y)",
    ).replace("hook.close()", "")))  # fmt: skip
    argv = line.split()[2:]  # after "mldbg run"
    argv[argv.index("python")] = sys.executable
    done = subprocess.run([sys.executable, "-m", "mldbg.cli.main", "run", *argv], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=ENV)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    _recorded(tmp_path / "runs" / "exp1", "loss", done.stdout)
    assert "rules ran over" in done.stderr
