"""`mldbg ls` says, per mode, how many steps were saved of those the training went through
(issue #29: "eval 1 steps" after two evaluation passes, the second not saved)."""

import json

import torch
from click.testing import CliRunner
from torch import nn

import mldbg
from mldbg import Mode
from mldbg.cli.main import cli
from mldbg.store import layout, open_store
from mldbg.torch import Hook


def train_and_evaluate_twice(out) -> None:
    """A plain loop with the hook: 12 training steps, an evaluation pass of 4 batches after the
    6th and the 12th; the evaluation saves its first 4 steps only (the first pass)."""
    torch.manual_seed(0)
    model, loss_fn = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), nn.CrossEntropyLoss()
    save = mldbg.SaveConfig(
        save_interval=5, mode_save_configs={Mode.EVAL: mldbg.SaveConfig(save_steps=[0, 1, 2, 3])}
    )
    hook = Hook(out, save_config=save, include_collections=["losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    for step in range(12):
        model.train()
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        if step % 6 == 5:
            model.eval()
            with torch.no_grad():
                for batch in range(4):
                    loss_fn(model(x[batch * 8 : batch * 8 + 8]), y[batch * 8 : batch * 8 + 8])
    hook.close()


def test_ls_says_saved_of_seen_per_mode(tmp_path):
    train_and_evaluate_twice(tmp_path)
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps(Mode.TRAIN) and len(trial.steps(Mode.EVAL)) == 4  # the first pass only
    out = CliRunner().invoke(cli, ["ls", str(tmp_path)])
    assert out.exit_code == 0, out.output
    n_train = len(trial.steps(Mode.TRAIN))
    assert f"train    {n_train} of 12 steps saved" in out.output
    assert "eval     4 of 8 steps saved" in out.output
    assert "predict" not in out.output


def test_a_run_whose_end_marker_does_not_count_says_saved_only(tmp_path):
    """A run recorded by an earlier mldbg (its END without `mode_steps`): the saved steps."""
    train_and_evaluate_twice(tmp_path)
    store = open_store(str(tmp_path))
    key = layout.end_key("worker_0")
    end = json.loads(store.read(key))
    del end["mode_steps"]
    store.write(key, [json.dumps(end).encode()])
    out = CliRunner().invoke(cli, ["ls", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "eval     4 steps saved" in out.output and " of " not in out.output.split("collections:")[0]
