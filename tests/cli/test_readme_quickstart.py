"""The README's quick start is true: its training loop (with an eval pass) and its trial
lines run as written, on a tiny real model, and give the steps its comments promise."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"

SETUP = """
import torch
from torch import nn
torch.set_num_threads(1)
torch.manual_seed(0)
x_all = torch.randn(1000, 10)
y_all = (x_all[:, 0] > 0).long()
train_loader = [(x_all[i : i + 10], y_all[i : i + 10]) for i in range(0, 1000, 10)]  # 100 batches
val_loader = [(x_all[i : i + 50], y_all[i : i + 50]) for i in range(0, 250, 50)]  # 5 batches
model = nn.Sequential()
model.add_module("fc1", nn.Linear(10, 16))
model.add_module("relu1", nn.ReLU())
model.add_module("out", nn.Linear(16, 2))
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""

CHECKS = """
assert trial.steps() == list(range(210))
assert trial.steps(mode=mldbg.Mode.TRAIN) == list(range(200))
assert trial.steps(mode=mldbg.Mode.EVAL) == list(range(10))
assert (trial.mode(100), trial.mode_step(100)) == (mldbg.Mode.EVAL, 0)
assert (trial.mode(105), trial.mode_step(105)) == (mldbg.Mode.TRAIN, 100)
assert loss.value(105) == loss.value(100, mode=mldbg.Mode.TRAIN)
from mldbg.errors import TensorUnavailableForStep
try:
    trial.tensor("gradient/fc1.weight").value(100)
    raise AssertionError("a gradient at an EVAL step")
except TensorUnavailableForStep as e:
    assert "step 100 is an EVAL step (eval step 0)" in str(e) and "saved in TRAIN steps only" in str(e), e
print("quick start ok")
"""


def quick_start_blocks() -> list[str]:
    section = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_quick_start_runs_as_written(tmp_path):
    blocks = quick_start_blocks()
    loop = blocks[0]  # the two lines in a loop; the `with` form beside it records the same way
    read = next(b for b in blocks if "create_trial" in b)
    script = tmp_path / "quick_start.py"
    script.write_text(SETUP + textwrap.dedent(loop) + textwrap.dedent(read) + CHECKS)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "quick start ok" in done.stdout
    show = [sys.executable, "-m", "mldbg.cli.main", "show", "runs/exp1", "CrossEntropyLoss_output_0"]
    by_global = subprocess.run([*show, "--step", "105"], cwd=tmp_path, capture_output=True, text=True)
    by_train = subprocess.run(
        [*show, "--mode", "train", "--step", "100"], cwd=tmp_path, capture_output=True, text=True
    )
    assert by_global.returncode == 0 and by_train.returncode == 0, by_global.stderr + by_train.stderr
    assert by_global.stdout.splitlines()[1:] == by_train.stdout.splitlines()[1:]  # the same value
